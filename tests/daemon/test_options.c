/*
 * tests/daemon/test_options.c — the daemons' settings parser (daemon/options.h)
 * on a small table of its own: each kind's range, the config file's grammar and
 * its errors with line numbers, flags winning over a --config file in either
 * order, short flags, and the --help layout generated from the rows.
 */
#include <check.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/suite.h"
#include "daemon/log.h"
#include "daemon/options.h"

struct cfg {
	uint32_t n;
	uint64_t big;
	long gid;
	double share, secs;
	int on, level;
	char name[8];
};

enum { K_U32, K_U64, K_GID, K_SHARE, K_SECS, K_FLAG, K_LEVEL, K_STR, K_CONFIG };

static const struct rt_opt_kind kinds[] = {
	[K_U32] = { RT_OPT_U32, 0, 0, 0, 0, "an unsigned 32-bit integer" },
	[K_U64] = { RT_OPT_U64, 0, 0, 0, 0, "an unsigned integer" },
	[K_GID] = { RT_OPT_GID, 0, 0, 0, 0, "a group" },
	[K_SHARE] = { RT_OPT_REAL, 0, 1, RT_OPT_OPEN_MIN | RT_OPT_PERCENT, 0, "a share" },
	[K_SECS] = { RT_OPT_REAL, 0, 60, RT_OPT_OPEN_MAX, 0, "seconds in [0, 60)" },
	[K_FLAG] = { RT_OPT_FLAG, 0, 0, 0, 0, "true or false" },
	[K_LEVEL] = { RT_OPT_LEVEL, 0, 0, 0, 0, "a level" },
	[K_STR] = { RT_OPT_STR, 0, 0, 0, 0, NULL },
	[K_CONFIG] = { RT_OPT_CONFIG, 0, 0, 0, 0, NULL },
};

#define F(f) offsetof(struct cfg, f)

RT_OPT_ROWS_BEGIN
static const struct rt_opt rows[] = {
	{ "config", K_CONFIG, 0, "FILE", "read FILE", 'c' },
	{ "count", K_U32, F(n), "N", "a count", 'n' },
	{ "big", K_U64, F(big), "N", "a big one" },
	{ "group", K_GID, F(gid), "GROUP", "a group" },
	{ "share", K_SHARE, F(share), "SHARE", "a share" },
	{ "secs", K_SECS, F(secs), "SEC", "seconds" },
	{ "on", K_FLAG, F(on), NULL, "switch it on" },
	{ "log-level", K_LEVEL, F(level), "LEVEL", "a level" },
	{ "name", K_STR, F(name), "NAME", "a name", 0, sizeof(((struct cfg *)0)->name) },
};
RT_OPT_ROWS_END

static const struct rt_opt_table table = {
	.prog = "prog",
	.intro = "usage: prog\n",
	.outro = "the end\n",
	.rows = rows,
	.nrows = sizeof rows / sizeof rows[0],
	.kinds = kinds,
	.nkinds = sizeof kinds / sizeof kinds[0],
};

static char errbuf[4096];

/* Parse a NULL-ended argv into c; what was written to err lands in errbuf. */
static int parse(struct cfg *c, const char *first, ...)
{
	char *argv[32];
	int argc = 0, rc;
	va_list ap;
	FILE *err = fmemopen(errbuf, sizeof errbuf, "w");
	ck_assert_ptr_nonnull(err);
	argv[argc++] = "prog";
	va_start(ap, first);
	for (const char *a = first; a; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	memset(errbuf, 0, sizeof errbuf);
	rc = rt_opt_parse(&table, c, argc, argv, err);
	fclose(err);
	return rc;
}

static int set(struct cfg *c, const char *name, const char *v)
{
	char why[160];
	return rt_opt_set(&table, c, name, v, why, sizeof why);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

START_TEST(each_kind_takes_its_range_only)
{
	struct cfg c = { 0 };
	ck_assert_int_eq(set(&c, "count", "4294967295"), 0);
	ck_assert_uint_eq(c.n, 4294967295u);
	ck_assert_int_eq(set(&c, "count", "4294967296"), -1);
	ck_assert_uint_eq(c.n, 4294967295u); /* a refused value leaves the field */
	ck_assert_int_eq(set(&c, "count", "0x10"), 0);
	ck_assert_uint_eq(c.n, 16);
	ck_assert_int_eq(set(&c, "count", "010"), 0); /* decimal, not octal */
	ck_assert_uint_eq(c.n, 10);
	ck_assert_int_eq(set(&c, "count", "-1"), -1);
	ck_assert_int_eq(set(&c, "count", " 5"), -1);
	ck_assert_int_eq(set(&c, "count", "12x"), -1);
	ck_assert_int_eq(set(&c, "count", ""), -1);
	ck_assert_int_eq(set(&c, "count", "0x"), -1);
	ck_assert_int_eq(set(&c, "big", "18446744073709551615"), 0);
	ck_assert_uint_eq(c.big, UINT64_MAX);
	ck_assert_int_eq(set(&c, "big", "18446744073709551616"), -1);

	ck_assert_int_eq(set(&c, "share", "80%"), 0);
	ck_assert(c.share == 0.8);
	ck_assert_int_eq(set(&c, "share", "1"), 0);
	ck_assert_int_eq(set(&c, "share", "0"), -1);   /* open at 0 */
	ck_assert_int_eq(set(&c, "share", "150%"), -1);
	ck_assert_int_eq(set(&c, "share", "nan"), -1);
	ck_assert_int_eq(set(&c, "secs", "0"), 0);     /* closed at 0 */
	ck_assert_int_eq(set(&c, "secs", "60"), -1);   /* open at 60 */
	ck_assert_int_eq(set(&c, "secs", "59.5"), 0);
	ck_assert(c.secs == 59.5);
	ck_assert_int_eq(set(&c, "secs", "5%"), -1);   /* no percent here */
	ck_assert_int_eq(set(&c, "secs", "inf"), -1);

	ck_assert_int_eq(set(&c, "on", "yes"), 0);
	ck_assert_int_eq(c.on, 1);
	ck_assert_int_eq(set(&c, "on", "false"), 0);
	ck_assert_int_eq(c.on, 0);
	ck_assert_int_eq(set(&c, "on", "maybe"), -1);
	ck_assert_int_eq(set(&c, "log-level", "debug"), 0);
	ck_assert_int_eq(c.level, RT_LOG_DEBUG);
	ck_assert_int_eq(set(&c, "log-level", "loud"), -1);
	ck_assert_int_eq(set(&c, "name", "1234567"), 0);
	ck_assert_str_eq(c.name, "1234567");
	ck_assert_int_eq(set(&c, "name", "12345678"), -1); /* no room for the NUL */
	ck_assert_int_eq(set(&c, "name", ""), -1);
	ck_assert_int_eq(set(&c, "group", "root"), 0);
	ck_assert_int_eq(c.gid, 0);
	ck_assert_int_eq(set(&c, "group", "1234"), 0);
	ck_assert_int_eq(c.gid, 1234);
	ck_assert_int_eq(set(&c, "group", "no-such-group-here"), -1);
	ck_assert_int_eq(set(&c, "config", "/etc/passwd"), -1); /* not a file key */
	ck_assert_int_eq(set(&c, "nope", "1"), -1);
}
END_TEST

START_TEST(flags_and_their_errors)
{
	struct cfg c = { 0 };
	ck_assert_int_eq(parse(&c, "-n", "7", "--big", "9", "--on", "--name=abc", NULL), 0);
	ck_assert_uint_eq(c.n, 7);
	ck_assert_uint_eq(c.big, 9);
	ck_assert_int_eq(c.on, 1);
	ck_assert_str_eq(c.name, "abc");

	ck_assert_int_eq(parse(&c, "--share", "2", NULL), -1);
	ck_assert_str_eq(errbuf, "prog: --share wants a share, got '2'\n");
	ck_assert_int_eq(parse(&c, "--name", "123456789", NULL), -1);
	ck_assert_str_eq(errbuf, "prog: --name wants a non-empty value shorter than 8 bytes, "
				 "got '123456789'\n");
	ck_assert_int_eq(parse(&c, "--no-such-flag", NULL), -1);
	ck_assert_str_eq(errbuf, "prog: unknown option '--no-such-flag' (try --help)\n");
	ck_assert_int_eq(parse(&c, "-x", NULL), -1);
	ck_assert_str_eq(errbuf, "prog: unknown option '-x' (try --help)\n");
	ck_assert_int_eq(parse(&c, "--count", NULL), -1);
	ck_assert_str_eq(errbuf, "prog: --count wants a value (try --help)\n");
	ck_assert_int_eq(parse(&c, "--on=3", NULL), -1);
	ck_assert_str_eq(errbuf, "prog: --on takes no value (try --help)\n");
	ck_assert_int_eq(parse(&c, "--on", "stray", NULL), -1);
	ck_assert_str_eq(errbuf, "prog: unexpected argument 'stray' (try --help)\n");
}
END_TEST

START_TEST(flags_win_over_the_file_in_either_order)
{
	struct cfg c = { 0 };
	char path[128];
	snprintf(path, sizeof path, "/tmp/rt-test-opts-%d.conf", (int)getpid());
	write_file(path, "# a comment\n\n  count = 3\nbig=4\r\non = true\nshare = 50%\n");
	ck_assert_int_eq(parse(&c, "--count", "5", "--config", path, NULL), 0);
	ck_assert_uint_eq(c.n, 5);
	ck_assert_uint_eq(c.big, 4);
	ck_assert_int_eq(c.on, 1);
	ck_assert(c.share == 0.5);
	memset(&c, 0, sizeof c);
	ck_assert_int_eq(parse(&c, "-c", path, "-n", "6", NULL), 0);
	ck_assert_uint_eq(c.n, 6);
	ck_assert_uint_eq(c.big, 4);
	unlink(path);
}
END_TEST

START_TEST(file_errors_name_the_line)
{
	struct cfg c = { 0 };
	char path[128], want[256], longline[1100];
	snprintf(path, sizeof path, "/tmp/rt-test-opts-bad-%d.conf", (int)getpid());

	write_file(path, "count = 1\n\nno-such-key = 1\n");
	ck_assert_int_eq(parse(&c, "--config", path, NULL), -1);
	snprintf(want, sizeof want, "%s:3: unknown setting 'no-such-key' (see prog --help)\n", path);
	ck_assert_str_eq(errbuf, want);

	write_file(path, "share = lots\n");
	ck_assert_int_eq(parse(&c, "--config", path, NULL), -1);
	snprintf(want, sizeof want, "%s:1: share wants a share, got 'lots'\n", path);
	ck_assert_str_eq(errbuf, want);

	write_file(path, "# x\ncount 5\n");
	ck_assert_int_eq(parse(&c, "--config", path, NULL), -1);
	snprintf(want, sizeof want, "%s:2: expected `key = value`, got 'count 5'\n", path);
	ck_assert_str_eq(errbuf, want);

	write_file(path, "config = /etc/passwd\n"); /* no nesting */
	ck_assert_int_eq(parse(&c, "--config", path, NULL), -1);
	ck_assert_ptr_nonnull(strstr(errbuf, ":1: unknown setting 'config'"));

	memset(longline, 'a', sizeof longline - 2);
	longline[sizeof longline - 2] = '\n';
	longline[sizeof longline - 1] = 0;
	write_file(path, longline);
	ck_assert_int_eq(parse(&c, "--config", path, NULL), -1);
	ck_assert_ptr_nonnull(strstr(errbuf, ":1: line longer than 1022 bytes"));
	unlink(path);

	ck_assert_int_eq(parse(&c, "--config", "/nonexistent/x.conf", NULL), -1);
	ck_assert_ptr_nonnull(strstr(errbuf, "prog: cannot read config file /nonexistent/x.conf"));
}
END_TEST

START_TEST(help_comes_from_the_rows)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(out);
	rt_opt_usage(&table, out);
	fclose(out);
	ck_assert_ptr_nonnull(strstr(text, "usage: prog\n"));
	ck_assert_ptr_nonnull(strstr(text, "\n  -n, --count N                  a count\n"));
	ck_assert_ptr_nonnull(strstr(text, "\n      --on                       switch it on\n"));
	ck_assert_ptr_nonnull(strstr(text, "\n  -h, --help                     this text\nthe end\n"));
	free(text);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("daemon_options");
	TCase *tc = tcase_create("options");
	tcase_add_test(tc, each_kind_takes_its_range_only);
	tcase_add_test(tc, flags_and_their_errors);
	tcase_add_test(tc, flags_win_over_the_file_in_either_order);
	tcase_add_test(tc, file_errors_name_the_line);
	tcase_add_test(tc, help_comes_from_the_rows);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
