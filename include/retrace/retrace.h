/*
 * retrace.h — the client library that services link (libretrace).
 *
 * What it owns: the calling thread's trace context, the buffers it writes into,
 * and the four shared-memory queues it talks to the host's agent through.
 * What it promises:
 *   - The hot path (retrace_tracepoint, retrace_reserve/commit, retrace_begin/end)
 *     takes no lock, makes no system call and allocates nothing after a thread's
 *     first use. A tracepoint is a bounds check and a copy into the thread's
 *     current buffer; everything else happens on a rare slow path.
 *   - The service is never blocked: with no pool, or with the pool exhausted, data
 *     goes into a per-thread discard buffer and is counted.
 *   - Records are length-framed; a record larger than the room left is split
 *     across buffers with continuation marks and can be rebuilt byte-exact
 *     (the framing constants are in retrace/abi.h).
 *   - retrace_trigger() is async-signal-safe (see its comment).
 *
 * Thread model: every function acts on the calling thread's context. Hand a trace
 * to another thread with retrace_detach()/retrace_attach().
 */
#ifndef RETRACE_RETRACE_H
#define RETRACE_RETRACE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "retrace/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- ids ---- */

/* A W3C trace id: 128 bits. The runtime indexes by `lo`. */
typedef struct retrace_trace_id {
	uint64_t hi;
	uint64_t lo;
} retrace_trace_id;

/* Agent ids name per-host agents; 0 means "none/unknown". */
typedef uint32_t retrace_agent_id;

/* Reserved trigger ids (user trigger ids are 1 .. 0xFFFFFF00). */
#define RETRACE_TRIGGER_HEAD_SAMPLED 0xFFFFFFF0u /* head sampling fired at begin */
#define RETRACE_TRIGGER_UPSTREAM     0xFFFFFFF1u /* a previous hop had fired */
#define RETRACE_TRIGGER_CRASH        0xFFFFFFF2u /* crash handler (triggers/) */
#define RETRACE_TRIGGER_USER_MAX     0xFFFFFF00u /* highest user trigger id */

/* The names of the reserved trigger ids (what `retrace traces`, `show`, the JSON
 * API and the UI print); NULL for any other id. User ids are named with
 * retrace_trigger_name() below. */
static inline const char *retrace_builtin_trigger_name(uint32_t trigger_id)
{
	switch (trigger_id) {
	case RETRACE_TRIGGER_HEAD_SAMPLED: return "head-sampled";
	case RETRACE_TRIGGER_UPSTREAM: return "upstream";
	case RETRACE_TRIGGER_CRASH: return "crash";
	default: return (const char *)0;
	}
}

/* Most lateral traces one trigger call may carry (the group fits one ring batch). */
#define RETRACE_MAX_LATERAL 63

/* ------------------------------------------------------------- errors ---- */

/* enum retrace_error (RETRACE_OK, RETRACE_E_*) is in retrace/abi.h. */

/* A static English sentence for an error code. */
const char *retrace_strerror(int err);

/* --------------------------------------------------------------- init ---- */

struct retrace_config {
	const char *pool_name;        /* shm name, default "/retrace" (RETRACE_POOL) */
	uint32_t expect_buffer_size;  /* 0: accept the pool's (RETRACE_BUFFER_SIZE) */
	uint32_t expect_buffer_count; /* 0: accept the pool's */
	uint32_t sample_shift;        /* record 1 in 2^shift traces (RETRACE_SAMPLE_SHIFT) */
	uint32_t head_shift;          /* head-trigger 1 in 2^shift; 0 = off (RETRACE_HEAD_SHIFT) */
	uint32_t batch;               /* buffers taken/returned per queue op, 1..32, default 8
	                                 (RETRACE_BATCH) */
	int quiet;                    /* 1: no stderr message when the pool is missing
	                                 (RETRACE_QUIET=1) */
	uint32_t sample_ppm;          /* 1..999999: record this many traces per million
	                                 instead, choosing per trace between the two
	                                 neighbouring powers of two (Ertl §2.9;
	                                 RETRACE_TRACE_PERCENT); 0: sample_shift */
	uint32_t trace_rate;          /* >0: record about this many traces per second in
	                                 this process, at a rate re-measured every
	                                 250 ms and reached by the same §2.9 choice
	                                 (RETRACE_TRACE_RATE); overrides the two above */
};

/* Fill `cfg` with defaults overridden by the RETRACE_* environment variables. */
void retrace_config_from_env(struct retrace_config *cfg);

/*
 * Attach this process to the pool. Returns RETRACE_OK, or an error code if the pool
 * could not be used: the process keeps running and traces into the discard buffer
 * (one message on stderr unless quiet). Calling it again re-tries the attach (a
 * client started before the agent can poll). NULL means retrace_config_from_env().
 * Without an explicit call, the first traced call of any thread does it from the
 * environment.
 */
int retrace_init(const struct retrace_config *cfg);

/* Detach from the pool and return this thread's spare buffers. */
void retrace_shutdown(void);

/* True if attached to a pool (else writes go to the discard buffer). */
int retrace_attached(void);

/* The agent id of the pool's owning agent (0 when not attached). */
retrace_agent_id retrace_local_agent(void);

/* -------------------------------------------------------- trace scope ---- */

/*
 * Start recording `id` on this thread. If the thread is already in a trace, that
 * trace is ended first. Returns 1 if the trace is recorded on this host (its hash
 * falls under the trace percentage), 0 if not (the calls below become no-ops).
 * No buffer is taken until the first write.
 */
int retrace_begin(retrace_trace_id id);

/* End the thread's trace: its last buffer is handed to the agent. */
void retrace_end(void);

/* The current trace id ({0,0} if none). Async-signal-safe: it reads only
 * initial-exec thread-local state, so a crash handler may call it. */
retrace_trace_id retrace_current(void);

/* Seal the current buffer and push every pending complete entry now. */
void retrace_flush(void);

/* ---------------------------------------------------------- hot path ---- */

/* Internal fast-path state, exposed for the inline functions only. */
struct retrace_fast {
	uint8_t *cur; /* next frame goes here */
	uint8_t *end; /* end of the current buffer (cur == end: no buffer) */
	uint8_t *reserved; /* non-NULL between retrace_reserve and retrace_commit */
};
extern __thread struct retrace_fast retrace_fast_tls
	__attribute__((tls_model("initial-exec")));

void retrace_tracepoint_slow(const void *data, size_t len, int with_ts);
void *retrace_reserve_slow(size_t len);
void retrace_commit_slow(size_t len);

/* The frame word's flags and sizes (RETRACE_FRAME_*) are in retrace/abi.h. */

static inline uint64_t retrace_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	uint32_t lo, hi;
	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
#else
	extern uint64_t retrace_ticks_fallback(void);
	return retrace_ticks_fallback();
#endif
}

/*
 * Record `len` bytes as one record of the current trace. `len` must be the size
 * of a real object (any size: large records are split across buffers).
 */
static inline void retrace_tracepoint(const void *data, size_t len)
{
	struct retrace_fast *f = &retrace_fast_tls;
	uint8_t *p = f->cur;
	if (__builtin_expect(len + RETRACE_FRAME_HDR + RETRACE_FRAME_TERM <=
				     (size_t)(f->end - p),
			     1)) {
		uint32_t h = ((uint32_t)len << 4) | RETRACE_FRAME_VALID;
		memcpy(p, &h, sizeof h);
		memcpy(p + RETRACE_FRAME_HDR, data, len);
		p += RETRACE_FRAME_HDR + len;
		memset(p, 0, RETRACE_FRAME_TERM);
		f->cur = p;
		return;
	}
	retrace_tracepoint_slow(data, len, 0);
}

/* As retrace_tracepoint, with the TSC tick count stored before the payload. */
static inline void retrace_tracepoint_ts(const void *data, size_t len)
{
	struct retrace_fast *f = &retrace_fast_tls;
	uint8_t *p = f->cur;
	if (__builtin_expect(len + RETRACE_FRAME_HDR + 8 + RETRACE_FRAME_TERM <=
				     (size_t)(f->end - p),
			     1)) {
		uint32_t h = ((uint32_t)len << 4) | RETRACE_FRAME_VALID |
			     RETRACE_FRAME_TS;
		uint64_t t = retrace_ticks();
		memcpy(p, &h, sizeof h);
		memcpy(p + RETRACE_FRAME_HDR, &t, sizeof t);
		memcpy(p + RETRACE_FRAME_HDR + 8, data, len);
		p += RETRACE_FRAME_HDR + 8 + len;
		memset(p, 0, RETRACE_FRAME_TERM);
		f->cur = p;
		return;
	}
	retrace_tracepoint_slow(data, len, 1);
}

/*
 * Zero-copy: reserve room for a record of at most `len` bytes, write it in place,
 * then retrace_commit(used) with used <= len. Never returns NULL for a len that fits
 * one buffer: when not tracing or with no buffer available the pointer is into the
 * thread's discard buffer. Returns NULL only if len exceeds one buffer's payload
 * room (use retrace_tracepoint for those). No other write may come in between.
 */
static inline void *retrace_reserve(size_t len)
{
	struct retrace_fast *f = &retrace_fast_tls;
	uint8_t *p = f->cur;
	if (__builtin_expect(len + RETRACE_FRAME_HDR + RETRACE_FRAME_TERM <=
				     (size_t)(f->end - p),
			     1)) {
		f->reserved = p;
		return p + RETRACE_FRAME_HDR;
	}
	return retrace_reserve_slow(len);
}

static inline void retrace_commit(size_t used)
{
	struct retrace_fast *f = &retrace_fast_tls;
	uint8_t *p = f->reserved;
	if (__builtin_expect(p != NULL && p == f->cur, 1)) {
		uint32_t h = ((uint32_t)used << 4) | RETRACE_FRAME_VALID;
		memcpy(p, &h, sizeof h);
		p += RETRACE_FRAME_HDR + used;
		memset(p, 0, RETRACE_FRAME_TERM);
		f->cur = p;
		f->reserved = NULL;
		return;
	}
	retrace_commit_slow(used);
}

/* ---------------------------------------------------- moving a trace ---- */

/* A trace context in transit between threads. Treat as opaque. */
typedef struct retrace_context {
	uint64_t opaque[14]; /* 112 bytes (96 before the ot= randomness) */
} retrace_context;

/*
 * Take the thread's trace (its id, current buffer and sequence) into `ctx`; the
 * thread is then in no trace. The thread's own spare buffers stay with it.
 */
void retrace_detach(retrace_context *ctx);

/* Continue the trace held in `ctx` on this thread (ending any current trace). */
void retrace_attach(const retrace_context *ctx);

/* ----------------------------------------------------------- triggers ---- */

/*
 * Ask the local agent to keep trace `id` (and `n_lateral` lateral traces, at most
 * RETRACE_MAX_LATERAL) and to collect it from every host it visited. The entries
 * reach the agent as one group (docs/shm-abi.md). Also marks the current trace as
 * fired so that retrace_serialize tells the next hop.
 *
 * Async-signal-safe: it uses only atomic operations on shared memory, no locks, no
 * allocation and no system call; it may be called from a SIGSEGV/SIGABRT handler.
 * If the signal interrupted this same thread inside retrace_trigger (the only way
 * it could wait on itself) the nested call returns RETRACE_E_AGAIN instead of
 * waiting, and the drop is counted. Returns RETRACE_E_FULL if the trigger queue
 * was full (counted in the pool header).
 */
int retrace_trigger(retrace_trace_id id, uint32_t trigger_id,
		    const retrace_trace_id *lateral, size_t n_lateral);

/*
 * Name a user trigger id (1 .. RETRACE_TRIGGER_USER_MAX), e.g.
 * retrace_trigger_name(7, "payment-error"), once at setup, before it fires.
 * A name is 1..RETRACE_TRIGGER_NAME_MAX bytes of letters, digits and "-_.:/".
 * When the calling thread's current trace fires a named trigger, its writer
 * stream carries one TRIGGER event {id, name} at the trace's end (retrace/abi.h:
 * retrace_trigger itself writes nothing and stays async-signal-safe); the
 * coordinator learns the name from the collected trace and keeps it in its
 * store, so `retrace traces --trigger payment-error`, `retrace show`, the JSON
 * API and the UI show and filter by it. Names are per process and global per id
 * across services: give one id one name everywhere (the newest name seen wins).
 * Returns RETRACE_OK (also when the id already has this name), RETRACE_E_INVAL
 * (bad id or name), RETRACE_E_EXISTS (the id has another name in this process)
 * or RETRACE_E_FULL (RETRACE_TRIGGER_NAMES ids are named already).
 */
#define RETRACE_TRIGGER_NAME_MAX 63
#define RETRACE_TRIGGER_NAMES 256
int retrace_trigger_name(uint32_t trigger_id, const char *name);

/* The name of a trigger id in this process: a built-in's, one given to
 * retrace_trigger_name, or NULL. Lock-free, async-signal-safe. */
const char *retrace_trigger_name_get(uint32_t trigger_id);

/* -------------------------------------------------------- propagation ---- */

/*
 * Record that the current trace came from (or went to) the host whose agent is
 * `agent` (pushes {trace id, agent} onto the breadcrumb queue). 0 is ignored.
 * The context functions below call it for you: retrace_deserialize for the
 * previous hops, retrace_deserialize_response for a callee.
 */
int retrace_breadcrumb(retrace_agent_id agent);

/* Span id sent as the parent of the next hop (default: derived per begin). */
void retrace_set_span_id(uint64_t span_id);
uint64_t retrace_span_id(void);

/* A parsed W3C Trace Context (traceparent + our tracestate member rt=). */
struct retrace_wire_context {
	retrace_trace_id trace_id;
	uint64_t parent_span_id;
	uint8_t trace_flags;          /* W3C flags; bit 0 = sampled */
	retrace_agent_id hops[2];     /* agent ids of the last two hops, newest first */
	int fired;                    /* a trigger already fired for this trace */
	int state_rejected;           /* tracestate was malformed and ignored (W3C) */
	/* OpenTelemetry consistent probability sampling, tracestate `ot=th:…;rv:…`
	 * (docs/client.md "Sampling across hosts"): the caller's rejection threshold
	 * and explicit 56-bit randomness, each valid when its has_ flag is set. */
	uint64_t ot_th, ot_rv;
	uint8_t ot_has_th, ot_has_rv;
	uint8_t ot_rejected;          /* a malformed ot member was ignored (rt= still
	                                 counts); retrace_deserialize* count it too */
	uint8_t call_dropped;         /* the caller dropped the span of this call: the
	                                 parent named is no call span, so the callee's
	                                 entry span may be dropped (docs/adaptive.md);
	                                 0 from contexts without the flag */
};

#define RETRACE_TRACEPARENT_LEN 55 /* version 00, without the NUL */
#define RETRACE_TRACESTATE_MAX 512
#define RETRACE_TRACE_FLAG_SAMPLED 0x01
#define RETRACE_TRACE_FLAG_RANDOM 0x02  /* W3C level 2: the id's low 56 bits are random */
/* Binary form version 1 (docs/client.md); version 0 (34 bytes) is still read. */
#define RETRACE_BINARY_CONTEXT_LEN 48
#define RETRACE_BINARY_CONTEXT_V0_LEN 34

/*
 * Write the current trace's `traceparent` (NUL-terminated, needs 56 bytes) and
 * `tracestate`: our member `rt=` first, then the members of `incoming_state`
 * (may be NULL) other than rt, within the W3C limits (32 members, 512 chars).
 * The rt member carries this host's agent id and the previous hop's.
 * Returns RETRACE_OK, RETRACE_E_NOTRACE, or RETRACE_E_INVAL (buffers too small).
 */
int retrace_serialize(char *traceparent, size_t tp_size, char *tracestate,
		      size_t ts_size, const char *incoming_state);

/*
 * Parse `traceparent` and `tracestate` (may be NULL) strictly per W3C Trace
 * Context level 1. On success fills `out`, deposits breadcrumbs for the hops
 * named by rt=, and, if the previous hop had fired a trigger, pushes an
 * RETRACE_TRIGGER_UPSTREAM trigger so this agent keeps its slice too. The caller
 * then calls retrace_begin(out->trace_id). Deposits require the thread to be in a
 * trace with that id or in none (the id of `out` is used).
 * Returns RETRACE_OK or RETRACE_E_INVAL (nothing deposited).
 */
int retrace_deserialize(const char *traceparent, const char *tracestate,
			struct retrace_wire_context *out);

/* Parse only (no deposit): the pure validator used by retrace_deserialize. */
int retrace_parse_context(const char *traceparent, const char *tracestate,
			  struct retrace_wire_context *out);

/* Compact binary form for non-HTTP transports (48 bytes, see docs/client.md);
 * the parsers also take the 34-byte version 0 of older peers. */
int retrace_serialize_binary(uint8_t out[RETRACE_BINARY_CONTEXT_LEN]);
int retrace_parse_binary(const uint8_t *in, size_t len,
			 struct retrace_wire_context *out);
/* Parse + deposit, as retrace_deserialize. */
int retrace_deserialize_binary(const uint8_t *in, size_t len,
			       struct retrace_wire_context *out);

/* ---------------------------------------------------------- responses ---- */

/*
 * The way back. A request carries the caller's agent id to the callee (rt= in
 * tracestate), so a trigger fired at the callee finds the caller. For a trigger
 * fired at the caller (or above it) to find the callee, the callee's agent id
 * must travel back in the response: the callee writes it with
 * retrace_serialize_response(), the caller hands it to
 * retrace_deserialize_response(), which leaves a breadcrumb to the callee's host.
 * The response also carries the callee's fired-trigger flag, so the caller
 * learns at once that the trace was triggered below it and tells its later
 * calls (as it would for a fired incoming context).
 *
 * Text form, for a response header named RETRACE_RESPONSE_HEADER:
 * "rt=HHHHHHHH.F" — the callee's agent id (8 lowercase hex digits, 00000000 when
 * it is not attached to a pool) and its fired flag (0 or 1). Binary form,
 * RETRACE_RESPONSE_BINARY_LEN bytes: version (0) | flags (bit 0 fired, others
 * 0) | agent id (4 bytes, big-endian). See docs/client.md, "Responses".
 *
 * The header is our own rather than W3C's draft `traceresponse`: that one has
 * the syntax of traceparent (trace id, span id, flags) and no room for a vendor
 * member, so reusing its name with another syntax would break the proxies and
 * tracers that parse it.
 */
#define RETRACE_RESPONSE_HEADER "x-retrace-response"
#define RETRACE_RESPONSE_TEXT_LEN 14   /* buffer size for the text form, NUL included */
#define RETRACE_RESPONSE_BINARY_LEN 6

/*
 * Callee side, while in the trace: write the text form into `out` (`size` bytes,
 * at least RETRACE_RESPONSE_TEXT_LEN), NUL-terminated. Returns the characters
 * written without the NUL (13), RETRACE_E_NOTRACE outside a trace, or
 * RETRACE_E_INVAL if `out` is NULL or too small.
 */
int retrace_serialize_response(char *out, size_t size);

/*
 * Caller side, in the trace the call belonged to: parse `value` strictly (exactly
 * the text form above) and leave a breadcrumb to the callee's agent unless it is
 * 0 or this host's own (at most one per callee agent among the last few of this
 * writer stream: repeated calls to one service push one breadcrumb); a set fired
 * flag marks the current trace as fired. Returns RETRACE_OK, RETRACE_E_INVAL for
 * a malformed (or NULL) value, nothing deposited, or RETRACE_E_NOTRACE outside a
 * trace.
 */
int retrace_deserialize_response(const char *value);

/* The binary form of the two above. serialize returns RETRACE_RESPONSE_BINARY_LEN
 * or RETRACE_E_NOTRACE; deserialize accepts exactly len ==
 * RETRACE_RESPONSE_BINARY_LEN with version 0 and no unknown flag bit. */
int retrace_serialize_response_binary(uint8_t out[RETRACE_RESPONSE_BINARY_LEN]);
int retrace_deserialize_response_binary(const uint8_t *in, size_t len);

/* ----------------------------------------------------------- carriers ---- */

/*
 * Carriers: context propagation through the service's own headers, so that it
 * need not handle traceparent, tracestate or RETRACE_RESPONSE_HEADER itself.
 * A carrier is whatever the transport keeps headers in (an HTTP request, a
 * gRPC metadata map, a message's properties); the service passes it as an
 * opaque pointer with one callback:
 *   set: store `value` under `key` (both NUL-terminated; copy them), return 0,
 *        or non-zero when it cannot (the call then returns RETRACE_E_INVAL);
 *   get: the value under `key` (case-insensitive where the transport's names
 *        are), NULL when absent; the string must live until the call returns.
 * Keys used: "traceparent", "tracestate" (requests), RETRACE_RESPONSE_HEADER
 * (responses). A server's whole job:
 *
 *   retrace_begin_from(&req, get_header, &in);      // continue, or start anew
 *   ... handle; for each outgoing call:
 *       retrace_inject(&out_req, set_header, in_tracestate);
 *       ... call ...; retrace_extract_response(&resp, get_header);
 *   retrace_inject_response(&my_resp, set_header);
 *   retrace_end();
 */
typedef int (*retrace_carrier_set)(void *carrier, const char *key, const char *value);
typedef const char *(*retrace_carrier_get)(void *carrier, const char *key);

/* A fresh random W3C trace id (never all zero, low half never zero), from a
 * per-thread buffer of kernel randomness (getrandom): no lock, safe after fork. */
retrace_trace_id retrace_new_trace_id(void);

/*
 * Server side, one call: read traceparent/tracestate from the carrier; when
 * traceparent is valid, deposit its hops (as retrace_deserialize) and begin its
 * trace; when it is absent or malformed (W3C: restart the trace), begin a new
 * one with retrace_new_trace_id(). A trace the thread was in is ended first (as
 * retrace_begin does). `out` (may be NULL) receives the parsed context, or the
 * new id with no parent. Returns 0 when it continued the caller's trace,
 * RETRACE_STARTED_NEW when it started one, RETRACE_E_INVAL for a NULL callback.
 */
#define RETRACE_STARTED_NEW 1
int retrace_begin_from(void *carrier, retrace_carrier_get get,
		       struct retrace_wire_context *out);

/*
 * Client side, in a trace: write traceparent and tracestate for an outgoing
 * request. `incoming_state` (may be NULL) is the tracestate this service
 * received, whose other vendors' members are passed on (W3C). Returns
 * RETRACE_OK, RETRACE_E_NOTRACE outside a trace, RETRACE_E_INVAL when the
 * carrier refused a key or a callback is NULL.
 */
int retrace_inject(void *carrier, retrace_carrier_set set, const char *incoming_state);

/* The way back (see "responses" above) through carriers: the callee writes
 * RETRACE_RESPONSE_HEADER into its response; the caller reads it from the
 * response it got (absent: RETRACE_OK, nothing deposited — the callee is not
 * traced). Same returns as retrace_serialize_response / _deserialize_response. */
int retrace_inject_response(void *carrier, retrace_carrier_set set);
int retrace_extract_response(void *carrier, retrace_carrier_get get);

/* --------------------------------------------------- trace percentage ---- */

/*
 * The consistent hash every host uses to decide about a trace (a 64-bit mix of
 * id.lo). A trace is recorded iff retrace_trace_hash(id) < 2^64 >> sample_shift.
 */
static inline uint64_t retrace_trace_hash(retrace_trace_id id)
{
	uint64_t z = id.lo + 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static inline int retrace_sampled(retrace_trace_id id, uint32_t shift)
{
	if (shift == 0)
		return 1;
	if (shift >= 64)
		return 0;
	return retrace_trace_hash(id) < (UINT64_MAX >> shift) + 1;
}

/*
 * OpenTelemetry's consistent keep rule on a 56-bit random value R (tracestate
 * `ot=rv:`, or the id's low 56 bits under the W3C random flag): a host at rate
 * 2^-k keeps the trace iff R >= th(k) = 2^56 - 2^(56-k), i.e. iff the top k of
 * R's 56 bits are all ones. The one definition of the rule: the client's decision
 * and estimate/ (rt_est_threshold, rt_est_keeps) both use it.
 */
#define RETRACE_RV_BITS 56u
#define RETRACE_RV_MASK ((UINT64_C(1) << RETRACE_RV_BITS) - 1u)

static inline uint64_t retrace_ot_threshold(uint32_t k)
{
	if (k > RETRACE_RV_BITS)
		k = RETRACE_RV_BITS;
	return (UINT64_C(1) << RETRACE_RV_BITS) - (UINT64_C(1) << (RETRACE_RV_BITS - k));
}

static inline int retrace_ot_keeps(uint64_t rv, uint32_t k)
{
	return (rv & RETRACE_RV_MASK) >= retrace_ot_threshold(k);
}

/* The R of an id whose decision is retrace_sampled (no `ot=rv`, no random flag):
 * the top 56 bits of the hash's complement, so that retrace_ot_keeps(R, k) ==
 * retrace_sampled(id, k) for every k <= 56. A host emits it as `ot=rv:` so that
 * OpenTelemetry samplers downstream decide on the same value. */
static inline uint64_t retrace_hash_rv(retrace_trace_id id)
{
	return ~retrace_trace_hash(id) >> (64u - RETRACE_RV_BITS);
}

/*
 * §2.9 of Ertl's paper: a rate p that is not a power of two is reached with powers
 * of two only, by taking 2^-k (k with 2^-(k+1) < p <= 2^-k) with probability
 * 2p·2^k - 1 and 2^-(k+1) otherwise; the expected rate is exactly p. Returns k and
 * sets *lower to the probability of taking k+1, scaled by 2^64 (0: p is 2^-k).
 * p >= 1 gives 0; p at or below 2^-56 gives 56 (the finest OpenTelemetry rate).
 */
static inline uint32_t retrace_rate_split(double p, uint64_t *lower)
{
	uint32_t k = 0;
	double scaled = p; /* p·2^k, in (1/2, 1] when k is found */
	*lower = 0;
	if (!(p < 1.0)) /* also NaN */
		return 0;
	if (p <= 0x1.0p-56)
		return RETRACE_RV_BITS;
	while (scaled <= 0.5) {
		scaled *= 2.0;
		k++;
	}
	if (scaled < 1.0) /* P(k+1) = 1 - (2 scaled - 1) = 2 - 2 scaled, in (0, 1) */
		*lower = (uint64_t)((2.0 - 2.0 * scaled) * 0x1.0p64);
	return k;
}

/* ------------------------------------------------------------ counters ---- */

struct retrace_thread_stats {
	uint64_t buffers_used;      /* real buffers filled by this thread: segments since
	                               ABI 5 (a trace's run in one buffer) */
	uint64_t discard_buffers;   /* times this thread fell back to the discard buffer */
	uint64_t discarded_bytes;   /* bytes written into the discard buffer */
	uint64_t records;           /* records written through the slow path split */
	uint64_t triggers_dropped;  /* trigger queue full or re-entered */
	uint64_t breadcrumbs_dropped;
	uint64_t unsampled_traces;  /* begins not recorded (trace percentage) */
	uint64_t ot_rejected;       /* malformed tracestate `ot=` members ignored */
};

void retrace_thread_stats(struct retrace_thread_stats *out);

/* This thread's incoming contexts refused as malformed by retrace_deserialize*:
 * tracestates discarded (a bad rt= value, its flag digit included) and binary
 * contexts refused (bad version, length or flag bits). A function, not a field
 * of retrace_thread_stats, so that struct keeps its size for programs built
 * against this SOVERSION. */
uint64_t retrace_thread_contexts_rejected(void);

#ifdef __cplusplus
}
#endif

#endif
