/*
 * store/clickhouse_cache.h — what the ClickHouse backend remembers of its own
 * writes, so that the coordinator's reads of them cost no round trip.
 *
 * Owns: per trace (by trace_lo) the slices this handle stored, in arrival
 * order with their messages copied, and the newest trace row it wrote; and a
 * map of every trigger key the store holds with its state. Bounded: the
 * oldest traces are forgotten past max_traces or max_bytes of messages.
 *
 * Promises: a trace is FRESH once the backend learnt that the server held no
 * slice of it before this handle wrote one; only then are its cached slices
 * the whole answer. A single writer per trace (the coordinator owning it)
 * makes the cached row the newest one. Pure memory: no I/O, no locks.
 */
#ifndef RETRACE_STORE_CLICKHOUSE_CACHE_H
#define RETRACE_STORE_CLICKHOUSE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* MurmurHash3's 64-bit finaliser: every output bit depends on every input
 * bit. The cache's buckets (over trace_lo xor a random seed: a sender chooses
 * its trace ids, and ids made to share one bucket would turn every lookup into
 * a walk of the chain) and the backend's slice keys (clickhouse.c, unseeded:
 * they are stored, so they must be the same in every process) hash with it. */
static inline uint64_t chc_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

enum chc_known { CHC_UNKNOWN, CHC_FRESH, CHC_OLD };

struct chc_slice {
	struct rt_store_slice sl;   /* sl.msg points just past this struct */
	struct chc_slice *next;
};

struct chc_trace {
	uint64_t lo;
	enum chc_known known;
	struct chc_slice *head, *tail;
	size_t bytes;                /* message bytes held */
	struct rt_store_trace *row;  /* newest row written (NULL: none) */
	int row_deleted;             /* that row is a tombstone */
	struct chc_trace *hnext;     /* hash chain */
	struct chc_trace *older, *newer;
};

struct chc {
	struct chc_trace **bucket;
	uint32_t nbuckets;           /* a power of two */
	uint64_t seed;               /* random per cache: trace ids are chosen by senders */
	uint32_t ntraces, max_traces;
	size_t bytes, max_bytes;
	struct chc_trace *oldest, *newest;
	uint64_t *unknown;           /* trace_lo of entries added as UNKNOWN */
	uint32_t nunknown, capunknown;
};

int chc_init(struct chc *c, uint32_t max_traces, size_t max_bytes); /* 0 or -1 */
void chc_free(struct chc *c);
void chc_clear(struct chc *c);
struct chc_trace *chc_get(struct chc *c, uint64_t lo);
/* The entry of lo, added (UNKNOWN, newest) if missing; NULL when out of memory. */
struct chc_trace *chc_touch(struct chc *c, uint64_t lo);
int chc_add_slice(struct chc *c, struct chc_trace *t, const struct rt_store_slice *sl);
int chc_set_row(struct chc_trace *t, const struct rt_store_trace *row, int deleted);
/* Forget the slices of trace_hi == hi (deleted). */
void chc_drop_slices(struct chc *c, struct chc_trace *t, uint64_t hi);
/* Make the cache fit its bounds again (after adding). */
void chc_trim(struct chc *c);

/* Triggers: open addressing on (agent_id, trigger_seq). */
enum chc_trig_state { CHT_EMPTY, CHT_STORED, CHT_DONE, CHT_REMOVED };
struct chc_trig {
	uint64_t seq, received_ns;
	uint32_t agent;
	uint8_t state;
};
struct chc_trigs {
	struct chc_trig *slot;
	uint32_t cap, n;             /* cap a power of two; n slots used */
};
struct chc_trig *chc_trig_find(struct chc_trigs *m, uint32_t agent, uint64_t seq);
/* Find or add (state CHT_EMPTY when new); NULL when out of memory. */
struct chc_trig *chc_trig_put(struct chc_trigs *m, uint32_t agent, uint64_t seq);
void chc_trig_free(struct chc_trigs *m);

#endif
