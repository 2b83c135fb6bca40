/*
 * The coordinator link: registration and the trigger outbox.
 *
 * outbox: with the coordinator down, a client's triggers wait in the outbox
 *   (coordinator_triggers_waiting > 0). Once a fake coordinator comes up on the
 *   same URL, REGISTER arrives (agent id, control address, pool geometry) and
 *   every TRIGGER (K consecutive seqs, each at least once) with the breadcrumbs the
 *   client deposited for its traces, lateral traces included.
 *
 * crumb_order: a breadcrumb deposited before a trigger of the same trace must be
 *   in that trigger's message even when the breadcrumb queue has a backlog.
 *
 * pipelined: a coordinator that is slow to answer must not cap the agent at
 *   one trigger per round trip: with replies held back, RT_UPLINK_COORD_SLOTS
 *   distinct TRIGGER messages reach it before any is answered, and none has
 *   failed (a stop-and-wait link delivers one).
 *
 * fair_pick: the outbox serves trigger ids round robin over the whole ring: a
 *   quiet trigger's message posted behind 3000 of a storm's is among the first
 *   two sent (it used to be seen only within 256 entries of the head, so it
 *   waited for ~2750 storm messages: seconds, under a storm).
 *
 * restart_seq: trigger_seq is what the coordinator dedups on (with the agent
 *   id): a restarted agent must not reuse the numbers of its previous life.
 */
#include "rptest.h"

#define OB_AGENT 0x0B0B
#define OB_TRIG 0x33
#define OB_LAT_TRIG 0x34
#define OB_K 12
#define OB_CTL "tcp://127.0.0.1:7999"

static uint64_t ob_lo(uint32_t i)
{
	return 0x0B00000000000000ull | (i + 1);
}

static void outbox_child(const char *pool, int out, int in)
{
	uint32_t i, k;
	char ch;
	ag_child_client(pool, 8, RETRACE_OK);
	for (i = 0; i < OB_K; i++) {
		retrace_trace_id id = { 0x0B0B, ob_lo(i) };
		uint8_t rec[AG_RECLEN];
		if (retrace_begin(id) != 1)
			CHILD_FAIL(41, "not recorded");
		if (retrace_breadcrumb(0x100 + i) != RETRACE_OK ||
		    retrace_breadcrumb(0x200 + i) != RETRACE_OK)
			CHILD_FAIL(46, "breadcrumb");
		for (k = 0; k < 10; k++) {
			ag_record(rec, id.lo, k);
			retrace_tracepoint(rec, AG_RECLEN);
		}
		retrace_end();
	}
	retrace_flush();
	if (ag_write_all(out, "w", 1) != 0)
		CHILD_FAIL(44, "pipe");
	if (ag_read_exact(in, &ch, 1, 30000) != 0)
		CHILD_FAIL(45, "no go");
	for (i = 0; i < OB_K; i++) {
		retrace_trace_id id = { 0x0B0B, ob_lo(i) };
		if (retrace_trigger(id, OB_TRIG, NULL, 0) != RETRACE_OK)
			CHILD_FAIL(42, "trigger");
	}
	{ /* One group with two lateral traces: one TRIGGER message of three traces. */
		retrace_trace_id id = { 0x0B0B, ob_lo(0) };
		retrace_trace_id lat[2] = { { 0x0B0B, ob_lo(1) }, { 0x0B0B, ob_lo(2) } };
		if (retrace_trigger(id, OB_LAT_TRIG, lat, 2) != RETRACE_OK)
			CHILD_FAIL(42, "lateral trigger");
	}
	if (ag_write_all(out, "t", 1) != 0)
		CHILD_FAIL(44, "pipe");
	rp_child_exit();
}

static int has_crumb(const struct tc_trace *t, uint32_t agent)
{
	uint32_t i;
	for (i = 0; i < t->ncrumbs; i++)
		if (t->crumbs[i] == agent)
			return 1;
	return 0;
}

/* All trigger seqs base+1..base+n seen from agent; 1 if so. */
static int all_seqs(struct tc_collector *c, uint32_t agent, uint64_t base, uint64_t n)
{
	uint64_t s;
	size_t i;
	int ok = 1;
	tc_lock(c);
	for (s = 1; s <= n && ok; s++) {
		int seen = 0;
		for (i = 0; i < c->ntriggers && !seen; i++)
			seen = c->triggers[i].agent_id == agent && c->triggers[i].trigger_seq == base + s;
		ok = seen;
	}
	tc_unlock(c);
	return ok;
}

START_TEST(test_outbox)
{
	static struct rt_agent a;
	struct tc_collector co;
	struct rt_agent_config cfg;
	char pool[64], err[256], ch, st[32768];
	int p[2], g[2], ok;
	pid_t kid;
	size_t i;
	uint32_t t, seen_lat = 0;
	uint64_t base;

	ag_pool_name(pool, sizeof pool, "outbox");
	tc_init(&co);
	ck_assert_msg(tc_start(&co, "tcp://127.0.0.1:0", err, sizeof err) == 0, "%s", err);
	tc_stop(&co); /* the coordinator is down */
	rp_config(&cfg, pool, 128, 4096, OB_AGENT, "");
	snprintf(cfg.coordinator, sizeof cfg.coordinator, "%s", co.url);
	cfg.report_timeout_ms = 300;
	ag_open(&a, &cfg);
	base = a.trigger_seq; /* the first trigger posted is base + 1 */
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(pipe(g), 0);
	kid = ag_fork();
	if (kid == 0) {
		close(p[0]);
		close(g[1]);
		outbox_child(pool, p[1], g[0]);
	}
	close(p[1]);
	close(g[0]);
	ck_assert_msg(rt_agent_connect(&a, OB_CTL, err, sizeof err) == 0, "%s", err);

	/* Data and breadcrumbs first, then the triggers. */
	RP_UNTIL(ok, &a, 30, rp_byte_ready(p[0], &ch));
	ck_assert_msg(ok, "child wrote no traces");
	RP_UNTIL(ok, &a, 30, a.st.breadcrumbs >= 2 * OB_K && rp_quiet(&a));
	ck_assert_msg(ok, "breadcrumbs %llu", (unsigned long long)a.st.breadcrumbs);
	ck_assert_int_eq(ag_write_all(g[1], "g", 1), 0);
	RP_UNTIL(ok, &a, 30, a.st.triggered_traces >= OB_K && a.st.trigger_groups == OB_K + 1);
	ck_assert_msg(ok, "triggers: %llu groups", (unsigned long long)a.st.trigger_groups);
	/* Past a failed registration attempt: the triggers wait. */
	RP_UNTIL(ok, &a, 1.0, 0);
	ck_assert_msg(a.route.up[0].out_len == OB_K + 1, "outbox holds %u of %u", a.route.up[0].out_len, OB_K + 1);
	rt_agent_status(&a, 1, st, sizeof st);
	ck_assert_msg(strstr(st, "\"coordinator_triggers_waiting\":13") != NULL,
		      "status: %s", strstr(st, "coordinator_triggers_waiting"));
	ck_assert_uint_eq(tc_ntriggers(&co), 0);

	/* The coordinator comes up on the same URL. */
	ck_assert_msg(tc_start(&co, NULL, err, sizeof err) == 0, "restart: %s", err);
	RP_UNTIL(ok, &a, 30, a.route.up[0].out_len == 0 && all_seqs(&co, OB_AGENT, base, OB_K + 1) &&
				     tc_nregs(&co) >= 1);
	ck_assert_msg(ok, "outbox %u, triggers at the coordinator %zu, registrations %zu",
		      a.route.up[0].out_len, tc_ntriggers(&co), tc_nregs(&co));
	ag_assert_exited_ok(kid, 20, "outbox child");

	tc_lock(&co);
	ck_assert_uint_eq(co.regs[0].agent_id, OB_AGENT);
	ck_assert_str_eq(co.regs[0].control_addr, OB_CTL);
	ck_assert_uint_eq(co.regs[0].buffer_count, 128);
	ck_assert_uint_eq(co.regs[0].buffer_size, 4096);
	ck_assert_uint_eq(co.regs[0].pid, (uint32_t)getpid());
	ck_assert_msg(co.regs[0].order < co.triggers[0].order, "a trigger went before REGISTER");
	for (i = 0; i < co.ntriggers; i++) {
		const struct tc_trigger *tg = &co.triggers[i];
		ck_assert_uint_eq(tg->agent_id, OB_AGENT);
		ck_assert_msg(tg->trigger_seq > base && tg->trigger_seq <= base + OB_K + 1,
			      "seq %llu, base %llu", (unsigned long long)tg->trigger_seq,
			      (unsigned long long)base);
		if (tg->trigger_seq <= base + OB_K) {
			uint32_t k = (uint32_t)(tg->trigger_seq - base) - 1;
			ck_assert_uint_eq(tg->trigger_id, OB_TRIG);
			ck_assert_uint_eq(tg->ntraces, 1);
			ck_assert_uint_eq(tg->traces[0].lo, ob_lo(k));
			ck_assert_uint_eq(tg->traces[0].hi, 0x0B0B);
			ck_assert_msg(tg->traces[0].ncrumbs == 2 && has_crumb(&tg->traces[0], 0x100 + k) &&
					      has_crumb(&tg->traces[0], 0x200 + k),
				      "trigger seq %llu: %u breadcrumbs", (unsigned long long)tg->trigger_seq,
				      tg->traces[0].ncrumbs);
		} else {
			ck_assert_uint_eq(tg->trigger_id, OB_LAT_TRIG);
			ck_assert_uint_eq(tg->ntraces, 3);
			for (t = 0; t < 3; t++) {
				ck_assert_uint_eq(tg->traces[t].lo, ob_lo(t));
				ck_assert_msg(has_crumb(&tg->traces[t], 0x100 + t) &&
						      has_crumb(&tg->traces[t], 0x200 + t),
					      "lateral trace %u lacks its breadcrumbs", t);
			}
			seen_lat++;
		}
	}
	tc_unlock(&co);
	ck_assert_uint_ge(seen_lat, 1);
	rt_agent_status(&a, 1, st, sizeof st);
	ck_assert_msg(strstr(st, "\"coordinator_triggers_waiting\":0") != NULL, "status: %s",
		      strstr(st, "coordinator_triggers_waiting"));
	close(p[0]);
	close(g[1]);
	rt_agent_close(&a);
	tc_free(&co);
}
END_TEST

/* ------------------------------------------------------- crumb order ---- */

START_TEST(test_crumb_order)
{
	static struct rt_agent a;
	struct tc_collector co;
	struct rt_agent_config cfg;
	char pool[64], err[256];
	const uint64_t x = 0xC0000000000000A1ull;
	struct rt_trigger_entry tg = ag_trig(x, OB_TRIG, 1, 0);
	uint32_t j, ncr = 0;
	int ok, found = 0;

	ag_pool_name(pool, sizeof pool, "crumbs");
	tc_init(&co);
	ck_assert_msg(tc_start(&co, "tcp://127.0.0.1:0", err, sizeof err) == 0, "%s", err);
	rp_config(&cfg, pool, 128, 4096, OB_AGENT, "");
	snprintf(cfg.coordinator, sizeof cfg.coordinator, "%s", co.url);
	rp_open(&a, &cfg);
	/* Other requests' breadcrumbs ahead in the queue (a busy host)... */
	for (j = 0; j < 100; j++)
		ag_push_crumb(&a.pool, 0xD000 + j, 0x999);
	/* ...then, in order, as one thread would: X's breadcrumb, then X's trigger. */
	ag_push_crumb(&a.pool, x, 0xABC);
	ag_push_triggers(&a.pool, &tg, 1);
	RP_UNTIL(ok, &a, 20, tc_ntriggers(&co) >= 1 && a.route.up[0].out_len == 0);
	ck_assert_msg(ok, "no TRIGGER at the coordinator");
	{
		uint32_t t = rt_index_find(&a.ix, x);
		ck_assert_msg(t != RT_INDEX_NONE && a.ix.traces[t].ncrumbs == 1,
			      "the agent did not keep X's breadcrumb");
	}
	tc_lock(&co);
	ck_assert_uint_eq(co.triggers[0].ntraces, 1);
	ck_assert_uint_eq(co.triggers[0].traces[0].lo, x);
	ncr = co.triggers[0].traces[0].ncrumbs;
	found = has_crumb(&co.triggers[0].traces[0], 0xABC);
	tc_unlock(&co);
	ck_assert_msg(found, "the TRIGGER for X carries %u breadcrumbs, not 0xabc deposited before "
			     "it: with more than 64 breadcrumbs queued the trigger overtakes it, and "
			     "the coordinator never learns of that upstream hop", ncr);
	rt_agent_close(&a);
	tc_free(&co);
}
END_TEST

/* --------------------------------------------------------- pipelined ---- */

START_TEST(test_pipelined)
{
	static struct rt_agent a;
	struct tc_collector co;
	struct rt_agent_config cfg;
	char pool[64], err[256];
	uint64_t seqs[RT_UPLINK_COORD_SLOTS + 4];
	size_t i, j, n, distinct = 0;
	uint32_t k;
	int ok;

	ag_pool_name(pool, sizeof pool, "pipe");
	tc_init(&co);
	ck_assert_msg(tc_start(&co, "tcp://127.0.0.1:0", err, sizeof err) == 0, "%s", err);
	rp_config(&cfg, pool, 128, 4096, OB_AGENT, "");
	snprintf(cfg.coordinator, sizeof cfg.coordinator, "%s", co.url);
	cfg.report_timeout_ms = 120000; /* no message may time out during the test */
	rp_open(&a, &cfg);
	RP_UNTIL(ok, &a, 20, a.route.up[0].registered && tc_nregs(&co) >= 1);
	ck_assert_msg(ok, "the agent did not register");
	tc_set_silent(&co, 1); /* from now on: receive, record, never answer */
	for (k = 0; k < RT_UPLINK_COORD_SLOTS + 4; k++) {
		struct rt_trigger_entry e = ag_trig(0xF000 + k, OB_TRIG, 1, 0);
		ag_push_triggers(&a.pool, &e, 1);
	}
	RP_UNTIL(ok, &a, 30, tc_ntriggers(&co) >= RT_UPLINK_COORD_SLOTS);
	ck_assert_msg(ok, "%zu TRIGGER messages reached a coordinator that holds its replies "
		      "(%u in flight, %u waiting): the link does not pipeline",
		      tc_ntriggers(&co), rt_route_coord_inflight(&a.route), a.route.up[0].out_len);
	ck_assert_uint_eq(a.route.up[0].st.coord_failed, 0);
	ck_assert_uint_eq(rt_route_coord_inflight(&a.route), RT_UPLINK_COORD_SLOTS);
	ck_assert_uint_eq(a.route.up[0].out_len, 4);
	tc_lock(&co);
	n = co.ntriggers < RT_UPLINK_COORD_SLOTS + 4 ? co.ntriggers : RT_UPLINK_COORD_SLOTS + 4;
	for (i = 0; i < n; i++) {
		for (j = 0; j < distinct && seqs[j] != co.triggers[i].trigger_seq; j++)
			;
		if (j == distinct)
			seqs[distinct++] = co.triggers[i].trigger_seq;
	}
	tc_unlock(&co);
	ck_assert_uint_eq(distinct, RT_UPLINK_COORD_SLOTS);
	rt_agent_close(&a);
	tc_free(&co);
}
END_TEST

/* --------------------------------------------------------- fair pick ---- */

static void post_one(struct rt_uplink *u, uint32_t trigger_id, uint64_t seq)
{
	struct rt_wire_trace tr = { .trace_hi = 1, .trace_lo = seq };
	struct rt_wire_trigger m = { .agent_id = OB_AGENT, .trigger_id = trigger_id,
				     .trigger_seq = seq, .fired_unix_ns = 1, .trace_count = 1,
				     .traces = &tr };
	struct rt_wire_buf b = { 0 };
	ck_assert_int_eq(rt_wire_encode_trigger(&b, &m), 0);
	ck_assert_int_eq(rt_uplink_post(u, &b, trigger_id, 0), 0);
	rt_wire_buf_free(&b);
}

START_TEST(test_fair_pick)
{
	static struct rt_uplink u;
	struct tc_collector co;
	char err[256];
	uint64_t k, quiet_at = 0;
	size_t i;
	int ok = 0;

	tc_init(&co);
	ck_assert_msg(tc_start(&co, "tcp://127.0.0.1:0", err, sizeof err) == 0, "%s", err);
	tc_set_silent(&co, 1); /* messages stay in flight: the order they leave is what counts */
	ck_assert_msg(rt_uplink_open(&u, "", co.url, 16, 4096, 120000, NULL, err, sizeof err) == 0,
		      "%s", err);
	for (k = 1; k <= 3000; k++)
		post_one(&u, 13, k);
	post_one(&u, 11, 5000);
	ck_assert_uint_eq(u.out_len, 3001);
	for (i = 0; i < 2000 && !ok; i++) {
		rt_uplink_pump_coordinator(&u, ag_now_ns());
		ok = tc_ntriggers(&co) >= RT_UPLINK_COORD_SLOTS;
		if (!ok)
			usleep(5000);
	}
	ck_assert_msg(ok, "%zu messages reached the coordinator", tc_ntriggers(&co));
	tc_lock(&co);
	for (i = 0; i < co.ntriggers; i++)
		if (co.triggers[i].trigger_id == 11)
			quiet_at = co.triggers[i].order;
	tc_unlock(&co);
	ck_assert_msg(quiet_at != 0, "the quiet trigger's message was not among the first %u sent",
		      RT_UPLINK_COORD_SLOTS);
	ck_assert_uint_eq(u.out_len, 3001 - RT_UPLINK_COORD_SLOTS);
	rt_uplink_close(&u);
	tc_free(&co);
}
END_TEST

/* ------------------------------------------------------- restart seq ---- */

static void fire_three(struct rt_agent *a, uint32_t base)
{
	uint32_t i;
	for (i = 0; i < 3; i++) {
		struct rt_trigger_entry e = ag_trig(0xE000 + base + i, OB_TRIG, 1, 0);
		ag_push_triggers(&a->pool, &e, 1);
	}
}

START_TEST(test_restart_seq)
{
	static struct rt_agent a;
	struct tc_collector co;
	struct rt_agent_config cfg;
	char pool[64], err[256];
	size_t i, j;
	int ok;

	ag_pool_name(pool, sizeof pool, "tseq");
	tc_init(&co);
	ck_assert_msg(tc_start(&co, "tcp://127.0.0.1:0", err, sizeof err) == 0, "%s", err);
	rp_config(&cfg, pool, 128, 4096, OB_AGENT, "");
	snprintf(cfg.coordinator, sizeof cfg.coordinator, "%s", co.url);
	cfg.unlink_at_exit = 0;
	rp_open(&a, &cfg);
	fire_three(&a, 0);
	RP_UNTIL(ok, &a, 20, tc_ntriggers(&co) >= 3 && a.route.up[0].out_len == 0);
	ck_assert_msg(ok, "first life: %zu triggers", tc_ntriggers(&co));
	rt_agent_close(&a);

	cfg.unlink_at_exit = 1;
	rp_open(&a, &cfg); /* takes the pool over: same agent, next life */
	fire_three(&a, 100);
	RP_UNTIL(ok, &a, 20, tc_ntriggers(&co) >= 6 && a.route.up[0].out_len == 0);
	ck_assert_msg(ok, "second life: %zu triggers", tc_ntriggers(&co));
	tc_lock(&co);
	for (i = 0; i < co.ntriggers; i++)
		for (j = i + 1; j < co.ntriggers; j++)
			if (co.triggers[i].trigger_seq == co.triggers[j].trigger_seq &&
			    co.triggers[i].traces[0].lo != co.triggers[j].traces[0].lo) {
				uint64_t s = co.triggers[i].trigger_seq, l1 = co.triggers[i].traces[0].lo,
					 l2 = co.triggers[j].traces[0].lo;
				tc_unlock(&co);
				ck_abort_msg("(agent %u, trigger_seq %llu) names two triggers (traces %llx "
					     "and %llx): a coordinator deduplicating on it drops the "
					     "restarted agent's triggers", OB_AGENT,
					     (unsigned long long)s, (unsigned long long)l1,
					     (unsigned long long)l2);
			}
	tc_unlock(&co);
	rt_agent_close(&a);
	tc_free(&co);
}
END_TEST

static Suite *outbox_suite(void)
{
	Suite *s = suite_create("report_outbox");
	TCase *t = tcase_create("outbox");
	tcase_set_timeout(t, 100);
	tcase_add_test(t, test_outbox);
	suite_add_tcase(s, t);
	t = tcase_create("crumb_order");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_crumb_order);
	suite_add_tcase(s, t);
	t = tcase_create("pipelined");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_pipelined);
	suite_add_tcase(s, t);
	t = tcase_create("fair_pick");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_fair_pick);
	suite_add_tcase(s, t);
	t = tcase_create("restart_seq");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_restart_seq);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return rp_run_suite(outbox_suite());
}
