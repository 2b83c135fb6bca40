/*
 * status_summary.c — the one-screen form of `retrace status` (the default; the
 * full figures are `--all`, or `--json`).
 *
 * How it works: the daemon renders its figures as JSON (daemon/figures.h; the
 * names are those of docs/metrics.md); this file parses them with jansson and
 * prints a few lines per daemon in human units — what an operator looks at
 * first: is it connected, how full is the pool and how far back does it
 * reach (the event horizon), what was triggered and reported, and every
 * non-zero drop or error counter, by name, so nothing dropped hides behind the
 * summary. A figure the daemon does not send (an older daemon) prints as "?".
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cmd.h"

static json_t *sec(json_t *doc, const char *section)
{
	json_t *s = json_object_get(doc, section);
	return json_is_object(s) ? s : NULL;
}

static double num(json_t *doc, const char *section, const char *key, int *missing)
{
	json_t *s = sec(doc, section), *v = s ? json_object_get(s, key) : NULL;
	if (!json_is_number(v)) {
		if (missing)
			*missing = 1;
		return 0;
	}
	return json_number_value(v);
}

static const char *str(json_t *doc, const char *section, const char *key)
{
	json_t *s = sec(doc, section), *v = s ? json_object_get(s, key) : NULL;
	return json_is_string(v) ? json_string_value(v) : "?";
}

/* 1536 -> "1.5 KiB" */
static const char *bytes_h(double b, char *out, size_t cap)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;
	while (b >= 1024 && u < 4) {
		b /= 1024;
		u++;
	}
	snprintf(out, cap, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
	return out;
}

/* seconds -> "850 ms", "12.6 s", "3 min 20 s", "2 h 5 min", "3 d 4 h" */
static const char *secs_h(double s, char *out, size_t cap)
{
	long t = (long)s;
	if (s < 1)
		snprintf(out, cap, "%.0f ms", s * 1e3);
	else if (s < 120)
		snprintf(out, cap, "%.1f s", s);
	else if (t < 7200)
		snprintf(out, cap, "%ld min %ld s", t / 60, t % 60);
	else if (t < 172800)
		snprintf(out, cap, "%ld h %ld min", t / 3600, t % 3600 / 60);
	else
		snprintf(out, cap, "%ld d %ld h", t / 86400, t % 86400 / 3600);
	return out;
}

/* Every non-zero counter of the given keys (section.key), as "key N, ...". */
static void nonzero(json_t *doc, const char *const *keys, char *out, size_t cap)
{
	size_t n = 0;
	out[0] = 0;
	for (; *keys; keys++) {
		char section[64];
		const char *dot = strchr(*keys, '.');
		double v;
		int missing = 0;
		if (!dot || (size_t)(dot - *keys) >= sizeof section)
			continue;
		snprintf(section, sizeof section, "%.*s", (int)(dot - *keys), *keys);
		v = num(doc, section, dot + 1, &missing);
		if (missing || v == 0 || n + 2 >= cap)
			continue;
		n += (size_t)snprintf(out + n, cap - n, "%s%s %.0f", n ? ", " : "", *keys, v);
		if (n >= cap)
			n = cap - 1;
	}
	if (!out[0])
		snprintf(out, cap, "nothing");
}

static const char *const agent_drops[] = {
	"buffers.null_buffers", "traces.abandoned", "traces.table_full", "traces.crumbs_dropped",
	"queues.trigger_drops", "queues.breadcrumb_drops", "queues.complete_drops",
	"queues.recycle_fail", "malformed.complete_bad_buffer_id", "malformed.complete_bad_bytes",
	"malformed.complete_zero_trace", "malformed.complete_bad_header",
	"malformed.complete_duplicate", "malformed.breadcrumbs", "malformed.triggers",
	"malformed.available_bad_id", "malformed.corrupt_frames", "malformed.bad_segments",
	"malformed.segment_slots_full", "malformed.ring_resets", "clients.registry_full",
	"reporting.slices_failed", "reporting.slices_unsendable", "reporting.rate_limited",
	"reporting.abandoned_at_trigger", "reporting.coordinator_failed",
	"reporting.coordinator_dropped", "reporting.registrations_refused", "reporting.spool_full",
	"reporting.spool_errors", "security.connections_refused", "security.tls_handshakes_refused",
	"security.remote_triggers_unauthorised", "security.remote_triggers_rate_limited", NULL
};

static void agent_summary(json_t *d)
{
	char a[32], b[32], c[32], drops[1024];
	double total = num(d, "buffers", "total", NULL), size = num(d, "buffers", "size", NULL);
	double freeb = num(d, "buffers", "free", NULL), evict = num(d, "buffers", "evict_above", NULL);
	int no_util = 0;
	double util = num(d, "buffers", "utilisation", &no_util);
	const char *coord = str(d, "agent", "coordinator");
	printf("agent %.0f (pid %.0f, pool %s, up %s), coordinator %s%s\n", num(d, "agent", "id", NULL),
	       num(d, "agent", "pid", NULL), str(d, "agent", "pool"),
	       secs_h(num(d, "agent", "uptime_s", NULL), a, sizeof a), coord,
	       !strcmp(coord, "none") ? ""
	       : num(d, "reporting", "registrations_refused", NULL) > 0 ? " (registration REFUSED)"
	       : num(d, "reporting", "registrations", NULL) > 0 ? " (registered)"
								 : " (not registered yet)");
	printf("  pool       %.0f x %s = %s: %.0f %% held", total, bytes_h(size, a, sizeof a),
	       bytes_h(total * size, b, sizeof b), total ? 100 * (total - freeb) / total : 0);
	if (!no_util && total > freeb)
		printf(", %.0f %% of that holds trace data", 100 * util);
	printf("; evicts above %.0f %%\n", total ? 100 * evict / total : 0);
	printf("  traces     %.0f indexed, %.0f pinned; ", num(d, "traces", "indexed", NULL),
	       num(d, "traces", "pinned", NULL));
	if (num(d, "traces", "evicted", NULL) > 0)
		printf("event horizon %s (p50), %s (min); %.0f evicted\n",
		       secs_h(num(d, "traces", "event_horizon_p50_us", NULL) / 1e6, a, sizeof a),
		       secs_h(num(d, "traces", "event_horizon_min_us", NULL) / 1e6, b, sizeof b),
		       num(d, "traces", "evicted", NULL));
	else
		printf("nothing evicted yet (the pool reaches back to the agent's start)\n");
	printf("  clients    %.0f attached, %.0f died\n", num(d, "clients", "attached", NULL),
	       num(d, "clients", "died", NULL));
	printf("  triggers   %.0f local groups (%.0f traces), %.0f remote\n",
	       num(d, "queues", "trigger_groups", NULL), num(d, "queues", "triggered_traces", NULL),
	       num(d, "reporting", "remote_triggers", NULL));
	printf("  reporting  collector %s: %.0f slices acked (%s), %.0f in flight, %.0f spooled\n",
	       str(d, "reporting", "collector"), num(d, "reporting", "slices_acked", NULL),
	       bytes_h(num(d, "reporting", "slice_bytes_acked", NULL), c, sizeof c),
	       num(d, "reporting", "slices_in_flight", NULL),
	       num(d, "reporting", "slices_spooled", NULL));
	nonzero(d, agent_drops, drops, sizeof drops);
	printf("  dropped    %s\n", drops);
}

static const char *const coord_drops[] = {
	"traversal.groups_dropped", "traversal.traces_dropped", "traversal.remote_failed",
	"traversal.remote_bad_replies", "collection.traces_undecodable",
	"collection.malformed_slices", "collection.malformed_messages", "store.errors",
	"store.checkpoint_errors", "selection.decode_errors", "selection.select_errors",
	"selection.store_errors", "export.dropped_queue_full", "export.traces_lost",
	"security.connections_refused", "security.tls_handshakes_refused",
	"security.unauthenticated_requests", "security.registrations_refused",
	"security.register_moves_refused", "security.triggers_refused", "security.slices_refused",
	"security.operator_commands_refused", NULL
};

static void coordinator_summary(json_t *d)
{
	char a[32], b[32], drops[1024];
	printf("coordinator (pid %.0f, up %s), store %s\n", num(d, "coordinator", "pid", NULL),
	       secs_h(num(d, "coordinator", "uptime_s", NULL), a, sizeof a),
	       str(d, "coordinator", "store"));
	if (sec(d, "ring")) { /* a sharded coordinator group (docs/scaling.md) */
		const char *k;
		json_t *v;
		printf("  ring       member %s of %.0f (%.0f live)\n", str(d, "ring", "member_id"),
		       num(d, "ring", "members", NULL), num(d, "ring", "members_live", NULL));
		json_object_foreach(sec(d, "ring"), k, v)
			if (!strncmp(k, "member.", 7) && json_is_string(v))
				printf("    %-8s %s\n", k + 7, json_string_value(v));
	}
	printf("  agents     %.0f known\n", num(d, "agents", "known", NULL));
	printf("  traces     %.0f coherent, %.0f incoherent (%.1f %% coherent), %.0f in flight; "
	       "traversal p50 %.1f ms, p99 %.1f ms\n",
	       num(d, "collection", "traces_coherent", NULL),
	       num(d, "collection", "traces_incoherent", NULL),
	       num(d, "collection", "coherent_pct", NULL), num(d, "traversal", "groups_in_flight", NULL),
	       num(d, "traversal", "latency_p50_ms", NULL), num(d, "traversal", "latency_p99_ms", NULL));
	printf("  store      %.0f traces, %s of slices, file %s\n", num(d, "store", "traces", NULL),
	       bytes_h(num(d, "store", "slice_bytes", NULL), a, sizeof a),
	       bytes_h(num(d, "store", "file_bytes", NULL), b, sizeof b));
	printf("  selection  %.0f kept, %.0f dropped in %.0f windows (budget %.0f/min; 0 = keep all)\n",
	       num(d, "selection", "kept", NULL), num(d, "selection", "dropped", NULL),
	       num(d, "selection", "windows", NULL), num(d, "selection", "budget_per_min", NULL));
	if (sec(d, "export"))
		printf("  export     %s: %.0f traces exported, %.0f queued\n", str(d, "export", "url"),
		       num(d, "export", "exported_traces", NULL), num(d, "export", "queued", NULL));
	nonzero(d, coord_drops, drops, sizeof drops);
	printf("  dropped    %s\n", drops);
}

int cli_print_status_summary(const char *json_text, size_t len, int coordinator)
{
	json_error_t e;
	json_t *doc = json_loadb(json_text, len, 0, &e);
	if (!json_is_object(doc)) {
		fprintf(stderr, "retrace status: the daemon's figures do not parse (%s); try --all\n",
			e.text);
		json_decref(doc);
		return 1;
	}
	if (coordinator)
		coordinator_summary(doc);
	else
		agent_summary(doc);
	json_decref(doc);
	return 0;
}
