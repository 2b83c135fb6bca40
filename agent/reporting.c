/*
 * agent/reporting.c — from a trigger to slices acknowledged by the collector.
 *
 * A local trigger group passes its trigger id's rate limit or is dropped whole,
 * before anything is pinned. Accepted (and remote) triggers pin their traces and
 * queue those with unsent buffers in their trigger's class (agent/report.h);
 * local ones are also posted to the coordinator with each trace's breadcrumbs.
 *
 * Each pass, rt_agent_report_pump:
 *   1. finishes round trips: an acknowledged slice frees its buffers; a failed
 *      one marks the collector down and is spooled (its buffers then freed) or,
 *      with no spool room, put back on its trace to be sent again;
 *   2. while the collector is down, probes it once a second with the oldest
 *      spooled slice; while the spool holds anything, new slices join the spool
 *      behind it, so slices reach the collector in the order they were cut;
 *   3. takes the next trace from the fair schedule, cuts a slice of up to
 *      max_slice_bytes from its oldest buffers (ordered by writer and sequence
 *      inside the slice), encodes it straight from shared memory and sends it in
 *      a free slot.
 * A trace stays triggered after its slice went: buffers written later queue it
 * again. A quiet triggered trace with nothing left to send expires after its TTL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_internal.h"
#include "log.h"
#include "spool.h"

#define PROBE_EVERY_NS 1000000000ull

static uint64_t spool_pending(const struct rt_agent *a)
{
	return a->spool ? a->spool->st.records_pending : 0;
}
#define EXPIRE_SCAN 256u

/* ------------------------------------------------------------ pinning ---- */

void rt_agent_mark_pinned(struct rt_agent *a, uint32_t id, uint32_t trigger_id)
{
	struct rt_buffer_header *h = rt_pool_buffer(&a->pool, id);
	h->pin_trigger = trigger_id;
	ck_pr_store_32(&h->flags, ck_pr_load_32(&h->flags) | RT_BUF_PINNED);
}

void rt_agent_pin(struct rt_agent *a, uint32_t t, uint32_t trigger_id)
{
	uint32_t b;
	if (t >= a->ix.capacity || a->ix.traces[t].state != RT_TRACE_UNTRIGGERED)
		return;
	rt_index_pin(&a->ix, t, trigger_id);
	rt_report_class_of(&a->rep, trigger_id)->traces_pinned++;
	a->st.triggered_traces++;
	for (b = a->ix.traces[t].first_buf; b != RT_INDEX_NONE; b = a->ix.buf_next[b])
		rt_agent_mark_pinned(a, b, trigger_id);
	if (a->ix.traces[t].nbuffers)
		rt_agent_queue_pinned(a, t, 0);
}

static uint32_t pin_trace(struct rt_agent *a, struct rt_report_class *c, uint64_t hi,
			  uint64_t lo, uint32_t trigger_id)
{
	uint32_t t;
	if (lo == 0) {
		a->st.bad_triggers++;
		return RT_INDEX_NONE;
	}
	t = rt_agent_trace_for(a, lo, a->pass_now_ns);
	if (t == RT_INDEX_NONE)
		return t;
	if (a->ix.traces[t].hi == 0)
		a->ix.traces[t].hi = hi;
	(void)c;
	rt_agent_pin(a, t, trigger_id);
	a->ix.traces[t].last_seen_ns = a->pass_now_ns;
	return t;
}

void rt_agent_queue_pinned(struct rt_agent *a, uint32_t t, uint32_t n)
{
	if (a->rep.trace_class[t]) {
		rt_report_add_buffers(&a->rep, &a->ix, t, n);
		return;
	}
	rt_report_enqueue(&a->rep, rt_report_class_of(&a->rep, a->ix.traces[t].trigger_id),
			  &a->ix, t);
}

static void post_trigger(struct rt_agent *a, const struct rt_trigger_entry *g, unsigned int n)
{
	struct rt_wire_trace traces[RT_WIRE_MAX_TRACES];
	struct rt_wire_trigger m;
	unsigned int i, k = 0;
	if (!a->up.coord_open)
		return;
	for (i = 0; i < n && k < RT_WIRE_MAX_TRACES; i++) {
		uint32_t t = g[i].trace_lo ? rt_index_find(&a->ix, g[i].trace_lo) : RT_INDEX_NONE;
		memset(&traces[k], 0, sizeof traces[k]);
		traces[k].trace_hi = g[i].trace_hi;
		traces[k].trace_lo = g[i].trace_lo;
		if (t != RT_INDEX_NONE) {
			traces[k].breadcrumb_count = a->ix.traces[t].ncrumbs;
			traces[k].breadcrumbs = a->ix.traces[t].crumbs;
		}
		k++;
	}
	m.agent_id = a->cfg.agent_id;
	m.trigger_id = g[0].trigger_id;
	m.trigger_seq = ++a->trigger_seq;
	m.fired_unix_ns = a->pass_unix_ns;
	m.trace_count = k;
	m.traces = traces;
	a->msg.len = 0;
	if (rt_wire_encode_trigger(&a->msg, &m) == 0)
		rt_uplink_post(&a->up, &a->msg);
}

void rt_agent_local_trigger(struct rt_agent *a, const struct rt_trigger_entry *g,
			    unsigned int n)
{
	struct rt_report_class *c = rt_report_class_of(&a->rep, g[0].trigger_id);
	unsigned int i;
	rt_report_refill(&a->rep, a->pass_now_ns);
	if (!rt_report_admit(&a->rep, c)) {
		a->st.rate_limited++;
		return;
	}
	for (i = 0; i < n; i++)
		pin_trace(a, c, g[i].trace_hi, g[i].trace_lo, g[i].trigger_id);
	post_trigger(a, g, n);
}

/* ------------------------------------------------------------ overload ---- */

void rt_agent_abandon_overload(struct rt_agent *a)
{
	while (a->rep.queued_buffers > a->pinned_limit) {
		struct rt_report_class *c;
		uint32_t t = rt_report_victim(&a->rep, &a->ix, &c);
		uint32_t nb;
		if (t == RT_INDEX_NONE)
			break;
		nb = a->ix.traces[t].nbuffers;
		c->abandoned_traces++;
		c->abandoned_buffers += nb;
		a->st.abandoned_traces++;
		a->st.abandoned_buffers += nb;
		rt_agent_remove_trace(a, t, 0);
	}
}

void rt_agent_expire_triggered(struct rt_agent *a)
{
	uint64_t ttl = (uint64_t)(a->cfg.triggered_ttl * 1e9);
	uint32_t t = rt_index_pinned_oldest(&a->ix), seen = 0;
	while (t != RT_INDEX_NONE && seen++ < EXPIRE_SCAN) {
		const struct rt_trace_entry *e = &a->ix.traces[t];
		uint32_t next = e->lru_next;
		if (e->nbuffers == 0 && e->inflight == 0 && !a->rep.trace_class[t] &&
		    a->pass_now_ns > e->last_seen_ns + ttl) {
			rt_agent_remove_trace(a, t, 0);
			a->st.triggered_expired++;
		}
		t = next;
	}
}

/* -------------------------------------------------------------- slices ---- */

static int writer_order(const void *x, const void *y, void *arg)
{
	const struct rt_pool *p = arg;
	const struct rt_buffer_header *a = rt_pool_buffer(p, *(const uint32_t *)x);
	const struct rt_buffer_header *b = rt_pool_buffer(p, *(const uint32_t *)y);
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Encode a slice of buffers (sorted in place into writer order) into a->msg. */
static int encode_slice(struct rt_agent *a, uint64_t hi, uint64_t lo, uint32_t trigger_id,
			uint64_t seq, uint32_t *bufs, uint32_t n)
{
	struct rt_wire_slice_buffer *wb = a->slicebufs;
	struct rt_wire_slice m;
	uint32_t i;
	qsort_r(bufs, n, sizeof *bufs, writer_order, &a->pool);
	for (i = 0; i < n; i++) {
		const struct rt_buffer_header *h = rt_pool_buffer(&a->pool, bufs[i]);
		wb[i].pid = h->pid;
		wb[i].tid = h->tid;
		wb[i].seq = h->seq;
		wb[i].flags = h->flags;
		wb[i].first_tick = h->first_tick;
		wb[i].data = rt_pool_buffer_data(&a->pool, bufs[i]);
		wb[i].len = a->ix.buf_bytes[bufs[i]];
	}
	memset(&m, 0, sizeof m);
	m.agent_id = a->cfg.agent_id;
	m.trigger_id = trigger_id;
	m.slice_seq = seq;
	m.trace_hi = hi;
	m.trace_lo = lo;
	m.tsc_hz = a->pool.hdr->tsc_hz;
	m.tsc_ref_tick = a->pool.hdr->tsc_ref_tick;
	m.tsc_ref_unix_ns = a->pool.hdr->tsc_ref_unix_ns;
	m.buffer_count = n;
	m.buffers = wb;
	a->msg.len = 0;
	return rt_wire_encode_slice(&a->msg, &m);
}

/* The slot's trace if it still is the one the slice was cut from. */
static uint32_t slot_trace(const struct rt_agent *a, const struct rt_uplink_slot *s)
{
	const struct rt_trace_entry *e;
	if (s->trace >= a->ix.capacity)
		return RT_INDEX_NONE;
	e = &a->ix.traces[s->trace];
	return e->in_use && e->lo == s->trace_lo ? s->trace : RT_INDEX_NONE;
}

static void free_slice_buffers(struct rt_agent *a, struct rt_uplink_slot *s)
{
	uint32_t t = slot_trace(a, s), i;
	for (i = 0; i < s->nbuf; i++) {
		rt_index_release_inflight(&a->ix, s->bufs[i], t);
		rt_agent_recycle(a, s->bufs[i]);
	}
	s->nbuf = 0;
}

/* Put a failed slice's buffers back on its trace (or free them if it is gone). */
static void return_slice_buffers(struct rt_agent *a, struct rt_uplink_slot *s)
{
	uint32_t t = slot_trace(a, s), i;
	if (t == RT_INDEX_NONE) {
		a->st.abandoned_buffers += s->nbuf;
		free_slice_buffers(a, s);
		return;
	}
	for (i = 0; i < s->nbuf; i++) {
		rt_index_release_inflight(&a->ix, s->bufs[i], t);
		rt_index_add_buffer(&a->ix, t, s->bufs[i], a->ix.buf_bytes[s->bufs[i]], 0,
				    a->pass_now_ns);
	}
	rt_agent_queue_pinned(a, t, s->nbuf);
	s->nbuf = 0;
}

static struct rt_report_class *slot_class(struct rt_agent *a, const struct rt_uplink_slot *s)
{
	return &a->rep.classes[s->cls <= RT_REPORT_MAX_CLASSES ? s->cls : RT_REPORT_MAX_CLASSES];
}

/* Spool the slice held by slot s (re-encoded from shared memory). 0 if spooled. */
static int spool_slot(struct rt_agent *a, struct rt_uplink_slot *s)
{
	uint64_t id;
	int rc;
	if (!a->spool)
		return -1;
	if (encode_slice(a, s->trace_hi, s->trace_lo, s->trigger_id, s->seq, s->bufs,
			 s->nbuf) != 0)
		return -1;
	rc = rt_spool_append(a->spool, a->msg.data, a->msg.len, &id);
	if (rc == RT_SPOOL_FULL || rc == RT_SPOOL_TOO_BIG) {
		a->st.spool_full++;
		a->spool_retry_ns = a->pass_now_ns + PROBE_EVERY_NS; /* room comes with time */
		return -1;
	}
	if (rc != 0) {
		a->st.spool_errors++;
		rt_log(RT_LOG_ERROR, "spool %s: %s", a->cfg.spool_dir, rt_spool_strerror(rc));
		return -1;
	}
	slot_class(a, s)->slices_spooled++;
	slot_class(a, s)->bytes_spooled += s->bytes;
	a->st.slices_spooled++;
	return 0;
}

static void finish_slot(struct rt_agent *a, struct rt_uplink_slot *s)
{
	if (s->x.ok) {
		a->collector_down = 0;
		if (s->from_spool) {
			rt_spool_consume(a->spool, s->spool_id);
			a->st.spool_sent++;
		} else {
			slot_class(a, s)->slices_acked++;
			slot_class(a, s)->bytes_acked += s->bytes;
			a->st.slices_acked++;
			a->st.slice_bytes_acked += s->bytes;
			free_slice_buffers(a, s);
		}
	} else {
		if (!a->collector_down)
			rt_log(RT_LOG_WARN, "collector %s did not acknowledge a slice; %s",
			       a->cfg.collector, a->spool ? "spooling" : "will retry");
		a->collector_down = 1;
		a->next_probe_ns = a->pass_now_ns + PROBE_EVERY_NS;
		a->st.slices_failed++;
		if (!s->from_spool) {
			if (spool_slot(a, s) == 0)
				free_slice_buffers(a, s);
			else
				return_slice_buffers(a, s);
		}
	}
	rt_uplink_slot_reset(s);
}

/* Cut and send (or spool) one slice of trace t. 0 if something went. */
static int cut_slice(struct rt_agent *a, uint32_t t, struct rt_report_class *c,
		     struct rt_uplink_slot *s)
{
	struct rt_trace_entry *e = &a->ix.traces[t];
	uint32_t i;
	rt_report_dequeue(&a->rep, &a->ix, t);
	s->trace = t;
	s->trace_lo = e->lo;
	s->trace_hi = e->hi;
	s->trigger_id = e->trigger_id; /* the trace's own id, also in the shared OTHER class */
	s->cls = (uint32_t)(c - a->rep.classes);
	s->seq = ++a->slice_seq;
	s->nbuf = rt_index_take_buffers(&a->ix, t, s->bufs, a->cfg.max_slice_bytes);
	s->bytes = 0;
	for (i = 0; i < s->nbuf; i++)
		s->bytes += a->ix.buf_bytes[s->bufs[i]];
	if (e->nbuffers)
		rt_agent_queue_pinned(a, t, 0); /* the rest waits for its next turn */
	rt_report_charge(&a->rep, c, s->bytes);
	s->sent_ns = a->pass_now_ns;
	return 0;
}

static void send_new_slices(struct rt_agent *a)
{
	struct rt_report_class *c;
	uint32_t t;
	int via_spool = a->spool && (a->collector_down || spool_pending(a) > 0 ||
				     !a->up.coll_open);
	if (via_spool && a->pass_now_ns < a->spool_retry_ns)
		return;
	if (!a->spool && (!a->up.coll_open ||
			  (a->collector_down && a->pass_now_ns < a->next_probe_ns)))
		return; /* nowhere to put them yet: they wait, pinned, under the overload policy */
	if (!a->spool && a->collector_down)
		a->next_probe_ns = a->pass_now_ns + PROBE_EVERY_NS; /* this pass probes */
	while ((t = rt_report_next(&a->rep, &a->ix, &c)) != RT_INDEX_NONE) {
		struct rt_uplink_slot *s = via_spool ? &a->spool_slot : rt_uplink_free_slot(&a->up);
		if (!s)
			return;
		cut_slice(a, t, c, s);
		a->st.slices_sent++;
		if (via_spool) {
			if (spool_slot(a, s) == 0) {
				free_slice_buffers(a, s);
			} else {
				return_slice_buffers(a, s);
				return;
			}
			continue;
		}
		if (encode_slice(a, s->trace_hi, s->trace_lo, s->trigger_id, s->seq, s->bufs,
				 s->nbuf) != 0 ||
		    rt_uplink_send_slice(&a->up, s, a->msg.data, a->msg.len) != 0) {
			return_slice_buffers(a, s);
			return;
		}
	}
}

/* One spooled slice in flight at a time, oldest first: probes and drains. */
static void drain_spool(struct rt_agent *a)
{
	const void *rec;
	size_t len;
	uint64_t id;
	struct rt_uplink_slot *s;
	uint32_t i;
	int rc;
	if (!a->spool || !a->up.coll_open || spool_pending(a) == 0)
		return;
	for (i = 0; i < RT_UPLINK_SLOTS; i++)
		if (a->up.slots[i].x.state != RT_SLOT_FREE && a->up.slots[i].from_spool)
			return;
	if (a->collector_down && a->pass_now_ns < a->next_probe_ns)
		return;
	if (!(s = rt_uplink_free_slot(&a->up)))
		return;
	if ((rc = rt_spool_peek(a->spool, &rec, &len, &id)) != 0) {
		if (rc < 0) {
			a->st.spool_errors++;
			rt_log(RT_LOG_ERROR, "spool %s: cannot read the oldest slice: %s",
			       a->cfg.spool_dir, rt_spool_strerror(rc));
			a->next_probe_ns = a->pass_now_ns + PROBE_EVERY_NS;
		}
		return;
	}
	{
		struct rt_wire_msg m;
		if (rt_wire_decode(rec, len, &m) != 0 || m.type != RT_WIRE_SLICE) {
			rt_wire_msg_free(&m);
			rt_spool_consume(a->spool, id); /* checksummed, so only a foreign record */
			return;
		}
		s->seq = m.slice.slice_seq;
		rt_wire_msg_free(&m);
	}
	s->from_spool = 1;
	s->spool_id = id;
	s->nbuf = 0;
	a->next_probe_ns = a->pass_now_ns + PROBE_EVERY_NS;
	rt_uplink_send_slice(&a->up, s, rec, len);
}

void rt_agent_report_pump(struct rt_agent *a)
{
	uint32_t i;
	for (i = 0; i < RT_UPLINK_SLOTS; i++)
		if (a->up.coll_open && rt_uplink_slot_done(&a->up.slots[i]))
			finish_slot(a, &a->up.slots[i]);
	rt_uplink_pump_coordinator(&a->up, a->pass_now_ns);
	drain_spool(a);
	rt_report_refill(&a->rep, a->pass_now_ns);
	send_new_slices(a);
}

/* ------------------------------------------------------ remote triggers ---- */

static size_t reply_bytes(struct rt_agent *a, uint8_t *out, size_t cap)
{
	if (a->msg.len > cap)
		return 0;
	memcpy(out, a->msg.data, a->msg.len);
	return a->msg.len;
}

static size_t error_ack(struct rt_agent *a, int status, uint8_t *out, size_t cap)
{
	struct rt_wire_ack ack = { .status = status };
	a->msg.len = 0;
	if (rt_wire_encode_ack(&a->msg, &ack) != 0)
		return 0;
	return reply_bytes(a, out, cap);
}

static size_t remote_trigger(struct rt_agent *a, const struct rt_wire_remote_trigger *rq,
			     uint8_t *out, size_t cap)
{
	struct rt_wire_trace traces[RT_WIRE_MAX_TRACES];
	struct rt_wire_breadcrumb_reply rep;
	struct rt_report_class *c = rt_report_class_of(&a->rep, rq->trigger_id);
	uint32_t i;
	c->remote++;
	a->st.remote_triggers++;
	for (i = 0; i < rq->trace_count; i++) {
		uint32_t t = pin_trace(a, c, rq->traces[i].trace_hi, rq->traces[i].trace_lo,
				       rq->trigger_id);
		memset(&traces[i], 0, sizeof traces[i]);
		traces[i].trace_hi = rq->traces[i].trace_hi;
		traces[i].trace_lo = rq->traces[i].trace_lo;
		if (t == RT_INDEX_NONE)
			continue;
		traces[i].buffers = a->ix.traces[t].nbuffers + a->ix.traces[t].inflight;
		traces[i].bytes = a->ix.traces[t].bytes;
		traces[i].breadcrumb_count = a->ix.traces[t].ncrumbs;
		traces[i].breadcrumbs = a->ix.traces[t].crumbs;
	}
	rep.request_id = rq->request_id;
	rep.agent_id = a->cfg.agent_id;
	rep.trace_count = rq->trace_count;
	rep.traces = traces;
	a->msg.len = 0;
	if (rt_wire_encode_breadcrumb_reply(&a->msg, &rep) != 0)
		return error_ack(a, RT_WIRE_E_INVAL, out, cap);
	return reply_bytes(a, out, cap);
}

static int is_word(const uint8_t *req, size_t len, const char *word)
{
	size_t n = strlen(word);
	return len >= n && memcmp(req, word, n) == 0 && (len == n || req[n] == ' ' || req[n] == 0);
}

size_t rt_agent_handle_request(struct rt_agent *a, const uint8_t *req, size_t len,
			       uint8_t *out, size_t cap)
{
	struct rt_wire_msg m;
	int rc;
	if (cap == 0)
		return 0;
	if (is_word(req, len, "status")) {
		int json = len >= 11 && memcmp(req + 7, "json", 4) == 0;
		return rt_agent_status(a, json, (char *)out, cap) + 1;
	}
	if (is_word(req, len, "ping"))
		return (size_t)snprintf((char *)out, cap, "pong %u", a->cfg.agent_id) + 1;
	if (len == 0 || (req[0] & 0xf0) != 0x90) /* not a msgpack array: a text command */
		return (size_t)snprintf((char *)out, cap,
					"error: unknown request (try status, status json, ping)") + 1;
	rc = rt_wire_decode(req, len, &m);
	if (rc != 0 || m.type != RT_WIRE_REMOTE_TRIGGER) {
		a->st.bad_requests++;
		rt_wire_msg_free(&m);
		return error_ack(a, rc != 0 ? rc : RT_WIRE_E_UNKNOWN_TYPE, out, cap);
	}
	{
		size_t n = remote_trigger(a, &m.remote, out, cap);
		rt_wire_msg_free(&m);
		return n;
	}
}

/* -------------------------------------------------------- open / close ---- */

int rt_agent_reporting_open(struct rt_agent *a, char *err, size_t errlen)
{
	struct rt_report_config rc;
	memset(&rc, 0, sizeof rc);
	rc.trigger_rate = a->cfg.trigger_rate;
	rc.trigger_burst = a->cfg.trigger_burst > 1 ? a->cfg.trigger_burst : 1;
	rc.bandwidth = a->cfg.bandwidth;
	rc.class_bandwidth = a->cfg.trigger_bandwidth;
	snprintf(rc.weights, sizeof rc.weights, "%s", a->cfg.trigger_weights);
	if (rt_report_init(&a->rep, &rc, a->ix.capacity, err, errlen) != 0)
		return -1;
	a->slicebufs = calloc(a->pool.hdr->buffer_count, sizeof *a->slicebufs);
	a->spool_slot.bufs = malloc((size_t)a->pool.hdr->buffer_count * sizeof(uint32_t));
	if (!a->slicebufs || !a->spool_slot.bufs) {
		snprintf(err, errlen, "out of memory for slice scratch");
		return -1;
	}
	/* A slice's message must fit the wire's limit, with room for its framing. */
	if (a->cfg.max_slice_bytes == 0)
		a->cfg.max_slice_bytes = 4u << 20;
	if (a->cfg.max_slice_bytes > RT_WIRE_MAX_MESSAGE - (4u << 20))
		a->cfg.max_slice_bytes = RT_WIRE_MAX_MESSAGE - (4u << 20);
	if (a->cfg.spool_dir[0]) {
		struct rt_spool_opts so;
		memset(&so, 0, sizeof so);
		so.dir = a->cfg.spool_dir;
		so.max_bytes = a->cfg.spool_max;
		a->spool = calloc(1, sizeof *a->spool);
		if (!a->spool || rt_spool_open(a->spool, &so, err, errlen) != 0) {
			free(a->spool);
			a->spool = NULL;
			return -1;
		}
		if (spool_pending(a))
			rt_log(RT_LOG_INFO, "spool %s holds %llu slices from before; sending them first",
			       a->cfg.spool_dir, (unsigned long long)spool_pending(a));
	}
	return 0;
}

int rt_agent_connect(struct rt_agent *a, const char *control_addr, char *err, size_t errlen)
{
	struct rt_wire_register r;
	memset(&r, 0, sizeof r);
	r.agent_id = a->cfg.agent_id;
	r.pid = (uint32_t)getpid();
	r.start_unix_ns = a->start_unix_ns;
	if (a->cfg.host[0])
		snprintf(r.host, sizeof r.host, "%s", a->cfg.host);
	else if (gethostname(r.host, sizeof r.host - 1) != 0)
		snprintf(r.host, sizeof r.host, "unknown");
	snprintf(r.control_addr, sizeof r.control_addr, "%s", control_addr ? control_addr : "");
	r.buffer_size = a->pool.hdr->buffer_size;
	r.buffer_count = a->pool.hdr->buffer_count;
	r.tsc_hz = a->pool.hdr->tsc_hz;
	r.tsc_ref_tick = a->pool.hdr->tsc_ref_tick;
	r.tsc_ref_unix_ns = a->pool.hdr->tsc_ref_unix_ns;
	a->msg.len = 0;
	if (rt_wire_encode_register(&a->msg, &r) != 0) {
		snprintf(err, errlen, "cannot encode the registration");
		return -1;
	}
	return rt_uplink_open(&a->up, a->cfg.collector, a->cfg.coordinator,
			      a->pool.hdr->buffer_count, a->cfg.outbox,
			      (int)a->cfg.report_timeout_ms, &a->msg, err, errlen);
}

void rt_agent_reporting_close(struct rt_agent *a)
{
	rt_uplink_close(&a->up);
	if (a->spool) {
		rt_spool_close(a->spool);
		free(a->spool);
		a->spool = NULL;
	}
	rt_report_free(&a->rep);
	rt_wire_buf_free(&a->msg);
	free(a->slicebufs);
	free(a->spool_slot.bufs);
	a->slicebufs = NULL;
	a->spool_slot.bufs = NULL;
}
