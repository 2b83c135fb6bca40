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
 *   - Single operations are ck's own ck_ring_{enqueue,dequeue}_mpmc on typed slots.
 *     The client uses the batch forms only (a batch of one for single entries):
 *     their commit wait yields the core after RT_RING_SPIN_LIMIT spins.
 *   - Batch operations follow ck's protocol exactly (a producer claims slots by a
 *     CAS on p_head, copies, waits for p_tail to reach its claim, then publishes by
 *     storing p_tail; a consumer copies then claims by a CAS on c_head) but move n
 *     counters at once. They interoperate with ck's single operations on the same
 *     ring. A batch enqueue is all-or-nothing and its entries become visible to
 *     consumers at the same instant: that is how a trigger and its lateral traces
 *     reach the agent as one group.
 *   - A ring of capacity C (a power of two) holds at most C - 1 entries (ck's rule).
 *
 * Hazard shared with every MP ring of this design: a producer killed between its
 * claim and its publish stalls later producers of that ring in the commit wait.
 * The window is a handful of instructions; docs/shm-abi.md discusses recovery.
 */
#ifndef RETRACE_SHM_RING_H
#define RETRACE_SHM_RING_H

#include <ck_ring.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>

/* Pause-spins before a producer waiting on an earlier one yields its core. */
#define RT_RING_SPIN_LIMIT 256u

/*
 * Enqueue n entries of ts bytes each, all or nothing. Returns false (nothing
 * written) if fewer than n free slots remain.
 */
static inline bool rt_ring_enqueue_batch(struct ck_ring *ring, void *slots,
					 const void *entries, unsigned int ts,
					 unsigned int n)
{
	const unsigned int mask = ring->mask;
	unsigned int producer, consumer, i;

	if (n == 0)
		return true;
	if (n > mask)
		return false;
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
				return false; /* really full */
			producer = fresh;
		}
	}
	for (i = 0; i < n; i++)
		memcpy((char *)slots + (size_t)ts * ((producer + i) & mask),
		       (const char *)entries + (size_t)ts * i, ts);
	/* Publish in claim order: wait for earlier producers. One preempted in its
	 * claim window holds everyone behind it for its time slice, so after a short
	 * spin give the core away instead of burning it. */
	for (i = 0; ck_pr_load_uint(&ring->p_tail) != producer; i++) {
		if (i < RT_RING_SPIN_LIMIT)
			ck_pr_stall();
		else
			sched_yield();
	}
	ck_pr_fence_store();
	ck_pr_store_uint(&ring->p_tail, producer + n);
	return true;
}

/* Dequeue up to max entries; returns how many were copied into out. */
static inline unsigned int rt_ring_dequeue_batch(struct ck_ring *ring,
						 const void *slots, void *out,
						 unsigned int ts,
						 unsigned int max)
{
	const unsigned int mask = ring->mask;
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
		if (n > mask) { /* stale consumer snapshot: reload and retry */
			consumer = ck_pr_load_uint(&ring->c_head);
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
		return ck_ring_enqueue_mpmc_##name(r, s, (struct type *)e);    \
	}                                                                      \
	static inline bool rt_##name##_pop(struct ck_ring *r, struct type *s,  \
					   struct type *e)                     \
	{                                                                      \
		return ck_ring_dequeue_mpmc_##name(r, s, e);                   \
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
