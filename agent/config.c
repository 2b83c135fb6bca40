/*
 * agent/config.c — retrace-agent's settings: its table of rows and its checks.
 *
 * Each row names a setting once: its long flag (also its config-file key), its
 * kind, where it lives in struct rt_agent_config, the value's name and a help
 * line, then an optional short flag and a string field's size. The flags, the
 * config file and --help come from the rows through daemon/options.c; the kinds
 * below say how each value is read and what range it takes. A new setting is one
 * line here; what no single value can say (the pool's name, agent id 0) is
 * checked after parsing.
 */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include "daemon/metrics.h"
#include "daemon/options.h"
#include "shm/pool.h"

enum opt_type { T_U32, T_SHARE, T_SECONDS, T_STR, T_LONG, T_FLAG, T_LEVEL, T_CONFIG, T_RATE, T_U64 };

static const struct rt_opt_kind kinds[] = {
	[T_U32] = { RT_OPT_U32, 0, 0, 0, 0, "an unsigned 32-bit integer" },
	[T_SHARE] = { RT_OPT_REAL, 0, 1, RT_OPT_OPEN_MIN | RT_OPT_PERCENT, 0, "a share in (0, 1] or a percentage" },
	[T_SECONDS] = { RT_OPT_REAL, 0, 3600, RT_OPT_OPEN_MIN | RT_OPT_OPEN_MAX, 0, "seconds in (0, 3600)" },
	[T_STR] = { RT_OPT_STR, 0, 0, 0, 0, NULL },
	[T_LONG] = { RT_OPT_LONG, 0, 0, 0, 0, "a non-negative integer" },
	[T_FLAG] = { RT_OPT_FLAG, 0, 0, 0, 0, "true or false" },
	[T_LEVEL] = { RT_OPT_LEVEL, 0, 0, 0, 0, "error, warn, info or debug" },
	[T_CONFIG] = { RT_OPT_CONFIG, 0, 0, 0, 0, NULL },
	[T_RATE] = { RT_OPT_REAL, 0, 1e15, RT_OPT_OPEN_MAX, 0, "a non-negative number" },
	[T_U64] = { RT_OPT_U64, 0, 0, 0, 0, "an unsigned integer" },
};

#define F(field) offsetof(struct rt_agent_config, field)
#define S(field) sizeof(((struct rt_agent_config *)0)->field)

RT_OPT_ROWS_BEGIN
static const struct rt_opt rows[] = {
	{ "config", T_CONFIG, 0, "FILE", "read settings from FILE (key = value lines)", 'c' },
	{ "pool", T_STR, F(pool), "NAME", "shared-memory pool name (default /retrace)", 'p', S(pool) },
	{ "buffers", T_U32, F(buffer_count), "N", "buffers in the pool (default 4096)", 'n' },
	{ "buffer-size", T_U32, F(buffer_size), "BYTES", "buffer size, a multiple of 4096 (default 32768)", 'b' },
	{ "breadcrumb-slots", T_U32, F(breadcrumb_slots), "N", "breadcrumb queue slots (default 16384)" },
	{ "trigger-slots", T_U32, F(trigger_slots), "N", "trigger queue slots (default 4096)" },
	{ "client-slots", T_U32, F(client_slots), "N", "client registry slots (default 256)" },
	{ "trace-capacity", T_U32, F(trace_capacity), "N", "traces the index holds (default 2 x buffers, or one per 640 pool bytes if more)" },
	{ "segment-slots", T_U32, F(segment_slots), "N", "segments the index holds beyond one per buffer (default one per 512 pool bytes)" },
	{ "evict-threshold", T_SHARE, F(evict_threshold), "SHARE", "pool occupancy that starts eviction, 0..1 or % (default 0.8)", 'e' },
	{ "pinned-share", T_SHARE, F(pinned_share), "SHARE", "share of the pool triggered data may hold (default 0.5)" },
	{ "agent-id", T_U32, F(agent_id), "ID", "this agent's 32-bit id, not 0 (default 1)", 'a' },
	{ "group", T_LONG, F(group), "GID", "give the pool to this group, mode 0660", 'g' },
	{ "listen", T_STR, F(listen), "URL", "nng URL the coordinator reaches us on (default tcp://127.0.0.1:7710)", 'l', S(listen) },
	{ "status", T_STR, F(status_addr), "URL", "local nng URL for `retrace status` (default ipc:///tmp/retrace-UID/POOL.status)", 's', S(status_addr) },
	{ "coordinator", T_STR, F(coordinator), "URL", "coordinator URL, or the members of a sharded group as ID=URL,... (docs/scaling.md; default: none)", 'C', S(coordinator) },
	{ "log-level", T_LEVEL, F(log_level), "LEVEL", "error, warn, info or debug (default info)", 'v' },
	{ "liveness-interval", T_SECONDS, F(liveness_interval), "SEC", "seconds between client liveness scans (default 0.25)" },
	{ "unlink", T_FLAG, F(unlink_at_exit), NULL, "remove the pool at a clean exit (default: keep it for the next agent)" },
	{ "replace", T_FLAG, F(replace), NULL, "replace a pool that cannot be taken over (other ABI, corrupt)" },
	{ "ready-file", T_STR, F(ready_file), "PATH", "create PATH once the agent is ready", 0, S(ready_file) },
	{ "collector", T_STR, F(collector), "URL", "collector URL slices are reported to, or ID=URL,... with the ids of --coordinator (default: none)", 'R', S(collector) },
	{ "host", T_STR, F(host), "NAME", "host name sent at registration (default: hostname)", 0, S(host) },
	{ "trigger-rate", T_RATE, F(trigger_rate), "PER_S", "local triggers accepted per second per trigger id (default 1000; 0 = no limit)" },
	{ "trigger-burst", T_RATE, F(trigger_burst), "N", "rate-limit burst per trigger id (default 2000)" },
	{ "bandwidth", T_RATE, F(bandwidth), "BYTES_S", "reporting bytes per second, all triggers (default 0 = unlimited)" },
	{ "trigger-bandwidth", T_RATE, F(trigger_bandwidth), "BYTES_S", "reporting bytes per second per trigger id (default 0 = unlimited)" },
	{ "trigger-weights", T_STR, F(trigger_weights), "ID:W,...", "fair-share weights of trigger ids (default 1 each)", 0, S(trigger_weights) },
	{ "report-timeout", T_U32, F(report_timeout_ms), "MS", "collector/coordinator round-trip timeout (default 5000)" },
	{ "outbox", T_U32, F(outbox), "N", "triggers kept while the coordinator is away (default 4096)" },
	{ "triggered-ttl", T_SECONDS, F(triggered_ttl), "SEC", "keep a quiet, reported triggered trace this long (default 60)" },
	{ "max-slice", T_U32, F(max_slice_bytes), "BYTES", "payload bytes per slice message (default 4194304)" },
	{ "report-hold", T_RATE, F(report_hold), "SEC", "with a backlog, a trace's first slice waits this long, so agents decide overload alike (default 0.02; 0 = off)" },
	{ "spool-dir", T_STR, F(spool_dir), "DIR", "spool slices here while the collector is away (default: none)", 0, S(spool_dir) },
	{ "spool-max", T_U64, F(spool_max), "BYTES", "spool size limit (default 1073741824)" },
	{ "tls-ca", T_STR, F(tls_ca), "FILE", "CA certificate (PEM): TLS on every tcp:// address (docs/security.md)", 0, S(tls_ca) },
	{ "tls-cert", T_STR, F(tls_cert), "FILE", "our certificate (PEM, CN=agent-ID; scripts/retrace-keys.sh)", 0, S(tls_cert) },
	{ "tls-key", T_STR, F(tls_key), "FILE", "the certificate's private key (PEM)", 0, S(tls_key) },
	{ "insecure", T_FLAG, F(insecure), NULL, "allow plain tcp:// beyond loopback without certificates (a trusted network only)" },
	{ "remote-trigger-rate", T_RATE, F(remote_trigger_rate), "PER_S", "remote triggers accepted per second per peer (default 5000; 0 = no limit)" },
	{ "remote-trigger-burst", T_RATE, F(remote_trigger_burst), "N", "remote-trigger burst per peer (default 10000)" },
	{ "max-connections", T_U32, F(max_connections), "N", "connections each control address holds at once (default 16; 0 = no cap)" },
	{ "metrics-listen", T_STR, F(metrics_listen), "URL", "serve Prometheus /metrics at this http:// URL, e.g. http://127.0.0.1:9465 (default: off; loopback unless --insecure)", 0, S(metrics_listen) },
	{ "check-config", T_FLAG, F(check_config), NULL, "check every setting's syntax and range (flags and --config file), then exit: 0, or 2 with the reason" },
};
RT_OPT_ROWS_END

static const struct rt_opt_table table = {
	.prog = "retrace-agent",
	.intro = "usage: retrace-agent [options]\n"
		 "The per-host retrace agent: owns the shared buffer pool, indexes traces,\n"
		 "evicts untriggered ones, keeps crashed clients' data, answers `retrace status`.\n\n",
	.outro = "\nThe config file takes the long flag names as keys, e.g.\n"
		 "  pool = /retrace\n  evict-threshold = 80%\n  unlink = true\n"
		 "SIGTERM or SIGINT stop the agent cleanly.\n",
	.rows = rows,
	.nrows = sizeof rows / sizeof rows[0],
	.kinds = kinds,
	.nkinds = sizeof kinds / sizeof kinds[0],
};

void rt_agent_default_status_addr(const char *pool, char *out, size_t outlen)
{
	const char *name = pool[0] == '/' ? pool + 1 : pool;
	/* A per-user directory the agent creates 0700 (main.c): a predictable name
	 * in /tmp itself could be taken first by another local user. */
	snprintf(out, outlen, "ipc:///tmp/retrace-%u/%s.status", (unsigned)getuid(), name);
}

void rt_agent_config_defaults(struct rt_agent_config *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->pool, sizeof c->pool, "%s", RT_POOL_DEFAULT_NAME);
	c->buffer_size = RT_POOL_DEFAULT_BUFFER_SIZE;
	c->buffer_count = RT_POOL_DEFAULT_BUFFER_COUNT;
	c->breadcrumb_slots = RT_POOL_DEFAULT_BREADCRUMB_SLOTS;
	c->trigger_slots = RT_POOL_DEFAULT_TRIGGER_SLOTS;
	c->client_slots = RT_POOL_DEFAULT_CLIENT_SLOTS;
	c->evict_threshold = 0.8;
	c->pinned_share = 0.5;
	c->agent_id = 1;
	c->group = -1;
	snprintf(c->listen, sizeof c->listen, "tcp://127.0.0.1:7710");
	c->log_level = RT_LOG_INFO;
	c->liveness_interval = 0.25;
	c->trigger_rate = 1000;
	c->trigger_burst = 2000;
	c->report_timeout_ms = 5000;
	c->outbox = 4096;
	c->triggered_ttl = 60;
	c->max_slice_bytes = 4u << 20;
	c->report_hold = 0.02;
	c->spool_max = 1ull << 30;
	c->remote_trigger_rate = 5000;
	c->remote_trigger_burst = 10000;
	c->max_connections = 16;
}

void rt_agent_usage(FILE *out)
{
	rt_opt_usage(&table, out);
}

int rt_agent_config_load(struct rt_agent_config *c, const char *path, FILE *err)
{
	return rt_opt_load(&table, c, path, err);
}

static int check_config(const struct rt_agent_config *c, FILE *err)
{
	if (c->agent_id == 0) {
		fprintf(err, "retrace-agent: --agent-id must not be 0 (0 means \"no agent\" in breadcrumbs)\n");
		return -1;
	}
	if (c->pool[0] != '/' || strchr(c->pool + 1, '/')) {
		fprintf(err, "retrace-agent: --pool must look like /name, got '%s'\n", c->pool);
		return -1;
	}
	if (c->metrics_listen[0]) {
		char why[512];
		if (rt_metrics_check_url(c->metrics_listen, "--metrics-listen", c->insecure, why,
					 sizeof why) != 0) {
			fprintf(err, "retrace-agent: %s\n", why);
			return -1;
		}
	}
	return 0;
}

int rt_agent_config_parse(struct rt_agent_config *c, int argc, char **argv, FILE *err)
{
	int rc = rt_opt_parse(&table, c, argc, argv, err);
	if (rc != 0)
		return rc;
	if (c->status_addr[0] == 0) {
		rt_agent_default_status_addr(c->pool, c->status_addr, sizeof c->status_addr);
		c->status_default = 1;
	}
	return check_config(c, err);
}
