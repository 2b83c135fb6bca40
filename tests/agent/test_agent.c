/*
 * The agent core in-process (agent/agent.h), with real shared memory and real
 * client processes that link libretrace.
 *
 * Clients are forked children. They report every trace they finish (id, buffer
 * count, records, discards) over a pipe, so the test can hold what the agent
 * indexed against what was written: buffer headers (trace, writer pid, seq,
 * bytes), the index's byte counts, and the records themselves, decoded frame by
 * frame. Children never call ck_assert; they exit non-zero with a message, and
 * the test checks their exit status.
 *
 * Records are AG_RECLEN bytes (see agtest.h) so a trace of R records fills
 * exactly ceil(R / 40) 4 KiB buffers and the test knows every byte count.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agtest.h"
#include "log.h"
#include "shm/drain.h"

struct report {
	uint64_t lo, hi;
	uint32_t index;     /* the trace's number within its child */
	uint32_t nbuf;      /* buffers (sequence numbers) the trace used */
	uint32_t records;
	uint32_t triggered; /* trigger id, 0 if none */
	uint32_t discards;  /* of nbuf, how many went to the discard buffer */
	uint32_t phase;
	uint32_t pid;
	uint32_t pad;
};

/* Deterministic per-trace shapes. */
static uint32_t mix32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

static uint32_t records_for(uint32_t child, uint32_t i)
{
	uint32_t nbuf = 1 + mix32(child * 7919u + i) % 4;       /* 1..4 buffers */
	return AG_PER_BUF * (nbuf - 1) + 1 + (i * 7 + child) % AG_PER_BUF;
}

static uint64_t trace_lo(uint32_t tag, uint32_t child, uint32_t i)
{
	return ((uint64_t)tag << 48) | ((uint64_t)(child + 1) << 32) | (i + 1);
}

/*
 * In a child: write one trace of `records` records, optionally triggering it
 * right after its first record (before any of its buffers is sealed, so the
 * pin reaches the agent ahead of the data), then end and flush so its buffers
 * reach the complete queue in one batch.
 */
static void child_trace(struct report *r, uint64_t hi, uint64_t lo, uint32_t records,
			uint32_t trigger_id)
{
	struct retrace_thread_stats s0, s1;
	retrace_trace_id id = { hi, lo };
	uint8_t rec[AG_RECLEN];
	uint32_t k, used;
	retrace_thread_stats(&s0);
	if (retrace_begin(id) != 1)
		CHILD_FAIL(41, "trace %llx not recorded", (unsigned long long)lo);
	for (k = 0; k < records; k++) {
		ag_record(rec, lo, k);
		retrace_tracepoint(rec, AG_RECLEN);
		if (k == 0 && trigger_id) {
			int rc = retrace_trigger(id, trigger_id, NULL, 0);
			if (rc != RETRACE_OK)
				CHILD_FAIL(42, "retrace_trigger: %d", rc);
		}
	}
	retrace_end();
	retrace_flush();
	retrace_thread_stats(&s1);
	memset(r, 0, sizeof *r);
	r->lo = lo;
	r->hi = hi;
	r->records = records;
	r->triggered = trigger_id;
	r->discards = (uint32_t)(s1.discard_buffers - s0.discard_buffers);
	used = (uint32_t)(s1.buffers_used - s0.buffers_used) + r->discards;
	r->nbuf = used;
	r->pid = (uint32_t)getpid();
	if (used != (records + AG_PER_BUF - 1) / AG_PER_BUF)
		CHILD_FAIL(43, "trace %llx: %u records took %u buffers", (unsigned long long)lo,
			   records, used);
}

/*
 * Check one reported trace against the index: all its buffers, in sequence
 * order (`in_order`: index order must be seq order), each header naming the
 * trace and the writer, byte counts agreeing, every record decoded intact.
 * Returns 1 if present and complete, 0 if absent; fails if partial or wrong.
 */
static int check_trace_whole(struct rt_agent *a, const struct report *r, int in_order)
{
	uint32_t t = rt_index_find(&a->ix, r->lo), bufs[64], n, k, next = 0;
	uint32_t *byseq;
	uint64_t bytes = 0;
	char msg[256];
	if (t == RT_INDEX_NONE)
		return 0;
	n = ag_trace_buffers(a, t, bufs, 64);
	ck_assert_msg(n == r->nbuf && a->ix.traces[t].nbuffers == r->nbuf,
		      "trace %llx (child %u #%u) has %u buffers indexed, %u written",
		      (unsigned long long)r->lo, r->pid, r->index, n, r->nbuf);
	ck_assert_uint_eq(a->ix.traces[t].hi, r->hi);
	byseq = calloc(r->nbuf, sizeof *byseq);
	for (k = 0; k < n; k++) {
		const struct rt_buffer_header *h = rt_pool_buffer(&a->pool, bufs[k]);
		ck_assert_msg(h->magic == RT_BUF_MAGIC && h->trace_lo == r->lo && h->trace_hi == r->hi,
			      "buffer %u of trace %llx: header says trace %llx", bufs[k],
			      (unsigned long long)r->lo, (unsigned long long)h->trace_lo);
		ck_assert_uint_eq(h->pid, r->pid);
		ck_assert_msg(h->seq < r->nbuf && byseq[h->seq] == 0,
			      "trace %llx: seq %u out of range or twice", (unsigned long long)r->lo,
			      h->seq);
		if (in_order)
			ck_assert_msg(h->seq == k, "trace %llx: buffer %u in index order has seq %u",
				      (unsigned long long)r->lo, k, h->seq);
		byseq[h->seq] = bufs[k] + 1;
		/* Sealed: the header's count. Unsealed (a dead writer's): the frames
		 * decoded below must cover exactly the indexed bytes. */
		if (h->flags & RT_BUF_SEALED)
			ck_assert_msg(a->ix.buf_bytes[bufs[k]] == h->bytes,
				      "buffer %u: indexed %u bytes, header %u", bufs[k],
				      a->ix.buf_bytes[bufs[k]], h->bytes);
		bytes += a->ix.buf_bytes[bufs[k]];
	}
	/* Records 0..R-1 in writer order across the trace's buffers. */
	for (k = 0; k < r->nbuf; k++) {
		uint32_t id = byseq[k] - 1;
		int f = ag_check_frames(rt_pool_buffer_data(&a->pool, id), a->ix.buf_bytes[id],
					r->lo, &next, msg, sizeof msg);
		ck_assert_msg(f >= 0, "%s", msg);
		ck_assert_msg(f == (int)(k + 1 < r->nbuf ? AG_PER_BUF : r->records - k * AG_PER_BUF),
			      "trace %llx seq %u holds %d records", (unsigned long long)r->lo, k, f);
	}
	ck_assert_uint_eq(next, r->records);
	ck_assert_uint_eq(bytes, (uint64_t)r->records * AG_FRAME);
	ck_assert_uint_eq(a->ix.traces[t].bytes, bytes);
	free(byseq);
	return 1;
}

/* Every indexed buffer's header names the trace that owns it. */
static void check_index_consistent(struct rt_agent *a)
{
	uint32_t id;
	for (id = 0; id < a->pool.hdr->buffer_count; id++) {
		uint32_t t = a->ix.buf_trace[id];
		const struct rt_buffer_header *h = rt_pool_buffer(&a->pool, id);
		if (t == RT_INDEX_NONE)
			continue;
		ck_assert_msg(t < a->ix.capacity, "buffer %u has owner %u (in flight?)", id, t);
		ck_assert_msg(a->ix.traces[t].in_use, "buffer %u owned by a free entry", id);
		ck_assert_msg(h->magic == RT_BUF_MAGIC && h->trace_lo == a->ix.traces[t].lo,
			      "buffer %u indexed under %llx, header says %llx", id,
			      (unsigned long long)a->ix.traces[t].lo,
			      (unsigned long long)h->trace_lo);
	}
}

/* ------------------------------------------------ 1. coherent eviction ---- */

#define E_KIDS 3
#define E_TRACES 200
#define E_WINDOW 4      /* traces a child writes between two credits */
#define E_BUFFERS 512

static void eviction_child(const char *pool, uint32_t c, int rep, int credit)
{
	uint32_t i;
	ag_child_client(pool, 8, RETRACE_OK);
	for (i = 0; i < E_TRACES; i++) {
		struct report r;
		uint32_t trig = (i % 20 == 7) ? 100 + c : 0;
		child_trace(&r, 0xC0FFEE00u + c, trace_lo(0xE, c, i), records_for(c, i), trig);
		r.index = i;
		if (ag_write_all(rep, &r, sizeof r) != 0)
			CHILD_FAIL(44, "report pipe");
		if ((i + 1) % E_WINDOW == 0 && i + 1 < E_TRACES) {
			char ch;
			if (ag_read_exact(credit, &ch, 1, 30000) != 0)
				CHILD_FAIL(45, "no credit from the test");
		}
	}
	exit(0);
}

START_TEST(test_coherent_eviction)
{
	static struct report reps[E_KIDS][E_TRACES];
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct ag_reader rd[E_KIDS];
	pid_t kids[E_KIDS];
	int credit_w[E_KIDS];
	uint32_t got[E_KIDS] = { 0 }, since[E_KIDS] = { 0 };
	char name[64];
	uint32_t c, i, done = 0;
	uint64_t written = 0, end, triggered = 0, absent = 0, survivors[E_KIDS] = { 0 }, hist = 0;
	uint64_t total_survivors = 0;

	signal(SIGPIPE, SIG_IGN);
	ag_pool_name(name, sizeof name, "evict");
	ag_config(&cfg, name, E_BUFFERS, 4096, 0.5);
	cfg.pinned_share = 1.0;
	ag_open(&a, &cfg);
	ck_assert_uint_eq(a.evict_limit, E_BUFFERS / 2);

	for (c = 0; c < E_KIDS; c++) {
		int rp[2], cp[2];
		ck_assert_int_eq(pipe(rp), 0);
		ck_assert_int_eq(pipe(cp), 0);
		kids[c] = ag_fork();
		if (kids[c] == 0) {
			close(rp[0]);
			close(cp[1]);
			eviction_child(name, c, rp[1], cp[0]);
		}
		close(rp[1]);
		close(cp[0]);
		credit_w[c] = cp[1];
		ag_reader_init(&rd[c], rp[0], sizeof(struct report));
	}

	end = ag_deadline(45);
	while (done < E_KIDS) {
		rt_agent_poll(&a);
		done = 0;
		for (c = 0; c < E_KIDS; c++) {
			struct report r;
			while (ag_reader_next(&rd[c], &r)) {
				ck_assert_uint_lt(got[c], E_TRACES);
				ck_assert_uint_eq(r.index, got[c]);
				reps[c][got[c]++] = r;
				if (++since[c] == E_WINDOW && got[c] < E_TRACES) {
					/* Let the agent catch up before the child writes on:
					 * in-flight data stays bounded, the pool never runs dry. */
					ag_drain(&a);
					ck_assert_int_eq(ag_write_all(credit_w[c], "c", 1), 0);
					since[c] = 0;
				}
			}
			done += rd[c].eof;
		}
		ck_assert_msg(ag_now_ns() < end, "children did not finish in time (%u %u %u traces)",
			      got[0], got[1], got[2]);
	}
	for (c = 0; c < E_KIDS; c++) {
		ag_assert_exited_ok(kids[c], 20, "writer");
		ck_assert_uint_eq(got[c], E_TRACES);
		close(credit_w[c]);
		close(rd[c].fd);
	}
	/* The children returned their stashes and slots at exit. */
	end = ag_deadline(10);
	do {
		ag_drain(&a);
	} while ((rt_agent_clients_attached(&a) != 0 || ag_unaccounted(&a) != 0) &&
		 ag_now_ns() < end);
	ck_assert_uint_eq(rt_agent_clients_attached(&a), 0);

	check_index_consistent(&a);
	if (getenv("AGTEST_DEBUG"))
		fprintf(stderr, "evict: indexed %llu traces %llu pinned %llu/%llu evicted %llu/%llu "
			"limit %llu free %u abandoned %llu\n",
			(unsigned long long)a.ix.st.buffers, (unsigned long long)a.ix.st.traces,
			(unsigned long long)a.ix.st.pinned_traces,
			(unsigned long long)a.ix.st.pinned_buffers,
			(unsigned long long)a.ix.st.evicted_traces,
			(unsigned long long)a.ix.st.evicted_buffers,
			(unsigned long long)a.evict_limit, rt_agent_free_buffers(&a),
			(unsigned long long)a.st.abandoned_traces);
	for (c = 0; c < E_KIDS; c++) {
		int seen_present = 0;
		for (i = 0; i < E_TRACES; i++) {
			const struct report *r = &reps[c][i];
			int present;
			ck_assert_msg(r->discards == 0, "child %u trace %u fell to a discard buffer", c, i);
			written += r->nbuf;
			present = check_trace_whole(&a, r, 1);
			if (r->triggered) {
				uint32_t t = rt_index_find(&a.ix, r->lo);
				triggered++;
				ck_assert_msg(present, "triggered trace %llx was evicted",
					      (unsigned long long)r->lo);
				ck_assert_uint_eq(a.ix.traces[t].state, RT_TRACE_TRIGGERED);
				ck_assert_uint_eq(a.ix.traces[t].trigger_id, r->triggered);
				continue;
			}
			/* One writer's untriggered traces: the survivors are its latest. */
			if (present) {
				seen_present = 1;
				survivors[c]++;
			} else {
				ck_assert_msg(!seen_present,
					      "child %u: trace #%u evicted though an older one survived", c, i);
				absent++;
			}
		}
		total_survivors += survivors[c];
	}
	/* (A child that finished early may have lost all its untriggered traces to
	 * the others' later ones: survivors are counted over all children.) */
	ck_assert_uint_gt(total_survivors, 0);
	/* Books: written = indexed now + evicted; nothing lost, nothing leaked. */
	ck_assert_uint_eq(a.st.buffers_indexed, written);
	ck_assert_uint_eq(a.ix.st.buffers + a.ix.st.evicted_buffers, written);
	ck_assert_uint_gt(absent, 0); /* eviction really happened */
	ck_assert_uint_eq(a.ix.st.evicted_traces, absent);
	for (i = 0; i < RT_INDEX_HORIZON_BUCKETS; i++)
		hist += a.ix.st.horizon_hist[i];
	ck_assert_uint_eq(hist, absent);
	ck_assert_uint_eq(a.ix.st.traces, E_KIDS * E_TRACES - absent);
	ck_assert_uint_eq(a.ix.st.pinned_traces, triggered);
	ck_assert_uint_eq(a.st.trigger_groups, triggered);
	ck_assert_uint_eq(a.st.triggered_traces, triggered);
	ck_assert_uint_le(a.ix.st.buffers, a.evict_limit);
	ck_assert_int_eq(ag_unaccounted(&a), 0);
	ck_assert_uint_eq(ag_check_available(&a), E_BUFFERS - a.ix.st.buffers);
	ck_assert_uint_eq(a.st.bad_range + a.st.bad_bytes + a.st.bad_zero_trace +
				  a.st.bad_header + a.st.bad_duplicate + a.st.bad_triggers, 0);
	ck_assert_uint_eq(a.st.index_full, 0);
	ck_assert_uint_eq(a.st.clients_died, 0);
	ck_assert_uint_eq(a.st.abandoned_traces, 0);
	ck_assert_uint_eq(a.pool.hdr->null_buffers, 0);
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

/* ------------------------------------------- 2. client killed mid-trace ---- */

struct kill_report {
	uint64_t a_lo, b_lo;
	uint32_t a_records, b_records;
	uint32_t pid, pad;
};

START_TEST(test_client_killed_mid_trace)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct ag_reader rd;
	struct kill_report kr;
	struct report ra;
	char name[64], msg[256];
	int rp[2], cp[2];
	pid_t kid;
	uint32_t id, stashed = 0, sealed = 0, open = 0, t, bufs[8], n, k, next = 0, i;
	uint64_t end;

	ag_pool_name(name, sizeof name, "kill");
	ag_config(&cfg, name, 64, 4096, 1.0);
	ag_open(&a, &cfg);
	ck_assert_int_eq(pipe(rp), 0);
	ck_assert_int_eq(pipe(cp), 0);
	kid = ag_fork();
	if (kid == 0) {
		struct report r;
		uint8_t rec[AG_RECLEN];
		char ch;
		close(rp[0]);
		close(cp[1]);
		ag_child_client(name, 8, RETRACE_OK);
		/* A: a whole trace, sealed and pushed. */
		child_trace(&r, 0x1, 0xA11CE, 10, 0);
		/* B: 100 records = 2 full buffers + 20 records, never ended. */
		retrace_begin((retrace_trace_id){ 0x2, 0xB0B });
		for (k = 0; k < 100; k++) {
			ag_record(rec, 0xB0B, k);
			retrace_tracepoint(rec, AG_RECLEN);
		}
		kr = (struct kill_report){ 0xA11CE, 0xB0B, 10, 100, (uint32_t)getpid(), 0 };
		if (ag_write_all(rp[1], &kr, sizeof kr) != 0)
			CHILD_FAIL(44, "report pipe");
		(void)!read(cp[0], &ch, 1); /* blocks until killed */
		CHILD_FAIL(46, "was not killed");
	}
	close(rp[1]);
	close(cp[0]);
	ag_reader_init(&rd, rp[0], sizeof kr);
	end = ag_deadline(20);
	while (!ag_reader_next(&rd, &kr)) {
		ck_assert_msg(!rd.eof, "child died before reporting");
		ck_assert_msg(ag_now_ns() < end, "no report from the child");
		rt_agent_poll(&a);
	}
	ag_drain(&a);
	ck_assert_uint_eq(kr.pid, (uint32_t)kid);
	ck_assert_uint_ne(rt_index_find(&a.ix, 0xA11CE), RT_INDEX_NONE);
	ck_assert_uint_eq(rt_index_find(&a.ix, 0xB0B), RT_INDEX_NONE); /* nothing pushed yet */
	ck_assert_uint_eq(rt_agent_clients_attached(&a), 1);

	/* What the child holds, from the headers, while it is blocked. */
	for (id = 0; id < 64; id++) {
		const struct rt_buffer_header *h = rt_pool_buffer(&a.pool, id);
		uint32_t fl = h->flags;
		if (h->magic != RT_BUF_MAGIC || h->pid != (uint32_t)kid ||
		    a.ix.buf_trace[id] != RT_INDEX_NONE)
			continue;
		if (fl & RT_BUF_STASHED)
			stashed++;
		else if ((fl & RT_BUF_INUSE) && (fl & RT_BUF_SEALED))
			sealed++;
		else if (fl & RT_BUF_INUSE)
			open++;
	}
	/* Batch 8: one stash of 8, A took 1, B 3; B's sealed two wait in the
	 * client's pending batch, its third is open. */
	ck_assert_uint_eq(stashed, 4);
	ck_assert_uint_eq(sealed, 2);
	ck_assert_uint_eq(open, 1);
	ck_assert_int_eq(ag_unaccounted(&a), 7);

	ag_kill9(kid);
	end = ag_deadline(10);
	while (a.st.clients_died == 0 && ag_now_ns() < end)
		rt_agent_poll(&a);
	ck_assert_uint_eq(a.st.clients_died, 1);
	ag_drain(&a);

	/* B is indexed whole: two sealed buffers and the open one. */
	t = rt_index_find(&a.ix, 0xB0B);
	ck_assert_uint_ne(t, RT_INDEX_NONE);
	n = ag_trace_buffers(&a, t, bufs, 8);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(a.ix.traces[t].hi, 0x2);
	for (k = 0; k < 3; k++) {
		uint32_t want_seq = k, b = RT_INDEX_NONE;
		const struct rt_buffer_header *h;
		int f;
		for (i = 0; i < n; i++)
			if (rt_pool_buffer(&a.pool, bufs[i])->seq == want_seq)
				b = bufs[i];
		ck_assert_msg(b != RT_INDEX_NONE, "seq %u of B missing", want_seq);
		h = rt_pool_buffer(&a.pool, b);
		ck_assert_uint_eq(h->trace_lo, 0xB0B);
		ck_assert_uint_eq(h->pid, (uint32_t)kid);
		if (k < 2) {
			ck_assert(h->flags & RT_BUF_SEALED);
			ck_assert_uint_eq(h->bytes, AG_PER_BUF * AG_FRAME);
		} else {
			ck_assert(!(h->flags & RT_BUF_SEALED));
		}
		ck_assert_uint_eq(a.ix.buf_bytes[b], (k < 2 ? AG_PER_BUF : 20) * AG_FRAME);
		f = ag_check_frames(rt_pool_buffer_data(&a.pool, b), a.ix.buf_bytes[b], 0xB0B,
				    &next, msg, sizeof msg);
		ck_assert_msg(f >= 0, "%s", msg);
		ck_assert_int_eq(f, k < 2 ? (int)AG_PER_BUF : 20);
	}
	ck_assert_uint_eq(next, kr.b_records);
	ck_assert_uint_eq(a.ix.traces[t].bytes, kr.b_records * AG_FRAME);
	/* A is untouched by the salvage. */
	memset(&ra, 0, sizeof ra);
	ra.lo = 0xA11CE;
	ra.hi = 0x1;
	ra.nbuf = 1;
	ra.records = 10;
	ra.pid = (uint32_t)kid;
	ck_assert_int_eq(check_trace_whole(&a, &ra, 1), 1);

	ck_assert_uint_eq(a.st.dead_buffers_indexed, 3);
	ck_assert_uint_eq(a.st.dead_buffers_freed, stashed);
	ck_assert_uint_eq(a.st.corrupt_frames, 0);
	for (i = 0; i < a.pool.hdr->registry_slots; i++)
		ck_assert_uint_ne(a.pool.registry[i].pid, (uint32_t)kid);
	ck_assert_uint_eq(rt_agent_clients_attached(&a), 0);
	check_index_consistent(&a);

	/* No leak: every buffer is free or indexed; evicting all frees all. */
	ck_assert_int_eq(ag_unaccounted(&a), 0);
	a.evict_limit = 0;
	ag_drain(&a);
	ck_assert_uint_eq(a.ix.st.buffers, 0);
	ck_assert_uint_eq(a.ix.st.evicted_buffers, 4);
	ck_assert_uint_eq(rt_agent_free_buffers(&a), 64);
	ck_assert_uint_eq(ag_check_available(&a), 64);
	ck_assert_uint_eq(a.st.clients_died, 1);
	close(rd.fd);
	close(cp[1]);
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

/* ------------------------------------- 3. agent killed under load ---- */

#define K_KIDS 3
#define K_PHASE1 100
#define K_MAX 1000000 /* phase 2 ends when the test says so (or after 25 s) */
#define K_BUFFERS 2048

/*
 * The first agent, in a child: open, say ready, poll until killed. With
 * notify >= 0 it also writes 'P' there once it holds `pins` pinned traces and
 * `indexed` buffers (so the test knows what it had before it is killed).
 */
static void agent_child_notify(const struct rt_agent_config *cfg, int ready, int notify,
			       uint64_t pins, uint64_t indexed)
{
	static struct rt_agent a;
	char err[512];
	int rc = rt_agent_open(&a, cfg, err, sizeof err);
	if (rc != RETRACE_OK) {
		(void)!write(ready, "F", 1);
		CHILD_FAIL(50, "agent open: %s", err);
	}
	if (ag_write_all(ready, "R", 1) != 0)
		CHILD_FAIL(51, "ready pipe");
	for (;;) {
		unsigned n = rt_agent_poll(&a);
		if (notify >= 0 && a.ix.st.pinned_traces >= pins && a.st.buffers_indexed >= indexed) {
			if (ag_write_all(notify, "P", 1) != 0)
				CHILD_FAIL(51, "notify pipe");
			notify = -1;
		}
		if (n == 0)
			ag_nap_us(20);
	}
}

static void agent_child(const struct rt_agent_config *cfg, int ready)
{
	agent_child_notify(cfg, ready, -1, 0, 0);
}

static void load_child(const char *pool, uint32_t c, int rep, int cmd)
{
	uint32_t i;
	uint64_t stop_at = ag_deadline(25);
	char ch;
	ag_child_client(pool, 8, RETRACE_OK);
	fcntl(cmd, F_SETFL, fcntl(cmd, F_GETFL) | O_NONBLOCK);
	for (i = 0; i < K_MAX && ag_now_ns() < stop_at; i++) {
		struct report r;
		child_trace(&r, 0xD00D0000u + c, trace_lo(0xD, c, i), records_for(c, i), 0);
		r.index = i;
		r.phase = i < K_PHASE1 ? 1 : 2;
		if (ag_write_all(rep, &r, sizeof r) != 0)
			CHILD_FAIL(44, "report pipe");
		if (i + 1 == K_PHASE1 && ag_read_exact(cmd, &ch, 1, 30000) != 0)
			CHILD_FAIL(45, "no go");          /* wait for every phase 1 */
		if (i >= K_PHASE1 && read(cmd, &ch, 1) == 1)
			break;                            /* told to stop */
	}
	exit(0);
}

static uint32_t ring_depth(const struct rt_pool *p, int q)
{
	return ck_pr_load_uint(&p->ring[q]->p_tail) - ck_pr_load_uint(&p->ring[q]->c_head);
}

START_TEST(test_agent_killed_and_restarted)
{
	struct report *reps[K_KIDS];
	uint8_t *exact[K_KIDS];
	uint32_t cap[K_KIDS];
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct rt_pool view;
	struct rt_pool_attach_opts ao;
	struct ag_reader rd[K_KIDS];
	pid_t kids[K_KIDS], agent;
	int cmd_w[K_KIDS], rdy[2];
	uint32_t got[K_KIDS] = { 0 }, after_kill[K_KIDS] = { 0 }, dry[K_KIDS] = { 0 };
	uint32_t c, i, done, t, phase1_seen = 0, phase2_seen = 0, nexact = 0, present = 0;
	int killed = 0, stopped = 0, went = 0;
	uint64_t end, prev_tick = 0;
	char name[64], err[256], ch;

	signal(SIGPIPE, SIG_IGN);
	ag_pool_name(name, sizeof name, "restart");
	ag_config(&cfg, name, K_BUFFERS, 4096, 1.0); /* nothing evicted */
	ck_assert_int_eq(pipe(rdy), 0);
	agent = ag_fork();
	if (agent == 0) {
		close(rdy[0]);
		agent_child(&cfg, rdy[1]);
	}
	close(rdy[1]);
	ck_assert_msg(ag_read_exact(rdy[0], &ch, 1, 20000) == 0 && ch == 'R',
		      "first agent not ready");
	close(rdy[0]);
	memset(&ao, 0, sizeof ao);
	ao.name = name;
	ck_assert_int_eq(rt_pool_attach(&ao, &view, err, sizeof err), RETRACE_OK);
	ck_assert_uint_eq(view.hdr->generation, 1);
	ck_assert_uint_eq(view.hdr->agent_pid, (uint32_t)agent);

	for (c = 0; c < K_KIDS; c++) {
		int rp[2], cp[2];
		cap[c] = 4096;
		reps[c] = malloc(cap[c] * sizeof **reps);
		exact[c] = calloc(cap[c], 1);
		ck_assert_int_eq(pipe(rp), 0);
		ck_assert_int_eq(pipe(cp), 0);
		kids[c] = ag_fork();
		if (kids[c] == 0) {
			close(rp[0]);
			close(cp[1]);
			load_child(name, c, rp[1], cp[0]);
		}
		close(rp[1]);
		close(cp[0]);
		cmd_w[c] = cp[1];
		ag_reader_init(&rd[c], rp[0], sizeof(struct report));
	}

	end = ag_deadline(40);
	for (done = 0; done < K_KIDS;) {
		done = 0;
		for (c = 0; c < K_KIDS; c++) {
			struct report r;
			while (ag_reader_next(&rd[c], &r)) {
				ck_assert_uint_eq(r.index, got[c]);
				if (got[c] == cap[c]) {
					cap[c] *= 2;
					reps[c] = realloc(reps[c], cap[c] * sizeof **reps);
					exact[c] = realloc(exact[c], cap[c]);
				}
				reps[c][got[c]] = r;
				exact[c][got[c]] = 0;
				/* Finished before the kill and whole when written: must survive. */
				if (r.phase == 1 || (!killed && r.discards == 0))
					exact[c][got[c]] = 1;
				got[c]++;
				if (r.phase == 1)
					phase1_seen++;
				else if (!killed)
					phase2_seen++;
				if (killed) {
					after_kill[c]++;
					dry[c] += r.discards > 0;
				}
			}
			done += rd[c].eof;
		}
		if (!went && phase1_seen == K_KIDS * K_PHASE1) {
			/* All phase-1 data reached the first agent: let clients go on. */
			while (ring_depth(&view, RT_Q_COMPLETE) != 0 && ag_now_ns() < end)
				ag_nap_us(200);
			for (c = 0; c < K_KIDS; c++)
				ck_assert_int_eq(ag_write_all(cmd_w[c], "g", 1), 0);
			went = 1;
		}
		if (went && !killed && phase2_seen >= 20) {
			ag_kill9(agent); /* under load: clients are writing */
			killed = 1;
		}
		if (killed && !stopped) {
			int ready = 1;
			for (c = 0; c < K_KIDS; c++)
				ready &= after_kill[c] >= 30 && dry[c] > 0;
			if (ready) {
				for (c = 0; c < K_KIDS; c++)
					ck_assert_int_eq(ag_write_all(cmd_w[c], "s", 1), 0);
				stopped = 1;
			}
		}
		ck_assert_msg(ag_now_ns() < end, "clients stalled (went %d killed %d, %u/%u/%u traces)",
			      went, killed, got[0], got[1], got[2]);
		ag_nap_us(100);
	}
	ck_assert(killed);
	/* Never blocked: every client finished its loop and exited normally. */
	for (c = 0; c < K_KIDS; c++) {
		ag_assert_exited_ok(kids[c], 20, "client");
		ck_assert_uint_gt(after_kill[c], 0);
		close(rd[c].fd);
		close(cmd_w[c]);
	}
	ck_assert_uint_eq(view.hdr->generation, 1);
	rt_pool_detach(&view);

	/* The second agent takes the pool over and rebuilds from the headers. */
	ag_open(&a, &cfg);
	ck_assert_int_eq(a.took_over, 1);
	ck_assert_uint_eq(a.pool.hdr->generation, 2);
	ck_assert_uint_eq(a.pool.hdr->agent_pid, (uint32_t)getpid());
	ck_assert_uint_eq(a.pool.hdr->buffer_count, K_BUFFERS);
	ck_assert_uint_gt(a.st.recovered_buffers, 0);
	ck_assert_uint_gt(a.st.recovered_traces, 0);
	/* Recovered traces enter the LRU in the order their data was written. */
	for (t = a.ix.lru_head; t != RT_INDEX_NONE; t = a.ix.traces[t].lru_next) {
		ck_assert_uint_ge(a.ix.traces[t].first_tick, prev_tick);
		prev_tick = a.ix.traces[t].first_tick;
	}
	/* Lost buffers are looked at again after a grace second. */
	end = ag_deadline(10);
	while ((a.nlost != 0 || ag_unaccounted(&a) != 0) && ag_now_ns() < end) {
		rt_agent_poll(&a);
		ag_nap_us(1000);
	}
	ag_drain(&a);

	check_index_consistent(&a);
	for (c = 0; c < K_KIDS; c++) {
		for (i = 0; i < got[c]; i++) {
			const struct report *r = &reps[c][i];
			if (r->phase == 1)
				ck_assert_msg(r->discards == 0, "phase-1 trace %u of child %u discarded", i, c);
			if (exact[c][i]) {
				nexact++;
				ck_assert_msg(check_trace_whole(&a, r, 0) == 1,
					      "trace %llx (child %u #%u, phase %u, finished before the "
					      "kill) is missing after the takeover",
					      (unsigned long long)r->lo, c, i, r->phase);
				present++;
			} else {
				/* Written across the kill: whatever is indexed is its own. */
				t = rt_index_find(&a.ix, r->lo);
				if (t != RT_INDEX_NONE)
					ck_assert_uint_le(a.ix.traces[t].nbuffers, r->nbuf - r->discards);
			}
		}
	}
	if (getenv("AGTEST_DEBUG"))
		fprintf(stderr, "restart: %u exact traces, reports %u/%u/%u, after kill %u/%u/%u, "
			"recovered %llu buffers %llu traces, lost reclaimed %llu, echoes %llu, "
			"indexed %llu, free %u\n", nexact, got[0], got[1], got[2], after_kill[0],
			after_kill[1], after_kill[2], (unsigned long long)a.st.recovered_buffers,
			(unsigned long long)a.st.recovered_traces,
			(unsigned long long)a.st.lost_buffers_reclaimed,
			(unsigned long long)a.st.recovered_echoes, (unsigned long long)a.ix.st.buffers,
			rt_agent_free_buffers(&a));
	ck_assert_uint_ge(nexact, K_KIDS * K_PHASE1);
	ck_assert_uint_eq(present, nexact);
	for (c = 0; c < K_KIDS; c++) {
		free(reps[c]);
		free(exact[c]);
	}
	/* The pool's books balance: nothing leaked across the two agents. */
	ck_assert_uint_eq(rt_agent_clients_attached(&a), 0);
	ck_assert_int_eq(ag_unaccounted(&a), 0);
	ck_assert_uint_eq(ag_check_available(&a), K_BUFFERS - a.ix.st.buffers);
	ck_assert_uint_eq(a.st.bad_range, 0);
	ck_assert_uint_eq(a.st.bad_header + a.st.bad_duplicate + a.st.bad_bytes, 0);
	ck_assert_uint_eq(a.st.index_full, 0);
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

/*
 * A takeover of a pool with 1024 or more free buffers keeps them all free.
 * (Regression: snapshot_available() used to push ids back every 1024 while
 * still popping, popped them again, counted them as bad_range and dropped
 * them: after a restart of a default agent no buffer was free. Fixed in
 * f500446.)
 */
START_TEST(test_takeover_keeps_free_buffers)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	pid_t agent;
	int rdy[2];
	char name[64], ch;

	ag_pool_name(name, sizeof name, "tofree");
	ag_config(&cfg, name, K_BUFFERS, 4096, 0.8);
	ck_assert_int_eq(pipe(rdy), 0);
	agent = ag_fork();
	if (agent == 0) {
		close(rdy[0]);
		agent_child(&cfg, rdy[1]);
	}
	close(rdy[1]);
	ck_assert_msg(ag_read_exact(rdy[0], &ch, 1, 20000) == 0 && ch == 'R', "agent not ready");
	close(rdy[0]);
	ag_kill9(agent);

	ag_open(&a, &cfg);
	ck_assert_int_eq(a.took_over, 1);
	ag_drain(&a);
	ck_assert_uint_eq(a.ix.st.buffers, 0);
	ck_assert_msg(rt_agent_free_buffers(&a) == K_BUFFERS,
		      "after the takeover %u of %u buffers are free (bad_range %llu)",
		      rt_agent_free_buffers(&a), K_BUFFERS, (unsigned long long)a.st.bad_range);
	ck_assert_uint_eq(a.st.bad_range, 0);
	ck_assert_uint_eq(ag_check_available(&a), K_BUFFERS);
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

/* ------------------------------------------ 4. malformed queue entries ---- */

START_TEST(test_malformed_entries)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct rt_trace_entry before;
	struct rt_trigger_entry g[64];
	char name[64], status[16384];
	const uint64_t X = 0x5151, Y = 0x6161, W = 0x7171;
	uint32_t b0, b1, fu, t, bufs[4], payload, i, free_before;
	uint32_t bytes0, bytes1;

	ag_pool_name(name, sizeof name, "bad");
	ag_config(&cfg, name, 64, 4096, 1.0);
	ag_open(&a, &cfg);
	payload = rt_pool_payload_size(&a.pool);

	/* An honest trace X of two buffers, indexed first. */
	b0 = ag_take_buffer(&a.pool);
	b1 = ag_take_buffer(&a.pool);
	bytes0 = ag_fill_buffer(&a.pool, b0, 0x77, X, 0, 0, 10, 1);
	bytes1 = ag_fill_buffer(&a.pool, b1, 0x77, X, 1, 10, 20, 1);
	ag_push_complete(&a.pool, X, b0, bytes0);
	ag_push_complete(&a.pool, X, b1, bytes1);
	ag_push_crumb(&a.pool, X, 9);
	ag_drain(&a);
	t = rt_index_find(&a.ix, X);
	ck_assert_uint_ne(t, RT_INDEX_NONE);
	ck_assert_uint_eq(a.ix.traces[t].nbuffers, 2);
	ck_assert_uint_eq(a.st.breadcrumbs, 1);
	ck_assert_uint_eq(a.ix.traces[t].ncrumbs, 1);
	before = a.ix.traces[t];
	/* A writer's open buffer of trace Y, never sealed. */
	fu = ag_take_buffer(&a.pool);
	ag_fill_buffer(&a.pool, fu, 0x88, Y, 0, 0, 3, 0);
	free_before = rt_agent_free_buffers(&a);
	ck_assert_uint_eq(free_before, 61);

	/* Complete entries. */
	ag_push_complete(&a.pool, X, 64, bytes0);          /* id = count: range */
	ag_push_complete(&a.pool, X, UINT32_MAX, bytes0);  /* range */
	ag_push_complete(&a.pool, X, b0, payload + 1);     /* bytes */
	ag_push_complete(&a.pool, X, b0, UINT32_MAX);      /* bytes */
	ag_push_complete(&a.pool, 0, b0, bytes0);          /* zero trace */
	ag_push_complete(&a.pool, X + 1, b0, bytes0);      /* header names X */
	ag_push_complete(&a.pool, X, b0, bytes0 - 4);      /* header bytes differ */
	ag_push_complete(&a.pool, Y, fu, 3 * AG_FRAME);    /* not sealed */
	{
		/* A free buffer (still in the available queue): blank header. */
		uint32_t freeid = 0;
		while (freeid == b0 || freeid == b1 || freeid == fu)
			freeid++;
		ag_push_complete(&a.pool, Y, freeid, 0);   /* header magic */
	}
	ag_push_complete(&a.pool, X, b0, bytes0);          /* duplicates */
	ag_push_complete(&a.pool, X, b1, bytes1);

	/* Breadcrumbs. */
	ag_push_crumb(&a.pool, 0, 5);
	ag_push_crumb(&a.pool, X, 0);
	ag_push_crumb(&a.pool, 0, 0);

	/* Trigger entries, in queue order. */
	g[0] = ag_trig(Y, 1, 2, 1);                         /* index 1 first: 1 bad */
	ag_push_triggers(&a.pool, g, 1);
	g[0] = ag_trig(Y, 2, 0, 0);                         /* size 0: 1 bad */
	ag_push_triggers(&a.pool, g, 1);
	g[0] = ag_trig(Y, 3, 65, 0);                        /* size 65: 1 bad */
	ag_push_triggers(&a.pool, g, 1);
	g[0] = ag_trig(Y, 5, 3, 0);                         /* trigger id changes: 3 bad */
	g[1] = ag_trig(Y, 5, 3, 1);
	g[2] = ag_trig(Y, 7, 3, 2);
	ag_push_triggers(&a.pool, g, 3);
	g[0] = ag_trig(Y, 9, 2, 0);                         /* size changes: 2 bad */
	g[1] = ag_trig(Y, 9, 3, 1);
	ag_push_triggers(&a.pool, g, 2);
	g[0] = ag_trig(W, 10, 2, 0);                        /* valid group, a lateral 0: 1 bad */
	g[1] = ag_trig(0, 10, 2, 1);
	ag_push_triggers(&a.pool, g, 2);
	for (i = 0; i < 64; i++)                            /* the largest valid group */
		g[i] = ag_trig(0x10000 + i, 11, 64, (uint16_t)i);
	ag_push_triggers(&a.pool, g, 64);
	g[0] = ag_trig(Y, 12, 3, 0);                        /* cut short: 2 bad */
	g[1] = ag_trig(Y, 12, 3, 1);
	ag_push_triggers(&a.pool, g, 2);

	ag_drain(&a);

	ck_assert_uint_eq(a.st.complete_entries, 2 + 11);
	ck_assert_uint_eq(a.st.bad_range, 2);
	ck_assert_uint_eq(a.st.bad_bytes, 2);
	ck_assert_uint_eq(a.st.bad_zero_trace, 1);
	ck_assert_uint_eq(a.st.bad_header, 4);
	ck_assert_uint_eq(a.st.bad_duplicate, 2);
	ck_assert_uint_eq(a.st.buffers_indexed, 2);
	ck_assert_uint_eq(a.st.bad_breadcrumbs, 3);
	ck_assert_uint_eq(a.st.breadcrumbs, 1);
	ck_assert_uint_eq(a.st.bad_triggers, 1 + 1 + 1 + 3 + 2 + 1 + 2);
	ck_assert_uint_eq(a.st.trigger_groups, 2);
	ck_assert_uint_eq(a.st.triggered_traces, 1 + 64);
	ck_assert_uint_eq(a.ix.st.pinned_traces, 65);
	ck_assert_uint_ne(rt_index_find(&a.ix, W), RT_INDEX_NONE);
	ck_assert_uint_eq(rt_index_find(&a.ix, Y), RT_INDEX_NONE); /* only bad entries named Y */
	ck_assert_uint_eq(rt_index_find(&a.ix, 0), RT_INDEX_NONE);
	ck_assert_uint_eq(a.ix.traces[rt_index_find(&a.ix, 0x10000 + 63)].trigger_id, 11);

	/* X is exactly as before; nothing else owns a buffer; no buffer moved. */
	ck_assert_uint_eq(rt_index_find(&a.ix, X), t);
	ck_assert_uint_eq(ag_trace_buffers(&a, t, bufs, 4), 2);
	ck_assert_uint_eq(bufs[0], b0);
	ck_assert_uint_eq(bufs[1], b1);
	ck_assert_uint_eq(a.ix.buf_bytes[b0], bytes0);
	ck_assert_uint_eq(a.ix.buf_bytes[b1], bytes1);
	ck_assert_uint_eq(a.ix.traces[t].nbuffers, before.nbuffers);
	ck_assert_uint_eq(a.ix.traces[t].bytes, before.bytes);
	ck_assert_uint_eq(a.ix.traces[t].state, before.state);
	ck_assert_uint_eq(a.ix.traces[t].ncrumbs, 1);
	ck_assert_uint_eq(a.ix.traces[t].hi, 0x77);
	ck_assert_uint_eq(a.ix.st.buffers, 2);
	ck_assert_uint_eq(a.ix.buf_trace[fu], RT_INDEX_NONE);
	ck_assert_uint_eq(rt_agent_free_buffers(&a), free_before);
	ck_assert_uint_eq(ag_check_available(&a), free_before);
	ck_assert_uint_eq(rt_pool_buffer(&a.pool, fu)->trace_lo, Y); /* not recycled */
	check_index_consistent(&a);

	/* The status page shows the same figures. */
	rt_agent_status(&a, 1, status, sizeof status);
	ck_assert_ptr_nonnull(strstr(status, "\"complete_bad_buffer_id\":2"));
	ck_assert_ptr_nonnull(strstr(status, "\"complete_bad_header\":4"));
	ck_assert_ptr_nonnull(strstr(status, "\"complete_duplicate\":2"));
	ck_assert_ptr_nonnull(strstr(status, "\"triggers\":11"));
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

/*
 * A buffer refused because the trace table is full (here: filled with pins of
 * traces whose data never comes) goes back to the pool, counted in index_full.
 * (Regression: handle_complete() used to drop it without recycling, losing it
 * for the agent's life. Fixed in f500446.)
 */
START_TEST(test_index_full_does_not_leak)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct rt_trigger_entry g[4];
	char name[64];
	uint32_t i, id, bytes;

	ag_pool_name(name, sizeof name, "full");
	ag_config(&cfg, name, 16, 4096, 1.0);
	cfg.trace_capacity = 4;
	ag_open(&a, &cfg);
	for (i = 0; i < 4; i++)
		g[i] = ag_trig(0x900 + i, 33, 4, (uint16_t)i);
	ag_push_triggers(&a.pool, g, 4);
	ag_drain(&a);
	ck_assert_uint_eq(a.ix.st.traces, 4);
	ck_assert_uint_eq(a.ix.st.pinned_traces, 4);

	id = ag_take_buffer(&a.pool);
	bytes = ag_fill_buffer(&a.pool, id, 1, 0xF00D, 0, 0, 5, 1);
	ag_push_complete(&a.pool, 0xF00D, id, bytes);
	ag_drain(&a);
	ck_assert_uint_eq(a.st.index_full, 1);
	ck_assert_uint_eq(rt_index_find(&a.ix, 0xF00D), RT_INDEX_NONE);
	ck_assert_msg(ag_unaccounted(&a) == 0,
		      "a buffer refused for a full table is neither free nor indexed "
		      "(free %u, indexed %llu, total 16)", rt_agent_free_buffers(&a),
		      (unsigned long long)a.ix.st.buffers);
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

/* ------------------------------------------ 5. second agent refused ---- */

START_TEST(test_second_agent_refused)
{
	struct rt_agent a, b;
	struct rt_agent_config cfg;
	pid_t owner;
	int rdy[2], rc;
	char name[64], err[512], want[64], ch;

	ag_pool_name(name, sizeof name, "second");
	ag_config(&cfg, name, 64, 4096, 0.8);
	ck_assert_int_eq(pipe(rdy), 0);
	owner = ag_fork();
	if (owner == 0) {
		close(rdy[0]);
		agent_child(&cfg, rdy[1]);
	}
	close(rdy[1]);
	ck_assert_msg(ag_read_exact(rdy[0], &ch, 1, 20000) == 0 && ch == 'R', "agent not ready");
	close(rdy[0]);

	err[0] = 0;
	rc = rt_agent_open(&b, &cfg, err, sizeof err);
	ck_assert_int_eq(rc, RETRACE_E_EXISTS);
	ck_assert_msg(strstr(err, "owned by a running agent") != NULL, "message: %s", err);
	snprintf(want, sizeof want, "pid %d", (int)owner);
	ck_assert_msg(strstr(err, want) != NULL, "message does not name pid %d: %s", (int)owner, err);
	ck_assert(ag_shm_exists(name)); /* the refused open left the pool alone */
	rt_agent_close(&b);             /* harmless after a failed open */
	ck_assert(ag_shm_exists(name));

	ag_kill9(owner);
	ag_open(&a, &cfg);
	ck_assert_int_eq(a.took_over, 1);
	ck_assert_uint_eq(a.pool.hdr->generation, 2);
	ck_assert_uint_eq(a.pool.hdr->agent_pid, (uint32_t)getpid());
	ag_drain(&a);
	ck_assert_uint_eq(rt_agent_free_buffers(&a), 64);
	/* And now this process is the owner: a third open is refused. */
	rc = rt_agent_open(&b, &cfg, err, sizeof err);
	ck_assert_int_eq(rc, RETRACE_E_EXISTS);
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

/* ------------------------------------- 6. client started before agent ---- */

#define EARLY_CLIENT_WAIT_S 30

START_TEST(test_client_before_agent)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	char name[64], ch;
	int rp[2], cp[2];
	pid_t kid;
	uint32_t id, mine = 0;
	uint64_t end;

	ag_pool_name(name, sizeof name, "early");
	ck_assert(!ag_shm_exists(name));
	ck_assert_int_eq(pipe(rp), 0);
	ck_assert_int_eq(pipe(cp), 0);
	kid = ag_fork();
	if (kid == 0) {
		/* Writes until the parent has seen a buffer of it (or is gone): a
		 * fixed 6 s here ran out on a loaded machine before the parent, its
		 * agent opened late, had seen one (stress run, session 17). */
		uint64_t stop = ag_deadline(EARLY_CLIENT_WAIT_S + 30);
		uint32_t i = 0;
		uint8_t rec[AG_RECLEN];
		close(rp[0]);
		close(cp[1]);
		ag_child_client(name, 4, RETRACE_E_NOPOOL);
		if (retrace_attached())
			CHILD_FAIL(47, "attached to a pool that does not exist");
		if (ag_write_all(rp[1], "s", 1) != 0)
			CHILD_FAIL(44, "pipe");
		fcntl(cp[0], F_SETFL, O_NONBLOCK);
		while (ag_now_ns() < stop && read(cp[0], &ch, 1) != 1) {
			retrace_begin((retrace_trace_id){ 0x5, 0xEA000000u + ++i });
			ag_record(rec, 0xEA000000u + i, 0);
			retrace_tracepoint(rec, AG_RECLEN);
			retrace_end();
			retrace_flush();
			ag_nap_us(1000);
		}
		exit(retrace_attached() ? 0 : 48);
	}
	close(rp[1]);
	close(cp[0]);
	ck_assert_msg(ag_read_exact(rp[0], &ch, 1, 20000) == 0, "client did not start");
	ag_nap_us(300000); /* the scenario: the agent comes up a little later */
	ag_config(&cfg, name, 64, 4096, 1.0);
	ag_open(&a, &cfg);
	ck_assert_int_eq(a.took_over, 0);
	/* The client looks for the pool once a second (client.c ATTACH_RETRY_NS);
	 * the bound is for a machine where any process may stall for seconds. */
	end = ag_deadline(EARLY_CLIENT_WAIT_S);
	while (mine == 0 && ag_now_ns() < end) {
		rt_agent_poll(&a);
		for (id = 0; id < 64; id++)
			if (a.ix.buf_trace[id] != RT_INDEX_NONE &&
			    rt_pool_buffer(&a.pool, id)->pid == (uint32_t)kid)
				mine++;
		ag_nap_us(1000);
	}
	ck_assert_msg(mine > 0, "no buffer of the early client indexed within %d s",
		      EARLY_CLIENT_WAIT_S);
	ck_assert_uint_eq(rt_agent_clients_attached(&a), 1);
	ck_assert_int_eq(ag_write_all(cp[1], "s", 1), 0);
	ag_assert_exited_ok(kid, 10, "early client");
	ag_drain(&a);
	ck_assert_uint_eq(a.st.bad_header + a.st.bad_duplicate + a.st.bad_range, 0);
	check_index_consistent(&a);
	close(rp[0]);
	close(cp[1]);
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

/* Fork the first agent of a pool and wait until it is ready. */
static pid_t start_agent_child(const struct rt_agent_config *cfg)
{
	int rdy[2];
	pid_t pid;
	char ch;
	ck_assert_int_eq(pipe(rdy), 0);
	pid = ag_fork();
	if (pid == 0) {
		close(rdy[0]);
		agent_child(cfg, rdy[1]);
	}
	close(rdy[1]);
	ck_assert_msg(ag_read_exact(rdy[0], &ch, 1, 20000) == 0 && ch == 'R', "agent not ready");
	close(rdy[0]);
	return pid;
}

/* In a child: 100 records of trace (hi, lo) left open: 2 sealed buffers waiting
 * in the client's pending batch, a third open, 5 ids in the stash. */
static void child_open_trace(uint64_t hi, uint64_t lo)
{
	uint8_t rec[AG_RECLEN];
	uint32_t k;
	retrace_begin((retrace_trace_id){ hi, lo });
	for (k = 0; k < 100; k++) {
		ag_record(rec, lo, k);
		retrace_tracepoint(rec, AG_RECLEN);
	}
}

/*
 * The agent dies while a live client has sealed buffers in its pending batch
 * and an open one. The new agent recovers the sealed ones from their headers
 * and leaves the open buffer and the stash to the writer; when the client then
 * pushes its entries, the two already recovered are echoes (not duplicates) and
 * the trace ends up whole, once.
 */
START_TEST(test_takeover_live_client)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct report r;
	pid_t agent, kid;
	int rp[2], cp[2];
	uint32_t t, bufs[8], k;
	uint64_t end;
	char name[64], ch;

	ag_pool_name(name, sizeof name, "live");
	ag_config(&cfg, name, 64, 4096, 1.0);
	agent = start_agent_child(&cfg);
	ck_assert_int_eq(pipe(rp), 0);
	ck_assert_int_eq(pipe(cp), 0);
	kid = ag_fork();
	if (kid == 0) {
		close(rp[0]);
		close(cp[1]);
		ag_child_client(name, 8, RETRACE_OK);
		child_open_trace(0x3, 0x9A9A);
		if (ag_write_all(rp[1], "1", 1) != 0 || ag_read_exact(cp[0], &ch, 1, 30000) != 0)
			CHILD_FAIL(44, "pipe");
		retrace_end();
		retrace_flush();
		if (ag_write_all(rp[1], "2", 1) != 0 || ag_read_exact(cp[0], &ch, 1, 30000) != 0)
			CHILD_FAIL(44, "pipe");
		exit(0);
	}
	close(rp[1]);
	close(cp[0]);
	ck_assert_msg(ag_read_exact(rp[0], &ch, 1, 20000) == 0 && ch == '1', "client silent");
	ag_kill9(agent);

	ag_open(&a, &cfg);
	ck_assert_int_eq(a.took_over, 1);
	t = rt_index_find(&a.ix, 0x9A9A);
	ck_assert_uint_ne(t, RT_INDEX_NONE);
	ck_assert_uint_eq(a.ix.traces[t].nbuffers, 2);
	ck_assert_uint_eq(a.st.recovered_buffers, 2);
	ck_assert_uint_eq(ag_trace_buffers(&a, t, bufs, 8), 2);
	for (k = 0; k < 2; k++) {
		ck_assert_uint_eq(a.ix.buf_recovered[bufs[k]], 1);
		ck_assert(rt_pool_buffer(&a.pool, bufs[k])->flags & RT_BUF_SEALED);
	}
	/* The open buffer and the stash stay with their live writer. */
	ck_assert_int_eq(ag_unaccounted(&a), 1 + 5);
	ck_assert_uint_eq(a.nlost, 0);
	ag_drain(&a);
	ck_assert_uint_eq(a.ix.traces[t].nbuffers, 2);
	ck_assert_uint_eq(a.st.clients_died, 0);

	ck_assert_int_eq(ag_write_all(cp[1], "f", 1), 0);
	fcntl(rp[0], F_SETFL, O_NONBLOCK);
	end = ag_deadline(20);
	while (read(rp[0], &ch, 1) != 1) {
		ck_assert_msg(ag_now_ns() < end, "client did not end its trace");
		rt_agent_poll(&a);
	}
	ag_drain(&a);
	ck_assert_uint_eq(a.st.recovered_echoes, 2);
	ck_assert_uint_eq(a.st.bad_duplicate, 0);
	ck_assert_uint_eq(a.st.bad_header, 0);
	memset(&r, 0, sizeof r);
	r.lo = 0x9A9A;
	r.hi = 0x3;
	r.nbuf = 3;
	r.records = 100;
	r.pid = (uint32_t)kid;
	ck_assert_int_eq(check_trace_whole(&a, &r, 0), 1);
	ck_assert_uint_eq(a.st.buffers_indexed, 3);

	ck_assert_int_eq(ag_write_all(cp[1], "x", 1), 0);
	ag_assert_exited_ok(kid, 20, "client");
	end = ag_deadline(10);
	do
		ag_drain(&a);
	while (ag_unaccounted(&a) != 0 && ag_now_ns() < end);
	ck_assert_int_eq(ag_unaccounted(&a), 0);
	ck_assert_uint_eq(ag_check_available(&a), 61);
	close(rp[0]);
	close(cp[1]);
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

/*
 * Agent and client both die; the next agent finds the client's buffers by their
 * headers: the sealed ones and the open one (with the bytes its frames cover)
 * are indexed, the stash goes back to the pool, and the dead client's registry
 * slot is freed at the first liveness check.
 */
START_TEST(test_takeover_dead_client)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct report r;
	pid_t agent, kid;
	int rp[2], cp[2];
	uint32_t i;
	uint64_t end;
	char name[64], ch;

	ag_pool_name(name, sizeof name, "dead2");
	ag_config(&cfg, name, 64, 4096, 1.0);
	agent = start_agent_child(&cfg);
	ck_assert_int_eq(pipe(rp), 0);
	ck_assert_int_eq(pipe(cp), 0);
	kid = ag_fork();
	if (kid == 0) {
		close(rp[0]);
		close(cp[1]);
		ag_child_client(name, 8, RETRACE_OK);
		child_open_trace(0x4, 0x9B9B);
		if (ag_write_all(rp[1], "1", 1) != 0)
			CHILD_FAIL(44, "pipe");
		(void)!read(cp[0], &ch, 1);
		CHILD_FAIL(46, "was not killed");
	}
	close(rp[1]);
	close(cp[0]);
	ck_assert_msg(ag_read_exact(rp[0], &ch, 1, 20000) == 0 && ch == '1', "client silent");
	ag_kill9(agent);
	ag_kill9(kid);

	ag_open(&a, &cfg);
	ck_assert_int_eq(a.took_over, 1);
	ck_assert_uint_eq(a.st.recovered_buffers, 3);
	memset(&r, 0, sizeof r);
	r.lo = 0x9B9B;
	r.hi = 0x4;
	r.nbuf = 3;
	r.records = 100;
	r.pid = (uint32_t)kid;
	ck_assert_int_eq(check_trace_whole(&a, &r, 0), 1);
	ck_assert_uint_eq(a.st.corrupt_frames, 0);
	end = ag_deadline(10);
	while (a.st.clients_died == 0 && ag_now_ns() < end)
		rt_agent_poll(&a);
	ck_assert_uint_eq(a.st.clients_died, 1);
	for (i = 0; i < a.pool.hdr->registry_slots; i++)
		ck_assert_uint_ne(a.pool.registry[i].pid, (uint32_t)kid);
	ag_drain(&a);
	ck_assert_int_eq(check_trace_whole(&a, &r, 0), 1);
	ck_assert_int_eq(ag_unaccounted(&a), 0);
	ck_assert_uint_eq(ag_check_available(&a), 61);
	close(rp[0]);
	close(cp[1]);
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

/*
 * A client thread that exits hands its stash back to the available queue
 * (client.c return_spares) without clearing the STASHED stamp. When the
 * process is later killed, reap_client() takes every header stamped STASHED
 * with its pid and slot for a stashed buffer and recycles it: the ids already
 * in the available queue are pushed a second time, so two writers can be
 * handed the same buffer. Expected: the available queue holds each id once.
 */
static void *thread_writer(void *arg)
{
	struct report r;
	(void)arg;
	child_trace(&r, 0x5, 0x7A7A, 10, 0);
	return NULL;
}

START_TEST(test_dead_client_returned_spares)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	pid_t kid;
	int rp[2], cp[2];
	uint32_t id, stamped_free = 0, freeb;
	uint64_t end;
	char name[64], ch;

	ag_pool_name(name, sizeof name, "spares");
	ag_config(&cfg, name, 64, 4096, 1.0);
	ag_open(&a, &cfg);
	ck_assert_int_eq(pipe(rp), 0);
	ck_assert_int_eq(pipe(cp), 0);
	kid = ag_fork();
	if (kid == 0) {
		pthread_t th;
		close(rp[0]);
		close(cp[1]);
		ag_child_client(name, 8, RETRACE_OK);
		if (pthread_create(&th, NULL, thread_writer, NULL) != 0 || pthread_join(th, NULL) != 0)
			CHILD_FAIL(49, "thread");
		if (ag_write_all(rp[1], "1", 1) != 0)
			CHILD_FAIL(44, "pipe");
		(void)!read(cp[0], &ch, 1);
		CHILD_FAIL(46, "was not killed");
	}
	close(rp[1]);
	close(cp[0]);
	fcntl(rp[0], F_SETFL, O_NONBLOCK);
	end = ag_deadline(20);
	while (read(rp[0], &ch, 1) != 1) {
		ck_assert_msg(ag_now_ns() < end, "client silent");
		rt_agent_poll(&a);
	}
	ag_drain(&a);
	ck_assert_uint_ne(rt_index_find(&a.ix, 0x7A7A), RT_INDEX_NONE);
	/* The thread took 8, used 1 and gave 7 back at its exit. */
	ck_assert_uint_eq(rt_agent_free_buffers(&a), 63);
	for (id = 0; id < 64; id++) {
		const struct rt_buffer_header *h = rt_pool_buffer(&a.pool, id);
		if (h->magic == RT_BUF_MAGIC && h->pid == (uint32_t)kid && (h->flags & RT_BUF_STASHED))
			stamped_free++;
	}
	ck_assert_uint_eq(stamped_free, 0); /* returned spares carry no stamp */

	ag_kill9(kid);
	end = ag_deadline(10);
	while (a.st.clients_died == 0 && ag_now_ns() < end)
		rt_agent_poll(&a);
	ck_assert_uint_eq(a.st.clients_died, 1);
	ag_drain(&a);
	freeb = rt_agent_free_buffers(&a);
	ck_assert_msg(freeb == 63 && a.st.dead_buffers_freed == 0,
		      "after the client died the pool counts %u free buffers of 64 (1 indexed), "
		      "dead_buffers_freed %llu: buffers already free were freed again",
		      freeb, (unsigned long long)a.st.dead_buffers_freed);
	ck_assert_uint_eq(ag_check_available(&a), 63);
	close(rp[0]);
	close(cp[1]);
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

/*
 * At a takeover, an id that is in no queue and has a blank header is "lost"
 * (a client popped it and has not stamped it yet) and is looked at again after
 * a grace second. If in that second the client stamps it, writes, and the
 * buffer is indexed, evicted and recycled, it is blank again, sits in the
 * available queue, and reclaim_lost() pushes it a second time: it does not
 * check that the id went back to the pool meanwhile. Expected: once.
 */
START_TEST(test_takeover_lost_buffer_cycled)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct rt_pool view;
	struct rt_pool_attach_opts ao;
	pid_t agent;
	uint32_t x, bytes, freeb;
	uint64_t end;
	char name[64], err[256];

	ag_pool_name(name, sizeof name, "lost");
	ag_config(&cfg, name, 64, 4096, 1.0);
	agent = start_agent_child(&cfg);
	memset(&ao, 0, sizeof ao);
	ao.name = name;
	ck_assert_int_eq(rt_pool_attach(&ao, &view, err, sizeof err), RETRACE_OK);
	x = ag_take_buffer(&view); /* a writer popped x and was preempted */
	ag_kill9(agent);

	ag_open(&a, &cfg);
	ck_assert_int_eq(a.took_over, 1);
	ck_assert_uint_eq(a.nlost, 1);
	ck_assert_uint_eq(a.lost[0], x);
	ck_assert_uint_eq(rt_agent_free_buffers(&a), 63);
	/* The writer goes on: stamps x, fills it, seals and pushes it. */
	bytes = ag_fill_buffer(&view, x, 1, 0xC1C1, 0, 0, 5, 1);
	ag_push_complete(&view, 0xC1C1, x, bytes);
	rt_pool_detach(&view);
	ag_drain(&a);
	ck_assert_uint_ne(rt_index_find(&a.ix, 0xC1C1), RT_INDEX_NONE);
	/* Evicted and recycled within the grace second. */
	a.evict_limit = 0;
	ag_drain(&a);
	a.evict_limit = 64;
	ck_assert_uint_eq(a.ix.st.evicted_buffers, 1);
	ck_assert_uint_eq(rt_agent_free_buffers(&a), 64);
	/* The grace second passes. */
	end = ag_deadline(10);
	while (a.nlost != 0 && ag_now_ns() < end) {
		rt_agent_poll(&a);
		ag_nap_us(2000);
	}
	ck_assert_uint_eq(a.nlost, 0);
	ag_drain(&a);
	freeb = rt_agent_free_buffers(&a);
	ck_assert_msg(freeb == 64 && a.st.lost_buffers_reclaimed == 0,
		      "buffer %u was recycled, then reclaimed as lost: %u free of 64, "
		      "lost_buffers_reclaimed %llu", x, freeb,
		      (unsigned long long)a.st.lost_buffers_reclaimed);
	ck_assert_uint_eq(ag_check_available(&a), 64);
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

/*
 * W3C forbids only the all-zero trace id, and the client records any other:
 * a traceparent whose low 64 bits are zero (hi != 0) is parsed, begun and
 * written. Its buffers then carry trace_lo 0, which the agent refuses as
 * "zero trace" (bad_zero_trace) without returning the buffer to the pool. Any
 * request carrying such an id costs the pool its buffers for good. Expected:
 * each buffer is indexed or returned (free + indexed = total once the client
 * is gone).
 */
START_TEST(test_trace_id_with_zero_low_half)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	pid_t kid;
	uint64_t end;
	char name[64];

	ag_pool_name(name, sizeof name, "zlo");
	ag_config(&cfg, name, 64, 4096, 1.0);
	ag_open(&a, &cfg);
	kid = ag_fork();
	if (kid == 0) {
		struct retrace_wire_context in;
		uint8_t rec[AG_RECLEN];
		uint32_t k;
		ag_child_client(name, 8, RETRACE_OK);
		if (retrace_parse_context("00-00000000000000010000000000000000-00000000000000aa-01",
					  NULL, &in) != RETRACE_OK)
			exit(0); /* refused at the door: nothing to leak */
		if (retrace_begin(in.trace_id) != 1)
			exit(0); /* not recorded: nothing to leak */
		for (k = 0; k < 50; k++) {
			ag_record(rec, 0, k);
			retrace_tracepoint(rec, AG_RECLEN);
		}
		retrace_end();
		retrace_flush();
		exit(0);
	}
	end = ag_deadline(20);
	while (ag_wait_exit(kid, 0.001) == -1) {
		ck_assert_msg(ag_now_ns() < end, "client did not exit");
		rt_agent_poll(&a);
	}
	end = ag_deadline(5);
	do
		ag_drain(&a);
	while ((ag_unaccounted(&a) != 0 || rt_agent_clients_attached(&a) != 0) &&
	       ag_now_ns() < end);
	ck_assert_msg(ag_unaccounted(&a) == 0,
		      "%lld buffers of a trace with id {1, 0} are neither indexed nor free "
		      "(bad_zero_trace %llu, indexed %llu, free %u of 64)",
		      (long long)ag_unaccounted(&a), (unsigned long long)a.st.bad_zero_trace,
		      (unsigned long long)a.ix.st.buffers, rt_agent_free_buffers(&a));
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

/*
 * A trace triggered before the agent died is still triggered after the
 * takeover. Pins live only in the dead agent's memory: buffer headers carry no
 * trace state, rebuild_from_headers() puts every recovered trace in the LRU,
 * and the triggered trace becomes evictable like any other, contrary to
 * "nothing triggered is lost silently" (DESIGN.md).
 */
START_TEST(test_takeover_keeps_pins)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	pid_t agent, kid;
	int rdy[2], note[2];
	uint32_t t, u;
	char name[64], ch;

	ag_pool_name(name, sizeof name, "pins");
	ag_config(&cfg, name, 64, 4096, 1.0);
	ck_assert_int_eq(pipe(rdy), 0);
	ck_assert_int_eq(pipe(note), 0);
	agent = ag_fork();
	if (agent == 0) {
		close(rdy[0]);
		close(note[0]);
		agent_child_notify(&cfg, rdy[1], note[1], 1, 3);
	}
	close(rdy[1]);
	close(note[1]);
	ck_assert_msg(ag_read_exact(rdy[0], &ch, 1, 20000) == 0 && ch == 'R', "agent not ready");
	kid = ag_fork();
	if (kid == 0) {
		struct report r;
		ag_child_client(name, 8, RETRACE_OK);
		child_trace(&r, 0x6, 0x7777, 50, 55); /* triggered, 2 buffers */
		child_trace(&r, 0x6, 0x8888, 10, 0);  /* not triggered, 1 buffer */
		exit(0);
	}
	ag_assert_exited_ok(kid, 20, "client");
	ck_assert_msg(ag_read_exact(note[0], &ch, 1, 20000) == 0 && ch == 'P',
		      "the first agent never pinned the trace");
	ag_kill9(agent);
	close(rdy[0]);
	close(note[0]);

	ag_open(&a, &cfg);
	ck_assert_int_eq(a.took_over, 1);
	t = rt_index_find(&a.ix, 0x7777);
	u = rt_index_find(&a.ix, 0x8888);
	ck_assert_uint_ne(t, RT_INDEX_NONE);
	ck_assert_uint_ne(u, RT_INDEX_NONE);
	ck_assert_uint_eq(a.ix.traces[t].nbuffers, 2);
	ck_assert_uint_eq(a.ix.traces[u].state, RT_TRACE_UNTRIGGERED);
	ck_assert_msg(a.ix.traces[t].state != RT_TRACE_UNTRIGGERED,
		      "trace 0x7777, triggered (id 55) before the agent died, is untriggered "
		      "after the takeover and will be evicted like any other");
	/* Under pressure, the untriggered one goes, the triggered one stays. */
	a.evict_limit = 0;
	ag_drain(&a);
	ck_assert_uint_eq(rt_index_find(&a.ix, 0x8888), RT_INDEX_NONE);
	ck_assert_uint_ne(rt_index_find(&a.ix, 0x7777), RT_INDEX_NONE);
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

/* Fake writer: trace lo of nbuf full buffers, entries pushed as one batch. */
static void fake_trace(struct rt_pool *p, uint64_t lo, uint32_t nbuf)
{
	struct rt_complete_entry e[16] = {{0}};
	uint32_t k;
	ck_assert_uint_le(nbuf, 16);
	for (k = 0; k < nbuf; k++) {
		uint32_t id = ag_take_buffer(p);
		e[k].trace_lo = lo;
		e[k].buffer_id = id;
		e[k].bytes = ag_fill_buffer(p, id, 0x9, lo, k, k * AG_PER_BUF, AG_PER_BUF, 1);
	}
	ck_assert(rt_complete_push_batch(p->ring[RT_Q_COMPLETE],
					 RT_POOL_SLOTS(p, RT_Q_COMPLETE, rt_complete_entry), e, nbuf));
}

/*
 * Triggered data past the pinned share is abandoned whole trace by whole
 * trace, counted, and its buffers go back to the pool; what stays is whole.
 * The cut is a shared threshold on the consistent priority: the trigger id's
 * overload level went up until the data fit, and exactly the traces that level
 * does not admit are gone (the same cut another agent holding these traces
 * would make), so at least the two traces over the share, maybe more.
 */
START_TEST(test_pinned_share_abandons_whole_traces)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct rt_trigger_entry g;
	struct rt_report_class *c;
	char name[64], status[16384], want[64];
	uint32_t i, present = 0, t, gone;

	ag_pool_name(name, sizeof name, "share");
	ag_config(&cfg, name, 64, 4096, 1.0);
	cfg.pinned_share = 0.25; /* 16 buffers */
	ag_open(&a, &cfg);
	ck_assert_uint_eq(a.pinned_limit, 16);
	for (i = 0; i < 6; i++) {
		g = ag_trig(0xAB00 + i, 77, 1, 0); /* pinned before its data comes */
		ag_push_triggers(&a.pool, &g, 1);
		ag_drain(&a);
		fake_trace(&a.pool, 0xAB00 + i, 4);
		ag_drain(&a);
		ck_assert_uint_le(a.ix.st.pinned_buffers, 16);
	}
	ck_assert_uint_eq(a.st.triggered_traces, 6);
	gone = (uint32_t)a.st.abandoned_traces;
	ck_assert_uint_ge(gone, 2);
	ck_assert_uint_eq(a.st.abandoned_buffers, 4 * gone);
	c = rt_report_class_of(&a.rep, 77);
	ck_assert_uint_ge(c->level, 1);
	for (i = 0; i < 6; i++) {
		t = rt_index_find(&a.ix, 0xAB00 + i);
		ck_assert_msg((t != RT_INDEX_NONE) == rt_report_admits(c, 0xAB00 + i),
			      "trace %x is %s but its priority is %s the level-%u threshold",
			      0xAB00 + i, t != RT_INDEX_NONE ? "kept" : "gone",
			      rt_report_admits(c, 0xAB00 + i) ? "above" : "below", c->level);
		if (t == RT_INDEX_NONE)
			continue;
		present++;
		ck_assert_uint_eq(a.ix.traces[t].nbuffers, 4); /* whole, or gone */
		ck_assert_uint_ne(a.ix.traces[t].state, RT_TRACE_UNTRIGGERED);
	}
	ck_assert_uint_eq(present, 6 - gone);
	ck_assert_uint_eq(a.ix.st.pinned_buffers, 4 * present);
	ck_assert_uint_eq(a.ix.st.evicted_traces, 0); /* abandoned, not evicted */
	ck_assert_int_eq(ag_unaccounted(&a), 0);
	ck_assert_uint_eq(ag_check_available(&a), 64 - 4 * present);
	rt_agent_status(&a, 1, status, sizeof status);
	snprintf(want, sizeof want, "\"abandoned\":%u", gone);
	ck_assert_msg(strstr(status, want) != NULL, "status: %s", status);
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

/* Breadcrumbs: kept once per (trace, agent), at most RT_INDEX_MAX_CRUMBS per
 * trace (the rest counted); a crumb alone makes an evictable entry. */
START_TEST(test_breadcrumbs)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	char name[64], status[16384];
	uint32_t i, t;

	ag_pool_name(name, sizeof name, "crumbs");
	ag_config(&cfg, name, 64, 4096, 1.0);
	ag_open(&a, &cfg);
	fake_trace(&a.pool, 0xCC, 2);
	for (i = 0; i < 3; i++)
		ag_push_crumb(&a.pool, 0xCC, 7); /* the same hop thrice */
	for (i = 0; i < RT_INDEX_MAX_CRUMBS; i++)
		ag_push_crumb(&a.pool, 0xCC, 100 + i); /* 16 more distinct: one too many */
	ag_push_crumb(&a.pool, 0xDD, 9);      /* a trace with no data here */
	ag_drain(&a);
	t = rt_index_find(&a.ix, 0xCC);
	ck_assert_uint_ne(t, RT_INDEX_NONE);
	ck_assert_uint_eq(a.ix.traces[t].nbuffers, 2);
	ck_assert_uint_eq(a.ix.traces[t].ncrumbs, RT_INDEX_MAX_CRUMBS);
	ck_assert_uint_eq(a.ix.traces[t].crumbs[0], 7);
	ck_assert_uint_eq(a.st.breadcrumbs, 3 + RT_INDEX_MAX_CRUMBS + 1);
	ck_assert_uint_eq(a.st.bad_breadcrumbs, 0);
	ck_assert_uint_eq(a.ix.st.crumbs, RT_INDEX_MAX_CRUMBS + 1);
	ck_assert_uint_eq(a.ix.st.crumbs_dropped, 1);
	t = rt_index_find(&a.ix, 0xDD);
	ck_assert_uint_ne(t, RT_INDEX_NONE);
	ck_assert_uint_eq(a.ix.traces[t].nbuffers, 0);
	ck_assert_uint_eq(a.ix.traces[t].state, RT_TRACE_UNTRIGGERED);
	rt_agent_status(&a, 1, status, sizeof status);
	ck_assert_msg(strstr(status, "\"crumbs_dropped\":1") != NULL, "status: %s", status);
	/* Eviction frees buffers: it takes 0xCC (the older) and stops there; the
	 * crumb-only entry holds none and may stay. */
	a.evict_limit = 0;
	ag_drain(&a);
	ck_assert_uint_eq(rt_index_find(&a.ix, 0xCC), RT_INDEX_NONE);
	ck_assert_uint_eq(a.ix.st.evicted_buffers, 2);
	ck_assert_uint_eq(a.ix.st.crumbs, a.ix.st.traces); /* 0xDD's one, if it stayed */
	ck_assert_int_eq(ag_unaccounted(&a), 0);
	ck_assert_uint_eq(rt_agent_free_buffers(&a), 64);
	rt_agent_close(&a);
	ck_assert(!ag_shm_exists(name));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_core");
	TCase *tc = tcase_create("core");
	/* This suite checks the books buffer by buffer (buffers per trace, stash
	 * counts, which header holds what), which is the one-trace-per-buffer
	 * layout: its client children keep it (the variable is inherited).
	 * tests/agent/test_segment_index.c covers traces sharing a buffer. */
	setenv("RETRACE_ONE_TRACE_PER_BUFFER", "1", 1);
	rt_log_level = RT_LOG_WARN;
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_coherent_eviction);
	tcase_add_test(tc, test_client_killed_mid_trace);
	tcase_add_test(tc, test_agent_killed_and_restarted);
	tcase_add_test(tc, test_takeover_keeps_free_buffers);
	tcase_add_test(tc, test_malformed_entries);
	tcase_add_test(tc, test_index_full_does_not_leak);
	tcase_add_test(tc, test_second_agent_refused);
	tcase_add_test(tc, test_client_before_agent);
	tcase_add_test(tc, test_pinned_share_abandons_whole_traces);
	tcase_add_test(tc, test_breadcrumbs);
	tcase_add_test(tc, test_takeover_live_client);
	tcase_add_test(tc, test_takeover_dead_client);
	tcase_add_test(tc, test_dead_client_returned_spares);
	tcase_add_test(tc, test_takeover_lost_buffer_cycled);
	tcase_add_test(tc, test_trace_id_with_zero_low_half);
	tcase_add_test(tc, test_takeover_keeps_pins);
	suite_add_tcase(s, tc);
	return ag_run_suite(s);
}
