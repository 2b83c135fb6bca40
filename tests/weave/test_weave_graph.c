/* test_weave_graph.c — how the coordinator names the callee of an open hop
 * (coordinator/weave.c): the CLIENT span's peer.service; else the call graph learnt
 * from coherent hops, by (service, operation) or the service's one callee; else a
 * --weave-graph edge; else unknown. Decoded traces are built by hand. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/suite.h"
#include "coord_internal.h"
#include "retrace/tracer.h"

static struct rt_resource res[3] = {
	{.agent_id = 1, .service = "api"},
	{.agent_id = 2, .service = "backend"},
	{.agent_id = 2, .service = "cache"},
};

static struct rt_span span(const char *name, int kind, int parent, uint32_t resource,
			   struct rt_attr *attrs, uint32_t n)
{
	struct rt_span s;
	memset(&s, 0, sizeof s);
	s.name = name;
	s.kind = (uint8_t)kind;
	s.parent = parent;
	s.resource = resource;
	s.attrs = attrs;
	s.n_attrs = n;
	return s;
}

static struct rt_decoded_trace trace(struct rt_span *spans, uint32_t n)
{
	struct rt_decoded_trace t;
	memset(&t, 0, sizeof t);
	t.spans = spans;
	t.n_spans = n;
	t.resources = res;
	t.n_resources = 3;
	return t;
}

static struct rt_coord *weaving(const char *graph)
{
	struct rt_coord *c = calloc(1, sizeof *c);
	char err[256];
	ck_assert_ptr_nonnull(c);
	snprintf(c->cfg.weave, sizeof c->cfg.weave, "on");
	if (graph)
		snprintf(c->cfg.weave_graph, sizeof c->cfg.weave_graph, "%s", graph);
	ck_assert_msg(coord_weave_init(c, err, sizeof err) == 0, "%s", err);
	ck_assert_ptr_nonnull(c->weave);
	return c;
}

START_TEST(callee_by_peer_learnt_graph)
{
	char path[] = "/tmp/weave-graph-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(write(fd, "# caller callee\nbatch queue\n", 28), 0);
	close(fd);
	struct rt_coord *c = weaving(path);
	struct rt_attr peer = {"peer.service", {.type = RT_VAL_STR, .u.s = "payments"}};
	struct rt_span coherent[3] = {
		span("GET /", RETRACE_SPAN_SERVER, -1, 0, NULL, 0),
		span("call backend", RETRACE_SPAN_CLIENT, 0, 0, NULL, 0),
		span("read", RETRACE_SPAN_SERVER, 1, 1, NULL, 0),
	};
	struct rt_span open[4] = {
		span("call backend", RETRACE_SPAN_CLIENT, -1, 0, NULL, 0),
		span("call other", RETRACE_SPAN_CLIENT, -1, 0, NULL, 0),
		span("call x", RETRACE_SPAN_CLIENT, -1, 0, &peer, 1),
		span("call y", RETRACE_SPAN_CLIENT, -1, 1, NULL, 0), /* backend: learnt nothing */
	};
	struct rt_decoded_trace t1 = trace(coherent, 3), t2 = trace(open, 4);
	/* nothing learnt yet: peer.service, or unknown */
	ck_assert_ptr_null(coord_weave_callee(c, &t2, &open[0]));
	ck_assert_str_eq(coord_weave_callee(c, &t2, &open[2]), "payments");
	coord_weave_learn(c, &t1);
	ck_assert_str_eq(coord_weave_callee(c, &t2, &open[0]), "backend");
	/* api's only learnt callee stands for its other operations too */
	ck_assert_str_eq(coord_weave_callee(c, &t2, &open[1]), "backend");
	ck_assert_ptr_null(coord_weave_callee(c, &t2, &open[3]));
	/* a second callee of api: the operation decides, the rest is unknown */
	coherent[1].name = "call cache";
	coherent[2].resource = 2;
	coord_weave_learn(c, &t1);
	ck_assert_str_eq(coord_weave_callee(c, &t2, &open[0]), "backend");
	ck_assert_ptr_null(coord_weave_callee(c, &t2, &open[1]));
	/* a hop inside one service teaches nothing */
	coherent[1].name = "call self";
	coherent[2].resource = 0;
	coord_weave_learn(c, &t1);
	open[1].name = "call self";
	ck_assert_ptr_null(coord_weave_callee(c, &t2, &open[1]));
	/* the --weave-graph file for a service nothing was learnt for */
	res[1].service = "batch";
	ck_assert_str_eq(coord_weave_callee(c, &t2, &open[3]), "queue");
	res[1].service = "backend";
	coord_weave_free(c);
	free(c);
	unlink(path);
}
END_TEST

START_TEST(bad_graph_file_is_refused)
{
	char path[] = "/tmp/weave-graph-XXXXXX", err[256];
	int fd = mkstemp(path);
	struct rt_coord *c = calloc(1, sizeof *c);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(write(fd, "a b c\n", 6), 0);
	close(fd);
	snprintf(c->cfg.weave, sizeof c->cfg.weave, "on");
	snprintf(c->cfg.weave_graph, sizeof c->cfg.weave_graph, "%s", path);
	ck_assert_int_ne(coord_weave_init(c, err, sizeof err), 0);
	ck_assert_ptr_nonnull(strstr(err, ":1:"));
	ck_assert_ptr_null(c->weave);
	snprintf(c->cfg.weave_graph, sizeof c->cfg.weave_graph, "/nonexistent/graph");
	ck_assert_int_ne(coord_weave_init(c, err, sizeof err), 0);
	free(c);
	unlink(path);
}
END_TEST

/* Every caller that sends a callee calls without context is asked for its calls
 * (their roots compete with ours): the callers of the open hops seen, and the
 * --weave-graph edges, each named once. */
START_TEST(callers_of_a_callee)
{
	char path[] = "/tmp/weave-graph-XXXXXX";
	int fd = mkstemp(path);
	const char *out[8];
	uint32_t n, i;
	int api = 0, batch = 0, legacy = 0;
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(write(fd, "legacy backend\napi backend\n", 27), 0);
	close(fd);
	struct rt_coord *c = weaving(path);
	ck_assert_uint_eq(coord_weave_callers(c, "cache", out, 8), 0);
	coord_weave_note_hop(c, "api", "backend");
	coord_weave_note_hop(c, "batch", "backend");
	coord_weave_note_hop(c, "api", "backend");
	coord_weave_note_hop(c, "api", "cache");
	n = coord_weave_callers(c, "backend", out, 8);
	ck_assert_uint_eq(n, 3);
	for (i = 0; i < n; i++) {
		api += !strcmp(out[i], "api");
		batch += !strcmp(out[i], "batch");
		legacy += !strcmp(out[i], "legacy");
	}
	ck_assert_int_eq(api, 1);
	ck_assert_int_eq(batch, 1);
	ck_assert_int_eq(legacy, 1);
	ck_assert_uint_eq(coord_weave_callers(c, "backend", out, 2), 2); /* at most max */
	n = coord_weave_callers(c, "cache", out, 8);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(out[0], "api");
	coord_weave_free(c);
	free(c);
	unlink(path);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("weave_graph");
	TCase *tc = tcase_create("graph");
	tcase_add_test(tc, callee_by_peer_learnt_graph);
	tcase_add_test(tc, bad_graph_file_is_refused);
	tcase_add_test(tc, callers_of_a_callee);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(suite());
}
