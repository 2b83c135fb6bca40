/*
 * coordinator/traversal.c — following breadcrumbs, and deciding when a trace is whole.
 *
 * A *group* is what one trigger names: the triggered trace and its lateral
 * traces (at most 64, so a set of traces is a uint64_t mask). Triggers from
 * several hosts for the same trace land in the group that already holds it
 * (the trace map, trace_lo -> group), so they merge into one traversal.
 *
 * Each (trace, agent) pair is a *cell*. A cell is *named* when the trigger's
 * origin or a breadcrumb points at the agent for that trace. Every named cell
 * is asked once with a REMOTE_TRIGGER: a group's new cells at one agent make
 * one *ask*; asks wait in a queue until the end of the loop's phase, and then
 * all asks for one agent (and trigger id) travel in one request of up to 64
 * traces, different agents in parallel. A burst of triggers thus costs each
 * agent a few requests, not one per group (each request costs the agent a
 * drain and an open-writer count before it can answer). The BREADCRUMB_REPLY pins the
 * traces there, says how many buffers/bytes the agent has had for each
 * (cumulative), and names more agents, which become new cells — until no cell
 * is left to ask: the time from the group's creation to that instant is the
 * traversal latency. A request that fails is retried agent_retries times, and
 * one that timed out is asked again after that while a round trip fits before
 * the collect timeout (ask_again); an agent the directory does not know or
 * that never answers is a failed cell, recorded against the trace.
 *
 * Slices (collector.c) add to their cell's `received`. A group closes when its
 * traversal is idle, every agent with data has delivered at least the bytes it
 * announced, and no slice came for `settle` seconds — or at its collect
 * deadline (collect_timeout after its first news; weaving starts it again:
 * coord_group_deadline).
 * A trace is coherent when every named agent delivered (received > 0 and
 * >= what it announced); a named agent with no data (evicted) or a failed one
 * makes it incoherent. Closed traces are remembered for state_ttl so that a
 * slice arriving later is stored as late instead of opening a new group.
 *
 * Threads: everything here belongs to whoever holds c->loop_mu (coord_internal.h):
 * the loop thread, except while it waits for work or commits the store. A
 * reply's nng callback (req_cb, called at the end of the round trip that
 * daemon/reqrep.h drives) then takes loop_mu itself and acts on the reply at
 * once — the next round of the traversal leaves from nng's thread, with no
 * wake-up of the loop in between. Otherwise (the loop is inside a turn) req_cb
 * only pushes its own coord_req on c->ready_req and sets c->replies_ready,
 * under c->mu, and the loop acts on it at its next poll point
 * (coord_traversal_serve): before and between the phases of a turn and between
 * the groups of the traversal's tick, so a reply that comes while the turn
 * stores slices or closes traces is acted on in that turn, not after it. Each
 * reply's round trip and hand-off are sampled (rt_coord_stage_samples,
 * `retrace status`).
 *
 * A slice for a trace no trigger announced (the trigger was lost, or is still
 * in an agent's outbox) opens an *orphan* group that asks the sending agent for
 * breadcrumbs, so the traversal happens anyway.
 */
#include "coord_internal.h"

#include <stdlib.h>
#include <string.h>

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t p = 1024;
	while (p < n && p < (1u << 30))
		p <<= 1;
	return p;
}

int coord_traversal_init(struct rt_coord *c)
{
	uint32_t i, n = c->cfg.max_groups ? c->cfg.max_groups : 1;
	c->groups = calloc(n, sizeof *c->groups);
	c->reqs = calloc(COORD_MAX_REQS, sizeof *c->reqs);
	c->asks = calloc(COORD_MAX_ASKS, sizeof *c->asks);
	c->closed_cap = pow2_at_least((uint64_t)n * 4);
	c->closed_ring = calloc(c->closed_cap, sizeof *c->closed_ring);
	if (!c->groups || !c->reqs || !c->asks || !c->closed_ring ||
	    coord_map_init(&c->traces, pow2_at_least((uint64_t)n * 8)) != 0 ||
	    coord_map_init(&c->closed, pow2_at_least((uint64_t)c->closed_cap * 2)) != 0)
		return -1;
	for (i = 0; i < n; i++)
		c->groups[i].next_free = i + 2 <= n ? i + 2 : 0;
	c->group_free = 1;
	for (i = 0; i < COORD_MAX_REQS; i++) {
		c->reqs[i].c = c;
		c->reqs[i].next_free = i + 2 <= COORD_MAX_REQS ? i + 2 : 0;
	}
	c->req_free = 1;
	c->next_group_id = 1;
	c->next_request_id = 1;
	return 0;
}

void coord_traversal_free(struct rt_coord *c)
{
	uint32_t i, n = c->cfg.max_groups ? c->cfg.max_groups : 1;
	if (c->reqs)
		for (i = 0; i < COORD_MAX_REQS; i++) {
			rt_reqrep_fini(&c->reqs[i].rr);
			if (c->reqs[i].reply)
				nng_msg_free(c->reqs[i].reply);
		}
	if (c->groups)
		for (i = 0; i < n; i++)
			free(c->groups[i].cells);
	free(c->groups);
	free(c->reqs);
	free(c->asks);
	free(c->closed_ring);
	coord_map_free(&c->traces);
	coord_map_free(&c->closed);
}

/* ------------------------------------------------------------ groups ---- */

/* The share a trigger id is charged to (created on first use). */
static struct coord_share *share_of(struct rt_coord *c, uint32_t trigger_id)
{
	uint32_t i, free_slot = COORD_SHARES;
	for (i = 0; i < c->nshares; i++) {
		if (c->shares[i].trigger_id == trigger_id)
			return &c->shares[i];
		if (c->shares[i].open == 0 && free_slot == COORD_SHARES && i < COORD_SHARES - 1)
			free_slot = i;
	}
	if (c->nshares < COORD_SHARES - 1)
		free_slot = c->nshares++;
	if (free_slot == COORD_SHARES) { /* every slot busy: the shared "other" entry */
		c->nshares = COORD_SHARES;
		c->shares[COORD_SHARES - 1].trigger_id = 0;
		return &c->shares[COORD_SHARES - 1];
	}
	memset(&c->shares[free_slot], 0, sizeof c->shares[free_slot]);
	c->shares[free_slot].trigger_id = trigger_id;
	return &c->shares[free_slot];
}

/* Most groups one share may hold now: there is always room for one more id. */
static uint32_t share_cap(const struct rt_coord *c, const struct coord_share *sh)
{
	uint32_t i, others = 0, n = c->cfg.max_groups ? c->cfg.max_groups : 1, cap;
	for (i = 0; i < c->nshares; i++)
		if (&c->shares[i] != sh && c->shares[i].open)
			others++;
	cap = n / (others + 2);
	return cap ? cap : 1;
}

static struct coord_group *group_alloc(struct rt_coord *c, uint64_t now, uint32_t trigger_id)
{
	struct coord_group *g;
	struct coord_share *sh = share_of(c, trigger_id);
	uint32_t i;
	if (!c->group_free || sh->open >= share_cap(c, sh)) {
		c->st.groups_dropped++;
		sh->dropped++;
		return NULL;
	}
	i = c->group_free - 1;
	g = &c->groups[i];
	c->group_free = g->next_free;
	free(g->cells);
	memset(g, 0, sizeof *g);
	g->id = c->next_group_id++;
	g->share = (uint32_t)(sh - c->shares) + 1;
	sh->open++;
	sh->opened++;
	g->created_ns = now;
	g->last_activity_ns = now;
	c->groups_open++;
	c->st.groups_opened++;
	return g;
}

static void group_release(struct rt_coord *c, struct coord_group *g)
{
	uint32_t i = (uint32_t)(g - c->groups);
	if (g->share && c->shares[g->share - 1].open)
		c->shares[g->share - 1].open--;
	g->share = 0;
	free(g->cells);
	g->cells = NULL;
	g->ncells = g->cap = 0;
	g->id = 0;
	g->next_free = c->group_free;
	c->group_free = i + 1;
	c->groups_open--;
}

static int find_trace(const struct coord_group *g, uint64_t lo)
{
	uint32_t i;
	for (i = 0; i < g->ntraces; i++)
		if (g->traces[i].lo == lo)
			return (int)i;
	return -1;
}

/* Index of the trace in g (added if new); -1 when the group or the map is full. */
static int group_add_trace(struct rt_coord *c, struct coord_group *g, uint64_t hi, uint64_t lo)
{
	int i = find_trace(g, lo);
	if (i >= 0) {
		if (!g->traces[i].hi)
			g->traces[i].hi = hi;
		return i;
	}
	if (g->ntraces == COORD_GROUP_TRACES ||
	    coord_map_put(&c->traces, lo, (uint64_t)(g - c->groups) << 8 | g->ntraces) != 0) {
		c->st.traces_dropped++;
		return -1;
	}
	i = (int)g->ntraces++;
	memset(&g->traces[i], 0, sizeof g->traces[i]);
	g->traces[i].hi = hi;
	g->traces[i].lo = lo;
	return i;
}

static struct coord_group *group_of(struct rt_coord *c, uint64_t lo, int *idx)
{
	uint64_t v;
	if (!coord_map_get(&c->traces, lo, &v))
		return NULL;
	*idx = (int)(v & 0xff);
	return &c->groups[v >> 8];
}

static void add_trigger_id(struct coord_group *g, uint32_t id)
{
	uint32_t i;
	for (i = 0; i < g->ntrig; i++)
		if (g->trigger_ids[i] == id)
			return;
	if (g->ntrig < RT_STORE_MAX_TRIGGERS)
		g->trigger_ids[g->ntrig++] = id;
}

static struct coord_cell *cell_get(struct coord_group *g, int trace, uint32_t agent, int create)
{
	uint32_t i;
	for (i = 0; i < g->ncells; i++)
		if (g->cells[i].trace == trace && g->cells[i].agent_id == agent)
			return &g->cells[i];
	if (!create)
		return NULL;
	if (g->ncells == g->cap) {
		uint32_t cap = g->cap ? g->cap * 2 : 8;
		struct coord_cell *n = realloc(g->cells, cap * sizeof *n);
		if (!n)
			return NULL;
		g->cells = n;
		g->cap = cap;
	}
	memset(&g->cells[g->ncells], 0, sizeof g->cells[0]);
	g->cells[g->ncells].trace = (uint8_t)trace;
	g->cells[g->ncells].agent_id = agent;
	g->cells[g->ncells].state = CELL_SEEN;
	return &g->cells[g->ncells++];
}

/* The agent holds (or held) part of this trace: ask it, once. */
static void name_agent(struct coord_group *g, int trace, uint32_t agent)
{
	struct coord_cell *x;
	if (agent == 0 || !(x = cell_get(g, trace, agent, 1)) || x->named)
		return;
	x->named = 1;
	if (x->state == CELL_SEEN)
		x->state = CELL_NEW;
	g->dirty = 1;
}

/* --------------------------------------------------- remote triggers ---- */

/* The round trip ended (daemon/reqrep.h; reply NULL: failed or timed out). */
static void req_cb(struct rt_reqrep *rr, nng_msg *reply)
{
	struct coord_req *r = rr->arg;
	struct rt_coord *c = r->c;
	r->ok = reply != NULL;
	r->reply = reply;
	r->done_ns = coord_now_ns();
	/* The loop waits or commits: act on the reply here, and send the next
	 * round from this thread, instead of waking the loop for it. */
	if (r->kind == COORD_REQ_TRAVERSAL && !c->cfg.replies_on_loop &&
	    (pthread_mutex_trylock(&c->loop_mu) == 0 ||
	     /* another agent's reply holds it (a round's replies come together):
	      * wait for that one, not for a turn of the loop */
	     (atomic_load_explicit(&c->loop_idle_hint, memory_order_acquire) &&
	      pthread_mutex_lock(&c->loop_mu) == 0))) {
		if (c->loop_idle) {
			rt_reqrep_finish(&r->rr);
			c->st.replies_direct++;
			coord_handle_reply(c, r);
			coord_traversal_flush(c);
			pthread_mutex_unlock(&c->loop_mu);
			return;
		}
		pthread_mutex_unlock(&c->loop_mu);
	}
	pthread_mutex_lock(&c->mu);
	rt_reqrep_finish(&r->rr);
	r->next_ready = c->ready_req;
	c->ready_req = r;
	/* pairs with the acquire in coord_traversal_serve (ready_req itself is
	 * read under mu) */
	atomic_store_explicit(&c->replies_ready, 1, memory_order_release);
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static struct coord_req *req_alloc(struct rt_coord *c)
{
	struct coord_req *r;
	if (!c->req_free)
		return NULL;
	r = &c->reqs[c->req_free - 1];
	if (!r->rr.aio && rt_reqrep_init(&r->rr, req_cb, r) != 0)
		return NULL;
	c->req_free = r->next_free;
	r->in_use = 1;
	r->stuck = 0;
	return r;
}

static void req_release(struct rt_coord *c, struct coord_req *r)
{
	if (r->reply)
		nng_msg_free(r->reply);
	r->reply = NULL;
	nng_ctx_close(r->rr.ctx);
	r->in_use = 0;
	rt_reqrep_release(&r->rr);
	r->next_free = c->req_free;
	c->req_free = (uint32_t)(r - c->reqs) + 1;
}

/* The REMOTE_TRIGGER for a request's asks: every trace each ask names. */
static int encode_request(struct rt_coord *c, const struct coord_req *r, uint32_t trigger_id)
{
	struct rt_wire_trace traces[RT_WIRE_MAX_TRACES];
	struct rt_wire_remote_trigger m;
	uint32_t p, i, n = 0;
	memset(traces, 0, sizeof traces);
	for (p = 0; p < r->nparts; p++) {
		const struct coord_group *g = &c->groups[r->parts[p].group];
		for (i = 0; i < g->ntraces && n < RT_WIRE_MAX_TRACES; i++)
			if (r->parts[p].mask >> i & 1) {
				traces[n].trace_hi = g->traces[i].hi;
				traces[n].trace_lo = g->traces[i].lo;
				n++;
			}
	}
	m.request_id = r->request_id;
	/* In a sharded group the agent keeps the traces we ask about with us. */
	snprintf(m.member, sizeof m.member, "%s", c->cfg.member_id);
	m.trigger_id = trigger_id;
	m.trace_count = n;
	m.traces = traces;
	c->out.len = 0;
	return rt_wire_encode_remote_trigger(&c->out, &m);
}

/* Send c->out on a fresh context of a's socket as request r (kind and ids set
 * by the caller); 0, or -1 (then r is released). */
static int req_dispatch(struct rt_coord *c, struct coord_req *r, struct coord_agent *a,
			double timeout_s)
{
	nng_msg *m;
	if (nng_ctx_open(&r->rr.ctx, a->sock) != 0) {
		r->rr.ctx = (nng_ctx)NNG_CTX_INITIALIZER;
		req_release(c, r);
		return -1;
	}
	if (nng_msg_alloc(&m, c->out.len) != 0) {
		req_release(c, r);
		return -1;
	}
	memcpy(nng_msg_body(m), c->out.data, c->out.len);
	r->agent_id = a->id;
	r->ok = 0;
	r->sent_ns = coord_now_ns();
	/* nng's timeout bounds the send and then the receive, each: a round
	 * ends within two of them; a second's slack for a loaded machine */
	r->overdue_ns = r->sent_ns + (uint64_t)(2 * timeout_s * 1e9) + 1000000000ull;
	r->overdue = 0;
	rt_reqrep_send(&r->rr, m, (nng_duration)(timeout_s * 1000));
	return 0;
}

/* Send r (its parts filled) to agent a; 0, or -1 (then r is released). */
static int send_request(struct rt_coord *c, struct coord_req *r, struct coord_agent *a,
			uint32_t trigger_id)
{
	r->request_id = c->next_request_id++;
	r->kind = COORD_REQ_TRAVERSAL;
	if (encode_request(c, r, trigger_id) != 0) {
		r->rr.ctx = (nng_ctx)NNG_CTX_INITIALIZER;
		req_release(c, r);
		return -1;
	}
	if (req_dispatch(c, r, a, c->cfg.agent_timeout) != 0)
		return -1;
	a->asked++;
	c->st.remote_sent++;
	c->st.remote_asks += r->nparts;
	return 0;
}

int coord_req_send(struct rt_coord *c, struct coord_agent *a, int kind, uint32_t job,
		   uint64_t tag, uint64_t request_id, double timeout_s)
{
	struct coord_req *r;
	if (!a->sock_open || !(r = req_alloc(c)))
		return -1;
	r->kind = kind;
	r->request_id = request_id;
	r->job = job;
	r->tag = tag;
	r->nparts = 0;
	return req_dispatch(c, r, a, timeout_s);
}

/* Round-trip callbacks that came with no round in flight, over every slot. */
uint64_t coord_req_callbacks_ignored(struct rt_coord *c)
{
	uint64_t n = 0;
	for (uint32_t i = 0; c->reqs && i < COORD_MAX_REQS; i++)
		n += atomic_load_explicit(&c->reqs[i].rr.ignored, memory_order_relaxed);
	return n;
}

void coord_req_free(struct rt_coord *c, struct coord_req *r)
{
	req_release(c, r);
}

/*
 * The loop's backstop for a round trip nng should have ended (its aio timeout)
 * and did not: seen under heavy load, a silent agent's requests neither
 * answered nor failed for ten seconds and more, so its cells never failed and
 * no retry was sent. Cancelling ends the round as a failure through the usual
 * callback (reqrep.c), so the request is retried or its cells fail as for a
 * timeout. The counter says how often nng's own timeout did not do it.
 */
static const char *const req_state_names[] = { "free", "sending", "receiving", "done" };

/* Slot i's request, still held a second past its overdue time, in whatever
 * state: a cancel nng did not end, or a round whose end was never acted on
 * (done, or freed without a reply being handled). Said once per request with
 * what its round trip saw; these are what the stress runs' lost asks must be. */
static void req_audit(struct rt_coord *c, uint32_t i, int state, uint64_t now)
{
	struct coord_req *r = &c->reqs[i];
	if (!r->in_use || r->stuck || now < r->overdue_ns + 1000000000ull)
		return;
	r->stuck = 1;
	c->st.requests_stuck++;
	coord_log(c, LOG_WARN,
		  "request slot %u to agent %u (kind %d) still held %.1f s after it was sent: "
		  "state %s, cancelled %d, ok %d, last result %d, callbacks ignored %u",
		  i, r->agent_id, r->kind, (double)(now - r->sent_ns) / 1e9,
		  state >= 0 && state <= RT_REQREP_DONE ? req_state_names[state] : "?", r->overdue,
		  r->ok, atomic_load(&r->rr.last_rv), atomic_load(&r->rr.ignored));
}

/* One pass over the slots: cancel what is overdue, then audit the slot. */
void coord_req_watchdog(struct rt_coord *c, uint64_t now)
{
	for (uint32_t i = 0; i < COORD_MAX_REQS; i++) {
		struct coord_req *r = &c->reqs[i];
		int state = r->rr.aio ? rt_reqrep_state(&r->rr) : RT_REQREP_FREE;
		if ((state == RT_REQREP_SENDING || state == RT_REQREP_RECEIVING) && !r->overdue &&
		    now >= r->overdue_ns) {
			r->overdue = 1;
			c->st.requests_overdue++;
			coord_log(c, LOG_WARN,
				  "a request to agent %u still %s %.1f s after it was sent: cancelled",
				  r->agent_id, state == RT_REQREP_SENDING ? "unsent" : "unanswered",
				  (double)(now - r->sent_ns) / 1e9);
			rt_reqrep_cancel(&r->rr);
			state = r->rr.aio ? rt_reqrep_state(&r->rr) : RT_REQREP_FREE;
		}
		req_audit(c, i, state, now);
	}
}

int coord_group_add_named(struct rt_coord *c, struct coord_group *g, uint64_t hi, uint64_t lo,
			  uint32_t agent)
{
	int idx;
	struct coord_group *other = group_of(c, lo, &idx);
	if (other && other != g)
		return -1;
	if ((idx = group_add_trace(c, g, hi, lo)) < 0)
		return -1;
	name_agent(g, idx, agent);
	return idx;
}

static void set_cells(struct coord_group *g, uint32_t agent, uint64_t mask, int from, int to)
{
	uint32_t i;
	for (i = 0; i < g->ncells; i++) {
		struct coord_cell *x = &g->cells[i];
		if (x->agent_id == agent && (mask >> x->trace & 1) && x->state == from)
			x->state = (uint8_t)to;
	}
}

static void traversal_check_idle(struct rt_coord *c, struct coord_group *g, uint64_t now)
{
	uint32_t i;
	if (g->traversal_ns || g->inflight || g->dirty)
		return;
	for (i = 0; i < g->ncells; i++)
		if (g->cells[i].state == CELL_NEW || g->cells[i].state == CELL_ASKED ||
		    g->cells[i].state == CELL_OPEN)
			return;
	g->traversal_ns = now - g->created_ns;
	if (!g->traversal_ns)
		g->traversal_ns = 1;
	pthread_mutex_lock(&c->mu);
	c->latency[c->latency_count++ % COORD_LATENCY_RING] = g->traversal_ns;
	pthread_mutex_unlock(&c->mu);
}

/* Queue g's ask to an agent for the next flush; 0, or -1 when the queue is full. */
static int ask_enqueue(struct rt_coord *c, struct coord_group *g, uint32_t agent, uint64_t mask,
		       uint32_t attempt)
{
	struct coord_ask *k;
	if (c->nasks == COORD_MAX_ASKS)
		return -1;
	k = &c->asks[c->nasks++];
	k->group = (uint32_t)(g - c->groups);
	k->group_id = g->id;
	k->agent_id = agent;
	k->mask = mask;
	k->trigger_id = g->ntrig ? g->trigger_ids[0] : 0;
	k->attempt = attempt;
	g->inflight++;
	return 0;
}

/* An ask that could not be sent: its cells go back to "to ask" for the next tick. */
static void ask_unsent(struct rt_coord *c, const struct coord_ask *k)
{
	struct coord_group *g = &c->groups[k->group];
	if (g->id != k->group_id)
		return;
	g->inflight--;
	set_cells(g, k->agent_id, k->mask, CELL_ASKED, CELL_NEW);
	g->dirty = 1;
}

static int ask_order(const void *pa, const void *pb)
{
	const struct coord_ask *a = pa, *b = pb;
	if (a->agent_id != b->agent_id)
		return a->agent_id < b->agent_id ? -1 : 1;
	if (a->trigger_id != b->trigger_id)
		return a->trigger_id < b->trigger_id ? -1 : 1;
	return a->group_id < b->group_id ? -1 : a->group_id > b->group_id;
}

static uint32_t popcount64(uint64_t m)
{
	return (uint32_t)__builtin_popcountll(m);
}

void coord_traversal_flush(struct rt_coord *c)
{
	uint32_t i = 0, n = c->nasks;
	if (!n)
		return;
	c->nasks = 0;
	/* Asks of one agent and trigger id become neighbours; a request carries as
	 * many of them as fit in RT_WIRE_MAX_TRACES traces. */
	qsort(c->asks, n, sizeof *c->asks, ask_order);
	while (i < n) {
		const struct coord_ask *k = &c->asks[i];
		struct coord_agent *a = coord_dir_find(c, k->agent_id);
		struct coord_req *r = a && a->sock_open ? req_alloc(c) : NULL;
		uint32_t j = i, traces = 0;
		if (r)
			r->nparts = 0;
		for (; j < n && c->asks[j].agent_id == k->agent_id &&
		       c->asks[j].trigger_id == k->trigger_id; j++) {
			const struct coord_ask *q = &c->asks[j];
			uint32_t t = popcount64(q->mask);
			if (c->groups[q->group].id != q->group_id)
				continue; /* the group closed (or was adopted) meanwhile */
			if (!r || traces + t > RT_WIRE_MAX_TRACES)
				break;
			r->parts[r->nparts++] = *q;
			traces += t;
		}
		if (!r || !r->nparts || send_request(c, r, a, k->trigger_id) != 0) {
			uint32_t p;
			if (r && !r->nparts)
				req_release(c, r);
			/* Out of request slots or no socket: these asks wait for the next tick. */
			for (p = i; p < (j > i ? j : i + 1); p++)
				ask_unsent(c, &c->asks[p]);
			j = j > i ? j : i + 1;
		}
		i = j;
	}
}

/* Ask every agent with new named cells, one ask per agent (sent at the flush). */
static void dispatch(struct rt_coord *c, struct coord_group *g, uint64_t now)
{
	uint32_t i, j;
	g->dirty = 0;
	for (i = 0; i < g->ncells; i++) {
		struct coord_cell *x = &g->cells[i];
		struct coord_agent *a;
		uint64_t mask = 0;
		if (x->state != CELL_NEW)
			continue;
		for (j = i; j < g->ncells; j++)
			if (g->cells[j].agent_id == x->agent_id && g->cells[j].state == CELL_NEW)
				mask |= 1ull << g->cells[j].trace;
		a = coord_dir_find(c, x->agent_id);
		if (!a || !a->addr[0]) {
			uint32_t k;
			c->st.unknown_agents++;
			coord_log(c, LOG_WARN, "trace group %llu: agent %u is not in the directory",
				  (unsigned long long)g->id, x->agent_id);
			for (k = 0; k < g->ncells; k++)
				if (g->cells[k].agent_id == x->agent_id && g->cells[k].state == CELL_NEW)
					g->cells[k].unknown = 1;
			set_cells(g, x->agent_id, mask, CELL_NEW, CELL_FAILED);
			continue;
		}
		if (ask_enqueue(c, g, x->agent_id, mask, 0) != 0) {
			g->dirty = 1; /* the ask queue is full: try again next tick */
			continue;
		}
		set_cells(g, x->agent_id, mask, CELL_NEW, CELL_ASKED);
	}
	traversal_check_idle(c, g, now);
}

/*
 * A reply that says a writer still holds buffers of the trace is not final: the
 * agent is asked again, soon at first, then less often (10 ms doubling to
 * 320 ms), until it says none or the group's collect timeout makes the trace
 * incoherent. Most open writers are a request's last spans being closed after
 * its response went out: milliseconds.
 */
static void cell_open(struct coord_cell *x, uint32_t open, uint64_t now)
{
	uint32_t shift = x->asks < 5 ? x->asks : 5;
	x->state = CELL_OPEN;
	x->open = open;
	x->ask_again_ns = now + (10000000ull << shift);
	x->asks++;
}

/* Open cells whose time has come are asked again (dispatch sends them). */
static void reask_open_cells(struct coord_group *g, uint64_t now)
{
	uint32_t i;
	for (i = 0; i < g->ncells; i++) {
		struct coord_cell *x = &g->cells[i];
		if (x->state == CELL_OPEN && now >= x->ask_again_ns) {
			x->state = CELL_NEW;
			g->dirty = 1;
		}
	}
}

/* The reply is this request's: same id, from the agent asked. */
static int reply_matches(const struct coord_req *r, struct rt_wire_msg *m)
{
	return rt_wire_decode(nng_msg_body(r->reply), nng_msg_len(r->reply), m) == 0 &&
	       m->type == RT_WIRE_BREADCRUMB_REPLY && m->reply.request_id == r->request_id &&
	       m->reply.agent_id == r->agent_id;
}

/* Apply to g what a breadcrumb reply says of the traces ask k named. */
static void apply_reply(struct coord_group *g, const struct coord_ask *k,
			const struct rt_wire_breadcrumb_reply *rep, uint64_t now)
{
	uint32_t i, j;
	set_cells(g, k->agent_id, k->mask, CELL_ASKED, CELL_REPLIED);
	for (i = 0; i < rep->trace_count; i++) {
		const struct rt_wire_trace *t = &rep->traces[i];
		int idx = find_trace(g, t->trace_lo);
		struct coord_cell *x;
		if (idx < 0 || !(k->mask >> idx & 1) || !(x = cell_get(g, idx, k->agent_id, 0)))
			continue;
		if (t->buffers > x->buffers)
			x->buffers = t->buffers;
		if (t->bytes > x->expect)
			x->expect = t->bytes;
		if (!g->traces[idx].hi)
			g->traces[idx].hi = t->trace_hi;
		if (t->open)
			cell_open(x, t->open, now);
		else
			x->open = 0;
		for (j = 0; j < t->breadcrumb_count; j++)
			if (t->breadcrumbs[j] != k->agent_id)
				name_agent(g, idx, t->breadcrumbs[j]);
	}
}

/*
 * Ask again after a failed request? While retries last, yes. After them, an
 * ask that got no answer at all (a timeout: the agent may only be slow, its
 * loop stalled under load, or not yet reconnected to a coordinator that just
 * restarted) is still asked again while another round trip fits before the
 * group's collect timeout: a cell given up early closes the trace incoherent
 * although the agent holds its slice and would have answered a second later.
 * Only a request that waited (at least half its agent_timeout) counts as
 * timed out, so this paces itself at one attempt per agent_timeout. A request
 * that failed at once, or an answer that came but did not fit (a bad reply),
 * is not asked again past the retries: it could fail at once, and again.
 */
static int ask_again(const struct rt_coord *c, const struct coord_group *g,
		     const struct coord_ask *k, const struct coord_req *r, uint64_t now)
{
	uint64_t round_trip = (uint64_t)(c->cfg.agent_timeout * 1e9);
	if (k->attempt < c->cfg.agent_retries)
		return 1;
	return !r->ok && r->done_ns - r->sent_ns >= round_trip / 2 &&
	       now + round_trip < coord_group_deadline(c, g);
}

/* An ask whose request failed: asked again (ask_again), else its cells fail. */
static void ask_failed(struct rt_coord *c, struct coord_group *g, const struct coord_ask *k,
		       const struct coord_req *r, uint64_t now)
{
	if (ask_again(c, g, k, r, now) && ask_enqueue(c, g, k->agent_id, k->mask,
							     k->attempt + 1) == 0) {
		c->st.remote_retries++;
		return;
	}
	c->st.remote_failed++;
	set_cells(g, k->agent_id, k->mask, CELL_ASKED, CELL_FAILED);
	dispatch(c, g, now);
}

/* A reply's round trip and hand-off, for rt_coord_stage_samples. */
static void stage_sample(struct rt_coord *c, const struct coord_req *r, uint64_t now)
{
	uint64_t v[RT_COORD_STAGES] = { r->done_ns - r->sent_ns, now - r->done_ns };
	pthread_mutex_lock(&c->mu);
	for (int k = 0; k < RT_COORD_STAGES; k++)
		c->stage[k][c->stage_count[k]++ % RT_COORD_STAGE_RING] = v[k];
	pthread_mutex_unlock(&c->mu);
}

uint64_t rt_coord_stage_samples(struct rt_coord *c, int stage, uint64_t from, uint64_t *out,
				size_t max, size_t *n)
{
	uint64_t total, i;
	*n = 0;
	if (stage < 0 || stage >= RT_COORD_STAGES)
		return 0;
	pthread_mutex_lock(&c->mu);
	total = c->stage_count[stage];
	if (total > RT_COORD_STAGE_RING && from < total - RT_COORD_STAGE_RING)
		from = total - RT_COORD_STAGE_RING;
	for (i = from; i < total && *n < max; i++)
		out[(*n)++] = c->stage[stage][i % RT_COORD_STAGE_RING];
	pthread_mutex_unlock(&c->mu);
	return total;
}

void coord_traversal_serve(struct rt_coord *c)
{
	struct coord_req *rq;
	if (atomic_load_explicit(&c->replies_ready, memory_order_acquire)) {
		pthread_mutex_lock(&c->mu);
		rq = c->ready_req;
		c->ready_req = NULL;
		c->replies_ready = 0;
		pthread_mutex_unlock(&c->mu);
		while (rq) {
			struct coord_req *next = rq->next_ready;
			coord_handle_reply(c, rq);
			rq = next;
		}
	}
	coord_traversal_flush(c);
}

void coord_handle_reply(struct rt_coord *c, struct coord_req *r)
{
	uint64_t now = coord_now_ns();
	struct rt_wire_msg m;
	struct coord_agent *a;
	uint32_t p;
	int ok;
	if (r->kind != COORD_REQ_TRAVERSAL) {
		coord_weave_reply(c, r);
		return;
	}
	if (r->ok)
		stage_sample(c, r, now);
	ok = r->ok && reply_matches(r, &m);
	if (r->ok && !ok)
		c->st.remote_bad_replies++;
	if (ok && (a = coord_dir_find(c, r->agent_id)))
		a->answered++;
	if (!ok && (a = coord_dir_find(c, r->agent_id))) {
		a->failed++;
		coord_log(c, LOG_WARN, "agent %u did not answer a remote trigger for %u trace groups (%s)",
			  r->agent_id, r->nparts, a->addr);
	}
	for (p = 0; p < r->nparts; p++) {
		const struct coord_ask *k = &r->parts[p];
		struct coord_group *g = &c->groups[k->group];
		if (g->id != k->group_id || g->closing) /* the group closed meanwhile */
			continue;
		g->inflight--;
		g->last_activity_ns = now;
		if (ok) {
			apply_reply(g, k, &m.reply, now);
			dispatch(c, g, now);
		} else {
			ask_failed(c, g, k, r, now);
		}
	}
	if (r->ok)
		rt_wire_msg_free(&m);
	req_release(c, r);
}

/* ------------------------------------------------- triggers, slices ---- */

static void note_trigger_key(struct coord_group *g, uint32_t agent, uint64_t seq)
{
	if (g->nkeys < COORD_MAX_GROUP_TRIGGERS) {
		g->keys[g->nkeys].agent_id = agent;
		g->keys[g->nkeys].seq = seq;
		g->nkeys++;
	}
}

/*
 * Move an orphan group's single trace (opened by a slice that raced ahead of
 * this trigger) into the trigger's group, so lateral traces stay one group.
 * Cells asked by the orphan are asked again (its requests' replies will find
 * their group gone); agents answer a repeated remote trigger the same way.
 * Returns the trace's index in g, or -1 (then it stays where it was).
 */
static int adopt_orphan(struct rt_coord *c, struct coord_group *g, struct coord_group *o)
{
	struct coord_gtrace t = o->traces[0];
	uint32_t i;
	int idx;
	if (g->ntraces == COORD_GROUP_TRACES)
		return -1;
	coord_map_del(&c->traces, t.lo);
	if ((idx = group_add_trace(c, g, t.hi, t.lo)) < 0) {
		coord_map_put(&c->traces, t.lo, (uint64_t)(o - c->groups) << 8);
		return -1;
	}
	g->traces[idx] = t;
	for (i = 0; i < o->ncells; i++) {
		struct coord_cell *y = cell_get(g, idx, o->cells[i].agent_id, 1);
		if (!y)
			continue;
		*y = o->cells[i];
		y->trace = (uint8_t)idx;
		if (y->state == CELL_ASKED)
			y->state = CELL_NEW;
		if (y->state == CELL_NEW)
			g->dirty = 1;
	}
	for (i = 0; i < o->ntrig; i++)
		add_trigger_id(g, o->trigger_ids[i]);
	if (o->created_ns < g->created_ns) /* the traversal's first news was the slice */
		g->created_ns = o->created_ns;
	if (o->weave_until_ns > g->weave_until_ns)
		g->weave_until_ns = o->weave_until_ns;
	group_release(c, o);
	return idx;
}

static void reopen_if_new_hop(struct rt_coord *c, uint32_t origin,
			      const struct rt_wire_trace *tr);

int coord_handle_trigger(struct rt_coord *c, const struct rt_wire_trigger *t,
			 uint64_t received_unix_ns)
{
	struct coord_group *g = NULL, *home;
	uint64_t now = coord_now_ns();
	uint32_t i, k;
	int idx;
	for (i = 0; i < t->trace_count && !g; i++)
		g = group_of(c, t->traces[i].trace_lo, &idx);
	if (!g && !(g = group_alloc(c, now, t->trigger_id))) {
		c->st.traces_dropped += t->trace_count;
		/* At most one line a second: a storm would otherwise write one per trigger. */
		if (now >= c->drop_log_ns) {
			coord_log(c, LOG_WARN,
				  "trigger %u/%llu (trigger id %u) dropped: %u of %u trace groups open, "
				  "or its trigger id holds its fair share (%llu more dropped since the "
				  "last line; per id: retrace status, trigger_shares)",
				  t->agent_id, (unsigned long long)t->trigger_seq, t->trigger_id,
				  c->groups_open, c->cfg.max_groups,
				  (unsigned long long)c->drop_log_suppressed);
			c->drop_log_ns = now + 1000000000ull;
			c->drop_log_suppressed = 0;
		} else {
			c->drop_log_suppressed++;
		}
		return -1;
	}
	if (!g->has_trigger) { /* an orphan's traversal already runs: its clock started then */
		g->has_trigger = 1;
		g->triggered_unix_ns = received_unix_ns;
	}
	note_trigger_key(g, t->agent_id, t->trigger_seq);
	for (i = 0; i < t->trace_count; i++) {
		const struct rt_wire_trace *tr = &t->traces[i];
		c->st.trigger_traces++;
		if (!tr->trace_lo)
			continue;
		if (coord_map_get(&c->closed, tr->trace_lo, NULL)) {
			reopen_if_new_hop(c, t->agent_id, tr); /* a re-fire: new hops only */
			continue;
		}
		home = group_of(c, tr->trace_lo, &idx);
		if (home && home != g && !home->has_trigger && home->ntraces == 1 &&
		    (idx = adopt_orphan(c, g, home)) >= 0)
			home = g;
		if (!home) {
			home = g;
			if ((idx = group_add_trace(c, g, tr->trace_hi, tr->trace_lo)) < 0)
				continue;
		}
		add_trigger_id(home, t->trigger_id);
		name_agent(home, idx, t->agent_id);
		for (k = 0; k < tr->breadcrumb_count; k++)
			name_agent(home, idx, tr->breadcrumbs[k]);
		home->last_activity_ns = now;
		if (home != g)
			dispatch(c, home, now);
	}
	add_trigger_id(g, t->trigger_id);
	if (g->ntraces == 0) { /* everything was closed already */
		uint32_t j;
		for (j = 0; j < g->nkeys; j++)
			rt_store_done_trigger(c->store, g->keys[j].agent_id, g->keys[j].seq);
		group_release(c, g);
		return 0;
	}
	dispatch(c, g, now);
	return 0;
}

int coord_trace_is_closed(struct rt_coord *c, uint64_t lo)
{
	return coord_map_get(&c->closed, lo, NULL);
}

/* The closed map's value is the close time; its top bit says "unselected". */
#define CLOSED_UNSELECTED (1ull << 63)

void coord_trace_mark_unselected(struct rt_coord *c, uint64_t lo)
{
	uint64_t at;
	if (coord_map_get(&c->closed, lo, &at))
		coord_map_put(&c->closed, lo, at | CLOSED_UNSELECTED);
}

int coord_trace_was_unselected(struct rt_coord *c, uint64_t lo)
{
	uint64_t at;
	return coord_map_get(&c->closed, lo, &at) && (at & CLOSED_UNSELECTED);
}

static void account_slice(struct coord_group *g, int idx, uint32_t agent, uint64_t bytes,
			  uint64_t first_ns, uint64_t last_ns, uint64_t now)
{
	struct coord_gtrace *t = &g->traces[idx];
	struct coord_cell *x = cell_get(g, idx, agent, 1);
	if (x) {
		x->received += bytes;
		x->slices++;
	}
	t->bytes += bytes;
	t->slices++;
	if (first_ns && (!t->first_ns || first_ns < t->first_ns))
		t->first_ns = first_ns;
	if (last_ns > t->last_ns)
		t->last_ns = last_ns;
	g->last_activity_ns = now;
}

int coord_slice_arrived(struct rt_coord *c, const struct rt_wire_slice *s, uint64_t bytes,
			uint64_t first_ns, uint64_t last_ns, int *late)
{
	uint64_t now = coord_now_ns();
	struct coord_group *g;
	int idx;
	*late = 0;
	if ((g = group_of(c, s->trace_lo, &idx))) {
		account_slice(g, idx, s->agent_id, bytes, first_ns, last_ns, now);
		return 0;
	}
	if (coord_map_get(&c->closed, s->trace_lo, NULL)) {
		*late = 1;
		return 0;
	}
	if (!(g = group_alloc(c, now, s->trigger_id)))
		return -1;
	if ((idx = group_add_trace(c, g, s->trace_hi, s->trace_lo)) < 0) {
		group_release(c, g);
		return -1;
	}
	c->st.orphan_slices++;
	add_trigger_id(g, s->trigger_id);
	name_agent(g, idx, s->agent_id);
	account_slice(g, idx, s->agent_id, bytes, first_ns, last_ns, now);
	dispatch(c, g, now);
	return 0;
}

/* ----------------------------------------------------------- closing ---- */

static void remember_closed(struct rt_coord *c, uint64_t lo, uint64_t now)
{
	if (c->closed_len == c->closed_cap) { /* forget the oldest early */
		coord_map_del(&c->closed, c->closed_ring[c->closed_head]);
		c->closed_head = (c->closed_head + 1) % c->closed_cap;
		c->closed_len--;
	}
	if (coord_map_put(&c->closed, lo, now) != 0)
		return;
	c->closed_ring[(c->closed_head + c->closed_len) % c->closed_cap] = lo;
	c->closed_len++;
}

static void expire_closed(struct rt_coord *c, uint64_t now)
{
	uint64_t ttl = (uint64_t)(c->cfg.state_ttl * 1e9), at;
	while (c->closed_len) {
		uint64_t lo = c->closed_ring[c->closed_head];
		if (coord_map_get(&c->closed, lo, &at) && now - (at & ~CLOSED_UNSELECTED) < ttl)
			break;
		coord_map_del(&c->closed, lo);
		c->closed_head = (c->closed_head + 1) % c->closed_cap;
		c->closed_len--;
	}
}

/*
 * An agent's part is whole only when its last reply said no writer holds any of
 * the trace and every byte it announced has arrived. A cell still open, never
 * answered, or failed cannot be shown whole, whatever slices came from it.
 */
static int cell_delivered(const struct coord_cell *x)
{
	return x->state == CELL_REPLIED && x->received > 0 && x->received >= x->expect;
}

static void add_agent(uint32_t *list, uint32_t *n, uint32_t id)
{
	uint32_t i;
	for (i = 0; i < *n; i++)
		if (list[i] == id)
			return;
	if (*n < RT_STORE_MAX_AGENTS)
		list[(*n)++] = id;
}

static void build_row(struct rt_coord *c, const struct coord_group *g, int idx,
		      struct rt_store_trace *row)
{
	const struct coord_gtrace *t = &g->traces[idx];
	uint32_t i;
	int any = 0, missing = 0;
	memset(row, 0, sizeof *row);
	row->trace_hi = t->hi;
	row->trace_lo = t->lo;
	row->group_id = g->id;
	row->trigger_count = g->ntrig;
	memcpy(row->trigger_ids, g->trigger_ids, sizeof row->trigger_ids);
	for (i = 0; i < g->ncells; i++) {
		const struct coord_cell *x = &g->cells[i];
		if (x->trace != idx)
			continue;
		if (x->received)
			any = 1, add_agent(row->agents, &row->agent_count, x->agent_id);
		if (x->named && !cell_delivered(x))
			missing = 1, add_agent(row->missing, &row->missing_count, x->agent_id);
	}
	/* A group no trigger ever reached (slices came, their trigger went to another
	 * coordinator or was dropped) was traversed from the senders' breadcrumbs
	 * alone, which name callers, not the host that fired: nothing shows that
	 * host delivered, so the trace is not called coherent. */
	row->coherent = any && !missing && g->has_trigger;
	if (any && !missing && !g->has_trigger)
		c->st.traces_untriggered++;
	row->first_ns = t->first_ns;
	row->last_ns = t->last_ns;
	row->bytes = t->bytes;
	row->slices = t->slices;
	row->triggered_ns = g->triggered_unix_ns ? g->triggered_unix_ns
						 : c->start_unix_ns + (g->created_ns - c->start_ns);
	row->closed_ns = coord_unix_ns();
	row->traversal_ns = g->traversal_ns;
}

int coord_decode_stored(struct rt_coord *c, uint64_t hi, uint64_t lo,
			struct rt_decoded_trace *out)
{
	char err[256];
	return rt_decode_stored(c->store, hi, lo, out, err, sizeof err);
}

/*
 * The store's work at a close (decoding a trace, writing its span rows) touches
 * neither the traversal nor c->out: the loop lets go of them meanwhile, so
 * agents' replies for other groups are acted on at once (loop_mu). The closing
 * group itself is marked: a late reply for it changes nothing.
 */
static int decode_letting_go(struct rt_coord *c, uint64_t hi, uint64_t lo,
			     struct rt_decoded_trace *dt)
{
	int rc;
	coord_loop_let_go(c);
	rc = coord_decode_stored(c, hi, lo, dt);
	coord_loop_take_back(c);
	return rc;
}

static int store_spans_letting_go(struct rt_coord *c, const struct rt_decoded_trace *dt)
{
	int rc;
	coord_loop_let_go(c);
	rc = coord_store_spans(c, dt);
	coord_loop_take_back(c);
	return rc;
}

/*
 * The last word on "coherent": every named agent said its part is final and
 * delivered it (build_row), and the spans themselves show no hole — no gap in a
 * writer's buffers, no span without its start or end, no client call whose
 * server side never arrived (a hop no breadcrumb named), nothing corrupt. A
 * trace that cannot be decoded cannot be shown complete either. Returns 1 when
 * `dt` holds the decoded trace (the caller frees it).
 */
static int confirm_complete(struct rt_coord *c, const struct coord_group *g, int idx,
			    struct rt_store_trace *row, struct rt_decoded_trace *dt)
{
	struct rt_decode_stats st_copy;
	const struct rt_decode_stats *st = &st_copy;
	if (decode_letting_go(c, row->trace_hi, row->trace_lo, dt) != 0) {
		rt_decoded_trace_free(dt);
		c->st.traces_undecodable++;
		row->coherent = 0;
		coord_log(c, LOG_WARN, "trace %016llx%016llx: cannot be decoded at close: incoherent",
			  (unsigned long long)row->trace_hi, (unsigned long long)row->trace_lo);
		return 0;
	}
	/* A client span whose callee's half was woven in (an inferred link to a
	 * trace of this group that came out complete) is not a hole: weave.c. */
	st_copy = dt->st;
	if (g) {
		uint64_t forgiven = coord_weave_forgiven(g, idx, dt);
		st_copy.unmatched_client_spans -= forgiven <= st_copy.unmatched_client_spans
							  ? forgiven
							  : st_copy.unmatched_client_spans;
	}
	if (!rt_decode_complete(st)) {
		c->st.traces_incomplete++;
		row->coherent = 0;
		coord_log(c, LOG_WARN,
			  "trace %016llx%016llx: every agent delivered, but the spans show a hole "
			  "(gaps %llu, partial spans %llu, unmatched client spans %llu, corrupt "
			  "frames %llu, truncated records %llu): incoherent",
			  (unsigned long long)row->trace_hi, (unsigned long long)row->trace_lo,
			  (unsigned long long)st->gaps, (unsigned long long)st->partial_spans,
			  (unsigned long long)st->unmatched_client_spans,
			  (unsigned long long)st->corrupt_frames,
			  (unsigned long long)st->truncated_records);
	}
	return 1;
}

static void close_group(struct rt_coord *c, struct coord_group *g, uint64_t now)
{
	struct rt_store_trace row;
	struct rt_decoded_trace dt;
	uint32_t k, i;
	g->closing = 1;
	coord_weave_group_closed(c, g);
	/* Last added first: a woven trace (added after the trace whose open hop
	 * it closes) is judged before that trace needs to know (weave.c). */
	for (k = g->ntraces; k-- > 0;) {
		int decoded = 0;
		i = k;
		coord_weave_store_links(c, g, (int)i);
		build_row(c, g, (int)i, &row);
		if (row.coherent)
			decoded = confirm_complete(c, g, (int)i, &row, &dt);
		else if (coord_names_unknown(c, &row)) {
			/* decoded for its TRIGGER events only (trigger_names.c) */
			if (decode_letting_go(c, row.trace_hi, row.trace_lo, &dt) == 0)
				decoded = 2;
			else
				rt_decoded_trace_free(&dt);
		}
		g->traces[i].complete = (uint8_t)(row.coherent != 0);
		if (decoded)
			coord_names_learn(c, &dt);
		if (decoded == 1)
			coord_adaptive_add(c, &dt); /* the span learner (adaptive.c) */
		if (decoded == 1 && store_spans_letting_go(c, &dt) != 0) { /* rows for SQL (ClickHouse) */
			c->st.store_errors++;
			coord_log(c, LOG_ERROR, "store: spans: %s", rt_store_errmsg(c->store));
		}
		/* Closed before selection hears of it: adding it may fill the window,
		 * whose verdict marks the dropped traces in the closed map, this one
		 * too (else its late slices would bring a part of it back). */
		coord_map_del(&c->traces, g->traces[i].lo);
		remember_closed(c, g->traces[i].lo, now);
		if (rt_store_put_trace(c->store, &row) < 0) {
			c->st.store_errors++;
			coord_log(c, LOG_ERROR, "store: %s", rt_store_errmsg(c->store));
		} else if (!g->recollect) {
			/* may delete it again at window end */
			coord_selection_add(c, &row, decoded == 1 ? &dt : NULL);
		}
		if (decoded)
			rt_decoded_trace_free(&dt);
		if (row.coherent)
			c->st.traces_coherent++;
		else
			c->st.traces_incoherent++;
		coord_log(c, LOG_DEBUG, "trace %016llx%016llx closed %s: %u agents, %llu bytes",
			  (unsigned long long)row.trace_hi, (unsigned long long)row.trace_lo,
			  row.coherent ? "coherent" : "incoherent", row.agent_count,
			  (unsigned long long)row.bytes);
	}
	for (i = 0; i < g->nkeys; i++)
		rt_store_done_trigger(c->store, g->keys[i].agent_id, g->keys[i].seq);
	c->st.groups_closed++;
	group_release(c, g);
}

/* Cells still to ask, being asked, or open: a hop learned after the traversal
 * first went idle (a trigger update with new breadcrumbs) holds the close too. */
static int traversal_busy(const struct coord_group *g)
{
	uint32_t i;
	if (g->inflight || g->dirty)
		return 1;
	for (i = 0; i < g->ncells; i++)
		if (g->cells[i].state == CELL_NEW || g->cells[i].state == CELL_ASKED ||
		    g->cells[i].state == CELL_OPEN)
			return 1;
	return 0;
}

/* Everything an agent announced has arrived (agents with no data do not hold us). */
static int all_delivered(const struct coord_group *g)
{
	uint32_t i;
	for (i = 0; i < g->ncells; i++) {
		const struct coord_cell *x = &g->cells[i];
		if (x->state == CELL_REPLIED && x->buffers && x->received < x->expect)
			return 0;
	}
	return 1;
}

/* Per agent, the bytes of one trace's slices the store holds. */
struct stored_bytes {
	uint32_t n, agent[RT_STORE_MAX_AGENTS];
	uint64_t bytes[RT_STORE_MAX_AGENTS];
};

static int stored_slice(void *arg, const struct rt_store_slice *sl)
{
	struct stored_bytes *sb = arg;
	uint32_t i;
	for (i = 0; i < sb->n && sb->agent[i] != sl->agent_id; i++)
		;
	if (i == sb->n) {
		if (sb->n == RT_STORE_MAX_AGENTS)
			return 0;
		sb->agent[sb->n] = sl->agent_id;
		sb->bytes[sb->n++] = 0;
	}
	sb->bytes[i] += sl->bytes;
	return 0;
}

/*
 * A group whose agents announced bytes that never came: look in the store
 * once. A member killed with -9 and restarted (issue 17) has committed slices
 * of traces whose trigger it never stored (the trigger was in flight or in an
 * uncommitted batch; the slices opened an orphan group and were acknowledged):
 * the trigger comes again from the agent that holds it, opens a fresh group,
 * and the agents' replies announce bytes they already sent and had
 * acknowledged. Nothing comes again (a resent slice is a duplicate or late,
 * and is not counted), so the group waited for the collect timeout and stored
 * the trace incoherent with every host missing though every byte was in the
 * store (member_kill9_and_return, ASan: "900d incoherent at c0: 0 agents, 3
 * missing"). A cell's received becomes at least what the store holds of it:
 * the store holds what this process counted (unless still in an uncommitted
 * batch) plus what an earlier one committed, so the larger figure counts
 * nothing twice. Only a group held up this way pays the read.
 */
static void count_stored(struct rt_coord *c, struct coord_group *g)
{
	uint32_t i, k;
	g->store_counted = 1;
	for (i = 0; i < g->ntraces; i++) {
		struct stored_bytes sb = { 0 };
		if (rt_store_slices(c->store, g->traces[i].hi, g->traces[i].lo, stored_slice, &sb) != 0)
			continue;
		for (k = 0; k < sb.n; k++) {
			struct coord_cell *x = cell_get(g, (int)i, sb.agent[k], 1);
			if (x && sb.bytes[k] > x->received) {
				g->traces[i].bytes += sb.bytes[k] - x->received;
				c->st.stored_bytes_counted += sb.bytes[k] - x->received;
				x->received = sb.bytes[k];
			}
		}
	}
}

/*
 * Has g's collect timeout passed? Judged at the time this turn took its input
 * (c->loop.input_ns), not at now: in a turn that stalled (a disk or a CPU taken
 * away for seconds: 9.7 s for 2 slices in a stress run) the slices that came
 * before the deadline wait in the sockets, and closing now called traces with
 * every slice sent incoherent. The next turn takes them first.
 */
uint64_t coord_group_deadline(const struct rt_coord *c, const struct coord_group *g)
{
	uint64_t first = g->created_ns + (uint64_t)(c->cfg.collect_timeout * 1e9);
	return g->weave_until_ns > first ? g->weave_until_ns : first;
}

void coord_group_extend(const struct rt_coord *c, struct coord_group *g, uint64_t now)
{
	uint64_t until = now + (uint64_t)(c->cfg.collect_timeout * 1e9);
	if (until > g->weave_until_ns)
		g->weave_until_ns = until;
}

static int past_collect_timeout(struct rt_coord *c, struct coord_group *g, uint64_t now)
{
	uint64_t deadline = coord_group_deadline(c, g);
	uint64_t seen = c->loop.input_ns && c->loop.input_ns < now ? c->loop.input_ns : now;
	if (now < deadline)
		return 0;
	if (seen >= deadline)
		return 1;
	if (!g->close_deferred) {
		g->close_deferred = 1;
		c->loop.closes_deferred++;
	}
	return 0;
}

static void group_tick(struct rt_coord *c, struct coord_group *g, uint64_t now)
{
	uint64_t settle = (uint64_t)(c->cfg.settle * 1e9);
	int traversed, idle, expired;
	reask_open_cells(g, now);
	if (g->dirty)
		dispatch(c, g, now);
	traversed = g->has_trigger && g->traversal_ns && !traversal_busy(g);
	idle = traversed && now - g->last_activity_ns >= settle;
	expired = past_collect_timeout(c, g, now);
	if (!g->store_counted && ((idle && !all_delivered(g)) || expired))
		count_stored(c, g);
	/* A group no trigger has reached yet (its slices raced ahead) waits for it
	 * until the collect timeout, not the settle time: closed without it, the
	 * trace cannot be called coherent (build_row). A group whose data is all in
	 * but that had news within the settle time when its timeout came still gets
	 * its weaving (a job has a timeout of its own), so late news cannot leave
	 * its open hops as holes (seen under load: 5 of 7 groups closed unwoven). */
	if (expired) {
		if (!(g->weave_state == 0 && traversed && all_delivered(g) &&
		      coord_weave_hold(c, g, now)))
			close_group(c, g, now);
	} else if (idle && all_delivered(g) && !coord_weave_hold(c, g, now)) {
		close_group(c, g, now); /* (weaving may first add the callees' halves) */
	}
}

void coord_traversal_tick(struct rt_coord *c, uint64_t now)
{
	uint32_t i, n = c->cfg.max_groups ? c->cfg.max_groups : 1, open = c->groups_open, seen = 0;
	static const uint64_t second = 1000000000ull;
	/* Stop at the last open group: a turn should not cost max_groups when few are open. */
	for (i = 0; i < n && seen < open; i++)
		if (c->groups[i].id) {
			seen++;
			/* A reply that came meanwhile goes first: closing a group (decode,
			 * span rows, selection) can take milliseconds. */
			coord_traversal_serve(c);
			if (c->groups[i].id)
				group_tick(c, &c->groups[i], now);
		}
	coord_weave_tick(c, now);
	if (now >= c->next_expire_ns) {
		c->next_expire_ns = now + second / 10;
		expire_closed(c, now);
		coord_dir_expire(c);
		coord_req_watchdog(c, now);
	}
	if (now >= c->next_retain_ns) {
		uint64_t deleted = 0;
		c->next_retain_ns = now + 60 * second;
		if (rt_store_retain(c->store, coord_unix_ns(), &deleted) == 0)
			c->st.retained_deleted += deleted;
	}
}

/* --------------------------------------------------------- restart ---- */

struct resume_ctx {
	struct rt_coord *c;
	struct coord_group *g;
	int idx;
};

static int resume_slice(void *arg, const struct rt_store_slice *sl)
{
	struct resume_ctx *r = arg;
	account_slice(r->g, r->idx, sl->agent_id, sl->bytes, sl->first_ns, sl->last_ns,
		      coord_now_ns());
	return 0;
}

/* Groups resumed from pending triggers: count the slices already stored. */
void coord_resume_received(struct rt_coord *c)
{
	uint32_t i, j, n = c->cfg.max_groups ? c->cfg.max_groups : 1;
	for (i = 0; i < n; i++) {
		struct coord_group *g = &c->groups[i];
		if (!g->id)
			continue;
		for (j = 0; j < g->ntraces; j++) {
			struct resume_ctx r = { c, g, (int)j };
			rt_store_slices(c->store, g->traces[j].hi, g->traces[j].lo, resume_slice, &r);
		}
	}
}

int coord_trace_open(struct rt_coord *c, uint64_t lo)
{
	return coord_map_get(&c->traces, lo, NULL);
}

/* ------------------------------------------------------ recollection ---- */

struct recollect_ctx {
	struct coord_group *g;
	uint64_t now;
};

static int recollect_slice(void *arg, const struct rt_store_slice *sl)
{
	struct recollect_ctx *r = arg;
	account_slice(r->g, 0, sl->agent_id, sl->bytes, sl->first_ns, sl->last_ns, r->now);
	return 0;
}

/*
 * Traverse a stored trace again: the stored row names the agents that delivered
 * and those that were missing, `extra` names more; each is asked again as in a
 * first traversal (agents answer a repeated remote trigger idempotently and
 * report what they still hold), the slices already stored count as received, and
 * the group closes by the usual rules, replacing the row. The trace does not
 * enter selection again. 0, or -1 with `why`.
 */
static int recollect(struct rt_coord *c, uint64_t hi, uint64_t lo, const uint32_t *extra,
		     uint32_t nextra, uint32_t *nagents, char *why, size_t whylen)
{
	struct rt_store_trace row;
	struct coord_group *g;
	struct recollect_ctx r;
	uint64_t now = coord_now_ns();
	uint32_t i;
	if (coord_map_get(&c->traces, lo, NULL))
		return snprintf(why, whylen, "it is being collected now"), -1;
	if (rt_store_get_trace(c->store, hi, lo, &row) != 0)
		return snprintf(why, whylen, "no such stored trace"), -1;
	hi = row.trace_hi; /* the id may have been given by its low 64 bits */
	if (!(g = group_alloc(c, now, row.trigger_count ? row.trigger_ids[0] : 0)))
		return snprintf(why, whylen, "%u trace groups open: try again later",
				c->groups_open), -1;
	coord_map_del(&c->closed, lo); /* its slices are no longer late */
	if (group_add_trace(c, g, hi, lo) != 0) {
		group_release(c, g);
		return snprintf(why, whylen, "cannot track it"), -1;
	}
	g->has_trigger = 1;
	g->recollect = 1;
	g->triggered_unix_ns = row.triggered_ns;
	for (i = 0; i < row.trigger_count && i < RT_STORE_MAX_TRIGGERS; i++)
		add_trigger_id(g, row.trigger_ids[i]);
	r.g = g;
	r.now = now;
	rt_store_slices(c->store, hi, lo, recollect_slice, &r);
	for (i = 0; i < row.agent_count; i++)
		name_agent(g, 0, row.agents[i]);
	for (i = 0; i < row.missing_count; i++)
		name_agent(g, 0, row.missing[i]);
	for (i = 0; i < nextra; i++)
		name_agent(g, 0, extra[i]);
	c->st.recollections++;
	*nagents = row.agent_count + row.missing_count + nextra;
	return 0;
}

size_t coord_recollect_request(struct rt_coord *c, const char *req, size_t len, char *out,
			       size_t cap)
{
	char why[128];
	uint64_t hi, lo;
	uint32_t n = 0;
	const char *id = req + 10;
	size_t idlen = len > 10 ? len - 10 : 0;
	while (idlen && (id[idlen - 1] == 0 || id[idlen - 1] == '\n' || id[idlen - 1] == ' '))
		idlen--;
	if (len < 10 || rt_store_parse_trace_id(id, idlen, &hi, &lo) != 0)
		return (size_t)snprintf(out, cap, "error: usage: recollect TRACE_ID (32 hex "
					"digits, or the low 16)");
	if (recollect(c, hi, lo, NULL, 0, &n, why, sizeof why) != 0)
		return (size_t)snprintf(out, cap, "error: trace %.32s: %s", id, why);
	return (size_t)snprintf(out, cap, "ok re-collecting trace %.32s from %u agent(s); "
				"`retrace show` it when the coordinator has closed it", id, n);
}

static int listed(const uint32_t *list, uint32_t n, uint32_t id)
{
	for (uint32_t i = 0; i < n; i++)
		if (list[i] == id)
			return 1;
	return 0;
}

/*
 * A trigger (or an agent's update with a hop learned late) for a trace already
 * closed: if it names an agent the stored row does not know, that host was part
 * of the request and was never asked — the row cannot stand. Re-collect it with
 * the new agents (counted in `reopened`); a plain re-fire changes nothing.
 */
static void reopen_if_new_hop(struct rt_coord *c, uint32_t origin, const struct rt_wire_trace *tr)
{
	struct rt_store_trace row;
	uint32_t extra[RT_WIRE_MAX_BREADCRUMBS + 1], n = 0, k, got;
	char why[128];
	if (coord_trace_was_unselected(c, tr->trace_lo) ||
	    rt_store_get_trace(c->store, tr->trace_hi, tr->trace_lo, &row) != 0)
		return;
	for (k = 0; k <= tr->breadcrumb_count && n < RT_WIRE_MAX_BREADCRUMBS + 1; k++) {
		uint32_t a = k < tr->breadcrumb_count ? tr->breadcrumbs[k] : origin;
		if (a && !listed(row.agents, row.agent_count, a) &&
		    !listed(row.missing, row.missing_count, a) && !listed(extra, n, a))
			extra[n++] = a;
	}
	if (n && recollect(c, tr->trace_hi, tr->trace_lo, extra, n, &got, why, sizeof why) == 0)
		c->st.reopened++;
}
