/*
 * The span-site policy table in the pool (ABI 6): a pool without a table reads
 * as "record everything"; a published table is seen whole through another
 * mapping; a table that does not fit is refused and the previous one stays;
 * attach refuses a header whose table does not fit the object, and the owner
 * puts a scribbled capacity back; and a reader in another process, looking up
 * while the agent republishes as fast as it can, never accepts a mix of two
 * tables (every published table gives all its sites one probability, so a torn
 * read shows up as two different values in one stable read).
 */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/testpool.h"
#include "retrace/retrace.h"

#define NSITES 100

static uint64_t site_of(int i)
{
	char op[32];
	int n = snprintf(op, sizeof op, "op-%d", i);
	return rt_adapt_site_hash("svc", 3, op, (size_t)n);
}

static void create_with_slots(struct rt_pool *p, const char *name, uint32_t slots)
{
	struct rt_pool_create_opts o;
	char err[256];
	rt_pool_create_defaults(&o);
	o.name = name;
	o.buffer_size = 8192;
	o.buffer_count = 16;
	o.policy_slots = slots;
	o.replace = 1;
	ck_assert_msg(rt_pool_create(&o, p, err, sizeof err) == 0, "%s", err);
}

static void attach(struct rt_pool *c, const char *name)
{
	struct rt_pool_attach_opts ao = {.name = name};
	char err[256];
	ck_assert_msg(rt_pool_attach(&ao, c, err, sizeof err) == RETRACE_OK, "%s", err);
}

/* The p16 of a site through reader c, or -1 for "no table / unstable". */
static int read_one(const struct rt_pool *c, uint64_t site)
{
	uint64_t seq;
	uint16_t p16;
	int k = rt_policy_read_begin(c, &seq);
	if (k < 0)
		return -1;
	p16 = rt_adapt_table_lookup(c->policy_slots[k], c->geo.policy_capacity, site);
	return rt_policy_read_end(c, k, seq) ? p16 : -1;
}

START_TEST(test_no_table_reads_as_record)
{
	struct rt_pool pool, c;
	char name[64];
	uint64_t s = site_of(1);
	double p = 0.5;
	test_pool_name(name, sizeof name, "nopol");
	create_with_slots(&pool, name, 0);
	attach(&c, name);
	ck_assert_ptr_null(c.policy);
	ck_assert_int_eq(read_one(&c, s), -1);
	ck_assert_int_eq(rt_pool_policy_publish(&pool, &s, &p, 1), -1);
	rt_pool_detach(&c);
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_publish_and_read)
{
	struct rt_pool pool, c;
	char name[64];
	uint64_t sites[NSITES];
	double probs[NSITES];
	uint32_t n;
	int i;
	test_pool_name(name, sizeof name, "pol");
	create_with_slots(&pool, name, 512);
	attach(&c, name);
	ck_assert_ptr_nonnull(c.policy);
	ck_assert_uint_eq(c.geo.policy_capacity, 512);
	/* nothing published yet: record */
	ck_assert_int_eq(read_one(&c, site_of(0)), -1);
	ck_assert_uint_eq(rt_pool_policy_generation(&c, &n), 0);
	for (i = 0; i < NSITES; i++) {
		sites[i] = site_of(i);
		probs[i] = i / (double)NSITES;
	}
	ck_assert_int_eq(rt_pool_policy_publish(&pool, sites, probs, NSITES), 0);
	ck_assert_uint_eq(rt_pool_policy_generation(&c, &n), 1);
	ck_assert_uint_eq(n, NSITES);
	for (i = 0; i < NSITES; i++)
		ck_assert_int_eq(read_one(&c, sites[i]), rt_adapt_p16(probs[i]));
	ck_assert_int_eq(read_one(&c, site_of(NSITES + 1)), RT_ADAPT_P16_ALWAYS);
	/* A second table replaces the first whole (the other copy). */
	ck_assert_int_eq(rt_pool_policy_publish(&pool, sites, probs, 10), 0);
	ck_assert_uint_eq(rt_pool_policy_generation(&c, &n), 2);
	ck_assert_uint_eq(n, 10);
	ck_assert_int_eq(read_one(&c, sites[5]), rt_adapt_p16(probs[5]));
	ck_assert_int_eq(read_one(&c, sites[50]), RT_ADAPT_P16_ALWAYS);
	/* Too many sites for the capacity: refused, the live table stays. */
	{
		static uint64_t many[200];
		static double pm[200];
		for (i = 0; i < 200; i++) {
			many[i] = site_of(1000 + i);
			pm[i] = 0.1;
		}
		ck_assert_int_eq(rt_pool_policy_publish(&pool, many, pm, 200), -1);
	}
	ck_assert_uint_eq(rt_pool_policy_generation(&c, &n), 2);
	ck_assert_int_eq(read_one(&c, sites[5]), rt_adapt_p16(probs[5]));
	/* A site 0 makes the build refuse: nothing published. */
	sites[3] = 0;
	ck_assert_int_eq(rt_pool_policy_publish(&pool, sites, probs, 5), -1);
	ck_assert_uint_eq(rt_pool_policy_generation(&c, NULL), 2);
	/* An empty table: record everything. */
	ck_assert_int_eq(rt_pool_policy_publish(&pool, NULL, NULL, 0), 0);
	ck_assert_int_eq(read_one(&c, sites[5]), -1);
	rt_pool_detach(&c);
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_attach_validates_table)
{
	struct rt_pool pool, c;
	struct rt_pool_attach_opts ao = {0};
	char name[64], err[256] = "";
	uint32_t cap;
	test_pool_name(name, sizeof name, "polv");
	create_with_slots(&pool, name, 64);
	ao.name = name;
	cap = pool.hdr->policy_capacity;
	pool.hdr->policy_capacity = 48; /* not a power of two */
	ck_assert_int_eq(rt_pool_attach(&ao, &c, err, sizeof err), RETRACE_E_GEOMETRY);
	ck_assert_ptr_nonnull(strstr(err, "policy table"));
	pool.hdr->policy_capacity = 1u << 20; /* runs into the buffers */
	ck_assert_int_eq(rt_pool_attach(&ao, &c, err, sizeof err), RETRACE_E_GEOMETRY);
	pool.hdr->policy_capacity = cap;
	pool.hdr->policy_offset = pool.geo.buffers_offset; /* past the metadata */
	ck_assert_int_eq(rt_pool_attach(&ao, &c, err, sizeof err), RETRACE_E_GEOMETRY);
	/* The owner puts its own geometry back. */
	ck_assert_uint_eq(rt_pool_restore_geometry(&pool), 1);
	ck_assert_int_eq(rt_pool_attach(&ao, &c, err, sizeof err), RETRACE_OK);
	rt_pool_detach(&c);
	test_pool_destroy(&pool);
}
END_TEST

/* Publishes tables forever (until killed): table k gives every site p_k. */
static void publisher(const char *name)
{
	struct rt_pool p;
	uint64_t sites[NSITES];
	double probs[NSITES];
	uint32_t k;
	int i;
	attach(&p, name);
	for (i = 0; i < NSITES; i++)
		sites[i] = site_of(i);
	for (k = 0;; k++) {
		double v = (double)(k % 1000 + 1) / 1001.0;
		for (i = 0; i < NSITES; i++)
			probs[i] = v;
		if (rt_pool_policy_publish(&p, sites, probs, NSITES) != 0)
			_exit(3);
	}
}

START_TEST(test_concurrent_publish_never_torn)
{
	struct rt_pool pool, c;
	char name[64];
	uint64_t sites[NSITES], stable = 0, unstable = 0, torn = 0, seq, g0;
	pid_t pid;
	int i, rep, status;
	test_pool_name(name, sizeof name, "polc");
	create_with_slots(&pool, name, 512);
	attach(&c, name);
	for (i = 0; i < NSITES; i++)
		sites[i] = site_of(i);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		publisher(name);
	/* Wait (bounded) for the first table, then read hard: each read looks
	 * every site up several times so the publisher gets round to this copy. */
	for (i = 0; i < 1000000 && rt_pool_policy_generation(&c, NULL) == 0; i++)
		usleep(100);
	g0 = rt_pool_policy_generation(&c, NULL);
	ck_assert_uint_gt(g0, 0);
	while (stable < 20000 || rt_pool_policy_generation(&c, NULL) < g0 + 1000) {
		int k = rt_policy_read_begin(&c, &seq), first = -1, mixed = 0;
		if (k < 0) {
			unstable++;
			continue;
		}
		for (rep = 0; rep < 4; rep++)
			for (i = 0; i < NSITES; i++) {
				int v = rt_adapt_table_lookup(c.policy_slots[k],
							      c.geo.policy_capacity, sites[i]);
				if (first < 0)
					first = v;
				else if (v != first)
					mixed = 1;
			}
		if (!rt_policy_read_end(&c, k, seq)) {
			unstable++;
			continue;
		}
		stable++;
		torn += mixed || first == RT_ADAPT_P16_ALWAYS;
		if (stable > 5000000)
			break;
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	ck_assert_msg(WIFSIGNALED(status), "publisher failed: status %d", status);
	ck_assert_msg(torn == 0, "%llu of %llu stable reads mixed two tables (%llu retried)",
		      (unsigned long long)torn, (unsigned long long)stable,
		      (unsigned long long)unstable);
	ck_assert_uint_gt(stable, 0);
	rt_pool_detach(&c);
	test_pool_destroy(&pool);
}
END_TEST

int main(void)
{
	static const char *const tags[] = { "nopol", "pol", "polv", "polc" };
	Suite *s = suite_create("shm_policy");
	int rc;
	TCase *tc = tcase_create("policy");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_no_table_reads_as_record);
	tcase_add_test(tc, test_publish_and_read);
	tcase_add_test(tc, test_attach_validates_table);
	tcase_add_test(tc, test_concurrent_publish_never_torn);
	suite_add_tcase(s, tc);
	rc = test_run_suite(s);
	for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
		test_pool_sweep(tags[i]); /* what a failed test left */
	return rc;
}
