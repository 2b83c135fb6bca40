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
 * below f * total. Threads: one spinlock guards the sketch; the sink is called
 * after it is released.
 */
#include <math.h>
#include <stdlib.h>

#include "internal.h"

#define DEPTH 4u
#define MIN_WIDTH 256u
#define MAX_WIDTH (1u << 18)

struct retrace_category {
	rtt_spinlock lock;
	uint32_t trigger_id;
	uint32_t width_mask;
	uint32_t window;
	uint32_t since_halving;
	uint32_t min_samples;
	uint64_t total;     /* decayed sample count */
	uint64_t seen;      /* samples ever (for min_samples) */
	uint64_t f_q32;     /* f * 2^32 */
	struct retrace_trigger_stats stats;
	struct retrace_fire_sink sink;
	uint32_t *counters; /* DEPTH rows of width_mask + 1 */
};

static inline uint64_t mix64(uint64_t z)
{
	z += 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Row r's counter for a label: double hashing h1 + r*h2 (Kirsch–Mitzenmacher). */
static inline void counter_slots(const struct retrace_category *c, uint64_t label,
				 uint32_t *slot)
{
	uint64_t h = mix64(label);
	uint32_t h1 = (uint32_t)h, h2 = (uint32_t)(h >> 32) | 1u;
	uint32_t row_size = c->width_mask + 1u;
	for (uint32_t r = 0; r < DEPTH; r++)
		slot[r] = r * row_size + ((h1 + r * h2) & c->width_mask);
}

static inline uint32_t estimate(const struct retrace_category *c, const uint32_t *slot)
{
	uint32_t m = c->counters[slot[0]];
	for (uint32_t r = 1; r < DEPTH; r++)
		if (c->counters[slot[r]] < m)
			m = c->counters[slot[r]];
	return m;
}

static void halve_all(struct retrace_category *c)
{
	size_t n = (size_t)DEPTH * (c->width_mask + 1u);
	for (size_t i = 0; i < n; i++)
		c->counters[i] >>= 1;
	c->total >>= 1;
	c->since_halving = 0;
}

static inline void count_label(struct retrace_category *c, const uint32_t *slot,
			       uint32_t est)
{
	for (uint32_t r = 0; r < DEPTH; r++)
		if (c->counters[slot[r]] == est)
			c->counters[slot[r]] = est + 1u;
	c->total++;
	c->seen++;
	if (++c->since_halving >= c->window)
		halve_all(c);
}

int retrace_category_add(struct retrace_category *c, retrace_trace_id id,
			 uint64_t label)
{
	uint32_t slot[DEPTH];
	int fire;

	counter_slots(c, label, slot);
	rtt_lock(&c->lock);
	uint32_t est = estimate(c, slot);
	fire = c->seen >= c->min_samples &&
	       ((uint64_t)est << 32) < c->f_q32 * c->total;
	count_label(c, slot, est);
	c->stats.samples++;
	c->stats.fired += (uint64_t)fire;
	rtt_unlock(&c->lock);

	if (!fire)
		return 0;
	if (rtt_fire(&c->sink, id, c->trigger_id, NULL, 0) < 0) {
		rtt_lock(&c->lock);
		c->stats.fire_errors++;
		rtt_unlock(&c->lock);
	}
	return 1;
}

double retrace_category_share(struct retrace_category *c, uint64_t label)
{
	uint32_t slot[DEPTH];
	double share;

	counter_slots(c, label, slot);
	rtt_lock(&c->lock);
	share = c->total ? (double)estimate(c, slot) / (double)c->total : 0.0;
	rtt_unlock(&c->lock);
	return share;
}

void retrace_category_stats(struct retrace_category *c,
			    struct retrace_trigger_stats *out)
{
	rtt_lock(&c->lock);
	*out = c->stats;
	rtt_unlock(&c->lock);
}

static uint32_t width_for(double f)
{
	double want = ceil(exp(1.0) / (f / 10.0));
	uint32_t w = MIN_WIDTH;
	while (w < want && w < MAX_WIDTH)
		w <<= 1;
	return w;
}

struct retrace_category *retrace_category_create(
	const struct retrace_category_config *cfg)
{
	if (!cfg || !(cfg->fraction > 0.0 && cfg->fraction <= 0.5))
		return NULL;
	double window = cfg->window ? cfg->window : ceil(100.0 / cfg->fraction);
	if (window > (double)(1u << 30))
		return NULL;

	struct retrace_category *c = rtt_zalloc_aligned(sizeof *c);
	if (!c)
		return NULL;
	uint32_t width = width_for(cfg->fraction);
	c->counters = calloc((size_t)DEPTH * width, sizeof *c->counters);
	if (!c->counters) {
		free(c);
		return NULL;
	}
	c->trigger_id = cfg->trigger_id;
	c->width_mask = width - 1u;
	c->window = (uint32_t)window;
	c->min_samples = cfg->min_samples ? cfg->min_samples
					  : (uint32_t)ceil(2.0 / cfg->fraction);
	c->f_q32 = (uint64_t)llround(cfg->fraction * 4294967296.0);
	c->sink = cfg->sink;
	return c;
}

void retrace_category_destroy(struct retrace_category *c)
{
	if (!c)
		return;
	free(c->counters);
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
