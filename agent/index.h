/*
 * agent/index.h — the agent's trace index: which buffers and breadcrumbs belong to
 * which trace, which traces may be evicted, in what order.
 *
 * Owns: a fixed table of trace entries (hash by the low 64 bits of the trace id,
 * chained through 32-bit indices), per-buffer arrays that thread each trace's
 * buffers into an intrusive list, and an LRU of untriggered traces. "Buffer"
 * here is whatever the caller indexes by a dense id: the agent's are segment
 * slots (ABI 5: several traces share a writer's buffer; agent.h, struct
 * rt_agent_segs), slot b < buffer_count being buffer b's first segment. All memory is
 * allocated once from the pool geometry; nothing is allocated per buffer or per
 * trace afterwards.
 *
 * Promises:
 *   - A buffer belongs to at most one trace; adding a buffer the index already
 *     owns is refused (RT_INDEX_DUPLICATE) and changes nothing.
 *   - Eviction removes whole traces only, least recently seen first, and never a
 *     trace that is not in the LRU (triggered or reporting traces are not).
 *   - A pinned trace that held data and has had all of it taken and released
 *     (nothing held, nothing in flight) moves to the quiet list, oldest first:
 *     the entries worth least, reclaimed before a new trace is refused.
 *   - Each trace counts the buffers and bytes it has had since it was created:
 *     held + in flight + done (released after delivery); the counts die with
 *     the entry.
 *   - The index never touches shared memory: the caller validates entries and
 *     moves buffers; the index only keeps the books. That keeps it testable alone.
 */
#ifndef RETRACE_AGENT_INDEX_H
#define RETRACE_AGENT_INDEX_H

#include <stddef.h>
#include <stdint.h>

#define RT_INDEX_NONE UINT32_MAX
#define RT_INDEX_INFLIGHT (UINT32_MAX - 1) /* buf_trace: taken for reporting */
#define RT_INDEX_MAX_CRUMBS 16       /* distinct upstream agents kept per trace */
#define RT_INDEX_HORIZON_BUCKETS 40  /* log2 buckets of microseconds */

/* The list an entry's lru_prev/lru_next links thread it through. */
enum rt_trace_list {
	RT_LIST_LRU = 0,    /* untriggered, least recently seen first */
	RT_LIST_PINNED = 1, /* pinned, in pinning order */
	RT_LIST_QUIET = 2,  /* pinned, all its data gone out: in the order it went quiet */
	RT_LIST_HELD = 3,   /* untriggered but held (a weaving window query, agent/window.c):
			     * out of the LRU so it is not evicted, not pinned for reporting */
};

enum rt_trace_state {
	RT_TRACE_UNTRIGGERED = 0, /* in the LRU, evictable */
	RT_TRACE_TRIGGERED = 1,   /* pinned: out of the LRU */
	RT_TRACE_REPORTING = 2,   /* pinned, its slice is on its way out */
};

struct rt_trace_entry {
	uint64_t lo, hi;         /* hi is 0 until a buffer header told us */
	uint32_t hash_next;
	uint32_t lru_prev, lru_next;
	uint32_t first_buf, last_buf; /* intrusive list through rt_index.buf_next */
	uint32_t nbuffers;
	uint64_t bytes;
	uint64_t first_tick;     /* earliest buffer first_tick seen (0: none) */
	uint64_t last_seen_ns;   /* CLOCK_MONOTONIC of the last buffer or crumb */
	uint32_t trigger_id;     /* the first trigger that pinned it */
	uint32_t inflight;       /* its buffers taken for reporting, not yet released */
	uint64_t inflight_bytes; /* their bytes */
	uint32_t done_buffers;   /* taken and released as delivered (acked, spooled, dropped) */
	uint64_t done_bytes;
	uint32_t streams_begun;  /* buffers seen with seq 0: a writer's run of the trace began */
	uint32_t streams_ended;  /* buffers seen with RT_BUF_LAST: a writer's run ended */
	uint8_t state;           /* enum rt_trace_state */
	uint8_t ncrumbs;
	uint8_t in_use;
	uint8_t list;            /* enum rt_trace_list */
	uint8_t route;           /* coordinator member + 1 that acknowledged part of it
	                            (agent/route.h: the trace stays with it); 0 = none */
	uint8_t asked;           /* coordinator member + 1 whose remote trigger asked for
	                            it last: where it goes while no member acknowledged part */
	uint8_t posted;          /* coordinator member + 1 its trigger was last posted to:
	                            its slices follow while that member is live */
	uint32_t retry_nbuf;     /* a failed slice's buffers, back at the head: cut again */
	uint64_t retry_seq;      /* under this slice_seq, so a member that committed it
	                            before its ACK was lost stores it once (0 = none) */
	uint32_t crumbs[RT_INDEX_MAX_CRUMBS];
};

struct rt_index_stats {
	uint64_t traces;          /* live entries */
	uint64_t buffers;         /* buffers owned */
	uint64_t bytes;
	uint64_t pinned_traces;
	uint64_t pinned_buffers;
	uint64_t held_traces;     /* on the held list (rt_index_hold) */
	uint64_t inflight_buffers; /* taken out of their trace for reporting */
	uint64_t crumbs;          /* distinct (trace, agent) pairs held */
	uint64_t crumbs_dropped;  /* a trace already had RT_INDEX_MAX_CRUMBS agents */
	uint64_t table_full;      /* a new trace found no free entry */
	uint64_t evicted_traces;
	uint64_t evicted_buffers;
	uint64_t evicted_bytes;
	uint64_t horizon_us;      /* event horizon: data age at the last eviction */
	uint64_t horizon_hist[RT_INDEX_HORIZON_BUCKETS]; /* bucket b: [2^b, 2^(b+1)) us */
};

struct rt_index {
	uint32_t capacity;       /* trace entries */
	uint32_t buffer_count;
	uint32_t hash_mask;
	uint64_t hash_seed;      /* random per index: trace ids are chosen by senders */
	uint32_t *hash;          /* bucket heads */
	struct rt_trace_entry *traces;
	uint32_t free_head;      /* free entries chained through hash_next */
	uint32_t lru_head, lru_tail; /* untriggered; head = least recently seen */
	uint32_t pin_head, pin_tail; /* pinned, in pinning order (same links) */
	uint32_t quiet_head, quiet_tail; /* pinned and fully reported (same links) */
	uint32_t held_head, held_tail;   /* untriggered, held from eviction (same links) */
	uint32_t *buf_next;      /* per buffer: next buffer of the same trace */
	uint32_t *buf_trace;     /* per buffer: owning trace entry, or NONE */
	uint32_t *buf_bytes;     /* per buffer: bytes indexed */
	uint8_t *buf_recovered;  /* per buffer: found from its header; its queue entry may follow */
	struct rt_index_stats st;
};

enum rt_index_result {
	RT_INDEX_ADDED = 0,
	RT_INDEX_DUPLICATE = -1,  /* the buffer is already owned */
	RT_INDEX_FULL = -2,       /* no trace entry free and nothing evictable */
	RT_INDEX_RANGE = -3,      /* buffer id out of range */
};

/* Allocate for `capacity` traces and `buffer_count` buffers. 0 or -1 (ENOMEM). */
int rt_index_init(struct rt_index *ix, uint32_t capacity, uint32_t buffer_count);
void rt_index_free(struct rt_index *ix);

/* Look up a trace by its low 64 bits; NONE if absent. */
uint32_t rt_index_find(const struct rt_index *ix, uint64_t lo);

/*
 * Find or create the trace; NONE when the table is full (the caller evicts the
 * LRU's oldest trace and asks again: eviction needs the pool, the index has none).
 */
uint32_t rt_index_get(struct rt_index *ix, uint64_t lo, uint64_t now_ns);

/* Add a buffer to trace `t` (from rt_index_get). */
int rt_index_add_buffer(struct rt_index *ix, uint32_t t, uint32_t buffer_id,
			uint32_t bytes, uint64_t first_tick, uint64_t now_ns);

/* Record that the request came from `agent_id`; 1 if new, 0 if known or dropped. */
int rt_index_add_crumb(struct rt_index *ix, uint32_t t, uint32_t agent_id,
		       uint64_t now_ns);

/*
 * Pin (leave the LRU for the pinned list) / unpin (back in the LRU, as most
 * recently seen).
 */
void rt_index_pin(struct rt_index *ix, uint32_t t, uint32_t trigger_id);
void rt_index_unpin(struct rt_index *ix, uint32_t t, uint64_t now_ns);

/*
 * Hold an untriggered trace out of the LRU (it cannot be evicted, and new data
 * does not move it back), or let it go back to the LRU as most recently seen.
 * Hold returns 1 if the trace is now held by this call, 0 if it was not in the
 * LRU (already held, pinned: nothing to do). A held trace that gets pinned
 * leaves the held list for the pinned one; unpinned, it goes to the LRU.
 */
int rt_index_hold(struct rt_index *ix, uint32_t t);
void rt_index_unhold(struct rt_index *ix, uint32_t t, uint64_t now_ns);

/*
 * Remove trace `t` entirely, writing its buffer ids to `out` (room for
 * nbuffers). `age_us` (data age) feeds the event horizon when `evicted` is set.
 * Returns the number of buffers written.
 */
uint32_t rt_index_remove(struct rt_index *ix, uint32_t t, uint32_t *out,
			 int evicted, uint64_t age_us);

/*
 * Take buffers of trace t, oldest first, out of it for reporting, up to
 * max_bytes and max_count (at least one): written to out (room for nbuffers),
 * marked in flight (still owned: a queue entry naming one is a duplicate); the
 * trace keeps its entry, state, crumbs and any buffers left. Returns the count.
 */
uint32_t rt_index_take_buffers(struct rt_index *ix, uint32_t t, uint32_t *out,
			       uint64_t max_bytes, uint32_t max_count);

/*
 * A buffer taken for reporting is done with. `t` is its trace if that still
 * exists (NONE otherwise), for its in-flight figures; `delivered` (acknowledged,
 * spooled, or dropped for good) adds it to the trace's done figures, and a
 * pinned trace left with nothing held or in flight joins the quiet list.
 */
void rt_index_release_inflight(struct rt_index *ix, uint32_t buffer_id, uint32_t t,
			       int delivered);

/*
 * Buffers taken from trace t that did not go out: back in flight's place, at
 * the head of t's list in the order given (they are older than what t holds).
 */
void rt_index_return_buffers(struct rt_index *ix, uint32_t t, const uint32_t *bufs,
			     uint32_t n);

/* The least recently seen untriggered trace, or NONE. */
static inline uint32_t rt_index_lru_oldest(const struct rt_index *ix)
{
	return ix->lru_head;
}

/* The trace pinned longest ago, or NONE. */
static inline uint32_t rt_index_pinned_oldest(const struct rt_index *ix)
{
	return ix->pin_head;
}

/* The pinned trace that went quiet (all its data out) longest ago, or NONE. */
static inline uint32_t rt_index_quiet_oldest(const struct rt_index *ix)
{
	return ix->quiet_head;
}

/* Buffers of trace t in index order (caller walks buf_next from first_buf). */
static inline const struct rt_trace_entry *rt_index_trace(const struct rt_index *ix,
							  uint32_t t)
{
	return &ix->traces[t];
}

/* Percentile (0..1) of the event-horizon histogram in microseconds (bucket floor). */
uint64_t rt_index_horizon_percentile(const struct rt_index *ix, double q);

#endif
