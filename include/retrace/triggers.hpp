/*
 * triggers.hpp — header-only C++ helper for the exception trigger.
 *
 * What it owns: a scope guard that fires a trigger for the calling thread's
 * trace when its scope is left by an exception (stack unwinding), and does
 * nothing when the scope is left normally. It compares
 * std::uncaught_exceptions() at construction and destruction, so it is correct
 * inside destructors that run during another unwinding. Header-only; needs C++17.
 *
 *   void handle(Request &r) {
 *       RETRACE_TRIGGER_ON_EXCEPTION(MY_TRIGGER);
 *       ...   // a throw from here fires MY_TRIGGER for the current trace
 *   }
 */
#ifndef RETRACE_TRIGGERS_HPP
#define RETRACE_TRIGGERS_HPP

#include <exception>

#include "triggers.h"

namespace retrace {

class exception_trigger {
public:
	explicit exception_trigger(uint32_t trigger_id) noexcept
		: trigger_id_(trigger_id), exceptions_at_entry_(std::uncaught_exceptions())
	{
	}
	exception_trigger(const exception_trigger &) = delete;
	exception_trigger &operator=(const exception_trigger &) = delete;

	~exception_trigger()
	{
		if (std::uncaught_exceptions() > exceptions_at_entry_)
			(void)retrace_exception(trigger_id_);
	}

private:
	uint32_t trigger_id_;
	int exceptions_at_entry_;
};

} // namespace retrace

#define RETRACE_TRIGGERS_CONCAT2(a, b) a##b
#define RETRACE_TRIGGERS_CONCAT(a, b) RETRACE_TRIGGERS_CONCAT2(a, b)
/* One line at the top of a scope. */
#define RETRACE_TRIGGER_ON_EXCEPTION(trigger_id)                                 \
	::retrace::exception_trigger RETRACE_TRIGGERS_CONCAT(retrace_on_exception_, \
							     __LINE__)(trigger_id)

#endif
