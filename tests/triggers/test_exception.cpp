/*
 * test_exception.cpp — the header-only C++ helper (retrace/triggers.hpp):
 * leaving a scope by an exception fires for the current trace, leaving it
 * normally or by a caught exception inside it does not. Read back from a real
 * pool's trigger queue. Built with g++ (C++17).
 */
#include <check.h>

#include <cstdlib>
#include <stdexcept>

#include "pool_fixture.h"
#include "retrace/triggers.hpp"

static const retrace_trace_id request_trace = {0x1234, 0xC0FFEE};

static void guarded_work(bool fail)
{
	RETRACE_TRIGGER_ON_EXCEPTION(61);
	try {
		throw std::logic_error("handled inside the scope");
	} catch (const std::logic_error &) {
	}
	if (fail)
		throw std::runtime_error("request failed");
}

/* A guard in a destructor that runs during another unwinding must not fire. */
struct cleanup_during_unwind {
	~cleanup_during_unwind()
	{
		RETRACE_TRIGGER_ON_EXCEPTION(62);
	}
};

static void unwinds_through_cleanup()
{
	cleanup_during_unwind c;
	throw std::runtime_error("outer");
}

START_TEST(scope_left_by_exception_fires)
{
	ck_assert_int_eq(fixture_pool_create(), 0);
	ck_assert_int_eq(fixture_client_attach(), RETRACE_OK);
	retrace_begin(request_trace);

	guarded_work(false);
	bool caught = false;
	try {
		guarded_work(true);
	} catch (const std::runtime_error &) {
		caught = true;
	}
	try {
		unwinds_through_cleanup();
	} catch (const std::runtime_error &) {
	}
	retrace_end();

	fixture_trigger t[4];
	size_t n = fixture_pop_triggers(t, 4);
	fixture_pool_destroy();
	ck_assert(caught);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(t[0].trigger_id, 61);
	ck_assert_uint_eq(t[0].trace_lo, request_trace.lo);
	ck_assert_uint_eq(t[0].trace_hi, request_trace.hi);
}
END_TEST

static Suite *exception_suite()
{
	Suite *s = suite_create("c++ exception trigger");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, scope_left_by_exception_fires);
	suite_add_tcase(s, tc);
	return s;
}

int main()
{
	SRunner *sr = srunner_create(exception_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
