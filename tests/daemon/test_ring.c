/*
 * tests/daemon/test_ring.c — rendezvous hashing (daemon/ring.h): even shares,
 * minimal movement when a member leaves or returns, independence of the list
 * order, the member-list grammar, and owners pinned to fixed values (every
 * agent and coordinator, of any build, must name the same owner).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/suite.h"
#include "daemon/ring.h"

#define IDS 20000

static uint64_t trace(int k)
{
	return 0x1000 + (uint64_t)k; /* sequential, as tests and some generators make them */
}

static void ring_of(struct rt_ring *r, int n)
{
	char id[16];
	rt_ring_init(r);
	for (int i = 0; i < n; i++) {
		snprintf(id, sizeof id, "c%d", i);
		ck_assert_int_eq(rt_ring_add(r, id), i);
	}
}

START_TEST(shares_are_even)
{
	struct rt_ring r;
	for (int n = 1; n <= 5; n++) {
		int count[5] = { 0 };
		ring_of(&r, n);
		for (int k = 0; k < IDS; k++)
			count[rt_ring_owner(&r, trace(k))]++;
		for (int i = 0; i < n; i++) {
			double share = (double)count[i] / IDS;
			ck_assert_msg(fabs(share - 1.0 / n) < 0.03, "%d members: member %d owns %.3f", n,
				      i, share);
			ck_assert_msg(fabs(rt_ring_share(&r, i, 4096) - 1.0 / n) < 0.03,
				      "%d members: member %d's measured share %.3f", n, i,
				      rt_ring_share(&r, i, 4096));
		}
	}
}
END_TEST

/* A member that leaves moves only its own traces; back, it takes exactly those. */
START_TEST(leaving_moves_only_its_range)
{
	struct rt_ring r;
	static int before[IDS];
	int moved = 0;
	ring_of(&r, 3);
	for (int k = 0; k < IDS; k++)
		before[k] = rt_ring_owner(&r, trace(k));
	r.live[1] = 0;
	for (int k = 0; k < IDS; k++) {
		int now = rt_ring_owner(&r, trace(k));
		ck_assert_int_ne(now, 1);
		if (before[k] != 1)
			ck_assert_int_eq(now, before[k]);
		else
			moved++;
		ck_assert_int_eq(rt_ring_home(&r, trace(k)), before[k]);
	}
	ck_assert_int_gt(moved, IDS / 4);
	r.live[1] = 1;
	for (int k = 0; k < IDS; k++)
		ck_assert_int_eq(rt_ring_owner(&r, trace(k)), before[k]);
	r.live[0] = r.live[1] = r.live[2] = 0;
	ck_assert_int_eq(rt_ring_owner(&r, trace(0)), -1);
	ck_assert(rt_ring_share(&r, 0, 64) == 0);
}
END_TEST

/* Agents and coordinators list members in any order: owners are by id. */
START_TEST(order_does_not_matter)
{
	struct rt_ring a, b;
	rt_ring_init(&a);
	rt_ring_init(&b);
	rt_ring_add(&a, "east");
	rt_ring_add(&a, "west");
	rt_ring_add(&a, "north");
	rt_ring_add(&b, "north");
	rt_ring_add(&b, "east");
	rt_ring_add(&b, "west");
	for (int k = 0; k < IDS; k++)
		ck_assert_str_eq(a.id[rt_ring_owner(&a, trace(k))], b.id[rt_ring_owner(&b, trace(k))]);
	ck_assert_int_eq(rt_ring_add(&a, "east"), -1);     /* repeated */
	ck_assert_int_eq(rt_ring_add(&a, "bad id"), -1);   /* space */
	ck_assert_int_eq(rt_ring_find(&b, "west"), 2);
}
END_TEST

START_TEST(member_lists)
{
	struct rt_ring_entry e[4];
	char err[200];
	ck_assert_int_eq(rt_ring_parse("tcp://127.0.0.1:7700", e, 4, err, sizeof err), 1);
	ck_assert_str_eq(e[0].id, "0");
	ck_assert_str_eq(e[0].url, "tcp://127.0.0.1:7700");
	ck_assert_int_eq(rt_ring_parse("a=tcp://h1:7700,b-2=tcp://h2:7700", e, 4, err, sizeof err), 2);
	ck_assert_str_eq(e[1].id, "b-2");
	ck_assert_str_eq(e[1].url, "tcp://h2:7700");
	ck_assert_int_eq(rt_ring_parse("a=tcp://h1:1,a=tcp://h2:2", e, 4, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "twice"), "%s", err);
	ck_assert_int_eq(rt_ring_parse("a=tcp://h1:1,tcp://h2:2", e, 4, err, sizeof err), -1);
	ck_assert_int_eq(rt_ring_parse("a=", e, 4, err, sizeof err), -1);
	ck_assert_int_eq(rt_ring_parse("=tcp://x:1", e, 4, err, sizeof err), -1);
	ck_assert_int_eq(rt_ring_parse("", e, 4, err, sizeof err), -1);
	ck_assert_int_eq(rt_ring_parse("a=u,b=u,c=u,d=u,e=u", e, 4, err, sizeof err), -1);
}
END_TEST

/* Owners as the first sharded release computed them: a change to the weights
 * (the seed hash, the mix, the tie rule) would split traces across a group whose
 * members run different builds. */
START_TEST(owners_are_pinned)
{
	static const int want[16] = { 2, 1, 3, 2, 0, 0, 2, 3, 1, 3, 1, 0, 0, 1, 0, 3 };
	struct rt_ring r;
	rt_ring_init(&r);
	rt_ring_add(&r, "a");
	rt_ring_add(&r, "b");
	rt_ring_add(&r, "c");
	rt_ring_add(&r, "d");
	for (int k = 1; k <= 16; k++)
		ck_assert_int_eq(rt_ring_owner(&r, (uint64_t)k * 0x1000193ull), want[k - 1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("daemon_ring");
	TCase *t = tcase_create("ring");
	tcase_add_test(t, shares_are_even);
	tcase_add_test(t, leaving_moves_only_its_range);
	tcase_add_test(t, order_does_not_matter);
	tcase_add_test(t, member_lists);
	tcase_add_test(t, owners_are_pinned);
	suite_add_tcase(s, t);
	return test_run_suite(s);
}
