/*
 * agent/config.c — settings from one table.
 *
 * Each row names a setting once: its long flag (also its config-file key), an
 * optional short flag, its type, where it lives in struct rt_agent_config and
 * a help line. The getopt_long table, the config-file parser and --help are all
 * generated from the rows, so a new setting is one line here. Values are parsed
 * strictly (whole string, in range) by one function used by both inputs.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/metrics.h"
#include "shm/pool.h"

enum opt_type { T_U32, T_SHARE, T_SECONDS, T_STR, T_LONG, T_FLAG, T_LEVEL, T_CONFIG, T_RATE, T_U64 };

struct opt_row {
	const char *name;
	int short_name;
	enum opt_type type;
	size_t off;
	size_t size; /* for strings */
	const char *arg;
	const char *help;
};

#define F(field) offsetof(struct rt_agent_config, field)
#define S(field) sizeof(((struct rt_agent_config *)0)->field)

static const struct opt_row rows[] = {
	{ "config", 'c', T_CONFIG, 0, 0, "FILE", "read settings from FILE (key = value lines)" },
	{ "pool", 'p', T_STR, F(pool), S(pool), "NAME", "shared-memory pool name (default /retrace)" },
	{ "buffers", 'n', T_U32, F(buffer_count), 0, "N", "buffers in the pool (default 4096)" },
	{ "buffer-size", 'b', T_U32, F(buffer_size), 0, "BYTES", "buffer size, a multiple of 4096 (default 32768)" },
	{ "breadcrumb-slots", 0, T_U32, F(breadcrumb_slots), 0, "N", "breadcrumb queue slots (default 16384)" },
	{ "trigger-slots", 0, T_U32, F(trigger_slots), 0, "N", "trigger queue slots (default 4096)" },
	{ "client-slots", 0, T_U32, F(client_slots), 0, "N", "client registry slots (default 256)" },
	{ "trace-capacity", 0, T_U32, F(trace_capacity), 0, "N", "traces the index holds (default 2 x buffers, or one per 640 pool bytes if more)" },
	{ "segment-slots", 0, T_U32, F(segment_slots), 0, "N", "segments the index holds beyond one per buffer (default one per 512 pool bytes)" },
	{ "evict-threshold", 'e', T_SHARE, F(evict_threshold), 0, "SHARE", "pool occupancy that starts eviction, 0..1 or % (default 0.8)" },
	{ "pinned-share", 0, T_SHARE, F(pinned_share), 0, "SHARE", "share of the pool triggered data may hold (default 0.5)" },
	{ "agent-id", 'a', T_U32, F(agent_id), 0, "ID", "this agent's 32-bit id, not 0 (default 1)" },
	{ "group", 'g', T_LONG, F(group), 0, "GID", "give the pool to this group, mode 0660" },
	{ "listen", 'l', T_STR, F(listen), S(listen), "URL", "nng URL the coordinator reaches us on (default tcp://127.0.0.1:7710)" },
	{ "status", 's', T_STR, F(status_addr), S(status_addr), "URL", "local nng URL for `retrace status` (default ipc:///tmp/retrace-UID/POOL.status)" },
	{ "coordinator", 'C', T_STR, F(coordinator), S(coordinator), "URL", "coordinator URL, or the members of a sharded group as ID=URL,... (docs/scaling.md; default: none)" },
	{ "log-level", 'v', T_LEVEL, F(log_level), 0, "LEVEL", "error, warn, info or debug (default info)" },
	{ "liveness-interval", 0, T_SECONDS, F(liveness_interval), 0, "SEC", "seconds between client liveness scans (default 0.25)" },
	{ "unlink", 0, T_FLAG, F(unlink_at_exit), 0, NULL, "remove the pool at a clean exit (default: keep it for the next agent)" },
	{ "replace", 0, T_FLAG, F(replace), 0, NULL, "replace a pool that cannot be taken over (other ABI, corrupt)" },
	{ "ready-file", 0, T_STR, F(ready_file), S(ready_file), "PATH", "create PATH once the agent is ready" },
	{ "collector", 'R', T_STR, F(collector), S(collector), "URL", "collector URL slices are reported to, or ID=URL,... with the ids of --coordinator (default: none)" },
	{ "host", 0, T_STR, F(host), S(host), "NAME", "host name sent at registration (default: hostname)" },
	{ "trigger-rate", 0, T_RATE, F(trigger_rate), 0, "PER_S", "local triggers accepted per second per trigger id (default 1000; 0 = no limit)" },
	{ "trigger-burst", 0, T_RATE, F(trigger_burst), 0, "N", "rate-limit burst per trigger id (default 2000)" },
	{ "bandwidth", 0, T_RATE, F(bandwidth), 0, "BYTES_S", "reporting bytes per second, all triggers (default 0 = unlimited)" },
	{ "trigger-bandwidth", 0, T_RATE, F(trigger_bandwidth), 0, "BYTES_S", "reporting bytes per second per trigger id (default 0 = unlimited)" },
	{ "trigger-weights", 0, T_STR, F(trigger_weights), S(trigger_weights), "ID:W,...", "fair-share weights of trigger ids (default 1 each)" },
	{ "report-timeout", 0, T_U32, F(report_timeout_ms), 0, "MS", "collector/coordinator round-trip timeout (default 5000)" },
	{ "outbox", 0, T_U32, F(outbox), 0, "N", "triggers kept while the coordinator is away (default 4096)" },
	{ "triggered-ttl", 0, T_SECONDS, F(triggered_ttl), 0, "SEC", "keep a quiet, reported triggered trace this long (default 60)" },
	{ "max-slice", 0, T_U32, F(max_slice_bytes), 0, "BYTES", "payload bytes per slice message (default 4194304)" },
	{ "report-hold", 0, T_RATE, F(report_hold), 0, "SEC", "with a backlog, a trace's first slice waits this long, so agents decide overload alike (default 0.02; 0 = off)" },
	{ "spool-dir", 0, T_STR, F(spool_dir), S(spool_dir), "DIR", "spool slices here while the collector is away (default: none)" },
	{ "spool-max", 0, T_U64, F(spool_max), 0, "BYTES", "spool size limit (default 1073741824)" },
	{ "tls-ca", 0, T_STR, F(tls_ca), S(tls_ca), "FILE", "CA certificate (PEM): TLS on every tcp:// address (docs/security.md)" },
	{ "tls-cert", 0, T_STR, F(tls_cert), S(tls_cert), "FILE", "our certificate (PEM, CN=agent-ID; scripts/retrace-keys.sh)" },
	{ "tls-key", 0, T_STR, F(tls_key), S(tls_key), "FILE", "the certificate's private key (PEM)" },
	{ "insecure", 0, T_FLAG, F(insecure), 0, NULL, "allow plain tcp:// beyond loopback without certificates (a trusted network only)" },
	{ "remote-trigger-rate", 0, T_RATE, F(remote_trigger_rate), 0, "PER_S", "remote triggers accepted per second per peer (default 5000; 0 = no limit)" },
	{ "remote-trigger-burst", 0, T_RATE, F(remote_trigger_burst), 0, "N", "remote-trigger burst per peer (default 10000)" },
	{ "max-connections", 0, T_U32, F(max_connections), 0, "N", "connections each control address holds at once (default 16; 0 = no cap)" },
	{ "metrics-listen", 0, T_STR, F(metrics_listen), S(metrics_listen), "URL", "serve Prometheus /metrics at this http:// URL, e.g. http://127.0.0.1:9465 (default: off; loopback unless --insecure)" },
	{ "check-config", 0, T_FLAG, F(check_config), 0, NULL, "check every setting's syntax and range (flags and --config file), then exit: 0, or 2 with the reason" },
};

#define NROWS (sizeof rows / sizeof rows[0])

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
	size_t i;
	fprintf(out, "usage: retrace-agent [options]\n"
		     "The per-host retrace agent: owns the shared buffer pool, indexes traces,\n"
		     "evicts untriggered ones, keeps crashed clients' data, answers `retrace status`.\n\n");
	for (i = 0; i < NROWS; i++) {
		char flag[64];
		snprintf(flag, sizeof flag, "--%s%s%s", rows[i].name, rows[i].arg ? " " : "",
			 rows[i].arg ? rows[i].arg : "");
		if (rows[i].short_name)
			fprintf(out, "  -%c, %-26s %s\n", rows[i].short_name, flag, rows[i].help);
		else
			fprintf(out, "      %-26s %s\n", flag, rows[i].help);
	}
	fprintf(out, "  -h, %-26s %s\n\n", "--help", "this text");
	fprintf(out, "The config file takes the long flag names as keys, e.g.\n"
		     "  pool = /retrace\n  evict-threshold = 80%%\n  unlink = true\n"
		     "SIGTERM or SIGINT stop the agent cleanly.\n");
}

static int parse_value(const struct opt_row *r, const char *v, struct rt_agent_config *c,
		       char *why, size_t whylen)
{
	char *end;
	void *field = (char *)c + r->off;
	errno = 0;
	switch (r->type) {
	case T_U32: {
		unsigned long long x = strtoull(v, &end, 0);
		if (errno || end == v || *end || v[0] == '-' || x > UINT32_MAX)
			goto bad;
		*(uint32_t *)field = (uint32_t)x;
		return 0;
	}
	case T_LONG: {
		long x = strtol(v, &end, 0);
		if (errno || end == v || *end || x < 0)
			goto bad;
		*(long *)field = x;
		return 0;
	}
	case T_SHARE: {
		double x = strtod(v, &end);
		if (end != v && *end == '%' && end[1] == 0) {
			x /= 100.0;
			end++;
		}
		if (errno || end == v || *end || !(x > 0.0 && x <= 1.0))
			goto bad;
		*(double *)field = x;
		return 0;
	}
	case T_RATE: {
		double x = strtod(v, &end);
		if (errno || end == v || *end || !(x >= 0.0 && x < 1e15))
			goto bad;
		*(double *)field = x;
		return 0;
	}
	case T_U64: {
		unsigned long long x = strtoull(v, &end, 0);
		if (errno || end == v || *end || v[0] == '-')
			goto bad;
		*(uint64_t *)field = x;
		return 0;
	}
	case T_SECONDS: {
		double x = strtod(v, &end);
		if (errno || end == v || *end || !(x > 0.0 && x < 3600.0) || isnan(x))
			goto bad;
		*(double *)field = x;
		return 0;
	}
	case T_STR:
		if (strlen(v) >= r->size || v[0] == 0)
			goto bad;
		snprintf(field, r->size, "%s", v);
		return 0;
	case T_FLAG:
		if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1"))
			*(int *)field = 1;
		else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "0"))
			*(int *)field = 0;
		else
			goto bad;
		return 0;
	case T_LEVEL: {
		int level = rt_log_level_parse(v);
		if (level < 0)
			goto bad;
		*(int *)field = level;
		return 0;
	}
	case T_CONFIG:
		return 0;
	}
bad:
	switch (r->type) {
	case T_U32: snprintf(why, whylen, "wants an unsigned 32-bit integer"); break;
	case T_LONG: snprintf(why, whylen, "wants a non-negative integer"); break;
	case T_SHARE: snprintf(why, whylen, "wants a share in (0, 1] or a percentage"); break;
	case T_SECONDS: snprintf(why, whylen, "wants seconds in (0, 3600)"); break;
	case T_STR: snprintf(why, whylen, "wants a non-empty value shorter than %zu bytes", r->size); break;
	case T_FLAG: snprintf(why, whylen, "wants true or false"); break;
	case T_RATE: snprintf(why, whylen, "wants a non-negative number"); break;
	case T_U64: snprintf(why, whylen, "wants an unsigned integer"); break;
	case T_LEVEL: snprintf(why, whylen, "wants error, warn, info or debug"); break;
	case T_CONFIG: break;
	}
	return -1;
}

static const struct opt_row *find_row(const char *name)
{
	size_t i;
	for (i = 0; i < NROWS; i++)
		if (!strcmp(rows[i].name, name))
			return &rows[i];
	return NULL;
}

static char *trim(char *s)
{
	char *e;
	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = 0;
	return s;
}

int rt_agent_config_load(struct rt_agent_config *c, const char *path, FILE *err)
{
	FILE *f = fopen(path, "r");
	char line[1024], why[128];
	unsigned lineno = 0;
	if (!f) {
		fprintf(err, "retrace-agent: cannot read config file %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		char *s, *eq, *key, *val;
		const struct opt_row *r;
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			fprintf(err, "%s:%u: line longer than %zu bytes\n", path, lineno, sizeof line - 2);
			goto fail;
		}
		s = trim(line);
		if (*s == 0 || *s == '#')
			continue;
		if (!(eq = strchr(s, '='))) {
			fprintf(err, "%s:%u: expected `key = value`, got '%s'\n", path, lineno, s);
			goto fail;
		}
		*eq = 0;
		key = trim(s);
		val = trim(eq + 1);
		r = find_row(key);
		if (!r || r->type == T_CONFIG) {
			fprintf(err, "%s:%u: unknown setting '%s' (see retrace-agent --help)\n", path, lineno, key);
			goto fail;
		}
		if (parse_value(r, val, c, why, sizeof why) != 0) {
			fprintf(err, "%s:%u: %s %s, got '%s'\n", path, lineno, key, why, val);
			goto fail;
		}
	}
	fclose(f);
	return 0;
fail:
	fclose(f);
	return -1;
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
	struct option longopts[NROWS + 2];
	char shortopts[3 * NROWS + 4], why[128];
	size_t i, ns = 0;
	int ch, idx;

	for (i = 0; i < NROWS; i++) {
		longopts[i].name = rows[i].name;
		longopts[i].has_arg = rows[i].type == T_FLAG ? no_argument : required_argument;
		longopts[i].flag = NULL;
		longopts[i].val = 256 + (int)i;
		if (rows[i].short_name) {
			shortopts[ns++] = (char)rows[i].short_name;
			if (rows[i].type != T_FLAG)
				shortopts[ns++] = ':';
		}
	}
	longopts[NROWS] = (struct option){ "help", no_argument, NULL, 'h' };
	longopts[NROWS + 1] = (struct option){ 0, 0, 0, 0 };
	shortopts[ns++] = 'h';
	shortopts[ns] = 0;

	/* First pass: only --config, so that flags override the file. */
	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, shortopts, longopts, &idx)) != -1) {
		if (ch == 'c' || (ch >= 256 && rows[ch - 256].type == T_CONFIG))
			if (rt_agent_config_load(c, optarg, err) != 0)
				return -1;
	}
	opterr = 1;
	optind = 1;
	while ((ch = getopt_long(argc, argv, shortopts, longopts, &idx)) != -1) {
		const struct opt_row *r = NULL;
		if (ch == 'h') {
			rt_agent_usage(stdout);
			return 1;
		}
		if (ch == '?' || ch == ':') {
			fprintf(err, "retrace-agent: try --help\n");
			return -1;
		}
		if (ch >= 256)
			r = &rows[ch - 256];
		else
			for (i = 0; i < NROWS; i++)
				if (rows[i].short_name == ch)
					r = &rows[i];
		if (!r)
			continue;
		if (parse_value(r, r->type == T_FLAG ? "true" : optarg, c, why, sizeof why) != 0) {
			fprintf(err, "retrace-agent: --%s %s, got '%s'\n", r->name, why, optarg);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(err, "retrace-agent: unexpected argument '%s' (try --help)\n", argv[optind]);
		return -1;
	}
	if (c->status_addr[0] == 0) {
		rt_agent_default_status_addr(c->pool, c->status_addr, sizeof c->status_addr);
		c->status_default = 1;
	}
	return check_config(c, err);
}
