/*
 * demo-service — a small two-tier application traced with libretrace.
 *
 * "frontend" threads receive requests that arrive from an upstream host (whose
 * agent id is 7, so each request leaves a breadcrumb), record a few events, and
 * pass each request to "backend" threads through an in-process queue carrying
 * the W3C traceparent/tracestate, exactly as an HTTP hop would. Backends record
 * their part; a configurable share of requests fail and fire a trigger that
 * names the previous few requests as lateral traces; a failed "payment" goes
 * through the one-line exception trigger; a percentile autotrigger fires for
 * backend calls slower than the p99 of recent ones; a crash handler is installed.
 * Run it beside an agent
 * (or retrace-drain) that owns the pool; without one it still runs, discarding.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "retrace/retrace.h"
#include "retrace/triggers.h"

#define DEMO_TRIGGER_ERROR 100
#define DEMO_TRIGGER_SLOW 101
#define DEMO_TRIGGER_EXCEPTION 102
#define QUEUE_CAP 1024
#define LATERALS 4

struct hop {
	char traceparent[64];
	char tracestate[RETRACE_TRACESTATE_MAX + 1];
	uint32_t request_no;
};

struct hop_queue {
	pthread_mutex_t lock;
	pthread_cond_t not_empty, not_full;
	struct hop items[QUEUE_CAP];
	unsigned head, count, closed;
};

struct demo {
	unsigned requests, frontends, backends;
	double error_rate;
	struct hop_queue q;
	atomic_uint next_request;
	unsigned long traced, triggers, trigger_failures, discards, exceptions;
	struct retrace_percentile *slow;
	pthread_mutex_t stats_lock;
};

static void queue_push(struct hop_queue *q, const struct hop *h)
{
	pthread_mutex_lock(&q->lock);
	while (q->count == QUEUE_CAP)
		pthread_cond_wait(&q->not_full, &q->lock);
	q->items[(q->head + q->count++) % QUEUE_CAP] = *h;
	pthread_cond_signal(&q->not_empty);
	pthread_mutex_unlock(&q->lock);
}

static int queue_pop(struct hop_queue *q, struct hop *h)
{
	pthread_mutex_lock(&q->lock);
	while (q->count == 0 && !q->closed)
		pthread_cond_wait(&q->not_empty, &q->lock);
	if (q->count == 0) {
		pthread_mutex_unlock(&q->lock);
		return 0;
	}
	*h = q->items[q->head];
	q->head = (q->head + 1) % QUEUE_CAP;
	q->count--;
	pthread_cond_signal(&q->not_full);
	pthread_mutex_unlock(&q->lock);
	return 1;
}

static uint64_t rand64(unsigned *seed)
{
	return ((uint64_t)rand_r(seed) << 42) ^ ((uint64_t)rand_r(seed) << 21) ^
	       (uint64_t)rand_r(seed);
}

/* The upstream host's headers for a new request. */
static void upstream_headers(unsigned *seed, char *tp, size_t tpn, char *ts, size_t tsn)
{
	snprintf(tp, tpn, "00-%016llx%016llx-%016llx-01", (unsigned long long)rand64(seed),
		 (unsigned long long)(rand64(seed) | 1), (unsigned long long)(rand64(seed) | 1));
	snprintf(ts, tsn, "rt=00000007.00000000.0,lb=edge-1");
}

static void *frontend(void *arg)
{
	struct demo *d = arg;
	unsigned seed = (unsigned)(uintptr_t)&seed ^ (unsigned)time(NULL);
	char tp[64], ts[128];
	for (;;) {
		struct retrace_wire_context in;
		struct hop h;
		unsigned no = atomic_fetch_add_explicit(&d->next_request, 1, memory_order_relaxed);
		char line[96];
		int n;
		if (no >= d->requests)
			break;
		upstream_headers(&seed, tp, sizeof tp, ts, sizeof ts);
		if (retrace_deserialize(tp, ts, &in) != RETRACE_OK)
			continue;
		retrace_begin(in.trace_id);
		n = snprintf(line, sizeof line, "frontend: GET /api/orders/%u", no);
		retrace_tracepoint_ts(line, (size_t)n);
		n = snprintf(line, sizeof line, "frontend: auth ok user=%u", rand_r(&seed) % 1000);
		retrace_tracepoint_ts(line, (size_t)n);
		retrace_serialize(h.traceparent, sizeof h.traceparent, h.tracestate,
				  sizeof h.tracestate, ts);
		h.request_no = no;
		retrace_end();
		queue_push(&d->q, &h);
	}
	return NULL;
}

static void *backend(void *arg)
{
	struct demo *d = arg;
	unsigned seed = (unsigned)(uintptr_t)&seed;
	retrace_trace_id recent[LATERALS];
	unsigned n_recent = 0, traced = 0, triggers = 0, failures = 0, exceptions = 0;
	struct retrace_thread_stats st;
	struct hop h;
	char payload[600];

	memset(payload, 'r', sizeof payload);
	while (queue_pop(&d->q, &h)) {
		struct retrace_wire_context in;
		char line[96];
		int n;
		if (retrace_deserialize(h.traceparent, h.tracestate, &in) != RETRACE_OK)
			continue;
		traced += (unsigned)retrace_begin(in.trace_id);
		n = snprintf(line, sizeof line, "backend: SELECT * FROM orders WHERE id=%u", h.request_no);
		retrace_tracepoint_ts(line, (size_t)n);
		retrace_tracepoint(payload, 100 + (size_t)(rand_r(&seed) % 500));
		uint64_t t0 = retrace_ticks();
		if (rand_r(&seed) % 100 == 0) /* a slow query now and then */
			for (volatile int spin = 0; spin < 20000; spin++)
				;
		if (RETRACE_FAIL_IF(rand_r(&seed) % 500 == 0, DEMO_TRIGGER_EXCEPTION)) {
			retrace_tracepoint_ts("backend: payment declined", 25);
			exceptions++;
		}
		retrace_percentile_add(d->slow, in.trace_id, retrace_ticks() - t0);
		if ((double)rand_r(&seed) / RAND_MAX < d->error_rate) {
			retrace_tracepoint_ts("backend: ERROR deadlock detected", 32);
			if (retrace_trigger(in.trace_id, DEMO_TRIGGER_ERROR, recent, n_recent) == RETRACE_OK)
				triggers++;
			else
				failures++;
		}
		retrace_end();
		recent[n_recent < LATERALS ? n_recent++ : (h.request_no % LATERALS)] = in.trace_id;
	}
	retrace_thread_stats(&st);
	pthread_mutex_lock(&d->stats_lock);
	d->traced += traced;
	d->triggers += triggers;
	d->trigger_failures += failures;
	d->discards += st.discard_buffers;
	d->exceptions += exceptions;
	pthread_mutex_unlock(&d->stats_lock);
	return NULL;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: demo-service [-n REQUESTS] [-f FRONTENDS] [-b BACKENDS] [-e ERROR_RATE]\n"
		     "Traces into the pool named by $RETRACE_POOL (default /retrace).\n");
}

int main(int argc, char **argv)
{
	struct demo d;
	pthread_t th[64];
	unsigned i, nth;
	int c, rc;

	memset(&d, 0, sizeof d);
	d.requests = 20000;
	d.frontends = 2;
	d.backends = 2;
	d.error_rate = 0.01;
	while ((c = getopt(argc, argv, "n:f:b:e:h")) != -1) {
		switch (c) {
		case 'n': d.requests = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'f': d.frontends = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'b': d.backends = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'e': d.error_rate = strtod(optarg, NULL); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (d.frontends < 1 || d.backends < 1 || d.frontends + d.backends > 64 ||
	    d.error_rate < 0 || d.error_rate > 1) {
		fprintf(stderr, "demo-service: need 1..63 frontends and backends and 0 <= error rate <= 1\n");
		return 2;
	}
	rc = retrace_init(NULL);
	retrace_crash_handler_install(0); /* a crash fires RETRACE_TRIGGER_CRASH */
	{
		struct retrace_percentile_config pc = {.trigger_id = DEMO_TRIGGER_SLOW,
						       .percentile = 99.0,
						       .shards = d.backends};
		d.slow = retrace_percentile_create(&pc);
		if (!d.slow) {
			fprintf(stderr, "demo-service: cannot create the percentile trigger\n");
			return 1;
		}
	}
	printf("demo-service: %s (agent id %u)\n",
	       rc == RETRACE_OK ? "attached to the pool" : retrace_strerror(rc), retrace_local_agent());
	pthread_mutex_init(&d.q.lock, NULL);
	pthread_cond_init(&d.q.not_empty, NULL);
	pthread_cond_init(&d.q.not_full, NULL);
	pthread_mutex_init(&d.stats_lock, NULL);
	for (nth = 0; nth < d.backends; nth++)
		pthread_create(&th[nth], NULL, backend, &d);
	for (i = 0; i < d.frontends; i++, nth++)
		pthread_create(&th[nth], NULL, frontend, &d);
	for (i = d.backends; i < nth; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_lock(&d.q.lock);
	d.q.closed = 1;
	pthread_cond_broadcast(&d.q.not_empty);
	pthread_mutex_unlock(&d.q.lock);
	for (i = 0; i < d.backends; i++)
		pthread_join(th[i], NULL);
	{
		struct retrace_trigger_stats ps;
		retrace_percentile_stats(d.slow, &ps);
		printf("demo requests=%u traced=%lu error_triggers=%lu exception_triggers=%lu "
		       "p99_triggers=%llu trigger_failures=%lu discard_buffers=%lu\n",
		       d.requests, d.traced, d.triggers, d.exceptions,
		       (unsigned long long)ps.fired, d.trigger_failures, d.discards);
	}
	retrace_percentile_destroy(d.slow);
	retrace_shutdown();
	return 0;
}
