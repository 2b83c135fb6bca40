/*
 * Shared memory a client can write is untrusted (issue 18 item 3): the agent
 * reads the pool's geometry once, keeps its own copy, takes no bound from the
 * shared header or from a ring's own mask again, puts the header back when a
 * client overwrites it, and repairs rings. Every case ends with the agent still
 * serving clients: a live client's next trace, and a newly attached client's,
 * are indexed whole. The "client" that overwrites shared memory is this test
 * process, through its own mapping (any client could do the same).
 *
 *   hostile_header: buffer_count (0x7fffffff), buffer_size, buffers_offset,
 *     registry_slots, every ring descriptor and every ring's own size and mask
 *     are overwritten after clients attached; then a client holding buffers is
 *     killed, so the reap path runs over the buffers. The agent must not crash,
 *     counts the restored fields, salvages the dead client's data, and the
 *     header says the truth again.
 *   dead_producer: a producer dies between claiming two complete-queue slots
 *     and publishing them; a live client's entries queue up behind the claim.
 *     The agent publishes the stalled claim after its grace second, counts it,
 *     refuses the junk in it (counted as malformed), and the client goes on. The
 *     same on the available queue, whose stale ids must never reach a client.
 *   ring_counters: the complete and available queues' counters are set to
 *     nonsense; the agent resets both, counts it, and gets every buffer back.
 *
 * Figures new to this change are read from `retrace status --json` by name.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agtest.h"
#include "shm/drain.h"

#define H_BUFFERS 64u
#define H_RECORDS 50u /* two buffers */
#define H_HI 0x40571eull

struct hreport {
	uint64_t lo;
	uint32_t nbuf, discards;
};

/* Poll the agent until cond holds or secs pass. */
#define H_UNTIL(ok, agent, secs, cond)                                         \
	do {                                                                   \
		uint64_t end_ = ag_deadline(secs);                             \
		for (;;) {                                                     \
			unsigned n_ = rt_agent_poll(agent);                    \
			if (((ok) = (cond)))                                   \
				break;                                         \
			if (ag_now_ns() > end_)                                \
				break;                                         \
			if (!n_)                                               \
				ag_nap_us(200);                                \
		}                                                              \
	} while (0)

static uint64_t h_figure(const struct rt_agent *a, const char *name)
{
	static char st[1 << 16];
	char key[96];
	const char *p;
	rt_agent_status(a, 1, st, sizeof st);
	snprintf(key, sizeof key, "\"%s\":", name);
	p = strstr(st, key);
	ck_assert_msg(p != NULL, "retrace status shows no %s", name);
	p += strlen(key);
	while (*p == ' ')
		p++;
	return strtoull(p, NULL, 10);
}

/*
 * A client child driven by single bytes: 't' writes one whole trace and reports
 * it, 'o' begins a trace and leaves a buffer open (reported, lo only), 'q'
 * leaves. It never touches the pool between commands.
 */
struct hkid {
	pid_t pid;
	int cmd, rep;
	uint32_t tag;
};

static void h_child(const char *pool, uint32_t tag, int in, int out)
{
	uint32_t n = 0, k;
	uint8_t rec[AG_RECLEN];
	char ch;
	ag_child_client(pool, 8, RETRACE_OK);
	while (ag_read_exact(in, &ch, 1, 60000) == 0 && ch != 'q') {
		struct retrace_thread_stats s0, s1;
		struct hreport r;
		retrace_trace_id id = { H_HI, ((uint64_t)tag << 32) | ++n };
		uint32_t records = ch == 'o' ? 10 : H_RECORDS;
		retrace_thread_stats(&s0);
		if (retrace_begin(id) != 1)
			CHILD_FAIL(41, "trace %llx not recorded", (unsigned long long)id.lo);
		for (k = 0; k < records; k++) {
			ag_record(rec, id.lo, k);
			retrace_tracepoint(rec, AG_RECLEN);
		}
		if (ch == 't') {
			retrace_end();
			retrace_flush();
		}
		retrace_thread_stats(&s1);
		memset(&r, 0, sizeof r);
		r.lo = id.lo;
		r.discards = (uint32_t)(s1.discard_buffers - s0.discard_buffers);
		r.nbuf = (uint32_t)(s1.buffers_used - s0.buffers_used) + r.discards;
		if (ag_write_all(out, &r, sizeof r) != 0)
			CHILD_FAIL(44, "report pipe");
	}
	retrace_shutdown();
	_exit(0);
}

static void h_start(struct hkid *k, const char *pool, uint32_t tag)
{
	int c[2], r[2];
	ck_assert_int_eq(pipe(c), 0);
	ck_assert_int_eq(pipe(r), 0);
	k->tag = tag;
	k->pid = ag_fork();
	if (k->pid == 0) {
		close(c[1]);
		close(r[0]);
		h_child(pool, tag, c[0], r[1]);
	}
	close(c[0]);
	close(r[1]);
	k->cmd = c[1];
	k->rep = r[0];
}

/* Send a command; poll the agent until the child reports. */
static struct hreport h_step(struct hkid *k, struct rt_agent *a, char cmd)
{
	struct ag_reader rd;
	struct hreport r;
	uint64_t end = ag_deadline(20);
	ck_assert_int_eq(write(k->cmd, &cmd, 1), 1);
	ag_reader_init(&rd, k->rep, sizeof r);
	while (!ag_reader_next(&rd, &r)) {
		ck_assert_msg(!rd.eof, "client %u died", k->tag);
		ck_assert_msg(ag_now_ns() < end, "client %u stuck on '%c' (waiting on a ring?)", k->tag,
			      cmd);
		if (rt_agent_poll(a) == 0)
			ag_nap_us(200);
	}
	return r;
}

/* A whole trace from client k, indexed whole. */
static void h_trace_indexed(struct hkid *k, struct rt_agent *a)
{
	struct hreport r = h_step(k, a, 't');
	uint32_t t = RT_INDEX_NONE;
	int ok;
	ck_assert_msg(r.discards == 0, "client %u: %u of %u buffers went to the discard buffer",
		      k->tag, r.discards, r.nbuf);
	ck_assert_uint_ge(r.nbuf, 2); /* 2 buffers of records; a kept buffer may add a segment */
	H_UNTIL(ok, a, 20, (t = rt_index_find(&a->ix, r.lo)) != RT_INDEX_NONE &&
				   a->ix.traces[t].nbuffers == r.nbuf);
	ck_assert_msg(ok, "trace %llx of client %u: %u of %u buffers indexed",
		      (unsigned long long)r.lo, k->tag,
		      t == RT_INDEX_NONE ? 0 : a->ix.traces[t].nbuffers, r.nbuf);
}

static void h_quit(struct hkid *k)
{
	char q = 'q';
	ck_assert_int_eq(write(k->cmd, &q, 1), 1);
	ag_assert_exited_ok(k->pid, 20, "client");
	close(k->cmd);
	close(k->rep);
}

START_TEST(test_hostile_header)
{
	static struct rt_agent a;
	struct rt_agent_config cfg;
	struct hkid good, victim, late;
	struct rt_pool_header *h;
	struct hreport open;
	char name[64];
	uint32_t t, q;
	int ok;

	ag_pool_name(name, sizeof name, "hdr");
	ag_config(&cfg, name, H_BUFFERS, 4096, 1.0);
	ag_open(&a, &cfg);
	h_start(&good, name, 1);
	h_start(&victim, name, 2);
	h_trace_indexed(&good, &a);
	h_trace_indexed(&victim, &a);
	open = h_step(&victim, &a, 'o'); /* holds an open buffer and a stash */

	h = a.pool.hdr;
	h->buffer_count = 0x7fffffff;
	h->buffer_size = 0x40000000;
	h->buffers_offset += 4096ull * 1000;
	h->registry_slots = 0xffffffff;
	for (q = 0; q < RT_Q_COUNT; q++) {
		h->rings[q].capacity = 1u << 30;
		h->rings[q].slots_offset = 1ull << 40;
		a.pool.ring[q]->size = 0;
		a.pool.ring[q]->mask = 0xffffffff;
	}
	ag_kill9(victim.pid);
	H_UNTIL(ok, &a, 20, a.st.clients_died == 1);
	ck_assert_msg(ok, "the dead client was never reaped");
	ag_drain(&a);

	ck_assert_msg(h_figure(&a, "header_fields_restored") >= 5,
		      "the agent did not count the overwritten header fields");
	ck_assert_uint_eq(h->buffer_count, H_BUFFERS);
	ck_assert_uint_eq(h->buffer_size, 4096);
	ck_assert_uint_eq(h->registry_slots, cfg.client_slots);
	ck_assert_int_eq(rt_pool_validate(h, a.pool.size, NULL, 0), RETRACE_OK);
	for (q = 0; q < RT_Q_COUNT; q++) {
		ck_assert_uint_eq(a.pool.ring[q]->size, h->rings[q].capacity);
		ck_assert_uint_eq(a.pool.ring[q]->mask, h->rings[q].capacity - 1);
	}
	/* The dead client's open buffer was salvaged. */
	t = rt_index_find(&a.ix, open.lo);
	ck_assert_msg(t != RT_INDEX_NONE, "the dead client's open trace was not salvaged");
	ck_assert_uint_ge(a.st.dead_buffers_indexed, 1);

	/* Still serving: the live client, and one that attaches now. */
	h_trace_indexed(&good, &a);
	h_start(&late, name, 3);
	h_trace_indexed(&late, &a);
	h_quit(&good);
	h_quit(&late);
	ag_drain(&a);
	ck_assert_int_eq(ag_unaccounted(&a), 0);
	rt_agent_close(&a);
}
END_TEST

/* Claim n slots of ring q as a producer would, write junk, never publish. */
static unsigned h_dead_claim(struct rt_pool *p, int q, const void *junk, unsigned n)
{
	struct ck_ring *r = p->ring[q];
	unsigned mask = p->hdr->rings[q].capacity - 1, ts = p->hdr->rings[q].entry_size, ph, i;
	for (;;) {
		ph = ck_pr_load_uint(&r->p_head);
		if (ck_pr_cas_uint(&r->p_head, ph, ph + n))
			break;
	}
	for (i = 0; i < n; i++)
		memcpy((char *)p->slots[q] + (size_t)ts * ((ph + i) & mask), (const char *)junk + ts * i,
		       ts);
	return ph;
}

START_TEST(test_dead_producer)
{
	static struct rt_agent a;
	struct rt_agent_config cfg;
	struct hkid kid;
	struct rt_complete_entry junk[2];
	struct rt_available_entry stale[2], got[H_BUFFERS + 8];
	uint8_t seen[H_BUFFERS] = { 0 };
	uint64_t bad0, repaired0;
	uint32_t n, i, voided = 0, indexed_id = UINT32_MAX, id;
	char name[64];
	int ok;

	ag_pool_name(name, sizeof name, "prod");
	ag_config(&cfg, name, H_BUFFERS, 4096, 1.0);
	ag_open(&a, &cfg);
	h_start(&kid, name, 1);
	h_trace_indexed(&kid, &a);

	/* 1. The complete queue: junk in a claim nobody publishes. */
	junk[0] = (struct rt_complete_entry){ .trace_lo = 0xdead, .buffer_id = 5, .bytes = 7 };
	junk[1] = (struct rt_complete_entry){ .trace_lo = 0xbeef, .buffer_id = 9999, .bytes = 0 };
	bad0 = a.st.bad_range + a.st.bad_header + a.st.bad_bytes;
	h_dead_claim(&a.pool, RT_Q_COMPLETE, junk, 2);
	/* The client's next trace queues behind the dead claim: it goes through
	 * only once the agent publishes the claim. */
	h_trace_indexed(&kid, &a);
	ck_assert_msg(h_figure(&a, "ring_stalls_repaired") >= 1, "the repair was not counted");
	ck_assert_uint_eq(a.st.bad_range + a.st.bad_header + a.st.bad_bytes - bad0, 2);
	h_trace_indexed(&kid, &a);

	/* 2. The available queue: a dead producer's claim holding stale ids (a
	 * buffer the index owns, and one out of range) must never hand them out. */
	for (id = 0; id < H_BUFFERS && indexed_id == UINT32_MAX; id++)
		if (a.ix.buf_trace[id] != RT_INDEX_NONE)
			indexed_id = id;
	ck_assert_uint_ne(indexed_id, UINT32_MAX);
	stale[0].buffer_id = indexed_id;
	stale[1].buffer_id = H_BUFFERS + 3;
	repaired0 = h_figure(&a, "ring_stalls_repaired");
	h_dead_claim(&a.pool, RT_Q_AVAILABLE, stale, 2);
	H_UNTIL(ok, &a, 20, h_figure(&a, "ring_stalls_repaired") > repaired0);
	ck_assert_msg(ok, "a stalled available queue was never repaired");
	ag_drain(&a);
	/* Take every free id as clients would: none is indexed, none twice. */
	n = rt_available_pop_batch(a.pool.ring[RT_Q_AVAILABLE],
				   RT_POOL_SLOTS(&a.pool, RT_Q_AVAILABLE, rt_available_entry), got,
				   H_BUFFERS + 8);
	for (i = 0; i < n; i++) {
		id = got[i].buffer_id;
		if (id >= H_BUFFERS) {
			voided++;
			continue;
		}
		ck_assert_msg(a.ix.buf_trace[id] == RT_INDEX_NONE, "a client would get buffer %u, "
			      "which the index owns", id);
		ck_assert_msg(!seen[id], "buffer %u is free twice", id);
		seen[id] = 1;
	}
	ck_assert_uint_eq(voided, 2);
	ck_assert_uint_eq(h_figure(&a, "ring_slots_voided"), 2);
	for (i = 0, n = 0; i < H_BUFFERS; i++)
		if (seen[i])
			got[n++].buffer_id = i;
	ck_assert(rt_available_push_batch(a.pool.ring[RT_Q_AVAILABLE],
					  RT_POOL_SLOTS(&a.pool, RT_Q_AVAILABLE, rt_available_entry),
					  got, n));
	h_trace_indexed(&kid, &a);
	h_quit(&kid);
	ag_drain(&a);
	ck_assert_int_eq(ag_unaccounted(&a), 0);
	rt_agent_close(&a);
}
END_TEST

START_TEST(test_ring_counters)
{
	static struct rt_agent a;
	struct rt_agent_config cfg;
	struct hkid kid;
	struct ck_ring *rc, *ra;
	char name[64];
	int ok;

	ag_pool_name(name, sizeof name, "ctr");
	ag_config(&cfg, name, H_BUFFERS, 4096, 1.0);
	ag_open(&a, &cfg);
	h_start(&kid, name, 1);
	h_trace_indexed(&kid, &a);
	ag_drain(&a);

	rc = a.pool.ring[RT_Q_COMPLETE];
	ra = a.pool.ring[RT_Q_AVAILABLE];
	/* Consumers ahead of producers by far: nothing a ring could hold. */
	ck_pr_store_uint(&rc->c_head, ck_pr_load_uint(&rc->p_head) + 100000);
	ck_pr_store_uint(&ra->c_head, ck_pr_load_uint(&ra->c_head) + 0x40000000u);
	H_UNTIL(ok, &a, 20, h_figure(&a, "ring_resets") >= 2 && a.nlost == 0 &&
				    ag_unaccounted(&a) <= 8 /* the client's stash */);
	ck_assert_msg(ok, "rings not reset or buffers not recovered: resets %llu, %u buffers "
		      "waiting to be reclaimed, %lld unaccounted",
		      (unsigned long long)h_figure(&a, "ring_resets"), a.nlost,
		      (long long)ag_unaccounted(&a));
	ck_assert_uint_eq(rt_agent_queue_depth(&a, RT_Q_COMPLETE), 0);
	h_trace_indexed(&kid, &a);
	h_trace_indexed(&kid, &a);
	h_quit(&kid);
	ag_drain(&a);
	ck_assert_int_eq(ag_unaccounted(&a), 0);
	ag_check_available(&a);
	rt_agent_close(&a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_hostile");
	TCase *tc = tcase_create("hostile");
	tcase_set_timeout(tc, 80);
	tcase_add_test(tc, test_hostile_header);
	tcase_add_test(tc, test_dead_producer);
	tcase_add_test(tc, test_ring_counters);
	suite_add_tcase(s, tc);
	return ag_run_suite(s);
}
