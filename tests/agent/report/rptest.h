/*
 * tests/agent/report/rptest.h — helpers for the reporting suites, on top of the agent
 * suites' helpers (tests/agent/agtest.h: children that die with the test, pipes
 * with deadlines, pool names cleaned up at exit, an in-process agent).
 *
 *   - an in-process agent wired to a test collector / fake coordinator;
 *   - poll-until loops with deadlines (never a timing assertion);
 *   - a byte stream from a child (non-blocking, grown as it arrives) carrying
 *     "batches": what a child wrote to one trace, record by record, exactly;
 *   - reassembly of a trace from the slices a collector received: buffers in
 *     (pid, tid, seq) order (tid: the writer stream), frames through
 *     shm/frame.h's reassembler;
 *   - temp directories removed at exit.
 */
#ifndef RETRACE_TESTS_REPORT_RPTEST_H
#define RETRACE_TESTS_REPORT_RPTEST_H

#include <check.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "agent/agtest.h"
#include "collector.h"
#include "spool.h"

/* ----------------------------------------------------------- agents ---- */

/* A small in-process agent reporting to `collector` (may be "") with test-friendly timeouts. */
static inline void rp_config(struct rt_agent_config *c, const char *pool, uint32_t count,
			     uint32_t size, uint32_t agent_id, const char *collector)
{
	ag_config(c, pool, count, size, 0.95);
	c->agent_id = agent_id;
	snprintf(c->collector, sizeof c->collector, "%s", collector ? collector : "");
	c->report_timeout_ms = 20000; /* slow collectors must not look dead */
	c->trigger_rate = 0;          /* no rate limit unless a test wants one */
	c->trigger_burst = 1;
	c->trace_capacity = 4 * count;
	c->trigger_slots = 4096;
	c->breadcrumb_slots = 4096;
	c->log_level = RT_LOG_ERROR;
}

static inline void rp_open(struct rt_agent *a, const struct rt_agent_config *c)
{
	char err[512];
	ag_open(a, c);
	ck_assert_msg(rt_agent_connect(a, "", err, sizeof err) == 0, "connect: %s", err);
}

/* Poll `agent` until `cond` holds or `secs` pass; ok gets the last value of cond. */
#define RP_UNTIL(ok, agent, secs, cond)                                        \
	do {                                                                   \
		uint64_t end_ = ag_deadline(secs);                             \
		for (;;) {                                                     \
			unsigned n_ = rt_agent_poll(agent);                    \
			if (((ok) = (cond)))                                   \
				break;                                         \
			if (ag_now_ns() > end_)                                \
				break;                                         \
			if (!n_)                                               \
				ag_nap_us(200);                                \
		}                                                              \
	} while (0)

/* Nothing of the agent's reporting is pending: no queued or in-flight data. */
static inline int rp_quiet(const struct rt_agent *a)
{
	return a->rep.queued_buffers == 0 && a->ix.st.inflight_buffers == 0 &&
	       rt_route_inflight(&a->route) == 0 && rt_agent_queue_depth(a, RT_Q_COMPLETE) == 0 &&
	       rt_agent_queue_depth(a, RT_Q_TRIGGER) == 0;
}

/* A byte from fd if one is there now (never blocks): 1, or 0. */
static inline int rp_byte_ready(int fd, char *out)
{
	struct pollfd p = { fd, POLLIN, 0 };
	return poll(&p, 1, 0) == 1 && read(fd, out, 1) == 1;
}

/*
 * End a client child: detach (return spare buffers) and leave without atexit
 * handlers. The child was forked from a process with nng threads; a leak check
 * at exit would see the parent's allocations as leaks (under ASan) and turn the
 * child's status non-zero.
 */
__attribute__((noreturn)) static inline void rp_child_exit(void)
{
	retrace_shutdown();
	fflush(NULL);
	_exit(0);
}

/* ---------------------------------------------------------- records ---- */

/* Deterministic record bytes: trace, number, length all show in the content. */
static inline void rp_fill(uint8_t *b, uint64_t lo, uint32_t k, uint32_t len)
{
	uint32_t i;
	for (i = 0; i < len; i++)
		b[i] = (uint8_t)(lo * 131u + k * 7u + i * 13u + (i >> 8));
	if (len >= 12) {
		memcpy(b, &lo, 8);
		memcpy(b + 8, &k, 4);
	}
}

/* ------------------------------------------------- child byte stream ---- */

struct rp_stream {
	int fd;
	int eof;
	uint8_t *buf;
	size_t len, cap;
};

static inline void rp_stream_init(struct rp_stream *s, int fd)
{
	memset(s, 0, sizeof *s);
	s->fd = fd;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Read whatever is available; returns bytes read. */
static inline size_t rp_stream_pump(struct rp_stream *s)
{
	size_t got = 0;
	while (!s->eof) {
		ssize_t n;
		if (s->cap - s->len < 65536) {
			s->cap = s->cap ? s->cap * 2 : 1 << 20;
			s->buf = realloc(s->buf, s->cap);
			ck_assert(s->buf != NULL);
		}
		n = read(s->fd, s->buf + s->len, s->cap - s->len);
		if (n > 0) {
			s->len += (size_t)n;
			got += (size_t)n;
		} else if (n == 0) {
			s->eof = 1;
		} else if (errno != EINTR) {
			break;
		}
	}
	return got;
}

static inline void rp_stream_free(struct rp_stream *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s->buf);
	memset(s, 0, sizeof *s);
	s->fd = -1;
}

/*
 * What a child wrote to one trace in one go (begin .. end + flush), followed on
 * the pipe by nrec records, each a u32 length and its bytes.
 */
#define RP_BATCH_MAGIC 0x42415443u
struct rp_batch {
	uint32_t magic;
	uint32_t batch;     /* the child's own numbering */
	uint64_t hi, lo;
	uint32_t pid, tid;
	uint32_t nrec;
	uint32_t nbuf;      /* buffers the client used (thread stats) */
	uint32_t discards;  /* of which went to the discard buffer */
	uint32_t trigger;   /* trigger id fired for it, 0 if none */
	uint64_t bytes;     /* record bytes */
};

/* A parsed batch: the header and pointers to its records inside the stream. */
struct rp_parsed {
	struct rp_batch h;
	const uint8_t **rec;
	uint32_t *len;
};

/* Parse every complete batch in the stream (from *pos on); returns the count added. */
static inline size_t rp_parse(const struct rp_stream *s, size_t *pos, struct rp_parsed **out,
			      size_t *nout)
{
	size_t added = 0;
	for (;;) {
		struct rp_batch h;
		size_t p = *pos, need;
		uint32_t k, l;
		struct rp_parsed *r;
		if (s->len - p < sizeof h)
			break;
		memcpy(&h, s->buf + p, sizeof h);
		ck_assert_msg(h.magic == RP_BATCH_MAGIC, "child stream out of step at %zu", p);
		need = sizeof h;
		for (k = 0; k < h.nrec; k++) {
			if (s->len - p < need + 4)
				return added;
			memcpy(&l, s->buf + p + need, 4);
			need += 4 + l;
			if (s->len - p < need)
				return added;
		}
		*out = realloc(*out, (*nout + 1) * sizeof **out);
		r = &(*out)[(*nout)++];
		r->h = h;
		r->rec = malloc((h.nrec + 1) * sizeof *r->rec);
		r->len = malloc((h.nrec + 1) * sizeof *r->len);
		need = sizeof h;
		for (k = 0; k < h.nrec; k++) {
			memcpy(&l, s->buf + p + need, 4);
			r->len[k] = l;
			/* an offset, not a pointer: the stream's buffer may move as it grows */
			r->rec[k] = (const uint8_t *)(uintptr_t)(p + need + 4);
			need += 4 + l;
		}
		*pos = p + need;
		added++;
	}
	return added;
}

/* The bytes of record k of a parsed batch (offsets resolved against the stream). */
static inline const uint8_t *rp_rec(const struct rp_stream *s, const struct rp_parsed *b,
				    uint32_t k)
{
	return s->buf + (uintptr_t)b->rec[k];
}

static inline void rp_parsed_free(struct rp_parsed *p, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		free(p[i].rec);
		free(p[i].len);
	}
	free(p);
}

/* In a child: send one batch (header + records). */
struct rp_child_batch {
	struct rp_batch h;
	uint8_t *data;  /* records as len + bytes */
	size_t len, cap;
};

static inline void rp_cb_begin(struct rp_child_batch *b, uint32_t batch, uint64_t hi,
			       uint64_t lo, uint32_t trigger)
{
	memset(&b->h, 0, sizeof b->h);
	b->h.magic = RP_BATCH_MAGIC;
	b->h.batch = batch;
	b->h.hi = hi;
	b->h.lo = lo;
	b->h.pid = (uint32_t)getpid();
	b->h.tid = (uint32_t)syscall(SYS_gettid);
	b->h.trigger = trigger;
	b->len = 0;
}

static inline void rp_cb_add(struct rp_child_batch *b, const uint8_t *rec, uint32_t len)
{
	if (b->cap - b->len < (size_t)len + 4) {
		while (b->cap - b->len < (size_t)len + 4)
			b->cap = b->cap ? 2 * b->cap : 65536;
		b->data = realloc(b->data, b->cap);
		if (!b->data)
			CHILD_FAIL(60, "out of memory");
	}
	memcpy(b->data + b->len, &len, 4);
	memcpy(b->data + b->len + 4, rec, len);
	b->len += 4 + (size_t)len;
	b->h.nrec++;
	b->h.bytes += len;
}

static inline void rp_cb_send(struct rp_child_batch *b, int fd)
{
	if (ag_write_all(fd, &b->h, sizeof b->h) != 0 || ag_write_all(fd, b->data, b->len) != 0)
		CHILD_FAIL(61, "batch pipe");
}

/* ----------------------------------------------------- reassembly ---- */

struct rp_rbuf {
	const struct tc_buffer *b;
	uint64_t slice_order;
};

static int rp_rbuf_cmp(const void *x, const void *y)
{
	const struct tc_buffer *a = ((const struct rp_rbuf *)x)->b, *b = ((const struct rp_rbuf *)y)->b;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/*
 * Rebuild trace lo from collector slices [from, to) (caller holds the lock) and
 * compare with batch b: every record, in order, byte for byte. Returns 0, or -1
 * with why in msg. *nslices gets how many slices carried the trace.
 */
static inline int rp_check_trace(const struct tc_collector *c, size_t from, size_t to,
				 const struct rp_stream *st, const struct rp_parsed *b,
				 uint32_t want_trigger, uint32_t want_agent, uint32_t *nslices,
				 char *msg, size_t msglen)
{
	struct rp_rbuf *v = NULL;
	size_t nv = 0, i;
	uint32_t k = 0, j;
	struct rt_reassembler ra;
	int rc = 0;
	*nslices = 0;
	for (i = from; i < to; i++) {
		const struct tc_slice *s = &c->slices[i];
		if (s->trace_lo != b->h.lo)
			continue;
		(*nslices)++;
		if (s->trace_hi != b->h.hi || s->trigger_id != want_trigger ||
		    s->agent_id != want_agent) {
			snprintf(msg, msglen,
				 "slice seq %llu of trace %llx: hi %llx trigger %u agent %u, want hi %llx "
				 "trigger %u agent %u",
				 (unsigned long long)s->slice_seq, (unsigned long long)b->h.lo,
				 (unsigned long long)s->trace_hi, s->trigger_id, s->agent_id,
				 (unsigned long long)b->h.hi, want_trigger, want_agent);
			free(v);
			return -1;
		}
		v = realloc(v, (nv + s->nbuf + 1) * sizeof *v);
		for (j = 0; j < s->nbuf; j++) {
			v[nv].b = &s->bufs[j];
			v[nv].slice_order = i;
			nv++;
		}
	}
	if (nv == 0) {
		snprintf(msg, msglen, "trace %llx: no slice", (unsigned long long)b->h.lo);
		return -1;
	}
	qsort(v, nv, sizeof *v, rp_rbuf_cmp);
	rt_reasm_init(&ra);
	for (i = 0; i < nv && rc == 0; i++) {
		const struct tc_buffer *x = v[i].b;
		struct rt_frame f;
		uint32_t pos = 0;
		int fr;
		/* One batch is one begin..end run: one writer stream of the child's
		 * process (the header's tid is a stream id, not the thread's). */
		if (x->pid != b->h.pid || x->tid != v[0].b->tid) {
			snprintf(msg, msglen, "trace %llx: buffer from writer %u/%u, want %u/%u",
				 (unsigned long long)b->h.lo, x->pid, x->tid, b->h.pid, v[0].b->tid);
			rc = -1;
			break;
		}
		if (x->seq != i) {
			snprintf(msg, msglen, "trace %llx: buffer #%zu in writer order has seq %u "
				 "(missing or duplicated buffer)", (unsigned long long)b->h.lo, i, x->seq);
			rc = -1;
			break;
		}
		if (!(x->flags & RT_BUF_SEALED) || x->first_tick == 0) {
			snprintf(msg, msglen, "trace %llx seq %u: flags %x first_tick %llu",
				 (unsigned long long)b->h.lo, x->seq, x->flags,
				 (unsigned long long)x->first_tick);
			rc = -1;
			break;
		}
		while ((fr = rt_frame_next(x->data, x->len, &pos, &f)) == RT_FRAME_OK) {
			const uint8_t *rec;
			size_t len;
			uint64_t tick;
			int got = rt_reasm_feed(&ra, &f, &rec, &len, &tick);
			if (got != 1)
				continue;
			if (k >= b->h.nrec) {
				snprintf(msg, msglen, "trace %llx: more records than the %u written",
					 (unsigned long long)b->h.lo, b->h.nrec);
				rc = -1;
				break;
			}
			if (len != b->len[k] || memcmp(rec, rp_rec(st, b, k), len) != 0) {
				snprintf(msg, msglen, "trace %llx record %u: %zu bytes, want %u, or content differs",
					 (unsigned long long)b->h.lo, k, len, b->len[k]);
				rc = -1;
				break;
			}
			k++;
		}
		if (rc == 0 && (fr != RT_FRAME_END || pos != x->len)) {
			snprintf(msg, msglen, "trace %llx seq %u: frames end with %d at %u of %u",
				 (unsigned long long)b->h.lo, x->seq, fr, pos, x->len);
			rc = -1;
		}
	}
	if (rc == 0 && k != b->h.nrec) {
		snprintf(msg, msglen, "trace %llx: %u records rebuilt of %u written (%zu buffers, "
			 "client used %u)", (unsigned long long)b->h.lo, k, b->h.nrec, nv, b->h.nbuf);
		rc = -1;
	}
	if (rc == 0 && nv != b->h.nbuf) {
		snprintf(msg, msglen, "trace %llx: %zu buffers arrived, client used %u",
			 (unsigned long long)b->h.lo, nv, b->h.nbuf);
		rc = -1;
	}
	rt_reasm_free(&ra);
	free(v);
	return rc;
}

/* ------------------------------------------------------- temp dirs ---- */

static char rp_dirs[8][256];
static int rp_ndirs;
static pid_t rp_dirs_owner;

static int rp_rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static inline void rp_rm_rf(const char *dir)
{
	nftw(dir, rp_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void rp_dirs_cleanup(void)
{
	int i;
	if (getpid() != rp_dirs_owner)
		return;
	for (i = 0; i < rp_ndirs; i++)
		if (rp_dirs[i][0]) {
			rp_rm_rf(rp_dirs[i]);
			rp_dirs[i][0] = 0;
		}
}

/* A fresh temp directory, removed when this process exits. */
static inline void rp_tempdir(char *out, size_t n, const char *tag)
{
	if (rp_dirs_owner != getpid()) {
		rp_dirs_owner = getpid();
		rp_ndirs = 0;
		atexit(rp_dirs_cleanup);
	}
	snprintf(out, n, "/tmp/rt-test-rp%d-%s-%d-XXXXXX", (int)ag_runner_pid, tag, (int)getpid());
	ck_assert_msg(mkdtemp(out) != NULL, "mkdtemp: %s", strerror(errno));
	if (rp_ndirs < 8)
		snprintf(rp_dirs[rp_ndirs++], 256, "%s", out);
}

/*
 * Run the suite, then remove what a failed test left in /tmp (a failing check
 * leaves its process with _exit: no atexit handler runs): this run's temp
 * directories and the files named after this run's pools.
 */
static inline int rp_run_suite(Suite *s)
{
	char p1[64], p2[64];
	DIR *d;
	struct dirent *e;
	int rc = ag_run_suite(s);
	snprintf(p1, sizeof p1, "rt-test-rp%d-", (int)ag_runner_pid);
	snprintf(p2, sizeof p2, "rt-test-ag%d-", (int)ag_runner_pid);
	if ((d = opendir("/tmp")) != NULL) {
		while ((e = readdir(d)) != NULL) {
			if (strncmp(e->d_name, p1, strlen(p1)) == 0 ||
			    strncmp(e->d_name, p2, strlen(p2)) == 0) {
				char path[512];
				snprintf(path, sizeof path, "/tmp/%s", e->d_name);
				rp_rm_rf(path);
			}
		}
		closedir(d);
	}
	return rc;
}

#endif
