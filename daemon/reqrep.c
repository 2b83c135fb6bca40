/*
 * daemon/reqrep.c — the request/reply round trip both daemons drive on nng REQ contexts.
 *
 * One aio does both steps: nng_ctx_send, then nng_ctx_recv from the callback
 * on the same aio, so a round needs no thread and no second allocation. The
 * callback tells the steps apart by the state word (SENDING or RECEIVING),
 * which rt_reqrep_send stores with release order before the send, and reads
 * with acquire. nng leaves a message it could not send on the aio: it is
 * freed here, so an owner sees only "a reply" or "none". The agent's uplink
 * (agent/uplink.c), the coordinator's remote triggers and weave queries
 * (coordinator/traversal.c) and its policy sends (coordinator/adaptive.c)
 * run on it.
 */
#include "reqrep.h"

static void reqrep_cb(void *arg)
{
	struct rt_reqrep *r = arg;
	int rv = nng_aio_result(r->aio);
	int state = atomic_load_explicit(&r->state, memory_order_acquire);
	nng_msg *reply = NULL;

	atomic_store_explicit(&r->last_rv, rv, memory_order_relaxed);
	if (state == RT_REQREP_SENDING && rv == 0) {
		/* read back by this callback when the receive completes */
		atomic_store_explicit(&r->state, RT_REQREP_RECEIVING, memory_order_release);
		nng_ctx_recv(r->ctx, r->aio);
		return;
	}
	if (state == RT_REQREP_SENDING)
		nng_msg_free(nng_aio_get_msg(r->aio)); /* the request never left */
	else if (state == RT_REQREP_RECEIVING && rv == 0)
		reply = nng_aio_get_msg(r->aio);
	else if (state != RT_REQREP_RECEIVING) {
		/* no round in flight: nothing to end (counted: nng should not) */
		atomic_fetch_add_explicit(&r->ignored, 1, memory_order_relaxed);
		return;
	}
	r->done(r, reply);
}

int rt_reqrep_init(struct rt_reqrep *r, rt_reqrep_done_fn done, void *arg)
{
	r->done = done;
	r->arg = arg;
	atomic_store_explicit(&r->state, RT_REQREP_FREE, memory_order_relaxed);
	atomic_store_explicit(&r->ignored, 0, memory_order_relaxed);
	atomic_store_explicit(&r->last_rv, 0, memory_order_relaxed);
	if (nng_aio_alloc(&r->aio, reqrep_cb, r) != 0) {
		r->aio = NULL;
		return -1;
	}
	return 0;
}

void rt_reqrep_fini(struct rt_reqrep *r)
{
	if (!r->aio)
		return;
	nng_aio_stop(r->aio);
	nng_aio_free(r->aio);
	r->aio = NULL;
}

void rt_reqrep_send(struct rt_reqrep *r, nng_msg *m, nng_duration timeout_ms)
{
	nng_aio_set_timeout(r->aio, timeout_ms);
	nng_aio_set_msg(r->aio, m);
	/* pairs with the acquire in reqrep_cb: the callback sees the owner's
	 * fields written before this call */
	atomic_store_explicit(&r->state, RT_REQREP_SENDING, memory_order_release);
	nng_ctx_send(r->ctx, r->aio);
}

void rt_reqrep_cancel(struct rt_reqrep *r)
{
	if (r->aio)
		nng_aio_cancel(r->aio);
}
