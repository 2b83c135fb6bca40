/* test_golden.c — the selector's output on a fixed fixture, before and after any change.
 *
 * tests/select/fixture/ is a small synthetic Nezha-format dataset (gen_fixture.py). The
 * suite replays it through the selector the way select-eval does (windows of trace
 * time, rate credit, groups with an ERROR alarmed) at several rates and window lengths,
 * and compares with fixture/kept.txt: the kept trace ids of every run, a digest of all
 * verdicts (pattern, group, score, chosen) and a digest of the Drain template ids
 * assigned to every log. A speed change must leave all of it equal. After an intended
 * change of selection behaviour, regenerate the file from the repository root with
 * RETRACE_GOLDEN_WRITE=$PWD/tests/select/fixture/kept.txt build/tests/select/test_select_golden
 * and say why in the commit.
 */
#include "dataset_read.h" /* tools/select_eval/ */
#include "select.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FIXTURE_DIR
#error FIXTURE_DIR must name tests/select/fixture
#endif

static uint64_t fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
    return h;
}

static uint64_t start_of(const rt_sel_trace *t)
{
    int32_t r = rt_sel_trace_root(t);
    return r < 0 ? 0 : t->spans[r].start_ns;
}

static bool has_error(const rt_sel_trace *t)
{
    for (uint32_t l = 0; l < t->n_logs; l++)
        if (t->logs[l].level >= RT_SEL_LOG_ERROR)
            return true;
    return false;
}

/* One replay: writes "kept RATE WINDOW ID" lines and the two digests to f. */
static void replay(rt_sel_dataset *ds, double rate, double window_s, FILE *f)
{
    size_t n = rt_sel_dataset_count(ds);
    rt_sel_trace *all = rt_sel_dataset_trace(ds, 0);
    for (size_t i = 0; i < n; i++)
        for (uint32_t l = 0; l < all[i].n_logs; l++)
            if (all[i].logs[l].text)
                all[i].logs[l].template_id = 0;
    rt_selector *s = rt_sel_create(NULL);
    ck_assert_ptr_nonnull(s);
    uint64_t *alarms = malloc(n * sizeof *alarms);
    ck_assert_ptr_nonnull(alarms);
    uint64_t width = (uint64_t)(window_s * 1e9), verdicts = 14695981039346656037ull;
    double credit = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && start_of(&all[j]) < start_of(&all[i]) + width)
            j++;
        double cov = 1.0;
        if (j == n) {
            double span = (double)(start_of(&all[j - 1]) - start_of(&all[i])) + 1e9;
            cov = span < (double)width ? span / (double)width : 1.0;
        }
        size_t na = 0;
        for (size_t k = i; k < j; k++) {
            if (!has_error(&all[k]))
                continue;
            uint64_t g = rt_sel_trace_group(&all[k]);
            bool seen = false;
            for (size_t a = 0; a < na && !seen; a++)
                seen = alarms[a] == g;
            if (!seen)
                alarms[na++] = g;
        }
        credit += rate * (double)(j - i);
        size_t budget = credit > 0 ? (size_t)floor(credit + 1e-9) : 0;
        rt_sel_result res;
        ck_assert_int_eq(rt_sel_select_window_part(s, &all[i], j - i, budget, alarms, na, cov, &res), 0);
        credit -= (double)res.budget;
        for (size_t k = 0; k < j - i; k++) {
            const rt_sel_verdict *v = &res.verdicts[k];
            verdicts = fnv(fnv(fnv(verdicts, v->pattern), v->group), (uint64_t)llround(v->score * 1e6));
            verdicts = fnv(verdicts, v->chosen);
            if (v->chosen)
                fprintf(f, "kept %g %g %016llx%016llx\n", rate, window_s,
                        (unsigned long long)all[i + k].id_hi, (unsigned long long)all[i + k].id_lo);
        }
        i = j;
    }
    uint64_t templates = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++)
        for (uint32_t l = 0; l < all[i].n_logs; l++)
            templates = fnv(templates, all[i].logs[l].template_id);
    fprintf(f, "verdicts %g %g %016llx\n", rate, window_s, (unsigned long long)verdicts);
    fprintf(f, "templates %g %g %016llx\n", rate, window_s, (unsigned long long)templates);
    free(alarms);
    rt_sel_destroy(s);
}

START_TEST(kept_traces_match_the_recorded_run)
{
    char err[512] = "";
    rt_sel_dataset *ds = rt_sel_dataset_read_nezha(FIXTURE_DIR, err, sizeof err);
    ck_assert_msg(ds != NULL, "%s", err);
    ck_assert_uint_gt(rt_sel_dataset_count(ds), 300);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    const double runs[][2] = {{0.02, 60}, {0.05, 60}, {0.1, 60}, {0.2, 60}, {0.1, 20}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++)
        replay(ds, runs[r][0], runs[r][1], f);
    fclose(f);
    const char *w = getenv("RETRACE_GOLDEN_WRITE");
    if (w && *w) {
        FILE *o = fopen(w, "w");
        ck_assert_ptr_nonnull(o);
        fputs(text, o);
        fclose(o);
    } else {
        FILE *e = fopen(FIXTURE_DIR "/kept.txt", "r");
        ck_assert_msg(e != NULL, "cannot open %s/kept.txt", FIXTURE_DIR);
        char line[256];
        const char *p = text;
        size_t lineno = 0;
        while (fgets(line, sizeof line, e)) {
            lineno++;
            const char *nl = strchr(p, '\n');
            ck_assert_msg(nl != NULL, "line %zu: output ends early, expected %s", lineno, line);
            size_t k = (size_t)(nl - p) + 1;
            ck_assert_msg(strlen(line) == k && memcmp(line, p, k) == 0,
                          "line %zu: got %.*s, expected %s", lineno, (int)k - 1, p, line);
            p = nl + 1;
        }
        fclose(e);
        ck_assert_msg(*p == '\0', "output has more lines than kept.txt: %.60s", p);
    }
    free(text);
    rt_sel_dataset_free(ds);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("select_golden");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, kept_traces_match_the_recorded_run);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
