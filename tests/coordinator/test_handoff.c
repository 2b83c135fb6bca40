/*
 * tests/coordinator/test_handoff.c — how an agent's reply to a REMOTE_TRIGGER
 * reaches the traversal (coordinator/traversal.c, loop_mu in coord_internal.h):
 *   - while the loop waits (or commits), nng's callback acts on the reply itself:
 *     counted in replies_direct, and never with replies_on_loop set;
 *   - while the loop is inside a turn, the reply waits for the turn's next poll
 *     point, and the traversal's tick is one: a reply that came before the tick
 *     ends its traversal in that tick, not in the next turn.
 *   - a collect timeout that passed inside a turn (a stalled one) is judged at
 *     the time the turn took its input: the group waits one turn more.
 * The agent is a REP socket in this process that answers every remote trigger
 * with "all yours, nothing open, no further hops"; real nng, real tcp.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/suite.h"
#include "coord_internal.h"

#define AGENT_ID 7

struct fake_agent {
	nng_socket sock;
	char url[128];
	pthread_t th;
	atomic_int requests;
};

static void *agent_main(void *arg)
{
	struct fake_agent *f = arg;
	for (;;) {
		nng_msg *m;
		struct rt_wire_msg w;
		struct rt_wire_buf out = { 0 };
		struct rt_wire_trace t[RT_WIRE_MAX_TRACES];
		struct rt_wire_breadcrumb_reply rep;
		if (nng_recvmsg(f->sock, &m, 0) != 0)
			return NULL;
		if (rt_wire_decode(nng_msg_body(m), nng_msg_len(m), &w) != 0 ||
		    w.type != RT_WIRE_REMOTE_TRIGGER) {
			nng_msg_free(m);
			continue;
		}
		memset(t, 0, sizeof t);
		for (uint32_t i = 0; i < w.remote.trace_count; i++) {
			t[i].trace_hi = w.remote.traces[i].trace_hi;
			t[i].trace_lo = w.remote.traces[i].trace_lo;
			t[i].buffers = 1;
			t[i].bytes = 100;
		}
		rep.request_id = w.remote.request_id;
		rep.agent_id = AGENT_ID;
		rep.trace_count = w.remote.trace_count;
		rep.traces = t;
		rt_wire_msg_free(&w);
		nng_msg_free(m);
		if (rt_wire_encode_breadcrumb_reply(&out, &rep) == 0)
			nng_send(f->sock, out.data, out.len, 0);
		rt_wire_buf_free(&out);
		atomic_fetch_add_explicit(&f->requests, 1, memory_order_relaxed);
	}
}

/* A fake agent on a fresh loopback port whose thread runs `serve`. */
static void agent_start_with(struct fake_agent *f, void *(*serve)(void *))
{
	nng_listener l;
	nng_sockaddr sa;
	memset(f, 0, sizeof *f);
	ck_assert_int_eq(nng_rep0_open(&f->sock), 0);
	ck_assert_int_eq(nng_listen(f->sock, "tcp://127.0.0.1:0", &l, 0), 0);
	ck_assert_int_eq(nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa), 0);
	snprintf(f->url, sizeof f->url, "tcp://127.0.0.1:%u",
		 (unsigned)((sa.s_in.sa_port >> 8) | ((sa.s_in.sa_port & 0xff) << 8)));
	pthread_create(&f->th, NULL, serve, f);
}

static void agent_start(struct fake_agent *f)
{
	agent_start_with(f, agent_main);
}

static void agent_stop(struct fake_agent *f)
{
	nng_close(f->sock);
	pthread_join(f->th, NULL);
}

static char dir[64];

static struct rt_coord *open_coord(int replies_on_loop)
{
	struct rt_coord_config cfg;
	char err[256];
	struct rt_coord *c;
	snprintf(dir, sizeof dir, "/tmp/rt-handoff-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	rt_coord_config_defaults(&cfg);
	snprintf(cfg.listen, sizeof cfg.listen, "tcp://127.0.0.1:0");
	snprintf(cfg.collector, sizeof cfg.collector, "tcp://127.0.0.1:0");
	snprintf(cfg.store, sizeof cfg.store, "%s/store.db", dir);
	cfg.log_level = 0;
	cfg.settle = 60; /* groups stay open: the test looks at their traversal */
	cfg.replies_on_loop = replies_on_loop;
	c = rt_coord_open(&cfg, err, sizeof err);
	ck_assert_msg(c != NULL, "%s", err);
	return c;
}

static void close_coord(struct rt_coord *c)
{
	char cmd[128];
	rt_coord_close(c);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static struct rt_wire_register reg_of(const struct fake_agent *f)
{
	struct rt_wire_register r;
	memset(&r, 0, sizeof r);
	r.agent_id = AGENT_ID;
	r.pid = (uint32_t)getpid();
	snprintf(r.host, sizeof r.host, "test");
	snprintf(r.control_addr, sizeof r.control_addr, "%s", f->url);
	r.buffer_size = 8192;
	r.buffer_count = 64;
	return r;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* One request/reply with the coordinator socket, as an agent sends it. */
static void send_to_coord(struct rt_coord *c, const struct rt_wire_buf *b)
{
	nng_socket s;
	char *buf = NULL;
	size_t sz = 0;
	ck_assert_int_eq(nng_req0_open(&s), 0);
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 30000);
	ck_assert_int_eq(nng_dial(s, rt_coord_listen_addr(c), NULL, 0), 0);
	ck_assert_int_eq(nng_send(s, b->data, b->len, 0), 0);
	ck_assert_int_eq(nng_recv(s, &buf, &sz, NNG_FLAG_ALLOC), 0);
	nng_free(buf, sz);
	nng_close(s);
}

static volatile int loop_stop;

static void *loop_main(void *arg)
{
	rt_coord_run(arg, &loop_stop);
	return NULL;
}

/* Triggers one at a time through a running loop; returns replies_direct. */
static uint64_t run_triggers(int replies_on_loop, int n)
{
	struct fake_agent f;
	struct rt_coord *c;
	struct rt_wire_register reg;
	struct rt_wire_buf b = { 0 };
	pthread_t th;
	uint64_t direct, lat = 0;
	size_t got = 0;
	agent_start(&f);
	c = open_coord(replies_on_loop);
	reg = reg_of(&f);
	ck_assert_int_eq(rt_wire_encode_register(&b, &reg), 0);
	loop_stop = 0;
	pthread_create(&th, NULL, loop_main, c);
	send_to_coord(c, &b);
	for (int i = 0; i < n; i++) {
		struct rt_wire_trace t = { .trace_hi = 1, .trace_lo = 1000 + (uint64_t)i };
		struct rt_wire_trigger tr = { .agent_id = AGENT_ID, .trigger_id = 3,
					      .trigger_seq = (uint64_t)i + 1, .trace_count = 1,
					      .traces = &t };
		b.len = 0;
		ck_assert_int_eq(rt_wire_encode_trigger(&b, &tr), 0);
		send_to_coord(c, &b);
		/* its traversal ended (one round) before the next trigger: generous bound */
		for (int k = 0; k < 3000; k++) {
			if (rt_coord_latencies(c, 0, &lat, 0, &got) >= (uint64_t)i + 1)
				break;
			sleep_ms(10);
		}
		ck_assert_uint_ge(rt_coord_latencies(c, 0, &lat, 0, &got), (uint64_t)i + 1);
	}
	loop_stop = 1;
	pthread_join(th, NULL);
	direct = c->st.replies_direct; /* the loop has stopped: ours to read */
	ck_assert_uint_eq(c->st.remote_failed, 0);
	close_coord(c);
	agent_stop(&f);
	rt_wire_buf_free(&b);
	return direct;
}

START_TEST(reply_acted_on_in_callback_while_the_loop_waits)
{
	/* The loop waits between triggers, so most replies find it waiting. */
	ck_assert_uint_gt(run_triggers(0, 20), 0);
}
END_TEST

START_TEST(replies_on_loop_keeps_the_old_hand_off)
{
	ck_assert_uint_eq(run_triggers(1, 5), 0);
}
END_TEST

START_TEST(reply_mid_turn_is_acted_on_in_that_turn)
{
	struct fake_agent f;
	struct rt_coord *c;
	struct rt_wire_register reg;
	struct rt_wire_trace t = { .trace_hi = 1, .trace_lo = 4242 };
	struct rt_wire_trigger tr = { .agent_id = AGENT_ID, .trigger_id = 3, .trigger_seq = 1,
				      .trace_count = 1, .traces = &t };
	int k;
	agent_start(&f);
	c = open_coord(0);
	reg = reg_of(&f);
	/* This thread is the loop, inside a turn: it holds the traversal. */
	ck_assert_int_eq(coord_dir_register(c, &reg, 0), 0);
	ck_assert_int_eq(coord_handle_trigger(c, &tr, coord_unix_ns()), 0);
	coord_traversal_flush(c); /* the remote trigger goes out */
	for (k = 0; k < 3000 && !atomic_load_explicit(&c->replies_ready, memory_order_acquire); k++)
		sleep_ms(10);
	ck_assert_msg(c->replies_ready, "the agent's reply never came");
	ck_assert_uint_eq(c->latency_count, 0); /* nobody acted on it yet */
	ck_assert_uint_eq(c->st.replies_direct, 0);
	/* The traversal's phase of the turn: its tick acts on the reply first. */
	coord_traversal_tick(c, coord_now_ns());
	ck_assert_uint_eq(c->latency_count, 1);
	ck_assert_uint_eq(c->stage_count[RT_COORD_STAGE_HANDOFF], 1);
	ck_assert_int_eq(c->replies_ready, 0);
	close_coord(c);
	agent_stop(&f);
}
END_TEST

/*
 * The loop took its input, then stalled past a group's collect timeout: the
 * group is not closed in that turn (slices sent before the deadline may wait in
 * the sockets), only in a turn whose input was taken after the deadline.
 * Without the rule, the first tick closes it.
 */
START_TEST(deadline_inside_a_stalled_turn_waits_a_turn)
{
	struct rt_coord *c;
	struct rt_wire_trace t = { .trace_hi = 1, .trace_lo = 4343 };
	struct rt_wire_trigger tr = { .agent_id = AGENT_ID, .trigger_id = 3, .trigger_seq = 1,
				      .trace_count = 1, .traces = &t };
	uint64_t created, timeout;
	c = open_coord(0);
	timeout = (uint64_t)(c->cfg.collect_timeout * 1e9);
	ck_assert_int_eq(coord_handle_trigger(c, &tr, coord_unix_ns()), 0);
	ck_assert_uint_eq(c->groups_open, 1);
	created = coord_now_ns();
	/* Input taken just after the trigger; the turn "ends" a second past the deadline. */
	c->loop.input_ns = created;
	coord_traversal_tick(c, created + timeout + 1000000000ull);
	ck_assert_uint_eq(c->groups_open, 1);
	ck_assert_uint_eq(c->loop.closes_deferred, 1);
	/* The next turn took its input after the deadline: now it closes. */
	c->loop.input_ns = created + timeout + 1000000000ull;
	coord_traversal_tick(c, c->loop.input_ns + 1000);
	ck_assert_uint_eq(c->groups_open, 0);
	ck_assert_uint_eq(c->loop.closes_deferred, 1);
	close_coord(c);
}
END_TEST

/*
 * A request nng does not end is ended by the loop's watchdog: the agent here
 * takes the request and never answers, and the agent timeout (60 s) is far
 * past the test, so only coord_req_watchdog, run as if 200 s had passed, can
 * end it. It must end as a failed ask like a timeout's (the agent's failed
 * count, the group's cell), counted as overdue, and only once. In the stress
 * runs a silent agent's requests stayed unended for ten seconds and more.
 */
static void *silent_agent_main(void *arg)
{
	struct fake_agent *f = arg;
	for (;;) {
		nng_msg *m;
		if (nng_recvmsg(f->sock, &m, 0) != 0)
			return NULL;
		atomic_fetch_add_explicit(&f->requests, 1, memory_order_relaxed);
		nng_msg_free(m); /* taken, never answered */
	}
}

START_TEST(unended_request_is_cancelled_by_the_watchdog)
{
	struct fake_agent f;
	struct rt_coord *c;
	struct rt_wire_register reg;
	struct rt_wire_trace t = { .trace_hi = 1, .trace_lo = 5151 };
	struct rt_wire_trigger tr = { .agent_id = AGENT_ID, .trigger_id = 3, .trigger_seq = 1,
				      .trace_count = 1, .traces = &t };
	struct coord_agent *a;
	agent_start_with(&f, silent_agent_main);
	c = open_coord(1); /* replies go to the ready list: this thread takes them */
	c->cfg.agent_timeout = 60;
	c->cfg.agent_retries = 0;
	reg = reg_of(&f);
	ck_assert_int_eq(coord_dir_register(c, &reg, 1), 0);
	ck_assert_ptr_nonnull(a = coord_dir_find(c, AGENT_ID));
	ck_assert_int_eq(coord_handle_trigger(c, &tr, coord_unix_ns()), 0);
	coord_traversal_flush(c);
	ck_assert_uint_eq(a->asked, 1);
	for (int k = 0; k < 1000 && !atomic_load(&f.requests); k++)
		sleep_ms(10);
	ck_assert_int_eq(atomic_load(&f.requests), 1);
	/* nng has not ended it (60 s); before its time the watchdog leaves it */
	coord_req_watchdog(c, coord_now_ns());
	ck_assert_uint_eq(c->st.requests_overdue, 0);
	coord_req_watchdog(c, coord_now_ns() + 200000000000ull);
	coord_req_watchdog(c, coord_now_ns() + 200000000000ull);
	ck_assert_uint_eq(c->st.requests_overdue, 1);
	for (int k = 0; k < 1000 && !a->failed; k++) {
		coord_traversal_serve(c);
		sleep_ms(10);
	}
	ck_assert_uint_eq(a->failed, 1);
	ck_assert_uint_eq(c->st.remote_failed, 1);
	ck_assert_uint_eq(c->st.requests_overdue, 1);
	close_coord(c);
	agent_stop(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("coordinator_handoff");
	TCase *tc = tcase_create("handoff");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, reply_acted_on_in_callback_while_the_loop_waits);
	tcase_add_test(tc, replies_on_loop_keeps_the_old_hand_off);
	tcase_add_test(tc, reply_mid_turn_is_acted_on_in_that_turn);
	tcase_add_test(tc, deadline_inside_a_stalled_turn_waits_a_turn);
	tcase_add_test(tc, unended_request_is_cancelled_by_the_watchdog);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
