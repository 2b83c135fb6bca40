/*
 * agent/control.c — the REP endpoint, answered on nng's thread or the poll thread.
 *
 * recv_cb gets each request (its sender noted while its pipe still exists,
 * daemon/tls.h). If the poll thread sleeps (idle, under `own`), the callback
 * takes `own` and answers: handler, then the reply on send_aio. Otherwise the
 * request stays pending and the eventfd wakes the poll thread, which answers it
 * in rt_control_serve. send_cb receives the next request once the reply left.
 * A callback never waits for `own` while the poll thread works: it tries the
 * lock, and blocks only when the hint says the holder is another callback's
 * short answer, not a pass (control.h).
 */
#include "nng_close.h"
#include "control.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "log.h"
#include "wire/wire.h"

#define REPLY_SEND_TIMEOUT_MS 200

/* Listen on url as address i (bound[i], listener_ids[i]). */
static int listen_at(struct rt_control *c, int i, const char *url, char *err, size_t errlen)
{
	nng_listener l;
	nng_sockaddr sa;
	if (rt_tls_listen(c->sock, c->tls, url, &l, err, errlen) != 0)
		return -1;
	snprintf(c->url[i], sizeof c->url[0], "%s", url);
	snprintf(c->bound[i], sizeof c->bound[0], "%s", url);
	if (nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa) == 0 && sa.s_family == NNG_AF_INET) {
		/* Port 0 asks for any free port: say which one we got. */
		const uint8_t *ip = (const uint8_t *)&sa.s_in.sa_addr;
		snprintf(c->bound[i], sizeof c->bound[0], "%stcp://%u.%u.%u.%u:%u",
			 rt_url_is_tls(url) ? "tls+" : "", ip[0], ip[1], ip[2], ip[3],
			 (unsigned)ntohs(sa.s_in.sa_port));
	}
	c->listener_ids[i] = nng_listener_id(l);
	return 0;
}

static int listen_one(struct rt_control *c, const char *url, char *err, size_t errlen)
{
	if (listen_at(c, c->nbound, url, err, errlen) != 0)
		return -1;
	if (c->probe_addr < 0 && strncmp(url, "ipc://", 6) == 0)
		c->probe_addr = c->nbound;
	c->nbound++;
	return 0;
}

/* What rt_control_start made, undone (the socket is closed already). */
static void free_parts(struct rt_control *c)
{
	if (c->recv_aio)
		nng_aio_free(c->recv_aio);
	if (c->send_aio)
		nng_aio_free(c->send_aio);
	c->recv_aio = c->send_aio = NULL;
	if (c->msg)
		nng_msg_free(c->msg);
	c->msg = NULL;
	c->pending = 0;
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	c->wake_fd = -1;
	free(c->reply);
	c->reply = NULL;
	pthread_mutex_destroy(&c->own);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t us_between(uint64_t from, uint64_t to)
{
	uint64_t us = to > from ? (to - from) / 1000u : 0;
	return us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

/* Holder of `own`: answer the request in c->msg; the reply's send completes in
 * send_cb, which receives the next request. */
static void answer(struct rt_control *c)
{
	nng_msg *m;
	int timed = rt_wire_looks_like_message(c->req, c->req_len);
	uint64_t start = mono_ns();
	c->reply_len = c->handler(c->handler_arg, c->req, c->req_len, c->reply,
				  RT_CONTROL_REPLY_MAX);
	if (timed) {
		uint32_t k = (uint32_t)(c->timed++ % RT_CONTROL_TIMES);
		c->wait_us[k] = us_between(c->recv_ns, start);
		c->answer_us[k] = us_between(start, mono_ns());
	}
	nng_msg_free(c->msg);
	c->msg = NULL;
	c->req = NULL;
	if (nng_msg_alloc(&m, c->reply_len) != 0) {
		/* No memory for a reply: the peer times out; take the next request. */
		nng_recv_aio(c->sock, c->recv_aio);
		return;
	}
	memcpy(nng_msg_body(m), c->reply, c->reply_len);
	nng_aio_set_msg(c->send_aio, m);
	nng_send_aio(c->sock, c->send_aio);
}

static void recv_cb(void *arg)
{
	struct rt_control *c = arg;
	int rv = nng_aio_result(c->recv_aio);
	nng_msg *msg;
	if (rv != 0) {
		if (rv != NNG_ECLOSED && rv != NNG_ECANCELED)
			nng_recv_aio(c->sock, c->recv_aio); /* transient: keep listening */
		return;
	}
	msg = nng_aio_get_msg(c->recv_aio);
	if (!msg) { /* nng 1.5.2 can end a receive with 0 and no message (nng#1620) */
		nng_recv_aio(c->sock, c->recv_aio);
		return;
	}
	c->recv_ns = mono_ns(); /* the request is ours alone until it is answered */
	rt_peer_of(msg, &c->peer); /* now: the pipe may be gone by the time it is served */
	c->msg = msg;
	c->req = nng_msg_body(msg);
	c->req_len = nng_msg_len(msg);
	/* The poll thread sleeps (or another callback is answering: a moment's wait):
	 * answer here. */
	if (pthread_mutex_trylock(&c->own) == 0 ||
	    (atomic_load_explicit(&c->idle_hint, memory_order_acquire) && pthread_mutex_lock(&c->own) == 0)) {
		if (c->idle) {
			c->served_direct++;
			c->wake_after_send = 1;
			answer(c);
			pthread_mutex_unlock(&c->own);
			return;
		}
		pthread_mutex_unlock(&c->own);
	}
	/* pairs with the acquire in rt_control_pending: the poll thread that sees
	 * pending sees msg, req and peer set above */
	atomic_store_explicit(&c->pending, 1, memory_order_release);
	{
		uint64_t one = 1;
		if (write(c->wake_fd, &one, sizeof one) < 0)
			return; /* the counter is full: the poll thread is awake anyway */
	}
}

static void send_cb(void *arg)
{
	struct rt_control *c = arg;
	int rv = nng_aio_result(c->send_aio);
	if (rv != 0) /* a peer that went away or stopped reading loses its reply */
		nng_msg_free(nng_aio_get_msg(c->send_aio));
	if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
		return;
	/* Answered here while the poll thread slept: now that the reply has left,
	 * wake it, so that what the request pinned is reported by its next pass. */
	if (c->wake_after_send) {
		uint64_t one = 1;
		c->wake_after_send = 0;
		if (write(c->wake_fd, &one, sizeof one) < 0)
			c->wake_after_send = 0; /* the counter is full: it is awake anyway */
	}
	nng_recv_aio(c->sock, c->recv_aio);
}

int rt_control_start(struct rt_control *c, const char *const *urls, int nurls,
		     const struct rt_tls *tls, uint32_t max_connections, size_t max_request,
		     char *err, size_t errlen)
{
	int i, rv;
	memset(c, 0, sizeof *c);
	c->wake_fd = -1;
	c->tls = tls;
	c->probe_addr = -1;
	c->probe_interval_ns = 5000000000ull;
	c->probe_timeout_ms = 5000;
	pthread_mutex_init(&c->own, NULL);
	c->reply = malloc(RT_CONTROL_REPLY_MAX);
	if (!c->reply) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if ((rv = nng_rep0_open(&c->sock)) != 0) {
		snprintf(err, errlen, "cannot open a reply socket: %s", nng_strerror(rv));
		free(c->reply);
		c->reply = NULL;
		return -1;
	}
	nng_socket_set_ms(c->sock, NNG_OPT_SENDTIMEO, REPLY_SEND_TIMEOUT_MS);
	nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, max_request);
	c->cap = rt_pipe_cap_attach(c->sock, max_connections);
	if ((c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
	    nng_aio_alloc(&c->recv_aio, recv_cb, c) != 0 ||
	    nng_aio_alloc(&c->send_aio, send_cb, c) != 0) {
		snprintf(err, errlen, "cannot set up the reply socket's wake-up and aios");
		goto fail;
	}
	nng_aio_set_timeout(c->send_aio, REPLY_SEND_TIMEOUT_MS);
	for (i = 0; i < nurls && c->nbound < RT_CONTROL_MAX_ADDRS; i++)
		if (urls[i] && urls[i][0] && listen_one(c, urls[i], err, errlen) != 0)
			goto fail;
	c->running = 1;
	return 0;
fail:
	rt_pipe_cap_free(c->cap, rt_nng_close_bounded(c->sock, RT_NNG_CLOSE_WAIT_MS) == 0);
	c->cap = NULL;
	free_parts(c);
	return -1;
}

int rt_control_begin(struct rt_control *c, rt_control_handler handler, void *arg)
{
	if (!c->running)
		return -1;
	pthread_mutex_lock(&c->own);
	c->owned = 1;
	c->handler = handler;
	c->handler_arg = arg;
	nng_recv_aio(c->sock, c->recv_aio);
	return 0;
}

int rt_control_pending(struct rt_control *c)
{
	return atomic_load_explicit(&c->pending, memory_order_acquire);
}

void rt_control_serve(struct rt_control *c)
{
	if (!rt_control_pending(c))
		return;
	atomic_store_explicit(&c->pending, 0, memory_order_relaxed);
	c->served_by_loop++;
	answer(c);
}

static void probe_close(struct rt_control *c, int answered);

static int by_value(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return a < b ? -1 : a > b;
}

/* The quantiles qs[0..nq) of a ring's first n times, sorted once. */
static void quantiles_of(const uint32_t *ring, size_t n, const double *qs, size_t nq,
			 double *out)
{
	uint32_t v[RT_CONTROL_TIMES];
	memcpy(v, ring, n * sizeof *v);
	qsort(v, n, sizeof *v, by_value);
	for (size_t i = 0; i < nq; i++) {
		size_t k = (size_t)(qs[i] * (double)(n - 1) + 0.5);
		out[i] = n ? v[k < n ? k : n - 1] : 0;
	}
}

void rt_control_times(const struct rt_control *c, const double *qs, size_t nq,
		      double *wait_us, double *answer_us)
{
	size_t n = c->timed < RT_CONTROL_TIMES ? (size_t)c->timed : RT_CONTROL_TIMES;
	quantiles_of(c->wait_us, n, qs, nq, wait_us);
	quantiles_of(c->answer_us, n, qs, nq, answer_us);
}

void rt_control_stop(struct rt_control *c)
{
	if (c->owned) {
		c->owned = 0;
		pthread_mutex_unlock(&c->own);
	}
	if (!c->running)
		return;
	c->running = 0;
	/* a ping in flight ends first (failed): its socket is left, as any unanswered one */
	int answered = rt_reqrep_state(&c->probe) == RT_REQREP_FREE &&
		       atomic_load_explicit(&c->probe_result, memory_order_relaxed) > 0;
	rt_reqrep_fini(&c->probe);
	probe_close(c, answered);
	/* No callback waits for `own` now (we do not sleep): they finish. */
	nng_aio_stop(c->recv_aio);
	nng_aio_stop(c->send_aio);
	rt_pipe_cap_free(c->cap, rt_nng_close_bounded(c->sock, RT_NNG_CLOSE_WAIT_MS) == 0);
	c->cap = NULL;
	free_parts(c);
}

/* ------------------------------------------ the ipc address's self-probe */

/* The ping's end, on nng's thread: its result for the next tick, the round free. */
static void probe_done(struct rt_reqrep *rr, nng_msg *reply)
{
	struct rt_control *c = rr->arg;
	int ok = reply && nng_msg_len(reply) >= 4 && memcmp(nng_msg_body(reply), "pong", 4) == 0;
	if (reply)
		nng_msg_free(reply);
	atomic_store_explicit(&c->probe_result, ok ? 1 : -1, memory_order_relaxed);
	nng_ctx_close(rr->ctx);
	rt_reqrep_release(rr); /* release: the tick that sees FREE sees the result */
}

/* A fresh socket and connection for each ping: the listener that stopped
 * serving still served the connections it had (a ping over a kept one was
 * answered), it was new ones it left unread. */
static int probe_open(struct rt_control *c)
{
	if (nng_req0_open(&c->probe_sock) != 0)
		return -1;
	if (nng_dial(c->probe_sock, c->bound[c->probe_addr], NULL, NNG_FLAG_NONBLOCK) != 0) {
		rt_nng_close_bounded(c->probe_sock, RT_NNG_CLOSE_WAIT_MS);
		return -1;
	}
	c->probe_open = 1;
	return 0;
}

/* The last ping's socket: closed if its ping was answered (connected); left open
 * if not, since its dialer may still be connecting to a listener that reads
 * nothing, and closing a dialer while it connects leaks nng 1.5.2's objects
 * (seen with LeakSanitizer: agent.md "Links that lose their connection"). Only
 * a listener that stopped serving leaves sockets behind, a few bytes each. */
static void probe_close(struct rt_control *c, int answered)
{
	if (!c->probe_open)
		return;
	if (answered)
		rt_nng_close_bounded(c->probe_sock, RT_NNG_CLOSE_WAIT_MS);
	else
		c->probe_sockets_left++;
	c->probe_open = 0;
}

/* Close the address and listen on it again (what nng's own listener no longer does). */
static void relisten(struct rt_control *c, int i)
{
	char err[256], url[sizeof c->url[0]];
	nng_listener old = { .id = (uint32_t)c->listener_ids[i] };
	snprintf(url, sizeof url, "%s", c->url[i]); /* listen_at writes c->url[i] */
	nng_listener_close(old);
	c->relistens++;
	if (listen_at(c, i, url, err, sizeof err) != 0) {
		rt_log(RT_LOG_ERROR, "%s stopped answering and cannot be listened on again: %s", url,
		       err);
		return;
	}
	rt_log(RT_LOG_WARN, "%s stopped answering (%d pings in a row): listening on it again", url,
	       c->probe_misses);
}

void rt_control_probe_tick(struct rt_control *c, uint64_t now_ns)
{
	nng_msg *m;
	if (c->probe_addr < 0 || !c->running || now_ns < c->probe_next_ns)
		return;
	if (!c->probe.aio && rt_reqrep_init(&c->probe, probe_done, c) != 0)
		return;
	if (rt_reqrep_state(&c->probe) != RT_REQREP_FREE)
		return; /* still in flight (its timeout ends it) */
	int r = atomic_exchange_explicit(&c->probe_result, 0, memory_order_relaxed);
	probe_close(c, r > 0); /* the last ping's socket */
	if (r > 0) {
		c->probe_misses = 0;
	} else if (r < 0) {
		c->probes_unanswered++;
		if (++c->probe_misses >= 2) {
			relisten(c, c->probe_addr);
			c->probe_misses = 0;
		}
	}
	c->probe_next_ns = now_ns + c->probe_interval_ns;
	if (probe_open(c) != 0)
		return; /* tried again at the next one */
	if (nng_ctx_open(&c->probe.ctx, c->probe_sock) != 0)
		return;
	if (nng_msg_alloc(&m, 0) != 0 || nng_msg_append(m, "ping", 4) != 0) {
		nng_ctx_close(c->probe.ctx);
		return;
	}
	rt_reqrep_send(&c->probe, m, (nng_duration)c->probe_timeout_ms);
}

void rt_control_sleep(struct rt_control *c, uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
	struct pollfd p = { .fd = c->wake_fd, .events = POLLIN };
	uint64_t v;
	if (c->wake_fd < 0 || !c->running || !c->owned) {
		nanosleep(&ts, NULL);
		return;
	}
	if (rt_control_pending(c))
		return;
	/* Let go: a request that comes now is answered by nng's callback. */
	c->idle = 1;
	/* pairs with the acquire in recv_cb: a callback that sees the hint waits
	 * for own rather than leaving the request to a sleeping thread */
	atomic_store_explicit(&c->idle_hint, 1, memory_order_release);
	pthread_mutex_unlock(&c->own);
	ppoll(&p, 1, &ts, NULL);
	if (read(c->wake_fd, &v, sizeof v) < 0 && errno != EAGAIN)
		v = 0; /* nothing to clear */
	/* pairs with the acquire in recv_cb (the hint is only a hint: own decides) */
	atomic_store_explicit(&c->idle_hint, 0, memory_order_release);
	pthread_mutex_lock(&c->own);
	c->idle = 0;
}
