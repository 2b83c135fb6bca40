/*
 * tests/e2e/test_truth.c — the central promise end to end: "a trace called
 * coherent holds every span of every host the request touched", checked against
 * ground truth.
 *
 * How it works: cluster.c starts the real coordinator and three real agents
 * (three hosts); `retrace-topo run` starts the five services of shop.topo on
 * them, each writing a truth line per request; `retrace-topo load` drives 200
 * requests/s for 3 s with 3 % edge cases (the entry fires trigger 1) on top of
 * the topology's injected failures (trigger 2, ~2 % of requests). Then the test
 * waits — polling `retrace status --json`, never sleeping a fixed time — until
 * the system is quiet: no trigger left in any agent's queue or outbox, no slice
 * in flight or queued, no group open at the coordinator, and a stored row for
 * every trace the load saw fire. It stops the services (which flushes the
 * truth), runs retrace-truth on the store and asserts that no trace is falsely
 * coherent and that every triggered trace was captured coherently.
 *
 * So that the test can fail, two more checks run: the checker itself must call
 * a trace false coherent once the truth is tampered with (a host the store never
 * heard of, raw bytes that were never written), and a run whose services send
 * no response context (so triggers at the entry cannot reach the callees) must
 * fail the same assertions.
 *
 * Every wait is bounded and fails with the figures it saw. Nothing here depends
 * on timing beyond those generous bounds.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "common/suite.h"

#define HOSTS 3
#define BUFFERS 8192        /* 8 KiB each: 64 MiB per host, seconds of horizon */
#define RATE "200"
#define DURATION "3"
#define EDGE_PCT "3"
#define READY_WAIT_S 90.0   /* services up (ASan start-up on a loaded machine) */
#define QUIET_WAIT_S 120.0  /* every triggered trace closed and stored */
#define STOP_WAIT_S 60.0

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Whole output of a shell command (stdout), and its exit status. */
static char *run_cmd(const char *cmd, int *status)
{
	FILE *p = popen(cmd, "r");
	char *out = NULL;
	size_t cap = 0, len = 0;
	int st;
	if (!p)
		return NULL;
	for (;;) {
		size_t n;
		if (len + 4096 + 1 > cap) {
			char *q = realloc(out, cap = cap ? cap * 2 : 8192);
			if (!q)
				break;
			out = q;
		}
		n = fread(out + len, 1, cap - len - 1, p);
		if (n == 0)
			break;
		len += n;
	}
	if (out)
		out[len] = '\0';
	st = pclose(p);
	if (status)
		*status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return out;
}

/* "key=NUMBER" in a key=value line; -1 if absent. */
static long long kv(const char *text, const char *key)
{
	char pat[64];
	const char *p = text;
	size_t n;
	if (!text)
		return -1;
	n = (size_t)snprintf(pat, sizeof pat, "%s=", key);
	while ((p = strstr(p, pat))) {
		if (p == text || p[-1] == ' ')
			return strtoll(p + n, NULL, 10);
		p += n;
	}
	return -1;
}

/* A figure of a `retrace status --json` document; -1 if absent. */
static long long fig(const char *json, const char *section, const char *key)
{
	char pat[128];
	const char *p;
	if (!json)
		return -1;
	snprintf(pat, sizeof pat, "\"%s\":{", section);
	if (!(p = strstr(json, pat)))
		return -1;
	snprintf(pat, sizeof pat, "\"%s\":", key);
	if (!(p = strstr(p, pat)))
		return -1;
	return strtoll(p + strlen(pat), NULL, 10);
}

static char *status_json(const char *target)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s status --json %s 2>/dev/null", CLI_BIN, target);
	return run_cmd(cmd, NULL);
}

struct topo_run {
	struct cluster c;
	char run_dir[256], truth_dir[256], log_dir[256];
	pid_t run;
};

/* `retrace-topo run` for shop.topo on the cluster's three pools. */
static int start_services(struct topo_run *t, int broken)
{
	char pa[128], pb[128], pc[128], log[300], ready[300];
	char *argv[24];
	int n = 0;
	double end;
	snprintf(t->run_dir, sizeof t->run_dir, "%s/run", t->c.dir);
	snprintf(t->truth_dir, sizeof t->truth_dir, "%s/truth", t->c.dir);
	snprintf(t->log_dir, sizeof t->log_dir, "%s/logs", t->c.dir);
	snprintf(pa, sizeof pa, "a=%s", t->c.hosts[0].pool);
	snprintf(pb, sizeof pb, "b=%s", t->c.hosts[1].pool);
	snprintf(pc, sizeof pc, "c=%s", t->c.hosts[2].pool);
	snprintf(log, sizeof log, "%s/run.log", t->c.dir);
	argv[n++] = TOPO_BIN;
	argv[n++] = "run";
	argv[n++] = "--topology";
	argv[n++] = SHOP_TOPO;
	argv[n++] = "--run-dir";
	argv[n++] = t->run_dir;
	argv[n++] = "--truth-dir";
	argv[n++] = t->truth_dir;
	argv[n++] = "--log-dir";
	argv[n++] = t->log_dir;
	argv[n++] = "--wait-s";
	argv[n++] = "60";
	argv[n++] = "-P";
	argv[n++] = pa;
	argv[n++] = "-P";
	argv[n++] = pb;
	argv[n++] = "-P";
	argv[n++] = pc;
	if (broken)
		argv[n++] = "--break-response-context";
	argv[n] = NULL;
	t->run = fork();
	if (t->run == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		/* SIGTERM, not SIGKILL: run then stops the services it started. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (fd >= 0) {
			dup2(fd, 2);
			close(fd);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	if (t->run < 0)
		return -1;
	snprintf(ready, sizeof ready, "%s/ready", t->run_dir);
	end = mono_s() + READY_WAIT_S;
	while (mono_s() < end) {
		if (access(ready, F_OK) == 0)
			return 0;
		if (waitpid(t->run, NULL, WNOHANG) == t->run) {
			t->run = 0;
			return -1;
		}
		nap_ms(50);
	}
	return -1;
}

/* SIGTERM to run, which stops and reaps every service; 0 if all stopped cleanly. */
static int stop_services(struct topo_run *t)
{
	double end = mono_s() + STOP_WAIT_S;
	int st;
	if (t->run <= 0)
		return -1;
	kill(t->run, SIGTERM);
	while (mono_s() < end) {
		if (waitpid(t->run, &st, WNOHANG) == t->run) {
			t->run = 0;
			return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
		}
		nap_ms(20);
	}
	kill(t->run, SIGKILL);
	waitpid(t->run, NULL, 0);
	t->run = 0;
	return -1;
}

static void print_file(const char *path)
{
	char cmd[600];
	snprintf(cmd, sizeof cmd, "cat %s >&2 2>/dev/null", path); /* may be a glob */
	if (system(cmd) != 0)
		fprintf(stderr, "(no %s)\n", path);
}

/*
 * Quiet: every agent has no trigger queued or waiting for the coordinator, no
 * slice in flight and nothing queued to report; the coordinator has no group
 * open and at least `rows` traces stored; and the coordinator still says so
 * after the agents were read (no group opened in between). *why says what is
 * not quiet yet.
 */
static int quiet(struct topo_run *t, long long rows, char *why, size_t whyn)
{
	char target[128], *cj, *aj;
	long long opened, in_flight, stored;
	int h, ok = 1;
	snprintf(target, sizeof target, "--coordinator %s", t->c.coord_url);
	cj = status_json(target);
	opened = fig(cj, "traversal", "groups_opened");
	in_flight = fig(cj, "traversal", "groups_in_flight");
	stored = fig(cj, "store", "traces");
	free(cj);
	if (in_flight != 0 || stored < rows) {
		snprintf(why, whyn, "coordinator: groups_in_flight=%lld store.traces=%lld (want 0 and "
			 ">= %lld)", in_flight, stored, rows);
		return 0;
	}
	for (h = 0; h < t->c.nhosts && ok; h++) {
		long long td, tw, sf, qb;
		snprintf(target, sizeof target, "--pool %s", t->c.hosts[h].pool);
		aj = status_json(target);
		td = fig(aj, "queues", "trigger_depth");
		tw = fig(aj, "reporting", "coordinator_triggers_waiting");
		sf = fig(aj, "reporting", "slices_in_flight");
		qb = fig(aj, "reporting", "queued_buffers");
		free(aj);
		if (td != 0 || tw != 0 || sf != 0 || qb != 0) {
			snprintf(why, whyn, "agent %d: trigger_depth=%lld coordinator_triggers_waiting=%lld "
				 "slices_in_flight=%lld queued_buffers=%lld", h + 1, td, tw, sf, qb);
			ok = 0;
		}
	}
	if (!ok)
		return 0;
	snprintf(target, sizeof target, "--coordinator %s", t->c.coord_url);
	cj = status_json(target);
	ok = fig(cj, "traversal", "groups_in_flight") == 0 &&
	     fig(cj, "traversal", "groups_opened") == opened;
	free(cj);
	if (!ok)
		snprintf(why, whyn, "coordinator: a group opened while the agents were read");
	return ok;
}

/* The evidence for a failure: the coordinator's figures and each agent's
 * traversal-related ones, while the daemons still run. */
static void print_figures(struct topo_run *t)
{
	char cmd[512], *out;
	int h;
	snprintf(cmd, sizeof cmd, "%s status --coordinator %s 2>&1", CLI_BIN, t->c.coord_url);
	out = run_cmd(cmd, NULL);
	fprintf(stderr, "--- coordinator status\n%s", out ? out : "?\n");
	free(out);
	for (h = 0; h < t->c.nhosts; h++) {
		snprintf(cmd, sizeof cmd,
			 "%s status --pool %s 2>&1 | sed -n '/^queues:/,/^malformed:/p;/^reporting:/,$p'",
			 CLI_BIN, t->c.hosts[h].pool);
		out = run_cmd(cmd, NULL);
		fprintf(stderr, "--- agent %d status\n%s", h + 1, out ? out : "?\n");
		free(out);
	}
}

struct outcome {
	char *load;         /* the load's summary line */
	int load_status;    /* its exit status (a sanitizer finding makes it non-zero) */
	char *check;        /* the checker's report */
	int check_status;
	int quiet;          /* the system became quiet within the bound */
	char why[512];      /* what was not quiet */
	int stopped;        /* services stopped cleanly (truth flushed) */
};

/* The whole scenario; everything started is stopped before returning. */
static int scenario(struct topo_run *t, int broken, struct outcome *o)
{
	char cmd[2048], target[128];
	double end;
	long long triggered;
	memset(o, 0, sizeof *o);
	if (cl_start(&t->c, HOSTS, BUFFERS) != 0) {
		fprintf(stderr, "cannot start the coordinator and %d agents\n", HOSTS);
		return -1;
	}
	/* Agents register at start; a trigger to an unknown agent would fail. */
	snprintf(target, sizeof target, "--coordinator %s", t->c.coord_url);
	end = mono_s() + READY_WAIT_S;
	for (;;) {
		char *j = status_json(target);
		long long known = fig(j, "agents", "known");
		free(j);
		if (known >= HOSTS)
			break;
		if (mono_s() > end) {
			fprintf(stderr, "the coordinator knows %lld of %d agents after %.0f s\n", known,
				HOSTS, READY_WAIT_S);
			return -1;
		}
		nap_ms(50);
	}
	if (start_services(t, broken) != 0) {
		char log[300];
		fprintf(stderr, "the shop.topo services did not come up within %.0f s; run.log:\n",
			READY_WAIT_S);
		snprintf(log, sizeof log, "%s/run.log", t->c.dir);
		print_file(log);
		snprintf(log, sizeof log, "%s/*.log", t->log_dir);
		print_file(log);
		stop_services(t);
		return -1;
	}

	snprintf(cmd, sizeof cmd,
		 "%s load --topology %s --run-dir %s --rate %s --duration %s --edge-pct %s "
		 "--timeout-ms 30000 2>%s/load.log",
		 TOPO_BIN, SHOP_TOPO, t->run_dir, RATE, DURATION, EDGE_PCT, t->c.dir);
	o->load = run_cmd(cmd, &o->load_status);
	fprintf(stderr, "%s", o->load ? o->load : "(no load output)\n");
	triggered = kv(o->load, "triggered");

	/* Quiet, or the bound passes (then the checker still runs, to show why). */
	end = mono_s() + QUIET_WAIT_S;
	while (!(o->quiet = quiet(t, triggered, o->why, sizeof o->why)) && mono_s() < end)
		nap_ms(100);
	if (!o->quiet) {
		char *j = status_json(target);
		fprintf(stderr, "not quiet after %.0f s: %s\ncoordinator status: %s\n", QUIET_WAIT_S,
			o->why, j ? j : "?");
		free(j);
	}
	o->stopped = stop_services(t) == 0;
	if (!o->stopped) {
		char log[300];
		snprintf(log, sizeof log, "%s/run.log", t->c.dir);
		print_file(log);
	}
	snprintf(cmd, sizeof cmd, "%s --store %s --truth %s --require-all --list 10 2>&1",
		 TRUTH_BIN, t->c.store, t->truth_dir);
	o->check = run_cmd(cmd, &o->check_status);
	fprintf(stderr, "%s", o->check ? o->check : "(no checker output)\n");
	if (o->check_status != 0 || !o->quiet)
		print_figures(t);
	return 0;
}

static void finish(struct topo_run *t, int failed)
{
	if (failed)
		setenv("RETRACE_KEEP_TEST_DIR", "1", 1); /* cl_stop keeps it and says where */
	cl_stop(&t->c);
}

/* A copy of the truth in dir, its frontend.truth edited by sed_expr and/or with
 * extra_line appended; 0 on success. */
static int tampered_copy(const struct topo_run *t, const char *dir, const char *sed_expr,
			 const char *extra_line)
{
	char cmd[2048];
	int rc;
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", dir, t->truth_dir, dir);
	if (system(cmd) != 0)
		return -1;
	if (sed_expr) {
		snprintf(cmd, sizeof cmd, "sed -i '%s' '%s/frontend.truth'", sed_expr, dir);
		if ((rc = system(cmd)) != 0)
			return -1;
	}
	if (extra_line) {
		char path[400];
		FILE *f;
		snprintf(path, sizeof path, "%s/frontend.truth", dir);
		if (!(f = fopen(path, "a")))
			return -1;
		fputs(extra_line, f);
		if (fclose(f) != 0)
			return -1;
	}
	return 0;
}

/* The first trace the truth says the entry triggered (trigger=1), as 32 hex. */
static int first_edge_trace(const struct topo_run *t, char out[33])
{
	char cmd[600], *o;
	snprintf(cmd, sizeof cmd, "grep -h ' trigger=1 ' '%s/frontend.truth' | head -1 | cut -c1-32",
		 t->truth_dir);
	o = run_cmd(cmd, NULL);
	if (!o || strlen(o) < 32) {
		free(o);
		return -1;
	}
	memcpy(out, o, 32);
	out[32] = '\0';
	free(o);
	return 0;
}

START_TEST(shop_triggered_traces_captured_coherently)
{
	static struct topo_run t;
	struct outcome o;
	long long triggered, false_coh, captured, truth_triggered;
	char tdir[300], cmd[1024], line[512], trace[33], *out;
	int failed, st_extra = -1, st_bytes = -1;
	long long fc_extra = -1, fc_bytes = -1;

	memset(&t, 0, sizeof t);
	ck_assert_msg(scenario(&t, 0, &o) == 0, "the cluster or the services did not start");
	triggered = kv(o.load, "triggered");
	truth_triggered = kv(o.check, "triggered");
	false_coh = kv(o.check, "false_coherent");
	captured = kv(o.check, "captured_coherent");

	/* The checker must see what is wrong when the truth says more than the store
	 * holds: a host that never reported, and raw bytes that were never written. */
	if (o.check && first_edge_trace(&t, trace) == 0) {
		snprintf(tdir, sizeof tdir, "%s/truth-extra-host", t.c.dir);
		snprintf(line, sizeof line,
			 "%s ghost z agent=9 node=77 parent=0000000000000000 spans=0123456789abcdef "
			 "records=1 bytes=64 trigger=0 status=ok\n", trace);
		if (tampered_copy(&t, tdir, NULL, line) == 0) {
			snprintf(cmd, sizeof cmd, "%s --store %s --truth %s 2>&1", TRUTH_BIN, t.c.store,
				 tdir);
			out = run_cmd(cmd, &st_extra);
			fc_extra = kv(out, "false_coherent");
			free(out);
		}
		snprintf(tdir, sizeof tdir, "%s/truth-bytes", t.c.dir);
		/* bytes=N becomes bytes=N1: every record of that call changes length. */
		snprintf(cmd, sizeof cmd, "/^%s /s/ bytes=\\([0-9]*\\) / bytes=\\11 /", trace);
		if (tampered_copy(&t, tdir, cmd, NULL) == 0) {
			snprintf(cmd, sizeof cmd, "%s --store %s --truth %s 2>&1", TRUTH_BIN, t.c.store,
				 tdir);
			out = run_cmd(cmd, &st_bytes);
			fc_bytes = kv(out, "false_coherent");
			free(out);
		}
	}

	failed = !o.quiet || !o.stopped || o.load_status != 0 || false_coh != 0 ||
		 captured != truth_triggered || o.check_status != 0 || truth_triggered < 5 ||
		 triggered != truth_triggered;
	finish(&t, failed);

	ck_assert_msg(o.load && kv(o.load, "sent") >= 500,
		      "the load did not send its ~600 requests: %s", o.load ? o.load : "no output");
	ck_assert_msg(o.load_status == 0, "retrace-topo load exited %d (see load.log)",
		      o.load_status);
	ck_assert_msg(o.quiet, "the system did not settle within %.0f s: %s", QUIET_WAIT_S, o.why);
	ck_assert_msg(o.stopped, "the services did not stop cleanly (truth may be incomplete)");
	ck_assert_msg(o.check, "retrace-truth did not run");
	ck_assert_msg(truth_triggered >= 5, "too few triggered traces to mean anything: %lld",
		      truth_triggered);
	ck_assert_msg(triggered == truth_triggered,
		      "the load saw %lld traces fire, the truth says %lld", triggered, truth_triggered);
	ck_assert_msg(false_coh == 0,
		      "%lld trace(s) stored as coherent are missing data (see the report above)",
		      false_coh);
	ck_assert_msg(captured == truth_triggered,
		      "%lld of %lld triggered traces captured coherently (see the report above)",
		      captured, truth_triggered);
	ck_assert_int_eq(o.check_status, 0);
	ck_assert_msg(fc_extra == 1 && st_extra == 1,
		      "the checker missed a host the store never heard of (false_coherent=%lld, "
		      "exit %d)", fc_extra, st_extra);
	ck_assert_msg(fc_bytes == 1 && st_bytes == 1,
		      "the checker missed raw bytes that differ (false_coherent=%lld, exit %d)",
		      fc_bytes, st_bytes);
	free(o.load);
	free(o.check);
}
END_TEST

START_TEST(broken_response_context_fails_the_check)
{
	static struct topo_run t;
	struct outcome o;
	long long truth_triggered, false_coh, captured;
	int would_pass;

	memset(&t, 0, sizeof t);
	ck_assert_msg(scenario(&t, 1, &o) == 0, "the cluster or the services did not start");
	truth_triggered = kv(o.check, "triggered");
	false_coh = kv(o.check, "false_coherent");
	captured = kv(o.check, "captured_coherent");
	/* Without the way back a trigger at the entry cannot reach its callees, so
	 * the assertions of the test above must fail: either the coordinator calls
	 * such traces coherent (false coherent) or it sees they are not. */
	would_pass = false_coh == 0 && captured == truth_triggered && o.check_status == 0;
	finish(&t, would_pass || !o.quiet);
	ck_assert_msg(o.quiet, "the system did not settle within %.0f s: %s", QUIET_WAIT_S, o.why);
	ck_assert_msg(truth_triggered >= 5, "too few triggered traces to mean anything: %lld",
		      truth_triggered);
	ck_assert_msg(!would_pass,
		      "with no response context every triggered trace still looks captured: "
		      "the end-to-end check cannot fail");
	ck_assert_msg(o.check_status == 1, "retrace-truth --require-all exited %d, want 1",
		      o.check_status);
	free(o.load);
	free(o.check);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("e2e_truth");
	TCase *tc = tcase_create("shop_triggered_traces_captured_coherently");
	tcase_set_timeout(tc, 280);
	tcase_add_test(tc, shop_triggered_traces_captured_coherently);
	suite_add_tcase(s, tc);
	tc = tcase_create("broken_response_context_fails_the_check");
	tcase_set_timeout(tc, 280);
	tcase_add_test(tc, broken_response_context_fails_the_check);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(suite());
}
