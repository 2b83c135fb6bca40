/*
 * tests/common/suite.h — run a Check suite; the exit status says whether every
 * test passed. Shared by every suite's main.
 */
#ifndef RETRACE_TESTS_SUITE_H
#define RETRACE_TESTS_SUITE_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

static inline int test_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed, ran;
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	ran = srunner_ntests_run(sr);
	srunner_free(sr);
	/* CK_RUN_CASE naming no case runs nothing: that is a failure, not a pass. */
	if (ran == 0) {
		fprintf(stderr, "no test ran (CK_RUN_CASE=%s names no case of this suite?)\n",
			getenv("CK_RUN_CASE") ? getenv("CK_RUN_CASE") : "");
		return 1;
	}
	return failed ? 1 : 0;
}

#endif
