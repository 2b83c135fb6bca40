/*
 * examples/shop/main.c — `retrace-shop`: dispatch to `serve` or `load`.
 */
#include "shop.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
	fprintf(out,
		"usage: retrace-shop serve SERVICE --listen PORT [--call NAME=URL ...] [options]\n"
		"       retrace-shop load --target URL --requests N [options]\n"
		"\n"
		"A small multi-service shop over HTTP on loopback, traced with libretrace:\n"
		"  serve   run one service (frontend, cart, catalog, inventory, payment, ...)\n"
		"  load    drive GET /checkout requests at the frontend\n"
		"`retrace-shop serve --help` and `retrace-shop load --help` list the options;\n"
		"examples/README.md describes the topology and the x-shop-* headers.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return SHOP_EXIT_USAGE;
	}
	if (strcmp(argv[1], "serve") == 0)
		return shop_serve_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "load") == 0)
		return shop_load_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "retrace-shop: unknown command '%s' (want serve or load; see --help)\n",
		argv[1]);
	return SHOP_EXIT_USAGE;
}
