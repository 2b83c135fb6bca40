/*
 * cli_common.c — helpers every `retrace` subcommand that reads the store shares:
 * where the store is, opening it read-only with one error message, durations and
 * times as people type and read them, lists of agent ids.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <nng/nng.h>

#include "cmd.h"
#include "store.h"
#include "retrace/retrace.h"

uint64_t cli_parse_duration_ns(const char *v)
{
	char *end;
	double x;
	errno = 0;
	x = strtod(v, &end);
	if (errno || end == v || !(x > 0))
		return 0;
	if (!*end || !strcmp(end, "s"))
		return (uint64_t)(x * 1e9);
	if (!strcmp(end, "ms"))
		return (uint64_t)(x * 1e6);
	if (!strcmp(end, "m"))
		return (uint64_t)(x * 60e9);
	if (!strcmp(end, "h"))
		return (uint64_t)(x * 3600e9);
	if (!strcmp(end, "d"))
		return (uint64_t)(x * 86400e9);
	return 0;
}

int cli_store_locator(const char *cmd, const char *given, const char *coord, char *out,
		      size_t cap)
{
	const char *env = getenv("RETRACE_STORE");
	char err[512], *reply = NULL;
	size_t len = 0;
	if (given || (env && *env)) {
		snprintf(out, cap, "%s", given ? given : env);
		return 0;
	}
	if (!coord || !*coord)
		coord = getenv("RETRACE_COORDINATOR");
	if (!coord || !*coord)
		coord = CLI_DEFAULT_COORDINATOR;
	if (cli_request(coord, "store", CLI_DEFAULT_TIMEOUT_MS, &reply, &len, err, sizeof err) == 0) {
		int ok = len > 3 && !strncmp(reply, "ok ", 3) && memchr(reply, 0, len) &&
			 strlen(reply + 3) < cap;
		if (ok)
			snprintf(out, cap, "%s", reply + 3);
		else
			fprintf(stderr, "retrace %s: the coordinator at %s did not say where its store "
					"is (%.*s); give the store with --store\n", cmd, coord,
				(int)(len > 200 ? 200 : len), reply);
		nng_free(reply, len);
		return ok ? 0 : -1;
	}
	if (access(RT_STORE_DEFAULT_PATH, F_OK) == 0) {
		snprintf(out, cap, "%s", RT_STORE_DEFAULT_PATH);
		return 0;
	}
	fprintf(stderr, "retrace %s: which store? give --store PATH (or clickhouse://HOST:PORT/DB), "
			"or set $RETRACE_STORE; no coordinator answered at %s to say where its store "
			"is (--coordinator URL): %s; and there is no ./%s\n", cmd, coord, err,
		RT_STORE_DEFAULT_PATH);
	return -1;
}

int cli_open_store(const char *cmd, const char *path, struct rt_store **s)
{
	struct rt_store_options o = { .path = path, .readonly = 1 };
	int rc = rt_store_open(s, &o);
	if (rc != 0) {
		fprintf(stderr, "retrace %s: cannot open the store %s (--store): %s\n", cmd, path,
			rt_store_errmsg(*s));
		rt_store_close(*s);
		*s = NULL;
		return -1;
	}
	return 0;
}

void cli_format_time(uint64_t unix_ns, char *out, size_t cap)
{
	time_t t = (time_t)(unix_ns / 1000000000ull);
	struct tm tm;
	char base[32];
	if (!unix_ns) {
		snprintf(out, cap, "-");
		return;
	}
	gmtime_r(&t, &tm);
	strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, cap, "%s.%03uZ", base, (unsigned)(unix_ns / 1000000ull % 1000));
}

void cli_list_ids(char *out, size_t cap, const uint32_t *ids, uint32_t n, const char *sep)
{
	uint32_t i;
	size_t len = 0;
	out[0] = 0;
	for (i = 0; i < n && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s%u", i ? sep : "", ids[i]);
}

int cli_trigger_names_add(void *arg, uint32_t id, const char *name)
{
	struct cli_trigger_names *t = arg;
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? 2 * t->cap : 16;
		struct cli_trigger_name *e = realloc(t->e, cap * sizeof *e);
		if (!e)
			return RT_STORE_E_IO;
		t->e = e;
		t->cap = cap;
	}
	t->e[t->n].id = id;
	snprintf(t->e[t->n].name, sizeof t->e[t->n].name, "%s", name);
	t->n++;
	return 0;
}

int cli_trigger_names_load(const char *cmd, struct rt_store *s, struct cli_trigger_names *out)
{
	memset(out, 0, sizeof *out);
	if (rt_store_trigger_names(s, cli_trigger_names_add, out) < 0) {
		fprintf(stderr, "retrace %s: trigger names: %s\n", cmd, rt_store_errmsg(s));
		cli_trigger_names_free(out);
		return -1;
	}
	return 0;
}

void cli_trigger_names_free(struct cli_trigger_names *t)
{
	free(t->e);
	memset(t, 0, sizeof *t);
}

const char *cli_trigger_name(const struct cli_trigger_names *t, uint32_t id)
{
	const char *b = retrace_builtin_trigger_name(id);
	for (uint32_t i = 0; !b && t && i < t->n; i++)
		if (t->e[i].id == id)
			return t->e[i].name;
	return b;
}

void cli_list_triggers(char *out, size_t cap, const struct cli_trigger_names *t,
		       const uint32_t *ids, uint32_t n)
{
	size_t len = 0;
	out[0] = 0;
	for (uint32_t i = 0; i < n && len < cap; i++) {
		const char *name = cli_trigger_name(t, ids[i]);
		const char *sep = i ? "," : "";
		if (!name)
			len += (size_t)snprintf(out + len, cap - len, "%s%u", sep, ids[i]);
		else if (retrace_builtin_trigger_name(ids[i]))
			len += (size_t)snprintf(out + len, cap - len, "%s%s", sep, name);
		else
			len += (size_t)snprintf(out + len, cap - len, "%s%s(%u)", sep, name, ids[i]);
	}
}

void cli_json_trigger_names(FILE *f, const struct cli_trigger_names *t, const uint32_t *ids,
			    uint32_t n)
{
	fputc('[', f);
	for (uint32_t i = 0; i < n; i++) {
		const char *name = cli_trigger_name(t, ids[i]);
		if (i)
			fputc(',', f);
		if (name) /* [A-Za-z0-9-_.:/] only: nothing to escape */
			fprintf(f, "\"%s\"", name);
		else
			fputs("null", f);
	}
	fputc(']', f);
}

int cli_parse_trigger(const struct cli_trigger_names *t, const char *arg, uint32_t *id)
{
	char *end;
	unsigned long v;
	errno = 0;
	v = strtoul(arg, &end, 0);
	if (!errno && *arg && *arg != '-' && !*end && v <= UINT32_MAX) {
		*id = (uint32_t)v;
		return 0;
	}
	for (uint32_t b = RETRACE_TRIGGER_HEAD_SAMPLED; b <= RETRACE_TRIGGER_CRASH; b++)
		if (!strcmp(retrace_builtin_trigger_name(b), arg)) {
			*id = b;
			return 0;
		}
	for (uint32_t i = 0; t && i < t->n; i++)
		if (!strcmp(t->e[i].name, arg)) {
			*id = t->e[i].id;
			return 0;
		}
	return -1;
}

int cli_coordinator_say(const char *cmd, const char *url, const char *req, int timeout_ms)
{
	char err[512], *reply = NULL;
	size_t len = 0, n;
	int failed;
	if (cli_request(url, req, timeout_ms, &reply, &len, err, sizeof err) != 0) {
		fprintf(stderr, "retrace %s: no coordinator answers at %s\n", cmd, err);
		return 1;
	}
	failed = len < 2 || strncmp(reply, "ok", 2) != 0;
	n = len && reply[len - 1] == 0 ? len - 1 : len;
	while (n && reply[n - 1] == '\n') /* a list ends with one already */
		n--;
	fprintf(failed ? stderr : stdout, "%.*s\n", (int)n, reply);
	nng_free(reply, len);
	return failed;
}
