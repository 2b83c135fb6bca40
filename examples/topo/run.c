/*
 * examples/topo/run.c — `retrace-topo run`: every service of a topology, one
 * `retrace-topo serve` process each, and `retrace-topo show`.
 *
 * How it works: run forks and execs this same binary (/proc/self/exe) once per
 * service with PR_SET_PDEATHSIG, so no service outlives it however it dies. It
 * waits until every service has published RUN_DIR/NAME.url (a service does that
 * only once its pool is attached and its downstreams are known), then writes
 * RUN_DIR/ready, and from then on waits for SIGTERM/SIGINT in sigtimedwait while
 * watching its children: a service that exits on its own is an error that stops
 * the others. Stopping sends SIGTERM to every service and reaps them within a
 * bound (then SIGKILL), so each one flushes its truth file on the way out.
 */
#include "topo.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PASS 64
#define STOP_WAIT_NS (30ull * 1000000000ull)

struct runner {
	struct topology topo;
	const char *topo_path, *run_dir, *truth_dir, *log_dir;
	double wait_s;
	char *pass[MAX_PASS]; /* options handed to every serve */
	int n_pass;
	pid_t pids[TOPO_MAX_SERVICES];
	int alive[TOPO_MAX_SERVICES];
};

static void run_usage(FILE *out)
{
	fprintf(out,
		"usage: retrace-topo run --topology FILE --run-dir DIR [options]\n"
		"Start every service of the topology (one `retrace-topo serve` process each),\n"
		"write DIR/ready once all of them serve, and stop them all on SIGTERM/SIGINT.\n"
		"\n"
		"  -T, --topology FILE        the topology\n"
		"  -d, --run-dir DIR          services publish DIR/NAME.url here (created if missing)\n"
		"  -o, --truth-dir DIR        each service writes its truth to DIR/NAME.truth\n"
		"  -L, --log-dir DIR          each service's stderr goes to DIR/NAME.log (default: ours)\n"
		"      --wait-s S             start-up bound for every service (default 30)\n"
		"Passed to every service (see retrace-topo serve --help):\n"
		"  -t, --threads N, -P, --host-pool HOST=POOL, --host-sample-shift HOST=K, --error-rate P,\n"
		"  --call-timeout-ms MS, --break-response-context, --no-trace, --no-triggers,\n"
		"  --tail URL, --tail-queue N, --edge-trigger ID=PCT, --trigger-delay-ms MS,\n"
		"  --no-context CALLER>CALLEE, --conn-pool\n"
		"  -h, --help                 this text\n"
		"\n"
		"Exit status: 0 if every service stopped cleanly, 1 if one failed, 2 bad usage.\n");
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "retrace-topo run: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see retrace-topo run --help)\n");
	return TOPO_EXIT_USAGE;
}

static int pass_opt(struct runner *r, const char *name, const char *value)
{
	if (r->n_pass + 2 > MAX_PASS)
		return usage_error("too many options%s", "");
	r->pass[r->n_pass++] = (char *)name;
	if (value)
		r->pass[r->n_pass++] = (char *)value;
	return 0;
}

static int parse_args(struct runner *r, int argc, char **argv, int *help)
{
	enum { OPT_ERR = 1000, OPT_TIMEOUT, OPT_WAIT, OPT_BREAK, OPT_NOTRACE, OPT_NOTRIG, OPT_TAIL,
	       OPT_TAILQ, OPT_EDGE, OPT_DELAY, OPT_SHIFT, OPT_NOCTX, OPT_POOL };
	static const struct option opts[] = {
		{"topology", required_argument, NULL, 'T'},
		{"run-dir", required_argument, NULL, 'd'},
		{"truth-dir", required_argument, NULL, 'o'},
		{"log-dir", required_argument, NULL, 'L'},
		{"threads", required_argument, NULL, 't'},
		{"host-pool", required_argument, NULL, 'P'},
		{"host-sample-shift", required_argument, NULL, OPT_SHIFT},
		{"error-rate", required_argument, NULL, OPT_ERR},
		{"call-timeout-ms", required_argument, NULL, OPT_TIMEOUT},
		{"wait-s", required_argument, NULL, OPT_WAIT},
		{"break-response-context", no_argument, NULL, OPT_BREAK},
		{"no-trace", no_argument, NULL, OPT_NOTRACE},
		{"no-triggers", no_argument, NULL, OPT_NOTRIG},
		{"tail", required_argument, NULL, OPT_TAIL},
		{"tail-queue", required_argument, NULL, OPT_TAILQ},
		{"edge-trigger", required_argument, NULL, OPT_EDGE},
		{"trigger-delay-ms", required_argument, NULL, OPT_DELAY},
		{"no-context", required_argument, NULL, OPT_NOCTX},
		{"conn-pool", no_argument, NULL, OPT_POOL},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	char err[1024];
	int c, rc = 0;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":T:d:o:L:t:P:h", opts, NULL)) != -1) {
		switch (c) {
		case 'T':
			r->topo_path = optarg;
			break;
		case 'd':
			r->run_dir = optarg;
			break;
		case 'o':
			r->truth_dir = optarg;
			break;
		case 'L':
			r->log_dir = optarg;
			break;
		case 't': /* values are checked by serve, which says which flag was wrong */
			rc = pass_opt(r, "--threads", optarg);
			break;
		case 'P':
			rc = pass_opt(r, "--host-pool", optarg);
			break;
		case OPT_SHIFT:
			rc = pass_opt(r, "--host-sample-shift", optarg);
			break;
		case OPT_ERR:
			rc = pass_opt(r, "--error-rate", optarg);
			break;
		case OPT_TIMEOUT:
			rc = pass_opt(r, "--call-timeout-ms", optarg);
			break;
		case OPT_WAIT:
			if (topo_parse_double(optarg, 0.0, 3600.0, &r->wait_s))
				return usage_error("--wait-s '%s': want 0..3600 seconds", optarg);
			rc = pass_opt(r, "--wait-s", optarg);
			break;
		case OPT_BREAK:
			rc = pass_opt(r, "--break-response-context", NULL);
			break;
		case OPT_NOTRACE:
			rc = pass_opt(r, "--no-trace", NULL);
			break;
		case OPT_NOTRIG:
			rc = pass_opt(r, "--no-triggers", NULL);
			break;
		case OPT_POOL:
			rc = pass_opt(r, "--conn-pool", NULL);
			break;
		case OPT_TAIL:
			rc = pass_opt(r, "--tail", optarg);
			break;
		case OPT_TAILQ:
			rc = pass_opt(r, "--tail-queue", optarg);
			break;
		case OPT_EDGE:
			rc = pass_opt(r, "--edge-trigger", optarg);
			break;
		case OPT_DELAY:
			rc = pass_opt(r, "--trigger-delay-ms", optarg);
			break;
		case OPT_NOCTX:
			rc = pass_opt(r, "--no-context", optarg);
			break;
		case 'h':
			*help = 1;
			return 0;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
		if (rc)
			return rc;
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (!r->topo_path)
		return usage_error("--topology FILE is required%s", "");
	if (!r->run_dir)
		return usage_error("--run-dir DIR is required%s", "");
	if (topo_load(r->topo_path, &r->topo, err, sizeof err) != 0) {
		fprintf(stderr, "retrace-topo run: %s\n", err);
		return TOPO_EXIT_USAGE;
	}
	return 0;
}

static int make_dir(const char *dir, const char *what)
{
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "retrace-topo run: %s %s: %s\n", what, dir, strerror(errno));
		return -1;
	}
	return 0;
}

static pid_t start_service(struct runner *r, int svc)
{
	char truth[4096], log[4096];
	char *argv[16 + MAX_PASS];
	const char *name = r->topo.services[svc].name;
	pid_t parent = getpid(), pid;
	int n = 0, i;

	argv[n++] = "retrace-topo";
	argv[n++] = "serve";
	argv[n++] = "--topology";
	argv[n++] = (char *)r->topo_path;
	argv[n++] = "--service";
	argv[n++] = (char *)name;
	argv[n++] = "--run-dir";
	argv[n++] = (char *)r->run_dir;
	if (r->truth_dir) {
		snprintf(truth, sizeof truth, "%s/%s.truth", r->truth_dir, name);
		argv[n++] = "--truth";
		argv[n++] = truth;
	}
	for (i = 0; i < r->n_pass; i++)
		argv[n++] = r->pass[i];
	argv[n] = NULL;
	if (r->log_dir)
		snprintf(log, sizeof log, "%s/%s.log", r->log_dir, name);

	pid = fork();
	if (pid != 0)
		return pid;
	/* child */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(1); /* run died before the death signal was armed */
	if (r->log_dir) {
		FILE *f = freopen(log, "a", stderr);
		if (!f)
			_exit(1);
	}
	execv("/proc/self/exe", argv);
	fprintf(stderr, "retrace-topo run: cannot exec serve for %s: %s\n", name, strerror(errno));
	_exit(127);
}

/* A child exited: which service, and say how. -1 if none did. */
static int reap_one(struct runner *r, int quiet)
{
	int st, i;
	pid_t pid = waitpid(-1, &st, WNOHANG);
	if (pid <= 0)
		return -1;
	for (i = 0; i < r->topo.n_services; i++) {
		if (r->alive[i] && r->pids[i] == pid) {
			r->alive[i] = 0;
			if (!quiet || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				if (WIFEXITED(st))
					fprintf(stderr, "retrace-topo run: service %s exited with status %d\n",
						r->topo.services[i].name, WEXITSTATUS(st));
				else
					fprintf(stderr, "retrace-topo run: service %s killed by %s\n",
						r->topo.services[i].name,
						strsignal(WIFSIGNALED(st) ? WTERMSIG(st) : 0));
			}
			return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
		}
	}
	return -1;
}

static int stop_all(struct runner *r)
{
	uint64_t end = topo_now_ns() + STOP_WAIT_NS;
	int i, left, bad = 0;
	for (i = 0; i < r->topo.n_services; i++)
		if (r->alive[i])
			kill(r->pids[i], SIGTERM);
	for (;;) {
		int rc;
		left = 0;
		for (i = 0; i < r->topo.n_services; i++)
			left += r->alive[i];
		if (!left || topo_now_ns() >= end)
			break;
		if ((rc = reap_one(r, 1)) < 0)
			topo_sleep_ns(10000000ull);
		else
			bad |= rc;
	}
	for (i = 0; i < r->topo.n_services; i++)
		if (r->alive[i]) {
			fprintf(stderr, "retrace-topo run: service %s did not stop within 30 s; killed\n",
				r->topo.services[i].name);
			kill(r->pids[i], SIGKILL);
			waitpid(r->pids[i], NULL, 0);
			r->alive[i] = 0;
			bad = 1;
		}
	return bad;
}

int topo_run_main(int argc, char **argv)
{
	static struct runner runner;
	struct runner *r = &runner;
	sigset_t sigs;
	char path[4096];
	uint64_t end;
	int help = 0, rc, i, ready = 0, failed = 0;

	memset(r, 0, sizeof *r);
	r->wait_s = 30;
	if ((rc = parse_args(r, argc, argv, &help)) != 0)
		return rc;
	if (help) {
		run_usage(stdout);
		return 0;
	}
	if (make_dir(r->run_dir, "--run-dir") || (r->truth_dir && make_dir(r->truth_dir, "--truth-dir")) ||
	    (r->log_dir && make_dir(r->log_dir, "--log-dir")))
		return 1;
	/* Addresses of an earlier run would pass for ready services. */
	snprintf(path, sizeof path, "%s/ready", r->run_dir);
	unlink(path);
	for (i = 0; i < r->topo.n_services; i++) {
		topo_url_path(path, sizeof path, r->run_dir, r->topo.services[i].name);
		unlink(path);
	}

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	for (i = 0; i < r->topo.n_services; i++) {
		if ((r->pids[i] = start_service(r, i)) < 0) {
			fprintf(stderr, "retrace-topo run: fork: %s\n", strerror(errno));
			stop_all(r);
			return 1;
		}
		r->alive[i] = 1;
	}

	/* Start-up: every service publishes its address, or run gives up. */
	end = topo_now_ns() + (uint64_t)((r->wait_s + 5) * 1e9);
	while (!ready) {
		struct timespec ts = {0, 20000000L};
		int n = 0;
		for (i = 0; i < r->topo.n_services; i++) {
			topo_url_path(path, sizeof path, r->run_dir, r->topo.services[i].name);
			n += access(path, F_OK) == 0;
		}
		if (n == r->topo.n_services) {
			ready = 1;
			break;
		}
		if (reap_one(r, 0) >= 0) {
			fprintf(stderr, "retrace-topo run: a service stopped during start-up; stopping\n");
			failed = 1;
			break;
		}
		if (topo_now_ns() >= end) {
			fprintf(stderr, "retrace-topo run: only %d of %d services ready after %.0f s\n", n,
				r->topo.n_services, r->wait_s + 5);
			failed = 1;
			break;
		}
		if (sigtimedwait(&sigs, NULL, &ts) > 0)
			break;
	}
	if (ready) {
		snprintf(path, sizeof path, "%s/ready", r->run_dir);
		if (topo_write_file(path, "ready\n") != 0) {
			fprintf(stderr, "retrace-topo run: cannot write %s: %s\n", path, strerror(errno));
			failed = 1;
		} else {
			fprintf(stderr, "retrace-topo run: %d services of %s ready (%s)\n",
				r->topo.n_services, r->topo_path, path);
		}
		while (!failed) {
			struct timespec ts = {0, 200000000L};
			if (sigtimedwait(&sigs, NULL, &ts) > 0)
				break;
			if (reap_one(r, 0) >= 0) {
				fprintf(stderr, "retrace-topo run: a service stopped; stopping the others\n");
				failed = 1;
			}
		}
	}
	failed |= stop_all(r);
	fprintf(stderr, "retrace-topo run: stopped%s\n", failed ? " (with errors)" : "");
	return failed ? 1 : 0;
}

/* ---------------------------------------------------------------- show ---- */

int topo_show_main(int argc, char **argv)
{
	static struct topology topo;
	struct topology *t = &topo;
	char err[1024];
	int i, k;
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("usage: retrace-topo show TOPOLOGY\n"
		       "Parse and check a topology file; print its hosts, services and APIs.\n"
		       "Exit status 0 if it is valid, 2 (with FILE:LINE: why) if not.\n");
		return 0;
	}
	if (argc != 2) {
		fprintf(stderr, "retrace-topo show: want one TOPOLOGY file (see --help)\n");
		return TOPO_EXIT_USAGE;
	}
	if (topo_load(argv[1], t, err, sizeof err) != 0) {
		fprintf(stderr, "retrace-topo show: %s\n", err);
		return TOPO_EXIT_USAGE;
	}
	printf("topology %s: %d hosts, %d services, %d apis, %d entries (checksum %08x)\n",
	       t->path, t->n_hosts, t->n_services, t->n_apis, t->n_entries, t->checksum);
	for (i = 0; i < t->n_hosts; i++) {
		printf("host %s agent %u pool %s:", t->hosts[i].name, t->hosts[i].agent,
		       t->hosts[i].pool);
		for (k = 0; k < t->n_services; k++)
			if (t->services[k].host == i)
				printf(" %s", t->services[k].name);
		printf("\n");
	}
	for (i = 0; i < t->n_apis; i++) {
		const struct topo_api *a = &t->apis[i];
		printf("api %s: %s %u us, %u records, %llu bytes, %s, %u call nodes in its tree",
		       a->name, a->work == TOPO_WORK_SPIN ? "spin" : a->work == TOPO_WORK_SLEEP ? "sleep"
											 : "no work",
		       a->work_us, a->records, (unsigned long long)a->bytes,
		       a->parallel ? "parallel" : "sequential", a->subtree);
		for (k = 0; k < a->n_calls; k++)
			printf("%s%s (%g)", k ? ", " : "; calls ", a->calls[k].target, a->calls[k].prob);
		printf("\n");
	}
	for (i = 0; i < t->n_entries; i++)
		printf("entry %s weight %u\n", t->apis[t->entries[i].api].name, t->entries[i].weight);
	return 0;
}
