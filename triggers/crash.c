/*
 * crash.c — the crash trigger: a signal handler for SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL and SIGABRT that fires a trigger for the crashing thread's trace.
 *
 * Installed state (the documented global of this module): the trigger id and,
 * per signal, the action that was installed before ours. The trigger id is an
 * atomic so re-installing may change it while signals can arrive.
 *
 * In the handler only async-signal-safe operations run: reading the thread's
 * trace id, retrace_trigger() (atomics on shared memory only, see retrace.h),
 * sigaction() and raise(). Then it chains:
 *   - the previous action was a function: call it with the same arguments
 *     (the way other crash reporters chain), our handler stays installed;
 *   - it was SIG_DFL or SIG_IGN: put it back and re-raise. The signal is blocked
 *     while we run, so it is delivered as soon as we return, with the default
 *     action: the process dies of that signal and dumps core as it would have.
 *     For a fault re-raised under SIG_IGN the faulting instruction runs again
 *     and the kernel kills the process, as it would have without us.
 * A thread that faults inside the handler itself is killed by the kernel (the
 * signal is blocked), which is still death by that signal.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define CRASH_SIGNAL_COUNT (sizeof crash_signals / sizeof crash_signals[0])

static atomic_uint crash_trigger_id;
static atomic_int crash_installed;
static struct sigaction previous_action[CRASH_SIGNAL_COUNT];

static int signal_index(int sig)
{
	for (unsigned int i = 0; i < CRASH_SIGNAL_COUNT; i++)
		if (crash_signals[i] == sig)
			return (int)i;
	return -1;
}

static void fire_for_current_trace(void)
{
	retrace_trace_id id = retrace_current();
	if (id.hi == 0 && id.lo == 0)
		return;
	(void)retrace_trigger(id, atomic_load(&crash_trigger_id), NULL, 0);
}

static void chain_to_previous(int sig, siginfo_t *info, void *uctx,
			      const struct sigaction *prev)
{
	if (prev->sa_flags & SA_SIGINFO) {
		prev->sa_sigaction(sig, info, uctx);
		return;
	}
	if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
		prev->sa_handler(sig);
		return;
	}
	sigaction(sig, prev, NULL);
	raise(sig);
}

static void crash_handler(int sig, siginfo_t *info, void *uctx)
{
	int saved_errno = errno;
	int i = signal_index(sig);

	fire_for_current_trace();
	if (i >= 0)
		chain_to_previous(sig, info, uctx, &previous_action[i]);
	errno = saved_errno;
}

int retrace_crash_handler_install(uint32_t trigger_id)
{
	atomic_store(&crash_trigger_id,
		     trigger_id ? trigger_id : RETRACE_TRIGGER_CRASH);
	rtt_default_name(trigger_id, "crash", 0);
	if (atomic_load(&crash_installed))
		return RETRACE_OK;

	struct sigaction ours;
	memset(&ours, 0, sizeof ours);
	ours.sa_sigaction = crash_handler;
	ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&ours.sa_mask);

	for (unsigned int i = 0; i < CRASH_SIGNAL_COUNT; i++) {
		if (sigaction(crash_signals[i], &ours, &previous_action[i]) != 0) {
			while (i-- > 0)
				sigaction(crash_signals[i], &previous_action[i], NULL);
			return RETRACE_E_SYS;
		}
	}
	atomic_store(&crash_installed, 1);
	return RETRACE_OK;
}

void retrace_crash_handler_uninstall(void)
{
	if (!atomic_exchange(&crash_installed, 0))
		return;
	for (unsigned int i = 0; i < CRASH_SIGNAL_COUNT; i++)
		sigaction(crash_signals[i], &previous_action[i], NULL);
}
