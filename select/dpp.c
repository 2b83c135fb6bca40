/* dpp.c — fast greedy MAP inference for a DPP (Chen, Zhang & Zhou, NeurIPS 2018).
 *
 * Greedy MAP adds, at each step, the item j maximising det(L_{Y∪{j}}), i.e. the
 * largest conditional variance d_j². Instead of recomputing determinants we keep, for
 * every item i, the row c_i of the incremental Cholesky factor: after picking j,
 *     e_i = (L_ji − ⟨c_j, c_i⟩) / d_j,   c_i ← [c_i, e_i],   d_i² ← d_i² − e_i²,
 * which needs one kernel row L_j· (computed on demand from the quality vector and the
 * similarity callback) and O(n·k) work per pick; memory is the n×k factor, never n×n.
 */
#include "select.h"

#include <math.h>
#include <stdlib.h>

static size_t argmax_open(const double *d2, const unsigned char *taken, size_t n)
{
	size_t best = n;
	for (size_t i = 0; i < n; i++)
		if (!taken[i] && (best == n || d2[i] > d2[best]))
			best = i;
	return best;
}

/* Extend every open item's Cholesky row with the newest pick j (pick number t). */
static void update_rows(size_t n, size_t k, const double *quality, rt_sel_sim_fn sim, void *ctx,
			size_t j, size_t t, double *c, double *d2, const unsigned char *taken)
{
	const double dj = sqrt(d2[j]);
	const double *cj = &c[j * k];
	for (size_t i = 0; i < n; i++) {
		if (taken[i])
			continue;
		double *ci = &c[i * k];
		double dot = 0.0;
		for (size_t s = 0; s < t; s++)
			dot += cj[s] * ci[s];
		double lji = quality[j] * quality[i] * sim(ctx, j, i);
		double e = (lji - dot) / dj;
		ci[t] = e;
		d2[i] -= e * e;
	}
}

size_t rt_sel_dpp_greedy(size_t n, const double *quality, rt_sel_sim_fn sim, void *ctx, size_t k,
			 double eps, size_t *picked)
{
	if (k > n)
		k = n;
	if (k == 0)
		return 0;
	double *c = malloc(n * k * sizeof *c);
	double *d2 = malloc(n * sizeof *d2);
	unsigned char *taken = calloc(n, 1);
	if (!c || !d2 || !taken) {
		free(c);
		free(d2);
		free(taken);
		return (size_t)-1;
	}
	for (size_t i = 0; i < n; i++)
		d2[i] = quality[i] * quality[i] * sim(ctx, i, i);
	size_t npick = 0;
	size_t j = argmax_open(d2, taken, n);
	while (j < n && d2[j] >= eps) {
		picked[npick] = j;
		taken[j] = 1;
		if (++npick == k)
			break;
		update_rows(n, k, quality, sim, ctx, j, npick - 1, c, d2, taken);
		j = argmax_open(d2, taken, n);
	}
	free(c);
	free(d2);
	free(taken);
	return npick;
}
