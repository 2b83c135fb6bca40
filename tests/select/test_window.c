/* test_window.c — the cut minute held back (select/window.c, rt_sel_select with held
 * traces, the replay of eval.c): which traces wait, that they are judged against the
 * whole minute in the window that selects them, that held traces' spans count toward
 * the p90s of the window they wait in, and that no trace is lost or selected twice. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "dataset_build.h"
#include "gen.h"

#define MINUTE 60000000000ull
#define SECOND 1000000000ull
#define MAX_TRACES 512

static gen_trace G[MAX_TRACES];

/* frontend /cart → db query (duration d), one INFO log on the db span. */
static void gen_cart(gen_trace *g, uint64_t id, uint64_t start, uint64_t d)
{
    gen_init(g, id);
    int root = gen_span(g, "frontend", "/cart", -1, start, start + 100000);
    gen_span(g, "db", "query", root, start + 1000, start + 1000 + d);
    gen_log(g, RT_SEL_LOG_INFO, 7, NULL);
}

/* ------------------------------------------------------------ the rule */

START_TEST(traces_of_the_newest_minute_wait_once)
{
    rt_sel_trace t[5];
    bool hold[5], before[5] = {false, false, false, false, true};
    gen_cart(&G[0], 1, 99 * MINUTE + 10 * SECOND, 1000);
    gen_cart(&G[1], 2, 100 * MINUTE + 5 * SECOND, 1000);
    /* starts in minute 99, its child starts in minute 100: its minute 100 is cut too */
    gen_init(&G[2], 3);
    gen_span(&G[2], "frontend", "/cart", -1, 100 * MINUTE - SECOND, 100 * MINUTE + 2 * SECOND);
    gen_span(&G[2], "db", "query", 0, 100 * MINUTE + SECOND, 100 * MINUTE + SECOND + 1000);
    gen_cart(&G[3], 4, 99 * MINUTE + 50 * SECOND, 1000);
    gen_cart(&G[4], 5, 100 * MINUTE + 30 * SECOND, 1000); /* waited already */
    for (int i = 0; i < 5; i++)
        t[i] = G[i].t;
    ck_assert_uint_eq(rt_sel_hold_cut_minute(t, 5, before, false, hold), 2);
    ck_assert(!hold[0] && hold[1] && hold[2] && !hold[3] && !hold[4]);
    ck_assert_uint_eq(rt_sel_hold_cut_minute(t, 5, NULL, false, hold), 3);
    ck_assert(hold[4]);
    /* the last window of a run takes everything */
    ck_assert_uint_eq(rt_sel_hold_cut_minute(t, 5, before, true, hold), 0);
    for (int i = 0; i < 5; i++)
        ck_assert(!hold[i]);
}
END_TEST

/* ------------------------------------------------------------ windows as callers run them */

/* What a run of windows did to each trace (by id - 1). */
typedef struct outcome {
    int selected;    /* times it got a verdict */
    uint64_t pattern; /* its verdict's */
    bool chosen;
    double weight;
} outcome;

/* Run windows[w] = G[first[w] .. first[w + 1]) through sel as the coordinator and the
 * replay do: the held traces of the window before first, then the window's own; the
 * rule picks the ones to hold; the last window holds nothing. Checks on the way that
 * the chosen weights of each group sum to its selected traces in that window. */
static void run_windows(rt_selector *sel, const size_t *first, size_t n_windows, size_t budget,
                        outcome *out)
{
    static rt_sel_trace win[MAX_TRACES], now[MAX_TRACES], held[MAX_TRACES];
    static bool before[MAX_TRACES], hold[MAX_TRACES];
    size_t n_held = 0;
    for (size_t w = 0; w < n_windows; w++) {
        size_t n = 0, n_now = 0, n_next = 0;
        for (size_t h = 0; h < n_held; h++, n++) {
            win[n] = held[h];
            before[n] = true;
        }
        for (size_t i = first[w]; i < first[w + 1]; i++, n++) {
            win[n] = G[i].t;
            before[n] = false;
        }
        bool last = w + 1 == n_windows;
        rt_sel_hold_cut_minute(win, n, before, last, hold);
        for (size_t i = 0; i < n; i++) {
            if (hold[i])
                held[n_next++] = win[i];
            else
                now[n_now++] = win[i];
        }
        n_held = n_next;
        rt_sel_window sw = {.traces = now, .n = n_now, .held = held, .n_held = n_held,
                            .budget = budget, .last = last};
        rt_sel_result r;
        ck_assert_int_eq(rt_sel_select(sel, &sw, &r), 0);
        ck_assert_uint_eq(r.n_traces, n_now);
        for (size_t i = 0; i < n_now; i++) {
            outcome *o = &out[now[i].id_lo - 1];
            o->selected++;
            o->pattern = r.verdicts[i].pattern;
            o->chosen = r.verdicts[i].chosen;
            o->weight = r.verdicts[i].chosen ? r.verdicts[i].weight : 0.0;
        }
        /* weights of a group sum to the traces it had in the window that selected them */
        for (size_t i = 0; i < n_now; i++) {
            double sum = 0;
            size_t members = 0;
            for (size_t k = 0; k < n_now; k++) {
                if (r.verdicts[k].group != r.verdicts[i].group)
                    continue;
                members++;
                sum += r.verdicts[k].chosen ? r.verdicts[k].weight : 0.0;
            }
            if (sum > 0)
                ck_assert_msg(fabs(sum - (double)members) < 1e-9, "window %zu: weights %g of %zu",
                              w, sum, members);
        }
    }
    ck_assert_uint_eq(n_held, 0);
}

/* The case. Window 1 ends 20 s into minute 100: nine db spans at d and X at
 * 1.6 d in that first part. Window 2 holds the rest of the minute: nine db spans at
 * 1.6 d. Against the first part alone (p90 = d) X is slow (tier 1) and reads as a
 * shape of its own; against the whole minute (p90 = 1.6 d) it reads as its
 * neighbours do. Held back to window 2, X is judged on the whole minute. */
START_TEST(cut_minute_selected_next_window_with_whole_p90)
{
    const uint64_t d = 10000, m = 100 * MINUTE;
    size_t k = 0;
    gen_cart(&G[k], k + 1, m - 30 * SECOND, d), k++; /* minute 99: window 1 spans two */
    for (int i = 0; i < 9; i++, k++)
        gen_cart(&G[k], k + 1, m + (uint64_t)i * SECOND, d);
    size_t x = k;
    gen_cart(&G[k], k + 1, m + 10 * SECOND, d * 16 / 10), k++;
    size_t first_w2 = k;
    for (int i = 0; i < 9; i++, k++)
        gen_cart(&G[k], k + 1, m + (uint64_t)(30 + i) * SECOND, d * 16 / 10);
    size_t q = k;
    gen_cart(&G[k], k + 1, m + MINUTE + SECOND, d), k++; /* window 2 cuts minute 101 */
    size_t first[] = {0, first_w2, k, k};
    outcome out[MAX_TRACES] = {{0}};
    rt_selector *sel = rt_sel_create(NULL);
    /* three windows: the third (last) takes what the second held */
    run_windows(sel, first, 3, 100, out);
    rt_sel_destroy(sel);
    ck_assert_msg(out[x].pattern == out[1].pattern,
                  "X was judged on the first part of its minute, not on the whole");
    ck_assert_uint_eq(out[x].pattern, out[first_w2].pattern);
    ck_assert_uint_eq(out[q].selected, 1);
}
END_TEST

/* The held traces' spans count toward the p90s of the window they wait in: here
 * minute 99, which window 1 selects and which five held traces (starting late in
 * minute 99, their db span in minute 100) share. Minute 99's db spans: nine at d and
 * Y at 2 d among the traces selected now, five at 2 d among the held ones. Over the
 * selected alone p90 = d and Y is slow (tier 1); over the whole minute p90 = 2 d and Y
 * reads as the fillers do. */
START_TEST(held_spans_count_toward_the_minute_they_share)
{
    const uint64_t d = 10000, m = 100 * MINUTE;
    size_t k = 0;
    for (int i = 0; i < 9; i++, k++)
        gen_cart(&G[k], k + 1, m - 50 * SECOND + (uint64_t)i * SECOND, d);
    size_t y = k;
    gen_cart(&G[k], k + 1, m - 40 * SECOND, 2 * d), k++;
    for (int i = 0; i < 5; i++, k++) { /* root late in minute 99, db span in minute 99 too */
        gen_init(&G[k], k + 1);
        int root = gen_span(&G[k], "frontend", "/slow", -1, m - SECOND + (uint64_t)i,
                            m + 2 * SECOND);
        gen_span(&G[k], "db", "query", root, m - SECOND + 1000, m - SECOND + 1000 + 2 * d);
        gen_log(&G[k], RT_SEL_LOG_INFO, 7, NULL);
        gen_span(&G[k], "frontend", "render", root, m + SECOND, m + SECOND + 1000);
    }
    size_t first[] = {0, k, k};
    outcome out[MAX_TRACES] = {{0}};
    rt_selector *sel = rt_sel_create(NULL);
    run_windows(sel, first, 2, 100, out);
    rt_sel_destroy(sel);
    ck_assert_msg(out[y].pattern == out[0].pattern,
                  "Y was judged without the held traces' spans of its minute");
}
END_TEST

/* Many windows of mixed shapes across minute boundaries, budget below the traffic:
 * every trace gets exactly one verdict, the last window takes what was held, and
 * the chosen weights sum to the traces (run_windows checks each window's groups). */
START_TEST(no_trace_lost_or_selected_twice)
{
    static const char *const apis[] = {"/cart", "/pay", "/search"};
    const size_t n = 400, per_window = 37; /* windows of 37 traces, 1 s apart */
    uint64_t rng = 7;
    for (size_t i = 0; i < n; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t start = 100 * MINUTE + 20 * SECOND + i * SECOND;
        gen_init(&G[i], i + 1);
        int root = gen_span(&G[i], "frontend", apis[(rng >> 33) % 3], -1, start, start + 100000);
        gen_span(&G[i], "db", "query", root, start + 1000, start + 1000 + 5000 + (rng >> 40) % 9000);
        gen_log(&G[i], (rng >> 50) % 5 == 0 ? RT_SEL_LOG_ERROR : RT_SEL_LOG_INFO,
                1 + (uint32_t)((rng >> 45) % 4), NULL);
    }
    size_t first[16], w = 0;
    for (size_t i = 0; i < n; i += per_window)
        first[w++] = i;
    first[w] = n;
    outcome out[MAX_TRACES] = {{0}};
    rt_selector *sel = rt_sel_create(NULL);
    run_windows(sel, first, w, 6, out);
    rt_sel_destroy(sel);
    double weights = 0;
    size_t chosen = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(out[i].selected == 1, "trace %zu selected %d times", i, out[i].selected);
        weights += out[i].weight;
        chosen += out[i].chosen;
    }
    ck_assert_uint_le(chosen, 6 * w);
    ck_assert_msg(fabs(weights - (double)n) < 1e-6, "weights sum to %g, not %zu", weights, n);
}
END_TEST

/* ------------------------------------------------------------ the replay */

/* A dataset of `n` cart/pay traces one second apart from 20 s into minute 100. */
static rt_sel_dataset *seconds_dataset(size_t n)
{
    rt_sel_dataset *ds = rt_sel_ds_new();
    ck_assert_ptr_nonnull(ds);
    const char *fe = rt_sel_ds_intern(ds, "frontend", 8), *db = rt_sel_ds_intern(ds, "db", 2);
    const char *cart = rt_sel_ds_intern(ds, "/cart", 5), *pay = rt_sel_ds_intern(ds, "/pay", 4);
    const char *query = rt_sel_ds_intern(ds, "query", 5);
    for (size_t i = 0; i < n; i++) {
        uint64_t start = 100 * MINUTE + 20 * SECOND + i * SECOND;
        rt_sel_raw_span root = {.trace_lo = i + 1, .span_id = 1, .service = fe,
                                .operation = i % 3 ? cart : pay, .start_ns = start,
                                .end_ns = start + 100000};
        rt_sel_raw_span child = {.trace_lo = i + 1, .span_id = 2, .parent_id = 1,
                                 .has_parent = true, .service = db, .operation = query,
                                 .start_ns = start + 1000,
                                 .end_ns = start + 1000 + 5000 + (i * 7919) % 9000};
        rt_sel_raw_log log = {.trace_lo = i + 1, .span_id = 2, .ts_ns = start + 2000,
                              .template_id = 1 + (uint32_t)(i % 5),
                              .level = i % 11 == 0 ? RT_SEL_LOG_ERROR : RT_SEL_LOG_INFO};
        ck_assert_int_eq(rt_sel_ds_add_span(ds, &root), 0);
        ck_assert_int_eq(rt_sel_ds_add_span(ds, &child), 0);
        ck_assert_int_eq(rt_sel_ds_add_log(ds, &log), 0);
    }
    char err[256];
    ck_assert_int_eq(rt_sel_ds_finish(ds, err, sizeof err), 0);
    return ds;
}

/* The replay holds the cut minute back too: at rate 1 every trace is kept (the last
 * window takes the held ones), and at 10 % the selector and random sampling keep the
 * same count, the rate to within a trace. */
START_TEST(replay_keeps_the_count_with_held_traces)
{
    const size_t n = 300; /* five minutes, windows of 60 s cut each minute at 20 s */
    rt_sel_dataset *ds = seconds_dataset(n);
    rt_sel_eval_options opt = {.rate = 1.0, .window_s = 60, .seed = 1};
    rt_sel_eval_report rep;
    char err[256];
    ck_assert_int_eq(rt_sel_eval_run(ds, &opt, &rep, err, sizeof err), 0);
    ck_assert_uint_eq(rep.gleaner.kept, n);
    ck_assert_uint_eq(rep.random.kept, n);
    opt.rate = 0.1;
    ck_assert_int_eq(rt_sel_eval_run(ds, &opt, &rep, err, sizeof err), 0);
    ck_assert_uint_eq(rep.gleaner.kept, rep.random.kept);
    ck_assert_uint_le(rep.gleaner.kept, 31);
    ck_assert_uint_ge(rep.gleaner.kept, 29);
    rt_sel_dataset_free(ds);
}
END_TEST

/* The random baseline averaged over draws: the same budgets (kept), each paper figure's
 * mean between its lowest and highest draw, a single draw among them (draw 0 is seeded
 * as one draw is), and the draws not all alike. */
START_TEST(random_baseline_is_a_mean_of_draws)
{
    rt_sel_dataset *ds = seconds_dataset(300);
    rt_sel_eval_options opt = {.rate = 0.1, .window_s = 60, .seed = 7, .alarm_on_errors = true};
    rt_sel_eval_report one, many;
    char err[256];
    ck_assert_int_eq(rt_sel_eval_run(ds, &opt, &one, err, sizeof err), 0);
    ck_assert_uint_eq(one.random_draws, 1);
    opt.random_draws = 8;
    ck_assert_int_eq(rt_sel_eval_run(ds, &opt, &many, err, sizeof err), 0);
    ck_assert_uint_eq(many.random_draws, 8);
    ck_assert_uint_eq(many.random.kept, one.random.kept);
    ck_assert_uint_eq(many.gleaner.kept, one.gleaner.kept);
    const rt_sel_paper_metrics *lo = &many.paper_random_lo, *hi = &many.paper_random_hi,
                               *mean = &many.paper_random;
    ck_assert(lo->errors <= mean->errors && mean->errors <= hi->errors);
    ck_assert(lo->pattern_coverage <= mean->pattern_coverage &&
              mean->pattern_coverage <= hi->pattern_coverage);
    ck_assert(lo->errors <= one.paper_random.errors && one.paper_random.errors <= hi->errors);
    ck_assert_msg(lo->errors < hi->errors, "eight draws kept the same error share %.3f",
                  lo->errors);
    opt.random_draws = 1000; /* past the bound: clamped, not overrun */
    ck_assert_int_eq(rt_sel_eval_run(ds, &opt, &many, err, sizeof err), 0);
    ck_assert_uint_eq(many.random_draws, RT_SEL_RANDOM_DRAWS_MAX);
    rt_sel_dataset_free(ds);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("select_window");
    TCase *tc = tcase_create("window");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, traces_of_the_newest_minute_wait_once);
    tcase_add_test(tc, cut_minute_selected_next_window_with_whole_p90);
    tcase_add_test(tc, held_spans_count_toward_the_minute_they_share);
    tcase_add_test(tc, no_trace_lost_or_selected_twice);
    tcase_add_test(tc, replay_keeps_the_count_with_held_traces);
    tcase_add_test(tc, random_baseline_is_a_mean_of_draws);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
