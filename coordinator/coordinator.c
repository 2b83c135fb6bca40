/*
 * coordinator/coordinator.c — sockets, the event loop and the control requests.
 *
 * Two REP sockets listen: the coordinator socket (REGISTER, TRIGGER and the
 * text requests "status" / "status json" / "ping") and the collector socket
 * (SLICE). Text requests also include "alarm add/list/clear" (selection.c).
 * Each has a fixed set of contexts; a context's aio callback only
 * moves a received message onto the ready list and signals the loop. The loop
 * thread takes the whole list at once, so all slices that arrived together go
 * into one store transaction (group commit) and are acknowledged after it.
 * Remote triggers to agents (traversal.c) come back through a list of their own,
 * or, while the loop waits or commits, are acted on by nng's thread at once
 * (loop_mu: coord_internal.h).
 *
 * A trigger is acknowledged once it is stored as pending: a coordinator killed
 * mid-traversal resumes it at start-up, and an agent that got no ack re-sends
 * it (dedup by agent id and trigger_seq).
 *
 * A scrape of /metrics (daemon/metrics.h) is answered by the loop too, between
 * turns, so it reads the figures as a status request does.
 *
 * Every request and slice is admitted first (auth.c: size, sender, role); a
 * refused one gets its error reply in the same turn and is counted. Both
 * listeners are TLS when certificates are configured (daemon/tls.h) and cap
 * their connections (daemon/guard.h).
 */
#include "nng_close.h"
#include "coord_internal.h"
#include "daemon/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/protocol/reqrep0/rep.h>

enum { IN_RECV = 0, IN_READY = 1, IN_SEND = 2, IN_STOPPED = 3 };

#define COORD_SLICE_CHUNK 16 /* slices stored between two poll points for replies */

uint64_t coord_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t coord_unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void coord_log(const struct rt_coord *c, int level, const char *fmt, ...)
{
	va_list ap;
	if (level > c->cfg.log_level)
		return;
	va_start(ap, fmt);
	rt_log_vline("retrace-coordinator", level, NULL, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------ nng callbacks ---- */

/*
 * A member's "load" probe is answered here, on nng's thread, not by the loop:
 * liveness must not wait for a commit (peers.c). 1 when it was.
 */
static int answer_probe_now(struct rt_coord *c, struct coord_in *in)
{
	nng_msg *reply;
	size_t len = nng_msg_len(in->msg);
	if (len < 4 || len > 5 || memcmp(nng_msg_body(in->msg), "load", 4) != 0 ||
	    (len == 5 && ((const char *)nng_msg_body(in->msg))[4] != 0))
		return 0;
	if (!(reply = coord_peers_answer(c, in->msg)))
		return 0;
	nng_msg_free(in->msg);
	in->msg = NULL;
	nng_aio_set_msg(in->aio, reply);
	in->state = IN_SEND;
	nng_ctx_send(in->ctx, in->aio);
	return 1;
}

static void in_cb(void *arg)
{
	struct coord_in *in = arg;
	struct rt_coord *c = in->c;
	int rv = nng_aio_result(in->aio);
	if (in->state == IN_SEND) {
		if (rv != 0)
			nng_msg_free(nng_aio_get_msg(in->aio));
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
			in->state = IN_STOPPED;
			return;
		}
		in->state = IN_RECV;
		nng_ctx_recv(in->ctx, in->aio);
		return;
	}
	if (rv != 0) {
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
			in->state = IN_STOPPED;
			return;
		}
		nng_ctx_recv(in->ctx, in->aio); /* a transient error: keep listening */
		return;
	}
	in->msg = nng_aio_get_msg(in->aio);
	if (!in->msg) { /* nng 1.5.2 can end a receive with 0 and no message (nng#1620) */
		nng_ctx_recv(in->ctx, in->aio);
		return;
	}
	if (!in->collector && answer_probe_now(c, in))
		return;
	pthread_mutex_lock(&c->mu);
	in->state = IN_READY;
	in->next_ready = c->ready_in;
	c->ready_in = in;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

/* Queue the reply on `in`; run_once sends it once the store committed. */
void coord_reply(struct rt_coord *c, struct coord_in *in, const void *data, size_t len)
{
	(void)c;
	if (in->msg) {
		nng_msg_free(in->msg);
		in->msg = NULL;
	}
	if (in->reply) {
		nng_msg_free(in->reply);
		in->reply = NULL;
	}
	if (nng_msg_alloc(&in->reply, len) != 0) {
		in->reply = NULL; /* no memory for a reply: the peer times out and retries */
		return;
	}
	memcpy(nng_msg_body(in->reply), data, len);
}

void coord_send_reply(struct coord_in *in)
{
	in->durable = 0;
	if (!in->reply) {
		in->state = IN_RECV;
		nng_ctx_recv(in->ctx, in->aio);
		return;
	}
	nng_aio_set_msg(in->aio, in->reply);
	in->reply = NULL;
	in->state = IN_SEND;
	nng_ctx_send(in->ctx, in->aio);
}

void coord_reply_ack(struct rt_coord *c, struct coord_in *in, int32_t status,
		     const uint64_t *seqs, uint32_t n)
{
	struct rt_wire_ack ack = { .status = status, .seq_count = n, .seqs = seqs };
	c->out.len = 0;
	if (rt_wire_encode_ack(&c->out, &ack) != 0) {
		ack.seq_count = 0;
		c->out.len = 0;
		rt_wire_encode_ack(&c->out, &ack);
	}
	coord_reply(c, in, c->out.data, c->out.len);
}

/* --------------------------------------------------- control requests ---- */

static int is_text(const uint8_t *b, size_t len, const char *word)
{
	size_t n = strlen(word);
	return len >= n && memcmp(b, word, n) == 0 && (len == n || b[n] == 0 || b[n] == ' ');
}

/*
 * "store": where this coordinator's store is, for `retrace traces|show|export|
 * estimate` run without --store (tools/retrace, cli_store_locator): "ok
 * LOCATOR", a SQLite file as an absolute path (the CLI's working directory is
 * not ours), a ClickHouse locator as given.
 */
static size_t store_reply(const struct rt_coord *c, char *out, size_t cap)
{
	const char *p = rt_store_path(c->store);
	char abs[PATH_MAX];
	if (!p)
		return (size_t)snprintf(out, cap, "error: no store");
	if (!strcmp(rt_store_backend_name(c->store), "sqlite") && p[0] != '/' && realpath(p, abs))
		p = abs;
	return (size_t)snprintf(out, cap, "ok %s", p);
}

static void handle_text(struct rt_coord *c, struct coord_in *in, const uint8_t *b, size_t len)
{
	size_t cap = 1u << 20, n;
	char *out = malloc(cap);
	c->st.text_requests++;
	if (!out) {
		coord_reply(c, in, "error: out of memory", 21);
		return;
	}
	if (is_text(b, len, "status"))
		n = rt_coord_status(c, len >= 11 && memcmp(b + 7, "json", 4) == 0, out, cap) + 1;
	else if (is_text(b, len, "alarm"))
		n = coord_alarm_request(c, (const char *)b, len, out, cap) + 1;
	else if (is_text(b, len, "recollect"))
		n = coord_recollect_request(c, (const char *)b, len, out, cap) + 1;
	else if (is_text(b, len, "policy"))
		n = coord_adaptive_request(c, (const char *)b, len, out, cap) + 1;
	else if (is_text(b, len, "load")) /* a peer's probe (peers.c) */
		n = coord_peers_load_reply(c, out, cap) + 1;
	else if (is_text(b, len, "store"))
		n = store_reply(c, out, cap) + 1;
	else if (is_text(b, len, "ping"))
		n = (size_t)snprintf(out, cap, "pong coordinator") + 1;
	else
		n = (size_t)snprintf(out, cap, "error: unknown request (try status, status json, ping, store, alarm list, recollect TRACE_ID, policy, load)") + 1;
	coord_reply(c, in, out, n);
	free(out);
}

static void handle_trigger_msg(struct rt_coord *c, struct coord_in *in, const struct rt_wire_msg *m,
			       const void *raw, size_t len)
{
	const struct rt_wire_trigger *t = &m->trigger;
	uint64_t now = coord_unix_ns();
	uint64_t seq = t->trigger_seq;
	int rc;
	if (!coord_auth_agent(c, &in->peer, t->agent_id, "trigger")) {
		c->sec.triggers_refused++;
		coord_reply_ack(c, in, RT_ACK_REFUSED, NULL, 0);
		return;
	}
	rc = rt_store_put_trigger(c->store, t->agent_id, t->trigger_seq, now, raw, len);
	if (rc < 0) {
		c->st.store_errors++;
		coord_log(c, LOG_ERROR, "store: %s", rt_store_errmsg(c->store));
		coord_reply_ack(c, in, rc, NULL, 0);
		return;
	}
	if (rc == RT_STORE_DUPLICATE) {
		c->st.trigger_duplicates++;
	} else {
		c->st.triggers++;
		coord_handle_trigger(c, t, now);
	}
	coord_reply_ack(c, in, 0, &seq, 1);
}

/* Requests on the coordinator socket, inside the loop's transaction. */
static void handle_coord_request(struct rt_coord *c, struct coord_in *in)
{
	const uint8_t *b = nng_msg_body(in->msg);
	size_t len = nng_msg_len(in->msg);
	struct rt_wire_msg m;
	int rc;
	if (len == 0 || (b[0] & 0xf0) != 0x90) {
		handle_text(c, in, b, len);
		return;
	}
	rc = rt_wire_decode(b, len, &m);
	in->durable = rc == 0;
	if (rc == 0 && m.type == RT_WIRE_REGISTER) {
		/* With TLS the certificate must name the agent id (auth.c). */
		int proven = c->tls && coord_auth_agent(c, &in->peer, m.reg.agent_id, "registration");
		c->st.registrations++;
		if (c->tls && !proven) {
			c->sec.register_identity++;
			rc = RT_ACK_REFUSED;
		} else {
			rc = coord_dir_register(c, &m.reg, proven);
			if (rc == 0)
				coord_adaptive_registered(c, m.reg.agent_id);
		}
		{ /* a sharded member tells the agent the group's live set (peers.c) */
			uint64_t view[RT_RING_MAX];
			uint32_t nv = rc == 0 ? coord_peers_view(c, view, RT_RING_MAX) : 0;
			coord_reply_ack(c, in, rc, nv ? view : NULL, nv);
		}
	} else if (rc == 0 && m.type == RT_WIRE_TRIGGER) {
		handle_trigger_msg(c, in, &m, b, len);
	} else {
		c->st.bad_messages++;
		coord_log(c, LOG_WARN, "malformed or unexpected message on the coordinator socket: %s",
			  rc ? rt_wire_strerror(rc) : rt_wire_type_name(m.type));
		coord_reply_ack(c, in, rc ? rc : RT_WIRE_E_UNKNOWN_TYPE, NULL, 0);
	}
	rt_wire_msg_free(&m);
}

/* ----------------------------------------------------------- the loop ---- */

/* Wait (up to wait_ns) for a request, slice or agent's reply; take the requests
 * and slices (the replies are taken at the turn's poll points: traversal.c). */
static void take_ready(struct rt_coord *c, struct coord_in **in, uint64_t wait_ns)
{
	coord_loop_let_go(c);
	pthread_mutex_lock(&c->mu);
	if (!c->ready_in && !c->ready_req && wait_ns) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += (long)wait_ns;
		while (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&c->cv, &c->mu, &ts);
	}
	*in = c->ready_in;
	c->ready_in = NULL;
	pthread_mutex_unlock(&c->mu);
	coord_loop_take_back(c);
}

void coord_loop_let_go(struct rt_coord *c)
{
	if (!c->loop_owned)
		return;
	c->loop_idle = 1;
	/* pairs with the acquire in req_cb (traversal.c): a reply's callback that
	 * sees the hint waits for loop_mu rather than a turn of the loop */
	atomic_store_explicit(&c->loop_idle_hint, 1, memory_order_release);
	pthread_mutex_unlock(&c->loop_mu);
}

void coord_loop_take_back(struct rt_coord *c)
{
	if (!c->loop_owned)
		return;
	/* pairs with the acquire in req_cb (a hint only: loop_idle decides) */
	atomic_store_explicit(&c->loop_idle_hint, 0, memory_order_release);
	pthread_mutex_lock(&c->loop_mu);
	c->loop_idle = 0;
}

static int is_text_msg(const struct coord_in *in)
{
	size_t len = nng_msg_len(in->msg);
	return len == 0 || (((const uint8_t *)nng_msg_body(in->msg))[0] & 0xf0) != 0x90;
}

/*
 * One turn: everything that arrived is handled inside one store transaction,
 * the traversal's timers run in it too (closing traces writes their rows), and
 * only after the commit do the replies go out. If the commit fails, every
 * reply that promised durability becomes an error ACK, so agents send again.
 */
static const char *const phase_names[COORD_PHASES] = { "slices", "requests", "traversal",
							  "selection", "commit", "replies" };

/* Close phase p of a turn at now: its time since *mark goes to the figures. */
static void phase_done(struct rt_coord *c, enum coord_phase p, uint64_t *mark, uint64_t *turn)
{
	uint64_t now = coord_now_ns();
	turn[p] = now - *mark;
	c->loop.phase_ns[p] += turn[p];
	*mark = now;
}

/* A turn's total, and a WARN (at most every 10 s) naming where a slow one went. */
static void turn_done(struct rt_coord *c, uint64_t start, const uint64_t *turn, uint32_t ns,
		      uint32_t nc)
{
	uint64_t now = coord_now_ns(), total = now - start;
	c->loop.turns++;
	if (total > c->loop.max_turn_ns)
		c->loop.max_turn_ns = total;
	if (total < COORD_SLOW_TURN_NS)
		return;
	c->loop.slow_turns++;
	if (now - c->loop.last_slow_log_ns < 10000000000ull)
		return;
	c->loop.last_slow_log_ns = now;
	coord_log(c, LOG_WARN, "slow turn: %.0f ms for %u slices and %u requests (slices %.0f, "
		  "requests %.0f, traversal %.0f, selection %.0f, commit %.0f, replies %.0f ms); "
		  "%llu slow turns so far", total / 1e6, ns, nc, turn[0] / 1e6, turn[1] / 1e6,
		  turn[2] / 1e6, turn[3] / 1e6, turn[4] / 1e6, turn[5] / 1e6,
		  (unsigned long long)c->loop.slow_turns);
}

const char *coord_phase_name(enum coord_phase p)
{
	return p < COORD_PHASES ? phase_names[p] : "?";
}

/*
 * One turn: everything that arrived is handled inside the open store
 * transaction (batch.c opens it, and it may span turns: group commit), the
 * traversal's timers run in it too (closing traces writes their rows), and the
 * replies that promise something stored wait for its commit. If the commit
 * fails, every such reply becomes an error ACK, so agents send again. Each
 * phase's time is counted (the "loop" figures; slow turns are logged).
 */
static void run_once(struct rt_coord *c, uint64_t wait_ns)
{
	struct coord_in *in, *slices[COORD_IN_COLLECT], *reqs[COORD_IN_COORD];
	struct coord_in *admitted[COORD_IN_COLLECT];
	uint32_t ns = 0, nc = 0, i;
	uint64_t start, mark, turn[COORD_PHASES] = { 0 };
	int rc;

	take_ready(c, &in, coord_batch_wait(c, wait_ns));
	start = mark = c->loop.input_ns = coord_now_ns();
	for (; in; in = in->next_ready) {
		if (in->collector && ns < COORD_IN_COLLECT)
			slices[ns++] = in;
		else if (nc < COORD_IN_COORD)
			reqs[nc++] = in;
	}
	/* Agents' replies to REMOTE_TRIGGER first, and again between the phases (and
	 * inside the traversal's: traversal.c): each names the next hops of a
	 * traversal, whose requests go out at once, so a hop does not wait for a
	 * turn busy with a storm's slices. A reply touches only the traversal's
	 * memory, never the store, so it needs no transaction. */
	coord_traversal_serve(c);
	rc = coord_batch_begin(c);
	if (rc == 0) {
		/* Refused slices and requests get their replies here (auth.c). */
		uint32_t na = coord_admit_slices(c, slices, ns, admitted);
		/* A storm's slices in chunks, agents' replies between them: a burst's
		 * traversals must not wait for hundreds of slices to be stored. */
		for (i = 0; i < na; i += COORD_SLICE_CHUNK) {
			coord_process_slices(c, admitted + i,
					     na - i < COORD_SLICE_CHUNK ? na - i : COORD_SLICE_CHUNK);
			coord_traversal_serve(c);
		}
		phase_done(c, COORD_PHASE_SLICES, &mark, turn);
		coord_traversal_serve(c);
		for (i = 0; i < nc; i++) {
			if (!coord_admit_request(c, reqs[i]))
				continue;
			if (is_text_msg(reqs[i]))
				handle_text(c, reqs[i], nng_msg_body(reqs[i]->msg),
					    nng_msg_len(reqs[i]->msg));
			else
				handle_coord_request(c, reqs[i]);
		}
		phase_done(c, COORD_PHASE_REQUESTS, &mark, turn);
		coord_traversal_serve(c);
		coord_traversal_tick(c, coord_now_ns());
		phase_done(c, COORD_PHASE_TRAVERSAL, &mark, turn);
		coord_selection_tick(c, coord_now_ns());
		coord_adaptive_tick(c, coord_now_ns());
		coord_history_tick(c, coord_now_ns());
		phase_done(c, COORD_PHASE_SELECTION, &mark, turn);
		coord_traversal_serve(c);
	} else {
		for (i = 0; i < nc; i++)
			reqs[i]->durable = 1; /* nothing was handled: each gets the error ACK */
	}
	for (i = 0; i < ns; i++)
		coord_batch_hold(c, slices[i]);
	for (i = 0; i < nc; i++)
		coord_batch_hold(c, reqs[i]);
	coord_traversal_flush(c); /* a turn whose transaction failed asked too */
	if (rc != 0 || coord_batch_due(c, coord_now_ns(), ns + nc == 0)) {
		rc = coord_batch_finish(c, rc);
		phase_done(c, COORD_PHASE_COMMIT, &mark, turn);
	} else {
		c->batch.turns_batched++;
	}
	phase_done(c, COORD_PHASE_REPLIES, &mark, turn);
	turn_done(c, start, turn, ns, nc);
}

void rt_coord_run(struct rt_coord *c, volatile int *stop)
{
	pthread_mutex_lock(&c->loop_mu);
	c->loop_owned = 1;
	while (!*stop) {
		run_once(c, 5000000ull);
		coord_peers_publish_load(c);
		/* A scrape of /metrics waits for this thread, which owns the figures. */
		if (rt_metrics_wanted(c->metrics))
			rt_metrics_serve(c->metrics, coord_metrics_render, c);
		/* So does /api/status; the rest of the API reads the store itself. */
		if (rt_metrics_wanted(rt_http_api_status(c->http)))
			rt_metrics_serve(rt_http_api_status(c->http), coord_status_json_render, c);
	}
	if (c->batch.open) /* what the last turns stored is acknowledged before we stop */
		coord_batch_finish(c, 0);
	c->loop_owned = 0;
	pthread_mutex_unlock(&c->loop_mu);
}

/* ------------------------------------------------------ open / close ---- */

static int open_rep(struct rt_coord *c, nng_socket *s, const char *url, const char *flag,
		    char *bound, int collector, struct coord_in *ins, int n, char *err,
		    size_t errlen)
{
	nng_listener l;
	int rv, i;
	if ((rv = nng_rep0_open(s)) != 0) {
		snprintf(err, errlen, "cannot open a socket: %s", nng_strerror(rv));
		return -1;
	}
	/* Slices up to the wire's limit on the collector only; the coordinator
	 * socket's requests are small (auth.c refuses the larger ones). */
	nng_socket_set_size(*s, NNG_OPT_RECVMAXSZ,
			    collector ? RT_WIRE_MAX_MESSAGE + 1024 : COORD_REQUEST_HARD);
	*(collector ? &c->cap_collect : &c->cap_listen) =
		rt_pipe_cap_attach(*s, coord_auth_max_connections(c));
	if (rt_tls_listen(*s, c->tls, url, &l, err, errlen) != 0) {
		size_t used = strlen(err);
		snprintf(err + used, errlen - used, "; give another address with %s", flag);
		return -1;
	}
	snprintf(bound, RT_COORD_URL_MAX, "%s", url);
	{
		nng_sockaddr sa;
		if (nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa) == 0 && sa.s_family == NNG_AF_INET) {
			const uint8_t *ip = (const uint8_t *)&sa.s_in.sa_addr;
			snprintf(bound, RT_COORD_URL_MAX, "%stcp://%u.%u.%u.%u:%u",
				 rt_url_is_tls(url) ? "tls+" : "", ip[0], ip[1], ip[2], ip[3],
				 (unsigned)((sa.s_in.sa_port >> 8) | ((sa.s_in.sa_port & 0xff) << 8)));
		}
	}
	for (i = 0; i < n; i++) {
		struct coord_in *in = &ins[i];
		in->c = c;
		in->collector = collector;
		if (nng_ctx_open(&in->ctx, *s) != 0 || nng_aio_alloc(&in->aio, in_cb, in) != 0) {
			snprintf(err, errlen, "cannot open socket contexts");
			return -1;
		}
		in->state = IN_RECV;
		nng_ctx_recv(in->ctx, in->aio);
	}
	return 0;
}

/* The bound addresses, written to PATH.tmp and renamed: whoever waits for the
 * file never reads it half written. */
static void write_ready_file(struct rt_coord *c)
{
	char tmp[sizeof c->cfg.ready_file + 8];
	int fd, ok;
	if (!c->cfg.ready_file[0])
		return;
	snprintf(tmp, sizeof tmp, "%s.tmp", c->cfg.ready_file);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		coord_log(c, LOG_WARN, "cannot write the ready file %s: %s", tmp, strerror(errno));
		return;
	}
	ok = dprintf(fd, "%s\n%s\n", c->listen_addr, c->collector_addr) > 0;
	if (c->http) /* a third line: the web UI's URL (port 0 resolved) */
		ok &= dprintf(fd, "%s\n", rt_http_api_url(c->http)) > 0;
	ok &= close(fd) == 0;
	if (!ok || rename(tmp, c->cfg.ready_file) != 0) {
		coord_log(c, LOG_WARN, "cannot write the ready file %s: %s", c->cfg.ready_file,
			  strerror(errno));
		unlink(tmp);
	}
}

static int resume_one(void *arg, uint32_t agent_id, uint64_t seq, uint64_t received_ns,
		      const void *msg, size_t len)
{
	struct rt_coord *c = arg;
	struct rt_wire_msg m;
	if (rt_wire_decode(msg, len, &m) != 0 || m.type != RT_WIRE_TRIGGER) {
		coord_log(c, LOG_WARN, "stored trigger %u/%llu does not decode; marked done", agent_id,
			  (unsigned long long)seq);
		rt_store_done_trigger(c->store, agent_id, seq);
		rt_wire_msg_free(&m);
		return 0;
	}
	coord_handle_trigger(c, &m.trigger, received_ns);
	rt_wire_msg_free(&m);
	return 0;
}

/* Triggers stored but not done: a previous coordinator died before closing them. */
static void resume_pending(struct rt_coord *c)
{
	uint32_t before = c->groups_open;
	rt_store_begin(c->store);
	rt_store_pending_triggers(c->store, resume_one, c);
	rt_store_commit(c->store);
	coord_resume_received(c);
	if (c->groups_open > before)
		coord_log(c, LOG_INFO, "resumed %u trace groups from pending triggers",
			  c->groups_open - before);
}

struct rt_coord *rt_coord_open(const struct rt_coord_config *cfg, char *err, size_t errlen)
{
	struct rt_coord *c = calloc(1, sizeof *c);
	struct rt_store_options so = { 0 };
	int rc;
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->cfg = *cfg;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->loop_mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	c->start_ns = coord_now_ns();
	c->start_unix_ns = coord_unix_ns();
	/* Certificates and the plain-transport policy first: a refused setting
	 * leaves no store file behind. It may rewrite c->cfg's URLs (tls+tcp://). */
	if (coord_auth_open(c, err, errlen) != 0) {
		rt_coord_close(c);
		return NULL;
	}
	cfg = &c->cfg;
	/* /metrics before the store too: a busy port leaves nothing behind. */
	if (cfg->metrics_listen[0] &&
	    !(c->metrics = rt_metrics_start(cfg->metrics_listen, "--metrics-listen", cfg->insecure,
					    err, errlen))) {
		rt_coord_close(c);
		return NULL;
	}
	/* The web UI too: its API opens the store read-only on first use. */
	if (cfg->http_listen[0] &&
	    !(c->http = rt_http_api_start(cfg->http_listen, cfg->insecure, cfg->store, err, errlen))) {
		rt_coord_close(c);
		return NULL;
	}
	/* The endpoints before the store, so that a busy port leaves no store file
	 * behind. What arrives meanwhile waits in the ready list for the loop. */
	if (open_rep(c, &c->coord_sock, cfg->listen, "--listen", c->listen_addr, 0, c->in,
		     COORD_IN_COORD, err, errlen) != 0 ||
	    open_rep(c, &c->collect_sock, cfg->collector, "--collector", c->collector_addr, 1,
		     c->in + COORD_IN_COORD,
		     cfg->collector_contexts && cfg->collector_contexts < COORD_IN_COLLECT
			     ? (int)cfg->collector_contexts
			     : COORD_IN_COLLECT,
		     err, errlen) != 0) {
		rt_coord_close(c);
		return NULL;
	}
	rt_http_api_set_control(c->http, c->listen_addr, c->tls != NULL);
	so.path = cfg->store;
	so.group_readable = cfg->store_group >= 0;
	so.gid = cfg->store_group;
	so.sync_full = cfg->sync_full;
	so.max_age_ns = (uint64_t)(cfg->retain_age * 1e9);
	so.max_bytes = cfg->retain_bytes;
	so.background_checkpoint = 1; /* fsyncs off the loop: see store/sqlite.c */
	if ((rc = rt_store_open(&c->store, &so)) != 0) {
		snprintf(err, errlen, "store %s: %s", cfg->store,
			 rt_store_errmsg(c->store));
		rt_store_close(c->store);
		c->store = NULL;
		rt_coord_close(c);
		return NULL;
	}
	if (coord_traversal_init(c) != 0) {
		snprintf(err, errlen, "out of memory for %u trace groups", cfg->max_groups);
		rt_coord_close(c);
		return NULL;
	}
	if (coord_stream_open(c, err, errlen) != 0) {
		rt_coord_close(c);
		return NULL;
	}
	if (coord_selection_init(c) != 0) {
		snprintf(err, errlen, "out of memory for the trace selector");
		rt_coord_close(c);
		return NULL;
	}
	if (coord_weave_init(c, err, errlen) != 0) {
		rt_coord_close(c);
		return NULL;
	}
	if (coord_adaptive_init(c) != 0) {
		snprintf(err, errlen, "cannot set up the adaptive span learner (--adaptive-pin? out of memory?)");
		rt_coord_close(c);
		return NULL;
	}
	coord_batch_init(c);
	if (coord_peers_open(c, err, errlen) != 0) {
		rt_coord_close(c);
		return NULL;
	}
	if (coord_names_init(c) != 0) {
		snprintf(err, errlen, "out of memory for trigger names");
		rt_coord_close(c);
		return NULL;
	}
	if (c->http && coord_history_open(c) != 0) {
		snprintf(err, errlen, "out of memory for the UI's history");
		rt_coord_close(c);
		return NULL;
	}
	rt_http_api_set_history(c->http, c->history);
	coord_dir_load(c);
	resume_pending(c);
	write_ready_file(c);
	coord_log(c, LOG_INFO, "listening on %s (triggers) and %s (slices), store %s",
		  c->listen_addr, c->collector_addr, rt_store_path(c->store));
	if (c->metrics)
		coord_log(c, LOG_INFO, "metrics on %s", rt_metrics_url(c->metrics));
	if (c->http)
		coord_log(c, LOG_INFO, "web UI on %s", rt_http_api_url(c->http));
	return c;
}

void rt_coord_close(struct rt_coord *c)
{
	int i;
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->closing = 1;
	pthread_mutex_unlock(&c->mu);
	rt_nng_close_deadline(&c->close_by, COORD_EXIT_CLOSE_MS);
	rt_metrics_stop(c->metrics); /* first: its scrapes wait for the loop, which ended */
	c->metrics = NULL;
	rt_http_api_stop(c->http); /* likewise /api/status */
	c->http = NULL;
	coord_history_close(c); /* after the API that reads it */
	for (i = 0; i < COORD_IN_COORD + COORD_IN_COLLECT; i++)
		if (c->in[i].aio)
			nng_aio_stop(c->in[i].aio);
	/* A connection cap lives as long as its socket may call it back. */
	rt_pipe_cap_free(c->cap_listen, nng_socket_id(c->coord_sock) <= 0 ||
				      rt_nng_close_by(c->coord_sock, &c->close_by) == 0);
	rt_pipe_cap_free(c->cap_collect, nng_socket_id(c->collect_sock) <= 0 ||
				       rt_nng_close_by(c->collect_sock, &c->close_by) == 0);
	for (i = 0; i < COORD_IN_COORD + COORD_IN_COLLECT; i++) {
		if (c->in[i].aio)
			nng_aio_free(c->in[i].aio);
		if (c->in[i].msg)
			nng_msg_free(c->in[i].msg);
	}
	coord_peers_close(c);
	coord_traversal_free(c);
	coord_weave_free(c);
	coord_stream_close(c); /* before the store: it flushes from it */
	coord_selection_free(c);
	coord_adaptive_free(c); /* its sends use the agents' sockets */
	coord_names_free(c);
	coord_dir_free(c);
	coord_auth_close(c);
	rt_store_close(c->store);
	rt_wire_buf_free(&c->out);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->loop_mu);
	free(c);
}

const char *rt_coord_listen_addr(const struct rt_coord *c)
{
	return c->listen_addr;
}

const char *rt_coord_collector_addr(const struct rt_coord *c)
{
	return c->collector_addr;
}
