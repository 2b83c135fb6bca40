/*
 * shm/fmt.h — the printf conversion grammar of log templates, one home for both
 * halves: the client's tracer (client/tracer.c) reads a format once per log site
 * to learn which arguments to record, and the coordinator's decoder
 * (coordinator/decode.c) reads the same template to render them. Both call
 * rt_fmt_parse(), so a conversion the writer records an argument for is a
 * conversion the reader consumes one for: they cannot drift apart (they once
 * did: the client skipped glibc's 'I' flag and the decoder did not, so "%Id"
 * shifted every later argument).
 *
 * Grammar of one conversion (C11 7.21.6.1, plus glibc's ' and I flags):
 *
 *     '%' [N '$'] FLAGS* [WIDTH] ['.' [PRECISION]] [LENGTH] CONV
 *     FLAGS     = one of  - + space # 0 ' I
 *     WIDTH     = digits | '*'            PRECISION = digits | '*'
 *     LENGTH    = hh h l ll q j z t L
 *     CONV      = d i o u x X e E f F g G a A c s p
 *
 * A '*' takes an int argument before the converted one. Supported means: the
 * conversion names an argument type below (no %n, %m, %lc, %ls, %C, %S) and no
 * positional argument (N$) is used. "%%" is a literal percent and is not a
 * conversion: callers handle it before calling the parser.
 */
#ifndef RETRACE_SHM_FMT_H
#define RETRACE_SHM_FMT_H

#include <stddef.h>
#include <stdint.h>

/* Width and precision are clamped to this (a template cannot ask the decoder
 * for a megabyte of padding). */
#define RT_FMT_MAX_WIDTH 4096

enum rt_fmt_len {
	RT_FMT_LEN_NONE, RT_FMT_LEN_HH, RT_FMT_LEN_H, RT_FMT_LEN_L, RT_FMT_LEN_LL,
	RT_FMT_LEN_J, RT_FMT_LEN_Z, RT_FMT_LEN_T, RT_FMT_LEN_BIG_L,
};

/* The C type a conversion reads (0: none we support). The client keeps these
 * codes per log site (retrace_log_site.types). */
enum rt_fmt_arg {
	RT_FMT_ARG_NONE = 0,
	RT_FMT_ARG_INT, RT_FMT_ARG_SCHAR, RT_FMT_ARG_SHORT, RT_FMT_ARG_LONG, RT_FMT_ARG_LLONG,
	RT_FMT_ARG_INTMAX, RT_FMT_ARG_SSIZE, RT_FMT_ARG_PTRDIFF,
	RT_FMT_ARG_UINT, RT_FMT_ARG_UCHAR, RT_FMT_ARG_USHORT, RT_FMT_ARG_ULONG, RT_FMT_ARG_ULLONG,
	RT_FMT_ARG_UINTMAX, RT_FMT_ARG_SIZE, RT_FMT_ARG_UPTRDIFF,
	RT_FMT_ARG_CHAR, RT_FMT_ARG_DOUBLE, RT_FMT_ARG_LDOUBLE, RT_FMT_ARG_STR, RT_FMT_ARG_PTR,
};

/* One parsed conversion. */
struct rt_fmt_spec {
	char flags[8];        /* the distinct flags given, in order, NUL-terminated */
	int width, prec;      /* -1: not given (a '*' leaves them -1); clamped */
	int width_star, prec_star;
	enum rt_fmt_len len;
	char conv;            /* the conversion character (0: the format ended) */
	uint8_t arg;          /* enum rt_fmt_arg of the converted argument */
	int positional;       /* an N$ was used somewhere in the spec */
	size_t n;             /* characters of the spec, '%' included */
};

/*
 * Parse the conversion at s (s[0] == '%', and not "%%"). Returns 1 when it is a
 * supported conversion: then it consumes width_star + prec_star int arguments
 * and one argument of type spec->arg. Returns 0 otherwise (spec->n is then the
 * characters read up to where the grammar failed, at least 1).
 */
int rt_fmt_parse(const char *s, struct rt_fmt_spec *spec);

/* The length modifier as written for printf ("", "hh", "h", "l", "ll", "j",
 * "z", "t", "L"). */
const char *rt_fmt_len_text(enum rt_fmt_len len);

#endif
