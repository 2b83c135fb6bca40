/*
 * Tracer events (spans, attributes, logs, resource) written into a real pool,
 * drained, rebuilt with the frame decoder and decoded here with msgpack-c,
 * field by field against shm/events.h: parents, kinds, statuses, attribute
 * types, log arguments, templates once per trace, the RESOURCE first in every
 * writer stream, cut strings and the counters.
 */
#include <check.h>
#include <msgpack.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/collect.h"
#include "common/testpool.h"
#include "retrace/retrace.h"
#include "retrace/tracer.h"
#include "shm/events.h"

#define BUF_SIZE 8192u

/* ------------------------------------------------------- decoding ---- */

/* One decoded msgpack value: n(il) b(ool) u(int) i(negative int) d(ouble)
 * s(tr) m(ap). */
struct tval {
	char t;
	int b;
	uint64_t u;
	int64_t i;
	double d;
	char *s;
	size_t slen;
	struct tval *kv; /* map: 2*n values, key then value */
	size_t n;
	size_t wire; /* bytes it took in the record */
};

struct tev {
	uint64_t trace_lo;
	uint32_t pid, tid;
	int type;
	struct tval f[24];
	size_t nf;
};

struct events {
	struct tev *ev;
	size_t n;
	struct collection col;
};

static void to_tval(const msgpack_object *o, struct tval *v)
{
	size_t k;
	memset(v, 0, sizeof *v);
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: v->t = 'n'; break;
	case MSGPACK_OBJECT_BOOLEAN: v->t = 'b'; v->b = o->via.boolean; break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER: v->t = 'u'; v->u = o->via.u64; v->i = (int64_t)o->via.u64; break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: v->t = 'i'; v->i = o->via.i64; break;
	case MSGPACK_OBJECT_FLOAT64: v->t = 'd'; v->d = o->via.f64; break;
	case MSGPACK_OBJECT_STR:
		v->t = 's';
		v->slen = o->via.str.size;
		v->s = malloc(v->slen + 1);
		if (v->slen)
			memcpy(v->s, o->via.str.ptr, v->slen);
		v->s[v->slen] = '\0';
		break;
	case MSGPACK_OBJECT_MAP:
		v->t = 'm';
		v->n = o->via.map.size;
		v->kv = calloc(2 * v->n + 1, sizeof *v->kv);
		for (k = 0; k < v->n; k++) {
			to_tval(&o->via.map.ptr[k].key, &v->kv[2 * k]);
			to_tval(&o->via.map.ptr[k].val, &v->kv[2 * k + 1]);
		}
		break;
	default: v->t = '?'; break;
	}
}

static void free_tval(struct tval *v)
{
	size_t k;
	free(v->s);
	for (k = 0; k < 2 * v->n; k++)
		free_tval(&v->kv[k]);
	free(v->kv);
}

/* Every field of a tracer event record; fails the test on bad msgpack. */
static void decode_event(const struct collected_record *r, struct tev *e)
{
	msgpack_unpacked u;
	size_t off = 2;
	memset(e, 0, sizeof *e);
	e->trace_lo = r->trace_lo;
	e->pid = r->pid;
	e->tid = r->tid;
	e->type = r->data[1];
	msgpack_unpacked_init(&u);
	while (off < r->len) {
		size_t before = off;
		int rc = msgpack_unpack_next(&u, (const char *)r->data, r->len, &off);
		ck_assert_int_eq(rc, MSGPACK_UNPACK_SUCCESS);
		ck_assert_uint_lt(e->nf, 24);
		to_tval(&u.data, &e->f[e->nf]);
		e->f[e->nf++].wire = off - before;
	}
	ck_assert_uint_eq(off, r->len); /* nothing trails the last field */
	msgpack_unpacked_destroy(&u);
}

/* Drain the pool and decode every tracer event, in writer/sequence order. */
static void collect_events(struct rt_pool *pool, struct events *out)
{
	size_t i;
	retrace_flush();
	memset(out, 0, sizeof *out);
	collect_all(pool, &out->col);
	ck_assert_uint_eq(out->col.corrupt, 0);
	ck_assert_uint_eq(out->col.seq_gaps, 0);
	out->ev = calloc(out->col.n_recs + 1, sizeof *out->ev);
	for (i = 0; i < out->col.n_recs; i++) {
		const struct collected_record *r = &out->col.recs[i];
		if (r->len >= 2 && r->data[0] == RETRACE_EVENT_MAGIC)
			decode_event(r, &out->ev[out->n++]);
	}
}

static void events_free(struct events *e)
{
	size_t i, k;
	for (i = 0; i < e->n; i++)
		for (k = 0; k < e->ev[i].nf; k++)
			free_tval(&e->ev[i].f[k]);
	free(e->ev);
	collection_free(&e->col);
}

/* The nth (0-based) event of `type`, or NULL. */
static const struct tev *nth_event(const struct events *e, int type, size_t nth)
{
	size_t i;
	for (i = 0; i < e->n; i++)
		if (e->ev[i].type == type && nth-- == 0)
			return &e->ev[i];
	return NULL;
}

/* The nth (0-based) event of `type` in trace `lo`, or NULL. */
static const struct tev *nth_in_trace(const struct events *e, uint64_t lo, int type, size_t nth)
{
	size_t i;
	for (i = 0; i < e->n; i++)
		if (e->ev[i].trace_lo == lo && e->ev[i].type == type && nth-- == 0)
			return &e->ev[i];
	return NULL;
}

static size_t count_events(const struct events *e, int type)
{
	size_t i, n = 0;
	for (i = 0; i < e->n; i++)
		n += e->ev[i].type == type;
	return n;
}

/* The SPAN_START (or END) of span `id`. */
static const struct tev *span_event(const struct events *e, int type, uint64_t id)
{
	size_t i;
	for (i = 0; i < e->n; i++)
		if (e->ev[i].type == type && e->ev[i].f[0].u == id)
			return &e->ev[i];
	return NULL;
}

/* An id or tick: unsigned, in the fixed 9-byte 0xcf form. */
static void assert_u64_fixed(const struct tval *v, uint64_t want)
{
	ck_assert_int_eq(v->t, 'u');
	ck_assert_uint_eq(v->wire, 9);
	ck_assert_uint_eq(v->u, want);
}

static void assert_str(const struct tval *v, const char *want)
{
	ck_assert_int_eq(v->t, 's');
	ck_assert_str_eq(v->s, want);
}

/* SPAN_START  span_id  parent_id  kind  tick  name */
static void assert_span_start(const struct events *e, uint64_t id, uint64_t parent, int kind,
			      const char *name)
{
	const struct tev *s = span_event(e, RETRACE_EV_SPAN_START, id);
	ck_assert_msg(s != NULL, "no SPAN_START for %llx", (unsigned long long)id);
	ck_assert_uint_eq(s->nf, 5);
	assert_u64_fixed(&s->f[0], id);
	assert_u64_fixed(&s->f[1], parent);
	ck_assert_int_eq(s->f[2].t, 'u');
	ck_assert_uint_eq(s->f[2].wire, 1); /* smallest form */
	ck_assert_uint_eq(s->f[2].u, (uint64_t)kind);
	ck_assert_uint_eq(s->f[3].wire, 9);
	ck_assert_uint_gt(s->f[3].u, 0);
	assert_str(&s->f[4], name);
}

/* SPAN_END  span_id  tick  status */
static const struct tev *assert_span_end(const struct events *e, uint64_t id, int status)
{
	const struct tev *s = span_event(e, RETRACE_EV_SPAN_END, id);
	ck_assert_msg(s != NULL, "no SPAN_END for %llx", (unsigned long long)id);
	assert_u64_fixed(&s->f[0], id);
	ck_assert_uint_eq(s->f[1].wire, 9);
	ck_assert_uint_eq(s->f[2].u, (uint64_t)status);
	ck_assert_uint_eq(s->nf, status == RETRACE_STATUS_ERROR ? 5 : 3);
	return s;
}

static size_t index_of(const struct events *e, const struct tev *x)
{
	return (size_t)(x - e->ev);
}

/* ------------------------------------------------------- fixtures ---- */

static struct rt_pool pool;
static char pool_name[64];

static void pool_up(void)
{
	test_pool_name(pool_name, sizeof pool_name, "tracer");
	test_pool_create(&pool, pool_name, BUF_SIZE, 256);
	test_client_init(pool_name, 1);
}

static void pool_down(void)
{
	retrace_shutdown();
	test_pool_destroy(&pool);
}

static const retrace_trace_id TRACE_A = {0x4bf92f3577b34da6ull, 0xa3ce929d0e0e4736ull};
static const retrace_trace_id TRACE_B = {0x1111ull, 0x2222ull};

/* ---------------------------------------------------------- tests ---- */

START_TEST(test_nested_spans_and_explicit_parent)
{
	struct events e;
	struct retrace_tracer_stats st;
	uint64_t s1, s2, s3, x, y;
	const struct tev *a, *b;

	pool_up();
	ck_assert_int_eq(retrace_begin(TRACE_A), 1);
	ck_assert_uint_eq(retrace_current_span(), 0);
	s1 = retrace_span_start("GET /checkout", RETRACE_SPAN_SERVER);
	s2 = retrace_span_start("load cart", RETRACE_SPAN_INTERNAL);
	s3 = retrace_span_start("call cart", RETRACE_SPAN_CLIENT);
	ck_assert_uint_ne(s1, 0);
	ck_assert_uint_ne(s1, s2);
	ck_assert_uint_ne(s2, s3);
	ck_assert_uint_eq(retrace_current_span(), s3);
	retrace_span_end();
	ck_assert_uint_eq(retrace_current_span(), s2);
	retrace_span_end_ok();
	ck_assert_uint_eq(retrace_current_span(), s1);
	x = retrace_span_start_child("async flush", RETRACE_SPAN_PRODUCER, 0x1234);
	y = retrace_span_start("inside", RETRACE_SPAN_CONSUMER);
	retrace_span_end();
	retrace_span_end();
	ck_assert_uint_eq(retrace_current_span(), s1);
	retrace_span_end();
	ck_assert_uint_eq(retrace_current_span(), 0);
	retrace_tracer_stats(&st);
	ck_assert_uint_eq(st.spans_started, 5);
	ck_assert_uint_eq(st.ends_unmatched, 0);
	retrace_end();

	collect_events(&pool, &e);
	ck_assert_uint_eq(e.n, 1 + 5 + 5); /* RESOURCE + starts + ends */
	ck_assert_int_eq(e.ev[0].type, RETRACE_EV_RESOURCE);
	assert_span_start(&e, s1, 0, RETRACE_SPAN_SERVER, "GET /checkout");
	assert_span_start(&e, s2, s1, RETRACE_SPAN_INTERNAL, "load cart");
	assert_span_start(&e, s3, s2, RETRACE_SPAN_CLIENT, "call cart");
	assert_span_start(&e, x, 0x1234, RETRACE_SPAN_PRODUCER, "async flush");
	assert_span_start(&e, y, x, RETRACE_SPAN_CONSUMER, "inside");
	assert_span_end(&e, s3, RETRACE_STATUS_UNSET);
	assert_span_end(&e, s2, RETRACE_STATUS_OK);
	assert_span_end(&e, s1, RETRACE_STATUS_UNSET);
	/* Ends come in LIFO order and after their start; ticks do not go back. */
	a = span_event(&e, RETRACE_EV_SPAN_END, s3);
	b = span_event(&e, RETRACE_EV_SPAN_END, s2);
	ck_assert_uint_lt(index_of(&e, a), index_of(&e, b));
	ck_assert_uint_lt(index_of(&e, span_event(&e, RETRACE_EV_SPAN_START, s3)), index_of(&e, a));
	ck_assert_uint_ge(a->f[1].u, span_event(&e, RETRACE_EV_SPAN_START, s3)->f[3].u);
	ck_assert_uint_eq(e.ev[0].trace_lo, TRACE_A.lo);
	events_free(&e);
	pool_down();
}
END_TEST

START_TEST(test_remote_parent_and_serialize)
{
	struct events e;
	struct retrace_wire_context wc;
	char tp[64], want[64];
	uint8_t bin[RETRACE_BINARY_CONTEXT_LEN];
	uint64_t s1, s2, s3;

	pool_up();
	ck_assert_int_eq(retrace_deserialize("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
					     NULL, &wc), RETRACE_OK);
	ck_assert_int_eq(retrace_begin(wc.trace_id), 1);
	ck_assert_uint_eq(retrace_current_span(), 0); /* the remote span is not ours */
	/* Before any span, the remote parent passes through. */
	ck_assert_int_eq(retrace_serialize(tp, sizeof tp, NULL, 0, NULL), RETRACE_OK);
	ck_assert_str_eq(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
	s1 = retrace_span_start("GET /item", RETRACE_SPAN_SERVER);
	s2 = retrace_span_start("call inventory", RETRACE_SPAN_CLIENT);
	ck_assert_int_eq(retrace_serialize(tp, sizeof tp, NULL, 0, NULL), RETRACE_OK);
	snprintf(want, sizeof want, "00-4bf92f3577b34da6a3ce929d0e0e4736-%016llx-01",
		 (unsigned long long)s2);
	ck_assert_str_eq(tp, want);
	ck_assert_uint_eq(retrace_span_id(), s2);
	retrace_span_end();
	retrace_span_end();
	retrace_end();

	/* Binary context: same rule. */
	memset(bin, 0, sizeof bin);
	bin[1] = 1;
	bin[9] = 0x01;  /* trace id hi = 1 */
	bin[17] = 0x05; /* trace id lo = 5 */
	bin[25] = 0x77; /* parent span 0x77 */
	ck_assert_int_eq(retrace_deserialize_binary(bin, RETRACE_BINARY_CONTEXT_V0_LEN, &wc),
			 RETRACE_OK);
	ck_assert_int_eq(retrace_begin(wc.trace_id), 1);
	s3 = retrace_span_start("binary", RETRACE_SPAN_CONSUMER);
	retrace_span_end();
	retrace_end();

	/* A raw user's derived span id is not a span: no parent. */
	ck_assert_int_eq(retrace_begin(TRACE_B), 1);
	ck_assert_uint_ne(retrace_span_id(), 0);
	s2 = retrace_span_start("root", RETRACE_SPAN_SERVER);
	retrace_span_end();
	/* A deserialize for another trace does not leak into the next begin. */
	ck_assert_int_eq(retrace_deserialize("00-00000000000000000000000000000abc-00000000000000aa-01",
					     NULL, &wc), RETRACE_OK);
	retrace_end();
	ck_assert_int_eq(retrace_begin(TRACE_A), 1);
	ck_assert_uint_eq(retrace_span_start("fresh", RETRACE_SPAN_SERVER) != 0, 1);
	retrace_end();

	collect_events(&pool, &e);
	assert_span_start(&e, s1, 0x00f067aa0ba902b7ull, RETRACE_SPAN_SERVER, "GET /item");
	assert_span_start(&e, s3, 0x77, RETRACE_SPAN_CONSUMER, "binary");
	assert_span_start(&e, s2, 0, RETRACE_SPAN_SERVER, "root");
	ck_assert_uint_eq(nth_event(&e, RETRACE_EV_SPAN_START, 4)->f[1].u, 0); /* "fresh" */
	events_free(&e);
	pool_down();
}
END_TEST

START_TEST(test_attributes)
{
	struct events e;
	struct retrace_tracer_stats st;
	static char long_value[RETRACE_EV_MAX_STR + 100];
	const struct tev *a;
	uint64_t s;

	pool_up();
	memset(long_value, 'v', sizeof long_value - 1);
	ck_assert_int_eq(retrace_begin(TRACE_A), 1);
	retrace_attr_str("no.span", "dropped"); /* no span open: nothing */
	s = retrace_span_start("attrs", RETRACE_SPAN_INTERNAL);
	retrace_attr_str("http.method", "GET");
	retrace_attr_int("http.status_code", 200);
	retrace_attr_int("neg", -100000);
	retrace_attr_double("shop.total", 12.5);
	retrace_attr_bool("shop.express", 1);
	retrace_attr_bool("shop.gift", 0);
	retrace_attr_str("long", long_value);
	retrace_span_end();
	retrace_attr_int("after.end", 1); /* no span open: nothing */
	retrace_tracer_stats(&st);
	ck_assert_uint_eq(st.strings_cut, 1);
	retrace_end();

	collect_events(&pool, &e);
	ck_assert_uint_eq(count_events(&e, RETRACE_EV_ATTR), 7);
	a = nth_event(&e, RETRACE_EV_ATTR, 0);
	ck_assert_uint_eq(a->nf, 3);
	assert_u64_fixed(&a->f[0], s);
	assert_str(&a->f[1], "http.method");
	assert_str(&a->f[2], "GET");
	a = nth_event(&e, RETRACE_EV_ATTR, 1);
	assert_str(&a->f[1], "http.status_code");
	ck_assert_int_eq(a->f[2].t, 'u');
	ck_assert_uint_eq(a->f[2].u, 200);
	ck_assert_uint_eq(a->f[2].wire, 2); /* 0xcc 200: smallest form */
	a = nth_event(&e, RETRACE_EV_ATTR, 2);
	ck_assert_int_eq(a->f[2].t, 'i');
	ck_assert_int_eq(a->f[2].i, -100000);
	ck_assert_uint_eq(a->f[2].wire, 5);
	a = nth_event(&e, RETRACE_EV_ATTR, 3);
	assert_str(&a->f[1], "shop.total");
	ck_assert_int_eq(a->f[2].t, 'd');
	ck_assert(a->f[2].d == 12.5);
	a = nth_event(&e, RETRACE_EV_ATTR, 4);
	ck_assert_int_eq(a->f[2].t, 'b');
	ck_assert_int_eq(a->f[2].b, 1);
	a = nth_event(&e, RETRACE_EV_ATTR, 5);
	ck_assert_int_eq(a->f[2].t, 'b');
	ck_assert_int_eq(a->f[2].b, 0);
	a = nth_event(&e, RETRACE_EV_ATTR, 6);
	ck_assert_int_eq(a->f[2].t, 's');
	ck_assert_uint_eq(a->f[2].slen, RETRACE_EV_MAX_STR);
	ck_assert(memcmp(a->f[2].s, long_value, RETRACE_EV_MAX_STR) == 0);
	events_free(&e);
	pool_down();
}
END_TEST

/* Log helpers in functions so each call site is one static site. */
static void log_checkout(const char *user, int items)
{
	retrace_log(RETRACE_LOG_INFO, "user %s items %d", user, items);
}

START_TEST(test_logs_and_templates)
{
	struct events e;
	struct retrace_tracer_stats st;
	const char *fmt = "s=%s d=%d f=%f llx=%llx c=%c p=%p";
	const struct tev *t, *l;
	static struct retrace_log_site bad_site = {"bytes %n", 0, 0, 0, {0}};
	uint64_t s;
	int x = 7;

	pool_up();
	ck_assert_int_eq(retrace_begin(TRACE_A), 1);
	log_checkout("outside", 1); /* before any span: span id 0 */
	s = retrace_span_start("logs", RETRACE_SPAN_INTERNAL);
	retrace_log(RETRACE_LOG_WARN, "s=%s d=%d f=%f llx=%llx c=%c p=%p", "alice", -42, 2.5,
		    0xdeadbeefcafeull, 'Z', (void *)&x);
	log_checkout("bob", 3);
	log_checkout(NULL, 300);
	retrace_log_text(RETRACE_LOG_ERROR, "free text here");
	retrace_log_at(&bad_site, RETRACE_LOG_DEBUG);
	retrace_span_end();
	ck_assert_int_eq(retrace_begin(TRACE_B), 1); /* next trace: templates again */
	log_checkout("carol", 0);
	retrace_tracer_stats(&st);
	ck_assert_uint_eq(st.logs, 7);
	ck_assert_uint_eq(st.templates_written, 3);
	retrace_end();

	collect_events(&pool, &e);
	/* Trace A: TEMPLATE "user..." before its first LOG, only once. */
	ck_assert_uint_eq(count_events(&e, RETRACE_EV_TEMPLATE), 3);
	t = nth_in_trace(&e, TRACE_A.lo, RETRACE_EV_TEMPLATE, 0);
	ck_assert_uint_eq(t->nf, 2);
	assert_u64_fixed(&t->f[0], retrace_event_template_id("user %s items %d"));
	assert_str(&t->f[1], "user %s items %d");
	l = nth_in_trace(&e, TRACE_A.lo, RETRACE_EV_LOG, 0);
	ck_assert_uint_lt(index_of(&e, t), index_of(&e, l));
	ck_assert_uint_eq(l->nf, 4 + 2);
	assert_u64_fixed(&l->f[0], 0); /* outside any span */
	ck_assert_uint_eq(l->f[1].wire, 9);
	ck_assert_uint_eq(l->f[2].u, RETRACE_LOG_INFO);
	ck_assert_uint_eq(l->f[2].wire, 1);
	assert_u64_fixed(&l->f[3], retrace_event_template_id("user %s items %d"));
	assert_str(&l->f[4], "outside");
	ck_assert_uint_eq(l->f[5].u, 1);
	ck_assert_uint_eq(l->f[5].wire, 1);

	t = nth_in_trace(&e, TRACE_A.lo, RETRACE_EV_TEMPLATE, 1);
	assert_str(&t->f[1], fmt);
	l = nth_in_trace(&e, TRACE_A.lo, RETRACE_EV_LOG, 1);
	ck_assert_uint_lt(index_of(&e, t), index_of(&e, l));
	ck_assert_uint_eq(l->nf, 4 + 6);
	assert_u64_fixed(&l->f[0], s);
	ck_assert_uint_eq(l->f[2].u, RETRACE_LOG_WARN);
	assert_u64_fixed(&l->f[3], retrace_event_template_id(fmt));
	assert_str(&l->f[4], "alice");
	ck_assert_int_eq(l->f[5].t, 'i');
	ck_assert_int_eq(l->f[5].i, -42);
	ck_assert_int_eq(l->f[6].t, 'd');
	ck_assert(l->f[6].d == 2.5);
	ck_assert_int_eq(l->f[7].t, 'u');
	ck_assert_uint_eq(l->f[7].u, 0xdeadbeefcafeull);
	ck_assert_uint_eq(l->f[8].u, 'Z');
	ck_assert_uint_eq(l->f[9].u, (uint64_t)(uintptr_t)&x);

	l = nth_in_trace(&e, TRACE_A.lo, RETRACE_EV_LOG, 2);
	assert_u64_fixed(&l->f[0], s);
	assert_str(&l->f[4], "bob");
	ck_assert_uint_eq(l->f[5].u, 3);
	l = nth_in_trace(&e, TRACE_A.lo, RETRACE_EV_LOG, 3);
	ck_assert_int_eq(l->f[4].t, 'n'); /* %s NULL -> nil */
	ck_assert_uint_eq(l->f[5].u, 300);
	ck_assert_uint_eq(l->f[5].wire, 3);

	/* Free text, and an unsupported format recorded as its text. */
	ck_assert_uint_eq(count_events(&e, RETRACE_EV_LOG_TEXT), 2);
	l = nth_event(&e, RETRACE_EV_LOG_TEXT, 0);
	ck_assert_uint_eq(l->nf, 4);
	assert_u64_fixed(&l->f[0], s);
	ck_assert_uint_eq(l->f[2].u, RETRACE_LOG_ERROR);
	assert_str(&l->f[3], "free text here");
	l = nth_event(&e, RETRACE_EV_LOG_TEXT, 1);
	assert_str(&l->f[3], "bytes %n");
	ck_assert_uint_eq(bad_site.bad, 1);

	/* Trace B: the template again, before its LOG. */
	ck_assert_uint_eq(count_events(&e, RETRACE_EV_LOG), 5);
	t = nth_in_trace(&e, TRACE_B.lo, RETRACE_EV_TEMPLATE, 0);
	assert_str(&t->f[1], "user %s items %d");
	ck_assert_ptr_null(nth_in_trace(&e, TRACE_B.lo, RETRACE_EV_TEMPLATE, 1));
	l = nth_in_trace(&e, TRACE_B.lo, RETRACE_EV_LOG, 0);
	ck_assert_uint_lt(index_of(&e, t), index_of(&e, l));
	assert_str(&l->f[4], "carol");
	events_free(&e);
	pool_down();
}
END_TEST

START_TEST(test_format_types)
{
	/* The parsed argument types of a site, through a trace. */
	struct events e;
	const struct tev *l;
	short sh = -3;
	pool_up();
	ck_assert_int_eq(retrace_begin(TRACE_A), 1);
	retrace_log(RETRACE_LOG_INFO, "%hhd %hu %ld %zu %jd %5.2Lf %-*d %.*s %% %X %#o %e",
		    (signed char)-1, (unsigned short)65535, -5L, (size_t)9, (intmax_t)-7,
		    (long double)1.25, 4, 11, 3, "abcdef", 0xABu, 8u, 1e10);
	retrace_log(RETRACE_LOG_INFO, "%hd", sh);
	retrace_end();
	collect_events(&pool, &e);
	l = nth_event(&e, RETRACE_EV_LOG, 0);
	ck_assert_uint_eq(l->nf, 4 + 13);
	ck_assert_int_eq(l->f[4].i, -1);
	ck_assert_uint_eq(l->f[5].u, 65535);
	ck_assert_int_eq(l->f[6].i, -5);
	ck_assert_uint_eq(l->f[7].u, 9);
	ck_assert_int_eq(l->f[8].i, -7);
	ck_assert(l->f[9].t == 'd' && l->f[9].d == 1.25);
	ck_assert_uint_eq(l->f[10].u, 4);  /* * width */
	ck_assert_int_eq(l->f[11].i, 11);
	ck_assert_uint_eq(l->f[12].u, 3);  /* * precision */
	assert_str(&l->f[13], "abcdef");   /* the whole string; rendering cuts */
	ck_assert_uint_eq(l->f[14].u, 0xAB);
	ck_assert_uint_eq(l->f[15].u, 8);
	ck_assert(l->f[16].d == 1e10);
	l = nth_event(&e, RETRACE_EV_LOG, 1);
	ck_assert_int_eq(l->f[4].i, -3);
	events_free(&e);
	pool_down();
}
END_TEST

START_TEST(test_error_status)
{
	struct events e;
	const struct tev *end;
	uint64_t s1, s2;
	pool_up();
	ck_assert_int_eq(retrace_begin(TRACE_A), 1);
	s1 = retrace_span_start("charge", RETRACE_SPAN_SERVER);
	s2 = retrace_span_start("db", RETRACE_SPAN_CLIENT);
	retrace_span_end_error(-2, NULL);
	retrace_span_end_error(500, "injected failure");
	retrace_end();
	collect_events(&pool, &e);
	end = assert_span_end(&e, s1, RETRACE_STATUS_ERROR);
	ck_assert_int_eq(end->f[3].t, 'u');
	ck_assert_uint_eq(end->f[3].u, 500);
	assert_str(&end->f[4], "injected failure");
	end = assert_span_end(&e, s2, RETRACE_STATUS_ERROR);
	ck_assert_int_eq(end->f[3].i, -2);
	assert_str(&end->f[4], "");
	events_free(&e);
	pool_down();
}
END_TEST

/* A map value by key, or NULL. */
static const struct tval *map_get(const struct tval *m, const char *key)
{
	size_t k;
	for (k = 0; k < m->n; k++)
		if (m->kv[2 * k].t == 's' && strcmp(m->kv[2 * k].s, key) == 0)
			return &m->kv[2 * k + 1];
	return NULL;
}

static void assert_resource(const struct tev *r, const char *service)
{
	char host[256] = "";
	const struct tval *v;
	ck_assert_int_eq(r->type, RETRACE_EV_RESOURCE);
	ck_assert_uint_eq(r->nf, 2);
	ck_assert_int_eq(r->f[0].t, 'u');
	ck_assert_uint_eq(r->f[0].u, (uint64_t)getpid());
	ck_assert_int_eq(r->f[1].t, 'm');
	gethostname(host, sizeof host - 1);
	assert_str(map_get(&r->f[1], "service.name"), service);
	assert_str(map_get(&r->f[1], "host.name"), host);
	v = map_get(&r->f[1], "process.pid");
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(v->u, (uint64_t)getpid());
	assert_str(map_get(&r->f[1], "deployment.environment"), "test");
	v = map_get(&r->f[1], "shard");
	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(v->i, -3);
	/* service.name, host.name, process.pid first, in that order. */
	assert_str(&r->f[1].kv[0], "service.name");
	assert_str(&r->f[1].kv[2], "host.name");
	assert_str(&r->f[1].kv[4], "process.pid");
}

static void *other_thread(void *arg)
{
	(void)arg;
	retrace_begin(TRACE_A);
	retrace_span_start("other thread", RETRACE_SPAN_INTERNAL);
	retrace_span_end();
	retrace_end();
	retrace_flush();
	return NULL;
}

START_TEST(test_resource_first_in_each_stream)
{
	struct events e;
	static char too_long[2000];
	pthread_t th;
	size_t i, resources = 0;
	char key[32];

	pool_up();
	memset(too_long, 'x', sizeof too_long - 1);
	ck_assert_int_eq(retrace_set_service_name("checkout-svc"), RETRACE_OK);
	ck_assert_int_eq(retrace_resource_str("deployment.environment", "test"), RETRACE_OK);
	ck_assert_int_eq(retrace_resource_int("shard", 7), RETRACE_OK);
	ck_assert_int_eq(retrace_resource_int("shard", -3), RETRACE_OK); /* replaces */
	ck_assert_int_eq(retrace_set_service_name(NULL), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_resource_str("x", too_long), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_begin(TRACE_A), 1);
	retrace_span_start("main thread", RETRACE_SPAN_SERVER);
	retrace_span_end();
	pthread_create(&th, NULL, other_thread, NULL);
	pthread_join(th, NULL);
	ck_assert_int_eq(retrace_begin(TRACE_B), 1); /* a new stream of this thread */
	retrace_log_text(RETRACE_LOG_INFO, "first event of trace B");
	retrace_end();
	/* More than RETRACE_EV_MAX_RESOURCE attributes: refused. */
	for (i = 0; i < RETRACE_EV_MAX_RESOURCE; i++) {
		snprintf(key, sizeof key, "k%zu", i);
		if (retrace_resource_int(key, 1) == RETRACE_E_FULL)
			break;
	}
	ck_assert_uint_eq(i, RETRACE_EV_MAX_RESOURCE - 5);

	collect_events(&pool, &e);
	for (i = 0; i < e.n; i++) {
		/* The first event of each (trace, pid, tid) is its RESOURCE. */
		int first = i == 0 || e.ev[i].trace_lo != e.ev[i - 1].trace_lo ||
			    e.ev[i].tid != e.ev[i - 1].tid;
		ck_assert_int_eq(e.ev[i].type == RETRACE_EV_RESOURCE, first);
		if (first) {
			assert_resource(&e.ev[i], "checkout-svc");
			resources++;
		}
	}
	ck_assert_uint_eq(resources, 3);
	events_free(&e);
	pool_down();
}
END_TEST

START_TEST(test_unmatched_and_too_deep)
{
	struct events e;
	struct retrace_tracer_stats st;
	uint64_t ids[RETRACE_SPAN_DEPTH + 6], seq[3];
	int i;

	pool_up();
	ck_assert_int_eq(retrace_begin(TRACE_A), 1);
	retrace_span_end(); /* nothing open */
	for (i = 0; i < RETRACE_SPAN_DEPTH; i++)
		ids[i] = retrace_span_start("nest", RETRACE_SPAN_INTERNAL);
	/* At full depth: sequential spans still end exactly. */
	for (i = 0; i < 3; i++) {
		seq[i] = retrace_span_start("deep", RETRACE_SPAN_INTERNAL);
		ck_assert_uint_eq(retrace_current_span(), seq[i]);
		retrace_span_end();
		ck_assert_uint_eq(retrace_current_span(), ids[RETRACE_SPAN_DEPTH - 1]);
	}
	/* Nested beyond the depth: recorded; only the innermost end can be named. */
	for (i = RETRACE_SPAN_DEPTH; i < RETRACE_SPAN_DEPTH + 6; i++)
		ids[i] = retrace_span_start("deeper", RETRACE_SPAN_INTERNAL);
	for (i = 0; i < RETRACE_SPAN_DEPTH + 6; i++)
		retrace_span_end();
	ck_assert_uint_eq(retrace_current_span(), 0);
	retrace_span_end(); /* nothing open again */
	retrace_tracer_stats(&st);
	ck_assert_uint_eq(st.ends_unmatched, 2);
	ck_assert_uint_eq(st.spans_too_deep, 3 + 6);
	ck_assert_uint_eq(st.spans_started, RETRACE_SPAN_DEPTH + 3 + 6);
	retrace_end();

	collect_events(&pool, &e);
	ck_assert_uint_eq(count_events(&e, RETRACE_EV_SPAN_START), RETRACE_SPAN_DEPTH + 3 + 6);
	for (i = 0; i < 3; i++) {
		assert_span_start(&e, seq[i], ids[RETRACE_SPAN_DEPTH - 1], RETRACE_SPAN_INTERNAL, "deep");
		assert_span_end(&e, seq[i], RETRACE_STATUS_UNSET);
	}
	for (i = 1; i < RETRACE_SPAN_DEPTH + 6; i++)
		assert_span_start(&e, ids[i], ids[i - 1], RETRACE_SPAN_INTERNAL,
				  i < RETRACE_SPAN_DEPTH ? "nest" : "deeper");
	for (i = 0; i < RETRACE_SPAN_DEPTH; i++)
		assert_span_end(&e, ids[i], RETRACE_STATUS_UNSET);
	assert_span_end(&e, ids[RETRACE_SPAN_DEPTH + 5], RETRACE_STATUS_UNSET);
	/* Never a wrong end: one END per span named, no duplicates. */
	ck_assert_uint_eq(count_events(&e, RETRACE_EV_SPAN_END), RETRACE_SPAN_DEPTH + 3 + 1);
	events_free(&e);
	pool_down();
}
END_TEST

struct handoff {
	retrace_context ctx;
	uint64_t parent_seen, child;
};

static void *worker_thread(void *arg)
{
	struct handoff *h = arg;
	retrace_attach(&h->ctx);
	h->parent_seen = retrace_current_span();
	h->child = retrace_span_start("worker", RETRACE_SPAN_INTERNAL);
	retrace_log(RETRACE_LOG_INFO, "worker step %d", 1);
	retrace_span_end();
	retrace_span_end(); /* the request's span is not this thread's: unmatched */
	retrace_detach(&h->ctx);
	return NULL;
}

START_TEST(test_detach_attach_carries_span)
{
	struct events e;
	struct handoff h;
	struct retrace_tracer_stats st;
	pthread_t th;
	uint64_t s, after;

	pool_up();
	ck_assert_int_eq(retrace_begin(TRACE_A), 1);
	s = retrace_span_start("request", RETRACE_SPAN_SERVER);
	retrace_detach(&h.ctx);
	ck_assert_uint_eq(retrace_span_start("no trace", RETRACE_SPAN_INTERNAL), 0);
	pthread_create(&th, NULL, worker_thread, &h);
	pthread_join(th, NULL);
	/* Back here with the span it left with: the stack still holds it. */
	retrace_attach(&h.ctx);
	ck_assert_uint_eq(retrace_current_span(), s);
	after = retrace_span_start("after", RETRACE_SPAN_INTERNAL);
	retrace_span_end();
	retrace_span_end_ok();
	retrace_tracer_stats(&st);
	ck_assert_uint_eq(st.ends_unmatched, 0);
	retrace_end();

	ck_assert_uint_eq(h.parent_seen, s);
	collect_events(&pool, &e);
	assert_span_start(&e, s, 0, RETRACE_SPAN_SERVER, "request");
	assert_span_start(&e, h.child, s, RETRACE_SPAN_INTERNAL, "worker");
	assert_span_end(&e, h.child, RETRACE_STATUS_UNSET);
	assert_span_start(&e, after, s, RETRACE_SPAN_INTERNAL, "after");
	assert_span_end(&e, s, RETRACE_STATUS_OK);
	ck_assert_uint_eq(count_events(&e, RETRACE_EV_SPAN_END), 3);
	/* One writer stream (the context moved): one RESOURCE. */
	ck_assert_uint_eq(count_events(&e, RETRACE_EV_RESOURCE), 1);
	ck_assert_uint_eq(nth_event(&e, RETRACE_EV_LOG, 0)->f[0].u, h.child);
	events_free(&e);
	pool_down();
}
END_TEST

START_TEST(test_outside_trace_records_nothing)
{
	struct retrace_config cfg;
	struct retrace_tracer_stats st;
	int i;

	test_pool_name(pool_name, sizeof pool_name, "tracer");
	test_pool_create(&pool, pool_name, BUF_SIZE, 64);
	retrace_config_from_env(&cfg);
	cfg.pool_name = pool_name;
	cfg.quiet = 1;
	cfg.sample_shift = 64; /* no trace is recorded on this host */
	ck_assert_int_eq(retrace_init(&cfg), RETRACE_OK);
	for (i = 0; i < 2; i++) {
		if (i == 1)
			ck_assert_int_eq(retrace_begin(TRACE_A), 0); /* unsampled */
		ck_assert_uint_eq(retrace_span_start("x", RETRACE_SPAN_SERVER), 0);
		ck_assert_uint_eq(retrace_span_start_child("x", RETRACE_SPAN_SERVER, 5), 0);
		retrace_attr_int("k", 1);
		retrace_attr_str("k", "v");
		retrace_log(RETRACE_LOG_INFO, "nothing %d", 1);
		retrace_log_text(RETRACE_LOG_INFO, "nothing");
		retrace_span_end();
		retrace_span_end_error(1, "x");
		ck_assert_uint_eq(retrace_current_span(), 0);
	}
	retrace_end();
	retrace_flush();
	retrace_tracer_stats(&st);
	ck_assert_uint_eq(st.spans_started + st.logs + st.ends_unmatched + st.templates_written, 0);
	{
		struct collection col = {0};
		collect_all(&pool, &col);
		ck_assert_uint_eq(col.n_bufs, 0);
		collection_free(&col);
	}
	pool_down();
}
END_TEST

START_TEST(test_event_too_big_dropped)
{
	/* A LOG whose arguments exceed one buffer is dropped and counted. */
	struct events e;
	struct retrace_tracer_stats st;
	static char big[RETRACE_EV_MAX_STR + 2];
	pool_up();
	memset(big, 'b', sizeof big - 1);
	ck_assert_int_eq(retrace_begin(TRACE_A), 1);
	retrace_log(RETRACE_LOG_INFO, "%s %s %s", big, big, big);
	retrace_log_text(RETRACE_LOG_INFO, "still fine");
	retrace_tracer_stats(&st);
	ck_assert_uint_eq(st.events_too_big, 1);
	ck_assert_uint_eq(st.strings_cut, 3);
	retrace_end();
	collect_events(&pool, &e);
	ck_assert_uint_eq(count_events(&e, RETRACE_EV_LOG), 0);
	ck_assert_uint_eq(count_events(&e, RETRACE_EV_LOG_TEXT), 1);
	events_free(&e);
	pool_down();
}
END_TEST

START_TEST(test_trigger_names)
{
	/* retrace_trigger_name: what it refuses, and the TRIGGER event a trace
	 * that fired a named trigger carries (once, at its end or detach). */
	static const char long63[] = "a23456789012345678901234567890123456789012345678901234567890123";
	struct events e;
	retrace_context ctx;
	const struct tev *t;
	pool_up();
	ck_assert_int_eq(retrace_trigger_name(0, "x"), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_trigger_name(RETRACE_TRIGGER_USER_MAX + 1, "x"), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_trigger_name(RETRACE_TRIGGER_CRASH, "boom"), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_trigger_name(5, ""), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_trigger_name(5, NULL), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_trigger_name(5, "two words"), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_trigger_name(5, "quote\""), RETRACE_E_INVAL);
	ck_assert_uint_eq(strlen(long63), RETRACE_TRIGGER_NAME_MAX);
	ck_assert_int_eq(retrace_trigger_name(5, long63), RETRACE_OK);
	{
		char long64[sizeof long63 + 1];
		memcpy(long64, long63, sizeof long63 - 1);
		memcpy(long64 + sizeof long63 - 1, "x", 2);
		ck_assert_int_eq(retrace_trigger_name(6, long64), RETRACE_E_INVAL);
	}
	ck_assert_int_eq(retrace_trigger_name(7, "payment-error"), RETRACE_OK);
	ck_assert_int_eq(retrace_trigger_name(7, "payment-error"), RETRACE_OK);
	ck_assert_int_eq(retrace_trigger_name(7, "other"), RETRACE_E_EXISTS);
	ck_assert_str_eq(retrace_trigger_name_get(7), "payment-error");
	ck_assert_str_eq(retrace_trigger_name_get(RETRACE_TRIGGER_CRASH), "crash");
	ck_assert_str_eq(retrace_trigger_name_get(RETRACE_TRIGGER_HEAD_SAMPLED), "head-sampled");
	ck_assert_ptr_null(retrace_trigger_name_get(8));
	ck_assert_ptr_null(retrace_trigger_name_get(0));

	/* A: a named and an unnamed trigger: one TRIGGER event, the named one. */
	ck_assert_int_eq(retrace_begin(TRACE_A), 1);
	ck_assert_uint_ne(retrace_span_start("op", RETRACE_SPAN_SERVER), 0);
	ck_assert_int_eq(retrace_trigger(TRACE_A, 7, NULL, 0), RETRACE_OK);
	ck_assert_int_eq(retrace_trigger(TRACE_A, 8, NULL, 0), RETRACE_OK);
	retrace_span_end();
	retrace_end();
	/* B: detached after its trigger; the event goes out at the detach. */
	ck_assert_int_eq(retrace_begin(TRACE_B), 1);
	ck_assert_int_eq(retrace_trigger(TRACE_B, 7, NULL, 0), RETRACE_OK);
	retrace_detach(&ctx);
	retrace_attach(&ctx);
	retrace_end();
	/* C: an unnamed trigger and a named one for another trace: nothing. */
	{
		static const retrace_trace_id c = {0x3333ull, 0x4444ull};
		ck_assert_int_eq(retrace_begin(c), 1);
		retrace_log_text(RETRACE_LOG_INFO, "c");
		ck_assert_int_eq(retrace_trigger(c, 8, NULL, 0), RETRACE_OK);
		ck_assert_int_eq(retrace_trigger(TRACE_A, 7, NULL, 0), RETRACE_OK);
		retrace_end();
	}
	collect_events(&pool, &e);
	ck_assert_uint_eq(count_events(&e, RETRACE_EV_TRIGGER), 2);
	t = nth_in_trace(&e, TRACE_A.lo, RETRACE_EV_TRIGGER, 0);
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(t->nf, 2);
	ck_assert_int_eq(t->f[0].t, 'u');
	ck_assert_uint_eq(t->f[0].u, 7);
	assert_str(&t->f[1], "payment-error");
	/* after the span's end: written at the trace's end */
	ck_assert_uint_gt(index_of(&e, t), index_of(&e, nth_in_trace(&e, TRACE_A.lo, RETRACE_EV_SPAN_END, 0)));
	t = nth_in_trace(&e, TRACE_B.lo, RETRACE_EV_TRIGGER, 0);
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(t->f[0].u, 7);
	ck_assert_ptr_null(nth_in_trace(&e, 0x4444ull, RETRACE_EV_TRIGGER, 0));
	events_free(&e);
	pool_down();
}
END_TEST

static Suite *tracer_suite(void)
{
	Suite *s = suite_create("tracer");
	TCase *tc = tcase_create("events");
	tcase_add_test(tc, test_nested_spans_and_explicit_parent);
	tcase_add_test(tc, test_remote_parent_and_serialize);
	tcase_add_test(tc, test_attributes);
	tcase_add_test(tc, test_logs_and_templates);
	tcase_add_test(tc, test_format_types);
	tcase_add_test(tc, test_error_status);
	tcase_add_test(tc, test_resource_first_in_each_stream);
	tcase_add_test(tc, test_unmatched_and_too_deep);
	tcase_add_test(tc, test_detach_attach_carries_span);
	tcase_add_test(tc, test_outside_trace_records_nothing);
	tcase_add_test(tc, test_event_too_big_dropped);
	tcase_add_test(tc, test_trigger_names);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(tracer_suite());
}
