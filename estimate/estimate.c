/* estimate.c — the estimators of estimate.h.
 *
 * How it works. Consistent sampling keeps, for a trace with random value r, every
 * span whose rate is at least r. Sort the distinct rate exponents of the kept spans,
 * k_1 < ... < k_J (rates a_1 > ... > a_J): the kept set is T_J, and T_j (spans with
 * exponent <= k_j) is exactly what would have been kept had r fallen in
 * (a_{j+1}, a_j]. The estimator walks those levels from the highest rate down and
 * weighs each level's increment of the quantity by the inverse of that level's rate:
 *     X = sum_j (q(T_j) - q(T_{j-1})) / a_j.
 * Averaging over r, level j's increment is seen with probability a_j, so E[X] is the
 * sum of the increments: q(all spans). The same construction applied to q^2 gives an
 * unbiased estimate of q(all)^2, and X^2 is an unbiased estimate of E[X^2], so their
 * difference is an unbiased estimate of the variance.
 *
 * The levels are kept as a 64-bit mask of the exponents present (at most 57 of them),
 * so a trace never needs sorting or memory of its own. Span counts and trace counts
 * need no callback: their level increments come from a per-exponent histogram.
 */
#include "estimate.h"

#include "retrace/retrace.h"

#include <math.h>

static bool spans_valid(const rt_est_span *spans, size_t n)
{
    if (n > 0 && spans == NULL)
        return false;
    for (size_t i = 0; i < n; i++)
        if (spans[i].rate_exp > RT_EST_MAX_EXP)
            return false;
    return true;
}

/* Bit k set iff some span has rate exponent k. */
static uint64_t exponent_mask(const rt_est_span *spans, size_t n)
{
    uint64_t mask = 0;
    for (size_t i = 0; i < n; i++)
        mask |= UINT64_C(1) << spans[i].rate_exp;
    return mask;
}

static unsigned lowest_bit(uint64_t mask)
{
    return (unsigned)__builtin_ctzll(mask);
}

int rt_est_general(const rt_est_span *spans, size_t n, rt_est_quantity_fn q, void *arg,
                   rt_est_value *out)
{
    if (out == NULL || q == NULL || !spans_valid(spans, n))
        return RT_EST_EINVAL;
    double x = 0, sq = 0, prev = 0;
    for (uint64_t mask = exponent_mask(spans, n); mask != 0; mask &= mask - 1) {
        unsigned k = lowest_bit(mask);
        double inv_rate = ldexp(1.0, (int)k);
        double cur = q(spans, n, k, arg);
        x += (cur - prev) * inv_rate;
        sq += (cur * cur - prev * prev) * inv_rate;
        prev = cur;
    }
    out->estimate = x;
    out->variance = x * x - sq;
    return RT_EST_OK;
}

int rt_est_span_count(const rt_est_span *spans, size_t n, rt_est_value *out)
{
    if (out == NULL || !spans_valid(spans, n))
        return RT_EST_EINVAL;
    double count_at[RT_EST_MAX_EXP + 1] = {0};
    uint64_t mask = 0;
    for (size_t i = 0; i < n; i++) {
        if (!spans[i].match)
            continue;
        count_at[spans[i].rate_exp] += 1;
        mask |= UINT64_C(1) << spans[i].rate_exp;
    }
    double x = 0, sq = 0, cum = 0;
    for (; mask != 0; mask &= mask - 1) {
        unsigned k = lowest_bit(mask);
        double inv_rate = ldexp(1.0, (int)k), next = cum + count_at[k];
        x += count_at[k] * inv_rate;
        sq += (next * next - cum * cum) * inv_rate;
        cum = next;
    }
    out->estimate = x;
    out->variance = x * x - sq;
    return RT_EST_OK;
}

int rt_est_trace_count(const rt_est_span *spans, size_t n, rt_est_value *out)
{
    if (out == NULL || !spans_valid(spans, n))
        return RT_EST_EINVAL;
    unsigned kmin = RT_EST_MAX_EXP + 1;
    for (size_t i = 0; i < n; i++)
        if (spans[i].match && spans[i].rate_exp < kmin)
            kmin = spans[i].rate_exp;
    if (kmin > RT_EST_MAX_EXP) {
        out->estimate = out->variance = 0;
        return RT_EST_OK;
    }
    double inv_rate = ldexp(1.0, (int)kmin);
    out->estimate = inv_rate;
    out->variance = inv_rate * inv_rate - inv_rate;
    return RT_EST_OK;
}

static unsigned max_exponent(const rt_est_span *spans, size_t n)
{
    unsigned kmax = 0;
    for (size_t i = 0; i < n; i++)
        if (spans[i].rate_exp > kmax)
            kmax = spans[i].rate_exp;
    return kmax;
}

int rt_est_naive(const rt_est_span *spans, size_t n, bool complete, rt_est_quantity_fn q,
                 void *arg, rt_est_value *out)
{
    if (out == NULL || q == NULL || !spans_valid(spans, n))
        return RT_EST_EINVAL;
    out->estimate = out->variance = 0;
    if (!complete || n == 0)
        return RT_EST_OK;
    unsigned kmax = max_exponent(spans, n);
    double inv_rate = ldexp(1.0, (int)kmax);
    double x = q(spans, n, kmax, arg) * inv_rate;
    out->estimate = x;
    out->variance = x * x - x * x / inv_rate; /* unbiased: X^2 (1 - 2^-kmax) */
    return RT_EST_OK;
}

int rt_est_exact_variance(const rt_est_span *spans, size_t n, rt_est_quantity_fn q, void *arg,
                          double *general_var, double *naive_var)
{
    if (q == NULL || !spans_valid(spans, n))
        return RT_EST_EINVAL;
    /* r in (a_{j+1}, a_j] keeps T_j and the estimate is X_j; r above a_1 keeps nothing. */
    double x = 0, prev = 0, second_moment = 0;
    uint64_t mask = exponent_mask(spans, n);
    while (mask != 0) {
        unsigned k = lowest_bit(mask);
        mask &= mask - 1;
        double rate = ldexp(1.0, -(int)k);
        double next_rate = mask ? ldexp(1.0, -(int)lowest_bit(mask)) : 0.0;
        double cur = q(spans, n, k, arg);
        x += (cur - prev) / rate;
        second_moment += (rate - next_rate) * x * x;
        prev = cur;
    }
    /* prev is now q(all spans), the value every estimator aims at */
    if (general_var)
        *general_var = second_moment - prev * prev;
    if (naive_var)
        *naive_var = n ? prev * prev * (ldexp(1.0, (int)max_exponent(spans, n)) - 1.0) : 0.0;
    return RT_EST_OK;
}

double rt_est_q_spans(const rt_est_span *spans, size_t n, unsigned max_exp, void *arg)
{
    (void)arg;
    double c = 0;
    for (size_t i = 0; i < n; i++)
        if (spans[i].match && spans[i].rate_exp <= max_exp)
            c += 1;
    return c;
}

double rt_est_q_traces(const rt_est_span *spans, size_t n, unsigned max_exp, void *arg)
{
    (void)arg;
    for (size_t i = 0; i < n; i++)
        if (spans[i].match && spans[i].rate_exp <= max_exp)
            return 1;
    return 0;
}

double rt_est_q_calls(const rt_est_span *spans, size_t n, unsigned max_exp, void *arg)
{
    const rt_est_calls *c = arg;
    double count = 0;
    for (size_t i = 0; i < n; i++) {
        const rt_est_span *child = &spans[i];
        if (child->host != c->to || child->rate_exp > max_exp || child->parent_id == 0)
            continue;
        for (size_t j = 0; j < n; j++) {
            const rt_est_span *parent = &spans[j];
            if (parent->span_id == child->parent_id && parent->rate_exp <= max_exp) {
                count += parent->host == c->from;
                break;
            }
        }
    }
    return count;
}

void rt_est_total_add(rt_est_total *t, int rc, const rt_est_value *v)
{
    if (rc != RT_EST_OK || v == NULL || !isfinite(v->estimate) || !isfinite(v->variance)) {
        t->refused++;
        return;
    }
    t->estimate += v->estimate;
    t->variance += v->variance;
    t->traces++;
}

int rt_est_weighted(const rt_est_value *v, double weight, rt_est_value *out)
{
    if (v == NULL || out == NULL || !(weight >= 1.0) || !isfinite(weight))
        return RT_EST_EINVAL;
    double x2 = v->estimate * v->estimate;
    out->estimate = v->estimate * weight;
    out->variance = weight * weight * x2 - weight * (x2 - v->variance);
    return RT_EST_OK;
}

double rt_est_total_stderr(const rt_est_total *t)
{
    return t->variance > 0 ? sqrt(t->variance) : 0.0;
}

/* The keep rule and the §2.9 split are defined once, in include/retrace/retrace.h,
 * for the client's decision and for these functions. */
uint64_t rt_est_threshold(unsigned k)
{
    return retrace_ot_threshold(k);
}

bool rt_est_keeps(uint64_t rv, unsigned k)
{
    return retrace_ot_keeps(rv, k) != 0;
}

unsigned rt_est_rv_level(uint64_t rv)
{
    uint64_t zeros = ~rv & RT_EST_RV_MASK; /* leading ones of rv = leading zeros here */
    if (zeros == 0)
        return RT_EST_MAX_EXP;
    return (unsigned)__builtin_clzll(zeros) - (64u - RT_EST_RV_BITS);
}

int rt_est_pick_exp(double p, uint64_t random)
{
    uint64_t lower;
    uint32_t k;
    if (isnan(p))
        return RT_EST_EINVAL;
    k = retrace_rate_split(p, &lower);
    return (int)k + (random < lower ? 1 : 0);
}
