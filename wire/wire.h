/*
 * wire/wire.h — the messages between the daemons (agent <-> coordinator <->
 * collector), encoded with msgpack.
 *
 * Owns: the message catalogue (one plain struct per message), the encoders
 * (msgpack-c's packer into a growable buffer) and one strict decoder for every
 * message. Nothing here touches a socket, shared memory or a clock.
 *
 * Promises:
 *   - Every message is one msgpack array [version = 1, type, fields...] with a
 *     fixed element count per type (SLICE: 11, or 12 with its optional last
 *     element rate_exp); docs/wire.md is the catalogue.
 *   - Every input to rt_wire_decode is untrusted: a truncated, oversized,
 *     wrong-typed, short, long or trailing-byte message gets its own negative
 *     RT_WIRE_E_* code; the decoder never reads outside [data, data + len),
 *     never crashes, and allocates at most in proportion to len.
 *   - Encoders refuse what the decoder would refuse (a field over its limit,
 *     a message over RT_WIRE_MAX_MESSAGE) and then leave the output unchanged.
 *   - A message the decoder accepts re-encodes to bytes that decode to the
 *     same struct.
 */
#ifndef RETRACE_WIRE_H
#define RETRACE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define RT_WIRE_VERSION 1u

/* Limits (inclusive). Decoders and encoders enforce the same ones. */
#define RT_WIRE_MAX_MESSAGE (64u * 1024u * 1024u) /* whole encoded message */
#define RT_WIRE_MAX_STR 255u              /* host, control_addr (bytes, no NUL) */
#define RT_WIRE_MAX_TRACES 64u            /* a trigger group / a request */
#define RT_WIRE_MAX_BREADCRUMBS 256u      /* agent ids per trace */
#define RT_WIRE_MAX_SLICE_BUFFERS 65536u  /* buffers in one slice message */
#define RT_WIRE_MAX_BIN RT_WIRE_MAX_MESSAGE /* one buffer's data */
#define RT_WIRE_MAX_ACK_SEQS 4096u        /* sequence numbers in one ack */
#define RT_WIRE_MAX_RATE_EXP 63u          /* a slice's rate exponent (rate 2^-63) */
#define RT_WIRE_MAX_WINDOW 4096u          /* candidates in one WINDOW_REPLY */
#define RT_WIRE_MAX_HOLD_MS 600000u       /* how long a WINDOW_QUERY may pin its answer */
#define RT_WIRE_MAX_POLICY_SITES 65536u   /* entries in one POLICY */

/* Message types (the second element of every message). */
enum rt_wire_type {
	RT_WIRE_REGISTER = 1,         /* agent -> coordinator */
	RT_WIRE_TRIGGER = 2,          /* agent -> coordinator */
	RT_WIRE_REMOTE_TRIGGER = 3,   /* coordinator -> agent */
	RT_WIRE_BREADCRUMB_REPLY = 4, /* agent -> coordinator */
	RT_WIRE_SLICE = 5,            /* agent -> collector */
	RT_WIRE_ACK = 6,              /* any reply */
	/* Weaving (weave/, docs/weaving.md): candidates for a hop without context. */
	RT_WIRE_WINDOW_QUERY = 7,     /* coordinator -> agent */
	RT_WIRE_WINDOW_REPLY = 8,     /* agent -> coordinator */
	RT_WIRE_WINDOW_RELEASE = 9,   /* coordinator -> agent (answered by an ACK) */
	RT_WIRE_POLICY = 10,          /* coordinator -> agent: span-site policy table */
	RT_WIRE_TYPE_MAX = 10,
};

/* Elements of each message's top-level array, version and type included. */
#define RT_WIRE_ELEMS_REGISTER 12u
#define RT_WIRE_ELEMS_TRIGGER 7u
#define RT_WIRE_ELEMS_REMOTE_TRIGGER 5u     /* without member */
#define RT_WIRE_ELEMS_REMOTE_TRIGGER_MAX 6u /* with the optional member */
#define RT_WIRE_ELEMS_BREADCRUMB_REPLY 5u
#define RT_WIRE_ELEMS_SLICE 11u     /* without rate_exp (rate 1) */
#define RT_WIRE_ELEMS_SLICE_MAX 12u /* with the optional rate_exp */
#define RT_WIRE_ELEMS_ACK 4u
#define RT_WIRE_ELEMS_WINDOW_QUERY 10u
#define RT_WIRE_ELEMS_WINDOW_REPLY 6u
#define RT_WIRE_ELEMS_WINDOW_RELEASE 3u
#define RT_WIRE_ELEMS_POLICY 4u

/*
 * Error codes: negative, 0 = ok. They sit at -101.. so that they never collide
 * with RETRACE_E_* (-1..) when either travels in an ack's status.
 */
enum rt_wire_error {
	RT_WIRE_OK = 0,
	RT_WIRE_E_TRUNCATED = -101,    /* the input ends inside the message */
	RT_WIRE_E_TRAILING = -102,     /* bytes after the top-level array */
	RT_WIRE_E_VERSION = -103,      /* version element is not 1 */
	RT_WIRE_E_UNKNOWN_TYPE = -104, /* type element names no message */
	RT_WIRE_E_EXTRA = -105,        /* an array (message or tuple) has too many elements */
	RT_WIRE_E_MISSING = -106,      /* an array (message or tuple) has too few elements */
	RT_WIRE_E_TYPE = -107,         /* wrong msgpack type, negative, or too wide for the field */
	RT_WIRE_E_TOO_BIG = -108,      /* list, string, bin or whole message over its limit */
	RT_WIRE_E_VALUE = -109,        /* right type, outside the field's domain (NUL in a
					  string, a list under its minimum) */
	RT_WIRE_E_NOMEM = -110,        /* allocation failed */
	RT_WIRE_E_INVAL = -111,        /* bad argument (NULL pointer with a non-zero count) */
};

/* "trace_hi, trace_lo, ..." — one trace of a trigger, request or reply. */
struct rt_wire_trace {
	uint64_t trace_hi;
	uint64_t trace_lo;
	uint64_t bytes;              /* BREADCRUMB_REPLY only: bytes held */
	uint32_t buffers;            /* BREADCRUMB_REPLY only: buffers held, 0 = no data */
	uint32_t open;               /* BREADCRUMB_REPLY only: buffers of the trace a writer
	                                still holds (being written, or sealed and not yet
	                                handed in): this agent's part is not final yet */
	uint32_t breadcrumb_count;   /* TRIGGER, BREADCRUMB_REPLY: <= RT_WIRE_MAX_BREADCRUMBS */
	const uint32_t *breadcrumbs; /* agent ids; ignored (and decoded NULL) in REMOTE_TRIGGER */
};

struct rt_wire_register {
	uint32_t agent_id;
	uint32_t pid;
	uint64_t start_unix_ns;
	char host[RT_WIRE_MAX_STR + 1];         /* NUL-terminated, no inner NUL */
	char control_addr[RT_WIRE_MAX_STR + 1]; /* nng URL of the agent's control socket */
	uint32_t buffer_size;
	uint32_t buffer_count;
	uint64_t tsc_hz;
	uint64_t tsc_ref_tick;
	uint64_t tsc_ref_unix_ns;
};

struct rt_wire_trigger {
	uint32_t agent_id;
	uint32_t trigger_id;
	uint64_t trigger_seq; /* agent-local, for dedup on re-send */
	uint64_t fired_unix_ns;
	uint32_t trace_count; /* 1..RT_WIRE_MAX_TRACES; traces[0] is the triggered one */
	const struct rt_wire_trace *traces;
};

struct rt_wire_remote_trigger {
	uint64_t request_id;
	uint32_t trigger_id;
	uint32_t trace_count; /* 1..RT_WIRE_MAX_TRACES; only trace_hi/lo travel */
	const struct rt_wire_trace *traces;
	/* The asking coordinator's member id in a sharded group (--member-id,
	 * daemon/ring.h): the agent keeps these traces' messages with it. Optional
	 * 6th element, written only when non-empty; absent decodes as "". */
	char member[RT_WIRE_MAX_STR + 1];
};

struct rt_wire_breadcrumb_reply {
	uint64_t request_id;
	uint32_t agent_id;
	uint32_t trace_count; /* 0..RT_WIRE_MAX_TRACES */
	const struct rt_wire_trace *traces;
};

struct rt_wire_slice_buffer {
	uint32_t pid;
	uint32_t tid;
	uint32_t seq;
	uint32_t flags;
	uint64_t first_tick;
	const void *data; /* decoded: points INTO the input (valid while it is) */
	uint32_t len;     /* <= RT_WIRE_MAX_BIN */
};

struct rt_wire_slice {
	uint32_t agent_id;
	uint32_t trigger_id;
	uint64_t slice_seq; /* agent-unique, acked by the collector */
	uint64_t trace_hi;
	uint64_t trace_lo;
	uint64_t tsc_hz;
	uint64_t tsc_ref_tick;
	uint64_t tsc_ref_unix_ns;
	uint32_t buffer_count; /* 0..RT_WIRE_MAX_SLICE_BUFFERS */
	const struct rt_wire_slice_buffer *buffers;
	/* The slice was kept with probability 2^-rate_exp (0..RT_WIRE_MAX_RATE_EXP):
	 * the effective exponent of the host's consistent sampling steps (the
	 * client's trace percentage, the agent's overload level), what an unbiased
	 * estimate needs (estimate/). Optional 12th element: the encoder writes it
	 * only when non-zero, and a message without it decodes as 0 (rate 1). */
	uint32_t rate_exp;
};

/*
 * seqs name what the ACK acknowledges (slice_seq, trigger_seq). The ACK of a
 * REGISTER (status 0) from a member of a sharded coordinator group instead
 * names the group's live set as that member sees it: the ring seed
 * (daemon/ring.h, the hash of the member id) of each live member, itself
 * included, in any order. Agents route by it (agent/route.c); an ACK of
 * REGISTER with no seqs (a coordinator alone, or an older one) says nothing
 * about the group.
 */
struct rt_wire_ack {
	int32_t status;     /* 0 = ok; else an RT_WIRE_E_* or RETRACE_E_* code (msgpack int) */
	uint32_t seq_count; /* 0..RT_WIRE_MAX_ACK_SEQS */
	const uint64_t *seqs;
};

/*
 * WINDOW_QUERY, kind RT_WIRE_WINDOW_ROOTS: "the root SERVER spans of `service`
 * that started in [t0, t1]" (Unix ns, t0 <= t1); kind RT_WIRE_WINDOW_CLIENTS:
 * "the CLIENT spans written by `service` with peer.service = `peer` that
 * started in [t0, t1]" (the other calls on the same edge, which the joint
 * assignment needs). At most `max` (1..RT_WIRE_MAX_WINDOW), earliest first.
 * `peer` is empty for ROOTS and not empty for CLIENTS. For ROOTS the agent pins
 * the traces it answers with for `hold_ms`
 * (0..RT_WIRE_MAX_HOLD_MS; 0 = not at all) so they are not evicted while the
 * coordinator decides; a WINDOW_RELEASE with the same request_id, or the
 * timeout, lets them go (a trace the coordinator collects is pinned anew by its
 * REMOTE_TRIGGER).
 */
enum rt_wire_window_kind {
	RT_WIRE_WINDOW_ROOTS = 0,   /* root SERVER spans of `service` */
	RT_WIRE_WINDOW_CLIENTS = 1, /* CLIENT spans of `service` calling `peer` */
};

/* The query's value domain, one rule for the encoder and the decoder: 1 if in it
 * (service not empty, t0 <= t1, 1 <= max <= RT_WIRE_MAX_WINDOW, hold_ms <=
 * RT_WIRE_MAX_HOLD_MS, a known kind, and a peer exactly for CLIENTS). */
struct rt_wire_window_query;
int rt_wire_window_query_in_domain(const struct rt_wire_window_query *q);

struct rt_wire_window_query {
	uint64_t request_id;
	uint32_t kind;                     /* enum rt_wire_window_kind */
	char service[RT_WIRE_MAX_STR + 1]; /* NUL-terminated, not empty */
	char peer[RT_WIRE_MAX_STR + 1];    /* CLIENTS: the callee; ROOTS: "" */
	uint64_t t0_unix_ns;
	uint64_t t1_unix_ns;
	uint32_t max;
	uint32_t hold_ms;
};

/* One answer: a span (a root SERVER span, or a CLIENT span) that started in the
 * window. end_unix_ns is 0 when the span has not ended (yet, or in the data).
 * conn is the connection the call went over, rt_wire_conn_id of the span's
 * net.sock.* attributes, 0 when it names none. */
struct rt_wire_window_candidate {
	uint64_t trace_hi;
	uint64_t trace_lo;
	uint64_t span_id;
	uint64_t start_unix_ns;
	uint64_t end_unix_ns;
	uint64_t conn;
};

/* The identity of the connection a call went over, as both of its spans can
 * name it without any context: a CLIENT span's net.sock.host.addr/port are its
 * end of the connection and net.sock.peer.addr/port the callee's; a SERVER
 * span's are the other way round. The id hashes (caller's end, callee's end), so
 * both spans of one call give the same nonzero id (0: a port is missing, 0 or
 * over 65535). One definition for the agent's window answers and the
 * coordinator's own hops (docs/weaving.md, "Connection ids"). */
uint64_t rt_wire_conn_id(int is_client, const char *host_addr, uint64_t host_port,
			 const char *peer_addr, uint64_t peer_port);

struct rt_wire_window_reply {
	uint64_t request_id;
	uint32_t agent_id;
	uint32_t candidate_count; /* 0..RT_WIRE_MAX_WINDOW */
	const struct rt_wire_window_candidate *candidates;
	uint32_t truncated;       /* further matches left out (over `max`) */
};

struct rt_wire_window_release {
	uint64_t request_id;
};

/*
 * POLICY (coordinator -> agent): the adaptive span policy the agent writes
 * into its pool's table (docs/adaptive.md), whole: a site not listed is
 * recorded always. generation: the coordinator's learner cycle, so an agent
 * can ignore an older policy that arrives late. Entries: [site, p16] with
 * site = rt_adapt_site_hash (never 0) and p16 = probability x 65535.
 */
struct rt_wire_policy_entry {
	uint64_t site;
	uint16_t p16;
};

struct rt_wire_policy {
	uint64_t generation;
	uint32_t entry_count; /* 0..RT_WIRE_MAX_POLICY_SITES */
	const struct rt_wire_policy_entry *entries;
};

/* One decoded (or to-be-encoded) message: `type` says which member is live. */
struct rt_wire_msg {
	int type; /* enum rt_wire_type; 0 after a failed decode */
	union {
		struct rt_wire_register reg;
		struct rt_wire_trigger trigger;
		struct rt_wire_remote_trigger remote;
		struct rt_wire_breadcrumb_reply reply;
		struct rt_wire_slice slice;
		struct rt_wire_ack ack;
		struct rt_wire_window_query wquery;
		struct rt_wire_window_reply wreply;
		struct rt_wire_window_release wrelease;
		struct rt_wire_policy policy;
	};
	void *mem; /* decoder-owned arrays (traces, breadcrumbs, buffers, seqs) */
};

/* A growable output buffer. Zero-initialise ({0}) or rt_wire_buf_init. */
struct rt_wire_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

void rt_wire_buf_init(struct rt_wire_buf *b);
/* Make room for `extra` more bytes after len. 0 or RT_WIRE_E_NOMEM. */
int rt_wire_buf_reserve(struct rt_wire_buf *b, size_t extra);
void rt_wire_buf_free(struct rt_wire_buf *b);

/*
 * Encoders APPEND one message to `out` (set out->len = 0 first to reuse it).
 * Each checks every limit first, computes the exact size, reserves once and
 * then packs; slice data is written with one memcpy per buffer. Returns 0 or
 * RT_WIRE_E_TOO_BIG / _VALUE / _INVAL / _NOMEM, with `out` unchanged on error.
 */
int rt_wire_encode_register(struct rt_wire_buf *out, const struct rt_wire_register *m);
int rt_wire_encode_trigger(struct rt_wire_buf *out, const struct rt_wire_trigger *m);
int rt_wire_encode_remote_trigger(struct rt_wire_buf *out,
				  const struct rt_wire_remote_trigger *m);
int rt_wire_encode_breadcrumb_reply(struct rt_wire_buf *out,
				    const struct rt_wire_breadcrumb_reply *m);
int rt_wire_encode_slice(struct rt_wire_buf *out, const struct rt_wire_slice *m);
int rt_wire_encode_ack(struct rt_wire_buf *out, const struct rt_wire_ack *m);
int rt_wire_encode_window_query(struct rt_wire_buf *out, const struct rt_wire_window_query *m);
int rt_wire_encode_window_reply(struct rt_wire_buf *out, const struct rt_wire_window_reply *m);
int rt_wire_encode_window_release(struct rt_wire_buf *out,
				  const struct rt_wire_window_release *m);
int rt_wire_encode_policy(struct rt_wire_buf *out, const struct rt_wire_policy *m);
/* Dispatch on m->type (RT_WIRE_E_UNKNOWN_TYPE for another type). */
int rt_wire_encode(struct rt_wire_buf *out, const struct rt_wire_msg *m);

/*
 * Exact encoded size of a message, after the same checks as the encoder
 * (so a slice that would exceed RT_WIRE_MAX_MESSAGE gives RT_WIRE_E_TOO_BIG):
 * lets the agent cut slices to fit before it copies anything.
 */
int rt_wire_encoded_size(const struct rt_wire_msg *m, size_t *size);
int rt_wire_slice_size(const struct rt_wire_slice *m, size_t *size);

/*
 * Whether a request is in this wire format at all (its first byte opens a
 * msgpack array of up to 15 elements, as every message does) rather than one
 * of a daemon's text commands ("status", "ping"...). Only the first byte is
 * read; a true answer still needs rt_wire_decode.
 */
static inline int rt_wire_looks_like_message(const void *data, size_t len)
{
	return len > 0 && (((const uint8_t *)data)[0] & 0xf0) == 0x90;
}

/*
 * Decode exactly one message occupying all of [data, data + len). On success
 * returns 0 with *out filled; call rt_wire_msg_free(out) when done. Slice
 * buffer data points into `data`: keep the input alive while you use them.
 * On error returns an RT_WIRE_E_* code and leaves *out zeroed (freeing it is
 * harmless). *out is only written, never read.
 */
int rt_wire_decode(const void *data, size_t len, struct rt_wire_msg *out);
void rt_wire_msg_free(struct rt_wire_msg *m);

/*
 * The type of a message (> 0) after checking only the envelope (array header,
 * version, type, element count); or an RT_WIRE_E_* code.
 */
int rt_wire_peek_type(const void *data, size_t len);

/*
 * Unix ns of a buffer's first_tick, with the slice's own TSC calibration; 0 when
 * the slice carries no calibration, the tick is 0, or it falls before the epoch.
 */
uint64_t rt_wire_slice_tick_ns(const struct rt_wire_slice *s, uint64_t tick);

/* Static strings for logs. */
const char *rt_wire_strerror(int err);
const char *rt_wire_type_name(int type);

#endif
