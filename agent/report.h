/*
 * agent/report.h — what the agent reports, in what order, and what it gives up.
 *
 * Owns: one class per trigger id (token-bucket rate limit for local triggers,
 * counters, a reporting weight and a byte budget) and each class's reporting
 * queue of pinned traces with unsent buffers, ordered by a priority that is a
 * consistent hash of the trace id: every agent computes the same priority for
 * the same trace, so under the same pressure they all send (and abandon) the
 * same traces. Across classes it picks by weighted deficit round robin, within
 * global and per-class bandwidth limits.
 *
 * Overload is met by a shared threshold, not by queue order alone: each class
 * has a level k, and at level k it reports only traces whose priority lies in
 * the top 2^-k of the range (consistent sampling at a power-of-two rate). When
 * unsent pinned data passes its share, the class using the most (weighted)
 * space — max-min fairness — goes one level up and abandons its queued traces
 * under the new threshold; levels come down one at a time only after pressure
 * has stayed low for a while. Agents under similar pressure reach the same
 * level, so they keep and abandon exactly the same traces whatever order those
 * arrived in.
 *
 * Promises: pure bookkeeping over the index (no I/O, no shared memory), bounded
 * memory (classes are a fixed table; queues hold trace indices), and the same
 * decisions for the same inputs on every host. This scheduler is
 * report_sched.c; the pipeline that feeds it and sends what it picks (rate
 * limits, pins, slices, ACKs, the spool) is report_pipeline.c.
 */
#ifndef RETRACE_AGENT_REPORT_H
#define RETRACE_AGENT_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "index.h"

#define RT_REPORT_MAX_CLASSES 256
#define RT_REPORT_OTHER_CLASS UINT32_MAX /* trigger ids past the table share one class */
#define RT_REPORT_MAX_LEVEL 32            /* keeps 2^-32 of the traces: as good as none */

struct rt_report_class {
	uint32_t trigger_id;
	uint32_t used;
	double weight;
	/* token buckets: local triggers (groups) and bytes reported */
	double trig_tokens;
	double byte_tokens;
	int64_t deficit;          /* DRR deficit in bytes */
	uint32_t level;           /* overload level: only the top 2^-level of priorities go */
	uint32_t max_level;       /* the highest it reached */
	uint64_t raised_ns;       /* when the level last went up (0: never) */
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
	uint64_t abandoned_at_trigger; /* groups dropped when they fired (below the level) */
	uint64_t level_raised, level_lowered;
	uint64_t unsendable_slices, unsendable_buffers, unsendable_bytes; /* dropped: over wire limits */
};

struct rt_report_config {
	double trigger_rate;      /* local trigger groups per second per id */
	double trigger_burst;
	double bandwidth;         /* bytes/s for all reporting; 0 = unlimited */
	double class_bandwidth;   /* bytes/s per trigger id; 0 = unlimited */
	uint32_t quantum;         /* DRR bytes per round at weight 1 */
	uint64_t hold_ns;         /* with a backlog, a trace's first slice waits this long */
	uint64_t relax_ns;        /* calm needed before levels come down one step */
	uint64_t settle_ns;       /* after a raise, a class sends one level up this long */
	char weights[256];        /* "ID:W,ID:W"; others weigh 1 */
};

struct rt_report {
	struct rt_report_config cfg;
	struct rt_report_class classes[RT_REPORT_MAX_CLASSES + 1]; /* last: OTHER */
	uint32_t classes_used;    /* table slots taken: [0, classes_used), plus OTHER */
	uint32_t rr;              /* DRR cursor: a used slot or OTHER */
	double global_tokens;
	uint64_t last_refill_ns;
	uint64_t queued_buffers;  /* across classes */
	uint32_t *trace_class;    /* per trace entry: class index + 1, 0 = none */
	uint64_t *trace_since;    /* per trace entry: when queued, for the hold (0: no hold) */
	uint32_t trace_capacity;
	uint32_t raised;          /* classes with a level above 0 */
	uint32_t wary;            /* class index sending one level up (near a raise), or NONE */
	int holding;              /* backlog or a level up: new traces wait cfg.hold_ns */
	uint64_t calm_since_ns;   /* pressure low since then, CLOCK_REALTIME (0: it is not) */
	uint64_t relaxed_epoch;   /* the relax_ns epoch levels last came down in */
	/* Set by the caller around rt_report_next: a trace it cannot send now (its
	 * coordinator member is down or busy, agent/route.h) is passed over, so it
	 * does not hold back the traces of the other members. NULL: none is. */
	int (*blocked)(void *arg, uint32_t t);
	void *blocked_arg;
};

/* Parse cfg->weights etc.; -1 with a sentence in err. */
int rt_report_init(struct rt_report *r, const struct rt_report_config *cfg,
		   uint32_t trace_capacity, char *err, size_t errlen);
void rt_report_free(struct rt_report *r);

/* The consistent priority of a trace (same on every agent). */
uint64_t rt_report_priority(uint64_t trace_lo);

/* The lowest priority level k reports: 0 at level 0, else 2^64 - 2^(64-k). */
uint64_t rt_report_threshold(uint32_t level);

/* Does class c, at its level, report trace lo? */
static inline int rt_report_admits(const struct rt_report_class *c, uint64_t trace_lo)
{
	return c->level == 0 || rt_report_priority(trace_lo) >= rt_report_threshold(c->level);
}

/* The class for a trigger id (created on first use). */
struct rt_report_class *rt_report_class_of(struct rt_report *r, uint32_t trigger_id);

/* Refill token buckets to `now_ns`. */
void rt_report_refill(struct rt_report *r, uint64_t now_ns);

/* A local trigger group for this id: 1 if it may go ahead (a token was taken). */
int rt_report_admit(struct rt_report *r, struct rt_report_class *c);

/*
 * Queue trace t (pinned, with unsent buffers) in class c; idempotent. With a
 * backlog (see rt_report_caution), a trace nothing of which went out yet waits
 * cfg.hold_ns from `now_ns` before it may go: time for the level to answer a
 * surge before anything is decided.
 */
void rt_report_enqueue(struct rt_report *r, struct rt_report_class *c,
		       const struct rt_index *ix, uint32_t t, uint64_t now_ns);
/* New unsent buffers for an already queued trace, or re-queue it. */
void rt_report_add_buffers(struct rt_report *r, const struct rt_index *ix, uint32_t t,
			   uint32_t n);
/* Drop trace t from its queue (sent in full, abandoned or removed). */
void rt_report_dequeue(struct rt_report *r, const struct rt_index *ix, uint32_t t);

/*
 * The next trace to send: the highest-priority trace of the class whose turn it
 * is (weighted DRR), if its level admits it, its hold is over and the global
 * and class byte budgets allow it. NONE when nothing may be sent now (as of the
 * last refill). *cls receives its class.
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

/* A queued trace its class's level no longer admits (the lowest), or NONE. */
uint32_t rt_report_below_level(struct rt_report *r, const struct rt_index *ix,
			       struct rt_report_class **cls);

/*
 * Once per pass, with the pinned share `limit` (buffers): the measures that let
 * agents agree although their pressure rises at slightly different moments.
 *   - Hold: with any level up or a backlog past 1/16 of the share (a surge
 *     fills the rest within milliseconds), a new trace waits cfg.hold_ns
 *     before its first slice, so the levels have climbed before anything of a
 *     surge is decided. Without a backlog nothing waits.
 *   - Caution: a class sends only what one level up still admits (the rest
 *     stays queued) for cfg.settle_ns after its own last raise (a surge climbs
 *     several levels), and, past half the share, if it is the class a raise
 *     would hit. A raise a moment earlier on another agent then finds nothing
 *     it abandons already sent here.
 * Returns the class to raise now: past half the share, the class a raise would
 * hit has only traces the next level abandons left to send (holding them would
 * hold the pressure that holds them; sending them would break with agents that
 * raised already); NULL otherwise.
 */
struct rt_report_class *rt_report_caution(struct rt_report *r, const struct rt_index *ix,
					  uint64_t limit);

/* One level up for class c (at most RT_REPORT_MAX_LEVEL); 0 if it was at the top. */
int rt_report_raise(struct rt_report *r, struct rt_report_class *c, uint64_t now_ns);

/*
 * Pressure is low (`calm`) or not. Levels come down one step at the start of a
 * wall-clock epoch of cfg.relax_ns (unix_ns / relax_ns) that found pressure low
 * for the whole epoch before: agents whose pressure fell at about the same time
 * lower at the same instant, and admit the same traces again.
 */
void rt_report_relax(struct rt_report *r, int calm, uint64_t unix_ns);

#endif
