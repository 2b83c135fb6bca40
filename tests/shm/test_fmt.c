/*
 * shm/fmt.h — the printf grammar the client and the decoder share, checked
 * against glibc's own reader of formats, parse_printf_format(3), as the oracle:
 * for random formats built from every piece of the grammar (flags ' and I,
 * widths and precisions given or '*', every length and conversion, "%%" and
 * literal text), whenever rt_fmt_parse accepts every conversion, it must
 * consume exactly the arguments glibc would (count, and the size class of each:
 * int, 64-bit int, double, long double, string, pointer). Formats it rejects
 * (positional N$, %n, %m, %lc, ...) must be ones a log site may not use.
 */
#include <check.h>
#include <printf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/suite.h"
#include "shm/fmt.h"

enum cls { C_INT = 1, C_INT64, C_DOUBLE, C_LDOUBLE, C_STR, C_PTR, C_OTHER };

static enum cls ours(uint8_t arg)
{
	switch (arg) {
	case RT_FMT_ARG_INT: case RT_FMT_ARG_SCHAR: case RT_FMT_ARG_SHORT: case RT_FMT_ARG_UINT:
	case RT_FMT_ARG_UCHAR: case RT_FMT_ARG_USHORT: case RT_FMT_ARG_CHAR:
		return C_INT;
	case RT_FMT_ARG_LONG: case RT_FMT_ARG_LLONG: case RT_FMT_ARG_INTMAX: case RT_FMT_ARG_SSIZE:
	case RT_FMT_ARG_PTRDIFF: case RT_FMT_ARG_ULONG: case RT_FMT_ARG_ULLONG:
	case RT_FMT_ARG_UINTMAX: case RT_FMT_ARG_SIZE: case RT_FMT_ARG_UPTRDIFF:
		return C_INT64;
	case RT_FMT_ARG_DOUBLE: return C_DOUBLE;
	case RT_FMT_ARG_LDOUBLE: return C_LDOUBLE;
	case RT_FMT_ARG_STR: return C_STR;
	case RT_FMT_ARG_PTR: return C_PTR;
	default: return C_OTHER;
	}
}

static enum cls glibc(int t)
{
	int base = t & ~PA_FLAG_MASK;
	switch (base) {
	case PA_CHAR: return C_INT;
	case PA_INT:
		return (t & (PA_FLAG_LONG | PA_FLAG_LONG_LONG)) ? C_INT64 : C_INT;
	case PA_DOUBLE: return (t & PA_FLAG_LONG_DOUBLE) ? C_LDOUBLE : C_DOUBLE;
	case PA_STRING: return C_STR;
	case PA_POINTER: return (t & PA_FLAG_PTR) ? C_OTHER : C_PTR;
	default: return C_OTHER;
	}
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static unsigned pick(unsigned n)
{
	return test_pick(&rng, n);
}

/* A rejected conversion must use something a log site may not: a position,
 * %n %m %C %S, or a length C gives no meaning with its conversion. */
static int justified(const struct rt_fmt_spec *sp)
{
	int is_float = sp->conv && strchr("eEfFgGaA", sp->conv) != NULL;
	int is_int = sp->conv && strchr("diouxX", sp->conv) != NULL;
	if (sp->positional || !sp->conv || strchr("nmCS", sp->conv))
		return 1;
	if (strchr("csp", sp->conv))
		return sp->len != RT_FMT_LEN_NONE;
	if (is_float)
		return sp->len != RT_FMT_LEN_NONE && sp->len != RT_FMT_LEN_L &&
		       sp->len != RT_FMT_LEN_BIG_L;
	if (is_int)
		return sp->len == RT_FMT_LEN_BIG_L;
	return 1; /* no conversion character at all */
}

/* A random format of 1..4 conversions between literal text. (The checks in
 * the loop below abort only on failure: ck_assert_* reports every passing check
 * to the runner, too slow for 200 000 rounds on a loaded machine.) */
static void random_format(char *out, size_t cap)
{
	static const char *const text[] = { "", "x=", " ", "%%", "a%%b ", "[", "]" };
	static const char *const flags[] = { "", "-", "+", " ", "#", "0", "'", "I", "-0", "'I", "I-+", "# 0" };
	static const char *const width[] = { "", "5", "12", "*", "0", "4096", "99999" };
	static const char *const prec[] = { "", ".", ".3", ".*", ".0", ".12" };
	/* No 'q': glibc's printf reads it as long long, but parse_printf_format
	 * reports a plain int (test_fields checks it). */
	static const char *const len[] = { "", "", "hh", "h", "l", "ll", "ll", "j", "z", "t", "L" };
	static const char *const conv[] = { "d", "i", "o", "u", "x", "X", "e", "E", "f", "F", "g",
					    "G", "a", "A", "c", "s", "p", "n", "m", "C", "S" };
	size_t n = 0;
	unsigned k, pieces = 1 + pick(4);
	out[0] = 0;
	for (k = 0; k < pieces && n < cap - 64; k++) {
		n += (size_t)snprintf(out + n, cap - n, "%s%%%s%s%s%s%s%s", text[pick(7)],
				      pick(20) == 0 ? "1$" : "", flags[pick(12)], width[pick(7)],
				      prec[pick(6)], len[pick(11)], conv[pick(21)]);
	}
}

START_TEST(test_agrees_with_glibc)
{
	char fmt[256];
	unsigned round, accepted = 0, rejected = 0;
	for (round = 0; round < 200000; round++) {
		int types[64], i;
		uint8_t mine[64];
		size_t nmine = 0, want;
		const char *p;
		int ok = 1;
		random_format(fmt, sizeof fmt);
		for (p = fmt; ok && (p = strchr(p, '%')) != NULL;) {
			struct rt_fmt_spec sp;
			if (p[1] == '%') {
				p += 2;
				continue;
			}
			if (!rt_fmt_parse(p, &sp)) {
				if (!justified(&sp))
					ck_abort_msg("\"%s\": rejected at \"%s\"", fmt, p);
				ok = 0;
				break;
			}
			if (sp.n < 2)
				ck_abort_msg("\"%s\": a spec of %zu characters", fmt, sp.n);
			if (sp.width_star)
				mine[nmine++] = RT_FMT_ARG_INT;
			if (sp.prec_star)
				mine[nmine++] = RT_FMT_ARG_INT;
			mine[nmine++] = sp.arg;
			if (sp.width > RT_FMT_MAX_WIDTH || sp.prec > RT_FMT_MAX_WIDTH)
				ck_abort_msg("\"%s\": width/precision not clamped", fmt);
			p += sp.n;
		}
		if (!ok) {
			rejected++;
			continue;
		}
		want = parse_printf_format(fmt, 64, types);
		if (want != nmine)
			ck_abort_msg("\"%s\": glibc reads %zu arguments, rt_fmt_parse %zu", fmt,
			      want, nmine);
		for (i = 0; i < (int)nmine; i++)
			if (ours(mine[i]) != glibc(types[i]))
				ck_abort_msg(
				      "\"%s\": argument %d is class %d for glibc, %d for rt_fmt_parse",
				      fmt, i, glibc(types[i]), ours(mine[i]));
		accepted++;
	}
	ck_assert_uint_gt(accepted, 10000);
	ck_assert_uint_gt(rejected, 1000);
}
END_TEST

START_TEST(test_fields)
{
	struct rt_fmt_spec sp;
	ck_assert_int_eq(rt_fmt_parse("%Id", &sp), 1);
	ck_assert_uint_eq(sp.n, 3);
	ck_assert_str_eq(sp.flags, "I");
	ck_assert_int_eq(rt_fmt_parse("%-+08.3lld tail", &sp), 1);
	ck_assert_uint_eq(sp.n, 10);
	ck_assert_str_eq(sp.flags, "-+0");
	ck_assert_int_eq(sp.width, 8);
	ck_assert_int_eq(sp.prec, 3);
	ck_assert_int_eq(sp.len, RT_FMT_LEN_LL);
	ck_assert_int_eq(sp.conv, 'd');
	ck_assert_int_eq(rt_fmt_parse("%*.*f", &sp), 1);
	ck_assert(sp.width_star && sp.prec_star);
	ck_assert_int_eq(sp.width, -1);
	ck_assert_int_eq(sp.prec, -1);
	ck_assert_int_eq(rt_fmt_parse("%.f", &sp), 1);
	ck_assert_int_eq(sp.prec, 0);
	ck_assert_int_eq(rt_fmt_parse("%99999999999999d", &sp), 1);
	ck_assert_int_eq(sp.width, RT_FMT_MAX_WIDTH);
	ck_assert_str_eq(rt_fmt_len_text(RT_FMT_LEN_Z), "z");
	ck_assert_int_eq(rt_fmt_parse("%qx", &sp), 1); /* BSD quad: long long */
	ck_assert_int_eq(sp.arg, RT_FMT_ARG_ULLONG);
	/* not for a log site */
	ck_assert_int_eq(rt_fmt_parse("%1$d", &sp), 0);
	ck_assert_int_eq(rt_fmt_parse("%n", &sp), 0);
	ck_assert_int_eq(rt_fmt_parse("%m", &sp), 0);
	ck_assert_int_eq(rt_fmt_parse("%ls", &sp), 0);
	ck_assert_int_eq(rt_fmt_parse("%hf", &sp), 0);
	ck_assert_int_eq(rt_fmt_parse("%", &sp), 0);
	ck_assert_uint_eq(sp.n, 1);
	ck_assert_int_eq(rt_fmt_parse("%5", &sp), 0);
	ck_assert_uint_eq(sp.n, 2);
}
END_TEST

static Suite *fmt_suite(void)
{
	Suite *s = suite_create("shm_fmt");
	TCase *t = tcase_create("fmt");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_fields);
	tcase_add_test(t, test_agrees_with_glibc);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return test_run_suite(fmt_suite());
}
