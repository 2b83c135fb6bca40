/*
 * The spool in the agent, across an agent restart.
 *
 * exactly_once: the collector is down; K triggered traces are cut into slices
 *   that all go to the spool; the agent is closed; a new agent opens the same
 *   pool and spool directory; the collector comes up: every slice arrives
 *   exactly once (by (agent id, slice_seq) and by trace), byte-exact, none lost.
 *
 * torn: as above, but the newest segment file is cut in the middle of its last
 *   record before the restart: every earlier slice arrives once, the torn one
 *   does not, and the spool counts a torn tail.
 *
 * restart_seq: after a restart with slices still spooled, the new agent cuts new
 *   slices; (agent id, slice_seq) must still name one slice only, since the
 *   collector acknowledges and joins slices by it.
 */
#include <dirent.h>

#include "rptest.h"

#define SP_AGENT 0x5B001
#define SP_TRIG 9
#define SP_K 20
#define SP_RECS 70 /* 2 buffers */

struct sp_rep {
	uint64_t lo;
	uint32_t nbuf, discards;
};

/* Child: write `n` traces (from number `first`), trigger each; with `step`, wait
 * for a byte from the test before each trace. */
static void sp_child(const char *pool, int out, int in, uint32_t first, uint32_t n, int step)
{
	uint32_t i, k;
	ag_child_client(pool, 8, RETRACE_OK);
	for (i = first; i < first + n; i++) {
		struct retrace_thread_stats s0, s1;
		retrace_trace_id id = { 0x5B5B, 0x5B00000000000000ull | (i + 1) };
		uint8_t rec[AG_RECLEN];
		struct sp_rep r;
		char ch;
		if (step && ag_read_exact(in, &ch, 1, 30000) != 0)
			CHILD_FAIL(45, "no step");
		retrace_thread_stats(&s0);
		if (retrace_begin(id) != 1)
			CHILD_FAIL(41, "not recorded");
		for (k = 0; k < SP_RECS; k++) {
			ag_record(rec, id.lo, k);
			retrace_tracepoint(rec, AG_RECLEN);
		}
		retrace_end();
		retrace_flush();
		if (retrace_trigger(id, SP_TRIG, NULL, 0) != RETRACE_OK)
			CHILD_FAIL(42, "trigger");
		retrace_thread_stats(&s1);
		r.lo = id.lo;
		r.discards = (uint32_t)(s1.discard_buffers - s0.discard_buffers);
		r.nbuf = (uint32_t)(s1.buffers_used - s0.buffers_used) + r.discards;
		if (ag_write_all(out, &r, sizeof r) != 0)
			CHILD_FAIL(44, "pipe");
	}
	rp_child_exit();
}

struct sp_env {
	char pool[64];
	char dir[256];
	struct tc_collector c;
	struct rt_agent_config cfg;
	struct sp_rep reps[4 * SP_K];
	size_t nreps;
};

static void sp_setup(struct sp_env *e, const char *tag)
{
	char err[256];
	memset(e, 0, sizeof *e);
	ag_pool_name(e->pool, sizeof e->pool, tag);
	rp_tempdir(e->dir, sizeof e->dir, tag);
	tc_init(&e->c);
	/* Bind once to own a port, then go away: the collector is down. */
	ck_assert_msg(tc_start(&e->c, "tcp://127.0.0.1:0", err, sizeof err) == 0, "%s", err);
	tc_stop(&e->c);
	rp_config(&e->cfg, e->pool, 256, 4096, SP_AGENT, e->c.url);
	e->cfg.unlink_at_exit = 0;  /* the pool outlives the first agent */
	e->cfg.report_timeout_ms = 300;
	snprintf(e->cfg.spool_dir, sizeof e->cfg.spool_dir, "%s", e->dir);
}

/* Take the child's reports; 1 once it closed the pipe. */
static int sp_read(struct sp_env *e, struct ag_reader *rd)
{
	while (e->nreps < 4 * SP_K && ag_reader_next(rd, &e->reps[e->nreps]))
		e->nreps++;
	return rd->eof;
}

/* Run a child writing n traces into the agent's pool, until all are spooled. */
static void sp_spool_traces(struct sp_env *e, struct rt_agent *a, uint32_t first, uint32_t n)
{
	int p[2], ok;
	pid_t kid;
	struct ag_reader rd;
	uint64_t spooled0 = a->st.slices_spooled;
	ck_assert_int_eq(pipe(p), 0);
	kid = ag_fork();
	if (kid == 0) {
		close(p[0]);
		sp_child(e->pool, p[1], -1, first, n, 0);
	}
	close(p[1]);
	ag_reader_init(&rd, p[0], sizeof(struct sp_rep));
	RP_UNTIL(ok, a, 40, sp_read(e, &rd) && rp_quiet(a) && a->st.slices_spooled - spooled0 >= n);
	ck_assert_msg(ok, "spooled %llu of %u (reports %zu, failed %llu, spool_full %llu)",
		      (unsigned long long)(a->st.slices_spooled - spooled0), n, e->nreps,
		      (unsigned long long)a->st.slices_failed, (unsigned long long)a->st.spool_full);
	close(p[0]);
	ag_assert_exited_ok(kid, 20, "spool child");
}

/* Every spooled slice has been sent; the collector holds `want` slices. */
static void sp_drain(struct sp_env *e, struct rt_agent *a, size_t want)
{
	int ok;
	RP_UNTIL(ok, a, 40, a->spool->st.records_pending == 0 && rp_quiet(a) &&
				     tc_nslices(&e->c) >= want);
	ck_assert_msg(ok, "spool pending %llu, collector holds %zu of %zu slices",
		      (unsigned long long)a->spool->st.records_pending, tc_nslices(&e->c), want);
	/* A little longer: anything sent twice would show now. */
	RP_UNTIL(ok, a, 0.5, 0);
}

/*
 * Check the collector: (agent, slice_seq) unique; each reported trace (except
 * `skip_lo`) arrived once, whole and byte-exact; skip_lo did not arrive.
 */
static void sp_check(struct sp_env *e, uint64_t skip_lo)
{
	size_t i, j, r;
	char msg[256];
	tc_lock(&e->c);
	for (i = 0; i < e->c.nslices; i++)
		for (j = i + 1; j < e->c.nslices; j++)
			if (e->c.slices[i].agent_id == e->c.slices[j].agent_id &&
			    e->c.slices[i].slice_seq == e->c.slices[j].slice_seq) {
				uint64_t a = e->c.slices[i].trace_lo, b = e->c.slices[j].trace_lo;
				tc_unlock(&e->c);
				ck_abort_msg("(agent %u, slice_seq %llu) names two slices (traces %llx and "
					     "%llx)", e->c.slices[i].agent_id,
					     (unsigned long long)e->c.slices[i].slice_seq,
					     (unsigned long long)a, (unsigned long long)b);
			}
	for (r = 0; r < e->nreps; r++) {
		const struct sp_rep *rp = &e->reps[r];
		uint32_t got = 0, next = 0, seq;
		for (seq = 0; seq < rp->nbuf; seq++) {
			uint32_t hits = 0;
			for (i = 0; i < e->c.nslices; i++) {
				const struct tc_slice *s = &e->c.slices[i];
				if (s->trace_lo != rp->lo)
					continue;
				ck_assert_uint_eq(s->agent_id, SP_AGENT);
				ck_assert_uint_eq(s->trigger_id, SP_TRIG);
				for (j = 0; j < s->nbuf; j++) {
					if (s->bufs[j].seq != seq)
						continue;
					hits++;
					if (hits == 1 && ag_check_frames(s->bufs[j].data, s->bufs[j].len,
									 rp->lo, &next, msg, sizeof msg) < 0) {
						tc_unlock(&e->c);
						ck_abort_msg("%s", msg);
					}
				}
			}
			if (hits > 1) {
				tc_unlock(&e->c);
				ck_abort_msg("trace %llx buffer seq %u arrived %u times",
					     (unsigned long long)rp->lo, seq, hits);
			}
			got += hits;
		}
		if (rp->lo == skip_lo) {
			if (got != 0) {
				tc_unlock(&e->c);
				ck_abort_msg("the torn slice's trace %llx arrived (%u buffers)",
					     (unsigned long long)rp->lo, got);
			}
			continue;
		}
		if (got != rp->nbuf || next != SP_RECS) {
			tc_unlock(&e->c);
			ck_abort_msg("trace %llx: %u of %u buffers, %u of %u records arrived",
				     (unsigned long long)rp->lo, got, rp->nbuf, next, SP_RECS);
		}
	}
	tc_unlock(&e->c);
}

static void sp_teardown(struct sp_env *e, struct rt_agent *a)
{
	a->cfg.unlink_at_exit = 1;
	rt_agent_close(a);
	tc_free(&e->c);
	rp_rm_rf(e->dir);
}

/* ------------------------------------------------------------ tests ---- */

START_TEST(test_exactly_once)
{
	static struct sp_env e;
	static struct rt_agent a;
	char err[256];
	struct rt_spool_stats ss;

	sp_setup(&e, "once");
	rp_open(&a, &e.cfg);
	sp_spool_traces(&e, &a, 0, SP_K);
	ck_assert_uint_eq(e.nreps, SP_K);
	ck_assert_uint_eq(a.st.slices_acked, 0);
	ck_assert_uint_eq(a.st.spool_full, 0);
	ck_assert_uint_eq(a.spool->st.records_pending, a.st.slices_spooled);
	ck_assert_uint_eq(a.ix.st.inflight_buffers, 0);
	rt_agent_close(&a);

	/* A new agent on the same pool and spool; then the collector comes up. */
	rp_open(&a, &e.cfg);
	ck_assert_msg(a.took_over, "the second agent did not take the pool over");
	ck_assert_uint_eq(a.spool->st.records_pending, SP_K);
	ck_assert_msg(tc_start(&e.c, NULL, err, sizeof err) == 0, "restart collector: %s", err);
	sp_drain(&e, &a, SP_K);
	sp_check(&e, 0);
	ck_assert_uint_eq(tc_nslices(&e.c), SP_K);
	rt_spool_stats(a.spool, &ss);
	ck_assert_uint_eq(ss.torn_skipped, 0);
	ck_assert_uint_eq(a.st.spool_sent, SP_K);
	sp_teardown(&e, &a);
}
END_TEST

/* The newest segment file in dir and the offset and length of its last record. */
static void last_record(const char *dir, char *path, size_t n, uint64_t *off, uint32_t *len,
			uint64_t *trace_lo)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char best[64] = "";
	uint8_t *buf;
	FILE *f;
	long size;
	uint64_t pos = 24, last = 0;
	uint32_t l = 0;
	struct rt_wire_msg m;
	ck_assert(d != NULL);
	while ((de = readdir(d)) != NULL) {
		size_t k = strlen(de->d_name);
		if (k > 4 && strcmp(de->d_name + k - 4, ".seg") == 0 && strcmp(de->d_name, best) > 0)
			snprintf(best, sizeof best, "%s", de->d_name);
	}
	closedir(d);
	ck_assert_msg(best[0], "no segment in %s", dir);
	snprintf(path, n, "%s/%s", dir, best);
	f = fopen(path, "rb");
	ck_assert(f != NULL);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	rewind(f);
	buf = malloc((size_t)size + 1);
	ck_assert_uint_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	/* Records: 24-byte header (magic, len, id, crcs), payload, pad to 8. */
	while (pos + 24 <= (uint64_t)size) {
		uint32_t magic;
		memcpy(&magic, buf + pos, 4);
		memcpy(&l, buf + pos + 4, 4);
		if (magic != 0x52535452u || pos + 24 + l > (uint64_t)size)
			break;
		last = pos;
		pos += 24 + ((l + 7u) & ~7u);
	}
	ck_assert_msg(last, "no record in %s", path);
	memcpy(&l, buf + last + 4, 4);
	ck_assert_int_eq(rt_wire_decode(buf + last + 24, l, &m), 0);
	ck_assert_int_eq(m.type, RT_WIRE_SLICE);
	*trace_lo = m.slice.trace_lo;
	rt_wire_msg_free(&m);
	*off = last;
	*len = l;
	free(buf);
}

START_TEST(test_torn)
{
	static struct sp_env e;
	static struct rt_agent a;
	char err[256], seg[512];
	uint64_t off, torn_lo;
	uint32_t len;
	struct rt_spool_stats ss;

	sp_setup(&e, "torn");
	rp_open(&a, &e.cfg);
	sp_spool_traces(&e, &a, 0, SP_K);
	ck_assert_uint_eq(a.st.slices_spooled, SP_K);
	rt_agent_close(&a);

	last_record(e.dir, seg, sizeof seg, &off, &len, &torn_lo);
	ck_assert_int_eq(truncate(seg, (off_t)(off + 24 + len / 2)), 0);

	rp_open(&a, &e.cfg);
	rt_spool_stats(a.spool, &ss);
	ck_assert_msg(ss.torn_skipped >= 1, "torn tail not counted");
	ck_assert_uint_eq(ss.records_pending, SP_K - 1);
	ck_assert_msg(tc_start(&e.c, NULL, err, sizeof err) == 0, "restart collector: %s", err);
	sp_drain(&e, &a, SP_K - 1);
	sp_check(&e, torn_lo);
	ck_assert_uint_eq(tc_nslices(&e.c), SP_K - 1);
	{
		char st[16384];
		rt_agent_status(&a, 1, st, sizeof st);
		ck_assert_msg(strstr(st, "\"spool_torn_skipped\": 1") ||
				      strstr(st, "\"spool_torn_skipped\":1"),
			      "status does not show the torn record: %s", strstr(st, "spool_torn") ?
			      strstr(st, "spool_torn") : "(no spool_torn_skipped)");
	}
	sp_teardown(&e, &a);
}
END_TEST

START_TEST(test_restart_seq)
{
	static struct sp_env e;
	static struct rt_agent a;
	char err[256];

	sp_setup(&e, "rseq");
	rp_open(&a, &e.cfg);
	sp_spool_traces(&e, &a, 0, SP_K / 2);
	rt_agent_close(&a);

	/* Restarted agent: more triggered traces while the old slices wait in the spool. */
	rp_open(&a, &e.cfg);
	sp_spool_traces(&e, &a, SP_K / 2, SP_K / 2);
	ck_assert_msg(tc_start(&e.c, NULL, err, sizeof err) == 0, "restart collector: %s", err);
	sp_drain(&e, &a, SP_K);
	sp_check(&e, 0);
	sp_teardown(&e, &a);
}
END_TEST

/* Start a child writing n triggered traces; returns its pid and the read end. */
static pid_t sp_start_child(struct sp_env *e, uint32_t first, uint32_t n, struct ag_reader *rd)
{
	int p[2];
	pid_t kid;
	(void)e;
	ck_assert_int_eq(pipe(p), 0);
	kid = ag_fork();
	if (kid == 0) {
		close(p[0]);
		sp_child(e->pool, p[1], -1, first, n, 0);
	}
	close(p[1]);
	ag_reader_init(rd, p[0], sizeof(struct sp_rep));
	return kid;
}

/*
 * The spool is full and the collector down: the slices that did not fit wait on
 * their traces. Each is one slice refused by the spool; the agent must not cut,
 * encode and count it again on every pass (spool_full and slices_sent would
 * count passes, not slices). Once the collector is up, everything arrives.
 */
START_TEST(test_spool_full)
{
	static struct sp_env e;
	static struct rt_agent a;
	struct ag_reader rd;
	pid_t kid;
	char err[256];
	int ok;
	uint64_t full0, sent0, full1, sent1;
	const uint32_t k = 8;

	sp_setup(&e, "full");
	e.cfg.spool_max = 25000; /* three slices of ~7 KB */
	rp_open(&a, &e.cfg);
	kid = sp_start_child(&e, 0, k, &rd);
	RP_UNTIL(ok, &a, 30, sp_read(&e, &rd) && rt_agent_queue_depth(&a, RT_Q_COMPLETE) == 0 &&
				     rt_agent_queue_depth(&a, RT_Q_TRIGGER) == 0 && a.st.spool_full > 0);
	ck_assert_msg(ok, "spool never full: spooled %llu, sent %llu, failed %llu, triggered %llu, "
		      "queued %llu, in flight %u, collector_down %d, spool bytes %llu, reports %zu, "
		      "spool_errors %llu",
		      (unsigned long long)a.st.slices_spooled, (unsigned long long)a.st.slices_sent,
		      (unsigned long long)a.st.slices_failed, (unsigned long long)a.st.triggered_traces,
		      (unsigned long long)a.rep.queued_buffers, rt_uplink_inflight(&a.up),
		      a.collector_down, (unsigned long long)a.spool->st.bytes_pending, e.nreps,
		      (unsigned long long)a.st.spool_errors);
	ag_assert_exited_ok(kid, 20, "spool child");
	close(rd.fd);
	full0 = a.st.spool_full;
	sent0 = a.st.slices_sent;
	RP_UNTIL(ok, &a, 1.0, 0);
	full1 = a.st.spool_full;
	sent1 = a.st.slices_sent;
	fprintf(stderr, "report_spool full: spooled %llu of %u; in 1 s of waiting spool_full went "
		"%llu -> %llu, slices_sent %llu -> %llu\n",
		(unsigned long long)a.st.slices_spooled, k, (unsigned long long)full0,
		(unsigned long long)full1, (unsigned long long)sent0, (unsigned long long)sent1);

	ck_assert_msg(tc_start(&e.c, NULL, err, sizeof err) == 0, "restart collector: %s", err);
	RP_UNTIL(ok, &a, 30, a.spool->st.records_pending == 0 && rp_quiet(&a) &&
				     a.st.slices_acked + a.st.spool_sent >= k);
	ck_assert_msg(ok, "after the collector came back: spool pending %llu, acked %llu, spool "
		      "sent %llu", (unsigned long long)a.spool->st.records_pending,
		      (unsigned long long)a.st.slices_acked, (unsigned long long)a.st.spool_sent);
	RP_UNTIL(ok, &a, 0.5, 0);
	sp_check(&e, 0);
	ck_assert_msg(full1 <= k && sent1 <= 2 * k,
		      "a full spool is retried on every pass: spool_full %llu and slices_sent %llu "
		      "for %u slices (+%llu / +%llu in one idle second)",
		      (unsigned long long)full1, (unsigned long long)sent1, k,
		      (unsigned long long)(full1 - full0), (unsigned long long)(sent1 - sent0));
	sp_teardown(&e, &a);
}
END_TEST

/*
 * A clean stop with a spool: triggered traces still queued or in flight (the
 * collector is down and the timeout long) must not vanish. They should be
 * spooled on the way out (or otherwise survive), and reach the collector from
 * the next agent.
 */
START_TEST(test_clean_stop)
{
	static struct sp_env e;
	static struct rt_agent a;
	struct ag_reader rd;
	char err[256];
	pid_t kid;
	int ok;
	const uint32_t k = 10;
	size_t arrived = 0, r, i;

	sp_setup(&e, "stop");
	e.cfg.report_timeout_ms = 20000;
	rp_open(&a, &e.cfg);
	kid = sp_start_child(&e, 0, k, &rd);
	RP_UNTIL(ok, &a, 30, sp_read(&e, &rd) && a.st.triggered_traces >= k &&
				     rt_agent_queue_depth(&a, RT_Q_COMPLETE) == 0 &&
				     rt_uplink_inflight(&a.up) > 0);
	ck_assert_msg(ok, "triggered %llu", (unsigned long long)a.st.triggered_traces);
	ag_assert_exited_ok(kid, 20, "spool child");
	close(rd.fd);
	fprintf(stderr, "report_spool clean_stop: at stop %u slices in flight, %llu buffers queued, "
		"%llu spooled\n", rt_uplink_inflight(&a.up), (unsigned long long)a.rep.queued_buffers,
		(unsigned long long)a.st.slices_spooled);
	rt_agent_close(&a); /* SIGTERM: rt_agent_close, as retrace-agent does */

	rp_open(&a, &e.cfg);
	ck_assert_msg(tc_start(&e.c, NULL, err, sizeof err) == 0, "restart collector: %s", err);
	RP_UNTIL(ok, &a, 4, 0);
	tc_lock(&e.c);
	for (r = 0; r < e.nreps; r++) {
		int seen = 0;
		for (i = 0; i < e.c.nslices && !seen; i++)
			seen = e.c.slices[i].trace_lo == e.reps[r].lo;
		arrived += (size_t)seen;
	}
	tc_unlock(&e.c);
	ck_assert_msg(arrived == k,
		      "%zu of %u triggered traces reached the collector after a clean restart "
		      "(spool pending at reopen %llu; the new agent recovered %llu traces as "
		      "untriggered)", arrived, k, (unsigned long long)a.spool->st.records_pending,
		      (unsigned long long)a.st.recovered_traces);
	sp_teardown(&e, &a);
}
END_TEST

static Suite *spool_suite(void)
{
	Suite *s = suite_create("report_spool");
	TCase *t = tcase_create("exactly_once");
	tcase_set_timeout(t, 100);
	tcase_add_test(t, test_exactly_once);
	suite_add_tcase(s, t);
	t = tcase_create("torn");
	tcase_set_timeout(t, 100);
	tcase_add_test(t, test_torn);
	suite_add_tcase(s, t);
	t = tcase_create("restart_seq");
	tcase_set_timeout(t, 100);
	tcase_add_test(t, test_restart_seq);
	suite_add_tcase(s, t);
	t = tcase_create("full");
	tcase_set_timeout(t, 100);
	tcase_add_test(t, test_spool_full);
	suite_add_tcase(s, t);
	t = tcase_create("clean_stop");
	tcase_set_timeout(t, 100);
	tcase_add_test(t, test_clean_stop);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return rp_run_suite(spool_suite());
}
