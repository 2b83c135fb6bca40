/*
 * topo.h — retrace-topo, a topology-driven service app (MicroBricks-style) that
 * writes its own ground truth.
 *
 * What it owns: the `retrace-topo` binary. A topology file (topology.c, format in
 * examples/README.md) names hosts (agent id + pool), services (one process each,
 * on one host) and, per API, the work it does, the raw bytes it records and the
 * downstream calls it makes. `serve` runs one service (serve.c), `run` starts every
 * service of a topology (run.c), `load` drives an open-loop load at the entry APIs
 * (load.c), `show` prints a parsed topology.
 *
 * What it promises: every raw record and every truth line follows topo_format.h,
 * so tools/truth (retrace-truth) can tell, for every triggered trace, exactly what
 * each host wrote; decisions (which optional calls are made, which calls fail,
 * which traces are edge cases) are functions of the trace id, so a run can be
 * replayed.
 */
#ifndef RETRACE_TOPO_H
#define RETRACE_TOPO_H

#include <stddef.h>
#include <stdint.h>

#include "topo_format.h"

#define TOPO_EXIT_USAGE 2
#define TOPO_MAX_HOSTS 32
#define TOPO_MAX_SERVICES 64
#define TOPO_MAX_APIS 256
#define TOPO_MAX_ENTRIES 16
#define TOPO_MAX_POOL 64
#define TOPO_MAX_TREE 100000u   /* call nodes in one entry's full expansion */
#define TOPO_MAX_BYTES (16u << 20) /* raw bytes one call may record */
#define TOPO_MAX_WORK_US 10000000u

/* sleep-exp: sleep an exponential time of mean US (at most 10 US), drawn per call:
 * service times that vary, so calls overtake each other (bench/weave). */
enum topo_work { TOPO_WORK_NONE = 0, TOPO_WORK_SPIN = 1, TOPO_WORK_SLEEP = 2,
		 TOPO_WORK_SLEEP_EXP = 3 };

struct topo_host {
	char name[TOPO_MAX_NAME];
	uint32_t agent;
	char pool[TOPO_MAX_POOL];
	int line;
};

struct topo_service {
	char name[TOPO_MAX_NAME];
	int host;      /* index into hosts */
	double error;  /* share of its calls failing by injection (trigger 2) */
	int line;
};

struct topo_call {
	int api;       /* callee API index (resolved after parsing) */
	double prob;   /* the call is made for this share of requests */
	char target[2 * TOPO_MAX_NAME];
	int line;
};

struct topo_api {
	char name[2 * TOPO_MAX_NAME]; /* "service.api" */
	int service;
	int work;            /* enum topo_work */
	uint32_t work_us;
	uint64_t bytes;      /* raw bytes recorded per call */
	uint32_t records;    /* in this many records */
	int parallel;        /* 1: downstream calls concurrently; 0: one after another */
	struct topo_call calls[TOPO_MAX_CALLS];
	int n_calls;
	uint32_t subtree;    /* call nodes of its full expansion, itself included */
	int line;
};

struct topo_entry {
	int api;
	uint32_t weight;
	int line;
};

struct topology {
	char path[512];
	uint32_t checksum;   /* of the file's bytes: both ends of a call must agree */
	struct topo_host hosts[TOPO_MAX_HOSTS];
	int n_hosts;
	struct topo_service services[TOPO_MAX_SERVICES];
	int n_services;
	struct topo_api apis[TOPO_MAX_APIS];
	int n_apis;
	struct topo_entry entries[TOPO_MAX_ENTRIES];
	int n_entries;
	uint64_t total_weight;
};

/* Parse and validate `path`. 0, or -1 with "FILE:LINE: why" (or "FILE: why") in err. */
int topo_load(const char *path, struct topology *t, char *err, size_t errn);

int topo_find_service(const struct topology *t, const char *name);
int topo_find_host(const struct topology *t, const char *name);

/* Node id of call k of a request at `node` of api a (preorder numbering of the
 * entry's full expansion: a node's children follow it, each with its subtree). */
uint32_t topo_child_node(const struct topology *t, int a, uint32_t node, int k);

/* Is call k of api a, at node `node` of trace (hi, lo), made? (its prob) */
int topo_call_made(const struct topology *t, int a, uint32_t node, int k, uint64_t hi,
		   uint64_t lo);
/* Does the call at this node of this trace fail by injection (service error rate)? */
int topo_fails(uint32_t node, uint64_t hi, uint64_t lo, double error);
/* Is this trace an edge case at rate pct (percent)? */
int topo_is_edge(uint64_t hi, uint64_t lo, double pct);

/* ------------------------------------------------------ messages ---- */

/*
 * Request (little-endian), service to service and load to entry:
 *   0 "TQ01" | 4 checksum u32 | 8 api u32 | 12 node u32 | 16 flags u32
 *   | 20 trace hi u64 | 28 trace lo u64 | 36 binary context (34, if TOPO_RQ_CTX)
 *   or the caller's span id (8, if TOPO_RQ_PARENT or TOPO_RQ_FRESH)
 * Reply:
 *   0 "TR01" | 4 status u8 | 5 fired u8 | 6 ctx_len u16 | 8 response context
 */
#define TOPO_RQ_HDR 36u
#define TOPO_RP_HDR 8u
#define TOPO_RQ_CTX 0x1u   /* a binary trace context follows (from a service) */
#define TOPO_RQ_EDGE 0x2u  /* the entry fires trigger 1 at completion */
#define TOPO_RQ_PARENT 0x4u /* untraced (--no-trace): the caller's span id follows (u64) */
#define TOPO_RQ_FRESH 0x8u  /* --no-context: no context; the caller's span id follows (u64),
			     * the header names the caller's trace; the callee starts a
			     * fresh trace and writes cause= in its truth line */

enum topo_status {
	TOPO_ST_OK = 0,
	TOPO_ST_FAILED = 1,     /* failed here by injection */
	TOPO_ST_DOWNSTREAM = 2, /* a call below failed or timed out */
	TOPO_ST_BAD = 3,        /* the request made no sense to this service */
};

/* ------------------------------------------------------ helpers ---- */

uint64_t topo_now_ns(void); /* CLOCK_MONOTONIC */
void topo_sleep_ns(uint64_t ns);
uint64_t topo_rand64(void); /* per-thread, seeded from getrandom */
int topo_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
int topo_parse_double(const char *s, double lo, double hi, double *out);
/* Write `text` to path atomically (a temporary file, then rename). 0 or -1. */
int topo_write_file(const char *path, const char *text);
/* Read the first line of path into out (no newline). 0, or -1 if absent/empty. */
int topo_read_line(const char *path, char *out, size_t n);
/* "DIR/NAME.url": where a service publishes its address. */
void topo_url_path(char *out, size_t n, const char *dir, const char *service);

/* Subcommands. */
int topo_serve_main(int argc, char **argv);
int topo_load_main(int argc, char **argv);
int topo_run_main(int argc, char **argv);
int topo_show_main(int argc, char **argv);

#endif
