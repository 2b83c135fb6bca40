/*
 * tests/coordinator/test_export.c — OTLP/JSON and Zipkin writers, and the push.
 *
 * The writers are fed one hand-built rt_decoded_trace (no decoder involved):
 * two resources on two agents, four spans with a parent link across hosts,
 * attributes of all four types, an ERROR status, logs with and without a
 * template, a partial span and strings that need escaping. The output is
 * parsed back with jansson (which also rejects invalid UTF-8) and compared
 * field by field with what the OTLP JSON mapping and the Zipkin v2 model say.
 *
 * Mended values (unsigned log arguments above INT64_MAX, empty names and keys,
 * an unknown kind, Zipkin annotation times and repeats) are checked on small
 * variations of that trace.
 *
 * The push tests run nng's own HTTP server in the test process on a port the
 * kernel picks; it keeps every request (gunzipped when it says gzip, with its
 * headers and arrival time) and answers from a script (status, Retry-After,
 * body). Batching is checked span by span against the single document.
 */
#include <check.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <zlib.h>

#include "common/gunzip.h"
#include "common/suite.h"
#include "export.h"

/* ------------------------------------------------------- the trace ---- */

#define T0 1700000000123456789ull /* Unix ns */
#define MS 1000000ull
#define TRACE_HI 0x0af7651916cd43ddull
#define TRACE_LO 0x8448eb211c80319cull
#define TRACE_HEX "0af7651916cd43dd8448eb211c80319c"

/* say "hi"<LF>\<TAB>, a control char, é (valid UTF-8), a stray 0xFF */
#define NOTE_RAW "say \"hi\"\n\\\t\x01 \xc3\xa9 \xff!"
#define NOTE_DECODED "say \"hi\"\n\\\t\x01 \xc3\xa9 \xef\xbf\xbd!"

#define STR(v) { .type = RT_VAL_STR, .u.s = (v) }
#define INT(v) { .type = RT_VAL_INT, .u.i = (v) }
#define DBL(v) { .type = RT_VAL_DOUBLE, .u.d = (v) }
#define BOOL(v) { .type = RT_VAL_BOOL, .u.b = (v) }

static struct rt_attr res0_attrs[] = {
	{ "service.name", STR("frontend") },
	{ "host.name", STR("web-1") },
	{ "process.pid", INT(100) },
};
static struct rt_attr res1_attrs[] = {
	{ "service.name", STR("cart") },
	{ "host.name", STR("db-1") },
	{ "process.pid", INT(200) },
};
static struct rt_resource resources[] = {
	{ .agent_id = 1, .pid = 100, .service = "frontend", .host = "web-1", .attrs = res0_attrs,
	  .n_attrs = 3 },
	{ .agent_id = 2, .pid = 200, .service = "cart", .host = "db-1", .attrs = res1_attrs,
	  .n_attrs = 3 },
};

static struct rt_attr s0_attrs[] = {
	{ "http.method", STR("GET") },
	{ "http.status_code", INT(200) },
	{ "sample.ratio", DBL(0.25) },
	{ "cache.hit", BOOL(1) },
	{ "big", INT(INT64_MIN) },
};
static struct rt_value s0_log_args[] = { STR("alice") };
static struct rt_log_event s0_logs[] = {
	{ .time_ns = T0 + 500000, .level = 1, .template_id = 0xabc,
	  .template_text = "user %s checkout", .body = "user alice checkout", .args = s0_log_args,
	  .n_args = 1 },
};
static struct rt_attr s1_attrs[] = { { "note", STR(NOTE_RAW) } };
static struct rt_value s2_log_args[] = { INT(7) };
static struct rt_log_event s2_logs[] = {
	{ .time_ns = T0 + 2 * MS + 1500, .level = 2, .body = "retrying" },
	{ .time_ns = T0 + 4 * MS, .level = 3, .template_id = 0xdeadbeef,
	  .body = "<template 0x00000000deadbeef> 7", .args = s2_log_args, .n_args = 1,
	  .flags = RT_LOG_TEMPLATE_MISSING },
};
static struct rt_attr s3_attrs[] = { { "k", STR("a") }, { "k", STR("b") } };

static struct rt_span spans[] = {
	{ TRACE_HI, TRACE_LO, 0x1111, 0, -1, "GET /checkout", 2, T0, T0 + 10 * MS, 1, 0, "",
	  s0_attrs, 5, s0_logs, 1, 0, 1, 100, 101, 0, RT_SPAN_P16_ALWAYS, 0 },
	{ TRACE_HI, TRACE_LO, 0x2222, 0x1111, 0, "cart.get", 3, T0 + 1 * MS, T0 + 6 * MS, 0, 0,
	  "", s1_attrs, 1, NULL, 0, 0, 1, 100, 101, 0, RT_SPAN_P16_ALWAYS, 0 },
	{ TRACE_HI, TRACE_LO, 0x3333, 0x2222, 1, "cart.lookup", 2, T0 + 2 * MS, T0 + 5 * MS, 2,
	  503, "out of stock", NULL, 0, s2_logs, 2, 1, 2, 200, 201, 0, RT_SPAN_P16_ALWAYS, 0 },
	{ TRACE_HI, TRACE_LO, 0x4444, 0x3333, 2, "db.query", 1, T0 + 3 * MS, T0 + 3 * MS + 500, 0,
	  0, "", s3_attrs, 2, NULL, 0, 1, 2, 200, 202, RT_SPAN_PARTIAL, RT_SPAN_P16_ALWAYS, 0 },
};
static uint32_t agents[] = { 1, 2 };

static struct rt_decoded_trace make_trace(void)
{
	struct rt_decoded_trace t = { 0 };
	t.trace_hi = TRACE_HI;
	t.trace_lo = TRACE_LO;
	t.spans = spans;
	t.n_spans = 4;
	t.resources = resources;
	t.n_resources = 2;
	t.agents = agents;
	t.n_agents = 2;
	return t;
}

/* ------------------------------------------------------- helpers ---- */

static json_t *export_json(enum rt_export_format fmt, struct rt_wire_buf *b)
{
	struct rt_decoded_trace t = make_trace();
	json_error_t e;
	json_t *j;
	ck_assert_int_eq(rt_export_write(fmt, &t, 1, b), 0);
	j = json_loadb((const char *)b->data, b->len, 0, &e);
	ck_assert_msg(j != NULL, "not JSON: %s at %d: %.*s", e.text, e.position, (int)b->len,
		      (const char *)b->data);
	return j;
}

static const char *jstr(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	ck_assert_msg(json_is_string(v), "%s is not a string", key);
	return json_string_value(v);
}

static json_int_t jint(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	ck_assert_msg(json_is_integer(v), "%s is not an integer", key);
	return json_integer_value(v);
}

/* The value object of key in an OTLP attribute list (NULL if absent; fails if
 * the key appears twice). */
static json_t *otlp_attr(json_t *attrs, const char *key)
{
	json_t *found = NULL, *a;
	size_t i;
	json_array_foreach(attrs, i, a) {
		if (!strcmp(jstr(a, "key"), key)) {
			ck_assert_msg(!found, "attribute %s twice", key);
			found = json_object_get(a, "value");
		}
	}
	return found;
}

static void check_attr_str(json_t *attrs, const char *key, const char *want)
{
	json_t *v = otlp_attr(attrs, key);
	ck_assert_msg(v, "no attribute %s", key);
	ck_assert_int_eq(json_object_size(v), 1);
	ck_assert_str_eq(jstr(v, "stringValue"), want);
}

static void check_attr_int(json_t *attrs, const char *key, const char *want)
{
	json_t *v = otlp_attr(attrs, key);
	ck_assert_msg(v, "no attribute %s", key);
	ck_assert_int_eq(json_object_size(v), 1);
	ck_assert_str_eq(jstr(v, "intValue"), want); /* 64-bit ints are strings */
}

static void check_attr_bool(json_t *attrs, const char *key, int want)
{
	json_t *v = otlp_attr(attrs, key);
	ck_assert_msg(v, "no attribute %s", key);
	ck_assert(json_is_boolean(json_object_get(v, "boolValue")));
	ck_assert_int_eq(json_is_true(json_object_get(v, "boolValue")), want);
}

static char *u64s(uint64_t v, char *out)
{
	sprintf(out, "%llu", (unsigned long long)v);
	return out;
}

/* ------------------------------------------------------- OTLP ---- */

static json_t *otlp_span_at(json_t *doc, size_t rs, size_t i)
{
	json_t *r = json_array_get(json_object_get(doc, "resourceSpans"), rs);
	json_t *ss = json_array_get(json_object_get(r, "scopeSpans"), 0);
	return json_array_get(json_object_get(ss, "spans"), i);
}

START_TEST(otlp_resources_and_scope)
{
	struct rt_wire_buf b = { 0 };
	json_t *doc = export_json(RT_EXPORT_OTLP_JSON, &b);
	json_t *rss = json_object_get(doc, "resourceSpans");
	const char *svc[] = { "frontend", "cart" }, *host[] = { "web-1", "db-1" };
	const char *pid[] = { "100", "200" };
	size_t nspans[] = { 2, 2 }, i;
	ck_assert_int_eq(json_object_size(doc), 1);
	ck_assert_int_eq(json_array_size(rss), 2);
	for (i = 0; i < 2; i++) {
		json_t *r = json_array_get(rss, i);
		json_t *attrs = json_object_get(json_object_get(r, "resource"), "attributes");
		json_t *ss = json_object_get(r, "scopeSpans");
		ck_assert_int_eq(json_array_size(attrs), 3);
		check_attr_str(attrs, "service.name", svc[i]);
		check_attr_str(attrs, "host.name", host[i]);
		check_attr_int(attrs, "process.pid", pid[i]);
		ck_assert_int_eq(json_array_size(ss), 1);
		ck_assert_str_eq(jstr(json_object_get(json_array_get(ss, 0), "scope"), "name"), "retrace");
		ck_assert_int_eq(json_array_size(json_object_get(json_array_get(ss, 0), "spans")),
				 nspans[i]);
	}
	json_decref(doc);
	rt_wire_buf_free(&b);
}
END_TEST

START_TEST(otlp_root_span_fields)
{
	struct rt_wire_buf b = { 0 };
	json_t *doc = export_json(RT_EXPORT_OTLP_JSON, &b);
	json_t *s = otlp_span_at(doc, 0, 0), *attrs, *ev, *eattrs, *st;
	char num[32];
	ck_assert_str_eq(jstr(s, "traceId"), TRACE_HEX);
	ck_assert_str_eq(jstr(s, "spanId"), "0000000000001111");
	ck_assert_ptr_null(json_object_get(s, "parentSpanId"));
	ck_assert_str_eq(jstr(s, "name"), "GET /checkout");
	ck_assert_int_eq(jint(s, "kind"), 2);
	ck_assert_str_eq(jstr(s, "startTimeUnixNano"), u64s(T0, num));
	ck_assert_str_eq(jstr(s, "endTimeUnixNano"), u64s(T0 + 10 * MS, num));
	attrs = json_object_get(s, "attributes");
	check_attr_str(attrs, "http.method", "GET");
	check_attr_int(attrs, "http.status_code", "200");
	check_attr_int(attrs, "big", "-9223372036854775808");
	ck_assert(json_real_value(json_object_get(otlp_attr(attrs, "sample.ratio"), "doubleValue")) == 0.25);
	check_attr_bool(attrs, "cache.hit", 1);
	check_attr_int(attrs, "retrace.agent_id", "1");
	ck_assert_ptr_null(otlp_attr(attrs, "retrace.partial"));
	ck_assert_int_eq(json_array_size(attrs), 6);
	st = json_object_get(s, "status");
	ck_assert_int_eq(jint(st, "code"), 1);
	ck_assert_ptr_null(json_object_get(st, "message"));
	/* the templated log */
	ck_assert_int_eq(json_array_size(json_object_get(s, "events")), 1);
	ev = json_array_get(json_object_get(s, "events"), 0);
	ck_assert_str_eq(jstr(ev, "timeUnixNano"), u64s(T0 + 500000, num));
	ck_assert_str_eq(jstr(ev, "name"), "user alice checkout");
	eattrs = json_object_get(ev, "attributes");
	check_attr_str(eattrs, "log.severity", "INFO");
	check_attr_str(eattrs, "log.template", "user %s checkout");
	check_attr_str(eattrs, "log.template_id", "0000000000000abc");
	check_attr_str(eattrs, "log.args.0", "alice");
	ck_assert_int_eq(json_array_size(eattrs), 4);
	json_decref(doc);
	rt_wire_buf_free(&b);
}
END_TEST

START_TEST(otlp_cross_host_error_and_partial)
{
	struct rt_wire_buf b = { 0 };
	json_t *doc = export_json(RT_EXPORT_OTLP_JSON, &b);
	json_t *s1 = otlp_span_at(doc, 0, 1), *s2 = otlp_span_at(doc, 1, 0);
	json_t *s3 = otlp_span_at(doc, 1, 1), *st, *evs, *e0, *e1;
	ck_assert_str_eq(jstr(s1, "parentSpanId"), "0000000000001111");
	ck_assert_int_eq(jint(s1, "kind"), 3);
	check_attr_str(json_object_get(s1, "attributes"), "note", NOTE_DECODED);
	ck_assert_int_eq(jint(json_object_get(s1, "status"), "code"), 0);
	/* the cross-host link: cart.lookup on agent 2 is a child of agent 1's span */
	ck_assert_str_eq(jstr(s2, "spanId"), "0000000000003333");
	ck_assert_str_eq(jstr(s2, "parentSpanId"), "0000000000002222");
	check_attr_int(json_object_get(s2, "attributes"), "retrace.agent_id", "2");
	check_attr_int(json_object_get(s2, "attributes"), "retrace.status_code", "503");
	st = json_object_get(s2, "status");
	ck_assert_int_eq(jint(st, "code"), 2);
	ck_assert_str_eq(jstr(st, "message"), "out of stock");
	evs = json_object_get(s2, "events");
	ck_assert_int_eq(json_array_size(evs), 2);
	e0 = json_array_get(evs, 0);
	ck_assert_str_eq(jstr(e0, "name"), "retrying");
	check_attr_str(json_object_get(e0, "attributes"), "log.severity", "WARN");
	ck_assert_ptr_null(otlp_attr(json_object_get(e0, "attributes"), "log.template"));
	ck_assert_int_eq(json_array_size(json_object_get(e0, "attributes")), 1);
	e1 = json_array_get(evs, 1);
	check_attr_str(json_object_get(e1, "attributes"), "log.severity", "ERROR");
	check_attr_bool(json_object_get(e1, "attributes"), "log.template_missing", 1);
	check_attr_int(json_object_get(e1, "attributes"), "log.args.0", "7");
	check_attr_str(json_object_get(e1, "attributes"), "log.template_id", "00000000deadbeef");
	/* the partial span; a key written twice is exported once, last value */
	ck_assert_int_eq(jint(s3, "kind"), 1);
	check_attr_bool(json_object_get(s3, "attributes"), "retrace.partial", 1);
	check_attr_str(json_object_get(s3, "attributes"), "k", "b");
	ck_assert_ptr_null(json_object_get(s3, "events"));
	json_decref(doc);
	rt_wire_buf_free(&b);
}
END_TEST

START_TEST(escaping_and_utf8)
{
	struct rt_wire_buf b = { 0 };
	json_t *doc = export_json(RT_EXPORT_OTLP_JSON, &b);
	const char *want = "\"say \\\"hi\\\"\\n\\\\\\t\\u0001 \xc3\xa9 \xef\xbf\xbd!\"";
	ck_assert_ptr_nonnull(memmem(b.data, b.len, want, strlen(want)));
	json_decref(doc);
	rt_wire_buf_free(&b);
}
END_TEST

/* Each bad sequence becomes U+FFFD per byte; good ones pass. */
START_TEST(utf8_edge_cases)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd" },               /* overlong '/' */
		{ "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* surrogate */
		{ "\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* > U+10FFFF */
		{ "a\xe2\x82", "a\xef\xbf\xbd\xef\xbf\xbd" },              /* cut short */
		{ "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80" },                /* emoji */
		{ "\x7f\x1f", "\x7f\x1f" },
	};
	size_t i;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct rt_attr a = { "v", STR(cases[i].in) };
		struct rt_span sp = spans[3];
		struct rt_decoded_trace t = make_trace();
		struct rt_wire_buf b = { 0 };
		json_error_t e;
		json_t *doc;
		sp.attrs = &a;
		sp.n_attrs = 1;
		t.spans = &sp;
		t.n_spans = 1;
		ck_assert_int_eq(rt_export_write(RT_EXPORT_ZIPKIN, &t, 1, &b), 0);
		doc = json_loadb((const char *)b.data, b.len, 0, &e);
		ck_assert_msg(doc, "case %zu: %s", i, e.text);
		ck_assert_str_eq(jstr(json_object_get(json_array_get(doc, 0), "tags"), "v"), cases[i].out);
		json_decref(doc);
		rt_wire_buf_free(&b);
	}
}
END_TEST

START_TEST(doubles_exact_and_non_finite)
{
	struct rt_attr a[] = { { "nan", DBL(NAN) }, { "inf", DBL(INFINITY) }, { "ninf", DBL(-INFINITY) },
			       { "tiny", DBL(5e-324) }, { "tenth", DBL(0.1) }, { "third", DBL(1.0 / 3) } };
	struct rt_span sp = spans[3];
	struct rt_decoded_trace t = make_trace();
	struct rt_wire_buf b = { 0 };
	json_t *doc, *attrs;
	sp.attrs = a;
	sp.n_attrs = 6;
	t.spans = &sp;
	t.n_spans = 1;
	ck_assert_int_eq(rt_export_write(RT_EXPORT_OTLP_JSON, &t, 1, &b), 0);
	doc = json_loadb((const char *)b.data, b.len, 0, NULL);
	ck_assert_ptr_nonnull(doc);
	attrs = json_object_get(otlp_span_at(doc, 0, 0), "attributes");
	ck_assert_str_eq(jstr(otlp_attr(attrs, "nan"), "doubleValue"), "NaN");
	ck_assert_str_eq(jstr(otlp_attr(attrs, "inf"), "doubleValue"), "Infinity");
	ck_assert_str_eq(jstr(otlp_attr(attrs, "ninf"), "doubleValue"), "-Infinity");
	ck_assert(json_real_value(json_object_get(otlp_attr(attrs, "tiny"), "doubleValue")) == 5e-324);
	/* exact, and the shortest text that is */
	/* (memmem: the buffer is not NUL-terminated) */
	ck_assert_ptr_nonnull(memmem(b.data, b.len, "\"doubleValue\":0.1}", 17));
	ck_assert(json_real_value(json_object_get(otlp_attr(attrs, "third"), "doubleValue")) == 1.0 / 3);
	json_decref(doc);
	rt_wire_buf_free(&b);
}
END_TEST

START_TEST(output_is_deterministic_and_appends)
{
	struct rt_decoded_trace t[2] = { make_trace(), make_trace() };
	struct rt_wire_buf a = { 0 }, b = { 0 };
	int f;
	for (f = RT_EXPORT_OTLP_JSON; f <= RT_EXPORT_ZIPKIN; f++) {
		a.len = b.len = 0;
		ck_assert_int_eq(rt_wire_buf_reserve(&b, 3), 0);
		memcpy(b.data, "xyz", 3);
		b.len = 3;
		ck_assert_int_eq(rt_export_write(f, t, 2, &a), 0);
		ck_assert_int_eq(rt_export_write(f, t, 2, &b), 0);
		ck_assert_uint_eq(b.len, a.len + 3);
		ck_assert(!memcmp(b.data, "xyz", 3) && !memcmp(b.data + 3, a.data, a.len));
	}
	rt_wire_buf_free(&a);
	rt_wire_buf_free(&b);
}
END_TEST

START_TEST(empty_documents_and_bad_args)
{
	struct rt_wire_buf b = { 0 };
	ck_assert_int_eq(rt_export_write(RT_EXPORT_OTLP_JSON, NULL, 0, &b), 0);
	ck_assert_int_eq((int)b.len, (int)strlen("{\"resourceSpans\":[]}\n"));
	ck_assert(!memcmp(b.data, "{\"resourceSpans\":[]}\n", b.len));
	b.len = 0;
	ck_assert_int_eq(rt_export_write(RT_EXPORT_ZIPKIN, NULL, 0, &b), 0);
	ck_assert(b.len == 3 && !memcmp(b.data, "[]\n", 3));
	ck_assert_int_eq(rt_export_write(0, NULL, 0, &b), RT_WIRE_E_INVAL);
	ck_assert_int_eq(rt_export_format_parse("otlp-json"), RT_EXPORT_OTLP_JSON);
	ck_assert_int_eq(rt_export_format_parse("zipkin"), RT_EXPORT_ZIPKIN);
	ck_assert_int_eq(rt_export_format_parse("jaeger"), 0);
	ck_assert_int_eq(rt_export_format_parse(NULL), 0);
	rt_wire_buf_free(&b);
}
END_TEST

/* ------------------------------------------------------- Zipkin ---- */

static json_t *zipkin_find(json_t *doc, const char *id)
{
	json_t *s;
	size_t i;
	json_array_foreach(doc, i, s)
		if (!strcmp(jstr(s, "id"), id))
			return s;
	ck_abort_msg("no span %s", id);
	return NULL;
}

START_TEST(zipkin_spans)
{
	struct rt_wire_buf b = { 0 };
	json_t *doc = export_json(RT_EXPORT_ZIPKIN, &b);
	json_t *s0, *s1, *s2, *s3, *tags, *ann;
	ck_assert(json_is_array(doc));
	ck_assert_int_eq(json_array_size(doc), 4);
	s0 = zipkin_find(doc, "0000000000001111");
	s1 = zipkin_find(doc, "0000000000002222");
	s2 = zipkin_find(doc, "0000000000003333");
	s3 = zipkin_find(doc, "0000000000004444");
	ck_assert_str_eq(jstr(s0, "traceId"), TRACE_HEX);
	ck_assert_ptr_null(json_object_get(s0, "parentId"));
	ck_assert_str_eq(jstr(s0, "name"), "GET /checkout");
	ck_assert_str_eq(jstr(s0, "kind"), "SERVER");
	ck_assert_int_eq(jint(s0, "timestamp"), (json_int_t)(T0 / 1000));
	ck_assert_int_eq(jint(s0, "duration"), 10000);
	ck_assert_str_eq(jstr(json_object_get(s0, "localEndpoint"), "serviceName"), "frontend");
	tags = json_object_get(s0, "tags");
	ck_assert_str_eq(jstr(tags, "http.method"), "GET");
	ck_assert_str_eq(jstr(tags, "http.status_code"), "200");
	ck_assert_str_eq(jstr(tags, "sample.ratio"), "0.25");
	ck_assert_str_eq(jstr(tags, "cache.hit"), "true");
	ck_assert_str_eq(jstr(tags, "host.name"), "web-1");
	ck_assert_str_eq(jstr(tags, "otel.status_code"), "OK");
	ck_assert_str_eq(jstr(tags, "retrace.agent_id"), "1");
	ck_assert_ptr_null(json_object_get(tags, "service.name"));
	ck_assert_ptr_null(json_object_get(tags, "error"));
	ann = json_object_get(s0, "annotations");
	ck_assert_int_eq(json_array_size(ann), 1);
	ck_assert_int_eq(jint(json_array_get(ann, 0), "timestamp"), (json_int_t)((T0 + 500000) / 1000));
	ck_assert_str_eq(jstr(json_array_get(ann, 0), "value"), "INFO user alice checkout");

	ck_assert_str_eq(jstr(s1, "parentId"), "0000000000001111");
	ck_assert_str_eq(jstr(s1, "kind"), "CLIENT");
	ck_assert_str_eq(jstr(json_object_get(s1, "tags"), "note"), NOTE_DECODED);
	ck_assert_ptr_null(json_object_get(s1, "annotations"));

	ck_assert_str_eq(jstr(s2, "parentId"), "0000000000002222");
	ck_assert_str_eq(jstr(json_object_get(s2, "localEndpoint"), "serviceName"), "cart");
	tags = json_object_get(s2, "tags");
	ck_assert_str_eq(jstr(tags, "error"), "out of stock");
	ck_assert_str_eq(jstr(tags, "otel.status_code"), "ERROR");
	ck_assert_str_eq(jstr(tags, "retrace.status_code"), "503");
	ck_assert_str_eq(jstr(tags, "retrace.agent_id"), "2");
	ann = json_object_get(s2, "annotations");
	ck_assert_int_eq(json_array_size(ann), 2);
	ck_assert_int_eq(jint(json_array_get(ann, 0), "timestamp"),
			 (json_int_t)((T0 + 2 * MS + 1500) / 1000));
	ck_assert_str_eq(jstr(json_array_get(ann, 0), "value"), "WARN retrying");
	ck_assert_str_eq(jstr(json_array_get(ann, 1), "value"),
			 "ERROR <template 0x00000000deadbeef> 7");

	/* internal: no kind; 500 ns rounds up to 1 µs; partial tagged */
	ck_assert_ptr_null(json_object_get(s3, "kind"));
	ck_assert_int_eq(jint(s3, "duration"), 1);
	ck_assert_str_eq(jstr(json_object_get(s3, "tags"), "retrace.partial"), "true");
	ck_assert_str_eq(jstr(json_object_get(s3, "tags"), "k"), "b");
	json_decref(doc);
	rt_wire_buf_free(&b);
}
END_TEST

/* ------------------------------------------------ mended values ---- */

static json_t *export_one(enum rt_export_format fmt, struct rt_span *sp, size_t nspans,
			  struct rt_export_stats *st, struct rt_wire_buf *b)
{
	struct rt_decoded_trace t = make_trace();
	json_error_t e;
	json_t *doc;
	t.spans = sp;
	t.n_spans = (uint32_t)nspans;
	ck_assert_int_eq(rt_export_write_stats(fmt, &t, 1, b, st), 0);
	doc = json_loadb((const char *)b->data, b->len, 0, &e);
	ck_assert_msg(doc, "not JSON: %s: %.*s", e.text, (int)b->len, (const char *)b->data);
	return doc;
}

/* %llu / %llx / %p of values above INT64_MAX: their unsigned decimal text (a
 * stringValue: intValue is an int64), never negative; signed ones unchanged. */
START_TEST(unsigned_log_args_are_not_negative)
{
	struct rt_value args[] = { INT(-1), INT(INT64_MIN), INT(-16), INT(-1), INT(-1), INT(7),
				   INT(5), INT(-2), INT(42) };
	struct rt_log_event log = { .time_ns = T0 + 1000, .level = 1, .template_id = 0x77,
				    .template_text = "a %llu b %llx c %p d %lld e %u f %%d %*zu g %d",
				    .body = "rendered", .args = args, .n_args = 9 };
	struct rt_span sp = spans[3];
	struct rt_export_stats st = { 0 };
	struct rt_wire_buf b = { 0 };
	json_t *doc, *ea;
	char num[32];
	sp.logs = &log;
	sp.n_logs = 1;
	doc = export_one(RT_EXPORT_OTLP_JSON, &sp, 1, &st, &b);
	ea = json_object_get(json_array_get(json_object_get(otlp_span_at(doc, 0, 0), "events"), 0),
			     "attributes");
	check_attr_str(ea, "log.args.0", u64s(UINT64_MAX, num));                     /* %llu */
	check_attr_str(ea, "log.args.1", u64s(0x8000000000000000ull, num));          /* %llx */
	check_attr_str(ea, "log.args.2", u64s(0xfffffffffffffff0ull, num));          /* %p */
	check_attr_int(ea, "log.args.3", "-1");                                      /* %lld */
	check_attr_int(ea, "log.args.4", "4294967295");  /* %u: 32 bits, as rendered */
	check_attr_int(ea, "log.args.5", "7");           /* the '*' width */
	check_attr_int(ea, "log.args.6", "5");           /* %zu that fits */
	check_attr_int(ea, "log.args.7", "-2");          /* %d */
	check_attr_int(ea, "log.args.8", "42");          /* beyond the template */
	ck_assert_uint_eq(st.unsigned_as_string, 3);
	ck_assert_ptr_null(memmem(b.data, b.len, "\"intValue\":\"-1\"}},{\"key\":\"log.args.1\"", 37));
	json_decref(doc);
	rt_wire_buf_free(&b);
}
END_TEST

/* OTLP requires names and keys: empty span names get "(unnamed)", empty log
 * bodies "(empty)", empty attribute keys are dropped; all counted. */
START_TEST(empty_names_and_keys_mended)
{
	struct rt_attr attrs[] = { { "", STR("no key") }, { NULL, INT(1) }, { "ok", INT(2) } };
	struct rt_log_event log = { .time_ns = T0 + 100, .level = 0, .body = "" };
	struct rt_span sp[2] = { spans[3], spans[3] };
	struct rt_export_stats st = { 0 };
	struct rt_wire_buf b = { 0 };
	json_t *doc, *s0, *s1, *attrs0, *z;
	size_t i;
	sp[0].name = "";
	sp[0].attrs = attrs;
	sp[0].n_attrs = 3;
	sp[0].logs = &log;
	sp[0].n_logs = 1;
	sp[1].name = NULL;
	sp[1].span_id = 0x5555;
	doc = export_one(RT_EXPORT_OTLP_JSON, sp, 2, &st, &b);
	s0 = otlp_span_at(doc, 0, 0);
	s1 = otlp_span_at(doc, 0, 1);
	ck_assert_str_eq(jstr(s0, "name"), "(unnamed)");
	ck_assert_str_eq(jstr(s1, "name"), "(unnamed)");
	attrs0 = json_object_get(s0, "attributes");
	json_array_foreach(attrs0, i, z)
		ck_assert_msg(strlen(jstr(z, "key")) > 0, "an attribute with an empty key");
	check_attr_int(attrs0, "ok", "2");
	ck_assert_str_eq(jstr(json_array_get(json_object_get(s0, "events"), 0), "name"), "(empty)");
	ck_assert_uint_eq(st.unnamed_spans, 2);
	ck_assert_uint_eq(st.unnamed_events, 1);
	ck_assert_uint_eq(st.empty_keys_dropped, 2);
	json_decref(doc);

	b.len = 0;
	memset(&st, 0, sizeof st);
	doc = export_one(RT_EXPORT_ZIPKIN, sp, 2, &st, &b);
	ck_assert_str_eq(jstr(json_array_get(doc, 0), "name"), "(unnamed)");
	ck_assert_ptr_null(json_object_get(json_object_get(json_array_get(doc, 0), "tags"), ""));
	ck_assert_str_eq(jstr(json_object_get(json_array_get(doc, 0), "tags"), "ok"), "2");
	ck_assert_uint_eq(st.empty_keys_dropped, 2);
	json_decref(doc);
	rt_wire_buf_free(&b);
}
END_TEST

/* A kind beyond CONSUMER: unspecified (0) in OTLP, no kind in Zipkin, the
 * number kept as retrace.kind; the start time stays. */
START_TEST(unknown_kind_is_unspecified)
{
	struct rt_span sp = spans[1];
	struct rt_wire_buf b = { 0 };
	json_t *doc, *s;
	char num[32];
	sp.kind = 9;
	doc = export_one(RT_EXPORT_OTLP_JSON, &sp, 1, NULL, &b);
	s = otlp_span_at(doc, 0, 0);
	ck_assert_int_eq(jint(s, "kind"), 0);
	ck_assert_str_eq(jstr(s, "startTimeUnixNano"), u64s(sp.start_ns, num));
	check_attr_int(json_object_get(s, "attributes"), "retrace.kind", "9");
	json_decref(doc);
	b.len = 0;
	doc = export_one(RT_EXPORT_ZIPKIN, &sp, 1, NULL, &b);
	s = json_array_get(doc, 0);
	ck_assert_ptr_null(json_object_get(s, "kind"));
	ck_assert_int_eq(jint(s, "timestamp"), (json_int_t)(sp.start_ns / 1000));
	json_decref(doc);
	rt_wire_buf_free(&b);
}
END_TEST

/*
 * Zipkin annotations: inside [timestamp, timestamp + duration] even when start
 * and end truncate differently (start at .999 µs), a log before the start is
 * clamped; two identical logs in one µs stay two distinct annotations.
 */
START_TEST(zipkin_annotations_consistent)
{
	const uint64_t start = T0 - T0 % 1000 + 999, end = start + 1002;
	struct rt_log_event logs[] = {
		{ .time_ns = start - 5000, .level = 1, .body = "early" },
		{ .time_ns = start + 10, .level = 1, .body = "same" },
		{ .time_ns = start + 20, .level = 1, .body = "same" },
		{ .time_ns = start + 30, .level = 1, .body = "same" },
		{ .time_ns = start + 40, .level = 2, .body = "same" },
		{ .time_ns = end, .level = 1, .body = "at the end" },
	};
	struct rt_span sp = spans[3];
	struct rt_export_stats st = { 0 };
	struct rt_wire_buf b = { 0 };
	json_t *doc, *s, *ann, *a, *b2;
	json_int_t ts, dur;
	size_t i, j;
	sp.start_ns = start;
	sp.end_ns = end;
	sp.flags = 0;
	sp.logs = logs;
	sp.n_logs = 6;
	doc = export_one(RT_EXPORT_ZIPKIN, &sp, 1, &st, &b);
	s = json_array_get(doc, 0);
	ts = jint(s, "timestamp");
	dur = jint(s, "duration");
	ann = json_object_get(s, "annotations");
	ck_assert_int_eq(json_array_size(ann), 6);
	json_array_foreach(ann, i, a) {
		json_int_t at = jint(a, "timestamp");
		ck_assert_msg(at >= ts && at <= ts + dur, "annotation %zu at %lld outside [%lld, %lld]",
			      i, (long long)at, (long long)ts, (long long)(ts + dur));
		for (j = 0; j < i; j++) {
			b2 = json_array_get(ann, j);
			ck_assert_msg(jint(b2, "timestamp") != at ||
				      strcmp(jstr(b2, "value"), jstr(a, "value")),
				      "annotations %zu and %zu are the same", j, i);
		}
	}
	ck_assert_str_eq(jstr(json_array_get(ann, 1), "value"), "INFO same");
	ck_assert_str_eq(jstr(json_array_get(ann, 2), "value"), "INFO same (2)");
	ck_assert_str_eq(jstr(json_array_get(ann, 3), "value"), "INFO same (3)");
	ck_assert_str_eq(jstr(json_array_get(ann, 4), "value"), "WARN same");
	ck_assert_uint_eq(st.annotations_clamped, 1);
	ck_assert_uint_eq(st.annotations_renamed, 2);
	json_decref(doc);
	rt_wire_buf_free(&b);
}
END_TEST

/* ------------------------------------------------------- push ---- */

/* What the test server answers to one request. */
struct reply {
	int status;
	const char *retry_after; /* header, or NULL */
	const char *body;        /* NULL: "{}" */
};

struct seen {
	char *body;              /* decompressed when it came gzip'd */
	size_t body_len, wire_len;
	char content_type[128], content_encoding[64], user_agent[128];
	double at;               /* CLOCK_MONOTONIC seconds */
};

#define MAX_SEEN 256

struct test_server {
	nng_http_server *srv;
	uint16_t port;
	pthread_mutex_t mu;
	int requests;
	const struct reply *script; /* per request; the last repeats */
	int script_len;
	struct seen seen[MAX_SEEN];
};

static struct test_server g_srv;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}


static void copy_header(nng_http_req *req, const char *name, char *out, size_t cap)
{
	const char *v = nng_http_req_get_header(req, name);
	snprintf(out, cap, "%s", v ? v : "");
}

static void handle_traces(nng_aio *aio)
{
	nng_http_req *req = nng_aio_get_input(aio, 0);
	nng_http_res *res = NULL;
	const struct reply *r;
	struct seen *sn = NULL;
	void *data = NULL;
	size_t len = 0;
	int n;
	nng_http_req_get_data(req, &data, &len);
	pthread_mutex_lock(&g_srv.mu);
	n = g_srv.requests++;
	r = &g_srv.script[n < g_srv.script_len ? n : g_srv.script_len - 1];
	if (n < MAX_SEEN) {
		sn = &g_srv.seen[n];
		sn->at = now_s();
		copy_header(req, "Content-Type", sn->content_type, sizeof sn->content_type);
		copy_header(req, "Content-Encoding", sn->content_encoding, sizeof sn->content_encoding);
		copy_header(req, "User-Agent", sn->user_agent, sizeof sn->user_agent);
		sn->wire_len = len;
		if (!strcmp(sn->content_encoding, "gzip")) {
			sn->body = test_gunzip(data, len, &sn->body_len);
		} else {
			sn->body = malloc(len + 1);
			memcpy(sn->body, data, len);
			sn->body_len = len;
		}
	}
	pthread_mutex_unlock(&g_srv.mu);
	if (nng_http_res_alloc(&res) != 0) {
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	nng_http_res_set_status(res, (uint16_t)r->status);
	if (r->retry_after)
		nng_http_res_set_header(res, "Retry-After", r->retry_after);
	nng_http_res_copy_data(res, r->body ? r->body : "{}", strlen(r->body ? r->body : "{}"));
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

static void server_start(const struct reply *script, int script_len)
{
	nng_url *url;
	nng_http_handler *h;
	nng_sockaddr sa;
	memset(&g_srv, 0, sizeof g_srv);
	pthread_mutex_init(&g_srv.mu, NULL);
	g_srv.script = script;
	g_srv.script_len = script_len;
	ck_assert_int_eq(nng_url_parse(&url, "http://127.0.0.1:0"), 0);
	ck_assert_int_eq(nng_http_server_hold(&g_srv.srv, url), 0);
	nng_url_free(url);
	ck_assert_int_eq(nng_http_handler_alloc(&h, "/v1/traces", handle_traces), 0);
	ck_assert_int_eq(nng_http_handler_set_method(h, "POST"), 0);
	ck_assert_int_eq(nng_http_handler_collect_body(h, true, 64u << 20), 0);
	ck_assert_int_eq(nng_http_server_add_handler(g_srv.srv, h), 0);
	ck_assert_int_eq(nng_http_server_start(g_srv.srv), 0);
	ck_assert_int_eq(nng_http_server_get_addr(g_srv.srv, &sa), 0);
	g_srv.port = ntohs(sa.s_in.sa_port);
	ck_assert_uint_ne(g_srv.port, 0);
}

static void server_stop(void)
{
	int i;
	nng_http_server_stop(g_srv.srv);
	nng_http_server_release(g_srv.srv);
	for (i = 0; i < MAX_SEEN; i++)
		free(g_srv.seen[i].body);
}

static const struct rt_push_options fast = { .attempts = 3, .backoff_ms = 20, .timeout_ms = 3000 };

/* One small trace, one request: the body, gunzipped, is exactly the document
 * rt_export_write makes; gzip, Content-Type and the User-Agent are set. */
START_TEST(push_delivers_the_document)
{
	static const struct reply ok[] = { { 200, NULL, NULL } };
	struct rt_decoded_trace t = make_trace();
	struct rt_push_result res;
	struct rt_wire_buf b = { 0 };
	char url[64], err[512];
	json_t *sent, *got;
	server_start(ok, 1);
	ck_assert_int_eq(rt_export_write(RT_EXPORT_OTLP_JSON, &t, 1, &b), 0);
	/* no path: /v1/traces is added */
	snprintf(url, sizeof url, "http://127.0.0.1:%u", g_srv.port);
	ck_assert_msg(rt_export_push_traces(url, &t, 1, &fast, &res, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(g_srv.requests, 1);
	ck_assert_uint_eq(res.requests, 1);
	ck_assert_uint_eq(res.spans_sent, 4);
	ck_assert_str_eq(g_srv.seen[0].content_type, "application/json");
	ck_assert_str_eq(g_srv.seen[0].content_encoding, "gzip");
	ck_assert_str_eq(g_srv.seen[0].user_agent, "retrace/" RETRACE_VERSION_STRING);
	ck_assert_str_eq(rt_export_user_agent(), "retrace/" RETRACE_VERSION_STRING);
	ck_assert_ptr_nonnull(g_srv.seen[0].body); /* it was gzip */
	ck_assert_uint_eq(res.bytes_sent, g_srv.seen[0].wire_len);
	ck_assert_uint_eq(g_srv.seen[0].body_len, b.len);
	ck_assert(!memcmp(g_srv.seen[0].body, b.data, b.len));
	sent = json_loadb((const char *)b.data, b.len, 0, NULL);
	got = json_loadb(g_srv.seen[0].body, g_srv.seen[0].body_len, 0, NULL);
	ck_assert_ptr_nonnull(got);
	ck_assert(json_equal(sent, got));
	json_decref(sent);
	json_decref(got);
	rt_wire_buf_free(&b);
	server_stop();
}
END_TEST

/* rt_export_push with no_gzip: the document as is, no Content-Encoding. */
START_TEST(push_without_gzip)
{
	static const struct reply ok[] = { { 200, NULL, NULL } };
	struct rt_push_options o = fast;
	char url[64], err[512];
	server_start(ok, 1);
	o.no_gzip = 1;
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", g_srv.port);
	ck_assert_msg(rt_export_push(url, "{\"resourceSpans\":[]}", 20, &o, NULL, err, sizeof err) == 0,
		      "%s", err);
	ck_assert_str_eq(g_srv.seen[0].content_encoding, "");
	ck_assert_uint_eq(g_srv.seen[0].body_len, 20);
	ck_assert(!memcmp(g_srv.seen[0].body, "{\"resourceSpans\":[]}", 20));
	ck_assert_str_eq(g_srv.seen[0].user_agent, rt_export_user_agent());
	server_stop();
}
END_TEST

#define BIG_SPANS 300

/*
 * 300 spans over three resources and two traces, about 300 bytes each, with a
 * 16 KiB limit: several requests, each valid OTLP/JSON under the limit, and
 * every span arrives exactly once, identical to its object in the single
 * document and under the right resource.
 */
START_TEST(push_batches_under_the_limit)
{
	static const struct reply ok[] = { { 200, NULL, NULL } };
	static struct rt_span many[2][BIG_SPANS / 2];
	static char names[BIG_SPANS][64];
	struct rt_decoded_trace t[2] = { make_trace(), make_trace() };
	struct rt_push_options o = fast;
	struct rt_push_result res;
	struct rt_wire_buf whole = { 0 };
	json_t *doc, *byid, *r, *sp;
	char url[64], err[512];
	int seen_count[BIG_SPANS] = { 0 };
	size_t i, k, q, j;
	for (k = 0; k < 2; k++) {
		for (i = 0; i < BIG_SPANS / 2; i++) {
			size_t n = k * (BIG_SPANS / 2) + i;
			many[k][i] = spans[i % 4];
			many[k][i].trace_lo = TRACE_LO + k;
			many[k][i].span_id = 0x10000 + n;
			many[k][i].resource = (uint32_t)(i % 3); /* 2: out of range */
			snprintf(names[n], sizeof names[n], "span number %zu with a longish name", n);
			many[k][i].name = names[n];
		}
		t[k].spans = many[k];
		t[k].n_spans = BIG_SPANS / 2;
	}
	ck_assert_int_eq(rt_export_write(RT_EXPORT_OTLP_JSON, t, 2, &whole), 0);
	ck_assert_uint_gt(whole.len, 4 * 16384); /* so there must be batches */
	doc = json_loadb((const char *)whole.data, whole.len, 0, NULL);
	byid = json_object();
	json_array_foreach(json_object_get(doc, "resourceSpans"), i, r) {
		json_t *svc = otlp_attr(json_object_get(json_object_get(r, "resource"), "attributes"),
					"service.name");
		json_array_foreach(json_object_get(json_array_get(json_object_get(r, "scopeSpans"), 0),
						   "spans"), j, sp) {
			json_t *pair = json_pack("{sOsO}", "span", sp, "svc", svc);
			char key[64];
			snprintf(key, sizeof key, "%s/%s", jstr(sp, "traceId"), jstr(sp, "spanId"));
			json_object_set_new(byid, key, pair);
		}
	}
	ck_assert_int_eq(json_object_size(byid), BIG_SPANS);

	server_start(ok, 1);
	o.max_request_bytes = 16384;
	snprintf(url, sizeof url, "http://127.0.0.1:%u", g_srv.port);
	ck_assert_msg(rt_export_push_traces(url, t, 2, &o, &res, err, sizeof err) == 0, "%s", err);
	ck_assert_int_ge(g_srv.requests, 4);
	ck_assert_int_le(g_srv.requests, MAX_SEEN);
	ck_assert_uint_eq(res.requests, (uint64_t)g_srv.requests);
	ck_assert_uint_eq(res.spans_sent, BIG_SPANS);
	for (q = 0; q < (size_t)g_srv.requests; q++) {
		struct seen *sn = &g_srv.seen[q];
		json_error_t e;
		json_t *part;
		ck_assert_ptr_nonnull(sn->body);
		ck_assert_msg(sn->body_len <= 16384, "request %zu: %zu bytes", q, sn->body_len);
		ck_assert_str_eq(sn->content_encoding, "gzip");
		part = json_loadb(sn->body, sn->body_len, 0, &e);
		ck_assert_msg(part, "request %zu: %s", q, e.text);
		json_array_foreach(json_object_get(part, "resourceSpans"), i, r) {
			json_t *svc = otlp_attr(json_object_get(json_object_get(r, "resource"),
								"attributes"), "service.name");
			json_array_foreach(json_object_get(json_array_get(json_object_get(r, "scopeSpans"), 0),
							   "spans"), j, sp) {
				char key[64];
				json_t *want;
				unsigned long long id;
				snprintf(key, sizeof key, "%s/%s", jstr(sp, "traceId"), jstr(sp, "spanId"));
				want = json_object_get(byid, key);
				ck_assert_msg(want, "unknown span %s", key);
				ck_assert(json_equal(json_object_get(want, "span"), sp));
				ck_assert(json_equal(json_object_get(want, "svc"), svc));
				id = strtoull(jstr(sp, "spanId"), NULL, 16);
				ck_assert(id >= 0x10000 && id < 0x10000 + BIG_SPANS);
				seen_count[id - 0x10000]++;
			}
		}
		json_decref(part);
	}
	for (i = 0; i < BIG_SPANS; i++)
		ck_assert_msg(seen_count[i] == 1, "span %zu arrived %d times", i, seen_count[i]);
	json_decref(byid);
	json_decref(doc);
	rt_wire_buf_free(&whole);
	server_stop();
}
END_TEST

START_TEST(push_refused_is_not_retried)
{
	static const struct reply bad[] = { { 400, NULL, NULL } };
	char url[64], err[512];
	server_start(bad, 1);
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", g_srv.port);
	ck_assert_int_eq(rt_export_push(url, "{}", 2, &fast, NULL, err, sizeof err), -1);
	ck_assert_int_eq(g_srv.requests, 1);
	ck_assert_msg(strstr(err, "HTTP 400") && strstr(err, "refused") && strstr(err, url),
		      "message: %s", err);
	server_stop();
}
END_TEST

/* The collector's error body is quoted: its start, control characters and
 * non-ASCII bytes made harmless, cut with "...". */
START_TEST(push_error_body_shown)
{
	static char body[2000];
	static const struct reply bad[] = { { 400, NULL, body } };
	char url[64], err[2048], *said;
	size_t i;
	snprintf(body, sizeof body, "{\"code\":3,\"message\":\"span 7: name\n\x1b[31mis empty\xff\"}");
	for (i = strlen(body); i < sizeof body - 1; i++)
		body[i] = 'x';
	body[sizeof body - 1] = 0;
	server_start(bad, 1);
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", g_srv.port);
	ck_assert_int_eq(rt_export_push(url, "{}", 2, &fast, NULL, err, sizeof err), -1);
	said = strstr(err, "the collector said: ");
	ck_assert_msg(said, "message: %s", err);
	said += strlen("the collector said: ");
	ck_assert_msg(!strncmp(said, "{\"code\":3,\"message\":\"span 7: name [31mis empty?\"}xxx", 50),
		      "message: %s", err);
	for (i = 0; err[i]; i++)
		ck_assert_msg((unsigned char)err[i] >= 0x20 && (unsigned char)err[i] < 0x7f,
			      "byte %zu of the message is 0x%02x", i, (unsigned char)err[i]);
	ck_assert_msg(strlen(said) <= RT_PUSH_ERROR_BODY_MAX + 3, "quoted %zu bytes", strlen(said));
	ck_assert_msg(!strcmp(said + strlen(said) - 3, "..."), "message: %s", err);
	server_stop();
}
END_TEST

START_TEST(push_retries_503_then_succeeds)
{
	static const struct reply flaky[] = { { 503, NULL, NULL }, { 503, NULL, NULL },
					      { 200, NULL, NULL } };
	char url[64], err[512];
	server_start(flaky, 3);
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", g_srv.port);
	ck_assert_msg(rt_export_push(url, "{}", 2, &fast, NULL, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(g_srv.requests, 3);
	server_stop();
}
END_TEST

/* 503 with Retry-After: 1 (backoff 20 ms): the retry waits the second (a lower
 * bound only: a loaded machine can only make it later). */
START_TEST(push_honours_retry_after)
{
	static const struct reply busy[] = { { 503, "1", NULL }, { 429, "1", NULL },
					     { 200, NULL, NULL } };
	char url[64], err[512];
	server_start(busy, 3);
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", g_srv.port);
	ck_assert_msg(rt_export_push(url, "{}", 2, &fast, NULL, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(g_srv.requests, 3);
	ck_assert_msg(g_srv.seen[1].at - g_srv.seen[0].at >= 0.95, "waited %.3f s",
		      g_srv.seen[1].at - g_srv.seen[0].at);
	ck_assert_msg(g_srv.seen[2].at - g_srv.seen[1].at >= 0.95, "waited %.3f s",
		      g_srv.seen[2].at - g_srv.seen[1].at);
	server_stop();
}
END_TEST

/* Retry-After of an hour, bounded to 50 ms: the push still finishes (the
 * suite's timeout would catch an unbounded wait). */
START_TEST(push_retry_after_is_bounded)
{
	static const struct reply busy[] = { { 503, "3600", NULL }, { 200, NULL, NULL } };
	struct rt_push_options o = fast;
	char url[64], err[512];
	o.max_retry_after_ms = 50;
	server_start(busy, 2);
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", g_srv.port);
	ck_assert_msg(rt_export_push(url, "{}", 2, &o, NULL, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(g_srv.requests, 2);
	server_stop();
}
END_TEST

/* A 200 with partialSuccess: success, with the rejections reported. */
START_TEST(push_reports_partial_success)
{
	static const struct reply partial[] = {
		{ 200, NULL, "{\"partialSuccess\":{\"rejectedSpans\":\"3\",\"errorMessage\":"
			     "\"3 spans had no name\\n\"}}" },
		{ 200, NULL, "{\"partialSuccess\": {\"rejectedSpans\": 2}}" },
		{ 200, NULL, "{\"partialSuccess\":{}}" },
	};
	static struct rt_span many[40];
	struct rt_decoded_trace t = make_trace();
	struct rt_push_options o = fast;
	struct rt_push_result res;
	char url[64], err[512];
	size_t i;
	for (i = 0; i < 40; i++) {
		many[i] = spans[0];
		many[i].span_id = 0x100 + i;
	}
	t.spans = many;
	t.n_spans = 40;
	o.max_request_bytes = 8192;
	server_start(partial, 3);
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", g_srv.port);
	ck_assert_msg(rt_export_push_traces(url, &t, 1, &o, &res, err, sizeof err) == 0, "%s", err);
	ck_assert_int_ge(g_srv.requests, 3);
	ck_assert_uint_eq(res.spans_sent, 40);
	ck_assert_uint_eq(res.partial_answers, 2);
	ck_assert_uint_eq(res.rejected_spans, 5);
	ck_assert_str_eq(res.message, "3 spans had no name\\n");
	server_stop();
}
END_TEST

/* A failure part-way names what was accepted before it. */
START_TEST(push_failure_midway_says_how_far)
{
	static const struct reply half[] = { { 200, NULL, NULL }, { 400, NULL, "bad" } };
	static struct rt_span many[40];
	struct rt_decoded_trace t = make_trace();
	struct rt_push_options o = fast;
	struct rt_push_result res;
	char url[64], err[512];
	size_t i;
	for (i = 0; i < 40; i++) {
		many[i] = spans[0];
		many[i].span_id = 0x100 + i;
	}
	t.spans = many;
	t.n_spans = 40;
	o.max_request_bytes = 8192;
	server_start(half, 2);
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", g_srv.port);
	ck_assert_int_eq(rt_export_push_traces(url, &t, 1, &o, &res, err, sizeof err), -1);
	ck_assert_int_eq(g_srv.requests, 2);
	ck_assert_uint_eq(res.requests, 1);
	ck_assert_msg(strstr(err, "HTTP 400") && strstr(err, "the collector said: bad") &&
		      strstr(err, "1 earlier request with"), "message: %s", err);
	server_stop();
}
END_TEST

START_TEST(push_gives_up_after_attempts)
{
	static const struct reply down[] = { { 503, NULL, NULL } };
	char url[64], err[512];
	server_start(down, 1);
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", g_srv.port);
	ck_assert_int_eq(rt_export_push(url, "{}", 2, &fast, NULL, err, sizeof err), -1);
	ck_assert_int_eq(g_srv.requests, 3);
	ck_assert_msg(strstr(err, "HTTP 503") && strstr(err, "3 attempts"), "message: %s", err);
	server_stop();
}
END_TEST

/* A port nobody listens on: bind one, note it, close it. */
static uint16_t free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

START_TEST(push_without_server_says_so)
{
	char url[64], err[512];
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", free_port());
	ck_assert_int_eq(rt_export_push(url, "{}", 2, &fast, NULL, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "cannot connect to") && strstr(err, url) &&
		      strstr(err, "3 attempts"), "message: %s", err);
}
END_TEST

START_TEST(push_bad_urls)
{
	char err[256];
	ck_assert_int_eq(rt_export_push("not a url", "{}", 2, NULL, NULL, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "bad endpoint URL"), "message: %s", err);
	ck_assert_int_eq(rt_export_push("https://127.0.0.1:1/v1/traces", "{}", 2, NULL, NULL, err,
					sizeof err), -1);
	ck_assert_msg(strstr(err, "only http://"), "message: %s", err);
}
END_TEST

static Suite *export_suite(void)
{
	Suite *s = suite_create("coordinator_export");
	TCase *tc = tcase_create("writers");
	TCase *tp = tcase_create("push");
	tcase_add_test(tc, otlp_resources_and_scope);
	tcase_add_test(tc, otlp_root_span_fields);
	tcase_add_test(tc, otlp_cross_host_error_and_partial);
	tcase_add_test(tc, escaping_and_utf8);
	tcase_add_test(tc, utf8_edge_cases);
	tcase_add_test(tc, doubles_exact_and_non_finite);
	tcase_add_test(tc, output_is_deterministic_and_appends);
	tcase_add_test(tc, empty_documents_and_bad_args);
	tcase_add_test(tc, zipkin_spans);
	tcase_add_test(tc, unsigned_log_args_are_not_negative);
	tcase_add_test(tc, empty_names_and_keys_mended);
	tcase_add_test(tc, unknown_kind_is_unspecified);
	tcase_add_test(tc, zipkin_annotations_consistent);
	suite_add_tcase(s, tc);
	tcase_set_timeout(tp, 30);
	tcase_add_test(tp, push_delivers_the_document);
	tcase_add_test(tp, push_without_gzip);
	tcase_add_test(tp, push_batches_under_the_limit);
	tcase_add_test(tp, push_refused_is_not_retried);
	tcase_add_test(tp, push_error_body_shown);
	tcase_add_test(tp, push_retries_503_then_succeeds);
	tcase_add_test(tp, push_honours_retry_after);
	tcase_add_test(tp, push_retry_after_is_bounded);
	tcase_add_test(tp, push_reports_partial_success);
	tcase_add_test(tp, push_failure_midway_says_how_far);
	tcase_add_test(tp, push_gives_up_after_attempts);
	tcase_add_test(tp, push_without_server_says_so);
	tcase_add_test(tp, push_bad_urls);
	suite_add_tcase(s, tp);
	return s;
}

int main(void)
{
	return test_run_suite(export_suite());
}
