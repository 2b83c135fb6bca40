/*
 * store/sqlite.c — the SQLite backend of the store (store.h): one file, embedded.
 *
 * File: WAL journal (a commit is one append to the -wal file), synchronous=NORMAL
 * (a committed transaction survives a kill -9 of the process) or FULL with
 * sync_full (also a power cut), busy_timeout 5 s. With background_checkpoint
 * (the coordinator), automatic checkpoints are off and a thread of the store's
 * own, on a second connection, runs a PASSIVE checkpoint every 200 ms: a
 * checkpoint writes the WAL back into the file and fsyncs both, which on a
 * busy disk took seconds, inside whichever commit crossed the 1000-page mark;
 * the coordinator's loop holds every reply for its commit, so each of those
 * stalled every agent. A PASSIVE checkpoint never blocks the writer. A retrace
 * store is recognised by PRAGMA application_id 'RTRC' and a meta table holding
 * schema_version (1 or 2); anything else is refused with RT_STORE_E_OPEN and
 * never modified, a newer
 * version is RT_STORE_E_SCHEMA. A fresh (empty) file gets the schema in one
 * transaction; a read-only open never creates and never writes.
 *
 * Versions: 2 added slices.rate_exp (the slice's sampling rate exponent, wire
 * rate_exp). A writable open of a version-1 store migrates it in one
 * transaction (ALTER TABLE slices ADD COLUMN rate_exp .. DEFAULT 0, then
 * schema_version = 2): its slices were all sent at rate 1, which is what 0
 * says. A read-only open of a version-1 store reads rate_exp 0 (s->v1_slices).
 *
 * Schema (version 2):
 *   meta(key PRIMARY KEY, value)  schema_version, slice_count, slice_bytes
 *   traces(trace_lo, trace_hi PRIMARY KEY, ...; index on closed_ns; the selection
 *          columns score, pattern, group_key, group_api, weight are NULL until
 *          selection kept the trace). Those five were added after version 1
 *          shipped: a writable open of a store without them adds them (ALTER
 *          TABLE .. ADD COLUMN, nullable, so older builds still read and write
 *          the file and the version stays 1); a read-only open of such a store
 *          reads NULLs in their place. The arrays
 *          trigger_ids / agents / missing are decimal text "1,2,3" ("" if empty),
 *          so the trigger filter is instr(',' || trigger_ids || ',', ',7,').
 *          The key is (lo, hi) so that a short id (lo alone) is an index lookup.
 *   slices(rowid; UNIQUE(trace_lo, agent_id, slice_seq) is both the idempotency
 *          key and the lookup by trace; index on received_ns for orphan
 *          retention; rate_exp (version 2); msg BLOB is the last column of the
 *          version-1 table so scans skip it — a migrated table has rate_exp
 *          after it, which only costs a migrated row's scan).
 *   agents(agent_id PRIMARY KEY, ...)
 *   triggers(agent_id, trigger_seq PRIMARY KEY, received_ns, msg BLOB, done,
 *          done_ns; partial index on received_ns of the pending ones).
 *
 * Integers: every uint64 is stored as (int64_t) and read back as (uint64_t), an
 * exact round trip. Where SQL must compare or sort a uint64 (closed_ns,
 * received_ns, slice_seq) an unsigned range is split into at most two signed
 * ranges ([0, INT64_MAX] then [INT64_MIN, -1]) so that the order stays unsigned
 * and the indexes still serve.
 *
 * Statements are prepared once at open and reused; a walk whose statement is
 * already running (a callback that walks again) prepares a private copy.
 *
 * Transactions: rt_store_begin is BEGIN IMMEDIATE, so the write lock is taken up
 * front and a second writer fails at begin (RT_STORE_E_BUSY), never mid-batch.
 * put_slice is a single INSERT .. ON CONFLICT DO NOTHING: no row changed means the
 * key is already stored (RT_STORE_DUPLICATE). The slice totals for stats and
 * size retention live in meta; a transaction loads them at begin, counts in
 * memory and writes them back just before COMMIT, so a slice costs one
 * statement. Writes other than put_slice also work outside a transaction:
 * single statements autocommit, multi-statement ones take an internal
 * transaction. rt_store_close rolls back a transaction left open.
 *
 * Retention walks the oldest closed traces in batches through the closed_ns
 * index, deleting each with its slices while it is older than the age cut-off
 * or the slices' payload bytes are over max_bytes; then orphan slices (no trace
 * row) received before the age cut-off, then done triggers received before the
 * cut-off (1 h without max_age). Freed pages are reused; the file does not
 * shrink.
 *
 * A writable open creates a missing file itself, 0600 (0640 with a group when
 * the options name one), before SQLite opens it: SQLite would create it 0644
 * (less the umask), readable by every local user, and gives its -wal and -shm
 * files the main file's mode.
 *
 * A handle is not thread-safe: one thread at a time uses it.
 */
#include "backend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>
#include <sqlite3.h>

#define SCHEMA_VERSION 2
#define APP_ID 0x52545243 /* "RTRC" */
#define BUSY_TIMEOUT_MS 5000
#define RETAIN_BATCH 128
#define TRIGGER_KEEP_NS (3600ull * 1000000000ull)

enum st {
	ST_BEGIN, ST_COMMIT, ST_ROLLBACK,
	ST_META_GET, ST_META_SET,
	ST_SLICE_PUT, ST_SLICE_WALK, ST_SLICE_DEL_TRACE, ST_SLICE_DEL_ORPHAN, ST_SLICE_RATES,
	ST_TRACE_PUT, ST_TRACE_GET, ST_TRACE_LIST, ST_TRACE_OLDEST, ST_TRACE_DEL,
	ST_TRACE_SELECT,
	ST_LATE_GET, ST_LATE_SET,
	ST_AGENT_PUT, ST_AGENT_DEL, ST_AGENT_LIST,
	ST_TRIG_PUT, ST_TRIG_DONE, ST_TRIG_PENDING, ST_TRIG_DEL_DONE,
	ST_STATS,
	ST_N
};

#define TRACE_COLS                                                              \
	"trace_hi, trace_lo, group_id, trigger_ids, agents, missing, coherent, " \
	"first_ns, last_ns, bytes, slices, late_slices, triggered_ns, closed_ns, " \
	"traversal_ns"
/* Read after TRACE_COLS; a store from before selection has NULLs in their place. */
#define SELECTION_COLS ", score, pattern, group_key, group_api, weight"
#define SELECTION_NULLS ", NULL, NULL, NULL, NULL, NULL"
#define SLICE_COLS_OF(rate)                                                \
	"trace_hi, trace_lo, agent_id, trigger_id, slice_seq, received_ns, " \
	"buffers, bytes, first_ns, last_ns, late, " rate ", msg"
#define SLICE_COLS SLICE_COLS_OF("rate_exp")
#define SLICE_WALK_SQL(rate)                                                 \
	"SELECT " SLICE_COLS_OF(rate) " FROM slices "                        \
	"WHERE trace_lo = ?1 AND (?2 = 0 OR trace_hi = ?2) "                 \
	"ORDER BY agent_id, slice_seq < 0, slice_seq"
#define SLICE_RATES_SQL(rate)                                                \
	"SELECT agent_id, max(" rate ") FROM slices "                        \
	"WHERE trace_lo = ?1 AND (?2 = 0 OR trace_hi = ?2) "                 \
	"GROUP BY agent_id ORDER BY agent_id"

static const char *const sql_text[ST_N] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_META_GET] = "SELECT value FROM meta WHERE key = ?1",
	[ST_META_SET] = "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)",
	[ST_SLICE_PUT] = "INSERT INTO slices(" SLICE_COLS ") "
			 "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) "
			 "ON CONFLICT DO NOTHING",
	[ST_SLICE_WALK] = SLICE_WALK_SQL("rate_exp"),
	[ST_SLICE_RATES] = SLICE_RATES_SQL("rate_exp"),
	[ST_SLICE_DEL_TRACE] = "DELETE FROM slices WHERE trace_lo = ?1 AND trace_hi = ?2 "
			       "RETURNING bytes",
	[ST_SLICE_DEL_ORPHAN] = "DELETE FROM slices WHERE received_ns BETWEEN ?1 AND ?2 "
				"AND NOT EXISTS (SELECT 1 FROM traces t WHERE "
				"t.trace_lo = slices.trace_lo AND t.trace_hi = slices.trace_hi) "
				"RETURNING bytes",
	[ST_TRACE_PUT] = "INSERT OR REPLACE INTO traces(" TRACE_COLS ") VALUES(?1, ?2, ?3, "
			 "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
#define TRACE_GET_SQL(sel)                                                           \
	"SELECT " TRACE_COLS sel " FROM traces "                                     \
	"WHERE trace_lo = ?1 AND (?2 = 0 OR trace_hi = ?2) "                         \
	"ORDER BY trace_hi = ?2 DESC, closed_ns < 0 DESC, closed_ns DESC LIMIT 1"
#define TRACE_LIST_SQL(sel)                                                          \
	"SELECT " TRACE_COLS sel " FROM traces "                                     \
	"WHERE closed_ns BETWEEN ?1 AND ?2 "                                         \
	"AND (?3 IS NULL OR instr(',' || trigger_ids || ',', ?3) > 0) "              \
	"AND (?4 = 0 OR coherent = 0) "                                              \
	"ORDER BY closed_ns DESC, trace_lo DESC, trace_hi DESC LIMIT ?5"
	[ST_TRACE_GET] = TRACE_GET_SQL(SELECTION_COLS),
	[ST_TRACE_LIST] = TRACE_LIST_SQL(SELECTION_COLS),
	[ST_TRACE_OLDEST] = "SELECT trace_hi, trace_lo, closed_ns FROM traces "
			    "WHERE closed_ns BETWEEN ?1 AND ?2 "
			    "ORDER BY closed_ns, trace_lo, trace_hi LIMIT ?3",
	[ST_TRACE_DEL] = "DELETE FROM traces WHERE trace_lo = ?1 AND trace_hi = ?2",
	[ST_TRACE_SELECT] = "UPDATE traces SET score = ?3, pattern = ?4, group_key = ?5, "
			    "group_api = ?6, weight = ?7 WHERE trace_lo = ?1 AND trace_hi = ?2",
	[ST_LATE_GET] = "SELECT bytes, slices, late_slices, first_ns, last_ns FROM traces "
			"WHERE trace_lo = ?1 AND trace_hi = ?2",
	[ST_LATE_SET] = "UPDATE traces SET bytes = ?3, slices = ?4, late_slices = ?5, "
			"first_ns = ?6, last_ns = ?7 WHERE trace_lo = ?1 AND trace_hi = ?2",
	[ST_AGENT_PUT] = "INSERT OR REPLACE INTO agents(agent_id, pid, host, control_addr, "
			 "start_ns, last_seen_ns) VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
	[ST_AGENT_DEL] = "DELETE FROM agents WHERE agent_id = ?1",
	[ST_AGENT_LIST] = "SELECT agent_id, pid, host, control_addr, start_ns, last_seen_ns "
			  "FROM agents ORDER BY agent_id",
	[ST_TRIG_PUT] = "INSERT INTO triggers(agent_id, trigger_seq, received_ns, msg, done, "
			"done_ns) VALUES(?1, ?2, ?3, ?4, 0, 0) ON CONFLICT DO NOTHING",
	[ST_TRIG_DONE] = "UPDATE triggers SET done_ns = CASE WHEN done THEN done_ns ELSE ?3 END, "
			 "done = 1 WHERE agent_id = ?1 AND trigger_seq = ?2",
	[ST_TRIG_PENDING] = "SELECT agent_id, trigger_seq, received_ns, msg FROM triggers "
			    "WHERE done = 0 "
			    "ORDER BY received_ns < 0, received_ns, agent_id, trigger_seq",
	[ST_TRIG_DEL_DONE] = "DELETE FROM triggers WHERE done <> 0 "
			     "AND received_ns BETWEEN ?1 AND ?2",
	[ST_STATS] = "SELECT (SELECT count(*) FROM traces), "
		     "(SELECT count(*) FROM traces WHERE coherent <> 0), "
		     "(SELECT count(*) FROM triggers WHERE done = 0), "
		     "(SELECT count(*) FROM agents), "
		     "(SELECT value FROM meta WHERE key = 'slice_count'), "
		     "(SELECT value FROM meta WHERE key = 'slice_bytes')",
};

/* The statements that differ on a read-only store from before the selection columns. */
static const char *const legacy_text[ST_N] = {
	[ST_TRACE_GET] = TRACE_GET_SQL(SELECTION_NULLS),
	[ST_TRACE_LIST] = TRACE_LIST_SQL(SELECTION_NULLS),
	[ST_TRACE_SELECT] = "SELECT 1", /* never run: a read-only handle refuses writes */
};

/* The statements that differ on a read-only version-1 store (no slices.rate_exp). */
static const char *const v1_text[ST_N] = {
	[ST_SLICE_PUT] = "SELECT 1", /* never run: a read-only handle refuses writes */
	[ST_SLICE_WALK] = SLICE_WALK_SQL("0"),
	[ST_SLICE_RATES] = SLICE_RATES_SQL("0"),
};

#define TRIGGER_NAMES_SQL                                                              \
	"CREATE TABLE IF NOT EXISTS trigger_names(trigger_id INTEGER PRIMARY KEY,"      \
	" name TEXT NOT NULL, seen_ns INTEGER NOT NULL)"

static const char schema_sql[] =
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
	"CREATE TABLE traces("
	" trace_lo INTEGER NOT NULL, trace_hi INTEGER NOT NULL,"
	" group_id INTEGER NOT NULL,"
	" trigger_ids TEXT NOT NULL, agents TEXT NOT NULL, missing TEXT NOT NULL,"
	" coherent INTEGER NOT NULL,"
	" first_ns INTEGER NOT NULL, last_ns INTEGER NOT NULL,"
	" bytes INTEGER NOT NULL, slices INTEGER NOT NULL, late_slices INTEGER NOT NULL,"
	" triggered_ns INTEGER NOT NULL, closed_ns INTEGER NOT NULL,"
	" traversal_ns INTEGER NOT NULL,"
	" score REAL, pattern INTEGER, group_key INTEGER, group_api TEXT, weight REAL,"
	" PRIMARY KEY (trace_lo, trace_hi));"
	"CREATE INDEX traces_closed ON traces(closed_ns);"
	"CREATE TABLE slices("
	" id INTEGER PRIMARY KEY,"
	" trace_lo INTEGER NOT NULL, trace_hi INTEGER NOT NULL,"
	" agent_id INTEGER NOT NULL, slice_seq INTEGER NOT NULL,"
	" trigger_id INTEGER NOT NULL, received_ns INTEGER NOT NULL,"
	" buffers INTEGER NOT NULL, bytes INTEGER NOT NULL,"
	" first_ns INTEGER NOT NULL, last_ns INTEGER NOT NULL, late INTEGER NOT NULL,"
	" rate_exp INTEGER NOT NULL DEFAULT 0,"
	" msg BLOB NOT NULL,"
	" UNIQUE (trace_lo, agent_id, slice_seq));"
	"CREATE INDEX slices_received ON slices(received_ns);"
	"CREATE TABLE agents("
	" agent_id INTEGER PRIMARY KEY, pid INTEGER NOT NULL,"
	" host TEXT NOT NULL, control_addr TEXT NOT NULL,"
	" start_ns INTEGER NOT NULL, last_seen_ns INTEGER NOT NULL);"
	"CREATE TABLE triggers("
	" agent_id INTEGER NOT NULL, trigger_seq INTEGER NOT NULL,"
	" received_ns INTEGER NOT NULL, msg BLOB NOT NULL,"
	" done INTEGER NOT NULL DEFAULT 0, done_ns INTEGER NOT NULL DEFAULT 0,"
	" PRIMARY KEY (agent_id, trigger_seq));"
	"CREATE INDEX triggers_pending ON triggers(received_ns) WHERE done = 0;"
	"INSERT INTO meta(key, value) VALUES('slice_count', 0), ('slice_bytes', 0);";

struct sqlite_store {
	struct rt_store base;     /* first: the handle the interface hands out */
	sqlite3 *db;
	char *path;
	int readonly;
	int legacy;             /* read-only store without the selection columns */
	int v1_slices;          /* read-only version-1 store: no slices.rate_exp */
	int64_t version;        /* schema_version found at open (0: fresh) */
	uint64_t opt_max_age;   /* retention options */
	uint64_t opt_max_bytes;
	int in_txn;
	int tot_dirty;          /* totals changed in this transaction */
	uint64_t tot_slices;    /* valid while in_txn */
	uint64_t tot_bytes;
	sqlite3_stmt *st[ST_N];
	char err[512];
	/* background checkpointer (background_checkpoint) */
	int ckpt_on;
	pthread_t ckpt_thread;
	pthread_mutex_t ckpt_mu;
	pthread_cond_t ckpt_cv;   /* CLOCK_MONOTONIC */
	int ckpt_stop;            /* under ckpt_mu */
	sqlite3 *ckpt_db;         /* the thread's own connection */
	_Atomic uint64_t ckpt_runs, ckpt_errors, ckpt_max_ns; /* figures: relaxed */
};

/* The failure of an open that returned no handle, for rt_store_errmsg(NULL). */
static _Thread_local char open_err[512];

/* ------------------------------------------------------------ errors ---- */

static int seterr(struct sqlite_store *s, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int seterr(struct sqlite_store *s, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s ? s->err : open_err, s ? sizeof s->err : sizeof open_err, fmt, ap);
	va_end(ap);
	return code;
}

static int map_sqlite(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return RT_STORE_E_BUSY;
	case SQLITE_READONLY:
		return RT_STORE_E_READONLY;
	case SQLITE_NOTADB:
	case SQLITE_CANTOPEN:
		return RT_STORE_E_OPEN;
	case SQLITE_TOOBIG:
	case SQLITE_RANGE:
	case SQLITE_MISUSE:
		return RT_STORE_E_INVAL;
	default:
		return RT_STORE_E_IO;
	}
}

/* A failed SQLite call: the code it maps to, with SQLite's text. */
static int sqerr(struct sqlite_store *s, int rc, const char *what)
{
	return seterr(s, map_sqlite(rc), "%s: %s: %s", s->path, what,
		      s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
}

static int readonly_err(struct sqlite_store *s, const char *what)
{
	return seterr(s, RT_STORE_E_READONLY, "%s: %s: the store is open read-only", s->path,
		      what);
}

static const char *sqlite_store_errmsg(const struct sqlite_store *s)
{
	return s ? s->err : open_err;
}

static const char *sqlite_store_path(const struct sqlite_store *s)
{
	return s ? s->path : NULL;
}

/* ----------------------------------------------------------- helpers ---- */

static inline void bind_u64(sqlite3_stmt *st, int i, uint64_t v)
{
	sqlite3_bind_int64(st, i, (sqlite3_int64)(int64_t)v);
}

static inline uint64_t col_u64(sqlite3_stmt *st, int i)
{
	return (uint64_t)sqlite3_column_int64(st, i);
}

static inline uint32_t col_u32(sqlite3_stmt *st, int i)
{
	return (uint32_t)sqlite3_column_int64(st, i);
}

static inline void finish(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* Step a statement that returns no rows (or whose rows are ignored). */
static int run(struct sqlite_store *s, sqlite3_stmt *st, const char *what)
{
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	finish(st);
	return rc == SQLITE_DONE ? 0 : sqerr(s, rc, what);
}

/* The SQL of a statement for this store's columns. */
static const char *stmt_sql(const struct sqlite_store *s, int id)
{
	if (s->v1_slices && v1_text[id])
		return v1_text[id];
	return s->legacy && legacy_text[id] ? legacy_text[id] : sql_text[id];
}

/* The statement for a walk: the shared one, or a private copy if it is running. */
static sqlite3_stmt *walk_stmt(struct sqlite_store *s, enum st id, int *priv)
{
	sqlite3_stmt *st = s->st[id];
	int rc;
	*priv = 0;
	if (!sqlite3_stmt_busy(st))
		return st;
	rc = sqlite3_prepare_v2(s->db, stmt_sql(s, id), -1, &st, NULL);
	if (rc != SQLITE_OK) {
		sqerr(s, rc, "prepare");
		return NULL;
	}
	*priv = 1;
	return st;
}

static void walk_done(sqlite3_stmt *st, int priv)
{
	if (priv)
		sqlite3_finalize(st);
	else
		finish(st);
}

/*
 * The unsigned range [a, b] as at most two signed ranges, in ascending unsigned
 * order. Returns how many (0 if a > b).
 */
static int signed_ranges(uint64_t a, uint64_t b, int64_t lo[2], int64_t hi[2])
{
	const uint64_t top = (uint64_t)INT64_MAX;
	if (a > b)
		return 0;
	if (b <= top || a > top) {
		lo[0] = (int64_t)a;
		hi[0] = (int64_t)b;
		return 1;
	}
	lo[0] = (int64_t)a;
	hi[0] = INT64_MAX;
	lo[1] = INT64_MIN;
	hi[1] = (int64_t)b;
	return 2;
}

static uint64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* "1,2,3" from n values; cap is enough for RT_STORE_MAX_AGENTS values. */
#define U32LIST_CAP (RT_STORE_MAX_AGENTS * 11 + 1)

static void enc_u32s(char *buf, const uint32_t *v, uint32_t n)
{
	size_t off = 0;
	buf[0] = 0;
	for (uint32_t i = 0; i < n; i++)
		off += (size_t)snprintf(buf + off, U32LIST_CAP - off, i ? ",%u" : "%u", v[i]);
}

static int dec_u32s(const unsigned char *t, uint32_t *v, uint32_t max, uint32_t *n)
{
	*n = 0;
	if (!t || !*t)
		return 0;
	for (;;) {
		uint64_t x = 0;
		int digits = 0;
		while (*t >= '0' && *t <= '9') {
			x = x * 10 + (uint64_t)(*t++ - '0');
			if (++digits > 10 || x > UINT32_MAX)
				return -1;
		}
		if (!digits || *n >= max)
			return -1;
		v[(*n)++] = (uint32_t)x;
		if (!*t)
			return 0;
		if (*t++ != ',')
			return -1;
	}
}

static int row_to_trace(struct sqlite_store *s, sqlite3_stmt *st, struct rt_store_trace *t)
{
	memset(t, 0, sizeof *t);
	t->trace_hi = col_u64(st, 0);
	t->trace_lo = col_u64(st, 1);
	t->group_id = col_u64(st, 2);
	if (dec_u32s(sqlite3_column_text(st, 3), t->trigger_ids, RT_STORE_MAX_TRIGGERS,
		     &t->trigger_count) ||
	    dec_u32s(sqlite3_column_text(st, 4), t->agents, RT_STORE_MAX_AGENTS,
		     &t->agent_count) ||
	    dec_u32s(sqlite3_column_text(st, 5), t->missing, RT_STORE_MAX_AGENTS,
		     &t->missing_count))
		return seterr(s, RT_STORE_E_IO, "%s: trace %016llx%016llx: corrupt id list",
			      s->path, (unsigned long long)t->trace_hi,
			      (unsigned long long)t->trace_lo);
	t->coherent = sqlite3_column_int(st, 6) != 0;
	t->first_ns = col_u64(st, 7);
	t->last_ns = col_u64(st, 8);
	t->bytes = col_u64(st, 9);
	t->slices = col_u32(st, 10);
	t->late_slices = col_u32(st, 11);
	t->triggered_ns = col_u64(st, 12);
	t->closed_ns = col_u64(st, 13);
	t->traversal_ns = col_u64(st, 14);
	t->has_selection = sqlite3_column_type(st, 19) != SQLITE_NULL;
	if (t->has_selection) {
		const unsigned char *g = sqlite3_column_text(st, 18);
		t->score = sqlite3_column_double(st, 15);
		t->pattern = col_u64(st, 16);
		t->group_key = col_u64(st, 17);
		snprintf(t->group, sizeof t->group, "%s", g ? (const char *)g : "");
		t->weight = sqlite3_column_double(st, 19);
	}
	return 0;
}

static void row_to_slice(sqlite3_stmt *st, struct rt_store_slice *sl)
{
	static const unsigned char empty[1];
	memset(sl, 0, sizeof *sl);
	sl->trace_hi = col_u64(st, 0);
	sl->trace_lo = col_u64(st, 1);
	sl->agent_id = col_u32(st, 2);
	sl->trigger_id = col_u32(st, 3);
	sl->slice_seq = col_u64(st, 4);
	sl->received_ns = col_u64(st, 5);
	sl->buffers = col_u32(st, 6);
	sl->bytes = col_u64(st, 7);
	sl->first_ns = col_u64(st, 8);
	sl->last_ns = col_u64(st, 9);
	sl->late = sqlite3_column_int(st, 10) != 0;
	sl->rate_exp = col_u32(st, 11);
	sl->msg = sqlite3_column_blob(st, 12);
	sl->msg_len = (size_t)sqlite3_column_bytes(st, 12);
	if (!sl->msg)
		sl->msg = empty;
}

static int bind_blob(sqlite3_stmt *st, int i, const void *p, size_t len)
{
	if (!len)
		return sqlite3_bind_zeroblob(st, i, 0);
	return sqlite3_bind_blob64(st, i, p, (sqlite3_uint64)len, SQLITE_STATIC);
}

/* ------------------------------------------------------ transactions ---- */

static int meta_get(struct sqlite_store *s, const char *key, uint64_t *v)
{
	sqlite3_stmt *st = s->st[ST_META_GET];
	int rc;
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*v = col_u64(st, 0);
	finish(st);
	if (rc == SQLITE_ROW)
		return 0;
	if (rc == SQLITE_DONE)
		return seterr(s, RT_STORE_E_IO, "%s: meta has no %s", s->path, key);
	return sqerr(s, rc, "read meta");
}

static int meta_set(struct sqlite_store *s, const char *key, uint64_t v)
{
	sqlite3_stmt *st = s->st[ST_META_SET];
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	bind_u64(st, 2, v);
	return run(s, st, "write meta");
}

static void raw_rollback(struct sqlite_store *s)
{
	if (!sqlite3_get_autocommit(s->db)) {
		int rc = sqlite3_step(s->st[ST_ROLLBACK]);
		finish(s->st[ST_ROLLBACK]);
		(void)rc;
	}
}

static int sqlite_store_begin(struct sqlite_store *s)
{
	int rc;
	if (!s)
		return RT_STORE_E_INVAL;
	if (s->readonly)
		return readonly_err(s, "begin");
	if (s->in_txn)
		return seterr(s, RT_STORE_E_INVAL, "%s: begin: a transaction is already open",
			      s->path);
	rc = run(s, s->st[ST_BEGIN], "begin");
	if (rc)
		return rc;
	if ((rc = meta_get(s, "slice_count", &s->tot_slices)) ||
	    (rc = meta_get(s, "slice_bytes", &s->tot_bytes))) {
		raw_rollback(s);
		return rc;
	}
	s->in_txn = 1;
	s->tot_dirty = 0;
	return 0;
}

static int sqlite_store_commit(struct sqlite_store *s)
{
	int rc;
	if (!s)
		return RT_STORE_E_INVAL;
	if (s->readonly)
		return readonly_err(s, "commit");
	if (!s->in_txn)
		return seterr(s, RT_STORE_E_INVAL, "%s: commit: no open transaction", s->path);
	if (sqlite3_get_autocommit(s->db)) {
		/* SQLite rolled back on an earlier error (disk full, I/O). */
		s->in_txn = 0;
		s->tot_dirty = 0;
		return seterr(s, RT_STORE_E_IO,
			      "%s: commit: the transaction was rolled back by an earlier error",
			      s->path);
	}
	if (s->tot_dirty && ((rc = meta_set(s, "slice_count", s->tot_slices)) ||
			     (rc = meta_set(s, "slice_bytes", s->tot_bytes)))) {
		raw_rollback(s);
		s->in_txn = 0;
		s->tot_dirty = 0;
		return rc;
	}
	rc = sqlite3_step(s->st[ST_COMMIT]);
	finish(s->st[ST_COMMIT]);
	if (rc == SQLITE_DONE) {
		s->in_txn = 0;
		s->tot_dirty = 0;
		return 0;
	}
	rc = sqerr(s, rc, "commit");
	if (rc == RT_STORE_E_BUSY && !sqlite3_get_autocommit(s->db))
		return rc; /* still open: the caller may retry the commit or roll back */
	raw_rollback(s);
	s->in_txn = 0;
	s->tot_dirty = 0;
	return rc;
}

static void sqlite_store_rollback(struct sqlite_store *s)
{
	if (!s || !s->in_txn)
		return;
	raw_rollback(s);
	s->in_txn = 0;
	s->tot_dirty = 0;
}

/* For a write of several statements: its own transaction unless one is open. */
static int txn_enter(struct sqlite_store *s, int *own)
{
	int rc;
	*own = 0;
	if (s->in_txn)
		return 0;
	rc = sqlite_store_begin(s);
	if (!rc)
		*own = 1;
	return rc;
}

static int txn_leave(struct sqlite_store *s, int own, int rc)
{
	int c;
	if (!own)
		return rc;
	if (rc < 0) {
		sqlite_store_rollback(s);
		return rc;
	}
	c = sqlite_store_commit(s);
	return c ? c : rc;
}

/* -------------------------------------------------------------- open ---- */

#define CKPT_EVERY_NS 200000000ull

static int exec_sql(struct sqlite_store *s, const char *sql, const char *what);

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *checkpointer(void *arg)
{
	struct sqlite_store *s = arg;
	pthread_mutex_lock(&s->ckpt_mu);
	while (!s->ckpt_stop) {
		uint64_t due = mono_ns() + CKPT_EVERY_NS, t0, dt;
		struct timespec ts = { (time_t)(due / 1000000000ull), (long)(due % 1000000000ull) };
		int rc, nlog = 0, ndone = 0;
		pthread_cond_timedwait(&s->ckpt_cv, &s->ckpt_mu, &ts);
		if (s->ckpt_stop)
			break;
		pthread_mutex_unlock(&s->ckpt_mu);
		t0 = mono_ns();
		rc = sqlite3_wal_checkpoint_v2(s->ckpt_db, NULL, SQLITE_CHECKPOINT_PASSIVE, &nlog,
					       &ndone);
		dt = mono_ns() - t0;
		/* BUSY: another checkpoint is running (none of ours): not an error. A
		 * checkpoint that saw no WAL (-1 frames) did nothing: count it as one. */
		if (rc == SQLITE_OK && nlog < 0)
			rc = SQLITE_ERROR;
		atomic_fetch_add_explicit(rc == SQLITE_OK || rc == SQLITE_BUSY ? &s->ckpt_runs : &s->ckpt_errors,
				   1, memory_order_relaxed);
		if (dt > atomic_load_explicit(&s->ckpt_max_ns, memory_order_relaxed))
			atomic_store_explicit(&s->ckpt_max_ns, dt, memory_order_relaxed);
		pthread_mutex_lock(&s->ckpt_mu);
	}
	pthread_mutex_unlock(&s->ckpt_mu);
	return NULL;
}

/* Automatic checkpoints off on the writer; the thread and its connection on. */
static int start_checkpointer(struct sqlite_store *s)
{
	pthread_condattr_t ca;
	/* When the WAL restarts after a checkpoint caught up, its file is cut back
	 * to 64 MiB: between checkpoints (which may take seconds on a busy disk) it
	 * grows past what the 1000-page automatic checkpoints let it reach. */
	int rc = exec_sql(s, "PRAGMA wal_autocheckpoint=0; PRAGMA journal_size_limit=67108864",
			  "turn automatic checkpoints off");
	if (rc)
		return rc;
	rc = sqlite3_open_v2(s->path, &s->ckpt_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK)
		return seterr(s, RT_STORE_E_OPEN, "%s: checkpoint connection: %s", s->path,
			      s->ckpt_db ? sqlite3_errmsg(s->ckpt_db) : sqlite3_errstr(rc));
	sqlite3_busy_timeout(s->ckpt_db, BUSY_TIMEOUT_MS);
	/* A connection that has not read the file yet does not know it is in WAL
	 * mode, and its checkpoints do nothing (they report -1 frames). */
	rc = sqlite3_exec(s->ckpt_db, "PRAGMA journal_mode", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return seterr(s, RT_STORE_E_OPEN, "%s: checkpoint connection: %s", s->path,
			      sqlite3_errmsg(s->ckpt_db));
	pthread_mutex_init(&s->ckpt_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->ckpt_cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&s->ckpt_thread, NULL, checkpointer, s) != 0) {
		pthread_cond_destroy(&s->ckpt_cv);
		pthread_mutex_destroy(&s->ckpt_mu);
		return seterr(s, RT_STORE_E_OPEN, "%s: cannot start the checkpoint thread", s->path);
	}
	s->ckpt_on = 1;
	return 0;
}

static void stop_checkpointer(struct sqlite_store *s)
{
	if (s->ckpt_on) {
		pthread_mutex_lock(&s->ckpt_mu);
		s->ckpt_stop = 1;
		pthread_cond_signal(&s->ckpt_cv);
		pthread_mutex_unlock(&s->ckpt_mu);
		pthread_join(s->ckpt_thread, NULL);
		pthread_cond_destroy(&s->ckpt_cv);
		pthread_mutex_destroy(&s->ckpt_mu);
		s->ckpt_on = 0;
	}
	if (s->ckpt_db)
		sqlite3_close(s->ckpt_db);
	s->ckpt_db = NULL;
}

static void free_store(struct sqlite_store *s)
{
	if (!s)
		return;
	stop_checkpointer(s);
	for (int i = 0; i < ST_N; i++)
		sqlite3_finalize(s->st[i]);
	if (s->db)
		sqlite3_close(s->db);
	free(s->path);
	free(s);
}

/* A failed open: the message goes to the thread's open error, no handle. */
static int open_fail(struct sqlite_store *s, int rc)
{
	snprintf(open_err, sizeof open_err, "%s", s->err);
	free_store(s);
	return rc;
}

static int exec_sql(struct sqlite_store *s, const char *sql, const char *what)
{
	char *msg = NULL;
	int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK) {
		int code = seterr(s, map_sqlite(rc), "%s: %s: %s", s->path, what,
				  msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		return code;
	}
	return 0;
}

/* One integer from a one-row query; SQLite's result code. */
static int query_int(struct sqlite_store *s, const char *sql, int64_t *v)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*v = sqlite3_column_int64(st, 0);
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		rc = SQLITE_NOTFOUND;
	}
	sqlite3_finalize(st);
	return rc;
}

static int not_ours(struct sqlite_store *s, const char *why)
{
	return seterr(s, RT_STORE_E_OPEN, "%s: not a retrace store (%s)", s->path, why);
}

/*
 * Is the file a retrace store? *fresh = 1 for an empty database (no schema at
 * all), which a writable open initialises. Reads only.
 */
static int check_format(struct sqlite_store *s, int *fresh)
{
	int64_t n = 0, app = 0, ver = 0;
	int rc;
	*fresh = 0;
	rc = query_int(s, "SELECT count(*) FROM sqlite_schema", &n);
	if ((rc & 0xff) == SQLITE_NOTADB)
		return not_ours(s, "not an SQLite database");
	if (rc != SQLITE_OK)
		return sqerr(s, rc, "read schema");
	if (n == 0) {
		*fresh = 1;
		return 0;
	}
	rc = query_int(s, "PRAGMA application_id", &app);
	if (rc != SQLITE_OK)
		return sqerr(s, rc, "read application_id");
	if (app != APP_ID)
		return not_ours(s, "foreign application id");
	rc = query_int(s, "SELECT value FROM meta WHERE key = 'schema_version'", &ver);
	if (rc == SQLITE_NOTFOUND)
		return not_ours(s, "no schema version");
	if ((rc & 0xff) == SQLITE_ERROR) /* no meta table, or not ours */
		return not_ours(s, sqlite3_errmsg(s->db));
	if (rc != SQLITE_OK)
		return sqerr(s, rc, "read schema version");
	if (ver > SCHEMA_VERSION)
		return seterr(s, RT_STORE_E_SCHEMA,
			      "%s: schema version %lld is newer than this build's (%d)", s->path,
			      (long long)ver, SCHEMA_VERSION);
	if (ver < 1)
		return seterr(s, RT_STORE_E_SCHEMA, "%s: unknown schema version %lld", s->path,
			      (long long)ver);
	s->version = ver;
	return 0;
}

static int create_schema(struct sqlite_store *s, int *raced)
{
	char sql[128];
	int64_t n = 0;
	int rc;
	*raced = 0;
	rc = exec_sql(s, "BEGIN IMMEDIATE", "create schema");
	if (rc)
		return rc;
	/* Another process may have created it since we looked. */
	rc = query_int(s, "SELECT count(*) FROM sqlite_schema", &n);
	if (rc != SQLITE_OK) {
		rc = sqerr(s, rc, "create schema");
		goto fail;
	}
	if (n) {
		*raced = 1;
		exec_sql(s, "ROLLBACK", "create schema");
		return 0;
	}
	snprintf(sql, sizeof sql,
		 "PRAGMA application_id = %d;"
		 "INSERT INTO meta(key, value) VALUES('schema_version', %d);",
		 APP_ID, SCHEMA_VERSION);
	if ((rc = exec_sql(s, schema_sql, "create schema")) ||
	    (rc = exec_sql(s, sql, "create schema")) ||
	    (rc = exec_sql(s, "COMMIT", "create schema")))
		goto fail;
	return 0;
fail:
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

/* Does slices have a rate_exp column? 1, 0, or an error. */
static int has_rate_col(struct sqlite_store *s)
{
	int64_t n = 0;
	int rc = query_int(s, "SELECT count(*) FROM pragma_table_info('slices') "
			      "WHERE name = 'rate_exp'", &n);
	if (rc != SQLITE_OK)
		return sqerr(s, rc, "read the slices columns");
	return n > 0;
}

/*
 * Version 1 -> 2: slices.rate_exp, 0 for every stored slice (all were sent at
 * rate 1). A read-only open reads 0 in its place instead (s->v1_slices).
 */
static int migrate_v1(struct sqlite_store *s)
{
	int rc;
	if (s->version != 1)
		return 0;
	if (s->readonly) {
		if ((rc = has_rate_col(s)) < 0)
			return rc;
		s->v1_slices = !rc;
		return 0;
	}
	if ((rc = exec_sql(s, "BEGIN IMMEDIATE", "migrate to schema version 2")))
		return rc;
	if ((rc = has_rate_col(s)) < 0) /* another writer may have migrated it */
		goto fail;
	if (!rc && (rc = exec_sql(s, "ALTER TABLE slices ADD COLUMN rate_exp INTEGER "
				     "NOT NULL DEFAULT 0", "migrate to schema version 2")))
		goto fail;
	if ((rc = exec_sql(s, "UPDATE meta SET value = 2 WHERE key = 'schema_version'",
			   "migrate to schema version 2")) ||
	    (rc = exec_sql(s, "COMMIT", "migrate to schema version 2")))
		goto fail;
	s->version = 2;
	return 0;
fail:
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

/* The selection columns of traces, added after version 1 shipped. */
static const char *const selection_cols[][2] = {
	{ "score", "REAL" },       { "pattern", "INTEGER" }, { "group_key", "INTEGER" },
	{ "group_api", "TEXT" },   { "weight", "REAL" },
};
#define N_SELECTION_COLS (sizeof selection_cols / sizeof selection_cols[0])

/* Which selection columns traces has (present[i] for selection_cols[i]). */
static int find_selection_cols(struct sqlite_store *s, int present[N_SELECTION_COLS])
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->db, "PRAGMA table_info(traces)", -1, &st, NULL);
	memset(present, 0, N_SELECTION_COLS * sizeof *present);
	if (rc != SQLITE_OK)
		return sqerr(s, rc, "read the traces columns");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 1);
		for (size_t i = 0; name && i < N_SELECTION_COLS; i++)
			if (!strcmp(name, selection_cols[i][0]))
				present[i] = 1;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : sqerr(s, rc, "read the traces columns");
}

/*
 * A store written before selection existed: a writable open adds the columns
 * (nullable, so older builds keep working on the file); a read-only one reads
 * NULLs in their place (s->legacy).
 */
static int upgrade_selection_cols(struct sqlite_store *s)
{
	int present[N_SELECTION_COLS], rc, missing = 0;
	char sql[128];
	if ((rc = find_selection_cols(s, present)))
		return rc;
	for (size_t i = 0; i < N_SELECTION_COLS; i++)
		missing += !present[i];
	if (!missing)
		return 0;
	if (s->readonly) {
		s->legacy = 1;
		return 0;
	}
	if ((rc = exec_sql(s, "BEGIN IMMEDIATE", "add selection columns")))
		return rc;
	if ((rc = find_selection_cols(s, present))) /* another writer may have added them */
		goto fail;
	for (size_t i = 0; i < N_SELECTION_COLS; i++) {
		if (present[i])
			continue;
		snprintf(sql, sizeof sql, "ALTER TABLE traces ADD COLUMN %s %s", selection_cols[i][0],
			 selection_cols[i][1]);
		if ((rc = exec_sql(s, sql, "add selection columns")))
			goto fail;
	}
	if ((rc = exec_sql(s, "COMMIT", "add selection columns")))
		goto fail;
	return 0;
fail:
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

static int set_wal(struct sqlite_store *s)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return sqerr(s, rc, "set WAL mode");
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *mode = (const char *)sqlite3_column_text(st, 0);
		rc = mode && !strcmp(mode, "wal")
			     ? 0
			     : seterr(s, RT_STORE_E_OPEN, "%s: cannot use WAL (journal mode %s)",
				      s->path, mode ? mode : "?");
	} else {
		rc = sqerr(s, rc, "set WAL mode");
	}
	sqlite3_finalize(st);
	return rc;
}

/* A clear message for a file or directory that is not there. */
static int check_path(struct sqlite_store *s)
{
	struct stat sb;
	if (stat(s->path, &sb) == 0) {
		if (S_ISDIR(sb.st_mode))
			return seterr(s, RT_STORE_E_OPEN, "%s: is a directory", s->path);
		return 0;
	}
	if (errno != ENOENT)
		return seterr(s, RT_STORE_E_OPEN, "%s: %s", s->path, strerror(errno));
	if (s->readonly)
		return seterr(s, RT_STORE_E_OPEN, "%s: no such file", s->path);
	/* Writable: the file will be created, but not its directory. */
	{
		char *dir = strdup(s->path);
		char *slash;
		int rc = 0;
		if (!dir)
			return seterr(s, RT_STORE_E_OPEN, "%s: out of memory", s->path);
		slash = strrchr(dir, '/');
		if (slash) {
			if (slash == dir)
				slash[1] = 0;
			else
				*slash = 0;
			if (stat(dir, &sb) != 0)
				rc = seterr(s, RT_STORE_E_OPEN, "%s: directory %s: %s", s->path,
					    dir, strerror(errno));
			else if (!S_ISDIR(sb.st_mode))
				rc = seterr(s, RT_STORE_E_OPEN, "%s: %s is not a directory",
					    s->path, dir);
		}
		free(dir);
		return rc;
	}
}

/* A missing store file is created private (see the top of this file). */
static int create_private(struct sqlite_store *s, const struct rt_store_options *o)
{
	int fd = open(s->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno == EEXIST ? 0 : seterr(s, RT_STORE_E_OPEN, "%s: cannot create: %s",
						    s->path, strerror(errno));
	if (o->group_readable &&
	    (fchown(fd, (uid_t)-1, (gid_t)o->gid) != 0 || fchmod(fd, 0640) != 0)) {
		int e = errno;
		close(fd);
		unlink(s->path);
		return seterr(s, RT_STORE_E_OPEN, "%s: cannot give it to group %ld: %s", s->path,
			      o->gid, strerror(e));
	}
	close(fd);
	return 0;
}

static int sqlite_store_open(struct sqlite_store **out, const struct rt_store_options *o)
{
	struct sqlite_store *s;
	const char *path;
	int rc, fresh, raced, flags;

	open_err[0] = 0;
	if (!out)
		return seterr(NULL, RT_STORE_E_INVAL, "rt_store_open: NULL handle pointer");
	*out = NULL;
	if (!o)
		return seterr(NULL, RT_STORE_E_INVAL, "rt_store_open: NULL options");
	path = o->path ? o->path : RT_STORE_DEFAULT_PATH;
	if (!*path)
		return seterr(NULL, RT_STORE_E_INVAL, "rt_store_open: empty path");
	s = calloc(1, sizeof *s);
	if (!s || !(s->path = strdup(path))) {
		free(s);
		return seterr(NULL, RT_STORE_E_OPEN, "%s: out of memory", path);
	}
	s->readonly = o->readonly != 0;
	s->opt_max_age = o->max_age_ns;
	s->opt_max_bytes = o->max_bytes;
	if ((rc = check_path(s)))
		return open_fail(s, rc);
	if (!s->readonly && (rc = create_private(s, o)))
		return open_fail(s, rc);

	flags = SQLITE_OPEN_NOMUTEX |
		(s->readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
	rc = sqlite3_open_v2(s->path, &s->db, flags, NULL);
	if (rc != SQLITE_OK) {
		seterr(s, RT_STORE_E_OPEN, "%s: %s", s->path,
		       s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		return open_fail(s, RT_STORE_E_OPEN);
	}
	sqlite3_extended_result_codes(s->db, 1);
	sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);

	for (int tries = 0;; tries++) {
		if ((rc = check_format(s, &fresh)))
			return open_fail(s, rc);
		if (!fresh)
			break;
		if (s->readonly)
			return open_fail(s, not_ours(s, "empty database"));
		if (tries)
			return open_fail(s, not_ours(s, "schema vanished while opening"));
		if ((rc = create_schema(s, &raced)))
			return open_fail(s, rc);
		if (!raced)
			break;
	}
	/* WAL is persistent in the file: a no-op once set. Only on our own file. */
	if (!s->readonly && (rc = set_wal(s)))
		return open_fail(s, rc);
	/* A 32 MiB page cache keeps the slices' random-key index pages hot: about
	 * 1.4x the put_slice rate of the 2 MiB default. */
	rc = exec_sql(s, o->sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
		      "set pragmas");
	if (!rc)
		rc = exec_sql(s, "PRAGMA temp_store=MEMORY; PRAGMA cache_size=-32768;",
			      "set pragmas");
	if (rc)
		return open_fail(s, rc);

	if ((rc = upgrade_selection_cols(s)) || (rc = migrate_v1(s)))
		return open_fail(s, rc);
	/* Trigger names (added in session 8 without a version bump: a table an
	 * older reader never looks at; a reader of an older store finds none). */
	if (!s->readonly && (rc = exec_sql(s, TRIGGER_NAMES_SQL, "create trigger_names")))
		return open_fail(s, rc);
	if (!s->readonly && o->background_checkpoint && (rc = start_checkpointer(s)))
		return open_fail(s, rc);
	for (int i = 0; i < ST_N; i++) {
		rc = sqlite3_prepare_v3(s->db, stmt_sql(s, i), -1, SQLITE_PREPARE_PERSISTENT,
					&s->st[i], NULL);
		if (rc != SQLITE_OK) {
			seterr(s, RT_STORE_E_OPEN, "%s: not a usable retrace store: %s", s->path,
			       sqlite3_errmsg(s->db));
			return open_fail(s, RT_STORE_E_OPEN);
		}
	}
	s->err[0] = 0;
	*out = s;
	return 0;
}

static void sqlite_store_close(struct sqlite_store *s)
{
	if (!s)
		return;
	sqlite_store_rollback(s);
	free_store(s);
}

/* ------------------------------------------------------------ slices ---- */

static int sqlite_store_put_slice(struct sqlite_store *s, const struct rt_store_slice *sl)
{
	sqlite3_stmt *st;
	int rc, changed;
	if (!s)
		return RT_STORE_E_INVAL;
	if (!sl)
		return seterr(s, RT_STORE_E_INVAL, "%s: put_slice: NULL slice", s->path);
	if (s->readonly)
		return readonly_err(s, "put_slice");
	if (!s->in_txn)
		return seterr(s, RT_STORE_E_INVAL,
			      "%s: put_slice: no open transaction (call rt_store_begin)",
			      s->path);
	if (!sl->msg && sl->msg_len)
		return seterr(s, RT_STORE_E_INVAL, "%s: put_slice: NULL msg of %zu bytes",
			      s->path, sl->msg_len);
	st = s->st[ST_SLICE_PUT];
	bind_u64(st, 1, sl->trace_hi);
	bind_u64(st, 2, sl->trace_lo);
	sqlite3_bind_int64(st, 3, sl->agent_id);
	sqlite3_bind_int64(st, 4, sl->trigger_id);
	bind_u64(st, 5, sl->slice_seq);
	bind_u64(st, 6, sl->received_ns);
	sqlite3_bind_int64(st, 7, sl->buffers);
	bind_u64(st, 8, sl->bytes);
	bind_u64(st, 9, sl->first_ns);
	bind_u64(st, 10, sl->last_ns);
	sqlite3_bind_int(st, 11, sl->late != 0);
	sqlite3_bind_int64(st, 12, sl->rate_exp);
	rc = bind_blob(st, 13, sl->msg, sl->msg_len);
	if (rc != SQLITE_OK) {
		finish(st);
		return sqerr(s, rc, "put_slice");
	}
	rc = sqlite3_step(st);
	changed = sqlite3_changes(s->db);
	finish(st);
	if (rc != SQLITE_DONE)
		return sqerr(s, rc, "put_slice");
	if (!changed)
		return RT_STORE_DUPLICATE;
	s->tot_slices++;
	s->tot_bytes += sl->bytes;
	s->tot_dirty = 1;
	return 0;
}

static int sqlite_store_slices(struct sqlite_store *s, uint64_t trace_hi, uint64_t trace_lo,
		    rt_store_slice_fn fn, void *arg)
{
	struct rt_store_slice sl;
	sqlite3_stmt *st;
	int rc, priv, ret = 0;
	if (!s)
		return RT_STORE_E_INVAL;
	if (!fn)
		return seterr(s, RT_STORE_E_INVAL, "%s: slices: NULL callback", s->path);
	if (!(st = walk_stmt(s, ST_SLICE_WALK, &priv)))
		return RT_STORE_E_IO;
	bind_u64(st, 1, trace_lo);
	bind_u64(st, 2, trace_hi);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		row_to_slice(st, &sl);
		if ((ret = fn(arg, &sl)) != 0)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = sqerr(s, rc, "read slices");
	walk_done(st, priv);
	return ret;
}

static int sqlite_store_trace_rates(struct sqlite_store *s, uint64_t trace_hi, uint64_t trace_lo,
			 struct rt_store_rate *out, uint32_t max, uint32_t *n)
{
	sqlite3_stmt *st;
	int rc, priv;
	if (!s)
		return RT_STORE_E_INVAL;
	if (!n || (!out && max))
		return seterr(s, RT_STORE_E_INVAL, "%s: trace_rates: NULL output", s->path);
	*n = 0;
	if (!(st = walk_stmt(s, ST_SLICE_RATES, &priv)))
		return RT_STORE_E_IO;
	bind_u64(st, 1, trace_lo);
	bind_u64(st, 2, trace_hi);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t e = sqlite3_column_int64(st, 1);
		if (*n >= max)
			continue; /* counted below: the caller's array was too small */
		out[*n].agent_id = col_u32(st, 0);
		out[*n].rate_exp = e < 0 ? UINT32_MAX : e > UINT32_MAX ? UINT32_MAX : (uint32_t)e;
		++*n;
	}
	walk_done(st, priv);
	if (rc != SQLITE_DONE)
		return sqerr(s, rc, "read slice rates");
	return 0;
}

/* ------------------------------------------------------------ traces ---- */

static int sqlite_store_put_trace(struct sqlite_store *s, const struct rt_store_trace *t)
{
	char trig[U32LIST_CAP], agents[U32LIST_CAP], missing[U32LIST_CAP];
	sqlite3_stmt *st;
	if (!s)
		return RT_STORE_E_INVAL;
	if (!t)
		return seterr(s, RT_STORE_E_INVAL, "%s: put_trace: NULL trace", s->path);
	if (s->readonly)
		return readonly_err(s, "put_trace");
	if (t->trigger_count > RT_STORE_MAX_TRIGGERS || t->agent_count > RT_STORE_MAX_AGENTS ||
	    t->missing_count > RT_STORE_MAX_AGENTS)
		return seterr(s, RT_STORE_E_INVAL,
			      "%s: put_trace: %u triggers / %u agents / %u missing over the "
			      "limits (%d / %d)",
			      s->path, t->trigger_count, t->agent_count, t->missing_count,
			      RT_STORE_MAX_TRIGGERS, RT_STORE_MAX_AGENTS);
	enc_u32s(trig, t->trigger_ids, t->trigger_count);
	enc_u32s(agents, t->agents, t->agent_count);
	enc_u32s(missing, t->missing, t->missing_count);
	st = s->st[ST_TRACE_PUT];
	bind_u64(st, 1, t->trace_hi);
	bind_u64(st, 2, t->trace_lo);
	bind_u64(st, 3, t->group_id);
	sqlite3_bind_text(st, 4, trig, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, agents, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, missing, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 7, t->coherent != 0);
	bind_u64(st, 8, t->first_ns);
	bind_u64(st, 9, t->last_ns);
	bind_u64(st, 10, t->bytes);
	sqlite3_bind_int64(st, 11, t->slices);
	sqlite3_bind_int64(st, 12, t->late_slices);
	bind_u64(st, 13, t->triggered_ns);
	bind_u64(st, 14, t->closed_ns);
	bind_u64(st, 15, t->traversal_ns);
	return run(s, st, "put_trace");
}

static int add_late_locked(struct sqlite_store *s, const struct rt_store_slice *sl)
{
	sqlite3_stmt *st = s->st[ST_LATE_GET];
	uint64_t bytes, first, last;
	uint32_t slices, late;
	int rc;
	bind_u64(st, 1, sl->trace_lo);
	bind_u64(st, 2, sl->trace_hi);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		finish(st);
		if (rc == SQLITE_DONE)
			return seterr(s, RT_STORE_E_NOTFOUND,
				      "%s: add_late: no trace %016llx%016llx", s->path,
				      (unsigned long long)sl->trace_hi,
				      (unsigned long long)sl->trace_lo);
		return sqerr(s, rc, "add_late");
	}
	bytes = col_u64(st, 0) + sl->bytes;
	slices = col_u32(st, 1);
	late = col_u32(st, 2);
	first = col_u64(st, 3);
	last = col_u64(st, 4);
	finish(st);
	if (slices < UINT32_MAX)
		slices++;
	if (late < UINT32_MAX)
		late++;
	if (sl->first_ns && (!first || sl->first_ns < first))
		first = sl->first_ns;
	if (sl->last_ns > last)
		last = sl->last_ns;
	st = s->st[ST_LATE_SET];
	bind_u64(st, 1, sl->trace_lo);
	bind_u64(st, 2, sl->trace_hi);
	bind_u64(st, 3, bytes);
	sqlite3_bind_int64(st, 4, slices);
	sqlite3_bind_int64(st, 5, late);
	bind_u64(st, 6, first);
	bind_u64(st, 7, last);
	return run(s, st, "add_late");
}

static int sqlite_store_add_late(struct sqlite_store *s, const struct rt_store_slice *sl)
{
	int rc, own;
	if (!s)
		return RT_STORE_E_INVAL;
	if (!sl)
		return seterr(s, RT_STORE_E_INVAL, "%s: add_late: NULL slice", s->path);
	if (s->readonly)
		return readonly_err(s, "add_late");
	if ((rc = txn_enter(s, &own)))
		return rc;
	return txn_leave(s, own, add_late_locked(s, sl));
}

static int sqlite_store_set_selection(struct sqlite_store *s, const struct rt_store_trace *t)
{
	sqlite3_stmt *st;
	int rc;
	if (!s)
		return RT_STORE_E_INVAL;
	if (!t)
		return seterr(s, RT_STORE_E_INVAL, "%s: set_selection: NULL trace", s->path);
	if (s->readonly)
		return readonly_err(s, "set_selection");
	st = s->st[ST_TRACE_SELECT];
	bind_u64(st, 1, t->trace_lo);
	bind_u64(st, 2, t->trace_hi);
	sqlite3_bind_double(st, 3, t->score);
	bind_u64(st, 4, t->pattern);
	bind_u64(st, 5, t->group_key);
	sqlite3_bind_text(st, 6, t->group, (int)strnlen(t->group, sizeof t->group - 1),
			  SQLITE_STATIC);
	sqlite3_bind_double(st, 7, t->weight);
	if ((rc = run(s, st, "set_selection")))
		return rc;
	if (!sqlite3_changes(s->db))
		return seterr(s, RT_STORE_E_NOTFOUND, "%s: set_selection: no trace %016llx%016llx",
			      s->path, (unsigned long long)t->trace_hi,
			      (unsigned long long)t->trace_lo);
	return 0;
}

static int sqlite_store_get_trace(struct sqlite_store *s, uint64_t trace_hi, uint64_t trace_lo,
		       struct rt_store_trace *out)
{
	sqlite3_stmt *st;
	int rc;
	if (!s)
		return RT_STORE_E_INVAL;
	if (!out)
		return seterr(s, RT_STORE_E_INVAL, "%s: get_trace: NULL output", s->path);
	st = s->st[ST_TRACE_GET];
	bind_u64(st, 1, trace_lo);
	bind_u64(st, 2, trace_hi);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		rc = row_to_trace(s, st, out);
	else if (rc == SQLITE_DONE)
		rc = seterr(s, RT_STORE_E_NOTFOUND, "%s: no trace %016llx%016llx", s->path,
			    (unsigned long long)trace_hi, (unsigned long long)trace_lo);
	else
		rc = sqerr(s, rc, "get_trace");
	finish(st);
	return rc;
}

static int sqlite_store_list(struct sqlite_store *s, const struct rt_store_query *q,
		  rt_store_trace_fn fn, void *arg)
{
	struct rt_store_trace t;
	int64_t lo[2], hi[2];
	char trig[16];
	uint64_t left;
	int nr, rc = 0, ret = 0;
	if (!s)
		return RT_STORE_E_INVAL;
	if (!q || !fn)
		return seterr(s, RT_STORE_E_INVAL, "%s: list: NULL %s", s->path,
			      q ? "callback" : "query");
	left = q->limit ? q->limit : UINT64_MAX;
	if (q->by_trigger)
		snprintf(trig, sizeof trig, ",%u,", q->trigger_id);
	nr = signed_ranges(q->since_ns, UINT64_MAX, lo, hi);
	/* Newest first: the high unsigned range first. */
	for (int r = nr - 1; r >= 0 && left && !ret; r--) {
		int priv;
		sqlite3_stmt *st = walk_stmt(s, ST_TRACE_LIST, &priv);
		if (!st)
			return RT_STORE_E_IO;
		sqlite3_bind_int64(st, 1, lo[r]);
		sqlite3_bind_int64(st, 2, hi[r]);
		if (q->by_trigger)
			sqlite3_bind_text(st, 3, trig, -1, SQLITE_STATIC);
		else
			sqlite3_bind_null(st, 3);
		sqlite3_bind_int(st, 4, q->incoherent_only != 0);
		sqlite3_bind_int64(st, 5, left > INT64_MAX ? -1 : (int64_t)left);
		while (left && (rc = sqlite3_step(st)) == SQLITE_ROW) {
			if ((ret = row_to_trace(s, st, &t)) != 0)
				break;
			left--;
			if ((ret = fn(arg, &t)) != 0)
				break;
		}
		if (!ret && left && rc != SQLITE_DONE)
			ret = sqerr(s, rc, "list traces");
		walk_done(st, priv);
	}
	return ret;
}

/* ------------------------------------------------- agent directory ---- */

static int sqlite_store_put_agent(struct sqlite_store *s, const struct rt_store_agent *a)
{
	sqlite3_stmt *st;
	if (!s)
		return RT_STORE_E_INVAL;
	if (!a)
		return seterr(s, RT_STORE_E_INVAL, "%s: put_agent: NULL agent", s->path);
	if (s->readonly)
		return readonly_err(s, "put_agent");
	st = s->st[ST_AGENT_PUT];
	sqlite3_bind_int64(st, 1, a->agent_id);
	sqlite3_bind_int64(st, 2, a->pid);
	sqlite3_bind_text(st, 3, a->host, (int)strnlen(a->host, sizeof a->host - 1),
			  SQLITE_STATIC);
	sqlite3_bind_text(st, 4, a->control_addr,
			  (int)strnlen(a->control_addr, sizeof a->control_addr - 1),
			  SQLITE_STATIC);
	bind_u64(st, 5, a->start_ns);
	bind_u64(st, 6, a->last_seen_ns);
	return run(s, st, "put_agent");
}

static int sqlite_store_delete_agent(struct sqlite_store *s, uint32_t agent_id)
{
	sqlite3_stmt *st;
	int rc;
	if (!s)
		return RT_STORE_E_INVAL;
	if (s->readonly)
		return readonly_err(s, "delete_agent");
	st = s->st[ST_AGENT_DEL];
	sqlite3_bind_int64(st, 1, agent_id);
	if ((rc = run(s, st, "delete_agent")))
		return rc;
	if (!sqlite3_changes(s->db))
		return seterr(s, RT_STORE_E_NOTFOUND, "%s: no agent %u", s->path, agent_id);
	return 0;
}

static void copy_text(char *dst, size_t cap, sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	size_t n = t ? (size_t)sqlite3_column_bytes(st, col) : 0;
	if (n >= cap)
		n = cap - 1;
	if (n)
		memcpy(dst, t, n);
	dst[n] = 0;
}

/* ---------------------------------------------------- trigger names ---- */

static int sqlite_store_put_trigger_name(struct sqlite_store *s, uint32_t id, const char *name,
					 uint64_t seen_ns)
{
	sqlite3_stmt *st;
	int rc;
	if (!s)
		return RT_STORE_E_INVAL;
	if (!name || !*name)
		return seterr(s, RT_STORE_E_INVAL, "%s: put_trigger_name: no name", s->path);
	if (s->readonly)
		return readonly_err(s, "put_trigger_name");
	rc = sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO trigger_names(trigger_id, name, "
				       "seen_ns) VALUES(?, ?, ?)", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return sqerr(s, rc, "put_trigger_name");
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	bind_u64(st, 3, seen_ns);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : sqerr(s, rc, "put_trigger_name");
}

static int sqlite_store_trigger_names(struct sqlite_store *s, rt_store_trigger_name_fn fn,
				      void *arg)
{
	char name[RT_STORE_TRIGGER_NAME_MAX];
	sqlite3_stmt *st;
	int rc, ret = 0;
	if (!s)
		return RT_STORE_E_INVAL;
	if (!fn)
		return seterr(s, RT_STORE_E_INVAL, "%s: trigger_names: NULL callback", s->path);
	rc = sqlite3_prepare_v2(s->db, "SELECT trigger_id, name FROM trigger_names "
				       "ORDER BY trigger_id", -1, &st, NULL);
	if (rc != SQLITE_OK) /* a store from before trigger names (read-only): none */
		return s->readonly ? 0 : sqerr(s, rc, "list trigger names");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		copy_text(name, sizeof name, st, 1);
		if ((ret = fn(arg, col_u32(st, 0), name)) != 0)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = sqerr(s, rc, "list trigger names");
	sqlite3_finalize(st);
	return ret;
}

static int sqlite_store_agents(struct sqlite_store *s, rt_store_agent_fn fn, void *arg)
{
	struct rt_store_agent a;
	sqlite3_stmt *st;
	int rc, priv, ret = 0;
	if (!s)
		return RT_STORE_E_INVAL;
	if (!fn)
		return seterr(s, RT_STORE_E_INVAL, "%s: agents: NULL callback", s->path);
	if (!(st = walk_stmt(s, ST_AGENT_LIST, &priv)))
		return RT_STORE_E_IO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		memset(&a, 0, sizeof a);
		a.agent_id = col_u32(st, 0);
		a.pid = col_u32(st, 1);
		copy_text(a.host, sizeof a.host, st, 2);
		copy_text(a.control_addr, sizeof a.control_addr, st, 3);
		a.start_ns = col_u64(st, 4);
		a.last_seen_ns = col_u64(st, 5);
		if ((ret = fn(arg, &a)) != 0)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = sqerr(s, rc, "list agents");
	walk_done(st, priv);
	return ret;
}

/* -------------------------------------------------- pending triggers ---- */

static int sqlite_store_put_trigger(struct sqlite_store *s, uint32_t agent_id, uint64_t trigger_seq,
			 uint64_t received_ns, const void *msg, size_t len)
{
	sqlite3_stmt *st;
	int rc, changed;
	if (!s)
		return RT_STORE_E_INVAL;
	if (s->readonly)
		return readonly_err(s, "put_trigger");
	if (!msg && len)
		return seterr(s, RT_STORE_E_INVAL, "%s: put_trigger: NULL msg of %zu bytes",
			      s->path, len);
	st = s->st[ST_TRIG_PUT];
	sqlite3_bind_int64(st, 1, agent_id);
	bind_u64(st, 2, trigger_seq);
	bind_u64(st, 3, received_ns);
	rc = bind_blob(st, 4, msg, len);
	if (rc != SQLITE_OK) {
		finish(st);
		return sqerr(s, rc, "put_trigger");
	}
	rc = sqlite3_step(st);
	changed = sqlite3_changes(s->db);
	finish(st);
	if (rc != SQLITE_DONE)
		return sqerr(s, rc, "put_trigger");
	return changed ? 0 : RT_STORE_DUPLICATE;
}

static int sqlite_store_done_trigger(struct sqlite_store *s, uint32_t agent_id, uint64_t trigger_seq)
{
	sqlite3_stmt *st;
	int rc;
	if (!s)
		return RT_STORE_E_INVAL;
	if (s->readonly)
		return readonly_err(s, "done_trigger");
	st = s->st[ST_TRIG_DONE];
	sqlite3_bind_int64(st, 1, agent_id);
	bind_u64(st, 2, trigger_seq);
	bind_u64(st, 3, wall_ns());
	if ((rc = run(s, st, "done_trigger")))
		return rc;
	if (!sqlite3_changes(s->db))
		return seterr(s, RT_STORE_E_NOTFOUND, "%s: no trigger %u/%llu", s->path,
			      agent_id, (unsigned long long)trigger_seq);
	return 0;
}

static int sqlite_store_pending_triggers(struct sqlite_store *s, rt_store_trigger_fn fn, void *arg)
{
	static const unsigned char empty[1];
	sqlite3_stmt *st;
	int rc, priv, ret = 0;
	if (!s)
		return RT_STORE_E_INVAL;
	if (!fn)
		return seterr(s, RT_STORE_E_INVAL, "%s: pending_triggers: NULL callback",
			      s->path);
	if (!(st = walk_stmt(s, ST_TRIG_PENDING, &priv)))
		return RT_STORE_E_IO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const void *msg = sqlite3_column_blob(st, 3);
		size_t len = (size_t)sqlite3_column_bytes(st, 3);
		ret = fn(arg, col_u32(st, 0), col_u64(st, 1), col_u64(st, 2),
			 msg ? msg : empty, len);
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = sqerr(s, rc, "list triggers");
	walk_done(st, priv);
	return ret;
}

/* ------------------------------------------------ retention, stats ---- */

/* Run a DELETE .. RETURNING bytes; subtract the rows from the slice totals. */
static int delete_slices(struct sqlite_store *s, sqlite3_stmt *st, const char *what)
{
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		s->tot_bytes -= col_u64(st, 0);
		s->tot_slices--;
		s->tot_dirty = 1;
	}
	finish(st);
	return rc == SQLITE_DONE ? 0 : sqerr(s, rc, what);
}

static int delete_trace(struct sqlite_store *s, uint64_t hi, uint64_t lo)
{
	sqlite3_stmt *st = s->st[ST_SLICE_DEL_TRACE];
	int rc;
	bind_u64(st, 1, lo);
	bind_u64(st, 2, hi);
	if ((rc = delete_slices(s, st, "retain: delete slices")))
		return rc;
	st = s->st[ST_TRACE_DEL];
	bind_u64(st, 1, lo);
	bind_u64(st, 2, hi);
	return run(s, st, "retain: delete trace");
}

static int retain_locked(struct sqlite_store *s, uint64_t now_ns, uint64_t *deleted)
{
	const uint64_t max_age = s->opt_max_age, max_bytes = s->opt_max_bytes;
	uint64_t cutoff = 0; /* traces closed before it go */
	uint64_t trig_keep = max_age ? max_age : TRIGGER_KEEP_NS;
	struct {
		uint64_t hi, lo, closed;
	} batch[RETAIN_BATCH];
	int64_t lo[2], hi[2];
	int nr, rc;

	if (max_age && now_ns > max_age)
		cutoff = now_ns - max_age;

	/* Oldest closed traces first, ascending unsigned closed_ns. */
	nr = signed_ranges(0, UINT64_MAX, lo, hi);
	for (int r = 0; r < nr; r++) {
		for (;;) {
			sqlite3_stmt *st = s->st[ST_TRACE_OLDEST];
			int n = 0;
			sqlite3_bind_int64(st, 1, lo[r]);
			sqlite3_bind_int64(st, 2, hi[r]);
			sqlite3_bind_int(st, 3, RETAIN_BATCH);
			while (n < RETAIN_BATCH && (rc = sqlite3_step(st)) == SQLITE_ROW) {
				batch[n].hi = col_u64(st, 0);
				batch[n].lo = col_u64(st, 1);
				batch[n].closed = col_u64(st, 2);
				n++;
			}
			finish(st);
			if (n < RETAIN_BATCH && rc != SQLITE_DONE)
				return sqerr(s, rc, "retain: oldest traces");
			for (int i = 0; i < n; i++) {
				int old = batch[i].closed < cutoff;
				int big = max_bytes && s->tot_bytes > max_bytes;
				if (!old && !big)
					goto traces_done; /* the rest are newer */
				if ((rc = delete_trace(s, batch[i].hi, batch[i].lo)))
					return rc;
				(*deleted)++;
			}
			if (n < RETAIN_BATCH)
				break;
		}
	}
traces_done:
	/* Orphan slices (no trace row) received before the cut-off. */
	if (cutoff) {
		nr = signed_ranges(0, cutoff - 1, lo, hi);
		for (int r = 0; r < nr; r++) {
			sqlite3_stmt *st = s->st[ST_SLICE_DEL_ORPHAN];
			sqlite3_bind_int64(st, 1, lo[r]);
			sqlite3_bind_int64(st, 2, hi[r]);
			if ((rc = delete_slices(s, st, "retain: orphan slices")))
				return rc;
		}
	}
	/* Done triggers. */
	if (now_ns > trig_keep) {
		nr = signed_ranges(0, now_ns - trig_keep - 1, lo, hi);
		for (int r = 0; r < nr; r++) {
			sqlite3_stmt *st = s->st[ST_TRIG_DEL_DONE];
			sqlite3_bind_int64(st, 1, lo[r]);
			sqlite3_bind_int64(st, 2, hi[r]);
			if ((rc = run(s, st, "retain: done triggers")))
				return rc;
		}
	}
	return 0;
}

static int sqlite_store_retain(struct sqlite_store *s, uint64_t now_ns, uint64_t *deleted)
{
	uint64_t n = 0;
	int rc, own;
	if (deleted)
		*deleted = 0;
	if (!s)
		return RT_STORE_E_INVAL;
	if (s->readonly)
		return readonly_err(s, "retain");
	if ((rc = txn_enter(s, &own)))
		return rc;
	rc = txn_leave(s, own, retain_locked(s, now_ns, &n));
	if (deleted && !rc)
		*deleted = n;
	return rc;
}

static int sqlite_store_delete_trace(struct sqlite_store *s, uint64_t trace_hi, uint64_t trace_lo)
{
	int rc, own, found;
	if (!s)
		return RT_STORE_E_INVAL;
	if (s->readonly)
		return readonly_err(s, "delete_trace");
	if ((rc = txn_enter(s, &own)))
		return rc;
	rc = delete_trace(s, trace_hi, trace_lo);
	found = !rc && sqlite3_changes(s->db) > 0; /* changes of the last statement: the row */
	if ((rc = txn_leave(s, own, rc)))
		return rc;
	if (!found)
		return seterr(s, RT_STORE_E_NOTFOUND, "%s: delete_trace: no trace %016llx%016llx",
			      s->path, (unsigned long long)trace_hi, (unsigned long long)trace_lo);
	return 0;
}

static uint64_t file_size(const char *path, const char *suffix)
{
	char buf[4096];
	struct stat sb;
	snprintf(buf, sizeof buf, "%s%s", path, suffix);
	return stat(buf, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static int sqlite_store_stats(struct sqlite_store *s, struct rt_store_stats *out)
{
	sqlite3_stmt *st;
	int rc;
	if (!s)
		return RT_STORE_E_INVAL;
	if (!out)
		return seterr(s, RT_STORE_E_INVAL, "%s: stats: NULL output", s->path);
	memset(out, 0, sizeof *out);
	st = s->st[ST_STATS];
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		finish(st);
		return sqerr(s, rc, "stats");
	}
	out->traces = col_u64(st, 0);
	out->coherent = col_u64(st, 1);
	out->incoherent = out->traces - out->coherent;
	out->pending_triggers = col_u64(st, 2);
	out->agents = col_u64(st, 3);
	out->slices = col_u64(st, 4);
	out->slice_bytes = col_u64(st, 5);
	finish(st);
	if (s->in_txn) { /* this transaction's own, not yet in meta */
		out->slices = s->tot_slices;
		out->slice_bytes = s->tot_bytes;
	}
	out->file_bytes = file_size(s->path, "") + file_size(s->path, "-wal");
	out->checkpoints = atomic_load_explicit(&s->ckpt_runs, memory_order_relaxed);
	out->checkpoint_errors = atomic_load_explicit(&s->ckpt_errors, memory_order_relaxed);
	out->checkpoint_max_ns = atomic_load_explicit(&s->ckpt_max_ns, memory_order_relaxed);
	return 0;
}

/* ------------------------------------------------------- the vtable ---- */

#define SQ(s) ((struct sqlite_store *)(s))

static int v_open(struct rt_store **out, const struct rt_store_options *o)
{
	struct sqlite_store *s = NULL;
	int rc = sqlite_store_open(&s, o);
	*out = s ? &s->base : NULL;
	return rc;
}
static void v_close(struct rt_store *s) { sqlite_store_close(SQ(s)); }
static const char *v_errmsg(const struct rt_store *s)
{
	return sqlite_store_errmsg((const struct sqlite_store *)s);
}
static const char *v_path(const struct rt_store *s)
{
	return sqlite_store_path((const struct sqlite_store *)s);
}
static int v_begin(struct rt_store *s) { return sqlite_store_begin(SQ(s)); }
static int v_commit(struct rt_store *s) { return sqlite_store_commit(SQ(s)); }
static void v_rollback(struct rt_store *s) { sqlite_store_rollback(SQ(s)); }
static int v_put_slice(struct rt_store *s, const struct rt_store_slice *sl)
{
	return sqlite_store_put_slice(SQ(s), sl);
}
static int v_slices(struct rt_store *s, uint64_t hi, uint64_t lo, rt_store_slice_fn fn, void *arg)
{
	return sqlite_store_slices(SQ(s), hi, lo, fn, arg);
}
static int v_trace_rates(struct rt_store *s, uint64_t hi, uint64_t lo, struct rt_store_rate *out,
			 uint32_t max, uint32_t *n)
{
	return sqlite_store_trace_rates(SQ(s), hi, lo, out, max, n);
}
static int v_put_trace(struct rt_store *s, const struct rt_store_trace *t)
{
	return sqlite_store_put_trace(SQ(s), t);
}
static int v_add_late(struct rt_store *s, const struct rt_store_slice *sl)
{
	return sqlite_store_add_late(SQ(s), sl);
}
static int v_set_selection(struct rt_store *s, const struct rt_store_trace *t)
{
	return sqlite_store_set_selection(SQ(s), t);
}
static int v_delete_trace(struct rt_store *s, uint64_t hi, uint64_t lo)
{
	return sqlite_store_delete_trace(SQ(s), hi, lo);
}
static int v_get_trace(struct rt_store *s, uint64_t hi, uint64_t lo, struct rt_store_trace *out)
{
	return sqlite_store_get_trace(SQ(s), hi, lo, out);
}
static int v_list(struct rt_store *s, const struct rt_store_query *q, rt_store_trace_fn fn,
		  void *arg)
{
	return sqlite_store_list(SQ(s), q, fn, arg);
}
/* Spans are decoded from the stored slices on read: nothing to keep. */
static int v_put_spans(struct rt_store *s, const struct rt_store_span *spans, uint32_t n)
{
	(void)spans;
	(void)n;
	return SQ(s)->readonly ? readonly_err(SQ(s), "put_spans") : 0;
}
static int v_put_agent(struct rt_store *s, const struct rt_store_agent *a)
{
	return sqlite_store_put_agent(SQ(s), a);
}
static int v_delete_agent(struct rt_store *s, uint32_t id)
{
	return sqlite_store_delete_agent(SQ(s), id);
}
static int v_agents(struct rt_store *s, rt_store_agent_fn fn, void *arg)
{
	return sqlite_store_agents(SQ(s), fn, arg);
}
static int v_put_trigger(struct rt_store *s, uint32_t agent_id, uint64_t seq, uint64_t received_ns,
			 const void *msg, size_t len)
{
	return sqlite_store_put_trigger(SQ(s), agent_id, seq, received_ns, msg, len);
}
static int v_done_trigger(struct rt_store *s, uint32_t agent_id, uint64_t seq)
{
	return sqlite_store_done_trigger(SQ(s), agent_id, seq);
}
static int v_pending_triggers(struct rt_store *s, rt_store_trigger_fn fn, void *arg)
{
	return sqlite_store_pending_triggers(SQ(s), fn, arg);
}
static int v_put_trigger_name(struct rt_store *s, uint32_t id, const char *name, uint64_t ns)
{
	return sqlite_store_put_trigger_name(SQ(s), id, name, ns);
}
static int v_trigger_names(struct rt_store *s, rt_store_trigger_name_fn fn, void *arg)
{
	return sqlite_store_trigger_names(SQ(s), fn, arg);
}
static int v_retain(struct rt_store *s, uint64_t now_ns, uint64_t *deleted)
{
	return sqlite_store_retain(SQ(s), now_ns, deleted);
}
static int v_stats(struct rt_store *s, struct rt_store_stats *out)
{
	return sqlite_store_stats(SQ(s), out);
}

const struct rt_store_backend rt_store_sqlite_backend = {
	.name = "sqlite",
	.open = v_open, .close = v_close, .errmsg = v_errmsg, .path = v_path,
	.begin = v_begin, .commit = v_commit, .rollback = v_rollback,
	.put_slice = v_put_slice, .slices = v_slices, .trace_rates = v_trace_rates,
	.put_trace = v_put_trace, .add_late = v_add_late, .set_selection = v_set_selection,
	.delete_trace = v_delete_trace, .get_trace = v_get_trace, .list = v_list,
	.wants_spans = 0, .put_spans = v_put_spans,
	.put_agent = v_put_agent, .delete_agent = v_delete_agent, .agents = v_agents,
	.put_trigger = v_put_trigger, .done_trigger = v_done_trigger,
	.pending_triggers = v_pending_triggers, .retain = v_retain, .stats = v_stats,
	.put_trigger_name = v_put_trigger_name, .trigger_names = v_trigger_names,
};
