/*
 * evgen.h — a test-side encoder of tracer events (shm/events.h) framed into
 * fixed-size buffers (shm/frame.h), for the decoder's tests.
 *
 * Written from the format documents, independently of the client library (its
 * msgpack is hand-written, not msgpack-c's packer), so a misreading of the
 * format on either side shows up as a failed test instead of cancelling out.
 *
 * Times: tests speak in nanosecond offsets from EG_BASE_NS; each agent has its
 * own TSC calibration and turns offsets into its own ticks. Offsets that are
 * multiples of 256 ns convert back exactly (the wire's tick->ns conversion goes
 * through a double, whose step at today's Unix ns is 256).
 */
#ifndef RETRACE_TESTS_EVGEN_H
#define RETRACE_TESTS_EVGEN_H

#include <stddef.h>
#include <stdint.h>

#include "wire/wire.h"

#define EG_BASE_NS 1700000000000000000ull /* a multiple of 256 */
#define EG_T(n) ((uint64_t)(n) * 256u)    /* an offset that converts exactly */
#define EG_MAX_AGENTS 8
#define EG_MAX_STREAMS 64

struct eg_buf {
	uint32_t agent, pid, tid, seq, flags;
	uint64_t first_tick;
	uint8_t *data; /* payload_size bytes allocated */
	uint32_t len;
};

struct eg_agent {
	uint32_t id;
	uint64_t tsc_hz, ref_tick, ref_unix_ns;
};

struct eg;

struct eg_stream {
	struct eg *g;
	uint32_t agent, pid, tid;
	uint32_t next_seq;
	long cur;       /* index of the open buffer in g->bufs, -1 = none */
	uint64_t now;   /* offset of the latest event (the next buffer's first_tick) */
};

/* A record under construction (hand-written msgpack). */
struct eg_rec {
	uint8_t *p;
	size_t len, cap;
};

struct eg {
	uint64_t trace_hi, trace_lo;
	uint32_t payload;   /* bytes of one buffer's payload */
	int ts_frames;      /* give every other unsplit frame a TS tick */
	int end_marks;      /* count the zero end mark in a buffer's len when it fits */
	struct eg_buf *bufs;
	size_t n_bufs, cap_bufs;
	struct eg_agent agents[EG_MAX_AGENTS];
	int n_agents;
	struct eg_stream streams[EG_MAX_STREAMS];
	int n_streams;
	uint64_t frames;
	/* where the last record's first payload byte went */
	size_t last_buf;
	uint32_t last_off;
};

void eg_init(struct eg *g, uint64_t trace_hi, uint64_t trace_lo, uint32_t payload);
void eg_free(struct eg *g);
/* Agent `id` with its own calibration: tsc_hz, and the tick/ns reference pair
 * (ref_ns_off is an offset from EG_BASE_NS, a multiple of 256). */
void eg_agent(struct eg *g, uint32_t id, uint64_t tsc_hz, uint64_t ref_tick, uint64_t ref_ns_off);
struct eg_stream *eg_stream(struct eg *g, uint32_t agent, uint32_t pid, uint32_t tid);
uint64_t eg_tick(const struct eg *g, uint32_t agent, uint64_t off_ns);
/* Seal every open buffer (the last one of each stream gets RT_BUF_LAST). */
void eg_finish(struct eg *g);

/* msgpack pieces */
void eg_rec_reset(struct eg_rec *r);
void eg_rec_free(struct eg_rec *r);
void eg_rec_byte(struct eg_rec *r, uint8_t b);
void eg_rec_u64_fixed(struct eg_rec *r, uint64_t v); /* 0xcf + 8 bytes, like the client */
void eg_rec_uint(struct eg_rec *r, uint64_t v);      /* smallest form */
void eg_rec_int(struct eg_rec *r, int64_t v);        /* smallest form */
void eg_rec_f64(struct eg_rec *r, double v);
void eg_rec_str(struct eg_rec *r, const char *s);
void eg_rec_strn(struct eg_rec *r, const char *s, size_t n);
void eg_rec_bool(struct eg_rec *r, int v);
void eg_rec_nil(struct eg_rec *r);
void eg_rec_map(struct eg_rec *r, uint32_t n);

/* Frame a whole record into the stream's buffers, split as needed. */
void eg_emit(struct eg_stream *s, const uint8_t *rec, size_t len);

/* Events. Times are offsets from EG_BASE_NS. */
enum eg_arg_type { EG_STR, EG_INT, EG_UINT, EG_DBL, EG_BOOL, EG_NIL };
struct eg_arg {
	enum eg_arg_type t;
	const char *s;
	int64_t i;
	uint64_t u;
	double d;
};
#define EG_S(x) ((struct eg_arg){ .t = EG_STR, .s = (x) })
#define EG_I(x) ((struct eg_arg){ .t = EG_INT, .i = (x) })
#define EG_U(x) ((struct eg_arg){ .t = EG_UINT, .u = (x) })
#define EG_D(x) ((struct eg_arg){ .t = EG_DBL, .d = (x) })
#define EG_B(x) ((struct eg_arg){ .t = EG_BOOL, .i = (x) })
#define EG_NIL ((struct eg_arg){ .t = EG_NIL })

void eg_span_start(struct eg_stream *s, uint64_t id, uint64_t parent, uint8_t kind, uint64_t t,
		   const char *name);
void eg_span_end(struct eg_stream *s, uint64_t id, uint64_t t, uint8_t status, int64_t code,
		 const char *message);
void eg_attr(struct eg_stream *s, uint64_t span, const char *key, struct eg_arg v);
void eg_log(struct eg_stream *s, uint64_t span, uint64_t t, uint8_t level, uint64_t template_id,
	    const struct eg_arg *args, int n);
void eg_log_text(struct eg_stream *s, uint64_t span, uint64_t t, uint8_t level, const char *text);
void eg_template(struct eg_stream *s, const char *text); /* id = FNV-1a of text */
void eg_resource(struct eg_stream *s, const char *service, const char *host);
void eg_raw(struct eg_stream *s, const void *bytes, size_t len);
uint64_t eg_template_id(const char *text);

/*
 * A slice of agent `agent` holding g->bufs[idx[0..n)] (all of the agent's
 * buffers in order when idx is NULL). `bufs` must have room for n (or all)
 * entries; the slice points into g and bufs.
 */
void eg_slice(const struct eg *g, uint32_t agent, const size_t *idx, size_t n,
	      struct rt_wire_slice *out, struct rt_wire_slice_buffer *bufs);
/* The same, encoded as a SLICE message appended to out. */
int eg_slice_msg(const struct eg *g, uint32_t agent, const size_t *idx, size_t n,
		 struct rt_wire_buf *out);

#endif
