/*
 * tests/coordinator/cluster.h — a retrace deployment on loopback for the
 * end-to-end suites: the real retrace-coordinator binary, one real
 * retrace-agent per "host" (its own pool), and one writer process per host
 * (forked, attached with the real libretrace) that writes traces on command.
 *
 * Records are deterministic (cl_record_byte of trace, host, record, offset),
 * so a test regenerates what each host wrote and compares it byte for byte
 * with what the store holds (read back through `retrace show --records`).
 *
 * Every process started here dies with the test (PR_SET_PDEATHSIG), and
 * cl_stop stops (SIGTERM, bounded wait) and reaps them and removes the pools and the directory.
 */
#ifndef RETRACE_TESTS_COORDINATOR_CLUSTER_H
#define RETRACE_TESTS_COORDINATOR_CLUSTER_H

#include <stdint.h>
#include <sys/types.h>

#include "retrace/retrace.h"
#include "store.h"

#define CL_MAX_HOSTS 10
#define CL_MAX_CRUMBS 10
#define CL_MAX_LATERAL 10

struct cl_host {
	pid_t agent, writer;
	int cmd_fd, ack_fd;
	char pool[64];
	uint32_t buffers;
};

struct cluster {
	char dir[128];
	char store[192];
	char coord_url[64], collect_url[64];
	pid_t coord;
	int nhosts;
	struct cl_host hosts[CL_MAX_HOSTS];
};

/* Extra coordinator arguments (NULL-terminated), e.g. selection settings; set
 * before cl_start. */
#define CL_MAX_COORD_ARGS 16
extern const char *cl_coord_args[CL_MAX_COORD_ARGS + 1];
/* Extra arguments of every agent (NULL-terminated); and, when set, a directory
 * made by scripts/retrace-keys.sh: agent h then gets --tls-ca DIR/ca.crt
 * --tls-cert DIR/agent-(h+1).crt --tls-key DIR/agent-(h+1).key. */
/* The coordinator's --store (a store locator, store.h); NULL: DIR/store.db. */
extern const char *cl_store_locator;
#define CL_MAX_AGENT_ARGS 8
extern const char *cl_agent_args[CL_MAX_AGENT_ARGS + 1];
extern const char *cl_agent_tls_dir;

/* Sharded coordinators (docs/scaling.md): when set, every agent gets these
 * member lists ("ID=URL,...") as --coordinator and --collector instead of the
 * cluster's own coordinator. */
extern const char *cl_agent_coordinators;
extern const char *cl_agent_collectors;
/* Start n more hosts (agent ids from c->nhosts + 1) after cl_start; 0 or -1. */
int cl_start_hosts(struct cluster *c, int nhosts, uint32_t buffers);

/* Start a coordinator and n hosts (agent ids 1..n), each pool with `buffers` 8 KiB buffers;
 * returns once the coordinator's directory holds every agent (-1 if not within 30 s). */
int cl_start(struct cluster *c, int nhosts, uint32_t buffers);
/* Wait until the coordinator knows at least c->nhosts agents; 0, or -1 (with a line on
 * stderr) after timeout_s. */
int cl_wait_registered(struct cluster *c, double timeout_s);
/* Returns how many agents did not exit within 15 s of SIGTERM (killed then). */
int cl_stop(struct cluster *c);
int cl_start_coordinator(struct cluster *c);   /* same ports and store as before */
void cl_kill_coordinator(struct cluster *c);   /* SIGKILL */
/* SIGSTOP host h's agent and wait (up to 10 s) until every one of its threads is
 * stopped: kill() returning is not that. The kernel hands a stop signal to one
 * thread, which stops the others only once it runs; on a loaded machine the
 * agent's other threads answered requests for a while after kill() (seen: a
 * "stopped" agent answered 1 or 2 of the coordinator's asks). 0, or -1. */
int cl_stop_agent(struct cluster *c, int h);

/*
 * Host h (0-based; agent id h+1) writes trace (hi, lo): `records` records
 * (sizes vary up to ~3 KiB, so records cross buffers), depositing breadcrumbs
 * to the given agent ids. 0 on success.
 */
int cl_write(struct cluster *c, int h, uint64_t hi, uint64_t lo, int records,
	     const uint32_t *crumbs, int ncrumbs);
/*
 * Run the test's own code in host h's writer process (forked from the test, so
 * a function set before cl_start is there): cl_run_fn(h, trace id, io) with
 * io->in as given; its io->out and return value (0 = ok) come back. The writer
 * flushes afterwards. Used to drive the tracer API across hosts.
 */
struct cl_run_io {
	int32_t scenario;
	int32_t ok;
	char in[256];   /* e.g. an incoming "traceparent\ntracestate" */
	char out[256];  /* e.g. the context for the next hop */
	uint64_t ids[16]; /* e.g. the span ids created */
};
typedef int (*cl_run_fn_t)(int host, retrace_trace_id id, struct cl_run_io *io);
extern cl_run_fn_t cl_run_fn;
int cl_run(struct cluster *c, int h, uint64_t hi, uint64_t lo, struct cl_run_io *io);

/* Host h fires trigger `trigger_id` for (hi, lo) with lateral trace ids (lo list, same hi). */
int cl_trigger(struct cluster *c, int h, uint64_t hi, uint64_t lo, uint32_t trigger_id,
	       const uint64_t *lateral_lo, int nlateral);

uint8_t cl_record_byte(uint64_t lo, int host, int record, uint32_t offset);
uint32_t cl_record_len(uint64_t lo, int host, int record);

/* Slice rows in the cluster's store (rt_store_stats), -1 if it cannot be read. */
long long cl_store_slices(struct cluster *c);

/* Wait until the store has the trace; 0 and *out, or -1 after timeout_s. */
int cl_wait_trace(struct cluster *c, uint64_t hi, uint64_t lo, double timeout_s,
		  struct rt_store_trace *out);

/*
 * Compare the records the store holds for (trace, agent of host h) with what
 * host h wrote (`records` of them), via `retrace show --records`. 0 if equal;
 * else -1 with a sentence in why.
 */
int cl_check_records(struct cluster *c, uint64_t hi, uint64_t lo, int h, int records, char *why,
		     size_t whylen);

/* A figure from `retrace status --json` of host h's agent ("section", "key"); -1 if absent. */
long long cl_agent_figure(struct cluster *c, int h, const char *section, const char *key);
/* The same from the coordinator's status. */
long long cl_coord_figure(struct cluster *c, const char *section, const char *key);
/* Wait up to timeout_s for the coordinator's figure to reach at_least; its last
 * value (-1 if absent). For counters a daemon bumps after what the test can see
 * (an export is counted once the collector's answer is back, after the body
 * reached it). */
long long cl_wait_coord_figure(struct cluster *c, const char *section, const char *key,
			       long long at_least, double timeout_s);
/* A per-agent figure of the coordinator's directory ("asked", "failed": remote
 * trigger requests to agent_id, from its line "agent.ID": "… key=N"); -1 if absent. */
long long cl_coord_agent_figure(struct cluster *c, uint32_t agent_id, const char *key);
/* Every daemon's `retrace status --json` into c->dir/status-TAG-*.json: what a
 * failing test leaves behind to say why (the directory stays when a test fails). */
/* Seconds on the monotonic clock. A test's polling loop is bounded by it,
 * never by a count of tries: a try that spawns the CLI (the figures above)
 * takes a second on a loaded machine, and 600 tries of 20 ms ran for minutes. */
double cl_now_s(void);

void cl_dump_status(struct cluster *c, const char *tag);
/* Every daemon's threads' stacks (gdb, when installed) into c->dir/hung-TAG-*.txt:
 * a daemon that stopped working (a trace that never arrives) is still running. */
void cl_dump_stacks(struct cluster *c, const char *tag);

#endif
