/*
 * learner.c — Beta beliefs per span site, the batch update and the ABS policy.
 *
 * Sites live in flat arrays indexed in order of first sight; an open-addressing
 * table maps a site hash to its index. A batch is first checked whole (so a bad
 * batch changes nothing), then each span feeds a per-site Welford accumulator
 * (a site seen fewer than min_samples times keeps its accumulator open into
 * the next batch: a site the policy turned down to epsilon is seen about once
 * a batch, and dropping those spans would leave its belief to the prior);
 * every site's belief decays toward the prior (exponential forgetting, so a
 * belief follows drift), and each site seen often enough in the batch adds its
 * normalised utility u (its latency variance divided by the batch's largest)
 * as w u successes and w (1 - u) failures (w = evidence, 1 in the paper's
 * rule): alpha += w u, beta += w (1 - u). Before the
 * normalisation each variance is shrunk toward the batch's median variance in
 * proportion to how few spans it rests on: sites the policy turned down are
 * seen a few times a batch, and among hundreds of them one always shows a huge
 * variance by luck, which would set the maximum and squash the real culprit.
 *
 * The policy (ABS) runs `draws` Monte Carlo rounds. In a round every unpinned
 * site draws from its Beta belief (two Gamma draws, Marsaglia–Tsang on
 * ziggurat normals, constants prepared once per policy) and the
 * k = round(N (100 - P) / 100) largest draws (at least one) — the sites above
 * the round's P-th percentile — score a hit; a
 * quickselect finds the k-th largest, so a round costs O(N). A site's
 * probability is its share of hits, floored at epsilon; pinned sites get 1.0
 * and stay out of the draws (they would take a slot the policy cannot give).
 * The ranking orders sites by posterior mean alpha / (alpha + beta).
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct rt_adapt_learner {
	rt_adapt_config cfg;
	size_t max_sites, n_sites;
	/* per site */
	uint64_t *site;
	double *alpha, *beta, *utility, *prob;
	uint32_t *rank, *updates, *order;
	bool *pinned;
	/* hash -> index + 1 (0 = empty), linear probing */
	uint32_t *slots;
	size_t slot_mask;
	/* Welford accumulators and the sites that have one open: those the batch
	 * touched, and those still short of min_samples from earlier batches
	 * (their evidence carries over instead of being thrown away) */
	uint32_t *count, *touched;
	size_t n_touched;
	double *mean, *m2;
	/* policy scratch */
	rt_adapt_gamma_prep *prep_a, *prep_b;
	double *draw, *select;
	uint32_t *hits, *active;
	rt_adapt_rng rng;
	rt_adapt_zig zig;
	rt_adapt_stats stats;
	bool have_policy;
};

const char *rt_adapt_strerror(int err)
{
	switch (err) {
	case RT_ADAPT_OK: return "ok";
	case RT_ADAPT_EINVAL: return "invalid argument or observation";
	case RT_ADAPT_ENOMEM: return "out of memory";
	case RT_ADAPT_EFULL: return "site table full";
	case RT_ADAPT_ENOSITE: return "no such site";
	default: return "unknown error";
	}
}

void rt_adapt_config_default(rt_adapt_config *cfg)
{
	cfg->prior_alpha = 1.0;
	cfg->prior_beta = 1.0;
	cfg->forget = 0.7;
	cfg->percentile = 90.0;
	cfg->epsilon = 0.05;
	cfg->draws = 200;
	cfg->min_samples = 2;
	cfg->shrink = 8.0;
	cfg->evidence = 3.0;
	cfg->seed = 1;
}

static bool config_valid(const rt_adapt_config *c)
{
	return isfinite(c->prior_alpha) && c->prior_alpha > 0.0 && isfinite(c->prior_beta) &&
	       c->prior_beta > 0.0 && c->forget > 0.0 && c->forget <= 1.0 &&
	       c->percentile > 0.0 && c->percentile < 100.0 && c->epsilon >= 0.0 &&
	       c->epsilon <= 1.0 && c->draws >= 1 && c->min_samples >= 2 &&
	       isfinite(c->shrink) && c->shrink >= 0.0 && isfinite(c->evidence) &&
	       c->evidence > 0.0;
}

void rt_adapt_destroy(rt_adapt_learner *l)
{
	if (!l)
		return;
	free(l->site);
	free(l->alpha);
	free(l->beta);
	free(l->utility);
	free(l->prob);
	free(l->rank);
	free(l->updates);
	free(l->order);
	free(l->pinned);
	free(l->slots);
	free(l->count);
	free(l->touched);
	free(l->mean);
	free(l->m2);
	free(l->prep_a);
	free(l->prep_b);
	free(l->draw);
	free(l->select);
	free(l->hits);
	free(l->active);
	free(l);
}

rt_adapt_learner *rt_adapt_create(const rt_adapt_config *cfg, size_t max_sites, int *err)
{
	rt_adapt_config def;
	if (!cfg) {
		rt_adapt_config_default(&def);
		cfg = &def;
	}
	if (max_sites == 0 || max_sites > (1u << 30) || !config_valid(cfg)) {
		if (err)
			*err = RT_ADAPT_EINVAL;
		return NULL;
	}
	rt_adapt_learner *l = calloc(1, sizeof *l);
	if (!l)
		goto nomem;
	l->cfg = *cfg;
	l->max_sites = max_sites;
	size_t slots = 16;
	while (slots < 2 * max_sites)
		slots <<= 1;
	l->slot_mask = slots - 1;
	size_t n = max_sites;
	l->site = calloc(n, sizeof *l->site);
	l->alpha = calloc(n, sizeof *l->alpha);
	l->beta = calloc(n, sizeof *l->beta);
	l->utility = calloc(n, sizeof *l->utility);
	l->prob = calloc(n, sizeof *l->prob);
	l->rank = calloc(n, sizeof *l->rank);
	l->updates = calloc(n, sizeof *l->updates);
	l->order = calloc(n, sizeof *l->order);
	l->pinned = calloc(n, sizeof *l->pinned);
	l->slots = calloc(slots, sizeof *l->slots);
	l->count = calloc(n, sizeof *l->count);
	l->touched = calloc(n, sizeof *l->touched);
	l->mean = calloc(n, sizeof *l->mean);
	l->m2 = calloc(n, sizeof *l->m2);
	l->prep_a = calloc(n, sizeof *l->prep_a);
	l->prep_b = calloc(n, sizeof *l->prep_b);
	l->draw = calloc(n, sizeof *l->draw);
	l->select = calloc(n, sizeof *l->select);
	l->hits = calloc(n, sizeof *l->hits);
	l->active = calloc(n, sizeof *l->active);
	if (!l->site || !l->alpha || !l->beta || !l->utility || !l->prob || !l->rank ||
	    !l->updates || !l->order || !l->pinned || !l->slots || !l->count || !l->touched ||
	    !l->mean || !l->m2 || !l->prep_a || !l->prep_b || !l->draw || !l->select || !l->hits ||
	    !l->active)
		goto nomem;
	rt_adapt_rng_seed(&l->rng, cfg->seed);
	rt_adapt_zig_init(&l->zig);
	if (err)
		*err = RT_ADAPT_OK;
	return l;
nomem:
	rt_adapt_destroy(l);
	if (err)
		*err = RT_ADAPT_ENOMEM;
	return NULL;
}

/* Index of a site, or -1. *slot_out (if given) gets the slot it is or would be in. */
static long find_site(const rt_adapt_learner *l, uint64_t site, size_t *slot_out)
{
	size_t i = (size_t)site & l->slot_mask;
	for (;;) {
		uint32_t v = l->slots[i];
		if (v == 0) {
			if (slot_out)
				*slot_out = i;
			return -1;
		}
		if (l->site[v - 1] == site)
			return (long)(v - 1);
		i = (i + 1) & l->slot_mask;
	}
}

/* Index of the site, added at the prior if new; -1 (table full) or -2 (hash 0). */
static long intern_site(rt_adapt_learner *l, uint64_t site)
{
	if (site == 0)
		return -2;
	size_t slot;
	long idx = find_site(l, site, &slot);
	if (idx >= 0)
		return idx;
	if (l->n_sites == l->max_sites)
		return -1;
	size_t i = l->n_sites++;
	l->site[i] = site;
	l->alpha[i] = l->cfg.prior_alpha;
	l->beta[i] = l->cfg.prior_beta;
	l->utility[i] = -1.0;
	l->prob[i] = 1.0;
	l->rank[i] = 0;
	l->updates[i] = 0;
	l->pinned[i] = false;
	l->slots[slot] = (uint32_t)(i + 1);
	return (long)i;
}

int rt_adapt_site_add(rt_adapt_learner *l, uint64_t site)
{
	if (!l || site == 0)
		return RT_ADAPT_EINVAL;
	return intern_site(l, site) >= 0 ? RT_ADAPT_OK : RT_ADAPT_EFULL;
}

int rt_adapt_pin(rt_adapt_learner *l, uint64_t site, bool pinned)
{
	if (!l || site == 0)
		return RT_ADAPT_EINVAL;
	long i = intern_site(l, site);
	if (i < 0)
		return RT_ADAPT_EFULL;
	l->pinned[i] = pinned;
	if (pinned)
		l->prob[i] = 1.0;
	return RT_ADAPT_OK;
}

static bool batch_valid(const rt_adapt_obs *obs, size_t n)
{
	if (!obs || n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (obs[i].site == 0 || !isfinite(obs[i].latency) || obs[i].latency < 0.0)
			return false;
	return true;
}

/* Welford: one span's latency into its site's running mean and M2. */
static void accumulate(rt_adapt_learner *l, const rt_adapt_obs *o)
{
	long i = intern_site(l, o->site);
	if (i < 0) {
		l->stats.obs_full++;
		return;
	}
	if (l->count[i] == 0) {
		l->touched[l->n_touched++] = (uint32_t)i;
		l->mean[i] = 0.0;
		l->m2[i] = 0.0;
	}
	uint32_t c = ++l->count[i];
	double delta = o->latency - l->mean[i];
	l->mean[i] += delta / c;
	l->m2[i] += delta * (o->latency - l->mean[i]);
	l->stats.obs++;
}

/* The k-th largest of v[0..n) (1 <= k <= n), by Wirth's selection with the
 * order reversed; v is permuted. Expected O(n). */
static double kth_largest(double *v, size_t n, size_t k)
{
	long want = (long)k - 1, lo = 0, hi = (long)n - 1;
	while (lo < hi) {
		double pivot = v[want];
		long i = lo, j = hi;
		do {
			while (v[i] > pivot)
				i++;
			while (pivot > v[j])
				j--;
			if (i <= j) {
				double t = v[i];
				v[i] = v[j];
				v[j] = t;
				i++;
				j--;
			}
		} while (i <= j);
		if (j < want)
			lo = i;
		if (want < i)
			hi = j;
	}
	return v[want];
}

/* Every belief moves a step back toward the prior: old evidence fades. */
static void forget_all(rt_adapt_learner *l)
{
	double g = l->cfg.forget, a0 = l->cfg.prior_alpha, b0 = l->cfg.prior_beta;
	for (size_t i = 0; i < l->n_sites; i++) {
		l->alpha[i] = a0 + g * (l->alpha[i] - a0);
		l->beta[i] = b0 + g * (l->beta[i] - b0);
		l->utility[i] = -1.0;
	}
}

int rt_adapt_update(rt_adapt_learner *l, const rt_adapt_obs *obs, size_t n)
{
	if (!l)
		return RT_ADAPT_EINVAL;
	if (!batch_valid(obs, n)) {
		l->stats.rejected_batches++;
		return RT_ADAPT_EINVAL;
	}
	for (size_t k = 0; k < n; k++)
		accumulate(l, &obs[k]);
	size_t n_touched = l->n_touched;
	forget_all(l);
	size_t n_var = 0;
	for (size_t t = 0; t < n_touched; t++) {
		uint32_t i = l->touched[t];
		if (l->count[i] < l->cfg.min_samples)
			continue;
		l->m2[i] /= l->count[i] - 1; /* m2 now holds the sample variance */
		l->select[n_var++] = l->m2[i];
	}
	double median = n_var ? kth_largest(l->select, n_var, (n_var + 1) / 2) : 0.0;
	double max_var = 0.0, k = l->cfg.shrink;
	for (size_t t = 0; t < n_touched; t++) {
		uint32_t i = l->touched[t];
		if (l->count[i] < l->cfg.min_samples)
			continue;
		double dof = l->count[i] - 1;
		l->m2[i] = (dof * l->m2[i] + k * median) / (dof + k);
		if (l->m2[i] > max_var)
			max_var = l->m2[i];
	}
	for (size_t t = 0; t < n_touched; t++) {
		uint32_t i = l->touched[t];
		if (l->count[i] >= l->cfg.min_samples) {
			double u = max_var > 0.0 ? l->m2[i] / max_var : 0.0;
			if (u > 1.0)
				u = 1.0;
			l->alpha[i] += l->cfg.evidence * u;
			l->beta[i] += l->cfg.evidence * (1.0 - u);
			l->utility[i] = u;
			l->updates[i]++;
			l->count[i] = 0;
		}
	}
	/* Keep the sites still short of min_samples open for the next batch. */
	size_t open = 0;
	for (size_t t = 0; t < n_touched; t++)
		if (l->count[l->touched[t]] > 0)
			l->touched[open++] = l->touched[t];
	l->n_touched = open;
	l->stats.batches++;
	return RT_ADAPT_OK;
}

typedef struct rank_key {
	double mean;
	uint64_t site;
	uint32_t index;
} rank_key;

static int rank_cmp(const void *pa, const void *pb)
{
	const rank_key *a = pa, *b = pb;
	if (a->mean != b->mean)
		return a->mean > b->mean ? -1 : 1;
	return a->site < b->site ? -1 : (a->site > b->site);
}

static int rank_sites(rt_adapt_learner *l)
{
	size_t n = l->n_sites;
	rank_key *keys = malloc(n * sizeof *keys);
	if (!keys)
		return RT_ADAPT_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		keys[i].mean = l->alpha[i] / (l->alpha[i] + l->beta[i]);
		keys[i].site = l->site[i];
		keys[i].index = (uint32_t)i;
	}
	qsort(keys, n, sizeof *keys, rank_cmp);
	for (size_t r = 0; r < n; r++) {
		l->order[r] = keys[r].index;
		l->rank[keys[r].index] = (uint32_t)(r + 1);
	}
	free(keys);
	return RT_ADAPT_OK;
}

/* How many sites lie above the P-th percentile of N draws: at least one. */
static size_t top_count(size_t n, double percentile)
{
	double k = floor((double)n * (100.0 - percentile) / 100.0 + 0.5);
	if (k < 1.0)
		k = 1.0;
	if (k > (double)n)
		k = (double)n;
	return (size_t)k;
}

int rt_adapt_policy(rt_adapt_learner *l)
{
	if (!l)
		return RT_ADAPT_EINVAL;
	size_t n = l->n_sites;
	if (n == 0)
		return RT_ADAPT_ENOSITE;
	int rc = rank_sites(l);
	if (rc != RT_ADAPT_OK)
		return rc;
	/* Pinned sites are on anyway: the percentile is taken over the others, so
	 * a pinned site never takes a slot the policy could give. */
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		l->prob[i] = 1.0;
		if (l->pinned[i])
			continue;
		rt_adapt_gamma_prepare(&l->prep_a[m], l->alpha[i]);
		rt_adapt_gamma_prepare(&l->prep_b[m], l->beta[i]);
		l->hits[m] = 0;
		l->active[m++] = (uint32_t)i;
	}
	size_t k = m ? top_count(m, l->cfg.percentile) : 0;
	for (uint32_t r = 0; m && r < l->cfg.draws; r++) {
		for (size_t j = 0; j < m; j++) {
			double x = rt_adapt_gamma_draw(&l->rng, &l->prep_a[j], &l->zig);
			double y = rt_adapt_gamma_draw(&l->rng, &l->prep_b[j], &l->zig);
			l->draw[j] = x / (x + y);
		}
		double threshold = -1.0;
		if (k < m) {
			memcpy(l->select, l->draw, m * sizeof *l->select);
			threshold = kth_largest(l->select, m, k);
		}
		for (size_t j = 0; j < m; j++)
			l->hits[j] += l->draw[j] >= threshold;
	}
	for (size_t j = 0; j < m; j++) {
		double p = (double)l->hits[j] / l->cfg.draws;
		l->prob[l->active[j]] = p < l->cfg.epsilon ? l->cfg.epsilon : p;
	}
	l->have_policy = true;
	l->stats.policies++;
	return RT_ADAPT_OK;
}

size_t rt_adapt_site_count(const rt_adapt_learner *l)
{
	return l ? l->n_sites : 0;
}

int rt_adapt_site_get(const rt_adapt_learner *l, size_t i, rt_adapt_site_info *out)
{
	if (!l || !out)
		return RT_ADAPT_EINVAL;
	if (i >= l->n_sites)
		return RT_ADAPT_ENOSITE;
	out->site = l->site[i];
	out->alpha = l->alpha[i];
	out->beta = l->beta[i];
	out->mean = l->alpha[i] / (l->alpha[i] + l->beta[i]);
	out->utility = l->utility[i];
	out->probability = l->prob[i];
	out->rank = l->rank[i];
	out->updates = l->updates[i];
	out->pinned = l->pinned[i];
	return RT_ADAPT_OK;
}

double rt_adapt_probability(const rt_adapt_learner *l, uint64_t site)
{
	if (!l || site == 0)
		return 1.0;
	long i = find_site(l, site, NULL);
	return i < 0 ? 1.0 : l->prob[i];
}

size_t rt_adapt_ranking(const rt_adapt_learner *l, uint64_t *sites, size_t max)
{
	if (!l || !sites || !l->have_policy)
		return 0;
	size_t n = l->n_sites < max ? l->n_sites : max;
	for (size_t r = 0; r < n; r++)
		sites[r] = l->site[l->order[r]];
	return n;
}

double rt_adapt_enabled_share(const rt_adapt_learner *l)
{
	if (!l || l->n_sites == 0)
		return 1.0;
	double s = 0.0;
	for (size_t i = 0; i < l->n_sites; i++)
		s += l->prob[i];
	return s / l->n_sites;
}

void rt_adapt_get_stats(const rt_adapt_learner *l, rt_adapt_stats *out)
{
	if (!l || !out)
		return;
	*out = l->stats;
}
