/*
 * agent/log.c — log lines: format into a stack buffer, then one write(2), so
 * lines from the control thread and the poll thread never interleave. A
 * limiter lets one line through per period and counts the rest, which the next
 * line that gets through reports.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int rt_log_level = RT_LOG_INFO;

static void vlog(int level, const char *suffix, const char *fmt, va_list ap)
{
	static const char *names[] = { "error", "warn", "info", "debug" };
	char line[1024];
	struct timespec ts;
	struct tm tm;
	size_t n;

	if (level > rt_log_level || level < 0)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof line - n, ".%03ldZ %-5s ", ts.tv_nsec / 1000000,
			      names[level]);
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

void rt_log(int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(level, NULL, fmt, ap);
	va_end(ap);
}

int rt_log_limited(struct rt_log_limit *l, uint64_t now_ns, int level, const char *fmt, ...)
{
	char suffix[96] = "";
	va_list ap;
	if (l->next_ns && now_ns < l->next_ns) {
		l->suppressed++;
		return 0;
	}
	if (l->suppressed)
		snprintf(suffix, sizeof suffix, " (%llu more like it since the last such line)",
			 (unsigned long long)l->suppressed);
	l->suppressed = 0;
	l->next_ns = now_ns + RT_LOG_LIMIT_NS;
	va_start(ap, fmt);
	vlog(level, suffix, fmt, ap);
	va_end(ap);
	return 1;
}
