/*
 * agent/route.c — one uplink per coordinator of the group, and the choice
 * among them.
 *
 * Members come from the --coordinator and --collector lists (daemon/ring.h's
 * grammar); member i's uplink dials both of its URLs and registers with its
 * coordinator as the single uplink always did. The owner of a trace is
 * rt_ring_owner over the members this agent considers live; the caller passes
 * the trace's sticky member (the one that acknowledged part of it), which
 * wins. Liveness is the group's (follow_members): each member's REGISTER ACK
 * carries the live set it sees (coordinator/peers.c probes the others), and
 * the agent drops a member only when a member that answers it says so; its own
 * failed sends only make it ask (REGISTER to the others now). Without such a
 * set (a coordinator alone, members without --peers) the agent decides alone
 * as before: RT_ROUTE_FAILS round trips in a row failed on either link drop a
 * member (never the last live one) — at once when neither link holds a
 * connection, else only after RT_ROUTE_SLOW_NS without a reply (silent_long:
 * several requests in flight time out together behind one slow commit, and
 * counted as three failures they moved a live member's range away); its
 * REGISTER keeps going out (every second while it fails, uplink.c), and the
 * first one acknowledged brings the member back.
 */
#include "route.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

int rt_route_open(struct rt_route *r, const char *collectors, const char *coordinators,
		  uint32_t buffer_count, uint32_t outbox_cap, int timeout_ms,
		  const struct rt_wire_buf *register_msg, char *err, size_t errlen)
{
	struct rt_ring_entry coll[RT_ROUTE_MAX], coord[RT_ROUTE_MAX];
	int ncoll = 0, ncoord = 0, n;
	char why[256];
	memset(r, 0, sizeof *r);
	rt_ring_init(&r->ring);
	if (collectors && collectors[0] &&
	    (ncoll = rt_ring_parse(collectors, coll, RT_ROUTE_MAX, why, sizeof why)) < 0) {
		snprintf(err, errlen, "--collector: %s", why);
		return -1;
	}
	if (coordinators && coordinators[0] &&
	    (ncoord = rt_ring_parse(coordinators, coord, RT_ROUTE_MAX, why, sizeof why)) < 0) {
		snprintf(err, errlen, "--coordinator: %s", why);
		return -1;
	}
	if (ncoll && ncoord) { /* the same members in both lists, in any order */
		if (ncoll != ncoord) {
			snprintf(err, errlen, "--collector names %d members, --coordinator %d", ncoll,
				 ncoord);
			return -1;
		}
		for (int i = 0; i < ncoord; i++) {
			int k;
			for (k = 0; k < ncoll && strcmp(coll[k].id, coord[i].id); k++)
				;
			if (k == ncoll) {
				snprintf(err, errlen, "member '%s' of --coordinator is not in --collector",
					 coord[i].id);
				return -1;
			}
			if (k != i) { /* line the collector list up with the coordinator list */
				struct rt_ring_entry t = coll[i];
				coll[i] = coll[k];
				coll[k] = t;
			}
		}
	}
	n = ncoord ? ncoord : ncoll;
	if (n == 0)
		n = 1; /* neither link: one idle uplink, as before */
	for (int i = 0; i < n; i++) {
		const char *id = ncoord ? coord[i].id : ncoll ? coll[i].id : "0";
		if (rt_ring_add(&r->ring, id) < 0 ||
		    rt_uplink_open(&r->up[i], ncoll ? coll[i].url : "", ncoord ? coord[i].url : "",
				   buffer_count, outbox_cap, timeout_ms, register_msg, err,
				   errlen) != 0) {
			if (!err[0])
				snprintf(err, errlen, "bad member '%s'", id);
			r->n = (uint32_t)i;
			rt_route_close(r);
			return -1;
		}
		r->n = (uint32_t)i + 1;
	}
	r->has_coll = ncoll > 0;
	r->has_coord = ncoord > 0;
	return 0;
}

void rt_route_close(struct rt_route *r)
{
	for (uint32_t i = 0; i < r->n; i++)
		rt_uplink_close(&r->up[i]);
	r->n = 0;
}

uint32_t rt_route_member(const struct rt_route *r, uint64_t trace_lo, uint8_t sticky)
{
	int o;
	if (sticky && sticky <= r->n)
		return (uint32_t)sticky - 1;
	o = rt_ring_owner(&r->ring, trace_lo);
	return o < 0 ? (uint32_t)rt_ring_home(&r->ring, trace_lo) : (uint32_t)o;
}

uint32_t rt_route_index(const struct rt_route *r, const struct rt_uplink *u)
{
	return u >= r->up && u < r->up + r->n ? (uint32_t)(u - r->up) : 0;
}

uint32_t rt_route_live(const struct rt_route *r)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < r->n; i++)
		n += r->ring.live[i];
	return n;
}

/* Own failures decide (no member publishes a live set: a coordinator alone, or
 * members without --peers): drop after RT_ROUTE_FAILS, never the last live one. */
static void drop(struct rt_route *r, uint32_t m)
{
	if (!r->ring.live[m] || r->n < 2 || rt_route_live(r) < 2)
		return; /* the last live member stays: there is nowhere else to go */
	r->ring.live[m] = 0;
	r->up[m].registered = 0; /* its next acknowledged REGISTER brings it back */
	rt_uplink_cancel(&r->up[m]); /* what waits for it is routed again */
	r->dropped++;
	rt_log(RT_LOG_WARN, "coordinator member %s stopped answering (%u round trips failed); its "
	       "new traces go to the next owner", r->ring.id[m], RT_ROUTE_FAILS);
}

void rt_route_result(struct rt_route *r, uint32_t m, int ok)
{
	if (m >= r->n)
		return;
	if (ok)
		r->fails[m] = 0;
	else
		r->fails[m]++; /* rt_route_pump decides (silent_long) */
}

/* A reply on either of member m's links since the last look: heard now. */
static void note_replies(struct rt_route *r, uint32_t m, uint64_t now_ns)
{
	const struct rt_uplink *u = &r->up[m];
	uint64_t n = atomic_load_explicit(&u->coll_pipes.replies, memory_order_relaxed) +
		     atomic_load_explicit(&u->coord_pipes.replies, memory_order_relaxed);
	if (n != r->replies_seen[m] || !r->heard_ns[m]) {
		r->replies_seen[m] = n;
		r->heard_ns[m] = now_ns;
	}
}

/* Has member m been silent long enough to be dropped on this agent's own
 * count? Without a connection on either link, yes (the failures took their
 * timeouts); with one, after RT_ROUTE_SLOW_NS (or RT_ROUTE_FAILS timeouts,
 * if longer) without a reply. */
static int silent_long(const struct rt_route *r, uint32_t m, uint64_t now_ns)
{
	const struct rt_uplink *u = &r->up[m];
	uint64_t wait = (uint64_t)RT_ROUTE_FAILS * (uint64_t)u->timeout_ms * 1000000ull;
	if (atomic_load_explicit(&u->coll_pipes.n, memory_order_acquire) <= 0 &&
	    atomic_load_explicit(&u->coord_pipes.n, memory_order_acquire) <= 0)
		return 1;
	if (wait < RT_ROUTE_SLOW_NS)
		wait = RT_ROUTE_SLOW_NS;
	return now_ns - r->heard_ns[m] >= wait;
}

/* Member m answers this agent now: its last REGISTER was acknowledged and its
 * round trips have not failed RT_ROUTE_FAILS times in a row since. */
static int answers(const struct rt_route *r, uint32_t m)
{
	return r->up[m].registered && r->fails[m] < RT_ROUTE_FAILS &&
	       r->up[m].coord_fails_in_row < RT_ROUTE_FAILS;
}

static int in_view(const struct rt_uplink *u, uint64_t seed)
{
	for (uint32_t i = 0; i < u->view_n; i++)
		if (u->view[i] == seed)
			return 1;
	return 0;
}

/*
 * The live set the members publish: member x is live unless a member that
 * answers this agent says it is not. A member that stops answering this agent
 * only makes the agent ask the others (a REGISTER now), so every agent drops it
 * when the members do, within a round trip of each other, not after its own
 * count of failures. If the members' sets exclude each other (a partition
 * between them), the members that answer stay live: nothing better is known.
 * 0 when no member that answers has published a set.
 */
static int follow_members(struct rt_route *r, uint8_t *live)
{
	uint32_t x, y, any = 0, views = 0;
	for (y = 0; y < r->n; y++)
		views += answers(r, y) && r->up[y].view_n > 0;
	if (!views)
		return 0;
	for (x = 0; x < r->n; x++) {
		live[x] = 1;
		for (y = 0; y < r->n && live[x]; y++)
			if (answers(r, y) && r->up[y].view_n && !in_view(&r->up[y], r->ring.seed[x]))
				live[x] = 0;
		any += live[x];
	}
	for (x = 0; !any && x < r->n; x++)
		any += live[x] = (uint8_t)answers(r, x);
	return any ? 1 : 0;
}

void rt_route_pump(struct rt_route *r, uint64_t now_ns)
{
	uint8_t live[RT_ROUTE_MAX];
	for (uint32_t m = 0; m < r->n; m++) {
		struct rt_uplink *u = &r->up[m];
		int was = u->registered;
		note_replies(r, m, now_ns);
		rt_uplink_keep_dialing(u, now_ns);
		rt_uplink_pump_coordinator(u, now_ns);
		if (!was && u->registered && r->follows)
			r->fails[m] = 0; /* a round trip that worked: it answers again */
		/* ask at its first failure, not its third: the others' set may
		 * already say it is gone */
		if (r->n > 1 && (!answers(r, m) || r->fails[m] || u->coord_fails_in_row ||
				 (!was && u->registered)))
			for (uint32_t k = 0; k < r->n; k++)
				if (k != m) /* ask the others what they see */
					rt_uplink_ask(&r->up[k], now_ns);
	}
	r->follows = r->has_coord && follow_members(r, live);
	for (uint32_t m = 0; m < r->n; m++) {
		struct rt_uplink *u = &r->up[m];
		if (r->follows) {
			if (r->ring.live[m] && !live[m]) {
				r->dropped++;
				rt_uplink_cancel(u); /* what waits for it is routed again */
				rt_log(RT_LOG_WARN, "coordinator member %s is down in the group's live "
				       "set; its new traces go to the next owner", r->ring.id[m]);
			} else if (!r->ring.live[m] && live[m]) {
				r->returned++;
				r->fails[m] = 0;
				rt_log(RT_LOG_INFO, "coordinator member %s is live in the group's live "
				       "set again; it takes its range back", r->ring.id[m]);
			}
			r->ring.live[m] = live[m];
			continue;
		}
		if ((u->coord_fails_in_row >= RT_ROUTE_FAILS || r->fails[m] >= RT_ROUTE_FAILS) &&
		    silent_long(r, m, now_ns))
			drop(r, m);
		if (!r->ring.live[m] && u->registered) {
			r->ring.live[m] = 1;
			r->fails[m] = 0;
			r->returned++;
			rt_log(RT_LOG_INFO, "coordinator member %s answers again; it takes its range back",
			       r->ring.id[m]);
		}
	}
}

uint32_t rt_route_inflight(const struct rt_route *r)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < r->n; i++)
		n += rt_uplink_inflight(&r->up[i]);
	return n;
}

uint32_t rt_route_coord_inflight(const struct rt_route *r)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < r->n; i++)
		n += rt_uplink_coord_inflight(&r->up[i]);
	return n;
}

uint32_t rt_route_waiting(const struct rt_route *r)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < r->n; i++)
		n += r->up[i].out_len;
	return n;
}

void rt_route_stats(const struct rt_route *r, struct rt_uplink_stats *sum)
{
	memset(sum, 0, sizeof *sum);
	for (uint32_t i = 0; i < r->n; i++) {
		const struct rt_uplink_stats *s = &r->up[i].st;
		sum->slices_sent += s->slices_sent;
		sum->slices_acked += s->slices_acked;
		sum->slices_failed += s->slices_failed;
		sum->coord_sent += s->coord_sent;
		sum->coord_acked += s->coord_acked;
		sum->coord_failed += s->coord_failed;
		sum->coord_dropped += s->coord_dropped;
		sum->coord_reordered += s->coord_reordered;
		sum->coord_evicted += s->coord_evicted;
		sum->registrations += s->registrations;
		sum->registrations_refused += s->registrations_refused;
		sum->redials += s->redials;
		sum->coll_redials += s->coll_redials;
		sum->coord_redials += s->coord_redials;
	}
}
