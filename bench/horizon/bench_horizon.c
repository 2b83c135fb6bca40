/*
 * bench_horizon — the event horizon and pool utilisation, traces sharing a
 * writer's buffer (layout=new, ABI 5) against one trace per buffer (layout=old,
 * RETRACE_ONE_TRACE_PER_BUFFER=1: the writer leaves its buffer at every end,
 * which is the layout before ABI 5), in the same run.
 *
 * One thread is both the service (the real libretrace: begin, records, end)
 * and, after every trace, the agent (rt_agent_poll until idle: index, evict past
 * 80 %, recycle). Traces of a fixed size stream at a fixed request rate
 * (RATE_PER_S); time is counted in traces, so the figures do not depend on how
 * fast this machine runs the loop: trace k is written at k / RATE_PER_S
 * seconds. A trace's age when it is evicted is the event horizon a trigger
 * must beat; we print its median and minimum over every evicted trace
 * (horizon_s, horizon_min_s), the share of evicted traces a trigger fired 1 s
 * and 10 s after the request would still have found (capture_1s/_10s), and the
 * pool's utilisation: bytes of records the agent holds over the bytes of the
 * buffers not free (averaged over the steady state, after the first eviction).
 * ratio = this layout's horizon over the old layout's in the same run.
 *
 * Pools of 10 and 100 MiB of 32 KiB buffers; traces of 500 B, 4 KiB, 64 KiB.
 * RETRACE_BENCH_QUICK=1: the 10 MiB pool only, and fewer traces.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"
#include "retrace/retrace.h"

#define RATE_PER_S 1000.0 /* requests per second (the service ran ~700) */
#define POLL_EVERY 1u
#define BUFFER_SIZE (32u * 1024u)

struct result {
	double utilisation, horizon_s, horizon_min_s, capture_1s, capture_10s;
	uint64_t evicted, traces;
};

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return a < b ? -1 : a > b;
}

/* Record bytes held by the agent over the bytes of the buffers not free. */
static double utilisation(const struct rt_agent *a)
{
	uint64_t total = a->pool.geo.buffer_count, free_now = rt_agent_free_buffers(a);
	uint64_t used = total > free_now ? total - free_now : 0;
	return used ? (double)a->seg.data_bytes / ((double)used * a->pool.geo.buffer_size) : 0;
}

static void write_trace(uint64_t k, uint32_t trace_bytes)
{
	static uint8_t rec[256];
	uint32_t left = trace_bytes;
	retrace_begin((retrace_trace_id){ 0x4052, k });
	while (left > 0) { /* records of 256 bytes, the last one what is left */
		uint32_t len = left < sizeof rec ? left : (uint32_t)sizeof rec;
		memcpy(rec, &k, sizeof k);
		retrace_tracepoint(rec, len);
		left -= len;
	}
	retrace_end();
}

static int run(uint32_t pool_mib, uint32_t trace_bytes, int old_layout, int quick,
	       struct result *r)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct retrace_config rc;
	char err[512];
	uint64_t k, n, next_unchecked = 1, util_samples = 0;
	uint32_t *ages, nages = 0;
	double util_sum = 0;

	memset(r, 0, sizeof *r);
	rt_agent_config_defaults(&cfg);
	snprintf(cfg.pool, sizeof cfg.pool, "/rt-bench-horizon-%d", (int)getpid());
	cfg.buffer_size = BUFFER_SIZE;
	cfg.buffer_count = (uint32_t)(((uint64_t)pool_mib << 20) / BUFFER_SIZE);
	cfg.unlink_at_exit = 1;
	cfg.replace = 1;
	if (rt_agent_open(&a, &cfg, err, sizeof err) != RETRACE_OK) {
		fprintf(stderr, "bench_horizon: %s\n", err);
		return -1;
	}
	if (old_layout)
		setenv("RETRACE_ONE_TRACE_PER_BUFFER", "1", 1);
	else
		unsetenv("RETRACE_ONE_TRACE_PER_BUFFER");
	retrace_config_from_env(&rc);
	rc.pool_name = cfg.pool;
	rc.quiet = 1;
	rc.sample_shift = 0;
	rc.head_shift = 0;
	if (retrace_init(&rc) != RETRACE_OK) {
		fprintf(stderr, "bench_horizon: cannot attach to %s\n", cfg.pool);
		rt_agent_close(&a);
		return -1;
	}
	/* enough traces to fill the pool (as the new layout packs it) a few times */
	n = (uint64_t)(quick ? 2.5 : 4.0) * ((double)((uint64_t)pool_mib << 20) / (trace_bytes + 160));
	if (n < 2000)
		n = 2000;
	ages = malloc(n * sizeof *ages);
	if (!ages)
		return -1;
	for (k = 1; k <= n; k++) {
		write_trace(k, trace_bytes);
		if (k % POLL_EVERY)
			continue;
		while (rt_agent_poll(&a) > 0)
			;
		/* every trace older than the LRU's oldest is gone: evicted at about k */
		{
			uint32_t t = rt_index_lru_oldest(&a.ix);
			uint64_t oldest = t == RT_INDEX_NONE ? k + 1 : a.ix.traces[t].lo;
			while (next_unchecked < oldest && next_unchecked <= k) {
				ages[nages++] = (uint32_t)(k - next_unchecked);
				next_unchecked++;
			}
		}
		if (a.ix.st.evicted_traces > 0) {
			util_sum += utilisation(&a);
			util_samples++;
		}
	}
	r->traces = n;
	r->evicted = a.ix.st.evicted_traces;
	r->utilisation = util_samples ? util_sum / (double)util_samples : utilisation(&a);
	if (nages) {
		uint32_t i, c1 = 0, c10 = 0;
		qsort(ages, nages, sizeof *ages, cmp_u32);
		r->horizon_s = ages[nages / 2] / RATE_PER_S;
		r->horizon_min_s = ages[0] / RATE_PER_S;
		for (i = 0; i < nages; i++) {
			c1 += ages[i] >= 1.0 * RATE_PER_S;
			c10 += ages[i] >= 10.0 * RATE_PER_S;
		}
		r->capture_1s = (double)c1 / nages;
		r->capture_10s = (double)c10 / nages;
	}
	free(ages);
	retrace_shutdown();
	rt_agent_close(&a);
	return 0;
}

static void print(uint32_t trace_bytes, uint32_t pool_mib, const char *layout,
		  const struct result *r, double ratio)
{
	printf("bench horizon trace_bytes=%u pool_mib=%u layout=%s utilisation=%.3f horizon_s=%.2f "
	       "horizon_min_s=%.2f capture_1s=%.3f capture_10s=%.3f evicted=%llu traces=%llu "
	       "rate_per_s=%.0f baseline=layout_old ratio=%.2f\n",
	       trace_bytes, pool_mib, layout, r->utilisation, r->horizon_s, r->horizon_min_s,
	       r->capture_1s, r->capture_10s, (unsigned long long)r->evicted,
	       (unsigned long long)r->traces, RATE_PER_S, ratio);
}

int main(void)
{
	static const uint32_t sizes[] = { 500, 4096, 65536 };
	static const uint32_t pools[] = { 10, 100 };
	int quick = getenv("RETRACE_BENCH_QUICK") != NULL;
	unsigned int s, p;

	rt_log_level = RT_LOG_ERROR;
	for (p = 0; p < (quick ? 1u : 2u); p++)
		for (s = 0; s < 3; s++) {
			struct result old_r, new_r;
			if (run(pools[p], sizes[s], 1, quick, &old_r) != 0 ||
			    run(pools[p], sizes[s], 0, quick, &new_r) != 0)
				return 1;
			print(sizes[s], pools[p], "old", &old_r, 1.0);
			print(sizes[s], pools[p], "new", &new_r,
			      old_r.horizon_s > 0 ? new_r.horizon_s / old_r.horizon_s : 0.0);
		}
	return 0;
}
