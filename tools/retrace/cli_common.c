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
#include <nng/nng.h>

#include "cmd.h"
#include "store.h"

uint64_t retrace_parse_duration_ns(const char *v)
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

const char *retrace_default_store(void)
{
	const char *s = getenv("RETRACE_STORE");
	return s && *s ? s : RT_STORE_DEFAULT_PATH;
}

int cli_open_store(const char *cmd, const char *path, struct rt_store **s)
{
	struct rt_store_options o = { .path = path, .readonly = 1 };
	int rc = rt_store_open(s, &o);
	if (rc != 0) {
		fprintf(stderr, "retrace %s: cannot open the store %s: %s\n", cmd, path,
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
