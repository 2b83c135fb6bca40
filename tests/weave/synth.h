/* synth.h — synthetic workloads with a known mapping, for tests/weave and bench/weave.
 *
 * Requests arrive at service A as a Poisson process. A calls B (hop 0); with two hops
 * B calls C (hop 1) from inside its server span. No hop carries context: each callee
 * starts a fresh trace id, so the weaver sees only times (and a channel id, the
 * multiplexed connection the call used, named on both sides). Delays: network
 * request/response delays are a shifted lognormal with a rare slow path (a
 * retransmission-like extra delay); service times are lognormal (heavy-ish tail).
 * Optional: calls that fail before reaching the callee (a client span, no server
 * span), and decoy server spans of the callee caused by other callers, and (conn_pool)
 * connection ids: each caller keeps a keep-alive pool per hop, a call takes the
 * lowest-numbered connection not carrying a call, so a connection carries one call at
 * a time and is named on both sides (decoys come on the other callers' own
 * connections). The truth says
 * for each client span which server span it caused (or none) and which request it
 * belongs to.
 */
#ifndef RETRACE_TEST_WEAVE_SYNTH_H
#define RETRACE_TEST_WEAVE_SYNTH_H

#include "weave.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SYNTH_MAX_HOPS 2
#define SYNTH_MAX_CONNS 4096 /* pooled connections per hop; more in flight: conn 0 */

typedef struct synth_opts {
    double rate_per_s;  /* arrivals at A */
    size_t requests;
    unsigned hops;      /* 1 or 2 */
    double fail_prob;   /* a call fails before the callee (client span, no server span) */
    double decoy_rate;  /* per second, server spans of each callee from other callers */
    unsigned channels;  /* multiplexed connections per hop (thread ids), 0 = none */
    bool conn_pool;     /* name each call's pooled connection (rt_weave_span.conn) */
    double service_median_ns;
    uint64_t seed;
} synth_opts;

typedef struct synth_hop {
    rt_weave_span *clients, *servers;
    size_t n_clients, n_servers, cap_clients, cap_servers;
    ptrdiff_t *truth;    /* per client: the true server index or RT_WEAVE_NONE */
    size_t *request;     /* per client: its request */
    int64_t *conn_busy;  /* conn_pool: per pooled connection, the end of its last call */
} synth_hop;

typedef struct synth {
    synth_hop hop[SYNTH_MAX_HOPS];
    unsigned hops;
    size_t requests;
    int64_t *duration;   /* per request: A's root span duration */
    uint64_t rng;
} synth;

static inline uint64_t synth_next(synth *s)
{
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline double synth_uniform(synth *s)
{
    return ((double)(synth_next(s) >> 11) + 0.5) / 9007199254740992.0;
}

static inline double synth_exp(synth *s, double mean)
{
    return -mean * log(synth_uniform(s));
}

static inline double synth_lognormal(synth *s, double median, double sigma)
{
    double z = sqrt(-2 * log(synth_uniform(s))) * cos(6.283185307179586 * synth_uniform(s));
    return median * exp(sigma * z);
}

/* Network delay, one way: 30 us floor, lognormal body, 3 % slow path. */
static inline int64_t synth_net(synth *s)
{
    double d = 30e3 + synth_lognormal(s, 60e3, 0.5);
    if (synth_uniform(s) < 0.03)
        d += synth_exp(s, 400e3);
    return (int64_t)d;
}

static inline int synth_push(rt_weave_span **a, size_t *n, size_t *cap, rt_weave_span v)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        rt_weave_span *m = realloc(*a, c * sizeof *m);
        if (!m)
            return -1;
        *a = m;
        *cap = c;
    }
    (*a)[(*n)++] = v;
    return 0;
}

static inline int synth_add_client(synth_hop *h, rt_weave_span c, ptrdiff_t truth, size_t req)
{
    size_t old_cap = h->cap_clients;
    if (synth_push(&h->clients, &h->n_clients, &h->cap_clients, c) < 0)
        return -1;
    if (h->cap_clients != old_cap) {
        ptrdiff_t *t = realloc(h->truth, h->cap_clients * sizeof *t);
        if (t)
            h->truth = t;
        size_t *r = realloc(h->request, h->cap_clients * sizeof *r);
        if (r)
            h->request = r;
        if (!t || !r)
            return -1;
    }
    h->truth[h->n_clients - 1] = truth;
    h->request[h->n_clients - 1] = req;
    return 0;
}

/* conn_pool: the lowest-numbered connection of hop h free at time t (its every call
 * ended before t), or -1 (pool exhausted or off). Calls are generated per request,
 * not in time order; a connection is free only if the latest end of everything it
 * carried is before t, so it never carries two calls at once. */
static inline int synth_conn_take(synth_hop *h, const synth_opts *o, int64_t t)
{
    if (!o->conn_pool || !h->conn_busy)
        return -1;
    for (int i = 0; i < SYNTH_MAX_CONNS; i++)
        if (h->conn_busy[i] < t) {
            h->conn_busy[i] = INT64_MAX; /* until the call's end is known */
            return i;
        }
    return -1;
}

static inline uint64_t synth_conn_id(unsigned h, int slot)
{
    return slot < 0 ? 0 : ((uint64_t)(h + 1) << 32) | (uint64_t)(slot + 1);
}

/* One call on hop h from a caller in trace `trace_hi` of request r starting at cs;
 * returns the client's end time. */
static inline int64_t synth_call(synth *s, const synth_opts *o, unsigned h, size_t r,
                                 uint64_t trace_hi, int64_t cs)
{
    synth_hop *hop = &s->hop[h];
    uint64_t chan = o->channels ? 1 + synth_next(s) % o->channels : 0;
    int slot = synth_conn_take(hop, o, cs);
    rt_weave_span c = {.span_id = ((uint64_t)h << 56) | (hop->n_clients + 1),
                       .trace_hi = trace_hi, .trace_lo = r + 1, .start_ns = cs,
                       .thread = chan, .conn = synth_conn_id(h, slot)};
    if (synth_uniform(s) < o->fail_prob) { /* refused: no server span */
        c.end_ns = cs + (int64_t)(20e3 + synth_exp(s, 150e3));
        if (slot >= 0)
            hop->conn_busy[slot] = c.end_ns;
        synth_add_client(hop, c, RT_WEAVE_NONE, r);
        return c.end_ns;
    }
    rt_weave_span sv = {.span_id = ((uint64_t)(h + 1) << 56) | (hop->n_servers + 1),
                        .trace_hi = trace_hi + 1, .trace_lo = r + 1, .thread = chan,
                        .conn = c.conn};
    sv.start_ns = cs + synth_net(s);
    if (h + 1 < s->hops) {
        int64_t pre = (int64_t)synth_exp(s, 60e3);
        int64_t child_end = synth_call(s, o, h + 1, r, trace_hi + 1, sv.start_ns + pre);
        sv.end_ns = child_end + (int64_t)synth_exp(s, 60e3);
    } else {
        sv.end_ns = sv.start_ns + (int64_t)synth_lognormal(s, o->service_median_ns, 0.7);
    }
    ptrdiff_t idx = (ptrdiff_t)hop->n_servers;
    synth_push(&hop->servers, &hop->n_servers, &hop->cap_servers, sv);
    c.end_ns = sv.end_ns + synth_net(s);
    if (slot >= 0)
        hop->conn_busy[slot] = c.end_ns;
    synth_add_client(hop, c, idx, r);
    return c.end_ns;
}

static inline void synth_free(synth *s)
{
    for (unsigned h = 0; h < SYNTH_MAX_HOPS; h++) {
        free(s->hop[h].clients);
        free(s->hop[h].servers);
        free(s->hop[h].truth);
        free(s->hop[h].request);
        free(s->hop[h].conn_busy);
    }
    free(s->duration);
    memset(s, 0, sizeof *s);
}

static inline int synth_make(synth *s, const synth_opts *o)
{
    memset(s, 0, sizeof *s);
    s->rng = o->seed;
    s->hops = o->hops >= 2 ? 2 : 1;
    s->requests = o->requests;
    s->duration = calloc(o->requests ? o->requests : 1, sizeof *s->duration);
    if (!s->duration)
        return -1;
    for (unsigned h = 0; o->conn_pool && h < s->hops; h++) {
        s->hop[h].conn_busy = malloc(SYNTH_MAX_CONNS * sizeof *s->hop[h].conn_busy);
        if (!s->hop[h].conn_busy)
            return -1;
        for (int i = 0; i < SYNTH_MAX_CONNS; i++)
            s->hop[h].conn_busy[i] = INT64_MIN;
    }
    double t = 1e9;
    for (size_t r = 0; r < o->requests; r++) {
        t += synth_exp(s, 1e9 / o->rate_per_s);
        int64_t start = (int64_t)t, cs = start + (int64_t)synth_exp(s, 100e3);
        int64_t ce = synth_call(s, o, 0, r, 0x1000, cs);
        s->duration[r] = ce + (int64_t)synth_exp(s, 100e3) - start;
    }
    if (o->decoy_rate > 0) { /* other callers' requests to each callee */
        for (unsigned h = 0; h < s->hops; h++) {
            double d = 1e9, end = t;
            for (size_t j = 0; d < end; j++) {
                d += synth_exp(s, 1e9 / o->decoy_rate);
                rt_weave_span sv = {.span_id = (0xdull << 56) | (j + 1), .trace_hi = 0xdec0,
                                    .trace_lo = ((uint64_t)h << 32) | (j + 1),
                                    .start_ns = (int64_t)d,
                                    .thread = o->channels ? 1 + synth_next(s) % o->channels : 0,
                                    .conn = o->conn_pool ? (0xdull << 48) | (j + 1) : 0};
                sv.end_ns = sv.start_ns + (int64_t)synth_lognormal(s, o->service_median_ns, 0.7);
                synth_push(&s->hop[h].servers, &s->hop[h].n_servers, &s->hop[h].cap_servers, sv);
            }
        }
    }
    return 0;
}

static inline int synth_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Share of requests whose every link is right; slow10 restricts to the slowest 10 %
 * of requests by A's root duration (NULL to skip). */
static inline double synth_trace_accuracy(const synth *s, rt_weave_link *const *links,
                                          double *slow10)
{
    size_t n = s->requests, right = 0, slow_right = 0, slow_n = 0;
    unsigned char *ok = malloc(n ? n : 1);
    int64_t *sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!ok || !sorted) {
        free(ok);
        free(sorted);
        return -1;
    }
    memset(ok, 1, n);
    for (unsigned h = 0; h < s->hops; h++)
        for (size_t i = 0; i < s->hop[h].n_clients; i++)
            if (links[h][i].server != s->hop[h].truth[i])
                ok[s->hop[h].request[i]] = 0;
    memcpy(sorted, s->duration, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, synth_cmp_i64);
    int64_t cut = n ? sorted[n - 1 - n / 10] : 0;
    for (size_t r = 0; r < n; r++) {
        right += ok[r];
        if (s->duration[r] >= cut && n / 10 > 0) {
            slow_n++;
            slow_right += ok[r];
        }
    }
    if (slow10)
        *slow10 = slow_n ? (double)slow_right / (double)slow_n : 1.0;
    free(ok);
    free(sorted);
    return n ? (double)right / (double)n : 1.0;
}

#endif
