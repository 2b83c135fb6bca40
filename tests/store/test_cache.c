/*
 * tests/store/test_cache.c — the ClickHouse backend's memory of its own writes
 * (store/clickhouse_cache.c), alone: bounds, order, deletion, trigger keys.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "clickhouse_cache.h"
#include "common/suite.h"

static struct rt_store_slice slice(uint64_t hi, uint64_t lo, uint32_t agent, size_t len,
				   unsigned char *buf)
{
	struct rt_store_slice sl = { .trace_hi = hi, .trace_lo = lo, .agent_id = agent,
				     .bytes = len, .msg = buf, .msg_len = len };
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(lo + agent + i);
	return sl;
}

START_TEST(trims_oldest_first_within_bounds)
{
	struct chc c;
	unsigned char buf[1000];
	ck_assert_int_eq(chc_init(&c, 4, 3500), 0);
	for (uint64_t lo = 1; lo <= 10; lo++) {
		struct chc_trace *t = chc_touch(&c, lo);
		struct rt_store_slice sl = slice(7, lo, 1, 1000, buf);
		ck_assert_ptr_nonnull(t);
		ck_assert_int_eq(t->known, CHC_UNKNOWN);
		ck_assert_int_eq(chc_add_slice(&c, t, &sl), 0);
		chc_trim(&c);
		ck_assert_uint_le(c.ntraces, 4);
		ck_assert_uint_le(c.bytes, 3500);
	}
	/* bytes bound: 3 traces of ~1 KB fit, the newest are the ones kept */
	ck_assert_uint_eq(c.ntraces, 3);
	ck_assert_ptr_null(chc_get(&c, 7));
	for (uint64_t lo = 8; lo <= 10; lo++) {
		struct chc_trace *t = chc_get(&c, lo);
		ck_assert_ptr_nonnull(t);
		ck_assert_uint_eq(t->head->sl.msg_len, 1000);
		ck_assert_int_eq(memcmp(t->head->sl.msg, slice(7, lo, 1, 1000, buf).msg, 1000), 0);
	}
	ck_assert_uint_eq(c.nunknown, 10);
	chc_free(&c);
}
END_TEST

START_TEST(drop_slices_of_one_trace_hi)
{
	struct chc c;
	unsigned char buf[16];
	struct chc_trace *t;
	struct rt_store_slice a = slice(1, 5, 1, 16, buf), b = slice(2, 5, 2, 16, buf),
			      d = slice(1, 5, 3, 16, buf);
	struct rt_store_trace row = { .trace_hi = 1, .trace_lo = 5, .bytes = 3 };
	ck_assert_int_eq(chc_init(&c, 8, 1 << 20), 0);
	t = chc_touch(&c, 5);
	ck_assert_int_eq(chc_add_slice(&c, t, &a), 0);
	ck_assert_int_eq(chc_add_slice(&c, t, &b), 0);
	ck_assert_int_eq(chc_add_slice(&c, t, &d), 0);
	ck_assert_int_eq(chc_set_row(t, &row, 0), 0);
	chc_drop_slices(&c, t, 1);
	ck_assert_ptr_nonnull(t->head);
	ck_assert_ptr_eq(t->head, t->tail);
	ck_assert_uint_eq(t->head->sl.agent_id, 2);
	ck_assert_uint_eq(c.bytes, t->bytes);
	ck_assert_int_eq(chc_add_slice(&c, t, &a), 0); /* the tail is right after a drop */
	ck_assert_uint_eq(t->tail->sl.agent_id, 1);
	ck_assert_uint_eq(t->row->bytes, 3);
	chc_clear(&c);
	ck_assert_ptr_null(chc_get(&c, 5));
	ck_assert_uint_eq(c.bytes, 0);
	chc_free(&c);
}
END_TEST

START_TEST(trigger_keys_survive_growth)
{
	struct chc_trigs m = { 0 };
	for (uint32_t a = 1; a <= 5; a++)
		for (uint64_t seq = 1; seq <= 2000; seq++) {
			struct chc_trig *t = chc_trig_put(&m, a, seq);
			ck_assert_ptr_nonnull(t);
			ck_assert_int_eq(t->state, CHT_EMPTY);
			t->state = (uint8_t)(seq % 3 + 1);
			t->received_ns = seq * 10 + a;
		}
	ck_assert_uint_eq(m.n, 10000);
	for (uint32_t a = 1; a <= 5; a++)
		for (uint64_t seq = 1; seq <= 2000; seq++) {
			struct chc_trig *t = chc_trig_find(&m, a, seq);
			ck_assert_ptr_nonnull(t);
			ck_assert_uint_eq(t->state, seq % 3 + 1);
			ck_assert_uint_eq(t->received_ns, seq * 10 + a);
			ck_assert_ptr_eq(chc_trig_put(&m, a, seq), t);
		}
	ck_assert_ptr_null(chc_trig_find(&m, 6, 1));
	ck_assert_ptr_null(chc_trig_find(&m, 1, 2001));
	chc_trig_free(&m);
}
END_TEST

/*
 * Trace ids a sender chose to share one bucket of the unseeded mix spread out
 * in a cache (each draws its own seed): no chain is long. 100 caches, 100
 * seeds; unseeded, all 512 ids form one chain.
 */
START_TEST(chosen_ids_do_not_share_a_chain)
{
	enum { CAP = 1024, N = 512, CACHES = 100 };
	static uint64_t chosen[N];
	struct chc c;
	uint64_t lo = 1;
	uint32_t n = 0, longest = 0;
	ck_assert_int_eq(chc_init(&c, CAP, 1 << 20), 0);
	while (n < N) {
		if ((chc_mix64(lo) & (c.nbuckets - 1)) == 0)
			chosen[n++] = lo;
		lo++;
	}
	chc_free(&c);
	for (int k = 0; k < CACHES; k++) {
		ck_assert_int_eq(chc_init(&c, CAP, 1 << 20), 0);
		for (n = 0; n < N; n++)
			ck_assert_ptr_nonnull(chc_touch(&c, chosen[n]));
		for (uint32_t b = 0; b < c.nbuckets; b++) {
			uint32_t len = 0;
			for (struct chc_trace *t = c.bucket[b]; t; t = t->hnext)
				len++;
			if (len > longest)
				longest = len;
		}
		chc_free(&c);
		ck_assert_msg(longest < 12, "cache %d: a chain of %u of %u chosen ids", k, longest, N);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store_cache");
	TCase *tc = tcase_create("cache");
	tcase_add_test(tc, trims_oldest_first_within_bounds);
	tcase_add_test(tc, drop_slices_of_one_trace_hi);
	tcase_add_test(tc, trigger_keys_survive_growth);
	tcase_add_test(tc, chosen_ids_do_not_share_a_chain);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
