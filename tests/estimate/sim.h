/* sim.h — synthetic traces with known truth for the estimate/ test and benchmark.
 *
 * A population of traces over three service trees (a shop fan-out, a call chain,
 * a gateway with repeated calls); each service runs on its own host, and every host
 * has a power-of-two rate 2^-k chosen per case. Calls repeat at random (retries,
 * loops) and spans match the predicate ("status error") at random, so the truth
 * differs per trace. Sampling is consistent: a trace's 56-bit random value is the
 * top 56 bits of splitmix64(seed, trace index) and a host at rate 2^-k keeps its
 * spans iff rt_est_keeps(rv, k) (the top k bits are all ones: OpenTelemetry's
 * threshold rule). Because that decision is nested in k, a trace's kept spans are
 * the spans with rate_exp <= rt_est_rv_level(rv); the test and the benchmark
 * evaluate every estimator once per possible kept set and then draw the level per
 * trace and seed, which is what lets many seeds over 10^5 traces run in a second.
 */
#ifndef RETRACE_TESTS_ESTIMATE_SIM_H
#define RETRACE_TESTS_ESTIMATE_SIM_H

#include "estimate.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { SIM_HOSTS = 10, SIM_MAX_SPANS = 64 };

/* hosts: 0 frontend, 1 cart, 2 catalog, 3 inventory, 4 payment, 5 api, 6 auth,
 * 7 orders, 8 db, 9 search */
typedef struct sim_node {
    int parent;      /* node index of the caller, -1 for the root */
    uint32_t host;
    unsigned repeat; /* the call happens 1..repeat times */
} sim_node;

static const sim_node sim_tree_shop[] = {
    {-1, 0, 1}, {0, 1, 1}, {0, 2, 1}, {2, 3, 2}, {0, 4, 1}, {4, 8, 1},
};
static const sim_node sim_tree_chain[] = {
    {-1, 5, 1}, {0, 6, 1}, {0, 7, 1}, {2, 8, 3},
};
static const sim_node sim_tree_gateway[] = {
    {-1, 0, 1}, {0, 9, 3}, {1, 8, 1}, {0, 4, 1},
};

static inline uint64_t sim_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

typedef struct sim_rng {
    uint64_t s;
} sim_rng;

static inline uint64_t sim_next(sim_rng *r)
{
    r->s += 0x9E3779B97F4A7C15ull;
    return sim_mix(r->s);
}

static inline double sim_uniform(sim_rng *r)
{
    return (double)(sim_next(r) >> 11) * 0x1.0p-53;
}

typedef struct sim_pop {
    rt_est_span *spans; /* every span of every trace, each trace contiguous */
    size_t *start;      /* trace t is spans[start[t] .. start[t + 1]) */
    size_t ntraces;
    unsigned kmax;      /* the largest rate exponent of any host */
} sim_pop;

/* Append one tree's spans; returns the span count. */
static size_t sim_grow(const sim_node *tree, size_t nodes, double error_p, sim_rng *rng,
                       const uint8_t *host_exp, rt_est_span *out)
{
    uint64_t last_id[16] = {0}; /* the latest span id of each node, parent of its callees */
    size_t n = 0;
    for (size_t i = 0; i < nodes && i < 16; i++) {
        unsigned times = 1 + (unsigned)(sim_next(rng) % tree[i].repeat);
        uint64_t parent = tree[i].parent >= 0 ? last_id[tree[i].parent] : 0;
        if (tree[i].parent >= 0 && parent == 0)
            continue;
        for (unsigned t = 0; t < times && n < SIM_MAX_SPANS; t++) {
            rt_est_span *s = &out[n++];
            s->span_id = n;
            s->parent_id = parent;
            s->host = tree[i].host;
            s->rate_exp = host_exp[tree[i].host];
            s->match = sim_uniform(rng) < error_p;
            last_id[i] = s->span_id;
        }
    }
    return n;
}

/* ntraces traces, trees in proportion 3:2:1. */
static inline int sim_pop_make(sim_pop *p, size_t ntraces, const uint8_t host_exp[SIM_HOSTS],
                               double error_p, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->spans = malloc(ntraces * 16 * sizeof *p->spans);
    p->start = malloc((ntraces + 1) * sizeof *p->start);
    if (!p->spans || !p->start) {
        free(p->spans);
        free(p->start);
        return -1;
    }
    for (unsigned h = 0; h < SIM_HOSTS; h++)
        if (host_exp[h] > p->kmax)
            p->kmax = host_exp[h];
    sim_rng rng = {seed};
    size_t total = 0;
    for (size_t t = 0; t < ntraces; t++) {
        p->start[t] = total;
        unsigned pick = (unsigned)(sim_next(&rng) % 6);
        const sim_node *tree = pick < 3 ? sim_tree_shop : pick < 5 ? sim_tree_chain
                                                                    : sim_tree_gateway;
        size_t nodes = pick < 3 ? sizeof sim_tree_shop / sizeof *tree
                     : pick < 5 ? sizeof sim_tree_chain / sizeof *tree
                                : sizeof sim_tree_gateway / sizeof *tree;
        total += sim_grow(tree, nodes, error_p, &rng, host_exp, p->spans + total);
    }
    p->start[ntraces] = total;
    p->ntraces = ntraces;
    return 0;
}

static inline void sim_pop_free(sim_pop *p)
{
    free(p->spans);
    free(p->start);
    memset(p, 0, sizeof *p);
}

/* The 56-bit random value of trace t under a seed (the "trace id's randomness"). */
static inline uint64_t sim_trace_rv(uint64_t seed, size_t t)
{
    return sim_mix(sim_mix(seed) ^ (uint64_t)t) >> 8;
}

/* Copy the spans trace t keeps with random value level g (rate_exp <= g) into out,
 * deciding each span with rt_est_keeps on a random value of exactly that level. */
static inline size_t sim_kept(const sim_pop *p, size_t t, unsigned g, rt_est_span *out)
{
    /* the smallest rv whose level is g: g leading ones then a zero */
    uint64_t rv = g >= RT_EST_MAX_EXP ? RT_EST_RV_MASK : rt_est_threshold(g);
    size_t n = 0;
    for (size_t i = p->start[t]; i < p->start[t + 1]; i++)
        if (rt_est_keeps(rv, p->spans[i].rate_exp))
            out[n++] = p->spans[i];
    return n;
}

#endif
