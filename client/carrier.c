/*
 * client/carrier.c — context propagation through the caller's own headers, and
 * the trace-id generator.
 *
 * How it works: a carrier is the service's own header map behind one callback
 * (include/retrace/retrace.h, "carriers"). Each call here is the text form of
 * context.c (retrace_serialize / retrace_deserialize and the response pair)
 * plus the callback, so the grammar stays in one place (context.c) and this
 * file holds no parsing of its own.
 *
 * Trace ids come from the kernel (getrandom), 256 bytes at a time into a
 * per-thread buffer, so an id costs a copy and one syscall per 16 ids. A
 * process that forks would hand the child the same unread bytes as the
 * parent: a fork handler empties the surviving thread's buffer (the only
 * thread a child has). Thread-local, so no lock and no shared write.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "retrace/retrace.h"

#define ID_BYTES 16u
#define ID_BATCH 256u /* bytes of randomness fetched at once: 16 ids */

struct id_source {
	uint8_t bytes[ID_BATCH];
	uint32_t next; /* first unread byte; ID_BATCH = empty */
	int filled_once;
};

static _Thread_local struct id_source ids;
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static void forget_ids_in_child(void)
{
	ids.next = ID_BATCH;
}

static void install_fork_handler(void)
{
	pthread_atfork(NULL, NULL, forget_ids_in_child);
}

/* The kernel's randomness, or (a kernel without getrandom, seccomp refusing it)
 * the clock mixed by the trace hash: still unique enough to tell traces apart. */
static void refill(struct id_source *s)
{
	size_t got = 0;
	while (got < ID_BATCH) {
		ssize_t n = getrandom(s->bytes + got, ID_BATCH - got, 0);
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		break;
	}
	for (; got + 8 <= ID_BATCH; got += 8) {
		struct timespec ts;
		retrace_trace_id seed;
		uint64_t v;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed.hi = 0;
		seed.lo = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ got ^
			  (uint64_t)(uintptr_t)s;
		v = retrace_trace_hash(seed);
		memcpy(s->bytes + got, &v, 8);
	}
	s->next = 0;
}

retrace_trace_id retrace_new_trace_id(void)
{
	retrace_trace_id id;
	if (!ids.filled_once) {
		pthread_once(&fork_handler_once, install_fork_handler);
		ids.filled_once = 1;
		ids.next = ID_BATCH;
	}
	if (ids.next + ID_BYTES > ID_BATCH)
		refill(&ids);
	memcpy(&id.hi, ids.bytes + ids.next, 8);
	memcpy(&id.lo, ids.bytes + ids.next + 8, 8);
	ids.next += ID_BYTES;
	/* The runtime indexes by the low half and never records lo == 0. */
	if (id.lo == 0)
		id.lo = 1;
	return id;
}

int retrace_begin_from(void *carrier, retrace_carrier_get get, struct retrace_wire_context *out)
{
	struct retrace_wire_context ctx;
	const char *parent, *state;
	retrace_trace_id cur;
	if (!get)
		return RETRACE_E_INVAL;
	cur = retrace_current();
	if (cur.hi || cur.lo)
		retrace_end(); /* deposits need the thread in no trace, or in this one */
	parent = get(carrier, "traceparent");
	state = parent ? get(carrier, "tracestate") : NULL;
	if (parent && retrace_deserialize(parent, state, &ctx) == RETRACE_OK) {
		retrace_begin(ctx.trace_id);
		if (out)
			*out = ctx;
		return 0;
	}
	memset(&ctx, 0, sizeof ctx);
	ctx.trace_id = retrace_new_trace_id();
	ctx.state_rejected = parent != NULL; /* a malformed context was dropped */
	retrace_begin(ctx.trace_id);
	if (out)
		*out = ctx;
	return RETRACE_STARTED_NEW;
}

int retrace_inject(void *carrier, retrace_carrier_set set, const char *incoming_state)
{
	char parent[RETRACE_TRACEPARENT_LEN + 1], state[RETRACE_TRACESTATE_MAX + 1];
	int rc;
	if (!set)
		return RETRACE_E_INVAL;
	rc = retrace_serialize(parent, sizeof parent, state, sizeof state, incoming_state);
	if (rc != RETRACE_OK)
		return rc;
	if (set(carrier, "traceparent", parent) != 0 ||
	    (state[0] && set(carrier, "tracestate", state) != 0))
		return RETRACE_E_INVAL;
	return RETRACE_OK;
}

int retrace_inject_response(void *carrier, retrace_carrier_set set)
{
	char value[RETRACE_RESPONSE_TEXT_LEN];
	int rc;
	if (!set)
		return RETRACE_E_INVAL;
	rc = retrace_serialize_response(value, sizeof value);
	if (rc < 0)
		return rc;
	return set(carrier, RETRACE_RESPONSE_HEADER, value) == 0 ? RETRACE_OK : RETRACE_E_INVAL;
}

int retrace_extract_response(void *carrier, retrace_carrier_get get)
{
	const char *value;
	retrace_trace_id cur;
	if (!get)
		return RETRACE_E_INVAL;
	cur = retrace_current();
	if (!cur.hi && !cur.lo)
		return RETRACE_E_NOTRACE;
	value = get(carrier, RETRACE_RESPONSE_HEADER);
	return value ? retrace_deserialize_response(value) : RETRACE_OK;
}
