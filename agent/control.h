/*
 * agent/control.h — the agent's request/reply endpoint (nng REP), served by a
 * thread of its own that hands each request to the poll thread.
 *
 * Owns: one REP socket listening on every address it is given (a local ipc
 * address for `retrace status`, the network address for the coordinator), and
 * a one-slot mailbox. The control thread only moves bytes: it never touches the
 * agent's state. The poll thread checks rt_control_pending (one atomic load)
 * each pass and answers through rt_control_serve, so all state stays with one
 * thread. An idle poll thread sleeps in ppoll on wake_fd (an eventfd the control
 * thread signals), so a request — a coordinator's remote trigger on the
 * traversal's critical path — is served at once, not after an idle sleep.
 */
#ifndef RETRACE_AGENT_CONTROL_H
#define RETRACE_AGENT_CONTROL_H

#include <pthread.h>
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
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int pending;         /* a request waits (atomic) */
	int wake_fd;         /* eventfd: written when a request arrives */
	int answered;
	int stop;
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
 * Listen on each non-empty URL and start the thread. tls+tcp:// URLs need tls
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

static inline int rt_control_pending(struct rt_control *c)
{
	return __atomic_load_n(&c->pending, __ATOMIC_ACQUIRE);
}

/* Poll thread: answer the waiting request with handler. */
void rt_control_serve(struct rt_control *c, rt_control_handler handler, void *arg);

void rt_control_stop(struct rt_control *c);

/* Poll thread, idle: sleep up to ns, or less if a request arrives meanwhile. */
void rt_control_sleep(struct rt_control *c, uint64_t ns);

#endif
