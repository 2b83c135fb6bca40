/*
 * shm/event_put.h — the one encoder of tracer events (shm/events.h), for every
 * writer of the format: the client's tracer (client/tracer.c, on its hot path)
 * and the coordinator's weaver (coordinator/weave.c, which stores ATTR events
 * of its own beside the spans it links).
 *
 * Owns: the byte layout of an event's head and of the events written by more
 * than one writer (ATTR, RESOURCE), in two layers:
 *
 *   - rt_ev_put_*: inline writers at a pointer into a region the caller has
 *     already sized (with the *_SIZE bounds below), returning the pointer past
 *     what they wrote; no checks, no branches beyond msgpack's own. The client
 *     writes into its reserved ring space with these, so the hot path costs what
 *     it cost when the tracer wrote the bytes itself (same inline code).
 *   - rt_ev_buf: a bounded buffer of framed records (shm/frame.h: host-order
 *     word (len << 4 | VALID), then the record; a zero word ends the payload) for
 *     writers off the hot path that build a whole payload at once. A record that
 *     does not fit is not written and sets `overflow`: the payload so far stays
 *     well formed.
 *
 * Promises: every byte sequence written here decodes with coordinator/decode.c
 * exactly as the client's did (tests/shm test_event_put checks both layers
 * against the decoder's reading of the format).
 */
#ifndef RETRACE_SHM_EVENT_PUT_H
#define RETRACE_SHM_EVENT_PUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "retrace/retrace.h"
#include "shm/events.h"
#include "shm/mpack_put.h"

#define RT_EV_HEAD_SIZE 2u /* 0xC1 TYPE */
/* Bound of an ATTR event whose key has kn bytes (kn <= 65535) and whose value
 * takes at most value_bound bytes. */
#define RT_EV_ATTR_SIZE(kn, value_bound) \
	(RT_EV_HEAD_SIZE + MP_U64_FIXED_SIZE + 3u + (kn) + (value_bound))

static inline uint8_t *rt_ev_put_head(uint8_t *p, enum retrace_event_type type)
{
	p[0] = RETRACE_EVENT_MAGIC;
	p[1] = (uint8_t)type;
	return p + RT_EV_HEAD_SIZE;
}

/* ATTR up to its value: head, span id (fixed 9 bytes), key. The caller writes
 * the value with one mp_put_str / mp_put_int / mp_put_double / mp_put_bool. */
static inline uint8_t *rt_ev_put_attr_head(uint8_t *p, uint64_t span_id, const char *key,
					   size_t kn)
{
	p = rt_ev_put_head(p, RETRACE_EV_ATTR);
	p = mp_put_u64_fixed(p, span_id);
	return mp_put_str(p, key, kn);
}

/* RESOURCE up to its attributes: head, pid (fixed 5 bytes), a map header of n
 * entries (n <= 15, a fixmap; RETRACE_EV_MAX_RESOURCE is 32, so larger maps use
 * map16). The caller writes n key/value pairs. */
#define RT_EV_RESOURCE_HEAD_SIZE (RT_EV_HEAD_SIZE + 5u + 3u)
static inline uint8_t *rt_ev_put_resource_head(uint8_t *p, uint32_t pid, uint32_t n)
{
	p = rt_ev_put_head(p, RETRACE_EV_RESOURCE);
	p = mp_put_u32_fixed(p, pid);
	return mp_put_map_header(p, n);
}

/* ------------------------------------------------ framed payload buffer ---- */

struct rt_ev_buf {
	uint8_t *data;
	size_t len, cap;
	int overflow; /* a record did not fit (not written) */
};

static inline void rt_ev_buf_init(struct rt_ev_buf *b, uint8_t *data, size_t cap)
{
	b->data = data;
	b->len = 0;
	b->cap = cap;
	b->overflow = 0;
}

/* Room for a record of at most bound bytes and its frame word: where to write
 * the record, or NULL (overflow set). Finish with rt_ev_buf_commit. */
static inline uint8_t *rt_ev_buf_reserve(struct rt_ev_buf *b, size_t bound)
{
	if (bound > (UINT32_MAX >> 4) || b->cap - b->len < 4 + bound + 4) { /* + end mark */
		b->overflow = 1;
		return NULL;
	}
	return b->data + b->len + 4;
}

static inline void rt_ev_buf_commit(struct rt_ev_buf *b, const uint8_t *end)
{
	uint8_t *rec = b->data + b->len + 4;
	uint32_t word = (uint32_t)(end - rec) << 4 | RETRACE_FRAME_VALID;
	memcpy(b->data + b->len, &word, sizeof word);
	b->len += 4 + (size_t)(end - rec);
}

/* The zero end mark (room for it is kept by every reserve). */
static inline void rt_ev_buf_end(struct rt_ev_buf *b)
{
	memset(b->data + b->len, 0, 4);
	b->len += 4;
}

/* An ATTR record up to its value (the caller writes the value, at most
 * value_bound bytes, and commits), or NULL: it does not fit (overflow set). */
static inline uint8_t *rt_ev_buf_attr(struct rt_ev_buf *b, uint64_t span_id, const char *key,
				      size_t value_bound)
{
	size_t kn = strlen(key);
	uint8_t *p;
	if (kn > RETRACE_EV_MAX_STR || value_bound > RETRACE_EV_MAX_STR + 3) {
		b->overflow = 1;
		return NULL;
	}
	p = rt_ev_buf_reserve(b, RT_EV_ATTR_SIZE(kn, value_bound));
	return p ? rt_ev_put_attr_head(p, span_id, key, kn) : NULL;
}

static inline void rt_ev_buf_attr_str(struct rt_ev_buf *b, uint64_t span_id, const char *key,
				      const char *value)
{
	size_t vn = strlen(value);
	uint8_t *p = rt_ev_buf_attr(b, span_id, key, 3 + vn);
	if (p)
		rt_ev_buf_commit(b, mp_put_str(p, value, vn));
}

static inline void rt_ev_buf_attr_double(struct rt_ev_buf *b, uint64_t span_id, const char *key,
					 double value)
{
	uint8_t *p = rt_ev_buf_attr(b, span_id, key, MP_DOUBLE_SIZE);
	if (p)
		rt_ev_buf_commit(b, mp_put_double(p, value));
}

static inline void rt_ev_buf_attr_bool(struct rt_ev_buf *b, uint64_t span_id, const char *key,
				       int value)
{
	uint8_t *p = rt_ev_buf_attr(b, span_id, key, 1);
	if (p)
		rt_ev_buf_commit(b, mp_put_bool(p, value));
}

/* RESOURCE with one string attribute per (keys[i], values[i]), n <= 15. */
static inline void rt_ev_buf_resource(struct rt_ev_buf *b, uint32_t pid, const char *const *keys,
				      const char *const *values, uint32_t n)
{
	size_t bound = RT_EV_RESOURCE_HEAD_SIZE;
	uint32_t i;
	uint8_t *p;
	for (i = 0; i < n; i++) {
		size_t kn = strlen(keys[i]), vn = strlen(values[i]);
		if (kn > RETRACE_EV_MAX_STR || vn > RETRACE_EV_MAX_STR || n > 15) {
			b->overflow = 1;
			return;
		}
		bound += 6 + kn + vn;
	}
	if (!(p = rt_ev_buf_reserve(b, bound)))
		return;
	p = rt_ev_put_resource_head(p, pid, n);
	for (i = 0; i < n; i++) {
		p = mp_put_str(p, keys[i], strlen(keys[i]));
		p = mp_put_str(p, values[i], strlen(values[i]));
	}
	rt_ev_buf_commit(b, p);
}

#endif
