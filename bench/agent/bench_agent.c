/*
 * bench_agent — agent indexing throughput next to the reference drainer.
 *
 * One client thread (the real libretrace) fills 4 KiB buffers as fast as it can:
 * each trace is begin, 15 tracepoints of 256 bytes (one buffer's payload), end. One consumer thread
 * serves the same pool, first as the reference drainer (validate and recycle, no
 * index), then as the agent (validate, index, evict whole traces past 80 %,
 * recycle). Each phase runs for the same time; we report buffers per second
 * consumed, and the consumer's busy time (TSC cycles spent in passes that found
 * work) per million buffers, which gives its capacity on one core whether or not
 * the client kept it saturated. Null buffers (client found no free buffer) are
 * reported per phase: at 4 KiB the agent must keep the client supplied.
 *
 * Honest live figures: a buffer the client could not get went to its discard
 * buffer, which is hot, so a round with discards runs the client faster than
 * the pool allows. Each live phase runs in ROUNDS rounds; a round is *clean*
 * when <= 0.1 % of its buffers were discard buffers, the headline rate is the
 * best clean round (none printed with clean_rounds=0/N), and discarded_pct is
 * the share over all the phase's rounds. So that rounds can qualify on a
 * loaded machine, a round's client writes a burst of at most ROUND_FREE_SHARE
 * of the pool (the agent keeps it 80 % full, so the burst fits in the free
 * part even if the consumer is descheduled) and the round ends when the
 * consumer has taken the last buffer: the rate is the burst over that time.
 *
 * RETRACE_BENCH_QUICK=1 shortens the phases for CI.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"
#include "retrace/retrace.h"
#include "shm/drain.h"

static struct rt_agent agent;
static volatile int producer_stop, consumer_stop, producer_done;
static volatile uint64_t produced;
static uint64_t producer_limit = UINT64_MAX; /* traces (one buffer each) per phase */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Records per trace: 15 x 256 B fill one 4 KiB buffer's payload. */
#define RECORDS_PER_TRACE 15
#define RECORD_BYTES 256

static void *producer(void *arg)
{
	static char payload[RECORD_BYTES];
	uint64_t n = 0;
	retrace_trace_id id = { 0x1234, 1 };
	(void)arg;
	while (!producer_stop && n < producer_limit) {
		int i;
		for (i = 0; i < 64; i++) {
			id.lo++;
			int r;
			retrace_begin(id);
			for (r = 0; r < RECORDS_PER_TRACE; r++)
				retrace_tracepoint(payload, sizeof payload);
			retrace_end();
		}
		n += 64;
	}
	retrace_flush();
	produced += n;
	producer_done = 1;
	return NULL;
}

#define CLEAN_DISCARD_PCT 0.1
#define ROUND_FREE_SHARE 0.15

struct phase {
	const char *name;
	int use_agent;
	uint64_t buffers;
	uint64_t busy_ticks;
	double seconds;
	uint64_t null_buffers;
	double cpu_s;
};

/* A live phase over ROUNDS rounds: totals, and the best clean round. */
struct live {
	struct phase total;
	double best_clean_rate; /* buffers/s of the best clean round, < 0 if none */
	int clean;
};

static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Consumer loop in the calling thread while the producer runs for `secs`. */
static void run_phase(struct phase *ph, double secs)
{
	struct rt_drain_stats ds;
	pthread_t th;
	uint64_t null0 = agent.pool.hdr->null_buffers, idx0 = agent.st.buffers_indexed;
	double t0, cpu0;

	memset(&ds, 0, sizeof ds);
	producer_stop = 0;
	producer_done = 0;
	pthread_create(&th, NULL, producer, NULL);
	t0 = now_s();
	cpu0 = thread_cpu_s();
	while (1) {
		uint64_t c0 = retrace_ticks();
		unsigned int n = ph->use_agent ? rt_agent_poll(&agent)
					       : rt_drain_poll(&agent.pool, NULL, &ds);
		if (n)
			ph->busy_ticks += retrace_ticks() - c0;
		if (!producer_stop && now_s() - t0 >= secs)
			producer_stop = 1;
		if ((producer_stop || producer_done) && n == 0) {
			pthread_join(th, NULL);
			/* the producer flushed: take what is left, then stop */
			while ((ph->use_agent ? rt_agent_poll(&agent)
					      : rt_drain_poll(&agent.pool, NULL, &ds)) > 0)
				;
			break;
		}
	}
	ph->seconds = now_s() - t0;
	ph->cpu_s = thread_cpu_s() - cpu0;
	ph->buffers = ph->use_agent ? agent.st.buffers_indexed - idx0 : ds.buffers;
	ph->null_buffers = agent.pool.hdr->null_buffers - null0;
}

/*
 * Capacity, one thread: a simulated client (pop 8 free ids, write and seal their
 * headers, push 8 complete entries, as libretrace does) alternates with one
 * consumer pass; only the passes are timed (TSC). No other thread shares the
 * cache lines, so this is the consumer's own cost per buffer.
 */
static double capacity_cycles_per_buffer(int use_agent, uint64_t buffers)
{
	struct rt_pool *p = &agent.pool;
	struct rt_drain_stats ds;
	uint64_t made = 0, ticks = 0, lo = use_agent ? 1ull << 40 : 1ull << 41;
	memset(&ds, 0, sizeof ds);
	while (made < buffers) {
		struct rt_available_entry ids[8];
		struct rt_complete_entry done[8] = {{0}}; /* offset 0, flags 0: one segment per buffer */
		unsigned int round, n, i;
		for (round = 0; round < 32; round++) {
			n = rt_available_pop_batch(p->ring[RT_Q_AVAILABLE],
						   RT_POOL_SLOTS(p, RT_Q_AVAILABLE, rt_available_entry),
						   ids, 8);
			for (i = 0; i < n; i++) {
				struct rt_buffer_header *h = rt_pool_buffer(p, ids[i].buffer_id);
				h->magic = RT_BUF_MAGIC;
				h->trace_hi = 7;
				h->trace_lo = ++lo;
				h->pid = 1;
				h->seq = 0;
				h->bytes = 3900;
				h->client_slot = UINT32_MAX;
				h->first_tick = retrace_ticks();
				h->flags = RT_BUF_INUSE | RT_BUF_SEALED | RT_BUF_LAST;
				done[i].trace_lo = lo;
				done[i].buffer_id = ids[i].buffer_id;
				done[i].bytes = 3900;
			}
			rt_complete_push_batch(p->ring[RT_Q_COMPLETE],
					       RT_POOL_SLOTS(p, RT_Q_COMPLETE, rt_complete_entry),
					       done, n);
			made += n;
		}
		uint64_t c0 = retrace_ticks();
		while ((use_agent ? rt_agent_poll(&agent) : rt_drain_poll(p, NULL, &ds)) > 0)
			;
		ticks += retrace_ticks() - c0;
	}
	return (double)ticks / (double)made;
}

static void report_capacity(uint64_t buffers)
{
	double hz = (double)agent.pool.hdr->tsc_hz;
	double base = capacity_cycles_per_buffer(0, buffers);
	double idx = capacity_cycles_per_buffer(1, buffers);
	printf("bench agent name=capacity_one_core buffers=%llu buffers_per_s=%.0f ns_per_buffer=%.1f "
	       "baseline=drain baseline_buffers_per_s=%.0f baseline_ns_per_buffer=%.1f ratio=%.2f "
	       "target_buffers_per_s=10000000\n",
	       (unsigned long long)buffers, hz / idx, idx * 1e9 / hz, hz / base, base * 1e9 / hz,
	       base / idx);
}

static double discarded_pct(const struct phase *ph)
{
	uint64_t all = ph->buffers + ph->null_buffers;
	return all ? 100.0 * (double)ph->null_buffers / (double)all : 0.0;
}

static int rounds = 20;

/* `rounds` bursts (at most `secs` / rounds each), summed into one phase. */
static struct live run_live(const char *name, int use_agent, double secs)
{
	producer_limit = (uint64_t)(ROUND_FREE_SHARE * agent.pool.hdr->buffer_count) / 64u * 64u;
	struct live l = {.total = {.name = name, .use_agent = use_agent},
			 .best_clean_rate = -1};
	for (int r = 0; r < rounds; r++) {
		struct phase ph = {.name = name, .use_agent = use_agent};
		run_phase(&ph, secs / rounds);
		l.total.buffers += ph.buffers;
		l.total.busy_ticks += ph.busy_ticks;
		l.total.seconds += ph.seconds;
		l.total.null_buffers += ph.null_buffers;
		l.total.cpu_s += ph.cpu_s;
		if (discarded_pct(&ph) <= CLEAN_DISCARD_PCT) {
			double rate = (double)ph.buffers / ph.seconds;
			l.clean++;
			if (rate > l.best_clean_rate)
				l.best_clean_rate = rate;
		}
	}
	producer_limit = UINT64_MAX;
	return l;
}

static void report(const struct live *live, const struct live *base_live)
{
	const struct phase *ph = &live->total, *base = &base_live->total;
	double hz = (double)agent.pool.hdr->tsc_hz;
	double rate = live->best_clean_rate, brate = base_live->best_clean_rate;
	double busy_s = (double)ph->busy_ticks / hz, bbusy_s = (double)base->busy_ticks / hz;
	double cap = ph->buffers ? (double)ph->buffers / busy_s : 0;
	double bcap = base->buffers ? (double)base->buffers / bbusy_s : 0;
	printf("bench agent name=%s buffers=%llu", ph->name, (unsigned long long)ph->buffers);
	if (live->clean)
		printf(" buffers_per_s=%.0f", rate);
	printf(" baseline=%s", base->name);
	if (base_live->clean)
		printf(" baseline_buffers_per_s=%.0f", brate);
	if (live->clean && base_live->clean)
		printf(" ratio=%.2f", rate / brate);
	printf(" discarded_pct=%.3f clean_rounds=%d/%d baseline_discarded_pct=%.3f "
	       "baseline_clean_rounds=%d/%d\n",
	       discarded_pct(ph), live->clean, rounds, discarded_pct(base), base_live->clean,
	       rounds);
	printf("bench agent name=%s_capacity busy_buffers_per_s=%.0f busy_ms_per_million=%.2f "
	       "baseline=%s baseline_busy_buffers_per_s=%.0f ratio=%.2f\n",
	       ph->name, cap, cap > 0 ? 1e9 / cap : 0, base->name, bcap,
	       bcap > 0 ? cap / bcap : 0);
	printf("bench agent name=%s_cpu cpu_ms_per_million=%.2f null_buffers=%llu "
	       "buffer_size=%u evicted_traces=%llu\n",
	       ph->name, ph->buffers ? ph->cpu_s * 1e9 / (double)ph->buffers : 0,
	       (unsigned long long)ph->null_buffers, agent.pool.hdr->buffer_size,
	       (unsigned long long)agent.ix.st.evicted_traces);
}

/* An agent on a fresh pool of `buffers` x 4 KiB, its pages touched once. */
static int open_agent(struct rt_agent_config *cfg, uint32_t buffers, const char *tag)
{
	char err[256];
	rt_agent_config_defaults(cfg);
	snprintf(cfg->pool, sizeof cfg->pool, "/rt-bench-agent-%s-%d", tag, (int)getpid());
	cfg->buffer_count = buffers;
	cfg->buffer_size = 4096;
	cfg->unlink_at_exit = 1;
	if (rt_agent_open(&agent, cfg, err, sizeof err) != RETRACE_OK) {
		fprintf(stderr, "bench_agent: %s\n", err);
		return -1;
	}
	for (uint32_t b = 0; b < buffers; b++) {
		uint8_t *buf = (uint8_t *)rt_pool_buffer(&agent.pool, b);
		memset(buf + RT_BUF_HEADER_SIZE, 0, cfg->buffer_size - RT_BUF_HEADER_SIZE);
	}
	return 0;
}

int main(void)
{
	struct rt_agent_config cfg;
	struct retrace_config rc;
	struct phase warmup = { .name = "warmup" };
	double secs = getenv("RETRACE_BENCH_QUICK") ? 0.5 : 3.0;
	if (getenv("RETRACE_BENCH_QUICK"))
		rounds = 5;

	rt_log_level = RT_LOG_WARN;
	/* Capacity: 16384 x 4 KiB (64 MiB), the simulated client, no libretrace. */
	if (open_agent(&cfg, 16384, "cap") != 0)
		return 1;
	report_capacity(getenv("RETRACE_BENCH_QUICK") ? 500000 : 4000000);
	rt_agent_close(&agent);
	if (getenv("RETRACE_BENCH_CAPACITY_ONLY")) /* for perf/callgrind on the agent alone */
		return 0;

	/* Live: 65536 x 4 KiB (256 MiB), so a burst of 15 % is ~5 ms of writing. */
	if (open_agent(&cfg, 65536, "live") != 0)
		return 1;
	retrace_config_from_env(&rc);
	rc.pool_name = cfg.pool;
	rc.quiet = 1;
	if (retrace_init(&rc) != RETRACE_OK) {
		fprintf(stderr, "bench_agent: cannot attach to %s\n", cfg.pool);
		rt_agent_close(&agent);
		return 1;
	}
	run_phase(&warmup, 0.2); /* the client's first buffers and the index's growth */
	struct live drain = run_live("drain", 0, secs);
	struct live index = run_live("index", 1, secs);
	report(&index, &drain);
	printf("bench agent name=drain_cpu null_buffers=%llu\n",
	       (unsigned long long)drain.total.null_buffers);
	printf("bench agent name=producer traces_written=%llu\n", (unsigned long long)produced);
	if (getenv("RETRACE_BENCH_DEBUG")) {
		char buf[8192];
		rt_agent_status(&agent, 0, buf, sizeof buf);
		fprintf(stderr, "polls=%llu idle=%llu\n", (unsigned long long)agent.st.polls,
			(unsigned long long)agent.st.idle_polls);
		fputs(buf, stderr);
	}
	retrace_shutdown();
	rt_agent_close(&agent);
	return 0;
}
