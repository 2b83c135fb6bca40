/*
 * store/store.c — the store interface: pick a backend from the locator, dispatch.
 *
 * rt_store_open reads o->path as a locator: "clickhouse://HOST:PORT/DB" is the
 * ClickHouse backend (clickhouse.c), "sqlite:PATH" or a bare path the SQLite
 * backend (sqlite.c). The backend gets the locator without its scheme. Every
 * other call checks the handle and calls the backend's entry of the same
 * name: a backend never sees a NULL handle. rt_store_errmsg(NULL) is the
 * failure of the last open on this thread, whichever backend it was.
 */
#include "backend.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char open_err[512];

#define CH_SCHEME "clickhouse://"
#define SQLITE_SCHEME "sqlite:"

const struct rt_store_backend *rt_store_backend_of(const char *locator, const char **rest)
{
	size_t ch = strlen(CH_SCHEME), sq = strlen(SQLITE_SCHEME);
	if (!locator)
		locator = RT_STORE_DEFAULT_PATH;
	if (!strncmp(locator, CH_SCHEME, ch)) {
		*rest = locator + ch;
		return &rt_store_clickhouse_backend;
	}
	if (!strncmp(locator, SQLITE_SCHEME, sq)) {
		*rest = locator + sq;
		return &rt_store_sqlite_backend;
	}
	*rest = locator;
	return &rt_store_sqlite_backend;
}

int rt_store_open(struct rt_store **out, const struct rt_store_options *o)
{
	const struct rt_store_backend *be;
	struct rt_store_options bo;
	int rc;
	open_err[0] = 0;
	if (!out) {
		snprintf(open_err, sizeof open_err, "rt_store_open: NULL handle pointer");
		return RT_STORE_E_INVAL;
	}
	*out = NULL;
	if (!o) {
		snprintf(open_err, sizeof open_err, "rt_store_open: NULL options");
		return RT_STORE_E_INVAL;
	}
	bo = *o;
	be = rt_store_backend_of(o->path, &bo.path);
	rc = be->open(out, &bo);
	if (rc != 0 || !*out) {
		snprintf(open_err, sizeof open_err, "%s", be->errmsg(NULL));
		*out = NULL;
		return rc ? rc : RT_STORE_E_OPEN;
	}
	(*out)->be = be;
	return 0;
}

void rt_store_close(struct rt_store *s)
{
	if (s)
		s->be->close(s);
}

const char *rt_store_errmsg(const struct rt_store *s)
{
	return s ? s->be->errmsg(s) : open_err;
}

const char *rt_store_strerror(int err)
{
	switch (err) {
	case RT_STORE_OK: return "ok";
	case RT_STORE_DUPLICATE: return "already stored";
	case RT_STORE_E_OPEN: return "cannot open the store, or not a retrace store";
	case RT_STORE_E_SCHEMA: return "unknown or newer store schema version";
	case RT_STORE_E_IO: return "store I/O error";
	case RT_STORE_E_BUSY: return "store locked by another writer";
	case RT_STORE_E_NOTFOUND: return "not found";
	case RT_STORE_E_READONLY: return "store is read-only";
	case RT_STORE_E_INVAL: return "invalid argument";
	default: return "unknown store error";
	}
}

const char *rt_store_path(const struct rt_store *s)
{
	return s ? s->be->path(s) : NULL;
}

const char *rt_store_backend_name(const struct rt_store *s)
{
	return s ? s->be->name : NULL;
}

#define DISPATCH(s, call) ((s) ? (s)->be->call : RT_STORE_E_INVAL)

int rt_store_begin(struct rt_store *s) { return DISPATCH(s, begin(s)); }
int rt_store_commit(struct rt_store *s) { return DISPATCH(s, commit(s)); }
void rt_store_rollback(struct rt_store *s)
{
	if (s)
		s->be->rollback(s);
}

int rt_store_put_slice(struct rt_store *s, const struct rt_store_slice *sl)
{
	return DISPATCH(s, put_slice(s, sl));
}

int rt_store_slices(struct rt_store *s, uint64_t trace_hi, uint64_t trace_lo,
		    rt_store_slice_fn fn, void *arg)
{
	return DISPATCH(s, slices(s, trace_hi, trace_lo, fn, arg));
}

int rt_store_trace_rates(struct rt_store *s, uint64_t trace_hi, uint64_t trace_lo,
			 struct rt_store_rate *out, uint32_t max, uint32_t *n)
{
	return DISPATCH(s, trace_rates(s, trace_hi, trace_lo, out, max, n));
}

int rt_store_put_trace(struct rt_store *s, const struct rt_store_trace *t)
{
	return DISPATCH(s, put_trace(s, t));
}

int rt_store_add_late(struct rt_store *s, const struct rt_store_slice *sl)
{
	return DISPATCH(s, add_late(s, sl));
}

int rt_store_set_selection(struct rt_store *s, const struct rt_store_trace *t)
{
	return DISPATCH(s, set_selection(s, t));
}

int rt_store_delete_trace(struct rt_store *s, uint64_t trace_hi, uint64_t trace_lo)
{
	return DISPATCH(s, delete_trace(s, trace_hi, trace_lo));
}

int rt_store_get_trace(struct rt_store *s, uint64_t trace_hi, uint64_t trace_lo,
		       struct rt_store_trace *out)
{
	return DISPATCH(s, get_trace(s, trace_hi, trace_lo, out));
}

int rt_store_list(struct rt_store *s, const struct rt_store_query *q,
		  rt_store_trace_fn fn, void *arg)
{
	return DISPATCH(s, list(s, q, fn, arg));
}

int rt_store_wants_spans(const struct rt_store *s)
{
	return s && s->be->wants_spans;
}

int rt_store_put_spans(struct rt_store *s, const struct rt_store_span *spans, uint32_t n)
{
	if (s && n && !spans)
		return RT_STORE_E_INVAL;
	return DISPATCH(s, put_spans(s, spans, n));
}

int rt_store_put_agent(struct rt_store *s, const struct rt_store_agent *a)
{
	return DISPATCH(s, put_agent(s, a));
}

int rt_store_delete_agent(struct rt_store *s, uint32_t agent_id)
{
	return DISPATCH(s, delete_agent(s, agent_id));
}

/* The record format's names (shm/events.h): letters, digits and "-_.:/", so a
 * backend may quote one inline in SQL. */
#define TRIGGER_NAME_CHARS                                                              \
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.:/"

int rt_store_put_trigger_name(struct rt_store *s, uint32_t trigger_id, const char *name,
			      uint64_t seen_ns)
{
	if (s && (!name || !*name || strlen(name) >= RT_STORE_TRIGGER_NAME_MAX ||
		  strspn(name, TRIGGER_NAME_CHARS) != strlen(name)))
		return RT_STORE_E_INVAL;
	return DISPATCH(s, put_trigger_name(s, trigger_id, name, seen_ns));
}

int rt_store_trigger_names(struct rt_store *s, rt_store_trigger_name_fn fn, void *arg)
{
	return DISPATCH(s, trigger_names(s, fn, arg));
}

int rt_store_agents(struct rt_store *s, rt_store_agent_fn fn, void *arg)
{
	return DISPATCH(s, agents(s, fn, arg));
}

int rt_store_put_trigger(struct rt_store *s, uint32_t agent_id, uint64_t trigger_seq,
			 uint64_t received_ns, const void *msg, size_t len)
{
	return DISPATCH(s, put_trigger(s, agent_id, trigger_seq, received_ns, msg, len));
}

int rt_store_done_trigger(struct rt_store *s, uint32_t agent_id, uint64_t trigger_seq)
{
	return DISPATCH(s, done_trigger(s, agent_id, trigger_seq));
}

int rt_store_pending_triggers(struct rt_store *s, rt_store_trigger_fn fn, void *arg)
{
	return DISPATCH(s, pending_triggers(s, fn, arg));
}

int rt_store_retain(struct rt_store *s, uint64_t now_ns, uint64_t *deleted)
{
	if (deleted)
		*deleted = 0;
	return DISPATCH(s, retain(s, now_ns, deleted));
}

int rt_store_stats(struct rt_store *s, struct rt_store_stats *out)
{
	return DISPATCH(s, stats(s, out));
}

/* One half of a trace id: n (<= 16) hex digits, all checked first. */
static int parse_hex_word(const char *s, size_t n, uint64_t *out)
{
	char word[17];
	size_t i;
	for (i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return -1;
	memcpy(word, s, n);
	word[n] = 0;
	*out = strtoull(word, NULL, 16);
	return 0;
}

int rt_store_parse_trace_id(const char *s, size_t n, uint64_t *hi, uint64_t *lo)
{
	uint64_t h = 0, l;
	if (n != 32 && (n == 0 || n > 16))
		return -1;
	if (n == 32 && parse_hex_word(s, 16, &h) != 0)
		return -1;
	if (parse_hex_word(n == 32 ? s + 16 : s, n == 32 ? 16 : n, &l) != 0 || !l)
		return -1;
	*hi = h;
	*lo = l;
	return 0;
}
