/*
 * tests/common/rng.h — a small deterministic generator for tests that draw
 * random inputs (xorshift64): the same seed gives the same run, so a failure
 * can be replayed.
 */
#ifndef RETRACE_TESTS_RNG_H
#define RETRACE_TESTS_RNG_H

#include <stdint.h>

/* A number in [0, n) from *state (non-zero). */
static inline unsigned test_pick(uint64_t *state, unsigned n)
{
	uint64_t x = *state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return (unsigned)(x % n);
}

#endif
