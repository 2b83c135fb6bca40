/*
 * The real binaries: retrace-agent (flags, config file, exit codes, signals,
 * ownership of the pool, restart after a crash) and `retrace status` against
 * it. Paths come from the build (AGENT_BIN, CLI_BIN).
 *
 * Every agent gets a unique pool, --listen on port 0 and a ready file; the test
 * waits for the ready file (or the agent's early exit) rather than sleeping.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agtest.h"

#ifndef AGENT_BIN
#error "AGENT_BIN must name the retrace-agent binary"
#endif
#ifndef CLI_BIN
#error "CLI_BIN must name the retrace binary"
#endif

struct run {
	int status;       /* exit code, or 128 + signal, or -1 on timeout */
	char out[65536];
	char err[65536];
};

/* Run argv to completion (at most `seconds`), capturing stdout and stderr. */
static void run(struct run *r, char *const argv[], double seconds)
{
	int po[2], pe[2], st;
	size_t no = 0, ne = 0;
	pid_t pid;
	uint64_t end = ag_deadline(seconds);
	memset(r, 0, sizeof *r);
	ck_assert_int_eq(pipe(po), 0);
	ck_assert_int_eq(pipe(pe), 0);
	pid = ag_fork();
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	for (;;) {
		struct pollfd p[2] = { { po[0], POLLIN, 0 }, { pe[0], POLLIN, 0 } };
		int open = 0, k;
		for (k = 0; k < 2; k++)
			if (p[k].fd >= 0)
				open++;
		if (!open)
			break;
		if (ag_now_ns() > end)
			break;
		if (poll(p, 2, 100) <= 0)
			continue;
		if (p[0].revents) {
			ssize_t n = read(po[0], r->out + no, sizeof r->out - 1 - no);
			if (n <= 0) {
				close(po[0]);
				po[0] = -1;
			} else {
				no += (size_t)n;
			}
		}
		if (p[1].revents) {
			ssize_t n = read(pe[0], r->err + ne, sizeof r->err - 1 - ne);
			if (n <= 0) {
				close(pe[0]);
				pe[0] = -1;
			} else {
				ne += (size_t)n;
			}
		}
		if (po[0] < 0 && pe[0] < 0)
			break;
	}
	if (po[0] >= 0)
		close(po[0]);
	if (pe[0] >= 0)
		close(pe[0]);
	st = ag_wait_exit(pid, end > ag_now_ns() ? (double)(end - ag_now_ns()) / 1e9 + 1 : 1);
	if (st == -1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		ag_untrack_kid(pid);
		r->status = -1;
	} else {
		r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
}

#define RUN(r, secs, ...) run((r), (char *const[]){ __VA_ARGS__, NULL }, (secs))

/* A long-running agent; stdout and stderr go to a file we can show on failure. */
struct daemon {
	pid_t pid;
	char pool[64];
	char ready[256];
	char log[256];
	char status_sock[256];
};

static void daemon_paths(struct daemon *d, const char *tag)
{
	static unsigned n;
	memset(d, 0, sizeof *d);
	ag_pool_name(d->pool, sizeof d->pool, tag);
	snprintf(d->ready, sizeof d->ready, "/tmp/%.63s.ready", d->pool + 1);
	snprintf(d->log, sizeof d->log, "/tmp/%.63s.%u.log", d->pool + 1, n++);
	snprintf(d->status_sock, sizeof d->status_sock, "/tmp/retrace-%.63s.status", d->pool + 1);
	ag_track_file(d->ready);
	ag_track_file(d->log);
	ag_track_file(d->status_sock);
	unlink(d->ready);
}

static const char *slurp(const char *path)
{
	static char buf[16384];
	FILE *f = fopen(path, "r");
	size_t n = 0;
	buf[0] = 0;
	if (f) {
		n = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
	}
	buf[n] = 0;
	return buf;
}

static void daemon_start(struct daemon *d, char *const argv[])
{
	int fd;
	unlink(d->ready);
	d->pid = ag_fork();
	if (d->pid == 0) {
		fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(argv[0], argv);
		_exit(127);
	}
}

/* Wait for the ready file; fail with the agent's log if it exits first. */
static void daemon_wait_ready(struct daemon *d)
{
	uint64_t end = ag_deadline(20);
	while (access(d->ready, F_OK) != 0) {
		int st;
		pid_t r = waitpid(d->pid, &st, WNOHANG);
		if (r == d->pid) {
			ag_untrack_kid(d->pid);
			ck_abort_msg("agent exited (%s %d) before it was ready: %s",
				     WIFEXITED(st) ? "status" : "signal",
				     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), slurp(d->log));
		}
		ck_assert_msg(ag_now_ns() < end, "agent not ready within 20 s: %s", slurp(d->log));
		ag_nap_us(5000);
	}
}

/* SIGTERM; the exit status. */
static int daemon_stop(struct daemon *d)
{
	int st;
	kill(d->pid, SIGTERM);
	st = ag_wait_exit(d->pid, 20);
	ck_assert_msg(st != -1, "agent ignored SIGTERM for 20 s: %s", slurp(d->log));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The JSON object of one section of the status, e.g. "buffers". */
static void json_section(const char *json, const char *name, char *out, size_t n)
{
	char key[64];
	const char *s, *e;
	snprintf(key, sizeof key, "\"%s\":{", name);
	s = strstr(json, key);
	ck_assert_msg(s != NULL, "no %s section in %s", name, json);
	e = strchr(s, '}');
	ck_assert_ptr_nonnull(e);
	snprintf(out, n, "%.*s", (int)(e - s + 1), s);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	ag_track_file(path);
}

/* ------------------------------------------------------------- flags ---- */

START_TEST(test_help)
{
	struct run r;
	RUN(&r, 20, AGENT_BIN, "--help");
	ck_assert_msg(r.status == 0, "--help exited %d: %s", r.status, r.err);
	ck_assert_ptr_nonnull(strstr(r.out, "--pool"));
	ck_assert_ptr_nonnull(strstr(r.out, "--evict-threshold"));
	ck_assert_ptr_nonnull(strstr(r.out, "--config"));
	RUN(&r, 20, AGENT_BIN, "-h");
	ck_assert_int_eq(r.status, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "--pool"));
}
END_TEST

START_TEST(test_bad_flags)
{
	struct run r;
	RUN(&r, 20, AGENT_BIN, "--no-such-flag");
	ck_assert_msg(r.status == 2, "unknown flag exited %d", r.status);
	ck_assert_msg(strstr(r.err, "no-such-flag") != NULL, "stderr: %s", r.err);
	ck_assert_ptr_nonnull(strstr(r.err, "--help"));

	RUN(&r, 20, AGENT_BIN, "--evict-threshold", "2");
	ck_assert_msg(r.status == 2, "--evict-threshold 2 exited %d", r.status);
	ck_assert_msg(strstr(r.err, "evict-threshold") != NULL && strstr(r.err, "'2'") != NULL,
		      "stderr: %s", r.err);
	RUN(&r, 20, AGENT_BIN, "--evict-threshold", "0");
	ck_assert_int_eq(r.status, 2);
	RUN(&r, 20, AGENT_BIN, "--evict-threshold", "150%");
	ck_assert_int_eq(r.status, 2);
	RUN(&r, 20, AGENT_BIN, "--buffers", "12x");
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "buffers"));
	RUN(&r, 20, AGENT_BIN, "--buffers", "-5");
	ck_assert_int_eq(r.status, 2);
	RUN(&r, 20, AGENT_BIN, "--pool", "noslash");
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "pool"));
	RUN(&r, 20, AGENT_BIN, "--agent-id", "0");
	ck_assert_int_eq(r.status, 2);
	RUN(&r, 20, AGENT_BIN, "--pool", "/x", "stray");
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "stray"));
	RUN(&r, 20, AGENT_BIN, "--log-level", "loud");
	ck_assert_int_eq(r.status, 2);
	RUN(&r, 20, AGENT_BIN, "--config", "/nonexistent/agent.conf");
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "/nonexistent/agent.conf"));
}
END_TEST

START_TEST(test_config_file_errors)
{
	struct run r;
	char path[256], want[300];
	snprintf(path, sizeof path, "/tmp/rt-test-ag%d-%d-bad.conf", (int)ag_runner_pid, (int)getpid());

	write_file(path, "# retrace-agent\n\npool = /rt-x\nno-such-key = 1\n");
	RUN(&r, 20, AGENT_BIN, "--config", path);
	ck_assert_int_eq(r.status, 2);
	snprintf(want, sizeof want, "%s:4:", path);
	ck_assert_msg(strstr(r.err, want) != NULL && strstr(r.err, "no-such-key") != NULL,
		      "stderr: %s", r.err);

	write_file(path, "buffers = 64\nevict-threshold = lots\n");
	RUN(&r, 20, AGENT_BIN, "--config", path);
	ck_assert_int_eq(r.status, 2);
	snprintf(want, sizeof want, "%s:2:", path);
	ck_assert_msg(strstr(r.err, want) != NULL && strstr(r.err, "evict-threshold") != NULL,
		      "stderr: %s", r.err);

	write_file(path, "   # indented comment\nbuffers 64\n");
	RUN(&r, 20, AGENT_BIN, "-c", path);
	ck_assert_int_eq(r.status, 2);
	snprintf(want, sizeof want, "%s:2:", path);
	ck_assert_msg(strstr(r.err, want) != NULL, "stderr: %s", r.err);

	write_file(path, "unlink = maybe\n");
	RUN(&r, 20, AGENT_BIN, "--config", path);
	ck_assert_int_eq(r.status, 2);
	snprintf(want, sizeof want, "%s:1:", path);
	ck_assert_msg(strstr(r.err, want) != NULL, "stderr: %s", r.err);
	unlink(path);
}
END_TEST

/* A valid config file is used; a flag given as well wins over the file. */
START_TEST(test_config_file_used)
{
	struct daemon d;
	struct run r;
	char path[256], text[1024], sec[2048];
	daemon_paths(&d, "conf");
	snprintf(path, sizeof path, "/tmp/%.63s.conf", d.pool + 1);
	snprintf(text, sizeof text,
		 "# test config\npool = %s\nbuffers = 128\nbuffer-size = 4096\n"
		 "evict-threshold = 75%%\nlisten = tcp://127.0.0.1:0\nunlink = true\n"
		 "ready-file = %s\nlog-level = warn\n", d.pool, d.ready);
	write_file(path, text);

	daemon_start(&d, (char *const[]){ AGENT_BIN, "--config", path, NULL });
	daemon_wait_ready(&d);
	ck_assert(ag_shm_exists(d.pool));
	RUN(&r, 20, CLI_BIN, "status", "--pool", d.pool, "--json");
	ck_assert_msg(r.status == 0, "status exited %d: %s", r.status, r.err);
	json_section(r.out, "buffers", sec, sizeof sec);
	ck_assert_msg(strstr(sec, "\"total\":128") != NULL, "buffers section: %s", sec);
	ck_assert_msg(strstr(sec, "\"size\":4096") != NULL, "buffers section: %s", sec);
	ck_assert_msg(strstr(sec, "\"evict_above\":96") != NULL, "buffers section: %s", sec);
	ck_assert_int_eq(daemon_stop(&d), 0);
	ck_assert(!ag_shm_exists(d.pool));

	/* The command line overrides the file. */
	daemon_start(&d, (char *const[]){ AGENT_BIN, "--config", path, "--buffers", "96", NULL });
	daemon_wait_ready(&d);
	RUN(&r, 20, CLI_BIN, "status", "--pool", d.pool, "--json");
	ck_assert_int_eq(r.status, 0);
	json_section(r.out, "buffers", sec, sizeof sec);
	ck_assert_msg(strstr(sec, "\"total\":96") != NULL, "buffers section: %s", sec);
	ck_assert_int_eq(daemon_stop(&d), 0);
	ck_assert(!ag_shm_exists(d.pool));
	unlink(path);
}
END_TEST

/* -------------------------------------------------------- lifecycle ---- */

START_TEST(test_lifecycle)
{
	struct daemon d;
	struct run r;
	char sec[2048], nopool[96];
	daemon_paths(&d, "life");
	daemon_start(&d, (char *const[]){ AGENT_BIN, "--pool", d.pool, "--buffers", "128",
					  "--buffer-size", "4096", "--listen", "tcp://127.0.0.1:0",
					  "--unlink", "--ready-file", d.ready, NULL });
	daemon_wait_ready(&d);
	ck_assert(ag_shm_exists(d.pool));

	RUN(&r, 20, CLI_BIN, "status", "--pool", d.pool, "--json");
	ck_assert_msg(r.status == 0, "status --json exited %d: %s", r.status, r.err);
	json_section(r.out, "buffers", sec, sizeof sec);
	ck_assert_msg(strstr(sec, "\"total\":128") != NULL, "buffers section: %s", sec);
	ck_assert_msg(strstr(sec, "\"free\":128") != NULL, "buffers section: %s", sec);
	json_section(r.out, "agent", sec, sizeof sec);
	ck_assert_msg(strstr(sec, "\"took_over\":0") != NULL, "agent section: %s", sec);
	ck_assert_msg(strstr(sec, "\"generation\":1") != NULL, "agent section: %s", sec);
	{
		char pid[32];
		snprintf(pid, sizeof pid, "\"pid\":%d", (int)d.pid);
		ck_assert_msg(strstr(sec, pid) != NULL, "agent section: %s", sec);
	}
	ck_assert_msg(r.out[0] == '{' && strstr(r.out, "}}") != NULL, "not one JSON object: %s", r.out);

	RUN(&r, 20, CLI_BIN, "status", "--pool", d.pool, "--all");
	ck_assert_int_eq(r.status, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "buffers:"));
	ck_assert_ptr_nonnull(strstr(r.out, "traces:"));
	/* The default summary: the pool in human units, drops named or "nothing". */
	RUN(&r, 20, CLI_BIN, "status", "--pool", d.pool);
	ck_assert_int_eq(r.status, 0);
	ck_assert_msg(strstr(r.out, "pool       128 x 4.0 KiB = 512.0 KiB") != NULL, "summary: %s",
		      r.out);
	ck_assert_msg(strstr(r.out, "  dropped    ") != NULL, "summary: %s", r.out);
	ck_assert_msg(strstr(r.out, d.pool) != NULL, "summary: %s", r.out);

	/* A second agent on the same pool is refused and leaves it alone. */
	RUN(&r, 20, AGENT_BIN, "--pool", d.pool, "--buffers", "128", "--buffer-size", "4096",
	    "--listen", "tcp://127.0.0.1:0", "--unlink");
	ck_assert_msg(r.status == 3, "second agent exited %d: %s", r.status, r.err);
	ck_assert_msg(strstr(r.err, "owned by a running agent") != NULL, "stderr: %s", r.err);
	ck_assert(ag_shm_exists(d.pool));
	RUN(&r, 20, CLI_BIN, "status", "--pool", d.pool, "--json");
	ck_assert_int_eq(r.status, 0);

	/* No agent on a pool: a clear failure. */
	snprintf(nopool, sizeof nopool, "/rt-test-ag%d-none-%d", (int)ag_runner_pid, (int)getpid());
	RUN(&r, 20, CLI_BIN, "status", "--pool", nopool, "--timeout", "500");
	ck_assert_msg(r.status == 1, "status of a missing agent exited %d", r.status);
	ck_assert_msg(strstr(r.err, "no agent answers") != NULL, "stderr: %s", r.err);
	ck_assert_str_eq(r.out, "");

	/* SIGTERM: clean exit, and --unlink removes the pool. */
	ck_assert_int_eq(daemon_stop(&d), 0);
	ck_assert(!ag_shm_exists(d.pool));
	RUN(&r, 20, CLI_BIN, "status", "--pool", d.pool, "--timeout", "500");
	ck_assert_int_eq(r.status, 1);
}
END_TEST

START_TEST(test_kill_and_restart)
{
	struct daemon d;
	struct run r;
	char sec[2048];
	int st;
	daemon_paths(&d, "restart");
	daemon_start(&d, (char *const[]){ AGENT_BIN, "--pool", d.pool, "--buffers", "128",
					  "--buffer-size", "4096", "--listen", "tcp://127.0.0.1:0",
					  "--unlink", "--ready-file", d.ready, NULL });
	daemon_wait_ready(&d);
	kill(d.pid, SIGKILL);
	st = ag_wait_exit(d.pid, 20);
	ck_assert(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	ck_assert(ag_shm_exists(d.pool)); /* a crash leaves the pool for the next agent */

	/* Asked for another geometry: the pool's own wins on a takeover. */
	daemon_start(&d, (char *const[]){ AGENT_BIN, "--pool", d.pool, "--buffers", "64",
					  "--buffer-size", "8192", "--listen", "tcp://127.0.0.1:0",
					  "--unlink", "--ready-file", d.ready, NULL });
	daemon_wait_ready(&d);
	RUN(&r, 20, CLI_BIN, "status", "--pool", d.pool, "--json");
	ck_assert_msg(r.status == 0, "status after restart exited %d: %s (agent log: %s)", r.status,
		      r.err, slurp(d.log));
	json_section(r.out, "agent", sec, sizeof sec);
	ck_assert_msg(strstr(sec, "\"took_over\":1") != NULL, "agent section: %s", sec);
	ck_assert_msg(strstr(sec, "\"generation\":2") != NULL, "agent section: %s", sec);
	json_section(r.out, "buffers", sec, sizeof sec);
	ck_assert_msg(strstr(sec, "\"total\":128") != NULL && strstr(sec, "\"free\":128") != NULL &&
			      strstr(sec, "\"size\":4096") != NULL &&
			      strstr(sec, "\"evict_above\":102") != NULL,
		      "buffers section: %s", sec);
	ck_assert_int_eq(daemon_stop(&d), 0);
	ck_assert(!ag_shm_exists(d.pool));
}
END_TEST

/*
 * A restart that fails after taking the pool over must leave the pool alone.
 * main.c calls rt_agent_close() when the control endpoint cannot listen (and
 * rt_agent_open does when its later set-up fails); with --unlink that marks
 * the pool CLOSED and unlinks it: the data the crashed agent left, and every
 * live client's pool, are gone because a port was busy.
 */
START_TEST(test_failed_restart_keeps_pool)
{
	struct daemon d;
	struct run r;
	struct sockaddr_in sa;
	socklen_t len = sizeof sa;
	char url[64];
	int s, st;

	s = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(s, 0);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
	ck_assert_int_eq(listen(s, 1), 0);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)&sa, &len), 0);
	snprintf(url, sizeof url, "tcp://127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));

	daemon_paths(&d, "busy");
	daemon_start(&d, (char *const[]){ AGENT_BIN, "--pool", d.pool, "--buffers", "128",
					  "--buffer-size", "4096", "--listen", "tcp://127.0.0.1:0",
					  "--unlink", "--ready-file", d.ready, NULL });
	daemon_wait_ready(&d);
	kill(d.pid, SIGKILL);
	st = ag_wait_exit(d.pid, 20);
	ck_assert(st != -1 && WIFSIGNALED(st));
	ck_assert(ag_shm_exists(d.pool));

	/* The restart takes the pool over, then cannot listen: it must fail... */
	RUN(&r, 20, AGENT_BIN, "--pool", d.pool, "--listen", url, "--unlink");
	ck_assert_msg(r.status == 1, "restart on a busy port exited %d: %s", r.status, r.err);
	ck_assert_msg(strstr(r.err, url + 6) != NULL, "stderr: %s", r.err);
	/* ...and leave the pool for the next try. */
	ck_assert_msg(ag_shm_exists(d.pool),
		      "a restart that failed (busy port) removed the pool it had taken over");
	close(s);

	daemon_start(&d, (char *const[]){ AGENT_BIN, "--pool", d.pool, "--listen",
					  "tcp://127.0.0.1:0", "--unlink", "--ready-file", d.ready,
					  NULL });
	daemon_wait_ready(&d);
	RUN(&r, 20, CLI_BIN, "status", "--pool", d.pool, "--json");
	ck_assert_int_eq(r.status, 0);
	ck_assert_msg(strstr(r.out, "\"took_over\":1") != NULL, "status: %s", r.out);
	ck_assert_int_eq(daemon_stop(&d), 0);
	ck_assert(!ag_shm_exists(d.pool));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_daemon");
	TCase *tc = tcase_create("daemon");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_help);
	tcase_add_test(tc, test_bad_flags);
	tcase_add_test(tc, test_config_file_errors);
	tcase_add_test(tc, test_config_file_used);
	tcase_add_test(tc, test_lifecycle);
	tcase_add_test(tc, test_kill_and_restart);
	tcase_add_test(tc, test_failed_restart_keeps_pool);
	suite_add_tcase(s, tc);
	return ag_run_suite(s);
}
