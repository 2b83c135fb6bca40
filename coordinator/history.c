/*
 * coordinator/history.c — periodic samples for the web UI (see history.h).
 *
 * How it works: the loop thread calls coord_history_tick every turn; when a
 * sample is due it fills the coordinator's part (trigger shares, trace and
 * selection counters: loop-owned data, read where it lives) and the list of
 * agents to poll (id, control address) into `next`, under the history's mutex,
 * and wakes the poller. The poller thread asks each agent "status json" over a
 * REQ socket of its own (dialled per poll without blocking, one second for the
 * connection and the request, one for the reply, TLS
 * with the coordinator's identity when configured, the peer checked as
 * agent-N as the traversal does), reads the few figures it keeps out of the
 * reply, and appends the finished sample to the ring. A sample due while the
 * poller is still busy replaces the waiting one (counted as skipped), so a slow
 * agent stretches the period instead of queueing work.
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
	/* the ring (under mu) */
	struct hist_sample *ring;
	uint32_t head, n;                 /* oldest at (head - n) mod cap */
	uint64_t taken, skipped, polls, poll_failures;
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

static void poll_agent(struct coord_history *h, const struct hist_target *t, struct hist_agent *a)
{
	char peer[32], err[256], *reply = NULL, *text;
	size_t len = 0;
	nng_socket s;
	memset(a, 0, sizeof *a);
	a->id = t->id;
	h->polls++;
	if (nng_req0_open(&s) != 0) {
		h->poll_failures++;
		return;
	}
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 1000);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 1000);
	snprintf(peer, sizeof peer, "agent-%u", t->id);
	/* Not blocking: an address that black-holes the connect costs the send's
	 * one second, not the kernel's connect timeout. */
	if (rt_tls_dial(s, h->tls, t->addr, peer, NNG_FLAG_NONBLOCK, err, sizeof err) != 0 ||
	    nng_send(s, "status json", sizeof "status json", 0) != 0 ||
	    nng_recv(s, &reply, &len, NNG_FLAG_ALLOC) != 0) {
		rt_nng_close_bounded(s, RT_NNG_CLOSE_WAIT_MS);
		h->poll_failures++;
		return;
	}
	rt_nng_close_bounded(s, RT_NNG_CLOSE_WAIT_MS);
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
