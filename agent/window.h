/*
 * agent/window.h — the agent's time-window query, for weaving (docs/weaving.md):
 * "the root SERVER spans of service S that started in [t0, t1]" on this host (or,
 * kind CLIENTS, "the CLIENT spans S wrote to peer P" — the other calls on an
 * edge), answered from the index, and the hold that keeps the roots from being
 * evicted while the coordinator decides.
 *
 * Owns: the hold table (which trace was held by which query, until when) and
 * the query's figures. The wire messages are wire/ (WINDOW_QUERY, _REPLY,
 * _RELEASE); the held list is the index's (rt_index_hold).
 *
 * Promises:
 *   - The answer is read from what the index holds, with no change to the pool
 *     ABI: traces whose first segment began in [t0 - RT_WINDOW_SLACK_NS, t1]
 *     are decoded just far enough to find their root SERVER span (parent 0), or
 *     their CLIENT spans and peer.service attributes, and the service.name of the
 *     writer stream that wrote them; segment bytes are untrusted, so a record
 *     that does not parse is skipped and counted.
 *   - Candidates are the earliest `max` by start; the rest are counted in the
 *     reply's `truncated`.
 *   - With hold_ms > 0 each answered root's untriggered trace is taken out of the LRU
 *     (not evicted) until a WINDOW_RELEASE of the query or hold_ms elapse; at
 *     most RT_WINDOW_MAX_HOLDS at once (beyond: answered, not held, counted).
 *     Every hold ends released or expired, each counted. A trace pinned by a
 *     trigger meanwhile simply stays pinned.
 */
#ifndef RETRACE_AGENT_WINDOW_H
#define RETRACE_AGENT_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

#define RT_WINDOW_MAX_HOLDS 8192u
#define RT_WINDOW_SLACK_NS 1000000000ull /* a root span may start this long after its segment */
#define RT_WINDOW_MAX_STREAMS 16u        /* writer streams of one trace looked at */

struct rt_window_hold {
	uint64_t request_id;
	uint64_t lo;         /* the trace (its index entry may be gone by release) */
	uint64_t until_ns;   /* CLOCK_MONOTONIC */
};

struct rt_window_stats {
	uint64_t queries;
	uint64_t candidates;     /* answered */
	uint64_t truncated;      /* matched beyond `max` */
	uint64_t traces_decoded; /* traces read to answer (the time prefilter passed) */
	uint64_t bad_records;    /* records that did not parse (skipped) */
	uint64_t held;           /* holds taken */
	uint64_t hold_full;      /* answered but not held: the hold table was full */
	uint64_t released;       /* holds ended by WINDOW_RELEASE */
	uint64_t expired;        /* holds ended by their timeout */
	uint64_t releases;       /* WINDOW_RELEASE messages */
};

struct rt_agent_window {
	struct rt_window_hold *holds; /* RT_WINDOW_MAX_HOLDS, allocated at first use */
	uint32_t nholds;
	uint64_t next_expiry_ns;      /* earliest until_ns held (UINT64_MAX: none) */
	struct rt_window_stats st;
};

struct rt_agent;
struct rt_figures;

/* Answer a decoded WINDOW_QUERY into out (an encoded WINDOW_REPLY, or an ACK
 * with an error status); returns the bytes written (0 if cap is too small). */
size_t rt_agent_window_query(struct rt_agent *a, const struct rt_wire_window_query *q,
			     uint8_t *out, size_t cap);
/* End the holds of request_id (an ACK, status 0, either way). */
size_t rt_agent_window_release(struct rt_agent *a, const struct rt_wire_window_release *r,
			       uint8_t *out, size_t cap);
/* End the holds whose time is up; cheap when none is. */
void rt_agent_window_expire(struct rt_agent *a, uint64_t now_ns);
void rt_agent_window_free(struct rt_agent *a);
/* The "window" section of `retrace status`. */
void rt_agent_window_figures(struct rt_figures *w, const struct rt_agent *a);

#endif
