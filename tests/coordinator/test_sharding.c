/*
 * tests/coordinator/test_sharding.c — two coordinators sharing the trace-id
 * space by rendezvous hashing (daemon/ring.h, agent/route.c), three agents,
 * real processes on loopback, a SQLite store each.
 *
 * Ground truth is what the writers wrote (cl_record_byte): every trace must be
 * in exactly one of the two stores, coherent, with each host's records byte for
 * byte, whatever the coordinators' own counters say.
 *   - sharded_collection: every trace is stored by its owner, never by the
 *     other member, and both members get a share.
 *   - clickhouse_pair: the same with each member writing into its own
 *     ClickHouse server, two shards of one cluster: a Distributed table reads
 *     every trace once (skipped, exit 77, without clickhouse-server).
 *   - member_kill9_and_return: kill -9 of one member while traces are being
 *     triggered, triggers go on at the kill and after the members dropped it,
 *     the member restarts: no trace lost, none in both stores, every one
 *     complete, each of the killed member's range triggered after the drop at
 *     the other member, every slice an agent counts as acknowledged in a store.
 *   - busy_member_stays_live: a member whose loop is blocked in its store for
 *     longer than the liveness window (the test holds its SQLite write lock, as a
 *     slow ClickHouse insert does under load) is not judged down by the other
 *     member, and the trace it was storing ends at it, its owner.
 *   - untriggered_slice_never_coherent: a member that gets a trace's slice but
 *     never its trigger stores it incoherent (a fake agent, below).
 *   - restarted_member_counts_stored_slices: a member restarted after it
 *     committed a trace's slice, before its trigger, stores it coherent when the
 *     trigger comes (the slice is not sent again).
 * Waits are on conditions with generous bounds, never on time alone.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pthread.h>
#include <sqlite3.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "cluster.h"
#include "common/fake_agent.h"
#include "common/suite.h"
#include "daemon/ring.h"
#include "evgen.h"
#include "store/chserver.h"

#define HI 0x5a5a5a5a00000000ull
#define RECORDS 6
#define TRIGGER 9

static struct cluster ca, cb; /* members c0 and c1 */
static char coords[200], colls[200];

static void nap_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char peers[200];

static void member_args(const char *id)
{
	int n = 0;
	cl_coord_args[n++] = "--member-id";
	cl_coord_args[n++] = id;
	if (peers[0]) { /* c0 knows the ring (c1 started first, before c0 had a port) */
		cl_coord_args[n++] = "--peers";
		cl_coord_args[n++] = peers;
	}
	cl_coord_args[n++] = "--commit-interval"; /* group commit on: acks wait for it */
	cl_coord_args[n++] = "0.05";
	cl_coord_args[n] = NULL;
}

/* Member c1 first (no hosts), then c0, then c1 again on the same ports with the
 * whole ring (c0's port is known now: both members probe each other and publish
 * their live set to the agents), then three agents routing over both. */
static void start_pair(void)
{
	peers[0] = 0;
	member_args("c1");
	ck_assert_int_eq(cl_start(&cb, 0, 512), 0);
	snprintf(peers, sizeof peers, "c0=tcp://127.0.0.1:0,c1=%s", cb.coord_url);
	member_args("c0");
	ck_assert_int_eq(cl_start(&ca, 0, 512), 0);
	snprintf(peers, sizeof peers, "c0=%s,c1=%s", ca.coord_url, cb.coord_url);
	cl_kill_coordinator(&cb);
	member_args("c1");
	ck_assert_int_eq(cl_start_coordinator(&cb), 0);
	snprintf(coords, sizeof coords, "c0=%s,c1=%s", ca.coord_url, cb.coord_url);
	snprintf(colls, sizeof colls, "c0=%s,c1=%s", ca.collect_url, cb.collect_url);
	cl_agent_coordinators = coords;
	cl_agent_collectors = colls;
	ck_assert_int_eq(cl_start_hosts(&ca, 3, 512), 0);
	cb.nhosts = 3; /* wait until c1 knows the three agents too */
	ck_assert_int_eq(cl_wait_registered(&cb, 30), 0);
	cb.nhosts = 0;
}

static void stop_pair(void)
{
	ck_assert_msg(cl_stop(&ca) == 0, "an agent did not exit on SIGTERM");
	cl_stop(&cb);
	cl_agent_coordinators = cl_agent_collectors = NULL;
	cl_coord_args[0] = NULL;
}

/* One look: is the trace in this member's store? */
static int in_store(struct cluster *c, uint64_t lo, struct rt_store_trace *out)
{
	struct rt_store_options o = { .path = c->store, .readonly = 1 };
	struct rt_store *s = NULL;
	int rc = -1;
	if (rt_store_open(&s, &o) == 0)
		rc = rt_store_get_trace(s, HI, lo, out);
	rt_store_close(s);
	return rc == 0;
}

/* A request 1 -> 2 -> 3 on the three hosts (breadcrumbs back to the caller). */
static void write_trace(uint64_t lo)
{
	uint32_t to1 = 1, to2 = 2;
	ck_assert_int_eq(cl_write(&ca, 0, HI, lo, RECORDS, NULL, 0), 0);
	ck_assert_int_eq(cl_write(&ca, 1, HI, lo, RECORDS, &to1, 1), 0);
	ck_assert_int_eq(cl_write(&ca, 2, HI, lo, RECORDS, &to2, 1), 0);
}

/* A check about to fail: every daemon's figures stay in the members' directories
 * (kept: a failed test does not reach stop_pair), since the daemons are killed
 * with the test; for a trace in neither store (a member may have stopped
 * working), every daemon's stacks too. */
static void leave_evidence(int missing)
{
	cl_dump_status(&ca, "failed");
	cl_dump_status(&cb, "failed");
	if (missing) {
		cl_dump_stacks(&ca, "failed");
		cl_dump_stacks(&cb, "failed");
	}
}

/* Wait until the trace is in one of the stores; then it must be in that one only,
 * coherent, with every host's records as written. Returns the member (0, 1). */
static int check_trace(uint64_t lo, double timeout_s)
{
	struct rt_store_trace t, u;
	double end = mono_s() + timeout_s;
	int where = -1;
	while (where < 0 && mono_s() < end) {
		if (in_store(&ca, lo, &t))
			where = 0;
		else if (in_store(&cb, lo, &t))
			where = 1;
		else
			nap_ms(50);
	}
	if (where < 0 || !t.coherent)
		leave_evidence(where < 0);
	ck_assert_msg(where >= 0, "trace %llx in neither store after %.0f s (logs in %s, %s)",
		      (unsigned long long)lo, timeout_s, ca.dir, cb.dir);
	ck_assert_msg(!in_store(where ? &ca : &cb, lo, &u), "trace %llx stored by both members",
		      (unsigned long long)lo);
	ck_assert_msg(t.coherent, "trace %llx incoherent at c%d: %u agents, %u missing",
		      (unsigned long long)lo, where, t.agent_count, t.missing_count);
	ck_assert_uint_eq(t.agent_count, 3);
	for (int h = 0; h < 3; h++) {
		char why[256] = "";
		ck_assert_msg(cl_check_records(where ? &cb : &ca, HI, lo, h, RECORDS, why,
					       sizeof why) == 0,
			      "trace %llx host %d at c%d: %s", (unsigned long long)lo, h, where, why);
	}
	return where;
}

/* n traces from 0x7001 triggered on host 2: each at its owner, once, complete. */
static void collect_at_owners(int n)
{
	struct rt_ring ring;
	int count[2] = { 0, 0 };
	rt_ring_init(&ring);
	rt_ring_add(&ring, "c0");
	rt_ring_add(&ring, "c1");
	for (int i = 0; i < n; i++)
		write_trace(0x7001 + (uint64_t)i);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(cl_trigger(&ca, 2, HI, 0x7001 + (uint64_t)i, TRIGGER, NULL, 0), 0);
	for (int i = 0; i < n; i++) {
		uint64_t lo = 0x7001 + (uint64_t)i;
		int where = check_trace(lo, 60);
		ck_assert_msg(where == rt_ring_owner(&ring, lo),
			      "trace %llx stored by c%d, its owner is c%d", (unsigned long long)lo,
			      where, rt_ring_owner(&ring, lo));
		count[where]++;
	}
	ck_assert_msg(count[0] > 0 && count[1] > 0, "one member got every trace (%d/%d)", count[0],
		      count[1]);
}

START_TEST(sharded_collection)
{
	start_pair();
	collect_at_owners(24);
	/* c0's status shows the ring: two members, both live (its probes reach c1). */
	ck_assert_int_eq(cl_coord_figure(&ca, "ring", "members"), 2);
	{
		double end = mono_s() + 30;
		while (cl_coord_figure(&ca, "ring", "members_live") < 2 && mono_s() < end)
			nap_ms(50);
		ck_assert_int_eq(cl_coord_figure(&ca, "ring", "members_live"), 2);
	}
	stop_pair();
}
END_TEST

static struct chserver ch[2];

/* SELECT on server k; the reply as a number. */
static long long ch_count(int k, const char *sql)
{
	char *reply = NULL;
	long long v;
	ck_assert_msg(chs_sql(&ch[k], sql, &reply) == 0, "%s: %s", sql, reply ? reply : "");
	v = atoll(reply);
	free(reply);
	return v;
}

START_TEST(clickhouse_pair)
{
	char why[4096], remote[512], loc[2][192];
	const int n = 16;
	int tcp[2] = { chs_free_port(), chs_free_port() };
	snprintf(remote, sizeof remote,
		 "<retrace_2shards>"
		 "<shard><replica><host>127.0.0.1</host><port>%d</port></replica></shard>"
		 "<shard><replica><host>127.0.0.1</host><port>%d</port></replica></shard>"
		 "</retrace_2shards>", tcp[0], tcp[1]);
	for (int k = 0; k < 2; k++) {
		ck_assert_msg(chs_start_on(&ch[k], 0, tcp[k], remote, why, sizeof why) == 0,
			      "clickhouse-server %d: %s", k, why);
		snprintf(loc[k], sizeof loc[k], "%s/retrace", ch[k].url);
	}
	/* c1 writes to server 1, c0 to server 0: a shard per member. */
	cl_store_locator = loc[1];
	peers[0] = 0;
	member_args("c1");
	ck_assert_int_eq(cl_start(&cb, 0, 512), 0);
	cl_store_locator = loc[0];
	member_args("c0");
	ck_assert_int_eq(cl_start(&ca, 0, 512), 0);
	cl_store_locator = NULL;
	snprintf(coords, sizeof coords, "c0=%s,c1=%s", ca.coord_url, cb.coord_url);
	snprintf(colls, sizeof colls, "c0=%s,c1=%s", ca.collect_url, cb.collect_url);
	cl_agent_coordinators = coords;
	cl_agent_collectors = colls;
	/* A member ACKs a slice after its store commit; a ClickHouse commit took
	 * 1.1-2.1 s at load 27-37 (its slow-turn lines), so the harness's 1 s
	 * report timeout called every ACK lost: the slices were resent, the member
	 * probed at one slice a second (uplink's down back-off), and traces closed
	 * incoherent at the collect timeout. The agents' default (5 s) is what a
	 * deployment on ClickHouse runs with (docs/store.md). */
	cl_agent_args[0] = "--report-timeout";
	cl_agent_args[1] = "5000";
	cl_agent_args[2] = NULL;
	ck_assert_int_eq(cl_start_hosts(&ca, 3, 512), 0);
	cl_agent_args[0] = NULL;
	cb.nhosts = 3;
	ck_assert_int_eq(cl_wait_registered(&cb, 30), 0);
	cb.nhosts = 0;
	collect_at_owners(n);
	/* The union of the two shards, read from either server: each trace once. */
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(chs_sql(&ch[k], "CREATE TABLE IF NOT EXISTS retrace.traces_all AS "
					 "retrace.traces ENGINE = Distributed(retrace_2shards, "
					 "retrace, traces)", NULL), 0);
		ck_assert_int_eq(ch_count(k, "SELECT count() FROM (SELECT trace_lo, deleted FROM "
					  "retrace.traces_all FINAL) WHERE deleted = 0"), n);
		ck_assert_int_eq(ch_count(k, "SELECT uniqExact(trace_lo) FROM (SELECT trace_lo, "
					  "deleted FROM retrace.traces_all FINAL) WHERE deleted = 0"), n);
		ck_assert_int_eq(ch_count(k, "SELECT min(coherent) FROM (SELECT coherent, deleted "
					  "FROM retrace.traces_all FINAL) WHERE deleted = 0"), 1);
	}
	stop_pair();
	chs_stop(&ch[0]);
	chs_stop(&ch[1]);
}
END_TEST

START_TEST(member_kill9_and_return)
{
	const int n = 30, late = 22;
	long long acked = 0, stored;
	struct rt_ring ring;
	int moved = 0;
	start_pair();
	for (int i = 0; i < n; i++)
		write_trace(0x9001 + (uint64_t)i);
	for (int i = 0; i < n / 2; i++)
		ck_assert_int_eq(cl_trigger(&ca, 2, HI, 0x9001 + (uint64_t)i, TRIGGER, NULL, 0), 0);
	/* Under load: the first half's traversals and slices are in flight. */
	while (cl_coord_figure(&ca, "collection", "slices") < 3)
		nap_ms(10);
	cl_kill_coordinator(&ca);
	/* Triggered at the kill: an agent may have sent these to c0 before it saw
	 * the connection go, so they may wait for c0 (docs/scaling.md). */
	for (int i = n / 2; i < late; i++)
		ck_assert_int_eq(cl_trigger(&ca, 2, HI, 0x9001 + (uint64_t)i, TRIGGER, NULL, 0), 0);
	/* The members' live set drops c0; every agent follows it. */
	for (int h = 0; h < 3; h++) {
		double end = mono_s() + 60;
		while (cl_agent_figure(&ca, h, "reporting", "coordinator_members_dropped") < 1 &&
		       mono_s() < end)
			nap_ms(50);
	}
	/* Triggered while c0 is known down: c0's range goes to c1. */
	for (int i = late; i < n; i++)
		ck_assert_int_eq(cl_trigger(&ca, 2, HI, 0x9001 + (uint64_t)i, TRIGGER, NULL, 0), 0);
	member_args("c0");
	ck_assert_int_eq(cl_start_coordinator(&ca), 0);
	rt_ring_init(&ring);
	rt_ring_add(&ring, "c0");
	rt_ring_add(&ring, "c1");
	for (int i = 0; i < n; i++) {
		uint64_t lo = 0x9001 + (uint64_t)i;
		int where = check_trace(lo, 90);
		/* c0's range moved: traces triggered while it was known down went to c1 */
		if (i >= late && rt_ring_owner(&ring, lo) == 0) {
			ck_assert_msg(where == 1, "trace %llx, triggered while c0 was down, is at c0",
				      (unsigned long long)lo);
			moved++;
		}
	}
	ck_assert_msg(moved > 0, "no trace of c0's range triggered while it was down");
	/* Nothing an agent saw acknowledged is missing from the stores. */
	for (int h = 0; h < 3; h++) {
		long long a = cl_agent_figure(&ca, h, "reporting", "slices_acked");
		ck_assert_int_ge(a, 1);
		acked += a;
	}
	stored = cl_store_slices(&ca) + cl_store_slices(&cb);
	ck_assert_msg(stored >= acked, "agents count %lld slices acknowledged, the stores hold %lld",
		      acked, stored);
	stop_pair();
}
END_TEST


/* The first trace id from `from` whose owner is member `m`. */
static uint64_t owned_by(int m, uint64_t from)
{
	struct rt_ring ring;
	rt_ring_init(&ring);
	rt_ring_add(&ring, "c0");
	rt_ring_add(&ring, "c1");
	while (rt_ring_owner(&ring, from) != m)
		from++;
	return from;
}

START_TEST(busy_member_stays_live)
{
	sqlite3 *db = NULL;
	uint64_t lo = owned_by(1, 0xc001);
	long long live_min = 2, stall_ms;
	double end;
	start_pair();
	/* both members live at c0 first (its probes reach c1) */
	end = mono_s() + 30;
	while (cl_coord_figure(&ca, "ring", "members_live") < 2 && mono_s() < end)
		nap_ms(50);
	ck_assert_int_eq(cl_coord_figure(&ca, "ring", "members_live"), 2);
	write_trace(lo);
	/* c1's next write waits for this lock (its busy timeout is 5 s) */
	ck_assert_int_eq(sqlite3_open(cb.store, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 30000); /* c1's own batch may hold it for a moment */
	ck_assert_int_eq(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(cl_trigger(&ca, 2, HI, lo, TRIGGER, NULL, 0), 0);
	/* 4.5 s: a second past the liveness window (3.5 s), short of the busy timeout */
	end = mono_s() + 4.5;
	while (mono_s() < end) {
		long long live = cl_coord_figure(&ca, "ring", "members_live");
		if (live < live_min)
			live_min = live;
		nap_ms(100);
	}
	ck_assert_int_eq(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	ck_assert_msg(check_trace(lo, 60) == 1, "trace %llx, c1's, stored by c0",
		      (unsigned long long)lo);
	/* the control: c1's loop did wait for the lock (else this proves nothing) */
	stall_ms = cl_coord_figure(&cb, "loop", "max_turn_ms");
	ck_assert_msg(stall_ms >= 3500, "c1's longest turn was %lld ms: the lock did not stall it",
		      stall_ms);
	ck_assert_msg(live_min == 2, "c0 judged c1 down while c1's loop waited for its store "
		      "(members_live fell to %lld)", live_min);
	stop_pair();
}
END_TEST

/* ------------------------------------------------------------------------
 * untriggered_slice_never_coherent: what a member sees when a trace's trigger
 * went to another member (or was lost) and one host's slice came to it. A fake
 * agent speaking the wire protocol (so the test decides exactly what arrives)
 * registers with a real coordinator, answers its REMOTE_TRIGGER with "I hold
 * this slice, nothing open, no further hop", and sends, for trace A, its
 * TRIGGER and its slice, for trace B its slice only. A must be stored
 * coherent (the fake agent is complete: the control), B incoherent and
 * counted in collection.traces_untriggered, though everything its traversal
 * could name delivered.
 */
#define FAKE_AGENT 7u
#define FAKE_HZ 1000000000ull

/* What the fake agent holds: one slice of each of two traces. */
struct fake {
	struct fake_agent agent;
	uint32_t buffers[2];
	uint64_t bytes[2], lo[2];
};

static void fake_holds(const struct fake_agent *a, uint64_t hi, uint64_t lo, uint32_t *buffers,
		       uint64_t *bytes)
{
	const struct fake *f = a->arg;
	(void)hi;
	for (int k = 0; k < 2; k++)
		if (lo == f->lo[k]) {
			*buffers = f->buffers[k];
			*bytes = f->bytes[k];
		}
}

static int fake_request(const char *url, const struct rt_wire_buf *b)
{
	return fake_agent_request(url, b, 20000, NULL, 0);
}

/* One root SERVER span, begun and ended, in one buffer of the fake agent. */
static void fake_trace(struct eg *g, uint64_t lo, struct rt_wire_buf *slice, uint32_t *buffers,
		       uint64_t *bytes)
{
	struct eg_stream *st;
	eg_init(g, HI, lo, 4096);
	eg_agent(g, FAKE_AGENT, FAKE_HZ, 0, 0);
	st = eg_stream(g, FAKE_AGENT, 100, 1);
	eg_resource(st, "fake", "fake-host");
	eg_span_start(st, 0x100 + lo, 0, 2 /* SERVER */, EG_T(10), "GET /fake");
	eg_span_end(st, 0x100 + lo, EG_T(90), 0, 0, NULL);
	eg_finish(g);
	slice->len = 0;
	ck_assert_int_eq(eg_slice_msg(g, FAKE_AGENT, NULL, 0, slice), 0);
	*buffers = (uint32_t)g->n_bufs;
	*bytes = 0;
	for (size_t i = 0; i < g->n_bufs; i++)
		*bytes += g->bufs[i].len;
}

/* The fake agent registers with member cb (it dials f's control socket). */
static void fake_register(const struct fake *f, struct rt_wire_buf *reg)
{
	struct rt_wire_register r = { .agent_id = FAKE_AGENT, .pid = 4242, .start_unix_ns = 1,
				      .buffer_size = 4096, .buffer_count = 64, .tsc_hz = FAKE_HZ,
				      .tsc_ref_tick = 0, .tsc_ref_unix_ns = EG_BASE_NS };
	snprintf(r.host, sizeof r.host, "fake-host");
	snprintf(r.control_addr, sizeof r.control_addr, "%s", f->agent.url);
	ck_assert_int_eq(rt_wire_encode_register(reg, &r), 0);
	ck_assert_int_eq(fake_request(cb.coord_url, reg), 0);
}

/* The fake agent's TRIGGER of trace lo, sent to member cb (acknowledged). */
static void fake_trigger(uint64_t lo, struct rt_wire_buf *trig)
{
	struct rt_wire_trace tr = { .trace_hi = HI, .trace_lo = lo };
	struct rt_wire_trigger m = { .agent_id = FAKE_AGENT, .trigger_id = TRIGGER,
				     .trigger_seq = 1, .fired_unix_ns = EG_BASE_NS,
				     .trace_count = 1, .traces = &tr };
	ck_assert_int_eq(rt_wire_encode_trigger(trig, &m), 0);
	ck_assert_int_eq(fake_request(cb.coord_url, trig), 0);
}

START_TEST(untriggered_slice_never_coherent)
{
	struct fake f;
	struct eg g[2];
	struct rt_wire_buf reg = { 0 }, trig = { 0 }, slice[2] = { { 0 }, { 0 } };
	struct rt_store_trace t;
	memset(&f, 0, sizeof f);
	f.lo[0] = 0xa001; /* triggered: the control */
	f.lo[1] = 0xb001; /* its trigger never comes */
	cl_coord_args[0] = "--collect-timeout";
	cl_coord_args[1] = "3";
	cl_coord_args[2] = NULL;
	ck_assert_int_eq(cl_start(&cb, 0, 512), 0);
	for (int k = 0; k < 2; k++)
		fake_trace(&g[k], f.lo[k], &slice[k], &f.buffers[k], &f.bytes[k]);
	ck_assert_int_eq(fake_agent_start(&f.agent, FAKE_AGENT, fake_holds, &f), 0);
	fake_register(&f, &reg);
	fake_trigger(f.lo[0], &trig);
	ck_assert_int_eq(fake_request(cb.collect_url, &slice[0]), 0);
	ck_assert_int_eq(fake_request(cb.collect_url, &slice[1]), 0);
	ck_assert_int_eq(cl_wait_trace(&cb, HI, f.lo[0], 60, &t), 0);
	ck_assert_msg(t.coherent, "the triggered trace, complete, is incoherent (%u agents, %u "
		      "missing): the fake agent is wrong, not the rule", t.agent_count,
		      t.missing_count);
	ck_assert_int_eq(cl_wait_trace(&cb, HI, f.lo[1], 60, &t), 0);
	ck_assert_msg(!t.coherent, "a trace whose trigger never came is stored coherent");
	ck_assert_int_eq(cl_coord_figure(&cb, "collection", "traces_untriggered"), 1);
	fake_agent_stop_all(&f.agent, 1);
	for (int k = 0; k < 2; k++) {
		eg_free(&g[k]);
		rt_wire_buf_free(&slice[k]);
	}
	rt_wire_buf_free(&reg);
	rt_wire_buf_free(&trig);
	cl_stop(&cb);
	cl_coord_args[0] = NULL;
}
END_TEST

/*
 * A member killed after it committed a trace's slice but before any trigger of
 * the trace reached it (the slice came first: an orphan group), restarted on
 * its store: the trigger comes now, the agent says it delivered its bytes
 * (they were acknowledged) and sends nothing again. The trace is complete in
 * the store: it must close coherent, not wait for bytes that already came and
 * close at the collect timeout with the host missing (count_stored in
 * coordinator/traversal.c; member_kill9_and_return's "900d incoherent at c0:
 * 0 agents, 3 missing").
 */
START_TEST(restarted_member_counts_stored_slices)
{
	struct fake f;
	struct eg g;
	struct rt_wire_buf reg = { 0 }, trig = { 0 }, slice = { 0 };
	struct rt_store_trace t;
	memset(&f, 0, sizeof f);
	f.lo[0] = 0xd001;
	cl_coord_args[0] = "--collect-timeout";
	cl_coord_args[1] = "3";
	cl_coord_args[2] = NULL;
	ck_assert_int_eq(cl_start(&cb, 0, 512), 0);
	fake_trace(&g, f.lo[0], &slice, &f.buffers[0], &f.bytes[0]);
	ck_assert_int_eq(fake_agent_start(&f.agent, FAKE_AGENT, fake_holds, &f), 0);
	fake_register(&f, &reg);
	/* acknowledged = committed; the orphan group it opened dies with the process */
	ck_assert_int_eq(fake_request(cb.collect_url, &slice), 0);
	cl_kill_coordinator(&cb);
	ck_assert_int_eq(cl_start_coordinator(&cb), 0);
	fake_trigger(f.lo[0], &trig);
	ck_assert_int_eq(cl_wait_trace(&cb, HI, f.lo[0], 60, &t), 0);
	ck_assert_msg(t.coherent, "trace %llx, its slice stored before the restart, incoherent: "
		      "%u agents, %u missing", (unsigned long long)f.lo[0], t.agent_count,
		      t.missing_count);
	ck_assert_int_ge(cl_coord_figure(&cb, "collection", "stored_bytes_counted"),
			 (long long)f.bytes[0]);
	fake_agent_stop_all(&f.agent, 1);
	eg_free(&g);
	rt_wire_buf_free(&slice);
	rt_wire_buf_free(&reg);
	rt_wire_buf_free(&trig);
	cl_stop(&cb);
	cl_coord_args[0] = NULL;
}
END_TEST

int main(void)
{
	Suite *s = suite_create("coordinator_sharding");
	/* One TCase per test, named as it (CK_RUN_CASE runs one per ctest entry). */
	TCase *t1 = tcase_create("sharded_collection"), *t2 = tcase_create("member_kill9_and_return");
	TCase *t3 = tcase_create("clickhouse_pair");
	TCase *t4 = tcase_create("untriggered_slice_never_coherent");
	TCase *t5 = tcase_create("busy_member_stays_live");
	const char *only = getenv("CK_RUN_CASE");
	tcase_set_timeout(t1, 240);
	/* Two members, three agents, a kill and a restart, 30 traces checked byte for
	 * byte: under ASan beside other sessions' stress (load 65-95) a passing run
	 * took 168-241 s, and 240 s cut passing runs short. */
	tcase_set_timeout(t2, 600);
	tcase_set_timeout(t3, 240);
	tcase_add_test(t1, sharded_collection);
	tcase_add_test(t2, member_kill9_and_return);
	tcase_set_timeout(t4, 240);
	tcase_add_test(t3, clickhouse_pair);
	tcase_add_test(t4, untriggered_slice_never_coherent);
	TCase *t6 = tcase_create("restarted_member_counts_stored_slices");
	tcase_set_timeout(t5, 240);
	tcase_add_test(t5, busy_member_stays_live);
	tcase_set_timeout(t6, 240);
	tcase_add_test(t6, restarted_member_counts_stored_slices);
	suite_add_tcase(s, t6);
	suite_add_tcase(s, t1);
	suite_add_tcase(s, t2);
	suite_add_tcase(s, t4);
	suite_add_tcase(s, t5);
	if (chs_binary()) {
		suite_add_tcase(s, t3);
	} else if (only && !strcmp(only, "clickhouse_pair")) {
		printf("SKIP: clickhouse-server is not installed (bash scripts/deps.sh installs it)\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	return test_run_suite(s);
}
