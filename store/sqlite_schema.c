/*
 * store/sqlite_schema.c — the SQLite backend's SQL: the prepared statements'
 * text (and the variants for older stores), the schema a fresh file gets, the
 * check that a file is a retrace store of a version we read, and the
 * migrations of a writable open (sqlite.c says what each version added).
 */
#include "sqlite_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

/* The SQL of a statement for this store's columns. */
const char *sq_stmt_sql(const struct sqlite_store *s, int id)
{
	if (s->v1_slices && v1_text[id])
		return v1_text[id];
	return s->legacy && legacy_text[id] ? legacy_text[id] : sql_text[id];
}

int sq_exec_sql(struct sqlite_store *s, const char *sql, const char *what)
{
	char *msg = NULL;
	int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK) {
		int code = sq_seterr(s, sq_map_sqlite(rc), "%s: %s: %s", s->path, what,
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

int sq_not_ours(struct sqlite_store *s, const char *why)
{
	return sq_seterr(s, RT_STORE_E_OPEN, "%s: not a retrace store (%s)", s->path, why);
}

/*
 * Is the file a retrace store? *fresh = 1 for an empty database (no schema at
 * all), which a writable open initialises. Reads only.
 */
int sq_check_format(struct sqlite_store *s, int *fresh)
{
	int64_t n = 0, app = 0, ver = 0;
	int rc;
	*fresh = 0;
	rc = query_int(s, "SELECT count(*) FROM sqlite_schema", &n);
	if ((rc & 0xff) == SQLITE_NOTADB)
		return sq_not_ours(s, "not an SQLite database");
	if (rc != SQLITE_OK)
		return sq_sqerr(s, rc, "read schema");
	if (n == 0) {
		*fresh = 1;
		return 0;
	}
	rc = query_int(s, "PRAGMA application_id", &app);
	if (rc != SQLITE_OK)
		return sq_sqerr(s, rc, "read application_id");
	if (app != APP_ID)
		return sq_not_ours(s, "foreign application id");
	rc = query_int(s, "SELECT value FROM meta WHERE key = 'schema_version'", &ver);
	if (rc == SQLITE_NOTFOUND)
		return sq_not_ours(s, "no schema version");
	if ((rc & 0xff) == SQLITE_ERROR) /* no meta table, or not ours */
		return sq_not_ours(s, sqlite3_errmsg(s->db));
	if (rc != SQLITE_OK)
		return sq_sqerr(s, rc, "read schema version");
	if (ver > SCHEMA_VERSION)
		return sq_seterr(s, RT_STORE_E_SCHEMA,
			      "%s: schema version %lld is newer than this build's (%d)", s->path,
			      (long long)ver, SCHEMA_VERSION);
	if (ver < 1)
		return sq_seterr(s, RT_STORE_E_SCHEMA, "%s: unknown schema version %lld", s->path,
			      (long long)ver);
	s->version = ver;
	return 0;
}

int sq_create_schema(struct sqlite_store *s, int *raced)
{
	char sql[128];
	int64_t n = 0;
	int rc;
	*raced = 0;
	rc = sq_exec_sql(s, "BEGIN IMMEDIATE", "create schema");
	if (rc)
		return rc;
	/* Another process may have created it since we looked. */
	rc = query_int(s, "SELECT count(*) FROM sqlite_schema", &n);
	if (rc != SQLITE_OK) {
		rc = sq_sqerr(s, rc, "create schema");
		goto fail;
	}
	if (n) {
		*raced = 1;
		sq_exec_sql(s, "ROLLBACK", "create schema");
		return 0;
	}
	snprintf(sql, sizeof sql,
		 "PRAGMA application_id = %d;"
		 "INSERT INTO meta(key, value) VALUES('schema_version', %d);",
		 APP_ID, SCHEMA_VERSION);
	if ((rc = sq_exec_sql(s, schema_sql, "create schema")) ||
	    (rc = sq_exec_sql(s, sql, "create schema")) ||
	    (rc = sq_exec_sql(s, "COMMIT", "create schema")))
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
		return sq_sqerr(s, rc, "read the slices columns");
	return n > 0;
}

/*
 * Version 1 -> 2: slices.rate_exp, 0 for every stored slice (all were sent at
 * rate 1). A read-only open reads 0 in its place instead (s->v1_slices).
 */
int sq_migrate_v1(struct sqlite_store *s)
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
	if ((rc = sq_exec_sql(s, "BEGIN IMMEDIATE", "migrate to schema version 2")))
		return rc;
	if ((rc = has_rate_col(s)) < 0) /* another writer may have migrated it */
		goto fail;
	if (!rc && (rc = sq_exec_sql(s, "ALTER TABLE slices ADD COLUMN rate_exp INTEGER "
				     "NOT NULL DEFAULT 0", "migrate to schema version 2")))
		goto fail;
	if ((rc = sq_exec_sql(s, "UPDATE meta SET value = 2 WHERE key = 'schema_version'",
			   "migrate to schema version 2")) ||
	    (rc = sq_exec_sql(s, "COMMIT", "migrate to schema version 2")))
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
		return sq_sqerr(s, rc, "read the traces columns");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 1);
		for (size_t i = 0; name && i < N_SELECTION_COLS; i++)
			if (!strcmp(name, selection_cols[i][0]))
				present[i] = 1;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : sq_sqerr(s, rc, "read the traces columns");
}

/*
 * A store written before selection existed: a writable open adds the columns
 * (nullable, so older builds keep working on the file); a read-only one reads
 * NULLs in their place (s->legacy).
 */
int sq_upgrade_selection_cols(struct sqlite_store *s)
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
	if ((rc = sq_exec_sql(s, "BEGIN IMMEDIATE", "add selection columns")))
		return rc;
	if ((rc = find_selection_cols(s, present))) /* another writer may have added them */
		goto fail;
	for (size_t i = 0; i < N_SELECTION_COLS; i++) {
		if (present[i])
			continue;
		snprintf(sql, sizeof sql, "ALTER TABLE traces ADD COLUMN %s %s", selection_cols[i][0],
			 selection_cols[i][1]);
		if ((rc = sq_exec_sql(s, sql, "add selection columns")))
			goto fail;
	}
	if ((rc = sq_exec_sql(s, "COMMIT", "add selection columns")))
		goto fail;
	return 0;
fail:
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}
