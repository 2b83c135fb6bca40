/*
 * tests/common/testpool.h — helpers for suites that need a real pool: a unique
 * name per process and test, creation with a small geometry, and cleanup.
 */
#ifndef RETRACE_TESTS_TESTPOOL_H
#define RETRACE_TESTS_TESTPOOL_H

#include <check.h>
#include <stdio.h>
#include <unistd.h>

#include "common/suite.h"
#include "retrace/retrace.h"
#include "shm/pool.h"

static inline void test_pool_name(char *out, size_t n, const char *tag)
{
	static unsigned counter;
	snprintf(out, n, "/rt-test-%s-%d-%u", tag, (int)getpid(), counter++);
}

static inline void test_pool_create(struct rt_pool *p, const char *name,
				    uint32_t buffer_size, uint32_t buffer_count)
{
	struct rt_pool_create_opts o;
	char err[256];
	int rc;
	rt_pool_create_defaults(&o);
	o.name = name;
	o.buffer_size = buffer_size;
	o.buffer_count = buffer_count;
	o.agent_id = 42;
	o.replace = 1;
	rc = rt_pool_create(&o, p, err, sizeof err);
	ck_assert_msg(rc == 0, "create %s: %s", name, err);
}

static inline void test_pool_destroy(struct rt_pool *p)
{
	char name[64];
	snprintf(name, sizeof name, "%s", p->name);
	rt_pool_detach(p);
	rt_pool_unlink(name);
}

/* Attach this process's client to pool `name`, quietly, with a given batch. */
static inline void test_client_init(const char *name, uint32_t batch)
{
	struct retrace_config cfg;
	retrace_config_from_env(&cfg);
	cfg.pool_name = name;
	cfg.batch = batch;
	cfg.quiet = 1;
	ck_assert_int_eq(retrace_init(&cfg), RETRACE_OK);
}

#endif
