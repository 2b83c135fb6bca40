/*
 * agent/control.h — the agent's request/reply endpoint (nng REP), answered with
 * the poll thread's state.
 *
 * Owns: one REP socket listening on every address it is given (a local ipc
 * address for `retrace status`, the network address for the coordinator), the
 * one request being served, and `own`, the lock of the poll thread's state.
 *
 * Threads. Whoever holds `own` may touch the agent (pool, index, reporting) and
 * run the handler: the poll thread holds it from rt_control_begin to
 * rt_control_stop, except while it sleeps in rt_control_sleep. A request is
 * received by an nng aio; its callback (an nng thread) then
 *   - if the poll thread sleeps: takes `own` and answers at once, on nng's
 *     thread (no wake-up of the poll thread: a coordinator's remote trigger is
 *     on a traversal's critical path, one per hop);
 *   - else: leaves the request pending and writes an eventfd, so the poll
 *     thread serves it before its next pass (rt_control_pending/serve), or at
 *     once if it was about to sleep.
 * The reply goes out through a second aio (then a poll thread that slept is
 * woken, so that its next pass reports what the request pinned), and only then
 * is the next request received: REP answers one at a time, which is all a status query or a
 * remote trigger needs. A reply send has a short timeout, so a peer that
 * stopped reading cannot hold the endpoint.
 *
 * The local (ipc://) address checks itself: a REQ socket of its own (a new one
 * and a new connection each time: kept connections went on being served) asks it
 * "ping" every few seconds (rt_control_probe_tick, from the poll thread); after
 * two unanswered pings in a row the address is closed and listened on again.
 * Why: with nng 1.5.2 an ipc listener sometimes stopped serving new connections
 * after a peer sent a request over nng's size bound (about 1 in 100 tries at
 * load ~20: every later connection accepted and never read, every thread idle,
 * the TCP address still answering), and `retrace status` found no agent.
 *
 * History: until 2026-11 a control thread handed each request to the poll
 * thread through a mailbox, an eventfd and a condition variable (four
 * hand-offs); session 7 had the poll thread take requests itself, woken by
 * NNG_OPT_RECVFD (one hand-off: the wake-up); since session 9 an idle agent
 * answers from nng's callback (none). bench_traversal measures each hop.
 */
#ifndef RETRACE_AGENT_CONTROL_H
#define RETRACE_AGENT_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include <pthread.h>
#include <stdatomic.h>

#include <nng/nng.h>

#include "daemon/guard.h"
#include "daemon/reqrep.h"
#include "daemon/tls.h"

#define RT_CONTROL_MAX_ADDRS 4
#define RT_CONTROL_REPLY_MAX (1u << 20)
#define RT_CONTROL_TIMES 256 /* requests whose answer times are kept (a ring) */

/* Writes a reply for req into out (cap bytes); returns its length. */
typedef size_t (*rt_control_handler)(void *arg, const uint8_t *req, size_t len,
				     uint8_t *out, size_t cap);

struct rt_control {
	nng_socket sock;
	int wake_fd;         /* eventfd: a request waits for the poll thread; -1 none */
	atomic_int pending;  /* msg holds a request not yet answered */
	int running;
	nng_aio *recv_aio, *send_aio;
	pthread_mutex_t own; /* the poll thread's state: see above */
	int owned;           /* the poll thread holds own (rt_control_begin) */
	int idle;            /* under own: its holder is not the poll thread */
	atomic_int idle_hint; /* idle, read without own */
	int wake_after_send; /* answered while it slept: wake it once the reply left */
	rt_control_handler handler;
	void *handler_arg;
	uint64_t served_direct, served_by_loop; /* requests answered in nng's callback / by the poll thread */
	/* Where a hop's time goes on this side: for the last RT_CONTROL_TIMES requests
	 * in the daemons' wire format (remote triggers, window queries; not status or
	 * ping), µs from nng's receive callback to the handler's start (`wait`: the
	 * hand-off to the poll thread when it was awake) and in the handler (`answer`:
	 * drain, open-writer count, pins, reply). Written and read under `own`. */
	uint64_t recv_ns;
	uint32_t wait_us[RT_CONTROL_TIMES], answer_us[RT_CONTROL_TIMES];
	uint64_t timed; /* requests timed so far; the ring's next slot is timed % RT_CONTROL_TIMES */
	uint8_t *req;        /* the body of msg while pending */
	size_t req_len;
	nng_msg *msg;
	struct rt_peer peer; /* who sent it (daemon/tls.h) */
	int listener_ids[RT_CONTROL_MAX_ADDRS]; /* nng listener of each bound address */
	struct rt_pipe_cap *cap; /* connections per address (daemon/guard.h) */
	uint8_t *reply;
	size_t reply_len;
	char bound[RT_CONTROL_MAX_ADDRS][128]; /* addresses actually bound */
	char url[RT_CONTROL_MAX_ADDRS][128];   /* as given: listened on again as given */
	int nbound;
	const struct rt_tls *tls;
	/* The self-probe of the ipc address (see above); the poll thread's. */
	int probe_addr;             /* index into bound, -1: none */
	int probe_open;             /* probe_sock opened and dialled (one per ping) */
	nng_socket probe_sock;
	struct rt_reqrep probe;     /* one "ping" at a time */
	atomic_int probe_result;    /* of the last ping: 1 answered, -1 not, 0 read */
	int probe_misses;           /* unanswered pings in a row */
	uint64_t probe_next_ns;
	uint64_t probe_interval_ns; /* 5 s */
	uint32_t probe_timeout_ms;  /* 5000 */
	uint64_t probes_unanswered, relistens;
	uint64_t probe_sockets_left; /* of unanswered pings, not closed (control.c) */
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

/* Poll thread, once its state is set up: take `own` and start receiving;
 * requests that came before waited in the socket. handler answers every
 * request, on whichever thread holds `own`. 0, or -1 if not started. */
int rt_control_begin(struct rt_control *c, rt_control_handler handler, void *arg);

/* Poll thread: 1 if a request waits to be served, 0 if none came. */
int rt_control_pending(struct rt_control *c);

/* Poll thread: answer the waiting request. */
void rt_control_serve(struct rt_control *c);

/* Under `own` (a handler: `retrace status`): the quantiles qs[0..nq) (each 0..1)
 * of the kept wait and answer times, in µs, into wait_us[0..nq) and
 * answer_us[0..nq) (0 if none was timed). */
void rt_control_times(const struct rt_control *c, const double *qs, size_t nq,
		      double *wait_us, double *answer_us);

/* Poll thread (lets go of `own` if it held it). */
void rt_control_stop(struct rt_control *c);

/* Poll thread, each pass (now: a monotonic clock): ping the ipc address when one
 * is due, and listen on it again after two unanswered pings in a row. */
void rt_control_probe_tick(struct rt_control *c, uint64_t now_ns);

/* Poll thread, idle: sleep up to ns, or less if a request is left for it; a
 * request that comes meanwhile is answered without waking it. */
void rt_control_sleep(struct rt_control *c, uint64_t ns);

#endif
