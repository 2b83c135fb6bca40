/*
 * tests/common/testpool.h — helpers for suites that need a real pool: a unique
 * name per process and test, creation with a small geometry, and cleanup.
 */
#ifndef RETRACE_TESTS_TESTPOOL_H
#define RETRACE_TESTS_TESTPOOL_H

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/suite.h"
#include "retrace/retrace.h"
#include "shm/pool.h"

static inline void test_pool_name(char *out, size_t n, const char *tag)
{
	static unsigned counter;
	snprintf(out, n, "/rt-test-%s-%d-%u", tag, (int)getpid(), counter++);
}

/*
 * Remove pools named by test_pool_name(tag) whose process is gone: a failing
 * ck_assert ends a forked test with _exit, before its own cleanup. Call at the
 * end of main.
 */
static inline void test_pool_sweep(const char *tag)
{
	char prefix[64];
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	if (!d)
		return;
	snprintf(prefix, sizeof prefix, "rt-test-%s-", tag);
	while ((e = readdir(d)) != NULL) {
		char path[300];
		long pid;
		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		pid = strtol(e->d_name + strlen(prefix), NULL, 10);
		if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue; /* still running (or not ours to judge) */
		snprintf(path, sizeof path, "/%s", e->d_name);
		shm_unlink(path);
	}
	closedir(d);
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
