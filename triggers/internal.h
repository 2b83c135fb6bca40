/*
 * triggers/internal.h — pieces shared by the autotrigger files: the spinlock
 * that guards a trigger's state, the sink call, the calling thread's small
 * integer slot and the shard it picks, and the default shard count.
 */
#ifndef RETRACE_TRIGGERS_INTERNAL_H
#define RETRACE_TRIGGERS_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "retrace/triggers.h"

#define RTT_CACHE_LINE 64

/*
 * A test-and-test-and-set spinlock. Critical sections here are a few dozen
 * instructions with no call and no system call, so spinning beats a futex.
 */
typedef struct {
	atomic_uint held;
} rtt_spinlock;

static inline void rtt_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static inline void rtt_lock(rtt_spinlock *l)
{
	while (atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
		while (atomic_load_explicit(&l->held, memory_order_relaxed))
			rtt_cpu_relax();
}

static inline void rtt_unlock(rtt_spinlock *l)
{
	atomic_store_explicit(&l->held, 0, memory_order_release);
}

static inline int rtt_fire(const struct retrace_fire_sink *sink, retrace_trace_id id,
			   uint32_t trigger_id, const retrace_trace_id *lateral,
			   size_t n_lateral)
{
	if (sink->fn)
		return sink->fn(sink->arg, id, trigger_id, lateral, n_lateral);
	return retrace_trigger(id, trigger_id, lateral, n_lateral);
}

static inline int rtt_same_id(retrace_trace_id a, retrace_trace_id b)
{
	return a.hi == b.hi && a.lo == b.lo;
}

/*
 * A small per-thread number, assigned on first use (see util.c). initial-exec
 * TLS: a plain %fs-relative load, no __tls_get_addr call on the hot path (the
 * client library makes the same choice for its own thread state).
 */
extern _Thread_local unsigned int rtt_thread_slot_plus_one
	__attribute__((tls_model("initial-exec")));
unsigned int rtt_thread_slot_assign(void);

static inline unsigned int rtt_thread_slot(void)
{
	unsigned int s = rtt_thread_slot_plus_one;
	return __builtin_expect(s != 0, 1) ? s - 1u : rtt_thread_slot_assign();
}

/*
 * Shards of a sharded trigger: a thread always feeds shard slot % count, so
 * with at most `count` threads alive each owns its shard and no cache line of
 * trigger state moves between cores per sample. count is a power of two when
 * it came from rtt_default_shards (a mask then replaces the division).
 */
static inline unsigned int rtt_shard_index(unsigned int count)
{
	unsigned int slot = rtt_thread_slot();
	return (count & (count - 1u)) == 0 ? slot & (count - 1u) : slot % count;
}

/*
 * The default number of shards for a trigger whose shards cost
 * `bytes_per_shard` each: twice the online CPUs rounded up to a power of two,
 * at least 4 and at most RTT_MAX_DEFAULT_SHARDS, halved while the total would
 * pass RTT_DEFAULT_SHARD_BYTES (a huge window gets fewer shards, never fewer
 * than one).
 */
#define RTT_MAX_DEFAULT_SHARDS 64u
#define RTT_DEFAULT_SHARD_BYTES (16u << 20)
/* Name `trigger_id` "<kind>-<detail>" unless the process named it already
 * (retrace_trigger_name): an autotrigger's default name. */
void rtt_default_name(uint32_t trigger_id, const char *kind, double p);
unsigned int rtt_default_shards(size_t bytes_per_shard);

/* CLOCK_MONOTONIC_COARSE in ns (vDSO, a few ns). */
uint64_t rtt_coarse_ns(void);

/* CLOCK_MONOTONIC in ns. */
uint64_t rtt_mono_ns(void);

/* Zeroed, cache-line aligned memory (NULL on failure); free with free(). */
void *rtt_zalloc_aligned(size_t size);

#endif
