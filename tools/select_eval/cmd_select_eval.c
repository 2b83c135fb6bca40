/* cmd_select_eval.c — argument parsing and reporting for `retrace select-eval`.
 *
 * Parses flags by hand (getopt_long would keep global state between calls from the
 * dispatcher), loads the dataset with the select/ readers, runs rt_sel_eval_run, which
 * replays retrace's selector, the original algorithm and random sampling at the same
 * budget in one run, and prints one metrics row per sampler plus the ratios.
 */
#include "cmd_select_eval.h"

#include "dataset_read.h"
#include "select.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct args {
    const char *input;
    const char *format;
    double rate;
    enum rt_sel_sampler sampler;
    double window_s;
    unsigned long long seed;
    bool alarm_on_errors;
    bool quiet;
    bool help;
    bool allow_partial;
    const char *metrics; /* retrace, paper or both */
    size_t batch;        /* the original algorithm's batch, 0 = default */
    size_t draws;        /* random draws averaged */
} args;

static void usage(FILE *out)
{
    fputs("usage: retrace select-eval --input DIR --rate R [options]\n"
          "\n"
          "Replay a trace dataset in time order through retrace's selector (gleaner), the\n"
          "original Gleaner algorithm reimplemented from its paper (original, batches of\n"
          "4000 traces) and random sampling at the same budget, and print the selection\n"
          "quality of all three (the chosen sampler first) with the ratios.\n"
          "\n"
          "  --input DIR            dataset directory (nezha-csv: DIR/trace/*.csv, DIR/log/*.csv)\n"
          "  --format FMT           nezha-csv (default) or otlp-json\n"
          "  --rate R               share of traces to keep, 0 < R <= 1 (\"0.01\" or \"1%\")\n"
          "  --sampler S            gleaner (default), original or random: printed first\n"
          "  --batch N              traces per batch of the original algorithm (default 4000)\n"
          "  --window SECONDS       selection window in trace time (default 60)\n"
          "  --alarms MODE          errors (default: a root API with an ERROR log in the\n"
          "                         window is alarmed, like a fired exception trigger) or none\n"
          "  --seed N               seed of the random baseline (default 42)\n"
          "  --random-draws N       random samplers averaged, 1..64 (default 16): one\n"
          "                         draw's error share varies by a fifth between seeds\n"
          "  --metrics SET          retrace, paper (the Gleaner paper's definitions, see\n"
          "                         docs/selection.md) or both (default)\n"
          "  --allow-partial        evaluate even when rows had to be skipped (they are\n"
          "                         always counted and reported; without this flag any\n"
          "                         skipped row fails the run)\n"
          "  --quiet                no progress line on stderr\n"
          "  --help                 this text\n"
          "\n"
          "Metrics: api_cov, path_cov, pattern_cov (share of entry APIs / call paths /\n"
          "patterns of the dataset that were kept), entropy (bits, over kept patterns),\n"
          "anomalous (kept with score > 0), rare (kept whose pattern is among the rarest\n"
          "5 %), bcr (unique patterns / kept), actual_rate, us_per_trace (sampler runtime\n"
          "per input trace; us_mining = of which log-template mining).\n"
          "Paper metrics: p_pattern_cov, p_entropy over the paper's patterns (event pairs of\n"
          "operations, Drain template ids and per-minute p90 latency tiers), rare (kept of an\n"
          "entry API under 5 %% of traces), rare_cov, errors (kept with an ERROR log or a\n"
          "failed span), api_cov; us_per_trace repeated.\n",
          out);
}

static int bad(const char *fmt, const char *what)
{
    fputs("retrace select-eval: ", stderr);
    fprintf(stderr, fmt, what);
    fputs("\n(try --help)\n", stderr);
    return 2;
}

static bool parse_double(const char *s, double *out, bool allow_percent)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno)
        return false;
    if (allow_percent && *end == '%') {
        v /= 100.0;
        end++;
    }
    if (*end || !isfinite(v))
        return false;
    *out = v;
    return true;
}

/* Value of a flag given as "--flag value" or "--flag=value". */
static const char *flag_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0')
        return NULL;
    if (*i + 1 >= argc)
        return "";
    return argv[++*i];
}

static int parse_one(int argc, char **argv, int *i, args *a)
{
    const char *v;
    if (!strcmp(argv[*i], "--help") || !strcmp(argv[*i], "-h"))
        a->help = true;
    else if (!strcmp(argv[*i], "--quiet"))
        a->quiet = true;
    else if (!strcmp(argv[*i], "--allow-partial"))
        a->allow_partial = true;
    else if ((v = flag_value(argc, argv, i, "--metrics"))) {
        if (strcmp(v, "retrace") && strcmp(v, "paper") && strcmp(v, "both"))
            return bad("unknown --metrics '%s' (retrace, paper or both)", v);
        a->metrics = v;
    } else if ((v = flag_value(argc, argv, i, "--input")))
        a->input = v;
    else if ((v = flag_value(argc, argv, i, "--format"))) {
        if (strcmp(v, "nezha-csv") && strcmp(v, "otlp-json"))
            return bad("unknown --format '%s' (nezha-csv or otlp-json)", v);
        a->format = v;
    } else if ((v = flag_value(argc, argv, i, "--rate"))) {
        if (!parse_double(v, &a->rate, true) || !(a->rate > 0) || a->rate > 1)
            return bad("--rate '%s' must be a number in (0, 1] or a percentage", v);
    } else if ((v = flag_value(argc, argv, i, "--sampler"))) {
        if (!strcmp(v, "gleaner"))
            a->sampler = RT_SEL_SAMPLER_GLEANER;
        else if (!strcmp(v, "random"))
            a->sampler = RT_SEL_SAMPLER_RANDOM;
        else if (!strcmp(v, "original"))
            a->sampler = RT_SEL_SAMPLER_ORIGINAL;
        else
            return bad("unknown --sampler '%s' (gleaner, original or random)", v);
    } else if ((v = flag_value(argc, argv, i, "--batch"))) {
        char *end;
        errno = 0;
        unsigned long long b = strtoull(v, &end, 10);
        if (!*v || *end || errno || b == 0 || b > 10000000)
            return bad("--batch '%s' must be a positive number of traces", v);
        a->batch = (size_t)b;
    } else if ((v = flag_value(argc, argv, i, "--window"))) {
        if (!parse_double(v, &a->window_s, false) || !(a->window_s > 0) || a->window_s > 1e9)
            return bad("--window '%s' must be a positive number of seconds", v);
    } else if ((v = flag_value(argc, argv, i, "--alarms"))) {
        if (strcmp(v, "errors") && strcmp(v, "none"))
            return bad("unknown --alarms '%s' (errors or none)", v);
        a->alarm_on_errors = !strcmp(v, "errors");
    } else if ((v = flag_value(argc, argv, i, "--random-draws"))) {
        char *end;
        errno = 0;
        unsigned long d = strtoul(v, &end, 10);
        _Static_assert(RT_SEL_RANDOM_DRAWS_MAX == 64, "the message says 64");
        if (!*v || *end || errno || d < 1 || d > RT_SEL_RANDOM_DRAWS_MAX)
            return bad("--random-draws '%s' must be a whole number from 1 to 64", v);
        a->draws = d;
    } else if ((v = flag_value(argc, argv, i, "--seed"))) {
        char *end;
        errno = 0;
        a->seed = strtoull(v, &end, 10);
        if (!*v || *end || errno)
            return bad("--seed '%s' must be an unsigned integer", v);
    } else
        return bad("unknown argument '%s'", argv[*i]);
    return 0;
}

static int parse_args(int argc, char **argv, args *a)
{
    *a = (args){.format = "nezha-csv", .metrics = "both", .rate = -1, .window_s = 60, .seed = 42,
                .alarm_on_errors = true, .draws = 16};
    for (int i = 1; i < argc; i++) {
        int rc = parse_one(argc, argv, &i, a);
        if (rc)
            return rc;
    }
    if (a->help)
        return 0;
    if (!a->input || !*a->input)
        return bad("%s", "--input DIR is required");
    if (a->rate < 0)
        return bad("%s", "--rate R is required");
    struct stat st;
    if (stat(a->input, &st) != 0 || !S_ISDIR(st.st_mode))
        return bad("--input '%s' is not a readable directory", a->input);
    return 0;
}

static void print_row(const char *name, const rt_sel_metrics *m)
{
    printf("%-8s %7.3f %8.3f %11.4f %7.3f %9.3f %6.3f %6.3f %11.4f %12.2f %9.2f %6zu\n", name,
           m->api_coverage, m->path_coverage, m->pattern_coverage, m->entropy, m->anomalous,
           m->rare, m->bcr, m->actual_rate, m->us_per_trace, m->us_mining, m->kept);
}

static double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

static void print_paper_row(const char *name, const rt_sel_paper_metrics *m, double us, size_t kept)
{
    printf("%-8s %13.4f %9.3f %6.3f %8.3f %6.3f %7.3f %13zu %12.2f %6zu\n", name,
           m->pattern_coverage, m->entropy, m->rare, m->rare_coverage, m->errors, m->api_coverage,
           m->patterns_kept, us, kept);
}

static const char *sampler_name[] = {"gleaner", "random", "original"};

/* The three samplers in print order: the chosen one first. */
static void print_order(enum rt_sel_sampler first, enum rt_sel_sampler order[3])
{
    static const enum rt_sel_sampler all[] = {RT_SEL_SAMPLER_GLEANER, RT_SEL_SAMPLER_ORIGINAL,
                                              RT_SEL_SAMPLER_RANDOM};
    order[0] = first;
    for (size_t i = 0, k = 1; i < 3; i++)
        if (all[i] != first)
            order[k++] = all[i];
}

static const rt_sel_metrics *metrics_of(const rt_sel_eval_report *rep, enum rt_sel_sampler s)
{
    return s == RT_SEL_SAMPLER_GLEANER ? &rep->gleaner
           : s == RT_SEL_SAMPLER_ORIGINAL ? &rep->original : &rep->random;
}

static const rt_sel_paper_metrics *paper_of(const rt_sel_eval_report *rep, enum rt_sel_sampler s)
{
    return s == RT_SEL_SAMPLER_GLEANER ? &rep->paper_gleaner
           : s == RT_SEL_SAMPLER_ORIGINAL ? &rep->paper_original : &rep->paper_random;
}

static void print_ratio(const char *what, const rt_sel_metrics *g, const rt_sel_metrics *r)
{
    printf("%-8s %7.2f %8.2f %11.2f %7.2f %9.2f %6.2f %6.2f   (gleaner / %s)\n", "ratio",
           ratio(g->api_coverage, r->api_coverage), ratio(g->path_coverage, r->path_coverage),
           ratio(g->pattern_coverage, r->pattern_coverage), ratio(g->entropy, r->entropy),
           ratio(g->anomalous, r->anomalous), ratio(g->rare, r->rare), ratio(g->bcr, r->bcr),
           what);
}

static void print_paper_ratio(const char *what, const rt_sel_paper_metrics *g,
                              const rt_sel_paper_metrics *r)
{
    printf("%-8s %13.2f %9.2f %6.2f %8.2f %6.2f %7.2f   (gleaner / %s)\n", "ratio",
           ratio(g->pattern_coverage, r->pattern_coverage), ratio(g->entropy, r->entropy),
           ratio(g->rare, r->rare), ratio(g->rare_coverage, r->rare_coverage),
           ratio(g->errors, r->errors), ratio(g->api_coverage, r->api_coverage), what);
}

static void print_report(const args *a, rt_sel_dataset *ds, const rt_sel_eval_report *rep)
{
    printf("select-eval input=%s format=%s traces=%zu spans=%zu logs=%zu rate=%g window=%gs "
           "windows=%zu original_batches=%zu alarms=%s\n",
           a->input, a->format, rt_sel_dataset_count(ds), rt_sel_dataset_spans(ds),
           rt_sel_dataset_logs(ds), a->rate, a->window_s, rep->windows, rep->batches,
           a->alarm_on_errors ? "errors" : "none");
    enum rt_sel_sampler order[3];
    print_order(a->sampler, order);
    if (strcmp(a->metrics, "paper")) {
        printf("%-8s %7s %8s %11s %7s %9s %6s %6s %11s %12s %9s %6s\n", "sampler", "api_cov",
               "path_cov", "pattern_cov", "entropy", "anomalous", "rare", "bcr", "actual_rate",
               "us_per_trace", "us_mining", "kept");
        for (int i = 0; i < 3; i++)
            print_row(sampler_name[order[i]], metrics_of(rep, order[i]));
        print_ratio("random", &rep->gleaner, &rep->random);
        print_ratio("original", &rep->gleaner, &rep->original);
    }
    if (strcmp(a->metrics, "retrace")) {
        printf("paper metrics (patterns in the dataset: %zu)\n", rep->paper_gleaner.patterns_all);
        printf("%-8s %13s %9s %6s %8s %6s %7s %13s %12s %6s\n", "sampler", "p_pattern_cov",
               "p_entropy", "rare", "rare_cov", "errors", "api_cov", "patterns_kept",
               "us_per_trace", "kept");
        for (int i = 0; i < 3; i++) {
            const rt_sel_metrics *m = metrics_of(rep, order[i]);
            print_paper_row(sampler_name[order[i]], paper_of(rep, order[i]), m->us_per_trace,
                            m->kept);
        }
        printf("random: the mean of %zu draws; lowest-highest p_pattern_cov %.4f-%.4f, "
               "errors %.3f-%.3f\n", rep->random_draws, rep->paper_random_lo.pattern_coverage,
               rep->paper_random_hi.pattern_coverage, rep->paper_random_lo.errors,
               rep->paper_random_hi.errors);
        print_paper_ratio("random", &rep->paper_gleaner, &rep->paper_random);
        print_paper_ratio("original", &rep->paper_gleaner, &rep->paper_original);
    }
}

int cli_cmd_select_eval(int argc, char **argv)
{
    args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
    if (a.help) {
        usage(stdout);
        return 0;
    }
    char err[512] = "";
    if (!a.quiet)
        fprintf(stderr, "select-eval: reading %s (%s)\n", a.input, a.format);
    rt_sel_dataset *ds = !strcmp(a.format, "otlp-json")
                             ? rt_sel_dataset_read_otlp_json(a.input, err, sizeof err)
                             : rt_sel_dataset_read_nezha(a.input, err, sizeof err);
    if (!ds) {
        fprintf(stderr, "retrace select-eval: %s\n", err);
        return 1;
    }
    rt_sel_read_stats st;
    rt_sel_dataset_read_stats(ds, &st);
    if (st.span_rows_skipped || st.log_rows_skipped || st.bad_files) {
        fprintf(stderr,
                "retrace select-eval: %s: skipped %zu of %zu trace rows and %zu of %zu log rows, "
                "%zu of %zu files empty or without their header (first: %s)\n",
                a.allow_partial ? "warning" : "error", st.span_rows_skipped, st.span_rows,
                st.log_rows_skipped, st.log_rows, st.bad_files, st.files, st.first_problem);
        if (!a.allow_partial) {
            fputs("retrace select-eval: refusing to evaluate a partial dataset "
                  "(--allow-partial to accept it)\n", stderr);
            rt_sel_dataset_free(ds);
            return 1;
        }
    }
    rt_sel_eval_options opt = {.rate = a.rate, .window_s = a.window_s, .seed = a.seed,
                               .alarm_on_errors = a.alarm_on_errors, .progress = !a.quiet,
                               .original_batch = a.batch, .random_draws = a.draws};
    rt_sel_eval_report rep;
    if (rt_sel_eval_run(ds, &opt, &rep, err, sizeof err)) {
        fprintf(stderr, "retrace select-eval: %s\n", err);
        rt_sel_dataset_free(ds);
        return 1;
    }
    print_report(&a, ds, &rep);
    rt_sel_dataset_free(ds);
    return 0;
}
