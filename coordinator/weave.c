/*
 * coordinator/weave.c — weaving in the running system: a collected trace whose
 * CLIENT span lost its callee (the hop dropped the trace context) gets the
 * callee's half found by timing, collected with it as one group, and the link
 * marked as inferred with its confidence (docs/weaving.md).
 *
 * How it works. When a group is ready to close (traversal idle, everything
 * delivered, settled) its traces not looked at yet are decoded; a CLIENT span the
 * decoder flags RT_SPAN_UNMATCHED (no SERVER span names it as parent) is an
 * open hop, its callee named by its peer.service attribute, else by the
 * --weave-graph edge of its service. The group is then held open while a job
 * asks every agent in the directory, per callee service, two things about the
 * time around the calls (WINDOW_QUERY, answered from the agents' indexes): the
 * callee's root SERVER spans (held there from eviction) and the CLIENT spans to
 * it of every caller known to call it without context (the callers of the open
 * hops seen so far, the --weave-graph edges) — the concurrent calls whose own
 * roots compete for the same candidates, which the joint assignment
 * needs to be right under load (one call alone against every candidate would
 * just take the likeliest, whoever caused it). A query an agent did not answer
 * within --weave-timeout is asked again, with a doubled wait each time
 * (ask_again). When all have answered (or their last ask failed), or at the job's backstop deadline, the job weaves (weave/weave.h: timing constraints, delay
 * model, joint assignment, a confidence per link; the connection each call went
 * over where its spans name one — rt_wire_conn_id of their net.sock.*
 * attributes, ours from the decoded span, the others' from the agents'
 * answers): each of our clients linked to a
 * candidate adds the candidate's trace to the group with the answering agent
 * named, so the ordinary traversal pins it there and collects it; the other
 * holds are released (WINDOW_RELEASE). A woven-in trace is itself looked at
 * when the group is ready again, so chains (A -> B -> C, no context on either
 * hop) are followed hop by hop.
 *
 * The link is recorded where every reader sees it: at close, a small slice of
 * the weaver's own (agent RT_WEAVE_AGENT_ID, one writer stream, tracer events
 * only: RESOURCE and ATTR) is stored with each trace that has a link, setting on
 * the callee's root span retrace.weave.inferred = true, retrace.weave.confidence,
 * retrace.weave.parent_trace_id / parent_span_id, and on the caller's CLIENT
 * span retrace.weave.inferred, retrace.weave.confidence and
 * retrace.weave.child_trace_id. The decoder attaches an ATTR to its span by id
 * across the whole trace, so `retrace show`, both export formats and the JSON
 * API show them without knowing about weaving.
 *
 * Coherence: each trace of the group is judged on its own data, as ever. The
 * caller's trace still has its open hop (a CLIENT span with no SERVER under its
 * trace id): it is forgiven only when the hop was woven to a trace of the group
 * that came out complete (close_group judges the last-added traces first), so a
 * trace is never called coherent on the strength of an inferred link alone. The
 * link itself is a guess; its confidence says how good. A job, and the traces
 * it adds, get a collect timeout of their own (coord_group_extend): they start
 * only when the group's first collection is done.
 */
#include "coord_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/figures.h"
#include "retrace/retrace.h"
#include "retrace/tracer.h"
#include "shm/event_put.h"
#include "shm/pool.h"
#include "weave.h"

#define RT_WEAVE_AGENT_ID UINT32_MAX /* reserved: the weaver's own link slices */
#define WEAVE_JOBS 256
#define WEAVE_MAX_HOPS 64            /* open hops of one job */
#define WEAVE_MAX_EDGES 8            /* distinct callees of one job */
#define WEAVE_MAX_CALLERS 8          /* callers asked about, per callee */
#define WEAVE_MAX_QUERIES (WEAVE_MAX_EDGES * (1 + WEAVE_MAX_CALLERS))
#define WEAVE_MAX_GRAPH 256
#define WEAVE_LOW_CONFIDENCE 0.9     /* links below are counted apart */

struct weave_hop {
	uint8_t trace;                /* index in the group */
	uint8_t edge;                 /* index into the job's callees */
	uint64_t span_id;
	int64_t start_ns, end_ns;
	uint64_t conn;                /* rt_wire_conn_id of its net.sock.* attributes, or 0 */
};

struct weave_cand {
	uint32_t agent;
	uint8_t edge;
	uint8_t kind;                 /* RT_WIRE_WINDOW_ROOTS or _CLIENTS */
	struct rt_wire_window_candidate c;
};

struct weave_job {
	uint64_t group_id;            /* 0: free */
	uint32_t group;
	uint64_t deadline_ns;
	uint32_t asked, answered;
	struct weave_hop hops[WEAVE_MAX_HOPS];
	uint32_t nhops;
	/* One weave per callee: the calls of every caller of it compete for its
	 * roots, so they are decided together (no root goes to two calls). */
	char callees[WEAVE_MAX_EDGES][RT_WIRE_MAX_STR + 1];
	uint32_t nedges;
	struct weave_query {
		uint8_t edge, kind;   /* callee index; RT_WIRE_WINDOW_ROOTS or _CLIENTS */
		uint64_t request_id;
		unsigned char *enc;   /* the encoded query, to ask again (or NULL) */
		uint32_t enc_len;
	} queries[WEAVE_MAX_QUERIES];
	uint32_t nqueries;
	struct weave_cand *cands;
	uint32_t ncands, cap;
};

struct weave_edge {
	char caller[RT_WIRE_MAX_STR + 1], callee[RT_WIRE_MAX_STR + 1];
};

/* A call-graph edge learnt from a coherent hop: a CLIENT span named `op` in
 * service `caller` had its SERVER child in service `callee`. */
#define WEAVE_MAX_LEARNT 256
struct weave_learnt {
	char caller[RT_WIRE_MAX_STR + 1], op[RT_WIRE_MAX_STR + 1], callee[RT_WIRE_MAX_STR + 1];
};

struct weave_stats {
	uint64_t traces_looked, open_hops, unknown_callee, hops_dropped;
	uint64_t jobs, jobs_full, queries, query_retries, query_failures, replies, bad_replies;
	uint64_t candidates;
	uint64_t other_clients;
	uint64_t priors_used, models_learnt, time_local; /* time_local: batches where a
							    * round used the time-local model */
	uint64_t callers_full;
	uint64_t edges_learnt, learnt_full, callee_by_peer, callee_by_learnt, callee_by_graph;
	uint64_t weave_spans, weave_cpu_ns; /* spans put through rt_weave_hop, its CPU time */
	uint64_t links, links_low, unmatched, links_dropped, timeouts, abandoned;
	uint64_t releases, link_slices, link_slice_errors;
};

/* What a hop's delays looked like in its last batch big enough to fit a model:
 * the prior of the next batches (weave.h: a handful of calls cannot fit one). */
#define WEAVE_MODELS 64
#define WEAVE_MODEL_MIN 20 /* links a batch needs to give an edge its first model */
struct weave_model {
	char callee[RT_WIRE_MAX_STR + 1]; /* every caller's calls to it, woven together */
	rt_weave_model model;
	int have;
};

struct coord_weave {
	struct weave_job jobs[WEAVE_JOBS];
	struct weave_model models[WEAVE_MODELS];
	uint32_t nmodels;
	struct weave_edge graph[WEAVE_MAX_GRAPH];
	uint32_t ngraph;
	struct weave_learnt learnt[WEAVE_MAX_LEARNT];
	uint32_t nlearnt;
	/* Every (caller, callee) of an open hop seen so far: who else sends the
	 * callee calls without context, whose calls compete for its roots. */
	struct weave_edge seen[WEAVE_MAX_GRAPH];
	uint32_t nseen;
	uint64_t batches; /* edges woven: numbers the debug log's batch= */
	struct weave_stats st;
};

/* ----------------------------------------------------------- set-up ---- */

static int load_graph(struct coord_weave *w, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	unsigned n = 0;
	if (!f) {
		snprintf(err, errlen, "--weave-graph %s: cannot open", path);
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		char a[RT_WIRE_MAX_STR + 1], b[RT_WIRE_MAX_STR + 1], extra[2];
		int k;
		n++;
		if (line[0] == '#' || strspn(line, " \t\r\n") == strlen(line))
			continue;
		k = sscanf(line, "%255s %255s %1s", a, b, extra);
		if (k != 2 || w->ngraph == WEAVE_MAX_GRAPH) {
			snprintf(err, errlen, "--weave-graph %s:%u: want \"CALLER CALLEE\" (at most %d)",
				 path, n, WEAVE_MAX_GRAPH);
			fclose(f);
			return -1;
		}
		snprintf(w->graph[w->ngraph].caller, sizeof w->graph[0].caller, "%s", a);
		snprintf(w->graph[w->ngraph].callee, sizeof w->graph[0].callee, "%s", b);
		w->ngraph++;
	}
	fclose(f);
	return 0;
}

int coord_weave_init(struct rt_coord *c, char *err, size_t errlen)
{
	if (strcmp(c->cfg.weave, "on") != 0)
		return 0;
	if (!(c->weave = calloc(1, sizeof *c->weave))) {
		snprintf(err, errlen, "out of memory for weaving");
		return -1;
	}
	if (c->cfg.weave_graph[0] && load_graph(c->weave, c->cfg.weave_graph, err, errlen) != 0) {
		coord_weave_free(c);
		return -1;
	}
	return 0;
}

/* A request's tag: the query's index in the low 32 bits, above them how many
 * times it was asked before (0 for the first ask). */
#define WEAVE_TAG_ATTEMPT_SHIFT 32
#define WEAVE_MAX_ASKS 4             /* a query's asks to one agent, at most */

static void job_free(struct weave_job *j)
{
	uint32_t i;
	for (i = 0; i < j->nqueries; i++)
		free(j->queries[i].enc);
	free(j->cands);
	memset(j, 0, sizeof *j);
}

void coord_weave_free(struct rt_coord *c)
{
	uint32_t i;
	if (!c->weave)
		return;
	for (i = 0; i < WEAVE_JOBS; i++)
		job_free(&c->weave->jobs[i]);
	free(c->weave);
	c->weave = NULL;
}

/* --------------------------------------------------------- open hops ---- */

static const char *attr_str(const struct rt_attr *a, uint32_t n, const char *key)
{
	uint32_t i;
	for (i = 0; i < n; i++)
		if (a[i].key && !strcmp(a[i].key, key) && a[i].value.type == RT_VAL_STR)
			return a[i].value.u.s;
	return NULL;
}

static uint64_t attr_uint(const struct rt_attr *a, uint32_t n, const char *key)
{
	uint32_t i;
	for (i = 0; i < n; i++)
		if (a[i].key && !strcmp(a[i].key, key) && a[i].value.type == RT_VAL_INT)
			return a[i].value.u.i > 0 ? (uint64_t)a[i].value.u.i : 0;
	return 0;
}

/* The connection a CLIENT span's call went over (0: it names none). */
static uint64_t conn_of(const struct rt_span *s)
{
	return rt_wire_conn_id(1, attr_str(s->attrs, s->n_attrs, "net.sock.host.addr"),
			       attr_uint(s->attrs, s->n_attrs, "net.sock.host.port"),
			       attr_str(s->attrs, s->n_attrs, "net.sock.peer.addr"),
			       attr_uint(s->attrs, s->n_attrs, "net.sock.peer.port"));
}

static const char *service_of(const struct rt_decoded_trace *dt, const struct rt_span *s)
{
	const char *svc = s->resource < dt->n_resources ? dt->resources[s->resource].service : NULL;
	return svc && svc[0] && strlen(svc) <= RT_WIRE_MAX_STR ? svc : NULL;
}

/* The call graph from the coherent hops of a decoded trace: each CLIENT span whose
 * SERVER child runs in another service teaches (caller, operation) -> callee. */
void coord_weave_learn(struct rt_coord *c, const struct rt_decoded_trace *dt)
{
	struct coord_weave *w = c->weave;
	uint32_t i, k;
	if (!w)
		return;
	for (i = 0; i < dt->n_spans; i++) {
		const struct rt_span *ch = &dt->spans[i], *cl;
		const char *from, *to;
		if (ch->parent < 0 || (uint32_t)ch->parent >= dt->n_spans)
			continue;
		cl = &dt->spans[ch->parent];
		if (cl->kind != RETRACE_SPAN_CLIENT || ch->kind != RETRACE_SPAN_SERVER ||
		    !(from = service_of(dt, cl)) || !(to = service_of(dt, ch)) || !strcmp(from, to) ||
		    !cl->name || strlen(cl->name) > RT_WIRE_MAX_STR)
			continue;
		for (k = 0; k < w->nlearnt; k++)
			if (!strcmp(w->learnt[k].caller, from) && !strcmp(w->learnt[k].op, cl->name))
				break;
		if (k < w->nlearnt) {
			snprintf(w->learnt[k].callee, sizeof w->learnt[k].callee, "%s", to);
			continue; /* the latest word on an operation stands */
		}
		if (w->nlearnt == WEAVE_MAX_LEARNT) {
			w->st.learnt_full++;
			continue;
		}
		snprintf(w->learnt[k].caller, sizeof w->learnt[k].caller, "%s", from);
		snprintf(w->learnt[k].op, sizeof w->learnt[k].op, "%s", cl->name);
		snprintf(w->learnt[k].callee, sizeof w->learnt[k].callee, "%s", to);
		w->nlearnt++;
		w->st.edges_learnt++;
	}
}

/* The callee of an open CLIENT span: its peer.service; else the callee learnt for
 * its (service, operation); else the service's one learnt callee, if it has only one;
 * else a --weave-graph edge of its service. NULL: unknown. */
const char *coord_weave_callee(struct rt_coord *c, const struct rt_decoded_trace *dt,
			       const struct rt_span *s)
{
	struct coord_weave *w = c->weave;
	const char *peer = attr_str(s->attrs, s->n_attrs, "peer.service"), *svc, *only = NULL;
	uint32_t i;
	int several = 0;
	if (peer && peer[0] && strlen(peer) <= RT_WIRE_MAX_STR) {
		w->st.callee_by_peer++;
		return peer;
	}
	if (!(svc = service_of(dt, s)))
		return NULL;
	for (i = 0; i < w->nlearnt; i++) {
		if (strcmp(w->learnt[i].caller, svc) != 0)
			continue;
		if (s->name && !strcmp(w->learnt[i].op, s->name)) {
			w->st.callee_by_learnt++;
			return w->learnt[i].callee;
		}
		if (only && strcmp(only, w->learnt[i].callee) != 0)
			several = 1;
		only = w->learnt[i].callee;
	}
	if (only && !several) {
		w->st.callee_by_learnt++;
		return only;
	}
	for (i = 0; i < w->ngraph; i++)
		if (!strcmp(w->graph[i].caller, svc)) {
			w->st.callee_by_graph++;
			return w->graph[i].callee;
		}
	return NULL;
}

void coord_weave_note_hop(struct rt_coord *c, const char *caller, const char *callee)
{
	struct coord_weave *w = c->weave;
	uint32_t k;
	if (!w)
		return;
	for (k = 0; k < w->nseen; k++)
		if (!strcmp(w->seen[k].caller, caller) && !strcmp(w->seen[k].callee, callee))
			return;
	if (w->nseen == WEAVE_MAX_GRAPH) {
		w->st.callers_full++; /* this caller's calls are not asked for */
		return;
	}
	snprintf(w->seen[k].caller, sizeof w->seen[k].caller, "%s", caller);
	snprintf(w->seen[k].callee, sizeof w->seen[k].callee, "%s", callee);
	w->nseen++;
}

/* The services whose calls to `callee` arrive without context: the callers of
 * the open hops seen so far and the --weave-graph edges (at most max). */
uint32_t coord_weave_callers(const struct rt_coord *c, const char *callee, const char *out[],
			     uint32_t max)
{
	const struct coord_weave *w = c->weave;
	uint32_t n = 0, k, i;
	if (!w)
		return 0;
	for (k = 0; k < w->nseen + w->ngraph && n < max; k++) {
		const struct weave_edge *e = k < w->nseen ? &w->seen[k] : &w->graph[k - w->nseen];
		if (strcmp(e->callee, callee) != 0)
			continue;
		for (i = 0; i < n && strcmp(out[i], e->caller) != 0; i++)
			;
		if (i == n)
			out[n++] = e->caller;
	}
	return n;
}

static int edge_index(struct weave_job *j, const char *callee)
{
	uint32_t k;
	for (k = 0; k < j->nedges; k++)
		if (!strcmp(j->callees[k], callee))
			return (int)k;
	if (j->nedges == WEAVE_MAX_EDGES)
		return -1;
	snprintf(j->callees[j->nedges], sizeof j->callees[0], "%s", callee);
	return (int)j->nedges++;
}

/* Trace idx of g: its open hops into the job. */
static void look_at(struct rt_coord *c, struct coord_group *g, int idx, struct weave_job *j)
{
	struct coord_weave *w = c->weave;
	struct rt_decoded_trace dt;
	uint32_t i;
	w->st.traces_looked++;
	if (coord_decode_stored(c, g->traces[idx].hi, g->traces[idx].lo, &dt) != 0) {
		rt_decoded_trace_free(&dt);
		return;
	}
	coord_weave_learn(c, &dt);
	for (i = 0; i < dt.n_spans; i++) {
		const struct rt_span *s = &dt.spans[i];
		const char *callee, *caller;
		int k;
		if (s->kind != RETRACE_SPAN_CLIENT || !(s->flags & RT_SPAN_UNMATCHED))
			continue;
		w->st.open_hops++;
		if (!(callee = coord_weave_callee(c, &dt, s))) {
			w->st.unknown_callee++;
			continue;
		}
		caller = s->resource < dt.n_resources ? dt.resources[s->resource].service : "";
		if (j->nhops == WEAVE_MAX_HOPS || !caller[0] || strlen(caller) > RT_WIRE_MAX_STR ||
		    (k = edge_index(j, callee)) < 0 || s->end_ns < s->start_ns) {
			w->st.hops_dropped++;
			continue;
		}
		coord_weave_note_hop(c, caller, callee);
		j->hops[j->nhops++] = (struct weave_hop){(uint8_t)idx, (uint8_t)k, s->span_id,
							 (int64_t)s->start_ns, (int64_t)s->end_ns,
							 conn_of(s)};
	}
	rt_decoded_trace_free(&dt);
}

/* ------------------------------------------------------------ asking ---- */

static void send_releases(struct rt_coord *c, struct weave_job *j)
{
	uint32_t k, a;
	for (k = 0; k < j->nqueries; k++) {
		struct rt_wire_window_release m = {.request_id = j->queries[k].request_id};
		if (j->queries[k].kind != RT_WIRE_WINDOW_ROOTS)
			continue;
		c->out.len = 0;
		if (rt_wire_encode_window_release(&c->out, &m) != 0)
			continue;
		for (a = 0; a < c->dir.count; a++)
			if (coord_req_send(c, &c->dir.agents[a], COORD_REQ_RELEASE, 0, 0,
					   m.request_id, c->cfg.weave_timeout) == 0)
				c->weave->st.releases++;
	}
}

/* How long after a query of `wait_s` left the job gives up waiting for it to end:
 * past the watchdog's two waits and a second, and its 100 ms tick. */
static uint64_t weave_backstop_ns(double wait_s)
{
	return (uint64_t)(2 * wait_s * 1e9) + 1500000000ull;
}

int coord_weave_hold(struct rt_coord *c, struct coord_group *g, uint64_t now)
{
	struct coord_weave *w = c->weave;
	struct weave_job *j = NULL;
	uint32_t i, k, a;
	if (!w || g->recollect)
		return 0;
	if (g->weave_state == 1)
		return 1;
	if (g->weave_checked == (g->ntraces >= 64 ? ~0ull : (1ull << g->ntraces) - 1))
		return 0;
	for (i = 0; i < WEAVE_JOBS && !j; i++)
		if (!w->jobs[i].group_id)
			j = &w->jobs[i];
	if (!j) {
		w->st.jobs_full++;
		g->weave_checked = ~0ull; /* not woven: closes as it is */
		return 0;
	}
	for (i = 0; i < g->ntraces; i++)
		if (!(g->weave_checked >> i & 1)) {
			g->weave_checked |= 1ull << i;
			look_at(c, g, (int)i, j);
		}
	if (!j->nhops) {
		memset(j, 0, sizeof *j);
		return 0;
	}
	j->group_id = g->id;
	j->group = (uint32_t)(g - c->groups);
	w->st.jobs++;
	for (k = 0; k < j->nedges; k++) {
		int64_t t0 = INT64_MAX, t1 = 0, margin;
		const char *callers[WEAVE_MAX_CALLERS];
		uint32_t ncallers, q_i;
		for (i = 0; i < j->nhops; i++)
			if (j->hops[i].edge == k) {
				if (j->hops[i].start_ns < t0)
					t0 = j->hops[i].start_ns;
				if (j->hops[i].end_ns > t1)
					t1 = j->hops[i].end_ns;
			}
		/* The calls around ours compete for the same candidates, and theirs for
		 * others: look ten times the calls' span (at most 100 ms: a saturated
		 * host's second-long calls made windows of thousands of roots, cut at
		 * RT_WIRE_MAX_WINDOW, earliest first) and 20 ms to each side. Every
		 * call in the window must find its root there and every root near ours
		 * its call (bench/weave/why.py counted both as the main losses when they
		 * did not): calls [t0 - 2m, t1 + 2m] of every caller that sends the
		 * callee calls without context, roots [t0 - 2m, t1 + 3m] (a root starts
		 * inside its call, so the roots reach one margin further). The edges of
		 * the window are 2 margins from our calls. */
		margin = (t1 - t0 < 10000000 ? 10 * (t1 - t0) : 100000000) + 20000000;
		ncallers = coord_weave_callers(c, j->callees[k], callers, WEAVE_MAX_CALLERS);
		for (q_i = 0; q_i < 1 + ncallers; q_i++) {
			struct rt_wire_window_query q;
			uint32_t kind = q_i == 0 ? RT_WIRE_WINDOW_ROOTS : RT_WIRE_WINDOW_CLIENTS;
			int64_t lo = t0 - 2 * margin;
			int64_t hi = t1 + (kind == RT_WIRE_WINDOW_ROOTS ? 3 : 2) * margin;
			struct weave_query *wq;
			if (j->nqueries == WEAVE_MAX_QUERIES)
				break;
			wq = &j->queries[j->nqueries];
			memset(&q, 0, sizeof q);
			q.request_id = c->next_request_id++;
			*wq = (struct weave_query){(uint8_t)k, (uint8_t)kind, q.request_id, NULL, 0};
			q.kind = kind;
			snprintf(q.service, sizeof q.service, "%s",
				 kind == RT_WIRE_WINDOW_ROOTS ? j->callees[k] : callers[q_i - 1]);
			if (kind == RT_WIRE_WINDOW_CLIENTS)
				snprintf(q.peer, sizeof q.peer, "%s", j->callees[k]);
			q.t0_unix_ns = lo > 0 ? (uint64_t)lo : 0;
			q.t1_unix_ns = (uint64_t)hi;
			q.max = RT_WIRE_MAX_WINDOW;
			/* Held past our own timeout; released as soon as we decide. */
			if (kind == RT_WIRE_WINDOW_ROOTS)
				q.hold_ms = (uint32_t)(c->cfg.weave_timeout * 2000) + 1000;
			c->out.len = 0;
			if (rt_wire_encode_window_query(&c->out, &q) != 0)
				continue;
			/* kept for the retries: an agent that answered late (a loaded
			 * host) is asked again rather than the hop decided without it */
			if ((wq->enc = malloc(c->out.len)) != NULL) {
				memcpy(wq->enc, c->out.data, c->out.len);
				wq->enc_len = (uint32_t)c->out.len;
			}
			j->nqueries++;
			for (a = 0; a < c->dir.count; a++) {
				if (coord_req_send(c, &c->dir.agents[a], COORD_REQ_WINDOW,
						   (uint32_t)(j - w->jobs), j->nqueries - 1,
						   q.request_id, c->cfg.weave_timeout) != 0) {
					w->st.query_failures++;
					continue;
				}
				j->asked++;
				w->st.queries++;
			}
		}
	}
	if (!j->asked) {
		job_free(j);
		return 0;
	}
	/* A backstop: the job decides when every query was answered or its last
	 * ask failed (ask_again moves this past each retry's wait). Every request
	 * ends by then: nng's timeout, or else the loop's watchdog two timeouts and
	 * a second after it left (coord_req_watchdog), whose failure still gets its
	 * retry; a backstop before the watchdog decided hops without the callee's
	 * roots when nng's timeout came late (stress run: timeouts 13, retries 0). */
	j->deadline_ns = now + weave_backstop_ns(c->cfg.weave_timeout);
	coord_group_extend(c, g, now); /* the weaving's own collect timeout */
	g->weave_state = 1;
	g->weave_job = (uint32_t)(j - w->jobs) + 1;
	return 1;
}

/* ---------------------------------------------------------- deciding ---- */

static int in_group(const struct coord_group *g, uint64_t lo)
{
	uint32_t i;
	for (i = 0; i < g->ntraces; i++)
		if (g->traces[i].lo == lo)
			return 1;
	return 0;
}

static struct weave_model *model_of(struct coord_weave *w, const char *callee)
{
	uint32_t i;
	for (i = 0; i < w->nmodels; i++)
		if (!strcmp(w->models[i].callee, callee))
			return &w->models[i];
	if (w->nmodels == WEAVE_MODELS)
		return NULL;
	memset(&w->models[w->nmodels], 0, sizeof w->models[0]);
	snprintf(w->models[w->nmodels].callee, sizeof w->models[0].callee, "%s", callee);
	return &w->models[w->nmodels++];
}

/* Is (trace lo, span) one of our own hops of edge k? */
static int is_our_hop(const struct weave_job *j, const struct coord_group *g, uint32_t k,
		      uint64_t lo, uint64_t span)
{
	uint32_t i;
	for (i = 0; i < j->nhops; i++)
		if (j->hops[i].edge == k && j->hops[i].span_id == span &&
		    g->traces[j->hops[i].trace].lo == lo)
			return 1;
	return 0;
}

/* Weave each edge: our hops and the other calls on it against the callee's
 * candidates; link what the weaver links for our hops. */
static void decide(struct rt_coord *c, struct weave_job *j, uint64_t now)
{
	struct coord_weave *w = c->weave;
	struct coord_group *g = &c->groups[j->group];
	rt_weave_span *cl = NULL, *sv = NULL;
	rt_weave_link *res = NULL, *fcfs = NULL, *vpath = NULL, *noconn = NULL;
	int debug = c->cfg.log_level >= LOG_DEBUG;
	uint32_t *svc_of = NULL, k, i;
	rt_weave_opts opts;
	if (g->id != j->group_id) {
		job_free(j);
		return;
	}
	rt_weave_opts_default(&opts);
	cl = malloc((WEAVE_MAX_HOPS + j->ncands) * sizeof *cl);
	res = malloc((WEAVE_MAX_HOPS + j->ncands) * sizeof *res);
	if (debug) { /* the baselines on the same input, for bench/weave's real mode */
		fcfs = malloc((WEAVE_MAX_HOPS + j->ncands) * sizeof *fcfs);
		vpath = malloc((WEAVE_MAX_HOPS + j->ncands) * sizeof *vpath);
		noconn = malloc((WEAVE_MAX_HOPS + j->ncands) * sizeof *noconn);
		if (!fcfs || !vpath || !noconn)
			debug = 0;
	}
	sv = malloc((j->ncands ? j->ncands : 1) * sizeof *sv);
	svc_of = malloc((j->ncands ? j->ncands : 1) * sizeof *svc_of);
	for (k = 0; cl && res && sv && svc_of && k < j->nedges; k++) {
		uint32_t nc = 0, ns = 0, ours, hop_of[WEAVE_MAX_HOPS];
		rt_weave_stats st;
		for (i = 0; i < j->nhops; i++)
			if (j->hops[i].edge == k) {
				const struct weave_hop *h = &j->hops[i];
				cl[nc] = (rt_weave_span){h->span_id, g->traces[h->trace].hi,
							 g->traces[h->trace].lo, h->start_ns, h->end_ns, 0,
							 h->conn};
				hop_of[nc++] = i;
			}
		ours = nc;
		for (i = 0; i < j->ncands; i++) { /* the other calls on the edge */
			const struct weave_cand *x = &j->cands[i];
			if (x->edge != k || x->kind != RT_WIRE_WINDOW_CLIENTS || !x->c.end_unix_ns ||
			    is_our_hop(j, g, k, x->c.trace_lo, x->c.span_id))
				continue;
			cl[nc++] = (rt_weave_span){x->c.span_id, x->c.trace_hi, x->c.trace_lo,
						   (int64_t)x->c.start_unix_ns,
						   (int64_t)x->c.end_unix_ns, 0, x->c.conn};
			w->st.other_clients++;
		}
		for (i = 0; i < j->ncands; i++) {
			const struct weave_cand *x = &j->cands[i];
			if (x->edge != k || x->kind != RT_WIRE_WINDOW_ROOTS ||
			    in_group(g, x->c.trace_lo) || !x->c.end_unix_ns)
				continue;
			sv[ns] = (rt_weave_span){x->c.span_id, x->c.trace_hi, x->c.trace_lo,
						 (int64_t)x->c.start_unix_ns, (int64_t)x->c.end_unix_ns, 0,
						 x->c.conn};
			svc_of[ns++] = i;
		}
		{
			struct timespec a0, a1;
			struct weave_model *wm = model_of(w, j->callees[k]);
			opts.prior = wm && wm->have ? &wm->model : NULL;
			w->st.priors_used += opts.prior != NULL;
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a0);
			if (rt_weave_hop(&opts, cl, nc, sv, ns, res, &st) < 0)
				break;
			/* A batch that could fit its own model teaches the edge's. */
			if (wm && st.linked >= (wm->have ? RT_WEAVE_PRIOR_KEEP : WEAVE_MODEL_MIN)) {
				wm->model = st.model;
				wm->have = 1;
				w->st.models_learnt++;
			}
			w->st.time_local += st.local_rounds > 0;
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a1);
			w->st.weave_spans += nc + ns;
			w->st.weave_cpu_ns += (uint64_t)((a1.tv_sec - a0.tv_sec) * 1000000000ll +
							 (a1.tv_nsec - a0.tv_nsec));
		}
		if (debug) { /* and the weaver without the connection ids (use_conn off) */
			rt_weave_opts plain = opts;
			plain.use_conn = false;
			if (rt_weave_fcfs(opts.skew_ns, cl, nc, sv, ns, fcfs) < 0 ||
			    rt_weave_vpath(opts.skew_ns, cl, nc, sv, ns, vpath) < 0 ||
			    rt_weave_hop(&plain, cl, nc, sv, ns, noconn, NULL) < 0)
				debug = 0;
		}
		w->batches++;
		/* The weaver's whole input and model, for bench/weave's breakdown of
		 * wrong links (run-real.sh --why). */
		for (i = 0; debug && i < nc + ns; i++) {
			const rt_weave_span *x = i < nc ? &cl[i] : &sv[i - nc];
			coord_log(c, LOG_DEBUG,
				  "weave input batch=%llu side=%c ours=%d span=%016" PRIx64
				  " trace=%016" PRIx64 "%016" PRIx64 " start=%lld end=%lld conn=%016" PRIx64,
				  (unsigned long long)w->batches, i < nc ? 'c' : 's', i < ours,
				  x->span_id, x->trace_hi, x->trace_lo, (long long)x->start_ns,
				  (long long)x->end_ns, x->conn);
		}
		if (debug) {
			const rt_weave_mixture *q = &st.model.request, *p = &st.model.response;
			coord_log(c, LOG_DEBUG,
				  "weave model batch=%llu prior=%d linked=%zu local_rounds=%u "
				  "req=%.0f/%.0f/%.2f resp=%.0f/%.0f/%.2f",
				  (unsigned long long)w->batches, opts.prior != NULL, st.linked,
				  st.local_rounds,
				  q->mean[0], q->sd[0], q->weight[0], p->mean[0], p->sd[0],
				  p->weight[0]);
		}
		for (i = 0; debug && i < ours; i++) {
			const rt_weave_link *x[4] = {&res[i], &fcfs[i], &vpath[i], &noconn[i]};
			char id[4][33];
			int m;
			for (m = 0; m < 4; m++) {
				if (x[m]->server == RT_WEAVE_NONE)
					snprintf(id[m], sizeof id[m], "none");
				else
					snprintf(id[m], sizeof id[m], "%016" PRIx64 "%016" PRIx64,
						 sv[x[m]->server].trace_hi, sv[x[m]->server].trace_lo);
			}
			coord_log(c, LOG_DEBUG,
				  "weave decision batch=%llu callee=%s span=%016" PRIx64
				  " weaver=%s fcfs=%s vpath=%s noconn=%s confidence=%.4f clients=%u servers=%u"
				  " conn=%d",
				  (unsigned long long)w->batches, j->callees[k], cl[i].span_id, id[0], id[1], id[2],
				  id[3], res[i].confidence, nc, ns, cl[i].conn != 0);
		}
		for (i = 0; i < ours; i++) {
			const struct weave_hop *h = &j->hops[hop_of[i]];
			const struct weave_cand *x;
			int idx;
			if (res[i].server == RT_WEAVE_NONE) {
				w->st.unmatched++;
				continue;
			}
			x = &j->cands[svc_of[res[i].server]];
			idx = coord_group_add_named(c, g, x->c.trace_hi, x->c.trace_lo, x->agent);
			if (idx < 0) {
				w->st.links_dropped++;
				continue;
			}
			g->traces[idx].woven = 1;
			g->traces[idx].woven_from = h->trace;
			g->traces[idx].weave_confidence = res[i].confidence;
			g->traces[idx].weave_client_span = h->span_id;
			g->traces[idx].weave_server_span = x->c.span_id;
			w->st.links++;
			if (res[i].confidence < WEAVE_LOW_CONFIDENCE)
				w->st.links_low++;
			coord_log(c, LOG_DEBUG,
				  "trace group %llu: span %016" PRIx64 " -> trace %016" PRIx64
				  "%016" PRIx64 " (%s on agent %u), confidence %.3f",
				  (unsigned long long)g->id, h->span_id, x->c.trace_hi, x->c.trace_lo,
				  j->callees[k], x->agent, res[i].confidence);
		}
	}
	free(cl);
	free(res);
	free(fcfs);
	free(vpath);
	free(noconn);
	free(sv);
	free(svc_of);
	send_releases(c, j);
	g->weave_state = 0;
	g->weave_job = 0;
	g->last_activity_ns = now; /* the woven-in traces settle like any other */
	coord_group_extend(c, g, now); /* and are collected in a timeout of their own */
	job_free(j);
}

/* A query the agent did not answer in time goes to it again (the same request
 * id: the agent's hold is renewed), each time with twice the previous wait, and
 * the job waits for that answer: a loaded host answers late rather than never,
 * and a hop decided without the callee's roots or the other calls is a guess.
 * The doubling matters: an agent's requests are answered one at a time, in
 * order, so the answer to a retry waits behind the queries that timed out
 * before it (a stopped or starved agent has them all queued), and one more
 * wait of the same length timed out as well (20 of 20 retries failed at load
 * average 30). It stops at WEAVE_MAX_ASKS, or when the answer could not come
 * before the group's collect timeout closes it anyway. 0, or -1 (not asked). */
static int ask_again(struct rt_coord *c, struct weave_job *j, uint32_t q_i, uint32_t attempt,
		     uint32_t agent_id)
{
	struct coord_weave *w = c->weave;
	struct coord_agent *a = coord_dir_find(c, agent_id);
	const struct weave_query *wq = &j->queries[q_i];
	const struct coord_group *g = &c->groups[j->group];
	double wait_s = c->cfg.weave_timeout * (double)(1u << attempt);
	uint64_t now = coord_now_ns();
	uint64_t until = now + (uint64_t)(wait_s * 1e9) + 100000000ull;
	if (attempt >= WEAVE_MAX_ASKS || until > coord_group_deadline(c, g))
		return -1;
	c->out.len = 0;
	if (!a || !wq->enc || rt_wire_buf_reserve(&c->out, wq->enc_len) != 0)
		return -1;
	memcpy(c->out.data, wq->enc, wq->enc_len);
	c->out.len = wq->enc_len;
	if (coord_req_send(c, a, COORD_REQ_WINDOW, (uint32_t)(j - w->jobs),
			   q_i | (uint64_t)attempt << WEAVE_TAG_ATTEMPT_SHIFT, wq->request_id,
			   wait_s) != 0)
		return -1;
	w->st.query_retries++;
	if (j->deadline_ns < now + weave_backstop_ns(wait_s))
		j->deadline_ns = now + weave_backstop_ns(wait_s);
	return 0;
}

void coord_weave_reply(struct rt_coord *c, struct coord_req *r)
{
	struct coord_weave *w = c->weave;
	struct weave_job *j;
	struct rt_wire_msg m;
	uint32_t i, q_i;
	if (r->kind == COORD_REQ_RELEASE || !w || r->job >= WEAVE_JOBS) {
		coord_req_free(c, r);
		return;
	}
	j = &w->jobs[r->job];
	q_i = (uint32_t)r->tag;
	if (!j->group_id || q_i >= j->nqueries || j->queries[q_i].request_id != r->request_id) {
		coord_req_free(c, r); /* a job decided (or dropped) before this came */
		return;
	}
	if (!r->ok &&
	    ask_again(c, j, q_i, (uint32_t)(r->tag >> WEAVE_TAG_ATTEMPT_SHIFT) + 1, r->agent_id) == 0) {
		coord_req_free(c, r); /* wait for the second answer */
		return;
	}
	if (!r->ok) {
		w->st.query_failures++;
	} else if (rt_wire_decode(nng_msg_body(r->reply), nng_msg_len(r->reply), &m) != 0 ||
		   m.type != RT_WIRE_WINDOW_REPLY || m.wreply.request_id != r->request_id) {
		w->st.bad_replies++;
		rt_wire_msg_free(&m);
	} else {
		w->st.replies++;
		for (i = 0; i < m.wreply.candidate_count; i++) {
			const struct rt_wire_window_candidate *x = &m.wreply.candidates[i];
			if (j->ncands == j->cap) {
				uint32_t cap = j->cap ? j->cap * 2 : 64;
				struct weave_cand *p = realloc(j->cands, cap * sizeof *p);
				if (!p)
					break;
				j->cands = p;
				j->cap = cap;
			}
			j->cands[j->ncands++] = (struct weave_cand){
				m.wreply.agent_id, j->queries[q_i].edge, j->queries[q_i].kind, *x};
			w->st.candidates++;
		}
		rt_wire_msg_free(&m);
	}
	coord_req_free(c, r);
	if (++j->answered >= j->asked)
		decide(c, j, coord_now_ns());
}

void coord_weave_tick(struct rt_coord *c, uint64_t now)
{
	uint32_t i;
	if (!c->weave)
		return;
	for (i = 0; i < WEAVE_JOBS; i++) {
		struct weave_job *j = &c->weave->jobs[i];
		if (j->group_id && now >= j->deadline_ns) {
			c->weave->st.timeouts++;
			decide(c, j, now);
		}
	}
}

void coord_weave_group_closed(struct rt_coord *c, struct coord_group *g)
{
	if (c->weave && g->weave_job && g->weave_job <= WEAVE_JOBS) {
		struct weave_job *j = &c->weave->jobs[g->weave_job - 1];
		if (j->group_id == g->id) {
			c->weave->st.abandoned++;
			job_free(j);
		}
	}
	g->weave_state = 0;
	g->weave_job = 0;
}

/* ------------------------------------------------------ link records ---- */

/* ATTR events on span: inferred, confidence, and one id attribute
 * (shm/event_put.h, the encoder the client's tracer uses). */
static void link_attrs(struct rt_ev_buf *out, uint64_t span, double conf, const char *key,
		       const char *id)
{
	rt_ev_buf_attr_bool(out, span, "retrace.weave.inferred", 1);
	rt_ev_buf_attr_double(out, span, "retrace.weave.confidence", conf);
	rt_ev_buf_attr_str(out, span, key, id);
}

void coord_weave_store_links(struct rt_coord *c, struct coord_group *g, int idx)
{
	static const char *const res_key[] = {"service.name"}, *const res_val[] = {"retrace-weaver"};
	uint8_t bytes[16384]; /* ~180 B a link: every link of a full group */
	struct rt_ev_buf out;
	const struct coord_gtrace *t = &g->traces[idx];
	char id[40];
	uint32_t i;
	int any = 0;
	rt_ev_buf_init(&out, bytes, sizeof bytes);
	rt_ev_buf_resource(&out, 0, res_key, res_val, 1);
	if (t->woven) {
		const struct coord_gtrace *p = &g->traces[t->woven_from];
		snprintf(id, sizeof id, "%016" PRIx64 "%016" PRIx64, p->hi, p->lo);
		link_attrs(&out, t->weave_server_span, t->weave_confidence,
			   "retrace.weave.parent_trace_id", id);
		snprintf(id, sizeof id, "%016" PRIx64, t->weave_client_span);
		rt_ev_buf_attr_str(&out, t->weave_server_span, "retrace.weave.parent_span_id", id);
		any = 1;
	}
	for (i = 0; i < g->ntraces; i++) {
		const struct coord_gtrace *x = &g->traces[i];
		if (!x->woven || x->woven_from != idx || (int)i == idx)
			continue;
		snprintf(id, sizeof id, "%016" PRIx64 "%016" PRIx64, x->hi, x->lo);
		link_attrs(&out, x->weave_client_span, x->weave_confidence,
			   "retrace.weave.child_trace_id", id);
		any = 1;
	}
	if (!any)
		return;
	{
		struct rt_wire_slice_buffer b = {0};
		struct rt_wire_slice s;
		struct rt_store_slice sl;
		rt_ev_buf_end(&out);
		if (out.overflow) {
			if (c->weave)
				c->weave->st.link_slice_errors++;
			return;
		}
		b.seq = 0;
		b.flags = RT_BUF_SEALED | RT_BUF_LAST;
		b.data = out.data;
		b.len = (uint32_t)out.len;
		memset(&s, 0, sizeof s);
		s.agent_id = RT_WEAVE_AGENT_ID;
		s.trigger_id = g->ntrig ? g->trigger_ids[0] : 0;
		s.slice_seq = 1;
		s.trace_hi = t->hi;
		s.trace_lo = t->lo;
		s.buffer_count = 1;
		s.buffers = &b;
		c->out.len = 0;
		if (rt_wire_encode_slice(&c->out, &s) != 0) {
			if (c->weave)
				c->weave->st.link_slice_errors++;
			return;
		}
		memset(&sl, 0, sizeof sl);
		sl.trace_hi = t->hi;
		sl.trace_lo = t->lo;
		sl.agent_id = RT_WEAVE_AGENT_ID;
		sl.trigger_id = s.trigger_id;
		sl.slice_seq = 1;
		sl.received_ns = coord_unix_ns();
		sl.buffers = 1;
		sl.bytes = out.len;
		sl.msg = c->out.data;
		sl.msg_len = c->out.len;
		{
			int rc = rt_store_put_slice(c->store, &sl);
			if (rc == 0 || rc == RT_STORE_DUPLICATE) {
				if (c->weave)
					c->weave->st.link_slices++;
			} else {
				c->st.store_errors++;
				if (c->weave)
					c->weave->st.link_slice_errors++;
			}
		}
	}
}

uint64_t coord_weave_forgiven(const struct coord_group *g, int idx, const struct rt_decoded_trace *dt)
{
	uint64_t n = 0;
	uint32_t i, s;
	for (i = 0; i < g->ntraces; i++) {
		const struct coord_gtrace *x = &g->traces[i];
		if (!x->woven || x->woven_from != idx || (int)i == idx || !x->complete)
			continue;
		for (s = 0; s < dt->n_spans; s++)
			if (dt->spans[s].span_id == x->weave_client_span &&
			    (dt->spans[s].flags & RT_SPAN_UNMATCHED)) {
				n++;
				break;
			}
	}
	return n;
}

/* ----------------------------------------------------------- figures ---- */

void coord_weave_figures(struct rt_figures *f, struct rt_coord *c)
{
	const struct weave_stats *s;
	uint32_t i, open = 0;
	rt_fig_section(f, "weave");
	rt_fig_str(f, "weave", c->weave ? "on" : "off");
	if (!c->weave)
		return;
	s = &c->weave->st;
	for (i = 0; i < WEAVE_JOBS; i++)
		open += c->weave->jobs[i].group_id != 0;
	rt_fig_gauge(f, "jobs_open", open);
	rt_fig_u64(f, "traces_looked_at", s->traces_looked);
	rt_fig_u64(f, "open_hops", s->open_hops);
	rt_fig_u64(f, "unknown_callee", s->unknown_callee);
	rt_fig_u64(f, "hops_dropped", s->hops_dropped);
	rt_fig_u64(f, "jobs", s->jobs);
	rt_fig_u64(f, "jobs_full", s->jobs_full);
	rt_fig_u64(f, "queries", s->queries);
	rt_fig_u64(f, "query_retries", s->query_retries);
	rt_fig_u64(f, "query_failures", s->query_failures);
	rt_fig_u64(f, "replies", s->replies);
	rt_fig_u64(f, "bad_replies", s->bad_replies);
	rt_fig_u64(f, "candidates", s->candidates);
	rt_fig_u64(f, "other_clients", s->other_clients);
	rt_fig_u64(f, "priors_used", s->priors_used);
	rt_fig_gauge(f, "graph_edges_learnt", c->weave->nlearnt);
	rt_fig_u64(f, "graph_learnt_full", s->learnt_full);
	rt_fig_gauge(f, "callers_known", c->weave->nseen);
	rt_fig_u64(f, "callers_full", s->callers_full);
	rt_fig_u64(f, "callee_by_peer_service", s->callee_by_peer);
	rt_fig_u64(f, "callee_by_learnt_graph", s->callee_by_learnt);
	rt_fig_u64(f, "callee_by_graph_file", s->callee_by_graph);
	rt_fig_u64(f, "models_learnt", s->models_learnt);
	rt_fig_u64(f, "time_local_batches", s->time_local);
	rt_fig_u64(f, "spans_woven", s->weave_spans);
	rt_fig_u64(f, "weave_cpu_ns", s->weave_cpu_ns);
	rt_fig_u64(f, "links_inferred", s->links);
	rt_fig_u64(f, "links_below_0_9", s->links_low);
	rt_fig_u64(f, "hops_unmatched", s->unmatched);
	rt_fig_u64(f, "links_dropped", s->links_dropped);
	rt_fig_u64(f, "timeouts", s->timeouts);
	rt_fig_u64(f, "abandoned", s->abandoned);
	rt_fig_u64(f, "releases_sent", s->releases);
	rt_fig_u64(f, "link_slices", s->link_slices);
	rt_fig_u64(f, "link_slice_errors", s->link_slice_errors);
}
