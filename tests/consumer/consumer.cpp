// tests/consumer/consumer.cpp — the C++ user: the public headers compile as
// C++17; the exception scope guard fires for the current trace when a scope is
// left by a throw (and not when it is left normally); retrace::request continues
// a trace from a header map (or starts one) and ends it with its scope;
// retrace::span nests and ends on every way out of its scope, throws included.
#include <retrace/retrace.h>
#include <retrace/tracer.h>
#include <retrace/tracer.hpp>
#include <retrace/triggers.hpp>

#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>

using headers = std::map<std::string, std::string>;

static int set_header(void *carrier, const char *key, const char *value)
{
	(*static_cast<headers *>(carrier))[key] = value;
	return 0;
}

static const char *get_header(void *carrier, const char *key)
{
	auto *h = static_cast<headers *>(carrier);
	auto it = h->find(key);
	return it == h->end() ? nullptr : it->second.c_str();
}

#define EXPECT(cond)                                                                 \
	do {                                                                         \
		if (!(cond)) {                                                       \
			std::fprintf(stderr, "consumer++: failed: %s (line %d)\n", #cond, \
				     __LINE__);                                      \
			return 1;                                                    \
		}                                                                    \
	} while (0)

static void inner(bool fail)
{
	retrace::span s("inner");
	if (fail)
		throw std::runtime_error("inner failed");
	s.ok();
}

// A request served through the scopes: the callee continues the caller's trace.
static int serve_with_scopes()
{
	struct retrace_tracer_stats before, after;
	headers edge, call;
	retrace_trace_id root;
	{
		retrace::request r(&edge, get_header);
		EXPECT(r.started_new());
		root = retrace_current();
		retrace::span s("edge", RETRACE_SPAN_SERVER);
		EXPECT(s.id() != 0 && retrace_current_span() == s.id());
		EXPECT(retrace_inject(&call, set_header, nullptr) == RETRACE_OK);
	}
	EXPECT(retrace_current().lo == 0); // the request's scope ended the trace
	retrace_tracer_stats(&before);
	{
		retrace::request r(&call, get_header);
		EXPECT(!r.started_new());
		EXPECT(retrace_current().lo == root.lo && retrace_current().hi == root.hi);
		retrace::span outer("callee", RETRACE_SPAN_SERVER);
		inner(false);
		EXPECT(retrace_current_span() == outer.id());
		try {
			inner(true);
		} catch (const std::exception &) {
		}
		EXPECT(retrace_current_span() == outer.id()); // the thrown-through span ended
		outer.error(503, "busy");
	}
	retrace_tracer_stats(&after);
	EXPECT(after.spans_started - before.spans_started == 3);
	EXPECT(after.ends_unmatched == before.ends_unmatched);
	return 0;
}

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
	if (serve_with_scopes() != 0)
		return 1;
	retrace_shutdown();
	std::printf("consumer++: ok\n");
	return 0;
}
