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

/* 64 random bits from the kernel (getrandom); if it has none to give, the
 * clock mixed with `where` (an address: differs per table and per run). */
uint64_t rt_random_seed(const void *where);

#endif
