/*
 * test_filter.c — each tail-sampling filter on matching and non-matching
 * summaries, AND/OR/NOT composition, the consistent probabilistic filter, the
 * rate limit, and firing through a sink.
 */
#include <check.h>

#include "common/suite.h"
#include <stdlib.h>

#include "test_util.h"

static struct retrace_span_summary summary(uint64_t duration_ns, int status,
					   const struct retrace_attr *attrs,
					   size_t n_attrs)
{
	struct retrace_span_summary s = {test_id(1), duration_ns, status, attrs, n_attrs};
	return s;
}

static const struct retrace_attr request_attrs[] = {
	{"http.status_code", RETRACE_ATTR_INT, {.i = 503}},
	{"retry.ratio", RETRACE_ATTR_DOUBLE, {.d = 0.25}},
	{"service.name", RETRACE_ATTR_STRING, {.s = "checkout"}},
};

START_TEST(latency_bounds)
{
	struct retrace_filter *f = retrace_filter_latency(5000, 0);
	struct retrace_span_summary s = summary(4999, 0, NULL, 0);
	ck_assert_int_eq(retrace_filter_match(f, &s), 0);
	s.duration_ns = 5000;
	ck_assert_int_eq(retrace_filter_match(f, &s), 1);
	retrace_filter_free(f);

	f = retrace_filter_latency(100, 200);
	s.duration_ns = 201;
	ck_assert_int_eq(retrace_filter_match(f, &s), 0);
	s.duration_ns = 150;
	ck_assert_int_eq(retrace_filter_match(f, &s), 1);
	retrace_filter_free(f);
}
END_TEST

START_TEST(status_codes)
{
	static const int codes[] = {RETRACE_STATUS_ERROR, 500};
	struct retrace_filter *f = retrace_filter_status(codes, 2);
	struct retrace_span_summary s = summary(0, RETRACE_STATUS_OK, NULL, 0);
	ck_assert_int_eq(retrace_filter_match(f, &s), 0);
	s.status_code = RETRACE_STATUS_ERROR;
	ck_assert_int_eq(retrace_filter_match(f, &s), 1);
	s.status_code = 500;
	ck_assert_int_eq(retrace_filter_match(f, &s), 1);
	retrace_filter_free(f);
	ck_assert_ptr_null(retrace_filter_status(codes, 0));
}
END_TEST

START_TEST(numeric_and_string_attributes)
{
	struct retrace_span_summary s = summary(0, 0, request_attrs, 3);
	struct retrace_filter *f = retrace_filter_numeric("http.status_code", 500, 599);
	ck_assert_int_eq(retrace_filter_match(f, &s), 1);
	retrace_filter_free(f);
	f = retrace_filter_numeric("http.status_code", 200, 299);
	ck_assert_int_eq(retrace_filter_match(f, &s), 0);
	retrace_filter_free(f);
	f = retrace_filter_numeric("retry.ratio", 0.2, 1.0);
	ck_assert_int_eq(retrace_filter_match(f, &s), 1);
	retrace_filter_free(f);
	f = retrace_filter_numeric("absent", -1e9, 1e9);
	ck_assert_int_eq(retrace_filter_match(f, &s), 0);
	retrace_filter_free(f);
	f = retrace_filter_numeric("service.name", -1e9, 1e9); /* wrong type */
	ck_assert_int_eq(retrace_filter_match(f, &s), 0);
	retrace_filter_free(f);

	const char *services[] = {"cart", "checkout"};
	f = retrace_filter_string("service.name", services, 2, 0);
	ck_assert_int_eq(retrace_filter_match(f, &s), 1);
	retrace_filter_free(f);
	f = retrace_filter_string("service.name", services, 1, 0);
	ck_assert_int_eq(retrace_filter_match(f, &s), 0);
	retrace_filter_free(f);
	f = retrace_filter_string("service.name", services, 2, 1); /* inverted */
	ck_assert_int_eq(retrace_filter_match(f, &s), 0);
	retrace_filter_free(f);
	f = retrace_filter_string("absent", services, 2, 1);
	ck_assert_int_eq(retrace_filter_match(f, &s), 1);
	retrace_filter_free(f);
}
END_TEST

START_TEST(and_or_not_composition)
{
	static const int error[] = {RETRACE_STATUS_ERROR};
	const char *checkout[] = {"checkout"};
	/* (latency >= 1 ms AND service = checkout) OR status = ERROR */
	struct retrace_filter *slow_checkout[] = {
		retrace_filter_latency(1000000, 0),
		retrace_filter_string("service.name", checkout, 1, 0)};
	struct retrace_filter *either[] = {retrace_filter_and(slow_checkout, 2),
					   retrace_filter_status(error, 1)};
	struct retrace_filter *f = retrace_filter_or(either, 2);
	ck_assert_ptr_nonnull(f);

	struct retrace_span_summary s = summary(2000000, RETRACE_STATUS_OK,
						request_attrs, 3);
	ck_assert_int_eq(retrace_filter_match(f, &s), 1);
	s.duration_ns = 10;
	ck_assert_int_eq(retrace_filter_match(f, &s), 0);
	s.status_code = RETRACE_STATUS_ERROR;
	ck_assert_int_eq(retrace_filter_match(f, &s), 1);
	s.n_attrs = 0;
	s.status_code = RETRACE_STATUS_OK;
	s.duration_ns = 2000000;
	ck_assert_int_eq(retrace_filter_match(f, &s), 0);

	struct retrace_filter *n = retrace_filter_not(f);
	ck_assert_int_eq(retrace_filter_match(n, &s), 1);
	retrace_filter_free(n);

	/* A NULL child fails the node and frees the others. */
	struct retrace_filter *broken[] = {retrace_filter_latency(1, 0), NULL};
	ck_assert_ptr_null(retrace_filter_and(broken, 2));
}
END_TEST

START_TEST(probabilistic_is_consistent_and_proportional)
{
	struct retrace_filter *f = retrace_filter_probabilistic(0.1);
	struct retrace_span_summary s = summary(0, 0, NULL, 0);
	uint64_t rng = 5, kept = 0;
	const uint64_t n = 100000;
	for (uint64_t i = 0; i < n; i++) {
		s.trace_id.lo = rng_next(&rng);
		int first = retrace_filter_match(f, &s);
		ck_assert_int_eq(retrace_filter_match(f, &s), first); /* same id, same answer */
		ck_assert_int_eq(first, retrace_trace_hash(s.trace_id) < UINT64_MAX / 10);
		kept += (uint64_t)first;
	}
	ck_assert_msg(kept > 9400 && kept < 10600, "kept %llu", (unsigned long long)kept);
	retrace_filter_free(f);
	f = retrace_filter_probabilistic(1.0);
	ck_assert_int_eq(retrace_filter_match(f, &s), 1);
	retrace_filter_free(f);
	f = retrace_filter_probabilistic(0.0);
	ck_assert_int_eq(retrace_filter_match(f, &s), 0);
	retrace_filter_free(f);
}
END_TEST

START_TEST(rate_limit_allows_burst_then_rate)
{
	/* 1 per second with a burst of 5: a tight loop gets exactly 5. */
	struct retrace_filter *f = retrace_filter_rate_limit(1.0, 5.0);
	struct retrace_span_summary s = summary(0, 0, NULL, 0);
	uint64_t allowed = 0;
	for (int i = 0; i < 1000; i++)
		allowed += (uint64_t)retrace_filter_match(f, &s);
	ck_assert_uint_eq(allowed, 5);
	retrace_filter_free(f);
	ck_assert_ptr_null(retrace_filter_rate_limit(0.0, 1.0));
}
END_TEST

START_TEST(fire_calls_sink_only_on_match)
{
	struct recording_sink rec = {0};
	struct retrace_fire_sink sink = recording(&rec);
	struct retrace_filter *f = retrace_filter_latency(100, 0);
	struct retrace_span_summary s = summary(50, 0, NULL, 0);
	ck_assert_int_eq(retrace_filter_fire(f, 12, &s, &sink), 0);
	ck_assert_uint_eq(atomic_load(&rec.fired), 0);
	s.duration_ns = 150;
	ck_assert_int_eq(retrace_filter_fire(f, 12, &s, &sink), 1);
	ck_assert_uint_eq(atomic_load(&rec.fired), 1);
	ck_assert_uint_eq(rec.last_trigger, 12);
	ck_assert_uint_eq(rec.last_id.lo, s.trace_id.lo);
	ck_assert_int_eq(retrace_filter_fire(NULL, 12, &s, &sink), RETRACE_E_INVAL);
	retrace_filter_free(f);
}
END_TEST

static Suite *filter_suite(void)
{
	Suite *s = suite_create("filters");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, latency_bounds);
	tcase_add_test(tc, status_codes);
	tcase_add_test(tc, numeric_and_string_attributes);
	tcase_add_test(tc, and_or_not_composition);
	tcase_add_test(tc, probabilistic_is_consistent_and_proportional);
	tcase_add_test(tc, rate_limit_allows_burst_then_rate);
	tcase_add_test(tc, fire_calls_sink_only_on_match);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(filter_suite());
}
