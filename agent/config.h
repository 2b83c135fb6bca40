/*
 * agent/config.h — retrace-agent's settings: defaults, command-line flags and the
 * config file, from one table.
 *
 * Owns: struct rt_agent_config and the table that names every setting once (long
 * flag = config key, type, default, help line). The config file is `key = value`
 * lines with `#` comments; an unknown key or a bad value is refused with the file
 * name and line number. Flags given on the command line win over the file.
 */
#ifndef RETRACE_AGENT_CONFIG_H
#define RETRACE_AGENT_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon/log.h" /* the levels */

#define RT_AGENT_ADDR_MAX 256
#define RT_AGENT_LIST_MAX 1024 /* a URL, or a member list ID=URL,... (docs/scaling.md) */


struct rt_agent_config {
	char pool[64];
	uint32_t buffer_size;
	uint32_t buffer_count;
	uint32_t breadcrumb_slots;
	uint32_t trigger_slots;
	uint32_t client_slots;
	uint32_t trace_capacity;    /* 0: twice the buffer count */
	uint32_t segment_slots;      /* segments held beyond one per buffer (0: one per 512 pool bytes) */
	double evict_threshold;     /* occupancy share that starts eviction */
	double pinned_share;        /* pinned share past which pins are abandoned */
	uint32_t agent_id;
	long group;                 /* -1: none */
	char listen[RT_AGENT_ADDR_MAX];      /* nng URL for the coordinator */
	char status_addr[RT_AGENT_ADDR_MAX]; /* local nng URL for `retrace status` */
	char coordinator[RT_AGENT_LIST_MAX]; /* empty: none; ID=URL,...: a sharded group */
	int log_level;
	double liveness_interval;   /* seconds between client liveness scans */
	int unlink_at_exit;         /* remove the pool at a clean exit */
	int replace;                /* unlink an incompatible pool and start afresh */
	char ready_file[256];       /* touched once ready (scripts, tests) */
	/* reporting (agent/report.h, agent/uplink.h) */
	char collector[RT_AGENT_LIST_MAX];   /* nng URL of the collector (or ID=URL,...); empty: none */
	char host[64];              /* host name sent at registration (default: hostname) */
	double trigger_rate;        /* local trigger groups per second per trigger id */
	double trigger_burst;
	double bandwidth;           /* reporting bytes/s, all triggers; 0 = unlimited */
	double trigger_bandwidth;   /* reporting bytes/s per trigger id; 0 = unlimited */
	char trigger_weights[256];  /* "ID:W,ID:W" */
	uint32_t report_timeout_ms;
	uint32_t outbox;            /* triggers kept while the coordinator is away */
	double triggered_ttl;       /* seconds a reported, quiet triggered trace is kept */
	uint32_t max_slice_bytes;   /* payload bytes per slice message */
	double report_hold;         /* seconds a triggered trace waits before its first slice */
	char spool_dir[256];        /* empty: no spool */
	uint64_t spool_max;         /* bytes */
	/* authentication and limits (docs/security.md, agent/guard.h) */
	char tls_ca[256];           /* CA of the deployment; all three set: TLS on tcp:// */
	char tls_cert[256];         /* our certificate, CN=agent-ID */
	char tls_key[256];
	int insecure;               /* allow plain tcp:// beyond loopback */
	int check_config;           /* --check-config: validate, then exit */
	double remote_trigger_rate; /* remote triggers per second per peer; 0 = no limit */
	double remote_trigger_burst;
	uint32_t max_connections;   /* per listener of the control socket */
	char metrics_listen[RT_AGENT_ADDR_MAX]; /* http:// URL of /metrics; empty: off */
	int status_default;         /* status_addr was derived (its directory is ours to make) */
};

/* Fill the defaults (they work for the demo on one host). */
void rt_agent_config_defaults(struct rt_agent_config *c);

/*
 * Parse argv (after the defaults; a --config file is read first, then the flags
 * override it). Returns 0 to run, 1 when --help was printed, -1 on error (a
 * sentence was printed to err).
 */
int rt_agent_config_parse(struct rt_agent_config *c, int argc, char **argv, FILE *err);

/* Read one config file into c; -1 with "file:line: why" on err. */
int rt_agent_config_load(struct rt_agent_config *c, const char *path, FILE *err);

/* The status address derived from the pool name when none is given:
 * ipc:///tmp/retrace-UID/NAME.status, in a directory only that user may enter. */
void rt_agent_default_status_addr(const char *pool, char *out, size_t outlen);

void rt_agent_usage(FILE *out);

#endif
