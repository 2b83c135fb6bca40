/* test_weave_cli.c — `retrace weave FILE` on an OTLP/JSON file with a known mapping.
 *
 * A synthetic two-hop workload (A -> B -> C, no context on either hop) is written as
 * OTLP/JSON lines, plus a few coherent requests (context kept) from which the command
 * must learn that B's "call-c" goes to C (A's clients name B by peer.service). The
 * command's --out file is read back with jansson: every inferred link must point the
 * right server root at the right client, carry its confidence, and share the caller's
 * trace id.
 */
#include "cmd_weave.h"
#include "weave.h"
#include "weave/synth.h"

#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/suite.h"
#include "weave/cli_run.h"

static void write_span(FILE *f, const char *service, const char *name, int kind,
                       uint64_t trace_hi, uint64_t trace_lo, uint64_t span_id, uint64_t parent,
                       int64_t start, int64_t end, const char *peer)
{
    fprintf(f,
            "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
            "\"value\":{\"stringValue\":\"%s\"}}]},\"scopeSpans\":[{\"spans\":[{\"traceId\":"
            "\"%016" PRIx64 "%016" PRIx64 "\",\"spanId\":\"%016" PRIx64 "\"",
            service, trace_hi, trace_lo, span_id);
    if (parent)
        fprintf(f, ",\"parentSpanId\":\"%016" PRIx64 "\"", parent);
    fprintf(f, ",\"name\":\"%s\",\"kind\":%d,\"startTimeUnixNano\":\"%" PRId64
               "\",\"endTimeUnixNano\":\"%" PRId64 "\"",
            name, kind, start, end);
    if (peer)
        fprintf(f, ",\"attributes\":[{\"key\":\"peer.service\",\"value\":{\"stringValue\":"
                   "\"%s\"}}]",
                peer);
    fprintf(f, "}]}]}]}\n");
}

/* The synthetic requests, then `coherent` requests with context on both hops. */
static void write_workload(const synth *s, const char *path, int coherent)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    const synth_hop *h0 = &s->hop[0], *h1 = &s->hop[1];
    int64_t last = 0;
    for (size_t r = 0; r < s->requests; r++) {
        const rt_weave_span *ac = &h0->clients[r], *bs = &h0->servers[r], *bc = &h1->clients[r],
                            *cs = &h1->servers[r];
        uint64_t root = 0xa000000000000000ull | r;
        write_span(f, "svc-a", "GET /a", 2, ac->trace_hi, ac->trace_lo, root, 0,
                   ac->start_ns - 50000, ac->end_ns + 50000, NULL);
        write_span(f, "svc-a", "call-b", 3, ac->trace_hi, ac->trace_lo, ac->span_id, root,
                   ac->start_ns, ac->end_ns, "svc-b");
        write_span(f, "svc-b", "GET /b", 2, bs->trace_hi, bs->trace_lo, bs->span_id, 0,
                   bs->start_ns, bs->end_ns, NULL);
        write_span(f, "svc-b", "call-c", 3, bc->trace_hi, bc->trace_lo, bc->span_id,
                   bs->span_id, bc->start_ns, bc->end_ns, NULL);
        write_span(f, "svc-c", "GET /c", 2, cs->trace_hi, cs->trace_lo, cs->span_id, 0,
                   cs->start_ns, cs->end_ns, NULL);
        if (ac->end_ns > last)
            last = ac->end_ns;
    }
    for (int i = 0; i < coherent; i++) { /* context kept: these teach the call graph */
        int64_t t = last + 10000000 + (int64_t)i * 5000000;
        uint64_t tr = 0xc0c0 + (uint64_t)i, base = 0xc000000000000000ull | ((uint64_t)i << 8);
        write_span(f, "svc-a", "GET /a", 2, 0xc0, tr, base | 1, 0, t, t + 2000000, NULL);
        write_span(f, "svc-a", "call-b", 3, 0xc0, tr, base | 2, base | 1, t + 10000, t + 1900000,
                   "svc-b");
        write_span(f, "svc-b", "GET /b", 2, 0xc0, tr, base | 3, base | 2, t + 100000, t + 1800000,
                   NULL);
        write_span(f, "svc-b", "call-c", 3, 0xc0, tr, base | 4, base | 3, t + 200000, t + 1700000,
                   NULL);
        write_span(f, "svc-c", "GET /c", 2, 0xc0, tr, base | 5, base | 4, t + 300000, t + 1600000,
                   NULL);
    }
    fclose(f);
}

static uint64_t hex64(const char *s)
{
    return s ? strtoull(s, NULL, 16) : 0;
}

/* Run the command with stdout into a file; returns its exit status. */

START_TEST(weaves_an_otlp_file)
{
    synth_opts so = {.rate_per_s = 3000, .requests = 800, .hops = 2,
                     .service_median_ns = 800e3, .seed = 77};
    synth s;
    ck_assert_int_eq(synth_make(&s, &so), 0);
    char dir[] = "/tmp/weave-cli-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char in[128], out[128], txt[128];
    snprintf(in, sizeof in, "%s/in.json", dir);
    snprintf(out, sizeof out, "%s/out.json", dir);
    snprintf(txt, sizeof txt, "%s/stdout.txt", dir);
    write_workload(&s, in, 20);

    char *argv[] = {"weave", "--out", out, in, NULL};
    ck_assert_int_eq(run_cmd(4, argv, txt), 0);

    /* the printed summary names both callees and the inferred links */
    FILE *f = fopen(txt, "r");
    ck_assert_ptr_nonnull(f);
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "service svc-b: open_calls=800"));
    ck_assert_ptr_nonnull(strstr(buf, "service svc-c: open_calls=800"));
    ck_assert_ptr_nonnull(strstr(buf, "unknown_callee=0"));
    ck_assert_ptr_nonnull(strstr(buf, "confidence="));

    /* the rewritten file: check every inferred link against the truth */
    size_t right = 0, links = 0, coherent_touched = 0;
    json_error_t err;
    json_t *line;
    FILE *o = fopen(out, "r");
    ck_assert_ptr_nonnull(o);
    while ((line = json_loadf(o, JSON_DISABLE_EOF_CHECK, &err)) != NULL) {
        json_t *sp = json_array_get(
            json_object_get(json_array_get(json_object_get(json_array_get(
                                               json_object_get(line, "resourceSpans"), 0),
                                                           "scopeSpans"),
                                           0),
                            "spans"),
            0);
        ck_assert_ptr_nonnull(sp);
        uint64_t id = hex64(json_string_value(json_object_get(sp, "spanId")));
        json_t *attrs = json_object_get(sp, "attributes");
        json_t *conf = NULL;
        int inferred = 0;
        size_t i;
        json_t *a;
        json_array_foreach(attrs, i, a) {
            const char *k = json_string_value(json_object_get(a, "key"));
            if (!strcmp(k, "retrace.weave.inferred"))
                inferred = 1;
            if (!strcmp(k, "retrace.weave.confidence"))
                conf = json_object_get(json_object_get(a, "value"), "doubleValue");
        }
        if (inferred) {
            ck_assert_ptr_nonnull(conf);
            double c = json_real_value(conf);
            ck_assert(c >= 0.0 && c <= 1.0);
            if ((id >> 56) == 0xc0)
                coherent_touched++;
            unsigned hop = (unsigned)(id >> 56) - 1; /* synth: servers of hop h are (h+1)<<56 */
            size_t idx = (size_t)(id & 0xffffffffffffull) - 1;
            ck_assert(hop < 2 && idx < s.requests);
            uint64_t parent = hex64(json_string_value(json_object_get(sp, "parentSpanId")));
            right += parent == s.hop[hop].clients[idx].span_id;
            links++;
            /* the server's trace now carries A's trace id */
            const char *tid = json_string_value(json_object_get(sp, "traceId"));
            ck_assert_ptr_nonnull(tid);
            ck_assert_int_eq(strncmp(tid, "0000000000001000", 16), 0);
        }
        json_decref(line);
    }
    fclose(o);
    ck_assert_uint_eq(coherent_touched, 0);
    ck_assert_uint_ge(links, 2 * s.requests - 10);
    ck_assert_msg((double)right >= 0.97 * (double)(2 * s.requests), "%zu of %zu links right",
                  right, 2 * s.requests);
    unlink(in);
    unlink(out);
    unlink(txt);
    rmdir(dir);
    synth_free(&s);
}
END_TEST

START_TEST(bad_input_and_usage)
{
    char dir[] = "/tmp/weave-cli-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char in[128], txt[128], graph[128];
    snprintf(in, sizeof in, "%s/bad.json", dir);
    snprintf(txt, sizeof txt, "%s/stdout.txt", dir);
    snprintf(graph, sizeof graph, "%s/graph.txt", dir);
    FILE *f = fopen(in, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"resourceSpans\":[]}\n{\"resourceSpans\": [", f);
    fclose(f);
    char *argv1[] = {"weave", in, NULL};
    ck_assert_int_eq(run_cmd(2, argv1, txt), 1);
    char *argv2[] = {"weave", NULL};
    ck_assert_int_eq(run_cmd(1, argv2, txt), 2);
    char *argv3[] = {"weave", "--skew", "-5", in, NULL};
    ck_assert_int_eq(run_cmd(4, argv3, txt), 2);
    /* an unknown callee without graph: counted, not linked; a graph names it */
    f = fopen(in, "w");
    ck_assert_ptr_nonnull(f);
    write_span(f, "svc-a", "call-x", 3, 1, 1, 0x11, 0, 1000, 900000, NULL);
    write_span(f, "svc-x", "GET /x", 2, 2, 2, 0x22, 0, 100000, 800000, NULL);
    fclose(f);
    char *argv4[] = {"weave", "--summary", in, NULL};
    ck_assert_int_eq(run_cmd(3, argv4, txt), 0);
    f = fopen(txt, "r");
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "unknown_callee=1 inferred_links=0"));
    f = fopen(graph, "w");
    fputs("# caller [operation] callee\nsvc-a call-x svc-x\n", f);
    fclose(f);
    char *argv5[] = {"weave", "--graph", graph, in, NULL};
    ck_assert_int_eq(run_cmd(4, argv5, txt), 0);
    f = fopen(txt, "r");
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "unknown_callee=0 inferred_links=1"));
    ck_assert_ptr_nonnull(strstr(buf, "-> svc-x 0000000000000022"));
    unlink(in);
    unlink(txt);
    unlink(graph);
    rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("weave_cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, weaves_an_otlp_file);
    tcase_add_test(tc, bad_input_and_usage);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
