/*
 * daemon/tls.h — authentication for the daemons and the CLI: TLS identities,
 * who sent a message, and which addresses may be used without TLS.
 *
 * Owns: a loaded identity (CA chain, our certificate and key: struct rt_tls),
 * TLS listening and dialling on nng sockets (mutual: both ends present a
 * certificate of the deployment's CA), the certificate name (CN) of the peer
 * behind any received message, the names of roles (agent-N, coordinator,
 * operator-NAME; scripts/retrace-keys.sh makes them), and the URL policy:
 * plain tcp:// only to loopback unless the operator says --insecure.
 *
 * Promises:
 *   - A tls+tcp:// listener accepts only peers whose certificate chains to the
 *     CA; a dialler talks only to a peer whose certificate does, and, when a
 *     name is given, whose certificate names it (CN or DNS SAN).
 *   - rt_peer_of never trusts the message: the name comes from the certificate
 *     the TLS handshake verified on the pipe the message came in on. A pipe
 *     already gone, or not TLS, gives no name.
 *
 * Why our own TLS engine: Debian's nng 1.5.2 verifies certificates but cannot
 * tell which one a pipe presented (NNG_OPT_TLS_PEER_CN came with nng 1.6), so
 * tls.c registers an nng TLS engine over the same mbedTLS that nng uses, which
 * records the verified peer name per connection. With an nng that defines
 * NNG_OPT_TLS_PEER_CN, that option is used instead and nng's engine stays.
 */
#ifndef RETRACE_DAEMON_TLS_H
#define RETRACE_DAEMON_TLS_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#define RT_TLS_NAME_MAX 64
#define RT_TLS_PATH_MAX 256

/* Settings common to every program: flags --tls-ca/--tls-cert/--tls-key/--insecure. */
struct rt_tls_opts {
	char ca[RT_TLS_PATH_MAX];
	char cert[RT_TLS_PATH_MAX];
	char key[RT_TLS_PATH_MAX];
	int insecure; /* allow plain tcp:// beyond loopback */
};

struct rt_tls;

/*
 * The identity the options name: 0 and *out = NULL when no file is given (plain
 * transport), 1 and *out set when all three load and agree (the key is the
 * certificate's, the certificate chains to the CA), -1 with a sentence in err
 * otherwise (also when only some of the three are given).
 */
int rt_tls_load(const struct rt_tls_opts *o, struct rt_tls **out, char *err, size_t errlen);
void rt_tls_free(struct rt_tls *t);
/* The CN of our own certificate. */
const char *rt_tls_name(const struct rt_tls *t);
/* TLS handshakes this process refused as a server (no or a bad certificate,
 * not TLS at all); 0 where nng's own engine is used. */
uint64_t rt_tls_refused(void);

/*
 * The URL to use for `in` (what: "--listen", for messages). With an identity,
 * tcp:// becomes tls+tcp://; without one, tls+tcp:// is an error, and tcp:// to
 * anything but a loopback address is an error unless insecure. ipc:// and
 * inproc:// stay as they are. 0 ok; -1 with a sentence in err.
 */
int rt_url_secure(const struct rt_tls *t, int insecure, const char *what, const char *in,
		  char *out, size_t outlen, char *err, size_t errlen);
/* 1 if the URL is tcp:// or tls+tcp:// to 127.0.0.0/8, ::1 or localhost, or ipc://. */
int rt_url_is_local(const char *url);
/* 1 if the URL is tls+tcp://. */
int rt_url_is_tls(const char *url);

/* Listen on url (TLS server requiring a client certificate when it is tls+tcp://). */
int rt_tls_listen(nng_socket s, const struct rt_tls *t, const char *url, nng_listener *l,
		  char *err, size_t errlen);
/*
 * Dial url (flags as nng_dial's). For tls+tcp://, the peer's certificate must
 * chain to the CA and, if peer_name is not NULL, name peer_name.
 */
int rt_tls_dial(nng_socket s, const struct rt_tls *t, const char *url, const char *peer_name,
		int flags, char *err, size_t errlen);
/* The same, and *out names the dialer (to close it and dial again: an nng dialer
 * whose connect ended in NNG_ECLOSED or NNG_ECANCELED never redials). */
int rt_tls_dialer(nng_socket s, const struct rt_tls *t, const char *url, const char *peer_name,
		  int flags, nng_dialer *out, char *err, size_t errlen);

/* Who sent a message. */
struct rt_peer {
	int known;                  /* the pipe was still there and answered */
	int tls;                    /* over TLS, certificate verified; name is set */
	char name[RT_TLS_NAME_MAX]; /* the certificate's CN */
	char addr[64];              /* remote address without the port ("ipc" for ipc://) */
	int loopback;               /* addr is a loopback address, or ipc */
	int listener;               /* nng listener id, -1 if none */
};
void rt_peer_of(nng_msg *m, struct rt_peer *p);
void rt_peer_of_pipe(nng_pipe pipe, struct rt_peer *p);

/* Roles named by certificates (scripts/retrace-keys.sh). */
int rt_name_agent_id(const char *name, uint32_t *id); /* "agent-N", N in 1..2^32-1 */
int rt_name_is_operator(const char *name);             /* "operator-..." */
int rt_name_is_coordinator(const char *name);          /* "coordinator" */
#define RT_TLS_COORDINATOR_NAME "coordinator"

/*
 * The identity of this process for code that cannot be handed one (the agent's
 * uplink dials through it). Set once at start-up; NULL means plain.
 */
void rt_tls_set_process(const struct rt_tls *t);
const struct rt_tls *rt_tls_process(void);

#endif
