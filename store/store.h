/*
 * store/store.h — the durable store of collected traces, behind one interface
 * with two backends: SQLite (one embedded file in WAL mode, the default) and
 * ClickHouse (a server over its HTTP interface, for more than one machine).
 *
 * Owns: the schema (traces, slices, agents, pending triggers) and every
 * statement the coordinator and the `retrace` CLI run. Nothing outside store/
 * knows which backend is in use: rt_store_open picks it from the locator in
 * options.path — "clickhouse://HOST:PORT/DB", "sqlite:PATH" or a bare PATH
 * (SQLite). docs/store.md compares the two.
 *
 * Promises (both backends unless said):
 *   - A slice written by rt_store_put_slice inside rt_store_begin/rt_store_commit
 *     is durable once rt_store_commit returns 0. SQLite: WAL; a kill -9 of the
 *     process loses nothing committed; with sync_full also a power cut.
 *     ClickHouse: the commit is one bulk INSERT per table, acknowledged by the
 *     server once the part is written. The collector acknowledges slices only
 *     after that commit.
 *   - Slices are idempotent by (agent_id, trace_lo, slice_seq): a re-sent slice is
 *     RT_STORE_DUPLICATE and stored once (ClickHouse: reported as a duplicate
 *     when this handle stored it; one re-sent to a new handle is collapsed by
 *     the table engine, so every reader still sees it once).
 *   - Slices keep the raw encoded SLICE message as received (the wire format is the
 *     archive format), so later decoders read exactly what the agent sent.
 *   - Every function returns 0 or a negative RT_STORE_E_* code, never aborts; the
 *     error text of the last failure is rt_store_errmsg().
 *   - Single writer (the coordinator); any number of read-only openers (the CLI)
 *     alongside it. A handle is not thread-safe: one thread at a time uses it.
 */
#ifndef RETRACE_STORE_STORE_H
#define RETRACE_STORE_STORE_H

#include <stddef.h>
#include <stdint.h>

#define RT_STORE_MAX_TRIGGERS 8  /* trigger ids kept per trace */
#define RT_STORE_MAX_AGENTS 64   /* agents recorded per trace (delivered / missing) */
#define RT_STORE_DEFAULT_PATH "retrace.db"
#define RT_STORE_GROUP_MAX 160   /* bytes of a selection group name, NUL included */

enum rt_store_error {
	RT_STORE_OK = 0,
	RT_STORE_DUPLICATE = 1,      /* put_slice: already stored (not an error) */
	RT_STORE_E_OPEN = -201,      /* cannot open/create the file, or not a retrace store */
	RT_STORE_E_SCHEMA = -202,    /* the file has a newer/unknown schema version */
	RT_STORE_E_IO = -203,        /* SQLite failed (disk full, I/O error, corrupt) */
	RT_STORE_E_BUSY = -204,      /* locked by another writer past the busy timeout */
	RT_STORE_E_NOTFOUND = -205,  /* no such trace */
	RT_STORE_E_READONLY = -206,  /* a write on a read-only handle */
	RT_STORE_E_INVAL = -207,     /* bad argument */
};

struct rt_store_options {
	const char *path;       /* the locator; NULL: RT_STORE_DEFAULT_PATH (SQLite) */
	int readonly;           /* the CLI: never creates, never writes */
	int sync_full;          /* PRAGMA synchronous=FULL (power-safe) instead of NORMAL */
	uint64_t max_age_ns;    /* retention by age (0 = keep forever) */
	uint64_t max_bytes;     /* retention by size of the slices' data (0 = no limit) */
	int group_readable;     /* a new file is 0640 with group `gid` (else 0600) */
	long gid;
	/* WAL checkpoints (the only fsyncs with synchronous=NORMAL) run on a thread
	 * of the store's own, not inside the writer's commits (the coordinator). */
	int background_checkpoint;
};

struct rt_store;

/* On failure *out is NULL and rt_store_errmsg(NULL) gives the reason (per thread). */
int rt_store_open(struct rt_store **out, const struct rt_store_options *o);
void rt_store_close(struct rt_store *s);
const char *rt_store_errmsg(const struct rt_store *s); /* last failure, "" if none */
const char *rt_store_strerror(int err);
const char *rt_store_path(const struct rt_store *s); /* the file, or the clickhouse:// URL */
const char *rt_store_backend_name(const struct rt_store *s); /* "sqlite", "clickhouse" */

/* One write transaction (nestable calls are an error). */
int rt_store_begin(struct rt_store *s);
int rt_store_commit(struct rt_store *s);
void rt_store_rollback(struct rt_store *s);

/* ------------------------------------------------------------ slices ---- */

struct rt_store_slice {
	uint64_t trace_hi, trace_lo;
	uint32_t agent_id;
	uint32_t trigger_id;
	uint64_t slice_seq;
	uint64_t received_ns;   /* Unix ns at the collector */
	uint32_t buffers;       /* buffers in the message */
	uint64_t bytes;         /* payload bytes (sum of the buffers' data) */
	uint64_t first_ns;      /* earliest buffer first_tick in Unix ns (0: unknown) */
	uint64_t last_ns;       /* latest buffer first_tick in Unix ns */
	int late;               /* arrived after its trace was closed */
	uint32_t rate_exp;      /* the slice was kept with probability 2^-rate_exp (wire
				   rate_exp; 0 in a store from before schema version 2) */
	const void *msg;        /* the encoded RT_WIRE_SLICE message as received */
	size_t msg_len;
};

/* 0 (stored), RT_STORE_DUPLICATE, or an error. Needs an open transaction. */
int rt_store_put_slice(struct rt_store *s, const struct rt_store_slice *sl);

/*
 * Call fn for each stored slice of the trace (matched on trace_lo, and on
 * trace_hi too when it is not 0), in (agent_id, slice_seq) order. `msg` points
 * into SQLite memory valid only during the call. A non-zero return from fn
 * stops the walk and is returned.
 */
typedef int (*rt_store_slice_fn)(void *arg, const struct rt_store_slice *sl);
int rt_store_slices(struct rt_store *s, uint64_t trace_hi, uint64_t trace_lo,
		    rt_store_slice_fn fn, void *arg);

/*
 * The effective rate exponent of each agent's part of a trace: per agent that
 * has stored slices of it, the largest rate_exp among them (a part cut into
 * several slices under a rising overload level was kept at the lowest of their
 * rates). Up to `max` entries in agent order into out[], *n = how many; the
 * agents past `max` are left out. What `retrace estimate` weighs spans with.
 */
struct rt_store_rate {
	uint32_t agent_id;
	uint32_t rate_exp;
};
int rt_store_trace_rates(struct rt_store *s, uint64_t trace_hi, uint64_t trace_lo,
			 struct rt_store_rate *out, uint32_t max, uint32_t *n);

/* ------------------------------------------------------------ traces ---- */

struct rt_store_trace {
	uint64_t trace_hi, trace_lo;
	uint64_t group_id;       /* lateral group: traces triggered together share it */
	uint32_t trigger_count;
	uint32_t trigger_ids[RT_STORE_MAX_TRIGGERS];
	uint32_t agent_count;    /* agents that delivered data */
	uint32_t agents[RT_STORE_MAX_AGENTS];
	uint32_t missing_count;  /* agents reached by the traversal whose data is missing */
	uint32_t missing[RT_STORE_MAX_AGENTS];
	int coherent;            /* every agent reached delivered its slice */
	uint64_t first_ns, last_ns;  /* time range of the data (Unix ns) */
	uint64_t bytes;          /* payload bytes over all its slices */
	uint32_t slices;
	uint32_t late_slices;    /* slices that arrived after it closed */
	uint64_t triggered_ns;   /* first trigger received (Unix ns) */
	uint64_t closed_ns;
	uint64_t traversal_ns;   /* trigger received -> no agent left to contact */
	/* Selection (coordinator/selection.c), set by rt_store_set_selection once the
	 * trace was kept by its window; has_selection 0: not selected (yet), or it
	 * bypassed selection (incoherent, no spans). put_trace does not write these. */
	int has_selection;
	double score;            /* anomaly score */
	uint64_t pattern;        /* event-pair pattern id */
	uint64_t group_key;      /* hash of the entry API */
	char group[RT_STORE_GROUP_MAX]; /* the entry API, "service operation" */
	double weight;           /* inclusion weight: collected traces it stands for */
};

/* Insert or replace the row of this trace (key: trace_hi, trace_lo). */
int rt_store_put_trace(struct rt_store *s, const struct rt_store_trace *t);

/* A late slice for a closed trace: add to its bytes/slices/late_slices and widen
 * its time range; RT_STORE_E_NOTFOUND if the trace has no row. */
int rt_store_add_late(struct rt_store *s, const struct rt_store_slice *sl);

/* Record selection's verdict on a kept trace (the has_selection fields of t; t's
 * other fields are ignored). RT_STORE_E_NOTFOUND if the trace has no row. */
int rt_store_set_selection(struct rt_store *s, const struct rt_store_trace *t);

/* Delete a trace: its row and all its slices (selection dropped it).
 * RT_STORE_E_NOTFOUND if it had no row (its slices, if any, are deleted anyway). */
int rt_store_delete_trace(struct rt_store *s, uint64_t trace_hi, uint64_t trace_lo);

/*
 * The text form of a trace id that rt_store_get_trace looks up, the one home of
 * its grammar (CLI arguments, the web API's /api/traces/ID, `recollect`): 32 hex
 * digits (the W3C trace id), or 1 to 16 (its low 64 bits; *hi = 0, which the
 * store matches on trace_lo alone). The low 64 bits must not be 0 (the runtime
 * indexes by them). s need not be terminated: n characters are read. 0, or -1.
 */
int rt_store_parse_trace_id(const char *s, size_t n, uint64_t *hi, uint64_t *lo);

/* One trace by id (trace_hi 0 = match on trace_lo alone). */
int rt_store_get_trace(struct rt_store *s, uint64_t trace_hi, uint64_t trace_lo,
		       struct rt_store_trace *out);

struct rt_store_query {
	int by_trigger;          /* only traces carrying trigger_id */
	uint32_t trigger_id;
	uint64_t since_ns;       /* closed_ns >= since_ns (0: all) */
	int incoherent_only;
	uint32_t limit;          /* 0: no limit */
};

/* Traces matching q, newest closed first. fn's non-zero return stops the walk. */
typedef int (*rt_store_trace_fn)(void *arg, const struct rt_store_trace *t);
int rt_store_list(struct rt_store *s, const struct rt_store_query *q,
		  rt_store_trace_fn fn, void *arg);

/* ------------------------------------------------- agent directory ---- */

struct rt_store_agent {
	uint32_t agent_id;
	uint32_t pid;
	char host[256];
	char control_addr[256];
	uint64_t start_ns;       /* the agent's start (Unix ns) */
	uint64_t last_seen_ns;   /* last registration (Unix ns) */
};

int rt_store_put_agent(struct rt_store *s, const struct rt_store_agent *a); /* upsert */
int rt_store_delete_agent(struct rt_store *s, uint32_t agent_id);
typedef int (*rt_store_agent_fn)(void *arg, const struct rt_store_agent *a);
int rt_store_agents(struct rt_store *s, rt_store_agent_fn fn, void *arg);

/* ------------------------------------------------------------- spans ---- */

/*
 * The decoded spans of a closed trace, for a backend that keeps spans as rows
 * SQL users query directly (ClickHouse: the otel_traces table, laid out like
 * the OpenTelemetry Collector's ClickHouse exporter's). SQLite keeps only the
 * slices and decodes them on read: rt_store_wants_spans is 0 and put_spans
 * accepts and ignores them. Strings are borrowed for the call; attribute
 * values are text (numbers and booleans as printed by the caller). A trace's
 * spans go with it when it is deleted.
 */
struct rt_store_kv {
	const char *key, *value;
};
struct rt_store_span {
	uint64_t trace_hi, trace_lo, span_id, parent_id; /* parent 0: a root */
	uint64_t start_ns, end_ns;                       /* Unix ns */
	const char *name, *service, *status_message;
	uint8_t kind;    /* enum retrace_span_kind: 0 unspecified, 1 internal, 2 server,
			    3 client, 4 producer, 5 consumer */
	uint8_t status;  /* enum retrace_span_status: 0 unset, 1 ok, 2 error */
	const struct rt_store_kv *attrs;
	uint32_t n_attrs;
	const struct rt_store_kv *resource;
	uint32_t n_resource;
	const uint64_t *event_ns;       /* the span's logs, as events: time, body */
	const char *const *event_body;
	uint32_t n_events;
};
int rt_store_wants_spans(const struct rt_store *s);
int rt_store_put_spans(struct rt_store *s, const struct rt_store_span *spans, uint32_t n);

/* ----------------------------------------------------- trigger names ---- */

/*
 * Names of user trigger ids (retrace_trigger_name in a client, learned by the
 * coordinator from the TRIGGER events of collected traces): one row per id, the
 * newest name wins. Reserved ids are named by retrace_builtin_trigger_name and
 * are not stored. A read-only handle on a store from before trigger names
 * lists none.
 */
#define RT_STORE_TRIGGER_NAME_MAX 64 /* bytes of a name, NUL included */
int rt_store_put_trigger_name(struct rt_store *s, uint32_t trigger_id, const char *name,
			      uint64_t seen_ns);
typedef int (*rt_store_trigger_name_fn)(void *arg, uint32_t trigger_id, const char *name);
int rt_store_trigger_names(struct rt_store *s, rt_store_trigger_name_fn fn, void *arg);

/* -------------------------------------------------- pending triggers ---- */

/*
 * A trigger is stored (as its encoded RT_WIRE_TRIGGER message) before the
 * coordinator acknowledges it, and marked done when its trace group closes; a
 * restarted coordinator resumes the traversal of every trigger not done.
 * put_trigger of an (agent_id, trigger_seq) already stored is RT_STORE_DUPLICATE.
 */
int rt_store_put_trigger(struct rt_store *s, uint32_t agent_id, uint64_t trigger_seq,
			 uint64_t received_ns, const void *msg, size_t len);
int rt_store_done_trigger(struct rt_store *s, uint32_t agent_id, uint64_t trigger_seq);
typedef int (*rt_store_trigger_fn)(void *arg, uint32_t agent_id, uint64_t trigger_seq,
				   uint64_t received_ns, const void *msg, size_t len);
int rt_store_pending_triggers(struct rt_store *s, rt_store_trigger_fn fn, void *arg);

/* ------------------------------------------------ retention, stats ---- */

/*
 * Apply retention: delete traces (and their slices) closed before now - max_age,
 * then the oldest closed traces until the slices' data is under max_bytes; also
 * done triggers older than max_age (or 1 h if no max_age) and slices with no
 * trace row older than max_age. *deleted (may be NULL) gets the traces removed.
 */
int rt_store_retain(struct rt_store *s, uint64_t now_ns, uint64_t *deleted);

struct rt_store_stats {
	uint64_t traces, coherent, incoherent;
	uint64_t slices, slice_bytes;   /* rows and payload bytes stored */
	uint64_t pending_triggers;
	uint64_t agents;
	uint64_t file_bytes;            /* database + WAL on disk (ClickHouse: active parts) */
	uint64_t checkpoints;           /* background checkpoints run (0 without the option) */
	uint64_t checkpoint_errors;
	uint64_t checkpoint_max_ns;     /* the longest one */
};
int rt_store_stats(struct rt_store *s, struct rt_store_stats *out);

#endif
