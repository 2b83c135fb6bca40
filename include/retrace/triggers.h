/*
 * triggers.h — autotriggers: the code that decides a request is interesting.
 *
 * What it owns: detectors built only on the public client API (retrace.h) —
 * Percentile, Category, exception and crash triggers, TriggerSet (lateral
 * traces), the Queue trigger, and tail-sampling style filters — plus the
 * process-wide crash handler state (the one documented global of this module).
 *
 * What it promises:
 *   - Every trigger carries a trigger id and fires through a sink; the default
 *     sink is retrace_trigger(), so a fired trigger reaches the local agent.
 *   - After creation, no call here allocates. Memory is sized at creation from
 *     the configuration and freed by the matching destroy.
 *   - Every trigger object may be used from many threads at once. Stateful
 *     triggers (Percentile, Category, TriggerSet, Queue) are sharded by
 *     default: each thread feeds its own shard (its thread slot modulo a
 *     power-of-two shard count sized from the CPUs), behind that shard's
 *     spinlock, held only for the O(1) update and never while firing, so
 *     threads sharing one trigger do not move a cache line per sample. Reads
 *     (thresholds, shares, snapshots, stats) merge the shards. `shards = 1`
 *     keeps one state shared by all threads (exact global semantics, one cache
 *     line bounce per sample under contention). Filters are immutable after
 *     creation except the rate limit, which is one atomic word.
 *     docs/triggers.md lists each one.
 *   - Percentile costs O(1) per sample whatever p is; its threshold is within a
 *     stated relative error (RETRACE_PERCENTILE_REL_ERROR) of the exact order
 *     statistic of the window.
 *   - The crash handler fires using async-signal-safe operations only, then hands
 *     the signal to the handler that was installed before it.
 *
 * The add/check functions return 1 when the trigger fired (the sink was called),
 * 0 when it did not, and a RETRACE_E_* code for a bad argument.
 */
#ifndef RETRACE_TRIGGERS_H
#define RETRACE_TRIGGERS_H

#include <stddef.h>
#include <stdint.h>

#include "retrace.h"
#include "tracer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* -------------------------------------------------------------- sinks ---- */

/*
 * Where a trigger sends its firing. fn == NULL means retrace_trigger(). A sink
 * lets triggers compose (TriggerSet hands one to the trigger it wraps) and lets
 * tests observe firings without a pool. fn must be thread-safe if the trigger is
 * shared; its return value is a RETRACE_E_* code (negative: counted as an error).
 */
typedef int (*retrace_fire_fn)(void *arg, retrace_trace_id id, uint32_t trigger_id,
			       const retrace_trace_id *lateral, size_t n_lateral);

struct retrace_fire_sink {
	retrace_fire_fn fn;
	void *arg;
};

/* Counters every stateful trigger keeps (exact: updated under its lock). */
struct retrace_trigger_stats {
	uint64_t samples;     /* calls that were accounted */
	uint64_t fired;       /* calls that fired */
	uint64_t fire_errors; /* firings the sink refused (queue full, no trace...) */
};

/* --------------------------------------------------------- Percentile ---- */

/*
 * Percentile(p): fires when a sample is above the p-th percentile of a sliding
 * window of recent samples. The threshold θ approximates the k-th largest value
 * of the window, k = max(1, floor(n * (1 - p/100))) for n samples in it, so a
 * sample fires with probability ≈ (1 - p/100) on a stationary stream. A sample is
 * judged against the window *before* it is added.
 *
 * Error bound: with q* the exact k-th largest value, q* <= θ <= q* * (1 + 2^-7)
 * (values below 256 are exact). A sample v fires iff v > θ.
 */
#define RETRACE_PERCENTILE_REL_ERROR (1.0 / 128.0)

struct retrace_percentile_config {
	uint32_t trigger_id;
	double percentile;    /* p in (0, 100), e.g. 99.9 */
	uint32_t window;      /* samples kept; 0 = ceil(2/(1-p)); raised to that floor
	                         and to at least 100 */
	uint64_t window_ns;   /* also forget samples older than this; 0 = count only
	                         (CLOCK_MONOTONIC_COARSE: a few ms resolution) */
	uint32_t min_samples; /* fire only once the window holds this many samples;
	                         0 = ceil(1/(1-p)) */
	unsigned int shards;  /* 0 (default): one window per thread, up to a
	                         power-of-two count sized from the CPUs (1 with
	                         batch); a sample is judged against its thread's
	                         window, reads merge them. 1: one window shared by
	                         all threads (exact semantics, contended). S > 1:
	                         S windows; a thread always feeds the same one.
	                         At most 256 */
	uint32_t batch;       /* 0: judge and insert each sample under the window's
	                         lock (exact). B in 2..256: each thread judges against
	                         the threshold published at the last merge and stages
	                         its samples, merging B at a time (one shared window
	                         without cross-core traffic per sample; decisions may
	                         miss up to B samples per thread) */
	struct retrace_fire_sink sink;
};

struct retrace_percentile;

/* NULL on a bad configuration or out of memory. */
struct retrace_percentile *retrace_percentile_create(
	const struct retrace_percentile_config *cfg);
void retrace_percentile_destroy(struct retrace_percentile *p);

/* Judge `value` for trace `id` (fires the sink if above θ), then add it. */
int retrace_percentile_add(struct retrace_percentile *p, retrace_trace_id id,
			   uint64_t value);

/* Merge every thread's staged samples now (batch mode; a no-op otherwise). */
void retrace_percentile_flush(struct retrace_percentile *p);

/* θ of the calling thread's shard; UINT64_MAX while its window is empty. */
uint64_t retrace_percentile_threshold(struct retrace_percentile *p);

/*
 * θ of the union of all shards' windows (k from their total count), within the
 * same bound: q* <= θ <= q* (1 + RETRACE_PERCENTILE_REL_ERROR) for q* the exact
 * k-th largest of the union. With one shard, or one thread, it equals
 * retrace_percentile_threshold. UINT64_MAX while every window is empty.
 * Locks every shard: a read for reports, not for the per-request path.
 */
uint64_t retrace_percentile_merged_threshold(struct retrace_percentile *p);

/* How many shards the trigger was created with (1 = one shared window). */
unsigned int retrace_percentile_shards(const struct retrace_percentile *p);

/* Summed over shards; flushes staged samples first. */
void retrace_percentile_stats(struct retrace_percentile *p,
			      struct retrace_trigger_stats *out);

/* Check every internal invariant (tests): 0 if consistent, else -1. */
int retrace_percentile_selfcheck(struct retrace_percentile *p);

/* ----------------------------------------------------------- Category ---- */

/*
 * Category(f): fires for a label seen in fewer than fraction f of recent
 * samples. Counts live in a count-min sketch (conservative update, 4 rows, width
 * sized so the overestimate is at most f/10 of the total with probability
 * >= 1 - e^-4), decayed by halving every `window` samples. So a label whose true
 * recent share is >= f never fires, and one below 0.9 f fires (w.h.p.). Memory
 * is bounded whatever the number of distinct labels.
 *
 * Sharded by default: each thread counts into its own sketch and a sample is
 * judged against its thread's recent samples (the guarantee above holds per
 * thread); retrace_category_share merges the sketches (the sum of count-min
 * sketches with the same hashes is the sketch of the union).
 */
struct retrace_category_config {
	uint32_t trigger_id;
	double fraction;      /* f in (0, 0.5] */
	uint32_t window;      /* halve all counts every `window` samples; 0 = ceil(100/f) */
	uint32_t min_samples; /* fire only after this many samples; 0 = ceil(2/f) */
	struct retrace_fire_sink sink;
	unsigned int shards;  /* 0 (default): one sketch per thread (as Percentile);
	                         1: one sketch shared by all threads; S: S sketches.
	                         At most 256. (Added after the first release: the
	                         struct grew by this field.) */
};

struct retrace_category;

struct retrace_category *retrace_category_create(
	const struct retrace_category_config *cfg);
void retrace_category_destroy(struct retrace_category *c);

/* Judge `label` (fires if rarer than f), then count it. */
int retrace_category_add(struct retrace_category *c, retrace_trace_id id,
			 uint64_t label);

/* The estimated recent share of `label` (0..1), merged over all shards. */
double retrace_category_share(struct retrace_category *c, uint64_t label);

unsigned int retrace_category_shards(const struct retrace_category *c);

void retrace_category_stats(struct retrace_category *c,
			    struct retrace_trigger_stats *out);

/* A 64-bit label for a string (FNV-1a), for string categories. */
uint64_t retrace_label(const char *s);

/* -------------------------------------------------- exception, crash ---- */

/* Fire `trigger_id` for the calling thread's current trace. */
static inline int retrace_exception(uint32_t trigger_id)
{
	return retrace_trigger(retrace_current(), trigger_id, NULL, 0);
}

/* One line for a C error path:  if (rc < 0) RETRACE_EXCEPTION(MY_TRIGGER); */
#define RETRACE_EXCEPTION(trigger_id) ((void)retrace_exception(trigger_id))

/*
 * An expression that evaluates `cond` once, fires when it is true, and yields it:
 *   if (RETRACE_FAIL_IF(fd < 0, MY_TRIGGER)) return -1;
 */
#define RETRACE_FAIL_IF(cond, trigger_id)                                     \
	(__builtin_expect(!!(cond), 0) ? (RETRACE_EXCEPTION(trigger_id), 1) : 0)

/*
 * Install the crash handler for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT.
 * On such a signal, if the crashing thread is in a trace, it fires
 * retrace_trigger(current trace, trigger_id) — async-signal-safe — and then
 * chains: a previous handler function is called with the same arguments; a
 * previous SIG_DFL/SIG_IGN is restored and the signal re-raised, so the process
 * dies of it (core dump included). trigger_id 0 means RETRACE_TRIGGER_CRASH.
 * Installing again only changes the trigger id. Returns RETRACE_OK or
 * RETRACE_E_SYS. Threads that want stack-overflow crashes caught must give
 * themselves an alternate signal stack (sigaltstack); the handler uses SA_ONSTACK.
 */
int retrace_crash_handler_install(uint32_t trigger_id);

/* Put back the handlers that were there before install. */
void retrace_crash_handler_uninstall(void);

/* --------------------------------------------------------- TriggerSet ---- */

/*
 * TriggerSet(T, N): remembers the N most recent trace ids passed to _add and,
 * whenever a trigger that fires into retrace_trigger_set_sink() fires for trace
 * X, forwards the firing to `downstream` with the remembered ids (newest first,
 * X itself left out) appended to X's own laterals, at most RETRACE_MAX_LATERAL.
 *
 * Sharded by default: each thread remembers its own last N ids and a firing or
 * snapshot merges them newest first (each thread's ids in exact order; across
 * threads by an epoch each shard advances every 1024 of its adds, so "most
 * recent" across threads is right to about 1024 adds per thread, and a thread
 * that stopped adding drops behind once the others have added that many; the
 * shards take turns among equal epochs). With one thread, or shards = 1, the
 * ids are exactly
 * the last N added.
 */
struct retrace_trigger_set;

/* n in 1..RETRACE_MAX_LATERAL; default shards. */
struct retrace_trigger_set *retrace_trigger_set_create(
	unsigned int n, struct retrace_fire_sink downstream);

/* As above; shards 0 = default, 1 = one ring for all threads, at most 256. */
struct retrace_trigger_set *retrace_trigger_set_create_sharded(
	unsigned int n, struct retrace_fire_sink downstream, unsigned int shards);

unsigned int retrace_trigger_set_shards(const struct retrace_trigger_set *s);
void retrace_trigger_set_destroy(struct retrace_trigger_set *s);

void retrace_trigger_set_add(struct retrace_trigger_set *s, retrace_trace_id id);

/* The sink to give the wrapped trigger T. */
struct retrace_fire_sink retrace_trigger_set_sink(struct retrace_trigger_set *s);

/* Copy the remembered ids, newest first, skipping `exclude`; returns how many. */
size_t retrace_trigger_set_snapshot(struct retrace_trigger_set *s,
				    retrace_trace_id *out, size_t max,
				    retrace_trace_id exclude);

/* samples = ids added, fired = firings forwarded. */
void retrace_trigger_set_stats(struct retrace_trigger_set *s,
			       struct retrace_trigger_stats *out);

/* ------------------------------------------------------------- Queue ---- */

/*
 * Queue trigger = TriggerSet(Percentile(queueing delay), N), for a queue the
 * service owns: call _dequeued when a request leaves the queue with the time it
 * waited. When its wait is above the percentile, the N requests dequeued just
 * before it (the ones that were ahead of it) are collected as laterals.
 */
struct retrace_queue_trigger_config {
	uint32_t trigger_id;
	double percentile;   /* as Percentile */
	uint32_t window;     /* as Percentile */
	uint64_t window_ns;  /* as Percentile */
	unsigned int lateral; /* N, 1..RETRACE_MAX_LATERAL; 0 = 16 */
	struct retrace_fire_sink sink;
	unsigned int shards;  /* for both the Percentile and the TriggerSet: 0
	                         (default) per thread, 1 one shared state. (Added:
	                         the struct grew by this field.) */
};

struct retrace_queue_trigger;

struct retrace_queue_trigger *retrace_queue_trigger_create(
	const struct retrace_queue_trigger_config *cfg);
void retrace_queue_trigger_destroy(struct retrace_queue_trigger *q);
int retrace_queue_trigger_dequeued(struct retrace_queue_trigger *q,
				   retrace_trace_id id, uint64_t queueing_delay);

/* ------------------------------------------------------------ Filters ---- */

/*
 * Filters are predicates over a summary of a finished request, in the manner of
 * tail-sampling policies. Build a tree once; evaluate it from any thread.
 */
enum retrace_attr_type {
	RETRACE_ATTR_INT = 1,
	RETRACE_ATTR_DOUBLE = 2,
	RETRACE_ATTR_STRING = 3,
};

struct retrace_attr {
	const char *key;
	int type; /* enum retrace_attr_type */
	union {
		int64_t i;
		double d;
		const char *s;
	} v;
};

/* Span status codes are OpenTelemetry's, RETRACE_STATUS_UNSET / _OK / _ERROR of
 * retrace/abi.h (any int works with the status filter). */

struct retrace_span_summary {
	retrace_trace_id trace_id;
	uint64_t duration_ns;
	int status_code;
	const struct retrace_attr *attrs;
	size_t n_attrs;
};

struct retrace_filter;

#define RETRACE_FILTER_MAX_VALUES 16   /* status codes / strings per filter */
#define RETRACE_FILTER_MAX_CHILDREN 16 /* per AND/OR node */

/* duration_ns >= min_ns and (max_ns == 0 or duration_ns <= max_ns). */
struct retrace_filter *retrace_filter_latency(uint64_t min_ns, uint64_t max_ns);
/* status_code is one of codes[0..n). */
struct retrace_filter *retrace_filter_status(const int *codes, size_t n);
/* An INT or DOUBLE attribute `key` with min <= value <= max. */
struct retrace_filter *retrace_filter_numeric(const char *key, double min, double max);
/* A STRING attribute `key` equal to one of values (invert: none of them, or absent). */
struct retrace_filter *retrace_filter_string(const char *key,
					     const char *const *values, size_t n,
					     int invert);
/* Consistent by trace id: retrace_trace_hash(id) < fraction * 2^64. */
struct retrace_filter *retrace_filter_probabilistic(double fraction);
/* At most per_second matches per second on average, bursts up to `burst`. */
struct retrace_filter *retrace_filter_rate_limit(double per_second, double burst);
/*
 * Composition; takes ownership of the children (freed with the parent, also on
 * failure). Children are evaluated in order with short-circuit, so put a rate
 * limit last in an AND.
 */
struct retrace_filter *retrace_filter_and(struct retrace_filter *const *children,
					  size_t n);
struct retrace_filter *retrace_filter_or(struct retrace_filter *const *children,
					 size_t n);
struct retrace_filter *retrace_filter_not(struct retrace_filter *child);
void retrace_filter_free(struct retrace_filter *f);

/* 1 if the summary matches, 0 if not. */
int retrace_filter_match(const struct retrace_filter *f,
			 const struct retrace_span_summary *s);

/* Match, and on a match fire trigger_id for s->trace_id (sink NULL: retrace_trigger). */
int retrace_filter_fire(const struct retrace_filter *f, uint32_t trigger_id,
			const struct retrace_span_summary *s,
			const struct retrace_fire_sink *sink);

#ifdef __cplusplus
}
#endif

#endif
