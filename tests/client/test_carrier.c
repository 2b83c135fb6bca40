/*
 * Carriers (retrace_begin_from / retrace_inject / the response pair) and the
 * trace-id generator, through a small header map like a service's own: a
 * request crosses two "services" (one pool, agent 42) and the callee continues
 * the caller's trace, parent span and hops; a missing or malformed traceparent
 * starts a new trace; the response leaves a breadcrumb to the callee; refused
 * keys and NULL callbacks are errors, never crashes. Ids: unique over 200 000,
 * low half never 0, and a forked child draws other ids than its parent.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/collect.h"
#include "common/testpool.h"
#include "retrace/retrace.h"

#define MAX_HEADERS 8

struct headers {
	char key[MAX_HEADERS][32];
	char value[MAX_HEADERS][600];
	int n;
	int refuse; /* set() fails for every key */
};

static int header_set(void *carrier, const char *key, const char *value)
{
	struct headers *h = carrier;
	if (h->refuse || h->n == MAX_HEADERS || strlen(key) >= sizeof h->key[0] ||
	    strlen(value) >= sizeof h->value[0])
		return -1;
	strcpy(h->key[h->n], key);
	strcpy(h->value[h->n], value);
	h->n++;
	return 0;
}

/* HTTP names are case-insensitive. */
static const char *header_get(void *carrier, const char *key)
{
	struct headers *h = carrier;
	for (int i = 0; i < h->n; i++)
		if (strcasecmp(h->key[i], key) == 0)
			return h->value[i];
	return NULL;
}

static void attach_pool(struct rt_pool *pool, const char *tag)
{
	char name[64];
	test_pool_name(name, sizeof name, tag);
	test_pool_create(pool, name, 4096, 16); /* agent id 42 */
	test_client_init(name, 4);
}

START_TEST(test_request_round_trip)
{
	struct rt_pool pool;
	struct headers req = {0}, resp = {0};
	struct retrace_wire_context in;
	struct collection col = {0};
	retrace_trace_id root;

	attach_pool(&pool, "carrier");
	/* The edge: no context in the request, so a new trace. */
	ck_assert_int_eq(retrace_begin_from(&req, header_get, &in), RETRACE_STARTED_NEW);
	root = retrace_current();
	ck_assert_uint_ne(root.lo, 0);
	ck_assert_uint_eq(in.trace_id.lo, root.lo);
	ck_assert_uint_eq(in.trace_id.hi, root.hi);
	ck_assert_uint_eq(in.parent_span_id, 0);
	retrace_set_span_id(0xabcdef0123456789ull);
	ck_assert_int_eq(retrace_inject(&req, header_set, "vendor=x"), RETRACE_OK);
	ck_assert_ptr_nonnull(header_get(&req, "TraceParent"));
	{ /* our ot= second: this host's threshold (rate 1) and the R it decided on */
		char want[128];
		snprintf(want, sizeof want, "rt=0000002a.00000000.0,ot=th:0;rv:%014llx,vendor=x",
			 (unsigned long long)retrace_hash_rv(root));
		ck_assert_str_eq(header_get(&req, "tracestate"), want);
	}
	retrace_end();

	/* The callee (here the same thread, after the caller's end). */
	ck_assert_int_eq(retrace_begin_from(&req, header_get, &in), 0);
	ck_assert_uint_eq(retrace_current().lo, root.lo);
	ck_assert_uint_eq(retrace_current().hi, root.hi);
	ck_assert_uint_eq(in.parent_span_id, 0xabcdef0123456789ull);
	ck_assert_uint_eq(in.hops[0], 42);
	ck_assert_int_eq(retrace_inject_response(&resp, header_set), RETRACE_OK);
	ck_assert_str_eq(header_get(&resp, RETRACE_RESPONSE_HEADER), "rt=0000002a.0");
	retrace_end();

	/* Back at a caller: a response from another host's agent leaves a crumb. */
	strcpy(resp.value[0], "rt=00000063.0");
	retrace_begin(root);
	ck_assert_int_eq(retrace_extract_response(&resp, header_get), RETRACE_OK);
	struct headers none = {0};
	ck_assert_int_eq(retrace_extract_response(&none, header_get), RETRACE_OK); /* untraced callee */
	strcpy(resp.value[0], "rt=zz");
	ck_assert_int_eq(retrace_extract_response(&resp, header_get), RETRACE_E_INVAL);
	retrace_end();
	ck_assert_int_eq(retrace_extract_response(&resp, header_get), RETRACE_E_NOTRACE);

	collect_all(&pool, &col);
	int to99 = 0;
	for (size_t i = 0; i < col.n_crumbs; i++)
		if (col.crumbs[i][0] == root.lo && col.crumbs[i][1] == 99)
			to99++;
	ck_assert_int_eq(to99, 1);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_bad_input)
{
	struct rt_pool pool;
	struct headers req = {0};
	struct retrace_wire_context in;
	retrace_trace_id prev = {7, 8};

	attach_pool(&pool, "carrier-bad");
	/* A malformed traceparent restarts the trace (W3C) and says so. */
	header_set(&req, "traceparent", "00-not-a-context");
	header_set(&req, "tracestate", "rt=00000007.00000003.1");
	retrace_begin(prev); /* the thread was in a trace: it is ended first */
	ck_assert_int_eq(retrace_begin_from(&req, header_get, &in), RETRACE_STARTED_NEW);
	ck_assert_int_eq(in.state_rejected, 1);
	ck_assert_uint_ne(retrace_current().lo, 8);
	ck_assert_uint_eq(retrace_current().lo, in.trace_id.lo);
	ck_assert_int_eq(retrace_begin_from(&req, NULL, NULL), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_begin_from(&req, header_get, NULL), RETRACE_STARTED_NEW);

	/* A carrier that refuses, and no callback. */
	struct headers full = { .refuse = 1 };
	ck_assert_int_eq(retrace_inject(&full, header_set, NULL), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_inject(&full, NULL, NULL), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_inject_response(&full, header_set), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_inject_response(&full, NULL), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_extract_response(&full, NULL), RETRACE_E_INVAL);
	retrace_end();
	struct headers out = {0};
	ck_assert_int_eq(retrace_inject(&out, header_set, NULL), RETRACE_E_NOTRACE);
	ck_assert_int_eq(out.n, 0);
	ck_assert_int_eq(retrace_inject_response(&out, header_set), RETRACE_E_NOTRACE);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

static int cmp_id(const void *a, const void *b)
{
	const retrace_trace_id *x = a, *y = b;
	if (x->hi != y->hi)
		return x->hi < y->hi ? -1 : 1;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

START_TEST(test_new_ids_unique)
{
	enum { N = 200000 };
	retrace_trace_id *ids = malloc(N * sizeof *ids);
	ck_assert_ptr_nonnull(ids);
	for (int i = 0; i < N; i++) {
		ids[i] = retrace_new_trace_id();
		if (ids[i].lo == 0)
			ck_abort_msg("id %d has a zero low half", i);
	}
	qsort(ids, N, sizeof *ids, cmp_id);
	for (int i = 1; i < N; i++)
		if (cmp_id(&ids[i - 1], &ids[i]) == 0)
			ck_abort_msg("id repeated at %d", i);
	free(ids);
}
END_TEST

/* The child of a fork must not draw the ids its parent draws next. */
START_TEST(test_new_ids_after_fork)
{
	int fd[2], status;
	retrace_trace_id mine, childs;
	pid_t pid;
	(void)retrace_new_trace_id(); /* the buffer now holds unread ids */
	ck_assert_int_eq(pipe(fd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		retrace_trace_id c = retrace_new_trace_id();
		_exit(write(fd[1], &c, sizeof c) == (ssize_t)sizeof c ? 0 : 1);
	}
	mine = retrace_new_trace_id();
	ck_assert_int_eq(read(fd[0], &childs, sizeof childs), (ssize_t)sizeof childs);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert(mine.lo != childs.lo || mine.hi != childs.hi);
	close(fd[0]);
	close(fd[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("carrier");
	TCase *tc = tcase_create("carrier");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_request_round_trip);
	tcase_add_test(tc, test_bad_input);
	tcase_add_test(tc, test_new_ids_unique);
	tcase_add_test(tc, test_new_ids_after_fork);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
