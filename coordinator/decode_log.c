/*
 * coordinator/decode_log.c — log bodies: the recorded arguments substituted
 * into the template's printf conversions (shm/fmt.h parses them, the grammar
 * the client's tracer uses), flags, width, precision and length modifiers
 * honoured, a body cut at RT_DECODE_MAX_BODY.
 */
#include "decode_internal.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "retrace/tracer.h"
#include "shm/fmt.h"
#include "daemon/json.h"

/* ---------------------------------------------------- log rendering ---- */

/* A growable text buffer, cut at RT_DECODE_MAX_BODY bytes. */
struct sbuf {
	char *p;
	size_t len, cap;
	int oom;
};

static void sb_put(struct sbuf *s, const char *text, size_t n)
{
	if (n > RT_DECODE_MAX_BODY - s->len)
		n = RT_DECODE_MAX_BODY - s->len;
	if (!n || s->oom)
		return;
	if (rt_dec_grow(&s->p, &s->cap, s->len + n + 1, 1) != 0) {
		s->oom = 1;
		return;
	}
	memcpy(s->p + s->len, text, n);
	s->len += n;
}

static void sb_puts(struct sbuf *s, const char *text)
{
	sb_put(s, text, strlen(text));
}

static void sb_sink(void *ctx, const char *text, size_t n)
{
	sb_put(ctx, text, n);
}

/* Values are formatted into the body by rt_sink_printf (daemon/json.h) through
 * sb_sink; widths and precisions are clamped by shm/fmt.h. Templates are
 * parsed by shm/fmt.h's grammar, the one the client used to choose which
 * arguments to record. */
#define CONV_MAX_WIDTH RT_FMT_MAX_WIDTH

/* A double as the shortest of %.15g / %.17g that reads back exactly. */
static void sb_double(struct sbuf *s, double d)
{
	char tmp[64];
	snprintf(tmp, sizeof tmp, "%.15g", d);
	if (strtod(tmp, NULL) != d)
		snprintf(tmp, sizeof tmp, "%.17g", d);
	sb_puts(s, tmp);
}

/* A value with no conversion to guide it (missing template, type mismatch). */
static void sb_value(struct sbuf *s, const struct rt_value *v)
{
	switch (v->type) {
	case RT_VAL_STR: sb_puts(s, v->u.s); break;
	case RT_VAL_INT: rt_sink_printf(sb_sink, s, "%lld", (long long)v->u.i); break;
	case RT_VAL_DOUBLE: sb_double(s, v->u.d); break;
	case RT_VAL_BOOL: sb_puts(s, v->u.b ? "true" : "false"); break;
	default: sb_puts(s, "(null)"); break;
	}
}

/* "%<flags><width>.<prec><mod><c>", keeping only the flags in `keep`. */
static void conv_format(const struct rt_fmt_spec *cv, const char *keep, const char *mod, char c,
			char *out, size_t cap)
{
	size_t n = 0, i;
	out[n++] = '%';
	for (i = 0; cv->flags[i]; i++)
		if (strchr(keep, cv->flags[i]))
			out[n++] = cv->flags[i];
	if (cv->width >= 0)
		n += (size_t)snprintf(out + n, cap - n, "%d", cv->width);
	if (cv->prec >= 0)
		n += (size_t)snprintf(out + n, cap - n, ".%d", cv->prec);
	snprintf(out + n, cap - n, "%s%c", mod, c);
}

/* The integer as the C type its length modifier names, as printf would see it. */
static long long as_signed(const struct rt_fmt_spec *cv, int64_t v)
{
	if (cv->len == RT_FMT_LEN_HH)
		return (signed char)v;
	if (cv->len == RT_FMT_LEN_H)
		return (short)v;
	if (cv->len == RT_FMT_LEN_NONE)
		return (int)v;
	return (long long)v;
}

static unsigned long long as_unsigned(const struct rt_fmt_spec *cv, int64_t v)
{
	if (cv->len == RT_FMT_LEN_HH)
		return (unsigned char)v;
	if (cv->len == RT_FMT_LEN_H)
		return (unsigned short)v;
	if (cv->len == RT_FMT_LEN_NONE)
		return (unsigned int)v;
	return (unsigned long long)v;
}

static int value_int(const struct rt_value *v, int64_t *out)
{
	if (v->type == RT_VAL_INT)
		*out = v->u.i;
	else if (v->type == RT_VAL_BOOL)
		*out = v->u.b;
	else
		return -1;
	return 0;
}

/* Render argument v with conversion cv (the fallback is sb_value). */
static void render_conv(struct sbuf *s, const struct rt_fmt_spec *cv, const struct rt_value *v)
{
	char fmt[48];
	int64_t i;
	switch (cv->conv) {
	case 'd':
	case 'i':
		if (value_int(v, &i) != 0)
			break;
		conv_format(cv, "-+ 0'", "ll", cv->conv, fmt, sizeof fmt);
		rt_sink_printf(sb_sink, s, fmt, as_signed(cv, i));
		return;
	case 'u':
	case 'o':
	case 'x':
	case 'X':
		if (value_int(v, &i) != 0)
			break;
		conv_format(cv, "-#0'", "ll", cv->conv, fmt, sizeof fmt);
		rt_sink_printf(sb_sink, s, fmt, as_unsigned(cv, i));
		return;
	case 'c':
		if (value_int(v, &i) != 0)
			break;
		if ((unsigned char)i == 0)
			return; /* a NUL cannot live in a C-string body */
		conv_format(cv, "-", "", 'c', fmt, sizeof fmt);
		rt_sink_printf(sb_sink, s, fmt, (int)(unsigned char)i);
		return;
	case 's':
		if (v->type != RT_VAL_STR && v->type != RT_VAL_NONE)
			break;
		conv_format(cv, "-", "", 's', fmt, sizeof fmt);
		rt_sink_printf(sb_sink, s, fmt, v->type == RT_VAL_STR ? v->u.s : "(null)");
		return;
	case 'p': {
		char text[32];
		if (value_int(v, &i) != 0)
			break;
		if (i)
			snprintf(text, sizeof text, "0x%llx", (unsigned long long)i);
		else
			snprintf(text, sizeof text, "(nil)");
		rt_sink_printf(sb_sink, s, strchr(cv->flags, '-') ? "%-*s" : "%*s",
			       cv->width > 0 ? cv->width : 0, text);
		return;
	}
	default: /* e E f F g G a A */
		if (v->type != RT_VAL_DOUBLE)
			break;
		conv_format(cv, "-+ #0'", "", cv->conv, fmt, sizeof fmt);
		rt_sink_printf(sb_sink, s, fmt, v->u.d);
		return;
	}
	sb_value(s, v);
}

/* A `*` width or precision takes the next argument when it is an integer. */
static int star_arg(const struct rt_value *args, uint32_t n, uint32_t *next, int *out)
{
	int64_t v;
	if (*next >= n || value_int(&args[*next], &v) != 0)
		return -1;
	(*next)++;
	*out = v > CONV_MAX_WIDTH ? CONV_MAX_WIDTH : v < -CONV_MAX_WIDTH ? -CONV_MAX_WIDTH : (int)v;
	return 0;
}

/* Resolve the stars of cv; returns 0 when the arguments ran out. */
static int conv_stars(struct rt_fmt_spec *cv, const struct rt_value *args, uint32_t n, uint32_t *next)
{
	int w;
	if (cv->width_star) {
		if (star_arg(args, n, next, &w) != 0)
			return 0;
		if (w < 0) { /* printf: a negative width is '-' and its magnitude */
			size_t nf = strlen(cv->flags);
			if (nf < sizeof cv->flags - 1 && !strchr(cv->flags, '-'))
				cv->flags[nf] = '-';
			w = -w;
		}
		cv->width = w;
	}
	if (cv->prec_star) {
		if (star_arg(args, n, next, &w) != 0)
			return 0;
		cv->prec = w < 0 ? -1 : w; /* negative precision: as if omitted */
	}
	return 1;
}

/* Substitute args into the template: the printf conversions, %% -> %. A
 * conversion whose argument is missing stays as written. */
static void render_template(struct sbuf *s, const char *tpl, const struct rt_value *args,
			    uint32_t n)
{
	uint32_t next = 0;
	const char *p = tpl;
	while (*p) {
		const char *pct = strchr(p, '%');
		struct rt_fmt_spec cv;
		if (!pct) {
			sb_puts(s, p);
			return;
		}
		sb_put(s, p, (size_t)(pct - p));
		if (pct[1] == '%') {
			sb_put(s, "%", 1);
			p = pct + 2;
			continue;
		}
		if (!rt_fmt_parse(pct, &cv)) { /* not a conversion: the '%' is text */
			sb_put(s, "%", 1);
			p = pct + 1;
			continue;
		}
		if (conv_stars(&cv, args, n, &next) && next < n)
			render_conv(s, &cv, &args[next++]);
		else
			sb_put(s, pct, cv.n);
		p = pct + cv.n;
	}
}

static void render_missing(struct sbuf *s, uint64_t id, const struct rt_value *args, uint32_t n)
{
	uint32_t i;
	rt_sink_printf(sb_sink, s, "<template 0x%016llx>", (unsigned long long)id);
	for (i = 0; i < n; i++) {
		sb_put(s, " ", 1);
		sb_value(s, &args[i]);
	}
}

/* Give every templated log its template text and rendered body. */
int rt_dec_render_logs(struct build *b)
{
	struct sbuf s = { 0 };
	size_t i;
	int rc = 0;
	for (i = 0; i < b->n_logs && rc == 0; i++) {
		struct rt_log_event *ev = &b->logs[i].ev;
		uint32_t t;
		if (!ev->template_id)
			continue; /* free text: body already set */
		s.len = 0;
		t = rt_dec_idmap_get(&b->template_ids, ev->template_id);
		if (t != NO_SPAN) {
			ev->template_text = b->templates[t].text;
			render_template(&s, ev->template_text, ev->args, ev->n_args);
		} else {
			ev->flags |= RT_LOG_TEMPLATE_MISSING;
			b->st->missing_templates++;
			render_missing(&s, ev->template_id, ev->args, ev->n_args);
		}
		ev->body_len = (uint32_t)s.len;
		if (s.oom || !(ev->body = rt_dec_strndup(b->out, s.p ? s.p : "", s.len)))
			rc = -1;
	}
	free(s.p);
	return rc;
}

