/*
 * coordinator/coordinator.h — retrace-coordinator's core, as a library.
 *
 * Owns: the agent directory (agent id -> control address, persisted in the
 * store), the breadcrumb traversal of every triggered trace group, the
 * collector endpoint that stores agents' slices and acknowledges them once
 * durable, the assembly of slices into coherent or incoherent traces, and the
 * coordinator's figures (`retrace status --coordinator URL`).
 *
 * Promises:
 *   - Every message from the network is untrusted: decoded strictly (wire/),
 *     counted when malformed, answered with an error ACK, never fatal.
 *   - A slice is acknowledged only after its store transaction committed; a
 *     trigger only after it is stored as pending, so a restarted coordinator
 *     resumes its traversal.
 *   - One thread (rt_coord_run's caller) owns all state; nng's callbacks only
 *     hand finished I/O to it through a locked ready list.
 */
#ifndef RETRACE_COORDINATOR_H
#define RETRACE_COORDINATOR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define RT_COORD_URL_MAX 256
#define RT_COORD_PEERS_MAX 4096

struct rt_coord_config {
	char listen[RT_COORD_URL_MAX];     /* REGISTER, TRIGGER, status (default tcp://127.0.0.1:7700) */
	char collector[RT_COORD_URL_MAX];  /* SLICE (default tcp://127.0.0.1:7701) */
	char store[RT_COORD_URL_MAX];      /* SQLite file (default retrace.db) */
	char ready_file[RT_COORD_URL_MAX]; /* created once listening */
	int sync_full;                     /* fsync every commit (power-safe) */
	double commit_interval;            /* s a group commit may gather turns (0 = every turn;
	                                      < 0 = the store's default: batch.c) */
	uint32_t commit_slices;            /* commit once this many slices wait (0 = contexts) */
	uint32_t collector_contexts;       /* slices received at once (0 = 512, the most) */
	/* A group of coordinators sharded by trace id (ring.c, docs/scaling.md). */
	char member_id[RT_COORD_URL_MAX];  /* our id in --peers (empty: not sharded) */
	char peers[RT_COORD_PEERS_MAX];    /* "ID=URL,..." every member's --listen URL */
	double settle;                     /* s of quiet after the last slice before a trace closes */
	double collect_timeout;            /* s after the trigger when a trace closes regardless */
	double state_ttl;                  /* s a closed trace is remembered for late slices */
	double agent_timeout;              /* s one remote trigger may take */
	uint32_t agent_retries;            /* further attempts after a timeout */
	int replies_on_loop;               /* 1: agents' replies always wait for the loop
	                                      thread (the hand-off before session 9; a
	                                      benchmark's same-run baseline) */
	double agent_ttl;                  /* s without registration before an agent is forgotten */
	double retain_age;                 /* s traces are kept (0 = forever) */
	uint64_t retain_bytes;             /* slice bytes kept (0 = no limit) */
	uint32_t max_groups;               /* trace groups open at once */
	int log_level;                     /* 0 error .. 3 debug */
	/* Selection of collected traces (selection.c, docs/coordinator.md "Selection"). */
	double select_window;              /* s of traffic per window (default 60) */
	uint32_t select_window_traces;     /* also close a window after N traces (0 = time only) */
	double select_budget;              /* traces kept per minute (0 = keep every trace) */
	int select_no_trigger_alarms;      /* triggers do not alarm their traces' groups */
	int select_no_hold;                /* no trace waits for the next window (cut minute) */
	/* Adaptive span instrumentation (adaptive.c, docs/adaptive.md). */
	char adaptive[RT_COORD_URL_MAX];   /* "on" or "off" (default off) */
	char adaptive_pin[RT_COORD_URL_MAX]; /* service:operation,... always recorded */
	double adaptive_window;            /* s: a learner cycle at least this often (default 10) */
	uint32_t adaptive_batch;           /* traces per learner cycle at most (default 50) */
	uint32_t adaptive_max_sites;       /* span sites learned (default 1000) */
	/* Authentication and limits (docs/security.md). */
	char tls_ca[RT_COORD_URL_MAX];     /* CA of the deployment (PEM) */
	char tls_cert[RT_COORD_URL_MAX];   /* our certificate, CN=coordinator */
	char tls_key[RT_COORD_URL_MAX];    /* its key */
	int insecure;                      /* allow plain tcp:// beyond loopback */
	int check_config;                  /* --check-config: validate, then exit */
	char export_url[RT_COORD_URL_MAX]; /* continuous OTLP/HTTP export (stream.c); empty: off */
	uint32_t export_queue;             /* traces waiting for export at most (default 2048) */
	uint32_t export_batch;             /* traces per push (default 128) */
	double export_interval;            /* push at least this often, seconds (default 1) */
	uint32_t max_connections;          /* per listener; 0 = 1024 with TLS, 16 without */
	long store_group;                  /* -1: store file 0600; else 0640 with this group */
	char metrics_listen[RT_COORD_URL_MAX]; /* http:// URL of /metrics (docs/metrics.md); empty: off */
	char http_listen[RT_COORD_URL_MAX];    /* http:// URL of the web UI and /api (docs/ui.md); empty: off */
	/* Weaving hops without context (weave.c, docs/weaving.md). */
	char weave[RT_COORD_URL_MAX];          /* "on" or "off" (default off) */
	char weave_graph[RT_COORD_URL_MAX];    /* "CALLER CALLEE" lines for clients without peer.service */
	double weave_timeout;                  /* s the agents' candidate answers may take (default 1) */
	double history_interval;           /* s between the UI's history samples (history.h; 0 = off) */
};

void rt_coord_config_defaults(struct rt_coord_config *c);
/* Parse argv (and --config FILE); 0 ok, 1 --help printed, -1 error printed on err. */
int rt_coord_config_parse(struct rt_coord_config *c, int argc, char **argv, FILE *err);
void rt_coord_usage(FILE *out);

struct rt_coord;

/* Open the store, resume pending triggers, listen. NULL with err filled on failure. */
struct rt_coord *rt_coord_open(const struct rt_coord_config *cfg, char *err, size_t errlen);
/* Run until *stop becomes non-zero (checked at least every 50 ms). */
void rt_coord_run(struct rt_coord *c, volatile int *stop);
void rt_coord_close(struct rt_coord *c);

/* The listening addresses actually bound (port 0 resolved). */
const char *rt_coord_listen_addr(const struct rt_coord *c);
const char *rt_coord_collector_addr(const struct rt_coord *c);

/*
 * Traversal latencies (ns) recorded after the first `from` ones, copied into
 * out (at most max, oldest first; the ring keeps the last 8192). Returns the
 * total count recorded so far. Safe to call from another thread than the loop.
 */
uint64_t rt_coord_latencies(struct rt_coord *c, uint64_t from, uint64_t *out, size_t max,
			    size_t *n);

/*
 * Where a remote trigger's time goes, per reply (ns): stage RT_COORD_STAGE_RTT is
 * the agent's round trip (sent -> nng's reply callback), RT_COORD_STAGE_HANDOFF
 * the hand-off (callback -> the loop acted on it). Same contract as
 * rt_coord_latencies; the ring keeps the last RT_COORD_STAGE_RING of each.
 */
#define RT_COORD_STAGE_RING 4096
enum { RT_COORD_STAGE_RTT = 0, RT_COORD_STAGE_HANDOFF = 1, RT_COORD_STAGES = 2 };
uint64_t rt_coord_stage_samples(struct rt_coord *c, int stage, uint64_t from, uint64_t *out,
				size_t max, size_t *n);

/* Status text (json = 0) or JSON; returns bytes written excluding the NUL. */
size_t rt_coord_status(struct rt_coord *c, int json, char *out, size_t cap);

#endif
