/*
 * tests/coordinator/test_metrics.c — /metrics of the real agent and
 * coordinator, scraped by a real Prometheus server (docs/metrics.md).
 *
 * One host and the coordinator run with --metrics-listen (cluster.h); a
 * trigger is collected and the pool is filled past eviction, so counters, the
 * event horizon and a per-trigger series are not zero. Prometheus (the Debian
 * package; scripts/deps.sh installs it) runs from a temporary directory with a
 * 1 s scrape interval. Once the daemons are idle — the compared status figures
 * stay the same between two reads — the test waits for a scrape taken after
 * that moment, then asks Prometheus' HTTP API for each metric and compares it
 * with the same figure of `retrace status --json`: exactly for counters and
 * integer gauges, to the microsecond for the horizon in seconds. It also
 * checks what Prometheus learnt of the types (its metadata API), that both
 * targets are up without a scrape error, and that `promtool check metrics`
 * accepts both expositions as scraped directly. A second case checks the
 * option's errors name the flag and leave nothing behind.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cluster.h"
#include "common/suite.h"

#define HI 0x3e7c000000000001ull
#define TRIGGER 42
#define RECORDS 8

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* ------------------------------------------------------------ HTTP ---- */

/*
 * GET http://127.0.0.1:port/path (HTTP/1.0, the server closes). Returns the
 * status code and the body in *body (malloc'd, NUL terminated); -1 if no
 * answer came.
 */
static int http_get(int port, const char *path, char **body)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { 10, 0 };
	char req[4096], *buf = NULL, *p;
	size_t len = 0, cap = 0;
	int fd, status = -1;
	*body = NULL;
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		close(fd);
		return -1;
	}
	snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n",
		 path, port);
	if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
		close(fd);
		return -1;
	}
	for (;;) {
		ssize_t n;
		if (cap - len < 65536) {
			char *nb = realloc(buf, cap + 262144);
			if (!nb)
				break;
			buf = nb;
			cap += 262144;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = 0;
		/* nng's server may keep the connection: stop once Content-Length is in. */
		if ((p = strstr(buf, "\r\n\r\n"))) {
			const char *cl = strcasestr(buf, "\r\nContent-Length:");
			if (cl && cl < p && len >= (size_t)(p + 4 - buf) + strtoul(cl + 17, NULL, 10))
				break;
		}
	}
	close(fd);
	if (buf && len > 12 && sscanf(buf, "HTTP/1.%*d %d", &status) == 1 &&
	    (p = strstr(buf, "\r\n\r\n")))
		*body = strdup(p + 4);
	free(buf);
	return *body ? status : -1;
}

static void url_encode(const char *in, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;
	for (; *in && n + 4 < cap; in++) {
		unsigned char ch = (unsigned char)*in;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		    ch == '_' || ch == '.' || ch == '-') {
			out[n++] = (char)ch;
		} else {
			out[n++] = '%';
			out[n++] = hex[ch >> 4];
			out[n++] = hex[ch & 15];
		}
	}
	out[n] = 0;
}

/* ------------------------------------------------------ Prometheus ---- */

struct prom {
	char dir[64];
	int port;
	pid_t pid;
};

/* The Prometheus server: config and storage in its own temporary directory. */
static int prom_start(struct prom *p, int coord_port, int agent_port)
{
	char cfg[128], data[128], log[128], listen[64], cfgflag[160], dataflag[160], listenflag[96];
	FILE *f;
	int fd;
	snprintf(p->dir, sizeof p->dir, "/tmp/rt-prom-XXXXXX");
	if (!mkdtemp(p->dir) || (p->port = free_port()) < 0)
		return -1;
	snprintf(cfg, sizeof cfg, "%s/prometheus.yml", p->dir);
	snprintf(data, sizeof data, "%s/data", p->dir);
	snprintf(log, sizeof log, "%s/prometheus.log", p->dir);
	if (!(f = fopen(cfg, "w")))
		return -1;
	fprintf(f,
		"global:\n"
		"  scrape_interval: 1s\n"
		"  scrape_timeout: 1s\n"
		"scrape_configs:\n"
		"  - job_name: retrace-coordinator\n"
		"    static_configs:\n"
		"      - targets: ['127.0.0.1:%d']\n"
		"  - job_name: retrace-agent\n"
		"    static_configs:\n"
		"      - targets: ['127.0.0.1:%d']\n",
		coord_port, agent_port);
	fclose(f);
	snprintf(listen, sizeof listen, "127.0.0.1:%d", p->port);
	snprintf(cfgflag, sizeof cfgflag, "--config.file=%s", cfg);
	snprintf(dataflag, sizeof dataflag, "--storage.tsdb.path=%s", data);
	snprintf(listenflag, sizeof listenflag, "--web.listen-address=%s", listen);
	p->pid = fork();
	if (p->pid == 0) {
		const char *bin = getenv("RETRACE_PROMETHEUS") ? getenv("RETRACE_PROMETHEUS")
							       : "prometheus";
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if ((fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execlp(bin, bin, cfgflag, dataflag, listenflag, "--log.level=warn", (char *)NULL);
		fprintf(stderr, "cannot run %s: %s (Debian package prometheus; scripts/deps.sh)\n", bin,
			strerror(errno));
		_exit(127);
	}
	return p->pid > 0 ? 0 : -1;
}

static void prom_stop(struct prom *p)
{
	char cmd[128];
	if (p->pid > 0) {
		kill(p->pid, SIGTERM);
		for (int i = 0; i < 100 && waitpid(p->pid, NULL, WNOHANG) == 0; i++)
			nap_ms(100);
		if (waitpid(p->pid, NULL, WNOHANG) == 0) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, NULL, 0);
		}
		p->pid = 0;
	}
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", p->dir);
	if (p->dir[0] && system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", p->dir);
}

/* GET an API path; the parsed JSON if status is "success", else NULL. */
static json_t *prom_api(struct prom *p, const char *path)
{
	char *body = NULL;
	json_t *j = NULL;
	int st = http_get(p->port, path, &body);
	if (st == 200 && body)
		j = json_loads(body, 0, NULL);
	free(body);
	if (j && strcmp(json_string_value(json_object_get(j, "status")) ?: "", "success") != 0) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

/*
 * The value of an instant query's single sample. Returns how many samples
 * the query gave (-1 if Prometheus did not answer).
 */
static int prom_query(struct prom *p, const char *expr, double *v)
{
	char enc[1024], path[1200];
	json_t *j, *r;
	int n;
	url_encode(expr, enc, sizeof enc);
	snprintf(path, sizeof path, "/api/v1/query?query=%s", enc);
	if (!(j = prom_api(p, path)))
		return -1;
	r = json_object_get(json_object_get(j, "data"), "result");
	n = (int)json_array_size(r);
	if (n >= 1) {
		const char *s = json_string_value(json_array_get(json_object_get(json_array_get(r, 0),
								    "value"), 1));
		*v = s ? strtod(s, NULL) : NAN;
	}
	json_decref(j);
	return n;
}

/* The type Prometheus learnt for a metric ("counter", "gauge"), or "". */
static void prom_type(struct prom *p, const char *metric, char *out, size_t cap)
{
	char path[256];
	json_t *j;
	snprintf(path, sizeof path, "/api/v1/metadata?metric=%s", metric);
	out[0] = 0;
	if (!(j = prom_api(p, path)))
		return;
	snprintf(out, cap, "%s",
		 json_string_value(json_object_get(json_array_get(json_object_get(json_object_get(j, "data"),
										  metric), 0),
						   "type")) ?: "");
	json_decref(j);
}

/* --------------------------------------------------- retrace status ---- */

static json_t *status_json(const char *target)
{
	char cmd[512], *out = NULL;
	size_t cap = 0;
	json_t *j = NULL;
	FILE *f;
	snprintf(cmd, sizeof cmd, "%s status --json %s", CLI_BIN, target);
	if (!(f = popen(cmd, "r")))
		return NULL;
	if (getdelim(&out, &cap, 0, f) > 0)
		j = json_loads(out, 0, NULL);
	free(out);
	pclose(f);
	return j;
}

static double figure(json_t *status, const char *section, const char *key)
{
	json_t *v = json_object_get(json_object_get(status, section), key);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A comparison: status figure section.key against the metric (a PromQL selector). */
struct pair {
	const char *section, *key;
	const char *metric;
	double scale;   /* metric = figure * scale */
	int nonzero;    /* the test arranged for it not to be 0 */
};

static const struct pair agent_pairs[] = {
	{ "agent", "id", "retrace_agent_agent_id", 1, 1 },
	{ "buffers", "total", "retrace_agent_buffers", 1, 1 },
	{ "buffers", "size", "retrace_agent_buffers_size", 1, 1 },
	{ "queues", "complete_entries", "retrace_agent_queues_complete_entries_total", 1, 1 },
	{ "queues", "triggered_traces", "retrace_agent_queues_triggered_traces_total", 1, 1 },
	{ "traces", "evicted", "retrace_agent_traces_evicted_total", 1, 1 },
	{ "traces", "evicted_bytes", "retrace_agent_traces_evicted_bytes_total", 1, 1 },
	{ "traces", "event_horizon_us", "retrace_agent_traces_event_horizon_seconds", 1e-6, 1 },
	{ "reporting", "slices_sent", "retrace_agent_reporting_slices_sent_total", 1, 1 },
	{ "reporting", "slices_acked", "retrace_agent_reporting_slices_acked_total", 1, 1 },
	{ "reporting", "slice_bytes_acked", "retrace_agent_reporting_slice_bytes_acked_total", 1, 1 },
	{ "queues", "trigger_groups", "retrace_agent_queues_trigger_groups_total", 1, 1 },
	{ "malformed", "corrupt_frames", "retrace_agent_malformed_corrupt_frames_total", 1, 0 },
	{ "trigger.42", "triggers", "retrace_agent_trigger_triggers_total{trigger_id=\"42\"}", 1, 1 },
	{ "trigger.42", "slices_acked", "retrace_agent_trigger_slices_acked_total{trigger_id=\"42\"}", 1, 1 },
};

static const struct pair coord_pairs[] = {
	{ "agents", "known", "retrace_coordinator_agents_known", 1, 1 },
	{ "traversal", "triggers", "retrace_coordinator_traversal_triggers_total", 1, 1 },
	{ "traversal", "groups_closed", "retrace_coordinator_traversal_groups_closed_total", 1, 1 },
	{ "collection", "slices", "retrace_coordinator_collection_slices_total", 1, 1 },
	{ "collection", "slice_bytes", "retrace_coordinator_collection_slice_bytes_total", 1, 1 },
	{ "collection", "traces_coherent", "retrace_coordinator_collection_traces_coherent_total", 1, 1 },
	{ "store", "traces", "retrace_coordinator_store_traces", 1, 1 },
	{ "trigger_shares", "trigger_42_opened",
	  "retrace_coordinator_trigger_share_opened_total{trigger_id=\"42\"}", 1, 1 },
	{ "security", "oversize_requests", "retrace_coordinator_security_oversize_requests_total", 1, 0 },
};

/* 1 if every compared figure reads the same in a and b. */
static int same_figures(json_t *a, json_t *b, const struct pair *pairs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!(figure(a, pairs[i].section, pairs[i].key) == figure(b, pairs[i].section, pairs[i].key)))
			return 0;
	return 1;
}

/* The daemon is idle: two reads of its status 1.5 s apart agree. Returns the later one. */
static json_t *idle_status(const char *target, const struct pair *pairs, size_t n)
{
	json_t *a = status_json(target), *b = NULL;
	for (double end = mono_s() + 30; a && mono_s() < end; a = b) {
		nap_ms(1500);
		if (!(b = status_json(target)))
			break;
		if (same_figures(a, b, pairs, n)) {
			json_decref(a);
			return b;
		}
		json_decref(a);
	}
	json_decref(a);
	return NULL;
}

/* Wait until Prometheus holds a scrape of job taken after wall time t. */
static int scraped_after(struct prom *p, const char *job, double t)
{
	char q[128];
	double ts = 0;
	snprintf(q, sizeof q, "timestamp(up{job=\"%s\"})", job);
	for (double end = mono_s() + 30; mono_s() < end; nap_ms(250))
		if (prom_query(p, q, &ts) == 1 && ts > t)
			return 0;
	return -1;
}

static void compare(struct prom *p, json_t *status, const struct pair *pairs, size_t n,
		    const char *who)
{
	for (size_t i = 0; i < n; i++) {
		double want = figure(status, pairs[i].section, pairs[i].key), got = NAN;
		int k = prom_query(p, pairs[i].metric, &got);
		ck_assert_msg(!isnan(want), "%s: no %s.%s in retrace status --json", who,
			      pairs[i].section, pairs[i].key);
		ck_assert_msg(k == 1, "%s: Prometheus has %d series for %s", who, k, pairs[i].metric);
		want *= pairs[i].scale;
		if (pairs[i].nonzero)
			ck_assert_msg(want > 0, "%s: %s.%s is 0: the test did not exercise it", who,
				      pairs[i].section, pairs[i].key);
		/* Exact: integers below 2^53 survive the text format; the horizon is
		 * scaled to seconds, so it is held to the microsecond. */
		ck_assert_msg(pairs[i].scale == 1 ? got == want : fabs(got - want) <= 0.5e-6,
			      "%s: %s = %.17g, but retrace status says %s.%s = %.17g", who,
			      pairs[i].metric, got, pairs[i].section, pairs[i].key, want);
	}
}

static void check_type(struct prom *p, const char *metric, const char *want)
{
	char got[32];
	prom_type(p, metric, got, sizeof got);
	ck_assert_msg(strcmp(got, want) == 0, "Prometheus took %s for a %s, not a %s", metric,
		      got[0] ? got : "(nothing)", want);
}

/* promtool's own checks of an exposition scraped directly. */
static void promtool_accepts(int port, const char *who, const char *dir)
{
	char *body = NULL, file[128], cmd[300], out[128];
	FILE *f;
	int st = http_get(port, "/metrics", &body), rc;
	ck_assert_msg(st == 200, "%s: GET /metrics answered %d", who, st);
	snprintf(file, sizeof file, "%s/%s.prom", dir, who);
	snprintf(out, sizeof out, "%s/%s.promtool", dir, who);
	ck_assert((f = fopen(file, "w")) != NULL);
	fputs(body, f);
	fclose(f);
	free(body);
	snprintf(cmd, sizeof cmd, "promtool check metrics < %s > %s 2>&1", file, out);
	rc = system(cmd);
	ck_assert_msg(rc == 0, "%s: promtool check metrics refuses the exposition: see %s and %s",
		      who, file, out);
}

START_TEST(prometheus_scrapes_what_status_shows)
{
	struct cluster c;
	struct rt_store_trace t;
	struct prom p = { .pid = 0 };
	char coord_url[64], agent_url[64], target[128];
	int coord_port = free_port(), agent_port = free_port();
	json_t *agent_status, *coord_status;
	double up = 0, t_idle;

	ck_assert(coord_port > 0 && agent_port > 0 && coord_port != agent_port);
	snprintf(coord_url, sizeof coord_url, "http://127.0.0.1:%d", coord_port);
	snprintf(agent_url, sizeof agent_url, "http://127.0.0.1:%d/metrics", agent_port);
	cl_coord_args[0] = "--metrics-listen";
	cl_coord_args[1] = coord_url;
	cl_agent_args[0] = "--metrics-listen";
	cl_agent_args[1] = agent_url;
	ck_assert_int_eq(cl_start(&c, 1, 64), 0);

	/* One trigger collected, then enough untriggered traffic to evict. */
	ck_assert_int_eq(cl_write(&c, 0, HI, 0x77, RECORDS, NULL, 0), 0);
	ck_assert_int_eq(cl_trigger(&c, 0, HI, 0x77, TRIGGER, NULL, 0), 0);
	ck_assert_msg(cl_wait_trace(&c, HI, 0x77, 15, &t) == 0, "trace never stored (see %s)", c.dir);
	for (int i = 0; i < 6000 && cl_agent_figure(&c, 0, "traces", "evicted") < 8; i += 50)
		for (int k = 0; k < 50; k++)
			ck_assert_int_eq(cl_write(&c, 0, HI, 0x10000 + (uint64_t)(i + k), 4, NULL, 0), 0);
	ck_assert_int_ge(cl_agent_figure(&c, 0, "traces", "evicted"), 8);

	ck_assert_msg(prom_start(&p, coord_port, agent_port) == 0, "cannot start prometheus");
	for (double end = mono_s() + 60; mono_s() < end; nap_ms(250)) {
		double a = 0, b = 0;
		if (prom_query(&p, "up{job=\"retrace-agent\"}", &a) == 1 &&
		    prom_query(&p, "up{job=\"retrace-coordinator\"}", &b) == 1 && a == 1 && b == 1) {
			up = 1;
			break;
		}
		ck_assert_msg(waitpid(p.pid, NULL, WNOHANG) == 0,
			      "prometheus exited: see %s/prometheus.log", p.dir);
	}
	ck_assert_msg(up == 1, "Prometheus never scraped both targets up (see %s/prometheus.log)",
		      p.dir);

	/* Idle daemons, and a scrape of each taken after they were seen idle. */
	snprintf(target, sizeof target, "--pool %s", c.hosts[0].pool);
	agent_status = idle_status(target, agent_pairs, sizeof agent_pairs / sizeof agent_pairs[0]);
	ck_assert_msg(agent_status != NULL, "the agent never went idle");
	snprintf(target, sizeof target, "--coordinator %s", c.coord_url);
	coord_status = idle_status(target, coord_pairs, sizeof coord_pairs / sizeof coord_pairs[0]);
	ck_assert_msg(coord_status != NULL, "the coordinator never went idle");
	t_idle = wall_s();
	ck_assert_msg(scraped_after(&p, "retrace-agent", t_idle) == 0, "no agent scrape after idle");
	ck_assert_msg(scraped_after(&p, "retrace-coordinator", t_idle) == 0,
		      "no coordinator scrape after idle");

	compare(&p, agent_status, agent_pairs, sizeof agent_pairs / sizeof agent_pairs[0], "agent");
	compare(&p, coord_status, coord_pairs, sizeof coord_pairs / sizeof coord_pairs[0],
		"coordinator");
	/* The values are still what status says now: nothing moved meanwhile. */
	{
		json_t *again = status_json(target);
		ck_assert(again && same_figures(again, coord_status, coord_pairs,
						sizeof coord_pairs / sizeof coord_pairs[0]));
		json_decref(again);
	}

	/* Strings as labels of the info metrics, one series each. */
	{
		char q[256];
		double v = 0;
		snprintf(q, sizeof q, "retrace_agent_info{agent_pool=\"%s\",reporting_spool=\"none\"}",
			 c.hosts[0].pool);
		ck_assert_msg(prom_query(&p, q, &v) == 1 && v == 1, "no %s", q);
		snprintf(q, sizeof q, "retrace_coordinator_agent_info{agent_id=\"1\"}");
		ck_assert_msg(prom_query(&p, q, &v) == 1 && v == 1, "no %s", q);
	}
	/* What Prometheus made of the TYPE lines. */
	check_type(&p, "retrace_agent_traces_evicted_total", "counter");
	check_type(&p, "retrace_agent_traces_event_horizon_seconds", "gauge");
	check_type(&p, "retrace_agent_queues_complete_depth", "gauge");
	check_type(&p, "retrace_agent_trigger_overload_level", "gauge");
	check_type(&p, "retrace_coordinator_collection_slices_total", "counter");
	check_type(&p, "retrace_coordinator_traversal_groups_in_flight", "gauge");
	/* Both targets healthy, no scrape error. */
	{
		json_t *j = prom_api(&p, "/api/v1/targets?state=active");
		json_t *list = json_object_get(json_object_get(j, "data"), "activeTargets");
		ck_assert_uint_eq(json_array_size(list), 2);
		for (size_t i = 0; i < json_array_size(list); i++) {
			json_t *x = json_array_get(list, i);
			const char *err = json_string_value(json_object_get(x, "lastError"));
			ck_assert_msg(strcmp(json_string_value(json_object_get(x, "health")) ?: "", "up") == 0 &&
					      (!err || !*err),
				      "target %s: %s", json_string_value(json_object_get(x, "scrapeUrl")),
				      err ? err : "not up");
		}
		json_decref(j);
	}
	promtool_accepts(agent_port, "agent", p.dir);
	promtool_accepts(coord_port, "coordinator", p.dir);

	json_decref(agent_status);
	json_decref(coord_status);
	prom_stop(&p);
	cl_coord_args[0] = cl_agent_args[0] = NULL;
	ck_assert_msg(cl_stop(&c) == 0, "an agent did not exit on SIGTERM");
}
END_TEST

/* Run a daemon; its exit status, stderr in err. */
static int run_daemon(char *const argv[], char *err, size_t cap)
{
	int pfd[2], st = -1;
	ssize_t n;
	size_t len = 0;
	pid_t pid;
	if (pipe(pfd) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(pfd[1], 2);
		close(pfd[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	while (len + 1 < cap && (n = read(pfd[0], err + len, cap - len - 1)) > 0)
		len += (size_t)n;
	err[len] = 0;
	close(pfd[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

START_TEST(metrics_listen_errors_name_the_flag)
{
	char dir[] = "/tmp/rt-metrics-XXXXXX", store[96], pool[64], err[4096], busy[64];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof a;
	struct stat sb;
	int fd, rc;
	ck_assert(mkdtemp(dir) != NULL);
	snprintf(store, sizeof store, "%s/s.db", dir);
	snprintf(pool, sizeof pool, "/rt-metrics-%d", (int)getpid());
	/* A port another socket holds. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0 &&
		  getsockname(fd, (struct sockaddr *)&a, &alen) == 0);
	snprintf(busy, sizeof busy, "http://127.0.0.1:%d", ntohs(a.sin_port));
	{
		const char *bad[] = { "tcp://127.0.0.1:9464", "http://127.0.0.1", "http://127.0.0.1:99999",
				      "http://10.1.2.3:9464" };
		for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			char *av[] = { COORD_BIN, "--store", store, "--listen", "tcp://127.0.0.1:0",
				       "--collector", "tcp://127.0.0.1:0", "--metrics-listen",
				       (char *)bad[i], NULL };
			char *ag[] = { AGENT_BIN, "--pool", pool, "--listen", "tcp://127.0.0.1:0",
				       "--metrics-listen", (char *)bad[i], NULL };
			rc = run_daemon(av, err, sizeof err);
			ck_assert_msg(rc == 2 && strstr(err, "--metrics-listen") && strstr(err, bad[i]),
				      "coordinator with --metrics-listen %s: exit %d: %s", bad[i], rc, err);
			rc = run_daemon(ag, err, sizeof err);
			ck_assert_msg(rc == 2 && strstr(err, "--metrics-listen") && strstr(err, bad[i]),
				      "agent with --metrics-listen %s: exit %d: %s", bad[i], rc, err);
		}
	}
	{
		char *av[] = { COORD_BIN, "--store", store, "--listen", "tcp://127.0.0.1:0",
			       "--collector", "tcp://127.0.0.1:0", "--metrics-listen", busy, NULL };
		char *ag[] = { AGENT_BIN, "--pool", pool, "--listen", "tcp://127.0.0.1:0",
			       "--metrics-listen", busy, NULL };
		char shm[96];
		rc = run_daemon(av, err, sizeof err);
		ck_assert_msg(rc == 1 && strstr(err, "--metrics-listen"), "busy port: exit %d: %s", rc, err);
		ck_assert_msg(stat(store, &sb) != 0, "a refused coordinator left its store behind");
		rc = run_daemon(ag, err, sizeof err);
		ck_assert_msg(rc == 1 && strstr(err, "--metrics-listen"), "busy port: exit %d: %s", rc, err);
		snprintf(shm, sizeof shm, "/dev/shm%s", pool);
		ck_assert_msg(stat(shm, &sb) != 0, "a refused agent left its pool behind");
	}
	{ /* The same for the daemons' own endpoints: fail before creating anything. */
		char tcp[80], shm[96];
		snprintf(tcp, sizeof tcp, "tcp://%s", busy + 7); /* busy is http://HOST:PORT */
		char *lis[] = { COORD_BIN, "--store", store, "--listen", tcp,
				"--collector", "tcp://127.0.0.1:0", NULL };
		char *col[] = { COORD_BIN, "--store", store, "--listen", "tcp://127.0.0.1:0",
				"--collector", tcp, NULL };
		char *ag[] = { AGENT_BIN, "--pool", pool, "--listen", tcp, NULL };
		rc = run_daemon(lis, err, sizeof err);
		ck_assert_msg(rc == 1 && strstr(err, "--listen") && strstr(err, tcp + 6),
			      "coordinator, busy --listen: exit %d: %s", rc, err);
		ck_assert_msg(stat(store, &sb) != 0, "a coordinator refused its --listen left a store");
		rc = run_daemon(col, err, sizeof err);
		ck_assert_msg(rc == 1 && strstr(err, "--collector"),
			      "coordinator, busy --collector: exit %d: %s", rc, err);
		ck_assert_msg(stat(store, &sb) != 0, "a coordinator refused its --collector left a store");
		rc = run_daemon(ag, err, sizeof err);
		ck_assert_msg(rc == 1 && strstr(err, "--listen"), "agent, busy --listen: exit %d: %s", rc,
			      err);
		snprintf(shm, sizeof shm, "/dev/shm%s", pool);
		ck_assert_msg(stat(shm, &sb) != 0, "an agent refused its --listen left its pool behind");
	}
	close(fd);
	rmdir(dir);
}
END_TEST

#define ADD_CASE(s, fn, secs)                                \
	do {                                                 \
		TCase *tc = tcase_create(#fn);               \
		tcase_set_timeout(tc, secs);                 \
		tcase_add_test(tc, fn);                      \
		suite_add_tcase(s, tc);                      \
	} while (0)

int main(void)
{
	Suite *s = suite_create("coordinator_metrics");
	signal(SIGPIPE, SIG_IGN);
	ADD_CASE(s, prometheus_scrapes_what_status_shows, 170);
	ADD_CASE(s, metrics_listen_errors_name_the_flag, 60);
	return test_run_suite(s);
}
