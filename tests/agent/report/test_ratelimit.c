/*
 * Per-trigger-id rate limits. With trigger_rate = 100/s and trigger_burst = 10,
 * trigger id A fired 2000 times in a burst (a few milliseconds) keeps about
 * burst + rate x elapsed groups and counts the rest as rate limited; trigger id B,
 * fired 20 times at 50/s around that burst, is never limited (each id has its
 * own bucket) and all 20 of its traces reach the collector intact.
 */
#include "rptest.h"

#define R_AGENT 0x4A7E
#define A_TRIG 100
#define B_TRIG 200
#define A_FIRES 2000
#define B_FIRES 20
#define RATE 100.0
#define BURST 10.0

static void write_b(int fd, uint32_t i)
{
	struct rp_child_batch b = { 0 };
	struct retrace_thread_stats s0, s1;
	retrace_trace_id id = { 0xB0B0, 0xB000000000000000ull | (i + 1) };
	uint8_t rec[300];
	uint32_t k, n = 20 + i;
	retrace_thread_stats(&s0);
	rp_cb_begin(&b, i, id.hi, id.lo, B_TRIG);
	if (retrace_begin(id) != 1)
		CHILD_FAIL(41, "not recorded");
	for (k = 0; k < n; k++) {
		uint32_t len = 100 + (k * 13) % 200;
		rp_fill(rec, id.lo, k, len);
		retrace_tracepoint(rec, len);
		rp_cb_add(&b, rec, len);
	}
	retrace_end();
	retrace_flush();
	if (retrace_trigger(id, B_TRIG, NULL, 0) != RETRACE_OK)
		CHILD_FAIL(42, "trigger B");
	retrace_thread_stats(&s1);
	b.h.discards = (uint32_t)(s1.discard_buffers - s0.discard_buffers);
	b.h.nbuf = (uint32_t)(s1.buffers_used - s0.buffers_used) + b.h.discards;
	rp_cb_send(&b, fd);
	free(b.data);
}

static void rate_child(const char *pool, int fd)
{
	uint32_t i;
	uint64_t t0, t1;
	ag_child_client(pool, 8, RETRACE_OK);
	for (i = 0; i < B_FIRES; i++) {
		write_b(fd, i);
		if (i == B_FIRES / 2 - 1) {
			uint32_t k;
			t0 = ag_now_ns();
			for (k = 0; k < A_FIRES; k++) {
				retrace_trace_id a = { 0xA0A0, 0xA000000000000000ull | (k + 1) };
				if (retrace_trigger(a, A_TRIG, NULL, 0) != RETRACE_OK)
					CHILD_FAIL(43, "trigger A %u dropped", k);
			}
			t1 = ag_now_ns();
			if (t1 - t0 > 500000000ull)
				CHILD_FAIL(44, "A's burst took %.3f s", (double)(t1 - t0) / 1e9);
		}
		ag_nap_us(50000); /* B at 20/s: well under its rate, even if the agent stalls */
	}
	rp_child_exit();
}

START_TEST(test_ratelimit)
{
	static struct rt_agent a;
	struct tc_collector c;
	struct rt_agent_config cfg;
	struct rp_stream st;
	struct rp_parsed *b = NULL;
	size_t nb = 0, pos = 0, i;
	char pool[64], err[256], msg[512];
	struct rt_report_class *ca, *cb;
	uint64_t first_ns = 0, last_ns = 0, accepted;
	double elapsed, bound;
	int p[2];
	pid_t kid;

	ag_pool_name(pool, sizeof pool, "rate");
	tc_init(&c);
	rp_config(&cfg, pool, 128, 4096, R_AGENT, "");
	cfg.trigger_rate = RATE;
	cfg.trigger_burst = BURST;
	ag_open(&a, &cfg);
	ck_assert_int_eq(pipe(p), 0);
	kid = ag_fork();
	if (kid == 0) {
		close(p[0]);
		rate_child(pool, p[1]);
	}
	close(p[1]);
	rp_stream_init(&st, p[0]);
	ck_assert_msg(tc_start(&c, "tcp://127.0.0.1:0", err, sizeof err) == 0, "%s", err);
	snprintf(a.cfg.collector, sizeof a.cfg.collector, "%s", c.url);
	ck_assert_msg(rt_agent_connect(&a, "", err, sizeof err) == 0, "%s", err);

	ca = rt_report_class_of(&a.rep, A_TRIG);
	cb = rt_report_class_of(&a.rep, B_TRIG);
	/* Poll; note when A's first and last triggers were taken (outer bounds). */
	{
		uint64_t end = ag_deadline(40);
		for (;;) {
			uint64_t before = ag_now_ns();
			unsigned n = rt_agent_poll(&a);
			if (!first_ns && ca->triggers > 0)
				first_ns = before;
			if (!last_ns && ca->triggers >= A_FIRES)
				last_ns = ag_now_ns();
			rp_stream_pump(&st);
			rp_parse(&st, &pos, &b, &nb);
			if (st.eof && nb == B_FIRES && last_ns && rp_quiet(&a) &&
			    a.st.slices_acked == a.st.slices_sent && cb->triggers == B_FIRES)
				break;
			ck_assert_msg(ag_now_ns() < end, "timeout: A seen %llu, B seen %llu, batches %zu",
				      (unsigned long long)ca->triggers,
				      (unsigned long long)cb->triggers, nb);
			if (!n)
				ag_nap_us(200);
		}
	}
	ag_assert_exited_ok(kid, 20, "rate child");
	ck_assert_uint_eq(ck_pr_load_64(&a.pool.hdr->trigger_drops), 0);

	elapsed = (double)(last_ns - first_ns) / 1e9;
	accepted = ca->triggers - ca->rate_limited;
	bound = BURST + RATE * elapsed + 5;
	fprintf(stderr, "report_ratelimit: A fired %llu, accepted %llu over %.4f s (bound %.1f), "
		"rate_limited %llu; B fired %llu, rate_limited %llu\n",
		(unsigned long long)ca->triggers, (unsigned long long)accepted, elapsed, bound,
		(unsigned long long)ca->rate_limited, (unsigned long long)cb->triggers,
		(unsigned long long)cb->rate_limited);
	ck_assert_uint_eq(ca->triggers, A_FIRES);
	ck_assert_msg((double)accepted <= bound, "A: %llu accepted in %.3f s, bound %.1f",
		      (unsigned long long)accepted, elapsed, bound);
	ck_assert_msg(accepted >= (uint64_t)BURST, "A: only %llu accepted, burst is %.0f",
		      (unsigned long long)accepted, BURST);
	ck_assert_uint_eq(ca->rate_limited, A_FIRES - accepted);
	ck_assert_uint_eq(ca->traces_pinned, accepted);
	ck_assert_uint_eq(cb->triggers, B_FIRES);
	ck_assert_uint_eq(cb->rate_limited, 0);
	ck_assert_uint_eq(cb->traces_pinned, B_FIRES);
	ck_assert_uint_eq(a.st.rate_limited, ca->rate_limited);

	/* Every B trace arrived whole. */
	tc_lock(&c);
	for (i = 0; i < nb; i++) {
		uint32_t ns;
		int rc = rp_check_trace(&c, 0, c.nslices, &st, &b[i], B_TRIG, R_AGENT, &ns, msg,
					sizeof msg);
		if (rc != 0) {
			tc_unlock(&c);
			ck_abort_msg("B trace %zu: %s", i, msg);
		}
	}
	tc_unlock(&c);
	rp_parsed_free(b, nb);
	rp_stream_free(&st);
	rt_agent_close(&a);
	tc_free(&c);
}
END_TEST

/*
 * Triggers within the rate limit, each on a small trace that is reported and
 * acknowledged at once. A reported, quiet triggered trace keeps its index entry
 * for --triggered-ttl (60 s); the table holds 2 x buffers entries (here 4 x).
 * After more triggered traces than the table holds, the agent must still index
 * new traces and report new triggered ones (a quiet, fully reported entry is
 * worth less than new data).
 */
#define T_BUFS 64

static void one_trace(struct rt_agent *a, uint64_t lo, int trigger)
{
	uint32_t id = ag_take_buffer(&a->pool);
	uint32_t bytes = ag_fill_buffer(&a->pool, id, 0x7e, lo, 0, 0, 5, 1);
	ag_push_complete(&a->pool, lo, id, bytes);
	if (trigger) {
		struct rt_trigger_entry t = ag_trig(lo, 42, 1, 0);
		ag_push_triggers(&a->pool, &t, 1);
	}
}

START_TEST(test_table_full)
{
	static struct rt_agent a;
	struct tc_collector c;
	struct rt_agent_config cfg;
	char pool[64], err[256];
	uint32_t i, cap;
	const uint64_t late = 0x7AB1E00000000000ull, plain = 0x7AB1F00000000000ull;
	int ok, arrived = 0;
	size_t k;

	ag_pool_name(pool, sizeof pool, "table");
	tc_init(&c);
	ck_assert_msg(tc_start(&c, "tcp://127.0.0.1:0", err, sizeof err) == 0, "%s", err);
	rp_config(&cfg, pool, T_BUFS, 4096, R_AGENT, c.url);
	rp_open(&a, &cfg);
	cap = a.ix.capacity;
	for (i = 0; i < cap + 16; i++) {
		one_trace(&a, 0x7AB1000000000000ull | (i + 1), 1);
		if (i % 16 == 15) {
			RP_UNTIL(ok, &a, 20, rp_quiet(&a) && a.st.slices_acked == a.st.slices_sent);
			ck_assert_msg(ok, "batch %u not reported", i / 16);
		}
	}
	RP_UNTIL(ok, &a, 20, rp_quiet(&a) && a.st.slices_acked == a.st.slices_sent);
	/* One more triggered trace, one untriggered one. */
	one_trace(&a, late, 1);
	one_trace(&a, plain, 0);
	RP_UNTIL(ok, &a, 5, 0);
	tc_lock(&c);
	for (k = 0; k < c.nslices; k++)
		arrived |= c.slices[k].trace_lo == late;
	tc_unlock(&c);
	fprintf(stderr, "report_ratelimit table_full: table %u entries, %llu triggered traces "
		"reported, index_full %llu, pinned entries %llu, expired %llu\n", cap,
		(unsigned long long)a.st.slices_acked, (unsigned long long)a.st.index_full,
		(unsigned long long)a.ix.st.pinned_traces, (unsigned long long)a.st.triggered_expired);
	ck_assert_msg(arrived && rt_index_find(&a.ix, plain) != RT_INDEX_NONE,
		      "after %u triggered traces (table of %u), a new triggered trace %s reported and "
		      "a new untriggered trace %s indexed (index_full %llu): quiet, fully reported "
		      "triggered entries hold the whole table for --triggered-ttl",
		      cap + 16, cap, arrived ? "was" : "was NOT",
		      rt_index_find(&a.ix, plain) != RT_INDEX_NONE ? "was" : "was NOT",
		      (unsigned long long)a.st.index_full);
	rt_agent_close(&a);
	tc_free(&c);
}
END_TEST

static Suite *rate_suite(void)
{
	Suite *s = suite_create("report_ratelimit");
	TCase *t = tcase_create("ratelimit");
	tcase_set_timeout(t, 90);
	tcase_add_test(t, test_ratelimit);
	suite_add_tcase(s, t);
	t = tcase_create("table_full");
	tcase_set_timeout(t, 90);
	tcase_add_test(t, test_table_full);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return rp_run_suite(rate_suite());
}
