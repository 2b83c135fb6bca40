/*
 * daemon/random.h — seeds no sender can predict, for the daemons' hash tables.
 *
 * Trace ids are chosen by whoever sends a traceparent. A table keyed by them
 * with a fixed hash lets a sender make ids that share a slot, and a long run of
 * them turns every lookup into a scan. Each table draws its seed here once.
 */
#ifndef RETRACE_DAEMON_RANDOM_H
#define RETRACE_DAEMON_RANDOM_H

#include <stdint.h>

/*
 * The splitmix64 finaliser (Stafford's mix 13): a bijection of 64-bit words in
 * which every input bit flips about half the output bits. The daemons' one copy,
 * for table slots (after xor with a seed), seeds and the ring's weights. Its
 * other home is retrace_trace_hash (include/retrace/retrace.h), which is
 * rt_mix64(id.lo + 0x9e3779b97f4a7c15): that one is the sampling contract
 * between hosts and never changes, and daemon/ includes nothing of ours, so the
 * client side uses that one and the daemons this one.
 */
static inline uint64_t rt_mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* 64 random bits from the kernel (getrandom); if it has none to give, the
 * clock mixed with `where` (an address: differs per table and per run). */
uint64_t rt_random_seed(const void *where);

#endif
