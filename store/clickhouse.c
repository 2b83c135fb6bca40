/*
 * store/clickhouse.c — the ClickHouse backend of the store (store.h), for
 * Debian's clickhouse-server 18.16 over its HTTP interface.
 *
 * Locator: "HOST:PORT/DB" (from "clickhouse://HOST:PORT/DB"; PORT defaults to
 * 8123, DB to "retrace"). A writable open creates the database and the tables
 * if missing and stamps meta.schema_version; a read-only open only checks
 * that a retrace schema is there.
 *
 * Tables (docs/store.md has them in full). ClickHouse 18.16 has no UPDATE or
 * DELETE statement a writer can wait for (ALTER .. DELETE is an asynchronous
 * mutation) and no TTL clause, so every table is insert-only:
 * ReplacingMergeTree(version) keyed like SQLite's primary/unique keys, with a
 * `deleted` flag. Changing a row (add_late, set_selection, done_trigger) is
 * writing the whole row again with a higher version; deleting it is writing a
 * tombstone (deleted = 1). Readers use FINAL, which collapses each key to its
 * newest version, and skip tombstones. A repeated insert (a re-sent slice, or
 * an INSERT sent again after a lost reply) collapses the same way.
 *   traces    ORDER BY (trace_lo, trace_hi), PARTITION BY the day it closed
 *   slices    ORDER BY (trace_lo, agent_id, slice_seq), PARTITION BY the day
 *             it was received; msg is the raw SLICE message (String)
 *   agents    ORDER BY agent_id
 *   triggers  ORDER BY (agent_id, trigger_seq); version = state (1 stored,
 *             2 done, 3 removed by retention), so a re-sent trigger never
 *             brings a done one back to pending
 *   otel_traces  the decoded spans (put_spans), the OpenTelemetry Collector's
 *             ClickHouse exporter's layout; ORDER BY (TraceId, SpanId),
 *             PARTITION BY the day the span started
 *   meta      key/value (schema_version)
 * Versions of the other tables are the writer's wall clock in ns, made
 * strictly increasing per handle.
 *
 * Transactions: begin opens an in-memory batch; each write appends one row in
 * RowBinary (little-endian integers, LEB128-length strings) to its table's
 * buffer; commit sends one INSERT .. FORMAT RowBinary per table that has rows.
 * A write outside a transaction is sent at once. A read first sends what the
 * batch holds, so a handle always reads its own writes (this weakens rollback:
 * what a read sent stays; every such row is safe to repeat, see above).
 * Idempotency of put_slice: a hash set of the keys this handle stored answers
 * RT_STORE_DUPLICATE without a round trip.
 *
 * What a writer reads back costs no round trip either (clickhouse_cache.c):
 * the coordinator decodes every trace from its stored slices at close, sets
 * its selection verdict, and marks its triggers done. The handle keeps the
 * slices and rows it wrote, per trace; before each batch goes out, one query
 * asks which of the batch's new traces the server already held slices of
 * (a restart resumed them): only for the others is the memory the whole
 * answer. The trigger keys are loaded once at open, so put_trigger's
 * duplicate check and done_trigger are lookups.
 *
 * Retention (no TTL before 19.6): rt_store_retain writes tombstones for the
 * traces (with their slices) past max_age or over max_bytes, orphan slices past
 * max_age and done triggers past the keep time, then drops whole day
 * partitions of traces and slices older than max_age (ALTER TABLE .. DROP
 * PARTITION), which is what reclaims the disk.
 *
 * Every reply is parsed with bounds checks; a malformed one is RT_STORE_E_IO.
 */
#include "backend.h"
#include "clickhouse_cache.h"
#include "http.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SCHEMA_VERSION 1
#define DEFAULT_PORT 8123
#define DEFAULT_DB "retrace"
#define TIMEOUT_MS 30000
#define TRIGGER_KEEP_NS (3600ull * 1000000000ull)
#define KEYSET_BITS 20 /* 1 Mi keys of the slices this handle stored */
#define NS_PER_DAY (86400ull * 1000000000ull)
#define CACHE_TRACES 16384        /* traces whose own writes a handle remembers */
#define CACHE_BYTES (64u << 20)   /* of their slice messages */
#define SETTLE_CHUNK 1000         /* trace ids per "held before?" query */

enum trig_version { TRIG_STORED = 1, TRIG_DONE = 2, TRIG_REMOVED = 3 };

enum table { T_SLICES, T_TRACES, T_AGENTS, T_TRIGGERS, T_SPANS, T_N };

static const char *const table_name[T_N] = { "slices", "traces", "agents", "triggers",
					      "otel_traces" };

/* The columns each INSERT names, in the order rows are encoded. */
static const char *const table_cols[T_N] = {
	[T_SLICES] = "trace_hi, trace_lo, agent_id, trigger_id, slice_seq, received_ns, buffers, "
		     "bytes, first_ns, last_ns, late, rate_exp, msg, version, deleted",
	[T_TRACES] = "trace_hi, trace_lo, group_id, trigger_ids, agents, missing, coherent, "
		     "first_ns, last_ns, bytes, slices, late_slices, triggered_ns, closed_ns, "
		     "traversal_ns, has_selection, score, pattern, group_key, group_api, weight, "
		     "version, deleted",
	[T_AGENTS] = "agent_id, pid, host, control_addr, start_ns, last_seen_ns, version, deleted",
	[T_TRIGGERS] = "agent_id, trigger_seq, received_ns, msg, done, done_ns, version",
	[T_SPANS] = "Timestamp, TimestampNs, TraceId, SpanId, ParentSpanId, TraceState, SpanName, "
		    "SpanKind, ServiceName, `ResourceAttributes.keys`, `ResourceAttributes.values`, "
		    "ScopeName, ScopeVersion, `SpanAttributes.keys`, `SpanAttributes.values`, "
		    "Duration, StatusCode, StatusMessage, `Events.Timestamp`, `Events.Name`, "
		    "trace_hi, trace_lo, version, deleted",
};

#define SLICE_SELECT                                                                 \
	"SELECT trace_hi, trace_lo, agent_id, trigger_id, slice_seq, received_ns, buffers, " \
	"bytes, first_ns, last_ns, late, rate_exp, msg"
#define TRACE_SELECT                                                                 \
	"SELECT trace_hi, trace_lo, group_id, trigger_ids, agents, missing, coherent, "  \
	"first_ns, last_ns, bytes, slices, late_slices, triggered_ns, closed_ns, "       \
	"traversal_ns, has_selection, score, pattern, group_key, group_api, weight"

/* Day partitions: Date of a Unix ns time, computed by the server. */
static const char *const schema_sql[] = {
	"CREATE DATABASE IF NOT EXISTS %s",
	"CREATE TABLE IF NOT EXISTS %s.meta (key String, value UInt64) "
	"ENGINE = ReplacingMergeTree() ORDER BY key",
	"CREATE TABLE IF NOT EXISTS %s.traces ("
	" trace_hi UInt64, trace_lo UInt64, group_id UInt64,"
	" trigger_ids Array(UInt32), agents Array(UInt32), missing Array(UInt32),"
	" coherent UInt8, first_ns UInt64, last_ns UInt64, bytes UInt64,"
	" slices UInt32, late_slices UInt32, triggered_ns UInt64, closed_ns UInt64,"
	" traversal_ns UInt64, has_selection UInt8, score Float64, pattern UInt64,"
	" group_key UInt64, group_api String, weight Float64,"
	" version UInt64, deleted UInt8,"
	" closed_date Date DEFAULT toDate(toDateTime(intDiv(closed_ns, 1000000000))))"
	" ENGINE = ReplacingMergeTree(version) PARTITION BY closed_date"
	" ORDER BY (trace_lo, trace_hi)",
	"CREATE TABLE IF NOT EXISTS %s.slices ("
	" trace_hi UInt64, trace_lo UInt64, agent_id UInt32, trigger_id UInt32,"
	" slice_seq UInt64, received_ns UInt64, buffers UInt32, bytes UInt64,"
	" first_ns UInt64, last_ns UInt64, late UInt8, rate_exp UInt32, msg String,"
	" version UInt64, deleted UInt8,"
	" received_date Date DEFAULT toDate(toDateTime(intDiv(received_ns, 1000000000))))"
	" ENGINE = ReplacingMergeTree(version) PARTITION BY received_date"
	" ORDER BY (trace_lo, agent_id, slice_seq)",
	"CREATE TABLE IF NOT EXISTS %s.agents ("
	" agent_id UInt32, pid UInt32, host String, control_addr String,"
	" start_ns UInt64, last_seen_ns UInt64, version UInt64, deleted UInt8)"
	" ENGINE = ReplacingMergeTree(version) ORDER BY agent_id",
	"CREATE TABLE IF NOT EXISTS %s.triggers ("
	" agent_id UInt32, trigger_seq UInt64, received_ns UInt64, msg String,"
	" done UInt8, done_ns UInt64, version UInt8)"
	" ENGINE = ReplacingMergeTree(version) ORDER BY (agent_id, trigger_seq)",
	"CREATE TABLE IF NOT EXISTS %s.trigger_names ("
	" trigger_id UInt32, name String, seen_ns UInt64)"
	" ENGINE = ReplacingMergeTree(seen_ns) ORDER BY trigger_id",
	/* The OpenTelemetry Collector's ClickHouse exporter's otel_traces, in 18.16
	 * types: DateTime + ns, Nested key/value arrays for its Maps. */
	"CREATE TABLE IF NOT EXISTS %s.otel_traces ("
	" Timestamp DateTime, TimestampNs UInt64, TraceId String, SpanId String,"
	" ParentSpanId String, TraceState String, SpanName String, SpanKind String,"
	" ServiceName String, ResourceAttributes Nested(keys String, values String),"
	" ScopeName String, ScopeVersion String,"
	" SpanAttributes Nested(keys String, values String),"
	" Duration UInt64, StatusCode String, StatusMessage String,"
	" Events Nested(Timestamp UInt64, Name String),"
	" trace_hi UInt64, trace_lo UInt64, version UInt64, deleted UInt8)"
	" ENGINE = ReplacingMergeTree(version) PARTITION BY toDate(Timestamp)"
	" ORDER BY (TraceId, SpanId)",
};

struct ch_store {
	struct rt_store base; /* first: the handle the interface hands out */
	struct rt_http http;
	char locator[340];    /* clickhouse://host:port/db, what rt_store_path shows */
	char db[64];
	int readonly;
	uint64_t opt_max_age, opt_max_bytes;
	int in_txn;
	struct rt_buf rows[T_N];   /* the batch, RowBinary per table */
	uint32_t nrows[T_N];
	uint64_t last_version;
	uint64_t *keys;            /* open-addressing set of slice key hashes (0: empty) */
	uint32_t nkeys;
	struct chc cache;          /* its own slices and rows (clickhouse_cache.h) */
	struct chc_trigs trigs;    /* every trigger key held, with its state */
	int trigs_loaded;
	/* The trace_lo of every trace row the database may hold (the trigger
	 * map's slots reused, agent 0): loaded at open, grown by put_trace. A
	 * lookup of a trace outside it is answered "not found" without a query,
	 * which would also send the open batch (the coordinator asks for every
	 * slice that arrives before its trigger). Valid because the handle is
	 * its database's one writer; off (every lookup asks) past PRESENT_MAX. */
	struct chc_trigs present;
	int present_on;
	char err[512];
};

static _Thread_local char open_err[512];

/* ------------------------------------------------------------ errors ---- */

static int seterr(struct ch_store *s, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int seterr(struct ch_store *s, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s ? s->err : open_err, s ? sizeof s->err : sizeof open_err, fmt, ap);
	va_end(ap);
	return code;
}

static int readonly_err(struct ch_store *s, const char *what)
{
	return seterr(s, RT_STORE_E_READONLY, "%s: %s: the store is open read-only",
		      s->locator, what);
}

static uint64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t next_version(struct ch_store *s)
{
	uint64_t v = wall_ns();
	if (v <= s->last_version)
		v = s->last_version + 1;
	return s->last_version = v;
}

/* ----------------------------------------------------------- RowBinary -- */

static int put_u8(struct rt_buf *b, uint8_t v) { return rt_buf_put(b, &v, 1); }

static int put_le(struct rt_buf *b, uint64_t v, int n)
{
	unsigned char c[8];
	for (int i = 0; i < n; i++)
		c[i] = (unsigned char)(v >> (8 * i));
	return rt_buf_put(b, c, (size_t)n);
}

static int put_u32(struct rt_buf *b, uint32_t v) { return put_le(b, v, 4); }
static int put_u64(struct rt_buf *b, uint64_t v) { return put_le(b, v, 8); }

static int put_f64(struct rt_buf *b, double d)
{
	uint64_t v;
	memcpy(&v, &d, sizeof v);
	return put_u64(b, v);
}

static int put_varint(struct rt_buf *b, uint64_t v)
{
	unsigned char c[10];
	int n = 0;
	do {
		c[n] = (unsigned char)(v & 0x7f);
		v >>= 7;
		if (v)
			c[n] |= 0x80;
		n++;
	} while (v);
	return rt_buf_put(b, c, (size_t)n);
}

static int put_str(struct rt_buf *b, const void *p, size_t n)
{
	return put_varint(b, n) || rt_buf_put(b, p, n);
}

static int put_u32s(struct rt_buf *b, const uint32_t *v, uint32_t n, uint32_t max)
{
	int rc;
	if (n > max)
		n = max;
	rc = put_varint(b, n);
	for (uint32_t i = 0; i < n && !rc; i++)
		rc = put_u32(b, v[i]);
	return rc;
}

/* A reply being read; `bad` is set by the first read past the end. */
struct cursor {
	const unsigned char *p, *end;
	int bad;
};

static uint64_t get_le(struct cursor *c, int n)
{
	uint64_t v = 0;
	if (c->bad || c->end - c->p < n) {
		c->bad = 1;
		return 0;
	}
	for (int i = 0; i < n; i++)
		v |= (uint64_t)c->p[i] << (8 * i);
	c->p += n;
	return v;
}

static uint8_t get_u8(struct cursor *c) { return (uint8_t)get_le(c, 1); }
static uint32_t get_u32(struct cursor *c) { return (uint32_t)get_le(c, 4); }
static uint64_t get_u64(struct cursor *c) { return get_le(c, 8); }

static double get_f64(struct cursor *c)
{
	uint64_t v = get_u64(c);
	double d;
	memcpy(&d, &v, sizeof d);
	return d;
}

static uint64_t get_varint(struct cursor *c)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		uint8_t b = get_u8(c);
		if (c->bad)
			return 0;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	c->bad = 1;
	return 0;
}

/* A string: *p points into the reply, valid while it lives. */
static size_t get_str(struct cursor *c, const unsigned char **p)
{
	uint64_t n = get_varint(c);
	if (c->bad || (uint64_t)(c->end - c->p) < n) {
		c->bad = 1;
		*p = NULL;
		return 0;
	}
	*p = c->p;
	c->p += n;
	return (size_t)n;
}

static void get_text(struct cursor *c, char *out, size_t cap)
{
	const unsigned char *p;
	size_t n = get_str(c, &p);
	if (n >= cap)
		n = cap - 1;
	if (n)
		memcpy(out, p, n);
	out[n] = 0;
}

static uint32_t get_u32s(struct cursor *c, uint32_t *out, uint32_t max)
{
	uint64_t n = get_varint(c), i;
	uint32_t kept = 0;
	if (n > (uint64_t)(c->end - c->p) / 4) {
		c->bad = 1;
		return 0;
	}
	for (i = 0; i < n; i++) {
		uint32_t v = get_u32(c);
		if (kept < max)
			out[kept++] = v;
	}
	return kept;
}

/* ------------------------------------------------------------ HTTP ---- */

/* Run one statement (sql in the body); the reply body into out (may be NULL). */
static int run_sql(struct ch_store *s, const char *sql, struct rt_buf *out, const char *what)
{
	struct rt_buf local = { 0 };
	struct rt_buf *reply = out ? out : &local;
	int status = 0, rc;
	/* Filters after FINAL must see collapsed rows: never moved to PREWHERE. */
	rc = rt_http_post(&s->http, "/?optimize_move_to_prewhere=0", sql, strlen(sql), &status,
			  reply);
	if (rc) {
		rc = seterr(s, RT_STORE_E_IO, "%s: %s: %s", s->locator, what, s->http.err);
	} else if (status != 200) {
		int n = (int)(reply->len > 300 ? 300 : reply->len);
		rc = seterr(s, RT_STORE_E_IO, "%s: %s: HTTP %d: %.*s", s->locator, what, status, n,
			    reply->p ? (const char *)reply->p : "");
	}
	rt_buf_free(&local);
	return rc;
}

static int insert_rows(struct ch_store *s, enum table t)
{
	char sql[512], target[1536];
	struct rt_buf reply = { 0 };
	int status = 0, rc;
	snprintf(sql, sizeof sql, "INSERT INTO %s.%s (%s) FORMAT RowBinary", s->db, table_name[t],
		 table_cols[t]);
	memcpy(target, "/?query=", 8);
	if (rt_url_encode(sql, target + 8, sizeof target - 8))
		return seterr(s, RT_STORE_E_IO, "%s: insert: statement too long", s->locator);
	rc = rt_http_post(&s->http, target, s->rows[t].p, s->rows[t].len, &status, &reply);
	if (rc)
		rc = seterr(s, RT_STORE_E_IO, "%s: insert into %s (%u rows): %s", s->locator,
			    table_name[t], s->nrows[t], s->http.err);
	else if (status != 200)
		rc = seterr(s, RT_STORE_E_IO, "%s: insert into %s: HTTP %d: %.*s", s->locator,
			    table_name[t], status, (int)(reply.len > 300 ? 300 : reply.len),
			    reply.p ? (const char *)reply.p : "");
	rt_buf_free(&reply);
	return rc;
}

static int settle_unknown(struct ch_store *s);
static int load_triggers(struct ch_store *s);
static int load_present(struct ch_store *s);
static int tombstone_spans(struct ch_store *s, const char *where, const char *what);

/* Send every buffered row (commit, a read, a write outside a transaction); first
 * settle which new traces the server held before (it must not see ours yet). */
static int flush(struct ch_store *s)
{
	int settled = settle_unknown(s);
	if (settled)
		return settled;
	for (int t = 0; t < T_N; t++) {
		if (!s->nrows[t])
			continue;
		int rc = insert_rows(s, (enum table)t);
		if (rc)
			return rc;
		s->rows[t].len = 0;
		s->nrows[t] = 0;
	}
	return 0;
}

static void drop_batch(struct ch_store *s)
{
	for (int t = 0; t < T_N; t++) {
		s->rows[t].len = 0;
		s->nrows[t] = 0;
	}
}

/* A row was appended to table t's buffer (rc: the encoding's result). */
static int row_added(struct ch_store *s, enum table t, int rc)
{
	if (rc)
		return seterr(s, RT_STORE_E_IO, "%s: out of memory for the batch", s->locator);
	s->nrows[t]++;
	return s->in_txn ? 0 : flush(s);
}

/* Run a SELECT .. FORMAT RowBinary after sending the batch; reply into out. */
static int query(struct ch_store *s, struct rt_buf *out, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int query(struct ch_store *s, struct rt_buf *out, const char *what, const char *fmt, ...)
{
	char sql[2048];
	va_list ap;
	int n, rc;
	if ((rc = flush(s)))
		return rc;
	va_start(ap, fmt);
	n = vsnprintf(sql, sizeof sql, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof sql)
		return seterr(s, RT_STORE_E_INVAL, "%s: %s: statement too long", s->locator, what);
	return run_sql(s, sql, out, what);
}

static int malformed(struct ch_store *s, const char *what)
{
	return seterr(s, RT_STORE_E_IO, "%s: %s: malformed reply from the server", s->locator, what);
}

/* -------------------------------------------------- the own-writes cache -- */

/* One "which of these trace ids has slices already?" query for up to
 * SETTLE_CHUNK unknown entries from *next on; they become OLD or FRESH. */
static int settle_chunk(struct ch_store *s, uint32_t *next)
{
	struct chc *c = &s->cache;
	struct rt_buf sql = { 0 }, r = { 0 };
	uint32_t start = *next, n = 0;
	char num[32];
	struct cursor cur;
	int rc = 0;
	if (rt_buf_put(&sql, "SELECT DISTINCT trace_lo FROM ", 30) ||
	    rt_buf_put(&sql, s->db, strlen(s->db)) ||
	    rt_buf_put(&sql, ".slices WHERE trace_lo IN (", 27))
		rc = -1;
	for (; !rc && *next < c->nunknown && n < SETTLE_CHUNK; (*next)++) {
		struct chc_trace *t = chc_get(c, c->unknown[*next]);
		if (!t || t->known != CHC_UNKNOWN)
			continue;
		int len = snprintf(num, sizeof num, "%s%llu", n ? "," : "",
				   (unsigned long long)t->lo);
		rc = rt_buf_put(&sql, num, (size_t)len);
		n++;
	}
	if (!rc && n)
		rc = rt_buf_put(&sql, ") FORMAT RowBinary", 19); /* with the NUL */
	if (rc) {
		rt_buf_free(&sql);
		return seterr(s, RT_STORE_E_IO, "%s: out of memory", s->locator);
	}
	if (n && !(rc = run_sql(s, (const char *)sql.p, &r, "settle new traces"))) {
		cur = (struct cursor){ r.p, r.p + r.len, 0 };
		while (cur.p < cur.end) {
			struct chc_trace *t = chc_get(c, get_u64(&cur));
			if (cur.bad)
				break;
			if (t)
				t->known = CHC_OLD;
		}
		if (cur.bad)
			rc = malformed(s, "settle new traces");
		for (uint32_t i = start; !rc && i < *next; i++) {
			struct chc_trace *t = chc_get(c, c->unknown[i]);
			if (t && t->known == CHC_UNKNOWN)
				t->known = CHC_FRESH;
		}
	}
	rt_buf_free(&sql);
	rt_buf_free(&r);
	return rc;
}

static int settle_unknown(struct ch_store *s)
{
	uint32_t next = 0;
	int rc = 0;
	while (!rc && next < s->cache.nunknown)
		rc = settle_chunk(s, &next);
	if (!rc)
		s->cache.nunknown = 0;
	return rc;
}

/* The cached entry of lo, settled; NULL if there is none. */
static struct chc_trace *cached(struct ch_store *s, uint64_t lo, int *rc)
{
	struct chc_trace *t = chc_get(&s->cache, lo);
	*rc = 0;
	if (t && t->known == CHC_UNKNOWN && (*rc = settle_unknown(s)))
		return NULL;
	return t;
}

/* Remember a row this handle wrote (the cache forgets the trace if it cannot). */
static void cache_row(struct ch_store *s, const struct rt_store_trace *row, int deleted)
{
	struct chc_trace *t = chc_touch(&s->cache, row->trace_lo);
	if (!t)
		return;
	/* One row per trace_lo: another trace_hi under the same lo takes the slot. */
	if (chc_set_row(t, row, deleted)) {
		free(t->row);
		t->row = NULL;
	}
}

/* ------------------------------------------------------------ keys ---- */

static uint64_t slice_key(const struct rt_store_slice *sl)
{
	uint64_t h = chc_mix64(sl->trace_lo ^ chc_mix64(sl->slice_seq ^ ((uint64_t)sl->agent_id << 32)));
	return h ? h : 1;
}

/* 1 if the key was there, 0 if added (or no set: a read-only handle). */
static int keyset_add(struct ch_store *s, uint64_t key)
{
	const uint32_t mask = (1u << KEYSET_BITS) - 1;
	uint32_t i;
	if (!s->keys)
		return 0;
	if (s->nkeys >= (1u << KEYSET_BITS) / 2) { /* full: forget; the engine still collapses */
		memset(s->keys, 0, sizeof *s->keys << KEYSET_BITS);
		s->nkeys = 0;
	}
	for (i = (uint32_t)key & mask; s->keys[i]; i = (i + 1) & mask)
		if (s->keys[i] == key)
			return 1;
	s->keys[i] = key;
	s->nkeys++;
	return 0;
}

/* ------------------------------------------------------------ open ---- */

static int parse_locator(struct ch_store *s, const char *loc)
{
	char host[256];
	const char *slash = strchr(loc, '/'), *colon;
	const char *db = slash && slash[1] ? slash + 1 : DEFAULT_DB;
	size_t hl = slash ? (size_t)(slash - loc) : strlen(loc);
	long port = DEFAULT_PORT;
	if (!hl || hl >= sizeof host)
		return seterr(NULL, RT_STORE_E_INVAL, "clickhouse://%s: no host", loc);
	memcpy(host, loc, hl);
	host[hl] = 0;
	if ((colon = strrchr(host, ':'))) {
		char *end;
		port = strtol(colon + 1, &end, 10);
		if (*end || port <= 0 || port > 65535)
			return seterr(NULL, RT_STORE_E_INVAL, "clickhouse://%s: bad port", loc);
		host[colon - host] = 0;
	}
	if (strlen(db) >= sizeof s->db || strspn(db, "abcdefghijklmnopqrstuvwxyz"
					   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != strlen(db))
		return seterr(NULL, RT_STORE_E_INVAL,
			      "clickhouse://%s: the database name must be letters, digits, _", loc);
	snprintf(s->db, sizeof s->db, "%s", db);
	rt_http_init(&s->http, host, (int)port, TIMEOUT_MS);
	snprintf(s->locator, sizeof s->locator, "clickhouse://%s:%ld/%s", host, port, db);
	return 0;
}

static int read_version(struct ch_store *s, uint64_t *version, int *found)
{
	struct rt_buf r = { 0 };
	struct cursor c;
	int rc = query(s, &r, "read the schema version",
		       "SELECT value FROM %s.meta FINAL WHERE key = 'schema_version' "
		       "FORMAT RowBinary", s->db);
	if (!rc) {
		c = (struct cursor){ r.p, r.p + r.len, 0 };
		*found = r.len > 0;
		*version = *found ? get_u64(&c) : 0;
		if (c.bad)
			rc = malformed(s, "read the schema version");
	}
	rt_buf_free(&r);
	return rc;
}

/* Every CREATE is IF NOT EXISTS: a second writer, or a reopen, changes nothing. */
static int create_tables(struct ch_store *s)
{
	char sql[2048];
	int rc;
	for (size_t i = 0; i < sizeof schema_sql / sizeof *schema_sql; i++) {
		snprintf(sql, sizeof sql, schema_sql[i], s->db);
		if ((rc = run_sql(s, sql, NULL, "create the schema")))
			return rc;
	}
	return 0;
}

static int check_schema(struct ch_store *s)
{
	char sql[256];
	uint64_t v = 0;
	int found = 0, rc;
	if (!s->readonly && (rc = create_tables(s)))
		return rc;
	if ((rc = read_version(s, &v, &found))) {
		if (!s->readonly)
			return rc;
		return seterr(s, RT_STORE_E_OPEN, "%s: not a retrace store (%s)", s->locator, s->err);
	}
	if (!found) {
		if (s->readonly)
			return seterr(s, RT_STORE_E_OPEN, "%s: not a retrace store", s->locator);
		snprintf(sql, sizeof sql,
			 "INSERT INTO %s.meta (key, value) VALUES ('schema_version', %d)", s->db,
			 SCHEMA_VERSION);
		return run_sql(s, sql, NULL, "create the schema");
	}
	if (v > SCHEMA_VERSION)
		return seterr(s, RT_STORE_E_SCHEMA, "%s: schema version %llu is newer than %d",
			      s->locator, (unsigned long long)v, SCHEMA_VERSION);
	return 0;
}

static void ch_close(struct rt_store *base)
{
	struct ch_store *s = (struct ch_store *)base;
	if (!s)
		return;
	if (s->in_txn)
		drop_batch(s);
	rt_http_close(&s->http);
	for (int t = 0; t < T_N; t++)
		rt_buf_free(&s->rows[t]);
	free(s->keys);
	chc_free(&s->cache);
	chc_trig_free(&s->trigs);
	chc_trig_free(&s->present);
	free(s);
}

static int ch_open(struct rt_store **out, const struct rt_store_options *o)
{
	struct ch_store *s = calloc(1, sizeof *s);
	int rc;
	open_err[0] = 0;
	*out = NULL;
	if (!s)
		return seterr(NULL, RT_STORE_E_OPEN, "clickhouse: out of memory");
	if ((rc = parse_locator(s, o->path ? o->path : ""))) {
		free(s);
		return rc;
	}
	s->readonly = o->readonly != 0;
	s->opt_max_age = o->max_age_ns;
	s->opt_max_bytes = o->max_bytes;
	if (!s->readonly && (!(s->keys = calloc(1u << KEYSET_BITS, sizeof *s->keys)) ||
			     chc_init(&s->cache, CACHE_TRACES, CACHE_BYTES))) {
		ch_close(&s->base);
		return seterr(NULL, RT_STORE_E_OPEN, "clickhouse: out of memory");
	}
	if ((rc = run_sql(s, "SELECT 1", NULL, "connect")) || (rc = check_schema(s)) ||
	    (!s->readonly && ((rc = load_triggers(s)) || (rc = load_present(s))))) {
		snprintf(open_err, sizeof open_err, "%s", s->err);
		ch_close(&s->base);
		return rc == RT_STORE_E_IO ? RT_STORE_E_OPEN : rc;
	}
	s->err[0] = 0;
	*out = &s->base;
	return 0;
}

static const char *ch_errmsg(const struct rt_store *base)
{
	return base ? ((const struct ch_store *)base)->err : open_err;
}

static const char *ch_path(const struct rt_store *base)
{
	return ((const struct ch_store *)base)->locator;
}

/* ----------------------------------------------------- transactions ---- */

static int ch_begin(struct rt_store *base)
{
	struct ch_store *s = (struct ch_store *)base;
	if (s->readonly)
		return readonly_err(s, "begin");
	if (s->in_txn)
		return seterr(s, RT_STORE_E_INVAL, "%s: begin: a transaction is already open",
			      s->locator);
	s->in_txn = 1;
	return 0;
}

static int ch_commit(struct rt_store *base)
{
	struct ch_store *s = (struct ch_store *)base;
	int rc;
	if (!s->in_txn)
		return seterr(s, RT_STORE_E_INVAL, "%s: commit: no transaction", s->locator);
	rc = flush(s);
	if (!rc)
		s->in_txn = 0;
	return rc;
}

static void ch_rollback(struct rt_store *base)
{
	struct ch_store *s = (struct ch_store *)base;
	if (!s->in_txn)
		return;
	drop_batch(s);
	s->in_txn = 0;
	/* The memories may hold what was dropped: forget them (reloaded on demand). */
	chc_clear(&s->cache);
	s->trigs_loaded = 0;
	if (s->keys) {
		memset(s->keys, 0, sizeof *s->keys << KEYSET_BITS);
		s->nkeys = 0;
	}
}

/* ------------------------------------------------------------ slices ---- */

static int encode_slice(struct rt_buf *b, const struct rt_store_slice *sl, uint64_t version,
			int deleted)
{
	return put_u64(b, sl->trace_hi) || put_u64(b, sl->trace_lo) || put_u32(b, sl->agent_id) ||
	       put_u32(b, sl->trigger_id) || put_u64(b, sl->slice_seq) ||
	       put_u64(b, sl->received_ns) || put_u32(b, sl->buffers) || put_u64(b, sl->bytes) ||
	       put_u64(b, sl->first_ns) || put_u64(b, sl->last_ns) || put_u8(b, sl->late != 0) ||
	       put_u32(b, sl->rate_exp) || put_str(b, deleted ? "" : sl->msg,
						   deleted ? 0 : sl->msg_len) ||
	       put_u64(b, version) || put_u8(b, (uint8_t)deleted);
}

static void read_slice(struct cursor *c, struct rt_store_slice *sl)
{
	const unsigned char *msg;
	memset(sl, 0, sizeof *sl);
	sl->trace_hi = get_u64(c);
	sl->trace_lo = get_u64(c);
	sl->agent_id = get_u32(c);
	sl->trigger_id = get_u32(c);
	sl->slice_seq = get_u64(c);
	sl->received_ns = get_u64(c);
	sl->buffers = get_u32(c);
	sl->bytes = get_u64(c);
	sl->first_ns = get_u64(c);
	sl->last_ns = get_u64(c);
	sl->late = get_u8(c);
	sl->rate_exp = get_u32(c);
	sl->msg_len = get_str(c, &msg);
	sl->msg = msg;
}

/* Keep a copy; a trace whose copy is incomplete is read from the server. */
static void remember_slice(struct ch_store *s, const struct rt_store_slice *sl)
{
	struct chc_trace *t = chc_touch(&s->cache, sl->trace_lo);
	if (t && chc_add_slice(&s->cache, t, sl))
		t->known = CHC_OLD;
	chc_trim(&s->cache);
}

static int cmp_slice(const void *a, const void *b)
{
	const struct rt_store_slice *x = a, *y = b;
	if (x->agent_id != y->agent_id)
		return x->agent_id < y->agent_id ? -1 : 1;
	return x->slice_seq < y->slice_seq ? -1 : x->slice_seq > y->slice_seq;
}

/* The slices of a FRESH cached trace, copied (a callback may write to the store
 * and so trim the cache) and sorted like the server's answer. */
static int cached_slices(struct ch_store *s, const struct chc_trace *t, uint64_t hi,
			 rt_store_slice_fn fn, void *arg)
{
	const struct chc_slice *c;
	struct rt_store_slice *v;
	unsigned char *p;
	size_t n = 0, bytes = 0, i;
	int rc = 0;
	for (c = t->head; c; c = c->next)
		if (!hi || c->sl.trace_hi == hi)
			n++, bytes += c->sl.msg_len;
	if (!n)
		return 0;
	if (!(v = malloc(n * sizeof *v + bytes)))
		return seterr(s, RT_STORE_E_IO, "%s: out of memory", s->locator);
	p = (unsigned char *)(v + n);
	for (c = t->head, i = 0; c; c = c->next) {
		if (hi && c->sl.trace_hi != hi)
			continue;
		v[i] = c->sl;
		if (c->sl.msg_len)
			memcpy(p, c->sl.msg, c->sl.msg_len);
		v[i++].msg = p;
		p += c->sl.msg_len;
	}
	qsort(v, n, sizeof *v, cmp_slice);
	for (i = 0; i < n && !rc; i++)
		rc = fn(arg, &v[i]);
	free(v);
	return rc;
}

static int ch_put_slice(struct rt_store *base, const struct rt_store_slice *sl)
{
	struct ch_store *s = (struct ch_store *)base;
	if (!sl)
		return seterr(s, RT_STORE_E_INVAL, "%s: put_slice: NULL slice", s->locator);
	if (s->readonly)
		return readonly_err(s, "put_slice");
	if (!s->in_txn)
		return seterr(s, RT_STORE_E_INVAL, "%s: put_slice: no transaction", s->locator);
	if (!sl->msg && sl->msg_len)
		return seterr(s, RT_STORE_E_INVAL, "%s: put_slice: NULL msg of %zu bytes",
			      s->locator, sl->msg_len);
	if (keyset_add(s, slice_key(sl)))
		return RT_STORE_DUPLICATE;
	remember_slice(s, sl);
	return row_added(s, T_SLICES, encode_slice(&s->rows[T_SLICES], sl, next_version(s), 0));
}

static int ch_slices(struct rt_store *base, uint64_t hi, uint64_t lo, rt_store_slice_fn fn,
		     void *arg)
{
	struct ch_store *s = (struct ch_store *)base;
	struct rt_store_slice sl;
	struct rt_buf r = { 0 };
	struct cursor c;
	int rc;
	const struct chc_trace *t;
	if (!fn)
		return seterr(s, RT_STORE_E_INVAL, "%s: slices: NULL callback", s->locator);
	t = cached(s, lo, &rc);
	if (rc)
		return rc;
	if (t && t->known == CHC_FRESH)
		return cached_slices(s, t, hi, fn, arg);
	rc = query(s, &r, "read slices",
		   SLICE_SELECT " FROM %s.slices FINAL WHERE trace_lo = %llu AND "
		   "(%llu = 0 OR trace_hi = %llu) AND deleted = 0 "
		   "ORDER BY agent_id, slice_seq FORMAT RowBinary", s->db,
		   (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)hi);
	c = (struct cursor){ r.p, r.p + r.len, 0 };
	while (!rc && c.p < c.end) {
		read_slice(&c, &sl);
		if (c.bad)
			rc = malformed(s, "read slices");
		else
			rc = fn(arg, &sl);
	}
	rt_buf_free(&r);
	return rc;
}

static int ch_trace_rates(struct rt_store *base, uint64_t hi, uint64_t lo,
			  struct rt_store_rate *out, uint32_t max, uint32_t *n)
{
	struct ch_store *s = (struct ch_store *)base;
	struct rt_buf r = { 0 };
	struct cursor c;
	int rc;
	if ((!out && max) || !n)
		return seterr(s, RT_STORE_E_INVAL, "%s: trace_rates: NULL output", s->locator);
	*n = 0;
	rc = query(s, &r, "read rates",
		   "SELECT agent_id, max(rate_exp) FROM (SELECT agent_id, rate_exp, deleted "
		   "FROM %s.slices FINAL WHERE trace_lo = %llu AND (%llu = 0 OR trace_hi = %llu)) "
		   "WHERE deleted = 0 GROUP BY agent_id ORDER BY agent_id FORMAT RowBinary", s->db,
		   (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)hi);
	c = (struct cursor){ r.p, r.p + r.len, 0 };
	while (!rc && c.p < c.end) {
		uint32_t agent = get_u32(&c), rate = get_u32(&c);
		if (c.bad)
			rc = malformed(s, "read rates");
		else if (*n < max)
			out[(*n)++] = (struct rt_store_rate){ agent, rate };
	}
	rt_buf_free(&r);
	return rc;
}

/* ------------------------------------------------------------ traces ---- */

static int encode_trace(struct rt_buf *b, const struct rt_store_trace *t, uint64_t version,
			int deleted)
{
	size_t gl = strnlen(t->group, sizeof t->group - 1);
	int sel = t->has_selection != 0;
	return put_u64(b, t->trace_hi) || put_u64(b, t->trace_lo) || put_u64(b, t->group_id) ||
	       put_u32s(b, t->trigger_ids, t->trigger_count, RT_STORE_MAX_TRIGGERS) ||
	       put_u32s(b, t->agents, t->agent_count, RT_STORE_MAX_AGENTS) ||
	       put_u32s(b, t->missing, t->missing_count, RT_STORE_MAX_AGENTS) ||
	       put_u8(b, t->coherent != 0) || put_u64(b, t->first_ns) || put_u64(b, t->last_ns) ||
	       put_u64(b, t->bytes) || put_u32(b, t->slices) || put_u32(b, t->late_slices) ||
	       put_u64(b, t->triggered_ns) || put_u64(b, t->closed_ns) ||
	       put_u64(b, t->traversal_ns) || put_u8(b, (uint8_t)sel) ||
	       put_f64(b, sel ? t->score : 0) || put_u64(b, sel ? t->pattern : 0) ||
	       put_u64(b, sel ? t->group_key : 0) || put_str(b, t->group, sel ? gl : 0) ||
	       put_f64(b, sel ? t->weight : 0) || put_u64(b, version) ||
	       put_u8(b, (uint8_t)deleted);
}

static void read_trace(struct cursor *c, struct rt_store_trace *t)
{
	memset(t, 0, sizeof *t);
	t->trace_hi = get_u64(c);
	t->trace_lo = get_u64(c);
	t->group_id = get_u64(c);
	t->trigger_count = get_u32s(c, t->trigger_ids, RT_STORE_MAX_TRIGGERS);
	t->agent_count = get_u32s(c, t->agents, RT_STORE_MAX_AGENTS);
	t->missing_count = get_u32s(c, t->missing, RT_STORE_MAX_AGENTS);
	t->coherent = get_u8(c);
	t->first_ns = get_u64(c);
	t->last_ns = get_u64(c);
	t->bytes = get_u64(c);
	t->slices = get_u32(c);
	t->late_slices = get_u32(c);
	t->triggered_ns = get_u64(c);
	t->closed_ns = get_u64(c);
	t->traversal_ns = get_u64(c);
	t->has_selection = get_u8(c);
	t->score = get_f64(c);
	t->pattern = get_u64(c);
	t->group_key = get_u64(c);
	get_text(c, t->group, sizeof t->group);
	t->weight = get_f64(c);
	if (!t->has_selection) {
		t->score = t->weight = 0;
		t->pattern = t->group_key = 0;
		t->group[0] = 0;
	}
}

#define PRESENT_MAX (2u << 20) /* trace keys remembered; a larger store asks the server */

/* Note that the database may hold a row of trace_lo; past PRESENT_MAX (or out
 * of memory) the filter turns off for good. */
static void note_present(struct ch_store *s, uint64_t lo)
{
	struct chc_trig *t;
	if (!s->present_on)
		return;
	if (s->present.n >= PRESENT_MAX || !(t = chc_trig_put(&s->present, 0, lo))) {
		s->present_on = 0;
		chc_trig_free(&s->present);
		return;
	}
	t->state = CHT_STORED;
}

/* 0 when the database holds no row of trace_lo for sure (the filter is on). */
static int maybe_present(struct ch_store *s, uint64_t lo)
{
	return !s->present_on || chc_trig_find(&s->present, 0, lo) != NULL;
}

/* The keys of every trace row, tombstones included (they are "maybe"). */
static int load_present(struct ch_store *s)
{
	struct rt_buf r = { 0 };
	struct cursor c;
	int rc = query(s, &r, "load trace keys",
		       "SELECT DISTINCT trace_lo FROM %s.traces LIMIT %u FORMAT RowBinary", s->db,
		       PRESENT_MAX + 1);
	s->present_on = 1;
	c = (struct cursor){ r.p, r.p + r.len, 0 };
	while (!rc && s->present_on && c.p < c.end) {
		uint64_t lo = get_u64(&c);
		if (c.bad) {
			rc = malformed(s, "load trace keys");
			break;
		}
		note_present(s, lo);
	}
	rt_buf_free(&r);
	return rc;
}

static int ch_put_trace(struct rt_store *base, const struct rt_store_trace *t)
{
	struct ch_store *s = (struct ch_store *)base;
	struct rt_store_trace row;
	if (!t)
		return seterr(s, RT_STORE_E_INVAL, "%s: put_trace: NULL trace", s->locator);
	if (s->readonly)
		return readonly_err(s, "put_trace");
	row = *t;
	row.has_selection = 0; /* like SQLite's INSERT OR REPLACE: selection is set later */
	cache_row(s, &row, 0);
	note_present(s, row.trace_lo);
	return row_added(s, T_TRACES, encode_trace(&s->rows[T_TRACES], &row, next_version(s), 0));
}

/* The row of exactly (hi, lo); unless exact, hi == 0 is any hi (the newest closed). */
static int fetch_trace(struct ch_store *s, uint64_t hi, uint64_t lo, int exact,
		       struct rt_store_trace *out, const char *what)
{
	struct rt_buf r = { 0 };
	struct cursor c;
	const struct chc_trace *t = exact ? chc_get(&s->cache, lo) : NULL;
	int rc;
	if (!s->readonly && !maybe_present(s, lo))
		return seterr(s, RT_STORE_E_NOTFOUND, "%s: %s: no trace %016llx%016llx", s->locator,
			      what, (unsigned long long)hi, (unsigned long long)lo);
	if (t && t->row && t->row->trace_hi == hi) { /* this handle wrote the newest row */
		if (t->row_deleted)
			return seterr(s, RT_STORE_E_NOTFOUND, "%s: %s: no trace %016llx%016llx",
				      s->locator, what, (unsigned long long)hi,
				      (unsigned long long)lo);
		*out = *t->row;
		return 0;
	}
	rc = query(s, &r, what,
		       TRACE_SELECT " FROM %s.traces FINAL WHERE trace_lo = %llu AND "
		       "(%d AND %llu = 0 OR trace_hi = %llu) AND deleted = 0 "
		       "ORDER BY trace_hi = %llu DESC, closed_ns DESC LIMIT 1 FORMAT RowBinary",
		       s->db, (unsigned long long)lo, !exact, (unsigned long long)hi,
		       (unsigned long long)hi, (unsigned long long)hi);
	if (!rc && !r.len)
		rc = seterr(s, RT_STORE_E_NOTFOUND, "%s: %s: no trace %016llx%016llx", s->locator,
			    what, (unsigned long long)hi, (unsigned long long)lo);
	if (!rc) {
		c = (struct cursor){ r.p, r.p + r.len, 0 };
		read_trace(&c, out);
		if (c.bad)
			rc = malformed(s, what);
	}
	rt_buf_free(&r);
	return rc;
}

static int ch_add_late(struct rt_store *base, const struct rt_store_slice *sl)
{
	struct ch_store *s = (struct ch_store *)base;
	struct rt_store_trace t;
	int rc;
	if (!sl)
		return seterr(s, RT_STORE_E_INVAL, "%s: add_late: NULL slice", s->locator);
	if (s->readonly)
		return readonly_err(s, "add_late");
	if ((rc = fetch_trace(s, sl->trace_hi, sl->trace_lo, 1, &t, "add_late")))
		return rc;
	t.bytes += sl->bytes;
	if (t.slices < UINT32_MAX)
		t.slices++;
	if (t.late_slices < UINT32_MAX)
		t.late_slices++;
	if (sl->first_ns && (!t.first_ns || sl->first_ns < t.first_ns))
		t.first_ns = sl->first_ns;
	if (sl->last_ns > t.last_ns)
		t.last_ns = sl->last_ns;
	cache_row(s, &t, 0);
	return row_added(s, T_TRACES, encode_trace(&s->rows[T_TRACES], &t, next_version(s), 0));
}

static int ch_set_selection(struct rt_store *base, const struct rt_store_trace *sel)
{
	struct ch_store *s = (struct ch_store *)base;
	struct rt_store_trace t;
	int rc;
	if (!sel)
		return seterr(s, RT_STORE_E_INVAL, "%s: set_selection: NULL trace", s->locator);
	if (s->readonly)
		return readonly_err(s, "set_selection");
	if ((rc = fetch_trace(s, sel->trace_hi, sel->trace_lo, 1, &t, "set_selection")))
		return rc;
	t.has_selection = 1;
	t.score = sel->score;
	t.pattern = sel->pattern;
	t.group_key = sel->group_key;
	memcpy(t.group, sel->group, sizeof t.group);
	t.group[sizeof t.group - 1] = 0;
	t.weight = sel->weight;
	cache_row(s, &t, 0);
	return row_added(s, T_TRACES, encode_trace(&s->rows[T_TRACES], &t, next_version(s), 0));
}

/* Tombstones for every live slice matching `where`; *bytes (may be NULL) adds theirs. */
static int tombstone_slices(struct ch_store *s, const char *where, uint64_t *bytes,
			    const char *what)
{
	struct rt_buf r = { 0 };
	struct cursor c;
	int rc = query(s, &r, what,
		       SLICE_SELECT " FROM (SELECT * FROM %s.slices FINAL WHERE %s) "
		       "WHERE deleted = 0 FORMAT RowBinary", s->db, where);
	c = (struct cursor){ r.p, r.p + r.len, 0 };
	while (!rc && c.p < c.end) {
		struct rt_store_slice sl;
		read_slice(&c, &sl);
		if (c.bad) {
			rc = malformed(s, what);
			break;
		}
		if (encode_slice(&s->rows[T_SLICES], &sl, next_version(s), 1))
			rc = seterr(s, RT_STORE_E_IO, "%s: out of memory for the batch", s->locator);
		s->nrows[T_SLICES]++;
		if (bytes)
			*bytes += sl.bytes;
	}
	rt_buf_free(&r);
	return rc;
}

/* Tombstones for the trace row and its slices, sent with the batch; *freed
 * (may be NULL) adds the slices' payload bytes. */
static int delete_trace(struct ch_store *s, uint64_t hi, uint64_t lo, int *found,
			uint64_t *freed)
{
	struct rt_store_trace t;
	char where[128];
	int rc;
	struct chc_trace *ct = cached(s, lo, &rc);
	if (rc)
		return rc;
	if (ct && ct->known == CHC_FRESH) {
		for (const struct chc_slice *c = ct->head; c; c = c->next) {
			if (c->sl.trace_hi != hi)
				continue;
			if (encode_slice(&s->rows[T_SLICES], &c->sl, next_version(s), 1))
				return seterr(s, RT_STORE_E_IO, "%s: out of memory", s->locator);
			s->nrows[T_SLICES]++;
			if (freed)
				*freed += c->sl.bytes;
		}
		chc_drop_slices(&s->cache, ct, hi);
	} else {
		snprintf(where, sizeof where, "trace_lo = %llu AND trace_hi = %llu",
			 (unsigned long long)lo, (unsigned long long)hi);
		if ((rc = tombstone_slices(s, where, freed, "delete_trace: slices")))
			return rc;
	}
	snprintf(where, sizeof where, "trace_lo = %llu AND trace_hi = %llu",
		 (unsigned long long)lo, (unsigned long long)hi);
	if ((rc = tombstone_spans(s, where, "delete_trace: spans")))
		return rc;
	*found = 0;
	rc = fetch_trace(s, hi, lo, 1, &t, "delete_trace");
	if (rc == RT_STORE_E_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	*found = 1;
	cache_row(s, &t, 1);
	if (encode_trace(&s->rows[T_TRACES], &t, next_version(s), 1))
		return seterr(s, RT_STORE_E_IO, "%s: out of memory for the batch", s->locator);
	s->nrows[T_TRACES]++;
	return 0;
}

static int ch_delete_trace(struct rt_store *base, uint64_t hi, uint64_t lo)
{
	struct ch_store *s = (struct ch_store *)base;
	int rc, found = 0;
	if (s->readonly)
		return readonly_err(s, "delete_trace");
	rc = delete_trace(s, hi, lo, &found, NULL);
	if (!rc && !s->in_txn)
		rc = flush(s);
	if (!rc && !found)
		rc = seterr(s, RT_STORE_E_NOTFOUND, "%s: delete_trace: no trace %016llx%016llx",
			    s->locator, (unsigned long long)hi, (unsigned long long)lo);
	return rc;
}

/* ------------------------------------------------------------- spans ---- */

static const char *span_kind_name(uint8_t k)
{
	static const char *const name[] = { "SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL",
					    "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT",
					    "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER" };
	return k < 6 ? name[k] : name[0];
}

static const char *status_name(uint8_t st)
{
	return st == 1 ? "STATUS_CODE_OK" : st == 2 ? "STATUS_CODE_ERROR" : "STATUS_CODE_UNSET";
}

static int put_text(struct rt_buf *b, const char *t)
{
	return put_str(b, t ? t : "", t ? strlen(t) : 0);
}

static int put_kvs(struct rt_buf *b, const struct rt_store_kv *kv, uint32_t n)
{
	int rc = put_varint(b, n);
	for (uint32_t i = 0; i < n && !rc; i++)
		rc = put_text(b, kv[i].key);
	rc = rc || put_varint(b, n);
	for (uint32_t i = 0; i < n && !rc; i++)
		rc = put_text(b, kv[i].value);
	return rc;
}

static int encode_span(struct rt_buf *b, const struct rt_store_span *sp, uint64_t version)
{
	char trace[33], span[17], parent[17] = "";
	int rc;
	snprintf(trace, sizeof trace, "%016llx%016llx", (unsigned long long)sp->trace_hi,
		 (unsigned long long)sp->trace_lo);
	snprintf(span, sizeof span, "%016llx", (unsigned long long)sp->span_id);
	if (sp->parent_id)
		snprintf(parent, sizeof parent, "%016llx", (unsigned long long)sp->parent_id);
	rc = put_u32(b, (uint32_t)(sp->start_ns / 1000000000ull)) || put_u64(b, sp->start_ns) ||
	     put_text(b, trace) || put_text(b, span) || put_text(b, parent) || put_text(b, "") ||
	     put_text(b, sp->name) || put_text(b, span_kind_name(sp->kind)) ||
	     put_text(b, sp->service) || put_kvs(b, sp->resource, sp->n_resource) ||
	     put_text(b, "retrace") || put_text(b, "") || put_kvs(b, sp->attrs, sp->n_attrs) ||
	     put_u64(b, sp->end_ns > sp->start_ns ? sp->end_ns - sp->start_ns : 0) ||
	     put_text(b, status_name(sp->status)) || put_text(b, sp->status_message) ||
	     put_varint(b, sp->n_events);
	for (uint32_t i = 0; i < sp->n_events && !rc; i++)
		rc = put_u64(b, sp->event_ns[i]);
	rc = rc || put_varint(b, sp->n_events);
	for (uint32_t i = 0; i < sp->n_events && !rc; i++)
		rc = put_text(b, sp->event_body[i]);
	return rc || put_u64(b, sp->trace_hi) || put_u64(b, sp->trace_lo) || put_u64(b, version) ||
	       put_u8(b, 0);
}

static int ch_put_spans(struct rt_store *base, const struct rt_store_span *spans, uint32_t n)
{
	struct ch_store *s = (struct ch_store *)base;
	int rc = 0;
	if (s->readonly)
		return readonly_err(s, "put_spans");
	for (uint32_t i = 0; i < n && !rc; i++) {
		if (encode_span(&s->rows[T_SPANS], &spans[i], next_version(s)))
			return seterr(s, RT_STORE_E_IO, "%s: out of memory for the batch",
				      s->locator);
		s->nrows[T_SPANS]++;
	}
	return s->in_txn ? 0 : flush(s);
}

/* Tombstones for the live spans matching `where`: the key, the partition and
 * the flag are all a tombstone needs. */
static int tombstone_spans(struct ch_store *s, const char *where, const char *what)
{
	struct rt_buf r = { 0 };
	struct cursor c;
	int rc = query(s, &r, what,
		       "SELECT TimestampNs, TraceId, SpanId, trace_hi, trace_lo FROM (SELECT * FROM "
		       "%s.otel_traces FINAL WHERE %s) WHERE deleted = 0 FORMAT RowBinary", s->db,
		       where);
	c = (struct cursor){ r.p, r.p + r.len, 0 };
	while (!rc && c.p < c.end) {
		const unsigned char *trace, *span;
		uint64_t ns = get_u64(&c), hi, lo;
		size_t tl = get_str(&c, &trace), sl = get_str(&c, &span);
		struct rt_buf *b = &s->rows[T_SPANS];
		hi = get_u64(&c);
		lo = get_u64(&c);
		if (c.bad) {
			rc = malformed(s, what);
			break;
		}
		if (put_u32(b, (uint32_t)(ns / 1000000000ull)) || put_u64(b, ns) ||
		    put_str(b, trace, tl) || put_str(b, span, sl) || put_text(b, "") ||
		    put_text(b, "") || put_text(b, "") || put_text(b, "") || put_text(b, "") ||
		    put_kvs(b, NULL, 0) || put_text(b, "") || put_text(b, "") ||
		    put_kvs(b, NULL, 0) || put_u64(b, 0) || put_text(b, "") || put_text(b, "") ||
		    put_varint(b, 0) || put_varint(b, 0) || put_u64(b, hi) || put_u64(b, lo) ||
		    put_u64(b, next_version(s)) || put_u8(b, 1))
			rc = seterr(s, RT_STORE_E_IO, "%s: out of memory for the batch", s->locator);
		s->nrows[T_SPANS]++;
	}
	rt_buf_free(&r);
	return rc;
}

static int ch_get_trace(struct rt_store *base, uint64_t hi, uint64_t lo, struct rt_store_trace *out)
{
	struct ch_store *s = (struct ch_store *)base;
	if (!out)
		return seterr(s, RT_STORE_E_INVAL, "%s: get_trace: NULL output", s->locator);
	return fetch_trace(s, hi, lo, 0, out, "get_trace");
}

static int ch_list(struct rt_store *base, const struct rt_store_query *q, rt_store_trace_fn fn,
		   void *arg)
{
	struct ch_store *s = (struct ch_store *)base;
	struct rt_store_trace t;
	struct rt_buf r = { 0 };
	struct cursor c;
	char trig[48] = "", limit[48] = "";
	int rc;
	if (!q || !fn)
		return seterr(s, RT_STORE_E_INVAL, "%s: list: NULL %s", s->locator,
			      q ? "callback" : "query");
	if (q->by_trigger)
		snprintf(trig, sizeof trig, " AND has(trigger_ids, toUInt32(%u))", q->trigger_id);
	if (q->limit)
		snprintf(limit, sizeof limit, " LIMIT %u", q->limit);
	rc = query(s, &r, "list traces",
		   TRACE_SELECT " FROM (" TRACE_SELECT ", deleted FROM %s.traces FINAL "
		   "WHERE closed_ns >= %llu) WHERE deleted = 0%s%s "
		   "ORDER BY closed_ns DESC, trace_lo DESC, trace_hi DESC%s FORMAT RowBinary",
		   s->db, (unsigned long long)q->since_ns, trig,
		   q->incoherent_only ? " AND coherent = 0" : "", limit);
	c = (struct cursor){ r.p, r.p + r.len, 0 };
	while (!rc && c.p < c.end) {
		read_trace(&c, &t);
		rc = c.bad ? malformed(s, "list traces") : fn(arg, &t);
	}
	rt_buf_free(&r);
	return rc;
}

/* ------------------------------------------------- agent directory ---- */

static int encode_agent(struct rt_buf *b, const struct rt_store_agent *a, uint64_t version,
			int deleted)
{
	return put_u32(b, a->agent_id) || put_u32(b, a->pid) ||
	       put_str(b, a->host, strnlen(a->host, sizeof a->host - 1)) ||
	       put_str(b, a->control_addr, strnlen(a->control_addr, sizeof a->control_addr - 1)) ||
	       put_u64(b, a->start_ns) || put_u64(b, a->last_seen_ns) || put_u64(b, version) ||
	       put_u8(b, (uint8_t)deleted);
}

static int ch_put_agent(struct rt_store *base, const struct rt_store_agent *a)
{
	struct ch_store *s = (struct ch_store *)base;
	if (!a)
		return seterr(s, RT_STORE_E_INVAL, "%s: put_agent: NULL agent", s->locator);
	if (s->readonly)
		return readonly_err(s, "put_agent");
	return row_added(s, T_AGENTS, encode_agent(&s->rows[T_AGENTS], a, next_version(s), 0));
}

/* Walk the live agents (agent_id >= 0, or exactly `only` when only >= 0). */
static int walk_agents(struct ch_store *s, long long only, rt_store_agent_fn fn, void *arg)
{
	struct rt_store_agent a;
	struct rt_buf r = { 0 };
	struct cursor c;
	char where[64] = "";
	int rc;
	if (only >= 0)
		snprintf(where, sizeof where, "WHERE agent_id = %lld", only);
	rc = query(s, &r, "list agents",
		   "SELECT agent_id, pid, host, control_addr, start_ns, last_seen_ns FROM "
		   "(SELECT * FROM %s.agents FINAL %s) WHERE deleted = 0 ORDER BY agent_id "
		   "FORMAT RowBinary", s->db, where);
	c = (struct cursor){ r.p, r.p + r.len, 0 };
	while (!rc && c.p < c.end) {
		memset(&a, 0, sizeof a);
		a.agent_id = get_u32(&c);
		a.pid = get_u32(&c);
		get_text(&c, a.host, sizeof a.host);
		get_text(&c, a.control_addr, sizeof a.control_addr);
		a.start_ns = get_u64(&c);
		a.last_seen_ns = get_u64(&c);
		rc = c.bad ? malformed(s, "list agents") : fn(arg, &a);
	}
	rt_buf_free(&r);
	return rc;
}

static int copy_agent(void *arg, const struct rt_store_agent *a)
{
	*(struct rt_store_agent *)arg = *a;
	return 1;
}

static int ch_delete_agent(struct rt_store *base, uint32_t agent_id)
{
	struct ch_store *s = (struct ch_store *)base;
	struct rt_store_agent a;
	int rc;
	if (s->readonly)
		return readonly_err(s, "delete_agent");
	rc = walk_agents(s, agent_id, copy_agent, &a);
	if (rc < 0)
		return rc;
	if (rc == 0)
		return seterr(s, RT_STORE_E_NOTFOUND, "%s: no agent %u", s->locator, agent_id);
	return row_added(s, T_AGENTS, encode_agent(&s->rows[T_AGENTS], &a, next_version(s), 1));
}

static int ch_agents(struct rt_store *base, rt_store_agent_fn fn, void *arg)
{
	struct ch_store *s = (struct ch_store *)base;
	if (!fn)
		return seterr(s, RT_STORE_E_INVAL, "%s: agents: NULL callback", s->locator);
	return walk_agents(s, -1, fn, arg);
}

/* ---------------------------------------------------- trigger names ---- */

/* store.c lets only the record format's [A-Za-z0-9-_.:/] names through, so
 * one statement with the name quoted inline is safe. Rare (a coordinator
 * writes a name once per id), so no batch. */
static int ch_put_trigger_name(struct rt_store *base, uint32_t id, const char *name,
			       uint64_t seen_ns)
{
	struct ch_store *s = (struct ch_store *)base;
	if (s->readonly)
		return readonly_err(s, "put_trigger_name");
	return query(s, NULL, "put_trigger_name",
		     "INSERT INTO %s.trigger_names (trigger_id, name, seen_ns) VALUES (%u, '%s', %llu)",
		     s->db, id, name, (unsigned long long)seen_ns);
}

static int ch_trigger_names(struct rt_store *base, rt_store_trigger_name_fn fn, void *arg)
{
	struct ch_store *s = (struct ch_store *)base;
	char name[RT_STORE_TRIGGER_NAME_MAX];
	struct rt_buf r = { 0 };
	struct cursor c;
	int rc;
	if (!fn)
		return seterr(s, RT_STORE_E_INVAL, "%s: trigger_names: NULL callback", s->locator);
	rc = query(s, &r, "list trigger names",
		   "SELECT trigger_id, name FROM %s.trigger_names FINAL ORDER BY trigger_id "
		   "FORMAT RowBinary", s->db);
	c = (struct cursor){ r.p, r.p + r.len, 0 };
	while (!rc && c.p < c.end) {
		uint32_t id = get_u32(&c);
		get_text(&c, name, sizeof name);
		rc = c.bad ? malformed(s, "list trigger names") : fn(arg, id, name);
	}
	rt_buf_free(&r);
	/* A read-only opener of a database no writer of this version opened yet
	 * has no trigger_names table: no names, as SQLite. */
	return rc < 0 && s->readonly && c.p == NULL ? 0 : rc;
}

/* -------------------------------------------------- pending triggers ---- */

static int encode_trigger(struct rt_buf *b, uint32_t agent_id, uint64_t seq, uint64_t received_ns,
			  const void *msg, size_t len, int done, uint64_t done_ns, uint8_t version)
{
	return put_u32(b, agent_id) || put_u64(b, seq) || put_u64(b, received_ns) ||
	       put_str(b, msg, len) || put_u8(b, (uint8_t)done) || put_u64(b, done_ns) ||
	       put_u8(b, version);
}

/* Every trigger key the server holds, with its state (one query, at open and
 * after a rollback). */
static int load_triggers(struct ch_store *s)
{
	struct rt_buf r = { 0 };
	struct cursor c;
	int rc;
	chc_trig_free(&s->trigs);
	s->trigs_loaded = 0;
	rc = query(s, &r, "load triggers",
		   "SELECT agent_id, trigger_seq, received_ns, version FROM %s.triggers FINAL "
		   "FORMAT RowBinary", s->db);
	c = (struct cursor){ r.p, r.p + r.len, 0 };
	while (!rc && c.p < c.end) {
		uint32_t agent = get_u32(&c);
		uint64_t seq = get_u64(&c), received = get_u64(&c);
		uint8_t version = get_u8(&c);
		struct chc_trig *t;
		if (c.bad || version < TRIG_STORED || version > TRIG_REMOVED) {
			rc = malformed(s, "load triggers");
			break;
		}
		if (!(t = chc_trig_put(&s->trigs, agent, seq))) {
			rc = seterr(s, RT_STORE_E_IO, "%s: out of memory for triggers", s->locator);
			break;
		}
		t->received_ns = received;
		t->state = version; /* TRIG_* and CHT_* count the same states */
	}
	rt_buf_free(&r);
	if (!rc)
		s->trigs_loaded = 1;
	return rc;
}

static int triggers_ready(struct ch_store *s)
{
	return s->trigs_loaded ? 0 : load_triggers(s);
}

static int ch_put_trigger(struct rt_store *base, uint32_t agent_id, uint64_t seq,
			  uint64_t received_ns, const void *msg, size_t len)
{
	struct ch_store *s = (struct ch_store *)base;
	struct chc_trig *t;
	int rc;
	if (s->readonly)
		return readonly_err(s, "put_trigger");
	if (!msg && len)
		return seterr(s, RT_STORE_E_INVAL, "%s: put_trigger: NULL msg of %zu bytes",
			      s->locator, len);
	if ((rc = triggers_ready(s)))
		return rc;
	t = chc_trig_find(&s->trigs, agent_id, seq);
	if (t) /* stored, done, or removed by retention: a newer row would hide nothing */
		return RT_STORE_DUPLICATE;
	if (!(t = chc_trig_put(&s->trigs, agent_id, seq)))
		return seterr(s, RT_STORE_E_IO, "%s: out of memory for triggers", s->locator);
	t->state = CHT_STORED;
	t->received_ns = received_ns;
	rc = row_added(s, T_TRIGGERS, encode_trigger(&s->rows[T_TRIGGERS], agent_id, seq,
						     received_ns, msg ? msg : "", len, 0, 0,
						     TRIG_STORED));
	if (rc)
		s->trigs_loaded = 0; /* not sent: ask the server again */
	return rc;
}

static int ch_done_trigger(struct rt_store *base, uint32_t agent_id, uint64_t seq)
{
	struct ch_store *s = (struct ch_store *)base;
	struct chc_trig *t;
	int rc;
	if (s->readonly)
		return readonly_err(s, "done_trigger");
	if ((rc = triggers_ready(s)))
		return rc;
	t = chc_trig_find(&s->trigs, agent_id, seq);
	if (!t || t->state == CHT_REMOVED)
		return seterr(s, RT_STORE_E_NOTFOUND, "%s: no trigger %u/%llu", s->locator,
			      agent_id, (unsigned long long)seq);
	if (t->state == CHT_DONE)
		return 0;
	t->state = CHT_DONE;
	/* The message is not kept once done: only pending triggers are ever read. */
	rc = row_added(s, T_TRIGGERS, encode_trigger(&s->rows[T_TRIGGERS], agent_id, seq,
						     t->received_ns, "", 0, 1, wall_ns(), TRIG_DONE));
	if (rc)
		s->trigs_loaded = 0;
	return rc;
}

static int ch_pending_triggers(struct rt_store *base, rt_store_trigger_fn fn, void *arg)
{
	struct ch_store *s = (struct ch_store *)base;
	struct rt_buf r = { 0 };
	struct cursor c;
	int rc;
	if (!fn)
		return seterr(s, RT_STORE_E_INVAL, "%s: pending_triggers: NULL callback",
			      s->locator);
	rc = query(s, &r, "list triggers",
		   "SELECT agent_id, trigger_seq, received_ns, msg FROM "
		   "(SELECT * FROM %s.triggers FINAL) WHERE done = 0 AND version = %d "
		   "ORDER BY received_ns, agent_id, trigger_seq FORMAT RowBinary", s->db,
		   TRIG_STORED);
	c = (struct cursor){ r.p, r.p + r.len, 0 };
	while (!rc && c.p < c.end) {
		const unsigned char *msg;
		uint32_t agent = get_u32(&c);
		uint64_t seq = get_u64(&c), received = get_u64(&c);
		size_t len = get_str(&c, &msg);
		rc = c.bad ? malformed(s, "list triggers")
			   : fn(arg, agent, seq, received, msg ? (const void *)msg : "", len);
	}
	rt_buf_free(&r);
	return rc;
}

/* ------------------------------------------------ retention, stats ---- */

/* Delete the traces a query lists (trace_hi, trace_lo), oldest first; with
 * by_size only while the slices' bytes are over max_bytes. Counts them. */
static int delete_listed(struct ch_store *s, struct rt_buf *r, uint64_t *bytes_left,
			 uint64_t max_bytes, int by_size, uint64_t *deleted)
{
	struct cursor c = { r->p, r->p + r->len, 0 };
	int rc = 0;
	while (!rc && c.p < c.end) {
		uint64_t hi = get_u64(&c), lo = get_u64(&c), freed = 0;
		int found = 0;
		if (c.bad)
			return malformed(s, "retain");
		if (by_size && *bytes_left <= max_bytes)
			break;
		if ((rc = delete_trace(s, hi, lo, &found, &freed)))
			break;
		if (found)
			(*deleted)++;
		*bytes_left = *bytes_left > freed ? *bytes_left - freed : 0;
	}
	return rc;
}

static int slice_totals(struct ch_store *s, uint64_t *count, uint64_t *bytes)
{
	struct rt_buf r = { 0 };
	struct cursor c;
	int rc = query(s, &r, "slice totals",
		       "SELECT count(), sum(bytes) FROM (SELECT bytes, deleted FROM %s.slices FINAL) "
		       "WHERE deleted = 0 FORMAT RowBinary", s->db);
	if (!rc) {
		c = (struct cursor){ r.p, r.p + r.len, 0 };
		*count = get_u64(&c);
		*bytes = get_u64(&c);
		if (c.bad)
			rc = malformed(s, "slice totals");
	}
	rt_buf_free(&r);
	return rc;
}

/* Drop the day partitions of `table` whose every row is older than cutoff. */
static int drop_old_partitions(struct ch_store *s, const char *table, uint64_t cutoff_ns)
{
	struct rt_buf r = { 0 };
	struct cursor c;
	uint64_t cut_day = cutoff_ns / NS_PER_DAY; /* days before this one are wholly old */
	int rc = query(s, &r, "retain: partitions",
		       "SELECT DISTINCT partition FROM system.parts WHERE database = '%s' AND "
		       "table = '%s' AND active AND max_date < toDate(toDateTime(%llu * 86400)) "
		       "FORMAT RowBinary", s->db, table, (unsigned long long)cut_day);
	c = (struct cursor){ r.p, r.p + r.len, 0 };
	while (!rc && c.p < c.end) {
		char part[64], sql[256];
		get_text(&c, part, sizeof part);
		if (c.bad) {
			rc = malformed(s, "retain: partitions");
			break;
		}
		if (strspn(part, "0123456789-") != strlen(part))
			continue; /* not one of our Date partitions */
		snprintf(sql, sizeof sql, "ALTER TABLE %s.%s DROP PARTITION '%s'", s->db, table,
			 part);
		rc = run_sql(s, sql, NULL, "retain: drop partition");
	}
	rt_buf_free(&r);
	return rc;
}

/* Every trace closed before cutoff, in bulk: one query lists their rows (each
 * gets a tombstone), one writes tombstones for all their slices. */
static int retain_age(struct ch_store *s, uint64_t cutoff, uint64_t *deleted)
{
	struct rt_buf r = { 0 };
	struct cursor c;
	char where[512];
	int rc = query(s, &r, "retain: old traces",
		       TRACE_SELECT " FROM (SELECT * FROM %s.traces FINAL WHERE closed_ns < %llu) "
		       "WHERE deleted = 0 FORMAT RowBinary", s->db, (unsigned long long)cutoff);
	c = (struct cursor){ r.p, r.p + r.len, 0 };
	while (!rc && c.p < c.end) {
		struct rt_store_trace t;
		struct chc_trace *ct;
		read_trace(&c, &t);
		if (c.bad) {
			rc = malformed(s, "retain: old traces");
			break;
		}
		if (encode_trace(&s->rows[T_TRACES], &t, next_version(s), 1)) {
			rc = seterr(s, RT_STORE_E_IO, "%s: out of memory", s->locator);
			break;
		}
		s->nrows[T_TRACES]++;
		cache_row(s, &t, 1);
		if ((ct = chc_get(&s->cache, t.trace_lo)))
			chc_drop_slices(&s->cache, ct, t.trace_hi);
		(*deleted)++;
	}
	rt_buf_free(&r);
	if (rc)
		return rc;
	snprintf(where, sizeof where,
		 "(trace_lo, trace_hi) IN (SELECT trace_lo, trace_hi FROM %s.traces FINAL "
		 "WHERE closed_ns < %llu)", s->db, (unsigned long long)cutoff);
	rc = tombstone_slices(s, where, NULL, "retain: slices of old traces");
	return rc ? rc : tombstone_spans(s, where, "retain: spans of old traces");
}

static int retain_locked(struct ch_store *s, uint64_t now_ns, uint64_t *deleted)
{
	const uint64_t max_age = s->opt_max_age, max_bytes = s->opt_max_bytes;
	uint64_t cutoff = max_age && now_ns > max_age ? now_ns - max_age : 0;
	uint64_t trig_keep = max_age ? max_age : TRIGGER_KEEP_NS, count = 0, bytes = 0;
	struct rt_buf r = { 0 };
	char where[256];
	int rc = 0;

	if (cutoff)
		rc = retain_age(s, cutoff, deleted);
	if (!rc && max_bytes && !(rc = flush(s)) && !(rc = slice_totals(s, &count, &bytes)) &&
	    bytes > max_bytes) {
		rc = query(s, &r, "retain: oldest traces",
			   "SELECT trace_hi, trace_lo FROM (SELECT * FROM %s.traces FINAL) "
			   "WHERE deleted = 0 ORDER BY closed_ns, trace_lo, trace_hi "
			   "FORMAT RowBinary", s->db);
		if (!rc)
			rc = delete_listed(s, &r, &bytes, max_bytes, 1, deleted);
	}
	if (!rc && cutoff) {
		snprintf(where, sizeof where,
			 "received_ns < %llu AND (trace_lo, trace_hi) NOT IN (SELECT trace_lo, "
			 "trace_hi FROM %s.traces FINAL WHERE deleted = 0)",
			 (unsigned long long)cutoff, s->db);
		rc = tombstone_slices(s, where, NULL, "retain: orphan slices");
	}
	if (!rc && now_ns > trig_keep) {
		rc = query(s, &r, "retain: done triggers",
			   "SELECT agent_id, trigger_seq, received_ns FROM (SELECT * FROM "
			   "%s.triggers FINAL) WHERE done = 1 AND version = %d AND received_ns < %llu "
			   "FORMAT RowBinary", s->db, TRIG_DONE,
			   (unsigned long long)(now_ns - trig_keep));
		struct cursor c = { r.p, r.p + r.len, 0 };
		while (!rc && c.p < c.end) {
			uint32_t agent = get_u32(&c);
			uint64_t seq = get_u64(&c), received = get_u64(&c);
			if (c.bad) {
				rc = malformed(s, "retain: done triggers");
				break;
			}
			if (encode_trigger(&s->rows[T_TRIGGERS], agent, seq, received, "", 0, 1, 0,
					   TRIG_REMOVED))
				rc = seterr(s, RT_STORE_E_IO, "%s: out of memory", s->locator);
			s->nrows[T_TRIGGERS]++;
			struct chc_trig *t = chc_trig_find(&s->trigs, agent, seq);
			if (t)
				t->state = CHT_REMOVED;
		}
	}
	rt_buf_free(&r);
	if (!rc)
		rc = flush(s);
	if (!rc && cutoff && !(rc = drop_old_partitions(s, "traces", cutoff)) &&
	    !(rc = drop_old_partitions(s, "slices", cutoff)))
		rc = drop_old_partitions(s, "otel_traces", cutoff);
	return rc;
}

static int ch_retain(struct rt_store *base, uint64_t now_ns, uint64_t *deleted)
{
	struct ch_store *s = (struct ch_store *)base;
	uint64_t n = 0;
	int rc;
	if (s->readonly)
		return readonly_err(s, "retain");
	rc = retain_locked(s, now_ns, &n);
	if (deleted && !rc)
		*deleted = n;
	return rc;
}

static int ch_stats(struct rt_store *base, struct rt_store_stats *out)
{
	struct ch_store *s = (struct ch_store *)base;
	struct rt_buf r = { 0 };
	struct cursor c;
	int rc;
	if (!out)
		return seterr(s, RT_STORE_E_INVAL, "%s: stats: NULL output", s->locator);
	memset(out, 0, sizeof *out);
	rc = query(s, &r, "stats",
		   "SELECT"
		   " (SELECT count() FROM (SELECT deleted FROM %1$s.traces FINAL) WHERE deleted = 0),"
		   " (SELECT count() FROM (SELECT deleted, coherent FROM %1$s.traces FINAL)"
		   "  WHERE deleted = 0 AND coherent = 1),"
		   " (SELECT count() FROM (SELECT done, version FROM %1$s.triggers FINAL)"
		   "  WHERE done = 0 AND version = 1),"
		   " (SELECT count() FROM (SELECT deleted FROM %1$s.agents FINAL) WHERE deleted = 0),"
		   " (SELECT count() FROM (SELECT deleted FROM %1$s.slices FINAL) WHERE deleted = 0),"
		   " (SELECT sum(bytes) FROM (SELECT bytes, deleted FROM %1$s.slices FINAL)"
		   "  WHERE deleted = 0),"
		   " (SELECT sum(bytes) FROM system.parts WHERE database = '%1$s' AND active)"
		   " FORMAT RowBinary", s->db);
	if (!rc) {
		c = (struct cursor){ r.p, r.p + r.len, 0 };
		out->traces = get_u64(&c);
		out->coherent = get_u64(&c);
		out->incoherent = out->traces - out->coherent;
		out->pending_triggers = get_u64(&c);
		out->agents = get_u64(&c);
		out->slices = get_u64(&c);
		out->slice_bytes = get_u64(&c);
		out->file_bytes = get_u64(&c);
		if (c.bad)
			rc = malformed(s, "stats");
	}
	rt_buf_free(&r);
	return rc;
}

const struct rt_store_backend rt_store_clickhouse_backend = {
	.name = "clickhouse",
	.open = ch_open, .close = ch_close, .errmsg = ch_errmsg, .path = ch_path,
	.begin = ch_begin, .commit = ch_commit, .rollback = ch_rollback,
	.put_slice = ch_put_slice, .slices = ch_slices, .trace_rates = ch_trace_rates,
	.put_trace = ch_put_trace, .add_late = ch_add_late, .set_selection = ch_set_selection,
	.delete_trace = ch_delete_trace, .get_trace = ch_get_trace, .list = ch_list,
	.wants_spans = 1, .put_spans = ch_put_spans,
	.put_agent = ch_put_agent, .delete_agent = ch_delete_agent, .agents = ch_agents,
	.put_trigger_name = ch_put_trigger_name, .trigger_names = ch_trigger_names,
	.put_trigger = ch_put_trigger, .done_trigger = ch_done_trigger,
	.pending_triggers = ch_pending_triggers, .retain = ch_retain, .stats = ch_stats,
};
