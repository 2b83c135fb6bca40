/*
 * evgen.c — the independent test encoder (see evgen.h).
 *
 * msgpack is written byte by byte from the specification (big-endian
 * lengths and integers). Framing follows shm/frame.h: a record that fits in
 * the open buffer is one frame; otherwise it is cut into a CONT_NEXT chunk
 * that fills the buffer, CONT_PREV|CONT_NEXT chunks that fill whole buffers
 * and a final CONT_PREV chunk, in consecutive buffers of the stream.
 */
#include "evgen.h"

#include <stdlib.h>
#include <string.h>

#include "retrace/retrace.h"
#include "shm/events.h"
#include "shm/pool.h"

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		abort();
	return q;
}

void eg_init(struct eg *g, uint64_t trace_hi, uint64_t trace_lo, uint32_t payload)
{
	memset(g, 0, sizeof *g);
	g->trace_hi = trace_hi;
	g->trace_lo = trace_lo;
	g->payload = payload;
}

void eg_free(struct eg *g)
{
	size_t i;
	for (i = 0; i < g->n_bufs; i++)
		free(g->bufs[i].data);
	free(g->bufs);
	memset(g, 0, sizeof *g);
}

void eg_agent(struct eg *g, uint32_t id, uint64_t tsc_hz, uint64_t ref_tick, uint64_t ref_ns_off)
{
	struct eg_agent *a = &g->agents[g->n_agents++];
	a->id = id;
	a->tsc_hz = tsc_hz;
	a->ref_tick = ref_tick;
	a->ref_unix_ns = EG_BASE_NS + ref_ns_off;
}

static const struct eg_agent *agent_of(const struct eg *g, uint32_t id)
{
	int i;
	for (i = 0; i < g->n_agents; i++)
		if (g->agents[i].id == id)
			return &g->agents[i];
	abort();
}

uint64_t eg_tick(const struct eg *g, uint32_t agent, uint64_t off_ns)
{
	const struct eg_agent *a = agent_of(g, agent);
	int64_t rel = (int64_t)off_ns - (int64_t)(a->ref_unix_ns - EG_BASE_NS);
	/* hz is a multiple of 1e6 in the tests, so this is exact for even offsets */
	return (uint64_t)((int64_t)a->ref_tick + rel * (int64_t)(a->tsc_hz / 1000000u) / 1000);
}

struct eg_stream *eg_stream(struct eg *g, uint32_t agent, uint32_t pid, uint32_t tid)
{
	struct eg_stream *s = &g->streams[g->n_streams++];
	memset(s, 0, sizeof *s);
	s->g = g;
	s->agent = agent;
	s->pid = pid;
	s->tid = tid;
	s->cur = -1;
	return s;
}

/* ----------------------------------------------------------- msgpack ---- */

void eg_rec_reset(struct eg_rec *r)
{
	r->len = 0;
}

void eg_rec_free(struct eg_rec *r)
{
	free(r->p);
	memset(r, 0, sizeof *r);
}

void eg_rec_byte(struct eg_rec *r, uint8_t b)
{
	if (r->len == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 256;
		r->p = xrealloc(r->p, r->cap);
	}
	r->p[r->len++] = b;
}

static void put_be(struct eg_rec *r, uint64_t v, int bytes)
{
	int i;
	for (i = bytes - 1; i >= 0; i--)
		eg_rec_byte(r, (uint8_t)(v >> (8 * i)));
}

void eg_rec_u64_fixed(struct eg_rec *r, uint64_t v)
{
	eg_rec_byte(r, 0xcf);
	put_be(r, v, 8);
}

void eg_rec_uint(struct eg_rec *r, uint64_t v)
{
	if (v <= 0x7f) {
		eg_rec_byte(r, (uint8_t)v);
	} else if (v <= 0xff) {
		eg_rec_byte(r, 0xcc);
		put_be(r, v, 1);
	} else if (v <= 0xffff) {
		eg_rec_byte(r, 0xcd);
		put_be(r, v, 2);
	} else if (v <= 0xffffffffu) {
		eg_rec_byte(r, 0xce);
		put_be(r, v, 4);
	} else {
		eg_rec_u64_fixed(r, v);
	}
}

void eg_rec_int(struct eg_rec *r, int64_t v)
{
	if (v >= 0) {
		eg_rec_uint(r, (uint64_t)v);
	} else if (v >= -32) {
		eg_rec_byte(r, (uint8_t)(int8_t)v);
	} else if (v >= INT8_MIN) {
		eg_rec_byte(r, 0xd0);
		put_be(r, (uint64_t)v, 1);
	} else if (v >= INT16_MIN) {
		eg_rec_byte(r, 0xd1);
		put_be(r, (uint64_t)v, 2);
	} else if (v >= INT32_MIN) {
		eg_rec_byte(r, 0xd2);
		put_be(r, (uint64_t)v, 4);
	} else {
		eg_rec_byte(r, 0xd3);
		put_be(r, (uint64_t)v, 8);
	}
}

void eg_rec_f64(struct eg_rec *r, double v)
{
	uint64_t bits;
	memcpy(&bits, &v, 8);
	eg_rec_byte(r, 0xcb);
	put_be(r, bits, 8);
}

void eg_rec_strn(struct eg_rec *r, const char *s, size_t n)
{
	size_t i;
	if (n <= 31) {
		eg_rec_byte(r, (uint8_t)(0xa0 | n));
	} else if (n <= 0xff) {
		eg_rec_byte(r, 0xd9);
		put_be(r, n, 1);
	} else if (n <= 0xffff) {
		eg_rec_byte(r, 0xda);
		put_be(r, n, 2);
	} else {
		eg_rec_byte(r, 0xdb);
		put_be(r, n, 4);
	}
	for (i = 0; i < n; i++)
		eg_rec_byte(r, (uint8_t)s[i]);
}

void eg_rec_str(struct eg_rec *r, const char *s)
{
	eg_rec_strn(r, s, strlen(s));
}

void eg_rec_bool(struct eg_rec *r, int v)
{
	eg_rec_byte(r, v ? 0xc3 : 0xc2);
}

void eg_rec_nil(struct eg_rec *r)
{
	eg_rec_byte(r, 0xc0);
}

void eg_rec_map(struct eg_rec *r, uint32_t n)
{
	if (n <= 15) {
		eg_rec_byte(r, (uint8_t)(0x80 | n));
	} else if (n <= 0xffff) {
		eg_rec_byte(r, 0xde);
		put_be(r, n, 2);
	} else {
		eg_rec_byte(r, 0xdf);
		put_be(r, n, 4);
	}
}

static void rec_arg(struct eg_rec *r, const struct eg_arg *a)
{
	switch (a->t) {
	case EG_STR: eg_rec_str(r, a->s); break;
	case EG_INT: eg_rec_int(r, a->i); break;
	case EG_UINT: eg_rec_uint(r, a->u); break;
	case EG_DBL: eg_rec_f64(r, a->d); break;
	case EG_BOOL: eg_rec_bool(r, (int)a->i); break;
	default: eg_rec_nil(r); break;
	}
}

/* ----------------------------------------------------------- framing ---- */

static struct eg_buf *open_buf(struct eg_stream *s)
{
	struct eg *g = s->g;
	struct eg_buf *b;
	if (s->cur >= 0)
		return &g->bufs[s->cur];
	if (g->n_bufs == g->cap_bufs) {
		g->cap_bufs = g->cap_bufs ? g->cap_bufs * 2 : 64;
		g->bufs = xrealloc(g->bufs, g->cap_bufs * sizeof *g->bufs);
	}
	b = &g->bufs[g->n_bufs];
	memset(b, 0, sizeof *b);
	b->agent = s->agent;
	b->pid = s->pid;
	b->tid = s->tid;
	b->seq = s->next_seq++;
	b->first_tick = eg_tick(g, s->agent, s->now);
	b->data = calloc(1, g->payload);
	if (!b->data)
		abort();
	b->flags = RT_BUF_INUSE;
	s->cur = (long)g->n_bufs++;
	return b;
}

static void seal(struct eg_stream *s, int last)
{
	struct eg_buf *b;
	if (s->cur < 0)
		return;
	b = &s->g->bufs[s->cur];
	b->flags = RT_BUF_INUSE | RT_BUF_SEALED | (last ? RT_BUF_LAST : 0);
	if (s->g->end_marks && s->g->payload - b->len >= RETRACE_FRAME_TERM)
		b->len += RETRACE_FRAME_TERM; /* the zero mark is already there (calloc) */
	s->cur = -1;
}

static void put_frame(struct eg_stream *s, uint32_t flags, uint64_t tick, const uint8_t *d,
		      uint32_t n)
{
	struct eg_buf *b = &s->g->bufs[s->cur];
	uint32_t word = (n << 4) | RETRACE_FRAME_VALID | flags;
	memcpy(b->data + b->len, &word, 4);
	b->len += 4;
	if (flags & RETRACE_FRAME_TS) {
		memcpy(b->data + b->len, &tick, 8);
		b->len += 8;
	}
	memcpy(b->data + b->len, d, n);
	b->len += n;
	s->g->frames++;
}

void eg_emit(struct eg_stream *s, const uint8_t *rec, size_t len)
{
	struct eg *g = s->g;
	struct eg_buf *b = open_buf(s);
	uint32_t ts = (g->ts_frames && (g->frames & 1)) ? RETRACE_FRAME_TS : 0;
	uint32_t hdr = 4 + (ts ? 8 : 0), room, chunk, flags;
	size_t done = 0;

	/* whole frame plus its end mark fits: one frame */
	if (g->payload - b->len >= hdr + len + RETRACE_FRAME_TERM) {
		g->last_buf = (size_t)s->cur;
		g->last_off = b->len + hdr;
		put_frame(s, ts, eg_tick(g, s->agent, s->now), rec, (uint32_t)len);
		return;
	}
	if (g->payload - b->len < hdr + 1) { /* not even one byte: next buffer */
		seal(s, 0);
		b = open_buf(s);
	}
	if (g->payload - b->len >= hdr + len + RETRACE_FRAME_TERM) {
		g->last_buf = (size_t)s->cur;
		g->last_off = b->len + hdr;
		put_frame(s, ts, eg_tick(g, s->agent, s->now), rec, (uint32_t)len);
		return;
	}
	g->last_buf = (size_t)s->cur;
	g->last_off = b->len + hdr;
	while (done < len) {
		b = open_buf(s);
		room = g->payload - b->len - (done ? 4 : hdr);
		flags = done ? RETRACE_FRAME_CONT_PREV : ts;
		chunk = len - done <= room ? (uint32_t)(len - done) : room;
		if (done + chunk < len)
			flags |= RETRACE_FRAME_CONT_NEXT;
		put_frame(s, flags, eg_tick(g, s->agent, s->now), rec + done, chunk);
		done += chunk;
		if (flags & RETRACE_FRAME_CONT_NEXT)
			seal(s, 0);
	}
}

void eg_finish(struct eg *g)
{
	int i;
	for (i = 0; i < g->n_streams; i++)
		seal(&g->streams[i], 1);
}

/* ------------------------------------------------------------ events ---- */

static void head(struct eg_rec *r, uint8_t type)
{
	eg_rec_reset(r);
	eg_rec_byte(r, RETRACE_EVENT_MAGIC);
	eg_rec_byte(r, type);
}

static void emit_free(struct eg_stream *s, struct eg_rec *r)
{
	eg_emit(s, r->p, r->len);
	eg_rec_free(r);
}

void eg_span_start(struct eg_stream *s, uint64_t id, uint64_t parent, uint8_t kind, uint64_t t,
		   const char *name)
{
	struct eg_rec r = { 0 };
	s->now = t;
	head(&r, RETRACE_EV_SPAN_START);
	eg_rec_u64_fixed(&r, id);
	eg_rec_u64_fixed(&r, parent);
	eg_rec_uint(&r, kind);
	eg_rec_u64_fixed(&r, eg_tick(s->g, s->agent, t));
	eg_rec_str(&r, name);
	emit_free(s, &r);
}

void eg_span_end(struct eg_stream *s, uint64_t id, uint64_t t, uint8_t status, int64_t code,
		 const char *message)
{
	struct eg_rec r = { 0 };
	s->now = t;
	head(&r, RETRACE_EV_SPAN_END);
	eg_rec_u64_fixed(&r, id);
	eg_rec_u64_fixed(&r, eg_tick(s->g, s->agent, t));
	eg_rec_uint(&r, status);
	if (status == 2) {
		eg_rec_int(&r, code);
		eg_rec_str(&r, message);
	}
	emit_free(s, &r);
}

void eg_attr(struct eg_stream *s, uint64_t span, const char *key, struct eg_arg v)
{
	struct eg_rec r = { 0 };
	head(&r, RETRACE_EV_ATTR);
	eg_rec_u64_fixed(&r, span);
	eg_rec_str(&r, key);
	rec_arg(&r, &v);
	emit_free(s, &r);
}

void eg_log(struct eg_stream *s, uint64_t span, uint64_t t, uint8_t level, uint64_t template_id,
	    const struct eg_arg *args, int n)
{
	struct eg_rec r = { 0 };
	int i;
	s->now = t;
	head(&r, RETRACE_EV_LOG);
	eg_rec_u64_fixed(&r, span);
	eg_rec_u64_fixed(&r, eg_tick(s->g, s->agent, t));
	eg_rec_uint(&r, level);
	eg_rec_u64_fixed(&r, template_id);
	for (i = 0; i < n; i++)
		rec_arg(&r, &args[i]);
	emit_free(s, &r);
}

void eg_log_text(struct eg_stream *s, uint64_t span, uint64_t t, uint8_t level, const char *text)
{
	struct eg_rec r = { 0 };
	s->now = t;
	head(&r, RETRACE_EV_LOG_TEXT);
	eg_rec_u64_fixed(&r, span);
	eg_rec_u64_fixed(&r, eg_tick(s->g, s->agent, t));
	eg_rec_uint(&r, level);
	eg_rec_str(&r, text);
	emit_free(s, &r);
}

/* FNV-1a 64, written out again here rather than taken from shm/events.h. */
uint64_t eg_template_id(const char *text)
{
	uint64_t h = 14695981039346656037ull;
	for (; *text; text++)
		h = (h ^ (uint8_t)*text) * 1099511628211ull;
	return h ? h : 1;
}

void eg_template(struct eg_stream *s, const char *text)
{
	struct eg_rec r = { 0 };
	head(&r, RETRACE_EV_TEMPLATE);
	eg_rec_u64_fixed(&r, eg_template_id(text));
	eg_rec_str(&r, text);
	emit_free(s, &r);
}

void eg_resource(struct eg_stream *s, const char *service, const char *host)
{
	struct eg_rec r = { 0 };
	head(&r, RETRACE_EV_RESOURCE);
	eg_rec_uint(&r, s->pid);
	eg_rec_map(&r, 4);
	eg_rec_str(&r, "service.name");
	eg_rec_str(&r, service);
	eg_rec_str(&r, "host.name");
	eg_rec_str(&r, host);
	eg_rec_str(&r, "process.pid");
	eg_rec_uint(&r, s->pid);
	eg_rec_str(&r, "deployment.canary");
	eg_rec_bool(&r, 1);
	emit_free(s, &r);
}

void eg_raw(struct eg_stream *s, const void *bytes, size_t len)
{
	eg_emit(s, bytes, len);
}

/* ------------------------------------------------------------ slices ---- */

void eg_slice(const struct eg *g, uint32_t agent, const size_t *idx, size_t n,
	      struct rt_wire_slice *out, struct rt_wire_slice_buffer *bufs)
{
	const struct eg_agent *a = agent_of(g, agent);
	size_t i, k = 0;
	if (!idx)
		n = g->n_bufs;
	for (i = 0; i < n; i++) {
		const struct eg_buf *b = &g->bufs[idx ? idx[i] : i];
		if (b->agent != agent)
			continue;
		bufs[k++] = (struct rt_wire_slice_buffer){ b->pid, b->tid, b->seq, b->flags,
							   b->first_tick, b->data, b->len };
	}
	memset(out, 0, sizeof *out);
	out->agent_id = agent;
	out->trigger_id = 7;
	out->slice_seq = 1;
	out->trace_hi = g->trace_hi;
	out->trace_lo = g->trace_lo;
	out->tsc_hz = a->tsc_hz;
	out->tsc_ref_tick = a->ref_tick;
	out->tsc_ref_unix_ns = a->ref_unix_ns;
	out->buffer_count = (uint32_t)k;
	out->buffers = bufs;
}

int eg_slice_msg(const struct eg *g, uint32_t agent, const size_t *idx, size_t n,
		 struct rt_wire_buf *out)
{
	struct rt_wire_slice_buffer *bufs = calloc(g->n_bufs + 1, sizeof *bufs);
	struct rt_wire_slice sl;
	int rc;
	if (!bufs)
		abort();
	eg_slice(g, agent, idx, n, &sl, bufs);
	rc = rt_wire_encode_slice(out, &sl);
	free(bufs);
	return rc;
}
