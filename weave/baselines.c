/* baselines.c — the two matchers the weaver is measured against.
 *
 * First come, first served: clients in start order, each takes the earliest-starting
 * server not yet taken that starts inside it. A pointer over the sorted servers skips
 * the prefix that is taken or too early for every later client, so a run is close to
 * linear when calls are short.
 * vPath-style affinity: the same, restricted to servers of the client's channel
 * (its connection id, else its thread: the channel seen on both sides); clients
 * without one, or whose channel has no fitting server, fall back to FCFS over
 * everything left.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>

/* The channel vPath goes by: the connection when named, else the thread. */
static uint64_t channel_of(const rt_weave_span *x)
{
    return x->conn ? x->conn : x->thread;
}

/* Earliest untaken server (in start order from *first) that starts in
 * [c.start - skew, c.end]; channel 0 means any channel. */
static ptrdiff_t earliest(const rt_weave_span *c, uint64_t channel, int64_t skew,
                          const rt_weave_span *sv, const size_t *sorder, size_t nsv,
                          const unsigned char *taken, size_t *first)
{
    while (*first < nsv &&
           (taken[sorder[*first]] || sv[sorder[*first]].start_ns < c->start_ns - skew))
        (*first)++;
    for (size_t q = *first; q < nsv && sv[sorder[q]].start_ns <= c->end_ns; q++) {
        size_t s = sorder[q];
        if (taken[s] || sv[s].start_ns < c->start_ns - skew)
            continue;
        if (channel && channel_of(&sv[s]) != channel)
            continue;
        return (ptrdiff_t)s;
    }
    return RT_WEAVE_NONE;
}

static int match(int64_t skew, bool by_channel, const rt_weave_span *clients, size_t nc,
                 const rt_weave_span *servers, size_t ns, rt_weave_link *out)
{
    if ((nc && (!clients || !out)) || (ns && !servers))
        return -EINVAL;
    size_t ncv = 0, nsv = 0, first = 0;
    size_t *corder = wv_sort_by_start(clients, nc, &ncv);
    size_t *sorder = wv_sort_by_start(servers, ns, &nsv);
    unsigned char *taken = calloc(ns ? ns : 1, 1);
    if (!corder || !sorder || !taken) {
        free(corder);
        free(sorder);
        free(taken);
        return -ENOMEM;
    }
    if (skew < 0)
        skew = 0;
    for (size_t i = 0; i < nc; i++)
        out[i] = (rt_weave_link){RT_WEAVE_NONE, 1.0, 0.0};
    for (size_t p = 0; p < ncv; p++) {
        const rt_weave_span *c = &clients[corder[p]];
        ptrdiff_t s = RT_WEAVE_NONE;
        size_t from = first;
        if (by_channel && channel_of(c))
            s = earliest(c, channel_of(c), skew, servers, sorder, nsv, taken, &from);
        if (s == RT_WEAVE_NONE) {
            from = first;
            s = earliest(c, 0, skew, servers, sorder, nsv, taken, &from);
        }
        /* the shared prefix pointer only moves past servers taken or too early */
        while (first < nsv && (taken[sorder[first]] ||
                               servers[sorder[first]].start_ns < c->start_ns - skew))
            first++;
        if (s != RT_WEAVE_NONE) {
            taken[s] = 1;
            out[corder[p]].server = s;
        }
    }
    free(corder);
    free(sorder);
    free(taken);
    return 0;
}

int rt_weave_fcfs(int64_t skew_ns, const rt_weave_span *clients, size_t n_clients,
                  const rt_weave_span *servers, size_t n_servers, rt_weave_link *out)
{
    return match(skew_ns, false, clients, n_clients, servers, n_servers, out);
}

int rt_weave_vpath(int64_t skew_ns, const rt_weave_span *clients, size_t n_clients,
                   const rt_weave_span *servers, size_t n_servers, rt_weave_link *out)
{
    return match(skew_ns, true, clients, n_clients, servers, n_servers, out);
}
