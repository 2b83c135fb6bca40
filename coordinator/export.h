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
 *   - The writers append to a growable buffer; nothing is written on error.
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

/* Append the traces in `fmt` to `out` (one document for all of them). Returns 0
 * or RT_WIRE_E_NOMEM. */
int rt_export_write(enum rt_export_format fmt, const struct rt_decoded_trace *traces,
		    size_t n, struct rt_wire_buf *out);

struct rt_push_options {
	unsigned attempts;     /* tries in all (default 3) */
	unsigned backoff_ms;   /* wait before the 2nd try, doubled after (default 200) */
	unsigned timeout_ms;   /* per attempt (default 5000) */
};

/*
 * POST `body` (OTLP/JSON) to `url` (http://host:port/path; a URL without a
 * path gets /v1/traces) with Content-Type application/json. Retries on
 * connection errors and on 429/502/503/504; any other non-2xx status is a
 * refusal and is not retried. Returns 0 on a 2xx answer, else -1 with a message
 * naming the URL and the status or error in `err`.
 */
int rt_export_push(const char *url, const void *body, size_t len,
		   const struct rt_push_options *opt, char *err, size_t errlen);

#endif
