/*
 * coordinator/peers.c — the coordinator group as this member sees it: the
 * ring (daemon/ring.h over --peers), each member's liveness and load, for
 * `retrace status` (section "ring").
 *
 * Routing is the agents' (agent/route.c); a member needs the ring only to show
 * it. Every PEER_PROBE_NS the loop sends each other member the text request
 * "load" on one REQ context of its own (dialled without blocking); the nng
 * callback parses the answer ("load groups_open=N traces=M slices=K") into
 * the peer's fields under the coordinator's mutex, and a peer that answered
 * within PEER_LIVE_NS is live. Shares of the hash space are measured over the
 * live members (what agents that see the same liveness route by) and over all
 * (each member's home range).
 *
 * The live set is the group's, not only the status page's: every ACK of a
 * REGISTER carries it (the ring seeds of the members this one sees live,
 * wire.h), and agents route by it (agent/route.c) instead of each deciding
 * alone from its own failed sends. A peer never answered yet counts as live for
 * PEER_LIVE_NS after this member started: a member that (re)starts must not
 * tell the agents that the others are gone before it has asked them.
 */
#include "coord_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/reqrep0/req.h>

#include "daemon/figures.h"
#include "daemon/ring.h"
#include "nng_close.h"

#define PEER_PROBE_NS 1000000000ull /* a "load" request to each peer per second */
#define PEER_LIVE_NS 3500000000ull  /* answered this recently: live */
#define PEER_TIMEOUT_MS 1000

struct coord_peer {
	struct rt_coord *c;
	char url[RT_RING_URL_MAX];
	nng_socket sock;
	int open;
	atomic_int busy;
	nng_aio *aio;
	/* under c->mu: written by the callback, read by the loop */
	uint64_t answered_ns;         /* monotonic, 0 = never */
	uint64_t groups_open, traces, slices;
};

struct coord_peers {
	struct rt_ring ring;
	int self;
	uint64_t opened_ns;
	uint64_t next_probe_ns;
	struct coord_peer peer[RT_RING_MAX];
};

static void peer_cb(void *arg)
{
	struct coord_peer *p = arg;
	nng_msg *m;
	unsigned long long g, t, s;
	if (nng_aio_result(p->aio) != 0) {
		/* pairs with the acquire in coord_peers_tick: the aio is free again */
		atomic_store_explicit(&p->busy, 0, memory_order_release);
		return;
	}
	m = nng_aio_get_msg(p->aio);
	if (!m) { /* the request went out: now the answer */
		nng_recv_aio(p->sock, p->aio);
		return;
	}
	nng_aio_set_msg(p->aio, NULL);
	{
		char text[160];
		size_t n = nng_msg_len(m) < sizeof text - 1 ? nng_msg_len(m) : sizeof text - 1;
		memcpy(text, nng_msg_body(m), n);
		text[n] = 0;
		if (sscanf(text, "load groups_open=%llu traces=%llu slices=%llu", &g, &t, &s) == 3) {
			pthread_mutex_lock(&p->c->mu);
			p->answered_ns = coord_now_ns();
			p->groups_open = g;
			p->traces = t;
			p->slices = s;
			pthread_mutex_unlock(&p->c->mu);
		}
	}
	nng_msg_free(m);
	/* pairs with the acquire in coord_peers_tick: the figures are in, the aio free */
	atomic_store_explicit(&p->busy, 0, memory_order_release);
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
		nng_aio_set_timeout(p->aio, PEER_TIMEOUT_MS);
	}
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
			rt_nng_close_bounded(p->sock, RT_NNG_CLOSE_WAIT_MS);
		if (p->aio)
			nng_aio_free(p->aio);
	}
	free(ps);
	c->peers = NULL;
}

void coord_peers_tick(struct rt_coord *c, uint64_t now)
{
	struct coord_peers *ps = c->peers;
	if (!ps || now < ps->next_probe_ns)
		return;
	ps->next_probe_ns = now + PEER_PROBE_NS;
	for (uint32_t i = 0; i < ps->ring.n; i++) {
		struct coord_peer *p = &ps->peer[i];
		nng_msg *m;
		if (!p->open || atomic_load_explicit(&p->busy, memory_order_acquire))
			continue;
		if (nng_msg_alloc(&m, 0) != 0 || nng_msg_append(m, "load", 5) != 0)
			return;
		/* read by this thread only (the tick); the callback clears it */
		atomic_store_explicit(&p->busy, 1, memory_order_release);
		nng_aio_set_msg(p->aio, m);
		nng_send_aio(p->sock, p->aio);
	}
}

/* Member i live as this member sees it (caller holds c->mu). */
static int peer_live(const struct coord_peers *ps, uint32_t i, uint64_t now)
{
	const struct coord_peer *p = &ps->peer[i];
	if ((int)i == ps->self)
		return 1;
	if (p->answered_ns)
		return now - p->answered_ns < PEER_LIVE_NS;
	return now - ps->opened_ns < PEER_LIVE_NS;
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

size_t coord_peers_load_reply(struct rt_coord *c, char *out, size_t cap)
{
	return (size_t)snprintf(out, cap, "load groups_open=%u traces=%llu slices=%llu",
				c->groups_open,
				(unsigned long long)(c->st.traces_coherent + c->st.traces_incoherent),
				(unsigned long long)c->st.slices);
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
	for (uint32_t i = 0; i < live.n; i++) {
		struct coord_peer *p = &ps->peer[i];
		uint64_t g, t, s;
		double share = 100 * rt_ring_share(&live, (int)i, 4096);
		double home = 100 * rt_ring_share(&ps->ring, (int)i, 4096);
		char k[48], v[600];
		pthread_mutex_lock(&c->mu);
		g = p->groups_open;
		t = p->traces;
		s = p->slices;
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
				 "slices=%llu",
				 p->url, (int)i == ps->self ? " (self)" : "",
				 live.live[i] ? "live" : "down", share, home, (unsigned long long)g,
				 (unsigned long long)t, (unsigned long long)s);
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
	}
}
