/*
 * A slice the collector did not acknowledge must still get there.
 *
 * no_spool: the collector is down when a triggered trace is cut into a slice;
 *   the slice times out. Without a spool, docs/agent.md promises the slice goes
 *   back to its trace and is sent again: once the collector is up it must arrive.
 *
 * refused: the collector answers with a non-zero status (refuses) and later
 *   accepts: without a spool the slice must be sent again and arrive, under the
 *   slice_seq it was refused under (a coordinator that committed it before its
 *   ACK was lost must see the same slice, not a new one: docs/scaling.md).
 *
 * refused_spool: the same with a spool: the refused slice is spooled, the spool
 *   probes once a second, and the slice arrives once the collector accepts.
 *
 * late_ack: the collector takes the slice but its ACK comes after the agent's
 *   report timeout (what a loaded machine does). The agent sends it again under
 *   the same slice_seq; the collector, like the coordinator's store, keeps one
 *   copy and acknowledges the second (tc duplicates): X is delivered once.
 *
 * silent_link: connected, but nothing answers (a connection nng still held
 *   for a coordinator that had died while the agent was stopped was seen so).
 *   After 3 s of round trips without a reply the agent dials again
 *   (rt_uplink_keep_dialing); once the collector answers, X arrives.
 */
#include "rptest.h"

#define RT_AGENT_ID 0x7E7
#define RT_TRIG 3
#define X_LO 0x7E70000000000001ull

/* Trace X: 3 sealed buffers of 20 records each, then its trigger. */
static void write_x(struct rt_agent *a)
{
	uint32_t s;
	struct rt_trigger_entry t = ag_trig(X_LO, RT_TRIG, 1, 0);
	for (s = 0; s < 3; s++) {
		uint32_t id = ag_take_buffer(&a->pool);
		uint32_t bytes = ag_fill_buffer(&a->pool, id, 0x7e, X_LO, s, s * 20, 20, 1);
		ag_push_complete(&a->pool, X_LO, id, bytes);
	}
	ag_push_triggers(&a->pool, &t, 1);
}

/* X arrived whole (all 60 records, in order, each buffer once)? */
static int x_arrived(struct tc_collector *c, char *msg, size_t msglen)
{
	uint32_t seq, next = 0;
	size_t i, j;
	int ok = 1;
	tc_lock(c);
	for (seq = 0; seq < 3 && ok; seq++) {
		const struct tc_buffer *hit = NULL;
		uint32_t hits = 0;
		for (i = 0; i < c->nslices; i++)
			for (j = 0; j < c->slices[i].nbuf; j++)
				if (c->slices[i].trace_lo == X_LO && c->slices[i].acked &&
				    c->slices[i].bufs[j].seq == seq) {
					hits++;
					hit = &c->slices[i].bufs[j];
				}
		if (hits != 1) {
			snprintf(msg, msglen, "buffer seq %u of X acknowledged %u times", seq, hits);
			ok = 0;
		} else if (ag_check_frames(hit->data, hit->len, X_LO, &next, msg, msglen) != 20) {
			ok = 0;
		}
	}
	tc_unlock(c);
	return ok;
}

static void run_retry(int mode)
{
	static struct rt_agent a;
	struct tc_collector c;
	struct rt_agent_config cfg;
	char pool[64], err[256], msg[256] = "", dir[256];
	int ok;
	static const char *tags[] = { "nospool", "refused", "refspool", "lateack", "unused",
				      "silent" };

	ag_pool_name(pool, sizeof pool, tags[mode]);
	tc_init(&c);
	ck_assert_msg(tc_start(&c, "tcp://127.0.0.1:0", err, sizeof err) == 0, "%s", err);
	if (mode == 0)
		tc_stop(&c); /* down */
	else if (mode == 3)
		tc_set_delay(&c, 1500000); /* the ACK comes 1.5 s later, the timeout is 0.3 s */
	else if (mode == 1 || mode == 2)
		tc_set_refuse(&c, 1);
	else if (mode == 5)
		tc_set_silent(&c, 1);
	rp_config(&cfg, pool, 64, 4096, RT_AGENT_ID, c.url);
	cfg.report_timeout_ms = 300;
	if (mode == 2) {
		rp_tempdir(dir, sizeof dir, "refspool");
		snprintf(cfg.spool_dir, sizeof cfg.spool_dir, "%s", dir);
	}
	rp_open(&a, &cfg);
	if (mode == 3) {
		/* The first copy must reach the collector (it is the ACK that is late):
		 * on a loaded machine the link's connection could take longer than the
		 * 0.3 s timeout, and a copy that timed out in the send queue never left
		 * (1 request seen, the resend acked: no duplicate). */
		RP_UNTIL(ok, &a, 20,
			 atomic_load_explicit(&a.route.up[0].coll_pipes.n, memory_order_acquire) >= 1);
		ck_assert_msg(ok, "the agent never connected to the collector");
	}
	write_x(&a);
	RP_UNTIL(ok, &a, 20, a.st.slices_failed >= 1);
	ck_assert_msg(ok, "the first slice did not fail (sent %llu, acked %llu)",
		      (unsigned long long)a.st.slices_sent, (unsigned long long)a.st.slices_acked);
	if (mode == 2)
		ck_assert_uint_eq(a.st.slices_spooled, 1);

	/* The collector is back / accepts now. */
	if (mode == 0)
		ck_assert_msg(tc_start(&c, NULL, err, sizeof err) == 0, "restart: %s", err);
	else if (mode == 3)
		tc_set_delay(&c, 0);
	else if (mode == 5) { /* answered only once the agent dialed again */
		RP_UNTIL(ok, &a, 20, a.route.up[0].st.redials >= 1);
		ck_assert_msg(ok, "a link without replies for 3 s was not dialed again");
		/* counted against the link that was silent: the collector's */
		ck_assert_uint_ge(a.route.up[0].st.coll_redials, 1);
		ck_assert_uint_eq(a.route.up[0].st.coll_redials + a.route.up[0].st.coord_redials,
				  a.route.up[0].st.redials);
		tc_set_silent(&c, 0);
	} else
		tc_set_refuse(&c, 0);
	RP_UNTIL(ok, &a, 10, x_arrived(&c, msg, sizeof msg) && rp_quiet(&a));
	ck_assert_msg(ok,
		      "X never reached the collector after it came back (%s): slices sent %llu, "
		      "failed %llu, acked %llu, collector_down %d, queued buffers %llu, X buffers "
		      "still held %u, requests seen by the collector %llu",
		      msg, (unsigned long long)a.st.slices_sent, (unsigned long long)a.st.slices_failed,
		      (unsigned long long)a.st.slices_acked, a.collector_down,
		      (unsigned long long)a.rep.queued_buffers,
		      rt_index_find(&a.ix, X_LO) == RT_INDEX_NONE
			      ? 0
			      : a.ix.traces[rt_index_find(&a.ix, X_LO)].nbuffers,
		      (unsigned long long)tc_requests(&c));
	if (mode == 1) { /* every slice_seq X went under was acknowledged in the end */
		tc_lock(&c);
		for (size_t i = 0; i < c.nslices; i++) {
			int acked = 0;
			for (size_t j = 0; j < c.nslices; j++)
				acked |= c.slices[j].acked && c.slices[j].slice_seq == c.slices[i].slice_seq;
			ck_assert_msg(acked, "a refused slice (seq %llu) came again under another "
				      "slice_seq: a member that committed it would store it twice",
				      (unsigned long long)c.slices[i].slice_seq);
		}
		tc_unlock(&c);
		ck_assert_uint_ge(a.st.slices_resent, 1);
	}
	if (mode == 3) { /* the first copy was taken: the resend was one */
		tc_lock(&c);
		ck_assert_msg(c.duplicates >= 1,
			      "no copy of X came again (%zu slices recorded, %llu requests seen "
			      "by the collector; the agent sent %llu slices, %llu failed, %llu "
			      "acked, %llu resent)",
			      c.nslices, (unsigned long long)c.requests,
			      (unsigned long long)a.st.slices_sent,
			      (unsigned long long)a.st.slices_failed,
			      (unsigned long long)a.st.slices_acked,
			      (unsigned long long)a.st.slices_resent);
		tc_unlock(&c);
		ck_assert_uint_ge(a.st.slices_resent, 1);
	}
	ck_assert_uint_eq(a.ix.st.inflight_buffers, 0);
	ck_assert_uint_eq(rt_agent_free_buffers(&a), 64);
	rt_agent_close(&a);
	tc_free(&c);
	if (mode == 2)
		rp_rm_rf(dir);
}

START_TEST(test_no_spool)
{
	run_retry(0);
}
END_TEST

START_TEST(test_refused)
{
	run_retry(1);
}
END_TEST

START_TEST(test_refused_spool)
{
	run_retry(2);
}
END_TEST

START_TEST(test_late_ack)
{
	run_retry(3);
}
END_TEST

START_TEST(test_silent_link)
{
	run_retry(5);
}
END_TEST

static Suite *retry_suite(void)
{
	Suite *s = suite_create("report_retry");
	TCase *t = tcase_create("no_spool");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_no_spool);
	suite_add_tcase(s, t);
	t = tcase_create("refused");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_refused);
	suite_add_tcase(s, t);
	t = tcase_create("refused_spool");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_refused_spool);
	suite_add_tcase(s, t);
	t = tcase_create("late_ack");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_late_ack);
	suite_add_tcase(s, t);
	t = tcase_create("silent_link");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_silent_link);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return rp_run_suite(retry_suite());
}
