/*
 * coordinator/adaptive.c — the Astraea learner (adaptive/) fed by collected
 * traces, and its policy sent to every agent (docs/adaptive.md).
 *
 * How it works:
 *   - close_group (traversal.c) hands every coherent, decoded trace to
 *     coord_adaptive_add. Each span that decoded whole becomes one observation
 *     {site, self time in ms}: site = rt_adapt_site_hash(resource service.name,
 *     span name), self time = rt_decode_self_times (duration minus decoded
 *     children minus the time of the descendants the client dropped). A span
 *     the client never drops (a root, or the first span of a thread after an
 *     attach) pins its site: it is recorded anyway, and in the draws it would
 *     take a slot from a site that can be turned down. CLIENT/PRODUCER spans
 *     are not pinned: the client drops them like any other (tracer.c); nor
 *     are entry spans (parent in another process): the client drops them
 *     when their caller dropped the call.
 *     Operator pins (--adaptive-pin service:operation,...) are pinned at start.
 *   - A *cycle* runs when --adaptive-batch traces have arrived or
 *     --adaptive-window seconds have passed with at least one: one
 *     rt_adapt_update with the batch, one rt_adapt_policy, generation + 1, and
 *     a POLICY (wire/) to every agent of the directory with an open socket: the
 *     sites whose probability is below 1 (an unknown site is recorded always,
 *     so the rest need no entry). The learner runs in the loop thread; its
 *     time per cycle is a status figure (last_cycle_us).
 *   - Sends are fire-and-forget round trips (daemon/reqrep.h, as the
 *     uplink's and traversal's) on their own nng contexts (a fixed set of
 *     slots; no free slot skips that agent this cycle, counted): the callback
 *     only decodes the agent's ACK and bumps atomic counters, never touches
 *     loop state. A new agent gets the current policy when it registers.
 *   - Generations start at this start's Unix second << 24 and grow by one per
 *     cycle, so they grow across restarts too.
 *   - --adaptive off (the default) builds no learner and sends an empty policy
 *     to each agent as it registers, which clears a table an
 *     earlier run left in its pool: every span is recorded.
 *   - `retrace policy [json]` (text request "policy") lists each site's service,
 *     operation, belief (alpha, beta, mean), probability and rank.
 */
#include "coord_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adaptive.h"
#include "decode.h"
#include "retrace/tracer.h"
#include "shm/events.h"
#include "daemon/figures.h"
#include "daemon/json.h"
#include "daemon/reqrep.h"

#define ADAPT_SENDS 64         /* policy sends in flight at once */
#define ADAPT_NAME_MAX 127     /* service / operation names kept for `retrace policy` */

struct adapt_name { /* open addressing by site */
	uint64_t site; /* 0 = free */
	char service[ADAPT_NAME_MAX + 1], operation[ADAPT_NAME_MAX + 1];
};

struct adapt_send { /* one POLICY round trip (daemon/reqrep.h) */
	struct coord_adaptive *x;
	struct rt_reqrep rr; /* FREE: the slot is free; only the loop claims it */
};

struct coord_adaptive {
	int on;
	rt_adapt_learner *l;
	rt_adapt_obs *obs;
	size_t nobs, cap_obs;
	uint32_t batch_traces;
	uint64_t batch_start_ns;
	struct adapt_name *names;
	uint32_t names_cap; /* power of two, 4 x max sites */
	uint64_t generation;
	struct rt_wire_buf msg; /* the last policy, encoded */
	struct adapt_send sends[ADAPT_SENDS];
	/* figures */
	uint64_t cycles, traces, spans, spans_skipped, obs_dropped, last_cycle_ns, max_cycle_ns;
	uint64_t sends_skipped;
	atomic_uint_fast64_t sends_ok, sends_failed;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static size_t cut(const char *s)
{
	return strnlen(s, RETRACE_EV_MAX_STR);
}

static uint64_t site_of(const char *service, const char *operation)
{
	return rt_adapt_site_hash(service, cut(service), operation, cut(operation));
}

static void remember_name(struct coord_adaptive *x, uint64_t site, const char *service,
			  const char *operation)
{
	uint32_t mask = x->names_cap - 1, i = (uint32_t)site & mask, k;
	for (k = 0; k < x->names_cap; k++, i = (i + 1) & mask) {
		struct adapt_name *n = &x->names[i];
		if (n->site == site)
			return;
		if (n->site == 0) {
			n->site = site;
			snprintf(n->service, sizeof n->service, "%s", service);
			snprintf(n->operation, sizeof n->operation, "%s", operation);
			return;
		}
	}
}

static const struct adapt_name *find_name(const struct coord_adaptive *x, uint64_t site)
{
	uint32_t mask = x->names_cap - 1, i = (uint32_t)site & mask, k;
	for (k = 0; k < x->names_cap; k++, i = (i + 1) & mask) {
		if (x->names[i].site == site)
			return &x->names[i];
		if (x->names[i].site == 0)
			return NULL;
	}
	return NULL;
}

/* The agent's ACK to a POLICY, or none (reply NULL: the send or the receive
 * failed or timed out). Only counters move here (nng's thread), never loop
 * state; the slot goes back to FREE for the loop's next claim. */
static void send_done(struct rt_reqrep *rr, nng_msg *reply)
{
	struct adapt_send *s = rr->arg;
	int ok = 0;
	if (reply) {
		struct rt_wire_msg d;
		ok = rt_wire_decode(nng_msg_body(reply), nng_msg_len(reply), &d) == 0 &&
		     d.type == RT_WIRE_ACK && d.ack.status == 0;
		rt_wire_msg_free(&d);
		nng_msg_free(reply);
	}
	atomic_fetch_add(ok ? &s->x->sends_ok : &s->x->sends_failed, 1);
	nng_ctx_close(rr->ctx);
	rt_reqrep_release(rr);
}

/* Called on the loop thread only (a cycle, a registration): it alone moves a
 * slot from FREE to SENDING, so a FREE slot it sees stays its own. */
static void send_to(struct rt_coord *c, struct coord_agent *a)
{
	struct coord_adaptive *x = c->adapt;
	struct adapt_send *s = NULL;
	nng_msg *m;
	int i;
	if (!a->sock_open || !x->msg.len) /* on: nothing learned yet */
		return;
	for (i = 0; i < ADAPT_SENDS && !s; i++)
		if (rt_reqrep_state(&x->sends[i].rr) == RT_REQREP_FREE)
			s = &x->sends[i];
	if (!s) {
		x->sends_skipped++;
		return;
	}
	if ((!s->rr.aio && rt_reqrep_init(&s->rr, send_done, s) != 0) ||
	    nng_ctx_open(&s->rr.ctx, a->sock) != 0) {
		x->sends_skipped++;
		return;
	}
	if (nng_msg_alloc(&m, x->msg.len) != 0) {
		nng_ctx_close(s->rr.ctx);
		x->sends_skipped++;
		return;
	}
	memcpy(nng_msg_body(m), x->msg.data, x->msg.len);
	rt_reqrep_send(&s->rr, m, (nng_duration)(c->cfg.agent_timeout * 1000));
}

/* Encode the policy of the learner (or an empty one) at x->generation. */
static int encode_policy(struct coord_adaptive *x)
{
	struct rt_wire_policy p = {.generation = x->generation};
	struct rt_wire_policy_entry *e = NULL;
	size_t i, n = x->l ? rt_adapt_site_count(x->l) : 0;
	int rc;
	if (n && !(e = malloc(n * sizeof *e)))
		return -1;
	for (i = 0; i < n; i++) {
		rt_adapt_site_info si;
		if (rt_adapt_site_get(x->l, i, &si) != 0 || si.probability >= 1.0)
			continue;
		e[p.entry_count++] = (struct rt_wire_policy_entry){ si.site,
								    rt_adapt_p16(si.probability) };
	}
	p.entries = e;
	x->msg.len = 0;
	rc = rt_wire_encode_policy(&x->msg, &p);
	free(e);
	return rc;
}

/* "service:operation,service:operation" -> pinned sites. */
static int pin_list(struct rt_coord *c, const char *list)
{
	struct coord_adaptive *x = c->adapt;
	char buf[RT_COORD_URL_MAX], *save = NULL, *tok;
	snprintf(buf, sizeof buf, "%s", list);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':');
		uint64_t site;
		if (!colon || colon == tok || !colon[1]) {
			coord_log(c, LOG_ERROR, "--adaptive-pin: '%s' is not service:operation", tok);
			return -1;
		}
		*colon = 0;
		site = site_of(tok, colon + 1);
		remember_name(x, site, tok, colon + 1);
		if (rt_adapt_pin(x->l, site, true) != 0)
			return -1;
	}
	return 0;
}

int coord_adaptive_init(struct rt_coord *c)
{
	struct coord_adaptive *x = calloc(1, sizeof *x);
	rt_adapt_config ac;
	uint32_t max_sites = c->cfg.adaptive_max_sites ? c->cfg.adaptive_max_sites : 1000;
	int err = 0, i;
	if (!x)
		return -1;
	c->adapt = x;
	for (i = 0; i < ADAPT_SENDS; i++)
		x->sends[i].x = x;
	x->on = strcmp(c->cfg.adaptive, "on") == 0;
	/* Generations grow across restarts (start second << 24, + 1 per cycle), so
	 * an agent can drop an older policy that arrives late by comparing. */
	x->generation = (coord_unix_ns() / 1000000000ull) << 24;
	if (!x->on)
		return encode_policy(x) == 0 ? 0 : -1; /* the empty policy for registrations */
	rt_adapt_config_default(&ac);
	ac.seed = mono_ns();
	x->l = rt_adapt_create(&ac, max_sites, &err);
	x->names_cap = 8;
	while (x->names_cap < 4 * max_sites)
		x->names_cap <<= 1;
	x->names = calloc(x->names_cap, sizeof *x->names);
	if (!x->l || !x->names)
		return -1;
	if (c->cfg.adaptive_pin[0] && pin_list(c, c->cfg.adaptive_pin) != 0)
		return -1;
	x->batch_start_ns = mono_ns();
	return 0;
}

void coord_adaptive_free(struct rt_coord *c)
{
	struct coord_adaptive *x = c->adapt;
	int i;
	if (!x)
		return;
	for (i = 0; i < ADAPT_SENDS; i++)
		rt_reqrep_fini(&x->sends[i].rr); /* a round in flight ends first */
	rt_adapt_destroy(x->l);
	free(x->obs);
	free(x->names);
	rt_wire_buf_free(&x->msg);
	free(x);
	c->adapt = NULL;
}

/* Could the client never have dropped span i? (tracer.c's rule, seen from the
 * data): a root, or the first span of another thread of the same process (after
 * an attach). A span under a parent in another process (an entry span) may be
 * dropped when its caller dropped the call (rt='s "call dropped" flag), so it is
 * not pinned: its probability applies to the calls its callers drop. */
static int never_dropped(const struct rt_decoded_trace *dt, uint32_t i)
{
	const struct rt_span *s = &dt->spans[i], *p;
	if (s->parent < 0 || (uint32_t)s->parent >= dt->n_spans)
		return 1;
	p = &dt->spans[s->parent];
	if (p->agent_id != s->agent_id || p->pid != s->pid)
		return 0;
	return p->tid != s->tid;
}

void coord_adaptive_add(struct rt_coord *c, const struct rt_decoded_trace *dt)
{
	struct coord_adaptive *x = c->adapt;
	int64_t *self;
	uint32_t i;
	if (!x || !x->on || !dt->n_spans)
		return;
	if (!(self = malloc(dt->n_spans * sizeof *self)))
		return;
	rt_decode_self_times(dt, self);
	if (x->nobs + dt->n_spans > x->cap_obs) {
		size_t cap = x->cap_obs ? x->cap_obs : 1024;
		rt_adapt_obs *o;
		while (cap < x->nobs + dt->n_spans)
			cap *= 2;
		if (!(o = realloc(x->obs, cap * sizeof *o))) {
			x->obs_dropped += dt->n_spans;
			free(self);
			return;
		}
		x->obs = o;
		x->cap_obs = cap;
	}
	for (i = 0; i < dt->n_spans; i++) {
		const struct rt_span *s = &dt->spans[i];
		const char *service = s->resource < dt->n_resources ? dt->resources[s->resource].service
								    : "unknown_service";
		uint64_t site;
		if (s->flags) { /* partial, no start or end, unmatched: no honest time */
			x->spans_skipped++;
			continue;
		}
		site = site_of(service, s->name);
		remember_name(x, site, service, s->name);
		if (never_dropped(dt, i))
			rt_adapt_pin(x->l, site, true); /* idempotent, a hash lookup */
		x->obs[x->nobs++] = (rt_adapt_obs){ site, (double)self[i] / 1e6 };
		x->spans++;
	}
	free(self);
	x->traces++;
	x->batch_traces++;
}

static void cycle(struct rt_coord *c, uint64_t now)
{
	struct coord_adaptive *x = c->adapt;
	uint64_t t0 = mono_ns(), dt;
	uint32_t i;
	if (x->nobs && rt_adapt_update(x->l, x->obs, x->nobs) != 0)
		coord_log(c, LOG_WARN, "adaptive: a batch of %zu spans was refused", x->nobs);
	x->nobs = 0;
	x->batch_traces = 0;
	x->batch_start_ns = now;
	if (rt_adapt_site_count(x->l) == 0 || rt_adapt_policy(x->l) != 0)
		return;
	x->generation++;
	dt = mono_ns() - t0;
	x->last_cycle_ns = dt;
	if (dt > x->max_cycle_ns)
		x->max_cycle_ns = dt;
	x->cycles++;
	if (encode_policy(x) != 0) {
		coord_log(c, LOG_ERROR, "adaptive: cannot encode the policy");
		return;
	}
	for (i = 0; i < c->dir.count; i++)
		send_to(c, &c->dir.agents[i]);
}

void coord_adaptive_tick(struct rt_coord *c, uint64_t now)
{
	struct coord_adaptive *x = c->adapt;
	uint32_t batch = c->cfg.adaptive_batch ? c->cfg.adaptive_batch : 50;
	if (!x || !x->on || !x->batch_traces)
		return;
	if (x->batch_traces >= batch ||
	    now - x->batch_start_ns >= (uint64_t)(c->cfg.adaptive_window * 1e9))
		cycle(c, now);
}

void coord_adaptive_registered(struct rt_coord *c, uint32_t agent_id)
{
	struct coord_agent *a;
	if (!c->adapt || !(a = coord_dir_find(c, agent_id)))
		return;
	send_to(c, a); /* the current policy; with --adaptive off an empty one */
}

void coord_adaptive_figures(struct rt_figures *w, struct rt_coord *c)
{
	struct coord_adaptive *x = c->adapt;
	if (!x)
		return;
	rt_fig_section(w, "adaptive");
	rt_fig_gauge(w, "on", (uint64_t)x->on);
	rt_fig_gauge(w, "generation", x->on ? x->generation : 0);
	rt_fig_gauge(w, "sites", x->l ? rt_adapt_site_count(x->l) : 0);
	rt_fig_u64(w, "cycles", x->cycles);
	rt_fig_time_u64(w, "last_cycle_us", x->last_cycle_ns / 1000, 1e-6);
	rt_fig_time_u64(w, "max_cycle_us", x->max_cycle_ns / 1000, 1e-6);
	rt_fig_f(w, "enabled_share", x->l && x->cycles ? rt_adapt_enabled_share(x->l) : 1.0);
	rt_fig_u64(w, "traces", x->traces);
	rt_fig_u64(w, "spans", x->spans);
	rt_fig_u64(w, "spans_skipped", x->spans_skipped);
	rt_fig_u64(w, "spans_dropped_no_memory", x->obs_dropped);
	rt_fig_u64(w, "policies_acked", atomic_load(&x->sends_ok));
	rt_fig_u64(w, "policies_failed", atomic_load(&x->sends_failed));
	rt_fig_u64(w, "policies_skipped", x->sends_skipped);
}

/* A bounded text buffer as an rt_json_sink (cut at cap - 1, NUL kept). */
struct out_buf {
	char *p;
	size_t cap, o;
};

static void out_put(void *ctx, const char *p, size_t n)
{
	struct out_buf *b = ctx;
	if (b->o + 1 >= b->cap)
		return;
	if (n > b->cap - 1 - b->o)
		n = b->cap - 1 - b->o;
	memcpy(b->p + b->o, p, n);
	b->o += n;
	b->p[b->o] = 0;
}

static int by_rank(const void *a, const void *b)
{
	const rt_adapt_site_info *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank == 0 ? 1 : y->rank == 0 ? -1 : (x->rank < y->rank ? -1 : 1);
	return x->site < y->site ? -1 : x->site > y->site;
}

/* "policy" / "policy json": every site, most useful first. */
size_t coord_adaptive_request(struct rt_coord *c, const char *req, size_t len, char *out,
			      size_t cap)
{
	struct coord_adaptive *x = c->adapt;
	int json = len >= 11 && memcmp(req + 7, "json", 4) == 0;
	rt_adapt_site_info *all;
	size_t n, i, o = 0;
#define PUT(...)                                                                  \
	do {                                                                      \
		int k_ = snprintf(out + o, o < cap ? cap - o : 0, __VA_ARGS__);   \
		if (k_ > 0)                                                       \
			o = o + (size_t)k_ < cap ? o + (size_t)k_ : cap - 1;      \
	} while (0)
	if (!x || !x->on) {
		PUT(json ? "{\"adaptive\":\"off\",\"sites\":[]}" : "adaptive: off (every span is recorded)");
		return o;
	}
	n = rt_adapt_site_count(x->l);
	all = malloc((n ? n : 1) * sizeof *all);
	if (!all) {
		PUT("error: out of memory");
		return o;
	}
	for (i = 0; i < n; i++)
		rt_adapt_site_get(x->l, i, &all[i]);
	qsort(all, n, sizeof *all, by_rank);
	if (json)
		PUT("{\"adaptive\":\"on\",\"generation\":%llu,\"cycles\":%llu,\"sites\":[",
		    (unsigned long long)x->generation, (unsigned long long)x->cycles);
	else
		PUT("adaptive: on, generation %llu, %llu cycles, %zu sites\n%-5s %-20s %-28s %8s %8s %6s %6s %s\n",
		    (unsigned long long)x->generation, (unsigned long long)x->cycles, n, "rank",
		    "service", "operation", "alpha", "beta", "mean", "p", "");
	for (i = 0; i < n; i++) {
		const rt_adapt_site_info *s = &all[i];
		const struct adapt_name *nm = find_name(x, s->site);
		const char *svc = nm ? nm->service : "?", *op = nm ? nm->operation : "?";
		if (json) {
			struct out_buf ob = { out, cap, o };
			PUT("%s{\"site\":\"%016llx\",\"service\":", i ? "," : "",
			    (unsigned long long)s->site);
			ob.o = o;
			rt_json_put_string(out_put, &ob, svc); /* untrusted names: daemon/json.h */
			o = ob.o;
			PUT(",\"operation\":");
			ob.o = o;
			rt_json_put_string(out_put, &ob, op);
			o = ob.o;
			PUT(",\"alpha\":%.4f,\"beta\":%.4f,\"mean\":%.4f,\"probability\":%.4f,"
			    "\"rank\":%u,\"pinned\":%s,\"updates\":%u}",
			    s->alpha, s->beta, s->mean, s->probability, s->rank,
			    s->pinned ? "true" : "false", s->updates);
		} else {
			PUT("%-5u %-20.20s %-28.28s %8.3f %8.3f %6.3f %6.3f %s\n", s->rank, svc, op,
			    s->alpha, s->beta, s->mean, s->probability, s->pinned ? "pinned" : "");
		}
	}
	if (json)
		PUT("]}");
	free(all);
	return o;
#undef PUT
}
