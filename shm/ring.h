/*
 * shm/ring.h — typed, bounded, lock-free MPMC rings that live in shared memory.
 *
 * Owns: the single and batch enqueue/dequeue operations on a Concurrency Kit
 * ring (struct ck_ring plus a slot array) whose entries are fixed-size structs
 * copied by value. Both the ring and its slots sit in the pool's shared object;
 * nothing here holds a pointer across processes (ck passes the slot array per
 * call, so every process uses its own mapping address).
 *
 * Promises:
 *   - Single operations are batches of one. ck's own ck_ring_{enqueue,dequeue}_mpmc
 *     (CK_RING_PROTOTYPE) still interoperate on the same rings, but their commit
 *     wait neither yields nor survives a repair, so nothing of ours uses them.
 *     The commit wait of ours sleeps (rt_ring_pause) after RT_RING_SPIN_LIMIT
 *     spins.
 *   - Batch operations follow ck's protocol (a producer claims slots by a CAS on
 *     p_head, copies, waits for p_tail to reach its claim, then publishes by
 *     moving p_tail, with a CAS where ck stores; a consumer copies then claims by
 *     a CAS on c_head) but move n counters at once. A batch enqueue is all-or-nothing and its entries become visible to
 *     consumers at the same instant: that is how a trigger and its lateral traces
 *     reach the agent as one group.
 *   - A ring of capacity C (a power of two) holds at most C - 1 entries (ck's rule).
 *
 * Untrusted rings (every process can write the counters and the ring's own
 * size and mask): the _m forms take the index mask from the caller, who keeps
 * its own copy of the geometry, so no slot outside the array is ever touched;
 * no loop waits on counters that make no sense (a consumer that finds more
 * than a ring can hold returns 0, a producer finds the ring full); and the
 * commit wait ends when p_tail passes the producer's claim, which only the
 * pool's owner does, to repair a ring (below).
 *
 * A producer killed between its claim and its publish stalls later producers
 * of that ring in the commit wait. The window is a handful of instructions.
 * The owner repairs it (rt_ring_publish_claims, like ck_ring_repair but with a
 * CAS, so it never moves p_tail backwards): when p_tail has stood still behind
 * p_head for a long time, it moves p_tail to p_head. Producers waiting behind
 * the dead claim then find p_tail past their own claim: their entries, copied
 * before they waited, are published, and they return. Producers publish with a
 * CAS from their claim for the same reason. docs/shm-abi.md has the rules.
 */
#ifndef RETRACE_SHM_RING_H
#define RETRACE_SHM_RING_H

#include <ck_ring.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

/* Pause-spins before a producer waiting on an earlier one gives its core away. */
#define RT_RING_SPIN_LIMIT 256u

/* A waiting producer's nap once the spin is over: the shortest sleep (the
 * kernel's timer slack makes it ~50 us), leaving the run queue. */
static inline void rt_ring_pause(void)
{
	struct timespec ns = { 0, 1000 };
	nanosleep(&ns, NULL);
}

/* wait_limit for a producer that waits as long as it takes (clients). */
#define RT_RING_WAIT_FOREVER (~0ul)

/* A claim whose commit wait was given up: slots [start, end), written. */
struct rt_ring_claim {
	unsigned int start, end;
};

enum {
	RT_RING_NOT_ENQUEUED = 0, /* full, or counters that make no sense: nothing written */
	RT_RING_PUBLISHED = 1,    /* visible to consumers (or to be, by a repair past it) */
	RT_RING_PENDING = 2,      /* written and claimed; publish with rt_ring_finish_claim */
};

/*
 * Enqueue n entries of ts bytes each, all or nothing, indexing slots with
 * `mask` (the caller's own copy: capacity - 1). After `wait_limit` naps in the
 * commit wait (RT_RING_WAIT_FOREVER: never) the producer stops waiting: its
 * entries are written and claimed, *pending gets the claim, and the caller
 * publishes it later with rt_ring_finish_claim (an earlier producer was slow),
 * or the owner's repair does (an earlier producer died).
 */
static inline int rt_ring_enqueue_claim(struct ck_ring *ring, unsigned int mask,
					void *slots, const void *entries,
					unsigned int ts, unsigned int n,
					unsigned long wait_limit,
					struct rt_ring_claim *pending)
{
	unsigned int producer, consumer, i;
	unsigned long k;

	if (n == 0)
		return RT_RING_PUBLISHED;
	if (n > mask)
		return RT_RING_NOT_ENQUEUED;
	producer = ck_pr_load_uint(&ring->p_head);
	for (;;) {
		/* The producer snapshot must be current with respect to consumer. */
		ck_pr_fence_load();
		consumer = ck_pr_load_uint(&ring->c_head);
		if ((producer - consumer) <= mask - n) {
			if (ck_pr_cas_uint_value(&ring->p_head, producer,
						 producer + n, &producer))
				break;
		} else {
			unsigned int fresh;

			ck_pr_fence_load();
			fresh = ck_pr_load_uint(&ring->p_head);
			if (fresh == producer)
				return RT_RING_NOT_ENQUEUED; /* really full (or nonsense) */
			producer = fresh;
		}
	}
	for (i = 0; i < n; i++)
		memcpy((char *)slots + (size_t)ts * ((producer + i) & mask),
		       (const char *)entries + (size_t)ts * i, ts);
	/* Publish in claim order: wait for earlier producers. One preempted in its
	 * claim window holds everyone behind it for its time slice, so after a short
	 * spin give the core away instead of burning it — by sleeping, not by
	 * sched_yield: under CFS a yielder stays runnable and is picked again at
	 * once, so with more runnable tasks than cores the waiters kept the
	 * preempted claimant off the CPU and every publish waited a round of the
	 * run queue (shm_test_ring: 3 producers, 2 consumers, 1 s alone, > 100 s
	 * at load 30). A sleeping waiter leaves the run queue to the claimant. */
	for (k = 0;; k++) {
		unsigned int tail = ck_pr_load_uint(&ring->p_tail);

		if (tail == producer)
			break;
		if ((int)(tail - producer) > 0)
			return RT_RING_PUBLISHED; /* the owner published past our claim */
		if (k < RT_RING_SPIN_LIMIT) {
			ck_pr_stall();
			continue;
		}
		if (wait_limit != RT_RING_WAIT_FOREVER &&
		    k - RT_RING_SPIN_LIMIT >= wait_limit) {
			pending->start = producer;
			pending->end = producer + n;
			return RT_RING_PENDING;
		}
		rt_ring_pause();
	}
	ck_pr_fence_store();
	/* A CAS, not a store: if the owner moved p_tail past us meanwhile, it must
	 * not go back. */
	ck_pr_cas_uint(&ring->p_tail, producer, producer + n);
	return RT_RING_PUBLISHED;
}

/*
 * Publish a pending claim once the claims before it are: 1 when it is visible
 * (published now, or earlier by a repair past it), 0 while an earlier claim
 * still is not. Pending claims of one producer are finished in claim order.
 */
static inline int rt_ring_finish_claim(struct ck_ring *ring, const struct rt_ring_claim *c)
{
	unsigned int tail = ck_pr_load_uint(&ring->p_tail);

	if (tail == c->start) {
		ck_pr_fence_store();
		if (ck_pr_cas_uint(&ring->p_tail, c->start, c->end))
			return 1;
		tail = ck_pr_load_uint(&ring->p_tail);
	}
	return (int)(tail - c->start) > 0;
}

/*
 * As rt_ring_enqueue_claim, true unless nothing was written; a claim whose wait
 * was given up is left to the owner's repair.
 */
static inline bool rt_ring_enqueue_batch_m(struct ck_ring *ring, unsigned int mask,
					   void *slots, const void *entries,
					   unsigned int ts, unsigned int n,
					   unsigned long wait_limit)
{
	struct rt_ring_claim ignored;

	return rt_ring_enqueue_claim(ring, mask, slots, entries, ts, n, wait_limit,
				     &ignored) != RT_RING_NOT_ENQUEUED;
}

/*
 * Dequeue up to max entries with the caller's mask; returns how many were
 * copied into out. Counters that put more than `mask` entries in the ring
 * (a corrupt ring) give 0: the owner resets such a ring.
 */
static inline unsigned int rt_ring_dequeue_batch_m(struct ck_ring *ring,
						   unsigned int mask,
						   const void *slots, void *out,
						   unsigned int ts,
						   unsigned int max)
{
	unsigned int consumer, producer, n, i;

	if (max == 0)
		return 0;
	consumer = ck_pr_load_uint(&ring->c_head);
	for (;;) {
		ck_pr_fence_load();
		producer = ck_pr_load_uint(&ring->p_tail);
		n = producer - consumer;
		if (n == 0)
			return 0;
		if (n > mask) {
			/* A stale consumer snapshot (reload and retry), or nonsense. */
			unsigned int fresh = ck_pr_load_uint(&ring->c_head);

			if (fresh == consumer)
				return 0;
			consumer = fresh;
			continue;
		}
		if (n > max)
			n = max;
		ck_pr_fence_load();
		for (i = 0; i < n; i++)
			memcpy((char *)out + (size_t)ts * i,
			       (const char *)slots +
				       (size_t)ts * ((consumer + i) & mask),
			       ts);
		/* The copies must complete before the slots are released. */
		ck_pr_fence_store_atomic();
		if (ck_pr_cas_uint_value(&ring->c_head, consumer, consumer + n,
					 &consumer))
			break;
	}
	return n;
}

/* The forms that trust the ring's own mask (a client's view of its pool). */
static inline bool rt_ring_enqueue_batch(struct ck_ring *ring, void *slots,
					 const void *entries, unsigned int ts,
					 unsigned int n)
{
	return rt_ring_enqueue_batch_m(ring, ck_pr_load_uint(&ring->mask), slots,
				       entries, ts, n, RT_RING_WAIT_FOREVER);
}

static inline unsigned int rt_ring_dequeue_batch(struct ck_ring *ring,
						 const void *slots, void *out,
						 unsigned int ts,
						 unsigned int max)
{
	return rt_ring_dequeue_batch_m(ring, ck_pr_load_uint(&ring->mask), slots,
				       out, ts, max);
}

/* ---- the owner's view: checks and repairs ---- */

struct rt_ring_counters {
	unsigned int c_head, p_tail, p_head;
};

/*
 * Read the three counters twice; 1 if nothing moved in between (the values
 * held together at one instant, so they can be judged), 0 if the ring is live.
 */
static inline int rt_ring_still(const struct ck_ring *ring, struct rt_ring_counters *c)
{
	struct rt_ring_counters again;

	c->c_head = ck_pr_load_uint(&ring->c_head);
	c->p_tail = ck_pr_load_uint(&ring->p_tail);
	c->p_head = ck_pr_load_uint(&ring->p_head);
	ck_pr_fence_load();
	again.c_head = ck_pr_load_uint(&ring->c_head);
	again.p_tail = ck_pr_load_uint(&ring->p_tail);
	again.p_head = ck_pr_load_uint(&ring->p_head);
	return again.c_head == c->c_head && again.p_tail == c->p_tail &&
	       again.p_head == c->p_head;
}

/*
 * ck_ring_valid's rules, with wrap-around and the caller's mask: at most mask
 * entries claimed, and the published ones a part of them.
 */
static inline bool rt_ring_counters_valid(const struct rt_ring_counters *c,
					  unsigned int mask)
{
	unsigned int used = c->p_head - c->c_head, published = c->p_tail - c->c_head;

	return used <= mask && published <= used;
}

/* Publish every claim up to c->p_head (producers that died in their window). */
static inline bool rt_ring_publish_claims(struct ck_ring *ring,
					  const struct rt_ring_counters *c)
{
	return ck_pr_cas_uint(&ring->p_tail, c->p_tail, c->p_head);
}

/*
 * Empty the ring where its producers are (what it held is dropped): the owner's
 * answer to counters that make no sense. Producers that claimed before p_head
 * find p_tail past their claim and return; consumers reload c_head.
 */
static inline void rt_ring_reset(struct ck_ring *ring)
{
	unsigned int head = ck_pr_load_uint(&ring->p_head);

	ck_pr_store_uint(&ring->p_tail, head);
	ck_pr_fence_store();
	ck_pr_store_uint(&ring->c_head, head);
}

/*
 * The owner's snapshot of what a ring holds for its consumers: the published,
 * unconsumed entries [c_head, p_tail), at most max, copied into out, nothing
 * moved. c_head is read first, so an entry consumed before the call began is
 * never reported; one consumed during the copy may be (a snapshot, not a
 * claim). Counters that make no sense give 0.
 */
static inline unsigned int rt_ring_peek_m(const struct ck_ring *ring, unsigned int mask,
					  const void *slots, void *out, unsigned int ts,
					  unsigned int max)
{
	unsigned int consumer = ck_pr_load_uint(&ring->c_head), producer, n, i;

	ck_pr_fence_load();
	producer = ck_pr_load_uint(&ring->p_tail);
	n = producer - consumer;
	if (n > mask)
		return 0;
	if (n > max)
		n = max;
	ck_pr_fence_load();
	for (i = 0; i < n; i++)
		memcpy((char *)out + (size_t)ts * i,
		       (const char *)slots + (size_t)ts * ((consumer + i) & mask), ts);
	return n;
}

static inline unsigned int rt_ring_count(const struct ck_ring *ring)
{
	return ck_ring_size(ring);
}

/*
 * RT_RING_TYPED(name, type) defines, for entries of `struct type`:
 *   rt_<name>_push(ring, slots, const struct type *e)           -> bool
 *   rt_<name>_pop(ring, slots, struct type *e)                  -> bool
 *   rt_<name>_push_batch(ring, slots, const struct type *e, n)  -> bool
 *   rt_<name>_pop_batch(ring, slots, struct type *e, max)       -> unsigned
 */
#define RT_RING_TYPED(name, type)                                              \
	CK_RING_PROTOTYPE(name, type)                                          \
	static inline bool rt_##name##_push(struct ck_ring *r, struct type *s, \
					    const struct type *e)             \
	{                                                                      \
		return rt_ring_enqueue_batch(r, s, e, sizeof(struct type), 1); \
	}                                                                      \
	static inline bool rt_##name##_pop(struct ck_ring *r, struct type *s,  \
					   struct type *e)                     \
	{                                                                      \
		return rt_ring_dequeue_batch(r, s, e, sizeof(struct type), 1)  \
		       == 1;                                                   \
	}                                                                      \
	static inline bool rt_##name##_push_batch(                             \
		struct ck_ring *r, struct type *s, const struct type *e,       \
		unsigned int n)                                                \
	{                                                                      \
		return rt_ring_enqueue_batch(r, s, e, sizeof(struct type), n); \
	}                                                                      \
	static inline unsigned int rt_##name##_pop_batch(                      \
		struct ck_ring *r, struct type *s, struct type *e,             \
		unsigned int max)                                              \
	{                                                                      \
		return rt_ring_dequeue_batch(r, s, e, sizeof(struct type),     \
					     max);                             \
	}

#endif
