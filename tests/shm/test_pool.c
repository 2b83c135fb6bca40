/*
 * Pool create/attach: every documented failure gives its error code and a
 * sentence, never a crash: missing pool, wrong permissions, ABI version
 * mismatch, bad magic, geometry mismatch (expected vs actual, header vs object
 * size, a ring's own size and mask), a pool still initialising, bad create
 * options, a pool larger than /dev/shm (refused at create), and an object whose
 * memory was never reserved (refused at attach).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/smallfs.h"
#include "common/testpool.h"
#include "retrace/retrace.h"
#include "shm/drain.h"

static int attach_named(const char *name, uint32_t bs, uint32_t bc, char *err, size_t n)
{
	struct rt_pool_attach_opts ao = {.name = name, .expect_buffer_size = bs,
					 .expect_buffer_count = bc};
	struct rt_pool p;
	int rc = rt_pool_attach(&ao, &p, err, n);
	if (rc == RETRACE_OK)
		rt_pool_detach(&p);
	return rc;
}

START_TEST(test_attach_ok_and_layout)
{
	struct rt_pool pool, c;
	struct rt_pool_attach_opts ao = {0};
	char name[64], err[256];
	uint32_t i;
	test_pool_name(name, sizeof name, "ok");
	test_pool_create(&pool, name, 8192, 100);
	ao.name = name;
	ck_assert_int_eq(rt_pool_attach(&ao, &c, err, sizeof err), RETRACE_OK);
	ck_assert_uint_eq(c.hdr->buffer_size, 8192);
	ck_assert_uint_eq(c.hdr->buffer_count, 100);
	ck_assert_uint_eq(c.hdr->agent_id, 42);
	ck_assert_uint_eq(c.hdr->buffers_offset % 4096, 0);
	ck_assert_uint_gt(c.hdr->tsc_hz, 1000000);
	/* Every buffer id is on the available queue exactly once. */
	ck_assert_uint_eq(rt_ring_count(c.ring[RT_Q_AVAILABLE]), 100);
	for (i = 0; i < 100; i++) {
		struct rt_available_entry e;
		ck_assert(rt_available_pop(c.ring[RT_Q_AVAILABLE],
					   RT_POOL_SLOTS(&c, RT_Q_AVAILABLE, rt_available_entry), &e));
		ck_assert_uint_eq(e.buffer_id, i);
	}
	/* The buffers are writable through both mappings. */
	rt_pool_buffer(&c, 99)->trace_lo = 77;
	ck_assert_uint_eq(rt_pool_buffer(&pool, 99)->trace_lo, 77);
	rt_pool_detach(&c);
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_missing_pool)
{
	char err[256] = "";
	ck_assert_int_eq(attach_named("/rt-test-does-not-exist", 0, 0, err, sizeof err),
			 RETRACE_E_NOPOOL);
	ck_assert_ptr_nonnull(strstr(err, "no pool named /rt-test-does-not-exist"));
}
END_TEST

START_TEST(test_version_mismatch)
{
	struct rt_pool pool;
	char name[64], err[256] = "";
	test_pool_name(name, sizeof name, "ver");
	test_pool_create(&pool, name, 4096, 8);
	pool.hdr->abi_version = RT_ABI_VERSION + 1;
	ck_assert_int_eq(attach_named(name, 0, 0, err, sizeof err), RETRACE_E_VERSION);
	ck_assert_ptr_nonnull(strstr(err, "ABI version"));
	pool.hdr->abi_version = RT_ABI_VERSION;
	pool.hdr->magic ^= 1;
	ck_assert_int_eq(attach_named(name, 0, 0, err, sizeof err), RETRACE_E_CORRUPT);
	pool.hdr->magic ^= 1;
	pool.hdr->state = RT_POOL_INITIALIZING;
	ck_assert_int_eq(attach_named(name, 0, 0, err, sizeof err), RETRACE_E_NOTREADY);
	pool.hdr->state = RT_POOL_READY;
	ck_assert_int_eq(attach_named(name, 0, 0, err, sizeof err), RETRACE_OK);
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_geometry_mismatch)
{
	struct rt_pool pool;
	char name[64], err[256] = "";
	int fd;
	test_pool_name(name, sizeof name, "geo");
	test_pool_create(&pool, name, 8192, 16);
	ck_assert_int_eq(attach_named(name, 32768, 0, err, sizeof err), RETRACE_E_GEOMETRY);
	ck_assert_ptr_nonnull(strstr(err, "8192-byte buffers, 32768 were expected"));
	ck_assert_int_eq(attach_named(name, 8192, 17, err, sizeof err), RETRACE_E_GEOMETRY);
	ck_assert_int_eq(attach_named(name, 8192, 16, err, sizeof err), RETRACE_OK);
	/* A header that claims more buffers than the object holds. */
	pool.hdr->buffer_count = 17;
	ck_assert_int_eq(attach_named(name, 0, 0, err, sizeof err), RETRACE_E_GEOMETRY);
	pool.hdr->buffer_count = 16;
	/* Ring slots pointing past the buffer region. */
	pool.hdr->rings[RT_Q_TRIGGER].slots_offset = pool.hdr->total_size;
	ck_assert_int_eq(attach_named(name, 0, 0, err, sizeof err), RETRACE_E_GEOMETRY);
	ck_assert_ptr_nonnull(strstr(err, "queue slots offset"));
	pool.hdr->rings[RT_Q_TRIGGER].slots_offset = 0;
	/* A truncated object: the header no longer matches the size. */
	fd = shm_open(name, O_RDWR, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)pool.hdr->total_size - 8192), 0);
	close(fd);
	ck_assert_int_eq(attach_named(name, 0, 0, err, sizeof err), RETRACE_E_GEOMETRY);
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_tiny_object_is_not_ready)
{
	char name[64], err[256] = "";
	int fd;
	test_pool_name(name, sizeof name, "tiny");
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 100), 0);
	close(fd);
	ck_assert_int_eq(attach_named(name, 0, 0, err, sizeof err), RETRACE_E_NOTREADY);
	rt_pool_unlink(name);
}
END_TEST

START_TEST(test_wrong_permissions)
{
	struct rt_pool pool;
	char name[64];
	int status;
	pid_t pid;
	test_pool_name(name, sizeof name, "perm");
	test_pool_create(&pool, name, 4096, 8);
	{
		struct stat st;
		char path[128];
		snprintf(path, sizeof path, "/dev/shm%s", name);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_uint_eq(st.st_mode & 0777, 0600);
	}
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char err[256] = "";
		int rc;
		/* Root reads anything: drop to nobody. A non-root runner uses mode 000. */
		if (getuid() == 0) {
			if (setgid(65534) != 0 || setuid(65534) != 0)
				_exit(3);
		} else {
			char path[128];
			snprintf(path, sizeof path, "/dev/shm%s", name);
			if (chmod(path, 0) != 0)
				_exit(4);
		}
		rc = attach_named(name, 0, 0, err, sizeof err);
		_exit(rc == RETRACE_E_PERM && strstr(err, "permission denied") ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_bad_create_options)
{
	struct rt_pool_create_opts o;
	struct rt_pool p;
	char err[256] = "";
	rt_pool_create_defaults(&o);
	o.name = "no-slash";
	ck_assert_int_eq(rt_pool_create(&o, &p, err, sizeof err), RETRACE_E_INVAL);
	char name[64];
	snprintf(name, sizeof name, "/rt-test-badopts-%d", (int)getpid()); /* two test runs at once */
	o.name = name;
	o.buffer_size = 5000;
	ck_assert_int_eq(rt_pool_create(&o, &p, err, sizeof err), RETRACE_E_GEOMETRY);
	ck_assert_ptr_nonnull(strstr(err, "multiple of the page size"));
	o.buffer_size = 4096;
	o.buffer_count = 0;
	ck_assert_int_eq(rt_pool_create(&o, &p, err, sizeof err), RETRACE_E_GEOMETRY);
	/* A second create of the same name without replace is refused. */
	o.buffer_count = 4;
	ck_assert_int_eq(rt_pool_create(&o, &p, err, sizeof err), RETRACE_OK);
	{
		struct rt_pool q;
		ck_assert_int_eq(rt_pool_create(&o, &q, err, sizeof err), RETRACE_E_EXISTS);
	}
	test_pool_destroy(&p);
}
END_TEST

/* ------------------------------------------------ memory of the pool ---- */

static struct rt_pool_create_opts small_opts(const char *name, uint32_t count)
{
	struct rt_pool_create_opts o;
	rt_pool_create_defaults(&o);
	o.name = name;
	o.buffer_size = 4096;
	o.buffer_count = count;
	o.breadcrumb_slots = 1024;
	o.trigger_slots = 1024;
	o.client_slots = 8;
	o.agent_id = 42;
	return o;
}

/*
 * In a child: /dev/shm becomes an 8 MiB tmpfs (a mount namespace of the child
 * alone; as Docker's 64 MiB default is to the 128 MiB default pool). A 4 MiB
 * pool is created and every byte of it can be touched; a 16 MiB pool, and then
 * a 6 MiB one next to the first, are refused with a sentence naming the size
 * wanted, the space free and the flags to change, and leave no object behind.
 * Before, both were created sparse and the first write past the free space
 * killed the writer with SIGBUS. Without mount rights the child uses a file
 * size limit of 5 MiB instead (posix_fallocate past it fails with EFBIG; the
 * limit is per object, hence 5 MiB: 4 fits, 6 and 16 do not).
 */
static void shm_too_small_child(void)
{
	struct rt_pool a, b;
	struct rt_pool_create_opts o;
	char why[1024], err[512], na[64], nb[64];
	int rc;
	signal(SIGXFSZ, SIG_IGN);
	if (smallfs_mount("/dev/shm", "8m", why, sizeof why) != 0) {
		struct rlimit rl = { 5u << 20, 5u << 20 };
		fprintf(stderr, "shm_pool: no tmpfs (%s); a file size limit instead\n", why);
		if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
			_exit(10);
	}
	snprintf(na, sizeof na, "/rt-test-small-a-%d", (int)getpid());
	snprintf(nb, sizeof nb, "/rt-test-small-b-%d", (int)getpid());
	o = small_opts(na, 1000); /* ~4 MiB */
	if ((rc = rt_pool_create(&o, &a, err, sizeof err)) != RETRACE_OK) {
		fprintf(stderr, "4 MiB pool refused: %s\n", err);
		_exit(11);
	}
	memset(a.base + a.hdr->buffers_offset, 0x5a, a.size - a.hdr->buffers_offset);
	o = small_opts(nb, 4000); /* ~16 MiB */
	rc = rt_pool_create(&o, &b, err, sizeof err);
	fprintf(stderr, "16 MiB pool on an 8 MiB /dev/shm: %d: %s\n", rc, err);
	if (rc == RETRACE_OK)
		_exit(12);
	if (!strstr(err, "MiB") || !strstr(err, "free") || !strstr(err, "--buffers") ||
	    !strstr(err, "--buffer-size"))
		_exit(13);
	if (shm_open(nb, O_RDONLY, 0) >= 0 || errno != ENOENT)
		_exit(14);
	o = small_opts(nb, 1500); /* ~6 MiB, with 4 MiB taken */
	rc = rt_pool_create(&o, &b, err, sizeof err);
	fprintf(stderr, "6 MiB pool next to a 4 MiB one: %d: %s\n", rc, err);
	if (rc == RETRACE_OK)
		_exit(15);
	test_pool_destroy(&a);
	_exit(0);
}

START_TEST(test_pool_larger_than_shm)
{
	int status;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		shm_too_small_child();
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status), "the child died of signal %d", WTERMSIG(status));
	ck_assert_msg(WEXITSTATUS(status) == 0, "child check %d failed", WEXITSTATUS(status));
}
END_TEST

/*
 * An object whose header and rings are sound but whose memory was never
 * reserved (an older agent made it with ftruncate): a client must not attach,
 * since touching a page /dev/shm cannot back kills it with SIGBUS. Once the
 * memory is reserved, it attaches.
 */
START_TEST(test_attach_needs_reserved_memory)
{
	struct rt_pool real, c;
	struct rt_pool_attach_opts ao = { 0 };
	char name[64], fake[64], err[256] = "";
	uint8_t *m;
	int fd;
	test_pool_name(name, sizeof name, "real");
	test_pool_name(fake, sizeof fake, "sparse");
	test_pool_create(&real, name, 4096, 256);
	fd = shm_open(fake, O_RDWR | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)real.size), 0);
	m = mmap(NULL, real.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert(m != MAP_FAILED);
	memcpy(m, real.base, real.hdr->buffers_offset); /* header, registry, rings */
	ao.name = fake;
	ck_assert_int_eq(rt_pool_attach(&ao, &c, err, sizeof err), RETRACE_E_NOTREADY);
	ck_assert_msg(strstr(err, "reserved") != NULL, "%s", err);
	ck_assert_int_eq(posix_fallocate(fd, 0, (off_t)real.size), 0);
	ck_assert_int_eq(rt_pool_attach(&ao, &c, err, sizeof err), RETRACE_OK);
	rt_pool_detach(&c);
	munmap(m, real.size);
	close(fd);
	rt_pool_unlink(fake);
	test_pool_destroy(&real);
}
END_TEST

/*
 * The object's size against the header's geometry, and the rings' own size
 * and mask (a client takes its ring index mask from them), before anything
 * past the header is touched.
 */
START_TEST(test_attach_checks_size_and_rings)
{
	struct rt_pool pool;
	char name[64], err[256] = "";
	int fd;
	test_pool_name(name, sizeof name, "size");
	test_pool_create(&pool, name, 4096, 32);
	/* A ring whose mask is not its capacity's. */
	pool.ring[RT_Q_COMPLETE]->mask = 0xffffffffu;
	ck_assert_int_eq(attach_named(name, 0, 0, err, sizeof err), RETRACE_E_GEOMETRY);
	ck_assert_msg(strstr(err, "queue") != NULL, "%s", err);
	pool.ring[RT_Q_COMPLETE]->mask = pool.hdr->rings[RT_Q_COMPLETE].capacity - 1;
	pool.ring[RT_Q_TRIGGER]->size = 2;
	ck_assert_int_eq(attach_named(name, 0, 0, err, sizeof err), RETRACE_E_GEOMETRY);
	pool.ring[RT_Q_TRIGGER]->size = pool.hdr->rings[RT_Q_TRIGGER].capacity;
	ck_assert_int_eq(attach_named(name, 0, 0, err, sizeof err), RETRACE_OK);
	/* An object longer than the header says. */
	fd = shm_open(name, O_RDWR, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)pool.size + 4096), 0);
	ck_assert_int_eq(attach_named(name, 0, 0, err, sizeof err), RETRACE_E_GEOMETRY);
	ck_assert_msg(strstr(err, "bytes but the object has") != NULL, "%s", err);
	close(fd);
	test_pool_destroy(&pool);
}
END_TEST

/* Stamp a sealed segment header at (id, off) naming trace lo with `bytes`. */
static void stamp_segment(struct rt_pool *p, uint32_t id, uint32_t off, uint64_t lo,
			  uint32_t bytes, uint32_t flags)
{
	struct rt_buffer_header *h = rt_pool_segment(p, id, off);
	memset(h, 0, sizeof *h);
	h->magic = RT_BUF_MAGIC;
	h->trace_lo = lo;
	h->bytes = bytes;
	h->flags = flags;
}

/*
 * ABI 5 complete entries name a segment by buffer and offset: the check takes
 * a segment header anywhere 8-aligned with its records inside the buffer, and
 * refuses offsets that are unaligned or run past it, headers that disagree,
 * and close marks without their header.
 */
START_TEST(test_segment_entry_check)
{
	struct rt_pool pool;
	char name[64];
	struct rt_complete_entry e;
	const uint32_t size = 4096, second = rt_seg_next(0, 100);
	test_pool_name(name, sizeof name, "segcheck");
	test_pool_create(&pool, name, size, 4);
	ck_assert_uint_eq(second, 168); /* 64 + 100, rounded up to 8 */
	stamp_segment(&pool, 1, 0, 7, 100, RT_BUF_INUSE | RT_BUF_SEALED | RT_BUF_KEPT);
	stamp_segment(&pool, 1, second, 8, 200, RT_BUF_INUSE | RT_BUF_SEALED);
	e = (struct rt_complete_entry){ .trace_lo = 8, .buffer_id = 1, .bytes = 200,
					.offset = second };
	ck_assert_int_eq(rt_complete_entry_check(&pool, &e), RT_CE_OK);
	e.offset = second + 4; /* unaligned */
	ck_assert_int_eq(rt_complete_entry_check(&pool, &e), RT_CE_BYTES);
	e.offset = size - 64; /* the records would run past the buffer */
	ck_assert_int_eq(rt_complete_entry_check(&pool, &e), RT_CE_BYTES);
	e.offset = 0; /* another segment's header */
	ck_assert_int_eq(rt_complete_entry_check(&pool, &e), RT_CE_HEADER);
	e = (struct rt_complete_entry){ .trace_lo = 7, .buffer_id = 1, .bytes = 100, .offset = 0,
					.flags = RT_ENTRY_KEPT };
	ck_assert_int_eq(rt_complete_entry_check(&pool, &e), RT_CE_OK);
	/* a close mark needs its header, and names no trace nor bytes */
	e = (struct rt_complete_entry){ .buffer_id = 1, .offset = 512, .flags = RT_ENTRY_CLOSE };
	ck_assert_int_eq(rt_complete_entry_check(&pool, &e), RT_CE_HEADER);
	stamp_segment(&pool, 1, 512, 0, 0, RT_BUF_CLOSED);
	ck_assert_int_eq(rt_complete_entry_check(&pool, &e), RT_CE_CLOSE_MARK);
	e.trace_lo = 9;
	ck_assert_int_eq(rt_complete_entry_check(&pool, &e), RT_CE_HEADER);
	/* an unsealed header is no segment yet */
	stamp_segment(&pool, 2, 0, 5, 10, RT_BUF_INUSE);
	e = (struct rt_complete_entry){ .trace_lo = 5, .buffer_id = 2, .bytes = 10 };
	ck_assert_int_eq(rt_complete_entry_check(&pool, &e), RT_CE_HEADER);
	test_pool_destroy(&pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("shm_pool");
	TCase *tc = tcase_create("pool");
	tcase_add_test(tc, test_attach_ok_and_layout);
	tcase_add_test(tc, test_missing_pool);
	tcase_add_test(tc, test_version_mismatch);
	tcase_add_test(tc, test_geometry_mismatch);
	tcase_add_test(tc, test_tiny_object_is_not_ready);
	tcase_add_test(tc, test_wrong_permissions);
	tcase_add_test(tc, test_bad_create_options);
	tcase_add_test(tc, test_pool_larger_than_shm);
	tcase_add_test(tc, test_attach_needs_reserved_memory);
	tcase_add_test(tc, test_attach_checks_size_and_rings);
	tcase_add_test(tc, test_segment_entry_check);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
