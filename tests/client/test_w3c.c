/*
 * W3C Trace Context: a table of valid and malformed traceparent/tracestate
 * inputs; malformed ones are rejected (or, for tracestate, discarded as the spec
 * asks) without a crash. serialize/deserialize round trips through text and the
 * binary form, and deserialize deposits breadcrumbs and the upstream trigger.
 * Responses (retrace_serialize_response / retrace_deserialize_response, text and
 * binary) round trip, deposit a breadcrumb to the callee's agent and carry the
 * fired flag back; malformed ones (a table, then fuzzing) deposit nothing.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/collect.h"
#include "common/testpool.h"
#include "retrace/retrace.h"

#define TP_OK "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

struct tp_case {
	const char *tp;
	int ok;
	const char *why;
};

static const struct tp_case tp_cases[] = {
	{TP_OK, 1, "valid"},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", 1, "not sampled"},
	{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future", 1,
	 "future version with more fields"},
	{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 1, "future version"},
	{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 0, "version ff"},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", 0,
	 "version 00 with extra fields"},
	{"0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 0, "bad hex version"},
	{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", 0, "uppercase hex"},
	{"00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01", 0, "bad hex trace id"},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bx-01", 0, "bad hex span id"},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x", 0, "bad hex flags"},
	{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", 0, "zero trace id"},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", 0, "zero span id"},
	{"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", 0, "short trace id"},
	{"00-4bf92f3577b34da6a3ce929d0e0e47366-00f067aa0ba902b7-01", 0, "long trace id"},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01", 0, "short span id"},
	{"00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", 0, "wrong separators"},
	{"", 0, "empty"},
	{"00", 0, "truncated"},
	{" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 0, "leading space"},
	{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", 0,
	 "future version, junk not after a dash"},
};

START_TEST(test_traceparent_table)
{
	const struct tp_case *c = &tp_cases[_i];
	struct retrace_wire_context w;
	int rc = retrace_parse_context(c->tp, NULL, &w);
	ck_assert_msg((rc == RETRACE_OK) == c->ok, "%s: %s -> %d", c->why, c->tp, rc);
	if (c->ok) {
		ck_assert_uint_eq(w.trace_id.hi, 0x4bf92f3577b34da6ull);
		ck_assert_uint_eq(w.trace_id.lo, 0xa3ce929d0e0e4736ull);
		ck_assert_uint_eq(w.parent_span_id, 0x00f067aa0ba902b7ull);
	}
}
END_TEST

START_TEST(test_traceparent_oversized)
{
	char big[4096];
	struct retrace_wire_context w;
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = 0;
	memcpy(big, "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", 56);
	ck_assert_int_eq(retrace_parse_context(big, NULL, &w), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_parse_context(NULL, NULL, &w), RETRACE_E_INVAL);
}
END_TEST

struct ts_case {
	const char *ts;
	int rejected;
	uint32_t hop0, hop1;
	int fired, call_dropped;
	const char *why;
};

static const struct ts_case ts_cases[] = {
	{"rt=0000002a.00000007.1", 0, 42, 7, 1, 0, "ours"},
	{"congo=t61rcWkgMzE,rt=0000002a.00000000.0", 0, 42, 0, 0, 0, "ours second"},
	{" rt=0000002a.00000007.0 , ,vendor@tenant=x ", 0, 42, 7, 0, 0, "OWS and empty members"},
	{"congo=t61rcWkgMzE", 0, 0, 0, 0, 0, "foreign only"},
	{"rt=0000002a.00000007.1,rt=00000001.00000000.0", 1, 0, 0, 0, 0, "duplicate rt"},
	{"a=1,b=2,a=3", 1, 0, 0, 0, 0, "duplicate key"},
	{"rt=2a.7.1", 1, 0, 0, 0, 0, "short rt value"},
	{"rt=0000002A.00000007.1", 1, 0, 0, 0, 0, "uppercase rt hex"},
	{"rt=0000002a.00000007.2", 0, 42, 7, 0, 1, "call dropped"},
	{"rt=0000002a.00000007.3", 0, 42, 7, 1, 1, "fired, call dropped"},
	{"rt=0000002a.00000007.4", 1, 0, 0, 0, 0, "unknown flag bit"},
	{"rt=0000002a.00000007.f", 1, 0, 0, 0, 0, "all flag bits"},
	{"rt=0000002a.00000007.A", 1, 0, 0, 0, 0, "uppercase flag digit"},
	{"rt=0000002a.00000007.g", 1, 0, 0, 0, 0, "flag not hex"},
	{"rt=0000002a.00000007.", 1, 0, 0, 0, 0, "no flag digit"},
	{"Rt=0000002a.00000007.1", 1, 0, 0, 0, 0, "uppercase key"},
	{"rt", 1, 0, 0, 0, 0, "no equals"},
	{"=x", 1, 0, 0, 0, 0, "empty key"},
	{"k=", 1, 0, 0, 0, 0, "empty value"},
	{"k=a=b", 1, 0, 0, 0, 0, "equals in value"},
};

START_TEST(test_tracestate_table)
{
	const struct ts_case *c = &ts_cases[_i];
	struct retrace_wire_context w;
	ck_assert_int_eq(retrace_parse_context(TP_OK, c->ts, &w), RETRACE_OK);
	ck_assert_msg(w.state_rejected == c->rejected, "%s: %s", c->why, c->ts);
	ck_assert_uint_eq(w.hops[0], c->hop0);
	ck_assert_uint_eq(w.hops[1], c->hop1);
	ck_assert_int_eq(w.fired, c->fired);
	ck_assert_int_eq(w.call_dropped, c->call_dropped);
}
END_TEST

/* A bad flag value discards the tracestate (W3C), deposits no breadcrumb and
 * is counted; a good one is not. */
START_TEST(test_bad_rt_flag_counted)
{
	struct retrace_wire_context w;
	uint64_t s0, s1;
	struct rt_pool pool;
	char name[64];
	static const uint8_t bad_bin[RETRACE_BINARY_CONTEXT_LEN] = { 1, 0x40, [17] = 5, [25] = 1 };
	test_pool_name(name, sizeof name, "w3cflag");
	test_pool_create(&pool, name, 4096, 64);
	test_client_init(name, 1);
	s0 = retrace_thread_contexts_rejected();
	ck_assert_int_eq(retrace_deserialize(TP_OK, "rt=00000007.00000003.9", &w), RETRACE_OK);
	ck_assert_int_eq(w.state_rejected, 1);
	ck_assert_int_eq(w.call_dropped, 0);
	ck_assert_uint_eq(w.hops[0], 0);
	ck_assert_int_eq(retrace_deserialize_binary(bad_bin, sizeof bad_bin, &w), RETRACE_E_INVAL);
	s1 = retrace_thread_contexts_rejected();
	ck_assert_uint_eq(s1 - s0, 2);
	ck_assert_int_eq(retrace_deserialize(TP_OK, "rt=00000007.00000003.2", &w), RETRACE_OK);
	ck_assert_int_eq(w.call_dropped, 1);
	ck_assert_uint_eq(retrace_thread_contexts_rejected(), s1);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_tracestate_limits)
{
	char ts[2048];
	struct retrace_wire_context w;
	size_t i, n = 0;
	/* 33 members: too many. */
	for (i = 0; i < 33; i++)
		n += (size_t)sprintf(ts + n, "%sk%zu=v", i ? "," : "", i);
	ck_assert_int_eq(retrace_parse_context(TP_OK, ts, &w), RETRACE_OK);
	ck_assert_int_eq(w.state_rejected, 1);
	/* More than 512 characters. */
	memset(ts, 'v', 600);
	memcpy(ts, "k=", 2);
	ts[600] = 0;
	ck_assert_int_eq(retrace_parse_context(TP_OK, ts, &w), RETRACE_OK);
	ck_assert_int_eq(w.state_rejected, 1);
}
END_TEST

START_TEST(test_round_trip_and_deposit)
{
	struct rt_pool pool;
	struct retrace_config cfg;
	struct retrace_wire_context w, w2;
	struct collection col = {0};
	char name[64], tp[64], ts[600], want[128];
	uint8_t bin[RETRACE_BINARY_CONTEXT_LEN];

	test_pool_name(name, sizeof name, "w3c");
	test_pool_create(&pool, name, 4096, 16); /* agent id 42 */
	retrace_config_from_env(&cfg);
	cfg.pool_name = name;
	cfg.quiet = 1;
	ck_assert_int_eq(retrace_init(&cfg), RETRACE_OK);
	ck_assert_uint_eq(retrace_local_agent(), 42);

	/* An incoming request from agent 7 (whose previous hop was 3), fired. */
	ck_assert_int_eq(retrace_deserialize(TP_OK, "x=y,rt=00000007.00000003.1", &w), RETRACE_OK);
	retrace_begin(w.trace_id);
	retrace_set_span_id(0x1122334455667788ull);
	ck_assert_int_eq(retrace_serialize(tp, sizeof tp, ts, sizeof ts, "x=y,rt=00000007.00000003.1"),
			 RETRACE_OK);
	ck_assert_str_eq(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-1122334455667788-01");
	snprintf(want, sizeof want, "rt=0000002a.00000007.1,ot=th:0;rv:%014llx,x=y",
		 (unsigned long long)retrace_hash_rv(w.trace_id));
	ck_assert_str_eq(ts, want);
	ck_assert_int_eq(retrace_parse_context(tp, ts, &w2), RETRACE_OK);
	ck_assert_uint_eq(w2.hops[0], 42);
	ck_assert_uint_eq(w2.hops[1], 7);
	ck_assert_int_eq(w2.fired, 1);
	ck_assert_int_eq(retrace_serialize(tp, 10, NULL, 0, NULL), RETRACE_E_INVAL);

	ck_assert_int_eq(retrace_serialize_binary(bin), RETRACE_OK);
	ck_assert_int_eq(retrace_parse_binary(bin, sizeof bin, &w2), RETRACE_OK);
	ck_assert_uint_eq(w2.trace_id.lo, w.trace_id.lo);
	ck_assert_uint_eq(w2.trace_id.hi, w.trace_id.hi);
	ck_assert_uint_eq(w2.parent_span_id, 0x1122334455667788ull);
	ck_assert_uint_eq(w2.hops[0], 42);
	ck_assert_uint_eq(w2.hops[1], 7);
	ck_assert_int_eq(w2.fired, 1);
	ck_assert_int_eq(retrace_parse_binary(bin, sizeof bin - 1, &w2), RETRACE_E_INVAL);
	bin[0] = 2; /* an unknown version */
	ck_assert_int_eq(retrace_parse_binary(bin, sizeof bin, &w2), RETRACE_E_INVAL);
	bin[0] = 0; /* version 0 is 34 bytes */
	ck_assert_int_eq(retrace_parse_binary(bin, sizeof bin, &w2), RETRACE_E_INVAL);
	retrace_end();

	/* Breadcrumbs for both hops and one upstream trigger were deposited. */
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_crumbs, 2);
	ck_assert_uint_eq(col.crumbs[0][0], w.trace_id.lo);
	ck_assert_uint_eq(col.crumbs[0][1], 7);
	ck_assert_uint_eq(col.crumbs[1][1], 3);
	ck_assert_uint_eq(col.n_triggers, 1);
	ck_assert_uint_eq(col.triggers[0][1], RETRACE_TRIGGER_UPSTREAM);
	collection_free(&col);

	/* A malformed context deposits nothing. */
	ck_assert_int_eq(retrace_deserialize("00-zz", "rt=00000007.00000003.1", &w), RETRACE_E_INVAL);
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_crumbs + col.n_triggers, 0);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

/* ------------------------------------------------------------ responses ---- */

/* Attach to a fresh test pool (agent id 42). */
static void response_pool(struct rt_pool *pool, const char *tag)
{
	char name[64];
	test_pool_name(name, sizeof name, tag);
	test_pool_create(pool, name, 4096, 16);
	test_client_init(name, 4);
	ck_assert_uint_eq(retrace_local_agent(), 42);
}

/* The fired flag of the current trace, as the response would carry it. */
static int current_fired(void)
{
	char v[RETRACE_RESPONSE_TEXT_LEN];
	ck_assert_int_eq(retrace_serialize_response(v, sizeof v), RETRACE_RESPONSE_TEXT_LEN - 1);
	return v[12] == '1';
}

/*
 * Callee writes, caller reads: the text and binary forms round trip, the caller
 * leaves one breadcrumb per callee agent (not its own, not 0, not twice in one
 * writer stream) and picks up the callee's fired flag; no trigger is pushed.
 */
START_TEST(test_response_round_trip_and_deposit)
{
	struct rt_pool pool;
	struct collection col = {0};
	char v[RETRACE_RESPONSE_TEXT_LEN], tp[64], ts[64];
	uint8_t bin[RETRACE_RESPONSE_BINARY_LEN];
	static const uint8_t from5[RETRACE_RESPONSE_BINARY_LEN] = {0, 0, 0, 0, 0, 5};
	static const uint8_t fired_bin[RETRACE_RESPONSE_BINARY_LEN] = {0, 1, 0, 0, 0x10, 0};
	const retrace_trace_id id = {0x11, 0x2222};

	response_pool(&pool, "resp");
	/* outside a trace */
	ck_assert_int_eq(retrace_serialize_response(v, sizeof v), RETRACE_E_NOTRACE);
	ck_assert_int_eq(retrace_deserialize_response("rt=00000007.0"), RETRACE_E_NOTRACE);
	ck_assert_int_eq(retrace_serialize_response_binary(bin), RETRACE_E_NOTRACE);
	ck_assert_int_eq(retrace_deserialize_response_binary(from5, sizeof from5), RETRACE_E_NOTRACE);

	retrace_begin(id);
	/* the callee's side */
	ck_assert_int_eq(retrace_serialize_response(v, sizeof v), 13);
	ck_assert_str_eq(v, "rt=0000002a.0");
	ck_assert_int_eq(retrace_serialize_response(v, RETRACE_RESPONSE_TEXT_LEN - 1), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_serialize_response(NULL, 64), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_serialize_response_binary(bin), RETRACE_RESPONSE_BINARY_LEN);
	ck_assert_uint_eq(bin[0], 0);
	ck_assert_uint_eq(bin[1], 0);
	ck_assert_uint_eq(bin[5], 42);

	/* the caller's side */
	ck_assert_int_eq(retrace_deserialize_response("rt=00000007.0"), RETRACE_OK);
	ck_assert_int_eq(retrace_deserialize_response("rt=00000007.0"), RETRACE_OK); /* again */
	ck_assert_int_eq(retrace_deserialize_response(v), RETRACE_OK);         /* our own */
	ck_assert_int_eq(retrace_deserialize_response("rt=00000000.0"), RETRACE_OK);
	ck_assert_int_eq(retrace_deserialize_response_binary(from5, sizeof from5), RETRACE_OK);
	ck_assert_int_eq(current_fired(), 0);
	ck_assert_int_eq(retrace_deserialize_response("rt=0000abcd.1"), RETRACE_OK);
	ck_assert_int_eq(current_fired(), 1); /* the callee fired */
	ck_assert_int_eq(retrace_serialize(tp, sizeof tp, ts, sizeof ts, NULL), RETRACE_OK);
	ck_assert_int_eq(strncmp(ts, "rt=0000002a.00000000.1,", 23), 0); /* later calls say so */
	ck_assert_int_eq(retrace_serialize_response_binary(bin), RETRACE_RESPONSE_BINARY_LEN);
	ck_assert_uint_eq(bin[1], 1);
	retrace_end();

	/* a new begin of the same trace is a new writer stream: named again */
	retrace_begin(id);
	ck_assert_int_eq(current_fired(), 0);
	ck_assert_int_eq(retrace_deserialize_response_binary(fired_bin, sizeof fired_bin), RETRACE_OK);
	ck_assert_int_eq(current_fired(), 1);
	ck_assert_int_eq(retrace_deserialize_response("rt=00000007.0"), RETRACE_OK);
	retrace_end();
	retrace_flush();

	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_crumbs, 5);
	ck_assert_uint_eq(col.crumbs[0][1], 7);
	ck_assert_uint_eq(col.crumbs[1][1], 5);
	ck_assert_uint_eq(col.crumbs[2][1], 0xabcd);
	ck_assert_uint_eq(col.crumbs[3][1], 0x1000);
	ck_assert_uint_eq(col.crumbs[4][1], 7);
	for (size_t i = 0; i < col.n_crumbs; i++)
		ck_assert_uint_eq(col.crumbs[i][0], id.lo);
	ck_assert_uint_eq(col.n_triggers, 0); /* the callee's trigger leads to us */
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

/* A caller that calls one service 100 times, then six others twice each: one
 * breadcrumb per callee agent (the client remembers the last four a writer
 * stream named, so more agents than that still dedupe back-to-back repeats). */
START_TEST(test_response_many_calls)
{
	struct rt_pool pool;
	struct collection col = {0};
	char v[RETRACE_RESPONSE_TEXT_LEN];
	int i;

	response_pool(&pool, "respmany");
	retrace_begin((retrace_trace_id){0, 0x77});
	for (i = 0; i < 100; i++)
		ck_assert_int_eq(retrace_deserialize_response("rt=00000003.0"), RETRACE_OK);
	for (i = 0; i < 6; i++) { /* six agents: more than are remembered */
		snprintf(v, sizeof v, "rt=%08x.0", 100 + i);
		ck_assert_int_eq(retrace_deserialize_response(v), RETRACE_OK);
		ck_assert_int_eq(retrace_deserialize_response(v), RETRACE_OK);
	}
	retrace_end();
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_crumbs, 7);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

static const char *const bad_responses[] = {
	"", "rt=", "rt=00000007", "rt=00000007.", "rt=0000002A.0", "rt=00000007.2",
	"rt=00000007.0 ", " rt=00000007.0", "rt=0000007.0", "rt=000000007.0", "RT=00000007.0",
	"rt:00000007.0", "rt=00000007,0", "rt=0000000g.0", "rt=00000007.00", "rt=-0000007.0",
	"rt=00000007.1,x=y", "tr=00000007.1", "rt=00000007.0\n", "rt=0x000007.0",
};

/* Reference validator, written apart from the library's. */
static int response_valid(const char *s, size_t len)
{
	size_t i;
	if (len != 13 || memcmp(s, "rt=", 3) != 0 || s[11] != '.' || (s[12] != '0' && s[12] != '1'))
		return 0;
	for (i = 3; i < 11; i++)
		if (!strchr("0123456789abcdef", s[i]) || s[i] == 0)
			return 0;
	return 1;
}

static uint64_t fuzz_state = 0x243f6a8885a308d3ull;

static uint64_t fuzz_next(void)
{
	fuzz_state ^= fuzz_state << 13;
	fuzz_state ^= fuzz_state >> 7;
	fuzz_state ^= fuzz_state << 17;
	return fuzz_state;
}

/*
 * Malformed responses, from a table and 5000 random strings (mostly mutations of
 * a valid value, so the parser is probed near the edge) and 5000 random binary
 * forms: every one is refused, nothing is deposited and the trace is not
 * marked fired.
 */
START_TEST(test_response_malformed_and_fuzz)
{
	struct rt_pool pool;
	struct collection col = {0};
	char v[32];
	uint8_t b[10];
	size_t i, len, k, refused = 0;

	response_pool(&pool, "respfuzz");
	retrace_begin((retrace_trace_id){0, 0x99});
	ck_assert_int_eq(retrace_deserialize_response(NULL), RETRACE_E_INVAL);
	for (i = 0; i < sizeof bad_responses / sizeof bad_responses[0]; i++) {
		ck_assert_msg(!response_valid(bad_responses[i], strlen(bad_responses[i])), "%zu", i);
		ck_assert_msg(retrace_deserialize_response(bad_responses[i]) == RETRACE_E_INVAL,
			      "accepted \"%s\"", bad_responses[i]);
	}
	for (i = 0; i < 5000; i++) {
		if (i % 2) { /* a mutation of a valid value */
			snprintf(v, sizeof v, "rt=%08x.1", (unsigned)(fuzz_next() % 1000 + 1));
			len = 13;
			for (k = 0; k < 1 + fuzz_next() % 3; k++) {
				switch (fuzz_next() % 3) {
				case 0:
					if (len)
						v[fuzz_next() % len] = (char)(1 + fuzz_next() % 255);
					break;
				case 1: len = fuzz_next() % (len + 1); break;
				default:
					if (len < sizeof v - 1)
						v[len++] = (char)(1 + fuzz_next() % 255);
				}
			}
			v[len] = 0;
		} else { /* anything printable-ish */
			len = fuzz_next() % 20;
			for (k = 0; k < len; k++)
				v[k] = (char)(1 + fuzz_next() % 127);
			v[len] = 0;
		}
		len = strlen(v);
		if (response_valid(v, len))
			continue; /* a mutation can land on a valid value: not this test's */
		ck_assert_msg(retrace_deserialize_response(v) == RETRACE_E_INVAL, "accepted \"%s\"", v);
		refused++;
	}
	ck_assert_uint_gt(refused, 4000);
	for (i = 0; i < 5000; i++) {
		len = fuzz_next() % (sizeof b + 1);
		for (k = 0; k < len; k++)
			b[k] = (uint8_t)(fuzz_next() % 4 == 0 ? 0 : fuzz_next());
		if (len == RETRACE_RESPONSE_BINARY_LEN && b[0] == 0 && b[1] <= 1)
			continue;
		ck_assert_int_eq(retrace_deserialize_response_binary(b, len), RETRACE_E_INVAL);
	}
	ck_assert_int_eq(retrace_deserialize_response_binary(NULL, 6), RETRACE_E_INVAL);
	ck_assert_int_eq(current_fired(), 0);
	retrace_end();
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_eq(col.n_crumbs, 0);
	ck_assert_uint_eq(col.n_triggers, 0);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("client_w3c");
	int rc;
	TCase *tc = tcase_create("w3c");
	tcase_add_loop_test(tc, test_traceparent_table, 0,
			    (int)(sizeof tp_cases / sizeof tp_cases[0]));
	tcase_add_test(tc, test_traceparent_oversized);
	tcase_add_loop_test(tc, test_tracestate_table, 0,
			    (int)(sizeof ts_cases / sizeof ts_cases[0]));
	tcase_add_test(tc, test_tracestate_limits);
	tcase_add_test(tc, test_bad_rt_flag_counted);
	tcase_add_test(tc, test_round_trip_and_deposit);
	tcase_add_test(tc, test_response_round_trip_and_deposit);
	tcase_add_test(tc, test_response_many_calls);
	tcase_add_test(tc, test_response_malformed_and_fuzz);
	suite_add_tcase(s, tc);
	rc = test_run_suite(s);
	test_pool_sweep("w3cflag"); /* what a failed test_bad_rt_flag_counted left */
	return rc;
}
