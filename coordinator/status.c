/*
 * coordinator/status.c — the figures `retrace status --coordinator URL` shows.
 *
 * Rendered with daemon/figures.h, so the text and JSON forms and /metrics
 * (Prometheus, daemon/metrics.h) agree. Traversal
 * latency percentiles come from the last COORD_LATENCY_RING traversals,
 * sorted on demand: a status request is rare, a traversal is not.
 */
#include "nng_close.h"
#include "coord_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/figures.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Two percentiles of a ring of samples (count recorded, ring of size cap). */
static void ring_percentiles(const uint64_t *ring, uint64_t count, uint64_t cap, double q1,
			     double q2, uint64_t *v1, uint64_t *v2)
{
	uint64_t n = count < cap ? count : cap;
	uint64_t *s;
	*v1 = *v2 = 0;
	if (!n || !(s = malloc(n * sizeof *s)))
		return;
	memcpy(s, ring, n * sizeof *s);
	qsort(s, n, sizeof *s, cmp_u64);
	*v1 = s[(uint64_t)(q1 * (double)(n - 1) + 0.5)];
	*v2 = s[(uint64_t)(q2 * (double)(n - 1) + 0.5)];
	free(s);
}

void coord_latency_percentiles(const struct rt_coord *c, double q1, double q2, uint64_t *v1,
			       uint64_t *v2)
{
	ring_percentiles(c->latency, c->latency_count, COORD_LATENCY_RING, q1, q2, v1, v2);
}

uint64_t rt_coord_latencies(struct rt_coord *c, uint64_t from, uint64_t *out, size_t max,
			    size_t *n)
{
	uint64_t total, i;
	pthread_mutex_lock(&c->mu);
	total = c->latency_count;
	if (total > COORD_LATENCY_RING && from < total - COORD_LATENCY_RING)
		from = total - COORD_LATENCY_RING;
	for (*n = 0, i = from; i < total && *n < max; i++)
		out[(*n)++] = c->latency[i % COORD_LATENCY_RING];
	pthread_mutex_unlock(&c->mu);
	return total;
}

static void coordinator_section(struct rt_figures *w, struct rt_coord *c)
{
	rt_fig_section(w, "coordinator");
	rt_fig_gauge(w, "pid", (uint64_t)getpid());
	rt_fig_time_f(w, "uptime_s", (double)(coord_now_ns() - c->start_ns) / 1e9, 1);
	rt_fig_str(w, "listen", c->listen_addr);
	rt_fig_str(w, "collector", c->collector_addr);
	rt_fig_str(w, "store", rt_store_path(c->store));
}

static void agents_section(struct rt_figures *w, struct rt_coord *c)
{
	uint64_t now = coord_now_ns();
	uint32_t i;
	rt_fig_section(w, "agents");
	rt_fig_gauge(w, "known", c->dir.count);
	rt_fig_u64(w, "registrations", c->st.registrations);
	rt_fig_u64(w, "expired", c->dir.expired);
	rt_fig_u64(w, "socket_closes_abandoned", rt_nng_close_abandoned());
	rt_fig_u64(w, "unknown_named", c->st.unknown_agents);
	for (i = 0; i < c->dir.count && i < 64; i++) {
		const struct coord_agent *a = &c->dir.agents[i];
		char k[48], v[600];
		if (rt_fig_prometheus(w))
			continue; /* listed below, one labelled section each */
		snprintf(k, sizeof k, "agent.%u", a->id);
		snprintf(v, sizeof v, "%s host=%s seen=%.1fs_ago asked=%llu answered=%llu failed=%llu",
			 a->addr, a->host, (double)(now - a->seen_mono_ns) / 1e9,
			 (unsigned long long)a->asked, (unsigned long long)a->answered,
			 (unsigned long long)a->failed);
		rt_fig_str(w, k, v);
	}
	for (i = 0; rt_fig_prometheus(w) && i < c->dir.count && i < 64; i++) {
		const struct coord_agent *a = &c->dir.agents[i];
		char id[16];
		snprintf(id, sizeof id, "%u", a->id);
		rt_fig_section_id(w, "agent", "agent_id", id);
		rt_fig_str(w, "address", a->addr);
		rt_fig_str(w, "host", a->host);
		rt_fig_time_f(w, "seen_ago_s", (double)(now - a->seen_mono_ns) / 1e9, 1);
		rt_fig_u64(w, "asked", a->asked);
		rt_fig_u64(w, "answered", a->answered);
		rt_fig_u64(w, "failed", a->failed);
	}
}

static void traversal_section(struct rt_figures *w, struct rt_coord *c)
{
	uint64_t p50, p99;
	coord_latency_percentiles(c, 0.5, 0.99, &p50, &p99);
	rt_fig_section(w, "traversal");
	rt_fig_u64(w, "triggers", c->st.triggers);
	rt_fig_u64(w, "trigger_duplicates", c->st.trigger_duplicates);
	rt_fig_u64(w, "trigger_traces", c->st.trigger_traces);
	rt_fig_gauge(w, "groups_in_flight", c->groups_open);
	rt_fig_u64(w, "groups_opened", c->st.groups_opened);
	rt_fig_u64(w, "groups_closed", c->st.groups_closed);
	rt_fig_u64(w, "groups_dropped", c->st.groups_dropped);
	rt_fig_u64(w, "traces_dropped", c->st.traces_dropped);
	rt_fig_u64(w, "remote_triggers_sent", c->st.remote_sent);
	rt_fig_u64(w, "remote_asks", c->st.remote_asks);
	rt_fig_u64(w, "remote_retries", c->st.remote_retries);
	rt_fig_u64(w, "remote_failed", c->st.remote_failed);
	rt_fig_u64(w, "remote_bad_replies", c->st.remote_bad_replies);
	rt_fig_u64(w, "requests_overdue", c->st.requests_overdue);
	rt_fig_u64(w, "requests_stuck", c->st.requests_stuck);
	rt_fig_u64(w, "callbacks_ignored", coord_req_callbacks_ignored(c));
	rt_fig_u64(w, "replies_direct", c->st.replies_direct);
	rt_fig_u64(w, "latency_samples", c->latency_count);
	rt_fig_time_f(w, "latency_p50_ms", (double)p50 / 1e6, 1e-3);
	rt_fig_time_f(w, "latency_p99_ms", (double)p99 / 1e6, 1e-3);
	/* Where a remote trigger's time goes (last RT_COORD_STAGE_RING replies): the
	 * agent's round trip, and the hand-off from nng's callback to the loop. */
	ring_percentiles(c->stage[RT_COORD_STAGE_RTT], c->stage_count[RT_COORD_STAGE_RTT],
			 RT_COORD_STAGE_RING, 0.5, 0.99, &p50, &p99);
	rt_fig_time_f(w, "agent_rtt_p50_us", (double)p50 / 1e3, 1e-6);
	rt_fig_time_f(w, "agent_rtt_p99_us", (double)p99 / 1e3, 1e-6);
	ring_percentiles(c->stage[RT_COORD_STAGE_HANDOFF], c->stage_count[RT_COORD_STAGE_HANDOFF],
			 RT_COORD_STAGE_RING, 0.5, 0.99, &p50, &p99);
	rt_fig_time_f(w, "handoff_p50_us", (double)p50 / 1e3, 1e-6);
	rt_fig_time_f(w, "handoff_p99_us", (double)p99 / 1e3, 1e-6);
}

/* Per trigger id: its share of the group table (the fairness that keeps a quiet
 * trigger collected under another's storm). */
static void shares_section(struct rt_figures *w, struct rt_coord *c)
{
	char key[64];
	uint32_t i;
	rt_fig_section(w, "trigger_shares");
	for (i = 0; i < c->nshares; i++) {
		const struct coord_share *sh = &c->shares[i];
		if (!sh->opened && !sh->dropped)
			continue;
		if (rt_fig_prometheus(w)) { /* one labelled section per trigger id */
			snprintf(key, sizeof key, "%u", sh->trigger_id);
			rt_fig_section_id(w, "trigger_share", "trigger_id", key);
			rt_fig_gauge(w, "open", sh->open);
			rt_fig_u64(w, "opened", sh->opened);
			rt_fig_u64(w, "dropped", sh->dropped);
			continue;
		}
		snprintf(key, sizeof key, "trigger_%u_open", sh->trigger_id);
		rt_fig_gauge(w, key, sh->open);
		snprintf(key, sizeof key, "trigger_%u_opened", sh->trigger_id);
		rt_fig_u64(w, key, sh->opened);
		snprintf(key, sizeof key, "trigger_%u_dropped", sh->trigger_id);
		rt_fig_u64(w, key, sh->dropped);
	}
}

static void collection_section(struct rt_figures *w, struct rt_coord *c)
{
	uint64_t closed = c->st.traces_coherent + c->st.traces_incoherent;
	rt_fig_section(w, "collection");
	rt_fig_u64(w, "traces_incomplete", c->st.traces_incomplete);
	rt_fig_u64(w, "traces_untriggered", c->st.traces_untriggered);
	rt_fig_u64(w, "traces_undecodable", c->st.traces_undecodable);
	rt_fig_u64(w, "recollections", c->st.recollections);
	rt_fig_u64(w, "reopened", c->st.reopened);
	rt_fig_u64(w, "slices", c->st.slices);
	rt_fig_u64(w, "slice_bytes", c->st.slice_bytes);
	rt_fig_u64(w, "slice_duplicates", c->st.slice_duplicates);
	rt_fig_u64(w, "stored_bytes_counted", c->st.stored_bytes_counted);
	rt_fig_u64(w, "late_slices", c->st.late_slices);
	rt_fig_u64(w, "late_slices_unselected", c->st.late_slices_unselected);
	rt_fig_u64(w, "orphan_slices", c->st.orphan_slices);
	rt_fig_u64(w, "malformed_slices", c->st.bad_slices);
	rt_fig_u64(w, "malformed_messages", c->st.bad_messages);
	rt_fig_u64(w, "traces_coherent", c->st.traces_coherent);
	rt_fig_u64(w, "traces_incoherent", c->st.traces_incoherent);
	rt_fig_f(w, "coherent_pct", closed ? 100.0 * (double)c->st.traces_coherent / (double)closed : 0);
}

static void store_section(struct rt_figures *w, struct rt_coord *c)
{
	struct rt_store_stats s;
	memset(&s, 0, sizeof s);
	rt_store_stats(c->store, &s);
	rt_fig_section(w, "store");
	rt_fig_gauge(w, "traces", s.traces);
	rt_fig_gauge(w, "coherent", s.coherent);
	rt_fig_gauge(w, "incoherent", s.incoherent);
	rt_fig_gauge(w, "slices", s.slices);
	rt_fig_gauge(w, "slice_bytes", s.slice_bytes);
	rt_fig_gauge(w, "pending_triggers", s.pending_triggers);
	rt_fig_gauge(w, "file_bytes", s.file_bytes);
	rt_fig_u64(w, "checkpoints", s.checkpoints);
	rt_fig_u64(w, "checkpoint_errors", s.checkpoint_errors);
	rt_fig_time_f(w, "checkpoint_max_ms", s.checkpoint_max_ns / 1e6, 1e-3);
	rt_fig_u64(w, "errors", c->st.store_errors);
	rt_fig_u64(w, "retention_deleted", c->st.retained_deleted);
	rt_fig_u64(w, "trigger_names_learned", c->st.trigger_names_learned);
	rt_fig_u64(w, "trigger_names_uncached", c->st.trigger_names_uncached);
}

/* The web UI's API (http_api.c), when --http-listen is on. */
static void http_section(struct rt_figures *w, const struct rt_coord *c)
{
	struct rt_http_api_stats st;
	if (!c->http)
		return;
	rt_http_api_stats(c->http, &st);
	rt_fig_section(w, "http");
	rt_fig_str(w, "url", rt_http_api_url(c->http));
	rt_fig_u64(w, "requests", st.requests);
	rt_fig_u64(w, "bad_requests", st.bad_requests);
	rt_fig_u64(w, "not_found", st.not_found);
	rt_fig_u64(w, "errors", st.errors);
	rt_fig_u64(w, "refused", st.refused);
}

/* The loop's turns and where they spend their time (coordinator.c, run_once). */
static void loop_section(struct rt_figures *w, const struct rt_coord *c)
{
	char key[48];
	int p;
	rt_fig_section(w, "loop");
	rt_fig_u64(w, "turns", c->loop.turns);
	rt_fig_u64(w, "slow_turns", c->loop.slow_turns);
	rt_fig_u64(w, "closes_deferred", c->loop.closes_deferred);
	rt_fig_time_f(w, "max_turn_ms", c->loop.max_turn_ns / 1e6, 1e-3);
	for (p = 0; p < COORD_PHASES; p++) {
		snprintf(key, sizeof key, "%s_ms", coord_phase_name((enum coord_phase)p));
		rt_fig_time_f(w, key, c->loop.phase_ns[p] / 1e6, 1e-3); /* summed over the turns */
	}
	coord_batch_figures(w, c); /* group commit (batch.c) */
}

static void all_figures(struct rt_figures *w, struct rt_coord *c)
{
	coordinator_section(w, c);
	coord_peers_figures(w, c); /* section "ring", when sharded */
	agents_section(w, c);
	traversal_section(w, c);
	shares_section(w, c);
	collection_section(w, c);
	store_section(w, c);
	coord_selection_figures(w, c);
	coord_weave_figures(w, c);
	coord_adaptive_figures(w, c);
	coord_stream_figures(w, c);
	coord_history_figures(w, c);
	coord_auth_figures(w, c);
	http_section(w, c);
	loop_section(w, c);
}

size_t rt_coord_status(struct rt_coord *c, int json, char *out, size_t cap)
{
	struct rt_figures w;
	rt_fig_init(&w, out, cap, json);
	all_figures(&w, c);
	return rt_fig_end(&w);
}

size_t coord_status_json_render(void *arg, char *out, size_t cap, int *cut)
{
	struct rt_figures w;
	size_t n;
	rt_fig_init(&w, out, cap, 1);
	all_figures(&w, arg);
	n = rt_fig_end(&w);
	*cut = rt_fig_cut(&w);
	return n;
}

size_t coord_metrics_render(void *arg, char *out, size_t cap, int *cut)
{
	struct rt_figures w;
	size_t n;
	rt_fig_init_prometheus(&w, out, cap, "coordinator");
	all_figures(&w, arg);
	n = rt_fig_end(&w);
	*cut = rt_fig_cut(&w);
	return n;
}
