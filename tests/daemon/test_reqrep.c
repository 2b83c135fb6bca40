/*
 * tests/daemon/test_reqrep.c — the request/reply round trip (daemon/reqrep.h)
 * over real nng REQ/REP sockets on loopback TCP.
 *
 * A REP socket served by a thread echoes each request with a prefix, or stays
 * silent when told to. The cases: a round that gets its reply calls done once
 * with that reply (the request went through the send and the receive steps);
 * a round whose peer never answers calls done once with NULL at the timeout;
 * a round whose request can never leave (no peer ever connects) calls done
 * with NULL, the unsent message freed (ASan says if it is not); a round is
 * reusable after release; the states read FREE, then not FREE in flight, then
 * DONE once the owner finished. Waits are on the done flag with a generous
 * bound, never a sleep that must be long enough.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/suite.h"
#include "daemon/reqrep.h"

struct echo {
	nng_socket rep;
	char url[64];
	pthread_t th;
	atomic_int stop;
	atomic_int silent; /* receive and drop */
};

static void *echo_serve(void *arg)
{
	struct echo *e = arg;
	while (!atomic_load(&e->stop)) {
		nng_msg *m;
		if (nng_recvmsg(e->rep, &m, 0) != 0)
			continue; /* the receive timeout: look at stop */
		if (atomic_load(&e->silent)) {
			nng_msg_free(m);
			continue;
		}
		nng_msg_insert(m, "re:", 3);
		if (nng_sendmsg(e->rep, m, 0) != 0)
			nng_msg_free(m);
	}
	return NULL;
}

static void echo_start(struct echo *e)
{
	nng_listener l;
	nng_sockaddr sa;
	memset(e, 0, sizeof *e);
	ck_assert_int_eq(nng_rep0_open(&e->rep), 0);
	ck_assert_int_eq(nng_socket_set_ms(e->rep, NNG_OPT_RECVTIMEO, 50), 0);
	ck_assert_int_eq(nng_listen(e->rep, "tcp://127.0.0.1:0", &l, 0), 0);
	ck_assert_int_eq(nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa), 0);
	snprintf(e->url, sizeof e->url, "tcp://127.0.0.1:%u",
		 (unsigned)((sa.s_in.sa_port >> 8) | ((sa.s_in.sa_port & 0xff) << 8)));
	ck_assert_int_eq(pthread_create(&e->th, NULL, echo_serve, e), 0);
}

static void echo_stop(struct echo *e)
{
	atomic_store(&e->stop, 1);
	pthread_join(e->th, NULL);
	nng_close(e->rep);
}

/* The owner: what done saw. */
struct owner {
	struct rt_reqrep rr;
	atomic_int calls;
	int state_in_done;
	char reply[64]; /* "" when done got NULL */
	int got_reply;
};

static void owner_done(struct rt_reqrep *r, nng_msg *reply)
{
	struct owner *o = r->arg;
	o->state_in_done = atomic_load(&r->state);
	o->got_reply = reply != NULL;
	o->reply[0] = 0;
	if (reply) {
		size_t n = nng_msg_len(reply) < sizeof o->reply - 1 ? nng_msg_len(reply)
								    : sizeof o->reply - 1;
		memcpy(o->reply, nng_msg_body(reply), n);
		o->reply[n] = 0;
		nng_msg_free(reply);
	}
	atomic_fetch_add(&o->calls, 1);
	rt_reqrep_finish(r); /* pairs with rt_reqrep_state in wait_done */
}

static void wait_done(struct owner *o, int seconds)
{
	struct timespec ts = { 0, 2000000 };
	for (long i = 0; i < seconds * 500L && rt_reqrep_state(&o->rr) != RT_REQREP_DONE; i++)
		nanosleep(&ts, NULL);
	ck_assert_int_eq(rt_reqrep_state(&o->rr), RT_REQREP_DONE);
}

static nng_msg *text_msg(const char *t)
{
	nng_msg *m;
	ck_assert_int_eq(nng_msg_alloc(&m, 0), 0);
	ck_assert_int_eq(nng_msg_append(m, t, strlen(t)), 0);
	return m;
}

static void owner_open(struct owner *o, nng_socket *req, const char *url)
{
	memset(o, 0, sizeof *o);
	ck_assert_int_eq(nng_req0_open(req), 0);
	if (url)
		ck_assert_int_eq(nng_dial(*req, url, NULL, NNG_FLAG_NONBLOCK), 0);
	ck_assert_int_eq(nng_ctx_open(&o->rr.ctx, *req), 0);
	ck_assert_int_eq(rt_reqrep_init(&o->rr, owner_done, o), 0);
	ck_assert_int_eq(rt_reqrep_state(&o->rr), RT_REQREP_FREE);
}

START_TEST(reply_reaches_done_once)
{
	struct echo e;
	struct owner o;
	nng_socket req;
	echo_start(&e);
	owner_open(&o, &req, e.url);
	for (int round = 0; round < 3; round++) {
		char want[32];
		snprintf(want, sizeof want, "re:ask %d", round);
		rt_reqrep_send(&o.rr, text_msg(want + 3), 30000);
		ck_assert_int_ne(rt_reqrep_state(&o.rr), RT_REQREP_FREE);
		wait_done(&o, 20);
		ck_assert_int_eq(atomic_load(&o.calls), round + 1);
		ck_assert_int_eq(o.state_in_done, RT_REQREP_RECEIVING);
		ck_assert_int_eq(o.got_reply, 1);
		ck_assert_str_eq(o.reply, want);
		rt_reqrep_release(&o.rr); /* reusable */
		ck_assert_int_eq(rt_reqrep_state(&o.rr), RT_REQREP_FREE);
	}
	rt_reqrep_fini(&o.rr);
	ck_assert_ptr_null(o.rr.aio);
	rt_reqrep_fini(&o.rr); /* twice is harmless */
	nng_close(req);
	echo_stop(&e);
}
END_TEST

START_TEST(silent_peer_times_out_to_null)
{
	struct echo e;
	struct owner o;
	nng_socket req;
	echo_start(&e);
	atomic_store(&e.silent, 1);
	owner_open(&o, &req, e.url);
	rt_reqrep_send(&o.rr, text_msg("anyone?"), 200);
	wait_done(&o, 20);
	ck_assert_int_eq(atomic_load(&o.calls), 1);
	ck_assert_int_eq(o.got_reply, 0);
	rt_reqrep_fini(&o.rr);
	ck_assert_int_eq(atomic_load(&o.calls), 1); /* not called again at the stop */
	nng_close(req);
	echo_stop(&e);
}
END_TEST

START_TEST(unsent_request_freed_and_null)
{
	struct owner o;
	nng_socket req;
	owner_open(&o, &req, NULL); /* no dial: the request can never leave */
	rt_reqrep_send(&o.rr, text_msg("lost"), 100);
	wait_done(&o, 20);
	ck_assert_int_eq(o.state_in_done, RT_REQREP_SENDING);
	ck_assert_int_eq(o.got_reply, 0);
	ck_assert_int_eq(atomic_load(&o.calls), 1);
	rt_reqrep_release(&o.rr);
	rt_reqrep_send(&o.rr, text_msg("cancelled"), 60000);
	rt_reqrep_cancel(&o.rr);
	wait_done(&o, 20);
	ck_assert_int_eq(atomic_load(&o.calls), 2);
	ck_assert_int_eq(o.got_reply, 0);
	rt_reqrep_fini(&o.rr);
	nng_close(req);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("daemon_reqrep");
	TCase *t = tcase_create("reqrep");
	tcase_add_test(t, reply_reaches_done_once);
	tcase_add_test(t, silent_peer_times_out_to_null);
	tcase_add_test(t, unsent_request_freed_and_null);
	suite_add_tcase(s, t);
	return test_run_suite(s);
}
