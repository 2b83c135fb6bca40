/*
 * bench/adaptive/bench_adaptive_real.c — adaptive spans on real processes
 * (issue 15's evaluation, `case=real`).
 *
 * How it works: the real retrace-coordinator (--adaptive on), five real
 * retrace-agents and five writer processes linking the real libretrace
 * (tests/coordinator/cluster.c), one per service of the shop tree that
 * bench_adaptive simulates (30 span sites: frontend fans out to cart, catalog
 * and payment, catalog calls inventory). A request is real RPC nesting: the
 * five writers run at once (one thread of ours drives each through cl_run);
 * inside a "call X" CLIENT span the caller sends its retrace_serialize context
 * down a pipe to X's writer, whose entry span continues the trace
 * (retrace_deserialize, a remote parent), writes its subtree, and answers with
 * retrace_serialize_response, which the caller hands to
 * retrace_deserialize_response (breadcrumbs down the tree) before it ends the
 * call span. A calm site spins its self time (tens of µs); the culprit's
 * injected delay is a nanosleep. The machine's own scheduling noise (the
 * cores are shared; a woken process waits its turn) is part of the data: it
 * lands in every span, most of all in the calls' own time (the pipe wake-ups
 * of the RPC). The frontend fires a trigger per request, so the coordinator
 * collects every trace and its learner sees the decoded self times.
 *
 * Per run: each site's median self time 10..40 µs (log-uniform) and log-sd
 * 0.2..0.5, drawn per run; one culprit site (taken in turn over the 29
 * non-root sites) gets, with probability 0.3, an extra exponential delay of
 * mean CULPRIT_MS. Closed loop: after each batch of BATCH requests we wait for
 * the coordinator's learner cycle and read `retrace policy --json`: the
 * culprit's probability (over time), its rank (top-1/top-5 at the end), the
 * mean probability over the sites (enabled_mean_p: an entry site counted as
 * p(call) + (1 - p(call)) p(entry), as the client applies it; policy_mean_p:
 * the plain mean of the policy). The writers' tracer counters give the
 * share of span records written (recorded / started) over the second half of
 * the run, the agents' `bytes_indexed` (+ evicted) the pool bytes per request
 * over the same requests. Same run, before the adaptive runs: an all-on
 * baseline (--adaptive off) with the same requests. horizon_ratio = all-on
 * bytes per request / adaptive's (at a fixed pool the horizon is pool bytes
 * over bytes per second).
 *
 * The shift case: the culprit moves to another site halfway through a run
 * twice as long; the new culprit's probability is counted from the shift.
 *
 * RETRACE_BENCH_QUICK=1: 2 runs of 100 requests, a baseline of 50, one short
 * shift run.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "retrace/retrace.h"
#include "retrace/tracer.h"

#define NSVC 5
#define NSITES 30
#define HI 0xada97ea1ada97ea1ull
#define TRIGGER 101
#define BATCH 25
#define CULPRIT_MS 10.0
#define CULPRIT_RATE 0.3

static const char *const svc_name[NSVC] = {"frontend", "cart", "catalog", "inventory",
					   "payment"};

/* The shop tree of bench_adaptive.c (same operations and parents). */
static const struct {
	int svc;
	const char *op;
	int parent;
} site[NSITES] = {
	{0, "GET /checkout", -1},  {0, "auth.verify", 0},     {0, "session.load", 0},
	{0, "call cart", 0},       {1, "GET /cart", 3},       {1, "redis.get", 4},
	{1, "cart.price", 4},      {1, "redis.set", 4},       {0, "call catalog", 0},
	{2, "GET /items", 8},      {2, "cache.lookup", 9},    {2, "db.query items", 9},
	{2, "call inventory", 9},  {3, "GET /stock", 12},     {3, "db.query stock", 13},
	{3, "stock.reserve", 13},  {3, "db.commit", 13},      {2, "items.render", 9},
	{0, "call payment", 0},    {4, "POST /charge", 18},   {4, "fraud.score", 19},
	{4, "fraud.rules", 20},    {4, "gateway.authorize", 19}, {4, "ledger.write", 19},
	{4, "receipt.email", 19},  {0, "template.render", 0}, {0, "log.audit", 0},
	{2, "recommend", 9},       {1, "coupon.apply", 4},    {0, "metrics.flush", 0},
};
static const int entry_of[NSVC] = {0, 4, 9, 13, 19};

static int kind_of(int i)
{
	if (!strncmp(site[i].op, "call ", 5))
		return RETRACE_SPAN_CLIENT;
	if (i == entry_of[site[i].svc])
		return RETRACE_SPAN_SERVER;
	return RETRACE_SPAN_INTERNAL;
}

/* Shared with the writers (mapped before cl_start, so every fork has it). */
struct plan {
	uint32_t self_us[NSITES];
};
static struct plan *plan;
static int req_pipe[NSVC][2], resp_pipe[NSVC][2];

/* ------------------------------------------------------ the writers ---- */

static void nap_us(uint32_t us)
{
	struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void spin_us(uint32_t us)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < (long)us);
}

static int read_bounded(int fd, char *buf, size_t cap)
{
	struct pollfd p = {fd, POLLIN, 0};
	ssize_t n;
	if (poll(&p, 1, 20000) != 1)
		return -1;
	n = read(fd, buf, cap - 1);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return 0;
}

static int write_subtree(int i);

/* Inside call span i: the callee's writer continues the trace. */
static int rpc(int callee)
{
	char tp[64], ts[600], msg[700], resp[64];
	int s = site[callee].svc;
	if (retrace_serialize(tp, sizeof tp, ts, sizeof ts, NULL) != RETRACE_OK)
		return -1;
	snprintf(msg, sizeof msg, "%s\n%s", tp, ts);
	if (write(req_pipe[s][1], msg, strlen(msg)) < 0 ||
	    read_bounded(resp_pipe[s][0], resp, sizeof resp) != 0)
		return -1;
	if (resp[0])
		retrace_deserialize_response(resp);
	return 0;
}

static int write_subtree(int i)
{
	int rc = 0;
	retrace_span_start(site[i].op, kind_of(i));
	retrace_attr_int("items", i);
	if (plan->self_us[i] < 500)
		spin_us(plan->self_us[i]);
	else
		nap_us(plan->self_us[i]);
	for (int k = i + 1; k < NSITES && rc == 0; k++) {
		if (site[k].parent != i)
			continue;
		rc = site[k].svc != site[i].svc ? rpc(k) : write_subtree(k);
	}
	retrace_span_end();
	return rc;
}

/* In writer h: one request's share. ids[0] = spans started, ids[1] = dropped
 * (this thread's counters so far). */
static int serve(int h, retrace_trace_id id, struct cl_run_io *io)
{
	struct retrace_tracer_stats st;
	int rc = 0;
	retrace_set_service_name(svc_name[h]);
	if (h == 0) {
		retrace_begin(id);
		rc = write_subtree(entry_of[0]);
		retrace_end();
		retrace_trigger(id, TRIGGER, NULL, 0);
	} else {
		char msg[700], *nl, resp[64] = "";
		struct retrace_wire_context wc;
		if (read_bounded(req_pipe[h][0], msg, sizeof msg) != 0)
			return -1;
		if ((nl = strchr(msg, '\n')))
			*nl++ = 0;
		retrace_deserialize(msg, nl && *nl ? nl : NULL, &wc);
		retrace_begin(id);
		rc = write_subtree(entry_of[h]);
		if (retrace_serialize_response(resp, sizeof resp) < 0)
			resp[0] = 0;
		retrace_end();
		if (write(resp_pipe[h][1], resp, strlen(resp) + 1) < 0)
			rc = -1;
	}
	retrace_tracer_stats(&st);
	io->ids[0] = st.spans_started;
	io->ids[1] = st.spans_dropped;
	return rc;
}

/* ------------------------------------------------------- the driver ---- */

struct job {
	struct cluster *c;
	int h;
	uint64_t lo;
	struct cl_run_io io;
	int rc;
};

static void *job_main(void *arg)
{
	struct job *j = arg;
	memset(&j->io, 0, sizeof j->io);
	j->rc = cl_run(j->c, j->h, HI, j->lo, &j->io);
	return NULL;
}

/* One request on all five writers; started/dropped spans so far (summed). */
static int request(struct cluster *c, uint64_t lo, uint64_t *started, uint64_t *dropped)
{
	struct job j[NSVC];
	pthread_t th[NSVC];
	int rc = 0;
	for (int h = NSVC - 1; h >= 0; h--) {
		j[h] = (struct job){c, h, lo, {0}, 0};
		if (h == 0)
			job_main(&j[0]);
		else if (pthread_create(&th[h], NULL, job_main, &j[h]) != 0)
			return -1;
	}
	*started = *dropped = 0;
	for (int h = 0; h < NSVC; h++) {
		if (h)
			pthread_join(th[h], NULL);
		rc |= j[h].rc;
		*started += j[h].io.ids[0];
		*dropped += j[h].io.ids[1];
	}
	return rc;
}

/* xorshift64* and the draws of a run */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double unit(void)
{
	uint64_t x = rng_state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return ((x * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}
static double normal(void)
{
	double u = unit(), v = unit();
	return sqrt(-2.0 * log(u > 0 ? u : 1e-300)) * cos(2 * M_PI * v);
}

struct run_params {
	double median_us[NSITES], logsd[NSITES];
};

static void draw_run(struct run_params *rp)
{
	for (int i = 0; i < NSITES; i++) {
		rp->median_us[i] = 10.0 * pow(4.0, unit());
		rp->logsd[i] = 0.2 + 0.3 * unit();
	}
}

static void draw_request(const struct run_params *rp, int culprit)
{
	for (int i = 0; i < NSITES; i++) {
		double us = rp->median_us[i] * exp(rp->logsd[i] * normal());
		if (i == culprit && unit() < CULPRIT_RATE)
			us += -log(1.0 - unit()) * CULPRIT_MS * 1000.0;
		plan->self_us[i] = (uint32_t)us;
	}
}

/* policy --json: culprit's probability and rank, mean probability over the
 * shop's sites (a site not yet seen counts 1: it is recorded). */
struct policy_view {
	double p[NSITES];
	int rank[NSITES];
	int ok;
};

static void read_policy(struct cluster *c, struct policy_view *v)
{
	char cmd[512], *out = NULL;
	size_t cap = 0;
	FILE *f;
	memset(v, 0, sizeof *v);
	for (int i = 0; i < NSITES; i++) {
		v->p[i] = 1.0;
		v->rank[i] = 999;
	}
	snprintf(cmd, sizeof cmd, "%s policy --json --coordinator %s", CLI_BIN, c->coord_url);
	if (!(f = popen(cmd, "r")))
		return;
	if (getdelim(&out, &cap, 0, f) > 0) {
		for (int i = 0; i < NSITES; i++) {
			char want[128], *at, *p;
			snprintf(want, sizeof want, "\"operation\":\"%s\"", site[i].op);
			if (!(at = strstr(out, want)))
				continue;
			if ((p = strstr(at, "\"probability\":")))
				v->p[i] = strtod(p + 14, NULL);
			if ((p = strstr(at, "\"rank\":")))
				v->rank[i] = atoi(p + 7);
		}
		v->ok = 1;
	}
	pclose(f);
	free(out);
}

static long long wait_figure(struct cluster *c, const char *section, const char *key,
			     long long want, double seconds)
{
	long long v = -1;
	for (int i = 0; i < (int)(seconds * 20); i++) {
		if ((v = cl_coord_figure(c, section, key)) >= want)
			break;
		nap_us(50000);
	}
	return v;
}

/* Pool bytes collected so far (the slices of every trace: what the agents'
 * pools held for it) and the traces they came with. */
static double pool_bytes(struct cluster *c, double *traces)
{
	*traces = (double)cl_coord_figure(c, "collection", "traces_coherent");
	return (double)cl_coord_figure(c, "collection", "slice_bytes");
}

static void start(struct cluster *c, bool adaptive)
{
	int k = 0;
	cl_coord_args[k++] = "--adaptive";
	cl_coord_args[k++] = adaptive ? "on" : "off";
	cl_coord_args[k++] = "--adaptive-batch";
	cl_coord_args[k++] = "25";
	cl_coord_args[k++] = "--adaptive-window";
	cl_coord_args[k++] = "5";
	cl_coord_args[k++] = "--settle";
	cl_coord_args[k++] = "0.2";
	cl_coord_args[k] = NULL;
	cl_run_fn = serve;
	if (cl_start(c, NSVC, 1024) != 0) {
		fprintf(stderr, "bench_adaptive_real: cluster did not start\n");
		exit(1);
	}
}

struct run_out {
	double p_at[64];  /* culprit p after each batch (of the culprit counted) */
	int batches;
	int final_rank, top1, top5;
	int to_p90;       /* requests until p >= 0.9 (from the culprit's start), -1 never */
	double mean_p, policy_mean_p, records_share, bytes_per_request, old_p_end;
	int traces_ok;
	char top[160]; /* the three first-ranked sites at the end */
};

/* One run: `n` requests, culprit a (b from request `shift` on when shift > 0). */
static void run(int ca, int cb, int n, int shift, struct run_out *o, uint64_t base)
{
	struct cluster c;
	struct run_params rp;
	struct policy_view v;
	uint64_t s0 = 0, d0 = 0, s = 0, d = 0;
	double b0 = 0, b1, t0 = 0, t1;
	int measure_from = shift ? shift + (n - shift) / 2 : n / 2;
	memset(o, 0, sizeof *o);
	o->to_p90 = -1;
	draw_run(&rp);
	start(&c, true);
	for (int r = 0; r < n; r++) {
		int culprit = shift && r >= shift ? cb : ca;
		draw_request(&rp, culprit);
		if (r == measure_from) {
			wait_figure(&c, "adaptive", "traces", r - 3, 20);
			b0 = pool_bytes(&c, &t0);
			s0 = s;
			d0 = d;
		}
		if (request(&c, base + (uint64_t)r, &s, &d) != 0)
			fprintf(stderr, "bench_adaptive_real: request %d failed\n", r);
		if (r % BATCH == BATCH - 1) {
			int from = shift ? shift : 0;
			/* keep the loop closed: the learner sees each batch before the next */
			wait_figure(&c, "adaptive", "traces", r + 1 - 3, 20);
			wait_figure(&c, "adaptive", "cycles", (r + 1) / BATCH, 10);
			read_policy(&c, &v);
			if (r >= from && o->batches < 64)
				o->p_at[o->batches++] = v.p[culprit];
			if (r >= from && o->to_p90 < 0 && v.p[culprit] >= 0.9)
				o->to_p90 = r + 1 - from;
		}
	}
	wait_figure(&c, "adaptive", "traces", n - 3, 20);
	b1 = pool_bytes(&c, &t1);
	read_policy(&c, &v);
	{
		int culprit = shift ? cb : ca;
		o->final_rank = v.rank[culprit];
		o->top1 = v.rank[culprit] == 1;
		o->top5 = v.rank[culprit] <= 5;
		o->old_p_end = shift ? v.p[ca] : 0;
	}
	/* The share on per site: its probability, except that an entry span is
	 * dropped only under a dropped call (rt='s "call dropped" flag) and kept by
	 * rule under a kept one: p(call) + (1 - p(call)) p(entry). */
	for (int i = 0; i < NSITES; i++) {
		double p = v.p[i];
		int up = site[i].parent;
		o->policy_mean_p += p / NSITES;
		if (i == entry_of[site[i].svc] && up >= 0 && kind_of(up) == RETRACE_SPAN_CLIENT)
			p = v.p[up] + (1.0 - v.p[up]) * p;
		o->mean_p += p / NSITES;
	}
	for (int k = 1, len = 0; k <= 3; k++)
		for (int i = 0; i < NSITES; i++)
			if (v.rank[i] == k)
				len += snprintf(o->top + len, sizeof o->top - (size_t)len, "%s%s",
						k > 1 ? "," : "", site[i].op);
	o->records_share = s > s0 ? 1.0 - (double)(d - d0) / (double)(s - s0 + d - d0) : 1.0;
	o->bytes_per_request = t1 > t0 ? (b1 - b0) / (t1 - t0) : 0;
	o->traces_ok = (int)cl_coord_figure(&c, "collection", "traces_coherent");
	cl_stop(&c);
}

static double baseline_bytes(int n, int culprit, uint64_t base, int *coherent)
{
	struct cluster c;
	struct run_params rp;
	uint64_t s, d;
	double b1, t1;
	draw_run(&rp);
	start(&c, false);
	for (int r = 0; r < n; r++) {
		draw_request(&rp, culprit);
		request(&c, base + (uint64_t)r, &s, &d);
	}
	wait_figure(&c, "collection", "traces_coherent", n - 3, 20);
	b1 = pool_bytes(&c, &t1);
	*coherent = (int)t1;
	cl_stop(&c);
	return t1 > 0 ? b1 / t1 : 0;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void load_avg(char *buf, size_t n)
{
	double l[3] = {0, 0, 0};
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3)
			l[0] = l[1] = l[2] = 0;
		fclose(f);
	}
	snprintf(buf, n, "%.1f/%.1f/%.1f", l[0], l[1], l[2]);
}

static void print_curve(const struct run_out *o, char *buf, size_t n)
{
	size_t k = 0;
	buf[0] = 0;
	for (int i = 0; i < o->batches && k + 8 < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%.2f", i ? "," : "", o->p_at[i]);
}

int main(void)
{
	bool quick = getenv("RETRACE_BENCH_QUICK") != NULL;
	int runs = quick ? 2 : 20, n = quick ? 100 : 300, nbase = quick ? 50 : 150;
	int shift_runs = quick ? 1 : 3, n_shift = quick ? 150 : 600;
	double base_bpr, sum_mean_p = 0, sum_policy_p = 0, sum_rec = 0, sum_bpr = 0, to90[64], p300 = 0;
	int top1 = 0, top5 = 0, within = 0, coherent_base = 0;
	char load0[64], load1[64], curve[512];
	struct run_out o;

	signal(SIGPIPE, SIG_IGN);
	setenv("RETRACE_QUIET", "1", 0);
	plan = mmap(NULL, sizeof *plan, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (plan == MAP_FAILED)
		return 1;
	for (int h = 0; h < NSVC; h++)
		if (pipe(req_pipe[h]) != 0 || pipe(resp_pipe[h]) != 0)
			return 1;
	load_avg(load0, sizeof load0);

	base_bpr = baseline_bytes(nbase, 21, 1u << 24, &coherent_base);
	for (int r = 0; r < runs; r++) {
		int culprit = 1 + (r * 7) % (NSITES - 1); /* every non-root site in turn */
		run(culprit, 0, n, 0, &o, ((uint64_t)r + 2) << 24);
		print_curve(&o, curve, sizeof curve);
		printf("bench adaptive case=real run=%d culprit=%s/%s requests=%d batch=%d "
		       "culprit_p=%s final_rank=%d requests_to_p90=%d enabled_mean_p=%.3f "
		       "records_share=%.3f bytes_per_request=%.0f traces_coherent=%d top3=%s\n",
		       r, svc_name[site[culprit].svc], site[culprit].op, n, BATCH, curve,
		       o.final_rank, o.to_p90, o.mean_p, o.records_share, o.bytes_per_request,
		       o.traces_ok, o.top);
		fflush(stdout);
		top1 += o.top1;
		top5 += o.top5;
		within += o.to_p90 >= 0 && o.to_p90 <= 300;
		to90[r] = o.to_p90 < 0 ? 1e9 : o.to_p90;
		p300 += o.batches ? o.p_at[(300 / BATCH < o.batches ? 300 / BATCH : o.batches) - 1] : 0;
		sum_mean_p += o.mean_p;
		sum_policy_p += o.policy_mean_p;
		sum_rec += o.records_share;
		sum_bpr += o.bytes_per_request;
	}
	qsort(to90, (size_t)runs, sizeof *to90, dbl_cmp);
	load_avg(load1, sizeof load1);
	{
		double med = to90[runs / 2], bpr = sum_bpr / runs;
		char medbuf[32];
		if (med >= 1e9)
			snprintf(medbuf, sizeof medbuf, "never");
		else
			snprintf(medbuf, sizeof medbuf, "%.0f", med);
		printf("bench adaptive case=real processes=real hosts=%d sites=%d runs=%d "
		       "requests=%d batch=%d culprit_ms=%.1f culprit_rate=%.1f top1_accuracy=%.3f "
		       "top5_accuracy=%.3f culprit_p_at_300=%.3f p90_within_300=%.3f "
		       "requests_to_p90=%s enabled_mean_p=%.3f policy_mean_p=%.3f records_share=%.3f "
		       "bytes_per_request=%.0f baseline=all_on baseline_requests=%d "
		       "baseline_records_share=1.000 baseline_bytes_per_request=%.0f "
		       "baseline_traces_coherent=%d horizon_ratio=%.2f load=%s..%s\n",
		       NSVC, NSITES, runs, n, BATCH, CULPRIT_MS, CULPRIT_RATE,
		       (double)top1 / runs, (double)top5 / runs, p300 / runs,
		       (double)within / runs, medbuf, sum_mean_p / runs, sum_policy_p / runs,
		       sum_rec / runs, bpr, nbase,
		       base_bpr, coherent_base, bpr > 0 ? base_bpr / bpr : 0.0, load0, load1);
		fflush(stdout);
	}
	{
		int s_top1 = 0, s_top5 = 0, s_within = 0;
		double s_old = 0, s_mean = 0, s_rec = 0;
		for (int r = 0; r < shift_runs; r++) {
			int a = 1 + (r * 11) % (NSITES - 1), b = 1 + (r * 11 + 13) % (NSITES - 1);
			run(a, b, n_shift, n_shift / 2, &o, ((uint64_t)r + 40) << 24);
			print_curve(&o, curve, sizeof curve);
			printf("bench adaptive case=real_shift run=%d culprit=%s/%s then=%s/%s "
			       "shift_at=%d new_culprit_p=%s final_rank=%d requests_to_p90=%d "
			       "old_culprit_p_end=%.2f enabled_mean_p=%.3f records_share=%.3f\n",
			       r, svc_name[site[a].svc], site[a].op, svc_name[site[b].svc], site[b].op,
			       n_shift / 2, curve, o.final_rank, o.to_p90, o.old_p_end, o.mean_p,
			       o.records_share);
			fflush(stdout);
			s_top1 += o.top1;
			s_top5 += o.top5;
			s_within += o.to_p90 >= 0 && o.to_p90 <= 300;
			s_old += o.old_p_end;
			s_mean += o.mean_p;
			s_rec += o.records_share;
		}
		load_avg(load1, sizeof load1);
		printf("bench adaptive case=real_shift processes=real runs=%d requests=%d shift_at=%d "
		       "top1_accuracy=%.3f top5_accuracy=%.3f p90_within_300=%.3f "
		       "old_culprit_p_end=%.3f enabled_mean_p=%.3f records_share=%.3f load=%s\n",
		       shift_runs, n_shift, n_shift / 2, (double)s_top1 / shift_runs,
		       (double)s_top5 / shift_runs, (double)s_within / shift_runs, s_old / shift_runs,
		       s_mean / shift_runs, s_rec / shift_runs, load1);
	}
	munmap(plan, sizeof *plan);
	return 0;
}
