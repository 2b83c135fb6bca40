/* original.c — the original Gleaner algorithm, reimplemented from the paper's
 * description as an evaluation baseline (docs/selection.md "The original algorithm").
 *
 * It sees traces in batches (the paper's prototype buffers ~4000) and remembers
 * nothing between them. In a batch: the per-minute p90 table is built over the batch;
 * every trace becomes the paper's event-pair set (paper.c) with an anomaly score
 * A = 5·failed spans + WARN logs + 2·ERROR logs + Σ latency tiers of its spans;
 * traces are grouped by the *name of their root span*; the budget is split across
 * groups by the same water-filling quota as the selector, groups with an error trace
 * in the batch alarmed; inside a group over quota the fast greedy DPP runs over the
 * group's distinct patterns with kernel L_ij = A_i A_j J(i,j) — the raw score as
 * quality, so a trace without anomaly has quality 0 and zero gain — and whatever the
 * DPP leaves of the quota is filled uniformly at random from the group's other traces.
 */
#include "internal.h"
#include "paper_internal.h"
#include "select.h"

#include <stdlib.h>

typedef struct orig_trace {
	uint64_t group, pattern;
	size_t off, len; /* pairs in the batch arena */
	double score;
	uint32_t index;
	bool error;
} orig_trace;

typedef struct orig_batch {
	orig_trace *t;
	uint64_t *arena;
	size_t arena_len, arena_cap;
	const orig_trace **rep; /* per group: one trace per distinct pattern */
} orig_batch;

static int by_group_pattern_score(const void *x, const void *y)
{
	const orig_trace *a = x, *b = y;
	if (a->group != b->group)
		return a->group < b->group ? -1 : 1;
	if (a->pattern != b->pattern)
		return a->pattern < b->pattern ? -1 : 1;
	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	return a->index < b->index ? -1 : a->index > b->index;
}

static double original_score(const rt_sel_trace *t, const rt_sel_paper_p90 *p90, bool *error)
{
	double a = 0;
	*error = false;
	for (uint32_t i = 0; i < t->n_spans; i++) {
		a += 5.0 * t->spans[i].error + rt_sel_paper_tier(p90, &t->spans[i]);
		*error |= t->spans[i].error;
	}
	for (uint32_t l = 0; l < t->n_logs; l++) {
		a += t->logs[l].level == RT_SEL_LOG_WARN    ? 1.0
		     : t->logs[l].level >= RT_SEL_LOG_ERROR ? 2.0
							    : 0.0;
		*error |= t->logs[l].level >= RT_SEL_LOG_ERROR;
	}
	return a;
}

/* Root span name: the grouping of the original (the service is not part of it). */
static uint64_t root_name_group(const rt_sel_trace *t)
{
	int32_t r = rt_sel_trace_root(t);
	return r < 0 ? 0 : rt_sel_op_key("", t->spans[r].operation);
}

static int describe(orig_batch *b, const rt_sel_trace *traces, size_t n,
		    const rt_sel_paper_p90 *p90)
{
	uint64_t *buf = NULL;
	size_t cap = 0;
	for (size_t i = 0; i < n; i++) {
		size_t k = rt_sel_paper_pairs(&traces[i], p90, &buf, &cap);
		if (k == (size_t)-1 || rt_sel_grow((void **)&b->arena, &b->arena_cap,
						   b->arena_len + k, sizeof *b->arena)) {
			free(buf);
			return -1;
		}
		if (k) /* a trace of one bare span has no pairs (and buf may still be NULL) */
			memcpy(b->arena + b->arena_len, buf, k * sizeof *buf);
		orig_trace *o = &b->t[i];
		o->off = b->arena_len;
		o->len = k;
		b->arena_len += k;
		o->pattern = rt_sel_pattern_id(buf, k);
		o->group = root_name_group(&traces[i]);
		o->score = original_score(&traces[i], p90, &o->error);
		o->index = (uint32_t)i;
	}
	free(buf);
	return 0;
}

typedef struct sim_ctx {
	const orig_batch *b;
	const orig_trace **rep;
} sim_ctx;

static double jaccard_cb(void *ctx, size_t i, size_t j)
{
	const sim_ctx *c = ctx;
	if (i == j)
		return 1.0;
	const orig_trace *a = c->rep[i], *o = c->rep[j];
	return rt_sel_jaccard(c->b->arena + a->off, a->len, c->b->arena + o->off, o->len);
}

/* DPP over the group's distinct patterns (best-scored representative), then random fill. */
static int pick_in_group(orig_batch *b, const orig_trace *m, size_t size, size_t quota,
			 uint64_t *rng, bool *kept)
{
	if (quota >= size) {
		for (size_t i = 0; i < size; i++)
			kept[m[i].index] = true;
		return 0;
	}
	size_t nrep = 0;
	for (size_t i = 0; i < size; i++)
		if (i == 0 || m[i].pattern != m[i - 1].pattern)
			b->rep[nrep++] = &m[i];
	double *quality = malloc(nrep * sizeof *quality);
	size_t *picked = malloc(nrep * sizeof *picked);
	size_t *open = malloc(size * sizeof *open);
	int rc = -1;
	if (!quality || !picked || !open)
		goto out;
	for (size_t r = 0; r < nrep; r++)
		quality[r] = b->rep[r]->score;
	sim_ctx ctx = { b, b->rep };
	size_t k = rt_sel_dpp_greedy(nrep, quality, jaccard_cb, &ctx, quota, 1e-6, picked);
	if (k == (size_t)-1)
		goto out;
	for (size_t p = 0; p < k; p++)
		kept[b->rep[picked[p]]->index] = true;
	size_t nopen = 0;
	for (size_t i = 0; i < size; i++)
		if (!kept[m[i].index])
			open[nopen++] = m[i].index;
	for (size_t want = quota - k; want > 0 && nopen > 0; want--) {
		size_t j = rt_sel_rand(rng) % nopen;
		kept[open[j]] = true;
		open[j] = open[--nopen];
	}
	rc = 0;
out:
	free(quality);
	free(picked);
	free(open);
	return rc;
}

int rt_sel_original_select_batch(rt_sel_trace *traces, size_t n, size_t budget,
				 bool alarm_on_errors, uint64_t *rng, bool *kept)
{
	for (size_t i = 0; i < n; i++)
		kept[i] = false;
	if (n == 0)
		return 0;
	rt_sel_paper_p90 p90;
	if (rt_sel_paper_p90_build(traces, n, &p90))
		return -1;
	orig_batch b = { .t = calloc(n, sizeof *b.t), .rep = malloc(n * sizeof *b.rep) };
	size_t *start = malloc((n + 1) * sizeof *start), *sizes = malloc(n * sizeof *sizes);
	size_t *quota = malloc(n * sizeof *quota);
	bool *alarmed = calloc(n, sizeof *alarmed);
	int rc = -1;
	if (!b.t || !b.rep || !start || !sizes || !quota || !alarmed ||
	    describe(&b, traces, n, &p90))
		goto out;
	qsort(b.t, n, sizeof *b.t, by_group_pattern_score);
	size_t ng = 0;
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || b.t[i].group != b.t[i - 1].group)
			start[ng++] = i;
		alarmed[ng - 1] |= alarm_on_errors && b.t[i].error;
	}
	start[ng] = n;
	for (size_t g = 0; g < ng; g++)
		sizes[g] = start[g + 1] - start[g];
	rt_sel_quota(sizes, alarmed, ng, budget, 3.0, 0.5, quota);
	for (size_t g = 0; g < ng; g++)
		if (quota[g] && pick_in_group(&b, b.t + start[g], sizes[g], quota[g], rng, kept))
			goto out;
	rc = 0;
out:
	rt_sel_paper_p90_free(&p90);
	free(b.t);
	free(b.rep);
	free(b.arena);
	free(start);
	free(sizes);
	free(quota);
	free(alarmed);
	return rc;
}
