/*
 * coordinator/auth.c — who may tell the coordinator what (docs/security.md).
 *
 * Every request is admitted here before it is handled, inside the loop's turn:
 * its size against the socket's bound, then its sender. The sender is the pipe
 * the message came in on (daemon/tls.h: the verified certificate name with TLS,
 * the address without).
 *
 *   - With TLS (certificates configured), agent N's REGISTER, TRIGGER and SLICE
 *     are accepted only from a peer whose certificate is agent-N; operator
 *     commands (every text request but status, ping and alarm list: alarm
 *     add/clear, recollect, ...) only from operator-NAME; the read-only ones
 *     from any peer (every peer has a certificate of the CA, or it never
 *     connected).
 *   - Without TLS (loopback), TRIGGER and SLICE are accepted only for agent ids
 *     in the directory (registered, or loaded from the store), a REGISTER may
 *     not move a live agent id to another address (directory.c), and operator
 *     commands come only from loopback peers.
 *
 * A refused request gets an error reply (ACK status RT_ACK_REFUSED, or
 * "error: ..." for text) and is counted in `retrace status`, section security.
 * Slices are admitted by their agent id, read from the message's first fields
 * (peek_agent_id) so the collector's hot path decodes each slice once.
 */
#include "coord_internal.h"

#include <stdio.h>
#include <string.h>

#include "daemon/figures.h"

/* ------------------------------------------------------------ open ---- */

int coord_auth_open(struct rt_coord *c, char *err, size_t errlen)
{
	struct rt_tls_opts o;
	char url[RT_COORD_URL_MAX];
	memset(&o, 0, sizeof o);
	snprintf(o.ca, sizeof o.ca, "%s", c->cfg.tls_ca);
	snprintf(o.cert, sizeof o.cert, "%s", c->cfg.tls_cert);
	snprintf(o.key, sizeof o.key, "%s", c->cfg.tls_key);
	o.insecure = c->cfg.insecure;
	if (rt_tls_load(&o, &c->tls, err, errlen) < 0)
		return -1;
	if (c->tls && !rt_name_is_coordinator(rt_tls_name(c->tls)))
		coord_log(c, LOG_WARN, "our certificate names '%s', but agents and the CLI expect "
			  "'" RT_TLS_COORDINATOR_NAME "'", rt_tls_name(c->tls));
	if (rt_url_secure(c->tls, c->cfg.insecure, "--listen", c->cfg.listen, url, sizeof url, err,
			  errlen) != 0)
		return -1;
	snprintf(c->cfg.listen, sizeof c->cfg.listen, "%s", url);
	if (rt_url_secure(c->tls, c->cfg.insecure, "--collector", c->cfg.collector, url, sizeof url,
			  err, errlen) != 0)
		return -1;
	snprintf(c->cfg.collector, sizeof c->cfg.collector, "%s", url);
	if (c->cfg.insecure && !c->tls)
		coord_log(c, LOG_WARN, "--insecure: no TLS; anyone who reaches %s or %s can send "
			  "triggers and slices for registered agents", c->cfg.listen, c->cfg.collector);
	return 0;
}

uint32_t coord_auth_max_connections(const struct rt_coord *c)
{
	if (c->cfg.max_connections)
		return c->cfg.max_connections;
	/* Without TLS only loopback is served: a host's own agents and its operators. */
	return c->tls ? COORD_MAX_CONNECTIONS_TLS : COORD_MAX_CONNECTIONS_PLAIN;
}

void coord_auth_close(struct rt_coord *c)
{
	rt_tls_free(c->tls);
	c->tls = NULL;
}

/* --------------------------------------------------------- helpers ---- */

static void refuse_text(struct rt_coord *c, struct coord_in *in, const char *why)
{
	char out[256];
	int n = snprintf(out, sizeof out, "error: %s", why);
	coord_reply(c, in, out, (size_t)n + 1);
}

/* The agent a peer's certificate names, or 0. */
static uint32_t peer_agent(const struct rt_peer *p)
{
	uint32_t id = 0;
	return p->tls && rt_name_agent_id(p->name, &id) ? id : 0;
}

int coord_auth_agent(struct rt_coord *c, const struct rt_peer *p, uint32_t agent_id,
		     const char *what)
{
	if (c->tls) {
		if (peer_agent(p) == agent_id && agent_id)
			return 1;
		coord_log(c, LOG_WARN, "%s for agent %u refused: the peer's certificate is '%s'", what,
			  agent_id, p->tls ? p->name : "(none)");
		return 0;
	}
	if (coord_dir_find(c, agent_id))
		return 1;
	coord_log(c, LOG_WARN, "%s for agent %u refused: that agent never registered", what,
		  agent_id);
	return 0;
}

/* Mirrors coord_alarm_request's parse: only "alarm" and "alarm list" read. */
static int alarm_reads(const uint8_t *b, size_t len)
{
	char buf[512], *verb;
	size_t n = len < sizeof buf - 1 ? len : sizeof buf - 1;
	memcpy(buf, b, n);
	buf[n] = 0;
	verb = buf + strlen("alarm");
	while (*verb == ' ')
		verb++;
	verb[strcspn(verb, " \n")] = 0;
	return !strcmp(verb, "list") || !*verb;
}

static int is_word(const uint8_t *b, size_t len, const char *word)
{
	size_t n = strlen(word);
	return len >= n && memcmp(b, word, n) == 0 && (len == n || b[n] == 0 || b[n] == ' ');
}

/*
 * Text requests that only read: status, ping, store, load, alarm list. Every other text
 * request (alarm add/clear, recollect, whatever comes next, unknown ones) is an
 * operator command: the list of what anyone may do is the short one.
 */
static int text_reads(const uint8_t *b, size_t len)
{
	return is_word(b, len, "status") || is_word(b, len, "ping") || is_word(b, len, "store") ||
	       is_word(b, len, "load") || /* a member's probe (peers.c) */
	       (is_word(b, len, "alarm") && alarm_reads(b, len));
}

/* ------------------------------------------------------- admission ---- */

int coord_admit_request(struct rt_coord *c, struct coord_in *in)
{
	const uint8_t *b = nng_msg_body(in->msg);
	size_t len = nng_msg_len(in->msg);
	rt_peer_of(in->msg, &in->peer);
	if (len > COORD_REQUEST_MAX) {
		c->sec.oversize++;
		coord_log(c, LOG_WARN, "request of %zu bytes from %s refused (at most %u)", len,
			  in->peer.tls ? in->peer.name : in->peer.addr, COORD_REQUEST_MAX);
		if (len && (b[0] & 0xf0) == 0x90)
			coord_reply_ack(c, in, RT_WIRE_E_TOO_BIG, NULL, 0);
		else
			refuse_text(c, in, "request too large");
		return 0;
	}
	if (c->tls && !in->peer.tls) {
		/* The pipe went away, or (never with our listeners) is not TLS. */
		c->sec.unauthenticated++;
		if (len && (b[0] & 0xf0) == 0x90)
			coord_reply_ack(c, in, RT_ACK_REFUSED, NULL, 0);
		else
			refuse_text(c, in, "not authenticated");
		return 0;
	}
	if ((len == 0 || (b[0] & 0xf0) != 0x90) && !text_reads(b, len)) {
		int ok = c->tls ? rt_name_is_operator(in->peer.name) : in->peer.loopback;
		if (!ok) {
			c->sec.operator_refused++;
			coord_log(c, LOG_WARN, "operator command from %s refused",
				  in->peer.tls ? in->peer.name : in->peer.addr);
			refuse_text(c, in, c->tls ? "not authorised: this command needs an operator "
						    "certificate (CN=operator-NAME)"
						  : "not authorised: operator commands only from loopback");
			return 0;
		}
	}
	return 1;
}

/*
 * The agent id of a SLICE: element 3 of [version, type, agent_id, ...], read
 * with the wire decoder's rules for integers. -1 when the message does not
 * start like a slice (the collector then refuses it as malformed anyway).
 */
static int read_uint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	const uint8_t *q = *p;
	size_t n;
	int sign = 0;
	if (q >= end)
		return -1;
	if (*q <= 0x7f) {
		*v = *q;
		*p = q + 1;
		return 0;
	}
	switch (*q) {
	case 0xcc: n = 1; break;
	case 0xcd: n = 2; break;
	case 0xce: n = 4; break;
	case 0xcf: n = 8; break;
	case 0xd0: n = 1; sign = 1; break;
	case 0xd1: n = 2; sign = 1; break;
	case 0xd2: n = 4; sign = 1; break;
	case 0xd3: n = 8; sign = 1; break;
	default: return -1;
	}
	if ((size_t)(end - q) < n + 1)
		return -1;
	if (sign && (q[1] & 0x80))
		return -1; /* negative */
	*v = 0;
	for (size_t i = 0; i < n; i++)
		*v = *v << 8 | q[1 + i];
	*p = q + 1 + n;
	return 0;
}

static int64_t peek_agent_id(const uint8_t *b, size_t len)
{
	const uint8_t *p = b, *end = b + len;
	uint64_t count, version, type, id;
	if (len < 4)
		return -1;
	if ((*p & 0xf0) == 0x90) {
		count = *p & 0x0f;
		p += 1;
	} else if (*p == 0xdc && len >= 3) {
		count = (uint64_t)p[1] << 8 | p[2];
		p += 3;
	} else if (*p == 0xdd && len >= 5) {
		count = (uint64_t)p[1] << 24 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 8 | p[4];
		p += 5;
	} else {
		return -1;
	}
	if (count < 3 || read_uint(&p, end, &version) || read_uint(&p, end, &type) ||
	    read_uint(&p, end, &id) || version != 1 || type != RT_WIRE_SLICE || id > UINT32_MAX)
		return -1;
	return (int64_t)id;
}

uint32_t coord_admit_slices(struct rt_coord *c, struct coord_in **batch, uint32_t n,
			    struct coord_in **admitted)
{
	uint32_t i, k = 0;
	for (i = 0; i < n; i++) {
		struct coord_in *in = batch[i];
		int64_t id = peek_agent_id(nng_msg_body(in->msg), nng_msg_len(in->msg));
		if (id < 0) {
			admitted[k++] = in; /* not a slice: the collector refuses and counts it */
			continue;
		}
		if (c->tls) /* without TLS only the directory decides: no pipe look-up */
			rt_peer_of(in->msg, &in->peer);
		else
			memset(&in->peer, 0, sizeof in->peer);
		if (id > 0 && coord_auth_agent(c, &in->peer, (uint32_t)id, "slice")) {
			admitted[k++] = in;
			continue;
		}
		c->sec.slices_refused++;
		coord_reply_ack(c, in, RT_ACK_REFUSED, NULL, 0);
	}
	return k;
}

/* ------------------------------------------------ agent addresses ---- */

int coord_auth_addr_ok(const struct rt_coord *c, const char *addr)
{
	if (c->tls)
		return rt_url_is_tls(addr); /* the coordinator checks the agent's name there */
	if (rt_url_is_tls(addr))
		return 0; /* cannot dial it without certificates */
	if (strncmp(addr, "inproc://", 9) == 0)
		return 0; /* another process cannot be there */
	return c->cfg.insecure || rt_url_is_local(addr);
}

/* --------------------------------------------------------- figures ---- */

void coord_auth_figures(struct rt_figures *w, struct rt_coord *c)
{
	rt_fig_section(w, "security");
	rt_fig_str(w, "tls", c->tls ? "on" : (c->cfg.insecure ? "off (insecure)" : "off (loopback)"));
	rt_fig_str(w, "tls_name", c->tls ? rt_tls_name(c->tls) : "-");
	rt_fig_gauge(w, "max_connections", coord_auth_max_connections(c));
	rt_fig_gauge(w, "connections_listen", rt_pipe_cap_open(c->cap_listen));
	rt_fig_gauge(w, "connections_collector", rt_pipe_cap_open(c->cap_collect));
	rt_fig_u64(w, "connections_refused",
		   rt_pipe_cap_refused(c->cap_listen) + rt_pipe_cap_refused(c->cap_collect));
	rt_fig_u64(w, "tls_handshakes_refused", rt_tls_refused());
	rt_fig_u64(w, "oversize_requests", c->sec.oversize);
	rt_fig_u64(w, "unauthenticated_requests", c->sec.unauthenticated);
	rt_fig_u64(w, "registrations_refused", c->sec.register_identity);
	rt_fig_u64(w, "register_moves_refused", c->sec.register_moves);
	rt_fig_u64(w, "register_addresses_refused", c->sec.register_addr);
	rt_fig_u64(w, "triggers_refused", c->sec.triggers_refused);
	rt_fig_u64(w, "slices_refused", c->sec.slices_refused);
	rt_fig_u64(w, "operator_commands_refused", c->sec.operator_refused);
}
