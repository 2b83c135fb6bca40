/*
 * coordinator/collector.c — the collector endpoint: slices in, durable, acknowledged.
 *
 * run_once hands over every SLICE that arrived together, inside one open store
 * transaction. Each is decoded strictly, stored as the raw message it is (the
 * wire format is the archive format) and added to its trace's assembly; the
 * ACK naming its slice_seq is queued and goes out only after the commit. A
 * slice already stored (the agent re-sent it after a lost ACK) is acknowledged
 * again and not counted twice. A slice for a trace closed less than state_ttl
 * ago is stored as late and added to the trace's row, unless selection deleted
 * that trace: then it is acknowledged, dropped and counted.
 */
#include "coord_internal.h"

#include <string.h>

static void describe(const struct rt_wire_slice *s, struct rt_store_slice *row, const void *msg,
		     size_t len)
{
	uint32_t i;
	memset(row, 0, sizeof *row);
	row->trace_hi = s->trace_hi;
	row->trace_lo = s->trace_lo;
	row->agent_id = s->agent_id;
	row->trigger_id = s->trigger_id;
	row->slice_seq = s->slice_seq;
	row->received_ns = coord_unix_ns();
	row->buffers = s->buffer_count;
	row->rate_exp = s->rate_exp;
	row->msg = msg;
	row->msg_len = len;
	for (i = 0; i < s->buffer_count; i++) {
		uint64_t t = rt_wire_slice_tick_ns(s, s->buffers[i].first_tick);
		row->bytes += s->buffers[i].len;
		if (t && (!row->first_ns || t < row->first_ns))
			row->first_ns = t;
		if (t > row->last_ns)
			row->last_ns = t;
	}
}

/* The slice belongs to a trace already closed and stored (past our memory of it). */
static int stored_before(struct rt_coord *c, const struct rt_wire_slice *s)
{
	struct rt_store_trace t;
	return rt_store_get_trace(c->store, s->trace_hi, s->trace_lo, &t) == 0;
}

static void collect_one(struct rt_coord *c, struct coord_in *in)
{
	const void *b = nng_msg_body(in->msg);
	size_t len = nng_msg_len(in->msg);
	struct rt_store_slice row;
	struct rt_wire_msg m;
	uint64_t seq;
	int rc, late = 0;

	rc = rt_wire_decode(b, len, &m);
	if (rc != 0 || m.type != RT_WIRE_SLICE || m.slice.trace_lo == 0) {
		c->st.bad_slices++;
		coord_log(c, LOG_WARN, "collector: malformed slice (%s)",
			  rc ? rt_wire_strerror(rc) : "not a slice with a trace id");
		coord_reply_ack(c, in, rc ? rc : RT_WIRE_E_VALUE, NULL, 0);
		rt_wire_msg_free(&m);
		return;
	}
	seq = m.slice.slice_seq;
	describe(&m.slice, &row, b, len);
	if (coord_trace_was_unselected(c, m.slice.trace_lo)) {
		/* Selection deleted the trace: storing this would resurrect a part of it. */
		c->st.late_slices_unselected++;
		coord_reply_ack(c, in, 0, &seq, 1);
		rt_wire_msg_free(&m);
		return;
	}
	late = coord_trace_is_closed(c, m.slice.trace_lo) ||
	       (!coord_trace_open(c, m.slice.trace_lo) && stored_before(c, &m.slice));
	row.late = late;
	rc = rt_store_put_slice(c->store, &row);
	if (rc < 0) {
		c->st.store_errors++;
		coord_log(c, LOG_ERROR, "store: %s", rt_store_errmsg(c->store));
		coord_reply_ack(c, in, rc, NULL, 0);
	} else if (rc == RT_STORE_DUPLICATE) {
		c->st.slice_duplicates++;
		in->durable = 1;
		coord_reply_ack(c, in, 0, &seq, 1);
	} else {
		c->st.slices++;
		c->st.slice_bytes += row.bytes;
		if (late) {
			c->st.late_slices++;
			rt_store_add_late(c->store, &row);
		} else {
			coord_slice_arrived(c, &m.slice, row.bytes, row.first_ns, row.last_ns, &late);
		}
		in->durable = 1;
		coord_reply_ack(c, in, 0, &seq, 1);
	}
	rt_wire_msg_free(&m);
}

void coord_process_slices(struct rt_coord *c, struct coord_in **batch, uint32_t n)
{
	uint32_t i;
	for (i = 0; i < n; i++)
		collect_one(c, batch[i]);
}
