/* test_dpp.c — fast greedy DPP against a brute-force greedy on explicit determinants. */
#include "select.h"

#include <check.h>

#include "common/suite.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 12

typedef struct sets {
    uint64_t v[MAXN][8];
    size_t n[MAXN];
} sets;

static double sim_sets(void *ctx, size_t i, size_t j)
{
    sets *s = ctx;
    return rt_sel_jaccard(s->v[i], s->n[i], s->v[j], s->n[j]);
}

/* Random sorted unique subsets of {1..10}: a Jaccard kernel is PSD. */
static void random_sets(sets *s, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; i++) {
        s->n[i] = 0;
        for (uint64_t e = 1; e <= 10 && s->n[i] < 8; e++)
            if (rand_r(seed) % 3 == 0)
                s->v[i][s->n[i]++] = e;
        if (s->n[i] == 0)
            s->v[i][s->n[i]++] = 1 + (uint64_t)(rand_r(seed) % 10);
    }
}

/* det of the k×k matrix L restricted to idx, by Gaussian elimination with pivoting. */
static double det_sub(const double *q, sets *s, const size_t *idx, size_t k)
{
    double m[MAXN][MAXN];
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++)
            m[a][b] = q[idx[a]] * q[idx[b]] * sim_sets(s, idx[a], idx[b]);
    double det = 1.0;
    for (size_t c = 0; c < k; c++) {
        size_t p = c;
        for (size_t r = c + 1; r < k; r++)
            if (fabs(m[r][c]) > fabs(m[p][c]))
                p = r;
        if (fabs(m[p][c]) < 1e-300)
            return 0.0;
        if (p != c) {
            for (size_t b = 0; b < k; b++) {
                double t = m[c][b];
                m[c][b] = m[p][b];
                m[p][b] = t;
            }
            det = -det;
        }
        det *= m[c][c];
        for (size_t r = c + 1; r < k; r++) {
            double f = m[r][c] / m[c][c];
            for (size_t b = c; b < k; b++)
                m[r][b] -= f * m[c][b];
        }
    }
    return det;
}

/* Greedy MAP the slow way: argmax det(L_{Y∪{i}}), stop when the gain ratio < eps. */
static size_t brute_greedy(size_t n, const double *q, sets *s, size_t k, double eps,
                           size_t *picked)
{
    int taken[MAXN] = {0};
    size_t np = 0;
    double cur = 1.0;
    while (np < k) {
        size_t best = n;
        double best_det = -1.0;
        for (size_t i = 0; i < n; i++) {
            if (taken[i])
                continue;
            picked[np] = i;
            double d = det_sub(q, s, picked, np + 1);
            if (best == n || d > best_det) { /* ties: lowest index, as the fast path */
                best = i;
                best_det = d;
            }
        }
        if (best == n || best_det / cur < eps)
            break;
        picked[np++] = best;
        taken[best] = 1;
        cur = best_det;
    }
    return np;
}

START_TEST(greedy_matches_brute_force)
{
    unsigned seed = 99;
    int compared = 0;
    for (int round = 0; round < 200; round++) {
        size_t n = 3 + (size_t)(rand_r(&seed) % (MAXN - 3));
        size_t k = 1 + (size_t)(rand_r(&seed) % n);
        sets s;
        random_sets(&s, n, &seed);
        double q[MAXN];
        for (size_t i = 0; i < n; i++)
            q[i] = 0.5 + (rand_r(&seed) % 1000) / 400.0;
        size_t fast[MAXN], slow[MAXN];
        size_t nf = rt_sel_dpp_greedy(n, q, sim_sets, &s, k, 1e-6, fast);
        size_t ns = brute_greedy(n, q, &s, k, 1e-6, slow);
        ck_assert_uint_eq(nf, ns);
        for (size_t i = 0; i < nf; i++)
            ck_assert_uint_eq(fast[i], slow[i]);
        compared += (int)nf;
    }
    ck_assert_int_gt(compared, 200);
}
END_TEST

START_TEST(identical_items_are_never_picked_twice)
{
    /* 10 items over 4 distinct sets; the highest quality of each set is picked */
    sets s;
    const uint64_t base[4][3] = {{1, 2, 3}, {4, 5, 6}, {1, 2, 7}, {8, 9, 10}};
    double q[10];
    for (size_t i = 0; i < 10; i++) {
        memcpy(s.v[i], base[i % 4], sizeof base[0]);
        s.n[i] = 3;
        q[i] = 1.0 + (double)i;
    }
    size_t picked[10];
    size_t np = rt_sel_dpp_greedy(10, q, sim_sets, &s, 10, 1e-6, picked);
    ck_assert_uint_eq(np, 4); /* early stop: every other item has zero gain */
    int seen[4] = {0};
    for (size_t i = 0; i < np; i++) {
        ck_assert_int_eq(seen[picked[i] % 4], 0);
        seen[picked[i] % 4] = 1;
        ck_assert_uint_ge(picked[i], 6); /* the best-quality copy: 6,7,8,9 */
    }
    ck_assert_uint_eq(picked[0], 9); /* largest quality first */
}
END_TEST

START_TEST(quota_limits_picks)
{
    sets s;
    unsigned seed = 5;
    random_sets(&s, 8, &seed);
    for (size_t i = 0; i < 8; i++) { /* make all sets distinct and disjoint */
        s.v[i][0] = 100 + i;
        s.n[i] = 1;
    }
    double q[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    size_t picked[8];
    ck_assert_uint_eq(rt_sel_dpp_greedy(8, q, sim_sets, &s, 3, 1e-6, picked), 3);
    ck_assert_uint_eq(rt_sel_dpp_greedy(8, q, sim_sets, &s, 0, 1e-6, picked), 0);
    ck_assert_uint_eq(rt_sel_dpp_greedy(8, q, sim_sets, &s, 20, 1e-6, picked), 8);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("select_dpp");
    TCase *tc = tcase_create("dpp");
    tcase_add_test(tc, greedy_matches_brute_force);
    tcase_add_test(tc, identical_items_are_never_picked_twice);
    tcase_add_test(tc, quota_limits_picks);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
