/*
 * daemon/log.h — the daemons' log lines on stderr, one format for both.
 *
 * Owns: the line format, "2026-11-26T01:02:03.456Z retrace-agent warn: message"
 * (UTC time to the millisecond, the program, the level, the message), written
 * with one write(2) so that lines from different threads never interleave; the
 * levels; and a limiter for lines that would repeat on every pass. Each daemon
 * keeps its own threshold and calls rt_log_vline with its name.
 */
#ifndef RETRACE_DAEMON_LOG_H
#define RETRACE_DAEMON_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

enum rt_log_level { RT_LOG_ERROR = 0, RT_LOG_WARN, RT_LOG_INFO, RT_LOG_DEBUG };

/* A level by its name ("error", "warn", "info", "debug"): the level, or -1. The
 * daemons' --log-level takes these names. */
int rt_log_level_parse(const char *name);

/* One line from `program` at `level`: the message, then `suffix` (may be NULL). */
void rt_log_vline(const char *program, int level, const char *suffix, const char *fmt,
		  va_list ap);

/*
 * A line that may repeat on every pass (an I/O error that persists): at most
 * one per RT_LOG_LIMIT_NS per limiter; the next line that gets out says how
 * many were held back since the last one.
 */
#define RT_LOG_LIMIT_NS 10000000000ull
struct rt_log_limit {
	uint64_t next_ns;    /* CLOCK_MONOTONIC: nothing before this */
	uint64_t suppressed; /* lines held back since the last one */
};

/* 1 if a line may go out now (suffix then says how many were held back, or is
 * empty), 0 if it is held back and counted. */
int rt_log_limit_pass(struct rt_log_limit *l, uint64_t now_ns, char *suffix, size_t cap);

#endif
