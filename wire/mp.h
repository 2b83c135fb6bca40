/*
 * wire/mp.h — the one strict msgpack reader: a cursor over bytes someone else
 * wrote, for the daemon messages (wire/decode.c), the tracer events the
 * coordinator decodes (coordinator/decode_event.c) and those the agent's window
 * query reads (agent/window.c).
 *
 * Owns: how one msgpack object is read and checked. Each reader looks at the
 * object at the cursor where the caller expects a given kind, checks the format
 * byte (RT_WIRE_E_TYPE), then that a declared length or count is within the
 * caller's limit (RT_WIRE_E_TOO_BIG), then that the bytes are there
 * (RT_WIRE_E_TRUNCATED), and only then reads them and moves on. The first failed
 * check wins, in byte order, so every malformed input has one code (after an
 * error the cursor is not to be used). Nothing is read outside [p, p + n); nothing is
 * allocated (a str or bin points into the input); a container's declared count
 * reserves nothing. Why not msgpack-c's unpacker: docs/wire.md.
 */
#ifndef RETRACE_WIRE_MP_H
#define RETRACE_WIRE_MP_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h" /* the RT_WIRE_E_* codes */

struct rt_mp {
	const uint8_t *p;
	size_t n; /* input length */
	size_t i; /* next byte */
};

static inline size_t rt_mp_left(const struct rt_mp *c)
{
	return c->n - c->i;
}

/* An integer in [lo, hi] (hi <= INT64_MAX when lo < 0), in any msgpack integer
 * format its value fits: the value into *out (when >= 0) and *sout (both may be
 * NULL). Out of range is RT_WIRE_E_TYPE. */
int rt_mp_int(struct rt_mp *c, int64_t lo, uint64_t hi, uint64_t *out, int64_t *sout);
int rt_mp_u32(struct rt_mp *c, uint32_t *v);
int rt_mp_u64(struct rt_mp *c, uint64_t *v);
int rt_mp_i32(struct rt_mp *c, int32_t *v);

/* An array or map header; its count, at most max (RT_WIRE_E_TOO_BIG above). */
int rt_mp_array(struct rt_mp *c, uint32_t max, uint32_t *n);
int rt_mp_map(struct rt_mp *c, uint32_t max, uint32_t *n);

/* A str (is_bin = 0) or bin (is_bin = 1) of at most max bytes. */
int rt_mp_raw(struct rt_mp *c, int is_bin, uint64_t max, const uint8_t **p, uint32_t *len);

/* Any one object that is not a container (an array or map is RT_WIRE_E_TYPE at
 * its first byte, as is 0xc1, which msgpack never uses). */
enum rt_mp_kind {
	RT_MP_NIL,
	RT_MP_BOOL,
	RT_MP_UINT,  /* any integer >= 0, whatever its format: u */
	RT_MP_NEG,   /* any integer < 0: i */
	RT_MP_F32,   /* d (widened) */
	RT_MP_F64,   /* d */
	RT_MP_STR,   /* s, len: into the input */
	RT_MP_BIN,   /* s, len */
	RT_MP_EXT,   /* s, len: the data after the type byte */
};

struct rt_mp_obj {
	enum rt_mp_kind kind;
	union {
		uint64_t u;
		int64_t i;
		double d;
		int b;
	} v;
	const uint8_t *s;
	uint32_t len;
};

/* Strings, bins and exts longer than max are RT_WIRE_E_TOO_BIG. */
int rt_mp_scalar(struct rt_mp *c, uint64_t max, struct rt_mp_obj *o);

#endif
