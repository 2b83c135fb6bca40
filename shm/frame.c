/*
 * shm/frame.c — frame decoding and record reassembly.
 *
 * rt_frame_next reads one header word with memcpy (frames are not aligned),
 * checks that the whole frame lies inside the payload and returns a view of it.
 * The reassembler copies chunks of split records into one growing buffer; an
 * unsplit frame is returned in place without copying.
 */
#include "frame.h"

#include <stdlib.h>
#include <string.h>

int rt_frame_next(const uint8_t *payload, uint32_t bytes, uint32_t *pos,
		  struct rt_frame *f)
{
	uint32_t p = *pos, word, need;

	if (p > bytes || bytes - p < RETRACE_FRAME_HDR)
		return RT_FRAME_END;
	memcpy(&word, payload + p, sizeof word);
	if (word == 0)
		return RT_FRAME_END;
	if (!(word & RETRACE_FRAME_VALID))
		return RT_FRAME_CORRUPT;
	f->flags = word & 0xFu;
	f->len = word >> 4;
	need = RETRACE_FRAME_HDR + ((f->flags & RETRACE_FRAME_TS) ? 8u : 0u);
	if (bytes - p < need || bytes - p - need < f->len)
		return RT_FRAME_CORRUPT;
	f->tick = 0;
	if (f->flags & RETRACE_FRAME_TS)
		memcpy(&f->tick, payload + p + RETRACE_FRAME_HDR, 8);
	f->data = payload + p + need;
	*pos = p + need + f->len;
	return RT_FRAME_OK;
}

void rt_reasm_init(struct rt_reassembler *r)
{
	memset(r, 0, sizeof *r);
}

void rt_reasm_free(struct rt_reassembler *r)
{
	free(r->buf);
	memset(r, 0, sizeof *r);
}

void rt_reasm_gap(struct rt_reassembler *r)
{
	if (r->open)
		r->truncated++;
	r->open = 0;
	r->len = 0;
}

static int append(struct rt_reassembler *r, const uint8_t *d, size_t n)
{
	if (n == 0)
		return 0;
	if (r->len + n > r->cap) {
		size_t cap = r->cap ? r->cap : 4096;
		uint8_t *nb;
		while (cap < r->len + n)
			cap *= 2;
		nb = realloc(r->buf, cap);
		if (!nb)
			return -1;
		r->buf = nb;
		r->cap = cap;
	}
	memcpy(r->buf + r->len, d, n);
	r->len += n;
	return 0;
}

int rt_reasm_feed(struct rt_reassembler *r, const struct rt_frame *f,
		  const uint8_t **rec, size_t *len, uint64_t *tick)
{
	int prev = (f->flags & RETRACE_FRAME_CONT_PREV) != 0;
	int next = (f->flags & RETRACE_FRAME_CONT_NEXT) != 0;

	if (prev && !r->open) {
		r->orphans++;
		return 0;
	}
	if (!prev && r->open)
		rt_reasm_gap(r);
	if (!prev && !next) {
		*rec = f->data;
		*len = f->len;
		*tick = f->tick;
		return 1;
	}
	if (!prev) {
		r->open = 1;
		r->len = 0;
		r->tick = f->tick;
	}
	if (append(r, f->data, f->len) != 0)
		return -1;
	if (next)
		return 0;
	r->open = 0;
	*rec = r->buf;
	*len = r->len;
	*tick = r->tick;
	return 1;
}
