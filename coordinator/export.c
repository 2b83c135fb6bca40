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
 * The push uses nng's HTTP client: one transaction (connect, POST, read the
 * answer, close) per attempt, with a timeout on the aio, and a doubling
 * backoff between attempts that are worth repeating.
 */
#include "export.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <nng/supplemental/util/platform.h>

#include "daemon/json.h"
#include "retrace/tracer.h"

/* ------------------------------------------------------ JSON writer ---- */

struct kv {
	const char *key;
	int key_index;          /* >= 0: the key is printf(key, key_index) */
	struct rt_value v;
};

struct jw {
	struct rt_wire_buf *b;
	int err;                /* first failure (RT_WIRE_E_NOMEM), sticky */
	struct kv *kv;          /* scratch list for attributes / tags */
	size_t nkv, kvcap;
};

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

static void jw_fmt(struct jw *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jw_fmt(struct jw *w, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	int n;
	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n > 0)
		jw_raw(w, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
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
		jw_fmt(w, "\"%016" PRIx64 "%016" PRIx64 "\"", hi, lo);
	else
		jw_fmt(w, "\"%016" PRIx64 "\"", lo);
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

static void kv_add(struct jw *w, const char *key, int key_index, struct rt_value v)
{
	if (w->err)
		return;
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
	w->kv[w->nkv++] = (struct kv){ key ? key : "", key_index, v };
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

/* An OTLP AnyValue. */
static void otlp_value(struct jw *w, const struct rt_value *v)
{
	switch (v->type) {
	case RT_VAL_STR:
		jw_lit(w, "{\"stringValue\":");
		jw_str(w, v->u.s);
		jw_lit(w, "}");
		break;
	case RT_VAL_INT:
		jw_fmt(w, "{\"intValue\":\"%" PRId64 "\"}", v->u.i);
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
		otlp_value(w, &w->kv[i].v);
		jw_lit(w, "}");
	}
	jw_lit(w, "]");
}

static const char *level_name(uint8_t level)
{
	static const char *names[] = { "DEBUG", "INFO", "WARN", "ERROR" };
	return level < 4 ? names[level] : "LOG";
}

static void otlp_event(struct jw *w, const struct rt_log_event *l)
{
	char tid[24];
	uint32_t a;
	jw_fmt(w, "{\"timeUnixNano\":\"%" PRIu64 "\",\"name\":", l->time_ns);
	jw_str(w, l->body);
	kv_reset(w);
	kv_str(w, "log.severity", level_name(l->level));
	if (l->template_text)
		kv_str(w, "log.template", l->template_text);
	snprintf(tid, sizeof tid, "%016" PRIx64, l->template_id);
	if (l->template_id)
		kv_str(w, "log.template_id", tid);
	if (l->flags & RT_LOG_TEMPLATE_MISSING)
		kv_bool(w, "log.template_missing", 1);
	for (a = 0; l->args && a < l->n_args && a < 1000000; a++)
		kv_add(w, "log.args.%d", (int)a, l->args[a]);
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
	jw_fmt(w, ",\"%s\":", id_key);
	jw_hex_id(w, 0, s->span_id, 0);
	if (s->parent_id) {
		jw_fmt(w, ",\"%s\":", parent_key);
		jw_hex_id(w, 0, s->parent_id, 0);
	}
	jw_lit(w, ",\"name\":");
	jw_str(w, s->name);
}

static void otlp_span(struct jw *w, const struct rt_span *s)
{
	uint32_t i;
	span_head(w, s, "spanId", "parentSpanId");
	jw_fmt(w, ",\"kind\":%u,\"startTimeUnixNano\":\"%" PRIu64 "\",\"endTimeUnixNano\":\"%" PRIu64
	       "\"", otlp_kind(s->kind), s->start_ns, s->end_ns);
	kv_reset(w);
	kv_attrs(w, s->attrs, s->n_attrs, NULL);
	kv_int(w, "retrace.agent_id", s->agent_id);
	if (s->status == RETRACE_STATUS_ERROR)
		kv_int(w, "retrace.status_code", s->status_code);
	if (s->flags & RT_SPAN_PARTIAL)
		kv_bool(w, "retrace.partial", 1);
	if (s->flags & RT_SPAN_NO_START)
		kv_bool(w, "retrace.no_start", 1);
	if (s->flags & RT_SPAN_NO_END)
		kv_bool(w, "retrace.no_end", 1);
	if (s->flags & RT_SPAN_UNMATCHED)
		kv_bool(w, "retrace.unmatched", 1);
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
	jw_fmt(w, ",\"status\":{\"code\":%u", s->status <= RETRACE_STATUS_ERROR ? s->status : 0);
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

/* One resourceSpans entry: the spans of resource r, or nothing if it has none. */
static void otlp_resource_spans(struct jw *w, const struct rt_decoded_trace *t, uint32_t r,
				int *first)
{
	const struct rt_resource *res = r < t->n_resources ? &t->resources[r] : NULL;
	uint32_t i;
	int any = 0;
	for (i = 0; i < t->n_spans; i++) {
		if (!span_in_group(t, &t->spans[i], r))
			continue;
		if (!any) {
			jw_lit(w, *first ? "{\"resource\":{" : ",{\"resource\":{");
			*first = 0;
			kv_reset(w);
			/* the decoder includes service.name; a hand-made trace may not */
			if (!res || !has_key(res->attrs, res->n_attrs, "service.name"))
				kv_str(w, "service.name",
				       res && res->service ? res->service : "unknown_service");
			if (res)
				kv_attrs(w, res->attrs, res->n_attrs, NULL);
			otlp_attributes(w, 0);
			jw_lit(w, "},\"scopeSpans\":[{\"scope\":{\"name\":\"retrace\"},\"spans\":[");
			any = 1;
		} else {
			jw_lit(w, ",");
		}
		otlp_span(w, &t->spans[i]);
	}
	if (any)
		jw_lit(w, "]}]}");
}

static void write_otlp(struct jw *w, const struct rt_decoded_trace *traces, size_t n)
{
	size_t k;
	uint32_t r;
	int first = 1;
	jw_lit(w, "{\"resourceSpans\":[");
	for (k = 0; k < n; k++)
		for (r = 0; r <= traces[k].n_resources; r++)
			otlp_resource_spans(w, &traces[k], r, &first);
	jw_lit(w, "]}\n");
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
	kv_int(w, "retrace.agent_id", s->agent_id);
	if (s->flags & RT_SPAN_PARTIAL)
		kv_bool(w, "retrace.partial", 1);
	if (s->flags & RT_SPAN_NO_START)
		kv_bool(w, "retrace.no_start", 1);
	if (s->flags & RT_SPAN_NO_END)
		kv_bool(w, "retrace.no_end", 1);
	if (s->flags & RT_SPAN_UNMATCHED)
		kv_bool(w, "retrace.unmatched", 1);
}

static void zipkin_annotations(struct jw *w, const struct rt_span *s)
{
	uint32_t i;
	if (!s->n_logs || !s->logs)
		return;
	jw_lit(w, ",\"annotations\":[");
	for (i = 0; i < s->n_logs; i++) {
		const struct rt_log_event *l = &s->logs[i];
		const char *body = l->body ? l->body : "";
		const char *lvl = level_name(l->level);
		char *value = malloc(strlen(lvl) + strlen(body) + 2);
		if (!value) {
			w->err = RT_WIRE_E_NOMEM;
			return;
		}
		sprintf(value, "%s %s", lvl, body);
		jw_fmt(w, "%s{\"timestamp\":%" PRIu64 ",\"value\":", i ? "," : "", l->time_ns / 1000);
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
	span_head(w, s, "id", "parentId");
	if (kind)
		jw_fmt(w, ",\"kind\":\"%s\"", kind);
	if (s->start_ns) {
		uint64_t dur_us = s->end_ns > s->start_ns ? (s->end_ns - s->start_ns) / 1000 : 0;
		jw_fmt(w, ",\"timestamp\":%" PRIu64, s->start_ns / 1000);
		/* Zipkin: an unknown duration is absent; under 1 µs rounds up to 1 */
		if (!(s->flags & (RT_SPAN_NO_START | RT_SPAN_NO_END)))
			jw_fmt(w, ",\"duration\":%" PRIu64, dur_us ? dur_us : 1);
	}
	jw_lit(w, ",\"localEndpoint\":{\"serviceName\":");
	jw_str(w, res && res->service ? res->service : "unknown_service");
	jw_lit(w, "}");
	zipkin_gather_tags(w, t, s);
	zipkin_tags(w);
	zipkin_annotations(w, s);
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

int rt_export_write(enum rt_export_format fmt, const struct rt_decoded_trace *traces,
		    size_t n, struct rt_wire_buf *out)
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
	return w.err;
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

/* One POST. Returns 0 with *status set when an answer came, else an NNG error. */
static int post_once(nng_http_client *client, nng_url *url, const void *body, size_t len,
		     unsigned timeout_ms, uint16_t *status, char *reason, size_t reason_len)
{
	nng_http_req *req = NULL;
	nng_http_res *res = NULL;
	nng_aio *aio = NULL;
	int rv;
	if ((rv = nng_http_req_alloc(&req, url)) != 0 || (rv = nng_http_res_alloc(&res)) != 0 ||
	    (rv = nng_aio_alloc(&aio, NULL, NULL)) != 0)
		goto out;
	if ((rv = nng_http_req_set_method(req, "POST")) != 0 ||
	    (rv = nng_http_req_set_header(req, "Content-Type", "application/json")) != 0 ||
	    (rv = nng_http_req_copy_data(req, body, len)) != 0)
		goto out;
	nng_aio_set_timeout(aio, timeout_ms ? (nng_duration)timeout_ms : 5000);
	nng_http_client_transact(client, req, res, aio);
	nng_aio_wait(aio);
	if ((rv = nng_aio_result(aio)) == 0) {
		const char *r = nng_http_res_get_reason(res);
		*status = nng_http_res_get_status(res);
		snprintf(reason, reason_len, "%s", r ? r : "");
	}
out:
	if (aio)
		nng_aio_free(aio);
	if (res)
		nng_http_res_free(res);
	if (req)
		nng_http_req_free(req);
	return rv;
}

int rt_export_push(const char *url, const void *body, size_t len,
		   const struct rt_push_options *opt, char *err, size_t errlen)
{
	unsigned attempts = opt && opt->attempts ? opt->attempts : 3;
	unsigned backoff = opt && opt->backoff_ms ? opt->backoff_ms : 200;
	unsigned timeout = opt && opt->timeout_ms ? opt->timeout_ms : 5000;
	char reason[128] = "", dummy[1];
	nng_http_client *client = NULL;
	nng_url *u = NULL;
	uint16_t status = 0;
	unsigned made = 0;
	int rv = 0;
	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof dummy;
	}
	err[0] = 0;
	if (!url || (len && !body)) {
		snprintf(err, errlen, "bad argument");
		return -1;
	}
	if (resolve_url(url, &u, err, errlen) != 0)
		return -1;
	if ((rv = nng_http_client_alloc(&client, u)) != 0) {
		snprintf(err, errlen, "cannot export to %s: %s", url, nng_strerror(rv));
		nng_url_free(u);
		return -1;
	}
	for (made = 0; made < attempts;) {
		if (made) {
			nng_msleep((nng_duration)backoff);
			backoff = backoff > 60000 ? backoff : backoff * 2;
		}
		status = 0;
		made++;
		rv = post_once(client, u, body, len, timeout, &status, reason, sizeof reason);
		if (rv == NNG_ENOMEM)
			break;
		if (rv != 0)
			continue; /* no answer: worth another try */
		if (status >= 200 && status < 300)
			break;
		if (!status_is_retryable(status))
			break;
	}
	nng_http_client_free(client);
	if (rv == 0 && status >= 200 && status < 300) {
		nng_url_free(u);
		return 0;
	}
	if (rv == 0 && !status_is_retryable(status))
		snprintf(err, errlen, "%s refused the export: HTTP %u %s", u->u_rawurl, status, reason);
	else if (rv == 0)
		snprintf(err, errlen, "%s answered HTTP %u %s after %u attempts", u->u_rawurl, status,
			 reason, made);
	else if (error_is_connect(rv))
		snprintf(err, errlen, "cannot connect to %s: %s after %u attempt%s", u->u_rawurl,
			 nng_strerror(rv), made, made == 1 ? "" : "s");
	else
		snprintf(err, errlen, "export to %s failed: %s after %u attempt%s", u->u_rawurl,
			 nng_strerror(rv), made, made == 1 ? "" : "s");
	nng_url_free(u);
	return -1;
}
