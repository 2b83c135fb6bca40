/*
 * shm/mpack_put.h — a tiny inline msgpack writer for the tracer's hot path (and
 * shm/event_put.h, the one encoder of tracer events).
 *
 * Owns: writing single msgpack tokens at a pointer into a region the caller has
 * already sized (retrace_reserve), returning the pointer past them. No bounds
 * checks here: the caller sizes the region with the *_size helpers first.
 * Why not msgpack-c's packer: it calls a write callback per token and cannot
 * write into a reserved bounded region without one; that costs more than an
 * event's whole budget (docs/client.md). Not installed.
 */
#ifndef RETRACE_SHM_MPACK_PUT_H
#define RETRACE_SHM_MPACK_PUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MP_U64_FIXED_SIZE 9u /* 0xcf + 8 bytes: ids and ticks */
#define MP_INT_MAX_SIZE 9u
#define MP_DOUBLE_SIZE 9u

static inline void mp_store_be64(uint8_t *p, uint64_t v)
{
	v = __builtin_bswap64(v);
	memcpy(p, &v, 8);
}

static inline void mp_store_be32(uint8_t *p, uint32_t v)
{
	v = __builtin_bswap32(v);
	memcpy(p, &v, 4);
}

static inline void mp_store_be16(uint8_t *p, uint16_t v)
{
	v = __builtin_bswap16(v);
	memcpy(p, &v, 2);
}

/* uint64 in the fixed 9-byte form (one store, no branch). */
static inline uint8_t *mp_put_u64_fixed(uint8_t *p, uint64_t v)
{
	p[0] = 0xcf;
	mp_store_be64(p + 1, v);
	return p + 9;
}

/* uint32 in the fixed 5-byte form. */
static inline uint8_t *mp_put_u32_fixed(uint8_t *p, uint32_t v)
{
	p[0] = 0xce;
	mp_store_be32(p + 1, v);
	return p + 5;
}

/* A non-negative integer in its smallest form. */
static inline uint8_t *mp_put_uint(uint8_t *p, uint64_t v)
{
	if (v < 128) {
		p[0] = (uint8_t)v;
		return p + 1;
	}
	if (v <= UINT8_MAX) {
		p[0] = 0xcc;
		p[1] = (uint8_t)v;
		return p + 2;
	}
	if (v <= UINT16_MAX) {
		p[0] = 0xcd;
		mp_store_be16(p + 1, (uint16_t)v);
		return p + 3;
	}
	if (v <= UINT32_MAX)
		return mp_put_u32_fixed(p, (uint32_t)v);
	return mp_put_u64_fixed(p, v);
}

/* A signed integer in its smallest form (non-negative values as unsigned). */
static inline uint8_t *mp_put_int(uint8_t *p, int64_t v)
{
	if (v >= 0)
		return mp_put_uint(p, (uint64_t)v);
	if (v >= -32) {
		p[0] = (uint8_t)(int8_t)v; /* negative fixint */
		return p + 1;
	}
	if (v >= INT8_MIN) {
		p[0] = 0xd0;
		p[1] = (uint8_t)(int8_t)v;
		return p + 2;
	}
	if (v >= INT16_MIN) {
		p[0] = 0xd1;
		mp_store_be16(p + 1, (uint16_t)(int16_t)v);
		return p + 3;
	}
	if (v >= INT32_MIN) {
		p[0] = 0xd2;
		mp_store_be32(p + 1, (uint32_t)(int32_t)v);
		return p + 5;
	}
	p[0] = 0xd3;
	mp_store_be64(p + 1, (uint64_t)v);
	return p + 9;
}

static inline uint8_t *mp_put_double(uint8_t *p, double d)
{
	uint64_t bits;
	memcpy(&bits, &d, sizeof bits);
	p[0] = 0xcb;
	mp_store_be64(p + 1, bits);
	return p + 9;
}

static inline uint8_t *mp_put_bool(uint8_t *p, int b)
{
	p[0] = b ? 0xc3 : 0xc2;
	return p + 1;
}

static inline uint8_t *mp_put_nil(uint8_t *p)
{
	p[0] = 0xc0;
	return p + 1;
}

/* Bytes of a str header for a string of n bytes (n <= 65535). */
static inline size_t mp_str_header_size(size_t n)
{
	return n < 32 ? 1 : n <= UINT8_MAX ? 2 : 3;
}

/* fixstr / str8 / str16: n <= 65535 (the tracer cuts at RETRACE_EV_MAX_STR). */
static inline uint8_t *mp_put_str(uint8_t *p, const char *s, size_t n)
{
	if (n < 32) {
		*p++ = (uint8_t)(0xa0 | n);
	} else if (n <= UINT8_MAX) {
		*p++ = 0xd9;
		*p++ = (uint8_t)n;
	} else {
		*p++ = 0xda;
		mp_store_be16(p, (uint16_t)n);
		p += 2;
	}
	memcpy(p, s, n);
	return p + n;
}

/* fixmap / map16 header (n <= 65535). */
static inline uint8_t *mp_put_map_header(uint8_t *p, uint32_t n)
{
	if (n < 16) {
		p[0] = (uint8_t)(0x80 | n);
		return p + 1;
	}
	p[0] = 0xde;
	mp_store_be16(p + 1, (uint16_t)n);
	return p + 3;
}

#endif
