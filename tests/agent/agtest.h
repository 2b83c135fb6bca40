/*
 * tests/agent/agtest.h — helpers for the agent suites: child processes that die
 * with the test, pipes with deadlines, pool names that a run can clean up after
 * itself, an in-process agent with a small geometry, and a hand-made writer
 * that stamps buffers and pushes queue entries directly (for malformed input).
 *
 * Cleanup: children die with the test process (PR_SET_PDEATHSIG, kept across
 * exec, so daemons too). Pool names carry the suite runner's pid, and
 * ag_run_suite() unlinks whatever a failed test left under that prefix in
 * /dev/shm and /tmp: a failing ck_assert ends the forked test process with
 * _exit, so no teardown or atexit handler of the test would run. The atexit
 * list below still cleans up after a test that returns without closing.
 */
#ifndef RETRACE_TESTS_AGENT_AGTEST_H
#define RETRACE_TESTS_AGENT_AGTEST_H

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "common/suite.h"
#include "retrace/retrace.h"
#include "shm/frame.h"
#include "shm/pool.h"

/* ------------------------------------------------------------- clock ---- */

static inline uint64_t ag_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ag_deadline(double seconds)
{
	return ag_now_ns() + (uint64_t)(seconds * 1e9);
}

static inline void ag_nap_us(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000L };
	nanosleep(&ts, NULL);
}

/* ------------------------------------------------- cleanup registry ---- */

#define AG_MAX_CLEAN 64

static pid_t ag_runner_pid;      /* the suite's main process (set in main) */
static pid_t ag_owner_pid;       /* the process whose lists these are */
static char ag_pools[AG_MAX_CLEAN][64];
static int ag_npools;
static pid_t ag_kids[AG_MAX_CLEAN];
static int ag_nkids;
static char ag_files[AG_MAX_CLEAN][256];
static int ag_nfiles;

static inline void ag_cleanup_now(void)
{
	int i;
	if (getpid() != ag_owner_pid)
		return; /* a child inherited the handler: not its business */
	for (i = 0; i < ag_nkids; i++)
		if (ag_kids[i] > 0) {
			kill(ag_kids[i], SIGKILL);
			waitpid(ag_kids[i], NULL, 0);
			ag_kids[i] = 0;
		}
	for (i = 0; i < ag_npools; i++)
		if (ag_pools[i][0]) {
			shm_unlink(ag_pools[i]);
			ag_pools[i][0] = 0;
		}
	for (i = 0; i < ag_nfiles; i++)
		if (ag_files[i][0]) {
			unlink(ag_files[i]);
			ag_files[i][0] = 0;
		}
}

static inline void ag_register_owner(void)
{
	if (ag_owner_pid != getpid()) {
		ag_owner_pid = getpid();
		ag_npools = ag_nkids = ag_nfiles = 0;
		atexit(ag_cleanup_now);
	}
}

/* A unique pool name under this run's prefix, unlinked at exit. */
static inline void ag_pool_name(char *out, size_t n, const char *tag)
{
	static unsigned counter;
	ag_register_owner();
	snprintf(out, n, "/rt-test-ag%d-%s-%d-%u", (int)ag_runner_pid, tag, (int)getpid(),
		 counter++);
	if (ag_npools < AG_MAX_CLEAN)
		snprintf(ag_pools[ag_npools++], 64, "%s", out);
}

static inline void ag_track_file(const char *path)
{
	ag_register_owner();
	if (ag_nfiles < AG_MAX_CLEAN)
		snprintf(ag_files[ag_nfiles++], 256, "%s", path);
}

static inline void ag_track_kid(pid_t pid)
{
	ag_register_owner();
	if (ag_nkids < AG_MAX_CLEAN)
		ag_kids[ag_nkids++] = pid;
}

static inline void ag_untrack_kid(pid_t pid)
{
	int i;
	for (i = 0; i < ag_nkids; i++)
		if (ag_kids[i] == pid)
			ag_kids[i] = 0;
}

static inline int ag_shm_exists(const char *name)
{
	char path[128];
	snprintf(path, sizeof path, "/dev/shm%s", name);
	return access(path, F_OK) == 0;
}

/* Called by main() after the run: whatever a failed or crashed test left. */
static inline void ag_sweep_dir(const char *dir, const char *prefix, int shm)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		char path[600];
		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		if (shm) {
			snprintf(path, sizeof path, "/%s", e->d_name);
			fprintf(stderr, "agent tests: removing leftover pool %s\n", path);
			shm_unlink(path);
		} else {
			snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
			unlink(path);
		}
	}
	closedir(d);
}

static inline void ag_sweep_run(void)
{
	char prefix[64];
	snprintf(prefix, sizeof prefix, "rt-test-ag%d-", (int)ag_runner_pid);
	ag_sweep_dir("/dev/shm", prefix, 1);
	ag_sweep_dir("/tmp", prefix, 0);
	snprintf(prefix, sizeof prefix, "retrace-rt-test-ag%d-", (int)ag_runner_pid);
	ag_sweep_dir("/tmp", prefix, 0);
}

/* Run a suite and sweep; returns the exit status. */
static inline int ag_run_suite(Suite *s)
{
	int rc;
	ag_runner_pid = getpid();
	rc = test_run_suite(s);
	ag_sweep_run();
	return rc;
}

/* ---------------------------------------------------------- children ---- */

/*
 * Fork a child that dies with the test process. In the child returns 0 (the
 * caller runs its body and must end with _exit/exit, never a ck_assert); in
 * the parent the pid, tracked for cleanup.
 */
static inline pid_t ag_fork(void)
{
	pid_t parent = getpid(), pid;
	ag_register_owner();
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(99);
		return 0;
	}
	ag_track_kid(pid);
	return pid;
}

/* In a child: print why and exit with `code` (tests check for status 0). */
#define CHILD_FAIL(code, ...)                                                   \
	do {                                                                    \
		fprintf(stderr, "child %d: ", (int)getpid());                   \
		fprintf(stderr, __VA_ARGS__);                                   \
		fprintf(stderr, "\n");                                          \
		_exit(code);                                                    \
	} while (0)

/* Wait for pid to end within `seconds`; returns its wait status, or -1 on timeout. */
static inline int ag_wait_exit(pid_t pid, double seconds)
{
	uint64_t end = ag_deadline(seconds);
	int status;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid) {
			ag_untrack_kid(pid);
			return status;
		}
		if (r < 0)
			return -1;
		if (ag_now_ns() > end)
			return -1;
		ag_nap_us(2000);
	}
}

/* SIGKILL and reap (the zombie would still look alive to the agent). */
static inline void ag_kill9(pid_t pid)
{
	int status;
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ag_untrack_kid(pid);
}

static inline void ag_assert_exited_ok(pid_t pid, double seconds, const char *what)
{
	int st = ag_wait_exit(pid, seconds);
	ck_assert_msg(st != -1, "%s (pid %d) did not exit within %.0f s", what, (int)pid, seconds);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "%s (pid %d) ended badly: %s %d", what, (int)pid,
		      WIFEXITED(st) ? "exit" : "signal",
		      WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* ------------------------------------------------------------- pipes ---- */

static inline int ag_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read exactly n bytes within timeout_ms (-1: forever). 0, or -1 (EOF/timeout). */
static inline int ag_read_exact(int fd, void *buf, size_t n, int timeout_ms)
{
	char *p = buf;
	uint64_t end = timeout_ms < 0 ? 0 : ag_deadline(timeout_ms / 1000.0);
	while (n > 0) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		int wait_ms = -1;
		ssize_t r;
		if (timeout_ms >= 0) {
			uint64_t now = ag_now_ns();
			if (now >= end)
				return -1;
			wait_ms = (int)((end - now) / 1000000) + 1;
		}
		if (poll(&pfd, 1, wait_ms) <= 0)
			continue;
		r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Fixed-size messages from a non-blocking pipe, reassembled across reads. */
struct ag_reader {
	int fd;
	int eof;
	size_t msg_size;
	unsigned char part[256];
	size_t have;
};

static inline void ag_reader_init(struct ag_reader *r, int fd, size_t msg_size)
{
	memset(r, 0, sizeof *r);
	r->fd = fd;
	r->msg_size = msg_size;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* 1 and a message in out, 0 if none complete yet (r->eof at end of stream). */
static inline int ag_reader_next(struct ag_reader *r, void *out)
{
	while (r->have < r->msg_size && !r->eof) {
		ssize_t n = read(r->fd, r->part + r->have, r->msg_size - r->have);
		if (n > 0)
			r->have += (size_t)n;
		else if (n == 0)
			r->eof = 1;
		else if (errno != EINTR)
			break; /* EAGAIN */
	}
	if (r->have < r->msg_size)
		return 0;
	memcpy(out, r->part, r->msg_size);
	r->have = 0;
	return 1;
}

/* -------------------------------------------------------------- agent ---- */

static inline void ag_config(struct rt_agent_config *c, const char *pool, uint32_t count,
			     uint32_t size, double threshold)
{
	rt_agent_config_defaults(c);
	snprintf(c->pool, sizeof c->pool, "%s", pool);
	c->buffer_count = count;
	c->buffer_size = size;
	c->evict_threshold = threshold;
	c->pinned_share = 1.0;
	c->liveness_interval = 0.02;
	c->unlink_at_exit = 1;
	c->breadcrumb_slots = 1024;
	c->trigger_slots = 1024;
	c->client_slots = 32;
	c->log_level = RT_LOG_WARN;
}

static inline void ag_open(struct rt_agent *a, const struct rt_agent_config *c)
{
	char err[512];
	int rc = rt_agent_open(a, c, err, sizeof err);
	ck_assert_msg(rc == RETRACE_OK, "rt_agent_open %s: %d %s", c->pool, rc, err);
}

/* Poll until a pass finds nothing to do. */
static inline void ag_drain(struct rt_agent *a)
{
	int i;
	for (i = 0; i < 100000 && rt_agent_poll(a) > 0; i++)
		;
	rt_agent_poll(a);
}

/* Buffers neither free nor held by indexed segments (held by clients, or leaked). */
static inline int64_t ag_unaccounted(const struct rt_agent *a)
{
	return (int64_t)a->pool.hdr->buffer_count - (int64_t)rt_agent_free_buffers(a) -
	       (int64_t)rt_agent_buffers_held(a);
}

/*
 * Pop every id of the available queue, check each is in range and appears once
 * and is not owned by the index, push them back; returns how many there were.
 */
static inline uint32_t ag_check_available(struct rt_agent *a)
{
	uint32_t n = a->pool.hdr->buffer_count, got = 0, k, i;
	uint32_t *ids = malloc(n * sizeof *ids);
	uint8_t *seen = calloc(n, 1);
	struct rt_available_entry batch[256];
	while ((k = rt_available_pop_batch(a->pool.ring[RT_Q_AVAILABLE],
					   RT_POOL_SLOTS(&a->pool, RT_Q_AVAILABLE, rt_available_entry),
					   batch, 256)) > 0) {
		for (i = 0; i < k; i++) {
			uint32_t id = batch[i].buffer_id;
			ck_assert_msg(id < n, "available queue holds id %u of %u", id, n);
			ck_assert_msg(!seen[id], "available queue holds id %u twice", id);
			ck_assert_msg(a->ix.buf_trace[id] == RT_INDEX_NONE,
				      "buffer %u is both free and indexed", id);
			seen[id] = 1;
			ids[got++] = id;
		}
	}
	for (i = 0; i < got; i += 256) {
		uint32_t m = got - i < 256 ? got - i : 256, j;
		for (j = 0; j < m; j++)
			batch[j].buffer_id = ids[i + j];
		ck_assert(rt_available_push_batch(a->pool.ring[RT_Q_AVAILABLE],
						  RT_POOL_SLOTS(&a->pool, RT_Q_AVAILABLE, rt_available_entry),
						  batch, m));
	}
	free(ids);
	free(seen);
	return got;
}

/* A trace's buffers, in index order. */
static inline uint32_t ag_trace_buffers(const struct rt_agent *a, uint32_t t, uint32_t *out,
					uint32_t max)
{
	uint32_t n = 0, b;
	for (b = a->ix.traces[t].first_buf; b != RT_INDEX_NONE && n < max; b = a->ix.buf_next[b])
		out[n++] = b;
	return n;
}

/* ---------------------------------------------------- client children ---- */

/* Attach the client in a child; exits the child on failure. */
static inline void ag_child_client(const char *pool, uint32_t batch, int expect_rc)
{
	struct retrace_config cfg;
	int rc;
	retrace_config_from_env(&cfg);
	cfg.pool_name = pool;
	cfg.batch = batch;
	cfg.quiet = 1;
	cfg.sample_shift = 0;
	cfg.head_shift = 0;
	rc = retrace_init(&cfg);
	if (rc != expect_rc)
		CHILD_FAIL(40, "retrace_init(%s) = %d, want %d", pool, rc, expect_rc);
}

/*
 * Records of RECLEN bytes frame to RECLEN + 4 = 100 bytes; 40 fill 4000 of a
 * 4096-byte buffer's 4032 payload bytes, and the 41st does not fit in the 32 left
 * (under the client's 64-byte split minimum), so it starts the next buffer:
 * a trace of R records uses exactly ceil(R / 40) buffers, none split.
 */
#define AG_RECLEN 96u
#define AG_FRAME (AG_RECLEN + RETRACE_FRAME_HDR)
#define AG_PER_BUF 40u

static inline void ag_record(uint8_t rec[AG_RECLEN], uint64_t lo, uint32_t k)
{
	uint32_t i;
	memcpy(rec, &lo, 8);
	memcpy(rec + 8, &k, 4);
	for (i = 12; i < AG_RECLEN; i++)
		rec[i] = (uint8_t)(lo * 31 + k * 7 + i);
}

/*
 * Decode a buffer's first `bytes` payload bytes as records of trace lo; records
 * must be numbered from *next on. Returns the number of frames, -1 on a
 * mismatch (why in msg).
 */
static inline int ag_check_frames(const uint8_t *payload, uint32_t bytes, uint64_t lo,
				  uint32_t *next, char *msg, size_t msglen)
{
	uint32_t pos = 0;
	struct rt_frame f;
	uint8_t want[AG_RECLEN];
	int n = 0, rc;
	while ((rc = rt_frame_next(payload, bytes, &pos, &f)) == RT_FRAME_OK) {
		ag_record(want, lo, *next);
		if (f.len != AG_RECLEN || f.flags != RETRACE_FRAME_VALID ||
		    memcmp(f.data, want, AG_RECLEN) != 0) {
			snprintf(msg, msglen, "trace %llx record %u: len %u flags %x or content wrong",
				 (unsigned long long)lo, *next, f.len, f.flags);
			return -1;
		}
		(*next)++;
		n++;
	}
	if (rc != RT_FRAME_END || pos != bytes) {
		snprintf(msg, msglen, "trace %llx: frames end with %d at %u of %u bytes",
			 (unsigned long long)lo, rc, pos, bytes);
		return -1;
	}
	return n;
}

/* ------------------------------------------------------- fake writer ---- */

/* Take one id off the available queue, as a client would. */
static inline uint32_t ag_take_buffer(struct rt_pool *p)
{
	struct rt_available_entry e;
	ck_assert(rt_available_pop_batch(p->ring[RT_Q_AVAILABLE],
					 RT_POOL_SLOTS(p, RT_Q_AVAILABLE, rt_available_entry), &e, 1) == 1);
	return e.buffer_id;
}

/* Stamp buffer id as trace (hi, lo) with nrec records; returns the payload bytes. */
static inline uint32_t ag_fill_buffer(struct rt_pool *p, uint32_t id, uint64_t hi, uint64_t lo,
				      uint32_t seq, uint32_t first_rec, uint32_t nrec, int seal)
{
	struct rt_buffer_header *h = rt_pool_buffer(p, id);
	uint8_t *d = rt_pool_buffer_data(p, id);
	uint32_t pos = 0, k;
	for (k = 0; k < nrec; k++) {
		uint32_t word = (AG_RECLEN << 4) | RETRACE_FRAME_VALID;
		memcpy(d + pos, &word, 4);
		ag_record(d + pos + 4, lo, first_rec + k);
		pos += AG_FRAME;
	}
	memset(d + pos, 0, RETRACE_FRAME_TERM);
	h->magic = RT_BUF_MAGIC;
	h->trace_hi = hi;
	h->trace_lo = lo;
	h->pid = (uint32_t)getpid();
	h->tid = (uint32_t)getpid();
	h->seq = seq;
	h->bytes = pos;
	h->client_slot = UINT32_MAX;
	h->first_tick = retrace_ticks();
	h->pool_generation = p->hdr->generation;
	ck_pr_fence_store();
	ck_pr_store_32(&h->flags, RT_BUF_INUSE | (seal ? RT_BUF_SEALED | RT_BUF_LAST : 0));
	return pos;
}

static inline void ag_push_complete(struct rt_pool *p, uint64_t lo, uint32_t id, uint32_t bytes)
{
	struct rt_complete_entry e = { .trace_lo = lo, .buffer_id = id, .bytes = bytes };
	ck_assert(rt_complete_push_batch(p->ring[RT_Q_COMPLETE],
					 RT_POOL_SLOTS(p, RT_Q_COMPLETE, rt_complete_entry), &e, 1));
}

static inline void ag_push_crumb(struct rt_pool *p, uint64_t lo, uint32_t agent)
{
	struct rt_breadcrumb_entry e = { .trace_lo = lo, .agent_id = agent };
	ck_assert(rt_breadcrumb_push_batch(p->ring[RT_Q_BREADCRUMB],
					   RT_POOL_SLOTS(p, RT_Q_BREADCRUMB, rt_breadcrumb_entry),
					   &e, 1));
}

static inline void ag_push_triggers(struct rt_pool *p, const struct rt_trigger_entry *e,
				    unsigned n)
{
	ck_assert(rt_trigger_push_batch(p->ring[RT_Q_TRIGGER],
					RT_POOL_SLOTS(p, RT_Q_TRIGGER, rt_trigger_entry), e, n));
}

static inline struct rt_trigger_entry ag_trig(uint64_t lo, uint32_t trigger, uint16_t size,
					      uint16_t index)
{
	struct rt_trigger_entry e;
	memset(&e, 0, sizeof e);
	e.trace_hi = 0x7e;
	e.trace_lo = lo;
	e.trigger_id = trigger;
	e.group_size = size;
	e.group_index = index;
	return e;
}

#endif
