/*
 * tools/retrace/cmd.h — the subcommands of the `retrace` command line. Each takes
 * argv as its own main would (argv[0] is the subcommand's name) and returns the
 * process exit code: 0 ok, 1 the operation failed, 2 bad usage.
 */
#ifndef RETRACE_TOOLS_CMD_H
#define RETRACE_TOOLS_CMD_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "daemon/reqrep.h"

int cli_cmd_status(int argc, char **argv);
int cli_cmd_traces(int argc, char **argv);
int cli_cmd_show(int argc, char **argv);
int cli_cmd_alarm(int argc, char **argv);
int cli_cmd_export(int argc, char **argv);
int cli_cmd_recollect(int argc, char **argv);
int cli_cmd_estimate(int argc, char **argv);
int cli_cmd_policy(int argc, char **argv);

/* "90s", "5m", "2h", "1d", "1500ms" or plain seconds -> ns; 0 if malformed
 * (cli_common.c, as are the store, time and id-list helpers below). */
uint64_t cli_parse_duration_ns(const char *v);

/* Store and decode helpers shared by show and export. */
struct rt_store;
struct rt_decoded_trace;
struct rt_decode_stats;
/*
 * The store a command reads (traces, show, export, estimate): `given` (--store),
 * else $RETRACE_STORE, else the store the coordinator says it writes (the
 * request "store" to `coord`: --coordinator, else $RETRACE_COORDINATOR, else
 * CLI_DEFAULT_COORDINATOR), else ./retrace.db if it exists. 0 with the
 * locator in out, or -1 with "retrace CMD: ..." printed, naming --store.
 */
#define CLI_DEFAULT_COORDINATOR "tcp://127.0.0.1:7700"
/* How long a command waits for a daemon's answer unless --timeout says
 * (daemon/reqrep.h says why it is long). Ctrl-C stops a wait sooner. */
#define CLI_DEFAULT_TIMEOUT_MS RT_OPERATOR_TIMEOUT_MS
#define CLI_DEFAULT_TIMEOUT_TEXT "10000" /* RT_OPERATOR_TIMEOUT_MS, for usage texts */
int cli_store_locator(const char *cmd, const char *given, const char *coord, char *out,
		      size_t cap);
/* The --store and --coordinator lines of their usage texts; `pad`: spaces that
 * line the text up with the command's other options. */
#define CLI_STORE_USAGE(pad)                                                          \
	"  -S, --store STORE " pad "the store: PATH or sqlite:PATH (a SQLite file), or\n"   \
	"                    " pad "clickhouse://HOST:PORT/DB; default $RETRACE_STORE, else\n" \
	"                    " pad "the one the coordinator says it writes, else\n"         \
	"                    " pad "./retrace.db\n"                                          \
	"  -C, --coordinator URL\n"                                                          \
	"                    " pad "the coordinator to ask (default $RETRACE_COORDINATOR\n"  \
	"                    " pad "or tcp://127.0.0.1:7700)\n"
/* Open read-only; on failure print "retrace CMD: cannot open ..." and return -1. */
int cli_open_store(const char *cmd, const char *path, struct rt_store **s);
/* "2 gaps, 1 partial span" into out; returns the number of problems (0: clean). */
uint64_t cli_decode_problems(const struct rt_decode_stats *st, char *out, size_t cap);
void cli_format_time(uint64_t unix_ns, char *out, size_t cap);
void cli_list_ids(char *out, size_t cap, const uint32_t *ids, uint32_t n, const char *sep);

/* Trigger names: the built-ins' and those the coordinator stored (a client's
 * retrace_trigger_name). Loaded once per command; a store without the table
 * has none. */
struct cli_trigger_names {
	uint32_t n, cap;
	struct cli_trigger_name {
		uint32_t id;
		char name[64];
	} *e;
};
/* 0, or -1 with "retrace CMD: ..." printed (a store error). */
int cli_trigger_names_load(const char *cmd, struct rt_store *s, struct cli_trigger_names *out);
void cli_trigger_names_free(struct cli_trigger_names *t);
int cli_trigger_names_add(void *t, uint32_t id, const char *name); /* 0 or out of memory */
const char *cli_trigger_name(const struct cli_trigger_names *t, uint32_t id); /* or NULL */
/* "payment-error(7),head-sampled,9" (a user id's name with its id; a built-in's
 * name; an unnamed id as a number). */
void cli_list_triggers(char *out, size_t cap, const struct cli_trigger_names *t,
		       const uint32_t *ids, uint32_t n);
/* JSON array of the names of ids, null for an unnamed one. */
void cli_json_trigger_names(FILE *f, const struct cli_trigger_names *t, const uint32_t *ids,
			    uint32_t n);
/* A --trigger argument: a number, or a name; -1 if neither (unknown name). */
int cli_parse_trigger(const struct cli_trigger_names *t, const char *arg, uint32_t *id);

/* A request/reply round trip to a daemon's control address (nng REQ). With
 * certificates (below) a tcp:// URL is dialled as tls+tcp://, and the daemon
 * must present the certificate named cli_tls_peer (NULL: any of the CA). */
int cli_request(const char *url, const char *req, int timeout_ms, char **reply,
		    size_t *reply_len, char *err, size_t errlen);

/* TLS for requests (docs/security.md): --tls-ca/--tls-cert/--tls-key, else
 * $RETRACE_TLS_CA, $RETRACE_TLS_CERT, $RETRACE_TLS_KEY. Commands list these
 * long options and hand them to cli_tls_opt. */
enum { CLI_OPT_TLS_CA = 0x7101, CLI_OPT_TLS_CERT, CLI_OPT_TLS_KEY };
#define CLI_TLS_LONGOPTS                                                        \
	{ "tls-ca", required_argument, NULL, CLI_OPT_TLS_CA },                    \
	{ "tls-cert", required_argument, NULL, CLI_OPT_TLS_CERT },                \
	{ "tls-key", required_argument, NULL, CLI_OPT_TLS_KEY }
#define CLI_TLS_USAGE                                                            \
	"  --tls-ca FILE --tls-cert FILE --tls-key FILE\n"                            \
	"                         talk TLS with this certificate (an operator's:\n"   \
	"                         CN=operator-NAME; or $RETRACE_TLS_CA/_CERT/_KEY)\n"
void cli_tls_opt(int ch, const char *arg);
extern const char *cli_tls_peer; /* default "coordinator" */

/* One text request to the coordinator; its answer goes to stdout ("ok ...") or
 * stderr ("error: ..."). 0 if it said ok, 1 otherwise. `cmd` names the command
 * in messages. */
int cli_coordinator_say(const char *cmd, const char *url, const char *req, int timeout_ms);

/* status_summary.c: print the one-screen summary of a daemon's JSON figures.
 * 0, or 1 (with a message) when they do not parse. */
int cli_print_status_summary(const char *json_text, size_t len, int coordinator);

#endif
