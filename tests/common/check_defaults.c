/*
 * tests/common/check_defaults.c — linked into every test program (through the
 * Check target, tests/CMakeLists.txt): Check's default of 4 s per test case is
 * a timing assertion, and the stress runs (scripts/stress-tests.sh: two busy
 * loops, ctest -j2, other builds) made fsync- and scheduler-bound cases pass it
 * (coordinator_select_store, trig_filter). A case that sets its own timeout
 * keeps it; ctest's TIMEOUT stays the outer bound. Runs before main, before any
 * tcase_create reads the variable; an explicit CK_DEFAULT_TIMEOUT wins.
 */
#include <stdlib.h>

__attribute__((constructor)) static void check_default_timeout(void)
{
	setenv("CK_DEFAULT_TIMEOUT", "60", 0);
}
