/*
 * coordinator/handover.c — a trace's slices handed from one member to the member
 * that holds its trigger (docs/scaling.md, "Hand-over between members").
 *
 * How it works. An orphan group (slices of a trace, no TRIGGER for it here) of a
 * sharded member is offered, once a second, to one other live member at a time
 * (peers.c picks them in ring order): every stored slice of its traces goes, byte
 * for byte as stored, as a SLICE request on a REQ context of that member's peer
 * socket (its --listen URL). The taker answers each with an ACK: 0 once the slice
 * is committed in its store (its group commit), RT_ACK_NOT_HERE when it does not
 * hold the trace's trigger. The nng callback only records the answer in the
 * offer's slot (rt_reqrep DONE); the loop applies it to the group (if the group is
 * still the one that offered). When every slice the group holds was taken, the
 * loop deletes them here and releases the group without a row: the trace lives at
 * the taker only. A round with any other answer is tried again a second later with
 * the next member (the trace's home member first); an offer in flight holds the
 * collect timeout's close (bounded by the offer's own timeout), so a row is never
 * written here for a trace a member took meanwhile, and so does a home member
 * that is down (bounded by --state-ttl): it may hold the trigger and return.
 *
 * The taking side is coord_handover_take: a SLICE on the coordinator socket is a
 * member's offer (agents send slices to the collector socket only).
 */
#include "coord_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/figures.h"
#include "daemon/guard.h"
#include "daemon/ring.h"

#define HO_SLOTS 64                      /* offers in flight at once */
#define HO_TIMEOUT_MS 5000               /* one offer's send and answer, each */
#define HO_RETRY_NS 1000000000ull        /* a round per second per orphan group */
#define HO_HOLD_NS 5000000000ull         /* a triggered group waits this for an announced part */

enum { HO_TAKEN = 0, HO_NOT_HERE = 1, HO_FAILED = 2 };

struct ho_slot {
	struct rt_reqrep rr;
	int ctx_open;
	int pull;          /* an ask ("handover ..."), not an offer */
	uint32_t have;     /* an ask's answer: slices the member will offer */
	uint64_t group_id; /* the offering group's id: a released group's answer is dropped */
	uint32_t group;    /* its index */
	int result;        /* HO_*, written by the callback before DONE */
};

struct coord_handover {
	struct ho_slot slot[HO_SLOTS];
	/* figures (the loop's) */
	uint64_t offers_sent, offers_accepted, offers_not_here, offers_failed;
	uint64_t traces_out, slices_in, offers_refused_here;
	uint64_t orphans_waited; /* orphan groups held past the collect timeout for their home */
	uint64_t pulls_sent, pulls_answered_have, orphans_reopened;
};

/* nng's thread: the answer into the slot, then DONE for the loop. */
static void offer_done(struct rt_reqrep *rr, nng_msg *reply)
{
	struct ho_slot *s = rr->arg;
	struct rt_wire_msg m;
	s->result = HO_FAILED;
	if (reply && s->pull) {
		char text[64];
		size_t n = nng_msg_len(reply) < sizeof text - 1 ? nng_msg_len(reply) : sizeof text - 1;
		unsigned u;
		memcpy(text, nng_msg_body(reply), n);
		text[n] = 0;
		if (sscanf(text, "have %u", &u) == 1) {
			s->have = u;
			s->result = HO_TAKEN;
		}
		nng_msg_free(reply);
		reply = NULL;
	}
	if (reply) {
		if (rt_wire_decode(nng_msg_body(reply), nng_msg_len(reply), &m) == 0 &&
		    m.type == RT_WIRE_ACK) {
			if (m.ack.status == 0)
				s->result = HO_TAKEN;
			else if (m.ack.status == RT_ACK_NOT_HERE)
				s->result = HO_NOT_HERE;
		}
		rt_wire_msg_free(&m);
		nng_msg_free(reply);
	}
	rt_reqrep_finish(rr);
}

int coord_handover_open(struct rt_coord *c)
{
	struct coord_handover *h = calloc(1, sizeof *h);
	if (!h)
		return -1;
	for (int i = 0; i < HO_SLOTS; i++)
		if (rt_reqrep_init(&h->slot[i].rr, offer_done, &h->slot[i]) != 0) {
			c->handover = h;
			coord_handover_close(c);
			return -1;
		}
	c->handover = h;
	return 0;
}

void coord_handover_close(struct rt_coord *c)
{
	struct coord_handover *h = c->handover;
	if (!h)
		return;
	for (int i = 0; i < HO_SLOTS; i++) {
		rt_reqrep_fini(&h->slot[i].rr);
		if (h->slot[i].ctx_open)
			nng_ctx_close(h->slot[i].rr.ctx);
	}
	free(h);
	c->handover = NULL;
}

/* The answers that came: each to its group (if still the one that offered). */
void coord_handover_tick(struct rt_coord *c)
{
	struct coord_handover *h = c->handover;
	if (!h)
		return;
	for (int i = 0; i < HO_SLOTS; i++) {
		struct ho_slot *s = &h->slot[i];
		struct coord_group *g;
		if (rt_reqrep_state(&s->rr) != RT_REQREP_DONE)
			continue;
		g = &c->groups[s->group];
		if (s->pull) {
			/* a member will offer parts: the close waits a little for them */
			if (s->result == HO_TAKEN && s->have && g->id == s->group_id) {
				g->ho_hold_ns = coord_now_ns() + HO_HOLD_NS;
				h->pulls_answered_have++;
			}
			nng_ctx_close(s->rr.ctx);
			s->ctx_open = 0;
			rt_reqrep_release(&s->rr);
			continue;
		}
		if (s->result == HO_TAKEN)
			h->offers_accepted++;
		else if (s->result == HO_NOT_HERE)
			h->offers_not_here++;
		else
			h->offers_failed++;
		if (g->id == s->group_id && g->ho_inflight) {
			g->ho_inflight--;
			g->ho_acked += s->result == HO_TAKEN;
		}
		nng_ctx_close(s->rr.ctx);
		s->ctx_open = 0;
		rt_reqrep_release(&s->rr);
	}
}

struct offer_ctx {
	struct rt_coord *c;
	struct coord_group *g;
	nng_socket sock;
	uint32_t found;
};

static int offer_slice(void *arg, const struct rt_store_slice *sl)
{
	struct offer_ctx *o = arg;
	struct coord_handover *h = o->c->handover;
	struct ho_slot *s = NULL;
	nng_msg *m;
	o->found++;
	for (int i = 0; i < HO_SLOTS && !s; i++)
		if (rt_reqrep_state(&h->slot[i].rr) == RT_REQREP_FREE)
			s = &h->slot[i];
	/* No slot, or nng refused: the round stays short of its slices, and is
	 * tried again (a round counts only when every slice was taken). */
	if (!s || nng_msg_alloc(&m, 0) != 0)
		return 0;
	if (nng_msg_append(m, sl->msg, sl->msg_len) != 0 || nng_ctx_open(&s->rr.ctx, o->sock) != 0) {
		nng_msg_free(m);
		return 0;
	}
	s->ctx_open = 1;
	s->pull = 0;
	s->group_id = o->g->id;
	s->group = (uint32_t)(o->g - o->c->groups);
	s->result = HO_FAILED;
	o->g->ho_inflight++;
	o->g->ho_sent++;
	h->offers_sent++;
	rt_reqrep_send(&s->rr, m, HO_TIMEOUT_MS);
	return 0;
}

static uint32_t group_slices(const struct coord_group *g)
{
	uint32_t n = 0;
	for (uint32_t j = 0; j < g->ntraces; j++)
		n += g->traces[j].slices;
	return n;
}

int coord_handover_group(struct rt_coord *c, struct coord_group *g, uint64_t now)
{
	struct coord_handover *h = c->handover;
	struct offer_ctx o = { c, g, NNG_SOCKET_INITIALIZER, 0 };
	if (!h || g->has_trigger || g->ho_inflight)
		return 0;
	if (g->ho_sent) { /* a round answered */
		uint32_t total = group_slices(g);
		if (g->ho_acked == g->ho_sent && g->ho_sent == total) {
			/* Every slice here is committed at the taker: ours go, no row. */
			for (uint32_t j = 0; j < g->ntraces; j++)
				rt_store_delete_trace(c->store, g->traces[j].hi, g->traces[j].lo);
			h->traces_out += g->ntraces;
			coord_log(c, LOG_INFO, "trace %016llx%016llx: %u slices handed over to a member "
				  "that holds its trigger", (unsigned long long)g->traces[0].hi,
				  (unsigned long long)g->traces[0].lo, total);
			return 1;
		}
		g->ho_sent = g->ho_acked = 0;
	}
	/* The first round a second after the group opened: a slice that merely
	 * raced ahead of its trigger here is joined by it before any offer. */
	if (!g->ho_next_ns) {
		int live, home = coord_peers_home(c, g->traces[0].lo, &live);
		g->ho_next_ns = g->created_ns + HO_RETRY_NS;
		g->ho_peer = home >= 0 ? (uint32_t)home : 0; /* the home member first */
	}
	if (now < g->ho_next_ns)
		return 0;
	g->ho_next_ns = now + HO_RETRY_NS;
	if (coord_peers_next(c, &g->ho_peer, &o.sock) < 0)
		return 0;
	for (uint32_t j = 0; j < g->ntraces; j++)
		rt_store_slices(c->store, g->traces[j].hi, g->traces[j].lo, offer_slice, &o);
	return 0;
}

int coord_handover_waits(struct rt_coord *c, struct coord_group *g, uint64_t now)
{
	int live;
	if (!c->handover || g->has_trigger)
		return 0;
	if (g->ho_inflight)
		return 1;
	if (coord_peers_home(c, g->traces[0].lo, &live) < 0)
		return 0;
	if (live) {
		if (g->ho_waited != 1)
			return 0;
		/* The member it waited for is back: one round to it before the close. */
		g->ho_waited = 2;
		g->ho_next_ns = 0;
		return 1;
	}
	if (now - g->created_ns < (uint64_t)(c->cfg.state_ttl * 1e9)) {
		if (g->ho_waited != 1) {
			g->ho_waited = 1;
			c->handover->orphans_waited++;
		}
		return 1;
	}
	return 0;
}

/*
 * A member's offer: taken (stored as a slice from its agent, acknowledged after
 * the commit) only when this member holds the trace's trigger; else 404.
 */
void coord_handover_take(struct rt_coord *c, struct coord_in *in, const struct rt_wire_msg *m)
{
	struct coord_handover *h = c->handover;
	if (c->tls && !(in->peer.tls && rt_name_is_coordinator(in->peer.name))) {
		c->sec.slices_refused++;
		in->durable = 0;
		coord_reply_ack(c, in, RT_ACK_REFUSED, NULL, 0);
		return;
	}
	if (!h || m->slice.trace_lo == 0 || !coord_trace_triggered_here(c, m->slice.trace_lo)) {
		if (h)
			h->offers_refused_here++;
		in->durable = 0;
		coord_reply_ack(c, in, RT_ACK_NOT_HERE, NULL, 0);
		return;
	}
	h->slices_in++;
	coord_process_slices(c, &in, 1);
}

static struct ho_slot *free_slot(struct coord_handover *h)
{
	for (int i = 0; i < HO_SLOTS; i++)
		if (rt_reqrep_state(&h->slot[i].rr) == RT_REQREP_FREE)
			return &h->slot[i];
	return NULL;
}

/* A named agent said it holds bytes of the trace that have not come for a second. */
static int starving(const struct coord_group *g, uint64_t now)
{
	if (now - g->last_activity_ns < HO_RETRY_NS)
		return 0;
	for (uint32_t i = 0; i < g->ncells; i++) {
		const struct coord_cell *x = &g->cells[i];
		if (x->named && x->state == CELL_REPLIED && x->buffers && x->received < x->expect)
			return 1;
	}
	return 0;
}

void coord_handover_pull(struct rt_coord *c, struct coord_group *g, uint64_t now)
{
	struct coord_handover *h = c->handover;
	nng_socket sock;
	if (!h || now < g->ho_next_ns || !starving(g, now))
		return;
	g->ho_next_ns = now + HO_RETRY_NS;
	for (uint32_t i = 0; i < RT_RING_MAX; i++) {
		int other = coord_peers_other(c, i, &sock);
		if (other < 0)
			break; /* past the ring */
		if (other == 2) /* down: it may hold the part and return; the close waits */
			g->ho_hold_ns = now + HO_HOLD_NS;
		for (uint32_t j = 0; other == 1 && j < g->ntraces; j++) {
			struct ho_slot *s = free_slot(h);
			char text[64 + RT_COORD_URL_MAX];
			nng_msg *m;
			int n = snprintf(text, sizeof text, "handover %016llx %016llx %s",
					 (unsigned long long)g->traces[j].hi,
					 (unsigned long long)g->traces[j].lo, c->cfg.member_id);
			if (!s || nng_msg_alloc(&m, 0) != 0)
				return;
			if (nng_msg_append(m, text, (size_t)n + 1) != 0 ||
			    nng_ctx_open(&s->rr.ctx, sock) != 0) {
				nng_msg_free(m);
				return;
			}
			s->ctx_open = 1;
			s->pull = 1;
			s->have = 0;
			s->group_id = g->id;
			s->group = (uint32_t)(g - c->groups);
			s->result = HO_FAILED;
			h->pulls_sent++;
			rt_reqrep_send(&s->rr, m, HO_TIMEOUT_MS);
		}
	}
}

size_t coord_handover_request(struct rt_coord *c, const char *req, size_t len, char *out,
			      size_t cap)
{
	unsigned long long hi, lo;
	char text[64 + RT_COORD_URL_MAX], member[RT_RING_ID_MAX] = "";
	uint32_t n = 0;
	size_t k = len < sizeof text - 1 ? len : sizeof text - 1;
	memcpy(text, req, k);
	text[k] = 0;
	if (sscanf(text, "handover %llx %llx %31s", &hi, &lo, member) < 2 || !lo)
		return (size_t)snprintf(out, cap, "error: handover TRACE_HI TRACE_LO MEMBER");
	if (c->handover && (n = coord_orphan_reopen(c, hi, lo))) {
		struct coord_group *g;
		uint64_t v;
		if (coord_map_get(&c->traces, lo, &v)) {
			int at = coord_peers_index(c, member);
			g = &c->groups[v >> 8];
			/* offer now, to the member that asked first */
			g->ho_next_ns = coord_now_ns();
			if (at >= 0)
				g->ho_peer = (uint32_t)at;
		}
		c->handover->orphans_reopened++;
	}
	return (size_t)snprintf(out, cap, "have %u", n);
}

void coord_handover_figures(struct rt_figures *w, struct rt_coord *c)
{
	struct coord_handover *h = c->handover;
	if (!h)
		return;
	rt_fig_section(w, "handover");
	rt_fig_u64(w, "offers_sent", h->offers_sent);
	rt_fig_u64(w, "offers_accepted", h->offers_accepted);
	rt_fig_u64(w, "offers_not_here", h->offers_not_here);
	rt_fig_u64(w, "offers_failed", h->offers_failed);
	rt_fig_u64(w, "traces_out", h->traces_out);
	rt_fig_u64(w, "slices_in", h->slices_in);
	rt_fig_u64(w, "offers_refused_here", h->offers_refused_here);
	rt_fig_u64(w, "orphans_waited", h->orphans_waited);
	rt_fig_u64(w, "asks_sent", h->pulls_sent);
	rt_fig_u64(w, "asks_answered_have", h->pulls_answered_have);
	rt_fig_u64(w, "orphans_reopened", h->orphans_reopened);
}
