/* test_estimate.c — the estimators against hand-worked traces and against a
 * simulation with known truth (issue 14, "Verification").
 *
 * The simulation: 10^5 traces over three service trees (sim.h), one rate 2^-k per
 * host per case, consistent sampling on a 56-bit random value per trace and seed.
 * Over SIM_SEEDS seeds the mean estimate of matching spans, matching traces and
 * "frontend called payment" must lie within three standard errors of the truth; the
 * spread of the estimates must agree with the exact variance the library computes;
 * the mean variance estimate must agree with it too; every per-trace exact variance
 * must be at most the naive estimator's (Lemma 3); and every estimate, summed over
 * the population, must be an integer. Seeds are fixed, so the run is deterministic;
 * a wrong weight, level or variance term moves the mean by many standard errors.
 */
#include "estimate.h"
#include "sim.h"

#include <check.h>
#include "common/suite.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define SIM_TRACES 100000u
/* Fewer seeds under the sanitizers (tests/estimate/CMakeLists.txt): the checks scale
 * their tolerance with the seed count, only their power drops. */
#ifndef SIM_SEEDS
#define SIM_SEEDS 300u
#endif

/* ------------------------------------------------------------- hand-worked */

START_TEST(single_span_is_horvitz_thompson)
{
    rt_est_span s = {.span_id = 1, .host = 1, .rate_exp = 2, .match = 1};
    rt_est_value v;
    ck_assert_int_eq(rt_est_span_count(&s, 1, &v), RT_EST_OK);
    ck_assert(v.estimate == 4.0);
    ck_assert(v.variance == 12.0); /* (1 - p) / p^2 with p = 1/4 */
    ck_assert_int_eq(rt_est_trace_count(&s, 1, &v), RT_EST_OK);
    ck_assert(v.estimate == 4.0 && v.variance == 12.0);
    ck_assert_int_eq(rt_est_general(&s, 1, rt_est_q_spans, NULL, &v), RT_EST_OK);
    ck_assert(v.estimate == 4.0 && v.variance == 12.0);
}
END_TEST

/* Two matching spans at rates 1 and 1/2: seen {a} with probability 1/2 (estimate 1),
 * {a, b} otherwise (estimate 1 + 2 = 3). Mean 2, variance 1; variance estimates 0
 * and 2, mean 1. */
START_TEST(two_levels_worked_by_hand)
{
    rt_est_span s[2] = {
        {.span_id = 1, .host = 1, .rate_exp = 0, .match = 1},
        {.span_id = 2, .parent_id = 1, .host = 2, .rate_exp = 1, .match = 1},
    };
    rt_est_value v;
    ck_assert_int_eq(rt_est_span_count(s, 1, &v), RT_EST_OK);
    ck_assert(v.estimate == 1.0 && v.variance == 0.0);
    ck_assert_int_eq(rt_est_span_count(s, 2, &v), RT_EST_OK);
    ck_assert(v.estimate == 3.0 && v.variance == 2.0);
    double gv, nv;
    ck_assert_int_eq(rt_est_exact_variance(s, 2, rt_est_q_spans, NULL, &gv, &nv), RT_EST_OK);
    ck_assert(gv == 1.0);
    ck_assert(nv == 4.0); /* 2 * 2 with probability 1/2: variance 4 */
    /* the trace count only needs the highest-rate match */
    ck_assert_int_eq(rt_est_trace_count(s, 2, &v), RT_EST_OK);
    ck_assert(v.estimate == 1.0 && v.variance == 0.0);
    /* host 1 called host 2 once: seen only with both, weight 2 */
    rt_est_calls c = {1, 2};
    ck_assert_int_eq(rt_est_general(s, 2, rt_est_q_calls, &c, &v), RT_EST_OK);
    ck_assert(v.estimate == 2.0 && v.variance == 2.0);
    ck_assert_int_eq(rt_est_general(s, 1, rt_est_q_calls, &c, &v), RT_EST_OK);
    ck_assert(v.estimate == 0.0 && v.variance == 0.0);
    ck_assert_int_eq(rt_est_naive(s, 2, true, rt_est_q_spans, NULL, &v), RT_EST_OK);
    ck_assert(v.estimate == 4.0 && v.variance == 8.0);
    ck_assert_int_eq(rt_est_naive(s, 1, false, rt_est_q_spans, NULL, &v), RT_EST_OK);
    ck_assert(v.estimate == 0.0);
}
END_TEST

START_TEST(bad_input_is_refused_and_counted)
{
    rt_est_span s = {.span_id = 1, .rate_exp = RT_EST_MAX_EXP + 1, .match = 1};
    rt_est_value v = {0, 0};
    rt_est_total t = {0};
    int rc = rt_est_span_count(&s, 1, &v);
    ck_assert_int_eq(rc, RT_EST_EINVAL);
    rt_est_total_add(&t, rc, &v);
    ck_assert_int_eq(rt_est_trace_count(&s, 1, &v), RT_EST_EINVAL);
    ck_assert_int_eq(rt_est_general(&s, 1, rt_est_q_spans, NULL, &v), RT_EST_EINVAL);
    ck_assert_int_eq(rt_est_general(NULL, 3, rt_est_q_spans, NULL, &v), RT_EST_EINVAL);
    ck_assert_int_eq(rt_est_naive(&s, 1, true, rt_est_q_spans, NULL, &v), RT_EST_EINVAL);
    ck_assert_int_eq(rt_est_exact_variance(&s, 1, rt_est_q_spans, NULL, NULL, NULL),
                     RT_EST_EINVAL);
    ck_assert_uint_eq(t.refused, 1);
    ck_assert_uint_eq(t.traces, 0);
    s.rate_exp = RT_EST_MAX_EXP; /* the lowest rate is fine */
    rc = rt_est_span_count(&s, 1, &v);
    ck_assert_int_eq(rc, RT_EST_OK);
    rt_est_total_add(&t, rc, &v);
    ck_assert_uint_eq(t.traces, 1);
    ck_assert(t.estimate == ldexp(1.0, RT_EST_MAX_EXP));
    ck_assert_int_eq(rt_est_span_count(NULL, 0, &v), RT_EST_OK);
    ck_assert(v.estimate == 0.0 && v.variance == 0.0);
    ck_assert_int_eq(rt_est_weighted(&v, 0.5, &v), RT_EST_EINVAL);
    ck_assert_int_eq(rt_est_weighted(&v, NAN, &v), RT_EST_EINVAL);
    ck_assert_int_eq(rt_est_pick_exp(NAN, 1), RT_EST_EINVAL);
}
END_TEST

/* A trace kept by selection with probability 1/2 after a rate-1 span: estimate 2
 * when kept (mean 1), variance estimate 2 when kept (mean 1 = the true variance). */
START_TEST(selection_weight)
{
    rt_est_value v = {1.0, 0.0}, w;
    ck_assert_int_eq(rt_est_weighted(&v, 1.0, &w), RT_EST_OK);
    ck_assert(w.estimate == 1.0 && w.variance == 0.0);
    ck_assert_int_eq(rt_est_weighted(&v, 2.0, &w), RT_EST_OK);
    ck_assert(w.estimate == 2.0 && w.variance == 2.0);
}
END_TEST

/* Two-span traces (rates 1/2 and 1/8) that a later stage keeps with probability 1/4,
 * independently: the weighted estimate of matching spans is unbiased and so is its
 * variance estimate. Exact variance per trace: with X the sampling estimate,
 * Var(wXI) = w E[X^2] - q^2, E[X^2] = Var X + q^2 (rt_est_exact_variance). */
START_TEST(selection_weight_is_unbiased)
{
    enum { TRACES = 2000, SEEDS = 400 };
    const double w = 4.0;
    rt_est_span all[2] = {
        {.span_id = 1, .host = 1, .rate_exp = 1, .match = 1},
        {.span_id = 2, .parent_id = 1, .host = 2, .rate_exp = 3, .match = 1},
    };
    double gv;
    ck_assert_int_eq(rt_est_exact_variance(all, 2, rt_est_q_spans, NULL, &gv, NULL), 0);
    const double truth = 2.0 * TRACES, exact = TRACES * (w * (gv + 4.0) - 4.0);
    sim_rng rng = {2024};
    double sum = 0, sumsq = 0, vsum = 0, vsumsq = 0;
    size_t refused = 0;
    for (unsigned s = 0; s < SEEDS; s++) {
        rt_est_total tot = {0};
        for (unsigned t = 0; t < TRACES; t++) {
            unsigned g = rt_est_rv_level(sim_next(&rng) >> 8);
            if (sim_uniform(&rng) >= 1.0 / w)
                continue; /* not selected */
            size_t n = (g >= 1) + (g >= 3);
            rt_est_value v, vw;
            int rc = rt_est_span_count(all, n, &v);
            rc = rc ? rc : rt_est_weighted(&v, w, &vw);
            refused += rc != 0;
            rt_est_total_add(&tot, rc, &vw);
        }
        sum += tot.estimate;
        sumsq += tot.estimate * tot.estimate;
        vsum += tot.variance;
        vsumsq += tot.variance * tot.variance;
    }
    ck_assert_uint_eq(refused, 0);
    double mean = sum / SEEDS, var = (sumsq - SEEDS * mean * mean) / (SEEDS - 1);
    double vmean = vsum / SEEDS, vvar = (vsumsq - SEEDS * vmean * vmean) / (SEEDS - 1);
    ck_assert_msg(fabs(mean - truth) <= 3 * sqrt(var / SEEDS), "mean %.1f truth %.1f", mean,
                  truth);
    ck_assert_msg(fabs(vmean - exact) <= 3 * sqrt(vvar / SEEDS), "var estimate %.1f exact %.1f",
                  vmean, exact);
    ck_assert_msg(fabs(var - exact) <= 4 * sqrt(2.0 / (SEEDS - 1)) * exact,
                  "empirical var %.1f exact %.1f", var, exact);
}
END_TEST

/* ----------------------------------------------------------------- sampling */

START_TEST(keep_rule_is_the_threshold_and_nested)
{
    ck_assert_uint_eq(rt_est_threshold(0), 0);
    ck_assert_uint_eq(rt_est_threshold(1), UINT64_C(1) << 55);
    ck_assert_uint_eq(rt_est_threshold(2), UINT64_C(3) << 54);
    ck_assert_uint_eq(rt_est_threshold(56), RT_EST_RV_MASK);
    ck_assert(rt_est_keeps(RT_EST_RV_MASK, 56));
    ck_assert(!rt_est_keeps(RT_EST_RV_MASK - 1, 56));
    ck_assert_uint_eq(rt_est_rv_level(0), 0);
    ck_assert_uint_eq(rt_est_rv_level(RT_EST_RV_MASK), 56);
    ck_assert_uint_eq(rt_est_rv_level(UINT64_C(3) << 54), 2);
    sim_rng rng = {42};
    enum { DRAWS = 1 << 18 };
    unsigned kept[9] = {0};
    size_t not_nested = 0;
    for (unsigned i = 0; i < DRAWS; i++) {
        uint64_t rv = sim_next(&rng) >> 8;
        unsigned level = rt_est_rv_level(rv);
        for (unsigned k = 0; k <= 56 && i < (1u << 14); k++)
            not_nested += rt_est_keeps(rv, k) != (k <= level);
        for (unsigned k = 0; k < 9; k++)
            kept[k] += rt_est_keeps(rv, k);
    }
    ck_assert_uint_eq(not_nested, 0);
    for (unsigned k = 0; k < 9; k++) {
        double p = ldexp(1.0, -(int)k), want = p * DRAWS;
        double sd = sqrt(DRAWS * p * (1 - p));
        ck_assert_msg(fabs(kept[k] - want) <= 4 * sd + 1e-9, "k=%u kept %u of %u", k, kept[k],
                      DRAWS);
    }
}
END_TEST

START_TEST(rate_limited_choice_has_the_wanted_mean_rate)
{
    const double wanted[] = {1.0, 0.75, 0.5, 0.3, 0.1, 0.0123, 1e-6};
    sim_rng rng = {7};
    enum { DRAWS = 200000 };
    for (size_t w = 0; w < sizeof wanted / sizeof *wanted; w++) {
        double p = wanted[w], sum = 0, sumsq = 0;
        int lo = 99, hi = -1;
        size_t out_of_range = 0;
        for (unsigned i = 0; i < DRAWS; i++) {
            int k = rt_est_pick_exp(p, sim_next(&rng));
            out_of_range += k < 0 || k > (int)RT_EST_MAX_EXP;
            lo = k < lo ? k : lo;
            hi = k > hi ? k : hi;
            double r = ldexp(1.0, -k);
            sum += r;
            sumsq += r * r;
        }
        ck_assert_uint_eq(out_of_range, 0);
        ck_assert_int_le(hi - lo, 1); /* only the two neighbouring powers */
        ck_assert(ldexp(1.0, -hi) <= p && p <= ldexp(1.0, -lo));
        double mean = sum / DRAWS, var = sumsq / DRAWS - mean * mean;
        double se = sqrt(var > 0 ? var / DRAWS : 0);
        ck_assert_msg(fabs(mean - p) <= 3 * se + 1e-15, "p=%g mean=%g se=%g", p, mean, se);
    }
    ck_assert_int_eq(rt_est_pick_exp(2.0, 1), 0);
    ck_assert_int_eq(rt_est_pick_exp(0.0, 1), (int)RT_EST_MAX_EXP);
    ck_assert_int_eq(rt_est_pick_exp(0.25, UINT64_MAX), 2);
}
END_TEST

/* --------------------------------------------------------------- simulation */

enum { Q_SPANS, Q_TRACES, Q_CALLS, NQ };
static const char *const q_name[NQ] = {"spans", "traces", "frontend->payment"};
#define CALL_FROM 0u /* frontend */
#define CALL_TO 4u   /* payment */

typedef struct cell {
    double est[NQ], var[NQ], naive[NQ];
} cell;

typedef struct sim_case {
    const char *name;
    uint8_t host_exp[SIM_HOSTS];
} sim_case;

static void run_case(const sim_case *c)
{
    sim_pop pop;
    ck_assert_int_eq(sim_pop_make(&pop, SIM_TRACES, c->host_exp, 0.1, 1234), 0);
    unsigned levels = pop.kmax + 1;
    cell *cells = calloc(pop.ntraces * levels, sizeof *cells);
    ck_assert_ptr_nonnull(cells);
    double truth[NQ] = {0}, exact_var[NQ] = {0}, naive_exact_var[NQ] = {0};
    rt_est_calls calls = {CALL_FROM, CALL_TO};
    rt_est_quantity_fn qf[NQ] = {rt_est_q_spans, rt_est_q_traces, rt_est_q_calls};
    void *qarg[NQ] = {NULL, NULL, &calls};
    rt_est_span kept[SIM_MAX_SPANS];
    size_t lemma_violations = 0, form_mismatches = 0, refused = 0;

    for (size_t t = 0; t < pop.ntraces; t++) {
        const rt_est_span *all = pop.spans + pop.start[t];
        size_t n_all = pop.start[t + 1] - pop.start[t];
        unsigned kmax_t = 0;
        for (size_t i = 0; i < n_all; i++)
            kmax_t = all[i].rate_exp > kmax_t ? all[i].rate_exp : kmax_t;
        for (int q = 0; q < NQ; q++) {
            double gv, nv;
            truth[q] += qf[q](all, n_all, RT_EST_MAX_EXP, qarg[q]);
            refused += rt_est_exact_variance(all, n_all, qf[q], qarg[q], &gv, &nv) != 0;
            exact_var[q] += gv;
            naive_exact_var[q] += nv;
            lemma_violations += gv > nv * (1 + 1e-12);
        }
        for (unsigned g = 0; g < levels; g++) {
            size_t n = sim_kept(&pop, t, g, kept);
            cell *cl = &cells[t * levels + g];
            rt_est_value v, simple;
            for (int q = 0; q < NQ; q++) {
                refused += rt_est_general(kept, n, qf[q], qarg[q], &v) != 0;
                cl->est[q] = v.estimate;
                cl->var[q] = v.variance;
                refused += rt_est_naive(kept, n, g >= kmax_t, qf[q], qarg[q], &v) != 0;
                cl->naive[q] = v.estimate;
            }
            rt_est_span_count(kept, n, &simple);
            form_mismatches += simple.estimate != cl->est[Q_SPANS] ||
                               simple.variance != cl->var[Q_SPANS];
            rt_est_trace_count(kept, n, &simple);
            form_mismatches += simple.estimate != cl->est[Q_TRACES] ||
                               simple.variance != cl->var[Q_TRACES];
        }
    }
    ck_assert_uint_eq(refused, 0);
    ck_assert_msg(lemma_violations == 0, "%s: %zu traces where the estimator's variance is "
                  "above the naive one's", c->name, lemma_violations);
    ck_assert_msg(form_mismatches == 0, "%s: simplified forms differ from eq. 6/7 in %zu "
                  "kept sets", c->name, form_mismatches);
    for (int q = 0; q < NQ; q++)
        ck_assert_msg(exact_var[q] <= naive_exact_var[q] * (1 + 1e-12), "%s", c->name);

    double sum[NQ] = {0}, sumsq[NQ] = {0}, vsum[NQ] = {0}, vsumsq[NQ] = {0};
    double nsum[NQ] = {0}, nsumsq[NQ] = {0};
    size_t not_integer = 0;
    for (unsigned s = 0; s < SIM_SEEDS; s++) {
        double est[NQ] = {0}, var[NQ] = {0}, naive[NQ] = {0};
        for (size_t t = 0; t < pop.ntraces; t++) {
            unsigned g = rt_est_rv_level(sim_trace_rv(1000 + s, t));
            const cell *cl = &cells[t * levels + (g < levels ? g : levels - 1)];
            for (int q = 0; q < NQ; q++) {
                est[q] += cl->est[q];
                var[q] += cl->var[q];
                naive[q] += cl->naive[q];
            }
        }
        for (int q = 0; q < NQ; q++) {
            not_integer += est[q] != floor(est[q]) || var[q] != floor(var[q]) ||
                           naive[q] != floor(naive[q]);
            sum[q] += est[q];
            sumsq[q] += est[q] * est[q];
            vsum[q] += var[q];
            vsumsq[q] += var[q] * var[q];
            nsum[q] += naive[q];
            nsumsq[q] += naive[q] * naive[q];
        }
    }
    ck_assert_msg(not_integer == 0, "%s: %zu estimates are not integers", c->name, not_integer);
    const double S = SIM_SEEDS;
    for (int q = 0; q < NQ; q++) {
        double mean = sum[q] / S, emp_var = (sumsq[q] - S * mean * mean) / (S - 1);
        double se = sqrt(emp_var > 0 ? emp_var / S : 0);
        double vmean = vsum[q] / S, vvar = (vsumsq[q] - S * vmean * vmean) / (S - 1);
        double vse = sqrt(vvar > 0 ? vvar / S : 0);
        double nmean = nsum[q] / S, nvar = (nsumsq[q] - S * nmean * nmean) / (S - 1);
        double nse = sqrt(nvar > 0 ? nvar / S : 0);
        printf("estimate %s %s: truth %.0f mean %.1f (se %.1f) naive %.1f (se %.1f) "
               "var exact %.1f empirical %.1f estimated %.1f naive exact %.1f\n",
               c->name, q_name[q], truth[q], mean, se, nmean, nse, exact_var[q], emp_var,
               vmean, naive_exact_var[q]);
        /* unbiased: within three standard errors (exact when nothing is sampled away) */
        ck_assert_msg(fabs(mean - truth[q]) <= 3 * se + 1e-9 * truth[q], "%s %s: mean %.2f "
                      "truth %.0f se %.2f", c->name, q_name[q], mean, truth[q], se);
        ck_assert_msg(fabs(nmean - truth[q]) <= 3 * nse + 1e-9 * truth[q], "%s %s naive",
                      c->name, q_name[q]);
        /* the spread agrees with the exact variance (sample variance's relative standard
         * error is sqrt(2 / (S - 1)) for a normal sum) */
        double tol = 4 * sqrt(2 / (S - 1)) * exact_var[q];
        ck_assert_msg(fabs(emp_var - exact_var[q]) <= tol + 1e-9, "%s %s: empirical var %.1f "
                      "exact %.1f", c->name, q_name[q], emp_var, exact_var[q]);
        /* the variance estimate is unbiased */
        ck_assert_msg(fabs(vmean - exact_var[q]) <= 3 * vse + 1e-9 * (1 + exact_var[q]),
                      "%s %s: mean var estimate %.1f exact %.1f se %.1f", c->name, q_name[q],
                      vmean, exact_var[q], vse);
    }
    free(cells);
    sim_pop_free(&pop);
}

static const sim_case cases[] = {
    /* hosts: frontend cart catalog inventory payment api auth orders db search */
    {"mixed", {0, 2, 1, 3, 2, 1, 0, 2, 3, 1}},
    {"skewed", {0, 3, 3, 3, 3, 0, 3, 3, 3, 3}},
    {"uniform", {2, 2, 2, 2, 2, 2, 2, 2, 2, 2}},
    {"full", {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
};

START_TEST(simulation_is_unbiased)
{
    run_case(&cases[_i]);
}
END_TEST

/* Random per-host rates, drawn per seed of this loop (1/1 .. 1/16). */
START_TEST(simulation_random_rates)
{
    sim_rng rng = {99 + (uint64_t)_i};
    sim_case c = {"random", {0}};
    for (unsigned h = 0; h < SIM_HOSTS; h++)
        c.host_exp[h] = (uint8_t)(sim_next(&rng) % 5);
    run_case(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("estimate");
    TCase *tc = tcase_create("estimators");
    tcase_add_test(tc, single_span_is_horvitz_thompson);
    tcase_add_test(tc, two_levels_worked_by_hand);
    tcase_add_test(tc, bad_input_is_refused_and_counted);
    tcase_add_test(tc, selection_weight);
    tcase_add_test(tc, selection_weight_is_unbiased);
    tcase_add_test(tc, keep_rule_is_the_threshold_and_nested);
    tcase_add_test(tc, rate_limited_choice_has_the_wanted_mean_rate);
    tcase_set_timeout(tc, 60); /* a loaded machine under ASan, not a time limit */
    suite_add_tcase(s, tc);
    TCase *sim = tcase_create("simulation");
    tcase_set_timeout(sim, 120);
    tcase_add_loop_test(sim, simulation_is_unbiased, 0, (int)(sizeof cases / sizeof *cases));
    tcase_add_loop_test(sim, simulation_random_rates, 0, 1);
    suite_add_tcase(s, sim);
    return test_run_suite(s);
}
