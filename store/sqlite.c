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
 *
 * The code: this file (open, close, errors, statements, transactions, the
 * checkpointer, the vtable), sqlite_schema.c (SQL text, schema, version check,
 * migrations), sqlite_traces.c (slices, traces), sqlite_agents.c (agents,
 * trigger names, pending triggers, retention, figures); what they share is in
 * sqlite_internal.h.
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

/* The failure of an open that returned no handle, for rt_store_errmsg(NULL). */
static _Thread_local char open_err[512];

/* ------------------------------------------------------------ errors ---- */

int sq_seterr(struct sqlite_store *s, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s ? s->err : open_err, s ? sizeof s->err : sizeof open_err, fmt, ap);
	va_end(ap);
	return code;
}

int sq_map_sqlite(int rc)
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
int sq_sqerr(struct sqlite_store *s, int rc, const char *what)
{
	return sq_seterr(s, sq_map_sqlite(rc), "%s: %s: %s", s->path, what,
		      s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
}

int sq_readonly_err(struct sqlite_store *s, const char *what)
{
	return sq_seterr(s, RT_STORE_E_READONLY, "%s: %s: the store is open read-only", s->path,
		      what);
}

int sq_check(struct sqlite_store *s, const char *what, const char *missing, int mode)
{
	if (!s)
		return RT_STORE_E_INVAL; /* no store to hold a message */
	if (missing)
		return sq_seterr(s, RT_STORE_E_INVAL, "%s: %s: %s", s->path, what, missing);
	if (mode == SQ_WRITE && s->readonly)
		return sq_readonly_err(s, what);
	return 0;
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

/* Step a statement that returns no rows (or whose rows are ignored). */
int sq_run(struct sqlite_store *s, sqlite3_stmt *st, const char *what)
{
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	finish(st);
	return rc == SQLITE_DONE ? 0 : sq_sqerr(s, rc, what);
}

/* The statement for a walk: the shared one, or a private copy if it is running. */
sqlite3_stmt *sq_walk_stmt(struct sqlite_store *s, enum st id, int *priv)
{
	sqlite3_stmt *st = s->st[id];
	int rc;
	*priv = 0;
	if (!sqlite3_stmt_busy(st))
		return st;
	rc = sqlite3_prepare_v2(s->db, sq_stmt_sql(s, id), -1, &st, NULL);
	if (rc != SQLITE_OK) {
		sq_sqerr(s, rc, "prepare");
		return NULL;
	}
	*priv = 1;
	return st;
}

void sq_walk_done(sqlite3_stmt *st, int priv)
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
int sq_signed_ranges(uint64_t a, uint64_t b, int64_t lo[2], int64_t hi[2])
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

uint64_t sq_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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
		return sq_seterr(s, RT_STORE_E_IO, "%s: meta has no %s", s->path, key);
	return sq_sqerr(s, rc, "read meta");
}

static int meta_set(struct sqlite_store *s, const char *key, uint64_t v)
{
	sqlite3_stmt *st = s->st[ST_META_SET];
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	bind_u64(st, 2, v);
	return sq_run(s, st, "write meta");
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
	if ((rc = sq_check(s, "begin", NULL, SQ_WRITE)))
		return rc;
	if (s->in_txn)
		return sq_seterr(s, RT_STORE_E_INVAL, "%s: begin: a transaction is already open",
			      s->path);
	rc = sq_run(s, s->st[ST_BEGIN], "begin");
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
	if ((rc = sq_check(s, "commit", NULL, SQ_WRITE)))
		return rc;
	if (!s->in_txn)
		return sq_seterr(s, RT_STORE_E_INVAL, "%s: commit: no open transaction", s->path);
	if (sqlite3_get_autocommit(s->db)) {
		/* SQLite rolled back on an earlier error (disk full, I/O). */
		s->in_txn = 0;
		s->tot_dirty = 0;
		return sq_seterr(s, RT_STORE_E_IO,
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
	rc = sq_sqerr(s, rc, "commit");
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
int sq_txn_enter(struct sqlite_store *s, int *own)
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

int sq_txn_leave(struct sqlite_store *s, int own, int rc)
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
	int rc = sq_exec_sql(s, "PRAGMA wal_autocheckpoint=0; PRAGMA journal_size_limit=67108864",
			  "turn automatic checkpoints off");
	if (rc)
		return rc;
	rc = sqlite3_open_v2(s->path, &s->ckpt_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK)
		return sq_seterr(s, RT_STORE_E_OPEN, "%s: checkpoint connection: %s", s->path,
			      s->ckpt_db ? sqlite3_errmsg(s->ckpt_db) : sqlite3_errstr(rc));
	sqlite3_busy_timeout(s->ckpt_db, BUSY_TIMEOUT_MS);
	/* A connection that has not read the file yet does not know it is in WAL
	 * mode, and its checkpoints do nothing (they report -1 frames). */
	rc = sqlite3_exec(s->ckpt_db, "PRAGMA journal_mode", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return sq_seterr(s, RT_STORE_E_OPEN, "%s: checkpoint connection: %s", s->path,
			      sqlite3_errmsg(s->ckpt_db));
	pthread_mutex_init(&s->ckpt_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->ckpt_cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&s->ckpt_thread, NULL, checkpointer, s) != 0) {
		pthread_cond_destroy(&s->ckpt_cv);
		pthread_mutex_destroy(&s->ckpt_mu);
		return sq_seterr(s, RT_STORE_E_OPEN, "%s: cannot start the checkpoint thread", s->path);
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

static int set_wal(struct sqlite_store *s)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return sq_sqerr(s, rc, "set WAL mode");
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *mode = (const char *)sqlite3_column_text(st, 0);
		rc = mode && !strcmp(mode, "wal")
			     ? 0
			     : sq_seterr(s, RT_STORE_E_OPEN, "%s: cannot use WAL (journal mode %s)",
				      s->path, mode ? mode : "?");
	} else {
		rc = sq_sqerr(s, rc, "set WAL mode");
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
			return sq_seterr(s, RT_STORE_E_OPEN, "%s: is a directory", s->path);
		return 0;
	}
	if (errno != ENOENT)
		return sq_seterr(s, RT_STORE_E_OPEN, "%s: %s", s->path, strerror(errno));
	if (s->readonly)
		return sq_seterr(s, RT_STORE_E_OPEN, "%s: no such file", s->path);
	/* Writable: the file will be created, but not its directory. */
	{
		char *dir = strdup(s->path);
		char *slash;
		int rc = 0;
		if (!dir)
			return sq_seterr(s, RT_STORE_E_OPEN, "%s: out of memory", s->path);
		slash = strrchr(dir, '/');
		if (slash) {
			if (slash == dir)
				slash[1] = 0;
			else
				*slash = 0;
			if (stat(dir, &sb) != 0)
				rc = sq_seterr(s, RT_STORE_E_OPEN, "%s: directory %s: %s", s->path,
					    dir, strerror(errno));
			else if (!S_ISDIR(sb.st_mode))
				rc = sq_seterr(s, RT_STORE_E_OPEN, "%s: %s is not a directory",
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
		return errno == EEXIST ? 0 : sq_seterr(s, RT_STORE_E_OPEN, "%s: cannot create: %s",
						    s->path, strerror(errno));
	if (o->group_readable &&
	    (fchown(fd, (uid_t)-1, (gid_t)o->gid) != 0 || fchmod(fd, 0640) != 0)) {
		int e = errno;
		close(fd);
		unlink(s->path);
		return sq_seterr(s, RT_STORE_E_OPEN, "%s: cannot give it to group %ld: %s", s->path,
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
		return sq_seterr(NULL, RT_STORE_E_INVAL, "rt_store_open: NULL handle pointer");
	*out = NULL;
	if (!o)
		return sq_seterr(NULL, RT_STORE_E_INVAL, "rt_store_open: NULL options");
	path = o->path ? o->path : RT_STORE_DEFAULT_PATH;
	if (!*path)
		return sq_seterr(NULL, RT_STORE_E_INVAL, "rt_store_open: empty path");
	s = calloc(1, sizeof *s);
	if (!s || !(s->path = strdup(path))) {
		free(s);
		return sq_seterr(NULL, RT_STORE_E_OPEN, "%s: out of memory", path);
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
		sq_seterr(s, RT_STORE_E_OPEN, "%s: %s", s->path,
		       s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		return open_fail(s, RT_STORE_E_OPEN);
	}
	sqlite3_extended_result_codes(s->db, 1);
	sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);

	for (int tries = 0;; tries++) {
		if ((rc = sq_check_format(s, &fresh)))
			return open_fail(s, rc);
		if (!fresh)
			break;
		if (s->readonly)
			return open_fail(s, sq_not_ours(s, "empty database"));
		if (tries)
			return open_fail(s, sq_not_ours(s, "schema vanished while opening"));
		if ((rc = sq_create_schema(s, &raced)))
			return open_fail(s, rc);
		if (!raced)
			break;
	}
	/* WAL is persistent in the file: a no-op once set. Only on our own file. */
	if (!s->readonly && (rc = set_wal(s)))
		return open_fail(s, rc);
	/* A 32 MiB page cache keeps the slices' random-key index pages hot: about
	 * 1.4x the put_slice rate of the 2 MiB default. */
	rc = sq_exec_sql(s, o->sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
		      "set pragmas");
	if (!rc)
		rc = sq_exec_sql(s, "PRAGMA temp_store=MEMORY; PRAGMA cache_size=-32768;",
			      "set pragmas");
	if (rc)
		return open_fail(s, rc);

	if ((rc = sq_upgrade_selection_cols(s)) || (rc = sq_migrate_v1(s)))
		return open_fail(s, rc);
	/* Trigger names (added in session 8 without a version bump: a table an
	 * older reader never looks at; a reader of an older store finds none). */
	if (!s->readonly && (rc = sq_exec_sql(s, TRIGGER_NAMES_SQL, "create trigger_names")))
		return open_fail(s, rc);
	if (!s->readonly && o->background_checkpoint && (rc = start_checkpointer(s)))
		return open_fail(s, rc);
	for (int i = 0; i < ST_N; i++) {
		rc = sqlite3_prepare_v3(s->db, sq_stmt_sql(s, i), -1, SQLITE_PREPARE_PERSISTENT,
					&s->st[i], NULL);
		if (rc != SQLITE_OK) {
			sq_seterr(s, RT_STORE_E_OPEN, "%s: not a usable retrace store: %s", s->path,
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
	return SQ(s)->readonly ? sq_readonly_err(SQ(s), "put_spans") : 0;
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
