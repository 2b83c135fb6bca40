/* ab_select.c — the selector of another revision against this tree's, in one process.
 *
 * On a shared, loaded machine two runs minutes apart differ by more than most speed
 * changes (the figures of the sixth pass moved ±10 % between identical builds), so
 * this replays the dataset through both selectors in the same process, alternating
 * per round (ABBA), and prints what each took and whether their output is the same.
 * The other revision's select/ sources are compiled by run-ab.sh into one object
 * whose global symbols carry the prefix base_; this file calls the public entry
 * points of both (the declarations below must match select.h of that revision).
 *
 * The replay is eval.c's (60 s windows by root start, budget credit at the rate,
 * declined picks carried, error alarms per entry API), with mining timed apart;
 * times are the thread's CPU time. The head build holds the cut minute's traces
 * back to the next window as eval.c does (rt_sel_hold_cut_minute, rt_sel_select);
 * so does the base when its revision has that API (run-ab.sh looks for the symbols
 * and defines AB_BASE_HOLD), else it replays the plain windows (the hold-back is
 * then not output-neutral: same_output=no is expected against such a base). Output
 * per rate:
 *   bench select_ab rate=R build=base|head rounds=N us_mining=… us_prepare=… us_p90=…
 *     us_encode=… us_choose=… us_per_trace=… (means) min_us_per_trace=… digest=…
 *   bench select_ab rate=R ratio=head/base us_per_trace=… us_mining=… us_selection=…
 *     same_output=yes|no
 * The digest covers every verdict (pattern, group, score, chosen) and every mined
 * template id: same_output=no means the change is not output-neutral.
 */
#include "dataset_read.h" /* tools/select_eval/ */
#include "select.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the baseline revision's selector (run-ab.sh) */
rt_selector *base_rt_sel_create(const rt_sel_config *cfg);
void base_rt_sel_destroy(rt_selector *s);
void base_rt_sel_selector_stage_times(const rt_selector *s, rt_sel_stage_times *out);
void base_rt_sel_mine_templates(rt_selector *s, rt_sel_trace *traces, size_t n);
int base_rt_sel_select_window_part(rt_selector *s, rt_sel_trace *traces, size_t n, size_t budget,
                                   const uint64_t *alarmed_groups, size_t n_alarmed,
                                   double coverage, rt_sel_result *out);
#ifdef AB_BASE_HOLD
int base_rt_sel_select(rt_selector *s, const rt_sel_window *w, rt_sel_result *out);
size_t base_rt_sel_hold_cut_minute(const rt_sel_trace *traces, size_t n, const bool *held_before,
                                   bool last, bool *hold);
#endif

typedef struct selector_api {
    const char *name;
    rt_selector *(*create)(const rt_sel_config *);
    void (*destroy)(rt_selector *);
    void (*stage_times)(const rt_selector *, rt_sel_stage_times *);
    void (*mine)(rt_selector *, rt_sel_trace *, size_t);
    int (*select)(rt_selector *, rt_sel_trace *, size_t, size_t, const uint64_t *, size_t, double,
                  rt_sel_result *);
    /* the cut minute held back (rt_sel_select with held traces); NULL: plain windows */
    int (*select_held)(rt_selector *, const rt_sel_window *, rt_sel_result *);
    size_t (*hold)(const rt_sel_trace *, size_t, const bool *, bool, bool *);
} selector_api;

static const selector_api apis[2] = {
    {"base", base_rt_sel_create, base_rt_sel_destroy, base_rt_sel_selector_stage_times,
     base_rt_sel_mine_templates, base_rt_sel_select_window_part,
#ifdef AB_BASE_HOLD
     base_rt_sel_select, base_rt_sel_hold_cut_minute},
#else
     NULL, NULL},
#endif
    {"head", rt_sel_create, rt_sel_destroy, rt_sel_selector_stage_times, rt_sel_mine_templates,
     rt_sel_select_window_part, rt_sel_select, rt_sel_hold_cut_minute},
};

/* The traces of window [a, b) of all, after the ones held back by the window before
 * (held[0..*n_held)); with api->hold the cut minute's go back to held. win[0..return)
 * are selected now, with the digest order of eval.c (held first). */
static size_t form_window(const selector_api *api, rt_sel_trace *all, size_t a, size_t b,
                          bool last, rt_sel_trace *win, rt_sel_trace *held, size_t *n_held,
                          bool *before, bool *hold)
{
    size_t n = 0;
    for (size_t h = 0; h < *n_held; h++, n++) {
        win[n] = held[h];
        before[n] = true;
    }
    for (size_t i = a; i < b; i++, n++) {
        win[n] = all[i];
        before[n] = false;
    }
    if (!api->hold)
        return n;
    api->hold(win, n, before, last, hold);
    size_t keep = 0;
    *n_held = 0;
    for (size_t k = 0; k < n; k++) {
        if (hold[k])
            held[(*n_held)++] = win[k];
        else
            win[keep++] = win[k];
    }
    return keep;
}

enum { F_MINING, F_PREPARE, F_P90, F_ENCODE, F_CHOOSE, F_SELECTION, F_TOTAL, F_N };

typedef struct replay_out {
    double f[F_N]; /* µs per trace */
    uint64_t digest;
} replay_out;

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t fnv(uint64_t h, uint64_t x) { return (h ^ x) * 1099511628211ull; }

static uint64_t trace_start(const rt_sel_trace *t)
{
    int32_t r = rt_sel_trace_root(t);
    return r < 0 ? 0 : t->spans[r].start_ns;
}

/* Traces as read: no template ids on free-text logs, no cached op keys. */
static void reset(rt_sel_trace *all, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (uint32_t l = 0; l < all[i].n_logs; l++)
            if (all[i].logs[l].text)
                all[i].logs[l].template_id = 0;
        for (uint32_t j = 0; j < all[i].n_spans; j++)
            all[i].spans[j].op_key = 0;
    }
}

static int replay(const selector_api *api, rt_sel_trace *all, size_t n, const size_t *bounds,
                  size_t n_windows, double rate, uint64_t *alarms, replay_out *out)
{
    reset(all, n);
    rt_selector *sel = api->create(NULL);
    rt_sel_trace *win = malloc(2 * n * sizeof *win), *held = win ? win + n : NULL;
    bool *flags = malloc(2 * n * sizeof *flags);
    size_t n_held = 0;
    if (!sel || !win || !flags) {
        if (sel)
            api->destroy(sel);
        free(win);
        free(flags);
        return -1;
    }
    double credit = 0, mining = 0, selection = 0;
    uint64_t h = 1469598103934665603ull;
    for (size_t w = 0; w < n_windows; w++) {
        bool last = w + 1 == n_windows;
        size_t m = form_window(api, all, bounds[w], bounds[w + 1], last, win, held, &n_held,
                               flags, flags + n);
        credit += rate * (double)m;
        size_t budget = credit > 0 ? (size_t)floor(credit + 1e-9) : 0;
        size_t n_alarms = rt_sel_error_alarms(win, m, alarms); /* before the clock */
        rt_sel_result res;
        double t0 = cpu_s();
        api->mine(sel, win, m);
        double t1 = cpu_s();
        rt_sel_window sw = {.traces = win, .n = m, .held = held, .n_held = n_held,
                            .budget = budget, .alarmed_groups = alarms, .n_alarmed = n_alarms,
                            .coverage = 1.0, .last = last};
        if (api->select_held ? api->select_held(sel, &sw, &res)
                      : api->select(sel, win, m, budget, alarms, n_alarms, 1.0, &res)) {
            api->destroy(sel);
            free(win);
            free(flags);
            return -1;
        }
        double t2 = cpu_s();
        mining += t1 - t0;
        selection += t2 - t1;
        credit -= (double)(res.budget - res.declined);
        if (res.declined && credit > rate * (double)m + 1.0)
            credit = rate * (double)m + 1.0;
        for (size_t i = 0; i < m; i++) {
            const rt_sel_verdict *v = &res.verdicts[i];
            uint64_t score;
            memcpy(&score, &v->score, sizeof score);
            h = fnv(fnv(fnv(fnv(h, v->pattern), v->group), score), v->chosen);
            for (uint32_t l = 0; l < win[i].n_logs; l++)
                h = fnv(h, win[i].logs[l].template_id);
        }
    }
    rt_sel_stage_times st;
    api->stage_times(sel, &st);
    api->destroy(sel);
    free(win);
    free(flags);
    double per = 1e6 / (double)n;
    *out = (replay_out){.f = {mining * per, st.prepare * per, st.p90 * per, st.encode * per,
                              st.choose * per, selection * per, (mining + selection) * per},
                        .digest = h};
    return 0;
}

/* Window boundaries as eval.c cuts them: 60 s of root start times each. */
static size_t windows(const rt_sel_trace *all, size_t n, size_t *bounds)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint64_t end = trace_start(&all[i]) + 60000000000ull;
        size_t j = i + 1;
        while (j < n && trace_start(&all[j]) < end)
            j++;
        bounds[k++] = i;
        i = j;
    }
    bounds[k] = n;
    return k;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: ab_select DATASET_DIR [ROUNDS] [RATE]\n");
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 8;
    double rate = argc > 3 ? atof(argv[3]) : 0.05;
    char err[512] = "";
    rt_sel_dataset *ds = rt_sel_dataset_read_nezha(argv[1], err, sizeof err);
    if (!ds) {
        fprintf(stderr, "ab_select: %s\n", err);
        return 1;
    }
    size_t n = rt_sel_dataset_count(ds);
    rt_sel_trace *all = rt_sel_dataset_trace(ds, 0);
    size_t *bounds = malloc((n + 1) * sizeof *bounds);
    uint64_t *alarms = malloc((n ? n : 1) * sizeof *alarms);
    if (!bounds || !alarms || rounds < 1) {
        fprintf(stderr, "ab_select: out of memory or no rounds\n");
        return 1;
    }
    size_t n_windows = windows(all, n, bounds);
    double sum[2][F_N] = {{0}}, best[2] = {1e300, 1e300};
    uint64_t digest[2] = {0, 0};
    bool stable = true;
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 2; k++) {
            int b = (r & 1) ? 1 - k : k; /* ABBA: neither build always goes first */
            replay_out o;
            if (replay(&apis[b], all, n, bounds, n_windows, rate, alarms, &o)) {
                fprintf(stderr, "ab_select: %s selector failed\n", apis[b].name);
                return 1;
            }
            for (int f = 0; f < F_N; f++)
                sum[b][f] += o.f[f];
            best[b] = o.f[F_TOTAL] < best[b] ? o.f[F_TOTAL] : best[b];
            stable &= r == 0 || o.digest == digest[b];
            digest[b] = o.digest;
        }
    for (int b = 0; b < 2; b++) {
        const double *s = sum[b];
        printf("bench select_ab rate=%g build=%s rounds=%d us_mining=%.2f us_prepare=%.2f "
               "us_p90=%.2f us_encode=%.2f us_choose=%.2f us_per_trace=%.2f "
               "min_us_per_trace=%.2f digest=%016llx\n",
               rate, apis[b].name, rounds, s[F_MINING] / rounds, s[F_PREPARE] / rounds,
               s[F_P90] / rounds, s[F_ENCODE] / rounds, s[F_CHOOSE] / rounds,
               s[F_TOTAL] / rounds, best[b], (unsigned long long)digest[b]);
    }
    printf("bench select_ab rate=%g ratio=head/base us_per_trace=%.3f us_mining=%.3f "
           "us_selection=%.3f same_output=%s\n",
           rate, sum[1][F_TOTAL] / sum[0][F_TOTAL], sum[1][F_MINING] / sum[0][F_MINING],
           sum[1][F_SELECTION] / sum[0][F_SELECTION],
           digest[0] == digest[1] && stable ? "yes" : "no");
    free(bounds);
    free(alarms);
    rt_sel_dataset_free(ds);
    return 0;
}
