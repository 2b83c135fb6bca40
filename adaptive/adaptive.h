/*
 * adaptive.h — Astraea-style adaptive span instrumentation, as a pure library.
 *
 * What it owns: per span site (a 64-bit hash of service + operation name, see
 * rt_adapt_site_hash) a Beta(alpha, beta) belief of the site's normalised
 * utility, the Bayesian update of those beliefs from batches of recorded spans
 * (utility = the site's latency variance in the batch, divided by the batch's
 * largest variance) with exponential forgetting toward the prior, and the ABS
 * policy: per site the share of Monte Carlo rounds in which its draw from its
 * belief lies above the P-th percentile of that round's draws, floored at
 * epsilon; operator-pinned sites always get 1.0.
 *
 * What it promises: libc/libm only; no global state (the random generator is
 * the learner's own, seeded by the caller, so a run is reproducible); bad input
 * (NaN or negative durations, hash 0, an empty batch, zero sites) is refused
 * with an error code and counted, never a crash, and leaves the beliefs as they
 * were. A learner is not thread-safe: one thread drives it.
 */
#ifndef RETRACE_ADAPTIVE_H
#define RETRACE_ADAPTIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy_table.h" /* rt_adapt_site_hash: the span-site hash, shared with the client */

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes (negative); 0 is success. */
enum {
	RT_ADAPT_OK = 0,
	RT_ADAPT_EINVAL = -1,  /* bad argument or bad observation: nothing changed */
	RT_ADAPT_ENOMEM = -2,
	RT_ADAPT_EFULL = -3,   /* the learner holds max_sites sites already */
	RT_ADAPT_ENOSITE = -4, /* no such site, or no site at all */
};

const char *rt_adapt_strerror(int err);

typedef struct rt_adapt_config {
	double prior_alpha;   /* Beta prior, default 1 */
	double prior_beta;    /* default 1 */
	double forget;        /* per batch, in (0, 1]: alpha <- prior + forget*(alpha - prior)
			       * before adding the batch's evidence; 1 = never forget.
			       * Default 0.7 (memory of about 3 batches). */
	double percentile;    /* P in (0, 100): a round counts the sites above its P-th
			       * percentile (at least one site per round). Default 90. */
	double epsilon;       /* probability floor in [0, 1], default 0.05 */
	uint32_t draws;       /* Monte Carlo rounds per policy, >= 1, default 200 */
	uint32_t min_samples; /* spans a site needs in a batch to be updated, >= 2, default 2 */
	double evidence;      /* > 0: pseudo-observations one batch counts for:
			       * alpha += evidence u, beta += evidence (1 - u). 1 = the
			       * paper's rule. Default 3: with forget 0.7 a belief holds at
			       * most ~10 pseudo-observations (as 1 and 0.9 would) but
			       * reaches and renews them three times faster. */
	double shrink;        /* >= 0: a site's batch variance is shrunk toward the batch's
			       * median variance as if the median came with `shrink` degrees
			       * of freedom: ((n-1) var + shrink median) / (n - 1 + shrink).
			       * A site seen 3 times cannot outshout one seen 50 times by luck.
			       * 0 = the paper's plain sample variance. Default 8. */
	uint64_t seed;        /* the learner's random generator */
} rt_adapt_config;

void rt_adapt_config_default(rt_adapt_config *cfg);

/* One recorded span of a batch: its site and its latency (any unit, >= 0, finite). */
typedef struct rt_adapt_obs {
	uint64_t site;
	double latency;
} rt_adapt_obs;

/* A site as the learner sees it (rt_adapt_site_get). */
typedef struct rt_adapt_site_info {
	uint64_t site;
	double alpha, beta;
	double mean;        /* alpha / (alpha + beta): the ranking key */
	double utility;     /* the last batch's normalised utility, -1 if it was not updated */
	double probability; /* from the last rt_adapt_policy (1.0 before the first) */
	uint32_t rank;      /* 1 = most useful, from the last rt_adapt_policy (0 before) */
	uint32_t updates;   /* batches that updated it */
	bool pinned;
} rt_adapt_site_info;

typedef struct rt_adapt_stats {
	uint64_t batches;          /* accepted batches */
	uint64_t rejected_batches; /* refused with RT_ADAPT_EINVAL */
	uint64_t obs;              /* accepted observations */
	uint64_t obs_full;         /* observations of new sites beyond max_sites (skipped) */
	uint64_t policies;         /* rt_adapt_policy runs */
} rt_adapt_stats;

typedef struct rt_adapt_learner rt_adapt_learner;

/* A learner for up to max_sites sites (> 0). cfg NULL = defaults. NULL on error,
 * with *err (if given) set. */
rt_adapt_learner *rt_adapt_create(const rt_adapt_config *cfg, size_t max_sites, int *err);
void rt_adapt_destroy(rt_adapt_learner *l);

/* Registers a site at its prior (idempotent). Sites are also added by the first
 * batch that names them. */
int rt_adapt_site_add(rt_adapt_learner *l, uint64_t site);
/* Pins (probability always 1.0) or unpins a site; adds it if needed. */
int rt_adapt_pin(rt_adapt_learner *l, uint64_t site, bool pinned);

/*
 * One batch of recorded spans (all spans of the traces of one collection
 * window). Every site decays toward the prior by `forget`; each site with at
 * least min_samples spans in the batch gets utility u = var / max var (over the
 * updated sites) and alpha += u, beta += 1 - u. A batch with a non-finite or
 * negative latency or a hash 0, or an empty batch, is refused whole
 * (RT_ADAPT_EINVAL) and changes nothing.
 */
int rt_adapt_update(rt_adapt_learner *l, const rt_adapt_obs *obs, size_t n);

/* Recomputes every site's probability and rank (ABS). RT_ADAPT_ENOSITE without sites. */
int rt_adapt_policy(rt_adapt_learner *l);

size_t rt_adapt_site_count(const rt_adapt_learner *l);
/* The site at index i (0 <= i < count, in order of first sight). */
int rt_adapt_site_get(const rt_adapt_learner *l, size_t i, rt_adapt_site_info *out);
/* Probability from the last policy; 1.0 for a site the learner does not know
 * (an unknown site is always recorded). */
double rt_adapt_probability(const rt_adapt_learner *l, uint64_t site);
/* Up to max site hashes, most useful first (posterior mean, from the last
 * policy). Returns how many were written. */
size_t rt_adapt_ranking(const rt_adapt_learner *l, uint64_t *sites, size_t max);
/* Mean probability over all sites from the last policy (the share of
 * instrumentation left on, if every site records equally often). */
double rt_adapt_enabled_share(const rt_adapt_learner *l);
void rt_adapt_get_stats(const rt_adapt_learner *l, rt_adapt_stats *out);

/* The learner's generator, exposed for simulations and tests that want the same
 * kind of reproducible stream: xoshiro256** seeded by splitmix64. */
typedef struct rt_adapt_rng {
	uint64_t s[4];
	double spare_normal; /* the polar method makes normals in pairs */
	bool has_spare;
} rt_adapt_rng;

void rt_adapt_rng_seed(rt_adapt_rng *r, uint64_t seed);
uint64_t rt_adapt_rng_next(rt_adapt_rng *r);
double rt_adapt_rng_uniform(rt_adapt_rng *r);          /* in (0, 1) */
double rt_adapt_rng_normal(rt_adapt_rng *r);           /* N(0, 1) */
double rt_adapt_rng_gamma(rt_adapt_rng *r, double shape); /* shape > 0, scale 1 */
double rt_adapt_rng_beta(rt_adapt_rng *r, double a, double b);

#ifdef __cplusplus
}
#endif

#endif
