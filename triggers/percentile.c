/*
 * percentile.c — Percentile(p) in O(1) per sample, whatever p is.
 *
 * A shard keeps the window as a FIFO ring of bucket numbers (2 bytes per
 * sample, plus an 8-byte timestamp when a time window is set) and a log-linear
 * histogram of those buckets: values below 256 get a bucket each, above that
 * every power of two is cut into 128 equal buckets, so a bucket's width is at
 * most 1/128 of its lower bound (7424 buckets cover all of uint64).
 *
 * Instead of searching the histogram for the percentile on every sample, the
 * shard tracks `top`, the bucket holding the k-th largest sample, and `above`,
 * the number of samples in buckets above it. Invariant: above < k <= above +
 * counts[top]. Adding or evicting a sample moves `above` by at most one, so
 * restoring the invariant moves `top` by about one *non-empty* bucket; a
 * two-level occupancy bitmap finds the next non-empty bucket up or down with
 * one or two count-trailing/leading-zero instructions. Hence the cost does not
 * depend on p, the window size or the value range.
 *
 * A sample fires iff its bucket is above `top`, i.e. iff it exceeds θ, the
 * largest value of bucket `top`; the exact k-th largest q* lies in that bucket,
 * so q* <= θ <= q* (1 + 1/128).
 *
 * Threads: by default every thread feeds its own shard (rtt_shard_index: the
 * thread's slot modulo a power-of-two shard count sized from the CPUs), so two
 * threads on one trigger touch disjoint cache lines and each shard's window is
 * its thread's recent samples; readers merge the shards
 * (retrace_percentile_merged_threshold walks the union's histogram). Each shard
 * is guarded by its spinlock, uncontended while threads <= shards; the sink is
 * called after the lock is released. In batch mode a thread instead takes the
 * lock of its own stage (a per-thread slot, uncontended), judges the sample
 * against the shard's published threshold (one relaxed atomic load) and stages
 * it; every `batch` samples the stage is merged into the shard under the
 * shard's lock and the new threshold published. Lock order: stage, then shard.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "internal.h"

#define SUB_BITS 7u
#define SUB_COUNT (1u << SUB_BITS)
#define BUCKETS ((64u - SUB_BITS + 1u) * SUB_COUNT) /* 7424 */
#define OCC_WORDS (BUCKETS / 64u)                   /* 116 */
#define SUMMARY_WORDS ((OCC_WORDS + 63u) / 64u)     /* 2 */
#define NO_BUCKET UINT32_MAX
#define MIN_WINDOW 100u
#define MAX_WINDOW (1u << 28)
#define MAX_SHARDS 256u

struct pct_shard {
	_Alignas(RTT_CACHE_LINE) rtt_spinlock lock;
	uint32_t head;  /* ring index of the oldest sample */
	uint32_t count; /* samples in the window */
	uint32_t top;   /* bucket of the k-th largest sample */
	uint32_t above; /* samples in buckets > top */
	atomic_uint published; /* top | READY_BIT once count >= min_samples */
	struct retrace_trigger_stats stats;
	uint16_t *ring_bucket;
	uint64_t *ring_time; /* NULL without a time window */
	uint64_t summary[SUMMARY_WORDS]; /* bit w: occupied[w] != 0 */
	uint64_t occupied[OCC_WORDS];    /* bit b: counts[b] != 0 */
	uint32_t counts[BUCKETS];
};

#define MAX_STAGES 64u
#define MAX_BATCH 256u
#define READY_BIT 0x80000000u

/* A thread's staged samples (batch mode); its lock is only contended when more
 * than MAX_STAGES threads share the trigger. */
struct pct_stage {
	_Alignas(RTT_CACHE_LINE) rtt_spinlock lock; /* one line per stage */
	uint32_t n;
	struct retrace_trigger_stats stats;
	uint16_t *bucket; /* batch entries */
	uint64_t *time;   /* batch entries, NULL without a time window */
};

struct retrace_percentile {
	uint32_t trigger_id;
	uint32_t batch;
	struct pct_stage *stage; /* MAX_STAGES, NULL unless batch */
	uint32_t window;
	uint64_t window_ns;
	uint64_t tail_q32; /* (1 - p) * 2^32, rounded up */
	uint32_t min_samples;
	unsigned int shards;
	struct retrace_fire_sink sink;
	struct pct_shard *shard[];
};

/* ------------------------------------------------------------ buckets ---- */

static inline uint32_t value_bucket(uint64_t v)
{
	if (v < SUB_COUNT)
		return (uint32_t)v;
	unsigned int e = 63u - (unsigned int)__builtin_clzll(v); /* >= SUB_BITS */
	return ((e - SUB_BITS + 1u) << SUB_BITS) |
	       (uint32_t)((v >> (e - SUB_BITS)) & (SUB_COUNT - 1u));
}

/* Largest value that falls in bucket b. */
static uint64_t bucket_max_value(uint32_t b)
{
	if (b < 2u * SUB_COUNT)
		return b;
	unsigned int e = (b >> SUB_BITS) + SUB_BITS - 1u;
	uint64_t lo = (uint64_t)(SUB_COUNT + (b & (SUB_COUNT - 1u))) << (e - SUB_BITS);
	uint64_t width = 1ull << (e - SUB_BITS);
	return lo + (width - 1u);
}

/* --------------------------------------------------- occupancy bitmap ---- */

static inline void mark_occupied(struct pct_shard *s, uint32_t b)
{
	uint32_t w = b >> 6;
	s->occupied[w] |= 1ull << (b & 63u);
	s->summary[w >> 6] |= 1ull << (w & 63u);
}

static inline void mark_empty(struct pct_shard *s, uint32_t b)
{
	uint32_t w = b >> 6;
	s->occupied[w] &= ~(1ull << (b & 63u));
	if (s->occupied[w] == 0)
		s->summary[w >> 6] &= ~(1ull << (w & 63u));
}

/* Lowest set bit >= i in bits[0..nwords), or NO_BUCKET. */
static inline uint32_t bit_at_or_after(const uint64_t *bits, uint32_t nwords,
				       uint32_t i)
{
	uint32_t w = i >> 6;
	if (w >= nwords)
		return NO_BUCKET;
	uint64_t m = bits[w] & (~0ull << (i & 63u));
	while (m == 0) {
		if (++w >= nwords)
			return NO_BUCKET;
		m = bits[w];
	}
	return (w << 6) + (uint32_t)__builtin_ctzll(m);
}

/* Highest set bit <= i, or NO_BUCKET. */
static inline uint32_t bit_at_or_before(const uint64_t *bits, uint32_t i)
{
	uint32_t w = i >> 6;
	uint64_t m = bits[w] & (~0ull >> (63u - (i & 63u)));
	while (m == 0) {
		if (w == 0)
			return NO_BUCKET;
		m = bits[--w];
	}
	return (w << 6) + 63u - (uint32_t)__builtin_clzll(m);
}

/* Smallest non-empty bucket > b (NO_BUCKET if none). */
static inline uint32_t next_bucket_above(const struct pct_shard *s, uint32_t b)
{
	if (b + 1u >= BUCKETS)
		return NO_BUCKET;
	uint32_t w = (b + 1u) >> 6;
	uint64_t m = s->occupied[w] & (~0ull << ((b + 1u) & 63u));
	if (m)
		return (w << 6) + (uint32_t)__builtin_ctzll(m);
	uint32_t nw = bit_at_or_after(s->summary, SUMMARY_WORDS, w + 1u);
	if (nw == NO_BUCKET || nw >= OCC_WORDS)
		return NO_BUCKET;
	return (nw << 6) + (uint32_t)__builtin_ctzll(s->occupied[nw]);
}

/* Largest non-empty bucket < b (NO_BUCKET if none). */
static inline uint32_t next_bucket_below(const struct pct_shard *s, uint32_t b)
{
	if (b == 0)
		return NO_BUCKET;
	uint32_t w = (b - 1u) >> 6;
	uint64_t m = s->occupied[w] & (~0ull >> (63u - ((b - 1u) & 63u)));
	if (m)
		return (w << 6) + 63u - (uint32_t)__builtin_clzll(m);
	if (w == 0)
		return NO_BUCKET;
	uint32_t pw = bit_at_or_before(s->summary, w - 1u);
	if (pw == NO_BUCKET)
		return NO_BUCKET;
	return (pw << 6) + 63u - (uint32_t)__builtin_clzll(s->occupied[pw]);
}

/* ------------------------------------------------------------- window ---- */

static inline uint32_t rank_from_top(const struct retrace_percentile *p, uint32_t n)
{
	uint32_t k = (uint32_t)(((uint64_t)n * p->tail_q32) >> 32);
	return k ? k : 1u;
}

/* Restore above < k <= above + counts[top]. */
static inline void rebalance(const struct retrace_percentile *p, struct pct_shard *s)
{
	if (s->count == 0) {
		s->top = 0;
		s->above = 0;
		return;
	}
	uint32_t k = rank_from_top(p, s->count);
	while (s->above >= k) {
		uint32_t b = next_bucket_above(s, s->top);
		s->above -= s->counts[b];
		s->top = b;
	}
	while (s->above + s->counts[s->top] < k) {
		s->above += s->counts[s->top];
		s->top = next_bucket_below(s, s->top);
	}
}

static inline void count_in(struct pct_shard *s, uint32_t b)
{
	if (s->counts[b]++ == 0)
		mark_occupied(s, b);
	if (b > s->top)
		s->above++;
}

static inline void count_out(struct pct_shard *s, uint32_t b)
{
	if (--s->counts[b] == 0)
		mark_empty(s, b);
	if (b > s->top)
		s->above--;
}

static inline void evict_oldest(const struct retrace_percentile *p,
				struct pct_shard *s)
{
	count_out(s, s->ring_bucket[s->head]);
	s->head = s->head + 1u == p->window ? 0 : s->head + 1u;
	s->count--;
}

static inline void append(const struct retrace_percentile *p, struct pct_shard *s,
			  uint32_t b, uint64_t now)
{
	if (s->count == p->window)
		evict_oldest(p, s);
	uint32_t tail = s->head + s->count;
	if (tail >= p->window)
		tail -= p->window;
	s->ring_bucket[tail] = (uint16_t)b;
	if (s->ring_time)
		s->ring_time[tail] = now;
	s->count++;
	count_in(s, b);
}

static void expire_old(const struct retrace_percentile *p, struct pct_shard *s,
		       uint64_t now)
{
	uint64_t horizon = now > p->window_ns ? now - p->window_ns : 0;
	int changed = 0;
	while (s->count && s->ring_time[s->head] < horizon) {
		evict_oldest(p, s);
		changed = 1;
	}
	if (changed)
		rebalance(p, s);
}

static inline struct pct_shard *my_shard(struct retrace_percentile *p)
{
	return p->shards == 1 ? p->shard[0] : p->shard[rtt_shard_index(p->shards)];
}

/* ------------------------------------------------------ batch mode ---- */

static void publish(const struct retrace_percentile *p, struct pct_shard *s)
{
	uint32_t ready = s->count >= p->min_samples ? READY_BIT : 0u;
	atomic_store_explicit(&s->published, s->top | ready, memory_order_relaxed);
}

/* Caller holds the stage's lock. */
static void merge_stage(const struct retrace_percentile *p, struct pct_shard *s,
			struct pct_stage *st)
{
	rtt_lock(&s->lock);
	if (p->window_ns)
		expire_old(p, s, rtt_coarse_ns());
	for (uint32_t i = 0; i < st->n; i++)
		append(p, s, st->bucket[i], st->time ? st->time[i] : 0);
	rebalance(p, s);
	publish(p, s);
	s->stats.samples += st->stats.samples;
	s->stats.fired += st->stats.fired;
	s->stats.fire_errors += st->stats.fire_errors;
	rtt_unlock(&s->lock);
	st->n = 0;
	st->stats = (struct retrace_trigger_stats){0};
}

static int add_staged(struct retrace_percentile *p, retrace_trace_id id, uint32_t b)
{
	struct pct_shard *s = my_shard(p);
	struct pct_stage *st = &p->stage[rtt_thread_slot() % MAX_STAGES];
	uint32_t seen = atomic_load_explicit(&s->published, memory_order_relaxed);
	int fire = (seen & READY_BIT) && b > (seen & ~READY_BIT);

	rtt_lock(&st->lock);
	st->bucket[st->n] = (uint16_t)b;
	if (st->time)
		st->time[st->n] = rtt_coarse_ns();
	st->stats.samples++;
	st->stats.fired += (uint64_t)fire;
	if (++st->n == p->batch)
		merge_stage(p, s, st);
	rtt_unlock(&st->lock);

	if (!fire)
		return 0;
	if (rtt_fire(&p->sink, id, p->trigger_id, NULL, 0) < 0) {
		rtt_lock(&st->lock);
		st->stats.fire_errors++;
		rtt_unlock(&st->lock);
	}
	return 1;
}

void retrace_percentile_flush(struct retrace_percentile *p)
{
	if (!p->stage)
		return;
	for (unsigned int i = 0; i < MAX_STAGES; i++) {
		struct pct_stage *st = &p->stage[i];
		rtt_lock(&st->lock);
		/* A stage is fed by threads whose slot maps to it; each of those
		 * merges into its own shard, so any shard is right for leftovers. */
		if (st->n || st->stats.samples || st->stats.fire_errors)
			merge_stage(p, p->shard[i % p->shards], st);
		rtt_unlock(&st->lock);
	}
}

int retrace_percentile_add(struct retrace_percentile *p, retrace_trace_id id,
			   uint64_t value)
{
	if (p->batch)
		return add_staged(p, id, value_bucket(value));

	struct pct_shard *s = my_shard(p);
	uint32_t b = value_bucket(value);
	uint64_t now = p->window_ns ? rtt_coarse_ns() : 0;
	int fire;

	rtt_lock(&s->lock);
	if (p->window_ns)
		expire_old(p, s, now);
	fire = s->count >= p->min_samples && b > s->top;
	append(p, s, b, now);
	rebalance(p, s);
	s->stats.samples++;
	s->stats.fired += (uint64_t)fire;
	rtt_unlock(&s->lock);

	if (!fire)
		return 0;
	if (rtt_fire(&p->sink, id, p->trigger_id, NULL, 0) < 0) {
		rtt_lock(&s->lock);
		s->stats.fire_errors++;
		rtt_unlock(&s->lock);
	}
	return 1;
}

/* --------------------------------------------------------- create etc ---- */

/* ceil() that ignores the rounding noise of 1 - p/100 (99.9 gives 2000, not 2001). */
static double ceil_tolerant(double x)
{
	return ceil(x - 1e-6);
}

static uint32_t window_for(const struct retrace_percentile_config *cfg, double tail)
{
	double floor_w = ceil_tolerant(2.0 / tail);
	double w = cfg->window ? (double)cfg->window : floor_w;
	if (w < floor_w)
		w = floor_w;
	if (w < MIN_WINDOW)
		w = MIN_WINDOW;
	return w > MAX_WINDOW ? 0 : (uint32_t)w;
}

static size_t shard_bytes(uint32_t window, int timed)
{
	return sizeof(struct pct_shard) +
	       (size_t)window * (sizeof(uint16_t) + (timed ? sizeof(uint64_t) : 0));
}

static struct pct_shard *shard_create(uint32_t window, int timed)
{
	struct pct_shard *s = rtt_zalloc_aligned(sizeof *s);
	if (!s)
		return NULL;
	s->ring_bucket = calloc(window, sizeof *s->ring_bucket);
	s->ring_time = timed ? calloc(window, sizeof *s->ring_time) : NULL;
	if (!s->ring_bucket || (timed && !s->ring_time)) {
		free(s->ring_bucket);
		free(s->ring_time);
		free(s);
		return NULL;
	}
	return s;
}

static int stages_create(struct retrace_percentile *p, int timed)
{
	p->stage = rtt_zalloc_aligned(MAX_STAGES * sizeof *p->stage);
	if (!p->stage)
		return -1;
	for (unsigned int i = 0; i < MAX_STAGES; i++) {
		p->stage[i].bucket = calloc(p->batch, sizeof *p->stage[i].bucket);
		p->stage[i].time = timed ? calloc(p->batch, sizeof *p->stage[i].time)
					 : NULL;
		if (!p->stage[i].bucket || (timed && !p->stage[i].time))
			return -1;
	}
	return 0;
}

static void stages_destroy(struct retrace_percentile *p)
{
	if (!p->stage)
		return;
	for (unsigned int i = 0; i < MAX_STAGES; i++) {
		free(p->stage[i].bucket);
		free(p->stage[i].time);
	}
	free(p->stage);
}

struct retrace_percentile *retrace_percentile_create(
	const struct retrace_percentile_config *cfg)
{
	if (!cfg || !(cfg->percentile > 0.0 && cfg->percentile < 100.0))
		return NULL;
	double tail = 1.0 - cfg->percentile / 100.0;
	uint32_t window = window_for(cfg, tail);
	if (window == 0)
		return NULL;
	/* Default: one window per thread (batch mode exists to share one). */
	unsigned int shards = cfg->shards ? cfg->shards
			    : cfg->batch ? 1u
					 : rtt_default_shards(shard_bytes(window, cfg->window_ns != 0));
	if (shards > MAX_SHARDS)
		return NULL;

	struct retrace_percentile *p =
		calloc(1, sizeof *p + shards * sizeof p->shard[0]);
	if (!p)
		return NULL;
	p->trigger_id = cfg->trigger_id;
	rtt_default_name(cfg->trigger_id, "percentile", cfg->percentile);
	p->window = window;
	p->window_ns = cfg->window_ns;
	/* Rounded up so that n * tail_q32 >> 32 is floor(n (1-p)) even where
	 * n (1-p) is an integer that 1-p cannot represent exactly. */
	p->tail_q32 = (uint64_t)ceil(tail * 4294967296.0);
	p->min_samples = cfg->min_samples ? cfg->min_samples
					  : (uint32_t)ceil_tolerant(1.0 / tail);
	p->shards = shards;
	p->sink = cfg->sink;
	if (cfg->batch > MAX_BATCH || cfg->batch == 1) {
		free(p);
		return NULL;
	}
	p->batch = cfg->batch;
	if (p->batch && stages_create(p, cfg->window_ns != 0) != 0) {
		retrace_percentile_destroy(p);
		return NULL;
	}
	for (unsigned int i = 0; i < shards; i++) {
		p->shard[i] = shard_create(window, cfg->window_ns != 0);
		if (!p->shard[i]) {
			retrace_percentile_destroy(p);
			return NULL;
		}
	}
	return p;
}

void retrace_percentile_destroy(struct retrace_percentile *p)
{
	if (!p)
		return;
	stages_destroy(p);
	for (unsigned int i = 0; i < p->shards; i++) {
		if (!p->shard[i])
			continue;
		free(p->shard[i]->ring_bucket);
		free(p->shard[i]->ring_time);
		free(p->shard[i]);
	}
	free(p);
}

uint64_t retrace_percentile_threshold(struct retrace_percentile *p)
{
	struct pct_shard *s = my_shard(p);
	uint64_t theta;

	rtt_lock(&s->lock);
	if (p->window_ns)
		expire_old(p, s, rtt_coarse_ns());
	theta = s->count ? bucket_max_value(s->top) : UINT64_MAX;
	rtt_unlock(&s->lock);
	return theta;
}

/*
 * The union's k-th largest: walk the buckets down from the top through the OR
 * of the shards' occupancy words, summing each bucket's count over the shards,
 * until k samples are covered. Every shard is locked (in index order) so the
 * union is one consistent snapshot; adders hold one shard lock at a time, so
 * the order cannot deadlock.
 */
uint64_t retrace_percentile_merged_threshold(struct retrace_percentile *p)
{
	uint64_t now = p->window_ns ? rtt_coarse_ns() : 0;
	uint64_t n = 0, covered = 0, theta = UINT64_MAX;

	retrace_percentile_flush(p);
	for (unsigned int i = 0; i < p->shards; i++) {
		rtt_lock(&p->shard[i]->lock);
		if (p->window_ns)
			expire_old(p, p->shard[i], now);
		n += p->shard[i]->count;
	}
	if (n > 0) {
		/* rank_from_top in 128 bits: 256 shards of 2^28 pass 2^32 samples. */
		uint64_t k = (uint64_t)(((unsigned __int128)n * p->tail_q32) >> 32);
		k = k ? k : 1u;
		for (uint32_t w = OCC_WORDS; w-- > 0 && theta == UINT64_MAX;) {
			uint64_t bits = 0;
			for (unsigned int i = 0; i < p->shards; i++)
				bits |= p->shard[i]->occupied[w];
			while (bits) {
				uint32_t bit = 63u - (uint32_t)__builtin_clzll(bits);
				uint32_t b = (w << 6) + bit;
				bits &= ~(1ull << bit);
				for (unsigned int i = 0; i < p->shards; i++)
					covered += p->shard[i]->counts[b];
				if (covered >= k) {
					theta = bucket_max_value(b);
					break;
				}
			}
		}
	}
	for (unsigned int i = p->shards; i-- > 0;)
		rtt_unlock(&p->shard[i]->lock);
	return theta;
}

unsigned int retrace_percentile_shards(const struct retrace_percentile *p)
{
	return p->shards;
}

void retrace_percentile_stats(struct retrace_percentile *p,
			      struct retrace_trigger_stats *out)
{
	*out = (struct retrace_trigger_stats){0};
	retrace_percentile_flush(p);
	for (unsigned int i = 0; i < p->shards; i++) {
		struct pct_shard *s = p->shard[i];
		rtt_lock(&s->lock);
		out->samples += s->stats.samples;
		out->fired += s->stats.fired;
		out->fire_errors += s->stats.fire_errors;
		rtt_unlock(&s->lock);
	}
}

/* ----------------------------------------------------------- checking ---- */

static int shard_consistent(const struct retrace_percentile *p,
			    const struct pct_shard *s)
{
	uint64_t total = 0, above = 0;
	uint32_t ring_counts_ok = 1;

	for (uint32_t b = 0; b < BUCKETS; b++) {
		int bit = (s->occupied[b >> 6] >> (b & 63u)) & 1u;
		if (bit != (s->counts[b] != 0))
			return 0;
		total += s->counts[b];
		if (b > s->top)
			above += s->counts[b];
	}
	for (uint32_t w = 0; w < OCC_WORDS; w++) {
		int bit = (s->summary[w >> 6] >> (w & 63u)) & 1u;
		if (bit != (s->occupied[w] != 0))
			return 0;
	}
	if (total != s->count || above != s->above || s->count > p->window)
		return 0;
	if (s->count) {
		uint32_t k = rank_from_top(p, s->count);
		if (!(s->above < k && k <= s->above + s->counts[s->top]))
			return 0;
	}
	/* The ring holds exactly the histogram's samples. */
	uint32_t *seen = calloc(BUCKETS, sizeof *seen);
	if (!seen)
		return 0;
	for (uint32_t i = 0; i < s->count; i++) {
		uint32_t at = (s->head + i) % p->window;
		seen[s->ring_bucket[at]]++;
	}
	for (uint32_t b = 0; b < BUCKETS; b++)
		if (seen[b] != s->counts[b])
			ring_counts_ok = 0;
	free(seen);
	return ring_counts_ok;
}

int retrace_percentile_selfcheck(struct retrace_percentile *p)
{
	int ok = 1;
	retrace_percentile_flush(p);
	for (unsigned int i = 0; i < p->shards; i++) {
		rtt_lock(&p->shard[i]->lock);
		ok &= shard_consistent(p, p->shard[i]);
		rtt_unlock(&p->shard[i]->lock);
	}
	return ok ? 0 : -1;
}
