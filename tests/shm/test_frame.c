/*
 * Frame decoder and reassembler on hand-made payloads: clean ends, corrupt
 * words, frames running past the payload, orphan continuation chunks and
 * records cut by a gap are all told apart, and nothing reads out of bounds.
 */
#include <check.h>

#include "common/testpool.h"
#include <stdlib.h>
#include <string.h>

#include "shm/frame.h"

static uint32_t put(uint8_t *b, uint32_t pos, uint32_t flags, const char *s, size_t n)
{
	uint32_t w = ((uint32_t)n << 4) | flags;
	memcpy(b + pos, &w, 4);
	memcpy(b + pos + 4, s, n);
	return pos + 4 + (uint32_t)n;
}

START_TEST(test_decode_clean_and_corrupt)
{
	uint8_t b[128] = {0};
	uint32_t pos = 0, end;
	struct rt_frame f;
	end = put(b, 0, RETRACE_FRAME_VALID, "hello", 5);
	end = put(b, end, RETRACE_FRAME_VALID, "", 0);
	ck_assert_int_eq(rt_frame_next(b, sizeof b, &pos, &f), RT_FRAME_OK);
	ck_assert_uint_eq(f.len, 5);
	ck_assert_mem_eq(f.data, "hello", 5);
	ck_assert_int_eq(rt_frame_next(b, sizeof b, &pos, &f), RT_FRAME_OK);
	ck_assert_uint_eq(f.len, 0);
	ck_assert_uint_eq(pos, end);
	ck_assert_int_eq(rt_frame_next(b, sizeof b, &pos, &f), RT_FRAME_END);
	/* The byte count bounds the walk even without an end mark. */
	pos = 0;
	ck_assert_int_eq(rt_frame_next(b, 9, &pos, &f), RT_FRAME_OK);
	ck_assert_int_eq(rt_frame_next(b, 9, &pos, &f), RT_FRAME_END);
	/* A frame longer than the payload is corrupt. */
	pos = 0;
	put(b, 0, RETRACE_FRAME_VALID, "hello", 5);
	ck_assert_int_eq(rt_frame_next(b, 8, &pos, &f), RT_FRAME_CORRUPT);
	/* A word without the VALID bit is corrupt. */
	{
		uint32_t w = 5u << 4;
		memcpy(b, &w, 4);
		pos = 0;
		ck_assert_int_eq(rt_frame_next(b, sizeof b, &pos, &f), RT_FRAME_CORRUPT);
	}
	/* A timestamped frame cut inside its tick. */
	{
		uint32_t w = (1u << 4) | RETRACE_FRAME_VALID | RETRACE_FRAME_TS;
		memcpy(b, &w, 4);
		pos = 0;
		ck_assert_int_eq(rt_frame_next(b, 10, &pos, &f), RT_FRAME_CORRUPT);
	}
}
END_TEST

START_TEST(test_reassemble_split_and_gaps)
{
	struct rt_reassembler r;
	struct rt_frame f = {0};
	const uint8_t *rec;
	size_t len;
	uint64_t tick;

	rt_reasm_init(&r);
	f.flags = RETRACE_FRAME_VALID | RETRACE_FRAME_CONT_NEXT | RETRACE_FRAME_TS;
	f.data = (const uint8_t *)"abc";
	f.len = 3;
	f.tick = 99;
	ck_assert_int_eq(rt_reasm_feed(&r, &f, &rec, &len, &tick), 0);
	f.flags = RETRACE_FRAME_VALID | RETRACE_FRAME_CONT_NEXT | RETRACE_FRAME_CONT_PREV;
	f.data = (const uint8_t *)"def";
	ck_assert_int_eq(rt_reasm_feed(&r, &f, &rec, &len, &tick), 0);
	f.flags = RETRACE_FRAME_VALID | RETRACE_FRAME_CONT_PREV;
	f.data = (const uint8_t *)"gh";
	f.len = 2;
	ck_assert_int_eq(rt_reasm_feed(&r, &f, &rec, &len, &tick), 1);
	ck_assert_uint_eq(len, 8);
	ck_assert_mem_eq(rec, "abcdefgh", 8);
	ck_assert_uint_eq(tick, 99);
	/* An orphan continuation is dropped and counted. */
	ck_assert_int_eq(rt_reasm_feed(&r, &f, &rec, &len, &tick), 0);
	ck_assert_uint_eq(r.orphans, 1);
	/* A record cut by a gap is dropped and counted; the next one is intact. */
	f.flags = RETRACE_FRAME_VALID | RETRACE_FRAME_CONT_NEXT;
	ck_assert_int_eq(rt_reasm_feed(&r, &f, &rec, &len, &tick), 0);
	rt_reasm_gap(&r);
	ck_assert_uint_eq(r.truncated, 1);
	f.flags = RETRACE_FRAME_VALID;
	f.data = (const uint8_t *)"z";
	f.len = 1;
	ck_assert_int_eq(rt_reasm_feed(&r, &f, &rec, &len, &tick), 1);
	ck_assert_mem_eq(rec, "z", 1);
	rt_reasm_free(&r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("shm_frame");
	TCase *tc = tcase_create("frame");
	tcase_add_test(tc, test_decode_clean_and_corrupt);
	tcase_add_test(tc, test_reassemble_split_and_gaps);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
