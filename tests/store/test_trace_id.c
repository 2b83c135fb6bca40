/*
 * tests/store/test_trace_id.c — rt_store_parse_trace_id, the one grammar of a
 * trace id typed by a user (CLI, web API, recollect): 32 hex digits or the low
 * 16, never a zero low half, never more than n characters read.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "common/suite.h"
#include "store.h"

static int parse(const char *s, uint64_t *hi, uint64_t *lo)
{
	return rt_store_parse_trace_id(s, strlen(s), hi, lo);
}

START_TEST(full_and_short_forms)
{
	uint64_t hi = 7, lo = 7;
	ck_assert_int_eq(parse("0123456789abcdefFEDCBA9876543210", &hi, &lo), 0);
	ck_assert_uint_eq(hi, 0x0123456789abcdefull);
	ck_assert_uint_eq(lo, 0xfedcba9876543210ull);
	ck_assert_int_eq(parse("fedcba9876543210", &hi, &lo), 0);
	ck_assert_uint_eq(hi, 0);
	ck_assert_uint_eq(lo, 0xfedcba9876543210ull);
	ck_assert_int_eq(parse("1", &hi, &lo), 0);
	ck_assert_uint_eq(lo, 1);
	ck_assert_int_eq(parse("00000000000000000000000000000001", &hi, &lo), 0);
	ck_assert_uint_eq(hi, 0);
	ck_assert_uint_eq(lo, 1);
}
END_TEST

START_TEST(malformed_is_refused_and_leaves_outputs)
{
	static const char *const bad[] = {
		"", "12345678901234567", "0123456789abcdef0123456789abcdef0",
		"0123456789abcdef0123456789abcde", "xyz", "12 4", "-1", "0x12",
		"0123456789abcdef0000000000000000", "0", "0000000000000000",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		uint64_t hi = 7, lo = 7;
		ck_assert_msg(parse(bad[i], &hi, &lo) == -1, "accepted \"%s\"", bad[i]);
		ck_assert_msg(hi == 7 && lo == 7, "\"%s\" changed the outputs", bad[i]);
	}
}
END_TEST

START_TEST(reads_only_n_characters)
{
	uint64_t hi, lo;
	/* recollect's argument is not terminated: "ab\n" with n = 2 is "ab". */
	ck_assert_int_eq(rt_store_parse_trace_id("ab\n", 2, &hi, &lo), 0);
	ck_assert_uint_eq(lo, 0xab);
	ck_assert_int_eq(rt_store_parse_trace_id("ab\n", 3, &hi, &lo), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store_trace_id");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, full_and_short_forms);
	tcase_add_test(tc, malformed_is_refused_and_leaves_outputs);
	tcase_add_test(tc, reads_only_n_characters);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
