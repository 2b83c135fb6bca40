/*
 * The agent's on-disk spool, on real files in a scratch directory: records come
 * back byte-exact and in order across reopen, segments roll and are deleted,
 * the budget holds, torn tails and corrupt records are skipped and counted and
 * never returned, hostile directories are survived, I/O errors leave the spool
 * as it was, a full disk (a small tmpfs) still lets every record be consumed,
 * and a writer killed with SIGKILL loses nothing it was told was written. Most tests run twice: through io_uring (_i = 0) and through the
 * pwrite fallback (_i = 1).
 *
 * Every record's bytes are a function of a key (usually its id), so any record
 * read back can be checked without remembering what was written.
 */
#include <check.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/spool.h"
#include "common/smallfs.h"
#include "common/suite.h"

#define MiB (1024u * 1024u)

/* -------------------------------------------------------------- records ---- */

static uint64_t mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* Mostly small (up to 4 KiB), one in four up to `max`; key 0 mod 16 is empty. */
static size_t key_len(uint64_t key, size_t max)
{
	uint64_t h = mix(key ^ 0xA5A5);
	if (key % 16 == 0)
		return 0;
	if (h % 4 == 0)
		return (size_t)((h >> 8) % (max + 1));
	return (size_t)((h >> 8) % (max < 4096 ? max + 1 : 4097));
}

static void fill(uint8_t *b, size_t n, uint64_t key)
{
	uint64_t w = 0;
	for (size_t i = 0; i < n; i++) {
		if (i % 8 == 0)
			w = mix(key * 0x100000001B3ull + i);
		b[i] = (uint8_t)(w >> (8 * (i % 8)));
	}
}

static int matches(const void *rec, size_t n, uint64_t key)
{
	const uint8_t *p = rec;
	uint64_t w = 0;
	for (size_t i = 0; i < n; i++) {
		if (i % 8 == 0)
			w = mix(key * 0x100000001B3ull + i);
		if (p[i] != (uint8_t)(w >> (8 * (i % 8))))
			return 0;
	}
	return 1;
}

/* Append the record of `key` with `len` bytes; its id. */
static uint64_t put_rec(struct rt_spool *s, uint64_t key, size_t len)
{
	uint8_t *b = malloc(len ? len : 1);
	uint64_t id = 0;
	ck_assert_ptr_nonnull(b);
	fill(b, len, key);
	int rc = rt_spool_append(s, b, len, &id);
	ck_assert_msg(rc == 0, "append key %llu (%zu B): %s", (unsigned long long)key, len,
		      rt_spool_strerror(rc));
	free(b);
	return id;
}

/* The oldest record must be `id`, `len` bytes of `key`; consume it. */
static void take(struct rt_spool *s, uint64_t id, uint64_t key, size_t len)
{
	const void *rec;
	size_t n;
	uint64_t got;
	int rc = rt_spool_peek(s, &rec, &n, &got);
	ck_assert_msg(rc == 0, "peek for id %llu: %s", (unsigned long long)id, rt_spool_strerror(rc));
	ck_assert_uint_eq(got, id);
	ck_assert_uint_eq(n, len);
	ck_assert_msg(matches(rec, n, key), "record %llu differs", (unsigned long long)id);
	ck_assert_int_eq(rt_spool_consume(s, got), 0);
}

static void expect_empty(struct rt_spool *s)
{
	const void *rec;
	size_t n;
	uint64_t id;
	ck_assert_int_eq(rt_spool_peek(s, &rec, &n, &id), RT_SPOOL_EMPTY);
}

static struct rt_spool_stats stats(const struct rt_spool *s)
{
	struct rt_spool_stats st;
	rt_spool_stats(s, &st);
	return st;
}

/* --------------------------------------------------------------- files ---- */

struct tdir {
	char root[PATH_MAX / 2];
	char spool[PATH_MAX / 2 + 32];
};

static void tdir_make(struct tdir *t)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(t->root, sizeof t->root, "%s/rt-spool-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(t->root));
	/* two missing parents: open creates them */
	snprintf(t->spool, sizeof t->spool, "%s/a/b/spool", t->root);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p);
}

static void tdir_free(struct tdir *t)
{
	nftw(t->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void seg_path(const char *dir, uint64_t id, char *out, size_t n)
{
	snprintf(out, n, "%s/%016llx.seg", dir, (unsigned long long)id);
}

static int seg_exists(const char *dir, uint64_t id)
{
	char p[PATH_MAX];
	seg_path(dir, id, p, sizeof p);
	return access(p, F_OK) == 0;
}

static long file_size(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

static size_t count_segs(const char *dir)
{
	char cmd[PATH_MAX];
	size_t n = 0;
	snprintf(cmd, sizeof cmd, "ls -1 '%s' | grep -c '^[0-9a-f]\\{16\\}\\.seg$'", dir);
	FILE *f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	if (fscanf(f, "%zu", &n) != 1)
		n = 0;
	pclose(f);
	return n;
}

static uint8_t *read_all(const char *p, size_t *n)
{
	long sz = file_size(p);
	ck_assert_int_ge(sz, 0);
	uint8_t *b = malloc((size_t)sz + 1);
	int fd = open(p, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(read(fd, b, (size_t)sz), sz);
	close(fd);
	*n = (size_t)sz;
	return b;
}

static void write_all(const char *p, const void *b, size_t n)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0640);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, b, n), (ssize_t)n);
	close(fd);
}

static void flip_byte(const char *p, long off)
{
	uint8_t c;
	int fd = open(p, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &c, 1, off), 1);
	c ^= 0x40;
	ck_assert_int_eq(pwrite(fd, &c, 1, off), 1);
	close(fd);
}

static void sp_open(struct rt_spool *s, const char *dir, int no_uring, uint64_t max_bytes,
		    uint64_t segment_bytes, int no_sync)
{
	struct rt_spool_opts o = {.dir = dir, .max_bytes = max_bytes,
				  .segment_bytes = segment_bytes, .no_uring = no_uring,
				  .no_sync = no_sync};
	char err[512] = "";
	int rc = rt_spool_open(s, &o, err, sizeof err);
	ck_assert_msg(rc == 0, "open %s: %s", dir, err);
}

static uint64_t rb(size_t len)
{
	return 24 + ((len + 7) & ~(size_t)7);
}

/* ------------------------------------------------------------ round trip ---- */

START_TEST(test_round_trip)
{
	enum { N = 48 };
	struct tdir t;
	struct rt_spool s;
	size_t len[N + 1];
	uint64_t bytes = 0;
	tdir_make(&t);
	sp_open(&s, t.spool, _i, 0, 0, 0);
	for (uint64_t k = 1; k <= N; k++)
		len[k] = k == 1 ? 0 : k == 2 ? 2 * MiB : key_len(k, 2 * MiB);
	for (uint64_t k = 1; k <= 30; k++) {
		ck_assert_uint_eq(put_rec(&s, k, len[k]), k); /* ids 1, 2, 3 ... */
		bytes += rb(len[k]);
	}
	ck_assert_uint_eq(stats(&s).bytes_pending, bytes);
	/* Peek is idempotent; consume wants the oldest id. */
	{
		const void *a, *b;
		size_t na, nb;
		uint64_t ia, ib;
		ck_assert_int_eq(rt_spool_peek(&s, &a, &na, &ia), 0);
		ck_assert_int_eq(rt_spool_peek(&s, &b, &nb, &ib), 0);
		ck_assert_ptr_eq(a, b);
		ck_assert_uint_eq(ia, 1);
		ck_assert_uint_eq(ib, 1);
		ck_assert_int_eq(rt_spool_consume(&s, 2), RT_SPOOL_MISMATCH);
	}
	for (uint64_t k = 1; k <= 10; k++)
		take(&s, k, k, len[k]);
	for (uint64_t k = 31; k <= N; k++)
		ck_assert_uint_eq(put_rec(&s, k, len[k]), k);
	for (uint64_t k = 11; k <= N; k++)
		take(&s, k, k, len[k]);
	expect_empty(&s);
	struct rt_spool_stats st = stats(&s);
	ck_assert_uint_eq(st.appended, N);
	ck_assert_uint_eq(st.consumed, N);
	ck_assert_uint_eq(st.records_pending, 0);
	ck_assert_uint_eq(st.bytes_pending, 0);
	ck_assert_uint_eq(st.torn_skipped + st.corrupt_skipped + st.io_errors + st.full_drops, 0);
	if (_i) {
		ck_assert_uint_eq(st.uring, 0);
		ck_assert_uint_ge(st.fallback_writes, N); /* appends and cursor writes */
	} else if (st.uring) {
		ck_assert_uint_eq(st.fallback_writes, 0);
	} else {
		/* no io_uring here (container policy): the fallback did everything */
		ck_assert_uint_ge(st.fallback_writes, N);
	}
	rt_spool_close(&s);
	tdir_free(&t);
}
END_TEST

/* ----------------------------------------------------------- persistence ---- */

START_TEST(test_persistence)
{
	struct tdir t;
	struct rt_spool s;
	uint64_t bytes = 0;
	tdir_make(&t);
	sp_open(&s, t.spool, _i, 0, 0, 0);
	for (uint64_t k = 1; k <= 20; k++)
		put_rec(&s, k, key_len(k, 100000));
	for (uint64_t k = 1; k <= 7; k++)
		take(&s, k, k, key_len(k, 100000));
	rt_spool_close(&s);

	sp_open(&s, t.spool, _i, 0, 0, 0);
	for (uint64_t k = 8; k <= 20; k++)
		bytes += rb(key_len(k, 100000));
	ck_assert_uint_eq(stats(&s).records_pending, 13);
	ck_assert_uint_eq(stats(&s).bytes_pending, bytes);
	for (uint64_t k = 8; k <= 10; k++)
		take(&s, k, k, key_len(k, 100000));
	rt_spool_close(&s);

	sp_open(&s, t.spool, _i, 0, 0, 0);
	ck_assert_uint_eq(stats(&s).records_pending, 10);
	ck_assert_uint_eq(put_rec(&s, 21, 777), 21);
	for (uint64_t k = 11; k <= 20; k++)
		take(&s, k, k, key_len(k, 100000));
	take(&s, 21, 21, 777);
	expect_empty(&s);
	rt_spool_close(&s);

	/* All consumed: nothing comes back, and ids go on. */
	sp_open(&s, t.spool, _i, 0, 0, 0);
	expect_empty(&s);
	ck_assert_uint_eq(stats(&s).records_pending, 0);
	ck_assert_uint_eq(put_rec(&s, 22, 5), 22);
	rt_spool_close(&s);
	sp_open(&s, t.spool, _i, 0, 0, 0);
	take(&s, 22, 22, 5);
	rt_spool_close(&s);
	tdir_free(&t);
}
END_TEST

/* -------------------------------------------------------------- rollover ---- */

START_TEST(test_rollover_and_deletion)
{
	struct tdir t;
	struct rt_spool s;
	tdir_make(&t);
	/* 6 records of 10000 B fit in 64 KiB (24 + 6 * 10024); the 7th rolls. */
	sp_open(&s, t.spool, _i, 0, 65536, 0);
	for (uint64_t k = 1; k <= 20; k++)
		put_rec(&s, k, 10000);
	ck_assert_uint_eq(put_rec(&s, 21, 200000), 21); /* bigger than a segment: its own */
	ck_assert_uint_eq(put_rec(&s, 22, 10), 22);      /* and the next one rolls again */
	ck_assert_uint_eq(count_segs(t.spool), 6);
	ck_assert_uint_eq(stats(&s).segments, 6);
	for (uint64_t id = 1; id <= 22; id += 6)
		ck_assert(seg_exists(t.spool, id));
	ck_assert(seg_exists(t.spool, 21) && seg_exists(t.spool, 22));
	char p[PATH_MAX];
	seg_path(t.spool, 21, p, sizeof p);
	ck_assert_int_eq(file_size(p), 24 + rb(200000));

	for (uint64_t k = 1; k <= 5; k++)
		take(&s, k, k, 10000);
	ck_assert(seg_exists(t.spool, 1));
	take(&s, 6, 6, 10000);
	ck_assert(!seg_exists(t.spool, 1)); /* read to its end: gone */
	ck_assert_uint_eq(count_segs(t.spool), 5);
	for (uint64_t k = 7; k <= 20; k++)
		take(&s, k, k, 10000);
	ck_assert(!seg_exists(t.spool, 7) && !seg_exists(t.spool, 13));
	take(&s, 21, 21, 200000);
	ck_assert(!seg_exists(t.spool, 19) && !seg_exists(t.spool, 21));
	take(&s, 22, 22, 10);
	/* The last segment has room: it stays, and appends continue in it. */
	ck_assert_uint_eq(count_segs(t.spool), 1);
	ck_assert(seg_exists(t.spool, 22));
	rt_spool_close(&s);
	sp_open(&s, t.spool, _i, 0, 65536, 0);
	expect_empty(&s);
	ck_assert_uint_eq(put_rec(&s, 23, 100), 23);
	ck_assert_uint_eq(count_segs(t.spool), 1);
	take(&s, 23, 23, 100);
	rt_spool_close(&s);
	tdir_free(&t);

	/* Full segments all consumed: no file left, and ids still go on after reopen. */
	tdir_make(&t);
	sp_open(&s, t.spool, _i, 0, 4096, 0);
	for (uint64_t k = 1; k <= 3; k++)
		put_rec(&s, k, 4072); /* 24 + 24 + 4072 = 4120 > 4096: one per segment */
	ck_assert_uint_eq(count_segs(t.spool), 3);
	for (uint64_t k = 1; k <= 3; k++)
		take(&s, k, k, 4072);
	ck_assert_uint_eq(count_segs(t.spool), 0);
	rt_spool_close(&s);
	sp_open(&s, t.spool, _i, 0, 4096, 0);
	ck_assert_uint_eq(put_rec(&s, 4, 1), 4);
	take(&s, 4, 4, 1);
	rt_spool_close(&s);
	tdir_free(&t);
}
END_TEST

/* ------------------------------------------------------------------ full ---- */

static long dir_bytes(const char *dir)
{
	long total = 0;
	char p[PATH_MAX];
	for (uint64_t id = 1; id <= 100; id++) {
		seg_path(dir, id, p, sizeof p);
		if (file_size(p) > 0)
			total += file_size(p);
	}
	return total;
}

START_TEST(test_full)
{
	struct tdir t;
	struct rt_spool s;
	uint8_t one = 0;
	uint64_t id;
	tdir_make(&t);
	/* 64 records of 1000 B (1024 on disk) fill 64 KiB exactly. */
	sp_open(&s, t.spool, _i, 65536, 16384, 0);
	for (uint64_t k = 1; k <= 64; k++)
		put_rec(&s, k, 1000);
	ck_assert_uint_eq(stats(&s).bytes_pending, 65536);
	long before = dir_bytes(t.spool);
	uint8_t *b = calloc(1, 1000);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(rt_spool_append(&s, b, 1000, &id), RT_SPOOL_FULL);
	ck_assert_int_eq(rt_spool_append(&s, b, 0, &id), RT_SPOOL_FULL);
	/* Refused before the budget is even looked at; the buffer is never read. */
	ck_assert_int_eq(rt_spool_append(&s, &one, (size_t)RT_SPOOL_MAX_RECORD + 1, &id),
			 RT_SPOOL_TOO_BIG);
	ck_assert_uint_eq(stats(&s).full_drops, 7);
	ck_assert_uint_eq(stats(&s).appended, 64);
	ck_assert_int_eq(dir_bytes(t.spool), before);
	/* One consumed makes room for one more, and only one. */
	take(&s, 1, 1, 1000);
	ck_assert_uint_eq(put_rec(&s, 65, 1000), 65);
	ck_assert_int_eq(rt_spool_append(&s, b, 1000, &id), RT_SPOOL_FULL);
	rt_spool_close(&s);
	sp_open(&s, t.spool, _i, 65536, 16384, 0);
	ck_assert_uint_eq(stats(&s).records_pending, 64);
	for (uint64_t k = 2; k <= 65; k++)
		take(&s, k, k, 1000);
	expect_empty(&s);
	rt_spool_close(&s);
	free(b);
	tdir_free(&t);
}
END_TEST

/* ------------------------------------------------------------ torn tails ---- */

/*
 * Records 1..3, then record 4 of `last_len`, cut at every offset inside record 4:
 * open returns 1..3, counts one torn tail, cuts the file; an append continues
 * cleanly (and reuses id 4, which no caller ever saw).
 */
static void torn_case(struct tdir *t, int no_uring, size_t last_len)
{
	static const size_t lens[4] = {100, 0, 77, 0};
	struct rt_spool s;
	char seg[PATH_MAX], cur[PATH_MAX];
	size_t n;
	sp_open(&s, t->spool, no_uring, 0, 0, 1);
	for (uint64_t k = 1; k <= 3; k++)
		put_rec(&s, k, lens[k - 1]);
	put_rec(&s, 4, last_len);
	rt_spool_close(&s);
	seg_path(t->spool, 1, seg, sizeof seg);
	snprintf(cur, sizeof cur, "%s/cursor", t->spool);
	uint8_t *img = read_all(seg, &n);
	size_t start = n - rb(last_len);
	for (size_t cut = start + 1; cut < n; cut++) {
		write_all(seg, img, cut);
		unlink(cur);
		sp_open(&s, t->spool, no_uring, 0, 0, 1);
		struct rt_spool_stats st = stats(&s);
		ck_assert_msg(st.torn_skipped == 1 && st.corrupt_skipped == 0,
			      "cut at %zu: torn %llu corrupt %llu", cut,
			      (unsigned long long)st.torn_skipped,
			      (unsigned long long)st.corrupt_skipped);
		ck_assert_uint_eq(st.records_pending, 3);
		ck_assert_int_eq(file_size(seg), (long)start);
		for (uint64_t k = 1; k <= 3; k++)
			take(&s, k, k, lens[k - 1]);
		expect_empty(&s);
		ck_assert_uint_eq(put_rec(&s, 99, 50), 4);
		rt_spool_close(&s);
		sp_open(&s, t->spool, no_uring, 0, 0, 1);
		st = stats(&s);
		ck_assert_uint_eq(st.torn_skipped + st.corrupt_skipped, 0);
		take(&s, 4, 99, 50);
		expect_empty(&s);
		rt_spool_close(&s);
	}
	/* A tail of zeros (size grew, data never came) is torn too. */
	{
		uint8_t *z = calloc(1, n + 4096);
		memcpy(z, img, n);
		write_all(seg, z, n + 4096);
		unlink(cur);
		sp_open(&s, t->spool, no_uring, 0, 0, 1);
		ck_assert_uint_eq(stats(&s).torn_skipped, 1);
		ck_assert_int_eq(file_size(seg), (long)n);
		for (uint64_t k = 1; k <= 3; k++)
			take(&s, k, k, lens[k - 1]);
		take(&s, 4, 4, last_len);
		rt_spool_close(&s);
		free(z);
	}
	free(img);
}

START_TEST(test_torn_last_record)
{
	static const size_t last[] = {0, 5, 300};
	for (size_t i = 0; i < sizeof last / sizeof last[0]; i++) {
		struct tdir t;
		tdir_make(&t);
		torn_case(&t, _i, last[i]);
		tdir_free(&t);
	}
}
END_TEST

/* The torn record opened a segment: the cut leaves a header (or less); it goes. */
START_TEST(test_torn_new_segment)
{
	struct tdir t;
	struct rt_spool s;
	char seg1[PATH_MAX], seg3[PATH_MAX], cur[PATH_MAX];
	size_t n, n1;
	tdir_make(&t);
	sp_open(&s, t.spool, _i, 0, 4096, 1);
	put_rec(&s, 1, 1500);
	put_rec(&s, 2, 1500);
	ck_assert_uint_eq(put_rec(&s, 3, 1500), 3); /* 3072 + 1524 > 4096: segment 3 */
	rt_spool_close(&s);
	ck_assert(seg_exists(t.spool, 3));
	seg_path(t.spool, 1, seg1, sizeof seg1);
	seg_path(t.spool, 3, seg3, sizeof seg3);
	snprintf(cur, sizeof cur, "%s/cursor", t.spool);
	uint8_t *img1 = read_all(seg1, &n1), *img = read_all(seg3, &n);
	for (size_t cut = 0; cut < n; cut += cut < 64 ? 1 : 37) {
		write_all(seg1, img1, n1); /* consumed (and deleted) last round */
		write_all(seg3, img, cut);
		unlink(cur);
		sp_open(&s, t.spool, _i, 0, 4096, 1);
		ck_assert_msg(stats(&s).torn_skipped == 1, "cut at %zu: torn %llu", cut,
			      (unsigned long long)stats(&s).torn_skipped);
		ck_assert_uint_eq(stats(&s).corrupt_skipped, 0);
		ck_assert(!seg_exists(t.spool, 3));
		take(&s, 1, 1, 1500);
		take(&s, 2, 2, 1500);
		expect_empty(&s);
		ck_assert_uint_eq(put_rec(&s, 3, 1500), 3);
		take(&s, 3, 3, 1500);
		rt_spool_close(&s);
	}
	free(img1);
	free(img);
	tdir_free(&t);
}
END_TEST

/* ------------------------------------------------------------ corruption ---- */

/* Five 500 B records in segment 1; damage one byte; the other four come back. */
static void corrupt_case(int no_uring, uint64_t victim, long at_in_record)
{
	struct tdir t;
	struct rt_spool s;
	char seg[PATH_MAX];
	tdir_make(&t);
	sp_open(&s, t.spool, no_uring, 0, 0, 1);
	for (uint64_t k = 1; k <= 5; k++)
		put_rec(&s, k, 500);
	rt_spool_close(&s);
	seg_path(t.spool, 1, seg, sizeof seg);
	long size = file_size(seg);
	flip_byte(seg, 24 + (long)(victim - 1) * (long)rb(500) + at_in_record);
	sp_open(&s, t.spool, no_uring, 0, 0, 1);
	ck_assert_uint_eq(stats(&s).corrupt_skipped, 1);
	ck_assert_uint_eq(stats(&s).torn_skipped, 0);
	ck_assert_uint_eq(stats(&s).records_pending, 4);
	ck_assert_uint_eq(stats(&s).bytes_pending, 4 * rb(500));
	for (uint64_t k = 1; k <= 5; k++)
		if (k != victim)
			take(&s, k, k, 500);
	expect_empty(&s);
	ck_assert_int_eq(file_size(seg), size); /* a middle record: nothing cut */
	ck_assert_uint_eq(put_rec(&s, 6, 10), 6);
	take(&s, 6, 6, 10);
	rt_spool_close(&s);
	tdir_free(&t);
}

START_TEST(test_corrupt_middle_record)
{
	corrupt_case(_i, 3, 24 + 100); /* payload: skipped by its length */
	corrupt_case(_i, 2, 5);        /* length field: skipped by the next magic */
	corrupt_case(_i, 4, 0);        /* magic */
	corrupt_case(_i, 3, 17);       /* payload CRC */
	corrupt_case(_i, 1, 24);       /* the first record */
}
END_TEST

/* Damage that appears while the spool is open is caught by peek. */
START_TEST(test_corrupt_after_open)
{
	struct tdir t;
	struct rt_spool s;
	char seg[PATH_MAX];
	tdir_make(&t);
	sp_open(&s, t.spool, _i, 0, 0, 0);
	for (uint64_t k = 1; k <= 6; k++)
		put_rec(&s, k, 500);
	seg_path(t.spool, 1, seg, sizeof seg);
	take(&s, 1, 1, 500);
	flip_byte(seg, 24 + 2 * (long)rb(500) + 24 + 7); /* record 3's payload */
	flip_byte(seg, 24 + 4 * (long)rb(500) + 2);      /* record 5's magic */
	take(&s, 2, 2, 500);
	take(&s, 4, 4, 500);
	take(&s, 6, 6, 500);
	expect_empty(&s);
	struct rt_spool_stats st = stats(&s);
	ck_assert_uint_eq(st.corrupt_skipped, 2);
	ck_assert_uint_eq(st.records_pending, 0);
	ck_assert_uint_eq(st.bytes_pending, 0);
	rt_spool_close(&s);
	tdir_free(&t);
}
END_TEST

/* --------------------------------------------------------------- hostile ---- */

static uint32_t ref_crc32c(const void *data, size_t n)
{
	const uint8_t *p = data;
	uint32_t c = 0xFFFFFFFFu;
	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
	}
	return ~c;
}

static void le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
	return rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* A segment header as docs/spool.md describes it. */
static void make_seg_header(uint8_t h[24], uint64_t first_id, uint32_t version)
{
	memcpy(h, "RTSG", 4);
	le32(h + 4, version);
	le64(h + 8, first_id);
	le32(h + 16, 0);
	le32(h + 20, ref_crc32c(h, 20));
}

/* A record header whose own CRC is right, whatever it claims. */
static void make_rec_header(uint8_t h[24], uint32_t len, uint64_t id)
{
	memcpy(h, "RTSR", 4);
	le32(h + 4, len);
	le64(h + 8, id);
	le32(h + 16, 0x12345678);
	le32(h + 20, ref_crc32c(h, 20));
}

START_TEST(test_hostile_directory)
{
	struct tdir t;
	struct rt_spool s;
	char p[PATH_MAX];
	uint8_t b[4096];
	tdir_make(&t);
	sp_open(&s, t.spool, _i, 0, 0, 0);
	for (uint64_t k = 1; k <= 3; k++)
		put_rec(&s, k, 1000);
	rt_spool_close(&s);

	/* 2: garbage, 3: empty, 4: cut inside its header (corrupt: not the newest). */
	for (size_t i = 0; i < sizeof b; i++)
		b[i] = (uint8_t)mix(i);
	seg_path(t.spool, 2, p, sizeof p);
	write_all(p, b, sizeof b);
	seg_path(t.spool, 3, p, sizeof p);
	write_all(p, b, 0);
	make_seg_header(b, 4, 1);
	seg_path(t.spool, 4, p, sizeof p);
	write_all(p, b, 10);
	/* 5: a record claiming 4 GiB (over the cap: a bad header), then junk. */
	make_seg_header(b, 5, 1);
	make_rec_header(b + 24, 0xFFFFFFF0u, 5);
	memset(b + 48, 0xEE, 1000);
	seg_path(t.spool, 5, p, sizeof p);
	write_all(p, b, 1048);
	/* 6 (the newest): 200 MiB claimed, 100 bytes there: a torn tail. */
	make_seg_header(b, 6, 1);
	make_rec_header(b + 24, 200u * MiB, 6);
	seg_path(t.spool, 6, p, sizeof p);
	write_all(p, b, 148);
	/* Not ours by name: left alone. */
	snprintf(p, sizeof p, "%s/notes.txt", t.spool);
	write_all(p, "hello", 5);
	snprintf(p, sizeof p, "%s/ABCDEF0123456789.seg", t.spool);
	write_all(p, b, 100);
	snprintf(p, sizeof p, "%s/0000000000000001.seg.tmp", t.spool);
	write_all(p, b, 100);

	sp_open(&s, t.spool, _i, 0, 0, 0);
	struct rt_spool_stats st = stats(&s);
	ck_assert_uint_eq(st.corrupt_skipped, 4); /* 2, 3, 4, rest of 5 */
	ck_assert_uint_eq(st.torn_skipped, 1);    /* 6 */
	ck_assert_uint_eq(st.records_pending, 3);
	for (uint64_t id = 2; id <= 6; id++)
		ck_assert_msg(!seg_exists(t.spool, id), "segment %llu still there",
			      (unsigned long long)id);
	snprintf(p, sizeof p, "%s/notes.txt", t.spool);
	ck_assert_int_eq(file_size(p), 5);
	take(&s, 1, 1, 1000);
	ck_assert_uint_eq(put_rec(&s, 4, 64), 4); /* a fresh segment 4 */
	rt_spool_close(&s);
	sp_open(&s, t.spool, _i, 0, 0, 0);
	ck_assert_uint_eq(stats(&s).corrupt_skipped + stats(&s).torn_skipped, 0);
	take(&s, 2, 2, 1000);
	take(&s, 3, 3, 1000);
	take(&s, 4, 4, 64);
	expect_empty(&s);
	rt_spool_close(&s);

	/* A cursor full of garbage: counted, and every record is pending again. */
	sp_open(&s, t.spool, _i, 0, 0, 0);
	put_rec(&s, 5, 10);
	rt_spool_close(&s);
	snprintf(p, sizeof p, "%s/cursor", t.spool);
	write_all(p, b + 100, 544);
	sp_open(&s, t.spool, _i, 0, 0, 0);
	ck_assert_uint_eq(stats(&s).cursor_lost, 1);
	ck_assert_uint_eq(stats(&s).records_pending, 2); /* 4 and 5 are in the file left */
	take(&s, 4, 4, 64);
	take(&s, 5, 5, 10);
	rt_spool_close(&s);

	/* A segment from a newer format: refused with a clear message. */
	make_seg_header(b, 0x100, 2);
	seg_path(t.spool, 0x100, p, sizeof p);
	write_all(p, b, 24);
	{
		struct rt_spool_opts o = {.dir = t.spool, .no_uring = _i};
		char err[512] = "";
		ck_assert_int_eq(rt_spool_open(&s, &o, err, sizeof err), -EPROTO);
		ck_assert_msg(strstr(err, "0000000000000100.seg") && strstr(err, "version 2"),
			      "%s", err);
		rt_spool_close(&s);
	}
	tdir_free(&t);
}
END_TEST

/* Random damage to a good spool: open never fails, nothing wrong ever comes back. */
START_TEST(test_random_damage)
{
	enum { SEGS = 4, ROUNDS = 300 };
	struct tdir t;
	struct rt_spool s;
	uint8_t *img[SEGS + 1] = {0};
	size_t len[SEGS + 1] = {0};
	uint64_t first[SEGS + 1] = {0}, nseg = 0, nrec = 0;
	char p[PATH_MAX], cur[PATH_MAX];
	tdir_make(&t);
	sp_open(&s, t.spool, _i, 0, 8192, 1);
	for (uint64_t k = 1; nseg < SEGS; k++) {
		uint64_t before = stats(&s).segments;
		put_rec(&s, k, key_len(k, 3000));
		if (stats(&s).segments > before && nseg < SEGS)
			first[nseg++] = k;
		nrec = k;
	}
	rt_spool_close(&s);
	for (uint64_t i = 0; i < nseg; i++) {
		seg_path(t.spool, first[i], p, sizeof p);
		img[i] = read_all(p, &len[i]);
	}
	snprintf(cur, sizeof cur, "%s/cursor", t.spool);
	uint64_t rng = 12345;
	for (int round = 0; round < ROUNDS; round++) {
		for (uint64_t i = 0; i < nseg; i++) {
			uint8_t *c = malloc(len[i]);
			size_t n = len[i];
			memcpy(c, img[i], n);
			int kind = (int)((rng = mix(rng)) % 4);
			if (kind == 0)
				n = (size_t)((rng = mix(rng)) % (n + 1)); /* cut */
			int flips = kind == 1 ? 1 + (int)((rng = mix(rng)) % 4) : 0;
			for (int f = 0; f < flips; f++) {
				rng = mix(rng);
				c[rng % n] ^= (uint8_t)(1u << ((rng >> 32) % 8));
			}
			if (kind == 2) { /* a run of junk */
				size_t at = (size_t)((rng = mix(rng)) % n), run = (size_t)(rng >> 40) % 200;
				for (size_t j = at; j < n && j < at + run; j++)
					c[j] = (uint8_t)mix(j + rng);
			}
			seg_path(t.spool, first[i], p, sizeof p);
			write_all(p, c, n);
			free(c);
		}
		unlink(cur);
		sp_open(&s, t.spool, _i, 0, 8192, 1);
		uint64_t last = 0;
		for (;;) {
			const void *rec;
			size_t n;
			uint64_t id;
			int rc = rt_spool_peek(&s, &rec, &n, &id);
			if (rc == RT_SPOOL_EMPTY)
				break;
			ck_assert_int_eq(rc, 0);
			ck_assert_uint_gt(id, last);
			ck_assert_uint_le(id, nrec);
			ck_assert_uint_eq(n, key_len(id, 3000));
			ck_assert_msg(matches(rec, n, id), "round %d: record %llu differs", round,
				      (unsigned long long)id);
			ck_assert_int_eq(rt_spool_consume(&s, id), 0);
			last = id;
		}
		ck_assert_uint_eq(stats(&s).records_pending, 0);
		ck_assert_uint_eq(put_rec(&s, 1000, 10) > last, 1);
		rt_spool_close(&s);
		/* back to the four good files only */
		for (uint64_t id = 1; id <= nrec + 2; id++) {
			seg_path(t.spool, id, p, sizeof p);
			unlink(p);
		}
	}
	for (uint64_t i = 0; i < nseg; i++)
		free(img[i]);
	tdir_free(&t);
}
END_TEST

/* ------------------------------------------------------------ unreadable ---- */

static void expect_open_error(const char *dir, const char *needle1, const char *needle2)
{
	struct rt_spool s;
	struct rt_spool_opts o = {.dir = dir};
	char err[512] = "";
	int rc = rt_spool_open(&s, &o, err, sizeof err);
	ck_assert_int_lt(rc, 0);
	ck_assert_msg(strstr(err, needle1) && strstr(err, needle2), "error was: %s", err);
	rt_spool_close(&s);
}

START_TEST(test_unreadable)
{
	struct tdir t;
	struct rt_spool s;
	char p[PATH_MAX];
	tdir_make(&t);
	/* No directory at all. */
	{
		struct rt_spool_opts o = {0};
		char err[128] = "";
		ck_assert_int_eq(rt_spool_open(&s, &o, err, sizeof err), -EINVAL);
		ck_assert_str_eq(err, "no spool directory given");
	}
	/* The directory is a file. */
	snprintf(p, sizeof p, "%s/plain", t.root);
	write_all(p, "x", 1);
	expect_open_error(p, p, "Not a directory");
	/* A segment name that is a directory. */
	sp_open(&s, t.spool, 0, 0, 0, 0);
	put_rec(&s, 1, 10);
	rt_spool_close(&s);
	seg_path(t.spool, 7, p, sizeof p);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	expect_open_error(t.spool, "0000000000000007.seg", "Is a directory");
	rmdir(p);
	/* A segment we may not read. root reads anything: try as nobody in a child. */
	seg_path(t.spool, 1, p, sizeof p);
	ck_assert_int_eq(chmod(p, 0), 0);
	if (geteuid() != 0) {
		expect_open_error(t.spool, "0000000000000001.seg", "Permission denied");
	} else {
		char cur[PATH_MAX];
		snprintf(cur, sizeof cur, "%s/cursor", t.spool);
		ck_assert_int_eq(chmod(cur, 0666), 0);
		ck_assert_int_eq(chmod(t.spool, 0777), 0);
		for (char *q = t.spool + strlen(t.root); q; q = strchr(q + 1, '/')) {
			*q = '\0';
			chmod(t.spool, 0755);
			*q = '/';
		}
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			struct rt_spool c;
			struct rt_spool_opts o = {.dir = t.spool};
			char err[512] = "";
			if (setgid(65534) != 0 || setuid(65534) != 0)
				_exit(2);
			int rc = rt_spool_open(&c, &o, err, sizeof err);
			_exit(rc < 0 && strstr(err, "0000000000000001.seg") &&
					      strstr(err, "Permission denied")
				      ? 0
				      : 1);
		}
		int status;
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d",
			      status);
	}
	ck_assert_int_eq(chmod(p, 0640), 0);
	/* One process at a time. */
	sp_open(&s, t.spool, 0, 0, 0, 0);
	expect_open_error(t.spool, t.spool, "in use by another process");
	take(&s, 1, 1, 10);
	rt_spool_close(&s);
	sp_open(&s, t.spool, 0, 0, 0, 0);
	rt_spool_close(&s);
	tdir_free(&t);
}
END_TEST

/* ------------------------------------------------------------- io errors ---- */

static void set_fsize_limit(rlim_t soft)
{
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
	rl.rlim_cur = soft == RLIM_INFINITY || soft > rl.rlim_max ? rl.rlim_max : soft;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

/* A write cut short by the file-size limit (then EFBIG) leaves the spool intact. */
START_TEST(test_io_error_leaves_spool_intact)
{
	struct tdir t;
	struct rt_spool s;
	char p[PATH_MAX];
	uint8_t *b = calloc(1, 4000);
	uint64_t id = 0;
	signal(SIGXFSZ, SIG_IGN);
	tdir_make(&t);
	sp_open(&s, t.spool, _i, 0, 0, 0);
	/* A new segment cannot even get its header out: no file is left behind. */
	set_fsize_limit(10);
	ck_assert_int_eq(rt_spool_append(&s, b, 100, &id), -EFBIG);
	ck_assert_uint_eq(count_segs(t.spool), 0);
	set_fsize_limit(RLIM_INFINITY);
	ck_assert_uint_eq(put_rec(&s, 1, 1000), 1);
	seg_path(t.spool, 1, p, sizeof p);
	long size = file_size(p);
	ck_assert_int_eq(size, 24 + (long)rb(1000));
	/* 1500 bytes of room for a 4024-byte record: a short write, then EFBIG. */
	set_fsize_limit((rlim_t)size + 1500);
	ck_assert_int_eq(rt_spool_append(&s, b, 4000, &id), -EFBIG);
	ck_assert_int_eq(file_size(p), size);
	ck_assert_uint_eq(stats(&s).io_errors, 2);
	ck_assert_uint_eq(stats(&s).records_pending, 1);
	ck_assert_uint_eq(put_rec(&s, 2, 500), 2); /* fits under the limit */
	set_fsize_limit(RLIM_INFINITY);
	rt_spool_close(&s);
	sp_open(&s, t.spool, _i, 0, 0, 0);
	ck_assert_uint_eq(stats(&s).corrupt_skipped + stats(&s).torn_skipped, 0);
	take(&s, 1, 1, 1000);
	take(&s, 2, 2, 500);
	expect_empty(&s);
	rt_spool_close(&s);
	free(b);
	tdir_free(&t);
	signal(SIGXFSZ, SIG_DFL);
}
END_TEST

/*
 * A full disk (issue 18 item 2), on a 64 KiB tmpfs of this test's own: appends
 * fail with ENOSPC and leave the spool as it was; every record already in it
 * can still be consumed, since the cursor's room is reserved when the spool
 * opens (before, the first consume needed a page the disk no longer had); and
 * once everything is consumed, an append finds room again: the consumed last
 * segment is given up when the disk is full.
 */
START_TEST(test_full_disk)
{
	struct tdir t;
	struct rt_spool s;
	char why[1024];
	uint8_t *b = malloc(4000);
	uint64_t n = 0, k, id;
	int rc = 0;
	tdir_make(&t);
	if (smallfs_mount(t.root, "64k", why, sizeof why) != 0)
		ck_abort_msg("this test needs a small filesystem: %s", why);
	sp_open(&s, t.spool, _i, 0, 0, 0);
	/* Fill it: big records, then small ones until not even a page is left. */
	for (k = 1; k < 1000 && (rc = rt_spool_append(&s, b, 4000, &id)) == 0; k++)
		n++;
	ck_assert_int_eq(rc, -ENOSPC);
	for (k = 0; k < 10000 && (rc = rt_spool_append(&s, b, 100, &id)) == 0; k++)
		n++;
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_uint_gt(n, 4);
	ck_assert_uint_eq(stats(&s).records_pending, n);
	for (k = 1; k <= n; k++) {
		const void *rec;
		size_t len;
		ck_assert_int_eq(rt_spool_peek(&s, &rec, &len, &id), 0);
		ck_assert_uint_eq(id, k);
		rc = rt_spool_consume(&s, id);
		ck_assert_msg(rc == 0, "consume %llu of %llu on a full disk: %s",
			      (unsigned long long)k, (unsigned long long)n, rt_spool_strerror(rc));
	}
	expect_empty(&s);
	ck_assert_uint_eq(put_rec(&s, 7, 4000), n + 1);
	rt_spool_close(&s);
	/* Reopened, the spool knows what was consumed. */
	sp_open(&s, t.spool, _i, 0, 0, 0);
	ck_assert_uint_eq(stats(&s).cursor_lost, 0);
	take(&s, n + 1, 7, 4000);
	expect_empty(&s);
	rt_spool_close(&s);
	free(b);
	umount2(t.root, MNT_DETACH);
	tdir_free(&t);
}
END_TEST

/* --------------------------------------------------------------- sigkill ---- */

#define KILL_MAX (256u * 1024u) /* record sizes in the kill test */

/* The child appends records keyed by their id until killed, reporting each id. */
static void writer_child(const char *dir, int no_uring, int fd)
{
	struct rt_spool s;
	struct rt_spool_opts o = {.dir = dir, .segment_bytes = 256 * 1024, .no_uring = no_uring};
	char err[256];
	uint8_t *b = malloc(KILL_MAX);
	if (!b || rt_spool_open(&s, &o, err, sizeof err) != 0)
		_exit(2);
	for (uint64_t want = 1; want < 1000000; want++) {
		size_t n = key_len(want, KILL_MAX);
		uint64_t id;
		fill(b, n, want);
		if (rt_spool_append(&s, b, n, &id) != 0 || id != want)
			_exit(3);
		if (write(fd, &id, sizeof id) != (ssize_t)sizeof id)
			_exit(4);
	}
	_exit(0);
}

START_TEST(test_sigkill_mid_stream)
{
	struct tdir t;
	struct rt_spool s;
	int fds[2];
	uint64_t id, reported = 0, count = 0;
	tdir_make(&t);
	/* Create it here, so that the child's open does not race with nothing. */
	sp_open(&s, t.spool, _i, 0, 0, 0);
	rt_spool_close(&s);
	ck_assert_int_eq(pipe(fds), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		writer_child(t.spool, _i, fds[1]);
	}
	close(fds[1]);
	while (count < 300 && read(fds[0], &id, sizeof id) == (ssize_t)sizeof id) {
		ck_assert_uint_eq(id, reported + 1);
		reported = id;
		count++;
	}
	ck_assert_uint_eq(count, 300); /* else the child died on its own */
	usleep((useconds_t)(mix((uint64_t)time(NULL) ^ (uint64_t)getpid()) % 3000)); /* land anywhere */
	kill(pid, SIGKILL);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	while (read(fds[0], &id, sizeof id) == (ssize_t)sizeof id)
		reported = id;
	close(fds[0]);

	sp_open(&s, t.spool, _i, 0, 0, 0);
	struct rt_spool_stats st = stats(&s);
	ck_assert_uint_eq(st.corrupt_skipped, 0);
	ck_assert_uint_le(st.torn_skipped, 1);
	ck_assert_uint_ge(st.records_pending, reported);
	uint64_t n = st.records_pending;
	for (uint64_t k = 1; k <= n; k++)
		take(&s, k, k, key_len(k, KILL_MAX)); /* 1..n, every byte as written */
	expect_empty(&s);
	ck_assert_uint_eq(put_rec(&s, 7, 7), n + 1);
	rt_spool_close(&s);
	sp_open(&s, t.spool, _i, 0, 0, 0);
	take(&s, n + 1, 7, 7);
	rt_spool_close(&s);
	tdir_free(&t);
}
END_TEST

/* ---------------------------------------------------------------- format ---- */

/* The bytes on disk are the ones docs/spool.md describes. */
START_TEST(test_format_on_disk)
{
	struct tdir t;
	struct rt_spool s;
	char p[PATH_MAX];
	size_t n;
	uint64_t id;
	ck_assert_uint_eq(ref_crc32c("123456789", 9), 0xE3069283u); /* CRC32C check value */
	tdir_make(&t);
	sp_open(&s, t.spool, _i, 0, 0, 0);
	ck_assert_int_eq(rt_spool_append(&s, "hello", 5, &id), 0);
	ck_assert_uint_eq(id, 1);
	seg_path(t.spool, 1, p, sizeof p);
	uint8_t *f = read_all(p, &n);
	ck_assert_uint_eq(n, 24 + 24 + 8);
	ck_assert_mem_eq(f, "RTSG", 4);
	ck_assert_uint_eq(rd32(f + 4), 1);
	ck_assert_uint_eq(rd64(f + 8), 1);
	ck_assert_uint_eq(rd32(f + 16), 0);
	ck_assert_uint_eq(rd32(f + 20), ref_crc32c(f, 20));
	const uint8_t *r = f + 24;
	ck_assert_mem_eq(r, "RTSR", 4);
	ck_assert_uint_eq(rd32(r + 4), 5);
	ck_assert_uint_eq(rd64(r + 8), 1);
	uint8_t d[12 + 5];
	memcpy(d, r + 8, 8);
	memcpy(d + 8, r + 4, 4);
	memcpy(d + 12, "hello", 5);
	ck_assert_uint_eq(rd32(r + 16), ref_crc32c(d, sizeof d)); /* id, len, payload */
	ck_assert_uint_eq(rd32(r + 20), ref_crc32c(r, 20));
	ck_assert_mem_eq(r + 24, "hello\0\0\0", 8);
	free(f);
	/* The first consume writes cursor slot 1 (offset 512), sequence 1. */
	ck_assert_int_eq(rt_spool_consume(&s, 1), 0);
	snprintf(p, sizeof p, "%s/cursor", t.spool);
	f = read_all(p, &n);
	ck_assert_uint_eq(n, 512 + 32);
	const uint8_t *c = f + 512;
	ck_assert_mem_eq(c, "RTSC", 4);
	ck_assert_uint_eq(rd32(c + 4), 1);
	ck_assert_uint_eq(rd64(c + 8), 1);
	ck_assert_uint_eq(rd64(c + 16), 1);
	ck_assert_uint_eq(rd32(c + 28), ref_crc32c(c, 28));
	free(f);
	rt_spool_close(&s);
	tdir_free(&t);
}
END_TEST

/* One test case per test, so ctest runs them as separate entries in parallel
 * (tests/agent/spool/CMakeLists.txt names each; CK_RUN_CASE picks one). Each runs
 * twice: plain writes (_i == 0) and io_uring (_i == 1). */
#define SPOOL_CASE(su, name, fn, loops)                                        \
	do {                                                                   \
		TCase *tc_ = tcase_create(name);                               \
		tcase_set_timeout(tc_, 120);                                   \
		tcase_add_loop_test(tc_, fn, 0, loops);                        \
		suite_add_tcase(su, tc_);                                      \
	} while (0)

int main(void)
{
	Suite *su = suite_create("agent_spool");
	SPOOL_CASE(su, "round_trip", test_round_trip, 2);
	SPOOL_CASE(su, "persistence", test_persistence, 2);
	SPOOL_CASE(su, "rollover_and_deletion", test_rollover_and_deletion, 2);
	SPOOL_CASE(su, "full", test_full, 2);
	SPOOL_CASE(su, "torn_last_record", test_torn_last_record, 2);
	SPOOL_CASE(su, "torn_new_segment", test_torn_new_segment, 2);
	SPOOL_CASE(su, "corrupt_middle_record", test_corrupt_middle_record, 2);
	SPOOL_CASE(su, "corrupt_after_open", test_corrupt_after_open, 2);
	SPOOL_CASE(su, "hostile_directory", test_hostile_directory, 2);
	SPOOL_CASE(su, "random_damage", test_random_damage, 2);
	SPOOL_CASE(su, "unreadable", test_unreadable, 1);
	SPOOL_CASE(su, "io_error_leaves_spool_intact", test_io_error_leaves_spool_intact, 2);
	SPOOL_CASE(su, "full_disk", test_full_disk, 2);
	SPOOL_CASE(su, "sigkill_mid_stream", test_sigkill_mid_stream, 2);
	SPOOL_CASE(su, "format_on_disk", test_format_on_disk, 2);
	return test_run_suite(su);
}
