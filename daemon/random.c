/*
 * daemon/random.c — getrandom without blocking; the fallback mixes the
 * monotonic clock's nanoseconds, its seconds and an address through splitmix64's
 * finaliser, which is enough to keep a remote sender from predicting it.
 */
#include "random.h"

#include <sys/random.h>
#include <sys/types.h>
#include <time.h>

uint64_t rt_random_seed(const void *where)
{
	uint64_t x;
	struct timespec ts;
	if (getrandom(&x, sizeof x, GRND_NONBLOCK) == (ssize_t)sizeof x)
		return x;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	x = (uint64_t)ts.tv_nsec << 32 ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)where;
	return rt_mix64(x);
}
