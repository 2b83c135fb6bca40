/*
 * agent/window.c — the time-window query and its holds (see window.h).
 *
 * How it works: queries are rare (one per open hop the coordinator weaves), so
 * the index keeps nothing extra for them and the pool ABI is unchanged. A query
 * walks every live index entry; an entry whose earliest segment began after
 * t1, or more than RT_WINDOW_SLACK_NS before t0, is skipped without touching
 * shared memory (a root span starts after the segment its writer opened for the
 * trace). The others are read: their segments' frames, whole records only
 * (a record split across buffers is never one of the two small events wanted),
 * and of those only two event kinds: RESOURCE (the writer stream's
 * service.name) and SPAN_START / SPAN_END (shm/events.h). The strict msgpack
 * reader (wire/mp.h) reads them; any record that does not parse is skipped and
 * counted. The root SERVER span (parent 0) of the asked service gives the
 * candidate: its span id, its start, its end if it ended, and the connection
 * it came on when its ATTR events name one (net.sock.host/peer.addr/port,
 * hashed by rt_wire_conn_id: the same id the caller's CLIENT span gives). Ticks become Unix ns
 * with the pool's calibration through rt_wire_slice_tick_ns, the one conversion
 * the coordinator's decoder also uses, so both sides agree to the nanosecond.
 *
 * Holds: an answered untriggered trace moves to the index's held list
 * (rt_index_hold), out of eviction's reach; the hold table remembers (query,
 * trace, deadline). WINDOW_RELEASE or the deadline (checked once per poll pass,
 * for free while nothing is held) moves it back to the LRU.
 */
#include "window.h"

#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "agent_internal.h"
#include "daemon/figures.h"
#include "retrace/tracer.h"
#include "shm/events.h"
#include "shm/frame.h"
#include "wire/mp.h"

/* ------------------------------------------------------ msgpack cursor ---- */

/* The fields are read with the strict msgpack reader the coordinator's decoder
 * uses (wire/mp.h), so both accept the same events. */

static int mp_uint(struct rt_mp *m, uint64_t *v)
{
	return rt_mp_u64(m, v) ? -1 : 0;
}

static int mp_str(struct rt_mp *m, const uint8_t **s, uint32_t *len)
{
	return rt_mp_raw(m, 0, RETRACE_EV_MAX_STR, s, len) ? -1 : 0;
}

static int mp_map(struct rt_mp *m, uint32_t *count)
{
	return rt_mp_map(m, UINT32_MAX, count) ? -1 : 0;
}

/* A resource attribute value: str | int | float | bool | nil. */
static int mp_skip_value(struct rt_mp *m)
{
	struct rt_mp_obj o;
	if (rt_mp_scalar(m, RETRACE_EV_MAX_STR, &o) || o.kind == RT_MP_BIN || o.kind == RT_MP_EXT)
		return -1;
	return 0;
}

/* ------------------------------------------------------------- reading ---- */

struct stream {
	uint32_t pid, tid;
	uint32_t svc_len;     /* 0: no RESOURCE seen (yet) */
	char svc[RT_WIRE_MAX_STR + 1];
};

/* A span's ends of its connection (net.sock.* attributes), when it names them. */
struct sock_ends {
	char host[48], peer[48];
	uint64_t host_port, peer_port;
};

struct root {
	uint64_t span, start_tick, end_tick;
	int stream;           /* index into the streams, or -1 */
	struct sock_ends ends;
};

/* A CLIENT span and the peer.service it named (kind CLIENTS). */
struct client {
	uint64_t span, start_tick, end_tick;
	int stream;
	uint32_t peer_len;
	char peer[RT_WIRE_MAX_STR + 1];
	struct sock_ends ends;
};

#define MAX_ROOTS 4
#define MAX_CLIENTS 32

struct reading {
	struct stream streams[RT_WINDOW_MAX_STREAMS];
	unsigned nstreams;
	struct root roots[MAX_ROOTS];
	unsigned nroots;
	int want_clients;     /* read CLIENT spans too */
	struct client clients[MAX_CLIENTS];
	unsigned nclients;
	uint64_t bad;
};

static int stream_of(struct reading *r, uint32_t pid, uint32_t tid)
{
	unsigned i;
	for (i = 0; i < r->nstreams; i++)
		if (r->streams[i].pid == pid && r->streams[i].tid == tid)
			return (int)i;
	if (r->nstreams == RT_WINDOW_MAX_STREAMS)
		return -1;
	memset(&r->streams[r->nstreams], 0, sizeof r->streams[0]);
	r->streams[r->nstreams].pid = pid;
	r->streams[r->nstreams].tid = tid;
	return (int)r->nstreams++;
}

/* The ends of span's connection that the query reads (a root or a client). */
static struct sock_ends *ends_of(struct reading *r, uint64_t span)
{
	unsigned i;
	for (i = 0; i < r->nroots; i++)
		if (r->roots[i].span == span)
			return &r->roots[i].ends;
	for (i = 0; i < r->nclients; i++)
		if (r->clients[i].span == span)
			return &r->clients[i].ends;
	return NULL;
}

/* An ATTR net.sock.{host,peer}.{addr,port} (the key after "net.sock."): an
 * address is a string, a port an integer; others are not ours. 0, or -1 if bad. */
static int read_sock_attr(struct reading *r, struct rt_mp *m, uint64_t span,
			  const uint8_t *key, uint32_t kn)
{
	struct sock_ends *e = ends_of(r, span);
	struct rt_mp_obj o;
	int host;
	if (!e)
		return 0;
	if (kn == 9 && (!memcmp(key, "host.addr", 9) || !memcmp(key, "peer.addr", 9))) {
		char *dst;
		host = key[0] == 'h';
		if (rt_mp_scalar(m, RETRACE_EV_MAX_STR, &o))
			return -1;
		dst = host ? e->host : e->peer;
		if (o.kind == RT_MP_STR && o.len < sizeof e->host && !memchr(o.s, 0, o.len)) {
			memcpy(dst, o.s, o.len);
			dst[o.len] = 0;
		}
	} else if (kn == 9 && (!memcmp(key, "host.port", 9) || !memcmp(key, "peer.port", 9))) {
		host = key[0] == 'h';
		if (rt_mp_scalar(m, RETRACE_EV_MAX_STR, &o))
			return -1;
		if (o.kind == RT_MP_UINT)
			*(host ? &e->host_port : &e->peer_port) = o.v.u;
	}
	return 0;
}

/* One whole record of stream `st`: keep what the query needs. 0, or -1 if bad. */
static int read_record(struct reading *r, int st, const uint8_t *rec, uint32_t len)
{
	struct rt_mp m = {rec, len, 2};
	uint64_t span, parent, kind, tick, pid;
	const uint8_t *s;
	uint32_t n, i;
	if (len < 2 || rec[0] != RETRACE_EVENT_MAGIC)
		return 0; /* a raw tracepoint: not ours to read */
	switch (rec[1]) {
	case RETRACE_EV_SPAN_START:
		if (mp_uint(&m, &span) || mp_uint(&m, &parent) || mp_uint(&m, &kind) ||
		    mp_uint(&m, &tick) || mp_str(&m, &s, &n) || m.i != m.n)
			return -1;
		if (parent == 0 && kind == RETRACE_SPAN_SERVER && span && r->nroots < MAX_ROOTS) {
			memset(&r->roots[r->nroots], 0, sizeof r->roots[0]);
			r->roots[r->nroots].span = span;
			r->roots[r->nroots].start_tick = tick;
			r->roots[r->nroots++].stream = st;
		}
		if (kind == RETRACE_SPAN_CLIENT && span && r->want_clients &&
		    r->nclients < MAX_CLIENTS) {
			memset(&r->clients[r->nclients], 0, sizeof r->clients[0]);
			r->clients[r->nclients].span = span;
			r->clients[r->nclients].start_tick = tick;
			r->clients[r->nclients++].stream = st;
		}
		return 0;
	case RETRACE_EV_SPAN_END:
		if (mp_uint(&m, &span) || mp_uint(&m, &tick))
			return -1;
		for (i = 0; i < r->nroots; i++)
			if (r->roots[i].span == span && !r->roots[i].end_tick)
				r->roots[i].end_tick = tick;
		for (i = 0; i < r->nclients; i++)
			if (r->clients[i].span == span && !r->clients[i].end_tick)
				r->clients[i].end_tick = tick;
		return 0;
	case RETRACE_EV_ATTR: {
		const uint8_t *key, *val;
		uint32_t kn, vn;
		if (!r->nclients && !r->nroots)
			return 0;
		if (mp_uint(&m, &span) || mp_str(&m, &key, &kn))
			return -1;
		if (kn > 9 && memcmp(key, "net.sock.", 9) == 0)
			return read_sock_attr(r, &m, span, key + 9, kn - 9);
		if (kn != 12 || memcmp(key, "peer.service", 12) != 0 || m.i >= m.n ||
		    !((m.p[m.i] >= 0xa0 && m.p[m.i] <= 0xbf) || (m.p[m.i] >= 0xd9 && m.p[m.i] <= 0xdb)))
			return 0;
		if (mp_str(&m, &val, &vn))
			return -1;
		for (i = 0; i < r->nclients; i++)
			if (r->clients[i].span == span && vn && vn <= RT_WIRE_MAX_STR &&
			    !memchr(val, 0, vn)) {
				memcpy(r->clients[i].peer, val, vn);
				r->clients[i].peer[vn] = 0;
				r->clients[i].peer_len = vn;
			}
		return 0;
	}
	case RETRACE_EV_RESOURCE:
		if (mp_uint(&m, &pid) || pid > UINT32_MAX || mp_map(&m, &n) ||
		    n > RETRACE_EV_MAX_RESOURCE)
			return -1;
		for (i = 0; i < n; i++) {
			const uint8_t *key, *val;
			uint32_t kn, vn;
			if (mp_str(&m, &key, &kn))
				return -1;
			if (kn == 12 && memcmp(key, "service.name", 12) == 0 && st >= 0 &&
			    m.i < m.n && ((m.p[m.i] >= 0xa0 && m.p[m.i] <= 0xbf) ||
					  (m.p[m.i] >= 0xd9 && m.p[m.i] <= 0xdb))) {
				if (mp_str(&m, &val, &vn))
					return -1;
				if (vn && vn <= RT_WIRE_MAX_STR && !memchr(val, 0, vn)) {
					memcpy(r->streams[st].svc, val, vn);
					r->streams[st].svc[vn] = 0;
					r->streams[st].svc_len = vn;
				}
			} else if (mp_skip_value(&m)) {
				return -1;
			}
		}
		return 0;
	default:
		return 0;
	}
}

/* Read trace t's segments (in the index's order). */
static void read_trace(const struct rt_agent *a, uint32_t t, struct reading *r, int clients)
{
	uint32_t slot = a->ix.traces[t].first_buf, guard = 0;
	r->nstreams = r->nroots = r->nclients = 0;
	r->bad = 0;
	r->want_clients = clients;
	while (slot != RT_INDEX_NONE && slot < a->seg.nslots && guard++ < a->seg.nslots) {
		const struct rt_buffer_header *h = rt_agent_segment(a, slot);
		const uint8_t *data = (const uint8_t *)h + RT_BUF_HEADER_SIZE;
		uint32_t bytes = a->ix.buf_bytes[slot], pos = 0;
		int st = stream_of(r, h->pid, h->tid);
		struct rt_frame f;
		if (rt_pool_segment_fits(&a->pool, a->seg.slot_off[slot], bytes)) {
			while (rt_frame_next(data, bytes, &pos, &f) == RT_FRAME_OK)
				if (!(f.flags & (RETRACE_FRAME_CONT_NEXT | RETRACE_FRAME_CONT_PREV)) &&
				    read_record(r, st, f.data, f.len) != 0)
					r->bad++;
		}
		slot = a->ix.buf_next[slot];
	}
}

/* Ticks of this pool to Unix ns: the same conversion as a slice's. */
static uint64_t tick_ns(const struct rt_agent *a, uint64_t tick)
{
	struct rt_wire_slice s = {.tsc_hz = a->pool.geo.tsc_hz,
				  .tsc_ref_tick = a->pool.geo.tsc_ref_tick,
				  .tsc_ref_unix_ns = a->pool.geo.tsc_ref_unix_ns};
	return rt_wire_slice_tick_ns(&s, tick);
}

/* ---------------------------------------------------------------- query ---- */

struct match {
	struct rt_wire_window_candidate c;
	uint32_t t;
};

static int by_start(const void *x, const void *y)
{
	const struct match *a = x, *b = y;
	if (a->c.start_unix_ns != b->c.start_unix_ns)
		return a->c.start_unix_ns < b->c.start_unix_ns ? -1 : 1;
	if (a->c.trace_lo != b->c.trace_lo)
		return a->c.trace_lo < b->c.trace_lo ? -1 : 1;
	return 0;
}


static void hold(struct rt_agent *a, uint32_t t, uint64_t request_id, uint64_t until)
{
	struct rt_agent_window *w = &a->win;
	if (!w->holds && !(w->holds = malloc(RT_WINDOW_MAX_HOLDS * sizeof *w->holds))) {
		w->st.hold_full++;
		return;
	}
	if (w->nholds == RT_WINDOW_MAX_HOLDS) {
		w->st.hold_full++;
		return;
	}
	if (!rt_index_hold(&a->ix, t))
		return; /* pinned by a trigger, or held by another query already */
	w->holds[w->nholds++] = (struct rt_window_hold){request_id, a->ix.traces[t].lo, until};
	if (w->nholds == 1 || until < w->next_expiry_ns)
		w->next_expiry_ns = until;
	w->st.held++;
}

size_t rt_agent_window_query(struct rt_agent *a, const struct rt_wire_window_query *q,
			     uint8_t *out, size_t cap)
{
	struct rt_agent_window *w = &a->win;
	struct rt_wire_window_candidate *cands = NULL;
	struct rt_wire_window_reply rep;
	struct match *v = NULL;
	struct reading *r = NULL;
	size_t nv = 0, capv = 0, n;
	uint64_t now = rt_agent_now_ns();
	size_t svc_len = strlen(q->service), peer_len = strlen(q->peer);
	int clients = q->kind == RT_WIRE_WINDOW_CLIENTS;
	uint32_t t, i;
	int32_t refused = rt_agent_remote_refused(a); /* holds pin: the trigger bucket */

	if (refused)
		return rt_agent_reply_ack(a, refused, out, cap);
	w->st.queries++;
	rt_agent_drain_before_reply(a);
	if (!(r = malloc(sizeof *r)))
		return rt_agent_reply_ack(a, RT_WIRE_E_NOMEM, out, cap);
	for (t = 0; t < a->ix.capacity; t++) {
		const struct rt_trace_entry *e = &a->ix.traces[t];
		uint64_t first;
		unsigned k;
		if (!e->in_use || e->nbuffers == 0)
			continue;
		first = e->first_tick ? tick_ns(a, e->first_tick) : 0;
		if (first && (first > q->t1_unix_ns || first + RT_WINDOW_SLACK_NS < q->t0_unix_ns))
			continue;
		w->st.traces_decoded++;
		read_trace(a, t, r, clients);
		w->st.bad_records += r->bad;
		for (k = 0; k < (clients ? r->nclients : r->nroots); k++) {
			const struct root *x = clients ? NULL : &r->roots[k];
			const struct client *y = clients ? &r->clients[k] : NULL;
			int si = clients ? y->stream : x->stream;
			const struct stream *s = si >= 0 ? &r->streams[si] : NULL;
			uint64_t span = clients ? y->span : x->span;
			uint64_t t0 = clients ? y->start_tick : x->start_tick;
			uint64_t t1 = clients ? y->end_tick : x->end_tick;
			uint64_t start = tick_ns(a, t0);
			const struct sock_ends *ends = clients ? &y->ends : &x->ends;
			if (!s || s->svc_len != svc_len || memcmp(s->svc, q->service, svc_len) != 0 ||
			    start < q->t0_unix_ns || start > q->t1_unix_ns)
				continue;
			if (clients &&
			    (y->peer_len != peer_len || memcmp(y->peer, q->peer, peer_len) != 0))
				continue;
			if (nv == capv) {
				size_t nc = capv ? capv * 2 : 256;
				struct match *p = realloc(v, nc * sizeof *v);
				if (!p)
					break;
				v = p;
				capv = nc;
			}
			v[nv].c = (struct rt_wire_window_candidate){
				e->hi, e->lo, span, start, t1 ? tick_ns(a, t1) : 0,
				rt_wire_conn_id(clients, ends->host, ends->host_port, ends->peer,
						ends->peer_port)};
			v[nv].t = t;
			nv++;
			if (!clients)
				break; /* one root per trace: its first of the service */
		}
	}
	free(r);
	if (nv)
		qsort(v, nv, sizeof *v, by_start);
	n = nv < q->max ? nv : q->max;
	if (n && !(cands = malloc(n * sizeof *cands))) {
		free(v);
		return rt_agent_reply_ack(a, RT_WIRE_E_NOMEM, out, cap);
	}
	for (i = 0; i < n; i++) {
		cands[i] = v[i].c;
		if (q->hold_ms && !clients) /* a caller's trace is not collected: no hold */
			hold(a, v[i].t, q->request_id, now + (uint64_t)q->hold_ms * 1000000ull);
	}
	w->st.candidates += n;
	w->st.truncated += nv - n;
	memset(&rep, 0, sizeof rep);
	rep.request_id = q->request_id;
	rep.agent_id = a->cfg.agent_id;
	rep.candidate_count = (uint32_t)n;
	rep.candidates = cands;
	rep.truncated = (uint32_t)(nv - n);
	a->msg.len = 0;
	n = rt_wire_encode_window_reply(&a->msg, &rep) == 0 ? rt_agent_reply_msg(a, out, cap)
							     : rt_agent_reply_ack(a, RT_WIRE_E_INVAL, out, cap);
	free(cands);
	free(v);
	return n;
}

/* End hold i (swap-remove); `expired` says which counter. */
static void unhold(struct rt_agent *a, uint32_t i, int expired)
{
	struct rt_agent_window *w = &a->win;
	uint32_t t = rt_index_find(&a->ix, w->holds[i].lo);
	if (t != RT_INDEX_NONE)
		rt_index_unhold(&a->ix, t, a->pass_now_ns ? a->pass_now_ns : rt_agent_now_ns());
	if (expired)
		w->st.expired++;
	else
		w->st.released++;
	w->holds[i] = w->holds[--w->nholds];
}

static void recompute_expiry(struct rt_agent_window *w)
{
	uint32_t i;
	w->next_expiry_ns = UINT64_MAX;
	for (i = 0; i < w->nholds; i++)
		if (w->holds[i].until_ns < w->next_expiry_ns)
			w->next_expiry_ns = w->holds[i].until_ns;
}

size_t rt_agent_window_release(struct rt_agent *a, const struct rt_wire_window_release *r,
			       uint8_t *out, size_t cap)
{
	struct rt_agent_window *w = &a->win;
	uint32_t i = 0;
	w->st.releases++;
	while (i < w->nholds)
		if (w->holds[i].request_id == r->request_id)
			unhold(a, i, 0);
		else
			i++;
	recompute_expiry(w);
	return rt_agent_reply_ack(a, 0, out, cap);
}

void rt_agent_window_expire(struct rt_agent *a, uint64_t now_ns)
{
	struct rt_agent_window *w = &a->win;
	uint32_t i = 0;
	if (w->nholds == 0 || now_ns < w->next_expiry_ns)
		return;
	while (i < w->nholds)
		if (w->holds[i].until_ns <= now_ns)
			unhold(a, i, 1);
		else
			i++;
	recompute_expiry(w);
}

void rt_agent_window_free(struct rt_agent *a)
{
	free(a->win.holds);
	a->win.holds = NULL;
	a->win.nholds = 0;
}

void rt_agent_window_figures(struct rt_figures *f, const struct rt_agent *a)
{
	const struct rt_window_stats *s = &a->win.st;
	rt_fig_section(f, "window");
	rt_fig_u64(f, "queries", s->queries);
	rt_fig_u64(f, "candidates", s->candidates);
	rt_fig_u64(f, "truncated", s->truncated);
	rt_fig_u64(f, "traces_decoded", s->traces_decoded);
	rt_fig_u64(f, "bad_records", s->bad_records);
	rt_fig_gauge(f, "holding", a->win.nholds);
	rt_fig_gauge(f, "held_traces", a->ix.st.held_traces);
	rt_fig_u64(f, "held", s->held);
	rt_fig_u64(f, "hold_full", s->hold_full);
	rt_fig_u64(f, "released", s->released);
	rt_fig_u64(f, "expired", s->expired);
	rt_fig_u64(f, "releases", s->releases);
}
