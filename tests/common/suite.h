/*
 * tests/common/suite.h — run a Check suite; the exit status says whether every
 * test passed. Shared by every suite's main.
 */
#ifndef RETRACE_TESTS_SUITE_H
#define RETRACE_TESTS_SUITE_H

#include <check.h>

static inline int test_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

#endif
