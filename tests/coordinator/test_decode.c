/*
 * tests/coordinator/test_decode.c — the decoder (coordinator/decode.h): slices
 * back into spans.
 *
 * Input comes from evgen.c, an encoder written independently of the client
 * library. One rich scenario (3 agents, 2 pids on one, 2 threads, nested spans,
 * cross-agent parents, every attribute and argument type) is checked field by
 * field, and re-checked after splitting records into tiny buffers, shuffling,
 * duplicating and going through encoded SLICE messages. Damage tests drop,
 * corrupt and truncate data and check what is flagged and counted and that
 * everything undamaged is still exact. Random input runs 1000 times with a
 * fixed seed (the suite also runs under ASan). Client spans without their
 * server side are flagged; rt_decode_complete is checked field by field; and
 * the CLI's summaries of a stored trace name duplicates and unmatched spans.
 */
#include <check.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/suite.h"
#include "decode.h"
#include "evgen.h"
#include "store.h"
#include "retrace/retrace.h"
#include "shm/events.h"

#define TRACE_HI 0x0123456789abcdefull
#define TRACE_LO 0xfedcba9876543210ull

#define A1 11u /* two pids: 100 (threads 1, 2) and 200 */
#define A2 22u
#define A3 33u

/* Span kinds / statuses / levels as numbers (OpenTelemetry's). */
enum { K_INTERNAL = 1, K_SERVER = 2, K_CLIENT = 3, K_PRODUCER = 4, K_CONSUMER = 5 };
enum { ST_UNSET = 0, ST_OK = 1, ST_ERROR = 2 };
enum { L_DEBUG = 0, L_INFO = 1, L_WARN = 2, L_ERROR = 3 };

static const char *TPL_USER = "user %s has %d items (%.2f%%) ok=%d nil=%s";
static const char *TPL_STOCK = "sku %llu left %x [%5s|%-5s] %+d%c";

static char g_blob[3001];

static uint64_t ns(uint64_t off)
{
	return EG_BASE_NS + off;
}

static void setup_agents(struct eg *g)
{
	/* three different calibrations: a slice must use its own */
	eg_agent(g, A1, 2000000000ull, 500000000000ull, EG_T(1000));
	eg_agent(g, A2, 3000000000ull, 7000000000000ull, 0);
	eg_agent(g, A3, 2500000000ull, 1000000000ull, EG_T(500000));
}

/*
 * The scenario:
 *   A1 pid 100 tid 1: 0x1001 "GET /checkout" SERVER (root), 0x1002 "validate"
 *                     (child, templated log), loose free-text log
 *   A1 pid 100 tid 2: 0x1003 "worker" (child of 0x1001, free-text log)
 *   A1 pid 200 tid 1: 0x1004 "side" PRODUCER (child of 0x1001, peer.untraced)
 *   A2 pid 300 tid 5: 0x2001 "inventory" (child of 0x1001 across agents, ERROR),
 *                     0x2002 "db.query" CLIENT (child, a 3000-byte attribute)
 *   A3 pid 400 tid 9: 0x3001 "consume" CONSUMER (child of 0x2002)
 */
static void build_scenario(struct eg *g)
{
	struct eg_stream *a = eg_stream(g, A1, 100, 1);
	struct eg_stream *a2 = eg_stream(g, A1, 100, 2);
	struct eg_stream *a3 = eg_stream(g, A1, 200, 1);
	struct eg_stream *b = eg_stream(g, A2, 300, 5);
	struct eg_stream *c = eg_stream(g, A3, 400, 9);
	struct eg_arg user[] = { EG_S("alice"), EG_I(3), EG_D(12.5), EG_B(1), EG_NIL };
	struct eg_arg stock[] = { EG_U(18446744073709551615ull), EG_I(255), EG_S("ab"),
				  EG_S("cd"), EG_I(-7), EG_I('!') };

	memset(g_blob, 'x', sizeof g_blob - 1);
	g_blob[0] = 'B';
	g_blob[sizeof g_blob - 2] = 'E';

	eg_resource(a, "frontend", "host-a");
	eg_log_text(a, 0, EG_T(5), L_INFO, "outside any span");
	eg_span_start(a, 0x1001, 0, K_SERVER, EG_T(10), "GET /checkout");
	eg_attr(a, 0x1001, "http.method", EG_S("GET"));
	eg_attr(a, 0x1001, "http.status", EG_I(200));
	eg_attr(a, 0x1001, "ratio", EG_D(0.25));
	eg_attr(a, 0x1001, "cached", EG_B(0));
	eg_span_start(a, 0x1002, 0x1001, K_INTERNAL, EG_T(20), "validate");
	eg_template(a, TPL_USER);
	eg_log(a, 0x1002, EG_T(40), L_DEBUG, eg_template_id(TPL_USER), user, 5);
	eg_log(a, 0x1002, EG_T(30), L_ERROR, eg_template_id(TPL_USER), user, 5); /* earlier */
	eg_span_end(a, 0x1002, EG_T(50), ST_UNSET, 0, NULL);

	eg_resource(a2, "frontend", "host-a");
	eg_span_start(a2, 0x1003, 0x1001, K_INTERNAL, EG_T(30), "worker");
	eg_log_text(a2, 0x1003, EG_T(70), L_WARN, "free text here");
	eg_span_end(a2, 0x1003, EG_T(200), ST_OK, 0, NULL);

	eg_resource(a3, "sidecar", "host-a");
	eg_span_start(a3, 0x1004, 0x1001, K_PRODUCER, EG_T(40), "side");
	eg_attr(a3, 0x1004, "peer.untraced", EG_B(1)); /* no consumer expected */
	eg_span_end(a3, 0x1004, EG_T(60), ST_OK, 0, NULL);

	eg_span_end(a, 0x1001, EG_T(900), ST_OK, 0, NULL);

	eg_resource(b, "inventory", "host-b");
	eg_span_start(b, 0x2001, 0x1001, K_SERVER, EG_T(100), "inventory");
	eg_attr(b, 0x2001, "delta", EG_I(-42));
	eg_template(b, TPL_STOCK);
	eg_log(b, 0x2001, EG_T(110), L_WARN, eg_template_id(TPL_STOCK), stock, 6);
	eg_span_start(b, 0x2002, 0x2001, K_CLIENT, EG_T(150), "db.query");
	eg_attr(b, 0x2002, "blob", EG_S(g_blob));
	eg_span_end(b, 0x2002, EG_T(160), ST_OK, 0, NULL);
	eg_span_end(b, 0x2001, EG_T(400), ST_ERROR, -5, "out of stock");

	eg_resource(c, "queue", "host-c");
	eg_span_start(c, 0x3001, 0x2002, K_CONSUMER, EG_T(300), "consume");
	eg_template(c, TPL_USER); /* the same template on another host */
	eg_log(c, 0x3001, EG_T(320), L_INFO, eg_template_id(TPL_USER), user, 5);
	eg_span_end(c, 0x3001, EG_T(350), ST_OK, 0, NULL);
	eg_finish(g);
}

static const struct rt_span *span_by_id(const struct rt_decoded_trace *t, uint64_t id)
{
	uint32_t i;
	for (i = 0; i < t->n_spans; i++)
		if (t->spans[i].span_id == id)
			return &t->spans[i];
	return NULL;
}

static void check_span(const struct rt_decoded_trace *t, uint32_t idx, uint64_t id,
		       uint64_t parent_id, int32_t parent_idx, const char *name, uint8_t kind,
		       uint64_t start, uint64_t end, uint8_t status, uint32_t agent, uint32_t pid,
		       uint32_t tid)
{
	const struct rt_span *s = &t->spans[idx];
	ck_assert_uint_eq(s->span_id, id);
	ck_assert_uint_eq(s->trace_hi, TRACE_HI);
	ck_assert_uint_eq(s->trace_lo, TRACE_LO);
	ck_assert_uint_eq(s->parent_id, parent_id);
	ck_assert_int_eq(s->parent, parent_idx);
	ck_assert_str_eq(s->name, name);
	ck_assert_uint_eq(s->kind, kind);
	ck_assert_uint_eq(s->start_ns, ns(start));
	ck_assert_uint_eq(s->end_ns, ns(end));
	ck_assert_uint_eq(s->status, status);
	ck_assert_uint_eq(s->agent_id, agent);
	ck_assert_uint_eq(s->pid, pid);
	ck_assert_uint_eq(s->tid, tid);
	ck_assert_uint_eq(s->flags, 0);
	if (status != ST_ERROR) {
		ck_assert_str_eq(s->status_message, "");
		ck_assert_int_eq(s->status_code, 0);
	}
}

static void check_resource(const struct rt_decoded_trace *t, uint32_t idx, uint32_t agent,
			   uint32_t pid, const char *service, const char *host)
{
	const struct rt_resource *r = &t->resources[idx];
	ck_assert_uint_eq(r->agent_id, agent);
	ck_assert_uint_eq(r->pid, pid);
	ck_assert_str_eq(r->service, service);
	ck_assert_str_eq(r->host, host);
	ck_assert_uint_eq(r->n_attrs, 4);
	ck_assert_str_eq(r->attrs[0].key, "service.name");
	ck_assert_str_eq(r->attrs[1].key, "host.name");
	ck_assert_str_eq(r->attrs[2].key, "process.pid");
	ck_assert_uint_eq(r->attrs[2].value.type, RT_VAL_INT);
	ck_assert_int_eq(r->attrs[2].value.u.i, pid);
	ck_assert_str_eq(r->attrs[3].key, "deployment.canary");
	ck_assert_uint_eq(r->attrs[3].value.type, RT_VAL_BOOL);
	ck_assert_int_eq(r->attrs[3].value.u.b, 1);
}

static void check_user_log(const struct rt_log_event *l, uint64_t t, uint8_t level)
{
	ck_assert_uint_eq(l->time_ns, ns(t));
	ck_assert_uint_eq(l->level, level);
	ck_assert_uint_eq(l->template_id, eg_template_id(TPL_USER));
	ck_assert_str_eq(l->template_text, TPL_USER);
	ck_assert_str_eq(l->body, "user alice has 3 items (12.50%) ok=1 nil=(null)");
	ck_assert_uint_eq(l->flags, 0);
	ck_assert_uint_eq(l->n_args, 5);
	ck_assert_uint_eq(l->args[0].type, RT_VAL_STR);
	ck_assert_str_eq(l->args[0].u.s, "alice");
	ck_assert_uint_eq(l->args[1].type, RT_VAL_INT);
	ck_assert_int_eq(l->args[1].u.i, 3);
	ck_assert_uint_eq(l->args[2].type, RT_VAL_DOUBLE);
	ck_assert(l->args[2].u.d == 12.5);
	ck_assert_uint_eq(l->args[3].type, RT_VAL_BOOL);
	ck_assert_int_eq(l->args[3].u.b, 1);
	ck_assert_uint_eq(l->args[4].type, RT_VAL_NONE);
}

/* Everything of the scenario, exactly. */
static void check_scenario(const struct rt_decoded_trace *t)
{
	const struct rt_span *s;
	char want[128];

	ck_assert_uint_eq(t->trace_hi, TRACE_HI);
	ck_assert_uint_eq(t->trace_lo, TRACE_LO);
	ck_assert_uint_eq(t->n_spans, 7);
	/* (start_ns, span_id) order: 1001@10 1002@20 1003@30 1004@40 2001@100 2002@150 3001@300 */
	check_span(t, 0, 0x1001, 0, -1, "GET /checkout", K_SERVER, EG_T(10), EG_T(900), ST_OK, A1, 100, 1);
	check_span(t, 1, 0x1002, 0x1001, 0, "validate", K_INTERNAL, EG_T(20), EG_T(50), ST_UNSET, A1, 100, 1);
	check_span(t, 2, 0x1003, 0x1001, 0, "worker", K_INTERNAL, EG_T(30), EG_T(200), ST_OK, A1, 100, 2);
	check_span(t, 3, 0x1004, 0x1001, 0, "side", K_PRODUCER, EG_T(40), EG_T(60), ST_OK, A1, 200, 1);
	check_span(t, 4, 0x2001, 0x1001, 0, "inventory", K_SERVER, EG_T(100), EG_T(400), ST_ERROR, A2, 300, 5);
	check_span(t, 5, 0x2002, 0x2001, 4, "db.query", K_CLIENT, EG_T(150), EG_T(160), ST_OK, A2, 300, 5);
	check_span(t, 6, 0x3001, 0x2002, 5, "consume", K_CONSUMER, EG_T(300), EG_T(350), ST_OK, A3, 400, 9);

	/* attributes, in the order written, all four types */
	s = &t->spans[0];
	ck_assert_uint_eq(s->n_attrs, 4);
	ck_assert_str_eq(s->attrs[0].key, "http.method");
	ck_assert_uint_eq(s->attrs[0].value.type, RT_VAL_STR);
	ck_assert_str_eq(s->attrs[0].value.u.s, "GET");
	ck_assert_str_eq(s->attrs[1].key, "http.status");
	ck_assert_uint_eq(s->attrs[1].value.type, RT_VAL_INT);
	ck_assert_int_eq(s->attrs[1].value.u.i, 200);
	ck_assert_str_eq(s->attrs[2].key, "ratio");
	ck_assert_uint_eq(s->attrs[2].value.type, RT_VAL_DOUBLE);
	ck_assert(s->attrs[2].value.u.d == 0.25);
	ck_assert_str_eq(s->attrs[3].key, "cached");
	ck_assert_uint_eq(s->attrs[3].value.type, RT_VAL_BOOL);
	ck_assert_int_eq(s->attrs[3].value.u.b, 0);
	ck_assert_uint_eq(s->n_logs, 0);
	ck_assert_uint_eq(t->spans[1].n_attrs, 0);
	ck_assert_uint_eq(t->spans[2].n_attrs, 0);

	/* templated logs, by time (the later-written one came first) */
	s = &t->spans[1];
	ck_assert_uint_eq(s->n_logs, 2);
	check_user_log(&s->logs[0], EG_T(30), L_ERROR);
	check_user_log(&s->logs[1], EG_T(40), L_DEBUG);

	/* free text */
	s = &t->spans[2];
	ck_assert_uint_eq(s->n_logs, 1);
	ck_assert_uint_eq(s->logs[0].time_ns, ns(EG_T(70)));
	ck_assert_uint_eq(s->logs[0].level, L_WARN);
	ck_assert_uint_eq(s->logs[0].template_id, 0);
	ck_assert_ptr_null(s->logs[0].template_text);
	ck_assert_str_eq(s->logs[0].body, "free text here");
	ck_assert_uint_eq(s->logs[0].body_len, strlen("free text here"));
	ck_assert_uint_eq(s->logs[0].n_args, 0);

	/* error status, negative int, unsigned 64-bit argument, widths */
	s = &t->spans[4];
	ck_assert_int_eq(s->status_code, -5);
	ck_assert_str_eq(s->status_message, "out of stock");
	ck_assert_uint_eq(s->n_attrs, 1);
	ck_assert_str_eq(s->attrs[0].key, "delta");
	ck_assert_int_eq(s->attrs[0].value.u.i, -42);
	ck_assert_uint_eq(s->n_logs, 1);
	snprintf(want, sizeof want, TPL_STOCK, 18446744073709551615ull, 255u, "ab", "cd", -7, '!');
	ck_assert_str_eq(s->logs[0].body, want);
	ck_assert_str_eq(s->logs[0].body, "sku 18446744073709551615 left ff [   ab|cd   ] -7!");
	ck_assert_uint_eq(s->logs[0].body_len, strlen(s->logs[0].body));
	ck_assert_str_eq(s->logs[0].template_text, TPL_STOCK);
	ck_assert_uint_eq(s->logs[0].n_args, 6);
	ck_assert_uint_eq((uint64_t)s->logs[0].args[0].u.i, 18446744073709551615ull);

	s = &t->spans[5];
	ck_assert_uint_eq(s->n_attrs, 1);
	ck_assert_str_eq(s->attrs[0].value.u.s, g_blob);

	s = &t->spans[6];
	ck_assert_uint_eq(s->n_logs, 1);
	check_user_log(&s->logs[0], EG_T(320), L_INFO);

	/* the loose log */
	ck_assert_uint_eq(t->n_loose_logs, 1);
	ck_assert_str_eq(t->loose_logs[0].body, "outside any span");
	ck_assert_uint_eq(t->loose_logs[0].time_ns, ns(EG_T(5)));

	/* resources by (agent, pid), and each span's */
	ck_assert_uint_eq(t->n_resources, 4);
	check_resource(t, 0, A1, 100, "frontend", "host-a");
	check_resource(t, 1, A1, 200, "sidecar", "host-a");
	check_resource(t, 2, A2, 300, "inventory", "host-b");
	check_resource(t, 3, A3, 400, "queue", "host-c");
	ck_assert_uint_eq(t->spans[0].resource, 0);
	ck_assert_uint_eq(t->spans[1].resource, 0);
	ck_assert_uint_eq(t->spans[2].resource, 0);
	ck_assert_uint_eq(t->spans[3].resource, 1);
	ck_assert_uint_eq(t->spans[4].resource, 2);
	ck_assert_uint_eq(t->spans[5].resource, 2);
	ck_assert_uint_eq(t->spans[6].resource, 3);

	ck_assert_uint_eq(t->n_agents, 3);
	ck_assert_uint_eq(t->agents[0], A1);
	ck_assert_uint_eq(t->agents[1], A2);
	ck_assert_uint_eq(t->agents[2], A3);

	/* nothing damaged */
	ck_assert_uint_eq(t->st.gaps, 0);
	ck_assert_uint_eq(t->st.corrupt_frames, 0);
	ck_assert_uint_eq(t->st.corrupt_events, 0);
	ck_assert_uint_eq(t->st.truncated_records, 0);
	ck_assert_uint_eq(t->st.orphan_chunks, 0);
	ck_assert_uint_eq(t->st.orphan_events, 0);
	ck_assert_uint_eq(t->st.missing_templates, 0);
	ck_assert_uint_eq(t->st.partial_spans, 0);
	ck_assert_uint_eq(t->st.raw_records, 0);
	/* db.query (CLIENT) has its CONSUMER; side (PRODUCER) is exempt */
	ck_assert_uint_eq(t->st.unmatched_client_spans, 0);
	ck_assert_uint_eq(t->st.conflicting_buffers, 0);
	ck_assert(rt_decode_complete(&t->st));
	/* 5 resources, 3 templates, 7 starts, 7 ends, 7 attrs, 6 logs */
	ck_assert_uint_eq(t->st.events, 35);
	ck_assert_uint_eq(t->st.records, 35);
}

/* Decode all agents' buffers of g, one slice per agent, in order. */
static void decode_all(const struct eg *g, struct rt_decoded_trace *t)
{
	struct rt_decoder *d = rt_decoder_new(TRACE_HI, TRACE_LO);
	struct rt_wire_slice_buffer *bufs = calloc(g->n_bufs + 1, sizeof *bufs);
	struct rt_wire_slice sl;
	int i;
	ck_assert_ptr_nonnull(d);
	for (i = 0; i < g->n_agents; i++) {
		eg_slice(g, g->agents[i].id, NULL, 0, &sl, bufs);
		ck_assert_int_eq(rt_decoder_add_slice(d, &sl), 0);
	}
	free(bufs);
	ck_assert_int_eq(rt_decoder_finish(d, t), 0);
}

START_TEST(test_round_trip)
{
	struct eg g;
	struct rt_decoded_trace t;
	eg_init(&g, TRACE_HI, TRACE_LO, 8192);
	setup_agents(&g);
	build_scenario(&g);
	decode_all(&g, &t);
	check_scenario(&t);
	ck_assert_uint_eq(t.st.slices, 3);
	ck_assert_uint_eq(t.st.buffers, g.n_bufs);
	ck_assert_uint_eq(t.st.duplicate_buffers, 0);
	rt_decoded_trace_free(&t);
	ck_assert_ptr_null(t.arena);
	eg_free(&g);
}
END_TEST

/* Tiny buffers: nearly every record is split, some over many buffers; frames
 * with TS ticks and end marks counted in the buffer length. */
START_TEST(test_split_records)
{
	struct eg g;
	struct rt_decoded_trace t;
	eg_init(&g, TRACE_HI, TRACE_LO, 48);
	g.ts_frames = 1;
	g.end_marks = 1;
	setup_agents(&g);
	build_scenario(&g);
	ck_assert_uint_gt(g.n_bufs, 3000 / 44); /* the blob alone takes 69+ buffers */
	decode_all(&g, &t);
	check_scenario(&t);
	rt_decoded_trace_free(&t);
	eg_free(&g);
}
END_TEST

static uint64_t g_rng;

static uint64_t rnd(void)
{
	g_rng ^= g_rng << 13;
	g_rng ^= g_rng >> 7;
	g_rng ^= g_rng << 17;
	return g_rng;
}

static void shuffle(size_t *idx, size_t n)
{
	size_t i;
	for (i = n; i > 1; i--) {
		size_t j = (size_t)(rnd() % i), x = idx[i - 1];
		idx[i - 1] = idx[j];
		idx[j] = x;
	}
}

/* Buffers shuffled, each agent's cut into several SLICE messages, the
 * messages themselves fed in a shuffled agent order: same result. */
START_TEST(test_shuffled_messages)
{
	struct eg g;
	struct rt_decoded_trace t;
	struct rt_decoder *d;
	size_t *idx, i, n_msgs = 0;
	struct rt_wire_buf msgs[64];
	int a;

	g_rng = 0x9e3779b97f4a7c15ull;
	eg_init(&g, TRACE_HI, TRACE_LO, 64);
	setup_agents(&g);
	build_scenario(&g);
	idx = calloc(g.n_bufs, sizeof *idx);
	for (i = 0; i < g.n_bufs; i++)
		idx[i] = i;
	shuffle(idx, g.n_bufs);
	for (a = g.n_agents - 1; a >= 0; a--) {
		/* cut the shuffled list into 4 runs; each run is one message for this agent */
		size_t part, per = (g.n_bufs + 3) / 4;
		for (part = 0; part < 4; part++) {
			size_t from = part * per, n = from < g.n_bufs ? g.n_bufs - from : 0;
			if (n > per)
				n = per;
			rt_wire_buf_init(&msgs[n_msgs]);
			ck_assert_int_eq(eg_slice_msg(&g, g.agents[a].id, idx + from, n, &msgs[n_msgs]), 0);
			n_msgs++;
		}
	}
	d = rt_decoder_new(TRACE_HI, TRACE_LO);
	for (i = 0; i < n_msgs; i++)
		ck_assert_int_eq(rt_decoder_add_message(d, msgs[i].data, msgs[i].len), 0);
	ck_assert_int_eq(rt_decoder_finish(d, &t), 0);
	check_scenario(&t);
	ck_assert_uint_eq(t.st.slices, 12);
	ck_assert_uint_eq(t.st.buffers, g.n_bufs);
	rt_decoded_trace_free(&t);
	for (i = 0; i < n_msgs; i++)
		rt_wire_buf_free(&msgs[i]);
	free(idx);
	eg_free(&g);
}
END_TEST

/* Every slice sent twice (a re-sent slice) plus single buffers repeated. */
START_TEST(test_duplicates)
{
	struct eg g;
	struct rt_decoded_trace t;
	struct rt_decoder *d;
	struct rt_wire_slice_buffer *bufs;
	struct rt_wire_slice sl;
	size_t dup[3];
	int a, rep;

	eg_init(&g, TRACE_HI, TRACE_LO, 64);
	setup_agents(&g);
	build_scenario(&g);
	bufs = calloc(g.n_bufs + 1, sizeof *bufs);
	d = rt_decoder_new(TRACE_HI, TRACE_LO);
	for (rep = 0; rep < 2; rep++) {
		for (a = 0; a < g.n_agents; a++) {
			eg_slice(&g, g.agents[a].id, NULL, 0, &sl, bufs);
			ck_assert_int_eq(rt_decoder_add_slice(d, &sl), 0);
		}
	}
	dup[0] = 0;
	dup[1] = g.n_bufs / 2;
	dup[2] = g.n_bufs - 1;
	for (a = 0; a < g.n_agents; a++) {
		eg_slice(&g, g.agents[a].id, dup, 3, &sl, bufs);
		ck_assert_int_eq(rt_decoder_add_slice(d, &sl), 0);
	}
	ck_assert_int_eq(rt_decoder_finish(d, &t), 0);
	check_scenario(&t);
	ck_assert_uint_eq(t.st.buffers, 2 * g.n_bufs + 3);
	ck_assert_uint_eq(t.st.duplicate_buffers, g.n_bufs + 3);
	/* identical re-sent copies: nothing was lost */
	ck_assert_uint_eq(t.st.conflicting_buffers, 0);
	ck_assert(rt_decode_complete(&t.st));
	rt_decoded_trace_free(&t);
	free(bufs);
	eg_free(&g);
}
END_TEST

/* Decode g with the buffers for which keep[i] is 0 left out. */
static void decode_without(const struct eg *g, const char *drop, struct rt_decoded_trace *t)
{
	size_t *idx = calloc(g->n_bufs + 1, sizeof *idx), i, n = 0;
	struct rt_wire_slice_buffer *bufs = calloc(g->n_bufs + 1, sizeof *bufs);
	struct rt_decoder *d = rt_decoder_new(TRACE_HI, TRACE_LO);
	struct rt_wire_slice sl;
	int a;
	for (i = 0; i < g->n_bufs; i++)
		if (!drop || !drop[i])
			idx[n++] = i;
	for (a = 0; a < g->n_agents; a++) {
		eg_slice(g, g->agents[a].id, idx, n, &sl, bufs);
		ck_assert_int_eq(rt_decoder_add_slice(d, &sl), 0);
	}
	ck_assert_int_eq(rt_decoder_finish(d, t), 0);
	free(idx);
	free(bufs);
}

/*
 * One stream: A (exact, before), B (start, a 300-byte attribute split over
 * buffers, more attributes, end), C (exact, after); D in another stream. A
 * buffer in the middle of B's split attribute is dropped.
 */
START_TEST(test_dropped_buffer)
{
	struct eg g;
	struct rt_decoded_trace t;
	struct eg_stream *s, *o;
	char big[301], *drop;
	size_t b_start, b_end, split_first, i;
	const struct rt_span *sp;

	memset(big, 'y', 300);
	big[300] = 0;
	eg_init(&g, TRACE_HI, TRACE_LO, 128);
	setup_agents(&g);
	s = eg_stream(&g, A1, 100, 1);
	o = eg_stream(&g, A2, 300, 5);
	eg_resource(s, "frontend", "host-a");
	eg_span_start(s, 0xA, 0, K_SERVER, EG_T(1), "A");
	eg_attr(s, 0xA, "k", EG_I(1));
	eg_span_end(s, 0xA, EG_T(2), ST_OK, 0, NULL);
	eg_span_start(s, 0xB, 0xA, K_INTERNAL, EG_T(3), "B");
	b_start = g.last_buf;
	eg_attr(s, 0xB, "big", EG_S(big));
	split_first = g.last_buf;
	eg_attr(s, 0xB, "after", EG_I(2));
	eg_span_end(s, 0xB, EG_T(4), ST_OK, 0, NULL);
	b_end = g.last_buf;
	eg_span_start(s, 0xC, 0xA, K_INTERNAL, EG_T(5), "C");
	eg_span_end(s, 0xC, EG_T(6), ST_OK, 0, NULL);
	eg_resource(o, "inventory", "host-b");
	eg_span_start(o, 0xD, 0xB, K_SERVER, EG_T(7), "D");
	eg_span_end(o, 0xD, EG_T(8), ST_OK, 0, NULL);
	eg_finish(&g);
	ck_assert_uint_ge(b_end - b_start, 3); /* the attribute spans >= 3 buffers */
	ck_assert_uint_gt(b_start, 0);         /* A's events are before it */

	drop = calloc(g.n_bufs, 1);
	drop[split_first + 1] = 1; /* a middle chunk of the split attribute */
	decode_without(&g, drop, &t);

	ck_assert_uint_eq(t.st.gaps, 1);
	ck_assert(!rt_decode_complete(&t.st));
	ck_assert_uint_eq(t.st.truncated_records, 1); /* the big attribute */
	ck_assert_uint_ge(t.st.orphan_chunks, 1);     /* its tail after the gap */
	ck_assert_uint_eq(t.n_spans, 4);
	sp = span_by_id(&t, 0xB);
	ck_assert_uint_eq(sp->flags, RT_SPAN_PARTIAL);
	ck_assert_uint_eq(sp->start_ns, ns(EG_T(3)));
	ck_assert_uint_eq(sp->end_ns, ns(EG_T(4)));
	ck_assert_uint_eq(sp->n_attrs, 1);
	ck_assert_str_eq(sp->attrs[0].key, "after");
	for (i = 0; i < 3; i++) {
		static const uint64_t ids[] = { 0xA, 0xC, 0xD };
		sp = span_by_id(&t, ids[i]);
		ck_assert_ptr_nonnull(sp);
		ck_assert_uint_eq(sp->flags, 0);
		ck_assert_uint_eq(sp->start_ns, ns(EG_T(i == 0 ? 1 : i == 1 ? 5 : 7)));
		ck_assert_uint_eq(sp->end_ns, ns(EG_T(i == 0 ? 2 : i == 1 ? 6 : 8)));
	}
	ck_assert_uint_eq(span_by_id(&t, 0xA)->n_attrs, 1);
	ck_assert_int_eq(t.spans[span_by_id(&t, 0xD) - t.spans].parent,
			 (int32_t)(span_by_id(&t, 0xB) - t.spans));
	ck_assert_uint_eq(t.st.partial_spans, 1);
	rt_decoded_trace_free(&t);

	/* the stream's first buffer lost: a gap at the start; A never started */
	memset(drop, 0, g.n_bufs);
	drop[0] = 1;
	decode_without(&g, drop, &t);
	ck_assert_uint_eq(t.st.gaps, 1);
	sp = span_by_id(&t, 0xA);
	ck_assert_ptr_nonnull(sp);
	ck_assert_uint_eq(sp->flags, RT_SPAN_PARTIAL | RT_SPAN_NO_START);
	ck_assert_uint_eq(sp->start_ns, ns(EG_T(2)));
	ck_assert_uint_eq(sp->end_ns, ns(EG_T(2)));
	ck_assert_uint_ge(t.st.orphan_events, 1); /* its END */
	ck_assert_uint_eq(span_by_id(&t, 0xC)->flags, 0);
	/* the resource was lost too: the writer gets a stand-in */
	ck_assert_str_eq(t.resources[sp->resource].service, "unknown_service");
	ck_assert_uint_eq(t.resources[sp->resource].agent_id, A1);
	ck_assert_uint_eq(t.resources[sp->resource].pid, 100);
	rt_decoded_trace_free(&t);

	/* B's END buffer lost, and everything after it in the stream: no end */
	memset(drop, 0, g.n_bufs);
	for (i = b_end; i < g.n_bufs; i++)
		if (g.bufs[i].agent == A1)
			drop[i] = 1;
	decode_without(&g, drop, &t);
	sp = span_by_id(&t, 0xB);
	ck_assert_uint_eq(sp->flags, RT_SPAN_PARTIAL | RT_SPAN_NO_END);
	ck_assert_uint_eq(sp->end_ns, sp->start_ns);
	ck_assert_ptr_null(span_by_id(&t, 0xC));
	ck_assert_uint_eq(span_by_id(&t, 0xA)->flags, 0);
	rt_decoded_trace_free(&t);
	free(drop);
	eg_free(&g);
}
END_TEST

/* A corrupt byte inside events: the event is counted and skipped. */
START_TEST(test_corrupt_event)
{
	struct eg g;
	struct rt_decoded_trace t;
	struct eg_stream *s;
	size_t attr_buf, start_buf;
	uint32_t attr_off, start_off;
	const struct rt_span *sp;

	eg_init(&g, TRACE_HI, TRACE_LO, 4096);
	setup_agents(&g);
	s = eg_stream(&g, A1, 100, 1);
	eg_resource(s, "frontend", "host-a");
	eg_span_start(s, 0x1, 0, K_SERVER, EG_T(1), "one");
	eg_attr(s, 0x1, "good", EG_I(1));
	eg_attr(s, 0x1, "bad", EG_I(2));
	attr_buf = g.last_buf;
	attr_off = g.last_off;
	eg_attr(s, 0x1, "good2", EG_I(3));
	eg_span_end(s, 0x1, EG_T(2), ST_OK, 0, NULL);
	eg_span_start(s, 0x2, 0x1, K_INTERNAL, EG_T(3), "two");
	start_buf = g.last_buf;
	start_off = g.last_off;
	eg_span_end(s, 0x2, EG_T(4), ST_OK, 0, NULL);
	eg_span_start(s, 0x3, 0x1, K_INTERNAL, EG_T(5), "three");
	eg_span_end(s, 0x3, EG_T(6), ST_OK, 0, NULL);
	eg_finish(&g);

	/* C1 03 | cf id(8) | a3 "bad": the key's str header -> 0xc1 (never used) */
	ck_assert_uint_eq(g.bufs[attr_buf].data[attr_off + 11], 0xa3);
	g.bufs[attr_buf].data[attr_off + 11] = 0xc1;
	/* C1 01 | cf id | cf parent | kind: kind 1 -> 0xc1 (never used; an unknown
	 * kind such as 9 is not corrupt: test_unknown_kind_keeps_start) */
	ck_assert_uint_eq(g.bufs[start_buf].data[start_off + 20], K_INTERNAL);
	g.bufs[start_buf].data[start_off + 20] = 0xc1;

	decode_without(&g, NULL, &t);
	ck_assert_uint_eq(t.st.corrupt_events, 2);
	ck_assert_uint_eq(t.n_spans, 3);
	sp = span_by_id(&t, 0x1);
	ck_assert_uint_eq(sp->flags, 0);
	ck_assert_uint_eq(sp->n_attrs, 2);
	ck_assert_str_eq(sp->attrs[0].key, "good");
	ck_assert_str_eq(sp->attrs[1].key, "good2");
	ck_assert_int_eq(sp->attrs[1].value.u.i, 3);
	/* two's START is gone: synthesised from its END */
	sp = span_by_id(&t, 0x2);
	ck_assert_uint_eq(sp->flags, RT_SPAN_NO_START | RT_SPAN_PARTIAL);
	ck_assert_str_eq(sp->name, "");
	ck_assert_uint_eq(sp->start_ns, ns(EG_T(4)));
	ck_assert_uint_eq(sp->end_ns, ns(EG_T(4)));
	ck_assert_int_eq(sp->parent, -1);
	ck_assert_uint_eq(t.st.orphan_events, 1);
	sp = span_by_id(&t, 0x3);
	ck_assert_uint_eq(sp->flags, 0);
	ck_assert_str_eq(sp->name, "three");
	ck_assert_uint_eq(sp->end_ns, ns(EG_T(6)));
	ck_assert_int_eq(t.spans[sp->parent].span_id, 0x1);
	rt_decoded_trace_free(&t);
	eg_free(&g);
}
END_TEST

/* A frame header without the VALID bit: the rest of that buffer is skipped,
 * the next buffers and other streams decode. */
START_TEST(test_corrupt_frame)
{
	struct eg g;
	struct rt_decoded_trace t;
	struct eg_stream *s, *o;
	size_t bad_buf;
	uint32_t bad_off, word = 0x10; /* length 1, no flags */
	const struct rt_span *sp;

	eg_init(&g, TRACE_HI, TRACE_LO, 256);
	setup_agents(&g);
	s = eg_stream(&g, A1, 100, 1);
	o = eg_stream(&g, A2, 300, 5);
	eg_resource(s, "frontend", "host-a");
	eg_span_start(s, 0x1, 0, K_SERVER, EG_T(1), "one");
	eg_attr(s, 0x1, "a", EG_I(1));
	bad_buf = g.last_buf;
	bad_off = g.last_off - 4; /* the attr's frame header */
	eg_attr(s, 0x1, "b", EG_I(2));
	ck_assert_uint_eq(g.last_buf, bad_buf);
	while (g.last_buf == bad_buf) /* fill the buffer */
		eg_attr(s, 0x1, "pad", EG_S("................"));
	eg_span_end(s, 0x1, EG_T(2), ST_OK, 0, NULL);
	eg_span_start(s, 0x2, 0x1, K_INTERNAL, EG_T(3), "two");
	eg_span_end(s, 0x2, EG_T(4), ST_OK, 0, NULL);
	eg_span_start(o, 0x3, 0x1, K_INTERNAL, EG_T(5), "three");
	eg_span_end(o, 0x3, EG_T(6), ST_OK, 0, NULL);
	eg_finish(&g);
	memcpy(g.bufs[bad_buf].data + bad_off, &word, 4);

	decode_without(&g, NULL, &t);
	ck_assert_uint_eq(t.st.corrupt_frames, 1);
	ck_assert_uint_eq(t.st.gaps, 0);
	ck_assert_uint_eq(t.n_spans, 3);
	sp = span_by_id(&t, 0x1);
	ck_assert_uint_eq(sp->n_attrs, 1); /* the one after the first pad is the next buffer's */
	ck_assert_str_eq(sp->attrs[0].key, "pad");
	ck_assert(sp->flags & RT_SPAN_PARTIAL); /* its events on both sides of the hole */
	ck_assert_uint_eq(sp->end_ns, ns(EG_T(2)));
	ck_assert_uint_eq(span_by_id(&t, 0x2)->flags, 0);
	ck_assert_str_eq(span_by_id(&t, 0x2)->name, "two");
	ck_assert_uint_eq(span_by_id(&t, 0x3)->flags, 0);
	rt_decoded_trace_free(&t);
	eg_free(&g);
}
END_TEST

/* Records cut short: a split record whose tail never came, an event with a
 * field missing, an event with trailing bytes, a raw record. */
START_TEST(test_truncated_record)
{
	struct eg g;
	struct rt_decoded_trace t;
	struct eg_stream *s;
	struct eg_rec r = { 0 };
	char big[200];
	const struct rt_span *sp;
	static const uint8_t raw[] = { 0x93, 1, 2, 3 };
	static const uint8_t bad_type[] = { 0xC1, 0x09, 0x01 };

	memset(big, 'z', sizeof big - 1);
	big[sizeof big - 1] = 0;
	eg_init(&g, TRACE_HI, TRACE_LO, 128);
	setup_agents(&g);
	s = eg_stream(&g, A1, 100, 1);
	eg_span_start(s, 0x1, 0, K_SERVER, EG_T(1), "one");
	/* START without its name */
	eg_rec_byte(&r, 0xC1);
	eg_rec_byte(&r, RETRACE_EV_SPAN_START);
	eg_rec_u64_fixed(&r, 0x2);
	eg_rec_u64_fixed(&r, 0x1);
	eg_rec_uint(&r, 1);
	eg_rec_u64_fixed(&r, eg_tick(&g, A1, EG_T(2)));
	eg_emit(s, r.p, r.len);
	/* END with a byte too many */
	eg_rec_reset(&r);
	eg_rec_byte(&r, 0xC1);
	eg_rec_byte(&r, RETRACE_EV_SPAN_END);
	eg_rec_u64_fixed(&r, 0x1);
	eg_rec_u64_fixed(&r, eg_tick(&g, A1, EG_T(3)));
	eg_rec_uint(&r, ST_OK);
	eg_rec_byte(&r, 0x00);
	eg_emit(s, r.p, r.len);
	eg_rec_free(&r);
	eg_raw(s, raw, sizeof raw);
	eg_raw(s, bad_type, sizeof bad_type); /* 0xC1 + unknown type: raw */
	eg_attr(s, 0x1, "big", EG_S(big));   /* split; its last buffer is dropped below */
	eg_finish(&g);
	ck_assert_uint_ge(g.n_bufs, 2);

	{
		char *drop = calloc(g.n_bufs, 1);
		drop[g.n_bufs - 1] = 1;
		decode_without(&g, drop, &t);
		free(drop);
	}
	ck_assert_uint_eq(t.st.corrupt_events, 2);
	ck_assert_uint_eq(t.st.raw_records, 2);
	ck_assert_uint_eq(t.st.truncated_records, 1);
	ck_assert_uint_eq(t.st.events, 1);
	ck_assert_uint_eq(t.n_spans, 1);
	sp = &t.spans[0];
	ck_assert_uint_eq(sp->span_id, 0x1);
	ck_assert_uint_eq(sp->flags, RT_SPAN_NO_END | RT_SPAN_PARTIAL);
	ck_assert_uint_eq(sp->start_ns, ns(EG_T(1)));
	ck_assert_uint_eq(sp->end_ns, ns(EG_T(1)));
	ck_assert_uint_eq(sp->n_attrs, 0);
	rt_decoded_trace_free(&t);
	eg_free(&g);
}
END_TEST

/* A LOG whose TEMPLATE is nowhere in the trace; an orphan LOG/ATTR. */
START_TEST(test_missing_template)
{
	struct eg g;
	struct rt_decoded_trace t;
	struct eg_stream *s;
	struct eg_arg args[] = { EG_S("alice"), EG_I(-3), EG_D(2.5), EG_B(1), EG_NIL, EG_D(0.1) };
	char want[128];
	const struct rt_span *sp;

	eg_init(&g, TRACE_HI, TRACE_LO, 4096);
	setup_agents(&g);
	s = eg_stream(&g, A1, 100, 1);
	eg_span_start(s, 0x1, 0, K_SERVER, EG_T(1), "one");
	eg_log(s, 0x1, EG_T(2), L_WARN, 0xabcdef, args, 6);
	eg_span_end(s, 0x1, EG_T(3), ST_OK, 0, NULL);
	eg_attr(s, 0x77, "orphan", EG_I(1));
	eg_log_text(s, 0x77, EG_T(9), L_INFO, "late");
	eg_finish(&g);

	decode_without(&g, NULL, &t);
	ck_assert_uint_eq(t.st.missing_templates, 1);
	sp = span_by_id(&t, 0x1);
	ck_assert_uint_eq(sp->n_logs, 1);
	ck_assert_uint_eq(sp->logs[0].flags, RT_LOG_TEMPLATE_MISSING);
	ck_assert_ptr_null(sp->logs[0].template_text);
	ck_assert_uint_eq(sp->logs[0].template_id, 0xabcdef);
	snprintf(want, sizeof want, "<template 0x%016llx> alice -3 2.5 true (null) 0.1", 0xabcdefull);
	ck_assert_str_eq(sp->logs[0].body, want);
	ck_assert_uint_eq(sp->logs[0].n_args, 6);
	ck_assert_uint_eq(sp->logs[0].level, L_WARN);

	sp = span_by_id(&t, 0x77);
	ck_assert_ptr_nonnull(sp);
	ck_assert_uint_eq(sp->flags, RT_SPAN_NO_START | RT_SPAN_NO_END | RT_SPAN_PARTIAL);
	ck_assert_uint_eq(sp->start_ns, ns(EG_T(9))); /* its one time: the log's */
	ck_assert_uint_eq(sp->end_ns, ns(EG_T(9)));
	ck_assert_uint_eq(sp->n_attrs, 1);
	ck_assert_uint_eq(sp->n_logs, 1);
	ck_assert_str_eq(sp->logs[0].body, "late");
	ck_assert_uint_eq(t.st.orphan_events, 2);
	ck_assert_uint_eq(t.st.partial_spans, 1);
	rt_decoded_trace_free(&t);
	eg_free(&g);
}
END_TEST

/* printf conversions against the C library's own rendering. */
/* One loose log of template tpl with args, decoded: its body must be want. */
static void assert_loose_log(const char *tpl, struct eg_arg *args, int n, const char *want)
{
	struct eg g;
	struct rt_decoded_trace t;
	struct eg_stream *s;
	eg_init(&g, TRACE_HI, TRACE_LO, 4096);
	setup_agents(&g);
	s = eg_stream(&g, A1, 100, 1);
	eg_template(s, tpl);
	eg_log(s, 0, EG_T(2), L_INFO, eg_template_id(tpl), args, n);
	eg_finish(&g);
	decode_without(&g, NULL, &t);
	ck_assert_uint_eq(t.n_loose_logs, 1);
	ck_assert_str_eq(t.loose_logs[0].body, want);
	rt_decoded_trace_free(&t);
	eg_free(&g);
}

START_TEST(test_render_conversions)
{
	static const char *tpl =
		"[%5d|%-5d|%05.1f|%x|%X|%#o|%+d|%hhd|%hu|%lld|%llu|%c|%10.3s|%e|%g|%G|%a|%%|%*d|%.*f"
		"|%zu|%Lf|%i|% d|%-8.3e|%s|%ld]";
	struct eg_arg args[] = { EG_I(42),    EG_I(-42),     EG_D(3.14159), EG_I(255),
				 EG_I(48879), EG_I(8),       EG_I(5),       EG_I(300),
				 EG_I(70000), EG_I(-9000000000ll),     EG_U(9000000000ull),
				 EG_I('Q'),   EG_S("abcdef"), EG_D(12345.678), EG_D(0.0001),
				 EG_D(1e20),  EG_D(1.0),     EG_I(6),       EG_I(77),
				 EG_I(2),     EG_D(2.71828), EG_U(12),      EG_D(1.5),
				 EG_I(-1),    EG_I(7),       EG_D(-0.000123), EG_S("end"),
				 EG_I(1234567890123ll) };
	char want[512];
	struct eg g;
	struct rt_decoded_trace t;
	struct eg_stream *s;
	int n = (int)(sizeof args / sizeof args[0]);

	/* more than RETRACE_EV_MAX_ARGS: split over two logs with the same format cut
	 * in two; render the first 16 args with the first half of the format */
	static const char *tpl1 = "[%5d|%-5d|%05.1f|%x|%X|%#o|%+d|%hhd|%hu|%lld|%llu|%c|%10.3s|%e|%g|%G";
	static const char *tpl2 = "%a|%%|%*d|%.*f|%zu|%Lf|%i|% d|%-8.3e|%s|%ld]";
	(void)tpl;
	ck_assert_int_eq(n, 28);
	eg_init(&g, TRACE_HI, TRACE_LO, 4096);
	setup_agents(&g);
	s = eg_stream(&g, A1, 100, 1);
	eg_template(s, tpl1);
	eg_template(s, tpl2);
	eg_span_start(s, 0x1, 0, K_SERVER, EG_T(1), "one");
	eg_log(s, 0x1, EG_T(2), L_INFO, eg_template_id(tpl1), args, 16);
	eg_log(s, 0x1, EG_T(3), L_INFO, eg_template_id(tpl2), args + 16, 12);
	eg_span_end(s, 0x1, EG_T(4), ST_OK, 0, NULL);
	eg_finish(&g);
	decode_without(&g, NULL, &t);
	ck_assert_uint_eq(t.st.corrupt_events, 0);
	ck_assert_uint_eq(t.spans[0].n_logs, 2);
	snprintf(want, sizeof want, "[%5d|%-5d|%05.1f|%x|%X|%#o|%+d|%hhd|%hu|%lld|%llu|%c|%10.3s|%e|%g|%G",
		 42, -42, 3.14159, 255u, 48879u, 8u, 5, (signed char)300, (unsigned short)70000,
		 -9000000000ll, 9000000000ull, 'Q', "abcdef", 12345.678, 0.0001, 1e20);
	ck_assert_str_eq(t.spans[0].logs[0].body, want);
	snprintf(want, sizeof want, "%a|%%|%*d|%.*f|%zu|%Lf|%i|% d|%-8.3e|%s|%ld]", 1.0, 6, 77, 2,
		 2.71828, (size_t)12, (long double)1.5, -1, 7, -0.000123, "end", 1234567890123l);
	ck_assert_str_eq(t.spans[0].logs[1].body, want);
	rt_decoded_trace_free(&t);
	eg_free(&g);

	/* a missing argument leaves its conversion; %n and unknown ones are text */
	{
		struct eg_arg one[] = { EG_I(1) };
		assert_loose_log("a=%d b=%s 50%n %y %", one, 1, "a=1 b=%s 50%n %y %");
	}
	/* glibc's I flag (and ') take their argument like any flag: the client records
	 * one argument for "%Id", so the decoder must consume one (it once rendered the
	 * '%' as text and shifted every later argument by one). */
	{
		struct eg_arg three[] = { EG_I(5), EG_I(1234), EG_S("x") };
		assert_loose_log("n=%Id t=%'d s=%s", three, 3, "n=5 t=1234 s=x");
	}
}
END_TEST

/* Strict field checks: each malformed variant of a good event is corrupt. */
START_TEST(test_strict_fields)
{
	struct variant {
		const char *what;
		uint8_t bytes[64];
		size_t len;
	};
	/* ids as fixint for brevity: any integer width is allowed */
	static const struct variant bad[] = {
		{ "START negative span id", { 0xC1, 1, 0xff, 0, 1, 5, 0xa1, 'n' }, 8 },
		{ "START span id 0", { 0xC1, 1, 0, 0, 1, 5, 0xa1, 'n' }, 8 },
		{ "START name is bin", { 0xC1, 1, 1, 0, 1, 5, 0xc4, 1, 'n' }, 9 },
		{ "START kind 256", { 0xC1, 1, 1, 0, 0xcd, 1, 0, 5, 0xa1, 'n' }, 10 },
		{ "START an array", { 0xC1, 1, 0x91, 1, 0, 1, 5, 0xa1, 'n' }, 9 },
		{ "START name with NUL", { 0xC1, 1, 1, 0, 1, 5, 0xa2, 'n', 0 }, 9 },
		{ "START str runs out", { 0xC1, 1, 1, 0, 1, 5, 0xa5, 'n' }, 8 },
		{ "END status 3", { 0xC1, 2, 1, 5, 3 }, 5 },
		{ "END error without message", { 0xC1, 2, 1, 5, 2, 0x01 }, 6 },
		{ "END ok with a str tail", { 0xC1, 2, 1, 5, 1, 0xa1, 'm' }, 7 },
		{ "END adj 0", { 0xC1, 2, 1, 5, 1, 0x00 }, 6 }, /* never written: not 0 */
		{ "END adj then more", { 0xC1, 2, 1, 5, 1, 0x01, 0x01 }, 7 },
		{ "END error adj str", { 0xC1, 2, 1, 6, 2, 0xff, 0xa1, 'm', 0xa1, 'x' }, 10 },
		{ "START p16 always", { 0xC1, 1, 1, 0, 1, 5, 0xa1, 'n', 0xcd, 0xff, 0xff }, 11 },
		{ "START p16 negative", { 0xC1, 1, 1, 0, 1, 5, 0xa1, 'n', 0xff }, 9 },
		{ "START p16 then more", { 0xC1, 1, 1, 0, 1, 5, 0xa1, 'n', 0x10, 0x10 }, 10 },
		{ "ATTR value nil", { 0xC1, 3, 1, 0xa1, 'k', 0xc0 }, 6 },
		{ "ATTR value float32", { 0xC1, 3, 1, 0xa1, 'k', 0xca, 0, 0, 0, 0 }, 10 },
		{ "ATTR value map", { 0xC1, 3, 1, 0xa1, 'k', 0x80 }, 6 },
		{ "ATTR int over int64", { 0xC1, 3, 1, 0xa1, 'k', 0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0 }, 14 },
		{ "LOG level 4", { 0xC1, 4, 1, 5, 4, 9 }, 6 },
		{ "LOG template 0", { 0xC1, 4, 1, 5, 1, 0 }, 6 },
		{ "LOG arg array", { 0xC1, 4, 1, 5, 1, 9, 0xdd, 0x0f, 0xff, 0xff, 0xff }, 11 },
		{ "LOG 17 args", { 0xC1, 4, 1, 5, 1, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 }, 23 },
		{ "LOG_TEXT no text", { 0xC1, 5, 1, 5, 1 }, 5 },
		{ "TEMPLATE trailing", { 0xC1, 6, 9, 0xa1, 'x', 0xc0 }, 6 },
		{ "RESOURCE 33 attrs", { 0xC1, 7, 1, 0xde, 0, 33 }, 6 },
		{ "RESOURCE huge map", { 0xC1, 7, 1, 0xdf, 0xff, 0xff, 0xff, 0xff }, 8 },
		{ "RESOURCE int key", { 0xC1, 7, 1, 0x81, 1, 1 }, 6 },
		{ "RESOURCE nested", { 0xC1, 7, 1, 0x81, 0xa1, 'k', 0x91, 1 }, 8 },
		{ "RESOURCE pid > u32", { 0xC1, 7, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0, 0x80 }, 12 },
		{ "RESOURCE short map", { 0xC1, 7, 1, 0x82, 0xa1, 'k', 1 }, 7 },
		{ "ext type", { 0xC1, 3, 1, 0xa1, 'k', 0xd4, 1, 1 }, 8 },
		{ "reserved byte", { 0xC1, 3, 1, 0xa1, 'k', 0xc1 }, 6 },
		{ "TRIGGER id 0", { 0xC1, 8, 0, 0xa1, 'n' }, 5 },
		{ "TRIGGER id > u32", { 0xC1, 8, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0, 0xa1, 'n' }, 13 },
		{ "TRIGGER empty name", { 0xC1, 8, 7, 0xa0 }, 4 },
		{ "TRIGGER name with space", { 0xC1, 8, 7, 0xa3, 'a', ' ', 'b' }, 7 },
		{ "TRIGGER name with quote", { 0xC1, 8, 7, 0xa2, 'a', '"' }, 6 },
		{ "TRIGGER no name", { 0xC1, 8, 7 }, 3 },
		{ "TRIGGER trailing", { 0xC1, 8, 7, 0xa1, 'n', 0xc0 }, 6 },
	};
	static const struct variant good[] = {
		{ "START", { 0xC1, 1, 1, 0, 1, 5, 0xa1, 'n' }, 8 },
		{ "START int16 id", { 0xC1, 1, 0xd1, 0, 2, 0, 1, 5, 0xa1, 'n' }, 10 },
		{ "START kind 6", { 0xC1, 1, 1, 0, 6, 5, 0xa1, 'n' }, 8 }, /* unknown, not corrupt */
		{ "START kind 255", { 0xC1, 1, 1, 0, 0xcc, 0xff, 5, 0xa1, 'n' }, 9 },
		{ "END error", { 0xC1, 2, 1, 6, 2, 0xff, 0xa1, 'm' }, 8 },
		{ "END adj", { 0xC1, 2, 1, 5, 1, 0x01 }, 6 },             /* dropped descendants */
		{ "END adj negative", { 0xC1, 2, 1, 5, 1, 0xff }, 6 },
		{ "END error adj", { 0xC1, 2, 1, 6, 2, 0xff, 0xa1, 'm', 0x05 }, 9 },
		{ "START p16", { 0xC1, 1, 1, 0, 1, 5, 0xa1, 'n', 0xcd, 0x10, 0x00 }, 11 },
		{ "ATTR", { 0xC1, 3, 1, 0xa1, 'k', 0xc3 }, 6 },
		{ "LOG no args", { 0xC1, 4, 1, 5, 3, 9 }, 6 },
		{ "LOG_TEXT", { 0xC1, 5, 0, 5, 0, 0xa0 }, 6 },
		{ "TEMPLATE", { 0xC1, 6, 9, 0xa1, 'x' }, 5 },
		{ "RESOURCE empty", { 0xC1, 7, 1, 0x80 }, 4 },
		{ "RESOURCE map16", { 0xC1, 7, 1, 0xde, 0, 1, 0xa1, 'k', 0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0 }, 17 },
		{ "TRIGGER", { 0xC1, 8, 0xce, 0, 0, 0, 7, 0xa5, 'p', 'a', 'y', '-', 'e' }, 13 },
	};
	size_t i;
	for (i = 0; i < sizeof bad / sizeof bad[0] + sizeof good / sizeof good[0]; i++) {
		int is_bad = i < sizeof bad / sizeof bad[0];
		const struct variant *v = is_bad ? &bad[i] : &good[i - sizeof bad / sizeof bad[0]];
		struct eg g;
		struct rt_decoded_trace t;
		struct eg_stream *s;
		eg_init(&g, TRACE_HI, TRACE_LO, 4096);
		setup_agents(&g);
		s = eg_stream(&g, A1, 100, 1);
		eg_raw(s, v->bytes, v->len);
		eg_finish(&g);
		decode_without(&g, NULL, &t);
		ck_assert_msg(t.st.corrupt_events == (is_bad ? 1u : 0u), "%s: corrupt_events %" PRIu64,
			      v->what, t.st.corrupt_events);
		ck_assert_msg(t.st.events == (is_bad ? 0u : 1u), "%s: events %" PRIu64, v->what,
			      t.st.events);
		if (v->bytes[1] == RETRACE_EV_TRIGGER) /* a trigger's name only when it decodes */
			ck_assert_uint_eq(t.n_trigger_names, is_bad ? 0 : 1);
		if (v->bytes[1] == RETRACE_EV_TRIGGER && !is_bad) {
			ck_assert_uint_eq(t.trigger_names[0].id, 7);
			ck_assert_str_eq(t.trigger_names[0].name, "pay-e");
		}
		rt_decoded_trace_free(&t);
		eg_free(&g);
	}
}
END_TEST

/* A slice of another trace is ignored and counted; a non-SLICE message is bad. */
START_TEST(test_foreign_and_bad_messages)
{
	struct eg g;
	struct rt_decoded_trace t;
	struct rt_decoder *d;
	struct rt_wire_slice_buffer *bufs;
	struct rt_wire_slice sl;
	struct rt_wire_buf m;
	struct rt_wire_ack ack = { 0, 0, NULL };

	eg_init(&g, TRACE_HI, TRACE_LO, 4096);
	setup_agents(&g);
	build_scenario(&g);
	bufs = calloc(g.n_bufs + 1, sizeof *bufs);
	d = rt_decoder_new(TRACE_HI, TRACE_LO);
	eg_slice(&g, A1, NULL, 0, &sl, bufs);
	sl.trace_lo ^= 1;
	ck_assert_int_eq(rt_decoder_add_slice(d, &sl), 0);
	rt_wire_buf_init(&m);
	ck_assert_int_eq(rt_wire_encode_ack(&m, &ack), 0);
	ck_assert_int_eq(rt_decoder_add_message(d, m.data, m.len), 0);
	ck_assert_int_eq(rt_decoder_add_message(d, "\x01", 1), 0);
	ck_assert_int_eq(rt_decoder_finish(d, &t), 0);
	ck_assert_uint_eq(t.st.foreign_slices, 1);
	ck_assert_uint_eq(t.st.corrupt_frames, 2);
	ck_assert_uint_eq(t.st.slices, 0);
	ck_assert_uint_eq(t.n_spans, 0);
	ck_assert_uint_eq(t.n_agents, 0);
	rt_decoded_trace_free(&t);

	/* trace_hi 0 in the decoder: matched on trace_lo, hi taken from the data */
	d = rt_decoder_new(0, TRACE_LO);
	eg_slice(&g, A2, NULL, 0, &sl, bufs);
	ck_assert_int_eq(rt_decoder_add_slice(d, &sl), 0);
	ck_assert_int_eq(rt_decoder_finish(d, &t), 0);
	ck_assert_uint_eq(t.trace_hi, TRACE_HI);
	ck_assert_uint_eq(t.n_spans, 2);
	ck_assert_uint_eq(t.spans[0].trace_hi, TRACE_HI);
	ck_assert_int_eq(t.spans[0].parent, -1); /* 0x1001 is on another agent */
	ck_assert_uint_eq(t.spans[0].parent_id, 0x1001);
	rt_decoded_trace_free(&t);
	rt_wire_buf_free(&m);
	free(bufs);
	eg_free(&g);
}
END_TEST

/* The same span id started on two agents: the first is kept. */
START_TEST(test_duplicate_span_id)
{
	struct eg g;
	struct rt_decoded_trace t;
	struct eg_stream *a, *b;
	eg_init(&g, TRACE_HI, TRACE_LO, 4096);
	setup_agents(&g);
	a = eg_stream(&g, A1, 100, 1);
	b = eg_stream(&g, A2, 300, 5);
	eg_span_start(a, 0x5, 0, K_SERVER, EG_T(1), "first");
	eg_span_end(a, 0x5, EG_T(2), ST_OK, 0, NULL);
	eg_span_start(b, 0x5, 0, K_SERVER, EG_T(3), "second");
	eg_span_end(b, 0x5, EG_T(4), ST_ERROR, 1, "x");
	eg_finish(&g);
	decode_without(&g, NULL, &t);
	ck_assert_uint_eq(t.n_spans, 1);
	ck_assert_uint_eq(t.st.duplicate_spans, 1);
	ck_assert_str_eq(t.spans[0].name, "first");
	ck_assert_uint_eq(t.spans[0].agent_id, A1);
	ck_assert_uint_eq(t.spans[0].end_ns, ns(EG_T(2)));
	ck_assert_uint_eq(t.spans[0].status, ST_OK);
	rt_decoded_trace_free(&t);
	eg_free(&g);
}
END_TEST

/* ---------------------------------------------------- random input ---- */

static void random_bytes(uint8_t *p, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

/* A buffer of frames with plausible headers around random (often
 * event-looking) payloads, so the decoder gets past the framing. */
static size_t plausible_buffer(uint8_t *p, size_t cap)
{
	size_t at = 0;
	while (at + 16 < cap && rnd() % 8) {
		uint32_t n = (uint32_t)(rnd() % 48), flags = 1 | (uint32_t)(rnd() % 16 & 0xe), word;
		size_t need = 4 + ((flags & 2) ? 8 : 0) + n, k;
		if (rnd() % 16 == 0)
			flags &= ~1u; /* invalid */
		if (at + need > cap)
			break;
		word = (n << 4) | flags;
		if (rnd() % 32 == 0)
			word = (uint32_t)rnd(); /* any header */
		memcpy(p + at, &word, 4);
		random_bytes(p + at + 4, need - 4);
		k = at + 4 + ((flags & 2) ? 8 : 0);
		if (n >= 2 && rnd() % 2) {
			p[k] = 0xC1;
			p[k + 1] = (uint8_t)(1 + rnd() % 8);
		}
		at += need;
	}
	return at;
}

START_TEST(test_random_input)
{
	struct eg g;
	struct rt_wire_buf good;
	uint64_t total_bad = 0, total_records = 0;
	int it;

	g_rng = 0x243f6a8885a308d3ull;
	/* a valid message to mutate */
	eg_init(&g, TRACE_HI, TRACE_LO, 96);
	setup_agents(&g);
	build_scenario(&g);
	rt_wire_buf_init(&good);
	ck_assert_int_eq(eg_slice_msg(&g, A1, NULL, 0, &good), 0);

	for (it = 0; it < 1000; it++) {
		struct rt_decoder *d = rt_decoder_new(TRACE_HI, TRACE_LO);
		struct rt_wire_slice_buffer wb[8];
		uint8_t data[8][512], msg[1024], *mut;
		struct rt_wire_slice sl;
		struct rt_decoded_trace t;
		size_t k, n = 1 + rnd() % 8, mlen;

		ck_assert_ptr_nonnull(d);
		memset(&sl, 0, sizeof sl);
		sl.agent_id = (uint32_t)(rnd() % 4);
		sl.trace_hi = TRACE_HI;
		sl.trace_lo = TRACE_LO;
		sl.tsc_hz = rnd() % 3 ? 1000000000ull + rnd() % 3000000000ull : rnd();
		sl.tsc_ref_tick = rnd();
		sl.tsc_ref_unix_ns = rnd();
		for (k = 0; k < n; k++) {
			size_t len = rnd() % 2 ? plausible_buffer(data[k], sizeof data[k])
					       : (size_t)(rnd() % sizeof data[k]);
			if (len && rnd() % 2 == 0 && data[k][0] != 0xC1)
				random_bytes(data[k], len);
			wb[k] = (struct rt_wire_slice_buffer){ (uint32_t)(rnd() % 3), (uint32_t)(rnd() % 3),
							       (uint32_t)(rnd() % 6), (uint32_t)rnd(), rnd(),
							       data[k], (uint32_t)len };
		}
		sl.buffer_count = (uint32_t)n;
		sl.buffers = wb;
		ck_assert_int_eq(rt_decoder_add_slice(d, &sl), 0);

		/* random bytes as a SLICE message */
		mlen = rnd() % sizeof msg;
		random_bytes(msg, mlen);
		if (mlen && rnd() % 2)
			msg[0] = (uint8_t)(0x90 | RT_WIRE_ELEMS_SLICE);
		ck_assert_int_eq(rt_decoder_add_message(d, msg, mlen), 0);

		/* a valid message with a few bytes flipped (often still valid wire) */
		mut = malloc(good.len);
		memcpy(mut, good.data, good.len);
		for (k = 0; k < 1 + rnd() % 4; k++)
			mut[good.len / 2 + rnd() % (good.len / 2)] ^= (uint8_t)(1u << (rnd() % 8));
		ck_assert_int_eq(rt_decoder_add_message(d, mut, good.len), 0);
		free(mut);

		ck_assert_int_eq(rt_decoder_finish(d, &t), 0);
		total_bad += t.st.corrupt_frames + t.st.corrupt_events + t.st.orphan_chunks +
			     t.st.truncated_records + t.st.gaps + t.st.raw_records;
		total_records += t.st.records;
		/* the output is self-consistent */
		for (k = 0; k < t.n_spans; k++) {
			ck_assert(t.spans[k].parent < (int32_t)t.n_spans);
			ck_assert_uint_lt(t.spans[k].resource, t.n_resources);
			ck_assert_ptr_nonnull(t.spans[k].name);
			if (k)
				ck_assert(t.spans[k - 1].start_ns <= t.spans[k].start_ns);
		}
		rt_decoded_trace_free(&t);
	}
	ck_assert_uint_gt(total_bad, 1000);
	ck_assert_uint_gt(total_records, 1000);
	rt_wire_buf_free(&good);
	eg_free(&g);
}
END_TEST

/* 10k spans in one trace (2 agents, 4 threads, nested, attrs, logs): it must
 * simply finish (no quadratic step) and come out whole. */
START_TEST(test_ten_thousand_spans)
{
	struct eg g;
	struct rt_decoded_trace t;
	struct eg_stream *s[4];
	static const char *tpl = "item %d of %s";
	uint32_t i;
	uint64_t total_attrs = 0;

	eg_init(&g, TRACE_HI, TRACE_LO, 32768);
	setup_agents(&g);
	s[0] = eg_stream(&g, A1, 100, 1);
	s[1] = eg_stream(&g, A1, 100, 2);
	s[2] = eg_stream(&g, A2, 300, 1);
	s[3] = eg_stream(&g, A2, 300, 2);
	for (i = 0; i < 4; i++) {
		eg_resource(s[i], "svc", "h");
		eg_template(s[i], tpl);
	}
	for (i = 1; i <= 10000; i++) {
		struct eg_stream *st = s[i % 4];
		struct eg_arg args[] = { EG_I(i), EG_S("batch") };
		uint64_t id = 0x100000 + i, parent = i > 1 ? 0x100000 + i / 2 : 0;
		eg_span_start(st, id, parent, K_INTERNAL, EG_T(10000 + 2 * (uint64_t)i), "op");
		eg_attr(st, id, "i", EG_I(i));
		eg_log(st, id, EG_T(10000 + 2 * (uint64_t)i), L_INFO, eg_template_id(tpl), args, 2);
		eg_span_end(st, id, EG_T(40000 + (uint64_t)i), ST_OK, 0, NULL);
	}
	eg_finish(&g);
	decode_without(&g, NULL, &t);
	ck_assert_uint_eq(t.n_spans, 10000);
	ck_assert_uint_eq(t.st.partial_spans, 0);
	for (i = 0; i < t.n_spans; i++) {
		const struct rt_span *sp = &t.spans[i];
		ck_assert_uint_eq(sp->span_id, 0x100000 + i + 1);
		ck_assert_int_eq(sp->parent, i ? (int32_t)((i + 1) / 2 - 1) : -1);
		ck_assert_uint_eq(sp->n_logs, 1);
		total_attrs += sp->n_attrs;
	}
	ck_assert_str_eq(t.spans[9999].logs[0].body, "item 10000 of batch");
	ck_assert_uint_eq(total_attrs, 10000);
	rt_decoded_trace_free(&t);
	eg_free(&g);
}
END_TEST

/* ---------------------------------------------------- duplicate keys ---- */

/*
 * What a client before writer streams produced when one thread began the same
 * trace twice: the second run restarted seq at 0 under the same (pid, tid), so
 * its buffers repeat keys with other bytes. The decoder cannot get the second
 * run back, but it must say so: the copies count as conflicting, the server
 * span of the lost run leaves its client span unmatched, and the decode is not
 * complete. With distinct stream ids (the client today) both runs decode.
 */
START_TEST(test_conflicting_duplicates)
{
	struct eg g;
	struct rt_decoded_trace t;
	struct eg_stream *fe, *run1, *run2;
	int fixed;

	for (fixed = 0; fixed < 2; fixed++) {
		eg_init(&g, TRACE_HI, TRACE_LO, 4096);
		setup_agents(&g);
		fe = eg_stream(&g, A1, 100, 1);
		run1 = eg_stream(&g, A2, 300, 5);
		run2 = eg_stream(&g, A2, 300, fixed ? 6 : 5);
		eg_resource(fe, "frontend", "host-a");
		eg_span_start(fe, 0x1, 0, K_SERVER, EG_T(1), "GET /twice");
		eg_span_start(fe, 0x2, 0x1, K_CLIENT, EG_T(2), "call cart");
		eg_span_end(fe, 0x2, EG_T(3), ST_OK, 0, NULL);
		eg_span_start(fe, 0x3, 0x1, K_CLIENT, EG_T(4), "call cart");
		eg_span_end(fe, 0x3, EG_T(5), ST_OK, 0, NULL);
		eg_span_end(fe, 0x1, EG_T(6), ST_OK, 0, NULL);
		eg_resource(run1, "cart", "host-b");
		eg_span_start(run1, 0x10, 0x2, K_SERVER, EG_T(2), "POST /cart");
		eg_span_end(run1, 0x10, EG_T(3), ST_OK, 0, NULL);
		eg_resource(run2, "cart", "host-b");
		eg_span_start(run2, 0x11, 0x3, K_SERVER, EG_T(4), "POST /cart");
		eg_span_end(run2, 0x11, EG_T(5), ST_OK, 0, NULL);
		eg_finish(&g);
		decode_without(&g, NULL, &t);
		if (fixed) {
			ck_assert_uint_eq(t.n_spans, 5);
			ck_assert_uint_eq(t.st.duplicate_buffers, 0);
			ck_assert_uint_eq(t.st.unmatched_client_spans, 0);
			ck_assert(rt_decode_complete(&t.st));
		} else {
			ck_assert_uint_eq(t.n_spans, 4);
			ck_assert_uint_eq(t.st.duplicate_buffers, 1);
			ck_assert_uint_eq(t.st.conflicting_buffers, 1);
			ck_assert_uint_eq(t.st.unmatched_client_spans, 1);
			ck_assert_uint_eq(span_by_id(&t, 0x3)->flags, RT_SPAN_UNMATCHED);
			ck_assert_uint_eq(span_by_id(&t, 0x2)->flags, 0);
			ck_assert(!rt_decode_complete(&t.st));
		}
		rt_decoded_trace_free(&t);
		eg_free(&g);
	}
}
END_TEST

/* ------------------------------------------------- unmatched calls ---- */

/*
 * A1 writes the caller side: a SERVER root and calls of every flavour; A2 and
 * A3 the callee sides that exist:
 *   0x2 CLIENT  <- 0x20 SERVER on A2           matched
 *   0x3 CLIENT  (no callee)                    unmatched
 *   0x4 CLIENT  peer.untraced = true           exempt
 *   0x5 CLIENT  peer.untraced = "true"         exempt
 *   0x6 CLIENT  peer.untraced = false          unmatched
 *   0x7 PRODUCER <- 0x30 CONSUMER on A3        matched
 *   0x8 PRODUCER (no consumer)                 unmatched
 *   0x9 CLIENT  <- 0x21 INTERNAL on A2 only    unmatched (not a callee's entry)
 *   0xa CLIENT  <- 0x31 CONSUMER on A3         matched (either remote kind)
 */
static void build_calls(struct eg *g)
{
	struct eg_stream *a = eg_stream(g, A1, 100, 1);
	struct eg_stream *b = eg_stream(g, A2, 300, 5);
	struct eg_stream *c = eg_stream(g, A3, 400, 9);
	static const uint8_t kinds[] = { K_CLIENT, K_CLIENT, K_CLIENT, K_CLIENT, K_CLIENT,
					 K_PRODUCER, K_PRODUCER, K_CLIENT, K_CLIENT };
	uint64_t id;
	eg_resource(a, "frontend", "host-a");
	eg_span_start(a, 0x1, 0, K_SERVER, EG_T(1), "GET /calls");
	for (id = 0x2; id <= 0xa; id++) {
		eg_span_start(a, id, 0x1, kinds[id - 2], EG_T(id * 10), "call");
		if (id == 0x4)
			eg_attr(a, id, "peer.untraced", EG_B(1));
		if (id == 0x5)
			eg_attr(a, id, "peer.untraced", EG_S("true"));
		if (id == 0x6)
			eg_attr(a, id, "peer.untraced", EG_B(0));
		eg_span_end(a, id, EG_T(id * 10 + 5), ST_OK, 0, NULL);
	}
	eg_span_end(a, 0x1, EG_T(200), ST_OK, 0, NULL);
	eg_resource(b, "cart", "host-b");
	eg_span_start(b, 0x20, 0x2, K_SERVER, EG_T(21), "serve");
	eg_span_end(b, 0x20, EG_T(22), ST_OK, 0, NULL);
	eg_span_start(b, 0x21, 0x9, K_INTERNAL, EG_T(91), "local work");
	eg_span_end(b, 0x21, EG_T(92), ST_OK, 0, NULL);
	eg_resource(c, "queue", "host-c");
	eg_span_start(c, 0x30, 0x7, K_CONSUMER, EG_T(71), "consume");
	eg_span_end(c, 0x30, EG_T(72), ST_OK, 0, NULL);
	eg_span_start(c, 0x31, 0xa, K_CONSUMER, EG_T(101), "handle");
	eg_span_end(c, 0x31, EG_T(102), ST_OK, 0, NULL);
	eg_finish(g);
}

START_TEST(test_unmatched_client_spans)
{
	static const uint64_t unmatched[] = { 0x3, 0x6, 0x8, 0x9 };
	struct eg g;
	struct rt_decoded_trace t;
	char *drop;
	size_t i, k;

	eg_init(&g, TRACE_HI, TRACE_LO, 4096);
	setup_agents(&g);
	build_calls(&g);
	decode_without(&g, NULL, &t);
	ck_assert_uint_eq(t.n_spans, 14);
	ck_assert_uint_eq(t.st.unmatched_client_spans, 4);
	for (i = 0; i < t.n_spans; i++) {
		int want = 0;
		for (k = 0; k < sizeof unmatched / sizeof unmatched[0]; k++)
			want |= t.spans[i].span_id == unmatched[k];
		ck_assert_msg(t.spans[i].flags == (want ? RT_SPAN_UNMATCHED : 0u),
			      "span %" PRIx64 " flags %u", t.spans[i].span_id, t.spans[i].flags);
	}
	/* nothing else is wrong, yet the trace is not complete */
	ck_assert_uint_eq(t.st.gaps + t.st.partial_spans + t.st.orphan_events, 0);
	ck_assert(!rt_decode_complete(&t.st));
	rt_decoded_trace_free(&t);

	/* A2's slice lost: its SERVER span was the only match of 0x2 */
	drop = calloc(g.n_bufs, 1);
	for (i = 0; i < g.n_bufs; i++)
		drop[i] = g.bufs[i].agent == A2;
	decode_without(&g, drop, &t);
	ck_assert_uint_eq(t.st.unmatched_client_spans, 5);
	ck_assert_uint_eq(span_by_id(&t, 0x2)->flags, RT_SPAN_UNMATCHED);
	rt_decoded_trace_free(&t);
	free(drop);
	eg_free(&g);
}
END_TEST

/* rt_decode_complete: every structural problem alone makes it false; what is
 * harmless (identical re-sends, raw records, foreign slices, a span id started
 * twice) does not. */
START_TEST(test_decode_complete)
{
	struct rt_decode_stats st;
	uint64_t *bad[] = { &st.gaps, &st.partial_spans, &st.orphan_events, &st.orphan_chunks,
			    &st.corrupt_frames, &st.corrupt_events, &st.truncated_records,
			    &st.missing_templates, &st.conflicting_buffers,
			    &st.unmatched_client_spans };
	uint64_t *fine[] = { &st.slices, &st.buffers, &st.duplicate_buffers, &st.records,
			     &st.events, &st.raw_records, &st.foreign_slices,
			     &st.duplicate_spans };
	size_t i;
	memset(&st, 0, sizeof st);
	ck_assert(rt_decode_complete(&st));
	for (i = 0; i < sizeof fine / sizeof fine[0]; i++)
		*fine[i] = 3;
	ck_assert(rt_decode_complete(&st));
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		*bad[i] = 1;
		ck_assert_msg(!rt_decode_complete(&st), "problem %zu ignored", i);
		*bad[i] = 0;
	}
}
END_TEST

/* ------------------------------------------------ the CLI's summary ---- */

/* Run `CLI args` (a shell command line); its stdout, whole (caller frees). */
static char *run_cli(const char *args)
{
	char cmd[1024], *out = NULL;
	size_t cap = 0;
	FILE *p;
	snprintf(cmd, sizeof cmd, "%s %s", CLI_BIN, args);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	if (getdelim(&out, &cap, 0, p) < 0) {
		free(out);
		out = strdup("");
	}
	pclose(p);
	return out;
}

/*
 * A stored trace whose slice was delivered twice (identical) and which has an
 * unmatched client span: `retrace show` (text and --json) and `retrace export`
 * must name both problems, never print "clean" / "none".
 */
START_TEST(test_cli_summary_names_duplicates)
{
	char dir[] = "/tmp/rt-decode-cli-XXXXXX", path[128], args[512], *out;
	struct rt_store_options o = { 0 };
	struct rt_store *s = NULL;
	struct rt_store_trace row;
	struct rt_wire_buf msg;
	struct eg_stream *a;
	struct eg g;
	int k;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/retrace.db", dir);
	eg_init(&g, TRACE_HI, TRACE_LO, 4096);
	setup_agents(&g);
	a = eg_stream(&g, A1, 100, 1);
	eg_resource(a, "frontend", "host-a");
	eg_span_start(a, 0x1, 0, K_SERVER, EG_T(1), "GET /x");
	eg_span_start(a, 0x2, 0x1, K_CLIENT, EG_T(2), "call nobody");
	eg_span_end(a, 0x2, EG_T(3), ST_OK, 0, NULL);
	eg_span_end(a, 0x1, EG_T(4), ST_OK, 0, NULL);
	eg_finish(&g);
	rt_wire_buf_init(&msg);
	ck_assert_int_eq(eg_slice_msg(&g, A1, NULL, 0, &msg), 0);

	o.path = path;
	ck_assert_int_eq(rt_store_open(&s, &o), 0);
	ck_assert_int_eq(rt_store_begin(s), 0);
	for (k = 0; k < 2; k++) { /* the same slice, delivered twice */
		struct rt_store_slice sl = { .trace_hi = TRACE_HI, .trace_lo = TRACE_LO,
					     .agent_id = A1, .trigger_id = 100,
					     .slice_seq = (uint64_t)k + 1, .received_ns = ns(EG_T(10)),
					     .buffers = (uint32_t)g.n_bufs, .bytes = 100,
					     .first_ns = ns(EG_T(1)), .last_ns = ns(EG_T(4)),
					     .msg = msg.data, .msg_len = msg.len };
		ck_assert_int_eq(rt_store_put_slice(s, &sl), 0);
	}
	memset(&row, 0, sizeof row);
	row.trace_hi = TRACE_HI;
	row.trace_lo = TRACE_LO;
	row.trigger_count = 1;
	row.trigger_ids[0] = 100;
	row.agent_count = 1;
	row.agents[0] = A1;
	row.coherent = 1;
	row.first_ns = ns(EG_T(1));
	row.last_ns = ns(EG_T(4));
	row.slices = 2;
	row.bytes = 200;
	ck_assert_int_eq(rt_store_put_trace(s, &row), 0);
	ck_assert_int_eq(rt_store_commit(s), 0);
	rt_store_close(s);

	snprintf(args, sizeof args, "show --store '%s' %016" PRIx64 "%016" PRIx64, path,
		 (uint64_t)TRACE_HI, (uint64_t)TRACE_LO);
	out = run_cli(args);
	ck_assert_msg(!strstr(out, "decode: clean"), "show:\n%s", out);
	ck_assert_msg(strstr(out, "1 unmatched client span"), "show:\n%s", out);
	ck_assert_msg(strstr(out, "duplicate buffer"), "show:\n%s", out);
	ck_assert_msg(strstr(out, "(unmatched: no server side)"), "show:\n%s", out);
	free(out);

	snprintf(args, sizeof args, "show --json --store '%s' %016" PRIx64 "%016" PRIx64, path,
		 (uint64_t)TRACE_HI, (uint64_t)TRACE_LO);
	out = run_cli(args);
	ck_assert_msg(strstr(out, "\"unmatched_client_spans\":1"), "show --json:\n%s", out);
	ck_assert_msg(strstr(out, "\"conflicting_buffers\":0"), "show --json:\n%s", out);
	ck_assert_msg(strstr(out, "\"complete\":false"), "show --json:\n%s", out);
	ck_assert_msg(!strstr(out, "\"duplicate_buffers\":0"), "show --json:\n%s", out);
	ck_assert_msg(strstr(out, "retrace.unmatched"), "show --json:\n%s", out);
	free(out);

	/* export: the summary goes to stderr, the document to stdout */
	snprintf(args, sizeof args, "export --store '%s' --format otlp-json %016" PRIx64 "%016" PRIx64
		 " 2>&1 >/dev/null", path, (uint64_t)TRACE_HI, (uint64_t)TRACE_LO);
	out = run_cli(args);
	ck_assert_msg(!strstr(out, "decode problems: none"), "export:\n%s", out);
	ck_assert_msg(strstr(out, "duplicate buffer"), "export:\n%s", out);
	ck_assert_msg(strstr(out, "1 unmatched client span"), "export:\n%s", out);
	free(out);

	rt_wire_buf_free(&msg);
	eg_free(&g);
	snprintf(args, sizeof args, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(args), 0);
}
END_TEST

/* A span started with a kind the decoder does not know (the client takes any
 * uint8): the span keeps its start and name, the kind is kept as recorded and
 * nothing is counted as corrupt or partial. */
START_TEST(test_unknown_kind_keeps_start)
{
	struct eg g;
	struct rt_decoded_trace t;
	const struct rt_span *sp;
	struct eg_stream *a;
	eg_init(&g, TRACE_HI, TRACE_LO, 4096);
	setup_agents(&g);
	a = eg_stream(&g, A1, 100, 1);
	eg_resource(a, "frontend", "host-a");
	eg_span_start(a, 0x1, 0, 9, EG_T(10), "odd kind");
	eg_span_end(a, 0x1, EG_T(20), ST_OK, 0, NULL);
	eg_finish(&g);
	decode_all(&g, &t);
	ck_assert_uint_eq(t.n_spans, 1);
	sp = span_by_id(&t, 0x1);
	ck_assert_ptr_nonnull(sp);
	ck_assert_uint_eq(sp->start_ns, ns(EG_T(10)));
	ck_assert_uint_eq(sp->end_ns, ns(EG_T(20)));
	ck_assert_str_eq(sp->name, "odd kind");
	ck_assert_uint_eq(sp->kind, 9);
	ck_assert_uint_eq(sp->flags, 0);
	ck_assert_uint_eq(t.st.corrupt_events, 0);
	rt_decoded_trace_free(&t);
	eg_free(&g);
}
END_TEST

/* A store in dir holding one small trace (two spans on one agent). */
static void write_small_store(const char *path)
{
	struct rt_store_options o = { 0 };
	struct rt_store *s = NULL;
	struct rt_store_trace row;
	struct rt_wire_buf msg;
	struct eg_stream *a;
	struct eg g;
	struct rt_store_slice sl = { .trace_hi = TRACE_HI, .trace_lo = TRACE_LO, .agent_id = A1,
				     .trigger_id = 100, .slice_seq = 1 };
	eg_init(&g, TRACE_HI, TRACE_LO, 4096);
	setup_agents(&g);
	a = eg_stream(&g, A1, 100, 1);
	eg_resource(a, "frontend", "host-a");
	eg_span_start(a, 0x1, 0, K_SERVER, EG_T(1), "GET /x");
	eg_span_start(a, 0x2, 0x1, K_INTERNAL, EG_T(2), "work");
	eg_span_end(a, 0x2, EG_T(3), ST_OK, 0, NULL);
	eg_span_end(a, 0x1, EG_T(4), ST_OK, 0, NULL);
	eg_finish(&g);
	rt_wire_buf_init(&msg);
	ck_assert_int_eq(eg_slice_msg(&g, A1, NULL, 0, &msg), 0);
	o.path = path;
	ck_assert_int_eq(rt_store_open(&s, &o), 0);
	ck_assert_int_eq(rt_store_begin(s), 0);
	sl.received_ns = ns(EG_T(10));
	sl.buffers = (uint32_t)g.n_bufs;
	sl.bytes = 100;
	sl.first_ns = ns(EG_T(1));
	sl.last_ns = ns(EG_T(4));
	sl.msg = msg.data;
	sl.msg_len = msg.len;
	ck_assert_int_eq(rt_store_put_slice(s, &sl), 0);
	memset(&row, 0, sizeof row);
	row.trace_hi = TRACE_HI;
	row.trace_lo = TRACE_LO;
	row.trigger_count = 1;
	row.trigger_ids[0] = 100;
	row.agent_count = 1;
	row.agents[0] = A1;
	row.coherent = 1;
	row.first_ns = ns(EG_T(1));
	row.last_ns = ns(EG_T(4));
	row.slices = 1;
	row.bytes = 100;
	ck_assert_int_eq(rt_store_put_trace(s, &row), 0);
	ck_assert_int_eq(rt_store_commit(s), 0);
	rt_store_close(s);
	rt_wire_buf_free(&msg);
	eg_free(&g);
}

/* Exit status of `CLI args` run by sh. */
static int cli_status(const char *args)
{
	char cmd[2048];
	int st;
	snprintf(cmd, sizeof cmd, "%s %s", CLI_BIN, args);
	st = system(cmd);
	ck_assert_int_ne(st, -1);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *out = NULL;
	size_t cap = 0;
	if (!f)
		return NULL;
	if (getdelim(&out, &cap, 0, f) < 0) {
		free(out);
		out = strdup("");
	}
	fclose(f);
	return out;
}

/* Files in dir other than "retrace.db*" (a temporary file left behind). */
static int stray_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL)
		if (strstr(e->d_name, ".retrace-"))
			n++;
	closedir(d);
	return n;
}

/*
 * `retrace export -o PATH` touches PATH only when the export succeeded: a link
 * to /dev/full (the write fails) stays a link; an existing file keeps its old
 * content when the write fails (a 0-byte file size limit) or the push fails;
 * a success replaces it (and writes through a symlink to a regular file,
 * leaving the link a link); no temporary file is ever left behind.
 */
START_TEST(test_cli_export_output_is_atomic)
{
	char dir[] = "/tmp/rt-decode-out-XXXXXX", db[128], out[160], link[160], target[160];
	char args[1024], id[40], *text;
	struct stat st;
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(db, sizeof db, "%s/retrace.db", dir);
	snprintf(out, sizeof out, "%s/out.json", dir);
	snprintf(link, sizeof link, "%s/link.json", dir);
	snprintf(target, sizeof target, "%s/target.json", dir);
	snprintf(id, sizeof id, "%016" PRIx64 "%016" PRIx64, (uint64_t)TRACE_HI, (uint64_t)TRACE_LO);
	write_small_store(db);

	/* a symlink to /dev/full: the write fails, the link stays */
	ck_assert_int_eq(symlink("/dev/full", link), 0);
	snprintf(args, sizeof args, "export -q --store '%s' -o '%s' %s 2>/dev/null", db, link, id);
	ck_assert_int_eq(cli_status(args), 1);
	ck_assert_int_eq(lstat(link, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_int_eq(unlink(link), 0);

	/* an existing file, the write fails (file size limit 0): old content stays */
	text = NULL;
	{
		FILE *f = fopen(out, "w");
		ck_assert_ptr_nonnull(f);
		fputs("old content\n", f);
		fclose(f);
	}
	snprintf(args, sizeof args, "export -q --store '%s' -o '%s' %s 2>/dev/null", db, out, id);
	{
		char sh[1400];
		int stt;
		snprintf(sh, sizeof sh, "sh -c \"trap '' XFSZ; ulimit -f 0; exec %s %s\"", CLI_BIN, args);
		stt = system(sh);
		ck_assert(WIFEXITED(stt) && WEXITSTATUS(stt) == 1);
	}
	text = slurp(out);
	ck_assert_str_eq(text, "old content\n");
	free(text);
	ck_assert_int_eq(stray_files(dir), 0);

	/* the push fails (nobody listens on port 1): old content stays */
	snprintf(args, sizeof args, "export -q --store '%s' -o '%s' --attempts 1 "
		 "--otlp-endpoint http://127.0.0.1:1 %s 2>/dev/null", db, out, id);
	ck_assert_int_eq(cli_status(args), 1);
	text = slurp(out);
	ck_assert_str_eq(text, "old content\n");
	free(text);
	ck_assert_int_eq(stray_files(dir), 0);

	/* success: the document replaces it */
	snprintf(args, sizeof args, "export -q --store '%s' -o '%s' %s", db, out, id);
	ck_assert_int_eq(cli_status(args), 0);
	text = slurp(out);
	ck_assert_msg(strstr(text, "\"resourceSpans\"") && strstr(text, "GET /x"), "%s", text);
	free(text);

	/* a symlink to a regular file: written through, still a link */
	{
		FILE *f = fopen(target, "w");
		ck_assert_ptr_nonnull(f);
		fputs("old\n", f);
		fclose(f);
	}
	ck_assert_int_eq(symlink("target.json", link), 0);
	snprintf(args, sizeof args, "export -q -f zipkin --store '%s' -o '%s' %s", db, link, id);
	ck_assert_int_eq(cli_status(args), 0);
	ck_assert_int_eq(lstat(link, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	text = slurp(target);
	ck_assert_msg(strstr(text, "\"localEndpoint\""), "%s", text);
	free(text);
	ck_assert_int_eq(stray_files(dir), 0);

	snprintf(args, sizeof args, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(args), 0);
}
END_TEST

static Suite *decode_suite(void)
{
	Suite *s = suite_create("coordinator_decode");
	TCase *tc = tcase_create("decode");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_unknown_kind_keeps_start);
	tcase_add_test(tc, test_cli_export_output_is_atomic);
	tcase_add_test(tc, test_split_records);
	tcase_add_test(tc, test_shuffled_messages);
	tcase_add_test(tc, test_duplicates);
	tcase_add_test(tc, test_dropped_buffer);
	tcase_add_test(tc, test_corrupt_event);
	tcase_add_test(tc, test_corrupt_frame);
	tcase_add_test(tc, test_truncated_record);
	tcase_add_test(tc, test_missing_template);
	tcase_add_test(tc, test_render_conversions);
	tcase_add_test(tc, test_strict_fields);
	tcase_add_test(tc, test_foreign_and_bad_messages);
	tcase_add_test(tc, test_duplicate_span_id);
	tcase_add_test(tc, test_random_input);
	tcase_add_test(tc, test_ten_thousand_spans);
	tcase_add_test(tc, test_conflicting_duplicates);
	tcase_add_test(tc, test_unmatched_client_spans);
	tcase_add_test(tc, test_decode_complete);
	tcase_add_test(tc, test_cli_summary_names_duplicates);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(decode_suite());
}
