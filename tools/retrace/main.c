/*
 * retrace — the command line. `retrace COMMAND [options]`; each command lives in
 * its own cmd_*.c and is listed once in the table below, which also makes the
 * help text.
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#ifdef RETRACE_HAVE_SELECT_EVAL
#include "cmd_select_eval.h"
#endif
#ifdef RETRACE_HAVE_WEAVE
#include "cmd_weave.h"
#endif

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
};

static const struct command commands[] = {
	{ "status", cli_cmd_status, "figures of a running agent and/or coordinator" },
#ifdef RETRACE_HAVE_COORDINATOR
	{ "traces", cli_cmd_traces, "list the traces the coordinator collected" },
	{ "show", cli_cmd_show, "one collected trace as a span tree across hosts (--records: raw)" },
	{ "export", cli_cmd_export, "collected traces as OTLP/JSON or Zipkin, to a file or a collector" },
	{ "alarm", cli_cmd_alarm, "alarm an entry API so selection keeps more of its traces" },
	{ "recollect", cli_cmd_recollect, "traverse stored traces again (after an agent restart)" },
	{ "estimate", cli_cmd_estimate, "unbiased counts of matching spans and traces, from sampled ones" },
	{ "policy", cli_cmd_policy, "the adaptive span policy: each span site's belief, probability, rank" },
#endif
#ifdef RETRACE_HAVE_WEAVE
	{ "weave", cli_cmd_weave, "reconstruct links across hops without context in an OTLP/JSON file" },
#endif
#ifdef RETRACE_HAVE_SELECT_EVAL
	{ "select-eval", cli_cmd_select_eval, "evaluate trace selection offline on a dataset" },
#endif
};

static void usage(FILE *out)
{
	size_t i;
	fprintf(out, "usage: retrace COMMAND [options]   (retrace COMMAND --help for more)\n\n");
	for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(out, "  %-14s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
	size_t i;
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "retrace: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
