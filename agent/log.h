/*
 * agent/log.h — the agent's log lines (the format is daemon/log.h's).
 *
 * Owns: the agent's one process-wide level (rt_log_level, set once at start-up
 * from the config) and its name in the lines.
 */
#ifndef RETRACE_AGENT_LOG_H
#define RETRACE_AGENT_LOG_H

#include <stdint.h>

#include "daemon/log.h"

extern int rt_log_level;

void rt_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* At most one line per RT_LOG_LIMIT_NS per limiter (daemon/log.h); 1 if it logged. */
int rt_log_limited(struct rt_log_limit *l, uint64_t now_ns, int level, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
