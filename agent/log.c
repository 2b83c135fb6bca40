/*
 * agent/log.c — log lines: format into a stack buffer, then one write(2), so
 * lines from the control thread and the poll thread never interleave.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int rt_log_level = RT_LOG_INFO;

void rt_log(int level, const char *fmt, ...)
{
	static const char *names[] = { "error", "warn", "info", "debug" };
	char line[1024];
	struct timespec ts;
	struct tm tm;
	size_t n;
	va_list ap;

	if (level > rt_log_level || level < 0)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof line - n, ".%03ldZ %-5s ", ts.tv_nsec / 1000000,
			      names[level]);
	va_start(ap, fmt);
	if (n < sizeof line)
		n += (size_t)vsnprintf(line + n, sizeof line - n, fmt, ap);
	va_end(ap);
	if (n >= sizeof line - 1)
		n = sizeof line - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}
