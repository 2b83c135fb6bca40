/*
 * agent/log.c — the agent's lines through daemon/log.c, below its level.
 */
#include "log.h"

#include <stdarg.h>

int rt_log_level = RT_LOG_INFO;

void rt_log(int level, const char *fmt, ...)
{
	va_list ap;
	if (level > rt_log_level)
		return;
	va_start(ap, fmt);
	rt_log_vline("retrace-agent", level, NULL, fmt, ap);
	va_end(ap);
}

int rt_log_limited(struct rt_log_limit *l, uint64_t now_ns, int level, const char *fmt, ...)
{
	char suffix[96];
	va_list ap;
	if (level > rt_log_level || !rt_log_limit_pass(l, now_ns, suffix, sizeof suffix))
		return 0;
	va_start(ap, fmt);
	rt_log_vline("retrace-agent", level, suffix, fmt, ap);
	va_end(ap);
	return 1;
}
