/*
 * Traces sharing a writer's buffer (ABI 5 segments), in-process agent and a
 * hand-made writer that lays segments out exactly as the client does: several
 * traces in one buffer, a trace evicted while its buffer's neighbour is pinned,
 * a buffer freed only once its writer left it and nothing of it is held,
 * takeover finding sealed segments by walking each chain (a live writer's open
 * segment left alone, a dead one's salvaged), and malformed chains and
 * entries counted and skipped with every other trace intact.
 */
#include "agtest.h"
#include "agent_internal.h"
#include "shm/drain.h"

#define S_SIZE 4096u
#define S_RECS 12u /* 12 x 100 B: three such segments (with headers) fill 3792 of 4096 */

/* Write a segment of trace lo at (id, off): nrec records numbered from first_rec. */
static uint32_t seg_write(struct rt_pool *p, uint32_t id, uint32_t off, uint64_t lo,
			  uint32_t tid, uint32_t seq, uint32_t first_rec, uint32_t nrec,
			  uint32_t flags)
{
	struct rt_buffer_header *h = rt_pool_segment(p, id, off);
	uint8_t *d = (uint8_t *)h + RT_BUF_HEADER_SIZE;
	uint32_t pos = 0, k;
	ck_pr_store_32(&h->flags, 0);
	for (k = 0; k < nrec; k++) {
		uint32_t word = (AG_RECLEN << 4) | RETRACE_FRAME_VALID;
		memcpy(d + pos, &word, 4);
		ag_record(d + pos + 4, lo, first_rec + k);
		pos += AG_FRAME;
	}
	memset(d + pos, 0, RETRACE_FRAME_TERM);
	h->trace_hi = 0x5E6;
	h->trace_lo = lo;
	h->pid = (uint32_t)getpid();
	h->tid = tid;
	h->seq = seq;
	h->bytes = pos;
	h->client_slot = UINT32_MAX;
	h->first_tick = retrace_ticks();
	h->pool_generation = p->hdr->generation;
	h->magic = RT_BUF_MAGIC;
	/* the client zeroes the next header's magic before it seals a kept segment */
	if ((flags & RT_BUF_KEPT) && rt_seg_next(off, pos) + RT_BUF_HEADER_SIZE <= p->geo.buffer_size)
		rt_pool_segment(p, id, rt_seg_next(off, pos))->magic = 0;
	ck_pr_fence_store();
	ck_pr_store_32(&h->flags, RT_BUF_INUSE | flags);
	return pos;
}

static void seg_push(struct rt_pool *p, uint64_t lo, uint32_t id, uint32_t off, uint32_t bytes,
		     uint32_t flags)
{
	struct rt_complete_entry e = { .trace_lo = lo, .buffer_id = id, .bytes = bytes,
				       .offset = off, .flags = flags };
	ck_assert(rt_complete_push_batch(p->ring[RT_Q_COMPLETE],
					 RT_POOL_SLOTS(p, RT_Q_COMPLETE, rt_complete_entry), &e, 1));
}

/* A close mark at off and its entry: the writer left its kept buffer. */
static void seg_close(struct rt_pool *p, uint32_t id, uint32_t off, int push)
{
	struct rt_buffer_header *h = rt_pool_segment(p, id, off);
	ck_pr_store_32(&h->flags, 0);
	h->trace_lo = h->trace_hi = 0;
	h->bytes = 0;
	h->magic = RT_BUF_MAGIC;
	ck_pr_fence_store();
	ck_pr_store_32(&h->flags, RT_BUF_CLOSED);
	if (push)
		seg_push(p, 0, id, off, 0, RT_ENTRY_CLOSE);
}

/*
 * Three traces in one buffer: kept, kept, left. Returns the three offsets.
 * Sealed with LAST, entries pushed unless `push` is 0.
 */
static void three_traces(struct rt_pool *p, uint32_t id, const uint64_t lo[3], uint32_t off[3],
			 int push)
{
	uint32_t k, o = 0;
	for (k = 0; k < 3; k++) {
		uint32_t keep = k < 2 ? RT_BUF_KEPT : 0, bytes;
		off[k] = o;
		bytes = seg_write(p, id, o, lo[k], 100 + k, 0, 0, S_RECS,
				  RT_BUF_SEALED | RT_BUF_LAST | keep);
		if (push)
			seg_push(p, lo[k], id, o, bytes, keep ? RT_ENTRY_KEPT : 0);
		o = rt_seg_next(o, bytes);
	}
}

/* Trace lo is indexed with one segment holding its S_RECS records intact. */
static void assert_whole(struct rt_agent *a, uint64_t lo)
{
	uint32_t t = rt_index_find(&a->ix, lo), slot, next = 0;
	const struct rt_buffer_header *h;
	char msg[256];
	int f;
	ck_assert_msg(t != RT_INDEX_NONE, "trace %llx not indexed", (unsigned long long)lo);
	ck_assert_uint_eq(a->ix.traces[t].nbuffers, 1);
	slot = a->ix.traces[t].first_buf;
	h = rt_agent_segment(a, slot);
	ck_assert_uint_eq(h->trace_lo, lo);
	f = ag_check_frames((const uint8_t *)h + RT_BUF_HEADER_SIZE, a->ix.buf_bytes[slot], lo,
			    &next, msg, sizeof msg);
	ck_assert_msg(f == (int)S_RECS, "%s", f < 0 ? msg : "wrong record count");
}

/* Is buffer id on the available queue? (Pops and pushes everything back.) */
static int is_available(struct rt_agent *a, uint32_t id)
{
	uint32_t n = a->pool.geo.buffer_count, got = 0, k, i;
	struct rt_available_entry batch[256], *all = malloc(n * sizeof *all);
	int found = 0;
	while ((k = rt_available_pop_batch(a->pool.ring[RT_Q_AVAILABLE],
					   RT_POOL_SLOTS(&a->pool, RT_Q_AVAILABLE, rt_available_entry),
					   batch, 256)) > 0)
		for (i = 0; i < k; i++) {
			found |= batch[i].buffer_id == id;
			all[got++] = batch[i];
		}
	for (i = 0; i < got; i += 256)
		ck_assert(rt_available_push_batch(a->pool.ring[RT_Q_AVAILABLE],
						  RT_POOL_SLOTS(&a->pool, RT_Q_AVAILABLE, rt_available_entry),
						  all + i, got - i < 256 ? got - i : 256));
	free(all);
	return found;
}

static void open_agent(struct rt_agent *a, struct rt_agent_config *cfg, const char *tag,
		       char *name, size_t n)
{
	ag_pool_name(name, n, tag);
	ag_config(cfg, name, 16, S_SIZE, 1.0);
	ag_open(a, cfg);
}

START_TEST(test_traces_share_a_buffer)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	char name[64];
	const uint64_t lo[3] = { 0x51, 0x52, 0x53 };
	uint32_t off[3], id, k;

	open_agent(&a, &cfg, "share", name, sizeof name);
	id = ag_take_buffer(&a.pool);
	three_traces(&a.pool, id, lo, off, 1);
	ag_drain(&a);
	for (k = 0; k < 3; k++)
		assert_whole(&a, lo[k]);
	ck_assert_uint_gt(off[1], 0);
	ck_assert_uint_gt(off[2], off[1]);
	ck_assert_uint_eq(a.seg.live[id], 3);
	ck_assert_uint_eq(a.seg.state[id], RT_SEGBUF_LEFT);
	ck_assert_uint_eq(rt_agent_buffers_held(&a), 1);
	ck_assert_uint_eq(a.st.bad_duplicate + a.st.bad_header + a.st.bad_bytes, 0);
	ck_assert(!is_available(&a, id));
	/* 3 x 1200 record bytes in one 4096-byte buffer */
	ck_assert_msg(rt_agent_utilisation(&a) > 0.8, "utilisation %.3f",
		      rt_agent_utilisation(&a));
	/* a repeated entry for the middle segment changes nothing */
	seg_push(&a.pool, lo[1], id, off[1], rt_pool_segment(&a.pool, id, off[1])->bytes,
		 RT_ENTRY_KEPT);
	ag_drain(&a);
	ck_assert_uint_eq(a.st.bad_duplicate, 1);
	ck_assert_uint_eq(a.seg.live[id], 3);
	/* all three go: the buffer is back */
	a.evict_limit = 0;
	ag_drain(&a);
	for (k = 0; k < 3; k++)
		ck_assert_uint_eq(rt_index_find(&a.ix, lo[k]), RT_INDEX_NONE);
	ck_assert(is_available(&a, id));
	ck_assert_int_eq(ag_unaccounted(&a), 0);
	rt_agent_close(&a);
}
END_TEST

START_TEST(test_evicted_beside_pinned_neighbour)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct rt_trigger_entry g;
	char name[64];
	const uint64_t lo[3] = { 0x61, 0x62, 0x63 };
	uint32_t off[3], id, t;

	open_agent(&a, &cfg, "pinned", name, sizeof name);
	id = ag_take_buffer(&a.pool);
	three_traces(&a.pool, id, lo, off, 1);
	g = ag_trig(lo[1], 9, 1, 0);
	ag_push_triggers(&a.pool, &g, 1);
	ag_drain(&a);
	t = rt_index_find(&a.ix, lo[1]);
	ck_assert_uint_ne(t, RT_INDEX_NONE);
	ck_assert_uint_ne(a.ix.traces[t].state, RT_TRACE_UNTRIGGERED);
	/* the pin reached the middle segment's own header, not its neighbours' */
	ck_assert(rt_pool_segment(&a.pool, id, off[1])->flags & RT_BUF_PINNED);
	ck_assert(!(rt_pool_segment(&a.pool, id, off[0])->flags & RT_BUF_PINNED));
	ck_assert(!(rt_pool_segment(&a.pool, id, off[2])->flags & RT_BUF_PINNED));
	/* no collector: nothing reports it away, it stays pinned */
	a.evict_limit = 0;
	rt_agent_poll(&a);
	ck_assert_uint_eq(rt_index_find(&a.ix, lo[0]), RT_INDEX_NONE);
	ck_assert_uint_eq(rt_index_find(&a.ix, lo[2]), RT_INDEX_NONE);
	ck_assert_uint_ge(a.ix.st.evicted_traces, 2);
	/* the pinned neighbour keeps the buffer, and its bytes are intact */
	ck_assert_uint_eq(a.seg.live[id], 1);
	ck_assert(!is_available(&a, id));
	assert_whole(&a, lo[1]);
	/* once it goes too, the buffer is free */
	rt_agent_remove_trace(&a, rt_index_find(&a.ix, lo[1]), 0);
	rt_agent_poll(&a);
	ck_assert_uint_eq(a.seg.live[id], 0);
	ck_assert(is_available(&a, id));
	ck_assert_int_eq(ag_unaccounted(&a), 0);
	rt_agent_close(&a);
}
END_TEST

START_TEST(test_freed_only_when_left_and_empty)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	char name[64];
	uint32_t kept, left, bx, bw, next;

	open_agent(&a, &cfg, "left", name, sizeof name);
	kept = ag_take_buffer(&a.pool);
	left = ag_take_buffer(&a.pool);
	/* X in a buffer its writer keeps; W in one its writer left */
	bx = seg_write(&a.pool, kept, 0, 0x71, 1, 0, 0, S_RECS, RT_BUF_SEALED | RT_BUF_LAST | RT_BUF_KEPT);
	seg_push(&a.pool, 0x71, kept, 0, bx, RT_ENTRY_KEPT);
	bw = seg_write(&a.pool, left, 0, 0x72, 2, 0, 0, S_RECS, RT_BUF_SEALED | RT_BUF_LAST);
	seg_push(&a.pool, 0x72, left, 0, bw, 0);
	ag_drain(&a);
	ck_assert_uint_eq(a.seg.state[kept], RT_SEGBUF_KEPT);
	ck_assert_uint_eq(a.seg.state[left], RT_SEGBUF_LEFT);
	a.evict_limit = 0;
	ag_drain(&a);
	/* both traces evicted (X first: least recently seen) */
	ck_assert_uint_eq(rt_index_find(&a.ix, 0x71), RT_INDEX_NONE);
	ck_assert_uint_eq(rt_index_find(&a.ix, 0x72), RT_INDEX_NONE);
	ck_assert(is_available(&a, left));
	/* empty, but its writer still has it: not handed to anyone else */
	ck_assert_uint_eq(a.seg.live[kept], 0);
	ck_assert(!is_available(&a, kept));
	/* nothing left to gain: eviction stops rather than emptying the index */
	bw = seg_write(&a.pool, kept, rt_seg_next(0, bx), 0x73, 1, 0, 0, S_RECS,
		       RT_BUF_SEALED | RT_BUF_LAST | RT_BUF_KEPT);
	seg_push(&a.pool, 0x73, kept, rt_seg_next(0, bx), bw, RT_ENTRY_KEPT);
	ag_drain(&a);
	next = rt_seg_next(rt_seg_next(0, bx), bw);
	ck_assert_uint_eq(a.seg.next_off[kept], next);
	/* the writer leaves it: a close mark and its entry */
	seg_close(&a.pool, kept, next, 1);
	ag_drain(&a);
	ck_assert_uint_eq(a.st.closes, 1);
	ck_assert(is_available(&a, kept));
	ck_assert_int_eq(ag_unaccounted(&a), 0);
	rt_agent_close(&a);
}
END_TEST

/* A child that exits at once: its pid names a dead writer. */
static uint32_t dead_pid(void)
{
	pid_t pid = ag_fork();
	if (pid == 0)
		_exit(0);
	ck_assert_int_eq(ag_wait_exit(pid, 10), 0);
	return (uint32_t)pid;
}

START_TEST(test_takeover_walks_chains)
{
	struct rt_agent a, b;
	struct rt_agent_config cfg;
	char name[64];
	const uint64_t lo[3] = { 0x81, 0x82, 0x83 };
	uint32_t live_buf, dead_buf, off1, bytes0, bytes1, t;
	struct rt_buffer_header *h;

	open_agent(&a, &cfg, "takeover", name, sizeof name);
	cfg.unlink_at_exit = 0;
	a.cfg.unlink_at_exit = 0;
	live_buf = ag_take_buffer(&a.pool);
	dead_buf = ag_take_buffer(&a.pool);
	/* a live writer: two sealed segments (entries still in its pending batch),
	 * the second pinned by the old agent, and its open third segment */
	bytes0 = seg_write(&a.pool, live_buf, 0, lo[0], 1, 0, 0, S_RECS,
			   RT_BUF_SEALED | RT_BUF_LAST | RT_BUF_KEPT);
	off1 = rt_seg_next(0, bytes0);
	bytes1 = seg_write(&a.pool, live_buf, off1, lo[1], 2, 0, 0, S_RECS,
			   RT_BUF_SEALED | RT_BUF_LAST | RT_BUF_KEPT | RT_BUF_PINNED);
	rt_pool_segment(&a.pool, live_buf, off1)->pin_trigger = 31;
	seg_write(&a.pool, live_buf, rt_seg_next(off1, bytes1), lo[2], 3, 0, 0, 3, 0);
	/* a dead writer's buffer: one open segment, its frames whole */
	seg_write(&a.pool, dead_buf, 0, 0x90, 4, 0, 0, 5, 0);
	h = rt_pool_buffer(&a.pool, dead_buf);
	h->pid = dead_pid();
	rt_agent_close(&a); /* the pool stays; its owner lock goes */

	ag_open(&b, &cfg);
	ck_assert(b.took_over);
	assert_whole(&b, lo[0]);
	assert_whole(&b, lo[1]);
	t = rt_index_find(&b.ix, lo[1]);
	ck_assert_uint_ne(b.ix.traces[t].state, RT_TRACE_UNTRIGGERED); /* the pin is kept */
	ck_assert_uint_eq(b.ix.traces[t].trigger_id, 31);
	ck_assert_uint_eq(rt_index_find(&b.ix, lo[2]), RT_INDEX_NONE); /* still being written */
	ck_assert_uint_eq(b.seg.next_off[live_buf], rt_seg_next(off1, bytes1));
	t = rt_index_find(&b.ix, 0x90);
	ck_assert_uint_ne(t, RT_INDEX_NONE);
	ck_assert_uint_eq(b.ix.traces[t].bytes, 5 * AG_FRAME); /* the dead writer's whole frames */
	ck_assert_uint_eq(b.seg.state[dead_buf], RT_SEGBUF_LEFT);
	ck_assert_uint_eq(b.st.bad_segments, 0);
	/* the live writer's entries come now: echoes, not duplicates */
	seg_push(&b.pool, lo[0], live_buf, 0, bytes0, RT_ENTRY_KEPT);
	seg_push(&b.pool, lo[1], live_buf, off1, bytes1, RT_ENTRY_KEPT);
	ag_drain(&b);
	ck_assert_uint_eq(b.st.recovered_echoes, 2);
	ck_assert_uint_eq(b.st.bad_duplicate, 0);
	ck_assert_uint_eq(b.seg.live[live_buf], 2);
	ck_assert(!is_available(&b, live_buf));
	b.cfg.unlink_at_exit = 1;
	rt_agent_close(&b);
}
END_TEST

START_TEST(test_malformed_chain)
{
	struct rt_agent a, b;
	struct rt_agent_config cfg;
	char name[64];
	uint32_t bad_buf, good_buf, bx, off1, bw;
	struct rt_buffer_header *h;

	open_agent(&a, &cfg, "malformed", name, sizeof name);
	cfg.unlink_at_exit = 0;
	a.cfg.unlink_at_exit = 0;
	bad_buf = ag_take_buffer(&a.pool);
	good_buf = ag_take_buffer(&a.pool);
	bx = seg_write(&a.pool, bad_buf, 0, 0xA1, 1, 0, 0, S_RECS,
		       RT_BUF_SEALED | RT_BUF_LAST | RT_BUF_KEPT);
	off1 = rt_seg_next(0, bx);
	/* a "sealed" second segment whose bytes run past the buffer, then a third
	 * that looks fine but must never be reached */
	seg_write(&a.pool, bad_buf, off1, 0xA2, 2, 0, 0, 2, RT_BUF_SEALED | RT_BUF_KEPT);
	h = rt_pool_segment(&a.pool, bad_buf, off1);
	h->bytes = S_SIZE;
	seg_write(&a.pool, bad_buf, rt_seg_next(off1, 2 * AG_FRAME), 0xA3, 3, 0, 0, 2,
		  RT_BUF_SEALED | RT_BUF_LAST);
	bw = seg_write(&a.pool, good_buf, 0, 0xB1, 4, 0, 0, S_RECS, RT_BUF_SEALED | RT_BUF_LAST);
	/* entries that lie: unaligned, past the end, a header that disagrees, a
	 * close mark where there is none, an offset into another segment's records */
	seg_push(&a.pool, 0xA1, bad_buf, 3, bx, 0);
	seg_push(&a.pool, 0xA1, bad_buf, S_SIZE - 8, bx, 0);
	seg_push(&a.pool, 0xA9, bad_buf, 0, bx, 0);
	seg_push(&a.pool, 0, good_buf, 64, 0, RT_ENTRY_CLOSE);
	seg_push(&a.pool, 0xA1, bad_buf, 64 + 96, 100, 0);
	ag_drain(&a);
	ck_assert_uint_eq(a.st.bad_bytes, 2);
	ck_assert_uint_eq(a.st.bad_header, 3);
	ck_assert_uint_eq(a.ix.st.traces, 0);
	rt_agent_close(&a);

	/* a restarted agent walks the chains: the bad one stops at its second
	 * segment (counted), the first and the other buffer are intact */
	ag_open(&b, &cfg);
	ck_assert(b.took_over);
	ck_assert_uint_eq(b.st.bad_segments, 1);
	assert_whole(&b, 0xA1);
	ck_assert_uint_eq(rt_index_find(&b.ix, 0xA2), RT_INDEX_NONE);
	ck_assert_uint_eq(rt_index_find(&b.ix, 0xA3), RT_INDEX_NONE);
	assert_whole(&b, 0xB1);
	ck_assert_uint_eq(b.ix.traces[rt_index_find(&b.ix, 0xB1)].bytes, bw);
	/* the bad buffer's writer (this process) lives: it is not handed out */
	ck_assert(!is_available(&b, bad_buf));
	b.cfg.unlink_at_exit = 1;
	rt_agent_close(&b);
}
END_TEST

/* A kept buffer whose process exited without leaving it (a thread it never
 * joined) is left for it at a liveness check; its data stays indexed. */
START_TEST(test_orphan_kept_buffer)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	char name[64];
	uint32_t id, bytes;
	uint64_t end;

	open_agent(&a, &cfg, "orphan", name, sizeof name);
	id = ag_take_buffer(&a.pool);
	bytes = seg_write(&a.pool, id, 0, 0xC1, 1, 0, 0, S_RECS,
			  RT_BUF_SEALED | RT_BUF_LAST | RT_BUF_KEPT);
	rt_pool_buffer(&a.pool, id)->pid = dead_pid();
	seg_push(&a.pool, 0xC1, id, 0, bytes, RT_ENTRY_KEPT);
	end = ag_deadline(10);
	while (a.st.orphans_left == 0 && ag_now_ns() < end) {
		ag_nap_us(5000);
		rt_agent_poll(&a);
	}
	ck_assert_uint_eq(a.st.orphans_left, 1);
	ck_assert_uint_eq(a.seg.state[id], RT_SEGBUF_LEFT);
	assert_whole(&a, 0xC1);
	a.evict_limit = 0;
	ag_drain(&a);
	ck_assert(is_available(&a, id));
	rt_agent_close(&a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_segments");
	TCase *tc = tcase_create("segments");
	rt_log_level = RT_LOG_ERROR;
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_traces_share_a_buffer);
	tcase_add_test(tc, test_evicted_beside_pinned_neighbour);
	tcase_add_test(tc, test_freed_only_when_left_and_empty);
	tcase_add_test(tc, test_takeover_walks_chains);
	tcase_add_test(tc, test_malformed_chain);
	tcase_add_test(tc, test_orphan_kept_buffer);
	suite_add_tcase(s, tc);
	return ag_run_suite(s);
}
