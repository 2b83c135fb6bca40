/*
 * tools/retrace/cmd.h — the subcommands of the `retrace` command line. Each takes
 * argv as its own main would (argv[0] is the subcommand's name) and returns the
 * process exit code: 0 ok, 1 the operation failed, 2 bad usage.
 */
#ifndef RETRACE_TOOLS_CMD_H
#define RETRACE_TOOLS_CMD_H

#include <stddef.h>

int retrace_cmd_status(int argc, char **argv);
int retrace_cmd_traces(int argc, char **argv);
int retrace_cmd_show(int argc, char **argv);

/* A request/reply round trip to a daemon's control address (nng REQ). */
int retrace_request(const char *url, const char *req, int timeout_ms, char **reply,
		    size_t *reply_len, char *err, size_t errlen);

#endif
