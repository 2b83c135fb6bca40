/*
 * tracer.hpp — header-only C++ scopes over the C API (tracer.h, retrace.h).
 *
 * What it owns: two RAII guards, so that an early return or an exception can
 * neither leave a span open nor a thread inside a finished request's trace.
 *   retrace::span    starts a span and ends it when the scope is left: with
 *                    status UNSET normally (ok() / error() set one first), with
 *                    ERROR "exception" when the scope is left by a throw
 *                    (std::uncaught_exceptions, so correct inside destructors
 *                    that run during another unwinding). A span the thread could
 *                    not start (no trace recorded) ends nothing.
 *   retrace::request begins a trace from a request's carrier
 *                    (retrace_begin_from) and ends it with the scope.
 * Needs C++17. Both are neither copyable nor movable: a span belongs to the
 * thread's span stack in the order it was started.
 *
 *   void handle(Request &r) {
 *       retrace::request req(&r, get_header);   // continue the caller's trace
 *       retrace::span s("handle", RETRACE_SPAN_SERVER);
 *       if (!ok) { s.error(404, "no such item"); return; }
 *   }
 */
#ifndef RETRACE_TRACER_HPP
#define RETRACE_TRACER_HPP

#include <exception>

#include "retrace.h"
#include "tracer.h"

namespace retrace {

class span {
public:
	explicit span(const char *name, retrace_span_kind kind = RETRACE_SPAN_INTERNAL) noexcept
		: id_(retrace_span_start(name, kind)), exceptions_at_start_(std::uncaught_exceptions())
	{
	}
	span(const span &) = delete;
	span &operator=(const span &) = delete;

	~span()
	{
		if (!id_)
			return;
		if (std::uncaught_exceptions() > exceptions_at_start_)
			retrace_span_end_error(-1, "exception");
		else if (status_ == RETRACE_STATUS_OK)
			retrace_span_end_ok();
		else if (status_ == RETRACE_STATUS_ERROR)
			retrace_span_end_error(code_, message_);
		else
			retrace_span_end();
	}

	/* The status the span ends with (unless an exception leaves the scope). The
	 * message is copied when the span ends: it must live until then. */
	void ok() noexcept { status_ = RETRACE_STATUS_OK; }
	void error(int64_t code, const char *message) noexcept
	{
		status_ = RETRACE_STATUS_ERROR;
		code_ = code;
		message_ = message;
	}
	/* 0 when the thread records no trace. */
	uint64_t id() const noexcept { return id_; }

private:
	uint64_t id_;
	int exceptions_at_start_;
	retrace_span_status status_ = RETRACE_STATUS_UNSET;
	int64_t code_ = 0;
	const char *message_ = nullptr;
};

class request {
public:
	request(void *carrier, retrace_carrier_get get) noexcept
		: started_new_(retrace_begin_from(carrier, get, &context_) == RETRACE_STARTED_NEW)
	{
	}
	request(const request &) = delete;
	request &operator=(const request &) = delete;
	~request() { retrace_end(); }

	/* The caller's context as parsed (its tracestate, for retrace_inject). */
	const retrace_wire_context &context() const noexcept { return context_; }
	/* True when the request carried no valid context and a new trace began. */
	bool started_new() const noexcept { return started_new_; }

private:
	retrace_wire_context context_{};
	bool started_new_;
};

} // namespace retrace

#endif
