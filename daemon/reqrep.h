/*
 * daemon/reqrep.h — one request/reply round trip on an nng REQ context, driven by its aio.
 *
 * Owns: the round trip's aio and its state word (FREE -> SENDING -> RECEIVING
 * -> DONE -> FREE), and the context it runs on (opened by the owner, once or
 * per request).
 *
 * Promises: rt_reqrep_send stores SENDING (release: the owner's fields written
 * before it are seen by the callback) and sends; the aio callback, on nng's
 * thread, moves SENDING to RECEIVING when the request left and receives on
 * the same context; then — reply received, or the send or the receive failed
 * or timed out (the timeout covers each step) — it calls the owner's `done`
 * exactly once, with the reply (the owner's to free) or NULL. An unsent
 * request is freed here. `done` runs on nng's thread with the state still
 * SENDING or RECEIVING: the owner moves it to DONE (rt_reqrep_finish) when its
 * own bookkeeping is written, and back to FREE when it has acted. What a
 * failure means — retry, requeue, give up — is the owner's (docs/architecture.md).
 */
#ifndef RETRACE_DAEMON_REQREP_H
#define RETRACE_DAEMON_REQREP_H

#include <stdatomic.h>

#include <nng/nng.h>

/* How long an operator's request to a daemon waits for its answer: the CLI's
 * default (--timeout) and the web API's requests to the coordinator. It waits
 * for an answer, it does not measure latency: a TLS handshake and a reply on a
 * loaded host take seconds, and giving up early reports "did not answer" for a
 * daemon that does (the UI's alarm request gave up at 2 s at load 15). */
#define RT_OPERATOR_TIMEOUT_MS 10000

enum rt_reqrep_state {
	RT_REQREP_FREE = 0,
	RT_REQREP_SENDING,
	RT_REQREP_RECEIVING,
	RT_REQREP_DONE,
};

struct rt_reqrep;
typedef void (*rt_reqrep_done_fn)(struct rt_reqrep *r, nng_msg *reply);

struct rt_reqrep {
	nng_ctx ctx;
	nng_aio *aio; /* NULL until rt_reqrep_init */
	atomic_int state;
	/* Diagnostics, read by owners' watchdogs: callbacks that came with no
	 * round in flight (ignored), and the last nng result a callback saw. */
	atomic_uint ignored;
	atomic_int last_rv;
	rt_reqrep_done_fn done;
	void *arg; /* the owner's, for done */
};

/* Allocate the aio; the state is FREE. 0, or -1 (nothing held). */
int rt_reqrep_init(struct rt_reqrep *r, rt_reqrep_done_fn done, void *arg);

/* Stop the aio (the round in flight ends as nng ends it; a callback in
 * progress finishes first) and free it. Safe on a zeroed, never-initialised one. */
void rt_reqrep_fini(struct rt_reqrep *r);

/* Send m (consumed) on r->ctx, each step bounded by timeout_ms. */
void rt_reqrep_send(struct rt_reqrep *r, nng_msg *m, nng_duration timeout_ms);

/* Cancel the round in flight, if any: it ends failed (done(r, NULL)). */
void rt_reqrep_cancel(struct rt_reqrep *r);

/* The state, acquire: pairs with rt_reqrep_finish and rt_reqrep_release. */
static inline int rt_reqrep_state(const struct rt_reqrep *r)
{
	return atomic_load_explicit(&r->state, memory_order_acquire);
}

/* DONE, from done: the owner's results are written before it (release; pairs
 * with the acquire in rt_reqrep_state). */
static inline void rt_reqrep_finish(struct rt_reqrep *r)
{
	atomic_store_explicit(&r->state, RT_REQREP_DONE, memory_order_release);
}

/* FREE, once the owner acted on a DONE round (release; pairs with the acquire
 * in rt_reqrep_state of whoever looks for a free round next). */
static inline void rt_reqrep_release(struct rt_reqrep *r)
{
	atomic_store_explicit(&r->state, RT_REQREP_FREE, memory_order_release);
}

#endif
