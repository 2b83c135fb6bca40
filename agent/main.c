/*
 * retrace-agent — the per-host daemon.
 *
 * Parses settings, opens (or takes over) the pool, starts the control endpoint,
 * then polls. Only a pass that found a full batch of work (BUSY_PASS_ITEMS) is
 * followed at once by the next; any other pass sleeps, the sleep doubling from
 * 20 us up to 1 ms while passes stay short of a batch. Why not "any work, go
 * again": a service at a few thousand requests a second leaves one or two
 * entries per pass, so that rule spun a pass every ~20 us and took a fifth of a
 * core (the e2e throughput figure on 2 cores, docs/evaluation.md). Entries wait
 * in their rings meanwhile (the complete ring holds every buffer; triggers and
 * breadcrumbs have their own), a request is answered at once by nng's thread
 * while this one sleeps (control.h), and the pool's free reserve covers a millisecond of
 * buffers many times over. So a loaded agent makes ~1000 passes a second, each
 * with a batch, and an idle one as many empty ones. SIGTERM/SIGINT end the loop;
 * the pool is kept for the next agent unless --unlink was given.
 *
 * Before anything else it settles how it talks (docs/security.md): with
 * certificates every tcp:// address becomes tls+tcp:// and the certificate must
 * name this agent (CN=agent-ID); without, it refuses a tcp:// address beyond
 * loopback unless --insecure. The default status address lives in a directory
 * it makes 0700 and checks is its own. With --metrics-listen, the loop also
 * answers Prometheus scrapes (daemon/metrics.h) between passes.
 */
#include "nng_close.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "control.h"
#include "daemon/metrics.h"
#include "daemon/tls.h"
#include "guard.h"
#include "log.h"
#include "retrace/retrace.h"

#define IDLE_SLEEP_MIN_NS 20000ull
#define IDLE_SLEEP_MAX_NS 1000000ull
#define BUSY_PASS_ITEMS 64u /* a pass that handled this many goes again at once */

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

struct serve {
	struct rt_agent *a;
	struct rt_control *ctl;
	struct rt_metrics *metrics; /* /metrics; NULL: off */
};

static size_t render_metrics(void *arg, char *out, size_t cap, int *cut)
{
	return rt_agent_metrics(arg, out, cap, cut);
}

static size_t handle_request(void *arg, const uint8_t *req, size_t len, uint8_t *out,
			     size_t cap)
{
	struct serve *x = arg;
	size_t n;
	if (x->a->guard) { /* who is asking, for guard.c and the remote-trigger bucket */
		x->a->guard->peer = x->ctl->peer;
		/* The local ipc address only: its directory admits the agent's user alone. */
		x->a->guard->from_status = rt_control_request_on(x->ctl, 0) &&
					   strncmp(x->ctl->bound[0], "ipc://", 6) == 0;
	}
	if ((n = rt_agent_guard_admit(x->a, req, len, out, cap)) != 0)
		return n;
	return rt_agent_handle_request(x->a, req, len, out, cap);
}

/* TLS identity and URL policy; rewrites cfg's URLs. -1 with a sentence in err. */
static int secure(struct rt_agent_config *cfg, struct rt_tls **tls, char *err, size_t errlen)
{
	struct rt_tls_opts o;
	char url[RT_AGENT_ADDR_MAX];
	uint32_t id = 0;
	struct {
		const char *what;
		char *v;
	} urls[] = { { "--listen", cfg->listen }, { "--coordinator", cfg->coordinator },
		     { "--collector", cfg->collector }, { "--status", cfg->status_addr } };
	memset(&o, 0, sizeof o);
	snprintf(o.ca, sizeof o.ca, "%s", cfg->tls_ca);
	snprintf(o.cert, sizeof o.cert, "%s", cfg->tls_cert);
	snprintf(o.key, sizeof o.key, "%s", cfg->tls_key);
	if (rt_tls_load(&o, tls, err, errlen) < 0)
		return -1;
	if (*tls && !(rt_name_agent_id(rt_tls_name(*tls), &id) && id == cfg->agent_id)) {
		snprintf(err, errlen, "the certificate %s names '%s', not agent-%u (--agent-id): the "
			 "coordinator would refuse everything this agent sends", cfg->tls_cert,
			 rt_tls_name(*tls), cfg->agent_id);
		return -1;
	}
	for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
		if (rt_url_secure(*tls, cfg->insecure, urls[i].what, urls[i].v, url, sizeof url, err,
				  errlen) != 0)
			return -1;
		snprintf(urls[i].v, RT_AGENT_ADDR_MAX, "%s", url);
	}
	return 0;
}

/* The default status address's directory: ours, and nobody else may write it. */
static int status_dir(const char *url, char *err, size_t errlen)
{
	char dir[RT_AGENT_ADDR_MAX], *slash;
	struct stat sb;
	if (strncmp(url, "ipc://", 6) != 0)
		return 0;
	if (strlen(url + 6) >= sizeof dir)
		return 0;
	memcpy(dir, url + 6, strlen(url + 6) + 1);
	if (!(slash = strrchr(dir, '/')) || slash == dir)
		return 0;
	*slash = 0;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot make the status directory %s: %s", dir, strerror(errno));
		return -1;
	}
	if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() ||
	    (sb.st_mode & 022)) {
		snprintf(err, errlen, "the status directory %s is not a directory of this user that "
			 "only it may write (another user may have made it first): remove it, or "
			 "give --status URL", dir);
		return -1;
	}
	return 0;
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

static void run(struct rt_agent *a, struct rt_control *ctl, struct rt_metrics *metrics)
{
	struct serve x = { a, ctl, metrics };
	uint64_t sleep_ns = IDLE_SLEEP_MIN_NS;
	/* From here this thread owns the agent's state, and lends it to nng's
	 * thread while it sleeps, so that a request is answered at once (control.h). */
	rt_control_begin(ctl, handle_request, &x);
	while (!stop_requested) {
		unsigned int n = 0;
		/* A request first: a remote trigger is on a traversal's critical path. */
		if (rt_control_pending(ctl)) {
			rt_control_serve(ctl);
			n++;
		}
		/* A scrape of /metrics: rendered here, where the figures live. */
		if (rt_metrics_wanted(x.metrics)) {
			rt_metrics_serve(x.metrics, render_metrics, a);
			n++;
		}
		n += rt_agent_poll(a);
		rt_control_probe_tick(ctl, rt_agent_now_ns()); /* the status address answers? */
		if (n >= BUSY_PASS_ITEMS) {
			sleep_ns = IDLE_SLEEP_MIN_NS;
			continue;
		}
		rt_control_sleep(ctl, sleep_ns);
		if (sleep_ns < IDLE_SLEEP_MAX_NS)
			sleep_ns = sleep_ns * 2 > IDLE_SLEEP_MAX_NS ? IDLE_SLEEP_MAX_NS : sleep_ns * 2;
	}
}

static struct rt_metrics *metrics;

/* An early exit: the identity goes too (its key is wiped on the way). */
static int quit(struct rt_tls *tls, int rc)
{
	rt_metrics_stop(metrics);
	metrics = NULL;
	rt_tls_set_process(NULL);
	rt_tls_free(tls);
	return rc;
}

int main(int argc, char **argv)
{
	static struct rt_agent agent;
	static struct rt_agent_guard guard;
	struct rt_agent_config cfg;
	struct rt_control ctl;
	struct rt_tls *tls = NULL;
	char err[512];
	const char *urls[2];
	int rc;

	rt_agent_config_defaults(&cfg);
	rc = rt_agent_config_parse(&cfg, argc, argv, stderr);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	if (cfg.check_config) {
		printf("retrace-agent: the settings are valid\n");
		return 0;
	}
	rt_log_level = cfg.log_level;
	if (secure(&cfg, &tls, err, sizeof err) != 0) {
		fprintf(stderr, "retrace-agent: %s\n", err);
		return quit(tls, 2);
	}
	rt_tls_set_process(tls);
	if (cfg.status_default && status_dir(cfg.status_addr, err, sizeof err) != 0) {
		fprintf(stderr, "retrace-agent: %s\n", err);
		return quit(tls, 1);
	}
	/* Before the pool: a busy port must not leave a pool behind. */
	if (cfg.metrics_listen[0] &&
	    !(metrics = rt_metrics_start(cfg.metrics_listen, "--metrics-listen", cfg.insecure, err,
					 sizeof err))) {
		fprintf(stderr, "retrace-agent: %s\n", err);
		return quit(tls, 1);
	}
	install_signals();
	/* A second agent for a running agent's pool gets that answer, not the busy
	 * status address (named after the pool) it would meet first. */
	if (rt_pool_owner_running(cfg.pool)) {
		fprintf(stderr, "retrace-agent: pool %s is owned by a running agent; stop it "
			"first, or give this one another --pool\n", cfg.pool);
		return quit(tls, 3);
	}
	/* The endpoints before the pool, so that a busy address leaves no pool
	 * behind. Requests wait in the control mailbox until the loop serves them. */
	urls[0] = cfg.status_addr;
	urls[1] = cfg.listen;
	if (rt_control_start(&ctl, urls, 2, tls, cfg.max_connections, RT_AGENT_REQUEST_HARD, err,
			     sizeof err) != 0) {
		fprintf(stderr, "retrace-agent: %s; give another address with %s\n", err,
			strstr(err, cfg.listen) && cfg.listen[0] ? "--listen" : "--status");
		return quit(tls, 1);
	}
	if ((rc = rt_agent_open(&agent, &cfg, err, sizeof err)) != RETRACE_OK) {
		fprintf(stderr, "retrace-agent: %s\n", err);
		rt_control_stop(&ctl);
		return quit(tls, rc == RETRACE_E_EXISTS ? 3 : 1);
	}
	rt_agent_guard_init(&guard, tls != NULL, cfg.remote_trigger_rate, cfg.remote_trigger_burst);
	guard.max_connections = cfg.max_connections;
	agent.guard = &guard;
	if (ctl.nbound > 1)
		snprintf(agent.cfg.listen, sizeof agent.cfg.listen, "%s", ctl.bound[1]);
	if (rt_agent_connect(&agent, ctl.nbound > 1 ? ctl.bound[1] : "", err, sizeof err) != 0) {
		fprintf(stderr, "retrace-agent: %s\n", err);
		rt_control_stop(&ctl);
		agent.cfg.unlink_at_exit = 0;
		rt_agent_close(&agent);
		return quit(tls, 1);
	}
	guard.cap = ctl.cap;
	agent.control = &ctl;
	rt_log(RT_LOG_INFO, "agent %u %s pool %s (%u x %u B buffers); status on %s, listening on %s",
	       cfg.agent_id, agent.took_over ? "took over" : "created", cfg.pool,
	       agent.pool.geo.buffer_count, agent.pool.geo.buffer_size, ctl.bound[0],
	       ctl.nbound > 1 ? ctl.bound[1] : "(none)");
	if (metrics)
		rt_log(RT_LOG_INFO, "metrics on %s", rt_metrics_url(metrics));
	touch_ready_file(cfg.ready_file);
	run(&agent, &ctl, metrics);
	rt_metrics_stop(metrics); /* its scrapes wait for the loop, which ended */
	metrics = NULL;
	rt_log(RT_LOG_INFO, "stopping: %llu buffers indexed, %llu traces evicted",
	       (unsigned long long)agent.st.buffers_indexed,
	       (unsigned long long)agent.ix.st.evicted_traces);
	rt_control_stop(&ctl);
	agent.guard = NULL;
	agent.control = NULL;
	rt_agent_close(&agent);
	if (rt_nng_close_abandoned())
		rt_log(RT_LOG_WARN, "%llu socket close(s) hung in nng and were abandoned",
		       (unsigned long long)rt_nng_close_abandoned());
	return quit(tls, 0);
}
