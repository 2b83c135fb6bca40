/*
 * store/sqlite_internal.h — what the files of the SQLite backend share.
 *
 * Owns: the handle (struct sqlite_store), the ids of the prepared statements,
 * the schema's constants, and the helpers every part uses (errors, stepping a
 * statement, walks, transactions, unsigned ranges). The parts: sqlite.c (open,
 * close, errors, statements, transactions, the checkpointer, the vtable;
 * its opening comment explains the file, the schema and its versions),
 * sqlite_schema.c (SQL text, schema, version check, migrations),
 * sqlite_traces.c (slices and traces), sqlite_agents.c (agents, trigger names,
 * pending triggers, retention, figures). Not for users of store.h.
 */
#ifndef RETRACE_STORE_SQLITE_INTERNAL_H
#define RETRACE_STORE_SQLITE_INTERNAL_H

#include "backend.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

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

#define TRIGGER_NAMES_SQL                                                              \
	"CREATE TABLE IF NOT EXISTS trigger_names(trigger_id INTEGER PRIMARY KEY,"      \
	" name TEXT NOT NULL, seen_ns INTEGER NOT NULL)"

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

static inline int bind_blob(sqlite3_stmt *st, int i, const void *p, size_t len)
{
	if (!len)
		return sqlite3_bind_zeroblob(st, i, 0);
	return sqlite3_bind_blob64(st, i, p, (sqlite3_uint64)len, SQLITE_STATIC);
}

/* errors, statements, transactions (sqlite.c) */
int sq_seterr(struct sqlite_store *s, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int sq_map_sqlite(int rc);
int sq_sqerr(struct sqlite_store *s, int rc, const char *what);
int sq_readonly_err(struct sqlite_store *s, const char *what);
/* The checks every operation opens with, in this order: a store (NULL:
 * RT_STORE_E_INVAL with no message, there is no store to hold one); the
 * caller's arguments (missing, when not NULL, says what is wrong: "NULL slice";
 * RT_STORE_E_INVAL, "PATH: WHAT: MISSING"); for SQ_WRITE, a store open for
 * writing (RT_STORE_E_READONLY). 0 when all hold. Checks particular to one
 * operation (an open transaction, a length without bytes) follow it there. */
enum { SQ_READ = 0, SQ_WRITE = 1 };
int sq_check(struct sqlite_store *s, const char *what, const char *missing, int mode);
int sq_run(struct sqlite_store *s, sqlite3_stmt *st, const char *what);
sqlite3_stmt *sq_walk_stmt(struct sqlite_store *s, enum st id, int *priv);
void sq_walk_done(sqlite3_stmt *st, int priv);
int sq_signed_ranges(uint64_t a, uint64_t b, int64_t lo[2], int64_t hi[2]);
uint64_t sq_wall_ns(void);
int sq_txn_enter(struct sqlite_store *s, int *own);
int sq_txn_leave(struct sqlite_store *s, int own, int rc);

/* schema (sqlite_schema.c) */
const char *sq_stmt_sql(const struct sqlite_store *s, int id);
int sq_exec_sql(struct sqlite_store *s, const char *sql, const char *what);
int sq_not_ours(struct sqlite_store *s, const char *why);
int sq_check_format(struct sqlite_store *s, int *fresh);
int sq_create_schema(struct sqlite_store *s, int *raced);
int sq_migrate_v1(struct sqlite_store *s);
int sq_upgrade_selection_cols(struct sqlite_store *s);

/* the store's operations (sqlite_traces.c, sqlite_agents.c) */
int sqlite_store_put_slice(struct sqlite_store *s, const struct rt_store_slice *sl);
int sqlite_store_slices(struct sqlite_store *s, uint64_t trace_hi, uint64_t trace_lo,
			rt_store_slice_fn fn, void *arg);
int sqlite_store_trace_rates(struct sqlite_store *s, uint64_t trace_hi, uint64_t trace_lo,
			     struct rt_store_rate *out, uint32_t max, uint32_t *n);
int sqlite_store_put_trace(struct sqlite_store *s, const struct rt_store_trace *t);
int sqlite_store_add_late(struct sqlite_store *s, const struct rt_store_slice *sl);
int sqlite_store_set_selection(struct sqlite_store *s, const struct rt_store_trace *t);
int sqlite_store_get_trace(struct sqlite_store *s, uint64_t trace_hi, uint64_t trace_lo,
			   struct rt_store_trace *out);
int sqlite_store_list(struct sqlite_store *s, const struct rt_store_query *q,
		      rt_store_trace_fn fn, void *arg);
int sqlite_store_put_agent(struct sqlite_store *s, const struct rt_store_agent *a);
int sqlite_store_delete_agent(struct sqlite_store *s, uint32_t agent_id);
int sqlite_store_put_trigger_name(struct sqlite_store *s, uint32_t id, const char *name,
				  uint64_t seen_ns);
int sqlite_store_trigger_names(struct sqlite_store *s, rt_store_trigger_name_fn fn,
			       void *arg);
int sqlite_store_agents(struct sqlite_store *s, rt_store_agent_fn fn, void *arg);
int sqlite_store_put_trigger(struct sqlite_store *s, uint32_t agent_id, uint64_t trigger_seq,
			     uint64_t received_ns, const void *msg, size_t len);
int sqlite_store_done_trigger(struct sqlite_store *s, uint32_t agent_id, uint64_t trigger_seq);
int sqlite_store_pending_triggers(struct sqlite_store *s, rt_store_trigger_fn fn, void *arg);
int sq_delete_trace(struct sqlite_store *s, uint64_t hi, uint64_t lo);
int sqlite_store_retain(struct sqlite_store *s, uint64_t now_ns, uint64_t *deleted);
int sqlite_store_delete_trace(struct sqlite_store *s, uint64_t trace_hi, uint64_t trace_lo);
int sqlite_store_stats(struct sqlite_store *s, struct rt_store_stats *out);

#endif
