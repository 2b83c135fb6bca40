/*
 * client/client.h — libretrace internals shared by the client's .c files.
 *
 * Owns: the process-wide client state (one pool mapping, the configuration) and
 * the per-thread state behind the public fast-path struct. Not installed.
 *
 * Process state is the one documented global of the client: `rt_client`. It is
 * written under `attach_lock` (attach, shutdown, fork) and read without locks;
 * the pool pointer is published with a release store so a thread that sees it
 * sees a fully mapped pool.
 */
#ifndef RETRACE_CLIENT_CLIENT_H
#define RETRACE_CLIENT_CLIENT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "retrace/retrace.h"
#include "shm/pool.h"

#define RT_BUFFER_NONE UINT32_MAX
#define RT_BUFFER_DISCARD (UINT32_MAX - 1)
#define RT_MAX_BATCH 32

/* The part of a trace that moves with retrace_detach/attach. */
struct rt_trace_ctx {
	retrace_trace_id id;
	uint64_t span_id;
	uint8_t *cur, *end;   /* fast-path window when detached */
	uint8_t *data;        /* payload start of the current buffer */
	uint32_t buffer_id;   /* RT_BUFFER_NONE / RT_BUFFER_DISCARD / id */
	uint32_t next_seq;
	uint32_t writer_pid, writer_tid;
	retrace_agent_id hops[2]; /* previous hops from the incoming context */
	uint8_t active, recorded, fired, pad;
	struct rt_pool *pool; /* pool the buffer belongs to */
};

/* Incoming context parsed by deserialize before begin. */
struct rt_incoming {
	retrace_trace_id id;
	retrace_agent_id hops[2];
	uint8_t fired, valid;
};

struct rt_thread {
	uint8_t initialized;
	uint8_t in_trigger;  /* re-entrancy guards for signal handlers */
	uint8_t in_ring_op;
	uint32_t tid;
	uint32_t pid;        /* cached: getpid() is a system call on current glibc */
	unsigned fork_generation;
	struct rt_trace_ctx ctx;
	struct rt_incoming incoming;
	struct rt_pool *spare_pool;  /* pool the spare ids belong to */
	uint32_t spare[RT_MAX_BATCH];
	uint32_t n_spare;
	struct rt_complete_entry pending[RT_MAX_BATCH];
	uint32_t n_pending;
	uint64_t pending_first_tick;
	uint8_t *discard;
	size_t discard_size;
	struct retrace_thread_stats stats;
};

struct rt_client_state {
	pthread_mutex_t attach_lock;
	struct rt_pool pool_storage;
	struct rt_pool *pool;          /* NULL when not attached (acquire/release) */
	struct retrace_config cfg;
	char pool_name[64];
	uint32_t slot;                 /* registry slot or UINT32_MAX */
	uint64_t flush_ticks;          /* pending complete entries older than this flush */
	uint64_t next_attach_ns;       /* retry schedule when the pool is missing */
	int configured;
	int warned;
	unsigned fork_generation;
};

extern struct rt_client_state rt_client;
extern __thread struct rt_thread rt_thread_tls __attribute__((tls_model("initial-exec")));

/* client.c */
void rt_thread_setup(struct rt_thread *t);
struct rt_pool *rt_client_pool(void);
void rt_push_breadcrumb(struct rt_thread *t, uint64_t trace_lo, retrace_agent_id agent);
int rt_push_trigger_group(struct rt_thread *t, retrace_trace_id id, uint32_t trigger_id,
			  const retrace_trace_id *lateral, size_t n_lateral);
uint64_t rt_mono_ns(void);

#endif
