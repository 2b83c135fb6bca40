/*
 * wire/wire.c — encoders, the output buffer, names of types and errors.
 *
 * Every encoder runs in three steps: check the message against the limits the
 * decoder enforces; pack it once through msgpack-c's packer into a counting
 * sink to get the exact size (msgpack-c picks the smallest form for every
 * integer and length, so only msgpack-c itself knows the size for sure);
 * reserve that much once and pack again into the buffer. The second pass
 * cannot fail, so a refused message leaves the buffer as it was, and a slice's
 * buffer data goes out with one memcpy each (msgpack_pack_bin_body hands the
 * whole body to the sink in one call).
 */
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

/* ---- output buffer ---- */

void rt_wire_buf_init(struct rt_wire_buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

int rt_wire_buf_reserve(struct rt_wire_buf *b, size_t extra)
{
	size_t need, cap;
	uint8_t *p;

	if (extra > SIZE_MAX - b->len)
		return RT_WIRE_E_NOMEM;
	need = b->len + extra;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	p = realloc(b->data, cap);
	if (!p)
		return RT_WIRE_E_NOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

void rt_wire_buf_free(struct rt_wire_buf *b)
{
	free(b->data);
	rt_wire_buf_init(b);
}

/* ---- sinks for msgpack_packer ---- */

struct sink {
	struct rt_wire_buf *buf; /* NULL: only count */
	size_t count;
	int failed;
};

static int sink_write(void *data, const char *p, size_t len)
{
	struct sink *s = data;

	s->count += len;
	if (!s->buf || len == 0)
		return 0;
	/* Reserved beforehand; growing here is only a safety net. */
	if (s->buf->cap - s->buf->len < len && rt_wire_buf_reserve(s->buf, len)) {
		s->failed = 1;
		return -1;
	}
	memcpy(s->buf->data + s->buf->len, p, len);
	s->buf->len += len;
	return 0;
}

/* ---- checks: the decoder's limits, applied before anything is written ---- */

int rt_wire_window_query_in_domain(const struct rt_wire_window_query *q)
{
	return q->service[0] && q->t0_unix_ns <= q->t1_unix_ns && q->max != 0 &&
	       q->max <= RT_WIRE_MAX_WINDOW && q->hold_ms <= RT_WIRE_MAX_HOLD_MS &&
	       q->kind <= RT_WIRE_WINDOW_CLIENTS &&
	       (q->kind == RT_WIRE_WINDOW_CLIENTS) == (q->peer[0] != 0);
}

static int check_str(const char *s)
{
	return strnlen(s, RT_WIRE_MAX_STR + 1) > RT_WIRE_MAX_STR ? RT_WIRE_E_TOO_BIG : 0;
}

static int check_traces(const struct rt_wire_trace *t, uint32_t n, uint32_t min,
			int with_breadcrumbs)
{
	if (n > RT_WIRE_MAX_TRACES)
		return RT_WIRE_E_TOO_BIG;
	if (n < min)
		return RT_WIRE_E_VALUE;
	if (n && !t)
		return RT_WIRE_E_INVAL;
	if (!with_breadcrumbs)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		if (t[i].breadcrumb_count > RT_WIRE_MAX_BREADCRUMBS)
			return RT_WIRE_E_TOO_BIG;
		if (t[i].breadcrumb_count && !t[i].breadcrumbs)
			return RT_WIRE_E_INVAL;
	}
	return 0;
}

static int check_msg(const struct rt_wire_msg *m)
{
	int rc;

	switch (m->type) {
	case RT_WIRE_REGISTER:
		if ((rc = check_str(m->reg.host)))
			return rc;
		return check_str(m->reg.control_addr);
	case RT_WIRE_TRIGGER:
		return check_traces(m->trigger.traces, m->trigger.trace_count, 1, 1);
	case RT_WIRE_REMOTE_TRIGGER:
		if ((rc = check_str(m->remote.member)))
			return rc;
		return check_traces(m->remote.traces, m->remote.trace_count, 1, 0);
	case RT_WIRE_BREADCRUMB_REPLY:
		return check_traces(m->reply.traces, m->reply.trace_count, 0, 1);
	case RT_WIRE_SLICE:
		if (m->slice.rate_exp > RT_WIRE_MAX_RATE_EXP)
			return RT_WIRE_E_VALUE;
		if (m->slice.buffer_count > RT_WIRE_MAX_SLICE_BUFFERS)
			return RT_WIRE_E_TOO_BIG;
		if (m->slice.buffer_count && !m->slice.buffers)
			return RT_WIRE_E_INVAL;
		for (uint32_t i = 0; i < m->slice.buffer_count; i++) {
			const struct rt_wire_slice_buffer *b = &m->slice.buffers[i];
			if (b->len > RT_WIRE_MAX_BIN)
				return RT_WIRE_E_TOO_BIG;
			if (b->len && !b->data)
				return RT_WIRE_E_INVAL;
		}
		return 0;
	case RT_WIRE_ACK:
		if (m->ack.seq_count > RT_WIRE_MAX_ACK_SEQS)
			return RT_WIRE_E_TOO_BIG;
		if (m->ack.seq_count && !m->ack.seqs)
			return RT_WIRE_E_INVAL;
		return 0;
	case RT_WIRE_WINDOW_QUERY: {
		const struct rt_wire_window_query *q = &m->wquery;
		if ((rc = check_str(q->service)))
			return rc;
		if ((rc = check_str(q->peer)))
			return rc;
		return rt_wire_window_query_in_domain(q) ? 0 : RT_WIRE_E_VALUE;
	}
	case RT_WIRE_WINDOW_REPLY:
		if (m->wreply.candidate_count > RT_WIRE_MAX_WINDOW)
			return RT_WIRE_E_TOO_BIG;
		if (m->wreply.candidate_count && !m->wreply.candidates)
			return RT_WIRE_E_INVAL;
		return 0;
	case RT_WIRE_WINDOW_RELEASE:
		return 0;
	case RT_WIRE_POLICY:
		if (m->policy.entry_count > RT_WIRE_MAX_POLICY_SITES)
			return RT_WIRE_E_TOO_BIG;
		if (m->policy.entry_count && !m->policy.entries)
			return RT_WIRE_E_INVAL;
		for (uint32_t i = 0; i < m->policy.entry_count; i++)
			if (!m->policy.entries[i].site)
				return RT_WIRE_E_VALUE;
		return 0;
	default:
		return RT_WIRE_E_UNKNOWN_TYPE;
	}
}

/* ---- packing (field order is the catalogue in docs/wire.md) ---- */

static void pack_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

static void pack_traces(msgpack_packer *pk, const struct rt_wire_trace *t, uint32_t n,
			int type)
{
	msgpack_pack_array(pk, n);
	for (uint32_t i = 0; i < n; i++) {
		msgpack_pack_array(pk, type == RT_WIRE_TRIGGER ? 3
				   : type == RT_WIRE_REMOTE_TRIGGER ? 2 : 6);
		msgpack_pack_uint64(pk, t[i].trace_hi);
		msgpack_pack_uint64(pk, t[i].trace_lo);
		if (type == RT_WIRE_REMOTE_TRIGGER)
			continue;
		if (type == RT_WIRE_BREADCRUMB_REPLY) {
			msgpack_pack_uint32(pk, t[i].buffers);
			msgpack_pack_uint64(pk, t[i].bytes);
			msgpack_pack_uint32(pk, t[i].open);
		}
		msgpack_pack_array(pk, t[i].breadcrumb_count);
		for (uint32_t j = 0; j < t[i].breadcrumb_count; j++)
			msgpack_pack_uint32(pk, t[i].breadcrumbs[j]);
	}
}

static void pack_msg(msgpack_packer *pk, const struct rt_wire_msg *m)
{
	switch (m->type) {
	case RT_WIRE_REGISTER: {
		const struct rt_wire_register *r = &m->reg;
		msgpack_pack_array(pk, RT_WIRE_ELEMS_REGISTER);
		msgpack_pack_uint32(pk, RT_WIRE_VERSION);
		msgpack_pack_uint32(pk, RT_WIRE_REGISTER);
		msgpack_pack_uint32(pk, r->agent_id);
		pack_str(pk, r->host);
		msgpack_pack_uint32(pk, r->pid);
		msgpack_pack_uint64(pk, r->start_unix_ns);
		pack_str(pk, r->control_addr);
		msgpack_pack_uint32(pk, r->buffer_size);
		msgpack_pack_uint32(pk, r->buffer_count);
		msgpack_pack_uint64(pk, r->tsc_hz);
		msgpack_pack_uint64(pk, r->tsc_ref_tick);
		msgpack_pack_uint64(pk, r->tsc_ref_unix_ns);
		break;
	}
	case RT_WIRE_TRIGGER: {
		const struct rt_wire_trigger *t = &m->trigger;
		msgpack_pack_array(pk, RT_WIRE_ELEMS_TRIGGER);
		msgpack_pack_uint32(pk, RT_WIRE_VERSION);
		msgpack_pack_uint32(pk, RT_WIRE_TRIGGER);
		msgpack_pack_uint32(pk, t->agent_id);
		msgpack_pack_uint64(pk, t->trigger_seq);
		msgpack_pack_uint32(pk, t->trigger_id);
		msgpack_pack_uint64(pk, t->fired_unix_ns);
		pack_traces(pk, t->traces, t->trace_count, RT_WIRE_TRIGGER);
		break;
	}
	case RT_WIRE_REMOTE_TRIGGER: {
		const struct rt_wire_remote_trigger *r = &m->remote;
		msgpack_pack_array(pk, r->member[0] ? RT_WIRE_ELEMS_REMOTE_TRIGGER_MAX
						    : RT_WIRE_ELEMS_REMOTE_TRIGGER);
		msgpack_pack_uint32(pk, RT_WIRE_VERSION);
		msgpack_pack_uint32(pk, RT_WIRE_REMOTE_TRIGGER);
		msgpack_pack_uint64(pk, r->request_id);
		msgpack_pack_uint32(pk, r->trigger_id);
		pack_traces(pk, r->traces, r->trace_count, RT_WIRE_REMOTE_TRIGGER);
		if (r->member[0]) /* absent means "": old decoders keep reading it */
			pack_str(pk, r->member);
		break;
	}
	case RT_WIRE_BREADCRUMB_REPLY: {
		const struct rt_wire_breadcrumb_reply *r = &m->reply;
		msgpack_pack_array(pk, RT_WIRE_ELEMS_BREADCRUMB_REPLY);
		msgpack_pack_uint32(pk, RT_WIRE_VERSION);
		msgpack_pack_uint32(pk, RT_WIRE_BREADCRUMB_REPLY);
		msgpack_pack_uint64(pk, r->request_id);
		msgpack_pack_uint32(pk, r->agent_id);
		pack_traces(pk, r->traces, r->trace_count, RT_WIRE_BREADCRUMB_REPLY);
		break;
	}
	case RT_WIRE_SLICE: {
		const struct rt_wire_slice *s = &m->slice;
		msgpack_pack_array(pk, s->rate_exp ? RT_WIRE_ELEMS_SLICE_MAX : RT_WIRE_ELEMS_SLICE);
		msgpack_pack_uint32(pk, RT_WIRE_VERSION);
		msgpack_pack_uint32(pk, RT_WIRE_SLICE);
		msgpack_pack_uint32(pk, s->agent_id);
		msgpack_pack_uint64(pk, s->slice_seq);
		msgpack_pack_uint32(pk, s->trigger_id);
		msgpack_pack_uint64(pk, s->trace_hi);
		msgpack_pack_uint64(pk, s->trace_lo);
		msgpack_pack_uint64(pk, s->tsc_hz);
		msgpack_pack_uint64(pk, s->tsc_ref_tick);
		msgpack_pack_uint64(pk, s->tsc_ref_unix_ns);
		msgpack_pack_array(pk, s->buffer_count);
		for (uint32_t i = 0; i < s->buffer_count; i++) {
			const struct rt_wire_slice_buffer *b = &s->buffers[i];
			msgpack_pack_array(pk, 6);
			msgpack_pack_uint32(pk, b->pid);
			msgpack_pack_uint32(pk, b->tid);
			msgpack_pack_uint32(pk, b->seq);
			msgpack_pack_uint32(pk, b->flags);
			msgpack_pack_uint64(pk, b->first_tick);
			msgpack_pack_bin(pk, b->len);
			msgpack_pack_bin_body(pk, b->data, b->len);
		}
		if (s->rate_exp) /* absent means 0: old decoders keep reading rate-1 slices */
			msgpack_pack_uint32(pk, s->rate_exp);
		break;
	}
	case RT_WIRE_ACK: {
		const struct rt_wire_ack *a = &m->ack;
		msgpack_pack_array(pk, RT_WIRE_ELEMS_ACK);
		msgpack_pack_uint32(pk, RT_WIRE_VERSION);
		msgpack_pack_uint32(pk, RT_WIRE_ACK);
		msgpack_pack_int32(pk, a->status);
		msgpack_pack_array(pk, a->seq_count);
		for (uint32_t i = 0; i < a->seq_count; i++)
			msgpack_pack_uint64(pk, a->seqs[i]);
		break;
	}
	case RT_WIRE_WINDOW_QUERY: {
		const struct rt_wire_window_query *q = &m->wquery;
		msgpack_pack_array(pk, RT_WIRE_ELEMS_WINDOW_QUERY);
		msgpack_pack_uint32(pk, RT_WIRE_VERSION);
		msgpack_pack_uint32(pk, RT_WIRE_WINDOW_QUERY);
		msgpack_pack_uint64(pk, q->request_id);
		msgpack_pack_uint32(pk, q->kind);
		pack_str(pk, q->service);
		pack_str(pk, q->peer);
		msgpack_pack_uint64(pk, q->t0_unix_ns);
		msgpack_pack_uint64(pk, q->t1_unix_ns);
		msgpack_pack_uint32(pk, q->max);
		msgpack_pack_uint32(pk, q->hold_ms);
		break;
	}
	case RT_WIRE_WINDOW_REPLY: {
		const struct rt_wire_window_reply *r = &m->wreply;
		msgpack_pack_array(pk, RT_WIRE_ELEMS_WINDOW_REPLY);
		msgpack_pack_uint32(pk, RT_WIRE_VERSION);
		msgpack_pack_uint32(pk, RT_WIRE_WINDOW_REPLY);
		msgpack_pack_uint64(pk, r->request_id);
		msgpack_pack_uint32(pk, r->agent_id);
		msgpack_pack_array(pk, r->candidate_count);
		for (uint32_t i = 0; i < r->candidate_count; i++) {
			const struct rt_wire_window_candidate *x = &r->candidates[i];
			msgpack_pack_array(pk, 6);
			msgpack_pack_uint64(pk, x->trace_hi);
			msgpack_pack_uint64(pk, x->trace_lo);
			msgpack_pack_uint64(pk, x->span_id);
			msgpack_pack_uint64(pk, x->start_unix_ns);
			msgpack_pack_uint64(pk, x->end_unix_ns);
			msgpack_pack_uint64(pk, x->conn);
		}
		msgpack_pack_uint32(pk, r->truncated);
		break;
	}
	case RT_WIRE_WINDOW_RELEASE:
		msgpack_pack_array(pk, RT_WIRE_ELEMS_WINDOW_RELEASE);
		msgpack_pack_uint32(pk, RT_WIRE_VERSION);
		msgpack_pack_uint32(pk, RT_WIRE_WINDOW_RELEASE);
		msgpack_pack_uint64(pk, m->wrelease.request_id);
		break;
	case RT_WIRE_POLICY: {
		const struct rt_wire_policy *pl = &m->policy;
		msgpack_pack_array(pk, RT_WIRE_ELEMS_POLICY);
		msgpack_pack_uint32(pk, RT_WIRE_VERSION);
		msgpack_pack_uint32(pk, RT_WIRE_POLICY);
		msgpack_pack_uint64(pk, pl->generation);
		msgpack_pack_array(pk, pl->entry_count);
		for (uint32_t i = 0; i < pl->entry_count; i++) {
			msgpack_pack_array(pk, 2);
			msgpack_pack_uint64(pk, pl->entries[i].site);
			msgpack_pack_uint16(pk, pl->entries[i].p16);
		}
		break;
	}
	}
}

/* ---- public encoders ---- */

int rt_wire_encoded_size(const struct rt_wire_msg *m, size_t *size)
{
	struct sink s = {0};
	msgpack_packer pk;
	int rc = check_msg(m);

	if (rc)
		return rc;
	msgpack_packer_init(&pk, &s, sink_write);
	pack_msg(&pk, m);
	if (s.count > RT_WIRE_MAX_MESSAGE)
		return RT_WIRE_E_TOO_BIG;
	*size = s.count;
	return 0;
}

int rt_wire_encode(struct rt_wire_buf *out, const struct rt_wire_msg *m)
{
	struct sink s = {0};
	msgpack_packer pk;
	size_t size, start = out->len;
	int rc = rt_wire_encoded_size(m, &size);

	if (rc)
		return rc;
	if (rt_wire_buf_reserve(out, size))
		return RT_WIRE_E_NOMEM;
	s.buf = out;
	msgpack_packer_init(&pk, &s, sink_write);
	pack_msg(&pk, m);
	if (s.failed || s.count != size) { /* cannot happen: reserved above */
		out->len = start;
		return RT_WIRE_E_NOMEM;
	}
	return 0;
}

#define WRAP(fn, member, TYPE, ctype)                              \
	int fn(struct rt_wire_buf *out, const ctype *m)            \
	{                                                          \
		struct rt_wire_msg w = {.type = TYPE, .member = *m}; \
		return rt_wire_encode(out, &w);                    \
	}

WRAP(rt_wire_encode_register, reg, RT_WIRE_REGISTER, struct rt_wire_register)
WRAP(rt_wire_encode_trigger, trigger, RT_WIRE_TRIGGER, struct rt_wire_trigger)
WRAP(rt_wire_encode_remote_trigger, remote, RT_WIRE_REMOTE_TRIGGER,
     struct rt_wire_remote_trigger)
WRAP(rt_wire_encode_breadcrumb_reply, reply, RT_WIRE_BREADCRUMB_REPLY,
     struct rt_wire_breadcrumb_reply)
WRAP(rt_wire_encode_slice, slice, RT_WIRE_SLICE, struct rt_wire_slice)
WRAP(rt_wire_encode_ack, ack, RT_WIRE_ACK, struct rt_wire_ack)
WRAP(rt_wire_encode_window_query, wquery, RT_WIRE_WINDOW_QUERY, struct rt_wire_window_query)
WRAP(rt_wire_encode_window_reply, wreply, RT_WIRE_WINDOW_REPLY, struct rt_wire_window_reply)
WRAP(rt_wire_encode_window_release, wrelease, RT_WIRE_WINDOW_RELEASE,
     struct rt_wire_window_release)
WRAP(rt_wire_encode_policy, policy, RT_WIRE_POLICY, struct rt_wire_policy)

int rt_wire_slice_size(const struct rt_wire_slice *m, size_t *size)
{
	struct rt_wire_msg w = {.type = RT_WIRE_SLICE, .slice = *m};
	return rt_wire_encoded_size(&w, size);
}

/* ---- names ---- */

const char *rt_wire_strerror(int err)
{
	switch (err) {
	case RT_WIRE_OK: return "ok";
	case RT_WIRE_E_TRUNCATED: return "message truncated";
	case RT_WIRE_E_TRAILING: return "bytes after the message";
	case RT_WIRE_E_VERSION: return "unsupported wire version";
	case RT_WIRE_E_UNKNOWN_TYPE: return "unknown message type";
	case RT_WIRE_E_EXTRA: return "array has extra elements";
	case RT_WIRE_E_MISSING: return "array is missing elements";
	case RT_WIRE_E_TYPE: return "element of the wrong type or width";
	case RT_WIRE_E_TOO_BIG: return "list, string or message over its limit";
	case RT_WIRE_E_VALUE: return "value outside its field's domain";
	case RT_WIRE_E_NOMEM: return "out of memory";
	case RT_WIRE_E_INVAL: return "invalid argument";
	default: return "unknown wire error";
	}
}

const char *rt_wire_type_name(int type)
{
	switch (type) {
	case RT_WIRE_REGISTER: return "register";
	case RT_WIRE_TRIGGER: return "trigger";
	case RT_WIRE_REMOTE_TRIGGER: return "remote_trigger";
	case RT_WIRE_BREADCRUMB_REPLY: return "breadcrumb_reply";
	case RT_WIRE_SLICE: return "slice";
	case RT_WIRE_ACK: return "ack";
	case RT_WIRE_WINDOW_QUERY: return "window_query";
	case RT_WIRE_WINDOW_REPLY: return "window_reply";
	case RT_WIRE_WINDOW_RELEASE: return "window_release";
	case RT_WIRE_POLICY: return "policy";
	default: return "unknown";
	}
}

uint64_t rt_wire_slice_tick_ns(const struct rt_wire_slice *s, uint64_t tick)
{
	/* Integer arithmetic: through a double, Unix ns (~2^61) round to 256 ns. */
	__int128 delta_ns, unix_ns;
	if (!s->tsc_hz || !tick)
		return 0;
	delta_ns = ((__int128)tick - (__int128)s->tsc_ref_tick) * 1000000000 / (__int128)s->tsc_hz;
	unix_ns = (__int128)s->tsc_ref_unix_ns + delta_ns;
	if (unix_ns < 0)
		return 0;
	return unix_ns > (__int128)UINT64_MAX ? UINT64_MAX : (uint64_t)unix_ns;
}

/* FNV-1a, 64 bits, over one string. */
static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

uint64_t rt_wire_conn_id(int is_client, const char *host_addr, uint64_t host_port,
			 const char *peer_addr, uint64_t peer_port)
{
	char ends[2][96];
	uint64_t h;
	if (!host_port || !peer_port || host_port > 65535 || peer_port > 65535)
		return 0;
	/* ends[0]: the caller's end of the connection, ends[1]: the callee's */
	snprintf(ends[is_client ? 0 : 1], sizeof ends[0], "%.64s:%u", host_addr ? host_addr : "",
		 (unsigned)host_port);
	snprintf(ends[is_client ? 1 : 0], sizeof ends[0], "%.64s:%u", peer_addr ? peer_addr : "",
		 (unsigned)peer_port);
	h = fnv1a(fnv1a(0xcbf29ce484222325ull, ends[0]), ">");
	h = fnv1a(h, ends[1]);
	return h ? h : 1;
}
