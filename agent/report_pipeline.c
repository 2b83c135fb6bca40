/*
 * agent/report_pipeline.c — from a trigger to slices acknowledged by the collector.
 *
 * A local trigger group passes its trigger id's rate limit or is dropped whole,
 * before anything is pinned. Accepted (and remote) triggers pin their traces and
 * queue those with unsent buffers in their trigger's class (agent/report.h);
 * local ones are also posted to the coordinator with each trace's breadcrumbs.
 *
 * Overload (every pass, before sending) is decided by a priority threshold all
 * agents share rather than by queue order, which differs from host to host:
 * queued traces their class's level no longer admits are abandoned; while
 * unsent pinned data is still over its share, the class using the most
 * weighted space goes one level up and loses its traces under the new
 * threshold (at the top level, its lowest trace alone). Agents under the same
 * pressure raise at nearly the same moment, and rules keep that moment's
 * difference from showing (rt_report_caution): with a backlog, a trace's first
 * slice waits cfg.report_hold after it is queued (a surge climbs several levels
 * before anything of it is decided); after a raise, and past half the share, a
 * class sends only what one level up still admits (what the next raise would
 * abandon waits), and raises at once when nothing else is left; levels come
 * down one step per LEVEL_RELAX_NS wall-clock epoch of low pressure, at the
 * epoch's start (the same instant on every agent). Without a backlog nothing
 * waits: reporting latency is a round trip, as before.
 *
 * Each pass, rt_agent_report_pump:
 *   1. finishes round trips: an acknowledged slice frees its buffers; a failed
 *      one marks the collector down and is spooled (its buffers then freed) or,
 *      with no spool room, put back at the head of its trace to be sent again;
 *   2. while the collector is down, probes it once a second with the oldest
 *      spooled slice; while the spool holds anything, new slices join the spool
 *      behind it, so slices reach the collector in the order they were cut. A
 *      failed spool write (a full disk) is retried after a back-off doubling
 *      from 20 ms to 2 s, the slice waiting on its trace meanwhile; a spooled
 *      slice whose cursor cannot be moved after it was acknowledged holds the
 *      spool back (it is never sent again) while the cursor write is retried
 *      with the same back-off. Their log lines come once per 10 s at most;
 *   3. takes the next trace from the fair schedule, cuts a slice of up to
 *      max_slice_bytes and RT_WIRE_MAX_SLICE_BUFFERS buffers from its oldest
 *      buffers (ordered by writer and sequence inside the slice), encodes it
 *      straight from shared memory and sends it in a free slot. A slice that
 *      still cannot be encoded (one buffer larger than a wire message) is
 *      dropped and counted per trigger id: retrying could never succeed.
 * A trace stays triggered after its slice went: buffers written later queue it
 * again. Each trace entry counts what it has had (held, in flight, delivered),
 * which is what a breadcrumb reply reports. A quiet triggered trace with
 * nothing left to send moves to the index's quiet list: it expires after its
 * TTL, or earlier if the table is full and a new trace needs its entry.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_internal.h"
#include "log.h"
#include "spool.h"

#define PROBE_EVERY_NS 1000000000ull
/* A spool write that failed (a full disk, an I/O error) is tried again after a
 * wait that doubles from the first to the last: a disk that stays full costs a
 * few attempts a second, not one per pass. */
#define SPOOL_BACKOFF_MIN_NS 20000000ull   /* 20 ms */
#define SPOOL_BACKOFF_MAX_NS 2000000000ull /* 2 s */
#define LEVEL_RELAX_NS 2000000000ull /* low pressure this long: levels come down a step */
#define LEVEL_SETTLE_NS 100000000ull /* after a raise: longer than two agents' raises lie apart */

static uint64_t spool_pending(const struct rt_agent *a)
{
	return a->spool ? a->spool->st.records_pending : 0;
}
#define EXPIRE_SCAN 256u

/* ------------------------------------------------------------ pinning ---- */

void rt_agent_mark_pinned(struct rt_agent *a, uint32_t id, uint32_t trigger_id)
{
	struct rt_buffer_header *h = rt_agent_segment(a, id); /* a sealed segment: its writer
								 never stores its flags again */
	h->pin_trigger = trigger_id;
	ck_pr_store_32(&h->flags, ck_pr_load_32(&h->flags) | RT_BUF_PINNED);
}

void rt_agent_pin(struct rt_agent *a, uint32_t t, uint32_t trigger_id)
{
	uint32_t b;
	if (t >= a->ix.capacity || a->ix.traces[t].state != RT_TRACE_UNTRIGGERED)
		return;
	rt_index_pin(&a->ix, t, trigger_id);
	rt_report_class_of(&a->rep, trigger_id)->traces_pinned++;
	a->st.triggered_traces++;
	for (b = a->ix.traces[t].first_buf; b != RT_INDEX_NONE; b = a->ix.buf_next[b])
		rt_agent_mark_pinned(a, b, trigger_id);
	if (a->ix.traces[t].nbuffers)
		rt_agent_queue_pinned(a, t, 0);
}

static uint32_t pin_trace(struct rt_agent *a, struct rt_report_class *c, uint64_t hi,
			  uint64_t lo, uint32_t trigger_id)
{
	uint32_t t;
	if (lo == 0) {
		a->st.bad_triggers++;
		return RT_INDEX_NONE;
	}
	t = rt_agent_trace_for(a, lo, a->pass_now_ns);
	if (t == RT_INDEX_NONE)
		return t;
	if (a->ix.traces[t].hi == 0)
		a->ix.traces[t].hi = hi;
	(void)c;
	rt_agent_pin(a, t, trigger_id);
	a->ix.traces[t].last_seen_ns = a->pass_now_ns;
	return t;
}

void rt_agent_queue_pinned(struct rt_agent *a, uint32_t t, uint32_t n)
{
	if (a->rep.trace_class[t]) {
		rt_report_add_buffers(&a->rep, &a->ix, t, n);
		return;
	}
	rt_report_enqueue(&a->rep, rt_report_class_of(&a->rep, a->ix.traces[t].trigger_id),
			  &a->ix, t, a->pass_now_ns);
}

static void abandon(struct rt_agent *a, struct rt_report_class *c, uint32_t t);

/* The member a trace's messages go to, if one is set: the one that
 * acknowledged part of it, else the one that asked for it last (route.h), else
 * the live one its trigger went to (so that its slices do not go elsewhere when
 * the live set changes before that member's ACK comes). */
static uint8_t sticky_of(const struct rt_agent *a, const struct rt_trace_entry *e)
{
	const struct rt_route *r = &a->route;
	if (e->route)
		return e->route;
	if (e->asked)
		return e->asked;
	return e->posted && e->posted <= r->n && r->ring.live[e->posted - 1] ? e->posted : 0;
}

static void post_trigger(struct rt_agent *a, const struct rt_trigger_entry *g, unsigned int n)
{
	struct rt_wire_trace traces[RT_WIRE_MAX_TRACES];
	struct rt_wire_trigger m;
	unsigned int i, k = 0;
	uint32_t t0 = RT_INDEX_NONE;
	if (!a->route.has_coord)
		return;
	for (i = 0; i < n && k < RT_WIRE_MAX_TRACES; i++) {
		uint32_t t = g[i].trace_lo ? rt_index_find(&a->ix, g[i].trace_lo) : RT_INDEX_NONE;
		memset(&traces[k], 0, sizeof traces[k]);
		traces[k].trace_hi = g[i].trace_hi;
		traces[k].trace_lo = g[i].trace_lo;
		if (k == 0)
			t0 = t;
		if (t != RT_INDEX_NONE) {
			traces[k].breadcrumb_count = a->ix.traces[t].ncrumbs;
			traces[k].breadcrumbs = a->ix.traces[t].crumbs;
		}
		k++;
	}
	m.agent_id = a->cfg.agent_id;
	m.trigger_id = g[0].trigger_id;
	m.trigger_seq = ++a->trigger_seq;
	m.fired_unix_ns = a->pass_unix_ns;
	m.trace_count = k;
	m.traces = traces;
	a->msg.len = 0;
	if (rt_wire_encode_trigger(&a->msg, &m) == 0) {
		/* The whole group goes where its triggered trace goes (route.h). */
		uint8_t sticky = t0 != RT_INDEX_NONE ? sticky_of(a, &a->ix.traces[t0]) : 0;
		uint32_t mem = rt_route_member(&a->route, traces[0].trace_lo, sticky);
		if (t0 != RT_INDEX_NONE)
			a->ix.traces[t0].posted = (uint8_t)(mem + 1);
		rt_uplink_post(&a->route.up[mem], &a->msg, m.trigger_id, traces[0].trace_lo);
	}
}

void rt_agent_post_crumbs(struct rt_agent *a, uint32_t t)
{
	struct rt_trigger_entry g;
	memset(&g, 0, sizeof g);
	g.trace_hi = a->ix.traces[t].hi;
	g.trace_lo = a->ix.traces[t].lo;
	g.trigger_id = a->ix.traces[t].trigger_id;
	g.group_size = 1;
	a->st.crumb_updates++;
	post_trigger(a, &g, 1);
}

void rt_agent_local_trigger(struct rt_agent *a, const struct rt_trigger_entry *g,
			    unsigned int n)
{
	struct rt_report_class *c = rt_report_class_of(&a->rep, g[0].trigger_id);
	unsigned int i;
	rt_report_refill(&a->rep, a->pass_now_ns);
	if (!rt_report_admit(&a->rep, c)) {
		a->st.rate_limited++;
		return;
	}
	/*
	 * A trigger whose trace its class's overload level already abandons (its
	 * consistent priority is below the level's threshold) is dropped here, as
	 * it would be a moment later from the reporting queue, but before it is
	 * pinned and posted: a storm at level k would otherwise still send every
	 * one of its triggers to the coordinator, where (2^k - 1)/2^k of them make
	 * other hosts pin data that this host will not deliver, and its messages
	 * crowd the link quieter triggers need. (A trace another trigger already
	 * pinned stays pinned for that one.)
	 */
	if (g[0].trace_lo && !rt_report_admits(c, g[0].trace_lo)) {
		uint32_t t = rt_index_find(&a->ix, g[0].trace_lo);
		c->abandoned_at_trigger++;
		a->st.abandoned_at_trigger++;
		if (t != RT_INDEX_NONE && a->ix.traces[t].state == RT_TRACE_UNTRIGGERED)
			abandon(a, c, t); /* its data goes now, as an abandoned trace's does */
		return;
	}
	for (i = 0; i < n; i++)
		pin_trace(a, c, g[i].trace_hi, g[i].trace_lo, g[i].trigger_id);
	post_trigger(a, g, n);
}

/* ------------------------------------------------------------ overload ---- */

static void abandon(struct rt_agent *a, struct rt_report_class *c, uint32_t t)
{
	uint32_t nb = a->ix.traces[t].nbuffers;
	c->abandoned_traces++;
	c->abandoned_buffers += nb;
	a->st.abandoned_traces++;
	a->st.abandoned_buffers += nb;
	rt_agent_remove_trace(a, t, 0);
}

/* Abandon every queued trace its class's level does not admit. */
static void abandon_below_levels(struct rt_agent *a)
{
	struct rt_report_class *c;
	uint32_t t;
	while ((t = rt_report_below_level(&a->rep, &a->ix, &c)) != RT_INDEX_NONE)
		abandon(a, c, t);
}

void rt_agent_abandon_overload(struct rt_agent *a)
{
	struct rt_report_class *c;
	abandon_below_levels(a);
	while (a->rep.queued_buffers > a->pinned_limit) {
		uint32_t t = rt_report_victim(&a->rep, &a->ix, &c);
		if (t == RT_INDEX_NONE)
			break;
		if (rt_report_raise(&a->rep, c, a->pass_now_ns))
			abandon_below_levels(a); /* the same cut on every agent at this level */
		else
			abandon(a, c, t);        /* top level: no threshold left to share */
	}
	if ((c = rt_report_caution(&a->rep, &a->ix, a->pinned_limit)) != NULL &&
	    rt_report_raise(&a->rep, c, a->pass_now_ns)) {
		abandon_below_levels(a);
		rt_report_caution(&a->rep, &a->ix, a->pinned_limit);
	}
	/* A quarter of the share: well clear of the raise point, so levels hold. */
	rt_report_relax(&a->rep, a->rep.queued_buffers <= a->pinned_limit / 4, a->pass_unix_ns);
}

/* Drop quiet entries of one list past their TTL, oldest first, a bounded scan. */
static void expire_list(struct rt_agent *a, uint32_t t, uint64_t ttl)
{
	uint32_t seen = 0;
	while (t != RT_INDEX_NONE && seen++ < EXPIRE_SCAN) {
		const struct rt_trace_entry *e = &a->ix.traces[t];
		uint32_t next = e->lru_next;
		if (e->nbuffers == 0 && e->inflight == 0 && !a->rep.trace_class[t] &&
		    a->pass_now_ns > e->last_seen_ns + ttl) {
			rt_agent_remove_trace(a, t, 0);
			a->st.triggered_expired++;
		}
		t = next;
	}
}

void rt_agent_expire_triggered(struct rt_agent *a)
{
	uint64_t ttl = (uint64_t)(a->cfg.triggered_ttl * 1e9);
	expire_list(a, rt_index_quiet_oldest(&a->ix), ttl);
	expire_list(a, rt_index_pinned_oldest(&a->ix), ttl); /* pinned, never had data */
}

/* -------------------------------------------------------------- slices ---- */

static int writer_order(const void *x, const void *y, void *arg)
{
	const struct rt_agent *ag = arg;
	const struct rt_buffer_header *a = rt_agent_segment(ag, *(const uint32_t *)x);
	const struct rt_buffer_header *b = rt_agent_segment(ag, *(const uint32_t *)y);
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static struct rt_report_class *slot_class(struct rt_agent *a, const struct rt_uplink_slot *s)
{
	return &a->rep.classes[s->cls <= RT_REPORT_MAX_CLASSES ? s->cls : RT_REPORT_MAX_CLASSES];
}

/*
 * Encode slot s's slice (its buffers sorted in place into writer order) into
 * a->msg. Its rate exponent is the larger of the buffers' sample shifts (the
 * clients' trace percentage, shm/pool.h) and its class's overload level now:
 * both keep the traces whose one consistent hash is under 2^64 >> k, so the
 * slice was kept with probability 2^-max (docs/estimation.md) — unless a
 * client decided on its caller's randomness (RT_BUF_RATE_FOREIGN): then the sum.
 */
static int encode_slice(struct rt_agent *a, struct rt_uplink_slot *s)
{
	struct rt_wire_slice_buffer *wb = a->slicebufs;
	struct rt_wire_slice m;
	uint32_t *bufs = s->bufs, n = s->nbuf, i;
	uint32_t level = slot_class(a, s)->level, rate_exp = level, shift = 0, foreign = 0;
	qsort_r(bufs, n, sizeof *bufs, writer_order, a);
	for (i = 0; i < n; i++) {
		const struct rt_buffer_header *h = rt_agent_segment(a, bufs[i]);
		wb[i].pid = h->pid;
		wb[i].tid = h->tid;
		wb[i].seq = h->seq;
		wb[i].flags = h->flags;
		wb[i].first_tick = h->first_tick;
		wb[i].data = (const uint8_t *)h + RT_BUF_HEADER_SIZE; /* the segment's records */
		wb[i].len = a->ix.buf_bytes[bufs[i]];
		if (rt_buf_rate_exp(wb[i].flags) > shift)
			shift = rt_buf_rate_exp(wb[i].flags);
		foreign |= wb[i].flags & RT_BUF_RATE_FOREIGN;
	}
	/* nested steps keep 2^-max; a client that decided on the caller's randomness
	 * is independent of the level's hash: 2^-(shift + level) (shm/pool.h) */
	if (foreign && shift && level)
		rate_exp = shift + level;
	else if (shift > rate_exp)
		rate_exp = shift;
	memset(&m, 0, sizeof m);
	m.agent_id = a->cfg.agent_id;
	m.trigger_id = s->trigger_id;
	m.slice_seq = s->seq;
	m.trace_hi = s->trace_hi;
	m.trace_lo = s->trace_lo;
	m.tsc_hz = a->pool.geo.tsc_hz;
	m.tsc_ref_tick = a->pool.geo.tsc_ref_tick;
	m.tsc_ref_unix_ns = a->pool.geo.tsc_ref_unix_ns;
	m.buffer_count = n;
	m.buffers = wb;
	m.rate_exp = rate_exp <= RT_WIRE_MAX_RATE_EXP ? rate_exp : RT_WIRE_MAX_RATE_EXP;
	a->msg.len = 0;
	return rt_wire_encode_slice(&a->msg, &m);
}

/* The slot's trace if it still is the one the slice was cut from. */
static uint32_t slot_trace(const struct rt_agent *a, const struct rt_uplink_slot *s)
{
	const struct rt_trace_entry *e;
	if (s->trace >= a->ix.capacity)
		return RT_INDEX_NONE;
	e = &a->ix.traces[s->trace];
	return e->in_use && e->lo == s->trace_lo ? s->trace : RT_INDEX_NONE;
}

/* The slice's buffers are done with: back to the pool. */
static void free_slice_buffers(struct rt_agent *a, struct rt_uplink_slot *s, int delivered)
{
	uint32_t t = slot_trace(a, s), i;
	for (i = 0; i < s->nbuf; i++) {
		rt_index_release_inflight(&a->ix, s->bufs[i], t, delivered);
		rt_agent_release_segment(a, s->bufs[i]);
	}
	s->nbuf = 0;
}

/* Put a failed slice's buffers back at the head of its trace (or free them if it is gone). */
static void return_slice_buffers(struct rt_agent *a, struct rt_uplink_slot *s)
{
	uint32_t t = slot_trace(a, s);
	if (t == RT_INDEX_NONE) {
		a->st.abandoned_buffers += s->nbuf;
		free_slice_buffers(a, s, 0);
		return;
	}
	rt_index_return_buffers(&a->ix, t, s->bufs, s->nbuf);
	/* The same buffers go out again as the same slice (same slice_seq): the
	 * member that may have committed it before the failure, or another after a
	 * re-route that later receives both, keys the slice on (agent, trace, seq)
	 * and stores it once (issue 17: "a host's records twice"). Only the slice
	 * returned last is at the head: an earlier one, now behind it, goes under a
	 * new seq (stored twice at worst, never taken for another slice's copy). */
	a->ix.traces[t].retry_seq = s->seq;
	a->ix.traces[t].retry_nbuf = s->nbuf;
	rt_agent_queue_pinned(a, t, s->nbuf);
	s->nbuf = 0;
}

/*
 * A slice the wire cannot carry (a buffer larger than a message): sending it
 * again could never work, so its buffers are dropped and counted. They count
 * as delivered in the trace's figures: the breadcrumb reply still names them,
 * and the collector, never seeing those bytes, will not take the trace for
 * complete.
 */
static void drop_unsendable(struct rt_agent *a, struct rt_uplink_slot *s)
{
	struct rt_report_class *c = slot_class(a, s);
	if (c->unsendable_slices++ == 0)
		rt_log(RT_LOG_WARN, "trigger %u: a slice of trace %016llx (%u buffers, %llu bytes) "
		       "exceeds the wire's limits; dropped", s->trigger_id,
		       (unsigned long long)s->trace_lo, s->nbuf, (unsigned long long)s->bytes);
	c->unsendable_buffers += s->nbuf;
	c->unsendable_bytes += s->bytes;
	a->st.slices_unsendable++;
	free_slice_buffers(a, s, 1);
}

enum { SPOOLED = 0, SPOOL_LATER = -1, SPOOL_UNSENDABLE = -2 };

/* The next wait after a failed spool write: twice the last, within the bounds. */
static uint64_t spool_backoff(uint64_t *cur)
{
	*cur = *cur == 0 ? SPOOL_BACKOFF_MIN_NS
			 : *cur >= SPOOL_BACKOFF_MAX_NS / 2 ? SPOOL_BACKOFF_MAX_NS : *cur * 2;
	return *cur;
}

/*
 * Spool the slice held by slot s (re-encoded from shared memory). While a
 * failed append's back-off runs, nothing is tried: the slice waits on its trace.
 */
static int spool_slot(struct rt_agent *a, struct rt_uplink_slot *s)
{
	uint64_t id, wait;
	int rc;
	if (!a->spool || a->pass_now_ns < a->spool_retry_ns)
		return SPOOL_LATER;
	if (encode_slice(a, s) != 0)
		return SPOOL_UNSENDABLE;
	rc = rt_spool_append(a->spool, a->msg.data, a->msg.len, &id);
	if (rc == RT_SPOOL_FULL || rc == RT_SPOOL_TOO_BIG) {
		a->st.spool_full++;
		a->spool_retry_ns = a->pass_now_ns + PROBE_EVERY_NS; /* room comes with time */
		return SPOOL_LATER;
	}
	if (rc != 0) {
		a->st.spool_errors++;
		wait = spool_backoff(&a->spool_backoff_ns);
		a->spool_retry_ns = a->pass_now_ns + wait;
		rt_log_limited(&a->spool_log, a->pass_now_ns, RT_LOG_ERROR,
			       "spool %s: cannot write a slice: %s (%llu failed so far); slices wait "
			       "on their traces, next try in %llu ms", a->cfg.spool_dir,
			       rt_spool_strerror(rc), (unsigned long long)a->st.spool_errors,
			       (unsigned long long)(wait / 1000000));
		return SPOOL_LATER;
	}
	a->spool_backoff_ns = 0;
	slot_class(a, s)->slices_spooled++;
	slot_class(a, s)->bytes_spooled += s->bytes;
	a->st.slices_spooled++;
	return SPOOLED;
}

/* Spool slot s and free, drop or return its buffers; 0 if it left our hands. */
static int spool_or_return(struct rt_agent *a, struct rt_uplink_slot *s)
{
	int rc = spool_slot(a, s);
	if (rc == SPOOLED)
		free_slice_buffers(a, s, 1);
	else if (rc == SPOOL_UNSENDABLE)
		drop_unsendable(a, s);
	else
		return_slice_buffers(a, s);
	return rc == SPOOL_LATER ? -1 : 0;
}

/*
 * A spooled record is done with (the collector has it, or it is no slice): move
 * the spool's cursor past it. If the cursor cannot be written, the record stays
 * the oldest pending one, and sending it again would make the collector count a
 * duplicate on every pass; so the spool holds back (drain_spool sends nothing)
 * and only the cursor write is tried again, with back-off. 0 once it moved.
 */
static int spool_mark_done(struct rt_agent *a, uint64_t id)
{
	uint64_t wait;
	int rc = rt_spool_consume(a->spool, id);
	/* MISMATCH or EMPTY: the record is no longer the oldest pending one (the
	 * spool skipped it as damaged): nothing to hold back for. */
	if (rc == 0 || rc == RT_SPOOL_MISMATCH || rc == RT_SPOOL_EMPTY) {
		a->spool_unconsumed = 0;
		a->cursor_backoff_ns = 0;
		return 0;
	}
	a->st.spool_cursor_errors++;
	a->spool_unconsumed = id;
	wait = spool_backoff(&a->cursor_backoff_ns);
	a->cursor_retry_ns = a->pass_now_ns + wait;
	rt_log_limited(&a->spool_log, a->pass_now_ns, RT_LOG_ERROR,
		       "spool %s: record %llu is done with but the spool's cursor cannot be "
		       "written: %s; the spool holds back (nothing is sent again), next try in "
		       "%llu ms", a->cfg.spool_dir, (unsigned long long)id, rt_spool_strerror(rc),
		       (unsigned long long)(wait / 1000000));
	return -1;
}

/* A coordinator member acknowledged part of trace lo: the trace stays with it. */
static void stick(struct rt_agent *a, uint64_t lo, uint32_t member)
{
	uint32_t t = lo ? rt_index_find(&a->ix, lo) : RT_INDEX_NONE;
	if (t != RT_INDEX_NONE && !a->ix.traces[t].route)
		a->ix.traces[t].route = (uint8_t)(member + 1);
}

static void finish_slot(struct rt_agent *a, struct rt_uplink_slot *s)
{
	uint32_t member = rt_route_index(&a->route, s->up);
	rt_route_result(&a->route, member, s->x.ok);
	a->route.coll_down[member] = !s->x.ok;
	if (!s->x.ok)
		a->route.coll_probe_ns[member] = a->pass_now_ns + PROBE_EVERY_NS;
	if (s->x.ok) {
		stick(a, s->trace_lo, member);
		a->collector_down = 0;
		if (s->from_spool) {
			a->st.spool_sent++;
			spool_mark_done(a, s->spool_id);
		} else {
			slot_class(a, s)->slices_acked++;
			slot_class(a, s)->bytes_acked += s->bytes;
			a->st.slices_acked++;
			a->st.slice_bytes_acked += s->bytes;
			free_slice_buffers(a, s, 1);
		}
	} else {
		/* A slice that may have been committed (only its ACK lost) does not
		 * pin its trace here: the trace goes where its trigger goes (posted,
		 * held: route.h), and the same slice, under its seq, with it. Pinning
		 * it on the collector link's view split traces whose trigger the
		 * coordinator link had already moved. */
		if (!a->collector_down)
			rt_log(RT_LOG_WARN, "collector %s of %s did not acknowledge a slice; %s",
			       a->route.ring.id[member], a->cfg.collector,
			       a->spool ? "spooling" : "will retry");
		a->collector_down = 1;
		a->next_probe_ns = a->pass_now_ns + PROBE_EVERY_NS;
		a->st.slices_failed++;
		if (!s->from_spool)
			spool_or_return(a, s);
	}
	rt_uplink_slot_reset(s);
}

/* Cut and send (or spool) one slice of trace t. 0 if something went. */
static int cut_slice(struct rt_agent *a, uint32_t t, struct rt_report_class *c,
		     struct rt_uplink_slot *s)
{
	struct rt_trace_entry *e = &a->ix.traces[t];
	uint32_t i, max;
	rt_report_dequeue(&a->rep, &a->ix, t);
	s->trace = t;
	s->trace_lo = e->lo;
	s->trace_hi = e->hi;
	s->trigger_id = e->trigger_id; /* the trace's own id, also in the shared OTHER class */
	s->cls = (uint32_t)(c - a->rep.classes);
	/* Segments may outnumber buffers: a slice's scratch holds buffer_count. */
	max = RT_WIRE_MAX_SLICE_BUFFERS < a->pool.geo.buffer_count ? RT_WIRE_MAX_SLICE_BUFFERS
								   : a->pool.geo.buffer_count;
	if (e->retry_seq) { /* a failed slice again, whole and under its own seq */
		s->seq = e->retry_seq;
		if (e->retry_nbuf && e->retry_nbuf < max)
			max = e->retry_nbuf;
		e->retry_seq = 0;
		e->retry_nbuf = 0;
		a->st.slices_resent++;
	} else {
		s->seq = ++a->slice_seq;
	}
	s->nbuf = rt_index_take_buffers(&a->ix, t, s->bufs, a->cfg.max_slice_bytes, max);
	s->bytes = 0;
	for (i = 0; i < s->nbuf; i++)
		s->bytes += a->ix.buf_bytes[s->bufs[i]];
	if (e->nbuffers)
		rt_agent_queue_pinned(a, t, 0); /* the rest waits for its next turn */
	rt_report_charge(&a->rep, c, s->bytes);
	s->sent_ns = a->pass_now_ns;
	return 0;
}

/* The member trace t's slices go to (route.h). */
static uint32_t member_of(const struct rt_agent *a, uint32_t t)
{
	const struct rt_trace_entry *e = &a->ix.traces[t];
	return rt_route_member(&a->route, e->lo, sticky_of(a, e));
}

/*
 * A trace whose member cannot take a slice now: no free slot, or its last slice
 * failed and its next probe is not due. The schedule passes over it, so that a
 * dead member's traces (waiting for it) do not hold back the other members'
 * (seen: a live member closed a trace incoherent because the agent's slices
 * waited behind a dead member's probe back-off).
 */
static int slice_blocked(void *arg, uint32_t t)
{
	struct rt_agent *a = arg;
	uint32_t m = member_of(a, t);
	if (a->route.coll_down[m] && a->pass_now_ns < a->route.coll_probe_ns[m])
		return 1;
	return rt_uplink_free_slot(&a->route.up[m]) == NULL;
}

static void send_new_slices(struct rt_agent *a)
{
	struct rt_report_class *c;
	uint32_t t;
	int via_spool = a->spool && (a->collector_down || spool_pending(a) > 0 ||
				     !a->route.has_coll);
	if (via_spool && a->pass_now_ns < a->spool_retry_ns)
		return;
	if (!a->spool && !a->route.has_coll)
		return; /* nowhere to put them yet: they wait, pinned, under the overload policy */
	a->rep.blocked = via_spool ? NULL : slice_blocked;
	a->rep.blocked_arg = a;
	while ((t = rt_report_next(&a->rep, &a->ix, &c)) != RT_INDEX_NONE) {
		/* The slice goes to the trace's member (route.h); one whose member
		 * cannot take it now is passed over (slice_blocked). */
		struct rt_uplink_slot *s;
		if (via_spool) {
			s = &a->spool_slot;
		} else {
			uint32_t m = member_of(a, t);
			if (!(s = rt_uplink_free_slot(&a->route.up[m])))
				break;
			if (a->route.coll_down[m]) /* this slice probes it */
				a->route.coll_probe_ns[m] = a->pass_now_ns + PROBE_EVERY_NS;
		}
		cut_slice(a, t, c, s);
		a->st.slices_sent++;
		if (via_spool) {
			if (spool_or_return(a, s) != 0)
				return;
			continue;
		}
		if (encode_slice(a, s) != 0) {
			drop_unsendable(a, s);
			continue;
		}
		if (rt_uplink_send_slice(s->up, s, a->msg.data, a->msg.len) != 0) {
			return_slice_buffers(a, s);
			return;
		}
	}
}

/* One spooled slice in flight at a time, oldest first: probes and drains. */
static void drain_spool(struct rt_agent *a)
{
	const void *rec;
	size_t len;
	uint64_t id;
	struct rt_uplink_slot *s;
	uint32_t i, m;
	uint64_t lo, seq;
	int rc;
	if (!a->spool || spool_pending(a) == 0)
		return;
	/* A record done with whose cursor write failed: only the cursor is retried. */
	if (a->spool_unconsumed &&
	    (a->pass_now_ns < a->cursor_retry_ns || spool_mark_done(a, a->spool_unconsumed) != 0))
		return;
	if (!a->route.has_coll || spool_pending(a) == 0)
		return;
	for (m = 0; m < a->route.n; m++)
		for (i = 0; i < RT_UPLINK_SLOTS; i++)
			if (rt_reqrep_state(&a->route.up[m].slots[i].x.rr) != RT_REQREP_FREE &&
			    a->route.up[m].slots[i].from_spool)
				return;
	if (a->collector_down && a->pass_now_ns < a->next_probe_ns)
		return;
	if ((rc = rt_spool_peek(a->spool, &rec, &len, &id)) != 0) {
		if (rc < 0) {
			a->st.spool_errors++;
			rt_log_limited(&a->spool_log, a->pass_now_ns, RT_LOG_ERROR,
				       "spool %s: cannot read the oldest slice: %s (%llu failed so far)",
				       a->cfg.spool_dir, rt_spool_strerror(rc),
				       (unsigned long long)a->st.spool_errors);
			a->next_probe_ns = a->pass_now_ns + PROBE_EVERY_NS;
		}
		return;
	}
	{
		struct rt_wire_msg m;
		if (rt_wire_decode(rec, len, &m) != 0 || m.type != RT_WIRE_SLICE) {
			/* Checksummed, so not damage: a record of another program. */
			rt_wire_msg_free(&m);
			a->st.spool_foreign++;
			rt_log_limited(&a->spool_log, a->pass_now_ns, RT_LOG_WARN,
				       "spool %s: record %llu is not a slice; skipped", a->cfg.spool_dir,
				       (unsigned long long)id);
			spool_mark_done(a, id);
			return;
		}
		lo = m.slice.trace_lo;
		seq = m.slice.slice_seq;
		rt_wire_msg_free(&m);
	}
	{
		uint32_t t = rt_index_find(&a->ix, lo);
		uint8_t sticky = t != RT_INDEX_NONE ? sticky_of(a, &a->ix.traces[t]) : 0;
		if (!(s = rt_uplink_free_slot(&a->route.up[rt_route_member(&a->route, lo, sticky)])))
			return;
	}
	s->seq = seq;
	s->trace_lo = lo; /* for the route's stickiness on its ACK */
	s->from_spool = 1;
	s->spool_id = id;
	s->nbuf = 0;
	a->next_probe_ns = a->pass_now_ns + PROBE_EVERY_NS;
	rt_uplink_send_slice(s->up, s, rec, len);
}

/*
 * The coordinator group's upkeep: triggers a member acknowledged stick their
 * traces to it; the outbox of a member dropped from the live set goes to each
 * message's member now (a message for a trace that member acknowledged part
 * of stays, waiting for its return: route.h).
 */
static void route_upkeep(struct rt_agent *a)
{
	uint32_t m, k, n, trig;
	uint64_t lo;
	for (m = 0; m < a->route.n; m++) {
		struct rt_uplink *u = &a->route.up[m];
		while (rt_uplink_take_acked(u, &lo) == 0)
			stick(a, lo, m);
		while (rt_uplink_take_held(u, &lo) == 0) /* it may hold them: they wait for it */
			stick(a, lo, m);
		/* A live member's outbox is looked at again when a message failed back
		 * into it: its trace may have moved meanwhile (a later message of it
		 * went to another member while this one was in flight). */
		if ((a->route.ring.live[m] && !u->requeued) || !u->out_len)
			continue;
		u->requeued = 0;
		for (n = u->out_len, k = 0; k < n; k++) {
			uint32_t t, to;
			a->msg.len = 0;
			if (rt_uplink_take(u, &a->msg, &trig, &lo) != 0)
				break;
			t = rt_index_find(&a->ix, lo);
			to = rt_route_member(&a->route, lo,
					     t != RT_INDEX_NONE ? sticky_of(a, &a->ix.traces[t]) : 0);
			if (to != m)
				a->route.moved++;
			if (t != RT_INDEX_NONE)
				a->ix.traces[t].posted = (uint8_t)(to + 1);
			rt_uplink_post(&a->route.up[to], &a->msg, trig, lo);
		}
	}
}

void rt_agent_report_pump(struct rt_agent *a)
{
	uint32_t i, m;
	for (m = 0; m < a->route.n; m++)
		for (i = 0; i < RT_UPLINK_SLOTS; i++)
			if (a->route.up[m].coll_open && rt_uplink_slot_done(&a->route.up[m].slots[i]))
				finish_slot(a, &a->route.up[m].slots[i]);
	rt_route_pump(&a->route, a->pass_now_ns);
	route_upkeep(a);
	drain_spool(a);
	rt_report_refill(&a->rep, a->pass_now_ns);
	send_new_slices(a);
}

/* ------------------------------------------------------ remote triggers ---- */

static size_t reply_bytes(struct rt_agent *a, uint8_t *out, size_t cap);
static size_t error_ack(struct rt_agent *a, int status, uint8_t *out, size_t cap);

size_t rt_agent_reply_msg(struct rt_agent *a, uint8_t *out, size_t cap)
{
	return reply_bytes(a, out, cap);
}

size_t rt_agent_reply_ack(struct rt_agent *a, int32_t status, uint8_t *out, size_t cap)
{
	return error_ack(a, status, out, cap);
}

static size_t reply_bytes(struct rt_agent *a, uint8_t *out, size_t cap)
{
	if (a->msg.len > cap)
		return 0;
	memcpy(out, a->msg.data, a->msg.len);
	return a->msg.len;
}

static size_t error_ack(struct rt_agent *a, int status, uint8_t *out, size_t cap)
{
	struct rt_wire_ack ack = { .status = status };
	a->msg.len = 0;
	if (rt_wire_encode_ack(&a->msg, &ack) != 0)
		return 0;
	return reply_bytes(a, out, cap);
}

/*
 * What this agent has had of a trace since it was (last) indexed: buffers and
 * bytes still held, in flight, and delivered (acknowledged, spooled, or dropped
 * as unsendable). Cumulative, so buffers > 0 means "has or had data", and the
 * collector has the whole slice once it received `bytes` payload bytes.
 */
static void reply_figures(const struct rt_trace_entry *e, struct rt_wire_trace *out)
{
	out->buffers = e->nbuffers + e->inflight + e->done_buffers;
	out->bytes = e->bytes + e->inflight_bytes + e->done_bytes;
}

/*
 * Writers' runs of the trace that began (a seq-0 buffer) and have not ended (no
 * LAST buffer yet): a thread that flushed mid-trace, or sealed a full buffer and
 * has not written the next, holds no buffer the scan could see, yet its end is
 * still to come.
 */
static uint32_t unfinished_runs(const struct rt_trace_entry *e)
{
	return e->streams_begun > e->streams_ended ? e->streams_begun - e->streams_ended : 0;
}

static size_t remote_trigger(struct rt_agent *a, const struct rt_wire_remote_trigger *rq,
			     uint8_t *out, size_t cap)
{
	/* Per-peer rate limit first (agent/guard.h): a flood pins nothing. */
	int32_t refused = rt_agent_remote_refused(a);
	if (refused)
		return error_ack(a, refused, out, cap);
	struct rt_wire_trace traces[RT_WIRE_MAX_TRACES];
	/* Copies: pinning a later trace of the request may reclaim an earlier,
	 * quiet one's entry when the table is full. */
	uint32_t crumbs[RT_WIRE_MAX_TRACES][RT_INDEX_MAX_CRUMBS];
	struct rt_wire_breadcrumb_reply rep;
	struct rt_report_class *c = rt_report_class_of(&a->rep, rq->trigger_id);
	uint64_t los[RT_WIRE_MAX_TRACES];
	uint32_t open[RT_WIRE_MAX_TRACES];
	uint32_t i;
	c->remote++;
	a->st.remote_triggers++;
	rt_agent_drain_before_reply(a);
	for (i = 0; i < rq->trace_count; i++)
		los[i] = rq->traces[i].trace_lo;
	/* Nothing is taken from the queues between this count and the figures below,
	 * so each buffer of the trace is in exactly one of them: in the index (held,
	 * in flight or done), or open (with a writer, or queued after the drain). */
	rt_agent_count_open(a, los, rq->trace_count, open);
	for (i = 0; i < rq->trace_count; i++) {
		/* A trace this host has nothing of, and no writer holds, gets no entry:
		 * remote triggers naming unknown traces must not fill the table. */
		uint32_t t = open[i] || rt_index_find(&a->ix, rq->traces[i].trace_lo) != RT_INDEX_NONE
				     ? pin_trace(a, c, rq->traces[i].trace_hi,
						 rq->traces[i].trace_lo, rq->trigger_id)
				     : RT_INDEX_NONE;
		memset(&traces[i], 0, sizeof traces[i]);
		traces[i].trace_hi = rq->traces[i].trace_hi;
		traces[i].trace_lo = rq->traces[i].trace_lo;
		traces[i].open = open[i];
		if (open[i])
			a->st.remote_open_traces++;
		if (t == RT_INDEX_NONE)
			continue;
		if (rq->member[0]) { /* a sharded group's member works on it (route.h) */
			int k = rt_ring_find(&a->route.ring, rq->member);
			if (k >= 0)
				a->ix.traces[t].asked = (uint8_t)(k + 1);
		}
		reply_figures(&a->ix.traces[t], &traces[i]);
		traces[i].open += unfinished_runs(&a->ix.traces[t]);
		if (traces[i].open && !open[i])
			a->st.remote_open_traces++;
		traces[i].breadcrumb_count = a->ix.traces[t].ncrumbs;
		memcpy(crumbs[i], a->ix.traces[t].crumbs, sizeof crumbs[i]);
		traces[i].breadcrumbs = crumbs[i];
	}
	rep.request_id = rq->request_id;
	rep.agent_id = a->cfg.agent_id;
	rep.trace_count = rq->trace_count;
	rep.traces = traces;
	a->msg.len = 0;
	if (rt_wire_encode_breadcrumb_reply(&a->msg, &rep) != 0)
		return error_ack(a, RT_WIRE_E_INVAL, out, cap);
	return reply_bytes(a, out, cap);
}

static int is_word(const uint8_t *req, size_t len, const char *word)
{
	size_t n = strlen(word);
	return len >= n && memcmp(req, word, n) == 0 && (len == n || req[n] == ' ' || req[n] == 0);
}

size_t rt_agent_handle_request(struct rt_agent *a, const uint8_t *req, size_t len,
			       uint8_t *out, size_t cap)
{
	struct rt_wire_msg m;
	int rc;
	if (cap == 0)
		return 0;
	if (is_word(req, len, "status")) {
		int json = len >= 11 && memcmp(req + 7, "json", 4) == 0;
		return rt_agent_status(a, json, (char *)out, cap) + 1;
	}
	if (is_word(req, len, "ping"))
		return (size_t)snprintf((char *)out, cap, "pong %u", a->cfg.agent_id) + 1;
	if (!rt_wire_looks_like_message(req, len)) /* a text command */
		return (size_t)snprintf((char *)out, cap,
					"error: unknown request (try status, status json, ping)") + 1;
	rc = rt_wire_decode(req, len, &m);
	if (rc == 0 && (m.type == RT_WIRE_WINDOW_QUERY || m.type == RT_WIRE_WINDOW_RELEASE)) {
		/* Weaving (agent/window.c). */
		size_t n = m.type == RT_WIRE_WINDOW_QUERY
				   ? rt_agent_window_query(a, &m.wquery, out, cap)
				   : rt_agent_window_release(a, &m.wrelease, out, cap);
		rt_wire_msg_free(&m);
		return n;
	}
	if (rc == 0 && m.type == RT_WIRE_POLICY) { /* agent/policy.c */
		int32_t st = rt_agent_apply_policy(a, &m.policy);
		rt_wire_msg_free(&m);
		return error_ack(a, st, out, cap);
	}
	if (rc != 0 || m.type != RT_WIRE_REMOTE_TRIGGER) {
		a->st.bad_requests++;
		rt_wire_msg_free(&m);
		return error_ack(a, rc != 0 ? rc : RT_WIRE_E_UNKNOWN_TYPE, out, cap);
	}
	{
		size_t n = remote_trigger(a, &m.remote, out, cap);
		rt_wire_msg_free(&m);
		return n;
	}
}

/* -------------------------------------------------------- open / close ---- */

int rt_agent_reporting_open(struct rt_agent *a, char *err, size_t errlen)
{
	struct rt_report_config rc;
	memset(&rc, 0, sizeof rc);
	rc.trigger_rate = a->cfg.trigger_rate;
	rc.trigger_burst = a->cfg.trigger_burst > 1 ? a->cfg.trigger_burst : 1;
	rc.bandwidth = a->cfg.bandwidth;
	rc.class_bandwidth = a->cfg.trigger_bandwidth;
	rc.hold_ns = (uint64_t)(a->cfg.report_hold * 1e9);
	rc.relax_ns = LEVEL_RELAX_NS;
	rc.settle_ns = LEVEL_SETTLE_NS;
	snprintf(rc.weights, sizeof rc.weights, "%s", a->cfg.trigger_weights);
	if (rt_report_init(&a->rep, &rc, a->ix.capacity, err, errlen) != 0)
		return -1;
	a->slicebufs = calloc(a->pool.geo.buffer_count, sizeof *a->slicebufs);
	a->spool_slot.bufs = malloc((size_t)a->pool.geo.buffer_count * sizeof(uint32_t));
	if (!a->slicebufs || !a->spool_slot.bufs) {
		snprintf(err, errlen, "out of memory for slice scratch");
		return -1;
	}
	/* A slice's message must fit the wire's limit, with room for its framing. */
	if (a->cfg.max_slice_bytes == 0)
		a->cfg.max_slice_bytes = 4u << 20;
	if (a->cfg.max_slice_bytes > RT_WIRE_MAX_MESSAGE - (4u << 20))
		a->cfg.max_slice_bytes = RT_WIRE_MAX_MESSAGE - (4u << 20);
	if (a->cfg.spool_dir[0]) {
		struct rt_spool_opts so;
		memset(&so, 0, sizeof so);
		so.dir = a->cfg.spool_dir;
		so.max_bytes = a->cfg.spool_max;
		a->spool = calloc(1, sizeof *a->spool);
		if (!a->spool || rt_spool_open(a->spool, &so, err, errlen) != 0) {
			free(a->spool);
			a->spool = NULL;
			return -1;
		}
		if (spool_pending(a))
			rt_log(RT_LOG_INFO, "spool %s holds %llu slices from before; sending them first",
			       a->cfg.spool_dir, (unsigned long long)spool_pending(a));
	}
	return 0;
}

int rt_agent_connect(struct rt_agent *a, const char *control_addr, char *err, size_t errlen)
{
	struct rt_wire_register r;
	memset(&r, 0, sizeof r);
	r.agent_id = a->cfg.agent_id;
	r.pid = (uint32_t)getpid();
	r.start_unix_ns = a->start_unix_ns;
	if (a->cfg.host[0])
		snprintf(r.host, sizeof r.host, "%s", a->cfg.host);
	else if (gethostname(r.host, sizeof r.host - 1) != 0)
		snprintf(r.host, sizeof r.host, "unknown");
	snprintf(r.control_addr, sizeof r.control_addr, "%s", control_addr ? control_addr : "");
	snprintf(a->control_addr, sizeof a->control_addr, "%s", r.control_addr);
	r.buffer_size = a->pool.geo.buffer_size;
	r.buffer_count = a->pool.geo.buffer_count;
	r.tsc_hz = a->pool.geo.tsc_hz;
	r.tsc_ref_tick = a->pool.geo.tsc_ref_tick;
	r.tsc_ref_unix_ns = a->pool.geo.tsc_ref_unix_ns;
	a->msg.len = 0;
	if (rt_wire_encode_register(&a->msg, &r) != 0) {
		snprintf(err, errlen, "cannot encode the registration");
		return -1;
	}
	return rt_route_open(&a->route, a->cfg.collector, a->cfg.coordinator,
			     a->pool.geo.buffer_count, a->cfg.outbox,
			     (int)a->cfg.report_timeout_ms, &a->msg, err, errlen);
}

void rt_agent_reporting_close(struct rt_agent *a)
{
	rt_route_close(&a->route);
	if (a->spool) {
		rt_spool_close(a->spool);
		free(a->spool);
		a->spool = NULL;
	}
	rt_report_free(&a->rep);
	rt_wire_buf_free(&a->msg);
	free(a->slicebufs);
	free(a->spool_slot.bufs);
	a->slicebufs = NULL;
	a->spool_slot.bufs = NULL;
}
