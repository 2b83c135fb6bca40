/*
 * coordinator/history.c — periodic samples for the web UI (see history.h).
 *
 * How it works: the loop thread calls coord_history_tick every turn; when a
 * sample is due it fills the coordinator's part (trigger shares, trace and
 * selection counters: loop-owned data, read where it lives) and the list of
 * agents to poll (id, control address) into `next`, under the history's mutex,
 * and wakes the poller. The poller thread asks each agent "status json" over a
 * REQ socket of its own (one second for the connection and the request, one for
 * the reply, TLS with the coordinator's identity when configured, the peer
 * checked as agent-N as the traversal does), reads the few figures it keeps out of the
 * reply, and appends the finished sample to the ring. A sample due while the
 * poller is still busy replaces the waiting one (counted as skipped), so a slow
 * agent stretches the period instead of queueing work.
 *
 * The socket to an agent is dialled once, without blocking, and kept from poll
 * to poll (nng redials it in the background); it is closed when the agent
 * leaves the polled set or moves to another address, and at exit. A socket per
 * poll would dial and close once a second per agent, and closing a socket whose
 * dial to a dead agent is still retrying is what wedges nng 1.5.2's reaper
 * (wire/nng_close.h): seen in the UI test, where one agent is killed, as a
 * coordinator that took more than 15 s to stop.
 *
 * The agent's reply is untrusted: the figures are looked up by name inside
 * their section's object with bounded string searches on a NUL-terminated copy
 * and parsed with strtod; anything missing reads as 0.
 */
#include "history.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "coord_internal.h"
#include "daemon/figures.h"
#include "daemon/tls.h"
#include "nng_close.h"

struct hist_trigger {
	uint32_t id;
	uint64_t opened, dropped;
};

struct hist_agent {
	uint32_t id;
	int ok; /* answered */
	uint64_t horizon_us, null_buffers, evicted, trigger_drops, breadcrumb_drops,
		complete_drops;
};

struct hist_sample {
	uint64_t unix_ns;
	uint64_t triggers, coherent, incoherent;
	uint64_t sel_windows, sel_kept, sel_dropped, sel_last_alarmed;
	uint32_t ntrig, nagents;
	struct hist_trigger trig[RT_HIST_TRIGGERS];
	struct hist_agent agent[RT_HIST_AGENTS];
};

struct hist_target {
	uint32_t id;
	char addr[256];
};

/* The poller's socket to one agent (poller thread only). */
struct hist_conn {
	uint32_t id;
	char addr[256];
	nng_socket s;
	int open;
};

struct coord_history {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	int stop;
	uint64_t interval_ns, next_ns;    /* loop thread only */
	const struct rt_tls *tls;
	/* handed from the loop to the poller (under mu) */
	struct hist_sample next;
	struct hist_target targets[RT_HIST_AGENTS];
	int next_ready;
	struct timespec close_by;         /* set with stop: the exit's close deadline */
	/* the ring (under mu) */
	struct hist_sample *ring;
	uint32_t head, n;                 /* oldest at (head - n) mod cap */
	uint64_t taken, skipped, polls, poll_failures, sockets_opened;
	struct hist_conn conn[RT_HIST_AGENTS]; /* poller thread only */
};

/* ------------------------------------------------------- agent polling ---- */

/* The number `"key":` holds inside the object of `"section":` in json. */
static double fig(const char *json, const char *section, const char *key)
{
	char pat[96];
	const char *s, *end, *k;
	snprintf(pat, sizeof pat, "\"%s\":{", section);
	if (!(s = strstr(json, pat)))
		return 0;
	s += strlen(pat);
	if (!(end = strchr(s, '}')))
		return 0;
	snprintf(pat, sizeof pat, "\"%s\":", key);
	for (k = strstr(s, pat); k && k < end; k = strstr(k + 1, pat)) {
		if (k[-1] == '{' || k[-1] == ',') { /* a key, not inside a string value */
			double v = strtod(k + strlen(pat), NULL);
			return isfinite(v) && v > 0 && v < 1.8e19 ? v : 0;
		}
	}
	return 0;
}

static void conn_close(struct hist_conn *k, const struct timespec *by)
{
	struct timespec now_by;
	if (!k->open)
		return;
	if (!by) {
		rt_nng_close_deadline(&now_by, RT_NNG_CLOSE_WAIT_MS);
		by = &now_by;
	}
	rt_nng_close_by(k->s, by);
	k->open = 0;
}

/* Close the sockets of agents no longer polled, so that every target finds its
 * socket or a free slot (there are at most RT_HIST_AGENTS targets). */
static void conns_keep_only(struct coord_history *h, const struct hist_target *t, uint32_t n)
{
	for (uint32_t k = 0; k < RT_HIST_AGENTS; k++) {
		uint32_t i = 0;
		while (i < n && t[i].id != h->conn[k].id)
			i++;
		if (i == n)
			conn_close(&h->conn[k], NULL);
	}
}

/* t's socket, dialled (without blocking) if it is not open at t's address;
 * NULL when it cannot be. */
static struct hist_conn *conn_for(struct coord_history *h, const struct hist_target *t)
{
	struct hist_conn *k = NULL, *free_slot = NULL;
	char peer[32], err[256];
	for (uint32_t i = 0; i < RT_HIST_AGENTS && !k; i++) {
		if (h->conn[i].open && h->conn[i].id == t->id)
			k = &h->conn[i];
		else if (!h->conn[i].open && !free_slot)
			free_slot = &h->conn[i];
	}
	if (k && strcmp(k->addr, t->addr) == 0)
		return k;
	if (k) /* the agent moved */
		conn_close(k, NULL);
	else if (!(k = free_slot))
		return NULL;
	k->id = t->id;
	snprintf(k->addr, sizeof k->addr, "%s", t->addr);
	if (nng_req0_open(&k->s) != 0)
		return NULL;
	nng_socket_set_ms(k->s, NNG_OPT_RECVTIMEO, 1000);
	nng_socket_set_ms(k->s, NNG_OPT_SENDTIMEO, 1000);
	nng_socket_set_ms(k->s, NNG_OPT_RECONNMINT, 100);
	nng_socket_set_ms(k->s, NNG_OPT_RECONNMAXT, 1000);
	snprintf(peer, sizeof peer, "agent-%u", t->id);
	/* Not blocking: an address that black-holes the connect costs the send's
	 * one second, not the kernel's connect timeout. */
	k->open = 1;
	h->sockets_opened++;
	if (rt_tls_dial(k->s, h->tls, t->addr, peer, NNG_FLAG_NONBLOCK, err, sizeof err) != 0) {
		conn_close(k, NULL); /* no dialer was made: nothing is retrying */
		return NULL;
	}
	return k;
}

static void poll_agent(struct coord_history *h, const struct hist_target *t, struct hist_agent *a)
{
	char *reply = NULL, *text;
	size_t len = 0;
	struct hist_conn *k;
	memset(a, 0, sizeof *a);
	a->id = t->id;
	h->polls++;
	/* A timed-out request is abandoned by the next send; its late reply is
	 * dropped by the REQ socket (a reply names its request). */
	if (!(k = conn_for(h, t)) ||
	    nng_send(k->s, "status json", sizeof "status json", 0) != 0 ||
	    nng_recv(k->s, &reply, &len, NNG_FLAG_ALLOC) != 0) {
		h->poll_failures++;
		return;
	}
	if ((text = malloc(len + 1))) {
		memcpy(text, reply, len);
		text[len] = 0;
		a->ok = text[0] == '{';
		a->horizon_us = (uint64_t)fig(text, "traces", "event_horizon_us");
		a->evicted = (uint64_t)fig(text, "traces", "evicted");
		a->null_buffers = (uint64_t)fig(text, "buffers", "null_buffers");
		a->trigger_drops = (uint64_t)fig(text, "queues", "trigger_drops");
		a->breadcrumb_drops = (uint64_t)fig(text, "queues", "breadcrumb_drops");
		a->complete_drops = (uint64_t)fig(text, "queues", "complete_drops");
		free(text);
	}
	if (!a->ok)
		h->poll_failures++;
	nng_free(reply, len);
}

static void *poller(void *arg)
{
	struct coord_history *h = arg;
	struct hist_sample *s = malloc(sizeof *s);
	struct hist_target *t = malloc(sizeof h->targets);
	pthread_mutex_lock(&h->mu);
	while (!h->stop) {
		if (!h->next_ready || !s || !t) {
			pthread_cond_wait(&h->cv, &h->mu);
			continue;
		}
		*s = h->next;
		memcpy(t, h->targets, sizeof h->targets);
		h->next_ready = 0;
		pthread_mutex_unlock(&h->mu);
		conns_keep_only(h, t, s->nagents);
		for (uint32_t i = 0; i < s->nagents; i++)
			poll_agent(h, &t[i], &s->agent[i]);
		pthread_mutex_lock(&h->mu);
		h->ring[h->head] = *s;
		h->head = (h->head + 1) % RT_HIST_SAMPLES;
		if (h->n < RT_HIST_SAMPLES)
			h->n++;
		h->taken++;
	}
	pthread_mutex_unlock(&h->mu);
	for (uint32_t k = 0; k < RT_HIST_AGENTS; k++)
		conn_close(&h->conn[k], &h->close_by); /* set with stop, read after it */
	free(s);
	free(t);
	return NULL;
}

/* ----------------------------------------------------- the loop's side ---- */

int coord_history_open(struct rt_coord *c)
{
	struct coord_history *h;
	if (c->cfg.history_interval <= 0)
		return 0;
	if (!(h = calloc(1, sizeof *h)) || !(h->ring = calloc(RT_HIST_SAMPLES, sizeof *h->ring))) {
		free(h);
		return -1;
	}
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	h->interval_ns = (uint64_t)(c->cfg.history_interval * 1e9);
	h->tls = c->tls;
	if (pthread_create(&h->thread, NULL, poller, h) != 0) {
		pthread_cond_destroy(&h->cv);
		pthread_mutex_destroy(&h->mu);
		free(h->ring);
		free(h);
		return -1;
	}
	c->history = h;
	return 0;
}

void coord_history_close(struct rt_coord *c)
{
	struct coord_history *h = c->history;
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->stop = 1;
	h->close_by = c->close_by;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
	pthread_join(h->thread, NULL);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h->ring);
	free(h);
	c->history = NULL;
}

static int cmp_target(const void *a, const void *b)
{
	uint32_t x = ((const struct hist_target *)a)->id, y = ((const struct hist_target *)b)->id;
	return x < y ? -1 : x > y;
}

void coord_history_tick(struct rt_coord *c, uint64_t now)
{
	struct coord_history *h = c->history;
	struct hist_sample *s;
	uint32_t i, n;
	if (!h || now < h->next_ns)
		return;
	h->next_ns = now + h->interval_ns;
	pthread_mutex_lock(&h->mu);
	if (h->next_ready)
		h->skipped++; /* the poller is still on the last one: replaced */
	s = &h->next;
	memset(s, 0, offsetof(struct hist_sample, trig));
	s->unix_ns = coord_unix_ns();
	s->triggers = c->st.triggers;
	s->coherent = c->st.traces_coherent;
	s->incoherent = c->st.traces_incoherent;
	coord_selection_counts(c, &s->sel_windows, &s->sel_kept, &s->sel_dropped,
			       &s->sel_last_alarmed);
	for (i = 0; i < c->nshares && s->ntrig < RT_HIST_TRIGGERS; i++) {
		if (!c->shares[i].trigger_id)
			continue;
		s->trig[s->ntrig].id = c->shares[i].trigger_id;
		s->trig[s->ntrig].opened = c->shares[i].opened;
		s->trig[s->ntrig++].dropped = c->shares[i].dropped;
	}
	/* the agents with the lowest ids, so the same ones from sample to sample */
	for (i = n = 0; i < c->dir.count; i++) {
		struct hist_target t = { .id = c->dir.agents[i].id };
		snprintf(t.addr, sizeof t.addr, "%s", c->dir.agents[i].addr);
		if (!t.addr[0])
			continue;
		if (n < RT_HIST_AGENTS) {
			h->targets[n++] = t;
		} else {
			qsort(h->targets, n, sizeof *h->targets, cmp_target);
			if (t.id < h->targets[n - 1].id)
				h->targets[n - 1] = t;
		}
	}
	qsort(h->targets, n, sizeof *h->targets, cmp_target);
	s->nagents = n;
	h->next_ready = 1;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

void coord_history_figures(struct rt_figures *w, struct rt_coord *c)
{
	struct coord_history *h = c->history;
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	rt_fig_section(w, "history");
	rt_fig_f(w, "interval_s", (double)h->interval_ns / 1e9);
	rt_fig_gauge(w, "samples", h->n);
	rt_fig_u64(w, "taken", h->taken);
	rt_fig_u64(w, "skipped", h->skipped);
	rt_fig_u64(w, "agent_polls", h->polls);
	rt_fig_u64(w, "agent_poll_failures", h->poll_failures);
	rt_fig_u64(w, "agent_sockets_opened", h->sockets_opened);
	pthread_mutex_unlock(&h->mu);
}

/* ----------------------------------------------------------- reading ---- */

struct buf {
	char *p;
	size_t len, cap;
	int oom;
};

static void putf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;
	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap * 2 + (size_t)(n > 0 ? n : 0) + 256;
		char *p = realloc(b->p, cap);
		if (!p || n < 0) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

static void put_sample(struct buf *b, const struct hist_sample *s)
{
	uint32_t i;
	putf(b, "{\"t_ms\":%" PRIu64 ",\"triggers_received\":%" PRIu64 ",\"coherent\":%" PRIu64
		",\"incoherent\":%" PRIu64 ",\"selection\":{\"windows\":%" PRIu64 ",\"kept\":%" PRIu64
		",\"dropped\":%" PRIu64 ",\"last_window_alarmed\":%" PRIu64 "},\"triggers\":[",
	     s->unix_ns / 1000000, s->triggers, s->coherent, s->incoherent, s->sel_windows,
	     s->sel_kept, s->sel_dropped, s->sel_last_alarmed);
	for (i = 0; i < s->ntrig; i++)
		putf(b, "%s{\"id\":%u,\"opened\":%" PRIu64 ",\"dropped\":%" PRIu64 "}", i ? "," : "",
		     s->trig[i].id, s->trig[i].opened, s->trig[i].dropped);
	putf(b, "],\"agents\":[");
	for (i = 0; i < s->nagents; i++) {
		const struct hist_agent *a = &s->agent[i];
		putf(b, "%s{\"id\":%u,\"ok\":%s,\"horizon_us\":%" PRIu64 ",\"null_buffers\":%" PRIu64
			",\"evicted\":%" PRIu64 ",\"trigger_drops\":%" PRIu64
			",\"breadcrumb_drops\":%" PRIu64 ",\"complete_drops\":%" PRIu64 "}",
		     i ? "," : "", a->id, a->ok ? "true" : "false", a->horizon_us, a->null_buffers,
		     a->evicted, a->trigger_drops, a->breadcrumb_drops, a->complete_drops);
	}
	putf(b, "]}");
}

char *coord_history_json(struct coord_history *h, uint64_t since_unix_ms, size_t *len)
{
	struct buf b = { 0 };
	uint32_t i, k = 0;
	if (!(b.p = malloc(b.cap = 4096)))
		return NULL;
	pthread_mutex_lock(&h->mu);
	putf(&b, "{\"interval_s\":%.3f,\"capacity\":%u,\"samples\":[", (double)h->interval_ns / 1e9,
	     RT_HIST_SAMPLES);
	for (i = 0; i < h->n; i++) {
		const struct hist_sample *s =
			&h->ring[(h->head + RT_HIST_SAMPLES - h->n + i) % RT_HIST_SAMPLES];
		if (s->unix_ns / 1000000 <= since_unix_ms && since_unix_ms)
			continue;
		putf(&b, "%s", k++ ? ",\n" : "");
		put_sample(&b, s);
	}
	pthread_mutex_unlock(&h->mu);
	putf(&b, "]}");
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	*len = b.len;
	return b.p;
}
