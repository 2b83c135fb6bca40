/*
 * The adaptive span policy end to end in one process: the agent's side
 * publishes a policy table into a real pool (rt_pool_policy_publish), the real
 * client (libretrace) writes spans under it, the pool is drained, the buffers
 * become a SLICE as the agent would send it, and the coordinator's decoder
 * reads it back. Checked:
 *   - a dropped span records nothing; its children, logs and the outgoing
 *     context attach to the nearest recorded ancestor; its attributes go
 *     nowhere; the decode is complete (no hole is flagged);
 *   - self time: the ancestor's decoded self time excludes its dropped
 *     descendants (nested, and with recorded spans inside them);
 *   - a dropped span that ends in error is recorded at its end, under the
 *     ancestor, with the error;
 *   - a kept span records the probability it was kept with; p = 0.5 keeps
 *     about half;
 *   - a dropped CLIENT span: the outgoing context names the recorded
 *     ancestor; its time is counted in the ancestor's adj like any dropped
 *     span, and the decoder does not subtract its callee's entry span again;
 *     one ending in error is recovered as INTERNAL (a CLIENT span with no
 *     callee naming it would be flagged unmatched) and the decode stays
 *     complete;
 *   - a new table (or an emptied one) is seen at the next span start (the
 *     client caches each site's answer with the table's generation);
 *   - never dropped: roots, a host's entry span under a remote parent whose
 *     call was kept (or a context without the "call dropped" flag), spans
 *     after a fired trigger, and everything when no table is published;
 *   - across two processes (a forked callee writing into the same pool): a
 *     dropped call sends the "call dropped" flag, the callee drops its entry
 *     span too, its kept spans name the caller's recorded span, the self
 *     times stay right, and a callee stream that dropped every span still
 *     leaves data (its RESOURCE) for its host.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/collect.h"
#include "common/testpool.h"
#include "decode.h"
#include "export.h"
#include "retrace/retrace.h"
#include "retrace/tracer.h"

#define SERVICE "adaptsvc"

static struct rt_pool pool;
static char pool_name[64];

static void pool_up(void)
{
	test_pool_name(pool_name, sizeof pool_name, "adspans");
	test_pool_create(&pool, pool_name, 16384, 512);
	test_client_init(pool_name, 1);
	ck_assert_int_eq(retrace_set_service_name(SERVICE), RETRACE_OK);
}

static void pool_down(void)
{
	retrace_shutdown();
	test_pool_destroy(&pool);
}

static uint64_t site(const char *op)
{
	return rt_adapt_site_hash(SERVICE, strlen(SERVICE), op, strlen(op));
}

/* Publish {op -> p} pairs (NULL-terminated ops). */
static void publish(const char *const *ops, const double *p)
{
	uint64_t sites[16];
	size_t n = 0;
	for (; ops[n]; n++)
		sites[n] = site(ops[n]);
	ck_assert_int_eq(rt_pool_policy_publish(&pool, sites, p, n), 0);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void spin_us(unsigned us)
{
	uint64_t end = now_ns() + us * 1000ull;
	while (now_ns() < end)
		;
}

/* Drain the pool and decode trace `id` as the coordinator would; *pid_streams
 * (if not NULL) gets the number of writer streams of process `pid` in it. */
static void decode_trace_pid(retrace_trace_id id, struct rt_decoded_trace *out, uint32_t pid,
			     uint32_t *pid_streams)
{
	struct collection col;
	struct rt_wire_slice_buffer *wb;
	struct rt_wire_slice sl;
	struct rt_decoder *d;
	size_t i, n = 0;
	retrace_flush();
	memset(&col, 0, sizeof col);
	collect_all(&pool, &col);
	wb = calloc(col.n_bufs + 1, sizeof *wb);
	for (i = 0; i < col.n_bufs; i++) {
		const struct collected_buffer *b = &col.bufs[i];
		if (b->h.trace_lo != id.lo)
			continue;
		wb[n] = (struct rt_wire_slice_buffer){ b->h.pid, b->h.tid, b->h.seq, b->h.flags,
						       b->h.first_tick, b->payload, b->e.bytes };
		if (pid_streams && b->h.pid == pid && b->h.seq == 0)
			++*pid_streams;
		n++;
	}
	memset(&sl, 0, sizeof sl);
	sl.agent_id = 42;
	sl.trace_hi = id.hi;
	sl.trace_lo = id.lo;
	sl.tsc_hz = pool.hdr->tsc_hz;
	sl.tsc_ref_tick = pool.hdr->tsc_ref_tick;
	sl.tsc_ref_unix_ns = pool.hdr->tsc_ref_unix_ns;
	sl.buffer_count = (uint32_t)n;
	sl.buffers = wb;
	d = rt_decoder_new(id.hi, id.lo);
	ck_assert_ptr_nonnull(d);
	ck_assert_int_eq(rt_decoder_add_slice(d, &sl), 0);
	ck_assert_int_eq(rt_decoder_finish(d, out), 0);
	free(wb);
	collection_free(&col);
}

static void decode_trace(retrace_trace_id id, struct rt_decoded_trace *out)
{
	decode_trace_pid(id, out, 0, NULL);
}

static const struct rt_span *by_id(const struct rt_decoded_trace *t, uint64_t id)
{
	uint32_t i;
	for (i = 0; i < t->n_spans; i++)
		if (t->spans[i].span_id == id)
			return &t->spans[i];
	return NULL;
}

static uint32_t count_named(const struct rt_decoded_trace *t, const char *name)
{
	uint32_t i, n = 0;
	for (i = 0; i < t->n_spans; i++)
		n += strcmp(t->spans[i].name, name) == 0;
	return n;
}

static const retrace_trace_id TRACE = {0x1234ull, 0xadad0001ull};

START_TEST(test_drop_attach_and_self_time)
{
	static const char *const ops[] = { "drop", NULL };
	static const double p[] = { 0.0 };
	struct rt_decoded_trace t;
	struct retrace_tracer_stats st0, st;
	int64_t *self;
	uint64_t root, a, b, c, d, e, f, gap_start, root_gaps_ns;
	const struct rt_span *sr, *sb, *sd, *sf, *se = NULL;
	uint32_t i, ri;

	pool_up();
	publish(ops, p);
	retrace_tracer_stats(&st0);
	ck_assert_int_eq(retrace_begin(TRACE), 1);
	gap_start = now_ns();
	root = retrace_span_start("drop", RETRACE_SPAN_SERVER); /* a root: never dropped */
	a = retrace_span_start("drop", RETRACE_SPAN_INTERNAL);  /* dropped */
	root_gaps_ns = now_ns() - gap_start;
	ck_assert_uint_eq(a, root);            /* the recorded ancestor stands in */
	ck_assert_uint_eq(retrace_current_span(), root);
	retrace_attr_str("lost", "x");          /* describes a dropped span: nowhere */
	retrace_log_text(RETRACE_LOG_INFO, "inside a dropped span");
	spin_us(1500);
	b = retrace_span_start("keep", RETRACE_SPAN_INTERNAL);
	spin_us(1000);
	retrace_span_end();
	c = retrace_span_start("drop", RETRACE_SPAN_INTERNAL); /* nested, dropped */
	ck_assert_uint_eq(c, root);
	spin_us(1000);
	d = retrace_span_start("keep", RETRACE_SPAN_INTERNAL);
	spin_us(1000);
	retrace_span_end();
	retrace_span_end(); /* c */
	gap_start = now_ns();
	retrace_span_end(); /* a */
	e = retrace_span_start("drop", RETRACE_SPAN_INTERNAL); /* dropped, ends in error */
	root_gaps_ns += now_ns() - gap_start;
	ck_assert_uint_eq(e, root);
	spin_us(1000);
	f = retrace_span_start("keep", RETRACE_SPAN_INTERNAL);
	spin_us(1000);
	retrace_span_end();
	gap_start = now_ns();
	retrace_span_end_error(7, "late failure"); /* e: recorded now */
	retrace_span_end_ok(); /* root */
	root_gaps_ns += now_ns() - gap_start;
	retrace_end();
	retrace_tracer_stats(&st);
	ck_assert_uint_eq(st.spans_dropped - st0.spans_dropped, 3);
	ck_assert_uint_eq(st.spans_recovered - st0.spans_recovered, 1);

	decode_trace(TRACE, &t);
	ck_assert_msg(rt_decode_complete(&t.st), "dropped spans must not leave a hole");
	ck_assert_uint_eq(t.n_spans, 5); /* root, b, d, f, and e recovered */
	sr = by_id(&t, root);
	sb = by_id(&t, b);
	sd = by_id(&t, d);
	sf = by_id(&t, f);
	ck_assert(sr && sb && sd && sf);
	ck_assert_uint_eq(sb->parent_id, root);
	ck_assert_uint_eq(sd->parent_id, root);
	ck_assert_uint_eq(sf->parent_id, root);
	ck_assert_uint_eq(sr->n_attrs, 0);
	ck_assert_uint_eq(sr->n_logs, 1);
	ck_assert_uint_eq(count_named(&t, "drop"), 2); /* root and the recovered e */
	for (i = 0; i < t.n_spans; i++)
		if (t.spans[i].span_id != root && strcmp(t.spans[i].name, "drop") == 0)
			se = &t.spans[i];
	ck_assert_ptr_nonnull(se);
	ck_assert_uint_eq(se->parent_id, root);
	ck_assert_uint_eq(se->status, RETRACE_STATUS_ERROR);
	ck_assert_int_eq(se->status_code, 7);
	ck_assert_str_eq(se->status_message, "late failure");
	ck_assert_uint_eq(se->adapt_p16, RT_SPAN_P16_ALWAYS);
	ck_assert_uint_ge(se->end_ns - se->start_ns, 2000000);
	ck_assert_uint_eq(sr->adapt_p16, RT_SPAN_P16_ALWAYS);
	/* dur(a) - b - d - f: not 0; negative when f (inside the recovered e) ran
	 * longer than a's own time, which a preempted spin can do */
	ck_assert_int_ne(sr->dropped_ns, 0);

	/* Self times: the root's own time is the three gaps between its calls,
	 * which the test timed around them (a preemption there is in both), and
	 * none of the 2.5 ms that a and c spun. 250 us covers the difference
	 * between the TSC calibration and CLOCK_MONOTONIC over the root's ~7 ms;
	 * were the dropped time left in, the root would keep 2.5 ms more. */
	self = calloc(t.n_spans, sizeof *self);
	rt_decode_self_times(&t, self);
	ri = (uint32_t)(sr - t.spans);
	ck_assert_msg(self[ri] <= (int64_t)root_gaps_ns + 250000,
		      "root self time %lld ns, its own gaps %llu ns: dropped time left in it",
		      (long long)self[ri], (unsigned long long)root_gaps_ns);
	ck_assert_uint_ge(sr->end_ns - sr->start_ns, 6500000);
	ck_assert_int_ge(self[sb - t.spans], 1000000);
	ck_assert_int_ge(self[sd - t.spans], 1000000);
	free(self);
	rt_decoded_trace_free(&t);
	pool_down();
}
END_TEST

START_TEST(test_kept_spans_record_their_probability)
{
	static const char *const ops[] = { "half", NULL };
	static const double p[] = { 0.5 };
	const retrace_trace_id id = {0x1234ull, 0xadad0002ull};
	struct rt_decoded_trace t;
	uint32_t i, kept = 0;
	pool_up();
	publish(ops, p);
	ck_assert_int_eq(retrace_begin(id), 1);
	retrace_span_start("root", RETRACE_SPAN_SERVER);
	for (i = 0; i < 1000; i++) {
		retrace_span_start("half", RETRACE_SPAN_INTERNAL);
		retrace_span_end();
	}
	retrace_span_end();
	retrace_end();
	decode_trace(id, &t);
	ck_assert(rt_decode_complete(&t.st));
	for (i = 0; i < t.n_spans; i++) {
		if (strcmp(t.spans[i].name, "half") != 0)
			continue;
		kept++;
		ck_assert_uint_eq(t.spans[i].adapt_p16, rt_adapt_p16(0.5));
	}
	/* Binomial(1000, 0.5): sd 16; a bound of 8 sd never fails by chance. */
	ck_assert_msg(kept > 370 && kept < 630, "kept %u of 1000 at p = 0.5", kept);
	{ /* the exported spans carry it too (OTLP attribute) */
		struct rt_wire_buf out = {0};
		char want[64];
		ck_assert_int_eq(rt_export_write(rt_export_format_parse("otlp-json"), &t, 1, &out), 0);
		ck_assert_int_eq(rt_wire_buf_reserve(&out, 1), 0);
		out.data[out.len] = 0;
		snprintf(want, sizeof want, "\"retrace.adaptive.p16\"");
		ck_assert_ptr_nonnull(strstr((const char *)out.data, want));
		rt_wire_buf_free(&out);
	}
	rt_decoded_trace_free(&t);
	pool_down();
}
END_TEST

START_TEST(test_never_dropped)
{
	static const char *const ops[] = { "entry", "call", "late", "inner", NULL };
	static const double p[] = { 0.0, 0.0, 0.0, 0.0 };
	const retrace_trace_id id = {0x1234ull, 0xadad0003ull};
	const retrace_trace_id id2 = {0x1234ull, 0xadad0004ull};
	struct rt_decoded_trace t;
	struct retrace_wire_context wc;
	uint64_t entry, call, inner, late;
	pool_up();
	publish(ops, p);
	/* A host's entry span under a remote parent. */
	ck_assert_int_eq(retrace_deserialize("00-000000000000123400000000adad0003-00000000000000aa-01",
					     NULL, &wc), RETRACE_OK);
	ck_assert_int_eq(retrace_begin(id), 1);
	entry = retrace_span_start("entry", RETRACE_SPAN_SERVER);
	call = retrace_span_start("call", RETRACE_SPAN_CLIENT); /* dropped: the context names entry */
	retrace_span_end();
	inner = retrace_span_start("inner", RETRACE_SPAN_INTERNAL); /* dropped */
	retrace_span_end();
	ck_assert_uint_eq(inner, entry);
	retrace_trigger(id, 9, NULL, 0);
	late = retrace_span_start("late", RETRACE_SPAN_INTERNAL); /* after a trigger */
	retrace_span_end();
	retrace_span_end();
	retrace_end();
	decode_trace(id, &t);
	ck_assert_ptr_nonnull(by_id(&t, entry));
	ck_assert_uint_eq(by_id(&t, entry)->parent_id, 0xaa);
	ck_assert_uint_eq(call, entry); /* a dropped span returns its ancestor */
	ck_assert_uint_ne(late, entry);
	ck_assert_uint_eq(count_named(&t, "call"), 0);
	ck_assert_uint_eq(count_named(&t, "late"), 1);
	ck_assert_uint_eq(count_named(&t, "entry"), 1);
	ck_assert_uint_eq(count_named(&t, "inner"), 0);
	rt_decoded_trace_free(&t);

	/* An empty table: everything is recorded again. */
	ck_assert_int_eq(rt_pool_policy_publish(&pool, NULL, NULL, 0), 0);
	ck_assert_int_eq(retrace_begin(id2), 1);
	retrace_span_start("entry", RETRACE_SPAN_SERVER);
	inner = retrace_span_start("inner", RETRACE_SPAN_INTERNAL);
	retrace_span_end();
	retrace_span_end();
	retrace_end();
	decode_trace(id2, &t);
	ck_assert_uint_eq(count_named(&t, "inner"), 1);
	ck_assert_ptr_nonnull(by_id(&t, inner));
	ck_assert_uint_eq(by_id(&t, inner)->adapt_p16, RT_SPAN_P16_ALWAYS);
	rt_decoded_trace_free(&t);
	pool_down();
}
END_TEST

/* The ancestor's decoded self time and dropped_ns (ns), span `id`. */
static int64_t self_of(const struct rt_decoded_trace *t, uint64_t id)
{
	int64_t *self = calloc(t->n_spans, sizeof *self), v;
	const struct rt_span *s = by_id(t, id);
	ck_assert_ptr_nonnull(s);
	rt_decode_self_times(t, self);
	v = self[s - t->spans];
	free(self);
	return v;
}

START_TEST(test_dropped_call)
{
	static const char *const ops[] = { "call", "wrap", NULL };
	static const double p[] = { 0.0, 0.0 };
	const retrace_trace_id id = {0x1234ull, 0xadad0006ull};
	const retrace_trace_id id2 = {0x1234ull, 0xadad0007ull};
	const retrace_trace_id id3 = {0x1234ull, 0xadad0008ull};
	struct rt_decoded_trace t;
	char tp[64], want[64];
	uint64_t root, call;
	const struct rt_span *sr;
	pool_up();
	publish(ops, p);

	/* 1. Directly under the root: dropped; the context names the root; the
	 * call is counted in the root's adj like any dropped span (its callee's
	 * entry span is then not subtracted: test_self_time_dropped_call). */
	ck_assert_int_eq(retrace_begin(id), 1);
	root = retrace_span_start("root", RETRACE_SPAN_SERVER);
	call = retrace_span_start("call", RETRACE_SPAN_CLIENT);
	ck_assert_uint_eq(call, root);
	ck_assert_int_eq(retrace_serialize(tp, sizeof tp, NULL, 0, NULL), RETRACE_OK);
	snprintf(want, sizeof want, "-%016llx-", (unsigned long long)root);
	ck_assert_msg(strstr(tp, want) != NULL, "traceparent %s does not name the root", tp);
	spin_us(2000);
	retrace_span_end();
	retrace_span_end();
	retrace_end();
	decode_trace(id, &t);
	ck_assert(rt_decode_complete(&t.st));
	ck_assert_uint_eq(t.n_spans, 1);
	sr = by_id(&t, root);
	ck_assert_ptr_nonnull(sr);
	ck_assert_int_ge(sr->dropped_ns, 2000000);
	ck_assert_int_lt(self_of(&t, root), 1000000);
	rt_decoded_trace_free(&t);

	/* 2. Inside a dropped span: counted once, with the span around it. */
	ck_assert_int_eq(retrace_begin(id2), 1);
	root = retrace_span_start("root", RETRACE_SPAN_SERVER);
	retrace_span_start("wrap", RETRACE_SPAN_INTERNAL);
	spin_us(1000);
	retrace_span_start("call", RETRACE_SPAN_CLIENT);
	spin_us(3000);
	retrace_span_end();
	retrace_span_end();
	retrace_span_end();
	retrace_end();
	decode_trace(id2, &t);
	ck_assert(rt_decode_complete(&t.st));
	ck_assert_uint_eq(t.n_spans, 1);
	sr = by_id(&t, root);
	ck_assert_ptr_nonnull(sr);
	ck_assert_int_ge(sr->dropped_ns, 4000000);
	ck_assert_int_le(sr->dropped_ns, (int64_t)(sr->end_ns - sr->start_ns));
	rt_decoded_trace_free(&t);

	/* 3. A dropped call that fails is recorded, as INTERNAL, and the trace
	 * is still complete (no unmatched call). */
	ck_assert_int_eq(retrace_begin(id3), 1);
	root = retrace_span_start("root", RETRACE_SPAN_SERVER);
	retrace_span_start("call", RETRACE_SPAN_CLIENT);
	retrace_span_end_error(503, "unavailable");
	retrace_span_end();
	retrace_end();
	decode_trace(id3, &t);
	ck_assert_msg(rt_decode_complete(&t.st), "unmatched %u",
		      (unsigned)t.st.unmatched_client_spans);
	ck_assert_uint_eq(count_named(&t, "call"), 1);
	for (uint32_t i = 0; i < t.n_spans; i++)
		if (strcmp(t.spans[i].name, "call") == 0) {
			ck_assert_uint_eq(t.spans[i].kind, RETRACE_SPAN_INTERNAL);
			ck_assert_uint_eq(t.spans[i].status, RETRACE_STATUS_ERROR);
			ck_assert_uint_eq(t.spans[i].parent_id, root);
		}
	rt_decoded_trace_free(&t);
	pool_down();
}
END_TEST

/* The client caches a site's answer with the table generation it came from:
 * every new table (and an emptied one) must be seen at the next span start. */
static uint64_t drops_of(int spans)
{
	struct retrace_tracer_stats st0, st;
	const retrace_trace_id id = {0x1234ull, 0xadad0010ull};
	retrace_tracer_stats(&st0);
	ck_assert_int_eq(retrace_begin(id), 1);
	retrace_span_start("root", RETRACE_SPAN_SERVER);
	for (int i = 0; i < spans; i++) {
		retrace_span_start("cached.site.name", RETRACE_SPAN_INTERNAL);
		retrace_span_end();
		retrace_span_start("short", RETRACE_SPAN_INTERNAL); /* < 8 bytes: not cached */
		retrace_span_end();
	}
	retrace_span_end();
	retrace_end();
	retrace_tracer_stats(&st);
	return st.spans_dropped - st0.spans_dropped;
}

START_TEST(test_policy_change_seen)
{
	static const char *const ops[] = { "cached.site.name", "short", NULL };
	static const double off[] = { 0.0, 0.0 }, on[] = { 1.0, 1.0 };
	pool_up();
	publish(ops, off);
	ck_assert_uint_eq(drops_of(10), 20);
	publish(ops, on);
	ck_assert_uint_eq(drops_of(10), 0);
	publish(ops, off);
	ck_assert_uint_eq(drops_of(10), 20);
	ck_assert_int_eq(rt_pool_policy_publish(&pool, NULL, NULL, 0), 0); /* emptied */
	ck_assert_uint_eq(drops_of(10), 0);
	publish(ops, off); /* and filled again after an empty one */
	ck_assert_uint_eq(drops_of(10), 20);
	pool_down();
}
END_TEST

/* The decoder's side of a dropped call: a callee's entry span (SERVER, other
 * process) under a parent that is no call lies inside the dropped call the
 * parent's dropped_ns counts, so it is not subtracted again; under a recorded
 * CLIENT span it is (the call's self time is its network time). */
START_TEST(test_self_time_dropped_call)
{
	struct rt_span sp[3];
	struct rt_decoded_trace t;
	int64_t self[3];
	memset(sp, 0, sizeof sp);
	memset(&t, 0, sizeof t);
	/* caller root A on agent 1: 10 ms, of which a dropped call of 6 ms (adj) */
	sp[0] = (struct rt_span){ .span_id = 1, .parent = -1, .kind = RETRACE_SPAN_SERVER,
				  .agent_id = 1, .pid = 10, .start_ns = 0, .end_ns = 10000000,
				  .dropped_ns = 6000000 };
	/* the callee's entry span on agent 2, 5 ms inside the call */
	sp[1] = (struct rt_span){ .span_id = 2, .parent_id = 1, .parent = 0,
				  .kind = RETRACE_SPAN_SERVER, .agent_id = 2, .pid = 20,
				  .start_ns = 3000000, .end_ns = 8000000 };
	t.spans = sp;
	t.n_spans = 2;
	rt_decode_self_times(&t, self);
	ck_assert_int_eq(self[0], 4000000); /* not 0: the callee is inside the adj */
	ck_assert_int_eq(self[1], 5000000);
	/* a recorded call between them: the callee is the call's child */
	sp[0].dropped_ns = 0;
	sp[2] = (struct rt_span){ .span_id = 3, .parent_id = 1, .parent = 0,
				  .kind = RETRACE_SPAN_CLIENT, .agent_id = 1, .pid = 10,
				  .start_ns = 2000000, .end_ns = 8500000 };
	sp[1].parent_id = 3;
	sp[1].parent = 2;
	t.n_spans = 3;
	rt_decode_self_times(&t, self);
	ck_assert_int_eq(self[0], 3500000);
	ck_assert_int_eq(self[2], 1500000);
	/* the same process (a local SERVER span under INTERNAL): subtracted */
	sp[1].agent_id = 1;
	sp[1].pid = 10;
	sp[1].parent_id = 1;
	sp[1].parent = 0;
	t.n_spans = 2;
	rt_decode_self_times(&t, self);
	ck_assert_int_eq(self[0], 5000000);
	/* the callee dropped its entry span too: its first recorded span is
	 * INTERNAL, on another process, under the dropped call (dropped_ns) */
	sp[1].agent_id = 2;
	sp[1].pid = 20;
	sp[1].kind = RETRACE_SPAN_INTERNAL;
	sp[0].dropped_ns = 6000000;
	rt_decode_self_times(&t, self);
	ck_assert_int_eq(self[0], 4000000);
	/* nothing dropped under the parent: a service that sends contexts from
	 * INTERNAL spans, its callee's INTERNAL span is its child as before */
	sp[0].dropped_ns = 0;
	rt_decode_self_times(&t, self);
	ck_assert_int_eq(self[0], 5000000);
}
END_TEST

/* The callee's side of test_dropped_entry_across_processes, in the forked
 * child: 0, or the number of the check that failed. */
static int dropped_entry_callee(const char *tp, const char *ts)
{
	struct retrace_wire_context w;
	struct retrace_tracer_stats st0, st;
	char tp2[64], ts2[RETRACE_TRACESTATE_MAX + 1];
	uint64_t entry, work;
	retrace_tracer_stats(&st0);
	if (retrace_deserialize(tp, ts, &w) != RETRACE_OK || !w.call_dropped)
		return 10;
	if (retrace_begin(w.trace_id) != 1)
		return 11;
	entry = retrace_span_start("entry", RETRACE_SPAN_SERVER); /* dropped */
	if (entry != w.parent_span_id)
		return 12; /* recorded, or not standing in for the caller's span */
	/* under the dropped entry the flag passes on: the span named is still
	 * the caller's, which is no call */
	if (retrace_serialize(tp2, sizeof tp2, ts2, sizeof ts2, NULL) != RETRACE_OK ||
	    ts2[21] != '2')
		return 13;
	spin_us(1000);
	work = retrace_span_start("work", RETRACE_SPAN_INTERNAL); /* kept */
	if (work == entry || work == 0)
		return 14;
	spin_us(2000);
	retrace_span_end();
	retrace_span_end(); /* entry */
	retrace_end();
	/* A second call of the trace whose every span is dropped. */
	if (retrace_deserialize(tp, ts, &w) != RETRACE_OK || retrace_begin(w.trace_id) != 1)
		return 15;
	retrace_span_start("entry", RETRACE_SPAN_SERVER);
	retrace_span_end();
	retrace_end();
	retrace_tracer_stats(&st);
	if (st.spans_dropped - st0.spans_dropped != 2 || st.spans_started - st0.spans_started != 1)
		return 16;
	retrace_flush();
	return 0;
}

/* A dropped call whose callee's entry span is dropped too, across two
 * processes: the caller's context says "call dropped" (rt= flag 2, binary
 * bit5), the callee drops its entry span, its kept child names the caller's
 * root as parent (across processes), the decode is complete, and the self
 * times stay right: the root's is its own time, without the call (its
 * dropped_ns) and without subtracting the callee's span a second time; the
 * callee's span keeps its own. */
START_TEST(test_dropped_entry_across_processes)
{
	static const char *const ops[] = { "call", "entry", NULL };
	static const double p[] = { 0.0, 0.0 };
	const retrace_trace_id id = {0x1234ull, 0xadad0009ull};
	char tp[64], ts[RETRACE_TRACESTATE_MAX + 1];
	uint8_t bin[RETRACE_BINARY_CONTEXT_LEN];
	struct rt_decoded_trace t;
	const struct rt_span *sr, *sw = NULL;
	uint64_t root, gap_start, root_gaps_ns;
	uint32_t i, child_streams = 0;
	int64_t *self;
	int status = -1;
	pid_t child;

	pool_up();
	publish(ops, p);
	ck_assert_int_eq(retrace_begin(id), 1);
	gap_start = now_ns();
	root = retrace_span_start("root", RETRACE_SPAN_SERVER);
	ck_assert_int_eq(retrace_serialize(tp, sizeof tp, ts, sizeof ts, NULL), RETRACE_OK);
	ck_assert_msg(ts[21] == '0', "a recorded span may be the call: %s", ts);
	spin_us(1000); /* the root's own time */
	ck_assert_uint_eq(retrace_span_start("call", RETRACE_SPAN_CLIENT), root); /* dropped */
	root_gaps_ns = now_ns() - gap_start;
	ck_assert_int_eq(retrace_serialize(tp, sizeof tp, ts, sizeof ts, NULL), RETRACE_OK);
	ck_assert_msg(ts[21] == '2', "a dropped call must say so: %s", ts);
	ck_assert_int_eq(retrace_serialize_binary(bin), RETRACE_OK);
	ck_assert_uint_eq(bin[1] & 0x20u, 0x20u);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0)
		_exit(dropped_entry_callee(tp, ts));
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	retrace_span_end(); /* call */
	gap_start = now_ns();
	retrace_span_end(); /* root */
	root_gaps_ns += now_ns() - gap_start;
	retrace_end();
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "callee check %d failed",
		      WIFEXITED(status) ? WEXITSTATUS(status) : -1);

	decode_trace_pid(id, &t, (uint32_t)child, &child_streams);
	ck_assert_msg(rt_decode_complete(&t.st), "unmatched %u partial %u",
		      (unsigned)t.st.unmatched_client_spans, (unsigned)t.st.partial_spans);
	ck_assert_uint_eq(child_streams, 2); /* the all-dropped call left its stream */
	ck_assert_uint_eq(t.n_spans, 2);     /* root and work */
	ck_assert_uint_eq(count_named(&t, "entry") + count_named(&t, "call"), 0);
	sr = by_id(&t, root);
	ck_assert_ptr_nonnull(sr);
	for (i = 0; i < t.n_spans; i++)
		if (strcmp(t.spans[i].name, "work") == 0)
			sw = &t.spans[i];
	ck_assert_ptr_nonnull(sw);
	ck_assert_uint_eq(sw->parent_id, root);
	ck_assert_uint_eq(sw->pid, (uint32_t)child);
	ck_assert_uint_ne(sr->pid, sw->pid);
	ck_assert_int_ge(sr->dropped_ns, 3000000); /* the call, the callee inside it */
	self = calloc(t.n_spans, sizeof *self);
	rt_decode_self_times(&t, self);
	/* the root: its 1 ms spin and the gaps around it; not 0 (the callee's
	 * span subtracted again), not 3 ms more (the call left in) */
	ck_assert_msg(self[sr - t.spans] >= 750000 &&
		      self[sr - t.spans] <= (int64_t)root_gaps_ns + 250000,
		      "root self time %lld ns, its own time %llu ns",
		      (long long)self[sr - t.spans], (unsigned long long)root_gaps_ns);
	ck_assert_int_ge(self[sw - t.spans], 2000000);
	free(self);
	rt_decoded_trace_free(&t);
	pool_down();
}
END_TEST

/* A name buffer reused for another name of the same length: its own site
 * (the client's per-thread site cache is keyed by address, length, service
 * and the name's ends). */
START_TEST(test_reused_name_buffer)
{
	static const char *const ops[] = { "drop.site.one", NULL };
	static const double p[] = { 0.0 };
	const retrace_trace_id id = {0x1234ull, 0xadad0005ull};
	struct retrace_tracer_stats st0, st;
	char buf[32];
	pool_up();
	publish(ops, p);
	retrace_tracer_stats(&st0);
	ck_assert_int_eq(retrace_begin(id), 1);
	retrace_span_start("root", RETRACE_SPAN_SERVER);
	for (int i = 0; i < 3; i++) {
		snprintf(buf, sizeof buf, "%s", "keep.site.one"); /* not in the table */
		retrace_span_start(buf, RETRACE_SPAN_INTERNAL);
		retrace_span_end();
		snprintf(buf, sizeof buf, "%s", "drop.site.one"); /* same address, length */
		retrace_span_start(buf, RETRACE_SPAN_INTERNAL);
		retrace_span_end();
	}
	retrace_span_end();
	retrace_end();
	retrace_tracer_stats(&st);
	ck_assert_uint_eq(st.spans_dropped - st0.spans_dropped, 3);
	ck_assert_uint_eq(st.spans_started - st0.spans_started, 4); /* root + 3 keep */
	pool_down();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("adaptive_spans");
	int rc;
	TCase *tc = tcase_create("spans");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_drop_attach_and_self_time);
	tcase_add_test(tc, test_kept_spans_record_their_probability);
	tcase_add_test(tc, test_never_dropped);
	tcase_add_test(tc, test_reused_name_buffer);
	tcase_add_test(tc, test_dropped_call);
	tcase_add_test(tc, test_self_time_dropped_call);
	tcase_add_test(tc, test_dropped_entry_across_processes);
	tcase_add_test(tc, test_policy_change_seen);
	suite_add_tcase(s, tc);
	rc = test_run_suite(s);
	test_pool_sweep("adspans"); /* what a failed test left */
	return rc;
}
