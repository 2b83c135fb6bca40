/*
 * triggers/internal.h — pieces shared by the autotrigger files: the spinlock
 * that guards a trigger's state, the sink call, and the calling thread's small
 * integer slot (used to pick a shard).
 */
#ifndef RETRACE_TRIGGERS_INTERNAL_H
#define RETRACE_TRIGGERS_INTERNAL_H

#include <stdatomic.h>
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

/* CLOCK_MONOTONIC_COARSE in ns (vDSO, a few ns). */
uint64_t rtt_coarse_ns(void);

/* CLOCK_MONOTONIC in ns. */
uint64_t rtt_mono_ns(void);

/* Zeroed, cache-line aligned memory (NULL on failure); free with free(). */
void *rtt_zalloc_aligned(size_t size);

#endif
