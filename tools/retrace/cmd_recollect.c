/*
 * cmd_recollect.c — `retrace recollect TRACE_ID...`: ask the coordinator to
 * traverse stored traces again.
 *
 * For a trace stored incoherent while its data still sits on hosts (an agent
 * that restarted mid-traversal, a collector that was down): the coordinator
 * asks every agent the stored row names again, counts the slices already stored,
 * and replaces the row by the usual closing rules (docs/coordinator.md,
 * "Re-collecting a trace"). One text request per trace on the coordinator's
 * control socket: "recollect TRACE_ID".
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "store.h"

#define DEFAULT_COORDINATOR "tcp://127.0.0.1:7700"

static void recollect_usage(FILE *out)
{
	fprintf(out,
		"usage: retrace recollect TRACE_ID... [--coordinator URL]\n"
		"Traverse stored traces again: every agent a trace's row names (those that\n"
		"delivered and those that were missing) is asked for what it still holds, and\n"
		"the row is rewritten when the coordinator closes the trace again (coherent if\n"
		"every part is now there). Use it after an agent restart or a collector outage.\n\n"
		"  -C, --coordinator URL  the coordinator's address (default $RETRACE_COORDINATOR\n"
		"                         or " DEFAULT_COORDINATOR ")\n"
		"  -t, --timeout MS       give up after MS milliseconds (default " CLI_DEFAULT_TIMEOUT_TEXT ")\n"
		"  -h, --help             this text\n");
}

int cli_cmd_recollect(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "coordinator", required_argument, NULL, 'C' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *url = getenv("RETRACE_COORDINATOR");
	int ch, timeout = CLI_DEFAULT_TIMEOUT_MS, failed = 0, i;
	char req[64], *end;
	uint64_t hi, lo;

	if (!url || !*url)
		url = DEFAULT_COORDINATOR;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "C:t:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'C': url = optarg; break;
		case 't':
			errno = 0;
			timeout = (int)strtol(optarg, &end, 10);
			if (errno || *end || timeout <= 0) {
				fprintf(stderr, "retrace recollect: --timeout wants milliseconds, got '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'h': recollect_usage(stdout); return 0;
		default: recollect_usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		recollect_usage(stderr);
		return 2;
	}
	for (i = optind; i < argc; i++)
		if (rt_store_parse_trace_id(argv[i], strlen(argv[i]), &hi, &lo) != 0) {
			fprintf(stderr, "retrace recollect: '%s' is not a trace id (32 hex digits)\n",
				argv[i]);
			return 2;
		}
	for (i = optind; i < argc; i++) {
		rt_store_parse_trace_id(argv[i], strlen(argv[i]), &hi, &lo);
		snprintf(req, sizeof req, "recollect %016llx%016llx", (unsigned long long)hi,
			 (unsigned long long)lo);
		failed |= cli_coordinator_say("recollect", url, req, timeout);
	}
	return failed;
}
