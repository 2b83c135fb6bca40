/* test_quota.c — quota allocation: exact sums, minimums, caps, surplus flow. */
#include "select.h"

#include <check.h>

#include "common/suite.h"
#include <math.h>
#include <stdlib.h>

#define BOOST 3.0
#define CAP 0.5

static size_t sum(const size_t *v, size_t n)
{
    size_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return s;
}

START_TEST(even_split)
{
    size_t sizes[4] = {100, 100, 100, 100}, q[4];
    rt_sel_quota(sizes, NULL, 4, 40, BOOST, CAP, q);
    for (int g = 0; g < 4; g++)
        ck_assert_uint_eq(q[g], 10);
}
END_TEST

START_TEST(surplus_flows_to_larger_groups)
{
    size_t sizes[3] = {2, 100, 100}, q[3];
    rt_sel_quota(sizes, NULL, 3, 60, BOOST, CAP, q);
    ck_assert_uint_eq(q[0], 2);
    ck_assert_uint_eq(q[1] + q[2], 58);
    ck_assert_uint_eq(q[1], 29);
    size_t s2[4] = {1, 3, 50, 0}, q2[4];
    rt_sel_quota(s2, NULL, 4, 30, BOOST, CAP, q2);
    ck_assert_uint_eq(q2[0], 1);
    ck_assert_uint_eq(q2[1], 3);
    ck_assert_uint_eq(q2[2], 26);
    ck_assert_uint_eq(q2[3], 0);
}
END_TEST

START_TEST(keep_everything_under_budget)
{
    size_t sizes[3] = {5, 0, 7}, q[3];
    rt_sel_quota(sizes, NULL, 3, 100, BOOST, CAP, q);
    ck_assert_uint_eq(q[0], 5);
    ck_assert_uint_eq(q[1], 0);
    ck_assert_uint_eq(q[2], 7);
}
END_TEST

START_TEST(tiny_budget_goes_to_rarest_groups)
{
    size_t sizes[5] = {50, 3, 20, 0, 9}, q[5];
    rt_sel_quota(sizes, NULL, 5, 2, BOOST, CAP, q);
    ck_assert_uint_eq(sum(q, 5), 2);
    ck_assert_uint_eq(q[1], 1);
    ck_assert_uint_eq(q[4], 1);
    ck_assert_uint_eq(q[0] + q[2] + q[3], 0);
}
END_TEST

START_TEST(alarm_boost_and_cap)
{
    size_t sizes[10], q[10];
    bool alarmed[10] = {true};
    for (int g = 0; g < 10; g++)
        sizes[g] = 100;
    /* average 10 → alarmed group gets 3× = 30, below the 50 cap */
    rt_sel_quota(sizes, alarmed, 10, 100, BOOST, CAP, q);
    ck_assert_uint_eq(q[0], 30);
    ck_assert_uint_eq(sum(q, 10), 100);
    for (int g = 1; g < 10; g++)
        ck_assert(q[g] == 7 || q[g] == 8);

    /* 5 groups, average 10: 3× = 30 exceeds the cap 25 */
    rt_sel_quota(sizes, alarmed, 5, 50, BOOST, CAP, q);
    ck_assert_uint_eq(q[0], 25);
    ck_assert_uint_eq(sum(q, 5), 50);

    /* two alarmed groups share the 25 cap */
    alarmed[1] = true;
    rt_sel_quota(sizes, alarmed, 5, 50, BOOST, CAP, q);
    ck_assert_uint_le(q[0] + q[1], 25);
    ck_assert_uint_ge(q[0] + q[1], 24);
    ck_assert_uint_eq(sum(q, 5), 50);
    ck_assert_uint_gt(q[0], q[2]);
}
END_TEST

START_TEST(surplus_returns_to_alarmed_when_nobody_else_can_use_it)
{
    size_t sizes[2] = {100, 1}, q[2];
    bool alarmed[2] = {true, false};
    rt_sel_quota(sizes, alarmed, 2, 50, BOOST, CAP, q);
    ck_assert_uint_eq(q[1], 1);
    ck_assert_uint_eq(q[0], 49);
}
END_TEST

/* A check in the 20 000-round loop below: ck_assert_* reports every passing
 * check to the runner (a write per check in fork mode), which made the loop take
 * longer than the case's timeout on a loaded machine. This fails the same way
 * and costs nothing when it passes. */
#define REQUIRE(cond)                                                            \
    do {                                                                         \
        if (!(cond))                                                             \
            ck_abort_msg("round %d: %s", round, #cond);                          \
    } while (0)

START_TEST(random_invariants)
{
    unsigned seed = 2024;
    for (int round = 0; round < 20000; round++) {
        size_t n = 1 + (size_t)(rand_r(&seed) % 12);
        size_t sizes[12], q[12];
        bool alarmed[12];
        size_t total = 0, nonempty = 0;
        for (size_t g = 0; g < n; g++) {
            sizes[g] = rand_r(&seed) % 4 == 0 ? 0 : (size_t)(rand_r(&seed) % 200);
            alarmed[g] = rand_r(&seed) % 4 == 0;
            total += sizes[g];
            nonempty += sizes[g] > 0;
        }
        size_t budget = (size_t)(rand_r(&seed) % 300);
        bool use_alarms = round % 2;
        rt_sel_quota(sizes, use_alarms ? alarmed : NULL, n, budget, BOOST, CAP, q);
        size_t want = budget < total ? budget : total;
        REQUIRE(sum(q, n) == want); /* the budget is spent exactly */
        size_t alarmed_sum = 0, others_room = 0, n_alarmed = 0;
        for (size_t g = 0; g < n; g++) {
            REQUIRE(q[g] <= sizes[g]);
            if (sizes[g] > 0 && budget >= nonempty)
                REQUIRE(q[g] >= 1); /* at least one per non-empty group */
            if (use_alarms && alarmed[g] && sizes[g] > 0) {
                alarmed_sum += q[g];
                n_alarmed++;
            } else {
                others_room += sizes[g] - q[g];
            }
        }
        if (use_alarms && n_alarmed && budget >= nonempty && others_room > 0) {
            /* while the other groups could still take traces, the cap holds */
            size_t cap = (size_t)floor(CAP * (double)budget);
            REQUIRE(alarmed_sum <= (cap > n_alarmed ? cap : n_alarmed));
            size_t per = (size_t)floor(BOOST * (double)budget / (double)nonempty);
            for (size_t g = 0; g < n; g++)
                if (alarmed[g] && sizes[g] > 0)
                    REQUIRE(q[g] <= (per > 1 ? per : 1));
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("select_quota");
    TCase *tc = tcase_create("quota");
    tcase_add_test(tc, even_split);
    tcase_add_test(tc, surplus_flows_to_larger_groups);
    tcase_add_test(tc, keep_everything_under_budget);
    tcase_add_test(tc, tiny_budget_goes_to_rarest_groups);
    tcase_add_test(tc, alarm_boost_and_cap);
    tcase_add_test(tc, surplus_returns_to_alarmed_when_nobody_else_can_use_it);
    tcase_add_test(tc, random_invariants);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
