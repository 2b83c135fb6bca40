/* test_selector.c — whole windows: exact budget, groups represented, alarms boosted,
 * diversity, inclusion weights, incident budget scale-up, free-text mining. */
#include "gen.h"

#include <check.h>

#include "common/suite.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define NT 400
static gen_trace G[NT];
static rt_sel_trace T[NT];

static const char *API[4] = {"/cart", "/pay", "/search", "/login"};

/* splitmix64, for generated shapes */
static uint64_t mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Group g has 40·(g+1) traces; trace i uses pattern i % variety (child template). */
static size_t build_window(int variety)
{
    size_t n = 0;
    for (int g = 0; g < 4; g++)
        for (int i = 0; i < 40 * (g + 1); i++, n++) {
            gen_fanout(&G[n], n + 1, API[g], 1 + i % 3, 100 + (uint32_t)(i % variety));
            T[n] = G[n].t;
        }
    return n;
}

static size_t group_of(const rt_sel_result *r, size_t i)
{
    for (size_t g = 0; g < 4; g++)
        if (r->verdicts[i].group == rt_sel_op_key("frontend", API[g]))
            return g;
    ck_abort_msg("unknown group");
    return 0;
}

START_TEST(budget_exact_and_every_group_represented)
{
    size_t n = build_window(7);
    rt_selector *s = rt_sel_create(NULL);
    rt_sel_result r;
    ck_assert_int_eq(rt_sel_select_window(s, T, n, 40, NULL, 0, &r), 0);
    ck_assert_uint_eq(r.n_traces, n);
    ck_assert_uint_eq(r.n_groups, 4);
    ck_assert_uint_eq(r.n_chosen, 40);
    size_t per[4] = {0}, chosen = 0;
    double weight[4] = {0};
    for (size_t i = 0; i < n; i++) {
        if (!r.verdicts[i].chosen)
            continue;
        chosen++;
        per[group_of(&r, i)]++;
        weight[group_of(&r, i)] += r.verdicts[i].weight;
    }
    ck_assert_uint_eq(chosen, 40);
    for (size_t g = 0; g < 4; g++) {
        ck_assert_uint_eq(per[g], 10); /* even split: every group over its quota */
        /* inclusion weights add up to the group's collected traces */
        ck_assert_double_eq_tol(weight[g], 40.0 * (double)(g + 1), 1e-9);
    }
    rt_sel_destroy(s);
}
END_TEST

START_TEST(alarmed_group_is_boosted)
{
    size_t n = build_window(7);
    rt_selector *s = rt_sel_create(NULL);
    rt_sel_result r;
    uint64_t alarm = rt_sel_op_key("frontend", "/cart");
    ck_assert_int_eq(rt_sel_select_window(s, T, n, 40, &alarm, 1, &r), 0);
    size_t per[4] = {0};
    for (size_t i = 0; i < n; i++)
        if (r.verdicts[i].chosen)
            per[group_of(&r, i)]++;
    ck_assert_uint_eq(r.n_chosen, 40);
    /* average 10 → up to 30, capped at 20 (50 % of 40) */
    ck_assert_uint_eq(per[0], 20);
    for (size_t g = 1; g < 4; g++)
        ck_assert(per[g] >= 6 && per[g] <= 7);
    rt_sel_destroy(s);
}
END_TEST

START_TEST(diverse_picks_inside_a_group)
{
    /* one group of 60 traces with 6 patterns (2 templates × 3 fan-outs are
     * indistinguishable by fan-out, so patterns = templates): quota 4 < 6 */
    size_t n = 0;
    for (int i = 0; i < 60; i++, n++) {
        gen_fanout(&G[n], n + 1, "/only", 1 + i % 3, 100 + (uint32_t)(i % 6));
        T[n] = G[n].t;
    }
    rt_selector *s = rt_sel_create(NULL);
    rt_sel_result r;
    ck_assert_int_eq(rt_sel_select_window(s, T, n, 4, NULL, 0, &r), 0);
    ck_assert_uint_eq(r.n_chosen, 4);
    for (size_t a = 0; a < r.n_chosen; a++)
        for (size_t b = a + 1; b < r.n_chosen; b++)
            ck_assert_uint_ne(r.verdicts[r.chosen[a]].pattern, r.verdicts[r.chosen[b]].pattern);
    /* quota 9 > 6 patterns: all 6 patterns first, then fill */
    ck_assert_int_eq(rt_sel_select_window(s, T, n, 9, NULL, 0, &r), 0);
    ck_assert_uint_eq(r.n_chosen, 9);
    uint64_t pats[9];
    size_t distinct = 0;
    for (size_t a = 0; a < r.n_chosen; a++) {
        uint64_t p = r.verdicts[r.chosen[a]].pattern;
        bool seen = false;
        for (size_t b = 0; b < distinct; b++)
            seen |= pats[b] == p;
        if (!seen)
            pats[distinct++] = p;
    }
    ck_assert_uint_eq(distinct, 6);
    ck_assert_uint_gt(rt_sel_simcache_size(rt_sel_selector_simcache(s)), 0);
    rt_sel_destroy(s);
}
END_TEST

START_TEST(anomalous_pattern_preferred)
{
    /* 30 identical normal traces and one with an ERROR log: quota 1 picks the error */
    size_t n = 0;
    for (int i = 0; i < 31; i++, n++) {
        gen_fanout(&G[n], n + 1, "/only", 1, 100);
        T[n] = G[n].t;
    }
    G[17].logs[1].level = RT_SEL_LOG_ERROR;
    G[17].logs[1].template_id = 101;
    rt_selector *s = rt_sel_create(NULL);
    rt_sel_result r;
    ck_assert_int_eq(rt_sel_select_window(s, T, n, 1, NULL, 0, &r), 0);
    ck_assert_uint_eq(r.n_chosen, 1);
    ck_assert_uint_eq(r.chosen[0], 17);
    ck_assert_double_eq(r.verdicts[17].score, 2.0);
    ck_assert_double_eq(r.verdicts[17].weight, 31.0);
    rt_sel_destroy(s);
}
END_TEST

START_TEST(keeps_everything_under_budget)
{
    size_t n = build_window(3);
    rt_selector *s = rt_sel_create(NULL);
    rt_sel_result r;
    ck_assert_int_eq(rt_sel_select_window(s, T, n, 1000, NULL, 0, &r), 0);
    ck_assert_uint_eq(r.n_chosen, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_double_eq(r.verdicts[i].weight, 1.0);
    rt_sel_destroy(s);
}
END_TEST

START_TEST(budget_scales_up_when_traffic_drops_during_alarm)
{
    size_t n = build_window(5);
    rt_selector *s = rt_sel_create(NULL);
    rt_sel_result r;
    uint64_t alarm = rt_sel_op_key("frontend", "/cart");
    for (int w = 0; w < 5; w++) /* steady traffic of 400 per window */
        ck_assert_int_eq(rt_sel_select_window(s, T, n, 20, NULL, 0, &r), 0);
    ck_assert_uint_eq(r.budget, 20);
    /* traffic drops to 100 without an alarm: no scale-up */
    ck_assert_int_eq(rt_sel_select_window(s, T, 100, 20, NULL, 0, &r), 0);
    ck_assert_uint_eq(r.budget, 20);
    /* drop to 100 with an alarm: budget doubles (the scale limit) */
    ck_assert_int_eq(rt_sel_select_window(s, T, 100, 20, &alarm, 1, &r), 0);
    ck_assert_uint_eq(r.budget, 40);
    ck_assert_uint_eq(r.n_chosen, 40);
    rt_sel_destroy(s);
}
END_TEST

START_TEST(free_text_logs_are_mined)
{
    char text[3][64];
    size_t n = 0;
    for (int i = 0; i < 3; i++, n++) {
        gen_init(&G[n], n + 1);
        gen_span(&G[n], "svc", "/x", -1, 0, 10);
        snprintf(text[i], sizeof text[i], "order %d shipped to warehouse %d", 100 + i, i);
        gen_log(&G[n], RT_SEL_LOG_INFO, 0, text[i]);
        T[n] = G[n].t;
    }
    rt_selector *s = rt_sel_create(NULL);
    rt_sel_result r;
    ck_assert_int_eq(rt_sel_select_window(s, T, n, 3, NULL, 0, &r), 0);
    uint32_t id = G[0].logs[0].template_id;
    ck_assert(id & RT_SEL_MINED_TEMPLATE_BIT);
    ck_assert_uint_eq(G[1].logs[0].template_id, id);
    ck_assert_uint_eq(G[2].logs[0].template_id, id);
    ck_assert_uint_eq(r.verdicts[0].pattern, r.verdicts[2].pattern);
    rt_sel_destroy(s);
}
END_TEST

START_TEST(known_text_lengths_change_nothing)
{
    /* Logs whose decoder gave their length (text_len) are mined without measuring:
     * the same template ids and verdicts as the same traces without lengths. */
    static char text[200][96];
    size_t n = 200;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            gen_init(&G[i], i + 1);
            gen_span(&G[i], "svc", i % 3 ? "/a" : "/b", -1, i * 1000, i * 1000 + 10 + i % 7);
            snprintf(text[i], sizeof text[i], "%s %zu for user u%zu took %zu ms%s",
                     i % 5 ? "order shipped" : "payment refused with code", i * 37, i % 11,
                     i % 4, i % 3 == 0 ? "" : i % 3 == 1 ? " x" : "  "); /* see test_drain */
            gen_log(&G[i], i % 5 ? RT_SEL_LOG_INFO : RT_SEL_LOG_ERROR, 0, text[i]);
            if (pass == 1)
                G[i].logs[0].text_len = (uint16_t)strlen(text[i]);
            T[i] = G[i].t;
        }
        static uint32_t ids[200];
        static rt_sel_verdict v[200];
        rt_selector *s = rt_sel_create(NULL);
        rt_sel_result r;
        ck_assert_int_eq(rt_sel_select_window(s, T, n, 20, NULL, 0, &r), 0);
        for (size_t i = 0; i < n; i++) {
            uint32_t id = G[i].logs[0].template_id;
            ck_assert(id & RT_SEL_MINED_TEMPLATE_BIT);
            if (pass == 0) {
                ids[i] = id;
                v[i] = r.verdicts[i];
                continue;
            }
            ck_assert_uint_eq(id, ids[i]);
            ck_assert_uint_eq(r.verdicts[i].pattern, v[i].pattern);
            ck_assert_uint_eq(r.verdicts[i].chosen, v[i].chosen);
            ck_assert(r.verdicts[i].score == v[i].score);
        }
        rt_sel_destroy(s);
    }
}
END_TEST

/* Tiny budgets (fewer picks than groups) go to groups that have a pattern not kept in
 * an earlier window before groups with nothing new, even when those are rarer. */
START_TEST(tiny_budget_prefers_groups_with_new_patterns)
{
    rt_selector *s = rt_sel_create(NULL);
    rt_sel_result r;
    /* window 1: /cart (1 trace, template 100) and /pay (3 traces, template 101): keep both */
    gen_fanout(&G[0], 1, API[0], 1, 100);
    for (int i = 1; i < 4; i++)
        gen_fanout(&G[i], (uint64_t)i + 1, API[1], 1, 101);
    for (int i = 0; i < 4; i++)
        T[i] = G[i].t;
    ck_assert_int_eq(rt_sel_select_window(s, T, 4, 2, NULL, 0, &r), 0);
    ck_assert_uint_eq(r.n_chosen, 2);
    /* window 2: /cart repeats its kept pattern; one /pay trace has a new template */
    gen_fanout(&G[0], 11, API[0], 1, 100);
    for (int i = 1; i < 4; i++)
        gen_fanout(&G[i], (uint64_t)i + 11, API[1], 1, i == 2 ? 202 : 101);
    for (int i = 0; i < 4; i++)
        T[i] = G[i].t;
    ck_assert_int_eq(rt_sel_select_window(s, T, 4, 1, NULL, 0, &r), 0);
    ck_assert_uint_eq(r.n_chosen, 1);
    ck_assert_uint_eq(r.chosen[0], 2); /* the new /pay pattern, not the rarer stale /cart */
    rt_sel_destroy(s);
}
END_TEST

/* A window covering only part of the usual length is judged by its rate: no incident
 * scale-up for a short last window, while a real drop still scales up. */
START_TEST(short_window_is_not_a_traffic_drop)
{
    for (int partial = 0; partial < 2; partial++) {
        rt_selector *s = rt_sel_create(NULL);
        uint64_t alarm = rt_sel_op_key("frontend", API[0]);
        rt_sel_result r;
        size_t n = build_window(5);
        for (int w = 0; w < 5; w++)
            ck_assert_int_eq(rt_sel_select_window(s, T, n, 10, &alarm, 1, &r), 0);
        ck_assert_int_eq(rt_sel_select_window_part(s, T, n / 5, 10, &alarm, 1,
                                                   partial ? 0.2 : 1.0, &r), 0);
        if (partial)
            ck_assert_uint_eq(r.budget, 10);
        else
            ck_assert_uint_gt(r.budget, 10);
        rt_sel_destroy(s);
    }
}
END_TEST

/* Latency events against the window's per-minute p90, in tiers: of 20 equal traces
 * whose child spans take d, one at 2d (tier 1: > 1.5 × p90 = d) and one at 4d (tier 2:
 * > 3 × p90) get patterns of their own, different from each other; with minute_tiers
 * off, a 2d span is not slow against a streaming p90 of d with slow_factor 2. */
START_TEST(latency_tiers_per_minute)
{
    for (int tiers = 1; tiers >= 0; tiers--) {
        size_t n = 20;
        for (size_t i = 0; i < n; i++) {
            gen_init(&G[i], i + 1);
            int root = gen_span(&G[i], "frontend", "/cart", -1, 1000, 90000);
            uint64_t d = i == 0 ? 20000 : i == 1 ? 40000 : 10000;
            gen_span(&G[i], "db", "query", root, 2000, 2000 + d);
            gen_log(&G[i], RT_SEL_LOG_INFO, 7, NULL);
            T[i] = G[i].t;
        }
        rt_sel_config cfg;
        rt_sel_config_default(&cfg);
        cfg.minute_tiers = tiers;
        rt_selector *s = rt_sel_create(&cfg);
        rt_sel_result r;
        ck_assert_int_eq(rt_sel_select_window(s, T, n, n, NULL, 0, &r), 0);
        for (size_t i = 3; i < n; i++)
            ck_assert_uint_eq(r.verdicts[i].pattern, r.verdicts[2].pattern);
        if (tiers) {
            ck_assert_uint_ne(r.verdicts[0].pattern, r.verdicts[2].pattern);
            ck_assert_uint_ne(r.verdicts[1].pattern, r.verdicts[2].pattern);
            ck_assert_uint_ne(r.verdicts[0].pattern, r.verdicts[1].pattern);
        } else {
            ck_assert_uint_eq(r.verdicts[0].pattern, r.verdicts[2].pattern);
            ck_assert_uint_ne(r.verdicts[1].pattern, r.verdicts[2].pattern);
        }
        rt_sel_destroy(s);
    }
}
END_TEST

/* Budget above the number of groups: a group whose every pattern was kept before gets
 * its one pick, the group with new patterns the rest (an even split would give 3 / 3). */
START_TEST(budget_goes_to_new_patterns_first)
{
    rt_selector *s = rt_sel_create(NULL);
    rt_sel_result r;
    size_t n = 0;
    for (int i = 0; i < 3; i++, n++) { /* window 1: /cart's three patterns, all kept */
        gen_fanout(&G[n], n + 1, "/cart", 1, 100 + (uint32_t)i);
        T[n] = G[n].t;
    }
    ck_assert_int_eq(rt_sel_select_window(s, T, n, 10, NULL, 0, &r), 0);
    ck_assert_uint_eq(r.n_chosen, 3);
    n = 0;
    for (int i = 0; i < 12; i++, n++) { /* window 2: the same /cart patterns again */
        gen_fanout(&G[n], n + 100, "/cart", 1, 100 + (uint32_t)(i % 3));
        T[n] = G[n].t;
    }
    for (int i = 0; i < 12; i++, n++) { /* and twelve new /pay patterns */
        gen_fanout(&G[n], n + 100, "/pay", 1, 200 + (uint32_t)i);
        T[n] = G[n].t;
    }
    ck_assert_int_eq(rt_sel_select_window(s, T, n, 6, NULL, 0, &r), 0);
    size_t cart = 0, pay = 0;
    for (size_t i = 0; i < n; i++)
        if (r.verdicts[i].chosen)
            *(i < 12 ? &cart : &pay) += 1;
    ck_assert_uint_eq(cart, 1);
    ck_assert_uint_eq(pay, 5);
    /* without novelty_first: the even split */
    rt_sel_config cfg;
    rt_sel_config_default(&cfg);
    cfg.novelty_first = false;
    rt_selector *e = rt_sel_create(&cfg);
    ck_assert_int_eq(rt_sel_select_window(e, T, 3, 10, NULL, 0, &r), 0);
    ck_assert_int_eq(rt_sel_select_window(e, T, n, 6, NULL, 0, &r), 0);
    cart = pay = 0;
    for (size_t i = 0; i < n; i++)
        if (r.verdicts[i].chosen)
            *(i < 12 ? &cart : &pay) += 1;
    ck_assert_uint_eq(cart, 3);
    ck_assert_uint_eq(pay, 3);
    rt_sel_destroy(e);
    rt_sel_destroy(s);
}
END_TEST

/* A pattern the store already holds, with a small anomaly score (3 WARN logs), and a
 * new pattern with none, in one group with one pick: the new one is kept. With the
 * former seen_penalty 0.25 their DPP qualities tied ((1 + 3) · 0.25 = 1) and the
 * stored pattern could be kept again (seen on the TrainTicket set). */
START_TEST(seen_pattern_with_small_score_yields_to_new)
{
    rt_selector *s = rt_sel_create(NULL);
    rt_sel_result r;
    gen_fanout(&G[0], 1, "/cart", 1, 100);
    for (int k = 0; k < 3; k++)
        gen_log(&G[0], RT_SEL_LOG_WARN, 300, NULL);
    T[0] = G[0].t;
    ck_assert_int_eq(rt_sel_select_window(s, T, 1, 1, NULL, 0, &r), 0);
    ck_assert(r.verdicts[0].chosen);
    G[1] = G[0];
    G[1].t.id_lo = 2;
    G[1].t.spans = G[1].spans;
    G[1].t.logs = G[1].logs;
    gen_fanout(&G[2], 3, "/cart", 1, 101);
    T[0] = G[1].t;
    T[1] = G[2].t;
    ck_assert_int_eq(rt_sel_select_window(s, T, 2, 1, NULL, 0, &r), 0);
    ck_assert_double_eq(r.verdicts[0].score, 3.0);
    ck_assert_double_eq(r.verdicts[1].score, 0.0);
    ck_assert_msg(!r.verdicts[0].chosen && r.verdicts[1].chosen,
                  "the stored pattern was kept again instead of the new one");
    rt_sel_destroy(s);
}
END_TEST

/* T[0..3]: /cart, /pay, /search, /login, one trace and one pattern each. */
static void four_apis_one_pattern_each(void)
{
    for (int a = 0; a < 4; a++) {
        gen_fanout(&G[a], (uint64_t)a + 1, API[a], 1, 100 + (uint32_t)a);
        T[a] = G[a].t;
    }
}

/* The promise below the group count: with fewer picks than groups, a pick goes to a
 * group whose every pattern the store holds (already represented there) only when no
 * new pattern is left in the window; a group with two new patterns takes both. With
 * three picks the third would repeat a kept pattern: declined (decline_stale, the
 * default; the caller carries it), or without decline_stale a stale group gets it. */
START_TEST(tiny_budget_spends_on_new_patterns_before_stale_groups)
{
    for (size_t run = 0; run < 3; run++) {
        size_t budget = run == 0 ? 2 : 3;
        bool decline = run != 2;
        rt_sel_config cfg;
        rt_sel_config_default(&cfg);
        cfg.decline_stale = decline;
        rt_selector *s = rt_sel_create(&cfg);
        rt_sel_result r;
        /* window 1: /cart, /pay, /ship, /user with one pattern each: all kept */
        four_apis_one_pattern_each();
        ck_assert_int_eq(rt_sel_select_window(s, T, 4, 4, NULL, 0, &r), 0);
        ck_assert_uint_eq(r.n_chosen, 4);
        /* window 2: every API repeats its pattern; /pay also has two new ones */
        size_t n = 0;
        for (int a = 0; a < 4; a++, n++) {
            gen_fanout(&G[n], n + 11, API[a], 1, 100 + (uint32_t)a);
            T[n] = G[n].t;
        }
        for (int k = 0; k < 2; k++, n++) {
            gen_fanout(&G[n], n + 11, API[1], 1, 300 + (uint32_t)k);
            T[n] = G[n].t;
        }
        ck_assert_int_eq(rt_sel_select_window(s, T, n, budget, NULL, 0, &r), 0);
        size_t want_declined = decline ? budget - 2 : 0;
        ck_assert_uint_eq(r.declined, want_declined);
        ck_assert_uint_eq(r.n_chosen, budget - want_declined);
        ck_assert(r.verdicts[4].chosen && r.verdicts[5].chosen);
        size_t stale = 0;
        for (size_t i = 0; i < 4; i++)
            stale += r.verdicts[i].chosen;
        ck_assert_uint_eq(stale, budget - 2 - want_declined);
        /* the weights of a group with picks still sum to its traces (/pay: 3) */
        double w = 0;
        for (size_t i = 0; i < n; i++)
            if (r.verdicts[i].chosen && r.verdicts[i].group == r.verdicts[4].group)
                w += r.verdicts[i].weight;
        ck_assert(w > 2.99 && w < 3.01);
        rt_sel_destroy(s);
    }
}
END_TEST

/* Below the group count an alarm orders the picks (alarmed_first): four APIs with
 * one new pattern each and a budget of 1 or 2. Without an alarm the rotation picks
 * some group; an alarm on others gives them the picks, and with alarmed_first off
 * the same alarm changes nothing (the alarm boost cannot act below one per group). */
static size_t window_of_four(bool alarmed_first, const uint64_t *alarm, size_t n_alarm,
			     size_t budget, bool chosen[4])
{
    rt_sel_config cfg;
    rt_sel_config_default(&cfg);
    cfg.alarmed_first = alarmed_first;
    rt_selector *s = rt_sel_create(&cfg);
    rt_sel_result r;
    four_apis_one_pattern_each();
    ck_assert_int_eq(rt_sel_select_window(s, T, 4, budget, alarm, n_alarm, &r), 0);
    size_t n = 0;
    for (int a = 0; a < 4; a++)
        n += chosen[a] = r.verdicts[a].chosen;
    rt_sel_destroy(s);
    return n;
}

START_TEST(tiny_budget_goes_to_alarmed_groups_first)
{
    bool plain[4], first[4], off[4];
    ck_assert_uint_eq(window_of_four(true, NULL, 0, 1, plain), 1);
    int picked = plain[0] ? 0 : plain[1] ? 1 : plain[2] ? 2 : 3;
    /* the two groups the rotation did not pick first, alarmed */
    uint64_t alarm[2];
    int want[2], k = 0;
    for (int a = 3; a >= 0 && k < 2; a--)
        if (a != picked) {
            want[k] = a;
            alarm[k++] = rt_sel_op_key("frontend", API[a]);
        }
    ck_assert_uint_eq(window_of_four(true, alarm, 1, 1, first), 1);
    ck_assert_msg(first[want[0]], "budget 1: the alarmed group %d was not picked", want[0]);
    ck_assert_uint_eq(window_of_four(false, alarm, 1, 1, off), 1);
    ck_assert_msg(off[picked], "alarmed_first off: the alarm changed the pick");
    ck_assert_uint_eq(window_of_four(true, alarm, 2, 2, first), 2);
    ck_assert_msg(first[want[0]] && first[want[1]], "budget 2: not both alarmed groups picked");
}
END_TEST

/* A minute cut by a window boundary keeps one p90: nine spans of db/query at d in
 * window 1, then in window 2 (same minute) one at d and one at 1.6 d. Against the
 * minute (p90 = d) the 1.6 d span is a latency event, so the two traces of window 2
 * differ; against window 2 alone (p90 = 1.6 d) they would not. A window in a later
 * minute forgets the carried spans. */
static void gen_db_trace(gen_trace *g, uint64_t id, uint64_t start, uint64_t d)
{
    gen_init(g, id);
    int root = gen_span(g, "frontend", "/cart", -1, start, start + 100000);
    gen_span(g, "db", "query", root, start + 1000, start + 1000 + d);
    gen_log(g, RT_SEL_LOG_INFO, 7, NULL);
}

/* Encodings remembered across windows (the selector's fingerprint memo, a ring of
 * pairs that laps several times here) give exactly what encoding afresh gives: each
 * window is replayed through a selector that has seen every earlier window and
 * through a fresh one, and their patterns and picks must be equal. Windows lie in
 * minutes of their own (no carried spans), trace durations are all equal (no
 * latency term against the group's streaming p90), kept patterns do not lower the
 * quality (seen_penalty 1) nor steer the quota (novelty_first off), and the
 * similarity cache holds one pair, so the picks rest on similarities computed from
 * the window's pairs: a memo entry with another trace's pairs, or the pairs of the
 * same spans at other latency tiers, changes them. */
static void gen_shape_trace(gen_trace *g, uint64_t id, uint64_t start, uint64_t *rng)
{
    uint64_t r = mix64(++*rng);
    int fanout = 1 + (int)(r % 12), slow = (int)((r >> 8) % 4);
    uint32_t tmpl = 1000 + (uint32_t)((r >> 16) % 700);
    gen_init(g, id);
    int root = gen_span(g, "frontend", API[(r >> 40) % 4], -1, start, start + 1000000);
    gen_log(g, RT_SEL_LOG_INFO, 1, NULL);
    for (int i = 0; i < fanout; i++) {
        /* one span of the shape is 4x slower in a quarter of the traces: a tier */
        uint64_t d = 1000 + (uint64_t)i + (slow == 0 && i == 0 ? 4000 : 0);
        gen_span(g, i % 3 ? "db" : "cache", i % 2 ? "query" : "get", root, start + 2000,
                 start + 2000 + d);
        gen_log(g, (r >> 24) % 5 == 0 ? RT_SEL_LOG_WARN : RT_SEL_LOG_INFO, tmpl + (uint32_t)i,
                NULL);
    }
}

START_TEST(first_pass_reads_groups_and_scores_as_the_helpers_do)
{
    /* The window reads op keys, root, entry, failed spans and duration of a trace in
     * one pass: its groups and scores must be rt_sel_trace_group's and
     * rt_sel_anomaly_score's (latency term off: the group p90 is the selector's own),
     * with spans out of start order, wildcard roots, several roots and none. */
    static const char *svc[] = {"gateway", "orders", "users", "db"};
    static const char *op[] = {"/*", "/orders", "/users/*", "query"};
    rt_sel_config cfg;
    rt_sel_config_default(&cfg);
    cfg.weights.latency = 0;
    uint64_t rng = 7;
    for (int w = 0; w < 20; w++) {
        size_t n = 150;
        for (size_t i = 0; i < n; i++) {
            gen_init(&G[i], (uint64_t)w * 1000 + i + 1);
            uint64_t r = mix64(++rng);
            int spans = 1 + (int)(r % 9);
            for (int k = 0; k < spans; k++) {
                uint64_t q = mix64(r + (uint64_t)k);
                /* no root at all in one trace of eight, several in some */
                int parent = k == 0 ? ((r >> 8) % 8 ? -1 : spans - 1)
                                    : (q % 5 == 0 ? -1 : (int)(q >> 8) % k);
                uint64_t start = 1000 + (q >> 16) % 5000;
                gen_span(&G[i], svc[(q >> 24) % 4], op[(q >> 28) % 4], parent, start,
                         start + (q >> 32) % 900);
                G[i].spans[k].error = (q >> 40) % 6 == 0;
                gen_log(&G[i], (uint8_t)((q >> 44) % 4), 1 + (uint32_t)((q >> 48) % 5), NULL);
            }
            T[i] = G[i].t;
        }
        rt_selector *s = rt_sel_create(&cfg);
        rt_sel_result res;
        ck_assert_int_eq(rt_sel_select_window(s, T, n, 10, NULL, 0, &res), 0);
        for (size_t i = 0; i < n; i++) {
            ck_assert_msg(res.verdicts[i].group == rt_sel_trace_group(&T[i]), "trace %zu", i);
            ck_assert_msg(res.verdicts[i].score == rt_sel_anomaly_score(&T[i], &cfg.weights, 0),
                          "trace %zu", i);
        }
        rt_sel_destroy(s);
    }
}
END_TEST

START_TEST(encodings_remembered_across_windows_are_exact)
{
    const uint64_t minute = 60000000000ull;
    rt_sel_config cfg;
    rt_sel_config_default(&cfg);
    cfg.seen_penalty = 1.0;
    cfg.novelty_first = false;
    cfg.decline_stale = false;
    cfg.simcache_capacity = 1;
    rt_selector *warm = rt_sel_create(&cfg);
    uint64_t rng = 42;
    size_t picks_checked = 0;
    for (int w = 0; w < 120; w++) {
        size_t n = 100;
        for (size_t i = 0; i < n; i++) {
            gen_shape_trace(&G[i], (uint64_t)w * 1000 + i + 1,
                            (uint64_t)(1000 + 2 * w) * minute + i * 100000000ull, &rng);
            T[i] = G[i].t;
        }
        rt_selector *cold = rt_sel_create(&cfg);
        rt_sel_result a, b;
        ck_assert_int_eq(rt_sel_select_window(cold, T, n, 12, NULL, 0, &b), 0);
        uint64_t pat[100];
        bool chosen[100];
        for (size_t i = 0; i < n; i++) {
            pat[i] = b.verdicts[i].pattern;
            chosen[i] = b.verdicts[i].chosen;
        }
        rt_sel_destroy(cold);
        ck_assert_int_eq(rt_sel_select_window(warm, T, n, 12, NULL, 0, &a), 0);
        for (size_t i = 0; i < n; i++) {
            ck_assert_msg(a.verdicts[i].pattern == pat[i], "window %d trace %zu: pattern", w, i);
            ck_assert_msg(a.verdicts[i].chosen == chosen[i], "window %d trace %zu: pick", w, i);
            picks_checked += chosen[i];
        }
    }
    ck_assert_uint_eq(picks_checked, 120 * 12);
    rt_sel_destroy(warm);
}
END_TEST

START_TEST(minute_split_by_window_keeps_one_p90)
{
    const uint64_t minute = 60000000000ull, m0 = 100 * minute, d = 10000;
    rt_selector *s = rt_sel_create(NULL);
    rt_sel_result r;
    for (size_t i = 0; i < 9; i++) {
        gen_db_trace(&G[i], i + 1, m0 + i * 1000000, d);
        T[i] = G[i].t;
    }
    ck_assert_int_eq(rt_sel_select_window(s, T, 9, 9, NULL, 0, &r), 0);
    gen_db_trace(&G[0], 20, m0 + 30 * 1000000000ull, d);
    gen_db_trace(&G[1], 21, m0 + 31 * 1000000000ull, d * 16 / 10);
    T[0] = G[0].t;
    T[1] = G[1].t;
    ck_assert_int_eq(rt_sel_select_window(s, T, 2, 2, NULL, 0, &r), 0);
    ck_assert_uint_ne(r.verdicts[0].pattern, r.verdicts[1].pattern);
    /* the next minute starts afresh: window 2's pair alone has p90 = 1.6 d */
    gen_db_trace(&G[0], 30, m0 + minute + 1000, d);
    gen_db_trace(&G[1], 31, m0 + minute + 2000, d * 16 / 10);
    T[0] = G[0].t;
    T[1] = G[1].t;
    ck_assert_int_eq(rt_sel_select_window(s, T, 2, 2, NULL, 0, &r), 0);
    ck_assert_uint_eq(r.verdicts[0].pattern, r.verdicts[1].pattern);
    /* a span from a clock far ahead does not stop the carry for later windows */
    gen_db_trace(&G[0], 40, m0 + 1000000 * minute, d);
    T[0] = G[0].t;
    ck_assert_int_eq(rt_sel_select_window(s, T, 1, 1, NULL, 0, &r), 0);
    const uint64_t m2 = m0 + 5 * minute;
    for (size_t i = 0; i < 9; i++) {
        gen_db_trace(&G[i], 50 + i, m2 + i * 1000000, d);
        T[i] = G[i].t;
    }
    ck_assert_int_eq(rt_sel_select_window(s, T, 9, 9, NULL, 0, &r), 0);
    gen_db_trace(&G[0], 60, m2 + 30 * 1000000000ull, d);
    gen_db_trace(&G[1], 61, m2 + 31 * 1000000000ull, d * 16 / 10);
    T[0] = G[0].t;
    T[1] = G[1].t;
    ck_assert_int_eq(rt_sel_select_window(s, T, 2, 2, NULL, 0, &r), 0);
    ck_assert_uint_ne(r.verdicts[0].pattern, r.verdicts[1].pattern);
    rt_sel_destroy(s);
}
END_TEST

/* gen_db_trace with the log's template and level given. */
static void gen_db_trace_tmpl(gen_trace *g, uint64_t id, uint64_t start, uint64_t d,
                              uint32_t tmpl, uint8_t level)
{
    gen_init(g, id);
    int root = gen_span(g, "frontend", "/cart", -1, start, start + 100000);
    gen_span(g, "db", "query", root, start + 1000, start + 1000 + d);
    gen_log(g, level, tmpl, NULL);
}

/* Window 1 at m0 (minute 100): nine db spans at d and K, a WARN trace at 1.6 d, all
 * kept. Window 2 from w2: nine fillers at 1.6 d, X (K's twin) and Y (a new normal
 * shape), one pick: Y must be kept, X (the higher score) must read as kept before. */
static void twin_of_kept_is_not_new(uint64_t w2, const char *why)
{
    const uint64_t m0 = 100 * 60000000000ull, d = 10000, slow = d * 16 / 10;
    rt_selector *s = rt_sel_create(NULL);
    rt_sel_result r;
    for (size_t i = 0; i < 9; i++) {
        gen_db_trace_tmpl(&G[i], i + 1, m0 + i * 1000000, d, 7, RT_SEL_LOG_INFO);
        T[i] = G[i].t;
    }
    gen_db_trace_tmpl(&G[9], 10, m0 + 10 * 1000000, slow, 9, RT_SEL_LOG_WARN);
    T[9] = G[9].t;
    ck_assert_int_eq(rt_sel_select_window(s, T, 10, 10, NULL, 0, &r), 0);
    ck_assert(r.verdicts[9].chosen);
    uint64_t k = r.verdicts[9].pattern;
    for (size_t i = 0; i < 9; i++) {
        gen_db_trace_tmpl(&G[i], 20 + i, w2 + i * 1000000, slow, 7, RT_SEL_LOG_INFO);
        T[i] = G[i].t;
    }
    gen_db_trace_tmpl(&G[9], 30, w2 + 10000000, slow, 9, RT_SEL_LOG_WARN);
    gen_db_trace_tmpl(&G[10], 31, w2 + 11000000, slow, 8, RT_SEL_LOG_INFO);
    T[9] = G[9].t;
    T[10] = G[10].t;
    ck_assert_int_eq(rt_sel_select_window(s, T, 11, 1, NULL, 0, &r), 0);
    ck_assert_uint_ne(r.verdicts[9].pattern, k); /* X reads otherwise than K did */
    ck_assert_msg(r.verdicts[10].chosen && !r.verdicts[9].chosen, "%s", why);
    rt_sel_destroy(s);
}

/* A kept trace whose span was judged on the first part of a cut minute is judged
 * again against the whole minute in the next window, and that pattern counts as
 * kept too. Window 1 (first part of a minute): nine db spans at d and K, a WARN trace
 * at 1.6 d: against the part (p90 = d) K is slow, tier 1; all kept. Window 2 (rest of
 * the minute): fillers and X, K's twin, at 1.6 d, and Y, a new normal shape. Against
 * the whole minute (p90 = 1.6 d) X and K read the same; with one pick Y is new and X
 * is not, although X scores higher. Without judging K again, X looked new and won. */
START_TEST(kept_trace_of_cut_minute_judged_again)
{
    /* window 2 holds the rest of minute 100 */
    twin_of_kept_is_not_new(100 * 60000000000ull + 30000000000ull,
                            "K's twin was taken for new: K was not judged again on the whole minute");
}
END_TEST

/* A trace of the cut minute is also read against the minute before: when that reading
 * is a pattern kept earlier, it is not new. Minute 1: nine db spans at d and K, a WARN
 * trace at 1.6 d (tier 1); all kept. The next window holds the first part of minute 2,
 * every db span at 1.6 d: against that part X, K's twin, has no latency event and
 * reads new; against minute 1 (p90 = d) it reads as K. With one pick Y, a new normal
 * shape, is kept, although X scores higher. */
START_TEST(cut_minute_read_against_minute_before)
{
    /* window 2 holds the first part of minute 101 */
    twin_of_kept_is_not_new(101 * 60000000000ull,
                            "K's twin was taken for new: the cut minute was not read against the one before");
}
END_TEST

/* A root `api` with ten children; child i's operation is ops[i] and its log has
 * template tmpl[i] at the given level. */
static void gen_wide(gen_trace *g, uint64_t id, uint64_t start, const char *api,
                     const char *const *ops, const uint32_t *tmpl, uint8_t level)
{
    gen_init(g, id);
    int root = gen_span(g, "frontend", api, -1, start, start + 100000);
    for (int i = 0; i < 10; i++) {
        gen_span(g, "svc", ops[i], root, start + 1000 + (uint64_t)i, start + 2000 + (uint64_t)i);
        gen_log(g, level, tmpl[i], NULL);
    }
}

/* Below the group count, a group given two picks for its two new patterns keeps both,
 * not one of them and a pattern kept earlier. Window 1 keeps everything: /a, /b, /c
 * and K in /g (an ERROR log: score 2). Window 2, budget 2 for 4 groups: /a, /b, /c
 * repeat, /g has K's twin and N1, N2, new, normal and alike but for one template
 * (Jaccard ~0.9), both far from K. The quota gives /g two picks for its two new
 * patterns; the DPP alone, after N1, preferred K's twin (quality 0.6 but far from N1)
 * to N2 (quality 1 but close to it), spending a new-pattern pick on a repeat. */
START_TEST(new_pattern_picks_go_to_new_patterns)
{
    static const char *const ops_k[10] = {"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"};
    static const char *const ops_n[10] = {"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"};
    static const uint32_t t_k[10] = {9, 9, 9, 9, 9, 9, 9, 9, 9, 9};
    static const uint32_t t_n1[10] = {3, 3, 3, 3, 3, 3, 3, 3, 3, 3};
    static const uint32_t t_n2[10] = {3, 3, 3, 3, 3, 3, 3, 3, 3, 4};
    static const char *const apis[3] = {"/a", "/b", "/c"};
    const uint64_t m1 = 100 * 60000000000ull, m2 = 102 * 60000000000ull;
    rt_selector *s = rt_sel_create(NULL);
    rt_sel_result r;
    for (int w = 0; w < 2; w++) {
        uint64_t base = w ? m2 : m1;
        for (int i = 0; i < 3; i++) {
            gen_fanout(&G[i], (uint64_t)(10 * w + i + 1), apis[i], 2, 5);
            for (uint32_t j = 0; j < G[i].t.n_spans; j++) {
                G[i].spans[j].start_ns += base;
                G[i].spans[j].end_ns += base;
            }
        }
        gen_wide(&G[3], (uint64_t)(10 * w + 4), base + 1000000, "/g", ops_k, t_k, RT_SEL_LOG_ERROR);
        gen_wide(&G[4], (uint64_t)(10 * w + 5), base + 2000000, "/g", ops_n, t_n1, RT_SEL_LOG_INFO);
        gen_wide(&G[5], (uint64_t)(10 * w + 6), base + 3000000, "/g", ops_n, t_n2, RT_SEL_LOG_INFO);
        for (int i = 0; i < 6; i++)
            T[i] = G[i].t;
        ck_assert_int_eq(rt_sel_select_window(s, T, w ? 6 : 4, w ? 2 : 4, NULL, 0, &r), 0);
    }
    ck_assert_uint_eq(r.n_groups, 4);
    ck_assert_uint_eq(r.n_chosen, 2);
    ck_assert_msg(r.verdicts[4].chosen && r.verdicts[5].chosen && !r.verdicts[3].chosen,
                  "a pick given for a new pattern went to K's twin (kept before)");
    rt_sel_destroy(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("select_selector");
    TCase *tc = tcase_create("selector");
    tcase_add_test(tc, budget_exact_and_every_group_represented);
    tcase_add_test(tc, alarmed_group_is_boosted);
    tcase_add_test(tc, tiny_budget_goes_to_alarmed_groups_first);
    tcase_add_test(tc, diverse_picks_inside_a_group);
    tcase_add_test(tc, anomalous_pattern_preferred);
    tcase_add_test(tc, keeps_everything_under_budget);
    tcase_add_test(tc, budget_scales_up_when_traffic_drops_during_alarm);
    tcase_add_test(tc, free_text_logs_are_mined);
    tcase_add_test(tc, known_text_lengths_change_nothing);
    tcase_add_test(tc, first_pass_reads_groups_and_scores_as_the_helpers_do);
    tcase_add_test(tc, tiny_budget_prefers_groups_with_new_patterns);
    tcase_add_test(tc, short_window_is_not_a_traffic_drop);
    tcase_add_test(tc, latency_tiers_per_minute);
    tcase_add_test(tc, budget_goes_to_new_patterns_first);
    tcase_add_test(tc, tiny_budget_spends_on_new_patterns_before_stale_groups);
    tcase_add_test(tc, seen_pattern_with_small_score_yields_to_new);
    tcase_add_test(tc, minute_split_by_window_keeps_one_p90);
    tcase_add_test(tc, kept_trace_of_cut_minute_judged_again);
    tcase_add_test(tc, cut_minute_read_against_minute_before);
    tcase_add_test(tc, encodings_remembered_across_windows_are_exact);
    tcase_add_test(tc, new_pattern_picks_go_to_new_patterns);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
