/*
 * tests/agent/report/collector.c — the test collector's thread.
 *
 * The thread blocks in nng_recvmsg with a 100 ms timeout (so it notices stop),
 * decodes and records the request under the mutex, sleeps if the collector is
 * to be slow (outside the mutex), and replies with an ACK. REP answers one
 * request at a time, so several agents (or several in-flight slices of one)
 * are served in turn, which is what makes a delay or byte rate a real limit.
 */
#include "collector.h"
#include "nng_close.h"
#include "common/ports.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/protocol/reqrep0/rep.h>

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
	while (nanosleep(&ts, &ts) != 0)
		;
}

static void *grow(void *p, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return p;
	*cap = *cap ? *cap * 2 : 64;
	p = realloc(p, *cap * elem);
	if (!p)
		abort();
	return p;
}

void tc_init(struct tc_collector *c)
{
	memset(c, 0, sizeof *c);
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->keep_data = 1;
}

void tc_lock(struct tc_collector *c)
{
	pthread_mutex_lock(&c->mu);
}

void tc_unlock(struct tc_collector *c)
{
	pthread_mutex_unlock(&c->mu);
}

/*
 * Under mu: was this slice (agent, trace, slice_seq) acknowledged before? An
 * agent resends a slice whose ACK did not come within its report timeout
 * under the same slice_seq, and the coordinator's store keeps one row per
 * (trace, agent, slice_seq) (store/sqlite.c): the copy is acknowledged and not
 * stored again. The collector does the same, so that a late ACK on a loaded
 * machine does not look like a slice delivered twice; a trace's data under two
 * seqs, or two traces under one seq, are still both recorded for the tests to see.
 */
static int stored_before(const struct tc_collector *c, const struct rt_wire_slice *m)
{
	size_t i;
	for (i = 0; i < c->nslices; i++)
		if (c->slices[i].acked && c->slices[i].slice_seq == m->slice_seq &&
		    c->slices[i].agent_id == m->agent_id && c->slices[i].trace_lo == m->trace_lo)
			return 1;
	return 0;
}

/* Under mu: record a slice. */
static struct tc_slice *record_slice(struct tc_collector *c, const struct rt_wire_slice *m)
{
	struct tc_slice *s;
	uint32_t i;
	c->slices = grow(c->slices, &c->cap_slices, c->nslices, sizeof *c->slices);
	s = &c->slices[c->nslices++];
	memset(s, 0, sizeof *s);
	s->agent_id = m->agent_id;
	s->trigger_id = m->trigger_id;
	s->slice_seq = m->slice_seq;
	s->trace_hi = m->trace_hi;
	s->trace_lo = m->trace_lo;
	s->tsc_hz = m->tsc_hz;
	s->rate_exp = m->rate_exp;
	s->nbuf = m->buffer_count;
	s->bufs = calloc(m->buffer_count ? m->buffer_count : 1, sizeof *s->bufs);
	for (i = 0; i < m->buffer_count; i++) {
		const struct rt_wire_slice_buffer *b = &m->buffers[i];
		struct tc_buffer *d = &s->bufs[i];
		d->pid = b->pid;
		d->tid = b->tid;
		d->seq = b->seq;
		d->flags = b->flags;
		d->first_tick = b->first_tick;
		d->len = b->len;
		if (c->keep_data) {
			d->data = malloc(b->len + 1);
			if (b->len)
				memcpy(d->data, b->data, b->len);
		}
		s->bytes += b->len;
	}
	s->recv_ns = mono_ns();
	s->order = c->requests;
	c->slice_bytes += s->bytes;
	return s;
}

static void record_trigger(struct tc_collector *c, const struct rt_wire_trigger *m)
{
	struct tc_trigger *t;
	uint32_t i;
	c->triggers = grow(c->triggers, &c->cap_triggers, c->ntriggers, sizeof *c->triggers);
	t = &c->triggers[c->ntriggers++];
	memset(t, 0, sizeof *t);
	t->agent_id = m->agent_id;
	t->trigger_id = m->trigger_id;
	t->trigger_seq = m->trigger_seq;
	t->fired_unix_ns = m->fired_unix_ns;
	t->ntraces = m->trace_count;
	t->traces = calloc(m->trace_count ? m->trace_count : 1, sizeof *t->traces);
	for (i = 0; i < m->trace_count; i++) {
		const struct rt_wire_trace *w = &m->traces[i];
		t->traces[i].hi = w->trace_hi;
		t->traces[i].lo = w->trace_lo;
		t->traces[i].bytes = w->bytes;
		t->traces[i].buffers = w->buffers;
		t->traces[i].ncrumbs = w->breadcrumb_count;
		if (w->breadcrumb_count)
			memcpy(t->traces[i].crumbs, w->breadcrumbs,
			       w->breadcrumb_count * sizeof *w->breadcrumbs);
	}
	t->order = c->requests;
}

static void record_register(struct tc_collector *c, const struct rt_wire_register *m)
{
	struct tc_register *r;
	c->regs = grow(c->regs, &c->cap_regs, c->nregs, sizeof *c->regs);
	r = &c->regs[c->nregs++];
	memset(r, 0, sizeof *r);
	r->agent_id = m->agent_id;
	r->pid = m->pid;
	r->start_unix_ns = m->start_unix_ns;
	snprintf(r->host, sizeof r->host, "%s", m->host);
	snprintf(r->control_addr, sizeof r->control_addr, "%s", m->control_addr);
	r->buffer_size = m->buffer_size;
	r->buffer_count = m->buffer_count;
	r->order = c->requests;
}

static void *tc_main(void *arg)
{
	struct tc_collector *c = arg;
	struct rt_wire_buf out = { 0 };
	while (!atomic_load_explicit(&c->stop, memory_order_acquire)) {
		nng_msg *req;
		struct rt_wire_msg m;
		struct rt_wire_ack ack;
		uint64_t seq = 0, wait_ns = 0;
		struct tc_slice *sl = NULL;
		int rv = nng_recvmsg(c->sock, &req, 0), refuse, silent;
		if (rv == NNG_ETIMEDOUT)
			continue;
		if (rv != 0)
			break;
		pthread_mutex_lock(&c->mu);
		c->requests++;
		rv = rt_wire_decode(nng_msg_body(req), nng_msg_len(req), &m);
		if (rv != 0) {
			c->bad++;
		} else if (m.type == RT_WIRE_SLICE && stored_before(c, &m.slice)) {
			seq = m.slice.slice_seq; /* acknowledged again, not recorded */
			c->duplicates++;
		} else if (m.type == RT_WIRE_SLICE) {
			sl = record_slice(c, &m.slice);
			seq = m.slice.slice_seq;
			if (c->delay_us)
				wait_ns += (uint64_t)c->delay_us * 1000ull;
			if (c->byte_rate > 0) {
				uint64_t now = mono_ns();
				if (c->next_free_ns < now)
					c->next_free_ns = now;
				c->next_free_ns += (uint64_t)((double)sl->bytes / c->byte_rate * 1e9);
				wait_ns += c->next_free_ns - now;
			}
		} else if (m.type == RT_WIRE_TRIGGER) {
			record_trigger(c, &m.trigger);
		} else if (m.type == RT_WIRE_REGISTER) {
			record_register(c, &m.reg);
		} else {
			c->others++;
		}
		refuse = c->refuse;
		silent = c->silent;
		if (sl)
			sl->acked = !refuse && !silent;
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
		rt_wire_msg_free(&m);
		nng_msg_free(req);
		if (wait_ns)
			sleep_ns(wait_ns);
		if (silent)
			continue;
		memset(&ack, 0, sizeof ack);
		ack.status = refuse ? -1 : 0;
		ack.seq_count = seq ? 1 : 0;
		ack.seqs = seq ? &seq : NULL;
		out.len = 0;
		if (rt_wire_encode_ack(&out, &ack) == 0)
			nng_send(c->sock, out.data, out.len, 0);
	}
	rt_wire_buf_free(&out);
	return NULL;
}

int tc_start(struct tc_collector *c, const char *url, char *err, size_t errlen)
{
	nng_listener l;
	nng_sockaddr sa;
	int rv;
	if (c->running)
		return 0;
	int pick = url && strcmp(url, "tcp://127.0.0.1:0") == 0; /* tests stop and restart it */
	if (!pick && url && url[0])
		snprintf(c->url, sizeof c->url, "%s", url);
	for (int attempt = 0;; attempt++) {
		if (pick)
			test_restartable_url(c->url, sizeof c->url);
		if ((rv = nng_rep0_open(&c->sock)) != 0) {
			snprintf(err, errlen, "rep0_open: %s", nng_strerror(rv));
			return rv;
		}
		nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, 100);
		nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, (size_t)RT_WIRE_MAX_MESSAGE + 4096);
		if ((rv = nng_listen(c->sock, c->url, &l, 0)) == 0)
			break;
		nng_close(c->sock);
		/* a picked port taken between the check and the listen: pick again */
		if (!pick || rv != NNG_EADDRINUSE || attempt == 7) {
			snprintf(err, errlen, "listen %s: %s", c->url, nng_strerror(rv));
			return rv;
		}
	}
	if (nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa) == 0 && sa.s_family == NNG_AF_INET) {
		const uint8_t *ip = (const uint8_t *)&sa.s_in.sa_addr;
		snprintf(c->url, sizeof c->url, "tcp://%u.%u.%u.%u:%u", ip[0], ip[1], ip[2], ip[3],
			 (unsigned)ntohs(sa.s_in.sa_port));
	}
	c->open = 1;
	atomic_store_explicit(&c->stop, 0, memory_order_release);
	if (pthread_create(&c->thread, NULL, tc_main, c) != 0) {
		snprintf(err, errlen, "pthread_create");
		nng_close(c->sock);
		c->open = 0;
		return NNG_ENOMEM;
	}
	c->running = 1;
	c->starts++;
	return 0;
}

void tc_stop(struct tc_collector *c)
{
	if (c->running) {
		atomic_store_explicit(&c->stop, 1, memory_order_release);
		pthread_join(c->thread, NULL);
		c->running = 0;
	}
	if (c->open) {
		/* Bounded, as the daemons close: nng 1.5.2 can deadlock in nng_close()
		 * when the peer (the agent, just closed) dropped its pipe while it was
		 * torn down (nanomsg/nng#1543); a plain close hung report_slice_too_big
		 * here until its timeout. */
		rt_nng_close_bounded(c->sock, RT_NNG_CLOSE_WAIT_MS);
		c->open = 0;
	}
}

void tc_free(struct tc_collector *c)
{
	size_t i;
	uint32_t k;
	tc_stop(c);
	for (i = 0; i < c->nslices; i++) {
		for (k = 0; k < c->slices[i].nbuf; k++)
			free(c->slices[i].bufs[k].data);
		free(c->slices[i].bufs);
	}
	for (i = 0; i < c->ntriggers; i++)
		free(c->triggers[i].traces);
	free(c->slices);
	free(c->triggers);
	free(c->regs);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	memset(c, 0, sizeof *c);
}

#define LOCKED_GET(field)              \
	do {                           \
		size_t v;              \
		pthread_mutex_lock(&c->mu);   \
		v = (size_t)c->field;  \
		pthread_mutex_unlock(&c->mu); \
		return v;              \
	} while (0)

size_t tc_nslices(struct tc_collector *c) { LOCKED_GET(nslices); }
size_t tc_ntriggers(struct tc_collector *c) { LOCKED_GET(ntriggers); }
size_t tc_nregs(struct tc_collector *c) { LOCKED_GET(nregs); }
uint64_t tc_requests(struct tc_collector *c) { LOCKED_GET(requests); }

void tc_set_delay(struct tc_collector *c, uint32_t delay_us)
{
	pthread_mutex_lock(&c->mu);
	c->delay_us = delay_us;
	pthread_mutex_unlock(&c->mu);
}

void tc_set_rate(struct tc_collector *c, double bytes_per_s)
{
	pthread_mutex_lock(&c->mu);
	c->byte_rate = bytes_per_s;
	c->next_free_ns = 0;
	pthread_mutex_unlock(&c->mu);
}

void tc_set_refuse(struct tc_collector *c, int refuse)
{
	pthread_mutex_lock(&c->mu);
	c->refuse = refuse;
	pthread_mutex_unlock(&c->mu);
}

void tc_set_silent(struct tc_collector *c, int silent)
{
	pthread_mutex_lock(&c->mu);
	c->silent = silent;
	pthread_mutex_unlock(&c->mu);
}

size_t tc_wait_slices(struct tc_collector *c, size_t n, double seconds)
{
	struct timespec until;
	size_t have;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)seconds;
	until.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&c->mu);
	while (c->nslices < n && pthread_cond_timedwait(&c->cv, &c->mu, &until) == 0)
		;
	have = c->nslices;
	pthread_mutex_unlock(&c->mu);
	return have;
}
