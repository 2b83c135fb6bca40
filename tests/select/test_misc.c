/* test_misc.c — similarity cache (LRU, unordered keys) and streaming quantiles. */
#include "select.h"

#include <check.h>

#include "common/suite.h"
#include <stdlib.h>

START_TEST(simcache_lru)
{
    rt_sel_simcache *c = rt_sel_simcache_create(2);
    float v = 0;
    ck_assert(!rt_sel_simcache_get(c, 1, 2, &v));
    rt_sel_simcache_put(c, 1, 2, 0.25f);
    rt_sel_simcache_put(c, 3, 4, 0.5f);
    ck_assert(rt_sel_simcache_get(c, 2, 1, &v)); /* unordered key */
    ck_assert(v == 0.25f);
    rt_sel_simcache_put(c, 5, 6, 0.75f); /* evicts (3,4), the least recently used */
    ck_assert(!rt_sel_simcache_get(c, 3, 4, &v));
    ck_assert(rt_sel_simcache_get(c, 1, 2, &v));
    ck_assert(rt_sel_simcache_get(c, 6, 5, &v));
    ck_assert(v == 0.75f);
    ck_assert_uint_eq(rt_sel_simcache_size(c), 2);
    ck_assert_uint_eq(rt_sel_simcache_hits(c), 3);
    ck_assert_uint_eq(rt_sel_simcache_misses(c), 2);
    rt_sel_simcache_destroy(c);
}
END_TEST

START_TEST(simcache_many_keys_stay_bounded)
{
    rt_sel_simcache *c = rt_sel_simcache_create(1000);
    for (uint64_t i = 0; i < 100000; i++)
        rt_sel_simcache_put(c, i, i * 7 + 1, (float)(i % 100) / 100.0f);
    ck_assert_uint_eq(rt_sel_simcache_size(c), 1000);
    float v;
    for (uint64_t i = 99000; i < 100000; i++) {
        ck_assert(rt_sel_simcache_get(c, i * 7 + 1, i, &v));
        ck_assert(v == (float)(i % 100) / 100.0f);
    }
    ck_assert(!rt_sel_simcache_get(c, 5, 36, &v));
    rt_sel_simcache_destroy(c);
}
END_TEST

START_TEST(p2_estimates_p90)
{
    rt_sel_quantiles *q = rt_sel_quantiles_create(0.9);
    unsigned seed = 3;
    ck_assert(rt_sel_quantiles_get(q, 1) < 0);
    for (int i = 0; i < 20000; i++) {
        rt_sel_quantiles_add(q, 1, (double)(rand_r(&seed) % 10000) / 10000.0); /* U[0,1) */
        rt_sel_quantiles_add(q, 2, 1000.0 + (double)(i % 100));                /* 1000..1099 */
    }
    for (uint64_t k = 10; k < 200; k++) /* many keys: the table grows */
        for (int i = 0; i < 10; i++)
            rt_sel_quantiles_add(q, k, (double)k);
    ck_assert_double_eq_tol(rt_sel_quantiles_get(q, 1), 0.9, 0.02);
    ck_assert_double_eq_tol(rt_sel_quantiles_get(q, 2), 1089.0, 3.0);
    ck_assert_double_eq_tol(rt_sel_quantiles_get(q, 150), 150.0, 1e-9);
    ck_assert(rt_sel_quantiles_get(q, 5) < 0);
    rt_sel_quantiles_destroy(q);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("select_misc");
    TCase *tc = tcase_create("misc");
    tcase_add_test(tc, simcache_lru);
    tcase_add_test(tc, simcache_many_keys_stay_bounded);
    tcase_add_test(tc, p2_estimates_p90);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
