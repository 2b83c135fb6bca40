/*
 * cmd_alarm.c — `retrace alarm`: raise, list or clear selection alarms on a
 * running coordinator.
 *
 * An alarmed entry API (SERVICE OPERATION, the group `retrace traces` shows)
 * gets a larger share of each selection window's budget until the alarm runs
 * out (docs/coordinator.md, "Selection"). One text request on the coordinator's
 * control socket, like `retrace status --coordinator`:
 *   "alarm add SECONDS\nSERVICE\nOPERATION", "alarm list",
 *   "alarm clear" or "alarm clear\nSERVICE\nOPERATION".
 * The coordinator answers "ok ..." or "error: ..." (exit status 1).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "cmd.h"

#define DEFAULT_COORDINATOR "tcp://127.0.0.1:7700"
#define DEFAULT_ALARM_S 300.0

static void alarm_usage(FILE *out)
{
	fprintf(out,
		"usage: retrace alarm SERVICE OPERATION [--for DURATION] [--coordinator URL]\n"
		"       retrace alarm --list [--coordinator URL]\n"
		"       retrace alarm --clear [SERVICE OPERATION] [--coordinator URL]\n"
		"Alarm an entry API (the group `retrace traces` shows, e.g. frontend \"GET /cart\")\n"
		"so that selection keeps more of its traces: up to 3x the average quota of a\n"
		"window, all alarms together at most half of its budget. Trigger firings alarm\n"
		"their traces' entry API for two windows on their own.\n\n"
		"  -f, --for DURATION     how long (90s, 5m, 2h, 1d; default 5m)\n"
		"  -l, --list             list operator and trigger alarms\n"
		"  -c, --clear            clear the alarm of SERVICE OPERATION, or all alarms\n"
		"  -C, --coordinator URL  the coordinator's address (default $RETRACE_COORDINATOR\n"
		"                         or " DEFAULT_COORDINATOR ")\n"
		"  -t, --timeout MS       give up after MS milliseconds (default " CLI_DEFAULT_TIMEOUT_TEXT ")\n"
		CLI_TLS_USAGE
		"  -h, --help             this text\n"
		"With TLS only an operator certificate may add or clear (docs/security.md).\n");
}

static int valid_name(const char *what, const char *v)
{
	if (!*v || strchr(v, '\n') || strlen(v) > 127) {
		fprintf(stderr, "retrace alarm: %s must be 1..127 bytes without a newline\n", what);
		return 0;
	}
	return 1;
}

int cli_cmd_alarm(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "for", required_argument, NULL, 'f' },     { "list", no_argument, NULL, 'l' },
		{ "clear", no_argument, NULL, 'c' },         { "coordinator", required_argument, NULL, 'C' },
		{ "timeout", required_argument, NULL, 't' }, { "help", no_argument, NULL, 'h' },
		CLI_TLS_LONGOPTS,                        { 0, 0, 0, 0 },
	};
	const char *url = getenv("RETRACE_COORDINATOR");
	double secs = DEFAULT_ALARM_S;
	int ch, list = 0, clear = 0, timeout = CLI_DEFAULT_TIMEOUT_MS, nargs;
	char req[512], *end;

	if (!url || !*url)
		url = DEFAULT_COORDINATOR;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "f:lcC:t:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'f':
			if (!(secs = ((double)cli_parse_duration_ns(optarg) / 1e9)) || secs > 1e7) {
				fprintf(stderr, "retrace alarm: --for wants a duration like 90s, 5m, 2h; got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'l': list = 1; break;
		case 'c': clear = 1; break;
		case 'C': url = optarg; break;
		case 't':
			errno = 0;
			timeout = (int)strtol(optarg, &end, 10);
			if (errno || *end || timeout <= 0) {
				fprintf(stderr, "retrace alarm: --timeout wants milliseconds, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'h': alarm_usage(stdout); return 0;
		case CLI_OPT_TLS_CA:
		case CLI_OPT_TLS_CERT:
		case CLI_OPT_TLS_KEY: cli_tls_opt(ch, optarg); break;
		default: alarm_usage(stderr); return 2;
		}
	}
	nargs = argc - optind;
	if (list + clear > 1 || (list && nargs) || (nargs != 0 && nargs != 2) ||
	    (!list && !clear && nargs != 2)) {
		alarm_usage(stderr);
		return 2;
	}
	if (nargs && (!valid_name("SERVICE", argv[optind]) ||
		      !valid_name("OPERATION", argv[optind + 1])))
		return 2;
	if (list)
		snprintf(req, sizeof req, "alarm list");
	else if (clear && !nargs)
		snprintf(req, sizeof req, "alarm clear");
	else if (clear)
		snprintf(req, sizeof req, "alarm clear\n%s\n%s", argv[optind], argv[optind + 1]);
	else
		snprintf(req, sizeof req, "alarm add %.3f\n%s\n%s", secs, argv[optind],
			 argv[optind + 1]);
	return cli_coordinator_say("alarm", url, req, timeout);
}
