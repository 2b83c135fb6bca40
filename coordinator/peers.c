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
 * A peer's "load" is answered on nng's thread (coord_peers_answer) from the
 * figures the loop left at its last tick, so a member whose loop is busy (a
 * slow commit under load) still counts as live: liveness says the process is
 * there and reachable; slowness is what the agents' own round trips measure.
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
	uint64_t unanswered_ns;       /* sent time of the first probe since the last answer (0: none) */
	uint64_t groups_open, traces, slices;
};

struct coord_peers {
	struct rt_ring ring;
	int self;
	uint64_t opened_ns;
	uint64_t next_probe_ns;
	/* this member's own load for a peer's probe, answered on nng's thread
	 * (coord_peers_answer): under c->mu, written by the loop's tick */
	uint64_t my_groups_open, my_traces, my_slices;
	atomic_int ready;            /* set up: nng's threads may answer probes */
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
			p->unanswered_ns = 0;
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
	if (coord_handover_open(c) != 0) {
		snprintf(err, errlen, "out of memory for the hand-over");
		return -1;
	}
	/* pairs with the acquire in coord_peers_answer */
	atomic_store_explicit(&ps->ready, 1, memory_order_release);
	return 0;
}

void coord_peers_close(struct rt_coord *c)
{
	struct coord_peers *ps = c->peers;
	if (!ps)
		return;
	coord_handover_close(c); /* its contexts live on the peer sockets */
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
	pthread_mutex_lock(&c->mu);
	ps->my_groups_open = c->groups_open;
	ps->my_traces = c->st.traces_coherent + c->st.traces_incoherent;
	ps->my_slices = c->st.slices;
	pthread_mutex_unlock(&c->mu);
	for (uint32_t i = 0; i < ps->ring.n; i++) {
		struct coord_peer *p = &ps->peer[i];
		nng_msg *m;
		if (!p->open || atomic_load_explicit(&p->busy, memory_order_acquire))
			continue;
		pthread_mutex_lock(&c->mu);
		if (!p->unanswered_ns)
			p->unanswered_ns = now;
		pthread_mutex_unlock(&c->mu);
		if (nng_msg_alloc(&m, 0) != 0 || nng_msg_append(m, "load", 5) != 0)
			return;
		/* read by this thread only (the tick); the callback clears it */
		atomic_store_explicit(&p->busy, 1, memory_order_release);
		nng_aio_set_msg(p->aio, m);
		nng_send_aio(p->sock, p->aio);
	}
}

/*
 * Member i live as this member sees it (caller holds c->mu): down once a probe
 * went unanswered for PEER_LIVE_NS. Measured from our probe, not from the last
 * answer: when this member's own loop stalls (a slow commit under load sends no
 * probes), its peers did not go down, and the agents must not be told so.
 */
static int peer_live(const struct coord_peers *ps, uint32_t i, uint64_t now)
{
	const struct coord_peer *p = &ps->peer[i];
	if ((int)i == ps->self)
		return 1;
	if (!p->answered_ns && now - ps->opened_ns < PEER_LIVE_NS)
		return 1; /* just started: not asked long enough to tell */
	if (!p->answered_ns && !p->unanswered_ns)
		return 0;
	return !p->unanswered_ns || now - p->unanswered_ns < PEER_LIVE_NS;
}

int coord_peers_answer(struct rt_coord *c, struct coord_in *in)
{
	struct coord_peers *ps = c->peers;
	const uint8_t *b;
	char text[160];
	size_t len, n;
	nng_msg *reply = NULL;
	if (!ps || in->collector || !in->msg || !atomic_load_explicit(&ps->ready, memory_order_acquire))
		return 0;
	b = nng_msg_body(in->msg);
	len = nng_msg_len(in->msg);
	if (!(len == 4 || (len == 5 && b[4] == 0)) || memcmp(b, "load", 4) != 0)
		return 0;
	pthread_mutex_lock(&c->mu);
	n = (size_t)snprintf(text, sizeof text, "load groups_open=%llu traces=%llu slices=%llu",
			     (unsigned long long)ps->my_groups_open,
			     (unsigned long long)ps->my_traces, (unsigned long long)ps->my_slices) + 1;
	pthread_mutex_unlock(&c->mu);
	if (nng_msg_alloc(&reply, 0) != 0 || nng_msg_append(reply, text, n) != 0) {
		if (reply)
			nng_msg_free(reply);
		return 0; /* the loop answers it */
	}
	nng_msg_free(in->msg);
	in->msg = NULL;
	coord_in_send_now(in, reply);
	return 1;
}

int coord_peers_next(struct rt_coord *c, uint32_t *cursor, nng_socket *sock)
{
	struct coord_peers *ps = c->peers;
	uint64_t now = coord_now_ns();
	int found = -1;
	if (!ps || !ps->ring.n)
		return -1;
	pthread_mutex_lock(&c->mu);
	for (uint32_t k = 0; k < ps->ring.n && found < 0; k++) {
		uint32_t i = (*cursor + k) % ps->ring.n;
		if ((int)i != ps->self && ps->peer[i].open && peer_live(ps, i, now))
			found = (int)i;
	}
	pthread_mutex_unlock(&c->mu);
	if (found >= 0) {
		*cursor = (uint32_t)found + 1;
		*sock = ps->peer[found].sock;
	}
	return found;
}

int coord_peers_other(struct rt_coord *c, uint32_t i, nng_socket *sock)
{
	struct coord_peers *ps = c->peers;
	int live;
	if (!ps || i >= ps->ring.n)
		return -1;
	if ((int)i == ps->self)
		return 0;
	pthread_mutex_lock(&c->mu);
	live = ps->peer[i].open && peer_live(ps, i, coord_now_ns());
	pthread_mutex_unlock(&c->mu);
	*sock = ps->peer[i].sock;
	return live ? 1 : 2;
}

int coord_peers_index(struct rt_coord *c, const char *id)
{
	return c->peers ? rt_ring_find(&c->peers->ring, id) : -1;
}

int coord_peers_home(struct rt_coord *c, uint64_t lo, int *live)
{
	struct coord_peers *ps = c->peers;
	int home;
	*live = 0;
	if (!ps || (home = rt_ring_home(&ps->ring, lo)) < 0 || home == ps->self)
		return -1;
	pthread_mutex_lock(&c->mu);
	*live = ps->peer[home].open && peer_live(ps, (uint32_t)home, coord_now_ns());
	pthread_mutex_unlock(&c->mu);
	return home;
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
	coord_handover_figures(w, c);
}
