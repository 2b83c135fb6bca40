/* eval.c — replay a dataset through the selector and two baselines; metrics.
 *
 * Traces (already sorted by start) are cut into windows of window_s seconds of trace
 * time. The traces of a window's newest minute, which its end cuts, wait for the next
 * window (rt_sel_hold_cut_minute, window.c: the coordinator's rule too), so their
 * latency tiers are judged on the whole minute; the last window takes everything.
 * Each window earns rate × the traces it selects of budget credit; the integer part is the
 * window's budget (the fraction carries over), so the kept share tracks the rate even
 * when a window is worth less than one trace. The Gleaner selector and a uniform
 * random sampler get the same budget (the selector's effective budget, which may be
 * scaled up during an incident) in the same run. Then the original algorithm
 * (original.c) runs over the dataset in batches at the same rate. Pattern, score and
 * group of every trace come from the selector, so all samplers are judged on the same
 * labels; the paper metrics are computed from the dataset by one function for all.
 */
#include "internal.h"
#include "paper_internal.h"
#include "select.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct labels {
	uint64_t *pattern, *group, *path;
	double *score;
	bool *has_error, *kept_g, *kept_r, *kept_o; /* kept_r: n per random draw */
	size_t n;
} labels;

/* The samplers' cost is their thread's CPU time: on a shared machine wall time
 * measures the load of the others, not the selector. */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- call paths */

/* Hash of the call tree under span i, siblings deduplicated (parallel fan-out). */
static uint64_t path_hash(const rt_sel_trace *t, uint32_t i, const uint32_t *kids,
			  const uint32_t *kid_start, uint64_t *scratch, unsigned depth)
{
	const rt_sel_span *s = &t->spans[i];
	uint64_t h = rt_sel_span_key(s);
	uint32_t a = kid_start[i], b = kid_start[i + 1];
	if (depth > 256 || a == b)
		return h;
	for (uint32_t k = a; k < b; k++)
		scratch[k] = path_hash(t, kids[k], kids, kid_start, scratch, depth + 1);
	/* order-free, duplicate-free combination: sort then skip repeats */
	for (uint32_t x = a + 1; x < b; x++)
		for (uint32_t y = x; y > a && scratch[y - 1] > scratch[y]; y--) {
			uint64_t tmp = scratch[y];
			scratch[y] = scratch[y - 1];
			scratch[y - 1] = tmp;
		}
	for (uint32_t k = a; k < b; k++)
		if (k == a || scratch[k] != scratch[k - 1])
			h = rt_sel_combine(h, scratch[k]);
	return h;
}

static uint64_t trace_path(const rt_sel_trace *t)
{
	uint32_t n = t->n_spans;
	if (n == 0)
		return 0;
	uint32_t *kid_start = calloc(n + 2, sizeof *kid_start);
	uint32_t *kids = malloc(n * sizeof *kids);
	uint64_t *scratch = malloc(n * sizeof *scratch);
	uint64_t h = 0;
	if (kid_start && kids && scratch) {
		for (uint32_t i = 0; i < n; i++)
			if (t->spans[i].parent >= 0 && (uint32_t)t->spans[i].parent < n)
				kid_start[t->spans[i].parent + 2]++;
		for (uint32_t i = 0; i < n; i++)
			kid_start[i + 2] += kid_start[i + 1];
		for (uint32_t i = 0; i < n; i++)
			if (t->spans[i].parent >= 0 && (uint32_t)t->spans[i].parent < n)
				kids[kid_start[t->spans[i].parent + 1]++] = i;
		int32_t root = rt_sel_trace_root(t);
		h = path_hash(t, (uint32_t)root, kids, kid_start, scratch, 0);
	}
	free(kid_start);
	free(kids);
	free(scratch);
	return h;
}

/* ---------------------------------------------------------------- metrics */

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

/* Distinct values of v[i] over i where mask[i] (or all if mask NULL). */
static size_t distinct(const uint64_t *v, const bool *mask, size_t n, uint64_t *tmp)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!mask || mask[i])
			tmp[k++] = v[i];
	qsort(tmp, k, sizeof *tmp, cmp_u64);
	size_t d = 0;
	for (size_t i = 0; i < k; i++)
		d += i == 0 || tmp[i] != tmp[i - 1];
	return d;
}

static double entropy_bits(const uint64_t *v, const bool *mask, size_t n, uint64_t *tmp)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (mask[i])
			tmp[k++] = v[i];
	qsort(tmp, k, sizeof *tmp, cmp_u64);
	double h = 0.0;
	for (size_t i = 0; i < k;) {
		size_t j = i;
		while (j < k && tmp[j] == tmp[i])
			j++;
		double p = (double)(j - i) / (double)k;
		h -= p * log2(p);
		i = j;
	}
	return h;
}

/* Frequency of each trace's pattern over the whole dataset. */
static void pattern_frequency(const uint64_t *pattern, size_t n, size_t *freq, uint64_t *tmp)
{
	memcpy(tmp, pattern, n * sizeof *tmp);
	qsort(tmp, n, sizeof *tmp, cmp_u64);
	for (size_t i = 0; i < n; i++) {
		size_t lo = 0, hi = n;
		while (lo < hi) { /* first index of pattern[i] */
			size_t mid = (lo + hi) / 2;
			if (tmp[mid] < pattern[i])
				lo = mid + 1;
			else
				hi = mid;
		}
		size_t e = lo;
		while (e < n && tmp[e] == pattern[i])
			e++;
		freq[i] = e - lo;
	}
}

static int cmp_size(const void *x, const void *y)
{
	size_t a = *(const size_t *)x, b = *(const size_t *)y;
	return a < b ? -1 : a > b;
}

/* Rare = pattern frequency at or below the 5th percentile of per-trace frequency. */
static size_t rare_threshold(const size_t *freq, size_t n)
{
	size_t *s = malloc(n * sizeof *s);
	if (!s)
		return 0;
	memcpy(s, freq, n * sizeof *s);
	qsort(s, n, sizeof *s, cmp_size);
	size_t t = s[(size_t)floor(0.05 * (double)(n - 1))];
	free(s);
	return t;
}

static void compute_metrics(const labels *lb, const bool *kept, size_t n, const size_t *freq,
			    size_t rare_max, uint64_t *tmp, rt_sel_metrics *m)
{
	size_t k = 0, anomalous = 0, errors = 0, rare = 0;
	for (size_t i = 0; i < n; i++) {
		if (!kept[i])
			continue;
		k++;
		anomalous += lb->score[i] > 0;
		errors += lb->has_error[i];
		rare += freq[i] <= rare_max;
	}
	m->kept = k;
	m->total = n;
	size_t pat_all = distinct(lb->pattern, NULL, n, tmp);
	size_t pat_kept = distinct(lb->pattern, kept, n, tmp);
	m->api_coverage = (double)distinct(lb->group, kept, n, tmp) /
			  (double)distinct(lb->group, NULL, n, tmp);
	m->path_coverage =
		(double)distinct(lb->path, kept, n, tmp) / (double)distinct(lb->path, NULL, n, tmp);
	m->pattern_coverage = (double)pat_kept / (double)pat_all;
	m->entropy = k ? entropy_bits(lb->pattern, kept, n, tmp) : 0.0;
	m->anomalous = k ? (double)anomalous / (double)k : 0.0;
	m->errors = k ? (double)errors / (double)k : 0.0;
	m->rare = k ? (double)rare / (double)k : 0.0;
	m->bcr = k ? (double)pat_kept / (double)k : 0.0;
	m->actual_rate = (double)k / (double)n;
}

/* ---------------------------------------------------------------- paper metrics */

/* Paper labels of every trace: pattern and whether its entry API is rare. */
static int paper_labels(rt_sel_dataset *ds, const uint64_t *group, uint64_t *pattern, bool *rare,
			uint64_t *tmp)
{
	size_t n = rt_sel_dataset_count(ds);
	uint64_t *buf = NULL;
	size_t cap = 0;
	rt_sel_paper_p90 p90;
	if (rt_sel_paper_p90_build(rt_sel_dataset_trace(ds, 0), n, &p90))
		return -1;
	int rc = -1;
	for (size_t i = 0; i < n; i++) {
		size_t k = rt_sel_paper_pairs(rt_sel_dataset_trace(ds, i), &p90, &buf, &cap);
		if (k == (size_t)-1)
			goto out;
		pattern[i] = rt_sel_pattern_id(buf, k);
	}
	memcpy(tmp, group, n * sizeof *tmp);
	qsort(tmp, n, sizeof *tmp, cmp_u64);
	for (size_t i = 0; i < n; i++) {
		size_t lo = 0, hi = n;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (tmp[mid] < group[i])
				lo = mid + 1;
			else
				hi = mid;
		}
		size_t e = lo;
		while (e < n && tmp[e] == group[i])
			e++;
		rare[i] = (double)(e - lo) < 0.05 * (double)n;
	}
	rc = 0;
out:
	rt_sel_paper_p90_free(&p90);
	free(buf);
	return rc;
}

static void paper_metrics(const uint64_t *pattern, const bool *rare, const uint64_t *group,
			  const bool *has_error, const bool *kept, size_t n, uint64_t *tmp,
			  rt_sel_paper_metrics *m)
{
	size_t k = 0, r = 0, r_all = 0, e = 0;
	for (size_t i = 0; i < n; i++) {
		r_all += rare[i];
		if (!kept[i])
			continue;
		k++;
		r += rare[i];
		e += has_error[i];
	}
	m->patterns_all = distinct(pattern, NULL, n, tmp);
	m->patterns_kept = distinct(pattern, kept, n, tmp);
	m->pattern_coverage = (double)m->patterns_kept / (double)m->patterns_all;
	m->entropy = k ? entropy_bits(pattern, kept, n, tmp) : 0.0;
	m->rare = k ? (double)r / (double)k : 0.0;
	m->rare_coverage = r_all ? (double)r / (double)r_all : 1.0;
	m->errors = k ? (double)e / (double)k : 0.0;
	m->api_coverage =
		(double)distinct(group, kept, n, tmp) / (double)distinct(group, NULL, n, tmp);
}

/* ---------------------------------------------------------------- replay */

static bool trace_has_error(const rt_sel_trace *t)
{
	for (uint32_t i = 0; i < t->n_spans; i++)
		if (t->spans[i].error)
			return true;
	for (uint32_t l = 0; l < t->n_logs; l++)
		if (t->logs[l].level >= RT_SEL_LOG_ERROR)
			return true;
	return false;
}

static uint64_t trace_start(const rt_sel_trace *t)
{
	int32_t r = rt_sel_trace_root(t);
	return r < 0 ? 0 : t->spans[r].start_ns;
}

/* Groups with an error in the window stand in for fired exception triggers. */
size_t rt_sel_error_alarms(const rt_sel_trace *w, size_t n, uint64_t *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!trace_has_error(&w[i]))
			continue;
		uint64_t g = rt_sel_trace_group(&w[i]);
		bool seen = false;
		for (size_t j = 0; j < k && !seen; j++)
			seen = out[j] == g;
		if (!seen)
			out[k++] = g;
	}
	return k;
}

/* Keep `budget` of the dataset traces at[0..n), uniformly at random. */
static void random_pick(const uint32_t *at, size_t n, size_t budget, uint64_t *rng, uint32_t *idx,
			bool *kept)
{
	for (size_t i = 0; i < n; i++)
		idx[i] = (uint32_t)i;
	if (budget > n)
		budget = n;
	for (size_t i = 0; i < budget; i++) {
		size_t j = i + rt_sel_rand(rng) % (n - i);
		uint32_t t = idx[i];
		idx[i] = idx[j];
		idx[j] = t;
		kept[at[idx[i]]] = true;
	}
}

static void free_labels(labels *lb)
{
	free(lb->pattern);
	free(lb->group);
	free(lb->path);
	free(lb->score);
	free(lb->has_error);
	free(lb->kept_g);
	free(lb->kept_r);
	free(lb->kept_o);
}

static int alloc_labels(labels *lb, size_t n, size_t draws)
{
	lb->pattern = calloc(n, sizeof *lb->pattern);
	lb->group = calloc(n, sizeof *lb->group);
	lb->path = calloc(n, sizeof *lb->path);
	lb->score = calloc(n, sizeof *lb->score);
	lb->has_error = calloc(n, sizeof *lb->has_error);
	lb->kept_g = calloc(n, sizeof *lb->kept_g);
	lb->n = n;
	lb->kept_r = calloc(n * draws, sizeof *lb->kept_r);
	lb->kept_o = calloc(n, sizeof *lb->kept_o);
	return lb->pattern && lb->group && lb->path && lb->score && lb->has_error && lb->kept_g &&
			       lb->kept_r && lb->kept_o
		       ? 0
		       : -1;
}

/* One window of the replay: the traces held back by the window before, then the
 * window's own; each as a copy of the dataset's trace (sharing its spans and logs)
 * and its dataset index. */
typedef struct window_set {
	rt_sel_trace *traces; /* the window's; then split: selected now, held */
	uint32_t *at;         /* dataset index of each */
	bool *held_before, *hold;
	size_t n;
	rt_sel_trace *held; /* the held ones, for rt_sel_window.held */
	uint32_t *held_at;
	size_t n_held;
} window_set;

typedef struct replay {
	rt_selector *sel;
	uint64_t rng[RT_SEL_RANDOM_DRAWS_MAX]; /* one per random draw */
	size_t draws;
	uint64_t *alarms;
	uint32_t *idx;
	double t_gleaner, t_random, t_mining;
	double credit;
	window_set win;
} replay;

/* Select win->traces[0..n) (the held ones apart in win->held); labels by dataset index. */
static int replay_window(replay *r, const rt_sel_eval_options *opt, size_t n, double coverage,
			 bool last, labels *lb)
{
	window_set *ws = &r->win;
	rt_sel_trace *w = ws->traces;
	r->credit += opt->rate * (double)n; /* a held trace earns credit where it is selected */
	size_t budget = r->credit > 0 ? (size_t)floor(r->credit + 1e-9) : 0;
	size_t n_alarms = opt->alarm_on_errors ? rt_sel_error_alarms(w, n, r->alarms) : 0;
	rt_sel_result res;
	double t0 = now_s();
	rt_sel_mine_templates(r->sel, w, n); /* timed apart: tracer-API logs skip it */
	double tm = now_s();
	rt_sel_window sw = { .traces = w, .n = n, .held = ws->held, .n_held = ws->n_held,
			     .budget = budget, .alarmed_groups = r->alarms, .n_alarmed = n_alarms,
			     .coverage = coverage, .last = last };
	if (rt_sel_select(r->sel, &sw, &res))
		return -1;
	double t1 = now_s();
	/* An incident scale-up borrows from later windows' credit, so the kept share still
     * tracks the rate (to within one trace per window). Picks the selector declined
     * (nothing new left below the group count) are carried to the next window, as the
     * coordinator carries them, at most one window's worth. */
	r->credit -= (double)(res.budget - res.declined);
	if (res.declined && r->credit > opt->rate * (double)n + 1.0)
		r->credit = opt->rate * (double)n + 1.0;
	r->t_mining += tm - t0;
	for (size_t i = 0; i < n && res.verdicts; i++) {
		uint32_t at = ws->at[i];
		lb->pattern[at] = res.verdicts[i].pattern;
		lb->group[at] = res.verdicts[i].group;
		lb->score[at] = res.verdicts[i].score;
		lb->kept_g[at] = res.verdicts[i].chosen;
	}
	double t2 = now_s();
	for (size_t d = 0; d < r->draws; d++) /* one draw's time is what random costs */
		random_pick(ws->at, n, res.budget - res.declined, &r->rng[d], r->idx,
			    lb->kept_r + d * lb->n);
	double t3 = t2 + (now_s() - t2) / (double)r->draws;
	r->t_gleaner += t1 - t0;
	r->t_random += t3 - t2;
	return 0;
}

/* Every replay starts from the traces as read: free-text logs without template ids and
 * spans without cached op keys (a replay after another would otherwise skip hashing
 * the names, which a live coordinator does for every new trace: ~0.6 µs per trace). */
static void reset_replay_state(rt_sel_dataset *ds)
{
	for (size_t i = 0; i < rt_sel_dataset_count(ds); i++) {
		rt_sel_trace *t = rt_sel_dataset_trace(ds, i);
		for (uint32_t l = 0; l < t->n_logs; l++)
			if (t->logs[l].text)
				t->logs[l].template_id = 0;
		for (uint32_t j = 0; j < t->n_spans; j++)
			t->spans[j].op_key = 0;
	}
}

static int alloc_window_set(window_set *ws, size_t n)
{
	ws->traces = malloc(n * sizeof *ws->traces);
	ws->at = malloc(n * sizeof *ws->at);
	ws->held_before = malloc(n * sizeof *ws->held_before);
	ws->hold = malloc(n * sizeof *ws->hold);
	ws->held = malloc(n * sizeof *ws->held);
	ws->held_at = malloc(n * sizeof *ws->held_at);
	return ws->traces && ws->at && ws->held_before && ws->hold && ws->held && ws->held_at ? 0
															  : -1;
}

static void free_window_set(window_set *ws)
{
	free(ws->traces);
	free(ws->at);
	free(ws->held_before);
	free(ws->hold);
	free(ws->held);
	free(ws->held_at);
}

/* The window: the traces the window before held back, then all[i..j). The cut-minute
 * rule (rt_sel_hold_cut_minute) then moves the ones to hold to ws->held, keeping the
 * others' order at the front. */
static void form_window(window_set *ws, rt_sel_trace *all, size_t i, size_t j, bool last)
{
	size_t n = 0;
	for (size_t h = 0; h < ws->n_held; h++, n++) {
		ws->traces[n] = ws->held[h];
		ws->at[n] = ws->held_at[h];
		ws->held_before[n] = true;
	}
	for (size_t k = i; k < j; k++, n++) {
		ws->traces[n] = all[k];
		ws->at[n] = (uint32_t)k;
		ws->held_before[n] = false;
	}
	rt_sel_hold_cut_minute(ws->traces, n, ws->held_before, last, ws->hold);
	size_t keep = 0;
	ws->n_held = 0;
	for (size_t k = 0; k < n; k++) {
		if (ws->hold[k]) {
			ws->held[ws->n_held] = ws->traces[k];
			ws->held_at[ws->n_held++] = ws->at[k];
			continue;
		}
		ws->traces[keep] = ws->traces[k];
		ws->at[keep++] = ws->at[k];
	}
	ws->n = keep;
}

/* The last window ends with the data: it covers only from its first trace (a held
 * one may start before the window) to its last. */
static double last_coverage(const window_set *ws, uint64_t width)
{
	uint64_t first = UINT64_MAX, last = 0;
	for (size_t k = 0; k < ws->n; k++) {
		uint64_t t = trace_start(&ws->traces[k]);
		first = t < first ? t : first;
		last = t > last ? t : last;
	}
	if (ws->n == 0)
		return 1.0;
	double span = (double)(last - first) + 1e9; /* at least a second */
	return span < (double)width ? span / (double)width : 1.0;
}

static int replay_all(replay *r, rt_sel_dataset *ds, const rt_sel_eval_options *opt, labels *lb,
		      size_t *windows)
{
	size_t n = rt_sel_dataset_count(ds);
	rt_sel_trace *all = rt_sel_dataset_trace(ds, 0);
	uint64_t width = (uint64_t)(opt->window_s * 1e9);
	if (width == 0)
		width = 1;
	r->win.n_held = 0;
	for (size_t i = 0; i < n;) {
		uint64_t end = trace_start(&all[i]) + width;
		size_t j = i + 1;
		while (j < n && trace_start(&all[j]) < end)
			j++;
		form_window(&r->win, all, i, j, j == n);
		double coverage = j == n ? last_coverage(&r->win, width) : 1.0;
		if (replay_window(r, opt, r->win.n, coverage, j == n, lb))
			return -1;
		++*windows;
		if (opt->progress && (*windows % 16 == 0 || j == n))
			fprintf(stderr, "\rselect-eval: %zu/%zu traces, %zu windows", j, n,
				*windows);
		i = j;
	}
	if (opt->progress)
		fputc('\n', stderr);
	return 0;
}

/* The original algorithm over the replayed dataset (its logs now carry the template
 * ids the replay mined), in batches of arrival order, at the same rate: each batch
 * earns rate × its traces of credit, the integer part is its budget. */
static int replay_original(rt_sel_dataset *ds, const rt_sel_eval_options *opt, bool *kept,
			   size_t *batches, double *seconds)
{
	size_t n = rt_sel_dataset_count(ds), batch = opt->original_batch;
	if (batch == 0)
		batch = RT_SEL_ORIGINAL_BATCH;
	uint64_t rng = (opt->seed ? opt->seed : 0x5eed) ^ 0x0a11c0de;
	double credit = 0;
	double t0 = now_s();
	for (size_t i = 0; i < n; i += batch) {
		size_t m = n - i < batch ? n - i : batch;
		credit += opt->rate * (double)m;
		size_t budget = credit > 0 ? (size_t)floor(credit + 1e-9) : 0;
		credit -= (double)budget;
		if (rt_sel_original_select_batch(rt_sel_dataset_trace(ds, i), m, budget,
						 opt->alarm_on_errors, &rng, kept + i))
			return -1;
		++*batches;
	}
	*seconds = now_s() - t0;
	return 0;
}

/* The figures of rt_sel_metrics (and of rt_sel_paper_metrics) a mean of draws is
 * taken of: the shares and coverages, not the counts or the times. */
#define RETRACE_FIGURES(X)                                                             \
	X(api_coverage) X(path_coverage) X(pattern_coverage) X(entropy) X(anomalous)  \
	X(errors) X(rare) X(bcr) X(actual_rate)
#define PAPER_FIGURES(X) X(pattern_coverage) X(entropy) X(rare) X(rare_coverage) X(errors) X(api_coverage)

/* The random baseline over its draws: each figure's mean (kept is the same in every
 * draw: the same budgets). */
static void random_metrics(const labels *lb, size_t draws, const size_t *freq, size_t rare_max,
			   uint64_t *tmp, rt_sel_metrics *mean)
{
	rt_sel_metrics m;
	*mean = (rt_sel_metrics){ 0 };
	for (size_t d = 0; d < draws; d++) {
		compute_metrics(lb, lb->kept_r + d * lb->n, lb->n, freq, rare_max, tmp, &m);
		mean->kept = m.kept;
		mean->total = m.total;
#define MEAN(f) mean->f += m.f / (double)draws;
		RETRACE_FIGURES(MEAN)
#undef MEAN
	}
}

/* Fold one draw's paper figures into the mean (patterns_kept rounded at the end),
 * the lowest and the highest. */

static void paper_random(const uint64_t *pp, const bool *prare, const labels *lb, size_t draws,
			 uint64_t *tmp, rt_sel_eval_report *rep)
{
	rt_sel_paper_metrics m, *mean = &rep->paper_random, *lo = &rep->paper_random_lo,
				*hi = &rep->paper_random_hi;
	double kept_sum = 0;
	for (size_t d = 0; d < draws; d++) {
		paper_metrics(pp, prare, lb->group, lb->has_error, lb->kept_r + d * lb->n, lb->n, tmp,
			      &m);
		if (d == 0) {
			*mean = (rt_sel_paper_metrics){ .patterns_all = m.patterns_all };
			*lo = *hi = m;
		}
		kept_sum += (double)m.patterns_kept;
#define FOLD(f)                                                                      \
	mean->f += m.f / (double)draws;                                              \
	lo->f = m.f < lo->f ? m.f : lo->f;                                           \
	hi->f = m.f > hi->f ? m.f : hi->f;
		PAPER_FIGURES(FOLD)
#undef FOLD
		lo->patterns_kept = m.patterns_kept < lo->patterns_kept ? m.patterns_kept : lo->patterns_kept;
		hi->patterns_kept = m.patterns_kept > hi->patterns_kept ? m.patterns_kept : hi->patterns_kept;
	}
	mean->patterns_kept = (size_t)(kept_sum / (double)draws + 0.5);
}

int rt_sel_eval_run(rt_sel_dataset *ds, const rt_sel_eval_options *opt, rt_sel_eval_report *rep,
		    char *err, size_t errlen)
{
	size_t n = rt_sel_dataset_count(ds);
	*rep = (rt_sel_eval_report){ 0 };
	if (n == 0 || !(opt->rate > 0) || opt->rate > 1) {
		snprintf(err, errlen, n == 0 ? "empty dataset" : "rate must be in (0, 1]");
		return -1;
	}
	reset_replay_state(ds);
	labels lb = { 0 };
	replay r = { .draws = opt->random_draws ? opt->random_draws : 1 };
	if (r.draws > RT_SEL_RANDOM_DRAWS_MAX)
		r.draws = RT_SEL_RANDOM_DRAWS_MAX;
	/* draw 0 is seeded as a single draw always was; the others apart from it */
	for (size_t d = 0; d < r.draws; d++)
		r.rng[d] = (opt->seed ? opt->seed : 0x5eed) + d * 0x9e3779b97f4a7c15ull;
	uint64_t *tmp = malloc(n * sizeof *tmp);
	size_t *freq = malloc(n * sizeof *freq);
	r.alarms = malloc(n * sizeof *r.alarms);
	r.idx = malloc(n * sizeof *r.idx);
	r.sel = rt_sel_create(opt->config);
	int rc = -1;
	if (!tmp || !freq || !r.alarms || !r.idx || !r.sel || alloc_labels(&lb, n, r.draws) ||
	    alloc_window_set(&r.win, n)) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (replay_all(&r, ds, opt, &lb, &rep->windows)) {
		snprintf(err, errlen, "selection failed (out of memory)");
		goto out;
	}
	double t_original = 0;
	if (replay_original(ds, opt, lb.kept_o, &rep->batches, &t_original)) {
		snprintf(err, errlen, "original algorithm failed (out of memory)");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		rt_sel_trace *t = rt_sel_dataset_trace(ds, i);
		lb.path[i] = trace_path(t);
		lb.has_error[i] = trace_has_error(t);
	}
	pattern_frequency(lb.pattern, n, freq, tmp);
	size_t rare_max = rare_threshold(freq, n);
	compute_metrics(&lb, lb.kept_g, n, freq, rare_max, tmp, &rep->gleaner);
	random_metrics(&lb, r.draws, freq, rare_max, tmp, &rep->random);
	compute_metrics(&lb, lb.kept_o, n, freq, rare_max, tmp, &rep->original);
	{
		uint64_t *pp = malloc(n * sizeof *pp);
		bool *prare = malloc(n * sizeof *prare);
		if (!pp || !prare || paper_labels(ds, lb.group, pp, prare, tmp)) {
			free(pp);
			free(prare);
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		paper_metrics(pp, prare, lb.group, lb.has_error, lb.kept_g, n, tmp,
			      &rep->paper_gleaner);
		paper_random(pp, prare, &lb, r.draws, tmp, rep);
		paper_metrics(pp, prare, lb.group, lb.has_error, lb.kept_o, n, tmp,
			      &rep->paper_original);
		free(pp);
		free(prare);
	}
	rep->gleaner.us_per_trace = r.t_gleaner * 1e6 / (double)n;
	rep->random.us_per_trace = r.t_random * 1e6 / (double)n;
	rep->random_draws = r.draws;
	rep->original.us_per_trace = t_original * 1e6 / (double)n; /* mining not included */
	rep->gleaner.us_mining = r.t_mining * 1e6 / (double)n;
	rt_sel_stage_times st;
	rt_sel_selector_stage_times(r.sel, &st);
	rep->gleaner.us_prepare = st.prepare * 1e6 / (double)n;
	rep->gleaner.us_p90 = st.p90 * 1e6 / (double)n;
	rep->gleaner.us_encode = st.encode * 1e6 / (double)n;
	rep->gleaner.us_choose = st.choose * 1e6 / (double)n;
	rc = 0;
out:
	rt_sel_destroy(r.sel);
	free_window_set(&r.win);
	free(tmp);
	free(freq);
	free(r.alarms);
	free(r.idx);
	free_labels(&lb);
	return rc;
}
