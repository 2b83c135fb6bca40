/*
 * agent/agent.h — retrace-agent's core: one pool, its index, its clients.
 *
 * Owns: the pool of one host (created, or taken over after an agent died), the
 * trace index over it, eviction, client liveness, and the figures `retrace
 * status` shows. It moves metadata only and never reads trace payloads, except
 * to find how many bytes a crashed writer left in a buffer it never sealed.
 *
 * Promises:
 *   - Every queue entry is untrusted: a bad one is counted and skipped, and never
 *     changes a trace it does not belong to.
 *   - A buffer returns to the available queue only once its writer left it and
 *     none of its segments (ABI 5: traces share a writer's buffer) is indexed,
 *     pinned or in flight: never while a writer may still write into it.
 *   - Eviction takes whole untriggered traces, least recently seen first, when
 *     the pool's occupancy passes the threshold; pinned traces are never evicted
 *     (they may be abandoned, counted, when they pass their own share). When the
 *     trace table is full, a pinned trace whose data has all gone out may give
 *     up its entry to a new trace (counted as quiet_reclaimed).
 *   - A dead client's unsealed buffers are indexed with the bytes they hold, its
 *     stashed buffers go back to the pool and its registry slot is freed.
 *   - After a takeover the index is rebuilt from buffer headers and queues.
 *   - All state belongs to the thread calling rt_agent_poll; the control thread
 *     only hands it requests (agent/control.h).
 */
#ifndef RETRACE_AGENT_AGENT_H
#define RETRACE_AGENT_AGENT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "index.h"
#include "log.h"
#include "report.h"
#include "route.h"
#include "uplink.h"
#include "window.h"
#include "shm/pool.h"

struct rt_agent_stats {
	uint64_t polls, idle_polls;
	uint64_t complete_entries;  /* popped from the complete queue */
	uint64_t buffers_indexed;
	uint64_t bytes_indexed;
	uint64_t bad_range;         /* buffer id out of range */
	uint64_t bad_bytes;         /* byte count larger than a payload */
	uint64_t bad_zero_trace;    /* trace id 0 */
	uint64_t bad_header;        /* header disagrees with the entry */
	uint64_t bad_duplicate;     /* buffer already owned by the index */
	uint64_t recovered_echoes;  /* queue entries for buffers recovered from headers */
	uint64_t breadcrumbs;
	uint64_t bad_breadcrumbs;   /* trace id 0 or agent id 0 */
	uint64_t trigger_groups;
	uint64_t triggered_traces;  /* traces named by accepted groups */
	uint64_t bad_triggers;      /* entries not forming a valid group */
	uint64_t abandoned_traces;  /* pinned traces dropped past the pinned share */
	uint64_t abandoned_buffers;
	uint64_t index_full;        /* entries that found the trace table full */
	uint64_t quiet_reclaimed;   /* quiet, fully reported pinned entries reused for new traces */
	uint64_t recycle_fail;      /* the available queue refused a buffer */
	uint64_t clients_died;
	uint64_t dead_buffers_indexed;  /* a dead client's buffers kept */
	uint64_t dead_buffers_freed;    /* a dead client's stashed buffers freed */
	uint64_t recovered_buffers;     /* indexed from headers at takeover */
	uint64_t recovered_traces;
	uint64_t lost_buffers_reclaimed; /* in no queue and no hand at takeover */
	uint64_t corrupt_frames;    /* unsealed buffers whose frames stopped making sense */
	uint64_t rate_limited;      /* local trigger groups refused by their rate limit */
	uint64_t abandoned_at_trigger; /* local trigger groups its class's overload level drops */
	uint64_t remote_triggers;   /* remote trigger requests answered */
	uint64_t remote_open_traces; /* traces answered while a writer still held some of their buffers */
	uint64_t crumb_updates;     /* new hops of triggered traces posted to the coordinator */
	uint64_t bad_requests;      /* control requests that failed to decode */
	uint64_t policy_updates;    /* POLICY messages written into the pool's table */
	uint64_t policy_refused;    /* POLICY messages the table could not take */
	uint64_t policy_stale;      /* POLICY messages older than the one applied */
	uint64_t triggered_expired; /* quiet triggered traces dropped after their TTL */
	uint64_t slices_sent, slices_acked, slices_failed, slices_spooled, spool_sent;
	uint64_t slices_resent; /* a failed slice cut again under its own slice_seq */
	uint64_t slices_unsendable; /* dropped: over the wire's limits even alone */
	uint64_t slice_bytes_acked;
	uint64_t spool_full;        /* slices neither sent nor spooled (spool full) */
	uint64_t spool_errors;      /* spool appends or reads that failed with an I/O error */
	uint64_t spool_cursor_errors; /* sent spooled slices whose cursor write failed */
	uint64_t spool_foreign;     /* spooled records that were not slices (skipped) */
	/* shared memory a client wrote (agent.c: check_pool) */
	uint64_t header_fields_restored; /* header geometry fields put back */
	uint64_t ring_stalls_repaired;   /* claims of dead producers published */
	uint64_t ring_slots_voided;      /* available ids in such claims that were not free */
	uint64_t ring_resets;            /* rings whose counters made no sense, emptied */
	/* segments (ABI 5): several traces in one writer's buffer */
	uint64_t closes;            /* close marks: a writer left a kept buffer */
	uint64_t buffers_recycled;  /* buffers given back to the available queue */
	uint64_t segment_slots_full; /* a segment found no free slot and nothing evictable */
	uint64_t bad_segments;      /* chains that stopped at a malformed segment header */
	uint64_t orphans_left;      /* kept buffers of processes gone unreaped, left for them */
	uint64_t horizon_min_us;    /* youngest data evicted so far (0: none yet) */
};

/*
 * The agent's view of segments (ABI 5). The index's items are segment slots:
 * slot b < buffer_count is buffer b's first segment (offset 0), so a buffer
 * written by one trace is indexed exactly as before ABI 5; further segments
 * take slots from buffer_count up, with their buffer and offset kept here.
 * Per buffer: how many of its segments are indexed or in flight (`live`),
 * whether its writer left it (`state`), and where its next segment will start
 * (an entry before that is a repeat). A buffer goes back to the pool when it
 * is left and nothing of it is live.
 */
enum rt_seg_buffer_state {
	RT_SEGBUF_WRITER = 0, /* free, or a writer holds it and has not said it keeps it */
	RT_SEGBUF_KEPT = 1,   /* a writer kept it after its last segment */
	RT_SEGBUF_LEFT = 2,   /* its writer left it; live segments hold it */
};

struct rt_agent_segs {
	uint32_t nslots;       /* buffer_count + the extra slots */
	uint32_t *slot_buf;    /* per slot: its buffer (identity below buffer_count) */
	uint32_t *slot_off;    /* per slot: its header's offset */
	uint32_t *free_slots;  /* stack of free extra slots */
	uint32_t nfree;
	uint32_t *live;        /* per buffer: its segments indexed or in flight */
	uint32_t *next_off;    /* per buffer: where its next segment starts */
	uint8_t *state;        /* per buffer: enum rt_seg_buffer_state */
	uint8_t *recovered;    /* per buffer: segments indexed from headers (entries may echo) */
	uint64_t left_held;    /* buffers LEFT (held by their live segments) */
	uint64_t data_bytes;   /* bytes of records in live segments */
};

struct rt_spool;
struct rt_agent_guard;
struct rt_control;

struct rt_agent {
	struct rt_agent_config cfg;
	uint64_t policy_generation; /* coordinator generation of the applied POLICY */
	struct rt_pool pool;
	struct rt_index ix;
	struct rt_agent_stats st;
	int took_over;              /* the pool existed: state was rebuilt */
	char control_addr[RT_WIRE_MAX_STR + 1]; /* the bound remote-trigger address ("" if none) */
	uint64_t start_ns;          /* CLOCK_MONOTONIC at open */
	uint64_t start_unix_ns;
	uint64_t next_liveness_ns;
	uint64_t pass_now_ns;       /* CLOCK_MONOTONIC at the start of this pass */
	uint64_t pass_unix_ns;      /* CLOCK_REALTIME at the start of this pass */
	uint64_t pass_tick;         /* TSC at the start of this pass */
	uint64_t anchor_tick, anchor_mono_ns, anchor_unix_ns; /* TSC <-> clocks */
	double ns_per_tick;
	uint64_t evict_limit;       /* occupancy (buffers) above which we evict */
	uint64_t pinned_limit;      /* pinned buffers above which we abandon */
	struct rt_agent_segs seg;
	uint32_t *scratch;          /* segment-slot count ids, for removals and snapshots */
	uint32_t nscratch;
	uint32_t *recycle;          /* buffers waiting to go back to the available queue */
	uint32_t nrecycle, recycle_cap;
	struct rt_report rep;
	struct rt_route route;      /* one uplink per coordinator of the group (route.h) */
	struct rt_spool *spool;     /* NULL: no spool */
	int collector_down;         /* last round trip failed: spool until a probe succeeds */
	uint64_t next_probe_ns;
	uint64_t spool_retry_ns;    /* the spool was full or failed: try again after this */
	uint64_t spool_backoff_ns;  /* the last wait after a failed append (doubles) */
	uint64_t spool_unconsumed;  /* id of a spooled slice sent whose cursor write failed */
	uint64_t cursor_retry_ns, cursor_backoff_ns; /* when and how long: its next try */
	struct rt_log_limit spool_log; /* spool errors: a line per 10 s at most */
	struct rt_log_limit pool_log;  /* shared-memory repairs: likewise */
	struct rt_ring_claim avail_pending[16]; /* our available pushes not yet published */
	uint32_t navail_pending;    /* (a client was slow in its commit): oldest first */
	struct {                    /* per queue: p_tail standing still behind p_head */
		uint32_t p_tail;
		int watching;
		uint64_t since_ns;
	} ring_stall[RT_Q_COUNT];
	uint64_t slice_seq, trigger_seq;
	struct rt_wire_buf msg;     /* encoding scratch */
	struct rt_wire_slice_buffer *slicebufs; /* encoding scratch, one per buffer */
	struct rt_uplink_slot spool_slot; /* a slice cut straight into the spool */
	uint32_t *lost;             /* takeover: buffers nobody accounted for */
	uint8_t *lost_flag;         /* per buffer: still on the lost list */
	uint32_t nlost;
	uint64_t lost_check_ns;     /* when to look at them again */
	struct rt_agent_guard *guard; /* who may ask what (guard.h); NULL admits all */
	const struct rt_control *control; /* its request endpoint, for its figures; NULL none */
	struct rt_agent_window win;   /* weaving's time-window queries and holds (window.h) */
	/* rt_agent_count_open's scratch: the available queue's ids, and a bit per
	 * buffer for those (free: their headers need no look). */
	struct rt_available_entry *avail_snapshot;
	uint64_t *free_bits;
};

/*
 * Create the pool, or take it over if it exists and its agent is gone. Fails
 * with RETRACE_E_EXISTS when a live agent owns it. On failure err holds a
 * sentence. The pool's own geometry wins over the configured one on takeover.
 */
int rt_agent_open(struct rt_agent *a, const struct rt_agent_config *cfg,
		  char *err, size_t errlen);

/*
 * Dial the collector and coordinator named in the config and register with the
 * coordinator as reachable at control_addr (the address actually bound).
 */
int rt_agent_connect(struct rt_agent *a, const char *control_addr, char *err, size_t errlen);

/* One pass over every queue plus due housekeeping; returns entries handled. */
unsigned int rt_agent_poll(struct rt_agent *a);

/* Release everything; unlink the pool if cfg.unlink_at_exit. */
void rt_agent_close(struct rt_agent *a);

/*
 * A control request from the coordinator (a wire message: REMOTE_TRIGGER,
 * WINDOW_QUERY / WINDOW_RELEASE for weaving (window.h), or POLICY (policy.c)) or
 * a text command ("status", "status json", "ping"). Writes the reply; returns
 * its length.
 */
size_t rt_agent_handle_request(struct rt_agent *a, const uint8_t *req, size_t len,
			       uint8_t *out, size_t cap);

/* agent/policy.c: write a POLICY into the pool's table. 0, or the ack status
 * of a refusal (counted: policy_refused / policy_stale). */
struct rt_wire_policy;
struct rt_figures;
int32_t rt_agent_apply_policy(struct rt_agent *a, const struct rt_wire_policy *p);
void rt_agent_policy_figures(struct rt_figures *w, const struct rt_agent *a);

/*
 * At the top of a remote trigger: 0 to serve it, or the ACK status to refuse it
 * with, when its sender is over its rate (agent/guard.h; counted there).
 */
int32_t rt_agent_remote_refused(struct rt_agent *a);

/* Helpers shared with the status page and tests. */
uint64_t rt_agent_now_ns(void);
uint32_t rt_agent_free_buffers(const struct rt_agent *a);
uint32_t rt_agent_clients_attached(const struct rt_agent *a);
uint32_t rt_agent_queue_depth(const struct rt_agent *a, int queue);

/* A segment slot's header (slot < seg.nslots) and its buffer. */
static inline struct rt_buffer_header *rt_agent_segment(const struct rt_agent *a, uint32_t slot)
{
	return rt_pool_segment(&a->pool, a->seg.slot_buf[slot], a->seg.slot_off[slot]);
}

/*
 * Pool utilisation: bytes of records in the segments the agent holds over the
 * bytes of the buffers they keep from the pool (0..1; 0 with nothing held).
 */
double rt_agent_utilisation(const struct rt_agent *a);
/* Buffers at least one indexed or in-flight segment keeps from the pool. */
uint64_t rt_agent_buffers_held(const struct rt_agent *a);

/*
 * Figures for `retrace status`, rendered as JSON (json != 0) or text into out
 * (returns the length, truncated to outlen - 1).
 */
size_t rt_agent_status(const struct rt_agent *a, int json, char *out, size_t outlen);
/* The same figures in the Prometheus text format (/metrics); *cut: did not fit. */
size_t rt_agent_metrics(const struct rt_agent *a, char *out, size_t outlen, int *cut);

#endif
