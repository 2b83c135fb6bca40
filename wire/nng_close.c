/*
 * nng_close.c — bounded socket close (see nng_close.h for why).
 *
 * The caller hands the socket to a detached thread that calls nng_close() and
 * then raises `done` under a mutex. The caller waits on a condition variable
 * until an absolute CLOCK_MONOTONIC deadline (its own, or one shared by all the
 * closes of a daemon's exit; a deadline already past returns at once).
 * Whoever finishes last frees the shared record: the caller if
 * the close finished in time, the thread if the caller gave up (`abandoned`).
 */
#include "nng_close.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

struct closer {
	nng_socket sock;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
	int abandoned;
};

static _Atomic uint64_t abandoned_count;

static void closer_free(struct closer *c)
{
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static void *closer_main(void *arg)
{
	struct closer *c = arg;
	int abandoned;
	nng_close(c->sock);
	pthread_mutex_lock(&c->mu);
	c->done = 1;
	abandoned = c->abandoned;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	if (abandoned)
		closer_free(c);
	return NULL;
}

void rt_nng_close_deadline(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000u;
	ts->tv_nsec += (long)(ms % 1000u) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

int rt_nng_close_bounded(nng_socket s, unsigned wait_ms)
{
	struct timespec by;
	rt_nng_close_deadline(&by, wait_ms);
	return rt_nng_close_by(s, &by);
}

int rt_nng_close_by(nng_socket s, const struct timespec *by)
{
	struct closer *c = calloc(1, sizeof *c);
	pthread_condattr_t ca;
	pthread_attr_t ta;
	pthread_t t;
	int finished;

	if (!c) {
		nng_close(s); /* no memory for the guard: close unguarded */
		return 0;
	}
	c->sock = s;
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &ta, closer_main, c) != 0) {
		pthread_attr_destroy(&ta);
		closer_free(c);
		nng_close(s);
		return 0;
	}
	pthread_attr_destroy(&ta);
	pthread_mutex_lock(&c->mu);
	while (!c->done)
		if (pthread_cond_timedwait(&c->cv, &c->mu, by) == ETIMEDOUT)
			break;
	finished = c->done;
	if (!finished)
		c->abandoned = 1;
	pthread_mutex_unlock(&c->mu);
	if (!finished) {
		atomic_fetch_add_explicit(&abandoned_count, 1, memory_order_relaxed);
		return -1;
	}
	closer_free(c);
	return 0;
}

uint64_t rt_nng_close_abandoned(void)
{
	return atomic_load_explicit(&abandoned_count, memory_order_relaxed);
}
