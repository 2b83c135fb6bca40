/*
 * Moving a trace between threads with detach/attach, and fork(): the records
 * written on both threads land in one trace in order under the original writer;
 * a forked child starts with no trace and never touches the parent's buffers.
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
	ck_assert_uint_eq(col.bufs[0].h.tid, (uint32_t)gettid());
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

int main(void)
{
	Suite *s = suite_create("client_context");
	TCase *tc = tcase_create("context");
	tcase_add_test(tc, test_detach_attach_across_threads);
	tcase_add_test(tc, test_fork_child_fresh_state);
	tcase_add_test(tc, test_trigger_group_and_breadcrumbs);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
