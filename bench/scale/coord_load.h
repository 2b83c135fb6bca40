/*
 * bench/scale/coord_load.h — the coordinator part of bench/scale: real
 * coordinators (coordinator/, in this process, one loop thread each) fed by
 * fake agents over loopback nng, measuring collected traces per second.
 */
#ifndef RETRACE_BENCH_SCALE_COORD_LOAD_H
#define RETRACE_BENCH_SCALE_COORD_LOAD_H

#include <stdint.h>
#include <sys/types.h>

#include "wire/wire.h"

#define CL_PARTS 3 /* agents per trace */

/* Traces of CL_PARTS agents each, taken from a pool of `agents` agent ids. */
struct cl_workload {
	int traces, agents;
	uint64_t hi, lo0;          /* trace i is (hi, lo0 + i) */
	struct rt_wire_buf *msg;   /* traces * CL_PARTS encoded SLICE messages */
	uint32_t *agent;           /* their agent ids */
	uint32_t *buffers;         /* buffers in each */
	uint64_t *payload;         /* payload bytes in each (what a breadcrumb reply announces) */
};

struct cl_run {
	int coordinators;          /* 1 or 2: trace ids split by daemon/ring.h */
	const char *store[2];      /* each coordinator's --store */
	double commit_interval;    /* --commit-interval (0: a commit per turn) */
	uint32_t collector_contexts; /* --collector-contexts (0: the default) */
	int pin;                   /* pin coordinator k's loop thread to CPU k */
	int server_pid;            /* a store server whose CPU time to count (0: none) */
};

struct cl_result {
	double wall_s;
	uint64_t closed, coherent, commits, slices;
	uint64_t per_coord[2];     /* traces closed by each */
	/* CPU seconds over the run (from the first message to the last close):
	 * this process (coordinators, nng's threads, fake agents, load), each
	 * coordinator's loop thread, and the store server (0 without one). */
	double proc_cpu_s, loop_cpu_s[2], server_cpu_s;
};

/* CPU seconds another process has used (utime + stime of /proc/PID/stat,
 * every thread of it); 0 if unreadable. */
double cl_pid_cpu_s(int pid);

/* Run the workload through the coordinators; 0, or -1 with a line on stderr. */
int cl_load_run(const struct cl_workload *w, const struct cl_run *run, struct cl_result *out);

#endif
