/*
 * agent/guard.c — admission of control requests (see guard.h).
 *
 * The control thread records who sent the waiting request (pipe -> peer,
 * daemon/tls.h) next to it; main.c copies that into a->guard before the poll
 * thread serves it, so every check here runs on the poll thread that owns the
 * agent's state. The remote-trigger bucket is keyed by the peer's certificate
 * name with TLS, else by its address (all of loopback is one peer), so a flood
 * from one sender cannot use up another's share.
 */
#include "guard.h"

#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "control.h"
#include "daemon/figures.h"
#include "wire/wire.h"

void rt_agent_guard_init(struct rt_agent_guard *g, int tls, double rate, double burst)
{
	memset(g, 0, sizeof *g);
	g->tls = tls;
	rt_peer_rate_init(&g->remote, rate, burst);
}

static size_t ack(struct rt_agent *a, int32_t status, uint8_t *out, size_t cap)
{
	struct rt_wire_ack ack = { .status = status };
	a->msg.len = 0;
	if (rt_wire_encode_ack(&a->msg, &ack) != 0 || a->msg.len > cap)
		return 0;
	memcpy(out, a->msg.data, a->msg.len);
	return a->msg.len;
}

static size_t text(uint8_t *out, size_t cap, const char *s)
{
	return (size_t)snprintf((char *)out, cap, "%s", s) + 1;
}

size_t rt_agent_guard_admit(struct rt_agent *a, const uint8_t *req, size_t len, uint8_t *out,
			    size_t cap)
{
	struct rt_agent_guard *g = a->guard;
	int wire = rt_wire_looks_like_message(req, len);
	if (!g || cap == 0)
		return 0;
	if (len > RT_AGENT_REQUEST_MAX) {
		g->oversize++;
		return wire ? ack(a, RT_WIRE_E_TOO_BIG, out, cap)
			    : text(out, cap, "error: request too large");
	}
	/* Remote triggers pin traces: only the coordinator may send them. */
	if (wire && g->tls && !g->from_status && !rt_name_is_coordinator(g->peer.name)) {
		g->unauthorised++;
		return ack(a, RT_ACK_REFUSED, out, cap);
	}
	return 0;
}

int32_t rt_agent_remote_refused(struct rt_agent *a)
{
	struct rt_agent_guard *g = a->guard;
	char key[RT_PEER_KEY_MAX];
	if (!g)
		return 0;
	rt_peer_key(&g->peer, key, sizeof key);
	if (rt_peer_rate_take(&g->remote, key, rt_agent_now_ns()))
		return 0;
	g->rate_limited++;
	return RT_ACK_RATE_LIMITED;
}

void rt_agent_guard_figures(struct rt_figures *w, const struct rt_agent *a)
{
	const struct rt_agent_guard *g = a->guard;
	if (!g)
		return;
	rt_fig_section(w, "security");
	rt_fig_str(w, "tls", g->tls ? "on" : "off");
	rt_fig_gauge(w, "max_connections", g->max_connections);
	rt_fig_gauge(w, "connections", rt_pipe_cap_open(g->cap));
	rt_fig_u64(w, "connections_refused", rt_pipe_cap_refused(g->cap));
	rt_fig_u64(w, "tls_handshakes_refused", rt_tls_refused());
	rt_fig_u64(w, "oversize_requests", g->oversize);
	rt_fig_u64(w, "status_pings_unanswered", a->control ? a->control->probes_unanswered : 0);
	rt_fig_u64(w, "status_relistens", a->control ? a->control->relistens : 0);
	rt_fig_u64(w, "remote_triggers_unauthorised", g->unauthorised);
	rt_fig_u64(w, "remote_triggers_rate_limited", g->rate_limited);
	rt_fig_f(w, "remote_trigger_rate", g->remote.rate);
	rt_fig_f(w, "remote_trigger_burst", g->remote.burst);
}
