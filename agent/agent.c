/*
 * agent/agent.c — how the agent keeps the pool's books.
 *
 * One thread calls rt_agent_poll in a loop. A pass:
 *   1. pops complete entries in batches of 256, validates each against the pool
 *      and its buffer header (rt_complete_entry_check), and indexes it;
 *   2. pops breadcrumbs and trigger groups (through shm/drain.c's passes) and
 *      records crumbs / pins traces;
 *   3. evicts least-recently-seen untriggered traces while occupancy (buffers not
 *      in the available queue) is above the threshold, and applies the overload
 *      policy to triggered data past its share (report_pipeline.c);
 *   4. every liveness interval, puts back what a client overwrote in the shared
 *      header and repairs the rings (check_pool, below), then checks each
 *      registry slot's process (pid plus start time, so pid reuse is caught) and
 *      salvages a dead client's buffers;
 *   5. pushes every freed buffer back to the available queue in one batch, its
 *      header cleared first: a header that still said SEALED would look like data
 *      to the next agent that rebuilds from headers.
 *
 * Segments (ABI 5): a complete entry names one segment of a buffer (a writer's
 * run of one trace; several traces share a writer's buffer). The index holds
 * segment slots (slot b < buffer_count is buffer b's first segment); per buffer
 * we count its live segments and whether its writer kept or left it. A buffer
 * is recycled when it is left and nothing of it is live (buffer_left,
 * rt_agent_release_segment). Where headers must be read (takeover, dead
 * writers, a reset complete queue) each buffer's chain is walked from where
 * the queue's entries stopped (walk_chain/take_chain).
 *
 * Buffer states are read from headers only where the queues cannot tell: at a
 * takeover, and for dead clients. A header is classified as
 *   SEALED           data; indexed ("recovered": its queue entry may still come,
 *                    and is then an echo, not a duplicate);
 *   INUSE, unsealed  a writer's current buffer: left alone while the writer lives,
 *                    indexed with the bytes its frames cover once it is dead;
 *   STASHED          in a writer's stash: left alone, or freed if it is dead;
 *   otherwise        free if found in the available queue, else "lost": looked at
 *                    again after a grace second (a client may have popped it and
 *                    not stamped it yet) and freed if still blank.
 *
 * Shared memory is written by every client, so the agent takes no bound from
 * it: the geometry is its own copy (pool.geo, validated at create/attach), ring
 * indexes use the masks of that copy, and every id a client can write is checked
 * against it. check_pool, each liveness interval:
 *   - writes back any header field that differs from the copy (counted);
 *   - per ring, reads the counters twice; if they held still and make no sense
 *     (more claimed than the ring holds, or more published than claimed), the
 *     ring is emptied (counted) and what it held is recovered from the headers:
 *     blank unowned buffers of the available queue go on the lost list, sealed
 *     unindexed ones of the complete queue are indexed as recovered;
 *   - if p_tail stood still behind p_head for RING_STALL_NS, a producer died in
 *     its claim window: the claims are published (counted), after voiding any
 *     id of the available queue in them that is not a free buffer, so that no
 *     stale id reaches a client. Consumers validate the rest as always.
 */
#include "agent.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent_internal.h"
#include "log.h"
#include "retrace/retrace.h"
#include "shm/drain.h"
#include "shm/frame.h"

#define COMPLETE_BATCH 256u
#define LOST_GRACE_NS 1000000000ull
/* p_tail standing still this long behind p_head: its producer died mid-enqueue
 * (the window is a few instructions; a preempted producer finishes within a
 * time slice). */
#define RING_STALL_NS 1000000000ull
#define VOID_BUFFER_ID UINT32_MAX /* an available entry no client will use */

uint64_t rt_agent_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t unix_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint32_t rt_agent_queue_depth(const struct rt_agent *a, int q)
{
	struct ck_ring *r = a->pool.ring[q];
	uint32_t d = ck_pr_load_uint(&r->p_tail) - ck_pr_load_uint(&r->c_head);
	return d <= a->pool.geo.ring_mask[q] ? d : 0; /* nonsense until check_pool resets it */
}

uint32_t rt_agent_free_buffers(const struct rt_agent *a)
{
	return rt_agent_queue_depth(a, RT_Q_AVAILABLE) + a->nrecycle;
}

uint32_t rt_agent_clients_attached(const struct rt_agent *a)
{
	uint32_t i, n = 0;
	for (i = 0; i < a->pool.geo.registry_slots; i++)
		if (ck_pr_load_32(&a->pool.registry[i].pid) != 0)
			n++;
	return n;
}

/* ------------------------------------------------------------ recycling ---- */

/*
 * Our pushes whose commit wait was given up (a client preempted inside its own
 * enqueue): published here, in claim order, as soon as the claims before them
 * are. Without this, our claim would hold the available queue until the stall
 * repair a second later.
 */
static void finish_pending_pushes(struct rt_agent *a)
{
	uint32_t done = 0;
	while (done < a->navail_pending &&
	       rt_ring_finish_claim(a->pool.ring[RT_Q_AVAILABLE], &a->avail_pending[done]))
		done++;
	if (done) {
		memmove(a->avail_pending, a->avail_pending + done,
			(a->navail_pending - done) * sizeof *a->avail_pending);
		a->navail_pending -= done;
	}
}

static void recycle_flush(struct rt_agent *a)
{
	struct rt_available_entry batch[256];
	struct rt_ring_claim claim;
	uint32_t done = 0;
	finish_pending_pushes(a);
	while (done < a->nrecycle) {
		uint32_t n = a->nrecycle - done, i;
		int rc;
		if (n > 256)
			n = 256;
		for (i = 0; i < n; i++)
			batch[i].buffer_id = a->recycle[done + i];
		rc = rt_pool_push_available_claim(&a->pool, batch, n, &claim);
		if (rc == RT_RING_NOT_ENQUEUED)
			a->st.recycle_fail += n; /* only if the ring is corrupt: leak, never reuse twice */
		else if (rc == RT_RING_PENDING &&
			 a->navail_pending < sizeof a->avail_pending / sizeof *a->avail_pending)
			a->avail_pending[a->navail_pending++] = claim; /* else: the stall repair */
		done += n;
	}
	a->nrecycle = 0;
	finish_pending_pushes(a);
}

/* Blank the header, then queue the id; flushed at the end of the pass. */
void rt_agent_recycle(struct rt_agent *a, uint32_t id)
{
	struct rt_buffer_header *h = rt_pool_buffer(&a->pool, id);
	if (a->seg.live[id]) /* segments of it are still held: never hand it out */
		return;
	ck_pr_store_32(&h->flags, 0);
	h->magic = 0;
	h->trace_lo = h->trace_hi = 0;
	h->pid = 0;
	h->pin_trigger = 0;
	if (a->seg.state[id] == RT_SEGBUF_LEFT && a->seg.left_held)
		a->seg.left_held--;
	a->seg.state[id] = RT_SEGBUF_WRITER;
	a->seg.next_off[id] = 0;
	a->seg.recovered[id] = 0;
	a->st.buffers_recycled++;
	if (a->nlost)
		a->lost_flag[id] = 0; /* accounted for: not a lost buffer any more */
	if (a->nrecycle == a->recycle_cap)
		recycle_flush(a);
	a->recycle[a->nrecycle++] = id;
}

/* ------------------------------------------------------------ segments ---- */

/* A slot for the segment at (b, off): b itself for offset 0, else a free extra slot. */
static uint32_t slot_alloc(struct rt_agent *a, uint32_t b, uint32_t off)
{
	uint32_t s;
	if (off == 0)
		return a->ix.buf_trace[b] == RT_INDEX_NONE ? b : RT_INDEX_NONE;
	if (a->seg.nfree == 0)
		return RT_INDEX_NONE;
	s = a->seg.free_slots[--a->seg.nfree];
	a->seg.slot_buf[s] = b;
	a->seg.slot_off[s] = off;
	return s;
}

static void slot_free(struct rt_agent *a, uint32_t s)
{
	if (s >= a->pool.geo.buffer_count)
		a->seg.free_slots[a->seg.nfree++] = s;
}

/* The writer left buffer b: back to the pool now, or when its last segment goes. */
static void buffer_left(struct rt_agent *a, uint32_t b)
{
	if (a->seg.state[b] == RT_SEGBUF_LEFT)
		return;
	if (a->seg.live[b] == 0) {
		rt_agent_recycle(a, b);
		return;
	}
	a->seg.state[b] = RT_SEGBUF_LEFT;
	a->seg.left_held++;
}

void rt_agent_release_segment(struct rt_agent *a, uint32_t slot)
{
	uint32_t b;
	if (slot >= a->seg.nslots)
		return;
	b = a->seg.slot_buf[slot];
	a->seg.data_bytes -= a->ix.buf_bytes[slot] <= a->seg.data_bytes ? a->ix.buf_bytes[slot]
									  : a->seg.data_bytes;
	slot_free(a, slot);
	if (a->seg.live[b])
		a->seg.live[b]--;
	if (a->seg.live[b] == 0 && a->seg.state[b] == RT_SEGBUF_LEFT)
		rt_agent_recycle(a, b);
}

uint64_t rt_agent_buffers_held(const struct rt_agent *a)
{
	uint64_t held = 0, b, n = a->pool.geo.buffer_count;
	for (b = 0; b < n; b++)
		held += a->seg.live[b] != 0;
	return held;
}

double rt_agent_utilisation(const struct rt_agent *a)
{
	uint64_t held = rt_agent_buffers_held(a);
	return held ? (double)a->seg.data_bytes / ((double)held * a->pool.geo.buffer_size) : 0.0;
}

/* ------------------------------------------------------------- removal ---- */

/* Age of a trace's oldest data, from TSC ticks (no 128-bit division per eviction). */
static uint64_t data_age_us(const struct rt_agent *a, const struct rt_trace_entry *e)
{
	if (e->first_tick == 0 || e->first_tick > a->pass_tick)
		return 0;
	return (uint64_t)((double)(a->pass_tick - e->first_tick) * a->ns_per_tick / 1000.0);
}

void rt_agent_remove_trace(struct rt_agent *a, uint32_t t, int evicted)
{
	uint32_t n, i;
	uint64_t age = evicted ? data_age_us(a, rt_index_trace(&a->ix, t)) : 0;
	rt_report_dequeue(&a->rep, &a->ix, t);
	n = rt_index_remove(&a->ix, t, a->scratch, evicted, age);
	if (evicted && (a->st.horizon_min_us == 0 || age < a->st.horizon_min_us))
		a->st.horizon_min_us = age ? age : 1;
	for (i = 0; i < n; i++)
		rt_agent_release_segment(a, a->scratch[i]);
}

/* Evict the least recently seen untriggered trace; its buffer count, 0 if none. */
static uint32_t evict_oldest(struct rt_agent *a)
{
	uint32_t t = rt_index_lru_oldest(&a->ix), n;
	if (t == RT_INDEX_NONE)
		return 0;
	n = rt_index_trace(&a->ix, t)->nbuffers;
	rt_agent_remove_trace(a, t, 1);
	return n ? n : 1;
}

static uint64_t occupancy(const struct rt_agent *a)
{
	uint32_t free_now = rt_agent_free_buffers(a);
	uint32_t total = a->pool.geo.buffer_count;
	return free_now >= total ? 0 : total - free_now;
}

/*
 * Occupancy is read once: the available queue's counters are written by every
 * client, so reading them per eviction would bounce their cache line. Buffers
 * freed here count as free at once (they sit in the recycle batch). A trace's
 * segments free their buffers only once the writers left them and no other
 * segment of them is held; segments are time-ordered in a buffer, so evicting
 * the oldest traces frees the oldest buffers. Nothing is evicted while no
 * buffer is left by its writer and held by the index (writers hold all).
 */
static void enforce_limits(struct rt_agent *a)
{
	uint64_t occ = occupancy(a);
	if (occ > a->evict_limit) {
		uint64_t want = occ - a->evict_limit, start = a->st.buffers_recycled;
		while (a->st.buffers_recycled - start < want && a->seg.left_held > 0 &&
		       evict_oldest(a) > 0)
			;
	}
	rt_agent_abandon_overload(a);
}

/*
 * Make room in a full table: free the entry that saw activity longest ago of
 * two candidates, the oldest untriggered trace (evicted with its data) and the
 * pinned trace that went quiet longest ago (all it had is delivered, nothing
 * held or in flight: it keeps only figures for a breadcrumb reply and the pin
 * for data that may still come). Preferring either kind always would throw away
 * fresh data for stale figures, or the reverse. 0 if there is neither.
 */
static int make_room(struct rt_agent *a)
{
	uint32_t q = rt_index_quiet_oldest(&a->ix), u = rt_index_lru_oldest(&a->ix);
	if (q == RT_INDEX_NONE)
		return evict_oldest(a) > 0;
	if (u != RT_INDEX_NONE &&
	    a->ix.traces[u].last_seen_ns <= a->ix.traces[q].last_seen_ns)
		return evict_oldest(a) > 0;
	rt_agent_remove_trace(a, q, 0);
	a->st.quiet_reclaimed++;
	return 1;
}

/* A trace entry for lo, making room if the table is full. */
uint32_t rt_agent_trace_for(struct rt_agent *a, uint64_t lo, uint64_t now)
{
	uint32_t t = rt_index_get(&a->ix, lo, now);
	while (t == RT_INDEX_NONE && make_room(a))
		t = rt_index_get(&a->ix, lo, now);
	if (t == RT_INDEX_NONE)
		a->st.index_full++;
	return t;
}

/* ------------------------------------------------------------ indexing ---- */

/* A free segment slot for (b, off), evicting the oldest trace while none is. */
static uint32_t slot_for(struct rt_agent *a, uint32_t b, uint32_t off)
{
	uint32_t s = slot_alloc(a, b, off);
	while (s == RT_INDEX_NONE && off != 0 && evict_oldest(a) > 0)
		s = slot_alloc(a, b, off);
	if (s == RT_INDEX_NONE)
		a->st.segment_slots_full++;
	return s;
}

/*
 * Index the segment at (b, off) of `bytes` record bytes; `recovered` when found
 * from its header. Its slot, or RT_INDEX_NONE when there was no room (counted)
 * or it is owned.
 */
static uint32_t index_segment(struct rt_agent *a, uint32_t b, uint32_t off, uint32_t bytes,
			 int recovered, uint64_t now)
{
	const struct rt_buffer_header *h = rt_pool_segment(&a->pool, b, off);
	uint32_t t = rt_agent_trace_for(a, h->trace_lo, now), slot;
	if (t == RT_INDEX_NONE)
		return RT_INDEX_NONE;
	slot = slot_for(a, b, off);
	if (slot == RT_INDEX_NONE)
		return RT_INDEX_NONE;
	/* Evicting for a slot may have removed t itself: look it up again. */
	if (!a->ix.traces[t].in_use || a->ix.traces[t].lo != h->trace_lo) {
		t = rt_agent_trace_for(a, h->trace_lo, now);
		if (t == RT_INDEX_NONE) {
			slot_free(a, slot);
			return RT_INDEX_NONE;
		}
	}
	if (a->ix.traces[t].hi == 0)
		a->ix.traces[t].hi = h->trace_hi;
	if (rt_index_add_buffer(&a->ix, t, slot, bytes, h->first_tick, now) != RT_INDEX_ADDED) {
		slot_free(a, slot);
		return RT_INDEX_NONE;
	}
	a->seg.live[b]++;
	a->seg.data_bytes += bytes;
	if (rt_seg_next(off, bytes) > a->seg.next_off[b])
		a->seg.next_off[b] = rt_seg_next(off, bytes);
	/* Each writer's run of a trace starts at seq 0 and ends with the LAST flag:
	 * while more runs began than ended, a writer may still add to the trace. */
	if (h->seq == 0)
		a->ix.traces[t].streams_begun++;
	if (ck_pr_load_32(&h->flags) & RT_BUF_LAST)
		a->ix.traces[t].streams_ended++;
	a->ix.buf_recovered[slot] = (uint8_t)recovered;
	if (recovered)
		a->seg.recovered[b] = 1;
	if (a->ix.traces[t].state != RT_TRACE_UNTRIGGERED) {
		rt_agent_mark_pinned(a, slot, a->ix.traces[t].trigger_id);
		rt_agent_queue_pinned(a, t, 1);
	}
	a->st.buffers_indexed++;
	a->st.bytes_indexed += bytes;
	return slot;
}

static void handle_complete(struct rt_agent *a, const struct rt_complete_entry *e,
			    uint64_t now)
{
	uint32_t b = e->buffer_id;
	switch (rt_complete_entry_check(&a->pool, e)) {
	case RT_CE_RANGE: a->st.bad_range++; return;
	case RT_CE_BYTES: a->st.bad_bytes++; return;
	case RT_CE_ZERO_TRACE: a->st.bad_zero_trace++; return;
	case RT_CE_HEADER: a->st.bad_header++; return;
	case RT_CE_CLOSE_MARK:
		a->st.closes++;
		if (a->seg.state[b] != RT_SEGBUF_LEFT)
			buffer_left(a, b);
		return;
	default: break;
	}
	/* A segment before the buffer's next one was seen already: a repeat, or
	 * the entry of a segment a takeover found in its header. */
	if (e->offset < a->seg.next_off[b] || a->seg.state[b] == RT_SEGBUF_LEFT ||
	    (e->offset == 0 && a->ix.buf_trace[b] != RT_INDEX_NONE)) {
		if (a->seg.recovered[b] && e->offset < a->seg.next_off[b])
			a->st.recovered_echoes++;
		else
			a->st.bad_duplicate++;
		return;
	}
	if (index_segment(a, b, e->offset, e->bytes, 0, now) == RT_INDEX_NONE &&
	    e->offset >= a->seg.next_off[b])
		a->seg.next_off[b] = rt_seg_next(e->offset, e->bytes); /* dropped, counted */
	if (e->flags & RT_ENTRY_KEPT)
		a->seg.state[b] = RT_SEGBUF_KEPT;
	else
		buffer_left(a, b);
}

static unsigned int poll_complete(struct rt_agent *a, uint64_t now)
{
	struct rt_complete_entry in[COMPLETE_BATCH];
	unsigned int n, i;
	n = rt_pool_pop_complete(&a->pool, in, COMPLETE_BATCH);
	a->st.complete_entries += n;
	for (i = 0; i < n; i++)
		handle_complete(a, &in[i], now);
	return n;
}

static void on_breadcrumb(void *arg, const struct rt_breadcrumb_entry *e)
{
	struct rt_agent *a = arg;
	uint32_t t;
	if (e->trace_lo == 0 || e->agent_id == 0) {
		a->st.bad_breadcrumbs++;
		return;
	}
	a->st.breadcrumbs++;
	t = rt_agent_trace_for(a, e->trace_lo, a->pass_now_ns);
	if (t != RT_INDEX_NONE && rt_index_add_crumb(&a->ix, t, e->agent_id, a->pass_now_ns) == 1 &&
	    a->ix.traces[t].state != RT_TRACE_UNTRIGGERED)
		rt_agent_post_crumbs(a, t);
}

static void on_trigger(void *arg, const struct rt_trigger_entry *g, unsigned int n)
{
	struct rt_agent *a = arg;
	a->st.trigger_groups++;
	rt_agent_local_trigger(a, g, n);
}

/* --------------------------------------------------- headers and frames ---- */

/* Bytes covered by whole frames of the segment at (b, off) nobody sealed (writer died). */
static uint32_t unsealed_bytes(struct rt_agent *a, uint32_t b, uint32_t off)
{
	const uint8_t *data = (const uint8_t *)rt_pool_segment(&a->pool, b, off) + RT_BUF_HEADER_SIZE;
	uint32_t size = a->pool.geo.buffer_size - off - RT_BUF_HEADER_SIZE, pos = 0, good = 0;
	struct rt_frame f;
	int rc;
	while ((rc = rt_frame_next(data, size, &pos, &f)) == RT_FRAME_OK)
		good = pos;
	if (rc == RT_FRAME_CORRUPT)
		a->st.corrupt_frames++;
	return good;
}

/* Where a walk along a buffer's segment chain stopped. */
enum chain_end {
	CHAIN_LEFT, /* the writer left the buffer: a sealed segment without KEPT, a
		     * close mark, or the buffer's end */
	CHAIN_KEPT, /* a zeroed header after a KEPT segment: the writer keeps it idle */
	CHAIN_OPEN, /* a header in use, not sealed: the writer's current segment */
	CHAIN_BAD,  /* a header that makes no sense (counted) */
};

/*
 * Walk buffer b's segment chain from *off, indexing each sealed segment as
 * recovered (and restoring its trace's pin). The pool is untrusted: each
 * header is checked (magic first, then flags, then the fields: a writer
 * stores them in the reverse order), a segment must fit in the buffer and be
 * no older than the buffer's first one, and the walk takes at most one step
 * per header's room. *off is left where it stopped; *indexed counts.
 */
static int walk_chain(struct rt_agent *a, uint32_t b, uint32_t *off, uint64_t now,
		      uint32_t *indexed)
{
	uint32_t size = a->pool.geo.buffer_size, steps = 0;
	uint64_t tick0 = rt_pool_buffer(&a->pool, b)->first_tick;
	for (;;) {
		const struct rt_buffer_header *h;
		uint32_t flags, bytes, slot;
		if ((uint64_t)*off + RT_BUF_HEADER_SIZE > size)
			return CHAIN_LEFT;
		h = rt_pool_segment(&a->pool, b, *off);
		if (ck_pr_load_32(&h->magic) != RT_BUF_MAGIC) {
			if (*off == 0)
				break;
			return CHAIN_KEPT;
		}
		ck_pr_fence_load();
		flags = ck_pr_load_32(&h->flags);
		ck_pr_fence_load();
		if (flags & RT_BUF_CLOSED)
			return CHAIN_LEFT;
		if (!(flags & RT_BUF_SEALED))
			return (flags & RT_BUF_INUSE) ? CHAIN_OPEN : CHAIN_BAD;
		bytes = h->bytes;
		if (h->trace_lo == 0 || !rt_pool_segment_fits(&a->pool, *off, bytes) ||
		    (*off && h->first_tick < tick0) || ++steps > size / RT_BUF_HEADER_SIZE)
			break;
		slot = index_segment(a, b, *off, bytes, 1, now);
		if (slot != RT_INDEX_NONE) {
			(*indexed)++;
			if (flags & RT_BUF_PINNED)
				rt_agent_pin(a, a->ix.buf_trace[slot], h->pin_trigger);
		}
		*off = rt_seg_next(*off, bytes);
		if (*off > a->seg.next_off[b])
			a->seg.next_off[b] = *off;
		if (!(flags & RT_BUF_KEPT))
			return CHAIN_LEFT;
	}
	a->st.bad_segments++;
	return CHAIN_BAD;
}

/*
 * Take in what buffer b's headers hold beyond what the queue told us (a
 * takeover, a dead writer, a reset complete queue). With `alive` its writer
 * may still add to it: an open or idle buffer stays the writer's. Otherwise
 * an open segment is indexed with the bytes its whole frames cover, and the
 * buffer is left (back to the pool when nothing of it is held). Returns the
 * segments indexed.
 */
static uint32_t take_chain(struct rt_agent *a, uint32_t b, int alive, uint64_t now)
{
	uint32_t off = a->seg.next_off[b], n = 0;
	int end = walk_chain(a, b, &off, now, &n);
	if (end == CHAIN_LEFT) {
		buffer_left(a, b);
		return n;
	}
	if (alive) {
		if (end == CHAIN_KEPT)
			a->seg.state[b] = RT_SEGBUF_KEPT;
		if (off > a->seg.next_off[b])
			a->seg.next_off[b] = off;
		return n;
	}
	if (end == CHAIN_OPEN) {
		const struct rt_buffer_header *h = rt_pool_segment(&a->pool, b, off);
		if (h->trace_lo == 0)
			a->st.bad_zero_trace++;
		else if (index_segment(a, b, off, unsealed_bytes(a, b, off), 1, now) != RT_INDEX_NONE)
			n++;
	}
	buffer_left(a, b);
	return n;
}

/* A zombie (killed, not yet waited for) still answers kill(pid, 0). */
static int is_zombie(uint32_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;
	snprintf(path, sizeof path, "/proc/%u/stat", pid);
	if (!(f = fopen(path, "r")))
		return 0;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the command name may hold spaces and parens */
	return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static int slot_process_alive(const struct rt_client_slot *s)
{
	uint32_t pid = ck_pr_load_32(&s->pid);
	uint64_t start;
	if (pid == 0)
		return 0;
	if ((kill((pid_t)pid, 0) != 0 && errno == ESRCH) || is_zombie(pid))
		return 0;
	start = rt_process_start_time((pid_t)pid);
	return start == 0 || s->start_time == 0 || start == s->start_time;
}

/* Is the writer that stamped this header alive? Unknown writers count as alive. */
static int writer_alive(const struct rt_agent *a, const struct rt_buffer_header *h)
{
	uint32_t slot = h->client_slot;
	if (slot < a->pool.geo.registry_slots &&
	    ck_pr_load_32(&a->pool.registry[slot].pid) == h->pid)
		return slot_process_alive(&a->pool.registry[slot]);
	return h->pid == 0 || kill((pid_t)h->pid, 0) == 0 || errno != ESRCH;
}

/* A registry slot's process died: keep its data, free its stash and its slot. */
static void reap_client(struct rt_agent *a, uint32_t slot, uint32_t pid, uint64_t now)
{
	uint32_t id, n = a->pool.geo.buffer_count;
	for (id = 0; id < n; id++) {
		struct rt_buffer_header *h = rt_pool_buffer(&a->pool, id);
		uint32_t flags;
		if (h->magic != RT_BUF_MAGIC || h->pid != pid || h->client_slot != slot ||
		    a->seg.state[id] == RT_SEGBUF_LEFT)
			continue;
		flags = ck_pr_load_32(&h->flags);
		if ((flags & RT_BUF_STASHED) && a->seg.live[id] == 0) {
			rt_agent_recycle(a, id);
			a->st.dead_buffers_freed++;
		} else if (flags & RT_BUF_INUSE) {
			a->st.dead_buffers_indexed += take_chain(a, id, 0, now);
		}
	}
	a->st.clients_died++;
	rt_log(RT_LOG_INFO, "client pid %u (slot %u) died; its buffers were salvaged", pid, slot);
	ck_pr_cas_32(&a->pool.registry[slot].pid, pid, 0);
}

/*
 * Kept buffers whose process is gone without being reaped: a process that
 * exits cleanly frees its registry slot, but a thread it did not join still
 * kept a buffer. Each liveness interval such buffers are left for good (what
 * their chains hold is taken in first). One kill(pid, 0) per run of buffers of
 * the same process.
 */
static void reap_orphan_kept(struct rt_agent *a, uint64_t now)
{
	uint32_t id, n = a->pool.geo.buffer_count, last_pid = 0;
	int last_alive = 1;
	for (id = 0; id < n; id++) {
		uint32_t pid;
		if (a->seg.state[id] != RT_SEGBUF_KEPT)
			continue;
		pid = rt_pool_buffer(&a->pool, id)->pid;
		if (pid != last_pid) {
			last_pid = pid;
			last_alive = pid == 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH;
		}
		if (!last_alive) {
			if (a->st.orphans_left == 0 || id == 0) /* its last entries may be queued */
				while (poll_complete(a, now) > 0)
					;
			if (a->seg.state[id] != RT_SEGBUF_KEPT)
				continue; /* an entry just queued left it */
			take_chain(a, id, 0, now);
			a->st.orphans_left++;
		}
	}
}

static void check_liveness(struct rt_agent *a, uint64_t now)
{
	uint32_t i;
	for (i = 0; i < a->pool.geo.registry_slots; i++) {
		struct rt_client_slot *s = &a->pool.registry[i];
		uint32_t pid = ck_pr_load_32(&s->pid);
		if (pid != 0 && !slot_process_alive(s)) {
			/* Its last complete entries may still be queued: take them first. */
			while (poll_complete(a, now) > 0)
				;
			reap_client(a, i, pid, now);
		}
	}
	reap_orphan_kept(a, now);
}

/* ------------------------------------------------------------ takeover ---- */

/*
 * Pop every free id (clients briefly see an empty queue), mark them, then push
 * them all back: pushing while popping would hand us our own ids again.
 */
static uint8_t *snapshot_available(struct rt_agent *a)
{
	uint32_t total = a->pool.geo.buffer_count, n, i;
	uint8_t *in_queue = calloc(total, 1);
	struct rt_available_entry batch[256];
	if (!in_queue)
		return NULL;
	while ((n = rt_pool_pop_available(&a->pool, batch, 256)) > 0) {
		for (i = 0; i < n; i++) {
			uint32_t id = batch[i].buffer_id;
			if (id >= total || in_queue[id]) {
				a->st.bad_range++; /* a corrupt or doubled id: drop it */
				continue;
			}
			in_queue[id] = 1;
			a->scratch[a->nscratch++] = id;
		}
	}
	for (i = 0; i < a->nscratch; i++) {
		if (a->nrecycle == a->recycle_cap)
			recycle_flush(a);
		a->recycle[a->nrecycle++] = a->scratch[i]; /* header untouched: it is free */
	}
	a->nscratch = 0;
	recycle_flush(a);
	return in_queue;
}

static int cmp_first_tick(const void *x, const void *y, void *arg)
{
	const struct rt_index *ix = arg;
	uint64_t a = ix->traces[*(const uint32_t *)x].first_tick;
	uint64_t b = ix->traces[*(const uint32_t *)y].first_tick;
	return a < b ? -1 : a > b;
}

/* Recovered traces enter the LRU in the order their data was written. */
static void order_recovered(struct rt_agent *a)
{
	uint32_t n = 0, t, i;
	uint64_t now = rt_agent_now_ns();
	for (t = a->ix.lru_head; t != RT_INDEX_NONE; t = a->ix.traces[t].lru_next)
		a->scratch[n++] = t;
	qsort_r(a->scratch, n, sizeof *a->scratch, cmp_first_tick, &a->ix);
	for (i = 0; i < n; i++) {
		rt_index_pin(&a->ix, a->scratch[i], 0);
		rt_index_unpin(&a->ix, a->scratch[i], now);
	}
}

static void rebuild_from_headers(struct rt_agent *a)
{
	uint32_t id, n = a->pool.geo.buffer_count;
	uint64_t now = rt_agent_now_ns();
	uint8_t *in_queue;

	while (poll_complete(a, now) > 0)
		;
	in_queue = snapshot_available(a);
	for (id = 0; id < n; id++) {
		struct rt_buffer_header *h = rt_pool_buffer(&a->pool, id);
		uint32_t flags = ck_pr_load_32(&h->flags);
		if ((in_queue && in_queue[id]) || a->seg.state[id] == RT_SEGBUF_LEFT)
			continue;
		if (h->magic == RT_BUF_MAGIC && (flags & RT_BUF_STASHED)) {
			if (!writer_alive(a, h) && a->seg.live[id] == 0)
				rt_agent_recycle(a, id);
		} else if (h->magic == RT_BUF_MAGIC && (flags & RT_BUF_INUSE)) {
			/* sealed segments are data whoever wrote them; an open one is
			 * left to its writer while it lives */
			a->st.recovered_buffers += take_chain(a, id, writer_alive(a, h), now);
		} else if (in_queue && a->seg.live[id] == 0) {
			a->lost[a->nlost++] = id;
			a->lost_flag[id] = 1;
		}
	}
	free(in_queue);
	a->st.recovered_traces = a->ix.st.traces;
	order_recovered(a);
	a->lost_check_ns = now + LOST_GRACE_NS;
	recycle_flush(a);
	rt_log(RT_LOG_INFO, "took over pool %s: %llu traces, %llu buffers recovered, "
	       "%u buffers unaccounted for (checked again in 1 s)", a->pool.name,
	       (unsigned long long)a->st.recovered_traces,
	       (unsigned long long)a->st.recovered_buffers, a->nlost);
}

/* Lost ids still blank and unowned after the grace time go back to the pool. */
static void reclaim_lost(struct rt_agent *a)
{
	uint32_t i;
	for (i = 0; i < a->nlost; i++) {
		uint32_t id = a->lost[i];
		struct rt_buffer_header *h = rt_pool_buffer(&a->pool, id);
		uint32_t flags = ck_pr_load_32(&h->flags);
		if (!a->lost_flag[id] || a->seg.live[id] || a->seg.state[id] != RT_SEGBUF_WRITER ||
		    (h->magic == RT_BUF_MAGIC && flags))
			continue; /* used and returned meanwhile, or held: not lost */
		a->lost_flag[id] = 0;
		rt_agent_recycle(a, id);
		a->st.lost_buffers_reclaimed++;
	}
	a->nlost = 0;
}

/* ------------------------------------------------------- shared memory ---- */

static const char *const queue_names[RT_Q_COUNT] = { "available", "complete", "breadcrumb",
						     "trigger" };

/*
 * A ring was emptied: get back from the headers what it held. Blank buffers
 * nobody owns were free ids: they go on the lost list (a client may have popped
 * one a moment ago and not stamped it yet, hence the grace time). Sealed buffers
 * the index does not own lost their complete entry: indexed as recovered, so
 * that the entry, if it still comes, is an echo.
 */
static void recover_after_reset(struct rt_agent *a, int q, uint64_t now)
{
	uint32_t id, n = a->pool.geo.buffer_count;
	for (id = 0; id < n; id++) {
		const struct rt_buffer_header *h;
		uint32_t flags;
		if (a->seg.state[id] == RT_SEGBUF_LEFT || a->lost_flag[id])
			continue;
		h = rt_pool_buffer(&a->pool, id);
		flags = ck_pr_load_32(&h->flags);
		if (q == RT_Q_AVAILABLE && a->seg.live[id] == 0 &&
		    a->seg.state[id] == RT_SEGBUF_WRITER && (h->magic != RT_BUF_MAGIC || flags == 0)) {
			a->lost[a->nlost++] = id;
			a->lost_flag[id] = 1;
		} else if (q == RT_Q_COMPLETE && h->magic == RT_BUF_MAGIC && (flags & RT_BUF_INUSE)) {
			a->st.recovered_buffers += take_chain(a, id, 1, now);
		}
	}
	if (q == RT_Q_AVAILABLE)
		a->lost_check_ns = now + LOST_GRACE_NS;
}

/*
 * Before a stalled claim of the available queue is published: an id in it that
 * is not a free buffer (out of range, owned by the index or in flight, stamped
 * by a writer, on the lost list, or free once already in the ring) would hand
 * one buffer to two writers, so it is voided; clients skip void ids (counted
 * as bad_available). Stale ids are what a dead producer's slots hold.
 */
static void void_stale_ids(struct rt_agent *a, const struct rt_ring_counters *c)
{
	struct rt_available_entry *slots = RT_POOL_SLOTS(&a->pool, RT_Q_AVAILABLE, rt_available_entry);
	uint32_t mask = a->pool.geo.ring_mask[RT_Q_AVAILABLE], n = a->pool.geo.buffer_count;
	uint8_t *seen = calloc(n, 1);
	unsigned int i;
	for (i = c->c_head; i != c->p_head; i++) {
		struct rt_available_entry *e = &slots[i & mask];
		uint32_t id = e->buffer_id;
		int claimed = (int)(i - c->p_tail) >= 0, ok = seen && id < n && !seen[id];
		if (ok && claimed) {
			const struct rt_buffer_header *h = rt_pool_buffer(&a->pool, id);
			ok = a->seg.live[id] == 0 && a->seg.state[id] == RT_SEGBUF_WRITER &&
			     !a->lost_flag[id] &&
			     (h->magic != RT_BUF_MAGIC || ck_pr_load_32(&h->flags) == 0);
		}
		if (seen && id < n)
			seen[id] = 1;
		if (claimed && !ok) {
			e->buffer_id = VOID_BUFFER_ID;
			a->st.ring_slots_voided++;
		}
	}
	free(seen);
}

/* Counters that make no sense are reset; a claim stalled for long is published. */
static void check_ring(struct rt_agent *a, int q, uint64_t now)
{
	struct ck_ring *r = a->pool.ring[q];
	uint32_t mask = a->pool.geo.ring_mask[q];
	struct rt_ring_counters c;
	int still = rt_ring_still(r, &c), valid = rt_ring_counters_valid(&c, mask);
	if (still && !valid) {
		rt_ring_reset(r);
		a->st.ring_resets++;
		a->ring_stall[q].watching = 0;
		rt_log_limited(&a->pool_log, now, RT_LOG_WARN,
			       "pool %s: the %s queue's counters made no sense (consumer %u, published "
			       "%u, claimed %u, capacity %u): emptied it (a client wrote them, or the "
			       "memory is corrupt)", a->pool.name, queue_names[q], c.c_head, c.p_tail,
			       c.p_head, mask + 1);
		recover_after_reset(a, q, now);
		return;
	}
	if (!valid || c.p_tail == c.p_head) {
		a->ring_stall[q].watching = 0;
		return;
	}
	if (!a->ring_stall[q].watching || a->ring_stall[q].p_tail != c.p_tail) {
		a->ring_stall[q].watching = 1;
		a->ring_stall[q].p_tail = c.p_tail;
		a->ring_stall[q].since_ns = now;
		return;
	}
	if (now - a->ring_stall[q].since_ns < RING_STALL_NS)
		return;
	if (q == RT_Q_AVAILABLE)
		void_stale_ids(a, &c);
	if (rt_ring_publish_claims(r, &c)) {
		a->st.ring_stalls_repaired++;
		rt_log_limited(&a->pool_log, now, RT_LOG_WARN,
			       "pool %s: the %s queue stood still for %.1f s behind %u claimed "
			       "entries (a producer died mid-enqueue): published them", a->pool.name,
			       queue_names[q], (double)(now - a->ring_stall[q].since_ns) / 1e9,
			       c.p_head - c.p_tail);
	}
	a->ring_stall[q].watching = 0;
}

/*
 * What clients may have overwritten: the header's geometry is put back from our
 * copy (clients attaching later read it), a state other than READY too, and the
 * rings are checked. Our own pending frees go out first, so that the rings show
 * every free id.
 */
static void check_pool(struct rt_agent *a, uint64_t now)
{
	unsigned int fixed;
	int q;
	recycle_flush(a);
	fixed = rt_pool_restore_geometry(&a->pool);
	if (ck_pr_load_32(&a->pool.hdr->state) != RT_POOL_READY) {
		ck_pr_store_32(&a->pool.hdr->state, RT_POOL_READY);
		fixed++;
	}
	if (fixed) {
		a->st.header_fields_restored += fixed;
		rt_log_limited(&a->pool_log, now, RT_LOG_WARN,
			       "pool %s: %u fields of the shared header differed from its geometry; "
			       "put back (a client wrote them, or the memory is corrupt)",
			       a->pool.name, fixed);
	}
	for (q = 0; q < RT_Q_COUNT; q++)
		check_ring(a, q, now);
}

/*
 * The pass's clocks, from the TSC: clock_gettime costs several times an rdtsc
 * here and a busy agent runs millions of passes. The TSC is re-anchored to the
 * real clocks at every liveness check, so drift never exceeds one interval's.
 */
static void pass_clock(struct rt_agent *a)
{
	uint64_t tick = retrace_ticks();
	uint64_t dt = (uint64_t)((double)(tick - a->anchor_tick) * a->ns_per_tick);
	a->pass_tick = tick;
	a->pass_now_ns = a->anchor_mono_ns + dt;
	a->pass_unix_ns = a->anchor_unix_ns + dt;
}

static void anchor_clock(struct rt_agent *a)
{
	a->anchor_tick = a->pass_tick = retrace_ticks();
	a->anchor_mono_ns = rt_agent_now_ns();
	a->anchor_unix_ns = unix_now_ns();
	a->pass_now_ns = a->anchor_mono_ns;
	a->pass_unix_ns = a->anchor_unix_ns;
}

/* ---------------------------------------------------------- open/close ---- */

/*
 * Segment slots: one per buffer (its first segment) plus, by default, one per
 * 512 bytes of the pool, about what traces of 450 bytes need; traces: twice
 * the buffers, or one per 640 bytes of the pool. A smaller table only caps
 * the number of traces held (the oldest are evicted for new ones).
 */
static int alloc_segments(struct rt_agent *a, uint32_t extra)
{
	uint32_t n = a->pool.geo.buffer_count, i;
	struct rt_agent_segs *g = &a->seg;
	g->nslots = n + extra;
	g->slot_buf = malloc((size_t)g->nslots * sizeof *g->slot_buf);
	g->slot_off = calloc(g->nslots, sizeof *g->slot_off);
	g->free_slots = malloc(((size_t)extra + 1) * sizeof *g->free_slots);
	g->live = calloc(n, sizeof *g->live);
	g->next_off = calloc(n, sizeof *g->next_off);
	g->state = calloc(n, 1);
	g->recovered = calloc(n, 1);
	if (!g->slot_buf || !g->slot_off || !g->free_slots || !g->live || !g->next_off ||
	    !g->state || !g->recovered)
		return -1;
	for (i = 0; i < n; i++)
		g->slot_buf[i] = i;
	for (i = 0; i < extra; i++) /* lowest slots on top of the stack */
		g->free_slots[i] = g->nslots - 1 - i;
	g->nfree = extra;
	return 0;
}

static void free_segments(struct rt_agent *a)
{
	struct rt_agent_segs *g = &a->seg;
	free(g->slot_buf);
	free(g->slot_off);
	free(g->free_slots);
	free(g->live);
	free(g->next_off);
	free(g->state);
	free(g->recovered);
	memset(g, 0, sizeof *g);
}

static int alloc_state(struct rt_agent *a, char *err, size_t errlen)
{
	uint32_t n = a->pool.geo.buffer_count, size = a->pool.geo.buffer_size;
	uint64_t by_bytes = (uint64_t)n * (size / 640), extra64 = a->cfg.segment_slots
		? a->cfg.segment_slots : (uint64_t)n * (size / 512);
	uint32_t cap = a->cfg.trace_capacity ? a->cfg.trace_capacity
		     : (uint32_t)(by_bytes > 2ull * n ? (by_bytes < (1u << 30) ? by_bytes : (1u << 30))
						      : 2ull * n);
	uint32_t extra = extra64 < (1u << 30) ? (uint32_t)extra64 : (1u << 30);
	a->recycle_cap = 1024;
	a->scratch = malloc(((size_t)n + extra) * sizeof *a->scratch);
	a->recycle = malloc((size_t)a->recycle_cap * sizeof *a->recycle);
	a->lost = malloc((size_t)n * sizeof *a->lost);
	a->lost_flag = calloc(n, 1);
	a->avail_snapshot = calloc(n, sizeof *a->avail_snapshot);
	a->free_bits = calloc((n + 63) / 64, sizeof *a->free_bits);
	if (!a->scratch || !a->recycle || !a->lost || !a->lost_flag || !a->avail_snapshot ||
	    !a->free_bits || alloc_segments(a, extra) != 0 ||
	    rt_index_init(&a->ix, cap, n + extra) != 0) {
		snprintf(err, errlen, "out of memory for an index of %u traces and %u buffers "
			 "(%u segments)", cap, n, n + extra);
		return RETRACE_E_SYS;
	}
	a->evict_limit = (uint64_t)(a->cfg.evict_threshold * n);
	a->pinned_limit = (uint64_t)(a->cfg.pinned_share * n);
	return RETRACE_OK;
}

static int create_or_take_over(struct rt_agent *a, char *err, size_t errlen)
{
	struct rt_pool_create_opts o;
	int rc;
	rt_pool_create_defaults(&o);
	o.name = a->cfg.pool;
	o.buffer_size = a->cfg.buffer_size;
	o.buffer_count = a->cfg.buffer_count;
	o.breadcrumb_slots = a->cfg.breadcrumb_slots;
	o.trigger_slots = a->cfg.trigger_slots;
	o.client_slots = a->cfg.client_slots;
	o.group = a->cfg.group;
	if (o.group >= 0)
		o.mode = 0660;
	o.agent_id = a->cfg.agent_id;
	o.fill_available = 1;
	o.owner_lock = 1;
	rc = rt_pool_create(&o, &a->pool, err, errlen);
	if (rc != RETRACE_E_EXISTS)
		return rc;
	rc = rt_pool_takeover(a->cfg.pool, a->cfg.agent_id, &a->pool, err, errlen);
	if (rc == RETRACE_OK) {
		a->took_over = 1;
		return rc;
	}
	if (rc == RETRACE_E_EXISTS || !a->cfg.replace)
		return rc;
	rt_log(RT_LOG_WARN, "replacing pool %s that cannot be taken over: %s (its clients, if of "
	       "this ABI, re-attach to the new one)", a->cfg.pool, err);
	o.replace = 1;
	return rt_pool_create(&o, &a->pool, err, errlen);
}

int rt_agent_open(struct rt_agent *a, const struct rt_agent_config *cfg, char *err,
		  size_t errlen)
{
	int rc;
	memset(a, 0, sizeof *a);
	a->cfg = *cfg;
	a->pool.fd = -1;
	rc = create_or_take_over(a, err, errlen);
	if (rc != RETRACE_OK)
		return rc;
	/* A failed start must never remove a pool clients may be writing into. */
	if ((rc = alloc_state(a, err, errlen)) != RETRACE_OK) {
		a->cfg.unlink_at_exit = 0;
		rt_agent_close(a);
		return rc;
	}
	if (rt_agent_reporting_open(a, err, errlen) != 0) {
		a->cfg.unlink_at_exit = 0;
		rt_agent_close(a);
		return RETRACE_E_INVAL;
	}
	a->start_ns = rt_agent_now_ns();
	a->start_unix_ns = unix_now_ns();
	a->ns_per_tick = a->pool.geo.tsc_hz ? 1e9 / (double)a->pool.geo.tsc_hz : 1.0;
	/* Sequence numbers start at the start time, so that those of an agent that
	 * restarted never repeat its predecessor's (the collector and coordinator
	 * dedup by agent id and sequence; spooled slices keep their old ones). */
	a->slice_seq = a->trigger_seq = a->start_unix_ns;
	anchor_clock(a);
	if (a->took_over)
		rebuild_from_headers(a);
	ck_pr_store_32(&a->pool.hdr->state, RT_POOL_READY);
	return RETRACE_OK;
}

void rt_agent_close(struct rt_agent *a)
{
	if (a->pool.base) {
		recycle_flush(a);
		if (a->cfg.unlink_at_exit) {
			/* Retired first: attached clients see CLOSED when they next take
			 * a buffer and re-attach by name (to the next agent's pool)
			 * instead of writing into a deleted one. */
			uint32_t i, attached = 0;
			for (i = 0; i < a->pool.geo.registry_slots; i++)
				attached += ck_pr_load_32(&a->pool.registry[i].pid) != 0;
			ck_pr_store_32(&a->pool.hdr->state, RT_POOL_CLOSED);
			rt_pool_unlink(a->pool.name);
			if (attached)
				rt_log(RT_LOG_INFO, "pool %s retired and unlinked (--unlink); %u "
				       "attached client%s will re-attach to the next pool of that name",
				       a->pool.name, attached, attached == 1 ? "" : "s");
		} else {
			ck_pr_store_32(&a->pool.hdr->agent_pid, 0);
		}
	}
	rt_agent_reporting_close(a);
	rt_agent_window_free(a);
	rt_pool_detach(&a->pool);
	rt_index_free(&a->ix);
	free_segments(a);
	free(a->scratch);
	free(a->recycle);
	free(a->lost);
	free(a->lost_flag);
	a->lost_flag = NULL;
	a->scratch = a->recycle = a->lost = NULL;
	free(a->avail_snapshot);
	free(a->free_bits);
	a->avail_snapshot = NULL;
	a->free_bits = NULL;
}

/* ---------------------------------------------------- remote triggers ---- */

/* Pop one queue's entries up to the depth it had on entry. */
static void drain_breadcrumbs_to_depth(struct rt_agent *a, const struct rt_drain_callbacks *cb,
				       struct rt_drain_stats *ds)
{
	unsigned int depth = rt_agent_queue_depth(a, RT_Q_BREADCRUMB), k, got;
	for (k = 0; k < depth; k += got)
		if ((got = rt_drain_breadcrumbs(&a->pool, cb, ds)) == 0)
			break;
}

/*
 * Why before every reply, not only in the poll pass: a remote trigger is answered
 * ahead of the pass (it is on a traversal's critical path; by nng's thread while
 * the poll thread sleeps, agent/control.h), so a
 * breadcrumb a client deposited long before could still sit in the ring, and
 * the coordinator would never hear of the hop it names. Triggers are left to
 * the pass: they do not change what the reply says.
 */
void rt_agent_drain_before_reply(struct rt_agent *a)
{
	static const struct rt_drain_callbacks no_cb;
	struct rt_drain_callbacks cb = no_cb;
	struct rt_drain_stats ds;
	unsigned int depth, k, got;

	cb.breadcrumb = on_breadcrumb;
	cb.arg = a;
	memset(&ds, 0, sizeof ds);
	pass_clock(a);
	depth = rt_agent_queue_depth(a, RT_Q_COMPLETE);
	for (k = 0; k < depth; k += got)
		if ((got = poll_complete(a, a->pass_now_ns)) == 0)
			break;
	drain_breadcrumbs_to_depth(a, &cb, &ds);
}

/*
 * A writer's buffer is visible only through its header until it is queued. The
 * client stores the header's fields, then the flags word (a release store, and
 * x86 keeps stores in order), so flags are loaded first and the fields after a
 * load fence. Buffers their writer left are skipped without touching their
 * header (every segment of theirs was queued), and so are the free ones waiting
 * in the available queue (most of a quiet pool): a header is a cache and TLB miss a page apart
 * from the next, so reading all 4096 cost ~0.4 ms per remote trigger, on every
 * hop of a traversal. What is left — buffers clients hold — is few. A buffer
 * taken from the queue after the snapshot began is missed, as a scan that
 * reached it first would miss it: its writer began after the question came.
 * Stashed buffers carry no trace.
 */
static void note_free_buffers(struct rt_agent *a)
{
	uint32_t i, count = a->pool.geo.buffer_count;
	uint32_t n = rt_pool_peek_available(&a->pool, a->avail_snapshot, count);
	memset(a->free_bits, 0, (count + 63) / 64 * sizeof *a->free_bits);
	for (i = 0; i < n; i++) {
		uint32_t id = a->avail_snapshot[i].buffer_id;
		if (id < count)
			a->free_bits[id / 64] |= 1ull << (id % 64);
	}
}

void rt_agent_count_open(struct rt_agent *a, const uint64_t *los, uint32_t n, uint32_t *open)
{
	uint32_t id, i, count = a->pool.geo.buffer_count, size = a->pool.geo.buffer_size;
	memset(open, 0, n * sizeof *open);
	note_free_buffers(a);
	for (id = 0; id < count; id++) {
		uint32_t off = a->seg.next_off[id], steps = 0;
		if (a->seg.state[id] == RT_SEGBUF_LEFT || (a->free_bits[id / 64] >> (id % 64)) & 1)
			continue;
		if (!(ck_pr_load_32(&rt_pool_buffer(&a->pool, id)->flags) & RT_BUF_INUSE))
			continue;
		/* the segments past the ones the queue told us of: sealed and not yet
		 * queued, or the writer's open one */
		while ((uint64_t)off + RT_BUF_HEADER_SIZE <= size && steps++ < size / RT_BUF_HEADER_SIZE) {
			const struct rt_buffer_header *h = rt_pool_segment(&a->pool, id, off);
			uint32_t flags;
			uint64_t lo;
			if (ck_pr_load_32(&h->magic) != RT_BUF_MAGIC)
				break;
			ck_pr_fence_load();
			flags = ck_pr_load_32(&h->flags);
			ck_pr_fence_load();
			if (!(flags & RT_BUF_INUSE) || (flags & RT_BUF_CLOSED))
				break;
			lo = h->trace_lo;
			for (i = 0; i < n; i++)
				if (los[i] == lo)
					open[i]++;
			if (!(flags & RT_BUF_SEALED) || !(flags & RT_BUF_KEPT) ||
			    !rt_pool_segment_fits(&a->pool, off, h->bytes))
				break;
			off = rt_seg_next(off, h->bytes);
		}
	}
}

/* ---------------------------------------------------------------- poll ---- */

unsigned int rt_agent_poll(struct rt_agent *a)
{
	static const struct rt_drain_callbacks no_cb;
	struct rt_drain_callbacks cb = no_cb;
	struct rt_drain_stats ds;
	unsigned int n;
	uint64_t k;

	cb.breadcrumb = on_breadcrumb;
	cb.trigger = on_trigger;
	cb.arg = a;
	memset(&ds, 0, sizeof ds);
	pass_clock(a);
	n = poll_complete(a, a->pass_now_ns);
	/* Every breadcrumb queued when the pass began goes before any trigger, so a
	 * trigger never reaches the coordinator without the hops deposited before
	 * it; bounded by that depth, so a flood of crumbs cannot hold the pass. */
	k = a->st.breadcrumbs + a->st.bad_breadcrumbs;
	drain_breadcrumbs_to_depth(a, &cb, &ds);
	n += (unsigned int)(a->st.breadcrumbs + a->st.bad_breadcrumbs - k);
	n += rt_drain_triggers(&a->pool, &cb, &ds);
	a->st.bad_triggers += ds.bad_triggers;
	enforce_limits(a);
	rt_agent_window_expire(a, a->pass_now_ns);
	if (a->pass_now_ns >= a->next_liveness_ns) {
		anchor_clock(a);
		check_pool(a, a->pass_now_ns);
		check_liveness(a, a->pass_now_ns);
		rt_agent_expire_triggered(a);
		a->next_liveness_ns = a->pass_now_ns + (uint64_t)(a->cfg.liveness_interval * 1e9);
	}
	if (a->nlost && a->pass_now_ns >= a->lost_check_ns)
		reclaim_lost(a);
	rt_agent_report_pump(a);
	recycle_flush(a);
	a->st.polls++;
	if (n == 0)
		a->st.idle_polls++;
	return n;
}
