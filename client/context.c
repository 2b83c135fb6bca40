/*
 * client/context.c — context propagation: W3C Trace Context and a binary form.
 *
 * traceparent is parsed strictly per W3C Trace Context level 1: two lowercase hex
 * digits of version (ff is invalid), then for version 00 exactly
 * "-<32 hex trace id>-<16 hex parent id>-<2 hex flags>" (55 chars); a higher
 * version may append fields after a '-'. All-zero ids are invalid.
 *
 * tracestate is a list of up to 32 key=value members (at most 512 chars); we own
 * the member `rt=HHHHHHHH.HHHHHHHH.F`: the agent ids of the last two hops (newest
 * first, 8 lowercase hex each, 00000000 = none) and the fired-trigger flag (0/1).
 * A malformed tracestate (bad syntax, too long, too many members, a duplicate key,
 * a bad rt value) is discarded as the spec asks, and the traceparent still counts;
 * out->state_rejected says so.
 *
 * Binary form (34 bytes, big-endian ids): version 0 | flags (bit0 sampled,
 * bit1 fired) | trace id (16) | span id (8) | hop0 (4) | hop1 (4).
 *
 * Responses go the other way: "rt=HHHHHHHH.F" (the callee's agent id and fired
 * flag; binary: version 0 | flags bit0 fired | agent id (4)). The caller's side
 * leaves a breadcrumb to the callee's agent and ORs the fired flag into its
 * context. It pushes no trigger: the callee's own trigger already leads the
 * coordinator to the caller (the request named the caller's agent), and later
 * calls carry the fired flag on. A small per-thread list of the callee agents
 * the current writer stream already named keeps a caller that calls one
 * service a hundred times from pushing a hundred breadcrumbs.
 */
#include "client.h"

#include <stdio.h>
#include <string.h>

#define TS_MAX_MEMBERS 32

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1; /* uppercase is not allowed by the spec */
}

/* Parse exactly n lowercase hex digits into *out (n <= 16). */
static int parse_hex(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;
	for (i = 0; i < n; i++) {
		int d = hex_value(s[i]);
		if (d < 0)
			return -1;
		v = (v << 4) | (uint64_t)d;
	}
	*out = v;
	return 0;
}

static int parse_traceparent(const char *tp, struct retrace_wire_context *out)
{
	size_t len = strnlen(tp, RETRACE_TRACESTATE_MAX + 1);
	uint64_t version, flags, span;

	if (len < RETRACE_TRACEPARENT_LEN || len > RETRACE_TRACESTATE_MAX)
		return RETRACE_E_INVAL;
	if (parse_hex(tp, 2, &version) || version == 0xff)
		return RETRACE_E_INVAL;
	if (version == 0 && len != RETRACE_TRACEPARENT_LEN)
		return RETRACE_E_INVAL;
	if (len > RETRACE_TRACEPARENT_LEN && tp[RETRACE_TRACEPARENT_LEN] != '-')
		return RETRACE_E_INVAL;
	if (tp[2] != '-' || tp[35] != '-' || tp[52] != '-')
		return RETRACE_E_INVAL;
	if (parse_hex(tp + 3, 16, &out->trace_id.hi) ||
	    parse_hex(tp + 19, 16, &out->trace_id.lo) ||
	    parse_hex(tp + 36, 16, &span) || parse_hex(tp + 53, 2, &flags))
		return RETRACE_E_INVAL;
	if ((out->trace_id.hi | out->trace_id.lo) == 0 || span == 0)
		return RETRACE_E_INVAL;
	out->parent_span_id = span;
	out->trace_flags = (uint8_t)flags;
	return RETRACE_OK;
}

static int key_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '-' || c == '*' || c == '/' || c == '@';
}

static int value_char(char c)
{
	return c >= 0x20 && c <= 0x7e && c != ',' && c != '=';
}

struct ts_member {
	const char *key, *value;
	size_t key_len, value_len;
};

/* Split a tracestate into members; -1 if malformed per the spec. */
static int split_tracestate(const char *ts, struct ts_member *m, size_t *count)
{
	size_t len = strnlen(ts, RETRACE_TRACESTATE_MAX + 1), n = 0, i, j;
	const char *p = ts, *end = ts + len;

	if (len > RETRACE_TRACESTATE_MAX)
		return -1;
	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *stop = comma ? comma : end, *eq, *a = p, *b = stop;
		while (a < b && (*a == ' ' || *a == '\t'))
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
			b--;
		if (a < b) { /* empty members are allowed and skipped */
			if (n == TS_MAX_MEMBERS)
				return -1;
			eq = memchr(a, '=', (size_t)(b - a));
			if (!eq || eq == a || eq - a > 256 || b - eq - 1 > 256 || b - eq - 1 < 1)
				return -1;
			if (!((*a >= 'a' && *a <= 'z') || (*a >= '0' && *a <= '9')))
				return -1;
			for (i = 0; i < (size_t)(eq - a); i++)
				if (!key_char(a[i]))
					return -1;
			for (i = 1; i < (size_t)(b - eq); i++)
				if (!value_char(eq[i]))
					return -1;
			m[n].key = a;
			m[n].key_len = (size_t)(eq - a);
			m[n].value = eq + 1;
			m[n].value_len = (size_t)(b - eq - 1);
			for (j = 0; j < n; j++)
				if (m[j].key_len == m[n].key_len &&
				    !memcmp(m[j].key, m[n].key, m[n].key_len))
					return -1; /* duplicate key */
			n++;
		}
		p = comma ? comma + 1 : end;
	}
	*count = n;
	return 0;
}

/* rt value: HHHHHHHH.HHHHHHHH.F */
static int parse_rt_value(const char *v, size_t len, struct retrace_wire_context *out)
{
	uint64_t h0, h1;
	if (len != 19 || v[8] != '.' || v[17] != '.' || (v[18] != '0' && v[18] != '1'))
		return -1;
	if (parse_hex(v, 8, &h0) || parse_hex(v + 9, 8, &h1))
		return -1;
	out->hops[0] = (retrace_agent_id)h0;
	out->hops[1] = (retrace_agent_id)h1;
	out->fired = v[18] == '1';
	return 0;
}

static int is_rt(const struct ts_member *m)
{
	return m->key_len == 2 && m->key[0] == 'r' && m->key[1] == 't';
}

static void parse_tracestate(const char *ts, struct retrace_wire_context *out)
{
	struct ts_member m[TS_MAX_MEMBERS];
	struct retrace_wire_context tmp = *out;
	size_t n = 0, i;

	if (split_tracestate(ts, m, &n) != 0) {
		out->state_rejected = 1;
		return;
	}
	for (i = 0; i < n; i++)
		if (is_rt(&m[i]) && parse_rt_value(m[i].value, m[i].value_len, &tmp) != 0) {
			out->state_rejected = 1;
			return;
		}
	*out = tmp;
}

int retrace_parse_context(const char *traceparent, const char *tracestate,
			  struct retrace_wire_context *out)
{
	struct retrace_wire_context c;
	int rc;

	if (!traceparent || !out)
		return RETRACE_E_INVAL;
	memset(&c, 0, sizeof c);
	rc = parse_traceparent(traceparent, &c);
	if (rc != RETRACE_OK)
		return rc;
	if (tracestate && *tracestate)
		parse_tracestate(tracestate, &c);
	*out = c;
	return RETRACE_OK;
}

/* Breadcrumbs for the hops, an upstream trigger, and the context for begin. */
static void deposit(const struct retrace_wire_context *c)
{
	struct rt_thread *t = &rt_thread_tls;
	int h;

	if (!t->initialized)
		rt_thread_setup(t);
	if (!retrace_sampled(c->trace_id, rt_client.cfg.sample_shift))
		return;
	for (h = 0; h < 2; h++)
		if (c->hops[h] && c->hops[h] != retrace_local_agent())
			rt_push_breadcrumb(t, c->trace_id.lo, c->hops[h]);
	if (c->fired)
		rt_push_trigger_group(t, c->trace_id, RETRACE_TRIGGER_UPSTREAM, NULL, 0);
	t->incoming.id = c->trace_id;
	t->incoming.parent_span_id = c->parent_span_id;
	t->incoming.hops[0] = c->hops[0];
	t->incoming.hops[1] = c->hops[1];
	t->incoming.fired = (uint8_t)c->fired;
	t->incoming.valid = 1;
	if (t->ctx.active && t->ctx.id.lo == c->trace_id.lo && t->ctx.id.hi == c->trace_id.hi) {
		t->ctx.hops[0] = c->hops[0];
		t->ctx.hops[1] = c->hops[1];
		t->ctx.fired |= (uint8_t)c->fired;
		if (t->ctx.span_origin == RT_SPAN_NONE) { /* deserialized after begin */
			t->ctx.span_id = c->parent_span_id;
			t->ctx.span_origin = RT_SPAN_REMOTE;
		}
		t->incoming.valid = 0;
	}
}

int retrace_deserialize(const char *traceparent, const char *tracestate,
			struct retrace_wire_context *out)
{
	int rc = retrace_parse_context(traceparent, tracestate, out);
	if (rc == RETRACE_OK)
		deposit(out);
	return rc;
}

void retrace_set_span_id(uint64_t span_id)
{
	struct rt_thread *t = &rt_thread_tls;
	if (t->ctx.active) {
		t->ctx.span_id = span_id;
		t->ctx.span_origin = span_id ? RT_SPAN_SET : RT_SPAN_NONE;
	}
}

uint64_t retrace_span_id(void)
{
	struct rt_thread *t = &rt_thread_tls;
	if (!t->ctx.active)
		return 0;
	if (t->ctx.span_id == 0) {
		/* Derived, not random: unique per (trace, thread, begin). */
		retrace_trace_id mix = {0, t->ctx.id.lo ^ ((uint64_t)t->tid << 32) ^
					       retrace_ticks()};
		t->ctx.span_id = retrace_trace_hash(mix) | 1;
		t->ctx.span_origin = RT_SPAN_DERIVED; /* not a span: never a parent */
	}
	return t->ctx.span_id;
}

int retrace_serialize(char *traceparent, size_t tp_size, char *tracestate,
		      size_t ts_size, const char *incoming_state)
{
	struct rt_thread *t = &rt_thread_tls;
	struct ts_member m[TS_MAX_MEMBERS];
	size_t n = 0, i, used;
	int w;

	if (!t->ctx.active)
		return RETRACE_E_NOTRACE;
	if (!traceparent || tp_size < RETRACE_TRACEPARENT_LEN + 1)
		return RETRACE_E_INVAL;
	snprintf(traceparent, tp_size, "00-%016llx%016llx-%016llx-%02x",
		 (unsigned long long)t->ctx.id.hi, (unsigned long long)t->ctx.id.lo,
		 (unsigned long long)retrace_span_id(), t->ctx.recorded ? 1u : 0u);
	if (!tracestate)
		return RETRACE_OK;
	if (ts_size < 23)
		return RETRACE_E_INVAL;
	w = snprintf(tracestate, ts_size, "rt=%08x.%08x.%c", retrace_local_agent(),
		     t->ctx.hops[0], t->ctx.fired ? '1' : '0');
	used = (size_t)w;
	if (incoming_state && split_tracestate(incoming_state, m, &n) == 0) {
		size_t kept = 1;
		for (i = 0; i < n && kept < TS_MAX_MEMBERS; i++) {
			size_t need = 1 + m[i].key_len + 1 + m[i].value_len;
			if (is_rt(&m[i]))
				continue;
			if (used + need >= ts_size || used + need > RETRACE_TRACESTATE_MAX)
				break; /* the spec drops from the right when too long */
			used += (size_t)snprintf(tracestate + used, ts_size - used, ",%.*s=%.*s",
						 (int)m[i].key_len, m[i].key,
						 (int)m[i].value_len, m[i].value);
			kept++;
		}
	}
	return RETRACE_OK;
}

static void put_be(uint8_t *p, uint64_t v, int bytes)
{
	int i;
	for (i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get_be(const uint8_t *p, int bytes)
{
	uint64_t v = 0;
	int i;
	for (i = 0; i < bytes; i++)
		v = (v << 8) | p[i];
	return v;
}

int retrace_serialize_binary(uint8_t out[RETRACE_BINARY_CONTEXT_LEN])
{
	struct rt_thread *t = &rt_thread_tls;
	if (!t->ctx.active)
		return RETRACE_E_NOTRACE;
	out[0] = 0;
	out[1] = (uint8_t)((t->ctx.recorded ? 1 : 0) | (t->ctx.fired ? 2 : 0));
	put_be(out + 2, t->ctx.id.hi, 8);
	put_be(out + 10, t->ctx.id.lo, 8);
	put_be(out + 18, retrace_span_id(), 8);
	put_be(out + 26, retrace_local_agent(), 4);
	put_be(out + 30, t->ctx.hops[0], 4);
	return RETRACE_OK;
}

int retrace_parse_binary(const uint8_t *in, size_t len, struct retrace_wire_context *out)
{
	struct retrace_wire_context c;
	if (!in || !out || len != RETRACE_BINARY_CONTEXT_LEN || in[0] != 0 || (in[1] & ~3u))
		return RETRACE_E_INVAL;
	memset(&c, 0, sizeof c);
	c.trace_flags = in[1] & 1;
	c.fired = (in[1] & 2) != 0;
	c.trace_id.hi = get_be(in + 2, 8);
	c.trace_id.lo = get_be(in + 10, 8);
	c.parent_span_id = get_be(in + 18, 8);
	c.hops[0] = (retrace_agent_id)get_be(in + 26, 4);
	c.hops[1] = (retrace_agent_id)get_be(in + 30, 4);
	if ((c.trace_id.hi | c.trace_id.lo) == 0 || c.parent_span_id == 0)
		return RETRACE_E_INVAL;
	*out = c;
	return RETRACE_OK;
}

int retrace_deserialize_binary(const uint8_t *in, size_t len, struct retrace_wire_context *out)
{
	int rc = retrace_parse_binary(in, len, out);
	if (rc == RETRACE_OK)
		deposit(out);
	return rc;
}

/* ----------------------------------------------------------- responses ---- */

#define RESPONSE_CHARS (RETRACE_RESPONSE_TEXT_LEN - 1) /* "rt=HHHHHHHH.F" */

int retrace_serialize_response(char *out, size_t size)
{
	struct rt_thread *t = &rt_thread_tls;
	if (!out || size < RETRACE_RESPONSE_TEXT_LEN)
		return RETRACE_E_INVAL;
	if (!t->ctx.active)
		return RETRACE_E_NOTRACE;
	snprintf(out, size, "rt=%08x.%c", retrace_local_agent(), t->ctx.fired ? '1' : '0');
	return RESPONSE_CHARS;
}

int retrace_serialize_response_binary(uint8_t out[RETRACE_RESPONSE_BINARY_LEN])
{
	struct rt_thread *t = &rt_thread_tls;
	if (!out)
		return RETRACE_E_INVAL;
	if (!t->ctx.active)
		return RETRACE_E_NOTRACE;
	out[0] = 0;
	out[1] = t->ctx.fired ? 1 : 0;
	put_be(out + 2, retrace_local_agent(), 4);
	return RETRACE_RESPONSE_BINARY_LEN;
}

/* Has this writer stream already named `agent`? Remembers it if not. */
static int crumbed_before(struct rt_thread *t, retrace_agent_id agent)
{
	uint32_t i, n;
	if (t->crumbed.trace_lo != t->ctx.id.lo || t->crumbed.stream != t->ctx.writer_stream) {
		t->crumbed.trace_lo = t->ctx.id.lo;
		t->crumbed.stream = t->ctx.writer_stream;
		t->crumbed.n = 0;
	}
	n = t->crumbed.n < RT_RESPONSE_CRUMBS ? t->crumbed.n : RT_RESPONSE_CRUMBS;
	for (i = 0; i < n; i++)
		if (t->crumbed.agent[i] == agent)
			return 1;
	t->crumbed.agent[t->crumbed.n++ % RT_RESPONSE_CRUMBS] = agent;
	if (t->crumbed.n >= 2 * RT_RESPONSE_CRUMBS) /* keep the counter small, slots full */
		t->crumbed.n -= RT_RESPONSE_CRUMBS;
	return 0;
}

/* The caller's side of a parsed response. */
static int deposit_response(retrace_agent_id agent, int fired)
{
	struct rt_thread *t = &rt_thread_tls;
	if (!t->ctx.active)
		return RETRACE_E_NOTRACE;
	if (fired)
		t->ctx.fired = 1; /* later calls of this trace say so */
	if (t->ctx.recorded && agent != 0 && agent != retrace_local_agent() &&
	    !crumbed_before(t, agent))
		rt_push_breadcrumb(t, t->ctx.id.lo, agent);
	return RETRACE_OK;
}

int retrace_deserialize_response(const char *value)
{
	uint64_t agent;
	if (!value || strnlen(value, RETRACE_RESPONSE_TEXT_LEN) != RESPONSE_CHARS ||
	    value[0] != 'r' || value[1] != 't' || value[2] != '=' || value[11] != '.' ||
	    (value[12] != '0' && value[12] != '1') || parse_hex(value + 3, 8, &agent))
		return RETRACE_E_INVAL;
	return deposit_response((retrace_agent_id)agent, value[12] == '1');
}

int retrace_deserialize_response_binary(const uint8_t *in, size_t len)
{
	if (!in || len != RETRACE_RESPONSE_BINARY_LEN || in[0] != 0 || (in[1] & ~1u))
		return RETRACE_E_INVAL;
	return deposit_response((retrace_agent_id)get_be(in + 2, 4), in[1] & 1);
}
