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
 *
 * enospc, space_returns, cursor_stuck: the spool's disk is full (a 64 KiB
 *   tmpfs, or a file size limit where nothing can be mounted): failed appends
 *   back off and are logged once per 10 s; whether the collector or the space
 *   comes back first, every triggered trace arrives exactly once; a cursor
 *   that cannot be written holds the spool back instead of re-sending a slice.
 */
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>

#include "common/smallfs.h"
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

/* With dir NULL a fresh temp directory is the spool; else dir (made by the caller). */
static void sp_setup_dir(struct sp_env *e, const char *tag, const char *dir)
{
	char err[256];
	memset(e, 0, sizeof *e);
	ag_pool_name(e->pool, sizeof e->pool, tag);
	if (dir)
		snprintf(e->dir, sizeof e->dir, "%s", dir);
	else
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

static void sp_setup(struct sp_env *e, const char *tag)
{
	sp_setup_dir(e, tag, NULL);
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
		      (unsigned long long)a.rep.queued_buffers, rt_route_inflight(&a.route),
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
				     rt_route_inflight(&a.route) > 0);
	ck_assert_msg(ok, "triggered %llu", (unsigned long long)a.st.triggered_traces);
	ag_assert_exited_ok(kid, 20, "spool child");
	close(rd.fd);
	fprintf(stderr, "report_spool clean_stop: at stop %u slices in flight, %llu buffers queued, "
		"%llu spooled\n", rt_route_inflight(&a.route), (unsigned long long)a.rep.queued_buffers,
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

/* ------------------------------------------------------- a full disk ---- */

#define SP_DISK_BYTES (64u * 1024u)

static void sp_fsize_limit(rlim_t soft)
{
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
	rl.rlim_cur = soft == RLIM_INFINITY || soft > rl.rlim_max ? rl.rlim_max : soft;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

/*
 * Make the spool directory a 64 KiB disk: a tmpfs of that size in a mount
 * namespace of this test process alone (before any thread starts), or, where
 * nothing can be mounted, a file size limit of the same size (writes past it
 * fail with EFBIG; SIGXFSZ is ignored), set by sp_limit_disk once the agent has
 * made its pool (the limit would refuse the pool too). Either way appends
 * really fail in the kernel. Returns 1 for the tmpfs.
 */
static int sp_small_disk(const char *dir)
{
	char why[1024];
	signal(SIGXFSZ, SIG_IGN);
	if (smallfs_mount(dir, "64k", why, sizeof why) == 0)
		return 1;
	fprintf(stderr, "report_spool: no tmpfs (%s); limiting file sizes to %u bytes instead\n",
		why, SP_DISK_BYTES);
	return 0;
}

static void sp_limit_disk(int tmpfs)
{
	if (!tmpfs)
		sp_fsize_limit(SP_DISK_BYTES);
}

/* Space returns. */
static void sp_grow_disk(const char *dir, int tmpfs)
{
	char why[1024];
	if (tmpfs)
		ck_assert_msg(smallfs_resize(dir, "16m", why, sizeof why) == 0, "%s", why);
	else
		sp_fsize_limit(RLIM_INFINITY);
}

/* Send this process's stderr (the agent's log) to a file; returns the saved fd. */
static int sp_capture_log(char *path, size_t n)
{
	int fd, saved;
	snprintf(path, n, "/tmp/rt-test-rp%d-log-%d-XXXXXX", (int)ag_runner_pid, (int)getpid());
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	fflush(stderr);
	saved = dup(2);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_eq(dup2(fd, 2), 2);
	close(fd);
	return saved;
}

/* Put stderr back, echo the log, and count its lines holding both words. */
static unsigned sp_log_lines(const char *path, int saved, const char *w1, const char *w2)
{
	char line[2048];
	unsigned n = 0;
	FILE *f;
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof line, f)) {
		if (strstr(line, w1) && strstr(line, w2)) {
			n++;
			fprintf(stderr, "  log: %s", line);
		}
	}
	fclose(f);
	unlink(path);
	return n;
}

/* A figure of `retrace status --json`, by name. */
static uint64_t sp_status_u64(const struct rt_agent *a, const char *name)
{
	static char st[1 << 16];
	char key[96];
	const char *p;
	rt_agent_status(a, 1, st, sizeof st);
	snprintf(key, sizeof key, "\"%s\":", name);
	p = strstr(st, key);
	ck_assert_msg(p != NULL, "retrace status shows no %s", name);
	p += strlen(key);
	while (*p == ' ')
		p++;
	return strtoull(p, NULL, 10);
}

/*
 * Once the collector is back: a slow acknowledgement (a loaded machine) must not
 * look like a lost one, or the slice goes out twice (at-least-once delivery, which
 * the collector deduplicates) and sp_check's exactly-once count fails for a
 * reason these tests are not about. The agent's 300 ms timeout only serves to
 * find the collector down quickly.
 */
static void sp_patient(struct rt_agent *a)
{
	uint32_t i;
	for (i = 0; i < RT_UPLINK_SLOTS; i++)
		a->route.up[0].slots[i].x.timeout_ms = 20000; /* each send sets it */
}

/* How many of the reported traces the collector holds any slice of. */
static size_t sp_arrived(struct sp_env *e)
{
	size_t r, i, n = 0;
	tc_lock(&e->c);
	for (r = 0; r < e->nreps; r++) {
		for (i = 0; i < e->c.nslices; i++)
			if (e->c.slices[i].trace_lo == e->reps[r].lo)
				break;
		n += i < e->c.nslices;
	}
	tc_unlock(&e->c);
	return n;
}

/* Run SP_K triggered traces into an agent whose spool disk fills up. */
static void sp_fill_disk(struct sp_env *e, struct rt_agent *a)
{
	struct ag_reader rd;
	pid_t kid = sp_start_child(e, 0, SP_K, &rd);
	int ok;
	RP_UNTIL(ok, a, 40, sp_read(e, &rd) && e->nreps == SP_K && a->st.triggered_traces >= SP_K &&
				    rt_agent_queue_depth(a, RT_Q_COMPLETE) == 0 &&
				    rt_agent_queue_depth(a, RT_Q_TRIGGER) == 0 && a->st.spool_errors > 0);
	ck_assert_msg(ok, "the disk never filled: reports %zu, triggered %llu, spooled %llu, "
		      "spool_errors %llu, spool_full %llu", e->nreps,
		      (unsigned long long)a->st.triggered_traces,
		      (unsigned long long)a->st.slices_spooled, (unsigned long long)a->st.spool_errors,
		      (unsigned long long)a->st.spool_full);
	ag_assert_exited_ok(kid, 20, "spool child");
	close(rd.fd);
}

/*
 * Issue 18 item 2: the spool's disk is full (64 KiB for 20 triggered slices of
 * ~7 KB each) and the collector down. Failed appends are retried with back-off
 * (waits doubling from 20 ms to 2 s), not on every pass, and logged at most once
 * per 10 s. Then the collector returns while the disk is still full: what the
 * spool holds drains (moving its cursor needs no new space), nothing is sent
 * twice, and the slices that never fitted go straight to the collector, so
 * every triggered trace arrives exactly once.
 */
START_TEST(test_spool_enospc)
{
	static struct sp_env e;
	static struct rt_agent a;
	char dir[256], err[256], logpath[256];
	uint64_t e0, e1, t0, t1, tstart, bound;
	unsigned lines;
	int ok, saved, tmpfs;

	rp_tempdir(dir, sizeof dir, "nosp");
	tmpfs = sp_small_disk(dir);
	sp_setup_dir(&e, "nosp", dir);
	saved = sp_capture_log(logpath, sizeof logpath);
	tstart = ag_now_ns();
	rp_open(&a, &e.cfg);
	sp_limit_disk(tmpfs);
	sp_fill_disk(&e, &a);

	/* Two idle seconds with the disk full. */
	e0 = a.st.spool_errors;
	t0 = ag_now_ns();
	RP_UNTIL(ok, &a, 2.0, 0);
	e1 = a.st.spool_errors;
	t1 = ag_now_ns();
	/* Eight doublings reach the 2 s cap, then one attempt per 2 s. */
	bound = 8 + (t1 - t0) / 2000000000ull + 1;
	ck_assert_msg(e1 - e0 <= bound,
		      "a full disk is retried on every pass: %llu failed appends in %.1f s "
		      "(at most %llu with back-off)", (unsigned long long)(e1 - e0),
		      (double)(t1 - t0) / 1e9, (unsigned long long)bound);

	/* The collector returns; the disk is still full. */
	sp_patient(&a);
	ck_assert_msg(tc_start(&e.c, NULL, err, sizeof err) == 0, "restart collector: %s", err);
	RP_UNTIL(ok, &a, 40, a.spool->st.records_pending == 0 && rp_quiet(&a) &&
				     sp_arrived(&e) == SP_K);
	ck_assert_msg(ok, "after the collector came back: %zu of %u traces arrived, spool pending "
		      "%llu, spooled %llu, spool_sent %llu, acked %llu, collector holds %zu slices",
		      sp_arrived(&e), SP_K, (unsigned long long)a.spool->st.records_pending,
		      (unsigned long long)a.st.slices_spooled, (unsigned long long)a.st.spool_sent,
		      (unsigned long long)a.st.slices_acked, tc_nslices(&e.c));
	RP_UNTIL(ok, &a, 0.5, 0); /* anything sent twice would show now */
	lines = sp_log_lines(logpath, saved, "spool", "error");
	fprintf(stderr, "report_spool enospc: %llu failed appends while filling, %llu in %.1f s of "
		"waiting; %llu slices spooled, %llu sent from the spool, %llu sent directly\n",
		(unsigned long long)e0, (unsigned long long)(e1 - e0), (double)(t1 - t0) / 1e9,
		(unsigned long long)a.st.slices_spooled, (unsigned long long)a.st.spool_sent,
		(unsigned long long)a.st.slices_acked);
	sp_check(&e, 0);
	ck_assert_uint_eq(a.st.spool_sent, a.st.slices_spooled);
	ck_assert_msg(lines <= 2 + (ag_now_ns() - tstart) / 10000000000ull,
		      "%u error lines about the spool in %.1f s (one per 10 s wanted)", lines,
		      (double)(ag_now_ns() - tstart) / 1e9);
	sp_teardown(&e, &a);
}
END_TEST

/*
 * The disk fills, then space returns while the collector is still down: the
 * slices that waited (backing off) are spooled, and every triggered trace
 * reaches the collector exactly once when it returns.
 */
START_TEST(test_spool_space_returns)
{
	static struct sp_env e;
	static struct rt_agent a;
	char dir[256], err[256];
	int ok, tmpfs;

	rp_tempdir(dir, sizeof dir, "room");
	tmpfs = sp_small_disk(dir);
	sp_setup_dir(&e, "room", dir);
	rp_open(&a, &e.cfg);
	sp_limit_disk(tmpfs);
	sp_fill_disk(&e, &a);
	sp_grow_disk(dir, tmpfs);
	RP_UNTIL(ok, &a, 30, rp_quiet(&a) && a.spool->st.records_pending == a.st.slices_spooled);
	ck_assert_msg(ok, "after space returned: %llu buffers still queued, %llu slices spooled",
		      (unsigned long long)a.rep.queued_buffers,
		      (unsigned long long)a.st.slices_spooled);
	sp_patient(&a);
	ck_assert_msg(tc_start(&e.c, NULL, err, sizeof err) == 0, "restart collector: %s", err);
	sp_drain(&e, &a, a.st.slices_spooled);
	sp_check(&e, 0);
	ck_assert_uint_eq(sp_arrived(&e), SP_K);
	ck_assert_uint_eq(a.st.spool_sent, a.st.slices_spooled);
	sp_teardown(&e, &a);
}
END_TEST

/*
 * The collector returns but the spool's cursor cannot be written (a file size
 * limit below the cursor's second slot: the first consume fails with EFBIG).
 * The slice the collector acknowledged must not be sent again and again: the
 * spool holds back, counts the error, retries the cursor with back-off, and
 * once the cursor moves every slice arrives exactly once.
 */
START_TEST(test_spool_cursor_stuck)
{
	static struct sp_env e;
	static struct rt_agent a;
	char err[256];
	size_t got;
	uint64_t cursor_errors, pending;
	int ok;

	sp_setup(&e, "curs");
	rp_open(&a, &e.cfg);
	sp_spool_traces(&e, &a, 0, SP_K);
	signal(SIGXFSZ, SIG_IGN);
	sp_fsize_limit(256);
	sp_patient(&a);
	ck_assert_msg(tc_start(&e.c, NULL, err, sizeof err) == 0, "restart collector: %s", err);
	RP_UNTIL(ok, &a, 20, tc_nslices(&e.c) >= 1);
	RP_UNTIL(ok, &a, 1.5, 0);
	got = tc_nslices(&e.c);
	pending = a.spool->st.records_pending;
	sp_fsize_limit(RLIM_INFINITY);
	ck_assert_msg(got == 1, "the slice whose cursor could not be written reached the collector "
		      "%zu times (spool_sent %llu)", got, (unsigned long long)a.st.spool_sent);
	ck_assert_uint_eq(pending, SP_K);
	cursor_errors = sp_status_u64(&a, "spool_cursor_errors");
	ck_assert_msg(cursor_errors >= 1 && cursor_errors <= 10,
		      "spool_cursor_errors %llu after 1.5 s (back-off wanted)",
		      (unsigned long long)cursor_errors);
	sp_drain(&e, &a, SP_K);
	sp_check(&e, 0);
	ck_assert_uint_eq(tc_nslices(&e.c), SP_K);
	ck_assert_uint_eq(a.st.spool_sent, SP_K);
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
	t = tcase_create("enospc");
	tcase_set_timeout(t, 100);
	tcase_add_test(t, test_spool_enospc);
	suite_add_tcase(s, t);
	t = tcase_create("space_returns");
	tcase_set_timeout(t, 100);
	tcase_add_test(t, test_spool_space_returns);
	suite_add_tcase(s, t);
	t = tcase_create("cursor_stuck");
	tcase_set_timeout(t, 100);
	tcase_add_test(t, test_spool_cursor_stuck);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return rp_run_suite(spool_suite());
}
