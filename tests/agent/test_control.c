/*
 * tests/agent/test_control.c — who answers a request (agent/control.c).
 *   - While the poll thread sleeps in rt_control_sleep, nng's callback answers
 *     the request itself: the handler runs on another thread while the sleeper
 *     still sleeps (it is woken only after the reply left).
 *   - While the poll thread works (holds `own`), the request waits for it:
 *     rt_control_pending turns 1 and rt_control_serve answers on the poll
 *     thread.
 *   - The ipc address checks itself: when its listener is closed behind its back
 *     (what an nng 1.5.2 ipc listener that stops serving looks like from
 *     outside), two unanswered pings later it is listened on again, and a
 *     request is answered there once more.
 * Real nng REQ/REP over tcp loopback; the "poll thread" is the test's thread.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/suite.h"
#include "control.h"

struct seen {
	pthread_t poll_thread;
	volatile int *sleeping; /* the poll thread is inside rt_control_sleep */
	int on_other_thread;    /* the handler ran off the poll thread */
	int while_asleep;       /* ... while the poll thread slept */
	atomic_int calls;
};

static size_t handler(void *arg, const uint8_t *req, size_t len, uint8_t *out, size_t cap)
{
	struct seen *s = arg;
	(void)req;
	(void)len;
	s->on_other_thread = !pthread_equal(pthread_self(), s->poll_thread);
	s->while_asleep = s->sleeping && *s->sleeping;
	atomic_fetch_add_explicit(&s->calls, 1, memory_order_release);
	return (size_t)snprintf((char *)out, cap, "pong") + 1;
}

struct client {
	const char *url;
	struct rt_control *ctl;
	int wait_for_sleep; /* send only once the poll thread sleeps */
	atomic_int answered; /* the reply came */
};

static void *client_main(void *arg)
{
	struct client *k = arg;
	nng_socket s;
	char *buf = NULL;
	size_t sz = 0;
	struct timespec ms = { 0, 1000000 };
	if (k->wait_for_sleep)
		for (int i = 0; i < 30000 && !atomic_load_explicit(&k->ctl->idle_hint, memory_order_acquire); i++)
			nanosleep(&ms, NULL);
	if (nng_req0_open(&s) != 0)
		return NULL;
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 30000);
	if (nng_dial(s, k->url, NULL, 0) == 0 && nng_send(s, "ping", 5, 0) == 0 &&
	    nng_recv(s, &buf, &sz, NNG_FLAG_ALLOC) == 0) {
		atomic_store_explicit(&k->answered, 1, memory_order_release);
		nng_free(buf, sz);
	}
	nng_close(s);
	return NULL;
}

static void start(struct rt_control *ctl)
{
	const char *urls[1] = { "tcp://127.0.0.1:0" };
	char err[256];
	ck_assert_msg(rt_control_start(ctl, urls, 1, NULL, 0, 1 << 16, err, sizeof err) == 0, "%s",
		      err);
}

START_TEST(sleeping_poll_thread_is_not_woken_for_a_request)
{
	struct rt_control ctl;
	volatile int sleeping = 0;
	struct seen s = { .poll_thread = pthread_self(), .sleeping = &sleeping };
	struct client k = { .ctl = &ctl, .wait_for_sleep = 1 };
	pthread_t th;
	start(&ctl);
	k.url = ctl.bound[0];
	ck_assert_int_eq(rt_control_begin(&ctl, handler, &s), 0);
	pthread_create(&th, NULL, client_main, &k);
	/* Sleep (up to 30 s each time) until the request was answered. Answered by
	 * the poll thread, it would end the sleep first; answered by nng's callback,
	 * the sleep ends once the reply has left (so that a pass reports what the
	 * request pinned). */
	while (!atomic_load_explicit(&k.answered, memory_order_acquire) &&
	       !atomic_load_explicit(&s.calls, memory_order_acquire)) {
		sleeping = 1;
		rt_control_sleep(&ctl, 30000000000ull);
		sleeping = 0;
		if (rt_control_pending(&ctl))
			rt_control_serve(&ctl);
	}
	pthread_join(th, NULL);
	ck_assert_int_eq(k.answered, 1);
	ck_assert_int_eq(s.calls, 1);
	ck_assert_msg(s.on_other_thread, "the handler ran on the poll thread");
	ck_assert_msg(s.while_asleep, "the poll thread was woken for the request");
	ck_assert_uint_eq(ctl.served_direct, 1);
	rt_control_stop(&ctl);
}
END_TEST

START_TEST(busy_poll_thread_answers_it_itself)
{
	struct rt_control ctl;
	struct seen s = { .poll_thread = pthread_self() };
	struct client k = { .ctl = &ctl };
	struct timespec ms = { 0, 1000000 };
	pthread_t th;
	int i;
	start(&ctl);
	k.url = ctl.bound[0];
	ck_assert_int_eq(rt_control_begin(&ctl, handler, &s), 0);
	pthread_create(&th, NULL, client_main, &k);
	/* Working (never sleeping): the request waits for us. */
	for (i = 0; i < 30000 && !rt_control_pending(&ctl); i++)
		nanosleep(&ms, NULL);
	ck_assert_int_eq(rt_control_pending(&ctl), 1);
	ck_assert_int_eq(s.calls, 0);
	rt_control_serve(&ctl);
	pthread_join(th, NULL);
	ck_assert_int_eq(k.answered, 1);
	ck_assert_int_eq(s.calls, 1);
	ck_assert_int_eq(s.on_other_thread, 0);
	ck_assert_uint_eq(ctl.served_by_loop, 1);
	rt_control_stop(&ctl);
}
END_TEST

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One request to url within timeout_ms: 1 answered, 0 not. */
static int ask(const char *url, int timeout_ms)
{
	nng_socket s;
	char *buf = NULL;
	size_t sz = 0;
	int ok = 0;
	if (nng_req0_open(&s) != 0)
		return 0;
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, timeout_ms);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, timeout_ms);
	if (nng_dial(s, url, NULL, 0) == 0 && nng_send(s, "ping", 5, 0) == 0 &&
	    nng_recv(s, &buf, &sz, NNG_FLAG_ALLOC) == 0) {
		ok = 1;
		nng_free(buf, sz);
	}
	nng_close(s);
	return ok;
}

struct breaker {
	struct rt_control *ctl;
	const char *url;
	int first, dead, again; /* answered before / right after the close / later */
	atomic_int done;
};

/* The operator's side: asks, closes the listener behind the agent's back, asks
 * until answered again (up to 20 s). */
static void *breaker_main(void *arg)
{
	struct breaker *b = arg;
	b->first = ask(b->url, 5000);
	nng_listener l = { .id = (uint32_t)b->ctl->listener_ids[0] };
	nng_listener_close(l);
	b->dead = ask(b->url, 200);
	for (uint64_t end = mono_ns() + 20000000000ull; !b->again && mono_ns() < end;)
		if (!(b->again = ask(b->url, 500)))
			usleep(100000);
	atomic_store_explicit(&b->done, 1, memory_order_release);
	return NULL;
}

START_TEST(dead_ipc_listener_is_listened_on_again)
{
	struct rt_control ctl;
	struct seen s = { .poll_thread = pthread_self() };
	struct breaker b = { .ctl = &ctl };
	char url[128], err[256];
	const char *urls[1] = { url };
	pthread_t th;
	snprintf(url, sizeof url, "ipc:///tmp/rt-test-control-%d.status", (int)getpid());
	b.url = url;
	ck_assert_msg(rt_control_start(&ctl, urls, 1, NULL, 0, 1 << 16, err, sizeof err) == 0,
		      "%s", err);
	ck_assert_int_eq(ctl.probe_addr, 0);
	ctl.probe_interval_ns = 200000000ull; /* the test's 0.2 s and 0.3 s, not 5 s and 5 s */
	ctl.probe_timeout_ms = 300;
	ck_assert_int_eq(rt_control_begin(&ctl, handler, &s), 0);
	pthread_create(&th, NULL, breaker_main, &b);
	/* the poll thread of an idle agent */
	while (!atomic_load_explicit(&b.done, memory_order_acquire)) {
		if (rt_control_pending(&ctl))
			rt_control_serve(&ctl);
		rt_control_probe_tick(&ctl, mono_ns());
		rt_control_sleep(&ctl, 2000000ull);
	}
	pthread_join(th, NULL);
	ck_assert_msg(b.first, "the ipc address did not answer at first");
	ck_assert_msg(!b.dead, "answered with its listener closed");
	ck_assert_msg(b.again, "not answered again within 20 s (%llu pings unanswered, %llu relistens)",
		      (unsigned long long)ctl.probes_unanswered, (unsigned long long)ctl.relistens);
	ck_assert_uint_ge(ctl.probes_unanswered, 2);
	ck_assert_uint_eq(ctl.relistens, 1);
	rt_control_stop(&ctl);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_control");
	TCase *tc = tcase_create("control");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, sleeping_poll_thread_is_not_woken_for_a_request);
	tcase_add_test(tc, busy_poll_thread_answers_it_itself);
	tcase_add_test(tc, dead_ipc_listener_is_listened_on_again);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
