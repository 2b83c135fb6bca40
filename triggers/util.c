/*
 * util.c — helpers shared by the triggers: thread slots, default shard
 * counts and clocks.
 *
 * Thread slots: the first time a thread asks, it takes the next value of a
 * process-wide counter (documented global of this module) and keeps it in a
 * thread-local; sharded triggers use slot % shards, so a thread always feeds the
 * same shard and threads spread round-robin over the shards.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#include <stdio.h>

static atomic_uint next_thread_slot;
_Thread_local unsigned int rtt_thread_slot_plus_one
	__attribute__((tls_model("initial-exec")));

unsigned int rtt_thread_slot_assign(void)
{
	rtt_thread_slot_plus_one =
		atomic_fetch_add_explicit(&next_thread_slot, 1, memory_order_relaxed) + 1;
	return rtt_thread_slot_plus_one - 1;
}

unsigned int rtt_default_shards(size_t bytes_per_shard)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int want = cpus > 0 && cpus < (long)RTT_MAX_DEFAULT_SHARDS ? 2u * (unsigned int)cpus
									    : RTT_MAX_DEFAULT_SHARDS;
	unsigned int n = 4;
	while (n < want && n < RTT_MAX_DEFAULT_SHARDS)
		n <<= 1;
	while (n > 1 && (size_t)n * bytes_per_shard > RTT_DEFAULT_SHARD_BYTES)
		n >>= 1;
	return n;
}

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t rtt_coarse_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC_COARSE);
}

uint64_t rtt_mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

void *rtt_zalloc_aligned(size_t size)
{
	size_t rounded = (size + RTT_CACHE_LINE - 1) & ~(size_t)(RTT_CACHE_LINE - 1);
	void *p = aligned_alloc(RTT_CACHE_LINE, rounded);
	if (p)
		memset(p, 0, rounded);
	return p;
}

void rtt_default_name(uint32_t trigger_id, const char *kind, double p)
{
	char name[RETRACE_TRIGGER_NAME_MAX + 1];
	if (trigger_id == 0 || trigger_id > RETRACE_TRIGGER_USER_MAX ||
	    retrace_trigger_name_get(trigger_id))
		return;
	if (p > 0)
		snprintf(name, sizeof name, "%s-p%g", kind, p);
	else
		snprintf(name, sizeof name, "%s", kind);
	(void)retrace_trigger_name(trigger_id, name);
}
