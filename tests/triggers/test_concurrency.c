/*
 * test_concurrency.c — two threads hammering one trigger lose no state and
 * tear nothing, proven by counts: every sample accounted, every firing
 * delivered once, internal invariants intact, no half-written trace id.
 */
#include <check.h>

#include "common/suite.h"
#include <pthread.h>
#include <stdlib.h>

#include "test_util.h"

#define THREADS 2
#define ID_CHECK 0x5A5A5A5A5A5A5A5Aull

static int count_fire(void *arg, retrace_trace_id id, uint32_t trigger_id,
		      const retrace_trace_id *lateral, size_t n_lateral)
{
	(void)id;
	(void)trigger_id;
	(void)lateral;
	(void)n_lateral;
	atomic_fetch_add((atomic_ulong *)arg, 1);
	return RETRACE_OK;
}

static void run_threads(void *(*body)(void *), void *args, size_t arg_size)
{
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, body,
						(char *)args + (size_t)i * arg_size), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
}

/* ------------------------------------------------------ percentile ---- */

#define PCT_SAMPLES 400000u

struct pct_worker {
	struct retrace_percentile *p;
	uint64_t seed;
	uint64_t fired;
};

static void *pct_body(void *arg)
{
	struct pct_worker *w = arg;
	for (uint64_t i = 0; i < PCT_SAMPLES; i++)
		w->fired += (uint64_t)retrace_percentile_add(
			w->p, test_id(i), rng_exponential(&w->seed, 1000.0));
	return NULL;
}

static void hammer_percentile(unsigned int shards, uint32_t batch)
{
	atomic_ulong delivered = 0;
	struct retrace_percentile_config cfg = {
		.trigger_id = 1, .percentile = 99.9, .shards = shards, .batch = batch,
		.sink = {count_fire, &delivered}};
	struct pct_worker w[THREADS] = {{retrace_percentile_create(&cfg), 1, 0},
					{NULL, 2, 0}};
	w[1].p = w[0].p;
	run_threads(pct_body, w, sizeof w[0]);

	struct retrace_trigger_stats st;
	retrace_percentile_stats(w[0].p, &st);
	ck_assert_uint_eq(st.samples, (uint64_t)THREADS * PCT_SAMPLES);
	ck_assert_uint_eq(st.fired, w[0].fired + w[1].fired);
	ck_assert_uint_eq(st.fired, atomic_load(&delivered));
	ck_assert_uint_eq(st.fire_errors, 0);
	/* About 1 in 1000 fired: the shared window behaved as one window. */
	ck_assert_uint_gt(st.fired, THREADS * PCT_SAMPLES / 1000 / 2);
	ck_assert_uint_lt(st.fired, THREADS * PCT_SAMPLES / 1000 * 2);
	ck_assert_int_eq(retrace_percentile_selfcheck(w[0].p), 0);
	retrace_percentile_destroy(w[0].p);
}

START_TEST(percentile_shared_window)
{
	hammer_percentile(1, 0);
}
END_TEST

START_TEST(percentile_sharded)
{
	hammer_percentile(2, 0);
}
END_TEST

START_TEST(percentile_batched)
{
	hammer_percentile(1, 64);
}
END_TEST

/* -------------------------------------------------------- category ---- */

#define CAT_SAMPLES 300000u

struct cat_worker {
	struct retrace_category *c;
	uint64_t label;
};

static void *cat_body(void *arg)
{
	struct cat_worker *w = arg;
	for (uint64_t i = 0; i < CAT_SAMPLES; i++)
		retrace_category_add(w->c, test_id(i), w->label);
	return NULL;
}

START_TEST(category_counts_exact)
{
	/* Window larger than the run: no halving, so counts must be exact. */
	struct retrace_category_config cfg = {
		.trigger_id = 2, .fraction = 0.01, .window = 4 * CAT_SAMPLES};
	struct retrace_category *c = retrace_category_create(&cfg);
	struct cat_worker w[THREADS] = {{c, 111}, {c, 222}};
	run_threads(cat_body, w, sizeof w[0]);
	struct retrace_trigger_stats st;
	retrace_category_stats(c, &st);
	ck_assert_uint_eq(st.samples, (uint64_t)THREADS * CAT_SAMPLES);
	ck_assert(retrace_category_share(c, 111) == 0.5);
	ck_assert(retrace_category_share(c, 222) == 0.5);
	retrace_category_destroy(c);
}
END_TEST

/* ----------------------------------------------------- trigger set ---- */

#define SET_ADDS 200000u

struct set_worker {
	struct retrace_trigger_set *s;
	uint64_t thread_tag;
	uint64_t torn;
};

static retrace_trace_id tagged_id(uint64_t tag, uint64_t seq)
{
	retrace_trace_id id = {(tag << 32 | seq) ^ ID_CHECK, tag << 32 | seq};
	return id;
}

static void *set_body(void *arg)
{
	struct set_worker *w = arg;
	retrace_trace_id snap[RETRACE_MAX_LATERAL];
	retrace_trace_id none = {0, 0};
	for (uint64_t i = 0; i < SET_ADDS; i++) {
		retrace_trigger_set_add(w->s, tagged_id(w->thread_tag, i));
		if (i % 64 == 0) {
			size_t n = retrace_trigger_set_snapshot(w->s, snap,
								RETRACE_MAX_LATERAL, none);
			for (size_t j = 0; j < n; j++)
				w->torn += (uint64_t)((snap[j].hi ^ ID_CHECK) != snap[j].lo);
		}
	}
	return NULL;
}

START_TEST(trigger_set_never_torn)
{
	struct retrace_trigger_set *s =
		retrace_trigger_set_create(RETRACE_MAX_LATERAL, (struct retrace_fire_sink){0});
	struct set_worker w[THREADS] = {{s, 1, 0}, {s, 2, 0}};
	run_threads(set_body, w, sizeof w[0]);
	ck_assert_uint_eq(w[0].torn + w[1].torn, 0);

	struct retrace_trigger_stats st;
	retrace_trigger_set_stats(s, &st);
	ck_assert_uint_eq(st.samples, (uint64_t)THREADS * SET_ADDS);

	/* The final ring: full, untorn, each thread's ids newest first. */
	retrace_trace_id snap[RETRACE_MAX_LATERAL], none = {0, 0};
	size_t n = retrace_trigger_set_snapshot(s, snap, RETRACE_MAX_LATERAL, none);
	ck_assert_uint_eq(n, RETRACE_MAX_LATERAL);
	uint64_t last_seq[3] = {UINT64_MAX, UINT64_MAX, UINT64_MAX};
	for (size_t j = 0; j < n; j++) {
		uint64_t tag = snap[j].lo >> 32, seq = snap[j].lo & 0xFFFFFFFFu;
		ck_assert_uint_eq(snap[j].hi ^ ID_CHECK, snap[j].lo);
		ck_assert(tag == 1 || tag == 2);
		ck_assert_uint_lt(seq, last_seq[tag]);
		last_seq[tag] = seq;
	}
	retrace_trigger_set_destroy(s);
}
END_TEST

/* ------------------------------------------------------ rate limit ---- */

struct rate_worker {
	const struct retrace_filter *f;
	uint64_t allowed;
};

static void *rate_body(void *arg)
{
	struct rate_worker *w = arg;
	struct retrace_span_summary s = {test_id(1), 0, 0, NULL, 0};
	for (int i = 0; i < 200000; i++)
		w->allowed += (uint64_t)retrace_filter_match(w->f, &s);
	return NULL;
}

START_TEST(rate_limit_exact_under_contention)
{
	/* One token per 1000 s and a burst of 100: exactly 100 pass in total. */
	struct retrace_filter *f = retrace_filter_rate_limit(0.001, 100.0);
	struct rate_worker w[THREADS] = {{f, 0}, {f, 0}};
	run_threads(rate_body, w, sizeof w[0]);
	ck_assert_uint_eq(w[0].allowed + w[1].allowed, 100);
	retrace_filter_free(f);
}
END_TEST

static Suite *concurrency_suite(void)
{
	Suite *s = suite_create("concurrency");
	TCase *tc = tcase_create("two threads");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, percentile_shared_window);
	tcase_add_test(tc, percentile_sharded);
	tcase_add_test(tc, percentile_batched);
	tcase_add_test(tc, category_counts_exact);
	tcase_add_test(tc, trigger_set_never_torn);
	tcase_add_test(tc, rate_limit_exact_under_contention);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(concurrency_suite());
}
