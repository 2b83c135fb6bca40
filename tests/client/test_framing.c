/*
 * Framing round trip: records of random sizes from 0 to 3x the buffer size,
 * written through tracepoint, tracepoint_ts and reserve/commit, come back
 * byte-exact (and in order) when the buffers are decoded in sequence order.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/collect.h"
#include "common/testpool.h"
#include "retrace/retrace.h"

#define BUF_SIZE 8192u

struct expected {
	uint8_t *data;
	size_t len;
	int ts;
};

static void fill_random(uint8_t *d, size_t n, unsigned *seed)
{
	size_t i;
	for (i = 0; i < n; i++)
		d[i] = (uint8_t)rand_r(seed);
}

START_TEST(test_round_trip_random_sizes)
{
	struct rt_pool pool;
	struct collection col = {0};
	struct expected *ex;
	char name[64];
	unsigned seed = 12345 + (unsigned)_i;
	size_t n = 300, i, total = 0;
	retrace_trace_id id = {0xabc, 0x1234 + (uint64_t)_i};

	test_pool_name(name, sizeof name, "frame");
	test_pool_create(&pool, name, BUF_SIZE, 2048);
	test_client_init(name, (uint32_t)(1 + _i * 7));
	ex = calloc(n, sizeof *ex);
	ck_assert_int_eq(retrace_begin(id), 1);
	for (i = 0; i < n; i++) {
		size_t len = (size_t)rand_r(&seed) % (3 * BUF_SIZE + 1);
		int how = rand_r(&seed) % 4;
		if (i % 10 == 0)
			len = (size_t)rand_r(&seed) % 16; /* many tiny ones, 0 included */
		ex[i].data = malloc(len + 1);
		ex[i].len = len;
		fill_random(ex[i].data, len, &seed);
		if (how == 3 && len <= BUF_SIZE / 2) {
			void *p = retrace_reserve(len + 17);
			ck_assert_ptr_nonnull(p);
			memcpy(p, ex[i].data, len);
			retrace_commit(len);
		} else if (how == 2) {
			ex[i].ts = 1;
			retrace_tracepoint_ts(ex[i].data, len);
		} else {
			retrace_tracepoint(ex[i].data, len);
		}
		total += len;
	}
	retrace_end();
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.st.bad_complete, 0);
	ck_assert_uint_eq(col.corrupt, 0);
	ck_assert_uint_eq(col.seq_gaps, 0);
	ck_assert_uint_eq(col.n_recs, n);
	for (i = 0; i < n; i++) {
		ck_assert_uint_eq(col.recs[i].trace_lo, id.lo);
		ck_assert_msg(col.recs[i].len == ex[i].len, "record %zu: %zu bytes, wanted %zu",
			      i, col.recs[i].len, ex[i].len);
		ck_assert_msg(memcmp(col.recs[i].data, ex[i].data, ex[i].len) == 0,
			      "record %zu differs", i);
		ck_assert_msg((col.recs[i].tick != 0) == ex[i].ts, "record %zu timestamp", i);
		free(ex[i].data);
	}
	/* Buffers came with the full trace id and consecutive sequence numbers. */
	for (i = 0; i < col.n_bufs; i++) {
		ck_assert_uint_eq(col.bufs[i].h.trace_hi, id.hi);
		ck_assert_uint_eq(col.bufs[i].h.seq, i);
		ck_assert_uint_eq(col.bufs[i].h.pid, (uint32_t)getpid());
		ck_assert(col.bufs[i].h.flags & RT_BUF_SEALED);
	}
	ck_assert(col.bufs[col.n_bufs - 1].h.flags & RT_BUF_LAST);
	ck_assert_uint_ge(col.n_bufs, total / BUF_SIZE);
	free(ex);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

/*
 * A record that fits the buffer only once the end mark is cut (it ends within
 * RETRACE_FRAME_TERM bytes of the buffer's end) is written whole, not split:
 * the split path used to copy the whole rest of the buffer from a shorter
 * record and wrap its remaining length (a crash found by the coordinator's
 * end-to-end tests).
 */
START_TEST(test_record_fills_buffer_exactly)
{
	struct rt_pool pool;
	struct collection col = {0};
	static uint8_t rec[BUF_SIZE];
	size_t lens[20], n = 0, i;
	char name[64];
	unsigned seed = 99;
	retrace_trace_id id = {0xabc, 0x777};
	uint32_t payload = BUF_SIZE - RT_BUF_HEADER_SIZE;
	uint32_t d;

	test_pool_name(name, sizeof name, "exact");
	test_pool_create(&pool, name, BUF_SIZE, 256);
	test_client_init(name, 1);
	fill_random(rec, sizeof rec, &seed);
	ck_assert_int_eq(retrace_begin(id), 1);
	for (d = 0; d <= RETRACE_FRAME_TERM + 1; d++) {
		/* 100 bytes, then what leaves 0..TERM+1 bytes at the buffer's end. */
		size_t first = 100, second = payload - (RETRACE_FRAME_HDR + first) - RETRACE_FRAME_HDR - d;
		retrace_tracepoint(rec, first);
		retrace_tracepoint(rec + 7, second);
		lens[n++] = first;
		lens[n++] = second;
	}
	retrace_end();
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.corrupt, 0);
	ck_assert_uint_eq(col.n_recs, n);
	for (i = 0; i < n; i++) {
		ck_assert_uint_eq(col.recs[i].len, lens[i]);
		ck_assert(memcmp(col.recs[i].data, rec + (i % 2 ? 7 : 0), lens[i]) == 0);
	}
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_no_trace_no_data)
{
	struct rt_pool pool;
	struct collection col = {0};
	char name[64];
	void *p;
	test_pool_name(name, sizeof name, "notrace");
	test_pool_create(&pool, name, BUF_SIZE, 16);
	test_client_init(name, 4);
	/* Outside a trace every write is a no-op and reserve still gives memory. */
	retrace_tracepoint("abc", 3);
	p = retrace_reserve(100);
	ck_assert_ptr_nonnull(p);
	memset(p, 1, 100);
	retrace_commit(100);
	ck_assert_ptr_null(retrace_reserve(BUF_SIZE * 2));
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_bufs, 0);
	/* A trace that writes nothing takes no buffer. */
	retrace_begin((retrace_trace_id){1, 2});
	retrace_end();
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_bufs, 0);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_many_traces_many_threads_shape)
{
	/* Traces interleaved on one thread keep their own buffers and sequences. */
	struct rt_pool pool;
	struct collection col = {0};
	char name[64];
	size_t i;
	test_pool_name(name, sizeof name, "many");
	test_pool_create(&pool, name, BUF_SIZE, 256);
	test_client_init(name, 8);
	for (i = 1; i <= 100; i++) {
		uint64_t v = i;
		retrace_begin((retrace_trace_id){0, i});
		retrace_tracepoint(&v, sizeof v);
		retrace_tracepoint(&v, sizeof v);
	}
	retrace_end();
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_bufs, 100);
	ck_assert_uint_eq(col.n_recs, 200);
	for (i = 0; i < col.n_recs; i++) {
		uint64_t v;
		memcpy(&v, col.recs[i].data, 8);
		ck_assert_uint_eq(v, col.recs[i].trace_lo);
	}
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("client_framing");
	TCase *tc = tcase_create("framing");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_round_trip_random_sizes, 0, 4);
	tcase_add_test(tc, test_record_fills_buffer_exactly);
	tcase_add_test(tc, test_no_trace_no_data);
	tcase_add_test(tc, test_many_traces_many_threads_shape);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
