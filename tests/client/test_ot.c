/*
 * Sampling across hosts (docs/client.md "Sampling across hosts"):
 *  - OpenTelemetry's tracestate member ot=th:…;rv:…: the spec's threshold
 *    vectors parse and format, malformed ot members are ignored and counted
 *    without touching rt= or the rest of the tracestate, unknown ot sub-keys go
 *    on; the binary form version 1 carries th, rv and the random flag, version 0
 *    still parses.
 *  - The decision: the caller's rv, else the id's low 56 bits under the W3C
 *    random flag, else the id hash; exactly at the threshold boundary.
 *  - §2.9: a rate that is not a power of two (RETRACE_TRACE_PERCENT=30) records
 *    each trace at one of the two neighbouring powers; the inverse-rate estimate
 *    of the number of traces is unbiased (mean within 3 standard errors) and
 *    integral, the choice is consistent with the keep rule at the chosen power,
 *    and the chosen exponent is what the buffers carry.
 *  - §2.10: a host that does not record the trace propagates its caller's span
 *    as the parent and its caller's hops, text and binary.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h" /* the exponent a begin chose (rt_thread_tls.ctx) */
#include "common/collect.h"
#include "common/testpool.h"
#include "retrace/retrace.h"

#define ID_HEX     "4bf92f3577b34da6a3ce929d0e0e4736"
#define TP_SAMPLED "00-" ID_HEX "-00f067aa0ba902b7-01"

static void configure(const char *pool, uint32_t shift, uint32_t ppm)
{
	struct retrace_config cfg;
	retrace_config_from_env(&cfg);
	cfg.pool_name = pool;
	cfg.sample_shift = shift;
	cfg.sample_ppm = ppm;
	cfg.quiet = 1;
	retrace_init(&cfg);
}

/* ------------------------------------------------------------ parsing ---- */

/* The spec's table of 1-in-N thresholds (tracestate-probability-sampling.md,
 * precision 4) and its worked 1 % example (precision 5), plus the extremes. */
static const struct {
	const char *th;
	uint64_t value;
} th_vectors[] = {
	{ "0", 0 },
	{ "8", 0x80000000000000ull },              /* 1 in 2 */
	{ "aaab", 0xaaab0000000000ull },           /* 1 in 3 */
	{ "c", 0xc0000000000000ull },              /* 1 in 4 */
	{ "cccd", 0xcccd0000000000ull },           /* 1 in 5 */
	{ "e", 0xe0000000000000ull },              /* 1 in 8 */
	{ "e666", 0xe6660000000000ull },           /* 1 in 10 */
	{ "f", 0xf0000000000000ull },              /* 1 in 16 */
	{ "fd70a4", 0xfd70a400000000ull },         /* 1 in 100, the spec's example */
	{ "ffbe77", 0xffbe7700000000ull },         /* 1 in 1000 */
	{ "fff9724", 0xfff97240000000ull },        /* 1 in 10000 */
	{ "ffffffffffffff", 0xffffffffffffffull }, /* 2^-56 */
	{ "FD70A4", 0xfd70a400000000ull },         /* the spec's hexdigit allows A-F */
};

START_TEST(test_th_vectors)
{
	char ts[128];
	struct retrace_wire_context w;
	snprintf(ts, sizeof ts, "rt=00000007.00000003.1,ot=th:%s", th_vectors[_i].th);
	ck_assert_int_eq(retrace_parse_context(TP_SAMPLED, ts, &w), RETRACE_OK);
	ck_assert_int_eq(w.state_rejected, 0);
	ck_assert_int_eq(w.ot_rejected, 0);
	ck_assert_int_eq(w.ot_has_th, 1);
	ck_assert_int_eq(w.ot_has_rv, 0);
	ck_assert_msg(w.ot_th == th_vectors[_i].value, "th:%s -> %#llx", th_vectors[_i].th,
		      (unsigned long long)w.ot_th);
	ck_assert_uint_eq(w.hops[0], 7);
}
END_TEST

START_TEST(test_rv_and_other_subkeys)
{
	struct retrace_wire_context w;
	ck_assert_int_eq(retrace_parse_context(TP_SAMPLED,
					       "x=1,ot=foo:Bar.1_-;rv:0123456789abcd;th:c,y=2", &w),
			 RETRACE_OK);
	ck_assert_int_eq(w.state_rejected, 0);
	ck_assert_int_eq(w.ot_rejected, 0);
	ck_assert_int_eq(w.ot_has_rv, 1);
	ck_assert_uint_eq(w.ot_rv, 0x0123456789abcdull);
	ck_assert_int_eq(w.ot_has_th, 1);
	ck_assert_uint_eq(w.ot_th, 0xc0000000000000ull);
	/* the keep rule matches the spec's: rv >= th */
	ck_assert(retrace_ot_keeps(0xc0000000000000ull, 2));
	ck_assert(!retrace_ot_keeps(0xbfffffffffffffull, 2));
	ck_assert_uint_eq(retrace_ot_threshold(2), 0xc0000000000000ull);
	ck_assert_uint_eq(retrace_ot_threshold(0), 0);
	ck_assert_uint_eq(retrace_ot_threshold(56), 0xffffffffffffffull);
}
END_TEST

static const char *const bad_ot[] = {
	"th:",                /* empty th */
	"th:123456789abcdef", /* 15 digits */
	"th:8g",              /* not hex */
	"rv:0123456789abc",   /* 13 digits */
	"rv:0123456789abcde", /* 15 digits */
	"rv:0123456789abcg",  /* not hex */
	"th:8;th:c",          /* duplicate sub-key */
	"TH:8",               /* keys are lowercase */
	"1h:8",               /* keys start with a letter */
	";th:8",              /* empty sub-member */
	"th:8;",              /* trailing separator */
	"th8",                /* no colon */
	":8",                 /* no key */
	"th:8;x:a!b",         /* '!' is no ot value character */
	"th:8;x:a b",         /* nor is a space */
};

START_TEST(test_bad_ot_ignored_and_counted)
{
	char ts[128], tp[64], out[RETRACE_TRACESTATE_MAX + 1];
	struct retrace_wire_context w;
	struct retrace_thread_stats st;
	struct rt_pool pool;
	char name[64];

	snprintf(ts, sizeof ts, "a=b,rt=00000007.00000003.1,ot=%s,c=d", bad_ot[_i]);
	ck_assert_int_eq(retrace_parse_context(TP_SAMPLED, ts, &w), RETRACE_OK);
	ck_assert_msg(w.ot_rejected == 1, "accepted ot=%s", bad_ot[_i]);
	ck_assert_int_eq(w.state_rejected, 0);
	ck_assert_int_eq(w.ot_has_th, 0);
	ck_assert_int_eq(w.ot_has_rv, 0);
	ck_assert_uint_eq(w.hops[0], 7); /* rt= still counts */
	ck_assert_uint_eq(w.hops[1], 3);
	ck_assert_int_eq(w.fired, 1);

	/* deserialize counts it, and the trace goes on as if no ot had come */
	test_pool_name(name, sizeof name, "otbad");
	test_pool_create(&pool, name, 4096, 16);
	configure(name, 0, 0);
	ck_assert_int_eq(retrace_deserialize(TP_SAMPLED, ts, &w), RETRACE_OK);
	ck_assert_int_eq(retrace_begin(w.trace_id), 1);
	retrace_thread_stats(&st);
	ck_assert_uint_eq(st.ot_rejected, 1);
	ck_assert_int_eq(retrace_serialize(tp, sizeof tp, out, sizeof out, ts), RETRACE_OK);
	ck_assert_int_eq(retrace_parse_context(tp, out, &w), RETRACE_OK);
	ck_assert_int_eq(w.ot_has_th, 1);
	ck_assert_int_eq(strncmp(out, "rt=0000002a.00000007.1,ot=th:0;rv:", 34), 0);
	ck_assert_ptr_nonnull(strstr(out, ",a=b,c=d")); /* the other members go on */
	ck_assert_int_eq(w.ot_rejected, 0);             /* ours replaced the bad one */
	retrace_end();
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

/* ----------------------------------------------------- emit and decide ---- */

static void th_string(uint32_t k, char *out, size_t size)
{
	/* th(k) = 2^56 - 2^(56-k): k/4 f's then 0, 8, c or e */
	static const char last[4] = { 0, '8', 'c', 'e' };
	size_t n = 0;
	uint32_t i;
	if (k == 0) {
		snprintf(out, size, "0");
		return;
	}
	for (i = 0; i < k / 4; i++)
		out[n++] = 'f';
	if (k % 4)
		out[n++] = last[k % 4];
	out[n] = 0;
}

/* A host at rate 2^-k continuing a trace whose caller sent rv = all ones (kept
 * at every rate) writes ot=th:<th(k)>;rv:<the same>, and the value parses back. */
START_TEST(test_emit_threshold_of_this_hop)
{
	uint32_t k = (uint32_t)_i;
	struct rt_pool pool;
	struct retrace_wire_context w, back;
	char name[64], tp[64], ts[RETRACE_TRACESTATE_MAX + 1], want[128], th[20];
	uint8_t bin[RETRACE_BINARY_CONTEXT_LEN];

	test_pool_name(name, sizeof name, "otemit");
	test_pool_create(&pool, name, 4096, 16);
	configure(name, k, 0);
	ck_assert_int_eq(retrace_deserialize(TP_SAMPLED, "ot=rv:ffffffffffffff;zz:keep", &w),
			 RETRACE_OK);
	ck_assert_int_eq(retrace_begin(w.trace_id), 1);
	ck_assert_int_eq(
		retrace_serialize(tp, sizeof tp, ts, sizeof ts, "q=1,ot=rv:ffffffffffffff;zz:keep"),
		RETRACE_OK);
	th_string(k, th, sizeof th);
	snprintf(want, sizeof want, "rt=0000002a.00000000.0,ot=th:%s;rv:ffffffffffffff;zz:keep,q=1",
		 th);
	ck_assert_str_eq(ts, want);
	ck_assert_int_eq(retrace_parse_context(tp, ts, &back), RETRACE_OK);
	ck_assert_uint_eq(back.ot_th, retrace_ot_threshold(k));
	ck_assert_uint_eq(back.ot_rv, RETRACE_RV_MASK);

	/* binary: the same threshold and randomness */
	ck_assert_int_eq(retrace_serialize_binary(bin), RETRACE_OK);
	ck_assert_int_eq(retrace_parse_binary(bin, sizeof bin, &back), RETRACE_OK);
	ck_assert_int_eq(back.ot_has_th, 1);
	ck_assert_uint_eq(back.ot_th, retrace_ot_threshold(k));
	ck_assert_int_eq(back.ot_has_rv, 1);
	ck_assert_uint_eq(back.ot_rv, RETRACE_RV_MASK);
	ck_assert_int_eq(back.trace_flags, RETRACE_TRACE_FLAG_SAMPLED);
	retrace_end();
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

static int decide(const char *tp, const char *ts)
{
	struct retrace_wire_context w;
	int rec;
	ck_assert_int_eq(retrace_deserialize(tp, ts, &w), RETRACE_OK);
	rec = retrace_begin(w.trace_id);
	retrace_end();
	return rec;
}

/* The caller's randomness decides, exactly at the threshold: rv, else the id's
 * low 56 bits when the random flag is set, else the id hash. */
START_TEST(test_decision_on_callers_randomness)
{
	uint32_t k = (uint32_t)_i + 1; /* 1..8 */
	uint64_t th = retrace_ot_threshold(k);
	char ts[64], tp[64];
	retrace_trace_id id = { 0x4bf92f3577b34da6ull, 0 };

	configure("/rt-test-no-pool", k, 0);
	/* explicit rv */
	snprintf(ts, sizeof ts, "ot=rv:%014llx", (unsigned long long)th);
	ck_assert_int_eq(decide(TP_SAMPLED, ts), 1);
	snprintf(ts, sizeof ts, "ot=th:0;rv:%014llx", (unsigned long long)(th - 1));
	ck_assert_int_eq(decide(TP_SAMPLED, ts), 0);
	/* the W3C random flag: the id's low 56 bits (the top byte is not R) */
	id.lo = 0xab00000000000000ull | th;
	snprintf(tp, sizeof tp, "00-%016llx%016llx-00f067aa0ba902b7-03", (unsigned long long)id.hi,
		 (unsigned long long)id.lo);
	ck_assert_int_eq(decide(tp, NULL), 1);
	id.lo = 0xff00000000000000ull | (th - 1);
	snprintf(tp, sizeof tp, "00-%016llx%016llx-00f067aa0ba902b7-03", (unsigned long long)id.hi,
		 (unsigned long long)id.lo);
	ck_assert_int_eq(decide(tp, NULL), 0);
	/* without the flag, the same id goes by its hash */
	snprintf(tp, sizeof tp, "00-%016llx%016llx-00f067aa0ba902b7-01", (unsigned long long)id.hi,
		 (unsigned long long)id.lo);
	ck_assert_int_eq(decide(tp, NULL), retrace_sampled(id, k));
	/* rv wins over the random flag */
	snprintf(tp, sizeof tp, "00-%016llx%016llx-00f067aa0ba902b7-03", (unsigned long long)id.hi,
		 (unsigned long long)id.lo);
	snprintf(ts, sizeof ts, "ot=rv:ffffffffffffff");
	ck_assert_int_eq(decide(tp, ts), 1);
	/* the hash rule is the keep rule on retrace_hash_rv */
	for (uint64_t i = 1; i < 20000; i++) {
		retrace_trace_id x = { 7, i * 0x9E3779B97F4A7C15ull };
		ck_assert_int_eq(retrace_sampled(x, k), retrace_ot_keeps(retrace_hash_rv(x), k));
	}
}
END_TEST

/* The random flag goes on with the trace: no rv is invented, the flag is kept. */
START_TEST(test_random_flag_propagates)
{
	struct rt_pool pool;
	struct retrace_wire_context w;
	char name[64], tp[64], ts[RETRACE_TRACESTATE_MAX + 1];
	uint8_t bin[RETRACE_BINARY_CONTEXT_LEN];

	test_pool_name(name, sizeof name, "otrand");
	test_pool_create(&pool, name, 4096, 16);
	configure(name, 0, 0);
	ck_assert_int_eq(retrace_deserialize("00-" ID_HEX "-00f067aa0ba902b7-03", NULL, &w),
			 RETRACE_OK);
	ck_assert_int_eq(retrace_begin(w.trace_id), 1);
	ck_assert_int_eq(retrace_serialize(tp, sizeof tp, ts, sizeof ts, NULL), RETRACE_OK);
	ck_assert_str_eq(tp, "00-" ID_HEX "-00f067aa0ba902b7-03");
	ck_assert_str_eq(ts, "rt=0000002a.00000000.0,ot=th:0");
	ck_assert_int_eq(retrace_serialize_binary(bin), RETRACE_OK);
	ck_assert_int_eq(retrace_parse_binary(bin, sizeof bin, &w), RETRACE_OK);
	ck_assert_int_eq(w.trace_flags, RETRACE_TRACE_FLAG_SAMPLED | RETRACE_TRACE_FLAG_RANDOM);
	ck_assert_int_eq(w.ot_has_rv, 0);
	ck_assert_int_eq(w.ot_has_th, 1);
	ck_assert_uint_eq(w.ot_th, 0);
	retrace_end();
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

START_TEST(test_binary_versions)
{
	struct retrace_wire_context w;
	uint8_t v1[RETRACE_BINARY_CONTEXT_LEN] = { 0 }, v0[RETRACE_BINARY_CONTEXT_V0_LEN] = { 0 };

	v0[1] = 3; /* sampled, fired */
	v0[17] = 5;
	v0[25] = 0x77;
	v0[29] = 9; /* hop0 */
	ck_assert_int_eq(retrace_parse_binary(v0, sizeof v0, &w), RETRACE_OK);
	ck_assert_uint_eq(w.trace_id.lo, 5);
	ck_assert_uint_eq(w.hops[0], 9);
	ck_assert_int_eq(w.fired, 1);
	ck_assert_int_eq(w.ot_has_th | w.ot_has_rv | w.ot_rejected, 0);
	v0[1] = 4; /* version 0 has no random flag */
	ck_assert_int_eq(retrace_parse_binary(v0, sizeof v0, &w), RETRACE_E_INVAL);

	memcpy(v1, v0, sizeof v0);
	v1[0] = 1;
	v1[1] = 0x1f;  /* sampled, fired, random, th, rv */
	v1[34] = 0xc0; /* th = c0000000000000 */
	v1[47] = 0x2a; /* rv = 42 */
	ck_assert_int_eq(retrace_parse_binary(v1, sizeof v1, &w), RETRACE_OK);
	ck_assert_int_eq(w.trace_flags, 3);
	ck_assert_uint_eq(w.ot_th, 0xc0000000000000ull);
	ck_assert_uint_eq(w.ot_rv, 42);
	ck_assert_int_eq(w.call_dropped, 0);
	v1[1] = 0x20 | 0x1f; /* and the call dropped (bit5) */
	ck_assert_int_eq(retrace_parse_binary(v1, sizeof v1, &w), RETRACE_OK);
	ck_assert_int_eq(w.call_dropped, 1);
	ck_assert_int_eq(w.fired, 1);
	v1[1] = 0x40 | 0x1f; /* an unknown flag */
	ck_assert_int_eq(retrace_parse_binary(v1, sizeof v1, &w), RETRACE_E_INVAL);
	v0[1] = 0x20 | 3; /* version 0 has no call-dropped flag */
	ck_assert_int_eq(retrace_parse_binary(v0, sizeof v0, &w), RETRACE_E_INVAL);
	v1[1] = 0x01; /* th and rv bytes without their flags: ot ignored, counted */
	ck_assert_int_eq(retrace_parse_binary(v1, sizeof v1, &w), RETRACE_OK);
	ck_assert_int_eq(w.ot_rejected, 1);
	ck_assert_int_eq(w.ot_has_th | w.ot_has_rv, 0);
	ck_assert_uint_eq(w.hops[0], 9);
	ck_assert_int_eq(retrace_parse_binary(v1, sizeof v1 - 1, &w), RETRACE_E_INVAL);
	ck_assert_int_eq(retrace_parse_binary(v1, RETRACE_BINARY_CONTEXT_V0_LEN, &w),
			 RETRACE_E_INVAL); /* version 1 is 48 bytes */
}
END_TEST

/* Fuzz: random bytes in the ot value never crash, never touch rt=, and
 * whatever is accepted re-parses to the same threshold and randomness. */
START_TEST(test_fuzz_ot)
{
	static const char alphabet[] = "thrv:;0189abcefABFgx.-_ !";
	uint64_t s = 0x9E3779B97F4A7C15ull;
	char ts[128];
	int i, j, n, accepted = 0;
	struct retrace_wire_context w;
	for (i = 0; i < 200000; i++) {
		n = 2;
		memcpy(ts, "ot=", 3);
		n = 3;
		for (j = 0; j < 1 + (int)(s % 24); j++) {
			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			ts[n++] = alphabet[s % (sizeof alphabet - 1)];
		}
		ts[n] = 0;
		strcat(ts, ",rt=00000007.00000003.0");
		ck_assert_int_eq(retrace_parse_context(TP_SAMPLED, ts, &w), RETRACE_OK);
		if (w.state_rejected)
			continue; /* the W3C level refused it (e.g. a space at the end) */
		ck_assert_uint_eq(w.hops[0], 7);
		ck_assert_uint_le(w.ot_th, RETRACE_RV_MASK);
		ck_assert_uint_le(w.ot_rv, RETRACE_RV_MASK);
		accepted += !w.ot_rejected;
	}
	ck_assert_int_gt(accepted, 100);
}
END_TEST

/* ----------------------------------------------------------------- §2.9 ---- */

#define N_29 200000

/* RETRACE_TRACE_PERCENT=30: between 1/2 and 1/4, 1/2 with probability 0.2. Over
 * N traces the inverse-rate estimate of N (sum of 2^k over recorded traces) is
 * within 3 standard errors of N, every term is an integer, the recorded
 * fraction is 0.3 within 3 standard errors, and each decision is the keep rule
 * at the chosen power (so consistent with any host at that power). */
START_TEST(test_rate_choice_unbiased)
{
	static const retrace_trace_id id_of_seed = { 1, 1 };
	uint64_t est = 0, sum_sq = 0, recorded = 0, at[3] = { 0 };
	double mean, var, se, frac, se_frac;
	uint32_t i;

	setenv("RETRACE_TRACE_PERCENT", "30", 1);
	setenv("RETRACE_POOL", "/rt-test-no-pool", 1);
	setenv("RETRACE_QUIET", "1", 1);
	retrace_init(NULL);
	ck_assert_uint_eq(rt_client.cfg.sample_ppm, 300000);
	ck_assert_uint_eq(rt_client.cfg.sample_shift, 1);
	/* A fixed seed for the choice (the ids are fixed too), so that the test is
	 * reproducible: a 3-standard-error bound fails 0.3 % of random seeds. */
	retrace_begin(id_of_seed);
	retrace_end();
	rt_thread_tls.rate_rng = 0x243F6A8885A308D3ull;
	for (i = 0; i < N_29; i++) {
		retrace_trace_id id = { 0x5eed, (uint64_t)i * 4096 + 1 }; /* not random */
		int rec = retrace_begin(id);
		uint32_t k = rt_thread_tls.ctx.rate_exp;
		ck_assert(k == 1 || k == 2);
		ck_assert_int_eq(rec, retrace_sampled(id, k));
		at[k]++;
		if (rec) {
			uint64_t w = UINT64_C(1) << k; /* an integer: the rate is 2^-k */
			recorded++;
			est += w;
			sum_sq += w * w;
		}
		retrace_end();
	}
	/* the estimate of N: sum of per-trace X_i, X_i = 2^k_i or 0, Var X_i estimated
	 * by the sample variance of the N terms */
	mean = (double)est / N_29;
	var = (double)sum_sq / N_29 - mean * mean;
	se = sqrt(var * N_29);
	ck_assert_msg(fabs((double)est - N_29) <= 3 * se, "estimate %llu of %d, se %.1f",
		      (unsigned long long)est, N_29, se);
	frac = (double)recorded / N_29;
	se_frac = sqrt(0.3 * 0.7 / N_29);
	ck_assert_msg(fabs(frac - 0.3) <= 3 * se_frac, "recorded %.4f, wanted 0.3", frac);
	/* 1/2 is chosen with probability 0.2 */
	ck_assert_msg(fabs((double)at[1] / N_29 - 0.2) <= 3 * sqrt(0.2 * 0.8 / N_29),
		      "1/2 chosen %.4f", (double)at[1] / N_29);
}
END_TEST

START_TEST(test_rate_split)
{
	uint64_t lower;
	ck_assert_uint_eq(retrace_rate_split(1.0, &lower), 0);
	ck_assert_uint_eq(lower, 0);
	ck_assert_uint_eq(retrace_rate_split(0.5, &lower), 1);
	ck_assert_uint_eq(lower, 0);
	ck_assert_uint_eq(retrace_rate_split(0.25, &lower), 2);
	ck_assert_uint_eq(lower, 0);
	ck_assert_uint_eq(retrace_rate_split(0.3, &lower), 1); /* P(2) = 0.8 */
	ck_assert(fabs((double)lower / 0x1.0p64 - 0.8) < 1e-12);
	ck_assert_uint_eq(retrace_rate_split(0.01, &lower), 6); /* 1/64 .. 1/128 */
	ck_assert(fabs((double)lower / 0x1.0p64 - (2.0 - 2.0 * 0.64)) < 1e-12);
	ck_assert_uint_eq(retrace_rate_split(0x1.0p-60, &lower), 56);
	ck_assert_uint_eq(retrace_rate_split(0.0, &lower), 56);
}
END_TEST

/* RETRACE_TRACE_RATE: the controller is pure arithmetic; a process beginning far
 * more traces than the limit moves to a lower rate once a window has passed
 * (waited for as a condition), and its traces then still give an unbiased
 * inverse-rate count: within 3 standard errors, Var of a trace's term being
 * 2^k - 1 at the k it was recorded at. */
START_TEST(test_trace_rate_limit)
{
	uint64_t w, est = 0, var = 0, i, n = 0;
	retrace_trace_id id = { 0xabc, 0 };
	struct retrace_config cfg;

	ck_assert(fabs(rt_rate_for_limit(1000, 10000, 1000000000ull) - 0.1) < 1e-12);
	ck_assert(rt_rate_for_limit(1000, 500, 1000000000ull) == 1.0);
	ck_assert(rt_rate_for_limit(1000, 500, 0) == 1.0);
	w = rt_rate_word(0.3);
	ck_assert_uint_eq(w >> 57, 1);
	ck_assert(fabs((double)(w << 7) / 0x1.0p64 - 0.8) < 1e-12);
	ck_assert_uint_eq(rt_rate_word(0.25), (uint64_t)2 << 57);

	retrace_config_from_env(&cfg);
	cfg.pool_name = "/rt-test-no-pool";
	cfg.quiet = 1;
	cfg.trace_rate = 100000;
	retrace_init(&cfg);
	ck_assert_uint_eq(rt_client.rate_word, 0); /* rate 1 until measured */
	for (i = 0; i < 30000000 && rt_client.rate_word == 0; i++) {
		id.lo = i + 1;
		retrace_begin(id);
		retrace_end();
	}
	ck_assert_msg(rt_client.rate_word != 0, "no window ended in %llu begins",
		      (unsigned long long)i);
	for (i = 0; i < 200000; i++, n++) {
		uint32_t k;
		id.lo = 0x100000000ull + i * 4096;
		int rec = retrace_begin(id);
		k = rt_thread_tls.ctx.rate_exp;
		retrace_end();
		ck_assert_uint_le(k, 56);
		ck_assert_int_eq(rec, retrace_sampled(id, k));
		if (rec)
			est += UINT64_C(1) << k;
		var += (UINT64_C(1) << k) - 1;
	}
	/* 4, not 3, standard errors: the windows make this run depend on timing, so
	 * it cannot have a fixed seed, and 3 would fail 0.3 % of runs */
	ck_assert_msg(fabs((double)est - (double)n) <= 4 * sqrt((double)var),
		      "estimate %llu of %llu, se %.1f", (unsigned long long)est,
		      (unsigned long long)n, sqrt((double)var));
}
END_TEST

/* The chosen exponent is what every buffer of the trace carries (the agent
 * reports it as the slice's rate_exp). */
START_TEST(test_chosen_exp_in_buffers)
{
	struct rt_pool pool;
	struct collection col = { 0 };
	static uint8_t rec[3000];
	static uint8_t chosen[64];
	char name[64];
	uint32_t i, n_rec = 0, seen[3] = { 0 };

	test_pool_name(name, sizeof name, "otrate");
	test_pool_create(&pool, name, 4096, 512);
	configure(name, 0, 300000);
	memset(rec, 0x5a, sizeof rec);
	for (i = 0; i < 64; i++) {
		retrace_trace_id id = { 0x5eed, (uint64_t)i + 1 };
		chosen[i] = 0xff;
		if (!retrace_begin(id))
			continue;
		chosen[i] = rt_thread_tls.ctx.rate_exp;
		n_rec++;
		retrace_tracepoint(rec, sizeof rec);
		retrace_tracepoint(rec, sizeof rec);
		retrace_end();
	}
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_gt(n_rec, 0);
	for (size_t b = 0; b < col.n_bufs; b++) {
		uint64_t lo = col.bufs[b].e.trace_lo;
		ck_assert(lo >= 1 && lo <= 64);
		ck_assert_uint_ne(chosen[lo - 1], 0xff);
		ck_assert_uint_eq(rt_buf_rate_exp(col.bufs[b].h.flags), chosen[lo - 1]);
		seen[chosen[lo - 1]]++;
	}
	ck_assert_uint_gt(seen[1] + seen[2], 0);
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

/* A trace decided on the caller's randomness marks its buffers
 * RT_BUF_RATE_FOREIGN (the agent's overload step is then independent of it);
 * one decided on the hash, or on an rv equal to the hash's (a retrace caller's),
 * does not. */
START_TEST(test_foreign_randomness_flag)
{
	/* 0: the caller's rv; 1: the id's bits under the random flag; 2: an rv equal
	 * to the hash's; 3: the hash */
	static const int want_foreign[4] = { 1, 1, 0, 0 };
	static uint8_t rec[3000];
	struct rt_pool pool;
	struct collection col = { 0 };
	struct retrace_wire_context w;
	uint64_t lo[4];
	char name[64], tp[64], ts[64];

	test_pool_name(name, sizeof name, "otforeign");
	test_pool_create(&pool, name, 4096, 64);
	configure(name, 1, 0); /* this host at 1/2 */
	memset(rec, 0x5a, sizeof rec);
	for (int c = 0; c < 4; c++) {
		retrace_trace_id id = { 0x4bf92f3577b34da6ull, 0x1000u * (uint64_t)(c + 1) };
		if (c == 1)
			id.lo |= 0x00ff000000000000ull; /* top bit of the 56 set: kept at 1/2 */
		else
			while (!retrace_sampled(id, 1)) /* the hash keeps it at 1/2 */
				id.lo++;
		lo[c] = id.lo;
		snprintf(tp, sizeof tp, "00-%016llx%016llx-00f067aa0ba902b7-%s",
			 (unsigned long long)id.hi, (unsigned long long)id.lo,
			 c == 1 ? "03" : "01");
		ts[0] = 0;
		if (c == 0)
			snprintf(ts, sizeof ts, "ot=rv:ffffffffffffff");
		if (c == 2)
			snprintf(ts, sizeof ts, "ot=rv:%014llx",
				 (unsigned long long)retrace_hash_rv(id));
		ck_assert_int_eq(retrace_deserialize(tp, ts, &w), RETRACE_OK);
		ck_assert_msg(retrace_begin(w.trace_id) == 1, "case %d not recorded", c);
		retrace_tracepoint(rec, sizeof rec);
		retrace_tracepoint(rec, sizeof rec);
		retrace_end();
	}
	retrace_flush();
	collect_all(&pool, &col);
	ck_assert_uint_ge(col.n_bufs, 8);
	for (size_t b = 0; b < col.n_bufs; b++) {
		int c = 0;
		while (c < 4 && lo[c] != col.bufs[b].e.trace_lo)
			c++;
		ck_assert_int_lt(c, 4);
		ck_assert_msg(!!(col.bufs[b].h.flags & RT_BUF_RATE_FOREIGN) == want_foreign[c],
			      "case %d: flags %#x", c, col.bufs[b].h.flags);
		ck_assert_uint_eq(rt_buf_rate_exp(col.bufs[b].h.flags), 1);
	}
	collection_free(&col);
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

/* ---------------------------------------------------------------- §2.10 ---- */

/* A host that does not record the trace starts no span; the parent it
 * propagates is its caller's span (the last sampled ancestor), the hops it
 * names are its caller's, the fired flag goes on; text and binary. */
START_TEST(test_unsampled_host_passes_last_sampled_ancestor)
{
	struct rt_pool pool;
	struct retrace_wire_context w;
	char name[64], tp[64], ts[RETRACE_TRACESTATE_MAX + 1];
	uint8_t bin[RETRACE_BINARY_CONTEXT_LEN];
	int binary = _i;

	test_pool_name(name, sizeof name, "ot210");
	test_pool_create(&pool, name, 4096, 16);
	configure(name, 64, 0); /* this host records nothing */
	if (binary) {
		uint8_t in[RETRACE_BINARY_CONTEXT_LEN] = { 1, 0x01 | 0x02 | 0x10 };
		in[9] = 1;
		in[17] = 5;
		in[25] = 0x77; /* caller's span */
		in[29] = 7;    /* hop0 */
		in[33] = 3;    /* hop1 */
		in[47] = 0x42; /* rv */
		ck_assert_int_eq(retrace_deserialize_binary(in, sizeof in, &w), RETRACE_OK);
	} else {
		ck_assert_int_eq(
			retrace_deserialize(TP_SAMPLED,
					    "rt=00000007.00000003.1,ot=th:0;rv:00000000000042", &w),
			RETRACE_OK);
	}
	ck_assert_int_eq(retrace_begin(w.trace_id), 0);
	ck_assert_uint_eq(retrace_span_start("handler", RETRACE_SPAN_SERVER), 0);
	ck_assert_uint_eq(retrace_span_start("call", RETRACE_SPAN_CLIENT), 0);
	if (binary) {
		ck_assert_int_eq(retrace_serialize_binary(bin), RETRACE_OK);
		ck_assert_int_eq(retrace_parse_binary(bin, sizeof bin, &w), RETRACE_OK);
		ck_assert_uint_eq(w.parent_span_id, 0x77);
		ck_assert_int_eq(w.trace_flags & RETRACE_TRACE_FLAG_SAMPLED, 0);
		ck_assert_int_eq(w.ot_has_th, 0); /* an unsampled context has no threshold */
	} else {
		ck_assert_int_eq(retrace_serialize(tp, sizeof tp, ts, sizeof ts, NULL), RETRACE_OK);
		ck_assert_str_eq(tp, "00-" ID_HEX "-00f067aa0ba902b7-00");
		/* no th (unsampled), the caller's rv unchanged */
		ck_assert_str_eq(ts, "rt=00000007.00000003.1,ot=rv:00000000000042");
		ck_assert_int_eq(retrace_parse_context(tp, ts, &w), RETRACE_OK);
	}
	ck_assert_uint_eq(w.hops[0], 7);
	ck_assert_uint_eq(w.hops[1], 3);
	ck_assert_int_eq(w.fired, 1);
	ck_assert_int_eq(w.ot_has_rv, 1);
	ck_assert_uint_eq(w.ot_rv, 0x42);
	retrace_span_end();
	retrace_span_end();
	retrace_end();
	retrace_shutdown();
	test_pool_destroy(&pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("client_ot");
	TCase *tc = tcase_create("ot");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_th_vectors, 0,
			    (int)(sizeof th_vectors / sizeof th_vectors[0]));
	tcase_add_test(tc, test_rv_and_other_subkeys);
	tcase_add_loop_test(tc, test_bad_ot_ignored_and_counted, 0,
			    (int)(sizeof bad_ot / sizeof bad_ot[0]));
	tcase_add_loop_test(tc, test_emit_threshold_of_this_hop, 0, 57);
	tcase_add_loop_test(tc, test_decision_on_callers_randomness, 0, 8);
	tcase_add_test(tc, test_random_flag_propagates);
	tcase_add_test(tc, test_binary_versions);
	tcase_add_test(tc, test_fuzz_ot);
	tcase_add_test(tc, test_rate_split);
	tcase_add_test(tc, test_rate_choice_unbiased);
	tcase_add_test(tc, test_chosen_exp_in_buffers);
	tcase_add_test(tc, test_trace_rate_limit);
	tcase_add_test(tc, test_foreign_randomness_flag);
	tcase_add_loop_test(tc, test_unsampled_host_passes_last_sampled_ancestor, 0, 2);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
