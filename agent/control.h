/*
 * agent/control.h — the agent's request/reply endpoint (nng REP), served by the
 * poll thread itself.
 *
 * Owns: one REP socket listening on every address it is given (a local ipc
 * address for `retrace status`, the network address for the coordinator), and
 * the one request being served. The poll thread takes a request at the start of
 * each pass (rt_control_pending: a non-blocking receive) and answers it through
 * rt_control_serve, so all state stays with one thread. An idle poll thread
 * sleeps in ppoll on the socket's receive descriptor (NNG_OPT_RECVFD, readable
 * while a request waits), so a request — a coordinator's remote trigger on the
 * traversal's critical path — wakes it at once.
 *
 * Until 2026-11 a control thread of its own received each request and handed it
 * over through a mailbox, an eventfd and a condition variable: four thread
 * hand-offs per request where nng's descriptor needs none (bench_traversal: the
 * difference is per hop of every traversal).
 */
#ifndef RETRACE_AGENT_CONTROL_H
#define RETRACE_AGENT_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "daemon/guard.h"
#include "daemon/tls.h"

#define RT_CONTROL_MAX_ADDRS 4
#define RT_CONTROL_REPLY_MAX (1u << 20)

/* Writes a reply for req into out (cap bytes); returns its length. */
typedef size_t (*rt_control_handler)(void *arg, const uint8_t *req, size_t len,
				     uint8_t *out, size_t cap);

struct rt_control {
	nng_socket sock;
	int recv_fd;         /* NNG_OPT_RECVFD: readable while a request waits; -1 none */
	int pending;         /* msg holds a request not yet answered */
	int running;
	uint8_t *req;        /* the body of msg while pending */
	size_t req_len;
	nng_msg *msg;
	struct rt_peer peer; /* who sent it (daemon/tls.h) */
	int listener_ids[RT_CONTROL_MAX_ADDRS]; /* nng listener of each bound address */
	struct rt_pipe_cap *cap; /* connections per address (daemon/guard.h) */
	uint8_t *reply;
	size_t reply_len;
	char bound[RT_CONTROL_MAX_ADDRS][128]; /* addresses actually bound */
	int nbound;
};

/*
 * Listen on each non-empty URL. tls+tcp:// URLs need tls
 * (and admit only peers with a certificate of its CA); each address holds at
 * most max_connections at once (0: no cap). Requests over max_request bytes
 * make nng drop the connection. -1 with a sentence in err.
 */
int rt_control_start(struct rt_control *c, const char *const *urls, int nurls,
		     const struct rt_tls *tls, uint32_t max_connections, size_t max_request,
		     char *err, size_t errlen);

/* 1 if the waiting request came in on urls[i]. */
static inline int rt_control_request_on(const struct rt_control *c, int i)
{
	return i < c->nbound && c->peer.listener >= 0 && c->peer.listener == c->listener_ids[i];
}

/* Poll thread: 1 if a request waits to be served (taken from the socket now if
 * none was), 0 if none came. */
int rt_control_pending(struct rt_control *c);

/* Poll thread: answer the waiting request with handler. */
void rt_control_serve(struct rt_control *c, rt_control_handler handler, void *arg);

void rt_control_stop(struct rt_control *c);

/* Poll thread, idle: sleep up to ns, or less if a request arrives meanwhile. */
void rt_control_sleep(struct rt_control *c, uint64_t ns);

#endif
