/*
 * tests/common/ports.h — a loopback TCP port for a daemon a test will restart.
 *
 * A test that stops a listener and starts it again on the same address (a
 * collector that comes back, a coordinator restarted after kill -9) cannot let
 * the kernel choose the first port: a port from the ephemeral range, once
 * freed, can be taken by any outgoing connection on the machine before the
 * restart ("Address in use", seen under the stress run with two test runs at
 * once). A port just below that range is never handed out by the kernel; the
 * pick is random (seeded by the pid and the clock) and checked by a bind.
 *
 * The picked port is then held until the process exits, so that no other test
 * picks it while our listener is down (session 19: report_spool_enospc's
 * collector found its port taken at the restart, four test runs at once). The
 * hold is the checking socket itself, left bound and not listening, with
 * SO_REUSEADDR set after the bind: Linux lets a listener that sets it too (nng
 * does) bind beside a socket that is not listening, while the check's bind,
 * made without SO_REUSEADDR, fails on a held port (and on one in TIME_WAIT), so
 * a held port is skipped. The descriptor is closed by exit (CLOEXEC: daemons
 * the test starts do not inherit it).
 */
#ifndef RETRACE_TESTS_PORTS_H
#define RETRACE_TESTS_PORTS_H

#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rng.h"

/* A free port on 127.0.0.1 below the ephemeral range; 0 if none was found
 * (the caller then lets the kernel choose: port 0). */
static inline unsigned test_restartable_port(void)
{
	unsigned lo = 32768, hi = 60999, base, span;
	struct timespec ts;
	uint64_t state;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	if (f) {
		if (fscanf(f, "%u %u", &lo, &hi) != 2)
			lo = 32768;
		fclose(f);
	}
	if (lo <= 4096)
		return 0;
	base = lo > 16384 ? lo - 12288 : 2048;
	span = lo - base;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	state = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ 0x9e3779b97f4a7c15ull;
	for (int tries = 0; tries < 256; tries++) {
		unsigned port = base + test_pick(&state, span);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int one = 1, s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0)
			return 0;
		if (bind(s, (struct sockaddr *)&a, sizeof a) == 0) {
			/* the hold: see above; kept open on purpose */
			setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
			return port;
		}
		close(s);
	}
	return 0;
}

/* "tcp://127.0.0.1:PORT" with a restartable port (port 0 if none was found). */
static inline void test_restartable_url(char *url, size_t len)
{
	snprintf(url, len, "tcp://127.0.0.1:%u", test_restartable_port());
}

#endif
