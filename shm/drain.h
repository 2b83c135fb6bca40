/*
 * shm/drain.h — the reference drainer: a minimal stand-in for the agent.
 *
 * Owns: one polling pass over a pool's complete, breadcrumb and trigger queues.
 * Each complete entry is validated (buffer id in range, segment offset and byte
 * count within the buffer, segment header magic and trace id agreeing), handed
 * to a callback with its segment header and records, and its buffer pushed
 * back onto the available queue once the writer left it (an entry without
 * RT_ENTRY_KEPT, or a close mark). Malformed entries are counted
 * and skipped; their buffer is not recycled (leaking one buffer is safer than
 * handing a buffer a writer may still hold to a second writer). Trigger groups
 * are delivered whole. It exists so the client can be tested and benchmarked
 * before (and without) the agent; retrace-drain wraps it as a tool.
 */
#ifndef RETRACE_SHM_DRAIN_H
#define RETRACE_SHM_DRAIN_H

#include "pool.h"
#include "retrace/retrace.h"

struct rt_drain_stats {
	uint64_t buffers;        /* complete entries accepted (segments, ABI 5) */
	uint64_t closes;         /* close marks: a writer left a kept buffer */
	uint64_t bytes;          /* payload bytes in them */
	uint64_t breadcrumbs;
	uint64_t trigger_groups;
	uint64_t triggers;       /* entries in those groups (traces named) */
	uint64_t bad_complete;   /* complete entries rejected */
	uint64_t bad_triggers;   /* trigger entries not forming a valid group */
	uint64_t recycle_fail;   /* available queue refused a buffer (corrupt pool) */
};

struct rt_drain_callbacks {
	void (*buffer)(void *arg, const struct rt_complete_entry *e,
		       const struct rt_buffer_header *h, const uint8_t *payload);
	void (*breadcrumb)(void *arg, const struct rt_breadcrumb_entry *e);
	void (*trigger)(void *arg, const struct rt_trigger_entry *group,
			unsigned int n);
	void *arg;
	int keep_buffers; /* 1: do not recycle (a test that inspects them later) */
};

/* One pass over all three queues; returns the number of entries handled. */
unsigned int rt_drain_poll(struct rt_pool *p, const struct rt_drain_callbacks *cb,
			   struct rt_drain_stats *st);

/* Why a complete entry was refused. */
enum rt_complete_check {
	RT_CE_OK = 0,
	RT_CE_RANGE,      /* buffer id out of range */
	RT_CE_BYTES,      /* byte count larger than a payload */
	RT_CE_ZERO_TRACE, /* trace id 0 */
	RT_CE_HEADER,     /* segment header disagrees (magic, trace, not sealed, bytes) */
	RT_CE_CLOSE_MARK, /* valid, and not a segment: a close mark (RT_ENTRY_CLOSE) */
};

/* Validate an untrusted complete entry against the pool and the buffer header. */
int rt_complete_entry_check(const struct rt_pool *p, const struct rt_complete_entry *e);

/*
 * The breadcrumb and trigger passes alone (up to 64 entries; a trigger group is
 * always taken whole), for an agent that handles complete entries itself.
 */
unsigned int rt_drain_breadcrumbs(struct rt_pool *p, const struct rt_drain_callbacks *cb,
				  struct rt_drain_stats *st);
unsigned int rt_drain_triggers(struct rt_pool *p, const struct rt_drain_callbacks *cb,
			       struct rt_drain_stats *st);

#endif
