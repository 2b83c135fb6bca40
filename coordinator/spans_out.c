/*
 * coordinator/spans_out.c — hand a closed trace's decoded spans to a store that
 * keeps spans as rows (store.h rt_store_put_spans; ClickHouse's otel_traces).
 *
 * The decoded trace (decode.h) already has every string; this only lays it out
 * as rt_store_span: attribute values become text (integers and booleans as
 * printed, doubles with %.17g so they read back exactly), a span's logs become
 * its events (time, rendered body), its resource's attributes go with it. One
 * allocation per trace holds the arrays and the printed numbers. A store that
 * does not keep spans (SQLite decodes the slices on read) is never called.
 */
#include "coord_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NUM_TEXT 32 /* one printed number, NUL included */

static const char *value_text(const struct rt_value *v, char *buf)
{
	switch (v->type) {
	case RT_VAL_STR:
		return v->u.s ? v->u.s : "";
	case RT_VAL_INT:
		snprintf(buf, NUM_TEXT, "%" PRId64, v->u.i);
		return buf;
	case RT_VAL_DOUBLE:
		snprintf(buf, NUM_TEXT, "%.17g", v->u.d);
		return buf;
	case RT_VAL_BOOL:
		return v->u.b ? "true" : "false";
	default:
		return "";
	}
}

/* Everything one trace's spans point to, in one block. */
struct span_space {
	struct rt_store_span *spans;
	struct rt_store_kv *kv;     /* attributes and resource attributes */
	uint64_t *event_ns;
	const char **event_body;
	char *num;                  /* NUM_TEXT per attribute */
};

static void *carve(char **p, size_t n, size_t align)
{
	uintptr_t a = ((uintptr_t)*p + align - 1) & ~(uintptr_t)(align - 1);
	*p = (char *)a + n;
	return (void *)a;
}

static void *space_for(const struct rt_decoded_trace *dt, struct span_space *sp)
{
	size_t nkv = 0, nev = 0, bytes;
	char *block, *p;
	for (uint32_t i = 0; i < dt->n_spans; i++) {
		const struct rt_span *s = &dt->spans[i];
		nkv += s->n_attrs;
		if (s->resource < dt->n_resources)
			nkv += dt->resources[s->resource].n_attrs;
		nev += s->n_logs;
	}
	bytes = dt->n_spans * sizeof *sp->spans + nkv * sizeof *sp->kv +
		nev * (sizeof *sp->event_ns + sizeof *sp->event_body) + nkv * NUM_TEXT + 64;
	if (!(block = malloc(bytes)))
		return NULL;
	p = block;
	sp->spans = carve(&p, dt->n_spans * sizeof *sp->spans, 16);
	sp->kv = carve(&p, nkv * sizeof *sp->kv, 16);
	sp->event_ns = carve(&p, nev * sizeof *sp->event_ns, 16);
	sp->event_body = carve(&p, nev * sizeof *sp->event_body, 16);
	sp->num = carve(&p, nkv * NUM_TEXT, 1);
	return block;
}

static uint32_t put_attrs(struct rt_store_kv *kv, char **num, const struct rt_attr *a, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		kv[i].key = a[i].key ? a[i].key : "";
		kv[i].value = value_text(&a[i].value, *num);
		*num += NUM_TEXT;
	}
	return n;
}

int coord_store_spans(struct rt_coord *c, const struct rt_decoded_trace *dt)
{
	struct span_space sp;
	struct rt_store_kv *kv;
	uint64_t *ev_ns;
	const char **ev_body;
	char *num;
	void *block;
	int rc;
	if (!rt_store_wants_spans(c->store) || !dt->n_spans)
		return 0;
	if (!(block = space_for(dt, &sp)))
		return -1;
	kv = sp.kv, ev_ns = sp.event_ns, ev_body = sp.event_body, num = sp.num;
	for (uint32_t i = 0; i < dt->n_spans; i++) {
		const struct rt_span *s = &dt->spans[i];
		const struct rt_resource *res =
			s->resource < dt->n_resources ? &dt->resources[s->resource] : NULL;
		struct rt_store_span *o = &sp.spans[i];
		memset(o, 0, sizeof *o);
		o->trace_hi = s->trace_hi;
		o->trace_lo = s->trace_lo;
		o->span_id = s->span_id;
		o->parent_id = s->parent_id;
		o->start_ns = s->start_ns;
		o->end_ns = s->end_ns;
		o->name = s->name;
		o->service = res ? res->service : "unknown_service";
		o->status_message = s->status_message;
		o->kind = s->kind;
		o->status = s->status;
		o->attrs = kv;
		o->n_attrs = put_attrs(kv, &num, s->attrs, s->n_attrs);
		kv += o->n_attrs;
		o->resource = kv;
		o->n_resource = res ? put_attrs(kv, &num, res->attrs, res->n_attrs) : 0;
		kv += o->n_resource;
		o->event_ns = ev_ns;
		o->event_body = ev_body;
		o->n_events = s->n_logs;
		for (uint32_t k = 0; k < s->n_logs; k++) {
			*ev_ns++ = s->logs[k].time_ns;
			*ev_body++ = s->logs[k].body ? s->logs[k].body : "";
		}
	}
	rc = rt_store_put_spans(c->store, sp.spans, dt->n_spans);
	free(block);
	return rc;
}
