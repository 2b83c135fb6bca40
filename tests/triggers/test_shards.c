/*
 * test_shards.c — the default per-thread shards and their merge.
 *
 * N threads sampling one default (sharded) trigger must decide exactly as N
 * one-window triggers fed the same streams one by one (so every accuracy test
 * of the single-window trigger carries over to each thread), and the merged
 * reads must keep the single-window guarantees over the union: the merged
 * percentile threshold within RETRACE_PERCENTILE_REL_ERROR above the exact
 * order statistic of all threads' windows, the merged category share never
 * below the true share and at most f/10 above it, and a TriggerSet snapshot
 * that keeps every thread's ids in their exact order, newest first.
 */
#include <check.h>

#include "common/suite.h"
#include <pthread.h>
#include <stdlib.h>

#include "test_util.h"

#define THREADS 4

static int no_fire(void *arg, retrace_trace_id id, uint32_t trigger_id,
		   const retrace_trace_id *lateral, size_t n_lateral)
{
	(void)arg;
	(void)id;
	(void)trigger_id;
	(void)lateral;
	(void)n_lateral;
	return RETRACE_OK;
}

static const struct retrace_fire_sink quiet_sink = {no_fire, NULL};

/* Start all workers, then join them: consecutive thread slots, so with at least
 * THREADS shards every worker owns its shard. */
static void run_workers(void *(*body)(void *), void *args, size_t arg_size)
{
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, body,
						(char *)args + (size_t)i * arg_size), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
}

static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* ------------------------------------------------------ percentile ---- */

#define PCT_SAMPLES 30000u
#define PCT_P 99.9

struct pct_worker {
	struct retrace_percentile *p;
	uint64_t seed;
	uint8_t *decided; /* PCT_SAMPLES decisions */
	uint64_t *values; /* PCT_SAMPLES inputs */
};

/* Each thread its own stream; thread i's scale differs so the windows differ. */
static uint64_t pct_value(uint64_t *rng, int thread)
{
	return rng_exponential(rng, 1000.0 * (double)(thread + 1));
}

static void *pct_body(void *arg)
{
	struct pct_worker *w = arg;
	int thread = (int)(w->seed - 1);
	for (uint64_t i = 0; i < PCT_SAMPLES; i++) {
		w->values[i] = pct_value(&w->seed, thread);
		w->decided[i] = (uint8_t)retrace_percentile_add(w->p, test_id(i), w->values[i]);
	}
	return NULL;
}

START_TEST(percentile_threads_decide_as_single_windows)
{
	struct retrace_percentile_config cfg = {.trigger_id = 1, .percentile = PCT_P,
						.sink = quiet_sink};
	struct retrace_percentile *p = retrace_percentile_create(&cfg);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_ge(retrace_percentile_shards(p), THREADS);

	struct pct_worker w[THREADS];
	for (int i = 0; i < THREADS; i++)
		w[i] = (struct pct_worker){p, (uint64_t)i + 1, malloc(PCT_SAMPLES),
					   malloc(PCT_SAMPLES * sizeof(uint64_t))};
	run_workers(pct_body, w, sizeof w[0]);

	/* The same streams through one-window triggers, one at a time. */
	uint64_t fired = 0;
	for (int i = 0; i < THREADS; i++) {
		struct retrace_percentile_config one = cfg;
		one.shards = 1;
		struct retrace_percentile *ref = retrace_percentile_create(&one);
		uint64_t differ = 0;
		for (uint64_t j = 0; j < PCT_SAMPLES; j++) {
			int d = retrace_percentile_add(ref, test_id(j), w[i].values[j]);
			differ += (uint64_t)(d != w[i].decided[j]);
			fired += w[i].decided[j];
		}
		ck_assert_msg(differ == 0, "thread %d: %llu decisions differ", i,
			      (unsigned long long)differ);
		retrace_percentile_destroy(ref);
	}
	struct retrace_trigger_stats st;
	retrace_percentile_stats(p, &st);
	ck_assert_uint_eq(st.samples, (uint64_t)THREADS * PCT_SAMPLES);
	ck_assert_uint_eq(st.fired, fired);
	/* Each thread's window is p99.9 of its own stream: about 1 in 1000 fired. */
	ck_assert_uint_gt(fired, THREADS * PCT_SAMPLES / 1000 / 2);
	ck_assert_uint_lt(fired, THREADS * PCT_SAMPLES / 1000 * 2);
	ck_assert_int_eq(retrace_percentile_selfcheck(p), 0);

	for (int i = 0; i < THREADS; i++) {
		free(w[i].decided);
		free(w[i].values);
	}
	retrace_percentile_destroy(p);
}
END_TEST

START_TEST(percentile_merged_threshold_bounds_union)
{
	struct retrace_percentile_config cfg = {.trigger_id = 1, .percentile = PCT_P,
						.sink = quiet_sink};
	struct retrace_percentile *p = retrace_percentile_create(&cfg);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(retrace_percentile_merged_threshold(p), UINT64_MAX);

	struct pct_worker w[THREADS];
	for (int i = 0; i < THREADS; i++)
		w[i] = (struct pct_worker){p, (uint64_t)i + 1, malloc(PCT_SAMPLES),
					   malloc(PCT_SAMPLES * sizeof(uint64_t))};
	run_workers(pct_body, w, sizeof w[0]);

	/* The union of every thread's window: its last `window` samples. The
	 * default window at p = 99.9 is 2000. */
	const uint64_t window = 2000;
	uint64_t *all = malloc(THREADS * window * sizeof *all);
	uint64_t n = 0;
	for (int i = 0; i < THREADS; i++)
		for (uint64_t j = PCT_SAMPLES - window; j < PCT_SAMPLES; j++)
			all[n++] = w[i].values[j];
	qsort(all, n, sizeof *all, cmp_desc);
	uint64_t k = (uint64_t)((double)n * (1.0 - PCT_P / 100.0) + 1e-9);
	uint64_t exact = all[(k ? k : 1) - 1];
	uint64_t theta = retrace_percentile_merged_threshold(p);
	ck_assert_msg(theta >= exact && (double)theta <= (double)exact * (1.0 +
					  RETRACE_PERCENTILE_REL_ERROR) + 1.0,
		      "merged threshold %llu, exact %llu", (unsigned long long)theta,
		      (unsigned long long)exact);
	/* The threads' scales differ (1x .. 4x): the union's tail is not any one
	 * thread's, so a merge that read one shard would miss the bound. */
	ck_assert_uint_ne(theta, retrace_percentile_threshold(p));

	for (int i = 0; i < THREADS; i++) {
		free(w[i].decided);
		free(w[i].values);
	}
	free(all);
	retrace_percentile_destroy(p);
}
END_TEST

START_TEST(percentile_one_thread_merged_is_own)
{
	struct retrace_percentile_config cfg = {.trigger_id = 1, .percentile = 99.0,
						.sink = quiet_sink};
	struct retrace_percentile *p = retrace_percentile_create(&cfg);
	uint64_t rng = 9;
	for (int i = 0; i < 5000; i++)
		retrace_percentile_add(p, test_id((uint64_t)i), rng_exponential(&rng, 500.0));
	ck_assert_uint_lt(retrace_percentile_threshold(p), UINT64_MAX);
	ck_assert_uint_eq(retrace_percentile_merged_threshold(p),
			  retrace_percentile_threshold(p));
	retrace_percentile_destroy(p);
}
END_TEST

/* -------------------------------------------------------- category ---- */

#define CAT_SAMPLES 40000u
#define CAT_F 0.01

struct cat_worker {
	struct retrace_category *c;
	int thread;
	uint8_t *decided;
	uint64_t *labels;
};

/* Thread i: label 7 in (i+1)*10 % of its samples, the rest spread over 20
 * labels of its own and, 1 in 200, a label seen once. */
static uint64_t cat_label(uint64_t *rng, int thread, uint64_t i)
{
	uint64_t r = rng_next(rng) % 1000u;
	if (r < (uint64_t)(thread + 1) * 100u)
		return 7;
	if (r >= 995u)
		return 1000000u + (uint64_t)thread * CAT_SAMPLES + i;
	return 100u + (uint64_t)thread * 20u + r % 20u;
}

static void *cat_body(void *arg)
{
	struct cat_worker *w = arg;
	uint64_t rng = (uint64_t)w->thread + 77;
	for (uint64_t i = 0; i < CAT_SAMPLES; i++) {
		w->labels[i] = cat_label(&rng, w->thread, i);
		w->decided[i] = (uint8_t)retrace_category_add(w->c, test_id(i), w->labels[i]);
	}
	return NULL;
}

START_TEST(category_threads_decide_and_merge)
{
	/* A window longer than the run: no halving, so the shares are exact counts. */
	struct retrace_category_config cfg = {.trigger_id = 2, .fraction = CAT_F,
					      .window = 4 * THREADS * CAT_SAMPLES,
					      .sink = quiet_sink};
	struct retrace_category *c = retrace_category_create(&cfg);
	ck_assert_ptr_nonnull(c);
	ck_assert_uint_ge(retrace_category_shards(c), THREADS);

	struct cat_worker w[THREADS];
	for (int i = 0; i < THREADS; i++)
		w[i] = (struct cat_worker){c, i, malloc(CAT_SAMPLES),
					   malloc(CAT_SAMPLES * sizeof(uint64_t))};
	run_workers(cat_body, w, sizeof w[0]);

	uint64_t sevens = 0, fired = 0;
	for (int i = 0; i < THREADS; i++) {
		struct retrace_category_config one = cfg;
		one.shards = 1;
		struct retrace_category *ref = retrace_category_create(&one);
		uint64_t differ = 0;
		for (uint64_t j = 0; j < CAT_SAMPLES; j++) {
			int d = retrace_category_add(ref, test_id(j), w[i].labels[j]);
			differ += (uint64_t)(d != w[i].decided[j]);
			fired += w[i].decided[j];
			sevens += (uint64_t)(w[i].labels[j] == 7);
		}
		ck_assert_msg(differ == 0, "thread %d: %llu decisions differ", i,
			      (unsigned long long)differ);
		retrace_category_destroy(ref);
	}
	struct retrace_trigger_stats st;
	retrace_category_stats(c, &st);
	ck_assert_uint_eq(st.samples, (uint64_t)THREADS * CAT_SAMPLES);
	ck_assert_uint_eq(st.fired, fired);
	ck_assert_uint_gt(fired, 0); /* the labels seen once did fire */

	/* Merged share of label 7 over all threads: never below the truth, at
	 * most f/10 above it (count-min, w.h.p.; fixed seeds). */
	double truth = (double)sevens / (double)(THREADS * CAT_SAMPLES);
	double share = retrace_category_share(c, 7);
	ck_assert_msg(share >= truth - 1e-12 && share <= truth + CAT_F / 10,
		      "merged share %f, true %f", share, truth);
	/* A thread's own label, merged: its count over everybody's total. */
	ck_assert_double_lt(retrace_category_share(c, 100), 0.1);

	for (int i = 0; i < THREADS; i++) {
		free(w[i].decided);
		free(w[i].labels);
	}
	retrace_category_destroy(c);
}
END_TEST

/* ----------------------------------------------------- trigger set ---- */

#define SET_ADDS 5000u

struct set_worker {
	struct retrace_trigger_set *s;
	uint64_t tag;
};

static void *set_body(void *arg)
{
	struct set_worker *w = arg;
	for (uint64_t i = 0; i < SET_ADDS; i++) {
		retrace_trace_id id = {w->tag, i};
		retrace_trigger_set_add(w->s, id);
	}
	return NULL;
}

START_TEST(trigger_set_merge_keeps_each_thread_newest_first)
{
	struct retrace_trigger_set *s =
		retrace_trigger_set_create(RETRACE_MAX_LATERAL, (struct retrace_fire_sink){0});
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_ge(retrace_trigger_set_shards(s), THREADS);
	struct set_worker w[THREADS];
	for (int i = 0; i < THREADS; i++)
		w[i] = (struct set_worker){s, (uint64_t)i + 1};
	run_workers(set_body, w, sizeof w[0]);

	retrace_trace_id snap[RETRACE_MAX_LATERAL], none = {0, 0};
	size_t n = retrace_trigger_set_snapshot(s, snap, RETRACE_MAX_LATERAL, none);
	ck_assert_uint_eq(n, RETRACE_MAX_LATERAL);
	/* Per thread: its newest ids, consecutive, newest first. */
	uint64_t next[THREADS + 1];
	for (int i = 0; i <= THREADS; i++)
		next[i] = SET_ADDS - 1;
	for (size_t j = 0; j < n; j++) {
		ck_assert(snap[j].hi >= 1 && snap[j].hi <= THREADS);
		ck_assert_uint_eq(snap[j].lo, next[snap[j].hi]);
		next[snap[j].hi]--;
	}
	struct retrace_trigger_stats st;
	retrace_trigger_set_stats(s, &st);
	ck_assert_uint_eq(st.samples, (uint64_t)THREADS * SET_ADDS);

	/* One thread adding after them: once it has advanced the epoch (every
	 * 1024 adds of a shard), its newest ids come before every older thread's. */
	for (uint64_t i = 0; i < 3 * 1024; i++) {
		retrace_trace_id id = {99, i};
		retrace_trigger_set_add(s, id);
	}
	n = retrace_trigger_set_snapshot(s, snap, 8, none);
	ck_assert_uint_eq(n, 8);
	for (size_t j = 0; j < n; j++) {
		ck_assert_uint_eq(snap[j].hi, 99);
		ck_assert_uint_eq(snap[j].lo, 3 * 1024 - 1 - j);
	}
	retrace_trigger_set_destroy(s);
}
END_TEST

START_TEST(bad_shard_counts_refused)
{
	struct retrace_percentile_config pc = {.trigger_id = 1, .percentile = 99, .shards = 257};
	ck_assert_ptr_null(retrace_percentile_create(&pc));
	struct retrace_category_config cc = {.trigger_id = 1, .fraction = 0.1, .shards = 257};
	ck_assert_ptr_null(retrace_category_create(&cc));
	ck_assert_ptr_null(retrace_trigger_set_create_sharded(4, (struct retrace_fire_sink){0}, 257));
	struct retrace_queue_trigger_config qc = {.trigger_id = 1, .percentile = 99, .shards = 257};
	ck_assert_ptr_null(retrace_queue_trigger_create(&qc));
	pc.shards = 1;
	struct retrace_percentile *p = retrace_percentile_create(&pc);
	ck_assert_uint_eq(retrace_percentile_shards(p), 1);
	retrace_percentile_destroy(p);
}
END_TEST

static Suite *shards_suite(void)
{
	Suite *s = suite_create("shards");
	TCase *tc = tcase_create("per-thread shards");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, percentile_threads_decide_as_single_windows);
	tcase_add_test(tc, percentile_merged_threshold_bounds_union);
	tcase_add_test(tc, percentile_one_thread_merged_is_own);
	tcase_add_test(tc, category_threads_decide_and_merge);
	tcase_add_test(tc, trigger_set_merge_keeps_each_thread_newest_first);
	tcase_add_test(tc, bad_shard_counts_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(shards_suite());
}
