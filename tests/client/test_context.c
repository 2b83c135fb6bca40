/*
 * Moving a trace between threads with detach/attach, and fork(): the records
 * written on both threads land in one trace in order under the original writer
 * stream; a forked child starts with no trace and never touches the parent's
 * buffers. A thread that begins the same trace twice writes two streams whose
 * buffers never share a (pid, tid, seq) key.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/collect.h"
#include "common/testpool.h"
#include "retrace/retrace.h"

static retrace_context handoff;

static void *second_thread(void *arg)
{
	(void)arg;
	retrace_attach(&handoff);
	if (retrace_current().lo != 77)
		return (void *)1;
	retrace_tracepoint("two", 3);
	retrace_tracepoint("three", 5);
	retrace_end();
	retrace_flush();
	return NULL;
}

START_TEST(test_detach_attach_across_threads)
{
	struct rt_pool pool;
	struct collection col = {0};
	char name[64];
	pthread_t th;
	void *ret;

	test_pool_name(name, sizeof name, "ctx");
	test_pool_create(&pool, name, 8192, 64);
	test_client_init(name, 4);
	retrace_begin((retrace_trace_id){5, 77});
	retrace_tracepoint("one", 3);
	retrace_detach(&handoff);
	ck_assert_uint_eq(retrace_current().lo, 0); /* this thread is out of the trace */
	retrace_tracepoint("lost", 4);              /* a no-op now */
	ck_assert_int_eq(pthread_create(&th, NULL, second_thread, NULL), 0);
	ck_assert_int_eq(pthread_join(th, &ret), 0);
	ck_assert_ptr_null(ret);
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_bufs, 1);
	ck_assert_uint_eq(col.n_recs, 3);
	ck_assert_mem_eq(col.recs[0].data, "one", 3);
	ck_assert_mem_eq(col.recs[1].data, "two", 3);
	ck_assert_mem_eq(col.recs[2].data, "three", 5);
	ck_assert_uint_eq(col.bufs[0].h.trace_hi, 5);
	/* Both threads wrote one writer stream: the one begin opened. */
	ck_assert_uint_eq(col.recs[1].tid, col.recs[0].tid);
	ck_assert_uint_eq(col.recs[2].tid, col.recs[0].tid);
	ck_assert_uint_eq(col.bufs[0].h.seq, 0);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_fork_child_fresh_state)
{
	struct rt_pool pool;
	struct collection col = {0};
	char name[64];
	size_t i, j;
	pid_t pid;
	int status;

	test_pool_name(name, sizeof name, "fork");
	test_pool_create(&pool, name, 4096, 64);
	test_client_init(name, 4);
	retrace_begin((retrace_trace_id){0, 1000});
	retrace_tracepoint("parent-1", 8); /* the parent holds a buffer and spares */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int ok = retrace_current().lo == 0;
		retrace_tracepoint("child-lost", 10); /* not in a trace: dropped */
		retrace_begin((retrace_trace_id){0, 2000});
		retrace_tracepoint("child-1", 7);
		retrace_end();
		retrace_flush();
		exit(ok ? 0 : 1); /* exit, not _exit: the registry slot is freed at exit */
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	retrace_tracepoint("parent-2", 8);
	retrace_end();
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_bufs, 2);
	ck_assert_uint_eq(col.n_recs, 3);
	for (i = 0; i < col.n_bufs; i++)
		for (j = i + 1; j < col.n_bufs; j++)
			ck_assert_uint_ne(col.bufs[i].e.buffer_id, col.bufs[j].e.buffer_id);
	for (i = 0; i < col.n_recs; i++) {
		if (col.recs[i].pid == (uint32_t)pid) {
			ck_assert_uint_eq(col.recs[i].trace_lo, 2000);
			ck_assert_mem_eq(col.recs[i].data, "child-1", 7);
		} else {
			ck_assert_uint_eq(col.recs[i].pid, (uint32_t)getpid());
			ck_assert_uint_eq(col.recs[i].trace_lo, 1000);
		}
	}
	/* The child had its own registry slot while it ran, and freed it. */
	for (i = 0; i < pool.hdr->registry_slots; i++)
		ck_assert_uint_ne(pool.registry[i].pid, (uint32_t)pid);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_trigger_group_and_breadcrumbs)
{
	struct rt_pool pool;
	struct collection col = {0};
	retrace_trace_id lat[3] = {{0, 11}, {0, 12}, {0, 13}}, many[RETRACE_MAX_LATERAL + 1];
	char name[64];
	size_t i;

	test_pool_name(name, sizeof name, "trig");
	test_pool_create(&pool, name, 4096, 16);
	test_client_init(name, 4);
	retrace_begin((retrace_trace_id){0, 10});
	retrace_tracepoint("x", 1);
	ck_assert_int_eq(retrace_breadcrumb(9), RETRACE_OK);
	ck_assert_int_eq(retrace_breadcrumb(0), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_trigger(retrace_current(), 5, lat, 3), RETRACE_OK);
	ck_assert_int_eq(retrace_trigger(retrace_current(), 5, many, RETRACE_MAX_LATERAL + 1),
			 RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_trigger((retrace_trace_id){0, 0}, 5, NULL, 0), RETRACE_E_INVAL);
	/* The trigger flushed this thread's sealed buffers ahead of it: none yet. */
	retrace_end();
	ck_assert_int_eq(retrace_breadcrumb(9), RETRACE_E_NOTRACE);
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.st.trigger_groups, 1);
	ck_assert_uint_eq(col.n_triggers, 4);
	for (i = 0; i < 4; i++) {
		ck_assert_uint_eq(col.triggers[i][0], 10 + i);
		ck_assert_uint_eq(col.triggers[i][1], 5);
		ck_assert_uint_eq(col.trigger_group[i], 4);
	}
	ck_assert_uint_eq(col.n_crumbs, 1);
	ck_assert_uint_eq(col.crumbs[0][0], 10);
	ck_assert_uint_eq(col.crumbs[0][1], 9);
	ck_assert_uint_eq(col.n_bufs, 1);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

/*
 * A pool thread serving two calls of one request: it begins trace 88, writes
 * enough for two buffers, ends; serves trace 99; begins 88 again, and once more
 * with a detach/attach round trip in the middle. Every run is its own writer
 * stream numbered from seq 0, so no two buffers share (pid, tid, seq): a reader
 * that drops a repeated key as a re-sent copy (the decoder does) loses nothing.
 */
START_TEST(test_same_trace_twice_on_one_thread)
{
	struct rt_pool pool;
	struct collection col = {0};
	retrace_context ctx;
	static char big[6000];
	char name[64];
	uint32_t streams[8];
	size_t i, j, n_streams = 0, seen_first = 0, seen_second = 0, seen_third = 0;

	memset(big, 'b', sizeof big);
	test_pool_name(name, sizeof name, "twice");
	test_pool_create(&pool, name, 4096, 64);
	test_client_init(name, 4);
	retrace_begin((retrace_trace_id){0, 88});
	retrace_tracepoint("first", 5);
	retrace_tracepoint(big, sizeof big); /* seq 0 and 1 */
	retrace_end();
	retrace_begin((retrace_trace_id){0, 99});
	retrace_tracepoint("other", 5);
	retrace_end();
	retrace_begin((retrace_trace_id){0, 88});
	retrace_tracepoint("second", 6);
	retrace_end();
	retrace_begin((retrace_trace_id){0, 88});
	retrace_tracepoint("third-a", 7);
	retrace_detach(&ctx);
	retrace_attach(&ctx); /* the stream moves with the context */
	retrace_tracepoint("third-b", 7);
	retrace_end();
	retrace_flush();
	collect_all(&pool, &col);

	for (i = 0; i < col.n_bufs; i++) {
		const struct rt_buffer_header *h = &col.bufs[i].h;
		for (j = i + 1; j < col.n_bufs; j++) {
			const struct rt_buffer_header *o = &col.bufs[j].h;
			ck_assert_msg(!(h->pid == o->pid && h->tid == o->tid && h->seq == o->seq),
				      "buffers %zu and %zu share (pid %u, tid %u, seq %u)", i, j,
				      h->pid, h->tid, h->seq);
		}
		if (h->trace_lo != 88)
			continue;
		for (j = 0; j < n_streams && streams[j] != h->tid; j++)
			;
		if (j == n_streams)
			streams[n_streams++] = h->tid;
	}
	ck_assert_uint_eq(n_streams, 3); /* three begins of trace 88 */
	ck_assert_uint_eq(col.seq_gaps, 0);
	for (i = 0; i < col.n_recs; i++) {
		const struct collected_record *r = &col.recs[i];
		if (r->trace_lo != 88)
			continue;
		if (r->len == 5 && !memcmp(r->data, "first", 5))
			seen_first++;
		else if (r->len == 6 && !memcmp(r->data, "second", 6))
			seen_second++;
		else if (r->len == 7 && !memcmp(r->data, "third-", 6))
			seen_third++;
		else
			ck_assert_uint_eq(r->len, sizeof big);
	}
	ck_assert_uint_eq(seen_first, 1);
	ck_assert_uint_eq(seen_second, 1);
	ck_assert_uint_eq(seen_third, 2);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("client_context");
	TCase *tc = tcase_create("context");
	tcase_add_test(tc, test_detach_attach_across_threads);
	tcase_add_test(tc, test_fork_child_fresh_state);
	tcase_add_test(tc, test_trigger_group_and_breadcrumbs);
	tcase_add_test(tc, test_same_trace_twice_on_one_thread);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
