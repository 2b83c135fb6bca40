/*
 * tests/store/test_backends.c — the store interface on both backends: the same
 * calls on a SQLite file and on a real ClickHouse server (a private one this
 * suite starts on loopback, tests/store/chserver.c) must return the same codes
 * and leave the same readable state.
 *
 * A scenario drives every rt_store_* call; a dump reads everything back through
 * the interface into text (lists with each filter, each trace by full and by
 * short id, its slices byte for byte, rates, agents, pending triggers, stats);
 * the two dumps must be equal. The ClickHouse-only cases check what SQLite has
 * no counterpart for (a re-sent slice on a new handle, dropped partitions,
 * locators, a server that answers nonsense).
 *
 * main() starts one server for the whole run (each case works in a database
 * of its own) and stops it at the end; Check forks each case, so a failing
 * case cannot leave the server running. Without the clickhouse-server package
 * the suite says so and exits 77 (ctest: skipped); a server that is installed
 * but does not start is a failure.
 */
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include "common/suite.h"
#include "store.h"
#include "store/chserver.h"

#define SEC 1000000000ull
#define DAY (86400ull * SEC)

static struct chserver g_ch;
static char g_root[512];

/* --------------------------------------------------------- helpers ---- */

/* A growing text the dump writes into. */
struct text {
	char *p;
	size_t len, cap;
};

static void tprintf(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tprintf(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
		va_end(ap);
		ck_assert_int_ge(n, 0);
		if (t->p && t->len + (size_t)n < t->cap)
			break;
		t->cap = (t->cap + (size_t)n + 1) * 2;
		t->p = realloc(t->p, t->cap);
		ck_assert_ptr_nonnull(t->p);
	}
	t->len += (size_t)n;
}

static const char *sqlite_locator(const char *name)
{
	static char buf[4][700];
	static int i;
	char *p = buf[i++ & 3];
	snprintf(p, sizeof buf[0], "sqlite:%s/%s-%d.db", g_root, name, (int)getpid());
	return p;
}

static const char *ch_locator(const char *name)
{
	static char buf[4][256];
	static int i;
	char *p = buf[i++ & 3];
	snprintf(p, sizeof buf[0], "%s/%s_%d", g_ch.url, name, (int)getpid());
	return p;
}

static struct rt_store *open_store(const char *loc, int readonly, uint64_t max_age,
				   uint64_t max_bytes)
{
	struct rt_store_options o = { .path = loc, .readonly = readonly, .max_age_ns = max_age,
				      .max_bytes = max_bytes };
	struct rt_store *s = NULL;
	int rc = rt_store_open(&s, &o);
	ck_assert_msg(rc == 0, "open %s: %d %s", loc, rc, rt_store_errmsg(NULL));
	return s;
}

static uint8_t msg_byte(uint64_t lo, uint32_t agent, uint64_t seq, size_t i)
{
	return (uint8_t)((lo * 31 + agent * 7 + seq * 13 + i * 5) ^ (i >> 3));
}

static struct rt_store_slice make_slice(uint64_t hi, uint64_t lo, uint32_t agent, uint64_t seq,
					uint64_t t0, size_t len, unsigned char *buf)
{
	struct rt_store_slice sl = { 0 };
	for (size_t i = 0; i < len; i++)
		buf[i] = msg_byte(lo, agent, seq, i);
	if (len > 3) /* every byte value a text format would have to escape */
		memcpy(buf, "\0\t\n\\", 4);
	sl.trace_hi = hi;
	sl.trace_lo = lo;
	sl.agent_id = agent;
	sl.trigger_id = 40 + agent;
	sl.slice_seq = seq;
	sl.received_ns = t0 + seq * 1000;
	sl.buffers = 1 + (uint32_t)(len / 100);
	sl.bytes = len;
	sl.first_ns = t0 - 5000 + agent;
	sl.last_ns = t0 + 5000 + seq;
	sl.rate_exp = agent % 3;
	sl.msg = buf;
	sl.msg_len = len;
	return sl;
}

static struct rt_store_trace make_trace(uint64_t hi, uint64_t lo, uint64_t closed, int coherent,
					uint32_t trigger)
{
	struct rt_store_trace t = { 0 };
	t.trace_hi = hi;
	t.trace_lo = lo;
	t.group_id = lo ^ 0x55;
	t.trigger_count = 2;
	t.trigger_ids[0] = trigger;
	t.trigger_ids[1] = trigger + 100;
	t.agent_count = 2;
	t.agents[0] = 1;
	t.agents[1] = 2;
	t.missing_count = coherent ? 0 : 1;
	t.missing[0] = 3;
	t.coherent = coherent;
	t.first_ns = closed - 10 * SEC;
	t.last_ns = closed - SEC;
	t.bytes = 1234 + lo;
	t.slices = 2;
	t.triggered_ns = closed - 2 * SEC;
	t.closed_ns = closed;
	t.traversal_ns = 777 + lo;
	return t;
}

/* ------------------------------------------------------------ dump ---- */

static void dump_trace(struct text *d, const struct rt_store_trace *t)
{
	tprintf(d, "trace %016llx%016llx g=%llu trig=", (unsigned long long)t->trace_hi,
		(unsigned long long)t->trace_lo, (unsigned long long)t->group_id);
	for (uint32_t i = 0; i < t->trigger_count; i++)
		tprintf(d, "%u,", t->trigger_ids[i]);
	tprintf(d, " agents=");
	for (uint32_t i = 0; i < t->agent_count; i++)
		tprintf(d, "%u,", t->agents[i]);
	tprintf(d, " missing=");
	for (uint32_t i = 0; i < t->missing_count; i++)
		tprintf(d, "%u,", t->missing[i]);
	tprintf(d, " coh=%d first=%llu last=%llu bytes=%llu slices=%u late=%u trig_ns=%llu "
		"closed=%llu trav=%llu sel=%d",
		t->coherent, (unsigned long long)t->first_ns, (unsigned long long)t->last_ns,
		(unsigned long long)t->bytes, t->slices, t->late_slices,
		(unsigned long long)t->triggered_ns, (unsigned long long)t->closed_ns,
		(unsigned long long)t->traversal_ns, t->has_selection);
	if (t->has_selection)
		tprintf(d, " score=%.17g pattern=%llu key=%llu group='%s' weight=%.17g", t->score,
			(unsigned long long)t->pattern, (unsigned long long)t->group_key, t->group,
			t->weight);
	tprintf(d, "\n");
}

static int dump_trace_cb(void *arg, const struct rt_store_trace *t)
{
	dump_trace(arg, t);
	return 0;
}

static int dump_slice_cb(void *arg, const struct rt_store_slice *sl)
{
	struct text *d = arg;
	tprintf(d, "  slice %llx/%llx a=%u trig=%u seq=%llu recv=%llu buf=%u bytes=%llu first=%llu "
		"last=%llu late=%d rate=%u msg=",
		(unsigned long long)sl->trace_hi, (unsigned long long)sl->trace_lo, sl->agent_id,
		sl->trigger_id, (unsigned long long)sl->slice_seq,
		(unsigned long long)sl->received_ns, sl->buffers, (unsigned long long)sl->bytes,
		(unsigned long long)sl->first_ns, (unsigned long long)sl->last_ns, sl->late,
		sl->rate_exp);
	for (size_t i = 0; i < sl->msg_len; i++)
		tprintf(d, "%02x", ((const unsigned char *)sl->msg)[i]);
	tprintf(d, "\n");
	return 0;
}

static int dump_agent_cb(void *arg, const struct rt_store_agent *a)
{
	tprintf(arg, "agent %u pid=%u host='%s' ctl='%s' start=%llu seen=%llu\n", a->agent_id,
		a->pid, a->host, a->control_addr, (unsigned long long)a->start_ns,
		(unsigned long long)a->last_seen_ns);
	return 0;
}

static int dump_name_cb(void *arg, uint32_t id, const char *name)
{
	tprintf(arg, "trigger name %u '%s'\n", id, name);
	return 0;
}

static int dump_trigger_cb(void *arg, uint32_t agent, uint64_t seq, uint64_t received,
			   const void *msg, size_t len)
{
	tprintf(arg, "pending %u/%llu recv=%llu msg=%.*s\n", agent, (unsigned long long)seq,
		(unsigned long long)received, (int)len, (const char *)msg);
	return 0;
}

struct ids {
	uint64_t hi[64], lo[64];
	int n;
};

static int collect_ids(void *arg, const struct rt_store_trace *t)
{
	struct ids *ids = arg;
	if (ids->n < 64) {
		ids->hi[ids->n] = t->trace_hi;
		ids->lo[ids->n++] = t->trace_lo;
	}
	return 0;
}

/* Everything the interface can read, as text. */
static char *dump(struct rt_store *s)
{
	struct text d = { 0 };
	struct rt_store_query q = { 0 };
	struct rt_store_stats st;
	struct ids ids = { .n = 0 };
	struct rt_store_trace t;
	struct rt_store_rate rates[8];
	uint32_t nr;
	int rc;

	tprintf(&d, "# all\n");
	ck_assert_int_eq(rt_store_list(s, &q, dump_trace_cb, &d), 0);
	ck_assert_int_eq(rt_store_list(s, &q, collect_ids, &ids), 0);
	q.by_trigger = 1, q.trigger_id = 103;
	tprintf(&d, "# trigger 103\n");
	ck_assert_int_eq(rt_store_list(s, &q, dump_trace_cb, &d), 0);
	q = (struct rt_store_query){ .incoherent_only = 1 };
	tprintf(&d, "# incoherent\n");
	ck_assert_int_eq(rt_store_list(s, &q, dump_trace_cb, &d), 0);
	q = (struct rt_store_query){ .since_ns = 1500 * SEC, .limit = 2 };
	tprintf(&d, "# since 1500 s, 2\n");
	ck_assert_int_eq(rt_store_list(s, &q, dump_trace_cb, &d), 0);
	for (int i = 0; i < ids.n; i++) {
		tprintf(&d, "# %016llx%016llx\n", (unsigned long long)ids.hi[i],
			(unsigned long long)ids.lo[i]);
		ck_assert_int_eq(rt_store_get_trace(s, ids.hi[i], ids.lo[i], &t), 0);
		dump_trace(&d, &t);
		rc = rt_store_get_trace(s, 0, ids.lo[i], &t);
		tprintf(&d, "short id: %d\n", rc);
		if (!rc)
			dump_trace(&d, &t);
		ck_assert_int_eq(rt_store_slices(s, ids.hi[i], ids.lo[i], dump_slice_cb, &d), 0);
		tprintf(&d, " by lo:\n");
		ck_assert_int_eq(rt_store_slices(s, 0, ids.lo[i], dump_slice_cb, &d), 0);
		ck_assert_int_eq(rt_store_trace_rates(s, ids.hi[i], ids.lo[i], rates, 8, &nr), 0);
		for (uint32_t k = 0; k < nr; k++)
			tprintf(&d, " rate %u=%u\n", rates[k].agent_id, rates[k].rate_exp);
	}
	tprintf(&d, "# orphan slices of lo 999\n");
	ck_assert_int_eq(rt_store_slices(s, 0, 999, dump_slice_cb, &d), 0);
	tprintf(&d, "# agents\n");
	ck_assert_int_eq(rt_store_agents(s, dump_agent_cb, &d), 0);
	tprintf(&d, "# trigger names\n");
	ck_assert_int_eq(rt_store_trigger_names(s, dump_name_cb, &d), 0);
	tprintf(&d, "# pending triggers\n");
	ck_assert_int_eq(rt_store_pending_triggers(s, dump_trigger_cb, &d), 0);
	ck_assert_int_eq(rt_store_stats(s, &st), 0);
	tprintf(&d, "# stats traces=%llu coherent=%llu incoherent=%llu slices=%llu bytes=%llu "
		"pending=%llu agents=%llu\n",
		(unsigned long long)st.traces, (unsigned long long)st.coherent,
		(unsigned long long)st.incoherent, (unsigned long long)st.slices,
		(unsigned long long)st.slice_bytes, (unsigned long long)st.pending_triggers,
		(unsigned long long)st.agents);
	return d.p;
}

/* -------------------------------------------------------- scenario ---- */

static void put(struct rt_store *s, uint64_t hi, uint64_t lo, uint32_t agent, uint64_t seq,
		uint64_t t0, size_t len, int expect)
{
	unsigned char buf[600];
	struct rt_store_slice sl = make_slice(hi, lo, agent, seq, t0, len, buf);
	int rc = rt_store_put_slice(s, &sl);
	ck_assert_msg(rc == expect, "put_slice %llx a%u s%llu: %d (want %d) %s",
		      (unsigned long long)lo, agent, (unsigned long long)seq, rc, expect,
		      rt_store_errmsg(s));
}

/* Every write call, with the codes both backends must return. */
static void scenario(struct rt_store *s)
{
	struct rt_store_agent a = { 0 };
	struct rt_store_trace t;
	unsigned char buf[600];
	struct rt_store_slice late;

	for (uint32_t id = 1; id <= 3; id++) {
		a.agent_id = id;
		a.pid = 100 + id;
		snprintf(a.host, sizeof a.host, "host-%u", id);
		snprintf(a.control_addr, sizeof a.control_addr, "tcp://127.0.0.1:%u", 7000 + id);
		a.start_ns = 1000 * SEC + id;
		a.last_seen_ns = 1001 * SEC + id;
		ck_assert_int_eq(rt_store_put_agent(s, &a), 0);
	}
	a.agent_id = 1;
	a.last_seen_ns = 2002 * SEC;
	ck_assert_int_eq(rt_store_put_agent(s, &a), 0);
	ck_assert_int_eq(rt_store_delete_agent(s, 2), 0);
	ck_assert_int_eq(rt_store_delete_agent(s, 2), RT_STORE_E_NOTFOUND);

	ck_assert_int_eq(rt_store_put_trigger(s, 1, 10, 1100 * SEC, "trig-1-10", 9), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 1, 11, 1101 * SEC, "trig-1-11", 9), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 2, 5, 1050 * SEC, "trig-2-5", 8), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 1, 10, 1100 * SEC, "trig-1-10", 9),
			 RT_STORE_DUPLICATE);
	ck_assert_int_eq(rt_store_done_trigger(s, 1, 11), 0);
	ck_assert_int_eq(rt_store_done_trigger(s, 1, 11), 0);
	ck_assert_int_eq(rt_store_done_trigger(s, 9, 9), RT_STORE_E_NOTFOUND);

	/* Trigger names: the newest name of an id wins; bad names are refused. */
	ck_assert_int_eq(rt_store_put_trigger_name(s, 7, "payment-error", 1100 * SEC), 0);
	ck_assert_int_eq(rt_store_put_trigger_name(s, 9, "percentile-p99.9", 1100 * SEC), 0);
	ck_assert_int_eq(rt_store_put_trigger_name(s, 7, "payment-error-v2", 1200 * SEC), 0);
	ck_assert_int_eq(rt_store_put_trigger_name(s, 8, "it's", 1200 * SEC), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_put_trigger_name(s, 8, "", 1200 * SEC), RT_STORE_E_INVAL);
	ck_assert_int_eq(rt_store_put_trigger_name(s, 8, NULL, 1200 * SEC), RT_STORE_E_INVAL);

	/* One transaction: slices of four traces (two share trace_lo 100), a
	 * duplicate inside it, an orphan, and the trace rows. */
	ck_assert_int_eq(rt_store_begin(s), 0);
	put(s, 7, 100, 1, 1, 1000 * SEC, 300, 0);
	put(s, 7, 100, 1, 2, 1000 * SEC, 17, 0);
	put(s, 7, 100, 2, 1, 1000 * SEC, 512, 0);
	put(s, 7, 100, 1, 2, 1000 * SEC, 17, RT_STORE_DUPLICATE);
	put(s, 9, 101, 1, 1, 1400 * SEC, 40, 0);
	put(s, 0, 200, 2, 1, 1600 * SEC, 0, 0);
	put(s, 0, 200, 3, 4, 1600 * SEC, 64, 0);
	put(s, 5, 300, 1, 1, 1700 * SEC, 99, 0);
	put(s, 5, 999, 1, 1, 1700 * SEC, 10, 0); /* no trace row: an orphan */
	t = make_trace(7, 100, 1200 * SEC, 1, 3);
	ck_assert_int_eq(rt_store_put_trace(s, &t), 0);
	t = make_trace(9, 101, 1500 * SEC, 0, 3);
	ck_assert_int_eq(rt_store_put_trace(s, &t), 0);
	t = make_trace(0, 200, 1600 * SEC, 1, 4);
	ck_assert_int_eq(rt_store_put_trace(s, &t), 0);
	t = make_trace(5, 300, 1700 * SEC, 0, 3);
	ck_assert_int_eq(rt_store_put_trace(s, &t), 0);
	t = make_trace(6, 100, 1800 * SEC, 1, 5); /* same lo as 7/100, newer */
	ck_assert_int_eq(rt_store_put_trace(s, &t), 0);
	ck_assert_int_eq(rt_store_commit(s), 0);

	/* A re-sent slice in a later transaction. */
	ck_assert_int_eq(rt_store_begin(s), 0);
	put(s, 7, 100, 2, 1, 1000 * SEC, 512, RT_STORE_DUPLICATE);
	late = make_slice(7, 100, 3, 1, 1900 * SEC, 33, buf);
	late.late = 1;
	ck_assert_int_eq(rt_store_put_slice(s, &late), 0);
	ck_assert_int_eq(rt_store_add_late(s, &late), 0);
	late = make_slice(7, 555, 3, 1, 1900 * SEC, 33, buf);
	ck_assert_int_eq(rt_store_add_late(s, &late), RT_STORE_E_NOTFOUND);
	ck_assert_int_eq(rt_store_commit(s), 0);

	/* Selection keeps 7/100 and 0/200, drops 5/300; put_trace clears it again. */
	t = make_trace(7, 100, 0, 0, 0);
	t.has_selection = 1;
	t.score = 0.8125;
	t.pattern = 1ull << 63;
	t.group_key = 42;
	snprintf(t.group, sizeof t.group, "frontend GET /checkout \"q\"\t");
	t.weight = 3.5;
	ck_assert_int_eq(rt_store_set_selection(s, &t), 0);
	t.trace_hi = 0, t.trace_lo = 200, t.score = 0.25, t.weight = 1;
	ck_assert_int_eq(rt_store_set_selection(s, &t), 0);
	t.trace_hi = 0, t.trace_lo = 555;
	ck_assert_int_eq(rt_store_set_selection(s, &t), RT_STORE_E_NOTFOUND);
	ck_assert_int_eq(rt_store_delete_trace(s, 5, 300), 0);
	ck_assert_int_eq(rt_store_delete_trace(s, 5, 300), RT_STORE_E_NOTFOUND);
	t = make_trace(0, 200, 1600 * SEC, 1, 4);
	t.bytes = 4242;
	ck_assert_int_eq(rt_store_put_trace(s, &t), 0);

	/* A rolled back transaction leaves nothing. */
	ck_assert_int_eq(rt_store_begin(s), 0);
	put(s, 8, 400, 1, 1, 2000 * SEC, 50, 0);
	t = make_trace(8, 400, 2000 * SEC, 1, 3);
	ck_assert_int_eq(rt_store_put_trace(s, &t), 0);
	rt_store_rollback(s);
}

START_TEST(same_state_as_sqlite)
{
	struct rt_store *sq = open_store(sqlite_locator("same"), 0, 0, 0);
	struct rt_store *ch = open_store(ch_locator("same"), 0, 0, 0);
	struct rt_store *ro;
	char *a, *b, *c;
	ck_assert_str_eq(rt_store_backend_name(sq), "sqlite");
	ck_assert_int_eq(rt_store_wants_spans(sq), 0);
	ck_assert_int_eq(rt_store_put_spans(sq, NULL, 0), 0);
	ck_assert_str_eq(rt_store_backend_name(ch), "clickhouse");
	scenario(sq);
	scenario(ch);
	a = dump(sq);
	b = dump(ch);
	ck_assert_msg(strstr(a, "sel=1 score=0.8125") && strstr(a, "late=1") &&
		      strstr(a, "pending 1/10") && !strstr(a, "pending 1/11") &&
		      strstr(a, "trigger name 7 'payment-error-v2'\ntrigger name 9 'percentile-p99.9'\n#") &&
		      !strstr(a, "0000000000000005000000000000012c") && !strstr(a, "agent 2 "),
		      "the SQLite dump misses what the scenario wrote:\n%s", a);
	ck_assert_msg(strcmp(a, b) == 0, "dumps differ\n--- sqlite\n%s\n--- clickhouse\n%s", a, b);
	/* A reader (another handle, read-only) sees the same. */
	ro = open_store(ch_locator("same"), 1, 0, 0);
	c = dump(ro);
	ck_assert_str_eq(a, c);
	rt_store_close(ro);
	rt_store_close(sq);
	rt_store_close(ch);
	free(a);
	free(b);
	free(c);
}
END_TEST

/* Retention by age and by size on both backends: the same traces go. */
static void retention(const char *loc, uint64_t now, char **out, uint64_t *age_n,
		      uint64_t *size_n)
{
	struct rt_store *s = open_store(loc, 0, 5 * DAY, 0), *s2;
	struct rt_store_trace t;
	for (int i = 0; i < 6; i++) {
		uint64_t closed = now - (uint64_t)(11 - i) * DAY; /* 11 .. 6 days old */
		ck_assert_int_eq(rt_store_begin(s), 0);
		put(s, 1, 500 + (uint64_t)i, 1, 1, closed - SEC, 200, 0);
		t = make_trace(1, 500 + (uint64_t)i, closed, 1, 3);
		ck_assert_int_eq(rt_store_put_trace(s, &t), 0);
		ck_assert_int_eq(rt_store_commit(s), 0);
	}
	for (int i = 0; i < 4; i++) {
		uint64_t closed = now - (uint64_t)(4 - i) * 3600 * SEC; /* recent */
		ck_assert_int_eq(rt_store_begin(s), 0);
		put(s, 2, 600 + (uint64_t)i, 1, 1, closed - SEC, 300, 0);
		t = make_trace(2, 600 + (uint64_t)i, closed, 1, 3);
		ck_assert_int_eq(rt_store_put_trace(s, &t), 0);
		ck_assert_int_eq(rt_store_commit(s), 0);
	}
	ck_assert_int_eq(rt_store_begin(s), 0);
	put(s, 3, 999, 1, 1, now - 9 * DAY, 20, 0); /* an old orphan slice */
	ck_assert_int_eq(rt_store_commit(s), 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 1, 1, now - 9 * DAY, "old", 3), 0);
	ck_assert_int_eq(rt_store_done_trigger(s, 1, 1), 0);
	ck_assert_int_eq(rt_store_retain(s, now, age_n), 0);
	rt_store_close(s);
	/* Then by size: under 700 bytes of slices keeps the two newest. */
	s2 = open_store(loc, 0, 0, 700);
	ck_assert_int_eq(rt_store_retain(s2, now, size_n), 0);
	*out = dump(s2);
	rt_store_close(s2);
}

START_TEST(retention_same_as_sqlite)
{
	uint64_t now = (uint64_t)time(NULL) * SEC, an, sn, an2, sn2;
	char *a, *b, *parts = NULL, sql[512];
	retention(sqlite_locator("ret"), now, &a, &an, &sn);
	retention(ch_locator("ret"), now, &b, &an2, &sn2);
	ck_assert_uint_eq(an, 6);
	ck_assert_uint_eq(sn, 2);
	ck_assert_uint_eq(an2, an);
	ck_assert_uint_eq(sn2, sn);
	ck_assert_msg(strcmp(a, b) == 0, "dumps differ\n--- sqlite\n%s\n--- clickhouse\n%s", a, b);
	/* The old days' partitions are gone from the disk, not only hidden. */
	snprintf(sql, sizeof sql,
		 "SELECT count() FROM system.parts WHERE database = 'ret_%d' AND active AND "
		 "table IN ('traces', 'slices') AND "
		 "max_date < toDate(toDateTime(%llu))", (int)getpid(),
		 (unsigned long long)((now - 5 * DAY) / SEC));
	ck_assert_int_eq(chs_sql(&g_ch, sql, &parts), 0);
	if (atoi(parts) != 0) {
		char *all = NULL;
		snprintf(sql, sizeof sql,
			 "SELECT table, partition, min_date, max_date, rows FROM system.parts "
			 "WHERE database = 'ret_%d' AND active", (int)getpid());
		chs_sql(&g_ch, sql, &all);
		ck_abort_msg("%d old parts still active:\n%s", atoi(parts), all);
	}
	free(parts);
	free(a);
	free(b);
}
END_TEST

/* A slice re-sent to a new handle (a restarted coordinator) is not known to be
 * a duplicate, but every reader still sees it once. */
START_TEST(resent_slice_new_handle_read_once)
{
	const char *loc = ch_locator("resent");
	struct rt_store *s = open_store(loc, 0, 0, 0);
	struct rt_store_stats st;
	struct text d = { 0 };
	ck_assert_int_eq(rt_store_begin(s), 0);
	put(s, 1, 77, 1, 1, 1000 * SEC, 100, 0);
	ck_assert_int_eq(rt_store_commit(s), 0);
	rt_store_close(s);
	s = open_store(loc, 0, 0, 0);
	ck_assert_int_eq(rt_store_begin(s), 0);
	put(s, 1, 77, 1, 1, 1000 * SEC, 100, 0);
	ck_assert_int_eq(rt_store_commit(s), 0);
	ck_assert_int_eq(rt_store_slices(s, 1, 77, dump_slice_cb, &d), 0);
	ck_assert_ptr_nonnull(d.p);
	ck_assert_ptr_null(strstr(strstr(d.p, "slice") + 1, "slice"));
	ck_assert_int_eq(rt_store_stats(s, &st), 0);
	ck_assert_uint_eq(st.slices, 1);
	ck_assert_uint_eq(st.slice_bytes, 100);
	rt_store_close(s);
	free(d.p);
}
END_TEST

/* A writer that restarts (a new handle) and adds to a trace an earlier handle
 * wrote must read back both parts: its memory of its own writes is not the
 * whole trace. Its trigger keys are known too. */
START_TEST(new_handle_reads_what_an_earlier_one_wrote)
{
	const char *loc = ch_locator("restart");
	struct rt_store *s = open_store(loc, 0, 0, 0);
	struct rt_store_trace t;
	struct text d = { 0 };
	int n = 0;
	ck_assert_int_eq(rt_store_put_trigger(s, 4, 44, 1000 * SEC, "t", 1), 0);
	ck_assert_int_eq(rt_store_begin(s), 0);
	put(s, 1, 88, 1, 1, 1000 * SEC, 100, 0);
	t = make_trace(1, 88, 1100 * SEC, 1, 3);
	ck_assert_int_eq(rt_store_put_trace(s, &t), 0);
	ck_assert_int_eq(rt_store_commit(s), 0);
	rt_store_close(s);

	s = open_store(loc, 0, 0, 0);
	ck_assert_int_eq(rt_store_put_trigger(s, 4, 44, 1000 * SEC, "t", 1), RT_STORE_DUPLICATE);
	ck_assert_int_eq(rt_store_begin(s), 0);
	put(s, 1, 88, 2, 1, 1000 * SEC, 50, 0);
	ck_assert_int_eq(rt_store_slices(s, 1, 88, dump_slice_cb, &d), 0);
	for (const char *p = d.p; p && (p = strstr(p, "slice ")); p++)
		n++;
	ck_assert_msg(n == 2, "%d slices read back, want 2:\n%s", n, d.p ? d.p : "");
	t.score = 0.5, t.has_selection = 1;
	ck_assert_int_eq(rt_store_set_selection(s, &t), 0); /* the row from the server */
	ck_assert_int_eq(rt_store_done_trigger(s, 4, 44), 0);
	ck_assert_int_eq(rt_store_commit(s), 0);
	ck_assert_int_eq(rt_store_get_trace(s, 1, 88, &t), 0);
	ck_assert_int_eq(t.has_selection, 1);
	{ /* its spans as rows, gone with it */
		struct rt_store_kv kv[1] = { { "k", "v" } };
		uint64_t ev_ns[1] = { 5 };
		const char *ev_body[1] = { "hello" };
		struct rt_store_span sp[2] = {
			{ .trace_hi = 1, .trace_lo = 88, .span_id = 1, .start_ns = 1000 * SEC,
			  .end_ns = 1001 * SEC, .name = "a", .service = "svc", .attrs = kv,
			  .n_attrs = 1, .event_ns = ev_ns, .event_body = ev_body, .n_events = 1 },
			{ .trace_hi = 1, .trace_lo = 88, .span_id = 2, .parent_id = 1,
			  .start_ns = 1000 * SEC, .end_ns = 1000 * SEC, .name = "b", .kind = 3,
			  .status = 2, .status_message = "x" },
		};
		char sql[256], *got = NULL;
		ck_assert_int_eq(rt_store_wants_spans(s), 1);
		ck_assert_int_eq(rt_store_put_spans(s, sp, 2), 0);
		snprintf(sql, sizeof sql,
			 "SELECT count(), sum(Duration) FROM (SELECT * FROM restart_%d.otel_traces "
			 "FINAL) WHERE deleted = 0 AND trace_lo = 88", (int)getpid());
		ck_assert_int_eq(chs_sql(&g_ch, sql, &got), 0);
		ck_assert_str_eq(got, "2\t1000000000\n");
		free(got);
		ck_assert_int_eq(rt_store_delete_trace(s, 1, 88), 0);
		ck_assert_int_eq(chs_sql(&g_ch, sql, &got), 0);
		ck_assert_str_eq(got, "0\t0\n");
		free(got);
	}
	free(d.p);
	d = (struct text){ 0 };
	ck_assert_int_eq(rt_store_slices(s, 0, 88, dump_slice_cb, &d), 0);
	ck_assert_msg(d.p == NULL, "slices left after delete_trace:\n%s", d.p);
	rt_store_close(s);
}
END_TEST

START_TEST(readonly_refuses_writes_and_missing_db)
{
	const char *loc = ch_locator("ro");
	struct rt_store_options o = { .path = loc, .readonly = 1 };
	struct rt_store *s = NULL, *w;
	struct rt_store_agent a = { .agent_id = 1 };
	int rc = rt_store_open(&s, &o);
	ck_assert_int_eq(rc, RT_STORE_E_OPEN);
	ck_assert_ptr_null(s);
	ck_assert_msg(strstr(rt_store_errmsg(NULL), "not a retrace store"), "%s",
		      rt_store_errmsg(NULL));
	w = open_store(loc, 0, 0, 0);
	s = open_store(loc, 1, 0, 0);
	ck_assert_int_eq(rt_store_put_agent(s, &a), RT_STORE_E_READONLY);
	ck_assert_int_eq(rt_store_begin(s), RT_STORE_E_READONLY);
	ck_assert_int_eq(rt_store_put_trigger(s, 1, 1, 1, "x", 1), RT_STORE_E_READONLY);
	ck_assert_int_eq(rt_store_retain(s, 1, NULL), RT_STORE_E_READONLY);
	ck_assert_int_eq(rt_store_put_agent(w, &a), 0);
	ck_assert_int_eq(rt_store_delete_agent(w, 1), 0);
	ck_assert_int_eq(rt_store_begin(w), 0);
	ck_assert_int_eq(rt_store_begin(w), RT_STORE_E_INVAL);
	rt_store_rollback(w);
	ck_assert_int_eq(rt_store_commit(w), RT_STORE_E_INVAL);
	rt_store_close(s);
	rt_store_close(w);
}
END_TEST

static void open_fails(const char *loc, int want, const char *text)
{
	struct rt_store_options o = { .path = loc };
	struct rt_store *s = (struct rt_store *)1;
	int rc = rt_store_open(&s, &o);
	ck_assert_msg(rc == want, "%s: %d, want %d (%s)", loc, rc, want, rt_store_errmsg(NULL));
	ck_assert_ptr_null(s);
	ck_assert_msg(strstr(rt_store_errmsg(NULL), text), "%s: '%s' lacks '%s'", loc,
		      rt_store_errmsg(NULL), text);
}

/* A port nobody listens on: bind one, then close it. */
static int dead_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* A server that answers every request with 200 and `body`, `n` times. */
static pid_t fake_server(int *port, const char *body, int n)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	pid_t pid;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(listen(fd, 8), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		for (int i = 0; i < n; i++) {
			char req[8192], head[256];
			int c = accept(fd, NULL, NULL);
			if (c < 0)
				_exit(1);
			size_t got = 0, want = 0;
			char *end = NULL;
			/* One request per connection, read whole (headers, then the body its
			 * Content-Length names): closing with unread bytes would send a reset
			 * that can overtake our answer (seen as "Connection reset by peer"). */
			for (;;) {
				ssize_t r = recv(c, req + got, sizeof req - 1 - got, 0);
				if (r <= 0)
					break;
				got += (size_t)r;
				req[got] = 0;
				if (!end && (end = memmem(req, got, "\r\n\r\n", 4))) {
					const char *cl = strcasestr(req, "Content-Length:");
					want = (size_t)(end - req) + 4 +
					       (cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0);
				}
				if (end && (got >= want || got == sizeof req - 1))
					break;
			}
			snprintf(head, sizeof head,
				 "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
				 strlen(body));
			if (send(c, head, strlen(head), MSG_NOSIGNAL) < 0 ||
			    send(c, body, strlen(body), MSG_NOSIGNAL) < 0)
				_exit(1);
			shutdown(c, SHUT_WR); /* then wait for the client's close: no reset */
			while (recv(c, req, sizeof req, 0) > 0)
				;
			close(c);
		}
		_exit(0);
	}
	close(fd);
	return pid;
}

START_TEST(bad_locators_and_servers)
{
	char loc[128];
	int port, st;
	pid_t pid;
	open_fails("clickhouse://", RT_STORE_E_INVAL, "no host");
	open_fails("clickhouse://127.0.0.1:99999/x", RT_STORE_E_INVAL, "bad port");
	open_fails("clickhouse://127.0.0.1:8123/a;DROP", RT_STORE_E_INVAL, "letters, digits");
	snprintf(loc, sizeof loc, "clickhouse://127.0.0.1:%d/x", dead_port());
	open_fails(loc, RT_STORE_E_OPEN, "cannot connect");
	/* Answers SELECT 1, then a schema version that is 3 bytes long. */
	pid = fake_server(&port, "abc", 20);
	snprintf(loc, sizeof loc, "clickhouse://127.0.0.1:%d/x", port);
	open_fails(loc, RT_STORE_E_OPEN, "malformed reply");
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}
END_TEST

/* --------------------------------------------------------------- main -- */

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static Suite *backends_suite(void)
{
	Suite *s = suite_create("store_backends");
	const struct {
		const char *name;
		const TTest *fn;
	} cases[] = {
		{ "same_state_as_sqlite", same_state_as_sqlite },
		{ "retention_same_as_sqlite", retention_same_as_sqlite },
		{ "resent_slice_new_handle_read_once", resent_slice_new_handle_read_once },
		{ "new_handle_reads_what_an_earlier_one_wrote",
		  new_handle_reads_what_an_earlier_one_wrote },
		{ "readonly_refuses_writes_and_missing_db", readonly_refuses_writes_and_missing_db },
		{ "bad_locators_and_servers", bad_locators_and_servers },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_set_timeout(tc, 120);
		tcase_add_test(tc, cases[i].fn);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	char why[4096];
	int rc;
	if (!chs_binary()) {
		printf("SKIP: clickhouse-server is not installed (bash scripts/deps.sh installs it)\n");
		return 77;
	}
	snprintf(g_root, sizeof g_root, "%s/rt-test-backends-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(g_root)) {
		perror("mkdtemp");
		return 1;
	}
	if (chs_start(&g_ch, NULL, why, sizeof why) != 0) {
		fprintf(stderr, "FAIL: cannot start clickhouse-server: %s\n", why);
		nftw(g_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
		return 1;
	}
	rc = test_run_suite(backends_suite());
	chs_stop(&g_ch);
	nftw(g_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	return rc;
}
