/*
 * tests/store/chserver.h — a private ClickHouse server for a test or a benchmark.
 *
 * Starts Debian's clickhouse-server (18.16, /usr/sbin/clickhouse-server, or
 * $CLICKHOUSE_SERVER) as the calling user with a config XML of its own in a
 * fresh directory: loopback only, free ports, data, logs and tmp under that
 * directory. The server dies with the process that started it
 * (PR_SET_PDEATHSIG) and chs_stop stops it (SIGTERM, bounded wait, SIGKILL)
 * and removes the directory.
 */
#ifndef RETRACE_TESTS_STORE_CHSERVER_H
#define RETRACE_TESTS_STORE_CHSERVER_H

#include <sys/types.h>

struct chserver {
	pid_t pid;
	char dir[256];
	int http_port, tcp_port;
	char url[128]; /* clickhouse://127.0.0.1:PORT (append /DB) */
};

/* The server binary if installed, else NULL. */
const char *chs_binary(void);

/* Start one; `remote_servers` (may be NULL) is the body of <remote_servers> in
 * its config (for Distributed tables). 0, or -1 with the reason and the tail
 * of the server's log in why. Waits up to 60 s for SELECT 1 over HTTP. */
int chs_start(struct chserver *c, const char *remote_servers, char *why, size_t whylen);
/* The same on given ports (0: a free one), for servers that name each other. */
int chs_start_on(struct chserver *c, int http_port, int tcp_port, const char *remote_servers,
		 char *why, size_t whylen);
int chs_free_port(void);
void chs_stop(struct chserver *c);

/* Run one statement on the server over HTTP; the reply (NUL-terminated,
 * malloc'd) into *reply when not NULL. 0 if HTTP 200. */
int chs_sql(const struct chserver *c, const char *sql, char **reply);

#endif
