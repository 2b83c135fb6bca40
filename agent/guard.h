/*
 * agent/guard.h — what the agent accepts on its control socket, and from whom
 * (docs/security.md).
 *
 * Owns: the sender of the request being served (set by the control thread
 * hand-off, agent/control.h), the per-peer token bucket of remote triggers,
 * and the refusal counters `retrace status` shows in section security.
 *
 * Promises:
 *   - A request over RT_AGENT_REQUEST_MAX bytes is refused and counted.
 *   - With TLS, a REMOTE_TRIGGER on the network address is served only from a
 *     peer whose certificate is the coordinator's; status and ping from any
 *     peer the TLS handshake let in. The local status address (a directory
 *     only the agent's user can enter) is served as before.
 *   - Remote triggers are rate-limited per peer (--remote-trigger-rate/-burst);
 *     the excess is answered with an error ACK (RT_ACK_RATE_LIMITED), counted.
 * A NULL a->guard (tests and benchmarks driving the core) admits everything.
 */
#ifndef RETRACE_AGENT_GUARD_H
#define RETRACE_AGENT_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/guard.h"
#include "daemon/tls.h"

/* A REMOTE_TRIGGER is ~1.3 KB at most; status and ping requests are words. */
#define RT_AGENT_REQUEST_MAX (64u << 10)
#define RT_AGENT_REQUEST_HARD (256u << 10) /* nng drops the connection past this */

struct rt_agent;
struct rt_figures;

struct rt_agent_guard {
	int tls;                  /* certificates configured: the network address is TLS */
	struct rt_peer peer;      /* sender of the request being served */
	int from_status;          /* it came in on the local status address */
	struct rt_peer_rate remote; /* remote triggers per peer */
	struct rt_pipe_cap *cap;  /* the control socket's connection cap (figures) */
	uint32_t max_connections;
	uint64_t oversize;        /* requests over RT_AGENT_REQUEST_MAX */
	uint64_t unauthorised;    /* remote triggers from a peer that is not the coordinator */
	uint64_t rate_limited;    /* remote triggers over their peer's rate */
};

void rt_agent_guard_init(struct rt_agent_guard *g, int tls, double rate, double burst);

/*
 * Before the request is handled: 0 to handle it, or the length of the refusal
 * written to out (counted).
 */
size_t rt_agent_guard_admit(struct rt_agent *a, const uint8_t *req, size_t len, uint8_t *out,
			    size_t cap);

/* rt_agent_remote_refused (agent.h): RT_ACK_RATE_LIMITED when the peer of the
 * request being served is over its rate. */

void rt_agent_guard_figures(struct rt_figures *w, const struct rt_agent *a);

#endif
