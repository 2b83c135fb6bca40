/* quantiles.c — streaming quantile estimates per 64-bit key.
 *
 * Each key owns one P² estimator (Jain & Chlamtac 1985): five markers whose heights
 * are adjusted by piecewise-parabolic interpolation as samples arrive, O(1) time and
 * 5 doubles of state per key, no sample storage. Keys live in an open-addressing hash
 * table (linear probing, power-of-two size, grown at 50 % load); keys are never
 * removed because the set of (service, operation) pairs of an application is small.
 */
#include "internal.h"
#include "select.h"

#include <math.h>
#include <stdlib.h>

typedef struct p2 {
	uint64_t key;
	uint64_t count;
	double h[5];  /* marker heights */
	double n[5];  /* marker positions (1-based) */
	double np[5]; /* desired positions */
	bool used;
} p2;

struct rt_sel_quantiles {
	double q;
	p2 *slots;
	size_t cap, used;
};

rt_sel_quantiles *rt_sel_quantiles_create(double q)
{
	rt_sel_quantiles *qs = calloc(1, sizeof *qs);
	if (!qs)
		return NULL;
	qs->q = q;
	qs->cap = 64;
	qs->slots = calloc(qs->cap, sizeof *qs->slots);
	if (!qs->slots) {
		free(qs);
		return NULL;
	}
	return qs;
}

void rt_sel_quantiles_destroy(rt_sel_quantiles *qs)
{
	if (!qs)
		return;
	free(qs->slots);
	free(qs);
}

static p2 *find_slot(p2 *slots, size_t cap, uint64_t key)
{
	/* Fibonacci hashing: one multiply, the top bits pick the slot */
	size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
	while (slots[i].used && slots[i].key != key)
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

static int grow_table(rt_sel_quantiles *qs)
{
	size_t ncap = qs->cap * 2;
	p2 *ns = calloc(ncap, sizeof *ns);
	if (!ns)
		return -1;
	for (size_t i = 0; i < qs->cap; i++)
		if (qs->slots[i].used)
			*find_slot(ns, ncap, qs->slots[i].key) = qs->slots[i];
	free(qs->slots);
	qs->slots = ns;
	qs->cap = ncap;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double parabolic(const p2 *e, int i, double d)
{
	return e->h[i] + d / (e->n[i + 1] - e->n[i - 1]) *
				 ((e->n[i] - e->n[i - 1] + d) * (e->h[i + 1] - e->h[i]) /
					  (e->n[i + 1] - e->n[i]) +
				  (e->n[i + 1] - e->n[i] - d) * (e->h[i] - e->h[i - 1]) /
					  (e->n[i] - e->n[i - 1]));
}

static double linear(const p2 *e, int i, int d)
{
	return e->h[i] + d * (e->h[i + d] - e->h[i]) / (e->n[i + d] - e->n[i]);
}

static void p2_init(p2 *e, double q)
{
	qsort(e->h, 5, sizeof e->h[0], cmp_double);
	for (int i = 0; i < 5; i++)
		e->n[i] = i + 1;
	e->np[0] = 1;
	e->np[1] = 1 + 2 * q;
	e->np[2] = 1 + 4 * q;
	e->np[3] = 3 + 2 * q;
	e->np[4] = 5;
}

static void p2_add(p2 *e, double q, double x)
{
	if (e->count < 5) {
		e->h[e->count++] = x;
		if (e->count == 5)
			p2_init(e, q);
		return;
	}
	e->count++;
	/* cell k of x among the sorted heights, extremes widened; written without
     * data-dependent branches (same arithmetic: adding 0.0 leaves a position as is) */
	e->h[0] = x < e->h[0] ? x : e->h[0];
	e->h[4] = x > e->h[4] ? x : e->h[4];
	int k = (x >= e->h[1]) + (x >= e->h[2]) + (x >= e->h[3]);
	for (int i = 1; i < 5; i++)
		e->n[i] += i > k ? 1.0 : 0.0;
	const double dn[5] = { 0, q / 2, q, (1 + q) / 2, 1 };
	for (int i = 0; i < 5; i++)
		e->np[i] += dn[i];
	for (int i = 1; i < 4; i++) {
		double d = e->np[i] - e->n[i];
		if ((d >= 1 && e->n[i + 1] - e->n[i] > 1) ||
		    (d <= -1 && e->n[i - 1] - e->n[i] < -1)) {
			int s = d >= 0 ? 1 : -1;
			double h = parabolic(e, i, s);
			if (!(e->h[i - 1] < h && h < e->h[i + 1]))
				h = linear(e, i, s);
			e->h[i] = h;
			e->n[i] += s;
		}
	}
}

void rt_sel_quantiles_add(rt_sel_quantiles *qs, uint64_t key, double x)
{
	if (isnan(x))
		return;
	if ((qs->used + 1) * 2 > qs->cap && grow_table(qs))
		return; /* out of memory: drop the sample, estimates stay valid */
	p2 *e = find_slot(qs->slots, qs->cap, key);
	if (!e->used) {
		e->used = true;
		e->key = key;
		qs->used++;
	}
	p2_add(e, qs->q, x);
}

double rt_sel_quantiles_get(const rt_sel_quantiles *qs, uint64_t key)
{
	const p2 *e = find_slot(qs->slots, qs->cap, key);
	if (!e->used || e->count < 5)
		return -1.0;
	return e->h[2];
}
