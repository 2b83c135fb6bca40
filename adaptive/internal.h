/* internal.h — the draws shared by rng.c and the learner; not part of the API. */
#ifndef RETRACE_ADAPTIVE_INTERNAL_H
#define RETRACE_ADAPTIVE_INTERNAL_H

#include "adaptive.h"

#include <math.h>

/* A Gamma(shape) sampler with its constants computed once (per policy run). */
typedef struct rt_adapt_gamma_prep {
	double d, c;   /* Marsaglia–Tsang constants of max(shape, shape + 1) */
	double inv;    /* 1/shape when shape < 1 (the U^(1/shape) boost), else 0 */
} rt_adapt_gamma_prep;

static inline void rt_adapt_gamma_prepare(rt_adapt_gamma_prep *p, double shape)
{
	double a = shape < 1.0 ? shape + 1.0 : shape;
	p->d = a - 1.0 / 3.0;
	p->c = 1.0 / sqrt(9.0 * p->d);
	p->inv = shape < 1.0 ? 1.0 / shape : 0.0;
}

static inline uint64_t rt_adapt_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* xoshiro256** step. */
static inline uint64_t rt_adapt_next_inline(rt_adapt_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rt_adapt_rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rt_adapt_rotl(s[3], 45);
	return result;
}

/* (k + 0.5) / 2^53: strictly inside (0, 1), so a log never sees 0. */
static inline double rt_adapt_uniform_inline(rt_adapt_rng *r)
{
	return ((double)(rt_adapt_next_inline(r) >> 11) + 0.5) * 0x1.0p-53;
}

/* Marsaglia's polar method: a pair per log + sqrt, the second kept. */
static inline double rt_adapt_normal_inline(rt_adapt_rng *r)
{
	if (r->has_spare) {
		r->has_spare = false;
		return r->spare_normal;
	}
	double u, v, s;
	do {
		u = 2.0 * rt_adapt_uniform_inline(r) - 1.0;
		v = 2.0 * rt_adapt_uniform_inline(r) - 1.0;
		s = u * u + v * v;
	} while (s >= 1.0 || s == 0.0);
	double m = sqrt(-2.0 * log(s) / s);
	r->spare_normal = v * m;
	r->has_spare = true;
	return u * m;
}

/*
 * Marsaglia–Tsang ziggurat for N(0, 1), 128 layers: one 64-bit draw and one
 * multiply ~99 % of the time (the polar method needs a log and a sqrt per pair,
 * which made the policy's Gamma draws twice as slow). The tables are built once
 * per learner (rt_adapt_zig_init), never global.
 */
typedef struct rt_adapt_zig {
	uint32_t kn[128];
	double wn[128], fn[128];
} rt_adapt_zig;

void rt_adapt_zig_init(rt_adapt_zig *z);

static inline double rt_adapt_zig_normal(rt_adapt_rng *r, const rt_adapt_zig *z)
{
	const double tail = 3.442619855899;
	for (;;) {
		uint64_t u = rt_adapt_next_inline(r);
		uint32_t iz = (uint32_t)u & 127u;
		int32_t hz = (int32_t)(uint32_t)(u >> 32);
		int64_t ahz = hz < 0 ? -(int64_t)hz : hz;
		double x = hz * z->wn[iz];
		if (ahz < (int64_t)z->kn[iz])
			return x;
		if (iz == 0) { /* the tail beyond the base layer */
			double xt, y;
			do {
				xt = -log(((double)(rt_adapt_next_inline(r) >> 11) + 0.5) * 0x1.0p-53) / tail;
				y = -log(((double)(rt_adapt_next_inline(r) >> 11) + 0.5) * 0x1.0p-53);
			} while (y + y < xt * xt);
			return hz > 0 ? tail + xt : -tail - xt;
		}
		double uw = ((double)(rt_adapt_next_inline(r) >> 11) + 0.5) * 0x1.0p-53;
		if (z->fn[iz] + uw * (z->fn[iz - 1] - z->fn[iz]) < exp(-0.5 * x * x))
			return x;
	}
}

static inline double rt_adapt_gamma_draw(rt_adapt_rng *r, const rt_adapt_gamma_prep *p,
					 const rt_adapt_zig *z)
{
	double g;
	for (;;) {
		double x, v;
		do {
			x = z ? rt_adapt_zig_normal(r, z) : rt_adapt_normal_inline(r);
			v = 1.0 + p->c * x;
		} while (v <= 0.0);
		v = v * v * v;
		double u = rt_adapt_uniform_inline(r);
		double x2 = x * x;
		if (u < 1.0 - 0.0331 * x2 * x2 ||
		    log(u) < 0.5 * x2 + p->d * (1.0 - v + log(v))) {
			g = p->d * v;
			break;
		}
	}
	if (p->inv > 0.0)
		g *= pow(rt_adapt_uniform_inline(r), p->inv);
	return g;
}

#endif
