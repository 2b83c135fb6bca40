/* test_original.c — the reimplemented original Gleaner algorithm (the evaluation
 * baseline): exact budget, anomalous distinct patterns picked by the DPP before any
 * normal trace, the rest filled at random, groups by root span name, no memory
 * between batches; and select-eval's paper metrics score all three samplers. */
#include "gen.h"

#include <check.h>

#include "common/suite.h"
#include <stdio.h>
#include <stdlib.h>

#define NT 300
static gen_trace G[NT];
static rt_sel_trace T[NT];
static bool kept[NT];

/* n traces of one root API; the first n_err carry an ERROR log with template 500 + i
 * (each its own pattern), the rest are normal with one of `variety` templates. */
static size_t build(size_t n, size_t n_err, int variety, const char *svc, const char *api,
                    size_t off)
{
    for (size_t i = 0; i < n; i++) {
        gen_trace *g = &G[off + i];
        gen_init(g, off + i + 1);
        int root = gen_span(g, svc, api, -1, 1000, 9000);
        gen_log(g, RT_SEL_LOG_INFO, 1, NULL);
        gen_span(g, "db", "query", root, 2000, 3000);
        if (i < n_err)
            gen_log(g, RT_SEL_LOG_ERROR, 500 + (uint32_t)i, NULL);
        else
            gen_log(g, RT_SEL_LOG_INFO, 100 + (uint32_t)(i % (size_t)variety), NULL);
        T[off + i] = g->t;
    }
    return off + n;
}

static size_t count_kept(size_t n, size_t from, size_t to)
{
    size_t k = 0;
    for (size_t i = from; i < to && i < n; i++)
        k += kept[i];
    return k;
}

START_TEST(budget_exact_and_anomalies_first)
{
    size_t n = build(200, 6, 5, "frontend", "/cart", 0);
    uint64_t rng = 7;
    for (size_t budget = 0; budget <= 40; budget += 3) {
        ck_assert_int_eq(rt_sel_original_select_batch(T, n, budget, true, &rng, kept), 0);
        ck_assert_uint_eq(count_kept(n, 0, n), budget);
        /* six distinct error patterns, quality > 0: the DPP takes them before any
         * normal trace (quality 0, zero gain) */
        ck_assert_uint_eq(count_kept(n, 0, 6), budget < 6 ? budget : 6);
    }
    ck_assert_int_eq(rt_sel_original_select_batch(T, n, 500, true, &rng, kept), 0);
    ck_assert_uint_eq(count_kept(n, 0, n), n);
}
END_TEST

/* Normal traces are not diversified: with no anomaly at all the picks are uniform, so
 * over many batches every normal pattern is kept about equally often (by its share). */
START_TEST(normal_traces_filled_at_random)
{
    size_t n = build(200, 0, 4, "frontend", "/cart", 0);
    uint64_t rng = 11;
    size_t hits[NT] = {0};
    for (int round = 0; round < 400; round++) {
        ck_assert_int_eq(rt_sel_original_select_batch(T, n, 10, true, &rng, kept), 0);
        ck_assert_uint_eq(count_kept(n, 0, n), 10);
        for (size_t i = 0; i < n; i++)
            hits[i] += kept[i];
    }
    /* expected 400 · 10 / 200 = 20 per trace; every trace was kept at least once */
    size_t lo = SIZE_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        lo = hits[i] < lo ? hits[i] : lo;
        hi = hits[i] > hi ? hits[i] : hi;
    }
    ck_assert_uint_ge(lo, 3);
    ck_assert_uint_le(hi, 45);
}
END_TEST

/* Groups are root span *names*: the same name under two services is one group, two
 * names are two groups and each gets at least one pick. */
START_TEST(groups_by_root_name)
{
    size_t n = build(100, 0, 3, "frontend", "/cart", 0);
    n = build(100, 0, 3, "gateway", "/cart", n);
    n = build(10, 0, 3, "frontend", "/pay", n);
    uint64_t rng = 3;
    for (int round = 0; round < 50; round++) {
        ck_assert_int_eq(rt_sel_original_select_batch(T, n, 2, false, &rng, kept), 0);
        /* two groups ("/cart", "/pay"): one pick each */
        ck_assert_uint_eq(count_kept(n, 200, 210), 1);
        ck_assert_uint_eq(count_kept(n, 0, 200), 1);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("select_original");
    TCase *tc = tcase_create("original");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, budget_exact_and_anomalies_first);
    tcase_add_test(tc, normal_traces_filled_at_random);
    tcase_add_test(tc, groups_by_root_name);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
