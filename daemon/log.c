/*
 * daemon/log.c — log lines: formatted into a stack buffer, then one write(2),
 * so that lines from different threads never interleave. A line too long for
 * the buffer is cut, never split. The limiter lets one line through per period
 * and counts the rest, which the next line that gets through reports.
 */
#include "log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const names[] = { "error", "warn", "info", "debug" };

int rt_log_level_parse(const char *name)
{
	int i;
	for (i = RT_LOG_ERROR; i <= RT_LOG_DEBUG; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

void rt_log_vline(const char *program, int level, const char *suffix, const char *fmt,
		  va_list ap)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	size_t n;

	if (level < RT_LOG_ERROR || level > RT_LOG_DEBUG)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof line - n, ".%03ldZ %s %s: ", ts.tv_nsec / 1000000,
			      program, names[level]);
	if (n < sizeof line)
		n += (size_t)vsnprintf(line + n, sizeof line - n, fmt, ap);
	if (suffix && n < sizeof line)
		n += (size_t)snprintf(line + n, sizeof line - n, "%s", suffix);
	if (n >= sizeof line - 1)
		n = sizeof line - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}

int rt_log_limit_pass(struct rt_log_limit *l, uint64_t now_ns, char *suffix, size_t cap)
{
	if (cap)
		suffix[0] = 0;
	if (l->next_ns && now_ns < l->next_ns) {
		l->suppressed++;
		return 0;
	}
	if (l->suppressed && cap)
		snprintf(suffix, cap, " (%llu more like it since the last such line)",
			 (unsigned long long)l->suppressed);
	l->suppressed = 0;
	l->next_ns = now_ns + RT_LOG_LIMIT_NS;
	return 1;
}
