/* weave.c — the reconstruction of one hop (TraceWeaver §4, as built here).
 *
 * 1. Candidates. Clients and servers are sorted by start. A server is a candidate for
 *    a client when it starts no earlier than the client and ends no later than it
 *    (each bound widened by the skew): a server that sticks out cannot have been
 *    caused by that call. Binary search finds the servers starting in the client's
 *    span; at most max_candidates (the earliest) are kept. With connection ids
 *    (use_conn), a server on another connection is no candidate, and a client one
 *    of whose nested servers ran on its own connection keeps only those: with one
 *    request at a time on a connection, that server was this call's, and "none" is
 *    no option for it (in the assignment nor in its confidence). The batches
 *    then fall apart into (mostly) lone pairs, and timing decides only what the
 *    connections leave open.
 * 2. Batches. A union-find over servers joins the candidates of each client; clients
 *    whose candidates fall in one component form a batch, and batches share nothing,
 *    so each is decided alone.
 * 3. Model. Round one fits one Gaussian per delay (request, response) on the
 *    unambiguous pairs (a lone client with a lone candidate) when there are enough,
 *    else on every candidate pair weighted 1/candidates. Each later round refits a
 *    Gaussian mixture on the pairs the previous round chose, and a time-local
 *    model (each call's log delays against the mean of its chosen neighbours'),
 *    used instead when it explains the chosen pairs better (delays that drift
 *    with the host's load); with it, the order of arrival: a pair's inversions
 *    against the previous mapping, scored by their histogram over that mapping.
 * 4. Assignment. Each batch is a max-weight bipartite matching: the weight of a pair
 *    is its log-likelihood under the model, and every client also has its own "none"
 *    option worth the model's peak minus skip_nats (a call that found no server: a
 *    cache hit, a refused connection, a server outside the data). The Hungarian
 *    method solves it exactly; a batch larger than `window` clients is solved in
 *    windows of `window` clients in time order, committing the first half of each.
 * 5. Confidence. For each client the chosen option is compared with every single
 *    change of it: "none", an unchosen candidate, or a swap with the client holding
 *    that candidate (who then takes ours, or none). The confidence is the chosen
 *    option's share, 1 / (1 + sum of the likelihood ratios of the alternatives).
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NONE_IDX ((size_t)-1)
#define UNAMBIGUOUS_MIN 10 /* lone pairs needed to trust them for the first model */
#define REFIT_MIN 10       /* chosen pairs needed to refit */
#define REFIT_SAMPLES 5000 /* chosen pairs used by a refit at most */
#define SCORE_FLOOR 30.0   /* scores are clamped to skip - SCORE_FLOOR: small numbers */
#define FORBIDDEN 1e7      /* cost of an impossible pair in the assignment */
#define ORDER_BINS 16      /* inversion counts 0..14, and 15 or more */
#define ORDER_SCAN 64      /* earlier calls looked at for inversions, at most */
#define DELAY_FLOOR 10e3   /* ns: delays below count as this on a log scale */
#define LOG_SCALE 1000.0   /* log residuals are modelled in milli-units (sd floor 0.2) */

void rt_weave_opts_default(rt_weave_opts *o)
{
    memset(o, 0, sizeof *o);
    o->skew_ns = 0;
    o->iterations = 4;
    o->components = 3;
    o->skip_nats = 14.0;
    o->max_candidates = 96;
    o->window = 48;
    o->thread_constraint = false;
    o->use_conn = true;
    o->order_weight = 0.5;
    o->local_k = 8;
}

typedef struct sort_key {
    int64_t start, end;
    size_t idx;
} sort_key;

static int cmp_key(const void *a, const void *b)
{
    const sort_key *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

size_t *wv_sort_by_start(const rt_weave_span *spans, size_t n, size_t *n_valid)
{
    sort_key *k = malloc((n ? n : 1) * sizeof *k);
    size_t *out = malloc((n ? n : 1) * sizeof *out), v = 0;
    if (!k || !out) {
        free(k);
        free(out);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (spans[i].end_ns >= spans[i].start_ns)
            k[v++] = (sort_key){spans[i].start_ns, spans[i].end_ns, i};
    qsort(k, v, sizeof *k, cmp_key);
    for (size_t i = 0; i < v; i++)
        out[i] = k[i].idx;
    free(k);
    *n_valid = v;
    return out;
}

/* Everything one run of the weaver owns. Clients are addressed by their position in
 * start order (p), servers by their index in the caller's array (s). */
typedef struct weaver {
    const rt_weave_opts *o;
    const rt_weave_span *cl, *sv;
    size_t nc, ns, ncv;   /* clients, servers, valid clients */
    size_t *corder;       /* p -> client index */
    size_t *cand_off;     /* ncv + 1 offsets into the candidate arrays */
    size_t *cand_srv;     /* candidate -> server index */
    bool *own_conn;       /* p -> its candidates ran on its own connection (use_conn) */
    double *cand_req, *cand_resp, *cand_score;
    double *cand_order;    /* the order prior's term per candidate (<= 0), or NULL */
    double *order_buf;     /* its storage */
    int64_t *chosen_start; /* p -> start of its chosen server (previous round) */
    size_t ncand;
    size_t *batch_clients; /* positions p grouped by batch, in start order */
    size_t *batch_off;     /* nbatch + 1 */
    size_t nbatch;
    size_t *choice;        /* p -> candidate index or NONE_IDX */
    size_t *taken_by;      /* s -> p or NONE_IDX */
    size_t *col_of, *stamp;
    size_t stamp_now;
    double skip;           /* score of "none" under the hop's model */
    rt_weave_model model;  /* the hop's model */
    double *skip_p;        /* p -> its score of "none" */
    bool local_on;         /* this round scores time-local residuals */
    double *loc_req, *loc_resp; /* p -> local mean log delays (time-local model) */
    rt_weave_model resid;  /* the time-local model: log residuals, in milli-units */
    wv_assign_ws ws;
    double *cost;
    size_t cost_cap;
    size_t *rowcol, *win_srv;
    size_t windowed;
    double broad_sd;       /* width of the outlier component: the mean client span */
} weaver;

/* The score of "none" for client p: the model's peak minus skip_nats (under the
 * time-local model, at the client's local typical delays). */
static double skip_of(const weaver *w, size_t p)
{
    return w->skip_p[p];
}

static size_t uf_find(size_t *parent, size_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

static bool thread_ok(const weaver *w, const rt_weave_span *c, const rt_weave_span *s)
{
    return !w->o->thread_constraint || !c->thread || !s->thread || c->thread == s->thread;
}

/* Both name the same connection (use_conn). */
static bool same_conn(const weaver *w, const rt_weave_span *c, const rt_weave_span *s)
{
    return w->o->use_conn && c->conn && c->conn == s->conn;
}

/* May s be c's server as far as connections go: not when both name one and they
 * differ (the connection is seen the same from both ends). */
static bool conn_ok(const weaver *w, const rt_weave_span *c, const rt_weave_span *s)
{
    return !w->o->use_conn || !c->conn || !s->conn || c->conn == s->conn;
}

/* Does a server nested in client c (from sorted position q on) run on c's own
 * connection? Then it was caused by c — the connection carries one request at a
 * time — and c's other candidates are ruled out. */
static bool has_own_conn_server(const weaver *w, const rt_weave_span *c, const size_t *sorder,
                                size_t nsv, size_t q, int64_t skew)
{
    if (!w->o->use_conn || !c->conn)
        return false;
    for (; q < nsv && w->sv[sorder[q]].start_ns <= c->end_ns + skew; q++) {
        const rt_weave_span *s = &w->sv[sorder[q]];
        if (s->end_ns <= c->end_ns + skew && same_conn(w, c, s) && thread_ok(w, c, s))
            return true;
    }
    return false;
}

/* First position in the sorted servers whose start is >= t. */
static size_t lower_bound(const rt_weave_span *sv, const size_t *sorder, size_t n, int64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sv[sorder[mid]].start_ns < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int build_candidates(weaver *w, const size_t *sorder, size_t nsv, rt_weave_stats *st)
{
    size_t cap = w->ncv * 4 + 16;
    w->cand_off = malloc((w->ncv + 1) * sizeof *w->cand_off);
    w->cand_srv = malloc(cap * sizeof *w->cand_srv);
    w->own_conn = calloc(w->ncv + 1, sizeof *w->own_conn);
    if (!w->cand_off || !w->cand_srv || !w->own_conn)
        return -1;
    int64_t skew = w->o->skew_ns > 0 ? w->o->skew_ns : 0;
    size_t maxc = w->o->max_candidates ? w->o->max_candidates : 1;
    w->ncand = 0;
    for (size_t p = 0; p < w->ncv; p++) {
        const rt_weave_span *c = &w->cl[w->corder[p]];
        w->cand_off[p] = w->ncand;
        size_t kept = 0, q0 = lower_bound(w->sv, sorder, nsv, c->start_ns - skew);
        bool own_only = has_own_conn_server(w, c, sorder, nsv, q0, skew);
        w->own_conn[p] = own_only;
        for (size_t q = q0; q < nsv && w->sv[sorder[q]].start_ns <= c->end_ns + skew; q++) {
            const rt_weave_span *s = &w->sv[sorder[q]];
            if (s->end_ns > c->end_ns + skew || !thread_ok(w, c, s) || !conn_ok(w, c, s) ||
                (own_only && !same_conn(w, c, s)))
                continue;
            if (kept == maxc) {
                st->truncated++;
                break;
            }
            if (w->ncand == cap) {
                cap *= 2;
                size_t *n = realloc(w->cand_srv, cap * sizeof *n);
                if (!n)
                    return -1;
                w->cand_srv = n;
            }
            w->cand_srv[w->ncand++] = sorder[q];
            kept++;
        }
    }
    w->cand_off[w->ncv] = w->ncand;
    size_t n = w->ncand ? w->ncand : 1;
    w->cand_req = malloc(n * sizeof *w->cand_req);
    w->cand_resp = malloc(n * sizeof *w->cand_resp);
    w->cand_score = malloc(n * sizeof *w->cand_score);
    if (!w->cand_req || !w->cand_resp || !w->cand_score)
        return -1;
    for (size_t p = 0; p < w->ncv; p++) {
        const rt_weave_span *c = &w->cl[w->corder[p]];
        for (size_t k = w->cand_off[p]; k < w->cand_off[p + 1]; k++) {
            const rt_weave_span *s = &w->sv[w->cand_srv[k]];
            w->cand_req[k] = (double)(s->start_ns - c->start_ns);
            w->cand_resp[k] = (double)(c->end_ns - s->end_ns);
        }
    }
    st->candidates = w->ncand;
    return 0;
}

typedef struct batch_key {
    size_t root, p;
} batch_key;

static int cmp_batch(const void *a, const void *b)
{
    const batch_key *x = a, *y = b;
    if (x->root != y->root)
        return x->root < y->root ? -1 : 1;
    return (x->p > y->p) - (x->p < y->p);
}

static int build_batches(weaver *w, rt_weave_stats *st)
{
    size_t *parent = malloc((w->ns ? w->ns : 1) * sizeof *parent);
    batch_key *keys = malloc((w->ncv ? w->ncv : 1) * sizeof *keys);
    w->batch_clients = malloc((w->ncv ? w->ncv : 1) * sizeof *w->batch_clients);
    w->batch_off = malloc((w->ncv + 1) * sizeof *w->batch_off);
    if (!parent || !keys || !w->batch_clients || !w->batch_off) {
        free(parent);
        free(keys);
        return -1;
    }
    for (size_t s = 0; s < w->ns; s++)
        parent[s] = s;
    for (size_t p = 0; p < w->ncv; p++) {
        size_t a = w->cand_off[p], b = w->cand_off[p + 1];
        for (size_t k = a + 1; k < b; k++) {
            size_t r1 = uf_find(parent, w->cand_srv[a]), r2 = uf_find(parent, w->cand_srv[k]);
            if (r1 != r2)
                parent[r2 > r1 ? r2 : r1] = r2 > r1 ? r1 : r2;
        }
    }
    size_t nk = 0;
    for (size_t p = 0; p < w->ncv; p++)
        if (w->cand_off[p + 1] > w->cand_off[p])
            keys[nk++] = (batch_key){uf_find(parent, w->cand_srv[w->cand_off[p]]), p};
    qsort(keys, nk, sizeof *keys, cmp_batch);
    w->nbatch = 0;
    for (size_t i = 0; i < nk; i++) {
        if (i == 0 || keys[i].root != keys[i - 1].root)
            w->batch_off[w->nbatch++] = i;
        w->batch_clients[i] = keys[i].p;
    }
    w->batch_off[w->nbatch] = nk;
    st->batches = w->nbatch;
    for (size_t b = 0; b < w->nbatch; b++) {
        size_t size = w->batch_off[b + 1] - w->batch_off[b];
        if (size > st->largest_batch)
            st->largest_batch = size;
    }
    free(parent);
    free(keys);
    return 0;
}

static int fit_initial(weaver *w)
{
    if (w->o->prior && w->o->prior->request.k && w->o->prior->response.k) {
        w->model = *w->o->prior; /* it has its outlier component already */
        return 0;
    }
    size_t n = w->ncand ? w->ncand : 1, lone = 0;
    double *req = malloc(n * sizeof *req), *resp = malloc(n * sizeof *resp),
           *wt = malloc(n * sizeof *wt);
    if (!req || !resp || !wt) {
        free(req);
        free(resp);
        free(wt);
        return -1;
    }
    for (size_t b = 0; b < w->nbatch; b++) {
        if (w->batch_off[b + 1] - w->batch_off[b] != 1)
            continue;
        size_t p = w->batch_clients[w->batch_off[b]];
        if (w->cand_off[p + 1] - w->cand_off[p] != 1)
            continue;
        size_t k = w->cand_off[p];
        req[lone] = w->cand_req[k];
        resp[lone] = w->cand_resp[k];
        wt[lone++] = 1;
    }
    if (lone >= UNAMBIGUOUS_MIN) {
        wv_model_fit_weighted(&w->model, req, resp, wt, lone);
    } else {
        for (size_t p = 0; p < w->ncv; p++) {
            size_t a = w->cand_off[p], b = w->cand_off[p + 1];
            for (size_t k = a; k < b; k++)
                wt[k] = 1.0 / (double)(b - a);
        }
        wv_model_fit_weighted(&w->model, w->cand_req, w->cand_resp, wt, w->ncand);
    }
    wv_model_add_outlier(&w->model, w->broad_sd);
    free(req);
    free(resp);
    free(wt);
    return 0;
}

/* Order inversions of client p taking a server that starts at t, against the
 * current mapping: earlier calls (the ORDER_SCAN before it) whose server started
 * after t, and later calls, issued before t, whose server started before t. */
static size_t inversions(const weaver *w, size_t p, int64_t t)
{
    size_t inv = 0;
    for (size_t q = p, seen = 0; q-- > 0 && seen < ORDER_SCAN; seen++)
        inv += w->choice[q] != NONE_IDX && w->chosen_start[q] > t;
    for (size_t q = p + 1; q < w->ncv && q <= p + ORDER_SCAN &&
                           w->cl[w->corder[q]].start_ns < t; q++)
        inv += w->choice[q] != NONE_IDX && w->chosen_start[q] < t;
    return inv < ORDER_BINS - 1 ? inv : ORDER_BINS - 1;
}

/* The order prior from the previous round's mapping: the histogram of the chosen
 * pairs' inversions (add-one smoothed) scores every candidate's, relative to the
 * most common count so that the best order costs nothing and "none" keeps its
 * meaning. Too few chosen pairs: no prior this round. */
static void order_prior(weaver *w)
{
    double hist[ORDER_BINS] = {0}, n = 0, best = -INFINITY, logp[ORDER_BINS];
    w->cand_order = NULL;
    /* Only with the time-local model: with delays independent of time, the hop's
     * Gaussian request delay already prefers the pairing that keeps the order (a
     * convex cost), and an order term counts that evidence twice (measured on
     * bench_weave's workload: 0.1-0.4 points lower at every load). */
    if (!(w->o->order_weight > 0) || !w->local_on)
        return;
    for (size_t p = 0; p < w->ncv; p++)
        if (w->choice[p] != NONE_IDX)
            w->chosen_start[p] = w->sv[w->cand_srv[w->choice[p]]].start_ns;
    for (size_t p = 0; p < w->ncv; p++)
        if (w->choice[p] != NONE_IDX) {
            hist[inversions(w, p, w->chosen_start[p])]++;
            n++;
        }
    if (n < REFIT_MIN)
        return;
    for (size_t b = 0; b < ORDER_BINS; b++) {
        logp[b] = log((hist[b] + 1) / (n + ORDER_BINS));
        if (logp[b] > best)
            best = logp[b];
    }
    for (size_t p = 0; p < w->ncv; p++)
        for (size_t k = w->cand_off[p]; k < w->cand_off[p + 1]; k++) {
            size_t inv = inversions(w, p, w->sv[w->cand_srv[k]].start_ns);
            w->order_buf[k] = w->o->order_weight * (logp[inv] - best);
        }
    w->cand_order = w->order_buf;
}

/* Mixture components of a refit: the option, within 1..MAX - 1 (one is the outlier). */
static unsigned components_of(const weaver *w)
{
    unsigned k = w->o->components < 1 ? 1 : w->o->components;
    return k < RT_WEAVE_MAX_COMPONENTS - 1 ? k : RT_WEAVE_MAX_COMPONENTS - 1;
}

static double log_delay(double d)
{
    return log(d > DELAY_FLOOR ? d : DELAY_FLOOR);
}

/* A pair's score under the time-local model: the density of its delays' log
 * residuals, times the Jacobian 1/(req * resp) back to delays, so that pairs of
 * different delays compare as densities of the same thing. */
static double local_loglik(const weaver *w, size_t p, double req, double resp)
{
    double lr = log_delay(req), lp = log_delay(resp);
    return rt_weave_model_loglik(&w->resid, LOG_SCALE * (lr - w->loc_req[p]),
                                 LOG_SCALE * (lp - w->loc_resp[p])) +
           2 * log(LOG_SCALE) - lr - lp;
}

/* The time-local model from the previous round's mapping: each client's local mean
 * log delays (its local_k chosen neighbours on each side in start order, itself
 * left out), and a mixture fitted on the chosen pairs' residuals from them. Off
 * this round when too few pairs were chosen. */
static int local_model(weaver *w)
{
    size_t K = w->o->local_k, n = 0;
    w->local_on = false;
    if (K == 0)
        return 0;
    for (size_t p = 0; p < w->ncv; p++) {
        double sr = 0, sp = 0;
        size_t m = 0;
        for (size_t q = p, got = 0, seen = 0; q-- > 0 && got < K && seen < 4 * K; seen++)
            if (w->choice[q] != NONE_IDX) {
                sr += log_delay(w->cand_req[w->choice[q]]);
                sp += log_delay(w->cand_resp[w->choice[q]]);
                got++;
                m++;
            }
        for (size_t q = p + 1, got = 0; q < w->ncv && got < K && q <= p + 4 * K; q++)
            if (w->choice[q] != NONE_IDX) {
                sr += log_delay(w->cand_req[w->choice[q]]);
                sp += log_delay(w->cand_resp[w->choice[q]]);
                got++;
                m++;
            }
        w->loc_req[p] = m ? sr / (double)m : NAN;
        w->loc_resp[p] = m ? sp / (double)m : NAN;
    }
    double *rr = malloc((w->ncv ? w->ncv : 1) * sizeof *rr),
           *rp = malloc((w->ncv ? w->ncv : 1) * sizeof *rp);
    if (!rr || !rp) {
        free(rr);
        free(rp);
        return -1;
    }
    for (size_t p = 0; p < w->ncv; p++)
        if (w->choice[p] != NONE_IDX && !isnan(w->loc_req[p])) {
            rr[n] = LOG_SCALE * (log_delay(w->cand_req[w->choice[p]]) - w->loc_req[p]);
            rp[n++] = LOG_SCALE * (log_delay(w->cand_resp[w->choice[p]]) - w->loc_resp[p]);
        }
    int rc = 0;
    if (n >= RT_WEAVE_PRIOR_KEEP) {
        rc = wv_model_fit(&w->resid, rr, rp, n, components_of(w));
        wv_model_add_outlier(&w->resid, 3 * LOG_SCALE); /* a factor of e^3 off */
        /* Kept only where it explains the chosen pairs better than the hop's one
         * model: where delays do not drift with time (independent delays), the
         * neighbours' mean is noise and the hop's model wins. */
        double l_local = 0, l_hop = 0;
        w->local_on = true;
        for (size_t p = 0; rc == 0 && p < w->ncv; p++)
            if (w->choice[p] != NONE_IDX && !isnan(w->loc_req[p])) {
                double q = w->cand_req[w->choice[p]], r = w->cand_resp[w->choice[p]];
                l_local += local_loglik(w, p, q, r);
                l_hop += rt_weave_model_loglik(&w->model, q, r);
            }
        w->local_on = rc == 0 && l_local > l_hop;
    }
    free(rr);
    free(rp);
    return rc;
}

static void score_candidates(weaver *w)
{
    w->skip = wv_model_peak(&w->model) - w->o->skip_nats;
    double local_peak = 0;
    if (w->local_on)
        local_peak = wv_model_peak(&w->resid) + 2 * log(LOG_SCALE) - w->o->skip_nats;
    for (size_t p = 0; p < w->ncv; p++) {
        bool local = w->local_on && !isnan(w->loc_req[p]);
        /* "none" under the local model: its peak at the local typical delays */
        w->skip_p[p] = local ? local_peak - w->loc_req[p] - w->loc_resp[p] : w->skip;
        double floor = skip_of(w, p) - SCORE_FLOOR;
        for (size_t k = w->cand_off[p]; k < w->cand_off[p + 1]; k++) {
            double l = local ? local_loglik(w, p, w->cand_req[k], w->cand_resp[k])
                             : rt_weave_model_loglik(&w->model, w->cand_req[k], w->cand_resp[k]);
            if (w->cand_order)
                l += w->cand_order[k];
            w->cand_score[k] = l > floor ? l : floor;
        }
    }
}

/* Solve clients batch_clients[from, to) jointly over their untaken candidates and
 * commit the decisions of [from, commit_to). */
static int solve_window(weaver *w, const size_t *ps, size_t from, size_t to, size_t commit_to)
{
    size_t n = to - from, m = 0;
    w->stamp_now++;
    for (size_t i = from; i < to; i++) {
        size_t p = ps[i];
        for (size_t k = w->cand_off[p]; k < w->cand_off[p + 1]; k++) {
            size_t s = w->cand_srv[k];
            if (w->taken_by[s] != NONE_IDX || w->stamp[s] == w->stamp_now)
                continue;
            w->stamp[s] = w->stamp_now;
            w->col_of[s] = m;
            w->win_srv[m++] = s;
        }
    }
    size_t cols = m + n;
    if (n * cols > w->cost_cap) {
        double *c = realloc(w->cost, n * cols * 2 * sizeof *c);
        if (!c)
            return -1;
        w->cost = c;
        w->cost_cap = n * cols * 2;
    }
    for (size_t r = 0; r < n; r++) {
        double *row = w->cost + r * cols;
        for (size_t j = 0; j < cols; j++)
            row[j] = FORBIDDEN;
        size_t p = ps[from + r];
        /* a call whose own connection served a candidate did reach the callee */
        row[m + r] = w->own_conn[p] ? FORBIDDEN : -skip_of(w, p);
        for (size_t k = w->cand_off[p]; k < w->cand_off[p + 1]; k++) {
            size_t s = w->cand_srv[k];
            if (w->taken_by[s] == NONE_IDX && w->stamp[s] == w->stamp_now)
                row[w->col_of[s]] = -w->cand_score[k];
        }
    }
    if (wv_assign(&w->ws, w->cost, n, cols, w->rowcol) < 0)
        return -1;
    for (size_t r = 0; r + from < commit_to; r++) {
        size_t p = ps[from + r], col = w->rowcol[r];
        w->choice[p] = NONE_IDX;
        if (col >= m)
            continue;
        size_t s = w->win_srv[col];
        for (size_t k = w->cand_off[p]; k < w->cand_off[p + 1]; k++)
            if (w->cand_srv[k] == s) {
                w->choice[p] = k;
                w->taken_by[s] = p;
                break;
            }
    }
    return 0;
}

static int assign_all(weaver *w)
{
    size_t win = w->o->window >= 2 ? w->o->window : 2;
    for (size_t p = 0; p < w->ncv; p++)
        w->choice[p] = NONE_IDX;
    for (size_t s = 0; s < w->ns; s++)
        w->taken_by[s] = NONE_IDX;
    w->windowed = 0;
    for (size_t b = 0; b < w->nbatch; b++) {
        const size_t *ps = w->batch_clients + w->batch_off[b];
        size_t n = w->batch_off[b + 1] - w->batch_off[b];
        if (n <= win) {
            if (solve_window(w, ps, 0, n, n) < 0)
                return -1;
            continue;
        }
        w->windowed++;
        for (size_t pos = 0; pos < n;) {
            size_t to = pos + win < n ? pos + win : n;
            size_t commit = to == n ? n : pos + win / 2;
            if (solve_window(w, ps, pos, to, commit) < 0)
                return -1;
            pos = commit;
        }
    }
    return 0;
}

/* Refit the hop's model on the pairs the previous round chose: at most
 * REFIT_SAMPLES of them, spread evenly over the run (enough for a three-component
 * fit, and the cost stays flat at any size). Returns -1 on ENOMEM. */
static int refit(weaver *w)
{
    size_t chosen = 0, n = 0;
    for (size_t p = 0; p < w->ncv; p++)
        chosen += w->choice[p] != NONE_IDX;
    if (w->o->prior && w->o->prior->request.k && chosen < RT_WEAVE_PRIOR_KEEP)
        return 0; /* too few for a model of their own: keep the prior */
    if (chosen < REFIT_MIN)
        return 0;
    size_t stride = chosen > REFIT_SAMPLES ? (chosen + REFIT_SAMPLES - 1) / REFIT_SAMPLES : 1;
    size_t cap = chosen / stride + 1;
    double *req = malloc(cap * sizeof *req), *resp = malloc(cap * sizeof *resp);
    if (!req || !resp) {
        free(req);
        free(resp);
        return -1;
    }
    for (size_t p = 0, seen = 0; p < w->ncv; p++)
        if (w->choice[p] != NONE_IDX && seen++ % stride == 0) {
            req[n] = w->cand_req[w->choice[p]];
            resp[n++] = w->cand_resp[w->choice[p]];
        }
    int rc = wv_model_fit(&w->model, req, resp, n, components_of(w));
    wv_model_add_outlier(&w->model, w->broad_sd);
    free(req);
    free(resp);
    return rc;
}

/* The score client p would get from server s, or "none" when s is not its candidate. */
static double score_of(const weaver *w, size_t p, size_t s)
{
    for (size_t k = w->cand_off[p]; k < w->cand_off[p + 1]; k++)
        if (w->cand_srv[k] == s)
            return w->cand_score[k] > skip_of(w, p) ? w->cand_score[k] : skip_of(w, p);
    return skip_of(w, p);
}

static double ratio(double delta)
{
    return exp(delta < 50 ? delta : 50);
}

static double confidence_of(const weaver *w, size_t p)
{
    size_t mine = w->choice[p];
    double skip = skip_of(w, p), cur = mine == NONE_IDX ? skip : w->cand_score[mine], sum = 1;
    if (mine != NONE_IDX && !w->own_conn[p]) /* "none" is no alternative on its connection */
        sum += ratio(skip - cur);
    for (size_t k = w->cand_off[p]; k < w->cand_off[p + 1]; k++) {
        if (k == mine)
            continue;
        size_t s = w->cand_srv[k], q = w->taken_by[s];
        double delta;
        if (q == NONE_IDX) {
            delta = w->cand_score[k] - cur;
        } else {
            double q_cur = w->cand_score[w->choice[q]];
            double q_alt = mine == NONE_IDX ? skip_of(w, q) : score_of(w, q, w->cand_srv[mine]);
            delta = w->cand_score[k] + q_alt - cur - q_cur;
        }
        sum += ratio(delta);
    }
    double c = 1.0 / sum;
    return c < 0 ? 0 : c > 1 ? 1 : c;
}

static void weaver_free(weaver *w)
{
    free(w->corder);
    free(w->cand_off);
    free(w->cand_srv);
    free(w->own_conn);
    free(w->cand_req);
    free(w->cand_resp);
    free(w->cand_score);
    free(w->order_buf);
    free(w->chosen_start);
    free(w->skip_p);
    free(w->loc_req);
    free(w->loc_resp);
    free(w->batch_clients);
    free(w->batch_off);
    free(w->choice);
    free(w->taken_by);
    free(w->col_of);
    free(w->stamp);
    free(w->cost);
    free(w->rowcol);
    free(w->win_srv);
    wv_assign_ws_free(&w->ws);
}

static int weave(weaver *w, rt_weave_link *out, rt_weave_stats *st)
{
    size_t nsv = 0;
    size_t *sorder = wv_sort_by_start(w->sv, w->ns, &nsv);
    w->corder = wv_sort_by_start(w->cl, w->nc, &w->ncv);
    if (!sorder || !w->corder) {
        free(sorder);
        return -1;
    }
    st->bad_spans = (w->nc - w->ncv) + (w->ns - nsv);
    int rc = build_candidates(w, sorder, nsv, st);
    free(sorder);
    if (rc < 0 || build_batches(w, st) < 0)
        return -1;
    size_t one = 1, nsa = w->ns ? w->ns : 1, nca = w->ncv ? w->ncv : one;
    w->choice = malloc(nca * sizeof *w->choice);
    w->taken_by = malloc(nsa * sizeof *w->taken_by);
    w->col_of = malloc(nsa * sizeof *w->col_of);
    w->stamp = calloc(nsa, sizeof *w->stamp);
    w->rowcol = malloc(nca * sizeof *w->rowcol);
    w->win_srv = malloc((w->ncand ? w->ncand : 1) * sizeof *w->win_srv);
    w->order_buf = malloc((w->ncand ? w->ncand : 1) * sizeof *w->order_buf);
    w->chosen_start = malloc(nca * sizeof *w->chosen_start);
    w->skip_p = malloc(nca * sizeof *w->skip_p);
    w->loc_req = malloc(nca * sizeof *w->loc_req);
    w->loc_resp = malloc(nca * sizeof *w->loc_resp);
    if (!w->choice || !w->taken_by || !w->col_of || !w->stamp || !w->rowcol || !w->win_srv ||
        !w->order_buf || !w->chosen_start || !w->skip_p || !w->loc_req || !w->loc_resp)
        return -1;
    double total = 0;
    for (size_t p = 0; p < w->ncv; p++)
        total += (double)(w->cl[w->corder[p]].end_ns - w->cl[w->corder[p]].start_ns);
    w->broad_sd = w->ncv ? total / (double)w->ncv : 0;
    if (fit_initial(w) < 0)
        return -1;
    unsigned rounds = w->o->iterations ? w->o->iterations : 1;
    for (unsigned it = 0; it < rounds; it++) {
        if (it > 0) { /* the models of the previous round's mapping */
            if (refit(w) < 0 || local_model(w) < 0)
                return -1;
            st->local_rounds += w->local_on;
            order_prior(w);
        }
        score_candidates(w);
        if (assign_all(w) < 0)
            return -1;
    }
    st->iterations = rounds;
    st->windowed = w->windowed;
    st->model = w->model;
    for (size_t i = 0; i < w->nc; i++)
        out[i] = (rt_weave_link){RT_WEAVE_NONE, 0.0, 0.0};
    for (size_t p = 0; p < w->ncv; p++) {
        rt_weave_link *l = &out[w->corder[p]];
        if (w->cand_off[p + 1] == w->cand_off[p]) { /* nothing could have been its server */
            *l = (rt_weave_link){RT_WEAVE_NONE, 1.0, 0.0};
            st->unmatched++;
            continue;
        }
        size_t k = w->choice[p];
        l->server = k == NONE_IDX ? RT_WEAVE_NONE : (ptrdiff_t)w->cand_srv[k];
        l->score = k == NONE_IDX ? skip_of(w, p) : w->cand_score[k];
        l->confidence = confidence_of(w, p);
        if (k == NONE_IDX)
            st->unmatched++;
        else
            st->linked++;
    }
    st->unmatched += w->nc - w->ncv;
    return 0;
}

int rt_weave_hop(const rt_weave_opts *o, const rt_weave_span *clients, size_t n_clients,
                 const rt_weave_span *servers, size_t n_servers, rt_weave_link *out,
                 rt_weave_stats *stats)
{
    rt_weave_opts defaults;
    rt_weave_stats local;
    if ((n_clients && (!clients || !out)) || (n_servers && !servers))
        return -EINVAL;
    if (!o) {
        rt_weave_opts_default(&defaults);
        o = &defaults;
    }
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof *stats);
    stats->clients = n_clients;
    stats->servers = n_servers;
    weaver w = {.o = o, .cl = clients, .sv = servers, .nc = n_clients, .ns = n_servers};
    int rc = weave(&w, out, stats) < 0 ? -ENOMEM : 0;
    weaver_free(&w);
    return rc;
}
