/* test_otlp.c — the OTLP/JSON dataset reader and the strict JSON parser under it.
 *
 * Generated directories with known traces (a pretty document in a subdirectory, a
 * JSON-lines file, a file in the layout `retrace export --format otlp-json` writes),
 * malformed inputs that must fail with the file name and byte offset, random and
 * mutated bytes that must never crash, and `retrace select-eval --format otlp-json`
 * on a generated dataset.
 */
#include "dataset_read.h"
#include "select.h"
#include "json_internal.h"

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

#define T1 "0af7651916cd43dd8448eb211c80319c"
#define T2 "00000000000000000000000000000002"
#define T3 "4bf92f3577b34da6a3ce929d0e0e4736"

static char *make_dir(void)
{
    char *d = strdup("/tmp/rt-otlp-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d));
    return d;
}

static void write_file(const char *dir, const char *name, const char *text, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    fclose(f);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    write_file(dir, name, text, strlen(text));
}

static void remove_dir(char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(dir);
}

/* A pretty document: trace T1 on two services; the cart span failed and logs. */
static const char doc_t1[] =
    "{\n"
    "  \"resourceSpans\": [\n"
    "    {\"resource\": {\"attributes\": [\n"
    "        {\"key\": \"host.name\", \"value\": {\"stringValue\": \"h1\"}},\n"
    "        {\"key\": \"service.name\", \"value\": {\"stringValue\": \"frontend\"}}]},\n"
    "     \"scopeSpans\": [{\"scope\": {\"name\": \"retrace\"}, \"spans\": [\n"
    "       {\"traceId\": \"" T1 "\", \"spanId\": \"00f067aa0ba902b7\",\n"
    "        \"parentSpanId\": \"\", \"name\": \"GET /cart\", \"kind\": 2,\n"
    "        \"startTimeUnixNano\": \"1000\", \"endTimeUnixNano\": \"9000\",\n"
    "        \"status\": {\"code\": 1}}]}]},\n"
    "    {\"resource\": {\"attributes\": [\n"
    "        {\"key\": \"service.name\", \"value\": {\"stringValue\": \"cart\"}}]},\n"
    "     \"scopeSpans\": [{\"spans\": [\n"
    "       {\"traceId\": \"" T1 "\", \"spanId\": \"53995c3f42cd8ad8\",\n"
    "        \"parentSpanId\": \"00f067aa0ba902b7\", \"name\": \"load\",\n"
    "        \"startTimeUnixNano\": \"2000\", \"endTimeUnixNano\": \"7000\",\n"
    "        \"status\": {\"code\": 2, \"message\": \"db down\"},\n"
    "        \"events\": [\n"
    "          {\"timeUnixNano\": \"2100\", \"name\": \"cache miss for user 7\",\n"
    "           \"attributes\": [{\"key\": \"log.severity\", \"value\": {\"stringValue\": \"WARN\"}},\n"
    "             {\"key\": \"log.template_id\", \"value\": {\"intValue\": \"12345678901234\"}}]},\n"
    "          {\"timeUnixNano\": \"2200\", \"name\": \"exception\"},\n"
    "          {\"timeUnixNano\": 2300, \"name\": \"caf\\u00e9 \\ud83d\\ude00 user 42\",\n"
    "           \"attributes\": [{\"key\": \"log.severity\", \"value\": {\"stringValue\": \"INFO\"}}]}\n"
    "        ]}]}]}\n"
    "  ]\n"
    "}\n";

/* Two requests, one per line: T2 (numbers as times) and T3 (the older scope key). */
static const char lines_t2_t3[] =
    "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":"
    "{\"stringValue\":\"home\"}}]},\"scopeSpans\":[{\"spans\":[{\"traceId\":\"" T2 "\","
    "\"spanId\":\"0000000000000001\",\"name\":\"GET /home\",\"startTimeUnixNano\":5000,"
    "\"endTimeUnixNano\":6000}]}]}]}\n"
    "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":"
    "{\"stringValue\":\"api\"}}]},\"instrumentationLibrarySpans\":[{\"spans\":["
    "{\"traceId\":\"" T3 "\",\"spanId\":\"a000000000000001\",\"name\":\"POST /order\","
    "\"startTimeUnixNano\":\"3000\",\"endTimeUnixNano\":\"4000\"},"
    "{\"traceId\":\"" T3 "\",\"spanId\":\"a000000000000002\",\"parentSpanId\":\"a000000000000001\","
    "\"name\":\"charge\",\"startTimeUnixNano\":\"3100\",\"endTimeUnixNano\":\"3200\"},"
    "{\"traceId\":\"" T3 "\",\"spanId\":\"a000000000000003\",\"parentSpanId\":\"a000000000000001\","
    "\"name\":\"ship\",\"startTimeUnixNano\":\"3300\",\"endTimeUnixNano\":\"3400\","
    "\"status\":{\"code\":\"STATUS_CODE_ERROR\"}}]}]}]}\n";

static int span_named(const rt_sel_trace *t, const char *op)
{
    for (uint32_t i = 0; i < t->n_spans; i++)
        if (strcmp(t->spans[i].operation, op) == 0)
            return (int)i;
    return -1;
}

START_TEST(reads_known_traces)
{
    char *dir = make_dir(), sub[600], err[512] = "";
    snprintf(sub, sizeof sub, "%s/a", dir);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    write_text(sub, "req1.json", doc_t1);
    write_text(dir, "b.jsonl", lines_t2_t3);
    write_text(dir, "notes.txt", "not json at all {");
    rt_sel_dataset *ds = rt_sel_dataset_read_otlp_json(dir, err, sizeof err);
    ck_assert_msg(ds != NULL, "%s", err);
    ck_assert_uint_eq(rt_sel_dataset_count(ds), 3);
    ck_assert_uint_eq(rt_sel_dataset_spans(ds), 6);
    ck_assert_uint_eq(rt_sel_dataset_logs(ds), 3);

    /* Ordered by start: T1 (1000), T3 (3000), T2 (5000). */
    rt_sel_trace *t1 = rt_sel_dataset_trace(ds, 0), *t3 = rt_sel_dataset_trace(ds, 1),
                 *t2 = rt_sel_dataset_trace(ds, 2);
    ck_assert_uint_eq(t1->id_hi, 0x0af7651916cd43ddull);
    ck_assert_uint_eq(t1->id_lo, 0x8448eb211c80319cull);
    ck_assert_uint_eq(t2->id_lo, 2);
    ck_assert_uint_eq(t3->n_spans, 3);

    int root = span_named(t1, "GET /cart"), load = span_named(t1, "load");
    ck_assert_int_ge(root, 0);
    ck_assert_int_ge(load, 0);
    ck_assert_str_eq(t1->spans[root].service, "frontend");
    ck_assert_str_eq(t1->spans[load].service, "cart");
    ck_assert_int_eq(t1->spans[root].parent, -1);
    ck_assert_int_eq(t1->spans[load].parent, root);
    ck_assert(!t1->spans[root].error);
    ck_assert(t1->spans[load].error);
    ck_assert_uint_eq(t1->spans[root].start_ns, 1000);
    ck_assert_uint_eq(t1->spans[root].end_ns, 9000);
    ck_assert_uint_eq(t1->spans[load].n_logs, 3);
    const rt_sel_log *l = &t1->logs[t1->spans[load].first_log];
    ck_assert_uint_eq(l[0].ts_ns, 2100);
    ck_assert_uint_eq(l[0].level, RT_SEL_LOG_WARN);
    ck_assert_uint_eq(l[0].template_id, rt_sel_fold_template_id(12345678901234ull));
    ck_assert_uint_lt(l[0].template_id, RT_SEL_MINED_TEMPLATE_BIT);
    ck_assert_str_eq(l[1].text, "exception");
    ck_assert_uint_eq(l[1].level, RT_SEL_LOG_ERROR);
    ck_assert_uint_eq(l[1].template_id, 0);
    ck_assert_str_eq(l[2].text, "caf\xc3\xa9 \xf0\x9f\x98\x80 user 42");
    ck_assert_uint_eq(l[2].level, RT_SEL_LOG_INFO);
    ck_assert_uint_eq(l[2].template_id, 0);

    int order = span_named(t3, "POST /order"), ship = span_named(t3, "ship"),
        charge = span_named(t3, "charge");
    ck_assert_str_eq(t3->spans[order].service, "api");
    ck_assert_int_eq(t3->spans[ship].parent, order);
    ck_assert_int_eq(t3->spans[charge].parent, order);
    ck_assert(t3->spans[ship].error);
    ck_assert(!t3->spans[charge].error);
    ck_assert_uint_eq(t2->spans[0].start_ns, 5000);
    ck_assert_str_eq(t2->spans[0].service, "home");
    ck_assert_uint_eq(rt_sel_trace_group(t1), rt_sel_op_key("frontend", "GET /cart"));
    rt_sel_dataset_free(ds);

    /* A single file given instead of a directory. */
    char path[700];
    snprintf(path, sizeof path, "%s/b.jsonl", dir);
    ds = rt_sel_dataset_read_otlp_json(path, err, sizeof err);
    ck_assert_msg(ds != NULL, "%s", err);
    ck_assert_uint_eq(rt_sel_dataset_count(ds), 2);
    rt_sel_dataset_free(ds);
    remove_dir(dir);
}
END_TEST

/* The layout coordinator/export.h documents for `retrace export --format otlp-json`. */
static const char export_doc[] =
    "{\"resourceSpans\":[{\"resource\":{\"attributes\":["
    "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"payment\"}},"
    "{\"key\":\"host.name\",\"value\":{\"stringValue\":\"box\"}},"
    "{\"key\":\"process.pid\",\"value\":{\"intValue\":\"4242\"}},"
    "{\"key\":\"retrace.agent_id\",\"value\":{\"intValue\":\"3\"}}]},"
    "\"scopeSpans\":[{\"scope\":{\"name\":\"retrace\"},\"spans\":["
    "{\"traceId\":\"" T1 "\",\"spanId\":\"1111111111111111\",\"name\":\"charge\",\"kind\":2,"
    "\"startTimeUnixNano\":\"1700000000000000000\",\"endTimeUnixNano\":\"1700000000500000000\","
    "\"attributes\":[{\"key\":\"amount\",\"value\":{\"intValue\":\"250\"}},"
    "{\"key\":\"ratio\",\"value\":{\"doubleValue\":0.5}},"
    "{\"key\":\"retry\",\"value\":{\"boolValue\":false}}],"
    "\"events\":[{\"timeUnixNano\":\"1700000000100000000\",\"name\":\"charged bob 250 cents\","
    "\"attributes\":[{\"key\":\"log.severity\",\"value\":{\"stringValue\":\"ERROR\"}},"
    "{\"key\":\"log.template\",\"value\":{\"stringValue\":\"charged %s %d cents\"}},"
    "{\"key\":\"log.template_id\",\"value\":{\"intValue\":\"-7046029254386353131\"}},"
    "{\"key\":\"log.args.0\",\"value\":{\"stringValue\":\"bob\"}},"
    "{\"key\":\"log.args.1\",\"value\":{\"intValue\":\"250\"}}]}],"
    "\"status\":{\"code\":2,\"message\":\"card declined\"}}]}]}]}";

START_TEST(reads_export_layout)
{
    char *dir = make_dir(), err[512] = "";
    write_text(dir, "export.json", export_doc);
    rt_sel_dataset *ds = rt_sel_dataset_read_otlp_json(dir, err, sizeof err);
    ck_assert_msg(ds != NULL, "%s", err);
    rt_sel_trace *t = rt_sel_dataset_trace(ds, 0);
    ck_assert_uint_eq(t->n_spans, 1);
    ck_assert_str_eq(t->spans[0].service, "payment");
    ck_assert_uint_eq(t->spans[0].start_ns, 1700000000000000000ull);
    ck_assert(t->spans[0].error);
    ck_assert_uint_eq(t->n_logs, 1);
    ck_assert_uint_eq(t->logs[0].level, RT_SEL_LOG_ERROR);
    ck_assert_uint_eq(t->logs[0].template_id,
                      rt_sel_fold_template_id((uint64_t)-7046029254386353131ll));
    rt_sel_dataset_free(ds);
    remove_dir(dir);
}
END_TEST

struct bad_case {
    const char *text;
    const char *why; /* expected in the message */
};

static const struct bad_case bad_cases[] = {
    {"{\"resourceSpans\":[}", "byte 18"},
    {"{\"resourceSpans\":[],}", "expected a string key"},
    {"{\"a\":01}", "leading zero"},
    {"{\"a\":1.}", "no digit after"},
    {"{\"a\":\"\\x\"}", "invalid escape"},
    {"{\"a\":\"tab\there\"}", "control character"},
    {"{\"a\":\"\xff\"}", "invalid UTF-8"},
    {"{\"a\":\"\xc0\xaf\"}", "invalid UTF-8"},
    {"{\"a\":\"\\ud800\"}", "surrogate"},
    {"{\"a\":tru}", "unexpected"},
    {"{} garbage", "unexpected 'g'"},
    {"{\"a\":1} {\"b\":", "unexpected end"},
    {"{\"a\":\"open", "unterminated string"},
    {"[1,2]", "ExportTraceServiceRequest"},
    {"{\"resourceSpans\":\"x\"}", "must be an array"},
    {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"xyz\","
     "\"spanId\":\"0102030405060708\"}]}]}]}", "traceId"},
    {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"" T1 "\"}]}]}]}",
     "spanId"},
    {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"" T1 "\","
     "\"spanId\":\"01\",\"startTimeUnixNano\":-5}]}]}]}", "non-negative integer"},
};

START_TEST(malformed_inputs_fail_clearly)
{
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        char *dir = make_dir(), err[512] = "";
        write_text(dir, "x.json", bad_cases[i].text);
        rt_sel_dataset *ds = rt_sel_dataset_read_otlp_json(dir, err, sizeof err);
        ck_assert_msg(ds == NULL, "case %zu accepted", i);
        ck_assert_msg(strstr(err, "x.json") && strstr(err, "byte "),
                      "case %zu: message without file/offset: %s", i, err);
        ck_assert_msg(strstr(err, bad_cases[i].why), "case %zu: '%s' lacks '%s'", i, err,
                      bad_cases[i].why);
        remove_dir(dir);
    }
    /* Nesting beyond the bound. */
    char deep[400];
    memset(deep, '[', 200);
    memset(deep + 200, ']', 200);
    char *dir = make_dir(), err[512] = "";
    write_file(dir, "deep.json", deep, sizeof deep);
    ck_assert_ptr_null(rt_sel_dataset_read_otlp_json(dir, err, sizeof err));
    ck_assert_msg(strstr(err, "deeper than"), "%s", err);
    /* Valid but empty, and a directory without JSON files. */
    write_file(dir, "deep.json", "{}", 2);
    ck_assert_ptr_null(rt_sel_dataset_read_otlp_json(dir, err, sizeof err));
    ck_assert_msg(strstr(err, "no traces"), "%s", err);
    unlink(strcat(strcpy(deep, dir), "/deep.json"));
    ck_assert_ptr_null(rt_sel_dataset_read_otlp_json(dir, err, sizeof err));
    ck_assert_msg(strstr(err, "no *.json"), "%s", err);
    ck_assert_ptr_null(rt_sel_dataset_read_otlp_json("/nonexistent/otlp", err, sizeof err));
    ck_assert_msg(strstr(err, "/nonexistent/otlp"), "%s", err);
    remove_dir(dir);
}
END_TEST

/* Random bytes and mutated documents: never a crash, and a message on failure. */
START_TEST(random_bytes_never_crash)
{
    static const char alphabet[] = "{}[]\":,\\ u0123456789abcdefe-+.tnrl\n\t\xff\xc3";
    unsigned seed = 12345;
    char *dir = make_dir(), buf[sizeof doc_t1 + 64], err[512];
    for (int it = 0; it < 3000; it++) {
        size_t len;
        if (it % 2) { /* mutate the valid document in 1..4 places */
            len = sizeof doc_t1 - 1;
            memcpy(buf, doc_t1, len);
            for (int k = 1 + rand_r(&seed) % 4; k > 0; k--)
                buf[(size_t)rand_r(&seed) % len] = (char)(rand_r(&seed) % 256);
            if (it % 7 == 1)
                len = (size_t)rand_r(&seed) % len; /* truncated */
        } else {
            len = (size_t)rand_r(&seed) % 300;
            for (size_t k = 0; k < len; k++)
                buf[k] = it % 4 ? alphabet[rand_r(&seed) % (sizeof alphabet - 1)]
                                : (char)(rand_r(&seed) % 256);
        }
        write_file(dir, "r.json", buf, len);
        err[0] = '\0';
        rt_sel_dataset *ds = rt_sel_dataset_read_otlp_json(dir, err, sizeof err);
        if (ds)
            rt_sel_dataset_free(ds);
        else
            ck_assert_msg(err[0] != '\0', "iteration %d: failed without a message", it);
    }
    remove_dir(dir);
}
END_TEST

START_TEST(json_parser_details)
{
    char text[] = " {\"k\\\"ey\": [1, -2, 3.5e+2, \"x\\n\\u0041\", true, false, null, {}], "
                  "\"big\": \"18446744073709551615\", \"neg\": -9223372036854775808} tail";
    rt_json_doc doc = {0};
    size_t pos = 0;
    char err[128];
    ck_assert_int_eq(rt_json_parse_value(&doc, text, strlen(text), &pos, err, sizeof err), 0);
    ck_assert_str_eq(text + pos, "tail");
    ck_assert_uint_eq(doc.nodes[0].type, RT_JSON_OBJECT);
    ck_assert_uint_eq(doc.nodes[0].size, 3);
    uint32_t arr = rt_json_get(&doc, 0, "k\"ey");
    ck_assert_uint_ne(arr, RT_JSON_NONE);
    ck_assert_uint_eq(doc.nodes[arr].size, 8);
    uint32_t e = rt_json_first(&doc, arr);
    uint64_t u;
    int64_t i;
    ck_assert(rt_json_u64(&doc, e, &u) && u == 1);
    e = rt_json_next(&doc, arr, e);
    ck_assert(!rt_json_u64(&doc, e, &u));
    ck_assert(rt_json_i64(&doc, e, &i) && i == -2);
    e = rt_json_next(&doc, arr, e);
    ck_assert(!rt_json_u64(&doc, e, &u)); /* not an integer */
    e = rt_json_next(&doc, arr, e);
    ck_assert_str_eq(rt_json_str(&doc, e), "x\nA");
    for (int k = 0; k < 4; k++)
        e = rt_json_next(&doc, arr, e);
    ck_assert_uint_eq(doc.nodes[e].type, RT_JSON_OBJECT);
    ck_assert_uint_eq(rt_json_next(&doc, arr, e), RT_JSON_NONE);
    ck_assert(rt_json_u64(&doc, rt_json_get(&doc, 0, "big"), &u) && u == UINT64_MAX);
    ck_assert(rt_json_i64(&doc, rt_json_get(&doc, 0, "neg"), &i) && i == INT64_MIN);
    ck_assert_uint_eq(rt_json_get(&doc, 0, "missing"), RT_JSON_NONE);
    ck_assert_uint_eq(rt_json_get(&doc, arr, "k"), RT_JSON_NONE);
    char over[] = "\"18446744073709551616\"";
    pos = 0;
    ck_assert_int_eq(rt_json_parse_value(&doc, over, strlen(over), &pos, err, sizeof err), 0);
    ck_assert(!rt_json_u64(&doc, 0, &u));
    rt_json_free(&doc);
}
END_TEST

/* A generated dataset: `apis` entry APIs, traces spread over 10 minutes. */
static void write_eval_dataset(const char *dir, int traces)
{
    static const char *const apis[] = {"GET /a", "GET /b", "POST /c", "GET /d"};
    char path[600];
    snprintf(path, sizeof path, "%s/data.jsonl", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (int t = 0; t < traces; t++) {
        unsigned long long start = 1700000000000000000ull + (unsigned long long)t * 3000000000ull;
        int api = t % 4, fail = t % 9 == 0;
        fprintf(f, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
                   "\"value\":{\"stringValue\":\"gw\"}}]},\"scopeSpans\":[{\"spans\":["
                   "{\"traceId\":\"%032x\",\"spanId\":\"%016x\",\"name\":\"%s\","
                   "\"startTimeUnixNano\":\"%llu\",\"endTimeUnixNano\":\"%llu\"},"
                   "{\"traceId\":\"%032x\",\"spanId\":\"%016x\",\"parentSpanId\":\"%016x\","
                   "\"name\":\"q%d\",\"startTimeUnixNano\":\"%llu\",\"endTimeUnixNano\":\"%llu\","
                   "\"status\":{\"code\":%d},\"events\":[{\"name\":\"row %d read in %d ms\","
                   "\"attributes\":[{\"key\":\"log.severity\",\"value\":{\"stringValue\":\"%s\"}}]}]}"
                   "]}]}]}\n",
                t + 1, 2 * t + 1, apis[api], start, start + 1000000 + (unsigned)(t % 5) * 100000,
                t + 1, 2 * t + 2, 2 * t + 1, t % 3, start + 1000, start + 900000, fail ? 2 : 0,
                t, t % 13, fail ? "ERROR" : "INFO");
    }
    fclose(f);
}

START_TEST(select_eval_reads_otlp_json)
{
    char *dir = make_dir(), err[512] = "";
    write_eval_dataset(dir, 200);
    rt_sel_dataset *ds = rt_sel_dataset_read_otlp_json(dir, err, sizeof err);
    ck_assert_msg(ds != NULL, "%s", err);
    ck_assert_uint_eq(rt_sel_dataset_count(ds), 200);
    rt_sel_eval_options opt = {.rate = 0.1, .window_s = 60, .seed = 1, .alarm_on_errors = true};
    rt_sel_eval_report rep;
    ck_assert_int_eq(rt_sel_eval_run(ds, &opt, &rep, err, sizeof err), 0);
    ck_assert_uint_eq(rep.gleaner.total, 200);
    ck_assert_uint_eq(rep.gleaner.kept, 20);
    ck_assert_double_eq(rep.gleaner.api_coverage, 1.0);
    rt_sel_dataset_free(ds);
#ifdef HAVE_SELECT_EVAL
    char *argv[] = {"select-eval", "--input", dir, "--format", "otlp-json", "--rate", "5%",
                    "--quiet", NULL};
    fflush(stdout);
    ck_assert_int_eq(cli_cmd_select_eval(8, argv), 0);
    char *bad_argv[] = {"select-eval", "--input", "/nonexistent", "--format", "otlp-json",
                        "--rate", "5%", "--quiet", NULL};
    ck_assert_int_ne(cli_cmd_select_eval(8, bad_argv), 0);
#endif
    remove_dir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("select_otlp");
    TCase *tc = tcase_create("otlp");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, reads_known_traces);
    tcase_add_test(tc, reads_export_layout);
    tcase_add_test(tc, malformed_inputs_fail_clearly);
    tcase_add_test(tc, random_bytes_never_crash);
    tcase_add_test(tc, json_parser_details);
    tcase_add_test(tc, select_eval_reads_otlp_json);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
