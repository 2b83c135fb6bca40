/* test_weave.c — the weaver and its baselines on workloads whose mapping is known.
 *
 * Synthetic workloads (synth.h) give the truth; hand-made spans pin the rules:
 * nesting (impossible timings never linked), "none" for calls that reached no server,
 * confidence always in [0,1], bad input counted, trace-id groups joining hops.
 */
#include "weave.h"
#include "weave/synth.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "common/suite.h"

/* Per-link accuracy of one hop against the truth. */
static double link_accuracy(const synth_hop *h, const rt_weave_link *l)
{
    size_t right = 0;
    for (size_t i = 0; i < h->n_clients; i++)
        right += l[i].server == h->truth[i];
    return h->n_clients ? (double)right / (double)h->n_clients : 1.0;
}

typedef struct woven {
    rt_weave_link *w[SYNTH_MAX_HOPS], *fcfs[SYNTH_MAX_HOPS], *vpath[SYNTH_MAX_HOPS];
    rt_weave_stats st[SYNTH_MAX_HOPS];
} woven;

static void weave_all(const synth *s, const rt_weave_opts *o, woven *out)
{
    memset(out, 0, sizeof *out);
    for (unsigned h = 0; h < s->hops; h++) {
        const synth_hop *hp = &s->hop[h];
        size_t n = hp->n_clients ? hp->n_clients : 1;
        out->w[h] = calloc(n, sizeof **out->w);
        out->fcfs[h] = calloc(n, sizeof **out->fcfs);
        out->vpath[h] = calloc(n, sizeof **out->vpath);
        ck_assert_ptr_nonnull(out->w[h]);
        ck_assert_ptr_nonnull(out->fcfs[h]);
        ck_assert_ptr_nonnull(out->vpath[h]);
        ck_assert_int_eq(rt_weave_hop(o, hp->clients, hp->n_clients, hp->servers, hp->n_servers,
                                      out->w[h], &out->st[h]),
                         0);
        ck_assert_int_eq(rt_weave_fcfs(0, hp->clients, hp->n_clients, hp->servers,
                                       hp->n_servers, out->fcfs[h]),
                         0);
        ck_assert_int_eq(rt_weave_vpath(0, hp->clients, hp->n_clients, hp->servers,
                                        hp->n_servers, out->vpath[h]),
                         0);
    }
}

static void woven_free(woven *w)
{
    for (unsigned h = 0; h < SYNTH_MAX_HOPS; h++) {
        free(w->w[h]);
        free(w->fcfs[h]);
        free(w->vpath[h]);
    }
}

/* Every rule a decision must keep, whatever the load. */
static void check_invariants(const synth *s, const woven *wv, int64_t skew)
{
    for (unsigned h = 0; h < s->hops; h++) {
        const synth_hop *hp = &s->hop[h];
        unsigned char *used = calloc(hp->n_servers ? hp->n_servers : 1, 1);
        ck_assert_ptr_nonnull(used);
        for (size_t i = 0; i < hp->n_clients; i++) {
            const rt_weave_link *l = &wv->w[h][i];
            ck_assert_msg(l->confidence >= 0.0 && l->confidence <= 1.0 && !isnan(l->confidence),
                          "confidence %f out of [0,1]", l->confidence);
            if (l->server == RT_WEAVE_NONE)
                continue;
            ck_assert(l->server >= 0 && (size_t)l->server < hp->n_servers);
            ck_assert_msg(!used[l->server], "server %td given twice", l->server);
            used[l->server] = 1;
            const rt_weave_span *c = &hp->clients[i], *sv = &hp->servers[l->server];
            ck_assert(sv->start_ns >= c->start_ns - skew);
            ck_assert(sv->end_ns <= c->end_ns + skew);
        }
        free(used);
    }
}

START_TEST(low_concurrency_is_exact)
{
    for (unsigned hops = 1; hops <= 2; hops++) {
        synth_opts so = {.rate_per_s = 100, .requests = 1500, .hops = hops, .channels = 4,
                         .service_median_ns = 800e3, .seed = 7 + hops};
        synth s;
        ck_assert_int_eq(synth_make(&s, &so), 0);
        rt_weave_opts o;
        rt_weave_opts_default(&o);
        woven wv;
        weave_all(&s, &o, &wv);
        check_invariants(&s, &wv, 0);
        double acc = synth_trace_accuracy(&s, wv.w, NULL);
        ck_assert_msg(acc >= 0.995, "hops=%u accuracy %.4f at low concurrency", hops, acc);
        woven_free(&wv);
        synth_free(&s);
    }
}
END_TEST

START_TEST(beats_fcfs_at_high_concurrency)
{
    synth_opts so = {.rate_per_s = 10000, .requests = 3000, .hops = 2, .fail_prob = 0.02,
                     .decoy_rate = 500, .channels = 4, .service_median_ns = 800e3, .seed = 99};
    synth s;
    ck_assert_int_eq(synth_make(&s, &so), 0);
    rt_weave_opts o;
    rt_weave_opts_default(&o);
    woven wv;
    weave_all(&s, &o, &wv);
    check_invariants(&s, &wv, 0);
    double acc = synth_trace_accuracy(&s, wv.w, NULL);
    double fcfs = synth_trace_accuracy(&s, wv.fcfs, NULL);
    double vpath = synth_trace_accuracy(&s, wv.vpath, NULL);
    ck_assert_msg(acc > fcfs + 0.2, "weaver %.3f vs fcfs %.3f", acc, fcfs);
    ck_assert_msg(acc > vpath, "weaver %.3f vs vpath %.3f", acc, vpath);
    ck_assert_msg(acc >= 0.9, "weaver %.3f", acc);
    /* per hop too, and the weaver's own batches were big enough to need windows */
    for (unsigned h = 0; h < s.hops; h++)
        ck_assert(link_accuracy(&s.hop[h], wv.w[h]) > link_accuracy(&s.hop[h], wv.fcfs[h]));
    ck_assert_uint_gt(wv.st[0].largest_batch, o.window);
    ck_assert_uint_gt(wv.st[0].windowed, 0);
    woven_free(&wv);
    synth_free(&s);
}
END_TEST

START_TEST(confidence_tracks_correctness)
{
    synth_opts so = {.rate_per_s = 20000, .requests = 3000, .hops = 1, .fail_prob = 0.03,
                     .decoy_rate = 1000, .channels = 0, .service_median_ns = 800e3, .seed = 5};
    synth s;
    ck_assert_int_eq(synth_make(&s, &so), 0);
    rt_weave_opts o;
    rt_weave_opts_default(&o);
    woven wv;
    weave_all(&s, &o, &wv);
    check_invariants(&s, &wv, 0);
    double right = 0, wrong = 0;
    size_t n_right = 0, n_wrong = 0;
    for (size_t i = 0; i < s.hop[0].n_clients; i++) {
        if (wv.w[0][i].server == s.hop[0].truth[i]) {
            right += wv.w[0][i].confidence;
            n_right++;
        } else {
            wrong += wv.w[0][i].confidence;
            n_wrong++;
        }
    }
    ck_assert_uint_gt(n_wrong, 0); /* the load is meant to be hard */
    ck_assert_msg(right / (double)n_right > wrong / (double)n_wrong + 0.1,
                  "mean confidence right %.3f wrong %.3f", right / (double)n_right,
                  wrong / (double)n_wrong);
    woven_free(&wv);
    synth_free(&s);
}
END_TEST

START_TEST(failed_calls_are_unmatched)
{
    synth_opts so = {.rate_per_s = 200, .requests = 1500, .hops = 2, .fail_prob = 0.2,
                     .decoy_rate = 20, .channels = 2, .service_median_ns = 800e3, .seed = 11};
    synth s;
    ck_assert_int_eq(synth_make(&s, &so), 0);
    rt_weave_opts o;
    rt_weave_opts_default(&o);
    woven wv;
    weave_all(&s, &o, &wv);
    check_invariants(&s, &wv, 0);
    size_t failed = 0, reported = 0;
    for (unsigned h = 0; h < s.hops; h++)
        for (size_t i = 0; i < s.hop[h].n_clients; i++)
            if (s.hop[h].truth[i] == RT_WEAVE_NONE) {
                failed++;
                reported += wv.w[h][i].server == RT_WEAVE_NONE;
            }
    ck_assert_uint_gt(failed, 100);
    ck_assert_msg(reported >= failed - failed / 100, "%zu of %zu failed calls unmatched",
                  reported, failed);
    ck_assert(synth_trace_accuracy(&s, wv.w, NULL) >= 0.98);
    woven_free(&wv);
    synth_free(&s);
}
END_TEST

START_TEST(skipped_call_in_a_busy_batch)
{
    /* Two calls overlap; one server span fits the second call exactly like the lone
     * calls before it, the first call reached nothing. Its only candidate belongs to
     * the other call, so it must come out unmatched. */
    rt_weave_span cl[42], sv[41];
    size_t nc = 0, ns = 0;
    for (int i = 0; i < 40; i++) { /* lone calls teach the model: 100 us each way */
        int64_t t = 1000000LL * i, d = 200000 + 7919 * (i % 13);
        cl[nc++] = (rt_weave_span){.span_id = 1 + i, .start_ns = t, .end_ns = t + d + 200000 + 500 * (i % 7)};
        sv[ns++] = (rt_weave_span){.span_id = 100 + i, .start_ns = t + 100000 + 300 * (i % 5),
                                   .end_ns = t + 100000 + 300 * (i % 5) + d};
    }
    int64_t t = 100000000;
    cl[nc++] = (rt_weave_span){.span_id = 900, .start_ns = t, .end_ns = t + 2000000};
    cl[nc++] = (rt_weave_span){.span_id = 901, .start_ns = t + 50000, .end_ns = t + 850000};
    sv[ns++] = (rt_weave_span){.span_id = 902, .start_ns = t + 150000, .end_ns = t + 750000};
    rt_weave_link out[42];
    rt_weave_stats st;
    ck_assert_int_eq(rt_weave_hop(NULL, cl, nc, sv, ns, out, &st), 0);
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(out[i].server, i);
    ck_assert_int_eq(out[41].server, 40);
    ck_assert_int_eq(out[40].server, RT_WEAVE_NONE);
    ck_assert(out[40].confidence >= 0.0 && out[40].confidence <= 1.0);
    ck_assert_uint_eq(st.linked, 41);
    ck_assert_uint_eq(st.unmatched, 1);
    /* FCFS gives the server to the earlier call instead */
    ck_assert_int_eq(rt_weave_fcfs(0, cl, nc, sv, ns, out), 0);
    ck_assert_int_eq(out[40].server, 40);
    ck_assert_int_eq(out[41].server, RT_WEAVE_NONE);
}
END_TEST

START_TEST(impossible_timings_never_linked)
{
    /* Every server sticks out of every client on one side: nothing may be linked,
     * with or without a model to go by. */
    rt_weave_span cl[3] = {
        {.span_id = 1, .start_ns = 1000, .end_ns = 5000},
        {.span_id = 2, .start_ns = 10000, .end_ns = 20000},
        {.span_id = 3, .start_ns = 30000, .end_ns = 31000},
    };
    rt_weave_span sv[4] = {
        {.span_id = 11, .start_ns = 900, .end_ns = 4000},   /* starts before client 1 */
        {.span_id = 12, .start_ns = 15000, .end_ns = 20001}, /* ends after client 2 */
        {.span_id = 13, .start_ns = 29000, .end_ns = 32000}, /* wraps client 3 */
        {.span_id = 14, .start_ns = 40000, .end_ns = 41000}, /* after everything */
    };
    rt_weave_link out[3];
    rt_weave_stats st;
    ck_assert_int_eq(rt_weave_hop(NULL, cl, 3, sv, 4, out, &st), 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(out[i].server, RT_WEAVE_NONE);
        ck_assert(out[i].confidence >= 0.0 && out[i].confidence <= 1.0);
    }
    ck_assert_uint_eq(st.candidates, 0);
    ck_assert_uint_eq(st.linked, 0);
    /* a skew of 200 ns lets the first two in (100 ns and 1 ns out), not the third */
    rt_weave_opts o;
    rt_weave_opts_default(&o);
    o.skew_ns = 200;
    ck_assert_int_eq(rt_weave_hop(&o, cl, 3, sv, 4, out, &st), 0);
    ck_assert_int_eq(out[0].server, 0);
    ck_assert_int_eq(out[1].server, 1);
    ck_assert_int_eq(out[2].server, RT_WEAVE_NONE);
}
END_TEST

START_TEST(random_spans_keep_the_rules)
{
    /* Unstructured spans: no mapping to recover, but the rules must still hold. */
    synth s;
    memset(&s, 0, sizeof s);
    s.rng = 1234;
    s.hops = 1;
    synth_hop *h = &s.hop[0];
    for (int i = 0; i < 600; i++) {
        int64_t a = (int64_t)(synth_uniform(&s) * 1e7), b = (int64_t)(synth_uniform(&s) * 2e6);
        synth_add_client(h, (rt_weave_span){.span_id = (uint64_t)i + 1, .start_ns = a,
                                            .end_ns = a + b},
                         RT_WEAVE_NONE, 0);
        a = (int64_t)(synth_uniform(&s) * 1e7), b = (int64_t)(synth_uniform(&s) * 1e6);
        synth_push(&h->servers, &h->n_servers, &h->cap_servers,
                   (rt_weave_span){.span_id = (uint64_t)i + 1000, .start_ns = a, .end_ns = a + b});
    }
    for (int64_t skew = 0; skew <= 50000; skew += 50000) {
        rt_weave_opts o;
        rt_weave_opts_default(&o);
        o.skew_ns = skew;
        o.window = 8; /* force windows */
        woven wv;
        weave_all(&s, &o, &wv);
        check_invariants(&s, &wv, skew);
        woven_free(&wv);
    }
    synth_free(&s);
}
END_TEST

START_TEST(bad_input_is_counted)
{
    rt_weave_span cl[2] = {{.span_id = 1, .start_ns = 100, .end_ns = 50},
                           {.span_id = 2, .start_ns = 100, .end_ns = 1000}};
    rt_weave_span sv[2] = {{.span_id = 3, .start_ns = 200, .end_ns = 300},
                           {.span_id = 4, .start_ns = 500, .end_ns = 400}};
    rt_weave_link out[2];
    rt_weave_stats st;
    ck_assert_int_eq(rt_weave_hop(NULL, cl, 2, sv, 2, out, &st), 0);
    ck_assert_uint_eq(st.bad_spans, 2);
    ck_assert_int_eq(out[0].server, RT_WEAVE_NONE);
    ck_assert_int_eq(out[1].server, 0);
    ck_assert_int_eq(rt_weave_hop(NULL, NULL, 2, sv, 2, out, &st), -EINVAL);
    ck_assert_int_eq(rt_weave_hop(NULL, cl, 2, NULL, 2, out, &st), -EINVAL);
    ck_assert_int_eq(rt_weave_hop(NULL, cl, 2, sv, 2, NULL, &st), -EINVAL);
    ck_assert_int_eq(rt_weave_fcfs(0, NULL, 1, sv, 2, out), -EINVAL);
    ck_assert_int_eq(rt_weave_hop(NULL, NULL, 0, NULL, 0, NULL, NULL), 0);
}
END_TEST

START_TEST(baselines_follow_their_rules)
{
    /* Two overlapping calls on threads 1 and 2, servers in the opposite order. */
    rt_weave_span cl[2] = {{.span_id = 1, .start_ns = 0, .end_ns = 1000, .thread = 1},
                           {.span_id = 2, .start_ns = 10, .end_ns = 1000, .thread = 2}};
    rt_weave_span sv[2] = {{.span_id = 3, .start_ns = 100, .end_ns = 500, .thread = 2},
                           {.span_id = 4, .start_ns = 200, .end_ns = 600, .thread = 1}};
    rt_weave_link out[2];
    ck_assert_int_eq(rt_weave_fcfs(0, cl, 2, sv, 2, out), 0);
    ck_assert_int_eq(out[0].server, 0);
    ck_assert_int_eq(out[1].server, 1);
    ck_assert_int_eq(rt_weave_vpath(0, cl, 2, sv, 2, out), 0);
    ck_assert_int_eq(out[0].server, 1);
    ck_assert_int_eq(out[1].server, 0);
    /* the weaver's thread constraint does the same */
    rt_weave_opts o;
    rt_weave_opts_default(&o);
    o.thread_constraint = true;
    ck_assert_int_eq(rt_weave_hop(&o, cl, 2, sv, 2, out, NULL), 0);
    ck_assert_int_eq(out[0].server, 1);
    ck_assert_int_eq(out[1].server, 0);
}
END_TEST

START_TEST(deterministic_output)
{
    synth_opts so = {.rate_per_s = 8000, .requests = 1000, .hops = 1, .fail_prob = 0.02,
                     .decoy_rate = 300, .service_median_ns = 800e3, .seed = 3};
    synth s;
    ck_assert_int_eq(synth_make(&s, &so), 0);
    rt_weave_link *a = calloc(s.hop[0].n_clients, sizeof *a), *b = calloc(s.hop[0].n_clients, sizeof *b);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(rt_weave_hop(NULL, s.hop[0].clients, s.hop[0].n_clients, s.hop[0].servers,
                                  s.hop[0].n_servers, a, NULL), 0);
    ck_assert_int_eq(rt_weave_hop(NULL, s.hop[0].clients, s.hop[0].n_clients, s.hop[0].servers,
                                  s.hop[0].n_servers, b, NULL), 0);
    for (size_t i = 0; i < s.hop[0].n_clients; i++) {
        ck_assert_int_eq(a[i].server, b[i].server);
        ck_assert(a[i].confidence == b[i].confidence);
    }
    free(a);
    free(b);
    synth_free(&s);
}
END_TEST

START_TEST(groups_join_hops)
{
    rt_weave_groups *g = rt_weave_groups_new(4);
    ck_assert_ptr_nonnull(g);
    uint64_t hi, lo;
    ck_assert_int_eq(rt_weave_groups_link(g, 0, 1, 0, 2), 0); /* A -> B */
    ck_assert_int_eq(rt_weave_groups_link(g, 0, 2, 0, 3), 0); /* B -> C */
    rt_weave_groups_root(g, 0, 3, &hi, &lo);
    ck_assert_uint_eq(lo, 1);
    rt_weave_groups_root(g, 7, 7, &hi, &lo); /* never linked: itself */
    ck_assert_uint_eq(hi, 7);
    ck_assert_uint_eq(lo, 7);
    /* a chain built child-first still roots at the most upstream trace */
    ck_assert_int_eq(rt_weave_groups_link(g, 5, 11, 5, 12), 0);
    ck_assert_int_eq(rt_weave_groups_link(g, 5, 10, 5, 11), 0);
    rt_weave_groups_root(g, 5, 12, &hi, &lo);
    ck_assert_uint_eq(hi, 5);
    ck_assert_uint_eq(lo, 10);
    /* growth keeps every link */
    for (uint64_t i = 0; i < 5000; i++)
        ck_assert_int_eq(rt_weave_groups_link(g, 9, i, 10, i), 0);
    for (uint64_t i = 0; i < 5000; i += 97) {
        rt_weave_groups_root(g, 10, i, &hi, &lo);
        ck_assert_uint_eq(hi, 9);
        ck_assert_uint_eq(lo, i);
    }
    rt_weave_groups_root(g, 0, 3, &hi, &lo);
    ck_assert_uint_eq(lo, 1);
    rt_weave_groups_free(g);
}
END_TEST

START_TEST(model_is_refitted)
{
    synth_opts so = {.rate_per_s = 3000, .requests = 3000, .hops = 1,
                     .service_median_ns = 800e3, .seed = 21};
    synth s;
    ck_assert_int_eq(synth_make(&s, &so), 0);
    rt_weave_link *l = calloc(s.hop[0].n_clients, sizeof *l);
    ck_assert_ptr_nonnull(l);
    rt_weave_opts o;
    rt_weave_opts_default(&o);
    rt_weave_stats st;
    ck_assert_int_eq(rt_weave_hop(&o, s.hop[0].clients, s.hop[0].n_clients, s.hop[0].servers,
                                  s.hop[0].n_servers, l, &st), 0);
    /* the mixture (plus the outlier component) replaced the first Gaussian, and puts
     * most of its weight where the generator's delays are (30 us + ~60 us) */
    ck_assert_uint_eq(st.model.request.k, o.components + 1);
    double near = rt_weave_model_loglik(&st.model, 90e3, 90e3);
    double far = rt_weave_model_loglik(&st.model, 900e3, 900e3);
    ck_assert(near > far + 5);
    /* one round only: worse or equal, never better than four, on this load */
    rt_weave_link *l1 = calloc(s.hop[0].n_clients, sizeof *l1);
    ck_assert_ptr_nonnull(l1);
    o.iterations = 1;
    ck_assert_int_eq(rt_weave_hop(&o, s.hop[0].clients, s.hop[0].n_clients, s.hop[0].servers,
                                  s.hop[0].n_servers, l1, &st), 0);
    ck_assert_uint_eq(st.model.request.k, 2);
    ck_assert(link_accuracy(&s.hop[0], l) >= link_accuracy(&s.hop[0], l1));
    free(l);
    free(l1);
    synth_free(&s);
}
END_TEST

/* Small batches (a dozen calls, as the coordinator weaves around one triggered
 * request) cannot fit a delay model of their own; a model fitted before on the same
 * hop (opts.prior) must make them more accurate, and never break the rules. */
static double small_batches(const synth_hop *h, const rt_weave_opts *o, size_t per)
{
    size_t right = 0, total = 0;
    rt_weave_span *sv = malloc(h->n_servers * sizeof *sv);
    ptrdiff_t *sidx = malloc(h->n_servers * sizeof *sidx);
    rt_weave_link *res = malloc(per * sizeof *res);
    ck_assert(sv && sidx && res);
    for (size_t a = 0; a + per <= h->n_clients; a += per) {
        int64_t t0 = INT64_MAX, t1 = 0;
        size_t ns = 0;
        for (size_t i = a; i < a + per; i++) {
            if (h->clients[i].start_ns < t0)
                t0 = h->clients[i].start_ns;
            if (h->clients[i].end_ns > t1)
                t1 = h->clients[i].end_ns;
        }
        for (size_t k = 0; k < h->n_servers; k++)
            if (h->servers[k].start_ns >= t0 && h->servers[k].end_ns <= t1) {
                sidx[ns] = (ptrdiff_t)k;
                sv[ns++] = h->servers[k];
            }
        ck_assert_int_eq(rt_weave_hop(o, h->clients + a, per, sv, ns, res, NULL), 0);
        for (size_t i = 0; i < per; i++) {
            ptrdiff_t got = res[i].server == RT_WEAVE_NONE ? RT_WEAVE_NONE : sidx[res[i].server];
            right += got == h->truth[a + i];
            total++;
        }
    }
    free(sv);
    free(sidx);
    free(res);
    return total ? (double)right / (double)total : 0;
}

START_TEST(prior_helps_small_batches)
{
    synth_opts so = {.rate_per_s = 4000, .requests = 4000, .hops = 1, .fail_prob = 0.02,
                     .decoy_rate = 200, .service_median_ns = 800e3, .seed = 41};
    synth s;
    ck_assert_int_eq(synth_make(&s, &so), 0);
    rt_weave_opts o;
    rt_weave_opts_default(&o);
    rt_weave_link *all = malloc(s.hop[0].n_clients * sizeof *all);
    rt_weave_stats st;
    ck_assert_ptr_nonnull(all);
    /* the prior: this hop woven whole, as the coordinator would have seen before */
    ck_assert_int_eq(rt_weave_hop(&o, s.hop[0].clients, s.hop[0].n_clients, s.hop[0].servers,
                                  s.hop[0].n_servers, all, &st), 0);
    double alone = small_batches(&s.hop[0], &o, 8);
    rt_weave_model prior = st.model;
    o.prior = &prior;
    double helped = small_batches(&s.hop[0], &o, 8);
    fprintf(stderr, "small batches of 8: alone %.4f, with a prior %.4f\n", alone, helped);
    ck_assert_msg(helped > alone + 0.02, "prior %.4f vs alone %.4f", helped, alone);
    /* a prior with no components is no prior */
    rt_weave_model empty;
    memset(&empty, 0, sizeof empty);
    o.prior = &empty;
    ck_assert(fabs(small_batches(&s.hop[0], &o, 8) - alone) < 1e-12);
    free(all);
    synth_free(&s);
}
END_TEST

/* A caller on a host whose speed drifts: delays follow a level that changes every
 * 5 ms (lognormal over segments, median 150 us, sigma 1.2: a factor of 3 either way
 * is common), jittered per call (sigma 0.3), as on the loaded machine where the
 * real app's delays measured a lag-1 correlation of 0.6. */
static void drift_make(synth *s, size_t n, double rate, uint64_t seed, rt_weave_span **cl,
                       rt_weave_span **sv)
{
    memset(s, 0, sizeof *s);
    s->rng = seed;
    *cl = calloc(n, sizeof **cl);
    *sv = calloc(n, sizeof **sv);
    ck_assert(*cl && *sv);
    size_t nseg = (size_t)(n / rate / 0.005) + 64;
    double *level = malloc(nseg * sizeof *level);
    ck_assert_ptr_nonnull(level);
    for (size_t i = 0; i < nseg; i++)
        level[i] = synth_lognormal(s, 150e3, 1.2);
#define DRIFT_LEVEL(t) level[(size_t)(((t) - 1e9) / 5e6) < nseg ? (size_t)(((t) - 1e9) / 5e6) : nseg - 1]
    double t = 1e9;
    for (size_t i = 0; i < n; i++) {
        t += synth_exp(s, 1e9 / rate);
        int64_t cs = (int64_t)t;
        int64_t ss = cs + (int64_t)(DRIFT_LEVEL(t) * synth_lognormal(s, 1.0, 0.3));
        int64_t se = ss + (int64_t)synth_exp(s, 800e3);
        int64_t ce = se + (int64_t)(DRIFT_LEVEL((double)se) * synth_lognormal(s, 1.0, 0.3));
        (*cl)[i] = (rt_weave_span){i + 1, 1, i + 1, cs, ce, 0, 0};
        (*sv)[i] = (rt_weave_span){i + 1, 2, i + 1, ss, se, 0, 0};
    }
#undef DRIFT_LEVEL
    free(level);
}

static double drift_accuracy(const rt_weave_span *cl, const rt_weave_span *sv, size_t n,
                             double order_weight, unsigned local_k)
{
    rt_weave_opts o;
    rt_weave_opts_default(&o);
    o.order_weight = order_weight;
    o.local_k = local_k;
    rt_weave_link *l = calloc(n, sizeof *l);
    ck_assert_ptr_nonnull(l);
    rt_weave_stats st;
    ck_assert_int_eq(rt_weave_hop(&o, cl, n, sv, n, l, &st), 0);
    /* the time-local model explains drifting delays better in every later round */
    ck_assert_uint_eq(st.local_rounds, (local_k ? o.iterations - 1 : 0));
    size_t right = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert(l[i].confidence >= 0 && l[i].confidence <= 1);
        right += l[i].server == (ptrdiff_t)i;
    }
    free(l);
    return (double)right / (double)n;
}

/* Delays that drift with the host's speed: the time-local model (each call's
 * delays against its neighbours') must beat the hop's one model, and the order
 * prior must add to it. */
START_TEST(time_local_delays_follow_drift)
{
    synth s;
    rt_weave_span *cl, *sv;
    size_t n = 3000;
    drift_make(&s, n, 2000, 1, &cl, &sv);
    double plain = drift_accuracy(cl, sv, n, 0, 0), local = drift_accuracy(cl, sv, n, 0, 8),
           both = drift_accuracy(cl, sv, n, 0.5, 8);
    fprintf(stderr, "drifting delays: plain %.4f, time-local %.4f, with the order prior %.4f\n",
            plain, local, both);
    ck_assert_msg(local > plain + 0.03, "time-local %.4f vs plain %.4f", local, plain);
    ck_assert_msg(both > local + 0.005, "order prior %.4f vs without %.4f", both, local);
    free(cl);
    free(sv);
}
END_TEST

/* Independent delays (synth.h): the time-local model explains them worse than the
 * hop's model, so it is not used, and every decision is the plain model's. */
START_TEST(time_local_model_only_where_it_fits)
{
    synth_opts so = {.rate_per_s = 5000, .requests = 3000, .hops = 1, .fail_prob = 0.02,
                     .decoy_rate = 250, .service_median_ns = 800e3, .seed = 5};
    synth s;
    ck_assert_int_eq(synth_make(&s, &so), 0);
    const synth_hop *h = &s.hop[0];
    rt_weave_opts o;
    rt_weave_opts_default(&o);
    o.order_weight = 0;
    rt_weave_link *a = calloc(h->n_clients, sizeof *a), *b = calloc(h->n_clients, sizeof *b);
    ck_assert(a && b);
    rt_weave_stats st;
    o.local_k = 8;
    ck_assert_int_eq(rt_weave_hop(&o, h->clients, h->n_clients, h->servers, h->n_servers, a, &st), 0);
    ck_assert_uint_eq(st.local_rounds, 0);
    o.local_k = 0;
    ck_assert_int_eq(rt_weave_hop(&o, h->clients, h->n_clients, h->servers, h->n_servers, b, NULL), 0);
    for (size_t i = 0; i < h->n_clients; i++)
        ck_assert_msg(a[i].server == b[i].server && a[i].confidence == b[i].confidence,
                      "client %zu: %td (%.4f) with the time-local model, %td (%.4f) without", i,
                      a[i].server, a[i].confidence, b[i].server, b[i].confidence);
    free(a);
    free(b);
    synth_free(&s);
}
END_TEST

/* Lone calls (one server each, 5 ms apart) with delays around 250 us each way, every
 * span naming its connection, then two concurrent calls whose true servers fit the
 * swapped pairing far better: c1 [0, 3000] us caused s1 [450, 2950], c2 [200, 3200]
 * caused s2 [250, 2750]; swapped, each pair has 250 us each way. */
#define CONN_LONE 40
static void conn_swap_make(rt_weave_span *cl, rt_weave_span *sv, bool named)
{
    for (size_t i = 0; i < CONN_LONE; i++) {
        int64_t t = (int64_t)i * 5000000, req = 200000 + (int64_t)(i * 37 % 100) * 1000,
                resp = 200000 + (int64_t)(i * 53 % 100) * 1000;
        cl[i] = (rt_weave_span){i + 1, 1, i + 1, t, t + req + 1000000 + resp, 0, 0};
        sv[i] = (rt_weave_span){1000 + i, 2, i + 1, t + req, t + req + 1000000, 0, 0};
    }
    int64_t t = CONN_LONE * 5000000ll;
    cl[CONN_LONE] = (rt_weave_span){500, 1, 500, t, t + 3000000, 0, 0};
    cl[CONN_LONE + 1] = (rt_weave_span){501, 1, 501, t + 200000, t + 3200000, 0, 0};
    sv[CONN_LONE] = (rt_weave_span){1500, 2, 500, t + 450000, t + 2950000, 0, 0};
    sv[CONN_LONE + 1] = (rt_weave_span){1501, 2, 501, t + 250000, t + 2750000, 0, 0};
    for (size_t i = 0; named && i < CONN_LONE + 2; i++)
        cl[i].conn = sv[i].conn = 0xc0000 + i; /* a different pooled connection each */
}

/* The swap case woven with use_conn on (the default) and off. */
static void conn_swap_weave(rt_weave_span *cl, rt_weave_span *sv, bool named, rt_weave_link *on,
                            rt_weave_link *off)
{
    rt_weave_opts o, o_off;
    rt_weave_opts_default(&o);
    o_off = o;
    o_off.use_conn = false;
    conn_swap_make(cl, sv, named);
    ck_assert_int_eq(rt_weave_hop(&o, cl, CONN_LONE + 2, sv, CONN_LONE + 2, on, NULL), 0);
    ck_assert_int_eq(rt_weave_hop(&o_off, cl, CONN_LONE + 2, sv, CONN_LONE + 2, off, NULL), 0);
}

START_TEST(connection_id_fixes_a_timing_swap)
{
    rt_weave_span cl[CONN_LONE + 2], sv[CONN_LONE + 2];
    rt_weave_link with[CONN_LONE + 2], without[CONN_LONE + 2];
    conn_swap_weave(cl, sv, true, with, without);
    /* timing alone swaps the two concurrent calls ... */
    ck_assert_int_eq(without[CONN_LONE].server, CONN_LONE + 1);
    ck_assert_int_eq(without[CONN_LONE + 1].server, CONN_LONE);
    /* ... the connection each came on puts them right, with confidence */
    for (size_t i = 0; i < CONN_LONE + 2; i++) {
        ck_assert_int_eq(with[i].server, (ptrdiff_t)i);
        ck_assert_msg(with[i].confidence > 0.99, "link %zu confidence %f", i, with[i].confidence);
    }
    /* a server on another connection is never linked, even as the only one nested */
    rt_weave_span lone_c = {1, 1, 1, 0, 1000000, 0, 7}, lone_s = {2, 2, 2, 100000, 900000, 0, 8};
    rt_weave_link l;
    ck_assert_int_eq(rt_weave_hop(NULL, &lone_c, 1, &lone_s, 1, &l, NULL), 0);
    ck_assert_int_eq(l.server, RT_WEAVE_NONE);
    ck_assert_int_eq(rt_weave_vpath(0, cl, CONN_LONE + 2, sv, CONN_LONE + 2, with), 0);
    ck_assert_int_eq(with[CONN_LONE].server, CONN_LONE); /* vPath goes by the connection */
}
END_TEST

static void links_equal(const rt_weave_link *a, const rt_weave_link *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(a[i].server, b[i].server);
        ck_assert(a[i].confidence == b[i].confidence);
        ck_assert(a[i].score == b[i].score);
    }
}

START_TEST(without_connection_ids_nothing_changes)
{
    /* the swap case with no span naming a connection: the timing's answer */
    rt_weave_span cl[CONN_LONE + 2], sv[CONN_LONE + 2];
    rt_weave_link a[CONN_LONE + 2], b[CONN_LONE + 2];
    rt_weave_opts o, off;
    conn_swap_weave(cl, sv, false, a, b);
    links_equal(a, b, CONN_LONE + 2);
    rt_weave_opts_default(&o);
    off = o;
    off.use_conn = false;
    ck_assert_int_eq(a[CONN_LONE].server, CONN_LONE + 1);
    /* a loaded workload: the same decisions, bit for bit, with the ids absent
     * (use_conn on) as with the option off on the named spans */
    synth_opts so = {.rate_per_s = 8000, .requests = 2000, .hops = 1, .fail_prob = 0.02,
                     .decoy_rate = 400, .channels = 4, .service_median_ns = 800e3, .seed = 61,
                     .conn_pool = true};
    synth s;
    ck_assert_int_eq(synth_make(&s, &so), 0);
    synth_hop *h = &s.hop[0];
    rt_weave_span *bare_c = malloc(h->n_clients * sizeof *bare_c),
                  *bare_s = malloc(h->n_servers * sizeof *bare_s);
    rt_weave_link *x = malloc(h->n_clients * sizeof *x), *y = malloc(h->n_clients * sizeof *y),
                  *z = malloc(h->n_clients * sizeof *z);
    ck_assert(bare_c && bare_s && x && y && z);
    memcpy(bare_c, h->clients, h->n_clients * sizeof *bare_c);
    memcpy(bare_s, h->servers, h->n_servers * sizeof *bare_s);
    for (size_t i = 0; i < h->n_clients; i++)
        bare_c[i].conn = 0;
    for (size_t i = 0; i < h->n_servers; i++)
        bare_s[i].conn = 0;
    ck_assert_int_eq(rt_weave_hop(&o, bare_c, h->n_clients, bare_s, h->n_servers, x, NULL), 0);
    ck_assert_int_eq(rt_weave_hop(&off, h->clients, h->n_clients, h->servers, h->n_servers, y,
                                  NULL), 0);
    links_equal(x, y, h->n_clients);
    /* and with them, the connections settle what timing left open */
    ck_assert_int_eq(rt_weave_hop(&o, h->clients, h->n_clients, h->servers, h->n_servers, z,
                                  NULL), 0);
    double acc_conn = link_accuracy(h, z), acc_time = link_accuracy(h, x);
    ck_assert_msg(acc_conn >= 0.995 && acc_conn > acc_time, "with ids %.4f, without %.4f",
                  acc_conn, acc_time);
    free(bare_c);
    free(bare_s);
    free(x);
    free(y);
    free(z);
    synth_free(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("weave");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, low_concurrency_is_exact);
    tcase_add_test(tc, beats_fcfs_at_high_concurrency);
    tcase_add_test(tc, confidence_tracks_correctness);
    tcase_add_test(tc, failed_calls_are_unmatched);
    tcase_add_test(tc, skipped_call_in_a_busy_batch);
    tcase_add_test(tc, impossible_timings_never_linked);
    tcase_add_test(tc, random_spans_keep_the_rules);
    tcase_add_test(tc, bad_input_is_counted);
    tcase_add_test(tc, baselines_follow_their_rules);
    tcase_add_test(tc, deterministic_output);
    tcase_add_test(tc, groups_join_hops);
    tcase_add_test(tc, model_is_refitted);
    tcase_add_test(tc, prior_helps_small_batches);
    tcase_add_test(tc, time_local_delays_follow_drift);
    tcase_add_test(tc, time_local_model_only_where_it_fits);
    tcase_add_test(tc, connection_id_fixes_a_timing_swap);
    tcase_add_test(tc, without_connection_ids_nothing_changes);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
