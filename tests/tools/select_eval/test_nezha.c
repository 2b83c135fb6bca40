/* test_nezha.c — the Nezha CSV reader never accepts partial data silently, reads logs
 * as JSON and their levels wherever they are, and the evaluation keeps to its rate.
 *
 * Every dataset is generated here (DIR/trace/HH_MM_trace.csv, DIR/log/HH_MM_log.csv): traces
 * of a gateway root and one service span with one log line each.
 */
#include "dataset_read.h"
#include "select.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/suite.h"
#ifdef HAVE_SELECT_EVAL
#include "cmd_select_eval.h"
#endif

#define BASE_NS 1674981742000000000ull

static char *make_dir(void)
{
    char *d = strdup("/tmp/rt-nezha-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d));
    char sub[600];
    snprintf(sub, sizeof sub, "%s/trace", d);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    snprintf(sub, sizeof sub, "%s/log", d);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    return d;
}

static void remove_dir(char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(dir);
}

static FILE *open_in(const char *dir, const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    return f;
}

/* Cut a file to its first `keep` bytes. */
static void cut_file(const char *dir, const char *name, long keep)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_int_eq(truncate(path, keep), 0);
}

enum log_style {
    LOG_COMPACT,  /* {"log":"HH:MM:SS.mmm LEVEL logger#1 text\n","stream":"stdout"} */
    LOG_SPACED,   /* {"log": "…", "stream": "stdout"} — valid JSON with spaces */
    LOG_SEVERITY, /* {"severity": "ERROR", "log": "text without a level word"} */
    LOG_BRACKET,  /* {"log":"2023-01-29 16:42:22 [ERROR] text"} — level third */
};

/* n traces, one every `gap_s` seconds; trace i is an error trace when i % err_every == 0
 * (err_every 0: never). Two entry APIs. */
static void write_dataset(const char *dir, int n, double gap_s, int err_every,
                          enum log_style style)
{
    FILE *t = open_in(dir, "trace/08_42_trace.csv");
    FILE *l = open_in(dir, "log/08_42_log.csv");
    fputs("TraceID,SpanID,ParentID,PodName,OperationName,StartTimeUnixNano,EndTimeUnixNano,"
          "Duration\n", t);
    fputs("Timestamp,TimeUnixNano,Node,PodName,Container,TraceID,SpanID,Log\n", l);
    for (int i = 0; i < n; i++) {
        unsigned long long s = BASE_NS + (unsigned long long)((double)i * gap_s * 1e9);
        unsigned long long e = s + 2000000 + (unsigned long long)(i % 7) * 100000;
        const char *api = i % 2 ? "/api/v1/orders" : "/api/v1/users";
        fprintf(t, "%032x,%016x,root,ts-gateway-service-6f6cfc45b-h5m2n,/*,%llu,%llu,%llu\n",
                i + 1, 2 * i + 1, s, e, (e - s) / 1000);
        unsigned long long cs = s + 100000, ce = e - 100000;
        fprintf(t, "%032x,%016x,%016x,ts-order-service-5fcd447d84-wxwjd,%s,%llu,%llu,%llu\n",
                i + 1, 2 * i + 2, 2 * i + 1, api, cs, ce, (ce - cs) / 1000);
        bool err = err_every && i % err_every == 0;
        const char *lvl = err ? "ERROR" : "INFO";
        fprintf(l, "2023-01-29T08:42:22.383Z,%llu,1.2.3.4,ts-order-service-5fcd447d84-wxwjd,"
                   "server,%032x,%016x,", cs + 10, i + 1, 2 * i + 2);
        switch (style) {
        case LOG_COMPACT:
            fprintf(l, "\"{\"\"log\"\":\"\"16:42:22.382 %s  o.s.Order#12 order %d done\\n\"\","
                       "\"\"stream\"\":\"\"stdout\"\"}\"\n", lvl, i);
            break;
        case LOG_SPACED:
            fprintf(l, "\"{\"\"log\"\": \"\"16:42:22.382 %s  o.s.Order#12 order %d done\\n\"\", "
                       "\"\"stream\"\": \"\"stdout\"\"}\"\n", lvl, i);
            break;
        case LOG_SEVERITY:
            fprintf(l, "\"{\"\"severity\"\": \"\"%s\"\", \"\"log\"\": \"\"order %d done\"\"}\"\n",
                    err ? "error" : "info", i);
            break;
        case LOG_BRACKET:
            fprintf(l, "\"{\"\"log\"\":\"\"2023-01-29 16:42:22 [%s] order %d done\"\"}\"\n", lvl,
                    i);
            break;
        }
    }
    fclose(t);
    fclose(l);
}

static size_t errors_in(rt_sel_dataset *ds, size_t *logs)
{
    size_t e = 0;
    *logs = 0;
    for (size_t i = 0; i < rt_sel_dataset_count(ds); i++) {
        rt_sel_trace *t = rt_sel_dataset_trace(ds, i);
        for (uint32_t k = 0; k < t->n_logs; k++) {
            e += t->logs[k].level == RT_SEL_LOG_ERROR;
            ++*logs;
        }
    }
    return e;
}

static rt_sel_dataset *read_ok(const char *dir, rt_sel_read_stats *st)
{
    char err[512] = "";
    rt_sel_dataset *ds = rt_sel_dataset_read_nezha(dir, err, sizeof err);
    ck_assert_msg(ds != NULL, "%s", err);
    rt_sel_dataset_read_stats(ds, st);
    return ds;
}

#ifdef HAVE_SELECT_EVAL
static int run_eval(const char *dir, const char *rate, const char *window, bool allow)
{
    char *argv[] = {"select-eval", "--input", (char *)dir, "--rate", (char *)rate, "--window",
                    (char *)window, "--quiet", allow ? "--allow-partial" : NULL, NULL};
    fflush(stdout);
    return cli_cmd_select_eval(allow ? 9 : 8, argv);
}
#endif

START_TEST(complete_dataset_reads_clean)
{
    char *dir = make_dir();
    write_dataset(dir, 40, 1.0, 4, LOG_COMPACT);
    rt_sel_read_stats st;
    rt_sel_dataset *ds = read_ok(dir, &st);
    ck_assert_uint_eq(rt_sel_dataset_count(ds), 40);
    ck_assert_uint_eq(st.span_rows, 80);
    ck_assert_uint_eq(st.log_rows, 40);
    ck_assert_uint_eq(st.span_rows_skipped + st.log_rows_skipped, 0);
    size_t logs, errs = errors_in(ds, &logs);
    ck_assert_uint_eq(logs, 40);
    ck_assert_uint_eq(errs, 10);
    ck_assert_str_eq(rt_sel_dataset_trace(ds, 1)->logs[0].text, "o.s.Order#12 order 1 done");
    rt_sel_dataset_free(ds);
#ifdef HAVE_SELECT_EVAL
    ck_assert_int_eq(run_eval(dir, "10%", "60", false), 0);
#endif
    remove_dir(dir);
}
END_TEST

/* A trace CSV cut inside a row, and one cut at 300 bytes: counted, and the evaluation
 * fails unless --allow-partial. */
START_TEST(cut_trace_file_is_counted)
{
    for (int variant = 0; variant < 3; variant++) {
        char *dir = make_dir();
        write_dataset(dir, 40, 1.0, 4, LOG_COMPACT);
        char path[600];
        snprintf(path, sizeof path, "%s/trace/08_42_trace.csv", dir);
        struct stat sb;
        ck_assert_int_eq(stat(path, &sb), 0);
        /* 0: cut in the middle of the file, inside the last field (Duration) of a row;
         * 1: at 300 bytes; 2: just before the final newline minus two digits */
        long keep = variant == 0 ? sb.st_size / 2 : variant == 1 ? 300 : sb.st_size - 3;
        if (variant == 0) {
            /* move the cut back to just after the first digit of a Duration */
            FILE *f = fopen(path, "rb");
            char *buf = malloc((size_t)sb.st_size);
            ck_assert_uint_eq(fread(buf, 1, (size_t)sb.st_size, f), (size_t)sb.st_size);
            fclose(f);
            while (keep > 0 && buf[keep - 1] != '\n')
                keep--;
            keep -= 3; /* row ends "…,NNNN\n": drop the newline and two digits */
            free(buf);
        }
        cut_file(dir, "trace/08_42_trace.csv", keep);
        rt_sel_read_stats st;
        rt_sel_dataset *ds = read_ok(dir, &st);
        ck_assert_msg(st.span_rows_skipped >= 1, "variant %d: cut row not counted", variant);
        ck_assert_ptr_nonnull(strstr(st.first_problem, "08_42_trace.csv"));
        rt_sel_dataset_free(ds);
#ifdef HAVE_SELECT_EVAL
        ck_assert_int_ne(run_eval(dir, "10%", "60", false), 0);
        ck_assert_int_eq(run_eval(dir, "10%", "60", true), 0);
#endif
        remove_dir(dir);
    }
}
END_TEST

START_TEST(cut_log_file_is_counted)
{
    char *dir = make_dir();
    write_dataset(dir, 40, 1.0, 4, LOG_COMPACT);
    char path[600];
    snprintf(path, sizeof path, "%s/log/08_42_log.csv", dir);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    cut_file(dir, "log/08_42_log.csv", sb.st_size - 40); /* inside the last quoted field */
    rt_sel_read_stats st;
    rt_sel_dataset *ds = read_ok(dir, &st);
    ck_assert_uint_eq(st.log_rows_skipped, 1);
    ck_assert_ptr_nonnull(strstr(st.first_problem, "unterminated"));
    rt_sel_dataset_free(ds);
#ifdef HAVE_SELECT_EVAL
    ck_assert_int_ne(run_eval(dir, "10%", "60", false), 0);
#endif
    remove_dir(dir);
}
END_TEST

/* An unterminated quote in the middle of a file swallows the rows after it: every one
 * of them is counted, and a quoted field followed by junk is malformed. */
START_TEST(unterminated_quote_mid_file)
{
    char *dir = make_dir();
    write_dataset(dir, 10, 1.0, 0, LOG_COMPACT);
    FILE *l = open_in(dir, "log/08_43_log.csv");
    fputs("Timestamp,TimeUnixNano,Node,PodName,Container,TraceID,SpanID,Log\n"
          "2023-01-29T08:42:22Z,1674981742000000000,n,p-a-b,c,00000000000000000000000000000001,"
          "0000000000000002,\"{\"\"log\"\":\"\"x INFO a\"\"}\n"
          "2023-01-29T08:42:22Z,1674981742000000000,n,p-a-b,c,00000000000000000000000000000001,"
          "0000000000000002,\"{\"\"log\"\":\"\"x INFO b\"\"}\"\n"
          "2023-01-29T08:42:22Z,1674981742000000000,n,p-a-b,c,00000000000000000000000000000001,"
          "0000000000000002,\"{\"\"log\"\":\"\"x INFO c\"\"}\"junk\n",
          l);
    fclose(l);
    rt_sel_read_stats st;
    rt_sel_dataset *ds = read_ok(dir, &st);
    ck_assert_uint_eq(st.log_rows, 13);
    ck_assert_uint_eq(st.log_rows_skipped, 3);
    rt_sel_dataset_free(ds);
    remove_dir(dir);
}
END_TEST

/* A multi-line quoted field is legal CSV (here JSON whitespace) and is read. */
START_TEST(multiline_quoted_field)
{
    char *dir = make_dir();
    write_dataset(dir, 10, 1.0, 0, LOG_COMPACT);
    FILE *l = open_in(dir, "log/08_43_log.csv");
    fputs("Timestamp,TimeUnixNano,Node,PodName,Container,TraceID,SpanID,Log\n"
          "2023-01-29T08:42:22Z,1674981742000000500,n,p-a-b,c,00000000000000000000000000000001,"
          "0000000000000002,\"{\"\"log\"\":\"\"16:42:22.382 WARN stack\"\",\n"
          "  \"\"stream\"\": \"\"stdout\"\"}\"\n",
          l);
    fclose(l);
    rt_sel_read_stats st;
    rt_sel_dataset *ds = read_ok(dir, &st);
    ck_assert_uint_eq(st.log_rows, 11);
    ck_assert_uint_eq(st.log_rows_skipped, 0);
    size_t logs;
    errors_in(ds, &logs);
    ck_assert_uint_eq(logs, 11);
    rt_sel_dataset_free(ds);
    remove_dir(dir);
}
END_TEST

/* {"log": "…"} with spaces is the same JSON as {"log":"…"}. */
START_TEST(json_log_with_spaces)
{
    char *dir = make_dir();
    write_dataset(dir, 40, 1.0, 4, LOG_SPACED);
    rt_sel_read_stats st;
    rt_sel_dataset *ds = read_ok(dir, &st);
    size_t logs, errs = errors_in(ds, &logs);
    ck_assert_uint_eq(logs, 40);
    ck_assert_uint_eq(errs, 10);
    ck_assert_uint_eq(st.log_rows_skipped, 0);
    ck_assert_str_eq(rt_sel_dataset_trace(ds, 1)->logs[0].text, "o.s.Order#12 order 1 done");
    rt_sel_dataset_free(ds);
    remove_dir(dir);
}
END_TEST

START_TEST(level_as_field_or_elsewhere)
{
    for (int style = LOG_SEVERITY; style <= LOG_BRACKET; style++) {
        char *dir = make_dir();
        write_dataset(dir, 40, 1.0, 4, (enum log_style)style);
        rt_sel_read_stats st;
        rt_sel_dataset *ds = read_ok(dir, &st);
        size_t logs, errs = errors_in(ds, &logs);
        ck_assert_uint_eq(logs, 40);
        ck_assert_msg(errs == 10, "style %d: %zu ERROR logs, want 10", style, errs);
        ck_assert_str_eq(rt_sel_dataset_trace(ds, 1)->logs[0].text, "order 1 done");
        rt_sel_dataset_free(ds);
        remove_dir(dir);
    }
}
END_TEST

/* A negative (overflowed) TimeUnixNano falls back to the Timestamp column. */
START_TEST(timestamp_fallback)
{
    char *dir = make_dir();
    write_dataset(dir, 4, 1.0, 0, LOG_COMPACT);
    FILE *l = open_in(dir, "log/08_43_log.csv");
    fputs("Timestamp,TimeUnixNano,Node,PodName,Container,TraceID,SpanID,Log\n"
          "2023-01-29T08:42:22.5,-6795364578871345152,n,p-a-b,c,"
          "00000000000000000000000000000001,0000000000000002,"
          "\"{\"\"log\"\":\"\"16:42:22.382 ERROR boom\"\"}\"\n",
          l);
    fclose(l);
    rt_sel_read_stats st;
    rt_sel_dataset *ds = read_ok(dir, &st);
    ck_assert_uint_eq(st.log_rows_skipped, 0);
    rt_sel_trace *t = rt_sel_dataset_trace(ds, 0);
    ck_assert_uint_eq(t->n_logs, 2);
    bool found = false;
    for (uint32_t k = 0; k < t->n_logs; k++)
        if (!strcmp(t->logs[k].text, "boom")) {
            found = true;
            ck_assert_uint_eq(t->logs[k].ts_ns, 1674981742500000000ull);
            ck_assert_uint_eq(t->logs[k].level, RT_SEL_LOG_ERROR);
        }
    ck_assert(found);
    rt_sel_dataset_free(ds);
    remove_dir(dir);
}
END_TEST

/* Hour windows over 84 minutes: the short last window under an error alarm is not a
 * traffic drop, and the kept share stays within one trace per window of the rate. */
START_TEST(rate_holds_with_long_windows)
{
    char *dir = make_dir();
    write_dataset(dir, 840, 6.0, 3, LOG_COMPACT); /* 84 minutes */
    rt_sel_read_stats st;
    rt_sel_dataset *ds = read_ok(dir, &st);
    const double windows[] = {60, 600, 3600};
    for (size_t w = 0; w < 3; w++) {
        rt_sel_eval_options opt = {.rate = 0.1, .window_s = windows[w], .seed = 7,
                                   .alarm_on_errors = true};
        rt_sel_eval_report rep;
        char err[256];
        ck_assert_int_eq(rt_sel_eval_run(ds, &opt, &rep, err, sizeof err), 0);
        double limit = 0.1 * 840 + (double)rep.windows;
        ck_assert_msg((double)rep.gleaner.kept <= limit, "window %g: kept %zu > %g",
                      windows[w], rep.gleaner.kept, limit);
        ck_assert_msg((double)rep.random.kept <= limit, "window %g: random kept %zu > %g",
                      windows[w], rep.random.kept, limit);
        /* the original algorithm, in batches of 4000 (one here), at the same rate */
        ck_assert_uint_eq(rep.batches, 1);
        ck_assert_uint_eq(rep.original.kept, 84);
        ck_assert_uint_ge(rep.gleaner.kept, 83);
    }
    /* keeping everything, every sampler covers every paper pattern and API */
    rt_sel_eval_options all = {.rate = 1.0, .window_s = 60, .seed = 7, .original_batch = 100};
    rt_sel_eval_report rep;
    char err[256];
    ck_assert_int_eq(rt_sel_eval_run(ds, &all, &rep, err, sizeof err), 0);
    ck_assert_uint_eq(rep.batches, 9);
    const rt_sel_paper_metrics *pm[] = {&rep.paper_gleaner, &rep.paper_original, &rep.paper_random};
    for (int i = 0; i < 3; i++) {
        ck_assert_double_eq(pm[i]->pattern_coverage, 1.0);
        ck_assert_double_eq(pm[i]->api_coverage, 1.0);
        ck_assert_uint_eq(pm[i]->patterns_kept, pm[i]->patterns_all);
    }
    rt_sel_dataset_free(ds);
    remove_dir(dir);
}
END_TEST

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    ck_assert_int_ge(size, 0);
    rewind(f);
    char *buf = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    buf[size] = '\0';
    *n = (size_t)size;
    return buf;
}

static void spill(const char *path, const char *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
}

/* Complete data rows (after the header) in the first `keep` bytes: a row counts when
 * its newline is kept, or when the cut falls exactly before that newline. */
static size_t rows_in_prefix(const char *buf, size_t size, size_t keep)
{
    size_t lines = 0;
    for (size_t i = 0; i < keep; i++)
        lines += buf[i] == '\n';
    if (keep < size && buf[keep] == '\n' && keep > 0 && buf[keep - 1] != '\n')
        lines++;
    return lines ? lines - 1 : 0;
}

/* Every trace file and every log file cut at every byte: either the cut falls between
 * rows (header complete) and exactly the rows before it are read with nothing flagged,
 * or the reader flags it (a skipped row or a bad file) and select-eval would refuse it.
 * An intact copy of the file sits beside it so the dataset never becomes empty. */
START_TEST(cut_at_every_byte)
{
    for (int log = 0; log < 2; log++) {
        char *dir = make_dir();
        write_dataset(dir, 6, 1.0, 2, LOG_SPACED);
        const char *name = log ? "log/08_42_log.csv" : "trace/08_42_trace.csv";
        char path[600], twin[600];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        snprintf(twin, sizeof twin, "%s/%s", dir, log ? "log/08_41_log.csv" : "trace/08_41_trace.csv");
        size_t size;
        char *buf = slurp(path, &size);
        spill(twin, buf, size);
        size_t header = (size_t)(strchr(buf, '\n') - buf);
        size_t full_rows = rows_in_prefix(buf, size, size);
        ck_assert_uint_eq(full_rows, log ? 6 : 12);
        size_t flagged = 0;
        for (size_t keep = 0; keep <= size; keep++) {
            spill(path, buf, keep);
            char err[512] = "";
            rt_sel_dataset *ds = rt_sel_dataset_read_nezha(dir, err, sizeof err);
            ck_assert_msg(ds != NULL, "%s cut at %zu: %s", name, keep, err);
            rt_sel_read_stats st;
            rt_sel_dataset_read_stats(ds, &st);
            bool between_rows = keep >= header &&
                                (keep == size || buf[keep] == '\n' || buf[keep - 1] == '\n');
            size_t rows = log ? st.log_rows : st.span_rows;
            size_t skipped = log ? st.log_rows_skipped : st.span_rows_skipped;
            ck_assert_msg(st.files == 3, "%s cut at %zu: %zu files", name, keep, st.files);
            if (between_rows) {
                ck_assert_msg(skipped == 0 && st.bad_files == 0,
                              "%s cut between rows at %zu flagged: %s", name, keep,
                              st.first_problem);
                ck_assert_uint_eq(rows, full_rows + rows_in_prefix(buf, size, keep));
            } else {
                ck_assert_msg(skipped + st.bad_files >= 1, "%s cut at byte %zu of %zu accepted "
                              "silently (ends \"%.24s\")", name, keep, size,
                              buf + (keep > 24 ? keep - 24 : 0));
                ck_assert_ptr_nonnull(strstr(st.first_problem, name));
                flagged++;
            }
            rt_sel_dataset_free(ds);
        }
        ck_assert_uint_gt(flagged, size / 2);
#ifdef HAVE_SELECT_EVAL
        spill(path, buf, header / 2); /* cut inside the header */
        ck_assert_int_ne(run_eval(dir, "10%", "60", false), 0);
        ck_assert_int_eq(run_eval(dir, "10%", "60", true), 0);
        spill(path, buf, 0); /* empty */
        ck_assert_int_ne(run_eval(dir, "10%", "60", false), 0);
#endif
        free(buf);
        remove_dir(dir);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("select_nezha");
    TCase *tc = tcase_create("nezha");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, complete_dataset_reads_clean);
    tcase_add_test(tc, cut_trace_file_is_counted);
    tcase_add_test(tc, cut_log_file_is_counted);
    tcase_add_test(tc, cut_at_every_byte);
    tcase_add_test(tc, unterminated_quote_mid_file);
    tcase_add_test(tc, multiline_quoted_field);
    tcase_add_test(tc, json_log_with_spaces);
    tcase_add_test(tc, level_as_field_or_elsewhere);
    tcase_add_test(tc, timestamp_fallback);
    tcase_add_test(tc, rate_holds_with_long_windows);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
