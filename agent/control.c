/*
 * agent/control.c — the REP endpoint's thread.
 *
 * The thread blocks in nng_recvmsg with a 200 ms timeout (to notice stop), puts
 * the request and who sent it (its pipe's peer, daemon/tls.h) in the mailbox,
 * raises `pending` with release order, and waits on the condition variable until
 * the poll thread has written the reply; then it sends the reply. REP sockets
 * answer requests in order, one at a time, which is all a status query or a
 * coordinator's remote trigger needs.
 */
#include "nng_close.h"
#include "control.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/reqrep0/rep.h>

static void *control_main(void *arg)
{
	struct rt_control *c = arg;
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		nng_msg *msg = NULL;
		struct rt_peer peer;
		int rv = nng_recvmsg(c->sock, &msg, 0);
		if (rv == NNG_ETIMEDOUT)
			continue;
		if (rv != 0)
			break;
		rt_peer_of(msg, &peer); /* here: the pipe may be gone by the time it is served */
		pthread_mutex_lock(&c->mu);
		c->msg = msg;
		c->req = nng_msg_body(msg);
		c->req_len = nng_msg_len(msg);
		c->peer = peer;
		c->answered = 0;
		__atomic_store_n(&c->pending, 1, __ATOMIC_RELEASE);
		if (c->wake_fd >= 0)
			eventfd_write(c->wake_fd, 1);
		while (!c->answered && !__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE))
			pthread_cond_wait(&c->cv, &c->mu);
		c->msg = NULL;
		c->req = NULL;
		pthread_mutex_unlock(&c->mu);
		nng_msg_free(msg);
		if (c->answered)
			nng_send(c->sock, c->reply, c->reply_len, 0);
	}
	return NULL;
}

static int listen_one(struct rt_control *c, const char *url, const struct rt_tls *tls, char *err,
		      size_t errlen)
{
	nng_listener l;
	nng_sockaddr sa;
	if (rt_tls_listen(c->sock, tls, url, &l, err, errlen) != 0)
		return -1;
	snprintf(c->bound[c->nbound], sizeof c->bound[0], "%s", url);
	if (nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa) == 0 && sa.s_family == NNG_AF_INET) {
		/* Port 0 asks for any free port: say which one we got. */
		const uint8_t *ip = (const uint8_t *)&sa.s_in.sa_addr;
		snprintf(c->bound[c->nbound], sizeof c->bound[0], "%stcp://%u.%u.%u.%u:%u",
			 rt_url_is_tls(url) ? "tls+" : "", ip[0], ip[1], ip[2], ip[3],
			 (unsigned)ntohs(sa.s_in.sa_port));
	}
	c->listener_ids[c->nbound] = nng_listener_id(l);
	c->nbound++;
	return 0;
}

int rt_control_start(struct rt_control *c, const char *const *urls, int nurls,
		     const struct rt_tls *tls, uint32_t max_connections, size_t max_request,
		     char *err, size_t errlen)
{
	int i, rv;
	memset(c, 0, sizeof *c);
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->reply = malloc(RT_CONTROL_REPLY_MAX);
	c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); /* -1: plain sleeps, still correct */
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
	nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, 200);
	nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, max_request);
	c->cap = rt_pipe_cap_attach(c->sock, max_connections);
	for (i = 0; i < nurls && c->nbound < RT_CONTROL_MAX_ADDRS; i++)
		if (urls[i] && urls[i][0] && listen_one(c, urls[i], tls, err, errlen) != 0)
			goto fail;
	if (pthread_create(&c->thread, NULL, control_main, c) != 0) {
		snprintf(err, errlen, "cannot start the control thread");
		goto fail;
	}
	c->running = 1;
	return 0;
fail:
	rt_pipe_cap_free(c->cap, rt_nng_close_bounded(c->sock, RT_NNG_CLOSE_WAIT_MS) == 0);
	c->cap = NULL;
	free(c->reply);
	c->reply = NULL;
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	c->wake_fd = -1;
	return -1;
}

void rt_control_serve(struct rt_control *c, rt_control_handler handler, void *arg)
{
	pthread_mutex_lock(&c->mu);
	if (c->pending) {
		c->reply_len = handler(arg, c->req, c->req_len, c->reply, RT_CONTROL_REPLY_MAX);
		c->answered = 1;
		__atomic_store_n(&c->pending, 0, __ATOMIC_RELEASE);
		pthread_cond_signal(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
}

void rt_control_stop(struct rt_control *c)
{
	if (!c->running)
		return;
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&c->mu);
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->thread, NULL);
	rt_pipe_cap_free(c->cap, rt_nng_close_bounded(c->sock, RT_NNG_CLOSE_WAIT_MS) == 0);
	c->cap = NULL;
	free(c->reply);
	c->reply = NULL;
	c->running = 0;
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	c->wake_fd = -1;
}

void rt_control_sleep(struct rt_control *c, uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
	struct pollfd p = { .fd = c->wake_fd, .events = POLLIN };
	eventfd_t drained;
	if (c->wake_fd < 0 || !c->running) {
		nanosleep(&ts, NULL);
		return;
	}
	if (ppoll(&p, 1, &ts, NULL) > 0)
		eventfd_read(c->wake_fd, &drained);
}
