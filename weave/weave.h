/* weave.h — TraceWeaver-style reconstruction of the links across a hop that carries
 * no context, as a pure C library (libc + libm only).
 *
 * Owns: for one hop (caller service A -> callee service B) the inference of which of
 * A's CLIENT spans caused which of B's SERVER root spans, from timing (and, where
 * both spans name it, the connection the call went over): the candidate sets (the
 * server span nested in the client span, up to a clock skew, on the same connection), the
 * batches (clients that share no candidate are decided apart), the per-hop delay model
 * (a Gaussian, then a Gaussian mixture refitted on the previous iteration's mapping;
 * where delays drift with time, as on a loaded host, a time-local model of each
 * call's delays against its neighbours' and the order of arrival as a soft prior),
 * the joint assignment of each batch (max-weight bipartite matching on
 * log-likelihoods, with a "none" option per call for calls that did not happen), and a
 * confidence per decision. Also the two baselines (first-come-first-served, and
 * vPath-style thread/channel affinity), and the join of trace ids across hops into
 * end-to-end traces (rt_weave_groups), which is how multi-hop chains compose: inside
 * a service the context is kept, so B's server span and B's own client spans share a
 * trace id, and weaving A->B and B->C separately then joining the ids gives A->B->C.
 *
 * Promises: no global state; the input is never modified; every client gets exactly
 * one decision (a server index or RT_WEAVE_NONE) with a confidence in [0,1]; no
 * server is given to two clients; a link is only ever made when the server span lies
 * inside the client span widened by the skew (impossible timings are never linked);
 * bad spans (end before start) are counted and never linked; deterministic output for
 * a given input. Cost is bounded: at most max_candidates per client and batches
 * larger than `window` clients are solved in overlapping windows in time order.
 */
#ifndef RETRACE_WEAVE_H
#define RETRACE_WEAVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One span as the weaver sees it. Times are Unix nanoseconds (any common epoch
 * works: only differences matter). `thread` is optional (0 = unknown): the id of the
 * channel that carried the call, named the same on both sides of the hop (the
 * worker thread of a thread-per-connection server, a multiplexed channel); only the
 * vPath baseline and the optional thread constraint use it.
 * `conn` is optional (0 = unknown): the identity of the connection that carried the
 * call, one request at a time (a keep-alive connection pool, HTTP/1.1 without
 * pipelining), the same number on both sides of the hop — what the socket layer
 * shows without any context propagation: the caller's local and remote
 * address:port are the callee's remote and local ones (the coordinator hashes
 * them with rt_wire_conn_id). With opts.use_conn, when both sides name one a pair
 * whose connections differ is impossible, and a client whose own connection
 * served a candidate keeps only such candidates (see use_conn). */
typedef struct rt_weave_span {
    uint64_t span_id;
    uint64_t trace_hi, trace_lo;
    int64_t start_ns, end_ns;
    uint64_t thread;
    uint64_t conn;
} rt_weave_span;

#define RT_WEAVE_NONE ((ptrdiff_t)-1)

/* The decision for one client span (out[i] is for clients[i]). */
typedef struct rt_weave_link {
    ptrdiff_t server;  /* index into the servers array, or RT_WEAVE_NONE */
    double confidence; /* in [0,1]: the chosen option's share against its alternatives */
    double score;      /* log-likelihood of the chosen option (0 for baselines) */
} rt_weave_link;

typedef struct rt_weave_opts {
    int64_t skew_ns;         /* clock skew allowed on each nesting bound (default 0) */
    unsigned iterations;     /* assignment/refit rounds (default 4, at least 1) */
    unsigned components;     /* Gaussian mixture components after round 1 (default 3, 1..3),
                                plus one wide rare outlier component */
    double skip_nats;        /* a call is left unmatched when every candidate is this much
                                less likely than the model's peak (default 14) */
    unsigned max_candidates; /* per client, the earliest-starting ones kept (default 96) */
    unsigned window;         /* batch size solved exactly; larger ones in windows (default 48) */
    bool thread_constraint;  /* when both sides name a thread, they must be equal */
    /* The connection id (rt_weave_span.conn; default true). A connection carries one
     * request at a time, so (1) a client and a server that both name a connection
     * can be linked only if it is the same one, and (2) a server nested in a client
     * on the client's own connection was caused by it: a client with such a
     * candidate keeps only those (a server naming no connection could come from
     * anywhere, and is then ruled out), and "none" is no option for that client.
     * Spans naming no connection (conn 0) weave
     * exactly as without this option. */
    bool use_conn;
    /* The order of arrival as a soft prior (0 = off; default 0.5), in the rounds that
     * use the time-local model (below): a pair's score also counts its order
     * inversions against the previous round's mapping (calls issued before it whose
     * server started after its server, and calls issued after it whose server
     * started before), scored by the histogram of inversions over that mapping's
     * pairs, times this weight. Where calls keep their order it favours the FIFO
     * mapping; where they do not, the histogram is flat and the prior says little.
     * Without the time-local model the Gaussian request delay already keeps the
     * order, and the prior would count it twice. */
    double order_weight;
    /* Time-local delays (0 = off; default 8): from the second round on, a pair's delays are
     * scored relative to those of the previous round's pairs around it in time —
     * the mean log request and response delay of the `local_k` chosen calls on each
     * side in start order — by a mixture fitted on those log residuals. A loaded
     * host stalls for a while, and every call crossing the stall is slow together.
     * A round uses it only when it explains the chosen pairs better (a higher total
     * log-likelihood) than the hop's model: never on independent delays. */
    unsigned local_k;
    /* NULL, or a delay model fitted before on this hop (an earlier run's stats.model):
     * used instead of a fit on this batch while the batch chooses fewer than
     * RT_WEAVE_PRIOR_KEEP pairs — a handful of calls cannot fit a model of their own
     * (the coordinator weaves one triggered request's neighbourhood at a time). */
    const struct rt_weave_model *prior;
} rt_weave_opts;
#define RT_WEAVE_PRIOR_KEEP 50

void rt_weave_opts_default(rt_weave_opts *o);

/* The fitted delay model of a hop: request delay (server start - client start) and
 * response delay (client end - server end), each a 1-D Gaussian mixture. */
#define RT_WEAVE_MAX_COMPONENTS 4
typedef struct rt_weave_mixture {
    unsigned k;
    double weight[RT_WEAVE_MAX_COMPONENTS], mean[RT_WEAVE_MAX_COMPONENTS],
        sd[RT_WEAVE_MAX_COMPONENTS];
} rt_weave_mixture;

struct rt_weave_model {
    rt_weave_mixture request, response;
};
typedef struct rt_weave_model rt_weave_model;

typedef struct rt_weave_stats {
    size_t clients, servers;
    size_t bad_spans;      /* end before start: counted, never linked */
    size_t candidates;     /* candidate pairs kept */
    size_t truncated;      /* clients whose candidate list was cut at max_candidates */
    size_t batches;        /* batches with at least one candidate */
    size_t largest_batch;  /* clients in the largest batch */
    size_t windowed;       /* batches larger than the window (solved in windows) */
    size_t linked, unmatched;
    unsigned iterations;
    unsigned local_rounds; /* rounds that scored with the time-local model (local_k) */
    rt_weave_model model;  /* the hop's model of the last round */
} rt_weave_stats;

/* Weave one hop. out must hold n_clients entries; stats may be NULL.
 * Returns 0, -EINVAL (null arrays with nonzero counts, null out), or -ENOMEM. */
int rt_weave_hop(const rt_weave_opts *o, const rt_weave_span *clients, size_t n_clients,
                 const rt_weave_span *servers, size_t n_servers, rt_weave_link *out,
                 rt_weave_stats *stats);

/* Baseline: first come, first served. Clients in start order each take the
 * earliest-starting unmatched server that starts inside the client span (from its
 * start, minus the skew, to its end). Confidence 1 for every decision (the baseline
 * has no notion of doubt; it is reported as such). */
int rt_weave_fcfs(int64_t skew_ns, const rt_weave_span *clients, size_t n_clients,
                  const rt_weave_span *servers, size_t n_servers, rt_weave_link *out);

/* Baseline: vPath-style affinity. A client naming a channel — its connection id
 * when it has one, else its thread — takes the earliest unmatched server of the
 * same channel starting inside it; a client without one (or with no such server)
 * falls back to FCFS over all servers. */
int rt_weave_vpath(int64_t skew_ns, const rt_weave_span *clients, size_t n_clients,
                   const rt_weave_span *servers, size_t n_servers, rt_weave_link *out);

/* Log density of the model at one pair of delays (for tests and tools). */
double rt_weave_model_loglik(const rt_weave_model *m, double request_ns, double response_ns);

/* ------------------------------------------------------------ trace id groups */

/* A union-find over 128-bit trace ids: link the client's trace to the chosen
 * server's trace for every hop, then each trace's root names its end-to-end trace
 * (the root is the member linked first as a parent: the caller side wins). */
typedef struct rt_weave_groups rt_weave_groups;

rt_weave_groups *rt_weave_groups_new(size_t expected);
void rt_weave_groups_free(rt_weave_groups *g);
/* Join child into parent's group. Returns 0 or -ENOMEM. */
int rt_weave_groups_link(rt_weave_groups *g, uint64_t parent_hi, uint64_t parent_lo,
                         uint64_t child_hi, uint64_t child_lo);
/* The group root of a trace id (the id itself when never linked). */
void rt_weave_groups_root(rt_weave_groups *g, uint64_t hi, uint64_t lo, uint64_t *root_hi,
                          uint64_t *root_lo);

#ifdef __cplusplus
}
#endif

#endif
