/*
 * trigger_set.c — TriggerSet(T, N) and the Queue trigger built from it.
 *
 * The set is a ring of the N most recent trace ids fed by _add. It hands the
 * wrapped trigger T a sink (retrace_trigger_set_sink); when T fires for trace X
 * through it, the set copies its ring (newest first, X left out) under its lock
 * into a stack array after X's own laterals, releases the lock, and fires the
 * downstream sink with at most RETRACE_MAX_LATERAL laterals. One spinlock guards
 * the ring so a 128-bit id is never read half-written.
 *
 * Queue trigger: a Percentile on queueing delay whose sink is a TriggerSet's;
 * each dequeued request is judged first and remembered after, so the laterals
 * of a request that waited too long are the N requests dequeued just before it.
 */
#include <stdlib.h>

#include "internal.h"

struct retrace_trigger_set {
	rtt_spinlock lock;
	uint32_t n;
	uint64_t added; /* ids ever added; next slot is added % n */
	uint64_t forwarded;
	uint64_t fire_errors;
	struct retrace_fire_sink downstream;
	retrace_trace_id recent[RETRACE_MAX_LATERAL];
};

void retrace_trigger_set_add(struct retrace_trigger_set *s, retrace_trace_id id)
{
	rtt_lock(&s->lock);
	s->recent[s->added % s->n] = id;
	s->added++;
	rtt_unlock(&s->lock);
}

/* Newest first, skipping `exclude`; caller holds the lock. */
static size_t copy_recent(const struct retrace_trigger_set *s, retrace_trace_id *out,
			  size_t max, retrace_trace_id exclude)
{
	uint64_t have = s->added < s->n ? s->added : s->n;
	size_t got = 0;
	for (uint64_t i = 1; i <= have && got < max; i++) {
		retrace_trace_id id = s->recent[(s->added - i) % s->n];
		if (!rtt_same_id(id, exclude))
			out[got++] = id;
	}
	return got;
}

size_t retrace_trigger_set_snapshot(struct retrace_trigger_set *s,
				    retrace_trace_id *out, size_t max,
				    retrace_trace_id exclude)
{
	rtt_lock(&s->lock);
	size_t got = copy_recent(s, out, max, exclude);
	rtt_unlock(&s->lock);
	return got;
}

static int set_fire(void *arg, retrace_trace_id id, uint32_t trigger_id,
		    const retrace_trace_id *lateral, size_t n_lateral)
{
	struct retrace_trigger_set *s = arg;
	retrace_trace_id all[RETRACE_MAX_LATERAL];
	size_t n = 0;

	for (; n < n_lateral && n < RETRACE_MAX_LATERAL; n++)
		all[n] = lateral[n];
	rtt_lock(&s->lock);
	n += copy_recent(s, all + n, RETRACE_MAX_LATERAL - n, id);
	s->forwarded++;
	rtt_unlock(&s->lock);

	int rc = rtt_fire(&s->downstream, id, trigger_id, all, n);
	if (rc < 0) {
		rtt_lock(&s->lock);
		s->fire_errors++;
		rtt_unlock(&s->lock);
	}
	return rc;
}

struct retrace_fire_sink retrace_trigger_set_sink(struct retrace_trigger_set *s)
{
	return (struct retrace_fire_sink){.fn = set_fire, .arg = s};
}

struct retrace_trigger_set *retrace_trigger_set_create(
	unsigned int n, struct retrace_fire_sink downstream)
{
	if (n == 0 || n > RETRACE_MAX_LATERAL)
		return NULL;
	struct retrace_trigger_set *s = rtt_zalloc_aligned(sizeof *s);
	if (!s)
		return NULL;
	s->n = n;
	s->downstream = downstream;
	return s;
}

void retrace_trigger_set_destroy(struct retrace_trigger_set *s)
{
	free(s);
}

void retrace_trigger_set_stats(struct retrace_trigger_set *s,
			       struct retrace_trigger_stats *out)
{
	rtt_lock(&s->lock);
	out->samples = s->added;
	out->fired = s->forwarded;
	out->fire_errors = s->fire_errors;
	rtt_unlock(&s->lock);
}

/* ------------------------------------------------------------- queue ---- */

struct retrace_queue_trigger {
	struct retrace_trigger_set *set;
	struct retrace_percentile *delay;
};

struct retrace_queue_trigger *retrace_queue_trigger_create(
	const struct retrace_queue_trigger_config *cfg)
{
	if (!cfg)
		return NULL;
	struct retrace_queue_trigger *q = calloc(1, sizeof *q);
	if (!q)
		return NULL;
	q->set = retrace_trigger_set_create(cfg->lateral ? cfg->lateral : 16u,
					    cfg->sink);
	if (q->set) {
		struct retrace_percentile_config pc = {
			.trigger_id = cfg->trigger_id,
			.percentile = cfg->percentile,
			.window = cfg->window,
			.window_ns = cfg->window_ns,
			.sink = retrace_trigger_set_sink(q->set),
		};
		q->delay = retrace_percentile_create(&pc);
	}
	if (!q->set || !q->delay) {
		retrace_queue_trigger_destroy(q);
		return NULL;
	}
	return q;
}

void retrace_queue_trigger_destroy(struct retrace_queue_trigger *q)
{
	if (!q)
		return;
	retrace_percentile_destroy(q->delay);
	retrace_trigger_set_destroy(q->set);
	free(q);
}

int retrace_queue_trigger_dequeued(struct retrace_queue_trigger *q,
				   retrace_trace_id id, uint64_t queueing_delay)
{
	int fired = retrace_percentile_add(q->delay, id, queueing_delay);
	retrace_trigger_set_add(q->set, id);
	return fired;
}
