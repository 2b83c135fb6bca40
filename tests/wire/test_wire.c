/*
 * wire/: every message round-trips with random and limit values; a table of
 * malformed messages (built by editing the msgpack object tree of valid
 * messages with msgpack-c, plus hand-written bytes) each gets its exact error
 * code; every prefix of a valid message is TRUNCATED; and random bytes and
 * mutated messages never crash the decoder, while whatever it accepts is also
 * accepted by msgpack-c and re-encodes to bytes that decode to the same struct.
 *
 * The random generator is seeded from RETRACE_TEST_SEED if set (the seed is
 * printed on failure messages), else a fixed seed.
 */
#include <check.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "common/suite.h"
#include "wire.h"

/*
 * Check's ck_assert records every passing assertion (a write to its pipe), so
 * loops that run hundreds of thousands of times only call it on failure.
 */
#define CHECK(cond, ...)                         \
	do {                                     \
		if (!(cond))                     \
			ck_abort_msg(__VA_ARGS__); \
	} while (0)

/* ---- random numbers ---- */

static uint64_t rng_state = 0x5EEDC0FFEE123457ull;
static uint64_t seed_used;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint64_t rnd_below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static void seed_rng(uint64_t salt)
{
	const char *s = getenv("RETRACE_TEST_SEED");
	seed_used = s ? strtoull(s, NULL, 0) : 0x5EEDC0FFEE123457ull;
	rng_state = seed_used ^ (salt * 0x9E3779B97F4A7C15ull);
}

/* Values at the msgpack format boundaries, or random of a random width. */
static uint64_t rnd_u64(void)
{
	static const uint64_t edge[] = {0, 1, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000,
					0xffffffffull, 0x100000000ull, UINT64_MAX};
	switch (rnd_below(3)) {
	case 0: return edge[rnd_below(sizeof edge / sizeof edge[0])];
	case 1: return rnd() >> rnd_below(64);
	default: return rnd();
	}
}

static uint32_t rnd_u32(void)
{
	static const uint32_t edge[] = {0, 1, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000,
					UINT32_MAX};
	switch (rnd_below(3)) {
	case 0: return edge[rnd_below(sizeof edge / sizeof edge[0])];
	case 1: return (uint32_t)rnd() >> rnd_below(32);
	default: return (uint32_t)rnd();
	}
}

static int32_t rnd_i32(void)
{
	static const int32_t edge[] = {0, 1, -1, -32, -33, 127, 128, -128, -129, 255, 256,
				       -32768, -32769, INT32_MAX, INT32_MIN};
	if (rnd_below(2))
		return edge[rnd_below(sizeof edge / sizeof edge[0])];
	return (int32_t)(uint32_t)rnd() >> rnd_below(32);
}

/* ---- owned messages: a struct plus the storage its pointers point into ---- */

#define POOL_BYTES (1u << 20)
static uint8_t *data_pool; /* random bytes that slice buffers point into */

struct owned {
	struct rt_wire_msg m;
	struct rt_wire_trace traces[RT_WIRE_MAX_TRACES];
	uint32_t bc[RT_WIRE_MAX_TRACES * RT_WIRE_MAX_BREADCRUMBS];
	uint64_t seqs[RT_WIRE_MAX_ACK_SEQS];
	struct rt_wire_slice_buffer bufs[RT_WIRE_MAX_SLICE_BUFFERS];
	struct rt_wire_window_candidate cands[RT_WIRE_MAX_WINDOW];
	struct rt_wire_policy_entry pol[RT_WIRE_MAX_POLICY_SITES];
};

static void init_pool(void)
{
	if (data_pool)
		return;
	data_pool = malloc(POOL_BYTES);
	ck_assert_ptr_nonnull(data_pool);
	for (size_t i = 0; i < POOL_BYTES; i += 8) {
		uint64_t v = rnd();
		memcpy(data_pool + i, &v, 8);
	}
}

enum gen_mode { GEN_SMALL, GEN_RANDOM, GEN_MAX };

static uint32_t pick_count(uint32_t min, uint32_t limit, enum gen_mode mode)
{
	switch (mode) {
	case GEN_SMALL: {
		uint32_t n = min + (uint32_t)rnd_below(3);
		return n > limit ? limit : n;
	}
	case GEN_MAX:
		return limit;
	default:
		switch (rnd_below(4)) {
		case 0: return min;
		case 1: return limit;
		default: return min + (uint32_t)rnd_below(limit - min + 1);
		}
	}
}

static void rnd_str(char *dst, enum gen_mode mode)
{
	size_t n;
	if (mode == GEN_MAX)
		n = RT_WIRE_MAX_STR;
	else if (mode == GEN_SMALL)
		n = rnd_below(24);
	else
		n = rnd_below(2) ? rnd_below(RT_WIRE_MAX_STR + 1)
				 : (rnd_below(2) ? 0 : RT_WIRE_MAX_STR);
	for (size_t i = 0; i < n; i++)
		dst[i] = (char)(1 + rnd_below(255)); /* any byte but NUL */
	dst[n] = 0;
}

static void gen_traces(struct owned *o, int type, uint32_t n, enum gen_mode mode,
		       const struct rt_wire_trace **traces, uint32_t *count)
{
	size_t used = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct rt_wire_trace *t = &o->traces[i];
		memset(t, 0, sizeof *t);
		t->trace_hi = rnd_u64();
		t->trace_lo = rnd_u64();
		if (type == RT_WIRE_BREADCRUMB_REPLY) {
			t->buffers = rnd_u32();
			t->bytes = rnd_u64();
			t->open = rnd_u32();
		}
		if (type != RT_WIRE_REMOTE_TRIGGER) {
			uint32_t nb = pick_count(0, RT_WIRE_MAX_BREADCRUMBS, mode);
			if (mode == GEN_RANDOM && rnd_below(2))
				nb = (uint32_t)rnd_below(5);
			t->breadcrumb_count = nb;
			t->breadcrumbs = o->bc + used;
			for (uint32_t j = 0; j < nb; j++)
				o->bc[used++] = rnd_u32();
		}
	}
	*traces = o->traces;
	*count = n;
}

/*
 * A random message of `type`. GEN_RANDOM keeps slices small enough that
 * thousands of them stay cheap; GEN_MAX puts every list and string at its limit
 * (slices: 65536 buffers of up to 4 bytes).
 */
static void gen_msg(struct owned *o, int type, enum gen_mode mode)
{
	struct rt_wire_msg *m = &o->m;

	memset(m, 0, sizeof *m);
	m->type = type;
	switch (type) {
	case RT_WIRE_REGISTER:
		m->reg.agent_id = rnd_u32();
		rnd_str(m->reg.host, mode);
		m->reg.pid = rnd_u32();
		m->reg.start_unix_ns = rnd_u64();
		rnd_str(m->reg.control_addr, mode);
		m->reg.buffer_size = rnd_u32();
		m->reg.buffer_count = rnd_u32();
		m->reg.tsc_hz = rnd_u64();
		m->reg.tsc_ref_tick = rnd_u64();
		m->reg.tsc_ref_unix_ns = rnd_u64();
		break;
	case RT_WIRE_TRIGGER:
		m->trigger.agent_id = rnd_u32();
		m->trigger.trigger_seq = rnd_u64();
		m->trigger.trigger_id = rnd_u32();
		m->trigger.fired_unix_ns = rnd_u64();
		gen_traces(o, type, pick_count(1, RT_WIRE_MAX_TRACES, mode), mode,
			   &m->trigger.traces, &m->trigger.trace_count);
		break;
	case RT_WIRE_REMOTE_TRIGGER:
		m->remote.request_id = rnd_u64();
		m->remote.trigger_id = rnd_u32();
		gen_traces(o, type, pick_count(1, RT_WIRE_MAX_TRACES, mode), mode,
			   &m->remote.traces, &m->remote.trace_count);
		if (rnd_below(2)) /* the optional member id (a sharded group's coordinator) */
			snprintf(m->remote.member, sizeof m->remote.member, "c%u", rnd_u32() % 100);
		break;
	case RT_WIRE_BREADCRUMB_REPLY:
		m->reply.request_id = rnd_u64();
		m->reply.agent_id = rnd_u32();
		gen_traces(o, type, pick_count(0, RT_WIRE_MAX_TRACES, mode), mode,
			   &m->reply.traces, &m->reply.trace_count);
		break;
	case RT_WIRE_SLICE: {
		struct rt_wire_slice *s = &m->slice;
		uint32_t n;
		s->agent_id = rnd_u32();
		s->slice_seq = rnd_u64();
		s->trigger_id = rnd_u32();
		s->trace_hi = rnd_u64();
		s->trace_lo = rnd_u64();
		s->tsc_hz = rnd_u64();
		s->tsc_ref_tick = rnd_u64();
		s->tsc_ref_unix_ns = rnd_u64();
		n = mode == GEN_MAX ? RT_WIRE_MAX_SLICE_BUFFERS
				    : pick_count(0, mode == GEN_SMALL ? 3 : 64, mode);
		for (uint32_t i = 0; i < n; i++) {
			struct rt_wire_slice_buffer *b = &o->bufs[i];
			uint32_t len;
			b->pid = rnd_u32();
			b->tid = rnd_u32();
			b->seq = rnd_u32();
			b->flags = rnd_u32();
			b->first_tick = rnd_u64();
			if (mode == GEN_MAX)
				len = (uint32_t)rnd_below(5);
			else if (mode == GEN_SMALL)
				len = (uint32_t)rnd_below(40);
			else /* cross the bin8 / bin16 / bin32 boundaries */
				len = (uint32_t)(rnd_below(2) ? rnd_below(300) : rnd_below(70000));
			b->len = len;
			b->data = len ? data_pool + rnd_below(POOL_BYTES - len + 1) : NULL;
		}
		s->buffer_count = n;
		s->buffers = n ? o->bufs : NULL;
		/* half without the optional 12th element, half with it */
		s->rate_exp = rnd_below(2) ? 0 : (uint32_t)rnd_below(RT_WIRE_MAX_RATE_EXP + 1);
		break;
	}
	case RT_WIRE_ACK: {
		uint32_t n = pick_count(0, RT_WIRE_MAX_ACK_SEQS, mode);
		m->ack.status = rnd_i32();
		for (uint32_t i = 0; i < n; i++)
			o->seqs[i] = rnd_u64();
		m->ack.seq_count = n;
		m->ack.seqs = n ? o->seqs : NULL;
		break;
	}
	case RT_WIRE_WINDOW_QUERY: {
		struct rt_wire_window_query *q = &m->wquery;
		uint64_t a = rnd_u64(), b = rnd_u64();
		q->request_id = rnd_u64();
		rnd_str(q->service, mode);
		if (!q->service[0])
			q->service[0] = 's', q->service[1] = 0; /* not empty (the domain) */
		q->kind = (uint32_t)rnd_below(2);
		if (q->kind == RT_WIRE_WINDOW_CLIENTS) {
			rnd_str(q->peer, mode);
			if (!q->peer[0])
				q->peer[0] = 'p', q->peer[1] = 0;
		} else {
			q->peer[0] = 0;
		}
		q->t0_unix_ns = a < b ? a : b;
		q->t1_unix_ns = a < b ? b : a;
		q->max = mode == GEN_MAX ? RT_WIRE_MAX_WINDOW : 1 + (uint32_t)rnd_below(RT_WIRE_MAX_WINDOW);
		q->hold_ms = (uint32_t)rnd_below(RT_WIRE_MAX_HOLD_MS + 1);
		break;
	}
	case RT_WIRE_WINDOW_REPLY: {
		uint32_t n = pick_count(0, RT_WIRE_MAX_WINDOW, mode);
		m->wreply.request_id = rnd_u64();
		m->wreply.agent_id = rnd_u32();
		for (uint32_t i = 0; i < n; i++)
			o->cands[i] = (struct rt_wire_window_candidate){
				rnd_u64(), rnd_u64(), rnd_u64(), rnd_u64(), rnd_u64(), rnd_u64()};
		m->wreply.candidate_count = n;
		m->wreply.candidates = n ? o->cands : NULL;
		m->wreply.truncated = rnd_u32();
		break;
	}
	case RT_WIRE_WINDOW_RELEASE:
		m->wrelease.request_id = rnd_u64();
		break;
	case RT_WIRE_POLICY: {
		uint32_t n = mode == GEN_MAX ? RT_WIRE_MAX_POLICY_SITES
					     : pick_count(0, mode == GEN_SMALL ? 3 : 64, mode);
		m->policy.generation = rnd_u64();
		for (uint32_t i = 0; i < n; i++) {
			uint64_t site = rnd_u64();
			o->pol[i].site = site ? site : 1;
			o->pol[i].p16 = (uint16_t)rnd_u32();
		}
		m->policy.entry_count = n;
		m->policy.entries = n ? o->pol : NULL;
		break;
	}
	}
}

/* ---- field-by-field equality ---- */

#define NEQ(what)                                              \
	do {                                                   \
		snprintf(why, whylen, "%s differs", what);     \
		return 0;                                      \
	} while (0)

static int traces_eq(int type, const struct rt_wire_trace *a, const struct rt_wire_trace *b,
		     uint32_t n, char *why, size_t whylen)
{
	for (uint32_t i = 0; i < n; i++) {
		if (a[i].trace_hi != b[i].trace_hi || a[i].trace_lo != b[i].trace_lo)
			NEQ("trace id");
		if (type == RT_WIRE_BREADCRUMB_REPLY &&
		    (a[i].buffers != b[i].buffers || a[i].bytes != b[i].bytes ||
		     a[i].open != b[i].open))
			NEQ("trace buffers/bytes/open");
		if (type == RT_WIRE_REMOTE_TRIGGER)
			continue;
		if (a[i].breadcrumb_count != b[i].breadcrumb_count)
			NEQ("breadcrumb_count");
		for (uint32_t j = 0; j < a[i].breadcrumb_count; j++)
			if (a[i].breadcrumbs[j] != b[i].breadcrumbs[j])
				NEQ("breadcrumb");
	}
	return 1;
}

static int msg_eq(const struct rt_wire_msg *a, const struct rt_wire_msg *b, char *why,
		  size_t whylen)
{
	if (a->type != b->type)
		NEQ("type");
	switch (a->type) {
	case RT_WIRE_REGISTER: {
		const struct rt_wire_register *x = &a->reg, *y = &b->reg;
		if (x->agent_id != y->agent_id || x->pid != y->pid ||
		    x->start_unix_ns != y->start_unix_ns || x->buffer_size != y->buffer_size ||
		    x->buffer_count != y->buffer_count || x->tsc_hz != y->tsc_hz ||
		    x->tsc_ref_tick != y->tsc_ref_tick || x->tsc_ref_unix_ns != y->tsc_ref_unix_ns)
			NEQ("register scalar");
		if (strcmp(x->host, y->host) || strcmp(x->control_addr, y->control_addr))
			NEQ("register string");
		return 1;
	}
	case RT_WIRE_TRIGGER: {
		const struct rt_wire_trigger *x = &a->trigger, *y = &b->trigger;
		if (x->agent_id != y->agent_id || x->trigger_seq != y->trigger_seq ||
		    x->trigger_id != y->trigger_id || x->fired_unix_ns != y->fired_unix_ns)
			NEQ("trigger scalar");
		if (x->trace_count != y->trace_count)
			NEQ("trace_count");
		return traces_eq(a->type, x->traces, y->traces, x->trace_count, why, whylen);
	}
	case RT_WIRE_REMOTE_TRIGGER: {
		const struct rt_wire_remote_trigger *x = &a->remote, *y = &b->remote;
		if (x->request_id != y->request_id || x->trigger_id != y->trigger_id)
			NEQ("remote scalar");
		if (strcmp(x->member, y->member))
			NEQ("remote member");
		if (x->trace_count != y->trace_count)
			NEQ("trace_count");
		return traces_eq(a->type, x->traces, y->traces, x->trace_count, why, whylen);
	}
	case RT_WIRE_BREADCRUMB_REPLY: {
		const struct rt_wire_breadcrumb_reply *x = &a->reply, *y = &b->reply;
		if (x->request_id != y->request_id || x->agent_id != y->agent_id)
			NEQ("reply scalar");
		if (x->trace_count != y->trace_count)
			NEQ("trace_count");
		return traces_eq(a->type, x->traces, y->traces, x->trace_count, why, whylen);
	}
	case RT_WIRE_SLICE: {
		const struct rt_wire_slice *x = &a->slice, *y = &b->slice;
		if (x->agent_id != y->agent_id || x->slice_seq != y->slice_seq ||
		    x->trigger_id != y->trigger_id || x->trace_hi != y->trace_hi ||
		    x->trace_lo != y->trace_lo || x->tsc_hz != y->tsc_hz ||
		    x->tsc_ref_tick != y->tsc_ref_tick || x->tsc_ref_unix_ns != y->tsc_ref_unix_ns ||
		    x->rate_exp != y->rate_exp)
			NEQ("slice scalar");
		if (x->buffer_count != y->buffer_count)
			NEQ("buffer_count");
		for (uint32_t i = 0; i < x->buffer_count; i++) {
			const struct rt_wire_slice_buffer *p = &x->buffers[i], *q = &y->buffers[i];
			if (p->pid != q->pid || p->tid != q->tid || p->seq != q->seq ||
			    p->flags != q->flags || p->first_tick != q->first_tick)
				NEQ("slice buffer scalar");
			if (p->len != q->len || (p->len && memcmp(p->data, q->data, p->len)))
				NEQ("slice buffer data");
		}
		return 1;
	}
	case RT_WIRE_ACK:
		if (a->ack.status != b->ack.status)
			NEQ("ack status");
		if (a->ack.seq_count != b->ack.seq_count)
			NEQ("seq_count");
		for (uint32_t i = 0; i < a->ack.seq_count; i++)
			if (a->ack.seqs[i] != b->ack.seqs[i])
				NEQ("seq");
		return 1;
	case RT_WIRE_WINDOW_QUERY: {
		const struct rt_wire_window_query *x = &a->wquery, *y = &b->wquery;
		if (x->request_id != y->request_id || x->t0_unix_ns != y->t0_unix_ns ||
		    x->t1_unix_ns != y->t1_unix_ns || x->max != y->max || x->hold_ms != y->hold_ms ||
		    x->kind != y->kind)
			NEQ("window query scalar");
		if (strcmp(x->service, y->service) || strcmp(x->peer, y->peer))
			NEQ("window query service");
		return 1;
	}
	case RT_WIRE_WINDOW_REPLY: {
		const struct rt_wire_window_reply *x = &a->wreply, *y = &b->wreply;
		if (x->request_id != y->request_id || x->agent_id != y->agent_id ||
		    x->truncated != y->truncated)
			NEQ("window reply scalar");
		if (x->candidate_count != y->candidate_count)
			NEQ("candidate_count");
		for (uint32_t i = 0; i < x->candidate_count; i++)
			if (memcmp(&x->candidates[i], &y->candidates[i], sizeof x->candidates[i]))
				NEQ("candidate");
		return 1;
	}
	case RT_WIRE_WINDOW_RELEASE:
		if (a->wrelease.request_id != b->wrelease.request_id)
			NEQ("release request_id");
		return 1;
	case RT_WIRE_POLICY:
		if (a->policy.generation != b->policy.generation)
			NEQ("policy generation");
		if (a->policy.entry_count != b->policy.entry_count)
			NEQ("entry_count");
		for (uint32_t i = 0; i < a->policy.entry_count; i++)
			if (a->policy.entries[i].site != b->policy.entries[i].site ||
			    a->policy.entries[i].p16 != b->policy.entries[i].p16)
				NEQ("policy entry");
		return 1;
	}
	NEQ("unknown type");
}

/* msgpack-c agrees that this is exactly one well-formed object, an array. */
static int msgpack_c_accepts(const void *p, size_t len)
{
	msgpack_unpacked u;
	size_t off = 0;
	int ok;
	msgpack_unpacked_init(&u);
	ok = msgpack_unpack_next(&u, p, len, &off) == MSGPACK_UNPACK_SUCCESS && off == len &&
	     u.data.type == MSGPACK_OBJECT_ARRAY;
	msgpack_unpacked_destroy(&u);
	return ok;
}

/*
 * Encode m, check the size function, decode, compare, re-encode, compare
 * bytes. Leaves the encoding in *buf.
 */
static void round_trip(const struct rt_wire_msg *m, struct rt_wire_buf *buf)
{
	struct rt_wire_msg d;
	struct rt_wire_buf again = {0};
	char why[96];
	size_t size;

	buf->len = 0;
	ck_assert_int_eq(rt_wire_encoded_size(m, &size), 0);
	ck_assert_int_eq(rt_wire_encode(buf, m), 0);
	ck_assert_uint_eq(size, buf->len);
	ck_assert_int_eq(rt_wire_peek_type(buf->data, buf->len), m->type);
	ck_assert_int_eq(rt_wire_decode(buf->data, buf->len, &d), 0);
	ck_assert_msg(msg_eq(m, &d, why, sizeof why), "%s: %s (seed %" PRIu64 ")",
		      rt_wire_type_name(m->type), why, seed_used);
	if (m->type == RT_WIRE_SLICE) /* zero-copy: data points into the input */
		for (uint32_t i = 0; i < d.slice.buffer_count; i++) {
			const uint8_t *p = d.slice.buffers[i].data;
			if (d.slice.buffers[i].len)
				CHECK(p >= buf->data && p + d.slice.buffers[i].len <=
								buf->data + buf->len,
				      "slice data not inside the input");
		}
	ck_assert_int_eq(rt_wire_encode(&again, &d), 0);
	ck_assert_uint_eq(again.len, buf->len);
	ck_assert_mem_eq(again.data, buf->data, buf->len);
	rt_wire_msg_free(&d);
	ck_assert_int_eq(d.type, 0);
	rt_wire_buf_free(&again);
}

/*
 * Prefixes [0, len) of a valid message are all TRUNCATED: every one of the
 * first `dense` and the last 32, every `stride`-th one in between (wider for
 * long messages).
 */
static unsigned check_prefixes(const uint8_t *p, size_t len, size_t dense, size_t stride)
{
	struct rt_wire_msg d;
	unsigned n = 0;
	if (stride < len / 128) /* at most ~128 samples in between */
		stride = len / 128;
	for (size_t k = 0; k < len; k += (k < dense || k + 32 >= len ? 1 : stride)) {
		int rc = rt_wire_decode(p, k, &d);
		CHECK(rc == RT_WIRE_E_TRUNCATED, "prefix %zu of %zu: %d (%s)", k, len, rc,
			      rt_wire_strerror(rc));
		n++;
	}
	return n;
}

/* ---- tests ---- */

START_TEST(test_round_trip_random)
{
	struct owned *o = malloc(sizeof *o);
	struct rt_wire_buf buf = {0};
	unsigned count = 0, prefixes = 0;

	seed_rng(1);
	init_pool();
	for (int type = 1; type <= RT_WIRE_TYPE_MAX; type++) {
		for (int i = 0; i < 300; i++) {
			enum gen_mode mode = i < 100 ? GEN_SMALL : GEN_RANDOM;
			gen_msg(o, type, mode);
			round_trip(&o->m, &buf);
			count++;
			/* every byte offset of messages up to 2 KiB, sampled past that */
			prefixes += check_prefixes(buf.data, buf.len, 2048, 61);
		}
		/* Every list and string at its limit. */
		gen_msg(o, type, GEN_MAX);
		round_trip(&o->m, &buf);
		prefixes += check_prefixes(buf.data, buf.len, 512, 997);
		count++;
	}
	printf("wire: %u round trips, %u truncated prefixes\n", count, prefixes);
	rt_wire_buf_free(&buf);
	free(o);
}
END_TEST

/* Values at every msgpack width boundary, one message per boundary. */
START_TEST(test_round_trip_boundaries)
{
	static const uint64_t v64[] = {0, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000,
				       0xffffffffull, 0x100000000ull, UINT64_MAX};
	static const int32_t vi[] = {0, -1, -32, -33, -128, -129, -32768, -32769, 127, 128,
				     INT32_MIN, INT32_MAX};
	struct rt_wire_buf buf = {0};
	struct rt_wire_trace t = {0};
	uint32_t bc[1];
	uint64_t seq[1];

	for (size_t i = 0; i < sizeof v64 / sizeof v64[0]; i++) {
		uint32_t v32 = v64[i] > UINT32_MAX ? UINT32_MAX : (uint32_t)v64[i];
		struct rt_wire_msg m = {.type = RT_WIRE_TRIGGER};
		bc[0] = v32;
		t.trace_hi = t.trace_lo = v64[i];
		t.breadcrumb_count = 1;
		t.breadcrumbs = bc;
		m.trigger.agent_id = m.trigger.trigger_id = v32;
		m.trigger.trigger_seq = m.trigger.fired_unix_ns = v64[i];
		m.trigger.trace_count = 1;
		m.trigger.traces = &t;
		round_trip(&m, &buf);
		m = (struct rt_wire_msg){.type = RT_WIRE_ACK};
		seq[0] = v64[i];
		m.ack.seq_count = 1;
		m.ack.seqs = seq;
		round_trip(&m, &buf);
	}
	for (size_t i = 0; i < sizeof vi / sizeof vi[0]; i++) {
		struct rt_wire_msg m = {.type = RT_WIRE_ACK};
		m.ack.status = vi[i];
		round_trip(&m, &buf);
	}
	/* Empty lists where allowed, empty strings. */
	{
		struct rt_wire_msg m = {.type = RT_WIRE_BREADCRUMB_REPLY};
		round_trip(&m, &buf);
		m = (struct rt_wire_msg){.type = RT_WIRE_SLICE};
		round_trip(&m, &buf);
		m = (struct rt_wire_msg){.type = RT_WIRE_REGISTER};
		round_trip(&m, &buf);
		m = (struct rt_wire_msg){.type = RT_WIRE_ACK};
		round_trip(&m, &buf);
		ck_assert_uint_eq(buf.len, 5); /* [1, 6, 0, []] */
		ck_assert_mem_eq(buf.data, "\x94\x01\x06\x00\x90", 5);
	}
	rt_wire_buf_free(&buf);
}
END_TEST

/* A multi-megabyte slice, and a slice exactly at RT_WIRE_MAX_MESSAGE. */
START_TEST(test_slice_large)
{
	struct rt_wire_slice_buffer b[3] = {{0}};
	struct rt_wire_slice s = {.agent_id = 7, .slice_seq = 9, .trace_lo = 42};
	struct rt_wire_msg m = {.type = RT_WIRE_SLICE}, d;
	struct rt_wire_buf buf = {0};
	size_t size, size0, cap;
	uint8_t *big = malloc(RT_WIRE_MAX_MESSAGE);

	ck_assert_ptr_nonnull(big);
	for (size_t i = 0; i < RT_WIRE_MAX_MESSAGE; i++)
		big[i] = (uint8_t)(i * 131u + (i >> 13));
	b[0] = (struct rt_wire_slice_buffer){.pid = 1, .tid = 2, .seq = 0, .data = big,
					     .len = 3u << 20};
	b[1] = (struct rt_wire_slice_buffer){.pid = 1, .tid = 2, .seq = 1,
					     .data = big + (3u << 20), .len = 5u << 20};
	b[2] = (struct rt_wire_slice_buffer){.pid = 1, .tid = 3, .seq = 0, .data = big, .len = 0};
	s.buffers = b;
	s.buffer_count = 3;
	m.slice = s;
	ck_assert_int_eq(rt_wire_slice_size(&s, &size), 0);
	/* One reservation: the buffer is exactly the message (starting empty). */
	ck_assert_int_eq(rt_wire_encode_slice(&buf, &s), 0);
	ck_assert_uint_eq(buf.len, size);
	cap = buf.cap;
	ck_assert_uint_ge(cap, size);
	ck_assert_uint_lt(cap, 2 * size);
	round_trip(&m, &buf);
	ck_assert_uint_eq(buf.cap, cap);

	/* One buffer sized so the message is exactly the limit, then one byte more. */
	b[0].data = NULL;
	b[0].len = 0;
	s.buffer_count = 1;
	ck_assert_int_eq(rt_wire_slice_size(&s, &size0), 0);
	b[0].data = big;
	b[0].len = (uint32_t)(RT_WIRE_MAX_MESSAGE - size0 - 3); /* bin8 -> bin32 header */
	ck_assert_int_eq(rt_wire_slice_size(&s, &size), 0);
	ck_assert_uint_eq(size, RT_WIRE_MAX_MESSAGE);
	buf.len = 0;
	ck_assert_int_eq(rt_wire_encode_slice(&buf, &s), 0);
	ck_assert_uint_eq(buf.len, RT_WIRE_MAX_MESSAGE);
	ck_assert_int_eq(rt_wire_decode(buf.data, buf.len, &d), 0);
	ck_assert_uint_eq(d.slice.buffers[0].len, b[0].len);
	ck_assert(d.slice.buffers[0].data == buf.data + buf.len - b[0].len);
	ck_assert_mem_eq(d.slice.buffers[0].data, big, b[0].len);
	rt_wire_msg_free(&d);
	b[0].len++;
	ck_assert_int_eq(rt_wire_slice_size(&s, &size), RT_WIRE_E_TOO_BIG);
	buf.len = 5;
	ck_assert_int_eq(rt_wire_encode_slice(&buf, &s), RT_WIRE_E_TOO_BIG);
	ck_assert_uint_eq(buf.len, 5);
	/* Input over the limit is refused before it is read. */
	{
		uint8_t *over = calloc(1, RT_WIRE_MAX_MESSAGE + 1u);
		ck_assert_ptr_nonnull(over);
		ck_assert_int_eq(rt_wire_decode(over, RT_WIRE_MAX_MESSAGE + 1u, &d),
				 RT_WIRE_E_TOO_BIG);
		ck_assert_int_eq(rt_wire_peek_type(over, RT_WIRE_MAX_MESSAGE + 1u),
				 RT_WIRE_E_TOO_BIG);
		free(over);
	}
	rt_wire_buf_free(&buf);
	free(big);
}
END_TEST

/*
 * The optional 12th SLICE element, rate_exp: absent means 0 (and the encoder
 * leaves it out for 0, so an 11-element reader keeps reading rate-1 slices);
 * 1..63 travel as the 12th element; a bad value in it is refused, whole.
 */
START_TEST(test_slice_rate_exp)
{
	static const uint8_t data[3] = {1, 2, 3};
	struct rt_wire_slice_buffer b = {.pid = 4, .tid = 5, .seq = 6, .data = data, .len = 3};
	struct rt_wire_slice s = {.agent_id = 7, .slice_seq = 8, .trace_lo = 9,
				  .buffer_count = 1, .buffers = &b};
	struct rt_wire_buf buf = {0};
	struct rt_wire_msg d;
	size_t size, len11;
	uint8_t *p;

	/* rate 1: the 11-element form, decoded as rate_exp 0 */
	ck_assert_int_eq(rt_wire_encode_slice(&buf, &s), 0);
	ck_assert_uint_eq(buf.data[0], 0x90 | RT_WIRE_ELEMS_SLICE);
	len11 = buf.len;
	ck_assert_int_eq(rt_wire_decode(buf.data, buf.len, &d), 0);
	ck_assert_uint_eq(d.slice.rate_exp, 0);
	ck_assert_uint_eq(d.slice.buffer_count, 1);
	rt_wire_msg_free(&d);

	/* every exponent 1..63: the 12-element form, one more byte (a fixint) */
	for (uint32_t k = 1; k <= RT_WIRE_MAX_RATE_EXP; k++) {
		s.rate_exp = k;
		buf.len = 0;
		ck_assert_int_eq(rt_wire_encode_slice(&buf, &s), 0);
		ck_assert_int_eq(rt_wire_slice_size(&s, &size), 0);
		ck_assert_uint_eq(size, buf.len);
		ck_assert_uint_eq(buf.data[0], 0x90 | RT_WIRE_ELEMS_SLICE_MAX);
		ck_assert_uint_eq(buf.len, len11 + 1);
		ck_assert_uint_eq(buf.data[buf.len - 1], k);
		ck_assert_int_eq(rt_wire_peek_type(buf.data, buf.len), RT_WIRE_SLICE);
		ck_assert_int_eq(rt_wire_decode(buf.data, buf.len, &d), 0);
		ck_assert_uint_eq(d.slice.rate_exp, k);
		ck_assert_uint_eq(d.slice.slice_seq, 8);
		ck_assert_uint_eq(d.slice.buffer_count, 1);
		ck_assert_mem_eq(d.slice.buffers[0].data, data, 3);
		rt_wire_msg_free(&d);
	}

	/* the encoder refuses what the decoder would, and leaves the output alone */
	s.rate_exp = RT_WIRE_MAX_RATE_EXP + 1;
	buf.len = 0;
	ck_assert_int_eq(rt_wire_encode_slice(&buf, &s), RT_WIRE_E_VALUE);
	ck_assert_uint_eq(buf.len, 0);
	ck_assert_int_eq(rt_wire_slice_size(&s, &size), RT_WIRE_E_VALUE);

	/* hand-made 12th elements, on the 63 form's bytes */
	s.rate_exp = 63;
	buf.len = 0;
	ck_assert_int_eq(rt_wire_encode_slice(&buf, &s), 0);
	p = malloc(buf.len + 9);
	memcpy(p, buf.data, buf.len - 1);
#define LAST(bytes, n, want)                                                          \
	do {                                                                          \
		memcpy(p + buf.len - 1, bytes, n);                                    \
		ck_assert_int_eq(rt_wire_decode(p, buf.len - 1 + (n), &d), want);     \
		if ((want) == 0)                                                      \
			ck_assert_uint_eq(d.slice.rate_exp, 63);                      \
		else                                                                  \
			ck_assert_int_eq(d.type, 0);                                  \
		rt_wire_msg_free(&d);                                                 \
	} while (0)
	LAST("\x3f", 1, RT_WIRE_OK);                       /* 63 */
	LAST("\xcc\x3f", 2, RT_WIRE_OK);                   /* 63 as uint8: any width */
	LAST("\xcf\x00\x00\x00\x00\x00\x00\x00\x3f", 9, RT_WIRE_OK);
	LAST("\x40", 1, RT_WIRE_E_VALUE);                  /* 64 */
	LAST("\xcc\xff", 2, RT_WIRE_E_VALUE);              /* 255 */
	LAST("\xce\xff\xff\xff\xff", 5, RT_WIRE_E_VALUE);  /* 2^32 - 1 */
	LAST("\xcf\x00\x00\x00\x01\x00\x00\x00\x00", 9, RT_WIRE_E_TYPE); /* 2^32 */
	LAST("\xff", 1, RT_WIRE_E_TYPE);                   /* -1 */
	LAST("\xc0", 1, RT_WIRE_E_TYPE);                   /* nil */
	LAST("\xc3", 1, RT_WIRE_E_TYPE);                   /* true */
	LAST("\xa1" "1", 2, RT_WIRE_E_TYPE);               /* "1" */
	LAST("\xcc", 1, RT_WIRE_E_TRUNCATED);              /* cut */
#undef LAST
	/* 12 elements declared, the 12th absent; 13 elements */
	p[0] = 0x90 | RT_WIRE_ELEMS_SLICE_MAX;
	ck_assert_int_eq(rt_wire_decode(p, len11, &d), RT_WIRE_E_TRUNCATED);
	p[0] = 0x90 | (RT_WIRE_ELEMS_SLICE_MAX + 1);
	memcpy(p + buf.len - 1, "\x01\x01", 2);
	ck_assert_int_eq(rt_wire_decode(p, buf.len + 1, &d), RT_WIRE_E_EXTRA);
	ck_assert_int_eq(rt_wire_peek_type(p, buf.len + 1), RT_WIRE_E_EXTRA);
	/* 10 elements: still missing */
	p[0] = 0x90 | (RT_WIRE_ELEMS_SLICE - 1);
	ck_assert_int_eq(rt_wire_peek_type(p, buf.len), RT_WIRE_E_MISSING);
	free(p);
	rt_wire_buf_free(&buf);
}
END_TEST

START_TEST(test_encoder_refusals)
{
	struct rt_wire_buf buf = {0};
	struct rt_wire_register r = {0};
	struct rt_wire_trace t[RT_WIRE_MAX_TRACES + 1] = {{0}};
	struct rt_wire_trigger tr = {.traces = t};
	struct rt_wire_remote_trigger rq = {.traces = t};
	struct rt_wire_breadcrumb_reply rp = {.traces = t};
	struct rt_wire_slice_buffer sb = {0};
	struct rt_wire_slice sl = {.buffers = &sb};
	struct rt_wire_ack ack = {0};
	struct rt_wire_msg m = {.type = 0};
	uint64_t seqs[RT_WIRE_MAX_ACK_SEQS + 1] = {0};
	size_t size;

	ck_assert_int_eq(rt_wire_buf_reserve(&buf, 3), 0);
	memcpy(buf.data, "abc", 3);
	buf.len = 3;
#define REFUSE(call, code)                                  \
	do {                                                \
		ck_assert_int_eq((call), (code));           \
		ck_assert_uint_eq(buf.len, 3);              \
		ck_assert_mem_eq(buf.data, "abc", 3);       \
	} while (0)
	memset(r.host, 'h', RT_WIRE_MAX_STR + 1); /* not terminated within the limit */
	REFUSE(rt_wire_encode_register(&buf, &r), RT_WIRE_E_TOO_BIG);
	r.host[RT_WIRE_MAX_STR] = 0;
	memset(r.control_addr, 'c', RT_WIRE_MAX_STR + 1);
	REFUSE(rt_wire_encode_register(&buf, &r), RT_WIRE_E_TOO_BIG);
	r.control_addr[RT_WIRE_MAX_STR] = 0;
	ck_assert_int_eq(rt_wire_encode_register(&buf, &r), 0);
	buf.len = 3;

	tr.trace_count = 0;
	REFUSE(rt_wire_encode_trigger(&buf, &tr), RT_WIRE_E_VALUE);
	tr.trace_count = RT_WIRE_MAX_TRACES + 1;
	REFUSE(rt_wire_encode_trigger(&buf, &tr), RT_WIRE_E_TOO_BIG);
	tr.trace_count = 1;
	t[0].breadcrumb_count = RT_WIRE_MAX_BREADCRUMBS + 1;
	REFUSE(rt_wire_encode_trigger(&buf, &tr), RT_WIRE_E_TOO_BIG);
	REFUSE(rt_wire_encode_breadcrumb_reply(&buf, &(struct rt_wire_breadcrumb_reply){
		.traces = t, .trace_count = 1}), RT_WIRE_E_TOO_BIG);
	t[0].breadcrumb_count = 1; /* breadcrumbs NULL */
	REFUSE(rt_wire_encode_trigger(&buf, &tr), RT_WIRE_E_INVAL);
	tr.traces = NULL;
	REFUSE(rt_wire_encode_trigger(&buf, &tr), RT_WIRE_E_INVAL);
	/* A remote trigger ignores breadcrumbs (they do not travel). */
	rq.trace_count = 1;
	ck_assert_int_eq(rt_wire_encode_remote_trigger(&buf, &rq), 0);
	buf.len = 3;
	rq.trace_count = 0;
	REFUSE(rt_wire_encode_remote_trigger(&buf, &rq), RT_WIRE_E_VALUE);
	rq.trace_count = RT_WIRE_MAX_TRACES + 1;
	REFUSE(rt_wire_encode_remote_trigger(&buf, &rq), RT_WIRE_E_TOO_BIG);
	rp.trace_count = RT_WIRE_MAX_TRACES + 1;
	REFUSE(rt_wire_encode_breadcrumb_reply(&buf, &rp), RT_WIRE_E_TOO_BIG);

	sl.buffer_count = RT_WIRE_MAX_SLICE_BUFFERS + 1; /* checked before any is read */
	REFUSE(rt_wire_encode_slice(&buf, &sl), RT_WIRE_E_TOO_BIG);
	REFUSE(rt_wire_slice_size(&sl, &size), RT_WIRE_E_TOO_BIG);
	sl.buffer_count = 1;
	sb.len = 1; /* data NULL */
	REFUSE(rt_wire_encode_slice(&buf, &sl), RT_WIRE_E_INVAL);
	sb.data = "x";
	sb.len = RT_WIRE_MAX_BIN + 1u; /* refused on the length alone */
	REFUSE(rt_wire_encode_slice(&buf, &sl), RT_WIRE_E_TOO_BIG);
	sl.buffers = NULL;
	REFUSE(rt_wire_encode_slice(&buf, &sl), RT_WIRE_E_INVAL);

	ack.seq_count = RT_WIRE_MAX_ACK_SEQS + 1;
	ack.seqs = seqs;
	REFUSE(rt_wire_encode_ack(&buf, &ack), RT_WIRE_E_TOO_BIG);
	ack.seq_count = RT_WIRE_MAX_ACK_SEQS;
	ck_assert_int_eq(rt_wire_encode_ack(&buf, &ack), 0); /* appended after "abc" */
	ck_assert_int_eq(rt_wire_peek_type(buf.data + 3, buf.len - 3), RT_WIRE_ACK);
	buf.len = 3;
	ack.seqs = NULL;
	REFUSE(rt_wire_encode_ack(&buf, &ack), RT_WIRE_E_INVAL);

	{
		struct rt_wire_policy_entry pe[2] = {{5, 100}, {0, 1}};
		struct rt_wire_policy pol = {.generation = 1, .entry_count = 2, .entries = pe};
		REFUSE(rt_wire_encode_policy(&buf, &pol), RT_WIRE_E_VALUE); /* site 0 */
		pol.entry_count = RT_WIRE_MAX_POLICY_SITES + 1;
		REFUSE(rt_wire_encode_policy(&buf, &pol), RT_WIRE_E_TOO_BIG);
		pol.entry_count = 1;
		pol.entries = NULL;
		REFUSE(rt_wire_encode_policy(&buf, &pol), RT_WIRE_E_INVAL);
		pol.entries = pe;
		ck_assert_int_eq(rt_wire_encode_policy(&buf, &pol), 0);
		buf.len = 3;
	}

	REFUSE(rt_wire_encode(&buf, &m), RT_WIRE_E_UNKNOWN_TYPE);
	m.type = RT_WIRE_TYPE_MAX + 1;
	REFUSE(rt_wire_encode(&buf, &m), RT_WIRE_E_UNKNOWN_TYPE);
#undef REFUSE
	rt_wire_buf_free(&buf);

	/* Names exist for every code and type. */
	for (int e = RT_WIRE_E_INVAL; e <= RT_WIRE_E_TRUNCATED; e++)
		ck_assert_str_ne(rt_wire_strerror(e), "unknown wire error");
	ck_assert_str_eq(rt_wire_strerror(RT_WIRE_OK), "ok");
	ck_assert_str_eq(rt_wire_strerror(-1), "unknown wire error");
	for (int ty = 1; ty <= RT_WIRE_TYPE_MAX; ty++)
		ck_assert_str_ne(rt_wire_type_name(ty), "unknown");
}
END_TEST

/* ---- the malformed table, part 1: hand-written bytes ---- */

struct raw_case {
	const char *what;
	const char *bytes;
	size_t len;
	int want;
};

#define RAW(what, lit, want) {what, lit, sizeof(lit) - 1, want}

static const struct raw_case raw_cases[] = {
	RAW("empty input", "", RT_WIRE_E_TRUNCATED),
	RAW("positive int at top", "\x01", RT_WIRE_E_TYPE),
	RAW("map at top", "\x80", RT_WIRE_E_TYPE),
	RAW("str at top", "\xa1x", RT_WIRE_E_TYPE),
	RAW("nil at top", "\xc0", RT_WIRE_E_TYPE),
	RAW("reserved 0xc1 at top", "\xc1", RT_WIRE_E_TYPE),
	RAW("array16 header cut", "\xdc\x00", RT_WIRE_E_TRUNCATED),
	RAW("array32 header cut", "\xdd\x00\x00\x00", RT_WIRE_E_TRUNCATED),
	RAW("empty array", "\x90", RT_WIRE_E_MISSING),
	RAW("only a version", "\x91\x01", RT_WIRE_E_MISSING),
	RAW("version cut", "\x92", RT_WIRE_E_TRUNCATED),
	RAW("version 2", "\x94\x02\x06\x00\x90", RT_WIRE_E_VERSION),
	RAW("version 0", "\x94\x00\x06\x00\x90", RT_WIRE_E_VERSION),
	RAW("version 2^64-1", "\x94\xcf\xff\xff\xff\xff\xff\xff\xff\xff\x06\x00\x90",
	    RT_WIRE_E_VERSION),
	RAW("version 2 in a 1-element array", "\x91\x02", RT_WIRE_E_VERSION),
	RAW("version as str", "\x94\xa1" "1\x06\x00\x90", RT_WIRE_E_TYPE),
	RAW("version negative", "\x94\xff\x06\x00\x90", RT_WIRE_E_TYPE),
	RAW("version as float", "\x94\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00\x06\x00\x90",
	    RT_WIRE_E_TYPE),
	RAW("type 0", "\x94\x01\x00\x00\x90", RT_WIRE_E_UNKNOWN_TYPE),
	RAW("type 11", "\x94\x01\x0b\x00\x90", RT_WIRE_E_UNKNOWN_TYPE),
	RAW("type 12", "\x94\x01\x0c\x00\x90", RT_WIRE_E_UNKNOWN_TYPE),
	RAW("policy: empty", "\x94\x01\x0a\x00\x90", RT_WIRE_OK),
	RAW("policy: one entry", "\x94\x01\x0a\x00\x91\x92\x05\xcd\xff\xff", RT_WIRE_OK),
	RAW("policy: site 0", "\x94\x01\x0a\x00\x91\x92\x00\x01", RT_WIRE_E_VALUE),
	RAW("policy: p16 65536", "\x94\x01\x0a\x00\x91\x92\x05\xce\x00\x01\x00\x00",
	    RT_WIRE_E_TYPE),
	RAW("policy: 3 entries declared, 1 sent", "\x94\x01\x0a\x00\x93\x92\x05\x01",
	    RT_WIRE_E_TRUNCATED),
	RAW("type 2^64-1", "\x94\x01\xcf\xff\xff\xff\xff\xff\xff\xff\xff\x00\x90",
	    RT_WIRE_E_UNKNOWN_TYPE),
	RAW("type as str", "\x94\x01\xa1\x06\x00\x90", RT_WIRE_E_TYPE),
	RAW("type negative", "\x94\x01\xfa\x00\x90", RT_WIRE_E_TYPE),
	RAW("type cut", "\x94\x01", RT_WIRE_E_TRUNCATED),
	RAW("ack: 2 elements", "\x92\x01\x06", RT_WIRE_E_MISSING),
	RAW("ack: 3 elements", "\x93\x01\x06\x00", RT_WIRE_E_MISSING),
	RAW("ack: ok", "\x94\x01\x06\x00\x90", RT_WIRE_OK),
	RAW("ack: trailing byte", "\x94\x01\x06\x00\x90\x00", RT_WIRE_E_TRAILING),
	RAW("ack: trailing message", "\x94\x01\x06\x00\x90\x94\x01\x06\x00\x90",
	    RT_WIRE_E_TRAILING),
	RAW("ack: extra element", "\x95\x01\x06\x00\x90\x00", RT_WIRE_E_EXTRA),
	RAW("ack: 2^32-1 elements", "\xdd\xff\xff\xff\xff\x01\x06", RT_WIRE_E_EXTRA),
	RAW("ack: array16 envelope", "\xdc\x00\x04\x01\x06\x00\x90", RT_WIRE_OK),
	RAW("ack: version as uint64", "\x94\xcf\x00\x00\x00\x00\x00\x00\x00\x01\x06\x00\x90",
	    RT_WIRE_OK),
	RAW("ack: status int8 5", "\x94\x01\x06\xd0\x05\x90", RT_WIRE_OK),
	RAW("ack: status -1", "\x94\x01\x06\xff\x90", RT_WIRE_OK),
	RAW("ack: status INT32_MIN", "\x94\x01\x06\xd2\x80\x00\x00\x00\x90", RT_WIRE_OK),
	RAW("ack: status INT32_MIN-1",
	    "\x94\x01\x06\xd3\xff\xff\xff\xff\x7f\xff\xff\xff\x90", RT_WIRE_E_TYPE),
	RAW("ack: status 2^31", "\x94\x01\x06\xce\x80\x00\x00\x00\x90", RT_WIRE_E_TYPE),
	RAW("ack: status int64 -2", "\x94\x01\x06\xd3\xff\xff\xff\xff\xff\xff\xff\xfe\x90",
	    RT_WIRE_OK),
	RAW("ack: status cut", "\x94\x01\x06\xd2\x80\x00", RT_WIRE_E_TRUNCATED),
	RAW("ack: status bool", "\x94\x01\x06\xc3\x90", RT_WIRE_E_TYPE),
	RAW("ack: seq int8 5", "\x94\x01\x06\x00\x91\xd0\x05", RT_WIRE_OK),
	RAW("ack: seq int64 2^63-1",
	    "\x94\x01\x06\x00\x91\xd3\x7f\xff\xff\xff\xff\xff\xff\xff", RT_WIRE_OK),
	RAW("ack: seq int8 -1", "\x94\x01\x06\x00\x91\xd0\xff", RT_WIRE_E_TYPE),
	RAW("ack: seq int64 -2^63",
	    "\x94\x01\x06\x00\x91\xd3\x80\x00\x00\x00\x00\x00\x00\x00", RT_WIRE_E_TYPE),
	RAW("ack: seq uint64 cut", "\x94\x01\x06\x00\x91\xcf\x01", RT_WIRE_E_TRUNCATED),
	RAW("ack: seq float", "\x94\x01\x06\x00\x91\xca\x00\x00\x00\x00", RT_WIRE_E_TYPE),
	RAW("ack: seq ext", "\x94\x01\x06\x00\x91\xd4\x01\x00", RT_WIRE_E_TYPE),
	RAW("ack: seq 0xc1", "\x94\x01\x06\x00\x91\xc1", RT_WIRE_E_TYPE),
	RAW("ack: seqs array16", "\x94\x01\x06\x00\xdc\x00\x01\x07", RT_WIRE_OK),
	RAW("ack: seqs array32", "\x94\x01\x06\x00\xdd\x00\x00\x00\x01\x07", RT_WIRE_OK),
	RAW("ack: 4096 seqs declared, none there", "\x94\x01\x06\x00\xdc\x10\x00",
	    RT_WIRE_E_TRUNCATED),
	RAW("ack: 4097 seqs", "\x94\x01\x06\x00\xdc\x10\x01", RT_WIRE_E_TOO_BIG),
	RAW("ack: 2^32-1 seqs", "\x94\x01\x06\x00\xdd\xff\xff\xff\xff", RT_WIRE_E_TOO_BIG),
	RAW("ack: seqs as map", "\x94\x01\x06\x00\x80", RT_WIRE_E_TYPE),
	RAW("ack: seqs array16 header cut", "\x94\x01\x06\x00\xdc\x00", RT_WIRE_E_TRUNCATED),
	RAW("ack: seqs nested array", "\x94\x01\x06\x00\x91\x90", RT_WIRE_E_TYPE),
	/* [1,5, agent, seq, trigger, hi, lo, hz, tick, ns, [[pid,tid,seq,flags,tick,bin]]] */
	RAW("slice: bin32 length over 64 MiB",
	    "\x9b\x01\x05\x01\x02\x03\x04\x05\x06\x07\x08\x91\x96\x00\x00\x00\x00\x00"
	    "\xc6\x04\x00\x00\x01", RT_WIRE_E_TOO_BIG),
	RAW("slice: bin32 length 64 MiB, absent",
	    "\x9b\x01\x05\x01\x02\x03\x04\x05\x06\x07\x08\x91\x96\x00\x00\x00\x00\x00"
	    "\xc6\x04\x00\x00\x00", RT_WIRE_E_TRUNCATED),
	RAW("slice: bin8 cut",
	    "\x9b\x01\x05\x01\x02\x03\x04\x05\x06\x07\x08\x91\x96\x00\x00\x00\x00\x00"
	    "\xc4\x03\x61\x62", RT_WIRE_E_TRUNCATED),
	RAW("slice: bin as str",
	    "\x9b\x01\x05\x01\x02\x03\x04\x05\x06\x07\x08\x91\x96\x00\x00\x00\x00\x00"
	    "\xa2\x61\x62", RT_WIRE_E_TYPE),
	RAW("slice: bin16 ok",
	    "\x9b\x01\x05\x01\x02\x03\x04\x05\x06\x07\x08\x91\x96\x00\x00\x00\x00\x00"
	    "\xc5\x00\x02\x61\x62", RT_WIRE_OK),
	RAW("slice: 65536 buffers declared, one there",
	    "\x9b\x01\x05\x01\x02\x03\x04\x05\x06\x07\x08\xdd\x00\x01\x00\x00"
	    "\x96\x00\x00\x00\x00\x00\xc4\x00", RT_WIRE_E_TRUNCATED),
	RAW("slice: 65537 buffers",
	    "\x9b\x01\x05\x01\x02\x03\x04\x05\x06\x07\x08\xdd\x00\x01\x00\x01",
	    RT_WIRE_E_TOO_BIG),
	RAW("slice: second buffer of wrong width",
	    "\x9b\x01\x05\x01\x02\x03\x04\x05\x06\x07\x08\x92\x96\x00\x00\x00\x00\x00\xc4\x00"
	    "\x96\x00\x00\x00\xcf\x00\x00\x00\x01\x00\x00\x00\x00\x00\xc4\x00",
	    RT_WIRE_E_TYPE),
	/* [1,1, agent, "host", pid, ns, "addr", ...] */
	RAW("register: str8 of 255 bytes declared, absent",
	    "\x9c\x01\x01\x00\xd9\xff", RT_WIRE_E_TRUNCATED),
	RAW("register: str16 of 256 bytes declared",
	    "\x9c\x01\x01\x00\xda\x01\x00", RT_WIRE_E_TOO_BIG),
	RAW("register: str32 of 2^32-1 bytes declared",
	    "\x9c\x01\x01\x00\xdb\xff\xff\xff\xff", RT_WIRE_E_TOO_BIG),
	RAW("register: host str8 cut", "\x9c\x01\x01\x00\xd9", RT_WIRE_E_TRUNCATED),
	RAW("register: host as bin", "\x9c\x01\x01\x00\xc4\x01h", RT_WIRE_E_TYPE),
	RAW("register: host with NUL", "\x9c\x01\x01\x00\xa3h\x00t", RT_WIRE_E_VALUE),
	RAW("register: agent_id 2^32", "\x9c\x01\x01\xcf\x00\x00\x00\x01\x00\x00\x00\x00",
	    RT_WIRE_E_TYPE),
	RAW("register: agent_id int64 2^32",
	    "\x9c\x01\x01\xd3\x00\x00\x00\x01\x00\x00\x00\x00", RT_WIRE_E_TYPE),
	/* [1,2, agent, seq, trigger, fired, traces] */
	RAW("trigger: no traces", "\x97\x01\x02\x00\x00\x00\x00\x90", RT_WIRE_E_VALUE),
	RAW("trigger: 65 traces", "\x97\x01\x02\x00\x00\x00\x00\xdc\x00\x41", RT_WIRE_E_TOO_BIG),
	RAW("trigger: one trace, ok", "\x97\x01\x02\x00\x00\x00\x00\x91\x93\x00\x00\x90",
	    RT_WIRE_OK),
	RAW("trigger: trace of 2", "\x97\x01\x02\x00\x00\x00\x00\x91\x92\x00\x00",
	    RT_WIRE_E_MISSING),
	RAW("trigger: trace of 4", "\x97\x01\x02\x00\x00\x00\x00\x91\x94\x00\x00\x90\x00",
	    RT_WIRE_E_EXTRA),
	RAW("trigger: trace of 2^32-1",
	    "\x97\x01\x02\x00\x00\x00\x00\x91\xdd\xff\xff\xff\xff", RT_WIRE_E_EXTRA),
	RAW("trigger: trace as map", "\x97\x01\x02\x00\x00\x00\x00\x91\x81\x00\x00",
	    RT_WIRE_E_TYPE),
	RAW("trigger: 257 breadcrumbs",
	    "\x97\x01\x02\x00\x00\x00\x00\x91\x93\x00\x00\xdc\x01\x01", RT_WIRE_E_TOO_BIG),
	RAW("trigger: 256 breadcrumbs declared, none there",
	    "\x97\x01\x02\x00\x00\x00\x00\x91\x93\x00\x00\xdc\x01\x00", RT_WIRE_E_TRUNCATED),
	RAW("trigger: breadcrumb -1",
	    "\x97\x01\x02\x00\x00\x00\x00\x91\x93\x00\x00\x91\xff", RT_WIRE_E_TYPE),
	RAW("trigger: 64 traces declared, 1 there",
	    "\x97\x01\x02\x00\x00\x00\x00\xdc\x00\x40\x93\x00\x00\x90", RT_WIRE_E_TRUNCATED),
	RAW("trigger: trailing after traces",
	    "\x97\x01\x02\x00\x00\x00\x00\x91\x93\x00\x00\x90\xc0", RT_WIRE_E_TRAILING),
	/* [1,3, request, trigger, [[hi, lo]]] */
	RAW("remote: trace with breadcrumbs",
	    "\x95\x01\x03\x00\x00\x91\x93\x00\x00\x90", RT_WIRE_E_EXTRA),
	RAW("remote: ok", "\x95\x01\x03\x00\x00\x91\x92\x00\x00", RT_WIRE_OK),
	RAW("remote: no traces", "\x95\x01\x03\x00\x00\x90", RT_WIRE_E_VALUE),
	/* [1,4, request, agent, [[hi, lo, buffers, bytes, open, bcs]]] */
	RAW("reply: no traces, ok", "\x95\x01\x04\x00\x00\x90", RT_WIRE_OK),
	RAW("reply: trace without bytes",
	    "\x95\x01\x04\x00\x00\x91\x94\x00\x00\x00\x90", RT_WIRE_E_MISSING),
	RAW("reply: trace without open",
	    "\x95\x01\x04\x00\x00\x91\x95\x00\x00\x00\x00\x90", RT_WIRE_E_MISSING),
	RAW("reply: buffers 2^32",
	    "\x95\x01\x04\x00\x00\x91\x96\x00\x00\xcf\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x90",
	    RT_WIRE_E_TYPE),
	RAW("reply: open 2^32",
	    "\x95\x01\x04\x00\x00\x91\x96\x00\x00\x00\x00\xcf\x00\x00\x00\x01\x00\x00\x00\x00\x90",
	    RT_WIRE_E_TYPE),
};

START_TEST(test_malformed_raw)
{
	struct rt_wire_msg d;
	size_t i;

	for (i = 0; i < sizeof raw_cases / sizeof raw_cases[0]; i++) {
		const struct raw_case *c = &raw_cases[i];
		int rc = rt_wire_decode(c->bytes, c->len, &d);
		ck_assert_msg(rc == c->want, "%s: got %d (%s), want %d (%s)", c->what, rc,
			      rt_wire_strerror(rc), c->want, rt_wire_strerror(c->want));
		if (rc == 0) {
			/* accepted: re-encodes canonically to the same struct */
			struct rt_wire_buf b = {0};
			struct rt_wire_msg d2;
			char why[96];
			ck_assert_int_eq(rt_wire_encode(&b, &d), 0);
			ck_assert_int_eq(rt_wire_decode(b.data, b.len, &d2), 0);
			ck_assert_msg(msg_eq(&d, &d2, why, sizeof why), "%s: %s", c->what, why);
			rt_wire_msg_free(&d2);
			rt_wire_buf_free(&b);
		} else {
			ck_assert_int_eq(d.type, 0);
			ck_assert_ptr_null(d.mem);
		}
		rt_wire_msg_free(&d);
	}
	/* NULL input */
	ck_assert_int_eq(rt_wire_decode(NULL, 0, &d), RT_WIRE_E_TRUNCATED);
	ck_assert_int_eq(rt_wire_decode(NULL, 5, &d), RT_WIRE_E_INVAL);
	/* peek_type reads the envelope only */
	ck_assert_int_eq(rt_wire_peek_type("\x94\x01\x06\x00\x90", 5), RT_WIRE_ACK);
	ck_assert_int_eq(rt_wire_peek_type("\x94\x01\x06\xc1", 4), RT_WIRE_ACK);
	ck_assert_int_eq(rt_wire_peek_type("\x94\x01\x0b", 3), RT_WIRE_E_UNKNOWN_TYPE);
	ck_assert_int_eq(rt_wire_peek_type("\x94\x02\x06", 3), RT_WIRE_E_VERSION);
	ck_assert_int_eq(rt_wire_peek_type("\x93\x01\x06", 3), RT_WIRE_E_MISSING);
	ck_assert_int_eq(rt_wire_peek_type("\x94\x01", 2), RT_WIRE_E_TRUNCATED);
	ck_assert_int_eq(rt_wire_peek_type("", 0), RT_WIRE_E_TRUNCATED);
	printf("wire: %zu hand-written malformed cases\n", i);
}
END_TEST

/* ---- the malformed table, part 2: every field of every message, edited ---- */

enum kind { K_U32, K_U64, K_I32, K_STR, K_BIN, K_LIST, K_TUPLE, K_U16, K_SITE };

struct node {
	enum kind k;
	const char *name;
	uint32_t limit;         /* K_LIST: max elements */
	uint32_t min;           /* K_LIST: min elements */
	const struct node *sub; /* K_LIST: the element; K_TUPLE: the fields */
	uint32_t nsub;          /* K_TUPLE */
	int dom;                /* K_U32/K_U64/K_STR with a value domain (test_window_domain):
				 * only kind and width edits here, no in-range values */
};

#define U32(n) {.k = K_U32, .name = n}
#define U64(n) {.k = K_U64, .name = n}
#define STR(n) {.k = K_STR, .name = n}
#define U32D(n) {.k = K_U32, .name = n, .dom = 1}
#define U64D(n) {.k = K_U64, .name = n, .dom = 1}
#define STRD(n) {.k = K_STR, .name = n, .dom = 1}

static const struct node n_bc = U32("breadcrumb");
static const struct node n_seq = U64("seq");
static const struct node f_trig_trace[] = {
	U64("trace_hi"), U64("trace_lo"),
	{.k = K_LIST, .name = "breadcrumbs", .limit = 256, .sub = &n_bc}};
static const struct node f_remote_trace[] = {U64("trace_hi"), U64("trace_lo")};
static const struct node f_reply_trace[] = {
	U64("trace_hi"), U64("trace_lo"), U32("buffers"), U64("bytes"), U32("open"),
	{.k = K_LIST, .name = "breadcrumbs", .limit = 256, .sub = &n_bc}};
static const struct node f_buffer[] = {U32("pid"), U32("tid"), U32("seq"), U32("flags"),
				       U64("first_tick"), {.k = K_BIN, .name = "data"}};
static const struct node n_trig_trace = {.k = K_TUPLE, .name = "trace", .sub = f_trig_trace,
					 .nsub = 3};
static const struct node n_remote_trace = {.k = K_TUPLE, .name = "trace",
					   .sub = f_remote_trace, .nsub = 2};
static const struct node n_reply_trace = {.k = K_TUPLE, .name = "trace",
					  .sub = f_reply_trace, .nsub = 6};
static const struct node n_buffer = {.k = K_TUPLE, .name = "buffer", .sub = f_buffer,
				     .nsub = 6};

static const struct node f_register[] = {
	U32("agent_id"), STR("host"), U32("pid"), U64("start_unix_ns"), STR("control_addr"),
	U32("buffer_size"), U32("buffer_count"), U64("tsc_hz"), U64("tsc_ref_tick"),
	U64("tsc_ref_unix_ns")};
static const struct node f_trigger[] = {
	U32("agent_id"), U64("trigger_seq"), U32("trigger_id"), U64("fired_unix_ns"),
	{.k = K_LIST, .name = "traces", .limit = 64, .min = 1, .sub = &n_trig_trace}};
static const struct node f_remote[] = {
	U64("request_id"), U32("trigger_id"),
	{.k = K_LIST, .name = "traces", .limit = 64, .min = 1, .sub = &n_remote_trace}};
static const struct node f_reply[] = {
	U64("request_id"), U32("agent_id"),
	{.k = K_LIST, .name = "traces", .limit = 64, .sub = &n_reply_trace}};
static const struct node f_slice[] = {
	U32("agent_id"), U64("slice_seq"), U32("trigger_id"), U64("trace_hi"), U64("trace_lo"),
	U64("tsc_hz"), U64("tsc_ref_tick"), U64("tsc_ref_unix_ns"),
	{.k = K_LIST, .name = "buffers", .limit = 65536, .sub = &n_buffer}};
static const struct node f_policy_entry[] = {{.k = K_SITE, .name = "site"},
					     {.k = K_U16, .name = "p16"}};
static const struct node n_policy_entry = {.k = K_TUPLE, .name = "entry",
					   .sub = f_policy_entry, .nsub = 2};
static const struct node f_policy[] = {
	U64("generation"),
	{.k = K_LIST, .name = "entries", .limit = 65536, .sub = &n_policy_entry}};
static const struct node f_ack[] = {
	{.k = K_I32, .name = "status"},
	{.k = K_LIST, .name = "seqs", .limit = 4096, .sub = &n_seq}};

static const struct node f_cand[] = {U64("trace_hi"), U64("trace_lo"), U64("span_id"),
				     U64("start_unix_ns"), U64("end_unix_ns"), U64("conn")};
static const struct node n_cand = {.k = K_TUPLE, .name = "candidate", .sub = f_cand,
				   .nsub = 6};
static const struct node f_wquery[] = {U64("request_id"), U32D("kind"), STRD("service"),
				       STRD("peer"), U64D("t0_unix_ns"), U64D("t1_unix_ns"),
				       U32D("max"), U32D("hold_ms")};
static const struct node f_wreply[] = {
	U64("request_id"), U32("agent_id"),
	{.k = K_LIST, .name = "candidates", .limit = RT_WIRE_MAX_WINDOW, .sub = &n_cand},
	U32("truncated")};
static const struct node f_wrelease[] = {U64("request_id")};

static const struct {
	const struct node *f;
	uint32_t n;
} schema[RT_WIRE_TYPE_MAX + 1] = {
	[RT_WIRE_WINDOW_QUERY] = {f_wquery, 8},      [RT_WIRE_WINDOW_REPLY] = {f_wreply, 4},
	[RT_WIRE_WINDOW_RELEASE] = {f_wrelease, 1},
	[RT_WIRE_REGISTER] = {f_register, 10},       [RT_WIRE_TRIGGER] = {f_trigger, 5},
	[RT_WIRE_REMOTE_TRIGGER] = {f_remote, 3},    [RT_WIRE_BREADCRUMB_REPLY] = {f_reply, 3},
	[RT_WIRE_SLICE] = {f_slice, 9},              [RT_WIRE_ACK] = {f_ack, 2},
	[RT_WIRE_POLICY] = {f_policy, 2},
};

struct table {
	msgpack_object *root;
	int type;
	char path[160];
	unsigned cases;
	msgpack_sbuffer sb;
};

static void expect(struct table *t, int want, const char *edit)
{
	msgpack_packer pk;
	struct rt_wire_msg d;
	int rc;

	msgpack_sbuffer_clear(&t->sb);
	msgpack_packer_init(&pk, &t->sb, msgpack_sbuffer_write);
	ck_assert_int_eq(msgpack_pack_object(&pk, *t->root), 0);
	rc = rt_wire_decode(t->sb.data, t->sb.size, &d);
	ck_assert_msg(rc == want, "%s.%s %s: got %d (%s), want %d (%s)",
		      rt_wire_type_name(t->type), t->path, edit, rc, rt_wire_strerror(rc), want,
		      rt_wire_strerror(want));
	rt_wire_msg_free(&d);
	t->cases++;
}

/* Put `sub` in place of *o, check, restore. */
static void swap_expect(struct table *t, msgpack_object *o, msgpack_object sub, int want,
			const char *edit)
{
	msgpack_object saved = *o;
	*o = sub;
	expect(t, want, edit);
	*o = saved;
}

static msgpack_object obj_u64(uint64_t v)
{
	msgpack_object o = {.type = MSGPACK_OBJECT_POSITIVE_INTEGER};
	o.via.u64 = v;
	return o;
}

static msgpack_object obj_i64(int64_t v)
{
	msgpack_object o = {.type = MSGPACK_OBJECT_NEGATIVE_INTEGER};
	o.via.i64 = v;
	return o;
}

static msgpack_object obj_raw(msgpack_object_type ty, const char *p, uint32_t n)
{
	msgpack_object o = {.type = ty};
	if (ty == MSGPACK_OBJECT_STR) {
		o.via.str.ptr = p;
		o.via.str.size = n;
	} else {
		o.via.bin.ptr = p;
		o.via.bin.size = n;
	}
	return o;
}

/* Objects of other kinds than the one a field wants. */
static void wrong_kinds(struct table *t, msgpack_object *o, int not_int, int not_str,
			int not_bin, int not_array)
{
	static const char s1[] = "1";
	msgpack_object x = {.type = MSGPACK_OBJECT_NIL};
	swap_expect(t, o, x, RT_WIRE_E_TYPE, "as nil");
	x.type = MSGPACK_OBJECT_BOOLEAN;
	x.via.boolean = true;
	swap_expect(t, o, x, RT_WIRE_E_TYPE, "as true");
	x.type = MSGPACK_OBJECT_FLOAT64;
	x.via.f64 = 1.0;
	swap_expect(t, o, x, RT_WIRE_E_TYPE, "as float64");
	x.type = MSGPACK_OBJECT_FLOAT32;
	swap_expect(t, o, x, RT_WIRE_E_TYPE, "as float32");
	x.type = MSGPACK_OBJECT_MAP;
	x.via.map.size = 0;
	x.via.map.ptr = NULL;
	swap_expect(t, o, x, RT_WIRE_E_TYPE, "as empty map");
	x.type = MSGPACK_OBJECT_EXT;
	x.via.ext.type = 1;
	x.via.ext.size = 1;
	x.via.ext.ptr = s1;
	swap_expect(t, o, x, RT_WIRE_E_TYPE, "as ext");
	if (not_int) {
		swap_expect(t, o, obj_u64(1), RT_WIRE_E_TYPE, "as int 1");
		swap_expect(t, o, obj_i64(-1), RT_WIRE_E_TYPE, "as int -1");
	}
	if (not_str)
		swap_expect(t, o, obj_raw(MSGPACK_OBJECT_STR, s1, 1), RT_WIRE_E_TYPE,
			    "as str \"1\"");
	if (not_bin)
		swap_expect(t, o, obj_raw(MSGPACK_OBJECT_BIN, s1, 1), RT_WIRE_E_TYPE,
			    "as bin");
	if (not_array) {
		x.type = MSGPACK_OBJECT_ARRAY;
		x.via.array.size = 0;
		x.via.array.ptr = NULL;
		swap_expect(t, o, x, RT_WIRE_E_TYPE, "as empty array");
	}
}

/* Tuple edits: one element more (a 0; `extra_want` is what that decodes to), one less. */
static void tuple_edits(struct table *t, msgpack_object *o, int extra_want)
{
	msgpack_object_array saved = o->via.array;
	msgpack_object *more = malloc((saved.size + 1) * sizeof *more);

	memcpy(more, saved.ptr, saved.size * sizeof *more);
	more[saved.size] = obj_u64(0);
	o->via.array.ptr = more;
	o->via.array.size = saved.size + 1;
	expect(t, extra_want, "with an extra element");
	o->via.array = saved;
	o->via.array.size = saved.size - 1;
	expect(t, RT_WIRE_E_MISSING, "without its last element");
	o->via.array.size = 0;
	expect(t, RT_WIRE_E_MISSING, "empty");
	o->via.array = saved;
	free(more);
}

static void walk(struct table *t, msgpack_object *o, const struct node *n);

static void walk_fields(struct table *t, msgpack_object *arr, uint32_t first,
			const struct node *f, uint32_t nf)
{
	size_t plen = strlen(t->path);
	ck_assert_uint_eq(arr->via.array.size, first + nf);
	for (uint32_t i = 0; i < nf; i++) {
		snprintf(t->path + plen, sizeof t->path - plen, "%s%s", plen ? "." : "",
			 f[i].name);
		walk(t, &arr->via.array.ptr[first + i], &f[i]);
	}
	t->path[plen] = 0;
}

static void walk(struct table *t, msgpack_object *o, const struct node *n)
{
	static char big[RT_WIRE_MAX_STR + 1];
	memset(big, 'a', sizeof big);

	switch (n->k) {
	case K_U32:
	case K_U64:
		ck_assert(o->type == MSGPACK_OBJECT_POSITIVE_INTEGER);
		wrong_kinds(t, o, 0, 1, 1, 1);
		swap_expect(t, o, obj_i64(-1), RT_WIRE_E_TYPE, "as -1");
		swap_expect(t, o, obj_i64(INT64_MIN), RT_WIRE_E_TYPE, "as INT64_MIN");
		if (n->dom) {
			if (n->k == K_U32)
				swap_expect(t, o, obj_u64(1ull << 32), RT_WIRE_E_TYPE, "as 2^32");
			break;
		}
		swap_expect(t, o, obj_u64(0), RT_WIRE_OK, "as 0");
		if (n->k == K_U32) {
			swap_expect(t, o, obj_u64(UINT32_MAX), RT_WIRE_OK, "as 2^32-1");
			swap_expect(t, o, obj_u64(1ull << 32), RT_WIRE_E_TYPE, "as 2^32");
			swap_expect(t, o, obj_u64(UINT64_MAX), RT_WIRE_E_TYPE, "as 2^64-1");
		} else {
			swap_expect(t, o, obj_u64(UINT64_MAX), RT_WIRE_OK, "as 2^64-1");
		}
		break;
	case K_U16:
		ck_assert(o->type == MSGPACK_OBJECT_POSITIVE_INTEGER);
		wrong_kinds(t, o, 0, 1, 1, 1);
		swap_expect(t, o, obj_i64(-1), RT_WIRE_E_TYPE, "as -1");
		swap_expect(t, o, obj_u64(0), RT_WIRE_OK, "as 0");
		swap_expect(t, o, obj_u64(0xFFFF), RT_WIRE_OK, "as 65535");
		swap_expect(t, o, obj_u64(0x10000), RT_WIRE_E_TYPE, "as 65536");
		break;
	case K_SITE: /* a u64 that is never 0 */
		ck_assert(o->type == MSGPACK_OBJECT_POSITIVE_INTEGER);
		wrong_kinds(t, o, 0, 1, 1, 1);
		swap_expect(t, o, obj_i64(-1), RT_WIRE_E_TYPE, "as -1");
		swap_expect(t, o, obj_u64(0), RT_WIRE_E_VALUE, "as 0");
		swap_expect(t, o, obj_u64(UINT64_MAX), RT_WIRE_OK, "as 2^64-1");
		break;
	case K_I32:
		wrong_kinds(t, o, 0, 1, 1, 1);
		swap_expect(t, o, obj_i64(-1), RT_WIRE_OK, "as -1");
		swap_expect(t, o, obj_i64(INT32_MIN), RT_WIRE_OK, "as INT32_MIN");
		swap_expect(t, o, obj_u64(INT32_MAX), RT_WIRE_OK, "as INT32_MAX");
		swap_expect(t, o, obj_i64((int64_t)INT32_MIN - 1), RT_WIRE_E_TYPE,
			    "as INT32_MIN-1");
		swap_expect(t, o, obj_u64((uint64_t)INT32_MAX + 1), RT_WIRE_E_TYPE,
			    "as INT32_MAX+1");
		swap_expect(t, o, obj_u64(UINT64_MAX), RT_WIRE_E_TYPE, "as 2^64-1");
		break;
	case K_STR:
		ck_assert(o->type == MSGPACK_OBJECT_STR);
		wrong_kinds(t, o, 1, 0, 1, 1);
		swap_expect(t, o, obj_raw(MSGPACK_OBJECT_BIN, o->via.str.ptr, o->via.str.size),
			    RT_WIRE_E_TYPE, "as bin with the same bytes");
		swap_expect(t, o, obj_raw(MSGPACK_OBJECT_STR, big, 0),
			    n->dom ? RT_WIRE_E_VALUE : RT_WIRE_OK, "empty");
		swap_expect(t, o, obj_raw(MSGPACK_OBJECT_STR, big, RT_WIRE_MAX_STR), RT_WIRE_OK,
			    "of 255 bytes");
		swap_expect(t, o, obj_raw(MSGPACK_OBJECT_STR, big, RT_WIRE_MAX_STR + 1),
			    RT_WIRE_E_TOO_BIG, "of 256 bytes");
		swap_expect(t, o, obj_raw(MSGPACK_OBJECT_STR, "a\0b", 3), RT_WIRE_E_VALUE,
			    "with a NUL");
		break;
	case K_BIN:
		ck_assert(o->type == MSGPACK_OBJECT_BIN);
		wrong_kinds(t, o, 1, 1, 0, 1);
		swap_expect(t, o, obj_raw(MSGPACK_OBJECT_STR, o->via.bin.ptr, o->via.bin.size),
			    RT_WIRE_E_TYPE, "as str with the same bytes");
		swap_expect(t, o, obj_raw(MSGPACK_OBJECT_BIN, big, 0), RT_WIRE_OK, "empty");
		break;
	case K_LIST: {
		msgpack_object_array saved;
		msgpack_object *many;
		ck_assert(o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size >= 1);
		saved = o->via.array;
		wrong_kinds(t, o, 1, 1, 1, 0);
		/* limit and limit + 1 copies of the first element */
		many = malloc(((size_t)n->limit + 1) * sizeof *many);
		for (uint32_t i = 0; i <= n->limit; i++)
			many[i] = saved.ptr[0];
		o->via.array.ptr = many;
		o->via.array.size = n->limit;
		expect(t, RT_WIRE_OK, "at its limit");
		o->via.array.size = n->limit + 1;
		expect(t, RT_WIRE_E_TOO_BIG, "over its limit");
		o->via.array.size = 0;
		expect(t, n->min ? RT_WIRE_E_VALUE : RT_WIRE_OK, "empty");
		o->via.array = saved;
		free(many);
		/* each element: the schema of the element */
		for (uint32_t i = 0; i < saved.size; i++)
			walk(t, &saved.ptr[i], n->sub);
		break;
	}
	case K_TUPLE:
		ck_assert(o->type == MSGPACK_OBJECT_ARRAY);
		wrong_kinds(t, o, 1, 1, 1, 0);
		tuple_edits(t, o, RT_WIRE_E_EXTRA);
		walk_fields(t, o, 0, n->sub, n->nsub);
		break;
	}
}

/* A small valid message with every list non-empty, to edit. */
static void base_msg(struct owned *o, int type)
{
	do
		gen_msg(o, type, GEN_SMALL);
	while ((type == RT_WIRE_TRIGGER && (o->m.trigger.trace_count != 2 ||
					    !o->m.trigger.traces[0].breadcrumb_count ||
					    !o->m.trigger.traces[1].breadcrumb_count)) ||
	       (type == RT_WIRE_REMOTE_TRIGGER && o->m.remote.trace_count != 2) ||
	       (type == RT_WIRE_BREADCRUMB_REPLY && (o->m.reply.trace_count != 2 ||
						     !o->m.reply.traces[0].breadcrumb_count ||
						     !o->m.reply.traces[1].breadcrumb_count)) ||
	       (type == RT_WIRE_SLICE && (o->m.slice.buffer_count != 2 ||
					  !o->m.slice.buffers[0].len)) ||
	       (type == RT_WIRE_ACK && o->m.ack.seq_count != 2) ||
	       (type == RT_WIRE_WINDOW_REPLY && o->m.wreply.candidate_count != 2) ||
	       /* CLIENTS: both strings must not be empty, which the table checks */
	       (type == RT_WIRE_WINDOW_QUERY && o->m.wquery.kind != RT_WIRE_WINDOW_CLIENTS) ||
	       (type == RT_WIRE_POLICY && o->m.policy.entry_count != 2));
	if (type == RT_WIRE_SLICE)
		o->m.slice.rate_exp = 0; /* the 11-element form; the 12th: test_slice_rate_exp */
	if (type == RT_WIRE_REMOTE_TRIGGER)
		o->m.remote.member[0] = 0; /* the 5-element form; the 6th is a string */
}

START_TEST(test_malformed_table)
{
	struct owned *o = malloc(sizeof *o);
	struct rt_wire_buf buf = {0};
	unsigned total = 0;

	seed_rng(2);
	init_pool();
	for (int type = 1; type <= RT_WIRE_TYPE_MAX; type++) {
		struct table t = {.type = type};
		msgpack_unpacked u;
		size_t off = 0;

		base_msg(o, type);
		round_trip(&o->m, &buf);
		msgpack_unpacked_init(&u);
		ck_assert_int_eq(msgpack_unpack_next(&u, (const char *)buf.data, buf.len, &off),
				 MSGPACK_UNPACK_SUCCESS);
		msgpack_sbuffer_init(&t.sb);
		t.root = &u.data;
		/* the message itself, as msgpack-c re-packs it, is valid */
		expect(&t, RT_WIRE_OK, "unchanged");
		/* An optional last element: SLICE's rate_exp takes the 0; REMOTE_TRIGGER's
		 * member must be a string. */
		tuple_edits(&t, t.root, type == RT_WIRE_SLICE		  ? RT_WIRE_OK
					: type == RT_WIRE_REMOTE_TRIGGER ? RT_WIRE_E_TYPE
									  : RT_WIRE_E_EXTRA);
		/* version and type: wrong values and kinds */
		snprintf(t.path, sizeof t.path, "version");
		swap_expect(&t, &t.root->via.array.ptr[0], obj_u64(2), RT_WIRE_E_VERSION, "2");
		swap_expect(&t, &t.root->via.array.ptr[0], obj_u64(0), RT_WIRE_E_VERSION, "0");
		wrong_kinds(&t, &t.root->via.array.ptr[0], 0, 1, 1, 1);
		snprintf(t.path, sizeof t.path, "type");
		swap_expect(&t, &t.root->via.array.ptr[1], obj_u64(0), RT_WIRE_E_UNKNOWN_TYPE,
			    "0");
		swap_expect(&t, &t.root->via.array.ptr[1], obj_u64(RT_WIRE_TYPE_MAX + 1),
			    RT_WIRE_E_UNKNOWN_TYPE, "max+1");
		/* another known type with this one's element count */
		for (int other = 1; other <= RT_WIRE_TYPE_MAX; other++)
			if (other == RT_WIRE_SLICE && schema[type].n + 2 == RT_WIRE_ELEMS_SLICE_MAX)
				/* a count a SLICE may have (with rate_exp): its fields are
				 * read, and REGISTER's host string is no slice_seq */
				swap_expect(&t, &t.root->via.array.ptr[1], obj_u64((uint64_t)other),
					    RT_WIRE_E_TYPE, "of another message");
			else if (schema[other].n != schema[type].n)
				swap_expect(&t, &t.root->via.array.ptr[1], obj_u64((uint64_t)other),
					    schema[other].n < schema[type].n ? RT_WIRE_E_EXTRA
									     : RT_WIRE_E_MISSING,
					    "of another message");
		wrong_kinds(&t, &t.root->via.array.ptr[1], 0, 1, 1, 1);
		t.path[0] = 0;
		walk_fields(&t, t.root, 2, schema[type].f, schema[type].n);
		/* trailing byte after the whole message */
		{
			struct rt_wire_msg d;
			uint8_t *p = malloc(buf.len + 1);
			memcpy(p, buf.data, buf.len);
			p[buf.len] = 0xc0;
			ck_assert_int_eq(rt_wire_decode(p, buf.len + 1, &d), RT_WIRE_E_TRAILING);
			free(p);
			t.cases++;
		}
		total += t.cases;
		msgpack_sbuffer_destroy(&t.sb);
		msgpack_unpacked_destroy(&u);
	}
	printf("wire: %u edited-message cases\n", total);
	rt_wire_buf_free(&buf);
	free(o);
}
END_TEST

/* ---- random inputs ---- */

/* Accepted input: msgpack-c agrees, and it re-encodes to the same struct. */
static void check_accepted(const uint8_t *p, size_t len, const struct rt_wire_msg *d)
{
	struct rt_wire_buf b = {0};
	struct rt_wire_msg d2;
	char why[96];
	int rc;

	CHECK(msgpack_c_accepts(p, len), "accepted what msgpack-c rejects (seed %" PRIu64 ")",
	      seed_used);
	rc = rt_wire_encode(&b, d);
	CHECK(rc == 0, "re-encode failed: %s (seed %" PRIu64 ")", rt_wire_strerror(rc), seed_used);
	rc = rt_wire_decode(b.data, b.len, &d2);
	CHECK(rc == 0, "re-encoded does not decode: %s (seed %" PRIu64 ")", rt_wire_strerror(rc),
	      seed_used);
	CHECK(msg_eq(d, &d2, why, sizeof why), "re-encode: %s (seed %" PRIu64 ")", why, seed_used);
	CHECK(b.len <= len, "re-encoding is longer (seed %" PRIu64 ")", seed_used);
	rt_wire_msg_free(&d2);
	rt_wire_buf_free(&b);
}

static uint8_t interesting_byte(void)
{
	static const uint8_t v[] = {0x00, 0x01, 0x05, 0x06, 0x7f, 0x80, 0x90, 0x91, 0x92, 0x93,
				    0x9f, 0xa0, 0xa3, 0xbf, 0xc0, 0xc1, 0xc2, 0xc4, 0xc5, 0xc6,
				    0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3,
				    0xd9, 0xda, 0xdb, 0xdc, 0xdd, 0xde, 0xe0, 0xff};
	return rnd_below(2) ? v[rnd_below(sizeof v)] : (uint8_t)rnd();
}

/* Fill in[k..len) with msgpack tokens, mostly small ints and short arrays. */
static size_t random_tokens(uint8_t *in, size_t k, size_t len)
{
	while (k < len) {
		uint64_t r = rnd_below(100);
		size_t w = 0;
		if (r < 55) {
			in[k++] = (uint8_t)rnd_below(0x80);
			continue;
		} else if (r < 70) {
			in[k++] = (uint8_t)(0x90 | rnd_below(7));
			continue;
		} else if (r < 80) {
			static const uint8_t hdr[] = {0xcc, 0xcd, 0xce, 0xcf};
			static const size_t wid[] = {1, 2, 4, 8};
			size_t j = rnd_below(4);
			in[k++] = hdr[j];
			w = wid[j];
		} else if (r < 85) {
			w = rnd_below(6);
			in[k++] = (uint8_t)(0xa0 | w);
		} else if (r < 90) {
			w = rnd_below(6);
			in[k++] = 0xc4;
			if (k < len)
				in[k++] = (uint8_t)w;
		} else {
			in[k++] = interesting_byte();
			continue;
		}
		for (; w && k < len; w--)
			in[k++] = (uint8_t)rnd_below(rnd_below(2) ? 0x100 : 4);
	}
	return k;
}

START_TEST(test_random_bytes)
{
	enum { N = 200000, MAXLEN = 64 };
	uint8_t in[MAXLEN];
	unsigned accepted = 0, by_code[16] = {0};
	static const uint8_t elems[RT_WIRE_TYPE_MAX + 1] = {
		0, RT_WIRE_ELEMS_REGISTER, RT_WIRE_ELEMS_TRIGGER, RT_WIRE_ELEMS_REMOTE_TRIGGER,
		RT_WIRE_ELEMS_BREADCRUMB_REPLY, RT_WIRE_ELEMS_SLICE, RT_WIRE_ELEMS_ACK,
		RT_WIRE_ELEMS_WINDOW_QUERY, RT_WIRE_ELEMS_WINDOW_REPLY, RT_WIRE_ELEMS_WINDOW_RELEASE,
		RT_WIRE_ELEMS_POLICY};

	seed_rng(3);
	for (int it = 0; it < N; it++) {
		size_t len = rnd_below(MAXLEN + 1), k = 0;
		struct rt_wire_msg d;
		int rc, pt;
		/* most inputs start with a plausible envelope so they reach the fields */
		if (len >= 3 && rnd_below(4)) {
			int type = 1 + (int)rnd_below(RT_WIRE_TYPE_MAX);
			in[k++] = (uint8_t)(0x90 | elems[type]);
			in[k++] = 0x01;
			in[k++] = (uint8_t)type;
		}
		/* half raw bytes, half a stream of plausible msgpack tokens */
		if (rnd_below(2))
			for (; k < len; k++)
				in[k] = interesting_byte();
		else
			k = random_tokens(in, k, len);
		/* Exactly len bytes in a heap block, so ASan sees any overread. */
		{
			uint8_t *p = malloc(len ? len : 1);
			memcpy(p, in, len);
			rc = rt_wire_decode(p, len, &d);
			CHECK(rc <= 0 && rc > RT_WIRE_E_NOMEM, "code %d (seed %" PRIu64 ")", rc,
			      seed_used);
			pt = rt_wire_peek_type(p, len);
			/* decode checks the same envelope first */
			CHECK(rc == 0 ? pt == d.type : (pt > 0 || pt == rc),
			      "peek %d, decode %d (seed %" PRIu64 ")", pt, rc, seed_used);
			if (rc == 0) {
				accepted++;
				check_accepted(p, len, &d);
				rt_wire_msg_free(&d);
			}
			free(p);
		}
		by_code[-rc % 100]++;
	}
	printf("wire: %d random inputs, %u accepted; truncated %u, type %u, missing %u, "
	       "extra %u, trailing %u, too big %u, value %u\n",
	       N, accepted, by_code[1], by_code[7], by_code[6], by_code[5], by_code[2],
	       by_code[8], by_code[9]);
	ck_assert_uint_gt(accepted, 0);
}
END_TEST

START_TEST(test_mutations)
{
	enum { N = 150000, CORPUS = 60 };
	struct owned *o = malloc(sizeof *o);
	struct rt_wire_buf corpus[CORPUS];
	unsigned accepted = 0, identical = 0;
	size_t cap = 0;
	uint8_t *work = NULL;

	seed_rng(4);
	init_pool();
	for (int i = 0; i < CORPUS; i++) {
		rt_wire_buf_init(&corpus[i]);
		gen_msg(o, 1 + i % RT_WIRE_TYPE_MAX, GEN_SMALL);
		ck_assert_int_eq(rt_wire_encode(&corpus[i], &o->m), 0);
		if (corpus[i].len + 16 > cap)
			cap = corpus[i].len + 16;
	}
	work = malloc(cap);
	for (int it = 0; it < N; it++) {
		const struct rt_wire_buf *src = &corpus[rnd_below(CORPUS)];
		size_t len = src->len;
		int edits = 1 + (int)rnd_below(4), rc;
		struct rt_wire_msg d;
		uint8_t *p;

		memcpy(work, src->data, len);
		for (int e = 0; e < edits; e++) {
			size_t at = rnd_below(len + 1);
			switch (rnd_below(6)) {
			case 0: /* bit flip */
				if (len)
					work[at % len] ^= (uint8_t)(1u << rnd_below(8));
				break;
			case 1: /* byte set */
				if (len)
					work[at % len] = interesting_byte();
				break;
			case 2: /* insertion */
				if (len < cap) {
					memmove(work + at + 1, work + at, len - at);
					work[at] = interesting_byte();
					len++;
				}
				break;
			case 3: /* deletion */
				if (at < len) {
					memmove(work + at, work + at + 1, len - at - 1);
					len--;
				}
				break;
			case 4: /* truncation */
				len = at;
				break;
			default: /* small integer nudged */
				if (len)
					work[at % len] += (uint8_t)(rnd_below(2) ? 1 : -1);
				break;
			}
		}
		p = malloc(len ? len : 1);
		memcpy(p, work, len);
		rc = rt_wire_decode(p, len, &d);
		CHECK(rc <= 0 && rc > RT_WIRE_E_NOMEM, "code %d (seed %" PRIu64 ")", rc, seed_used);
		if (rc == 0) {
			accepted++;
			if (len == src->len && !memcmp(p, src->data, len))
				identical++;
			check_accepted(p, len, &d);
			rt_wire_msg_free(&d);
		}
		free(p);
	}
	printf("wire: %d mutated messages, %u accepted (%u unchanged by their edits)\n", N,
	       accepted, identical);
	ck_assert_uint_gt(accepted - identical, 0);
	for (int i = 0; i < CORPUS; i++)
		rt_wire_buf_free(&corpus[i]);
	free(work);
	free(o);
}
END_TEST

/*
 * WINDOW_QUERY's value domain: a non-empty service, t0 <= t1, max in
 * 1..RT_WIRE_MAX_WINDOW, hold_ms <= RT_WIRE_MAX_HOLD_MS. The encoder refuses
 * what the decoder refuses (with VALUE), and the decoder refuses it from bytes
 * the encoder would not write (packed here by hand with msgpack-c).
 */
static int pack_query(msgpack_sbuffer *sb, uint32_t kind, const char *svc, const char *peer,
		      uint64_t t0, uint64_t t1, uint32_t max, uint32_t hold)
{
	msgpack_packer pk;
	struct rt_wire_msg d;
	int rc;
	msgpack_sbuffer_clear(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, RT_WIRE_ELEMS_WINDOW_QUERY);
	msgpack_pack_uint32(&pk, RT_WIRE_VERSION);
	msgpack_pack_uint32(&pk, RT_WIRE_WINDOW_QUERY);
	msgpack_pack_uint64(&pk, 7);
	msgpack_pack_uint32(&pk, kind);
	msgpack_pack_str(&pk, strlen(svc));
	msgpack_pack_str_body(&pk, svc, strlen(svc));
	msgpack_pack_str(&pk, strlen(peer));
	msgpack_pack_str_body(&pk, peer, strlen(peer));
	msgpack_pack_uint64(&pk, t0);
	msgpack_pack_uint64(&pk, t1);
	msgpack_pack_uint32(&pk, max);
	msgpack_pack_uint32(&pk, hold);
	rc = rt_wire_decode(sb->data, sb->size, &d);
	if (rc == 0) {
		ck_assert_int_eq(d.type, RT_WIRE_WINDOW_QUERY);
		ck_assert_str_eq(d.wquery.service, svc);
		ck_assert_uint_eq(d.wquery.t0_unix_ns, t0);
		ck_assert_uint_eq(d.wquery.t1_unix_ns, t1);
	}
	rt_wire_msg_free(&d);
	return rc;
}

START_TEST(test_window_domain)
{
	static const struct {
		uint32_t kind;
		const char *svc, *peer;
		uint64_t t0, t1;
		uint32_t max, hold;
		int want;
	} c[] = {
		{0, "backend", "", 10, 20, 1, 0, RT_WIRE_OK},
		{0, "backend", "", 20, 20, RT_WIRE_MAX_WINDOW, RT_WIRE_MAX_HOLD_MS, RT_WIRE_OK},
		{0, "backend", "", 0, UINT64_MAX, 64, 5000, RT_WIRE_OK},
		{1, "api", "backend", 10, 20, 1, 0, RT_WIRE_OK},
		{0, "", "", 10, 20, 1, 0, RT_WIRE_E_VALUE},
		{0, "backend", "", 21, 20, 1, 0, RT_WIRE_E_VALUE},
		{0, "backend", "", 10, 20, 0, 0, RT_WIRE_E_VALUE},
		{0, "backend", "", 10, 20, RT_WIRE_MAX_WINDOW + 1, 0, RT_WIRE_E_VALUE},
		{0, "backend", "", 10, 20, 1, RT_WIRE_MAX_HOLD_MS + 1, RT_WIRE_E_VALUE},
		{0, "backend", "x", 10, 20, 1, 0, RT_WIRE_E_VALUE}, /* a peer for ROOTS */
		{1, "api", "", 10, 20, 1, 0, RT_WIRE_E_VALUE},      /* CLIENTS without one */
		{2, "api", "backend", 10, 20, 1, 0, RT_WIRE_E_VALUE},
	};
	msgpack_sbuffer sb;
	struct rt_wire_buf buf = {0};
	msgpack_sbuffer_init(&sb);
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		struct rt_wire_window_query q = {.request_id = 7, .kind = c[i].kind,
						 .t0_unix_ns = c[i].t0, .t1_unix_ns = c[i].t1,
						 .max = c[i].max, .hold_ms = c[i].hold};
		snprintf(q.service, sizeof q.service, "%s", c[i].svc);
		snprintf(q.peer, sizeof q.peer, "%s", c[i].peer);
		ck_assert_msg(pack_query(&sb, c[i].kind, c[i].svc, c[i].peer, c[i].t0, c[i].t1,
					 c[i].max, c[i].hold) == c[i].want,
			      "decode case %zu", i);
		buf.len = 0;
		ck_assert_msg(rt_wire_encode_window_query(&buf, &q) == c[i].want, "encode case %zu",
			      i);
		ck_assert_uint_eq(buf.len, c[i].want ? 0 : sb.size);
	}
	/* The connection id: both spans of a call give the same one; another
	 * connection (another port) another; a missing port none. */
	ck_assert_uint_eq(rt_wire_conn_id(1, "127.0.0.1", 40001, "127.0.0.1", 9000),
			  rt_wire_conn_id(0, "127.0.0.1", 9000, "127.0.0.1", 40001));
	ck_assert_uint_ne(rt_wire_conn_id(1, "127.0.0.1", 40001, "127.0.0.1", 9000), 0);
	ck_assert_uint_ne(rt_wire_conn_id(1, "127.0.0.1", 40001, "127.0.0.1", 9000),
			  rt_wire_conn_id(1, "127.0.0.1", 40002, "127.0.0.1", 9000));
	ck_assert_uint_ne(rt_wire_conn_id(1, "127.0.0.1", 40001, "127.0.0.1", 9000),
			  rt_wire_conn_id(0, "127.0.0.1", 40001, "127.0.0.1", 9000));
	ck_assert_uint_eq(rt_wire_conn_id(1, "127.0.0.1", 0, "127.0.0.1", 9000), 0);
	ck_assert_uint_eq(rt_wire_conn_id(0, NULL, 9000, NULL, 70000), 0);
	/* A reply over its limit is refused by the encoder. */
	{
		struct rt_wire_window_candidate one = {1, 2, 3, 4, 5, 6};
		struct rt_wire_window_reply r = {.candidate_count = RT_WIRE_MAX_WINDOW + 1,
						 .candidates = &one};
		buf.len = 0;
		ck_assert_int_eq(rt_wire_encode_window_reply(&buf, &r), RT_WIRE_E_TOO_BIG);
		r.candidate_count = 1;
		r.candidates = NULL;
		ck_assert_int_eq(rt_wire_encode_window_reply(&buf, &r), RT_WIRE_E_INVAL);
	}
	rt_wire_buf_free(&buf);
	msgpack_sbuffer_destroy(&sb);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("wire");
	TCase *tc;

	/* One case per kind of check, so CK_RUN_CASE=<name> runs just that. */
	tc = tcase_create("round_trip");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_round_trip_random);
	tcase_add_test(tc, test_round_trip_boundaries);
	tcase_add_test(tc, test_slice_large);
	tcase_add_test(tc, test_slice_rate_exp);
	suite_add_tcase(s, tc);
	tc = tcase_create("encode");
	tcase_add_test(tc, test_encoder_refusals);
	tcase_add_test(tc, test_window_domain);
	suite_add_tcase(s, tc);
	tc = tcase_create("malformed");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_malformed_raw);
	tcase_add_test(tc, test_malformed_table);
	suite_add_tcase(s, tc);
	tc = tcase_create("random");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_random_bytes);
	tcase_add_test(tc, test_mutations);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
