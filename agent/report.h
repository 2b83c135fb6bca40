/*
 * agent/report.h — what the agent reports, in what order, and what it gives up.
 *
 * Owns: one class per trigger id (token-bucket rate limit for local triggers,
 * counters, a reporting weight and a byte budget) and each class's reporting
 * queue of pinned traces with unsent buffers, ordered by a priority that is a
 * consistent hash of the trace id: every agent computes the same priority for
 * the same trace, so under the same pressure they all send (and abandon) the
 * same traces. Across classes it picks by weighted deficit round robin, within
 * global and per-class bandwidth limits; under overload it abandons the lowest
 * priority trace of the class using the most (weighted) space: max-min fairness.
 *
 * Promises: pure bookkeeping over the index (no I/O, no shared memory), bounded
 * memory (classes are a fixed table; queues hold trace indices), and the same
 * decisions for the same inputs on every host.
 */
#ifndef RETRACE_AGENT_REPORT_H
#define RETRACE_AGENT_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "index.h"

#define RT_REPORT_MAX_CLASSES 256
#define RT_REPORT_OTHER_CLASS UINT32_MAX /* trigger ids past the table share one class */

struct rt_report_class {
	uint32_t trigger_id;
	uint32_t used;
	double weight;
	/* token buckets: local triggers (groups) and bytes reported */
	double trig_tokens;
	double byte_tokens;
	int64_t deficit;          /* DRR deficit in bytes */
	/* reporting queue: trace indices sorted by ascending priority (send from the end) */
	uint32_t *queue;
	uint32_t queued, queue_cap;
	uint64_t queued_buffers;  /* unsent buffers of queued traces */
	/* counters */
	uint64_t triggers;        /* local groups seen */
	uint64_t rate_limited;    /* local groups refused by the rate limit */
	uint64_t remote;          /* remote triggers (never rate-limited) */
	uint64_t traces_pinned;
	uint64_t slices_sent, slice_bytes_sent;
	uint64_t slices_acked, bytes_acked;
	uint64_t slices_spooled, bytes_spooled;
	uint64_t abandoned_traces, abandoned_buffers;
};

struct rt_report_config {
	double trigger_rate;      /* local trigger groups per second per id */
	double trigger_burst;
	double bandwidth;         /* bytes/s for all reporting; 0 = unlimited */
	double class_bandwidth;   /* bytes/s per trigger id; 0 = unlimited */
	uint32_t quantum;         /* DRR bytes per round at weight 1 */
	char weights[256];        /* "ID:W,ID:W"; others weigh 1 */
};

struct rt_report {
	struct rt_report_config cfg;
	struct rt_report_class classes[RT_REPORT_MAX_CLASSES + 1]; /* last: OTHER */
	uint32_t rr;              /* DRR cursor */
	double global_tokens;
	uint64_t last_refill_ns;
	uint64_t queued_buffers;  /* across classes */
	uint32_t *trace_class;    /* per trace entry: class index + 1, 0 = none */
	uint32_t trace_capacity;
};

/* Parse cfg->weights etc.; -1 with a sentence in err. */
int rt_report_init(struct rt_report *r, const struct rt_report_config *cfg,
		   uint32_t trace_capacity, char *err, size_t errlen);
void rt_report_free(struct rt_report *r);

/* The consistent priority of a trace (same on every agent). */
uint64_t rt_report_priority(uint64_t trace_lo);

/* The class for a trigger id (created on first use). */
struct rt_report_class *rt_report_class_of(struct rt_report *r, uint32_t trigger_id);

/* Refill token buckets to `now_ns`. */
void rt_report_refill(struct rt_report *r, uint64_t now_ns);

/* A local trigger group for this id: 1 if it may go ahead (a token was taken). */
int rt_report_admit(struct rt_report *r, struct rt_report_class *c);

/* Queue trace t (pinned, with `buffers` unsent buffers) in class c; idempotent. */
void rt_report_enqueue(struct rt_report *r, struct rt_report_class *c,
		       const struct rt_index *ix, uint32_t t);
/* New unsent buffers for an already queued trace, or re-queue it. */
void rt_report_add_buffers(struct rt_report *r, const struct rt_index *ix, uint32_t t,
			   uint32_t n);
/* Drop trace t from its queue (sent in full, abandoned or removed). */
void rt_report_dequeue(struct rt_report *r, const struct rt_index *ix, uint32_t t);

/*
 * The next trace to send: the highest-priority trace of the class whose turn it
 * is (weighted DRR), if the global and class byte budgets allow `bytes` of it.
 * NONE when nothing may be sent now. *cls receives its class.
 */
uint32_t rt_report_next(struct rt_report *r, const struct rt_index *ix,
			struct rt_report_class **cls);

/* Charge a sent slice to its class and the global budget. */
void rt_report_charge(struct rt_report *r, struct rt_report_class *c, uint64_t bytes);

/*
 * Overload: the queued trace to abandon, lowest priority of the class with the
 * largest queued_buffers / weight; NONE if nothing is queued.
 */
uint32_t rt_report_victim(struct rt_report *r, const struct rt_index *ix,
			  struct rt_report_class **cls);

#endif
