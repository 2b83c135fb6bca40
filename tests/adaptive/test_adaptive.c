/*
 * test_adaptive.c — the learner against synthetic traces with a known culprit.
 *
 * Each trace records one span per site; site i's latency is normal with its own
 * mean and a small spread, except the culprit's, whose spread is injected. The
 * loop is closed as in production: a site's span is recorded only with the
 * probability the last policy gave it, so the learner sees what the client
 * would have kept.
 */
#include "adaptive.h"
#include "policy_table.h"

#include <check.h>

#include "common/suite.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SITES 64
#define BATCH_TRACES 50

typedef struct sim {
	size_t n;
	uint64_t site[MAX_SITES];
	double mean[MAX_SITES], sd[MAX_SITES];
	rt_adapt_rng rng;
	rt_adapt_obs obs[MAX_SITES * BATCH_TRACES];
} sim;

static void sim_init(sim *s, size_t n, uint64_t seed)
{
	s->n = n;
	rt_adapt_rng_seed(&s->rng, seed);
	for (size_t i = 0; i < n; i++) {
		char op[32];
		int len = snprintf(op, sizeof op, "op-%zu", i);
		s->site[i] = rt_adapt_site_hash("svc", 3, op, (size_t)len);
		s->mean[i] = 1000.0 + 200.0 * (double)(i % 7);
		s->sd[i] = 20.0 + 10.0 * rt_adapt_rng_uniform(&s->rng);
	}
}

static void sim_set_culprit(sim *s, size_t culprit, size_t previous)
{
	s->sd[previous] = 25.0;
	s->sd[culprit] = 300.0;
}

/* One batch through the current policy; returns the observations made. */
static size_t sim_batch(sim *s, const rt_adapt_learner *l)
{
	size_t k = 0;
	for (int t = 0; t < BATCH_TRACES; t++)
		for (size_t i = 0; i < s->n; i++) {
			double p = rt_adapt_probability(l, s->site[i]);
			if (rt_adapt_rng_uniform(&s->rng) >= p)
				continue;
			double x = s->mean[i] + s->sd[i] * rt_adapt_rng_normal(&s->rng);
			s->obs[k].site = s->site[i];
			s->obs[k].latency = x < 0 ? 0 : x;
			k++;
		}
	return k;
}

static rt_adapt_learner *learner_for(const sim *s, uint64_t seed)
{
	rt_adapt_config cfg;
	rt_adapt_config_default(&cfg);
	cfg.seed = seed;
	int err = 1;
	rt_adapt_learner *l = rt_adapt_create(&cfg, MAX_SITES, &err);
	ck_assert_ptr_nonnull(l);
	ck_assert_int_eq(err, RT_ADAPT_OK);
	for (size_t i = 0; i < s->n; i++)
		ck_assert_int_eq(rt_adapt_site_add(l, s->site[i]), RT_ADAPT_OK);
	return l;
}

/* Runs batches until the culprit's probability exceeds 0.9; returns the batch
 * count (max_batches + 1 if it never did). Always runs at least min_batches. */
static int run_until_found(sim *s, rt_adapt_learner *l, size_t culprit, int min_batches,
			   int max_batches)
{
	int found = max_batches + 1;
	for (int b = 1; b <= max_batches; b++) {
		size_t k = sim_batch(s, l);
		ck_assert_int_eq(rt_adapt_update(l, s->obs, k), RT_ADAPT_OK);
		ck_assert_int_eq(rt_adapt_policy(l), RT_ADAPT_OK);
		if (found > max_batches && rt_adapt_probability(l, s->site[culprit]) > 0.9)
			found = b;
		if (found <= max_batches && b >= min_batches)
			break;
	}
	return found;
}

START_TEST(rng_draws_have_the_right_means)
{
	rt_adapt_rng r;
	rt_adapt_rng_seed(&r, 42);
	const double shapes[][2] = {{2, 5}, {0.5, 0.5}, {1, 1}, {30, 3}};
	for (size_t c = 0; c < 4; c++) {
		double a = shapes[c][0], b = shapes[c][1], sum = 0.0, g = 0.0;
		const int n = 40000;
		for (int i = 0; i < n; i++) {
			double x = rt_adapt_rng_beta(&r, a, b);
			ck_assert(x >= 0.0 && x <= 1.0);
			sum += x;
			g += rt_adapt_rng_gamma(&r, a);
		}
		ck_assert_double_eq_tol(sum / n, a / (a + b), 0.01);
		ck_assert_double_eq_tol(g / n, a, 0.03 * a + 0.01);
	}
	/* Same seed, same stream. */
	rt_adapt_rng r1, r2;
	rt_adapt_rng_seed(&r1, 7);
	rt_adapt_rng_seed(&r2, 7);
	for (int i = 0; i < 100; i++)
		ck_assert_uint_eq(rt_adapt_rng_next(&r1), rt_adapt_rng_next(&r2));
}
END_TEST

START_TEST(site_hash_separates_service_and_operation)
{
	uint64_t a = rt_adapt_site_hash("ab", 2, "c", 1);
	uint64_t b = rt_adapt_site_hash("a", 1, "bc", 2);
	uint64_t c = rt_adapt_site_hash("ab", 2, "c", 1);
	ck_assert_uint_ne(a, b);
	ck_assert_uint_eq(a, c);
	ck_assert_uint_ne(rt_adapt_site_hash("", 0, "", 0), 0);
}
END_TEST

/* Known arithmetic: utilities, the update, and forgetting toward the prior. */
START_TEST(update_follows_the_rule)
{
	rt_adapt_config cfg;
	rt_adapt_config_default(&cfg);
	cfg.forget = 1.0;
	cfg.evidence = 1.0; /* the paper's rule: one batch, one observation */
	cfg.shrink = 0.0;   /* the plain sample variance first */
	rt_adapt_learner *l = rt_adapt_create(&cfg, 8, NULL);
	ck_assert_ptr_nonnull(l);
	/* A: {0, 2} variance 2; B: {0, 1} variance 0.5; C: one span, no update. */
	rt_adapt_obs b1[] = {{10, 0}, {10, 2}, {20, 0}, {20, 1}, {30, 5}};
	ck_assert_int_eq(rt_adapt_update(l, b1, 5), RT_ADAPT_OK);
	ck_assert_uint_eq(rt_adapt_site_count(l), 3);
	rt_adapt_site_info a, b, c;
	ck_assert_int_eq(rt_adapt_site_get(l, 0, &a), RT_ADAPT_OK);
	ck_assert_int_eq(rt_adapt_site_get(l, 1, &b), RT_ADAPT_OK);
	ck_assert_int_eq(rt_adapt_site_get(l, 2, &c), RT_ADAPT_OK);
	ck_assert_uint_eq(a.site, 10);
	ck_assert_double_eq_tol(a.alpha, 2.0, 1e-12);
	ck_assert_double_eq_tol(a.beta, 1.0, 1e-12);
	ck_assert_double_eq_tol(b.alpha, 1.25, 1e-12);
	ck_assert_double_eq_tol(b.beta, 1.75, 1e-12);
	ck_assert_double_eq_tol(b.utility, 0.25, 1e-12);
	ck_assert_double_eq_tol(c.alpha, 1.0, 1e-12);
	ck_assert_double_eq_tol(c.beta, 1.0, 1e-12);
	ck_assert_double_eq_tol(c.utility, -1.0, 1e-12);
	rt_adapt_destroy(l);

	/* forget = 0.5: every belief halves its distance to the prior first. */
	cfg.forget = 0.5;
	l = rt_adapt_create(&cfg, 8, NULL);
	ck_assert_int_eq(rt_adapt_update(l, b1, 4), RT_ADAPT_OK);
	rt_adapt_obs b2[] = {{10, 0}, {10, 4}, {20, 3}};
	ck_assert_int_eq(rt_adapt_update(l, b2, 3), RT_ADAPT_OK);
	ck_assert_int_eq(rt_adapt_site_get(l, 0, &a), RT_ADAPT_OK);
	ck_assert_int_eq(rt_adapt_site_get(l, 1, &b), RT_ADAPT_OK);
	ck_assert_double_eq_tol(a.alpha, 1.0 + 0.5 * 1.0 + 1.0, 1e-12);
	ck_assert_double_eq_tol(a.beta, 1.0, 1e-12);
	ck_assert_double_eq_tol(b.alpha, 1.0 + 0.5 * 0.25, 1e-12);
	ck_assert_double_eq_tol(b.beta, 1.0 + 0.5 * 0.75, 1e-12);
	ck_assert_uint_eq(a.updates, 2);
	ck_assert_uint_eq(b.updates, 1);
	rt_adapt_destroy(l);

	/* shrink = 2: variances 2 and 0.5 (one degree of freedom each), the batch
	 * median (upper, of two) is 2: B becomes (0.5 + 2 * 2) / 3 = 1.5, u = 0.75. */
	cfg.forget = 1.0;
	cfg.shrink = 2.0;
	l = rt_adapt_create(&cfg, 8, NULL);
	ck_assert_int_eq(rt_adapt_update(l, b1, 4), RT_ADAPT_OK);
	ck_assert_int_eq(rt_adapt_site_get(l, 1, &b), RT_ADAPT_OK);
	ck_assert_double_eq_tol(b.utility, 0.75, 1e-12);
	ck_assert_double_eq_tol(b.alpha, 1.75, 1e-12);
	rt_adapt_destroy(l);

	/* evidence = 3: a batch counts three times. */
	cfg.shrink = 0.0;
	cfg.evidence = 3.0;
	l = rt_adapt_create(&cfg, 8, NULL);
	ck_assert_int_eq(rt_adapt_update(l, b1, 4), RT_ADAPT_OK);
	ck_assert_int_eq(rt_adapt_site_get(l, 1, &b), RT_ADAPT_OK);
	ck_assert_double_eq_tol(b.alpha, 1.0 + 3 * 0.25, 1e-12);
	ck_assert_double_eq_tol(b.beta, 1.0 + 3 * 0.75, 1e-12);
	rt_adapt_destroy(l);
}
END_TEST

/* Equal beliefs: each site is above the 90th percentile in ~10 % of rounds;
 * with fewer than 10 sites still one site per round. */
START_TEST(abs_on_equal_beliefs)
{
	rt_adapt_config cfg;
	rt_adapt_config_default(&cfg);
	cfg.epsilon = 0.0;
	cfg.draws = 2000;
	rt_adapt_learner *l = rt_adapt_create(&cfg, 200, NULL);
	for (uint64_t s = 1; s <= 100; s++)
		rt_adapt_site_add(l, s);
	ck_assert_int_eq(rt_adapt_policy(l), RT_ADAPT_OK);
	ck_assert_double_eq_tol(rt_adapt_enabled_share(l), 0.10, 1e-9);
	for (uint64_t s = 1; s <= 100; s++)
		ck_assert_double_eq_tol(rt_adapt_probability(l, s), 0.10, 0.04);
	rt_adapt_destroy(l);

	l = rt_adapt_create(&cfg, 8, NULL);
	for (uint64_t s = 1; s <= 3; s++)
		rt_adapt_site_add(l, s);
	ck_assert_int_eq(rt_adapt_policy(l), RT_ADAPT_OK);
	ck_assert_double_eq_tol(rt_adapt_enabled_share(l), 1.0 / 3.0, 1e-9);
	/* An unknown site is always recorded. */
	ck_assert_double_eq(rt_adapt_probability(l, 999), 1.0);
	rt_adapt_destroy(l);
}
END_TEST

START_TEST(culprit_found_within_bounded_batches)
{
	/* Several seeds and culprit positions; 10 batches of 50 traces = 500. */
	for (uint64_t seed = 1; seed <= 6; seed++) {
		sim s;
		sim_init(&s, 30, seed);
		size_t culprit = (size_t)(seed * 7) % 30;
		sim_set_culprit(&s, culprit, (culprit + 1) % 30);
		rt_adapt_learner *l = learner_for(&s, seed + 100);
		int found = run_until_found(&s, l, culprit, 12, 10);
		ck_assert_msg(found <= 10, "seed %llu: culprit p > 0.9 not within 10 batches",
			      (unsigned long long)seed);
		uint64_t top[5];
		ck_assert_uint_eq(rt_adapt_ranking(l, top, 5), 5);
		ck_assert_uint_eq(top[0], s.site[culprit]);
		rt_adapt_site_info info;
		for (size_t i = 0; i < s.n; i++) {
			ck_assert_int_eq(rt_adapt_site_get(l, i, &info), RT_ADAPT_OK);
			if (info.site == s.site[culprit])
				ck_assert_uint_eq(info.rank, 1);
		}
		/* Most instrumentation is off once the culprit is known. */
		ck_assert(rt_adapt_enabled_share(l) < 0.25);
		rt_adapt_destroy(l);
	}
}
END_TEST

START_TEST(epsilon_floor_respected)
{
	const double floors[] = {0.05, 0.2};
	for (size_t f = 0; f < 2; f++) {
		sim s;
		sim_init(&s, 40, 11 + f);
		sim_set_culprit(&s, 5, 6);
		rt_adapt_config cfg;
		rt_adapt_config_default(&cfg);
		cfg.epsilon = floors[f];
		rt_adapt_learner *l = rt_adapt_create(&cfg, MAX_SITES, NULL);
		for (size_t i = 0; i < s.n; i++)
			rt_adapt_site_add(l, s.site[i]);
		size_t at_floor = 0;
		for (int b = 0; b < 15; b++) {
			size_t k = sim_batch(&s, l);
			ck_assert_int_eq(rt_adapt_update(l, s.obs, k), RT_ADAPT_OK);
			ck_assert_int_eq(rt_adapt_policy(l), RT_ADAPT_OK);
			for (size_t i = 0; i < s.n; i++) {
				double p = rt_adapt_probability(l, s.site[i]);
				ck_assert(p >= floors[f] && p <= 1.0);
				at_floor += p == floors[f];
			}
		}
		/* The floor is active, not vacuous: ABS alone spreads the other ~10 %
		 * over the calm sites, so a 20 % floor holds most of them, a 5 % one
		 * some of them. */
		ck_assert_uint_gt(at_floor, f == 0 ? 0 : s.n * 5);
		rt_adapt_destroy(l);
	}
}
END_TEST

START_TEST(pinned_sites_stay_on)
{
	sim s;
	sim_init(&s, 30, 5);
	sim_set_culprit(&s, 9, 10);
	rt_adapt_learner *l = learner_for(&s, 5);
	ck_assert_int_eq(rt_adapt_pin(l, s.site[3], true), RT_ADAPT_OK);
	uint64_t extra = rt_adapt_site_hash("ops", 3, "pinned-new", 10);
	ck_assert_int_eq(rt_adapt_pin(l, extra, true), RT_ADAPT_OK);
	for (int b = 0; b < 10; b++) {
		size_t k = sim_batch(&s, l);
		ck_assert_int_eq(rt_adapt_update(l, s.obs, k), RT_ADAPT_OK);
		ck_assert_int_eq(rt_adapt_policy(l), RT_ADAPT_OK);
		ck_assert_double_eq(rt_adapt_probability(l, s.site[3]), 1.0);
		ck_assert_double_eq(rt_adapt_probability(l, extra), 1.0);
	}
	/* Unpinned, the same site falls back to what its belief earns. */
	ck_assert_int_eq(rt_adapt_pin(l, s.site[3], false), RT_ADAPT_OK);
	ck_assert_int_eq(rt_adapt_policy(l), RT_ADAPT_OK);
	ck_assert(rt_adapt_probability(l, s.site[3]) < 0.5);
	rt_adapt_site_info info;
	ck_assert_int_eq(rt_adapt_site_get(l, 0, &info), RT_ADAPT_OK);
	ck_assert(!info.pinned);
	rt_adapt_destroy(l);
}
END_TEST

START_TEST(forgetting_follows_a_new_culprit)
{
	for (uint64_t seed = 1; seed <= 4; seed++) {
		sim s;
		sim_init(&s, 30, seed + 50);
		size_t first = 4, second = 21;
		sim_set_culprit(&s, first, second);
		rt_adapt_learner *l = learner_for(&s, seed);
		ck_assert_int_le(run_until_found(&s, l, first, 12, 12), 12);
		/* The variance moves: the old culprit calms down, a new one appears. */
		s.sd[first] = 25.0;
		s.sd[second] = 300.0;
		int found = run_until_found(&s, l, second, 1, 30);
		ck_assert_msg(found <= 30, "seed %llu: new culprit not found in 30 batches",
			      (unsigned long long)seed);
		/* Let the old culprit's evidence fade a little longer. */
		for (int b = 0; b < 10; b++) {
			size_t k = sim_batch(&s, l);
			rt_adapt_update(l, s.obs, k);
			rt_adapt_policy(l);
		}
		uint64_t top[1];
		ck_assert_uint_eq(rt_adapt_ranking(l, top, 1), 1);
		ck_assert_uint_eq(top[0], s.site[second]);
		ck_assert(rt_adapt_probability(l, s.site[first]) < 0.5);
		rt_adapt_destroy(l);
	}
}
END_TEST

static void beliefs(const rt_adapt_learner *l, double *out)
{
	rt_adapt_site_info info;
	for (size_t i = 0; i < rt_adapt_site_count(l); i++) {
		rt_adapt_site_get(l, i, &info);
		out[2 * i] = info.alpha;
		out[2 * i + 1] = info.beta;
	}
}

START_TEST(invalid_input_rejected)
{
	int err = 0;
	ck_assert_ptr_null(rt_adapt_create(NULL, 0, &err));
	ck_assert_int_eq(err, RT_ADAPT_EINVAL);
	rt_adapt_config cfg;
	rt_adapt_config_default(&cfg);
	cfg.forget = 0.0;
	ck_assert_ptr_null(rt_adapt_create(&cfg, 4, &err));
	rt_adapt_config_default(&cfg);
	cfg.percentile = 100.0;
	ck_assert_ptr_null(rt_adapt_create(&cfg, 4, &err));
	rt_adapt_config_default(&cfg);
	cfg.epsilon = NAN;
	ck_assert_ptr_null(rt_adapt_create(&cfg, 4, &err));
	rt_adapt_config_default(&cfg);
	cfg.draws = 0;
	ck_assert_ptr_null(rt_adapt_create(&cfg, 4, &err));
	ck_assert_int_eq(err, RT_ADAPT_EINVAL);
	ck_assert_str_ne(rt_adapt_strerror(RT_ADAPT_EINVAL), "unknown error");

	rt_adapt_learner *l = rt_adapt_create(NULL, 3, &err);
	ck_assert_ptr_nonnull(l);
	/* Zero sites: no policy. */
	ck_assert_int_eq(rt_adapt_policy(l), RT_ADAPT_ENOSITE);
	uint64_t top[4];
	ck_assert_uint_eq(rt_adapt_ranking(l, top, 4), 0);
	rt_adapt_obs good[] = {{1, 1.0}, {1, 3.0}, {2, 1.0}, {2, 1.5}};
	ck_assert_int_eq(rt_adapt_update(l, good, 4), RT_ADAPT_OK);
	double before[8], after[8];
	beliefs(l, before);

	rt_adapt_obs nan_batch[] = {{1, 1.0}, {1, NAN}, {2, 5.0}};
	rt_adapt_obs inf_batch[] = {{1, INFINITY}, {1, 1.0}};
	rt_adapt_obs neg_batch[] = {{1, -1.0}, {1, 1.0}};
	rt_adapt_obs zero_site[] = {{0, 1.0}, {1, 1.0}};
	ck_assert_int_eq(rt_adapt_update(l, nan_batch, 3), RT_ADAPT_EINVAL);
	ck_assert_int_eq(rt_adapt_update(l, inf_batch, 2), RT_ADAPT_EINVAL);
	ck_assert_int_eq(rt_adapt_update(l, neg_batch, 2), RT_ADAPT_EINVAL);
	ck_assert_int_eq(rt_adapt_update(l, zero_site, 2), RT_ADAPT_EINVAL);
	ck_assert_int_eq(rt_adapt_update(l, good, 0), RT_ADAPT_EINVAL);
	ck_assert_int_eq(rt_adapt_update(l, NULL, 4), RT_ADAPT_EINVAL);
	ck_assert_int_eq(rt_adapt_update(NULL, good, 4), RT_ADAPT_EINVAL);
	beliefs(l, after);
	ck_assert_mem_eq(before, after, 2 * rt_adapt_site_count(l) * sizeof(double));
	rt_adapt_stats st;
	rt_adapt_get_stats(l, &st);
	ck_assert_uint_eq(st.rejected_batches, 6);
	ck_assert_uint_eq(st.batches, 1);

	/* Full table: new sites beyond max_sites are counted and skipped. */
	ck_assert_int_eq(rt_adapt_site_add(l, 3), RT_ADAPT_OK);
	ck_assert_int_eq(rt_adapt_site_add(l, 4), RT_ADAPT_EFULL);
	ck_assert_int_eq(rt_adapt_pin(l, 5, true), RT_ADAPT_EFULL);
	ck_assert_int_eq(rt_adapt_site_add(l, 0), RT_ADAPT_EINVAL);
	rt_adapt_obs overflow[] = {{9, 1.0}, {9, 2.0}, {1, 1.0}, {1, 2.0}};
	ck_assert_int_eq(rt_adapt_update(l, overflow, 4), RT_ADAPT_OK);
	rt_adapt_get_stats(l, &st);
	ck_assert_uint_eq(st.obs_full, 2);
	ck_assert_uint_eq(rt_adapt_site_count(l), 3);
	rt_adapt_site_info info;
	ck_assert_int_eq(rt_adapt_site_get(l, 3, &info), RT_ADAPT_ENOSITE);
	ck_assert_int_eq(rt_adapt_site_get(l, 0, NULL), RT_ADAPT_EINVAL);
	ck_assert_int_eq(rt_adapt_policy(l), RT_ADAPT_OK);
	rt_adapt_destroy(l);
	rt_adapt_destroy(NULL);
}
END_TEST

START_TEST(policy_table_round_trip)
{
	enum { N = 1000, CAP = 4096 };
	static uint64_t slots[CAP], sites[N];
	static double probs[N];
	rt_adapt_rng r;
	rt_adapt_rng_seed(&r, 3);
	for (size_t i = 0; i < N; i++) {
		char op[32];
		int len = snprintf(op, sizeof op, "op-%zu", i);
		sites[i] = rt_adapt_site_hash("svc", 3, op, (size_t)len);
		probs[i] = i == 0 ? 1.0 : rt_adapt_rng_uniform(&r);
	}
	ck_assert_uint_eq(rt_adapt_table_capacity(N), CAP);
	ck_assert_int_eq(rt_adapt_table_build(slots, CAP, sites, probs, N), 0);
	for (size_t i = 0; i < N; i++) {
		uint16_t p16 = rt_adapt_table_lookup(slots, CAP, sites[i]);
		ck_assert_uint_eq(p16, rt_adapt_p16(probs[i]));
		ck_assert_double_eq_tol(p16 / 65535.0, probs[i], 1.0 / 65535);
	}
	ck_assert_uint_eq(rt_adapt_table_lookup(slots, CAP, sites[0]), RT_ADAPT_P16_ALWAYS);
	/* Unknown sites are always recorded. */
	for (uint64_t x = 1; x < 2000; x++)
		ck_assert_uint_eq(rt_adapt_table_lookup(slots, CAP, x * 0x9e3779b97f4a7c15ull),
				  RT_ADAPT_P16_ALWAYS);
	/* The keep decision follows p16. */
	ck_assert(rt_adapt_keep(RT_ADAPT_P16_ALWAYS, 0xFFFF));
	ck_assert(!rt_adapt_keep(0, 0));
	ck_assert(rt_adapt_keep(rt_adapt_p16(0.5), 100));
	ck_assert(!rt_adapt_keep(rt_adapt_p16(0.5), 40000));
	size_t kept = 0;
	for (uint32_t v = 0; v < 65536; v++)
		kept += rt_adapt_keep(rt_adapt_p16(0.05), (uint16_t)v);
	ck_assert_uint_eq(kept, rt_adapt_p16(0.05));
	ck_assert_uint_eq(rt_adapt_p16(NAN), RT_ADAPT_P16_ALWAYS);
	ck_assert_uint_eq(rt_adapt_p16(-1.0), 0);
	ck_assert_uint_eq(rt_adapt_p16(2.0), RT_ADAPT_P16_ALWAYS);
}
END_TEST

START_TEST(policy_table_refuses_what_it_cannot_hold)
{
	uint64_t slots[16];
	uint64_t sites[17];
	double probs[17];
	for (size_t i = 0; i < 17; i++) {
		sites[i] = (i + 1) << 20; /* all in slot 0: the probe bound is hit */
		probs[i] = 0.25;
	}
	ck_assert_int_eq(rt_adapt_table_build(slots, 16, sites, probs, 9), -1);
	for (size_t i = 0; i < 16; i++)
		ck_assert_uint_eq(slots[i], 0); /* left empty: everything recorded */
	ck_assert_int_eq(rt_adapt_table_build(slots, 16, sites, probs, 8), 0);
	ck_assert_uint_eq(rt_adapt_table_lookup(slots, 16, sites[7]), rt_adapt_p16(0.25));
	ck_assert_int_eq(rt_adapt_table_build(slots, 12, sites, probs, 2), -1);
	ck_assert_int_eq(rt_adapt_table_build(slots, 4, sites, probs, 2), -1);
	uint64_t zero = 0;
	ck_assert_int_eq(rt_adapt_table_build(slots, 16, &zero, probs, 1), -1);
	/* A site given twice keeps its last probability; a full probe run of
	 * other sites still ends a lookup within the bound. */
	uint64_t twice[2] = {5, 5};
	double p2[2] = {0.1, 0.9};
	ck_assert_int_eq(rt_adapt_table_build(slots, 16, twice, p2, 2), 0);
	ck_assert_uint_eq(rt_adapt_table_lookup(slots, 16, 5), rt_adapt_p16(0.9));
	/* Top 48 bits zero: tag 1, still found. */
	uint64_t low = 0x1234;
	ck_assert_int_eq(rt_adapt_table_build(slots, 16, &low, p2, 1), 0);
	ck_assert_uint_eq(rt_adapt_table_lookup(slots, 16, low), rt_adapt_p16(0.1));
}
END_TEST

static Suite *adaptive_suite(void)
{
	Suite *s = suite_create("adaptive");
	TCase *tc = tcase_create("learner");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, rng_draws_have_the_right_means);
	tcase_add_test(tc, site_hash_separates_service_and_operation);
	tcase_add_test(tc, update_follows_the_rule);
	tcase_add_test(tc, abs_on_equal_beliefs);
	tcase_add_test(tc, culprit_found_within_bounded_batches);
	tcase_add_test(tc, epsilon_floor_respected);
	tcase_add_test(tc, pinned_sites_stay_on);
	tcase_add_test(tc, forgetting_follows_a_new_culprit);
	tcase_add_test(tc, invalid_input_rejected);
	tcase_add_test(tc, policy_table_round_trip);
	tcase_add_test(tc, policy_table_refuses_what_it_cannot_hold);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(adaptive_suite());
}
