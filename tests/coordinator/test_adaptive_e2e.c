/*
 * tests/coordinator/test_adaptive_e2e.c — the adaptive span policy end to end:
 * the real coordinator with --adaptive on, one real agent, and a service (the
 * cluster's writer process, real libretrace) whose one span site ("culprit")
 * has injected latency variance while five calm sites do next to nothing.
 * Every request is triggered, so the coordinator collects it, feeds its spans'
 * self times to the learner, and every 20 traces sends a policy that the agent
 * writes into the pool the service reads.
 *
 * After the run: the culprit's probability is >= 0.9 and a calm site's is at
 * most 0.5 (`retrace policy --json`); the agent applied policies; the service
 * dropped spans; and no collected trace was called incomplete or incoherent
 * although their spans attach past the dropped ones (the coherence rule still
 * flags real holes: the decode suite checks those).
 *
 * culprit_found_off_records_all: with --adaptive off nothing is dropped.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "common/suite.h"
#include "retrace/tracer.h"

#define HI 0xada9710eada9710eull
#define TRIGGER 100
#define N_TRACES 300
#define BATCH "20"

static const char *const calm[] = { "parse", "auth", "cache.get", "render", "audit" };

static void nap_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000L };
	nanosleep(&ts, NULL);
}

/* In the writer: one request; io->scenario = the culprit's delay in µs. Returns
 * the writer's dropped-span count so far in io->ids[0]. */
static int request(int host, retrace_trace_id id, struct cl_run_io *io)
{
	struct retrace_tracer_stats st;
	(void)host;
	retrace_set_service_name("shop");
	retrace_begin(id);
	retrace_span_start("GET /checkout", RETRACE_SPAN_SERVER);
	for (int i = 0; i < 5; i++) {
		retrace_span_start(calm[i], RETRACE_SPAN_INTERNAL);
		retrace_span_end();
	}
	retrace_span_start("culprit", RETRACE_SPAN_INTERNAL);
	if (io->scenario)
		nap_us(io->scenario);
	retrace_span_end();
	retrace_span_end();
	retrace_end();
	retrace_trigger(id, TRIGGER, NULL, 0);
	retrace_tracer_stats(&st);
	io->ids[0] = st.spans_dropped;
	return 0;
}

static void start(struct cluster *c, const char *mode)
{
	cl_coord_args[0] = "--adaptive";
	cl_coord_args[1] = mode;
	cl_coord_args[2] = "--adaptive-batch";
	cl_coord_args[3] = BATCH;
	cl_coord_args[4] = "--adaptive-window";
	cl_coord_args[5] = "2";
	cl_coord_args[6] = "--settle";
	cl_coord_args[7] = "0.2";
	cl_coord_args[8] = NULL;
	cl_run_fn = request;
	ck_assert_int_eq(cl_start(c, 1, 1024), 0);
}

/* Wait (bounded by the clock) until the coordinator's figure reaches want. */
static long long wait_figure(struct cluster *c, const char *section, const char *key,
			     long long want, double seconds)
{
	long long v = -1;
	for (double end = cl_now_s() + seconds; cl_now_s() < end;) {
		if ((v = cl_coord_figure(c, section, key)) >= want)
			break;
		nap_us(100000);
	}
	return v;
}

/* The probability `retrace policy --json` gives operation op; -1 if absent. */
static double policy_p(struct cluster *c, const char *op, char **json_out)
{
	char cmd[512], *out = NULL, want[128], *at, *p;
	size_t cap = 0;
	double v = -1;
	FILE *f;
	snprintf(cmd, sizeof cmd, "%s policy --json --coordinator %s", CLI_BIN, c->coord_url);
	ck_assert_ptr_nonnull(f = popen(cmd, "r"));
	if (getdelim(&out, &cap, 0, f) <= 0) {
		pclose(f);
		free(out);
		return -1;
	}
	pclose(f);
	snprintf(want, sizeof want, "\"operation\":\"%s\"", op);
	if ((at = strstr(out, want)) && (p = strstr(at, "\"probability\":")))
		v = strtod(p + 14, NULL);
	if (json_out)
		*json_out = out;
	else
		free(out);
	return v;
}

START_TEST(culprit_found_and_traces_stay_coherent)
{
	struct cluster c;
	struct cl_run_io io;
	uint64_t rng = 0x1234567;
	uint64_t dropped = 0;
	double p_culprit, p_calm;
	char *json = NULL;
	start(&c, "on");
	for (int i = 0; i < N_TRACES; i++) {
		memset(&io, 0, sizeof io);
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		/* half the requests wait 0.5 .. 8 ms in the culprit */
		if ((rng >> 33) & 1)
			io.scenario = 500 + (int32_t)((rng >> 40) % 7500);
		ck_assert_int_eq(cl_run(&c, 0, HI, 0x1000 + (uint64_t)i, &io), 0);
		dropped = io.ids[0];
		/* Keep the loop closed: the learner sees each batch before the next. */
		if (i % 20 == 19)
			wait_figure(&c, "adaptive", "traces", i + 1 - 5, 20);
	}
	ck_assert_int_ge(wait_figure(&c, "adaptive", "cycles", N_TRACES / 20 - 2, 30),
			 N_TRACES / 20 - 2);
	p_culprit = policy_p(&c, "culprit", &json);
	p_calm = policy_p(&c, "render", NULL);
	ck_assert_msg(p_culprit >= 0.9, "culprit p = %.3f after %d traces: %s", p_culprit,
		      N_TRACES, json ? json : "(no answer)");
	ck_assert_msg(p_calm >= 0 && p_calm <= 0.5, "calm site p = %.3f: %s", p_calm,
		      json ? json : "(no answer)");
	free(json);
	printf("adaptive_e2e: after %d traces culprit p=%.3f calm p=%.3f, %llu spans dropped, "
	       "%lld cycles\n", N_TRACES, p_culprit, p_calm, (unsigned long long)dropped,
	       cl_coord_figure(&c, "adaptive", "cycles"));
	ck_assert_int_ge(cl_agent_figure(&c, 0, "policy", "updates"), 1);
	ck_assert_int_ge(cl_agent_figure(&c, 0, "policy", "sites"), 1);
	ck_assert_msg(dropped > 0, "the service dropped no span");
	ck_assert_int_ge(cl_coord_figure(&c, "adaptive", "policies_acked"), 1);
	ck_assert_int_ge(cl_coord_figure(&c, "collection", "traces_coherent"), N_TRACES - 5);
	ck_assert_int_eq(cl_coord_figure(&c, "collection", "traces_incomplete"), 0);
	ck_assert_int_eq(cl_coord_figure(&c, "collection", "traces_incoherent"), 0);
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

START_TEST(culprit_found_off_records_all)
{
	struct cluster c;
	struct cl_run_io io;
	char *json = NULL;
	start(&c, "off");
	for (int i = 0; i < 60; i++) {
		memset(&io, 0, sizeof io);
		io.scenario = i % 2 ? 3000 : 0;
		ck_assert_int_eq(cl_run(&c, 0, HI, 0x2000 + (uint64_t)i, &io), 0);
		ck_assert_uint_eq(io.ids[0], 0);
	}
	ck_assert_int_ge(wait_figure(&c, "collection", "traces_coherent", 55, 30), 55);
	ck_assert_int_eq(cl_coord_figure(&c, "adaptive", "cycles"), 0);
	ck_assert_double_eq(policy_p(&c, "culprit", &json), -1);
	ck_assert_ptr_nonnull(strstr(json, "\"adaptive\":\"off\""));
	free(json);
	/* Registration sent the empty policy: the table is empty, nothing dropped. */
	ck_assert_int_eq(cl_agent_figure(&c, 0, "policy", "sites"), 0);
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

#define ADD_CASE(s, fn)                                      \
	do {                                                 \
		TCase *tc = tcase_create(#fn);               \
		tcase_set_timeout(tc, 180);                  \
		tcase_add_test(tc, fn);                      \
		suite_add_tcase(s, tc);                      \
	} while (0)

int main(void)
{
	Suite *s = suite_create("coordinator_adaptive_e2e");
	signal(SIGPIPE, SIG_IGN);
	ADD_CASE(s, culprit_found_and_traces_stay_coherent);
	ADD_CASE(s, culprit_found_off_records_all);
	return test_run_suite(s);
}
