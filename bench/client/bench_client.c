/*
 * bench_client — the client hot path against same-run baselines.
 *
 * A pool is created in-process and a drainer thread recycles buffers, so the
 * figures include buffer turnover (rare slow paths) as in production. Each
 * figure is the best of several timed rounds (shared machines drift; the best
 * round is the least disturbed), printed as one line:
 *   bench client name=... threads=T ns=X baseline=... baseline_ns=Y ratio=X/Y
 * Baselines: a memcpy of the same size into a thread-local buffer (tracepoints,
 * reserve/commit), the untraced loop body (begin/end), memcpy GB/s (throughput),
 * and for the tracer (span_start_end, log_2args) retrace_tracepoint_ts of the
 * same number of payload bytes: the raw floor of writing those events.
 * RETRACE_BENCH_QUICK=1 shortens every round (for CI smoke runs).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "retrace/retrace.h"
#include "retrace/tracer.h"
#include "shm/drain.h"

#define ROUNDS 5
#define SCRATCH 32768

static struct rt_pool bench_pool;
static volatile int drainer_stop;
static uint64_t iterations = 20000000;
static __thread uint8_t scratch[SCRATCH];
static __thread size_t scratch_pos;

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *drainer(void *arg)
{
	struct rt_drain_stats st = {0};
	(void)arg;
	while (!drainer_stop)
		if (rt_drain_poll(&bench_pool, NULL, &st) == 0)
			usleep(20);
	return NULL;
}

/* The baseline: what any logging into memory must do at least. */
static inline void baseline_copy(const void *d, size_t len)
{
	if (scratch_pos + len > SCRATCH)
		scratch_pos = 0;
	memcpy(scratch + scratch_pos, d, len);
	scratch_pos += len;
	__asm__ __volatile__("" ::: "memory");
}

enum op { OP_TICKS, OP_BASE_COPY, OP_TP, OP_TP_TS, OP_RESERVE, OP_BEGIN_END, OP_BASE_BEGIN_END,
	  OP_BEGIN_TP_END, OP_SPAN, OP_LOG2 };

/* Payload bytes of one span start + end with a 12-char name, and of one
 * "user %s paid %d" LOG with ("alice", 42): the baselines write as many. */
#define SPAN_NAME "checkout.pay" /* 12 chars */
#define SPAN_EVENT_BYTES ((2 + 9 + 9 + 1 + 9 + 1 + 12) + (2 + 9 + 9 + 1))
#define LOG2_EVENT_BYTES (2 + 9 + 9 + 1 + 9 + 6 + 1)

struct job {
	enum op op;
	size_t size;
	uint64_t n;
	double ns;
};

static void run_op(struct job *j)
{
	uint8_t data[4096];
	uint64_t i;
	retrace_trace_id id = {7, (uint64_t)(uintptr_t)&id};
	memset(data, 0x5a, sizeof data);
	retrace_begin(id);
	for (i = 0; i < j->n; i++) {
		switch (j->op) {
		case OP_BASE_COPY: baseline_copy(data, j->size); break;
		case OP_TICKS: {
			uint64_t t = retrace_ticks();
			__asm__ __volatile__("" : : "r"(t));
			break;
		}
		case OP_TP: retrace_tracepoint(data, j->size); break;
		case OP_TP_TS: retrace_tracepoint_ts(data, j->size); break;
		case OP_RESERVE: {
			void *p = retrace_reserve(j->size);
			memcpy(p, data, j->size);
			retrace_commit(j->size);
			break;
		}
		case OP_BEGIN_END:
			id.lo = i + 1;
			retrace_begin(id);
			retrace_end();
			break;
		case OP_BASE_BEGIN_END:
			id.lo = i + 1;
			__asm__ __volatile__("" : : "r"(&id) : "memory");
			break;
		case OP_BEGIN_TP_END:
			id.lo = i + 1;
			retrace_begin(id);
			retrace_tracepoint(data, j->size);
			retrace_end();
			break;
		case OP_SPAN:
			retrace_span_start(SPAN_NAME, RETRACE_SPAN_INTERNAL);
			retrace_span_end();
			break;
		case OP_LOG2:
			retrace_log(RETRACE_LOG_INFO, "user %s paid %d", "alice", 42);
			break;
		}
	}
	retrace_end();
}

static void *thread_main(void *arg)
{
	struct job *j = arg;
	double t0 = now_ns();
	run_op(j);
	j->ns = (now_ns() - t0) / (double)j->n;
	return NULL;
}

/* Best-of-ROUNDS ns per op, averaged over `threads` concurrent threads. */
static double measure(enum op op, size_t size, int threads, uint64_t n)
{
	double best = 1e30;
	int r, t;
	for (r = 0; r < ROUNDS; r++) {
		struct job jobs[2];
		pthread_t th[2];
		double sum = 0;
		for (t = 0; t < threads; t++) {
			jobs[t] = (struct job){op, size, n, 0};
			pthread_create(&th[t], NULL, thread_main, &jobs[t]);
		}
		for (t = 0; t < threads; t++) {
			pthread_join(th[t], NULL);
			sum += jobs[t].ns;
		}
		if (sum / threads < best)
			best = sum / threads;
	}
	return best;
}

static uint64_t discards_seen;

/* discards= is how many buffers fell to the discard path since the last line:
 * non-zero means the drainer fell behind and part of the figure is the (hot)
 * discard buffer, not the pool. */
static void line(const char *name, const char *extra, int threads, double ns,
		 const char *base_name, double base_ns)
{
	uint64_t d = ck_pr_load_64(&bench_pool.hdr->null_buffers);
	printf("bench client name=%s%s threads=%d ns=%.2f baseline=%s baseline_ns=%.2f ratio=%.2f "
	       "pool_mib=%u discards=%llu\n",
	       name, extra, threads, ns, base_name, base_ns, ns / base_ns,
	       (unsigned)((uint64_t)bench_pool.hdr->buffer_count * bench_pool.hdr->buffer_size >> 20),
	       (unsigned long long)(d - discards_seen));
	discards_seen = d;
}

static void bench_tracepoints(int threads)
{
	static const size_t sizes[] = {8, 32, 128, 512, 2048};
	char extra[64];
	size_t k;
	for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		uint64_t n = iterations / (sizes[k] >= 512 ? 8 : 1);
		double base = measure(OP_BASE_COPY, sizes[k], threads, n);
		snprintf(extra, sizeof extra, " size=%zu ts=0", sizes[k]);
		line("tracepoint", extra, threads, measure(OP_TP, sizes[k], threads, n), "memcpy", base);
		snprintf(extra, sizeof extra, " size=%zu ts=1", sizes[k]);
		line("tracepoint", extra, threads, measure(OP_TP_TS, sizes[k], threads, n), "memcpy", base);
		snprintf(extra, sizeof extra, " size=%zu", sizes[k]);
		line("reserve_commit", extra, threads, measure(OP_RESERVE, sizes[k], threads, n),
		     "memcpy", base);
	}
}

static void bench_begin_end(int threads)
{
	uint64_t n = iterations / 2;
	double base = measure(OP_BASE_BEGIN_END, 0, threads, n);
	line("begin_end", "", threads, measure(OP_BEGIN_END, 0, threads, n), "untraced_loop", base);
	line("begin_tracepoint32_end", "", threads, measure(OP_BEGIN_TP_END, 32, threads, n / 4),
	     "untraced_loop", base);
}

/* Tracer events against the raw timestamped tracepoint of as many bytes. */
static void bench_tracer(int threads)
{
	uint64_t n = iterations / 2;
	line("span_start_end", " name_len=12", threads, measure(OP_SPAN, 0, threads, n),
	     "tracepoint_ts", measure(OP_TP_TS, SPAN_EVENT_BYTES, threads, n));
	line("log_2args", "", threads, measure(OP_LOG2, 0, threads, n), "tracepoint_ts",
	     measure(OP_TP_TS, LOG2_EVENT_BYTES, threads, n));
}

static void bench_throughput(void)
{
	uint64_t n = iterations / 10;
	double base = measure(OP_BASE_COPY, 1024, 1, n), ns = measure(OP_TP, 1024, 1, n);
	printf("bench client name=throughput size=1024 buffer=32768 threads=1 gbps=%.2f "
	       "baseline=memcpy baseline_gbps=%.2f ratio=%.2f\n",
	       1024 / ns, 1024 / base, base / ns);
	discards_seen = ck_pr_load_64(&bench_pool.hdr->null_buffers);
}

int main(void)
{
	struct rt_pool_create_opts o;
	struct retrace_config cfg;
	char name[64], err[256];
	pthread_t dr;

	if (getenv("RETRACE_BENCH_QUICK"))
		iterations = 200000;
	rt_pool_create_defaults(&o);
	snprintf(name, sizeof name, "/rt-bench-%d", (int)getpid());
	o.name = name;
	/* 1024 x 32 KiB = 32 MiB, about this machine's L3; RETRACE_BENCH_BUFFERS overrides. */
	o.buffer_count = getenv("RETRACE_BENCH_BUFFERS")
				 ? (uint32_t)strtoul(getenv("RETRACE_BENCH_BUFFERS"), NULL, 10)
				 : 1024;
	o.replace = 1;
	if (rt_pool_create(&o, &bench_pool, err, sizeof err) != RETRACE_OK) {
		fprintf(stderr, "bench_client: %s\n", err);
		return 1;
	}
	retrace_config_from_env(&cfg);
	cfg.pool_name = name;
	if (retrace_init(&cfg) != RETRACE_OK) {
		fprintf(stderr, "bench_client: cannot attach to %s\n", name);
		return 1;
	}
	pthread_create(&dr, NULL, drainer, NULL);
	/* What a timestamp alone costs here (rdtsc; virtual machines differ). */
	line("ticks", "", 1, measure(OP_TICKS, 0, 1, iterations), "memcpy8",
	     measure(OP_BASE_COPY, 8, 1, iterations));
	bench_tracepoints(1);
	bench_begin_end(1);
	bench_tracer(1);
	bench_throughput();
	bench_tracepoints(2);
	bench_begin_end(2);
	bench_tracer(2);
	drainer_stop = 1;
	pthread_join(dr, NULL);
	printf("bench client name=pool_counters null_buffers=%llu\n",
	       (unsigned long long)bench_pool.hdr->null_buffers);
	retrace_shutdown();
	rt_pool_unlink(name);
	rt_pool_detach(&bench_pool);
	return 0;
}
