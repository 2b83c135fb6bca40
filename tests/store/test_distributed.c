/*
 * tests/store/test_distributed.c — the multi-node layout: two ClickHouse
 * servers on loopback as two shards, each the store of its own writer (one
 * coordinator per shard, owning half the trace ids), and a Distributed table
 * over both that reads every trace once.
 *
 * Each server's config names the cluster `retrace_2shards` (both servers' TCP
 * ports). The writers go through the store interface; the Distributed tables
 * are made with the SQL docs/store.md gives. Checked from either server: every
 * trace is there exactly once with its own bytes, slices add up across the
 * shards, and a trace deleted on its shard is gone from the union.
 *
 * Exit 77 (skipped) only when clickhouse-server is not installed.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/suite.h"
#include "store.h"
#include "store/chserver.h"

#define NTRACES 40
#define SEC 1000000000ull

static struct chserver g_a, g_b;

static const char dist_sql[][200] = {
	"CREATE TABLE IF NOT EXISTS retrace.traces_all AS retrace.traces "
	"ENGINE = Distributed(retrace_2shards, retrace, traces)",
	"CREATE TABLE IF NOT EXISTS retrace.slices_all AS retrace.slices "
	"ENGINE = Distributed(retrace_2shards, retrace, slices)",
};

static void write_shard(const struct chserver *srv, int shard)
{
	char loc[160];
	struct rt_store_options o = { .path = loc };
	struct rt_store *s = NULL;
	unsigned char msg[300];
	snprintf(loc, sizeof loc, "%s/retrace", srv->url);
	ck_assert_msg(rt_store_open(&s, &o) == 0, "%s: %s", loc, rt_store_errmsg(NULL));
	ck_assert_int_eq(rt_store_begin(s), 0);
	for (uint64_t lo = 1; lo <= NTRACES; lo++) {
		struct rt_store_trace t = { 0 };
		if ((int)(lo % 2) != shard) /* the owner of lo: its shard's coordinator */
			continue;
		for (uint32_t a = 1; a <= 2; a++) {
			struct rt_store_slice sl = { .trace_hi = 9, .trace_lo = lo, .agent_id = a,
						     .slice_seq = 1, .received_ns = 1000 * SEC + lo,
						     .bytes = 100 + lo, .msg = msg,
						     .msg_len = 100 + lo };
			memset(msg, (int)lo, sizeof msg);
			ck_assert_int_eq(rt_store_put_slice(s, &sl), 0);
		}
		t.trace_hi = 9;
		t.trace_lo = lo;
		t.coherent = 1;
		t.bytes = 2 * (100 + lo);
		t.slices = 2;
		t.closed_ns = 2000 * SEC + lo;
		ck_assert_int_eq(rt_store_put_trace(s, &t), 0);
	}
	ck_assert_int_eq(rt_store_commit(s), 0);
	if (shard == 1)
		ck_assert_int_eq(rt_store_delete_trace(s, 9, 39), 0);
	rt_store_close(s);
}

/* The one line a query answers, without its newline. */
static char *answer(const struct chserver *srv, const char *sql)
{
	char *r = NULL;
	int rc = chs_sql(srv, sql, &r);
	ck_assert_msg(rc == 0, "%s: %s", sql, r ? r : "");
	r[strcspn(r, "\n")] = 0;
	return r;
}

START_TEST(distributed_reads_each_trace_once)
{
	const struct chserver *srv[2] = { &g_a, &g_b };
	uint64_t want_bytes = 0;
	char want[128], *got;
	write_shard(&g_a, 0);
	write_shard(&g_b, 1);
	for (uint64_t lo = 1; lo <= NTRACES; lo++)
		if (lo != 39)
			want_bytes += 2 * (100 + lo);
	for (int i = 0; i < 2; i++) {
		for (size_t k = 0; k < sizeof dist_sql / sizeof *dist_sql; k++)
			free(answer(srv[i], dist_sql[k]));
		/* Each shard holds its half. */
		got = answer(srv[i], "SELECT count() FROM (SELECT deleted FROM retrace.traces FINAL) "
				     "WHERE deleted = 0");
		ck_assert_str_eq(got, i == 0 ? "20" : "19");
		free(got);
		/* The union, from either server. */
		got = answer(srv[i], "SELECT count(), uniqExact(trace_lo), sum(bytes), min(trace_lo), "
				     "max(trace_lo) FROM (SELECT trace_lo, bytes, deleted FROM "
				     "retrace.traces_all FINAL) WHERE deleted = 0");
		snprintf(want, sizeof want, "%d\t%d\t%llu\t1\t40", NTRACES - 1, NTRACES - 1,
			 (unsigned long long)want_bytes);
		ck_assert_msg(strcmp(got, want) == 0, "server %d: '%s', want '%s'", i, got, want);
		free(got);
		got = answer(srv[i], "SELECT count(), sum(bytes) FROM (SELECT bytes, deleted FROM "
				     "retrace.slices_all FINAL) WHERE deleted = 0");
		snprintf(want, sizeof want, "%d\t%llu", 2 * (NTRACES - 1),
			 (unsigned long long)want_bytes);
		ck_assert_msg(strcmp(got, want) == 0, "server %d slices: '%s', want '%s'", i, got,
			      want);
		free(got);
		got = answer(srv[i], "SELECT count() FROM (SELECT deleted FROM retrace.traces_all "
				     "FINAL WHERE trace_lo = 39) WHERE deleted = 0");
		ck_assert_str_eq(got, "0");
		free(got);
	}
}
END_TEST

int main(void)
{
	char why[4096], remote[512];
	int tcp_a, tcp_b, rc;
	Suite *s;
	TCase *tc;
	if (!chs_binary()) {
		printf("SKIP: clickhouse-server is not installed (bash scripts/deps.sh installs it)\n");
		return 77;
	}
	tcp_a = chs_free_port();
	tcp_b = chs_free_port();
	snprintf(remote, sizeof remote,
		 "<retrace_2shards>"
		 "<shard><replica><host>127.0.0.1</host><port>%d</port></replica></shard>"
		 "<shard><replica><host>127.0.0.1</host><port>%d</port></replica></shard>"
		 "</retrace_2shards>", tcp_a, tcp_b);
	if (chs_start_on(&g_a, 0, tcp_a, remote, why, sizeof why) != 0) {
		fprintf(stderr, "FAIL: cannot start clickhouse-server A: %s\n", why);
		return 1;
	}
	if (chs_start_on(&g_b, 0, tcp_b, remote, why, sizeof why) != 0) {
		fprintf(stderr, "FAIL: cannot start clickhouse-server B: %s\n", why);
		chs_stop(&g_a);
		return 1;
	}
	s = suite_create("store_distributed");
	tc = tcase_create("distributed_reads_each_trace_once");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, distributed_reads_each_trace_once);
	suite_add_tcase(s, tc);
	rc = test_run_suite(s);
	chs_stop(&g_a);
	chs_stop(&g_b);
	return rc;
}
