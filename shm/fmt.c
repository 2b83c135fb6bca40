/*
 * shm/fmt.c — the printf conversion grammar (see fmt.h), a small recursive-
 * descent reader: optional N$, flags, width, precision, length, conversion, in
 * that order, each step advancing a pointer. The argument type follows from the
 * conversion and the length as C's printf defines it. No allocation, no locale.
 */
#include "shm/fmt.h"

#include <string.h>

/* Digits as a clamped number; sets *pos when a '$' follows. */
static const char *read_number(const char *p, int *out, int *pos)
{
	int v = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		if (v <= RT_FMT_MAX_WIDTH)
			v = v * 10 + (*p - '0');
	*out = v > RT_FMT_MAX_WIDTH ? RT_FMT_MAX_WIDTH : v;
	if (*p == '$') {
		*pos = 1;
		p++;
	}
	return p;
}

/* WIDTH or PRECISION: digits or '*' (itself possibly followed by N$). */
static const char *read_field(const char *p, int *value, int *star, int *pos)
{
	int ignored;
	if (*p == '*') {
		*star = 1;
		p++;
		if (*p >= '0' && *p <= '9') {
			p = read_number(p, &ignored, pos);
			if (!*pos)
				*pos = 1; /* "*5" without '$' is no valid grammar either */
		}
		return p;
	}
	if (*p >= '0' && *p <= '9')
		return read_number(p, value, pos);
	return p;
}

static const char *read_length(const char *p, enum rt_fmt_len *len)
{
	*len = RT_FMT_LEN_NONE;
	switch (*p) {
	case 'h':
		*len = p[1] == 'h' ? RT_FMT_LEN_HH : RT_FMT_LEN_H;
		return p + (p[1] == 'h' ? 2 : 1);
	case 'l':
		*len = p[1] == 'l' ? RT_FMT_LEN_LL : RT_FMT_LEN_L;
		return p + (p[1] == 'l' ? 2 : 1);
	case 'q': *len = RT_FMT_LEN_LL; return p + 1;
	case 'j': *len = RT_FMT_LEN_J; return p + 1;
	case 'z': *len = RT_FMT_LEN_Z; return p + 1;
	case 't': *len = RT_FMT_LEN_T; return p + 1;
	case 'L': *len = RT_FMT_LEN_BIG_L; return p + 1;
	default: return p;
	}
}

/* The argument type of conversion c with length len; 0 if unsupported. */
static uint8_t arg_type(char c, enum rt_fmt_len len)
{
	static const uint8_t signed_by_len[] = {
		RT_FMT_ARG_INT, RT_FMT_ARG_SCHAR, RT_FMT_ARG_SHORT, RT_FMT_ARG_LONG,
		RT_FMT_ARG_LLONG, RT_FMT_ARG_INTMAX, RT_FMT_ARG_SSIZE, RT_FMT_ARG_PTRDIFF, 0 };
	static const uint8_t unsigned_by_len[] = {
		RT_FMT_ARG_UINT, RT_FMT_ARG_UCHAR, RT_FMT_ARG_USHORT, RT_FMT_ARG_ULONG,
		RT_FMT_ARG_ULLONG, RT_FMT_ARG_UINTMAX, RT_FMT_ARG_SIZE, RT_FMT_ARG_UPTRDIFF, 0 };
	switch (c) {
	case 'd': case 'i':
		return signed_by_len[len];
	case 'u': case 'o': case 'x': case 'X':
		return unsigned_by_len[len];
	case 'c': return len == RT_FMT_LEN_NONE ? RT_FMT_ARG_CHAR : 0;
	case 's': return len == RT_FMT_LEN_NONE ? RT_FMT_ARG_STR : 0;
	case 'p': return len == RT_FMT_LEN_NONE ? RT_FMT_ARG_PTR : 0;
	case 'e': case 'E': case 'f': case 'F': case 'g': case 'G': case 'a': case 'A':
		return len == RT_FMT_LEN_BIG_L ? RT_FMT_ARG_LDOUBLE
		       : (len == RT_FMT_LEN_NONE || len == RT_FMT_LEN_L) ? RT_FMT_ARG_DOUBLE : 0;
	default:
		return 0; /* %n, %m, %C, %S, unknown */
	}
}

int rt_fmt_parse(const char *s, struct rt_fmt_spec *spec)
{
	const char *p = s + 1, *q;
	size_t nf = 0;
	int lead = 0;

	memset(spec, 0, sizeof *spec);
	spec->width = spec->prec = -1;
	/* "%N$...": digits then '$' is a position; digits without '$' are the width. */
	for (q = p; *q >= '0' && *q <= '9'; q++)
		;
	if (q > p && *q == '$')
		p = read_number(p, &lead, &spec->positional);
	while (*p && strchr("-+ #0'I", *p)) {
		if (nf < sizeof spec->flags - 1 && !memchr(spec->flags, *p, nf))
			spec->flags[nf++] = *p;
		p++;
	}
	p = read_field(p, &spec->width, &spec->width_star, &spec->positional);
	if (*p == '.') {
		spec->prec = 0;
		p = read_field(p + 1, &spec->prec, &spec->prec_star, &spec->positional);
		if (spec->prec_star)
			spec->prec = -1;
	}
	p = read_length(p, &spec->len);
	spec->conv = *p;
	spec->arg = *p ? arg_type(*p, spec->len) : 0;
	spec->n = (size_t)(p - s) + (*p ? 1 : 0);
	return spec->arg && !spec->positional;
}

const char *rt_fmt_len_text(enum rt_fmt_len len)
{
	static const char *const text[] = { "", "hh", "h", "l", "ll", "j", "z", "t", "L" };
	return (unsigned)len < sizeof text / sizeof text[0] ? text[len] : "";
}
