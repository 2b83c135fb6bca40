/*
 * daemon/tls.c — TLS identities, an nng TLS engine that remembers who the peer
 * is, and the plain-transport policy.
 *
 * How it works. rt_tls_load reads the CA, certificate and key PEM files once,
 * checks them with mbedTLS (the key is the certificate's, the certificate chains
 * to the CA) and keeps the PEM text; every listener and dialler gets its own
 * nng_tls_config built from that text, with peer authentication REQUIRED on
 * both sides.
 *
 * Peer names. nng 1.5.2's TLS engine (mbedTLS) verifies the peer but offers no
 * way to read which certificate a pipe presented. nng lets a program register
 * its own engine (nng/supplemental/tls/engine.h), so this file is one: the
 * same mbedTLS calls as nng's engine, plus, when a server-side handshake
 * completes, the verified certificate's CN is recorded under the connection's
 * (local, remote) TCP addresses, and removed when the connection is freed. A
 * live TCP connection is the only one with that address pair, and a pipe's
 * NNG_OPT_LOCADDR / NNG_OPT_REMADDR are those of its connection, so
 * rt_peer_of finds the name of the certificate behind any message. The engine
 * reads the addresses through the stream handle nng passes to conn_init (in
 * nng 1.5 the TLS connection itself, an nng_stream whose options are its TCP
 * stream's); if that ever fails the handshake is refused: a name is never
 * guessed. With an nng that has NNG_OPT_TLS_PEER_CN none of this is compiled
 * and the pipe option is read instead.
 *
 * Randomness for TLS comes from getrandom(2).
 */
#include "tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <nng/supplemental/tls/tls.h>

#include <mbedtls/net_sockets.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

#ifndef NNG_OPT_TLS_PEER_CN
#define RT_OWN_ENGINE 1
#include <nng/supplemental/tls/engine.h>
#endif

#define PEM_MAX (1u << 20)

struct rt_tls {
	char *ca_pem, *cert_pem, *key_pem;
	char name[RT_TLS_NAME_MAX];
};

/* --------------------------------------------------------- names ---- */

/* The CN of an X.509 name, if it is printable ASCII and fits; else "". */
static void cn_of(const mbedtls_x509_name *n, char *out, size_t cap)
{
	out[0] = 0;
	for (; n; n = n->next) {
		size_t i;
		if (MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &n->oid) != 0)
			continue;
		if (n->val.len == 0 || n->val.len >= cap)
			return;
		for (i = 0; i < n->val.len; i++)
			if (n->val.p[i] < 0x21 || n->val.p[i] > 0x7e)
				return;
		memcpy(out, n->val.p, n->val.len);
		out[n->val.len] = 0;
		return;
	}
}

int rt_name_agent_id(const char *name, uint32_t *id)
{
	unsigned long long v = 0;
	const char *p;
	if (!name || strncmp(name, "agent-", 6) != 0 || !name[6] || name[6] == '0')
		return 0;
	for (p = name + 6; *p; p++) {
		if (*p < '0' || *p > '9' || p - name > 6 + 10)
			return 0;
		v = v * 10 + (unsigned)(*p - '0');
	}
	if (v == 0 || v > UINT32_MAX)
		return 0;
	*id = (uint32_t)v;
	return 1;
}

int rt_name_is_operator(const char *name)
{
	return name && strncmp(name, "operator-", 9) == 0 && name[9];
}

int rt_name_is_coordinator(const char *name)
{
	return name && strcmp(name, RT_TLS_COORDINATOR_NAME) == 0;
}

/* ------------------------------------------------- the peer registry ---- */

#ifdef RT_OWN_ENGINE
struct reg_entry {
	nng_sockaddr loc, rem;
	const void *owner;
	char name[RT_TLS_NAME_MAX];
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct reg_entry *reg;
static size_t reg_len, reg_cap;

static int same_addr(const nng_sockaddr *a, const nng_sockaddr *b)
{
	if (a->s_family != b->s_family)
		return 0;
	if (a->s_family == NNG_AF_INET)
		return a->s_in.sa_addr == b->s_in.sa_addr && a->s_in.sa_port == b->s_in.sa_port;
	if (a->s_family == NNG_AF_INET6)
		return a->s_in6.sa_port == b->s_in6.sa_port &&
		       memcmp(a->s_in6.sa_addr, b->s_in6.sa_addr, 16) == 0;
	return 0;
}

static int reg_put(const nng_sockaddr *loc, const nng_sockaddr *rem, const void *owner,
		   const char *name)
{
	size_t i;
	int rc = 0;
	pthread_mutex_lock(&reg_mu);
	for (i = 0; i < reg_len; i++)
		if (same_addr(&reg[i].loc, loc) && same_addr(&reg[i].rem, rem))
			break; /* an older connection's entry not yet freed: replaced */
	if (i == reg_len) {
		if (reg_len == reg_cap) {
			size_t cap = reg_cap ? reg_cap * 2 : 64;
			struct reg_entry *n = realloc(reg, cap * sizeof *n);
			if (!n) {
				rc = -1;
				goto out;
			}
			reg = n;
			reg_cap = cap;
		}
		reg_len++;
	}
	reg[i].loc = *loc;
	reg[i].rem = *rem;
	reg[i].owner = owner;
	snprintf(reg[i].name, sizeof reg[i].name, "%s", name);
out:
	pthread_mutex_unlock(&reg_mu);
	return rc;
}

static void reg_drop(const void *owner)
{
	size_t i;
	pthread_mutex_lock(&reg_mu);
	for (i = 0; i < reg_len; i++)
		if (reg[i].owner == owner) {
			reg[i] = reg[--reg_len];
			break;
		}
	pthread_mutex_unlock(&reg_mu);
}

static int reg_get(const nng_sockaddr *loc, const nng_sockaddr *rem, char *name, size_t cap)
{
	size_t i;
	int found = 0;
	pthread_mutex_lock(&reg_mu);
	for (i = 0; i < reg_len && !found; i++)
		if (same_addr(&reg[i].loc, loc) && same_addr(&reg[i].rem, rem)) {
			snprintf(name, cap, "%s", reg[i].name);
			found = 1;
		}
	pthread_mutex_unlock(&reg_mu);
	return found;
}

/* ------------------------------------------------------ the engine ---- */

struct cert_pair {
	mbedtls_x509_crt crt;
	mbedtls_pk_context key;
	struct cert_pair *next;
};

struct nng_tls_engine_config {
	mbedtls_ssl_config cfg;
	mbedtls_x509_crt ca;
	mbedtls_x509_crl crl;
	char *server_name;
	struct cert_pair *pairs;
	int server;
};

struct nng_tls_engine_conn {
	void *tls;
	mbedtls_ssl_context ctx;
	int server;
	int have_addrs;
	nng_sockaddr loc, rem;
};

static int rng(void *arg, unsigned char *buf, size_t len)
{
	(void)arg;
	while (len) {
		ssize_t n = getrandom(buf, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return MBEDTLS_ERR_SSL_INTERNAL_ERROR;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int mk_err(int err)
{
	switch (err) {
	case MBEDTLS_ERR_SSL_NO_CLIENT_CERTIFICATE:
	case MBEDTLS_ERR_SSL_CA_CHAIN_REQUIRED:
	case MBEDTLS_ERR_SSL_PEER_VERIFY_FAILED:
	case MBEDTLS_ERR_SSL_NO_USABLE_CIPHERSUITE:
	case MBEDTLS_ERR_X509_CERT_VERIFY_FAILED:
		return NNG_EPEERAUTH;
	case MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY:
		return NNG_ECONNREFUSED;
	case MBEDTLS_ERR_SSL_ALLOC_FAILED:
		return NNG_ENOMEM;
	case MBEDTLS_ERR_SSL_TIMEOUT:
		return NNG_ETIMEDOUT;
	case MBEDTLS_ERR_SSL_CONN_EOF:
		return NNG_ECLOSED;
	default:
		return NNG_ECRYPTO;
	}
}

static int net_send(void *tls, const unsigned char *buf, size_t len)
{
	size_t sz = len;
	int rv = nng_tls_engine_send(tls, buf, &sz);
	if (rv == 0)
		return (int)sz;
	return rv == NNG_EAGAIN ? MBEDTLS_ERR_SSL_WANT_WRITE : MBEDTLS_ERR_NET_SEND_FAILED;
}

static int net_recv(void *tls, unsigned char *buf, size_t len)
{
	size_t sz = len;
	int rv = nng_tls_engine_recv(tls, buf, &sz);
	if (rv == 0)
		return (int)sz;
	return rv == NNG_EAGAIN ? MBEDTLS_ERR_SSL_WANT_READ : MBEDTLS_ERR_NET_RECV_FAILED;
}

static int conn_init(nng_tls_engine_conn *ec, void *tls, nng_tls_engine_config *cfg)
{
	int rv;
	ec->tls = tls;
	ec->server = cfg->server;
	mbedtls_ssl_init(&ec->ctx);
	mbedtls_ssl_set_bio(&ec->ctx, tls, net_send, net_recv, NULL);
	if ((rv = mbedtls_ssl_setup(&ec->ctx, &cfg->cfg)) != 0)
		return mk_err(rv);
	if (cfg->server_name && (rv = mbedtls_ssl_set_hostname(&ec->ctx, cfg->server_name)) != 0)
		return mk_err(rv);
	/* In nng 1.5 `tls` is the TLS connection, an nng_stream answering for its
	 * TCP stream's addresses (see the top of this file). */
	ec->have_addrs = nng_stream_get_addr(tls, NNG_OPT_LOCADDR, &ec->loc) == 0 &&
			 nng_stream_get_addr(tls, NNG_OPT_REMADDR, &ec->rem) == 0;
	return 0;
}

static void conn_fini(nng_tls_engine_conn *ec)
{
	reg_drop(ec);
	mbedtls_ssl_free(&ec->ctx);
}

static void conn_close(nng_tls_engine_conn *ec)
{
	(void)mbedtls_ssl_close_notify(&ec->ctx);
}

static int conn_recv(nng_tls_engine_conn *ec, uint8_t *buf, size_t *szp)
{
	int rv = mbedtls_ssl_read(&ec->ctx, buf, *szp);
	if (rv < 0)
		return rv == MBEDTLS_ERR_SSL_WANT_READ || rv == MBEDTLS_ERR_SSL_WANT_WRITE
			       ? NNG_EAGAIN
			       : mk_err(rv);
	*szp = (size_t)rv;
	return 0;
}

static int conn_send(nng_tls_engine_conn *ec, const uint8_t *buf, size_t *szp)
{
	int rv = mbedtls_ssl_write(&ec->ctx, buf, *szp);
	if (rv < 0)
		return rv == MBEDTLS_ERR_SSL_WANT_READ || rv == MBEDTLS_ERR_SSL_WANT_WRITE
			       ? NNG_EAGAIN
			       : mk_err(rv);
	*szp = (size_t)rv;
	return 0;
}

static _Atomic uint64_t refused_handshakes;

static int conn_handshake(nng_tls_engine_conn *ec)
{
	const mbedtls_x509_crt *peer;
	char name[RT_TLS_NAME_MAX];
	int rv = mbedtls_ssl_handshake(&ec->ctx);
	if (rv == MBEDTLS_ERR_SSL_WANT_READ || rv == MBEDTLS_ERR_SSL_WANT_WRITE)
		return NNG_EAGAIN;
	if (rv == 0 && !ec->server)
		return 0; /* the client checked the server's name (set_hostname) */
	if (rv == 0) {
		/* Server: remember whose verified certificate this connection carries. */
		peer = mbedtls_ssl_get_peer_cert(&ec->ctx);
		name[0] = 0;
		if (peer && mbedtls_ssl_get_verify_result(&ec->ctx) == 0 && ec->have_addrs)
			cn_of(&peer->subject, name, sizeof name);
		if (name[0] && reg_put(&ec->loc, &ec->rem, ec, name) == 0)
			return 0;
		rv = MBEDTLS_ERR_SSL_PEER_VERIFY_FAILED;
	}
	if (ec->server) /* a stranger, a plain client, a certificate of another CA */
		atomic_fetch_add_explicit(&refused_handshakes, 1, memory_order_relaxed);
	return mk_err(rv);
}

static bool conn_verified(nng_tls_engine_conn *ec)
{
	return mbedtls_ssl_get_verify_result(&ec->ctx) == 0;
}

static void config_fini(nng_tls_engine_config *cfg)
{
	struct cert_pair *p;
	mbedtls_ssl_config_free(&cfg->cfg);
	mbedtls_x509_crt_free(&cfg->ca);
	mbedtls_x509_crl_free(&cfg->crl);
	free(cfg->server_name);
	cfg->server_name = NULL;
	while ((p = cfg->pairs)) {
		cfg->pairs = p->next;
		mbedtls_x509_crt_free(&p->crt);
		mbedtls_pk_free(&p->key);
		free(p);
	}
}

static int config_init(nng_tls_engine_config *cfg, nng_tls_mode mode)
{
	int rv;
	cfg->server = mode == NNG_TLS_MODE_SERVER;
	mbedtls_ssl_config_init(&cfg->cfg);
	mbedtls_x509_crt_init(&cfg->ca);
	mbedtls_x509_crl_init(&cfg->crl);
	rv = mbedtls_ssl_config_defaults(&cfg->cfg,
					 cfg->server ? MBEDTLS_SSL_IS_SERVER : MBEDTLS_SSL_IS_CLIENT,
					 MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
	if (rv != 0) {
		config_fini(cfg);
		return mk_err(rv);
	}
	/* Fail closed: a peer must present a certificate of the CA, both ways. */
	mbedtls_ssl_conf_authmode(&cfg->cfg, MBEDTLS_SSL_VERIFY_REQUIRED);
	mbedtls_ssl_conf_min_version(&cfg->cfg, MBEDTLS_SSL_MAJOR_VERSION_3,
				     MBEDTLS_SSL_MINOR_VERSION_3);
	mbedtls_ssl_conf_max_version(&cfg->cfg, MBEDTLS_SSL_MAJOR_VERSION_3,
				     MBEDTLS_SSL_MINOR_VERSION_3);
	mbedtls_ssl_conf_rng(&cfg->cfg, rng, NULL);
	return 0;
}

static int config_server_name(nng_tls_engine_config *cfg, const char *name)
{
	char *dup = strdup(name);
	if (!dup)
		return NNG_ENOMEM;
	free(cfg->server_name);
	cfg->server_name = dup;
	return 0;
}

static int config_auth_mode(nng_tls_engine_config *cfg, nng_tls_auth_mode mode)
{
	/* nng asks for NONE on the default config of every TLS listener, which our
	 * own config replaces; whatever is asked, peers stay required to present a
	 * certificate of the CA (a config without a CA refuses every peer). */
	(void)mode;
	mbedtls_ssl_conf_authmode(&cfg->cfg, MBEDTLS_SSL_VERIFY_REQUIRED);
	return 0;
}

static int config_ca_chain(nng_tls_engine_config *cfg, const char *certs, const char *crl)
{
	int rv = mbedtls_x509_crt_parse(&cfg->ca, (const unsigned char *)certs, strlen(certs) + 1);
	if (rv != 0)
		return mk_err(rv);
	if (crl && (rv = mbedtls_x509_crl_parse(&cfg->crl, (const unsigned char *)crl,
						strlen(crl) + 1)) != 0)
		return mk_err(rv);
	mbedtls_ssl_conf_ca_chain(&cfg->cfg, &cfg->ca, crl ? &cfg->crl : NULL);
	return 0;
}

static int config_own_cert(nng_tls_engine_config *cfg, const char *cert, const char *key,
			   const char *pass)
{
	struct cert_pair *p = calloc(1, sizeof *p);
	int rv;
	if (!p)
		return NNG_ENOMEM;
	mbedtls_x509_crt_init(&p->crt);
	mbedtls_pk_init(&p->key);
	rv = mbedtls_x509_crt_parse(&p->crt, (const unsigned char *)cert, strlen(cert) + 1);
	if (rv == 0)
		rv = mbedtls_pk_parse_key(&p->key, (const unsigned char *)key, strlen(key) + 1,
					  (const unsigned char *)pass, pass ? strlen(pass) : 0);
	if (rv == 0)
		rv = mbedtls_ssl_conf_own_cert(&cfg->cfg, &p->crt, &p->key);
	if (rv != 0) {
		mbedtls_x509_crt_free(&p->crt);
		mbedtls_pk_free(&p->key);
		free(p);
		return mk_err(rv);
	}
	p->next = cfg->pairs;
	cfg->pairs = p;
	return 0;
}

static int config_version(nng_tls_engine_config *cfg, nng_tls_version lo, nng_tls_version hi)
{
	(void)cfg;
	/* TLS 1.2 only: what mbedTLS 2.28 does fully. */
	return lo <= NNG_TLS_1_2 && hi >= NNG_TLS_1_2 ? 0 : NNG_ENOTSUP;
}

static nng_tls_engine_config_ops config_ops = {
	.size = sizeof(nng_tls_engine_config),
	.init = config_init,
	.fini = config_fini,
	.server = config_server_name,
	.auth = config_auth_mode,
	.ca_chain = config_ca_chain,
	.own_cert = config_own_cert,
	.version = config_version,
};

static nng_tls_engine_conn_ops conn_ops = {
	.size = sizeof(nng_tls_engine_conn),
	.init = conn_init,
	.fini = conn_fini,
	.close = conn_close,
	.handshake = conn_handshake,
	.recv = conn_recv,
	.send = conn_send,
	.verified = conn_verified,
};

static const nng_tls_engine engine = {
	.version = NNG_TLS_ENGINE_VERSION,
	.config_ops = &config_ops,
	.conn_ops = &conn_ops,
	.name = "retrace-mbedtls",
	.description = "mbedTLS, recording verified peer names (daemon/tls.c)",
	.fips_mode = false,
};

static int engine_rv = -1;

static void engine_install(void)
{
	/* nng initialises itself (and registers its own engine) on first use: do
	 * that first, or it would replace ours later. */
	(void)nng_tls_engine_name();
	engine_rv = nng_tls_engine_register(&engine);
	if (engine_rv == 0 && strcmp(nng_tls_engine_name(), engine.name) != 0)
		engine_rv = NNG_ENOTSUP;
}
#endif /* RT_OWN_ENGINE */

uint64_t rt_tls_refused(void)
{
#ifdef RT_OWN_ENGINE
	return atomic_load_explicit(&refused_handshakes, memory_order_relaxed);
#else
	return 0;
#endif
}

static int engine_ready(void)
{
#ifdef RT_OWN_ENGINE
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, engine_install);
	return engine_rv;
#else
	return 0;
#endif
}

/* ------------------------------------------------------- identities ---- */

static char *read_pem(const char *path, const char *what, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	struct stat sb;
	char *buf;
	size_t n;
	if (!f) {
		snprintf(err, errlen, "cannot read the TLS %s %s: %s", what, path, strerror(errno));
		return NULL;
	}
	if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size <= 0 ||
	    (uint64_t)sb.st_size > PEM_MAX) {
		snprintf(err, errlen, "the TLS %s %s is not a PEM file of at most 1 MiB", what, path);
		fclose(f);
		return NULL;
	}
	buf = malloc((size_t)sb.st_size + 1);
	n = buf ? fread(buf, 1, (size_t)sb.st_size, f) : 0;
	fclose(f);
	if (!buf || n != (size_t)sb.st_size) {
		snprintf(err, errlen, "cannot read the TLS %s %s", what, path);
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	return buf;
}

void rt_tls_free(struct rt_tls *t)
{
	if (!t)
		return;
	free(t->ca_pem);
	free(t->cert_pem);
	if (t->key_pem) {
		memset(t->key_pem, 0, strlen(t->key_pem));
		free(t->key_pem);
	}
	free(t);
}

/* The three agree: key is the certificate's, the certificate chains to the CA. */
static int check_identity(struct rt_tls *t, const struct rt_tls_opts *o, char *err,
			  size_t errlen)
{
	mbedtls_x509_crt ca, crt;
	mbedtls_pk_context key;
	uint32_t flags = 0;
	int rc = -1;
	mbedtls_x509_crt_init(&ca);
	mbedtls_x509_crt_init(&crt);
	mbedtls_pk_init(&key);
	if (mbedtls_x509_crt_parse(&ca, (const unsigned char *)t->ca_pem, strlen(t->ca_pem) + 1)) {
		snprintf(err, errlen, "the TLS CA %s holds no usable PEM certificate", o->ca);
		goto out;
	}
	if (mbedtls_x509_crt_parse(&crt, (const unsigned char *)t->cert_pem,
				   strlen(t->cert_pem) + 1)) {
		snprintf(err, errlen, "the TLS certificate %s holds no usable PEM certificate", o->cert);
		goto out;
	}
	if (mbedtls_pk_parse_key(&key, (const unsigned char *)t->key_pem, strlen(t->key_pem) + 1,
				 NULL, 0)) {
		snprintf(err, errlen, "the TLS key %s is not an unencrypted PEM private key", o->key);
		goto out;
	}
	if (mbedtls_pk_check_pair(&crt.pk, &key)) {
		snprintf(err, errlen, "the TLS key %s does not belong to the certificate %s", o->key,
			 o->cert);
		goto out;
	}
	if (mbedtls_x509_crt_verify(&crt, &ca, NULL, NULL, &flags, NULL, NULL)) {
		char why[128];
		mbedtls_x509_crt_verify_info(why, sizeof why, "", flags);
		why[strcspn(why, "\n")] = 0;
		snprintf(err, errlen, "the TLS certificate %s does not verify against the CA %s (%s)",
			 o->cert, o->ca, why);
		goto out;
	}
	cn_of(&crt.subject, t->name, sizeof t->name);
	if (!t->name[0]) {
		snprintf(err, errlen, "the TLS certificate %s has no usable CN (see scripts/retrace-keys.sh)",
			 o->cert);
		goto out;
	}
	rc = 0;
out:
	mbedtls_x509_crt_free(&ca);
	mbedtls_x509_crt_free(&crt);
	mbedtls_pk_free(&key);
	return rc;
}

int rt_tls_load(const struct rt_tls_opts *o, struct rt_tls **out, char *err, size_t errlen)
{
	struct rt_tls *t;
	int given = !!o->ca[0] + !!o->cert[0] + !!o->key[0];
	*out = NULL;
	if (given == 0)
		return 0;
	if (given != 3) {
		snprintf(err, errlen, "TLS needs all of --tls-ca, --tls-cert and --tls-key");
		return -1;
	}
	if (engine_ready() != 0) {
		snprintf(err, errlen, "this nng has no usable TLS engine (%s)", nng_tls_engine_name());
		return -1;
	}
	if (!(t = calloc(1, sizeof *t))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!(t->ca_pem = read_pem(o->ca, "CA", err, errlen)) ||
	    !(t->cert_pem = read_pem(o->cert, "certificate", err, errlen)) ||
	    !(t->key_pem = read_pem(o->key, "key", err, errlen)) ||
	    check_identity(t, o, err, errlen) != 0) {
		rt_tls_free(t);
		return -1;
	}
	*out = t;
	return 1;
}

const char *rt_tls_name(const struct rt_tls *t)
{
	return t ? t->name : "";
}

static const struct rt_tls *process_tls;

void rt_tls_set_process(const struct rt_tls *t)
{
	process_tls = t;
}

const struct rt_tls *rt_tls_process(void)
{
	return process_tls;
}

static int make_config(const struct rt_tls *t, int server, const char *peer_name,
		       nng_tls_config **out)
{
	nng_tls_config *cfg;
	int rv = nng_tls_config_alloc(&cfg, server ? NNG_TLS_MODE_SERVER : NNG_TLS_MODE_CLIENT);
	if (rv != 0)
		return rv;
	if ((rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED)) != 0 ||
	    (rv = nng_tls_config_ca_chain(cfg, t->ca_pem, NULL)) != 0 ||
	    (rv = nng_tls_config_own_cert(cfg, t->cert_pem, t->key_pem, NULL)) != 0 ||
	    (peer_name && (rv = nng_tls_config_server_name(cfg, peer_name)) != 0)) {
		nng_tls_config_free(cfg);
		return rv;
	}
	*out = cfg;
	return 0;
}

/* ---------------------------------------------------------- URLs ---- */

int rt_url_is_tls(const char *url)
{
	return strncmp(url, "tls+tcp://", 10) == 0 || strncmp(url, "tls+tcp4://", 11) == 0 ||
	       strncmp(url, "tls+tcp6://", 11) == 0;
}

static const char *after_scheme(const char *url, int *tcp)
{
	static const char *const schemes[] = { "tcp://", "tcp4://", "tcp6://", "tls+tcp://",
					       "tls+tcp4://", "tls+tcp6://" };
	size_t i;
	*tcp = 0;
	for (i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
		if (strncmp(url, schemes[i], strlen(schemes[i])) == 0) {
			*tcp = 1;
			return url + strlen(schemes[i]);
		}
	return NULL;
}

int rt_url_is_local(const char *url)
{
	int tcp;
	const char *h = after_scheme(url, &tcp);
	char host[128];
	size_t n;
	if (!h)
		return strncmp(url, "ipc://", 6) == 0 || strncmp(url, "inproc://", 9) == 0;
	if (*h == '[') {
		const char *e = strchr(h, ']');
		if (!e)
			return 0;
		n = (size_t)(e - h - 1);
		h++;
	} else {
		n = strcspn(h, ":/");
	}
	if (n == 0 || n >= sizeof host)
		return 0; /* "tcp://:7700" listens on every address */
	memcpy(host, h, n);
	host[n] = 0;
	if (!strcmp(host, "localhost") || !strcmp(host, "::1"))
		return 1;
	/* 127.0.0.0/8, written as a dotted quad. */
	{
		unsigned a, b, c, d;
		char tail;
		if (sscanf(host, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 &&
		    c < 256 && d < 256)
			return 1;
	}
	return 0;
}

int rt_url_secure(const struct rt_tls *t, int insecure, const char *what, const char *in,
		  char *out, size_t outlen, char *err, size_t errlen)
{
	int tcp;
	const char *rest = after_scheme(in, &tcp);
	if (!in[0]) {
		out[0] = 0;
		return 0;
	}
	if (rt_url_is_tls(in) && !t) {
		snprintf(err, errlen, "%s %s is TLS, but no certificates are configured "
			 "(--tls-ca, --tls-cert, --tls-key)", what, in);
		return -1;
	}
	if (tcp && t && !rt_url_is_tls(in)) {
		/* "tcp://" -> "tls+tcp://" (and tcp4/tcp6 alike). */
		if ((size_t)snprintf(out, outlen, "tls+%s", in) >= outlen) {
			snprintf(err, errlen, "%s %s: URL too long", what, in);
			return -1;
		}
		return 0;
	}
	if (tcp && !t && !insecure && !rt_url_is_local(in)) {
		snprintf(err, errlen,
			 "%s %s is not a loopback address: messages there would be "
			 "unauthenticated. Configure certificates (--tls-ca, --tls-cert, --tls-key; "
			 "scripts/retrace-keys.sh makes them) or, on a network you trust, "
			 "give --insecure",
			 what, in);
		return -1;
	}
	(void)rest;
	if ((size_t)snprintf(out, outlen, "%s", in) >= outlen) {
		snprintf(err, errlen, "%s %s: URL too long", what, in);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------- listen and dial ---- */

int rt_tls_listen(nng_socket s, const struct rt_tls *t, const char *url, nng_listener *l,
		  char *err, size_t errlen)
{
	nng_tls_config *cfg = NULL;
	int rv;
	if (!rt_url_is_tls(url)) {
		rv = nng_listen(s, url, l, 0);
		goto done;
	}
	if (!t) {
		rv = NNG_ENOTSUP;
		goto done;
	}
	if ((rv = nng_listener_create(l, s, url)) != 0)
		goto done;
	if ((rv = make_config(t, 1, NULL, &cfg)) == 0) {
		rv = nng_listener_set_ptr(*l, NNG_OPT_TLS_CONFIG, cfg);
		nng_tls_config_free(cfg); /* the listener holds its own reference */
	}
	if (rv == 0)
		rv = nng_listener_start(*l, 0);
	if (rv != 0)
		nng_listener_close(*l);
done:
	if (rv != 0)
		snprintf(err, errlen, "cannot listen on %s: %s", url, nng_strerror(rv));
	return rv ? -1 : 0;
}

int rt_tls_dial(nng_socket s, const struct rt_tls *t, const char *url, const char *peer_name,
		int flags, char *err, size_t errlen)
{
	return rt_tls_dialer(s, t, url, peer_name, flags, NULL, err, errlen);
}

int rt_tls_dialer(nng_socket s, const struct rt_tls *t, const char *url, const char *peer_name,
		  int flags, nng_dialer *out, char *err, size_t errlen)
{
	nng_tls_config *cfg = NULL;
	nng_dialer d = NNG_DIALER_INITIALIZER;
	int rv;
	if (!rt_url_is_tls(url)) {
		rv = nng_dial(s, url, &d, flags);
		goto done;
	}
	if (!t) {
		rv = NNG_ENOTSUP;
		goto done;
	}
	if ((rv = nng_dialer_create(&d, s, url)) != 0)
		goto done;
	if ((rv = make_config(t, 0, peer_name, &cfg)) == 0) {
		rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg);
		nng_tls_config_free(cfg);
	}
	if (rv == 0)
		rv = nng_dialer_start(d, flags);
	if (rv != 0)
		nng_dialer_close(d);
done:
	if (rv != 0)
		snprintf(err, errlen, "cannot dial %s: %s", url, nng_strerror(rv));
	if (out)
		*out = rv ? (nng_dialer)NNG_DIALER_INITIALIZER : d;
	return rv ? -1 : 0;
}

/* ----------------------------------------------------------- peers ---- */

static int addr_text(const nng_sockaddr *sa, char *out, size_t cap)
{
	if (sa->s_family == NNG_AF_INET) {
		const uint8_t *ip = (const uint8_t *)&sa->s_in.sa_addr;
		snprintf(out, cap, "%u.%u.%u.%u", ip[0], ip[1], ip[2], ip[3]);
		return ip[0] == 127;
	}
	if (sa->s_family == NNG_AF_INET6) {
		static const uint8_t lo6[16] = { [15] = 1 };
		const uint8_t *a = sa->s_in6.sa_addr;
		size_t n = 0;
		for (int i = 0; i < 16 && n < cap; i += 2)
			n += (size_t)snprintf(out + n, cap - n, "%s%x", i ? ":" : "",
					      (unsigned)(a[i] << 8 | a[i + 1]));
		return memcmp(a, lo6, 16) == 0;
	}
	if (sa->s_family == NNG_AF_IPC) {
		snprintf(out, cap, "ipc");
		return 1;
	}
	snprintf(out, cap, "unknown");
	return 0;
}

void rt_peer_of_pipe(nng_pipe pipe, struct rt_peer *p)
{
	nng_sockaddr rem;
	bool verified = false;
	memset(p, 0, sizeof *p);
	p->listener = -1;
	if (nng_pipe_id(pipe) <= 0 || nng_pipe_get_addr(pipe, NNG_OPT_REMADDR, &rem) != 0)
		return; /* the pipe is gone: nobody can vouch for the message */
	p->known = 1;
	p->listener = nng_listener_id(nng_pipe_listener(pipe));
	p->loopback = addr_text(&rem, p->addr, sizeof p->addr);
	if (nng_pipe_get_bool(pipe, NNG_OPT_TLS_VERIFIED, &verified) != 0 || !verified)
		return;
#ifdef RT_OWN_ENGINE
	{
		nng_sockaddr loc;
		if (nng_pipe_get_addr(pipe, NNG_OPT_LOCADDR, &loc) == 0 &&
		    reg_get(&loc, &rem, p->name, sizeof p->name))
			p->tls = 1;
	}
#else
	{
		char *cn = NULL;
		if (nng_pipe_get_string(pipe, NNG_OPT_TLS_PEER_CN, &cn) == 0 && cn) {
			if (cn[0] && strlen(cn) < sizeof p->name) {
				snprintf(p->name, sizeof p->name, "%s", cn);
				p->tls = 1;
			}
			nng_strfree(cn);
		}
	}
#endif
}

void rt_peer_of(nng_msg *m, struct rt_peer *p)
{
	rt_peer_of_pipe(nng_msg_get_pipe(m), p);
}
