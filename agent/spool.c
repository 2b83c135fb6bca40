/*
 * agent/spool.c — how the spool keeps records on disk.
 *
 * The directory holds segment files named by the id of their first record
 * (`%016x.seg`), a `cursor` file with the last consumed id, and nothing else we
 * touch. A segment is a 24-byte header followed by records, each a 24-byte
 * header, the payload and zero padding to 8 bytes (docs/spool.md has the
 * bytes). Records are only ever appended to the last segment; reading goes from
 * the head of the first.
 *
 * Append: refuse if over budget; roll to a new segment when the record does not
 * fit in the last one; write segment header (if new) + record header + payload +
 * pad as one writev at the segment's end, with a linked fdatasync when syncing
 * — one io_uring_enter per append. A short write is finished with further
 * writes; any failure cuts the file back to where it was (or removes the new
 * segment), so the file never keeps a half record the process knows about.
 * Without a ring (init failed, or no_uring) the same job runs on pwritev.
 *
 * Consume: write the consumed id into one of two 32-byte checksummed slots of
 * the cursor file, alternately (a torn slot write leaves the other slot good),
 * then delete the head segment once it is read to the end and another segment
 * follows (or it is full). The cursor's blocks are reserved at open, so that
 * consuming, which is what frees space, needs none on a full disk; and an
 * append that finds the disk full gives up a wholly consumed last segment and
 * tries once more.
 *
 * Open: validate every segment header (bad ones are deleted and counted), then
 * walk every record of every segment and check both CRCs. A record whose header
 * is good but payload is not is skipped by its length; a bad header is skipped
 * by looking for the next 8-aligned record magic with a good header CRC. A bad
 * region that runs to the end of the last segment is a torn tail: the file is
 * cut back to the last good record. Ids must increase in file order; a record
 * that breaks the order is treated as corrupt. Segments with nothing pending
 * are deleted, except the last one while it has room (appends continue there).
 * Peek checks the CRCs again, so a record damaged after open is still skipped.
 *
 * The writes themselves (io_uring, or pwritev without it) are spool_write.c's.
 */
#include "spool.h"
#include "spool_write.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define SEG_MAGIC 0x47535452u    /* "RTSG" */
#define REC_MAGIC 0x52535452u    /* "RTSR" */
#define CURSOR_MAGIC 0x43535452u /* "RTSC" */
#define FORMAT_VERSION 1u

#define SEG_HDR 24u
#define REC_HDR 24u
#define CURSOR_SLOT 32u
#define CURSOR_SLOT1_OFF 512u    /* the second slot in another sector */
#define CURSOR_FILE "cursor"
#define SEG_NAME_LEN 20u         /* 16 hex digits + ".seg" */
#define MAX_ID (1ull << 62)      /* ids and names above are corrupt: no wrap, ever */
#define SCAN_CHUNK (1u << 20)

struct rt_spool_segment {
	uint64_t first_id;     /* from its name, checked against its header */
	uint64_t size;         /* end of its last good record */
	uint64_t head;         /* next unread record (meaningful for segs[0]) */
	uint64_t live_records; /* pending records in it */
	uint64_t live_bytes;
	uint64_t last_id;
};

/* ------------------------------------------------------------ encoding ---- */

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static uint64_t rec_bytes(uint64_t len)
{
	return REC_HDR + ((len + 7) & ~7ull);
}

/* ---------------------------------------------------------------- crc ---- */

/* CRC32C (Castagnoli, reflected 0x82F63B78), slicing-by-8 over a built table. */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int j = 1; j < 8; j++)
			crc_table[j][i] = (crc_table[j - 1][i] >> 8) ^
					  crc_table[0][crc_table[j - 1][i] & 0xff];
}

/* Running CRC: crc32c(crc32c(0, a), b) is the CRC of a then b. */
static uint32_t crc32c(uint32_t crc, const void *data, size_t n)
{
	const uint8_t *p = data;
	uint32_t c = ~crc;
	while (n >= 8) {
		uint64_t w = get64(p) ^ c;
		c = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
		    crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
		    crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
		    crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
	return ~c;
}

/* The payload CRC starts over the id and the length, as they sit in the header. */
static uint32_t data_crc_seed(uint64_t id, uint32_t len)
{
	uint8_t b[12];
	put64(b, id);
	put32(b + 8, len);
	return crc32c(0, b, sizeof b);
}

/* ------------------------------------------------------------ headers ---- */

struct rec_head {
	uint32_t len;
	uint64_t id;
	uint32_t data_crc;
};

static void encode_rec_header(uint8_t h[REC_HDR], uint64_t id, const void *rec, uint32_t len)
{
	put32(h, REC_MAGIC);
	put32(h + 4, len);
	put64(h + 8, id);
	put32(h + 16, crc32c(data_crc_seed(id, len), rec, len));
	put32(h + 20, crc32c(0, h, 20));
}

/* 1 if the header is ours, intact and within limits. */
static int decode_rec_header(const uint8_t h[REC_HDR], struct rec_head *out)
{
	if (get32(h) != REC_MAGIC || get32(h + 20) != crc32c(0, h, 20))
		return 0;
	out->len = get32(h + 4);
	out->id = get64(h + 8);
	out->data_crc = get32(h + 16);
	return out->len <= RT_SPOOL_MAX_RECORD && out->id != 0 && out->id < MAX_ID;
}

static void encode_seg_header(uint8_t h[SEG_HDR], uint64_t first_id)
{
	put32(h, SEG_MAGIC);
	put32(h + 4, FORMAT_VERSION);
	put64(h + 8, first_id);
	put32(h + 16, 0);
	put32(h + 20, crc32c(0, h, 20));
}

enum seg_check { SEG_OK, SEG_SHORT, SEG_BAD, SEG_VERSION };

static int check_seg_header(const uint8_t *h, size_t have, uint64_t first_id)
{
	if (have < SEG_HDR)
		return SEG_SHORT;
	if (get32(h) != SEG_MAGIC || get32(h + 20) != crc32c(0, h, 20))
		return SEG_BAD;
	if (get32(h + 4) != FORMAT_VERSION)
		return SEG_VERSION;
	return get64(h + 8) == first_id ? SEG_OK : SEG_BAD;
}

static void segment_name(char out[SEG_NAME_LEN + 1], uint64_t first_id)
{
	snprintf(out, SEG_NAME_LEN + 1, "%016" PRIx64 ".seg", first_id);
}

/* 1 and *id if `name` is exactly a segment name we could have written. */
static int parse_segment_name(const char *name, uint64_t *id)
{
	uint64_t v = 0;
	if (strlen(name) != SEG_NAME_LEN || strcmp(name + 16, ".seg") != 0)
		return 0;
	for (int i = 0; i < 16; i++) {
		char c = name[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return 0;
		v = v << 4 | (uint64_t)d;
	}
	if (v == 0 || v >= MAX_ID)
		return 0;
	*id = v;
	return 1;
}

/* ------------------------------------------------------------ file io ---- */

static void errf(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Read up to n bytes at off; the count (short only at end of file) or -errno. */
static ssize_t pread_full(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* Open a regular file in the spool directory without following links or blocking. */
static int open_in_dir(int dir_fd, const char *name, int flags)
{
	struct stat st;
	int fd = openat(dir_fd, name, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0640), e;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0)
		e = errno;
	else if (!S_ISREG(st.st_mode))
		e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
	else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
		e = errno; /* io_uring would answer EAGAIN on a non-blocking file */
	else
		return fd;
	close(fd);
	return -e;
}

static uint64_t fd_size(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && st.st_size > 0 ? (uint64_t)st.st_size : 0;
}

/* mkdir -p, mode 0750 for what it creates. */
static int make_dirs(const char *path)
{
	char p[PATH_MAX];
	size_t n = strlen(path);
	if (n == 0 || n >= sizeof p)
		return -ENAMETOOLONG;
	memcpy(p, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		char c = p[i];
		p[i] = '\0';
		if (mkdir(p, 0750) != 0 && errno != EEXIST)
			return -errno;
		p[i] = c;
	}
	return 0;
}

/* ------------------------------------------------------------- cursor ---- */

static void encode_cursor_slot(uint8_t b[CURSOR_SLOT], uint64_t seq, uint64_t consumed)
{
	put32(b, CURSOR_MAGIC);
	put32(b + 4, FORMAT_VERSION);
	put64(b + 8, seq);
	put64(b + 16, consumed);
	put32(b + 24, 0);
	put32(b + 28, crc32c(0, b, 28));
}

static int decode_cursor_slot(const uint8_t *b, uint64_t *seq, uint64_t *consumed)
{
	if (get32(b) != CURSOR_MAGIC || get32(b + 4) != FORMAT_VERSION ||
	    get32(b + 28) != crc32c(0, b, 28))
		return 0;
	*seq = get64(b + 8);
	*consumed = get64(b + 16);
	return *consumed < MAX_ID;
}

static int write_cursor(struct rt_spool *s, uint64_t consumed)
{
	uint8_t b[CURSOR_SLOT];
	struct rt_spool_job w;
	uint64_t seq = s->cursor_seq + 1;
	encode_cursor_slot(b, seq, consumed);
	rt_spool_job_init(&w, s->cursor_fd, (seq & 1) ? CURSOR_SLOT1_OFF : 0, s->sync);
	rt_spool_job_add(&w, b, sizeof b);
	int rc = rt_spool_write(s, &w);
	if (rc == 0)
		s->cursor_seq = seq;
	return rc;
}

/* Load the consumed id from the newer good slot; an unreadable file is counted. */
static int open_cursor(struct rt_spool *s, const char *dir, char *err, size_t errlen)
{
	uint8_t b[CURSOR_SLOT1_OFF + CURSOR_SLOT];
	uint64_t seq, consumed;
	int fd = open_in_dir(s->dir_fd, CURSOR_FILE, O_RDWR | O_CREAT), found = 0;
	ssize_t n;
	if (fd < 0) {
		errf(err, errlen, "spool %s/%s: cannot open: %s", dir, CURSOR_FILE, strerror(-fd));
		return fd;
	}
	s->cursor_fd = fd;
	/* Reserve the cursor's blocks now: on a disk that fills up later, moving the
	 * cursor (which is what frees space) must not need space. KEEP_SIZE leaves the
	 * file's length, and so what open reads back, as it was. Not fatal: a failed
	 * cursor write is reported by consume. */
	if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, CURSOR_SLOT1_OFF + CURSOR_SLOT) != 0 &&
	    errno != EOPNOTSUPP && errno != ENOSYS)
		s->st.io_errors++;
	if ((n = pread_full(fd, b, sizeof b, 0)) < 0) {
		errf(err, errlen, "spool %s/%s: cannot read: %s", dir, CURSOR_FILE, strerror((int)-n));
		return (int)n;
	}
	for (int slot = 0; slot < 2; slot++) {
		size_t off = slot ? CURSOR_SLOT1_OFF : 0;
		if ((size_t)n >= off + CURSOR_SLOT && decode_cursor_slot(b + off, &seq, &consumed) &&
		    (!found || seq > s->cursor_seq)) {
			s->cursor_seq = seq;
			s->consumed_id = consumed;
			found = 1;
		}
	}
	if (!found && n > 0)
		s->st.cursor_lost++;
	return 0;
}

/* ------------------------------------------------------------ segments ---- */

static int reserve_segment(struct rt_spool *s)
{
	if (s->nsegs < s->segs_cap)
		return 0;
	size_t cap = s->segs_cap ? s->segs_cap * 2 : 16;
	struct rt_spool_segment *n = realloc(s->segs, cap * sizeof *n);
	if (!n)
		return -ENOMEM;
	s->segs = n;
	s->segs_cap = cap;
	return 0;
}

static void unlink_segment(struct rt_spool *s, uint64_t first_id)
{
	char name[SEG_NAME_LEN + 1];
	segment_name(name, first_id);
	if (unlinkat(s->dir_fd, name, 0) != 0 && errno != ENOENT)
		s->st.io_errors++;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Delete segs[0]; whatever it still counted as pending leaves the books. */
static void drop_head_segment(struct rt_spool *s)
{
	struct rt_spool_segment *seg = &s->segs[0];
	s->st.records_pending -= seg->live_records;
	s->st.bytes_pending -= seg->live_bytes;
	close_fd(&s->head_fd);
	if (s->nsegs == 1) {
		close_fd(&s->tail_fd);
		s->tail_appendable = 0;
	}
	unlink_segment(s, seg->first_id);
	memmove(s->segs, s->segs + 1, (s->nsegs - 1) * sizeof *s->segs);
	s->nsegs--;
	s->st.segments = s->nsegs;
	s->peeked = 0;
}

/* A head segment read to its end goes, unless it is the last and has room. */
static void drop_finished_heads(struct rt_spool *s)
{
	while (s->nsegs > 0 && s->segs[0].head >= s->segs[0].size) {
		if (s->nsegs == 1 && s->tail_appendable && s->segs[0].size < s->segment_bytes)
			return;
		drop_head_segment(s);
	}
}

/* ------------------------------------------------------------- reading ---- */

/* A window over a file for the record walk: few large reads for many records. */
struct reader {
	int fd;
	uint64_t size;
	uint8_t *buf;
	size_t cap, have;
	uint64_t base;
	int err; /* -errno of a failed read */
};

/* n bytes at off (n <= cap, off + n <= size), or NULL (r->err set, or file shrank). */
static const uint8_t *reader_at(struct reader *r, uint64_t off, size_t n)
{
	if (off >= r->base && off + n <= r->base + r->have)
		return r->buf + (off - r->base);
	uint64_t want = r->size - off < r->cap ? r->size - off : r->cap;
	ssize_t got = pread_full(r->fd, r->buf, (size_t)want, off);
	r->base = off;
	r->have = got > 0 ? (size_t)got : 0;
	if (got < 0)
		r->err = (int)got;
	return r->have >= n ? r->buf : NULL;
}

enum rec_check { REC_OK, REC_BAD_HEADER, REC_SHORT, REC_BAD_DATA, REC_IO };

/* Check the record at off completely (header, bounds, payload CRC). */
static int check_record(struct reader *r, uint64_t off, struct rec_head *h)
{
	const uint8_t *p;
	if (off + REC_HDR > r->size)
		return REC_SHORT;
	if (!(p = reader_at(r, off, REC_HDR)))
		return r->err ? REC_IO : REC_SHORT;
	if (!decode_rec_header(p, h))
		return REC_BAD_HEADER;
	if (off + rec_bytes(h->len) > r->size)
		return REC_SHORT;
	uint32_t crc = data_crc_seed(h->id, h->len);
	for (uint64_t pos = off + REC_HDR, end = pos + h->len; pos < end;) {
		size_t n = end - pos < r->cap ? (size_t)(end - pos) : r->cap;
		if (!(p = reader_at(r, pos, n)))
			return r->err ? REC_IO : REC_SHORT;
		crc = crc32c(crc, p, n);
		pos += n;
	}
	return crc == h->data_crc ? REC_OK : REC_BAD_DATA;
}

/* The next 8-aligned offset after off holding a good record header; size if none. */
static uint64_t resync(struct reader *r, uint64_t off)
{
	struct rec_head h;
	for (off += 8; off + REC_HDR <= r->size; off += 8) {
		const uint8_t *p = reader_at(r, off, REC_HDR);
		if (!p)
			break;
		if (get32(p) == REC_MAGIC && decode_rec_header(p, &h))
			return off;
	}
	return r->size;
}

static int grow_buf(struct rt_spool *s, size_t len)
{
	/* Do not keep a huge buffer for ever after one huge record. */
	if (s->buf && s->buf_cap >= len && !(s->buf_cap > (16u << 20) && len <= (16u << 20)))
		return 0;
	size_t cap = len < 65536 ? 65536 : len;
	uint8_t *b = malloc(cap);
	if (!b)
		return -ENOMEM;
	free(s->buf);
	s->buf = b;
	s->buf_cap = cap;
	return 0;
}

/* Read and check the record at segs[0].head into s->buf. A rec_check or -errno. */
static int read_head_record(struct rt_spool *s, struct rec_head *h)
{
	struct rt_spool_segment *seg = &s->segs[0];
	uint8_t hb[REC_HDR];
	ssize_t n = pread_full(s->head_fd, hb, REC_HDR, seg->head);
	if (n < 0)
		return (int)n;
	if (n < (ssize_t)REC_HDR || seg->head + REC_HDR > seg->size)
		return REC_SHORT;
	if (!decode_rec_header(hb, h))
		return REC_BAD_HEADER;
	if (seg->head + rec_bytes(h->len) > seg->size)
		return REC_SHORT;
	int rc = grow_buf(s, h->len);
	if (rc)
		return rc;
	n = pread_full(s->head_fd, s->buf, h->len, seg->head + REC_HDR);
	if (n < 0)
		return (int)n;
	if ((size_t)n < h->len)
		return REC_SHORT;
	if (crc32c(data_crc_seed(h->id, h->len), s->buf, h->len) != h->data_crc)
		return REC_BAD_DATA;
	return REC_OK;
}

/* After a bad header at the head: where the next good header is (or the end). */
static int resync_head(struct rt_spool *s)
{
	struct rt_spool_segment *seg = &s->segs[0];
	struct reader r = {.fd = s->head_fd, .size = seg->size, .cap = 65536};
	if (!(r.buf = malloc(r.cap)))
		return -ENOMEM;
	seg->head = resync(&r, seg->head);
	free(r.buf);
	return r.err;
}

/* A record counted as pending turned out bad: it leaves the books. */
static void forget_record(struct rt_spool *s, struct rt_spool_segment *seg, uint64_t bytes)
{
	if (seg->live_records == 0)
		return;
	seg->live_records--;
	seg->live_bytes -= bytes < seg->live_bytes ? bytes : seg->live_bytes;
	s->st.records_pending--;
	s->st.bytes_pending -= bytes < s->st.bytes_pending ? bytes : s->st.bytes_pending;
}

/* The head segment is read to its end: nothing in it is pending any more. */
static void settle_head(struct rt_spool *s)
{
	struct rt_spool_segment *seg = &s->segs[0];
	s->st.records_pending -= seg->live_records;
	s->st.bytes_pending -= seg->live_bytes;
	seg->live_records = seg->live_bytes = 0;
}

/* Make the oldest good pending record the peeked one. 0, EMPTY or -errno. */
static int load_head(struct rt_spool *s)
{
	struct rec_head h;
	int rc;
	while (!s->peeked) {
		if (s->nsegs == 0)
			return RT_SPOOL_EMPTY;
		struct rt_spool_segment *seg = &s->segs[0];
		if (seg->head >= seg->size) {
			settle_head(s);
			if (s->nsegs == 1)
				return RT_SPOOL_EMPTY;
			drop_head_segment(s);
			continue;
		}
		if (s->head_fd < 0) {
			char name[SEG_NAME_LEN + 1];
			segment_name(name, seg->first_id);
			if ((s->head_fd = open_in_dir(s->dir_fd, name, O_RDONLY)) < 0) {
				rc = s->head_fd;
				s->head_fd = -1;
				s->st.io_errors++;
				return rc;
			}
		}
		rc = read_head_record(s, &h);
		if (rc == REC_OK && (h.id <= s->consumed_id || h.id < seg->first_id))
			rc = REC_BAD_DATA; /* good CRCs, impossible id: a planted record */
		switch (rc) {
		case REC_OK:
			s->peeked = 1;
			s->peek_id = h.id;
			s->buf_len = h.len;
			s->peek_bytes = rec_bytes(h.len);
			s->peek_next_off = seg->head + s->peek_bytes;
			break;
		case REC_BAD_DATA:
			s->st.corrupt_skipped++;
			forget_record(s, seg, rec_bytes(h.len));
			seg->head += rec_bytes(h.len);
			break;
		case REC_BAD_HEADER:
		case REC_SHORT:
			s->st.corrupt_skipped++;
			if ((rc = resync_head(s)) != 0) {
				s->st.io_errors++;
				return rc;
			}
			break;
		default:
			s->st.io_errors++;
			return rc;
		}
	}
	return 0;
}

/* ------------------------------------------------------------ recovery ---- */

/* What the walk of the segments carries from record to record. */
struct scan_state {
	uint64_t last_id;   /* highest good id so far, across segments */
	int in_bad;         /* inside a bad region (since the last good record) */
	uint64_t bad_skips; /* records / resyncs skipped in that region */
};

/* Walk every record of seg; fills size, head, live counts. 0 or -errno. */
static int scan_segment(struct rt_spool *s, struct reader *r, struct rt_spool_segment *seg,
			struct scan_state *ss)
{
	uint64_t off = SEG_HDR;
	int have_live = 0;
	struct rec_head h;
	seg->size = seg->head = SEG_HDR;
	ss->in_bad = 0;
	ss->bad_skips = 0;
	while (off < r->size) {
		int c = check_record(r, off, &h);
		if (c == REC_IO)
			return r->err;
		if (c != REC_OK) {
			ss->in_bad = 1;
			ss->bad_skips++;
			off = c == REC_BAD_DATA ? off + rec_bytes(h.len) : resync(r, off);
			continue;
		}
		s->st.corrupt_skipped += ss->bad_skips; /* a good record ends the region */
		ss->in_bad = 0;
		ss->bad_skips = 0;
		off += rec_bytes(h.len);
		seg->size = off;
		if (h.id <= ss->last_id || h.id < seg->first_id) {
			s->st.corrupt_skipped++; /* sound, but out of order: a planted copy */
			continue;
		}
		ss->last_id = seg->last_id = h.id;
		if (h.id > s->consumed_id) {
			if (!have_live++)
				seg->head = off - rec_bytes(h.len);
			seg->live_records++;
			seg->live_bytes += rec_bytes(h.len);
		}
	}
	if (!have_live)
		seg->head = seg->size;
	return 0;
}

/* A bad region ran to the end of the last segment: a torn append. Cut it off. */
static int cut_torn_tail(struct rt_spool *s, int fd, struct rt_spool_segment *seg)
{
	s->st.torn_skipped++;
	if (ftruncate(fd, (off_t)seg->size) != 0 || (s->sync && rt_spool_sync_fd(fd) != 0)) {
		s->st.io_errors++;
		return 0;
	}
	return 1;
}

/* The segment ids in the directory, sorted. */
static int list_segments(struct rt_spool *s, uint64_t **ids, size_t *n)
{
	size_t cap = 0;
	int fd = dup(s->dir_fd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	*ids = NULL;
	*n = 0;
	if (!d) {
		int rc = -errno;
		if (fd >= 0)
			close(fd);
		return rc;
	}
	rewinddir(d);
	while ((e = readdir(d)) != NULL) {
		uint64_t id;
		if (!parse_segment_name(e->d_name, &id))
			continue;
		if (*n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			uint64_t *p = realloc(*ids, nc * sizeof *p);
			if (!p) {
				closedir(d);
				return -ENOMEM;
			}
			*ids = p;
			cap = nc;
		}
		(*ids)[(*n)++] = id;
	}
	closedir(d);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * Keep the ids whose segment header is good; delete the others (counted: a
 * short header on the newest file is a torn create, anything else corrupt).
 */
static int filter_headers(struct rt_spool *s, const char *dir, uint64_t *ids, size_t *n,
			  char *err, size_t errlen)
{
	size_t kept = 0;
	for (size_t i = 0; i < *n; i++) {
		char name[SEG_NAME_LEN + 1];
		uint8_t h[SEG_HDR];
		segment_name(name, ids[i]);
		int fd = open_in_dir(s->dir_fd, name, O_RDONLY);
		if (fd < 0) {
			errf(err, errlen, "spool segment %s/%s: cannot open: %s", dir, name,
			     strerror(-fd));
			return fd;
		}
		ssize_t got = pread_full(fd, h, SEG_HDR, 0);
		close(fd);
		if (got < 0) {
			errf(err, errlen, "spool segment %s/%s: cannot read: %s", dir, name,
			     strerror((int)-got));
			return (int)got;
		}
		switch (check_seg_header(h, (size_t)got, ids[i])) {
		case SEG_OK:
			ids[kept++] = ids[i];
			continue;
		case SEG_VERSION:
			errf(err, errlen, "spool segment %s/%s: format version %u, this build reads %u",
			     dir, name, get32(h + 4), FORMAT_VERSION);
			return -EPROTO;
		case SEG_SHORT:
			if (i == *n - 1)
				s->st.torn_skipped++;
			else
				s->st.corrupt_skipped++;
			break;
		default:
			s->st.corrupt_skipped++;
		}
		unlink_segment(s, ids[i]);
	}
	*n = kept;
	return 0;
}

/* Walk segment `id`, append it to s->segs. 0 or -errno (message in err). */
static int recover_segment(struct rt_spool *s, const char *dir, struct reader *r, uint64_t id,
			   int last, struct scan_state *ss, char *err, size_t errlen)
{
	char name[SEG_NAME_LEN + 1];
	struct rt_spool_segment seg = {.first_id = id};
	int fd, rc;
	segment_name(name, id);
	if ((fd = open_in_dir(s->dir_fd, name, last ? O_RDWR : O_RDONLY)) < 0) {
		errf(err, errlen, "spool segment %s/%s: cannot open: %s", dir, name, strerror(-fd));
		return fd;
	}
	r->fd = fd;
	r->size = fd_size(fd);
	r->have = 0;
	r->err = 0;
	if ((rc = scan_segment(s, r, &seg, ss)) != 0) {
		close(fd);
		errf(err, errlen, "spool segment %s/%s: cannot read: %s", dir, name, strerror(-rc));
		return rc;
	}
	s->tail_appendable = 0;
	if (!ss->in_bad && seg.size == SEG_HDR) {
		/* A header and nothing else: the first write into it was cut. */
		if (last)
			s->st.torn_skipped++;
		else
			s->st.corrupt_skipped++;
	} else if (ss->in_bad && last)
		s->tail_appendable = cut_torn_tail(s, fd, &seg);
	else if (ss->in_bad)
		s->st.corrupt_skipped += ss->bad_skips; /* the rest of this segment is dropped */
	else
		s->tail_appendable = last;
	close(fd);
	if ((rc = reserve_segment(s)) != 0) {
		errf(err, errlen, "out of memory for the spool's segment list");
		return rc;
	}
	s->segs[s->nsegs++] = seg;
	return 0;
}

/* Delete segments with nothing pending, except a last one that appends may use. */
static void drop_dead_segments(struct rt_spool *s)
{
	size_t kept = 0;
	for (size_t i = 0; i < s->nsegs; i++) {
		struct rt_spool_segment *seg = &s->segs[i];
		int last = i == s->nsegs - 1;
		if (seg->live_records > 0 ||
		    (last && s->tail_appendable && seg->size > SEG_HDR && seg->size < s->segment_bytes)) {
			s->segs[kept++] = *seg;
			continue;
		}
		if (last)
			s->tail_appendable = 0;
		unlink_segment(s, seg->first_id);
	}
	s->nsegs = kept;
}

static int recover(struct rt_spool *s, const char *dir, char *err, size_t errlen)
{
	struct reader r = {.cap = SCAN_CHUNK};
	struct scan_state ss = {0};
	uint64_t *ids;
	size_t n;
	int rc = list_segments(s, &ids, &n);
	if (rc) {
		errf(err, errlen, "spool %s: cannot list: %s", dir, strerror(-rc));
		return rc;
	}
	if (n)
		qsort(ids, n, sizeof *ids, cmp_u64);
	if ((rc = filter_headers(s, dir, ids, &n, err, errlen)) != 0)
		goto out;
	if (n && !(r.buf = malloc(r.cap))) {
		errf(err, errlen, "out of memory for the spool scan");
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = recover_segment(s, dir, &r, ids[i], i == n - 1, &ss, err, errlen);
	if (rc)
		goto out;
	drop_dead_segments(s);
	for (size_t i = 0; i < s->nsegs; i++) {
		s->st.records_pending += s->segs[i].live_records;
		s->st.bytes_pending += s->segs[i].live_bytes;
	}
	s->st.segments = s->nsegs;
	s->next_id = (ss.last_id > s->consumed_id ? ss.last_id : s->consumed_id) + 1;
out:
	free(r.buf);
	free(ids);
	return rc;
}

/* ---------------------------------------------------------------- api ---- */

static int lock_dir(struct rt_spool *s, const char *dir, char *err, size_t errlen)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		errf(err, errlen, "spool %s: cannot open directory: %s", dir, strerror(errno));
		return -errno;
	}
	s->dir_fd = fd;
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;
		errf(err, errlen, "spool %s: %s", dir,
		     e == EWOULDBLOCK ? "in use by another process" : strerror(e));
		return -e;
	}
	return 0;
}

int rt_spool_open(struct rt_spool *s, const struct rt_spool_opts *o, char *err, size_t errlen)
{
	int rc;
	memset(s, 0, sizeof *s);
	s->dir_fd = s->cursor_fd = s->head_fd = s->tail_fd = -1;
	pthread_once(&crc_once, crc_init);
	if (!o || !o->dir || !*o->dir) {
		errf(err, errlen, "no spool directory given");
		return -EINVAL;
	}
	s->max_bytes = o->max_bytes ? o->max_bytes : RT_SPOOL_DEFAULT_MAX_BYTES;
	s->segment_bytes = o->segment_bytes ? o->segment_bytes : RT_SPOOL_DEFAULT_SEGMENT;
	if (s->segment_bytes < RT_SPOOL_MIN_SEGMENT)
		s->segment_bytes = RT_SPOOL_MIN_SEGMENT;
	s->sync = !o->no_sync;
	if ((rc = make_dirs(o->dir)) != 0) {
		errf(err, errlen, "spool %s: cannot create directory: %s", o->dir, strerror(-rc));
		return rc;
	}
	if ((rc = lock_dir(s, o->dir, err, errlen)) != 0 ||
	    (rc = open_cursor(s, o->dir, err, errlen)) != 0 ||
	    (rc = recover(s, o->dir, err, errlen)) != 0) {
		rt_spool_close(s);
		return rc;
	}
	if (s->sync)
		fsync(s->dir_fd); /* deletions and cuts of the recovery */
	if (!o->no_uring)
		rt_spool_ring_open(s);
	return 0;
}

/* Create the file of a new segment; its header goes out with its first record. */
static int create_segment(struct rt_spool *s, uint64_t first_id)
{
	char name[SEG_NAME_LEN + 1];
	segment_name(name, first_id);
	return open_in_dir(s->dir_fd, name, O_RDWR | O_CREAT | O_EXCL);
}

/* The write fd of the last segment, opened on first use. */
static int tail_fd(struct rt_spool *s)
{
	if (s->tail_fd < 0) {
		char name[SEG_NAME_LEN + 1];
		segment_name(name, s->segs[s->nsegs - 1].first_id);
		s->tail_fd = open_in_dir(s->dir_fd, name, O_RDWR);
	}
	return s->tail_fd;
}

/* A write failed: leave the files as they were before the append. */
static void undo_append(struct rt_spool *s, int fd, int new_seg, uint64_t off, uint64_t id)
{
	s->st.io_errors++;
	if (new_seg) {
		close(fd);
		unlink_segment(s, id);
	} else if (ftruncate(fd, (off_t)off) != 0) {
		s->tail_appendable = 0; /* the next append starts a new segment */
	}
}

static void account_append(struct rt_spool *s, int new_seg, int fd, uint64_t rb)
{
	uint64_t id = s->next_id++;
	if (new_seg) {
		struct rt_spool_segment seg = {.first_id = id, .size = SEG_HDR, .head = SEG_HDR};
		close_fd(&s->tail_fd);
		s->tail_fd = fd;
		s->tail_appendable = 1;
		s->segs[s->nsegs++] = seg;
		s->st.segments = s->nsegs;
	}
	struct rt_spool_segment *seg = &s->segs[s->nsegs - 1];
	seg->size += rb;
	seg->live_records++;
	seg->live_bytes += rb;
	seg->last_id = id;
	s->st.records_pending++;
	s->st.bytes_pending += rb;
	s->st.appended++;
	if (new_seg)
		drop_finished_heads(s); /* the segment we left may be all consumed */
}

/*
 * The disk is full: a last segment with nothing pending still holds its
 * consumed records (it is kept for appends to continue in). Give it up, so that
 * its space serves the next segment. 1 if one went.
 */
static int drop_consumed_tail(struct rt_spool *s)
{
	if (s->nsegs != 1 || s->segs[0].live_records != 0)
		return 0;
	drop_head_segment(s);
	if (s->sync)
		fsync(s->dir_fd);
	return 1;
}

static int append_once(struct rt_spool *s, const void *rec, size_t len, uint64_t *id)
{
	static const uint8_t zeros[8];
	uint8_t sh[SEG_HDR], rh[REC_HDR];
	struct rt_spool_job w;
	uint64_t rb = rec_bytes(len), off = SEG_HDR;
	int fd, rc, new_seg;
	if (len > RT_SPOOL_MAX_RECORD || s->st.bytes_pending + rb > s->max_bytes) {
		s->st.full_drops++;
		return len > RT_SPOOL_MAX_RECORD ? RT_SPOOL_TOO_BIG : RT_SPOOL_FULL;
	}
	new_seg = s->nsegs == 0 || !s->tail_appendable ||
		  s->segs[s->nsegs - 1].size + rb > s->segment_bytes;
	if (new_seg) {
		if ((rc = reserve_segment(s)) != 0)
			return rc;
		fd = create_segment(s, s->next_id);
	} else {
		fd = tail_fd(s);
		off = s->segs[s->nsegs - 1].size;
	}
	if (fd < 0) {
		s->st.io_errors++;
		return fd;
	}
	encode_rec_header(rh, s->next_id, rec, (uint32_t)len);
	rt_spool_job_init(&w, fd, new_seg ? 0 : off, s->sync);
	if (new_seg) {
		encode_seg_header(sh, s->next_id);
		rt_spool_job_add(&w, sh, sizeof sh);
	}
	rt_spool_job_add(&w, rh, sizeof rh);
	rt_spool_job_add(&w, rec, len);
	rt_spool_job_add(&w, zeros, rb - REC_HDR - len);
	rc = rt_spool_write(s, &w);
	if (rc == 0 && new_seg && s->sync && fsync(s->dir_fd) != 0)
		rc = -errno; /* the record is written but its file may not survive a crash */
	if (rc) {
		undo_append(s, fd, new_seg, off, s->next_id);
		return rc;
	}
	if (id)
		*id = s->next_id;
	account_append(s, new_seg, fd, rb);
	return 0;
}

int rt_spool_append(struct rt_spool *s, const void *rec, size_t len, uint64_t *id)
{
	int rc = append_once(s, rec, len, id);
	if ((rc == -ENOSPC || rc == -EDQUOT) && drop_consumed_tail(s))
		rc = append_once(s, rec, len, id);
	return rc;
}

int rt_spool_peek(struct rt_spool *s, const void **rec, size_t *len, uint64_t *id)
{
	int rc = load_head(s);
	if (rc)
		return rc;
	*rec = s->buf;
	*len = s->buf_len;
	*id = s->peek_id;
	return 0;
}

int rt_spool_consume(struct rt_spool *s, uint64_t id)
{
	int rc = load_head(s);
	if (rc)
		return rc;
	if (id != s->peek_id)
		return RT_SPOOL_MISMATCH;
	if ((rc = write_cursor(s, id)) != 0) {
		s->st.io_errors++;
		return rc; /* still pending: the caller may try again */
	}
	s->consumed_id = id;
	s->segs[0].head = s->peek_next_off;
	forget_record(s, &s->segs[0], s->peek_bytes);
	s->st.consumed++;
	s->peeked = 0;
	drop_finished_heads(s);
	return 0;
}

void rt_spool_close(struct rt_spool *s)
{
	if (s->dir_fd < 0)
		return;
	if (!s->sync) {
		if (s->tail_fd >= 0)
			rt_spool_sync_fd(s->tail_fd);
		if (s->cursor_fd >= 0)
			rt_spool_sync_fd(s->cursor_fd);
	}
	rt_spool_ring_close(s);
	close_fd(&s->head_fd);
	close_fd(&s->tail_fd);
	close_fd(&s->cursor_fd);
	close_fd(&s->dir_fd); /* releases the lock */
	free(s->segs);
	free(s->buf);
	s->segs = NULL;
	s->buf = NULL;
	s->nsegs = s->segs_cap = s->buf_cap = 0;
	s->peeked = 0;
}

void rt_spool_stats(const struct rt_spool *s, struct rt_spool_stats *out)
{
	*out = s->st;
}

const char *rt_spool_strerror(int rc)
{
	switch (rc) {
	case RT_SPOOL_OK: return "ok";
	case RT_SPOOL_FULL: return "spool full";
	case RT_SPOOL_EMPTY: return "spool empty";
	case RT_SPOOL_TOO_BIG: return "record larger than the spool's record limit";
	case RT_SPOOL_MISMATCH: return "not the oldest pending record";
	default: return rc < 0 ? strerror(-rc) : "unknown spool result";
	}
}
