/*
 * bench_traversal — breadcrumb traversal latency on loopback, next to a bare
 * nng request/reply round trip measured in the same run.
 *
 * Setup: the coordinator runs in this process (its loop in a thread); H real
 * retrace-agent daemons, one pool each, register with it; one worker process
 * per pool (forked, attached with the real libretrace) writes traces on
 * command. For a trace over h hosts:
 *   chain:   host i records the trace with breadcrumbs to hosts i-1 and i-2 (the
 *            last two hops, as tracestate rt= carries them and retrace_deserialize
 *            deposits them); the trigger fires on host h, so the coordinator walks
 *            back about (h-1)/2 round trips.
 *   fan-out: host 1 records breadcrumbs to hosts 2..h (its callees) and each
 *            callee one to host 1; the trigger fires on leaf h: h -> 1 -> the
 *            other leaves in parallel (depth 2, width h-2).
 * Latency is the coordinator's own figure: first news of the trace (its trigger,
 * or a slice that raced ahead of it) -> no agent left to contact
 * (rt_coord_latencies). Low rate: one trigger at a time, waiting for
 * its traversal. High rate: a burst of triggers on traces prepared beforehand.
 *
 * Baseline: p50 of a REQ/REP round trip over tcp://127.0.0.1 with a REP echo
 * thread, same message size as a remote trigger. `ratio` = traversal p50 over
 * that round trip. Breadcrumbs carry two hops, so the traversal needs `rounds`
 * sequential round trips (chain: the trigger names hosts h, h-1, h-2, and each
 * reply two more; fan-out: leaf -> root -> the other leaves): `bound_ms` =
 * rounds x the bare round trip, `bound_ratio` = p50 over it (target <= 1.5).
 * Second baseline, measured right before each size and shape: `idle_rtt_ms`,
 * the p50 of round trips to an echo in a process of its own, one every
 * IDLE_GAP_MS (each hop of a low-rate traversal wakes an agent that sat idle;
 * see start_echo_process), with `idle_bound_ms` / `idle_bound_ratio` as above.
 * After each case, the coordinator's own per-stage figures for the remote
 * triggers of that case (`retrace status`, traversal section): agent round trip
 * (send -> nng's reply callback) and hand-off (callback -> acted on by the loop),
 * p50 and p99 in microseconds.
 *
 * Same-run baselines of the previous paths: RETRACE_BENCH_AGENT=PATH runs
 * another retrace-agent binary (a previous build); RETRACE_BENCH_REPLIES_ON_LOOP=1
 * makes the coordinator hand every agent's reply to its loop thread (its
 * replies_on_loop setting) instead of acting on it in nng's callback.
 *
 * Prints `bench traversal shape=... hosts=... rate=... p50_ms=... p99_ms=...
 * baseline_rtt_ms=... ratio=... rounds=... bound_ms=... bound_ratio=...`.
 * RETRACE_BENCH_QUICK=1: fewer traces, 1/4/10 hosts; RETRACE_BENCH_HOSTS=N: N only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "coordinator.h"
#include "retrace/retrace.h"

#define MAX_HOSTS 10
#define IDLE_GAP_MS 2   /* the idle-hop baseline: see start_echo_process */
#define IDLE_ROUNDS 100
#define TRIGGER_ID 7

struct host {
	pid_t agent, worker;
	int cmd_fd, ack_fd; /* to / from the worker */
	char pool[64];
};

static struct host hosts[MAX_HOSTS];
static char dir[64];
static volatile int coord_stop;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(double ms)
{
	struct timespec ts = { (time_t)(ms / 1e3), (long)((ms - (double)(time_t)(ms / 1e3) * 1e3) * 1e6) };
	nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------- workers ---- */

/* A command to a worker: write trace (hi, lo) with these breadcrumbs; maybe trigger. */
struct cmd {
	uint64_t hi, lo;
	uint32_t ncrumbs;
	uint32_t crumbs[MAX_HOSTS];
	uint32_t trigger; /* 1: fire the trigger after writing */
	uint32_t quit;
};

static void worker_main(const char *pool, int cmd_fd, int ack_fd)
{
	struct retrace_config cfg;
	struct cmd c;
	char rec[256];
	retrace_config_from_env(&cfg);
	cfg.pool_name = pool;
	cfg.quiet = 1;
	for (int i = 0; i < 200 && retrace_init(&cfg) != RETRACE_OK; i++)
		sleep_ms(10);
	memset(rec, 'r', sizeof rec);
	while (read(cmd_fd, &c, sizeof c) == (ssize_t)sizeof c && !c.quit) {
		retrace_trace_id id = { .hi = c.hi, .lo = c.lo };
		char ok = 1;
		if (!c.trigger) {
			retrace_begin(id);
			retrace_tracepoint(rec, sizeof rec);
			for (uint32_t i = 0; i < c.ncrumbs; i++)
				retrace_breadcrumb(c.crumbs[i]);
			retrace_end();
			retrace_flush();
		} else {
			ok = retrace_trigger(id, TRIGGER_ID, NULL, 0) == RETRACE_OK;
		}
		if (write(ack_fd, &ok, 1) != 1)
			break;
	}
	retrace_shutdown();
	_exit(0);
}

static const char *agent_bin = AGENT_BIN;

static int start_agent(int i, const char *coord, const char *collector)
{
	char id[16], ready[128], listen[] = "tcp://127.0.0.1:0";
	snprintf(hosts[i].pool, sizeof hosts[i].pool, "/rt-bt-%d-%d", (int)getpid(), i);
	snprintf(id, sizeof id, "%d", i + 1);
	snprintf(ready, sizeof ready, "%s/agent%d.ready", dir, i);
	hosts[i].agent = fork();
	if (hosts[i].agent == 0) {
		char log[128];
		snprintf(log, sizeof log, "%s/agent%d.log", dir, i);
		if (!freopen(log, "w", stderr))
			_exit(127);
		execl(agent_bin, agent_bin, "--pool", hosts[i].pool, "--agent-id", id, "--buffers",
		      "1024", "--buffer-size", "8192", "--listen", listen, "--coordinator", coord,
		      "--collector", collector, "--unlink", "--ready-file", ready, "--log-level", "warn",
		      (char *)NULL);
		_exit(127);
	}
	for (int k = 0; k < 400; k++) {
		if (access(ready, F_OK) == 0)
			return 0;
		sleep_ms(10);
	}
	fprintf(stderr, "bench_traversal: agent %d did not start (see %s/agent%d.log)\n", i, dir, i);
	return -1;
}

static void start_worker(int i)
{
	int to[2], from[2];
	if (pipe(to) || pipe(from))
		exit(1);
	hosts[i].worker = fork();
	if (hosts[i].worker == 0) {
		close(to[1]);
		close(from[0]);
		worker_main(hosts[i].pool, to[0], from[1]);
	}
	close(to[0]);
	close(from[1]);
	hosts[i].cmd_fd = to[1];
	hosts[i].ack_fd = from[0];
}

static int ask(int i, const struct cmd *c)
{
	char ok = 0;
	if (write(hosts[i].cmd_fd, c, sizeof *c) != (ssize_t)sizeof *c || read(hosts[i].ack_fd, &ok, 1) != 1)
		return -1;
	return ok ? 0 : -1;
}

/* Write the trace on hosts 0..h-1 in the given shape (not triggered yet). */
static int write_trace(int h, int fanout, uint64_t hi, uint64_t lo)
{
	for (int i = 0; i < h; i++) {
		struct cmd c = { .hi = hi, .lo = lo };
		/* A chain hop deposits what retrace_deserialize deposits from tracestate
		 * rt=: the agent ids of the last two hops (host i-1 is agent i). */
		if (!fanout && i > 0)
			c.crumbs[c.ncrumbs++] = (uint32_t)i;
		if (!fanout && i > 1)
			c.crumbs[c.ncrumbs++] = (uint32_t)i - 1;
		if (fanout && i == 0)
			for (int k = 1; k < h; k++)
				c.crumbs[c.ncrumbs++] = (uint32_t)k + 1;
		if (fanout && i > 0)
			c.crumbs[c.ncrumbs++] = 1;
		if (ask(i, &c) != 0)
			return -1;
	}
	return 0;
}

static int fire(int h, uint64_t hi, uint64_t lo)
{
	struct cmd c = { .hi = hi, .lo = lo, .trigger = 1 };
	return ask(h - 1, &c);
}

/* -------------------------------------------------------- coordinator ---- */

static void *coord_thread(void *arg)
{
	rt_coord_run(arg, &coord_stop);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double pct(uint64_t *v, size_t n, double q)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof *v, cmp_u64);
	return (double)v[(size_t)(q * (double)(n - 1) + 0.5)] / 1e6;
}

/* Wait until `want` traversals were recorded after `from`; returns how many were. */
static size_t wait_latencies(struct rt_coord *c, uint64_t from, size_t want, uint64_t *out,
			     double timeout_ms)
{
	double end = now_ms() + timeout_ms;
	size_t n = 0;
	do {
		rt_coord_latencies(c, from, out, want, &n);
		if (n >= want)
			break;
		sleep_ms(0.2);
	} while (now_ms() < end);
	return n;
}

static uint64_t next_lo = 1;

/* Sequential round trips a traversal needs (see the top of the file). */
static int rounds(int h, int fanout)
{
	if (fanout)
		return 2;
	return h <= 3 ? 1 : 1 + (h - 3 + 1) / 2;
}

/* The coordinator's per-stage samples (rt_coord_stage_samples) since `from`. */
static void stages(struct rt_coord *c, int fanout, int h, int high, const uint64_t *from)
{
	static uint64_t v[2][RT_COORD_STAGE_RING];
	size_t n[2];
	for (int k = 0; k < 2; k++)
		rt_coord_stage_samples(c, k, from[k], v[k], RT_COORD_STAGE_RING, &n[k]);
	size_t quick_ones = 0; /* hand-offs under 10 us: acted on in nng's callback */
	for (size_t i = 0; i < n[1]; i++)
		quick_ones += v[1][i] < 10000;
	printf("bench traversal_stages shape=%s hosts=%d rate=%s replies=%zu handoff_under_10us_pct=%.0f "
	       "agent_rtt_p50_us=%.0f agent_rtt_p99_us=%.0f handoff_p50_us=%.0f handoff_p99_us=%.0f\n",
	       fanout ? "fanout" : "chain", h, high ? "high" : "low", n[0],
	       n[1] ? 100.0 * (double)quick_ones / (double)n[1] : 0,
	       pct(v[0], n[0], 0.5) * 1e3, pct(v[0], n[0], 0.99) * 1e3, pct(v[1], n[1], 0.5) * 1e3,
	       pct(v[1], n[1], 0.99) * 1e3);
}

static void run_case(struct rt_coord *c, int h, int fanout, int high, int traces, double rtt_ms,
		     double idle_rtt_ms)
{
	uint64_t *lat = calloc((size_t)traces, sizeof *lat);
	uint64_t hi = 0xbe0c4000u + (uint64_t)h, from, scratch = 0;
	size_t n = 0, got;
	int failed = 0;
	uint64_t stage_from[2];
	rt_coord_latencies(c, 0, &scratch, 0, &n);
	from = rt_coord_latencies(c, 0, &scratch, 0, &n);
	for (int k = 0; k < 2; k++)
		stage_from[k] = rt_coord_stage_samples(c, k, 0, &scratch, 0, &n);
	if (high) {
		uint64_t first = next_lo;
		for (int t = 0; t < traces; t++)
			failed |= write_trace(h, fanout, hi, next_lo++);
		for (int t = 0; t < traces; t++)
			failed |= fire(h, hi, first + (uint64_t)t);
		got = wait_latencies(c, from, (size_t)traces, lat, 20000);
	} else {
		got = 0;
		for (int t = 0; t < traces && !failed; t++) {
			uint64_t lo = next_lo++;
			size_t k;
			failed |= write_trace(h, fanout, hi, lo);
			failed |= fire(h, hi, lo);
			k = wait_latencies(c, from + (uint64_t)t, 1, lat + t, 5000);
			if (k == 0)
				break;
			got++;
		}
	}
	double p50 = pct(lat, got, 0.5), p99 = pct(lat, got, 0.99);
	int r = rounds(h, fanout);
	printf("bench traversal shape=%s hosts=%d rate=%s traces=%zu p50_ms=%.3f p99_ms=%.3f "
	       "baseline_rtt_ms=%.3f ratio=%.1f rounds=%d bound_ms=%.3f bound_ratio=%.2f "
	       "idle_rtt_ms=%.3f idle_gap_ms=%d idle_bound_ms=%.3f idle_bound_ratio=%.2f%s\n",
	       fanout ? "fanout" : "chain", h, high ? "high" : "low", got, p50, p99, rtt_ms,
	       rtt_ms > 0 ? p50 / rtt_ms : 0, r, r * rtt_ms, rtt_ms > 0 ? p50 / (r * rtt_ms) : 0,
	       idle_rtt_ms, IDLE_GAP_MS, r * idle_rtt_ms,
	       idle_rtt_ms > 0 ? p50 / (r * idle_rtt_ms) : 0,
	       failed || got < (size_t)traces ? " incomplete=1" : "");
	stages(c, fanout, h, high, stage_from);
	fflush(stdout);
	free(lat);
}

/* ---------------------------------------------------------- baseline ---- */

static void *echo_thread(void *arg)
{
	nng_socket s = *(nng_socket *)arg;
	for (;;) {
		nng_msg *m;
		if (nng_recvmsg(s, &m, 0) != 0)
			return NULL;
		if (nng_sendmsg(s, m, 0) != 0)
			nng_msg_free(m);
	}
}

/* p50 of `rounds` REQ/REP round trips to url (ms), one every gap_us (0: back to back). */
static double rtt_p50_ms(const char *url, int rounds, int gap_us)
{
	nng_socket req;
	uint64_t *v = calloc((size_t)rounds, sizeof *v);
	uint8_t payload[64] = { 0x95 };
	int n = 0;
	double r;
	if (!v || nng_req0_open(&req) != 0) {
		free(v);
		return 0;
	}
	if (nng_dial(req, url, NULL, 0) == 0)
		for (; n < rounds; n++) {
			void *buf;
			size_t sz;
			if (gap_us)
				sleep_ms(gap_us / 1e3);
			double t0 = now_ms();
			if (nng_send(req, payload, sizeof payload, 0) != 0 ||
			    nng_recv(req, &buf, &sz, NNG_FLAG_ALLOC) != 0)
				break;
			nng_free(buf, sz);
			v[n] = (uint64_t)((now_ms() - t0) * 1e6);
		}
	nng_close(req);
	r = pct(v, (size_t)n, 0.5);
	free(v);
	return r;
}

/* The hot baseline: back-to-back round trips to an echo thread of this process. */
static double baseline_rtt_ms(int rounds)
{
	nng_socket rep;
	nng_listener l;
	nng_sockaddr sa;
	pthread_t t;
	char url[64];
	double r;
	nng_rep0_open(&rep);
	nng_listen(rep, "tcp://127.0.0.1:0", &l, 0);
	nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa);
	snprintf(url, sizeof url, "tcp://127.0.0.1:%u", (unsigned)ntohs(sa.s_in.sa_port));
	pthread_create(&t, NULL, echo_thread, &rep);
	r = rtt_p50_ms(url, rounds, 0);
	nng_close(rep);
	pthread_join(t, NULL);
	return r;
}

/*
 * The idle-hop baseline. A traversal at the low rate asks each agent once per
 * trace, so every hop wakes a process that sat idle for milliseconds; on a
 * loaded machine such a round trip costs more than back-to-back ones whose
 * threads stay warm (about 1.5-2x at load ~15: 160 us back to back, 250 us
 * with 1 ms between requests, 330 us with 3 ms). So each low-rate case is also
 * held against round trips to an echo in a process of its own, one every
 * IDLE_GAP_MS, measured right before the case. The echo process is forked
 * before this process touches nng: a child must not inherit nng's threads.
 */
static pid_t echo_pid;
static char echo_url[64];

static int start_echo_process(void)
{
	int fd[2], port = 0;
	if (pipe(fd) != 0 || (echo_pid = fork()) < 0)
		return -1;
	if (echo_pid == 0) {
		nng_socket rep;
		nng_listener l;
		nng_sockaddr sa;
		close(fd[0]);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (nng_rep0_open(&rep) == 0 && nng_listen(rep, "tcp://127.0.0.1:0", &l, 0) == 0 &&
		    nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa) == 0)
			port = ntohs(sa.s_in.sa_port);
		if (write(fd[1], &port, sizeof port) != (ssize_t)sizeof port || port == 0)
			_exit(1);
		close(fd[1]);
		echo_thread(&rep);
		_exit(0);
	}
	close(fd[1]);
	if (read(fd[0], &port, sizeof port) != (ssize_t)sizeof port)
		port = 0;
	close(fd[0]);
	snprintf(echo_url, sizeof echo_url, "tcp://127.0.0.1:%d", port);
	return port ? 0 : -1;
}

static void stop_echo_process(void)
{
	if (echo_pid > 0) {
		kill(echo_pid, SIGTERM);
		waitpid(echo_pid, NULL, 0);
	}
}

/* ------------------------------------------------------------- main ---- */

static void stop_all(int n)
{
	struct cmd q = { .quit = 1 };
	for (int i = 0; i < n; i++) {
		if (hosts[i].worker > 0) {
			if (write(hosts[i].cmd_fd, &q, sizeof q) < 0)
				kill(hosts[i].worker, SIGKILL);
			waitpid(hosts[i].worker, NULL, 0);
		}
		if (hosts[i].agent > 0) {
			kill(hosts[i].agent, SIGTERM);
			waitpid(hosts[i].agent, NULL, 0);
		}
	}
}

int main(void)
{
	int quick = getenv("RETRACE_BENCH_QUICK") != NULL;
	static const int all_sizes[] = { 1, 2, 4, 6, 8, 10 }, quick_sizes[] = { 1, 4, 10 };
	const int *sizes = quick ? quick_sizes : all_sizes;
	int nsizes = quick ? 3 : 6, low = quick ? 30 : 200, high = quick ? 50 : 300;
	if (getenv("RETRACE_BENCH_HOSTS")) { /* one size only (digging) */
		static int one;
		one = atoi(getenv("RETRACE_BENCH_HOSTS"));
		sizes = &one;
		nsizes = one >= 1 && one <= MAX_HOSTS ? 1 : 0;
	}
	if (getenv("RETRACE_BENCH_AGENT"))
		agent_bin = getenv("RETRACE_BENCH_AGENT");
	struct rt_coord_config cfg;
	struct rt_coord *c;
	pthread_t th;
	char err[512], store[128], cmd[160];
	double rtt;

	if (start_echo_process() != 0) {
		fprintf(stderr, "bench_traversal: cannot start the echo process\n");
		return 1;
	}
	snprintf(dir, sizeof dir, "/tmp/rt-bench-traversal-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	rt_coord_config_defaults(&cfg);
	snprintf(cfg.listen, sizeof cfg.listen, "tcp://127.0.0.1:0");
	snprintf(cfg.collector, sizeof cfg.collector, "tcp://127.0.0.1:0");
	snprintf(store, sizeof store, "%s/store.db", dir);
	snprintf(cfg.store, sizeof cfg.store, "%s", store);
	cfg.settle = 0.2;
	cfg.max_groups = 4096;
	cfg.log_level = 0;
	cfg.replies_on_loop = getenv("RETRACE_BENCH_REPLIES_ON_LOOP") != NULL;
	if (!(c = rt_coord_open(&cfg, err, sizeof err))) {
		fprintf(stderr, "bench_traversal: %s\n", err);
		return 1;
	}
	pthread_create(&th, NULL, coord_thread, c);
	for (int i = 0; i < MAX_HOSTS; i++)
		if (start_agent(i, rt_coord_listen_addr(c), rt_coord_collector_addr(c)) != 0) {
			stop_all(i + 1);
			return 1;
		}
	for (int i = 0; i < MAX_HOSTS; i++)
		start_worker(i);
	sleep_ms(300); /* every agent registered (they do at start) */

	rtt = baseline_rtt_ms(2000);
	for (int s = 0; s < nsizes; s++)
		for (int shape = 0; shape < 2; shape++) {
			if (shape && sizes[s] < 3)
				continue; /* a fan-out needs a root and two leaves */
			double idle = rtt_p50_ms(echo_url, IDLE_ROUNDS, IDLE_GAP_MS * 1000);
			run_case(c, sizes[s], shape, 0, low, rtt, idle);
			run_case(c, sizes[s], shape, 1, high, rtt, idle);
		}
	stop_all(MAX_HOSTS);
	stop_echo_process();
	coord_stop = 1;
	pthread_join(th, NULL);
	if (getenv("RETRACE_BENCH_STATUS")) { /* the coordinator's figures, for digging */
		static char st[1 << 16];
		rt_coord_status(c, 0, st, sizeof st);
		fputs(st, stderr);
	}
	rt_coord_close(c);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench_traversal: could not remove %s\n", dir);
	return 0;
}
