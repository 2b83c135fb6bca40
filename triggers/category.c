/*
 * category.c — Category(f): fire for labels rarer than fraction f of recent
 * samples, in bounded memory whatever the number of distinct labels.
 *
 * Counts live in a count-min sketch of DEPTH rows; a label's estimate is the
 * minimum of its DEPTH counters, which never underestimates. Conservative update
 * (raise only the counters equal to the minimum) keeps the overestimate small.
 * The width is a power of two >= e / (f/10), so with probability >= 1 - e^-DEPTH
 * the overestimate is under f/10 of the total.
 *
 * Recency: every `window` samples all counters and the total are halved, so a
 * sample's weight decays by half per window and the total stays between
 * `window` and 2 * `window` once warmed up. The halving pass touches every
 * counter (a few microseconds, once per window), amortised to well under one
 * counter per sample.
 *
 * A sample is judged before it is counted: it fires if its estimated count is
 * below f * total.
 *
 * Threads: by default every thread feeds its own sketch (a shard; the thread's
 * slot modulo a power-of-two count sized from the CPUs), so threads sharing
 * the trigger touch disjoint cache lines and a sample is judged against the
 * calling thread's recent samples. Readers merge: the shards' counters add up
 * row by row (a sum of count-min sketches with the same hashes is the sketch
 * of the union), so retrace_category_share is the share over all threads.
 * shards = 1 keeps one sketch for all threads. Each shard is guarded by its
 * spinlock; the sink is called after it is released.
 */
#include <math.h>
#include <stdlib.h>

#include "internal.h"

#define DEPTH 4u
#define MIN_WIDTH 256u
#define MAX_WIDTH (1u << 18)
#define MAX_SHARDS 256u

struct cat_shard {
	_Alignas(RTT_CACHE_LINE) rtt_spinlock lock;
	uint32_t since_halving;
	uint64_t total;     /* decayed sample count */
	uint64_t seen;      /* samples ever (for min_samples) */
	struct retrace_trigger_stats stats;
	uint32_t *counters; /* DEPTH rows of width_mask + 1 */
};

struct retrace_category {
	uint32_t trigger_id;
	uint32_t width_mask;
	uint32_t window;
	uint32_t min_samples;
	uint64_t f_q32;     /* f * 2^32 */
	struct retrace_fire_sink sink;
	unsigned int shards;
	struct cat_shard *shard[];
};

static inline uint64_t mix64(uint64_t z)
{
	z += 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Row r's counter for a label: double hashing h1 + r*h2 (Kirsch–Mitzenmacher).
 * Every shard uses the same slots, which is what lets their counters add up. */
static inline void counter_slots(const struct retrace_category *c, uint64_t label,
				 uint32_t *slot)
{
	uint64_t h = mix64(label);
	uint32_t h1 = (uint32_t)h, h2 = (uint32_t)(h >> 32) | 1u;
	uint32_t row_size = c->width_mask + 1u;
	for (uint32_t r = 0; r < DEPTH; r++)
		slot[r] = r * row_size + ((h1 + r * h2) & c->width_mask);
}

static inline uint32_t estimate(const struct cat_shard *s, const uint32_t *slot)
{
	uint32_t m = s->counters[slot[0]];
	for (uint32_t r = 1; r < DEPTH; r++)
		if (s->counters[slot[r]] < m)
			m = s->counters[slot[r]];
	return m;
}

static void halve_all(const struct retrace_category *c, struct cat_shard *s)
{
	size_t n = (size_t)DEPTH * (c->width_mask + 1u);
	for (size_t i = 0; i < n; i++)
		s->counters[i] >>= 1;
	s->total >>= 1;
	s->since_halving = 0;
}

static inline void count_label(const struct retrace_category *c, struct cat_shard *s,
			       const uint32_t *slot, uint32_t est)
{
	for (uint32_t r = 0; r < DEPTH; r++)
		if (s->counters[slot[r]] == est)
			s->counters[slot[r]] = est + 1u;
	s->total++;
	s->seen++;
	if (++s->since_halving >= c->window)
		halve_all(c, s);
}

static inline struct cat_shard *my_shard(struct retrace_category *c)
{
	return c->shards == 1 ? c->shard[0] : c->shard[rtt_shard_index(c->shards)];
}

int retrace_category_add(struct retrace_category *c, retrace_trace_id id,
			 uint64_t label)
{
	struct cat_shard *s = my_shard(c);
	uint32_t slot[DEPTH];
	int fire;

	counter_slots(c, label, slot);
	rtt_lock(&s->lock);
	uint32_t est = estimate(s, slot);
	fire = s->seen >= c->min_samples &&
	       ((uint64_t)est << 32) < c->f_q32 * s->total;
	count_label(c, s, slot, est);
	s->stats.samples++;
	s->stats.fired += (uint64_t)fire;
	rtt_unlock(&s->lock);

	if (!fire)
		return 0;
	if (rtt_fire(&c->sink, id, c->trigger_id, NULL, 0) < 0) {
		rtt_lock(&s->lock);
		s->stats.fire_errors++;
		rtt_unlock(&s->lock);
	}
	return 1;
}

/* Merged over the shards: per row the sum of the shards' counters, then the
 * minimum over rows, against the sum of the totals. */
double retrace_category_share(struct retrace_category *c, uint64_t label)
{
	uint32_t slot[DEPTH];
	uint64_t row_sum[DEPTH] = {0}, total = 0;

	counter_slots(c, label, slot);
	for (unsigned int i = 0; i < c->shards; i++) {
		struct cat_shard *s = c->shard[i];
		rtt_lock(&s->lock);
		for (uint32_t r = 0; r < DEPTH; r++)
			row_sum[r] += s->counters[slot[r]];
		total += s->total;
		rtt_unlock(&s->lock);
	}
	uint64_t est = row_sum[0];
	for (uint32_t r = 1; r < DEPTH; r++)
		if (row_sum[r] < est)
			est = row_sum[r];
	return total ? (double)est / (double)total : 0.0;
}

void retrace_category_stats(struct retrace_category *c,
			    struct retrace_trigger_stats *out)
{
	*out = (struct retrace_trigger_stats){0};
	for (unsigned int i = 0; i < c->shards; i++) {
		struct cat_shard *s = c->shard[i];
		rtt_lock(&s->lock);
		out->samples += s->stats.samples;
		out->fired += s->stats.fired;
		out->fire_errors += s->stats.fire_errors;
		rtt_unlock(&s->lock);
	}
}

unsigned int retrace_category_shards(const struct retrace_category *c)
{
	return c->shards;
}

static uint32_t width_for(double f)
{
	double want = ceil(exp(1.0) / (f / 10.0));
	uint32_t w = MIN_WIDTH;
	while (w < want && w < MAX_WIDTH)
		w <<= 1;
	return w;
}

static struct cat_shard *shard_create(uint32_t width)
{
	struct cat_shard *s = rtt_zalloc_aligned(sizeof *s);
	if (!s)
		return NULL;
	s->counters = calloc((size_t)DEPTH * width, sizeof *s->counters);
	if (!s->counters) {
		free(s);
		return NULL;
	}
	return s;
}

struct retrace_category *retrace_category_create(
	const struct retrace_category_config *cfg)
{
	if (!cfg || !(cfg->fraction > 0.0 && cfg->fraction <= 0.5) ||
	    cfg->shards > MAX_SHARDS)
		return NULL;
	double window = cfg->window ? cfg->window : ceil(100.0 / cfg->fraction);
	if (window > (double)(1u << 30))
		return NULL;

	uint32_t width = width_for(cfg->fraction);
	unsigned int shards = cfg->shards ? cfg->shards
					  : rtt_default_shards(sizeof(struct cat_shard) +
							       (size_t)DEPTH * width * sizeof(uint32_t));
	struct retrace_category *c = calloc(1, sizeof *c + shards * sizeof c->shard[0]);
	if (!c)
		return NULL;
	c->trigger_id = cfg->trigger_id;
	rtt_default_name(cfg->trigger_id, "category", 0);
	c->width_mask = width - 1u;
	c->window = (uint32_t)window;
	c->min_samples = cfg->min_samples ? cfg->min_samples
					  : (uint32_t)ceil(2.0 / cfg->fraction);
	c->f_q32 = (uint64_t)llround(cfg->fraction * 4294967296.0);
	c->sink = cfg->sink;
	c->shards = shards;
	for (unsigned int i = 0; i < shards; i++) {
		c->shard[i] = shard_create(width);
		if (!c->shard[i]) {
			retrace_category_destroy(c);
			return NULL;
		}
	}
	return c;
}

void retrace_category_destroy(struct retrace_category *c)
{
	if (!c)
		return;
	for (unsigned int i = 0; i < c->shards; i++) {
		if (!c->shard[i])
			continue;
		free(c->shard[i]->counters);
		free(c->shard[i]);
	}
	free(c);
}

uint64_t retrace_label(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}
