/* internal.h — helpers shared by the select/ sources; not part of the public API. */
#ifndef RETRACE_SELECT_INTERNAL_H
#define RETRACE_SELECT_INTERNAL_H

#include "select.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* splitmix64 finaliser: a cheap, well-mixed 64-bit hash step. */
static inline uint64_t rt_sel_mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static inline uint64_t rt_sel_combine(uint64_t a, uint64_t b)
{
	return rt_sel_mix64(a ^ rt_sel_mix64(b + 0x632be59bd9b4e019ull));
}

/* Hash of bytes, 8 at a time (multiply-xorshift per word), then mixed. */
static inline uint64_t rt_sel_hash_bytes(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *s = p;
	uint64_t h = (seed ^ n) * 0x9e3779b97f4a7c15ull;
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, s, 8);
		h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
		s += 8;
		n -= 8;
	}
	uint64_t w = 0;
	memcpy(&w, s, n);
	return rt_sel_mix64(h ^ w);
}

static inline uint64_t rt_sel_hash_str(const char *s, uint64_t seed)
{
	return rt_sel_hash_bytes(s ? s : "", s ? strlen(s) : 0, seed);
}

/* rt_sel_span_key inlined for the per-span loops (a call per span, out of line in
 * encode.c, was ~1 % of the selection). */
static inline uint64_t rt_sel_span_key_fast(const rt_sel_span *s)
{
	return s->op_key ? s->op_key : rt_sel_op_key(s->service, s->operation);
}

/* rt_sel_trace_entry of a trace whose root (rt_sel_trace_root) is known. */
int32_t rt_sel_trace_entry_of_root(const rt_sel_trace *t, int32_t root);

/* rt_sel_anomaly_score of a trace whose duration (rt_sel_trace_duration) and number
 * of failed spans are known: the same sums in the same order, so the same double. */
double rt_sel_anomaly_score_of(const rt_sel_trace *t, const rt_sel_weights *w, double group_p90,
			       uint64_t duration, uint32_t error_spans);

/* Grow *arr (element size elem) so it holds at least need elements. */
int rt_sel_grow(void **arr, size_t *cap, size_t need, size_t elem);

/* xorshift-style PRNG for the random baseline (splitmix64 sequence). */
static inline uint64_t rt_sel_rand(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ull;
	return rt_sel_mix64(*state);
}

#endif
