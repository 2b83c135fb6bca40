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
 * first, 8 lowercase hex each, 00000000 = none) and F, one hex digit of flags:
 * bit0 a trigger fired, bit1 the caller dropped the span of this call (so the
 * parent named is no call, docs/adaptive.md), so 0..3; older peers send and
 * read only 0 and 1, and a context without bit1 means "call kept" (the callee
 * keeps its entry span, as before the flag). A malformed tracestate (bad
 * syntax, too long, too many members, a duplicate key, a bad rt value, a flag
 * digit beyond 3) is discarded as the spec asks, and the traceparent still
 * counts; out->state_rejected says so and retrace_deserialize counts it
 * (retrace_thread_contexts_rejected).
 *
 * We also read and write OpenTelemetry's member `ot=th:…;rv:…` (consistent
 * probability sampling): `th` is a 56-bit rejection threshold, 1..14 hex digits
 * with trailing zeros left out; `rv` an explicit 56-bit random value, exactly 14
 * hex digits. A malformed ot member (bad sub-key syntax, a duplicate sub-key, a
 * bad th or rv) is ignored and counted on its own: it never rejects the
 * tracestate, so rt= still counts. The decision itself (which R, which rate) is
 * made in deposit() for a continued trace and in retrace_begin otherwise, both
 * through rt_trace_kept (client.h), so breadcrumbs are left exactly for the
 * traces this host records.
 *
 * Binary form version 1 (48 bytes, big-endian): version 1 | flags (bit0 sampled,
 * bit1 fired, bit2 W3C random, bit3 th present, bit4 rv present, bit5 call
 * dropped; a higher bit refuses the context) | trace id (16)
 * | span id (8) | hop0 (4) | hop1 (4) | th (7) | rv (7); an absent th or rv is
 * zero. Version 0 (34 bytes: the same without th and rv, flags bits 0-1 only)
 * from older peers is still read.
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

/* Parse exactly n hex digits into *out (n <= 16): lowercase only (W3C), or
 * either case (`upper_ok`: OpenTelemetry's th and rv). */
static int parse_hex_case(const char *s, size_t n, uint64_t *out, int upper_ok)
{
	uint64_t v = 0;
	size_t i;
	for (i = 0; i < n; i++) {
		int d = hex_value(s[i]);
		if (d < 0 && upper_ok && s[i] >= 'A' && s[i] <= 'F')
			d = s[i] - 'A' + 10;
		if (d < 0)
			return -1;
		v = (v << 4) | (uint64_t)d;
	}
	*out = v;
	return 0;
}

static int parse_hex(const char *s, size_t n, uint64_t *out)
{
	return parse_hex_case(s, n, out, 0);
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

/* The rt flag digit F (one hex digit): the bits below; 0..3. */
#define RT_FLAG_FIRED 0x1u
#define RT_FLAG_CALL_DROPPED 0x2u
#define RT_FLAGS_KNOWN (RT_FLAG_FIRED | RT_FLAG_CALL_DROPPED)

/* rt value: HHHHHHHH.HHHHHHHH.F */
static int parse_rt_value(const char *v, size_t len, struct retrace_wire_context *out)
{
	uint64_t h0, h1, f;
	if (len != 19 || v[8] != '.' || v[17] != '.')
		return -1;
	if (parse_hex(v, 8, &h0) || parse_hex(v + 9, 8, &h1) || parse_hex(v + 18, 1, &f) ||
	    (f & ~(uint64_t)RT_FLAGS_KNOWN))
		return -1;
	out->hops[0] = (retrace_agent_id)h0;
	out->hops[1] = (retrace_agent_id)h1;
	out->fired = (f & RT_FLAG_FIRED) != 0;
	out->call_dropped = (f & RT_FLAG_CALL_DROPPED) != 0;
	return 0;
}

/* The flag digit this thread sends now. */
static char rt_flag_digit(const struct rt_thread *t)
{
	return (char)('0' + (t->ctx.fired ? RT_FLAG_FIRED : 0) +
		      (rt_tracer_call_dropped(t) ? RT_FLAG_CALL_DROPPED : 0));
}

static int is_key(const struct ts_member *m, const char *key)
{
	return m->key_len == 2 && m->key[0] == key[0] && m->key[1] == key[1];
}

static int is_rt(const struct ts_member *m)
{
	return is_key(m, "rt");
}

/* ------------------------------------------------ ot= (OpenTelemetry) ---- */

#define OT_TH_DIGITS 14 /* 56 bits */
#define OT_MAX_SUBKEYS 16

/* One `key:value` sub-member of an ot value. */
struct ot_sub {
	const char *key, *value;
	size_t key_len, value_len;
};

/* Split an ot value into sub-members: list = member *(";" member), member =
 * key ":" value, key = lcalpha *(lcalpha / DIGIT), value = *(alnum / "." / "_" /
 * "-"), keys unique. -1 if malformed. */
static int split_ot(const char *v, size_t len, struct ot_sub *sub, size_t *count)
{
	const char *p = v, *end = v + len;
	size_t n = 0, i, j;
	if (len == 0 || len > 256)
		return -1;
	for (;;) {
		const char *semi = memchr(p, ';', (size_t)(end - p));
		const char *stop = semi ? semi : end;
		const char *colon = memchr(p, ':', (size_t)(stop - p));
		if (!colon || colon == p || n == OT_MAX_SUBKEYS || !(*p >= 'a' && *p <= 'z'))
			return -1;
		for (i = 0; i < (size_t)(colon - p); i++)
			if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9')))
				return -1;
		for (i = 1; i < (size_t)(stop - colon); i++) {
			char c = colon[i];
			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
				return -1;
		}
		sub[n].key = p;
		sub[n].key_len = (size_t)(colon - p);
		sub[n].value = colon + 1;
		sub[n].value_len = (size_t)(stop - colon - 1);
		for (j = 0; j < n; j++)
			if (sub[j].key_len == sub[n].key_len && !memcmp(sub[j].key, p, sub[n].key_len))
				return -1;
		n++;
		if (!semi)
			break;
		p = semi + 1;
	}
	*count = n;
	return 0;
}

static int is_sub(const struct ot_sub *s, const char *key)
{
	return s->key_len == 2 && s->key[0] == key[0] && s->key[1] == key[1];
}

/* The ot value's th and rv into out; -1 (out untouched) if malformed. */
static int parse_ot_value(const char *v, size_t len, struct retrace_wire_context *out)
{
	struct ot_sub sub[OT_MAX_SUBKEYS];
	size_t n, i;
	uint64_t th = 0, rv = 0;
	int has_th = 0, has_rv = 0;

	if (split_ot(v, len, sub, &n) != 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (is_sub(&sub[i], "th")) {
			/* 1..14 digits, extended with trailing zeros to 14 */
			if (sub[i].value_len < 1 || sub[i].value_len > OT_TH_DIGITS ||
			    parse_hex_case(sub[i].value, sub[i].value_len, &th, 1))
				return -1;
			th <<= 4 * (OT_TH_DIGITS - sub[i].value_len);
			has_th = 1;
		} else if (is_sub(&sub[i], "rv")) {
			if (sub[i].value_len != OT_TH_DIGITS ||
			    parse_hex_case(sub[i].value, sub[i].value_len, &rv, 1))
				return -1;
			has_rv = 1;
		}
	}
	out->ot_th = th;
	out->ot_has_th = (uint8_t)has_th;
	out->ot_rv = rv;
	out->ot_has_rv = (uint8_t)has_rv;
	return 0;
}

/* "th:T" with trailing zeros left out ("th:0" for 0); returns the length. */
static int format_th(char *out, size_t size, uint64_t th)
{
	char hex[OT_TH_DIGITS + 1];
	int n = OT_TH_DIGITS;
	if (th == 0)
		return snprintf(out, size, "th:0");
	snprintf(hex, sizeof hex, "%014llx", (unsigned long long)(th & RETRACE_RV_MASK));
	while (n > 1 && hex[n - 1] == '0')
		n--;
	return snprintf(out, size, "th:%.*s", n, hex);
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
	/* A bad ot= is OpenTelemetry's problem, not a bad tracestate: ignore it alone. */
	for (i = 0; i < n; i++)
		if (is_key(&m[i], "ot") && parse_ot_value(m[i].value, m[i].value_len, &tmp) != 0)
			tmp.ot_rejected = 1;
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

	uint8_t source = c->ot_has_rv ? RT_RV_EXPLICIT
			 : (c->trace_flags & RETRACE_TRACE_FLAG_RANDOM) ? RT_RV_ID : RT_RV_HASH;
	int same, recorded;
	uint32_t k;

	/* An rv a retrace host sent is the hash's own: nested with the agent's
	 * overload priority, so no different from deciding on the hash. */
	if (source == RT_RV_EXPLICIT && c->ot_rv == retrace_hash_rv(c->trace_id))
		source = RT_RV_HASH;
	if (!t->initialized)
		rt_thread_setup(t);
	if (c->ot_rejected)
		t->stats.ot_rejected++;
	if (c->state_rejected)
		t->contexts_rejected++;
	same = t->ctx.active && t->ctx.id.lo == c->trace_id.lo && t->ctx.id.hi == c->trace_id.hi;
	if (same) { /* deserialized after begin: the trace is decided already */
		recorded = t->ctx.recorded;
		k = t->ctx.rate_exp;
	} else {
		k = rt_choose_exp(t);
		recorded = rt_trace_kept(c->trace_id, k, source, c->ot_rv);
	}
	t->incoming.rate_exp = (uint8_t)k;
	t->incoming.rv_source = source;
	t->incoming.rv = c->ot_rv;
	t->incoming.recorded = (uint8_t)recorded;
	/* Breadcrumbs and an upstream trigger only where this host records the trace.
	 * The context below is taken either way: an unrecorded host starts no span,
	 * so the caller's span stays the parent it propagates (§2.10: the last
	 * sampled ancestor), and the caller's randomness goes on with it. */
	if (recorded) {
		for (h = 0; h < 2; h++)
			if (c->hops[h] && c->hops[h] != retrace_local_agent())
				rt_push_breadcrumb(t, c->trace_id.lo, c->hops[h]);
		if (c->fired)
			rt_push_trigger_group(t, c->trace_id, RETRACE_TRIGGER_UPSTREAM, NULL, 0);
	}
	t->incoming.id = c->trace_id;
	t->incoming.parent_span_id = c->parent_span_id;
	t->incoming.hops[0] = c->hops[0];
	t->incoming.hops[1] = c->hops[1];
	t->incoming.fired = (uint8_t)c->fired;
	t->incoming.call_dropped = c->call_dropped;
	t->incoming.valid = 1;
	if (t->ctx.active && t->ctx.id.lo == c->trace_id.lo && t->ctx.id.hi == c->trace_id.hi) {
		t->ctx.hops[0] = c->hops[0];
		t->ctx.hops[1] = c->hops[1];
		t->ctx.fired |= (uint8_t)c->fired;
		if (t->ctx.span_origin == RT_SPAN_NONE) { /* deserialized after begin */
			t->ctx.span_id = c->parent_span_id;
			t->ctx.span_origin = RT_SPAN_REMOTE;
			t->ctx.call_dropped = c->call_dropped;
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

/* The two hops this host names: itself and its caller's, or, where it does not
 * record the trace, its caller's two (a host without data is no hop to follow). */
static void named_hops(const struct rt_trace_ctx *c, retrace_agent_id out[2])
{
	out[0] = c->recorded ? retrace_local_agent() : c->hops[0];
	out[1] = c->recorded ? c->hops[0] : c->hops[1];
}

static uint8_t outgoing_flags(const struct rt_trace_ctx *c)
{
	return (uint8_t)((c->recorded ? RETRACE_TRACE_FLAG_SAMPLED : 0) |
			 (c->rv_source == RT_RV_ID ? RETRACE_TRACE_FLAG_RANDOM : 0));
}

/* The R this hop propagates as ot=rv: the caller's explicit one, or the hash
 * value our decision used, so that samplers downstream decide on it too. None
 * (0) when R is the id's own random bits: the traceparent flag says so. */
static int outgoing_rv(const struct rt_trace_ctx *c, uint64_t *rv)
{
	if (c->rv_source == RT_RV_ID)
		return 0;
	*rv = c->rv_source == RT_RV_EXPLICIT ? c->rv : retrace_hash_rv(c->id);
	return 1;
}

/* Our ot value: th of this hop (only where it recorded the trace: OpenTelemetry
 * erases th of unsampled contexts), rv, then the caller's other ot sub-keys as
 * long as the value stays within 256 characters. Returns its length (0: none). */
static size_t format_ot(const struct rt_trace_ctx *c, const struct ts_member *in_ot,
			char *out, size_t size)
{
	struct ot_sub sub[OT_MAX_SUBKEYS];
	size_t used = 0, n = 0, i;
	uint64_t rv;

	if (c->recorded)
		used += (size_t)format_th(out, size, retrace_ot_threshold(c->rate_exp));
	if (outgoing_rv(c, &rv))
		used += (size_t)snprintf(out + used, size - used, "%srv:%014llx", used ? ";" : "",
					 (unsigned long long)rv);
	if (in_ot && split_ot(in_ot->value, in_ot->value_len, sub, &n) == 0)
		for (i = 0; i < n; i++) {
			size_t need = (used ? 1 : 0) + sub[i].key_len + 1 + sub[i].value_len;
			if (is_sub(&sub[i], "th") || is_sub(&sub[i], "rv"))
				continue;
			if (used + need > 256 || used + need >= size)
				break;
			used += (size_t)snprintf(out + used, size - used, "%s%.*s:%.*s",
						 used ? ";" : "", (int)sub[i].key_len, sub[i].key,
						 (int)sub[i].value_len, sub[i].value);
		}
	return used;
}

int retrace_serialize(char *traceparent, size_t tp_size, char *tracestate,
		      size_t ts_size, const char *incoming_state)
{
	struct rt_thread *t = &rt_thread_tls;
	struct ts_member m[TS_MAX_MEMBERS];
	const struct ts_member *in_ot = NULL;
	retrace_agent_id hop[2];
	char ot[300];
	size_t n = 0, i, used, ot_len, kept;
	int w, wrote_ot;

	if (!t->ctx.active)
		return RETRACE_E_NOTRACE;
	if (!traceparent || tp_size < RETRACE_TRACEPARENT_LEN + 1)
		return RETRACE_E_INVAL;
	snprintf(traceparent, tp_size, "00-%016llx%016llx-%016llx-%02x",
		 (unsigned long long)t->ctx.id.hi, (unsigned long long)t->ctx.id.lo,
		 (unsigned long long)retrace_span_id(), outgoing_flags(&t->ctx));
	if (!tracestate)
		return RETRACE_OK;
	if (ts_size < 23)
		return RETRACE_E_INVAL;
	named_hops(&t->ctx, hop);
	w = snprintf(tracestate, ts_size, "rt=%08x.%08x.%c", hop[0], hop[1], rt_flag_digit(t));
	used = (size_t)w;
	if (incoming_state && split_tracestate(incoming_state, m, &n) != 0)
		n = 0;
	for (i = 0; i < n; i++)
		if (is_key(&m[i], "ot"))
			in_ot = &m[i];
	/* ot= second: W3C moves the members a hop updates to the left. If there is
	 * no room for ours, the caller's goes on as it came. */
	ot_len = format_ot(&t->ctx, in_ot, ot, sizeof ot);
	wrote_ot = ot_len && used + 4 + ot_len < ts_size;
	if (wrote_ot)
		used += (size_t)snprintf(tracestate + used, ts_size - used, ",ot=%s", ot);
	for (i = 0, kept = 1 + (size_t)wrote_ot; i < n && kept < TS_MAX_MEMBERS; i++) {
		size_t need = 1 + m[i].key_len + 1 + m[i].value_len;
		if (is_rt(&m[i]) || (wrote_ot && is_key(&m[i], "ot")))
			continue;
		if (used + need >= ts_size || used + need > RETRACE_TRACESTATE_MAX)
			break; /* the spec drops from the right when too long */
		used += (size_t)snprintf(tracestate + used, ts_size - used, ",%.*s=%.*s",
					 (int)m[i].key_len, m[i].key,
					 (int)m[i].value_len, m[i].value);
		kept++;
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

#define BIN_SAMPLED 0x01u
#define BIN_FIRED 0x02u
#define BIN_RANDOM 0x04u
#define BIN_TH 0x08u
#define BIN_RV 0x10u
#define BIN_CALL_DROPPED 0x20u /* as rt='s flag bit1 */
#define BIN_V1_FLAGS 0x3fu

int retrace_serialize_binary(uint8_t out[RETRACE_BINARY_CONTEXT_LEN])
{
	struct rt_thread *t = &rt_thread_tls;
	const struct rt_trace_ctx *c = &t->ctx;
	retrace_agent_id hop[2];
	uint64_t rv = 0;
	int has_rv;
	if (!c->active)
		return RETRACE_E_NOTRACE;
	named_hops(c, hop);
	has_rv = outgoing_rv(c, &rv);
	out[0] = 1;
	out[1] = (uint8_t)((c->recorded ? BIN_SAMPLED | BIN_TH : 0) | (c->fired ? BIN_FIRED : 0) |
			   (c->rv_source == RT_RV_ID ? BIN_RANDOM : 0) | (has_rv ? BIN_RV : 0) |
			   (rt_tracer_call_dropped(t) ? BIN_CALL_DROPPED : 0));
	put_be(out + 2, c->id.hi, 8);
	put_be(out + 10, c->id.lo, 8);
	put_be(out + 18, retrace_span_id(), 8);
	put_be(out + 26, hop[0], 4);
	put_be(out + 30, hop[1], 4);
	put_be(out + 34, c->recorded ? retrace_ot_threshold(c->rate_exp) : 0, 7);
	put_be(out + 41, rv, 7);
	return RETRACE_OK;
}

int retrace_parse_binary(const uint8_t *in, size_t len, struct retrace_wire_context *out)
{
	struct retrace_wire_context c;
	if (!in || !out)
		return RETRACE_E_INVAL;
	if (!(len == RETRACE_BINARY_CONTEXT_V0_LEN && in[0] == 0 && !(in[1] & ~3u)) &&
	    !(len == RETRACE_BINARY_CONTEXT_LEN && in[0] == 1 && !(in[1] & ~BIN_V1_FLAGS)))
		return RETRACE_E_INVAL;
	memset(&c, 0, sizeof c);
	c.trace_flags = (uint8_t)((in[1] & BIN_SAMPLED ? RETRACE_TRACE_FLAG_SAMPLED : 0) |
				  (in[1] & BIN_RANDOM ? RETRACE_TRACE_FLAG_RANDOM : 0));
	c.fired = (in[1] & BIN_FIRED) != 0;
	c.call_dropped = (in[1] & BIN_CALL_DROPPED) != 0; /* never set in version 0 */
	c.trace_id.hi = get_be(in + 2, 8);
	c.trace_id.lo = get_be(in + 10, 8);
	c.parent_span_id = get_be(in + 18, 8);
	c.hops[0] = (retrace_agent_id)get_be(in + 26, 4);
	c.hops[1] = (retrace_agent_id)get_be(in + 30, 4);
	if ((c.trace_id.hi | c.trace_id.lo) == 0 || c.parent_span_id == 0)
		return RETRACE_E_INVAL;
	if (in[0] == 1) {
		c.ot_th = get_be(in + 34, 7);
		c.ot_rv = get_be(in + 41, 7);
		c.ot_has_th = (in[1] & BIN_TH) != 0;
		c.ot_has_rv = (in[1] & BIN_RV) != 0;
		/* a value without its flag: the sender is confused; ignore both, count */
		if ((!c.ot_has_th && c.ot_th) || (!c.ot_has_rv && c.ot_rv)) {
			c.ot_th = c.ot_rv = 0;
			c.ot_has_th = c.ot_has_rv = 0;
			c.ot_rejected = 1;
		}
	}
	*out = c;
	return RETRACE_OK;
}

uint64_t retrace_thread_contexts_rejected(void)
{
	return rt_thread_tls.contexts_rejected;
}

int retrace_deserialize_binary(const uint8_t *in, size_t len, struct retrace_wire_context *out)
{
	int rc = retrace_parse_binary(in, len, out);
	if (rc == RETRACE_OK) {
		deposit(out);
	} else if (in) {
		struct rt_thread *t = &rt_thread_tls;
		if (!t->initialized)
			rt_thread_setup(t);
		t->contexts_rejected++;
	}
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
