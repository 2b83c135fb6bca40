/*
 * store/sqlite_traces.c — the SQLite backend's slices and traces: put, walk,
 * late additions, selection columns, lookups and listings (sqlite.c says how
 * integers and unsigned ranges are stored and compared).
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
		return sq_seterr(s, RT_STORE_E_IO, "%s: trace %016llx%016llx: corrupt id list",
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

/* ------------------------------------------------------------ slices ---- */

int sqlite_store_put_slice(struct sqlite_store *s, const struct rt_store_slice *sl)
{
	sqlite3_stmt *st;
	int rc, changed;
	if ((rc = sq_check(s, "put_slice", sl ? NULL : "NULL slice", SQ_WRITE)))
		return rc;
	if (!s->in_txn)
		return sq_seterr(s, RT_STORE_E_INVAL,
			      "%s: put_slice: no open transaction (call rt_store_begin)",
			      s->path);
	if (!sl->msg && sl->msg_len)
		return sq_seterr(s, RT_STORE_E_INVAL, "%s: put_slice: NULL msg of %zu bytes",
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
		return sq_sqerr(s, rc, "put_slice");
	}
	rc = sqlite3_step(st);
	changed = sqlite3_changes(s->db);
	finish(st);
	if (rc != SQLITE_DONE)
		return sq_sqerr(s, rc, "put_slice");
	if (!changed)
		return RT_STORE_DUPLICATE;
	s->tot_slices++;
	s->tot_bytes += sl->bytes;
	s->tot_dirty = 1;
	return 0;
}

int sqlite_store_slices(struct sqlite_store *s, uint64_t trace_hi, uint64_t trace_lo,
			rt_store_slice_fn fn, void *arg)
{
	struct rt_store_slice sl;
	sqlite3_stmt *st;
	int rc, priv, ret = 0;
	if ((rc = sq_check(s, "slices", fn ? NULL : "NULL callback", SQ_READ)))
		return rc;
	if (!(st = sq_walk_stmt(s, ST_SLICE_WALK, &priv)))
		return RT_STORE_E_IO;
	bind_u64(st, 1, trace_lo);
	bind_u64(st, 2, trace_hi);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		row_to_slice(st, &sl);
		if ((ret = fn(arg, &sl)) != 0)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = sq_sqerr(s, rc, "read slices");
	sq_walk_done(st, priv);
	return ret;
}

int sqlite_store_trace_rates(struct sqlite_store *s, uint64_t trace_hi, uint64_t trace_lo,
			     struct rt_store_rate *out, uint32_t max, uint32_t *n)
{
	sqlite3_stmt *st;
	int rc, priv;
	if ((rc = sq_check(s, "trace_rates", n && (out || !max) ? NULL : "NULL output",
			   SQ_READ)))
		return rc;
	*n = 0;
	if (!(st = sq_walk_stmt(s, ST_SLICE_RATES, &priv)))
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
	sq_walk_done(st, priv);
	if (rc != SQLITE_DONE)
		return sq_sqerr(s, rc, "read slice rates");
	return 0;
}

/* ------------------------------------------------------------ traces ---- */

int sqlite_store_put_trace(struct sqlite_store *s, const struct rt_store_trace *t)
{
	char trig[U32LIST_CAP], agents[U32LIST_CAP], missing[U32LIST_CAP];
	sqlite3_stmt *st;
	int rc;
	if ((rc = sq_check(s, "put_trace", t ? NULL : "NULL trace", SQ_WRITE)))
		return rc;
	if (t->trigger_count > RT_STORE_MAX_TRIGGERS || t->agent_count > RT_STORE_MAX_AGENTS ||
	    t->missing_count > RT_STORE_MAX_AGENTS)
		return sq_seterr(s, RT_STORE_E_INVAL,
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
	return sq_run(s, st, "put_trace");
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
			return sq_seterr(s, RT_STORE_E_NOTFOUND,
				      "%s: add_late: no trace %016llx%016llx", s->path,
				      (unsigned long long)sl->trace_hi,
				      (unsigned long long)sl->trace_lo);
		return sq_sqerr(s, rc, "add_late");
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
	return sq_run(s, st, "add_late");
}

int sqlite_store_add_late(struct sqlite_store *s, const struct rt_store_slice *sl)
{
	int rc, own;
	if ((rc = sq_check(s, "add_late", sl ? NULL : "NULL slice", SQ_WRITE)))
		return rc;
	if ((rc = sq_txn_enter(s, &own)))
		return rc;
	return sq_txn_leave(s, own, add_late_locked(s, sl));
}

int sqlite_store_set_selection(struct sqlite_store *s, const struct rt_store_trace *t)
{
	sqlite3_stmt *st;
	int rc;
	if ((rc = sq_check(s, "set_selection", t ? NULL : "NULL trace", SQ_WRITE)))
		return rc;
	st = s->st[ST_TRACE_SELECT];
	bind_u64(st, 1, t->trace_lo);
	bind_u64(st, 2, t->trace_hi);
	sqlite3_bind_double(st, 3, t->score);
	bind_u64(st, 4, t->pattern);
	bind_u64(st, 5, t->group_key);
	sqlite3_bind_text(st, 6, t->group, (int)strnlen(t->group, sizeof t->group - 1),
			  SQLITE_STATIC);
	sqlite3_bind_double(st, 7, t->weight);
	if ((rc = sq_run(s, st, "set_selection")))
		return rc;
	if (!sqlite3_changes(s->db))
		return sq_seterr(s, RT_STORE_E_NOTFOUND, "%s: set_selection: no trace %016llx%016llx",
			      s->path, (unsigned long long)t->trace_hi,
			      (unsigned long long)t->trace_lo);
	return 0;
}

int sqlite_store_get_trace(struct sqlite_store *s, uint64_t trace_hi, uint64_t trace_lo,
			   struct rt_store_trace *out)
{
	sqlite3_stmt *st;
	int rc;
	if ((rc = sq_check(s, "get_trace", out ? NULL : "NULL output", SQ_READ)))
		return rc;
	st = s->st[ST_TRACE_GET];
	bind_u64(st, 1, trace_lo);
	bind_u64(st, 2, trace_hi);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		rc = row_to_trace(s, st, out);
	else if (rc == SQLITE_DONE)
		rc = sq_seterr(s, RT_STORE_E_NOTFOUND, "%s: no trace %016llx%016llx", s->path,
			    (unsigned long long)trace_hi, (unsigned long long)trace_lo);
	else
		rc = sq_sqerr(s, rc, "get_trace");
	finish(st);
	return rc;
}

int sqlite_store_list(struct sqlite_store *s, const struct rt_store_query *q,
		      rt_store_trace_fn fn, void *arg)
{
	struct rt_store_trace t;
	int64_t lo[2], hi[2];
	char trig[16];
	uint64_t left;
	int nr, rc = 0, ret = 0;
	if ((rc = sq_check(s, "list", !q ? "NULL query" : !fn ? "NULL callback" : NULL, SQ_READ)))
		return rc;
	left = q->limit ? q->limit : UINT64_MAX;
	if (q->by_trigger)
		snprintf(trig, sizeof trig, ",%u,", q->trigger_id);
	nr = sq_signed_ranges(q->since_ns, UINT64_MAX, lo, hi);
	/* Newest first: the high unsigned range first. */
	for (int r = nr - 1; r >= 0 && left && !ret; r--) {
		int priv;
		sqlite3_stmt *st = sq_walk_stmt(s, ST_TRACE_LIST, &priv);
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
			ret = sq_sqerr(s, rc, "list traces");
		sq_walk_done(st, priv);
	}
	return ret;
}
