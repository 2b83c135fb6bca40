/*
 * nng_close.h — closing an nng socket without hanging the caller.
 *
 * nng 1.5.2 (Debian's) can deadlock inside nng_close() when a peer vanished while
 * a pipe was being torn down (nanomsg/nng#1543, fixed only in later releases): the
 * reaper and the closer wait on each other forever. A daemon that hangs there
 * never exits on SIGTERM and, in the coordinator, stops serving. So every daemon
 * closes sockets through rt_nng_close_bounded(): the close runs on a short-lived
 * thread and the caller waits at most `wait_ms`; past that the socket (and the
 * thread) are abandoned and counted, and the caller carries on.
 *
 * This one file of wire/ links nng (target retrace_wire_nng); the message codecs
 * in wire.h do not.
 */
#ifndef RETRACE_WIRE_NNG_CLOSE_H
#define RETRACE_WIRE_NNG_CLOSE_H

#include <stdint.h>
#include <time.h>

#include <nng/nng.h>

/* Default wait before giving up on a close. */
#define RT_NNG_CLOSE_WAIT_MS 2000u

/* Close `s`, waiting at most wait_ms. Returns 0 when the close finished, -1 when
 * it was abandoned (counted in rt_nng_close_abandoned()). */
int rt_nng_close_bounded(nng_socket s, unsigned wait_ms);

/* A daemon's exit closes many sockets one after another; once nng's reaper is
 * stuck every one of them would spend its whole wait, so N sockets would cost
 * N waits. Those closes share one deadline instead: rt_nng_close_deadline()
 * sets `by` to `ms` from now (CLOCK_MONOTONIC) and rt_nng_close_by() waits
 * until `by` at the latest, not at all once it has passed (the close still
 * runs, on its own thread). Same return as rt_nng_close_bounded(). */
void rt_nng_close_deadline(struct timespec *by, unsigned ms);
int rt_nng_close_by(nng_socket s, const struct timespec *by);

/* Closes abandoned so far by this process. */
uint64_t rt_nng_close_abandoned(void);

#endif
