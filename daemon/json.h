/*
 * daemon/json.h — the one JSON string writer of the tree.
 *
 * Owns: turning a C string into a JSON string literal that is always valid
 * JSON and valid UTF-8, whatever bytes it is given (service names, span names,
 * log bodies and attribute values all come from services, and are untrusted):
 * quotes and backslashes escaped, control bytes as \b \f \n \r \t or \u00XX,
 * well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, nothing past
 * U+10FFFF) passed through, and every other byte replaced by U+FFFD. The
 * writers that use it — the OTLP/Zipkin exporter (coordinator/export.c), the
 * status figures (figures.c) and the CLI's JSON listings (tools/retrace) — differ
 * only in where the bytes go, so the writer takes a sink. Also: formatted
 * output through the same sink (rt_sink_printf).
 */
#ifndef RETRACE_DAEMON_JSON_H
#define RETRACE_DAEMON_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Where the bytes go: called with runs of output. */
typedef void (*rt_json_sink)(void *ctx, const char *p, size_t n);

/* printf(fmt, ...) through put(ctx, ...), whole however long (a scratch on the
 * stack for short output, one allocation for longer); nothing on an encoding
 * error or when out of memory. The one formatted append of the writers that
 * go through a sink (the exporter's JSON, the decoder's log bodies). */
void rt_sink_printf(rt_json_sink put, void *ctx, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Write s (NULL: "") as a quoted JSON string through put(ctx, ...). */
void rt_json_put_string(rt_json_sink put, void *ctx, const char *s);

/* The same, to a stdio stream. */
void rt_json_fput_string(FILE *f, const char *s);

/* Length of the well-formed UTF-8 sequence at p (`left` bytes readable), or 0
 * if the byte at p does not start one. */
size_t rt_utf8_seq_len(const unsigned char *p, size_t left);

#endif
