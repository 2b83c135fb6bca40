/*
 * tests/agent/test_window.c — the agent's time-window query (agent/window.c),
 * with real shared memory and real client processes.
 *
 * Child processes link libretrace and write traces through the tracer API into
 * the in-process agent's pool: a "backend" writes root SERVER spans (what a hop
 * without context leaves on the callee), one SERVER span with a parent (a hop
 * with context: not a candidate) and a CLIENT root (not a server); an "other"
 * service writes root SERVER spans too. The test then asks, through
 * rt_agent_handle_request and the wire encoding both daemons use:
 *   - the window before a mark: exactly backend's first batch, earliest first,
 *     with the span ids, starts inside the window and ends after their starts;
 *   - the whole window with max 4: the 4 earliest, the rest counted truncated;
 *   - with a hold: the held traces survive an eviction that takes all others,
 *     and go after a WINDOW_RELEASE; a short hold expires by itself (waited for
 *     on the agent's counter, never a fixed sleep);
 *   - a corrupt SPAN_START record in a segment is skipped and counted.
 */
#include <stdatomic.h>

#include "agtest.h"
#include "agent_internal.h"
#include "retrace/tracer.h"
#include "wire.h"

static const char *client_peer; /* writer: under each root, a CLIENT span to this peer */

#define FIRST 6   /* backend traces before the mark */
#define SECOND 3  /* backend traces after it */

static uint64_t unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A child: service `svc` writes `n` traces 0xB0/lo0+i with a root of `kind`
 * (kind 0: a SERVER span under a remote parent), then exits. */
static void writer(const char *pool, const char *svc, uint64_t lo0, int n, int kind,
		   uint64_t not_before_unix)
{
	int i;
	setenv("RETRACE_SERVICE", svc, 1);
	ag_child_client(pool, 8, RETRACE_OK);
	while (unix_ns() < not_before_unix)
		; /* the mark must lie between the two batches */
	for (i = 0; i < n; i++) {
		retrace_begin((retrace_trace_id){.hi = 0xB0, .lo = lo0 + (uint64_t)i});
		if (kind)
			retrace_span_start("GET /item", (enum retrace_span_kind)kind);
		else
			retrace_span_start_child("GET /item", RETRACE_SPAN_SERVER, 0x5151);
		retrace_attr_int("i", i);
		if (client_peer) { /* the connections: ours on 9000, the call out on 40000+i */
			retrace_attr_str("net.sock.host.addr", "127.0.0.1");
			retrace_attr_int("net.sock.host.port", 9000);
			retrace_attr_str("net.sock.peer.addr", "127.0.0.1");
			retrace_attr_int("net.sock.peer.port", 30000 + i);
			retrace_span_start("call", RETRACE_SPAN_CLIENT);
			retrace_attr_str("peer.service", client_peer);
			retrace_attr_str("net.sock.host.addr", "127.0.0.1");
			retrace_attr_int("net.sock.host.port", 40000 + i);
			retrace_attr_str("net.sock.peer.addr", "127.0.0.1");
			retrace_attr_int("net.sock.peer.port", 9000);
			retrace_span_end_ok();
		}
		retrace_span_end_ok();
		retrace_end();
	}
	retrace_shutdown();
	exit(0);
}

static void run_writer(struct rt_agent *a, const char *pool, const char *svc, uint64_t lo0,
		       int n, int kind, uint64_t not_before)
{
	pid_t kid = ag_fork();
	uint64_t end;
	if (kid == 0)
		writer(pool, svc, lo0, n, kind, not_before);
	end = ag_deadline(30);
	while (ag_wait_exit(kid, 0) == -1 && kill(kid, 0) == 0 && ag_now_ns() < end)
		rt_agent_poll(a);
	ag_drain(a);
}

/* Send a message to the agent; decode its reply into r. */
static void ask(struct rt_agent *a, const struct rt_wire_msg *m, struct rt_wire_msg *r)
{
	static uint8_t out[1u << 20];
	struct rt_wire_buf b = {0};
	size_t n;
	ck_assert_int_eq(rt_wire_encode(&b, m), 0);
	n = rt_agent_handle_request(a, b.data, b.len, out, sizeof out);
	ck_assert_uint_gt(n, 0);
	ck_assert_int_eq(rt_wire_decode(out, n, r), 0);
	rt_wire_buf_free(&b);
}

static void query_kind(struct rt_agent *a, uint64_t id, uint32_t kind, const char *svc,
		       const char *peer, uint64_t t0, uint64_t t1, uint32_t max, uint32_t hold_ms,
		       struct rt_wire_msg *r)
{
	struct rt_wire_msg m = {.type = RT_WIRE_WINDOW_QUERY};
	m.wquery.request_id = id;
	m.wquery.kind = kind;
	snprintf(m.wquery.service, sizeof m.wquery.service, "%s", svc);
	snprintf(m.wquery.peer, sizeof m.wquery.peer, "%s", peer);
	m.wquery.t0_unix_ns = t0;
	m.wquery.t1_unix_ns = t1;
	m.wquery.max = max;
	m.wquery.hold_ms = hold_ms;
	ask(a, &m, r);
	ck_assert_int_eq(r->type, RT_WIRE_WINDOW_REPLY);
	ck_assert_uint_eq(r->wreply.request_id, id);
	ck_assert_uint_eq(r->wreply.agent_id, a->cfg.agent_id);
}

static void query(struct rt_agent *a, uint64_t id, const char *svc, uint64_t t0, uint64_t t1,
		  uint32_t max, uint32_t hold_ms, struct rt_wire_msg *r)
{
	query_kind(a, id, RT_WIRE_WINDOW_ROOTS, svc, "", t0, t1, max, hold_ms, r);
}

/* Kind CLIENTS: the other calls on an edge, by writer service and peer.service. */
START_TEST(test_window_clients)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct rt_wire_msg r;
	char name[64];
	uint64_t t0, t1;
	uint32_t i;

	ag_pool_name(name, sizeof name, "wclients");
	ag_config(&cfg, name, 64, 4096, 1.0);
	ag_open(&a, &cfg);
	t0 = unix_ns();
	client_peer = "backend";
	run_writer(&a, name, "api", 0x900, 3, RETRACE_SPAN_SERVER, 0);
	client_peer = "cache";
	run_writer(&a, name, "api", 0x910, 2, RETRACE_SPAN_SERVER, 0);
	client_peer = "backend";
	run_writer(&a, name, "other", 0x920, 2, RETRACE_SPAN_SERVER, 0);
	client_peer = NULL;
	t1 = unix_ns();
	query_kind(&a, 1, RT_WIRE_WINDOW_CLIENTS, "api", "backend", t0, t1, 100, 60000, &r);
	ck_assert_uint_eq(r.wreply.candidate_count, 3);
	for (i = 0; i < 3; i++) {
		const struct rt_wire_window_candidate *c = &r.wreply.candidates[i];
		ck_assert_uint_eq(c->trace_lo, 0x900 + i);
		ck_assert_uint_ne(c->span_id, 0);
		ck_assert_uint_ge(c->start_unix_ns, t0);
		ck_assert_uint_ge(c->end_unix_ns, c->start_unix_ns);
		/* the connection its net.sock.* attributes name, as the callee would see it */
		ck_assert_uint_eq(c->conn, rt_wire_conn_id(0, "127.0.0.1", 9000, "127.0.0.1", 40000 + i));
	}
	rt_wire_msg_free(&r);
	ck_assert_uint_eq(a.win.nholds, 0); /* a caller's trace is not held */
	query_kind(&a, 2, RT_WIRE_WINDOW_CLIENTS, "api", "cache", t0, t1, 100, 0, &r);
	ck_assert_uint_eq(r.wreply.candidate_count, 2);
	rt_wire_msg_free(&r);
	/* The roots of api are still one per trace. */
	query(&a, 3, "api", t0, t1, 100, 0, &r);
	ck_assert_uint_eq(r.wreply.candidate_count, 5);
	for (i = 0; i < 5; i++) { /* a root's connection: its caller on 30000+i */
		const struct rt_wire_window_candidate *c = &r.wreply.candidates[i];
		ck_assert_uint_eq(c->conn, rt_wire_conn_id(1, "127.0.0.1", 30000 + (c->trace_lo & 0xf),
							   "127.0.0.1", 9000));
	}
	rt_wire_msg_free(&r);
	rt_agent_close(&a);
}
END_TEST

START_TEST(test_window_query)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct rt_wire_msg r, m;
	char name[64], status[32768];
	uint64_t t0, mark, t2, prev = 0;
	uint32_t i;

	ag_pool_name(name, sizeof name, "window");
	ag_config(&cfg, name, 256, 4096, 1.0);
	ag_open(&a, &cfg);
	t0 = unix_ns();
	run_writer(&a, name, "backend", 0x100, FIRST, RETRACE_SPAN_SERVER, 0);
	run_writer(&a, name, "backend", 0x200, 2, 0, 0);                 /* has a parent */
	run_writer(&a, name, "backend", 0x300, 2, RETRACE_SPAN_CLIENT, 0); /* not a server */
	run_writer(&a, name, "other", 0x400, 3, RETRACE_SPAN_SERVER, 0);
	mark = unix_ns();
	run_writer(&a, name, "backend", 0x500, SECOND, RETRACE_SPAN_SERVER, mark + 20000000ull);
	t2 = unix_ns();

	/* Before the mark: backend's first batch, earliest first. */
	query(&a, 1, "backend", t0, mark, 100, 0, &r);
	ck_assert_uint_eq(r.wreply.candidate_count, FIRST);
	ck_assert_uint_eq(r.wreply.truncated, 0);
	for (i = 0; i < FIRST; i++) {
		const struct rt_wire_window_candidate *c = &r.wreply.candidates[i];
		ck_assert_uint_eq(c->trace_hi, 0xB0);
		ck_assert_uint_eq(c->trace_lo, 0x100 + i);
		ck_assert_uint_ne(c->span_id, 0);
		ck_assert_msg(c->start_unix_ns >= t0 && c->start_unix_ns <= mark,
			      "start %llu outside [%llu, %llu]", (unsigned long long)c->start_unix_ns,
			      (unsigned long long)t0, (unsigned long long)mark);
		ck_assert_uint_ge(c->start_unix_ns, prev);
		ck_assert_uint_ge(c->end_unix_ns, c->start_unix_ns);
		prev = c->start_unix_ns;
	}
	rt_wire_msg_free(&r);
	/* Another service, another window. */
	query(&a, 2, "other", t0, t2, 100, 0, &r);
	ck_assert_uint_eq(r.wreply.candidate_count, 3);
	ck_assert_uint_eq(r.wreply.candidates[0].trace_lo, 0x400);
	rt_wire_msg_free(&r);
	query(&a, 3, "backend", mark, t2, 100, 0, &r);
	ck_assert_uint_eq(r.wreply.candidate_count, SECOND);
	ck_assert_uint_eq(r.wreply.candidates[0].trace_lo, 0x500);
	rt_wire_msg_free(&r);
	query(&a, 4, "nobody", t0, t2, 100, 0, &r);
	ck_assert_uint_eq(r.wreply.candidate_count, 0);
	rt_wire_msg_free(&r);

	/* max 4 of 9: the earliest 4, 5 truncated. */
	query(&a, 5, "backend", t0, t2, 4, 0, &r);
	ck_assert_uint_eq(r.wreply.candidate_count, 4);
	ck_assert_uint_eq(r.wreply.truncated, FIRST + SECOND - 4);
	ck_assert_uint_eq(r.wreply.candidates[3].trace_lo, 0x103);
	rt_wire_msg_free(&r);
	ck_assert_uint_eq(a.win.nholds, 0);

	/* A hold keeps the answer through an eviction that takes everything else. */
	query(&a, 6, "backend", mark, t2, 100, 60000, &r);
	ck_assert_uint_eq(r.wreply.candidate_count, SECOND);
	rt_wire_msg_free(&r);
	ck_assert_uint_eq(a.win.nholds, SECOND);
	ck_assert_uint_eq(a.ix.st.held_traces, SECOND);
	a.evict_limit = 0;
	ag_drain(&a);
	for (i = 0; i < FIRST; i++)
		ck_assert_uint_eq(rt_index_find(&a.ix, 0x100 + i), RT_INDEX_NONE);
	for (i = 0; i < SECOND; i++)
		ck_assert_uint_ne(rt_index_find(&a.ix, 0x500 + i), RT_INDEX_NONE);
	/* Released: evicted at the next pass. */
	m = (struct rt_wire_msg){.type = RT_WIRE_WINDOW_RELEASE};
	m.wrelease.request_id = 6;
	ask(&a, &m, &r);
	ck_assert_int_eq(r.type, RT_WIRE_ACK);
	ck_assert_int_eq(r.ack.status, 0);
	rt_wire_msg_free(&r);
	ck_assert_uint_eq(a.win.nholds, 0);
	ck_assert_uint_eq(a.ix.st.held_traces, 0);
	ag_drain(&a);
	for (i = 0; i < SECOND; i++)
		ck_assert_uint_eq(rt_index_find(&a.ix, 0x500 + i), RT_INDEX_NONE);
	ck_assert_uint_eq(a.win.st.released, SECOND);
	ck_assert_int_eq(ag_unaccounted(&a), 0);

	rt_agent_status(&a, 1, status, sizeof status);
	ck_assert_msg(strstr(status, "\"queries\":6") != NULL, "status: %s", status);
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

START_TEST(test_window_hold_expires)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct rt_wire_msg r;
	char name[64];
	uint64_t t0, t1, end;

	ag_pool_name(name, sizeof name, "wexpire");
	ag_config(&cfg, name, 64, 4096, 1.0);
	ag_open(&a, &cfg);
	t0 = unix_ns();
	run_writer(&a, name, "backend", 0x700, 2, RETRACE_SPAN_SERVER, 0);
	t1 = unix_ns();
	query(&a, 9, "backend", t0, t1, 10, 1, &r);
	ck_assert_uint_eq(r.wreply.candidate_count, 2);
	rt_wire_msg_free(&r);
	ck_assert_uint_eq(a.win.nholds, 2);
	end = ag_deadline(20);
	while (a.win.st.expired < 2 && ag_now_ns() < end)
		rt_agent_poll(&a);
	ck_assert_uint_eq(a.win.st.expired, 2);
	ck_assert_uint_eq(a.ix.st.held_traces, 0);
	/* Back in the LRU: evictable again. */
	a.evict_limit = 0;
	ag_drain(&a);
	ck_assert_uint_eq(rt_index_find(&a.ix, 0x700), RT_INDEX_NONE);
	/* A release naming no hold is fine. */
	{
		struct rt_wire_msg m = {.type = RT_WIRE_WINDOW_RELEASE};
		m.wrelease.request_id = 12345;
		ask(&a, &m, &r);
		ck_assert_int_eq(r.ack.status, 0);
		rt_wire_msg_free(&r);
	}
	rt_agent_close(&a);
}
END_TEST

/* A root SERVER span whose SPAN_START record is corrupt: skipped, counted. */
START_TEST(test_window_corrupt_record)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct rt_wire_msg r;
	char name[64];
	uint64_t t0, t1;
	uint32_t t, slot;

	ag_pool_name(name, sizeof name, "wbad");
	ag_config(&cfg, name, 64, 4096, 1.0);
	ag_open(&a, &cfg);
	t0 = unix_ns();
	run_writer(&a, name, "backend", 0x800, 2, RETRACE_SPAN_SERVER, 0);
	t1 = unix_ns();
	/* Find trace 0x800's SPAN_START (0xC1 0x01) and break its span id field. */
	t = rt_index_find(&a.ix, 0x800);
	ck_assert_uint_ne(t, RT_INDEX_NONE);
	for (slot = a.ix.traces[t].first_buf; slot != RT_INDEX_NONE; slot = a.ix.buf_next[slot]) {
		uint8_t *d = (uint8_t *)rt_agent_segment(&a, slot) + RT_BUF_HEADER_SIZE;
		uint32_t k, n = a.ix.buf_bytes[slot];
		for (k = 0; k + 2 < n; k++)
			if (d[k] == 0xC1 && d[k + 1] == 0x01) {
				d[k + 2] = 0xc1; /* never a msgpack format byte */
				k = n;
				slot = RT_INDEX_NONE;
				break;
			}
		if (slot == RT_INDEX_NONE)
			break;
	}
	ck_assert_uint_eq(slot, RT_INDEX_NONE);
	query(&a, 1, "backend", t0, t1, 10, 0, &r);
	ck_assert_uint_eq(r.wreply.candidate_count, 1);
	ck_assert_uint_eq(r.wreply.candidates[0].trace_lo, 0x801);
	rt_wire_msg_free(&r);
	ck_assert_uint_eq(a.win.st.bad_records, 1);
	rt_agent_close(&a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_window");
	TCase *tc = tcase_create("window");
	rt_log_level = RT_LOG_WARN;
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_window_query);
	tcase_add_test(tc, test_window_hold_expires);
	tcase_add_test(tc, test_window_corrupt_record);
	tcase_add_test(tc, test_window_clients);
	suite_add_tcase(s, tc);
	return ag_run_suite(s);
}
