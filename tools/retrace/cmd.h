/*
 * tools/retrace/cmd.h — the subcommands of the `retrace` command line. Each takes
 * argv as its own main would (argv[0] is the subcommand's name) and returns the
 * process exit code: 0 ok, 1 the operation failed, 2 bad usage.
 */
#ifndef RETRACE_TOOLS_CMD_H
#define RETRACE_TOOLS_CMD_H

#include <stddef.h>
#include <stdint.h>

int retrace_cmd_status(int argc, char **argv);
int retrace_cmd_traces(int argc, char **argv);
int retrace_cmd_show(int argc, char **argv);
int retrace_cmd_alarm(int argc, char **argv);
int retrace_cmd_export(int argc, char **argv);

/* "90s", "5m", "2h", "1d", "1500ms" or plain seconds -> ns; 0 if malformed
 * (cli_common.c, as are the store, time and id-list helpers below). */
uint64_t retrace_parse_duration_ns(const char *v);

/* Store and decode helpers shared by show and export. */
struct rt_store;
struct rt_decoded_trace;
struct rt_decode_stats;
const char *retrace_default_store(void); /* $RETRACE_STORE or ./retrace.db */
/* Open read-only; on failure print "retrace CMD: cannot open ..." and return -1. */
int retrace_open_store(const char *cmd, const char *path, struct rt_store **s);
/* 32 hex digits, or the low 16 (hi = 0); -1 if malformed or zero. */
int retrace_parse_trace_id(const char *v, uint64_t *hi, uint64_t *lo);
/* Decode every stored slice of a trace; -1 with a reason in err. */
int retrace_decode_stored(struct rt_store *s, uint64_t hi, uint64_t lo,
			  struct rt_decoded_trace *out, char *err, size_t errlen);
/* "2 gaps, 1 partial span" into out; returns the number of problems (0: clean). */
uint64_t retrace_decode_problems(const struct rt_decode_stats *st, char *out, size_t cap);
void retrace_format_time(uint64_t unix_ns, char *out, size_t cap);
void retrace_list_ids(char *out, size_t cap, const uint32_t *ids, uint32_t n, const char *sep);

/* A request/reply round trip to a daemon's control address (nng REQ). */
int retrace_request(const char *url, const char *req, int timeout_ms, char **reply,
		    size_t *reply_len, char *err, size_t errlen);

#endif
