/*
 * examples/topo/load.c — `retrace-topo load`: an open-loop load generator.
 *
 * How it works: request i is due at start + i/R, whether or not earlier ones
 * have been answered (open loop: a slow system gets the same offered load, and
 * latency is measured from the due time, so queueing shows up in it). Each
 * request takes a slot from a fixed pool (--max-inflight); when none is free the
 * request is dropped and counted instead of delaying the schedule. A slot owns an
 * nng REQ context per entry service and one aio whose callback runs the
 * send -> receive -> done state machine on nng's threads, so the scheduling
 * thread only ever sleeps and hands out work. It sleeps in sigtimedwait, which
 * also takes SIGINT/SIGTERM: a signal ends the schedule early and the summary
 * still comes out.
 *
 * Each request starts a new trace: the trace id is random (or derived from
 * --seed), the entry API is picked by weight from the trace id, and the request
 * is flagged as an edge case (the entry fires trigger 1 at completion) when the
 * trace id hashes under --edge-pct (topo_is_edge), so a checker can tell which.
 * The reply says whether any trigger fired in the request's tree; the summary
 * counts those traces (`triggered`).
 */
#include "topo.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "nng_close.h"

#define MAX_INFLIGHT 65536
#define MAX_LATENCIES (1u << 24)

enum { SLOT_SENDING = 1, SLOT_RECEIVING = 2 };

struct loadgen;

struct slot {
	struct loadgen *l;
	nng_ctx ctx[TOPO_MAX_ENTRIES];
	nng_aio *aio;
	int state;
	int entry;
	uint64_t t_due;
	struct slot *next_free;
};

struct loadgen {
	struct topology topo;
	const char *run_dir, *target;
	double rate, duration, edge_pct, wait_s;
	unsigned max_inflight;
	int timeout_ms;
	int have_seed;
	uint64_t seed;
	uint64_t requests; /* --requests: end the schedule once this many were sent (0: no limit) */

	int n_socks;
	nng_socket socks[TOPO_MAX_ENTRIES];  /* one per distinct entry service */
	int entry_sock[TOPO_MAX_ENTRIES];    /* entry -> socket index */
	struct slot *slots;

	pthread_mutex_t lock;
	pthread_cond_t idle;
	struct slot *free_slots;
	unsigned inflight;

	atomic_ullong sent, ok, failed, errors, timeouts, dropped, triggered, edge, bad_replies;
	uint32_t *lat_us;
	size_t lat_cap;
	atomic_size_t n_lat;
	uint64_t t0;
};

static void load_usage(FILE *out)
{
	fprintf(out,
		"usage: retrace-topo load --topology FILE --run-dir DIR --rate R --duration S [options]\n"
		"Send requests to the topology's entry APIs on a fixed schedule (open loop).\n"
		"\n"
		"  -T, --topology FILE      the topology the services run\n"
		"  -d, --run-dir DIR        find the entry services' addresses there (DIR/NAME.url)\n"
		"  -u, --target URL         or send everything to this address (one entry service)\n"
		"  -r, --rate R             requests per second (default 100)\n"
		"  -D, --duration S         seconds of load (default 10)\n"
		"  -n, --requests N         end once N requests were sent (drops do not count;\n"
		"                           --duration still bounds the run): a fixed amount of\n"
		"                           work however slow the machine (default: no limit)\n"
		"  -e, --edge-pct P         percent of traces the entry triggers (trigger 1) at\n"
		"                           completion, chosen by trace id hash (default 1)\n"
		"  -m, --max-inflight N     requests outstanding at most; beyond, drop (default 1024)\n"
		"      --timeout-ms MS      a request without a reply after MS fails (default 10000)\n"
		"      --seed N             derive trace ids from N (default: random)\n"
		"      --wait-s S           wait this long for the entry services (default 30)\n"
		"  -h, --help               this text\n"
		"\n"
		"A progress line goes to stderr every second; at the end one line to stdout:\n"
		"load sent= ok= failed= errors= timeouts= dropped= triggered= edge= elapsed_s= rate=\n"
		"p50_ms= p99_ms= max_ms=  (failed: a service failed; errors: no usable reply).\n");
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "retrace-topo load: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see retrace-topo load --help)\n");
	return TOPO_EXIT_USAGE;
}

static int parse_args(struct loadgen *l, int argc, char **argv, int *help)
{
	enum { OPT_TIMEOUT = 1000, OPT_SEED, OPT_WAIT };
	static const struct option opts[] = {
		{"topology", required_argument, NULL, 'T'},
		{"run-dir", required_argument, NULL, 'd'},
		{"target", required_argument, NULL, 'u'},
		{"rate", required_argument, NULL, 'r'},
		{"duration", required_argument, NULL, 'D'},
		{"requests", required_argument, NULL, 'n'},
		{"edge-pct", required_argument, NULL, 'e'},
		{"max-inflight", required_argument, NULL, 'm'},
		{"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
		{"seed", required_argument, NULL, OPT_SEED},
		{"wait-s", required_argument, NULL, OPT_WAIT},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *topo_path = NULL;
	char err[1024];
	uint64_t v;
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":T:d:u:r:D:n:e:m:h", opts, NULL)) != -1) {
		switch (c) {
		case 'T':
			topo_path = optarg;
			break;
		case 'd':
			l->run_dir = optarg;
			break;
		case 'u':
			l->target = optarg;
			break;
		case 'r':
			if (topo_parse_double(optarg, 0.001, 1e7, &l->rate))
				return usage_error("--rate '%s': want requests per second in 0.001..1e7",
						   optarg);
			break;
		case 'D':
			if (topo_parse_double(optarg, 0.0, 86400.0, &l->duration))
				return usage_error("--duration '%s': want seconds in 0..86400", optarg);
			break;
		case 'n':
			if (topo_parse_u64(optarg, 1, MAX_LATENCIES, &l->requests))
				return usage_error("--requests '%s': want 1..16777216", optarg);
			break;
		case 'e':
			if (topo_parse_double(optarg, 0.0, 100.0, &l->edge_pct))
				return usage_error("--edge-pct '%s': want a percentage in 0..100", optarg);
			break;
		case 'm':
			if (topo_parse_u64(optarg, 1, MAX_INFLIGHT, &v))
				return usage_error("--max-inflight '%s': want 1..65536", optarg);
			l->max_inflight = (unsigned)v;
			break;
		case OPT_TIMEOUT:
			if (topo_parse_u64(optarg, 1, 3600000, &v))
				return usage_error("--timeout-ms '%s': want 1..3600000", optarg);
			l->timeout_ms = (int)v;
			break;
		case OPT_SEED:
			if (topo_parse_u64(optarg, 0, UINT64_MAX, &l->seed))
				return usage_error("--seed '%s': want a whole number", optarg);
			l->have_seed = 1;
			break;
		case OPT_WAIT:
			if (topo_parse_double(optarg, 0.0, 3600.0, &l->wait_s))
				return usage_error("--wait-s '%s': want 0..3600 seconds", optarg);
			break;
		case 'h':
			*help = 1;
			return 0;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (!topo_path)
		return usage_error("--topology FILE is required%s", "");
	if (!l->run_dir == !l->target)
		return usage_error("give one of --run-dir DIR or --target URL%s", "");
	if (topo_load(topo_path, &l->topo, err, sizeof err) != 0) {
		fprintf(stderr, "retrace-topo load: %s\n", err);
		return TOPO_EXIT_USAGE;
	}
	return 0;
}

/* --------------------------------------------------------------- slots ---- */

static void record_latency(struct loadgen *l, uint64_t ns)
{
	size_t i = atomic_fetch_add(&l->n_lat, 1);
	uint64_t us = ns / 1000;
	if (i < l->lat_cap)
		l->lat_us[i] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static void slot_release(struct loadgen *l, struct slot *sl)
{
	pthread_mutex_lock(&l->lock);
	sl->next_free = l->free_slots;
	l->free_slots = sl;
	if (--l->inflight == 0)
		pthread_cond_broadcast(&l->idle);
	pthread_mutex_unlock(&l->lock);
}

static void slot_finish(struct loadgen *l, struct slot *sl, int rv, nng_msg *reply)
{
	record_latency(l, topo_now_ns() - sl->t_due);
	if (rv == NNG_ETIMEDOUT) {
		atomic_fetch_add(&l->timeouts, 1);
		atomic_fetch_add(&l->errors, 1);
	} else if (rv != 0 || !reply) {
		atomic_fetch_add(&l->errors, 1);
	} else {
		const uint8_t *p = nng_msg_body(reply);
		size_t len = nng_msg_len(reply);
		if (len < TOPO_RP_HDR || memcmp(p, "TR01", 4) != 0 || p[4] == TOPO_ST_BAD) {
			atomic_fetch_add(&l->bad_replies, 1);
			atomic_fetch_add(&l->errors, 1);
		} else {
			atomic_fetch_add(p[4] == TOPO_ST_OK ? &l->ok : &l->failed, 1);
			if (p[5])
				atomic_fetch_add(&l->triggered, 1);
		}
	}
	slot_release(l, sl);
}

/* nng's thread: send done -> receive; receive done -> finish. Never blocks. */
static void slot_cb(void *arg)
{
	struct slot *sl = arg;
	struct loadgen *l = sl->l;
	int rv = nng_aio_result(sl->aio);
	if (sl->state == SLOT_SENDING) {
		if (rv != 0) {
			nng_msg_free(nng_aio_get_msg(sl->aio));
			slot_finish(l, sl, rv, NULL);
			return;
		}
		sl->state = SLOT_RECEIVING;
		nng_aio_set_timeout(sl->aio, l->timeout_ms);
		nng_ctx_recv(sl->ctx[l->entry_sock[sl->entry]], sl->aio);
		return;
	}
	if (rv != 0) {
		slot_finish(l, sl, rv, NULL);
	} else {
		nng_msg *m = nng_aio_get_msg(sl->aio);
		slot_finish(l, sl, 0, m);
		nng_msg_free(m);
	}
}

/* ---------------------------------------------------------- requests ---- */

static int pick_entry(const struct loadgen *l, uint64_t hi, uint64_t lo)
{
	uint64_t x = topo_mix64(lo ^ topo_mix64(hi ^ 0xE7E7ull)) % l->topo.total_weight;
	int e;
	for (e = 0; e < l->topo.n_entries; e++) {
		if (x < l->topo.entries[e].weight)
			return e;
		x -= l->topo.entries[e].weight;
	}
	return l->topo.n_entries - 1;
}

static void send_one(struct loadgen *l, uint64_t i, uint64_t t_due)
{
	struct slot *sl;
	nng_msg *m = NULL;
	uint8_t h[TOPO_RQ_HDR];
	uint64_t hi, lo;
	int e, edge, rv;

	pthread_mutex_lock(&l->lock);
	if ((sl = l->free_slots) != NULL) {
		l->free_slots = sl->next_free;
		l->inflight++;
	}
	pthread_mutex_unlock(&l->lock);
	if (!sl) {
		atomic_fetch_add(&l->dropped, 1);
		return;
	}
	if (l->have_seed) {
		hi = topo_mix64(l->seed ^ topo_mix64(i));
		lo = topo_mix64(hi + i);
	} else {
		hi = topo_rand64();
		lo = topo_rand64();
	}
	if (lo == 0)
		lo = 1; /* the runtime indexes by the low half: never zero */
	e = pick_entry(l, hi, lo);
	edge = topo_is_edge(hi, lo, l->edge_pct);
	memcpy(h, "TQ01", 4);
	topo_put32(h + 4, l->topo.checksum);
	topo_put32(h + 8, (uint32_t)l->topo.entries[e].api);
	topo_put32(h + 12, 0); /* the entry is node 0 of its tree */
	topo_put32(h + 16, edge ? TOPO_RQ_EDGE : 0);
	topo_put64(h + 20, hi);
	topo_put64(h + 28, lo);
	if ((rv = nng_msg_alloc(&m, 0)) != 0 || (rv = nng_msg_append(m, h, sizeof h)) != 0) {
		if (m)
			nng_msg_free(m);
		atomic_fetch_add(&l->errors, 1);
		slot_release(l, sl);
		return;
	}
	atomic_fetch_add(&l->sent, 1);
	if (edge)
		atomic_fetch_add(&l->edge, 1);
	sl->entry = e;
	sl->t_due = t_due;
	sl->state = SLOT_SENDING;
	nng_aio_set_msg(sl->aio, m);
	nng_aio_set_timeout(sl->aio, l->timeout_ms);
	nng_ctx_send(sl->ctx[l->entry_sock[e]], sl->aio);
}

/* ------------------------------------------------------------- setup ---- */

static int open_sockets(struct loadgen *l, const sigset_t *sigs)
{
	int svc_sock[TOPO_MAX_SERVICES];
	uint64_t end = topo_now_ns() + (uint64_t)(l->wait_s * 1e9);
	int e, rv;
	for (e = 0; e < TOPO_MAX_SERVICES; e++)
		svc_sock[e] = -1;
	for (e = 0; e < l->topo.n_entries; e++) {
		int svc = l->topo.apis[l->topo.entries[e].api].service;
		char url[256], path[4096];
		nng_socket *s;
		if (svc_sock[svc] >= 0) {
			l->entry_sock[e] = svc_sock[svc];
			continue;
		}
		if (l->target) {
			if (l->n_socks > 0) {
				fprintf(stderr, "retrace-topo load: --target serves one entry service, "
					"this topology has entries on several; use --run-dir\n");
				return -1;
			}
			snprintf(url, sizeof url, "%s", l->target);
		} else {
			topo_url_path(path, sizeof path, l->run_dir, l->topo.services[svc].name);
			while (topo_read_line(path, url, sizeof url) != 0) {
				struct timespec ts = {0, 20000000L};
				if (topo_now_ns() >= end) {
					fprintf(stderr, "retrace-topo load: entry service %s did not "
						"publish %s within %.0f s\n", l->topo.services[svc].name, path,
						l->wait_s);
					return -1;
				}
				if (sigtimedwait(sigs, NULL, &ts) > 0)
					return -1;
			}
		}
		s = &l->socks[l->n_socks];
		if ((rv = nng_req0_open(s)) != 0 ||
		    (rv = nng_socket_set_ms(*s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) != 0 ||
		    (rv = nng_dial(*s, url, NULL, NNG_FLAG_NONBLOCK)) != 0) {
			fprintf(stderr, "retrace-topo load: dial %s: %s\n", url, nng_strerror(rv));
			return -1;
		}
		svc_sock[svc] = l->entry_sock[e] = l->n_socks++;
	}
	return 0;
}

static int open_slots(struct loadgen *l)
{
	unsigned i;
	int k;
	if (!(l->slots = calloc(l->max_inflight, sizeof *l->slots)))
		return -1;
	for (i = 0; i < l->max_inflight; i++) {
		struct slot *sl = &l->slots[i];
		sl->l = l;
		if (nng_aio_alloc(&sl->aio, slot_cb, sl) != 0)
			return -1;
		for (k = 0; k < l->n_socks; k++) {
			if (nng_ctx_open(&sl->ctx[k], l->socks[k]) != 0)
				return -1;
			nng_ctx_set_ms(sl->ctx[k], NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
		}
		sl->next_free = l->free_slots;
		l->free_slots = sl;
	}
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

#define G(x) (unsigned long long)atomic_load(&l->x)

static void progress(struct loadgen *l)
{
	unsigned inflight;
	pthread_mutex_lock(&l->lock);
	inflight = l->inflight;
	pthread_mutex_unlock(&l->lock);
	fprintf(stderr, "retrace-topo load: %5.1f s  sent %llu  ok %llu  failed %llu  errors %llu  "
		"dropped %llu  in flight %u  triggered %llu\n",
		(double)(topo_now_ns() - l->t0) / 1e9, G(sent), G(ok), G(failed), G(errors),
		G(dropped), inflight, G(triggered));
}

/* Sleep until t (monotonic ns) or a signal; 1 if a signal came. */
static int sleep_until(const sigset_t *sigs, uint64_t t)
{
	for (;;) {
		uint64_t now = topo_now_ns();
		struct timespec ts;
		if (now >= t)
			return 0;
		ts.tv_sec = (time_t)((t - now) / 1000000000ull);
		ts.tv_nsec = (long)((t - now) % 1000000000ull);
		if (sigtimedwait(sigs, NULL, &ts) > 0)
			return 1;
	}
}

int topo_load_main(int argc, char **argv)
{
	static struct loadgen load;
	struct loadgen *l = &load;
	sigset_t sigs;
	uint64_t i, end, next_progress, drain_end;
	int help = 0, rc, k, stopped = 0;
	size_t n;
	double el, p50 = 0, p99 = 0, pmax = 0;
	unsigned u;

	memset(l, 0, sizeof *l);
	l->rate = 100;
	l->duration = 10;
	l->edge_pct = 1;
	l->wait_s = 30;
	l->max_inflight = 1024;
	l->timeout_ms = 10000;
	if ((rc = parse_args(l, argc, argv, &help)) != 0)
		return rc;
	if (help) {
		load_usage(stdout);
		return 0;
	}
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->idle, NULL);
	l->lat_cap = (size_t)(l->rate * l->duration * 1.05) + 64;
	if (l->requests && l->lat_cap > l->requests + 64)
		l->lat_cap = l->requests + 64;
	if (l->lat_cap > MAX_LATENCIES)
		l->lat_cap = MAX_LATENCIES;
	if (!(l->lat_us = calloc(l->lat_cap, sizeof *l->lat_us))) {
		fprintf(stderr, "retrace-topo load: out of memory\n");
		return 1;
	}
	if (open_sockets(l, &sigs) != 0)
		return 1;
	if (open_slots(l) != 0) {
		fprintf(stderr, "retrace-topo load: cannot set up %u request slots\n", l->max_inflight);
		return 1;
	}

	l->t0 = topo_now_ns();
	end = l->t0 + (uint64_t)(l->duration * 1e9);
	next_progress = l->t0 + 1000000000ull;
	for (i = 0;; i++) {
		uint64_t due = l->t0 + (uint64_t)((double)i * 1e9 / l->rate);
		if (due >= end || (l->requests && atomic_load(&l->sent) >= l->requests))
			break;
		while (next_progress <= due) {
			if (sleep_until(&sigs, next_progress)) {
				stopped = 1;
				break;
			}
			progress(l);
			next_progress += 1000000000ull;
		}
		if (stopped || sleep_until(&sigs, due)) {
			stopped = 1;
			break;
		}
		send_one(l, i, due);
	}
	/* Replies still due: every request ends by its timeout, so this wait is bounded. */
	drain_end = topo_now_ns() + (uint64_t)l->timeout_ms * 1000000ull + 2000000000ull;
	for (;;) {
		unsigned inflight;
		pthread_mutex_lock(&l->lock);
		inflight = l->inflight;
		pthread_mutex_unlock(&l->lock);
		if (inflight == 0 || topo_now_ns() >= drain_end)
			break;
		if (sleep_until(&sigs, topo_now_ns() + 20000000ull))
			break; /* a second signal: do not wait for the stragglers */
		if (topo_now_ns() >= next_progress) {
			progress(l);
			next_progress += 1000000000ull;
		}
	}
	el = (double)(topo_now_ns() - l->t0) / 1e9;
	pthread_mutex_lock(&l->lock);
	u = l->inflight;
	pthread_mutex_unlock(&l->lock);
	if (u)
		fprintf(stderr, "retrace-topo load: %u requests still unanswered at the end\n", u);
	n = atomic_load(&l->n_lat);
	if (n > l->lat_cap)
		n = l->lat_cap;
	if (n) {
		qsort(l->lat_us, n, sizeof *l->lat_us, cmp_u32);
		p50 = l->lat_us[(n - 1) / 2] / 1000.0;
		p99 = l->lat_us[(size_t)((double)(n - 1) * 0.99)] / 1000.0;
		pmax = l->lat_us[n - 1] / 1000.0;
	}
	progress(l);
	printf("load sent=%llu ok=%llu failed=%llu errors=%llu timeouts=%llu dropped=%llu "
	       "triggered=%llu edge=%llu unanswered=%u elapsed_s=%.3f rate=%.1f p50_ms=%.3f "
	       "p99_ms=%.3f max_ms=%.3f\n",
	       G(sent), G(ok), G(failed), G(errors), G(timeouts), G(dropped), G(triggered), G(edge),
	       u, el, el > 0 ? (double)atomic_load(&l->sent) / el : 0.0, p50, p99, pmax);
	fflush(stdout);
	if (u == 0) {
		/* Sockets close only when no callback can still run on a slot. */
		for (k = 0; k < l->n_socks; k++)
			rt_nng_close_bounded(l->socks[k], RT_NNG_CLOSE_WAIT_MS);
		for (u = 0; u < l->max_inflight; u++)
			nng_aio_free(l->slots[u].aio);
		free(l->slots);
	}
	free(l->lat_us);
	return 0;
}
