/*
 * coordinator/main.c — retrace-coordinator: parse settings, run until SIGTERM/SIGINT.
 *
 * Exit codes: 0 clean stop, 1 could not start (store, sockets), 2 bad usage.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "coordinator.h"

static volatile int stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

int main(int argc, char **argv)
{
	struct rt_coord_config cfg;
	struct rt_coord *c;
	struct sigaction sa;
	char err[512];
	int rc;

	rt_coord_config_defaults(&cfg);
	rc = rt_coord_config_parse(&cfg, argc, argv, stderr);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	if (cfg.check_config) {
		printf("retrace-coordinator: the settings are valid\n");
		return 0;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	c = rt_coord_open(&cfg, err, sizeof err);
	if (!c) {
		fprintf(stderr, "retrace-coordinator: %s\n", err);
		return 1;
	}
	rt_coord_run(c, &stop_flag);
	rt_coord_close(c);
	return 0;
}
