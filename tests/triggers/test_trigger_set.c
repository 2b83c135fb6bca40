/*
 * test_trigger_set.c — TriggerSet attaches exactly the N previous trace ids
 * (through a recording sink and through a real pool's trigger queue) and the
 * Queue trigger collects the requests dequeued ahead of a slow one.
 */
#include <check.h>

#include "common/suite.h"
#include <stdlib.h>

#include "pool_fixture.h"
#include "test_util.h"

#define SET_N 8u

/* Feed ids 0..count-1 with quiet values; each is judged, then remembered. */
static void feed_quiet(struct retrace_percentile *p, struct retrace_trigger_set *s,
		       uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		ck_assert_int_eq(retrace_percentile_add(p, test_id(i), 100u + i % 7u), 0);
		retrace_trigger_set_add(s, test_id(i));
	}
}

static struct retrace_percentile *wrapped_percentile(struct retrace_trigger_set *s)
{
	struct retrace_percentile_config cfg = {
		.trigger_id = 44, .percentile = 99.0, .window = 200};
	cfg.sink = retrace_trigger_set_sink(s);
	return retrace_percentile_create(&cfg);
}

START_TEST(laterals_are_exactly_the_n_previous_ids)
{
	struct recording_sink rec = {0};
	struct retrace_trigger_set *s = retrace_trigger_set_create(SET_N, recording(&rec));
	struct retrace_percentile *p = wrapped_percentile(s);
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_nonnull(p);

	feed_quiet(p, s, 300);
	retrace_trace_id slow = test_id(5000);
	ck_assert_int_eq(retrace_percentile_add(p, slow, 1000000u), 1);

	ck_assert_uint_eq(atomic_load(&rec.fired), 1);
	ck_assert_uint_eq(rec.last_id.lo, slow.lo);
	ck_assert_uint_eq(rec.last_trigger, 44);
	ck_assert_uint_eq(rec.last_n_lateral, SET_N);
	for (unsigned int i = 0; i < SET_N; i++) {
		ck_assert_uint_eq(rec.last_lateral[i].lo, test_id(299 - i).lo);
		ck_assert_uint_eq(rec.last_lateral[i].hi, test_id(299 - i).hi);
	}
	struct retrace_trigger_stats st;
	retrace_trigger_set_stats(s, &st);
	ck_assert_uint_eq(st.samples, 300);
	ck_assert_uint_eq(st.fired, 1);
	retrace_percentile_destroy(p);
	retrace_trigger_set_destroy(s);
}
END_TEST

START_TEST(fewer_ids_than_n_and_self_excluded)
{
	struct retrace_trigger_set *s =
		retrace_trigger_set_create(SET_N, (struct retrace_fire_sink){0});
	retrace_trace_id out[RETRACE_MAX_LATERAL];
	for (uint64_t i = 0; i < 3; i++)
		retrace_trigger_set_add(s, test_id(i));
	ck_assert_uint_eq(retrace_trigger_set_snapshot(s, out, RETRACE_MAX_LATERAL,
						       test_id(99)), 3);
	ck_assert_uint_eq(out[0].lo, test_id(2).lo);
	ck_assert_uint_eq(out[2].lo, test_id(0).lo);
	/* The fired trace itself is never its own lateral. */
	ck_assert_uint_eq(retrace_trigger_set_snapshot(s, out, RETRACE_MAX_LATERAL,
						       test_id(1)), 2);
	ck_assert_uint_eq(out[0].lo, test_id(2).lo);
	ck_assert_uint_eq(out[1].lo, test_id(0).lo);
	ck_assert_ptr_null(retrace_trigger_set_create(0, (struct retrace_fire_sink){0}));
	ck_assert_ptr_null(retrace_trigger_set_create(RETRACE_MAX_LATERAL + 1,
						      (struct retrace_fire_sink){0}));
	retrace_trigger_set_destroy(s);
}
END_TEST

START_TEST(own_laterals_come_first_and_total_is_capped)
{
	struct recording_sink rec = {0};
	struct retrace_trigger_set *s =
		retrace_trigger_set_create(RETRACE_MAX_LATERAL, recording(&rec));
	for (uint64_t i = 0; i < 100; i++)
		retrace_trigger_set_add(s, test_id(i));
	retrace_trace_id own[2] = {test_id(7000), test_id(7001)};
	struct retrace_fire_sink sink = retrace_trigger_set_sink(s);
	ck_assert_int_eq(sink.fn(sink.arg, test_id(9000), 3, own, 2), RETRACE_OK);
	ck_assert_uint_eq(rec.last_n_lateral, RETRACE_MAX_LATERAL);
	ck_assert_uint_eq(rec.last_lateral[0].lo, own[0].lo);
	ck_assert_uint_eq(rec.last_lateral[1].lo, own[1].lo);
	ck_assert_uint_eq(rec.last_lateral[2].lo, test_id(99).lo);
	ck_assert_uint_eq(rec.last_lateral[RETRACE_MAX_LATERAL - 1].lo,
			  test_id(99 - (RETRACE_MAX_LATERAL - 3)).lo);
	retrace_trigger_set_destroy(s);
}
END_TEST

START_TEST(group_reaches_the_pool_whole)
{
	ck_assert_int_eq(fixture_pool_create(), 0);
	ck_assert_int_eq(fixture_client_attach(), RETRACE_OK);
	struct retrace_trigger_set *s =
		retrace_trigger_set_create(SET_N, (struct retrace_fire_sink){0});
	struct retrace_percentile *p = wrapped_percentile(s);
	feed_quiet(p, s, 300);
	retrace_trace_id slow = test_id(5000);
	ck_assert_int_eq(retrace_percentile_add(p, slow, 1000000u), 1);

	struct fixture_trigger t[RETRACE_MAX_LATERAL + 1];
	size_t n = fixture_pop_triggers(t, RETRACE_MAX_LATERAL + 1);
	retrace_percentile_destroy(p);
	retrace_trigger_set_destroy(s);
	fixture_pool_destroy();

	ck_assert_uint_eq(n, SET_N + 1);
	ck_assert_uint_eq(t[0].trace_lo, slow.lo);
	ck_assert_uint_eq(t[0].trace_hi, slow.hi);
	for (unsigned int i = 0; i <= SET_N; i++) {
		ck_assert_uint_eq(t[i].trigger_id, 44);
		ck_assert_uint_eq(t[i].group_size, SET_N + 1);
		ck_assert_uint_eq(t[i].group_index, i);
	}
	for (unsigned int i = 1; i <= SET_N; i++)
		ck_assert_uint_eq(t[i].trace_lo, test_id(300 - i).lo);
}
END_TEST

START_TEST(queue_trigger_collects_requests_ahead)
{
	struct recording_sink rec = {0};
	struct retrace_queue_trigger_config cfg = {
		.trigger_id = 50, .percentile = 99.0, .window = 500, .lateral = 5};
	cfg.sink = recording(&rec);
	struct retrace_queue_trigger *q = retrace_queue_trigger_create(&cfg);
	ck_assert_ptr_nonnull(q);
	for (uint64_t i = 0; i < 1000; i++)
		ck_assert_int_eq(retrace_queue_trigger_dequeued(q, test_id(i),
								1000u + i % 13u), 0);
	ck_assert_int_eq(retrace_queue_trigger_dequeued(q, test_id(1000), 90000u), 1);
	ck_assert_uint_eq(rec.last_id.lo, test_id(1000).lo);
	ck_assert_uint_eq(rec.last_trigger, 50);
	ck_assert_uint_eq(rec.last_n_lateral, 5);
	for (unsigned int i = 0; i < 5; i++)
		ck_assert_uint_eq(rec.last_lateral[i].lo, test_id(999 - i).lo);
	/* The slow request is remembered too: the next firing carries it first. */
	ck_assert_int_eq(retrace_queue_trigger_dequeued(q, test_id(1001), 95000u), 1);
	ck_assert_uint_eq(rec.last_lateral[0].lo, test_id(1000).lo);
	retrace_queue_trigger_destroy(q);
}
END_TEST

static Suite *set_suite(void)
{
	Suite *s = suite_create("trigger set and queue");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, laterals_are_exactly_the_n_previous_ids);
	tcase_add_test(tc, fewer_ids_than_n_and_self_excluded);
	tcase_add_test(tc, own_laterals_come_first_and_total_is_capped);
	tcase_add_test(tc, group_reaches_the_pool_whole);
	tcase_add_test(tc, queue_trigger_collects_requests_ahead);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(set_suite());
}
