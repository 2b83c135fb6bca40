/*
 * wire/decode.c — the strict decoder: a cursor over the msgpack bytes.
 *
 * Each reader looks at one msgpack object where the catalogue expects a given
 * kind (unsigned int of a width, int32, str, bin, array), checks the format
 * byte, then that any declared length is within its limit (TOO_BIG), then that
 * the bytes are there (TRUNCATED), and only then reads them. The first failed
 * check wins, in byte order, so every malformed input has one well-defined
 * code. Nothing is skipped generically: an object of the wrong kind is an error
 * at its first byte.
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

#include <stdlib.h>
#include <string.h>

struct cur {
	const uint8_t *p;
	size_t n; /* input length */
	size_t i; /* next byte */
};

static inline size_t left(const struct cur *c)
{
	return c->n - c->i;
}

static inline uint64_t be(const uint8_t *p, unsigned w)
{
	uint64_t v = 0;
	for (unsigned k = 0; k < w; k++)
		v = (v << 8) | p[k];
	return v;
}

/*
 * Read an integer in [lo, hi] (hi <= INT64_MAX when lo < 0). Any msgpack
 * integer format is accepted if its value fits; msgpack-c reads them the same.
 */
static int rd_int(struct cur *c, int64_t lo, uint64_t hi, uint64_t *out, int64_t *sout)
{
	uint8_t b;
	unsigned w;
	int sign;
	uint64_t u;

	if (!left(c))
		return RT_WIRE_E_TRUNCATED;
	b = c->p[c->i];
	if (b <= 0x7f || b >= 0xe0) { /* positive / negative fixint */
		c->i++;
		if (b >= 0xe0) {
			int64_t v = (int8_t)b;
			if (v < lo)
				return RT_WIRE_E_TYPE;
			if (sout)
				*sout = v;
			return 0;
		}
		u = b;
		goto unsigned_value;
	}
	switch (b) {
	case 0xcc: w = 1; sign = 0; break;
	case 0xcd: w = 2; sign = 0; break;
	case 0xce: w = 4; sign = 0; break;
	case 0xcf: w = 8; sign = 0; break;
	case 0xd0: w = 1; sign = 1; break;
	case 0xd1: w = 2; sign = 1; break;
	case 0xd2: w = 4; sign = 1; break;
	case 0xd3: w = 8; sign = 1; break;
	default: return RT_WIRE_E_TYPE;
	}
	if (left(c) < 1 + (size_t)w)
		return RT_WIRE_E_TRUNCATED;
	u = be(c->p + c->i + 1, w);
	c->i += 1 + w;
	if (sign) {
		int64_t v;
		/* sign-extend from w bytes */
		if (w < 8 && (u >> (8 * w - 1)) & 1)
			u |= ~(uint64_t)0 << (8 * w);
		memcpy(&v, &u, sizeof v);
		if (v < 0) {
			if (v < lo)
				return RT_WIRE_E_TYPE;
			if (sout)
				*sout = v;
			return 0;
		}
	}
unsigned_value:
	if (u > hi)
		return RT_WIRE_E_TYPE;
	if (out)
		*out = u;
	if (sout)
		*sout = (int64_t)u;
	return 0;
}

static int rd_u32(struct cur *c, uint32_t *v)
{
	uint64_t u;
	int rc = rd_int(c, 0, UINT32_MAX, &u, NULL);
	if (!rc)
		*v = (uint32_t)u;
	return rc;
}

static int rd_u64(struct cur *c, uint64_t *v)
{
	return rd_int(c, 0, UINT64_MAX, v, NULL);
}

static int rd_i32(struct cur *c, int32_t *v)
{
	int64_t s;
	int rc = rd_int(c, INT32_MIN, INT32_MAX, NULL, &s);
	if (!rc)
		*v = (int32_t)s;
	return rc;
}

/* Array header; count checked against [0, max] (TOO_BIG above). */
static int rd_array(struct cur *c, uint32_t max, uint32_t *n)
{
	uint8_t b;
	unsigned w;
	uint64_t v;

	if (!left(c))
		return RT_WIRE_E_TRUNCATED;
	b = c->p[c->i];
	if (b >= 0x90 && b <= 0x9f) {
		v = b & 0x0f;
		w = 0;
	} else if (b == 0xdc || b == 0xdd) {
		w = b == 0xdc ? 2 : 4;
		if (left(c) < 1 + (size_t)w)
			return RT_WIRE_E_TRUNCATED;
		v = be(c->p + c->i + 1, w);
	} else {
		return RT_WIRE_E_TYPE;
	}
	if (v > max)
		return RT_WIRE_E_TOO_BIG;
	c->i += 1 + w;
	*n = (uint32_t)v;
	return 0;
}

/* A fixed-size tuple: exactly `want` elements. */
static int rd_tuple(struct cur *c, uint32_t want)
{
	uint32_t n;
	int rc = rd_array(c, UINT32_MAX, &n);
	if (rc)
		return rc;
	if (n < want)
		return RT_WIRE_E_MISSING;
	if (n > want)
		return RT_WIRE_E_EXTRA;
	return 0;
}

/* str (is_bin = 0) or bin (is_bin = 1) of at most max bytes. */
static int rd_raw(struct cur *c, int is_bin, uint64_t max, const uint8_t **p, uint32_t *len)
{
	uint8_t b;
	unsigned w;
	uint64_t v;

	if (!left(c))
		return RT_WIRE_E_TRUNCATED;
	b = c->p[c->i];
	if (!is_bin && b >= 0xa0 && b <= 0xbf) {
		v = b & 0x1f;
		w = 0;
	} else {
		switch (b) {
		case 0xd9: w = is_bin ? 0 : 1; break;
		case 0xda: w = is_bin ? 0 : 2; break;
		case 0xdb: w = is_bin ? 0 : 4; break;
		case 0xc4: w = is_bin ? 1 : 0; break;
		case 0xc5: w = is_bin ? 2 : 0; break;
		case 0xc6: w = is_bin ? 4 : 0; break;
		default: w = 0; break;
		}
		if (!w)
			return RT_WIRE_E_TYPE;
		if (left(c) < 1 + (size_t)w)
			return RT_WIRE_E_TRUNCATED;
		v = be(c->p + c->i + 1, w);
	}
	if (v > max)
		return RT_WIRE_E_TOO_BIG;
	if (left(c) - 1 - w < v)
		return RT_WIRE_E_TRUNCATED;
	*p = c->p + c->i + 1 + w;
	*len = (uint32_t)v;
	c->i += 1 + w + (size_t)v;
	return 0;
}

static int rd_cstr(struct cur *c, char dst[RT_WIRE_MAX_STR + 1])
{
	const uint8_t *p;
	uint32_t n;
	int rc = rd_raw(c, 0, RT_WIRE_MAX_STR, &p, &n);
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
#define MIN_WINDOW_CANDIDATE 6u /* fixarray, 5 fixints */

static size_t cap_by_input(uint32_t declared, size_t bytes_left, size_t min_size)
{
	size_t fit = bytes_left / min_size;
	return declared < fit ? declared : fit;
}

/*
 * The array for a list of `declared` elements, sized by what the remaining input
 * could really hold (at least one), owned by out->mem. Sets *cap.
 */
static void *alloc_list(struct cur *c, struct rt_wire_msg *out, uint32_t declared,
			size_t min_size, size_t elem_size, size_t *cap)
{
	*cap = cap_by_input(declared, left(c), min_size);
	if (!*cap)
		*cap = 1;
	out->mem = malloc(*cap * elem_size);
	return out->mem;
}

/* Traces of TRIGGER / REMOTE_TRIGGER / BREADCRUMB_REPLY. */
static int rd_traces(struct cur *c, struct rt_wire_msg *out, int type, uint32_t min,
		     const struct rt_wire_trace **traces, uint32_t *count)
{
	uint32_t n;
	size_t tcap, bcap = 0, bused = 0, min_size;
	struct rt_wire_trace *t;
	uint32_t *bc;
	unsigned elems;

	TRY(rd_array(c, RT_WIRE_MAX_TRACES, &n));
	if (n < min)
		return RT_WIRE_E_VALUE;
	*count = 0;
	*traces = NULL;
	if (!n)
		return 0;
	min_size = type == RT_WIRE_TRIGGER ? MIN_TRIGGER_TRACE
		 : type == RT_WIRE_REMOTE_TRIGGER ? MIN_REMOTE_TRACE : MIN_REPLY_TRACE;
	elems = type == RT_WIRE_TRIGGER ? 3 : type == RT_WIRE_REMOTE_TRIGGER ? 2 : 6;
	tcap = cap_by_input(n, left(c), min_size);
	if (type != RT_WIRE_REMOTE_TRIGGER)
		bcap = cap_by_input(n * RT_WIRE_MAX_BREADCRUMBS, left(c), MIN_SCALAR);
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
		TRY(rd_u64(c, &x.trace_hi));
		TRY(rd_u64(c, &x.trace_lo));
		if (type == RT_WIRE_BREADCRUMB_REPLY) {
			TRY(rd_u32(c, &x.buffers));
			TRY(rd_u64(c, &x.bytes));
			TRY(rd_u32(c, &x.open));
		}
		if (type != RT_WIRE_REMOTE_TRIGGER) {
			uint32_t nb;
			TRY(rd_array(c, RT_WIRE_MAX_BREADCRUMBS, &nb));
			x.breadcrumbs = nb ? bc + bused : NULL;
			for (uint32_t j = 0; j < nb; j++) {
				uint32_t v;
				TRY(rd_u32(c, &v));
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

static int rd_register(struct cur *c, struct rt_wire_register *r)
{
	TRY(rd_u32(c, &r->agent_id));
	TRY(rd_cstr(c, r->host));
	TRY(rd_u32(c, &r->pid));
	TRY(rd_u64(c, &r->start_unix_ns));
	TRY(rd_cstr(c, r->control_addr));
	TRY(rd_u32(c, &r->buffer_size));
	TRY(rd_u32(c, &r->buffer_count));
	TRY(rd_u64(c, &r->tsc_hz));
	TRY(rd_u64(c, &r->tsc_ref_tick));
	return rd_u64(c, &r->tsc_ref_unix_ns);
}

static int rd_trigger(struct cur *c, struct rt_wire_msg *out)
{
	struct rt_wire_trigger *t = &out->trigger;
	TRY(rd_u32(c, &t->agent_id));
	TRY(rd_u64(c, &t->trigger_seq));
	TRY(rd_u32(c, &t->trigger_id));
	TRY(rd_u64(c, &t->fired_unix_ns));
	return rd_traces(c, out, RT_WIRE_TRIGGER, 1, &t->traces, &t->trace_count);
}

static int rd_remote(struct cur *c, struct rt_wire_msg *out, uint32_t elems)
{
	struct rt_wire_remote_trigger *r = &out->remote;
	TRY(rd_u64(c, &r->request_id));
	TRY(rd_u32(c, &r->trigger_id));
	TRY(rd_traces(c, out, RT_WIRE_REMOTE_TRIGGER, 1, &r->traces, &r->trace_count));
	if (elems == RT_WIRE_ELEMS_REMOTE_TRIGGER_MAX)
		TRY(rd_cstr(c, r->member));
	return 0;
}

static int rd_reply(struct cur *c, struct rt_wire_msg *out)
{
	struct rt_wire_breadcrumb_reply *r = &out->reply;
	TRY(rd_u64(c, &r->request_id));
	TRY(rd_u32(c, &r->agent_id));
	return rd_traces(c, out, RT_WIRE_BREADCRUMB_REPLY, 0, &r->traces, &r->trace_count);
}

/* `elems`: the message's element count, RT_WIRE_ELEMS_SLICE or _SLICE_MAX. */
static int rd_slice(struct cur *c, struct rt_wire_msg *out, uint32_t elems)
{
	struct rt_wire_slice *s = &out->slice;
	struct rt_wire_slice_buffer *b = NULL;
	uint32_t n;
	size_t cap = 0;

	TRY(rd_u32(c, &s->agent_id));
	TRY(rd_u64(c, &s->slice_seq));
	TRY(rd_u32(c, &s->trigger_id));
	TRY(rd_u64(c, &s->trace_hi));
	TRY(rd_u64(c, &s->trace_lo));
	TRY(rd_u64(c, &s->tsc_hz));
	TRY(rd_u64(c, &s->tsc_ref_tick));
	TRY(rd_u64(c, &s->tsc_ref_unix_ns));
	TRY(rd_array(c, RT_WIRE_MAX_SLICE_BUFFERS, &n));
	if (n && !(b = alloc_list(c, out, n, MIN_SLICE_BUFFER, sizeof *b, &cap)))
		return RT_WIRE_E_NOMEM;
	for (uint32_t i = 0; i < n; i++) {
		struct rt_wire_slice_buffer x = {0};
		const uint8_t *p;
		TRY(rd_tuple(c, 6));
		TRY(rd_u32(c, &x.pid));
		TRY(rd_u32(c, &x.tid));
		TRY(rd_u32(c, &x.seq));
		TRY(rd_u32(c, &x.flags));
		TRY(rd_u64(c, &x.first_tick));
		TRY(rd_raw(c, 1, RT_WIRE_MAX_BIN, &p, &x.len));
		x.data = x.len ? p : NULL;
		if (i >= cap) /* unreachable: each took MIN_SLICE_BUFFER bytes */
			return RT_WIRE_E_TRUNCATED;
		b[i] = x;
	}
	s->buffers = n ? b : NULL;
	s->buffer_count = n;
	if (elems == RT_WIRE_ELEMS_SLICE_MAX) {
		TRY(rd_u32(c, &s->rate_exp));
		if (s->rate_exp > RT_WIRE_MAX_RATE_EXP)
			return RT_WIRE_E_VALUE;
	}
	return 0;
}

static int rd_ack(struct cur *c, struct rt_wire_msg *out)
{
	struct rt_wire_ack *a = &out->ack;
	uint64_t *seqs;
	uint32_t n;
	size_t cap;

	TRY(rd_i32(c, &a->status));
	TRY(rd_array(c, RT_WIRE_MAX_ACK_SEQS, &n));
	if (!n)
		return 0;
	if (!(seqs = alloc_list(c, out, n, MIN_SCALAR, sizeof *seqs, &cap)))
		return RT_WIRE_E_NOMEM;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t v;
		TRY(rd_u64(c, &v));
		if (i >= cap) /* unreachable */
			return RT_WIRE_E_TRUNCATED;
		seqs[i] = v;
	}
	a->seqs = seqs;
	a->seq_count = n;
	return 0;
}

static int rd_window_query(struct cur *c, struct rt_wire_window_query *q)
{
	TRY(rd_u64(c, &q->request_id));
	TRY(rd_u32(c, &q->kind));
	TRY(rd_cstr(c, q->service));
	TRY(rd_cstr(c, q->peer));
	TRY(rd_u64(c, &q->t0_unix_ns));
	TRY(rd_u64(c, &q->t1_unix_ns));
	TRY(rd_u32(c, &q->max));
	TRY(rd_u32(c, &q->hold_ms));
	return rt_wire_window_query_in_domain(q) ? 0 : RT_WIRE_E_VALUE;
}

static int rd_window_reply(struct cur *c, struct rt_wire_msg *out)
{
	struct rt_wire_window_reply *r = &out->wreply;
	struct rt_wire_window_candidate *v = NULL;
	uint32_t n;
	size_t cap = 0;

	TRY(rd_u64(c, &r->request_id));
	TRY(rd_u32(c, &r->agent_id));
	TRY(rd_array(c, RT_WIRE_MAX_WINDOW, &n));
	if (n && !(v = alloc_list(c, out, n, MIN_WINDOW_CANDIDATE, sizeof *v, &cap)))
		return RT_WIRE_E_NOMEM;
	for (uint32_t i = 0; i < n; i++) {
		struct rt_wire_window_candidate x;
		TRY(rd_tuple(c, 5));
		TRY(rd_u64(c, &x.trace_hi));
		TRY(rd_u64(c, &x.trace_lo));
		TRY(rd_u64(c, &x.span_id));
		TRY(rd_u64(c, &x.start_unix_ns));
		TRY(rd_u64(c, &x.end_unix_ns));
		if (i >= cap) /* unreachable: each took MIN_WINDOW_CANDIDATE bytes */
			return RT_WIRE_E_TRUNCATED;
		v[i] = x;
	}
	r->candidates = n ? v : NULL;
	r->candidate_count = n;
	return rd_u32(c, &r->truncated);
}

/* POLICY: generation, [[site, p16]...]; a site 0 is no site (VALUE). */
#define MIN_POLICY_ENTRY 3u /* fixarray, 2 fixints */
static int rd_policy(struct cur *c, struct rt_wire_msg *out)
{
	struct rt_wire_policy *pl = &out->policy;
	struct rt_wire_policy_entry *e;
	uint32_t n;
	size_t cap;

	TRY(rd_u64(c, &pl->generation));
	TRY(rd_array(c, RT_WIRE_MAX_POLICY_SITES, &n));
	if (!n)
		return 0;
	if (!(e = alloc_list(c, out, n, MIN_POLICY_ENTRY, sizeof *e, &cap)))
		return RT_WIRE_E_NOMEM;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t site, p16;
		TRY(rd_tuple(c, 2));
		TRY(rd_u64(c, &site));
		if (!site)
			return RT_WIRE_E_VALUE;
		TRY(rd_int(c, 0, 0xFFFFu, &p16, NULL));
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
static int rd_envelope(struct cur *c, const void *data, size_t len, uint32_t *elems)
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
	TRY(rd_array(c, UINT32_MAX, &n));
	if (n == 0)
		return RT_WIRE_E_MISSING;
	TRY(rd_u64(c, &v));
	if (v != RT_WIRE_VERSION)
		return RT_WIRE_E_VERSION;
	if (n < 2)
		return RT_WIRE_E_MISSING;
	TRY(rd_u64(c, &v));
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
	struct cur c;
	return rd_envelope(&c, data, len, NULL);
}

int rt_wire_decode(const void *data, size_t len, struct rt_wire_msg *out)
{
	struct cur c;
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
	case RT_WIRE_WINDOW_RELEASE: rc = rd_u64(&c, &out->wrelease.request_id); break;
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
