/*
 * tests/common/collect.h — drain a pool completely and rebuild its records.
 *
 * Buffers are copied out as they are drained (the drainer recycles them), sorted
 * by writer (pid, tid) and sequence number, and their frames fed through the
 * reassembler, giving each writer's records in write order.
 */
#ifndef RETRACE_TESTS_COLLECT_H
#define RETRACE_TESTS_COLLECT_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "shm/drain.h"
#include "shm/frame.h"

struct collected_buffer {
	struct rt_buffer_header h;
	struct rt_complete_entry e;
	uint8_t *payload;
};

struct collected_record {
	uint64_t trace_lo;
	uint32_t pid, tid;
	uint64_t tick;
	size_t len;
	uint8_t *data;
};

struct collection {
	struct collected_buffer *bufs;
	size_t n_bufs, cap_bufs;
	struct collected_record *recs;
	size_t n_recs, cap_recs;
	struct rt_drain_stats st;
	uint64_t triggers[1024][2];   /* trace_lo, trigger_id of each trigger entry */
	uint16_t trigger_group[1024]; /* group_size */
	size_t n_triggers;
	uint64_t crumbs[1024][2];     /* trace_lo, agent */
	size_t n_crumbs;
	uint64_t seq_gaps, corrupt;
};

static void collect_buffer_cb(void *arg, const struct rt_complete_entry *e,
			      const struct rt_buffer_header *h, const uint8_t *payload)
{
	struct collection *c = arg;
	struct collected_buffer *b;
	if (c->n_bufs == c->cap_bufs) {
		c->cap_bufs = c->cap_bufs ? 2 * c->cap_bufs : 64;
		c->bufs = realloc(c->bufs, c->cap_bufs * sizeof *c->bufs);
	}
	b = &c->bufs[c->n_bufs++];
	b->h = *h;
	b->e = *e;
	b->payload = malloc(e->bytes + 1);
	memcpy(b->payload, payload, e->bytes);
}

static void collect_trigger_cb(void *arg, const struct rt_trigger_entry *g, unsigned n)
{
	struct collection *c = arg;
	unsigned i;
	for (i = 0; i < n && c->n_triggers < 1024; i++) {
		c->triggers[c->n_triggers][0] = g[i].trace_lo;
		c->triggers[c->n_triggers][1] = g[i].trigger_id;
		c->trigger_group[c->n_triggers] = g[i].group_size;
		c->n_triggers++;
	}
}

static void collect_crumb_cb(void *arg, const struct rt_breadcrumb_entry *e)
{
	struct collection *c = arg;
	if (c->n_crumbs < 1024) {
		c->crumbs[c->n_crumbs][0] = e->trace_lo;
		c->crumbs[c->n_crumbs][1] = e->agent_id;
		c->n_crumbs++;
	}
}

static int cmp_buffers(const void *a, const void *b)
{
	const struct collected_buffer *x = a, *y = b;
	if (x->h.pid != y->h.pid)
		return x->h.pid < y->h.pid ? -1 : 1;
	if (x->h.tid != y->h.tid)
		return x->h.tid < y->h.tid ? -1 : 1;
	if (x->h.trace_lo != y->h.trace_lo)
		return x->h.trace_lo < y->h.trace_lo ? -1 : 1;
	return x->h.seq < y->h.seq ? -1 : x->h.seq > y->h.seq;
}

static void add_record(struct collection *c, const struct collected_buffer *b,
		       const uint8_t *d, size_t len, uint64_t tick)
{
	struct collected_record *r;
	if (c->n_recs == c->cap_recs) {
		c->cap_recs = c->cap_recs ? 2 * c->cap_recs : 256;
		c->recs = realloc(c->recs, c->cap_recs * sizeof *c->recs);
	}
	r = &c->recs[c->n_recs++];
	r->trace_lo = b->h.trace_lo;
	r->pid = b->h.pid;
	r->tid = b->h.tid;
	r->tick = tick;
	r->len = len;
	r->data = malloc(len + 1);
	if (len)
		memcpy(r->data, d, len);
}

/* Drain everything, then rebuild records in writer/sequence order. */
static void collect_all(struct rt_pool *p, struct collection *c)
{
	struct rt_drain_callbacks cb = {collect_buffer_cb, collect_crumb_cb,
					collect_trigger_cb, c, 0};
	struct rt_reassembler ra;
	size_t i;
	while (rt_drain_poll(p, &cb, &c->st) > 0)
		;
	if (c->n_bufs)
		qsort(c->bufs, c->n_bufs, sizeof *c->bufs, cmp_buffers);
	rt_reasm_init(&ra);
	for (i = 0; i < c->n_bufs; i++) {
		const struct collected_buffer *b = &c->bufs[i];
		struct rt_frame f;
		uint32_t pos = 0;
		int st;
		if (i > 0 && cmp_buffers(&c->bufs[i - 1], b) < 0 &&
		    c->bufs[i - 1].h.pid == b->h.pid && c->bufs[i - 1].h.tid == b->h.tid &&
		    c->bufs[i - 1].h.trace_lo == b->h.trace_lo &&
		    c->bufs[i - 1].h.seq + 1 != b->h.seq) {
			c->seq_gaps++;
			rt_reasm_gap(&ra);
		}
		while ((st = rt_frame_next(b->payload, b->e.bytes, &pos, &f)) == RT_FRAME_OK) {
			const uint8_t *rec;
			size_t len;
			uint64_t tick;
			if (rt_reasm_feed(&ra, &f, &rec, &len, &tick) == 1)
				add_record(c, b, rec, len, tick);
		}
		if (st == RT_FRAME_CORRUPT)
			c->corrupt++;
	}
	rt_reasm_free(&ra);
}

static void collection_free(struct collection *c)
{
	size_t i;
	for (i = 0; i < c->n_bufs; i++)
		free(c->bufs[i].payload);
	for (i = 0; i < c->n_recs; i++)
		free(c->recs[i].data);
	free(c->bufs);
	free(c->recs);
	memset(c, 0, sizeof *c);
}

#endif
