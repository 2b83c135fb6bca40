/*
 * examples/topo/main.c — `retrace-topo`: dispatch to serve, run, load or show.
 */
#include "topo.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
	fprintf(out,
		"usage: retrace-topo serve --topology FILE --service NAME --run-dir DIR [options]\n"
		"       retrace-topo run   --topology FILE --run-dir DIR [--truth-dir DIR] [options]\n"
		"       retrace-topo load  --topology FILE --run-dir DIR --rate R --duration S [options]\n"
		"       retrace-topo show  TOPOLOGY\n"
		"\n"
		"A topology-driven service app traced with libretrace that writes its own\n"
		"ground truth (checked against the coordinator's store by retrace-truth):\n"
		"  serve   run one service of the topology\n"
		"  run     run every service of the topology, one process each\n"
		"  load    open-loop load at the topology's entry APIs\n"
		"  show    check a topology file and print what it describes\n"
		"`retrace-topo COMMAND --help` lists the options; examples/README.md describes\n"
		"the topology and truth formats.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return TOPO_EXIT_USAGE;
	}
	if (strcmp(argv[1], "serve") == 0)
		return topo_serve_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "run") == 0)
		return topo_run_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "load") == 0)
		return topo_load_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "show") == 0)
		return topo_show_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "retrace-topo: unknown command '%s' (want serve, run, load or show; "
		"see --help)\n", argv[1]);
	return TOPO_EXIT_USAGE;
}
