/*
 * agent/log.h — the daemons' log lines on stderr.
 *
 * Owns: one process-wide level (rt_log_level, set once at start-up from the
 * config), the line format (an ISO-8601 UTC time, the level, the message), and
 * rate-limited lines for errors that repeat.
 */
#ifndef RETRACE_AGENT_LOG_H
#define RETRACE_AGENT_LOG_H

#include <stdint.h>

#include "config.h"

extern int rt_log_level;

void rt_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * A log line that may repeat on every pass (an I/O error that persists): at
 * most one line per RT_LOG_LIMIT_NS per limiter; the next line that gets out
 * says how many were held back since the last one. Returns 1 if it logged.
 */
#define RT_LOG_LIMIT_NS 10000000000ull
struct rt_log_limit {
	uint64_t next_ns;    /* CLOCK_MONOTONIC: nothing before this */
	uint64_t suppressed; /* lines held back since the last one */
};

int rt_log_limited(struct rt_log_limit *l, uint64_t now_ns, int level, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
