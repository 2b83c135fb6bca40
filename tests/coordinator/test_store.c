/*
 * tests/coordinator/test_store.c — the SQLite backend of the store (store/sqlite.c), on real files.
 *
 * Every test works in its own directory under one mkdtemp root that main()
 * removes at the end (a failing check ends the forked test with _exit, so a
 * per-test teardown would not run). Data is always read back through the store
 * and compared field by field, blobs byte by byte; foreign files are made and
 * inspected with SQLite directly.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/suite.h"
#include "store.h"

#define BIG (1ull << 63)
#define SEC 1000000000ull

/* ------------------------------------------------------- temp dirs ---- */

static char g_root[1024];
static char g_dir[1100];

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void setup(void)
{
	snprintf(g_dir, sizeof g_dir, "%s/tXXXXXX", g_root);
	ck_assert_msg(mkdtemp(g_dir) != NULL, "mkdtemp: %s", strerror(errno));
}

static void teardown(void)
{
	nftw(g_dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static const char *dbpath(const char *name)
{
	static char buf[4][PATH_MAX];
	static int i;
	char *p = buf[i++ & 3];
	snprintf(p, PATH_MAX, "%s/%s", g_dir, name);
	return p;
}

static struct rt_store *open_rw(const char *path)
{
	struct rt_store_options o = { .path = path };
	struct rt_store *s = NULL;
	int rc = rt_store_open(&s, &o);
	ck_assert_msg(rc == 0, "open %s: %d %s", path, rc, rt_store_errmsg(NULL));
	ck_assert_ptr_nonnull(s);
	return s;
}

static struct rt_store *open_ro(const char *path)
{
	struct rt_store_options o = { .path = path, .readonly = 1 };
	struct rt_store *s = NULL;
	int rc = rt_store_open(&s, &o);
	ck_assert_msg(rc == 0, "open ro %s: %d %s", path, rc, rt_store_errmsg(NULL));
	return s;
}

static off_t file_size(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? sb.st_size : -1;
}

/* --------------------------------------------------------- payloads ---- */

/* Deterministic bytes from a seed, zeros included. */
static void fill(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x1234567;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (i % 7 == 3) ? 0 : (uint8_t)x;
	}
}

static struct rt_store_slice mk(uint64_t hi, uint64_t lo, uint32_t agent, uint64_t seq,
				const void *msg, size_t len)
{
	struct rt_store_slice sl;
	memset(&sl, 0, sizeof sl);
	sl.trace_hi = hi;
	sl.trace_lo = lo;
	sl.agent_id = agent;
	sl.trigger_id = 3;
	sl.slice_seq = seq;
	sl.received_ns = 1000 + seq;
	sl.buffers = 2;
	sl.bytes = len;
	sl.first_ns = 10;
	sl.last_ns = 20;
	sl.msg = msg;
	sl.msg_len = len;
	return sl;
}

/* A copy of the slices a walk returned. */
struct got {
	struct rt_store_slice *v;
	uint8_t **msg;
	size_t n, cap;
	size_t stop_after; /* 0: never stop */
};

static int collect(void *arg, const struct rt_store_slice *sl)
{
	struct got *g = arg;
	if (g->n == g->cap) {
		g->cap = g->cap ? g->cap * 2 : 16;
		g->v = realloc(g->v, g->cap * sizeof *g->v);
		g->msg = realloc(g->msg, g->cap * sizeof *g->msg);
		ck_assert(g->v && g->msg);
	}
	ck_assert_ptr_nonnull(sl->msg);
	g->v[g->n] = *sl;
	g->msg[g->n] = malloc(sl->msg_len + 1);
	memcpy(g->msg[g->n], sl->msg, sl->msg_len);
	g->v[g->n].msg = g->msg[g->n];
	g->n++;
	return g->stop_after && g->n >= g->stop_after ? 77 : 0;
}

static void got_free(struct got *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->msg[i]);
	free(g->v);
	free(g->msg);
	memset(g, 0, sizeof *g);
}

static void walk(struct rt_store *s, uint64_t hi, uint64_t lo, struct got *g)
{
	int rc;
	memset(g, 0, sizeof *g);
	rc = rt_store_slices(s, hi, lo, collect, g);
	ck_assert_msg(rc == 0, "slices: %d %s", rc, rt_store_errmsg(s));
}

static void slice_eq(const struct rt_store_slice *a, const struct rt_store_slice *b)
{
	ck_assert_uint_eq(a->trace_hi, b->trace_hi);
	ck_assert_uint_eq(a->trace_lo, b->trace_lo);
	ck_assert_uint_eq(a->agent_id, b->agent_id);
	ck_assert_uint_eq(a->trigger_id, b->trigger_id);
	ck_assert_uint_eq(a->slice_seq, b->slice_seq);
	ck_assert_uint_eq(a->received_ns, b->received_ns);
	ck_assert_uint_eq(a->buffers, b->buffers);
	ck_assert_uint_eq(a->bytes, b->bytes);
	ck_assert_uint_eq(a->first_ns, b->first_ns);
	ck_assert_uint_eq(a->last_ns, b->last_ns);
	ck_assert_int_eq(a->late != 0, b->late != 0);
	ck_assert_uint_eq(a->msg_len, b->msg_len);
	ck_assert_msg(a->msg_len == 0 || memcmp(a->msg, b->msg, a->msg_len) == 0,
		      "msg of slice %llu differs", (unsigned long long)a->slice_seq);
}

static void put_ok(struct rt_store *s, const struct rt_store_slice *sl)
{
	int rc = rt_store_put_slice(s, sl);
	ck_assert_msg(rc == 0, "put_slice: %d %s", rc, rt_store_errmsg(s));
}

static void begin_ok(struct rt_store *s)
{
	int rc = rt_store_begin(s);
	ck_assert_msg(rc == 0, "begin: %d %s", rc, rt_store_errmsg(s));
}

static void commit_ok(struct rt_store *s)
{
	int rc = rt_store_commit(s);
	ck_assert_msg(rc == 0, "commit: %d %s", rc, rt_store_errmsg(s));
}

static struct rt_store_stats stats(struct rt_store *s)
{
	struct rt_store_stats st;
	int rc = rt_store_stats(s, &st);
	ck_assert_msg(rc == 0, "stats: %d %s", rc, rt_store_errmsg(s));
	return st;
}

/* One SQL integer from a file, read with SQLite directly. */
static long long sql_int(const char *path, const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	long long v = -1;
	ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
		      sqlite3_errmsg(db));
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static void sql_exec(const char *path, const char *sql)
{
	sqlite3 *db;
	char *err = NULL;
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, &err) == SQLITE_OK, "%s: %s", sql,
		      err ? err : "?");
	sqlite3_close(db);
}

/* ------------------------------------------------------------ slices ---- */

START_TEST(test_slice_roundtrip)
{
	const char *path = dbpath("s.db");
	struct rt_store *s = open_rw(path);
	static uint8_t m1[1000], m3[300000], m4[64], m5[50];
	const uint64_t hi = 0xFEDCBA9876543210ull, lo = BIG | 1;
	struct rt_store_slice in[5];
	struct got g;

	fill(m1, sizeof m1, 1);
	fill(m3, sizeof m3, 3);
	fill(m4, sizeof m4, 4);
	fill(m5, sizeof m5, 5);
	/* Every field at an extreme, uint64s at or above 2^63. */
	in[0] = mk(hi, lo, 7, 0, m1, sizeof m1);
	in[0].trigger_id = UINT32_MAX;
	in[0].received_ns = BIG;
	in[0].buffers = UINT32_MAX;
	in[0].bytes = UINT64_MAX;
	in[0].first_ns = BIG + 12345;
	in[0].last_ns = UINT64_MAX - 1;
	in[0].late = 5; /* any non-zero is "late" */
	in[1] = mk(hi, lo, 7, UINT64_MAX, NULL, 0); /* empty message, largest seq */
	in[2] = mk(hi, lo, 7, 5, m3, sizeof m3);     /* 300 KB blob */
	in[3] = mk(hi, lo, 3, BIG + 9, m4, sizeof m4);
	in[3].agent_id = 3;
	in[4] = mk(hi, lo + 1, 7, 0, m5, sizeof m5); /* another trace */

	begin_ok(s);
	for (int i = 0; i < 5; i++)
		put_ok(s, &in[i]);
	commit_ok(s);

	/* (agent_id, slice_seq) order, slice_seq unsigned. */
	const int order[4] = { 3, 0, 2, 1 };
	walk(s, hi, lo, &g);
	ck_assert_uint_eq(g.n, 4);
	for (int i = 0; i < 4; i++)
		slice_eq(&g.v[i], &in[order[i]]);
	ck_assert_int_eq(g.v[1].late, 1);
	got_free(&g);

	/* Persisted: a fresh read-only handle sees the same. */
	rt_store_close(s);
	s = open_ro(path);
	walk(s, hi, lo, &g);
	ck_assert_uint_eq(g.n, 4);
	for (int i = 0; i < 4; i++)
		slice_eq(&g.v[i], &in[order[i]]);
	got_free(&g);
	walk(s, hi, lo + 1, &g);
	ck_assert_uint_eq(g.n, 1);
	slice_eq(&g.v[0], &in[4]);
	got_free(&g);

	/* Short id (hi 0) matches lo alone; a wrong hi matches nothing. */
	walk(s, 0, lo, &g);
	ck_assert_uint_eq(g.n, 4);
	got_free(&g);
	walk(s, hi + 1, lo, &g);
	ck_assert_uint_eq(g.n, 0);
	got_free(&g);

	/* A non-zero callback return stops the walk and is returned. */
	memset(&g, 0, sizeof g);
	g.stop_after = 2;
	ck_assert_int_eq(rt_store_slices(s, hi, lo, collect, &g), 77);
	ck_assert_uint_eq(g.n, 2);
	got_free(&g);
	rt_store_close(s);
}
END_TEST

START_TEST(test_slice_duplicate)
{
	struct rt_store *s = open_rw(dbpath("d.db"));
	uint8_t a[100], b[100], c[30];
	struct rt_store_slice sa, sb, sc, sd;
	struct got g;
	struct rt_store_stats st;

	fill(a, sizeof a, 10);
	fill(b, sizeof b, 11);
	fill(c, sizeof c, 12);
	sa = mk(1, 42, 9, 4, a, sizeof a);
	sb = sa; /* same key, other content */
	sb.msg = b;
	sb.bytes = 5555;
	sb.received_ns = 999999;

	begin_ok(s);
	put_ok(s, &sa);
	ck_assert_int_eq(rt_store_put_slice(s, &sb), RT_STORE_DUPLICATE);
	commit_ok(s);
	begin_ok(s); /* and in a later transaction */
	ck_assert_int_eq(rt_store_put_slice(s, &sb), RT_STORE_DUPLICATE);
	sc = mk(1, 43, 9, 4, c, sizeof c); /* other trace, same agent and seq */
	put_ok(s, &sc);
	sd = mk(1, 42, 8, 4, c, sizeof c); /* same trace and seq, other agent */
	put_ok(s, &sd);
	sd.trace_hi = 2; /* the key is (agent, trace_lo, seq): hi is not part of it */
	ck_assert_int_eq(rt_store_put_slice(s, &sd), RT_STORE_DUPLICATE);
	commit_ok(s);

	walk(s, 1, 42, &g);
	ck_assert_uint_eq(g.n, 2);
	slice_eq(&g.v[0], &(struct rt_store_slice){ .trace_hi = 1, .trace_lo = 42, .agent_id = 8,
					   .trigger_id = 3, .slice_seq = 4,
					   .received_ns = 1004, .buffers = 2,
					   .bytes = sizeof c, .first_ns = 10, .last_ns = 20,
					   .msg = c, .msg_len = sizeof c });
	slice_eq(&g.v[1], &sa); /* the first content stayed */
	got_free(&g);

	st = stats(s);
	ck_assert_uint_eq(st.slices, 3);
	ck_assert_uint_eq(st.slice_bytes, sizeof a + 2 * sizeof c);
	ck_assert_int_eq(sql_int(dbpath("d.db"), "SELECT count(*) FROM slices"), 3);
	rt_store_close(s);
}
END_TEST

START_TEST(test_rollback)
{
	const char *path = dbpath("r.db");
	struct rt_store *s = open_rw(path);
	uint8_t m[200];
	struct rt_store_slice sl[3];
	struct got g;
	struct rt_store_stats st;

	fill(m, sizeof m, 20);
	for (int i = 0; i < 3; i++)
		sl[i] = mk(0, 5, 1, (uint64_t)i, m, sizeof m);

	begin_ok(s);
	for (int i = 0; i < 3; i++)
		put_ok(s, &sl[i]);
	st = stats(s); /* the open transaction's own view */
	ck_assert_uint_eq(st.slices, 3);
	ck_assert_uint_eq(st.slice_bytes, 600);
	walk(s, 0, 5, &g);
	ck_assert_uint_eq(g.n, 3);
	got_free(&g);
	rt_store_rollback(s);

	walk(s, 0, 5, &g);
	ck_assert_uint_eq(g.n, 0);
	got_free(&g);
	st = stats(s);
	ck_assert_uint_eq(st.slices, 0);
	ck_assert_uint_eq(st.slice_bytes, 0);

	/* The key is free again. */
	begin_ok(s);
	put_ok(s, &sl[1]);
	commit_ok(s);
	st = stats(s);
	ck_assert_uint_eq(st.slices, 1);
	ck_assert_uint_eq(st.slice_bytes, 200);

	/* Misuse is an error with a message, not a crash. */
	rt_store_rollback(s); /* no transaction: nothing happens */
	ck_assert_int_eq(rt_store_commit(s), RT_STORE_E_INVAL);
	ck_assert_ptr_nonnull(strstr(rt_store_errmsg(s), "no open transaction"));
	ck_assert_int_eq(rt_store_put_slice(s, &sl[0]), RT_STORE_E_INVAL);
	ck_assert_ptr_nonnull(strstr(rt_store_errmsg(s), "transaction"));
	begin_ok(s);
	ck_assert_int_eq(rt_store_begin(s), RT_STORE_E_INVAL);
	ck_assert_ptr_nonnull(strstr(rt_store_errmsg(s), "already open"));
	put_ok(s, &sl[0]); /* the first transaction is still usable */
	commit_ok(s);

	/* Closing with a transaction open discards it. */
	begin_ok(s);
	put_ok(s, &sl[2]);
	rt_store_close(s);
	s = open_rw(path);
	walk(s, 0, 5, &g);
	ck_assert_uint_eq(g.n, 2);
	ck_assert_uint_eq(g.v[0].slice_seq, 0);
	ck_assert_uint_eq(g.v[1].slice_seq, 1);
	got_free(&g);
	ck_assert_uint_eq(stats(s).slices, 2);
	rt_store_close(s);
}
END_TEST

/* ------------------------------------------------------------ traces ---- */

static struct rt_store_trace mk_trace(uint64_t hi, uint64_t lo, uint64_t closed)
{
	struct rt_store_trace t;
	memset(&t, 0, sizeof t);
	t.trace_hi = hi;
	t.trace_lo = lo;
	t.group_id = lo * 3;
	t.trigger_count = 1;
	t.trigger_ids[0] = 1;
	t.agent_count = 2;
	t.agents[0] = 1;
	t.agents[1] = 2;
	t.coherent = 1;
	t.first_ns = closed - 100;
	t.last_ns = closed - 10;
	t.bytes = 1000;
	t.slices = 2;
	t.triggered_ns = closed - 200;
	t.closed_ns = closed;
	t.traversal_ns = 55;
	return t;
}

static void trace_eq(const struct rt_store_trace *a, const struct rt_store_trace *b)
{
	ck_assert_uint_eq(a->trace_hi, b->trace_hi);
	ck_assert_uint_eq(a->trace_lo, b->trace_lo);
	ck_assert_uint_eq(a->group_id, b->group_id);
	ck_assert_uint_eq(a->trigger_count, b->trigger_count);
	for (uint32_t i = 0; i < a->trigger_count; i++)
		ck_assert_uint_eq(a->trigger_ids[i], b->trigger_ids[i]);
	ck_assert_uint_eq(a->agent_count, b->agent_count);
	for (uint32_t i = 0; i < a->agent_count; i++)
		ck_assert_uint_eq(a->agents[i], b->agents[i]);
	ck_assert_uint_eq(a->missing_count, b->missing_count);
	for (uint32_t i = 0; i < a->missing_count; i++)
		ck_assert_uint_eq(a->missing[i], b->missing[i]);
	ck_assert_int_eq(a->coherent != 0, b->coherent != 0);
	ck_assert_uint_eq(a->first_ns, b->first_ns);
	ck_assert_uint_eq(a->last_ns, b->last_ns);
	ck_assert_uint_eq(a->bytes, b->bytes);
	ck_assert_uint_eq(a->slices, b->slices);
	ck_assert_uint_eq(a->late_slices, b->late_slices);
	ck_assert_uint_eq(a->triggered_ns, b->triggered_ns);
	ck_assert_uint_eq(a->closed_ns, b->closed_ns);
	ck_assert_uint_eq(a->traversal_ns, b->traversal_ns);
}

static void put_trace_ok(struct rt_store *s, const struct rt_store_trace *t)
{
	int rc = rt_store_put_trace(s, t);
	ck_assert_msg(rc == 0, "put_trace: %d %s", rc, rt_store_errmsg(s));
}

static struct rt_store_trace get_ok(struct rt_store *s, uint64_t hi, uint64_t lo)
{
	struct rt_store_trace t;
	int rc = rt_store_get_trace(s, hi, lo, &t);
	ck_assert_msg(rc == 0, "get_trace %llx: %d %s", (unsigned long long)lo, rc,
		      rt_store_errmsg(s));
	return t;
}

START_TEST(test_trace_roundtrip)
{
	const char *path = dbpath("t.db");
	struct rt_store *s = open_rw(path);
	struct rt_store_trace t, u, got;

	memset(&t, 0, sizeof t);
	t.trace_hi = UINT64_MAX;
	t.trace_lo = BIG + 77;
	t.group_id = BIG | 0xABCDEF;
	t.trigger_count = RT_STORE_MAX_TRIGGERS;
	for (uint32_t i = 0; i < RT_STORE_MAX_TRIGGERS; i++)
		t.trigger_ids[i] = i == 0 ? 0 : i == 1 ? UINT32_MAX : 1000 + i;
	t.agent_count = RT_STORE_MAX_AGENTS;
	t.missing_count = RT_STORE_MAX_AGENTS;
	for (uint32_t i = 0; i < RT_STORE_MAX_AGENTS; i++) {
		t.agents[i] = UINT32_MAX - i;
		t.missing[i] = i * 7919u;
	}
	t.coherent = 0;
	t.first_ns = BIG + 1;
	t.last_ns = UINT64_MAX;
	t.bytes = BIG + 2;
	t.slices = UINT32_MAX;
	t.late_slices = 12;
	t.triggered_ns = BIG + 3;
	t.closed_ns = 1700000000ull * SEC;
	t.traversal_ns = BIG + 4;
	put_trace_ok(s, &t);

	got = get_ok(s, t.trace_hi, t.trace_lo);
	trace_eq(&got, &t);
	got = get_ok(s, 0, t.trace_lo); /* short id */
	trace_eq(&got, &t);
	ck_assert_int_eq(rt_store_get_trace(s, 1, t.trace_lo, &got), RT_STORE_E_NOTFOUND);
	ck_assert_int_eq(rt_store_get_trace(s, 0, 12345, &got), RT_STORE_E_NOTFOUND);
	ck_assert_ptr_nonnull(strstr(rt_store_errmsg(s), "no trace"));

	/* Upsert: the row is replaced, not added. Empty arrays round-trip. */
	u = t;
	u.trigger_count = 0;
	u.agent_count = 1;
	u.missing_count = 0;
	u.coherent = 1;
	u.bytes = 3;
	put_trace_ok(s, &u);
	got = get_ok(s, t.trace_hi, t.trace_lo);
	trace_eq(&got, &u);
	ck_assert_uint_eq(stats(s).traces, 1);

	/* Same lo, hi 0 and hi H: the short id prefers the exact hi 0. */
	u = mk_trace(0, 900, 5000);
	put_trace_ok(s, &u);
	t = mk_trace(77, 900, 9000);
	put_trace_ok(s, &t);
	trace_eq((got = get_ok(s, 0, 900), &got), &u);
	trace_eq((got = get_ok(s, 77, 900), &got), &t);

	/* Over the array limits. */
	t.trigger_count = RT_STORE_MAX_TRIGGERS + 1;
	ck_assert_int_eq(rt_store_put_trace(s, &t), RT_STORE_E_INVAL);
	t.trigger_count = 1;
	t.agent_count = RT_STORE_MAX_AGENTS + 1;
	ck_assert_int_eq(rt_store_put_trace(s, &t), RT_STORE_E_INVAL);
	t.agent_count = 1;
	t.missing_count = 1000;
	ck_assert_int_eq(rt_store_put_trace(s, &t), RT_STORE_E_INVAL);
	ck_assert_ptr_nonnull(strstr(rt_store_errmsg(s), "limits"));

	/* Persisted. */
	rt_store_close(s);
	s = open_ro(path);
	ck_assert_uint_eq(stats(s).traces, 3);
	got = get_ok(s, UINT64_MAX, BIG + 77);
	ck_assert_uint_eq(got.bytes, 3);
	ck_assert_uint_eq(got.traversal_ns, BIG + 4);
	rt_store_close(s);
}
END_TEST

struct tl {
	uint64_t lo[64];
	int n;
	int stop_after;
};

static int collect_trace(void *arg, const struct rt_store_trace *t)
{
	struct tl *l = arg;
	ck_assert_int_lt(l->n, 64);
	l->lo[l->n++] = t->trace_lo;
	return l->stop_after && l->n >= l->stop_after ? 42 : 0;
}

static struct tl list(struct rt_store *s, struct rt_store_query q)
{
	struct tl l;
	int rc;
	memset(&l, 0, sizeof l);
	rc = rt_store_list(s, &q, collect_trace, &l);
	ck_assert_msg(rc == 0, "list: %d %s", rc, rt_store_errmsg(s));
	return l;
}

/* The expected list: indices i (11 down to 0) that pass keep(i), lo = 100 + i. */
static void expect(const struct tl *l, int (*keep)(int), uint32_t limit)
{
	int n = 0;
	for (int i = 11; i >= 0; i--) {
		if (!keep(i) || (limit && (uint32_t)n == limit))
			continue;
		ck_assert_msg(n < l->n, "list is short: %d entries", l->n);
		ck_assert_uint_eq(l->lo[n], 100 + (uint64_t)i);
		n++;
	}
	ck_assert_int_eq(l->n, n);
}

static int k_all(int i) { (void)i; return 1; }
static int k_trig1(int i) { return i % 3 != 1; }
static int k_trig11(int i) { return i % 3 == 1; }
static int k_since5(int i) { return i >= 5; }
static int k_incoh(int i) { return i % 4 == 0; }
static int k_combo(int i) { return i >= 3 && i % 3 != 1 && i % 4 == 0; }

START_TEST(test_trace_list)
{
	struct rt_store *s = open_rw(dbpath("l.db"));
	const uint64_t base = 1700000000ull * SEC;
	/* Inserted out of order. */
	const int ins[12] = { 5, 0, 11, 3, 8, 1, 10, 2, 7, 4, 9, 6 };
	struct tl l;

	begin_ok(s); /* put_trace inside a caller's transaction too */
	for (int k = 0; k < 12; k++) {
		int i = ins[k];
		struct rt_store_trace t = mk_trace(9, 100 + (uint64_t)i, base + (uint64_t)i * 1000);
		/* Trigger 1 must not match 11 or 21 (no substring matches). */
		if (i % 3 == 0) {
			t.trigger_count = 1;
			t.trigger_ids[0] = 1;
		} else if (i % 3 == 1) {
			t.trigger_count = 2;
			t.trigger_ids[0] = 11;
			t.trigger_ids[1] = 21;
		} else {
			t.trigger_count = 3;
			t.trigger_ids[0] = 2;
			t.trigger_ids[1] = 10;
			t.trigger_ids[2] = 1;
		}
		t.coherent = i % 4 != 0;
		put_trace_ok(s, &t);
	}
	commit_ok(s);

	l = list(s, (struct rt_store_query){ 0 });
	expect(&l, k_all, 0);
	l = list(s, (struct rt_store_query){ .by_trigger = 1, .trigger_id = 1 });
	expect(&l, k_trig1, 0);
	l = list(s, (struct rt_store_query){ .by_trigger = 1, .trigger_id = 11 });
	expect(&l, k_trig11, 0);
	l = list(s, (struct rt_store_query){ .by_trigger = 1, .trigger_id = 99 });
	ck_assert_int_eq(l.n, 0);
	l = list(s, (struct rt_store_query){ .since_ns = base + 5000 });
	expect(&l, k_since5, 0);
	l = list(s, (struct rt_store_query){ .since_ns = base + 4999 });
	expect(&l, k_since5, 0);
	l = list(s, (struct rt_store_query){ .incoherent_only = 1 });
	expect(&l, k_incoh, 0);
	l = list(s, (struct rt_store_query){ .limit = 3 });
	expect(&l, k_all, 3);
	l = list(s, (struct rt_store_query){ .by_trigger = 1, .trigger_id = 1,
					      .since_ns = base + 3000, .incoherent_only = 1 });
	expect(&l, k_combo, 0);
	ck_assert_int_eq(l.n, 1);
	ck_assert_uint_eq(l.lo[0], 108);
	l = list(s, (struct rt_store_query){ .by_trigger = 1, .trigger_id = 1, .limit = 2 });
	expect(&l, k_trig1, 2);

	/* A non-zero callback return stops the walk and is returned. */
	memset(&l, 0, sizeof l);
	l.stop_after = 2;
	ck_assert_int_eq(rt_store_list(s, &(struct rt_store_query){ 0 }, collect_trace, &l),
			 42);
	ck_assert_int_eq(l.n, 2);

	/* closed_ns compares unsigned: 2^63 + 5 is the newest. */
	struct rt_store_trace far = mk_trace(9, 500, BIG + 5);
	put_trace_ok(s, &far);
	l = list(s, (struct rt_store_query){ .limit = 2 });
	ck_assert_int_eq(l.n, 2);
	ck_assert_uint_eq(l.lo[0], 500);
	ck_assert_uint_eq(l.lo[1], 111);
	l = list(s, (struct rt_store_query){ .since_ns = BIG });
	ck_assert_int_eq(l.n, 1);
	ck_assert_uint_eq(l.lo[0], 500);
	l = list(s, (struct rt_store_query){ .since_ns = base + 11000 });
	ck_assert_int_eq(l.n, 2);
	l = list(s, (struct rt_store_query){ .since_ns = BIG + 6 });
	ck_assert_int_eq(l.n, 0);
	rt_store_close(s);
}
END_TEST

START_TEST(test_add_late)
{
	struct rt_store *s = open_rw(dbpath("a.db"));
	struct rt_store_trace t = mk_trace(4, 44, 50000), got;
	struct rt_store_slice sl;

	t.first_ns = 1000;
	t.last_ns = 2000;
	t.bytes = 100;
	t.slices = 2;
	t.late_slices = 0;
	put_trace_ok(s, &t);

	sl = mk(4, 44, 3, 9, NULL, 0);
	sl.late = 1;
	sl.bytes = 50;
	sl.first_ns = 500;
	sl.last_ns = 2500;
	ck_assert_int_eq(rt_store_add_late(s, &sl), 0);
	got = get_ok(s, 4, 44);
	ck_assert_uint_eq(got.bytes, 150);
	ck_assert_uint_eq(got.slices, 3);
	ck_assert_uint_eq(got.late_slices, 1);
	ck_assert_uint_eq(got.first_ns, 500);
	ck_assert_uint_eq(got.last_ns, 2500);
	ck_assert_uint_eq(got.closed_ns, 50000); /* the rest untouched */
	ck_assert_uint_eq(got.group_id, 44 * 3);
	ck_assert_uint_eq(got.agent_count, 2);

	/* Unknown time range (0) leaves the range; inside it too. */
	sl.bytes = 7;
	sl.first_ns = 0;
	sl.last_ns = 0;
	ck_assert_int_eq(rt_store_add_late(s, &sl), 0);
	sl.first_ns = 600;
	sl.last_ns = 700;
	sl.bytes = BIG; /* uint64 arithmetic, no overflow to float */
	ck_assert_int_eq(rt_store_add_late(s, &sl), 0);
	got = get_ok(s, 4, 44);
	ck_assert_uint_eq(got.bytes, 157 + BIG);
	ck_assert_uint_eq(got.slices, 5);
	ck_assert_uint_eq(got.late_slices, 3);
	ck_assert_uint_eq(got.first_ns, 500);
	ck_assert_uint_eq(got.last_ns, 2500);

	/* Inside a caller's transaction: rolled back with it. */
	begin_ok(s);
	ck_assert_int_eq(rt_store_add_late(s, &sl), 0);
	ck_assert_uint_eq(get_ok(s, 4, 44).slices, 6);
	rt_store_rollback(s);
	ck_assert_uint_eq(get_ok(s, 4, 44).slices, 5);

	/* A trace with no row, or another hi. */
	sl.trace_lo = 45;
	ck_assert_int_eq(rt_store_add_late(s, &sl), RT_STORE_E_NOTFOUND);
	sl.trace_lo = 44;
	sl.trace_hi = 5;
	ck_assert_int_eq(rt_store_add_late(s, &sl), RT_STORE_E_NOTFOUND);
	ck_assert_ptr_nonnull(strstr(rt_store_errmsg(s), "no trace"));
	ck_assert_uint_eq(get_ok(s, 4, 44).slices, 5);
	rt_store_close(s);
}
END_TEST

/* ------------------------------------------------- agents, triggers ---- */

struct al {
	struct rt_store_agent v[8];
	int n;
};

static int collect_agent(void *arg, const struct rt_store_agent *a)
{
	struct al *l = arg;
	ck_assert_int_lt(l->n, 8);
	l->v[l->n++] = *a;
	return 0;
}

static struct al agents(struct rt_store *s)
{
	struct al l;
	memset(&l, 0, sizeof l);
	ck_assert_int_eq(rt_store_agents(s, collect_agent, &l), 0);
	return l;
}

START_TEST(test_agents)
{
	const char *path = dbpath("ag.db");
	struct rt_store *s = open_rw(path);
	struct rt_store_agent a[3];
	struct al l;

	memset(a, 0, sizeof a);
	const uint32_t ids[3] = { 5, 1, UINT32_MAX };
	for (int i = 0; i < 3; i++) {
		a[i].agent_id = ids[i];
		a[i].pid = 1000 + (uint32_t)i;
		snprintf(a[i].host, sizeof a[i].host, "host-%d", i);
		snprintf(a[i].control_addr, sizeof a[i].control_addr, "tcp://10.0.0.%d:7000", i);
		a[i].start_ns = BIG + (uint64_t)i;
		a[i].last_seen_ns = 100 + (uint64_t)i;
	}
	memset(a[2].host, 'h', sizeof a[2].host); /* no terminating NUL */
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(rt_store_put_agent(s, &a[i]), 0);

	l = agents(s);
	ck_assert_int_eq(l.n, 3);
	const int order[3] = { 1, 0, 2 };
	for (int k = 0; k < 3; k++) {
		const struct rt_store_agent *w = &a[order[k]], *g = &l.v[k];
		ck_assert_uint_eq(g->agent_id, w->agent_id);
		ck_assert_uint_eq(g->pid, w->pid);
		ck_assert_uint_eq(g->start_ns, w->start_ns);
		ck_assert_uint_eq(g->last_seen_ns, w->last_seen_ns);
		ck_assert_str_eq(g->control_addr, w->control_addr);
		if (order[k] != 2)
			ck_assert_str_eq(g->host, w->host);
	}
	ck_assert_uint_eq(strlen(l.v[2].host), sizeof a[2].host - 1);
	ck_assert_int_eq(l.v[2].host[0], 'h');

	/* Upsert. */
	snprintf(a[0].control_addr, sizeof a[0].control_addr, "tcp://10.9.9.9:7001");
	a[0].last_seen_ns = 999;
	ck_assert_int_eq(rt_store_put_agent(s, &a[0]), 0);
	l = agents(s);
	ck_assert_int_eq(l.n, 3);
	ck_assert_str_eq(l.v[1].control_addr, "tcp://10.9.9.9:7001");
	ck_assert_uint_eq(l.v[1].last_seen_ns, 999);

	/* Delete. */
	ck_assert_int_eq(rt_store_delete_agent(s, 5), 0);
	ck_assert_int_eq(rt_store_delete_agent(s, 5), RT_STORE_E_NOTFOUND);
	l = agents(s);
	ck_assert_int_eq(l.n, 2);
	ck_assert_uint_eq(l.v[0].agent_id, 1);
	ck_assert_uint_eq(l.v[1].agent_id, UINT32_MAX);
	ck_assert_uint_eq(stats(s).agents, 2);
	rt_store_close(s);
	ck_assert_int_eq(sql_int(path, "SELECT length(host) FROM agents "
				       "WHERE agent_id = 4294967295"), sizeof a[2].host - 1);

	s = open_ro(path);
	l = agents(s);
	ck_assert_int_eq(l.n, 2);
	ck_assert_str_eq(l.v[0].host, "host-1");
	rt_store_close(s);
}
END_TEST

struct trl {
	uint32_t agent[8];
	uint64_t seq[8], recv[8];
	uint8_t msg[8][64];
	size_t len[8];
	int n;
};

static int collect_trig(void *arg, uint32_t agent, uint64_t seq, uint64_t recv,
			const void *msg, size_t len)
{
	struct trl *l = arg;
	ck_assert_int_lt(l->n, 8);
	ck_assert_uint_le(len, 64);
	ck_assert_ptr_nonnull(msg);
	l->agent[l->n] = agent;
	l->seq[l->n] = seq;
	l->recv[l->n] = recv;
	memcpy(l->msg[l->n], msg, len);
	l->len[l->n] = len;
	l->n++;
	return 0;
}

static struct trl pending(struct rt_store *s)
{
	struct trl l;
	memset(&l, 0, sizeof l);
	ck_assert_int_eq(rt_store_pending_triggers(s, collect_trig, &l), 0);
	return l;
}

START_TEST(test_triggers)
{
	const char *path = dbpath("tr.db");
	struct rt_store *s = open_rw(path);
	uint8_t ma[40], mb[17], mx[40];
	struct trl l;

	fill(ma, sizeof ma, 30);
	fill(mb, sizeof mb, 31);
	fill(mx, sizeof mx, 32);
	ck_assert_int_eq(rt_store_put_trigger(s, 1, 10, 300, ma, sizeof ma), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 2, 5, 100, mb, sizeof mb), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 1, 11, 200, NULL, 0), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 1, BIG + 1, BIG + 7, mb, 3), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 1, 10, 1, mx, sizeof mx), RT_STORE_DUPLICATE);

	/* Received order (unsigned), original content. */
	l = pending(s);
	ck_assert_int_eq(l.n, 4);
	ck_assert_uint_eq(l.agent[0], 2);
	ck_assert_uint_eq(l.seq[0], 5);
	ck_assert_uint_eq(l.recv[0], 100);
	ck_assert_uint_eq(l.len[0], sizeof mb);
	ck_assert_mem_eq(l.msg[0], mb, sizeof mb);
	ck_assert_uint_eq(l.seq[1], 11);
	ck_assert_uint_eq(l.len[1], 0);
	ck_assert_uint_eq(l.seq[2], 10);
	ck_assert_uint_eq(l.recv[2], 300);
	ck_assert_uint_eq(l.len[2], sizeof ma);
	ck_assert_mem_eq(l.msg[2], ma, sizeof ma);
	ck_assert_uint_eq(l.seq[3], BIG + 1);
	ck_assert_uint_eq(l.recv[3], BIG + 7);

	ck_assert_int_eq(rt_store_done_trigger(s, 1, 11), 0);
	ck_assert_int_eq(rt_store_done_trigger(s, 1, 11), 0); /* again: fine */
	ck_assert_int_eq(rt_store_done_trigger(s, 9, 9), RT_STORE_E_NOTFOUND);
	ck_assert_int_eq(rt_store_put_trigger(s, 1, 11, 200, NULL, 0), RT_STORE_DUPLICATE);
	l = pending(s);
	ck_assert_int_eq(l.n, 3);
	ck_assert_uint_eq(l.seq[0], 5);
	ck_assert_uint_eq(l.seq[1], 10);
	ck_assert_uint_eq(l.seq[2], BIG + 1);
	ck_assert_uint_eq(stats(s).pending_triggers, 3);
	rt_store_close(s);

	/* A restarted coordinator sees the same. */
	s = open_rw(path);
	l = pending(s);
	ck_assert_int_eq(l.n, 3);
	ck_assert_mem_eq(l.msg[1], ma, sizeof ma);
	ck_assert_int_gt(sql_int(path, "SELECT done_ns FROM triggers WHERE trigger_seq = 11"), 0);
	rt_store_close(s);
}
END_TEST

/* ------------------------------------------------------- durability ---- */

#define KILL_BATCH 25

static size_t kill_len(uint64_t seq)
{
	return 64 + (size_t)(seq * 37 % 2000);
}

static void kill_child(const char *path, int wfd, int sync_full)
{
	struct rt_store_options o = { .path = path, .sync_full = sync_full };
	struct rt_store *s;
	static uint8_t buf[4096];
	uint64_t n = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (rt_store_open(&s, &o))
		_exit(2);
	for (;;) {
		if (rt_store_begin(s))
			_exit(3);
		for (int i = 0; i < KILL_BATCH; i++, n++) {
			size_t len = kill_len(n);
			struct rt_store_slice sl;
			fill(buf, len, n);
			sl = mk(0, 1, 1, n, buf, len);
			if (rt_store_put_slice(s, &sl))
				_exit(4);
		}
		if (rt_store_commit(s))
			_exit(5);
		if (write(wfd, &n, sizeof n) != (ssize_t)sizeof n)
			_exit(6);
	}
}

START_TEST(test_kill9)
{
	const char *path = dbpath("k.db");
	int p[2], status;
	uint64_t reported = 0, v;
	pid_t pid;
	struct rt_store *s;
	struct got g;
	static uint8_t buf[4096];
	int killed = 0;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(p[0]);
		kill_child(path, p[1], _i);
	}
	close(p[1]);
	/* Read reports; kill mid-stream once enough has been committed, then
	 * drain what it reported before it died. */
	for (;;) {
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		int r = poll(&pf, 1, 30000);
		ck_assert_msg(r > 0, "the writer stalled");
		ssize_t got = read(p[0], &v, sizeof v);
		if (got == 0)
			break;
		ck_assert_int_eq(got, sizeof v);
		ck_assert_uint_gt(v, reported);
		reported = v;
		if (!killed && reported >= 40 * KILL_BATCH) {
			kill(pid, SIGKILL);
			killed = 1;
		}
	}
	close(p[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		      "writer exited with status %d", status);

	s = open_rw(path);
	walk(s, 0, 1, &g);
	ck_assert_msg(g.n >= reported, "%zu slices found, %llu reported committed", g.n,
		      (unsigned long long)reported);
	ck_assert_uint_eq(g.n % KILL_BATCH, 0); /* whole transactions only */
	for (size_t i = 0; i < g.n; i++) {
		size_t len = kill_len(i);
		struct rt_store_slice want;
		fill(buf, len, i);
		want = mk(0, 1, 1, i, buf, len);
		slice_eq(&g.v[i], &want);
	}
	/* The totals were committed with the slices. */
	struct rt_store_stats st = stats(s);
	uint64_t bytes = 0;
	for (size_t i = 0; i < g.n; i++)
		bytes += kill_len(i);
	ck_assert_uint_eq(st.slices, g.n);
	ck_assert_uint_eq(st.slice_bytes, bytes);
	got_free(&g);

	/* And the store goes on from there. */
	begin_ok(s);
	struct rt_store_slice more = mk(0, 1, 1, 0, buf, 10);
	ck_assert_int_eq(rt_store_put_slice(s, &more), RT_STORE_DUPLICATE);
	more.slice_seq = 1000000;
	put_ok(s, &more);
	commit_ok(s);
	ck_assert_uint_eq(stats(s).slices, st.slices + 1);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM pragma_integrity_check "
				       "WHERE integrity_check = 'ok'"), 1);
	rt_store_close(s);
}
END_TEST

/* --------------------------------------------------------- readers ---- */

static void put_batch(struct rt_store *s, uint64_t lo, uint64_t first, int n)
{
	uint8_t m[256];
	for (int i = 0; i < n; i++) {
		struct rt_store_slice sl;
		fill(m, sizeof m, first + (uint64_t)i);
		sl = mk(0, lo, 1, first + (uint64_t)i, m, sizeof m);
		put_ok(s, &sl);
	}
}

static size_t count_slices(struct rt_store *s, uint64_t lo, int check_bytes)
{
	struct got g;
	size_t n;
	walk(s, 0, lo, &g);
	if (check_bytes) {
		uint8_t m[256];
		for (size_t i = 0; i < g.n; i++) {
			ck_assert_uint_eq(g.v[i].slice_seq, i);
			fill(m, sizeof m, i);
			ck_assert_uint_eq(g.v[i].msg_len, sizeof m);
			ck_assert_mem_eq(g.v[i].msg, m, sizeof m);
		}
	}
	n = g.n;
	got_free(&g);
	return n;
}

static int nop_slice(void *arg, const struct rt_store_slice *sl)
{
	(void)arg;
	(void)sl;
	return 0;
}

START_TEST(test_readonly_concurrent)
{
	const char *path = dbpath("c.db");
	struct rt_store *w = open_rw(path), *r;
	struct rt_store_slice sl = mk(0, 1, 1, 9999, "x", 1);
	struct rt_store_trace t = mk_trace(0, 1, 100);
	struct rt_store_agent a = { .agent_id = 1 };

	begin_ok(w);
	put_batch(w, 1, 0, 10);
	commit_ok(w);
	put_trace_ok(w, &t);

	r = open_ro(path);
	ck_assert_uint_eq(count_slices(r, 1, 1), 10);
	ck_assert_uint_eq(stats(r).slices, 10);

	/* Uncommitted writes are invisible to the reader, committed ones appear. */
	begin_ok(w);
	put_batch(w, 1, 10, 10);
	ck_assert_uint_eq(count_slices(r, 1, 1), 10);
	ck_assert_uint_eq(stats(r).slices, 10);
	commit_ok(w);
	ck_assert_uint_eq(count_slices(r, 1, 1), 20);
	ck_assert_uint_eq(stats(r).slices, 20);
	ck_assert_uint_eq(stats(r).slice_bytes, 20 * 256);

	/* The reader cannot write, whatever it tries. */
	ck_assert_int_eq(rt_store_begin(r), RT_STORE_E_READONLY);
	ck_assert_ptr_nonnull(strstr(rt_store_errmsg(r), "read-only"));
	ck_assert_int_eq(rt_store_put_slice(r, &sl), RT_STORE_E_READONLY);
	ck_assert_int_eq(rt_store_commit(r), RT_STORE_E_READONLY);
	ck_assert_int_eq(rt_store_put_trace(r, &t), RT_STORE_E_READONLY);
	ck_assert_int_eq(rt_store_add_late(r, &sl), RT_STORE_E_READONLY);
	ck_assert_int_eq(rt_store_put_agent(r, &a), RT_STORE_E_READONLY);
	ck_assert_int_eq(rt_store_delete_agent(r, 1), RT_STORE_E_READONLY);
	ck_assert_int_eq(rt_store_put_trigger(r, 1, 1, 1, "x", 1), RT_STORE_E_READONLY);
	ck_assert_int_eq(rt_store_done_trigger(r, 1, 1), RT_STORE_E_READONLY);
	ck_assert_int_eq(rt_store_retain(r, UINT64_MAX, NULL), RT_STORE_E_READONLY);
	rt_store_rollback(r);
	ck_assert_uint_eq(count_slices(r, 1, 1), 20);
	ck_assert_uint_eq(get_ok(r, 0, 1).slices, 2);
	rt_store_close(r);
	rt_store_close(w);

	/* Reading a closed store (its -wal is gone) works and leaves no trace. */
	r = open_ro(path);
	ck_assert_uint_eq(count_slices(r, 1, 1), 20);
	rt_store_close(r);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM slices"), 20);
}
END_TEST

/* A writer process commits batches of 10 while this process reads. */
START_TEST(test_readonly_other_process)
{
	const char *path = dbpath("p.db");
	struct rt_store *w = open_rw(path), *r;
	int p[2], status;
	pid_t pid;
	size_t last = 0;
	int reads = 0;
	char c;

	rt_store_close(w); /* created; the child writes */
	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rt_store_options o = { .path = path };
		struct rt_store *s;
		close(p[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (rt_store_open(&s, &o) || write(p[1], "r", 1) != 1)
			_exit(2);
		for (int b = 0; b < 200; b++) {
			uint8_t m[256];
			if (rt_store_begin(s))
				_exit(3);
			for (int i = 0; i < 10; i++) {
				uint64_t seq = (uint64_t)b * 10 + (uint64_t)i;
				struct rt_store_slice sl;
				fill(m, sizeof m, seq);
				sl = mk(0, 1, 1, seq, m, sizeof m);
				if (rt_store_put_slice(s, &sl))
					_exit(4);
			}
			if (rt_store_commit(s))
				_exit(5);
		}
		rt_store_close(s);
		_exit(0);
	}
	close(p[1]);
	ck_assert_int_eq(read(p[0], &c, 1), 1);
	r = open_ro(path);
	for (;;) {
		int done = waitpid(pid, &status, WNOHANG) == pid;
		size_t n = count_slices(r, 1, 1);
		struct rt_store_stats st = stats(r);
		ck_assert_uint_eq(n % 10, 0); /* whole transactions only */
		ck_assert_uint_ge(n, last);
		ck_assert_uint_ge(st.slices, n); /* one snapshot later, never behind */
		last = n;
		reads++;
		if (done)
			break;
	}
	close(p[0]);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer status %d",
		      status);
	ck_assert_uint_eq(count_slices(r, 1, 1), 2000);
	ck_assert_uint_eq(stats(r).slices, 2000);
	ck_assert_int_gt(reads, 1);
	rt_store_close(r);
}
END_TEST

/* Walks may nest: a callback that walks the same kind again. */
struct nest {
	struct rt_store *s;
	int outer, inner;
};

static int inner_cb(void *arg, const struct rt_store_slice *sl)
{
	struct nest *n = arg;
	(void)sl;
	n->inner++;
	return 0;
}

static int outer_cb(void *arg, const struct rt_store_slice *sl)
{
	struct nest *n = arg;
	(void)sl;
	n->outer++;
	return rt_store_slices(n->s, 0, 1, inner_cb, n);
}

START_TEST(test_nested_walk)
{
	struct rt_store *s = open_rw(dbpath("n.db"));
	struct nest n = { .s = s };
	begin_ok(s);
	put_batch(s, 1, 0, 3);
	commit_ok(s);
	ck_assert_int_eq(rt_store_slices(s, 0, 1, outer_cb, &n), 0);
	ck_assert_int_eq(n.outer, 3);
	ck_assert_int_eq(n.inner, 9);
	/* The shared statement is still usable afterwards. */
	ck_assert_uint_eq(count_slices(s, 1, 1), 3);
	rt_store_close(s);
}
END_TEST

START_TEST(test_busy_second_writer)
{
	const char *path = dbpath("b.db");
	struct rt_store *a = open_rw(path), *b = open_rw(path);
	struct timespec t0, t1;
	double dt;
	int rc;

	begin_ok(a);
	put_batch(a, 1, 0, 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = rt_store_begin(b);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	/* The busy timeout is 5 s; generous upper bound for a loaded machine. */
	ck_assert_msg(rc == RT_STORE_E_BUSY && dt > 4.0 && dt < 60.0,
		      "second writer's begin: %d after %.2f s: %s", rc, dt, rt_store_errmsg(b));
	ck_assert_ptr_nonnull(strstr(rt_store_errmsg(b), "begin"));
	/* b's put is refused cleanly (no transaction), a is unaffected. */
	ck_assert_int_eq(rt_store_put_slice(b, &(struct rt_store_slice){ 0 }), RT_STORE_E_INVAL);
	commit_ok(a);
	begin_ok(b);
	put_batch(b, 1, 1, 1);
	commit_ok(b);
	ck_assert_uint_eq(count_slices(a, 1, 1), 2);
	rt_store_close(a);
	rt_store_close(b);
}
END_TEST

/* ------------------------------------------------- retention, stats ---- */

START_TEST(test_retention_age)
{
	const char *path = dbpath("ra.db");
	const uint64_t now = 10000 * SEC, age = 1000 * SEC;
	struct rt_store_options o = { .path = path, .max_age_ns = age };
	struct rt_store *s;
	struct rt_store_trace t;
	struct rt_store_stats st;
	uint64_t deleted = 99;
	uint8_t m[100];
	const uint64_t closed[3] = { now - 2000 * SEC, now - 1500 * SEC, now - 500 * SEC };

	fill(m, sizeof m, 40);
	ck_assert_int_eq(rt_store_open(&s, &o), 0);
	begin_ok(s);
	for (int i = 0; i < 3; i++) {
		for (uint64_t k = 0; k < 2; k++) {
			struct rt_store_slice sl = mk(7, 10 + (uint64_t)i, 1, k, m, sizeof m);
			sl.received_ns = closed[i] - 5 * SEC;
			put_ok(s, &sl);
		}
		t = mk_trace(7, 10 + (uint64_t)i, closed[i]);
		put_trace_ok(s, &t);
	}
	/* Orphan slices: one old, one young; and one old whose hi differs. */
	struct rt_store_slice orphan = mk(7, 50, 1, 0, m, 10);
	orphan.received_ns = now - 2000 * SEC;
	put_ok(s, &orphan);
	orphan = mk(7, 51, 1, 0, m, 20);
	orphan.received_ns = now - 10 * SEC;
	put_ok(s, &orphan);
	orphan = mk(8, 12, 1, 5, m, 30); /* lo of a kept trace, another hi */
	orphan.received_ns = now - 3000 * SEC;
	put_ok(s, &orphan);
	commit_ok(s);
	/* Triggers: old done goes, old pending and young done stay. */
	ck_assert_int_eq(rt_store_put_trigger(s, 1, 1, now - 2000 * SEC, "a", 1), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 1, 2, now - 2000 * SEC, "b", 1), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 1, 3, now - 10 * SEC, "c", 1), 0);
	ck_assert_int_eq(rt_store_done_trigger(s, 1, 1), 0);
	ck_assert_int_eq(rt_store_done_trigger(s, 1, 3), 0);

	ck_assert_int_eq(rt_store_retain(s, now, &deleted), 0);
	ck_assert_uint_eq(deleted, 2);
	ck_assert_int_eq(rt_store_get_trace(s, 7, 10, &t), RT_STORE_E_NOTFOUND);
	ck_assert_int_eq(rt_store_get_trace(s, 7, 11, &t), RT_STORE_E_NOTFOUND);
	ck_assert_uint_eq(get_ok(s, 7, 12).closed_ns, closed[2]);
	ck_assert_uint_eq(count_slices(s, 10, 0), 0);
	ck_assert_uint_eq(count_slices(s, 11, 0), 0);
	ck_assert_uint_eq(count_slices(s, 50, 0), 0);
	ck_assert_uint_eq(count_slices(s, 51, 0), 1);
	struct got g;
	walk(s, 0, 12, &g); /* the kept trace's two slices; the foreign-hi orphan went */
	ck_assert_uint_eq(g.n, 2);
	ck_assert_uint_eq(g.v[0].trace_hi, 7);
	ck_assert_uint_eq(g.v[1].trace_hi, 7);
	got_free(&g);
	st = stats(s);
	ck_assert_uint_eq(st.traces, 1);
	ck_assert_uint_eq(st.slices, 3);
	ck_assert_uint_eq(st.slice_bytes, 2 * 100 + 20);
	ck_assert_uint_eq(st.pending_triggers, 1);
	rt_store_close(s);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM triggers"), 2);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM triggers WHERE trigger_seq = 1"), 0);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM slices"), 3);

	/* Nothing more to do: deleted 0. */
	ck_assert_int_eq(rt_store_open(&s, &o), 0);
	ck_assert_int_eq(rt_store_retain(s, now, &deleted), 0);
	ck_assert_uint_eq(deleted, 0);
	rt_store_close(s);

	/* No max_age: traces stay forever, done triggers go after 1 h. */
	o.max_age_ns = 0;
	ck_assert_int_eq(rt_store_open(&s, &o), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 2, 1, now - 7200 * SEC, "d", 1), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 2, 2, now - 1800 * SEC, "e", 1), 0);
	ck_assert_int_eq(rt_store_done_trigger(s, 2, 1), 0);
	ck_assert_int_eq(rt_store_done_trigger(s, 2, 2), 0);
	ck_assert_int_eq(rt_store_retain(s, now + 1000000 * SEC, &deleted), 0);
	ck_assert_uint_eq(deleted, 0);
	ck_assert_uint_eq(stats(s).traces, 1);
	rt_store_close(s);
	/* 1 h after now + 1e6 s every done trigger is old: all four done went. */
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM triggers"), 1);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM triggers WHERE done = 0"), 1);

	ck_assert_int_eq(rt_store_open(&s, &o), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 3, 1, now - 7200 * SEC, "d", 1), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 3, 2, now - 1800 * SEC, "e", 1), 0);
	ck_assert_int_eq(rt_store_done_trigger(s, 3, 1), 0);
	ck_assert_int_eq(rt_store_done_trigger(s, 3, 2), 0);
	ck_assert_int_eq(rt_store_retain(s, now, NULL), 0);
	rt_store_close(s);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM triggers WHERE agent_id = 3"), 1);
	ck_assert_int_eq(sql_int(path, "SELECT trigger_seq FROM triggers WHERE agent_id = 3"), 2);
}
END_TEST

START_TEST(test_retention_size)
{
	const char *path = dbpath("rs.db");
	struct rt_store_options o = { .path = path, .max_bytes = 1000 };
	struct rt_store *s;
	struct rt_store_trace t;
	struct rt_store_stats st;
	struct tl l;
	uint64_t deleted = 0;
	uint8_t m[100];

	fill(m, sizeof m, 50);
	ck_assert_int_eq(rt_store_open(&s, &o), 0);
	begin_ok(s);
	/* 10 traces of 2 x 100 bytes; the newest closed at 2^63 + 1 (unsigned order). */
	const int ins[10] = { 3, 9, 0, 6, 1, 8, 2, 5, 7, 4 };
	for (int k = 0; k < 10; k++) {
		uint64_t i = (uint64_t)ins[k];
		for (uint64_t j = 0; j < 2; j++) {
			struct rt_store_slice sl = mk(1, 100 + i, 1, j, m, sizeof m);
			put_ok(s, &sl);
		}
		t = mk_trace(1, 100 + i, i == 9 ? BIG + 1 : 1000 + i);
		put_trace_ok(s, &t);
	}
	commit_ok(s);
	ck_assert_uint_eq(stats(s).slice_bytes, 2000);

	ck_assert_int_eq(rt_store_retain(s, 5000, &deleted), 0);
	ck_assert_uint_eq(deleted, 5); /* 2000 -> 1000: at the budget, not over it */
	st = stats(s);
	ck_assert_uint_eq(st.slice_bytes, 1000);
	ck_assert_uint_eq(st.slices, 10);
	ck_assert_uint_eq(st.traces, 5);
	l = list(s, (struct rt_store_query){ 0 });
	ck_assert_int_eq(l.n, 5);
	for (int k = 0; k < 5; k++)
		ck_assert_uint_eq(l.lo[k], 109 - (uint64_t)k);
	ck_assert_uint_eq(count_slices(s, 104, 0), 0);
	ck_assert_uint_eq(count_slices(s, 105, 0), 2);

	/* Inside a caller's transaction, with both limits: 150 more bytes. */
	begin_ok(s);
	struct rt_store_slice extra = mk(1, 107, 2, 0, m, sizeof m);
	extra.bytes = 150;
	put_ok(s, &extra);
	ck_assert_int_eq(rt_store_retain(s, 5000, &deleted), 0);
	ck_assert_uint_eq(deleted, 1); /* 1150 -> 950 */
	commit_ok(s);
	st = stats(s);
	ck_assert_uint_eq(st.slice_bytes, 950);
	ck_assert_uint_eq(st.traces, 4);
	ck_assert_int_eq(rt_store_get_trace(s, 1, 105, &t), RT_STORE_E_NOTFOUND);
	ck_assert_uint_eq(get_ok(s, 1, 109).closed_ns, BIG + 1);
	rt_store_close(s);

	/* The totals agree with the rows. */
	ck_assert_int_eq(sql_int(path, "SELECT sum(bytes) FROM slices"), 950);
	ck_assert_int_eq(sql_int(path, "SELECT value FROM meta WHERE key = 'slice_bytes'"), 950);
	ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM slices"), 9);
}
END_TEST

START_TEST(test_stats)
{
	const char *path = dbpath("st.db");
	char wal[PATH_MAX];
	struct rt_store *s = open_rw(path);
	struct rt_store_stats st = stats(s);
	struct rt_store_agent a = { .agent_id = 1 };

	snprintf(wal, sizeof wal, "%s-wal", path);
	ck_assert_uint_eq(st.traces + st.coherent + st.incoherent + st.slices, 0);
	ck_assert_uint_eq(st.slice_bytes + st.pending_triggers + st.agents, 0);
	ck_assert_uint_gt(st.file_bytes, 0);

	begin_ok(s);
	put_batch(s, 1, 0, 5);
	for (uint64_t i = 0; i < 3; i++) {
		struct rt_store_trace t = mk_trace(0, 1 + i, 100 + i);
		t.coherent = i != 1;
		put_trace_ok(s, &t);
	}
	commit_ok(s);
	ck_assert_int_eq(rt_store_put_trigger(s, 1, 1, 1, "a", 1), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 1, 2, 1, "b", 1), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 1, 3, 1, "c", 1), 0);
	ck_assert_int_eq(rt_store_done_trigger(s, 1, 2), 0);
	ck_assert_int_eq(rt_store_put_agent(s, &a), 0);
	a.agent_id = 2;
	ck_assert_int_eq(rt_store_put_agent(s, &a), 0);

	st = stats(s);
	ck_assert_uint_eq(st.traces, 3);
	ck_assert_uint_eq(st.coherent, 2);
	ck_assert_uint_eq(st.incoherent, 1);
	ck_assert_uint_eq(st.slices, 5);
	ck_assert_uint_eq(st.slice_bytes, 5 * 256);
	ck_assert_uint_eq(st.pending_triggers, 2);
	ck_assert_uint_eq(st.agents, 2);
	ck_assert_int_gt(file_size(wal), 0); /* the writer's WAL counts */
	ck_assert_uint_eq(st.file_bytes, (uint64_t)(file_size(path) + file_size(wal)));
	rt_store_close(s);

	s = open_ro(path);
	st = stats(s);
	ck_assert_uint_eq(st.slices, 5);
	ck_assert_uint_eq(st.incoherent, 1);
	ck_assert_uint_eq(st.file_bytes, (uint64_t)file_size(path) +
						 (uint64_t)(file_size(wal) > 0 ? file_size(wal) : 0));
	rt_store_close(s);
}
END_TEST

/* Many batches of put_slice, each committed: every slice is there. (The rate it
 * prints is for information; a figure belongs in bench/, not in a test.) */
START_TEST(test_put_rate)
{
	struct rt_store *s = open_rw(dbpath("rate.db"));
	struct timespec t0, t1;
	const int n = 2000, batch = 200;
	static uint8_t m[512];
	double dt;

	fill(m, sizeof m, 60);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int b = 0; b < n / batch; b++) {
		begin_ok(s);
		for (int i = 0; i < batch; i++) {
			uint64_t k = (uint64_t)(b * batch + i);
			struct rt_store_slice sl = mk(0, k / 4, (uint32_t)(k % 4), k, m, sizeof m);
			put_ok(s, &sl);
		}
		commit_ok(s);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	fprintf(stderr, "put_slice: %d slices of %zu B in batches of %d: %.0f slices/s\n", n,
		sizeof m, batch, n / dt);
	ck_assert_uint_eq(stats(s).slices, (uint64_t)n);
	ck_assert_uint_eq(count_slices(s, 123, 0), 4);
	rt_store_close(s);
}
END_TEST

/* With background_checkpoint, automatic checkpoints are off and a thread checkpoints
 * instead: the checkpoints happen (counted), the WAL does not grow without bound
 * while a writer commits 8 MiB in many small transactions, every slice reads back,
 * and close joins the thread. */
START_TEST(test_background_checkpoint)
{
	struct rt_store_options o = { .path = dbpath("ckpt.db"), .background_checkpoint = 1 };
	struct rt_store *s = NULL;
	static uint8_t m[4096];
	char wal[PATH_MAX];
	off_t wal_max = 0;
	const int n = 2048, batch = 16;
	ck_assert_int_eq(rt_store_open(&s, &o), 0);
	snprintf(wal, sizeof wal, "%s-wal", o.path);
	fill(m, sizeof m, 61);
	for (int b = 0; b < n / batch; b++) {
		begin_ok(s);
		for (int i = 0; i < batch; i++) {
			uint64_t k = (uint64_t)(b * batch + i);
			struct rt_store_slice sl = mk(0, k / 4, (uint32_t)(k % 4), k, m, sizeof m);
			put_ok(s, &sl);
		}
		commit_ok(s);
		if (file_size(wal) > wal_max)
			wal_max = file_size(wal);
		if (b % 16 == 15) { /* let the checkpointer in (it runs every 200 ms) */
			/* until one more checkpoint ran: waiting a fixed second let a
			 * loaded machine's writer go on without it, and the WAL grew past
			 * the bound */
			uint64_t before = stats(s).checkpoints;
			for (int w = 0; w < 3000 && stats(s).checkpoints <= before; w++)
				usleep(10000);
			ck_assert_msg(stats(s).checkpoints > before,
				      "the checkpointer did not run within 30 s");
		}
	}
	ck_assert_uint_gt(stats(s).checkpoints, 0);
	ck_assert_uint_eq(stats(s).checkpoint_errors, 0);
	ck_assert_uint_eq(stats(s).slices, (uint64_t)n);
	ck_assert_uint_eq(count_slices(s, 100, 0), 4);
	/* 8 MiB went through the WAL; checkpoints let it restart from the top. */
	ck_assert_msg(wal_max < 6 << 20, "the WAL grew to %lld bytes", (long long)wal_max);
	rt_store_close(s);
	s = open_rw(o.path);
	ck_assert_uint_eq(stats(s).slices, (uint64_t)n);
	rt_store_close(s);
}
END_TEST

/* ------------------------------------------------------- bad inputs ---- */

static int open_err(const char *path, int readonly, const char *want)
{
	struct rt_store_options o = { .path = path, .readonly = readonly };
	struct rt_store *s = (struct rt_store *)&o; /* must be reset to NULL */
	int rc = rt_store_open(&s, &o);
	ck_assert_ptr_null(s);
	ck_assert_msg(strstr(rt_store_errmsg(NULL), want) != NULL, "errmsg \"%s\" lacks \"%s\"",
		      rt_store_errmsg(NULL), want);
	return rc;
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(p, 1, n, f), n);
	fclose(f);
}

static void same_file(const char *path, const void *p, size_t n)
{
	uint8_t buf[8192];
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fread(buf, 1, sizeof buf, f), n);
	fclose(f);
	ck_assert_mem_eq(buf, p, n);
}

START_TEST(test_bad_files)
{
	uint8_t junk[4096];
	const char *p;

	/* Missing file, read-only: not created. */
	p = dbpath("missing.db");
	ck_assert_int_eq(open_err(p, 1, "no such file"), RT_STORE_E_OPEN);
	ck_assert_int_eq(file_size(p), -1);
	/* Missing directory, writable. */
	p = dbpath("nodir/x.db");
	ck_assert_int_eq(open_err(p, 0, "nodir"), RT_STORE_E_OPEN);
	ck_assert_ptr_nonnull(strstr(rt_store_errmsg(NULL), "No such file or directory"));
	/* A directory. */
	ck_assert_int_eq(open_err(g_dir, 0, "is a directory"), RT_STORE_E_OPEN);

	/* Random bytes: refused both ways, and left untouched. */
	fill(junk, sizeof junk, 70);
	p = dbpath("junk.db");
	write_file(p, junk, sizeof junk);
	ck_assert_int_eq(open_err(p, 0, "not a retrace store"), RT_STORE_E_OPEN);
	ck_assert_int_eq(open_err(p, 1, "not a retrace store"), RT_STORE_E_OPEN);
	same_file(p, junk, sizeof junk);
	ck_assert_ptr_nonnull(strstr(rt_store_errmsg(NULL), "junk.db"));
	p = dbpath("short.db");
	write_file(p, "hello\n", 6);
	ck_assert_int_eq(open_err(p, 0, "not a retrace store"), RT_STORE_E_OPEN);
	same_file(p, "hello\n", 6);

	/* Someone else's SQLite file: refused, not converted to WAL, not extended. */
	p = dbpath("other.db");
	sql_exec(p, "CREATE TABLE foo(x); INSERT INTO foo VALUES(42);");
	ck_assert_int_eq(open_err(p, 0, "not a retrace store"), RT_STORE_E_OPEN);
	ck_assert_int_eq(open_err(p, 1, "not a retrace store"), RT_STORE_E_OPEN);
	ck_assert_int_eq(sql_int(p, "SELECT x FROM foo"), 42);
	ck_assert_int_eq(sql_int(p, "SELECT count(*) FROM sqlite_schema"), 1);
	ck_assert_int_eq(sql_int(p, "SELECT count(*) FROM pragma_journal_mode "
				    "WHERE journal_mode = 'delete'"), 1);
	/* ... even with a meta table that looks like ours. */
	p = dbpath("other2.db");
	sql_exec(p, "CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER);"
		    "INSERT INTO meta VALUES('schema_version', 1);");
	ck_assert_int_eq(open_err(p, 0, "not a retrace store"), RT_STORE_E_OPEN);
	/* ... or our application id without the meta table. */
	p = dbpath("other3.db");
	sql_exec(p, "PRAGMA application_id = 1381257795; CREATE TABLE t(x);");
	ck_assert_int_eq(open_err(p, 1, "not a retrace store"), RT_STORE_E_OPEN);

	/* An empty file is a new store when writable, not a store when read-only. */
	p = dbpath("empty.db");
	write_file(p, "", 0);
	ck_assert_int_eq(open_err(p, 1, "not a retrace store"), RT_STORE_E_OPEN);
	rt_store_close(open_rw(p));
	ck_assert_int_eq(sql_int(p, "SELECT value FROM meta WHERE key = 'schema_version'"), 2);
}
END_TEST

START_TEST(test_schema_version)
{
	const char *p = dbpath("v.db");
	struct rt_store *s = open_rw(p);
	rt_store_close(s);
	ck_assert_int_eq(sql_int(p, "SELECT value FROM meta WHERE key = 'schema_version'"), 2);
	ck_assert_int_eq(sql_int(p, "PRAGMA application_id"), 0x52545243);
	ck_assert_int_eq(sql_int(p, "SELECT count(*) FROM pragma_journal_mode "
				    "WHERE journal_mode = 'wal'"), 1);

	sql_exec(p, "UPDATE meta SET value = 3 WHERE key = 'schema_version'");
	ck_assert_int_eq(open_err(p, 0, "newer"), RT_STORE_E_SCHEMA);
	ck_assert_int_eq(open_err(p, 1, "newer"), RT_STORE_E_SCHEMA);
	ck_assert_int_eq(sql_int(p, "SELECT value FROM meta WHERE key = 'schema_version'"), 3);
	sql_exec(p, "UPDATE meta SET value = 0 WHERE key = 'schema_version'");
	ck_assert_int_eq(open_err(p, 0, "unknown schema version"), RT_STORE_E_SCHEMA);
	sql_exec(p, "DELETE FROM meta WHERE key = 'schema_version'");
	ck_assert_int_eq(open_err(p, 0, "not a retrace store"), RT_STORE_E_OPEN);
	sql_exec(p, "INSERT INTO meta VALUES('schema_version', 2)");
	rt_store_close(open_ro(p));

	/* A trace row edited into nonsense is an error, not garbage. */
	s = open_rw(p);
	struct rt_store_trace t = mk_trace(0, 3, 100);
	put_trace_ok(s, &t);
	rt_store_close(s);
	sql_exec(p, "UPDATE traces SET agents = '1,x,3'");
	s = open_ro(p);
	ck_assert_int_eq(rt_store_get_trace(s, 0, 3, &t), RT_STORE_E_IO);
	ck_assert_ptr_nonnull(strstr(rt_store_errmsg(s), "corrupt"));
	rt_store_close(s);
}
END_TEST

static uint32_t rate_of(const struct rt_store_rate *r, uint32_t n, uint32_t agent)
{
	for (uint32_t i = 0; i < n; i++)
		if (r[i].agent_id == agent)
			return r[i].rate_exp;
	ck_abort_msg("agent %u has no rate", agent);
	return 0;
}

/*
 * Schema version 2 stores each slice's rate_exp, and the largest per agent is a
 * trace's rate for that agent. A version-1 store (no column) reads as rate 0
 * read-only, untouched; a writable open migrates it once, old rows 0.
 */
START_TEST(test_rate_migration)
{
	const char *p = dbpath("rate.db");
	struct rt_store *s = open_rw(p);
	struct rt_store_rate r[4];
	struct rt_store_slice sl;
	struct got g;
	uint32_t n = 0;
	int rc;

	/* version 2: stored and read back, max per agent */
	begin_ok(s);
	sl = mk(0, 7, 1, 1, "a", 1);
	sl.rate_exp = 1;
	put_ok(s, &sl);
	sl = mk(0, 7, 1, 2, "b", 1);
	sl.rate_exp = 3; /* the agent's level went up between its two slices */
	put_ok(s, &sl);
	sl = mk(0, 7, 2, 1, "c", 1);
	sl.rate_exp = 0;
	put_ok(s, &sl);
	commit_ok(s);
	walk(s, 0, 7, &g);
	ck_assert_uint_eq(g.n, 3);
	ck_assert_uint_eq(g.v[0].rate_exp, 1);
	ck_assert_uint_eq(g.v[1].rate_exp, 3);
	ck_assert_uint_eq(g.v[2].rate_exp, 0);
	got_free(&g);
	rc = rt_store_trace_rates(s, 0, 7, r, 4, &n);
	ck_assert_msg(rc == 0, "%s", rt_store_errmsg(s));
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(rate_of(r, n, 1), 3);
	ck_assert_uint_eq(rate_of(r, n, 2), 0);
	/* a short array: the first agent only */
	ck_assert_int_eq(rt_store_trace_rates(s, 0, 7, r, 1, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(r[0].agent_id, 1);
	ck_assert_int_eq(rt_store_trace_rates(s, 0, 8, r, 4, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(rt_store_trace_rates(s, 0, 7, NULL, 4, &n), RT_STORE_E_INVAL);
	rt_store_close(s);

	/* Make it a version-1 store: no rate_exp column. */
	sql_exec(p, "ALTER TABLE slices DROP COLUMN rate_exp;"
		    "UPDATE meta SET value = 1 WHERE key = 'schema_version'");
	s = open_ro(p);
	walk(s, 0, 7, &g);
	ck_assert_uint_eq(g.n, 3);
	for (size_t i = 0; i < g.n; i++)
		ck_assert_uint_eq(g.v[i].rate_exp, 0);
	ck_assert_mem_eq(g.v[1].msg, "b", 1);
	got_free(&g);
	ck_assert_int_eq(rt_store_trace_rates(s, 0, 7, r, 4, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(rate_of(r, n, 1), 0);
	rt_store_close(s);
	ck_assert_int_eq(sql_int(p, "SELECT value FROM meta WHERE key = 'schema_version'"), 1);
	ck_assert_int_eq(sql_int(p, "SELECT count(*) FROM pragma_table_info('slices') "
				    "WHERE name = 'rate_exp'"), 0);

	/* A writable open migrates: old rows read 0, new ones keep theirs. */
	s = open_rw(p);
	ck_assert_int_eq(sql_int(p, "SELECT value FROM meta WHERE key = 'schema_version'"), 2);
	begin_ok(s);
	sl = mk(0, 7, 2, 2, "d", 1);
	sl.rate_exp = 5;
	put_ok(s, &sl);
	commit_ok(s);
	walk(s, 0, 7, &g);
	ck_assert_uint_eq(g.n, 4);
	ck_assert_uint_eq(g.v[1].rate_exp, 0);
	ck_assert_uint_eq(g.v[3].rate_exp, 5);
	ck_assert_mem_eq(g.v[3].msg, "d", 1);
	got_free(&g);
	ck_assert_int_eq(rt_store_trace_rates(s, 0, 7, r, 4, &n), 0);
	ck_assert_uint_eq(rate_of(r, n, 1), 0);
	ck_assert_uint_eq(rate_of(r, n, 2), 5);
	rt_store_close(s);
	/* and a second open finds nothing to do */
	rt_store_close(open_rw(p));
	rt_store_close(open_ro(p));
	ck_assert_int_eq(sql_int(p, "SELECT count(*) FROM pragma_table_info('slices') "
				    "WHERE name = 'rate_exp'"), 1);
}
END_TEST

static int nop_trace(void *a, const struct rt_store_trace *t) { (void)a; (void)t; return 0; }
static int nop_agent(void *a, const struct rt_store_agent *g) { (void)a; (void)g; return 0; }
static int nop_trig(void *a, uint32_t i, uint64_t q, uint64_t r, const void *m, size_t n)
{
	(void)a; (void)i; (void)q; (void)r; (void)m; (void)n;
	return 0;
}

START_TEST(test_null_args)
{
	struct rt_store_options o = { .path = dbpath("null.db") };
	struct rt_store *s = NULL;
	struct rt_store_query q = { 0 };
	struct rt_store_slice sl = mk(0, 1, 1, 1, NULL, 5); /* NULL msg, length 5 */

	ck_assert_int_eq(rt_store_open(NULL, &o), RT_STORE_E_INVAL);
	ck_assert_str_ne(rt_store_errmsg(NULL), "");
	ck_assert_int_eq(rt_store_open(&s, NULL), RT_STORE_E_INVAL);
	ck_assert_ptr_null(s);
	o.path = "";
	ck_assert_int_eq(rt_store_open(&s, &o), RT_STORE_E_INVAL);
	o.path = dbpath("null.db");

	/* NULL store. */
	ck_assert_int_eq(rt_store_begin(NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_commit(NULL), RT_STORE_E_INVAL);
	rt_store_rollback(NULL);
	rt_store_close(NULL);
	ck_assert_ptr_null(rt_store_path(NULL));
	ck_assert_int_eq(rt_store_put_slice(NULL, &sl), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_slices(NULL, 0, 1, nop_slice, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_put_trace(NULL, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_add_late(NULL, &sl), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_get_trace(NULL, 0, 1, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_list(NULL, &q, nop_trace, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_put_agent(NULL, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_delete_agent(NULL, 1), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_agents(NULL, nop_agent, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_put_trigger(NULL, 1, 1, 1, "x", 1), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_done_trigger(NULL, 1, 1), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_pending_triggers(NULL, nop_trig, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_retain(NULL, 1, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_stats(NULL, NULL), RT_STORE_E_INVAL);

	/* A valid store, NULL arguments. */
	ck_assert_int_eq(rt_store_open(&s, &o), 0);
	ck_assert_str_eq(rt_store_errmsg(s), "");
	ck_assert_str_eq(rt_store_path(s), o.path);
	begin_ok(s);
	ck_assert_int_eq(rt_store_put_slice(s, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_put_slice(s, &sl), RT_STORE_E_INVAL);
	ck_assert_ptr_nonnull(strstr(rt_store_errmsg(s), "NULL msg"));
	commit_ok(s);
	ck_assert_int_eq(rt_store_slices(s, 0, 1, NULL, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_put_trace(s, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_add_late(s, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_get_trace(s, 0, 1, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_list(s, NULL, nop_trace, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_list(s, &q, NULL, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_put_agent(s, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_agents(s, NULL, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_put_trigger(s, 1, 1, 1, NULL, 3), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_pending_triggers(s, NULL, NULL), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_stats(s, NULL), RT_STORE_E_INVAL);
	ck_assert_str_ne(rt_store_errmsg(s), "");
	/* Nothing was stored by any of it. */
	ck_assert_uint_eq(stats(s).slices, 0);
	ck_assert_uint_eq(stats(s).traces, 0);
	ck_assert_uint_eq(stats(s).pending_triggers, 0);
	rt_store_close(s);

	/* Every code has its own text. */
	const int codes[] = { RT_STORE_OK, RT_STORE_DUPLICATE, RT_STORE_E_OPEN,
			      RT_STORE_E_SCHEMA, RT_STORE_E_IO, RT_STORE_E_BUSY,
			      RT_STORE_E_NOTFOUND, RT_STORE_E_READONLY, RT_STORE_E_INVAL, -1 };
	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
		for (size_t j = 0; j < i; j++)
			ck_assert_str_ne(rt_store_strerror(codes[i]), rt_store_strerror(codes[j]));
}
END_TEST

START_TEST(test_default_path)
{
	struct rt_store_options o = { 0 };
	struct rt_store *s;
	ck_assert_int_eq(chdir(g_dir), 0);
	ck_assert_int_eq(rt_store_open(&s, &o), 0);
	ck_assert_str_eq(rt_store_path(s), RT_STORE_DEFAULT_PATH);
	rt_store_close(s);
	ck_assert_int_gt(file_size(dbpath(RT_STORE_DEFAULT_PATH)), 0);
	o.sync_full = 1;
	ck_assert_int_eq(rt_store_open(&s, &o), 0);
	begin_ok(s);
	put_batch(s, 1, 0, 2);
	commit_ok(s);
	rt_store_close(s);
	o.readonly = 1;
	ck_assert_int_eq(rt_store_open(&s, &o), 0);
	ck_assert_uint_eq(count_slices(s, 1, 1), 2);
	rt_store_close(s);
}
END_TEST

/* ------------------------------------------------------------- main ---- */

/* One test case per test, so ctest runs them as separate entries in parallel
 * (tests/coordinator/CMakeLists.txt names each; CK_RUN_CASE picks one). */
#define STORE_CASE(su, name, fn, loops)                                        \
	do {                                                                   \
		TCase *tc_ = tcase_create(name);                               \
		tcase_add_checked_fixture(tc_, setup, teardown);               \
		tcase_set_timeout(tc_, 60);                                    \
		tcase_add_loop_test(tc_, fn, 0, loops);                        \
		suite_add_tcase(su, tc_);                                      \
	} while (0)

static Suite *store_suite(void)
{
	Suite *s = suite_create("coordinator_store");
	STORE_CASE(s, "slice_roundtrip", test_slice_roundtrip, 1);
	STORE_CASE(s, "slice_duplicate", test_slice_duplicate, 1);
	STORE_CASE(s, "rollback", test_rollback, 1);
	STORE_CASE(s, "trace_roundtrip", test_trace_roundtrip, 1);
	STORE_CASE(s, "trace_list", test_trace_list, 1);
	STORE_CASE(s, "add_late", test_add_late, 1);
	STORE_CASE(s, "agents", test_agents, 1);
	STORE_CASE(s, "triggers", test_triggers, 1);
	STORE_CASE(s, "kill9", test_kill9, 2);
	STORE_CASE(s, "readonly_concurrent", test_readonly_concurrent, 1);
	STORE_CASE(s, "readonly_other_process", test_readonly_other_process, 1);
	STORE_CASE(s, "nested_walk", test_nested_walk, 1);
	STORE_CASE(s, "busy_second_writer", test_busy_second_writer, 1);
	STORE_CASE(s, "retention_age", test_retention_age, 1);
	STORE_CASE(s, "retention_size", test_retention_size, 1);
	STORE_CASE(s, "stats", test_stats, 1);
	STORE_CASE(s, "put_rate", test_put_rate, 1);
	STORE_CASE(s, "background_checkpoint", test_background_checkpoint, 1);
	STORE_CASE(s, "bad_files", test_bad_files, 1);
	STORE_CASE(s, "schema_version", test_schema_version, 1);
	STORE_CASE(s, "rate_migration", test_rate_migration, 1);
	STORE_CASE(s, "null_args", test_null_args, 1);
	STORE_CASE(s, "default_path", test_default_path, 1);
	return s;
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	int rc;
	snprintf(g_root, sizeof g_root, "%s/rt-test-store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(g_root)) {
		perror("mkdtemp");
		return 1;
	}
	rc = test_run_suite(store_suite());
	nftw(g_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	return rc;
}
