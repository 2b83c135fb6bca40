/*
 * coordinator/config.c — retrace-coordinator's settings: its table of rows and
 * its checks.
 *
 * Each row names a setting once: its long flag (also its config-file key), its
 * kind, where it lives in struct rt_coord_config, the value's name and its help
 * line. The flags, the `--config FILE` parser and --help come from the rows
 * through daemon/options.c; the kinds below say how each value is read and what
 * range it takes. What no single value can say (--member-id among --peers, on or
 * off) is checked after parsing.
 */
#include "coordinator.h"

#include <stddef.h>
#include <string.h>

#include "store.h"
#include "daemon/log.h"
#include "daemon/ring.h"
#include "daemon/metrics.h"
#include "daemon/options.h"
#include "http_api.h"

enum opt_type { T_STR, T_LIST, T_SECONDS, T_U32, T_U64, T_FLAG, T_LEVEL, T_CONFIG, T_GID };

static const struct rt_opt_kind kinds[] = {
	[T_STR] = { RT_OPT_STR, 0, 0, 0, RT_COORD_URL_MAX, NULL },
	[T_LIST] = { RT_OPT_STR, 0, 0, 0, RT_COORD_PEERS_MAX, NULL },
	[T_SECONDS] = { RT_OPT_REAL, 0, 1e7, 0, 0, "seconds from 0 to 10000000" },
	[T_U32] = { RT_OPT_U32, 0, 0, 0, 0, "an unsigned 32-bit integer" },
	[T_U64] = { RT_OPT_U64, 0, 0, 0, 0, "an unsigned integer" },
	[T_FLAG] = { RT_OPT_FLAG, 0, 0, 0, 0, "true or false" },
	[T_LEVEL] = { RT_OPT_LEVEL, 0, 0, 0, 0, "error, warn, info or debug" },
	[T_CONFIG] = { RT_OPT_CONFIG, 0, 0, 0, 0, NULL },
	[T_GID] = { RT_OPT_GID, 0, 0, 0, 0, "a group name or a numeric group id" },
};

#define F(field) offsetof(struct rt_coord_config, field)

RT_OPT_ROWS_BEGIN
static const struct rt_opt rows[] = {
	{ "config", T_CONFIG, 0, "FILE", "read settings from FILE (key = value lines)" },
	{ "listen", T_STR, F(listen), "URL", "where agents register and send triggers, and `retrace status` asks (default tcp://127.0.0.1:7700)" },
	{ "collector", T_STR, F(collector), "URL", "where agents send slices (default tcp://127.0.0.1:7701)" },
	{ "store", T_STR, F(store), "STORE", "the store: PATH or sqlite:PATH (a SQLite file), or clickhouse://HOST:PORT/DB (docs/store.md; default ./retrace.db)" },
	{ "sync-full", T_FLAG, F(sync_full), NULL, "fsync every commit: acknowledged slices survive a power cut, not just a crash" },
	{ "commit-interval", T_SECONDS, F(commit_interval), "SEC", "group commit: one store transaction gathers turns for up to SEC, acknowledging their slices after it (default 0 for SQLite: every turn; 0.25 for ClickHouse)" },
	{ "commit-slices", T_U32, F(commit_slices), "N", "group commit: commit as soon as N slices wait for it (default 0 = all the collector's contexts but one)" },
	{ "collector-contexts", T_U32, F(collector_contexts), "N", "slices the collector receives at once, 1..512: it holds each until its commit (default 512)" },
	{ "member-id", T_STR, F(member_id), "ID", "this coordinator's id in --peers: agents route each trace to the member rendezvous hashing gives it (docs/scaling.md)" },
	{ "peers", T_LIST, F(peers), "ID=URL,...", "every member of the coordinator group (this one included) with its --listen URL; `retrace status` shows the ring" },
	{ "settle", T_SECONDS, F(settle), "SEC", "quiet time after the last slice before a trace closes (default 1)" },
	{ "collect-timeout", T_SECONDS, F(collect_timeout), "SEC", "close a trace this long after its trigger regardless (default 10; weaving starts one more, docs/coordinator.md)" },
	{ "state-ttl", T_SECONDS, F(state_ttl), "SEC", "remember closed traces this long for late slices (default 60)" },
	{ "agent-timeout", T_SECONDS, F(agent_timeout), "SEC", "one remote trigger's round-trip timeout (default 1)" },
	{ "agent-retries", T_U32, F(agent_retries), "N", "retries after a remote trigger timed out (default 2)" },
	{ "agent-ttl", T_SECONDS, F(agent_ttl), "SEC", "forget an agent silent this long (default 60; 0 = never)" },
	{ "retain-age", T_SECONDS, F(retain_age), "SEC", "delete traces older than this (default 0 = keep)" },
	{ "retain-bytes", T_U64, F(retain_bytes), "BYTES", "delete the oldest traces above this much slice data (default 0 = no limit)" },
	{ "max-groups", T_U32, F(max_groups), "N", "trace groups in traversal/collection at once (default 4096)" },
	{ "ready-file", T_STR, F(ready_file), "PATH", "write the bound addresses to PATH once listening" },
	{ "log-level", T_LEVEL, F(log_level), "LEVEL", "error, warn, info or debug (default info)" },
	{ "select-window", T_SECONDS, F(select_window), "SEC", "selection window: traffic selected together, and the budget's unit (default 60)" },
	{ "select-window-traces", T_U32, F(select_window_traces), "N", "also close a selection window after N coherent traces (default 0 = by time only)" },
	{ "select-budget", T_SECONDS, F(select_budget), "N", "traces kept per minute; the rest of each window is deleted (default 0 = keep all)" },
	{ "select-no-trigger-alarms", T_FLAG, F(select_no_trigger_alarms), NULL, "do not alarm the entry API of traces a (non head-sampling) trigger collected" },
	{ "select-no-hold", T_FLAG, F(select_no_hold), NULL, "select every trace in the window it arrived in (default: the traces of a window's newest minute of trace time, which its close cuts, wait one window)" },
	{ "adaptive", T_STR, F(adaptive), "on|off", "adaptive span instrumentation: learn which span sites explain latency variance from collected traces and turn the others down in the clients (default off: every span recorded; docs/adaptive.md)" },
	{ "adaptive-pin", T_STR, F(adaptive_pin), "SITES", "span sites always recorded, as service:operation,service:operation" },
	{ "adaptive-window", T_SECONDS, F(adaptive_window), "SEC", "a learner cycle (and a policy to the agents) at least this often while traces arrive (default 10)" },
	{ "adaptive-batch", T_U32, F(adaptive_batch), "N", "a learner cycle after N collected traces at most (default 50)" },
	{ "adaptive-max-sites", T_U32, F(adaptive_max_sites), "N", "span sites the learner keeps (default 1000; an agent's pool table takes 1024 by default)" },
	{ "tls-ca", T_STR, F(tls_ca), "FILE", "CA certificate (PEM) of the deployment: TLS on every tcp:// address (docs/security.md)" },
	{ "tls-cert", T_STR, F(tls_cert), "FILE", "our certificate (PEM, CN=coordinator; scripts/retrace-keys.sh)" },
	{ "tls-key", T_STR, F(tls_key), "FILE", "the certificate's private key (PEM)" },
	{ "insecure", T_FLAG, F(insecure), NULL, "allow plain tcp:// beyond loopback without certificates (a trusted network only)" },
	{ "max-connections", T_U32, F(max_connections), "N", "connections each listener holds at once (default 1024 with TLS, 16 without)" },
	{ "store-group", T_GID, F(store_group), "GROUP", "create the store file 0640 for this group (name or id; default 0600)" },
	{ "metrics-listen", T_STR, F(metrics_listen), "URL", "serve Prometheus /metrics at this http:// URL, e.g. http://127.0.0.1:9464 (default: off; loopback unless --insecure)" },
	{ "export-url", T_STR, F(export_url), "URL", "push kept traces to this OTLP/HTTP collector as selection keeps them, e.g. http://127.0.0.1:4318/v1/traces (default: off; docs/export.md)" },
	{ "export-queue", T_U32, F(export_queue), "N", "traces waiting for export at most; more are dropped and counted (default 2048)" },
	{ "export-batch", T_U32, F(export_batch), "N", "traces per push (default 128)" },
	{ "export-interval", T_SECONDS, F(export_interval), "SEC", "push what waits at least this often (default 1)" },
	{ "http-listen", T_STR, F(http_listen), "URL", "serve the web UI and its JSON API (/api/...) at this http:// URL, e.g. http://127.0.0.1:9480 (default: off; loopback unless --insecure; docs/ui.md)" },
	{ "weave", T_STR, F(weave), "on|off", "infer the links of hops that dropped the trace context, and collect the callee's half with the caller's (default off; docs/weaving.md)" },
	{ "weave-graph", T_STR, F(weave_graph), "FILE", "call-graph edges \"CALLER CALLEE\" per line, for CLIENT spans without peer.service" },
	{ "weave-timeout", T_SECONDS, F(weave_timeout), "SEC", "how long the agents' candidate answers may take (default 1)" },
	{ "history-interval", T_SECONDS, F(history_interval), "SEC", "with --http-listen: sample per-trigger rates, agents' event horizon and drops and selection windows this often for the UI's history (/api/history; default 5, 0 = off)" },
	{ "check-config", T_FLAG, F(check_config), NULL, "check every setting's syntax and range (flags and --config file), then exit: 0, or 2 with the reason" },
};
RT_OPT_ROWS_END

static const struct rt_opt_table table = {
	.prog = "retrace-coordinator",
	.intro = "usage: retrace-coordinator [options]\n"
		 "Follows breadcrumbs from every trigger to each agent the request visited,\n"
		 "collects their slices into coherent traces and keeps them in a store (SQLite or ClickHouse).\n\n",
	.rows = rows,
	.nrows = sizeof rows / sizeof rows[0],
	.kinds = kinds,
	.nkinds = sizeof kinds / sizeof kinds[0],
};

void rt_coord_config_defaults(struct rt_coord_config *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->listen, sizeof c->listen, "tcp://127.0.0.1:7700");
	snprintf(c->collector, sizeof c->collector, "tcp://127.0.0.1:7701");
	snprintf(c->store, sizeof c->store, "%s", RT_STORE_DEFAULT_PATH);
	c->commit_interval = -1; /* the store's default (batch.c) */
	c->settle = 1.0;
	c->collect_timeout = 10.0;
	c->state_ttl = 60.0;
	snprintf(c->weave, sizeof c->weave, "off");
	c->weave_timeout = 1.0;
	c->agent_timeout = 1.0;
	c->agent_retries = 2;
	c->agent_ttl = 60.0;
	c->max_groups = 4096;
	c->log_level = RT_LOG_INFO;
	c->select_window = 60.0;
	snprintf(c->adaptive, sizeof c->adaptive, "off");
	c->adaptive_window = 10.0;
	c->adaptive_batch = 50;
	c->adaptive_max_sites = 1000;
	c->history_interval = 5.0;
	c->store_group = -1;
}

void rt_coord_usage(FILE *out)
{
	rt_opt_usage(&table, out);
}

int rt_coord_config_parse(struct rt_coord_config *c, int argc, char **argv, FILE *err)
{
	int rc = rt_opt_parse(&table, c, argc, argv, err);
	if (rc != 0)
		return rc;
	if (c->max_groups == 0 || c->max_groups > (1u << 22)) {
		fprintf(err, "retrace-coordinator: --max-groups must be 1..4194304\n");
		return -1;
	}
	if (c->select_window < 0.01) {
		fprintf(err, "retrace-coordinator: --select-window must be at least 0.01 s\n");
		return -1;
	}
	if (strcmp(c->adaptive, "on") != 0 && strcmp(c->adaptive, "off") != 0) {
		fprintf(err, "retrace-coordinator: --adaptive must be on or off\n");
		return -1;
	}
	if (c->adaptive_window < 0.01 || c->adaptive_batch == 0 || c->adaptive_max_sites == 0 ||
	    c->adaptive_max_sites > 65536) {
		fprintf(err, "retrace-coordinator: --adaptive-window must be at least 0.01 s, --adaptive-batch at least 1, --adaptive-max-sites 1..65536\n");
		return -1;
	}
	if (c->peers[0]) {
		struct rt_ring_entry e[RT_RING_MAX];
		char why[256];
		int n = c->peers[0] ? rt_ring_parse(c->peers, e, RT_RING_MAX, why, sizeof why) : 0, k;
		if (n < 0) {
			fprintf(err, "retrace-coordinator: --peers: %s\n", why);
			return -1;
		}
		for (k = 0; k < n && strcmp(e[k].id, c->member_id); k++)
			;
		if (!c->member_id[0] || k == n) {
			fprintf(err, "retrace-coordinator: --member-id must name one of --peers\n");
			return -1;
		}
	}
	if (c->agent_timeout <= 0) {
		fprintf(err, "retrace-coordinator: --agent-timeout must be > 0\n");
		return -1;
	}
	if (strcmp(c->weave, "on") != 0 && strcmp(c->weave, "off") != 0) {
		fprintf(err, "retrace-coordinator: --weave must be on or off\n");
		return -1;
	}
	if (c->weave_timeout <= 0 || c->weave_timeout > 60) {
		fprintf(err, "retrace-coordinator: --weave-timeout must be in (0, 60] s\n");
		return -1;
	}
	if (c->metrics_listen[0]) {
		char why[512];
		if (rt_metrics_check_url(c->metrics_listen, "--metrics-listen", c->insecure, why,
					 sizeof why) != 0) {
			fprintf(err, "retrace-coordinator: %s\n", why);
			return -1;
		}
	}
	if (c->http_listen[0]) {
		char why[512];
		if (rt_http_api_check_url(c->http_listen, c->insecure, why, sizeof why) != 0) {
			fprintf(err, "retrace-coordinator: %s\n", why);
			return -1;
		}
	}
	return 0;
}
