/*
 * wire/mp.c — the strict msgpack reader (wire/mp.h).
 *
 * Every reader peeks at the format byte first and decides from it alone what
 * the object may be; widths come from the format byte, never from a table the
 * input could index out of. Lengths are compared with what is left before any
 * byte of the payload is touched.
 */
#include "mp.h"

#include <string.h>

static uint64_t be(const uint8_t *p, unsigned w)
{
	uint64_t v = 0;
	for (unsigned k = 0; k < w; k++)
		v = (v << 8) | p[k];
	return v;
}

/*
 * Read an integer in [lo, hi] (hi <= INT64_MAX when lo < 0). Any msgpack
 * integer format is accepted if its value fits; msgpack-c reads them the same.
 */
int rt_mp_int(struct rt_mp *c, int64_t lo, uint64_t hi, uint64_t *out, int64_t *sout)
{
	uint8_t b;
	unsigned w;
	int sign;
	uint64_t u;

	if (!rt_mp_left(c))
		return RT_WIRE_E_TRUNCATED;
	b = c->p[c->i];
	if (b <= 0x7f || b >= 0xe0) { /* positive / negative fixint */
		c->i++;
		if (b >= 0xe0) {
			int64_t v = (int8_t)b;
			if (v < lo)
				return RT_WIRE_E_TYPE;
			if (sout)
				*sout = v;
			return 0;
		}
		u = b;
		goto unsigned_value;
	}
	switch (b) {
	case 0xcc: w = 1; sign = 0; break;
	case 0xcd: w = 2; sign = 0; break;
	case 0xce: w = 4; sign = 0; break;
	case 0xcf: w = 8; sign = 0; break;
	case 0xd0: w = 1; sign = 1; break;
	case 0xd1: w = 2; sign = 1; break;
	case 0xd2: w = 4; sign = 1; break;
	case 0xd3: w = 8; sign = 1; break;
	default: return RT_WIRE_E_TYPE;
	}
	if (rt_mp_left(c) < 1 + (size_t)w)
		return RT_WIRE_E_TRUNCATED;
	u = be(c->p + c->i + 1, w);
	c->i += 1 + w;
	if (sign) {
		int64_t v;
		/* sign-extend from w bytes */
		if (w < 8 && (u >> (8 * w - 1)) & 1)
			u |= ~(uint64_t)0 << (8 * w);
		memcpy(&v, &u, sizeof v);
		if (v < 0) {
			if (v < lo)
				return RT_WIRE_E_TYPE;
			if (sout)
				*sout = v;
			return 0;
		}
	}
unsigned_value:
	if (u > hi)
		return RT_WIRE_E_TYPE;
	if (out)
		*out = u;
	if (sout)
		*sout = (int64_t)u;
	return 0;
}

int rt_mp_u32(struct rt_mp *c, uint32_t *v)
{
	uint64_t u;
	int rc = rt_mp_int(c, 0, UINT32_MAX, &u, NULL);
	if (!rc)
		*v = (uint32_t)u;
	return rc;
}

int rt_mp_u64(struct rt_mp *c, uint64_t *v)
{
	return rt_mp_int(c, 0, UINT64_MAX, v, NULL);
}

int rt_mp_i32(struct rt_mp *c, int32_t *v)
{
	int64_t s;
	int rc = rt_mp_int(c, INT32_MIN, INT32_MAX, NULL, &s);
	if (!rc)
		*v = (int32_t)s;
	return rc;
}

/* Array (is_map = 0) or map header; count checked against [0, max] (TOO_BIG above). */
static int rd_header(struct rt_mp *c, int is_map, uint32_t max, uint32_t *n)
{
	uint8_t b;
	unsigned w;
	uint64_t v;

	if (!rt_mp_left(c))
		return RT_WIRE_E_TRUNCATED;
	b = c->p[c->i];
	if (b >= (is_map ? 0x80 : 0x90) && b <= (is_map ? 0x8f : 0x9f)) {
		v = b & 0x0f;
		w = 0;
	} else if (b == (is_map ? 0xde : 0xdc) || b == (is_map ? 0xdf : 0xdd)) {
		w = b == (is_map ? 0xde : 0xdc) ? 2 : 4;
		if (rt_mp_left(c) < 1 + (size_t)w)
			return RT_WIRE_E_TRUNCATED;
		v = be(c->p + c->i + 1, w);
	} else {
		return RT_WIRE_E_TYPE;
	}
	if (v > max)
		return RT_WIRE_E_TOO_BIG;
	c->i += 1 + w;
	*n = (uint32_t)v;
	return 0;
}

/* str (is_bin = 0) or bin (is_bin = 1) of at most max bytes. */
int rt_mp_raw(struct rt_mp *c, int is_bin, uint64_t max, const uint8_t **p, uint32_t *len)
{
	uint8_t b;
	unsigned w;
	uint64_t v;

	if (!rt_mp_left(c))
		return RT_WIRE_E_TRUNCATED;
	b = c->p[c->i];
	if (!is_bin && b >= 0xa0 && b <= 0xbf) {
		v = b & 0x1f;
		w = 0;
	} else {
		switch (b) {
		case 0xd9: w = is_bin ? 0 : 1; break;
		case 0xda: w = is_bin ? 0 : 2; break;
		case 0xdb: w = is_bin ? 0 : 4; break;
		case 0xc4: w = is_bin ? 1 : 0; break;
		case 0xc5: w = is_bin ? 2 : 0; break;
		case 0xc6: w = is_bin ? 4 : 0; break;
		default: w = 0; break;
		}
		if (!w)
			return RT_WIRE_E_TYPE;
		if (rt_mp_left(c) < 1 + (size_t)w)
			return RT_WIRE_E_TRUNCATED;
		v = be(c->p + c->i + 1, w);
	}
	if (v > max)
		return RT_WIRE_E_TOO_BIG;
	if (rt_mp_left(c) - 1 - w < v)
		return RT_WIRE_E_TRUNCATED;
	*p = c->p + c->i + 1 + w;
	*len = (uint32_t)v;
	c->i += 1 + w + (size_t)v;
	return 0;
}


int rt_mp_array(struct rt_mp *c, uint32_t max, uint32_t *n)
{
	return rd_header(c, 0, max, n);
}

int rt_mp_map(struct rt_mp *c, uint32_t max, uint32_t *n)
{
	return rd_header(c, 1, max, n);
}

/* The payload of a str, bin or ext after a length of w bytes (w = 0: fixed
 * length `fixed`); ext's type byte is skipped and not returned. */
static int rd_payload(struct rt_mp *c, unsigned w, uint64_t fixed, unsigned type_byte, uint64_t max,
		      struct rt_mp_obj *o)
{
	uint64_t v = fixed;
	size_t head;
	if (rt_mp_left(c) < 1 + (size_t)w)
		return RT_WIRE_E_TRUNCATED;
	if (w)
		v = be(c->p + c->i + 1, w);
	if (v > max)
		return RT_WIRE_E_TOO_BIG;
	head = 1 + w + type_byte;
	if (rt_mp_left(c) < head || rt_mp_left(c) - head < v)
		return RT_WIRE_E_TRUNCATED;
	o->s = c->p + c->i + head;
	o->len = (uint32_t)v;
	c->i += head + (size_t)v;
	return 0;
}

int rt_mp_scalar(struct rt_mp *c, uint64_t max, struct rt_mp_obj *o)
{
	uint8_t b;
	memset(o, 0, sizeof *o);
	if (!rt_mp_left(c))
		return RT_WIRE_E_TRUNCATED;
	b = c->p[c->i];
	if (b <= 0x7f || b >= 0xe0 || (b >= 0xcc && b <= 0xd3)) {
		int64_t s;
		int rc = rt_mp_int(c, INT64_MIN, UINT64_MAX, &o->v.u, &s);
		if (rc)
			return rc;
		if (s < 0 && !(b <= 0x7f || (b >= 0xcc && b <= 0xcf))) {
			o->kind = RT_MP_NEG;
			o->v.i = s;
		} else {
			o->kind = RT_MP_UINT;
		}
		return 0;
	}
	if (b >= 0xa0 && b <= 0xbf) {
		o->kind = RT_MP_STR;
		return rd_payload(c, 0, b & 0x1f, 0, max, o);
	}
	switch (b) {
	case 0xc0:
		o->kind = RT_MP_NIL;
		c->i++;
		return 0;
	case 0xc2:
	case 0xc3:
		o->kind = RT_MP_BOOL;
		o->v.b = b == 0xc3;
		c->i++;
		return 0;
	case 0xca:
	case 0xcb: {
		unsigned w = b == 0xca ? 4 : 8;
		uint64_t bits;
		if (rt_mp_left(c) < 1 + (size_t)w)
			return RT_WIRE_E_TRUNCATED;
		bits = be(c->p + c->i + 1, w);
		if (w == 4) {
			uint32_t b32 = (uint32_t)bits;
			float f;
			memcpy(&f, &b32, sizeof f);
			o->kind = RT_MP_F32;
			o->v.d = f;
		} else {
			memcpy(&o->v.d, &bits, sizeof o->v.d);
			o->kind = RT_MP_F64;
		}
		c->i += 1 + w;
		return 0;
	}
	case 0xd9: o->kind = RT_MP_STR; return rd_payload(c, 1, 0, 0, max, o);
	case 0xda: o->kind = RT_MP_STR; return rd_payload(c, 2, 0, 0, max, o);
	case 0xdb: o->kind = RT_MP_STR; return rd_payload(c, 4, 0, 0, max, o);
	case 0xc4: o->kind = RT_MP_BIN; return rd_payload(c, 1, 0, 0, max, o);
	case 0xc5: o->kind = RT_MP_BIN; return rd_payload(c, 2, 0, 0, max, o);
	case 0xc6: o->kind = RT_MP_BIN; return rd_payload(c, 4, 0, 0, max, o);
	case 0xc7: o->kind = RT_MP_EXT; return rd_payload(c, 1, 0, 1, max, o);
	case 0xc8: o->kind = RT_MP_EXT; return rd_payload(c, 2, 0, 1, max, o);
	case 0xc9: o->kind = RT_MP_EXT; return rd_payload(c, 4, 0, 1, max, o);
	case 0xd4: o->kind = RT_MP_EXT; return rd_payload(c, 0, 1, 1, max, o);
	case 0xd5: o->kind = RT_MP_EXT; return rd_payload(c, 0, 2, 1, max, o);
	case 0xd6: o->kind = RT_MP_EXT; return rd_payload(c, 0, 4, 1, max, o);
	case 0xd7: o->kind = RT_MP_EXT; return rd_payload(c, 0, 8, 1, max, o);
	case 0xd8: o->kind = RT_MP_EXT; return rd_payload(c, 0, 16, 1, max, o);
	default: /* a container, or 0xc1 */
		return RT_WIRE_E_TYPE;
	}
}
