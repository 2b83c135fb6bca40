/*
 * tests/coordinator/cluster.c — processes of the end-to-end suites (see cluster.h).
 *
 * Daemons are exec'd from fork children with PR_SET_PDEATHSIG so they die with
 * the test even when a failed assertion _exits it. Writers are plain fork
 * children driven over a pipe: one command, one ack byte, so a test knows the
 * trace is written and flushed to the agent before it fires a trigger.
 */
#include "cluster.h"
#include "common/ports.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "retrace/retrace.h"

struct cl_cmd {
	uint64_t hi, lo;
	int32_t op; /* 0 write, 1 trigger, 2 quit, 3 run cl_run_fn */
	int32_t records;
	int32_t ncrumbs;
	uint32_t crumbs[CL_MAX_CRUMBS];
	uint32_t trigger_id;
	int32_t nlateral;
	uint64_t lateral[CL_MAX_LATERAL];
	struct cl_run_io run; /* op 3: in = the command's, out = the reply */
};

cl_run_fn_t cl_run_fn;
const char *cl_coord_args[CL_MAX_COORD_ARGS + 1];
const char *cl_store_locator;
const char *cl_agent_args[CL_MAX_AGENT_ARGS + 1];
const char *cl_agent_tls_dir;
const char *cl_agent_coordinators;
const char *cl_agent_collectors;

static void nap_ms(double ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)((ms - (double)((time_t)(ms / 1000)) * 1000) * 1e6) };
	nanosleep(&ts, NULL);
}

double cl_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint32_t cl_record_len(uint64_t lo, int host, int record)
{
	return 24 + (uint32_t)((lo * 7 + (uint64_t)host * 131 + (uint64_t)record * 977) % 3000);
}

uint8_t cl_record_byte(uint64_t lo, int host, int record, uint32_t offset)
{
	return (uint8_t)(lo * 31 + (uint64_t)host * 7 + (uint64_t)record * 13 + offset * 5 + (offset >> 8));
}

/* ------------------------------------------------------------ writers ---- */

static void writer_main(const char *pool, int h, int cmd_fd, int ack_fd)
{
	struct retrace_config cfg;
	struct cl_cmd c;
	static uint8_t rec[4096];
	retrace_config_from_env(&cfg);
	cfg.pool_name = pool;
	cfg.quiet = 1;
	for (int i = 0; i < 300 && retrace_init(&cfg) != RETRACE_OK; i++)
		nap_ms(10);
	while (read(cmd_fd, &c, sizeof c) == (ssize_t)sizeof c && c.op != 2) {
		retrace_trace_id id = { .hi = c.hi, .lo = c.lo };
		char ok = 1;
		if (c.op == 0) {
			retrace_begin(id);
			for (int i = 0; i < c.ncrumbs; i++)
				retrace_breadcrumb(c.crumbs[i]);
			for (int r = 0; r < c.records; r++) {
				uint32_t len = cl_record_len(c.lo, h, r);
				for (uint32_t k = 0; k < len; k++)
					rec[k] = cl_record_byte(c.lo, h, r, k);
				retrace_tracepoint(rec, len);
			}
			retrace_end();
			retrace_flush();
		} else if (c.op == 3) {
			c.run.ok = cl_run_fn ? cl_run_fn(h, id, &c.run) == 0 : 0;
			retrace_flush();
			if (write(ack_fd, &c.run, sizeof c.run) != (ssize_t)sizeof c.run)
				break;
			continue;
		} else {
			retrace_trace_id lat[CL_MAX_LATERAL];
			for (int i = 0; i < c.nlateral; i++)
				lat[i] = (retrace_trace_id){ .hi = c.hi, .lo = c.lateral[i] };
			ok = retrace_trigger(id, c.trigger_id, lat, (size_t)c.nlateral) == RETRACE_OK;
		}
		if (write(ack_fd, &ok, 1) != 1)
			break;
	}
	retrace_shutdown();
	_exit(0);
}

static int command(struct cluster *c, int h, const struct cl_cmd *cmd)
{
	char ok = 0;
	if (write(c->hosts[h].cmd_fd, cmd, sizeof *cmd) != (ssize_t)sizeof *cmd ||
	    read(c->hosts[h].ack_fd, &ok, 1) != 1)
		return -1;
	return ok ? 0 : -1;
}

int cl_write(struct cluster *c, int h, uint64_t hi, uint64_t lo, int records,
	     const uint32_t *crumbs, int ncrumbs)
{
	struct cl_cmd cmd;
	memset(&cmd, 0, sizeof cmd);
	cmd.hi = hi;
	cmd.lo = lo;
	cmd.records = records;
	cmd.ncrumbs = ncrumbs > CL_MAX_CRUMBS ? CL_MAX_CRUMBS : ncrumbs;
	for (int i = 0; i < cmd.ncrumbs; i++)
		cmd.crumbs[i] = crumbs[i];
	return command(c, h, &cmd);
}

int cl_run(struct cluster *c, int h, uint64_t hi, uint64_t lo, struct cl_run_io *io)
{
	struct cl_cmd cmd;
	memset(&cmd, 0, sizeof cmd);
	cmd.op = 3;
	cmd.hi = hi;
	cmd.lo = lo;
	cmd.run = *io;
	if (write(c->hosts[h].cmd_fd, &cmd, sizeof cmd) != (ssize_t)sizeof cmd ||
	    read(c->hosts[h].ack_fd, io, sizeof *io) != (ssize_t)sizeof *io)
		return -1;
	return io->ok ? 0 : -1;
}

int cl_trigger(struct cluster *c, int h, uint64_t hi, uint64_t lo, uint32_t trigger_id,
	       const uint64_t *lateral_lo, int nlateral)
{
	struct cl_cmd cmd;
	memset(&cmd, 0, sizeof cmd);
	cmd.op = 1;
	cmd.hi = hi;
	cmd.lo = lo;
	cmd.trigger_id = trigger_id;
	cmd.nlateral = nlateral > CL_MAX_LATERAL ? CL_MAX_LATERAL : nlateral;
	for (int i = 0; i < cmd.nlateral; i++)
		cmd.lateral[i] = lateral_lo[i];
	return command(c, h, &cmd);
}

/* ------------------------------------------------------------ daemons ---- */

static pid_t spawn(char *const argv[], const char *log)
{
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 2);
			close(fd);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/*
 * Wait for daemon `*pid` to write its ready file. Fails at once (and says so)
 * if the daemon exited; else waits up to timeout_s: start-up work (a pool of
 * thousands of buffers to lay out, a TLS identity to load) legitimately takes
 * longer on a loaded machine, and the bound only has to catch a hang.
 */
static int wait_ready(pid_t *pid, const char *path, const char *log, double timeout_s)
{
	double end = cl_now_s() + timeout_s;
	int st;
	while (cl_now_s() < end) {
		if (access(path, F_OK) == 0)
			return 0;
		if (waitpid(*pid, &st, WNOHANG) == *pid) {
			fprintf(stderr, "cluster: daemon %d exited (status %d) before it was ready; log %s\n",
				(int)*pid, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), log);
			*pid = 0;
			return -1;
		}
		nap_ms(10);
	}
	fprintf(stderr, "cluster: daemon %d not ready after %.0f s; log %s\n", (int)*pid, timeout_s,
		log);
	return -1;
}

/* Whether the file (a daemon's log) holds `what`. */
static int file_says(const char *path, const char *what)
{
	char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	return strstr(buf, what) != NULL;
}

/* The coordinator's bound addresses from its ready file: "LISTEN\nCOLLECTOR\n". */
static int read_bound_urls(struct cluster *c, const char *ready)
{
	char a[256], b[256];
	FILE *f = fopen(ready, "r");
	int ok;
	if (!f)
		return -1;
	ok = fscanf(f, "%255s %255s", a, b) == 2;
	fclose(f);
	if (!ok || strlen(a) >= sizeof c->coord_url || strlen(b) >= sizeof c->collect_url)
		return -1;
	/* The cluster names addresses tcp://; TLS is chosen by the identities. */
	{
		const char *x = strncmp(a, "tls+", 4) ? a : a + 4, *y = strncmp(b, "tls+", 4) ? b : b + 4;
		memcpy(c->coord_url, x, strlen(x) + 1);   /* lengths checked above */
		memcpy(c->collect_url, y, strlen(y) + 1);
	}
	return 0;
}

int cl_start_coordinator(struct cluster *c)
{
	char ready[256], log[256];
	char *argv[17 + CL_MAX_COORD_ARGS + 1] = {
		COORD_BIN, "--listen", c->coord_url, "--collector", c->collect_url,
		"--store", c->store, "--settle", "0.3", "--collect-timeout", "8",
		"--agent-timeout", "0.5", "--ready-file", ready, "--log-level", "debug", NULL };
	for (int i = 0; i < CL_MAX_COORD_ARGS && cl_coord_args[i]; i++)
		argv[17 + i] = (char *)cl_coord_args[i];
	snprintf(ready, sizeof ready, "%s/coord.ready", c->dir);
	snprintf(log, sizeof log, "%s/coord.log", c->dir);
	unlink(ready);
	c->coord = spawn(argv, log);
	if (c->coord <= 0 || wait_ready(&c->coord, ready, log, 30) != 0)
		return -1;
	/* First start: the coordinator bound port 0 (a port picked here and closed
	 * could be taken by any connection before the daemon binds it: "Address in
	 * use" on a busy machine); a restart binds the same addresses again. */
	return read_bound_urls(c, ready);
}

void cl_kill_coordinator(struct cluster *c)
{
	if (c->coord > 0) {
		kill(c->coord, SIGKILL);
		waitpid(c->coord, NULL, 0);
		c->coord = 0;
	}
}

static int start_host(struct cluster *c, int h, uint32_t buffers)
{
	struct cl_host *x = &c->hosts[h];
	char id[16], nbuf[16], ready[256], log[256], ca[256], crt[256], key[256];
	char *argv[21 + 6 + CL_MAX_AGENT_ARGS + 1] = {
		AGENT_BIN, "--pool", x->pool, "--agent-id", id, "--buffers", nbuf,
		"--buffer-size", "8192", "--listen", "tcp://127.0.0.1:0", "--coordinator",
		cl_agent_coordinators ? (char *)cl_agent_coordinators : c->coord_url, "--collector",
		cl_agent_collectors ? (char *)cl_agent_collectors : c->collect_url, "--unlink",
		"--ready-file", ready,
		"--report-timeout", "1000", NULL };
	int to[2], from[2], n = 20;
	if (cl_agent_tls_dir) {
		snprintf(ca, sizeof ca, "%s/ca.crt", cl_agent_tls_dir);
		snprintf(crt, sizeof crt, "%s/agent-%d.crt", cl_agent_tls_dir, h + 1);
		snprintf(key, sizeof key, "%s/agent-%d.key", cl_agent_tls_dir, h + 1);
		const char *tls[] = { "--tls-ca", ca, "--tls-cert", crt, "--tls-key", key };
		for (int i = 0; i < 6; i++)
			argv[n++] = (char *)tls[i];
	}
	for (int i = 0; i < CL_MAX_AGENT_ARGS && cl_agent_args[i]; i++)
		argv[n++] = (char *)cl_agent_args[i];
	argv[n] = NULL;
	/* pid alone is not unique: pids cycle (pid_max 32768) and a pool whose agent
	 * was SIGKILLed (a failed or timed-out test) stays in /dev/shm; an agent
	 * started on that name would take the stale pool over, with its geometry
	 * and old traces. The cluster directory's mkdtemp suffix makes it unique. */
	{
		char tag[8];
		snprintf(tag, sizeof tag, "%.6s", c->dir + strlen("/tmp/rt-e2e-"));
		snprintf(x->pool, sizeof x->pool, "/rt-e2e-%d-%s-%d", (int)getpid(), tag, h);
	}
	snprintf(id, sizeof id, "%d", h + 1);
	snprintf(nbuf, sizeof nbuf, "%u", buffers);
	snprintf(ready, sizeof ready, "%s/agent%d.ready", c->dir, h);
	snprintf(log, sizeof log, "%s/agent%d.log", c->dir, h);
	x->buffers = buffers;
	x->agent = spawn(argv, log);
	if (x->agent <= 0 || wait_ready(&x->agent, ready, log, 30) != 0)
		return -1;
	if (pipe(to) || pipe(from))
		return -1;
	x->writer = fork();
	if (x->writer == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(to[1]);
		close(from[0]);
		writer_main(x->pool, h, to[0], from[1]);
	}
	close(to[0]);
	close(from[1]);
	x->cmd_fd = to[1];
	x->ack_fd = from[0];
	return 0;
}

/*
 * Pools a failed run left (its agents were killed with it, before --unlink
 * could act): /dev/shm/rt-e2e-PID-*, where PID, the test process that named
 * them, is gone. A PID that lives (a test running beside this one, or a
 * reused number) keeps its pools. The run's directory in /tmp stays: it is
 * what the failure left to read.
 */
static void sweep_dead_pools(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d))) {
		char name[300];
		long pid;
		if (strncmp(e->d_name, "rt-e2e-", 7) != 0)
			continue;
		pid = strtol(e->d_name + 7, NULL, 10);
		if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(name, sizeof name, "/%s", e->d_name);
		if (shm_unlink(name) == 0)
			fprintf(stderr, "cluster: removed %s, left by a run that is gone\n", name);
	}
	closedir(d);
}

int cl_start(struct cluster *c, int nhosts, uint32_t buffers)
{
	sweep_dead_pools();
	memset(c, 0, sizeof *c);
	snprintf(c->dir, sizeof c->dir, "/tmp/rt-e2e-XXXXXX");
	if (!mkdtemp(c->dir))
		return -1;
	if (cl_store_locator)
		snprintf(c->store, sizeof c->store, "%s", cl_store_locator);
	else
		snprintf(c->store, sizeof c->store, "%s/store.db", c->dir);
	/* A restarted coordinator takes the same ports (tests/common/ports.h). A port
	 * checked free here can still be taken before the coordinator binds it (two
	 * tests picked the same one: "Address in use", seen once in 12 looped runs
	 * beside two stress streams): then it starts again on another pair. */
	for (int attempt = 0;; attempt++) {
		char log[256];
		test_restartable_url(c->coord_url, sizeof c->coord_url);
		test_restartable_url(c->collect_url, sizeof c->collect_url);
		if (cl_start_coordinator(c) == 0)
			break;
		snprintf(log, sizeof log, "%s/coord.log", c->dir);
		if (attempt == 7 || !file_says(log, "Address in use"))
			return -1;
		fprintf(stderr, "cluster: the coordinator's port was taken meanwhile; new ports\n");
	}
	return cl_start_hosts(c, nhosts, buffers);
}

int cl_start_hosts(struct cluster *c, int nhosts, uint32_t buffers)
{
	int first = c->nhosts;
	for (int h = first; h < first + nhosts && h < CL_MAX_HOSTS; h++) {
		c->nhosts = h + 1;
		if (start_host(c, h, buffers) != 0)
			return -1;
	}
	return cl_wait_registered(c, 30);
}

int cl_wait_registered(struct cluster *c, double timeout_s)
{
	double end = cl_now_s() + timeout_s;
	long long known = -1;
	/* Agents register at start (over TLS too when cl_agent_tls_dir is set; the
	 * CLI then speaks TLS as the caller's $RETRACE_TLS_* identity). */
	while ((known = cl_coord_figure(c, "agents", "known")) < c->nhosts) {
		if (cl_now_s() > end) {
			fprintf(stderr, "cluster: the coordinator knows %lld of %d agents after %.0f s "
				"(logs in %s)\n", known, c->nhosts, timeout_s, c->dir);
			return -1;
		}
		nap_ms(20);
	}
	return 0;
}

/*
 * Every thread's stack of a daemon that would not stop, into DIR/hung-TAG.txt
 * (gdb, when installed), and its log's tail to stderr: a hang at exit is a
 * product bug to find, and the process is about to be killed.
 */
static void dump_hung(struct cluster *c, pid_t pid, const char *tag, const char *log)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd,
		 "command -v gdb >/dev/null && timeout 60 gdb -p %d -batch -nx "
		 "-ex 'thread apply all bt' > '%s/hung-%s.txt' 2>&1; "
		 /* its sockets: a listener that stopped accepting shows a backlog */
		 "{ ls -l /proc/%d/fd; command -v ss >/dev/null && "
		 "{ ss -xlp; ss -xanp; ss -tanp; } | grep -E 'pid=%d,|Recv-Q'; } "
		 "> '%s/sockets-%s.txt' 2>&1; "
		 "echo '--- last lines of %s:' >&2; tail -n 20 '%s' >&2",
		 (int)pid, c->dir, tag, (int)pid, (int)pid, c->dir, tag, log, log);
	if (system(cmd) != 0)
		fprintf(stderr, "(could not take the stacks of pid %d)\n", (int)pid);
}

/* Every thread of pid in state T (stopped) or t (traced): 1, 0 not yet, -1 no such process. */
static int all_threads_stopped(pid_t pid)
{
	char path[64];
	struct dirent *e;
	int stopped = 1, seen = 0;
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	while (stopped && (e = readdir(d))) {
		char stat[320], buf[512], *p;
		FILE *f;
		if (e->d_name[0] == '.')
			continue;
		snprintf(stat, sizeof stat, "/proc/%d/task/%s/stat", (int)pid, e->d_name);
		if (!(f = fopen(stat, "r")))
			continue; /* the thread ended meanwhile */
		size_t n = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[n] = '\0';
		/* "tid (comm) S ...": the state follows the last ')' (comm may hold one) */
		if ((p = strrchr(buf, ')')) && p[1] == ' ') {
			seen++;
			stopped = p[2] == 'T' || p[2] == 't';
		}
	}
	closedir(d);
	return seen ? stopped : -1;
}

int cl_stop_agent(struct cluster *c, int h)
{
	pid_t pid = c->hosts[h].agent;
	if (kill(pid, SIGSTOP) != 0)
		return -1;
	for (int i = 0; i < 10000; i++) {
		int s = all_threads_stopped(pid);
		if (s != 0)
			return s > 0 ? 0 : -1;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	return -1;
}

void cl_dump_stacks(struct cluster *c, const char *tag)
{
	char t[64], log[sizeof c->dir + 32];
	if (c->coord > 0) {
		snprintf(t, sizeof t, "%s-coord", tag);
		snprintf(log, sizeof log, "%s/coord.log", c->dir);
		dump_hung(c, c->coord, t, log);
	}
	for (int h = 0; h < c->nhosts; h++)
		if (c->hosts[h].agent > 0) {
			snprintf(t, sizeof t, "%s-agent%d", tag, h);
			snprintf(log, sizeof log, "%s/agent%d.log", c->dir, h);
			dump_hung(c, c->hosts[h].agent, t, log);
		}
}

/* Reap `pid` within `timeout_s`; past that take its stacks, kill it hard, return -1. */
static int reap_within(struct cluster *c, pid_t pid, double timeout_s, const char *tag,
		       const char *log)
{
	double end = cl_now_s() + timeout_s;
	while (cl_now_s() < end) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return 0;
		nap_ms(10);
	}
	dump_hung(c, pid, tag, log);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

int cl_stop(struct cluster *c)
{
	struct cl_cmd quit;
	char cmd[300];
	int hung = 0;
	memset(&quit, 0, sizeof quit);
	quit.op = 2;
	for (int h = 0; h < c->nhosts; h++) {
		struct cl_host *x = &c->hosts[h];
		if (x->writer > 0) {
			if (write(x->cmd_fd, &quit, sizeof quit) < 0)
				kill(x->writer, SIGKILL);
			waitpid(x->writer, NULL, 0);
			close(x->cmd_fd);
			close(x->ack_fd);
		}
		if (x->agent > 0) {
			char tag[32], log[sizeof c->dir + 32];
			snprintf(tag, sizeof tag, "agent%d", h);
			snprintf(log, sizeof log, "%s/agent%d.log", c->dir, h);
			kill(x->agent, SIGTERM);
			if (reap_within(c, x->agent, 15, tag, log) != 0) {
				fprintf(stderr, "agent %d did not exit within 15 s of SIGTERM (stacks: %s/hung-%s.txt)\n",
					h, c->dir, tag);
				hung++;
			}
		}
		if (x->pool[0])
			shm_unlink(x->pool); /* gone already when the agent exited cleanly (--unlink) */
	}
	cl_kill_coordinator(c);
	if (hung || getenv("RETRACE_KEEP_TEST_DIR")) { /* a hang's stacks and logs stay */
		fprintf(stderr, "kept %s\n", c->dir);
		return hung;
	}
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", c->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", c->dir);
	return hung;
}

/* ------------------------------------------------------------ checks ---- */

int cl_wait_trace(struct cluster *c, uint64_t hi, uint64_t lo, double timeout_s,
		  struct rt_store_trace *out)
{
	double end = cl_now_s() + timeout_s;
	struct rt_store_options o = { .path = c->store, .readonly = 1 };
	while (cl_now_s() < end) {
		struct rt_store *s = NULL;
		if (rt_store_open(&s, &o) == 0) {
			int rc = rt_store_get_trace(s, hi, lo, out);
			rt_store_close(s);
			if (rc == 0)
				return 0;
		} else {
			rt_store_close(s);
		}
		nap_ms(50);
	}
	return -1;
}

static char *hex_of_record(uint64_t lo, int h, int r)
{
	uint32_t len = cl_record_len(lo, h, r);
	char *s = malloc(len * 2 + 1);
	for (uint32_t k = 0; k < len; k++)
		snprintf(s + 2 * k, 3, "%02x", cl_record_byte(lo, h, r, k));
	return s;
}

int cl_check_records(struct cluster *c, uint64_t hi, uint64_t lo, int h, int records, char *why,
		     size_t whylen)
{
	char cmd[512], prefix[64], *line = NULL;
	size_t cap = 0;
	int seen = 0, rc = 0;
	FILE *p;
	snprintf(cmd, sizeof cmd, "%s show --records --store '%s' %016llx%016llx", CLI_BIN, c->store,
		 (unsigned long long)hi, (unsigned long long)lo);
	snprintf(prefix, sizeof prefix, "record agent=%d ", h + 1);
	if (!(p = popen(cmd, "r"))) {
		snprintf(why, whylen, "cannot run %s", cmd);
		return -1;
	}
	while (getline(&line, &cap, p) > 0) {
		char *hex;
		if (strncmp(line, prefix, strlen(prefix)) != 0)
			continue;
		hex = strrchr(line, ' ') + 1;
		hex[strcspn(hex, "\n")] = 0;
		if (seen >= records) {
			snprintf(why, whylen, "host %d: more than the %d records written", h, records);
			rc = -1;
			break;
		}
		{
			char *want = hex_of_record(lo, h, seen);
			if (strcmp(want, hex) != 0) {
				snprintf(why, whylen, "host %d record %d differs (len %zu vs %zu)", h, seen,
					 strlen(hex) / 2, strlen(want) / 2);
				rc = -1;
			}
			free(want);
		}
		if (rc)
			break;
		seen++;
	}
	free(line);
	pclose(p);
	if (!rc && seen != records) {
		snprintf(why, whylen, "host %d: %d of %d records stored", h, seen, records);
		rc = -1;
	}
	return rc;
}

/*
 * A figure from `retrace status --json TARGET` (e.g. "--pool /p"): the number
 * after `"key":` inside `"section":{`, or, with a NULL section, after `key=`
 * inside the string value of `"line":` (the directory's per-agent lines).
 * -1 if absent.
 */
static long long status_number(const char *target, const char *section, const char *line,
			       const char *key)
{
	char cmd[512], *out = NULL, pat[128], *p;
	size_t cap = 0;
	long long v = -1;
	FILE *f;
	snprintf(cmd, sizeof cmd, "%s status --json %s", CLI_BIN, target);
	if (!(f = popen(cmd, "r")))
		return -1;
	if (getdelim(&out, &cap, 0, f) > 0) {
		if (section)
			snprintf(pat, sizeof pat, "\"%s\":{", section);
		else
			snprintf(pat, sizeof pat, "\"%s\":\"", line);
		if ((p = strstr(out, pat))) {
			char *end = section ? NULL : strchr(p + strlen(pat), '"');
			if (section)
				snprintf(pat, sizeof pat, "\"%s\":", key);
			else
				snprintf(pat, sizeof pat, " %s=", key);
			if ((p = strstr(p, pat)) && (!end || p < end))
				v = strtoll(p + strlen(pat), NULL, 10);
		}
	}
	free(out);
	pclose(f);
	return v;
}

static long long status_figure(const char *target, const char *section, const char *key)
{
	return status_number(target, section, NULL, key);
}

long long cl_agent_figure(struct cluster *c, int h, const char *section, const char *key)
{
	char target[96];
	snprintf(target, sizeof target, "--pool %s", c->hosts[h].pool);
	return status_figure(target, section, key);
}

long long cl_coord_figure(struct cluster *c, const char *section, const char *key)
{
	char target[96];
	snprintf(target, sizeof target, "--coordinator %s", c->coord_url);
	return status_figure(target, section, key);
}

long long cl_wait_coord_figure(struct cluster *c, const char *section, const char *key,
			       long long at_least, double timeout_s)
{
	double end = cl_now_s() + timeout_s;
	long long v;
	while ((v = cl_coord_figure(c, section, key)) < at_least && cl_now_s() < end)
		usleep(100000);
	return v;
}

long long cl_coord_agent_figure(struct cluster *c, uint32_t agent_id, const char *key)
{
	char target[96], line[32];
	snprintf(target, sizeof target, "--coordinator %s", c->coord_url);
	snprintf(line, sizeof line, "agent.%u", agent_id);
	return status_number(target, NULL, line, key);
}

void cl_dump_status(struct cluster *c, const char *tag)
{
	char cmd[768];
	int rc;
	for (int h = 0; h < c->nhosts; h++) {
		snprintf(cmd, sizeof cmd, "%s status --json --pool %s > %s/status-%s-agent%d.json 2>&1",
			 CLI_BIN, c->hosts[h].pool, c->dir, tag, h);
		rc = system(cmd);
		(void)rc; /* a host that does not answer leaves its error in the file */
	}
	snprintf(cmd, sizeof cmd, "%s status --json --coordinator %s > %s/status-%s-coord.json 2>&1",
		 CLI_BIN, c->coord_url, c->dir, tag);
	rc = system(cmd);
	(void)rc;
}

long long cl_store_slices(struct cluster *c)
{
	struct rt_store_options o = { .path = c->store, .readonly = 1 };
	struct rt_store_stats st;
	struct rt_store *s = NULL;
	long long n = -1;
	if (rt_store_open(&s, &o) == 0 && rt_store_stats(s, &st) == 0)
		n = (long long)st.slices;
	rt_store_close(s);
	return n;
}
