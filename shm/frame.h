/*
 * shm/frame.h — the record framing inside a buffer's payload, and its decoder.
 *
 * Owns: the byte format clients write and agents/coordinators read. Promises a
 * decoder that never reads outside the payload it is given and tells a clean end
 * from corruption.
 *
 * Format: a payload is a sequence of frames followed by a zero 32-bit end mark
 * (the mark may be cut off when a buffer is exactly full). A frame is
 *   u32 word = (chunk_len << 4) | flags      (host byte order)
 *   [u64 TSC tick]                            (if flags & RETRACE_FRAME_TS)
 *   chunk_len bytes of payload
 * flags: VALID (always set, so a zero word is the end mark), TS, CONT_NEXT (the
 * record continues in this writer's next buffer), CONT_PREV (this chunk continues
 * the record begun in the previous buffer; the flag values and sizes are in
 * retrace/abi.h). A record is one unsplit frame, or a
 * CONT_NEXT chunk, any number of CONT_NEXT|CONT_PREV chunks and a CONT_PREV chunk,
 * in consecutive buffers of one writer (by buffer-header seq).
 */
#ifndef RETRACE_SHM_FRAME_H
#define RETRACE_SHM_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "retrace/retrace.h"

struct rt_frame {
	const uint8_t *data;
	uint32_t len;
	uint32_t flags;
	uint64_t tick; /* 0 unless flags & RETRACE_FRAME_TS */
};

enum rt_frame_status {
	RT_FRAME_OK = 1,
	RT_FRAME_END = 0,
	RT_FRAME_CORRUPT = -1,
};

/*
 * Decode the frame at *pos of a payload of `bytes` bytes; advance *pos. Returns
 * RT_FRAME_OK, RT_FRAME_END (end mark or end of payload) or RT_FRAME_CORRUPT.
 */
int rt_frame_next(const uint8_t *payload, uint32_t bytes, uint32_t *pos,
		  struct rt_frame *f);

/* Rebuilds records from frames fed in writer order. */
struct rt_reassembler {
	uint8_t *buf;
	size_t len, cap;
	int open;       /* a CONT_NEXT chunk was seen and the record is not done */
	uint64_t tick;  /* tick of the record's first chunk */
	uint64_t orphans;   /* CONT_PREV chunks with no open record */
	uint64_t truncated; /* open records cut by a new record or a gap */
};

void rt_reasm_init(struct rt_reassembler *r);
void rt_reasm_free(struct rt_reassembler *r);
/* A gap in the writer's buffer sequence: drop any open record (counted). */
void rt_reasm_gap(struct rt_reassembler *r);
/*
 * Feed one frame. Returns 1 and sets rec, len and tick when a whole record is ready
 * (valid until the next call), 0 when more chunks are needed or the chunk was
 * dropped, -1 if memory ran out.
 */
int rt_reasm_feed(struct rt_reassembler *r, const struct rt_frame *f,
		  const uint8_t **rec, size_t *len, uint64_t *tick);

#endif
