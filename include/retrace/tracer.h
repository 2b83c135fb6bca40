/*
 * tracer.h — spans, attributes and logs on top of libretrace (retrace.h).
 *
 * What it owns: the per-thread span stack, the process resource attributes and
 * the encoding of span/log events into the current trace's buffers (constants in
 * retrace/abi.h). What it promises:
 *   - Every call writes one compact msgpack event straight into the thread's
 *     buffer through retrace_reserve/commit: no lock, no allocation, no system
 *     call after the thread's first use. Outside a trace (or unsampled) the calls
 *     cost a few nanoseconds and record nothing.
 *   - Spans nest per thread: retrace_span_start pushes, retrace_span_end* pops.
 *     The current span is what retrace_serialize() sends as the parent of the next
 *     hop, and a trace begun from an incoming context (retrace_deserialize) makes
 *     the remote span the parent of its first span. A span is ended on the thread
 *     that started it; retrace_detach/attach carry the current span over as the
 *     parent of the next span started on the other thread.
 *   - Log templates are recoverable from the trace data alone: the first use of a
 *     template in a trace (per writer) also writes the template text once.
 *   - Strings longer than RETRACE_EV_MAX_STR bytes are cut; calls beyond the
 *     stack depth or unmatched ends are counted (retrace_tracer_stats), never
 *     fatal.
 */
#ifndef RETRACE_TRACER_H
#define RETRACE_TRACER_H

#include <stdarg.h>
#include <stdint.h>

#include "retrace/retrace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* enum retrace_span_kind and enum retrace_span_status are in retrace/abi.h. */

enum retrace_log_level {
	RETRACE_LOG_DEBUG = 0,
	RETRACE_LOG_INFO = 1,
	RETRACE_LOG_WARN = 2,
	RETRACE_LOG_ERROR = 3,
};

#define RETRACE_SPAN_DEPTH 64 /* nesting kept per thread */

/* ------------------------------------------------------------ resource ---- */

/*
 * Process resource attributes, written once into every writer stream of every
 * trace so each host's slice describes itself. service.name defaults to
 * $RETRACE_SERVICE or the program name; host.name and process.pid are filled
 * in. Set them before the first traced request; later changes apply to traces
 * begun afterwards. Not thread-safe against concurrent setters. Returns
 * RETRACE_OK, or RETRACE_E_INVAL (NULL / too long) or RETRACE_E_FULL (more than
 * RETRACE_EV_MAX_RESOURCE attributes).
 */
int retrace_set_service_name(const char *name);
int retrace_resource_str(const char *key, const char *value);
int retrace_resource_int(const char *key, int64_t value);

/* --------------------------------------------------------------- spans ---- */

/*
 * Start a span named `name` (copied) as a child of the thread's current span (or
 * of the incoming remote parent, or as a root). Returns its id (never 0), or 0
 * when the thread is not recording a trace (then nothing changes).
 */
uint64_t retrace_span_start(const char *name, enum retrace_span_kind kind);

/* Same with an explicit parent span id (0 = root). */
uint64_t retrace_span_start_child(const char *name, enum retrace_span_kind kind,
				  uint64_t parent_span_id);

/* End the current span with status UNSET / OK / ERROR (code and message, which
 * may be NULL, copied). An end with no span open is counted and ignored. */
void retrace_span_end(void);
void retrace_span_end_ok(void);
void retrace_span_end_error(int64_t code, const char *message);

/* The current span's id (0 if none was started in this trace). */
uint64_t retrace_current_span(void);

/* Attributes of the current span (keys and strings copied). */
void retrace_attr_str(const char *key, const char *value);
void retrace_attr_int(const char *key, int64_t value);
void retrace_attr_double(const char *key, double value);
void retrace_attr_bool(const char *key, int value);

/*
 * Set on a CLIENT or PRODUCER span, with retrace_attr_bool(RETRACE_ATTR_PEER_UNTRACED,
 * 1), when the peer it calls is not traced with retrace (a database, a third-party
 * API): the decoder then expects no SERVER/CONSUMER span under it and does not
 * flag the span as unmatched (the coordinator's RT_SPAN_UNMATCHED), which would
 * keep the trace from being shown complete.
 */
#define RETRACE_ATTR_PEER_UNTRACED "peer.untraced"

/* ---------------------------------------------------------------- logs ---- */

/*
 * A log call site. retrace_log() declares one static site per call; the first
 * call parses the format once (argument types from the printf conversions) and
 * computes the template id; later calls only encode the arguments.
 * Supported conversions: d i u o x X c (with hh h l ll j z t), e E f F g G a A
 * (with L), s, p, %%. `*` width/precision consume an int argument, recorded as
 * such. A format with an unsupported conversion (%n, %ls...) or more than
 * RETRACE_EV_MAX_ARGS arguments is recorded as free text of the format itself.
 * Arguments are recorded as: d i c -> int (c: the character code), u o x X p ->
 * unsigned int, floating -> float64, s -> str (nil for NULL), * -> int.
 */
struct retrace_log_site {
	const char *format;
	uint64_t template_id;              /* 0 until parsed */
	uint8_t nargs;
	uint8_t bad;                       /* unsupported format */
	uint8_t types[RETRACE_EV_MAX_ARGS]; /* argument kinds, the tracer's own codes */
};

void retrace_log_at(struct retrace_log_site *site, enum retrace_log_level level, ...);
void retrace_log_atv(struct retrace_log_site *site, enum retrace_log_level level,
		     va_list ap);

/* Type-checks the arguments against the format at compile time; never called. */
static inline void retrace_log_check_(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), unused));
static inline void retrace_log_check_(const char *fmt, ...)
{
	(void)fmt;
}

/*
 * retrace_log(level, "charged %s %d cents", user, amount): a templated log under
 * the current span. The format must be a string literal.
 */
#define retrace_log(level, fmt, ...)                                              \
	do {                                                                      \
		static struct retrace_log_site retrace_site_ = { fmt, 0, 0, 0, {0} }; \
		if (0)                                                            \
			retrace_log_check_(fmt, ##__VA_ARGS__);                   \
		retrace_log_at(&retrace_site_, (level), ##__VA_ARGS__);           \
	} while (0)

/* A free-text log with no template (selection mines templates for these). */
void retrace_log_text(enum retrace_log_level level, const char *text);

/* ------------------------------------------------------------ counters ---- */

struct retrace_tracer_stats {
	uint64_t spans_started;
	uint64_t spans_too_deep;     /* started beyond RETRACE_SPAN_DEPTH (not nested) */
	uint64_t ends_unmatched;     /* end with no span open */
	uint64_t logs;
	uint64_t templates_written;  /* TEMPLATE events (first use per trace) */
	uint64_t strings_cut;        /* strings longer than RETRACE_EV_MAX_STR */
	uint64_t events_too_big;     /* events larger than a buffer: dropped */
	/* adaptive span policy (the pool's policy table, docs/adaptive.md) */
	uint64_t spans_dropped;      /* span starts the table said not to record */
	uint64_t spans_recovered;    /* of those, ended in error: recorded at the end */
	uint64_t policy_unstable;    /* lookups that met a table being rewritten
					twice: recorded */
};

/* This thread's counters. */
void retrace_tracer_stats(struct retrace_tracer_stats *out);

#ifdef __cplusplus
}
#endif
#endif
