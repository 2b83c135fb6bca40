/* test_encode.c — event-pair encoding, Jaccard and pattern ids on generated traces. */
#include "gen.h"

#include <check.h>

#include "common/suite.h"
#include <stdlib.h>

static void encode(const rt_sel_trace *t, rt_sel_pairs *p)
{
    ck_assert_int_eq(rt_sel_encode(t, NULL, 1.2, p), 0);
}

START_TEST(fanout_duplicates_collapse)
{
    gen_trace one, five;
    gen_fanout(&one, 1, "/checkout", 1, 7);
    gen_fanout(&five, 2, "/checkout", 5, 7);
    rt_sel_pairs a = {0}, b = {0};
    encode(&one.t, &a);
    encode(&five.t, &b);
    /* root: start→log, log→end; child: start→log, log→end; edge root end→child start */
    ck_assert_uint_eq(a.n, 5);
    ck_assert_uint_eq(b.n, a.n);
    ck_assert_mem_eq(a.v, b.v, a.n * sizeof *a.v);
    ck_assert_uint_eq(rt_sel_pattern_id(a.v, a.n), rt_sel_pattern_id(b.v, b.n));
    ck_assert_double_eq(rt_sel_jaccard(a.v, a.n, b.v, b.n), 1.0);
    rt_sel_pairs_free(&a);
    rt_sel_pairs_free(&b);
}
END_TEST

START_TEST(one_log_template_changes_pattern)
{
    gen_trace x, y;
    gen_fanout(&x, 1, "/checkout", 3, 7);
    gen_fanout(&y, 2, "/checkout", 3, 7);
    y.logs[2].template_id = 8; /* second child logs a different template */
    rt_sel_pairs a = {0}, b = {0};
    encode(&x.t, &a);
    encode(&y.t, &b);
    ck_assert_uint_ne(rt_sel_pattern_id(a.v, a.n), rt_sel_pattern_id(b.v, b.n));
    double j = rt_sel_jaccard(a.v, a.n, b.v, b.n);
    ck_assert(j > 0.0 && j < 1.0);
    rt_sel_pairs_free(&a);
    rt_sel_pairs_free(&b);
}
END_TEST

START_TEST(error_and_slow_markers_change_pattern)
{
    gen_trace x, y;
    gen_fanout(&x, 1, "/pay", 1, 7);
    gen_fanout(&y, 2, "/pay", 1, 7);
    y.spans[1].error = true;
    rt_sel_pairs a = {0}, b = {0}, c = {0};
    encode(&x.t, &a);
    encode(&y.t, &b);
    ck_assert_uint_ne(rt_sel_pattern_id(a.v, a.n), rt_sel_pattern_id(b.v, b.n));

    /* p90 of db/query = 1000 ns; a 5000 ns child is slower than 1.2 × p90 */
    rt_sel_quantiles *q = rt_sel_quantiles_create(0.9);
    for (int i = 0; i < 100; i++)
        rt_sel_quantiles_add(q, rt_sel_op_key("db", "query"), 1000.0);
    ck_assert_double_eq_tol(rt_sel_quantiles_get(q, rt_sel_op_key("db", "query")), 1000.0, 1e-9);
    gen_trace slow;
    gen_fanout(&slow, 3, "/pay", 1, 7);
    slow.spans[1].end_ns = slow.spans[1].start_ns + 5000;
    ck_assert_int_eq(rt_sel_encode(&slow.t, q, 1.2, &c), 0);
    ck_assert_uint_eq(c.n, a.n + 1); /* log→end becomes log→slow, slow→end */
    ck_assert_uint_ne(rt_sel_pattern_id(a.v, a.n), rt_sel_pattern_id(c.v, c.n));
    rt_sel_quantiles_destroy(q);
    rt_sel_pairs_free(&a);
    rt_sel_pairs_free(&b);
    rt_sel_pairs_free(&c);
}
END_TEST

static double brute_jaccard(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
    size_t inter = 0;
    for (size_t i = 0; i < na; i++)
        for (size_t j = 0; j < nb; j++)
            if (a[i] == b[j]) {
                inter++;
                break;
            }
    size_t uni = na + nb - inter;
    return uni ? (double)inter / (double)uni : 1.0;
}

static void random_trace(gen_trace *g, uint64_t id, unsigned *seed)
{
    static const char *ops[] = {"a", "b", "c", "d"};
    gen_init(g, id);
    gen_span(g, "svc", "root", -1, 0, 100);
    int n = 1 + rand_r(seed) % 12;
    for (int i = 0; i < n; i++) {
        gen_span(g, "svc", ops[rand_r(seed) % 4], rand_r(seed) % (int)g->t.n_spans, 10, 20);
        int logs = rand_r(seed) % 3;
        for (int l = 0; l < logs; l++)
            gen_log(g, RT_SEL_LOG_INFO, 1 + (uint32_t)(rand_r(seed) % 5), NULL);
        g->spans[g->t.n_spans - 1].error = rand_r(seed) % 7 == 0;
    }
}

START_TEST(jaccard_matches_brute_force)
{
    unsigned seed = 12345;
    int partial = 0;
    for (int round = 0; round < 300; round++) {
        gen_trace x, y;
        random_trace(&x, 1, &seed);
        random_trace(&y, 2, &seed);
        rt_sel_pairs a = {0}, b = {0};
        encode(&x.t, &a);
        encode(&y.t, &b);
        for (size_t i = 1; i < a.n; i++)
            ck_assert(a.v[i - 1] < a.v[i]); /* sorted and unique */
        double fast = rt_sel_jaccard(a.v, a.n, b.v, b.n);
        ck_assert_double_eq_tol(fast, brute_jaccard(a.v, a.n, b.v, b.n), 1e-12);
        ck_assert_double_eq_tol(fast, rt_sel_jaccard(b.v, b.n, a.v, a.n), 1e-12);
        partial += fast > 0.0 && fast < 1.0;
        rt_sel_pairs_free(&a);
        rt_sel_pairs_free(&b);
    }
    ck_assert_int_gt(partial, 50); /* the generator really produced overlapping sets */
}
END_TEST

START_TEST(anomaly_score_weights)
{
    gen_trace g;
    gen_fanout(&g, 1, "/pay", 2, 7);
    g.logs[1].level = RT_SEL_LOG_WARN;
    g.logs[2].level = RT_SEL_LOG_ERROR;
    g.spans[1].error = true;
    rt_sel_weights w = {.error_span = 5, .warn_log = 1, .error_log = 2, .latency = 3,
                        .slow_factor = 1.2};
    ck_assert_double_eq(rt_sel_anomaly_score(&g.t, &w, -1.0), 8.0);
    /* trace lasts 8000 ns; group p90 6000 → 8000 > 7200: latency term */
    ck_assert_double_eq(rt_sel_anomaly_score(&g.t, &w, 6000.0), 11.0);
    ck_assert_double_eq(rt_sel_anomaly_score(&g.t, &w, 7000.0), 8.0);
}
END_TEST

START_TEST(entry_api_skips_wildcard_gateway)
{
    gen_trace g;
    gen_init(&g, 1);
    int root = gen_span(&g, "gateway", "/*", -1, 0, 100);
    int h = gen_span(&g, "gateway", "HTTP POST", root, 1, 99);
    gen_span(&g, "orders", "/api/orders", h, 5, 90);
    ck_assert_int_eq(rt_sel_trace_entry(&g.t), 2);
    ck_assert_uint_eq(rt_sel_trace_group(&g.t), rt_sel_op_key("orders", "/api/orders"));
    g.spans[0].operation = "/home";
    ck_assert_int_eq(rt_sel_trace_entry(&g.t), 0);
}
END_TEST

/* The hop behind a wildcard root is the earliest span of another service wherever it
 * stands among the spans (the scan skips later-starting spans before comparing
 * service names), the first of equal starts, never a gateway span that starts
 * earlier; the service is compared by content, not by pointer. */
START_TEST(entry_api_earliest_hop_in_any_order)
{
    char gw[] = "gateway"; /* a second copy of the name: equal content, other pointer */
    gen_trace g;
    gen_init(&g, 1);
    int root = gen_span(&g, "gateway", "/*", -1, 0, 100);
    gen_span(&g, "users", "/api/users", root, 30, 40);
    gen_span(&g, "orders", "/api/orders", root, 10, 20);
    gen_span(&g, gw, "HTTP GET", root, 2, 99);
    gen_span(&g, "pay", "/api/pay", root, 10, 25);
    gen_span(&g, "cart", "/api/cart", root, 20, 25);
    ck_assert_int_eq(rt_sel_trace_entry(&g.t), 2);
    g.spans[2].start_ns = 11; /* now pay starts first */
    ck_assert_int_eq(rt_sel_trace_entry(&g.t), 4);
    g.spans[3].service = "search"; /* another service that starts earlier still */
    ck_assert_int_eq(rt_sel_trace_entry(&g.t), 3);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("select_encode");
    TCase *tc = tcase_create("encode");
    tcase_add_test(tc, fanout_duplicates_collapse);
    tcase_add_test(tc, one_log_template_changes_pattern);
    tcase_add_test(tc, error_and_slow_markers_change_pattern);
    tcase_add_test(tc, jaccard_matches_brute_force);
    tcase_add_test(tc, anomaly_score_weights);
    tcase_add_test(tc, entry_api_skips_wildcard_gateway);
    tcase_add_test(tc, entry_api_earliest_hop_in_any_order);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
