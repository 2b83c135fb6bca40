/*
 * tests/coordinator/test_select_store.c — the store's side of selection: verdict
 * columns (rt_store_set_selection), deleting a dropped trace with its slices
 * (rt_store_delete_trace, inside and outside a transaction, totals kept right),
 * and stores written before the selection columns existed: a read-only open reads
 * them as empty, a writable open adds them.
 */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/suite.h"
#include "store.h"

static char dir[64];

static const char *db_path(void)
{
	static char p[128];
	if (!dir[0]) {
		snprintf(dir, sizeof dir, "/tmp/rt-selstore-XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(dir));
	}
	snprintf(p, sizeof p, "%s/s.db", dir);
	return p;
}

static void cleanup(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	dir[0] = 0;
}

static struct rt_store *open_store(const char *path, int readonly)
{
	struct rt_store_options o = { .path = path, .readonly = readonly };
	struct rt_store *s = NULL;
	int rc = rt_store_open(&s, &o);
	ck_assert_msg(rc == 0, "open: %s", rt_store_errmsg(s));
	return s;
}

static void put_trace_with_slices(struct rt_store *s, uint64_t lo, int nslices)
{
	static const uint8_t msg[16] = { 0x91, 1 };
	struct rt_store_trace t;
	memset(&t, 0, sizeof t);
	t.trace_hi = 7;
	t.trace_lo = lo;
	t.coherent = 1;
	t.closed_ns = 1000 + lo;
	ck_assert_int_eq(rt_store_begin(s), 0);
	for (int i = 0; i < nslices; i++) {
		struct rt_store_slice sl = { .trace_hi = 7, .trace_lo = lo, .agent_id = 1,
					     .slice_seq = (uint64_t)i, .bytes = 100, .msg = msg,
					     .msg_len = sizeof msg };
		ck_assert_int_eq(rt_store_put_slice(s, &sl), 0);
	}
	ck_assert_int_eq(rt_store_put_trace(s, &t), 0);
	ck_assert_int_eq(rt_store_commit(s), 0);
}

static int count_slice(void *arg, const struct rt_store_slice *sl)
{
	(void)sl;
	(*(int *)arg)++;
	return 0;
}

static int slices_of(struct rt_store *s, uint64_t lo)
{
	int n = 0;
	ck_assert_int_eq(rt_store_slices(s, 7, lo, count_slice, &n), 0);
	return n;
}

START_TEST(verdict_columns_round_trip)
{
	struct rt_store *s = open_store(db_path(), 0);
	struct rt_store_trace v, got;
	put_trace_with_slices(s, 1, 1);
	ck_assert_int_eq(rt_store_get_trace(s, 7, 1, &got), 0);
	ck_assert_int_eq(got.has_selection, 0);
	memset(&v, 0, sizeof v);
	v.trace_hi = 7;
	v.trace_lo = 1;
	v.score = 7.5;
	v.pattern = 0xfedcba9876543210ull; /* above INT64_MAX: the unsigned round trip */
	v.group_key = 0x8000000000000001ull;
	snprintf(v.group, sizeof v.group, "frontend GET /cart \"quoted\"");
	v.weight = 2.25;
	ck_assert_int_eq(rt_store_set_selection(s, &v), 0);
	ck_assert_int_eq(rt_store_get_trace(s, 7, 1, &got), 0);
	ck_assert_int_eq(got.has_selection, 1);
	ck_assert_double_eq(got.score, 7.5);
	ck_assert_uint_eq(got.pattern, v.pattern);
	ck_assert_uint_eq(got.group_key, v.group_key);
	ck_assert_str_eq(got.group, v.group);
	ck_assert_double_eq(got.weight, 2.25);
	ck_assert_uint_eq(got.coherent, 1); /* the rest of the row is untouched */
	v.trace_lo = 99;
	ck_assert_int_eq(rt_store_set_selection(s, &v), RT_STORE_E_NOTFOUND);
	rt_store_close(s);
	s = open_store(db_path(), 1);
	ck_assert_int_eq(rt_store_set_selection(s, &v), RT_STORE_E_READONLY);
	rt_store_close(s);
	cleanup();
}
END_TEST

START_TEST(delete_trace_takes_its_slices)
{
	struct rt_store *s = open_store(db_path(), 0);
	struct rt_store_stats st;
	struct rt_store_trace got;
	put_trace_with_slices(s, 1, 3);
	put_trace_with_slices(s, 2, 2);
	/* Outside a transaction: its own. */
	ck_assert_int_eq(rt_store_delete_trace(s, 7, 1), 0);
	ck_assert_int_eq(rt_store_get_trace(s, 7, 1, &got), RT_STORE_E_NOTFOUND);
	ck_assert_int_eq(slices_of(s, 1), 0);
	ck_assert_int_eq(slices_of(s, 2), 2);
	ck_assert_int_eq(rt_store_stats(s, &st), 0);
	ck_assert_uint_eq(st.slices, 2);
	ck_assert_uint_eq(st.slice_bytes, 200);
	ck_assert_int_eq(rt_store_delete_trace(s, 7, 1), RT_STORE_E_NOTFOUND);
	/* Inside the caller's transaction (the coordinator's loop), rolled back. */
	ck_assert_int_eq(rt_store_begin(s), 0);
	ck_assert_int_eq(rt_store_delete_trace(s, 7, 2), 0);
	ck_assert_int_eq(slices_of(s, 2), 0);
	rt_store_rollback(s);
	ck_assert_int_eq(slices_of(s, 2), 2);
	ck_assert_int_eq(rt_store_begin(s), 0);
	ck_assert_int_eq(rt_store_delete_trace(s, 7, 2), 0);
	ck_assert_int_eq(rt_store_commit(s), 0);
	ck_assert_int_eq(rt_store_stats(s, &st), 0);
	ck_assert_uint_eq(st.traces, 0);
	ck_assert_uint_eq(st.slices, 0);
	ck_assert_uint_eq(st.slice_bytes, 0);
	rt_store_close(s);
	cleanup();
}
END_TEST

static void sql(const char *path, const char *text)
{
	sqlite3 *db;
	char *msg = NULL;
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(db, text, NULL, NULL, &msg) == SQLITE_OK, "%s: %s", text, msg);
	sqlite3_close(db);
}

static int list_one(void *arg, const struct rt_store_trace *t)
{
	*(struct rt_store_trace *)arg = *t;
	return 0;
}

START_TEST(store_from_before_selection_opens)
{
	const char *path = db_path();
	struct rt_store *s = open_store(path, 0);
	struct rt_store_query q = { 0 };
	struct rt_store_trace got, v;
	put_trace_with_slices(s, 1, 1);
	rt_store_close(s);
	/* Back to the layout of the first release. */
	sql(path, "ALTER TABLE traces DROP COLUMN score; ALTER TABLE traces DROP COLUMN pattern;"
		  "ALTER TABLE traces DROP COLUMN group_key; ALTER TABLE traces DROP COLUMN group_api;"
		  "ALTER TABLE traces DROP COLUMN weight;");
	s = open_store(path, 1); /* the CLI: reads, never writes */
	memset(&got, 0, sizeof got);
	ck_assert_int_eq(rt_store_list(s, &q, list_one, &got), 0);
	ck_assert_uint_eq(got.trace_lo, 1);
	ck_assert_int_eq(got.has_selection, 0);
	ck_assert_int_eq(rt_store_get_trace(s, 7, 1, &got), 0);
	rt_store_close(s);
	s = open_store(path, 0); /* the coordinator: adds the columns */
	memset(&v, 0, sizeof v);
	v.trace_hi = 7;
	v.trace_lo = 1;
	v.weight = 1;
	snprintf(v.group, sizeof v.group, "a b");
	ck_assert_int_eq(rt_store_set_selection(s, &v), 0);
	rt_store_close(s);
	s = open_store(path, 1);
	ck_assert_int_eq(rt_store_get_trace(s, 7, 1, &got), 0);
	ck_assert_int_eq(got.has_selection, 1);
	ck_assert_str_eq(got.group, "a b");
	rt_store_close(s);
	cleanup();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("coordinator_select_store");
	TCase *tc = tcase_create("store");
	/* Each case opens and commits SQLite files (fsync): Check's default 4 s was
	 * exceeded on a disk busy with two builds and the stress run (run 1/50). */
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, verdict_columns_round_trip);
	tcase_add_test(tc, delete_trace_takes_its_slices);
	tcase_add_test(tc, store_from_before_selection_opens);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
