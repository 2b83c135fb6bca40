/*
 * Exhausted pool: with every buffer taken and nobody draining, writes go to the
 * thread's discard buffer, the pool's null-buffer counter and the thread's
 * discard counter rise, and nothing blocks (an alarm fails the test if it does).
 * Once the pool is drained, new traces get real buffers again. A process whose
 * pool does not exist keeps running, discarding.
 */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/collect.h"
#include "common/testpool.h"
#include "retrace/retrace.h"

START_TEST(test_discard_when_exhausted)
{
	struct rt_pool pool;
	struct collection col = {0};
	struct retrace_thread_stats st;
	char name[64], rec[1000];
	uint64_t i;

	alarm(20); /* blocking would be a failure, not a hang */
	test_pool_name(name, sizeof name, "exh");
	test_pool_create(&pool, name, 4096, 4);
	test_client_init(name, 2);
	memset(rec, 'x', sizeof rec);
	/* 20 traces of ~8 KiB each need ~40 buffers; only 4 exist. */
	for (i = 1; i <= 20; i++) {
		int k;
		retrace_begin((retrace_trace_id){0, i});
		for (k = 0; k < 8; k++)
			retrace_tracepoint(rec, sizeof rec);
		retrace_end();
	}
	retrace_flush();
	retrace_thread_stats(&st);
	ck_assert_uint_eq(st.buffers_used, 4);
	ck_assert_uint_ge(st.discard_buffers, 30);
	ck_assert_uint_eq(pool.hdr->null_buffers, st.discard_buffers);
	ck_assert_uint_gt(st.discarded_bytes, 100000);
	/* The four real buffers hold the first two traces (two buffers each), intact. */
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_bufs, 4);
	ck_assert_uint_eq(col.corrupt, 0);
	ck_assert_uint_eq(col.seq_gaps, 0);
	for (i = 0; i < col.n_bufs; i++)
		ck_assert_uint_eq(col.bufs[i].h.trace_lo, 1 + i / 2);
	ck_assert_uint_eq(col.n_recs, 16);
	for (i = 0; i < col.n_recs; i++) {
		ck_assert_uint_eq(col.recs[i].len, sizeof rec);
		ck_assert_mem_eq(col.recs[i].data, rec, sizeof rec);
	}
	collection_free(&col);
	/* The drainer recycled them: a new trace writes into a real buffer again. */
	retrace_begin((retrace_trace_id){0, 99});
	retrace_tracepoint("after", 5);
	retrace_end();
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_bufs, 1);
	ck_assert_uint_eq(col.n_recs, 1);
	ck_assert_uint_eq(col.recs[0].trace_lo, 99);
	ck_assert_mem_eq(col.recs[0].data, "after", 5);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_gap_is_visible)
{
	/* A trace that lost a buffer to the discard path shows a sequence gap. */
	struct rt_pool pool;
	struct collection col = {0};
	char name[64], rec[3000];
	int k;
	test_pool_name(name, sizeof name, "gap");
	test_pool_create(&pool, name, 4096, 1);
	test_client_init(name, 1);
	memset(rec, 'y', sizeof rec);
	retrace_begin((retrace_trace_id){0, 5});
	retrace_tracepoint(rec, sizeof rec); /* buffer seq 0 */
	retrace_flush();                     /* sealed and pushed */
	retrace_tracepoint(rec, sizeof rec); /* seq 1: no buffer -> discard */
	retrace_flush();
	collect_all(&pool, &col);            /* recycles seq 0's buffer */
	for (k = 0; k < 1; k++)
		retrace_tracepoint(rec, sizeof rec); /* seq 2: real again */
	retrace_end();
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_bufs, 2);
	ck_assert_uint_eq(col.bufs[0].h.seq, 0);
	ck_assert_uint_eq(col.bufs[1].h.seq, 2);
	ck_assert_uint_eq(col.seq_gaps, 1);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_missing_pool_keeps_running)
{
	struct retrace_config cfg;
	struct retrace_thread_stats st;
	char big[50000];
	int i;
	alarm(20);
	retrace_config_from_env(&cfg);
	cfg.pool_name = "/rt-test-never-created";
	cfg.quiet = 1;
	ck_assert_int_eq(retrace_init(&cfg), RETRACE_E_NOPOOL);
	ck_assert(!retrace_attached());
	memset(big, 'z', sizeof big);
	for (i = 0; i < 100; i++) {
		void *p;
		retrace_begin((retrace_trace_id){1, (uint64_t)i + 1});
		retrace_tracepoint(big, (size_t)i * 400);
		retrace_tracepoint_ts(big, sizeof big);
		p = retrace_reserve(64);
		ck_assert_ptr_nonnull(p);
		retrace_commit(64);
		ck_assert_int_eq(retrace_trigger(retrace_current(), 7, NULL, 0), RETRACE_E_NOPOOL);
		retrace_end();
	}
	retrace_thread_stats(&st);
	ck_assert_uint_eq(st.buffers_used, 0);
	ck_assert_uint_ge(st.discard_buffers, 100);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("client_exhausted");
	TCase *tc = tcase_create("exhausted");
	tcase_add_test(tc, test_discard_when_exhausted);
	tcase_add_test(tc, test_gap_is_visible);
	tcase_add_test(tc, test_missing_pool_keeps_running);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
