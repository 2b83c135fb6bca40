/*
 * agent/uplink.c — REQ contexts driven by aio callbacks (daemon/reqrep.h).
 *
 * A slice slot goes FREE -> SENDING (nng_ctx_send) -> RECEIVING (nng_ctx_recv)
 * -> DONE. The callback runs the middle step and sets DONE with `ok` when the
 * reply is an ACK with status 0 naming the slot's slice_seq; any error or the
 * timeout sets DONE without ok. The poll thread sees DONE, acts, and resets the
 * slot to FREE. A REQ socket dialled with NNG_FLAG_NONBLOCK keeps reconnecting
 * in the background, so a request sent while the peer is away waits for it (up
 * to the timeout) instead of failing at once.
 *
 * The coordinator link: REGISTER goes first, on its own context, and again
 * every 5 s. Once it is acknowledged, the outbox (a ring of encoded messages)
 * feeds RT_UPLINK_COORD_SLOTS contexts, so that many messages travel at once:
 * a single stop-and-wait context carried one message per coordinator turn
 * (~400/s), less than a trigger storm posts, and the backlog let other hosts
 * evict the traces before the coordinator asked for them. A message leaves the
 * ring when it is sent and lives in its slot until acknowledged; a failure puts
 * it back at the ring's front and backs the link off one second (the
 * coordinator dedups by agent id and trigger_seq, so a message sent twice is
 * harmless). Messages may therefore reach the coordinator out of order; each
 * one carries the trace's whole breadcrumb list as the agent knew it, and the
 * coordinator merges them, so the order does not matter. A failed REGISTER
 * holds the triggers back until a REGISTER is acknowledged again (a restarted
 * coordinator must know the agent before its triggers).
 *
 * tls+tcp:// URLs are dialled with the process's TLS identity (daemon/tls.h):
 * both links talk only to a peer whose certificate is the coordinator's.
 */
#include "nng_close.h"
#include "uplink.h"

#include "daemon/guard.h"
#include "daemon/tls.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/reqrep0/req.h>

#define REGISTER_EVERY_NS 5000000000ull
#define COORD_RETRY_NS 1000000000ull

/* 1 if msg is an ACK with status 0 that names x->seq (or names nothing when
 * seq is 0); x->status gets the ACK's status (-1: not an ACK); with x->keep,
 * the ACK's seqs are copied there (a REGISTER ACK's live set, wire.h). */
static int ack_names(nng_msg *m, struct rt_exchange *x)
{
	struct rt_wire_msg w;
	uint32_t i;
	int ok = 0;
	x->status = -1;
	x->kept = 0;
	if (rt_wire_decode(nng_msg_body(m), nng_msg_len(m), &w) != 0)
		return 0;
	if (w.type == RT_WIRE_ACK)
		x->status = w.ack.status;
	if (w.type == RT_WIRE_ACK && w.ack.status == 0) {
		if (x->seq == 0)
			ok = 1;
		for (i = 0; i < w.ack.seq_count && !ok; i++)
			ok = w.ack.seqs[i] == x->seq;
		for (i = 0; x->keep && i < w.ack.seq_count && i < x->keep_cap; i++)
			x->keep[x->kept++] = w.ack.seqs[i];
	}
	rt_wire_msg_free(&w);
	return ok;
}

/* The round ended (reply NULL: the send or the receive failed or timed out). */
static void exchange_done(struct rt_reqrep *r, nng_msg *reply)
{
	struct rt_exchange *x = r->arg;
	x->ok = 0;
	x->status = -1;
	if (x->pipes) /* for rt_uplink_keep_dialing; read with relaxed order too */
		atomic_fetch_add_explicit(reply ? &x->pipes->replies : &x->pipes->silent, 1,
					  memory_order_relaxed);
	if (reply) {
		x->ok = ack_names(reply, x);
		nng_msg_free(reply);
	}
	/* DONE pairs with the acquire in rt_uplink_slot_done and the poll
	 * thread's loads: ok, status and kept are written before it */
	rt_reqrep_finish(r);
}

static int exchange_open(struct rt_exchange *x, nng_socket s, struct rt_pipes *pipes,
			 int timeout_ms)
{
	x->pipes = pipes;
	x->timeout_ms = timeout_ms;
	if (nng_ctx_open(&x->rr.ctx, s) != 0 || rt_reqrep_init(&x->rr, exchange_done, x) != 0)
		return -1;
	return 0;
}

static void exchange_close(struct rt_exchange *x)
{
	rt_reqrep_fini(&x->rr);
}

static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct rt_pipes *c = arg;
	(void)p;
	if (ev == NNG_PIPE_EV_ADD_POST) {
		atomic_fetch_add_explicit(&c->gen, 1, memory_order_acq_rel);
		atomic_fetch_add_explicit(&c->n, 1, memory_order_acq_rel);
	} else if (ev == NNG_PIPE_EV_REM_POST) {
		atomic_fetch_sub_explicit(&c->n, 1, memory_order_acq_rel);
	}
}

static int dial(nng_socket *s, const char *url, struct rt_pipes *pipes, struct rt_dial *d,
		char *err, size_t errlen)
{
	int rv = nng_req0_open(s);
	if (rv != 0) {
		snprintf(err, errlen, "cannot dial %s: %s", url, nng_strerror(rv));
		return -1;
	}
	/* before the dial, so that no connection goes uncounted */
	nng_pipe_notify(*s, NNG_PIPE_EV_ADD_POST, pipe_cb, pipes);
	nng_pipe_notify(*s, NNG_PIPE_EV_REM_POST, pipe_cb, pipes);
	/* before the dial too: a dialer takes the socket's reconnect times when made */
	nng_socket_set_ms(*s, NNG_OPT_RECONNMINT, 50);
	nng_socket_set_ms(*s, NNG_OPT_RECONNMAXT, 1000);
	snprintf(d->url, sizeof d->url, "%s", url);
	d->bad_since_ns = 0;
	if (rt_tls_dialer(*s, rt_tls_process(), url, RT_TLS_COORDINATOR_NAME, NNG_FLAG_NONBLOCK,
			  &d->dialer, err, errlen) != 0) {
		nng_close(*s);
		return -1;
	}
	return 0;
}

/* Is link p in a bad way: connected, and its round trips since the last look
 * all ended without a reply (none since, if nothing was sent: as it was)? A
 * link without a connection is nng's to redial (uplink.h, struct rt_dial). */
static int link_bad(struct rt_pipes *p, struct rt_dial *d)
{
	uint64_t replies = atomic_load_explicit(&p->replies, memory_order_relaxed);
	uint64_t silent = atomic_load_explicit(&p->silent, memory_order_relaxed);
	if (atomic_load_explicit(&p->n, memory_order_acquire) == 0)
		d->unanswered = 0;
	else if (replies != d->replies)
		d->unanswered = 0;
	else if (silent != d->silent)
		d->unanswered = 1;
	d->replies = replies;
	d->silent = silent;
	return d->unanswered;
}

/* A link in a bad way for RT_UPLINK_REDIAL_NS: a new dialer (uplink.h, struct
 * rt_dial). Closing the old one closes the connection nng still holds; the
 * requests waiting on the socket's contexts go out on the new one. */
static void keep_dialing(nng_socket s, struct rt_pipes *p, struct rt_dial *d, uint64_t now_ns,
			 const char *what, uint64_t *redials, uint64_t *link_redials)
{
	char err[160];
	if (!link_bad(p, d)) {
		d->bad_since_ns = 0;
		return;
	}
	if (!d->bad_since_ns) {
		d->bad_since_ns = now_ns;
		return;
	}
	if (now_ns - d->bad_since_ns < RT_UPLINK_REDIAL_NS)
		return;
	d->bad_since_ns = now_ns;
	nng_dialer_close(d->dialer);
	if (rt_tls_dialer(s, rt_tls_process(), d->url, RT_TLS_COORDINATOR_NAME, NNG_FLAG_NONBLOCK,
			  &d->dialer, err, sizeof err) == 0) {
		(*redials)++;
		(*link_redials)++;
		/* Rare, and the one clue when a host's slices stop arriving. */
		rt_log(RT_LOG_INFO, "%s link %s: connected, but no reply for %llu s; dialing again",
		       what, d->url, (unsigned long long)(RT_UPLINK_REDIAL_NS / 1000000000ull));
	} else {
		rt_log(RT_LOG_WARN, "%s", err);
	}
}

void rt_uplink_keep_dialing(struct rt_uplink *u, uint64_t now_ns)
{
	if (u->coll_open)
		keep_dialing(u->coll, &u->coll_pipes, &u->coll_dial, now_ns, "collector",
			     &u->st.redials, &u->st.coll_redials);
	if (u->coord_open)
		keep_dialing(u->coord, &u->coord_pipes, &u->coord_dial, now_ns, "coordinator",
			     &u->st.redials, &u->st.coord_redials);
}

static int open_slots(struct rt_uplink *u, uint32_t buffer_count, char *err, size_t errlen)
{
	int i;
	for (i = 0; i < RT_UPLINK_SLOTS; i++) {
		struct rt_uplink_slot *s = &u->slots[i];
		s->up = u;
		s->bufs = malloc((size_t)buffer_count * sizeof *s->bufs);
		if (!s->bufs || exchange_open(&s->x, u->coll, &u->coll_pipes, u->timeout_ms) != 0) {
			snprintf(err, errlen, "cannot set up collector contexts");
			return -1;
		}
	}
	return 0;
}

static int open_coord_slots(struct rt_uplink *u)
{
	int i;
	u->register_x.keep = u->view_keep;
	u->register_x.keep_cap = RT_UPLINK_VIEW_MAX;
	if (exchange_open(&u->register_x, u->coord, &u->coord_pipes, u->timeout_ms) != 0)
		return -1;
	for (i = 0; i < RT_UPLINK_COORD_SLOTS; i++)
		if (exchange_open(&u->coord_slots[i].x, u->coord, &u->coord_pipes, u->timeout_ms) != 0)
			return -1;
	return 0;
}

int rt_uplink_open(struct rt_uplink *u, const char *collector, const char *coordinator,
		   uint32_t buffer_count, uint32_t outbox_cap, int timeout_ms,
		   const struct rt_wire_buf *register_msg, char *err, size_t errlen)
{
	memset(u, 0, sizeof *u);
	u->timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
	if (collector && collector[0]) {
		if (dial(&u->coll, collector, &u->coll_pipes, &u->coll_dial, err, errlen) != 0)
			return -1;
		u->coll_open = 1;
		if (open_slots(u, buffer_count, err, errlen) != 0) {
			rt_uplink_close(u);
			return -1;
		}
	}
	if (coordinator && coordinator[0]) {
		if (dial(&u->coord, coordinator, &u->coord_pipes, &u->coord_dial, err, errlen) != 0) {
			rt_uplink_close(u);
			return -1;
		}
		u->coord_open = 1;
		u->out_cap = outbox_cap ? outbox_cap : 1024;
		u->outbox = calloc(u->out_cap, sizeof *u->outbox);
		u->out_trigger = calloc(u->out_cap, sizeof *u->out_trigger);
		u->out_lo = calloc(u->out_cap, sizeof *u->out_lo);
		if (!u->outbox || !u->out_trigger || !u->out_lo || open_coord_slots(u) != 0) {
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
	exchange_close(&u->register_x);
	for (i = 0; i < RT_UPLINK_COORD_SLOTS; i++) {
		exchange_close(&u->coord_slots[i].x);
		rt_wire_buf_free(&u->coord_slots[i].msg);
	}
	if (u->coll_open)
		rt_nng_close_bounded(u->coll, RT_NNG_CLOSE_WAIT_MS);
	if (u->coord_open)
		rt_nng_close_bounded(u->coord, RT_NNG_CLOSE_WAIT_MS);
	for (k = 0; u->outbox && k < u->out_cap; k++)
		rt_wire_buf_free(&u->outbox[k]);
	free(u->outbox);
	free(u->out_trigger);
	free(u->out_lo);
	rt_wire_buf_free(&u->register_msg);
	memset(u, 0, sizeof *u);
}

struct rt_uplink_slot *rt_uplink_free_slot(struct rt_uplink *u)
{
	int i;
	if (!u->coll_open)
		return NULL;
	for (i = 0; i < RT_UPLINK_SLOTS; i++)
		if (rt_reqrep_state(&u->slots[i].x.rr) == RT_REQREP_FREE)
			return &u->slots[i];
	return NULL;
}

uint32_t rt_uplink_inflight(const struct rt_uplink *u)
{
	uint32_t n = 0;
	int i;
	for (i = 0; i < RT_UPLINK_SLOTS; i++)
		if (rt_reqrep_state(&u->slots[i].x.rr) != RT_REQREP_FREE)
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
	if (x->pipes) {
		x->pipes_at_send = atomic_load_explicit(&x->pipes->n, memory_order_acquire);
		x->gen_at_send = atomic_load_explicit(&x->pipes->gen, memory_order_acquire);
	}
	/* the callback sees seq, keep and the pipe counts set above (the
	 * send's release store pairs with its acquire) */
	rt_reqrep_send(&x->rr, m, x->timeout_ms);
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
	/* FREE pairs with the acquire in rt_uplink_free_slot: the slot's fields are
	 * reset before another send takes it */
	rt_reqrep_release(&s->x.rr);
}

static uint32_t fair_slot(struct rt_uplink *u, uint32_t id);

/*
 * A full outbox makes room fairly: it drops the oldest message of the trigger id
 * holding the most (messages in flight are not in the ring), unless that is
 * the incoming message's own id — a storm fills the outbox with its own messages
 * and loses them, never a quiet trigger's. 0 if a place was freed.
 */
static int make_room_fairly(struct rt_uplink *u, uint32_t incoming)
{
	uint32_t i, f = fair_slot(u, incoming), busiest = 0, j;
	struct rt_wire_buf gone;
	for (i = 1; i < u->nfair; i++)
		if (u->fair[i].queued > u->fair[busiest].queued)
			busiest = i;
	/* The incoming message counts for its id: a storm loses its own. */
	if (busiest == f || u->fair[f].queued + 1 > u->fair[busiest].queued)
		return -1;
	for (j = 0; j < u->out_len; j++)
		if (fair_slot(u, u->out_trigger[(u->out_head + j) % u->out_cap]) == busiest)
			break;
	if (j == u->out_len)
		return -1;
	gone = u->outbox[(u->out_head + j) % u->out_cap];
	for (; j + 1 < u->out_len; j++) {
		uint32_t to = (u->out_head + j) % u->out_cap, from = (u->out_head + j + 1) % u->out_cap;
		u->outbox[to] = u->outbox[from];
		u->out_trigger[to] = u->out_trigger[from];
		u->out_lo[to] = u->out_lo[from];
	}
	u->outbox[(u->out_head + u->out_len - 1) % u->out_cap] = gone; /* its memory is reused */
	u->out_len--;
	u->fair[busiest].queued--;
	u->st.coord_dropped++;
	u->st.coord_evicted++;
	return 0;
}

int rt_uplink_post(struct rt_uplink *u, const struct rt_wire_buf *msg, uint32_t trigger_id,
		   uint64_t route_lo)
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
	u->out_lo[slot] = route_lo;
	b->len = 0;
	if (rt_wire_buf_reserve(b, msg->len) != 0) {
		u->st.coord_dropped++;
		return -1;
	}
	memcpy(b->data, msg->data, msg->len);
	b->len = msg->len;
	u->out_len++;
	u->fair[fair_slot(u, trigger_id)].queued++;
	return 0;
}

int rt_uplink_take(struct rt_uplink *u, struct rt_wire_buf *msg, uint32_t *trigger_id,
		   uint64_t *route_lo)
{
	struct rt_wire_buf *b;
	uint32_t f;
	if (!u->coord_open || !u->out_len)
		return -1;
	b = &u->outbox[u->out_head];
	if (rt_wire_buf_reserve(msg, b->len) != 0)
		return -1;
	memcpy(msg->data, b->data, b->len);
	msg->len = b->len;
	*trigger_id = u->out_trigger[u->out_head];
	*route_lo = u->out_lo[u->out_head];
	b->len = 0;
	u->out_head = (u->out_head + 1) % u->out_cap;
	u->out_len--;
	f = fair_slot(u, *trigger_id);
	if (u->fair[f].queued)
		u->fair[f].queued--;
	return 0;
}

void rt_uplink_cancel(struct rt_uplink *u)
{
	int i;
	for (i = 0; i < RT_UPLINK_SLOTS; i++)
		if (rt_reqrep_state(&u->slots[i].x.rr) != RT_REQREP_FREE)
			rt_reqrep_cancel(&u->slots[i].x.rr);
	for (i = 0; i < RT_UPLINK_COORD_SLOTS; i++)
		if (rt_reqrep_state(&u->coord_slots[i].x.rr) != RT_REQREP_FREE)
			rt_reqrep_cancel(&u->coord_slots[i].x.rr);
}

int rt_uplink_maybe_delivered(const struct rt_exchange *x)
{
	if (!x->pipes)
		return 1;
	return x->pipes_at_send > 0 ||
	       atomic_load_explicit(&x->pipes->gen, memory_order_acquire) != x->gen_at_send;
}

int rt_uplink_take_held(struct rt_uplink *u, uint64_t *route_lo)
{
	if (!u->nheld)
		return -1;
	*route_lo = u->held_lo[--u->nheld];
	return 0;
}

int rt_uplink_take_acked(struct rt_uplink *u, uint64_t *route_lo)
{
	if (!u->nacked)
		return -1;
	*route_lo = u->acked_lo[--u->nacked];
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
	u->fair[u->nfair].queued = 0;
	u->fair[u->nfair].served = 0;
	return u->nfair++;
}

/*
 * Take the next message to send out of the ring into slot `cs`: the oldest
 * one of the trigger id, among those with messages waiting, served least
 * recently. Why: under a trigger storm the coordinator takes messages slower
 * than the storm posts them and the outbox fills with the storm's; in FIFO
 * order (or fair only within a window near the head) a quiet trigger's
 * message would wait behind seconds of the storm's, long enough for the
 * other hosts to evict the trace. Ids are few (RT_UPLINK_FAIR_IDS), so the
 * choice is a scan of the ids; finding the message is a scan of the ring up
 * to it, short for the busy ids (theirs are near the head) and done once per
 * message for a quiet one. The entries it jumps over shift back one place,
 * so each id keeps its own order. The slot's old buffer takes the chosen
 * one's place in the ring (memory is reused).
 */
static void take_fair(struct rt_uplink *u, struct rt_uplink_coord_slot *cs)
{
	uint32_t i, f, best = 0, chosen_f = 0;
	uint64_t best_served = UINT64_MAX;
	struct rt_wire_buf chosen;
	uint32_t trig;
	uint64_t lo;
	for (f = 0; f < u->nfair; f++)
		if (u->fair[f].queued && u->fair[f].served < best_served) {
			best_served = u->fair[f].served;
			chosen_f = f;
		}
	for (i = 0; i < u->out_len; i++)
		if (fair_slot(u, u->out_trigger[(u->out_head + i) % u->out_cap]) == chosen_f)
			break;
	best = i < u->out_len ? i : 0; /* counts out of step cannot happen; be safe */
	chosen = u->outbox[(u->out_head + best) % u->out_cap];
	trig = u->out_trigger[(u->out_head + best) % u->out_cap];
	lo = u->out_lo[(u->out_head + best) % u->out_cap];
	for (i = best; i > 0; i--) {
		uint32_t to = (u->out_head + i) % u->out_cap, from = (u->out_head + i - 1) % u->out_cap;
		u->outbox[to] = u->outbox[from];
		u->out_trigger[to] = u->out_trigger[from];
		u->out_lo[to] = u->out_lo[from];
	}
	if (best)
		u->st.coord_reordered++;
	u->outbox[u->out_head] = cs->msg;
	u->outbox[u->out_head].len = 0;
	cs->msg = chosen;
	cs->trigger_id = trig;
	cs->route_lo = lo;
	u->out_head = (u->out_head + 1) % u->out_cap;
	u->out_len--;
	f = fair_slot(u, trig);
	if (u->fair[f].queued)
		u->fair[f].queued--;
	u->fair[f].served = ++u->fair_clock;
}

/*
 * A message that was not acknowledged goes back to the ring's front (its id's
 * oldest). If the ring filled meanwhile, room is made fairly, or the message
 * is dropped and counted.
 */
static void requeue_front(struct rt_uplink *u, struct rt_uplink_coord_slot *cs)
{
	struct rt_wire_buf spare;
	if (u->out_len == u->out_cap && make_room_fairly(u, cs->trigger_id) != 0) {
		u->st.coord_dropped++;
		cs->msg.len = 0;
		return;
	}
	u->out_head = (u->out_head + u->out_cap - 1) % u->out_cap;
	spare = u->outbox[u->out_head];
	u->outbox[u->out_head] = cs->msg;
	u->out_trigger[u->out_head] = cs->trigger_id;
	u->out_lo[u->out_head] = cs->route_lo;
	cs->msg = spare;
	cs->msg.len = 0;
	u->out_len++;
	u->fair[fair_slot(u, cs->trigger_id)].queued++;
}

uint32_t rt_uplink_coord_inflight(const struct rt_uplink *u)
{
	uint32_t n = 0;
	int i;
	for (i = 0; i < RT_UPLINK_COORD_SLOTS; i++)
		if (rt_reqrep_state(&u->coord_slots[i].x.rr) != RT_REQREP_FREE)
			n++;
	return n;
}

/* A finished REGISTER: acknowledged, or register again (first) after the back-off. */
static void finish_register(struct rt_uplink *u, uint64_t now_ns)
{
	if (rt_reqrep_state(&u->register_x.rr) != RT_REQREP_DONE)
		return;
	if (u->register_x.ok) {
		memcpy(u->view, u->view_keep, u->register_x.kept * sizeof *u->view);
		u->view_n = u->register_x.kept;
		u->view_gen++;
		u->coord_fails_in_row = 0;
		u->st.coord_acked++;
		u->st.registrations++;
		u->registered = 1;
		if (u->register_refused)
			rt_log(RT_LOG_INFO, "the coordinator accepted this agent's registration");
		u->register_refused = 0;
	} else {
		/* Refused is not a network failure: say once why nothing will be
		 * collected from this host until it is resolved. */
		if (u->register_x.status == RT_ACK_REFUSED) {
			u->st.registrations_refused++;
			if (!u->register_refused)
				rt_log(RT_LOG_ERROR,
				       "the coordinator refused this agent's registration: another "
				       "live agent holds this --agent-id at another address (without "
				       "TLS an id moves only after --agent-ttl of silence), or the "
				       "coordinator will not dial this --listen address; its log says "
				       "which. Triggers and slices wait (spooled) until it is accepted");
			u->register_refused = 1;
		}
		u->st.coord_failed++;
		u->coord_fails_in_row++;
		u->registered = 0;
		u->coord_retry_ns = now_ns + COORD_RETRY_NS;
		u->next_register_ns = now_ns;
	}
	/* pairs with the acquire of register_x.state (FREE) in rt_uplink_pump_coordinator */
	rt_reqrep_release(&u->register_x.rr);
}

/* Finished messages: an ACK frees the slot; a failure requeues and backs off. */
static void finish_messages(struct rt_uplink *u, uint64_t now_ns)
{
	int i;
	for (i = 0; i < RT_UPLINK_COORD_SLOTS; i++) {
		struct rt_uplink_coord_slot *cs = &u->coord_slots[i];
		if (rt_reqrep_state(&cs->x.rr) != RT_REQREP_DONE)
			continue;
		if (cs->x.ok) {
			u->st.coord_acked++;
			u->coord_fails_in_row = 0;
			if (u->nacked < RT_UPLINK_ACKED)
				u->acked_lo[u->nacked++] = cs->route_lo;
			cs->msg.len = 0;
		} else {
			u->st.coord_failed++;
			u->coord_fails_in_row++;
			u->coord_retry_ns = now_ns + COORD_RETRY_NS;
			if (rt_uplink_maybe_delivered(&cs->x) && u->nheld < RT_UPLINK_ACKED)
				u->held_lo[u->nheld++] = cs->route_lo;
			requeue_front(u, cs);
			u->requeued = 1;
		}
		/* pairs with the acquire of the slot's state (FREE) in rt_uplink_pump_coordinator */
		rt_reqrep_release(&cs->x.rr);
	}
}

void rt_uplink_ask(struct rt_uplink *u, uint64_t now_ns)
{
	uint64_t at = u->register_sent_ns + COORD_RETRY_NS;
	if (at < now_ns)
		at = now_ns;
	if (u->coord_open && u->register_msg.len && u->next_register_ns > at)
		u->next_register_ns = at;
}

void rt_uplink_pump_coordinator(struct rt_uplink *u, uint64_t now_ns)
{
	int i;
	if (!u->coord_open)
		return;
	finish_register(u, now_ns);
	finish_messages(u, now_ns);
	if (now_ns < u->coord_retry_ns)
		return;
	if (u->register_msg.len && now_ns >= u->next_register_ns &&
	    rt_reqrep_state(&u->register_x.rr) == RT_REQREP_FREE) {
		u->next_register_ns = now_ns + REGISTER_EVERY_NS;
		u->register_sent_ns = now_ns;
		if (start_send(&u->register_x, 0, u->register_msg.data, u->register_msg.len) == 0)
			u->st.coord_sent++;
	}
	if (u->register_msg.len && !u->registered)
		return;
	for (i = 0; i < RT_UPLINK_COORD_SLOTS && u->out_len; i++) {
		struct rt_uplink_coord_slot *cs = &u->coord_slots[i];
		if (rt_reqrep_state(&cs->x.rr) != RT_REQREP_FREE)
			continue;
		take_fair(u, cs);
		if (start_send(&cs->x, 0, cs->msg.data, cs->msg.len) == 0) {
			u->st.coord_sent++;
		} else {
			/* No memory for an nng message: try again at the next pass. */
			requeue_front(u, cs);
			break;
		}
	}
}
