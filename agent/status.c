/*
 * agent/status.c — the figures `retrace status` shows, as JSON or as text.
 *
 * The figures are listed once, in sections; daemon/figures.h renders each either
 * as a JSON member or as an aligned text line, so both forms always agree (the
 * coordinator's status uses the same writer). The same list, rendered for
 * Prometheus, is the agent's /metrics (daemon/metrics.h).
 */
#include "agent.h"
#include "control.h"
#include "guard.h"
#include "spool.h"
#include "daemon/figures.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void agent_section(struct rt_figures *w, const struct rt_agent *a)
{
	const struct rt_pool_header *h = a->pool.hdr;
	rt_fig_section(w, "agent");
	rt_fig_gauge(w, "id", a->cfg.agent_id);
	rt_fig_gauge(w, "pid", (uint64_t)getpid());
	rt_fig_str(w, "pool", a->pool.name);
	rt_fig_gauge(w, "generation", h->generation);
	rt_fig_gauge(w, "took_over", (uint64_t)a->took_over);
	rt_fig_time_f(w, "uptime_s", (double)(rt_agent_now_ns() - a->start_ns) / 1e9, 1);
	rt_fig_str(w, "listen", a->cfg.listen);
	rt_fig_str(w, "control", a->control_addr[0] ? a->control_addr : "none"); /* as bound */
	rt_fig_str(w, "coordinator", a->cfg.coordinator[0] ? a->cfg.coordinator : "none");
}

static void buffer_section(struct rt_figures *w, const struct rt_agent *a)
{
	const struct rt_pool_header *h = a->pool.hdr;     /* counters clients add to */
	const struct rt_pool_geometry *g = &a->pool.geo; /* ours: clients write the header */
	uint64_t free_now = rt_agent_free_buffers(a), idx = a->ix.st.buffers;
	uint64_t mine = rt_agent_buffers_held(a); /* buffers some indexed segment keeps */
	uint64_t held = g->buffer_count > free_now + mine ? g->buffer_count - free_now - mine : 0;
	rt_fig_section(w, "buffers");
	rt_fig_gauge(w, "size", g->buffer_size);
	rt_fig_gauge(w, "total", g->buffer_count);
	rt_fig_gauge(w, "free", free_now);
	rt_fig_gauge(w, "indexed", idx); /* segments (ABI 5): one per buffer in the old layout */
	rt_fig_gauge(w, "held_by_index", mine);
	rt_fig_gauge(w, "held_by_clients", held);
	rt_fig_gauge(w, "left_by_writers", a->seg.left_held);
	rt_fig_f(w, "utilisation", rt_agent_utilisation(a));
	rt_fig_gauge(w, "pinned", a->ix.st.pinned_buffers);
	rt_fig_gauge(w, "bytes_indexed", a->ix.st.bytes);
	rt_fig_gauge(w, "evict_above", a->evict_limit);
	rt_fig_u64(w, "null_buffers", ck_pr_load_64((uint64_t *)&h->null_buffers));
}

static void trace_section(struct rt_figures *w, const struct rt_agent *a)
{
	const struct rt_index_stats *s = &a->ix.st;
	rt_fig_section(w, "traces");
	rt_fig_gauge(w, "indexed", s->traces);
	rt_fig_gauge(w, "capacity", a->ix.capacity);
	rt_fig_gauge(w, "pinned", s->pinned_traces);
	rt_fig_gauge(w, "breadcrumbs", s->crumbs);
	rt_fig_u64(w, "evicted", s->evicted_traces);
	rt_fig_u64(w, "evicted_buffers", s->evicted_buffers);
	rt_fig_u64(w, "evicted_bytes", s->evicted_bytes);
	rt_fig_time_u64(w, "event_horizon_us", s->horizon_us, 1e-6);
	rt_fig_time_u64(w, "event_horizon_p50_us", rt_index_horizon_percentile(&a->ix, 0.5), 1e-6);
	rt_fig_time_u64(w, "event_horizon_p99_us", rt_index_horizon_percentile(&a->ix, 0.99), 1e-6);
	rt_fig_time_u64(w, "event_horizon_min_us", a->st.horizon_min_us, 1e-6);
	rt_fig_u64(w, "abandoned", a->st.abandoned_traces);
	rt_fig_u64(w, "abandoned_buffers", a->st.abandoned_buffers);
	rt_fig_u64(w, "table_full", a->st.index_full);
	rt_fig_u64(w, "quiet_reclaimed", a->st.quiet_reclaimed);
	rt_fig_u64(w, "crumbs_dropped", s->crumbs_dropped);
}

static void queue_section(struct rt_figures *w, const struct rt_agent *a)
{
	const struct rt_pool_header *h = a->pool.hdr;
	rt_fig_section(w, "queues");
	rt_fig_gauge(w, "available_depth", rt_agent_queue_depth(a, RT_Q_AVAILABLE));
	rt_fig_gauge(w, "complete_depth", rt_agent_queue_depth(a, RT_Q_COMPLETE));
	rt_fig_gauge(w, "breadcrumb_depth", rt_agent_queue_depth(a, RT_Q_BREADCRUMB));
	rt_fig_gauge(w, "trigger_depth", rt_agent_queue_depth(a, RT_Q_TRIGGER));
	rt_fig_u64(w, "complete_entries", a->st.complete_entries);
	rt_fig_u64(w, "breadcrumbs", a->st.breadcrumbs);
	rt_fig_u64(w, "trigger_groups", a->st.trigger_groups);
	rt_fig_u64(w, "triggered_traces", a->st.triggered_traces);
	rt_fig_u64(w, "trigger_drops", ck_pr_load_64((uint64_t *)&h->trigger_drops));
	rt_fig_u64(w, "breadcrumb_drops", ck_pr_load_64((uint64_t *)&h->breadcrumb_drops));
	rt_fig_u64(w, "complete_drops", ck_pr_load_64((uint64_t *)&h->complete_drops));
	rt_fig_u64(w, "recycle_fail", a->st.recycle_fail);
}

static void malformed_section(struct rt_figures *w, const struct rt_agent *a)
{
	const struct rt_pool_header *h = a->pool.hdr;
	rt_fig_section(w, "malformed");
	rt_fig_u64(w, "complete_bad_buffer_id", a->st.bad_range);
	rt_fig_u64(w, "complete_bad_bytes", a->st.bad_bytes);
	rt_fig_u64(w, "complete_zero_trace", a->st.bad_zero_trace);
	rt_fig_u64(w, "complete_bad_header", a->st.bad_header);
	rt_fig_u64(w, "complete_duplicate", a->st.bad_duplicate);
	rt_fig_u64(w, "breadcrumbs", a->st.bad_breadcrumbs);
	rt_fig_u64(w, "triggers", a->st.bad_triggers);
	rt_fig_u64(w, "available_bad_id", ck_pr_load_64((uint64_t *)&h->bad_available));
	rt_fig_u64(w, "corrupt_frames", a->st.corrupt_frames);
	rt_fig_u64(w, "header_fields_restored", a->st.header_fields_restored);
	rt_fig_u64(w, "ring_stalls_repaired", a->st.ring_stalls_repaired);
	rt_fig_u64(w, "ring_slots_voided", a->st.ring_slots_voided);
	rt_fig_u64(w, "ring_resets", a->st.ring_resets);
	rt_fig_u64(w, "bad_segments", a->st.bad_segments);
	rt_fig_u64(w, "segment_slots_full", a->st.segment_slots_full);
}

static void client_section(struct rt_figures *w, const struct rt_agent *a)
{
	const struct rt_pool_header *h = a->pool.hdr;
	rt_fig_section(w, "clients");
	rt_fig_gauge(w, "attached", rt_agent_clients_attached(a));
	rt_fig_gauge(w, "registry_slots", a->pool.geo.registry_slots);
	rt_fig_u64(w, "registry_full", ck_pr_load_64((uint64_t *)&h->registry_full));
	rt_fig_u64(w, "died", a->st.clients_died);
	rt_fig_u64(w, "dead_buffers_indexed", a->st.dead_buffers_indexed);
	rt_fig_u64(w, "dead_buffers_freed", a->st.dead_buffers_freed);
	rt_fig_u64(w, "orphan_kept_buffers_left", a->st.orphans_left);
	rt_fig_u64(w, "recovered_traces", a->st.recovered_traces);
	rt_fig_u64(w, "recovered_buffers", a->st.recovered_buffers);
	rt_fig_u64(w, "recovered_echoes", a->st.recovered_echoes);
	rt_fig_u64(w, "lost_buffers_reclaimed", a->st.lost_buffers_reclaimed);
}

static void reporting_section(struct rt_figures *w, const struct rt_agent *a)
{
	struct rt_uplink_stats up;
	rt_route_stats(&a->route, &up);
	rt_fig_section(w, "reporting");
	rt_fig_str(w, "collector", a->cfg.collector[0] ? a->cfg.collector : "none");
	rt_fig_gauge(w, "collector_down", (uint64_t)a->collector_down);
	rt_fig_gauge(w, "slices_in_flight", rt_route_inflight(&a->route));
	rt_fig_gauge(w, "buffers_in_flight", a->ix.st.inflight_buffers);
	rt_fig_gauge(w, "queued_buffers", a->rep.queued_buffers);
	rt_fig_u64(w, "slices_sent", a->st.slices_sent);
	rt_fig_u64(w, "slices_acked", a->st.slices_acked);
	rt_fig_u64(w, "slice_bytes_acked", a->st.slice_bytes_acked);
	rt_fig_u64(w, "slices_failed", a->st.slices_failed);
	rt_fig_u64(w, "slices_resent", a->st.slices_resent);
	rt_fig_u64(w, "slices_unsendable", a->st.slices_unsendable);
	rt_fig_u64(w, "rate_limited", a->st.rate_limited);
	rt_fig_u64(w, "abandoned_at_trigger", a->st.abandoned_at_trigger);
	rt_fig_u64(w, "remote_triggers", a->st.remote_triggers);
	if (a->control) { /* who answered requests (control.h): nng's thread while the
			   * poll thread slept, or the poll thread between passes */
		rt_fig_u64(w, "requests_answered_asleep", a->control->served_direct);
		rt_fig_u64(w, "requests_answered_by_poll", a->control->served_by_loop);
		/* the agent's part of a traversal hop (control.h), last 256 requests */
		static const double qs[2] = {0.5, 0.99};
		double wait[2], answer[2];
		rt_control_times(a->control, qs, 2, wait, answer);
		rt_fig_u64(w, "requests_timed", a->control->timed);
		rt_fig_time_f(w, "request_wait_p50_us", wait[0], 1e-6);
		rt_fig_time_f(w, "request_wait_p99_us", wait[1], 1e-6);
		rt_fig_time_f(w, "request_answer_p50_us", answer[0], 1e-6);
		rt_fig_time_f(w, "request_answer_p99_us", answer[1], 1e-6);
	}
	rt_fig_u64(w, "remote_open_traces", a->st.remote_open_traces);
	rt_fig_u64(w, "crumb_updates", a->st.crumb_updates);
	rt_fig_u64(w, "bad_requests", a->st.bad_requests);
	rt_fig_u64(w, "triggered_expired", a->st.triggered_expired);
	rt_fig_gauge(w, "coordinator_triggers_waiting", rt_route_waiting(&a->route));
	rt_fig_gauge(w, "coordinator_in_flight", rt_route_coord_inflight(&a->route));
	rt_fig_u64(w, "coordinator_sent", up.coord_sent);
	rt_fig_u64(w, "coordinator_acked", up.coord_acked);
	rt_fig_u64(w, "coordinator_failed", up.coord_failed);
	rt_fig_u64(w, "coordinator_dropped", up.coord_dropped);
	rt_fig_u64(w, "coordinator_reordered", up.coord_reordered);
	rt_fig_u64(w, "coordinator_evicted", up.coord_evicted);
	rt_fig_u64(w, "registrations", up.registrations);
	rt_fig_u64(w, "registrations_refused", up.registrations_refused);
	rt_fig_u64(w, "redials", up.redials);
	rt_fig_u64(w, "collector_redials", up.coll_redials);
	rt_fig_u64(w, "coordinator_redials", up.coord_redials);
	{ /* connections nng holds now, over the members' links (uplink.h) */
		long coll = 0, coord = 0;
		for (uint32_t m = 0; m < a->route.n; m++) {
			coll += atomic_load_explicit(&a->route.up[m].coll_pipes.n, memory_order_relaxed);
			coord += atomic_load_explicit(&a->route.up[m].coord_pipes.n, memory_order_relaxed);
		}
		rt_fig_gauge(w, "collector_connections", coll > 0 ? (uint64_t)coll : 0);
		rt_fig_gauge(w, "coordinator_connections", coord > 0 ? (uint64_t)coord : 0);
	}
	/* The coordinator group (route.h): members, live, moves. */
	rt_fig_gauge(w, "coordinator_members", a->route.n);
	rt_fig_gauge(w, "coordinator_members_live", rt_route_live(&a->route));
	rt_fig_u64(w, "coordinator_members_dropped", a->route.dropped);
	rt_fig_u64(w, "coordinator_members_returned", a->route.returned);
	rt_fig_u64(w, "coordinator_messages_moved", a->route.moved);
	rt_fig_str(w, "spool", a->spool ? a->cfg.spool_dir : "none");
	rt_fig_u64(w, "slices_spooled", a->st.slices_spooled);
	rt_fig_u64(w, "spool_sent", a->st.spool_sent);
	rt_fig_u64(w, "spool_full", a->st.spool_full);
	rt_fig_u64(w, "spool_errors", a->st.spool_errors);
	rt_fig_u64(w, "spool_cursor_errors", a->st.spool_cursor_errors);
	rt_fig_u64(w, "spool_foreign", a->st.spool_foreign);
	rt_fig_time_u64(w, "spool_backoff_ms", a->spool_backoff_ns / 1000000, 1e-3);
	rt_fig_gauge(w, "spool_held_back", (uint64_t)(a->spool_unconsumed != 0));
	if (a->spool) {
		struct rt_spool_stats ss;
		rt_spool_stats(a->spool, &ss);
		rt_fig_gauge(w, "spool_pending", ss.records_pending);
		rt_fig_gauge(w, "spool_pending_bytes", ss.bytes_pending);
		rt_fig_u64(w, "spool_torn_skipped", ss.torn_skipped);
		rt_fig_u64(w, "spool_corrupt_skipped", ss.corrupt_skipped);
		rt_fig_u64(w, "spool_io_errors", ss.io_errors);
		rt_fig_gauge(w, "spool_uring", ss.uring);
		rt_fig_u64(w, "spool_fallback_writes", ss.fallback_writes);
	}
}

/* One section per trigger id seen: trigger.<id>. */
static void trigger_sections(struct rt_figures *w, const struct rt_agent *a)
{
	uint32_t i;
	for (i = 0; i <= RT_REPORT_MAX_CLASSES; i++) {
		const struct rt_report_class *c = &a->rep.classes[i];
		char name[32];
		if (!c->used || (i == RT_REPORT_MAX_CLASSES && c->triggers + c->remote == 0))
			continue;
		if (i == RT_REPORT_MAX_CLASSES)
			snprintf(name, sizeof name, "other");
		else
			snprintf(name, sizeof name, "%u", c->trigger_id);
		rt_fig_section_id(w, "trigger", "trigger_id", name);
		rt_fig_f(w, "weight", c->weight);
		rt_fig_u64(w, "triggers", c->triggers);
		rt_fig_u64(w, "rate_limited", c->rate_limited);
		rt_fig_u64(w, "remote", c->remote);
		rt_fig_u64(w, "traces_pinned", c->traces_pinned);
		rt_fig_gauge(w, "queued_traces", c->queued);
		rt_fig_gauge(w, "queued_buffers", c->queued_buffers);
		rt_fig_u64(w, "slices_sent", c->slices_sent);
		rt_fig_u64(w, "slice_bytes_sent", c->slice_bytes_sent);
		rt_fig_u64(w, "slices_acked", c->slices_acked);
		rt_fig_u64(w, "bytes_acked", c->bytes_acked);
		rt_fig_u64(w, "slices_spooled", c->slices_spooled);
		rt_fig_u64(w, "bytes_spooled", c->bytes_spooled);
		rt_fig_u64(w, "abandoned_traces", c->abandoned_traces);
		rt_fig_u64(w, "abandoned_at_trigger", c->abandoned_at_trigger);
		rt_fig_u64(w, "abandoned_buffers", c->abandoned_buffers);
		rt_fig_gauge(w, "overload_level", c->level);
		rt_fig_gauge(w, "overload_level_max", c->max_level);
		rt_fig_u64(w, "unsendable_slices", c->unsendable_slices);
		rt_fig_u64(w, "unsendable_buffers", c->unsendable_buffers);
		rt_fig_u64(w, "unsendable_bytes", c->unsendable_bytes);
	}
}

static void all_figures(struct rt_figures *w, const struct rt_agent *a)
{
	agent_section(w, a);
	buffer_section(w, a);
	trace_section(w, a);
	queue_section(w, a);
	malformed_section(w, a);
	client_section(w, a);
	reporting_section(w, a);
	trigger_sections(w, a);
	rt_agent_policy_figures(w, a);
	rt_agent_guard_figures(w, a);
	rt_agent_window_figures(w, a);
}

size_t rt_agent_status(const struct rt_agent *a, int json, char *out, size_t outlen)
{
	struct rt_figures w;
	if (outlen == 0)
		return 0;
	rt_fig_init(&w, out, outlen, json);
	all_figures(&w, a);
	return rt_fig_end(&w);
}

size_t rt_agent_metrics(const struct rt_agent *a, char *out, size_t outlen, int *cut)
{
	struct rt_figures w;
	size_t n;
	rt_fig_init_prometheus(&w, out, outlen, "agent");
	all_figures(&w, a);
	n = rt_fig_end(&w);
	*cut = rt_fig_cut(&w);
	return n;
}
