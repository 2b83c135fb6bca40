/*
 * coordinator/decode.c — collected slices back into spans.
 *
 * How it works:
 *   1. rt_decoder_add_slice copies each buffer (data into an input arena) and
 *      keeps the slice's TSC calibration; nothing is decoded yet, so slices may
 *      come in any order.
 *   2. rt_decoder_finish sorts the buffers by writer stream (agent, pid, tid),
 *      then seq, then arrival; equal keys after the first are duplicates. Each
 *      stream is walked in seq order: a missing seq (or a first seq above 0) is
 *      a gap, which opens a new *segment* of the stream and drops the record the
 *      reassembler (shm/frame.h) had open. A corrupt frame header skips the rest
 *      of its buffer and is treated like a gap too (the records after it are
 *      lost just the same).
 *   3. A record starting with 0xC1 and a known type is a tracer event
 *      (shm/events.h), read field by field with wire/mp.h. Events update span
 *      accumulators found through a hash on span id; attributes and logs go
 *      into lists in the order read (= the order written, per stream);
 *      TEMPLATEs into a hash on template id; RESOURCEs into a list.
 *   4. Once every stream is read (so every TEMPLATE of the trace is known),
 *      spans are completed (missing start/end, partial), sorted by
 *      (start_ns, span_id), given their parent index, attributes and logs
 *      (bodies rendered from the templates), and resources.
 *
 * A span is PARTIAL when its events sit in two segments of one stream (so a
 * gap fell between its first and last event), or when its start or end is
 * missing. Orphan events (ATTR/LOG/END of a span with no START) are counted at
 * the end, because the START may come from a stream read later.
 *
 * Duplicates: a (agent, pid, tid, seq) key names one buffer (tid is the
 * writer stream of one begin..end run, shm/pool.h), so a repeated key is a
 * re-sent copy and is dropped; if its bytes differ from the copy read, two
 * buffers claimed one key and one of them is lost: counted as a conflict.
 *
 * Unmatched calls: once the spans are built, a CLIENT/PRODUCER span that no
 * SERVER/CONSUMER span has as parent is flagged (flag_unmatched says why).
 *
 * Buffer flags (shm/pool.h) are not needed: RT_BUF_LAST only says a stream's
 * tail is complete, and a record still open at the end of what we have is
 * counted truncated either way.
 *
 * Beside this file (their shared state is decode_internal.h): the arena and id
 * map (decode_arena.c), the event reader (decode_event.c) and the log body
 * renderer (decode_log.c).
 *
 * Every output string and array lives in one bump arena owned by the result.
 * Memory is linear in the input: each stored byte of output comes from a
 * decoded field, except log bodies, which are capped (RT_DECODE_MAX_BODY).
 */
#include "decode.h"
#include "decode_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "retrace/tracer.h"
#include "shm/events.h"
#include "shm/frame.h"
#include "daemon/random.h"

/* ----------------------------------------------------------- decoder ---- */

struct in_buf {
	uint32_t agent, pid, tid, seq;
	uint32_t flags;
	uint32_t slice; /* index of the slice it came with (its calibration) */
	uint64_t first_tick;
	uint64_t arrival;
	const uint8_t *data;
	uint32_t len;
};

struct rt_decoder {
	uint64_t trace_hi, trace_lo;
	struct arena input;            /* copied buffer data */
	struct rt_wire_slice *slices;  /* calibrations only (buffers = NULL) */
	size_t n_slices, cap_slices;
	struct in_buf *bufs;
	size_t n_bufs, cap_bufs;
	struct rt_decode_stats st;
};

struct rt_decoder *rt_decoder_new(uint64_t trace_hi, uint64_t trace_lo)
{
	struct rt_decoder *d = calloc(1, sizeof *d);
	if (d) {
		d->trace_hi = trace_hi;
		d->trace_lo = trace_lo;
	}
	return d;
}

void rt_decoder_free(struct rt_decoder *d)
{
	if (!d)
		return;
	rt_dec_arena_free(&d->input);
	free(d->slices);
	free(d->bufs);
	free(d);
}

int rt_decoder_add_slice(struct rt_decoder *d, const struct rt_wire_slice *s)
{
	struct rt_wire_slice cal;
	uint32_t k;

	if (!d || !s)
		return -1;
	if (s->trace_lo != d->trace_lo || (d->trace_hi && s->trace_hi && s->trace_hi != d->trace_hi)) {
		d->st.foreign_slices++;
		return 0;
	}
	if (!d->trace_hi)
		d->trace_hi = s->trace_hi;
	if (rt_dec_grow(&d->slices, &d->cap_slices, d->n_slices + 1, sizeof *d->slices) != 0 ||
	    rt_dec_grow(&d->bufs, &d->cap_bufs, d->n_bufs + s->buffer_count, sizeof *d->bufs) != 0)
		return -1;
	cal = *s;
	cal.buffers = NULL;
	cal.buffer_count = 0;
	d->slices[d->n_slices] = cal;
	for (k = 0; k < s->buffer_count && s->buffers; k++) {
		const struct rt_wire_slice_buffer *b = &s->buffers[k];
		struct in_buf *ib = &d->bufs[d->n_bufs];
		uint8_t *copy = NULL;
		if (b->len && !b->data)
			continue;
		if (b->len && !(copy = rt_dec_alloc(&d->input, b->len)))
			return -1;
		if (b->len)
			memcpy(copy, b->data, b->len);
		*ib = (struct in_buf){ s->agent_id, b->pid, b->tid, b->seq, b->flags,
				       (uint32_t)d->n_slices, b->first_tick, d->n_bufs, copy, b->len };
		d->n_bufs++;
		d->st.buffers++;
	}
	d->n_slices++;
	d->st.slices++;
	return 0;
}

int rt_decoder_add_message(struct rt_decoder *d, const void *msg, size_t len)
{
	struct rt_wire_msg m;
	int rc;
	if (!d)
		return -1;
	if (!msg || rt_wire_decode(msg, len, &m) != 0 || m.type != RT_WIRE_SLICE) {
		if (msg)
			rt_wire_msg_free(&m);
		d->st.corrupt_frames++;
		return 0;
	}
	rc = rt_decoder_add_slice(d, &m.slice); /* copies the data it keeps */
	rt_wire_msg_free(&m);
	return rc;
}

/* ------------------------------------------------ applying the events ---- */

static uint64_t tick_ns(const struct build *b, uint64_t tick)
{
	return rt_wire_slice_tick_ns(b->slice, tick);
}

/* The accumulator of span `id`, created on first mention. NO_SPAN: no memory. */
static uint32_t span_of(struct build *b, uint64_t id)
{
	uint32_t idx = (uint32_t)b->n_spans, found;
	struct span_acc *s;
	if (b->n_spans >= NO_SPAN - 1 ||
	    rt_dec_grow(&b->spans, &b->cap_spans, b->n_spans + 1, sizeof *b->spans) != 0 ||
	    rt_dec_idmap_put(&b->span_ids, id, idx, &found) != 0)
		return NO_SPAN;
	if (found != idx) {
		s = &b->spans[found];
		/* A gap between two events of one span in its own stream. */
		if (s->stream == b->stream && s->segment != b->segment)
			s->partial = 1;
		return found;
	}
	s = &b->spans[b->n_spans++];
	memset(s, 0, sizeof *s);
	s->id = id;
	s->name = "";
	s->status_message = "";
	s->p16 = RT_SPAN_P16_ALWAYS;
	s->agent = b->slice->agent_id;
	s->pid = b->buf->pid;
	s->tid = b->buf->tid;
	s->stream = b->stream;
	s->segment = b->segment;
	s->seen_ns = tick_ns(b, b->buf->first_tick);
	return idx;
}

static int apply_start(struct build *b, const struct event *e)
{
	uint32_t i = span_of(b, e->span_id);
	struct span_acc *s;
	if (i == NO_SPAN)
		return -1;
	s = &b->spans[i];
	if (s->has_start) {
		b->st->duplicate_spans++; /* same id started twice: keep the first */
		return 0;
	}
	s->has_start = 1;
	s->parent_id = e->parent_id;
	s->name = e->str;
	s->kind = e->kind;
	s->p16 = e->p16;
	s->start_ns = tick_ns(b, e->tick);
	/* The writer of the START is the span's writer. */
	s->agent = b->slice->agent_id;
	s->pid = b->buf->pid;
	s->tid = b->buf->tid;
	if (s->stream != b->stream) {
		s->stream = b->stream;
		s->segment = b->segment;
	}
	return 0;
}

static int apply_end(struct build *b, const struct event *e)
{
	uint32_t i = span_of(b, e->span_id);
	struct span_acc *s;
	if (i == NO_SPAN)
		return -1;
	s = &b->spans[i];
	s->n_ends++;
	if (s->has_end)
		return 0; /* a second end of one id: keep the first */
	s->has_end = 1;
	s->end_ns = tick_ns(b, e->tick);
	s->status = e->status;
	s->status_code = e->code;
	s->status_message = e->message;
	if (e->adj && b->slice->tsc_hz) { /* ticks -> ns, clamped far beyond any span */
		__int128 ns = (__int128)e->adj * 1000000000 / (__int128)b->slice->tsc_hz;
		s->dropped_ns = ns > INT64_MAX / 2 ? INT64_MAX / 2 : ns < -(INT64_MAX / 2) ? -(INT64_MAX / 2) : (int64_t)ns;
	}
	return 0;
}

static int apply_attr(struct build *b, const struct event *e)
{
	uint32_t i = span_of(b, e->span_id);
	if (i == NO_SPAN || rt_dec_grow(&b->attrs, &b->cap_attrs, b->n_attrs + 1, sizeof *b->attrs) != 0)
		return -1;
	b->spans[i].n_attrs++;
	b->attrs[b->n_attrs++] = (struct attr_acc){ i, { e->str, e->value } };
	return 0;
}

static int apply_log(struct build *b, const struct event *e)
{
	uint32_t i = NO_SPAN;
	struct log_acc *l;
	if (e->span_id && (i = span_of(b, e->span_id)) == NO_SPAN)
		return -1;
	if (b->n_logs >= NO_SPAN ||
	    rt_dec_grow(&b->logs, &b->cap_logs, b->n_logs + 1, sizeof *b->logs) != 0)
		return -1;
	l = &b->logs[b->n_logs];
	memset(l, 0, sizeof *l);
	l->span = i;
	l->order = (uint32_t)b->n_logs++;
	l->ev.time_ns = tick_ns(b, e->tick);
	l->ev.level = e->level;
	if (e->type == RETRACE_EV_LOG_TEXT) {
		l->ev.body = e->str;
		l->ev.body_len = e->str_len;
	} else {
		l->ev.template_id = e->template_id;
		l->ev.args = e->args;
		l->ev.n_args = e->n_args;
	}
	if (i != NO_SPAN) {
		struct span_acc *s = &b->spans[i];
		s->n_logs++;
		if (!s->first_log_ns || (l->ev.time_ns && l->ev.time_ns < s->first_log_ns))
			s->first_log_ns = l->ev.time_ns;
	}
	return 0;
}

static int apply_template(struct build *b, const struct event *e)
{
	uint32_t found, idx = (uint32_t)b->n_templates;
	if (b->n_templates >= NO_SPAN - 1 ||
	    rt_dec_idmap_put(&b->template_ids, e->template_id, idx, &found) != 0)
		return -1;
	if (found != idx)
		return 0; /* ids are content hashes: the first text stands */
	if (rt_dec_grow(&b->templates, &b->cap_templates, b->n_templates + 1, sizeof *b->templates) != 0)
		return -1;
	b->templates[b->n_templates++] = (struct template_ent){ e->template_id, e->str };
	return 0;
}

static const char *attr_str(const struct rt_attr *a, uint32_t n, const char *key)
{
	uint32_t i;
	for (i = 0; i < n; i++)
		if (!strcmp(a[i].key, key) && a[i].value.type == RT_VAL_STR)
			return a[i].value.u.s;
	return NULL;
}

static int add_resource(struct build *b, uint32_t agent, uint32_t pid, const struct rt_attr *attrs,
			uint32_t n, int synthetic)
{
	struct resource_acc *r;
	const char *service = attr_str(attrs, n, "service.name");
	const char *host = attr_str(attrs, n, "host.name");
	if (rt_dec_grow(&b->res, &b->cap_res, b->n_res + 1, sizeof *b->res) != 0)
		return -1;
	r = &b->res[b->n_res];
	r->r = (struct rt_resource){ agent, pid, service ? service : "unknown_service",
				     host ? host : "", (struct rt_attr *)attrs, n };
	r->synthetic = (uint32_t)synthetic;
	r->order = (uint32_t)b->n_res++;
	return 0;
}

/* The first name seen of each trigger id (e->template_id holds the id). */
static int apply_trigger(struct build *b, const struct event *e)
{
	uint32_t i;
	for (i = 0; i < b->n_names; i++)
		if (b->names[i].id == (uint32_t)e->template_id)
			return 0;
	if (b->n_names < RT_DECODE_MAX_TRIGGER_NAMES) {
		b->names[b->n_names].id = (uint32_t)e->template_id;
		b->names[b->n_names++].name = e->str;
	}
	return 0;
}

static int apply_event(struct build *b, const struct event *e)
{
	switch (e->type) {
	case RETRACE_EV_SPAN_START: return apply_start(b, e);
	case RETRACE_EV_SPAN_END: return apply_end(b, e);
	case RETRACE_EV_ATTR: return apply_attr(b, e);
	case RETRACE_EV_LOG:
	case RETRACE_EV_LOG_TEXT: return apply_log(b, e);
	case RETRACE_EV_TEMPLATE: return apply_template(b, e);
	case RETRACE_EV_TRIGGER: return apply_trigger(b, e);
	default: return add_resource(b, b->slice->agent_id, e->pid, e->attrs, e->n_attrs, 0);
	}
}

/* ---------------------------------------------------- reading streams ---- */

static int cmp_buf(const void *pa, const void *pb)
{
	const struct in_buf *x = pa, *y = pb;
	if (x->agent != y->agent)
		return x->agent < y->agent ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return x->arrival < y->arrival ? -1 : x->arrival > y->arrival;
}

static int same_stream(const struct in_buf *x, const struct in_buf *y)
{
	return x->agent == y->agent && x->pid == y->pid && x->tid == y->tid;
}

/* A re-sent copy has the same payload; flags may differ (a later copy can be
 * PINNED), so they are not compared. */
static int same_bytes(const struct in_buf *x, const struct in_buf *y)
{
	return x->len == y->len && (!x->len || memcmp(x->data, y->data, x->len) == 0);
}

static int on_record(struct build *b, const uint8_t *rec, size_t len)
{
	struct event e;
	int rc;
	b->st->records++;
	rc = rt_dec_event(b, rec, len, &e);
	if (rc == 0) {
		b->st->raw_records++;
		return 0;
	}
	if (rc < 0) {
		b->st->corrupt_events++;
		return 0;
	}
	b->st->events++;
	return apply_event(b, &e);
}

/* Feed one buffer's frames. Returns -1 only when memory ran out. */
static int read_buffer(struct build *b, struct rt_reassembler *ra)
{
	uint32_t pos = 0;
	struct rt_frame f;
	int st;
	while ((st = rt_frame_next(b->buf->data, b->buf->len, &pos, &f)) == RT_FRAME_OK) {
		const uint8_t *rec;
		size_t len;
		uint64_t tick;
		int rc = rt_reasm_feed(ra, &f, &rec, &len, &tick);
		if (rc < 0)
			return -1;
		if (rc == 1 && on_record(b, rec, len) != 0)
			return -1;
	}
	if (st == RT_FRAME_CORRUPT) {
		/* The rest of this buffer is lost: like a gap, it may cut a record
		 * and separate a span's events. */
		b->st->corrupt_frames++;
		rt_reasm_gap(ra);
		b->segment++;
	}
	return 0;
}

/* Read the stream bufs[0..n) (sorted by seq). Returns -1 on out of memory. */
static int read_stream(struct build *b, const struct in_buf *bufs, size_t n,
		       const struct rt_wire_slice *slices)
{
	struct rt_reassembler ra;
	uint64_t expect = 0;
	size_t i, kept = 0; /* the copy of the current seq that is read */
	int rc = 0;
	rt_reasm_init(&ra);
	b->segment = 0;
	for (i = 0; i < n && rc == 0; i++) {
		if (i && bufs[i].seq == bufs[i - 1].seq) {
			b->st->duplicate_buffers++;
			if (!same_bytes(&bufs[kept], &bufs[i]))
				b->st->conflicting_buffers++;
			continue;
		}
		kept = i;
		if (bufs[i].seq != expect) {
			b->st->gaps += bufs[i].seq - expect;
			rt_reasm_gap(&ra);
			b->segment++;
		}
		expect = (uint64_t)bufs[i].seq + 1;
		b->buf = &bufs[i];
		b->slice = &slices[bufs[i].slice];
		rc = read_buffer(b, &ra);
	}
	rt_reasm_gap(&ra); /* a record still open at the end of the data is cut */
	b->st->truncated_records += ra.truncated;
	b->st->orphan_chunks += ra.orphans;
	rt_reasm_free(&ra);
	return rc;
}

static int read_all(struct build *b, struct rt_decoder *d)
{
	size_t i = 0, j;
	rt_dec_sort(d->bufs, d->n_bufs, sizeof *d->bufs, cmp_buf);
	while (i < d->n_bufs) {
		for (j = i + 1; j < d->n_bufs && same_stream(&d->bufs[j], &d->bufs[i]); j++)
			;
		if (b->stream == NO_SPAN - 1)
			return -1;
		if (read_stream(b, d->bufs + i, j - i, d->slices) != 0)
			return -1;
		b->stream++;
		i = j;
	}
	return 0;
}

/* ------------------------------------------------------ finishing up ---- */

/* Missing start/end, partial, and the orphan count, once all data is read. */
static void complete_spans(struct build *b)
{
	size_t i;
	for (i = 0; i < b->n_spans; i++) {
		struct span_acc *s = &b->spans[i];
		if (!s->has_start) {
			b->st->orphan_events += s->n_attrs + s->n_logs + s->n_ends;
			s->partial = 1;
			/* Nothing is invented: the one time it has, else the earliest
			 * log, else the time of the buffer it was found in. */
			s->start_ns = s->has_end ? s->end_ns : s->first_log_ns ? s->first_log_ns : s->seen_ns;
		}
		if (!s->has_end) {
			s->partial = 1;
			s->end_ns = s->start_ns;
		}
	}
}

/* Sort key of a span: (start_ns, span_id), and where it is. */
struct span_key {
	uint64_t start_ns, id;
	uint32_t idx;
};

static int cmp_span_key(const void *pa, const void *pb)
{
	const struct span_key *x = pa, *y = pb;
	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int cmp_resource(const void *pa, const void *pb)
{
	const struct resource_acc *x = pa, *y = pb;
	if (x->r.agent_id != y->r.agent_id)
		return x->r.agent_id < y->r.agent_id ? -1 : 1;
	if (x->r.pid != y->r.pid)
		return x->r.pid < y->r.pid ? -1 : 1;
	if (x->synthetic != y->synthetic)
		return x->synthetic < y->synthetic ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

static uint32_t find_resource(const struct rt_resource *r, uint32_t n, uint32_t agent, uint32_t pid)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (r[mid].agent_id < agent || (r[mid].agent_id == agent && r[mid].pid < pid))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* One resource per (agent, pid): the first RESOURCE event, else a stand-in for
 * writers that have spans but whose RESOURCE was lost. */
static int build_resources(struct build *b, struct rt_decoded_trace *t)
{
	size_t i, n = 0;
	for (i = 0; i < b->n_spans; i++)
		if (add_resource(b, b->spans[i].agent, b->spans[i].pid, NULL, 0, 1) != 0)
			return -1;
	rt_dec_sort(b->res, b->n_res, sizeof *b->res, cmp_resource);
	t->resources = rt_dec_alloc(b->out, (b->n_res ? b->n_res : 1) * sizeof *t->resources);
	if (!t->resources)
		return -1;
	for (i = 0; i < b->n_res; i++) {
		if (n && t->resources[n - 1].agent_id == b->res[i].r.agent_id &&
		    t->resources[n - 1].pid == b->res[i].r.pid)
			continue;
		t->resources[n++] = b->res[i].r;
	}
	t->n_resources = (uint32_t)n;
	return 0;
}

static int cmp_log(const void *pa, const void *pb)
{
	const struct log_acc *x = pa, *y = pb;
	/* x->span holds the final span index here (NO_SPAN = loose, last). */
	if (x->span != y->span)
		return x->span < y->span ? -1 : 1;
	if (x->ev.time_ns != y->ev.time_ns)
		return x->ev.time_ns < y->ev.time_ns ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Attributes (written order) and logs (time order) into per-span slices of
 * two contiguous arrays. */
static int attach_attrs_logs(struct build *b, struct rt_decoded_trace *t, const uint32_t *final)
{
	struct rt_attr *attrs = rt_dec_alloc(b->out, (b->n_attrs ? b->n_attrs : 1) * sizeof *attrs);
	struct rt_log_event *logs = rt_dec_alloc(b->out, (b->n_logs ? b->n_logs : 1) * sizeof *logs);
	uint32_t *fill;
	size_t i, at = 0;
	if (!attrs || !logs || !(fill = calloc(t->n_spans ? t->n_spans : 1, sizeof *fill)))
		return -1;
	for (i = 0; i < t->n_spans; i++) {
		t->spans[i].attrs = attrs + at;
		at += t->spans[i].n_attrs;
	}
	for (i = 0; i < b->n_attrs; i++) {
		uint32_t s = final[b->attrs[i].span];
		t->spans[s].attrs[fill[s]++] = b->attrs[i].a;
	}
	free(fill);
	for (i = 0; i < b->n_logs; i++)
		if (b->logs[i].span != NO_SPAN)
			b->logs[i].span = final[b->logs[i].span];
	rt_dec_sort(b->logs, b->n_logs, sizeof *b->logs, cmp_log);
	for (i = 0; i < b->n_logs; i++)
		logs[i] = b->logs[i].ev;
	for (i = 0, at = 0; i < t->n_spans; i++) {
		t->spans[i].logs = logs + at;
		at += t->spans[i].n_logs;
	}
	t->loose_logs = logs + at;
	t->n_loose_logs = (uint32_t)(b->n_logs - at);
	return 0;
}

static void fill_span(const struct span_acc *a, struct rt_span *s, const struct rt_decoded_trace *t)
{
	memset(s, 0, sizeof *s);
	s->trace_hi = t->trace_hi;
	s->trace_lo = t->trace_lo;
	s->span_id = a->id;
	s->parent_id = a->parent_id;
	s->parent = -1;
	s->name = a->name;
	s->kind = a->kind;
	s->start_ns = a->start_ns;
	s->end_ns = a->end_ns;
	s->status = a->status;
	s->status_code = a->status_code;
	s->status_message = a->status_message;
	s->adapt_p16 = a->has_start ? a->p16 : RT_SPAN_P16_ALWAYS;
	s->dropped_ns = a->dropped_ns;
	s->n_attrs = a->n_attrs;
	s->n_logs = a->n_logs;
	s->agent_id = a->agent;
	s->pid = a->pid;
	s->tid = a->tid;
	s->flags = (a->partial ? RT_SPAN_PARTIAL : 0) | (a->has_start ? 0 : RT_SPAN_NO_START) |
		   (a->has_end ? 0 : RT_SPAN_NO_END);
}

static int build_spans(struct build *b, struct rt_decoded_trace *t)
{
	struct span_key *order = malloc((b->n_spans ? b->n_spans : 1) * sizeof *order);
	uint32_t *final = malloc((b->n_spans ? b->n_spans : 1) * sizeof *final);
	size_t i;
	int rc = -1;
	if (!order || !final)
		goto out;
	complete_spans(b);
	for (i = 0; i < b->n_spans; i++)
		order[i] = (struct span_key){ b->spans[i].start_ns, b->spans[i].id, (uint32_t)i };
	rt_dec_sort(order, b->n_spans, sizeof *order, cmp_span_key);
	t->n_spans = (uint32_t)b->n_spans;
	if (!(t->spans = rt_dec_alloc(b->out, (b->n_spans ? b->n_spans : 1) * sizeof *t->spans)))
		goto out;
	for (i = 0; i < b->n_spans; i++) {
		final[order[i].idx] = (uint32_t)i;
		fill_span(&b->spans[order[i].idx], &t->spans[i], t);
		if (t->spans[i].flags & RT_SPAN_PARTIAL)
			b->st->partial_spans++;
	}
	for (i = 0; i < t->n_spans; i++) {
		struct rt_span *s = &t->spans[i];
		uint32_t p = s->parent_id && s->parent_id != s->span_id
				     ? rt_dec_idmap_get(&b->span_ids, s->parent_id) : NO_SPAN;
		s->parent = p == NO_SPAN ? -1 : (int32_t)final[p];
	}
	if (attach_attrs_logs(b, t, final) != 0 || build_resources(b, t) != 0)
		goto out;
	for (i = 0; i < t->n_spans; i++)
		t->spans[i].resource = find_resource(t->resources, t->n_resources,
						     t->spans[i].agent_id, t->spans[i].pid);
	rc = 0;
out:
	free(order);
	free(final);
	return rc;
}

/* peer.untraced = true (RETRACE_ATTR_PEER_UNTRACED): the call went to a peer
 * that writes no trace data. */
static int peer_untraced(const struct rt_span *s)
{
	uint32_t i;
	for (i = 0; i < s->n_attrs; i++) {
		const struct rt_attr *a = &s->attrs[i];
		if (strcmp(a->key, RETRACE_ATTR_PEER_UNTRACED) != 0)
			continue;
		if ((a->value.type == RT_VAL_BOOL && a->value.u.b) ||
		    (a->value.type == RT_VAL_STR && strcmp(a->value.u.s, "true") == 0))
			return 1;
	}
	return 0;
}

static int remote_kind(uint8_t kind)
{
	return kind == RETRACE_SPAN_SERVER || kind == RETRACE_SPAN_CONSUMER;
}

/*
 * A CLIENT or PRODUCER span is the local half of a call; the callee's first
 * span (SERVER or CONSUMER) names it as parent, since it is the span id the
 * context carried. When no decoded span does, the callee's side never reached
 * us (its host was not reached, evicted its data, or lost it): flag and count.
 * Either remote kind matches either local kind, so an RPC whose handler is
 * instrumented as a CONSUMER (or a message consumed by a SERVER span) is not
 * reported missing; what counts is that the other side arrived.
 */
static int flag_unmatched(struct rt_decoded_trace *t)
{
	uint8_t *matched = calloc(t->n_spans ? t->n_spans : 1, 1);
	uint32_t i;
	if (!matched)
		return -1;
	for (i = 0; i < t->n_spans; i++)
		if (t->spans[i].parent >= 0 && remote_kind(t->spans[i].kind))
			matched[t->spans[i].parent] = 1;
	for (i = 0; i < t->n_spans; i++) {
		struct rt_span *s = &t->spans[i];
		if ((s->kind != RETRACE_SPAN_CLIENT && s->kind != RETRACE_SPAN_PRODUCER) ||
		    matched[i] || peer_untraced(s))
			continue;
		s->flags |= RT_SPAN_UNMATCHED;
		t->st.unmatched_client_spans++;
	}
	free(matched);
	return 0;
}

int rt_decode_complete(const struct rt_decode_stats *st)
{
	return st->gaps == 0 && st->partial_spans == 0 && st->orphan_events == 0 &&
	       st->orphan_chunks == 0 && st->corrupt_frames == 0 && st->corrupt_events == 0 &&
	       st->truncated_records == 0 && st->missing_templates == 0 &&
	       st->conflicting_buffers == 0 && st->unmatched_client_spans == 0;
}

static int cmp_u32(const void *pa, const void *pb)
{
	uint32_t x = *(const uint32_t *)pa, y = *(const uint32_t *)pb;
	return x < y ? -1 : x > y;
}

static int list_agents(const struct rt_decoder *d, struct arena *out, struct rt_decoded_trace *t)
{
	size_t i, n = 0;
	uint32_t *a = rt_dec_alloc(out, (d->n_slices ? d->n_slices : 1) * sizeof *a);
	if (!a)
		return -1;
	for (i = 0; i < d->n_slices; i++)
		a[i] = d->slices[i].agent_id;
	rt_dec_sort(a, d->n_slices, sizeof *a, cmp_u32);
	for (i = 0; i < d->n_slices; i++)
		if (!n || a[n - 1] != a[i])
			a[n++] = a[i];
	t->agents = a;
	t->n_agents = (uint32_t)n;
	return 0;
}

static void build_free(struct build *b)
{
	free(b->spans);
	rt_dec_idmap_free(&b->span_ids);
	free(b->attrs);
	free(b->logs);
	free(b->templates);
	rt_dec_idmap_free(&b->template_ids);
	free(b->res);
}

int rt_decoder_finish(struct rt_decoder *d, struct rt_decoded_trace *out)
{
	struct arena *arena;
	struct build b;
	int rc = -1;

	if (!out) {
		rt_decoder_free(d);
		return -1;
	}
	memset(out, 0, sizeof *out);
	if (!d)
		return -1;
	if (!(arena = calloc(1, sizeof *arena))) {
		rt_decoder_free(d);
		return -1;
	}
	memset(&b, 0, sizeof b);
	b.out = arena;
	b.st = &d->st;
	b.span_ids.seed = b.template_ids.seed = rt_mix64((uint64_t)(uintptr_t)d ^ (uint64_t)time(NULL));
	out->trace_hi = d->trace_hi;
	out->trace_lo = d->trace_lo;
	out->arena = arena;
	if (read_all(&b, d) == 0 && rt_dec_render_logs(&b) == 0 && build_spans(&b, out) == 0 &&
	    list_agents(d, arena, out) == 0)
		rc = 0;
	out->st = d->st;
	memcpy(out->trigger_names, b.names, sizeof b.names);
	out->n_trigger_names = b.n_names;
	if (rc == 0 && flag_unmatched(out) != 0)
		rc = -1;
	build_free(&b);
	rt_decoder_free(d);
	if (rc != 0)
		rt_decoded_trace_free(out);
	return rc;
}

void rt_decoded_trace_free(struct rt_decoded_trace *t)
{
	if (!t)
		return;
	if (t->arena) {
		rt_dec_arena_free(t->arena);
		free(t->arena);
	}
	memset(t, 0, sizeof *t);
}

/* A callee's span whose parent, on another process, is no call: the
 * CLIENT/PRODUCER span between them was dropped (docs/adaptive.md), and the
 * parent's dropped_ns counts that call whole, this span included. The callee's
 * entry span (SERVER/CONSUMER) names such a parent when only the call was
 * dropped; any other span does when the callee dropped its entry span too (the
 * caller's "call dropped" flag allowed it), and then the parent has dropped
 * time (dropped_ns > 0: the call), which keeps a service that sends contexts
 * from plain INTERNAL spans, with nothing dropped, as before. */
static int under_dropped_call(const struct rt_span *c, const struct rt_span *p)
{
	return (remote_kind(c->kind) || p->dropped_ns > 0) && p->kind != RETRACE_SPAN_CLIENT &&
	       p->kind != RETRACE_SPAN_PRODUCER && (p->agent_id != c->agent_id || p->pid != c->pid);
}

void rt_decode_self_times(const struct rt_decoded_trace *t, int64_t *self_ns)
{
	uint32_t i;
	for (i = 0; i < t->n_spans; i++)
		self_ns[i] = (int64_t)(t->spans[i].end_ns - t->spans[i].start_ns) -
			     t->spans[i].dropped_ns;
	for (i = 0; i < t->n_spans; i++) {
		const struct rt_span *c = &t->spans[i];
		if (c->parent >= 0 && (uint32_t)c->parent < t->n_spans &&
		    !under_dropped_call(c, &t->spans[c->parent]))
			self_ns[c->parent] -= (int64_t)(c->end_ns - c->start_ns);
	}
	for (i = 0; i < t->n_spans; i++)
		if (self_ns[i] < 0)
			self_ns[i] = 0; /* overlapping async children, clock steps */
}
