/*
 * agent/log.h — the daemons' log lines on stderr.
 *
 * Owns: one process-wide level (rt_log_level, set once at start-up from the
 * config) and the line format: an ISO-8601 UTC time, the level, the message.
 */
#ifndef RETRACE_AGENT_LOG_H
#define RETRACE_AGENT_LOG_H

#include "config.h"

extern int rt_log_level;

void rt_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
