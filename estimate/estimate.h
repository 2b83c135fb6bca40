/* estimate.h — Ertl's unbiased estimation from partially sampled traces, a pure C
 * library (libc + libm only).
 *
 * Owns: the model of a partially sampled trace, the general estimator of
 * "Estimation from Partially Sampled Distributed Traces" (Ertl 2021, eq. 6) with
 * its unbiased variance estimate (eq. 7), the simplified forms for span counts (sum
 * of inverse rates) and trace counts (eq. 8), the naive complete-traces-only
 * estimator beside it, the exact variance of both for a trace known in full (for
 * simulations and planning), the consistent keep decision on a 56-bit random value
 * (OpenTelemetry's `rv`/`th` rule) and the §2.9 rate-limited choice between two
 * neighbouring powers of two.
 *
 * The model. A trace is a set of spans. Each span ran on a host (an agent, a
 * service) that sampled it with a power-of-two rate 2^-k, k = rate_exp in
 * [0, RT_EST_MAX_EXP]. Sampling is consistent: every host decides on the same
 * random value of the trace, r uniform in (0, 1], and keeps its spans iff
 * r <= 2^-k. So the kept spans of a trace are always "every span whose rate is at
 * least r": a nested family, and a trace whose lowest rate is 2^-k is complete with
 * probability 2^-k. An estimator sees only the kept spans, each with its own rate,
 * and never needs to know whether the trace is complete.
 *
 * A quantity is a number computed from a set of spans (how many spans match, does
 * any span match, how many spans of host B have a parent span on host A). It must be
 * 0 on the empty set. The estimators are evaluated on the kept spans of each trace,
 * and their sum over traces is an unbiased estimate of the quantity summed over all
 * traces (kept or not), with a variance estimate whose expectation is the true
 * variance. When every quantity value is an integer, every estimate is an integer
 * too (rates are powers of two).
 *
 * Promises: no global state, no allocation, no I/O; bad input (a rate exponent out
 * of range, a NULL pointer with n > 0) is refused with RT_EST_EINVAL and never read
 * past; a caller sums rt_est_value results into an rt_est_total, which counts the
 * refused traces.
 */
#ifndef RETRACE_ESTIMATE_H
#define RETRACE_ESTIMATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The lowest rate expressible with a 56-bit random value is 2^-56. */
#define RT_EST_MAX_EXP 56u
#define RT_EST_RV_BITS 56u
#define RT_EST_RV_MASK ((UINT64_C(1) << RT_EST_RV_BITS) - 1u)

enum { RT_EST_OK = 0, RT_EST_EINVAL = -1 };

/* One kept span of a trace. */
typedef struct rt_est_span {
    uint64_t span_id;
    uint64_t parent_id; /* the span's real parent (0: a root, or not known) */
    uint32_t host;      /* agent/service that ran the span and chose its rate */
    uint8_t rate_exp;   /* k: kept with probability 2^-k (0: always) */
    uint8_t match;      /* nonzero: the predicate under estimation holds */
} rt_est_span;

/* One estimate and its estimated variance (the variance estimate is unbiased, so
 * for a single trace it can be negative; sums over many traces rarely are). */
typedef struct rt_est_value {
    double estimate;
    double variance;
} rt_est_value;

/* A sum of per-trace estimates over independent traces. */
typedef struct rt_est_total {
    double estimate;
    double variance;
    uint64_t traces;   /* traces added */
    uint64_t refused;  /* traces whose estimate was refused (bad input) */
} rt_est_total;

/* A quantity evaluated on the subset of spans[0..n) whose rate_exp <= max_exp (the
 * spans the trace would have kept with a larger random value). Must return 0 when
 * that subset is empty. */
typedef double (*rt_est_quantity_fn)(const rt_est_span *spans, size_t n, unsigned max_exp,
                                     void *arg);

/* --------------------------------------------------------------- estimators */

/* The general estimator (eq. 6) and its variance estimate (eq. 7) for one trace.
 * With k_1 < ... < k_J the distinct rate exponents among the kept spans, T_j the kept
 * spans with rate_exp <= k_j and q_j = q(T_j), q_0 = 0:
 *     X = sum_j (q_j - q_{j-1}) 2^{k_j}
 *     V = X^2 - sum_j (q_j^2 - q_{j-1}^2) 2^{k_j}
 * Unbiased for any quantity; its variance is never above the naive estimator's when
 * the quantity never decreases as spans are added (Lemma 3; every count here). */
int rt_est_general(const rt_est_span *spans, size_t n, rt_est_quantity_fn q, void *arg,
                   rt_est_value *out);

/* Matching spans: sum of 2^k over the kept matching spans (inverse rates), and the
 * variance estimate of the general form, in O(n). */
int rt_est_span_count(const rt_est_span *spans, size_t n, rt_est_value *out);

/* Traces with at least one matching span (eq. 8): 2^k for the smallest k among the
 * kept matching spans (0 when none), variance 4^k - 2^k. */
int rt_est_trace_count(const rt_est_span *spans, size_t n, rt_est_value *out);

/* The naive estimator: a complete trace counts q(all)·2^kmax (kmax: the largest
 * exponent in the trace, 1/2^kmax the probability it is complete), a partial trace
 * counts 0. `complete` comes from the caller (coherence, ground truth). */
int rt_est_naive(const rt_est_span *spans, size_t n, bool complete, rt_est_quantity_fn q,
                 void *arg, rt_est_value *out);

/* For a trace known in full (every span, with the rate it would be sampled at): the
 * exact variance of rt_est_general's estimate and of rt_est_naive's over the random
 * value. Either pointer may be NULL. */
int rt_est_exact_variance(const rt_est_span *spans, size_t n, rt_est_quantity_fn q, void *arg,
                          double *general_var, double *naive_var);

/* ----------------------------------------------------------------- quantities */

/* Matching spans in the subset (arg unused). */
double rt_est_q_spans(const rt_est_span *spans, size_t n, unsigned max_exp, void *arg);
/* 1 if a matching span is in the subset, else 0 (arg unused). */
double rt_est_q_traces(const rt_est_span *spans, size_t n, unsigned max_exp, void *arg);

/* "Host A called host B": spans of host `to` in the subset whose parent span is in
 * the subset and ran on host `from`. arg: a struct rt_est_calls. O(n^2): traces are
 * small; a caller with large traces writes an indexed quantity of its own. */
typedef struct rt_est_calls {
    uint32_t from, to;
} rt_est_calls;
double rt_est_q_calls(const rt_est_span *spans, size_t n, unsigned max_exp, void *arg);

/* ------------------------------------------------------------------- totals */

/* Add one trace's value (rc is what the estimator returned: refused values only
 * count). */
void rt_est_total_add(rt_est_total *t, int rc, const rt_est_value *v);

/* A value for a trace that a later stage kept with inclusion probability 1/weight
 * (Gleaner selection): the estimate scales by weight and the variance estimate
 * becomes w^2 X^2 - w (X^2 - V), unbiased when that choice is independent of the
 * sampling's random value. weight < 1 or NaN is refused. */
int rt_est_weighted(const rt_est_value *v, double weight, rt_est_value *out);

/* sqrt(max(0, variance)). */
double rt_est_total_stderr(const rt_est_total *t);

/* ----------------------------------------------------------------- sampling */

/* The rejection threshold for rate 2^-k on a 56-bit random value: 2^56 - 2^(56-k)
 * (OpenTelemetry's `th`; k > 56 is treated as 56). */
uint64_t rt_est_threshold(unsigned k);

/* Does a host at rate 2^-k keep the trace with random value rv (low 56 bits used)?
 * rv >= threshold(k), i.e. the top k of the 56 bits are all ones. */
bool rt_est_keeps(uint64_t rv, unsigned k);

/* The largest k at which rv is kept: the number of leading ones of its 56 bits. */
unsigned rt_est_rv_level(uint64_t rv);

/* §2.9 rate-limited sampling with powers of two only: for a wanted rate p, the
 * exponent k with 2^-(k+1) < p <= 2^-k is returned with probability 2p·2^k - 1 and
 * k+1 otherwise, so that the expected rate is exactly p. `random` is a uniform 64-bit
 * value that must not come from the trace's own random value. p >= 1 gives 0; p <= 0
 * or below 2^-56 gives RT_EST_MAX_EXP; NaN gives RT_EST_EINVAL. */
int rt_est_pick_exp(double p, uint64_t random);

#ifdef __cplusplus
}
#endif

#endif
