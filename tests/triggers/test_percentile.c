/*
 * test_percentile.c — Percentile(p): threshold against an exact order statistic
 * on random and adversarial streams, firing rate on stationary streams,
 * adaptation after level shifts, the time window, and the sink call.
 */
#include <check.h>

#include "common/suite.h"
#include <stdlib.h>
#include <time.h>

#include "test_util.h"

/* ------------------------------------------------- exact reference ---- */

enum stream_kind {
	S_UNIFORM,
	S_ASCENDING,
	S_DESCENDING,
	S_CONSTANT,
	S_BIMODAL,
	S_HEAVY_TAIL,
	S_HUGE_VALUES,
	S_SAWTOOTH,
	S_KINDS
};

static const char *const stream_name[S_KINDS] = {
	"uniform", "ascending", "descending", "constant",
	"bimodal", "heavy-tail", "huge", "sawtooth"};

static uint64_t stream_value(enum stream_kind kind, uint64_t i, uint64_t *rng)
{
	switch (kind) {
	case S_UNIFORM:
		return rng_next(rng) % 1000000u;
	case S_ASCENDING:
		return i * 37u;
	case S_DESCENDING:
		return 10000000u - i * 37u;
	case S_CONSTANT:
		return 12345u;
	case S_BIMODAL:
		return rng_next(rng) % 10u == 0 ? 1000000u + rng_next(rng) % 5000u
						 : 1000u + rng_next(rng) % 100u;
	case S_HEAVY_TAIL:
		return rng_pareto(rng, 100.0, 1.1);
	case S_HUGE_VALUES:
		return rng_next(rng) >> (rng_next(rng) % 64u);
	case S_SAWTOOTH:
		return (i % 500u) * (i % 500u) * 11u;
	default:
		return 0;
	}
}

static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* The k-th largest of the n most recent samples held in `ring` (window w). */
static uint64_t exact_kth_largest(const uint64_t *ring, uint32_t w, uint64_t seen,
				  uint32_t k, uint64_t *scratch)
{
	uint32_t n = seen < w ? (uint32_t)seen : w;
	for (uint32_t i = 0; i < n; i++)
		scratch[i] = ring[(seen - 1 - i) % w];
	qsort(scratch, n, sizeof *scratch, cmp_desc);
	return scratch[k - 1];
}

static uint32_t documented_rank(uint64_t n, double p)
{
	uint32_t k = (uint32_t)floor((double)n * (1.0 - p / 100.0) + 1e-9);
	return k ? k : 1u;
}

static void check_stream_against_exact(enum stream_kind kind, double pct,
				       uint32_t window)
{
	struct retrace_percentile_config cfg = {
		.trigger_id = 5, .percentile = pct, .window = window};
	struct recording_sink rec = {0};
	cfg.sink = recording(&rec);
	struct retrace_percentile *p = retrace_percentile_create(&cfg);
	ck_assert_ptr_nonnull(p);

	uint64_t *ring = calloc(window, sizeof *ring);
	uint64_t *scratch = calloc(window, sizeof *scratch);
	uint64_t rng = 42 + (uint64_t)kind, checks = 0, fired = 0;
	const uint64_t total = 12000;
	uint32_t min_samples = (uint32_t)ceil(1.0 / (1.0 - pct / 100.0) - 1e-6);

	for (uint64_t i = 0; i < total; i++) {
		uint64_t v = stream_value(kind, i, &rng);
		if (i > 0 && (i % 7 == 0 || i + 3 > total)) {
			uint64_t n = i < window ? i : window;
			uint64_t exact = exact_kth_largest(ring, window, i,
							   documented_rank(n, pct), scratch);
			uint64_t theta = retrace_percentile_threshold(p);
			ck_assert_msg(theta >= exact &&
					      (double)(theta - exact) <= (double)exact / 128.0,
				      "%s p=%g i=%llu: theta %llu exact %llu",
				      stream_name[kind], pct, (unsigned long long)i,
				      (unsigned long long)theta, (unsigned long long)exact);
			int should_fire = n >= min_samples && v > theta;
			int did = retrace_percentile_add(p, test_id(i), v);
			ck_assert_int_eq(did, should_fire);
			checks++;
		} else {
			fired += (uint64_t)retrace_percentile_add(p, test_id(i), v);
		}
		ring[i % window] = v;
	}
	ck_assert_uint_gt(checks, total / 8);
	ck_assert_int_eq(retrace_percentile_selfcheck(p), 0);
	struct retrace_trigger_stats st;
	retrace_percentile_stats(p, &st);
	ck_assert_uint_eq(st.samples, total);
	ck_assert_uint_eq(st.fired, atomic_load(&rec.fired));
	free(ring);
	free(scratch);
	retrace_percentile_destroy(p);
}

START_TEST(threshold_matches_exact_order_statistic)
{
	static const double pcts[] = {50.0, 99.0, 99.9};
	static const uint32_t windows[] = {300, 1000, 2000};
	for (int k = 0; k < S_KINDS; k++)
		for (int j = 0; j < 3; j++)
			check_stream_against_exact((enum stream_kind)k, pcts[j], windows[j]);
}
END_TEST

/* --------------------------------------------------- firing rate ---- */

static double fire_fraction(struct retrace_percentile *p, uint64_t *rng, double mean,
			    uint64_t warmup, uint64_t measured)
{
	uint64_t fired = 0;
	for (uint64_t i = 0; i < warmup; i++)
		retrace_percentile_add(p, test_id(i), rng_exponential(rng, mean));
	for (uint64_t i = 0; i < measured; i++)
		fired += (uint64_t)retrace_percentile_add(p, test_id(i),
							  rng_exponential(rng, mean));
	return (double)fired / (double)measured;
}

static struct retrace_percentile *counting_percentile(double pct, uint32_t window,
						      struct recording_sink *rec)
{
	struct retrace_percentile_config cfg = {
		.trigger_id = 9, .percentile = pct, .window = window};
	cfg.sink = recording(rec);
	return retrace_percentile_create(&cfg);
}

/*
 * Stationary exponential stream: the fraction fired is within ±25 % of 1-p
 * (about 400 expected firings: sampling noise ±5 %, bucket bias below 8 %).
 */
START_TEST(fires_for_tail_fraction_on_stationary_stream)
{
	static const double pcts[] = {99.0, 99.9, 99.99};
	for (int j = 0; j < 3; j++) {
		struct recording_sink rec = {0};
		struct retrace_percentile *p = counting_percentile(pcts[j], 0, &rec);
		ck_assert_ptr_nonnull(p);
		double tail = 1.0 - pcts[j] / 100.0;
		uint64_t rng = 7 + (uint64_t)j;
		double got = fire_fraction(p, &rng, 1e6, (uint64_t)(4.0 / tail),
					   (uint64_t)(400.0 / tail));
		ck_assert_msg(got > 0.75 * tail && got < 1.25 * tail,
			      "p=%g fired fraction %g, want %g ±25%%", pcts[j], got, tail);
		retrace_percentile_destroy(p);
	}
}
END_TEST

/* Batch mode judges against a threshold up to `batch` samples old: same rate. */
START_TEST(batched_fires_for_tail_fraction)
{
	struct recording_sink rec = {0};
	struct retrace_percentile_config cfg = {
		.trigger_id = 9, .percentile = 99.9, .batch = 32};
	cfg.sink = recording(&rec);
	struct retrace_percentile *p = retrace_percentile_create(&cfg);
	ck_assert_ptr_nonnull(p);
	uint64_t rng = 17;
	double got = fire_fraction(p, &rng, 1e6, 4000, 400000);
	ck_assert_msg(got > 0.00075 && got < 0.00125, "batched fired fraction %g", got);
	struct retrace_trigger_stats st;
	retrace_percentile_stats(p, &st);
	ck_assert_uint_eq(st.samples, 404000);
	ck_assert_uint_eq(st.fired, atomic_load(&rec.fired));
	ck_assert_int_eq(retrace_percentile_selfcheck(p), 0);
	/* After a flush the threshold matches the unbatched structure's bound. */
	ck_assert_uint_lt(retrace_percentile_threshold(p), UINT64_MAX);
	retrace_percentile_destroy(p);
	cfg.batch = 1;
	ck_assert_ptr_null(retrace_percentile_create(&cfg));
}
END_TEST

START_TEST(adapts_after_level_shift)
{
	struct recording_sink rec = {0};
	const uint32_t window = 1000;
	struct retrace_percentile *p = counting_percentile(99.0, window, &rec);
	uint64_t rng = 11;

	double before = fire_fraction(p, &rng, 1000.0, window, 20000);
	ck_assert(before > 0.0075 && before < 0.0125);

	/* Up tenfold: while the new level fills the top of the window, well over
	 * 1-p fires (a sample fires when it is among the k largest so far). */
	double during_up = fire_fraction(p, &rng, 10000.0, 0, window / 2);
	ck_assert_msg(during_up > 0.04, "during up-shift %g", during_up);
	double after_up = fire_fraction(p, &rng, 10000.0, window, 20000);
	ck_assert_msg(after_up > 0.0075 && after_up < 0.0125, "after up %g", after_up);

	/* Down tenfold: nothing fires at first, then the rate comes back. */
	double during_down = fire_fraction(p, &rng, 1000.0, 0, window / 2);
	ck_assert_msg(during_down < 0.001, "during down-shift %g", during_down);
	double after_down = fire_fraction(p, &rng, 1000.0, window, 20000);
	ck_assert_msg(after_down > 0.0075 && after_down < 0.0125, "after down %g",
		      after_down);
	ck_assert_int_eq(retrace_percentile_selfcheck(p), 0);
	retrace_percentile_destroy(p);
}
END_TEST

START_TEST(time_window_forgets_old_samples)
{
	struct retrace_percentile_config cfg = {
		.trigger_id = 3, .percentile = 99.0, .window = 10000,
		.window_ns = 40 * 1000 * 1000};
	struct recording_sink rec = {0};
	cfg.sink = recording(&rec);
	struct retrace_percentile *p = retrace_percentile_create(&cfg);
	for (uint64_t i = 0; i < 500; i++)
		retrace_percentile_add(p, test_id(i), 1000000u + i);
	ck_assert_uint_lt(retrace_percentile_threshold(p), 2000000u);

	struct timespec pause = {0, 120 * 1000 * 1000};
	nanosleep(&pause, NULL);
	ck_assert_uint_eq(retrace_percentile_threshold(p), UINT64_MAX);
	/* The old, higher samples are gone: small values now set the threshold. */
	for (uint64_t i = 0; i < 500; i++)
		retrace_percentile_add(p, test_id(i), 10u + i % 50u);
	ck_assert_uint_lt(retrace_percentile_threshold(p), 60u);
	ck_assert_int_eq(retrace_percentile_selfcheck(p), 0);
	retrace_percentile_destroy(p);
}
END_TEST

START_TEST(fires_sink_with_trace_and_trigger_id)
{
	struct recording_sink rec = {0};
	struct retrace_percentile *p = counting_percentile(99.0, 200, &rec);
	for (uint64_t i = 0; i < 200; i++)
		ck_assert_int_eq(retrace_percentile_add(p, test_id(i), 100u + i % 10u), 0);
	ck_assert_uint_eq(atomic_load(&rec.fired), 0);
	ck_assert_int_eq(retrace_percentile_add(p, test_id(777), 5000u), 1);
	ck_assert_uint_eq(atomic_load(&rec.fired), 1);
	ck_assert_uint_eq(rec.last_id.lo, test_id(777).lo);
	ck_assert_uint_eq(rec.last_id.hi, test_id(777).hi);
	ck_assert_uint_eq(rec.last_trigger, 9);
	ck_assert_uint_eq(rec.last_n_lateral, 0);
	retrace_percentile_destroy(p);
}
END_TEST

START_TEST(warmup_and_bad_configs)
{
	struct recording_sink rec = {0};
	struct retrace_percentile *p = counting_percentile(99.0, 0, &rec);
	/* Below min_samples (100 for p = 99) nothing fires, however large. */
	for (uint64_t i = 0; i < 99; i++)
		ck_assert_int_eq(retrace_percentile_add(p, test_id(i), i * 1000u), 0);
	retrace_percentile_destroy(p);

	struct retrace_percentile_config bad = {.percentile = 100.0};
	ck_assert_ptr_null(retrace_percentile_create(&bad));
	bad.percentile = 0.0;
	ck_assert_ptr_null(retrace_percentile_create(&bad));
	ck_assert_ptr_null(retrace_percentile_create(NULL));
}
END_TEST

static Suite *percentile_suite(void)
{
	Suite *s = suite_create("percentile");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, threshold_matches_exact_order_statistic);
	tcase_add_test(tc, fires_for_tail_fraction_on_stationary_stream);
	tcase_add_test(tc, batched_fires_for_tail_fraction);
	tcase_add_test(tc, adapts_after_level_shift);
	tcase_add_test(tc, time_window_forgets_old_samples);
	tcase_add_test(tc, fires_sink_with_trace_and_trigger_id);
	tcase_add_test(tc, warmup_and_bad_configs);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(percentile_suite());
}
