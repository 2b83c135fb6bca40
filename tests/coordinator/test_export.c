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
 * The push tests run nng's own HTTP server in the test process on a port the
 * kernel picks, count the requests it sees and answer with a scripted status.
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
#include <unistd.h>

#include <jansson.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

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
	  s0_attrs, 5, s0_logs, 1, 0, 1, 100, 101, 0 },
	{ TRACE_HI, TRACE_LO, 0x2222, 0x1111, 0, "cart.get", 3, T0 + 1 * MS, T0 + 6 * MS, 0, 0,
	  "", s1_attrs, 1, NULL, 0, 0, 1, 100, 101, 0 },
	{ TRACE_HI, TRACE_LO, 0x3333, 0x2222, 1, "cart.lookup", 2, T0 + 2 * MS, T0 + 5 * MS, 2,
	  503, "out of stock", NULL, 0, s2_logs, 2, 1, 2, 200, 201, 0 },
	{ TRACE_HI, TRACE_LO, 0x4444, 0x3333, 2, "db.query", 1, T0 + 3 * MS, T0 + 3 * MS + 500, 0,
	  0, "", s3_attrs, 2, NULL, 0, 1, 2, 200, 202, RT_SPAN_PARTIAL },
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
	ck_assert_ptr_nonnull(strstr((const char *)b.data, "\"doubleValue\":0.1}"));
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

/* ------------------------------------------------------- push ---- */

struct test_server {
	nng_http_server *srv;
	uint16_t port;
	pthread_mutex_t mu;
	int requests;
	const int *script;   /* status per request; the last repeats */
	int script_len;
	char *body;          /* last body received */
	size_t body_len;
	char content_type[128];
};

static struct test_server g_srv;

static void handle_traces(nng_aio *aio)
{
	nng_http_req *req = nng_aio_get_input(aio, 0);
	nng_http_res *res = NULL;
	const char *ct = nng_http_req_get_header(req, "Content-Type");
	void *data = NULL;
	size_t len = 0;
	int n, status;
	nng_http_req_get_data(req, &data, &len);
	pthread_mutex_lock(&g_srv.mu);
	n = g_srv.requests++;
	free(g_srv.body);
	g_srv.body = malloc(len + 1);
	memcpy(g_srv.body, data, len);
	g_srv.body_len = len;
	snprintf(g_srv.content_type, sizeof g_srv.content_type, "%s", ct ? ct : "");
	status = g_srv.script[n < g_srv.script_len ? n : g_srv.script_len - 1];
	pthread_mutex_unlock(&g_srv.mu);
	if (nng_http_res_alloc(&res) != 0) {
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	nng_http_res_set_status(res, (uint16_t)status);
	nng_http_res_copy_data(res, "{}", 2);
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

static void server_start(const int *script, int script_len)
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
	nng_http_server_stop(g_srv.srv);
	nng_http_server_release(g_srv.srv);
	free(g_srv.body);
}

static const struct rt_push_options fast = { .attempts = 3, .backoff_ms = 20, .timeout_ms = 3000 };

START_TEST(push_delivers_the_document)
{
	static const int ok[] = { 200 };
	struct rt_decoded_trace t = make_trace();
	struct rt_wire_buf b = { 0 };
	char url[64], err[256];
	json_t *sent, *got;
	server_start(ok, 1);
	ck_assert_int_eq(rt_export_write(RT_EXPORT_OTLP_JSON, &t, 1, &b), 0);
	/* no path: /v1/traces is added */
	snprintf(url, sizeof url, "http://127.0.0.1:%u", g_srv.port);
	ck_assert_msg(rt_export_push(url, b.data, b.len, &fast, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(g_srv.requests, 1);
	ck_assert_str_eq(g_srv.content_type, "application/json");
	ck_assert_uint_eq(g_srv.body_len, b.len);
	ck_assert(!memcmp(g_srv.body, b.data, b.len));
	sent = json_loadb((const char *)b.data, b.len, 0, NULL);
	got = json_loadb(g_srv.body, g_srv.body_len, 0, NULL);
	ck_assert_ptr_nonnull(got);
	ck_assert(json_equal(sent, got));
	json_decref(sent);
	json_decref(got);
	rt_wire_buf_free(&b);
	server_stop();
}
END_TEST

START_TEST(push_refused_is_not_retried)
{
	static const int bad[] = { 400 };
	char url[64], err[256];
	server_start(bad, 1);
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", g_srv.port);
	ck_assert_int_eq(rt_export_push(url, "{}", 2, &fast, err, sizeof err), -1);
	ck_assert_int_eq(g_srv.requests, 1);
	ck_assert_msg(strstr(err, "HTTP 400") && strstr(err, "refused") && strstr(err, url),
		      "message: %s", err);
	server_stop();
}
END_TEST

START_TEST(push_retries_503_then_succeeds)
{
	static const int flaky[] = { 503, 503, 200 };
	char url[64], err[256];
	server_start(flaky, 3);
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", g_srv.port);
	ck_assert_msg(rt_export_push(url, "{}", 2, &fast, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(g_srv.requests, 3);
	server_stop();
}
END_TEST

START_TEST(push_gives_up_after_attempts)
{
	static const int down[] = { 503 };
	char url[64], err[256];
	server_start(down, 1);
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", g_srv.port);
	ck_assert_int_eq(rt_export_push(url, "{}", 2, &fast, err, sizeof err), -1);
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
	char url[64], err[256];
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", free_port());
	ck_assert_int_eq(rt_export_push(url, "{}", 2, &fast, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "cannot connect to") && strstr(err, url) &&
		      strstr(err, "3 attempts"), "message: %s", err);
}
END_TEST

START_TEST(push_bad_urls)
{
	char err[256];
	ck_assert_int_eq(rt_export_push("not a url", "{}", 2, NULL, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "bad endpoint URL"), "message: %s", err);
	ck_assert_int_eq(rt_export_push("https://127.0.0.1:1/v1/traces", "{}", 2, NULL, err,
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
	suite_add_tcase(s, tc);
	tcase_set_timeout(tp, 30);
	tcase_add_test(tp, push_delivers_the_document);
	tcase_add_test(tp, push_refused_is_not_retried);
	tcase_add_test(tp, push_retries_503_then_succeeds);
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
