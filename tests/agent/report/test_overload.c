/*
 * Reporting under overload.
 *
 * coherent: two agents (two pools, one client process each) hold the same N
 *   triggered traces (same ids, same sizes, same trigger, written in the same
 *   order at the same pace); one collector, slower than both together, serves
 *   them in turn; a small pinned share forces both to abandon. The traces whose
 *   slices fully arrived should be the same on both agents (the reporting
 *   priority is a consistent hash of the trace id): the overlap |A∩B| / |A∪B|
 *   is printed and must be >= 0.99. "The same pace" is enforced, not assumed:
 *   the two writers go in lockstep through this process (each writes its next
 *   C_BATCH traces only when told, and both have reported them before either
 *   is told again), and between steps both agents are polled the same way and
 *   every slice they sent is answered (see the loop). Two free-running
 *   writers drift apart on a busy machine (one is descheduled for tens of ms
 *   while the other writes on), which puts different pressure on the agents
 *   and measures the scheduler instead of the reporting policy.
 *
 * abandon_at_trigger: a trigger whose trace its class's overload level already
 *   abandons is dropped when it fires: not pinned, not posted to the
 *   coordinator (a storm would otherwise send every trigger on, and make other
 *   hosts pin traces this one will not deliver), counted; one the level
 *   admits is pinned and posted as before.
 *
 * nested_sampling: the overload level and the client's trace percentage keep
 *   the same traces' low hashes: a trace survives shift s and level k exactly
 *   when retrace_sampled(id, max(s, k)), so its rate is 2^-max(s, k) — the
 *   rate an estimate (estimate/) must be told; with a hash of its own the agent
 *   would keep an independent subset and trace counts would be biased.
 *
 * fair: one trigger id fires on 50 % of requests, another on 1 %; reporting
 *   bandwidth is well below the demand and the overload abandon is active.
 *   Max-min fairness must give the 1 % trigger >= 99 % of its traces.
 */
#include <math.h>

#include "rptest.h"

struct ov_rep {
	uint64_t lo;
	uint32_t trigger;
	uint32_t nbuf;
	uint32_t discards;
	uint32_t pid;
};

/* A trace of nrec AG_RECLEN records (40 per buffer), triggered after its end. */
static void ov_trace(int fd, uint64_t hi, uint64_t lo, uint32_t nrec, uint32_t trigger)
{
	struct retrace_thread_stats s0, s1;
	retrace_trace_id id = { hi, lo };
	struct ov_rep r;
	uint8_t rec[AG_RECLEN];
	uint32_t k;
	retrace_thread_stats(&s0);
	if (retrace_begin(id) != 1)
		CHILD_FAIL(41, "not recorded");
	for (k = 0; k < nrec; k++) {
		ag_record(rec, lo, k);
		retrace_tracepoint(rec, AG_RECLEN);
	}
	retrace_end();
	retrace_flush();
	if (trigger && retrace_trigger(id, trigger, NULL, 0) != RETRACE_OK)
		CHILD_FAIL(42, "trigger %u dropped", trigger);
	retrace_thread_stats(&s1);
	memset(&r, 0, sizeof r);
	r.lo = lo;
	r.trigger = trigger;
	r.discards = (uint32_t)(s1.discard_buffers - s0.discard_buffers);
	r.nbuf = (uint32_t)(s1.buffers_used - s0.buffers_used) + r.discards;
	r.pid = (uint32_t)getpid();
	if (ag_write_all(fd, &r, sizeof r) != 0)
		CHILD_FAIL(44, "pipe");
}

static size_t ov_reports(struct rp_stream *s, const struct ov_rep **out)
{
	rp_stream_pump(s);
	*out = (const struct ov_rep *)s->buf;
	return s->len / sizeof(struct ov_rep);
}

/* Buffers (distinct seqs) the collector holds for trace lo from agent id. */
static uint32_t arrived_buffers(struct tc_collector *c, uint32_t agent, uint64_t lo,
				uint32_t *dups)
{
	uint64_t seen = 0; /* seq bitmap: traces here use < 64 buffers */
	uint32_t n = 0, j;
	size_t i;
	for (i = 0; i < c->nslices; i++) {
		const struct tc_slice *s = &c->slices[i];
		if (s->agent_id != agent || s->trace_lo != lo)
			continue;
		for (j = 0; j < s->nbuf; j++) {
			uint32_t q = s->bufs[j].seq;
			if (q < 64 && (seen >> q & 1)) {
				(*dups)++;
				continue;
			}
			if (q < 64)
				seen |= 1ull << q;
			n++;
		}
	}
	return n;
}

/* -------------------------------------------------------- coherent ---- */

#define C_TRACES 300
#define C_RECS 80         /* 2 buffers */
#define C_TRIG 5
#define C_BUFS 256
#define C_DELAY_US 5000   /* collector: 200 slices/s for both agents together */
#define C_BATCH 16        /* traces a lockstep step, on each agent */
#define C_STEP_MIN_US 30000 /* a step lasts at least this: more than the report hold */

/* Writes trace i when the parent sends its i-th byte (lockstep, see above). */
static void coherent_child(const char *pool, int fd, int go)
{
	uint32_t i;
	char ch;
	ag_child_client(pool, 8, RETRACE_OK);
	for (i = 0; i < C_TRACES; i++) {
		if (ag_read_exact(go, &ch, 1, 60000) != 0)
			CHILD_FAIL(45, "no go for trace %u", i);
		ov_trace(fd, 0xC0DE, 0xC0C0000000000000ull | ((uint64_t)(i + 1) * 0x9E3779B1ull), C_RECS,
			 C_TRIG);
	}
	rp_child_exit();
}

/* A slice of a in flight: sent, its answer not back yet. */
static int ov_slots_busy(const struct rt_agent *a)
{
	for (int i = 0; i < RT_UPLINK_SLOTS; i++) {
		int st = rt_reqrep_state(&a->route.up[0].slots[i].x.rr);
		if (st == RT_REQREP_SENDING || st == RT_REQREP_RECEIVING)
			return 1;
	}
	return 0;
}

/* Wait (bounded, without polling the agents) until stream s holds n reports. */
static void coherent_wait_reports(struct rp_stream *s, size_t n, char who, uint64_t end)
{
	const struct ov_rep *r;
	while (ov_reports(s, &r) < n) {
		struct pollfd p = { s->fd, POLLIN, 0 };
		ck_assert_msg(!s->eof, "writer %c exited after %zu of %zu traces", who,
			      ov_reports(s, &r), n);
		ck_assert_msg(ag_now_ns() < end, "writer %c: trace %zu not written in time", who, n);
		poll(&p, 1, 100);
	}
}

START_TEST(test_coherent)
{
	static struct rt_agent a[2];
	struct tc_collector c;
	struct rt_agent_config cfg;
	struct rp_stream st[2];
	char pool[2][64], err[256];
	int p[2][2], g[2][2], k, done = 0;
	pid_t kid[2];
	const uint32_t ids[2] = { 0xA1, 0xB1 };
	uint64_t end;
	size_t i, inter = 0, uni = 0, full[2] = { 0, 0 }, skipped = 0;
	uint32_t dups = 0, partial[2] = { 0, 0 };

	tc_init(&c);
	for (k = 0; k < 2; k++) {
		ag_pool_name(pool[k], sizeof pool[k], k ? "cohB" : "cohA");
		rp_config(&cfg, pool[k], C_BUFS, 4096, ids[k], "");
		cfg.pinned_share = 0.1; /* 25 buffers: about a dozen traces queued */
		ck_assert_msg(cfg.report_hold * 1e6 < C_STEP_MIN_US, "a step must outlast the hold");
		ag_open(&a[k], &cfg);
		ck_assert_int_eq(pipe(p[k]), 0);
		ck_assert_int_eq(pipe(g[k]), 0);
		kid[k] = ag_fork();
		if (kid[k] == 0) {
			close(p[k][0]);
			close(g[k][1]);
			coherent_child(pool[k], p[k][1], g[k][0]);
		}
		close(p[k][1]);
		close(g[k][0]);
		rp_stream_init(&st[k], p[k][0]);
	}
	ck_assert_msg(tc_start(&c, "tcp://127.0.0.1:0", err, sizeof err) == 0, "%s", err);
	tc_set_delay(&c, C_DELAY_US);
	for (k = 0; k < 2; k++) {
		snprintf(a[k].cfg.collector, sizeof a[k].cfg.collector, "%s", c.url);
		ck_assert_msg(rt_agent_connect(&a[k], "", err, sizeof err) == 0, "%s", err);
	}
	/*
	 * Lockstep, one step at a time, until both agents are quiet:
	 *   1. both writers write the step's C_BATCH traces (while traces remain)
	 *      and both have reported them;
	 *   2. agent A is polled once, then agent B: each takes in the same traces
	 *      and triggers and finishes the same round trips (step 3 of the step
	 *      before ended them all), so each decides on the same state;
	 *   3. this thread waits until every slice either agent sent has its
	 *      answer back (no slot SENDING or RECEIVING; the collector serves them
	 *      in turn, 5 ms each), and at least C_STEP_MIN_US since step 2, which
	 *      is longer than the agents' report hold: a trace held at one step is
	 *      released at the next on both agents, however the steps are timed.
	 * C_BATCH traces a step against at most RT_UPLINK_SLOTS slices sent: the
	 * backlog grows, the pinned share overflows, both agents abandon.
	 */
	end = ag_deadline(80);
	for (i = 0, done = 0; !done;) {
		uint64_t step_end;
		const struct ov_rep *r;
		if (i < C_TRACES) {
			size_t to = i + C_BATCH < C_TRACES ? i + C_BATCH : C_TRACES;
			for (k = 0; k < 2; k++)
				for (size_t j = i; j < to; j++)
					ck_assert_int_eq(ag_write_all(g[k][1], "w", 1), 0);
			for (k = 0; k < 2; k++)
				coherent_wait_reports(&st[k], to, k ? 'B' : 'A', end);
			i = to;
		}
		rt_agent_poll(&a[0]);
		rt_agent_poll(&a[1]);
		step_end = ag_now_ns() + C_STEP_MIN_US * 1000ull;
		while (ov_slots_busy(&a[0]) || ov_slots_busy(&a[1]) || ag_now_ns() < step_end) {
			ck_assert_msg(ag_now_ns() < end, "timeout: acked %llu/%llu, %llu/%llu",
				      (unsigned long long)a[0].st.slices_acked,
				      (unsigned long long)a[0].st.slices_sent,
				      (unsigned long long)a[1].st.slices_acked,
				      (unsigned long long)a[1].st.slices_sent);
			ag_nap_us(200);
		}
		done = i == C_TRACES;
		for (k = 0; k < 2; k++)
			if (ov_reports(&st[k], &r) < C_TRACES || !rp_quiet(&a[k]) ||
			    a[k].st.slices_acked != a[k].st.slices_sent)
				done = 0;
	}
	for (k = 0; k < 2; k++)
		ag_assert_exited_ok(kid[k], 20, "coherent child");

	tc_lock(&c);
	{
		const struct ov_rep *r0, *r1;
		ov_reports(&st[0], &r0);
		ov_reports(&st[1], &r1);
		for (i = 0; i < C_TRACES; i++) {
			int in[2];
			ck_assert_uint_eq(r0[i].lo, r1[i].lo);
			if (r0[i].discards || r1[i].discards) {
				skipped++; /* the pool ran dry on a client: not reporting's doing */
				continue;
			}
			for (k = 0; k < 2; k++) {
				const struct ov_rep *r = k ? &r1[i] : &r0[i];
				uint32_t got = arrived_buffers(&c, ids[k], r->lo, &dups);
				in[k] = got == r->nbuf;
				full[k] += (size_t)in[k];
				if (got && !in[k])
					partial[k]++;
			}
			inter += (size_t)(in[0] && in[1]);
			uni += (size_t)(in[0] || in[1]);
			if (in[0] != in[1]) {
				/* Diagnose: where the trace ranks, when it went out. */
				uint64_t pr = rt_report_priority(r0[i].lo);
				size_t rank = 0, j, arrived_at = 0, before = 0;
				for (j = 0; j < C_TRACES; j++)
					rank += rt_report_priority(r0[j].lo) < pr;
				for (j = 0; j < c.nslices; j++) {
					if (c.slices[j].agent_id == ids[in[1]])
						before++;
					if (c.slices[j].trace_lo == r0[i].lo &&
					    c.slices[j].agent_id == ids[in[1]]) {
						arrived_at = before;
						break;
					}
				}
				fprintf(stderr,
					"  diverged: trace #%zu (written %zu-th) priority rank %zu of %u, "
					"only agent %c sent it, as its slice #%zu\n",
					i, i, rank, C_TRACES, in[0] ? 'A' : 'B', arrived_at);
			}
		}
	}
	tc_unlock(&c);
	fprintf(stderr,
		"report_overload coherent: traces %u, fully arrived A %zu B %zu, both %zu, either %zu, "
		"overlap %.4f; partial A %u B %u; abandoned A %llu B %llu; duplicate buffers %u; "
		"left out (client discards) %zu\n",
		C_TRACES, full[0], full[1], inter, uni, uni ? (double)inter / (double)uni : 0.0,
		partial[0], partial[1], (unsigned long long)a[0].st.abandoned_traces,
		(unsigned long long)a[1].st.abandoned_traces, dups, skipped);
	ck_assert_msg(skipped < C_TRACES / 10, "%zu traces hit the discard buffer", skipped);
	ck_assert_msg(a[0].st.abandoned_traces > 0 && a[1].st.abandoned_traces > 0,
		      "no overload: abandoned %llu / %llu", (unsigned long long)a[0].st.abandoned_traces,
		      (unsigned long long)a[1].st.abandoned_traces);
	ck_assert_msg(uni > 0 && (double)inter / (double)uni >= 0.99,
		      "coherence: %zu traces fully arrived from both agents, %zu from either: "
		      "overlap %.3f < 0.99", inter, uni, uni ? (double)inter / (double)uni : 0.0);
	for (k = 0; k < 2; k++) {
		rp_stream_free(&st[k]);
		close(g[k][1]);
		rt_agent_close(&a[k]);
	}
	tc_free(&c);
}
END_TEST

/* ------------------------------------------------------------ fair ---- */

#define F_REQS 3000
#define F_RECS 40          /* 1 buffer */
#define F_BIG 50           /* fires on 50 % */
#define F_SMALL 1          /* fires on 1 % */
#define F_BUFS 512
#define F_BANDWIDTH 400000 /* bytes/s: ~100 traces/s against ~1000/s of demand */
#define F_BATCH 16         /* traces the writer may be ahead of the agent */

/*
 * Writes F_BATCH traces each time the parent says so. The parent says so only
 * once it has read every report of the batch before and polled the agent after
 * that: the writer can never be more than a batch ahead of the agent. Free
 * running, a writer whose agent (this test's thread) is descheduled for a few
 * hundred ms on a busy machine fills the pool and its traces go to the discard
 * buffer -- the product working as designed (a client never blocks), but not
 * what this test measures.
 */
static void fair_child(const char *pool, int fd, int go)
{
	uint32_t i;
	char ch;
	ag_child_client(pool, 8, RETRACE_OK);
	for (i = 0; i < F_REQS; i++) {
		uint32_t trig = i % 100 == 1 ? F_SMALL : i % 2 == 0 ? F_BIG : 0;
		if (i % F_BATCH == 0 && ag_read_exact(go, &ch, 1, 60000) != 0)
			CHILD_FAIL(45, "no go for trace %u", i);
		ov_trace(fd, 0xFA1E, 0xFA00000000000000ull | (i + 1), F_RECS, trig);
		ag_nap_us(500);
	}
	rp_child_exit();
}

START_TEST(test_fair)
{
	static struct rt_agent a;
	struct tc_collector c;
	struct rt_agent_config cfg;
	struct rp_stream st;
	char pool[64], err[256];
	int p[2], g[2], ok;
	pid_t kid;
	const struct ov_rep *r;
	size_t n, i;
	uint32_t fired[2] = { 0, 0 }, out[2] = { 0, 0 }, dups = 0, skipped = 0;
	struct rt_report_class *big, *small;

	ag_pool_name(pool, sizeof pool, "fair");
	tc_init(&c);
	rp_config(&cfg, pool, F_BUFS, 4096, 0xFA, "");
	cfg.pinned_share = 0.2;
	cfg.evict_threshold = 0.8;
	cfg.bandwidth = F_BANDWIDTH;
	ag_open(&a, &cfg);
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(pipe(g), 0);
	kid = ag_fork();
	if (kid == 0) {
		close(p[0]);
		close(g[1]);
		fair_child(pool, p[1], g[0]);
	}
	close(p[1]);
	close(g[0]);
	rp_stream_init(&st, p[0]);
	ck_assert_msg(tc_start(&c, "tcp://127.0.0.1:0", err, sizeof err) == 0, "%s", err);
	snprintf(a.cfg.collector, sizeof a.cfg.collector, "%s", c.url);
	ck_assert_msg(rt_agent_connect(&a, "", err, sizeof err) == 0, "%s", err);
	{
		uint64_t end = ag_deadline(60);
		size_t told = 0;
		for (;;) {
			size_t have = ov_reports(&st, &r);
			unsigned polled = rt_agent_poll(&a);
			ok = have >= F_REQS && rp_quiet(&a) && a.st.slices_acked == a.st.slices_sent;
			if (ok || ag_now_ns() > end)
				break;
			if (told < F_REQS && have >= told) {
				/* every report of the last batch was in before this poll */
				ck_assert_int_eq(ag_write_all(g[1], "w", 1), 0);
				told += F_BATCH;
			}
			ck_assert_msg(!st.eof || have >= F_REQS, "fair child exited after %zu traces", have);
			if (!polled)
				ag_nap_us(200);
		}
	}
	ck_assert_msg(ok, "timeout: reports %zu, queued %llu, acked %llu of %llu",
		      ov_reports(&st, &r), (unsigned long long)a.rep.queued_buffers,
		      (unsigned long long)a.st.slices_acked, (unsigned long long)a.st.slices_sent);
	ag_assert_exited_ok(kid, 20, "fair child");

	n = ov_reports(&st, &r);
	tc_lock(&c);
	for (i = 0; i < n; i++) {
		int k = r[i].trigger == F_SMALL ? 1 : r[i].trigger == F_BIG ? 0 : -1;
		if (k < 0)
			continue;
		if (r[i].discards) {
			skipped++; /* the pool ran dry on the client: not reporting's doing */
			continue;
		}
		fired[k]++;
		if (arrived_buffers(&c, 0xFA, r[i].lo, &dups) == r[i].nbuf)
			out[k]++;
	}
	tc_unlock(&c);
	big = rt_report_class_of(&a.rep, F_BIG);
	small = rt_report_class_of(&a.rep, F_SMALL);
	fprintf(stderr,
		"report_overload fair: trigger %u (50%%): %u of %u out, abandoned %llu; "
		"trigger %u (1%%): %u of %u out, abandoned %llu; evicted %llu; duplicate buffers %u; "
		"left out (client discards) %u\n",
		F_BIG, out[0], fired[0], (unsigned long long)big->abandoned_traces, F_SMALL, out[1],
		fired[1], (unsigned long long)small->abandoned_traces,
		(unsigned long long)a.ix.st.evicted_traces, dups, skipped);
	ck_assert_msg(skipped < F_REQS / 20, "%u triggered traces hit the discard buffer", skipped);
	ck_assert_msg(fired[1] >= 20, "only %u traces of the 1%% trigger to judge", fired[1]);
	ck_assert_msg(big->abandoned_traces > 0, "no overload: nothing abandoned");
	ck_assert_msg(out[0] < fired[0], "no overload: every 50%% trace went out");
	ck_assert_msg((double)out[1] >= 0.99 * (double)fired[1],
		      "the 1%% trigger got %u of %u traces out", out[1], fired[1]);
	rp_stream_free(&st);
	close(g[1]);
	rt_agent_close(&a);
	tc_free(&c);
}
END_TEST

/* ------------------------------------------------ abandon at trigger ---- */

START_TEST(test_abandon_at_trigger)
{
	static struct rt_agent a;
	struct tc_collector co;
	struct rt_agent_config cfg;
	struct rt_report_class *c;
	char pool[64], err[256];
	uint64_t below = 0, above = 0, lo;
	uint32_t t;
	int ok;

	ag_pool_name(pool, sizeof pool, "aat");
	tc_init(&co);
	ck_assert_msg(tc_start(&co, "tcp://127.0.0.1:0", err, sizeof err) == 0, "%s", err);
	rp_config(&cfg, pool, 128, 4096, 0xAA7, "");
	snprintf(cfg.coordinator, sizeof cfg.coordinator, "%s", co.url);
	rp_open(&a, &cfg);
	RP_UNTIL(ok, &a, 20, a.route.up[0].registered);
	ck_assert_msg(ok, "the agent did not register");
	c = rt_report_class_of(&a.rep, 0x77);
	ck_assert_ptr_nonnull(c);
	/* Only the top 1/8 of priorities go. Set directly (not rt_report_raise), so no
	 * calm spell can bring it down while the test runs. */
	c->level = 3;
	for (lo = 1; !below || !above; lo++) {
		if (!rt_report_admits(c, lo) && !below)
			below = lo;
		if (rt_report_admits(c, lo) && !above)
			above = lo;
	}
	{
		struct rt_trigger_entry e[2] = { ag_trig(below, 0x77, 1, 0), ag_trig(above, 0x77, 1, 0) };
		ag_push_triggers(&a.pool, &e[0], 1);
		ag_push_triggers(&a.pool, &e[1], 1);
	}
	RP_UNTIL(ok, &a, 20, a.st.trigger_groups == 2 && tc_ntriggers(&co) >= 1 && a.route.up[0].out_len == 0 &&
				     rt_route_coord_inflight(&a.route) == 0);
	ck_assert_msg(ok, "groups %llu, at the coordinator %zu", (unsigned long long)a.st.trigger_groups,
		      tc_ntriggers(&co));
	ck_assert_uint_eq(a.st.abandoned_at_trigger, 1);
	ck_assert_uint_eq(c->abandoned_at_trigger, 1);
	t = rt_index_find(&a.ix, below);
	ck_assert_msg(t == RT_INDEX_NONE || a.ix.traces[t].state == RT_TRACE_UNTRIGGERED,
		      "the abandoned trace was pinned");
	t = rt_index_find(&a.ix, above);
	ck_assert_msg(t != RT_INDEX_NONE && a.ix.traces[t].state != RT_TRACE_UNTRIGGERED,
		      "the admitted trace was not pinned");
	tc_lock(&co);
	ck_assert_uint_eq(co.ntriggers, 1);
	ck_assert_uint_eq(co.triggers[0].traces[0].lo, above);
	tc_unlock(&co);
	rt_agent_close(&a);
	tc_free(&co);
}
END_TEST

/* --------------------------------------------------- nested sampling ---- */

#define NESTED_IDS 40000

START_TEST(test_nested_sampling)
{
	static struct rt_report_class c;
	uint64_t x = 0x853C49E6748FEA9Bull, kept[8][8] = { { 0 } };
	uint32_t s, k, i;
	for (i = 0; i < NESTED_IDS; i++) {
		retrace_trace_id id;
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		id.hi = 0x7e;
		id.lo = x;
		for (s = 0; s < 8; s++)
			for (k = 0; k < 8; k++) {
				int both;
				c.level = k;
				both = retrace_sampled(id, s) && rt_report_admits(&c, id.lo);
				if (both != retrace_sampled(id, s > k ? s : k))
					ck_abort_msg("trace %016llx: shift %u, level %u keep it %d, "
						     "shift max(s, k) %d", (unsigned long long)id.lo, s,
						     k, both, !both);
				kept[s][k] += (uint64_t)both;
			}
	}
	/* and the rate is 2^-max(s, k): within 5 sigma of its binomial */
	for (s = 0; s < 8; s++)
		for (k = 0; k < 8; k++) {
			double p = 1.0 / (double)(1u << (s > k ? s : k)), mean = NESTED_IDS * p;
			double sd = sqrt(NESTED_IDS * p * (1 - p)) + 1;
			ck_assert_msg(fabs((double)kept[s][k] - mean) <= 5 * sd,
				      "shift %u level %u kept %llu, expected %.0f", s, k,
				      (unsigned long long)kept[s][k], mean);
		}
}
END_TEST

static Suite *overload_suite(void)
{
	Suite *s = suite_create("report_overload");
	TCase *t = tcase_create("coherent");
	tcase_set_timeout(t, 100);
	tcase_add_test(t, test_coherent);
	suite_add_tcase(s, t);
	t = tcase_create("abandon_at_trigger");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_abandon_at_trigger);
	suite_add_tcase(s, t);
	t = tcase_create("nested_sampling");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_nested_sampling);
	suite_add_tcase(s, t);
	t = tcase_create("fair");
	tcase_set_timeout(t, 100);
	tcase_add_test(t, test_fair);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return rp_run_suite(overload_suite());
}
