/*
 * tests/agent/report/collector.h — a collector (and fake coordinator) endpoint for the
 * reporting tests: an nng REP socket served by a thread of its own.
 *
 * Every request is decoded with rt_wire_decode and recorded: a SLICE keeps its
 * envelope (agent, slice_seq, trigger, trace id) and every buffer's header
 * fields with a copy of its data; a REGISTER keeps the agent id, pid, host and
 * control address; a TRIGGER keeps the agent, trigger id and seq and each
 * trace with its breadcrumbs. Every request gets an ACK (status 0 naming the
 * slice_seq for a slice, no seqs otherwise), or a refusal in refuse mode. A
 * slice acknowledged before under the same (agent, trace, slice_seq), an
 * agent's resend after a late ACK, is acknowledged again and only counted
 * (`duplicates`), as the coordinator's store keeps it once.
 *
 * The collector can be made slower than the load (a delay per slice, or a byte
 * rate), can refuse (ACK with a non-zero status), can stay silent (never
 * reply), and can be stopped (socket closed) and started again on the same URL
 * (tcp port 0 is resolved on the first start and kept). All accessors take the
 * mutex; the tests read the arrays between tc_lock and tc_unlock.
 */
#ifndef RETRACE_TESTS_REPORT_COLLECTOR_H
#define RETRACE_TESTS_REPORT_COLLECTOR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "wire.h"

struct tc_buffer {
	uint32_t pid, tid, seq, flags;
	uint64_t first_tick;
	uint32_t len;
	uint8_t *data; /* copy (NULL when the collector keeps no data) */
};

struct tc_slice {
	uint32_t agent_id, trigger_id;
	uint64_t slice_seq, trace_hi, trace_lo;
	uint64_t tsc_hz;
	uint32_t rate_exp; /* the slice's wire rate_exp */
	uint32_t nbuf;
	struct tc_buffer *bufs;
	uint64_t bytes;    /* payload bytes of all buffers */
	uint64_t recv_ns;  /* CLOCK_MONOTONIC when it arrived */
	uint64_t order;    /* arrival number among all requests */
	int acked;         /* the reply said status 0 */
};

struct tc_trace {
	uint64_t hi, lo;
	uint64_t bytes;
	uint32_t buffers;
	uint32_t ncrumbs;
	uint32_t crumbs[RT_WIRE_MAX_BREADCRUMBS];
};

struct tc_trigger {
	uint32_t agent_id, trigger_id;
	uint64_t trigger_seq, fired_unix_ns;
	uint32_t ntraces;
	struct tc_trace *traces;
	uint64_t order;
};

struct tc_register {
	uint32_t agent_id, pid;
	uint64_t start_unix_ns;
	char host[RT_WIRE_MAX_STR + 1];
	char control_addr[RT_WIRE_MAX_STR + 1];
	uint32_t buffer_size, buffer_count;
	uint64_t order;
};

struct tc_collector {
	char url[128];           /* the URL actually bound (port resolved) */
	nng_socket sock;
	int open;
	pthread_t thread;
	int running;
	atomic_int stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;       /* signalled on every request */
	/* options (set any time; read by the thread under mu) */
	uint32_t delay_us;       /* per slice, before replying */
	double byte_rate;        /* slice payload bytes per second; 0: unlimited */
	int refuse;              /* reply status != 0 */
	int silent;              /* never reply */
	int keep_data;           /* copy buffer data (default 1) */
	uint64_t next_free_ns;   /* byte-rate pacing */
	/* records */
	struct tc_slice *slices;
	size_t nslices, cap_slices;
	struct tc_trigger *triggers;
	size_t ntriggers, cap_triggers;
	struct tc_register *regs;
	size_t nregs, cap_regs;
	uint64_t requests;       /* every request received */
	uint64_t bad;            /* undecodable */
	uint64_t others;         /* decoded, not one of the above */
	uint64_t duplicates;     /* slices acknowledged before, not recorded again */
	uint64_t slice_bytes;
	uint64_t starts;
};

/* Zero, set defaults. */
void tc_init(struct tc_collector *c);
/*
 * Listen on url (e.g. "tcp://127.0.0.1:0"; NULL or "" restarts on the URL of
 * the previous start) and start the thread. 0, or an nng error (message in err).
 */
int tc_start(struct tc_collector *c, const char *url, char *err, size_t errlen);
/* Stop the thread and close the socket (records are kept). */
void tc_stop(struct tc_collector *c);
/* Stop and free everything. */
void tc_free(struct tc_collector *c);

void tc_lock(struct tc_collector *c);
void tc_unlock(struct tc_collector *c);

/* Thread-safe counters. */
size_t tc_nslices(struct tc_collector *c);
size_t tc_ntriggers(struct tc_collector *c);
size_t tc_nregs(struct tc_collector *c);
uint64_t tc_requests(struct tc_collector *c);

/* Set options under the lock. */
void tc_set_delay(struct tc_collector *c, uint32_t delay_us);
void tc_set_rate(struct tc_collector *c, double bytes_per_s);
void tc_set_refuse(struct tc_collector *c, int refuse);
void tc_set_silent(struct tc_collector *c, int silent);

/* Wait (up to `seconds`) for the collector to hold at least n slices; the count. */
size_t tc_wait_slices(struct tc_collector *c, size_t n, double seconds);

#endif
