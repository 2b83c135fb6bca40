/*
 * agent/agent_internal.h — the seams between agent.c (index keeping) and
 * report_pipeline.c (triggers, slices, acks, spool). Not for use outside agent/.
 */
#ifndef RETRACE_AGENT_INTERNAL_H
#define RETRACE_AGENT_INTERNAL_H

#include "agent.h"

/* agent.c */
/* A whole buffer back to the pool (its header blanked first). */
void rt_agent_recycle(struct rt_agent *a, uint32_t buffer_id);
/* A segment slot the index let go of (removed, delivered, dropped): its
 * buffer goes back to the pool when its writer left it and nothing else of it
 * is held. */
void rt_agent_release_segment(struct rt_agent *a, uint32_t slot);
void rt_agent_remove_trace(struct rt_agent *a, uint32_t t, int evicted);
uint32_t rt_agent_trace_for(struct rt_agent *a, uint64_t lo, uint64_t now);
/*
 * Take in every complete entry and breadcrumb that clients queued before this
 * call (up to the depths seen now): a remote trigger is answered from the index,
 * which must not lag what the host's writers already handed in.
 */
void rt_agent_drain_before_reply(struct rt_agent *a);
/*
 * For each of the n traces (low halves), count the buffers a writer on this host
 * still holds: stamped with the trace and in use, not handed to the agent (being
 * written, or sealed and not yet queued). One pass over the buffers the index
 * does not own.
 */
void rt_agent_count_open(struct rt_agent *a, const uint64_t *los, uint32_t n, uint32_t *open);

/* report_pipeline.c */
/* The message in a->msg as a control reply (0 if it does not fit), or an ACK with
 * `status` encoded there first. */
size_t rt_agent_reply_msg(struct rt_agent *a, uint8_t *out, size_t cap);
size_t rt_agent_reply_ack(struct rt_agent *a, int32_t status, uint8_t *out, size_t cap);
int rt_agent_reporting_open(struct rt_agent *a, char *err, size_t errlen);
void rt_agent_reporting_close(struct rt_agent *a);
/* A local trigger group from the trigger queue (rate-limited). */
void rt_agent_local_trigger(struct rt_agent *a, const struct rt_trigger_entry *g,
			    unsigned int n);
/* Trace t is pinned and has n new unsent buffers: make sure it is queued. */
void rt_agent_queue_pinned(struct rt_agent *a, uint32_t t, uint32_t n);
/* Pin trace t for trigger_id (marking its buffers) and queue it for reporting. */
void rt_agent_pin(struct rt_agent *a, uint32_t t, uint32_t trigger_id);
/* Mark a sealed buffer of a pinned trace in its header, for a restarted agent. */
void rt_agent_mark_pinned(struct rt_agent *a, uint32_t buffer_id, uint32_t trigger_id);
/* Abandon whole triggered traces while unsent pinned data is over its share. */
void rt_agent_abandon_overload(struct rt_agent *a);
/* Finish round trips, send what the schedule allows, drain the spool. */
void rt_agent_report_pump(struct rt_agent *a);
/*
 * A triggered trace learned a new hop (a breadcrumb deposited after the trigger,
 * e.g. by a call still in flight when it fired): tell the coordinator, as a
 * trigger update carrying the trace's breadcrumbs, so its traversal goes there
 * too even if it has already asked this agent and heard "nothing open".
 */
void rt_agent_post_crumbs(struct rt_agent *a, uint32_t t);
/* Drop quiet triggered traces past their TTL. */
void rt_agent_expire_triggered(struct rt_agent *a);

#endif
