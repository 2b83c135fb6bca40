/*
 * Traces sharing a thread's buffer (ABI 5): consecutive traces of a thread are
 * consecutive segments of one buffer, each entry naming its offset, the buffer
 * kept (RT_ENTRY_KEPT) while an eighth of it is left and left otherwise; a
 * thread that leaves a kept buffer (shutdown) writes a close mark; and
 * RETRACE_ONE_TRACE_PER_BUFFER=1 gives every trace its own buffer again.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/collect.h"
#include "common/testpool.h"

#define REC 100

static void write_trace(uint64_t lo, size_t len)
{
	char rec[4096];
	memset(rec, (int)('a' + lo % 26), len);
	memcpy(rec, &lo, sizeof lo);
	ck_assert_int_eq(retrace_begin((retrace_trace_id){ 0x5e, lo }), 1);
	retrace_tracepoint(rec, len);
	retrace_end();
}

/* Record k of the collection is trace lo's one record of len bytes. */
static void assert_record(const struct collection *c, size_t k, uint64_t lo, size_t len)
{
	uint64_t got;
	ck_assert_uint_lt(k, c->n_recs);
	ck_assert_uint_eq(c->recs[k].trace_lo, lo);
	ck_assert_uint_eq(c->recs[k].len, len);
	memcpy(&got, c->recs[k].data, sizeof got);
	ck_assert_uint_eq(got, lo);
	ck_assert_int_eq(c->recs[k].data[len - 1], (int)('a' + lo % 26));
}

START_TEST(test_consecutive_traces_share_a_buffer)
{
	struct rt_pool pool;
	struct collection col = {0};
	char name[64];
	uint32_t k, expect_off = 0;
	test_pool_name(name, sizeof name, "segshare");
	test_pool_create(&pool, name, 4096, 4);
	test_client_init(name, 1);
	for (k = 1; k <= 5; k++)
		write_trace(k, REC);
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_bufs, 5);
	ck_assert_uint_eq(col.st.bad_complete, 0);
	for (k = 0; k < 5; k++) {
		const struct collected_buffer *b = &col.bufs[k];
		ck_assert_uint_eq(b->e.buffer_id, col.bufs[0].e.buffer_id);
		ck_assert_uint_eq(b->e.trace_lo, k + 1);
		ck_assert_uint_eq(b->e.offset, expect_off); /* right after the one before */
		ck_assert_uint_eq(b->e.flags, RT_ENTRY_KEPT);
		ck_assert_uint_eq(b->h.seq, 0);
		ck_assert(b->h.flags & RT_BUF_LAST);
		expect_off = rt_seg_next(b->e.offset, b->e.bytes);
		assert_record(&col, k, k + 1, REC);
	}
	/* kept: not back on the available queue until the thread leaves it */
	ck_assert_uint_eq(col.st.closes, 0);
	retrace_shutdown();
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.st.closes, 1);
	collection_free(&col);
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_full_buffer_is_left)
{
	struct rt_pool pool;
	struct collection col = {0};
	char name[64];
	test_pool_name(name, sizeof name, "segfull");
	test_pool_create(&pool, name, 4096, 4);
	test_client_init(name, 1);
	write_trace(1, 3600); /* less than an eighth is left after it */
	write_trace(2, REC);
	write_trace(3, 3900); /* does not fit the rest of trace 2's buffer */
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_bufs, 3);
	ck_assert_uint_eq(col.bufs[0].e.flags, 0); /* left */
	ck_assert_uint_ne(col.bufs[1].e.buffer_id, col.bufs[0].e.buffer_id);
	ck_assert_uint_eq(col.bufs[1].e.offset, 0);
	ck_assert_uint_eq(col.bufs[1].e.flags, RT_ENTRY_KEPT);
	/* trace 3 took a fresh buffer whole rather than splitting its record */
	ck_assert_uint_ne(col.bufs[2].e.buffer_id, col.bufs[1].e.buffer_id);
	ck_assert_uint_eq(col.bufs[2].e.offset, 0);
	ck_assert_uint_eq(col.st.closes, 1); /* trace 2's buffer was left with a close mark */
	assert_record(&col, 0, 1, 3600);
	assert_record(&col, 1, 2, REC);
	assert_record(&col, 2, 3, 3900);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_one_trace_per_buffer_option)
{
	struct rt_pool pool;
	struct collection col = {0};
	char name[64];
	uint32_t k;
	setenv("RETRACE_ONE_TRACE_PER_BUFFER", "1", 1);
	test_pool_name(name, sizeof name, "segold");
	test_pool_create(&pool, name, 4096, 4);
	test_client_init(name, 1);
	for (k = 1; k <= 3; k++)
		write_trace(k, REC);
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_bufs, 3);
	for (k = 0; k < 3; k++) {
		ck_assert_uint_eq(col.bufs[k].e.offset, 0);
		ck_assert_uint_eq(col.bufs[k].e.flags, 0);
		assert_record(&col, k, k + 1, REC);
	}
	/* each goes back to the pool with its entry: 4 buffers serve any number */
	for (k = 4; k <= 9; k++) {
		write_trace(k, REC);
		collect_all(&pool, &col);
	}
	ck_assert_uint_eq(col.n_bufs, 9);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
	unsetenv("RETRACE_ONE_TRACE_PER_BUFFER");
}
END_TEST

static retrace_context moved;

/* Thread B: a trace of its own (it keeps that buffer), then the moved one. */
static void *other_thread(void *arg)
{
	char rec[REC];
	(void)arg;
	write_trace(3, REC);
	retrace_attach(&moved);
	memset(rec, 'c', sizeof rec); /* trace 2's second record */
	memcpy(rec, &(uint64_t){ 2 }, 8);
	retrace_tracepoint(rec, sizeof rec);
	retrace_end();
	retrace_flush();
	return NULL;
}

/*
 * A context detached with its open segment moves its buffer to the thread that
 * attaches it; that thread already keeps a buffer of its own, so it leaves the
 * moved one at the end. Every record arrives, in order, nothing refused.
 */
START_TEST(test_detached_segment_moves_with_its_buffer)
{
	struct rt_pool pool;
	struct collection col = {0};
	char name[64], rec[REC];
	pthread_t th;
	size_t k, found = 0;
	test_pool_name(name, sizeof name, "segmove");
	test_pool_create(&pool, name, 4096, 8);
	test_client_init(name, 1); /* a stash of one: thread B finds buffers too */
	write_trace(1, REC); /* this thread keeps the buffer */
	ck_assert_int_eq(retrace_begin((retrace_trace_id){ 0x5e, 2 }), 1);
	memset(rec, 'c', sizeof rec);
	memcpy(rec, &(uint64_t){ 2 }, 8);
	retrace_tracepoint(rec, sizeof rec); /* trace 2's segment, in the kept buffer */
	retrace_detach(&moved);
	ck_assert_int_eq(pthread_create(&th, NULL, other_thread, NULL), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.st.bad_complete, 0);
	for (k = 0; k < col.n_bufs; k++) {
		const struct collected_buffer *b = &col.bufs[k];
		if (b->e.trace_lo != 2)
			continue;
		found++;
		ck_assert_uint_eq(b->e.buffer_id, col.bufs[0].e.buffer_id); /* trace 1's buffer */
		ck_assert_uint_gt(b->e.offset, 0);
		ck_assert_uint_eq(b->e.flags, 0); /* left: thread B keeps its own */
	}
	ck_assert_uint_eq(found, 1);
	for (k = 0, found = 0; k < col.n_recs; k++)
		if (col.recs[k].trace_lo == 2) {
			ck_assert_uint_eq(col.recs[k].len, REC);
			found++;
		}
	ck_assert_uint_eq(found, 2);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("client_segments");
	TCase *tc = tcase_create("segments");
	tcase_add_test(tc, test_consecutive_traces_share_a_buffer);
	tcase_add_test(tc, test_full_buffer_is_left);
	tcase_add_test(tc, test_one_trace_per_buffer_option);
	tcase_add_test(tc, test_detached_segment_moves_with_its_buffer);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
