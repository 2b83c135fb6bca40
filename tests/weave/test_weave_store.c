/* test_weave_store.c — `retrace weave --store`: the offline weaver over a store.
 *
 * Three traces are encoded as the client writes them (tests/coordinator/evgen.c,
 * an encoder written from the format documents) and stored as slices in a real
 * SQLite store: svc-a's request, whose CLIENT span to svc-b (peer.service) has no
 * child; svc-b's fresh trace whose SERVER root lies inside that call; and another
 * svc-b root that starts after the call ended. The command must link the call to
 * the first and only to it, with a confidence, and count nothing undecodable.
 */
#include "cmd_weave.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/suite.h"
#include "weave/cli_run.h"
#include "evgen.h"
#include "store.h"

#define A1 11u
#define A2 22u


/* One trace, one agent, one stream: `svc` writes a root (kind) and maybe a CLIENT
 * child with peer.service, times in EG_T units; stored with its row. */
static void store_trace(struct rt_store *s, uint64_t lo, uint32_t agent, const char *svc,
			uint8_t kind, uint64_t t0, uint64_t t1, const char *peer, uint64_t c0,
			uint64_t c1)
{
	struct eg g;
	struct rt_wire_buf msg;
	struct eg_stream *st;
	struct rt_store_trace row;
	eg_init(&g, 0x77, lo, 4000);
	eg_agent(&g, agent, 2000000000ull, 500000000000ull, 0);
	st = eg_stream(&g, agent, 100 + agent, 1);
	eg_resource(st, svc, "host");
	eg_span_start(st, lo << 8 | 1, 0, kind, EG_T(t0), "GET /x");
	if (peer) {
		eg_span_start(st, lo << 8 | 2, lo << 8 | 1, 3, EG_T(c0), "call");
		eg_attr(st, lo << 8 | 2, "peer.service", EG_S(peer));
		eg_span_end(st, lo << 8 | 2, EG_T(c1), 1, 0, NULL);
	}
	eg_span_end(st, lo << 8 | 1, EG_T(t1), 1, 0, NULL);
	eg_finish(&g);
	rt_wire_buf_init(&msg);
	ck_assert_int_eq(eg_slice_msg(&g, agent, NULL, 0, &msg), 0);
	struct rt_store_slice sl = {.trace_hi = 0x77, .trace_lo = lo, .agent_id = agent,
				    .trigger_id = 1, .slice_seq = lo, .received_ns = EG_BASE_NS,
				    .buffers = (uint32_t)g.n_bufs, .bytes = 100,
				    .first_ns = EG_BASE_NS + EG_T(t0), .last_ns = EG_BASE_NS + EG_T(t1),
				    .msg = msg.data, .msg_len = msg.len};
	ck_assert_int_eq(rt_store_put_slice(s, &sl), 0);
	memset(&row, 0, sizeof row);
	row.trace_hi = 0x77;
	row.trace_lo = lo;
	row.trigger_count = 1;
	row.trigger_ids[0] = 1;
	row.agent_count = 1;
	row.agents[0] = agent;
	row.coherent = 1;
	row.first_ns = sl.first_ns;
	row.last_ns = sl.last_ns;
	row.slices = 1;
	row.bytes = 100;
	ck_assert_int_eq(rt_store_put_trace(s, &row), 0);
	rt_wire_buf_free(&msg);
	eg_free(&g);
}

START_TEST(weaves_a_store)
{
	char dir[] = "/tmp/weave-store-XXXXXX", db[160], txt[160], buf[8192];
	struct rt_store_options o = {0};
	struct rt_store *s;
	FILE *f;
	size_t n;
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(db, sizeof db, "%s/store.db", dir);
	snprintf(txt, sizeof txt, "%s/stdout.txt", dir);
	o.path = db;
	ck_assert_int_eq(rt_store_open(&s, &o), 0);
	ck_assert_int_eq(rt_store_begin(s), 0);
	store_trace(s, 0xA1, A1, "svc-a", 2, 0, 1000, "svc-b", 100, 900);
	store_trace(s, 0xB1, A2, "svc-b", 2, 200, 800, NULL, 0, 0);
	store_trace(s, 0xB2, A2, "svc-b", 2, 950, 990, NULL, 0, 0);
	ck_assert_int_eq(rt_store_commit(s), 0);
	rt_store_close(s);

	char *argv[] = {"weave", "--store", db, NULL};
	ck_assert_int_eq(run_cmd(3, argv, txt), 0);
	ck_assert_ptr_nonnull(f = fopen(txt, "r"));
	n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = 0;
	fclose(f);
	ck_assert_msg(strstr(buf, "traces=3 open_client_spans=1 unknown_callee=0 inferred_links=1 "
				  "bad_spans=0 undecodable_traces=0"),
		      "%s", buf);
	ck_assert_msg(strstr(buf, "service svc-b: open_calls=1 roots=2 linked=1"), "%s", buf);
	ck_assert_msg(strstr(buf, "(trace 000000000000007700000000000000b1) confidence="), "%s",
		      buf);
	ck_assert_msg(!strstr(buf, "00000000000000b2) confidence="), "%s", buf);

	/* A store that is not there: a failure, not a crash. */
	char *bad[] = {"weave", "--store", "/nonexistent/dir/store.db", NULL};
	ck_assert_int_eq(run_cmd(3, bad, txt), 1);
	char *both[] = {"weave", "--store", db, "file.json", NULL};
	ck_assert_int_eq(run_cmd(4, both, txt), 2);
	unlink(db);
	unlink(txt);
	snprintf(buf, sizeof buf, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(buf), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("weave_store");
	TCase *tc = tcase_create("store");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, weaves_a_store);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(suite());
}
