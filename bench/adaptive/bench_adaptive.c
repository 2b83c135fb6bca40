/*
 * bench_adaptive — the Astraea learner in a closed-loop simulation, against
 * all-on and uniform random sampling at the same enabled share, same run.
 *
 * The simulation: a service tree of span sites (retrace-shop-like: 5 services,
 * 30 sites; and a 1000-site random tree over 20 services). Every request runs
 * every site once; a site's self time is lognormal (its own median and spread,
 * drawn per run: median 0.2-5 ms, log-sd 0.2-0.5). The culprit site also gets
 * an injected delay: with probability 0.3, an exponential delay whose mean is
 * set so the injection adds twice the variance of the noisiest calm site
 * (inject_var_ratio=2): the culprit is the site with the most variance, but
 * not by much.
 *
 * Closed loop, as the client would do it: a non-root span is recorded with the
 * probability of the last policy; the root is always recorded (pinned). A
 * dropped span's time is absorbed by its nearest recorded ancestor (its
 * children attach there), so the learner sees for each recorded span its
 * exclusive time including any dropped descendants. Batches of 50 requests;
 * after each batch one learner cycle (rt_adapt_update + rt_adapt_policy).
 *
 * Figures per case (>= 20 runs, each with its own seed and culprit; in the
 * shift case, shift_at=, the culprit moves at that request and top1/top5,
 * p90_within_300 and traces_to_p90 are about the new culprit, counted from the
 * shift, while culprit_p_at_300 and top5_accuracy_at_300 are about the first):
 *   top1/top5_accuracy  share of runs whose final ranking has the culprit
 *                       first / in the first five
 *   culprit_p_at_300    mean probability of the culprit after 300 requests
 *   p90_within_300      share of runs where it exceeded 0.9 by 300 requests
 *   traces_to_p90       median requests until it exceeded 0.9
 *   enabled_share       recorded spans / all spans over the whole run
 *   bytes_per_request   from the byte model below; horizon_ratio = all-on's
 *                       bytes per request / this policy's: at a fixed pool
 *                       size the event horizon scales with it
 * Baselines: all_on (everything recorded; ranking by each site's exclusive-time
 * variance over the run) and uniform (every non-root span kept with one
 * probability chosen so the enabled share equals the learned policy's; ranking
 * by variance of what it recorded).
 *
 * Byte model (from shm/events.h + shm/frame.h): a span costs SPAN_START (4-byte
 * frame word + 0xC1,type + 3 u64 + kind + a 16-byte name = 51 B) + SPAN_END
 * (25 B) + one attribute (37 B) = 113 B; a request also costs 64 B per service
 * it visits (buffer header share, RESOURCE event amortised).
 *
 * RETRACE_BENCH_QUICK=1 runs fewer runs per case.
 */
#include "adaptive.h"
#include "policy_table.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "retrace/retrace.h"
#include "retrace/tracer.h"
#include "shm/drain.h"
#include "agent.h"
#include "log.h"

#define SPAN_BYTES 113.0
#define REQUEST_BYTES_PER_SERVICE 64.0
#define BATCH_MAX 100
#define INJECT_PROB 0.3
#define INJECT_VAR_RATIO 2.0 /* injected variance / the largest calm site's variance */

typedef struct topo {
	size_t n, services;
	int *parent;   /* parent site index, -1 for the root (index 0) */
	uint64_t *hash;
	double *median, *sigma; /* per run */
} topo;

static void topo_alloc(topo *t, size_t n)
{
	t->n = n;
	t->parent = calloc(n, sizeof *t->parent);
	t->hash = calloc(n, sizeof *t->hash);
	t->median = calloc(n, sizeof *t->median);
	t->sigma = calloc(n, sizeof *t->sigma);
	if (!t->parent || !t->hash || !t->median || !t->sigma) {
		fprintf(stderr, "bench_adaptive: out of memory\n");
		exit(1);
	}
}

static void topo_free(topo *t)
{
	free(t->parent);
	free(t->hash);
	free(t->median);
	free(t->sigma);
}

static void set_site(topo *t, size_t i, const char *service, const char *op, int parent)
{
	t->parent[i] = parent;
	t->hash[i] = rt_adapt_site_hash(service, strlen(service), op, strlen(op));
}

static const char *shop_ops[30][2]; /* service, operation of each shop site */

/* retrace-shop: frontend fans out to cart, catalog and payment; catalog calls
 * inventory. 30 span sites. */
static void topo_shop(topo *t)
{
	static const struct {
		const char *svc, *op;
		int parent;
	} s[] = {
		{"frontend", "GET /checkout", -1}, {"frontend", "auth.verify", 0},
		{"frontend", "session.load", 0},   {"frontend", "call cart", 0},
		{"cart", "GET /cart", 3},          {"cart", "redis.get", 4},
		{"cart", "cart.price", 4},         {"cart", "redis.set", 4},
		{"frontend", "call catalog", 0},   {"catalog", "GET /items", 8},
		{"catalog", "cache.lookup", 9},    {"catalog", "db.query items", 9},
		{"catalog", "call inventory", 9},  {"inventory", "GET /stock", 12},
		{"inventory", "db.query stock", 13}, {"inventory", "stock.reserve", 13},
		{"inventory", "db.commit", 13},    {"catalog", "items.render", 9},
		{"frontend", "call payment", 0},   {"payment", "POST /charge", 18},
		{"payment", "fraud.score", 19},    {"payment", "fraud.rules", 20},
		{"payment", "gateway.authorize", 19}, {"payment", "ledger.write", 19},
		{"payment", "receipt.email", 19},  {"frontend", "template.render", 0},
		{"frontend", "log.audit", 0},      {"catalog", "recommend", 9},
		{"cart", "coupon.apply", 4},       {"frontend", "metrics.flush", 0},
	};
	size_t n = sizeof s / sizeof s[0];
	topo_alloc(t, n);
	t->services = 5;
	for (size_t i = 0; i < n; i++) {
		set_site(t, i, s[i].svc, s[i].op, s[i].parent);
		shop_ops[i][0] = s[i].svc; /* for the real-client figure */
		shop_ops[i][1] = s[i].op;
	}
}

/* A random recursive tree of n sites over 20 services (parents come first). */
static void topo_large(topo *t, size_t n, uint64_t seed)
{
	rt_adapt_rng r;
	rt_adapt_rng_seed(&r, seed);
	topo_alloc(t, n);
	t->services = 20;
	for (size_t i = 0; i < n; i++) {
		char svc[16], op[32];
		snprintf(svc, sizeof svc, "svc-%zu", i % 20);
		snprintf(op, sizeof op, "op-%zu", i);
		int parent = i == 0 ? -1 : (int)(rt_adapt_rng_next(&r) % i);
		set_site(t, i, svc, op, parent);
	}
}

/* Per run: each site's calm self-time distribution. */
static double topo_draw_sites(topo *t, rt_adapt_rng *r)
{
	double max_var = 0.0;
	for (size_t i = 0; i < t->n; i++) {
		t->median[i] = 0.2 + 4.8 * rt_adapt_rng_uniform(r); /* ms */
		t->sigma[i] = 0.2 + 0.3 * rt_adapt_rng_uniform(r);
		double s2 = t->sigma[i] * t->sigma[i];
		double var = t->median[i] * t->median[i] * exp(s2) * (exp(s2) - 1.0);
		if (var > max_var)
			max_var = var;
	}
	return max_var;
}

/* Mean of the exponential delay so that the injection adds ratio * max_var:
 * a delay Exp(m) with probability q has variance q (2 - q) m^2. */
static double inject_mean(double max_var)
{
	return sqrt(INJECT_VAR_RATIO * max_var / (INJECT_PROB * (2.0 - INJECT_PROB)));
}

enum mode { MODE_ADAPTIVE, MODE_ALL_ON, MODE_UNIFORM };

/* What a recorded span tells the learner. OBSERVE_SELF: its own self time
 * (needs the client to carry the time of dropped children to the span they
 * attach to: not in the ABI yet). OBSERVE_ABSORBED: what the ABI gives today,
 * its exclusive time with the dropped descendants' time folded in. */
enum observe { OBSERVE_SELF, OBSERVE_ABSORBED };

typedef struct run_cfg {
	enum mode mode;
	enum observe observe;
	double uniform_p;        /* MODE_UNIFORM: keep probability of non-root spans */
	size_t traces;
	size_t culprit, culprit2; /* culprit2 takes over at shift_at (if shift_at) */
	size_t shift_at;
	uint64_t seed;
	uint32_t draws;
	size_t batch;            /* requests per learner cycle */
} run_cfg;

typedef struct run_out {
	bool top1, top5;           /* final ranking vs the final culprit */
	bool top5_at_300;
	double p_at_300;
	long traces_to_p90;        /* after the start (or the shift); -1 never */
	double old_culprit_p_end;  /* shift case */
	double enabled_share;
	double culprit_recorded; /* share of the culprit's spans recorded */
	double bytes_per_request;
	double cycle_ms_sum, cycle_ms_max, update_ms_sum, policy_ms_sum, scan_ms_sum;
	size_t cycles;
} run_out;

typedef struct work {
	double *self, *absorbed;
	bool *recorded;
	rt_adapt_obs *obs;
	size_t obs_cap;
	/* run-long Welford per site (baselines' rankings) */
	double *w_mean, *w_m2;
	uint64_t *w_n;
	size_t *order;
} work;

static void work_alloc(work *w, size_t n)
{
	w->self = calloc(n, sizeof *w->self);
	w->absorbed = calloc(n, sizeof *w->absorbed);
	w->recorded = calloc(n, sizeof *w->recorded);
	w->obs_cap = n * BATCH_MAX;
	w->obs = calloc(w->obs_cap, sizeof *w->obs);
	w->w_mean = calloc(n, sizeof *w->w_mean);
	w->w_m2 = calloc(n, sizeof *w->w_m2);
	w->w_n = calloc(n, sizeof *w->w_n);
	w->order = calloc(n, sizeof *w->order);
	if (!w->self || !w->absorbed || !w->recorded || !w->obs || !w->w_mean || !w->w_m2 ||
	    !w->w_n || !w->order) {
		fprintf(stderr, "bench_adaptive: out of memory\n");
		exit(1);
	}
}

static void work_free(work *w)
{
	free(w->self);
	free(w->absorbed);
	free(w->recorded);
	free(w->obs);
	free(w->w_mean);
	free(w->w_m2);
	free(w->w_n);
	free(w->order);
}

/* Thread CPU time: the machine is shared with other work, and the figure is
 * what a cycle costs the coordinator, not how long others kept the core. */
static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const double *g_var; /* qsort context for rank_by_variance */

static int var_desc(const void *a, const void *b)
{
	double x = g_var[*(const size_t *)a], y = g_var[*(const size_t *)b];
	return x > y ? -1 : (x < y);
}

/* Rank of the culprit (1-based) among sites by run-long observed variance. */
static size_t rank_by_variance(work *w, size_t n, size_t culprit)
{
	for (size_t i = 0; i < n; i++) {
		w->w_m2[i] = w->w_n[i] > 1 ? w->w_m2[i] / (double)(w->w_n[i] - 1) : 0.0;
		w->order[i] = i;
	}
	g_var = w->w_m2;
	qsort(w->order, n, sizeof *w->order, var_desc);
	for (size_t r = 0; r < n; r++)
		if (w->order[r] == culprit)
			return r + 1;
	return n + 1;
}

/* The same, without disturbing the run-long accumulators. */
static size_t rank_by_variance_at(work *w, size_t n, size_t culprit)
{
	double *saved = malloc(n * sizeof *saved);
	if (!saved)
		exit(1);
	memcpy(saved, w->w_m2, n * sizeof *saved);
	size_t rank = rank_by_variance(w, n, culprit);
	memcpy(w->w_m2, saved, n * sizeof *saved);
	free(saved);
	return rank;
}

static size_t learner_rank(const rt_adapt_learner *l, const topo *t, size_t culprit)
{
	rt_adapt_site_info info;
	for (size_t i = 0; i < rt_adapt_site_count(l); i++) {
		rt_adapt_site_get(l, i, &info);
		if (info.site == t->hash[culprit])
			return info.rank;
	}
	return t->n + 1;
}

/* One request: self times, the keep decisions, what each recorded span shows. */
static size_t simulate_request(const topo *t, work *w, rt_adapt_rng *r, size_t culprit,
			       double delay_mean, const double *keep_p, enum observe observe,
			       size_t *k_obs)
{
	size_t n = t->n, kept = 0;
	for (size_t i = 0; i < n; i++) {
		double x = t->median[i] * exp(t->sigma[i] * rt_adapt_rng_normal(r));
		if (i == culprit && rt_adapt_rng_uniform(r) < INJECT_PROB)
			x += -delay_mean * log(rt_adapt_rng_uniform(r));
		w->self[i] = x;
		w->absorbed[i] = x;
		w->recorded[i] = i == 0 || rt_adapt_rng_uniform(r) < keep_p[i];
	}
	/* Children come after parents: fold dropped spans into their parent. */
	for (size_t i = n - 1; i > 0; i--)
		if (!w->recorded[i])
			w->absorbed[t->parent[i]] += w->absorbed[i];
	for (size_t i = 0; i < n; i++) {
		if (!w->recorded[i])
			continue;
		kept++;
		double x = observe == OBSERVE_SELF ? w->self[i] : w->absorbed[i];
		if (k_obs) {
			w->obs[*k_obs].site = t->hash[i];
			w->obs[*k_obs].latency = x;
			(*k_obs)++;
		}
		uint64_t c = ++w->w_n[i];
		double d = x - w->w_mean[i];
		w->w_mean[i] += d / (double)c;
		w->w_m2[i] += d * (x - w->w_mean[i]);
	}
	return kept;
}

static void run_one(topo *t, const run_cfg *rc, run_out *out)
{
	size_t n = t->n;
	memset(out, 0, sizeof *out);
	out->traces_to_p90 = -1;
	rt_adapt_rng r;
	rt_adapt_rng_seed(&r, rc->seed);
	double delay_mean = inject_mean(topo_draw_sites(t, &r));
	work w;
	work_alloc(&w, n);
	double *keep_p = malloc(n * sizeof *keep_p);
	rt_adapt_learner *l = NULL;
	if (rc->mode == MODE_ADAPTIVE) {
		rt_adapt_config cfg;
		rt_adapt_config_default(&cfg);
		cfg.seed = rc->seed ^ 0xabcdefull;
		cfg.draws = rc->draws;
		l = rt_adapt_create(&cfg, n, NULL);
		if (!l) {
			fprintf(stderr, "bench_adaptive: learner\n");
			exit(1);
		}
		for (size_t i = 0; i < n; i++)
			rt_adapt_site_add(l, t->hash[i]);
		rt_adapt_pin(l, t->hash[0], true); /* roots are never dropped */
	}
	for (size_t i = 0; i < n; i++)
		keep_p[i] = rc->mode == MODE_UNIFORM ? rc->uniform_p : 1.0;

	size_t kept_total = 0, k_obs = 0, culprit_kept = 0;
	size_t culprit = rc->culprit;
	for (size_t tr = 1; tr <= rc->traces; tr++) {
		if (rc->shift_at && tr == rc->shift_at + 1)
			culprit = rc->culprit2;
		kept_total += simulate_request(t, &w, &r, culprit, delay_mean, keep_p, rc->observe,
					       l ? &k_obs : NULL);
		culprit_kept += w.recorded[culprit];
		if (l && tr % rc->batch == 0) {
			double t0 = now_ms();
			rt_adapt_update(l, w.obs, k_obs);
			double t1 = now_ms();
			rt_adapt_policy(l);
			double t2 = now_ms();
			/* same-run baseline: one read of the batch with a site lookup each */
			double sink = 0.0;
			for (size_t k = 0; k < k_obs; k++)
				sink += rt_adapt_probability(l, w.obs[k].site) * w.obs[k].latency;
			double t3 = now_ms();
			if (sink < 0)
				printf("impossible\n");
			out->update_ms_sum += t1 - t0;
			out->policy_ms_sum += t2 - t1;
			out->cycle_ms_sum += t2 - t0;
			out->scan_ms_sum += t3 - t2;
			if (t2 - t0 > out->cycle_ms_max)
				out->cycle_ms_max = t2 - t0;
			out->cycles++;
			k_obs = 0;
			for (size_t i = 0; i < n; i++)
				keep_p[i] = rt_adapt_probability(l, t->hash[i]);
			double pc = rt_adapt_probability(l, t->hash[culprit]);
			size_t since = rc->shift_at && tr > rc->shift_at ? rc->shift_at : 0;
			if (out->traces_to_p90 < 0 && pc > 0.9 && (!rc->shift_at || tr > rc->shift_at))
				out->traces_to_p90 = (long)(tr - since);
			if (tr <= 300) { /* the policy in force at request 300 */
				out->p_at_300 = pc;
				out->top5_at_300 = learner_rank(l, t, culprit) <= 5;
			}
		}
		if (!l && tr == 300)
			out->top5_at_300 = rank_by_variance_at(&w, n, culprit) <= 5;
	}
	size_t rank;
	if (l) {
		rank = learner_rank(l, t, culprit);
		if (rc->shift_at)
			out->old_culprit_p_end = rt_adapt_probability(l, t->hash[rc->culprit]);
	} else {
		rank = rank_by_variance(&w, n, culprit);
	}
	out->top1 = rank == 1;
	out->top5 = rank <= 5;
	out->enabled_share = (double)kept_total / ((double)rc->traces * (double)n);
	out->culprit_recorded = (double)culprit_kept / (double)rc->traces;
	out->bytes_per_request = (double)kept_total / (double)rc->traces * SPAN_BYTES +
				 (double)t->services * REQUEST_BYTES_PER_SERVICE;
	rt_adapt_destroy(l);
	free(keep_p);
	work_free(&w);
}

typedef struct agg {
	size_t runs, top1, top5, top5_300, p90_300;
	double p300_sum, share_sum, bytes_sum, old_p_sum, culprit_rec_sum;
	long *to_p90;
	size_t never;
	double cycle_sum, cycle_max, update_sum, policy_sum, scan_sum;
	size_t cycles;
} agg;

static void agg_add(agg *a, const run_out *o)
{
	a->to_p90[a->runs] = o->traces_to_p90;
	a->runs++;
	a->top1 += o->top1;
	a->top5 += o->top5;
	a->top5_300 += o->top5_at_300;
	a->p90_300 += o->traces_to_p90 >= 0 && o->traces_to_p90 <= 300;
	a->p300_sum += o->p_at_300;
	a->share_sum += o->enabled_share;
	a->culprit_rec_sum += o->culprit_recorded;
	a->bytes_sum += o->bytes_per_request;
	a->old_p_sum += o->old_culprit_p_end;
	a->never += o->traces_to_p90 < 0;
	a->cycle_sum += o->cycle_ms_sum;
	a->update_sum += o->update_ms_sum;
	a->policy_sum += o->policy_ms_sum;
	a->scan_sum += o->scan_ms_sum;
	a->cycles += o->cycles;
	if (o->cycle_ms_max > a->cycle_max)
		a->cycle_max = o->cycle_ms_max;
}

static int long_cmp(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return x < y ? -1 : (x > y);
}

/* Median of the runs that got there; "never" if fewer than half did. */
static void fmt_median(const agg *a, char *buf, size_t len)
{
	long v[256];
	size_t k = 0;
	for (size_t i = 0; i < a->runs && k < 256; i++)
		if (a->to_p90[i] >= 0)
			v[k++] = a->to_p90[i];
	if (k * 2 < a->runs) {
		snprintf(buf, len, "never");
		return;
	}
	qsort(v, k, sizeof *v, long_cmp);
	/* the runs that never got there count as +infinity */
	size_t mid = a->runs / 2;
	snprintf(buf, len, "%ld", mid < k ? v[mid] : -1L);
}

typedef struct case_def {
	const char *name;
	enum observe observe;
	topo *t;
	size_t runs, traces, shift_at;
	uint32_t draws;
	bool large;
	size_t batch;
} case_def;

/* The culprit of run r: every non-root site in turn (shop), or a random one. */
static size_t pick_culprit(const case_def *c, size_t r, uint64_t salt)
{
	size_t n = c->t->n;
	if (!c->large)
		return 1 + (r * 7 + salt) % (n - 1);
	rt_adapt_rng g;
	rt_adapt_rng_seed(&g, 0x5eed + r * 31 + salt);
	return 1 + rt_adapt_rng_next(&g) % (n - 1);
}

static void run_case(const case_def *c)
{
	agg ad = {0}, on = {0}, un = {0};
	long to1[256], to2[256], to3[256];
	ad.to_p90 = to1;
	on.to_p90 = to2;
	un.to_p90 = to3;
	for (size_t r = 0; r < c->runs; r++) {
		run_cfg rc = {
			.mode = MODE_ADAPTIVE,
			.observe = c->observe,
			.traces = c->traces,
			.culprit = pick_culprit(c, r, 0),
			.seed = 1000 + r,
			.draws = c->draws,
			.batch = c->batch,
			.shift_at = c->shift_at,
		};
		if (c->shift_at) {
			rc.culprit2 = pick_culprit(c, r, 3);
			if (rc.culprit2 == rc.culprit)
				rc.culprit2 = 1 + rc.culprit % (c->t->n - 1);
		}
		run_out o;
		run_one(c->t, &rc, &o);
		agg_add(&ad, &o);
		double share = o.enabled_share;
		rc.mode = MODE_ALL_ON;
		run_one(c->t, &rc, &o);
		agg_add(&on, &o);
		rc.mode = MODE_UNIFORM;
		/* the same share: the root always, the rest at one probability */
		double n = (double)c->t->n;
		rc.uniform_p = (share * n - 1.0) / (n - 1.0);
		if (rc.uniform_p < 0.0)
			rc.uniform_p = 0.0;
		run_one(c->t, &rc, &o);
		agg_add(&un, &o);
	}
	double all_on_bytes = on.bytes_sum / on.runs;
	const char *obs = c->observe == OBSERVE_SELF ? "self" : "absorbed";
	char med[32];
	fmt_median(&ad, med, sizeof med);
	printf("bench adaptive case=%s observe=%s policy=astraea sites=%zu runs=%zu batch=%zu traces=%zu "
	       "inject_var_ratio=%.1f top1_accuracy=%.3f top5_accuracy=%.3f "
	       "top5_accuracy_at_300=%.3f culprit_p_at_300=%.3f p90_within_300=%.3f "
	       "traces_to_p90=%s never_p90=%zu enabled_share=%.3f culprit_spans_recorded=%.3f "
	       "bytes_per_request=%.0f "
	       "horizon_ratio=%.2f",
	       c->name, obs, c->t->n, ad.runs, c->batch, c->traces,
	       INJECT_VAR_RATIO, (double)ad.top1 / ad.runs, (double)ad.top5 / ad.runs,
	       (double)ad.top5_300 / ad.runs, ad.p300_sum / ad.runs,
	       (double)ad.p90_300 / ad.runs, med, ad.never, ad.share_sum / ad.runs,
	       ad.culprit_rec_sum / ad.runs,
	       ad.bytes_sum / ad.runs, all_on_bytes / (ad.bytes_sum / ad.runs));
	if (c->shift_at)
		printf(" shift_at=%zu old_culprit_p_end=%.3f", c->shift_at, ad.old_p_sum / ad.runs);
	printf("\n");
	printf("bench adaptive case=%s observe=%s policy=all_on sites=%zu runs=%zu top1_accuracy=%.3f "
	       "top5_accuracy=%.3f top5_accuracy_at_300=%.3f enabled_share=%.3f "
	       "bytes_per_request=%.0f horizon_ratio=1.00\n",
	       c->name, obs, c->t->n, on.runs, (double)on.top1 / on.runs, (double)on.top5 / on.runs,
	       (double)on.top5_300 / on.runs, on.share_sum / on.runs, all_on_bytes);
	printf("bench adaptive case=%s observe=%s policy=uniform sites=%zu runs=%zu top1_accuracy=%.3f "
	       "top5_accuracy=%.3f top5_accuracy_at_300=%.3f enabled_share=%.3f "
	       "culprit_spans_recorded=%.3f bytes_per_request=%.0f horizon_ratio=%.2f "
	       "astraea_top5_minus_uniform=%+.3f\n",
	       c->name, obs, c->t->n, un.runs, (double)un.top1 / un.runs, (double)un.top5 / un.runs,
	       (double)un.top5_300 / un.runs, un.share_sum / un.runs, un.culprit_rec_sum / un.runs,
	       un.bytes_sum / un.runs,
	       all_on_bytes / (un.bytes_sum / un.runs),
	       (double)ad.top5 / ad.runs - (double)un.top5 / un.runs);
	if (c->large)
		printf("bench adaptive case=%s figure=learner sites=%zu cycles=%zu draws=%u "
		       "learner_ms_per_cycle_1000_sites=%.3f learner_ms_max=%.3f update_ms=%.3f "
		       "policy_ms=%.3f baseline_batch_scan_ms=%.3f ratio=%.1f\n",
		       c->name, c->t->n, ad.cycles, c->draws, ad.cycle_sum / ad.cycles, ad.cycle_max,
		       ad.update_sum / ad.cycles, ad.policy_sum / ad.cycles,
		       ad.scan_sum / ad.cycles, ad.cycle_sum / ad.scan_sum);
}

/* Same-run baseline for the lookup: a call that does nothing. */
__attribute__((noipa)) static uint16_t empty_call(const uint64_t *slots, uint32_t cap,
						  uint64_t site)
{
	(void)slots;
	(void)cap;
	return (uint16_t)site;
}

/* The client-side check: one table lookup per span start, for 1000 sites in a
 * table of rt_adapt_table_capacity(1000) slots, hits and misses, against a
 * plain load from the same table and an empty call, in the same loop shape. */
static void bench_lookup(bool quick)
{
	enum { N = 1000, K = 4096 };
	uint32_t cap = rt_adapt_table_capacity(N);
	uint64_t *slots = calloc(cap, sizeof *slots);
	uint64_t sites[N], hit[K], miss[K];
	double probs[N];
	rt_adapt_rng r;
	rt_adapt_rng_seed(&r, 99);
	for (size_t i = 0; i < N; i++) {
		char op[32];
		int len = snprintf(op, sizeof op, "op-%zu", i);
		sites[i] = rt_adapt_site_hash("svc", 3, op, (size_t)len);
		probs[i] = 0.05 + 0.9 * rt_adapt_rng_uniform(&r);
	}
	if (!slots || rt_adapt_table_build(slots, cap, sites, probs, N) != 0) {
		fprintf(stderr, "bench_adaptive: table\n");
		exit(1);
	}
	for (size_t k = 0; k < K; k++) {
		hit[k] = sites[rt_adapt_rng_next(&r) % N];
		miss[k] = rt_adapt_rng_next(&r) | 1;
	}
	size_t iters = quick ? 5000000 : 100000000;
	uint64_t acc = 0;
	double t0 = now_ms();
	for (size_t it = 0; it < iters; it++)
		acc += rt_adapt_table_lookup(slots, cap, hit[it & (K - 1)]);
	double t1 = now_ms();
	for (size_t it = 0; it < iters; it++)
		acc += rt_adapt_table_lookup(slots, cap, miss[it & (K - 1)]);
	double t2 = now_ms();
	for (size_t it = 0; it < iters; it++)
		acc += (uint16_t)ck_pr_load_64(&slots[hit[it & (K - 1)] & (cap - 1)]);
	double t3 = now_ms();
	for (size_t it = 0; it < iters; it++)
		acc += empty_call(slots, cap, hit[it & (K - 1)]);
	double t4 = now_ms();
	double ns = 1e6 / (double)iters;
	double hit_ns = (t1 - t0) * ns, miss_ns = (t2 - t1) * ns;
	double load_ns = (t3 - t2) * ns, call_ns = (t4 - t3) * ns;
	printf("bench adaptive figure=lookup sites=%d slots=%u iterations=%zu lookup_hit_ns=%.2f "
	       "lookup_miss_ns=%.2f baseline_plain_load_ns=%.2f baseline_empty_call_ns=%.2f "
	       "hit_vs_load=%.2f hit_vs_call=%.2f checksum=%llu\n",
	       N, cap, iters, hit_ns, miss_ns, load_ns, call_ns, hit_ns / load_ns,
	       hit_ns / call_ns, (unsigned long long)(acc & 0xffff));
	free(slots);
}

/* ------------------------------------------------- the real client ---- */

/*
 * figure=pool_bytes: the shop tree written by the real client (libretrace) into
 * a real pool, with the policy table published the way the agent does
 * (rt_pool_policy_publish), against all spans on, same run. The policy is the
 * learner's after a closed-loop run on the simulation (culprit fraud.rules),
 * with the sites the client never drops pinned as the coordinator pins them:
 * the root only (the "call X" CLIENT spans are dropped like any other, and a
 * service's entry span when its call was dropped). One process writes every
 * service's spans, so a site is hashed as ("bench_adaptive",
 * "service/operation"); but each callee runs as on a real host: on a thread
 * of its own (one per call depth), in a trace it begins from the context the
 * caller serialized inside its call span (retrace_deserialize: a remote
 * parent, and the "call dropped" flag deciding its entry span), while the
 * caller waits in the call, so every callee stream pays its own segment and
 * RESOURCE as it would on its own host. Bytes are what
 * the pool handed back: segment payloads plus one 64-byte segment header each
 * (rt_drain_poll). At a fixed pool size the event horizon is pool bytes over
 * bytes per second, so horizon_ratio = all-on bytes per request / adaptive's.
 */
#define REAL_SERVICE "bench_adaptive"

static int u32_cmp(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return a < b ? -1 : a > b;
}

static int shop_kind(const char *op)
{
	if (!strncmp(op, "call ", 5))
		return RETRACE_SPAN_CLIENT;
	if (!strncmp(op, "GET /", 5) || !strncmp(op, "POST /", 6))
		return RETRACE_SPAN_SERVER;
	return RETRACE_SPAN_INTERNAL;
}

static const char *shop_name(const topo *t, size_t i, char *buf, size_t n)
{
	(void)t;
	snprintf(buf, n, "%s/%s", shop_ops[i][0], shop_ops[i][1]);
	return buf;
}

/* A callee "host": a thread that serves one call at a time, synchronously. */
#define CALL_DEPTHS 4
static struct callee {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	const topo *t;
	size_t site;
	int state; /* 0 idle, 1 a call waits, 2 served, 3 quit */
	char tp[64], ts[RETRACE_TRACESTATE_MAX + 1];
} callees[CALL_DEPTHS];

static void write_subtree_at(const topo *t, size_t i, int depth);

static void *callee_main(void *arg)
{
	struct callee *c = arg;
	int depth = (int)(c - callees);
	pthread_mutex_lock(&c->mu);
	for (;;) {
		struct retrace_wire_context w;
		while (c->state != 1 && c->state != 3)
			pthread_cond_wait(&c->cv, &c->mu);
		if (c->state == 3)
			break;
		pthread_mutex_unlock(&c->mu);
		if (retrace_deserialize(c->tp, c->ts, &w) == RETRACE_OK &&
		    retrace_begin(w.trace_id) == 1) {
			write_subtree_at(c->t, c->site, depth + 1);
			retrace_end();
		}
		pthread_mutex_lock(&c->mu);
		c->state = 2;
		pthread_cond_broadcast(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

static void callees_start(void)
{
	for (int d = 0; d < CALL_DEPTHS; d++) {
		struct callee *c = &callees[d];
		pthread_mutex_init(&c->mu, NULL);
		pthread_cond_init(&c->cv, NULL);
		c->state = 0;
		if (pthread_create(&c->th, NULL, callee_main, c) != 0) {
			fprintf(stderr, "bench_adaptive: no callee thread\n");
			exit(1);
		}
	}
}

static void callees_stop(void)
{
	for (int d = 0; d < CALL_DEPTHS; d++) {
		struct callee *c = &callees[d];
		pthread_mutex_lock(&c->mu);
		c->state = 3;
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->th, NULL);
		pthread_cond_destroy(&c->cv);
		pthread_mutex_destroy(&c->mu);
	}
}

/* Site i (an entry span) served by the callee of this call depth. */
static void call_callee(const topo *t, size_t i, int depth)
{
	struct callee *c = &callees[depth < CALL_DEPTHS ? depth : CALL_DEPTHS - 1];
	if (depth >= CALL_DEPTHS || retrace_serialize(c->tp, sizeof c->tp, c->ts, sizeof c->ts,
						      NULL) != RETRACE_OK) {
		write_subtree_at(t, i, depth); /* deeper than the bench's threads: in line */
		return;
	}
	pthread_mutex_lock(&c->mu);
	c->t = t;
	c->site = i;
	c->state = 1;
	pthread_cond_broadcast(&c->cv);
	while (c->state != 2)
		pthread_cond_wait(&c->cv, &c->mu);
	c->state = 0;
	pthread_mutex_unlock(&c->mu);
}

static void write_subtree_at(const topo *t, size_t i, int depth)
{
	char name[96];
	retrace_span_start(shop_name(t, i, name, sizeof name), shop_kind(shop_ops[i][1]));
	retrace_attr_int("items", (int64_t)i);
	for (size_t k = i + 1; k < t->n; k++) {
		if (t->parent[k] != (int)i)
			continue;
		if (shop_kind(shop_ops[k][1]) == RETRACE_SPAN_SERVER)
			call_callee(t, k, depth);
		else
			write_subtree_at(t, k, depth);
	}
	retrace_span_end();
}

static void write_subtree(const topo *t, size_t i)
{
	write_subtree_at(t, i, 0);
}

static double real_bytes_per_request(struct rt_pool *pool, const topo *t, size_t requests,
				     uint64_t base)
{
	struct rt_drain_stats st = {0};
	callees_start();
	for (size_t r = 0; r < requests; r++) {
		retrace_trace_id id = {0xbe0c4ull, base + r + 1};
		retrace_begin(id);
		write_subtree(t, 0);
		retrace_end();
		if (r % 16 == 15)
			rt_drain_poll(pool, NULL, &st);
	}
	callees_stop(); /* their exit flushes what they hold */
	retrace_flush();
	while (rt_drain_poll(pool, NULL, &st) > 0)
		;
	return ((double)st.bytes + (double)st.buffers * RT_BUF_HEADER_SIZE) / (double)requests;
}

/*
 * figure=agent_horizon: the event horizon as the agent makes it. The real agent
 * in process (as bench_horizon runs it: after every request, rt_agent_poll
 * until idle; it indexes, evicts whole traces past 80 % of the pool, recycles)
 * and the shop tree through the real client into its pool, at a fixed pool
 * size, all spans on and then with the learned policy table published into the
 * agent's pool. Requests arrive at RATE_PER_S, so a trace's age when it is
 * evicted is (requests since) / rate: the median over evicted traces is the
 * horizon a trigger must beat. ratio = adaptive's horizon / all-on's.
 */
#define HORIZON_RATE_PER_S 1000.0

static double agent_horizon_s(const topo *t, uint32_t pool_mib, const uint64_t *sites,
			      const double *keep_p, size_t n_sites, uint64_t requests,
			      uint64_t *evicted)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct retrace_config rc;
	char err[512];
	uint64_t k, next_unchecked = 1;
	uint32_t *ages = malloc(requests * sizeof *ages), nages = 0;
	double h = 0;
	rt_agent_config_defaults(&cfg);
	snprintf(cfg.pool, sizeof cfg.pool, "/rt-bench-adapt-horizon-%d", (int)getpid());
	cfg.buffer_size = 32u * 1024u;
	cfg.buffer_count = (uint32_t)(((uint64_t)pool_mib << 20) / cfg.buffer_size);
	cfg.unlink_at_exit = 1;
	cfg.replace = 1;
	if (!ages || rt_agent_open(&a, &cfg, err, sizeof err) != RETRACE_OK) {
		fprintf(stderr, "bench_adaptive: %s\n", ages ? err : "out of memory");
		exit(1);
	}
	retrace_config_from_env(&rc);
	rc.pool_name = cfg.pool;
	rc.quiet = 1;
	rc.sample_shift = 0;
	rc.head_shift = 0;
	if (retrace_init(&rc) != RETRACE_OK) {
		fprintf(stderr, "bench_adaptive: cannot attach to %s\n", cfg.pool);
		exit(1);
	}
	if (sites)
		rt_pool_policy_publish(&a.pool, sites, keep_p, n_sites);
	callees_start();
	for (k = 1; k <= requests; k++) {
		retrace_begin((retrace_trace_id){ 0x4052, k });
		write_subtree(t, 0);
		retrace_end();
		while (rt_agent_poll(&a) > 0)
			;
		/* every trace older than the LRU's oldest is gone: evicted at about k */
		uint32_t o = rt_index_lru_oldest(&a.ix);
		uint64_t oldest = o == RT_INDEX_NONE ? k + 1 : a.ix.traces[o].lo;
		while (next_unchecked < oldest && next_unchecked <= k)
			ages[nages++] = (uint32_t)(k - next_unchecked++);
	}
	*evicted = a.ix.st.evicted_traces;
	if (nages) {
		qsort(ages, nages, sizeof *ages, u32_cmp);
		h = ages[nages / 2] / HORIZON_RATE_PER_S;
	}
	free(ages);
	callees_stop();
	retrace_shutdown();
	rt_agent_close(&a);
	return h;
}

static void bench_real_client(const topo *shop, bool quick)
{
	size_t n = shop->n, culprit = 21; /* fraud.rules */
	size_t requests = quick ? 300 : 3000;
	rt_adapt_rng r;
	rt_adapt_config cfg;
	rt_adapt_learner *l;
	topo t = *shop;
	work w;
	double *keep_p = malloc(n * sizeof *keep_p), delay_mean;
	uint64_t *sites = malloc(n * sizeof *sites);
	size_t k_obs = 0, pinned = 0;
	struct rt_pool_create_opts o;
	struct rt_pool pool;
	struct retrace_config rc;
	char name[64], err[256];

	rt_adapt_rng_seed(&r, 4242);
	delay_mean = inject_mean(topo_draw_sites(&t, &r));
	work_alloc(&w, n);
	rt_adapt_config_default(&cfg);
	cfg.seed = 99;
	l = rt_adapt_create(&cfg, n, NULL);
	for (size_t i = 0; i < n; i++) {
		rt_adapt_site_add(l, t.hash[i]);
		if (i == 0) {
			rt_adapt_pin(l, t.hash[i], true);
			pinned++;
		}
		keep_p[i] = 1.0;
	}
	for (size_t tr = 1; tr <= 1000; tr++) {
		simulate_request(&t, &w, &r, culprit, delay_mean, keep_p, OBSERVE_SELF, &k_obs);
		if (tr % 50 == 0) {
			rt_adapt_update(l, w.obs, k_obs);
			rt_adapt_policy(l);
			k_obs = 0;
			for (size_t i = 0; i < n; i++)
				keep_p[i] = rt_adapt_probability(l, t.hash[i]);
		}
	}
	rt_pool_create_defaults(&o);
	snprintf(name, sizeof name, "/rt-bench-adaptive-%d", (int)getpid());
	o.name = name;
	o.buffer_count = 1024;
	o.replace = 1;
	if (rt_pool_create(&o, &pool, err, sizeof err) != RETRACE_OK) {
		fprintf(stderr, "bench_adaptive: %s\n", err);
		exit(1);
	}
	retrace_config_from_env(&rc);
	rc.pool_name = name;
	rc.quiet = 1;
	if (retrace_init(&rc) != RETRACE_OK || retrace_set_service_name(REAL_SERVICE) != RETRACE_OK) {
		fprintf(stderr, "bench_adaptive: cannot attach to %s\n", name);
		exit(1);
	}
	for (size_t i = 0; i < n; i++) {
		char nm[96];
		shop_name(&t, i, nm, sizeof nm);
		sites[i] = rt_adapt_site_hash(REAL_SERVICE, strlen(REAL_SERVICE), nm, strlen(nm));
	}
	/* all on first (no table published), then the learned policy, then all on
	 * again: the baseline is the mean of the two all-on blocks around it */
	double all1 = real_bytes_per_request(&pool, &t, requests, 0);
	rt_pool_policy_publish(&pool, sites, keep_p, n);
	double adaptive = real_bytes_per_request(&pool, &t, requests, 1u << 20);
	rt_pool_policy_publish(&pool, NULL, NULL, 0);
	double all2 = real_bytes_per_request(&pool, &t, requests, 2u << 20);
	double all_on = (all1 + all2) / 2;
	double share = 0;
	for (size_t i = 0; i < n; i++)
		share += keep_p[i];
	printf("bench adaptive case=shop figure=pool_bytes client=libretrace requests=%zu sites=%zu "
	       "pinned=%zu culprit_p=%.3f policy_mean_p=%.3f bytes_per_request=%.0f "
	       "baseline=all_on baseline_bytes_per_request=%.0f horizon_ratio=%.2f\n",
	       requests, n, pinned, keep_p[culprit], share / (double)n, adaptive, all_on,
	       all_on / adaptive);
	retrace_shutdown();
	rt_pool_unlink(name);
	rt_pool_detach(&pool);
	{
		/* enough requests to fill the pool a few times with the smaller traces */
		uint32_t mib = 10;
		uint64_t req = (uint64_t)((quick ? 2.5 : 4.0) * (double)(mib << 20) / adaptive);
		uint64_t ev_all = 0, ev_ad = 0;
		double h_all = agent_horizon_s(&t, mib, NULL, NULL, 0, req, &ev_all);
		double h_ad = agent_horizon_s(&t, mib, sites, keep_p, n, req, &ev_ad);
		printf("bench adaptive case=shop figure=agent_horizon client=libretrace agent=in_process "
		       "pool_mib=%u requests=%llu rate_per_s=%.0f horizon_s=%.2f evicted=%llu "
		       "baseline=all_on baseline_horizon_s=%.2f baseline_evicted=%llu horizon_ratio=%.2f\n",
		       mib, (unsigned long long)req, HORIZON_RATE_PER_S, h_ad,
		       (unsigned long long)ev_ad, h_all, (unsigned long long)ev_all,
		       h_all > 0 ? h_ad / h_all : 0.0);
	}
	rt_adapt_destroy(l);
	work_free(&w);
	free(keep_p);
	free(sites);
}

int main(void)
{
	bool quick = getenv("RETRACE_BENCH_QUICK") != NULL;
	topo shop, large;
	rt_log_level = RT_LOG_ERROR; /* the in-process agent of figure=agent_horizon */
	topo_shop(&shop);
	topo_large(&large, 1000, 77);
	rt_adapt_config def;
	rt_adapt_config_default(&def);
	size_t batch = 50;
	case_def cases[] = {
		{"shop", OBSERVE_SELF, &shop, quick ? 6 : 29, 1000, 0, def.draws, false, batch},
		{"shop_shift", OBSERVE_SELF, &shop, quick ? 4 : 20, 2000, 1000, def.draws, false, batch},
		{"large", OBSERVE_SELF, &large, quick ? 2 : 20, 1000, 0, def.draws, true, batch},
		{"shop_absorbed", OBSERVE_ABSORBED, &shop, quick ? 6 : 29, 1000, 0, def.draws, false, batch},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		run_case(&cases[i]);
	bench_lookup(quick);
	bench_real_client(&shop, quick);
	topo_free(&shop);
	topo_free(&large);
	return 0;
}
