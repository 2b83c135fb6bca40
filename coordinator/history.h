/*
 * coordinator/history.h — the coordinator's history for the web UI: a bounded
 * ring of periodic samples (coordinator/history.c), served as /api/history.
 *
 * Owns: what a sample holds and the ring. Each sample is taken every
 * --history-interval (default 5 s; 0: off) and holds, as cumulative counters
 * (the reader turns them into rates): per trigger id the trace groups the
 * coordinator opened and dropped for it; the traces it closed coherent and
 * incoherent; selection's windows, kept and dropped traces and the alarmed
 * groups of its last window; and per agent (at most RT_HIST_AGENTS, by id) its
 * event horizon, discard-buffer writes, evicted traces and queue drops, asked
 * of the agent itself ("status json" on its control address).
 *
 * Promises: memory is fixed at open (RT_HIST_SAMPLES samples); the loop thread
 * never waits on an agent (a thread of the history's own polls them); readers
 * (HTTP threads) take a consistent copy under the history's mutex. An agent
 * that does not answer is recorded as not ok (its figures 0), waited for two
 * seconds at most (the request's send, then its reply).
 */
#ifndef RETRACE_COORDINATOR_HISTORY_H
#define RETRACE_COORDINATOR_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#define RT_HIST_SAMPLES 720  /* an hour at the default 5 s */
#define RT_HIST_TRIGGERS 32  /* trigger ids per sample (the coordinator's share table) */
#define RT_HIST_AGENTS 64    /* agents polled per sample (the lowest ids) */

struct coord_history;

/* JSON of the samples taken after since_unix_ms (0: all), oldest first:
 * {"interval_s", "capacity", "samples": [...]} (docs/api.md). NULL if out of
 * memory; the caller frees it. */
char *coord_history_json(struct coord_history *h, uint64_t since_unix_ms, size_t *len);

#endif
