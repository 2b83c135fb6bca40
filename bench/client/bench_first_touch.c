/*
 * bench_first_touch — what a service pays the first time it writes each page of
 * the pool, with and without MAP_POPULATE at attach (RETRACE_POPULATE).
 *
 * Every process that maps the pool takes a page fault on its first touch of each
 * page. Once a process has cycled through the whole pool the faults stop, but a
 * service that starts (or restarts, or re-attaches after its agent replaced the
 * pool) pays them inside its requests until then. This bench measures that
 * warm-up honestly, in fresh processes, against a same-run baseline:
 *
 *   - the parent creates a fresh pool (posix_fallocate'd, as the agent does);
 *   - a child forked from a parent that never touched the client attaches with
 *     RETRACE_POPULATE=0 (the baseline: lazy map, the behaviour before) or =1,
 *     then writes traces of 30 x 1 KiB tracepoints (about one 32 KiB buffer
 *     each) through 90 % of the pool, so every trace lands on pages this
 *     process has never touched and no buffer needs recycling;
 *   - it reports its attach time, the first pass's time per trace, the
 *     discard-buffer share (a figure taken while writes fell to the discard
 *     buffer is not a figure: the line says so) and the minor page faults
 *     taken during the pass (getrusage), all times as the process's CPU time;
 *     and the parent prints the median of ROUNDS rounds per mode,
 *     modes interleaved so that drift on a shared machine hits both alike.
 *
 *   bench client_first_touch pool_mib=M traces=N populate=1 attach_ms=A
 *         ns_per_trace=X faults=F baseline=populate0 baseline_attach_ms=B
 *         baseline_ns_per_trace=Y baseline_faults=G ratio=X/Y
 *         first_pass_ms=P baseline_first_pass_ms=Q pass_ratio=P/Q discarded_pct=D
 *
 * first_pass_ms includes the attach: populating moves the cost, it does not
 * remove it, and this is what the service pays in all. RETRACE_BENCH_QUICK=1:
 * a 32 MiB pool, one round per mode.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "retrace/retrace.h"
#include "shm/pool.h"

#define MAX_ROUNDS 7
#define RECORDS_PER_TRACE 30
#define RECORD_BYTES 1024

struct first_pass {
	double attach_ms;
	double ns_per_trace;
	double discarded_pct;
	long faults;
};

/* CPU time of this process: what the service pays, whatever else the machine
 * runs (a wall clock on a shared 2-core VM would measure the neighbours). */
static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* In the child: attach, write `traces` traces, report through `fd`. */
static int child_pass(const char *pool, int populate, uint32_t traces, int fd)
{
	static uint8_t record[RECORD_BYTES];
	struct retrace_config cfg;
	struct retrace_thread_stats st;
	struct first_pass r;
	struct rusage ru0, ru1;
	double t0, t1, t2;

	setenv("RETRACE_POPULATE", populate ? "1" : "0", 1);
	memset(record, 0x5a, sizeof record);
	retrace_config_from_env(&cfg);
	cfg.pool_name = pool;
	cfg.sample_shift = 0;
	cfg.sample_ppm = 0;
	t0 = now_ns();
	if (retrace_init(&cfg) != RETRACE_OK)
		return 1;
	t1 = now_ns();
	getrusage(RUSAGE_SELF, &ru0);
	for (uint32_t i = 0; i < traces; i++) {
		retrace_trace_id id = {0x1234, i + 1};
		retrace_begin(id);
		for (int k = 0; k < RECORDS_PER_TRACE; k++)
			retrace_tracepoint(record, sizeof record);
		retrace_end();
	}
	t2 = now_ns();
	getrusage(RUSAGE_SELF, &ru1);
	retrace_thread_stats(&st);
	r.attach_ms = (t1 - t0) / 1e6;
	r.ns_per_trace = (t2 - t1) / traces;
	r.discarded_pct = st.buffers_used + st.discard_buffers
				  ? 100.0 * (double)st.discard_buffers /
					    (double)(st.buffers_used + st.discard_buffers)
				  : 0;
	r.faults = ru1.ru_minflt - ru0.ru_minflt;
	retrace_shutdown();
	return write(fd, &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1;
}

/* One round: a fresh pool, a fresh child. */
static int one_round(const char *pool, uint32_t buffers, int populate, uint32_t traces,
		     struct first_pass *out)
{
	struct rt_pool_create_opts o;
	struct rt_pool p;
	char err[256];
	int fds[2], status, rc = 1;
	pid_t pid;

	rt_pool_create_defaults(&o);
	o.name = pool;
	o.buffer_count = buffers;
	o.replace = 1;
	o.populate = 1; /* as the agent does: the pages are zeroed here, once */
	if (rt_pool_create(&o, &p, err, sizeof err) != RETRACE_OK) {
		fprintf(stderr, "bench_first_touch: %s\n", err);
		return 1;
	}
	if (pipe(fds) != 0)
		goto out;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		_exit(child_pass(pool, populate, traces, fds[1]));
	}
	close(fds[1]);
	if (pid > 0 && read(fds[0], out, sizeof *out) == (ssize_t)sizeof *out &&
	    waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		rc = 0;
	close(fds[0]);
out:
	rt_pool_unlink(pool);
	rt_pool_detach(&p);
	if (rc)
		fprintf(stderr, "bench_first_touch: the populate=%d child failed\n", populate);
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The median of each field over n rounds (fields taken apart: a summary). */
static struct first_pass median(const struct first_pass *r, int n)
{
	double a[MAX_ROUNDS], b[MAX_ROUNDS], c[MAX_ROUNDS], d[MAX_ROUNDS];
	struct first_pass m;
	for (int i = 0; i < n; i++) {
		a[i] = r[i].attach_ms;
		b[i] = r[i].ns_per_trace;
		c[i] = (double)r[i].faults;
		d[i] = r[i].discarded_pct;
	}
	qsort(a, (size_t)n, sizeof *a, cmp_double);
	qsort(b, (size_t)n, sizeof *b, cmp_double);
	qsort(c, (size_t)n, sizeof *c, cmp_double);
	qsort(d, (size_t)n, sizeof *d, cmp_double);
	m.attach_ms = a[n / 2];
	m.ns_per_trace = b[n / 2];
	m.faults = (long)c[n / 2];
	m.discarded_pct = d[n - 1]; /* the worst round: a dirty round must show */
	return m;
}

int main(void)
{
	int quick = getenv("RETRACE_BENCH_QUICK") != NULL;
	uint32_t buffers = quick ? 1024 : 4096; /* x 32 KiB: 32 or 128 MiB */
	int rounds = quick ? 1 : 5;
	uint32_t traces = buffers / 10 * 9;
	struct first_pass lazy[MAX_ROUNDS], filled[MAX_ROUNDS], l, f;
	char pool[64];

	snprintf(pool, sizeof pool, "/rt-bench-ft-%d", (int)getpid());
	for (int i = 0; i < rounds; i++)
		if (one_round(pool, buffers, 0, traces, &lazy[i]) ||
		    one_round(pool, buffers, 1, traces, &filled[i]))
			return 1;
	l = median(lazy, rounds);
	f = median(filled, rounds);
	printf("bench client_first_touch pool_mib=%u traces=%u populate=1 attach_ms=%.2f "
	       "ns_per_trace=%.0f faults=%ld baseline=populate0 baseline_attach_ms=%.2f "
	       "baseline_ns_per_trace=%.0f baseline_faults=%ld ratio=%.3f first_pass_ms=%.1f "
	       "baseline_first_pass_ms=%.1f pass_ratio=%.3f discarded_pct=%.2f%s\n",
	       buffers / 32, traces, f.attach_ms, f.ns_per_trace, f.faults, l.attach_ms,
	       l.ns_per_trace, l.faults, f.ns_per_trace / l.ns_per_trace,
	       f.attach_ms + f.ns_per_trace * traces / 1e6,
	       l.attach_ms + l.ns_per_trace * traces / 1e6,
	       (f.attach_ms + f.ns_per_trace * traces / 1e6) /
		       (l.attach_ms + l.ns_per_trace * traces / 1e6),
	       f.discarded_pct > l.discarded_pct ? f.discarded_pct : l.discarded_pct,
	       f.discarded_pct > 0.1 || l.discarded_pct > 0.1 ? " not_a_figure=discarded" : "");
	return 0;
}
