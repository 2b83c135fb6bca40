/*
 * tests/common/fake_agent.h — an agent that speaks only the wire protocol, for
 * tests and benchmarks that must decide exactly what a coordinator hears.
 *
 * Owns: a REP socket listening on tcp://127.0.0.1 (a free port) and a thread
 * that answers each REMOTE_TRIGGER with a BREADCRUMB_REPLY saying, for every
 * trace asked, what the owner's `holds` callback says it holds (buffers and
 * payload bytes; 0 and 0: nothing), nothing open and no further hop; anything
 * else is answered with an ACK of RT_WIRE_E_UNKNOWN_TYPE. Also: one
 * synchronous request on a fresh REQ socket (REGISTER, TRIGGER, SLICE, or a
 * text request), as an agent's uplink would send it, plain or over TLS with
 * a given identity.
 *
 * Users: tests/coordinator/test_sharding.c, tests/coordinator/test_security.c,
 * bench/scale/coord_load.c.
 */
#ifndef RETRACE_TESTS_FAKE_AGENT_H
#define RETRACE_TESTS_FAKE_AGENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "daemon/tls.h"
#include "wire/wire.h"

struct fake_agent;

/* What agent a holds of (trace_hi, trace_lo): sets *buffers and *bytes (both
 * 0 on entry). Runs on the agent's thread; a->id and a->arg are the owner's. */
typedef void (*fake_agent_holds_fn)(const struct fake_agent *a, uint64_t trace_hi,
				    uint64_t trace_lo, uint32_t *buffers, uint64_t *bytes);

struct fake_agent {
	uint32_t id;
	nng_socket rep;
	char url[64]; /* where it listens, for REGISTER's control_addr */
	pthread_t th;
	atomic_int stop;
	fake_agent_holds_fn holds;
	void *arg;
};

/* Listen and start answering. 0, or -1 (nothing left running). */
int fake_agent_start(struct fake_agent *a, uint32_t id, fake_agent_holds_fn holds, void *arg);

/* Stop the threads of n started agents (all at once: each notices within its
 * 100 ms receive timeout) and close their sockets. */
void fake_agent_stop_all(struct fake_agent *a, int n);

/*
 * One request/reply on a fresh REQ socket, as a daemon's peer sends it: TLS
 * when url is tls+tcp:// (identity tls, the peer's certificate naming peer;
 * both NULL on plain tcp), each step bounded by timeout_ms, replies up to
 * 4 MiB, the socket closed bounded (wire/nng_close.h). The reply is copied to
 * reply (cut at cap); returns its whole length, or -1 when nothing came back
 * (refused connection, dropped message, timeout).
 */
long fake_agent_exchange(const char *url, const struct rt_tls *tls, const char *peer,
			 const void *req, size_t len, void *reply, size_t cap, int timeout_ms);

/* msg sent as fake_agent_exchange sends it: the status of the ACK that came
 * back, or INT32_MIN when nothing came back or the reply is not an ACK. */
int32_t fake_agent_ack(const char *url, const struct rt_tls *tls, const char *peer,
		       const struct rt_wire_buf *msg, int timeout_ms);

/*
 * Send msg to url (plain tcp) and wait for the reply (timeout_ms).
 * With text: the reply is copied there as a string (cut at textcap - 1), 0.
 * Without: 0 if the reply is an ACK with status 0. -1 otherwise.
 */
int fake_agent_request(const char *url, const struct rt_wire_buf *msg, int timeout_ms, char *text,
		       size_t textcap);

#endif
