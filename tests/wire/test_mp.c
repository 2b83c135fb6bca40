/*
 * tests/wire/test_mp.c — the strict msgpack reader (wire/mp.h) against msgpack-c,
 * independently written: for every format byte, with random payloads, each cut
 * short at every length, the reader accepts exactly what msgpack-c's unpacker
 * accepts as one scalar object, of the same kind and value, using the same bytes;
 * a container is refused at its first byte; and map/array headers and integer
 * ranges give their codes.
 */
#include <check.h>
#include <msgpack.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/suite.h"
#include "wire/mp.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

static int is_container(uint8_t b)
{
	return (b >= 0x80 && b <= 0x9f) || (b >= 0xdc && b <= 0xdf);
}

/* Compare one input: the reader and msgpack-c must agree. */
static void agree(const uint8_t *buf, size_t len)
{
	struct rt_mp c = { buf, len, 0 };
	struct rt_mp_obj o;
	msgpack_unpacked u;
	size_t off = 0;
	msgpack_unpack_return mrc;
	int rc = rt_mp_scalar(&c, UINT64_MAX, &o);

	if (len && is_container(buf[0])) {
		ck_assert_int_eq(rc, RT_WIRE_E_TYPE);
		return;
	}
	msgpack_unpacked_init(&u);
	mrc = msgpack_unpack_next(&u, (const char *)buf, len, &off);
	if (mrc != MSGPACK_UNPACK_SUCCESS && mrc != MSGPACK_UNPACK_EXTRA_BYTES) {
		ck_assert_msg(rc != 0, "format 0x%02x len %zu: msgpack-c refuses, reader took it",
			      len ? buf[0] : 0, len);
		ck_assert_int_eq(rc, mrc == MSGPACK_UNPACK_CONTINUE ? RT_WIRE_E_TRUNCATED
								  : RT_WIRE_E_TYPE);
		msgpack_unpacked_destroy(&u);
		return;
	}
	ck_assert_msg(rc == 0, "format 0x%02x len %zu: msgpack-c reads it, reader says %d", buf[0],
		      len, rc);
	ck_assert_uint_eq(c.i, off);
	switch (u.data.type) {
	case MSGPACK_OBJECT_NIL: ck_assert_int_eq(o.kind, RT_MP_NIL); break;
	case MSGPACK_OBJECT_BOOLEAN:
		ck_assert_int_eq(o.kind, RT_MP_BOOL);
		ck_assert_int_eq(o.v.b, u.data.via.boolean);
		break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		ck_assert_int_eq(o.kind, RT_MP_UINT);
		ck_assert_uint_eq(o.v.u, u.data.via.u64);
		break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		ck_assert_int_eq(o.kind, RT_MP_NEG);
		ck_assert_int_eq(o.v.i, u.data.via.i64);
		break;
	case MSGPACK_OBJECT_FLOAT32:
		ck_assert_int_eq(o.kind, RT_MP_F32);
		ck_assert(memcmp(&o.v.d, &u.data.via.f64, sizeof o.v.d) == 0 ||
			  (o.v.d != o.v.d && u.data.via.f64 != u.data.via.f64));
		break;
	case MSGPACK_OBJECT_FLOAT64:
		ck_assert_int_eq(o.kind, RT_MP_F64);
		ck_assert(memcmp(&o.v.d, &u.data.via.f64, sizeof o.v.d) == 0);
		break;
	case MSGPACK_OBJECT_STR:
		ck_assert_int_eq(o.kind, RT_MP_STR);
		ck_assert_uint_eq(o.len, u.data.via.str.size);
		ck_assert(o.len == 0 || memcmp(o.s, u.data.via.str.ptr, o.len) == 0);
		break;
	case MSGPACK_OBJECT_BIN:
		ck_assert_int_eq(o.kind, RT_MP_BIN);
		ck_assert_uint_eq(o.len, u.data.via.bin.size);
		ck_assert(o.len == 0 || memcmp(o.s, u.data.via.bin.ptr, o.len) == 0);
		break;
	case MSGPACK_OBJECT_EXT:
		ck_assert_int_eq(o.kind, RT_MP_EXT);
		ck_assert_uint_eq(o.len, u.data.via.ext.size);
		ck_assert(o.len == 0 || memcmp(o.s, u.data.via.ext.ptr, o.len) == 0);
		break;
	default: ck_abort_msg("msgpack-c type %d", (int)u.data.type);
	}
	msgpack_unpacked_destroy(&u);
}

START_TEST(scalars_agree_with_msgpack_c)
{
	uint8_t buf[64];
	for (int b = 0; b < 256; b++) {
		for (int round = 0; round < 16; round++) {
			size_t len;
			buf[0] = (uint8_t)b;
			for (size_t k = 1; k < sizeof buf; k++)
				buf[k] = (uint8_t)rnd();
			/* Short lengths so that declared lengths often fit. */
			if (b == 0xc4 || b == 0xc7 || b == 0xd9)
				buf[1] = (uint8_t)(rnd() % 40);
			if (b == 0xc5 || b == 0xc8 || b == 0xda) {
				buf[1] = 0;
				buf[2] = (uint8_t)(rnd() % 40);
			}
			if (b == 0xc6 || b == 0xc9 || b == 0xdb) {
				buf[1] = buf[2] = buf[3] = 0;
				buf[4] = (uint8_t)(rnd() % 40);
			}
			for (len = 0; len <= sizeof buf; len++)
				agree(buf, len);
		}
	}
}
END_TEST

START_TEST(ranges_and_headers)
{
	static const uint8_t neg[] = { 0xd0, 0x80 }, big[] = { 0xcf, 0xff, 0xff, 0xff, 0xff,
								0xff, 0xff, 0xff, 0xff };
	static const uint8_t map16[] = { 0xde, 0x01, 0x00 }, arr[] = { 0x93 };
	struct rt_mp c;
	uint64_t u;
	int64_t s;
	uint32_t n;
	int32_t i32;

	c = (struct rt_mp){ neg, sizeof neg, 0 };
	ck_assert_int_eq(rt_mp_int(&c, 0, UINT64_MAX, &u, NULL), RT_WIRE_E_TYPE);
	c = (struct rt_mp){ neg, sizeof neg, 0 };
	ck_assert_int_eq(rt_mp_i32(&c, &i32), 0);
	ck_assert_int_eq(i32, -128);
	c = (struct rt_mp){ big, sizeof big, 0 };
	ck_assert_int_eq(rt_mp_u32(&c, (uint32_t *)&n), RT_WIRE_E_TYPE);
	c = (struct rt_mp){ big, sizeof big, 0 };
	ck_assert_int_eq(rt_mp_int(&c, INT64_MIN, INT64_MAX, NULL, &s), RT_WIRE_E_TYPE);
	c = (struct rt_mp){ big, sizeof big, 0 };
	ck_assert_int_eq(rt_mp_u64(&c, &u), 0);
	ck_assert_uint_eq(u, UINT64_MAX);

	c = (struct rt_mp){ map16, sizeof map16, 0 };
	ck_assert_int_eq(rt_mp_map(&c, 255, &n), RT_WIRE_E_TOO_BIG);
	c = (struct rt_mp){ map16, sizeof map16, 0 };
	ck_assert_int_eq(rt_mp_array(&c, UINT32_MAX, &n), RT_WIRE_E_TYPE);
	c = (struct rt_mp){ map16, sizeof map16, 0 };
	ck_assert_int_eq(rt_mp_map(&c, 256, &n), 0);
	ck_assert_uint_eq(n, 256);
	ck_assert_uint_eq(c.i, 3);
	c = (struct rt_mp){ map16, 2, 0 };
	ck_assert_int_eq(rt_mp_map(&c, UINT32_MAX, &n), RT_WIRE_E_TRUNCATED);
	c = (struct rt_mp){ arr, sizeof arr, 0 };
	ck_assert_int_eq(rt_mp_map(&c, UINT32_MAX, &n), RT_WIRE_E_TYPE);
	c = (struct rt_mp){ arr, sizeof arr, 0 };
	ck_assert_int_eq(rt_mp_array(&c, 3, &n), 0);
	ck_assert_uint_eq(n, 3);
}
END_TEST

START_TEST(long_strings_are_too_big_before_truncated)
{
	static const uint8_t str32[] = { 0xdb, 0xff, 0xff, 0xff, 0xff, 'a' };
	struct rt_mp c = { str32, sizeof str32, 0 };
	struct rt_mp_obj o;
	ck_assert_int_eq(rt_mp_scalar(&c, 1000, &o), RT_WIRE_E_TOO_BIG);
	c.i = 0;
	ck_assert_int_eq(rt_mp_scalar(&c, UINT64_MAX, &o), RT_WIRE_E_TRUNCATED);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("wire_mp");
	TCase *tc = tcase_create("mp");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, scalars_agree_with_msgpack_c);
	tcase_add_test(tc, ranges_and_headers);
	tcase_add_test(tc, long_strings_are_too_big_before_truncated);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
