/*
 * agent/uplink.h — the agent's outgoing links: slices to the collector, triggers
 * and registrations to the coordinator.
 *
 * Owns: two nng REQ sockets (each dialled in the background, so a peer may come
 * and go), a fixed set of in-flight slice slots (one nng context + aio each, so
 * several slices travel at once), and a bounded outbox of encoded coordinator
 * messages, up to RT_UPLINK_COORD_SLOTS of them in flight at once, each kept
 * until acknowledged.
 *
 * Promises: callbacks run on nng's threads and only move a slot to DONE (with
 * release order; the round trip is daemon/reqrep.h's); every decision — what to send, what an ack frees, what to
 * spool — is taken by the poll thread that calls rt_uplink_* . Nothing here
 * reads shared memory or the index.
 */
#ifndef RETRACE_AGENT_UPLINK_H
#define RETRACE_AGENT_UPLINK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "daemon/reqrep.h"
#include "wire.h"

#define RT_UPLINK_SLOTS 8
#define RT_UPLINK_FAIR_IDS 32 /* trigger ids the outbox tells apart */
#define RT_UPLINK_COORD_SLOTS 8 /* coordinator messages in flight at once */
#define RT_UPLINK_VIEW_MAX 64 /* members in a REGISTER ACK's live set (RT_RING_MAX) */


/* A link's connections (nng pipe events): how many now, how many ever. */
struct rt_pipes {
	atomic_int n;
	_Atomic uint64_t gen; /* connections made */
	/* Round trips that ended with a reply (any ACK), and without one (the send
	 * or the wait failed or timed out): written by the exchanges' callbacks,
	 * read by rt_uplink_keep_dialing. */
	_Atomic uint64_t replies, silent;
};

/*
 * A link's dialer, watched by the poll thread (rt_uplink_keep_dialing). After
 * the peer died while this process was stopped (SIGSTOP, a frozen host), a
 * link was seen holding, in nng's view, a connection the kernel no longer had:
 * nothing answered and nng never redialed. A link connected in nng's view
 * whose round trips for RT_UPLINK_REDIAL_NS all ended without a reply gets a
 * new dialer; closing the old one closes that connection. A link without a
 * connection is left to nng's own redialing: closing a dialer while it
 * connects leaks nng's objects (nng 1.5.2, LeakSanitizer), and a dialer that
 * stopped redialing with no connection (nng does after a connect that ends in
 * NNG_ECLOSED or NNG_ECANCELED) has not been seen.
 */
#define RT_UPLINK_REDIAL_NS 3000000000ull
struct rt_dial {
	nng_dialer dialer;
	char url[256];
	uint64_t bad_since_ns;       /* 0: answering (or not connected) when last looked */
	uint64_t replies, silent;    /* the link's counts when last looked */
	int unanswered;              /* connected, and the last round trips got no reply */
};

/*
 * One request/reply round trip on an nng context (daemon/reqrep.h: FREE,
 * SENDING, RECEIVING, DONE): when it ends, the callback sets ok when the reply
 * is an ACK with status 0 naming `seq` (any ACK with status 0 when seq is 0),
 * then moves it to DONE.
 */
struct rt_exchange {
	struct rt_reqrep rr;     /* its context is opened once, kept for every round */
	nng_duration timeout_ms;
	struct rt_pipes *pipes;  /* the link's, to tell a request that never left */
	int pipes_at_send;
	uint64_t gen_at_send;
	int ok;                  /* DONE: 1 if acknowledged */
	int32_t status;          /* DONE: the ACK's status (0 ok), -1 when no ACK came */
	uint64_t seq;
	uint64_t *keep;          /* if set: the ACK's seqs are copied here (keep_cap at most) */
	uint32_t keep_cap, kept;
};

struct rt_uplink_slot {
	struct rt_uplink *up;
	struct rt_exchange x;
	int from_spool;          /* the bytes came from the spool */
	uint64_t spool_id;
	uint64_t seq;            /* slice_seq (copied into x.seq when sent) */
	/* owner's bookkeeping, untouched here */
	uint64_t trace_hi, trace_lo;
	uint32_t trigger_id;
	uint32_t trace;
	uint32_t cls;
	uint32_t nbuf;
	uint32_t *bufs;          /* buffer ids (capacity: pool buffer count) */
	uint64_t bytes;
	uint64_t sent_ns;
};

/* A coordinator message in flight: its bytes stay here until acknowledged. */
struct rt_uplink_coord_slot {
	struct rt_exchange x;
	struct rt_wire_buf msg;
	uint32_t trigger_id;
	uint64_t route_lo;       /* the trace it is routed by (agent/route.h) */
};

#define RT_UPLINK_ACKED 64 /* acknowledged route keys kept for the caller */

struct rt_uplink_stats {
	uint64_t slices_sent, slices_acked, slices_failed;
	uint64_t coord_sent, coord_acked, coord_failed, coord_dropped;
	uint64_t coord_reordered; /* messages sent ahead of older ones of a busier trigger id */
	uint64_t coord_evicted;   /* of coord_dropped: a busier id's message dropped for a quieter one */
	uint64_t registrations;
	uint64_t registrations_refused; /* ACK status REFUSED (daemon/guard.h) */
	uint64_t redials; /* new dialers for a link left without a connection (struct rt_dial) */
	uint64_t coll_redials, coord_redials; /* of redials: the collector's, the coordinator's */
};

struct rt_uplink {
	nng_socket coll;
	int coll_open;
	struct rt_pipes coll_pipes, coord_pipes;
	struct rt_dial coll_dial, coord_dial;
	struct rt_uplink_slot slots[RT_UPLINK_SLOTS];
	int timeout_ms;
	/* coordinator */
	nng_socket coord;
	int coord_open;
	struct rt_exchange register_x;  /* REGISTER has its own exchange */
	int registered;                 /* the last REGISTER was acknowledged */
	/* The group's live set as this member told it in its last REGISTER ACK
	 * (wire.h: ring seeds); view_n 0 = it said nothing (not sharded). */
	uint64_t view[RT_UPLINK_VIEW_MAX];
	uint64_t view_keep[RT_UPLINK_VIEW_MAX]; /* written by the callback */
	uint32_t view_n;
	uint64_t view_gen;              /* REGISTER ACKs taken: a new view each */
	int register_refused;           /* the last REGISTER was refused (logged once) */
	struct rt_uplink_coord_slot coord_slots[RT_UPLINK_COORD_SLOTS];
	struct rt_wire_buf *outbox; /* ring of encoded messages not yet in flight */
	uint32_t *out_trigger;      /* per outbox slot: the trigger id of its message */
	uint64_t *out_lo;           /* per outbox slot: the trace it is routed by */
	/* route keys of acknowledged messages, for rt_uplink_take_acked (a trace
	 * a coordinator stored part of stays with it: agent/route.h) */
	uint64_t acked_lo[RT_UPLINK_ACKED];
	uint32_t nacked;
	/* route keys of messages that failed after they may have reached the
	 * member (rt_uplink_maybe_delivered): the trace stays with it too */
	uint64_t held_lo[RT_UPLINK_ACKED];
	uint32_t nheld;
	int requeued;                   /* a failed message went back into the outbox */
	uint32_t coord_fails_in_row;    /* coordinator round trips failed in a row */
	uint32_t out_head, out_len, out_cap;
	/* Fair order across trigger ids (uplink.c, take_fair): when each id was last
	 * served, by a counter of sends, and how many of its messages the ring
	 * holds. Ids past RT_UPLINK_FAIR_IDS share slot 0. */
	struct { uint32_t id; uint32_t queued; uint64_t served; } fair[RT_UPLINK_FAIR_IDS];
	uint32_t nfair;
	uint64_t fair_clock;
	struct rt_wire_buf register_msg;
	uint64_t next_register_ns;
	uint64_t register_sent_ns;
	uint64_t coord_retry_ns;
	struct rt_uplink_stats st;
};

/*
 * Dial the collector and the coordinator (either may be empty: not used).
 * `register_msg` (encoded REGISTER) is sent first and then every few seconds.
 * -1 with a sentence in err.
 */
int rt_uplink_open(struct rt_uplink *u, const char *collector, const char *coordinator,
		   uint32_t buffer_count, uint32_t outbox_cap, int timeout_ms,
		   const struct rt_wire_buf *register_msg, char *err, size_t errlen);
void rt_uplink_close(struct rt_uplink *u);

/* Send REGISTER again at the next pump (at most once a second): the route
 * asks every member for its view of the group when one stops answering. */
void rt_uplink_ask(struct rt_uplink *u, uint64_t now_ns);

/*
 * A finished round trip that failed: 1 if its request may have reached the
 * member (a connection was up when it was sent, or one came up while it
 * waited), so the member may have committed it and only its ACK was lost; 0 if
 * it never left this host (no connection all along: the member was down).
 * A trace with such a message stays with that member (agent/route.h).
 */
int rt_uplink_maybe_delivered(const struct rt_exchange *x);

/* Cancel every request in flight (they finish failed, at the next pump): a
 * member dropped from the live set must not receive, when it returns, what was
 * waiting for it (nng's REQ holds a request until a connection comes) while
 * the rest of its trace goes to the next owner. */
void rt_uplink_cancel(struct rt_uplink *u);

/* Route keys of coordinator messages that failed after they may have been
 * delivered, one per call: 0, or -1 when none is left. */
int rt_uplink_take_held(struct rt_uplink *u, uint64_t *route_lo);

/* A free slice slot, or NULL (all in flight, or no collector). */
struct rt_uplink_slot *rt_uplink_free_slot(struct rt_uplink *u);

/* Send encoded slice bytes in slot s (its bookkeeping already filled). 0 or -1. */
int rt_uplink_send_slice(struct rt_uplink *u, struct rt_uplink_slot *s,
			 const void *msg, size_t len);

/* Slots whose round trip ended; the caller reads ok and calls rt_uplink_slot_reset. */
static inline int rt_uplink_slot_done(const struct rt_uplink_slot *s)
{
	return rt_reqrep_state(&s->x.rr) == RT_REQREP_DONE;
}
void rt_uplink_slot_reset(struct rt_uplink_slot *s);

/* Slots in flight (not FREE). */
uint32_t rt_uplink_inflight(const struct rt_uplink *u);

/*
 * Queue an encoded coordinator message (copied) of trigger `trigger_id`. 0, or
 * -1 if the outbox is full (counted). Once the agent is registered, up to
 * RT_UPLINK_COORD_SLOTS messages travel at once (each kept until its ACK; a
 * failed one goes back to the front), oldest first within a trigger id and
 * round robin across ids, so a storm of one trigger cannot hold another's
 * messages behind its backlog.
 */
int rt_uplink_post(struct rt_uplink *u, const struct rt_wire_buf *msg, uint32_t trigger_id,
		   uint64_t route_lo);

/* Take the oldest message out of the outbox (to route it elsewhere): 0, or -1
 * when empty. msg is overwritten (reset its len first). */
int rt_uplink_take(struct rt_uplink *u, struct rt_wire_buf *msg, uint32_t *trigger_id,
		   uint64_t *route_lo);

/* The route key of an acknowledged coordinator message: 0, or -1 when none. */
int rt_uplink_take_acked(struct rt_uplink *u, uint64_t *route_lo);

/* Drive the coordinator link: finish, retry, send the next messages, re-register. */
void rt_uplink_pump_coordinator(struct rt_uplink *u, uint64_t now_ns);
/* Each link whose round trips went unanswered for RT_UPLINK_REDIAL_NS gets a
 * new dialer (struct rt_dial); the poll thread calls it every pass. */
void rt_uplink_keep_dialing(struct rt_uplink *u, uint64_t now_ns);

/* Coordinator messages in flight (REGISTER not counted). */
uint32_t rt_uplink_coord_inflight(const struct rt_uplink *u);

#endif
