/*
 * export.c — decoded traces as OTLP/JSON or Zipkin v2 JSON, and the OTLP push.
 *
 * How it works: one small JSON writer (struct jw) appends to the caller's
 * rt_wire_buf and remembers the first allocation failure, so the format code
 * reads as a straight walk over the trace with no error checks in between; at
 * the end a failure rolls the buffer back to where it started ("nothing is
 * written on error").
 *
 * Attribute-like lists (OTLP attributes, Zipkin tags) are first gathered into
 * a scratch array of key/value pairs (struct kv) — the trace's own attributes
 * plus retrace's facts (agent id, partial, error code) — and emitted with
 * duplicate keys removed (the last value wins, at the position of the last
 * one): OTLP requires unique keys and a JSON object with duplicate names is
 * not portable.
 *
 * Strings are written by daemon/json.h, per RFC 8259: '"', '\\' and control characters (short
 * forms \b \f \n \r \t, else \u00XX); well-formed UTF-8 passes through, and
 * every byte that is not part of a well-formed sequence (overlong, surrogate,
 * above U+10FFFF, truncated) becomes U+FFFD, so the output is always valid
 * JSON and valid UTF-8. Doubles are printed exactly (the shortest of %.15g,
 * %.16g, %.17g that reads back as the same value);
 * NaN and infinities, which JSON numbers cannot carry, are written as the
 * strings "NaN", "Infinity", "-Infinity" as the proto3 JSON mapping does.
 *
 * Values a collector would refuse are mended on the way and counted in the
 * writer's rt_export_stats: empty names get a placeholder, empty keys are
 * dropped, and a log argument that an unsigned conversion of its template read
 * (found by walking the template with shm/fmt.h, as the decoder does) is
 * written as unsigned — as a stringValue when it is above INT64_MAX.
 *
 * The push uses nng's HTTP client: one transaction (connect, POST, read the
 * answer, close) per attempt, with a timeout on the aio, and a doubling
 * backoff between attempts that are worth repeating (or the answer's
 * Retry-After, bounded). rt_export_push_traces cuts the export into requests
 * with a batcher (see "batches" below) so no request passes the collector's
 * size limit; each body is gzip'd with zlib in one deflate call.
 */
#include "export.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <nng/supplemental/util/platform.h>
#include <zlib.h>

#include "daemon/json.h"
#include "retrace/tracer.h"
#include "shm/fmt.h"

#ifndef RETRACE_VERSION_STRING
#define RETRACE_VERSION_STRING "0"
#endif

/* ------------------------------------------------------ JSON writer ---- */

struct kv {
	const char *key;
	int key_index;          /* >= 0: the key is printf(key, key_index) */
	struct rt_value v;
	int is_unsigned;        /* an int read by an unsigned conversion (%llu, %p) */
};

struct jw {
	struct rt_wire_buf *b;
	int err;                /* first failure (RT_WIRE_E_NOMEM), sticky */
	struct kv *kv;          /* scratch list for attributes / tags */
	size_t nkv, kvcap;
	struct rt_export_stats st;
};

#define UNNAMED_SPAN "(unnamed)"
#define UNNAMED_EVENT "(empty)"

static void jw_raw(struct jw *w, const char *s, size_t n)
{
	if (w->err || !n)
		return;
	if (rt_wire_buf_reserve(w->b, n) != 0) {
		w->err = RT_WIRE_E_NOMEM;
		return;
	}
	memcpy(w->b->data + w->b->len, s, n);
	w->b->len += n;
}

static void jw_lit(struct jw *w, const char *s)
{
	jw_raw(w, s, strlen(s));
}

static void jw_sink(void *ctx, const char *p, size_t n)
{
	jw_raw(ctx, p, n);
}

/* A JSON string with its quotes (daemon/json.h); NULL is written as "". */
static void jw_str(struct jw *w, const char *s)
{
	rt_json_put_string(jw_sink, w, s);
}

static void jw_hex_id(struct jw *w, uint64_t hi, uint64_t lo, int with_hi)
{
	if (with_hi)
		rt_sink_printf(jw_sink, w, "\"%016" PRIx64 "%016" PRIx64 "\"", hi, lo);
	else
		rt_sink_printf(jw_sink, w, "\"%016" PRIx64 "\"", lo);
}

/* The shortest of %.15g, %.16g, %.17g that reads back as the same double:
 * exact like %.17g, without printing 0.1 as 0.10000000000000001. */
static void shortest_double(double d, char *out, size_t cap)
{
	int prec;
	for (prec = 15; prec < 17; prec++) {
		snprintf(out, cap, "%.*g", prec, d);
		if (strtod(out, NULL) == d)
			return;
	}
	snprintf(out, cap, "%.17g", d);
}

/* A double as JSON: a number, or a proto3-style string when not finite. */
static void format_double(double d, char *out, size_t cap)
{
	if (isnan(d))
		snprintf(out, cap, "NaN");
	else if (isinf(d))
		snprintf(out, cap, d > 0 ? "Infinity" : "-Infinity");
	else
		shortest_double(d, out, cap);
}

static void jw_double(struct jw *w, double d)
{
	char tmp[40];
	format_double(d, tmp, sizeof tmp);
	if (isfinite(d))
		jw_lit(w, tmp);
	else
		jw_str(w, tmp);
}

/* ------------------------------------------------- key/value lists ---- */

static void kv_reset(struct jw *w)
{
	w->nkv = 0;
}

/* Append one pair; an empty key (OTLP requires one) is dropped and counted. */
static void kv_add(struct jw *w, const char *key, int key_index, struct rt_value v)
{
	if (w->err)
		return;
	if (key_index < 0 && (!key || !*key)) {
		w->st.empty_keys_dropped++;
		return;
	}
	if (w->nkv == w->kvcap) {
		size_t cap = w->kvcap ? w->kvcap * 2 : 32;
		struct kv *k = realloc(w->kv, cap * sizeof *k);
		if (!k) {
			w->err = RT_WIRE_E_NOMEM;
			return;
		}
		w->kv = k;
		w->kvcap = cap;
	}
	w->kv[w->nkv++] = (struct kv){ key, key_index, v, 0 };
}

static void kv_str(struct jw *w, const char *key, const char *s)
{
	struct rt_value v = { .type = RT_VAL_STR, .u.s = s };
	kv_add(w, key, -1, v);
}

static void kv_int(struct jw *w, const char *key, int64_t i)
{
	struct rt_value v = { .type = RT_VAL_INT, .u.i = i };
	kv_add(w, key, -1, v);
}

static void kv_bool(struct jw *w, const char *key, int b)
{
	struct rt_value v = { .type = RT_VAL_BOOL, .u.b = b };
	kv_add(w, key, -1, v);
}

static void kv_attrs(struct jw *w, const struct rt_attr *a, uint32_t n, const char *skip_key)
{
	uint32_t i;
	for (i = 0; a && i < n; i++)
		if (!skip_key || !a[i].key || strcmp(a[i].key, skip_key))
			kv_add(w, a[i].key, -1, a[i].value);
}

static int kv_same_key(const struct kv *a, const struct kv *b)
{
	return a->key_index == b->key_index && !strcmp(a->key, b->key);
}

/* Is entry i overridden by a later entry with the same key? */
static int kv_shadowed(const struct jw *w, size_t i)
{
	size_t j;
	for (j = i + 1; j < w->nkv; j++)
		if (kv_same_key(&w->kv[i], &w->kv[j]))
			return 1;
	return 0;
}

static void jw_kv_key(struct jw *w, const struct kv *k)
{
	if (k->key_index >= 0) {
		char tmp[96];
		snprintf(tmp, sizeof tmp, k->key, k->key_index);
		jw_str(w, tmp);
	} else {
		jw_str(w, k->key);
	}
}

/* ---------------------------------------------------------- OTLP ---- */

/* An OTLP AnyValue. intValue is an int64: an unsigned value above INT64_MAX
 * does not fit and goes as its decimal text in a stringValue. */
static void otlp_value(struct jw *w, const struct rt_value *v, int is_unsigned)
{
	switch (v->type) {
	case RT_VAL_STR:
		jw_lit(w, "{\"stringValue\":");
		jw_str(w, v->u.s);
		jw_lit(w, "}");
		break;
	case RT_VAL_INT:
		if (is_unsigned && v->u.i < 0) {
			w->st.unsigned_as_string++;
			rt_sink_printf(jw_sink, w, "{\"stringValue\":\"%" PRIu64 "\"}", (uint64_t)v->u.i);
		} else {
			rt_sink_printf(jw_sink, w, "{\"intValue\":\"%" PRId64 "\"}", v->u.i);
		}
		break;
	case RT_VAL_DOUBLE:
		jw_lit(w, "{\"doubleValue\":");
		jw_double(w, v->u.d);
		jw_lit(w, "}");
		break;
	case RT_VAL_BOOL:
		jw_lit(w, v->u.b ? "{\"boolValue\":true}" : "{\"boolValue\":false}");
		break;
	default:
		jw_lit(w, "{}"); /* an AnyValue with no value: nil */
		break;
	}
}

/* ,"attributes":[...] from the scratch list (nothing when it is empty). */
static void otlp_attributes(struct jw *w, int leading_comma)
{
	size_t i;
	int first = 1;
	if (!w->nkv)
		return;
	jw_lit(w, leading_comma ? ",\"attributes\":[" : "\"attributes\":[");
	for (i = 0; i < w->nkv; i++) {
		if (kv_shadowed(w, i))
			continue;
		jw_lit(w, first ? "{\"key\":" : ",{\"key\":");
		first = 0;
		jw_kv_key(w, &w->kv[i]);
		jw_lit(w, ",\"value\":");
		otlp_value(w, &w->kv[i].v, w->kv[i].is_unsigned);
		jw_lit(w, "}");
	}
	jw_lit(w, "]");
}

static const char *level_name(uint8_t level)
{
	static const char *names[] = { "DEBUG", "INFO", "WARN", "ERROR" };
	return level < 4 ? names[level] : "LOG";
}

static int arg_is_unsigned(uint8_t arg)
{
	return (arg >= RT_FMT_ARG_UINT && arg <= RT_FMT_ARG_UPTRDIFF) || arg == RT_FMT_ARG_PTR;
}

/* The value as the unsigned C type its length modifier names (as the decoder
 * renders it): %u of an int is 32 bits, %llu and %p all 64. */
static int64_t as_unsigned_bits(const struct rt_fmt_spec *cv, int64_t v)
{
	enum rt_fmt_len len = cv->len;
	if (cv->arg == RT_FMT_ARG_PTR)
		return v;
	if (len == RT_FMT_LEN_HH)
		return (int64_t)(uint8_t)v;
	if (len == RT_FMT_LEN_H)
		return (int64_t)(uint16_t)v;
	if (len == RT_FMT_LEN_NONE)
		return (int64_t)(uint32_t)v;
	return v;
}

/*
 * Walk the template's conversions the way the decoder does (shm/fmt.h) and
 * mark the arguments an unsigned conversion reads: the recorded int64 holds
 * their bit pattern, and ULLONG_MAX must not come out as -1. First = the kv
 * index of log.args.0.
 */
static void mark_unsigned_args(struct jw *w, const char *tpl, size_t first, uint32_t nargs)
{
	uint32_t next = 0;
	const char *p = tpl;
	while (p && (p = strchr(p, '%')) != NULL && next < nargs) {
		struct rt_fmt_spec cv;
		if (p[1] == '%') {
			p += 2;
			continue;
		}
		if (!rt_fmt_parse(p, &cv)) {
			p++;
			continue;
		}
		next += (uint32_t)(cv.width_star + cv.prec_star);
		if (next < nargs && first + next < w->nkv && arg_is_unsigned(cv.arg)) {
			struct kv *k = &w->kv[first + next];
			if (k->v.type == RT_VAL_INT) {
				k->v.u.i = as_unsigned_bits(&cv, k->v.u.i);
				k->is_unsigned = 1;
			}
		}
		next++;
		p += cv.n;
	}
}

static void otlp_event(struct jw *w, const struct rt_log_event *l)
{
	char tid[24];
	uint32_t a;
	size_t first_arg;
	rt_sink_printf(jw_sink, w, "{\"timeUnixNano\":\"%" PRIu64 "\",\"name\":", l->time_ns);
	if (!l->body || !*l->body) /* OTLP: an event name is required */
		w->st.unnamed_events++;
	jw_str(w, l->body && *l->body ? l->body : UNNAMED_EVENT);
	kv_reset(w);
	kv_str(w, "log.severity", level_name(l->level));
	if (l->template_text)
		kv_str(w, "log.template", l->template_text);
	snprintf(tid, sizeof tid, "%016" PRIx64, l->template_id);
	if (l->template_id)
		kv_str(w, "log.template_id", tid);
	if (l->flags & RT_LOG_TEMPLATE_MISSING)
		kv_bool(w, "log.template_missing", 1);
	first_arg = w->nkv;
	for (a = 0; l->args && a < l->n_args && a < 1000000; a++)
		kv_add(w, "log.args.%d", (int)a, l->args[a]);
	if (l->template_text && !w->err)
		mark_unsigned_args(w, l->template_text, first_arg, (uint32_t)(w->nkv - first_arg));
	otlp_attributes(w, 1);
	jw_lit(w, "}");
}

static uint8_t otlp_kind(uint8_t kind)
{
	return kind <= RETRACE_SPAN_CONSUMER ? kind : 0; /* same numbers as OTLP */
}

/* `{"traceId":…,"<id_key>":…[,"<parent_key>":…],"name":…` — both formats open a
 * span this way and differ only in the key names. */
static void span_head(struct jw *w, const struct rt_span *s, const char *id_key,
		      const char *parent_key)
{
	jw_lit(w, "{\"traceId\":");
	jw_hex_id(w, s->trace_hi, s->trace_lo, 1);
	rt_sink_printf(jw_sink, w, ",\"%s\":", id_key);
	jw_hex_id(w, 0, s->span_id, 0);
	if (s->parent_id) {
		rt_sink_printf(jw_sink, w, ",\"%s\":", parent_key);
		jw_hex_id(w, 0, s->parent_id, 0);
	}
	jw_lit(w, ",\"name\":");
	if (!s->name || !*s->name) /* OTLP requires a name; Zipkin's UI needs one */
		w->st.unnamed_spans++;
	jw_str(w, s->name && *s->name ? s->name : UNNAMED_SPAN);
}

/* retrace's own facts about a span, as attributes (OTLP) or tags (Zipkin). */
static void kv_span_facts(struct jw *w, const struct rt_span *s)
{
	kv_int(w, "retrace.agent_id", s->agent_id);
	if (s->kind > RETRACE_SPAN_CONSUMER) /* exported as unspecified; keep the number */
		kv_int(w, "retrace.kind", s->kind);
	if (s->flags & RT_SPAN_PARTIAL)
		kv_bool(w, "retrace.partial", 1);
	if (s->flags & RT_SPAN_NO_START)
		kv_bool(w, "retrace.no_start", 1);
	if (s->flags & RT_SPAN_NO_END)
		kv_bool(w, "retrace.no_end", 1);
	if (s->flags & RT_SPAN_UNMATCHED)
		kv_bool(w, "retrace.unmatched", 1);
	/* the adaptive span policy (docs/adaptive.md): the rate it was kept at
	 * (weight 65535 / p16), and dropped descendants' time folded into it */
	if (s->adapt_p16 != RT_SPAN_P16_ALWAYS)
		kv_int(w, "retrace.adaptive.p16", s->adapt_p16);
	if (s->dropped_ns)
		kv_int(w, "retrace.adaptive.dropped_ns", s->dropped_ns);
}

static void otlp_span(struct jw *w, const struct rt_span *s)
{
	uint32_t i;
	span_head(w, s, "spanId", "parentSpanId");
	rt_sink_printf(jw_sink, w,
		       ",\"kind\":%u,\"startTimeUnixNano\":\"%" PRIu64
		       "\",\"endTimeUnixNano\":\"%" PRIu64 "\"",
		       otlp_kind(s->kind), s->start_ns, s->end_ns);
	kv_reset(w);
	kv_attrs(w, s->attrs, s->n_attrs, NULL);
	if (s->status == RETRACE_STATUS_ERROR)
		kv_int(w, "retrace.status_code", s->status_code);
	kv_span_facts(w, s);
	otlp_attributes(w, 1);
	if (s->n_logs && s->logs) {
		jw_lit(w, ",\"events\":[");
		for (i = 0; i < s->n_logs; i++) {
			if (i)
				jw_lit(w, ",");
			otlp_event(w, &s->logs[i]);
		}
		jw_lit(w, "]");
	}
	rt_sink_printf(jw_sink, w, ",\"status\":{\"code\":%u",
		       s->status <= RETRACE_STATUS_ERROR ? s->status : 0);
	if (s->status == RETRACE_STATUS_ERROR && s->status_message && *s->status_message) {
		jw_lit(w, ",\"message\":");
		jw_str(w, s->status_message);
	}
	jw_lit(w, "}}");
}

static int has_key(const struct rt_attr *a, uint32_t n, const char *key)
{
	uint32_t i;
	for (i = 0; a && i < n; i++)
		if (a[i].key && !strcmp(a[i].key, key))
			return 1;
	return 0;
}

static int span_in_group(const struct rt_decoded_trace *t, const struct rt_span *s, uint32_t r)
{
	/* r == n_resources: spans whose resource index is out of range */
	return r < t->n_resources ? s->resource == r : s->resource >= t->n_resources;
}

/* The opening of a resourceSpans entry for resource r of t (NULL res: the spans
 * whose resource index is out of range), up to the spans array's '['. */
static void otlp_resource_head(struct jw *w, const struct rt_decoded_trace *t, uint32_t r)
{
	const struct rt_resource *res = r < t->n_resources ? &t->resources[r] : NULL;
	jw_lit(w, "{\"resource\":{");
	kv_reset(w);
	/* the decoder includes service.name; a hand-made trace may not */
	if (!res || !has_key(res->attrs, res->n_attrs, "service.name"))
		kv_str(w, "service.name",
		       res && res->service && *res->service ? res->service : "unknown_service");
	if (res)
		kv_attrs(w, res->attrs, res->n_attrs, NULL);
	otlp_attributes(w, 0);
	jw_lit(w, "},\"scopeSpans\":[{\"scope\":{\"name\":\"retrace\"},\"spans\":[");
}

#define OTLP_RESOURCE_TAIL "]}]}"
#define OTLP_DOC_HEAD "{\"resourceSpans\":["
#define OTLP_DOC_TAIL "]}\n"

/* One resourceSpans entry: the spans of resource r, or nothing if it has none. */
static void otlp_resource_spans(struct jw *w, const struct rt_decoded_trace *t, uint32_t r,
				int *first)
{
	uint32_t i;
	int any = 0;
	for (i = 0; i < t->n_spans; i++) {
		if (!span_in_group(t, &t->spans[i], r))
			continue;
		if (!any) {
			if (!*first)
				jw_lit(w, ",");
			*first = 0;
			otlp_resource_head(w, t, r);
			any = 1;
		} else {
			jw_lit(w, ",");
		}
		otlp_span(w, &t->spans[i]);
	}
	if (any)
		jw_lit(w, OTLP_RESOURCE_TAIL);
}

static void write_otlp(struct jw *w, const struct rt_decoded_trace *traces, size_t n)
{
	size_t k;
	uint32_t r;
	int first = 1;
	jw_lit(w, OTLP_DOC_HEAD);
	for (k = 0; k < n; k++)
		for (r = 0; r <= traces[k].n_resources; r++)
			otlp_resource_spans(w, &traces[k], r, &first);
	jw_lit(w, OTLP_DOC_TAIL);
}

/* -------------------------------------------------------- Zipkin ---- */

static const char *zipkin_kind(uint8_t kind)
{
	switch (kind) {
	case RETRACE_SPAN_SERVER: return "SERVER";
	case RETRACE_SPAN_CLIENT: return "CLIENT";
	case RETRACE_SPAN_PRODUCER: return "PRODUCER";
	case RETRACE_SPAN_CONSUMER: return "CONSUMER";
	default: return NULL; /* internal / unspecified: Zipkin has no kind */
	}
}

/* A tag value: Zipkin tags are strings only. */
static void zipkin_tag_value(struct jw *w, const struct rt_value *v)
{
	char tmp[40];
	switch (v->type) {
	case RT_VAL_STR:
		jw_str(w, v->u.s);
		return;
	case RT_VAL_INT:
		snprintf(tmp, sizeof tmp, "%" PRId64, v->u.i);
		break;
	case RT_VAL_DOUBLE:
		format_double(v->u.d, tmp, sizeof tmp);
		break;
	case RT_VAL_BOOL:
		snprintf(tmp, sizeof tmp, "%s", v->u.b ? "true" : "false");
		break;
	default:
		tmp[0] = 0;
		break;
	}
	jw_str(w, tmp);
}

static void zipkin_tags(struct jw *w)
{
	size_t i;
	int first = 1;
	if (!w->nkv)
		return;
	jw_lit(w, ",\"tags\":{");
	for (i = 0; i < w->nkv; i++) {
		if (kv_shadowed(w, i))
			continue;
		if (!first)
			jw_lit(w, ",");
		first = 0;
		jw_kv_key(w, &w->kv[i]);
		jw_lit(w, ":");
		zipkin_tag_value(w, &w->kv[i].v);
	}
	jw_lit(w, "}");
}

static void zipkin_gather_tags(struct jw *w, const struct rt_decoded_trace *t,
			       const struct rt_span *s)
{
	const struct rt_resource *res = s->resource < t->n_resources ? &t->resources[s->resource] : NULL;
	kv_reset(w);
	/* resource attributes first so the span's own win on a clash;
	 * service.name already is localEndpoint.serviceName */
	if (res)
		kv_attrs(w, res->attrs, res->n_attrs, "service.name");
	kv_attrs(w, s->attrs, s->n_attrs, NULL);
	if (s->status == RETRACE_STATUS_OK)
		kv_str(w, "otel.status_code", "OK");
	if (s->status == RETRACE_STATUS_ERROR) {
		kv_str(w, "otel.status_code", "ERROR");
		kv_str(w, "error", s->status_message ? s->status_message : "");
		kv_int(w, "retrace.status_code", s->status_code);
	}
	kv_span_facts(w, s);
}

/*
 * A span's times in Zipkin's microseconds. Every time is cut to the µs the same
 * way (floor of the Unix ns), so a log inside the span stays inside it: the end
 * is floor(end_ns), the duration end - start (at least 1, as Zipkin asks), and
 * annotation times are clamped into [start, start + duration].
 */
struct zipkin_times {
	uint64_t start_us, dur_us;
	int has_start, has_duration;
};

static struct zipkin_times zipkin_span_times(const struct rt_span *s)
{
	struct zipkin_times z = { 0 };
	z.has_start = s->start_ns != 0;
	z.start_us = s->start_ns / 1000;
	/* an unknown duration is absent */
	z.has_duration = z.has_start && !(s->flags & (RT_SPAN_NO_START | RT_SPAN_NO_END));
	if (z.has_duration) {
		uint64_t end_us = s->end_ns / 1000;
		z.dur_us = end_us > z.start_us ? end_us - z.start_us : 1;
	}
	return z;
}

static uint64_t zipkin_clamp(const struct zipkin_times *z, uint64_t us)
{
	if (z->has_start && us < z->start_us)
		return z->start_us;
	if (z->has_duration && us > z->start_us + z->dur_us)
		return z->start_us + z->dur_us;
	return us;
}

/* "LEVEL body" in a malloc'd string (NULL: out of memory). */
static char *annotation_value(const struct rt_log_event *l)
{
	const char *body = l->body ? l->body : "";
	const char *lvl = level_name(l->level);
	char *value = malloc(strlen(lvl) + strlen(body) + 2);
	if (value)
		sprintf(value, "%s %s", lvl, body);
	return value;
}

/*
 * How many earlier annotations of this span have the same time and value.
 * Zipkin keys an annotation by (timestamp, value) and drops repeats, so two
 * identical logs in one µs would become one; the second gets " (2)" instead.
 * Logs come in time order (the decoder sorts them, clamping keeps the order),
 * so the scan stops at the first earlier time.
 */
static unsigned annotation_repeats(const struct rt_span *s, const struct zipkin_times *z,
				   uint32_t i, uint64_t us, const char *value)
{
	unsigned same = 0;
	uint32_t j;
	for (j = i; j-- > 0;) {
		const struct rt_log_event *o = &s->logs[j];
		const char *body = o->body ? o->body : "";
		const char *lvl = level_name(o->level);
		size_t nl = strlen(lvl);
		if (zipkin_clamp(z, o->time_ns / 1000) != us)
			break;
		if (!strncmp(value, lvl, nl) && value[nl] == ' ' && !strcmp(value + nl + 1, body))
			same++;
	}
	return same;
}

static void zipkin_annotations(struct jw *w, const struct rt_span *s, const struct zipkin_times *z)
{
	uint32_t i;
	if (!s->n_logs || !s->logs)
		return;
	jw_lit(w, ",\"annotations\":[");
	for (i = 0; i < s->n_logs; i++) {
		const struct rt_log_event *l = &s->logs[i];
		uint64_t raw = l->time_ns / 1000, us = zipkin_clamp(z, raw);
		char *value = annotation_value(l);
		unsigned same;
		if (!value) {
			w->err = RT_WIRE_E_NOMEM;
			return;
		}
		if (us != raw)
			w->st.annotations_clamped++;
		rt_sink_printf(jw_sink, w, "%s{\"timestamp\":%" PRIu64 ",\"value\":", i ? "," : "", us);
		same = annotation_repeats(s, z, i, us, value);
		if (same) {
			char *v2 = malloc(strlen(value) + 16);
			if (!v2) {
				free(value);
				w->err = RT_WIRE_E_NOMEM;
				return;
			}
			sprintf(v2, "%s (%u)", value, same + 1);
			free(value);
			value = v2;
			w->st.annotations_renamed++;
		}
		jw_str(w, value);
		jw_lit(w, "}");
		free(value);
	}
	jw_lit(w, "]");
}

static void zipkin_span(struct jw *w, const struct rt_decoded_trace *t, const struct rt_span *s)
{
	const struct rt_resource *res = s->resource < t->n_resources ? &t->resources[s->resource] : NULL;
	const char *kind = zipkin_kind(s->kind);
	struct zipkin_times z = zipkin_span_times(s);
	span_head(w, s, "id", "parentId");
	if (kind)
		rt_sink_printf(jw_sink, w, ",\"kind\":\"%s\"", kind);
	if (z.has_start)
		rt_sink_printf(jw_sink, w, ",\"timestamp\":%" PRIu64, z.start_us);
	if (z.has_duration)
		rt_sink_printf(jw_sink, w, ",\"duration\":%" PRIu64, z.dur_us);
	jw_lit(w, ",\"localEndpoint\":{\"serviceName\":");
	jw_str(w, res && res->service && *res->service ? res->service : "unknown_service");
	jw_lit(w, "}");
	zipkin_gather_tags(w, t, s);
	zipkin_tags(w);
	zipkin_annotations(w, s, &z);
	jw_lit(w, "}");
}

static void write_zipkin(struct jw *w, const struct rt_decoded_trace *traces, size_t n)
{
	size_t k;
	uint32_t i;
	int first = 1;
	jw_lit(w, "[");
	for (k = 0; k < n; k++)
		for (i = 0; i < traces[k].n_spans; i++) {
			if (!first)
				jw_lit(w, ",");
			first = 0;
			zipkin_span(w, &traces[k], &traces[k].spans[i]);
		}
	jw_lit(w, "]\n");
}

/* -------------------------------------------------------- public ---- */

static void export_stats_add(struct rt_export_stats *sum, const struct rt_export_stats *st)
{
	sum->unnamed_spans += st->unnamed_spans;
	sum->unnamed_events += st->unnamed_events;
	sum->empty_keys_dropped += st->empty_keys_dropped;
	sum->unsigned_as_string += st->unsigned_as_string;
	sum->annotations_clamped += st->annotations_clamped;
	sum->annotations_renamed += st->annotations_renamed;
}

enum rt_export_format rt_export_format_parse(const char *name)
{
	if (!name)
		return 0;
	if (!strcmp(name, "otlp-json") || !strcmp(name, "otlp"))
		return RT_EXPORT_OTLP_JSON;
	if (!strcmp(name, "zipkin"))
		return RT_EXPORT_ZIPKIN;
	return 0;
}

int rt_export_write_stats(enum rt_export_format fmt, const struct rt_decoded_trace *traces,
			  size_t n, struct rt_wire_buf *out, struct rt_export_stats *st)
{
	struct jw w = { .b = out };
	size_t start;
	if (!out || (n && !traces))
		return RT_WIRE_E_INVAL;
	if (fmt != RT_EXPORT_OTLP_JSON && fmt != RT_EXPORT_ZIPKIN)
		return RT_WIRE_E_INVAL;
	start = out->len;
	if (fmt == RT_EXPORT_OTLP_JSON)
		write_otlp(&w, traces, n);
	else
		write_zipkin(&w, traces, n);
	free(w.kv);
	if (w.err)
		out->len = start;
	else if (st)
		export_stats_add(st, &w.st);
	return w.err;
}

int rt_export_write(enum rt_export_format fmt, const struct rt_decoded_trace *traces,
		    size_t n, struct rt_wire_buf *out)
{
	return rt_export_write_stats(fmt, traces, n, out, NULL);
}

/* ---------------------------------------------------------- push ---- */

static int status_is_retryable(uint16_t status)
{
	return status == 429 || status == 502 || status == 503 || status == 504;
}

static int error_is_connect(int rv)
{
	return rv == NNG_ECONNREFUSED || rv == NNG_EADDRINVAL || rv == NNG_EUNREACHABLE ||
	       rv == NNG_ECONNRESET || rv == NNG_ECONNSHUT || rv == NNG_ECLOSED;
}

/* "http://h:p" -> "http://h:p/v1/traces"; a URL with a path is kept. */
static int resolve_url(const char *url, nng_url **out, char *err, size_t errlen)
{
	nng_url *u = NULL;
	int rv = nng_url_parse(&u, url);
	if (rv != 0) {
		snprintf(err, errlen, "bad endpoint URL '%s': %s", url, nng_strerror(rv));
		return -1;
	}
	if (strcmp(u->u_scheme, "http") != 0) {
		snprintf(err, errlen, "bad endpoint URL '%s': only http:// is supported", url);
		nng_url_free(u);
		return -1;
	}
	if (!u->u_path[0] || !strcmp(u->u_path, "/")) {
		size_t n = strlen(url);
		char *with_path = malloc(n + sizeof "/v1/traces");
		if (!with_path) {
			nng_url_free(u);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		memcpy(with_path, url, n + 1);
		if (n && with_path[n - 1] == '/')
			with_path[--n] = 0;
		strcat(with_path, "/v1/traces");
		nng_url_free(u);
		rv = nng_url_parse(&u, with_path);
		free(with_path);
		if (rv != 0) {
			snprintf(err, errlen, "bad endpoint URL '%s': %s", url, nng_strerror(rv));
			return -1;
		}
	}
	*out = u;
	return 0;
}

/* One answer from the collector. */
struct answer {
	uint16_t status;
	char reason[128];
	char body[RT_PUSH_ERROR_BODY_MAX + 8];  /* the start of the body, sanitised */
	int has_retry_after;
	unsigned retry_after_ms;               /* already bounded */
	int partial;                           /* a partialSuccess with something in it */
	uint64_t rejected;
	char message[sizeof ((struct rt_push_result *)0)->message];
};

/* One push: the client, the options in force, where results go. */
struct push {
	nng_http_client *client;
	nng_url *url;
	unsigned attempts, backoff_ms, timeout_ms, max_retry_after_ms;
	int gzip;
	struct rt_push_result *res;
	char *err;
	size_t errlen;
	struct rt_wire_buf z;   /* the gzip'd body of the current request */
};

const char *rt_export_user_agent(void)
{
	return "retrace/" RETRACE_VERSION_STRING;
}

/*
 * Up to `cap` - 1 bytes of collector text, safe for a terminal and a log line:
 * printable ASCII is kept, runs of whitespace and control characters become
 * one space, other bytes '?'; cut text ends with "...".
 */
static void sanitise(const char *in, size_t len, char *out, size_t cap, size_t max)
{
	size_t i, n = 0;
	int space = 0;
	for (i = 0; i < len && n + 4 < cap && n < max; i++) {
		unsigned char c = (unsigned char)in[i];
		if (c < 0x20 || c == 0x7f || c == ' ') {
			space = n > 0;
			continue;
		}
		if (space)
			out[n++] = ' ';
		space = 0;
		out[n++] = c < 0x80 ? (char)c : '?';
	}
	if (i < len && n)
		memcpy(out + n, "...", 3), n += 3;
	out[n] = 0;
}

/* Retry-After: delay-seconds or an HTTP-date; bounded by cap. 0 or -1. */
static int parse_retry_after(const char *v, unsigned cap_ms, unsigned *ms)
{
	struct tm tm;
	while (*v == ' ' || *v == '\t')
		v++;
	if (*v >= '0' && *v <= '9') {
		char *end;
		unsigned long long sec = strtoull(v, &end, 10);
		while (*end == ' ' || *end == '\t')
			end++;
		if (*end)
			return -1;
		*ms = sec >= cap_ms / 1000 + 1 ? cap_ms : (unsigned)sec * 1000u;
		if (*ms > cap_ms)
			*ms = cap_ms;
		return 0;
	}
	memset(&tm, 0, sizeof tm);
	if (strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm)) {
		time_t when = timegm(&tm), now = time(NULL);
		unsigned long long sec = when > now ? (unsigned long long)(when - now) : 0;
		*ms = sec >= cap_ms / 1000 + 1 ? cap_ms : (unsigned)sec * 1000u;
		if (*ms > cap_ms)
			*ms = cap_ms;
		return 0;
	}
	return -1;
}

/* The JSON value after "key": in body (a tolerant look-up: the answer is a
 * small ExportTraceServiceResponse); NULL if absent. */
static const char *json_after_key(const char *body, size_t len, const char *key)
{
	size_t kl = strlen(key);
	const char *p = body, *end = body + len;
	while (p && p + kl + 2 <= end) {
		const char *q = memmem(p, (size_t)(end - p), key, kl);
		if (!q)
			return NULL;
		p = q + kl;
		if (q > body && q[-1] == '"' && p < end && *p == '"') {
			p++;
			while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
				p++;
			if (p < end && *p == ':') {
				p++;
				while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
					p++;
				return p < end ? p : NULL;
			}
		}
	}
	return NULL;
}

/*
 * OTLP/HTTP answers 200 with {"partialSuccess":{"rejectedSpans":"N",
 * "errorMessage":"..."}} when it dropped some spans (rejectedSpans is an int64:
 * a string in JSON, a bare number from some servers).
 */
static void parse_partial_success(const char *body, size_t len, struct answer *a)
{
	const char *ps = json_after_key(body, len, "partialSuccess"), *v, *end = body + len;
	if (!ps || *ps != '{')
		return;
	len = (size_t)(end - ps);
	if ((v = json_after_key(ps, len, "rejectedSpans")) != NULL) {
		if (*v == '"')
			v++;
		a->rejected = 0;
		while (v < end && *v >= '0' && *v <= '9' && a->rejected < UINT64_MAX / 10)
			a->rejected = a->rejected * 10 + (uint64_t)(*v++ - '0');
	}
	if ((v = json_after_key(ps, len, "errorMessage")) != NULL && *v == '"') {
		const char *q = ++v;
		while (q < end && *q != '"')
			q += *q == '\\' && q + 1 < end ? 2 : 1;
		sanitise(v, (size_t)(q - v), a->message, sizeof a->message, sizeof a->message - 4);
	}
	a->partial = a->rejected > 0 || a->message[0];
}

/* body gzip'd into out (RFC 1952). 0, or -1 when it cannot be (out of memory,
 * or a body too big for one deflate call). */
static int gzip_body(const void *body, size_t len, struct rt_wire_buf *out)
{
	z_stream zs;
	uLong bound;
	int rc;
	memset(&zs, 0, sizeof zs);
	if (len > (1u << 30))
		return -1;
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	bound = deflateBound(&zs, (uLong)len) + 32;
	out->len = 0;
	if (rt_wire_buf_reserve(out, bound) != 0) {
		deflateEnd(&zs);
		return -1;
	}
	zs.next_in = (Bytef *)(uintptr_t)body;
	zs.avail_in = (uInt)len;
	zs.next_out = out->data;
	zs.avail_out = (uInt)bound;
	rc = deflate(&zs, Z_FINISH);
	out->len = zs.total_out;
	deflateEnd(&zs);
	return rc == Z_STREAM_END ? 0 : -1;
}

/* Read what an answer says beyond its status. */
static void read_answer(struct push *p, nng_http_res *res, struct answer *a)
{
	const char *r = nng_http_res_get_reason(res), *ra;
	void *data = NULL;
	size_t len = 0;
	a->status = nng_http_res_get_status(res);
	snprintf(a->reason, sizeof a->reason, "%s", r ? r : "");
	nng_http_res_get_data(res, &data, &len);
	if (a->status >= 200 && a->status < 300) {
		if (data && len)
			parse_partial_success(data, len, a);
		return;
	}
	if (data && len)
		sanitise(data, len, a->body, sizeof a->body, RT_PUSH_ERROR_BODY_MAX);
	ra = nng_http_res_get_header(res, "Retry-After");
	if (ra && (a->status == 429 || a->status == 503) &&
	    parse_retry_after(ra, p->max_retry_after_ms, &a->retry_after_ms) == 0)
		a->has_retry_after = 1;
}

/* One POST. Returns 0 when an answer came (in *a), else an NNG error. */
static int post_once(struct push *p, const void *body, size_t len, struct answer *a)
{
	nng_http_req *req = NULL;
	nng_http_res *res = NULL;
	nng_aio *aio = NULL;
	int rv;
	if ((rv = nng_http_req_alloc(&req, p->url)) != 0 || (rv = nng_http_res_alloc(&res)) != 0 ||
	    (rv = nng_aio_alloc(&aio, NULL, NULL)) != 0)
		goto out;
	if ((rv = nng_http_req_set_method(req, "POST")) != 0 ||
	    (rv = nng_http_req_set_header(req, "Content-Type", "application/json")) != 0 ||
	    (rv = nng_http_req_set_header(req, "User-Agent", rt_export_user_agent())) != 0 ||
	    (p->gzip && (rv = nng_http_req_set_header(req, "Content-Encoding", "gzip")) != 0) ||
	    (rv = nng_http_req_copy_data(req, body, len)) != 0)
		goto out;
	nng_aio_set_timeout(aio, (nng_duration)p->timeout_ms);
	nng_http_client_transact(p->client, req, res, aio);
	nng_aio_wait(aio);
	if ((rv = nng_aio_result(aio)) == 0)
		read_answer(p, res, a);
out:
	if (aio)
		nng_aio_free(aio);
	if (res)
		nng_http_res_free(res);
	if (req)
		nng_http_req_free(req);
	return rv;
}

/* ": the collector said: ..." when it said something. */
static void said(const struct answer *a, char *out, size_t cap)
{
	if (a->body[0])
		snprintf(out, cap, "; the collector said: %s", a->body);
	else
		out[0] = 0;
}

static void push_error(struct push *p, int rv, const struct answer *a, unsigned made)
{
	char extra[RT_PUSH_ERROR_BODY_MAX + 64], before[160] = "";
	const char *u = p->url->u_rawurl;
	said(a, extra, sizeof extra);
	if (p->res->requests)
		snprintf(before, sizeof before, " (%" PRIu64 " earlier request%s with %" PRIu64
			 " spans were accepted)", p->res->requests, p->res->requests == 1 ? "" : "s",
			 p->res->spans_sent);
	if (rv == 0 && !status_is_retryable(a->status))
		snprintf(p->err, p->errlen, "%s refused the export: HTTP %u %s%s%s", u, a->status,
			 a->reason, extra, before);
	else if (rv == 0)
		snprintf(p->err, p->errlen, "%s answered HTTP %u %s after %u attempts%s%s", u,
			 a->status, a->reason, made, extra, before);
	else if (error_is_connect(rv))
		snprintf(p->err, p->errlen, "cannot connect to %s: %s after %u attempt%s%s", u,
			 nng_strerror(rv), made, made == 1 ? "" : "s", before);
	else
		snprintf(p->err, p->errlen, "export to %s failed: %s after %u attempt%s%s", u,
			 nng_strerror(rv), made, made == 1 ? "" : "s", before);
}

/*
 * One request body (JSON), gzip'd unless turned off, tried up to `attempts`
 * times. The wait before a retry is the collector's Retry-After (429/503,
 * bounded) or else the doubling backoff. 0 or -1 (p->err set).
 */
static int push_request(struct push *p, const void *body, size_t len, uint64_t spans)
{
	const void *data = body;
	size_t dlen = len;
	unsigned backoff = p->backoff_ms, made;
	struct answer a;
	int rv = 0;
	memset(&a, 0, sizeof a);
	if (p->gzip) {
		if (gzip_body(body, len, &p->z) != 0) {
			snprintf(p->err, p->errlen, "cannot compress the export (out of memory?)");
			return -1;
		}
		data = p->z.data;
		dlen = p->z.len;
	}
	for (made = 0; made < p->attempts;) {
		if (made) {
			nng_msleep((nng_duration)(a.has_retry_after ? a.retry_after_ms : backoff));
			backoff = backoff > 60000 ? backoff : backoff * 2;
		}
		memset(&a, 0, sizeof a);
		made++;
		rv = post_once(p, data, dlen, &a);
		if (rv == NNG_ENOMEM)
			break;
		if (rv != 0)
			continue; /* no answer: worth another try */
		if ((a.status >= 200 && a.status < 300) || !status_is_retryable(a.status))
			break;
	}
	if (rv != 0 || a.status < 200 || a.status >= 300) {
		push_error(p, rv, &a, made);
		return -1;
	}
	p->res->requests++;
	p->res->spans_sent += spans;
	p->res->bytes += len;
	p->res->bytes_sent += dlen;
	if (a.partial) {
		p->res->partial_answers++;
		p->res->rejected_spans += a.rejected;
		if (!p->res->message[0])
			snprintf(p->res->message, sizeof p->res->message, "%s", a.message);
	}
	return 0;
}

static int push_open(struct push *p, const char *url, const struct rt_push_options *opt,
		     struct rt_push_result *res, char *err, size_t errlen)
{
	int rv;
	memset(p, 0, sizeof *p);
	p->attempts = opt && opt->attempts ? opt->attempts : 3;
	p->backoff_ms = opt && opt->backoff_ms ? opt->backoff_ms : 200;
	p->timeout_ms = opt && opt->timeout_ms ? opt->timeout_ms : 5000;
	p->max_retry_after_ms = opt && opt->max_retry_after_ms ? opt->max_retry_after_ms
								: RT_PUSH_DEFAULT_MAX_RETRY_AFTER_MS;
	p->gzip = !(opt && opt->no_gzip);
	p->res = res;
	p->err = err;
	p->errlen = errlen;
	memset(res, 0, sizeof *res);
	err[0] = 0;
	if (!url) {
		snprintf(err, errlen, "bad argument");
		return -1;
	}
	if (resolve_url(url, &p->url, err, errlen) != 0)
		return -1;
	if ((rv = nng_http_client_alloc(&p->client, p->url)) != 0) {
		snprintf(err, errlen, "cannot export to %s: %s", url, nng_strerror(rv));
		nng_url_free(p->url);
		return -1;
	}
	return 0;
}

static void push_close(struct push *p)
{
	if (p->client)
		nng_http_client_free(p->client);
	if (p->url)
		nng_url_free(p->url);
	rt_wire_buf_free(&p->z);
}

/* The push entry points' optional arguments: a NULL result or error buffer
 * gets a stand-in; a missing body is refused. 0, or -1 with the message. */
static int push_args(struct rt_push_result **res, struct rt_push_result *own, char **err,
		     size_t *errlen, char *dummy, int bad)
{
	if (!*err || !*errlen) {
		*err = dummy;
		*errlen = 1;
	}
	if (!*res)
		*res = own;
	if (bad) {
		memset(*res, 0, sizeof **res);
		snprintf(*err, *errlen, "bad argument");
		return -1;
	}
	return 0;
}

int rt_export_push(const char *url, const void *body, size_t len,
		   const struct rt_push_options *opt, struct rt_push_result *res, char *err,
		   size_t errlen)
{
	struct rt_push_result own;
	struct push p;
	char dummy[1];
	int rc;
	if (push_args(&res, &own, &err, &errlen, dummy, len && !body) != 0 ||
	    push_open(&p, url, opt, res, err, errlen) != 0)
		return -1;
	rc = push_request(&p, body, len, 0);
	push_close(&p);
	return rc;
}

/* ------------------------------------------------------- batches ---- */

/*
 * The batcher builds one OTLP document at a time, span by span, in the order
 * rt_export_write uses. Each span is rendered on its own first so its size is
 * known; when adding it (with its resource's opening, if the batch does not
 * have that one open) would take the document over the limit, the document is
 * closed and sent, and a new one starts with the span's resource reopened. A
 * span bigger than the limit on its own goes alone.
 */
struct batcher {
	struct push *p;
	struct jw w;
	struct rt_wire_buf doc, span, head;
	size_t max;
	uint64_t doc_spans;
	const struct rt_decoded_trace *open_t; /* the resource open at the end of doc */
	uint32_t open_r;
	int open;
};

#define LIT_LEN(s) (sizeof(s) - 1)

static int batcher_render(struct batcher *b)
{
	if (b->w.err) {
		snprintf(b->p->err, b->p->errlen, "out of memory writing the export");
		return -1;
	}
	return 0;
}

static int batcher_append(struct batcher *b, const void *data, size_t n)
{
	if (rt_wire_buf_reserve(&b->doc, n) != 0) {
		snprintf(b->p->err, b->p->errlen, "out of memory writing the export");
		return -1;
	}
	memcpy(b->doc.data + b->doc.len, data, n);
	b->doc.len += n;
	return 0;
}

static int batcher_reset(struct batcher *b)
{
	b->doc.len = 0;
	b->doc_spans = 0;
	b->open = 0;
	return batcher_append(b, OTLP_DOC_HEAD, LIT_LEN(OTLP_DOC_HEAD));
}

static int batcher_flush(struct batcher *b)
{
	if (!b->doc_spans)
		return 0;
	if ((b->open && batcher_append(b, OTLP_RESOURCE_TAIL, LIT_LEN(OTLP_RESOURCE_TAIL)) != 0) ||
	    batcher_append(b, OTLP_DOC_TAIL, LIT_LEN(OTLP_DOC_TAIL)) != 0)
		return -1;
	if (push_request(b->p, b->doc.data, b->doc.len, b->doc_spans) != 0)
		return -1;
	return batcher_reset(b);
}

static int batcher_head(struct batcher *b, const struct rt_decoded_trace *t, uint32_t r)
{
	b->head.len = 0;
	b->w.b = &b->head;
	otlp_resource_head(&b->w, t, r);
	return batcher_render(b);
}

static int batcher_add(struct batcher *b, const struct rt_decoded_trace *t, uint32_t r,
		       const struct rt_span *s)
{
	const size_t tails = LIT_LEN(OTLP_RESOURCE_TAIL) + LIT_LEN(OTLP_DOC_TAIL);
	int same = b->open && b->open_t == t && b->open_r == r;
	size_t add;
	b->span.len = 0;
	b->w.b = &b->span;
	otlp_span(&b->w, s);
	if (batcher_render(b) != 0 || (!same && batcher_head(b, t, r) != 0))
		return -1;
	add = same ? 1 + b->span.len
		   : (b->open ? LIT_LEN(OTLP_RESOURCE_TAIL) + 1 : 0) + b->head.len + b->span.len;
	if (b->doc_spans && b->doc.len + add + tails > b->max) {
		if (batcher_flush(b) != 0 || (same && batcher_head(b, t, r) != 0))
			return -1;
		same = 0;
	}
	if (same) {
		if (batcher_append(b, ",", 1) != 0)
			return -1;
	} else {
		if (b->open && batcher_append(b, OTLP_RESOURCE_TAIL ",", LIT_LEN(OTLP_RESOURCE_TAIL) + 1))
			return -1;
		if (batcher_append(b, b->head.data, b->head.len) != 0)
			return -1;
		b->open = 1;
		b->open_t = t;
		b->open_r = r;
	}
	if (batcher_append(b, b->span.data, b->span.len) != 0)
		return -1;
	b->doc_spans++;
	return 0;
}

static int batcher_run(struct batcher *b, const struct rt_decoded_trace *traces, size_t n)
{
	size_t k;
	uint32_t r, i;
	if (batcher_reset(b) != 0)
		return -1;
	for (k = 0; k < n; k++)
		for (r = 0; r <= traces[k].n_resources; r++)
			for (i = 0; i < traces[k].n_spans; i++)
				if (span_in_group(&traces[k], &traces[k].spans[i], r) &&
				    batcher_add(b, &traces[k], r, &traces[k].spans[i]) != 0)
					return -1;
	return batcher_flush(b);
}

int rt_export_push_traces(const char *url, const struct rt_decoded_trace *traces, size_t n,
			  const struct rt_push_options *opt, struct rt_push_result *res,
			  char *err, size_t errlen)
{
	struct rt_push_result own;
	struct batcher b;
	struct push p;
	char dummy[1];
	int rc;
	if (push_args(&res, &own, &err, &errlen, dummy, n && !traces) != 0 ||
	    push_open(&p, url, opt, res, err, errlen) != 0)
		return -1;
	memset(&b, 0, sizeof b);
	b.p = &p;
	b.max = opt && opt->max_request_bytes ? opt->max_request_bytes
					       : RT_PUSH_DEFAULT_MAX_REQUEST_BYTES;
	rc = batcher_run(&b, traces, n);
	export_stats_add(&res->mended, &b.w.st);
	free(b.w.kv);
	rt_wire_buf_free(&b.doc);
	rt_wire_buf_free(&b.span);
	rt_wire_buf_free(&b.head);
	push_close(&p);
	return rc;
}
