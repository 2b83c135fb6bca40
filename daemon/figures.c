/*
 * daemon/figures.c — one writer, two renderings.
 *
 * Text: "section:" lines then "  key   value" lines padded to a column. JSON:
 * {"section":{"key":value,...},...}. Every write goes through put(), which
 * stops at the capacity instead of overflowing; strings through json.h.
 */
#include "figures.h"
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void put(struct rt_figures *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct rt_figures *w, const char *fmt, ...)
{
	va_list ap;
	int n;
	if (w->cap == 0 || w->len >= w->cap - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(w->out + w->len, w->cap - w->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		w->len += (size_t)n < w->cap - w->len ? (size_t)n : w->cap - w->len - 1;
}

void rt_fig_init(struct rt_figures *w, char *out, size_t cap, int json)
{
	w->out = out;
	w->cap = cap;
	w->len = 0;
	w->json = json;
	w->first = 1;
	w->sections = 0;
	if (cap)
		out[0] = 0;
}

void rt_fig_section(struct rt_figures *w, const char *name)
{
	if (w->json)
		put(w, "%s\"%s\":{", w->sections ? "}," : "{", name);
	else
		put(w, "%s:\n", name);
	w->sections++;
	w->first = 1;
}

static void key(struct rt_figures *w, const char *k)
{
	if (w->json)
		put(w, "%s\"%s\":", w->first ? "" : ",", k);
	else
		put(w, "  %-28s ", k);
	w->first = 0;
}

void rt_fig_u64(struct rt_figures *w, const char *k, uint64_t v)
{
	key(w, k);
	put(w, w->json ? "%llu" : "%llu\n", (unsigned long long)v);
}

void rt_fig_f(struct rt_figures *w, const char *k, double v)
{
	key(w, k);
	put(w, w->json ? "%.3f" : "%.3f\n", v);
}

/* json.h's sink: raw bytes, cut at the capacity like put(). */
static void put_raw(void *ctx, const char *p, size_t n)
{
	struct rt_figures *w = ctx;
	if (w->cap == 0 || w->len >= w->cap - 1)
		return;
	if (n > w->cap - 1 - w->len)
		n = w->cap - 1 - w->len;
	memcpy(w->out + w->len, p, n);
	w->len += n;
	w->out[w->len] = 0;
}

void rt_fig_str(struct rt_figures *w, const char *k, const char *s)
{
	key(w, k);
	if (!w->json) {
		put(w, "%s\n", s);
		return;
	}
	rt_json_put_string(put_raw, w, s);
}

size_t rt_fig_end(struct rt_figures *w)
{
	if (w->json)
		put(w, w->sections ? "}}" : "{}");
	return w->len;
}
