/*
 * coordinator/directory.c — agent id -> control address, and a REQ socket per agent.
 *
 * A REGISTER upserts the entry in memory and in the store (same transaction as
 * the rest of the loop's turn), so a restarted coordinator knows every agent at
 * once instead of waiting for their next registration. An entry not refreshed
 * for agent_ttl is forgotten (memory and store); a stored entry counts as seen
 * at load time, so agents have one TTL to re-register after a restart.
 *
 * The directory is an array searched linearly: a deployment has tens to a few
 * thousand agents and a lookup happens once per remote trigger, next to a
 * network round trip.
 *
 * Each agent gets one REQ socket, dialled without blocking (nng reconnects in
 * the background); every remote trigger opens its own context on it so any
 * number run in parallel. A new address closes the old socket: requests on it
 * fail and are retried on the new one. With TLS the socket talks only to a
 * peer whose certificate is agent-N.
 *
 * Who may move an agent (docs/security.md). With TLS the REGISTER's sender has
 * proven it is agent N (auth.c), so it may name any tls+tcp:// address. Without
 * TLS nothing proves it: an agent id registered within agent_ttl keeps its
 * address, and a REGISTER naming another one is refused and counted until the
 * id has been silent for a whole TTL (an agent that restarts on a new port
 * waits that long; one that restarts on its old address does not). The host,
 * pid and start time a REGISTER carries are its own claims, so they decide
 * nothing. Addresses the coordinator will not dial (auth.c) are refused too.
 */
#include "nng_close.h"
#include "coord_internal.h"

#include <stdlib.h>
#include <string.h>

#include <nng/protocol/reqrep0/req.h>

struct coord_agent *coord_dir_find(struct rt_coord *c, uint32_t id)
{
	uint32_t i;
	for (i = 0; i < c->dir.count; i++)
		if (c->dir.agents[i].id == id)
			return &c->dir.agents[i];
	return NULL;
}

/* Close a's socket, waiting until `by` at the latest. */
static void close_socket_by(struct coord_agent *a, const struct timespec *by)
{
	if (a->sock_open) {
		rt_nng_close_by(a->sock, by);
		a->sock_open = 0;
	}
}

static void close_socket(struct coord_agent *a)
{
	struct timespec by;
	rt_nng_close_deadline(&by, RT_NNG_CLOSE_WAIT_MS);
	close_socket_by(a, &by);
}

static void open_socket(struct rt_coord *c, struct coord_agent *a)
{
	char name[32], err[512];
	int rv;
	if (a->sock_open || !a->addr[0])
		return;
	if (!coord_auth_addr_ok(c, a->addr)) {
		/* E.g. a plain address stored before TLS was configured. */
		coord_log(c, LOG_WARN, "agent %u: not dialling %s (%s)", a->id, a->addr,
			  c->tls ? "not tls+tcp://" : "not loopback; see --insecure");
		return;
	}
	if ((rv = nng_req0_open(&a->sock)) != 0) {
		coord_log(c, LOG_ERROR, "agent %u: cannot open a socket: %s", a->id, nng_strerror(rv));
		return;
	}
	/* We time out and retry ourselves; nng's own resend would duplicate requests. */
	nng_socket_set_ms(a->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_socket_set_ms(a->sock, NNG_OPT_RECONNMINT, 10);
	nng_socket_set_ms(a->sock, NNG_OPT_RECONNMAXT, 1000);
	snprintf(name, sizeof name, "agent-%u", a->id);
	if (rt_tls_dial(a->sock, c->tls, a->addr, name, NNG_FLAG_NONBLOCK, err, sizeof err) != 0) {
		coord_log(c, LOG_WARN, "agent %u: %s", a->id, err);
		rt_nng_close_bounded(a->sock, RT_NNG_CLOSE_WAIT_MS);
		return;
	}
	a->sock_open = 1;
}

static struct coord_agent *add_entry(struct rt_coord *c, uint32_t id)
{
	struct coord_agent *a;
	if (c->dir.count == c->dir.cap) {
		uint32_t cap = c->dir.cap ? c->dir.cap * 2 : 16;
		struct coord_agent *n = realloc(c->dir.agents, cap * sizeof *n);
		if (!n)
			return NULL;
		c->dir.agents = n;
		c->dir.cap = cap;
	}
	a = &c->dir.agents[c->dir.count++];
	memset(a, 0, sizeof *a);
	a->id = id;
	return a;
}

static int persist(struct rt_coord *c, const struct coord_agent *a)
{
	struct rt_store_agent sa;
	memset(&sa, 0, sizeof sa);
	sa.agent_id = a->id;
	sa.pid = a->pid;
	snprintf(sa.host, sizeof sa.host, "%s", a->host);
	snprintf(sa.control_addr, sizeof sa.control_addr, "%s", a->addr);
	sa.start_ns = a->start_ns;
	sa.last_seen_ns = a->last_seen_ns;
	return rt_store_put_agent(c->store, &sa);
}

/* Registered (or loaded) within agent_ttl; agent_ttl 0 keeps agents for ever. */
static int live(const struct rt_coord *c, const struct coord_agent *a)
{
	uint64_t ttl = (uint64_t)(c->cfg.agent_ttl * 1e9);
	return ttl == 0 || coord_now_ns() - a->seen_mono_ns <= ttl;
}

int coord_dir_register(struct rt_coord *c, const struct rt_wire_register *r, int proven)
{
	struct coord_agent *a = coord_dir_find(c, r->agent_id);
	int fresh = a == NULL;
	if (r->agent_id == 0)
		return RT_WIRE_E_VALUE;
	if (!coord_auth_addr_ok(c, r->control_addr)) {
		c->sec.register_addr++;
		coord_log(c, LOG_WARN, "agent %u: registration refused: will not dial %s (%s)",
			  r->agent_id, r->control_addr,
			  c->tls ? "not tls+tcp://" : "not loopback; see --insecure");
		return RT_ACK_REFUSED;
	}
	if (a && !proven && strcmp(a->addr, r->control_addr) != 0 && live(c, a)) {
		c->sec.register_moves++;
		coord_log(c, LOG_WARN, "agent %u: registration at %s refused: the agent registered "
			  "at %s %.0f s ago (without TLS an address moves only after --agent-ttl "
			  "of silence)", r->agent_id, r->control_addr, a->addr,
			  (double)(coord_now_ns() - a->seen_mono_ns) / 1e9);
		return RT_ACK_REFUSED;
	}
	if (!a && !(a = add_entry(c, r->agent_id)))
		return RT_WIRE_E_NOMEM;
	if (strcmp(a->addr, r->control_addr) != 0) {
		close_socket(a);
		snprintf(a->addr, sizeof a->addr, "%s", r->control_addr);
		if (!fresh)
			coord_log(c, LOG_INFO, "agent %u moved to %s", a->id, a->addr);
	}
	if (fresh || a->pid != r->pid || a->start_ns != r->start_unix_ns)
		coord_log(c, LOG_INFO, "agent %u registered: host %s pid %u at %s", a->id, r->host,
			  r->pid, r->control_addr);
	snprintf(a->host, sizeof a->host, "%s", r->host);
	a->pid = r->pid;
	a->start_ns = r->start_unix_ns;
	a->last_seen_ns = coord_unix_ns();
	a->seen_mono_ns = coord_now_ns();
	c->dir.registrations++;
	open_socket(c, a);
	return persist(c, a) < 0 ? RT_STORE_E_IO : 0;
}

static int load_one(void *arg, const struct rt_store_agent *sa)
{
	struct rt_coord *c = arg;
	struct coord_agent *a = coord_dir_find(c, sa->agent_id);
	if (!a && !(a = add_entry(c, sa->agent_id)))
		return -1;
	a->pid = sa->pid;
	snprintf(a->host, sizeof a->host, "%s", sa->host);
	snprintf(a->addr, sizeof a->addr, "%s", sa->control_addr);
	a->start_ns = sa->start_ns;
	a->last_seen_ns = sa->last_seen_ns;
	a->seen_mono_ns = coord_now_ns();
	open_socket(c, a);
	return 0;
}

int coord_dir_load(struct rt_coord *c)
{
	int rc = rt_store_agents(c->store, load_one, c);
	if (c->dir.count)
		coord_log(c, LOG_INFO, "directory: %u agents from the store", c->dir.count);
	return rc;
}

void coord_dir_expire(struct rt_coord *c)
{
	uint64_t now = coord_now_ns(), ttl = (uint64_t)(c->cfg.agent_ttl * 1e9);
	uint32_t i = 0;
	if (ttl == 0)
		return;
	while (i < c->dir.count) {
		struct coord_agent *a = &c->dir.agents[i];
		if (now - a->seen_mono_ns <= ttl) {
			i++;
			continue;
		}
		coord_log(c, LOG_INFO, "agent %u (%s) silent for %.0f s: forgotten", a->id, a->addr,
			  (double)(now - a->seen_mono_ns) / 1e9);
		rt_store_delete_agent(c->store, a->id);
		close_socket(a);
		c->dir.expired++;
		c->dir.agents[i] = c->dir.agents[--c->dir.count];
	}
}

void coord_dir_free(struct rt_coord *c)
{
	uint32_t i;
	for (i = 0; i < c->dir.count; i++)
		close_socket_by(&c->dir.agents[i], &c->close_by);
	free(c->dir.agents);
	c->dir.agents = NULL;
	c->dir.count = c->dir.cap = 0;
}
