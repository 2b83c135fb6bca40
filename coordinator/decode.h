/*
 * decode.h — collected slices back into spans (the OpenTelemetry data model).
 *
 * Owns: turning a trace's SLICE messages (each a host's buffers, as stored) into
 * records (shm/frame.h) and tracer events (shm/events.h), and those into spans
 * with attributes, log events and resources. Decoding happens on read: the store
 * keeps the raw slices only (docs/coordinator.md says why).
 *
 * Promises:
 *   - Untrusted input: a decoder never reads outside what it was given, never
 *     crashes on any bytes, and skips + counts what it cannot decode; every span
 *     that was not damaged comes out intact.
 *   - Buffers may arrive in any order and from several slices of the same agent;
 *     they are grouped per writer stream (agent, pid, tid: one begin..end run,
 *     shm/pool.h), ordered by sequence and deduplicated (a re-sent copy repeats
 *     its key; a copy with other bytes is counted as a conflict). A missing
 *     sequence number is a gap: records cut by it are dropped (counted) and
 *     every span with events on both sides of it, or open across it, is marked
 *     RT_SPAN_PARTIAL; nothing is invented.
 *   - A span whose start (or end) event was never seen is still output, flagged
 *     RT_SPAN_NO_START (or RT_SPAN_NO_END) and RT_SPAN_PARTIAL; its missing time
 *     is set to the one it has (zero duration).
 *   - A CLIENT (or PRODUCER) span that no decoded SERVER or CONSUMER span has as
 *     its parent is flagged RT_SPAN_UNMATCHED and counted, unless it carries
 *     peer.untraced=true: the other side of a call is missing.
 *   - rt_decode_complete() says whether nothing of the above was found.
 *   - Output is deterministic: spans ordered by (start_ns, span_id); a span's logs
 *     by time; attributes in the order written.
 *   - All strings and arrays of an rt_decoded_trace live in its own arena and stay
 *     valid until rt_decoded_trace_free().
 */
#ifndef RETRACE_COORDINATOR_DECODE_H
#define RETRACE_COORDINATOR_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

enum rt_value_type {
	RT_VAL_NONE = 0, /* nil (a log argument only) */
	RT_VAL_STR = 1,
	RT_VAL_INT = 2,
	RT_VAL_DOUBLE = 3,
	RT_VAL_BOOL = 4,
};

struct rt_value {
	uint8_t type; /* enum rt_value_type */
	union {
		const char *s;
		int64_t i;
		double d;
		int b;
	} u;
};

struct rt_attr {
	const char *key;
	struct rt_value value;
};

/* A log event (from retrace_log / retrace_log_text). */
struct rt_log_event {
	uint64_t time_ns;         /* Unix ns */
	uint8_t level;            /* enum retrace_log_level: 0 DEBUG .. 3 ERROR */
	uint64_t template_id;     /* 0 = free text */
	const char *template_text; /* the format; NULL for free text or if no
				      TEMPLATE event was found (flag below) */
	const char *body;         /* rendered message: the format with its arguments
				     substituted, or the free text */
	uint32_t body_len;        /* strlen(body), known from the record */
	struct rt_value *args;    /* the arguments as recorded */
	uint32_t n_args;
	uint32_t flags;           /* RT_LOG_* */
};
#define RT_LOG_TEMPLATE_MISSING 0x1u /* body is "<template 0x...>" + args */
#define RT_DECODE_MAX_BODY 16384u    /* a rendered body is cut at this many bytes */

struct rt_resource {
	uint32_t agent_id;
	uint32_t pid;
	const char *service;      /* service.name, "unknown_service" if absent */
	const char *host;         /* host.name, "" if absent */
	struct rt_attr *attrs;    /* every resource attribute, service/host included */
	uint32_t n_attrs;
};

#define RT_SPAN_PARTIAL 0x1u  /* a gap in its writer stream touched it */
#define RT_SPAN_NO_START 0x2u /* only its end (and maybe attrs/logs) were seen */
#define RT_SPAN_NO_END 0x4u   /* never ended in the data we have */
#define RT_SPAN_UNMATCHED 0x8u /* a CLIENT (PRODUCER) span no decoded SERVER or
				  CONSUMER span names as its parent: the callee's
				  side of the call never arrived. Exempt: a span
				  with peer.untraced = true (bool, or the string
				  "true"; RETRACE_ATTR_PEER_UNTRACED in tracer.h),
				  which called a peer that is not traced */

struct rt_span {
	uint64_t trace_hi, trace_lo;
	uint64_t span_id;
	uint64_t parent_id;       /* 0 = root */
	int32_t parent;           /* index of the parent in the trace's spans, -1 if
				     root or the parent is not in the trace */
	const char *name;
	uint8_t kind;             /* enum retrace_span_kind (0 = unspecified); a
				     value above 5 is kept as recorded (unknown:
				     exporters write unspecified) */
	uint64_t start_ns, end_ns; /* Unix ns */
	uint8_t status;           /* enum retrace_span_status */
	int64_t status_code;
	const char *status_message; /* "" unless ERROR */
	struct rt_attr *attrs;
	uint32_t n_attrs;
	struct rt_log_event *logs;
	uint32_t n_logs;
	uint32_t resource;        /* index into the trace's resources */
	uint32_t agent_id;        /* host (agent) it was recorded on */
	uint32_t pid, tid;        /* writer: process, writer-stream id (shm/pool.h) */
	uint32_t flags;           /* RT_SPAN_* */
	uint16_t adapt_p16;       /* the adaptive span policy's keep probability
				     × 65535 (RT_SPAN_P16_ALWAYS: recorded by
				     rule or no policy); its weight is
				     65535 / adapt_p16 (docs/adaptive.md) */
	int64_t dropped_ns;       /* time of adaptively dropped descendants that
				     attached to this span, to take off its
				     exclusive time (may be negative; see
				     rt_decode_self_times) */
};
#define RT_SPAN_P16_ALWAYS 0xFFFFu /* = RT_ADAPT_P16_ALWAYS */

struct rt_decode_stats {
	uint64_t slices;
	uint64_t buffers;
	uint64_t duplicate_buffers;  /* same (agent, pid, tid, seq) seen again:
					dropped (a re-sent copy) */
	uint64_t conflicting_buffers; /* of those, copies whose bytes differ from
					 the kept one: two different buffers
					 claimed one key, so data was lost */
	uint64_t gaps;               /* missing sequence numbers, per stream */
	uint64_t records;            /* whole records rebuilt */
	uint64_t events;             /* tracer events decoded */
	uint64_t raw_records;        /* records that are not tracer events */
	uint64_t corrupt_frames;     /* frame headers that made no sense (rest of
					that buffer skipped) */
	uint64_t corrupt_events;     /* 0xC1 records whose fields did not decode */
	uint64_t truncated_records;  /* split records cut by a gap */
	uint64_t orphan_chunks;      /* continuation chunks with no start */
	uint64_t missing_templates;  /* LOGs whose TEMPLATE was not found */
	uint64_t orphan_events;      /* ATTR/LOG/END naming a span never started:
					the span is synthesised (NO_START) */
	uint64_t partial_spans;
	uint64_t foreign_slices;     /* slices of another trace, ignored */
	uint64_t duplicate_spans;    /* a second SPAN_START of one span id (the
					first one is kept) */
	uint64_t unmatched_client_spans; /* spans flagged RT_SPAN_UNMATCHED */
};

/*
 * 1 if the decode shows a structurally complete trace: no gap, no partial span,
 * no orphan event or chunk, no corrupt frame or event, no truncated record, no
 * missing template, no duplicate buffer that differed from its first copy and
 * no unmatched client span. Identical re-sent buffers, raw records, foreign
 * slices and duplicate span ids do not count against it. It says nothing about
 * hosts that delivered nothing at all (the collector's traversal knows those).
 */
int rt_decode_complete(const struct rt_decode_stats *st);

/* A named trigger the trace fired (a TRIGGER event, shm/events.h). */
#define RT_DECODE_MAX_TRIGGER_NAMES 8u /* more distinct ones are ignored */
struct rt_trigger_name {
	uint32_t id;
	const char *name;
};

struct rt_decoded_trace {
	uint64_t trace_hi, trace_lo;
	struct rt_span *spans;
	uint32_t n_spans;
	struct rt_resource *resources;
	uint32_t n_resources;
	struct rt_log_event *loose_logs; /* logs written outside any span */
	uint32_t n_loose_logs;
	uint32_t *agents;                /* agents that delivered data, ascending */
	uint32_t n_agents;
	struct rt_trigger_name trigger_names[RT_DECODE_MAX_TRIGGER_NAMES]; /* by first seen */
	uint32_t n_trigger_names;
	struct rt_decode_stats st;
	void *arena;                     /* owner of everything above */
};

/* An incremental decoder: add slices in any order, then finish. */
struct rt_decoder;

struct rt_decoder *rt_decoder_new(uint64_t trace_hi, uint64_t trace_lo);
/* Add one slice (decoded SLICE message); its buffers are copied. A slice of
 * another trace is ignored and counted. Returns 0 or -1 (out of memory). */
int rt_decoder_add_slice(struct rt_decoder *d, const struct rt_wire_slice *slice);
/* Add one raw SLICE message as stored (decoded with the wire decoder first;
 * a message that does not decode is counted in corrupt_frames). */
int rt_decoder_add_message(struct rt_decoder *d, const void *msg, size_t len);
/* Build the trace. Returns 0 or -1 (out of memory). The decoder is freed. */
int rt_decoder_finish(struct rt_decoder *d, struct rt_decoded_trace *out);

struct rt_store;
/* Decode trace (hi, lo) from the slices `s` holds (decode_stored.c): 0, or -1
 * with a sentence in err (a store error, out of memory). */
int rt_decode_stored(struct rt_store *s, uint64_t hi, uint64_t lo, struct rt_decoded_trace *out,
		     char *err, size_t errlen);
void rt_decoder_free(struct rt_decoder *d);

void rt_decoded_trace_free(struct rt_decoded_trace *t);

/*
 * Each span's self time (ns): its duration minus its decoded children's
 * durations minus dropped_ns (the adaptive policy's dropped descendants), at
 * least 0; a child from another process whose parent is no CLIENT/PRODUCER
 * span is not subtracted when it is a SERVER/CONSUMER span or the parent has
 * dropped time (it ran inside a dropped call, which dropped_ns counts whole). self_ns has n_spans entries. What the adaptive learner needs: with
 * dropped spans' time left in their ancestor, the ancestor takes the blame
 * for their variance (docs/adaptive.md).
 */
void rt_decode_self_times(const struct rt_decoded_trace *t, int64_t *self_ns);

#endif
