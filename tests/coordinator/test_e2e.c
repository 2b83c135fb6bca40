/*
 * tests/coordinator/test_e2e.c — the coordinator end to end, real processes on
 * loopback: retrace-coordinator, one retrace-agent per host, writer processes
 * linking libretrace (cluster.h). Each test starts its own deployment, fires
 * triggers from a writer as an error handler would, and checks what the store
 * holds: which agents delivered, coherence, and the records byte for byte.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "retrace/tracer.h"
#include "common/suite.h"

#define HI 0x0123456789abcdefull
#define ERROR_TRIGGER 100
#define RECORDS 12

static void nap_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int has_agent(const uint32_t *list, uint32_t n, uint32_t id)
{
	for (uint32_t i = 0; i < n; i++)
		if (list[i] == id)
			return 1;
	return 0;
}

/* Host h writes lo with breadcrumbs to the agents given, RECORDS records. */
static void write_on(struct cluster *c, int h, uint64_t lo, const uint32_t *crumbs, int n)
{
	ck_assert_int_eq(cl_write(c, h, HI, lo, RECORDS, crumbs, n), 0);
}

static void assert_records(struct cluster *c, uint64_t lo, int h)
{
	char why[256] = "";
	int rc = cl_check_records(c, HI, lo, h, RECORDS, why, sizeof why);
	ck_assert_msg(rc == 0, "trace %llx: %s", (unsigned long long)lo, why);
}

/* A request crossing 3 hosts (1 -> 2 -> 3), error on the last: all 3 slices, byte-exact. */
START_TEST(chain_three_hosts_byte_exact)
{
	struct cluster c;
	struct rt_store_trace t;
	uint32_t to1 = 1, to2 = 2;
	uint64_t lo = 0x1001;
	ck_assert_int_eq(cl_start(&c, 3, 256), 0);
	write_on(&c, 0, lo, NULL, 0);
	write_on(&c, 1, lo, &to1, 1);
	write_on(&c, 2, lo, &to2, 1);
	ck_assert_int_eq(cl_trigger(&c, 2, HI, lo, ERROR_TRIGGER, NULL, 0), 0);
	ck_assert_msg(cl_wait_trace(&c, HI, lo, 15, &t) == 0, "trace never stored (see %s)", c.dir);
	ck_assert_msg(t.coherent, "incoherent: %u agents, %u missing", t.agent_count, t.missing_count);
	ck_assert_uint_eq(t.agent_count, 3);
	for (uint32_t id = 1; id <= 3; id++)
		ck_assert(has_agent(t.agents, t.agent_count, id));
	ck_assert_uint_eq(t.trigger_count, 1);
	ck_assert_uint_eq(t.trigger_ids[0], ERROR_TRIGGER);
	ck_assert(t.traversal_ns > 0);
	for (int h = 0; h < 3; h++) {
		assert_records(&c, lo, h);
		/* every agent was asked, and timed its part of the hop (agent/control.h) */
		ck_assert_int_ge(cl_agent_figure(&c, h, "reporting", "requests_timed"), 1);
		ck_assert_int_ge(cl_agent_figure(&c, h, "reporting", "request_answer_p99_us"),
				 cl_agent_figure(&c, h, "reporting", "request_answer_p50_us"));
		ck_assert_int_ge(cl_agent_figure(&c, h, "reporting", "request_wait_p50_us"), 0);
		ck_assert_int_ge(cl_agent_figure(&c, h, "reporting", "request_wait_p99_us"),
				 cl_agent_figure(&c, h, "reporting", "request_wait_p50_us"));
	}
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

/* Host 1 calls hosts 2, 3, 4 (a fan-out); the trigger fires on leaf 4. */
START_TEST(fanout_collects_every_branch)
{
	struct cluster c;
	struct rt_store_trace t;
	uint32_t callees[] = { 2, 3, 4 }, caller = 1;
	uint64_t lo = 0x2002;
	ck_assert_int_eq(cl_start(&c, 4, 256), 0);
	write_on(&c, 0, lo, callees, 3);
	for (int h = 1; h < 4; h++)
		write_on(&c, h, lo, &caller, 1);
	ck_assert_int_eq(cl_trigger(&c, 3, HI, lo, ERROR_TRIGGER, NULL, 0), 0);
	ck_assert_msg(cl_wait_trace(&c, HI, lo, 15, &t) == 0, "trace never stored (see %s)", c.dir);
	ck_assert_msg(t.coherent, "incoherent (see %s)", c.dir);
	ck_assert_uint_eq(t.agent_count, 4);
	for (int h = 0; h < 4; h++)
		assert_records(&c, lo, h);
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

/* A trigger naming 10 lateral traces collects all 11, coherently, as one group. */
START_TEST(lateral_group_of_eleven)
{
	struct cluster c;
	struct rt_store_trace t, first;
	uint64_t lats[10];
	uint32_t caller = 1;
	ck_assert_int_eq(cl_start(&c, 2, 512), 0);
	for (int i = 0; i < 11; i++) {
		write_on(&c, 0, 0x3001 + (uint64_t)i, NULL, 0);
		write_on(&c, 1, 0x3001 + (uint64_t)i, &caller, 1);
	}
	for (int i = 0; i < 10; i++)
		lats[i] = 0x3002 + (uint64_t)i;
	ck_assert_int_eq(cl_trigger(&c, 1, HI, 0x3001, ERROR_TRIGGER, lats, 10), 0);
	ck_assert_msg(cl_wait_trace(&c, HI, 0x3001, 15, &first) == 0, "trace never stored (see %s)", c.dir);
	for (int i = 0; i < 11; i++) {
		uint64_t lo = 0x3001 + (uint64_t)i;
		ck_assert_msg(cl_wait_trace(&c, HI, lo, 10, &t) == 0, "lateral %d never stored", i);
		ck_assert_msg(t.coherent, "lateral %d incoherent", i);
		ck_assert_uint_eq(t.agent_count, 2);
		ck_assert_uint_eq(t.group_id, first.group_id);
		assert_records(&c, lo, 0);
		assert_records(&c, lo, 1);
	}
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

/* The upstream host evicted the trace before the (late) trigger: incoherent, not silently partial. */
START_TEST(eviction_race_is_incoherent)
{
	struct cluster c;
	struct rt_store_trace t;
	uint32_t caller = 1;
	uint64_t lo = 0x4004;
	ck_assert_int_eq(cl_start(&c, 2, 64), 0);
	write_on(&c, 0, lo, NULL, 0);
	write_on(&c, 1, lo, &caller, 1);
	/* The trigger is late: host 1 keeps serving other requests meanwhile. Its
	 * eviction is LRU and this trace is the oldest there, so it goes first:
	 * a few dozen evictions leave no doubt. Evictions come only from new
	 * data, and on a busy machine many writes hit the discard buffer (the
	 * agent is slow to recycle), so host 1 writes until they happened rather
	 * than a fixed number of traces (bounded). */
	for (int i = 0; i < 6000 && cl_agent_figure(&c, 0, "traces", "evicted") < 32; i += 50)
		for (int k = 0; k < 50; k++)
			ck_assert_int_eq(cl_write(&c, 0, HI, 0x10000 + (uint64_t)(i + k), 4, NULL, 0), 0);
	ck_assert_int_ge(cl_agent_figure(&c, 0, "traces", "evicted"), 32);
	ck_assert_int_eq(cl_trigger(&c, 1, HI, lo, ERROR_TRIGGER, NULL, 0), 0);
	ck_assert_msg(cl_wait_trace(&c, HI, lo, 15, &t) == 0, "trace never stored (see %s)", c.dir);
	ck_assert_msg(!t.coherent, "a trace missing host 1's slice was called coherent");
	ck_assert(has_agent(t.missing, t.missing_count, 1));
	ck_assert(has_agent(t.agents, t.agent_count, 2));
	assert_records(&c, lo, 1);
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

/* kill -9 of the coordinator while a traversal waits on a slow agent, then restart. */
START_TEST(coordinator_kill9_mid_traversal)
{
	struct cluster c;
	struct rt_store_trace t;
	uint32_t to1 = 1, to2 = 2;
	long long acked = 0;
	ck_assert_int_eq(cl_start(&c, 3, 256), 0);
	for (uint64_t lo = 0x5001; lo <= 0x5005; lo++) {
		write_on(&c, 0, lo, NULL, 0);
		write_on(&c, 1, lo, &to1, 1);
		write_on(&c, 2, lo, &to2, 1);
	}
	ck_assert_int_eq(cl_stop_agent(&c, 0), 0); /* the far end of every chain stops answering */
	for (uint64_t lo = 0x5001; lo <= 0x5005; lo++)
		ck_assert_int_eq(cl_trigger(&c, 2, HI, lo, ERROR_TRIGGER, NULL, 0), 0);
	nap_ms(400); /* triggers stored and acknowledged; traversals wait on host 1 */
	cl_kill_coordinator(&c);
	kill(c.hosts[0].agent, SIGCONT);
	nap_ms(300);
	ck_assert_int_eq(cl_start_coordinator(&c), 0);
	for (uint64_t lo = 0x5001; lo <= 0x5005; lo++) {
		ck_assert_msg(cl_wait_trace(&c, HI, lo, 20, &t) == 0, "trace %llx never stored (see %s)",
			      (unsigned long long)lo, c.dir);
		if (!t.coherent)
			cl_dump_status(&c, "incoherent");
		ck_assert_msg(t.coherent, "trace %llx incoherent after the restart (figures: %s/status-*)",
			      (unsigned long long)lo, c.dir);
		ck_assert_uint_eq(t.agent_count, 3);
		for (int h = 0; h < 3; h++)
			assert_records(&c, lo, h);
	}
	/* Nothing an agent saw acknowledged is missing from the store. */
	for (int h = 0; h < 3; h++) {
		long long a = cl_agent_figure(&c, h, "reporting", "slices_acked");
		ck_assert_int_ge(a, 1);
		acked += a;
	}
	ck_assert_int_ge(cl_store_slices(&c), acked);
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

/*
 * A storm of one trigger must not starve another of the coordinator's group
 * table. Groups are held open (a long --settle) while trigger A fires on ten
 * traces in a table of eight: A may hold at most half, so trigger B, fired
 * after the storm, still gets a group. Before the shares, A took all eight and
 * B was dropped.
 */
START_TEST(storm_leaves_room_for_a_quiet_trigger)
{
	struct cluster c;
	const uint32_t storm = 200, quiet = 201;
	long long a_open, a_dropped, b_opened, b_dropped;
	cl_coord_args[0] = "--max-groups";
	cl_coord_args[1] = "8";
	cl_coord_args[2] = "--settle";
	cl_coord_args[3] = "30";
	cl_coord_args[4] = "--collect-timeout";
	cl_coord_args[5] = "60";
	ck_assert_int_eq(cl_start(&c, 1, 256), 0);
	for (int i = 0; i < 10; i++) {
		write_on(&c, 0, 0x5000 + (uint64_t)i, NULL, 0);
		ck_assert_int_eq(cl_trigger(&c, 0, HI, 0x5000 + (uint64_t)i, storm, NULL, 0), 0);
	}
	/* Wait until the coordinator has decided on all ten (opened or dropped). */
	for (double end = cl_now_s() + 15; cl_now_s() < end;) {
		a_open = cl_coord_figure(&c, "trigger_shares", "trigger_200_opened");
		a_dropped = cl_coord_figure(&c, "trigger_shares", "trigger_200_dropped");
		if (a_open >= 4 && a_dropped >= 6)
			break;
		nap_ms(50);
	}
	a_open = cl_coord_figure(&c, "trigger_shares", "trigger_200_open");
	a_dropped = cl_coord_figure(&c, "trigger_shares", "trigger_200_dropped");
	/* (A dropped trace's slices, arriving as orphans, are refused too.) */
	ck_assert_msg(a_open == 4 && a_dropped >= 6,
		      "storm trigger: %lld groups open, %lld dropped; want 4 (half of 8) and >= 6",
		      a_open, a_dropped);
	write_on(&c, 0, 0x6000, NULL, 0);
	ck_assert_int_eq(cl_trigger(&c, 0, HI, 0x6000, quiet, NULL, 0), 0);
	for (double end = cl_now_s() + 15; cl_now_s() < end;) {
		if (cl_coord_figure(&c, "trigger_shares", "trigger_201_opened") +
			    (cl_coord_figure(&c, "trigger_shares", "trigger_201_dropped") > 0) >= 1)
			break;
		nap_ms(50);
	}
	b_opened = cl_coord_figure(&c, "trigger_shares", "trigger_201_opened");
	b_dropped = cl_coord_figure(&c, "trigger_shares", "trigger_201_dropped");
	ck_assert_msg(b_opened == 1 && b_dropped <= 0,
		      "quiet trigger under the storm: %lld opened, %lld dropped", b_opened, b_dropped);
	cl_coord_args[0] = NULL;
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

/*
 * A request whose call to another host left no breadcrumb there (the callee's
 * response context was not passed back, the callee is on a host whose agent
 * never heard of the trace): every agent the coordinator knows of delivers, yet
 * the trace is not whole. Scenario 0 writes a server span with one CLIENT call
 * nothing answers; scenario 1 the same call marked peer.untraced (a call to a
 * service that is not traced), which is complete.
 */
static int one_sided_call(int host, retrace_trace_id id, struct cl_run_io *io)
{
	(void)host;
	if (retrace_begin(id) != 1)
		return 1;
	retrace_span_start("GET /order", RETRACE_SPAN_SERVER);
	retrace_span_start("POST /payment", RETRACE_SPAN_CLIENT);
	if (io->scenario == 1)
		retrace_attr_bool(RETRACE_ATTR_PEER_UNTRACED, 1);
	retrace_span_end_ok();
	retrace_span_end_ok();
	retrace_end();
	return 0;
}

START_TEST(unanswered_call_is_incoherent)
{
	struct cluster c;
	struct rt_store_trace t;
	struct cl_run_io io;
	cl_run_fn = one_sided_call;
	ck_assert_int_eq(cl_start(&c, 1, 256), 0);
	memset(&io, 0, sizeof io);
	io.scenario = 0;
	ck_assert_int_eq(cl_run(&c, 0, HI, 0x7001, &io), 0);
	io.scenario = 1;
	ck_assert_int_eq(cl_run(&c, 0, HI, 0x7002, &io), 0);
	ck_assert_int_eq(cl_trigger(&c, 0, HI, 0x7001, ERROR_TRIGGER, NULL, 0), 0);
	ck_assert_int_eq(cl_trigger(&c, 0, HI, 0x7002, ERROR_TRIGGER, NULL, 0), 0);
	ck_assert_msg(cl_wait_trace(&c, HI, 0x7001, 15, &t) == 0, "trace never stored (see %s)", c.dir);
	ck_assert_msg(!t.coherent,
		      "a CLIENT span whose server side never arrived was stored coherent (see %s)",
		      c.dir);
	ck_assert_msg(cl_wait_trace(&c, HI, 0x7002, 15, &t) == 0, "trace never stored (see %s)", c.dir);
	ck_assert_msg(t.coherent, "a call marked peer.untraced made the trace incoherent (see %s)",
		      c.dir);
	ck_assert_int_eq(cl_coord_figure(&c, "collection", "traces_incomplete"), 1);
	cl_run_fn = NULL;
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

/*
 * A writer that has not ended its run of the trace when the traversal reaches
 * its host: the agent says "open", the coordinator keeps asking and, at the
 * collect timeout, stores the trace incoherent — never coherent with the rest
 * still to come. Once the writer ends the trace, `retrace recollect` traverses
 * it again and the row becomes coherent with everything written.
 * Scenario 10 begins the trace and opens a span (the harness flushes after it:
 * everything handed in, but no LAST buffer); scenario 11 ends both.
 */
static int open_then_end(int host, retrace_trace_id id, struct cl_run_io *io)
{
	(void)host;
	if (io->scenario == 10) {
		if (retrace_begin(id) != 1)
			return 1;
		retrace_span_start("GET /slow", RETRACE_SPAN_SERVER);
		retrace_attr_int("step", 1);
		return 0;
	}
	retrace_attr_int("step", 2);
	retrace_span_end_ok();
	retrace_end();
	return 0;
}

START_TEST(open_writer_is_not_coherent_until_recollected)
{
	struct cluster c;
	struct rt_store_trace t;
	struct cl_run_io io;
	char cmd[512];
	const uint64_t lo = 0x8001;
	cl_run_fn = open_then_end;
	cl_coord_args[0] = "--collect-timeout";
	cl_coord_args[1] = "2";
	ck_assert_int_eq(cl_start(&c, 1, 256), 0);
	memset(&io, 0, sizeof io);
	io.scenario = 10;
	ck_assert_int_eq(cl_run(&c, 0, HI, lo, &io), 0);
	ck_assert_int_eq(cl_trigger(&c, 0, HI, lo, ERROR_TRIGGER, NULL, 0), 0);
	ck_assert_msg(cl_wait_trace(&c, HI, lo, 15, &t) == 0, "trace never stored (see %s)", c.dir);
	ck_assert_msg(!t.coherent, "stored coherent while its writer had not ended it (see %s)",
		      c.dir);
	ck_assert_msg(has_agent(t.missing, t.missing_count, 1), "agent 1 not listed missing");
	ck_assert_int_ge(cl_agent_figure(&c, 0, "reporting", "remote_open_traces"), 1);

	io.scenario = 11;
	ck_assert_int_eq(cl_run(&c, 0, HI, lo, &io), 0);
	snprintf(cmd, sizeof cmd, "%s recollect --coordinator %s %016llx%016llx >/dev/null",
		 CLI_BIN, c.coord_url, (unsigned long long)HI, (unsigned long long)lo);
	ck_assert_msg(system(cmd) == 0, "retrace recollect failed");
	for (double end = cl_now_s() + 10; cl_now_s() < end;) {
		ck_assert_int_eq(cl_wait_trace(&c, HI, lo, 5, &t), 0);
		if (t.coherent)
			break;
		nap_ms(50);
	}
	ck_assert_msg(t.coherent, "still incoherent after the writer ended and a recollect (see %s)",
		      c.dir);
	ck_assert_uint_eq(t.agent_count, 1);
	ck_assert_int_eq(cl_coord_figure(&c, "collection", "recollections"), 1);
	cl_run_fn = NULL;
	cl_coord_args[0] = NULL;
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

/*
 * A hop learned after the trigger: the origin's agent has already answered (no
 * writer open, nothing more to name) when a breadcrumb to another host arrives
 * for the triggered trace — a call that was still in flight when an error
 * handler fired. The agent posts the new hop to the coordinator, which asks that
 * host too. Before, the trace closed with the origin's part only and was called
 * coherent without the other host's data.
 */
START_TEST(hop_learned_after_the_trigger_is_followed)
{
	struct cluster c;
	struct rt_store_trace t;
	uint32_t callee = 2;
	const uint64_t lo = 0x9001;
	cl_coord_args[0] = "--settle";
	cl_coord_args[1] = "5";
	double triggered, learned;
	ck_assert_int_eq(cl_start(&c, 2, 256), 0);
	write_on(&c, 0, lo, NULL, 0);
	write_on(&c, 1, lo, NULL, 0);
	triggered = cl_now_s();
	ck_assert_int_eq(cl_trigger(&c, 0, HI, lo, ERROR_TRIGGER, NULL, 0), 0);
	for (double end = cl_now_s() + 12;
	     cl_now_s() < end && cl_agent_figure(&c, 0, "reporting", "remote_triggers") < 1;)
		nap_ms(20);
	ck_assert_int_ge(cl_agent_figure(&c, 0, "reporting", "remote_triggers"), 1);
	/* The call's response comes back now: host 1 (agent 1) learns of agent 2. */
	ck_assert_int_eq(cl_write(&c, 0, HI, lo, 0, &callee, 1), 0);
	learned = cl_now_s();
	/* The final row holds both hosts. Stored rows are read until it does: on
	 * a loaded machine the steps above (each figure spawns the CLI) can take
	 * longer than the 5 s settle, and then the trace closed with the origin
	 * alone first and was reopened (stress run, load 80) — right, and the
	 * other test's path; only when the hop came well inside the settle must
	 * it have been followed without a reopen. */
	t.agent_count = 0;
	for (double end = cl_now_s() + 30; cl_now_s() < end;) {
		ck_assert_msg(cl_wait_trace(&c, HI, lo, 30, &t) == 0, "trace never stored (see %s)",
			      c.dir);
		if (t.coherent && t.agent_count == 2)
			break;
		nap_ms(50);
	}
	ck_assert_msg(t.coherent && t.agent_count == 2,
		      "stored %s with %u agent(s): the hop learned after the trigger was not followed "
		      "(see %s)", t.coherent ? "coherent" : "incoherent", t.agent_count, c.dir);
	if (learned - triggered < 4)
		ck_assert_int_eq(cl_coord_figure(&c, "collection", "reopened"), 0);
	assert_records(&c, lo, 0);
	assert_records(&c, lo, 1);
	ck_assert_int_ge(cl_agent_figure(&c, 0, "reporting", "crumb_updates"), 1);
	cl_coord_args[0] = NULL;
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

/*
 * The same hop, learned only after the trace was closed and stored with the
 * origin's part: the agent's update names an agent the stored row does not
 * know, so the coordinator reopens the trace and collects that host too; the
 * row is replaced by one with both parts.
 */
START_TEST(hop_learned_after_close_reopens)
{
	struct cluster c;
	struct rt_store_trace t;
	uint32_t callee = 2;
	const uint64_t lo = 0x9002;
	ck_assert_int_eq(cl_start(&c, 2, 256), 0);
	write_on(&c, 0, lo, NULL, 0);
	write_on(&c, 1, lo, NULL, 0);
	ck_assert_int_eq(cl_trigger(&c, 0, HI, lo, ERROR_TRIGGER, NULL, 0), 0);
	ck_assert_msg(cl_wait_trace(&c, HI, lo, 30, &t) == 0, "trace never stored (see %s)", c.dir);
	ck_assert_uint_eq(t.agent_count, 1);
	ck_assert_int_eq(cl_write(&c, 0, HI, lo, 0, &callee, 1), 0);
	for (double end = cl_now_s() + 30; cl_now_s() < end;) {
		ck_assert_int_eq(cl_wait_trace(&c, HI, lo, 5, &t), 0);
		if (t.agent_count == 2 && t.coherent)
			break;
		nap_ms(50);
	}
	ck_assert_msg(t.coherent && t.agent_count == 2,
		      "not reopened: stored %s with %u agent(s) (see %s)",
		      t.coherent ? "coherent" : "incoherent", t.agent_count, c.dir);
	assert_records(&c, lo, 0);
	assert_records(&c, lo, 1);
	ck_assert_int_eq(cl_coord_figure(&c, "collection", "reopened"), 1);
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

/*
 * A burst of triggers on a three-host chain: the coordinator asks each agent
 * for many groups' traces in one remote trigger, and every trace still comes
 * back coherent with every host's records byte for byte.
 */
START_TEST(burst_of_triggers_all_coherent)
{
	enum { N = 40 };
	struct cluster c;
	struct rt_store_trace t;
	uint32_t to1 = 1, to2 = 2;
	int i, h;
	ck_assert_int_eq(cl_start(&c, 3, 1024), 0);
	for (i = 0; i < N; i++) {
		write_on(&c, 0, 0xa000 + (uint64_t)i, NULL, 0);
		write_on(&c, 1, 0xa000 + (uint64_t)i, &to1, 1);
		write_on(&c, 2, 0xa000 + (uint64_t)i, &to2, 1);
	}
	for (i = 0; i < N; i++)
		ck_assert_int_eq(cl_trigger(&c, 2, HI, 0xa000 + (uint64_t)i, ERROR_TRIGGER, NULL, 0), 0);
	for (i = 0; i < N; i++) {
		uint64_t lo = 0xa000 + (uint64_t)i;
		ck_assert_msg(cl_wait_trace(&c, HI, lo, 30, &t) == 0, "trace %d never stored (see %s)",
			      i, c.dir);
		ck_assert_msg(t.coherent && t.agent_count == 3, "trace %d: %s with %u agents (see %s)", i,
			      t.coherent ? "coherent" : "incoherent", t.agent_count, c.dir);
		for (h = 0; h < 3; h++)
			assert_records(&c, lo, h);
	}
	/* Every group asked agents 2 and 1 once each (agent 3 sent the trigger with
	 * its own breadcrumbs): at least 2 N asks, in no more requests than asks. */
	ck_assert_int_ge(cl_coord_figure(&c, "traversal", "remote_asks"), 2 * N);
	ck_assert_int_le(cl_coord_figure(&c, "traversal", "remote_triggers_sent"),
			 cl_coord_figure(&c, "traversal", "remote_asks"));
	ck_assert_int_eq(cl_coord_figure(&c, "traversal", "remote_failed"), 0);
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

/*
 * The middle agent of a chain stops answering (SIGSTOP) before a burst of
 * triggers: each group's ask to it times out, is retried once, then fails, and
 * every trace is stored incoherent — never coherent with a host missing.
 * On a loaded machine a live agent may also miss the 0.3 s timeout once and be
 * answered on its retry (seen: agent 3, remote_retries 9 for 8 groups), so the
 * totals are lower bounds; the silent agent's own requests must all fail.
 */
/* n requests 1 -> 2 -> 3 from trace `base` on three hosts (breadcrumbs back to
 * the caller); host 1's agent stopped (SIGSTOP); each triggered on host 3. */
static void chains_with_middle_agent_stopped(struct cluster *c, uint64_t base, int n)
{
	uint32_t to1 = 1, to2 = 2;
	for (int i = 0; i < n; i++) {
		write_on(c, 0, base + (uint64_t)i, NULL, 0);
		write_on(c, 1, base + (uint64_t)i, &to1, 1);
		write_on(c, 2, base + (uint64_t)i, &to2, 1);
	}
	ck_assert_int_eq(cl_stop_agent(c, 1), 0);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(cl_trigger(c, 2, HI, base + (uint64_t)i, ERROR_TRIGGER, NULL, 0), 0);
}

START_TEST(silent_agent_is_retried_then_incoherent)
{
	enum { N = 8 };
	struct cluster c;
	struct rt_store_trace t;
	int i;
	cl_coord_args[0] = "--agent-timeout";
	cl_coord_args[1] = "0.3";
	cl_coord_args[2] = "--agent-retries";
	cl_coord_args[3] = "1";
	cl_coord_args[4] = NULL;
	ck_assert_int_eq(cl_start(&c, 3, 256), 0);
	chains_with_middle_agent_stopped(&c, 0xb000, N);
	for (i = 0; i < N; i++) {
		ck_assert_msg(cl_wait_trace(&c, HI, 0xb000 + (uint64_t)i, 30, &t) == 0,
			      "trace %d never stored (see %s)", i, c.dir);
		ck_assert_msg(!t.coherent, "trace %d stored coherent with agent 2 silent (see %s)", i,
			      c.dir);
	}
	/* Agent 2 answered nothing: every request it was sent failed (one still in
	 * flight when the last trace closed is waited for), and a failed ask was
	 * asked again. The totals over all agents are not exact on a loaded
	 * machine: a live agent may miss the 0.3 s once and answer its retry, and
	 * a group may close at its collect timeout before its ask's failure comes
	 * (seen in the stress run: remote_failed 0 and 7 of 8). */
	{
		long long asked = -1, failed = -2;
		for (double end = cl_now_s() + 10; cl_now_s() < end;) {
			asked = cl_coord_agent_figure(&c, 2, "asked");
			failed = cl_coord_agent_figure(&c, 2, "failed");
			if (asked >= 0 && failed == asked)
				break;
			nap_ms(50);
		}
		if (!(asked >= 0 && failed == asked)) { /* where the round trips wait */
			cl_dump_status(&c, "silent-agent");
			cl_dump_stacks(&c, "silent-agent");
		}
		ck_assert_msg(asked >= 0 && failed == asked,
			      "silent agent 2: %lld requests, %lld failed (see %s)", asked, failed,
			      c.dir);
		/* a stopped agent cannot answer (before cl_stop_agent waited for every
		 * thread to stop, 1 or 2 asks of a loaded run were answered) */
		ck_assert_int_eq(cl_coord_agent_figure(&c, 2, "answered"), 0);
		if (asked > 0)
			ck_assert_msg(cl_coord_figure(&c, "traversal", "remote_retries") >= 1,
				      "agent 2's failed asks were never asked again (see %s)", c.dir);
	}
	ck_assert_int_eq(kill(c.hosts[1].agent, SIGCONT), 0);
	cl_coord_args[0] = NULL;
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

/*
 * An agent that is only slow (stopped 3 s, then resumed) is asked until it
 * answers, not given up after its retries: with --agent-retries 0 its first
 * ask fails after 1 s, and before ask_again (traversal.c) that cell failed and
 * every trace closed incoherent though the agent held its slices. Now the
 * coordinator asks again while a round trip fits before the collect timeout
 * (20 s here, room for a loaded machine), and every trace is coherent.
 */
START_TEST(slow_agent_is_asked_until_it_answers)
{
	enum { N = 4 };
	struct cluster c;
	struct rt_store_trace t;
	int i;
	cl_coord_args[0] = "--agent-timeout";
	cl_coord_args[1] = "1";
	cl_coord_args[2] = "--agent-retries";
	cl_coord_args[3] = "0";
	cl_coord_args[4] = "--collect-timeout";
	cl_coord_args[5] = "20";
	cl_coord_args[6] = NULL;
	ck_assert_int_eq(cl_start(&c, 3, 256), 0);
	chains_with_middle_agent_stopped(&c, 0xd000, N);
	/* the stopped agent's first ask fails (1 s): wait for it (each look runs the
	 * CLI, slow on a loaded machine: bounded by the clock, not a count), then
	 * 2 s more */
	{
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			if (cl_coord_agent_figure(&c, 2, "failed") >= 1)
				break;
			nap_ms(50);
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while (t.tv_sec - t0.tv_sec < 15);
	}
	ck_assert_msg(cl_coord_agent_figure(&c, 2, "failed") >= 1,
		      "no ask to the stopped agent failed (see %s)", c.dir);
	nap_ms(2000);
	ck_assert_int_eq(kill(c.hosts[1].agent, SIGCONT), 0);
	for (i = 0; i < N; i++) {
		ck_assert_msg(cl_wait_trace(&c, HI, 0xd000 + (uint64_t)i, 60, &t) == 0,
			      "trace %d never stored (see %s)", i, c.dir);
		ck_assert_msg(t.coherent && t.agent_count == 3,
			      "trace %d incoherent (%u agents, %u missing) though its slow agent "
			      "answered before the collect timeout (see %s)", i, t.agent_count,
			      t.missing_count, c.dir);
	}
	ck_assert_int_ge(cl_coord_figure(&c, "traversal", "remote_retries"), 1);
	cl_coord_args[0] = NULL;
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

/* One TCase per test, so ctest runs each as its own entry (CK_RUN_CASE). */
#define ADD_CASE(s, fn)                                      \
	do {                                                 \
		TCase *tc = tcase_create(#fn);               \
		tcase_set_timeout(tc, 80);                   \
		tcase_add_test(tc, fn);                      \
		suite_add_tcase(s, tc);                      \
	} while (0)

static Suite *e2e_suite(void)
{
	Suite *s = suite_create("coordinator_e2e");
	ADD_CASE(s, chain_three_hosts_byte_exact);
	ADD_CASE(s, fanout_collects_every_branch);
	ADD_CASE(s, lateral_group_of_eleven);
	ADD_CASE(s, eviction_race_is_incoherent);
	ADD_CASE(s, coordinator_kill9_mid_traversal);
	ADD_CASE(s, storm_leaves_room_for_a_quiet_trigger);
	ADD_CASE(s, unanswered_call_is_incoherent);
	ADD_CASE(s, open_writer_is_not_coherent_until_recollected);
	ADD_CASE(s, hop_learned_after_the_trigger_is_followed);
	ADD_CASE(s, burst_of_triggers_all_coherent);
	ADD_CASE(s, silent_agent_is_retried_then_incoherent);
	{ /* up to a 20 s collect timeout on a loaded machine: more than the usual 80 s */
		TCase *tc = tcase_create("slow_agent_is_asked_until_it_answers");
		tcase_set_timeout(tc, 140);
		tcase_add_test(tc, slow_agent_is_asked_until_it_answers);
		suite_add_tcase(s, tc);
	}
	ADD_CASE(s, hop_learned_after_close_reopens);
	return s;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	return test_run_suite(e2e_suite());
}
