/*
 * client/client.h — libretrace internals shared by the client's .c files.
 *
 * Owns: the process-wide client state (one pool mapping, the configuration) and
 * the per-thread state behind the public fast-path struct. Not installed.
 *
 * Process state is the one documented global of the client: `rt_client`. It is
 * written under `attach_lock` (attach, shutdown, fork) and read without locks;
 * the pool pointer is published with a release store so a thread that sees it
 * sees a fully mapped pool.
 */
#ifndef RETRACE_CLIENT_CLIENT_H
#define RETRACE_CLIENT_CLIENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "retrace/retrace.h"
#include "retrace/tracer.h"
#include "shm/pool.h"

#define RT_BUFFER_NONE UINT32_MAX
#define RT_BUFFER_DISCARD (UINT32_MAX - 1)
#define RT_MAX_BATCH 32
#define RT_RESPONSE_CRUMBS 4 /* callee agents remembered per writer stream */

/* Where the trace context's span_id came from (tracer.c decides with it whether
 * the id may be a parent and whether it is "the current span"). */
enum rt_span_origin {
	RT_SPAN_NONE = 0,    /* span_id is 0 */
	RT_SPAN_LOCAL = 1,   /* a span started in this trace (tracer) */
	RT_SPAN_REMOTE = 2,  /* the remote parent from retrace_deserialize* */
	RT_SPAN_SET = 3,     /* retrace_set_span_id */
	RT_SPAN_DERIVED = 4, /* derived by retrace_span_id for raw users: never a parent */
};

/* Where a trace's 56-bit random value R comes from (docs/client.md "Sampling
 * across hosts"). */
enum rt_rv_source {
	RT_RV_HASH = 0,     /* retrace_hash_rv(id): no ot=rv, no W3C random flag */
	RT_RV_ID = 1,       /* the id's low 56 bits: the caller set the W3C random flag */
	RT_RV_EXPLICIT = 2, /* the caller's tracestate ot=rv */
};

/* The part of a trace that moves with retrace_detach/attach. */
struct rt_trace_ctx {
	retrace_trace_id id;
	uint64_t span_id;
	uint8_t *cur, *end;   /* fast-path window when detached */
	uint8_t *data;        /* records start of the current segment */
	uint32_t buffer_id;   /* RT_BUFFER_NONE / RT_BUFFER_DISCARD / id */
	uint32_t seg_off;     /* the current segment header's offset in the buffer */
	uint32_t next_seq;
	uint32_t writer_pid;
	uint32_t writer_stream; /* buffer header `tid`: this begin's stream id */
	retrace_agent_id hops[2]; /* previous hops from the incoming context */
	uint8_t active, recorded, fired;
	uint8_t resource_written; /* RESOURCE event written in this writer stream */
	uint8_t span_origin;      /* enum rt_span_origin of span_id */
	uint8_t call_dropped;     /* the incoming context said its call span was
				     dropped: the remote parent is no call, so spans
				     right under it may be dropped (tracer.c) */
	uint8_t stream_dropped;   /* this writer stream dropped a span (tracer.c
				     writes the resource at the end if nothing else) */
	uint32_t rate_flags;      /* rt_buf_rate_flags of the shift that recorded the
				     trace, or-ed into every buffer's flags */
	uint8_t rate_exp;         /* this host's exponent for the trace (§2.9 choice) */
	uint8_t rv_source;        /* enum rt_rv_source */
	uint64_t rv;              /* R when rv_source is RT_RV_EXPLICIT */
	struct rt_pool *pool; /* pool the buffer belongs to */
};

/* Incoming context parsed by deserialize before begin. */
struct rt_incoming {
	retrace_trace_id id;
	uint64_t parent_span_id;  /* the remote span: parent of the first span */
	retrace_agent_id hops[2];
	uint8_t fired, valid, call_dropped;
	/* The decision deposit made, so that begin records exactly the traces whose
	 * hops got breadcrumbs (the §2.9 choice is random: made once). */
	uint8_t rate_exp, rv_source, recorded;
	uint64_t rv;
};

#define RT_TEMPLATE_CACHE 64 /* direct-mapped, keyed by template id */
#define RT_DROPPED_NAME_MAX 47 /* a dropped span's name kept for an error end */
#define RT_FRAME_DROPPED 0x1u    /* the span was dropped by the policy table */
#define RT_FRAME_IN_DROPPED 0x2u /* its parent frame was dropped */
/* The anchor of a span dropped under the remote parent (its caller dropped the
 * call): no local frame to correct; the caller's adj counts the call whole. */
#define RT_ANCHOR_REMOTE RETRACE_SPAN_DEPTH

/* A template written in tracer generation `generation` of this thread. */
struct rt_template_slot {
	uint64_t template_id;
	uint32_t generation;
};

/* A span name's site hash, cached per thread (tracer.c, span_site). */
#define RT_SITE_CACHE 16 /* direct-mapped by the name's address */
struct rt_site_slot {
	const char *name;  /* the caller's pointer */
	const void *blob;  /* the resource blob (service name) it was hashed with */
	uint64_t first, last; /* the name's first and last 8 bytes */
	uint64_t site;
	uint32_t len;
	uint16_t p16;         /* the table's answer for site ... */
	const void *ppool;    /* ... in this pool's table ... */
	uint64_t pgen;        /* ... at this generation (0: none cached) */
};

/* The tracer's per-thread state (client/tracer.c). */
struct rt_tracer_thread {
	uint64_t rng;          /* xorshift64* state for span ids, never 0 */
	uint32_t depth;        /* spans open on this thread (may exceed the stack) */
	uint32_t generation;   /* bumped at every begin/attach: invalidates templates */
	uint64_t deep_base;    /* current span when the stack overflowed */
	uint8_t deep_base_origin;
	uint8_t detached;      /* the stack belongs to the context detached below */
	uint64_t detached_trace_lo, detached_span;
	uint8_t saved_origin[RETRACE_SPAN_DEPTH];
	uint64_t saved_span[RETRACE_SPAN_DEPTH]; /* ctx.span_id before each open span */
	/* Adaptive span policy (tracer.c, "Dropped spans"): per open span */
	uint8_t frame_flags[RETRACE_SPAN_DEPTH];  /* RT_FRAME_* */
	uint8_t frame_kind[RETRACE_SPAN_DEPTH];   /* a dropped span's kind */
	uint8_t frame_anchor[RETRACE_SPAN_DEPTH]; /* nearest recorded frame below;
						     RT_ANCHOR_REMOTE: none on this
						     host (the remote parent) */
	uint8_t top_dropped;                      /* the innermost open span was dropped */
	uint64_t frame_tick[RETRACE_SPAN_DEPTH];  /* start tick */
	int64_t frame_adj[RETRACE_SPAN_DEPTH + 1]; /* recorded span: ticks of dropped
						     descendants to take off its
						     exclusive time (SPAN_END); the
						     last slot is RT_ANCHOR_REMOTE's,
						     written and never read */
	struct rt_site_slot site_cache[RT_SITE_CACHE];
	const void *empty_pool; /* this pool's table was empty ... */
	uint64_t empty_gen;     /* ... at this generation (tracer.c span_policy) */
	char frame_name[RETRACE_SPAN_DEPTH][RT_DROPPED_NAME_MAX + 1]; /* a dropped
						     span's name, for an error end */
	struct rt_template_slot templates[RT_TEMPLATE_CACHE];
	struct retrace_tracer_stats stats;
};

struct rt_thread {
	uint8_t initialized;
	uint8_t in_trigger;  /* re-entrancy guards for signal handlers */
	uint8_t in_ring_op;
	uint32_t tid;
	uint32_t pid;        /* cached: getpid() is a system call on current glibc */
	uint32_t stream_next, stream_end; /* this thread's block of writer-stream ids */
	unsigned fork_generation;
	struct rt_trace_ctx ctx;
	/* A named user trigger the current trace fired: its TRIGGER event is written
	 * at the trace's end or detach (0: none). Not in ctx: retrace_context is full. */
	uint32_t named_trigger;
	struct rt_incoming incoming;
	struct rt_pool *spare_pool;  /* pool the spare ids belong to */
	uint32_t spare[RT_MAX_BATCH];
	uint32_t n_spare;
	struct rt_complete_entry pending[RT_MAX_BATCH];
	uint32_t n_pending;
	/* The buffer this thread kept after its last segment (ABI 5): the next
	 * trace's first segment starts at kept_off. kept_pool NULL: none. */
	struct rt_pool *kept_pool;
	uint32_t kept_id, kept_off;
	uint8_t *discard;
	size_t discard_size;
	/* Callee agents the current writer stream already left a breadcrumb for
	 * through retrace_deserialize_response (context.c): a caller that makes
	 * many calls to one service pushes one breadcrumb, not one per call. */
	struct {
		uint64_t trace_lo;
		uint32_t stream;
		uint32_t n;               /* entries used, then replaced round robin */
		retrace_agent_id agent[RT_RESPONSE_CRUMBS];
	} crumbed;
	struct retrace_thread_stats stats;
	uint64_t contexts_rejected; /* retrace_thread_contexts_rejected (context.c) */
	struct rt_tracer_thread tracer;
	uint64_t rate_rng; /* LCG state for the §2.9 choice; seeded apart
			      from any trace's randomness (the choice must not
			      correlate with the keep decision) */
	uint32_t rate_begins; /* trace_rate: begins not yet added to the window */
};

/* The storage of a pool attached after a retired one (client.c). */
struct rt_pool_box {
	struct rt_pool pool; /* first: a struct rt_pool * to it is one to the box */
	struct rt_pool_box *next;
};

struct rt_client_state {
	pthread_mutex_t attach_lock;
	struct rt_pool pool_storage;
	struct rt_pool *pool;          /* NULL when not attached (acquire/release) */
	struct retrace_config cfg;
	char pool_name[64];
	uint32_t slot;                 /* registry slot or UINT32_MAX */
	uint64_t next_attach_ns;       /* retry schedule when the pool is missing */
	int configured;
	int warned;
	unsigned fork_generation;
	uint32_t next_stream;          /* writer-stream ids handed out, in blocks */
	/* Pools left because their agent retired them (--unlink, --replace): each
	 * stays mapped until the process exits — a thread may still be writing the
	 * segment it began there — so the next attach maps into fresh storage. */
	uint32_t retired;
	struct rt_pool_box *retired_boxes; /* the left mappings' storage after the first */
	int one_per_buffer;            /* RETRACE_ONE_TRACE_PER_BUFFER=1: leave the buffer
					  at every trace's end (the layout before ABI 5,
					  kept to measure against) */
	int populate;                  /* RETRACE_POPULATE (default 1): map the pool with
					  its page tables filled (shm/pool.c says why) */
	/* This host's rate as one word, read by every begin (relaxed): the exponent k
	 * in the top 7 bits, below them P(k + 1) of the §2.9 choice scaled by 2^57
	 * (0: always k). Set at init; with cfg.trace_rate re-set every window. */
	_Atomic uint64_t rate_word;
	_Atomic uint64_t rate_window_start;    /* trace_rate: mono ns the window began */
	_Atomic uint64_t rate_window_begins;   /* trace_rate: begins counted in it */
};

#define RT_RATE_FLUSH 64u              /* a thread adds its begins every this many */
#define RT_RATE_WINDOW_NS 250000000ull /* trace_rate re-measured this often */

/* The rate word of rate p (§2.9 split), or of the power 2^-shift. */
static inline uint64_t rt_rate_word(double p)
{
	uint64_t lower;
	uint32_t k = retrace_rate_split(p, &lower);
	return ((uint64_t)k << 57) | (lower >> 7);
}

static inline uint64_t rt_rate_word_shift(uint32_t shift)
{
	return (uint64_t)(shift > 64 ? 64 : shift) << 57;
}

/* The rate that keeps `limit` traces per second out of `begins` in `ns`. */
static inline double rt_rate_for_limit(uint32_t limit, uint64_t begins, uint64_t ns)
{
	double per_s = ns ? (double)begins * 1e9 / (double)ns : 0.0;
	return per_s > (double)limit ? (double)limit / per_s : 1.0;
}

/* client.c: count RT_RATE_FLUSH begins; at a window's end, the new rate word. */
void rt_rate_tick(struct rt_thread *t);

/*
 * Writer-stream ids (the buffer header's `tid` field, shm/pool.h): every begin
 * takes a fresh one, unique within the process, so that a thread that begins
 * the same trace twice writes two streams whose sequence numbers both start at
 * 0 without one being taken for a re-sent copy of the other. A thread takes
 * RT_STREAM_BLOCK ids at a time from the process counter (one atomic add per
 * block), so begin stays a thread-local increment and threads never share a
 * cache line on it.
 */
#define RT_STREAM_BLOCK 256u

extern struct rt_client_state rt_client;
extern __thread struct rt_thread rt_thread_tls __attribute__((tls_model("initial-exec")));

/* client.c */
void rt_thread_setup(struct rt_thread *t);
struct rt_pool *rt_client_pool(void);
void rt_push_breadcrumb(struct rt_thread *t, uint64_t trace_lo, retrace_agent_id agent);
int rt_push_trigger_group(struct rt_thread *t, retrace_trace_id id, uint32_t trigger_id,
			  const retrace_trace_id *lateral, size_t n_lateral);
uint64_t rt_mono_ns(void);

/* This host's exponent for a new trace: cfg.sample_shift, or one more with
 * probability rate_lower / 2^64 (§2.9). */
static inline uint32_t rt_choose_exp(struct rt_thread *t)
{
	uint64_t w = atomic_load_explicit(&rt_client.rate_word, memory_order_relaxed);
	uint32_t k = (uint32_t)(w >> 57);
	uint64_t lower = w << 7;
	if (__builtin_expect(rt_client.cfg.trace_rate != 0, 0) &&
	    ++t->rate_begins >= RT_RATE_FLUSH)
		rt_rate_tick(t);
	if (__builtin_expect(lower != 0, 0)) {
		/* a 64-bit LCG (Knuth's MMIX constants): one multiply-add in begin; the
		 * comparison is decided by its high bits, which are the good ones */
		uint64_t x = t->rate_rng * 6364136223846793005ull + 1442695040888963407ull;
		t->rate_rng = x;
		k += x < lower;
	}
	return k;
}

/* Is the trace kept at rate 2^-k with R from `source`? The hash rule is the
 * keep rule on retrace_hash_rv(id) (and still defined for k 57..63). */
static inline int rt_trace_kept(retrace_trace_id id, uint32_t k, uint8_t source, uint64_t rv)
{
	if (k == 0)
		return 1;
	if (source == RT_RV_HASH)
		return retrace_sampled(id, k);
	if (k > RETRACE_RV_BITS)
		return 0;
	return retrace_ot_keeps(source == RT_RV_ID ? id.lo : rv, k);
}

/* tracer.c: seed the span-id generator (thread setup); in a fork child, re-seed
 * (the parent's generator would repeat its ids) and re-init the resource lock. */
void rt_tracer_seed(struct rt_thread *t);
void rt_tracer_fork_child(struct rt_thread *t);
void rt_tracer_trigger_event(struct rt_thread *t, uint32_t trigger_id, const char *name);
/* tracer.c: the stream's RESOURCE event, for a stream that dropped every span
 * (its host left breadcrumbs, so the coordinator must find data there). */
void rt_tracer_mark_stream(struct rt_thread *t);
/* tracer.c: does the context this thread would send now name a span that is no
 * call (the call's span was dropped)? The "call dropped" flag of rt= and of the
 * binary context (context.c). */
int rt_tracer_call_dropped(const struct rt_thread *t);

/* A new trace context on this thread (begin, attach): the span stack is empty and
 * log templates must be written again. */
static inline void rt_tracer_reset(struct rt_thread *t)
{
	t->tracer.depth = 0;
	t->tracer.top_dropped = 0;
	t->tracer.detached = 0;
	t->tracer.generation++;
}

/* retrace_detach: remember which context the stack belongs to. */
static inline void rt_tracer_on_detach(struct rt_thread *t)
{
	t->tracer.detached = 1;
	t->tracer.detached_trace_lo = t->ctx.id.lo;
	t->tracer.detached_span = t->ctx.span_id;
}

/* retrace_attach (t->ctx is the attached context): a context that comes back
 * with the span it left with (a round trip through a worker) keeps this
 * thread's stack, so the spans it had open can still be ended here; any other
 * context starts with an empty stack, its span the parent of the next one. */
static inline void rt_tracer_on_attach(struct rt_thread *t)
{
	int round_trip = t->tracer.detached && t->ctx.id.lo == t->tracer.detached_trace_lo &&
			 t->ctx.span_id == t->tracer.detached_span;
	uint32_t depth = t->tracer.depth;
	rt_tracer_reset(t);
	if (round_trip) {
		t->tracer.depth = depth;
		t->tracer.top_dropped = depth && depth <= RETRACE_SPAN_DEPTH &&
					(t->tracer.frame_flags[depth - 1] & RT_FRAME_DROPPED);
	}
}

#endif
