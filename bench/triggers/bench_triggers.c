/*
 * bench_triggers.c — ns per call of each autotrigger, at 1 and 2 threads, each
 * printed next to a baseline measured in the same run: a non-inlined call that
 * only increments a per-thread counter, fed the same inputs.
 *
 * Every thread replays a precomputed array of inputs (exponential values,
 * labels), so random number generation is not measured. Firings go to a sink
 * that counts atomically (no pool needed); at p >= 99 they are rare. With 2
 * threads both threads share one trigger object (the contended case);
 * `percentile_sharded` shows the same with one shard per thread and
 * `percentile_batched` one shared window fed through per-thread stages.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "retrace/triggers.h"

#define INPUTS 65536u /* power of two */
#define DEFAULT_CALLS 2000000u

enum bench_kind {
	B_BASELINE,
	B_PERCENTILE,
	B_CATEGORY,
	B_SET_ADD,
	B_SET_PERCENTILE,
	B_QUEUE,
	B_FILTER,
};

struct bench_target {
	enum bench_kind kind;
	struct retrace_percentile *pct;
	struct retrace_category *cat;
	struct retrace_trigger_set *set;
	struct retrace_queue_trigger *queue;
	struct retrace_filter *filter;
};

struct bench_thread {
	const struct bench_target *target;
	const uint64_t *values;
	uint64_t calls;
	uint64_t counter; /* the baseline's counter, one per thread */
	double ns_per_call;
	char pad[64];
};

static atomic_ulong fired_total;

static int count_fire(void *arg, retrace_trace_id id, uint32_t trigger_id,
		      const retrace_trace_id *lateral, size_t n_lateral)
{
	(void)arg;
	(void)id;
	(void)trigger_id;
	(void)lateral;
	(void)n_lateral;
	atomic_fetch_add_explicit(&fired_total, 1, memory_order_relaxed);
	return 0;
}

static const struct retrace_fire_sink counting_sink = {count_fire, NULL};

__attribute__((noinline)) static int baseline_call(struct bench_thread *t,
						   retrace_trace_id id, uint64_t v)
{
	(void)id;
	t->counter += v | 1u;
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline int one_call(struct bench_thread *t, retrace_trace_id id, uint64_t v)
{
	const struct bench_target *g = t->target;
	struct retrace_span_summary s;

	switch (g->kind) {
	case B_BASELINE:
		return baseline_call(t, id, v);
	case B_PERCENTILE:
		return retrace_percentile_add(g->pct, id, v);
	case B_CATEGORY:
		return retrace_category_add(g->cat, id, v);
	case B_SET_ADD:
		retrace_trigger_set_add(g->set, id);
		return 0;
	case B_SET_PERCENTILE: {
		int fired = retrace_percentile_add(g->pct, id, v);
		retrace_trigger_set_add(g->set, id);
		return fired;
	}
	case B_QUEUE:
		return retrace_queue_trigger_dequeued(g->queue, id, v);
	case B_FILTER:
		s = (struct retrace_span_summary){id, v, (int)(v & 3u), NULL, 0};
		return retrace_filter_match(g->filter, &s);
	}
	return 0;
}

static void *bench_body(void *arg)
{
	struct bench_thread *t = arg;
	retrace_trace_id id = {1, 1};
	uint64_t start = now_ns();
	for (uint64_t i = 0; i < t->calls; i++) {
		id.lo = i + 1;
		one_call(t, id, t->values[i & (INPUTS - 1u)]);
	}
	t->ns_per_call = (double)(now_ns() - start) / (double)t->calls;
	return NULL;
}

/* Mean over threads of each thread's ns per call. */
static double measure(const struct bench_target *g, const uint64_t *const *values,
		      unsigned int threads, uint64_t calls)
{
	struct bench_thread t[2] = {{0}};
	pthread_t th[2];
	for (unsigned int i = 0; i < threads; i++) {
		t[i].target = g;
		t[i].values = values[i];
		t[i].calls = calls;
		pthread_create(&th[i], NULL, bench_body, &t[i]);
	}
	double sum = 0;
	for (unsigned int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		sum += t[i].ns_per_call;
	}
	return sum / threads;
}

static void report(const char *name, const char *param, unsigned int threads,
		   double ns, double baseline)
{
	printf("bench triggers name=%s%s%s threads=%u ns_per_call=%.1f baseline_ns=%.1f "
	       "ratio=%.2f\n",
	       name, param[0] ? " " : "", param, threads, ns, baseline, ns / baseline);
	fflush(stdout);
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Exponential latencies (mean 1 ms in ns) and Zipf-ish labels, per thread. */
static void fill_inputs(uint64_t *latency, uint64_t *labels, uint64_t seed)
{
	for (unsigned int i = 0; i < INPUTS; i++) {
		double u = ((double)(splitmix(&seed) >> 11) + 1.0) / 9007199254740992.0;
		latency[i] = (uint64_t)(-log(u) * 1e6);
		uint64_t r = splitmix(&seed);
		labels[i] = r % 100u < 95u ? r % 8u : r % 100000u;
	}
}

static void run_percentile(const uint64_t *const *lat, uint64_t calls,
			   const double *baseline)
{
	static const double pcts[] = {99.0, 99.9, 99.99};
	static const char *const names[] = {"p=99", "p=99.9", "p=99.99"};
	for (int j = 0; j < 3; j++) {
		for (unsigned int threads = 1; threads <= 2; threads++) {
			struct retrace_percentile_config cfg = {
				.trigger_id = 1, .percentile = pcts[j], .sink = counting_sink};
			struct bench_target g = {.kind = B_PERCENTILE,
						 .pct = retrace_percentile_create(&cfg)};
			report("percentile", names[j], threads,
			       measure(&g, lat, threads, calls), baseline[threads - 1]);
			retrace_percentile_destroy(g.pct);
		}
	}
	struct retrace_percentile_config cfg = {
		.trigger_id = 1, .percentile = 99.99, .shards = 2, .sink = counting_sink};
	struct bench_target g = {.kind = B_PERCENTILE,
				 .pct = retrace_percentile_create(&cfg)};
	report("percentile_sharded", "p=99.99 shards=2", 2, measure(&g, lat, 2, calls),
	       baseline[1]);
	retrace_percentile_destroy(g.pct);
	for (unsigned int threads = 1; threads <= 2; threads++) {
		struct retrace_percentile_config bc = {.trigger_id = 1,
						       .percentile = 99.99,
						       .batch = 64,
						       .sink = counting_sink};
		g.pct = retrace_percentile_create(&bc);
		report("percentile_batched", "p=99.99 batch=64", threads,
		       measure(&g, lat, threads, calls), baseline[threads - 1]);
		retrace_percentile_destroy(g.pct);
	}
}

static struct retrace_filter *composite_filter(void)
{
	static const int error[] = {RETRACE_STATUS_ERROR};
	struct retrace_filter *slow_and_error[] = {retrace_filter_latency(3000000, 0),
						   retrace_filter_status(error, 1)};
	struct retrace_filter *any[] = {retrace_filter_and(slow_and_error, 2),
					retrace_filter_probabilistic(0.01)};
	return retrace_filter_or(any, 2);
}

static void run_others(const uint64_t *const *lat, const uint64_t *const *labels,
		       uint64_t calls, const double *baseline)
{
	for (unsigned int threads = 1; threads <= 2; threads++) {
		double base = baseline[threads - 1];
		struct retrace_category_config cc = {
			.trigger_id = 2, .fraction = 0.01, .sink = counting_sink};
		struct bench_target g = {.kind = B_CATEGORY,
					 .cat = retrace_category_create(&cc)};
		report("category", "f=0.01", threads, measure(&g, labels, threads, calls),
		       base);
		retrace_category_destroy(g.cat);

		g = (struct bench_target){.kind = B_SET_ADD,
					  .set = retrace_trigger_set_create(16, counting_sink)};
		report("trigger_set_add", "n=16", threads, measure(&g, lat, threads, calls),
		       base);

		struct retrace_percentile_config pc = {
			.trigger_id = 3, .percentile = 99.9,
			.sink = retrace_trigger_set_sink(g.set)};
		g.kind = B_SET_PERCENTILE;
		g.pct = retrace_percentile_create(&pc);
		report("trigger_set_percentile", "p=99.9 n=16", threads,
		       measure(&g, lat, threads, calls), base);
		retrace_percentile_destroy(g.pct);
		retrace_trigger_set_destroy(g.set);

		struct retrace_queue_trigger_config qc = {
			.trigger_id = 4, .percentile = 99.9, .lateral = 16,
			.sink = counting_sink};
		g = (struct bench_target){.kind = B_QUEUE,
					  .queue = retrace_queue_trigger_create(&qc)};
		report("queue", "p=99.9 n=16", threads, measure(&g, lat, threads, calls),
		       base);
		retrace_queue_trigger_destroy(g.queue);

		g = (struct bench_target){.kind = B_FILTER, .filter = composite_filter()};
		report("filter", "or(and(latency,status),probabilistic)", threads,
		       measure(&g, lat, threads, calls), base);
		retrace_filter_free(g.filter);
	}
}

int main(int argc, char **argv)
{
	uint64_t calls = argc > 1 ? strtoull(argv[1], NULL, 10) : DEFAULT_CALLS;
	uint64_t *lat[2], *labels[2];
	for (int i = 0; i < 2; i++) {
		lat[i] = malloc(INPUTS * sizeof *lat[i]);
		labels[i] = malloc(INPUTS * sizeof *labels[i]);
		if (!lat[i] || !labels[i])
			return 1;
		fill_inputs(lat[i], labels[i], 1000u + (uint64_t)i);
	}
	const uint64_t *const *lv = (const uint64_t *const *)lat;
	const uint64_t *const *bv = (const uint64_t *const *)labels;

	double baseline[2];
	struct bench_target base = {.kind = B_BASELINE};
	for (unsigned int threads = 1; threads <= 2; threads++) {
		measure(&base, lv, threads, calls); /* warm up */
		baseline[threads - 1] = measure(&base, lv, threads, calls);
		report("baseline", "", threads, baseline[threads - 1], baseline[threads - 1]);
	}
	run_percentile(lv, calls, baseline);
	run_others(lv, bv, calls, baseline);
	printf("bench triggers fired_total=%lu\n", (unsigned long)atomic_load(&fired_total));
	for (int i = 0; i < 2; i++) {
		free(lat[i]);
		free(labels[i]);
	}
	return 0;
}
