/*
 * `retrace estimate` on stores with a known truth.
 *
 * two_rates: N requests, each a frontend span on host A calling payment on host
 * B (a client span on A, a server span on B; every third payment fails). Host A
 * records at rate 1/2 (shift 1), host B at 1/8 (shift 3), both by the client's
 * consistent hash of the trace id (retrace_sampled), so B's traces are a subset
 * of A's: a trace is stored with A's slice alone (partial: its client span has
 * no callee) or with both (complete). The stored slices carry the rate_exp the
 * agents would have sent (1 for A, 3 for B). The estimates of payment errors
 * (spans, traces), frontend spans and all traces must lie within 3 standard
 * errors of the truth, the naive complete-traces-only counts below it, and the
 * naive estimator's error above Ertl's where traces are partial. A store that
 * ignored the rate (rate_exp 0) would give the kept counts, ~8x too few.
 *
 * weights: every trace recorded at rate 1 and kept by selection with weight w:
 * the estimate is exactly the weighted count.
 *
 * bad_filter: malformed filters are refused with exit status 2 and a reason.
 */
#include <check.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/suite.h"
#include "evgen.h"
#include "retrace/retrace.h"
#include "store.h"

#define HOST_A 1u
#define HOST_B 2u
#define N_REQ 3000u
enum { K_SERVER = 2, K_CLIENT = 3 };
enum { ST_OK = 1, ST_ERROR = 2 };

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static char g_dir[64];

static void setup(void)
{
	snprintf(g_dir, sizeof g_dir, "/tmp/rt-estimate-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(g_dir));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", g_dir);
}

/* Put agent `agent`'s part of g into the store as one slice sent at rate 2^-rate_exp. */
static void put_part(struct rt_store *s, const struct eg *g, uint32_t agent, uint32_t rate_exp,
		     uint64_t seq)
{
	struct rt_wire_slice_buffer bufs[16];
	struct rt_wire_slice w;
	struct rt_wire_buf msg;
	struct rt_store_slice sl;
	ck_assert_uint_le(g->n_bufs, 16);
	eg_slice(g, agent, NULL, 0, &w, bufs);
	w.rate_exp = rate_exp;
	rt_wire_buf_init(&msg);
	ck_assert_int_eq(rt_wire_encode_slice(&msg, &w), 0);
	memset(&sl, 0, sizeof sl);
	sl.trace_hi = g->trace_hi;
	sl.trace_lo = g->trace_lo;
	sl.agent_id = agent;
	sl.trigger_id = 7;
	sl.slice_seq = seq;
	sl.received_ns = EG_BASE_NS;
	sl.buffers = w.buffer_count;
	sl.bytes = msg.len;
	sl.rate_exp = rate_exp;
	sl.msg = msg.data;
	sl.msg_len = msg.len;
	ck_assert_int_eq(rt_store_put_slice(s, &sl), 0);
	rt_wire_buf_free(&msg);
}

/* One request: frontend on A calls payment on B; payment fails when `error`. */
static void build_request(struct eg *g, int error)
{
	struct eg_stream *a, *b;
	eg_agent(g, HOST_A, 2000000000ull, 1000000ull, 0);
	eg_agent(g, HOST_B, 3000000000ull, 5000000ull, 0);
	a = eg_stream(g, HOST_A, 100, 1);
	eg_resource(a, "frontend", "host-a");
	eg_span_start(a, 0x10, 0, K_SERVER, EG_T(1), "GET /checkout");
	eg_span_start(a, 0x11, 0x10, K_CLIENT, EG_T(2), "call payment");
	b = eg_stream(g, HOST_B, 200, 1);
	eg_resource(b, "payment", "host-b");
	eg_span_start(b, 0x20, 0x11, K_SERVER, EG_T(3), "charge");
	eg_span_end(b, 0x20, EG_T(4000), error ? ST_ERROR : ST_OK, error ? 500 : 0,
		    error ? "declined" : NULL);
	eg_span_end(a, 0x11, EG_T(4001), ST_OK, 0, NULL);
	eg_span_end(a, 0x10, EG_T(4002), ST_OK, 0, NULL);
	eg_finish(g);
}

/*
 * Store one request as the system would have: each host's part only if that host
 * recorded the trace (its shift), its slices with that rate. weight > 0: kept by
 * selection with that inclusion weight. Returns 1 if anything was stored.
 */
static int store_request(struct rt_store *s, uint64_t lo, int error, uint32_t shift_a,
			 uint32_t shift_b, double weight)
{
	retrace_trace_id id = { 0xE57, lo };
	int keep_a = retrace_sampled(id, shift_a), keep_b = retrace_sampled(id, shift_b);
	struct rt_store_trace row;
	struct eg g;
	if (!keep_a && !keep_b)
		return 0;
	eg_init(&g, id.hi, id.lo, 4096);
	build_request(&g, error);
	memset(&row, 0, sizeof row);
	row.trace_hi = id.hi;
	row.trace_lo = id.lo;
	row.trigger_count = 1;
	row.trigger_ids[0] = error ? 8 : 7; /* the failing requests' own trigger */
	if (keep_a) {
		put_part(s, &g, HOST_A, shift_a, 1);
		row.agents[row.agent_count++] = HOST_A;
	}
	if (keep_b) {
		put_part(s, &g, HOST_B, shift_b, 1);
		row.agents[row.agent_count++] = HOST_B;
	}
	/* The traversal never hears of a host that did not record the trace: the
	 * collector calls it coherent; the decode sees the unmatched client span. */
	row.coherent = 1;
	row.first_ns = row.last_ns = row.triggered_ns = row.closed_ns = EG_BASE_NS + lo % 1000;
	row.slices = row.agent_count;
	ck_assert_int_eq(rt_store_put_trace(s, &row), 0);
	if (weight > 0) {
		row.has_selection = 1;
		row.weight = weight;
		snprintf(row.group, sizeof row.group, "frontend GET /checkout");
		ck_assert_int_eq(rt_store_set_selection(s, &row), 0);
	}
	eg_free(&g);
	return 1;
}

static struct rt_store *open_store(const char *path)
{
	struct rt_store_options o = { .path = path };
	struct rt_store *s = NULL;
	int rc = rt_store_open(&s, &o);
	ck_assert_msg(rc == 0, "%s", rt_store_errmsg(NULL));
	ck_assert_int_eq(rt_store_begin(s), 0);
	return s;
}

static void close_store(struct rt_store *s)
{
	ck_assert_int_eq(rt_store_commit(s), 0);
	rt_store_close(s);
}

/* Run the CLI; its stdout in *out (caller frees), the exit status returned. */
static int run_cli(const char *args, char **out)
{
	char cmd[1024];
	size_t cap = 0;
	FILE *p;
	int st;
	snprintf(cmd, sizeof cmd, "%s %s", CLI_BIN, args);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	*out = NULL;
	if (getdelim(out, &cap, 0, p) < 0) {
		free(*out);
		*out = strdup("");
	}
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static json_t *estimate_json(const char *path, const char *where, const char *extra)
{
	char args[512], *out;
	json_error_t e;
	json_t *j;
	int rc;
	snprintf(args, sizeof args, "estimate --json --store '%s' --where '%s' %s", path, where,
		 extra);
	rc = run_cli(args, &out);
	ck_assert_msg(rc == 0, "retrace %s: exit %d:\n%s", args, rc, out);
	j = json_loads(out, 0, &e);
	ck_assert_msg(j != NULL, "not JSON (%s):\n%s", e.text, out);
	free(out);
	return j;
}

static double num(json_t *o, const char *a, const char *b, const char *c)
{
	json_t *x = json_object_get(o, a);
	if (b)
		x = json_object_get(x, b);
	if (c)
		x = json_object_get(x, c);
	ck_assert_msg(json_is_number(x), "no number at %s.%s.%s", a, b ? b : "", c ? c : "");
	return json_number_value(x);
}

/* Estimate of `what` (spans | traces) within 3 standard errors of `truth`; the
 * naive complete-only count below it. Returns the standard error. */
static double check_estimate(json_t *all, const char *what, double truth, const char *label)
{
	json_t *v = json_object_get(all, what);
	double est = num(v, "estimate", "estimate", NULL), se = num(v, "estimate", "stderr", NULL);
	double naive = num(v, "naive", "estimate", NULL), nse = num(v, "naive", "stderr", NULL);
	double complete = num(v, "complete", NULL, NULL), kept = num(v, "kept", NULL, NULL);
	printf("estimate %s %s: truth %.0f, estimate %.0f ± %.1f, naive %.0f ± %.1f, complete %.0f, "
	       "kept %.0f\n", label, what, truth, est, se, naive, nse, complete, kept);
	ck_assert_msg(se > 0, "%s %s: no standard error", label, what);
	ck_assert_msg(fabs(est - truth) <= 3 * se, "%s %s: estimate %.1f ± %.1f, truth %.0f", label,
		      what, est, se, truth);
	ck_assert_msg(fabs(naive - truth) <= 3 * nse, "%s %s: naive %.1f ± %.1f, truth %.0f", label,
		      what, naive, nse, truth);
	ck_assert_msg(complete < truth, "%s %s: naive count %.0f not below the truth %.0f", label,
		      what, complete, truth);
	ck_assert_msg(complete <= kept, "%s %s: complete %.0f > kept %.0f", label, what, complete,
		      kept);
	ck_assert(est == floor(est)); /* powers of two: integer estimates */
	return se;
}

START_TEST(test_two_rates)
{
	char path[128];
	struct rt_store *s;
	json_t *j, *all, *groups;
	uint32_t i, errors = 0, stored = 0;
	double se_ertl, se_naive, pay_by = -1, pay_est;
	size_t k;

	snprintf(path, sizeof path, "%s/two.db", g_dir);
	s = open_store(path);
	for (i = 0; i < N_REQ; i++) {
		int error = i % 3 == 0;
		errors += error;
		stored += store_request(s, rnd() | 1, error, 1, 3, 0);
	}
	close_store(s);
	ck_assert_uint_gt(stored, N_REQ / 3);
	ck_assert_uint_lt(stored, 2 * N_REQ / 3);

	j = estimate_json(path, "service=payment,status=error", "");
	ck_assert_uint_eq((uint64_t)num(j, "traces_read", NULL, NULL), stored);
	all = json_object_get(j, "all");
	check_estimate(all, "spans", errors, "payment errors");
	check_estimate(all, "traces", errors, "payment errors");
	pay_est = num(all, "spans", "estimate", "estimate");
	json_decref(j);

	/* Frontend spans: every stored trace has them at rate 1/2; partial traces
	 * count for Ertl, not for the naive estimator (rate 1/8 for completeness). */
	j = estimate_json(path, "service=frontend", "");
	all = json_object_get(j, "all");
	se_ertl = check_estimate(all, "spans", 2.0 * N_REQ, "frontend");
	se_naive = num(json_object_get(all, "spans"), "naive", "stderr", NULL);
	ck_assert_msg(se_naive > 1.5 * se_ertl, "naive error %.1f not above Ertl's %.1f", se_naive,
		      se_ertl);
	check_estimate(all, "traces", N_REQ, "frontend");
	json_decref(j);

	/* By service: payment's row is the payment filter's estimate. */
	j = estimate_json(path, "status=error", "--by service");
	groups = json_object_get(j, "groups");
	ck_assert(json_is_array(groups));
	for (k = 0; k < json_array_size(groups); k++) {
		json_t *g = json_array_get(groups, k);
		if (!strcmp(json_string_value(json_object_get(g, "key")), "payment"))
			pay_by = num(json_object_get(g, "value"), "spans", "estimate", "estimate");
	}
	ck_assert_msg(pay_by == pay_est, "by service: payment %.0f, filtered %.0f", pay_by, pay_est);
	json_decref(j);

	/* By trigger: trigger 8 collected the failing requests, 7 the others; each
	 * row's trace count estimates its requests. */
	j = estimate_json(path, "all", "--by trigger");
	ck_assert_str_eq(json_string_value(json_object_get(j, "by")), "trigger");
	groups = json_object_get(j, "groups");
	ck_assert_uint_eq(json_array_size(groups), 2);
	for (k = 0; k < json_array_size(groups); k++) {
		json_t *g = json_array_get(groups, k), *t;
		const char *key = json_string_value(json_object_get(g, "key"));
		double truth = !strcmp(key, "8") ? errors : N_REQ - errors, est, se;
		ck_assert_msg(!strcmp(key, "7") || !strcmp(key, "8"), "trigger row '%s'", key);
		t = json_object_get(json_object_get(g, "value"), "traces");
		est = num(t, "estimate", "estimate", NULL);
		se = num(t, "estimate", "stderr", NULL);
		printf("estimate by trigger %s: truth %.0f, estimate %.0f ± %.1f\n", key, truth, est, se);
		ck_assert_msg(se > 0 && fabs(est - truth) <= 3 * se, "trigger %s: %.0f ± %.1f, truth %.0f",
			      key, est, se, truth);
	}
	json_decref(j);

	/* Durations: the payment span lasts ~1 ms, the others too; a 10 ms floor
	 * matches nothing. */
	j = estimate_json(path, "min_ms=10", "");
	ck_assert(num(json_object_get(j, "all"), "spans", "estimate", "estimate") == 0);
	json_decref(j);
}
END_TEST

START_TEST(test_weights)
{
	char path[128];
	struct rt_store *s;
	json_t *j, *all;
	uint32_t i;
	double want_spans = 0, want_traces = 0;

	snprintf(path, sizeof path, "%s/w.db", g_dir);
	s = open_store(path);
	for (i = 0; i < 200; i++) {
		double w = 1 + i % 4;
		int error = i % 5 == 0;
		ck_assert_int_eq(store_request(s, rnd() | 1, error, 0, 0, w), 1);
		want_spans += error * w;
		want_traces += error * w;
	}
	close_store(s);
	j = estimate_json(path, "status=error", "");
	ck_assert_uint_eq((uint64_t)num(j, "weighted", NULL, NULL), 200);
	all = json_object_get(j, "all");
	ck_assert_double_eq(num(all, "spans", "estimate", "estimate"), want_spans);
	ck_assert_double_eq(num(all, "traces", "estimate", "estimate"), want_traces);
	ck_assert_double_eq(num(all, "spans", "kept", NULL), 40);
	json_decref(j);
}
END_TEST

START_TEST(test_bad_filter)
{
	static const struct {
		const char *where, *says;
	} bad[] = {
		{ "servic=payment", "unknown key" },
		{ "service", "not key=value" },
		{ "=x", "not key=value" },
		{ "service=", "has no value" },
		{ "status=failed", "status is ok, error or unset" },
		{ "min_ms=abc", "min_ms wants" },
		{ "max_ms=-1", "max_ms wants" },
		{ "service=a,,status=ok", "empty term" },
		{ "service=a,service=b", "given twice" },
		{ "min_ms=5,max_ms=1", "above max_ms" },
	};
	char path[128], args[512], *out;
	struct rt_store *s;
	size_t i;

	snprintf(path, sizeof path, "%s/b.db", g_dir);
	s = open_store(path);
	close_store(s);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(args, sizeof args, "estimate --store '%s' --where '%s' 2>&1", path,
			 bad[i].where);
		ck_assert_int_eq(run_cli(args, &out), 2);
		ck_assert_msg(strstr(out, "bad filter") && strstr(out, bad[i].says),
			      "'%s': %s", bad[i].where, out);
		free(out);
	}
	snprintf(args, sizeof args, "estimate --store '%s' 2>&1", path);
	ck_assert_int_eq(run_cli(args, &out), 2);
	ck_assert_ptr_nonnull(strstr(out, "--where FILTER is required"));
	free(out);
	snprintf(args, sizeof args, "estimate --store '%s' --where all --by host 2>&1", path);
	ck_assert_int_eq(run_cli(args, &out), 2);
	free(out);
	/* an empty store: zero, not an error */
	snprintf(args, sizeof args, "estimate --store '%s' --where all", path);
	ck_assert_int_eq(run_cli(args, &out), 0);
	ck_assert_ptr_nonnull(strstr(out, "0 stored traces"));
	free(out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("coordinator_estimate");
	TCase *tc = tcase_create("estimate");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_two_rates);
	tcase_add_test(tc, test_weights);
	tcase_add_test(tc, test_bad_filter);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
