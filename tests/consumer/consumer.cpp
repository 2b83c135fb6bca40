// tests/consumer/consumer.cpp — the C++ user: the public headers compile as
// C++17 and the exception scope guard fires for the current trace when a scope
// is left by a throw (and not when it is left normally).
#include <retrace/retrace.h>
#include <retrace/tracer.h>
#include <retrace/triggers.hpp>

#include <cstdio>
#include <stdexcept>

static void handler(bool fail)
{
	RETRACE_TRIGGER_ON_EXCEPTION(7);
	retrace_span_start("handler", RETRACE_SPAN_INTERNAL);
	retrace_span_end_ok();
	if (fail)
		throw std::runtime_error("injected");
}

int main()
{
	struct retrace_thread_stats before, after;
	if (retrace_init(nullptr) != RETRACE_OK) {
		std::fprintf(stderr, "consumer++: no pool\n");
		return 1;
	}
	retrace_trace_id id = { 0xCC, 1 };
	retrace_begin(id);
	retrace_thread_stats(&before);
	handler(false);
	try {
		handler(true);
	} catch (const std::exception &) {
	}
	retrace_end();
	retrace_thread_stats(&after);
	if (after.triggers_dropped != before.triggers_dropped) {
		std::fprintf(stderr, "consumer++: the exception trigger was dropped\n");
		return 1;
	}
	retrace_shutdown();
	std::printf("consumer++: ok\n");
	return 0;
}
