/*
 * coordinator/decode_event.c — one tracer event record (shm/events.h) into a
 * struct event: each type's fields in order, each of its exact kind and within
 * its limits, nothing after them.
 */
#include "decode_internal.h"

#include <stdlib.h>
#include <string.h>

#include "retrace/tracer.h"
#include "shm/events.h"
#include "wire/mp.h"

/* ------------------------------------------------ event field reader ---- */

/*
 * Fields are read with the strict msgpack reader (wire/mp.h) one object at a
 * time: a container is never a valid field, so only scalars are read, except
 * RESOURCE's map, whose header is read on its own and its keys and values one
 * by one. Nothing is allocated for an object; a string is copied to the arena
 * only once it is known to be valid.
 */
static int rd_obj(struct rt_mp *r, struct rt_mp_obj *o)
{
	return rt_mp_scalar(r, RETRACE_EV_MAX_STR, o) ? -1 : 0;
}

static int rd_uint(struct rt_mp *r, uint64_t max, uint64_t *v)
{
	struct rt_mp_obj o;
	if (rd_obj(r, &o) != 0 || o.kind != RT_MP_UINT || o.v.u > max)
		return -1;
	*v = o.v.u;
	return 0;
}

static int obj_int64(const struct rt_mp_obj *o, int64_t *v)
{
	if (o->kind == RT_MP_NEG) {
		*v = o->v.i;
		return 0;
	}
	if (o->kind == RT_MP_UINT && o->v.u <= (uint64_t)INT64_MAX) {
		*v = (int64_t)o->v.u;
		return 0;
	}
	return -1;
}

static int rd_int(struct rt_mp *r, int64_t *v)
{
	struct rt_mp_obj o;
	return rd_obj(r, &o) == 0 ? obj_int64(&o, v) : -1;
}

/* A str of at most RETRACE_EV_MAX_STR bytes with no NUL (it becomes a C string). */
static const char *obj_str(struct arena *a, const struct rt_mp_obj *o)
{
	if (o->kind != RT_MP_STR || o->len > RETRACE_EV_MAX_STR ||
	    (o->len && memchr(o->s, 0, o->len)))
		return NULL;
	return rt_dec_strndup(a, (const char *)o->s, o->len);
}

static const char *rd_str(struct rt_mp *r, struct arena *a)
{
	struct rt_mp_obj o;
	return rd_obj(r, &o) == 0 ? obj_str(a, &o) : NULL;
}

/*
 * A value: str | int | float64 | bool (| nil when allow_nil). `wide` accepts
 * integers up to UINT64_MAX (a log argument of an unsigned conversion), kept
 * as their bit pattern in the int64. A float32 is not a value (the client
 * writes doubles).
 */
static int obj_value(struct arena *a, const struct rt_mp_obj *o, int allow_nil, int wide,
		     struct rt_value *v)
{
	memset(v, 0, sizeof *v);
	switch (o->kind) {
	case RT_MP_STR:
		v->type = RT_VAL_STR;
		return (v->u.s = obj_str(a, o)) ? 0 : -1;
	case RT_MP_UINT:
		v->type = RT_VAL_INT;
		if (wide) {
			v->u.i = (int64_t)o->v.u;
			return 0;
		}
		return obj_int64(o, &v->u.i);
	case RT_MP_NEG:
		v->type = RT_VAL_INT;
		v->u.i = o->v.i;
		return 0;
	case RT_MP_F64:
		v->type = RT_VAL_DOUBLE;
		v->u.d = o->v.d;
		return 0;
	case RT_MP_BOOL:
		v->type = RT_VAL_BOOL;
		v->u.b = o->v.b ? 1 : 0;
		return 0;
	case RT_MP_NIL:
		v->type = RT_VAL_NONE;
		return allow_nil ? 0 : -1;
	default:
		return -1;
	}
}

static int rd_value(struct rt_mp *r, struct arena *a, int allow_nil, int wide, struct rt_value *v)
{
	struct rt_mp_obj o;
	return rd_obj(r, &o) == 0 ? obj_value(a, &o, allow_nil, wide, v) : -1;
}

/* -------------------------------------------------------- the events ---- */


static int ev_span_start(struct rt_mp *r, struct arena *a, struct event *e)
{
	uint64_t kind;
	if (rd_uint(r, UINT64_MAX, &e->span_id) || !e->span_id ||
	    rd_uint(r, UINT64_MAX, &e->parent_id) || rd_uint(r, UINT8_MAX, &kind) ||
	    rd_uint(r, UINT64_MAX, &e->tick) || !(e->str = rd_str(r, a)))
		return -1;
	e->kind = (uint8_t)kind; /* a kind above CONSUMER is kept as written (the
				    client takes any uint8): the span and its
				    start are real, only the kind is unknown */
	e->p16 = RT_SPAN_P16_ALWAYS;
	if (r->i < r->n) { /* kept by the policy table with p16 / 65535 < 1 */
		uint64_t p16;
		if (rd_uint(r, RT_SPAN_P16_ALWAYS - 1, &p16))
			return -1;
		e->p16 = (uint16_t)p16;
	}
	return 0;
}

static int ev_span_end(struct rt_mp *r, struct arena *a, struct event *e)
{
	uint64_t status;
	if (rd_uint(r, UINT64_MAX, &e->span_id) || !e->span_id || rd_uint(r, UINT64_MAX, &e->tick) ||
	    rd_uint(r, RETRACE_STATUS_ERROR, &status))
		return -1;
	e->status = (uint8_t)status;
	e->message = "";
	if (status == RETRACE_STATUS_ERROR &&
	    (rd_int(r, &e->code) || !(e->message = rd_str(r, a))))
		return -1;
	if (r->i < r->n && (rd_int(r, &e->adj) || e->adj == 0))
		return -1; /* the client writes adj only when it is not 0 */
	return 0;
}

static int ev_attr(struct rt_mp *r, struct arena *a, struct event *e)
{
	if (rd_uint(r, UINT64_MAX, &e->span_id) || !e->span_id || !(e->str = rd_str(r, a)))
		return -1;
	return rd_value(r, a, 0, 0, &e->value);
}

static int ev_log(struct rt_mp *r, struct arena *a, struct event *e)
{
	struct rt_value args[RETRACE_EV_MAX_ARGS];
	uint64_t level;
	uint32_t n = 0;
	if (rd_uint(r, UINT64_MAX, &e->span_id) || rd_uint(r, UINT64_MAX, &e->tick) ||
	    rd_uint(r, RETRACE_LOG_ERROR, &level) || rd_uint(r, UINT64_MAX, &e->template_id) ||
	    !e->template_id)
		return -1;
	e->level = (uint8_t)level;
	while (r->i < r->n) {
		if (n == RETRACE_EV_MAX_ARGS || rd_value(r, a, 1, 1, &args[n]) != 0)
			return -1;
		n++;
	}
	if (n && !(e->args = rt_dec_alloc(a, n * sizeof *args)))
		return -1;
	if (n)
		memcpy(e->args, args, n * sizeof *args);
	e->n_args = n;
	return 0;
}

static int ev_log_text(struct rt_mp *r, struct arena *a, struct event *e)
{
	uint64_t level;
	struct rt_mp_obj text;
	if (rd_uint(r, UINT64_MAX, &e->span_id) || rd_uint(r, UINT64_MAX, &e->tick) ||
	    rd_uint(r, RETRACE_LOG_ERROR, &level) || rd_obj(r, &text) != 0 ||
	    !(e->str = obj_str(a, &text)))
		return -1;
	e->str_len = (uint32_t)text.len; /* selection's Drain need not measure it again */
	e->level = (uint8_t)level;
	return 0;
}

static int ev_template(struct rt_mp *r, struct arena *a, struct event *e)
{
	if (rd_uint(r, UINT64_MAX, &e->template_id) || !e->template_id || !(e->str = rd_str(r, a)))
		return -1;
	return 0;
}

static int ev_resource(struct rt_mp *r, struct arena *a, struct event *e)
{
	uint64_t pid;
	uint32_t n, i;
	struct rt_mp_obj key;
	if (rd_uint(r, UINT32_MAX, &pid) || rt_mp_map(r, UINT32_MAX, &n) || n > RETRACE_EV_MAX_RESOURCE)
		return -1;
	e->pid = (uint32_t)pid;
	if (n && !(e->attrs = rt_dec_alloc(a, n * sizeof *e->attrs)))
		return -1;
	for (i = 0; i < n; i++) {
		if (rd_obj(r, &key) || !(e->attrs[i].key = obj_str(a, &key)) ||
		    rd_value(r, a, 0, 0, &e->attrs[i].value))
			return -1;
	}
	e->n_attrs = n;
	return 0;
}

static int ev_trigger(struct rt_mp *r, struct arena *a, struct event *e)
{
	uint64_t id;
	if (rd_uint(r, UINT32_MAX, &id) || id == 0 || !(e->str = rd_str(r, a)) ||
	    !retrace_event_trigger_name_ok(e->str, strlen(e->str)))
		return -1;
	e->template_id = id;
	return 0;
}

/*
 * Decode one record as an event. Returns 1 (event), 0 (not an event: a raw
 * record) or -1 (an event whose fields do not decode exactly).
 */
int rt_dec_event(struct build *b, const uint8_t *rec, size_t len, struct event *e)
{
	struct rt_mp r = { rec, len, 2 };
	int rc;
	if (len < 2 || rec[0] != RETRACE_EVENT_MAGIC || rec[1] < 1 || rec[1] > RETRACE_EV_MAX)
		return 0;
	memset(e, 0, sizeof *e);
	e->type = rec[1];
	switch (e->type) {
	case RETRACE_EV_SPAN_START: rc = ev_span_start(&r, b->out, e); break;
	case RETRACE_EV_SPAN_END: rc = ev_span_end(&r, b->out, e); break;
	case RETRACE_EV_ATTR: rc = ev_attr(&r, b->out, e); break;
	case RETRACE_EV_LOG: rc = ev_log(&r, b->out, e); break;
	case RETRACE_EV_LOG_TEXT: rc = ev_log_text(&r, b->out, e); break;
	case RETRACE_EV_TEMPLATE: rc = ev_template(&r, b->out, e); break;
	case RETRACE_EV_TRIGGER: rc = ev_trigger(&r, b->out, e); break;
	default: rc = ev_resource(&r, b->out, e); break;
	}
	if (rc != 0 || r.i != r.n) /* trailing bytes are corrupt too */
		return -1;
	return 1;
}

