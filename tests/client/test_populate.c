/*
 * The client maps its pool with the page tables filled (RETRACE_POPULATE,
 * default 1), so no request pays a page fault on the first touch of a buffer;
 * RETRACE_POPULATE=0 maps lazily. Checked from the kernel's side: the resident
 * set of the client's own mapping of the pool (/proc/self/smaps, Rss counts the
 * pages this process has mapped), not from the client's word. The mapping the
 * test made as creator is told apart by its address. The agent's side (create
 * and take-over populate) is checked the same way.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/testpool.h"
#include "retrace/retrace.h"

#define BUFFER_SIZE 32768u
#define BUFFERS 64u /* 2 MiB of buffers: lazily, attach touches a few pages only */

/*
 * Rss in KiB of the one mapping of /dev/shm/<name> that does not start at
 * `other` (the creator's map), or -1 if there is no such mapping.
 */
static long client_mapping_rss_kib(const char *name, const void *other)
{
	char line[512], path[128];
	FILE *f = fopen("/proc/self/smaps", "r");
	int in_pool = 0;
	long rss = -1;

	ck_assert_ptr_nonnull(f);
	snprintf(path, sizeof path, "/dev/shm%s", name);
	while (fgets(line, sizeof line, f)) {
		unsigned long start, end;
		long kib;
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2) {
			size_t n = strlen(line);
			while (n && line[n - 1] == '\n')
				line[--n] = '\0';
			in_pool = n >= strlen(path) && strcmp(line + n - strlen(path), path) == 0 &&
				  (void *)start != other;
		} else if (in_pool && sscanf(line, "Rss: %ld kB", &kib) == 1) {
			rss = kib;
			in_pool = 0;
		}
	}
	fclose(f);
	return rss;
}

static long pool_kib(const struct rt_pool *p)
{
	return (long)(p->size / 1024);
}

START_TEST(test_client_populates_by_default)
{
	struct rt_pool pool;
	char name[64];
	long rss;

	unsetenv("RETRACE_POPULATE");
	test_pool_name(name, sizeof name, "pop");
	test_pool_create(&pool, name, BUFFER_SIZE, BUFFERS);
	test_client_init(name, 8);
	rss = client_mapping_rss_kib(name, pool.base);
	ck_assert_msg(rss == pool_kib(&pool),
		      "the client's map of the pool has %ld KiB resident of %ld: not populated",
		      rss, pool_kib(&pool));
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_client_maps_lazily_when_asked)
{
	struct rt_pool pool;
	char name[64];
	long rss;

	setenv("RETRACE_POPULATE", "0", 1);
	test_pool_name(name, sizeof name, "pop");
	test_pool_create(&pool, name, BUFFER_SIZE, BUFFERS);
	test_client_init(name, 8);
	rss = client_mapping_rss_kib(name, pool.base);
	ck_assert_msg(rss >= 0 && rss < pool_kib(&pool) / 2,
		      "RETRACE_POPULATE=0: %ld KiB of %ld resident at attach", rss,
		      pool_kib(&pool));
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

/* The creator (the agent) populates by default; a taker-over too. */
START_TEST(test_creator_and_takeover_populate)
{
	struct rt_pool pool, taken;
	char name[64], err[256];
	long rss;

	test_pool_name(name, sizeof name, "pop");
	test_pool_create(&pool, name, BUFFER_SIZE, BUFFERS);
	rss = client_mapping_rss_kib(name, NULL);
	ck_assert_msg(rss == pool_kib(&pool), "creator: %ld of %ld KiB resident", rss,
		      pool_kib(&pool));
	ck_assert_int_eq(rt_pool_takeover(name, 43, &taken, err, sizeof err), RETRACE_OK);
	rss = client_mapping_rss_kib(name, pool.base);
	ck_assert_msg(rss == pool_kib(&taken), "take-over: %ld of %ld KiB resident", rss,
		      pool_kib(&taken));
	rt_pool_detach(&taken);
	test_pool_destroy(&pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("client_populate");
	TCase *tc = tcase_create("populate");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_client_populates_by_default);
	tcase_add_test(tc, test_client_maps_lazily_when_asked);
	tcase_add_test(tc, test_creator_and_takeover_populate);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	test_pool_sweep("pop");
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
