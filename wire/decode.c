/*
 * wire/decode.c — the strict decoder of the daemon messages.
 *
 * The msgpack objects are read with the strict reader (wire/mp.h), each where
 * the catalogue expects a given kind (unsigned int of a width, int32, str, bin,
 * array): the first failed check wins, in byte order, so every malformed input
 * has one well-defined code. Nothing is skipped generically: an object of the
 * wrong kind is an error at its first byte.
 *
 * Variable arrays (traces, breadcrumbs, slice buffers, seqs) go into one
 * malloc'd block per message, sized from the declared counts but capped by
 * what the remaining input could possibly hold (every element of a kind takes
 * at least a known number of bytes), so a tiny input that declares 65536
 * elements cannot make us allocate megabytes. Slice data is not copied: the
 * decoded buffers point into the input. Why not msgpack-c's unpacker: see
 * docs/wire.md.
 */
#include "wire.h"
#include "mp.h"

#include <stdlib.h>
#include <string.h>

/* A fixed-size tuple: exactly `want` elements. */
static int rd_tuple(struct rt_mp *c, uint32_t want)
{
	uint32_t n;
	int rc = rt_mp_array(c, UINT32_MAX, &n);
	if (rc)
		return rc;
	if (n < want)
		return RT_WIRE_E_MISSING;
	if (n > want)
		return RT_WIRE_E_EXTRA;
	return 0;
}

static int rd_cstr(struct rt_mp *c, char dst[RT_WIRE_MAX_STR + 1])
{
	const uint8_t *p;
	uint32_t n;
	int rc = rt_mp_raw(c, 0, RT_WIRE_MAX_STR, &p, &n);
	if (rc)
		return rc;
	if (memchr(p, 0, n))
		return RT_WIRE_E_VALUE;
	memcpy(dst, p, n);
	dst[n] = 0;
	return 0;
}

#define TRY(x)                      \
	do {                        \
		int rc_ = (x);      \
		if (rc_)            \
			return rc_; \
	} while (0)

/* ---- the per-message block of variable arrays ---- */

/* Fewest bytes one element can take on the wire. */
#define MIN_TRIGGER_TRACE 4u /* fixarray, 2 fixints, empty fixarray */
#define MIN_REMOTE_TRACE 3u
#define MIN_REPLY_TRACE 7u
#define MIN_SLICE_BUFFER 8u /* fixarray, 5 fixints, bin8 of length 0 */
#define MIN_SCALAR 1u
#define MIN_WINDOW_CANDIDATE 7u /* fixarray, 6 fixints */

static size_t cap_by_input(uint32_t declared, size_t bytes_left, size_t min_size)
{
	size_t fit = bytes_left / min_size;
	return declared < fit ? declared : fit;
}

/*
 * The array for a list of `declared` elements, sized by what the remaining input
 * could really hold (at least one), owned by out->mem. Sets *cap.
 */
static void *alloc_list(struct rt_mp *c, struct rt_wire_msg *out, uint32_t declared,
			size_t min_size, size_t elem_size, size_t *cap)
{
	*cap = cap_by_input(declared, rt_mp_left(c), min_size);
	if (!*cap)
		*cap = 1;
	out->mem = malloc(*cap * elem_size);
	return out->mem;
}

/* Traces of TRIGGER / REMOTE_TRIGGER / BREADCRUMB_REPLY. */
static int rd_traces(struct rt_mp *c, struct rt_wire_msg *out, int type, uint32_t min,
		     const struct rt_wire_trace **traces, uint32_t *count)
{
	uint32_t n;
	size_t tcap, bcap = 0, bused = 0, min_size;
	struct rt_wire_trace *t;
	uint32_t *bc;
	unsigned elems;

	TRY(rt_mp_array(c, RT_WIRE_MAX_TRACES, &n));
	if (n < min)
		return RT_WIRE_E_VALUE;
	*count = 0;
	*traces = NULL;
	if (!n)
		return 0;
	min_size = type == RT_WIRE_TRIGGER ? MIN_TRIGGER_TRACE
		 : type == RT_WIRE_REMOTE_TRIGGER ? MIN_REMOTE_TRACE : MIN_REPLY_TRACE;
	elems = type == RT_WIRE_TRIGGER ? 3 : type == RT_WIRE_REMOTE_TRIGGER ? 2 : 6;
	tcap = cap_by_input(n, rt_mp_left(c), min_size);
	if (type != RT_WIRE_REMOTE_TRIGGER)
		bcap = cap_by_input(n * RT_WIRE_MAX_BREADCRUMBS, rt_mp_left(c), MIN_SCALAR);
	if (!tcap) /* not even one trace fits: let the reader say why */
		tcap = 1;
	out->mem = malloc(tcap * sizeof *t + bcap * sizeof *bc);
	if (!out->mem)
		return RT_WIRE_E_NOMEM;
	t = out->mem;
	bc = (uint32_t *)(t + tcap);
	for (uint32_t i = 0; i < n; i++) {
		struct rt_wire_trace x = {0};
		TRY(rd_tuple(c, elems));
		TRY(rt_mp_u64(c, &x.trace_hi));
		TRY(rt_mp_u64(c, &x.trace_lo));
		if (type == RT_WIRE_BREADCRUMB_REPLY) {
			TRY(rt_mp_u32(c, &x.buffers));
			TRY(rt_mp_u64(c, &x.bytes));
			TRY(rt_mp_u32(c, &x.open));
		}
		if (type != RT_WIRE_REMOTE_TRIGGER) {
			uint32_t nb;
			TRY(rt_mp_array(c, RT_WIRE_MAX_BREADCRUMBS, &nb));
			x.breadcrumbs = nb ? bc + bused : NULL;
			for (uint32_t j = 0; j < nb; j++) {
				uint32_t v;
				TRY(rt_mp_u32(c, &v));
				if (bused >= bcap) /* unreachable: each took a byte */
					return RT_WIRE_E_TRUNCATED;
				bc[bused++] = v;
			}
			x.breadcrumb_count = nb;
		}
		if (i >= tcap) /* unreachable: each took min_size bytes */
			return RT_WIRE_E_TRUNCATED;
		t[i] = x;
	}
	*traces = t;
	*count = n;
	return 0;
}

static int rd_register(struct rt_mp *c, struct rt_wire_register *r)
{
	TRY(rt_mp_u32(c, &r->agent_id));
	TRY(rd_cstr(c, r->host));
	TRY(rt_mp_u32(c, &r->pid));
	TRY(rt_mp_u64(c, &r->start_unix_ns));
	TRY(rd_cstr(c, r->control_addr));
	TRY(rt_mp_u32(c, &r->buffer_size));
	TRY(rt_mp_u32(c, &r->buffer_count));
	TRY(rt_mp_u64(c, &r->tsc_hz));
	TRY(rt_mp_u64(c, &r->tsc_ref_tick));
	return rt_mp_u64(c, &r->tsc_ref_unix_ns);
}

static int rd_trigger(struct rt_mp *c, struct rt_wire_msg *out)
{
	struct rt_wire_trigger *t = &out->trigger;
	TRY(rt_mp_u32(c, &t->agent_id));
	TRY(rt_mp_u64(c, &t->trigger_seq));
	TRY(rt_mp_u32(c, &t->trigger_id));
	TRY(rt_mp_u64(c, &t->fired_unix_ns));
	return rd_traces(c, out, RT_WIRE_TRIGGER, 1, &t->traces, &t->trace_count);
}

static int rd_remote(struct rt_mp *c, struct rt_wire_msg *out, uint32_t elems)
{
	struct rt_wire_remote_trigger *r = &out->remote;
	TRY(rt_mp_u64(c, &r->request_id));
	TRY(rt_mp_u32(c, &r->trigger_id));
	TRY(rd_traces(c, out, RT_WIRE_REMOTE_TRIGGER, 1, &r->traces, &r->trace_count));
	if (elems == RT_WIRE_ELEMS_REMOTE_TRIGGER_MAX)
		TRY(rd_cstr(c, r->member));
	return 0;
}

static int rd_reply(struct rt_mp *c, struct rt_wire_msg *out)
{
	struct rt_wire_breadcrumb_reply *r = &out->reply;
	TRY(rt_mp_u64(c, &r->request_id));
	TRY(rt_mp_u32(c, &r->agent_id));
	return rd_traces(c, out, RT_WIRE_BREADCRUMB_REPLY, 0, &r->traces, &r->trace_count);
}

/* `elems`: the message's element count, RT_WIRE_ELEMS_SLICE or _SLICE_MAX. */
static int rd_slice(struct rt_mp *c, struct rt_wire_msg *out, uint32_t elems)
{
	struct rt_wire_slice *s = &out->slice;
	struct rt_wire_slice_buffer *b = NULL;
	uint32_t n;
	size_t cap = 0;

	TRY(rt_mp_u32(c, &s->agent_id));
	TRY(rt_mp_u64(c, &s->slice_seq));
	TRY(rt_mp_u32(c, &s->trigger_id));
	TRY(rt_mp_u64(c, &s->trace_hi));
	TRY(rt_mp_u64(c, &s->trace_lo));
	TRY(rt_mp_u64(c, &s->tsc_hz));
	TRY(rt_mp_u64(c, &s->tsc_ref_tick));
	TRY(rt_mp_u64(c, &s->tsc_ref_unix_ns));
	TRY(rt_mp_array(c, RT_WIRE_MAX_SLICE_BUFFERS, &n));
	if (n && !(b = alloc_list(c, out, n, MIN_SLICE_BUFFER, sizeof *b, &cap)))
		return RT_WIRE_E_NOMEM;
	for (uint32_t i = 0; i < n; i++) {
		struct rt_wire_slice_buffer x = {0};
		const uint8_t *p;
		TRY(rd_tuple(c, 6));
		TRY(rt_mp_u32(c, &x.pid));
		TRY(rt_mp_u32(c, &x.tid));
		TRY(rt_mp_u32(c, &x.seq));
		TRY(rt_mp_u32(c, &x.flags));
		TRY(rt_mp_u64(c, &x.first_tick));
		TRY(rt_mp_raw(c, 1, RT_WIRE_MAX_BIN, &p, &x.len));
		x.data = x.len ? p : NULL;
		if (i >= cap) /* unreachable: each took MIN_SLICE_BUFFER bytes */
			return RT_WIRE_E_TRUNCATED;
		b[i] = x;
	}
	s->buffers = n ? b : NULL;
	s->buffer_count = n;
	if (elems == RT_WIRE_ELEMS_SLICE_MAX) {
		TRY(rt_mp_u32(c, &s->rate_exp));
		if (s->rate_exp > RT_WIRE_MAX_RATE_EXP)
			return RT_WIRE_E_VALUE;
	}
	return 0;
}

static int rd_ack(struct rt_mp *c, struct rt_wire_msg *out)
{
	struct rt_wire_ack *a = &out->ack;
	uint64_t *seqs;
	uint32_t n;
	size_t cap;

	TRY(rt_mp_i32(c, &a->status));
	TRY(rt_mp_array(c, RT_WIRE_MAX_ACK_SEQS, &n));
	if (!n)
		return 0;
	if (!(seqs = alloc_list(c, out, n, MIN_SCALAR, sizeof *seqs, &cap)))
		return RT_WIRE_E_NOMEM;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t v;
		TRY(rt_mp_u64(c, &v));
		if (i >= cap) /* unreachable */
			return RT_WIRE_E_TRUNCATED;
		seqs[i] = v;
	}
	a->seqs = seqs;
	a->seq_count = n;
	return 0;
}

static int rd_window_query(struct rt_mp *c, struct rt_wire_window_query *q)
{
	TRY(rt_mp_u64(c, &q->request_id));
	TRY(rt_mp_u32(c, &q->kind));
	TRY(rd_cstr(c, q->service));
	TRY(rd_cstr(c, q->peer));
	TRY(rt_mp_u64(c, &q->t0_unix_ns));
	TRY(rt_mp_u64(c, &q->t1_unix_ns));
	TRY(rt_mp_u32(c, &q->max));
	TRY(rt_mp_u32(c, &q->hold_ms));
	return rt_wire_window_query_in_domain(q) ? 0 : RT_WIRE_E_VALUE;
}

static int rd_window_reply(struct rt_mp *c, struct rt_wire_msg *out)
{
	struct rt_wire_window_reply *r = &out->wreply;
	struct rt_wire_window_candidate *v = NULL;
	uint32_t n;
	size_t cap = 0;

	TRY(rt_mp_u64(c, &r->request_id));
	TRY(rt_mp_u32(c, &r->agent_id));
	TRY(rt_mp_array(c, RT_WIRE_MAX_WINDOW, &n));
	if (n && !(v = alloc_list(c, out, n, MIN_WINDOW_CANDIDATE, sizeof *v, &cap)))
		return RT_WIRE_E_NOMEM;
	for (uint32_t i = 0; i < n; i++) {
		struct rt_wire_window_candidate x;
		TRY(rd_tuple(c, 6));
		TRY(rt_mp_u64(c, &x.trace_hi));
		TRY(rt_mp_u64(c, &x.trace_lo));
		TRY(rt_mp_u64(c, &x.span_id));
		TRY(rt_mp_u64(c, &x.start_unix_ns));
		TRY(rt_mp_u64(c, &x.end_unix_ns));
		TRY(rt_mp_u64(c, &x.conn));
		if (i >= cap) /* unreachable: each took MIN_WINDOW_CANDIDATE bytes */
			return RT_WIRE_E_TRUNCATED;
		v[i] = x;
	}
	r->candidates = n ? v : NULL;
	r->candidate_count = n;
	return rt_mp_u32(c, &r->truncated);
}

/* POLICY: generation, [[site, p16]...]; a site 0 is no site (VALUE). */
#define MIN_POLICY_ENTRY 3u /* fixarray, 2 fixints */
static int rd_policy(struct rt_mp *c, struct rt_wire_msg *out)
{
	struct rt_wire_policy *pl = &out->policy;
	struct rt_wire_policy_entry *e;
	uint32_t n;
	size_t cap;

	TRY(rt_mp_u64(c, &pl->generation));
	TRY(rt_mp_array(c, RT_WIRE_MAX_POLICY_SITES, &n));
	if (!n)
		return 0;
	if (!(e = alloc_list(c, out, n, MIN_POLICY_ENTRY, sizeof *e, &cap)))
		return RT_WIRE_E_NOMEM;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t site, p16;
		TRY(rd_tuple(c, 2));
		TRY(rt_mp_u64(c, &site));
		if (!site)
			return RT_WIRE_E_VALUE;
		TRY(rt_mp_int(c, 0, 0xFFFFu, &p16, NULL));
		if (i >= cap) /* unreachable: each took MIN_POLICY_ENTRY bytes */
			return RT_WIRE_E_TRUNCATED;
		e[i] = (struct rt_wire_policy_entry){ site, (uint16_t)p16 };
	}
	pl->entries = e;
	pl->entry_count = n;
	return 0;
}

static uint32_t elems_of(uint64_t type)
{
	switch (type) {
	case RT_WIRE_REGISTER: return RT_WIRE_ELEMS_REGISTER;
	case RT_WIRE_TRIGGER: return RT_WIRE_ELEMS_TRIGGER;
	case RT_WIRE_REMOTE_TRIGGER: return RT_WIRE_ELEMS_REMOTE_TRIGGER;
	case RT_WIRE_BREADCRUMB_REPLY: return RT_WIRE_ELEMS_BREADCRUMB_REPLY;
	case RT_WIRE_SLICE: return RT_WIRE_ELEMS_SLICE;
	case RT_WIRE_ACK: return RT_WIRE_ELEMS_ACK;
	case RT_WIRE_WINDOW_QUERY: return RT_WIRE_ELEMS_WINDOW_QUERY;
	case RT_WIRE_WINDOW_REPLY: return RT_WIRE_ELEMS_WINDOW_REPLY;
	case RT_WIRE_WINDOW_RELEASE: return RT_WIRE_ELEMS_WINDOW_RELEASE;
	case RT_WIRE_POLICY: return RT_WIRE_ELEMS_POLICY;
	default: return 0;
	}
}

/* The most elements a message of this type may have (an optional last field). */
static uint32_t max_elems_of(uint64_t type)
{
	return type == RT_WIRE_SLICE		? RT_WIRE_ELEMS_SLICE_MAX
	       : type == RT_WIRE_REMOTE_TRIGGER ? RT_WIRE_ELEMS_REMOTE_TRIGGER_MAX
						: elems_of(type);
}

/*
 * Array header, version, type, element count (into *elems when not NULL).
 * Returns the type or an error.
 */
static int rd_envelope(struct rt_mp *c, const void *data, size_t len, uint32_t *elems)
{
	uint32_t n, want;
	uint64_t v;

	if (!data && len)
		return RT_WIRE_E_INVAL;
	if (!len)
		return RT_WIRE_E_TRUNCATED;
	if (len > RT_WIRE_MAX_MESSAGE)
		return RT_WIRE_E_TOO_BIG;
	c->p = data;
	c->n = len;
	c->i = 0;
	TRY(rt_mp_array(c, UINT32_MAX, &n));
	if (n == 0)
		return RT_WIRE_E_MISSING;
	TRY(rt_mp_u64(c, &v));
	if (v != RT_WIRE_VERSION)
		return RT_WIRE_E_VERSION;
	if (n < 2)
		return RT_WIRE_E_MISSING;
	TRY(rt_mp_u64(c, &v));
	want = elems_of(v);
	if (!want)
		return RT_WIRE_E_UNKNOWN_TYPE;
	if (n < want)
		return RT_WIRE_E_MISSING;
	if (n > max_elems_of(v))
		return RT_WIRE_E_EXTRA;
	if (elems)
		*elems = n;
	return (int)v;
}

int rt_wire_peek_type(const void *data, size_t len)
{
	struct rt_mp c;
	return rd_envelope(&c, data, len, NULL);
}

int rt_wire_decode(const void *data, size_t len, struct rt_wire_msg *out)
{
	struct rt_mp c;
	uint32_t elems = 0;
	int type, rc;

	memset(out, 0, sizeof *out);
	type = rd_envelope(&c, data, len, &elems);
	if (type < 0)
		return type;
	switch (type) {
	case RT_WIRE_REGISTER: rc = rd_register(&c, &out->reg); break;
	case RT_WIRE_TRIGGER: rc = rd_trigger(&c, out); break;
	case RT_WIRE_REMOTE_TRIGGER: rc = rd_remote(&c, out, elems); break;
	case RT_WIRE_BREADCRUMB_REPLY: rc = rd_reply(&c, out); break;
	case RT_WIRE_SLICE: rc = rd_slice(&c, out, elems); break;
	case RT_WIRE_WINDOW_QUERY: rc = rd_window_query(&c, &out->wquery); break;
	case RT_WIRE_WINDOW_REPLY: rc = rd_window_reply(&c, out); break;
	case RT_WIRE_WINDOW_RELEASE: rc = rt_mp_u64(&c, &out->wrelease.request_id); break;
	case RT_WIRE_POLICY: rc = rd_policy(&c, out); break;
	default: rc = rd_ack(&c, out); break;
	}
	if (!rc && c.i != c.n)
		rc = RT_WIRE_E_TRAILING;
	if (rc) {
		free(out->mem);
		memset(out, 0, sizeof *out);
		return rc;
	}
	out->type = type;
	return 0;
}

void rt_wire_msg_free(struct rt_wire_msg *m)
{
	if (!m)
		return;
	free(m->mem);
	memset(m, 0, sizeof *m);
}
