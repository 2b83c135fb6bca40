/*
 * agent/status.c — the figures `retrace status` shows, as JSON or as text.
 *
 * The figures are listed once, in sections; a small writer renders each either
 * as a JSON member or as an aligned text line, so both forms always agree.
 */
#include "agent.h"
#include "spool.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct fig_writer {
	char *out;
	size_t len, cap;
	int json;
	int first;      /* no member written yet in this section */
	int sections;
};

static void put(struct fig_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct fig_writer *w, const char *fmt, ...)
{
	va_list ap;
	int n;
	if (w->len >= w->cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(w->out + w->len, w->cap - w->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		w->len += (size_t)n < w->cap - w->len ? (size_t)n : w->cap - w->len - 1;
}

static void section(struct fig_writer *w, const char *name)
{
	if (w->json)
		put(w, "%s\"%s\":{", w->sections ? "}," : "{", name);
	else
		put(w, "%s:\n", name);
	w->sections++;
	w->first = 1;
}

static void key(struct fig_writer *w, const char *k)
{
	if (w->json)
		put(w, "%s\"%s\":", w->first ? "" : ",", k);
	else
		put(w, "  %-28s ", k);
	w->first = 0;
}

static void fig_u64(struct fig_writer *w, const char *k, uint64_t v)
{
	key(w, k);
	put(w, w->json ? "%llu" : "%llu\n", (unsigned long long)v);
}

static void fig_f(struct fig_writer *w, const char *k, double v)
{
	key(w, k);
	put(w, w->json ? "%.3f" : "%.3f\n", v);
}

/* Strings here are pool names and URLs we validated; escape quotes anyway. */
static void fig_str(struct fig_writer *w, const char *k, const char *s)
{
	key(w, k);
	if (!w->json) {
		put(w, "%s\n", s);
		return;
	}
	put(w, "\"");
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			put(w, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			put(w, "\\u%04x", (unsigned)*s);
		else
			put(w, "%c", *s);
	}
	put(w, "\"");
}

static void agent_section(struct fig_writer *w, const struct rt_agent *a)
{
	const struct rt_pool_header *h = a->pool.hdr;
	section(w, "agent");
	fig_u64(w, "id", a->cfg.agent_id);
	fig_u64(w, "pid", (uint64_t)getpid());
	fig_str(w, "pool", a->pool.name);
	fig_u64(w, "generation", h->generation);
	fig_u64(w, "took_over", (uint64_t)a->took_over);
	fig_f(w, "uptime_s", (double)(rt_agent_now_ns() - a->start_ns) / 1e9);
	fig_str(w, "listen", a->cfg.listen);
	fig_str(w, "coordinator", a->cfg.coordinator[0] ? a->cfg.coordinator : "none");
}

static void buffer_section(struct fig_writer *w, const struct rt_agent *a)
{
	const struct rt_pool_header *h = a->pool.hdr;
	uint64_t free_now = rt_agent_free_buffers(a), idx = a->ix.st.buffers;
	uint64_t held = h->buffer_count > free_now + idx ? h->buffer_count - free_now - idx : 0;
	section(w, "buffers");
	fig_u64(w, "size", h->buffer_size);
	fig_u64(w, "total", h->buffer_count);
	fig_u64(w, "free", free_now);
	fig_u64(w, "indexed", idx);
	fig_u64(w, "held_by_clients", held);
	fig_u64(w, "pinned", a->ix.st.pinned_buffers);
	fig_u64(w, "bytes_indexed", a->ix.st.bytes);
	fig_u64(w, "evict_above", a->evict_limit);
	fig_u64(w, "null_buffers", ck_pr_load_64((uint64_t *)&h->null_buffers));
}

static void trace_section(struct fig_writer *w, const struct rt_agent *a)
{
	const struct rt_index_stats *s = &a->ix.st;
	section(w, "traces");
	fig_u64(w, "indexed", s->traces);
	fig_u64(w, "capacity", a->ix.capacity);
	fig_u64(w, "pinned", s->pinned_traces);
	fig_u64(w, "breadcrumbs", s->crumbs);
	fig_u64(w, "evicted", s->evicted_traces);
	fig_u64(w, "evicted_buffers", s->evicted_buffers);
	fig_u64(w, "evicted_bytes", s->evicted_bytes);
	fig_u64(w, "event_horizon_us", s->horizon_us);
	fig_u64(w, "event_horizon_p50_us", rt_index_horizon_percentile(&a->ix, 0.5));
	fig_u64(w, "event_horizon_p99_us", rt_index_horizon_percentile(&a->ix, 0.99));
	fig_u64(w, "abandoned", a->st.abandoned_traces);
	fig_u64(w, "abandoned_buffers", a->st.abandoned_buffers);
	fig_u64(w, "table_full", a->st.index_full);
	fig_u64(w, "quiet_reclaimed", a->st.quiet_reclaimed);
	fig_u64(w, "crumbs_dropped", s->crumbs_dropped);
}

static void queue_section(struct fig_writer *w, const struct rt_agent *a)
{
	const struct rt_pool_header *h = a->pool.hdr;
	section(w, "queues");
	fig_u64(w, "available_depth", rt_agent_queue_depth(a, RT_Q_AVAILABLE));
	fig_u64(w, "complete_depth", rt_agent_queue_depth(a, RT_Q_COMPLETE));
	fig_u64(w, "breadcrumb_depth", rt_agent_queue_depth(a, RT_Q_BREADCRUMB));
	fig_u64(w, "trigger_depth", rt_agent_queue_depth(a, RT_Q_TRIGGER));
	fig_u64(w, "complete_entries", a->st.complete_entries);
	fig_u64(w, "breadcrumbs", a->st.breadcrumbs);
	fig_u64(w, "trigger_groups", a->st.trigger_groups);
	fig_u64(w, "triggered_traces", a->st.triggered_traces);
	fig_u64(w, "trigger_drops", ck_pr_load_64((uint64_t *)&h->trigger_drops));
	fig_u64(w, "breadcrumb_drops", ck_pr_load_64((uint64_t *)&h->breadcrumb_drops));
	fig_u64(w, "complete_drops", ck_pr_load_64((uint64_t *)&h->complete_drops));
	fig_u64(w, "recycle_fail", a->st.recycle_fail);
}

static void malformed_section(struct fig_writer *w, const struct rt_agent *a)
{
	const struct rt_pool_header *h = a->pool.hdr;
	section(w, "malformed");
	fig_u64(w, "complete_bad_buffer_id", a->st.bad_range);
	fig_u64(w, "complete_bad_bytes", a->st.bad_bytes);
	fig_u64(w, "complete_zero_trace", a->st.bad_zero_trace);
	fig_u64(w, "complete_bad_header", a->st.bad_header);
	fig_u64(w, "complete_duplicate", a->st.bad_duplicate);
	fig_u64(w, "breadcrumbs", a->st.bad_breadcrumbs);
	fig_u64(w, "triggers", a->st.bad_triggers);
	fig_u64(w, "available_bad_id", ck_pr_load_64((uint64_t *)&h->bad_available));
	fig_u64(w, "corrupt_frames", a->st.corrupt_frames);
}

static void client_section(struct fig_writer *w, const struct rt_agent *a)
{
	const struct rt_pool_header *h = a->pool.hdr;
	section(w, "clients");
	fig_u64(w, "attached", rt_agent_clients_attached(a));
	fig_u64(w, "registry_slots", h->registry_slots);
	fig_u64(w, "registry_full", ck_pr_load_64((uint64_t *)&h->registry_full));
	fig_u64(w, "died", a->st.clients_died);
	fig_u64(w, "dead_buffers_indexed", a->st.dead_buffers_indexed);
	fig_u64(w, "dead_buffers_freed", a->st.dead_buffers_freed);
	fig_u64(w, "recovered_traces", a->st.recovered_traces);
	fig_u64(w, "recovered_buffers", a->st.recovered_buffers);
	fig_u64(w, "recovered_echoes", a->st.recovered_echoes);
	fig_u64(w, "lost_buffers_reclaimed", a->st.lost_buffers_reclaimed);
}

static void reporting_section(struct fig_writer *w, const struct rt_agent *a)
{
	section(w, "reporting");
	fig_str(w, "collector", a->cfg.collector[0] ? a->cfg.collector : "none");
	fig_u64(w, "collector_down", (uint64_t)a->collector_down);
	fig_u64(w, "slices_in_flight", rt_uplink_inflight(&a->up));
	fig_u64(w, "buffers_in_flight", a->ix.st.inflight_buffers);
	fig_u64(w, "queued_buffers", a->rep.queued_buffers);
	fig_u64(w, "slices_sent", a->st.slices_sent);
	fig_u64(w, "slices_acked", a->st.slices_acked);
	fig_u64(w, "slice_bytes_acked", a->st.slice_bytes_acked);
	fig_u64(w, "slices_failed", a->st.slices_failed);
	fig_u64(w, "slices_unsendable", a->st.slices_unsendable);
	fig_u64(w, "rate_limited", a->st.rate_limited);
	fig_u64(w, "remote_triggers", a->st.remote_triggers);
	fig_u64(w, "bad_requests", a->st.bad_requests);
	fig_u64(w, "triggered_expired", a->st.triggered_expired);
	fig_u64(w, "coordinator_triggers_waiting", a->up.out_len);
	fig_u64(w, "coordinator_sent", a->up.st.coord_sent);
	fig_u64(w, "coordinator_acked", a->up.st.coord_acked);
	fig_u64(w, "coordinator_failed", a->up.st.coord_failed);
	fig_u64(w, "coordinator_dropped", a->up.st.coord_dropped);
	fig_u64(w, "registrations", a->up.st.registrations);
	fig_str(w, "spool", a->spool ? a->cfg.spool_dir : "none");
	fig_u64(w, "slices_spooled", a->st.slices_spooled);
	fig_u64(w, "spool_sent", a->st.spool_sent);
	fig_u64(w, "spool_full", a->st.spool_full);
	fig_u64(w, "spool_errors", a->st.spool_errors);
	if (a->spool) {
		struct rt_spool_stats ss;
		rt_spool_stats(a->spool, &ss);
		fig_u64(w, "spool_pending", ss.records_pending);
		fig_u64(w, "spool_pending_bytes", ss.bytes_pending);
		fig_u64(w, "spool_torn_skipped", ss.torn_skipped);
		fig_u64(w, "spool_corrupt_skipped", ss.corrupt_skipped);
		fig_u64(w, "spool_io_errors", ss.io_errors);
		fig_u64(w, "spool_uring", ss.uring);
		fig_u64(w, "spool_fallback_writes", ss.fallback_writes);
	}
}

/* One section per trigger id seen: trigger.<id>. */
static void trigger_sections(struct fig_writer *w, const struct rt_agent *a)
{
	uint32_t i;
	for (i = 0; i <= RT_REPORT_MAX_CLASSES; i++) {
		const struct rt_report_class *c = &a->rep.classes[i];
		char name[32];
		if (!c->used || (i == RT_REPORT_MAX_CLASSES && c->triggers + c->remote == 0))
			continue;
		if (i == RT_REPORT_MAX_CLASSES)
			snprintf(name, sizeof name, "trigger.other");
		else
			snprintf(name, sizeof name, "trigger.%u", c->trigger_id);
		section(w, name);
		fig_f(w, "weight", c->weight);
		fig_u64(w, "triggers", c->triggers);
		fig_u64(w, "rate_limited", c->rate_limited);
		fig_u64(w, "remote", c->remote);
		fig_u64(w, "traces_pinned", c->traces_pinned);
		fig_u64(w, "queued_traces", c->queued);
		fig_u64(w, "queued_buffers", c->queued_buffers);
		fig_u64(w, "slices_sent", c->slices_sent);
		fig_u64(w, "slice_bytes_sent", c->slice_bytes_sent);
		fig_u64(w, "slices_acked", c->slices_acked);
		fig_u64(w, "bytes_acked", c->bytes_acked);
		fig_u64(w, "slices_spooled", c->slices_spooled);
		fig_u64(w, "bytes_spooled", c->bytes_spooled);
		fig_u64(w, "abandoned_traces", c->abandoned_traces);
		fig_u64(w, "abandoned_buffers", c->abandoned_buffers);
		fig_u64(w, "overload_level", c->level);
		fig_u64(w, "overload_level_max", c->max_level);
		fig_u64(w, "unsendable_slices", c->unsendable_slices);
		fig_u64(w, "unsendable_buffers", c->unsendable_buffers);
		fig_u64(w, "unsendable_bytes", c->unsendable_bytes);
	}
}

size_t rt_agent_status(const struct rt_agent *a, int json, char *out, size_t outlen)
{
	struct fig_writer w = { .out = out, .cap = outlen, .json = json };
	if (outlen == 0)
		return 0;
	out[0] = 0;
	agent_section(&w, a);
	buffer_section(&w, a);
	trace_section(&w, a);
	queue_section(&w, a);
	malformed_section(&w, a);
	client_section(&w, a);
	reporting_section(&w, a);
	trigger_sections(&w, a);
	if (json)
		put(&w, "}}\n");
	return w.len;
}
