/*
 * daemon/json.c — JSON string literals (see json.h).
 *
 * The input is scanned once: runs of bytes that need no escape (well-formed
 * UTF-8 at or above 0x20, not '"' or '\\') go to the sink in one call each;
 * every other byte is written as its escape, or as U+FFFD when it does not
 * start a well-formed UTF-8 sequence.
 */
#include "json.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

size_t rt_utf8_seq_len(const unsigned char *p, size_t left)
{
	unsigned char c = p[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		return left >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
	if (c >= 0xE0 && c <= 0xEF) {
		unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
		return left >= 3 && p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 ? 3 : 0;
	}
	if (c >= 0xF0 && c <= 0xF4) {
		unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
		return left >= 4 && p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 &&
			(p[3] & 0xC0) == 0x80 ? 4 : 0;
	}
	return 0;
}

/* The escape of byte c that starts no plain run (n: its UTF-8 length, 0 if none). */
static void put_escape(rt_json_sink put, void *ctx, unsigned char c, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	char u[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
	if (!n) {
		put(ctx, "\xEF\xBF\xBD", 3); /* U+FFFD for a stray byte */
		return;
	}
	switch (c) {
	case '"': put(ctx, "\\\"", 2); return;
	case '\\': put(ctx, "\\\\", 2); return;
	case '\n': put(ctx, "\\n", 2); return;
	case '\t': put(ctx, "\\t", 2); return;
	case '\r': put(ctx, "\\r", 2); return;
	case '\b': put(ctx, "\\b", 2); return;
	case '\f': put(ctx, "\\f", 2); return;
	default: put(ctx, u, sizeof u); return;
	}
}

void rt_json_put_string(rt_json_sink put, void *ctx, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t left = strlen((const char *)p), run = 0;
	put(ctx, "\"", 1);
	while (left) {
		size_t n = rt_utf8_seq_len(p + run, left);
		unsigned char c = p[run];
		if (n && c >= 0x20 && c != '"' && c != '\\') {
			run += n; /* plain text: copied in runs */
			left -= n;
			continue;
		}
		if (run)
			put(ctx, (const char *)p, run);
		p += run;
		run = 0;
		put_escape(put, ctx, c, n);
		p++;
		left--;
	}
	if (run)
		put(ctx, (const char *)p, run);
	put(ctx, "\"", 1);
}

static void file_sink(void *ctx, const char *p, size_t n)
{
	fwrite(p, 1, n, ctx);
}

void rt_json_fput_string(FILE *f, const char *s)
{
	rt_json_put_string(file_sink, f, s);
}

void rt_sink_printf(rt_json_sink put, void *ctx, const char *fmt, ...)
{
	char tmp[256], *big;
	va_list ap, again;
	int n;
	va_start(ap, fmt);
	va_copy(again, ap);
	n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < sizeof tmp) {
		put(ctx, tmp, (size_t)n);
	} else if (n > 0 && (big = malloc((size_t)n + 1)) != NULL) {
		if (vsnprintf(big, (size_t)n + 1, fmt, again) == n)
			put(ctx, big, (size_t)n);
		free(big);
	}
	va_end(again);
}
