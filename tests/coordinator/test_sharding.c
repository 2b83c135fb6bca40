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
 *   - untriggered_slice_never_coherent: a member that gets a trace's slice but
 *     never its trigger stores it incoherent (a fake agent, below).
 * Waits are on conditions with generous bounds, never on time alone.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>

#include <pthread.h>

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
static const char *member_extra[8]; /* more coordinator flags for the next member_args */

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
	for (int i = 0; member_extra[i]; i++)
		cl_coord_args[n++] = member_extra[i];
	cl_coord_args[n] = NULL;
}

/* Member c1 first (no hosts), then c0, then c1 again on the same ports with the
 * whole ring (c0's port is known now: both members probe each other and publish
 * their live set to the agents), then three agents routing over both. */
static void start_members(void)
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
}

static void start_pair(void)
{
	start_members();
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
	ck_assert_int_eq(cl_start_hosts(&ca, 3, 512), 0);
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

/* One root SERVER span, begun and ended, in one buffer of fake agent `agent`. */
static void fake_trace_of(struct eg *g, uint32_t agent, uint64_t lo, struct rt_wire_buf *slice,
			  uint32_t *buffers, uint64_t *bytes)
{
	struct eg_stream *st;
	uint64_t span = 0x100 + lo + ((uint64_t)agent << 32);
	eg_init(g, HI, lo, 4096);
	eg_agent(g, agent, FAKE_HZ, 0, 0);
	st = eg_stream(g, agent, 100, 1);
	eg_resource(st, "fake", "fake-host");
	eg_span_start(st, span, 0, 2 /* SERVER */, EG_T(10), "GET /fake");
	eg_span_end(st, span, EG_T(90), 0, 0, NULL);
	eg_finish(g);
	slice->len = 0;
	ck_assert_int_eq(eg_slice_msg(g, agent, NULL, 0, slice), 0);
	*buffers = (uint32_t)g->n_bufs;
	*bytes = 0;
	for (size_t i = 0; i < g->n_bufs; i++)
		*bytes += g->bufs[i].len;
}

static void fake_trace(struct eg *g, uint64_t lo, struct rt_wire_buf *slice, uint32_t *buffers,
		       uint64_t *bytes)
{
	fake_trace_of(g, FAKE_AGENT, lo, slice, buffers, bytes);
}

/* REGISTER fake agent a with the coordinator at url (reg: the message, kept). */
static void fake_register(struct rt_wire_buf *reg, const struct fake_agent *a, const char *url)
{
	struct rt_wire_register r = { .agent_id = a->id, .pid = 4242, .start_unix_ns = 1,
				      .buffer_size = 4096, .buffer_count = 64, .tsc_hz = FAKE_HZ,
				      .tsc_ref_tick = 0, .tsc_ref_unix_ns = EG_BASE_NS };
	snprintf(r.host, sizeof r.host, "fake-host-%u", a->id);
	snprintf(r.control_addr, sizeof r.control_addr, "%s", a->url);
	reg->len = 0;
	ck_assert_int_eq(rt_wire_encode_register(reg, &r), 0);
	ck_assert_int_eq(fake_request(url, reg), 0);
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
	fake_register(&reg, &f.agent, cb.coord_url);
	{
		struct rt_wire_trace tr = { .trace_hi = HI, .trace_lo = f.lo[0] };
		struct rt_wire_trigger m = { .agent_id = FAKE_AGENT, .trigger_id = TRIGGER,
					     .trigger_seq = 1, .fired_unix_ns = EG_BASE_NS,
					     .trace_count = 1, .traces = &tr };
		ck_assert_int_eq(rt_wire_encode_trigger(&trig, &m), 0);
		ck_assert_int_eq(fake_request(cb.coord_url, &trig), 0);
	}
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

/* ------------------------------------------------------------------------
 * handover_after_kill_between_commit_and_ack: the kill between a member's
 * commit and its ACK, made deterministic (--fault-exit-after-slices), and the
 * hand-over that keeps the trace whole (docs/scaling.md, "Hand-over between
 * members"). Two fake agents A and B (wire protocol: the test decides what
 * arrives where), trace T of c0's range:
 *   1. A's slice of T goes to c0, which commits it and exits before the ACK;
 *   2. the trace's TRIGGER (from B, naming A) and B's slice go to c1, which
 *      asks A and B: A says it holds its slice, which never comes to c1;
 *   3. c0 returns; A sends its unacknowledged slice to c0 again (a duplicate
 *      there: c0 has nothing else of T).
 * Ground truth: T stored once, at c1, coherent, with both agents' slices; c0
 * holds no row and no slice of it. Without the hand-over c1 closes T
 * incoherent (A missing) at its collect timeout.
 */
struct pair_fake {
	struct fake_agent agent[2];
	uint32_t buffers[2];
	uint64_t bytes[2], lo;
};

static void pair_holds(const struct fake_agent *a, uint64_t hi, uint64_t lo, uint32_t *buffers,
		       uint64_t *bytes)
{
	const struct pair_fake *f = a->arg;
	int k = a == &f->agent[0] ? 0 : 1;
	(void)hi;
	if (lo == f->lo) {
		*buffers = f->buffers[k];
		*bytes = f->bytes[k];
	}
}

static int count_slice(void *arg, const struct rt_store_slice *sl)
{
	(void)sl;
	++*(int *)arg;
	return 0;
}

/* Slices of the trace in this member's store (read-only look). */
static int slices_in_store(struct cluster *c, uint64_t lo)
{
	struct rt_store_options o = { .path = c->store, .readonly = 1 };
	struct rt_store *s = NULL;
	int n = 0;
	if (rt_store_open(&s, &o) == 0)
		rt_store_slices(s, HI, lo, count_slice, &n);
	rt_store_close(s);
	return n;
}

/* One hand-over case: trace f.lo of c0's range, fake agents A (7) and B (8)
 * registered with both members, each holding one slice of it. */
struct handover_case {
	struct pair_fake f;
	struct eg g[2];
	struct rt_wire_buf reg, trig, slice[2];
};

static void hc_start(struct handover_case *h, uint64_t from_lo)
{
	struct rt_ring ring;
	const uint32_t id[2] = { 7, 8 };
	memset(h, 0, sizeof *h);
	rt_ring_init(&ring);
	rt_ring_add(&ring, "c0");
	rt_ring_add(&ring, "c1");
	for (h->f.lo = from_lo; rt_ring_owner(&ring, h->f.lo) != 0; h->f.lo++)
		;
	for (int k = 0; k < 2; k++) {
		fake_trace_of(&h->g[k], id[k], h->f.lo, &h->slice[k], &h->f.buffers[k],
			      &h->f.bytes[k]);
		ck_assert_int_eq(fake_agent_start(&h->f.agent[k], id[k], pair_holds, &h->f), 0);
		fake_register(&h->reg, &h->f.agent[k], ca.coord_url);
		fake_register(&h->reg, &h->f.agent[k], cb.coord_url);
	}
}

/* B's TRIGGER of the trace, naming A, to the member at url: acknowledged. */
static void hc_trigger(struct handover_case *h, const char *url)
{
	uint32_t crumbs[1] = { h->f.agent[0].id };
	struct rt_wire_trace tr = { .trace_hi = HI, .trace_lo = h->f.lo, .breadcrumb_count = 1,
				    .breadcrumbs = crumbs };
	struct rt_wire_trigger m = { .agent_id = h->f.agent[1].id, .trigger_id = TRIGGER,
				     .trigger_seq = 1, .fired_unix_ns = EG_BASE_NS,
				     .trace_count = 1, .traces = &tr };
	h->trig.len = 0;
	ck_assert_int_eq(rt_wire_encode_trigger(&h->trig, &m), 0);
	ck_assert_int_eq(fake_request(url, &h->trig), 0);
}

/* Ground truth after the hand-over from member `from` to member `to`: the trace
 * at `to` only, coherent, both slices; `from` counts it handed over and keeps
 * no row and (once its deletion committed) no slice of it. */
static void hc_check(struct handover_case *h, struct cluster *from, struct cluster *to)
{
	struct rt_store_trace t;
	const char *fn = from == &ca ? "c0" : "c1", *tn = to == &ca ? "c0" : "c1";
	uint64_t lo = h->f.lo;
	double end;
	ck_assert_msg(cl_wait_trace(to, HI, lo, 120, &t) == 0, "trace %llx not at %s (logs %s, %s)",
		      (unsigned long long)lo, tn, ca.dir, cb.dir);
	ck_assert_msg(t.coherent, "trace %llx incoherent at %s: %u agents, %u missing (the slice "
		      "%s held never reached it)", (unsigned long long)lo, tn, t.agent_count,
		      t.missing_count, fn);
	ck_assert_uint_eq(t.agent_count, 2);
	for (end = mono_s() + 60; cl_coord_figure(from, "handover", "traces_out") < 1 && mono_s() < end;)
		nap_ms(50);
	ck_assert_msg(cl_coord_figure(from, "handover", "traces_out") == 1,
		      "%s counts %lld traces handed over", fn,
		      cl_coord_figure(from, "handover", "traces_out"));
	ck_assert_int_ge(cl_coord_figure(to, "handover", "slices_in"), 1);
	ck_assert_msg(!in_store(from, lo, &t), "trace %llx stored by %s too", (unsigned long long)lo,
		      fn);
	for (end = mono_s() + 30; slices_in_store(from, lo) && mono_s() < end;)
		nap_ms(50); /* the deletion is committed with the next turn there */
	ck_assert_int_eq(slices_in_store(from, lo), 0);
	ck_assert_int_eq(slices_in_store(to, lo), 2);
}

static void hc_stop(struct handover_case *h)
{
	fake_agent_stop_all(h->f.agent, 2);
	for (int k = 0; k < 2; k++) {
		eg_free(&h->g[k]);
		rt_wire_buf_free(&h->slice[k]);
	}
	rt_wire_buf_free(&h->reg);
	rt_wire_buf_free(&h->trig);
	member_extra[0] = NULL;
	cl_stop(&ca);
	cl_stop(&cb);
	cl_coord_args[0] = NULL;
}

START_TEST(handover_after_kill_between_commit_and_ack)
{
	static struct handover_case h;
	int status = 0, exited = 0;
	double end;
	/* Long collect timeouts: c1 must still wait for A's part when c0 returns. */
	member_extra[0] = "--collect-timeout";
	member_extra[1] = "60";
	member_extra[2] = NULL;
	start_members();
	hc_start(&h, 0xc001);
	/* c0 again, now to exit right after the commit of its first slice. */
	cl_kill_coordinator(&ca);
	member_extra[2] = "--fault-exit-after-slices";
	member_extra[3] = "1";
	member_extra[4] = NULL;
	member_args("c0");
	ck_assert_int_eq(cl_start_coordinator(&ca), 0);
	member_extra[2] = NULL;
	/* 1. A's slice: committed at c0, never acknowledged. */
	ck_assert_int_ne(fake_agent_request(ca.collect_url, &h.slice[0], 3000, NULL, 0), 0);
	for (end = mono_s() + 60; !exited && mono_s() < end;) {
		if (waitpid(ca.coord, &status, WNOHANG) == ca.coord)
			exited = 1;
		else
			nap_ms(20);
	}
	ck_assert_msg(exited && WIFEXITED(status) && WEXITSTATUS(status) == 86,
		      "c0 did not exit at its fault point (exited %d, status %#x; log %s/coord.log)",
		      exited, status, ca.dir);
	ca.coord = 0;
	ck_assert_int_eq(slices_in_store(&ca, h.f.lo), 1);
	/* 2. The trigger and B's slice at c1, which asks A and B. */
	hc_trigger(&h, cb.coord_url);
	ck_assert_int_eq(fake_request(cb.collect_url, &h.slice[1]), 0);
	/* 3. c0 returns (no fault); A sends its slice to it again: acknowledged. */
	member_args("c0");
	ck_assert_int_eq(cl_start_coordinator(&ca), 0);
	ck_assert_int_eq(fake_request(ca.collect_url, &h.slice[0]), 0);
	hc_check(&h, &ca, &cb);
	hc_stop(&h);
}
END_TEST

/*
 * handover_to_the_returning_member: the other direction. The trace's TRIGGER
 * (from B, naming A) is committed at c0, its home, which is then killed; A's
 * slice goes to c1 (an orphan there: c1 never got the trigger). c1 holds it
 * past its collect timeout while c0 is down (handover.orphans_waited), and
 * when c0 returns (resuming the trace from its pending trigger; B's slice
 * comes to it) offers it to c0, which takes it. Ground truth: the trace at c0
 * only, coherent, both slices; no row and no slice of it at c1. Without the
 * wait, c1 writes an untriggered row of its own at its collect timeout.
 */
START_TEST(handover_to_the_returning_member)
{
	static struct handover_case h;
	struct rt_store_trace t;
	double end;
	member_extra[0] = "--collect-timeout"; /* c1's orphan would close at 3 s */
	member_extra[1] = "3";
	member_extra[2] = NULL;
	start_members();
	/* c0 again with a long timeout: the resumed trace waits for A's part. */
	cl_kill_coordinator(&ca);
	member_extra[1] = "60";
	member_args("c0");
	ck_assert_int_eq(cl_start_coordinator(&ca), 0);
	hc_start(&h, 0xd001);
	hc_trigger(&h, ca.coord_url); /* committed at c0 */
	cl_kill_coordinator(&ca);
	ck_assert_int_eq(fake_request(cb.collect_url, &h.slice[0]), 0); /* A's part, at c1 */
	/* c1 holds its orphan past the collect timeout, for c0. */
	for (end = mono_s() + 60;
	     cl_coord_figure(&cb, "handover", "orphans_waited") < 1 && mono_s() < end;)
		nap_ms(50);
	ck_assert_msg(cl_coord_figure(&cb, "handover", "orphans_waited") >= 1,
		      "c1 did not hold its orphan for the member that is down (logs %s)", cb.dir);
	ck_assert_msg(!in_store(&cb, h.f.lo, &t), "c1 stored the orphan while c0 was down");
	member_args("c0");
	ck_assert_int_eq(cl_start_coordinator(&ca), 0);
	ck_assert_int_eq(fake_request(ca.collect_url, &h.slice[1]), 0); /* B's part, at c0 */
	hc_check(&h, &cb, &ca);
	hc_stop(&h);
}
END_TEST

/*
 * handover_asked_by_the_trigger_holder: seen under load in member_kill9_and_return
 * (900d incoherent at c1: 1 agent, 2 missing). A's slice is committed and
 * acknowledged at c0, which has no trigger of the trace (an orphan there), and
 * c0 is killed; the trigger and B's slice go to c1, which asks A: A says it
 * holds its part, but sends it nowhere again (acknowledged). c0 returns with
 * the slice in its store and nothing open. c1 asks the other members for the
 * parts it misses ("handover HI LO c1"); c0 reopens the orphan from its store
 * and hands it over. Without the ask, c1 closes the trace incoherent at its
 * collect timeout and c0 keeps a slice of it.
 */
START_TEST(handover_asked_by_the_trigger_holder)
{
	static struct handover_case h;
	member_extra[0] = "--collect-timeout"; /* c1 waits for c0's restart, however slow */
	member_extra[1] = "30";
	member_extra[2] = NULL;
	start_members();
	hc_start(&h, 0xe001);
	ck_assert_int_eq(fake_request(ca.collect_url, &h.slice[0]), 0); /* A's part, acked by c0 */
	cl_kill_coordinator(&ca);
	hc_trigger(&h, cb.coord_url);
	ck_assert_int_eq(fake_request(cb.collect_url, &h.slice[1]), 0); /* B's part, at c1 */
	member_args("c0");
	ck_assert_int_eq(cl_start_coordinator(&ca), 0);
	hc_check(&h, &ca, &cb);
	ck_assert_int_ge(cl_coord_figure(&ca, "handover", "orphans_reopened"), 1);
	hc_stop(&h);
}
END_TEST

/*
 * trigger_after_restart_counts_stored_slices: seen under load in
 * member_kill9_and_return (four traces "incoherent at c0: 0 agents, 3 missing"):
 * the slices of a trace were committed (and acknowledged) at c0 ahead of their
 * trigger, which c0 had not stored when it was killed; after the restart the
 * agent sends the trigger again, and the new group must count the slices the
 * store already holds: their agents send them no more. Without it, the trace
 * closes at the collect timeout with none of its parts.
 */
START_TEST(trigger_after_restart_counts_stored_slices)
{
	static struct handover_case h;
	struct rt_store_trace t;
	start_members();
	hc_start(&h, 0xf001);
	ck_assert_int_eq(fake_request(ca.collect_url, &h.slice[0]), 0);
	ck_assert_int_eq(fake_request(ca.collect_url, &h.slice[1]), 0);
	cl_kill_coordinator(&ca);
	member_args("c0");
	ck_assert_int_eq(cl_start_coordinator(&ca), 0);
	hc_trigger(&h, ca.coord_url);
	ck_assert_msg(cl_wait_trace(&ca, HI, h.f.lo, 120, &t) == 0, "trace %llx not at c0 (logs %s)",
		      (unsigned long long)h.f.lo, ca.dir);
	ck_assert_msg(t.coherent, "trace %llx incoherent at c0: %u agents, %u missing (its "
		      "stored slices were not counted)", (unsigned long long)h.f.lo, t.agent_count,
		      t.missing_count);
	ck_assert_uint_eq(t.agent_count, 2);
	ck_assert_int_eq(cl_coord_figure(&ca, "collection", "prior_slices_counted"), 2);
	ck_assert_msg(!in_store(&cb, h.f.lo, &t), "trace %llx stored by c1 too",
		      (unsigned long long)h.f.lo);
	hc_stop(&h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("coordinator_sharding");
	/* One TCase per test, named as it (CK_RUN_CASE runs one per ctest entry). */
	TCase *t1 = tcase_create("sharded_collection"), *t2 = tcase_create("member_kill9_and_return");
	TCase *t3 = tcase_create("clickhouse_pair");
	TCase *t4 = tcase_create("untriggered_slice_never_coherent");
	TCase *t5 = tcase_create("handover_after_kill_between_commit_and_ack");
	TCase *t6 = tcase_create("handover_to_the_returning_member");
	TCase *t7 = tcase_create("handover_asked_by_the_trigger_holder");
	TCase *t8 = tcase_create("trigger_after_restart_counts_stored_slices");
	const char *only = getenv("CK_RUN_CASE");
	tcase_set_timeout(t1, 240);
	tcase_set_timeout(t2, 240);
	tcase_set_timeout(t3, 240);
	tcase_add_test(t1, sharded_collection);
	tcase_add_test(t2, member_kill9_and_return);
	tcase_set_timeout(t4, 240);
	tcase_add_test(t3, clickhouse_pair);
	tcase_add_test(t4, untriggered_slice_never_coherent);
	suite_add_tcase(s, t1);
	suite_add_tcase(s, t2);
	suite_add_tcase(s, t4);
	tcase_set_timeout(t5, 240);
	tcase_add_test(t5, handover_after_kill_between_commit_and_ack);
	suite_add_tcase(s, t5);
	tcase_set_timeout(t6, 240);
	tcase_add_test(t6, handover_to_the_returning_member);
	suite_add_tcase(s, t6);
	tcase_set_timeout(t7, 240);
	tcase_add_test(t7, handover_asked_by_the_trigger_holder);
	suite_add_tcase(s, t7);
	tcase_set_timeout(t8, 240);
	tcase_add_test(t8, trigger_after_restart_counts_stored_slices);
	suite_add_tcase(s, t8);
	if (chs_binary()) {
		suite_add_tcase(s, t3);
	} else if (only && !strcmp(only, "clickhouse_pair")) {
		printf("SKIP: clickhouse-server is not installed (bash scripts/deps.sh installs it)\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	return test_run_suite(s);
}
