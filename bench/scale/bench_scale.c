/*
 * bench/scale/bench_scale.c — the store part of bench/scale: collected traces
 * written into SQLite (the same-run baseline) and into ClickHouse, same
 * workload, same run.
 *
 * Workload: T traces of 3 agents each; every agent's part is a real encoded
 * SLICE message (tests/coordinator/evgen.c) holding SPANS spans, each with two
 * attributes and a templated log, so the bytes are what the coordinator stores.
 * Messages differ per trace (their own ids and times), so ClickHouse's
 * compression sees no repeated rows. All messages are built before the clock
 * starts.
 *
 * Two mixes per backend, the coordinator's calls in its order:
 *   ingest      per trace: 3 put_slice + put_trace, INGEST_BATCH traces per
 *               transaction (8192 spans, the Collector's batch size)
 *   coordinator the same plus what the coordinator adds per trace: put_trigger
 *               before, done_trigger and set_selection after (every trace kept
 *               and scored, as without a --select-budget), TURN_BATCH traces
 *               per transaction (one coordinator loop turn at most)
 * Figures: traces/s, spans/s, bytes/s of slices, the wall time per trace, and
 * the writer's own CPU per trace (user+sys of this process: the ClickHouse
 * server's CPU is its own process, on the other core).
 *
 * Prints `bench scale store=NAME mix=MIX traces=.. spans_per_s=.. ...` and a
 * ratio line against SQLite. RETRACE_BENCH_QUICK=1: fewer traces. Without the
 * clickhouse-server package: the SQLite lines and `bench scale
 * store=clickhouse skipped=not-installed`.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "coord_load.h"
#include "evgen.h"
#include "store.h"
#include "store/chserver.h"

#define AGENTS 3
#define SPANS 10     /* spans per agent's slice */
/* Traces per transaction: ingest as the OpenTelemetry Collector's batch
 * processor sends (8192 spans); the coordinator mix as one coordinator loop turn
 * admits at most (32 slices: COORD_IN_COLLECT), ~10 traces of 3 slices. */
#define INGEST_BATCH (8192 / (AGENTS * SPANS))
#define TURN_BATCH 10
/* The coordinator mix on fewer traces (ClickHouse does tens of turns a second). */
#define TURN_TRACES(quick) ((quick) ? 300 : 1000)
#define HI 0x00c0ffee00000000ull

struct workload {
	int traces;
	struct rt_wire_buf *msg; /* traces * AGENTS encoded SLICE messages */
	uint32_t *buffers;
	uint64_t bytes;
};

static uint64_t now_ns(int clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

/* One agent's part of trace i (the part-th of its AGENTS): SPANS spans, each
 * with attributes and a log. */
static void build_part(struct eg *g, int i, uint32_t agent, int part)
{
	static const char *const service[AGENTS] = { "frontend", "cart", "payment" };
	struct eg_stream *s = eg_stream(g, agent, 100 + agent, 1);
	char host[32], name[64];
	snprintf(host, sizeof host, "host-%u", agent);
	eg_resource(s, service[part], host);
	eg_template(s, "charged %d items for user %s");
	for (int k = 0; k < SPANS; k++) {
		uint64_t id = ((uint64_t)agent << 32) | (uint64_t)(k + 1), t = EG_T(1000 * k + i);
		struct eg_arg args[2] = { EG_I(k + i % 7), EG_S("user-4711") };
		snprintf(name, sizeof name, "%s op %d", service[part], k % 4);
		eg_span_start(s, id, k ? id - 1 : 0, 2, t, name);
		eg_attr(s, id, "http.status_code", EG_I(200 + (i + k) % 3));
		eg_attr(s, id, "request.bytes", EG_U((uint64_t)(i * 31 + k * 7) % 5000));
		eg_log(s, id, t + EG_T(10), 2, eg_template_id("charged %d items for user %s"), args,
		       2);
		eg_span_end(s, id, t + EG_T(500 + (i + k) % 50), 1, 0, NULL);
	}
}

static int build(struct workload *w, int traces)
{
	w->traces = traces;
	w->msg = calloc((size_t)traces * AGENTS, sizeof *w->msg);
	w->buffers = calloc((size_t)traces * AGENTS, sizeof *w->buffers);
	if (!w->msg || !w->buffers)
		return -1;
	for (int i = 0; i < traces; i++) {
		struct eg g;
		eg_init(&g, HI, 0x1000 + (uint64_t)i, 8192 - 64);
		for (uint32_t a = 1; a <= AGENTS; a++)
			eg_agent(&g, a, 2000000000ull + a, 1000ull * a, 0);
		for (uint32_t a = 1; a <= AGENTS; a++)
			build_part(&g, i, a, (int)a - 1);
		eg_finish(&g);
		for (uint32_t a = 1; a <= AGENTS; a++) {
			struct rt_wire_buf *m = &w->msg[i * AGENTS + (int)a - 1];
			if (eg_slice_msg(&g, a, NULL, 0, m) != 0)
				return -1;
			w->bytes += m->len;
			w->buffers[i * AGENTS + (int)a - 1] = 1;
		}
		eg_free(&g);
	}
	return 0;
}

/* The coordinator part's workload: trace i's parts on agents i, i+1, i+2 of
 * `agents` (so every agent answers for a third of the traces it is asked about). */
static int build_coord(struct cl_workload *w, int traces, int agents)
{
	memset(w, 0, sizeof *w);
	w->traces = traces;
	w->agents = agents;
	w->hi = HI;
	w->lo0 = 0x100000;
	w->msg = calloc((size_t)traces * CL_PARTS, sizeof *w->msg);
	w->agent = calloc((size_t)traces * CL_PARTS, sizeof *w->agent);
	w->buffers = calloc((size_t)traces * CL_PARTS, sizeof *w->buffers);
	w->payload = calloc((size_t)traces * CL_PARTS, sizeof *w->payload);
	if (!w->msg || !w->agent || !w->buffers || !w->payload)
		return -1;
	for (int i = 0; i < traces; i++) {
		struct eg g;
		eg_init(&g, HI, w->lo0 + (uint64_t)i, 8192 - 64);
		for (int k = 0; k < CL_PARTS; k++) {
			uint32_t a = (uint32_t)((i + k) % agents) + 1;
			w->agent[i * CL_PARTS + k] = a;
			eg_agent(&g, a, 2000000000ull + a, 1000ull * a, 0);
		}
		for (int k = 0; k < CL_PARTS; k++)
			build_part(&g, i, w->agent[i * CL_PARTS + k], k);
		eg_finish(&g);
		for (int k = 0; k < CL_PARTS; k++) {
			struct rt_wire_buf *m = &w->msg[i * CL_PARTS + k];
			struct rt_wire_msg d;
			if (eg_slice_msg(&g, w->agent[i * CL_PARTS + k], NULL, 0, m) != 0 ||
			    rt_wire_decode(m->data, m->len, &d) != 0)
				return -1;
			w->buffers[i * CL_PARTS + k] = d.slice.buffer_count;
			for (uint32_t b = 0; b < d.slice.buffer_count; b++)
				w->payload[i * CL_PARTS + k] += d.slice.buffers[b].len;
			rt_wire_msg_free(&d);
		}
		eg_free(&g);
	}
	return 0;
}

static void free_coord(struct cl_workload *w)
{
	for (int i = 0; w->msg && i < w->traces * CL_PARTS; i++)
		rt_wire_buf_free(&w->msg[i]);
	free(w->msg);
	free(w->agent);
	free(w->buffers);
	free(w->payload);
}

static void trace_row(struct rt_store_trace *t, int i, uint64_t t0)
{
	memset(t, 0, sizeof *t);
	t->trace_hi = HI;
	t->trace_lo = 0x1000 + (uint64_t)i;
	t->group_id = t->trace_lo;
	t->trigger_count = 1;
	t->trigger_ids[0] = 7;
	t->agent_count = AGENTS;
	for (uint32_t a = 0; a < AGENTS; a++)
		t->agents[a] = a + 1;
	t->coherent = 1;
	t->first_ns = t0;
	t->last_ns = t0 + 1000000;
	t->slices = AGENTS;
	t->triggered_ns = t0 + 2000000;
	t->closed_ns = t0 + 3000000 + (uint64_t)i;
	t->traversal_ns = 1500000;
}

struct result {
	double wall_s, cpu_s, spans;
	double server_cpu_s;   /* the ClickHouse server's CPU over the run (0: SQLite) */
	int ok;
};

/* ClickHouse's own count of the milliseconds it held INSERTs back because a
 * partition had too many parts to merge (parts_to_delay_insert). */
static long long delayed_ms(const struct chserver *srv)
{
	char *reply = NULL;
	long long v = 0;
	if (srv && chs_sql(srv, "SELECT sum(value) FROM system.events WHERE event = "
				"'DelayedInsertsMilliseconds'", &reply) == 0)
		v = atoll(reply);
	free(reply);
	return v;
}

static int write_all(struct rt_store *s, const struct workload *w, int coordinator_mix,
		     int ntraces, struct result *r)
{
	const int batch = coordinator_mix ? TURN_BATCH : INGEST_BATCH;
	uint64_t t0 = now_ns(CLOCK_REALTIME), w0 = now_ns(CLOCK_MONOTONIC), c0 = cpu_ns();
	static const char trig_msg[96] = "a TRIGGER message of about this size";
	for (int i = 0; i < ntraces; i += batch) {
		int end = i + batch < ntraces ? i + batch : ntraces;
		if (rt_store_begin(s))
			return -1;
		for (int k = i; k < end; k++) {
			struct rt_store_trace t;
			trace_row(&t, k, t0);
			if (coordinator_mix &&
			    rt_store_put_trigger(s, 3, (uint64_t)k + 1, t0, trig_msg, sizeof trig_msg) != 0)
				return -1;
			for (uint32_t a = 1; a <= AGENTS; a++) {
				const struct rt_wire_buf *m = &w->msg[k * AGENTS + (int)a - 1];
				struct rt_store_slice sl = {
					.trace_hi = HI, .trace_lo = t.trace_lo, .agent_id = a,
					.trigger_id = 7, .slice_seq = 1, .received_ns = t0 + (uint64_t)k,
					.buffers = w->buffers[k * AGENTS + (int)a - 1],
					.bytes = m->len, .first_ns = t0, .last_ns = t0 + 1000000,
					.msg = m->data, .msg_len = m->len,
				};
				t.bytes += m->len;
				if (rt_store_put_slice(s, &sl) != 0)
					return -1;
			}
			if (rt_store_put_trace(s, &t) != 0)
				return -1;
			if (coordinator_mix) {
				t.has_selection = 1;
				t.score = 0.5;
				t.weight = 1;
				snprintf(t.group, sizeof t.group, "frontend GET /checkout");
				if (rt_store_done_trigger(s, 3, (uint64_t)k + 1) != 0 ||
				    rt_store_set_selection(s, &t) != 0)
					return -1;
			}
		}
		if (rt_store_commit(s))
			return -1;
	}
	r->wall_s = (double)(now_ns(CLOCK_MONOTONIC) - w0) / 1e9;
	r->cpu_s = (double)(cpu_ns() - c0) / 1e9;
	r->ok = 1;
	return 0;
}

static int run(const char *name, const char *locator, const struct workload *w, int mix,
	       int ntraces, struct result *r, const struct chserver *srv)
{
	long long delayed0 = delayed_ms(srv);
	double server0 = srv ? cl_pid_cpu_s(srv->pid) : 0;
	uint64_t bytes = 0;
	struct rt_store_options o = { .path = locator, .background_checkpoint = 1 };
	struct rt_store *s = NULL;
	double spans = (double)ntraces * AGENTS * SPANS;
	memset(r, 0, sizeof *r);
	if (rt_store_open(&s, &o) != 0) {
		fprintf(stderr, "bench_scale: open %s: %s\n", locator, rt_store_errmsg(NULL));
		return -1;
	}
	for (int i = 0; i < ntraces * AGENTS; i++)
		bytes += w->msg[i].len;
	r->spans = spans;
	if (write_all(s, w, mix, ntraces, r) != 0) {
		fprintf(stderr, "bench_scale: %s: %s\n", name, rt_store_errmsg(s));
		rt_store_close(s);
		return -1;
	}
	rt_store_close(s);
	/* The server's CPU up to the close: its background merges after that are
	 * not counted (they run whether or not anyone waits for them). */
	r->server_cpu_s = srv ? cl_pid_cpu_s(srv->pid) - server0 : 0;
	printf("bench scale store=%s mix=%s traces=%d spans=%.0f slice_bytes=%" PRIu64
	       " batch=%d traces_per_s=%.0f spans_per_s=%.0f mb_per_s=%.2f us_per_trace=%.1f"
	       " cpu_us_per_trace=%.1f server_cpu_us_per_trace=%.1f spans_per_core_s=%.0f"
	       " server_delayed_ms=%lld\n",
	       name, mix ? "coordinator" : "ingest", ntraces, spans, bytes,
	       mix ? TURN_BATCH : INGEST_BATCH,
	       ntraces / r->wall_s, spans / r->wall_s, (double)bytes / r->wall_s / 1e6,
	       r->wall_s * 1e6 / ntraces, r->cpu_s * 1e6 / ntraces,
	       r->server_cpu_s * 1e6 / ntraces, spans / (r->cpu_s + r->server_cpu_s),
	       delayed_ms(srv) - delayed0);
	fflush(stdout);
	return 0;
}

/*
 * The coordinator part: the same traces through real coordinators, three ways
 * in the same run:
 *   turn   one coordinator, a commit per loop turn and 32 collector contexts:
 *          the path before group commit (--commit-interval 0
 *          --collector-contexts 32), the baseline;
 *   group  one coordinator, group commit (--commit-interval GROUP_S, 512
 *          contexts);
 *   group  two coordinators, trace ids split by rendezvous hashing, each its
 *          own store (and its own CPU when the machine has two).
 * `locs` holds three store locators per run (one per coordinator slot).
 */
#define GROUP_S 0.25
#define COORD_AGENTS 12
#define COORD_TRACES(quick) ((quick) ? 300 : 3000)

/* What the machine could give a run: its cores over the CPU the run spent
 * per trace (this process and the store server), in traces per second. */
static double machine_bound(const struct cl_result *res, long ncores)
{
	double cpu = res->proc_cpu_s + res->server_cpu_s;
	return cpu > 0 ? (double)ncores * (double)res->closed / cpu : 0;
}

static int coord_part(const char *name, char locs[3][2][320], const struct cl_workload *w,
		      int server_pid, double *out_ratio_group, double *out_ratio_two)
{
	static const struct { int n, contexts; double interval; const char *mode; } runs[3] = {
		{ 1, 32, 0, "turn" }, { 1, 0, GROUP_S, "group" }, { 2, 0, GROUP_S, "group" }
	};
	long ncores = sysconf(_SC_NPROCESSORS_ONLN);
	struct cl_result res[3];
	double tps[3];
	for (int r = 0; r < 3; r++) {
		struct cl_run run = { .coordinators = runs[r].n, .commit_interval = runs[r].interval,
				      .collector_contexts = runs[r].contexts,
				      .pin = runs[r].n > 1 && ncores > 1, .server_pid = server_pid };
		struct cl_result *x = &res[r];
		run.store[0] = locs[r][0];
		run.store[1] = locs[r][1];
		if (cl_load_run(w, &run, x) != 0) {
			fprintf(stderr, "bench_scale: coordinator run %s/%d failed\n", name, r);
			return -1;
		}
		tps[r] = x->closed / x->wall_s;
		/* loop_util: each loop thread's CPU over the run's time (1.0: that
		 * member is bound by its loop); machine_util: all CPU spent (this
		 * process and the store server) over the machine's cores. */
		printf("bench scale part=coordinator store=%s coordinators=%d commit=%s"
		       " commit_interval_ms=%.0f collector_contexts=%d traces=%d agents=%d closed=%" PRIu64
		       " coherent=%" PRIu64 " per_coordinator=%" PRIu64 "/%" PRIu64
		       " traces_per_s=%.0f spans_per_s=%.0f commits=%" PRIu64 " slices_per_commit=%.1f"
		       " cpu_us_per_trace=%.0f server_cpu_us_per_trace=%.0f loop_util=%.2f/%.2f"
		       " machine_util=%.2f\n",
		       name, runs[r].n, runs[r].mode, runs[r].interval * 1e3,
		       runs[r].contexts ? runs[r].contexts : 512, w->traces, w->agents, x->closed,
		       x->coherent, x->per_coord[0], x->per_coord[1], tps[r],
		       tps[r] * CL_PARTS * SPANS, x->commits,
		       x->commits ? (double)x->slices / (double)x->commits : 0.0,
		       x->proc_cpu_s * 1e6 / (double)x->closed,
		       x->server_cpu_s * 1e6 / (double)x->closed, x->loop_cpu_s[0] / x->wall_s,
		       x->loop_cpu_s[1] / x->wall_s,
		       (x->proc_cpu_s + x->server_cpu_s) / x->wall_s / (double)ncores);
		fflush(stdout);
	}
	*out_ratio_group = tps[1] / tps[0];
	*out_ratio_two = tps[2] / tps[1];
	printf("bench scale part=coordinator store=%s figure=group_commit baseline=turn"
	       " traces_per_s=%.0f baseline_traces_per_s=%.0f ratio=%.2f\n",
	       name, tps[1], tps[0], tps[1] / tps[0]);
	/* machine_bound_ratio: the most two members could reach over one here,
	 * were they given every cycle of every core at the CPU per trace they
	 * spent; below 1.8 the target cannot be shown on this machine (the agents,
	 * the load and the store share the cores the members would need). */
	printf("bench scale part=coordinator store=%s figure=two_coordinators baseline=one"
	       " traces_per_s=%.0f baseline_traces_per_s=%.0f ratio=%.2f target_ratio=1.8 met=%s"
	       " cores=%ld machine_bound_ratio=%.2f reachable_here=%s\n",
	       name, tps[2], tps[1], tps[2] / tps[1], tps[2] / tps[1] >= 1.8 ? "yes" : "no", ncores,
	       machine_bound(&res[2], ncores) / tps[1],
	       machine_bound(&res[2], ncores) / tps[1] >= 1.8 ? "yes" : "no");
	fflush(stdout);
	return 0;
}

int main(void)
{
	int quick = getenv("RETRACE_BENCH_QUICK") != NULL;
	int traces = quick ? 1092 : 8190; /* whole ingest batches */
	const char *tmp = getenv("TMPDIR");
	char dir[256], path[2][320], why[4096], ch[2][256];
	struct workload w = { 0 };
	struct chserver srv;
	struct result sq[2], chr[2];
	int have_ch;
	/* RETRACE_BENCH_SCALE_PARTS=store or =coordinator runs one part alone. */
	const char *parts = getenv("RETRACE_BENCH_SCALE_PARTS");
	int do_store = !parts || strstr(parts, "store"), do_coord = !parts || strstr(parts, "coord");
	struct cl_workload cw = { 0 };
	char cloc[3][2][320];
	double ratio_group, ratio_two;

	snprintf(dir, sizeof dir, "%s/rt-bench-scale-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir) || build(&w, traces) != 0 ||
	    (do_coord && build_coord(&cw, COORD_TRACES(quick), COORD_AGENTS) != 0)) {
		fprintf(stderr, "bench_scale: cannot set up\n");
		return 1;
	}
	for (int mix = 0; mix < 2; mix++) {
		snprintf(path[mix], sizeof path[mix], "%s/store-%d.db", dir, mix);
		if (do_store && run("sqlite", path[mix], &w, mix, mix ? TURN_TRACES(quick) : traces, &sq[mix],
			NULL) != 0)
			return 1;
	}
	for (int r = 0; r < 3; r++)
		for (int k = 0; k < 2; k++)
			snprintf(cloc[r][k], sizeof cloc[r][k], "%s/coord-%d-%d.db", dir, r, k);
	if (do_coord && coord_part("sqlite", cloc, &cw, 0, &ratio_group, &ratio_two) != 0)
		return 1;
	have_ch = chs_binary() != NULL;
	if (!have_ch) {
		printf("bench scale store=clickhouse skipped=not-installed\n");
	} else if (chs_start(&srv, NULL, why, sizeof why) != 0) {
		fprintf(stderr, "bench_scale: clickhouse-server: %s\n", why);
		return 1;
	} else {
		for (int mix = 0; mix < 2; mix++) {
			snprintf(ch[mix], sizeof ch[mix], "%s/bench%d", srv.url, mix);
			if (do_store && run("clickhouse", ch[mix], &w, mix,
					    mix ? TURN_TRACES(quick) : traces, &chr[mix], &srv) != 0) {
				chs_stop(&srv);
				return 1;
			}
		}
		if (do_coord) {
			char chloc[3][2][320];
			for (int r = 0; r < 3; r++)
				for (int k = 0; k < 2; k++)
					snprintf(chloc[r][k], sizeof chloc[r][k], "%s/coord%d_%d", srv.url,
						 r, k);
			if (coord_part("clickhouse", chloc, &cw, srv.pid, &ratio_group, &ratio_two) != 0) {
				fprintf(stderr, "bench_scale: ClickHouse held inserts back %lld ms in all "
					"(too many parts to merge)\n", delayed_ms(&srv));
				chs_stop(&srv);
				return 1;
			}
		}
		chs_stop(&srv);
		for (int mix = 0; do_store && mix < 2; mix++)
			/* per_core: spans over the CPU seconds the ingest cost (our
			 * encoding and the server's work), what one core ingests */
			printf("bench scale store=clickhouse mix=%s baseline=sqlite "
			       "spans_per_s=%.0f baseline_spans_per_s=%.0f ratio=%.2f "
			       "spans_per_core_s=%.0f baseline_spans_per_core_s=%.0f "
			       "target_spans_per_s=50000 met=%s met_per_core=%s\n",
			       mix ? "coordinator" : "ingest",
			       chr[mix].spans / chr[mix].wall_s, sq[mix].spans / sq[mix].wall_s,
			       sq[mix].wall_s / chr[mix].wall_s,
			       chr[mix].spans / (chr[mix].cpu_s + chr[mix].server_cpu_s),
			       sq[mix].spans / sq[mix].cpu_s,
			       chr[mix].spans / chr[mix].wall_s >= 50000 ? "yes" : "no",
			       chr[mix].spans / (chr[mix].cpu_s + chr[mix].server_cpu_s) >= 50000
				       ? "yes"
				       : "no");
	}
	for (int i = 0; i < 2 + 6; i++) {
		static const char *const suffix[] = { "", "-wal", "-shm" };
		const char *base = i < 2 ? path[i] : cloc[(i - 2) / 2][(i - 2) % 2];
		for (int k = 0; k < 3; k++) {
			char f[700];
			snprintf(f, sizeof f, "%s%s", base, suffix[k]);
			unlink(f);
		}
	}
	free_coord(&cw);
	rmdir(dir);
	for (int i = 0; i < w.traces * AGENTS; i++)
		rt_wire_buf_free(&w.msg[i]);
	free(w.msg);
	free(w.buffers);
	return 0;
}
