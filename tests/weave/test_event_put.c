/* test_event_put.c — shm/event_put.h, the one encoder of tracer events, read back
 * by the coordinator's decoder: the weaver's link slice (RESOURCE + ATTR of each
 * value type, framed by rt_ev_buf) attaches to a span another agent recorded
 * (written by tests/coordinator/evgen.c, an encoder written from the format
 * documents), and a payload that runs out of room stays well formed. The
 * client's ATTR call site uses the same inline writers (tests/client checks its
 * events byte by byte). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/suite.h"
#include "decode.h"
#include "evgen.h"
#include "retrace/tracer.h"
#include "shm/event_put.h"
#include "shm/frame.h"
#include "shm/pool.h"

#define HI 0x1111111111111111ull
#define LO 0x2222222222222222ull
#define SPAN 0xabcdef0123456789ull

static const struct rt_attr *find(const struct rt_span *s, const char *key)
{
	uint32_t i;
	for (i = 0; i < s->n_attrs; i++)
		if (!strcmp(s->attrs[i].key, key))
			return &s->attrs[i];
	return NULL;
}

/* Decode an agent-1 slice with one SERVER span SPAN, plus `payload` as the
 * only buffer of a second agent (the weaver's). */
static void decode_with(const uint8_t *payload, size_t len, struct rt_decoded_trace *t)
{
	struct eg g;
	struct eg_stream *s;
	struct rt_wire_slice sl, wsl;
	struct rt_wire_slice_buffer bufs[8], wb;
	struct rt_decoder *d = rt_decoder_new(HI, LO);
	ck_assert_ptr_nonnull(d);
	eg_init(&g, HI, LO, 4096);
	eg_agent(&g, 1, 1000000000ull, 0, 0);
	s = eg_stream(&g, 1, 10, 1);
	eg_resource(s, "backend", "h");
	eg_span_start(s, SPAN, 0, RETRACE_SPAN_SERVER, EG_T(1), "backend.read");
	eg_span_end(s, SPAN, EG_T(9), 0, 0, NULL);
	eg_finish(&g);
	eg_slice(&g, 1, NULL, 0, &sl, bufs);
	ck_assert_int_eq(rt_decoder_add_slice(d, &sl), 0);
	memset(&wb, 0, sizeof wb);
	wb.flags = RT_BUF_SEALED | RT_BUF_LAST;
	wb.data = payload;
	wb.len = (uint32_t)len;
	memset(&wsl, 0, sizeof wsl);
	wsl.agent_id = UINT32_MAX;
	wsl.slice_seq = 1;
	wsl.trace_hi = HI;
	wsl.trace_lo = LO;
	wsl.buffer_count = 1;
	wsl.buffers = &wb;
	ck_assert_int_eq(rt_decoder_add_slice(d, &wsl), 0);
	ck_assert_int_eq(rt_decoder_finish(d, t), 0); /* frees d */
	eg_free(&g);
}

START_TEST(link_events_decode)
{
	static const char *const k[] = {"service.name"}, *const v[] = {"retrace-weaver"};
	uint8_t bytes[1024];
	struct rt_ev_buf b;
	struct rt_decoded_trace t;
	const struct rt_attr *a;
	uint32_t i, weaver = UINT32_MAX;
	rt_ev_buf_init(&b, bytes, sizeof bytes);
	rt_ev_buf_resource(&b, 0, k, v, 1);
	rt_ev_buf_attr_bool(&b, SPAN, "retrace.weave.inferred", 1);
	rt_ev_buf_attr_double(&b, SPAN, "retrace.weave.confidence", 0.8125);
	rt_ev_buf_attr_str(&b, SPAN, "retrace.weave.parent_span_id", "00000000000000ff");
	rt_ev_buf_end(&b);
	ck_assert(!b.overflow);
	decode_with(b.data, b.len, &t);
	ck_assert_uint_eq(t.st.corrupt_events, 0);
	ck_assert_uint_eq(t.n_spans, 1);
	ck_assert_uint_eq(t.spans[0].span_id, SPAN);
	a = find(&t.spans[0], "retrace.weave.inferred");
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(a->value.type, RT_VAL_BOOL);
	ck_assert_int_eq(a->value.u.b, 1);
	a = find(&t.spans[0], "retrace.weave.confidence");
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(a->value.type, RT_VAL_DOUBLE);
	ck_assert(a->value.u.d == 0.8125);
	a = find(&t.spans[0], "retrace.weave.parent_span_id");
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(a->value.type, RT_VAL_STR);
	ck_assert_str_eq(a->value.u.s, "00000000000000ff");
	for (i = 0; i < t.n_resources; i++)
		if (t.resources[i].agent_id == UINT32_MAX)
			weaver = i;
	ck_assert_uint_ne(weaver, UINT32_MAX);
	ck_assert_str_eq(t.resources[weaver].service, "retrace-weaver");
	rt_decoded_trace_free(&t);
}
END_TEST

/* The bytes of one ATTR are what the format document says (and what the
 * client's tracer wrote by hand before it shared this encoder). */
START_TEST(attr_bytes)
{
	uint8_t want[] = {0xC1, RETRACE_EV_ATTR, 0xcf, 0, 0, 0, 0, 0, 0, 1, 2, 0xa1, 'k', 0xa2,
			  'v', 'w'};
	uint8_t got[64];
	uint8_t *p = rt_ev_put_attr_head(got, 0x0102, "k", 1); /* ids: the fixed form */
	p = mp_put_str(p, "vw", 2);
	ck_assert_uint_eq((size_t)(p - got), sizeof want);
	ck_assert_uint_le((size_t)(p - got), RT_EV_ATTR_SIZE(1, 3 + 2));
	ck_assert_mem_eq(got, want, sizeof want);
}
END_TEST

/* A record that does not fit is left out, flagged, and what was written still
 * frames cleanly up to the end mark. */
START_TEST(overflow_keeps_payload_well_formed)
{
	uint8_t bytes[120];
	char big[200];
	struct rt_ev_buf b;
	struct rt_frame f;
	uint32_t pos = 0, frames = 0;
	int rc;
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = 0;
	rt_ev_buf_init(&b, bytes, sizeof bytes);
	rt_ev_buf_attr_bool(&b, SPAN, "retrace.weave.inferred", 1);
	ck_assert(!b.overflow);
	rt_ev_buf_attr_str(&b, SPAN, "retrace.weave.parent_trace_id", big);
	ck_assert(b.overflow);
	rt_ev_buf_attr_double(&b, SPAN, "c", 0.5); /* still fits */
	rt_ev_buf_end(&b);
	ck_assert_uint_le(b.len, sizeof bytes);
	while ((rc = rt_frame_next(b.data, (uint32_t)b.len, &pos, &f)) == RT_FRAME_OK)
		frames++;
	ck_assert_int_eq(rc, RT_FRAME_END);
	ck_assert_uint_eq(frames, 2);
	/* Room for the end mark is kept by every record: 68 bytes hold the 39 of
	 * the first record, and the second (26, bounded at 28) would leave no room
	 * for the mark. */
	rt_ev_buf_init(&b, bytes, 68);
	rt_ev_buf_attr_bool(&b, SPAN, "retrace.weave.inferred", 1);
	ck_assert_uint_eq(b.len, 39);
	rt_ev_buf_attr_double(&b, SPAN, "c", 0.5);
	ck_assert(b.overflow);
	rt_ev_buf_end(&b);
	ck_assert_uint_le(b.len, 68);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("weave_event_put");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, link_events_decode);
	tcase_add_test(tc, attr_bytes);
	tcase_add_test(tc, overflow_keeps_payload_well_formed);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
