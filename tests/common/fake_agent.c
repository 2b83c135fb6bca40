/*
 * tests/common/fake_agent.c — a wire-protocol-only agent (fake_agent.h).
 *
 * The thread blocks in nng_recvmsg with a 100 ms receive timeout, so that it
 * notices `stop`; each request is decoded with the wire's strict decoder and
 * answered on the same message. The reply's trace list is as long as the
 * request's, so a coordinator's "ask" always gets an answer for each trace.
 */
#include "fake_agent.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "nng_close.h"

static void *fake_agent_serve(void *arg)
{
	struct fake_agent *a = arg;
	struct rt_wire_buf out = { 0 };
	struct rt_wire_trace tr[RT_WIRE_MAX_TRACES];
	while (!atomic_load_explicit(&a->stop, memory_order_acquire)) {
		nng_msg *m;
		struct rt_wire_msg q;
		if (nng_recvmsg(a->rep, &m, 0) != 0)
			continue; /* the receive timeout: look at the stop flag */
		out.len = 0;
		if (rt_wire_decode(nng_msg_body(m), nng_msg_len(m), &q) == 0 &&
		    q.type == RT_WIRE_REMOTE_TRIGGER) {
			struct rt_wire_breadcrumb_reply r = { .request_id = q.remote.request_id,
							      .agent_id = a->id,
							      .trace_count = q.remote.trace_count,
							      .traces = tr };
			for (uint32_t j = 0; j < q.remote.trace_count; j++) {
				memset(&tr[j], 0, sizeof tr[j]);
				tr[j].trace_hi = q.remote.traces[j].trace_hi;
				tr[j].trace_lo = q.remote.traces[j].trace_lo;
				a->holds(a, tr[j].trace_hi, tr[j].trace_lo, &tr[j].buffers,
					 &tr[j].bytes);
			}
			rt_wire_encode_breadcrumb_reply(&out, &r);
		} else {
			struct rt_wire_ack ack = { .status = RT_WIRE_E_UNKNOWN_TYPE };
			rt_wire_encode_ack(&out, &ack);
		}
		rt_wire_msg_free(&q);
		nng_msg_clear(m);
		nng_msg_append(m, out.data, out.len);
		if (nng_sendmsg(a->rep, m, 0) != 0)
			nng_msg_free(m);
	}
	rt_wire_buf_free(&out);
	return NULL;
}

int fake_agent_start(struct fake_agent *a, uint32_t id, fake_agent_holds_fn holds, void *arg)
{
	nng_listener l;
	nng_sockaddr sa;
	a->id = id;
	a->holds = holds;
	a->arg = arg;
	atomic_store_explicit(&a->stop, 0, memory_order_relaxed);
	if (nng_rep0_open(&a->rep) != 0)
		return -1;
	if (nng_socket_set_ms(a->rep, NNG_OPT_RECVTIMEO, 100) != 0 ||
	    nng_listen(a->rep, "tcp://127.0.0.1:0", &l, 0) != 0 ||
	    nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa) != 0)
		goto fail;
	snprintf(a->url, sizeof a->url, "tcp://127.0.0.1:%u",
		 (unsigned)((sa.s_in.sa_port >> 8) | ((sa.s_in.sa_port & 0xff) << 8)));
	if (pthread_create(&a->th, NULL, fake_agent_serve, a) != 0)
		goto fail;
	return 0;
fail:
	nng_close(a->rep);
	return -1;
}

void fake_agent_stop_all(struct fake_agent *a, int n)
{
	for (int i = 0; i < n; i++) /* pairs with the acquire in fake_agent_serve */
		atomic_store_explicit(&a[i].stop, 1, memory_order_release);
	for (int i = 0; i < n; i++) {
		pthread_join(a[i].th, NULL);
		nng_close(a[i].rep);
	}
}

/* The request's reply, or NULL (fake_agent_exchange says how it is sent). */
static nng_msg *exchange(const char *url, const struct rt_tls *tls, const char *peer,
			 const void *req, size_t len, int timeout_ms)
{
	char err[512];
	nng_socket s;
	nng_msg *m = NULL;
	if (nng_req0_open(&s) != 0)
		return NULL;
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, timeout_ms);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, timeout_ms);
	nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, 4u << 20);
	if (rt_tls_dial(s, tls, url, peer, 0, err, sizeof err) == 0 && nng_msg_alloc(&m, len) == 0) {
		memcpy(nng_msg_body(m), req, len);
		if (nng_sendmsg(s, m, 0) != 0) {
			nng_msg_free(m);
			m = NULL;
		} else if (nng_recvmsg(s, &m, 0) != 0) {
			m = NULL;
		}
	}
	/* Bounded, as the daemons close: with nng 1.5.2 nng_close() can deadlock
	 * after the peer dropped the pipe (nanomsg/nng#1543), which is what an
	 * oversize request provokes; a plain close hung a test until its timeout. */
	rt_nng_close_bounded(s, RT_NNG_CLOSE_WAIT_MS);
	return m;
}

long fake_agent_exchange(const char *url, const struct rt_tls *tls, const char *peer,
			 const void *req, size_t len, void *reply, size_t cap, int timeout_ms)
{
	nng_msg *m = exchange(url, tls, peer, req, len, timeout_ms);
	long n;
	if (!m)
		return -1;
	n = (long)nng_msg_len(m);
	memcpy(reply, nng_msg_body(m), (size_t)n < cap ? (size_t)n : cap);
	nng_msg_free(m);
	return n;
}

int32_t fake_agent_ack(const char *url, const struct rt_tls *tls, const char *peer,
		       const struct rt_wire_buf *msg, int timeout_ms)
{
	nng_msg *m = exchange(url, tls, peer, msg->data, msg->len, timeout_ms);
	struct rt_wire_msg a;
	int32_t st = INT32_MIN;
	if (!m)
		return st;
	if (rt_wire_decode(nng_msg_body(m), nng_msg_len(m), &a) == 0 && a.type == RT_WIRE_ACK)
		st = a.ack.status;
	rt_wire_msg_free(&a);
	nng_msg_free(m);
	return st;
}

int fake_agent_request(const char *url, const struct rt_wire_buf *msg, int timeout_ms, char *text,
		       size_t textcap)
{
	long n;
	if (!text)
		return fake_agent_ack(url, NULL, NULL, msg, timeout_ms) == 0 ? 0 : -1;
	n = fake_agent_exchange(url, NULL, NULL, msg->data, msg->len, text, textcap - 1,
				timeout_ms);
	if (n < 0)
		return -1;
	text[(size_t)n < textcap - 1 ? (size_t)n : textcap - 1] = 0;
	return 0;
}
