/*
 * agent/route.h — which coordinator each trace's messages go to, when the
 * coordinators are a group sharded by trace id (issue 17, docs/scaling.md).
 *
 * Owns: one uplink (agent/uplink.h: a collector link and a coordinator link)
 * per member of the group given by --coordinator and --collector as
 * "ID=URL,..." lists (a plain URL is a group of one, id "0"), the ring over
 * their ids (daemon/ring.h: the coordinators hash the same ids), and each
 * member's liveness as this agent sees it.
 *
 * Promises:
 *   - A trace's trigger, its updates and its slices go to one member: the one
 *     that already acknowledged something of the trace (the caller keeps that
 *     as the trace's `sticky` member), else the live owner by rendezvous
 *     hashing. So a trace is never split between two coordinators: one that
 *     dies keeps the traces it acknowledged part of (they wait here, kept or
 *     spooled, and complete when it returns and resumes them), and the traces
 *     it had acknowledged nothing of move whole to the next owner.
 *   - A lateral group goes where its first (the triggered) trace goes.
 *   - The live set is the group's: the members probe each other and each
 *     REGISTER ACK names the members its sender sees live (wire.h); a member
 *     is dropped when one that answers this agent says it is down, and comes
 *     back when they all count it again. Failed sends only make the agent ask
 *     (REGISTER to the others at once). Without a published set (one
 *     coordinator, or members without --peers) a member is dropped after
 *     RT_ROUTE_FAILS round trips in a row failed (slices or coordinator
 *     messages) — at once if neither of its links holds a connection (a dead
 *     process), but while one does, only once nothing came back on either
 *     link for RT_ROUTE_SLOW_NS (a member busy in a long store commit times
 *     out several requests at once and is not dead) — unless it is the last
 *     live one; it keeps being sent REGISTER, and the first acknowledged one
 *     makes it live again.
 */
#ifndef RETRACE_AGENT_ROUTE_H
#define RETRACE_AGENT_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/ring.h"
#include "uplink.h"

#define RT_ROUTE_MAX 64  /* members an agent links to (RT_RING_MAX) */
#define RT_ROUTE_FAILS 3 /* round trips failed in a row before a member is dropped */
/* ... and, while it is connected, this long without a reply (at least
 * RT_ROUTE_FAILS report timeouts) */
#define RT_ROUTE_SLOW_NS 10000000000ull

struct rt_route {
	uint32_t n;
	struct rt_ring ring;              /* ids and live flags */
	struct rt_uplink up[RT_ROUTE_MAX];
	uint32_t fails[RT_ROUTE_MAX];     /* round trips failed in a row */
	/* per member: replies seen on its links at the last look, and when the
	 * count last moved (monotonic; route.c, silent_long) */
	uint64_t replies_seen[RT_ROUTE_MAX], heard_ns[RT_ROUTE_MAX];
	int has_coll, has_coord;
	int follows;                      /* the live set is the members' (route.c) */
	/* per member, for the collector link: its last slice failed, and when the
	 * next one may go (one probes a down member a second; agent/report_pipeline.c) */
	uint8_t coll_down[RT_ROUTE_MAX];
	uint64_t coll_probe_ns[RT_ROUTE_MAX];
	uint64_t dropped, returned, moved; /* members dropped / back; messages moved */
};

/*
 * Parse the two lists (either may be empty: that link is not used; with both
 * set they name the same ids) and open one uplink per member. 0, or -1 with a
 * sentence in err.
 */
int rt_route_open(struct rt_route *r, const char *collectors, const char *coordinators,
		  uint32_t buffer_count, uint32_t outbox_cap, int timeout_ms,
		  const struct rt_wire_buf *register_msg, char *err, size_t errlen);
void rt_route_close(struct rt_route *r);

/* The member for a trace: sticky (member + 1, 0 = none) or the live owner. */
uint32_t rt_route_member(const struct rt_route *r, uint64_t trace_lo, uint8_t sticky);
/* The member an uplink (or one of its slots) belongs to. */
uint32_t rt_route_index(const struct rt_route *r, const struct rt_uplink *u);

/* A round trip to member m ended: counts failures in a row, drops and revives. */
void rt_route_result(struct rt_route *r, uint32_t m, int ok);

/* Drive every member's coordinator link; a REGISTER acknowledged by a dropped
 * member makes it live again. */
void rt_route_pump(struct rt_route *r, uint64_t now_ns);

/* Figures summed over the members. */
uint32_t rt_route_inflight(const struct rt_route *r);
uint32_t rt_route_coord_inflight(const struct rt_route *r);
uint32_t rt_route_waiting(const struct rt_route *r);
void rt_route_stats(const struct rt_route *r, struct rt_uplink_stats *sum);
uint32_t rt_route_live(const struct rt_route *r);

#endif
