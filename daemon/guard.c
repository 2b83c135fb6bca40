/*
 * daemon/guard.c — connection caps and per-peer token buckets.
 *
 * Connection caps: nng calls the socket's ADD_PRE callback for every new pipe
 * after its handshake and before the socket uses it; a pipe closed there is
 * never seen by the socket and gets no further events. So the callback counts
 * the pipes of each listener (a small table under a mutex: tens to thousands
 * of pipes, one look-up per connect or disconnect), closes a pipe past the cap
 * and counts it; REM_POST gives the slot back. Pipes of dialers are not capped.
 *
 * Peer buckets: a fixed table of RT_PEER_RATE_SLOTS token buckets searched
 * linearly (the peers of an agent's control socket are its coordinator and a
 * few operators).
 */
#include "guard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls.h"

#define CAP_LISTENERS 8

struct cap_pipe {
	uint32_t pipe;
	int slot;
};

struct rt_pipe_cap {
	uint32_t max;
	pthread_mutex_t mu;
	struct {
		int listener;
		uint32_t open;
	} ls[CAP_LISTENERS];
	int nls;
	struct cap_pipe *pipes;
	size_t npipes, cap;
	uint64_t refused, accepted;
};

static int listener_slot(struct rt_pipe_cap *c, int listener)
{
	int i;
	for (i = 0; i < c->nls; i++)
		if (c->ls[i].listener == listener)
			return i;
	if (c->nls == CAP_LISTENERS)
		return CAP_LISTENERS - 1; /* more listeners than slots: the last ones share */
	c->ls[c->nls].listener = listener;
	c->ls[c->nls].open = 0;
	return c->nls++;
}

static void on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct rt_pipe_cap *c = arg;
	uint32_t id = (uint32_t)nng_pipe_id(p);
	size_t i;
	int close_it = 0;
	pthread_mutex_lock(&c->mu);
	if (ev == NNG_PIPE_EV_ADD_PRE) {
		int listener = nng_listener_id(nng_pipe_listener(p));
		int slot;
		if (listener <= 0)
			goto out; /* our own dialled pipe */
		slot = listener_slot(c, listener);
		if (c->max && c->ls[slot].open >= c->max) {
			c->refused++;
			close_it = 1;
			goto out;
		}
		if (c->npipes == c->cap) {
			size_t cap = c->cap ? c->cap * 2 : 32;
			struct cap_pipe *n = realloc(c->pipes, cap * sizeof *n);
			if (!n) {
				c->refused++; /* cannot track it: refuse rather than leak the cap */
				close_it = 1;
				goto out;
			}
			c->pipes = n;
			c->cap = cap;
		}
		c->pipes[c->npipes++] = (struct cap_pipe){ id, slot };
		c->ls[slot].open++;
		c->accepted++;
	} else if (ev == NNG_PIPE_EV_REM_POST) {
		for (i = 0; i < c->npipes; i++)
			if (c->pipes[i].pipe == id) {
				c->ls[c->pipes[i].slot].open--;
				c->pipes[i] = c->pipes[--c->npipes];
				break;
			}
	}
out:
	pthread_mutex_unlock(&c->mu);
	if (close_it)
		nng_pipe_close(p);
}

struct rt_pipe_cap *rt_pipe_cap_attach(nng_socket s, uint32_t max)
{
	struct rt_pipe_cap *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->max = max;
	pthread_mutex_init(&c->mu, NULL);
	if (nng_pipe_notify(s, NNG_PIPE_EV_ADD_PRE, on_pipe, c) != 0 ||
	    nng_pipe_notify(s, NNG_PIPE_EV_REM_POST, on_pipe, c) != 0) {
		nng_pipe_notify(s, NNG_PIPE_EV_ADD_PRE, NULL, NULL);
		nng_pipe_notify(s, NNG_PIPE_EV_REM_POST, NULL, NULL);
		pthread_mutex_destroy(&c->mu);
		free(c);
		return NULL;
	}
	return c;
}

void rt_pipe_cap_free(struct rt_pipe_cap *c, int closed)
{
	if (!c || !closed)
		return; /* a socket that may still call us back keeps its cap */
	pthread_mutex_destroy(&c->mu);
	free(c->pipes);
	free(c);
}

uint64_t rt_pipe_cap_refused(const struct rt_pipe_cap *c)
{
	uint64_t v = 0;
	if (c) {
		pthread_mutex_lock((pthread_mutex_t *)&c->mu);
		v = c->refused;
		pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
	}
	return v;
}

uint64_t rt_pipe_cap_accepted(const struct rt_pipe_cap *c)
{
	uint64_t v = 0;
	if (c) {
		pthread_mutex_lock((pthread_mutex_t *)&c->mu);
		v = c->accepted;
		pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
	}
	return v;
}

uint32_t rt_pipe_cap_open(const struct rt_pipe_cap *c)
{
	uint32_t v = 0;
	if (c) {
		pthread_mutex_lock((pthread_mutex_t *)&c->mu);
		v = (uint32_t)c->npipes;
		pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
	}
	return v;
}

/* ---------------------------------------------------- peer buckets ---- */

void rt_peer_rate_init(struct rt_peer_rate *r, double rate, double burst)
{
	memset(r, 0, sizeof *r);
	r->rate = rate;
	r->burst = burst >= 1 ? burst : 1;
}

int rt_peer_rate_take(struct rt_peer_rate *r, const char *key, uint64_t now_ns)
{
	uint32_t i, idle = 0;
	if (r->rate <= 0)
		return 1;
	for (i = 0; i < r->n; i++) {
		if (strcmp(r->slot[i].key, key) == 0)
			break;
		if (r->slot[i].last_ns < r->slot[idle].last_ns)
			idle = i;
	}
	if (i == r->n) {
		if (r->n < RT_PEER_RATE_SLOTS) {
			i = r->n++;
			r->slot[i].tokens = r->burst;
		} else {
			i = idle;
			r->slot[i].tokens = 0;
		}
		snprintf(r->slot[i].key, sizeof r->slot[i].key, "%s", key);
		r->slot[i].last_ns = now_ns;
	}
	if (now_ns > r->slot[i].last_ns) {
		r->slot[i].tokens += r->rate * (double)(now_ns - r->slot[i].last_ns) / 1e9;
		if (r->slot[i].tokens > r->burst)
			r->slot[i].tokens = r->burst;
	}
	r->slot[i].last_ns = now_ns;
	if (r->slot[i].tokens < 1)
		return 0;
	r->slot[i].tokens -= 1;
	return 1;
}

void rt_peer_key(const struct rt_peer *p, char *out, size_t cap)
{
	/* Loopback addresses are one peer: 127.0.0.0/8 would otherwise give a local
	 * user sixteen million buckets. */
	if (p->tls)
		snprintf(out, cap, "cn:%s", p->name);
	else if (p->loopback)
		snprintf(out, cap, "local");
	else
		snprintf(out, cap, "addr:%s", p->addr);
}
