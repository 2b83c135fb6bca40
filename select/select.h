/* select.h — Gleaner-style trace selection, a pure C library (libc + libm only).
 *
 * Owns: the in-memory trace model that the coordinator (or a dataset reader) fills;
 * the event-pair encoding of a trace into sorted unique 64-bit pair hashes, Jaccard
 * similarity and pattern ids; the anomaly score with streaming p90 estimates; the
 * Drain log-template miner; grouping by entry API; alarm-driven quota allocation;
 * fast greedy DPP MAP selection with a cross-window LRU similarity cache; inclusion
 * weights; and the evaluation metrics and in-memory dataset used by `retrace
 * select-eval` and bench/select (their file readers: tools/select_eval/).
 *
 * Promises: no global state (everything lives in objects the caller creates and
 * destroys); bounded memory for log templates, the similarity cache and the encodings
 * remembered across windows; never an N×N matrix (kernel rows are computed on
 * demand); deterministic output for a given input order; the quota sum equals the
 * window budget exactly when there are enough traces. Not thread-safe per object:
 * one selector per thread.
 */
#ifndef RETRACE_SELECT_H
#define RETRACE_SELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ trace model */

enum rt_sel_level { RT_SEL_LOG_DEBUG = 0, RT_SEL_LOG_INFO, RT_SEL_LOG_WARN, RT_SEL_LOG_ERROR };

/* Template ids: ids given by the tracer API are < RT_SEL_MINED_TEMPLATE_BIT; ids mined
 * by Drain have that bit set, so the two id spaces never collide. 0 means "none". */
#define RT_SEL_MINED_TEMPLATE_BIT 0x80000000u

/* A tracer's 64-bit template id (e.g. the FNV-1a hash of the format string) folded
 * into the tracer id space: nonzero and below RT_SEL_MINED_TEMPLATE_BIT. */
static inline uint32_t rt_sel_fold_template_id(uint64_t id)
{
	uint32_t x = (uint32_t)(id ^ (id >> 31) ^ (id >> 62)) & (RT_SEL_MINED_TEMPLATE_BIT - 1u);
	return x ? x : 1u;
}

typedef struct rt_sel_log {
	uint64_t ts_ns;
	const char *text;     /* free text, mined with Drain when template_id == 0 */
	uint32_t template_id; /* 0 = not templated yet (selection fills it in) */
	uint8_t level;        /* enum rt_sel_level */
	uint16_t text_len;    /* strlen(text) when the decoder knows it and it is below
				 65 535, else 0 (Drain measures the line itself) */
} rt_sel_log;

typedef struct rt_sel_span {
	const char *service;
	const char *operation;
	int32_t parent; /* index into the trace's spans, -1 for a root */
	uint64_t start_ns;
	uint64_t end_ns;
	uint32_t first_log; /* this span's logs: trace->logs[first_log, first_log+n_logs) */
	uint32_t n_logs;    /* in time order */
	bool error;         /* the span itself reported a failure status */
	uint64_t op_key;    /* cache of rt_sel_op_key(service, operation); 0 = not yet */
} rt_sel_span;

typedef struct rt_sel_trace {
	uint64_t id_hi, id_lo;
	rt_sel_span *spans;
	uint32_t n_spans;
	rt_sel_log *logs;
	uint32_t n_logs;
} rt_sel_trace;

/* 64-bit key of a (service, operation) pair; also the key of a root group. */
uint64_t rt_sel_op_key(const char *service, const char *operation);
/* The span's op key: span->op_key if set, else computed from the names. */
uint64_t rt_sel_span_key(const rt_sel_span *span);
/* Fill op_key of every span (the selector does this once per trace). */
void rt_sel_trace_fill_keys(rt_sel_trace *t);
/* Index of the root span (parent -1, earliest start), or -1 for an empty trace. */
int32_t rt_sel_trace_root(const rt_sel_trace *t);
/* The entry API span: the root, unless the root's operation is a wildcard route
 * (contains '*', e.g. a gateway's catch-all route): then the earliest span of another service. */
int32_t rt_sel_trace_entry(const rt_sel_trace *t);
/* Group key = op key of the entry span. */
uint64_t rt_sel_trace_group(const rt_sel_trace *t);
uint64_t rt_sel_trace_duration(const rt_sel_trace *t);

/* ------------------------------------------------------------------ Drain miner */

typedef struct rt_sel_drain_config {
	unsigned depth;        /* parse-tree depth incl. root and leaf: 4 */
	double sim_threshold;  /* 0.4 */
	unsigned max_children; /* per internal node: 100 */
	size_t max_clusters;   /* bounded; least recently used evicted first */
	unsigned max_tokens;   /* longer lines are truncated */
} rt_sel_drain_config;

typedef struct rt_sel_drain rt_sel_drain;

void rt_sel_drain_config_default(rt_sel_drain_config *cfg);
rt_sel_drain *rt_sel_drain_create(const rt_sel_drain_config *cfg);
void rt_sel_drain_destroy(rt_sel_drain *d);
/* Template id of a line (creating or generalising a cluster). Ids are stable: a
 * cluster keeps its id as its template generalises; ids are never reused. */
uint32_t rt_sel_drain_add(rt_sel_drain *d, const char *line);
/* rt_sel_drain_add of a line whose length is known: len must be strlen(line). The
 * same ids; saves the miner a pass over the line to find its end. */
uint32_t rt_sel_drain_add_len(rt_sel_drain *d, const char *line, size_t len);
/* Current template text of a live id (tokens joined by ' ', variables as "<*>"),
 * written into buf; returns false if the id is unknown or evicted. */
bool rt_sel_drain_template(const rt_sel_drain *d, uint32_t id, char *buf, size_t len);
size_t rt_sel_drain_cluster_count(const rt_sel_drain *d);
/* The byte kernels of the line caches this miner runs: "avx2" (chosen at run time
 * when the CPU has it), "sse2" or "scalar" (built with RETRACE_SELECT_NO_AVX2 /
 * RETRACE_SELECT_NO_SIMD, or on other targets). All give the same ids. */
const char *rt_sel_drain_kernels(const rt_sel_drain *d);
size_t rt_sel_drain_bytes(const rt_sel_drain *d); /* heap bytes held, accounted */
/* Masking used before mining: every alphanumeric run containing a digit becomes
 * "<*>" (numbers, hex ids, UUID parts, timestamps). Exposed for tests. */
void rt_sel_mask_line(const char *in, char *out, size_t len);

/* ------------------------------------------------------------------ encoding */

typedef struct rt_sel_pairs {
	uint64_t *v; /* sorted, unique */
	size_t n, cap;
} rt_sel_pairs;

void rt_sel_pairs_free(rt_sel_pairs *p);
double rt_sel_jaccard(const uint64_t *a, size_t na, const uint64_t *b, size_t nb);
uint64_t rt_sel_pattern_id(const uint64_t *v, size_t n);

/* Streaming p90 per key (P² algorithm, 5 markers per key, table grows). */
typedef struct rt_sel_quantiles rt_sel_quantiles;
rt_sel_quantiles *rt_sel_quantiles_create(double q);
void rt_sel_quantiles_destroy(rt_sel_quantiles *qs);
void rt_sel_quantiles_add(rt_sel_quantiles *qs, uint64_t key, double x);
/* Current estimate, or a negative value when fewer than 5 samples were seen. */
double rt_sel_quantiles_get(const rt_sel_quantiles *qs, uint64_t key);

/* Encode a trace into its event-pair set. span_p90 may be NULL (no slow markers).
 * All logs must already carry a template id. Returns 0 or -1 (out of memory). */
int rt_sel_encode(const rt_sel_trace *t, const rt_sel_quantiles *span_p90, double slow_factor,
		  rt_sel_pairs *out);

/* ------------------------------------------------------------------ anomaly score */

typedef struct rt_sel_weights {
	double error_span;  /* 5: per failed span */
	double warn_log;    /* 1: per WARN log */
	double error_log;   /* 2: per ERROR log */
	double latency;     /* 2: once, when the trace is slower than slow_factor × group p90 */
	double slow_factor; /* 2.0 (was 1.2: see docs/selection.md "Paper metrics") */
} rt_sel_weights;

/* group_p90 < 0 means "unknown yet": no latency term. */
double rt_sel_anomaly_score(const rt_sel_trace *t, const rt_sel_weights *w, double group_p90);

/* ------------------------------------------------------------------ quota */

/* Split budget across groups. sizes[g] = traces in group g, alarmed may be NULL.
 * Rules: keep everything when the total fits; otherwise even split, at least 1 per
 * non-empty group (rare groups first when the budget is smaller than the number of
 * groups), surplus of small groups flows to the others; alarmed groups get up to
 * boost × the average quota, all alarmed together at most cap × budget (unless no
 * other group can use the remainder). sum(quota) == min(budget, sum(sizes)). */
void rt_sel_quota(const size_t *sizes, const bool *alarmed, size_t n_groups, size_t budget,
		  double boost, double cap, size_t *quota);
/* Same, but when the budget is smaller than the number of groups the groups with the
 * lowest priority value go first (ties: rarest first). The selector passes how many
 * traces each group had kept recently, so tiny budgets rotate across groups. */
void rt_sel_quota_prio(const size_t *sizes, const bool *alarmed, const double *priority,
		       size_t n_groups, size_t budget, double boost, double cap, size_t *quota);

/* ------------------------------------------------------------------ DPP */

/* Similarity of items i, j in [0,1] (a PSD kernel, e.g. Jaccard). */
typedef double (*rt_sel_sim_fn)(void *ctx, size_t i, size_t j);

/* Fast greedy MAP for the DPP with L_ij = q_i q_j sim(i,j) (Chen, Zhang, Zhou 2018):
 * incremental Cholesky, O(n·k) work and memory, kernel rows on demand. Stops after k
 * picks or when the best marginal gain d_j² falls below eps. Writes the picks in
 * order to picked[] and returns how many. Returns (size_t)-1 when out of memory. */
size_t rt_sel_dpp_greedy(size_t n, const double *quality, rt_sel_sim_fn sim, void *ctx, size_t k,
			 double eps, size_t *picked);

/* ------------------------------------------------------------------ similarity cache */

typedef struct rt_sel_simcache rt_sel_simcache;
rt_sel_simcache *rt_sel_simcache_create(size_t capacity);
void rt_sel_simcache_destroy(rt_sel_simcache *c);
bool rt_sel_simcache_get(rt_sel_simcache *c, uint64_t pa, uint64_t pb, float *sim);
void rt_sel_simcache_put(rt_sel_simcache *c, uint64_t pa, uint64_t pb, float sim);
size_t rt_sel_simcache_size(const rt_sel_simcache *c);
uint64_t rt_sel_simcache_hits(const rt_sel_simcache *c);
uint64_t rt_sel_simcache_misses(const rt_sel_simcache *c);

/* ------------------------------------------------------------------ selector */

typedef struct rt_sel_config {
	rt_sel_weights weights;
	double quality_gain;      /* DPP quality r = 1 + quality_gain × score: 1.0 */
	double seen_penalty;      /* r × this for a pattern kept in an earlier window: 0.2 */
	size_t seen_capacity;     /* remembered kept patterns (direct-mapped): 1 << 16 */
	double group_memory;      /* decay per window of a group's recent kept count: 0.9 */
	double dpp_eps;           /* 1e-6 */
	size_t simcache_capacity; /* pattern pairs kept across windows: 1 << 16 */
	double alarm_boost;       /* alarmed group quota up to boost × average: 3 */
	double alarm_cap;         /* alarmed groups together at most cap × budget: 0.5 */
	double drop_ratio;        /* traffic below drop_ratio × recent average = sharp drop: 0.5 */
	double max_budget_scale;  /* budget scale-up limit during an incident: 2 */
	double traffic_smoothing; /* EWMA weight of the newest window: 0.2 */
	rt_sel_drain_config drain;
	bool novelty_first; /* budget < groups: the budget goes to patterns not kept
                                 before (a group may take several), groups with nothing
                                 new this window only get what is left; budget ≥
                                 groups: every group one, the rest to new patterns
                                 first: true */
	bool decline_stale; /* with novelty_first, budget < groups: picks left over once
                                 every new pattern of the window has one are not spent
                                 on groups with nothing new (each would repeat a kept
                                 pattern; groups go without a pick below the group
                                 count anyway) but returned as rt_sel_result.declined,
                                 for the caller to carry to the next window: true */
	bool alarmed_first; /* with novelty_first, budget < groups: alarmed groups'
                                 new patterns take the picks before other groups'
                                 (the alarm boost cannot act below one pick per
                                 group; without this an alarmed group waited its
                                 turn in the rotation and errors were kept at no
                                 more than random's share): true */
	bool minute_tiers;  /* latency events of the encoding against the p90 of the
                                 span's operation in its minute, computed over the
                                 window plus the spans of that minute remembered from
                                 the previous window, in tiers 1.5 / 3 / 5 × (the
                                 paper's events);
                                 false: one slow marker above slow_factor × the
                                 streaming p90 */
} rt_sel_config;

typedef struct rt_sel_verdict {
	uint64_t pattern;
	uint64_t group;
	double score;
	double weight; /* inclusion weight when chosen: group traces / group picks */
	bool chosen;
} rt_sel_verdict;

typedef struct rt_sel_result {
	size_t n_traces;
	size_t budget; /* effective budget after any incident scale-up */
	size_t n_chosen;
	size_t declined; /* picks of the budget not spent (decline_stale): n_chosen =
                          min(budget, n) - declined */
	size_t n_groups;
	rt_sel_verdict *verdicts; /* one per input trace, owned by the selector */
	uint32_t *chosen;         /* n_chosen indices into the input, owned by the selector */
} rt_sel_result;

typedef struct rt_selector rt_selector;

/* Thread CPU time a selector spent per stage since it was created, in seconds (the
 * clock is read six times a window): where selection's time goes, for benchmarks. */
typedef struct rt_sel_stage_times {
	double mining;  /* Drain on free-text logs (0 if the caller mined them first) */
	double prepare; /* op keys, entry-API groups, trace-duration p90s */
	double p90;     /* per-minute p90 table and tiers, the cut minute's carry and re-judging */
	double encode;  /* event pairs, pattern ids, anomaly scores */
	double choose;  /* grouping, novelty, quotas, DPP, weights, the memories */
} rt_sel_stage_times;

void rt_sel_config_default(rt_sel_config *cfg);
rt_selector *rt_sel_create(const rt_sel_config *cfg);
void rt_sel_selector_stage_times(const rt_selector *s, rt_sel_stage_times *out);
void rt_sel_destroy(rt_selector *s);
rt_sel_drain *rt_sel_selector_drain(rt_selector *s);
const rt_sel_simcache *rt_sel_selector_simcache(const rt_selector *s);

/* Give every free-text log of the traces a Drain template id (done by
 * rt_sel_select_window too; exposed so callers can time or pre-run mining). */
void rt_sel_mine_templates(rt_selector *s, rt_sel_trace *traces, size_t n);

/* Run one window. Fills missing log template ids in traces (Drain), updates the
 * streaming percentiles, encodes and scores every trace, groups, allocates quotas
 * (alarmed_groups = group keys under alarm) and picks with the DPP. The result stays
 * valid until the next call. Returns 0, or -1 when out of memory.
 * Promises: exactly min(budget, n) - declined traces chosen (budget after any incident
 * scale-up; declined > 0 only below the group count, with decline_stale, when every
 * pattern of the window not kept before has a pick);
 * with a budget of at least the window's group count, every group keeps at least one;
 * with a smaller budget (novelty_first), a group keeps none only when every pattern it
 * showed in the window was kept in an earlier window or the budget went to new
 * patterns of other groups. */
int rt_sel_select_window(rt_selector *s, rt_sel_trace *traces, size_t n, size_t budget,
			 const uint64_t *alarmed_groups, size_t n_alarmed, rt_sel_result *out);

/* Same, for a window that covers only `coverage` (0, 1] of the usual window length
 * (e.g. the last, cut-off window of a replay, or a window closed early): its traffic
 * is judged as n / coverage, so a short window is not mistaken for a traffic drop
 * that would scale the budget up. rt_sel_select_window is coverage 1. */
int rt_sel_select_window_part(rt_selector *s, rt_sel_trace *traces, size_t n, size_t budget,
			      const uint64_t *alarmed_groups, size_t n_alarmed, double coverage,
			      rt_sel_result *out);

/* One window with everything the caller knows about it (rt_sel_select). */
typedef struct rt_sel_window {
	rt_sel_trace *traces; /* selected now: one verdict each */
	size_t n;
	rt_sel_trace *held; /* held back to the next window (rt_sel_hold_cut_minute): no
                               verdict; their span durations count toward the p90s of
                               their minutes now, so a minute they share with traces
                               selected now is whole */
	size_t n_held;
	size_t budget;
	const uint64_t *alarmed_groups;
	size_t n_alarmed;
	double coverage; /* (0, 1] as rt_sel_select_window_part; 0 means 1 */
	bool last;       /* no window follows (the end of a replay, a flush): the newest
                            minute is complete, so it is not read against the minute
                            before and nothing is kept to be judged again */
} rt_sel_window;

/* The general form of rt_sel_select_window_part (which is w->held = NULL, w->last =
 * false). Same promises; held traces get no verdict and are not counted in any
 * way but for the p90s of their minutes. */
int rt_sel_select(rt_selector *s, const rt_sel_window *w, rt_sel_result *out);

/* ------------------------------------------------------------------ the cut minute */

/* Which traces of a window wait for the next one (docs/selection.md "The cut minute
 * held back"). Latency events are judged against the p90 of the span's operation in
 * its minute of trace time, and a window's newest minute — the minute of its latest
 * span start, which the window's end cuts — is whole only in the next window. So
 * every trace with a span starting in that minute is held back and selected in the
 * next window, once: a trace i with held_before[i] (held_before may be NULL: none)
 * waited already and is selected now whatever its minute. The last window of a run
 * (last) holds nothing. Sets hold[i] for every trace and returns how many are held.
 * Both callers (the coordinator, the replay of rt_sel_eval_run) use this one rule;
 * the held ones go to rt_sel_select as rt_sel_window.held. */
size_t rt_sel_hold_cut_minute(const rt_sel_trace *traces, size_t n, const bool *held_before,
			      bool last, bool *hold);

/* ------------------------------------------------------------------ datasets */

typedef struct rt_sel_dataset rt_sel_dataset;

/* A dataset is built by a reader through dataset_build.h; the readers of files
 * (Nezha CSV, OTLP/JSON) are tools/select_eval/dataset_read.h. */
void rt_sel_dataset_free(rt_sel_dataset *ds);

/* What a reader read and what it had to skip. The Nezha CSV reader counts a file that
 * is empty or whose first line is not the expected header (a file cut inside its
 * header) as a bad file, and skips (and counts) rows it cannot use: a wrong number of fields, bad ids or times, a Duration that does
 * not match the times (a row cut inside it), an unterminated or malformed quoted field,
 * a Log column that is not one JSON object with a "log"/"message"/"msg" string. An
 * evaluation should refuse a dataset with skipped rows unless told to accept it. The
 * OTLP reader fails on malformed input instead, so its counts stay 0. */
typedef struct rt_sel_read_stats {
	size_t span_rows, span_rows_skipped;
	size_t log_rows, log_rows_skipped;
	size_t files, bad_files; /* CSV files read; of which empty or with a header that is
                                not the expected column list (cut inside it?) */
	char first_problem[256]; /* "FILE: line N: what" of the first skipped row */
} rt_sel_read_stats;
void rt_sel_dataset_read_stats(const rt_sel_dataset *ds, rt_sel_read_stats *out);
size_t rt_sel_dataset_count(const rt_sel_dataset *ds);
rt_sel_trace *rt_sel_dataset_trace(rt_sel_dataset *ds, size_t i);
size_t rt_sel_dataset_spans(const rt_sel_dataset *ds);
size_t rt_sel_dataset_logs(const rt_sel_dataset *ds);

/* ------------------------------------------------------------------ baseline: the original */

/* The original Gleaner algorithm, reimplemented from the paper's description as an
 * evaluation baseline (docs/selection.md "The original algorithm"); not used online.
 * One batch, no memory across batches: the paper's event-pair sets (per-minute p90
 * latency tiers over the batch), score A = 5·failed spans + WARN + 2·ERROR logs + Σ
 * latency tiers, groups by root span name, rt_sel_quota across groups (groups with an
 * error trace alarmed when alarm_on_errors), fast greedy DPP per group with the raw
 * score as quality, the rest of a group's quota filled uniformly at random (rng).
 * Logs must carry template ids. kept[i] is set for the chosen traces; exactly
 * min(budget, n) are chosen. Returns 0, or -1 when out of memory. */
#define RT_SEL_ORIGINAL_BATCH 4000 /* traces per batch in the paper's prototype */
int rt_sel_original_select_batch(rt_sel_trace *traces, size_t n, size_t budget,
				 bool alarm_on_errors, uint64_t *rng, bool *kept);

/* ------------------------------------------------------------------ evaluation */

enum rt_sel_sampler { RT_SEL_SAMPLER_GLEANER = 0, RT_SEL_SAMPLER_RANDOM, RT_SEL_SAMPLER_ORIGINAL };

typedef struct rt_sel_eval_options {
	double rate;                 /* fraction of traces to keep */
	double window_s;             /* selection window in trace time: 60 */
	uint64_t seed;               /* random baseline seed */
	bool alarm_on_errors;        /* a group with an ERROR log / failed span in the window is
                              alarmed (stands in for an exception trigger) */
	bool progress;               /* progress line on stderr */
	const rt_sel_config *config; /* NULL = defaults */
	size_t original_batch;       /* traces per batch of the original algorithm: 0 = 4000 */
	size_t random_draws;         /* independent random samplers averaged (at most
				      * RT_SEL_RANDOM_DRAWS_MAX): 0 = 1. One draw's error share
				      * spread 0.241-0.304 over seeds at 5 % (docs/selection.md):
				      * a comparison with random is with its mean */
} rt_sel_eval_options;

#define RT_SEL_RANDOM_DRAWS_MAX 64

typedef struct rt_sel_metrics {
	size_t kept, total;
	double api_coverage;     /* entry APIs kept / entry APIs seen */
	double path_coverage;    /* call paths kept / seen (parallel duplicates removed) */
	double pattern_coverage; /* patterns kept / patterns seen */
	double entropy;          /* Shannon entropy (bits) over patterns of kept traces */
	double anomalous;        /* kept traces with score > 0 */
	double errors;           /* kept traces with an ERROR log or failed span */
	double rare;             /* kept traces whose pattern is in the rarest 5 % */
	double bcr;              /* unique patterns kept / traces kept */
	double actual_rate;      /* kept / total */
	double us_per_trace;     /* sampler thread CPU time per input trace, all stages */
	double us_mining;        /* of which Drain template mining of free-text logs */
	/* the selector only (rt_sel_stage_times, per input trace): the rest of it */
	double us_prepare, us_p90, us_encode, us_choose;
} rt_sel_metrics;

/* The Gleaner paper's metric definitions (docs/selection.md "Paper metrics"), computed
 * by one function for every sampler from the dataset alone, not from the selector's
 * labels. A paper pattern is the set of event pairs of a trace, where the events of a
 * span are its operation, its logs' Drain template ids in time order and, when the
 * span is slower than 1.5 / 3 / 5 × the p90 of its (service, operation) in the same
 * minute of trace time, a latency event of that tier; pairs are consecutive events of
 * a span and (parent operation, child operation) per edge. Rare: the trace's entry API
 * has fewer than 5 % of all traces. */
typedef struct rt_sel_paper_metrics {
	size_t patterns_all, patterns_kept;
	double pattern_coverage; /* patterns_kept / patterns_all */
	double entropy;          /* Shannon entropy (bits) over paper patterns of kept traces */
	double rare;             /* kept traces of a rare entry API / kept */
	double rare_coverage;    /* kept rare traces / rare traces in the dataset */
	double errors;           /* kept with an ERROR log or failed span / kept */
	double api_coverage;     /* entry APIs kept / seen */
} rt_sel_paper_metrics;

typedef struct rt_sel_eval_report {
	rt_sel_metrics gleaner; /* retrace's selector */
	rt_sel_metrics random;
	rt_sel_metrics original; /* the original algorithm (rt_sel_original_select_batch) */
	size_t windows, batches;
	rt_sel_paper_metrics paper_gleaner; /* the same three samplers, paper definitions */
	rt_sel_paper_metrics paper_random;
	rt_sel_paper_metrics paper_original;
	/* random and paper_random are means over random_draws draws (draw 0 is the one a
	 * single draw gives); the lowest and highest of each paper figure over them */
	size_t random_draws;
	rt_sel_paper_metrics paper_random_lo, paper_random_hi;
} rt_sel_eval_report;

/* The alarms a replay raises for a window (alarm_on_errors): the entry-API group of
 * every trace with a failed span or an ERROR log, each group once, into out (room for
 * n). Returns how many. They stand in for fired exception triggers. */
size_t rt_sel_error_alarms(const rt_sel_trace *traces, size_t n, uint64_t *out);

/* Replay the dataset in time order (windows of window_s, the cut minute's traces held
 * back to the next window by rt_sel_hold_cut_minute, the last window taking them all),
 * through the selector and a random sampler at the same per-window budgets, then through the original algorithm in batches at the same
 * rate, and compute both metric sets for all three with the same code. */
int rt_sel_eval_run(rt_sel_dataset *ds, const rt_sel_eval_options *opt, rt_sel_eval_report *rep,
		    char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
