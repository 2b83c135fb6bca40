/*
 * shm/pool.h — the shared-memory ABI between services (libretrace) and the agent.
 *
 * Owns: the layout of one pool object (header, client registry, four typed rings,
 * page-aligned buffers each opening with a buffer header), and creating (agent
 * side) and attaching (client side) with full validation. No policy lives here:
 * who fills which queue and when is the client's and the agent's business.
 *
 * Promises:
 *   - Every offset, size and count in the header is checked against the object's
 *     real size before anything is dereferenced; a bad pool gives an error code
 *     and a sentence, never a crash.
 *   - The header is read once, at create or attach, into the process's own copy
 *     (struct rt_pool.geo), which validation judged; every bound used afterwards
 *     (buffer addresses, ring masks) comes from that copy, never again from the
 *     shared header, which any client can write.
 *   - The pool's memory is reserved (posix_fallocate) when it is created, so no
 *     writer can die of SIGBUS on a full /dev/shm: a pool that does not fit is
 *     refused with the size wanted and the space free. Attach refuses an object
 *     whose memory is not all reserved.
 *   - Layout changes bump RT_ABI_VERSION; a mismatch is refused on attach.
 *   - All structs here are fixed-size, little-endian host order, with explicit
 *     padding, so 64-bit processes built by different compilers agree.
 *
 * Layout of the object (offsets stored in the header, all 64-byte aligned):
 *   [ header | registry slots | 4 x (ck_ring) | 4 x slot arrays | pad to page |
 *     buffer 0 | buffer 1 | ... ]
 */
#ifndef RETRACE_SHM_POOL_H
#define RETRACE_SHM_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ck_ring.h>

#include "ring.h"
#include "adaptive/policy_table.h"

#define RT_POOL_MAGIC 0x4C4F4F5045525452ull /* "RTREPOOL" little-endian */
#define RT_ABI_VERSION 6u /* 2: STASHED/PINNED flags, pin_trigger;
			   * 3: buffer header `tid` is a writer-stream id;
			   * 4: flags bits 24..29 carry the writer's sample shift;
			   * 5: a buffer is a chain of segments (several traces
			   *    share a writer's buffer), complete entries name
			   *    the segment's offset and carry flags;
			   * 6: the span-site policy table (two copies and a
			   *    generation word, struct rt_policy_block) */
#define RT_BUF_MAGIC 0x46554252u            /* "RBUF" */

#define RT_POOL_DEFAULT_NAME "/retrace"
#define RT_POOL_DEFAULT_BUFFER_SIZE (32u * 1024u)
#define RT_POOL_DEFAULT_BUFFER_COUNT 4096u
#define RT_POOL_DEFAULT_BREADCRUMB_SLOTS 16384u
#define RT_POOL_DEFAULT_TRIGGER_SLOTS 4096u
#define RT_POOL_DEFAULT_CLIENT_SLOTS 256u
#define RT_POOL_MIN_BUFFER_SIZE 4096u
#define RT_POOL_MAX_BUFFER_SIZE (64u * 1024u * 1024u)
#define RT_POOL_MAX_BUFFER_COUNT (1u << 24)
#define RT_POOL_DEFAULT_POLICY_SLOTS 4096u /* per copy: room for 1024 sites */
#define RT_POOL_MAX_POLICY_SLOTS (1u << 20)

/* Pool states (header.state). Clients only attach to READY pools. */
enum rt_pool_state {
	RT_POOL_INITIALIZING = 0,
	RT_POOL_READY = 1,
	RT_POOL_CLOSED = 2,
};

/* The four queues. */
enum rt_queue {
	RT_Q_AVAILABLE = 0,  /* agent -> clients: free buffer ids */
	RT_Q_COMPLETE = 1,   /* clients -> agent: filled buffers */
	RT_Q_BREADCRUMB = 2, /* clients -> agent: {trace, previous agent} */
	RT_Q_TRIGGER = 3,    /* clients -> agent: trigger groups */
	RT_Q_COUNT = 4,
};

/* ---- queue entry types (copied by value through the rings) ---- */

struct rt_available_entry {
	uint32_t buffer_id;
};

/*
 * One sealed segment (ABI 5): the records of one writer stream's run in one
 * buffer, `bytes` payload bytes after the segment header at `offset` (0 for the
 * buffer's first segment, whose header is the buffer header). flags:
 *   RT_ENTRY_KEPT   the writer kept the buffer: more segments may follow it;
 *                   without it the writer left the buffer for good here;
 *   RT_ENTRY_CLOSE  no segment: the writer left a kept buffer for good (trace_lo
 *                   and bytes 0, offset = where its close mark header is).
 */
#define RT_ENTRY_KEPT 0x1u
#define RT_ENTRY_CLOSE 0x2u

struct rt_complete_entry {
	uint64_t trace_lo;
	uint32_t buffer_id;
	uint32_t bytes;  /* payload bytes used after the segment header */
	uint32_t offset; /* the segment header's offset in the buffer, 8-aligned */
	uint32_t flags;  /* RT_ENTRY_* */
};

struct rt_breadcrumb_entry {
	uint64_t trace_lo;
	uint32_t agent_id; /* the agent of the host the request came from */
	uint32_t reserved;
};

/*
 * A trigger group is group_size consecutive entries pushed by one batch enqueue
 * (so they become visible together). Entry 0 names the triggered trace; entries
 * 1..group_size-1 its lateral traces. All carry the same trigger_id and
 * group_size; group_index says which one this is. A consumer that finds a group
 * cut by its batch limit can take the rest at once: they are already published.
 */
struct rt_trigger_entry {
	uint64_t trace_hi;
	uint64_t trace_lo;
	uint32_t trigger_id;
	uint16_t group_size;  /* 1 + number of lateral traces, <= 64 */
	uint16_t group_index; /* 0 = the triggered trace */
};

RT_RING_TYPED(available, rt_available_entry)
RT_RING_TYPED(complete, rt_complete_entry)
RT_RING_TYPED(breadcrumb, rt_breadcrumb_entry)
RT_RING_TYPED(trigger, rt_trigger_entry)

/* ---- buffer header: first 64 bytes of every buffer ---- */

#define RT_BUF_INUSE 0x1u   /* handed to a writer */
#define RT_BUF_SEALED 0x2u  /* writer is done; `bytes` is final */
#define RT_BUF_LAST 0x4u    /* the trace ended in this buffer (for this writer) */
#define RT_BUF_STASHED 0x8u /* popped into a writer's stash, not yet written:
			     * `pid` says which process holds it */
#define RT_BUF_PINNED 0x10u /* set by the agent on a sealed buffer of a triggered
			     * trace (pin_trigger says which trigger), so that a
			     * restarted agent keeps the pin */
#define RT_BUF_KEPT 0x20u   /* (ABI 5) stored with SEALED: the writer kept the
			     * buffer after this segment, more may follow */
#define RT_BUF_CLOSED 0x40u /* (ABI 5) a close mark, not a segment: the writer
			     * left the buffer for good here (no data follows) */

/*
 * Bits 24..29 of flags (ABI 4): the writer's sample shift k, 0..63 — the buffer's
 * trace was recorded on this host because it is in the consistent 2^-k of traces
 * the client's trace percentage keeps (retrace_sampled). The writer stores them
 * with every flags word it writes for the buffer (taken, sealed); the agent's
 * PINNED keeps them. What the agent reports as a slice's rate (wire rate_exp).
 */
/*
 * Bit 30 (RT_BUF_RATE_FOREIGN): the writer decided on a random value the caller
 * sent (tracestate ot=rv, or the id's bits under the W3C random flag) rather than
 * the id hash the agent's overload priority complements, so the two steps are
 * independent: a slice at shift s > 0 under overload level l > 0 was kept with
 * probability 2^-(s+l), not 2^-max(s,l). An older agent ignores the bit (and
 * reports the max); an older client never sets it.
 */
#define RT_BUF_RATE_FOREIGN 0x40000000u
#define RT_BUF_RATE_SHIFT 24u
#define RT_BUF_RATE_MASK (0x3Fu << RT_BUF_RATE_SHIFT)
static inline uint32_t rt_buf_rate_flags(uint32_t sample_shift)
{
	return (sample_shift > 63u ? 63u : sample_shift) << RT_BUF_RATE_SHIFT;
}
static inline uint32_t rt_buf_rate_exp(uint32_t flags)
{
	return (flags & RT_BUF_RATE_MASK) >> RT_BUF_RATE_SHIFT;
}

struct rt_buffer_header {
	uint32_t magic;       /* RT_BUF_MAGIC once a writer initialised it */
	uint32_t flags;       /* RT_BUF_*, and the sample shift in bits 24..29;
			       * SEALED is stored with release order */
	uint64_t trace_hi;
	uint64_t trace_lo;
	uint32_t pid;         /* writer process */
	uint32_t tid;         /* writer-stream id, not a thread id (ABI 3): unique
			       * per (pid, retrace_begin), kept by detach/attach.
			       * A thread that begins one trace twice writes two
			       * streams, so (pid, tid, seq) names one buffer and
			       * only a re-sent copy of it repeats the key. */
	uint32_t seq;         /* this buffer's number within its writer stream,
			       * from 0; a buffer lost to the discard path
			       * leaves a gap */
	uint32_t bytes;       /* payload bytes used; final once SEALED */
	uint32_t client_slot; /* registry slot of the writer, or UINT32_MAX */
	uint32_t pin_trigger; /* with RT_BUF_PINNED: the trigger id that pinned it */
	uint64_t first_tick;  /* TSC when the writer took the buffer */
	uint64_t pool_generation; /* header.generation when taken */
};

#define RT_BUF_HEADER_SIZE ((uint32_t)sizeof(struct rt_buffer_header))

/*
 * Segments (ABI 5). A buffer is a chain of segments, each a header of the same
 * struct (RT_BUF_MAGIC, trace id, pid, stream `tid`, `seq`, `bytes`, flags with
 * SEALED/LAST/KEPT and the rate bits, first_tick) followed by `bytes` of
 * records. The first segment's header is the buffer header at offset 0; the
 * next one starts at rt_seg_next(): the end of the records rounded up to 8.
 * The chain ends at the first header that is not a sealed segment (the
 * writer's open segment, a close mark, a zeroed magic) or at the buffer's end.
 */
#define RT_SEG_ALIGN 8u
static inline uint32_t rt_seg_next(uint32_t offset, uint32_t bytes)
{
	uint64_t end = (uint64_t)offset + RT_BUF_HEADER_SIZE + bytes;
	return (uint32_t)((end + RT_SEG_ALIGN - 1) & ~(uint64_t)(RT_SEG_ALIGN - 1));
}

/* ---- client registry ---- */

struct rt_client_slot {
	uint32_t pid;          /* 0: free; claimed by CAS from 0 */
	uint32_t reserved;
	uint64_t start_time;   /* /proc/PID/stat starttime, to tell pid reuse */
	uint64_t heartbeat_ns; /* CLOCK_MONOTONIC of the client's last slow path */
	uint64_t null_buffers; /* this client's discard-buffer fallbacks */
};

/* ---- header ---- */

struct rt_ring_desc {
	uint64_t ring_offset;  /* struct ck_ring */
	uint64_t slots_offset; /* capacity * entry_size bytes */
	uint32_t capacity;     /* power of two; holds capacity - 1 entries */
	uint32_t entry_size;
};

struct rt_pool_header {
	/* identity and geometry (written once, before state becomes READY) */
	uint64_t magic;
	uint32_t abi_version;
	uint32_t state; /* enum rt_pool_state, release-stored */
	uint64_t total_size;
	uint32_t header_size;
	uint32_t page_size;
	uint32_t buffer_size;
	uint32_t buffer_count;
	uint64_t buffers_offset;
	uint64_t registry_offset;
	uint32_t registry_slots;
	uint32_t mode; /* permission bits the creator asked for */
	struct rt_ring_desc rings[RT_Q_COUNT];

	/* TSC calibration: unix_ns = ref_unix_ns + (tick - ref_tick) * 1e9 / tsc_hz */
	uint64_t tsc_hz;
	uint64_t tsc_ref_tick;
	uint64_t tsc_ref_unix_ns;

	/* owner */
	uint32_t agent_pid;
	uint32_t agent_id;
	uint64_t generation; /* bumped each time an agent (re)takes the pool */
	uint64_t agent_start_time;

	/* the span-site policy table (ABI 6): a struct rt_policy_block at
	 * policy_offset, then copy 0's and copy 1's policy_capacity slots each.
	 * policy_capacity 0 = no table: every span is recorded. */
	uint64_t policy_offset;
	uint32_t policy_capacity;
	uint32_t policy_reserved;

	/* counters, atomically incremented by clients (own cache line) */
	_Alignas(64) uint64_t null_buffers;   /* writes that fell to a discard buffer */
	uint64_t trigger_drops;    /* trigger queue full */
	uint64_t breadcrumb_drops; /* breadcrumb queue full */
	uint64_t complete_drops;   /* complete queue full (only if corrupt) */
	uint64_t bad_available;    /* available entries naming no buffer */
	uint64_t registry_full;    /* processes that found no registry slot */
	uint64_t reserved_counters[2];
};

/* ---- the span-site policy table (ABI 6) ---- */

/*
 * The agent (one writer) publishes a whole table at once; clients look one site
 * up per retrace_span_start. Slots are adaptive/policy_table.h's (site tag and
 * p16 in one word). Two copies: the agent rewrites the one readers are not
 * sent to, then moves `generation` to it, so a reader almost never meets a
 * copy being written. Each copy has its own sequence word (odd while being
 * written: a seqlock per copy), which catches the rare reader that was slow
 * enough for the agent to come back to its copy. generation 0 = nothing
 * published (record everything); the live copy is generation & 1.
 *
 * Everything here is writable by every client: a reader bounds every slot
 * index by its own copy of the capacity (rt_pool_geometry), never loops more
 * than twice, and falls back to "record" when it cannot get a stable read.
 * A client that scribbles on the table can only change sampling decisions.
 */
struct rt_policy_copy {
	uint64_t seq;    /* odd while the agent writes this copy */
	uint32_t sites;  /* entries in it (0: an empty table, record everything) */
	uint32_t reserved;
	uint64_t pad[6]; /* one cache line per copy header */
};

struct rt_policy_block {
	uint64_t generation; /* tables published; the live copy is generation & 1 */
	uint64_t updates;    /* same, kept for status (never read by clients) */
	uint64_t pad[6];
	struct rt_policy_copy copy[2];
};

/* ---- a mapped pool, as seen by one process ---- */

/*
 * The geometry as validated at create/attach, in the process's own memory:
 * the shared header is writable by every client, so bounds come from here.
 */
struct rt_pool_geometry {
	uint64_t total_size;
	uint64_t buffers_offset;
	uint64_t registry_offset;
	uint32_t buffer_size;
	uint32_t buffer_count;
	uint32_t registry_slots;
	uint32_t page_size;
	struct rt_ring_desc rings[RT_Q_COUNT];
	uint32_t ring_mask[RT_Q_COUNT]; /* capacity - 1 */
	uint64_t tsc_hz, tsc_ref_tick, tsc_ref_unix_ns;
	uint64_t policy_offset;
	uint32_t policy_capacity; /* 0: no table */
};

struct rt_pool {
	struct rt_pool_header *hdr;
	struct rt_pool_geometry geo;
	uint8_t *base;
	size_t size;
	int fd;
	int owner; /* created by this process */
	char name[64];
	struct ck_ring *ring[RT_Q_COUNT];
	void *slots[RT_Q_COUNT];
	struct rt_client_slot *registry;
	struct rt_policy_block *policy;  /* NULL: no table */
	uint64_t *policy_slots[2];       /* geo.policy_capacity slots each */
};

struct rt_pool_create_opts {
	const char *name;           /* default RT_POOL_DEFAULT_NAME */
	uint32_t buffer_size;       /* multiple of the page size */
	uint32_t buffer_count;
	uint32_t breadcrumb_slots;  /* rounded up to a power of two */
	uint32_t trigger_slots;     /* rounded up to a power of two */
	uint32_t client_slots;
	uint32_t mode;              /* default 0600; 0660 when group is set */
	long group;                 /* -1: none; else chown the object to this gid */
	uint32_t agent_id;
	int replace;                /* unlink an existing object first */
	int fill_available;         /* push every buffer id onto the available queue */
	int owner_lock;             /* take the owner lock (flock) before READY */
	uint32_t policy_slots;      /* per table copy: a power of two >= 8, or 0 for
				     * no table (rounded up; default
				     * RT_POOL_DEFAULT_POLICY_SLOTS) */
	int populate;               /* map with MAP_POPULATE (default 1; pool.c says why) */
};

struct rt_pool_attach_opts {
	const char *name;
	uint32_t expect_buffer_size;  /* 0: any */
	uint32_t expect_buffer_count; /* 0: any */
	int take_over;                /* the caller becomes the owner (rt_pool_takeover):
				       * reserve the memory instead of requiring it, and
				       * restore the rings' own size and mask instead of
				       * refusing them */
	int populate;                 /* map with MAP_POPULATE: no page fault on a first
				       * touch later (pool.c says why); rt_pool_takeover
				       * sets it */
};

/* Defaults for create options. */
void rt_pool_create_defaults(struct rt_pool_create_opts *o);

/*
 * Create (agent side). On failure returns a RETRACE_E_* code and writes a
 * sentence into err (errlen bytes).
 */
int rt_pool_create(const struct rt_pool_create_opts *o, struct rt_pool *pool,
		   char *err, size_t errlen);

/* Attach (client side, or a drainer): validate and map. */
int rt_pool_attach(const struct rt_pool_attach_opts *o, struct rt_pool *pool,
		   char *err, size_t errlen);

/*
 * The owner lock: an exclusive flock on the pool object, held by the agent that
 * owns it (the kernel drops it when that process dies, however it dies). Clients
 * never take it. Returns RETRACE_OK, or RETRACE_E_EXISTS if another process holds
 * it (err names the recorded owner pid).
 */
int rt_pool_lock_owner(struct rt_pool *pool, char *err, size_t errlen);

/*
 * Whether a running agent owns pool `name` (holds its owner lock), without
 * mapping or changing anything: so an agent can refuse before it binds its
 * addresses (whose default names derive from the pool). 1 owned, 0 not (or no
 * such pool).
 */
int rt_pool_owner_running(const char *name);

/*
 * Take over an existing pool after its agent died: attach, take the owner lock,
 * then record this process as the owner and bump the generation. The caller
 * rebuilds its own state from the buffer headers and queues.
 */
int rt_pool_takeover(const char *name, uint32_t agent_id, struct rt_pool *pool,
		     char *err, size_t errlen);

/* Unmap; the creator may also unlink. */
void rt_pool_detach(struct rt_pool *pool);
int rt_pool_unlink(const char *name);
/*
 * Retire the pool `name` before it is unlinked or replaced: if it is a pool of
 * this ABI, store RT_POOL_CLOSED in its header's state (release). Clients check
 * that word whenever they take a fresh buffer and then re-attach by name
 * (client/client.c), so they do not go on writing into a deleted pool. Returns
 * 1 if marked, 0 if there is no such pool or it is not of this ABI (its clients
 * cannot be told), -1 on a system error. The agent calls it on its own pool at
 * --unlink, and rt_pool_create on the old one at replace.
 */
int rt_pool_retire(const char *name);

/*
 * Check a header against the size of the object it came from. Used by attach;
 * exposed so tests and a restarting agent can validate a mapping.
 */
int rt_pool_validate(const struct rt_pool_header *h, size_t object_size,
		     char *err, size_t errlen);

/* Total object size for a geometry (0 if it does not fit in 64 bits). */
uint64_t rt_pool_layout_size(const struct rt_pool_create_opts *o);

/*
 * The owner's repair of the shared header: every geometry field (sizes, counts,
 * offsets, ring descriptors, the rings' own size and mask, TSC calibration)
 * that differs from the process's own copy is written back. Returns how many
 * fields were wrong (0: the header is intact).
 */
unsigned int rt_pool_restore_geometry(struct rt_pool *p);

/* Addresses come from the validated copy: `id` must be < geo.buffer_count. */
static inline struct rt_buffer_header *rt_pool_buffer(const struct rt_pool *p,
						      uint32_t id)
{
	return (struct rt_buffer_header *)(p->base + p->geo.buffers_offset +
					   (uint64_t)id * p->geo.buffer_size);
}

static inline uint8_t *rt_pool_buffer_data(const struct rt_pool *p, uint32_t id)
{
	return (uint8_t *)rt_pool_buffer(p, id) + RT_BUF_HEADER_SIZE;
}

static inline uint32_t rt_pool_payload_size(const struct rt_pool *p)
{
	return p->geo.buffer_size - RT_BUF_HEADER_SIZE;
}

/* A segment header at `offset` of buffer `id` (offset <= buffer size - header). */
static inline struct rt_buffer_header *rt_pool_segment(const struct rt_pool *p, uint32_t id,
						       uint32_t offset)
{
	return (struct rt_buffer_header *)((uint8_t *)rt_pool_buffer(p, id) + offset);
}

/*
 * Is `offset` a place a segment header can be in this pool's buffers, with
 * `bytes` of records after it? (8-aligned, header and records inside the buffer.)
 */
static inline int rt_pool_segment_fits(const struct rt_pool *p, uint32_t offset, uint32_t bytes)
{
	return (offset % RT_SEG_ALIGN) == 0 &&
	       (uint64_t)offset + RT_BUF_HEADER_SIZE + bytes <= p->geo.buffer_size;
}

/* Typed queue accessors. */
#define RT_POOL_RING(p, q) ((p)->ring[(q)])
#define RT_POOL_SLOTS(p, q, type) ((struct type *)(p)->slots[(q)])

/*
 * Queue operations of the pool's owner (and of anyone who must not trust the
 * rings' shared masks): the index mask is the process's own copy, and a push
 * waits at most RT_POOL_OWNER_WAIT yields behind a stalled producer (its
 * entries are then published by the owner's repair of the stall).
 */
#define RT_POOL_OWNER_WAIT 64ul

static inline bool rt_pool_push_available(const struct rt_pool *p,
					  const struct rt_available_entry *e,
					  unsigned int n)
{
	return rt_ring_enqueue_batch_m(p->ring[RT_Q_AVAILABLE],
				       p->geo.ring_mask[RT_Q_AVAILABLE],
				       p->slots[RT_Q_AVAILABLE], e, sizeof *e, n,
				       RT_POOL_OWNER_WAIT);
}

/* The same, handing back a claim whose wait was given up (rt_ring_enqueue_claim). */
static inline int rt_pool_push_available_claim(const struct rt_pool *p,
					       const struct rt_available_entry *e,
					       unsigned int n, struct rt_ring_claim *pending)
{
	return rt_ring_enqueue_claim(p->ring[RT_Q_AVAILABLE],
				     p->geo.ring_mask[RT_Q_AVAILABLE],
				     p->slots[RT_Q_AVAILABLE], e, sizeof *e, n,
				     RT_POOL_OWNER_WAIT, pending);
}

static inline unsigned int rt_pool_pop_available(const struct rt_pool *p,
						 struct rt_available_entry *out,
						 unsigned int max)
{
	return rt_ring_dequeue_batch_m(p->ring[RT_Q_AVAILABLE],
				       p->geo.ring_mask[RT_Q_AVAILABLE],
				       p->slots[RT_Q_AVAILABLE], out, sizeof *out, max);
}

/* The owner's snapshot of the free buffer ids waiting in the available queue
 * (rt_ring_peek_m): nothing is taken. */
static inline unsigned int rt_pool_peek_available(const struct rt_pool *p,
						  struct rt_available_entry *out,
						  unsigned int max)
{
	return rt_ring_peek_m(p->ring[RT_Q_AVAILABLE], p->geo.ring_mask[RT_Q_AVAILABLE],
			      p->slots[RT_Q_AVAILABLE], out, sizeof *out, max);
}

static inline unsigned int rt_pool_pop_complete(const struct rt_pool *p,
						struct rt_complete_entry *out,
						unsigned int max)
{
	return rt_ring_dequeue_batch_m(p->ring[RT_Q_COMPLETE],
				       p->geo.ring_mask[RT_Q_COMPLETE],
				       p->slots[RT_Q_COMPLETE], out, sizeof *out, max);
}

static inline unsigned int rt_pool_pop_breadcrumb(const struct rt_pool *p,
						  struct rt_breadcrumb_entry *out,
						  unsigned int max)
{
	return rt_ring_dequeue_batch_m(p->ring[RT_Q_BREADCRUMB],
				       p->geo.ring_mask[RT_Q_BREADCRUMB],
				       p->slots[RT_Q_BREADCRUMB], out, sizeof *out, max);
}

static inline unsigned int rt_pool_pop_trigger(const struct rt_pool *p,
					       struct rt_trigger_entry *out,
					       unsigned int max)
{
	return rt_ring_dequeue_batch_m(p->ring[RT_Q_TRIGGER],
				       p->geo.ring_mask[RT_Q_TRIGGER],
				       p->slots[RT_Q_TRIGGER], out, sizeof *out, max);
}

/* TSC ticks to Unix nanoseconds with the pool's calibration. */
/* ---- the policy table: publishing (agent) and reading (clients) ---- */

/*
 * Agent side: write n (site, probability) pairs into the copy readers are not
 * on, then make it the live one. n 0 publishes an empty table (record
 * everything). Returns 0, or -1 if the pool has no table, n is beyond what the
 * capacity takes (rt_adapt_table_capacity(n) > capacity) or a site cannot be
 * placed within the probe bound (nothing is published then: readers keep the
 * previous table). One publisher at a time (the agent's control thread).
 */
int rt_pool_policy_publish(struct rt_pool *p, const uint64_t *sites, const double *probs,
			   size_t n);
/* The live table's generation (0: none published) and its entry count. */
uint64_t rt_pool_policy_generation(const struct rt_pool *p, uint32_t *sites);

/*
 * Client side, around one lookup (client/tracer.c):
 *
 *     uint64_t seq; int c = rt_policy_read_begin(p, &seq);
 *     if (c >= 0) { p16 = rt_adapt_table_lookup(p->policy_slots[c], cap, site);
 *                   if (!rt_policy_read_end(p, c, seq)) retry or record; }
 *
 * read_begin returns the live copy (0 or 1) with its sequence, or -1 when
 * there is nothing to look up (no table, nothing published, an empty table, or
 * the copy is being written: all read as "record"). Fences as Concurrency Kit
 * spells them (ck_pr_fence_load is a compiler barrier on x86, where loads are
 * not reordered with loads; it is a real fence elsewhere).
 */
static inline int rt_policy_read_begin(const struct rt_pool *p, uint64_t *seq)
{
	const struct rt_policy_block *b = p->policy;
	uint64_t g, s;
	int c;
	if (!b)
		return -1;
	g = ck_pr_load_64(&b->generation);
	if (g == 0)
		return -1;
	c = (int)(g & 1);
	/* generation before the copy's seq: pairs with the agent's store fence
	 * between finishing the copy (seq even) and moving generation to it. */
	ck_pr_fence_load();
	s = ck_pr_load_64(&b->copy[c].seq);
	if (s & 1)
		return -1;
	/* seq before the copy's contents: if a slot we read was written by a
	 * later pass of the agent, the seq we read in read_end has moved. */
	ck_pr_fence_load();
	if (ck_pr_load_32(&b->copy[c].sites) == 0)
		return -1;
	*seq = s;
	return c;
}

/* The policy block's generation now (0: nothing published), loaded before
 * anything read after it: the acquire side of the agent's store fence before it
 * moves the generation (as in read_begin). */
static inline uint64_t rt_policy_generation_now(const struct rt_pool *p)
{
	uint64_t g = ck_pr_load_64(&p->policy->generation);
	ck_pr_fence_load();
	return g;
}

/* 1 if the copy read since read_begin was stable (no writer came through). */
static inline int rt_policy_read_end(const struct rt_pool *p, int c, uint64_t seq)
{
	/* the slot loads before the seq re-read: pairs with the agent's store
	 * fence between making seq odd and writing the first slot. */
	ck_pr_fence_load();
	return ck_pr_load_64(&p->policy->copy[c].seq) == seq;
}

uint64_t rt_pool_ticks_to_unix_ns(const struct rt_pool_header *h, uint64_t tick);

/* Measure the TSC rate against CLOCK_REALTIME over about `ms` milliseconds. */
void rt_tsc_calibrate(uint64_t *hz, uint64_t *ref_tick, uint64_t *ref_unix_ns,
		      unsigned ms);

/* /proc/PID/stat starttime (clock ticks since boot), 0 if unknown. */
uint64_t rt_process_start_time(pid_t pid);

#endif
