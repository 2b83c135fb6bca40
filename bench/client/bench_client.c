/*
 * bench_client — the client hot path against same-run baselines.
 *
 * A pool is created in-process and a drainer thread recycles buffers, as the
 * agent would, so the figures include buffer turnover (rare slow paths) as in
 * production. Each figure is timed in ROUNDS rounds, printed as one line:
 *   bench client name=... threads=T ns=X baseline=... baseline_ns=Y ratio=X/Y
 *                discarded_pct=D clean_rounds=C/ROUNDS
 *
 * Honest figures: a write that finds no free buffer goes to the thread's
 * discard buffer, which is hot and costs a memcpy, so a round that discarded
 * flatters. Each round counts its threads' buffers and discard-buffer
 * fallbacks (retrace_thread_stats); discarded_pct is the share of the line's
 * buffers, all rounds together, that were discard buffers, and only rounds
 * with <= 0.1 % discarded are *clean*. The headline ns= is the best clean
 * round; a line with no clean round prints clean_rounds=0/N and no ns=. To let
 * rounds qualify on a loaded machine, a round writes at most ROUND_POOL_SHARE
 * of the pool (so it fits even if the drainer gets no CPU during it), and the
 * next round starts only once the drainer has gone idle (everything returned).
 *
 * Baselines: a memcpy of the same size into a thread-local buffer (tracepoints,
 * reserve/commit), the untraced loop body (begin/end), memcpy GB/s (throughput),
 * and for the tracer (span_start_end, log_2args) retrace_tracepoint_ts of the
 * same number of payload bytes: the raw floor of writing those events. For
 * 512 B and 2 KiB records a second baseline, pool_copy: the same framed record
 * copied into the same pool memory in the same buffer order (buffer ids popped
 * from the pool's available queue in batches, as the client takes them, and
 * pushed back when full) — the physical limit of writing into the pool with
 * ordinary stores; and pool_stream, the same walk with non-temporal stores (no
 * read of the cold lines before writing them, an sfence per buffer): the fastest
 * any store can put those bytes into that memory, so a target below it cannot be
 * met by any copy on this machine.
 * RETRACE_BENCH_QUICK=1 shortens every round (for CI smoke runs);
 * RETRACE_BENCH_ONLY_TRACEPOINTS=1 runs the tracepoint lines alone.
 */
#include <emmintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "retrace/retrace.h"
#include "retrace/tracer.h"
#include "adaptive/policy_table.h"
#include "shm/drain.h"

#define ROUNDS 5
#define SCRATCH 32768
#define CLEAN_DISCARD_PCT 0.1
#define ROUND_POOL_SHARE 0.6 /* of the pool's bytes one round may write */
#define COPY_BATCH 8         /* buffer ids per queue op, the client's default */

static struct rt_pool bench_pool;
static volatile int drainer_stop;
static volatile uint64_t drainer_idle_polls;
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
		if (rt_drain_poll(&bench_pool, NULL, &st) == 0) {
			drainer_idle_polls++;
			usleep(20);
		}
	return NULL;
}

/* Wait until the drainer found nothing to do twice (at most ~1 s): every
 * buffer the last round completed is back on the available queue. */
static void settle(void)
{
	uint64_t seen = drainer_idle_polls;
	for (int i = 0; i < 20000 && drainer_idle_polls < seen + 2; i++)
		usleep(50);
}

/*
 * pool_copy: the same framed record into the same pool memory, in the order
 * the client walks it. Buffer ids come from the available queue COPY_BATCH at
 * a time, as the client takes them; full ones are kept and go back to the
 * queue after the round (outside the timing), as the drainer would return
 * them: the queue is FIFO, so the walk cycles through the pool like client +
 * drainer do. Pushing them back during the round would make the copying
 * threads producers of the available ring, which the client never is (two
 * producers wait on each other's commits: a cost that is not the copy's).
 */
#define COPY_HELD 8192
static __thread uint32_t copy_ids[COPY_BATCH], copy_n_ids, copy_full[COPY_HELD], copy_n_full;
static __thread uint8_t *copy_cur, *copy_end;

static void copy_push(const uint32_t *ids, uint32_t n)
{
	struct rt_available_entry back[COPY_BATCH];
	for (uint32_t i = 0; i < n; i++)
		back[i].buffer_id = ids[i];
	if (n)
		rt_available_push_batch(bench_pool.ring[RT_Q_AVAILABLE],
					RT_POOL_SLOTS(&bench_pool, RT_Q_AVAILABLE, rt_available_entry),
					back, n);
}

static int copy_next_buffer(void)
{
	if (copy_n_full == COPY_HELD) { /* a pool larger than the default: give some back */
		for (uint32_t i = 0; i < copy_n_full; i += COPY_BATCH)
			copy_push(copy_full + i, COPY_BATCH);
		copy_n_full = 0;
	}
	if (copy_n_ids == 0) {
		struct rt_available_entry in[COPY_BATCH];
		uint32_t n = rt_available_pop_batch(
			bench_pool.ring[RT_Q_AVAILABLE],
			RT_POOL_SLOTS(&bench_pool, RT_Q_AVAILABLE, rt_available_entry), in, COPY_BATCH);
		for (uint32_t i = 0; i < n; i++)
			copy_ids[n - 1 - i] = in[i].buffer_id;
		copy_n_ids = n;
		if (n == 0)
			return 0;
	}
	uint32_t id = copy_ids[--copy_n_ids];
	uint8_t *b = (uint8_t *)rt_pool_buffer(&bench_pool, id);
	copy_full[copy_n_full++] = id;
	copy_cur = b + RT_BUF_HEADER_SIZE;
	copy_end = b + bench_pool.hdr->buffer_size;
	return 1;
}

static inline void pool_copy(const void *d, size_t len)
{
	if ((size_t)(copy_end - copy_cur) < len + RETRACE_FRAME_HDR + RETRACE_FRAME_TERM &&
	    !copy_next_buffer())
		return; /* pool empty: cannot happen with the round sizes used */
	uint32_t h = (uint32_t)len << 4;
	memcpy(copy_cur, &h, sizeof h);
	memcpy(copy_cur + RETRACE_FRAME_HDR, d, len);
	copy_cur += RETRACE_FRAME_HDR + len;
	__asm__ __volatile__("" ::: "memory");
}

/* pool_copy with non-temporal stores: whole 16-byte words streamed, the unaligned
 * head and tail stored as usual; an sfence before the next buffer (and at the end
 * of the round) orders them as a publishing client would have to. */
static inline void pool_stream(const void *d, size_t len)
{
	if ((size_t)(copy_end - copy_cur) < len + RETRACE_FRAME_HDR + RETRACE_FRAME_TERM) {
		_mm_sfence();
		if (!copy_next_buffer())
			return;
	}
	uint32_t h = (uint32_t)len << 4;
	memcpy(copy_cur, &h, sizeof h);
	uint8_t *dst = copy_cur + RETRACE_FRAME_HDR;
	const uint8_t *src = d;
	size_t head = (size_t)(-(uintptr_t)dst & 15);
	if (head > len)
		head = len;
	memcpy(dst, src, head);
	size_t i = head;
	for (; i + 16 <= len; i += 16)
		_mm_stream_si128((__m128i *)(dst + i), _mm_loadu_si128((const __m128i *)(src + i)));
	memcpy(dst + i, src + i, len - i);
	copy_cur += RETRACE_FRAME_HDR + len;
	__asm__ __volatile__("" ::: "memory");
}

/* Give back every buffer the thread's copies hold. */
static void pool_copy_done(void)
{
	for (uint32_t i = 0; i < copy_n_full; i += COPY_BATCH)
		copy_push(copy_full + i,
			  copy_n_full - i < COPY_BATCH ? copy_n_full - i : COPY_BATCH);
	copy_push(copy_ids, copy_n_ids);
	copy_n_full = copy_n_ids = 0;
	copy_cur = copy_end = NULL;
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

enum op { OP_TICKS, OP_BASE_COPY, OP_POOL_COPY, OP_POOL_STREAM, OP_TP, OP_TP_TS, OP_RESERVE, OP_BEGIN_END, OP_BASE_BEGIN_END,
	  OP_BEGIN_TP_END, OP_SPAN, OP_LOG2, OP_BEGIN_END_KEPT, OP_BEGIN_END_DECIDE,
	  OP_SPAN_NESTED_NO_TABLE, OP_SPAN_NESTED_TABLE };

/*
 * The sampling decision's cost in begin (issue 14: <= 2 ns). Both ops begin and
 * end the same traces, all of which are recorded either way (ids the hash keeps
 * at 1/4, cycled); OP_BEGIN_END_DECIDE runs with RETRACE_TRACE_PERCENT=30, so
 * every begin makes the §2.9 choice between 1/2 and 1/4 and the keep decision,
 * OP_BEGIN_END_KEPT at rate 1 makes neither. The difference is the decision.
 */
#define DECIDE_PPM 300000u
#define KEPT_IDS 4096u
static retrace_trace_id kept_ids[KEPT_IDS];
static struct retrace_config bench_cfg;
static uint32_t bench_ppm; /* the sample_ppm the client runs with now */

static void rate_for(enum op op)
{
	uint32_t ppm = op == OP_BEGIN_END_DECIDE ? DECIDE_PPM : 0;
	if (ppm == bench_ppm)
		return; /* between rounds only: no thread is in begin */
	bench_cfg.sample_ppm = ppm;
	bench_cfg.sample_shift = 0;
	retrace_init(&bench_cfg);
	bench_ppm = ppm;
}

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
	uint64_t buffers;  /* real buffers the thread filled in the round */
	uint64_t discards; /* discard-buffer fallbacks in the round */
};

static void run_op(struct job *j)
{
	uint8_t data[4096];
	uint64_t i;
	retrace_trace_id id = {7, (uint64_t)(uintptr_t)&id};
	memset(data, 0x5a, sizeof data);
	retrace_begin(id);
	/* The adaptive policy applies to nested spans only (a root is never
	 * dropped): these run under an outer span. */
	if (j->op == OP_SPAN_NESTED_NO_TABLE || j->op == OP_SPAN_NESTED_TABLE)
		retrace_span_start("outer", RETRACE_SPAN_SERVER);
	for (i = 0; i < j->n; i++) {
		switch (j->op) {
		case OP_BASE_COPY: baseline_copy(data, j->size); break;
		case OP_POOL_COPY: pool_copy(data, j->size); break;
		case OP_POOL_STREAM: pool_stream(data, j->size); break;
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
		case OP_SPAN_NESTED_NO_TABLE:
		case OP_SPAN_NESTED_TABLE:
			retrace_span_start(SPAN_NAME, RETRACE_SPAN_INTERNAL);
			retrace_span_end();
			break;
		case OP_LOG2:
			retrace_log(RETRACE_LOG_INFO, "user %s paid %d", "alice", 42);
			break;
		case OP_BEGIN_END_KEPT:
		case OP_BEGIN_END_DECIDE:
			retrace_begin(kept_ids[i % KEPT_IDS]);
			retrace_end();
			break;
		}
	}
	retrace_end();
}

static void *thread_main(void *arg)
{
	struct job *j = arg;
	struct retrace_thread_stats before, after;
	retrace_thread_stats(&before);
	double t0 = now_ns();
	run_op(j);
	if (j->op == OP_POOL_STREAM)
		_mm_sfence(); /* the round's last streamed stores, timed */
	j->ns = (now_ns() - t0) / (double)j->n;
	if (j->op == OP_POOL_COPY || j->op == OP_POOL_STREAM)
		pool_copy_done(); /* the drainer's part: not timed */
	retrace_flush();
	retrace_thread_stats(&after);
	j->buffers = after.buffers_used - before.buffers_used;
	j->discards = after.discard_buffers - before.discard_buffers;
	return NULL;
}

/* Pool bytes one op writes (a whole buffer when each op is a new trace). */
static double op_bytes(enum op op, size_t size)
{
	switch (op) {
	case OP_TP:
	case OP_RESERVE:
	case OP_POOL_COPY:
	case OP_POOL_STREAM: return (double)(size + RETRACE_FRAME_HDR);
	case OP_TP_TS: return (double)(size + RETRACE_FRAME_HDR + 8);
	case OP_BEGIN_TP_END: return (double)bench_pool.hdr->buffer_size;
	case OP_SPAN:
	case OP_SPAN_NESTED_NO_TABLE:
	case OP_SPAN_NESTED_TABLE: return 2.0 * (RETRACE_FRAME_HDR + 8) + SPAN_EVENT_BYTES;
	case OP_LOG2: return RETRACE_FRAME_HDR + 8 + LOG2_EVENT_BYTES;
	default: return 0; /* writes nothing into the pool */
	}
}

/* One figure: the best clean round, how many rounds were clean, the share of
 * all its rounds' buffers that were discard buffers. */
struct figure {
	double ns; /* best clean round; < 0 when no round was clean */
	double any_ns; /* best round, clean or not (baselines have no discards) */
	int clean;
	double discarded_pct;
};

/* Ops per round for `op` at `size`: capped so that a round writes at most
 * ROUND_POOL_SHARE of the pool. */
static uint64_t round_ops(enum op op, size_t size, int threads, uint64_t n)
{
	double per_op = op_bytes(op, size);
	double budget = ROUND_POOL_SHARE * (double)bench_pool.hdr->buffer_count *
			(double)bench_pool.hdr->buffer_size / threads;
	if (per_op > 0 && (double)n * per_op > budget)
		n = (uint64_t)(budget / per_op);
	return n ? n : 1;
}

/*
 * The span-site policy table for the span_start figure: present = 1000 sites
 * (a full table of the default pool size) with this span's site among them at
 * p = 1 (so the same events are written as without a table: the figure is the
 * check alone); absent = an empty table published (clients see "nothing to
 * look up" after the same loads a table-less pool costs, and no hashing).
 * Published between rounds, never while a round runs (one publisher).
 */
static void bench_policy(int present)
{
	static uint64_t sites[1000];
	static double probs[1000];
	const char *svc = "bench_client"; /* set in main */
	size_t i;
	if (!present) {
		rt_pool_policy_publish(&bench_pool, NULL, NULL, 0);
		return;
	}
	for (i = 0; i < 1000; i++) {
		char op[32];
		int n = snprintf(op, sizeof op, "site-%zu", i);
		sites[i] = rt_adapt_site_hash(svc, strlen(svc), op, (size_t)n);
		probs[i] = 0.05 + 0.9 * (double)(i % 10) / 10.0;
	}
	sites[0] = rt_adapt_site_hash(svc, strlen(svc), SPAN_NAME, strlen(SPAN_NAME));
	probs[0] = 1.0;
	if (rt_pool_policy_publish(&bench_pool, sites, probs, 1000) != 0)
		fprintf(stderr, "bench_client: the policy table did not take 1000 sites\n");
}

/* One timed round of `op` on `threads` threads, into f. */
static void one_round(struct figure *f, enum op op, size_t size, int threads, uint64_t n,
		      uint64_t *buffers, uint64_t *discards)
{
	struct job jobs[2];
	pthread_t th[2];
	double sum = 0;
	uint64_t rb = 0, rd = 0;
	rate_for(op);
	settle();
	if (op == OP_SPAN_NESTED_NO_TABLE || op == OP_SPAN_NESTED_TABLE)
		bench_policy(op == OP_SPAN_NESTED_TABLE);
	for (int t = 0; t < threads; t++) {
		jobs[t] = (struct job){op, size, n, 0, 0, 0};
		pthread_create(&th[t], NULL, thread_main, &jobs[t]);
	}
	for (int t = 0; t < threads; t++) {
		pthread_join(th[t], NULL);
		sum += jobs[t].ns;
		rb += jobs[t].buffers;
		rd += jobs[t].discards;
	}
	double ns = sum / threads;
	*buffers += rb;
	*discards += rd;
	if (ns < f->any_ns)
		f->any_ns = ns;
	if (rb + rd == 0 || 100.0 * (double)rd / (double)(rb + rd) <= CLEAN_DISCARD_PCT) {
		f->clean++;
		if (f->ns < 0 || ns < f->ns)
			f->ns = ns;
	}
}

/*
 * Several ops at one size in interleaved rounds (round r of every op before
 * round r + 1 of any), so that a figure and its baselines see the same
 * machine: on a loaded host, conditions drift between back-to-back blocks.
 */
#define MAX_OPS 6
static void measure_figures(const enum op *ops, int n_ops, size_t size, int threads, uint64_t n,
			    struct figure *out)
{
	uint64_t buffers[MAX_OPS] = {0}, discards[MAX_OPS] = {0};
	for (int i = 0; i < n_ops; i++)
		out[i] = (struct figure){-1, 1e30, 0, 0};
	for (int r = 0; r < ROUNDS; r++)
		for (int i = 0; i < n_ops; i++)
			one_round(&out[i], ops[i], size, threads, round_ops(ops[i], size, threads, n),
				  &buffers[i], &discards[i]);
	for (int i = 0; i < n_ops; i++) {
		uint64_t all = buffers[i] + discards[i];
		out[i].discarded_pct = all ? 100.0 * (double)discards[i] / (double)all : 0.0;
	}
}

static struct figure measure_figure(enum op op, size_t size, int threads, uint64_t n)
{
	struct figure f;
	measure_figures(&op, 1, size, threads, n, &f);
	return f;
}

/* A baseline: no pool writes that could be discarded, so the best round. */
static double measure(enum op op, size_t size, int threads, uint64_t n)
{
	return measure_figure(op, size, threads, n).any_ns;
}

static const char *pool_mib(void)
{
	static char buf[32];
	snprintf(buf, sizeof buf, "%u",
		 (unsigned)((uint64_t)bench_pool.hdr->buffer_count * bench_pool.hdr->buffer_size >> 20));
	return buf;
}

static int line_rounds = ROUNDS; /* rounds behind the next line (clean_rounds=C/N) */

/* One line: the headline only from clean rounds; `more` appends key=values. */
static void line_more(const char *name, const char *extra, int threads, struct figure f,
		      const char *base_name, double base_ns, const char *more)
{
	printf("bench client name=%s%s threads=%d", name, extra, threads);
	if (f.clean > 0)
		printf(" ns=%.2f", f.ns);
	printf(" baseline=%s baseline_ns=%.2f", base_name, base_ns);
	if (f.clean > 0)
		printf(" ratio=%.2f", f.ns / base_ns);
	printf(" discarded_pct=%.3f clean_rounds=%d/%d pool_mib=%s%s\n", f.discarded_pct, f.clean,
	       line_rounds, pool_mib(), more);
}

static void line(const char *name, const char *extra, int threads, struct figure f,
		 const char *base_name, double base_ns)
{
	line_more(name, extra, threads, f, base_name, base_ns, "");
}

static void bench_tracepoints(int threads)
{
	static const size_t sizes[] = {8, 32, 128, 512, 2048};
	char extra[64];
	size_t k;
	for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		uint64_t n = iterations / (sizes[k] >= 512 ? 8 : 1);
		/* The figures and their baselines in interleaved rounds. */
		static const enum op ops[] = {OP_BASE_COPY, OP_TP, OP_TP_TS, OP_RESERVE, OP_POOL_COPY,
					      OP_POOL_STREAM};
		struct figure f[MAX_OPS];
		int with_copy = sizes[k] >= 512;
		measure_figures(ops, with_copy ? 6 : 4, sizes[k], threads, n, f);
		double base = f[0].any_ns;
		snprintf(extra, sizeof extra, " size=%zu ts=0", sizes[k]);
		if (with_copy) {
			/* The physical limit: the same record into the same pool memory. */
			double copy = f[4].any_ns, stream = f[5].any_ns;
			char more[160] = "";
			if (f[1].clean > 0)
				snprintf(more, sizeof more,
					 " pool_copy_ns=%.2f ratio_pool_copy=%.2f pool_stream_ns=%.2f"
					 " ratio_pool_stream=%.2f",
					 copy, f[1].ns / copy, stream, f[1].ns / stream);
			else
				snprintf(more, sizeof more, " pool_copy_ns=%.2f pool_stream_ns=%.2f", copy,
					 stream);
			line_more("tracepoint", extra, threads, f[1], "memcpy", base, more);
		} else {
			line("tracepoint", extra, threads, f[1], "memcpy", base);
		}
		snprintf(extra, sizeof extra, " size=%zu ts=1", sizes[k]);
		line("tracepoint", extra, threads, f[2], "memcpy", base);
		snprintf(extra, sizeof extra, " size=%zu", sizes[k]);
		line("reserve_commit", extra, threads, f[3], "memcpy", base);
	}
}

static void bench_begin_end(int threads)
{
	uint64_t n = iterations / 2;
	double base = measure(OP_BASE_BEGIN_END, 0, threads, n);
	line("begin_end", "", threads, measure_figure(OP_BEGIN_END, 0, threads, n), "untraced_loop",
	     base);
	line("begin_tracepoint32_end", "", threads,
	     measure_figure(OP_BEGIN_TP_END, 32, threads, n / 4), "untraced_loop", base);
}

/* begin + end with the sampling decision against the same without it. */
static void bench_begin_decision(int threads)
{
	static const enum op ops[] = {OP_BEGIN_END_KEPT, OP_BEGIN_END_DECIDE};
	struct figure f[2];
	char more[64];
	uint64_t n = iterations / 2;
	uint32_t found = 0;
	for (uint64_t x = 1; found < KEPT_IDS; x++) {
		retrace_trace_id id = {7, x * 0x9E3779B97F4A7C15ull};
		if (retrace_sampled(id, 2))
			kept_ids[found++] = id;
	}
	measure_figures(ops, 2, 0, threads, n, f);
	snprintf(more, sizeof more, " added_ns=%.2f", f[1].ns - f[0].ns);
	line_more("begin_end_sampling_decision", " rate_pct=30", threads, f[1], "begin_end_rate1",
		  f[0].clean ? f[0].ns : f[0].any_ns, more);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The adaptive policy check (docs/adaptive.md): a nested span start + end
 * with a 1000-site table vs without. A few nanoseconds on a shared machine:
 * many short rounds, the two alternating (which goes first alternates too),
 * each figure its best round (added_ns); and the median over rounds of the
 * difference within a round's pair (added_ns_paired_median), which a lucky
 * or unlucky single round does not move. */
#define POLICY_ROUNDS 200
static void bench_span_policy(void)
{
	struct figure f[2] = {{-1, 1e30, 0, 0}, {-1, 1e30, 0, 0}};
	uint64_t buffers[2] = {0}, discards[2] = {0};
	uint64_t n = iterations / POLICY_ROUNDS ? iterations / POLICY_ROUNDS : 1;
	double diff[POLICY_ROUNDS];
	char more[128] = "";
	for (int r = 0; r < POLICY_ROUNDS; r++) {
		double d[2];
		for (int i = 0; i < 2; i++) {
			int k = (r & 1) ? 1 - i : i;
			struct figure t = {-1, 1e30, 0, 0};
			one_round(&t, k ? OP_SPAN_NESTED_TABLE : OP_SPAN_NESTED_NO_TABLE, 0, 1,
				  round_ops(OP_SPAN_NESTED_TABLE, 0, 1, n), &buffers[k], &discards[k]);
			d[k] = t.any_ns;
			if (t.any_ns < f[k].any_ns)
				f[k].any_ns = t.any_ns;
			f[k].clean += t.clean;
			if (t.clean && (f[k].ns < 0 || t.ns < f[k].ns))
				f[k].ns = t.ns;
		}
		diff[r] = d[1] - d[0];
	}
	qsort(diff, POLICY_ROUNDS, sizeof diff[0], cmp_double);
	for (int k = 0; k < 2; k++)
		f[k].discarded_pct = buffers[k] + discards[k]
					     ? 100.0 * (double)discards[k] / (double)(buffers[k] + discards[k])
					     : 0.0;
	if (f[0].clean > 0 && f[1].clean > 0)
		snprintf(more, sizeof more, " rounds=%d added_ns=%.2f added_ns_paired_median=%.2f",
			 POLICY_ROUNDS, f[1].ns - f[0].ns,
			 (diff[POLICY_ROUNDS / 2 - 1] + diff[POLICY_ROUNDS / 2]) / 2);
	line_rounds = POLICY_ROUNDS;
	line_more("span_start_policy", " name_len=12 table_sites=1000", 1, f[1], "no_table",
		  f[0].clean ? f[0].ns : f[0].any_ns, more);
	line_rounds = ROUNDS;
	rt_pool_policy_publish(&bench_pool, NULL, NULL, 0);
}

/* Tracer events against the raw timestamped tracepoint of as many bytes. */
static void bench_tracer(int threads)
{
	uint64_t n = iterations / 2;
	struct figure span_floor = measure_figure(OP_TP_TS, SPAN_EVENT_BYTES, threads, n);
	struct figure log_floor = measure_figure(OP_TP_TS, LOG2_EVENT_BYTES, threads, n);
	/* The floors write into the pool too: their best clean round, else none. */
	line("span_start_end", " name_len=12", threads, measure_figure(OP_SPAN, 0, threads, n),
	     "tracepoint_ts", span_floor.clean ? span_floor.ns : span_floor.any_ns);
	line("log_2args", "", threads, measure_figure(OP_LOG2, 0, threads, n), "tracepoint_ts",
	     log_floor.clean ? log_floor.ns : log_floor.any_ns);
	if (threads == 1)
		bench_span_policy();
}

static void bench_throughput(void)
{
	uint64_t n = iterations / 10;
	double base = measure(OP_BASE_COPY, 1024, 1, n);
	struct figure f = measure_figure(OP_TP, 1024, 1, n);
	printf("bench client name=throughput size=1024 buffer=%u threads=1", bench_pool.hdr->buffer_size);
	if (f.clean)
		printf(" gbps=%.2f", 1024 / f.ns);
	printf(" baseline=memcpy baseline_gbps=%.2f", 1024 / base);
	if (f.clean)
		printf(" ratio=%.2f", base / f.ns);
	printf(" discarded_pct=%.3f clean_rounds=%d/%d\n", f.discarded_pct, f.clean, ROUNDS);
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
	/* 4096 x 32 KiB = 128 MiB, 4x this machine's L3, so that a round can write
	 * ROUND_POOL_SHARE of it with no recycling at all; RETRACE_BENCH_BUFFERS
	 * overrides. */
	o.buffer_count = getenv("RETRACE_BENCH_BUFFERS")
				 ? (uint32_t)strtoul(getenv("RETRACE_BENCH_BUFFERS"), NULL, 10)
				 : 4096;
	o.replace = 1;
	if (rt_pool_create(&o, &bench_pool, err, sizeof err) != RETRACE_OK) {
		fprintf(stderr, "bench_client: %s\n", err);
		return 1;
	}
	retrace_config_from_env(&cfg);
	cfg.pool_name = name;
	cfg.sample_shift = 0; /* every figure at rate 1 but the decision's */
	cfg.sample_ppm = 0;
	bench_cfg = cfg;
	if (retrace_init(&cfg) != RETRACE_OK) {
		fprintf(stderr, "bench_client: cannot attach to %s\n", name);
		return 1;
	}
	retrace_set_service_name("bench_client"); /* the policy table's sites name it */
	/* First touch of the pool's pages here, not in the first figure's rounds. */
	for (uint32_t b = 0; b < bench_pool.hdr->buffer_count; b++) {
		uint8_t *buf = (uint8_t *)rt_pool_buffer(&bench_pool, b);
		memset(buf + RT_BUF_HEADER_SIZE, 0, bench_pool.hdr->buffer_size - RT_BUF_HEADER_SIZE);
	}
	pthread_create(&dr, NULL, drainer, NULL);
	if (getenv("RETRACE_BENCH_ONLY_POLICY")) { /* just the policy line */
		bench_span_policy();
		goto out;
	}
	if (getenv("RETRACE_BENCH_ONLY_TRACEPOINTS")) { /* the tracepoint lines alone */
		bench_tracepoints(1);
		bench_tracepoints(2);
		goto out;
	}
	/* What a timestamp alone costs here (rdtsc; virtual machines differ). */
	line("ticks", "", 1, measure_figure(OP_TICKS, 0, 1, iterations), "memcpy8",
	     measure(OP_BASE_COPY, 8, 1, iterations));
	bench_tracepoints(1);
	bench_begin_end(1);
	bench_begin_decision(1);
	bench_tracer(1);
	bench_throughput();
	bench_tracepoints(2);
	bench_begin_end(2);
	bench_begin_decision(2);
	bench_tracer(2);
out:
	drainer_stop = 1;
	pthread_join(dr, NULL);
	printf("bench client name=pool_counters null_buffers=%llu\n",
	       (unsigned long long)bench_pool.hdr->null_buffers);
	retrace_shutdown();
	rt_pool_unlink(name);
	rt_pool_detach(&bench_pool);
	return 0;
}
