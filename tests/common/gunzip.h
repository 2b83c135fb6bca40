/*
 * tests/common/gunzip.h — inflate a gzip body (what an OTLP push sends) for the
 * tests' HTTP collectors: a malloc'd copy, NUL-terminated (so it can be searched
 * as text), its length in *out_len (may be NULL); NULL if it is not gzip.
 * Needs zlib (ZLIB::ZLIB).
 */
#ifndef RETRACE_TESTS_GUNZIP_H
#define RETRACE_TESTS_GUNZIP_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

static inline char *test_gunzip(const void *in, size_t len, size_t *out_len)
{
	z_stream zs;
	size_t cap = len * 8 + 1024;
	char *out = malloc(cap), *bigger;
	int rc;
	memset(&zs, 0, sizeof zs);
	if (!out || inflateInit2(&zs, 16 + 15) != Z_OK) {
		free(out);
		return NULL;
	}
	zs.next_in = (Bytef *)(uintptr_t)in;
	zs.avail_in = (uInt)len;
	do {
		if (zs.total_out + 1 >= cap) {
			if (!(bigger = realloc(out, cap * 2))) {
				rc = Z_MEM_ERROR;
				break;
			}
			out = bigger;
			cap *= 2;
		}
		zs.next_out = (Bytef *)out + zs.total_out;
		zs.avail_out = (uInt)(cap - 1 - zs.total_out);
		rc = inflate(&zs, Z_NO_FLUSH);
	} while (rc == Z_OK);
	inflateEnd(&zs);
	if (rc != Z_STREAM_END) {
		free(out);
		return NULL;
	}
	out[zs.total_out] = 0;
	if (out_len)
		*out_len = zs.total_out;
	return out;
}

#endif
