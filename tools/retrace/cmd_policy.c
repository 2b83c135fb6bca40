/*
 * cmd_policy.c — `retrace policy`: the adaptive span policy a running
 * coordinator learned (docs/adaptive.md): per span site its service and
 * operation, its Beta(alpha, beta) belief and mean, the probability the
 * clients record it with, and its rank (1 = explains the most latency
 * variance). One text request, "policy" or "policy json", on the
 * coordinator's control socket, like `retrace status --coordinator`.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "cmd.h"

#define DEFAULT_COORDINATOR "tcp://127.0.0.1:7700"

static void policy_usage(FILE *out)
{
	fprintf(out,
		"usage: retrace policy [--json] [--coordinator URL] [--timeout MS]\n"
		"The adaptive span policy of a coordinator run with --adaptive on: each span\n"
		"site's belief (alpha, beta, mean), recording probability and rank.\n"
		"  -j, --json             the same as JSON\n"
		"  -C, --coordinator URL  default $RETRACE_COORDINATOR or " DEFAULT_COORDINATOR "\n"
		"  -t, --timeout MS       default " CLI_DEFAULT_TIMEOUT_TEXT "\n" CLI_TLS_USAGE);
}

int cli_cmd_policy(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },          { "coordinator", required_argument, NULL, 'C' },
		{ "timeout", required_argument, NULL, 't' }, { "help", no_argument, NULL, 'h' },
		CLI_TLS_LONGOPTS,                        { 0, 0, 0, 0 },
	};
	const char *url = getenv("RETRACE_COORDINATOR");
	int ch, json = 0, timeout = CLI_DEFAULT_TIMEOUT_MS, failed;
	char err[512], *reply = NULL, *end;
	size_t len = 0, n;

	if (!url || !*url)
		url = DEFAULT_COORDINATOR;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "jC:t:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j': json = 1; break;
		case 'C': url = optarg; break;
		case 't':
			errno = 0;
			timeout = (int)strtol(optarg, &end, 10);
			if (errno || *end || timeout <= 0) {
				fprintf(stderr, "retrace policy: --timeout wants milliseconds, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'h': policy_usage(stdout); return 0;
		case CLI_OPT_TLS_CA:
		case CLI_OPT_TLS_CERT:
		case CLI_OPT_TLS_KEY: cli_tls_opt(ch, optarg); break;
		default: policy_usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		policy_usage(stderr);
		return 2;
	}
	if (cli_request(url, json ? "policy json" : "policy", timeout, &reply, &len, err,
			sizeof err) != 0) {
		fprintf(stderr, "retrace policy: no coordinator answers at %s\n", err);
		return 1;
	}
	failed = len >= 6 && strncmp(reply, "error:", 6) == 0;
	n = len && reply[len - 1] == 0 ? len - 1 : len;
	while (n && reply[n - 1] == '\n')
		n--;
	fprintf(failed ? stderr : stdout, "%.*s\n", (int)n, reply);
	nng_free(reply, len);
	return failed;
}
