/*
 * agent/index.c — the trace index.
 *
 * Trace entries live in one array sized at start-up; a free entry is chained
 * through hash_next from free_head, a live one through hash_next from its bucket.
 * Buckets are a power of two at least twice the capacity, keyed by a mix of the
 * trace id's low 64 bits and a seed drawn per index (ids are untrusted: with a
 * fixed mix, ids that share a bucket are easy to make, and one long chain makes
 * every lookup of the agent's poll loop walk it). A trace's buffers form a singly linked list through buf_next, appended
 * at the tail so the list keeps arrival order (buffers that come back from a
 * failed send go back at the head). Every live entry sits on exactly one of
 * three doubly linked lists through lru_prev/lru_next, named by its `list`
 * field (four lists): the LRU of untriggered traces (touching a trace moves it to the tail,
 * eviction takes the head); the pinned list, in pinning order; and the quiet
 * list of pinned traces whose data has all been taken and released, in the
 * order they went quiet (the first entries to reclaim when the table is full;
 * new data moves a trace back to the pinned list); and the held list of
 * untriggered traces a weaving query answered with (agent/window.c): neither
 * evicted nor touched back into the LRU until released. Every operation is O(1)
 * except removal, which walks the trace's own buffers.
 */
#include "index.h"

#include "daemon/random.h"

#include <stdlib.h>
#include <string.h>

/*
 * The full splitmix64 finaliser, not one round of it: with a single multiply a
 * bucket's low bits hang on the id's low bits through the seed xor, and 512
 * ids chosen to share a bucket of the unseeded mix still made a chain of 16 or
 * more under about 1 seed in 250 (20 in a stress run; 0 of 200 000 seeds here
 * passes 8).
 */
static uint32_t bucket_of(const struct rt_index *ix, uint64_t lo)
{
	return (uint32_t)rt_mix64(lo ^ ix->hash_seed) & ix->hash_mask;
}

int rt_index_init(struct rt_index *ix, uint32_t capacity, uint32_t buffer_count)
{
	uint32_t buckets = 1, i;

	memset(ix, 0, sizeof *ix);
	/* Past 2^30 entries the bucket count (a power of two >= 2 x capacity) would
	 * not fit in 32 bits; no pool geometry comes near it (buffers <= 2^24). */
	if (capacity == 0 || buffer_count == 0 || capacity > (1u << 30))
		return -1;
	while (buckets < 2 * capacity)
		buckets <<= 1;
	ix->capacity = capacity;
	ix->buffer_count = buffer_count;
	ix->hash_mask = buckets - 1;
	ix->hash_seed = rt_random_seed(ix);
	ix->hash = malloc((size_t)buckets * sizeof *ix->hash);
	ix->traces = calloc(capacity, sizeof *ix->traces);
	ix->buf_next = malloc((size_t)buffer_count * sizeof *ix->buf_next);
	ix->buf_trace = malloc((size_t)buffer_count * sizeof *ix->buf_trace);
	ix->buf_bytes = calloc(buffer_count, sizeof *ix->buf_bytes);
	ix->buf_recovered = calloc(buffer_count, 1);
	if (!ix->hash || !ix->traces || !ix->buf_next || !ix->buf_trace ||
	    !ix->buf_bytes || !ix->buf_recovered) {
		rt_index_free(ix);
		return -1;
	}
	memset(ix->hash, 0xff, (size_t)buckets * sizeof *ix->hash);
	memset(ix->buf_next, 0xff, (size_t)buffer_count * sizeof *ix->buf_next);
	memset(ix->buf_trace, 0xff, (size_t)buffer_count * sizeof *ix->buf_trace);
	for (i = 0; i < capacity; i++)
		ix->traces[i].hash_next = i + 1 < capacity ? i + 1 : RT_INDEX_NONE;
	ix->free_head = 0;
	ix->lru_head = ix->lru_tail = RT_INDEX_NONE;
	ix->pin_head = ix->pin_tail = RT_INDEX_NONE;
	ix->quiet_head = ix->quiet_tail = RT_INDEX_NONE;
	ix->held_head = ix->held_tail = RT_INDEX_NONE;
	return 0;
}

void rt_index_free(struct rt_index *ix)
{
	free(ix->hash);
	free(ix->traces);
	free(ix->buf_next);
	free(ix->buf_trace);
	free(ix->buf_bytes);
	free(ix->buf_recovered);
	memset(ix, 0, sizeof *ix);
}

uint32_t rt_index_find(const struct rt_index *ix, uint64_t lo)
{
	uint32_t t = ix->hash[bucket_of(ix, lo)];
	while (t != RT_INDEX_NONE && ix->traces[t].lo != lo)
		t = ix->traces[t].hash_next;
	return t;
}

/* The head and tail of the list an entry sits on. */
static uint32_t *list_head(struct rt_index *ix, uint8_t list)
{
	return list == RT_LIST_LRU ? &ix->lru_head
	       : list == RT_LIST_PINNED ? &ix->pin_head
	       : list == RT_LIST_QUIET ? &ix->quiet_head : &ix->held_head;
}

static uint32_t *list_tail(struct rt_index *ix, uint8_t list)
{
	return list == RT_LIST_LRU ? &ix->lru_tail
	       : list == RT_LIST_PINNED ? &ix->pin_tail
	       : list == RT_LIST_QUIET ? &ix->quiet_tail : &ix->held_tail;
}

static void lru_unlink(struct rt_index *ix, uint32_t t)
{
	struct rt_trace_entry *e = &ix->traces[t];
	if (e->lru_prev != RT_INDEX_NONE)
		ix->traces[e->lru_prev].lru_next = e->lru_next;
	else
		*list_head(ix, e->list) = e->lru_next;
	if (e->lru_next != RT_INDEX_NONE)
		ix->traces[e->lru_next].lru_prev = e->lru_prev;
	else
		*list_tail(ix, e->list) = e->lru_prev;
	e->lru_prev = e->lru_next = RT_INDEX_NONE;
}

static void list_append(struct rt_index *ix, uint32_t t, uint8_t list)
{
	struct rt_trace_entry *e = &ix->traces[t];
	uint32_t *tail = list_tail(ix, list);
	e->list = list;
	e->lru_next = RT_INDEX_NONE;
	e->lru_prev = *tail;
	if (*tail != RT_INDEX_NONE)
		ix->traces[*tail].lru_next = t;
	else
		*list_head(ix, list) = t;
	*tail = t;
}

/* Move an entry to the tail of another list (or of its own). */
static void list_move(struct rt_index *ix, uint32_t t, uint8_t list)
{
	lru_unlink(ix, t);
	list_append(ix, t, list);
}

/* Seen again: an untriggered trace moves to the LRU's young end (a held one
 * stays held). */
static void touch(struct rt_index *ix, uint32_t t, uint64_t now_ns)
{
	struct rt_trace_entry *e = &ix->traces[t];
	e->last_seen_ns = now_ns;
	if (e->state == RT_TRACE_UNTRIGGERED && e->list == RT_LIST_LRU && ix->lru_tail != t)
		list_move(ix, t, RT_LIST_LRU);
}

uint32_t rt_index_get(struct rt_index *ix, uint64_t lo, uint64_t now_ns)
{
	uint32_t t = rt_index_find(ix, lo), b;
	struct rt_trace_entry *e;

	if (t != RT_INDEX_NONE)
		return t;
	if (ix->free_head == RT_INDEX_NONE) {
		ix->st.table_full++;
		return RT_INDEX_NONE;
	}
	t = ix->free_head;
	e = &ix->traces[t];
	ix->free_head = e->hash_next;
	memset(e, 0, sizeof *e);
	e->lo = lo;
	e->first_buf = e->last_buf = RT_INDEX_NONE;
	e->in_use = 1;
	e->last_seen_ns = now_ns;
	b = bucket_of(ix, lo);
	e->hash_next = ix->hash[b];
	ix->hash[b] = t;
	e->lru_prev = e->lru_next = RT_INDEX_NONE;
	list_append(ix, t, RT_LIST_LRU);
	ix->st.traces++;
	return t;
}

int rt_index_add_buffer(struct rt_index *ix, uint32_t t, uint32_t buffer_id,
			uint32_t bytes, uint64_t first_tick, uint64_t now_ns)
{
	struct rt_trace_entry *e = &ix->traces[t];

	if (buffer_id >= ix->buffer_count)
		return RT_INDEX_RANGE;
	if (ix->buf_trace[buffer_id] != RT_INDEX_NONE)
		return RT_INDEX_DUPLICATE;
	ix->buf_trace[buffer_id] = t;
	ix->buf_next[buffer_id] = RT_INDEX_NONE;
	ix->buf_bytes[buffer_id] = bytes;
	ix->buf_recovered[buffer_id] = 0;
	if (e->last_buf == RT_INDEX_NONE)
		e->first_buf = buffer_id;
	else
		ix->buf_next[e->last_buf] = buffer_id;
	e->last_buf = buffer_id;
	e->nbuffers++;
	e->bytes += bytes;
	if (first_tick && (e->first_tick == 0 || first_tick < e->first_tick))
		e->first_tick = first_tick;
	ix->st.buffers++;
	ix->st.bytes += bytes;
	if (e->state != RT_TRACE_UNTRIGGERED)
		ix->st.pinned_buffers++;
	if (e->list == RT_LIST_QUIET)
		list_move(ix, t, RT_LIST_PINNED); /* data again: not quiet any more */
	touch(ix, t, now_ns);
	return RT_INDEX_ADDED;
}

int rt_index_add_crumb(struct rt_index *ix, uint32_t t, uint32_t agent_id,
		       uint64_t now_ns)
{
	struct rt_trace_entry *e = &ix->traces[t];
	uint32_t i;

	touch(ix, t, now_ns);
	for (i = 0; i < e->ncrumbs; i++)
		if (e->crumbs[i] == agent_id)
			return 0;
	if (e->ncrumbs >= RT_INDEX_MAX_CRUMBS) {
		ix->st.crumbs_dropped++;
		return 0;
	}
	e->crumbs[e->ncrumbs++] = agent_id;
	ix->st.crumbs++;
	return 1;
}

void rt_index_pin(struct rt_index *ix, uint32_t t, uint32_t trigger_id)
{
	struct rt_trace_entry *e = &ix->traces[t];
	if (e->state != RT_TRACE_UNTRIGGERED)
		return;
	e->state = RT_TRACE_TRIGGERED;
	e->trigger_id = trigger_id;
	if (e->list == RT_LIST_HELD)
		ix->st.held_traces--;
	list_move(ix, t, RT_LIST_PINNED);
	ix->st.pinned_traces++;
	ix->st.pinned_buffers += e->nbuffers;
}

void rt_index_unpin(struct rt_index *ix, uint32_t t, uint64_t now_ns)
{
	struct rt_trace_entry *e = &ix->traces[t];
	if (e->state == RT_TRACE_UNTRIGGERED)
		return;
	e->state = RT_TRACE_UNTRIGGERED;
	ix->st.pinned_traces--;
	ix->st.pinned_buffers -= e->nbuffers;
	e->last_seen_ns = now_ns;
	list_move(ix, t, RT_LIST_LRU);
}

int rt_index_hold(struct rt_index *ix, uint32_t t)
{
	struct rt_trace_entry *e = &ix->traces[t];
	if (e->state != RT_TRACE_UNTRIGGERED || e->list != RT_LIST_LRU)
		return 0;
	list_move(ix, t, RT_LIST_HELD);
	ix->st.held_traces++;
	return 1;
}

void rt_index_unhold(struct rt_index *ix, uint32_t t, uint64_t now_ns)
{
	struct rt_trace_entry *e = &ix->traces[t];
	if (e->list != RT_LIST_HELD)
		return;
	ix->st.held_traces--;
	e->last_seen_ns = now_ns;
	list_move(ix, t, RT_LIST_LRU);
}

static void horizon_record(struct rt_index *ix, uint64_t age_us)
{
	uint32_t b = 0;
	uint64_t v = age_us;
	while (v > 1 && b + 1 < RT_INDEX_HORIZON_BUCKETS) {
		v >>= 1;
		b++;
	}
	ix->st.horizon_hist[b]++;
	ix->st.horizon_us = age_us;
}

static void hash_unlink(struct rt_index *ix, uint32_t t)
{
	uint32_t *link = &ix->hash[bucket_of(ix, ix->traces[t].lo)];
	while (*link != RT_INDEX_NONE && *link != t)
		link = &ix->traces[*link].hash_next;
	if (*link == t)
		*link = ix->traces[t].hash_next;
}

uint32_t rt_index_remove(struct rt_index *ix, uint32_t t, uint32_t *out,
			 int evicted, uint64_t age_us)
{
	struct rt_trace_entry *e = &ix->traces[t];
	uint32_t b = e->first_buf, n = 0, next;

	while (b != RT_INDEX_NONE) {
		next = ix->buf_next[b];
		out[n++] = b;
		ix->buf_trace[b] = RT_INDEX_NONE;
		ix->buf_next[b] = RT_INDEX_NONE;
		ix->buf_recovered[b] = 0;
		b = next;
	}
	if (e->list == RT_LIST_HELD)
		ix->st.held_traces--;
	lru_unlink(ix, t);
	if (e->state != RT_TRACE_UNTRIGGERED) {
		ix->st.pinned_traces--;
		ix->st.pinned_buffers -= e->nbuffers;
	}
	if (evicted) {
		ix->st.evicted_traces++;
		ix->st.evicted_buffers += n;
		ix->st.evicted_bytes += e->bytes;
		horizon_record(ix, age_us);
	}
	ix->st.traces--;
	ix->st.buffers -= n;
	ix->st.bytes -= e->bytes;
	ix->st.crumbs -= e->ncrumbs;
	hash_unlink(ix, t);
	/* Buffers still in flight are released later naming this entry: with in_use
	 * 0 (or a reused entry's zeroed figures) they change nothing here. */
	e->in_use = 0;
	e->inflight = 0;
	e->inflight_bytes = 0;
	e->done_buffers = 0;
	e->done_bytes = 0;
	e->hash_next = ix->free_head;
	ix->free_head = t;
	return n;
}

uint64_t rt_index_horizon_percentile(const struct rt_index *ix, double q)
{
	uint64_t total = 0, seen = 0, want;
	uint32_t b;
	for (b = 0; b < RT_INDEX_HORIZON_BUCKETS; b++)
		total += ix->st.horizon_hist[b];
	if (total == 0)
		return 0;
	want = (uint64_t)(q * (double)total);
	if (want >= total)
		want = total - 1;
	for (b = 0; b < RT_INDEX_HORIZON_BUCKETS; b++) {
		seen += ix->st.horizon_hist[b];
		if (seen > want)
			return 1ull << b;
	}
	return 1ull << (RT_INDEX_HORIZON_BUCKETS - 1);
}

uint32_t rt_index_take_buffers(struct rt_index *ix, uint32_t t, uint32_t *out,
			       uint64_t max_bytes, uint32_t max_count)
{
	struct rt_trace_entry *e = &ix->traces[t];
	uint32_t b = e->first_buf, n = 0;
	uint64_t bytes = 0;
	while (b != RT_INDEX_NONE &&
	       (n == 0 || (n < max_count && bytes + ix->buf_bytes[b] <= max_bytes))) {
		uint32_t next = ix->buf_next[b];
		out[n++] = b;
		bytes += ix->buf_bytes[b];
		ix->buf_trace[b] = RT_INDEX_INFLIGHT;
		ix->buf_next[b] = RT_INDEX_NONE;
		ix->buf_recovered[b] = 0;
		b = next;
	}
	e->first_buf = b;
	if (b == RT_INDEX_NONE)
		e->last_buf = RT_INDEX_NONE;
	if (e->state != RT_TRACE_UNTRIGGERED)
		ix->st.pinned_buffers -= n;
	ix->st.buffers -= n;
	ix->st.bytes -= bytes;
	ix->st.inflight_buffers += n;
	e->nbuffers -= n;
	e->bytes -= bytes;
	e->inflight += n;
	e->inflight_bytes += bytes;
	return n;
}

/* Trace t (live) no longer counts buffer b as in flight. */
static void drop_inflight(struct rt_index *ix, uint32_t t, uint32_t b)
{
	struct rt_trace_entry *e = &ix->traces[t];
	uint32_t bytes = ix->buf_bytes[b];
	if (!e->inflight)
		return; /* an entry reused since the buffer was taken */
	e->inflight--;
	e->inflight_bytes -= bytes <= e->inflight_bytes ? bytes : e->inflight_bytes;
}

void rt_index_release_inflight(struct rt_index *ix, uint32_t buffer_id, uint32_t t,
			       int delivered)
{
	struct rt_trace_entry *e;
	if (buffer_id >= ix->buffer_count || ix->buf_trace[buffer_id] != RT_INDEX_INFLIGHT)
		return;
	ix->buf_trace[buffer_id] = RT_INDEX_NONE;
	ix->st.inflight_buffers--;
	if (t >= ix->capacity || !ix->traces[t].in_use)
		return;
	e = &ix->traces[t];
	drop_inflight(ix, t, buffer_id);
	if (delivered) {
		e->done_buffers++;
		e->done_bytes += ix->buf_bytes[buffer_id];
	}
	if (e->list == RT_LIST_PINNED && e->nbuffers == 0 && e->inflight == 0 &&
	    e->done_buffers > 0)
		list_move(ix, t, RT_LIST_QUIET);
}

void rt_index_return_buffers(struct rt_index *ix, uint32_t t, const uint32_t *bufs,
			     uint32_t n)
{
	struct rt_trace_entry *e = &ix->traces[t];
	uint32_t i, head = e->first_buf, tail = RT_INDEX_NONE;
	/* Chain the returned buffers back to front, so each links to the next. */
	for (i = n; i-- > 0;) {
		uint32_t b = bufs[i];
		if (b >= ix->buffer_count || ix->buf_trace[b] != RT_INDEX_INFLIGHT)
			continue;
		drop_inflight(ix, t, b);
		ix->st.inflight_buffers--;
		ix->buf_trace[b] = t;
		ix->buf_next[b] = head;
		ix->buf_recovered[b] = 0;
		if (tail == RT_INDEX_NONE)
			tail = b;
		head = b;
		e->nbuffers++;
		e->bytes += ix->buf_bytes[b];
		ix->st.buffers++;
		ix->st.bytes += ix->buf_bytes[b];
		if (e->state != RT_TRACE_UNTRIGGERED)
			ix->st.pinned_buffers++;
	}
	e->first_buf = head;
	if (e->last_buf == RT_INDEX_NONE)
		e->last_buf = tail;
	if (e->list == RT_LIST_QUIET)
		list_move(ix, t, RT_LIST_PINNED);
}
