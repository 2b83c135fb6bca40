/*
 * agent/uplink.c — REQ contexts driven by aio callbacks.
 *
 * A slice slot goes FREE -> SENDING (nng_ctx_send) -> RECEIVING (nng_ctx_recv)
 * -> DONE. The callback runs the middle step and sets DONE with `ok` when the
 * reply is an ACK with status 0 naming the slot's slice_seq; any error or the
 * timeout sets DONE without ok. The poll thread sees DONE, acts, and resets the
 * slot to FREE. A REQ socket dialled with NNG_FLAG_NONBLOCK keeps reconnecting
 * in the background, so a request sent while the peer is away waits for it (up
 * to the timeout) instead of failing at once.
 *
 * The coordinator link is a single context: the outbox is a ring of encoded
 * messages; its head is sent, and popped only when acknowledged. A failure
 * backs off one second and sends the head again (the coordinator dedups by
 * agent id and trigger_seq). REGISTER goes first and again every 5 s.
 *
 * tls+tcp:// URLs are dialled with the process's TLS identity (daemon/tls.h):
 * both links talk only to a peer whose certificate is the coordinator's.
 */
#include "nng_close.h"
#include "uplink.h"

#include "daemon/tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/reqrep0/req.h>

#define REGISTER_EVERY_NS 5000000000ull
#define COORD_RETRY_NS 1000000000ull

/* 1 if msg is an ACK with status 0 that names seq (or names nothing when seq is 0). */
static int ack_names(nng_msg *m, uint64_t seq)
{
	struct rt_wire_msg w;
	uint32_t i;
	int ok = 0;
	if (rt_wire_decode(nng_msg_body(m), nng_msg_len(m), &w) != 0)
		return 0;
	if (w.type == RT_WIRE_ACK && w.ack.status == 0) {
		if (seq == 0)
			ok = 1;
		for (i = 0; i < w.ack.seq_count && !ok; i++)
			ok = w.ack.seqs[i] == seq;
	}
	rt_wire_msg_free(&w);
	return ok;
}

static void exchange_cb(void *arg)
{
	struct rt_exchange *x = arg;
	int rv = nng_aio_result(x->aio);
	int state = __atomic_load_n(&x->state, __ATOMIC_ACQUIRE);

	if (state == RT_SLOT_SENDING) {
		if (rv != 0) {
			nng_msg_free(nng_aio_get_msg(x->aio));
			x->ok = 0;
			__atomic_store_n(&x->state, RT_SLOT_DONE, __ATOMIC_RELEASE);
			return;
		}
		__atomic_store_n(&x->state, RT_SLOT_RECEIVING, __ATOMIC_RELEASE);
		nng_ctx_recv(x->ctx, x->aio);
		return;
	}
	if (state == RT_SLOT_RECEIVING) {
		x->ok = 0;
		if (rv == 0) {
			nng_msg *m = nng_aio_get_msg(x->aio);
			x->ok = ack_names(m, x->seq);
			nng_msg_free(m);
		}
		__atomic_store_n(&x->state, RT_SLOT_DONE, __ATOMIC_RELEASE);
	}
}

static int exchange_open(struct rt_exchange *x, nng_socket s, int timeout_ms)
{
	if (nng_ctx_open(&x->ctx, s) != 0 || nng_aio_alloc(&x->aio, exchange_cb, x) != 0)
		return -1;
	nng_aio_set_timeout(x->aio, timeout_ms);
	return 0;
}

static void exchange_close(struct rt_exchange *x)
{
	if (!x->aio)
		return;
	nng_aio_stop(x->aio);
	nng_aio_free(x->aio);
	x->aio = NULL;
}

static int dial(nng_socket *s, const char *url, char *err, size_t errlen)
{
	int rv = nng_req0_open(s);
	if (rv != 0) {
		snprintf(err, errlen, "cannot dial %s: %s", url, nng_strerror(rv));
		return -1;
	}
	if (rt_tls_dial(*s, rt_tls_process(), url, RT_TLS_COORDINATOR_NAME, NNG_FLAG_NONBLOCK, err,
			errlen) != 0) {
		nng_close(*s);
		return -1;
	}
	nng_socket_set_ms(*s, NNG_OPT_RECONNMINT, 50);
	nng_socket_set_ms(*s, NNG_OPT_RECONNMAXT, 1000);
	return 0;
}

static int open_slots(struct rt_uplink *u, uint32_t buffer_count, char *err, size_t errlen)
{
	int i;
	for (i = 0; i < RT_UPLINK_SLOTS; i++) {
		struct rt_uplink_slot *s = &u->slots[i];
		s->up = u;
		s->bufs = malloc((size_t)buffer_count * sizeof *s->bufs);
		if (!s->bufs || exchange_open(&s->x, u->coll, u->timeout_ms) != 0) {
			snprintf(err, errlen, "cannot set up collector contexts");
			return -1;
		}
	}
	return 0;
}

int rt_uplink_open(struct rt_uplink *u, const char *collector, const char *coordinator,
		   uint32_t buffer_count, uint32_t outbox_cap, int timeout_ms,
		   const struct rt_wire_buf *register_msg, char *err, size_t errlen)
{
	memset(u, 0, sizeof *u);
	u->timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
	if (collector && collector[0]) {
		if (dial(&u->coll, collector, err, errlen) != 0)
			return -1;
		u->coll_open = 1;
		if (open_slots(u, buffer_count, err, errlen) != 0) {
			rt_uplink_close(u);
			return -1;
		}
	}
	if (coordinator && coordinator[0]) {
		if (dial(&u->coord, coordinator, err, errlen) != 0) {
			rt_uplink_close(u);
			return -1;
		}
		u->coord_open = 1;
		u->out_cap = outbox_cap ? outbox_cap : 1024;
		u->outbox = calloc(u->out_cap, sizeof *u->outbox);
		u->out_trigger = calloc(u->out_cap, sizeof *u->out_trigger);
		if (!u->outbox || !u->out_trigger || exchange_open(&u->coord_x, u->coord, u->timeout_ms) != 0) {
			snprintf(err, errlen, "cannot set up the coordinator link");
			rt_uplink_close(u);
			return -1;
		}
		if (register_msg && register_msg->len &&
		    rt_wire_buf_reserve(&u->register_msg, register_msg->len) == 0) {
			memcpy(u->register_msg.data, register_msg->data, register_msg->len);
			u->register_msg.len = register_msg->len;
		}
	}
	return 0;
}

void rt_uplink_close(struct rt_uplink *u)
{
	int i;
	uint32_t k;
	for (i = 0; i < RT_UPLINK_SLOTS; i++) {
		exchange_close(&u->slots[i].x);
		free(u->slots[i].bufs);
	}
	exchange_close(&u->coord_x);
	if (u->coll_open)
		rt_nng_close_bounded(u->coll, RT_NNG_CLOSE_WAIT_MS);
	if (u->coord_open)
		rt_nng_close_bounded(u->coord, RT_NNG_CLOSE_WAIT_MS);
	for (k = 0; u->outbox && k < u->out_cap; k++)
		rt_wire_buf_free(&u->outbox[k]);
	free(u->outbox);
	free(u->out_trigger);
	rt_wire_buf_free(&u->register_msg);
	memset(u, 0, sizeof *u);
}

struct rt_uplink_slot *rt_uplink_free_slot(struct rt_uplink *u)
{
	int i;
	if (!u->coll_open)
		return NULL;
	for (i = 0; i < RT_UPLINK_SLOTS; i++)
		if (__atomic_load_n(&u->slots[i].x.state, __ATOMIC_ACQUIRE) == RT_SLOT_FREE)
			return &u->slots[i];
	return NULL;
}

uint32_t rt_uplink_inflight(const struct rt_uplink *u)
{
	uint32_t n = 0;
	int i;
	for (i = 0; i < RT_UPLINK_SLOTS; i++)
		if (__atomic_load_n(&u->slots[i].x.state, __ATOMIC_ACQUIRE) != RT_SLOT_FREE)
			n++;
	return n;
}

static int start_send(struct rt_exchange *x, uint64_t seq, const void *msg, size_t len)
{
	nng_msg *m;
	if (nng_msg_alloc(&m, 0) != 0)
		return -1;
	if (nng_msg_append(m, msg, len) != 0) {
		nng_msg_free(m);
		return -1;
	}
	x->seq = seq;
	x->ok = 0;
	nng_aio_set_msg(x->aio, m);
	__atomic_store_n(&x->state, RT_SLOT_SENDING, __ATOMIC_RELEASE);
	nng_ctx_send(x->ctx, x->aio);
	return 0;
}

int rt_uplink_send_slice(struct rt_uplink *u, struct rt_uplink_slot *s, const void *msg,
			 size_t len)
{
	if (start_send(&s->x, s->seq, msg, len) != 0)
		return -1;
	u->st.slices_sent++;
	return 0;
}

void rt_uplink_slot_reset(struct rt_uplink_slot *s)
{
	if (s->x.ok)
		s->up->st.slices_acked++;
	else
		s->up->st.slices_failed++;
	s->x.ok = 0;
	s->from_spool = 0;
	s->nbuf = 0;
	s->bytes = 0;
	__atomic_store_n(&s->x.state, RT_SLOT_FREE, __ATOMIC_RELEASE);
}

static uint32_t fair_slot(struct rt_uplink *u, uint32_t id);

/*
 * A full outbox makes room fairly: it drops the oldest message of the trigger id
 * holding the most (the head is skipped while it is in flight), unless that is
 * the incoming message's own id — a storm fills the outbox with its own messages
 * and loses them, never a quiet trigger's. 0 if a place was freed.
 */
static int make_room_fairly(struct rt_uplink *u, uint32_t incoming)
{
	uint32_t counts[RT_UPLINK_FAIR_IDS] = { 0 }, i, f, busiest = 0, start, j;
	int in_flight = __atomic_load_n(&u->coord_x.state, __ATOMIC_ACQUIRE) != RT_SLOT_FREE &&
			!u->coord_is_register;
	struct rt_wire_buf gone;
	for (i = 0; i < u->out_len; i++)
		counts[fair_slot(u, u->out_trigger[(u->out_head + i) % u->out_cap])]++;
	f = fair_slot(u, incoming);
	counts[f]++;
	for (i = 1; i < RT_UPLINK_FAIR_IDS; i++)
		if (counts[i] > counts[busiest])
			busiest = i;
	if (busiest == f)
		return -1;
	start = in_flight ? 1 : 0;
	for (j = start; j < u->out_len; j++)
		if (fair_slot(u, u->out_trigger[(u->out_head + j) % u->out_cap]) == busiest)
			break;
	if (j == u->out_len)
		return -1;
	gone = u->outbox[(u->out_head + j) % u->out_cap];
	for (; j + 1 < u->out_len; j++) {
		uint32_t to = (u->out_head + j) % u->out_cap, from = (u->out_head + j + 1) % u->out_cap;
		u->outbox[to] = u->outbox[from];
		u->out_trigger[to] = u->out_trigger[from];
	}
	u->outbox[(u->out_head + u->out_len - 1) % u->out_cap] = gone; /* its memory is reused */
	u->out_len--;
	u->st.coord_dropped++;
	u->st.coord_evicted++;
	return 0;
}

int rt_uplink_post(struct rt_uplink *u, const struct rt_wire_buf *msg, uint32_t trigger_id)
{
	struct rt_wire_buf *b;
	uint32_t slot;
	if (!u->coord_open)
		return -1;
	if (u->out_len == u->out_cap && make_room_fairly(u, trigger_id) != 0) {
		u->st.coord_dropped++;
		return -1;
	}
	slot = (u->out_head + u->out_len) % u->out_cap;
	b = &u->outbox[slot];
	u->out_trigger[slot] = trigger_id;
	b->len = 0;
	if (rt_wire_buf_reserve(b, msg->len) != 0) {
		u->st.coord_dropped++;
		return -1;
	}
	memcpy(b->data, msg->data, msg->len);
	b->len = msg->len;
	u->out_len++;
	return 0;
}

/* The fair-order slot of a trigger id (created on first use; 0 when full). */
static uint32_t fair_slot(struct rt_uplink *u, uint32_t id)
{
	uint32_t i;
	for (i = 0; i < u->nfair; i++)
		if (u->fair[i].id == id)
			return i;
	if (u->nfair == RT_UPLINK_FAIR_IDS)
		return 0;
	u->fair[u->nfair].id = id;
	u->fair[u->nfair].served = 0;
	return u->nfair++;
}

/*
 * Bring the next message to send to the outbox's head: among the oldest
 * RT_UPLINK_FAIR_SCAN, the oldest one of the trigger id served least recently.
 * Why: the coordinator link is stop-and-wait (one message per round trip and
 * store commit), so under a trigger storm the outbox backs up, and in FIFO order
 * a quiet trigger's message would wait behind seconds of the storm's — long
 * enough for the other hosts to evict the trace. The entries the chosen one
 * jumps over shift back one place, so each id keeps its own order.
 */
static void pick_fair(struct rt_uplink *u)
{
	uint32_t n = u->out_len < RT_UPLINK_FAIR_SCAN ? u->out_len : RT_UPLINK_FAIR_SCAN;
	uint32_t i, best = 0, slot;
	uint64_t best_served = UINT64_MAX;
	for (i = 0; i < n; i++) {
		uint32_t f = fair_slot(u, u->out_trigger[(u->out_head + i) % u->out_cap]);
		if (u->fair[f].served < best_served) {
			best_served = u->fair[f].served;
			best = i;
		}
	}
	if (best) {
		struct rt_wire_buf chosen = u->outbox[(u->out_head + best) % u->out_cap];
		uint32_t trig = u->out_trigger[(u->out_head + best) % u->out_cap];
		for (i = best; i > 0; i--) {
			uint32_t to = (u->out_head + i) % u->out_cap, from = (u->out_head + i - 1) % u->out_cap;
			u->outbox[to] = u->outbox[from];
			u->out_trigger[to] = u->out_trigger[from];
		}
		u->outbox[u->out_head] = chosen;
		u->out_trigger[u->out_head] = trig;
		u->st.coord_reordered++;
	}
	slot = fair_slot(u, u->out_trigger[u->out_head]);
	u->fair[slot].served = ++u->fair_clock;
}

void rt_uplink_pump_coordinator(struct rt_uplink *u, uint64_t now_ns)
{
	int state;
	if (!u->coord_open)
		return;
	state = __atomic_load_n(&u->coord_x.state, __ATOMIC_ACQUIRE);
	if (state == RT_SLOT_DONE) {
		if (u->coord_x.ok) {
			u->st.coord_acked++;
			if (u->coord_is_register)
				u->st.registrations++;
			else if (u->out_len) {
				u->out_head = (u->out_head + 1) % u->out_cap;
				u->out_len--;
			}
		} else {
			u->st.coord_failed++;
			u->coord_retry_ns = now_ns + COORD_RETRY_NS;
			if (u->coord_is_register)
				u->next_register_ns = now_ns; /* register again first */
		}
		__atomic_store_n(&u->coord_x.state, RT_SLOT_FREE, __ATOMIC_RELEASE);
		state = RT_SLOT_FREE;
	}
	if (state != RT_SLOT_FREE || now_ns < u->coord_retry_ns)
		return;
	if (u->register_msg.len && now_ns >= u->next_register_ns) {
		u->coord_is_register = 1;
		u->next_register_ns = now_ns + REGISTER_EVERY_NS;
		if (start_send(&u->coord_x, 0, u->register_msg.data, u->register_msg.len) == 0)
			u->st.coord_sent++;
		return;
	}
	if (u->out_len) {
		struct rt_wire_buf *b;
		pick_fair(u);
		b = &u->outbox[u->out_head];
		u->coord_is_register = 0;
		if (start_send(&u->coord_x, 0, b->data, b->len) == 0)
			u->st.coord_sent++;
	}
}
