/*
 * client/client.c — libretrace: attach, thread state, buffers, triggers.
 *
 * The fast path lives inline in retrace.h and only moves `retrace_fast_tls.cur`
 * inside the current buffer. Everything here is the slow path, run once per
 * buffer or per trace:
 *   - A thread sets itself up on its first traced call (tid, discard buffer, a
 *     pthread key whose destructor hands its buffers back at thread exit).
 *   - Buffers are taken lazily on the first write of a trace, from a per-thread
 *     stash refilled by one batch pop of the available queue.
 *   - A buffer is a chain of segments (ABI 5, shm/pool.h): each write run of a
 *     trace in a buffer is one segment, a 64-byte header and the records. A full
 *     buffer, or retrace_end, seals the segment (bytes, then the SEALED flag
 *     with release order) and appends {trace, buffer, offset, bytes, flags} to
 *     a per-thread pending batch, pushed to the complete queue in one batch
 *     when it is full, at the trace's end, on a trigger, a flush or thread exit.
 *   - At a trace's end the thread keeps its buffer while an eighth of it is
 *     left: the next trace's first segment starts right after (flag KEPT on the
 *     entry). Otherwise, when a record does not fit, and at thread exit (a
 *     close mark), it leaves the buffer; the agent frees a buffer once it is
 *     left and none of its segments is held. So a 500-byte trace takes about
 *     600 bytes of the pool, not a whole buffer. RETRACE_ONE_TRACE_PER_BUFFER=1
 *     leaves the buffer at every end (the old layout, for comparison).
 *   - Each begin opens a new writer stream: a process-unique stream id (from a
 *     per-thread block of RT_STREAM_BLOCK ids) goes into every buffer header's
 *     `tid` field, and the stream's buffers are numbered from seq 0. Detach and
 *     attach move the stream with the trace.
 *   - With no pool or no free buffer the thread writes into its own discard
 *     buffer: counted per thread, per client slot and in the pool header.
 *   - After fork() the child forgets the parent's buffers (they are the parent's)
 *     and registers itself anew.
 */
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__thread struct retrace_fast retrace_fast_tls __attribute__((tls_model("initial-exec")));
__thread struct rt_thread rt_thread_tls __attribute__((tls_model("initial-exec")));

struct rt_client_state rt_client = {
	.attach_lock = PTHREAD_MUTEX_INITIALIZER,
	.slot = UINT32_MAX,
};

static pthread_key_t thread_exit_key;
static pthread_once_t process_once = PTHREAD_ONCE_INIT;

#define ATTACH_RETRY_NS 1000000000ull /* a missing pool is looked for once a second */

uint64_t rt_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if !defined(__x86_64__) && !defined(__i386__)
uint64_t retrace_ticks_fallback(void)
{
	return rt_mono_ns();
}
#endif

const char *retrace_strerror(int err)
{
	switch (err) {
	case RETRACE_OK: return "success";
	case RETRACE_E_NOPOOL: return "no pool with that name (is the agent running?)";
	case RETRACE_E_PERM: return "permission denied opening the pool";
	case RETRACE_E_VERSION: return "pool ABI version differs from this library";
	case RETRACE_E_GEOMETRY: return "pool geometry inconsistent or not the expected one";
	case RETRACE_E_CORRUPT: return "not a retrace pool (bad magic or header)";
	case RETRACE_E_NOTREADY: return "pool is still being created";
	case RETRACE_E_INVAL: return "invalid argument or malformed input";
	case RETRACE_E_FULL: return "queue full: entry dropped and counted";
	case RETRACE_E_NOTRACE: return "the calling thread is not in a trace";
	case RETRACE_E_AGAIN: return "re-entered from a signal handler: dropped and counted";
	case RETRACE_E_SYS: return "system error";
	case RETRACE_E_EXISTS: return "pool already exists";
	default: return "unknown error";
	}
}

/* ---------------------------------------------------------- config ---- */

static uint32_t env_u32(const char *name, uint32_t def, uint32_t lo, uint32_t hi)
{
	const char *v = getenv(name);
	char *end;
	unsigned long x;
	if (!v || !*v)
		return def;
	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || *end || x < lo || x > hi) {
		fprintf(stderr, "retrace: ignoring %s=%s (expected an integer %u..%u)\n",
			name, v, lo, hi);
		return def;
	}
	return (uint32_t)x;
}

/* RETRACE_TRACE_PERCENT=25 -> shift 2; rounds down to a power of two. */
static uint32_t percent_to_shift(uint32_t pct)
{
	uint32_t shift = 0;
	if (pct == 0)
		return 64;
	while (shift < 63 && (100u >> (shift + 1)) >= pct && (100.0 / (1u << shift)) > pct)
		shift++;
	return shift;
}

void retrace_config_from_env(struct retrace_config *cfg)
{
	const char *pool = getenv("RETRACE_POOL");
	memset(cfg, 0, sizeof *cfg);
	cfg->pool_name = (pool && *pool) ? pool : RT_POOL_DEFAULT_NAME;
	cfg->expect_buffer_size = env_u32("RETRACE_BUFFER_SIZE", 0, 0, RT_POOL_MAX_BUFFER_SIZE);
	cfg->sample_shift = env_u32("RETRACE_SAMPLE_SHIFT", 0, 0, 64);
	if (getenv("RETRACE_TRACE_PERCENT")) {
		uint32_t pct = env_u32("RETRACE_TRACE_PERCENT", 100, 0, 100);
		cfg->sample_shift = percent_to_shift(pct);
		/* 1..99: that rate exactly, by the §2.9 choice between two powers of two
		 * (a power of two itself, 50 or 25, has no choice to make). */
		cfg->sample_ppm = pct > 0 && pct < 100 ? pct * 10000u : 0;
	}
	cfg->trace_rate = env_u32("RETRACE_TRACE_RATE", 0, 0, UINT32_MAX);
	cfg->head_shift = env_u32("RETRACE_HEAD_SHIFT", 0, 0, 63);
	cfg->batch = env_u32("RETRACE_BATCH", 8, 1, RT_MAX_BATCH);
	cfg->quiet = (int)env_u32("RETRACE_QUIET", 0, 0, 1);
}

/* The two switches of how this process maps and fills the pool. */
static void read_mapping_env(void)
{
	rt_client.one_per_buffer = (int)env_u32("RETRACE_ONE_TRACE_PER_BUFFER", 0, 0, 1);
	rt_client.populate = (int)env_u32("RETRACE_POPULATE", 1, 0, 1);
}

/* The configured rate -> rt_client.rate_word: cfg.trace_rate starts at rate 1
 * until its first window is measured; cfg.sample_ppm is split once (§2.9);
 * else the power cfg.sample_shift. Called with the configuration set. */
static void rate_setup(void)
{
	uint32_t ppm = rt_client.cfg.sample_ppm;
	uint64_t w = rt_rate_word_shift(rt_client.cfg.sample_shift);
	if (rt_client.cfg.trace_rate) {
		w = 0;
		atomic_store_explicit(&rt_client.rate_window_begins, 0, memory_order_relaxed);
		atomic_store_explicit(&rt_client.rate_window_start, rt_mono_ns(), memory_order_relaxed);
	} else if (ppm > 0 && ppm < 1000000u) {
		w = rt_rate_word(ppm / 1e6);
		rt_client.cfg.sample_shift = (uint32_t)(w >> 57);
	}
	atomic_store_explicit(&rt_client.rate_word, w, memory_order_relaxed);
}

/*
 * RETRACE_TRACE_RATE: every thread adds its begins to the window's count every
 * RT_RATE_FLUSH begins; the first to see the window over (it wins the CAS on
 * its start) sets the rate for the next one, p = limit / measured begins per
 * second, as a §2.9 word. The rate depends on past traffic only, never on a
 * trace's random value, so every trace is still kept with probability 2^-k for
 * the k it records, and the estimators stay unbiased. Begins still in other
 * threads' counters are missed by a window (at most RT_RATE_FLUSH - 1 each), so
 * the rate errs high, never low.
 */
void rt_rate_tick(struct rt_thread *t)
{
	uint64_t n = t->rate_begins, start, now, count;
	t->rate_begins = 0;
	atomic_fetch_add_explicit(&rt_client.rate_window_begins, n, memory_order_relaxed);
	start = atomic_load_explicit(&rt_client.rate_window_start, memory_order_relaxed);
	now = rt_mono_ns();
	if (now - start < RT_RATE_WINDOW_NS ||
	    !atomic_compare_exchange_strong_explicit(&rt_client.rate_window_start, &start, now,
						     memory_order_relaxed, memory_order_relaxed))
		return;
	count = atomic_exchange_explicit(&rt_client.rate_window_begins, 0, memory_order_relaxed);
	atomic_store_explicit(&rt_client.rate_word,
			 rt_rate_word(rt_rate_for_limit(rt_client.cfg.trace_rate, count, now - start)),
			 memory_order_relaxed);
}

/* ---------------------------------------------------------- registry ---- */

static uint32_t registry_claim(struct rt_pool *p)
{
	uint32_t i, pid = (uint32_t)getpid();
	for (i = 0; i < p->hdr->registry_slots; i++) {
		struct rt_client_slot *s = &p->registry[i];
		if (ck_pr_load_32(&s->pid) == 0 && ck_pr_cas_32(&s->pid, 0, pid)) {
			s->start_time = rt_process_start_time(getpid());
			s->null_buffers = 0;
			ck_pr_store_64(&s->heartbeat_ns, rt_mono_ns());
			return i;
		}
	}
	ck_pr_inc_64(&p->hdr->registry_full);
	return UINT32_MAX;
}

static void registry_release(struct rt_pool *p, uint32_t slot)
{
	if (slot < p->hdr->registry_slots &&
	    ck_pr_load_32(&p->registry[slot].pid) == (uint32_t)getpid())
		ck_pr_store_32(&p->registry[slot].pid, 0);
}

static void heartbeat(struct rt_pool *p)
{
	uint32_t slot = rt_client.slot;
	if (slot < p->hdr->registry_slots)
		ck_pr_store_64(&p->registry[slot].heartbeat_ns, rt_mono_ns());
}

/* ---------------------------------------------------------- attach ---- */

static void thread_exit(void *arg);
static void at_fork_child(void);
static void at_process_exit(void);

static void process_setup(void)
{
	pthread_key_create(&thread_exit_key, thread_exit);
	pthread_atfork(NULL, NULL, at_fork_child);
	atexit(at_process_exit);
	if (!rt_client.configured) {
		retrace_config_from_env(&rt_client.cfg);
		rate_setup();
		rt_client.configured = 1;
	}
	read_mapping_env();
}

static int attach_locked(void)
{
	struct rt_pool_attach_opts ao = {
		.name = rt_client.cfg.pool_name,
		.expect_buffer_size = rt_client.cfg.expect_buffer_size,
		.expect_buffer_count = rt_client.cfg.expect_buffer_count,
		.populate = rt_client.populate,
	};
	struct rt_pool *dst = &rt_client.pool_storage;
	char err[256];
	int rc;

	if (rt_client.pool)
		return RETRACE_OK;
	/* After a retired pool, the storage of the mapping we left stays in use. */
	if (rt_client.retired) {
		struct rt_pool_box *box = malloc(sizeof *box);
		if (!box)
			return RETRACE_E_SYS;
		dst = &box->pool;
	}
	rc = rt_pool_attach(&ao, dst, err, sizeof err);
	if (rc != RETRACE_OK) {
		if (dst != &rt_client.pool_storage)
			free((struct rt_pool_box *)dst);
		if (!rt_client.warned && !rt_client.cfg.quiet)
			fprintf(stderr,
				"retrace: not tracing to a pool: %s; writes go to a discard buffer "
				"(will retry every second)\n", err);
		rt_client.warned = 1;
		rt_client.next_attach_ns = rt_mono_ns() + ATTACH_RETRY_NS;
		return rc;
	}
	rt_client.slot = registry_claim(dst);
	if (rt_client.warned && !rt_client.cfg.quiet)
		fprintf(stderr, "retrace: attached to pool %s\n", ao.name);
	rt_client.warned = 0;
	ck_pr_fence_store();
	ck_pr_store_ptr(&rt_client.pool, dst);
	return RETRACE_OK;
}

/*
 * The pool `old` says RT_POOL_CLOSED: its agent retired it before unlinking or
 * replacing it (shm/pool.h, rt_pool_retire). Leave it — logged once per
 * retirement — and attach to the pool that now has its name; until there is
 * one, writes go to the discard buffer and attach is retried once a second, as
 * at start. The old mapping is not unmapped: other threads may still be inside
 * a segment there (their next fresh buffer brings them over). Never blocks: a
 * thread that finds another one switching uses what that one leaves.
 */
static struct rt_pool *leave_retired(struct rt_pool *old)
{
	if (pthread_mutex_trylock(&rt_client.attach_lock) != 0)
		return NULL;
	if (ck_pr_load_ptr(&rt_client.pool) == old) {
		registry_release(old, rt_client.slot);
		rt_client.slot = UINT32_MAX;
		ck_pr_store_ptr(&rt_client.pool, NULL);
		rt_client.retired++;
		if (old != &rt_client.pool_storage) { /* kept (mapped) until exit */
			struct rt_pool_box *box = (struct rt_pool_box *)old;
			box->next = rt_client.retired_boxes;
			rt_client.retired_boxes = box;
		}
		if (!rt_client.cfg.quiet)
			fprintf(stderr, "retrace: pool %s was retired by its agent (--unlink or "
				"--replace); re-attaching to the pool of that name\n",
				rt_client.cfg.pool_name);
		rt_client.warned = 1; /* "attached to pool" follows when it succeeds */
		rt_client.next_attach_ns = 0;
		attach_locked();
	}
	pthread_mutex_unlock(&rt_client.attach_lock);
	return ck_pr_load_ptr(&rt_client.pool);
}

int retrace_init(const struct retrace_config *cfg)
{
	int rc;
	pthread_mutex_lock(&rt_client.attach_lock);
	if (cfg) {
		rt_client.cfg = *cfg;
		if (!rt_client.cfg.pool_name)
			rt_client.cfg.pool_name = RT_POOL_DEFAULT_NAME;
		if (rt_client.cfg.batch < 1 || rt_client.cfg.batch > RT_MAX_BATCH)
			rt_client.cfg.batch = 8;
	} else {
		retrace_config_from_env(&rt_client.cfg);
	}
	snprintf(rt_client.pool_name, sizeof rt_client.pool_name, "%s", rt_client.cfg.pool_name);
	rt_client.cfg.pool_name = rt_client.pool_name;
	rate_setup();
	rt_client.configured = 1;
	rt_client.warned = 0;
	read_mapping_env();
	pthread_mutex_unlock(&rt_client.attach_lock);
	pthread_once(&process_once, process_setup);
	pthread_mutex_lock(&rt_client.attach_lock);
	rc = attach_locked();
	pthread_mutex_unlock(&rt_client.attach_lock);
	return rc;
}

/* Slow-path attach: never blocks (trylock) and retries at most once a second. */
static struct rt_pool *pool_or_retry(void)
{
	struct rt_pool *p = ck_pr_load_ptr(&rt_client.pool);
	if (p)
		return p;
	if (rt_mono_ns() < ck_pr_load_64(&rt_client.next_attach_ns))
		return NULL;
	if (pthread_mutex_trylock(&rt_client.attach_lock) != 0)
		return NULL;
	attach_locked();
	pthread_mutex_unlock(&rt_client.attach_lock);
	return ck_pr_load_ptr(&rt_client.pool);
}

struct rt_pool *rt_client_pool(void)
{
	return ck_pr_load_ptr(&rt_client.pool);
}

int retrace_attached(void)
{
	return rt_client_pool() != NULL;
}

retrace_agent_id retrace_local_agent(void)
{
	struct rt_pool *p = rt_client_pool();
	return p ? p->hdr->agent_id : 0;
}

/* ------------------------------------------------------ thread state ---- */

void rt_thread_setup(struct rt_thread *t)
{
	pthread_once(&process_once, process_setup);
	memset(t, 0, sizeof *t);
	t->tid = (uint32_t)syscall(SYS_gettid);
	t->pid = (uint32_t)getpid();
	t->fork_generation = rt_client.fork_generation;
	t->ctx.buffer_id = RT_BUFFER_NONE;
	rt_tracer_seed(t);
	{
		retrace_trace_id seed = {0, t->tracer.rng ^ 0xD1B54A32D192ED03ull};
		t->rate_rng = retrace_trace_hash(seed) | 1;
	}
	t->discard_size = RT_POOL_DEFAULT_BUFFER_SIZE;
	t->discard = malloc(t->discard_size);
	if (!t->discard)
		t->discard_size = 0;
	t->initialized = 1;
	pthread_setspecific(thread_exit_key, t);
}

static inline struct rt_thread *self(void)
{
	struct rt_thread *t = &rt_thread_tls;
	if (__builtin_expect(!t->initialized, 0))
		rt_thread_setup(t);
	return t;
}

/* Push the pending complete entries (one batch). */
static void flush_pending(struct rt_thread *t)
{
	struct rt_pool *p = t->ctx.pool ? t->ctx.pool : rt_client_pool();
	if (t->n_pending == 0 || !p)
		return;
	t->in_ring_op = 1;
	if (!rt_complete_push_batch(p->ring[RT_Q_COMPLETE],
				    RT_POOL_SLOTS(p, RT_Q_COMPLETE, rt_complete_entry),
				    t->pending, t->n_pending))
		ck_pr_add_64(&p->hdr->complete_drops, t->n_pending);
	t->in_ring_op = 0;
	t->n_pending = 0;
}

static void return_spares(struct rt_thread *t)
{
	struct rt_pool *p = t->spare_pool;
	struct rt_available_entry back[RT_MAX_BATCH];
	uint32_t i;
	if (!p || t->n_spare == 0)
		return;
	for (i = 0; i < t->n_spare; i++) {
		back[i].buffer_id = t->spare[i];
		if (t->spare[i] < p->hdr->buffer_count) /* no longer ours: clear the stamp */
			ck_pr_store_32(&rt_pool_buffer(p, t->spare[i])->flags, 0);
	}
	t->in_ring_op = 1;
	rt_available_push_batch(p->ring[RT_Q_AVAILABLE],
				RT_POOL_SLOTS(p, RT_Q_AVAILABLE, rt_available_entry),
				back, t->n_spare);
	t->in_ring_op = 0;
	t->n_spare = 0;
}

/* Append a complete entry to the pending batch, pushed when the batch is full. */
static void queue_entry(struct rt_thread *t, uint64_t lo, uint32_t id, uint32_t bytes,
			uint32_t offset, uint32_t flags)
{
	struct rt_complete_entry *e = &t->pending[t->n_pending];
	e->trace_lo = lo;
	e->buffer_id = id;
	e->bytes = bytes;
	e->offset = offset;
	e->flags = flags;
	if (++t->n_pending >= rt_client.cfg.batch)
		flush_pending(t);
}

/*
 * Is a buffer worth keeping for the next trace with its next segment at
 * `next`? Only while an eighth of it is left: a smaller rest would hold few
 * traces and split most records.
 */
static inline int worth_keeping(uint32_t buffer_size, uint32_t next)
{
	return next < buffer_size && buffer_size - next >= buffer_size / 8 &&
	       buffer_size - next >= 2 * RT_BUF_HEADER_SIZE;
}

/*
 * Close the current segment: real ones go to the pending batch. With
 * `may_keep` (a trace's end, a flush) the thread keeps the buffer for its next
 * segment when enough is left, unless it already keeps one (a context attached
 * from another thread ended here) or the process asked for one trace per
 * buffer. The next header's magic is zeroed before SEALED is stored, so that a
 * reader walking the chain stops there until the next segment is whole.
 */
static void seal_buffer(struct rt_thread *t, int last, int may_keep)
{
	struct retrace_fast *f = &retrace_fast_tls;
	struct rt_trace_ctx *c = &t->ctx;
	uint32_t bytes;

	if (c->buffer_id == RT_BUFFER_NONE)
		return;
	bytes = (uint32_t)(f->cur - c->data);
	if (c->buffer_id == RT_BUFFER_DISCARD) {
		t->stats.discarded_bytes += bytes;
	} else {
		struct rt_pool *p = c->pool;
		struct rt_buffer_header *h = rt_pool_segment(p, c->buffer_id, c->seg_off);
		uint32_t next = rt_seg_next(c->seg_off, bytes);
		int keep = may_keep && !rt_client.one_per_buffer && t->kept_pool == NULL &&
			   worth_keeping(p->geo.buffer_size, next);
		h->bytes = bytes;
		if (keep)
			rt_pool_segment(p, c->buffer_id, next)->magic = 0;
		ck_pr_fence_store(); /* bytes, payload and the chain's end before SEALED */
		ck_pr_store_32(&h->flags, RT_BUF_INUSE | RT_BUF_SEALED | (last ? RT_BUF_LAST : 0) |
					  (keep ? RT_BUF_KEPT : 0) | c->rate_flags);
		if (keep) {
			t->kept_pool = p;
			t->kept_id = c->buffer_id;
			t->kept_off = next;
		}
		queue_entry(t, c->id.lo, c->buffer_id, bytes, c->seg_off, keep ? RT_ENTRY_KEPT : 0);
	}
	c->buffer_id = RT_BUFFER_NONE;
	f->cur = f->end = NULL;
}

/*
 * Leave the kept buffer for good: a close mark where the next segment would
 * have started (a restarted agent reads it), and a close entry (the agent
 * frees the buffer once none of its segments is held).
 */
static void close_kept(struct rt_thread *t)
{
	struct rt_pool *p = t->kept_pool;
	struct rt_buffer_header *h;
	if (!p)
		return;
	t->kept_pool = NULL;
	if (p != rt_client_pool())
		return; /* detached from that pool meanwhile: nothing to tell */
	h = rt_pool_segment(p, t->kept_id, t->kept_off);
	ck_pr_store_32(&h->flags, 0);
	h->trace_hi = h->trace_lo = 0;
	h->pid = t->pid;
	h->tid = h->seq = h->bytes = 0;
	h->client_slot = rt_client.slot;
	h->magic = RT_BUF_MAGIC;
	ck_pr_fence_store();
	ck_pr_store_32(&h->flags, RT_BUF_CLOSED);
	queue_entry(t, 0, t->kept_id, 0, t->kept_off, RT_ENTRY_CLOSE);
}

static void use_discard(struct rt_thread *t, struct rt_pool *p)
{
	struct retrace_fast *f = &retrace_fast_tls;
	t->ctx.buffer_id = RT_BUFFER_DISCARD;
	t->ctx.next_seq++; /* the gap stays visible to decoders */
	t->stats.discard_buffers++;
	if (p) {
		ck_pr_inc_64(&p->hdr->null_buffers);
		if (rt_client.slot < p->hdr->registry_slots)
			ck_pr_inc_64(&p->registry[rt_client.slot].null_buffers);
	}
	if (t->discard_size < RT_BUF_HEADER_SIZE + 64) {
		t->ctx.buffer_id = RT_BUFFER_NONE; /* no memory for a discard buffer: drop */
		f->cur = f->end = NULL;
		return;
	}
	t->ctx.data = t->discard + RT_BUF_HEADER_SIZE;
	f->cur = t->ctx.data;
	f->end = t->discard + t->discard_size;
}

/*
 * Mark a stashed buffer as ours, so that an agent rebuilding its state (after its
 * own restart, or after this process dies) can tell a held buffer from a lost one.
 */
static void stamp_stashed(struct rt_thread *t, struct rt_pool *p, uint32_t id)
{
	struct rt_buffer_header *h;
	if (id >= p->hdr->buffer_count)
		return;
	h = rt_pool_buffer(p, id);
	h->magic = RT_BUF_MAGIC;
	h->trace_hi = h->trace_lo = 0;
	h->pid = t->pid;
	h->client_slot = rt_client.slot;
	ck_pr_store_32(&h->flags, RT_BUF_STASHED);
}

/* Take a buffer id from the stash, refilling it with one batch pop. */
static int take_buffer_id(struct rt_thread *t, struct rt_pool *p, uint32_t *id)
{
	if (t->spare_pool != p) {
		t->n_spare = 0;
		t->spare_pool = p;
	}
	while (1) {
		if (t->n_spare == 0) {
			struct rt_available_entry in[RT_MAX_BATCH];
			uint32_t i, n;
			t->in_ring_op = 1;
			n = rt_available_pop_batch(p->ring[RT_Q_AVAILABLE],
						   RT_POOL_SLOTS(p, RT_Q_AVAILABLE, rt_available_entry),
						   in, rt_client.cfg.batch);
			t->in_ring_op = 0;
			if (n == 0)
				return 0;
			for (i = 0; i < n; i++) {
				t->spare[n - 1 - i] = in[i].buffer_id;
				stamp_stashed(t, p, in[i].buffer_id);
			}
			t->n_spare = n;
			heartbeat(p);
		}
		*id = t->spare[--t->n_spare];
		if (*id < p->hdr->buffer_count)
			return 1;
		ck_pr_inc_64(&p->hdr->bad_available); /* untrusted entry: skip it */
	}
}

/*
 * A new segment for the current trace: in the buffer this thread kept, when it
 * is of this pool and has room for `need` record bytes, else at the start of a
 * fresh buffer (whose header is then the segment's). The header's flags are
 * zeroed first and stored last, and its magic written between: a reader that
 * sees the magic sees no stale SEALED.
 */
static void acquire_buffer(struct rt_thread *t, size_t need)
{
	struct retrace_fast *f = &retrace_fast_tls;
	struct rt_trace_ctx *c = &t->ctx;
	struct rt_pool *p = pool_or_retry();
	struct rt_buffer_header *h;
	uint32_t id, off = 0;

	/* One load of a header word per fresh segment: was the pool retired? */
	if (p && __builtin_expect(ck_pr_load_32(&p->hdr->state) != RT_POOL_READY, 0))
		p = leave_retired(p);
	/* Sealed entries of this trace's segments in a pool we left go to that pool
	 * (harmless there), never into the next one, whose ids they do not name. */
	if (t->n_pending && c->pool && c->pool != p)
		flush_pending(t);

	if (p && p->hdr->buffer_size != t->discard_size) {
		/* Size the discard buffer like the pool's (once per thread), so that
		 * discard counts compare with buffer counts. */
		uint8_t *nb = realloc(t->discard, p->hdr->buffer_size);
		if (nb) {
			t->discard = nb;
			t->discard_size = p->hdr->buffer_size;
		}
	}
	if (p && need > p->geo.buffer_size - RT_BUF_HEADER_SIZE)
		need = 0; /* split whatever buffer it starts in: the kept rest is as good */
	if (t->kept_pool && (t->kept_pool != p ||
			     (uint64_t)t->kept_off + RT_BUF_HEADER_SIZE + need + 8 >
				     p->geo.buffer_size))
		close_kept(t);
	if (t->kept_pool) {
		id = t->kept_id;
		off = t->kept_off;
		t->kept_pool = NULL;
	} else if (!p || !take_buffer_id(t, p, &id)) {
		use_discard(t, p);
		return;
	}
	t->stats.buffers_used++; /* segments: one per buffer in the old layout */
	h = rt_pool_segment(p, id, off);
	ck_pr_store_32(&h->flags, 0);
	h->trace_hi = c->id.hi;
	h->trace_lo = c->id.lo;
	h->pid = c->writer_pid;
	h->tid = c->writer_stream; /* the field names the writer stream (shm/pool.h) */
	h->seq = c->next_seq++;
	h->bytes = 0;
	h->client_slot = rt_client.slot;
	h->first_tick = retrace_ticks();
	h->pin_trigger = 0;
	h->pool_generation = p->hdr->generation;
	h->magic = RT_BUF_MAGIC;
	ck_pr_store_32(&h->flags, RT_BUF_INUSE | c->rate_flags);
	c->pool = p;
	c->buffer_id = id;
	c->seg_off = off;
	c->data = (uint8_t *)h + RT_BUF_HEADER_SIZE;
	memset(c->data, 0, RETRACE_FRAME_TERM); /* a crash now still leaves a clean end */
	f->cur = c->data;
	f->end = (uint8_t *)rt_pool_buffer(p, id) + p->geo.buffer_size;
}

/* ---------------------------------------------------- trace scope ---- */

/*
 * The name of a user trigger the trace fired, for the coordinator
 * (trigger_names.c): written at the trace's end or detach, not in
 * retrace_trigger, which may run in a signal handler interrupting a write.
 */
static void write_trigger_name(struct rt_thread *t)
{
	uint32_t id = t->named_trigger;
	const char *name = retrace_trigger_name_get(id);
	t->named_trigger = 0;
	if (name && t->ctx.active && t->ctx.recorded)
		rt_tracer_trigger_event(t, id, name);
}

/*
 * The trace's last buffer is handed in at its end, always: a sealed buffer left
 * in the pending batch of a thread that then goes idle (a pool worker after a
 * burst) would stay invisible to the agent, and the trace could never be shown
 * complete. One push per ended trace that wrote data; full buffers in the
 * middle of a trace still travel in batches.
 */
static void end_trace(struct rt_thread *t)
{
	if (__builtin_expect(t->named_trigger != 0, 0))
		write_trigger_name(t);
	if (__builtin_expect(t->ctx.stream_dropped && !t->ctx.resource_written, 0))
		rt_tracer_mark_stream(t); /* a host that dropped every span still has data */
	seal_buffer(t, 1, 1);
	flush_pending(t);
	t->ctx.active = 0;
	t->ctx.recorded = 0;
	retrace_fast_tls.reserved = NULL;
}

static void push_head_trigger(struct rt_thread *t, retrace_trace_id id)
{
	if (rt_push_trigger_group(t, id, RETRACE_TRIGGER_HEAD_SAMPLED, NULL, 0) == RETRACE_OK)
		t->ctx.fired = 1;
}

int retrace_begin(retrace_trace_id id)
{
	struct rt_thread *t = self();
	struct rt_trace_ctx *c = &t->ctx;

	if (__builtin_expect(c->active, 0))
		end_trace(t);
	if (__builtin_expect(ck_pr_load_ptr(&rt_client.pool) == NULL, 0))
		pool_or_retry(); /* a client started before its agent */
	c->id = id;
	c->active = 1;
	c->fired = 0;
	t->named_trigger = 0;
	c->span_id = 0;
	c->span_origin = RT_SPAN_NONE;
	c->resource_written = 0;
	c->call_dropped = 0;
	c->stream_dropped = 0;
	rt_tracer_reset(t);
	/* A new writer stream per begin, so its sequence may restart at 0 even when
	 * this thread already wrote this trace (a pool thread serving a second call
	 * of the same request): see RT_STREAM_BLOCK. */
	if (__builtin_expect(t->stream_next == t->stream_end, 0)) {
		t->stream_next = ck_pr_faa_32(&rt_client.next_stream, RT_STREAM_BLOCK);
		t->stream_end = t->stream_next + RT_STREAM_BLOCK;
	}
	c->next_seq = 0;
	c->writer_pid = t->pid;
	c->writer_stream = t->stream_next++;
	c->hops[0] = c->hops[1] = 0;
	c->rv_source = RT_RV_HASH;
	if (__builtin_expect(t->incoming.valid, 0)) {
		t->incoming.valid = 0;
		if (t->incoming.id.lo == id.lo && t->incoming.id.hi == id.hi) {
			c->hops[0] = t->incoming.hops[0];
			c->hops[1] = t->incoming.hops[1];
			c->fired = t->incoming.fired;
			/* The remote span is the parent of this trace's first span. */
			c->span_id = t->incoming.parent_span_id;
			c->span_origin = RT_SPAN_REMOTE;
			c->call_dropped = t->incoming.call_dropped;
			/* deposit decided (and left breadcrumbs accordingly) */
			c->rv_source = t->incoming.rv_source;
			c->rv = t->incoming.rv;
			c->rate_exp = t->incoming.rate_exp;
			if (!t->incoming.recorded || id.lo == 0)
				goto unrecorded;
			goto recorded;
		}
	}
	c->rate_exp = (uint8_t)rt_choose_exp(t);
	/* The runtime indexes traces by their low 64 bits, so an id whose low half is
	 * zero (valid W3C, but never generated by us) is not recorded on this host. */
	if (!rt_trace_kept(id, c->rate_exp, RT_RV_HASH, 0) || id.lo == 0)
		goto unrecorded;
recorded:
	c->recorded = 1;
	/* The rate the trace is recorded at travels in its buffers' flags (shm/pool.h),
	 * for the agent to report (estimate/); kept in the context so that a detached
	 * context keeps it. */
	c->rate_flags = rt_buf_rate_flags(c->rate_exp) |
			(c->rv_source != RT_RV_HASH ? RT_BUF_RATE_FOREIGN : 0);
	if (rt_client.cfg.head_shift && !c->fired &&
	    retrace_sampled(id, rt_client.cfg.head_shift))
		push_head_trigger(t, id);
	return 1;
unrecorded:
	c->recorded = 0;
	t->stats.unsampled_traces++;
	return 0;
}

void retrace_end(void)
{
	struct rt_thread *t = &rt_thread_tls;
	if (t->ctx.active)
		end_trace(t);
}

retrace_trace_id retrace_current(void)
{
	struct rt_thread *t = &rt_thread_tls;
	retrace_trace_id none = {0, 0};
	return t->ctx.active ? t->ctx.id : none;
}

void retrace_flush(void)
{
	struct rt_thread *t = self();
	if (t->ctx.active && t->ctx.buffer_id != RT_BUFFER_NONE)
		seal_buffer(t, 0, 1);
	flush_pending(t);
}

/* ------------------------------------------------------ slow writes ---- */

#define MIN_SPLIT_ROOM 64 /* below this, start the record in a fresh buffer */

static size_t room_in_buffer(size_t header)
{
	struct retrace_fast *f = &retrace_fast_tls;
	size_t left = (size_t)(f->end - f->cur);
	return left > header + RETRACE_FRAME_TERM ? left - header - RETRACE_FRAME_TERM : 0;
}

static void write_frame(const uint8_t *data, size_t len, uint32_t flags, uint64_t tick)
{
	struct retrace_fast *f = &retrace_fast_tls;
	uint32_t word = ((uint32_t)len << 4) | RETRACE_FRAME_VALID | flags;
	uint8_t *p = f->cur;
	memcpy(p, &word, 4);
	p += 4;
	if (flags & RETRACE_FRAME_TS) {
		memcpy(p, &tick, 8);
		p += 8;
	}
	if (len)
		memcpy(p, data, len);
	p += len;
	/* The end mark is cut when the frame ends exactly at the buffer's end. */
	if ((size_t)(f->end - p) >= RETRACE_FRAME_TERM)
		memset(p, 0, RETRACE_FRAME_TERM);
	f->cur = p;
}

/* The next buffer of the trace: seal this one and take another. */
static void next_buffer(struct rt_thread *t)
{
	seal_buffer(t, 0, 0);
	acquire_buffer(t, 0);
}

static void write_split(struct rt_thread *t, const uint8_t *data, size_t len, int with_ts)
{
	struct retrace_fast *f = &retrace_fast_tls;
	uint32_t cont = 0;
	uint64_t tick = with_ts ? retrace_ticks() : 0;
	size_t header, room;

	t->stats.records++;
	for (;;) {
		/* a record that does not fit the rest of a kept buffer starts a fresh one */
		if (t->ctx.buffer_id == RT_BUFFER_NONE)
			acquire_buffer(t, len + RETRACE_FRAME_HDR + 8);
		if (f->cur == NULL) /* no discard memory at all */
			return;
		header = RETRACE_FRAME_HDR + ((with_ts && !cont) ? 8 : 0);
		room = room_in_buffer(header);
		if (len <= room) {
			write_frame(data, len, cont | ((with_ts && !cont) ? RETRACE_FRAME_TS : 0), tick);
			return;
		}
		if (room < MIN_SPLIT_ROOM && f->cur != t->ctx.data) {
			next_buffer(t);
			continue;
		}
		/* Use the whole rest of the buffer: the end mark is not needed. */
		room = (size_t)(f->end - f->cur) - header;
		if (len <= room) { /* the rest fits once the end mark is cut: no split */
			write_frame(data, len, cont | ((with_ts && !cont) ? RETRACE_FRAME_TS : 0), tick);
			return;
		}
		write_frame(data, room,
			    cont | RETRACE_FRAME_CONT_NEXT | ((with_ts && !cont) ? RETRACE_FRAME_TS : 0),
			    tick);
		data += room;
		len -= room;
		cont = RETRACE_FRAME_CONT_PREV;
		next_buffer(t);
	}
}

void retrace_tracepoint_slow(const void *data, size_t len, int with_ts)
{
	struct rt_thread *t = self();
	if (!t->ctx.active || !t->ctx.recorded)
		return;
	retrace_fast_tls.reserved = NULL; /* a write cancels an open reservation */
	write_split(t, data, len, with_ts);
}

void *retrace_reserve_slow(size_t len)
{
	struct rt_thread *t = self();
	struct retrace_fast *f = &retrace_fast_tls;
	size_t max = (t->discard_size > RT_BUF_HEADER_SIZE + 8)
			     ? t->discard_size - RT_BUF_HEADER_SIZE - 8
			     : 0;
	struct rt_pool *p = rt_client_pool();

	if (p && p->hdr->buffer_size - RT_BUF_HEADER_SIZE - 8 < max)
		max = p->hdr->buffer_size - RT_BUF_HEADER_SIZE - 8;
	if (len > max)
		return NULL;
	if (!t->ctx.active || !t->ctx.recorded) {
		/* Not tracing: a scratch area that commit will ignore. */
		f->reserved = t->discard;
		return t->discard + RETRACE_FRAME_HDR;
	}
	if (t->ctx.buffer_id != RT_BUFFER_NONE)
		seal_buffer(t, 0, 1);
	acquire_buffer(t, len + RETRACE_FRAME_HDR);
	if (f->cur == NULL || len + 8 > (size_t)(f->end - f->cur)) {
		f->reserved = t->discard;
		return t->discard ? t->discard + RETRACE_FRAME_HDR : NULL;
	}
	f->reserved = f->cur;
	return f->cur + RETRACE_FRAME_HDR;
}

void retrace_commit_slow(size_t used)
{
	struct retrace_fast *f = &retrace_fast_tls;
	uint8_t *p = f->reserved;
	f->reserved = NULL;
	if (p == NULL || p != f->cur)
		return; /* not tracing, or no reservation: nothing to record */
	/* used exceeded the room of the reservation: clamp, the record is cut. */
	if (used + 8 > (size_t)(f->end - p))
		used = (size_t)(f->end - p) - 8;
	write_frame(p + RETRACE_FRAME_HDR, used, 0, 0);
}

/* ---------------------------------------------------- detach/attach ---- */

_Static_assert(sizeof(struct rt_trace_ctx) <= sizeof(retrace_context),
	       "retrace_context too small for the trace context");

void retrace_detach(retrace_context *out)
{
	struct rt_thread *t = self();
	struct retrace_fast *f = &retrace_fast_tls;
	struct rt_trace_ctx c;

	if (t->named_trigger)
		write_trigger_name(t);
	/* The discard buffer is the thread's own: never hand it to another thread. */
	if (t->ctx.buffer_id == RT_BUFFER_DISCARD)
		seal_buffer(t, 0, 0);
	/* Entries of segments sealed in the buffer that now travels go out first:
	 * the agent takes a buffer's segments in offset order. */
	if (t->n_pending && !t->in_ring_op)
		flush_pending(t);
	f->reserved = NULL;
	rt_tracer_on_detach(t);
	c = t->ctx;
	c.cur = f->cur;
	c.end = f->end;
	memset(out, 0, sizeof *out);
	memcpy(out, &c, sizeof c);
	t->ctx.active = 0;
	t->ctx.recorded = 0;
	t->ctx.buffer_id = RT_BUFFER_NONE;
	f->cur = f->end = NULL;
}

void retrace_attach(const retrace_context *in)
{
	struct rt_thread *t = self();
	struct retrace_fast *f = &retrace_fast_tls;
	struct rt_trace_ctx c;

	if (t->ctx.active)
		end_trace(t);
	memcpy(&c, in, sizeof c);
	if (!c.active) {
		t->ctx.active = 0;
		return;
	}
	t->ctx = c;
	rt_tracer_on_attach(t); /* the attached span is the parent of the next one */
	f->cur = c.cur;
	f->end = c.end;
	f->reserved = NULL;
	t->ctx.cur = t->ctx.end = NULL;
}

/* --------------------------------------------- triggers, breadcrumbs ---- */

int rt_push_trigger_group(struct rt_thread *t, retrace_trace_id id, uint32_t trigger_id,
			  const retrace_trace_id *lateral, size_t n_lateral)
{
	struct rt_trigger_entry group[RETRACE_MAX_LATERAL + 1];
	struct rt_pool *p = rt_client_pool();
	size_t i, n = n_lateral + 1;
	int ok;

	if (!p)
		return RETRACE_E_NOPOOL;
	for (i = 0; i < n; i++) {
		retrace_trace_id tid = i == 0 ? id : lateral[i - 1];
		group[i].trace_hi = tid.hi;
		group[i].trace_lo = tid.lo;
		group[i].trigger_id = trigger_id;
		group[i].group_size = (uint16_t)n;
		group[i].group_index = (uint16_t)i;
	}
	ok = rt_trigger_push_batch(p->ring[RT_Q_TRIGGER],
				   RT_POOL_SLOTS(p, RT_Q_TRIGGER, rt_trigger_entry), group,
				   (unsigned)n);
	if (!ok) {
		ck_pr_inc_64(&p->hdr->trigger_drops);
		t->stats.triggers_dropped++;
		return RETRACE_E_FULL;
	}
	return RETRACE_OK;
}

int retrace_trigger(retrace_trace_id id, uint32_t trigger_id,
		    const retrace_trace_id *lateral, size_t n_lateral)
{
	struct rt_thread *t = &rt_thread_tls; /* no setup here: signal handlers */
	int rc;

	if ((id.lo == 0 && id.hi == 0) || n_lateral > RETRACE_MAX_LATERAL ||
	    (n_lateral && !lateral))
		return RETRACE_E_INVAL;
	if (t->in_trigger) {
		t->stats.triggers_dropped++;
		return RETRACE_E_AGAIN;
	}
	t->in_trigger = 1;
	/* Let the agent see this thread's sealed buffers with the trigger, unless the
	 * signal landed inside one of our own ring operations. */
	if (!t->in_ring_op && t->initialized)
		flush_pending(t);
	rc = rt_push_trigger_group(t, id, trigger_id, lateral, n_lateral);
	if (t->ctx.active && t->ctx.id.lo == id.lo && t->ctx.id.hi == id.hi) {
		t->ctx.fired = 1;
		if (trigger_id <= RETRACE_TRIGGER_USER_MAX && retrace_trigger_name_get(trigger_id))
			t->named_trigger = trigger_id; /* its name goes out at the end */
	}
	t->in_trigger = 0;
	return rc;
}

void rt_push_breadcrumb(struct rt_thread *t, uint64_t trace_lo, retrace_agent_id agent)
{
	struct rt_pool *p = pool_or_retry();
	struct rt_breadcrumb_entry e = {.trace_lo = trace_lo, .agent_id = agent};
	if (!p || agent == 0)
		return;
	t->in_ring_op = 1;
	if (!rt_breadcrumb_push_batch(p->ring[RT_Q_BREADCRUMB],
				      RT_POOL_SLOTS(p, RT_Q_BREADCRUMB, rt_breadcrumb_entry), &e, 1)) {
		ck_pr_inc_64(&p->hdr->breadcrumb_drops);
		t->stats.breadcrumbs_dropped++;
	}
	t->in_ring_op = 0;
}

int retrace_breadcrumb(retrace_agent_id agent)
{
	struct rt_thread *t = self();
	if (!t->ctx.active)
		return RETRACE_E_NOTRACE;
	if (agent == 0)
		return RETRACE_E_INVAL;
	if (!t->ctx.recorded)
		return RETRACE_OK;
	rt_push_breadcrumb(t, t->ctx.id.lo, agent);
	return RETRACE_OK;
}

void retrace_thread_stats(struct retrace_thread_stats *out)
{
	*out = self()->stats;
}

/* ------------------------------------------- exit, fork, shutdown ---- */

static void thread_release(struct rt_thread *t)
{
	if (t->ctx.active)
		end_trace(t);
	close_kept(t);
	flush_pending(t);
	return_spares(t);
}

static void thread_exit(void *arg)
{
	struct rt_thread *t = arg;
	thread_release(t);
	free(t->discard);
	t->discard = NULL;
	t->discard_size = 0;
	t->initialized = 0;
}

static void at_process_exit(void)
{
	struct rt_thread *t = &rt_thread_tls;
	struct rt_pool *p = rt_client_pool();
	if (t->initialized)
		thread_release(t);
	if (p)
		registry_release(p, rt_client.slot);
}

static void at_fork_child(void)
{
	struct rt_thread *t = &rt_thread_tls;
	struct retrace_fast *f = &retrace_fast_tls;
	/* The parent's buffers, stash and pending entries stay the parent's. */
	rt_client.fork_generation++;
	rt_client.slot = UINT32_MAX;
	pthread_mutex_init(&rt_client.attach_lock, NULL);
	if (rt_client.pool)
		rt_client.slot = registry_claim(rt_client.pool);
	if (t->initialized) {
		t->tid = (uint32_t)syscall(SYS_gettid);
		t->pid = (uint32_t)getpid();
		t->ctx.active = 0;
		t->ctx.recorded = 0;
		t->ctx.buffer_id = RT_BUFFER_NONE;
		t->n_spare = 0;
		t->n_pending = 0;
		t->kept_pool = NULL;
		t->named_trigger = 0;
		t->incoming.valid = 0;
		memset(&t->stats, 0, sizeof t->stats);
		memset(&t->tracer.stats, 0, sizeof t->tracer.stats);
	}
	rt_tracer_fork_child(t);
	f->cur = f->end = f->reserved = NULL;
}

void retrace_shutdown(void)
{
	struct rt_thread *t = &rt_thread_tls;
	struct rt_pool *p;
	if (t->initialized)
		thread_release(t);
	pthread_mutex_lock(&rt_client.attach_lock);
	p = rt_client.pool;
	if (p) {
		registry_release(p, rt_client.slot);
		rt_client.slot = UINT32_MAX;
		ck_pr_store_ptr(&rt_client.pool, NULL);
		rt_pool_detach(p);
		if (p != &rt_client.pool_storage)
			free((struct rt_pool_box *)p);
	}
	t->spare_pool = NULL;
	t->kept_pool = NULL;
	t->ctx.pool = NULL;
	rt_client.next_attach_ns = 0;
	pthread_mutex_unlock(&rt_client.attach_lock);
}
