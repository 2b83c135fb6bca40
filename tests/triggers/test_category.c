/*
 * test_category.c — Category(f): a rare label fires, a common one does not, a
 * rare label that becomes common stops firing, and memory stays bounded with
 * many distinct labels. Autotriggers name their trigger ids.
 */
#include <check.h>

#include "common/suite.h"
#include <stdlib.h>

#include "test_util.h"

static struct retrace_category *category(double f, uint32_t window,
					 struct recording_sink *rec)
{
	struct retrace_category_config cfg = {
		.trigger_id = 21, .fraction = f, .window = window};
	cfg.sink = recording(rec);
	return retrace_category_create(&cfg);
}

/* Feed `n` samples where label 1 and 2 share all but 1 in `rare_every`. */
static uint64_t feed_common(struct retrace_category *c, uint64_t *rng, uint64_t n)
{
	uint64_t fired = 0;
	for (uint64_t i = 0; i < n; i++)
		fired += (uint64_t)retrace_category_add(c, test_id(i),
							1u + rng_next(rng) % 2u);
	return fired;
}

START_TEST(rare_label_fires_common_does_not)
{
	struct recording_sink rec = {0};
	struct retrace_category *c = category(0.01, 0, &rec);
	ck_assert_ptr_nonnull(c);
	uint64_t rng = 1;

	ck_assert_uint_eq(feed_common(c, &rng, 20000), 0);
	ck_assert_int_eq(retrace_category_add(c, test_id(99), retrace_label("teapot")), 1);
	ck_assert_uint_eq(rec.last_id.lo, test_id(99).lo);
	ck_assert_uint_eq(rec.last_trigger, 21);
	/* The common labels hold about half the samples each. */
	double share = retrace_category_share(c, 1);
	ck_assert_msg(share > 0.4 && share < 0.6, "share %g", share);
	retrace_category_destroy(c);
}
END_TEST

START_TEST(rare_label_stops_firing_once_common)
{
	struct recording_sink rec = {0};
	struct retrace_category *c = category(0.05, 2000, &rec);
	uint64_t rng = 2, rare = retrace_label("payments-eu");
	ck_assert_uint_eq(feed_common(c, &rng, 10000), 0);

	/* Rare: fires on each of its first appearances. */
	uint64_t first_fires = 0;
	for (int i = 0; i < 5; i++) {
		feed_common(c, &rng, 200);
		first_fires += (uint64_t)retrace_category_add(c, test_id(1000 + i), rare);
	}
	ck_assert_uint_eq(first_fires, 5);

	/* It becomes 20 % of traffic: after a window it never fires again. */
	uint64_t late_fires = 0;
	for (uint64_t i = 0; i < 20000; i++) {
		uint64_t label = i % 5u == 0 ? rare : 1u + rng_next(&rng) % 2u;
		int fired = retrace_category_add(c, test_id(i), label);
		if (i >= 2000 && label == rare)
			late_fires += (uint64_t)fired;
	}
	ck_assert_uint_eq(late_fires, 0);
	double share = retrace_category_share(c, rare);
	ck_assert_msg(share > 0.15 && share < 0.25, "share %g", share);

	struct retrace_trigger_stats st;
	retrace_category_stats(c, &st);
	ck_assert_uint_eq(st.fired, atomic_load(&rec.fired));
	ck_assert_uint_eq(st.samples, 10000 + 5 * 201 + 20000);
	retrace_category_destroy(c);
}
END_TEST

START_TEST(many_labels_bounded_and_accurate)
{
	struct recording_sink rec = {0};
	struct retrace_category *c = category(0.01, 50000, &rec);
	uint64_t rng = 3, fired_hot = 0, hot_samples = 0;
	/* Half the traffic is 5 hot labels (10 % each); the rest is 1e5 distinct ones. */
	for (uint64_t i = 0; i < 200000; i++) {
		int hot = rng_next(&rng) % 2u == 0;
		uint64_t label = hot ? 1u + rng_next(&rng) % 5u : 1000u + i;
		int fired = retrace_category_add(c, test_id(i), label);
		if (hot && i > 1000) {
			fired_hot += (uint64_t)fired;
			hot_samples++;
		}
	}
	ck_assert_uint_gt(hot_samples, 90000);
	ck_assert_uint_eq(fired_hot, 0);
	/* A label seen once is still estimated far below f despite 1e5 neighbours. */
	ck_assert_msg(retrace_category_share(c, 1000u + 199999u) < 0.002, "%g",
		      retrace_category_share(c, 1000u + 199999u));
	struct retrace_trigger_stats st;
	retrace_category_stats(c, &st);
	/* Nearly every one-off label fired (the sketch may hide a few). */
	ck_assert_uint_gt(st.fired, 95000);
	retrace_category_destroy(c);
}
END_TEST

START_TEST(bad_configs_and_labels)
{
	struct retrace_category_config cfg = {.fraction = 0.0};
	ck_assert_ptr_null(retrace_category_create(&cfg));
	cfg.fraction = 0.9;
	ck_assert_ptr_null(retrace_category_create(&cfg));
	ck_assert_uint_ne(retrace_label("a"), retrace_label("b"));
	ck_assert_uint_eq(retrace_label("abc"), retrace_label("abc"));
}
END_TEST

/* Autotriggers name their id unless the process named it first (docs/triggers.md). */
START_TEST(autotriggers_name_their_ids)
{
	struct recording_sink rec = {0};
	struct retrace_category *c = category(0.01, 1000, &rec);
	struct retrace_percentile_config pc = {.trigger_id = 22, .percentile = 99.9};
	struct retrace_percentile_config named = {.trigger_id = 23, .percentile = 99.0};
	struct retrace_percentile *p, *q;
	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(retrace_trigger_name_get(21), "category");
	p = retrace_percentile_create(&pc);
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(retrace_trigger_name_get(22), "percentile-p99.9");
	ck_assert_int_eq(retrace_trigger_name(23, "checkout-slow"), RETRACE_OK);
	q = retrace_percentile_create(&named);
	ck_assert_ptr_nonnull(q);
	ck_assert_str_eq(retrace_trigger_name_get(23), "checkout-slow");
	ck_assert_int_eq(retrace_crash_handler_install(0), 0);
	ck_assert_str_eq(retrace_trigger_name_get(RETRACE_TRIGGER_CRASH), "crash");
	retrace_crash_handler_uninstall();
	retrace_percentile_destroy(q);
	retrace_percentile_destroy(p);
	retrace_category_destroy(c);
}
END_TEST

static Suite *category_suite(void)
{
	Suite *s = suite_create("category");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, rare_label_fires_common_does_not);
	tcase_add_test(tc, rare_label_stops_firing_once_common);
	tcase_add_test(tc, many_labels_bounded_and_accurate);
	tcase_add_test(tc, bad_configs_and_labels);
	tcase_add_test(tc, autotriggers_name_their_ids);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(category_suite());
}
