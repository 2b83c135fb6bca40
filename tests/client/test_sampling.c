/*
 * Trace percentage (coherent scale-back): two processes decide identically for
 * the same ids; the observed fraction is within 1 % of the configured power-of-
 * two rate over 10^6 ids; head sampling fires exactly for the hash-selected ids.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/collect.h"
#include "common/testpool.h"
#include "retrace/retrace.h"

#define N_IDS 1000000u

static void configure(const char *pool, uint32_t shift, uint32_t head)
{
	struct retrace_config cfg;
	retrace_config_from_env(&cfg);
	cfg.pool_name = pool;
	cfg.sample_shift = shift;
	cfg.head_shift = head;
	cfg.quiet = 1;
	retrace_init(&cfg);
}

/* Sequential ids on purpose: the decision must not depend on id randomness. */
static retrace_trace_id id_of(uint32_t i)
{
	retrace_trace_id id = {0x5eed, (uint64_t)i * 4096 + 1};
	return id;
}

static uint32_t decide_all(uint8_t *out)
{
	uint32_t i, kept = 0;
	for (i = 0; i < N_IDS; i++) {
		out[i] = (uint8_t)retrace_begin(id_of(i));
		kept += out[i];
		retrace_end();
	}
	return kept;
}

START_TEST(test_two_processes_agree)
{
	uint32_t shift = (uint32_t)_i + 1; /* 50 %, 25 %, 12.5 %, 6.25 % */
	uint8_t *child = mmap(NULL, N_IDS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint8_t *mine = malloc(N_IDS);
	double rate = 1.0 / (double)(1u << shift), got;
	uint32_t kept;
	int status;
	pid_t pid;

	ck_assert_ptr_ne(child, MAP_FAILED);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		configure("/rt-test-no-pool", shift, 0);
		decide_all(child);
		_exit(0);
	}
	configure("/rt-test-no-pool", shift, 0);
	kept = decide_all(mine);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_msg(memcmp(mine, child, N_IDS) == 0, "the two processes disagree");
	got = (double)kept / N_IDS;
	ck_assert_msg(fabs(got - rate) <= 0.01 * rate, "rate %.5f, wanted %.5f +- 1%%", got, rate);
	free(mine);
	munmap(child, N_IDS);
}
END_TEST

START_TEST(test_zero_shift_records_all)
{
	uint32_t i;
	configure("/rt-test-no-pool", 0, 0);
	for (i = 0; i < 10000; i++) {
		ck_assert_int_eq(retrace_begin(id_of(i)), 1);
		retrace_end();
	}
	ck_assert(retrace_sampled(id_of(1), 0));
	ck_assert(!retrace_sampled(id_of(1), 64));
}
END_TEST

START_TEST(test_head_sampling_triggers)
{
	struct rt_pool pool;
	struct collection col = {0};
	char name[64];
	uint32_t i, expect = 0;
	size_t k = 0;

	test_pool_name(name, sizeof name, "head");
	test_pool_create(&pool, name, 4096, 16);
	configure(name, 1, 4); /* record 1/2, head-trigger 1/16 */
	for (i = 0; i < 2000; i++) {
		int rec = retrace_begin(id_of(i));
		ck_assert_int_eq(rec, retrace_sampled(id_of(i), 1));
		retrace_end();
		if (retrace_sampled(id_of(i), 4))
			expect++;
	}
	collect_all(&pool, &col);
	ck_assert_uint_gt(expect, 60);
	ck_assert_uint_eq(col.n_triggers, expect);
	for (i = 0; i < 2000; i++)
		if (retrace_sampled(id_of(i), 4)) {
			ck_assert_uint_eq(col.triggers[k][0], id_of(i).lo);
			ck_assert_uint_eq(col.triggers[k][1], RETRACE_TRIGGER_HEAD_SAMPLED);
			k++;
		}
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

/*
 * The shift that recorded a trace travels in its buffers' flags (shm/pool.h,
 * ABI 4), for the agent to report as the slice's rate: every buffer of a
 * recorded trace carries it, the full ones in the middle as well as the last.
 */
START_TEST(test_rate_in_buffer_flags)
{
	uint32_t shift = (uint32_t)_i * 3; /* 0, 3 */
	struct rt_pool pool;
	struct collection col = {0};
	static uint8_t rec[3000];
	char name[64];
	uint32_t i, recorded = 0;

	test_pool_name(name, sizeof name, "rate");
	test_pool_create(&pool, name, 4096, 256);
	configure(name, shift, 0);
	memset(rec, 0x5a, sizeof rec);
	for (i = 0; i < 64; i++) {
		if (!retrace_begin(id_of(i)))
			continue;
		recorded++;
		retrace_tracepoint(rec, sizeof rec);
		retrace_tracepoint(rec, sizeof rec); /* a second buffer */
		retrace_end();
	}
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_gt(recorded, 0);
	ck_assert_uint_ge(col.n_bufs, 2 * recorded);
	for (size_t k = 0; k < col.n_bufs; k++) {
		uint32_t f = col.bufs[k].h.flags;
		ck_assert_msg(rt_buf_rate_exp(f) == shift, "buffer %zu: flags %#x, shift %u", k, f,
			      shift);
		ck_assert(f & RT_BUF_SEALED);
	}
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("client_sampling");
	TCase *tc = tcase_create("sampling");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_two_processes_agree, 0, 4);
	tcase_add_test(tc, test_zero_shift_records_all);
	tcase_add_test(tc, test_head_sampling_triggers);
	tcase_add_loop_test(tc, test_rate_in_buffer_flags, 0, 2);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
