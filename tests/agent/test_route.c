/*
 * tests/agent/test_route.c — when an agent drops a coordinator member on its
 * own count of failures (agent/route.c; members without --peers publish no
 * live set).
 *   - slow_connected_member_is_kept: three failed round trips to a member that
 *     still holds a connection (a REP listener that never answers: a member
 *     blocked in a long store commit) do not drop it until nothing came back
 *     on its links for RT_ROUTE_SLOW_NS; three to a member with no connection
 *     (nothing listens: a dead process) drop it at once.
 * Real nng sockets on loopback; the clock is the test's (rt_route_pump takes
 * it), so no wait depends on the machine's speed but the connection's.
 */
#include <arpa/inet.h>
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "common/ports.h"
#include "common/suite.h"
#include "route.h"

static void listen_silent(nng_socket *s, char *url, size_t len)
{
	nng_listener l;
	size_t n = len;
	ck_assert_int_eq(nng_rep0_open(s), 0);
	ck_assert_int_eq(nng_listen(*s, "tcp://127.0.0.1:0", &l, 0), 0);
	{
		nng_sockaddr sa;
		ck_assert_int_eq(nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa), 0);
		snprintf(url, n, "tcp://127.0.0.1:%u", (unsigned)ntohs(sa.s_in.sa_port));
	}
}

static int connected(const struct rt_route *r, int m)
{
	return atomic_load(&r->up[m].coll_pipes.n) > 0;
}

START_TEST(slow_connected_member_is_kept)
{
	nng_socket a, c;
	char ua[64], uc[64], ub[64], members[256], err[256] = "";
	struct rt_route r;
	struct rt_wire_buf reg = { 0 };
	const uint64_t t0 = 1000000000000ull, s = 1000000000ull;
	struct timespec ms = { 0, 1000000 };
	listen_silent(&a, ua, sizeof ua);
	listen_silent(&c, uc, sizeof uc);
	test_restartable_url(ub, sizeof ub); /* nothing listens there */
	snprintf(members, sizeof members, "a=%s,b=%s,c=%s", ua, ub, uc);
	ck_assert_msg(rt_route_open(&r, members, NULL, 64, 64, 1000, &reg, err, sizeof err) == 0,
		      "%s", err);
	for (int i = 0; i < 20000 && !(connected(&r, 0) && connected(&r, 2)); i++)
		nanosleep(&ms, NULL);
	ck_assert(connected(&r, 0) && connected(&r, 2) && !connected(&r, 1));
	rt_route_pump(&r, t0);
	for (int k = 0; k < RT_ROUTE_FAILS; k++) {
		rt_route_result(&r, 0, 0);
		rt_route_result(&r, 1, 0);
	}
	rt_route_pump(&r, t0 + s);
	ck_assert_msg(!r.ring.live[1], "a member with no connection, 3 failures: not dropped");
	ck_assert_msg(r.ring.live[0], "a connected member dropped after 3 failures in 1 s");
	rt_route_pump(&r, t0 + RT_ROUTE_SLOW_NS - s);
	ck_assert(r.ring.live[0]);
	rt_route_pump(&r, t0 + RT_ROUTE_SLOW_NS + s);
	ck_assert_msg(!r.ring.live[0], "a connected member silent for %llu s: not dropped",
		      (unsigned long long)(RT_ROUTE_SLOW_NS / s + 1));
	ck_assert_msg(r.ring.live[2], "the last live member was dropped");
	ck_assert_uint_eq(r.dropped, 2);
	rt_route_close(&r);
	nng_close(a);
	nng_close(c);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("agent_route");
	TCase *tc = tcase_create("route");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, slow_connected_member_is_kept);
	suite_add_tcase(su, tc);
	return test_run_suite(su);
}
