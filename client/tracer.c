/*
 * client/tracer.c — spans, attributes and logs (retrace/tracer.h) written as
 * tracer events (shm/events.h) into the current trace's buffers.
 *
 * How it works:
 *   - Every event is sized first (fixed fields + the strings' lengths, cut at
 *     RETRACE_EV_MAX_STR), then retrace_reserve(bound) gives room in the
 *     thread's buffer, the fields are written in place with the inline msgpack
 *     writer of shm/mpack_put.h (ATTR and every event's head through
 *     shm/event_put.h, the encoder the coordinator's weaver shares) and
 *     retrace_commit(used) frames it. No lock, no
 *     allocation, no system call; a too-big event makes reserve return NULL and
 *     is dropped and counted.
 *   - The trace context's span_id is the current span, with span_origin saying
 *     where it came from (a local span, the remote parent from deserialize, a
 *     retrace_set_span_id, or an id retrace_span_id derived for raw users, which
 *     is never used as a parent). Starting a span saves (span_id, origin) on a
 *     per-thread stack and makes the new random id current; ending pops it back.
 *     begin/attach empty the stack (client.c calls rt_tracer_reset).
 *   - Beyond RETRACE_SPAN_DEPTH the span is still recorded and becomes current,
 *     but its parent is not saved: its end returns to the span that was current
 *     when the stack filled (deep_base). An end that finds deep_base current
 *     while still too deep cannot name its span and writes nothing (that span
 *     stays open in the data) rather than ending the wrong one.
 *   - A RESOURCE event is written before the first event of every writer stream
 *     (ctx.resource_written moves with the context). The resource map is
 *     pre-encoded under a mutex into an immutable blob whenever it changes (or
 *     the pid changes after fork) and published with a release store; writing it
 *     is one memcpy. Old blobs stay linked (a reader may still copy one).
 *   - Log sites parse their format once: the first caller to claim the site
 *     (CAS 0 -> SITE_BUSY) publishes types and then the template id with a
 *     release store; concurrent first callers use their own local parse. A
 *     TEMPLATE event precedes the first LOG of each template per trace and
 *     thread: a 64-slot direct-mapped cache keyed by template id, valid for one
 *     tracer generation (bumped at every begin/attach), so a template may be
 *     written twice but never missed. Events that landed in the discard buffer
 *     do not count as written (resource and templates).
 *   - Outside a trace, or in a trace this host does not record, every call is
 *     a no-op that touches neither the stack nor the buffers: span_start returns
 *     0 and retrace_serialize keeps passing the incoming parent through.
 */
#include "client.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adaptive/policy_table.h"
#include "shm/event_put.h"
#include "shm/events.h"
#include "shm/fmt.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define EV_HEAD RT_EV_HEAD_SIZE /* 0xC1 TYPE */
#define EV_SMALL_UINT 2u     /* kind, level, status: at most 0xcc + byte */
#define SITE_BUSY UINT64_MAX /* a site being published by its first caller */

/* Resource limits: the blob must fit the smallest pool buffer (4 KiB). */
#define RESOURCE_KEY_MAX 128u
#define RESOURCE_VALUE_MAX 1024u
#define RESOURCE_BLOB_MAX 2048u

/* ---------------------------------------------------------- helpers ---- */

/* The calling thread if it is recording a trace, else NULL (no setup needed:
 * an uninitialised thread state reads as inactive). */
static inline struct rt_thread *recording_thread(void)
{
	struct rt_thread *t = &rt_thread_tls;
	return likely(t->ctx.active && t->ctx.recorded) ? t : NULL;
}

/* Length of `s` cut at RETRACE_EV_MAX_STR, on a UTF-8 character boundary. */
static inline size_t cut_len(struct rt_thread *t, const char *s)
{
	size_t n = strnlen(s, RETRACE_EV_MAX_STR + 1);
	if (unlikely(n > RETRACE_EV_MAX_STR)) {
		n = RETRACE_EV_MAX_STR;
		while (n > RETRACE_EV_MAX_STR - 3 && ((uint8_t)s[n] & 0xC0) == 0x80)
			n--;
		t->tracer.stats.strings_cut++;
	}
	return n;
}

static inline uint8_t *put_head(uint8_t *p, enum retrace_event_type type)
{
	return rt_ev_put_head(p, type);
}

/* Span id of logs and attributes: the current span if it is a local one. */
static inline uint64_t local_span(const struct rt_trace_ctx *c)
{
	return c->span_origin == RT_SPAN_LOCAL ? c->span_id : 0;
}

/* ------------------------------------------------------- resource ---- */

enum resource_type { RES_STR, RES_INT };

struct resource_attr {
	char key[RESOURCE_KEY_MAX + 1];
	uint8_t type;
	int64_t i;
	char s[RESOURCE_VALUE_MAX + 1];
};

/* An immutable, pre-encoded resource map. */
struct resource_blob {
	struct resource_blob *older; /* kept: a writer may still be copying it */
	uint64_t site_seed;          /* rt_adapt_site_seed(service.name) */
	uint32_t pid;
	uint32_t len;
	uint8_t bytes[];
};

static struct {
	pthread_mutex_t lock;
	struct resource_attr attrs[RETRACE_EV_MAX_RESOURCE];
	uint32_t n;
	int defaults_done;
	struct resource_blob *_Atomic blob; /* current (acquire/release) */
} resource = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct resource_attr *resource_slot(const char *key)
{
	uint32_t i;
	for (i = 0; i < resource.n; i++)
		if (strcmp(resource.attrs[i].key, key) == 0)
			return &resource.attrs[i];
	if (resource.n == RETRACE_EV_MAX_RESOURCE)
		return NULL;
	snprintf(resource.attrs[resource.n].key, sizeof resource.attrs[0].key, "%s", key);
	return &resource.attrs[resource.n++];
}

static void default_service_name(char *out, size_t n)
{
	const char *env = getenv("RETRACE_SERVICE");
	FILE *f;
	if (env && *env && strlen(env) <= RESOURCE_VALUE_MAX) {
		snprintf(out, n, "%s", env);
		return;
	}
	f = fopen("/proc/self/comm", "re");
	if (f) {
		if (fgets(out, (int)n, f)) {
			out[strcspn(out, "\n")] = '\0';
			fclose(f);
			if (*out)
				return;
		} else {
			fclose(f);
		}
	}
	snprintf(out, n, "%s", program_invocation_short_name);
}

/* service.name, host.name, process.pid come first, in that order. */
static void resource_defaults_locked(void)
{
	struct resource_attr *a;
	if (resource.defaults_done)
		return;
	resource.defaults_done = 1;
	a = resource_slot("service.name");
	a->type = RES_STR;
	default_service_name(a->s, sizeof a->s);
	a = resource_slot("host.name");
	a->type = RES_STR;
	if (gethostname(a->s, sizeof a->s - 1) != 0)
		a->s[0] = '\0';
	a->s[sizeof a->s - 1] = '\0';
	a = resource_slot("process.pid");
	a->type = RES_INT;
	a->i = getpid();
}

static size_t resource_encoded_size(const struct resource_attr *a)
{
	size_t kn = strlen(a->key), n = mp_str_header_size(kn) + kn;
	if (a->type == RES_STR)
		return n + mp_str_header_size(strlen(a->s)) + strlen(a->s);
	return n + MP_INT_MAX_SIZE;
}

/* Encode the attributes into a new blob and publish it; -1 if too big. */
static int resource_publish_locked(void)
{
	struct resource_blob *b;
	size_t size = 3, i;
	uint8_t *p;

	resource.attrs[2].i = getpid(); /* process.pid is always this process */
	for (i = 0; i < resource.n; i++)
		size += resource_encoded_size(&resource.attrs[i]);
	if (size > RESOURCE_BLOB_MAX)
		return -1;
	b = malloc(sizeof *b + size);
	if (!b)
		return -1;
	p = mp_put_map_header(b->bytes, resource.n);
	for (i = 0; i < resource.n; i++) {
		const struct resource_attr *a = &resource.attrs[i];
		p = mp_put_str(p, a->key, strlen(a->key));
		p = a->type == RES_STR ? mp_put_str(p, a->s, strlen(a->s)) : mp_put_int(p, a->i);
	}
	b->len = (uint32_t)(p - b->bytes);
	b->pid = (uint32_t)getpid();
	/* attrs[0] is service.name (resource_defaults_locked puts it first), cut
	 * the way the decoder will read it back */
	b->site_seed = rt_adapt_site_seed(resource.attrs[0].s,
					  strnlen(resource.attrs[0].s, RETRACE_EV_MAX_STR));
	b->older = resource.blob;
	/* pairs with the acquire loads of resource.blob below (resource_blob_for,
	 * the policy lookup): a reader sees the blob's contents written */
	atomic_store_explicit(&resource.blob, b, memory_order_release);
	return 0;
}

/* Set one attribute (replacing a key already there) and republish. */
static int resource_set(const char *key, enum resource_type type, const char *s, int64_t i)
{
	struct resource_attr *a, saved;
	uint32_t n_before;
	int rc = RETRACE_OK;

	if (!key || !*key || strlen(key) > RESOURCE_KEY_MAX ||
	    (type == RES_STR && (!s || strlen(s) > RESOURCE_VALUE_MAX)))
		return RETRACE_E_INVAL;
	pthread_mutex_lock(&resource.lock);
	resource_defaults_locked();
	n_before = resource.n;
	a = resource_slot(key);
	if (!a) {
		pthread_mutex_unlock(&resource.lock);
		return RETRACE_E_FULL;
	}
	saved = *a;
	a->type = (uint8_t)type;
	a->i = i;
	if (type == RES_STR)
		snprintf(a->s, sizeof a->s, "%s", s);
	if (resource_publish_locked() != 0) { /* too long altogether: undo */
		*a = saved;
		resource.n = n_before;
		rc = RETRACE_E_INVAL;
	}
	pthread_mutex_unlock(&resource.lock);
	return rc;
}

int retrace_set_service_name(const char *name)
{
	return resource_set("service.name", RES_STR, name, 0);
}

int retrace_resource_str(const char *key, const char *value)
{
	return resource_set(key, RES_STR, value, 0);
}

int retrace_resource_int(const char *key, int64_t value)
{
	return resource_set(key, RES_INT, NULL, value);
}

/* The blob for this process (built on first use and again after fork). */
static const struct resource_blob *resource_blob_for(uint32_t pid)
{
	struct resource_blob *b = atomic_load_explicit(&resource.blob, memory_order_acquire);
	if (likely(b && b->pid == pid))
		return b;
	pthread_mutex_lock(&resource.lock);
	resource_defaults_locked();
	b = atomic_load_explicit(&resource.blob, memory_order_acquire);
	if (!b || b->pid != pid)
		resource_publish_locked();
	b = atomic_load_explicit(&resource.blob, memory_order_acquire);
	pthread_mutex_unlock(&resource.lock);
	return b;
}

/* RESOURCE  pid:u32  map: once per writer stream, before its first event. */
static __attribute__((noinline)) void write_resource(struct rt_thread *t)
{
	const struct resource_blob *b = resource_blob_for(t->ctx.writer_pid);
	uint8_t *p0, *p;
	if (!b)
		return; /* out of memory: the stream decodes with an unknown service */
	p0 = retrace_reserve(EV_HEAD + 5 + b->len);
	if (!p0) {
		t->tracer.stats.events_too_big++;
		return;
	}
	p = put_head(p0, RETRACE_EV_RESOURCE);
	p = mp_put_u32_fixed(p, t->ctx.writer_pid);
	memcpy(p, b->bytes, b->len);
	p += b->len;
	retrace_commit((size_t)(p - p0));
	if (t->ctx.buffer_id != RT_BUFFER_DISCARD)
		t->ctx.resource_written = 1;
}

void rt_tracer_mark_stream(struct rt_thread *t)
{
	if (t->ctx.active && t->ctx.recorded && !t->ctx.resource_written)
		write_resource(t);
}

/* Room for an event of at most `bound` bytes, after the stream's RESOURCE. */
static inline uint8_t *event_reserve(struct rt_thread *t, size_t bound)
{
	uint8_t *p;
	if (unlikely(!t->ctx.resource_written))
		write_resource(t);
	p = retrace_reserve(bound);
	if (unlikely(!p))
		t->tracer.stats.events_too_big++;
	return p;
}

/* ----------------------------------------------------------- ids ---- */

/* The seed goes through the one splitmix64 the client has (retrace_trace_hash),
 * as client.c's and context.c's do. */
void rt_tracer_seed(struct rt_thread *t)
{
	retrace_trace_id m = { 0, retrace_ticks() ^ ((uint64_t)t->tid << 32) ^ t->pid ^
				      (uint64_t)(uintptr_t)t };
	uint64_t s = retrace_trace_hash(m);
	t->tracer.rng = s ? s : 0x9E3779B97F4A7C15ull;
}

/* xorshift64*: the odd multiplier maps a non-zero state to a non-zero id. */
static inline uint64_t next_span_id(struct rt_tracer_thread *tr)
{
	uint64_t x = tr->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	tr->rng = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* --------------------------------------------------------- spans ---- */

static inline void push_span(struct rt_thread *t, uint64_t id, uint64_t tick)
{
	struct rt_tracer_thread *tr = &t->tracer;
	struct rt_trace_ctx *c = &t->ctx;
	if (likely(tr->depth < RETRACE_SPAN_DEPTH)) {
		uint32_t d = tr->depth;
		tr->saved_span[d] = c->span_id;
		tr->saved_origin[d] = c->span_origin;
		tr->frame_tick[d] = tick;
		tr->frame_adj[d] = 0;
		if (unlikely(tr->top_dropped)) {
			tr->frame_flags[d] = RT_FRAME_IN_DROPPED;
			tr->frame_anchor[d] = tr->frame_anchor[d - 1];
		} else {
			tr->frame_flags[d] = 0;
			tr->frame_anchor[d] = (uint8_t)(d ? d - 1 : 0);
		}
	} else {
		if (tr->depth == RETRACE_SPAN_DEPTH) {
			tr->deep_base = c->span_id;
			tr->deep_base_origin = c->span_origin;
		}
		tr->stats.spans_too_deep++;
	}
	tr->depth++;
	tr->top_dropped = 0;
	c->span_id = id;
	c->span_origin = RT_SPAN_LOCAL;
}

/* SPAN_START  span_id  parent_id  kind  tick  name  [p16]: p16 only when the
 * span was kept by the policy table with a probability below 1. */
static uint64_t write_span_start(struct rt_thread *t, uint64_t id, uint64_t parent,
				 enum retrace_span_kind kind, uint64_t tick, const char *name,
				 size_t n, uint16_t p16)
{
	uint8_t *p0 = event_reserve(t, EV_HEAD + 2 * MP_U64_FIXED_SIZE + EV_SMALL_UINT +
					       MP_U64_FIXED_SIZE + 3 + n + 3);
	if (likely(p0 != NULL)) {
		uint8_t *p = put_head(p0, RETRACE_EV_SPAN_START);
		p = mp_put_u64_fixed(p, id);
		p = mp_put_u64_fixed(p, parent);
		p = mp_put_uint(p, (uint8_t)kind);
		p = mp_put_u64_fixed(p, tick);
		p = mp_put_str(p, name, n);
		if (unlikely(p16 != RT_ADAPT_P16_ALWAYS))
			p = mp_put_uint(p, p16);
		retrace_commit((size_t)(p - p0));
	}
	return id;
}

static uint64_t span_start(struct rt_thread *t, const char *name, size_t n,
			   enum retrace_span_kind kind, uint64_t parent, uint16_t p16)
{
	uint64_t id = next_span_id(&t->tracer), tick = retrace_ticks();
	write_span_start(t, id, parent, kind, tick, name ? name : "", n, p16);
	push_span(t, id, tick);
	t->tracer.stats.spans_started++;
	return id;
}

/*
 * Dropped spans (the pool's policy table, docs/adaptive.md). A span may be
 * dropped only if everything that depends on it survives without it:
 *   - it has a recorded local span open below it on this thread (so never a
 *     root or the first span after an attach): its children, logs and
 *     outgoing context attach there; or it lies under the remote parent and
 *     the caller said its call span was dropped (ctx.call_dropped, the "call
 *     dropped" flag of rt=): that parent is then no call waiting for its
 *     SERVER span, so a host's entry span and the spans below it may go, and
 *     attach to the caller's recorded span across hosts (anchor
 *     RT_ANCHOR_REMOTE: nothing to correct here, the caller's adj counts the
 *     call whole). An entry span whose caller kept the call is never dropped:
 *     the kept CLIENT span needs it as its match;
 *   - (CLIENT and PRODUCER spans may be dropped: what the next hop needs is
 *     the context, and the context carries the recorded ancestor, so the
 *     callee's entry span names that ancestor as parent, and the flag tells
 *     the callee so (rt_tracer_call_dropped); breadcrumbs and rt= do not
 *     depend on a span record at all. A stream that dropped every span still
 *     writes its RESOURCE at the end (rt_tracer_mark_stream): its host left
 *     breadcrumbs, and a named host without data would make the trace
 *     incoherent);
 *   - no trigger has fired for the trace (ctx.fired);
 *   - it is within the kept stack depth.
 * Errors cannot be known at start: a dropped span that ends in error is
 * recorded at its end as a span of its own (start tick, kind and up to
 * RT_DROPPED_NAME_MAX bytes of its name kept in its frame), child of the
 * nearest recorded ancestor, without p16 (it was kept by rule, not by chance).
 * Its own children stay where they attached. A recovered CLIENT/PRODUCER span
 * is written as INTERNAL: its callee already named the ancestor as parent, so
 * as a call it would be flagged unmatched (decode.c) and the trace incomplete.
 *
 * Self time: the decoder takes a span's exclusive time as its duration minus
 * its recorded children's; a dropped child's time would silently stay in it,
 * and the learner would blame the ancestor for the dropped span's variance.
 * So the nearest recorded ancestor A accumulates in frame_adj, written in its
 * SPAN_END: + the duration of each dropped span directly under a recorded span
 * (the outermost of a dropped run), - the duration of each recorded span whose
 * parent frame was dropped (A's decoder subtracts it as A's child already,
 * though it lies inside a dropped span counted whole). Then A's self time =
 * duration - recorded children - adj, whatever the nesting.
 * A dropped call (CLIENT/PRODUCER) is counted like any dropped span: its
 * callee's spans (its entry span, or, if that was dropped too, the spans
 * below it) then name A as parent from another process, and
 * rt_decode_self_times does not subtract such a span from a parent that is
 * no call (it lies inside the dropped call, which adj counts whole).
 *
 * The keep draw comes from the thread's span-id generator (xorshift64*): no
 * system call, no shared write.
 */
static __attribute__((noinline)) uint64_t span_drop(struct rt_thread *t, const char *name,
						    size_t n, enum retrace_span_kind kind)
{
	struct rt_tracer_thread *tr = &t->tracer;
	uint32_t d = tr->depth, top = d - 1;
	size_t k = n < RT_DROPPED_NAME_MAX ? n : RT_DROPPED_NAME_MAX;
	tr->saved_span[d] = t->ctx.span_id;
	tr->saved_origin[d] = t->ctx.span_origin;
	tr->frame_tick[d] = retrace_ticks();
	tr->frame_kind[d] = (uint8_t)kind;
	if (tr->top_dropped) {
		tr->frame_flags[d] = RT_FRAME_DROPPED | RT_FRAME_IN_DROPPED;
		tr->frame_anchor[d] = tr->frame_anchor[top];
	} else {
		tr->frame_flags[d] = RT_FRAME_DROPPED;
		/* under the remote parent (no recorded frame here): nothing to correct */
		tr->frame_anchor[d] = (uint8_t)(t->ctx.span_origin == RT_SPAN_LOCAL && d
							? top : RT_ANCHOR_REMOTE);
	}
	t->ctx.stream_dropped = 1;

	memcpy(tr->frame_name[d], name, k);
	tr->frame_name[d][k] = '\0';
	tr->depth = d + 1;
	tr->top_dropped = 1;
	tr->stats.spans_dropped++;
	/* The context keeps the recorded ancestor: it is what children, logs and
	 * retrace_serialize use, and what a caller passing this id as an
	 * explicit parent should get. */
	return t->ctx.span_id;
}

/* The "call dropped" flag a context sent now carries (context.c): the span it
 * names is no call span, because the innermost open span is a dropped
 * CLIENT/PRODUCER (its recorded ancestor is named instead), or because no
 * local span is recorded and the remote parent came with the flag (a host
 * that dropped its entry span, or does not record the trace, passes it on).
 * A recorded innermost span, whatever its kind, says no: it may be the call. */
int rt_tracer_call_dropped(const struct rt_thread *t)
{
	const struct rt_tracer_thread *tr = &t->tracer;
	if (tr->top_dropped && tr->depth > 0 && tr->depth <= RETRACE_SPAN_DEPTH) {
		uint8_t kind = tr->frame_kind[tr->depth - 1];
		if (kind == RETRACE_SPAN_CLIENT || kind == RETRACE_SPAN_PRODUCER)
			return 1;
	}
	return t->ctx.span_origin == RT_SPAN_REMOTE && t->ctx.call_dropped;
}

/*
 * The span's site hash. Span names are nearly always a handful of literals, so
 * the hash is cached per thread, direct-mapped by the name's address; a hit
 * also needs the same length, the same service (resource blob) and the same
 * first and last 8 bytes, so a buffer reused for another name (a formatted
 * name on the stack) misses unless the two agree in all of those (for names
 * up to 16 bytes that is the whole name). Names under 8 bytes are not cached
 * (they hash in a word and the finaliser). A wrong hit could only apply
 * another site's probability, which the kept span records anyway.
 */
static inline struct rt_site_slot *site_slot(struct rt_tracer_thread *tr,
					     const struct resource_blob *b, const char *name,
					     size_t n)
{
	struct rt_site_slot *c;
	uint64_t first, last;
	memcpy(&first, name, 8);
	memcpy(&last, name + n - 8, 8);
	c = &tr->site_cache[((uintptr_t)name >> 3) & (RT_SITE_CACHE - 1)];
	if (likely(c->name == name && c->len == n && c->blob == b && c->first == first &&
		   c->last == last))
		return c;
	c->name = name;
	c->len = (uint32_t)n;
	c->blob = b;
	c->first = first;
	c->last = last;
	c->site = rt_adapt_site_hash_from(b->site_seed, name, n);
	c->pgen = 0;
	return c;
}

/*
 * The table's probability for this span site, RT_ADAPT_P16_ALWAYS if there is
 * no table or the span may not be dropped (rules above).
 *
 * The answer is cached with the site (the cache slot keeps p16, the pool and
 * the table generation it came from): the agent moves the generation word on
 * every table it publishes and never rewrites the copy a generation points
 * at, so while the generation is unchanged the answer is too (a publish that
 * fails leaves the generation and the live copy alone). A hit is one load of
 * the generation and the site cache's compare; a miss runs the seqlock'd
 * lookup and caches its answer only if the generation did not move meanwhile.
 * An empty table is remembered per thread by its generation the same way, so
 * a pool whose agent cleared the table costs one load and no hashing.
 */
static inline uint16_t span_policy(struct rt_thread *t, const char *name, size_t n)
{
	const struct rt_pool *pool = t->ctx.pool;
	struct rt_tracer_thread *tr = &t->tracer;
	const struct resource_blob *b;
	struct rt_site_slot *slot = NULL;
	uint64_t g, seq, site;
	uint16_t p16;
	int c, attempt;
	if (likely(!pool || !pool->policy))
		return RT_ADAPT_P16_ALWAYS;
	/* The common case (a recorded local span below) tests as it did before the
	 * call-dropped flag; the rest is the remote rule, off the fast path. */
	if (unlikely(tr->depth == 0 || tr->depth >= RETRACE_SPAN_DEPTH || t->ctx.fired ||
		     t->ctx.span_origin != RT_SPAN_LOCAL) &&
	    !(t->ctx.span_origin == RT_SPAN_REMOTE && t->ctx.call_dropped &&
	      tr->depth < RETRACE_SPAN_DEPTH && !t->ctx.fired))
		return RT_ADAPT_P16_ALWAYS;
	g = rt_policy_generation_now(pool);
	if (g == 0 || (g == tr->empty_gen && pool == tr->empty_pool))
		return RT_ADAPT_P16_ALWAYS; /* nothing published, or an empty table */
	b = atomic_load_explicit(&resource.blob, memory_order_acquire);
	if (unlikely(!b || b->pid != t->ctx.writer_pid)) {
		b = resource_blob_for(t->ctx.writer_pid);
		if (!b)
			return RT_ADAPT_P16_ALWAYS;
	}
	if (likely(n >= 8)) {
		slot = site_slot(tr, b, name, n);
		if (likely(slot->pgen == g && slot->ppool == pool))
			return slot->p16;
		site = slot->site;
	} else {
		site = rt_adapt_site_hash_from(b->site_seed, name, n);
	}
	for (attempt = 0; attempt < 2; attempt++) {
		if ((c = rt_policy_read_begin(pool, &seq)) < 0) {
			/* empty (a live copy's count changes only after the
			 * generation moved away from it), or a writer on it */
			if (ck_pr_load_32(&pool->policy->copy[g & 1].sites) == 0 &&
			    rt_policy_generation_now(pool) == g) {
				tr->empty_gen = g;
				tr->empty_pool = pool;
			}
			return RT_ADAPT_P16_ALWAYS;
		}
		p16 = rt_adapt_table_lookup(pool->policy_slots[c], pool->geo.policy_capacity, site);
		if (likely(rt_policy_read_end(pool, c, seq))) {
			if (slot && rt_policy_generation_now(pool) == g) {
				slot->p16 = p16;
				slot->ppool = pool;
				slot->pgen = g;
			}
			return p16;
		}
	}
	tr->stats.policy_unstable++;
	return RT_ADAPT_P16_ALWAYS;
}

uint64_t retrace_span_start(const char *name, enum retrace_span_kind kind)
{
	struct rt_thread *t = recording_thread();
	const struct rt_trace_ctx *c;
	uint16_t p16;
	size_t n;
	if (!t)
		return 0;
	c = &t->ctx;
	name = name ? name : "";
	n = cut_len(t, name);
	p16 = span_policy(t, name, n);
	if (unlikely(p16 != RT_ADAPT_P16_ALWAYS) &&
	    !rt_adapt_keep(p16, (uint16_t)(next_span_id(&t->tracer) >> 48)))
		return span_drop(t, name, n, kind);
	/* An id retrace_span_id derived for raw users is no span: not a parent. */
	return span_start(t, name, n, kind, c->span_origin == RT_SPAN_DERIVED ? 0 : c->span_id,
			  p16);
}

uint64_t retrace_span_start_child(const char *name, enum retrace_span_kind kind,
				  uint64_t parent_span_id)
{
	struct rt_thread *t = recording_thread();
	uint64_t current, id;
	uint32_t d;
	if (!t)
		return 0;
	name = name ? name : "";
	current = t->ctx.span_id;
	d = t->tracer.depth;
	id = span_start(t, name, cut_len(t, name), kind, parent_span_id, RT_ADAPT_P16_ALWAYS);
	/* Under a dropped span with another parent than the recorded ancestor:
	 * not that ancestor's decoded child, so no correction of its self time. */
	if (d < RETRACE_SPAN_DEPTH && parent_span_id != current)
		t->tracer.frame_flags[d] &= (uint8_t)~RT_FRAME_IN_DROPPED;
	return id;
}

/* SPAN_END  span_id  tick  status  [code  message]  [adj]: adj (ticks, signed)
 * only when non-zero, see "Dropped spans". */
static void write_span_end(struct rt_thread *t, uint64_t id, uint64_t tick,
			   enum retrace_span_status status, int64_t code, const char *message,
			   int64_t adj)
{
	size_t n = 0, bound = EV_HEAD + MP_U64_FIXED_SIZE * 2 + EV_SMALL_UINT + MP_INT_MAX_SIZE;
	uint8_t *p0, *p;
	if (status == RETRACE_STATUS_ERROR) {
		n = message ? cut_len(t, message) : 0;
		bound += MP_INT_MAX_SIZE + 3 + n;
	}
	p0 = event_reserve(t, bound);
	if (unlikely(!p0))
		return;
	p = put_head(p0, RETRACE_EV_SPAN_END);
	p = mp_put_u64_fixed(p, id);
	p = mp_put_u64_fixed(p, tick);
	p = mp_put_uint(p, (uint8_t)status);
	if (status == RETRACE_STATUS_ERROR) {
		p = mp_put_int(p, code);
		p = mp_put_str(p, message ? message : "", n);
	}
	if (unlikely(adj != 0))
		p = mp_put_int(p, adj);
	retrace_commit((size_t)(p - p0));
}

/* The end of a dropped span at frame d (ctx.span_id is its anchor's span). */
static __attribute__((noinline)) void dropped_end(struct rt_thread *t, uint32_t d,
						  enum retrace_span_status status, int64_t code,
						  const char *message, uint64_t tick)
{
	struct rt_tracer_thread *tr = &t->tracer;
	uint64_t dur = tick - tr->frame_tick[d];
	uint8_t in_dropped = tr->frame_flags[d] & RT_FRAME_IN_DROPPED;
	enum retrace_span_kind kind = (enum retrace_span_kind)tr->frame_kind[d];
	if (status == RETRACE_STATUS_ERROR) {
		uint64_t id = next_span_id(tr);
		if (kind == RETRACE_SPAN_CLIENT || kind == RETRACE_SPAN_PRODUCER)
			kind = RETRACE_SPAN_INTERNAL; /* see "Dropped spans" */
		write_span_start(t, id, t->ctx.span_id, kind, tr->frame_tick[d], tr->frame_name[d],
				 strlen(tr->frame_name[d]), RT_ADAPT_P16_ALWAYS);
		write_span_end(t, id, tick, status, code, message, 0);
		tr->stats.spans_recovered++;
		if (in_dropped)
			tr->frame_adj[tr->frame_anchor[d]] -= (int64_t)dur;
	} else if (!in_dropped) {
		tr->frame_adj[tr->frame_anchor[d]] += (int64_t)dur;
	}
}

static void span_end(enum retrace_span_status status, int64_t code, const char *message)
{
	struct rt_thread *t = recording_thread();
	struct rt_tracer_thread *tr;
	struct rt_trace_ctx *c;
	uint64_t tick;
	uint32_t d;
	if (!t)
		return;
	tr = &t->tracer;
	c = &t->ctx;
	if (unlikely(tr->depth == 0)) {
		tr->stats.ends_unmatched++;
		return;
	}
	d = tr->depth - 1;
	tick = retrace_ticks();
	if (likely(d < RETRACE_SPAN_DEPTH)) {
		if (unlikely(tr->frame_flags[d] & RT_FRAME_DROPPED)) {
			dropped_end(t, d, status, code, message, tick);
		} else {
			write_span_end(t, c->span_id, tick, status, code, message, tr->frame_adj[d]);
			if (unlikely(tr->frame_flags[d] & RT_FRAME_IN_DROPPED))
				tr->frame_adj[tr->frame_anchor[d]] -= (int64_t)(tick - tr->frame_tick[d]);
		}
	} else if (c->span_id != tr->deep_base) {
		/* Too deep with deep_base current: the span to end was not kept. */
		write_span_end(t, c->span_id, tick, status, code, message, 0);
	}
	tr->depth = d;
	if (likely(d < RETRACE_SPAN_DEPTH)) {
		c->span_id = tr->saved_span[d];
		c->span_origin = tr->saved_origin[d];
		tr->top_dropped = d && (tr->frame_flags[d - 1] & RT_FRAME_DROPPED);
	} else {
		c->span_id = tr->deep_base;
		c->span_origin = tr->deep_base_origin;
		tr->top_dropped = 0;
	}
}

void retrace_span_end(void)
{
	span_end(RETRACE_STATUS_UNSET, 0, NULL);
}

void retrace_span_end_ok(void)
{
	span_end(RETRACE_STATUS_OK, 0, NULL);
}

void retrace_span_end_error(int64_t code, const char *message)
{
	span_end(RETRACE_STATUS_ERROR, code, message);
}

uint64_t retrace_current_span(void)
{
	const struct rt_thread *t = &rt_thread_tls;
	return t->ctx.active ? local_span(&t->ctx) : 0;
}

/* ---------------------------------------------------- attributes ---- */

/* The thread if it is recording and a local span is current (attributes go to
 * spans only), else NULL. */
static inline struct rt_thread *attr_thread(const char *key)
{
	struct rt_thread *t = recording_thread();
	/* A dropped span's attributes go nowhere: the current span is its
	 * recorded ancestor, which they do not describe. */
	return t && key && t->ctx.span_origin == RT_SPAN_LOCAL && !t->tracer.top_dropped ? t
															: NULL;
}

/* ATTR  span_id  key  value: reserve and write up to the value (NULL if the
 * event is too big); the caller writes the value and commits. */
static inline uint8_t *attr_begin(struct rt_thread *t, const char *key, size_t value_bound,
				  uint8_t **p0)
{
	size_t kn = cut_len(t, key);
	*p0 = event_reserve(t, RT_EV_ATTR_SIZE(kn, value_bound));
	if (unlikely(!*p0))
		return NULL;
	return rt_ev_put_attr_head(*p0, t->ctx.span_id, key, kn);
}

void retrace_attr_str(const char *key, const char *value)
{
	struct rt_thread *t = attr_thread(key);
	uint8_t *p0, *p;
	size_t vn;
	if (!t)
		return;
	value = value ? value : "";
	vn = cut_len(t, value);
	if ((p = attr_begin(t, key, 3 + vn, &p0)) != NULL)
		retrace_commit((size_t)(mp_put_str(p, value, vn) - p0));
}

void retrace_attr_int(const char *key, int64_t value)
{
	struct rt_thread *t = attr_thread(key);
	uint8_t *p0, *p;
	if (t && (p = attr_begin(t, key, MP_INT_MAX_SIZE, &p0)) != NULL)
		retrace_commit((size_t)(mp_put_int(p, value) - p0));
}

void retrace_attr_double(const char *key, double value)
{
	struct rt_thread *t = attr_thread(key);
	uint8_t *p0, *p;
	if (t && (p = attr_begin(t, key, MP_DOUBLE_SIZE, &p0)) != NULL)
		retrace_commit((size_t)(mp_put_double(p, value) - p0));
}

void retrace_attr_bool(const char *key, int value)
{
	struct rt_thread *t = attr_thread(key);
	uint8_t *p0, *p;
	if (t && (p = attr_begin(t, key, 1, &p0)) != NULL)
		retrace_commit((size_t)(mp_put_bool(p, value) - p0));
}

/* ---------------------------------------------------------- logs ---- */

/* Argument types of a parsed format: shm/fmt.h's codes, kept per log site in
 * retrace_log_site.types. Short names for the va_arg switch below. */
enum arg_type {
	A_INT = RT_FMT_ARG_INT, A_SCHAR = RT_FMT_ARG_SCHAR, A_SHORT = RT_FMT_ARG_SHORT,
	A_LONG = RT_FMT_ARG_LONG, A_LLONG = RT_FMT_ARG_LLONG, A_INTMAX = RT_FMT_ARG_INTMAX,
	A_SSIZE = RT_FMT_ARG_SSIZE, A_PTRDIFF = RT_FMT_ARG_PTRDIFF, A_UINT = RT_FMT_ARG_UINT,
	A_UCHAR = RT_FMT_ARG_UCHAR, A_USHORT = RT_FMT_ARG_USHORT, A_ULONG = RT_FMT_ARG_ULONG,
	A_ULLONG = RT_FMT_ARG_ULLONG, A_UINTMAX = RT_FMT_ARG_UINTMAX, A_SIZE = RT_FMT_ARG_SIZE,
	A_UPTRDIFF = RT_FMT_ARG_UPTRDIFF, A_CHAR = RT_FMT_ARG_CHAR, A_DOUBLE = RT_FMT_ARG_DOUBLE,
	A_LDOUBLE = RT_FMT_ARG_LDOUBLE, A_STR = RT_FMT_ARG_STR, A_PTR = RT_FMT_ARG_PTR,
};

static int add_arg(struct retrace_log_site *s, uint8_t type)
{
	if (s->nargs >= RETRACE_EV_MAX_ARGS)
		return -1;
	s->types[s->nargs++] = type;
	return 0;
}

/* Fill nargs/types/bad of `s` from its format, by the grammar the decoder
 * renders with (shm/fmt.h). A conversion it does not support makes the site
 * bad: its calls are logged as text. */
static void parse_format(struct retrace_log_site *s)
{
	const char *p = s->format;

	s->nargs = 0;
	s->bad = 0;
	if (!p || strnlen(p, RETRACE_EV_MAX_STR + 1) > RETRACE_EV_MAX_STR) {
		s->bad = 1;
		return;
	}
	while ((p = strchr(p, '%')) != NULL) {
		struct rt_fmt_spec spec;
		if (p[1] == '%') {
			p += 2;
			continue;
		}
		if (!rt_fmt_parse(p, &spec) || (spec.width_star && add_arg(s, A_INT)) ||
		    (spec.prec_star && add_arg(s, A_INT)) || add_arg(s, spec.arg))
			goto bad;
		p += spec.n;
	}
	return;
bad:
	s->bad = 1;
	s->nargs = 0;
}

/* The site ready to use: the published one, or `local` parsed for this call. */
static const struct retrace_log_site *site_ready(struct retrace_log_site *site,
						 struct retrace_log_site *local)
{
	/* template_id is a field of a public struct (C++ includes it, so it cannot
	 * be _Atomic): ck_pr on the plain integer, as for shared memory. */
	uint64_t id = ck_pr_load_64(&site->template_id);
	ck_pr_fence_acquire(); /* pairs with the release fence below */
	if (likely(id != 0 && id != SITE_BUSY))
		return site;
	memset(local, 0, sizeof *local);
	local->format = site->format;
	parse_format(local);
	local->template_id = local->format ? retrace_event_template_id(local->format) : 1;
	if (id == 0 && local->template_id != SITE_BUSY &&
	    ck_pr_cas_64(&site->template_id, 0, SITE_BUSY)) {
		site->nargs = local->nargs;
		site->bad = local->bad;
		memcpy(site->types, local->types, sizeof site->types);
		/* the parsed fields before the id: pairs with the acquire fence
		 * after the load above */
		ck_pr_fence_release();
		ck_pr_store_64(&site->template_id, local->template_id);
	}
	return local;
}

/* LOG_TEXT  span_id  tick  level  text */
static void log_text(struct rt_thread *t, enum retrace_log_level level, const char *text)
{
	size_t n = cut_len(t, text);
	uint8_t *p0 = event_reserve(t, EV_HEAD + 2 * MP_U64_FIXED_SIZE + EV_SMALL_UINT + 3 + n);
	uint8_t *p;
	if (!p0)
		return;
	p = put_head(p0, RETRACE_EV_LOG_TEXT);
	p = mp_put_u64_fixed(p, local_span(&t->ctx));
	p = mp_put_u64_fixed(p, retrace_ticks());
	p = mp_put_uint(p, (uint8_t)level);
	p = mp_put_str(p, text, n);
	retrace_commit((size_t)(p - p0));
	t->tracer.stats.logs++;
}

void retrace_log_text(enum retrace_log_level level, const char *text)
{
	struct rt_thread *t = recording_thread();
	if (t)
		log_text(t, level, text ? text : "");
}

/* TEMPLATE  template_id  text, unless already written in this generation. */
static __attribute__((noinline)) void write_template(struct rt_thread *t,
						     const struct retrace_log_site *s)
{
	size_t n = cut_len(t, s->format);
	uint8_t *p0 = event_reserve(t, EV_HEAD + MP_U64_FIXED_SIZE + 3 + n), *p;
	if (!p0)
		return;
	p = put_head(p0, RETRACE_EV_TEMPLATE);
	p = mp_put_u64_fixed(p, s->template_id);
	p = mp_put_str(p, s->format, n);
	retrace_commit((size_t)(p - p0));
	t->tracer.stats.templates_written++;
	if (t->ctx.buffer_id != RT_BUFFER_DISCARD) {
		t->tracer.templates[s->template_id % RT_TEMPLATE_CACHE].template_id = s->template_id;
		t->tracer.templates[s->template_id % RT_TEMPLATE_CACHE].generation =
			t->tracer.generation;
	}
}

static inline int template_written(const struct rt_tracer_thread *tr, uint64_t id)
{
	const struct rt_template_slot *slot = &tr->templates[id % RT_TEMPLATE_CACHE];
	return slot->template_id == id && slot->generation == tr->generation;
}

enum arg_kind { K_INT, K_UINT, K_DOUBLE, K_STR, K_NIL };

struct log_arg {
	uint8_t kind;
	uint16_t len; /* K_STR: bytes kept */
	union {
		int64_t i;
		uint64_t u;
		double d;
		const char *s;
	} v;
};

/* Take one argument of `type` from `ap`; returns its encoded size bound. */
static inline size_t fetch_arg(struct rt_thread *t, uint8_t type, struct log_arg *a, va_list *ap)
{
	a->kind = K_INT;
	switch (type) {
	case A_INT: a->v.i = va_arg(*ap, int); break;
	case A_SCHAR: a->v.i = (signed char)va_arg(*ap, int); break;
	case A_SHORT: a->v.i = (short)va_arg(*ap, int); break;
	case A_LONG: a->v.i = va_arg(*ap, long); break;
	case A_LLONG: a->v.i = va_arg(*ap, long long); break;
	case A_INTMAX: a->v.i = va_arg(*ap, intmax_t); break;
	case A_SSIZE: a->v.i = va_arg(*ap, ssize_t); break;
	case A_PTRDIFF: a->v.i = va_arg(*ap, ptrdiff_t); break;
	case A_CHAR: a->v.i = (unsigned char)va_arg(*ap, int); break;
	case A_UINT: a->kind = K_UINT; a->v.u = va_arg(*ap, unsigned); break;
	case A_UCHAR: a->kind = K_UINT; a->v.u = (unsigned char)va_arg(*ap, int); break;
	case A_USHORT: a->kind = K_UINT; a->v.u = (unsigned short)va_arg(*ap, int); break;
	case A_ULONG: a->kind = K_UINT; a->v.u = va_arg(*ap, unsigned long); break;
	case A_ULLONG: a->kind = K_UINT; a->v.u = va_arg(*ap, unsigned long long); break;
	case A_UINTMAX: a->kind = K_UINT; a->v.u = va_arg(*ap, uintmax_t); break;
	case A_SIZE: a->kind = K_UINT; a->v.u = va_arg(*ap, size_t); break;
	case A_UPTRDIFF: a->kind = K_UINT; a->v.u = (uint64_t)va_arg(*ap, ptrdiff_t); break;
	case A_PTR: a->kind = K_UINT; a->v.u = (uintptr_t)va_arg(*ap, void *); break;
	case A_DOUBLE: a->kind = K_DOUBLE; a->v.d = va_arg(*ap, double); break;
	case A_LDOUBLE: a->kind = K_DOUBLE; a->v.d = (double)va_arg(*ap, long double); break;
	case A_STR:
		a->v.s = va_arg(*ap, const char *);
		if (!a->v.s) {
			a->kind = K_NIL;
			return 1;
		}
		a->kind = K_STR;
		a->len = (uint16_t)cut_len(t, a->v.s);
		return 3 + (size_t)a->len;
	default: /* cannot happen: types come from parse_format */
		a->kind = K_NIL;
		return 1;
	}
	return MP_INT_MAX_SIZE;
}

static inline uint8_t *put_arg(uint8_t *p, const struct log_arg *a)
{
	switch (a->kind) {
	case K_INT: return mp_put_int(p, a->v.i);
	case K_UINT: return mp_put_uint(p, a->v.u);
	case K_DOUBLE: return mp_put_double(p, a->v.d);
	case K_STR: return mp_put_str(p, a->v.s, a->len);
	default: return mp_put_nil(p);
	}
}

/* LOG  span_id  tick  level  template_id  arg... */
static void log_args(struct rt_thread *t, struct retrace_log_site *site,
		     enum retrace_log_level level, va_list *ap)
{
	struct retrace_log_site local;
	const struct retrace_log_site *s = site_ready(site, &local);
	struct log_arg args[RETRACE_EV_MAX_ARGS];
	size_t bound = EV_HEAD + 2 * MP_U64_FIXED_SIZE + EV_SMALL_UINT + MP_U64_FIXED_SIZE;
	unsigned i, n = s->nargs;
	uint8_t *p0, *p;

	if (unlikely(s->bad)) {
		log_text(t, level, s->format ? s->format : "");
		return;
	}
	for (i = 0; i < n; i++)
		bound += fetch_arg(t, s->types[i], &args[i], ap);
	if (unlikely(!template_written(&t->tracer, s->template_id)))
		write_template(t, s);
	p0 = event_reserve(t, bound);
	if (unlikely(!p0))
		return;
	p = put_head(p0, RETRACE_EV_LOG);
	p = mp_put_u64_fixed(p, local_span(&t->ctx));
	p = mp_put_u64_fixed(p, retrace_ticks());
	p = mp_put_uint(p, (uint8_t)level);
	p = mp_put_u64_fixed(p, s->template_id);
	for (i = 0; i < n; i++)
		p = put_arg(p, &args[i]);
	retrace_commit((size_t)(p - p0));
	t->tracer.stats.logs++;
}

void retrace_log_at(struct retrace_log_site *site, enum retrace_log_level level, ...)
{
	struct rt_thread *t = recording_thread();
	va_list ap;
	if (!t)
		return;
	va_start(ap, level);
	log_args(t, site, level, &ap);
	va_end(ap);
}

void retrace_log_atv(struct retrace_log_site *site, enum retrace_log_level level, va_list ap)
{
	struct rt_thread *t = recording_thread();
	va_list copy;
	if (!t)
		return;
	va_copy(copy, ap);
	log_args(t, site, level, &copy);
	va_end(copy);
}

/* ------------------------------------------------------ counters ---- */

void retrace_tracer_stats(struct retrace_tracer_stats *out)
{
	const struct rt_thread *t = &rt_thread_tls;
	if (t->initialized)
		*out = t->tracer.stats;
	else
		memset(out, 0, sizeof *out);
}

/* TRIGGER  trigger_id:u32  name:str — the trace fired a named trigger
 * (client.c end_trace, trigger_names.c). */
void rt_tracer_trigger_event(struct rt_thread *t, uint32_t trigger_id, const char *name)
{
	size_t n = strlen(name);
	uint8_t *p0 = event_reserve(t, EV_HEAD + 5 + 3 + n), *p;
	if (!p0)
		return;
	p = put_head(p0, RETRACE_EV_TRIGGER);
	p = mp_put_u32_fixed(p, trigger_id);
	p = mp_put_str(p, name, n);
	retrace_commit((size_t)(p - p0));
}

void rt_tracer_fork_child(struct rt_thread *t)
{
	/* The lock may have been held by a parent thread that does not exist here. */
	pthread_mutex_init(&resource.lock, NULL);
	if (t->initialized)
		rt_tracer_seed(t);
}
