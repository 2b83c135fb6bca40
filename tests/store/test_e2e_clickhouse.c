/*
 * tests/store/test_e2e_clickhouse.c — the real coordinator collecting triggered
 * traces into a real ClickHouse server, and the `retrace` CLI reading them back.
 *
 * One deployment on loopback (tests/coordinator/cluster.h: retrace-coordinator
 * with --store clickhouse://..., three retrace-agents, writer processes with
 * libretrace) writes traces across hosts with deterministic records and fires
 * triggers. Checked: every trace is stored coherent with every agent, and
 * `retrace show --records --store clickhouse://...` returns each host's records
 * byte for byte. Then every stored row is copied through the store interface
 * into a SQLite file, and `retrace traces / show / export / estimate` must
 * print exactly the same on both stores. The decoded spans are also rows of
 * otel_traces (the OpenTelemetry Collector exporter's layout), checked by SQL.
 *
 * Exit 77 (skipped) only when clickhouse-server is not installed.
 */
#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster.h"
#include "common/suite.h"
#include "retrace/tracer.h"
#include "store/chserver.h"

#define HI 0x0123456789abcdefull
#define ERROR_TRIGGER 100
#define RECORDS 12
#define NTRACES 4     /* raw records, 3 hosts each */
#define NSPANS 2      /* spans, logs and attributes over 2 hosts */
#define SPAN_TRIGGER 200

static struct chserver g_ch;

/* ------------------------------------------- spans in the writers ---- */

/* Runs in host h's writer: frontend (host 0) calls cart (host 1), which fails
 * and fires the trigger. io->in/out carry traceparent and tracestate. */
static int run_host(int host, retrace_trace_id id, struct cl_run_io *io)
{
	char tp[64], ts[160], copy[sizeof io->in], *state;
	struct retrace_wire_context w;
	retrace_set_service_name(host == 0 ? "frontend" : "cart");
	if (host == 0) {
		retrace_begin(id);
		retrace_span_start("GET /checkout", RETRACE_SPAN_SERVER);
		retrace_attr_str("http.method", "GET");
		retrace_attr_int("http.status_code", 500);
		retrace_serialize(tp, sizeof tp, ts, sizeof ts, NULL);
		snprintf(io->out, sizeof io->out, "%s\n%s", tp, ts);
		retrace_log(RETRACE_LOG_WARN, "cart answered %d for %s", 503, "user-7");
		retrace_span_end_error(500, "cart failed");
		retrace_end();
		return 0;
	}
	snprintf(copy, sizeof copy, "%s", io->in);
	if (!(state = strchr(copy, '\n')))
		return -1;
	*state++ = 0;
	if (retrace_deserialize(copy, state, &w) != RETRACE_OK || w.trace_id.lo != id.lo)
		return -1;
	retrace_begin(w.trace_id);
	retrace_span_start("POST /cart/reserve", RETRACE_SPAN_SERVER);
	retrace_attr_double("cart.total", 12.5);
	retrace_log(RETRACE_LOG_ERROR, "reserve failed after %d tries", 3);
	retrace_span_end_error(503, "no stock");
	retrace_trigger(id, SPAN_TRIGGER, NULL, 0);
	retrace_end();
	return 0;
}

/* ----------------------------------------------- copy into SQLite ---- */

struct copy {
	struct rt_store *from, *to;
	int traces, slices;
};

static int copy_slice(void *arg, const struct rt_store_slice *sl)
{
	struct copy *c = arg;
	ck_assert_int_eq(rt_store_put_slice(c->to, sl), 0);
	c->slices++;
	return 0;
}

static int copy_trace(void *arg, const struct rt_store_trace *t)
{
	struct copy *c = arg;
	ck_assert_int_eq(rt_store_begin(c->to), 0);
	ck_assert_int_eq(rt_store_slices(c->from, t->trace_hi, t->trace_lo, copy_slice, c), 0);
	ck_assert_int_eq(rt_store_put_trace(c->to, t), 0);
	if (t->has_selection)
		ck_assert_int_eq(rt_store_set_selection(c->to, t), 0);
	ck_assert_int_eq(rt_store_commit(c->to), 0);
	c->traces++;
	return 0;
}

/* --------------------------------------------------------- the CLI ---- */

/* The output of `retrace ARGS --store STORE` (malloc'd), its exit status in *status. */
static char *cli(const char *args, const char *store, int *status)
{
	char cmd[1024], *out = NULL;
	size_t cap = 0, len = 0;
	FILE *p;
	snprintf(cmd, sizeof cmd, "%s %s --store '%s' 2>&1", CLI_BIN, args, store);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	for (;;) {
		if (cap - len < 4096) {
			cap = cap ? cap * 2 : 65536;
			out = realloc(out, cap);
			ck_assert_ptr_nonnull(out);
		}
		size_t n = fread(out + len, 1, cap - len - 1, p);
		if (!n)
			break;
		len += n;
	}
	out[len] = 0;
	*status = pclose(p);
	return out;
}

/* Every occurrence of `what` in s becomes "STORE" (a summary names its store). */
static void unname(char *s, const char *what)
{
	size_t n = strlen(what);
	char *p;
	while ((p = strstr(s, what))) {
		memcpy(p, "STORE", 5);
		memmove(p + 5, p + n, strlen(p + n) + 1);
	}
}

static void same_output(const char *args, const char *a, const char *b)
{
	int sa, sb;
	char *oa = cli(args, a, &sa), *ob = cli(args, b, &sb);
	unname(oa, a);
	unname(ob, b);
	ck_assert_msg(sa == 0, "retrace %s --store %s: status %d\n%s", args, a, sa, oa);
	ck_assert_msg(sb == 0, "retrace %s --store %s: status %d\n%s", args, b, sb, ob);
	ck_assert_msg(strlen(oa) > 20, "retrace %s: next to no output: %s", args, oa);
	ck_assert_msg(strcmp(oa, ob) == 0, "retrace %s differs\n--- %s\n%s\n--- %s\n%s", args, a,
		      oa, b, ob);
	free(oa);
	free(ob);
}

/* The spans as rows of otel_traces, the OpenTelemetry Collector exporter's layout. */
static void check_otel_rows(void)
{
	char sql[1024], want[512], *got = NULL;
	for (int i = 0; i < NSPANS; i++) {
		snprintf(sql, sizeof sql,
			 "SELECT ServiceName, SpanName, SpanKind, StatusCode, StatusMessage,"
			 " length(Events.Name), Events.Name[1],"
			 " SpanAttributes.values[indexOf(SpanAttributes.keys, 'http.status_code')],"
			 " SpanAttributes.values[indexOf(SpanAttributes.keys, 'cart.total')],"
			 " ResourceAttributes.values[indexOf(ResourceAttributes.keys, 'service.name')],"
			 " TraceId = '%016llx%016llx', Duration > 0, ParentSpanId = '' FROM"
			 " (SELECT * FROM e2e_%d.otel_traces FINAL WHERE trace_lo = %llu)"
			 " WHERE deleted = 0 ORDER BY ServiceName FORMAT TabSeparated",
			 HI, (unsigned long long)(0x6001 + i), (int)getpid(),
			 (unsigned long long)(0x6001 + i));
		ck_assert_msg(chs_sql(&g_ch, sql, &got) == 0, "%s: %s", sql, got);
		snprintf(want, sizeof want,
			 "cart\tPOST /cart/reserve\tSPAN_KIND_SERVER\tSTATUS_CODE_ERROR\tno stock\t1\t"
			 "reserve failed after 3 tries\t\t12.5\tcart\t1\t1\t0\n"
			 "frontend\tGET /checkout\tSPAN_KIND_SERVER\tSTATUS_CODE_ERROR\tcart failed\t1\t"
			 "cart answered 503 for user-7\t500\t\tfrontend\t1\t1\t1\n");
		ck_assert_msg(strcmp(got, want) == 0, "otel_traces rows of trace %d:\n%s\nwant:\n%s", i,
			      got, want);
		free(got);
		/* cart's parent is frontend's span */
		snprintf(sql, sizeof sql,
			 "SELECT count() FROM (SELECT * FROM e2e_%d.otel_traces FINAL WHERE trace_lo = %llu"
			 " AND ServiceName = 'cart') WHERE ParentSpanId IN (SELECT SpanId FROM"
			 " e2e_%d.otel_traces FINAL WHERE trace_lo = %llu AND ServiceName = 'frontend')",
			 (int)getpid(), (unsigned long long)(0x6001 + i), (int)getpid(),
			 (unsigned long long)(0x6001 + i));
		ck_assert_int_eq(chs_sql(&g_ch, sql, &got), 0);
		ck_assert_msg(atoi(got) == 1, "cart's parent is not frontend's span: %s", got);
		free(got);
	}
}

START_TEST(coordinator_into_clickhouse_cli_same_as_sqlite)
{
	char store[256], sqlite_path[320], why[256], args[128];
	struct cluster c;
	struct rt_store_trace t;
	struct rt_store_options ro, rw;
	struct copy cp = { 0 };
	struct rt_store_query all = { 0 };
	uint32_t to1 = 1, to2 = 2;

	snprintf(store, sizeof store, "%s/e2e_%d", g_ch.url, (int)getpid());
	cl_store_locator = store;
	cl_run_fn = run_host;
	ck_assert_int_eq(cl_start(&c, 3, 256), 0);
	for (int i = 0; i < NTRACES; i++) { /* 1 -> 2 -> 3, the trigger on host 3 */
		uint64_t lo = 0x5001 + (uint64_t)i;
		ck_assert_int_eq(cl_write(&c, 0, HI, lo, RECORDS, NULL, 0), 0);
		ck_assert_int_eq(cl_write(&c, 1, HI, lo, RECORDS, &to1, 1), 0);
		ck_assert_int_eq(cl_write(&c, 2, HI, lo, RECORDS, &to2, 1), 0);
		ck_assert_int_eq(cl_trigger(&c, 2, HI, lo, ERROR_TRIGGER + (uint32_t)i, NULL, 0), 0);
	}
	for (int i = 0; i < NTRACES; i++) {
		uint64_t lo = 0x5001 + (uint64_t)i;
		ck_assert_msg(cl_wait_trace(&c, HI, lo, 20, &t) == 0, "trace %llx never stored",
			      (unsigned long long)lo);
		ck_assert_msg(t.coherent, "trace %llx incoherent: %u agents, %u missing",
			      (unsigned long long)lo, t.agent_count, t.missing_count);
		ck_assert_uint_eq(t.agent_count, 3);
		ck_assert_uint_eq(t.trigger_ids[0], ERROR_TRIGGER + (uint32_t)i);
		for (int h = 0; h < 3; h++)
			ck_assert_msg(cl_check_records(&c, HI, lo, h, RECORDS, why, sizeof why) == 0,
				      "trace %llx: %s", (unsigned long long)lo, why);
	}
	for (int i = 0; i < NSPANS; i++) {
		uint64_t lo = 0x6001 + (uint64_t)i;
		struct cl_run_io io = { 0 };
		ck_assert_int_eq(cl_run(&c, 0, HI, lo, &io), 0);
		ck_assert_int_eq(io.ok, 1);
		memcpy(io.in, io.out, sizeof io.in);
		ck_assert_int_eq(cl_run(&c, 1, HI, lo, &io), 0);
		ck_assert_int_eq(io.ok, 1);
		ck_assert_msg(cl_wait_trace(&c, HI, lo, 20, &t) == 0, "span trace %llx never stored",
			      (unsigned long long)lo);
		ck_assert_msg(t.coherent, "span trace %llx incoherent", (unsigned long long)lo);
		ck_assert_uint_eq(t.agent_count, 2);
	}
	ck_assert_msg(cl_coord_figure(&c, "store", "errors") <= 0, "the coordinator saw store errors");
	check_otel_rows();
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");

	/* The same rows in a SQLite file. */
	snprintf(sqlite_path, sizeof sqlite_path, "%s/copy.db", g_ch.dir);
	ro = (struct rt_store_options){ .path = store, .readonly = 1 };
	rw = (struct rt_store_options){ .path = sqlite_path };
	ck_assert_int_eq(rt_store_open(&cp.from, &ro), 0);
	ck_assert_int_eq(rt_store_open(&cp.to, &rw), 0);
	ck_assert_int_eq(rt_store_list(cp.from, &all, copy_trace, &cp), 0);
	ck_assert_int_eq(cp.traces, NTRACES + NSPANS);
	ck_assert_int_ge(cp.slices, 3 * NTRACES + 2 * NSPANS);
	rt_store_close(cp.from);
	rt_store_close(cp.to);

	same_output("traces", store, sqlite_path);
	same_output("traces --json", store, sqlite_path);
	same_output("traces --trigger 101 --json", store, sqlite_path);
	for (int i = 0; i < NTRACES; i++) {
		snprintf(args, sizeof args, "show --records %016llx%016llx", HI,
			 (unsigned long long)(0x5001 + i));
		same_output(args, store, sqlite_path);
		snprintf(args, sizeof args, "show --json %016llx", (unsigned long long)(0x5001 + i));
		same_output(args, store, sqlite_path);
	}
	for (int i = 0; i < NSPANS; i++) {
		snprintf(args, sizeof args, "show --attrs %016llx", (unsigned long long)(0x6001 + i));
		same_output(args, store, sqlite_path);
	}
	same_output("export --all -f otlp-json -o -", store, sqlite_path);
	same_output("export --all -f zipkin -o -", store, sqlite_path);
	same_output("estimate --where all --json", store, sqlite_path);
	same_output("estimate --where all --by service", store, sqlite_path);
	same_output("estimate --where service=cart,status=error --json", store, sqlite_path);
	{ /* the estimate is not vacuous: the failing cart spans are there */
		int st;
		char *o = cli("estimate --where service=cart --json", store, &st);
		ck_assert_msg(strstr(o, "\"complete\":2,\"kept\":2}"), "cart spans not counted: %s", o);
		free(o);
	}
	cl_store_locator = NULL;
}
END_TEST

int main(void)
{
	char why[4096];
	Suite *s;
	TCase *tc;
	int rc;
	if (!chs_binary()) {
		printf("SKIP: clickhouse-server is not installed (bash scripts/deps.sh installs it)\n");
		return 77;
	}
	if (chs_start(&g_ch, NULL, why, sizeof why) != 0) {
		fprintf(stderr, "FAIL: cannot start clickhouse-server: %s\n", why);
		return 1;
	}
	s = suite_create("store_e2e_clickhouse");
	tc = tcase_create("coordinator_into_clickhouse_cli_same_as_sqlite");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, coordinator_into_clickhouse_cli_same_as_sqlite);
	suite_add_tcase(s, tc);
	rc = test_run_suite(s);
	chs_stop(&g_ch);
	return rc;
}
