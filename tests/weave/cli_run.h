/* cli_run.h — run `retrace weave` in-process with its stdout in a file (the weave CLI
 * suites). */
#ifndef RETRACE_TESTS_WEAVE_CLI_RUN_H
#define RETRACE_TESTS_WEAVE_CLI_RUN_H

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "cmd_weave.h"

static inline int run_cmd(int argc, char **argv, const char *stdout_path)
{
	fflush(stdout);
	int saved = dup(1), fd = open(stdout_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	dup2(fd, 1);
	close(fd);
	int rc = cli_cmd_weave(argc, argv);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	return rc;
}

#endif
