/*
 * trigger_set.c — TriggerSet(T, N) and the Queue trigger built from it.
 *
 * The set remembers the N most recent trace ids fed by _add. It hands the
 * wrapped trigger T a sink (retrace_trigger_set_sink); when T fires for trace X
 * through it, the set copies the remembered ids (newest first, X left out)
 * into a stack array after X's own laterals and fires the downstream sink with
 * at most RETRACE_MAX_LATERAL laterals, holding no lock while it does.
 *
 * Shards: by default each thread adds into its own ring of N ids (a shard, the
 * thread's slot modulo a power-of-two count sized from the CPUs) under that
 * ring's spinlock, so threads sharing the set touch disjoint cache lines and a
 * 128-bit id is never read half-written. Each entry is stamped with the set's
 * epoch, a counter every shard bumps once per EPOCH_STRIDE of its own adds: one
 * shared write per EPOCH_STRIDE samples, and a relaxed load of a line that is
 * almost always already in the cache. Reading (a firing, a snapshot) copies
 * each shard's ring out under that shard's lock alone, one shard at a time,
 * into scratch sized at creation (readers take turns on a lock of their own),
 * and merges the copies newest first by stamp,
 * taking shards in turn among equal stamps: each thread's ids stay in their
 * exact order, and across threads the order is right to about EPOCH_STRIDE
 * adds. With one shard (or one thread) it is exactly the last N ids. The
 * stride is large because every bump moves the epoch's line to one core and
 * makes every other shard's next load miss: at 64 that alone doubled the cost
 * of an add with two threads.
 *
 * Queue trigger: a Percentile on queueing delay whose sink is a TriggerSet's;
 * each dequeued request is judged first and remembered after, so the laterals
 * of a request that waited too long are the N requests dequeued just before it.
 */
#include <stdlib.h>

#include "internal.h"

#define EPOCH_STRIDE 1024u
#define MAX_SHARDS 256u

struct set_shard {
	_Alignas(RTT_CACHE_LINE) rtt_spinlock lock;
	uint32_t next;  /* ring index of the next add */
	uint64_t added; /* ids ever added to this shard */
	uint64_t forwarded;
	uint64_t fire_errors;
	uint64_t stamp[RETRACE_MAX_LATERAL];
	retrace_trace_id recent[RETRACE_MAX_LATERAL];
};

/* One shard's newest ids, newest first, copied out under its lock. */
struct set_copy {
	uint32_t have;
	uint64_t stamp[RETRACE_MAX_LATERAL];
	retrace_trace_id id[RETRACE_MAX_LATERAL];
};

struct retrace_trigger_set {
	uint32_t n;
	unsigned int shards;
	struct retrace_fire_sink downstream;
	struct set_copy *copy; /* shards entries, used under merge_lock */
	_Alignas(RTT_CACHE_LINE) atomic_uint_fast64_t epoch; /* its own line */
	_Alignas(RTT_CACHE_LINE) rtt_spinlock merge_lock;    /* readers only */
	_Alignas(RTT_CACHE_LINE) struct set_shard *shard[];
};

static inline struct set_shard *my_shard(struct retrace_trigger_set *s)
{
	return s->shards == 1 ? s->shard[0] : s->shard[rtt_shard_index(s->shards)];
}

void retrace_trigger_set_add(struct retrace_trigger_set *s, retrace_trace_id id)
{
	struct set_shard *sh = my_shard(s);
	uint64_t epoch = atomic_load_explicit(&s->epoch, memory_order_relaxed);
	int bump;

	rtt_lock(&sh->lock);
	sh->recent[sh->next] = id;
	sh->stamp[sh->next] = epoch;
	sh->next = sh->next + 1u == s->n ? 0 : sh->next + 1u;
	bump = (++sh->added % EPOCH_STRIDE) == 0;
	rtt_unlock(&sh->lock);
	if (bump)
		atomic_fetch_add_explicit(&s->epoch, 1, memory_order_relaxed);
}

/* Ring index of a shard's i-th newest id (i < min(added, n)). */
static inline uint32_t nth_newest(const struct retrace_trigger_set *s,
				  const struct set_shard *sh, uint32_t i)
{
	return sh->next >= i + 1u ? sh->next - i - 1u : sh->next + s->n - i - 1u;
}

/*
 * Copy every shard's ids out, one shard lock at a time and each held only for
 * its copy (at most N entries): a thread adding to its shard waits at most
 * that long. Holding every shard's lock through the whole merge made the
 * adding threads spin long enough, on a virtual machine, for the hypervisor to
 * take their CPU away (pause-loop exiting). Caller holds merge_lock.
 */
static void copy_shards(struct retrace_trigger_set *s)
{
	for (unsigned int i = 0; i < s->shards; i++) {
		struct set_shard *sh = s->shard[i];
		struct set_copy *c = &s->copy[i];
		rtt_lock(&sh->lock);
		c->have = (uint32_t)(sh->added < s->n ? sh->added : s->n);
		for (uint32_t k = 0; k < c->have; k++) {
			uint32_t at = nth_newest(s, sh, k);
			c->stamp[k] = sh->stamp[at];
			c->id[k] = sh->recent[at];
		}
		rtt_unlock(&sh->lock);
	}
}

/*
 * Newest first over all shards' copies, skipping `exclude`; caller holds
 * merge_lock. A k-way merge by stamp: each pick takes the largest stamp among
 * the shards' next entries, scanning from the shard after the last one picked
 * so that equal stamps alternate between threads.
 */
static size_t merge_copies(const struct retrace_trigger_set *s, retrace_trace_id *out,
			   size_t max, retrace_trace_id exclude)
{
	uint32_t taken[MAX_SHARDS] = {0};
	unsigned int last = s->shards - 1u;
	size_t got = 0;

	while (got < max) {
		unsigned int best = UINT32_MAX;
		uint64_t best_stamp = 0;
		for (unsigned int j = 1; j <= s->shards; j++) {
			unsigned int i = (last + j) % s->shards;
			const struct set_copy *c = &s->copy[i];
			if (taken[i] >= c->have)
				continue;
			uint64_t st = c->stamp[taken[i]];
			if (best == UINT32_MAX || st > best_stamp) {
				best = i;
				best_stamp = st;
			}
		}
		if (best == UINT32_MAX)
			break;
		retrace_trace_id id = s->copy[best].id[taken[best]++];
		last = best;
		if (!rtt_same_id(id, exclude))
			out[got++] = id;
	}
	return got;
}

static size_t copy_recent(struct retrace_trigger_set *s, retrace_trace_id *out, size_t max,
			  retrace_trace_id exclude)
{
	rtt_lock(&s->merge_lock);
	copy_shards(s);
	size_t got = merge_copies(s, out, max, exclude);
	rtt_unlock(&s->merge_lock);
	return got;
}

size_t retrace_trigger_set_snapshot(struct retrace_trigger_set *s,
				    retrace_trace_id *out, size_t max,
				    retrace_trace_id exclude)
{
	return copy_recent(s, out, max, exclude);
}

static int set_fire(void *arg, retrace_trace_id id, uint32_t trigger_id,
		    const retrace_trace_id *lateral, size_t n_lateral)
{
	struct retrace_trigger_set *s = arg;
	struct set_shard *mine = my_shard(s);
	retrace_trace_id all[RETRACE_MAX_LATERAL];
	size_t n = 0;

	for (; n < n_lateral && n < RETRACE_MAX_LATERAL; n++)
		all[n] = lateral[n];
	n += copy_recent(s, all + n, RETRACE_MAX_LATERAL - n, id);
	rtt_lock(&mine->lock);
	mine->forwarded++;
	rtt_unlock(&mine->lock);

	int rc = rtt_fire(&s->downstream, id, trigger_id, all, n);
	if (rc < 0) {
		rtt_lock(&mine->lock);
		mine->fire_errors++;
		rtt_unlock(&mine->lock);
	}
	return rc;
}

struct retrace_fire_sink retrace_trigger_set_sink(struct retrace_trigger_set *s)
{
	return (struct retrace_fire_sink){.fn = set_fire, .arg = s};
}

struct retrace_trigger_set *retrace_trigger_set_create_sharded(
	unsigned int n, struct retrace_fire_sink downstream, unsigned int shards)
{
	if (n == 0 || n > RETRACE_MAX_LATERAL || shards > MAX_SHARDS)
		return NULL;
	if (shards == 0)
		shards = rtt_default_shards(sizeof(struct set_shard));
	struct retrace_trigger_set *s =
		rtt_zalloc_aligned(sizeof *s + shards * sizeof s->shard[0]);
	if (!s)
		return NULL;
	s->n = n;
	s->downstream = downstream;
	s->shards = shards;
	s->copy = calloc(shards, sizeof *s->copy);
	if (!s->copy) {
		free(s);
		return NULL;
	}
	for (unsigned int i = 0; i < shards; i++) {
		s->shard[i] = rtt_zalloc_aligned(sizeof *s->shard[i]);
		if (!s->shard[i]) {
			retrace_trigger_set_destroy(s);
			return NULL;
		}
	}
	return s;
}

struct retrace_trigger_set *retrace_trigger_set_create(
	unsigned int n, struct retrace_fire_sink downstream)
{
	return retrace_trigger_set_create_sharded(n, downstream, 0);
}

void retrace_trigger_set_destroy(struct retrace_trigger_set *s)
{
	if (!s)
		return;
	for (unsigned int i = 0; i < s->shards; i++)
		free(s->shard[i]);
	free(s->copy);
	free(s);
}

void retrace_trigger_set_stats(struct retrace_trigger_set *s,
			       struct retrace_trigger_stats *out)
{
	*out = (struct retrace_trigger_stats){0};
	for (unsigned int i = 0; i < s->shards; i++) {
		struct set_shard *sh = s->shard[i];
		rtt_lock(&sh->lock);
		out->samples += sh->added;
		out->fired += sh->forwarded;
		out->fire_errors += sh->fire_errors;
		rtt_unlock(&sh->lock);
	}
}

unsigned int retrace_trigger_set_shards(const struct retrace_trigger_set *s)
{
	return s->shards;
}

/* ------------------------------------------------------------- queue ---- */

struct retrace_queue_trigger {
	struct retrace_trigger_set *set;
	struct retrace_percentile *delay;
};

struct retrace_queue_trigger *retrace_queue_trigger_create(
	const struct retrace_queue_trigger_config *cfg)
{
	if (!cfg)
		return NULL;
	struct retrace_queue_trigger *q = calloc(1, sizeof *q);
	if (!q)
		return NULL;
	q->set = retrace_trigger_set_create_sharded(cfg->lateral ? cfg->lateral : 16u,
						    cfg->sink, cfg->shards);
	rtt_default_name(cfg->trigger_id, "queue-wait", cfg->percentile);
	if (q->set) {
		struct retrace_percentile_config pc = {
			.trigger_id = cfg->trigger_id,
			.percentile = cfg->percentile,
			.window = cfg->window,
			.window_ns = cfg->window_ns,
			.shards = cfg->shards,
			.sink = retrace_trigger_set_sink(q->set),
		};
		q->delay = retrace_percentile_create(&pc);
	}
	if (!q->set || !q->delay) {
		retrace_queue_trigger_destroy(q);
		return NULL;
	}
	return q;
}

void retrace_queue_trigger_destroy(struct retrace_queue_trigger *q)
{
	if (!q)
		return;
	retrace_percentile_destroy(q->delay);
	retrace_trigger_set_destroy(q->set);
	free(q);
}

int retrace_queue_trigger_dequeued(struct retrace_queue_trigger *q,
				   retrace_trace_id id, uint64_t queueing_delay)
{
	int fired = retrace_percentile_add(q->delay, id, queueing_delay);
	retrace_trigger_set_add(q->set, id);
	return fired;
}
