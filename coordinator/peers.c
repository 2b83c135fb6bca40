/*
 * coordinator/peers.c — the coordinator group as this member sees it: the
 * ring (daemon/ring.h over --peers), each member's liveness and load, for
 * `retrace status` (section "ring").
 *
 * Routing is the agents' (agent/route.c); a member needs the ring only to show
 * it and to publish its live set. Liveness asks whether the member's process
 * answers, not whether its loop is quick: a member busy in a long store commit
 * (ClickHouse under load takes seconds) or a turn full of a storm's slices is
 * alive, and judging it down would move its range to another member while it
 * still collects (issue 17: "trace stored by c0, its owner is c1"). So both
 * halves of the probe live on nng's threads, never on the loop:
 *   - asking: each peer has one aio that loops sleep -> send "load" -> receive
 *     the answer -> sleep (PEER_PROBE_MS after an answer, PEER_RETRY_MS after a
 *     failure), on a REQ socket of its own dialled without blocking;
 *   - answering: the coordinator socket's receive callback (coordinator.c)
 *     hands a "load" request to coord_peers_answer at once, which replies from
 *     a snapshot of the load the loop publishes after every turn
 *     (coord_peers_publish_load) — the loop may be blocked in a commit.
 * A peer is down only when both hold: no answer for PEER_LIVE_NS, and at least
 * PEER_DOWN_FAILS probes in a row failed since its last answer. The second
 * condition keeps a member whose own process stalled (no probe went out, none
 * failed) from calling the others down on stale timestamps when it wakes.
 * Shares of the hash space are measured over the live members (what agents
 * that see the same liveness route by) and over all (each member's home range).
 *
 * The live set is the group's, not only the status page's: every ACK of a
 * REGISTER carries it (the ring seeds of the members this one sees live,
 * wire.h), and agents route by it (agent/route.c) instead of each deciding
 * alone from its own failed sends. A peer never answered yet counts as live for
 * PEER_LIVE_NS after this member started: a member that (re)starts must not
 * tell the agents that the others are gone before it has asked them.
 *
 * Who may ask: "load" is a read, like "status" (auth.c): anyone the listener
 * admits; with TLS, any peer with a verified certificate. A probe without one
 * is answered with an error and counted (probes_refused).
 */
#include "coord_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "daemon/figures.h"
#include "daemon/ring.h"
#include "daemon/tls.h"
#include "nng_close.h"

#define PEER_PROBE_MS 1000         /* a "load" request to each peer per second */
#define PEER_RETRY_MS 250          /* after a failed one, the next sooner */
#define PEER_TIMEOUT_MS 1500       /* a probe unanswered this long failed */
#define PEER_LIVE_NS 3500000000ull /* answered this recently: live */
#define PEER_DOWN_FAILS 3          /* ... or fewer probes than this failed since */

enum peer_phase { PEER_SLEEP, PEER_SEND, PEER_RECV };

struct coord_peer {
	struct rt_coord *c;
	char url[RT_RING_URL_MAX];
	nng_socket sock;
	int open;
	nng_aio *aio;
	enum peer_phase phase; /* touched by the aio's callback only */
	/* under c->mu: written by the callback, read by the loop */
	uint64_t answered_ns;  /* monotonic, 0 = never */
	uint32_t fails;        /* probes failed in a row since the last answer */
	uint64_t probes, probe_failures;
	uint64_t groups_open, traces, slices;
};

struct coord_peers {
	struct rt_ring ring;
	int self;
	uint64_t opened_ns;
	/* this member's load as the loop last published it, read by the probe
	 * answer on nng's threads (relaxed: three figures for a display, each
	 * whole; no other memory is published through them) */
	atomic_ullong load_groups_open, load_traces, load_slices;
	atomic_ullong probes_answered, probes_refused;
	struct coord_peer peer[RT_RING_MAX];
};

static void probe_after(struct coord_peer *p, nng_duration ms)
{
	p->phase = PEER_SLEEP;
	nng_sleep_aio(ms, p->aio);
}

/* A probe ended: answered (text parsed) or failed. */
static void probe_done(struct coord_peer *p, const char *text)
{
	unsigned long long g, t, s;
	int ok = text && sscanf(text, "load groups_open=%llu traces=%llu slices=%llu", &g, &t,
				&s) == 3;
	pthread_mutex_lock(&p->c->mu);
	p->probes++;
	if (ok) {
		p->answered_ns = coord_now_ns();
		p->fails = 0;
		p->groups_open = g;
		p->traces = t;
		p->slices = s;
	} else {
		p->fails++;
		p->probe_failures++;
	}
	pthread_mutex_unlock(&p->c->mu);
	probe_after(p, ok ? PEER_PROBE_MS : PEER_RETRY_MS);
}

static int stopping(int rv)
{
	return rv == NNG_ECLOSED || rv == NNG_ECANCELED;
}

/* The probe's state machine: sleep -> send -> receive -> sleep, on nng's threads. */
static void peer_cb(void *arg)
{
	struct coord_peer *p = arg;
	int rv = nng_aio_result(p->aio);
	nng_msg *m;
	switch (p->phase) {
	case PEER_SLEEP:
		if (stopping(rv))
			return;
		if (nng_msg_alloc(&m, 0) != 0 || nng_msg_append(m, "load", 5) != 0) {
			probe_after(p, PEER_RETRY_MS); /* no memory now: later */
			return;
		}
		p->phase = PEER_SEND;
		nng_aio_set_timeout(p->aio, PEER_TIMEOUT_MS);
		nng_aio_set_msg(p->aio, m);
		nng_send_aio(p->sock, p->aio);
		return;
	case PEER_SEND:
		if (rv != 0) {
			nng_msg_free(nng_aio_get_msg(p->aio));
			nng_aio_set_msg(p->aio, NULL);
			if (!stopping(rv))
				probe_done(p, NULL);
			return;
		}
		p->phase = PEER_RECV;
		nng_recv_aio(p->sock, p->aio);
		return;
	case PEER_RECV:
		if (rv != 0) {
			if (!stopping(rv))
				probe_done(p, NULL);
			return;
		}
		m = nng_aio_get_msg(p->aio);
		nng_aio_set_msg(p->aio, NULL);
		/* nng 1.5.2 (Debian's) can end a REQ socket's receive with result 0
		 * and no message (nanomsg/nng#1620): seen here at a peer's kill -9,
		 * a SEGV that took this member down with the one it was probing
		 * (member_kill9_and_return: "trace 9011 in neither store"). No answer
		 * is a failed probe. */
		if (!m) {
			probe_done(p, NULL);
			return;
		}
		{
			char text[160];
			size_t n = nng_msg_len(m) < sizeof text - 1 ? nng_msg_len(m) : sizeof text - 1;
			memcpy(text, nng_msg_body(m), n);
			text[n] = 0;
			nng_msg_free(m);
			probe_done(p, text);
		}
		return;
	}
}

int coord_peers_open(struct rt_coord *c, char *err, size_t errlen)
{
	struct rt_ring_entry e[RT_RING_MAX];
	struct coord_peers *ps;
	char why[256];
	int n;
	if (!c->cfg.peers[0])
		return 0;
	if ((n = rt_ring_parse(c->cfg.peers, e, RT_RING_MAX, why, sizeof why)) < 0) {
		snprintf(err, errlen, "--peers: %s", why);
		return -1;
	}
	if (!(ps = calloc(1, sizeof *ps))) {
		snprintf(err, errlen, "out of memory for the peers");
		return -1;
	}
	c->peers = ps;
	rt_ring_init(&ps->ring);
	ps->self = -1;
	ps->opened_ns = coord_now_ns();
	for (int i = 0; i < n; i++) {
		struct coord_peer *p = &ps->peer[i];
		rt_ring_add(&ps->ring, e[i].id);
		snprintf(p->url, sizeof p->url, "%s", e[i].url);
		p->c = c;
		if (strcmp(e[i].id, c->cfg.member_id) == 0) {
			ps->self = i;
			continue;
		}
		/* A peer that is down now is dialled again in the background. */
		if (nng_req0_open(&p->sock) != 0 || nng_aio_alloc(&p->aio, peer_cb, p) != 0 ||
		    rt_tls_dial(p->sock, c->tls, p->url, RT_TLS_COORDINATOR_NAME, NNG_FLAG_NONBLOCK,
				why, sizeof why) != 0) {
			snprintf(err, errlen, "--peers: member %s (%s): %s", e[i].id, p->url, why);
			return -1;
		}
		p->open = 1;
		probe_after(p, 0);
	}
	/* pairs with the acquire in coord_peers_answer: c->peers is whole */
	atomic_store_explicit(&c->peers_answering, 1, memory_order_release);
	return 0;
}

void coord_peers_close(struct rt_coord *c)
{
	struct coord_peers *ps = c->peers;
	if (!ps)
		return;
	for (uint32_t i = 0; i < ps->ring.n; i++) {
		struct coord_peer *p = &ps->peer[i];
		if (p->aio)
			nng_aio_stop(p->aio);
		if (p->open)
			rt_nng_close_by(p->sock, &c->close_by);
		if (p->aio)
			nng_aio_free(p->aio);
	}
	free(ps);
	c->peers = NULL;
}

/* Member i live as this member sees it (caller holds c->mu). */
static int peer_live(const struct coord_peers *ps, uint32_t i, uint64_t now)
{
	const struct coord_peer *p = &ps->peer[i];
	uint64_t since = p->answered_ns ? p->answered_ns : ps->opened_ns;
	if ((int)i == ps->self)
		return 1;
	return now - since < PEER_LIVE_NS || p->fails < PEER_DOWN_FAILS;
}

uint32_t coord_peers_view(struct rt_coord *c, uint64_t *seeds, uint32_t cap)
{
	struct coord_peers *ps = c->peers;
	uint64_t now = coord_now_ns();
	uint32_t n = 0;
	if (!ps)
		return 0;
	pthread_mutex_lock(&c->mu);
	for (uint32_t i = 0; i < ps->ring.n && n < cap; i++)
		if (peer_live(ps, i, now))
			seeds[n++] = ps->ring.seed[i];
	pthread_mutex_unlock(&c->mu);
	return n;
}

/* The answer to "load", one format for both who answer it. */
static int load_text(char *out, size_t cap, unsigned long long groups_open,
		     unsigned long long traces, unsigned long long slices)
{
	return snprintf(out, cap, "load groups_open=%llu traces=%llu slices=%llu", groups_open,
			traces, slices);
}

size_t coord_peers_load_reply(struct rt_coord *c, char *out, size_t cap)
{
	return (size_t)load_text(out, cap, c->groups_open,
				 c->st.traces_coherent + c->st.traces_incoherent, c->st.slices);
}

void coord_peers_publish_load(struct rt_coord *c)
{
	struct coord_peers *ps = c->peers;
	if (!ps)
		return;
	atomic_store_explicit(&ps->load_groups_open, c->groups_open, memory_order_relaxed);
	atomic_store_explicit(&ps->load_traces, c->st.traces_coherent + c->st.traces_incoherent,
			      memory_order_relaxed);
	atomic_store_explicit(&ps->load_slices, c->st.slices, memory_order_relaxed);
}

/* May this peer ask for "load"? As for any read (auth.c): with TLS, only
 * over a verified certificate. */
static int may_probe(const struct rt_coord *c, nng_msg *m)
{
	struct rt_peer who;
	if (!c->tls)
		return 1;
	rt_peer_of(m, &who);
	return who.tls;
}

nng_msg *coord_peers_answer(struct rt_coord *c, nng_msg *request)
{
	struct coord_peers *ps;
	char text[160];
	int n;
	nng_msg *reply;
	if (!atomic_load_explicit(&c->peers_answering, memory_order_acquire))
		return NULL; /* not sharded (or not yet): the loop answers */
	ps = c->peers;
	if (may_probe(c, request)) {
		n = load_text(text, sizeof text,
			      atomic_load_explicit(&ps->load_groups_open, memory_order_relaxed),
			      atomic_load_explicit(&ps->load_traces, memory_order_relaxed),
			      atomic_load_explicit(&ps->load_slices, memory_order_relaxed));
		atomic_fetch_add_explicit(&ps->probes_answered, 1, memory_order_relaxed);
	} else {
		n = snprintf(text, sizeof text,
			     "error: not authenticated");
		atomic_fetch_add_explicit(&ps->probes_refused, 1, memory_order_relaxed);
	}
	if (nng_msg_alloc(&reply, 0) != 0 || nng_msg_append(reply, text, (size_t)n + 1) != 0)
		return NULL; /* no memory: the probe times out, as if lost */
	return reply;
}

void coord_peers_figures(struct rt_figures *w, struct rt_coord *c)
{
	struct coord_peers *ps = c->peers;
	struct rt_ring live;
	uint64_t now = coord_now_ns();
	if (!ps)
		return;
	live = ps->ring;
	pthread_mutex_lock(&c->mu);
	for (uint32_t i = 0; i < live.n; i++)
		live.live[i] = (uint8_t)peer_live(ps, i, now);
	pthread_mutex_unlock(&c->mu);
	rt_fig_section(w, "ring");
	rt_fig_str(w, "member_id", c->cfg.member_id);
	rt_fig_gauge(w, "members", live.n);
	{
		uint64_t nlive = 0;
		for (uint32_t i = 0; i < live.n; i++)
			nlive += live.live[i];
		rt_fig_gauge(w, "members_live", nlive);
	}
	/* probes of this member by the others, answered from nng's thread */
	rt_fig_u64(w, "probes_answered",
		   atomic_load_explicit(&ps->probes_answered, memory_order_relaxed));
	rt_fig_u64(w, "probes_refused",
		   atomic_load_explicit(&ps->probes_refused, memory_order_relaxed));
	for (uint32_t i = 0; i < live.n; i++) {
		struct coord_peer *p = &ps->peer[i];
		uint64_t g, t, s, probes, failed;
		double share = 100 * rt_ring_share(&live, (int)i, 4096);
		double home = 100 * rt_ring_share(&ps->ring, (int)i, 4096);
		char k[48], v[600];
		pthread_mutex_lock(&c->mu);
		g = p->groups_open;
		t = p->traces;
		s = p->slices;
		probes = p->probes;
		failed = p->probe_failures;
		pthread_mutex_unlock(&c->mu);
		if ((int)i == ps->self) {
			g = c->groups_open;
			t = c->st.traces_coherent + c->st.traces_incoherent;
			s = c->st.slices;
		}
		if (!rt_fig_prometheus(w)) {
			snprintf(k, sizeof k, "member.%s", live.id[i]);
			snprintf(v, sizeof v,
				 "%s%s %s share=%.1f%% home=%.1f%% groups_open=%llu traces=%llu "
				 "slices=%llu probes=%llu probes_failed=%llu",
				 p->url, (int)i == ps->self ? " (self)" : "",
				 live.live[i] ? "live" : "down", share, home, (unsigned long long)g,
				 (unsigned long long)t, (unsigned long long)s,
				 (unsigned long long)probes, (unsigned long long)failed);
			rt_fig_str(w, k, v);
			continue;
		}
		rt_fig_section_id(w, "ring_member", "member", live.id[i]);
		rt_fig_str(w, "url", p->url);
		rt_fig_gauge(w, "self", (int)i == ps->self);
		rt_fig_gauge(w, "live", live.live[i]);
		rt_fig_f(w, "share_pct", share);
		rt_fig_f(w, "home_share_pct", home);
		rt_fig_gauge(w, "groups_open", g);
		rt_fig_u64(w, "traces", t);
		rt_fig_u64(w, "slices", s);
		rt_fig_u64(w, "probes", probes);
		rt_fig_u64(w, "probes_failed", failed);
	}
}
