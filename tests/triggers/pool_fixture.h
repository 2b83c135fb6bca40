/*
 * pool_fixture.h — a private shared-memory pool for one test, and reading back
 * the trigger groups that reached it. C linkage so the C++ test can use it
 * without compiling the shm headers as C++.
 */
#ifndef RETRACE_TESTS_TRIGGERS_POOL_FIXTURE_H
#define RETRACE_TESTS_TRIGGERS_POOL_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One trigger entry as read back from the queue. */
struct fixture_trigger {
	uint64_t trace_hi, trace_lo;
	uint32_t trigger_id;
	uint16_t group_size, group_index;
};

/* Create a pool named /rt-test-trig-<pid>-<n>; returns 0 or a RETRACE_E_* code. */
int fixture_pool_create(void);

/* Its name (valid after create). */
const char *fixture_pool_name(void);

/* retrace_init() this process against the fixture pool; returns its result. */
int fixture_client_attach(void);

/* Pop up to max trigger entries, in queue order; returns how many. */
size_t fixture_pop_triggers(struct fixture_trigger *out, size_t max);

/* Count whole groups with rt_drain_poll (the reference drainer). */
size_t fixture_drain_trigger_groups(void);

/* Detach and unlink the pool. */
void fixture_pool_destroy(void);

#ifdef __cplusplus
}
#endif

#endif
