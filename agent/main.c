/*
 * retrace-agent — the per-host daemon.
 *
 * Parses settings, opens (or takes over) the pool, starts the control endpoint,
 * then polls. A pass that finds work is followed at once by the next; idle
 * passes sleep, doubling from 20 us up to 1 ms, so an idle agent costs ~1000
 * wake-ups a second and a busy one never sleeps. SIGTERM/SIGINT end the loop;
 * the pool is kept for the next agent unless --unlink was given.
 */
#include "nng_close.h"
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "control.h"
#include "log.h"
#include "retrace/retrace.h"

#define IDLE_SLEEP_MIN_NS 20000ull
#define IDLE_SLEEP_MAX_NS 1000000ull

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static size_t handle_request(void *arg, const uint8_t *req, size_t len, uint8_t *out,
			     size_t cap)
{
	return rt_agent_handle_request(arg, req, len, out, cap);
}

static void install_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
}

static void touch_ready_file(const char *path)
{
	FILE *f;
	if (!path[0])
		return;
	if (!(f = fopen(path, "w"))) {
		rt_log(RT_LOG_WARN, "cannot create ready file %s", path);
		return;
	}
	fclose(f);
}

static void run(struct rt_agent *a, struct rt_control *ctl)
{
	uint64_t sleep_ns = IDLE_SLEEP_MIN_NS;
	while (!stop_requested) {
		unsigned int n = 0;
		/* A request first: a remote trigger is on a traversal's critical path. */
		if (rt_control_pending(ctl)) {
			rt_control_serve(ctl, handle_request, a);
			n++;
		}
		n += rt_agent_poll(a);
		if (n) {
			sleep_ns = IDLE_SLEEP_MIN_NS;
			continue;
		}
		rt_control_sleep(ctl, sleep_ns);
		if (sleep_ns < IDLE_SLEEP_MAX_NS)
			sleep_ns = sleep_ns * 2 > IDLE_SLEEP_MAX_NS ? IDLE_SLEEP_MAX_NS : sleep_ns * 2;
	}
}

int main(int argc, char **argv)
{
	static struct rt_agent agent;
	struct rt_agent_config cfg;
	struct rt_control ctl;
	char err[512];
	const char *urls[2];
	int rc;

	rt_agent_config_defaults(&cfg);
	rc = rt_agent_config_parse(&cfg, argc, argv, stderr);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	rt_log_level = cfg.log_level;
	install_signals();
	if ((rc = rt_agent_open(&agent, &cfg, err, sizeof err)) != RETRACE_OK) {
		fprintf(stderr, "retrace-agent: %s\n", err);
		return rc == RETRACE_E_EXISTS ? 3 : 1;
	}
	urls[0] = cfg.status_addr;
	urls[1] = cfg.listen;
	if (rt_control_start(&ctl, urls, 2, err, sizeof err) != 0) {
		fprintf(stderr, "retrace-agent: %s\n", err);
		agent.cfg.unlink_at_exit = 0; /* clients may be writing into it */
		rt_agent_close(&agent);
		return 1;
	}
	if (ctl.nbound > 1)
		snprintf(agent.cfg.listen, sizeof agent.cfg.listen, "%s", ctl.bound[1]);
	if (rt_agent_connect(&agent, ctl.nbound > 1 ? ctl.bound[1] : "", err, sizeof err) != 0) {
		fprintf(stderr, "retrace-agent: %s\n", err);
		rt_control_stop(&ctl);
		agent.cfg.unlink_at_exit = 0;
		rt_agent_close(&agent);
		return 1;
	}
	rt_log(RT_LOG_INFO, "agent %u %s pool %s (%u x %u B buffers); status on %s, listening on %s",
	       cfg.agent_id, agent.took_over ? "took over" : "created", cfg.pool,
	       agent.pool.hdr->buffer_count, agent.pool.hdr->buffer_size, ctl.bound[0],
	       ctl.nbound > 1 ? ctl.bound[1] : "(none)");
	touch_ready_file(cfg.ready_file);
	run(&agent, &ctl);
	rt_log(RT_LOG_INFO, "stopping: %llu buffers indexed, %llu traces evicted",
	       (unsigned long long)agent.st.buffers_indexed,
	       (unsigned long long)agent.ix.st.evicted_traces);
	rt_control_stop(&ctl);
	rt_agent_close(&agent);
	if (rt_nng_close_abandoned())
		rt_log(RT_LOG_WARN, "%llu socket close(s) hung in nng and were abandoned",
		       (unsigned long long)rt_nng_close_abandoned());
	return 0;
}
