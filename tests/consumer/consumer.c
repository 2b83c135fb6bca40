/*
 * tests/consumer/consumer.c — a user's program, built against the installed
 * headers and libraries with nothing but `pkg-config --cflags --libs retrace`.
 * It uses spans, attributes, logs, the response context and every autotrigger,
 * and fails (exit 1) if any call that should succeed does not. Run against a
 * real agent's pool by consumer.sh.
 */
#include <retrace/retrace.h>
#include <retrace/tracer.h>
#include <retrace/triggers.h>

#include <stdio.h>
#include <string.h>

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "consumer: failed: %s (line %d)\n", #cond, \
				__LINE__);                                   \
			return 1;                                            \
		}                                                            \
	} while (0)

static int fired;

static int count_fire(void *arg, retrace_trace_id id, uint32_t trigger_id,
		      const retrace_trace_id *lateral, size_t n_lateral)
{
	(void)arg, (void)id, (void)trigger_id, (void)lateral, (void)n_lateral;
	fired++;
	return RETRACE_OK;
}

int main(void)
{
	struct retrace_fire_sink sink = { count_fire, NULL };
	struct retrace_percentile_config pc = { .trigger_id = 1, .percentile = 99 }; /* into the pool */
	struct retrace_category_config cc = { .trigger_id = 2, .fraction = 0.1, .sink = sink };
	struct retrace_queue_trigger_config qc = { .trigger_id = 3, .percentile = 99, .sink = sink };
	struct retrace_percentile *p = retrace_percentile_create(&pc);
	struct retrace_category *c = retrace_category_create(&cc);
	struct retrace_queue_trigger *q = retrace_queue_trigger_create(&qc);
	struct retrace_trigger_set *set = retrace_trigger_set_create(4, sink);
	struct retrace_filter *slow = retrace_filter_latency(1000000, 0);
	struct retrace_span_summary sum;
	struct retrace_trigger_stats ps;
	char resp[RETRACE_RESPONSE_TEXT_LEN];
	int i;

	CHECK(retrace_init(NULL) == RETRACE_OK);
	CHECK(p && c && q && set && slow);
	CHECK(retrace_crash_handler_install(4) == RETRACE_OK);
	for (i = 1; i <= 500; i++) {
		retrace_trace_id id = { 0xC0, (uint64_t)i };
		CHECK(retrace_begin(id) == 1);
		retrace_span_start("GET /consumer", RETRACE_SPAN_SERVER);
		retrace_attr_int("i", i);
		retrace_attr_str("who", "consumer");
		retrace_log(RETRACE_LOG_INFO, "request %d of %s", i, "consumer");
		CHECK(retrace_serialize_response(resp, sizeof resp) > 0);
		if (i == 497)
			CHECK(retrace_exception(5) == RETRACE_OK);
		retrace_span_end_ok();
		retrace_end();
		retrace_percentile_add(p, id, i == 500 ? 1000000u : (uint64_t)(i % 10));
		retrace_category_add(c, id, i == 499 ? retrace_label("rare") : retrace_label("common"));
		retrace_queue_trigger_dequeued(q, id, i == 498 ? 1000000u : 5);
		retrace_trigger_set_add(set, id);
	}
	memset(&sum, 0, sizeof sum);
	sum.duration_ns = 5000000;
	CHECK(retrace_filter_match(slow, &sum) == 1);
	CHECK(retrace_exception(5) == RETRACE_E_INVAL); /* not in a trace */
	retrace_percentile_stats(p, &ps);
	CHECK(ps.fired >= 1 && ps.fire_errors == 0); /* the slow sample, into the pool */
	CHECK(fired >= 2); /* the rare label, the long queue wait */
	retrace_crash_handler_uninstall();
	retrace_filter_free(slow);
	retrace_trigger_set_destroy(set);
	retrace_queue_trigger_destroy(q);
	retrace_category_destroy(c);
	retrace_percentile_destroy(p);
	CHECK(retrace_attached());
	retrace_shutdown();
	printf("consumer: ok (%d firings)\n", fired);
	return 0;
}
