/*
 * store/sqlite_agents.c — the SQLite backend's agent directory, trigger names,
 * pending triggers, retention and figures (sqlite.c says how retention walks).
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

/* ------------------------------------------------- agent directory ---- */

int sqlite_store_put_agent(struct sqlite_store *s, const struct rt_store_agent *a)
{
	sqlite3_stmt *st;
	int rc;
	if ((rc = sq_check(s, "put_agent", a ? NULL : "NULL agent", SQ_WRITE)))
		return rc;
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
	return sq_run(s, st, "put_agent");
}

int sqlite_store_delete_agent(struct sqlite_store *s, uint32_t agent_id)
{
	sqlite3_stmt *st;
	int rc;
	if ((rc = sq_check(s, "delete_agent", NULL, SQ_WRITE)))
		return rc;
	st = s->st[ST_AGENT_DEL];
	sqlite3_bind_int64(st, 1, agent_id);
	if ((rc = sq_run(s, st, "delete_agent")))
		return rc;
	if (!sqlite3_changes(s->db))
		return sq_seterr(s, RT_STORE_E_NOTFOUND, "%s: no agent %u", s->path, agent_id);
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

int sqlite_store_put_trigger_name(struct sqlite_store *s, uint32_t id, const char *name,
				  uint64_t seen_ns)
{
	sqlite3_stmt *st;
	int rc;
	if ((rc = sq_check(s, "put_trigger_name", name && *name ? NULL : "no name", SQ_WRITE)))
		return rc;
	rc = sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO trigger_names(trigger_id, name, "
				       "seen_ns) VALUES(?, ?, ?)", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return sq_sqerr(s, rc, "put_trigger_name");
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	bind_u64(st, 3, seen_ns);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : sq_sqerr(s, rc, "put_trigger_name");
}

int sqlite_store_trigger_names(struct sqlite_store *s, rt_store_trigger_name_fn fn,
			       void *arg)
{
	char name[RT_STORE_TRIGGER_NAME_MAX];
	sqlite3_stmt *st;
	int rc, ret = 0;
	if ((rc = sq_check(s, "trigger_names", fn ? NULL : "NULL callback", SQ_READ)))
		return rc;
	rc = sqlite3_prepare_v2(s->db, "SELECT trigger_id, name FROM trigger_names "
				       "ORDER BY trigger_id", -1, &st, NULL);
	if (rc != SQLITE_OK) /* a store from before trigger names (read-only): none */
		return s->readonly ? 0 : sq_sqerr(s, rc, "list trigger names");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		copy_text(name, sizeof name, st, 1);
		if ((ret = fn(arg, col_u32(st, 0), name)) != 0)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = sq_sqerr(s, rc, "list trigger names");
	sqlite3_finalize(st);
	return ret;
}

int sqlite_store_agents(struct sqlite_store *s, rt_store_agent_fn fn, void *arg)
{
	struct rt_store_agent a;
	sqlite3_stmt *st;
	int rc, priv, ret = 0;
	if ((rc = sq_check(s, "agents", fn ? NULL : "NULL callback", SQ_READ)))
		return rc;
	if (!(st = sq_walk_stmt(s, ST_AGENT_LIST, &priv)))
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
		ret = sq_sqerr(s, rc, "list agents");
	sq_walk_done(st, priv);
	return ret;
}

/* -------------------------------------------------- pending triggers ---- */

int sqlite_store_put_trigger(struct sqlite_store *s, uint32_t agent_id, uint64_t trigger_seq,
			     uint64_t received_ns, const void *msg, size_t len)
{
	sqlite3_stmt *st;
	int rc, changed;
	if ((rc = sq_check(s, "put_trigger", NULL, SQ_WRITE)))
		return rc;
	if (!msg && len)
		return sq_seterr(s, RT_STORE_E_INVAL, "%s: put_trigger: NULL msg of %zu bytes",
			      s->path, len);
	st = s->st[ST_TRIG_PUT];
	sqlite3_bind_int64(st, 1, agent_id);
	bind_u64(st, 2, trigger_seq);
	bind_u64(st, 3, received_ns);
	rc = bind_blob(st, 4, msg, len);
	if (rc != SQLITE_OK) {
		finish(st);
		return sq_sqerr(s, rc, "put_trigger");
	}
	rc = sqlite3_step(st);
	changed = sqlite3_changes(s->db);
	finish(st);
	if (rc != SQLITE_DONE)
		return sq_sqerr(s, rc, "put_trigger");
	return changed ? 0 : RT_STORE_DUPLICATE;
}

int sqlite_store_done_trigger(struct sqlite_store *s, uint32_t agent_id, uint64_t trigger_seq)
{
	sqlite3_stmt *st;
	int rc;
	if ((rc = sq_check(s, "done_trigger", NULL, SQ_WRITE)))
		return rc;
	st = s->st[ST_TRIG_DONE];
	sqlite3_bind_int64(st, 1, agent_id);
	bind_u64(st, 2, trigger_seq);
	bind_u64(st, 3, sq_wall_ns());
	if ((rc = sq_run(s, st, "done_trigger")))
		return rc;
	if (!sqlite3_changes(s->db))
		return sq_seterr(s, RT_STORE_E_NOTFOUND, "%s: no trigger %u/%llu", s->path,
			      agent_id, (unsigned long long)trigger_seq);
	return 0;
}

int sqlite_store_pending_triggers(struct sqlite_store *s, rt_store_trigger_fn fn, void *arg)
{
	static const unsigned char empty[1];
	sqlite3_stmt *st;
	int rc, priv, ret = 0;
	if ((rc = sq_check(s, "pending_triggers", fn ? NULL : "NULL callback", SQ_READ)))
		return rc;
	if (!(st = sq_walk_stmt(s, ST_TRIG_PENDING, &priv)))
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
		ret = sq_sqerr(s, rc, "list triggers");
	sq_walk_done(st, priv);
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
	return rc == SQLITE_DONE ? 0 : sq_sqerr(s, rc, what);
}

int sq_delete_trace(struct sqlite_store *s, uint64_t hi, uint64_t lo)
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
	return sq_run(s, st, "retain: delete trace");
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
	nr = sq_signed_ranges(0, UINT64_MAX, lo, hi);
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
				return sq_sqerr(s, rc, "retain: oldest traces");
			for (int i = 0; i < n; i++) {
				int old = batch[i].closed < cutoff;
				int big = max_bytes && s->tot_bytes > max_bytes;
				if (!old && !big)
					goto traces_done; /* the rest are newer */
				if ((rc = sq_delete_trace(s, batch[i].hi, batch[i].lo)))
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
		nr = sq_signed_ranges(0, cutoff - 1, lo, hi);
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
		nr = sq_signed_ranges(0, now_ns - trig_keep - 1, lo, hi);
		for (int r = 0; r < nr; r++) {
			sqlite3_stmt *st = s->st[ST_TRIG_DEL_DONE];
			sqlite3_bind_int64(st, 1, lo[r]);
			sqlite3_bind_int64(st, 2, hi[r]);
			if ((rc = sq_run(s, st, "retain: done triggers")))
				return rc;
		}
	}
	return 0;
}

int sqlite_store_retain(struct sqlite_store *s, uint64_t now_ns, uint64_t *deleted)
{
	uint64_t n = 0;
	int rc, own;
	if (deleted)
		*deleted = 0;
	if ((rc = sq_check(s, "retain", NULL, SQ_WRITE)))
		return rc;
	if ((rc = sq_txn_enter(s, &own)))
		return rc;
	rc = sq_txn_leave(s, own, retain_locked(s, now_ns, &n));
	if (deleted && !rc)
		*deleted = n;
	return rc;
}

int sqlite_store_delete_trace(struct sqlite_store *s, uint64_t trace_hi, uint64_t trace_lo)
{
	int rc, own, found;
	if ((rc = sq_check(s, "sq_delete_trace", NULL, SQ_WRITE)))
		return rc;
	if ((rc = sq_txn_enter(s, &own)))
		return rc;
	rc = sq_delete_trace(s, trace_hi, trace_lo);
	found = !rc && sqlite3_changes(s->db) > 0; /* changes of the last statement: the row */
	if ((rc = sq_txn_leave(s, own, rc)))
		return rc;
	if (!found)
		return sq_seterr(s, RT_STORE_E_NOTFOUND, "%s: sq_delete_trace: no trace %016llx%016llx",
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

int sqlite_store_stats(struct sqlite_store *s, struct rt_store_stats *out)
{
	sqlite3_stmt *st;
	int rc;
	if ((rc = sq_check(s, "stats", out ? NULL : "NULL output", SQ_READ)))
		return rc;
	memset(out, 0, sizeof *out);
	st = s->st[ST_STATS];
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		finish(st);
		return sq_sqerr(s, rc, "stats");
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
