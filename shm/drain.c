/*
 * shm/drain.c — the reference drainer.
 *
 * Each queue is taken in batches of up to 64 entries. Complete entries are
 * checked and recycled in one batch push to the available queue. Trigger entries
 * are regrouped: an entry with group_index 0 opens a group of group_size; the
 * following entries must continue it in order. Because a group was published by
 * one batch enqueue, a group cut by our batch limit is completed by popping again.
 * Rings are indexed with the pool's own copy of their masks, and buffer ids are
 * checked against its own copy of the buffer count (rt_pool.geo), never against
 * the shared header a client could have rewritten.
 */
#include "drain.h"

#include <string.h>

#define DRAIN_BATCH 64

int rt_complete_entry_check(const struct rt_pool *p, const struct rt_complete_entry *e)
{
	const struct rt_buffer_header *h;
	uint32_t flags;
	if (e->buffer_id >= p->geo.buffer_count)
		return RT_CE_RANGE;
	if (e->flags & RT_ENTRY_CLOSE) {
		if (e->trace_lo != 0 || e->bytes != 0 || (e->flags & RT_ENTRY_KEPT) ||
		    !rt_pool_segment_fits(p, e->offset, 0))
			return RT_CE_HEADER;
		h = rt_pool_segment(p, e->buffer_id, e->offset);
		if (h->magic != RT_BUF_MAGIC || !(ck_pr_load_32(&h->flags) & RT_BUF_CLOSED))
			return RT_CE_HEADER;
		return RT_CE_CLOSE_MARK;
	}
	if (e->bytes > rt_pool_payload_size(p) || !rt_pool_segment_fits(p, e->offset, e->bytes))
		return RT_CE_BYTES;
	if (e->trace_lo == 0)
		return RT_CE_ZERO_TRACE;
	h = rt_pool_segment(p, e->buffer_id, e->offset);
	flags = ck_pr_load_32(&h->flags);
	ck_pr_fence_load();
	if (h->magic != RT_BUF_MAGIC || h->trace_lo != e->trace_lo || !(flags & RT_BUF_SEALED) ||
	    (flags & RT_BUF_CLOSED) || h->bytes != e->bytes)
		return RT_CE_HEADER;
	return RT_CE_OK;
}

static unsigned int drain_complete(struct rt_pool *p, const struct rt_drain_callbacks *cb,
				   struct rt_drain_stats *st)
{
	struct rt_complete_entry in[DRAIN_BATCH];
	struct rt_available_entry back[DRAIN_BATCH];
	unsigned int n, i, nb = 0;

	n = rt_pool_pop_complete(p, in, DRAIN_BATCH);
	for (i = 0; i < n; i++) {
		const struct rt_buffer_header *h;
		int rc = rt_complete_entry_check(p, &in[i]);
		if (rc == RT_CE_CLOSE_MARK) { /* the writer left its kept buffer */
			st->closes++;
			back[nb++].buffer_id = in[i].buffer_id;
			continue;
		}
		if (rc != RT_CE_OK) {
			st->bad_complete++;
			continue;
		}
		st->buffers++;
		st->bytes += in[i].bytes;
		h = rt_pool_segment(p, in[i].buffer_id, in[i].offset);
		if (cb && cb->buffer)
			cb->buffer(cb->arg, &in[i], h, (const uint8_t *)h + RT_BUF_HEADER_SIZE);
		/* A kept buffer still has a writer: it comes back with its last segment. */
		if (!(in[i].flags & RT_ENTRY_KEPT))
			back[nb++].buffer_id = in[i].buffer_id;
	}
	if (nb && !(cb && cb->keep_buffers) && !rt_pool_push_available(p, back, nb))
		st->recycle_fail += nb;
	return n;
}

unsigned int rt_drain_breadcrumbs(struct rt_pool *p, const struct rt_drain_callbacks *cb,
				  struct rt_drain_stats *st)
{
	struct rt_breadcrumb_entry in[DRAIN_BATCH];
	unsigned int n, i;

	n = rt_pool_pop_breadcrumb(p, in, DRAIN_BATCH);
	for (i = 0; i < n; i++) {
		st->breadcrumbs++;
		if (cb && cb->breadcrumb)
			cb->breadcrumb(cb->arg, &in[i]);
	}
	return n;
}

static int group_entry_ok(const struct rt_trigger_entry *first,
			  const struct rt_trigger_entry *e, unsigned int index)
{
	return e->group_index == index && e->group_size == first->group_size &&
	       e->trigger_id == first->trigger_id;
}

unsigned int rt_drain_triggers(struct rt_pool *p, const struct rt_drain_callbacks *cb,
			       struct rt_drain_stats *st)
{
	struct rt_trigger_entry group[RETRACE_MAX_LATERAL + 1], e;
	unsigned int handled = 0, have = 0;

	while ((handled < DRAIN_BATCH || have > 0) && rt_pool_pop_trigger(p, &e, 1) == 1) {
		handled++;
		if (have == 0) {
			if (e.group_index != 0 || e.group_size == 0 ||
			    e.group_size > RETRACE_MAX_LATERAL + 1) {
				st->bad_triggers++;
				continue;
			}
		} else if (!group_entry_ok(&group[0], &e, have)) {
			st->bad_triggers += have;
			have = 0;
			if (e.group_index != 0) {
				st->bad_triggers++;
				continue;
			}
		}
		group[have++] = e;
		if (have == group[0].group_size) {
			st->trigger_groups++;
			st->triggers += have;
			if (cb && cb->trigger)
				cb->trigger(cb->arg, group, have);
			have = 0;
		}
	}
	/* A published group is never partial; anything left over was malformed. */
	st->bad_triggers += have;
	return handled;
}

unsigned int rt_drain_poll(struct rt_pool *p, const struct rt_drain_callbacks *cb,
			   struct rt_drain_stats *st)
{
	return drain_complete(p, cb, st) + rt_drain_breadcrumbs(p, cb, st) +
	       rt_drain_triggers(p, cb, st);
}
