/*
 * test_util.h — deterministic random streams and a recording sink for the
 * trigger tests.
 */
#ifndef RETRACE_TESTS_TRIGGERS_TEST_UTIL_H
#define RETRACE_TESTS_TRIGGERS_TEST_UTIL_H

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "retrace/triggers.h"

/* splitmix64: a fast generator with a fixed seed, so failures reproduce. */
static inline uint64_t rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1]. */
static inline double rng_unit(uint64_t *state)
{
	return ((double)(rng_next(state) >> 11) + 1.0) / 9007199254740992.0;
}

static inline uint64_t rng_exponential(uint64_t *state, double mean)
{
	return (uint64_t)(-log(rng_unit(state)) * mean);
}

/* Pareto with scale xm and shape alpha (heavy tail for alpha < 2). */
static inline uint64_t rng_pareto(uint64_t *state, double xm, double alpha)
{
	double v = xm / pow(rng_unit(state), 1.0 / alpha);
	return v > 1e18 ? (uint64_t)1e18 : (uint64_t)v;
}

static inline retrace_trace_id test_id(uint64_t n)
{
	retrace_trace_id id = {0xABCD000000000000ull | n, n + 1};
	return id;
}

#define RECORD_MAX_LATERAL RETRACE_MAX_LATERAL

/* Records every firing; the count is atomic so several threads may fire. */
struct recording_sink {
	atomic_ulong fired;
	retrace_trace_id last_id;
	uint32_t last_trigger;
	size_t last_n_lateral;
	retrace_trace_id last_lateral[RECORD_MAX_LATERAL];
};

static inline int record_fire(void *arg, retrace_trace_id id, uint32_t trigger_id,
			      const retrace_trace_id *lateral, size_t n_lateral)
{
	struct recording_sink *r = (struct recording_sink *)arg;
	atomic_fetch_add(&r->fired, 1);
	r->last_id = id;
	r->last_trigger = trigger_id;
	r->last_n_lateral = n_lateral;
	if (n_lateral)
		memcpy(r->last_lateral, lateral, n_lateral * sizeof *lateral);
	return RETRACE_OK;
}

static inline struct retrace_fire_sink recording(struct recording_sink *r)
{
	struct retrace_fire_sink s = {record_fire, r};
	return s;
}

#endif
