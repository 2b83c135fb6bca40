/*
 * agent/control.c — the REP endpoint, served by the poll thread.
 *
 * rt_control_pending takes a request with a non-blocking nng_recvmsg and notes
 * who sent it (its pipe's peer, daemon/tls.h) while the pipe still exists;
 * rt_control_serve runs the handler and sends the reply (REP answers requests in
 * order, one at a time, which is all a status query or a coordinator's remote
 * trigger needs). rt_control_sleep waits in ppoll on NNG_OPT_RECVFD, which nng
 * keeps readable while a message can be received: we never read or write it.
 * A reply send has a short timeout, so a peer that stopped reading cannot hold
 * the poll thread.
 */
#include "nng_close.h"
#include "control.h"

#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/protocol/reqrep0/rep.h>

#define REPLY_SEND_TIMEOUT_MS 200

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
	c->recv_fd = -1;
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
	if ((rv = nng_socket_get_int(c->sock, NNG_OPT_RECVFD, &c->recv_fd)) != 0) {
		snprintf(err, errlen, "cannot poll the reply socket: %s", nng_strerror(rv));
		goto fail;
	}
	for (i = 0; i < nurls && c->nbound < RT_CONTROL_MAX_ADDRS; i++)
		if (urls[i] && urls[i][0] && listen_one(c, urls[i], tls, err, errlen) != 0)
			goto fail;
	c->running = 1;
	return 0;
fail:
	rt_pipe_cap_free(c->cap, rt_nng_close_bounded(c->sock, RT_NNG_CLOSE_WAIT_MS) == 0);
	c->cap = NULL;
	c->recv_fd = -1;
	free(c->reply);
	c->reply = NULL;
	return -1;
}

int rt_control_pending(struct rt_control *c)
{
	nng_msg *msg;
	if (c->pending)
		return 1;
	if (!c->running || nng_recvmsg(c->sock, &msg, NNG_FLAG_NONBLOCK) != 0)
		return 0;
	rt_peer_of(msg, &c->peer); /* now: the pipe may be gone by the time it is served */
	c->msg = msg;
	c->req = nng_msg_body(msg);
	c->req_len = nng_msg_len(msg);
	c->pending = 1;
	return 1;
}

void rt_control_serve(struct rt_control *c, rt_control_handler handler, void *arg)
{
	if (!c->pending)
		return;
	c->reply_len = handler(arg, c->req, c->req_len, c->reply, RT_CONTROL_REPLY_MAX);
	nng_msg_free(c->msg);
	c->msg = NULL;
	c->req = NULL;
	c->pending = 0;
	/* A peer that went away or stopped reading loses its reply; REP moves on. */
	nng_send(c->sock, c->reply, c->reply_len, 0);
}

void rt_control_stop(struct rt_control *c)
{
	if (!c->running)
		return;
	c->running = 0;
	if (c->msg)
		nng_msg_free(c->msg);
	c->msg = NULL;
	c->pending = 0;
	rt_pipe_cap_free(c->cap, rt_nng_close_bounded(c->sock, RT_NNG_CLOSE_WAIT_MS) == 0);
	c->cap = NULL;
	c->recv_fd = -1; /* nng's own: closed with the socket */
	free(c->reply);
	c->reply = NULL;
}

void rt_control_sleep(struct rt_control *c, uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
	struct pollfd p = { .fd = c->recv_fd, .events = POLLIN };
	if (c->recv_fd < 0 || !c->running) {
		nanosleep(&ts, NULL);
		return;
	}
	ppoll(&p, 1, &ts, NULL);
}
