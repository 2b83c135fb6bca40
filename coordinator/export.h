/*
 * export.h — decoded traces out to the ecosystem's formats.
 *
 * Owns: OTLP/JSON (an ExportTraceServiceRequest, the OpenTelemetry protocol's
 * JSON mapping) and Zipkin v2 JSON (a span list, which Zipkin and Jaeger import)
 * writers for rt_decoded_trace (decode.h), and the push of OTLP/JSON over HTTP
 * to a collector (POST /v1/traces) with retries.
 *
 * Promises:
 *   - Output is valid JSON (every string escaped) and deterministic for a given
 *     input, so golden tests can compare it field by field.
 *   - OTLP/JSON: resourceSpans grouped by resource (agent, pid), one scopeSpans
 *     (scope "retrace"); ids as lowercase hex (traceId 32, spanId 16 chars);
 *     times as decimal strings of Unix ns; kind and status.code as the OTLP enum
 *     integers; attributes as typed AnyValue ({"stringValue"}, {"intValue": "n"}
 *     as a string, {"doubleValue"}, {"boolValue"}); logs as span events (name =
 *     the rendered body; attributes log.severity, log.template, log.template_id,
 *     log.args.N); retrace's own facts as attributes retrace.agent_id and,
 *     when set, retrace.partial = true.
 *   - Zipkin v2: one JSON array of spans; traceId 32 hex, id 16, parentId when
 *     not a root; timestamp/duration in microseconds; kind SERVER/CLIENT/
 *     PRODUCER/CONSUMER (omitted for internal); localEndpoint.serviceName;
 *     tags as strings (with "error" = message for an ERROR status, and
 *     otel.status_code); annotations for logs ("LEVEL body").
 *   - Values OTLP would refuse are mended and counted (rt_export_stats): an
 *     empty span name becomes "(unnamed)", an empty log body (event name)
 *     "(empty)", an attribute with an empty key is dropped; a log argument an
 *     unsigned conversion (%llu, %llx, %p ...) read that is above INT64_MAX is
 *     its unsigned decimal text in a stringValue (intValue is an int64).
 *   - Zipkin times are all floor(ns / 1000): duration = floor(end) -
 *     floor(start) (at least 1), annotations clamped into [timestamp,
 *     timestamp + duration]; two identical annotations (same µs and value) of
 *     one span are told apart with " (2)", " (3)" (Zipkin keeps only one).
 *   - The writers append to a growable buffer; nothing is written on error.
 *   - The push (rt_export_push_traces) sends the traces in OTLP/JSON requests
 *     of at most max_request_bytes each (uncompressed; every span exactly
 *     once), gzip'd, with a User-Agent; it honours Retry-After (bounded),
 *     quotes the collector's error body and reports partialSuccess rejections.
 */
#ifndef RETRACE_COORDINATOR_EXPORT_H
#define RETRACE_COORDINATOR_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "decode.h"
#include "wire.h"

enum rt_export_format {
	RT_EXPORT_OTLP_JSON = 1,
	RT_EXPORT_ZIPKIN = 2,
};

/* Parse "otlp-json" / "zipkin"; 0 if unknown. */
enum rt_export_format rt_export_format_parse(const char *name);

/* What the writers mended on the way out (added to by each write). */
struct rt_export_stats {
	uint64_t unnamed_spans;       /* empty span name -> "(unnamed)" */
	uint64_t unnamed_events;      /* empty log body -> event name "(empty)" (OTLP) */
	uint64_t empty_keys_dropped;  /* attributes / tags with an empty key */
	uint64_t unsigned_as_string;  /* unsigned log arguments > INT64_MAX (OTLP) */
	uint64_t annotations_clamped; /* Zipkin annotations moved into their span */
	uint64_t annotations_renamed; /* Zipkin annotations given " (N)" */
};

/* Append the traces in `fmt` to `out` (one document for all of them). Returns 0
 * or RT_WIRE_E_NOMEM. */
int rt_export_write(enum rt_export_format fmt, const struct rt_decoded_trace *traces,
		    size_t n, struct rt_wire_buf *out);
/* The same, adding what was mended to *st (may be NULL). */
int rt_export_write_stats(enum rt_export_format fmt, const struct rt_decoded_trace *traces,
			  size_t n, struct rt_wire_buf *out, struct rt_export_stats *st);

#define RT_PUSH_DEFAULT_MAX_REQUEST_BYTES (4u << 20) /* the Collector refuses > 20 MiB */
#define RT_PUSH_DEFAULT_MAX_RETRY_AFTER_MS 30000u
#define RT_PUSH_ERROR_BODY_MAX 300                   /* bytes of an error body quoted */

struct rt_push_options {
	unsigned attempts;     /* tries per request in all (default 3) */
	unsigned backoff_ms;   /* wait before the 2nd try, doubled after (default 200) */
	unsigned timeout_ms;   /* per attempt (default 5000) */
	size_t max_request_bytes; /* uncompressed JSON per request (default 4 MiB) */
	unsigned max_retry_after_ms; /* longest Retry-After honoured (default 30 s) */
	int no_gzip;           /* send the JSON as is (default: gzip) */
};

struct rt_push_result {
	uint64_t requests;       /* requests the collector accepted (2xx) */
	uint64_t spans_sent;     /* spans in those (rt_export_push_traces) */
	uint64_t bytes;          /* JSON bytes in those */
	uint64_t bytes_sent;     /* bytes on the wire (gzip'd) */
	uint64_t partial_answers; /* 2xx answers carrying a partialSuccess */
	uint64_t rejected_spans; /* their rejectedSpans, summed */
	char message[256];       /* the first partialSuccess errorMessage, sanitised */
	struct rt_export_stats mended; /* what the writer mended (rt_export_push_traces) */
};

/* "retrace/VERSION", the User-Agent of the push. */
const char *rt_export_user_agent(void);

/*
 * POST the traces as OTLP/JSON to `url` (http://host:port/path; a URL without a
 * path gets /v1/traces): requests of at most opt->max_request_bytes of JSON
 * (a single span larger than that goes alone), each gzip'd (Content-Encoding:
 * gzip) unless opt->no_gzip, with Content-Type application/json and User-Agent
 * rt_export_user_agent(). Each request is retried on connection errors and on
 * 429/502/503/504, waiting the answer's Retry-After (429/503; at most
 * max_retry_after_ms) or else the doubling backoff; any other non-2xx status is
 * a refusal and is not retried. The first failure stops the push. Returns 0
 * when every request got a 2xx answer (partialSuccess rejections are counted
 * in *res, which may be NULL), else -1 with a message in `err` naming the URL,
 * the status or error, the start of the collector's answer (sanitised) and how
 * many earlier requests were accepted.
 */
int rt_export_push_traces(const char *url, const struct rt_decoded_trace *traces, size_t n,
			  const struct rt_push_options *opt, struct rt_push_result *res,
			  char *err, size_t errlen);

/* The same for one ready document `body` (OTLP/JSON), sent whole as one request
 * (max_request_bytes does not apply). */
int rt_export_push(const char *url, const void *body, size_t len,
		   const struct rt_push_options *opt, struct rt_push_result *res, char *err,
		   size_t errlen);

#endif
