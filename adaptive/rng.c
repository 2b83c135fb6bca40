/*
 * rng.c — the learner's own random generator and the draws ABS needs.
 *
 * xoshiro256** (seeded through splitmix64, so any 64-bit seed gives a good
 * state) makes the bits; uniforms take the top 53 bits, shifted off zero so a
 * log never sees 0. Normals come in pairs from Marsaglia's polar method (one
 * log and one sqrt per pair, the second kept for the next call); the learner's
 * hot loop uses a ziggurat instead (tables per learner, built here). Gamma(a) is
 * Marsaglia–Tsang: for a >= 1 one normal and one uniform per try, accepted
 * ~98 % of the time by the cheap squeeze without a log; for a < 1 it draws
 * Gamma(a + 1) and scales by U^(1/a). Beta(a, b) = X / (X + Y) with
 * X ~ Gamma(a), Y ~ Gamma(b). All state lives in the rt_adapt_rng the caller owns.
 */
#include "internal.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void rt_adapt_rng_seed(rt_adapt_rng *r, uint64_t seed)
{
	uint64_t x = seed;
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
	r->has_spare = false;
	r->spare_normal = 0.0;
}

uint64_t rt_adapt_rng_next(rt_adapt_rng *r)
{
	return rt_adapt_next_inline(r);
}

double rt_adapt_rng_uniform(rt_adapt_rng *r)
{
	return rt_adapt_uniform_inline(r);
}

double rt_adapt_rng_normal(rt_adapt_rng *r)
{
	return rt_adapt_normal_inline(r);
}

double rt_adapt_rng_gamma(rt_adapt_rng *r, double shape)
{
	if (!(shape > 0.0) || !isfinite(shape))
		return 0.0;
	rt_adapt_gamma_prep p;
	rt_adapt_gamma_prepare(&p, shape);
	return rt_adapt_gamma_draw(r, &p, NULL);
}

double rt_adapt_rng_beta(rt_adapt_rng *r, double a, double b)
{
	double x = rt_adapt_rng_gamma(r, a);
	double y = rt_adapt_rng_gamma(r, b);
	double s = x + y;
	return s > 0.0 ? x / s : 0.5;
}

/* Marsaglia & Tsang (2000): layer edges of equal area v under exp(-x^2/2),
 * from the tail edge r = 3.4426... inward; kn holds the accept bounds scaled to
 * 2^31, wn the scale back, fn the density at each edge. */
void rt_adapt_zig_init(rt_adapt_zig *z)
{
	const double m1 = 2147483648.0;
	const double vn = 9.91256303526217e-3;
	double dn = 3.442619855899, tn = dn;
	double q = vn / exp(-0.5 * dn * dn);
	z->kn[0] = (uint32_t)((dn / q) * m1);
	z->kn[1] = 0;
	z->wn[0] = q / m1;
	z->wn[127] = dn / m1;
	z->fn[0] = 1.0;
	z->fn[127] = exp(-0.5 * dn * dn);
	for (int i = 126; i >= 1; i--) {
		dn = sqrt(-2.0 * log(vn / dn + exp(-0.5 * dn * dn)));
		z->kn[i + 1] = (uint32_t)((dn / tn) * m1);
		tn = dn;
		z->fn[i] = exp(-0.5 * dn * dn);
		z->wn[i] = dn / m1;
	}
}
