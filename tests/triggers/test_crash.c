/*
 * test_crash.c — the crash handler and the C exception macros, end to end
 * through a real pool: a forked child traces, crashes (or fails), and the
 * parent reads the trigger back from the pool's trigger queue and checks how
 * the child died.
 */
#include <check.h>

#include "common/suite.h"
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool_fixture.h"
#include "test_util.h"

#define CRASH_TRACE_LO 0x1122334455667788ull
#define CRASH_TRACE_HI 0x99AABBCCDDEEFF00ull
#define CHAINED_EXIT 42

static retrace_trace_id crash_trace(void)
{
	retrace_trace_id id = {CRASH_TRACE_HI, CRASH_TRACE_LO};
	return id;
}

/* Kept out of line and away from UBSan's null check: we want the real fault. */
__attribute__((noinline, no_sanitize("undefined"))) static void
dereference_null(void)
{
	volatile int *volatile nowhere = NULL;
	*nowhere = 1;
}

static void no_core_files(void)
{
	struct rlimit none = {0, 0};
	setrlimit(RLIMIT_CORE, &none);
}

enum crash_kind { CRASH_SEGV, CRASH_ABORT, CRASH_OUTSIDE_TRACE };

static void child_crash(enum crash_kind kind, uint32_t trigger_id)
{
	no_core_files();
	if (fixture_client_attach() != RETRACE_OK)
		_exit(3);
	if (retrace_crash_handler_install(trigger_id) != RETRACE_OK)
		_exit(4);
	if (kind != CRASH_OUTSIDE_TRACE)
		retrace_begin(crash_trace());
	if (kind == CRASH_ABORT)
		abort();
	dereference_null();
	_exit(5); /* not reached */
}

static int run_child(enum crash_kind kind, uint32_t trigger_id)
{
	int status = 0;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		child_crash(kind, trigger_id);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return status;
}

START_TEST(segv_in_trace_fires_and_dies_of_segv)
{
	ck_assert_int_eq(fixture_pool_create(), 0);
	int status = run_child(CRASH_SEGV, 0);
	struct fixture_trigger t[4];
	size_t n = fixture_pop_triggers(t, 4);
	fixture_pool_destroy();

	ck_assert_msg(WIFSIGNALED(status), "child status %#x", status);
	ck_assert_int_eq(WTERMSIG(status), SIGSEGV);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(t[0].trace_lo, CRASH_TRACE_LO);
	ck_assert_uint_eq(t[0].trace_hi, CRASH_TRACE_HI);
	ck_assert_uint_eq(t[0].trigger_id, RETRACE_TRIGGER_CRASH);
	ck_assert_uint_eq(t[0].group_size, 1);
}
END_TEST

START_TEST(abort_fires_configured_id_and_dies_of_sigabrt)
{
	ck_assert_int_eq(fixture_pool_create(), 0);
	int status = run_child(CRASH_ABORT, 77);
	struct fixture_trigger t[4];
	size_t n = fixture_pop_triggers(t, 4);
	fixture_pool_destroy();

	ck_assert(WIFSIGNALED(status));
	ck_assert_int_eq(WTERMSIG(status), SIGABRT);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(t[0].trace_lo, CRASH_TRACE_LO);
	ck_assert_uint_eq(t[0].trigger_id, 77);
}
END_TEST

START_TEST(crash_outside_a_trace_fires_nothing)
{
	ck_assert_int_eq(fixture_pool_create(), 0);
	int status = run_child(CRASH_OUTSIDE_TRACE, 0);
	struct fixture_trigger t[4];
	size_t n = fixture_pop_triggers(t, 4);
	fixture_pool_destroy();
	ck_assert(WIFSIGNALED(status));
	ck_assert_int_eq(WTERMSIG(status), SIGSEGV);
	ck_assert_uint_eq(n, 0);
}
END_TEST

/* ---------------------------------------------- chaining to a handler ---- */

static int chained_pipe[2];

static void previous_handler(int sig)
{
	char c = (char)sig;
	(void)!write(chained_pipe[1], &c, 1);
	_exit(CHAINED_EXIT);
}

START_TEST(previous_handler_still_runs)
{
	ck_assert_int_eq(fixture_pool_create(), 0);
	ck_assert_int_eq(pipe(chained_pipe), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		signal(SIGSEGV, previous_handler);
		child_crash(CRASH_SEGV, 0);
	}
	int status = 0;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	char seen = 0;
	close(chained_pipe[1]);
	ck_assert_int_eq(read(chained_pipe[0], &seen, 1), 1);
	close(chained_pipe[0]);
	struct fixture_trigger t[4];
	size_t n = fixture_pop_triggers(t, 4);
	fixture_pool_destroy();

	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), CHAINED_EXIT);
	ck_assert_int_eq(seen, SIGSEGV);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(t[0].trace_lo, CRASH_TRACE_LO);
}
END_TEST

START_TEST(uninstall_restores_previous_action)
{
	struct sigaction before, after;
	signal(SIGBUS, previous_handler);
	ck_assert_int_eq(retrace_crash_handler_install(0), RETRACE_OK);
	sigaction(SIGBUS, NULL, &after);
	ck_assert_ptr_ne((void *)after.sa_handler, (void *)previous_handler);
	retrace_crash_handler_uninstall();
	sigaction(SIGBUS, NULL, &before);
	ck_assert_ptr_eq((void *)before.sa_handler, (void *)previous_handler);
}
END_TEST

/* ------------------------------------------------ C exception macros ---- */

static int failing_call(int rc)
{
	if (RETRACE_FAIL_IF(rc < 0, 31))
		return -1;
	return 0;
}

START_TEST(exception_macros_fire_for_current_trace)
{
	ck_assert_int_eq(fixture_pool_create(), 0);
	ck_assert_int_eq(fixture_client_attach(), RETRACE_OK);
	retrace_trace_id id = crash_trace();
	retrace_begin(id);
	ck_assert_int_eq(failing_call(0), 0);  /* no fire */
	ck_assert_int_eq(failing_call(-5), -1); /* fires 31 */
	RETRACE_EXCEPTION(32);
	retrace_end();
	RETRACE_EXCEPTION(33); /* outside a trace: nothing */

	struct fixture_trigger t[8];
	size_t n = fixture_pop_triggers(t, 8);
	fixture_pool_destroy();
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(t[0].trigger_id, 31);
	ck_assert_uint_eq(t[1].trigger_id, 32);
	ck_assert_uint_eq(t[0].trace_lo, CRASH_TRACE_LO);
	ck_assert_uint_eq(t[1].trace_lo, CRASH_TRACE_LO);
}
END_TEST

static Suite *crash_suite(void)
{
	Suite *s = suite_create("crash and exception");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, segv_in_trace_fires_and_dies_of_segv);
	tcase_add_test(tc, abort_fires_configured_id_and_dies_of_sigabrt);
	tcase_add_test(tc, crash_outside_a_trace_fires_nothing);
	tcase_add_test(tc, previous_handler_still_runs);
	tcase_add_test(tc, uninstall_restores_previous_action);
	tcase_add_test(tc, exception_macros_fire_for_current_trace);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(crash_suite());
}
