/*
 * Rings across processes: N producer and M consumer processes share a pool's
 * complete queue (single and batch operations mixed); every entry must arrive
 * exactly once. Also: a batch (trigger group) is seen whole or not at all, a
 * full ring refuses a batch without writing anything, and the owner's repairs
 * (a dead producer's claim, counters that make no sense) unblock everyone.
 */
#include <check.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/testpool.h"

#define PRODUCERS 3
#define CONSUMERS 2
#define PER_PRODUCER 100000u

static void produce(struct rt_pool *p, uint32_t who)
{
	struct ck_ring *r = p->ring[RT_Q_COMPLETE];
	struct rt_complete_entry *s = RT_POOL_SLOTS(p, RT_Q_COMPLETE, rt_complete_entry);
	struct rt_complete_entry batch[7];
	uint32_t i = 0, k;
	while (i < PER_PRODUCER) {
		uint32_t n = (i % 3 == 0) ? 1 : 7;
		if (n > PER_PRODUCER - i)
			n = PER_PRODUCER - i;
		for (k = 0; k < n; k++) {
			batch[k].trace_lo = ((uint64_t)who << 32) | (i + k);
			batch[k].buffer_id = who;
			batch[k].bytes = i + k;
		}
		if (n == 1 ? rt_complete_push(r, s, &batch[0]) : rt_complete_push_batch(r, s, batch, n))
			i += n;
		else /* full: let the consumers run (three stress streams and their busy
		      * loops on two cores: spinning here starved them past the timeout) */
			sched_yield();
	}
	_exit(0);
}

/* Each consumer writes what it got into its own region of a shared bitmap
 * (shared between processes: ck_pr, as the pool). */
static void consume(struct rt_pool *p, uint8_t *seen, uint64_t *done,
		    uint64_t total)
{
	struct ck_ring *r = p->ring[RT_Q_COMPLETE];
	struct rt_complete_entry *s = RT_POOL_SLOTS(p, RT_Q_COMPLETE, rt_complete_entry);
	struct rt_complete_entry e[16];
	for (;;) {
		unsigned n = rt_complete_pop_batch(r, s, e, 1 + (unsigned)(rand() % 16)), k;
		for (k = 0; k < n; k++) {
			uint64_t idx = (uint64_t)e[k].buffer_id * PER_PRODUCER + e[k].bytes;
			if (e[k].buffer_id >= PRODUCERS || e[k].bytes >= PER_PRODUCER ||
			    (e[k].trace_lo & 0xffffffffu) != e[k].bytes)
				ck_pr_inc_8(&seen[PRODUCERS * PER_PRODUCER]);
			else
				ck_pr_inc_8(&seen[idx]);
		}
		if (n)
			ck_pr_add_64(done, n);
		else if (ck_pr_load_64(done) >= total)
			break;
		else
			sched_yield(); /* 5 processes on few cores: let producers run */
	}
	_exit(0);
}

START_TEST(test_mpmc_across_processes)
{
	struct rt_pool pool;
	char name[64];
	size_t seen_size = PRODUCERS * PER_PRODUCER + 1;
	uint8_t *seen = mmap(NULL, seen_size + 64, PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint64_t *done = (uint64_t *)(seen + ((seen_size + 7) & ~7ul));
	uint64_t total = (uint64_t)PRODUCERS * PER_PRODUCER, i;
	pid_t kids[PRODUCERS + CONSUMERS];
	int k, status;

	ck_assert_ptr_ne(seen, MAP_FAILED);
	test_pool_name(name, sizeof name, "ring");
	/* 255 buffers: complete ring of 256 slots, so producers often find it full. */
	test_pool_create(&pool, name, 4096, 255);
	for (k = 0; k < PRODUCERS + CONSUMERS; k++) {
		kids[k] = fork();
		ck_assert_int_ge(kids[k], 0);
		if (kids[k] == 0) {
			srand((unsigned)k);
			if (k < PRODUCERS)
				produce(&pool, (uint32_t)k);
			consume(&pool, seen, done, total);
		}
	}
	for (k = 0; k < PRODUCERS + CONSUMERS; k++) {
		ck_assert_int_eq(waitpid(kids[k], &status, 0), kids[k]);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	ck_assert_uint_eq(ck_pr_load_64(done), total);
	ck_assert_uint_eq(seen[PRODUCERS * PER_PRODUCER], 0); /* no torn entry */
	for (i = 0; i < total; i++)
		if (seen[i] != 1)
			ck_abort_msg("entry %llu seen %u times", (unsigned long long)i, seen[i]);
	ck_assert_uint_eq(rt_ring_count(pool.ring[RT_Q_COMPLETE]), 0);
	test_pool_destroy(&pool);
	munmap(seen, seen_size + 64);
}
END_TEST

START_TEST(test_batch_all_or_nothing)
{
	struct rt_pool pool;
	char name[64];
	struct rt_trigger_entry g[100], out[200];
	struct ck_ring *r;
	struct rt_trigger_entry *s;
	unsigned i, n, cap;

	test_pool_name(name, sizeof name, "batch");
	test_pool_create(&pool, name, 4096, 4);
	r = pool.ring[RT_Q_TRIGGER];
	s = RT_POOL_SLOTS(&pool, RT_Q_TRIGGER, rt_trigger_entry);
	cap = pool.hdr->rings[RT_Q_TRIGGER].capacity;
	memset(g, 0, sizeof g);
	for (i = 0; i < 100; i++)
		g[i].trace_lo = i + 1;
	/* Fill to capacity - 1 - 50, then a batch of 60 must fail and leave no trace. */
	for (i = 0; i < cap - 1 - 50; i++)
		ck_assert(rt_trigger_push(r, s, &g[0]));
	ck_assert(!rt_trigger_push_batch(r, s, g, 60));
	ck_assert_uint_eq(rt_ring_count(r), cap - 1 - 50);
	ck_assert(rt_trigger_push_batch(r, s, g, 50));
	ck_assert_uint_eq(rt_ring_count(r), cap - 1);
	ck_assert(!rt_trigger_push(r, s, &g[0]));
	/* Drain the fillers one by one; then the group comes out whole, in order. */
	for (i = 0; i < cap - 1 - 50; i++) {
		ck_assert(rt_trigger_pop(r, s, &out[0]));
		ck_assert_uint_eq(out[0].trace_lo, 1);
	}
	n = rt_trigger_pop_batch(r, s, out, 200);
	ck_assert_uint_eq(n, 50);
	for (i = 0; i < n; i++)
		ck_assert_uint_eq(out[i].trace_lo, i + 1);
	ck_assert_uint_eq(rt_trigger_pop_batch(r, s, out, 200), 0);
	test_pool_destroy(&pool);
}
END_TEST

/*
 * The owner's snapshot (rt_pool_peek_available): what waits for consumers, in
 * order, nothing taken; entries consumed before it are not in it, across the
 * ring's wrap; counters that make no sense give nothing.
 */
START_TEST(test_peek_snapshot)
{
	struct rt_pool pool;
	char name[64];
	struct rt_available_entry in[64], out[64];
	struct ck_ring *r;
	unsigned i, n, cap, round;

	test_pool_name(name, sizeof name, "peek");
	test_pool_create(&pool, name, 4096, 16);
	r = pool.ring[RT_Q_AVAILABLE];
	cap = pool.hdr->rings[RT_Q_AVAILABLE].capacity;
	/* The fresh pool's free buffers are queued: the snapshot lists all 16. */
	ck_assert_uint_eq(rt_pool_peek_available(&pool, out, 64), 16);
	ck_assert_uint_eq(rt_pool_pop_available(&pool, out, 64), 16);
	ck_assert_uint_eq(rt_pool_peek_available(&pool, out, 64), 0);
	/* Enough rounds to wrap the ring several times. */
	for (round = 0; round < 4 * cap / 10 + 3; round++) {
		for (i = 0; i < 10; i++)
			in[i].buffer_id = round * 10 + i;
		ck_assert(rt_pool_push_available(&pool, in, 10));
		ck_assert_uint_eq(rt_pool_pop_available(&pool, out, 3), 3); /* a client takes 3 */
		n = rt_pool_peek_available(&pool, out, 64);
		ck_assert_uint_eq(n, 7);
		for (i = 0; i < n; i++)
			ck_assert_uint_eq(out[i].buffer_id, round * 10 + 3 + i);
		ck_assert_uint_eq(rt_pool_peek_available(&pool, out, 4), 4); /* max holds */
		ck_assert_uint_eq(rt_ring_count(r), 7);                       /* nothing taken */
		ck_assert_uint_eq(rt_pool_pop_available(&pool, out, 64), 7);
	}
	/* More consumed than produced (a client wrote the counters): nothing. */
	ck_pr_store_uint(&r->c_head, ck_pr_load_uint(&r->p_tail) + 5);
	ck_assert_uint_eq(rt_pool_peek_available(&pool, out, 64), 0);
	test_pool_destroy(&pool);
}
END_TEST

/*
 * The owner's repairs, on one ring: a producer stuck behind a dead claim (in a
 * child, waiting for ever as clients do) returns once the owner publishes the
 * claims, and its entries arrive after the dead claim's; a producer with a
 * bounded wait hands back a pending claim that it publishes itself once the
 * claims before it are; counters that make no sense yield nothing and refuse
 * pushes (no loop waits on them) until the owner resets the ring.
 */
START_TEST(test_owner_repairs)
{
	struct rt_pool pool;
	struct rt_complete_entry e[4], out[16];
	struct rt_ring_counters c;
	struct rt_ring_claim claim;
	struct ck_ring *r;
	struct rt_complete_entry *s;
	char name[64];
	unsigned mask, ph, n;
	pid_t kid;
	int status;

	test_pool_name(name, sizeof name, "repair");
	test_pool_create(&pool, name, 4096, 8);
	r = pool.ring[RT_Q_COMPLETE];
	s = RT_POOL_SLOTS(&pool, RT_Q_COMPLETE, rt_complete_entry);
	mask = pool.geo.ring_mask[RT_Q_COMPLETE];
	memset(e, 0, sizeof e);
	/* A dead producer: two slots claimed, never published. */
	ph = ck_pr_load_uint(&r->p_head);
	ck_assert(ck_pr_cas_uint(&r->p_head, ph, ph + 2));
	kid = fork();
	ck_assert_int_ge(kid, 0);
	if (kid == 0) {
		struct rt_complete_entry mine = { .trace_lo = 77, .buffer_id = 1, .bytes = 5 };
		_exit(rt_complete_push(r, s, &mine) ? 0 : 1);
	}
	while (ck_pr_load_uint(&r->p_head) != ph + 3) /* the child claimed behind it */
		sched_yield();
	ck_assert_int_eq(rt_pool_pop_complete(&pool, out, 16), 0);
	ck_assert(rt_ring_still(r, &c));
	ck_assert(rt_ring_counters_valid(&c, mask));
	ck_assert(rt_ring_publish_claims(r, &c));
	ck_assert_int_eq(waitpid(kid, &status, 0), kid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_uint_eq(rt_pool_pop_complete(&pool, out, 16), 3);
	ck_assert_uint_eq(out[2].trace_lo, 77);

	/* A bounded wait behind a dead claim: pending, finished once published. */
	ph = ck_pr_load_uint(&r->p_head);
	ck_assert(ck_pr_cas_uint(&r->p_head, ph, ph + 1));
	e[0].trace_lo = 78;
	ck_assert_int_eq(rt_ring_enqueue_claim(r, mask, s, e, sizeof e[0], 1, 0, &claim),
			 RT_RING_PENDING);
	ck_assert_uint_eq(claim.start, ph + 1);
	ck_assert_int_eq(rt_ring_finish_claim(r, &claim), 0);
	ck_assert_int_eq(rt_pool_pop_complete(&pool, out, 16), 0);
	ck_pr_store_uint(&r->p_tail, ph + 1); /* the slow producer before us publishes */
	ck_assert_int_eq(rt_ring_finish_claim(r, &claim), 1);
	ck_assert_uint_eq(rt_pool_pop_complete(&pool, out, 16), 2);
	ck_assert_uint_eq(out[1].trace_lo, 78);

	/* Nonsense counters: no entry, no push, no hang; then a reset. */
	ck_pr_store_uint(&r->c_head, ck_pr_load_uint(&r->p_head) + 1000);
	ck_assert_int_eq(rt_pool_pop_complete(&pool, out, 16), 0);
	ck_assert_int_eq(rt_complete_pop_batch(r, s, out, 16), 0);
	ck_assert(!rt_complete_push_batch(r, s, e, 1));
	ck_assert(rt_ring_still(r, &c));
	ck_assert(!rt_ring_counters_valid(&c, mask));
	rt_ring_reset(r);
	ck_assert(rt_complete_push_batch(r, s, e, 4));
	n = rt_pool_pop_complete(&pool, out, 16);
	ck_assert_uint_eq(n, 4);
	test_pool_destroy(&pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("shm_ring");
	TCase *tc = tcase_create("ring");
	tcase_set_timeout(tc, 100);
	tcase_add_test(tc, test_mpmc_across_processes);
	tcase_add_test(tc, test_batch_all_or_nothing);
	tcase_add_test(tc, test_peek_snapshot);
	tcase_add_test(tc, test_owner_repairs);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
