/*
 * tests/daemon/test_log.c — the daemons' one log-line format (daemon/log.h):
 * the line as written to stderr, the level names, a cut long line, and the
 * limiter that lets one repeating line through per period and reports the rest.
 */
#include <check.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/suite.h"
#include "daemon/log.h"

/* What one rt_log_vline call writes to stderr, captured through a pipe. */
static void line(char *out, size_t cap, const char *program, int level, const char *suffix,
		 const char *fmt, ...)
{
	int fds[2], saved = dup(STDERR_FILENO);
	ssize_t n;
	va_list ap;
	ck_assert_int_eq(pipe(fds), 0);
	dup2(fds[1], STDERR_FILENO);
	va_start(ap, fmt);
	rt_log_vline(program, level, suffix, fmt, ap);
	va_end(ap);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(fds[1]);
	n = read(fds[0], out, cap - 1);
	close(fds[0]);
	out[n > 0 ? n : 0] = 0;
}

START_TEST(one_format_for_both_daemons)
{
	char buf[2048];
	regex_t re;
	ck_assert_int_eq(regcomp(&re, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\."
				      "[0-9]{3}Z retrace-agent warn: pool 7 is full \\(x\\)\n$",
				 REG_EXTENDED), 0);
	line(buf, sizeof buf, "retrace-agent", RT_LOG_WARN, " (x)", "pool %d is full", 7);
	ck_assert_msg(regexec(&re, buf, 0, NULL, 0) == 0, "line: [%s]", buf);
	regfree(&re);
	line(buf, sizeof buf, "retrace-coordinator", RT_LOG_ERROR, NULL, "%s", "store");
	ck_assert_ptr_nonnull(strstr(buf, "Z retrace-coordinator error: store\n"));
	line(buf, sizeof buf, "retrace-agent", 9, NULL, "no such level");
	ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(a_long_line_is_cut_not_split)
{
	char buf[4096], big[3000];
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = 0;
	line(buf, sizeof buf, "retrace-agent", RT_LOG_INFO, NULL, "%s", big);
	ck_assert_uint_eq(strlen(buf), 1023);
	ck_assert_ptr_eq(strchr(buf, '\n'), buf + 1022); /* one line, ended */
}
END_TEST

START_TEST(level_names)
{
	ck_assert_int_eq(rt_log_level_parse("error"), RT_LOG_ERROR);
	ck_assert_int_eq(rt_log_level_parse("warn"), RT_LOG_WARN);
	ck_assert_int_eq(rt_log_level_parse("info"), RT_LOG_INFO);
	ck_assert_int_eq(rt_log_level_parse("debug"), RT_LOG_DEBUG);
	ck_assert_int_eq(rt_log_level_parse("warning"), -1);
	ck_assert_int_eq(rt_log_level_parse(""), -1);
	ck_assert_int_eq(rt_log_level_parse("INFO"), -1);
}
END_TEST

START_TEST(limiter_reports_what_it_held_back)
{
	struct rt_log_limit l = { 0, 0 };
	char suffix[96];
	ck_assert_int_eq(rt_log_limit_pass(&l, 1000, suffix, sizeof suffix), 1);
	ck_assert_str_eq(suffix, "");
	ck_assert_int_eq(rt_log_limit_pass(&l, 2000, suffix, sizeof suffix), 0);
	ck_assert_int_eq(rt_log_limit_pass(&l, 1000 + RT_LOG_LIMIT_NS - 1, suffix, sizeof suffix), 0);
	ck_assert_int_eq(rt_log_limit_pass(&l, 1000 + RT_LOG_LIMIT_NS, suffix, sizeof suffix), 1);
	ck_assert_str_eq(suffix, " (2 more like it since the last such line)");
	ck_assert_int_eq(rt_log_limit_pass(&l, 1000 + 2 * RT_LOG_LIMIT_NS, suffix, sizeof suffix), 1);
	ck_assert_str_eq(suffix, "");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("daemon_log");
	TCase *tc = tcase_create("log");
	tcase_add_test(tc, one_format_for_both_daemons);
	tcase_add_test(tc, a_long_line_is_cut_not_split);
	tcase_add_test(tc, level_names);
	tcase_add_test(tc, limiter_reports_what_it_held_back);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
