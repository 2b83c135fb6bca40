/*
 * examples/topo/serve.c — `retrace-topo serve`: one service of a topology.
 *
 * How it works: the service listens with an nng REP socket on loopback and
 * publishes its address as RUN_DIR/SERVICE.url once it can serve (its pool is
 * attached and every downstream it may call has published its own address).
 * A fixed pool of worker threads (--threads, default 4) each own one REP
 * context and loop: receive a request, handle it, send the reply. So the same
 * worker may well serve two calls of one trace, one after the other.
 *
 * Handling a request (the API and call node it names come from the caller):
 *   - continue the caller's trace from the binary context
 *     (retrace_deserialize_binary: breadcrumbs to the previous hops), or start
 *     the trace id the load generator chose (the entry has no caller);
 *   - a SERVER span with attributes and a templated log, the first half of the
 *     API's raw records, its work (busy-spin or sleep), its downstream calls
 *     (each a CLIENT span whose id travels as the parent; sequential, or all in
 *     flight at once on their own REQ contexts for a parallel fan-out), the
 *     second half of the records;
 *   - an injected failure (the service's error rate, decided by trace id and
 *     node) fires the exception trigger 2 from the handler; the entry fires the
 *     edge trigger 1 at completion when the request is flagged as an edge case;
 *   - the reply carries the response context (this host's agent for the
 *     caller's breadcrumb), status, and whether any trigger fired below.
 *   - one truth line (topo_format.h) per request goes to an in-memory buffer
 *     that a flusher thread writes to --truth every 100 ms and at exit.
 *
 * Every raw record is a function of (trace, service, node, index) and every
 * decision a function of the trace id, so retrace-truth can regenerate what
 * this service wrote byte for byte.
 *
 * --conn-pool: calls go out on a pool of connections per downstream, one call at
 * a time on each (an HTTP/1.1 keep-alive pool: a call takes a free connection,
 * or dials a new one, up to CONN_POOL_MAX, else waits), and both spans of a call
 * record the connection as the socket layer shows it (nng_pipe_get_addr of the
 * pipe the request or the reply came on): net.sock.host.addr/port (this side)
 * and net.sock.peer.addr/port (the other side), so the caller's host is the
 * callee's peer — what weaving can match without any context (docs/weaving.md).
 * Without it every call to a downstream shares one multiplexed connection.
 *
 * Shutdown: SIGTERM/SIGINT go to sigwait in the main thread; the downstream
 * sockets close first, so a call in flight to a service that is stopping too
 * ends at once instead of waiting out its timeout; workers then leave at their
 * next receive timeout (their thread-exit hook hands their buffers to the
 * agent); the truth is flushed; sockets are closed with a bounded close (nng
 * 1.5.2 can hang in nng_close).
 */
#include "topo.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/protocol/pipeline0/push.h>

#include "nng_close.h"
#include "retrace/retrace.h"
#include "retrace/tracer.h"

#define MAX_THREADS 64
#define RECV_POLL_MS 200         /* how often an idle worker looks at the stop flag */
#define TRUTH_FLUSH_NS 100000000ull
#define TRUTH_SOON (1u << 20)    /* bytes after which the flusher is woken early */

/*
 * Response context (retrace.h, "responses"): the callee's agent id and fired
 * flag travel back in the reply, and the caller's retrace_deserialize_response_binary
 * leaves the breadcrumb that lets a trigger at the caller reach the callee.
 */
#define RESP_CTX_MAX RETRACE_RESPONSE_BINARY_LEN

static size_t resp_ctx_make(int no_trace, uint8_t *out)
{
	if (no_trace)
		return 0;
	return retrace_serialize_response_binary(out) == RETRACE_RESPONSE_BINARY_LEN
		       ? RETRACE_RESPONSE_BINARY_LEN
		       : 0;
}

struct counters {
	atomic_ullong requests, ok, failed, downstream, bad, calls, call_errors;
	atomic_ullong triggers, trigger_errors, reply_errors, truth_lines, truth_errors;
	atomic_ullong bad_responses; /* response contexts the library refused */
	atomic_ullong tail_sent, tail_dropped, tail_bytes; /* --tail export */
	atomic_ullong delayed_fired, delayed_dropped;      /* --trigger-delay-ms */
};

/* --edge-trigger ID=PCT: the entry fires trigger ID for PCT % of traces. */
#define MAX_EDGE_TRIGGERS 8
struct edge_trigger {
	uint32_t id;
	double pct;
};

/* A trigger due later (--trigger-delay-ms). */
struct delayed {
	uint64_t due_ns, hi, lo;
	uint32_t id;
};
#define DELAY_QUEUE 65536

#define CONN_POOL_MAX 256 /* --conn-pool: connections per downstream */

struct downstream {
	int used;
	nng_socket sock;
	char url[160];
	/* --conn-pool: one call at a time per socket (each dials its own connection) */
	pthread_mutex_t pool_lock;
	pthread_cond_t pool_cond;
	nng_socket pool[CONN_POOL_MAX];
	unsigned char pool_busy[CONN_POOL_MAX];
	int pool_n;
};

struct server {
	struct topology topo;
	int svc, host;
	const char *run_dir, *truth_path, *listen;
	unsigned threads;
	int call_timeout_ms;
	double wait_s;
	int break_resp;
	double error;
	char pool[TOPO_MAX_POOL];
	uint32_t agent;
	uint32_t svc_hash;

	/* Evaluation modes (bench/e2e): */
	int no_trace;      /* --no-trace: not a single libretrace call */
	int no_triggers;   /* --no-triggers: edge cases and failures fire nothing */
	const char *tail_url; /* --tail URL: ship every span to a tail-sampling collector */
	unsigned tail_queue;  /* its bounded send queue, in messages */
	nng_socket tail;
	struct edge_trigger edges[MAX_EDGE_TRIGGERS];
	int n_edges;
	uint32_t delay_ms; /* --trigger-delay-ms: the entry fires this long after completion */
	pthread_mutex_t delay_lock;
	pthread_cond_t delay_cond;
	struct delayed *delay_q; /* ring */
	size_t delay_head, delay_len;
	int delay_stop;
	pthread_t delayer;
	int sample_shift;  /* --host-sample-shift for this host; -1: the environment's */
	uint32_t sample_ppm; /* --host-sample-shift HOST=P%: P % (Ertl §2.9); 0: none */
	uint64_t no_context_to; /* --no-context: bit k = calls to service k carry no context */
	int conn_pool;     /* --conn-pool: pooled connections, net.sock.* attributes */

	nng_socket rep;
	char url[160];
	struct downstream down[TOPO_MAX_SERVICES];
	atomic_int stop;
	struct counters c;

	/* truth: workers append under the lock, the flusher writes */
	pthread_mutex_t truth_lock;
	pthread_cond_t truth_cond;
	char *truth_buf;
	size_t truth_len, truth_cap;
	int truth_fd;
	int truth_stop;
	pthread_t flusher;
};

struct call {
	int k;             /* index in the api's calls */
	int callee_svc;
	uint32_t node;
	uint64_t span;
	nng_ctx ctx;
	int ctx_open;
	nng_aio *aio;
	int rv;            /* 0 or the nng error of send/recv */
	int status;        /* enum topo_status of the reply */
	int fired;
	int no_ctx;        /* --no-context: this call carries no trace context */
	int slot;          /* --conn-pool: the pooled connection taken, or -1 */
	int have_addr;     /* host/peer: the connection the reply came on */
	nng_sockaddr host, peer;
	uint8_t resp[RESP_CTX_MAX];
	size_t resp_len;
	char name[2 * TOPO_MAX_NAME + 8];
};

struct worker {
	struct server *s;
	pthread_t th;
	int started;
	uint8_t *rec;
	size_t rec_cap;
	uint8_t *exp;      /* --tail: this request's span message */
	size_t exp_len, exp_cap;
	struct call calls[TOPO_MAX_CALLS];
};

/* ------------------------------------------------------------- usage ---- */

static void serve_usage(FILE *out)
{
	fprintf(out,
		"usage: retrace-topo serve --topology FILE --service NAME --run-dir DIR [options]\n"
		"Run one service of a topology, traced with libretrace into its host's pool.\n"
		"\n"
		"  -T, --topology FILE        the topology (format: examples/README.md)\n"
		"  -s, --service NAME         which of its services this process is\n"
		"  -d, --run-dir DIR          publish DIR/NAME.url once ready; find downstreams there\n"
		"  -o, --truth FILE           ground truth: one line per request handled (truncated at\n"
		"                             start; flushed every 100 ms and at exit)\n"
		"  -t, --threads N            worker threads (default 4, at most %d)\n"
		"  -P, --host-pool HOST=POOL  use POOL for HOST instead of the topology's (repeatable)\n"
		"      --host-sample-shift HOST=K  HOST records the consistent 2^-K of traces\n"
		"                             (libretrace's trace percentage; repeatable; default:\n"
		"                             RETRACE_SAMPLE_SHIFT / RETRACE_TRACE_PERCENT);\n"
		"                             HOST=P%% records P %% (1..99) by the choice between two\n"
		"                             powers of two per trace\n"
		"  -l, --listen URL           listen here (default tcp://127.0.0.1:0, a free port)\n"
		"      --error-rate P         override this service's error rate from the topology\n"
		"      --call-timeout-ms MS   downstream call timeout (default 10000)\n"
		"      --wait-s S             wait this long for the pool and downstreams (default 30)\n"
		"      --break-response-context\n"
		"                             send no response context (to check that the checker\n"
		"                             catches the traces this makes unreachable)\n"
		"Evaluation modes (bench/e2e/run-e2e.sh):\n"
		"      --no-trace             make no libretrace call at all (the untraced baseline);\n"
		"                             span ids are random, the truth is still written\n"
		"      --no-triggers          fire no trigger (head sampling: RETRACE_HEAD_SHIFT); the\n"
		"                             truth still names the trigger each request stands for\n"
		"      --tail URL             implies --no-trace: push each request's spans (with its raw\n"
		"                             records) to a tail-sampling collector at URL (nng PUSH)\n"
		"      --tail-queue N         its bounded send queue in messages; full = drop, counted\n"
		"                             (default 2048, OTel's BatchSpanProcessor max_queue_size)\n"
		"      --edge-trigger ID=PCT  the entry fires trigger ID at completion for PCT %% of\n"
		"                             traces, by trace id hash; repeatable, the shares are\n"
		"                             disjoint, in the order given (independent of --edge-pct)\n"
		"      --trigger-delay-ms MS  the entry fires its edge triggers MS after the request\n"
		"                             completed (default 0: at completion)\n"
		"      --no-context CALLER>CALLEE\n"
		"                             calls from service CALLER to CALLEE carry no trace\n"
		"                             context (a legacy hop, bench/weave): the callee starts a\n"
		"                             fresh trace and its truth line names the real parent\n"
		"                             (cause=); repeatable; edges of other callers are ignored\n"
		"      --conn-pool            one call at a time per connection (a keep-alive pool per\n"
		"                             downstream), and spans record net.sock.host/peer.addr/port\n"
		"  -h, --help                 this text\n"
		"\n"
		"The pool must belong to the agent id the topology gives the host. SIGTERM or\n"
		"SIGINT stop the service; a line of counters goes to stderr.\n",
		MAX_THREADS);
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "retrace-topo serve: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see retrace-topo serve --help)\n");
	return TOPO_EXIT_USAGE;
}

struct host_pool {
	char host[TOPO_MAX_NAME];
	char pool[TOPO_MAX_POOL];
};

static int parse_args(struct server *s, int argc, char **argv, int *help)
{
	enum { OPT_ERR = 1000, OPT_TIMEOUT, OPT_WAIT, OPT_BREAK, OPT_NOTRACE, OPT_NOTRIG,
	       OPT_TAIL, OPT_TAILQ, OPT_EDGE, OPT_DELAY, OPT_SHIFT, OPT_NOCTX, OPT_POOL };
	static const struct option opts[] = {
		{"topology", required_argument, NULL, 'T'},
		{"service", required_argument, NULL, 's'},
		{"no-context", required_argument, NULL, OPT_NOCTX},
		{"conn-pool", no_argument, NULL, OPT_POOL},
		{"no-trace", no_argument, NULL, OPT_NOTRACE},
		{"no-triggers", no_argument, NULL, OPT_NOTRIG},
		{"tail", required_argument, NULL, OPT_TAIL},
		{"tail-queue", required_argument, NULL, OPT_TAILQ},
		{"edge-trigger", required_argument, NULL, OPT_EDGE},
		{"trigger-delay-ms", required_argument, NULL, OPT_DELAY},
		{"run-dir", required_argument, NULL, 'd'},
		{"truth", required_argument, NULL, 'o'},
		{"threads", required_argument, NULL, 't'},
		{"host-pool", required_argument, NULL, 'P'},
		{"host-sample-shift", required_argument, NULL, OPT_SHIFT},
		{"listen", required_argument, NULL, 'l'},
		{"error-rate", required_argument, NULL, OPT_ERR},
		{"call-timeout-ms", required_argument, NULL, OPT_TIMEOUT},
		{"wait-s", required_argument, NULL, OPT_WAIT},
		{"break-response-context", no_argument, NULL, OPT_BREAK},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct host_pool hp[TOPO_MAX_HOSTS];
	struct { char host[TOPO_MAX_NAME]; int shift; uint32_t ppm; } hs[TOPO_MAX_HOSTS];
	const char *noctx[TOPO_MAX_SERVICES];
	int n_hp = 0, n_hs = 0, n_noctx = 0, c, i;
	const char *topo_path = NULL, *svc = NULL;
	double error = -1;
	uint64_t v;
	char err[1024];

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":T:s:d:o:t:P:l:h", opts, NULL)) != -1) {
		switch (c) {
		case 'T':
			topo_path = optarg;
			break;
		case 's':
			svc = optarg;
			break;
		case 'd':
			s->run_dir = optarg;
			break;
		case 'o':
			s->truth_path = optarg;
			break;
		case 't':
			if (topo_parse_u64(optarg, 1, MAX_THREADS, &v))
				return usage_error("--threads '%s': want 1..64", optarg);
			s->threads = (unsigned)v;
			break;
		case 'P': {
			const char *eq = strchr(optarg, '=');
			if (n_hp == TOPO_MAX_HOSTS)
				return usage_error("too many --host-pool flags%s", "");
			if (!eq || eq == optarg || (size_t)(eq - optarg) >= TOPO_MAX_NAME ||
			    eq[1] != '/' || strlen(eq + 1) < 2 || strlen(eq + 1) >= TOPO_MAX_POOL ||
			    strchr(eq + 2, '/'))
				return usage_error("--host-pool '%s': want HOST=/POOL", optarg);
			snprintf(hp[n_hp].host, sizeof hp[n_hp].host, "%.*s", (int)(eq - optarg),
				 optarg);
			snprintf(hp[n_hp].pool, sizeof hp[n_hp].pool, "%s", eq + 1);
			n_hp++;
			break;
		}
		case OPT_SHIFT: {
			const char *eq = strchr(optarg, '=');
			char num[24];
			size_t vl = eq ? strlen(eq + 1) : 0;
			int pct = vl > 1 && vl < sizeof num && eq[vl] == '%';
			if (n_hs == TOPO_MAX_HOSTS)
				return usage_error("too many --host-sample-shift flags%s", "");
			snprintf(num, sizeof num, "%.*s", (int)(pct ? vl - 1 : vl), eq ? eq + 1 : "");
			if (!eq || eq == optarg || (size_t)(eq - optarg) >= TOPO_MAX_NAME ||
			    (pct ? topo_parse_u64(num, 1, 99, &v) : topo_parse_u64(num, 0, 63, &v)))
				return usage_error("--host-sample-shift '%s': want HOST=K, K 0..63, "
						   "or HOST=P%%, P 1..99", optarg);
			snprintf(hs[n_hs].host, sizeof hs[n_hs].host, "%.*s", (int)(eq - optarg),
				 optarg);
			hs[n_hs].shift = pct ? 0 : (int)v;
			hs[n_hs].ppm = pct ? (uint32_t)v * 10000u : 0;
			n_hs++;
			break;
		}
		case 'l':
			s->listen = optarg;
			break;
		case OPT_ERR:
			if (topo_parse_double(optarg, 0.0, 1.0, &error))
				return usage_error("--error-rate '%s': want a number in [0, 1]", optarg);
			break;
		case OPT_TIMEOUT:
			if (topo_parse_u64(optarg, 1, 3600000, &v))
				return usage_error("--call-timeout-ms '%s': want 1..3600000", optarg);
			s->call_timeout_ms = (int)v;
			break;
		case OPT_WAIT:
			if (topo_parse_double(optarg, 0.0, 3600.0, &s->wait_s))
				return usage_error("--wait-s '%s': want 0..3600 seconds", optarg);
			break;
		case OPT_BREAK:
			s->break_resp = 1;
			break;
		case OPT_NOTRACE:
			s->no_trace = 1;
			break;
		case OPT_NOTRIG:
			s->no_triggers = 1;
			break;
		case OPT_TAIL:
			if (strncmp(optarg, "tcp://", 6) != 0 && strncmp(optarg, "ipc://", 6) != 0)
				return usage_error("--tail '%s': want tcp://HOST:PORT or ipc://PATH", optarg);
			s->tail_url = optarg;
			s->no_trace = 1;
			break;
		case OPT_TAILQ:
			if (topo_parse_u64(optarg, 1, 1000000, &v))
				return usage_error("--tail-queue '%s': want 1..1000000 messages", optarg);
			s->tail_queue = (unsigned)v;
			break;
		case OPT_EDGE: {
			const char *eq = strchr(optarg, '=');
			char idbuf[16];
			uint64_t id;
			double pct;
			if (s->n_edges == MAX_EDGE_TRIGGERS)
				return usage_error("too many --edge-trigger flags (at most 8)%s", "");
			if (!eq || eq == optarg || (size_t)(eq - optarg) >= sizeof idbuf)
				return usage_error("--edge-trigger '%s': want ID=PCT", optarg);
			snprintf(idbuf, sizeof idbuf, "%.*s", (int)(eq - optarg), optarg);
			if (topo_parse_u64(idbuf, 1, 0xFFFFFF00u, &id) ||
			    topo_parse_double(eq + 1, 0.0, 100.0, &pct))
				return usage_error("--edge-trigger '%s': want ID (1..4294967040)=PCT "
						   "(0..100)", optarg);
			s->edges[s->n_edges].id = (uint32_t)id;
			s->edges[s->n_edges].pct = pct;
			s->n_edges++;
			break;
		}
		case OPT_NOCTX:
			if (n_noctx == TOPO_MAX_SERVICES)
				return usage_error("too many --no-context flags%s", "");
			noctx[n_noctx++] = optarg;
			break;
		case OPT_POOL:
			s->conn_pool = 1;
			break;
		case OPT_DELAY:
			if (topo_parse_u64(optarg, 0, 600000, &v))
				return usage_error("--trigger-delay-ms '%s': want 0..600000", optarg);
			s->delay_ms = (uint32_t)v;
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
	if (!svc)
		return usage_error("--service NAME is required%s", "");
	{
		double sum = 0;
		for (i = 0; i < s->n_edges; i++)
			sum += s->edges[i].pct;
		if (sum > 100.0 + 1e-9)
			return usage_error("--edge-trigger: the shares add up to more than 100 %%%s", "");
	}
	if (!s->run_dir)
		return usage_error("--run-dir DIR is required%s", "");
	if (topo_load(topo_path, &s->topo, err, sizeof err) != 0) {
		fprintf(stderr, "retrace-topo serve: %s\n", err);
		return TOPO_EXIT_USAGE;
	}
	if ((s->svc = topo_find_service(&s->topo, svc)) < 0)
		return usage_error("--service '%s': no such service in the topology", svc);
	s->host = s->topo.services[s->svc].host;
	for (i = 0; i < n_hp; i++)
		if (topo_find_host(&s->topo, hp[i].host) < 0)
			return usage_error("--host-pool: no host '%s' in the topology", hp[i].host);
	snprintf(s->pool, sizeof s->pool, "%s", s->topo.hosts[s->host].pool);
	for (i = 0; i < n_hp; i++)
		if (strcmp(hp[i].host, s->topo.hosts[s->host].name) == 0)
			snprintf(s->pool, sizeof s->pool, "%s", hp[i].pool);
	s->sample_shift = -1;
	s->sample_ppm = 0;
	for (i = 0; i < n_hs; i++) {
		if (topo_find_host(&s->topo, hs[i].host) < 0)
			return usage_error("--host-sample-shift: no host '%s' in the topology",
					   hs[i].host);
		if (strcmp(hs[i].host, s->topo.hosts[s->host].name) == 0) {
			s->sample_shift = hs[i].shift;
			s->sample_ppm = hs[i].ppm;
		}
	}
	for (i = 0; i < n_noctx; i++) {
		const char *gt = strchr(noctx[i], '>');
		char caller[TOPO_MAX_NAME];
		int from, to;
		if (!gt || gt == noctx[i] || (size_t)(gt - noctx[i]) >= sizeof caller)
			return usage_error("--no-context '%s': want CALLER>CALLEE", noctx[i]);
		snprintf(caller, sizeof caller, "%.*s", (int)(gt - noctx[i]), noctx[i]);
		if ((from = topo_find_service(&s->topo, caller)) < 0 ||
		    (to = topo_find_service(&s->topo, gt + 1)) < 0)
			return usage_error("--no-context '%s': no such service in the topology",
					   noctx[i]);
		if (from == s->svc)
			s->no_context_to |= 1ull << to;
	}
	s->agent = s->topo.hosts[s->host].agent;
	s->error = error >= 0 ? error : s->topo.services[s->svc].error;
	return 0;
}

/* --------------------------------------------------------------- truth ---- */

static void truth_append(struct server *s, const struct topo_truth *t)
{
	char line[TOPO_TRUTH_LINE_MAX];
	size_t n = topo_truth_format(line, sizeof line, t);
	if (!s->truth_path)
		return;
	if (n == 0) {
		atomic_fetch_add(&s->c.truth_errors, 1);
		return;
	}
	pthread_mutex_lock(&s->truth_lock);
	if (s->truth_len + n > s->truth_cap) {
		size_t cap = s->truth_cap ? s->truth_cap : 65536;
		char *p;
		while (cap < s->truth_len + n)
			cap *= 2;
		if (!(p = realloc(s->truth_buf, cap))) {
			pthread_mutex_unlock(&s->truth_lock);
			atomic_fetch_add(&s->c.truth_errors, 1);
			return;
		}
		s->truth_buf = p;
		s->truth_cap = cap;
	}
	memcpy(s->truth_buf + s->truth_len, line, n);
	s->truth_len += n;
	if (s->truth_len >= TRUTH_SOON)
		pthread_cond_signal(&s->truth_cond);
	pthread_mutex_unlock(&s->truth_lock);
	atomic_fetch_add(&s->c.truth_lines, 1);
}

static void write_all(struct server *s, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(s->truth_fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "retrace-topo serve: writing %s: %s\n", s->truth_path,
				strerror(errno));
			atomic_fetch_add(&s->c.truth_errors, 1);
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

/* Writes whatever accumulated, every 100 ms (or sooner when much did), and once
 * more after the stop; the only writer of the file, so lines never interleave. */
static void *flusher_main(void *arg)
{
	struct server *s = arg;
	char *spare = NULL;
	size_t spare_cap = 0;
	int last = 0;
	while (!last) {
		struct timespec ts;
		char *buf;
		size_t len, cap;
		pthread_mutex_lock(&s->truth_lock);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)TRUTH_FLUSH_NS;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (!s->truth_stop && s->truth_len < TRUTH_SOON)
			pthread_cond_timedwait(&s->truth_cond, &s->truth_lock, &ts);
		last = s->truth_stop;
		/* Swap buffers so workers never wait on the disk. */
		buf = s->truth_buf;
		len = s->truth_len;
		cap = s->truth_cap;
		s->truth_buf = spare;
		s->truth_cap = spare_cap;
		s->truth_len = 0;
		pthread_mutex_unlock(&s->truth_lock);
		if (len)
			write_all(s, buf, len);
		spare = buf;
		spare_cap = cap;
	}
	free(spare);
	return NULL;
}

/* ------------------------------------------------------------ records ---- */

/* --tail: bytes of this request's span message (records become span events). */
static void exp_append(struct worker *w, const void *p, size_t n)
{
	if (w->exp_len + n > w->exp_cap) {
		size_t cap = w->exp_cap ? w->exp_cap : 4096;
		uint8_t *q;
		while (cap < w->exp_len + n)
			cap *= 2;
		if (!(q = realloc(w->exp, cap)))
			return;
		w->exp = q;
		w->exp_cap = cap;
	}
	memcpy(w->exp + w->exp_len, p, n);
	w->exp_len += n;
}

/* Records [from, to) of this call: even ones plain, odd ones with a timestamp. */
static void write_records(struct worker *w, const struct topo_api *a, uint64_t hi, uint64_t lo,
			  uint32_t node, uint32_t from, uint32_t to)
{
	uint32_t i;
	for (i = from; i < to; i++) {
		uint32_t len = topo_record_len(a->bytes, a->records, i);
		if (len > w->rec_cap) {
			uint8_t *p = realloc(w->rec, len);
			if (!p)
				return; /* the truth still names it: the checker will say so */
			w->rec = p;
			w->rec_cap = len;
		}
		topo_record_fill(w->rec, len, hi, lo, w->s->svc_hash, node, i);
		if (w->s->tail_url)
			exp_append(w, w->rec, len);
		else if (w->s->no_trace)
			continue;
		else if (i % 2)
			retrace_tracepoint_ts(w->rec, len);
		else
			retrace_tracepoint(w->rec, len);
	}
}

/* This thread's CPU time, ns. */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * `spin` burns US microseconds of this thread's CPU, not of the wall clock: a
 * spin that ends at a wall-clock time is shortened by every preemption inside
 * it, so the work per request would depend on how often other threads run — and
 * the overhead experiment (bench/e2e, none vs retroactive at saturation) would
 * compare different amounts of work.
 */
static void do_work(const struct topo_api *a)
{
	uint64_t end;
	if (a->work == TOPO_WORK_SLEEP && a->work_us) {
		topo_sleep_ns((uint64_t)a->work_us * 1000);
	} else if (a->work == TOPO_WORK_SLEEP_EXP && a->work_us) {
		double u = topo_unit(topo_rand64()), x = -log(1.0 - u);
		topo_sleep_ns((uint64_t)((x < 10.0 ? x : 10.0) * a->work_us * 1000.0));
	} else if (a->work == TOPO_WORK_SPIN && a->work_us) {
		end = thread_cpu_ns() + (uint64_t)a->work_us * 1000;
		while (thread_cpu_ns() < end)
			;
	}
}

/* ------------------------------------------------------------ messages ---- */

static nng_msg *build_request(const struct server *s, int api, uint32_t node, uint32_t flags,
			      uint64_t hi, uint64_t lo, const uint8_t *ctx)
{
	nng_msg *m;
	uint8_t h[TOPO_RQ_HDR + RETRACE_BINARY_CONTEXT_LEN];
	size_t n = TOPO_RQ_HDR;
	memcpy(h, "TQ01", 4);
	topo_put32(h + 4, s->topo.checksum);
	topo_put32(h + 8, (uint32_t)api);
	topo_put32(h + 12, node);
	topo_put32(h + 16, flags);
	topo_put64(h + 20, hi);
	topo_put64(h + 28, lo);
	if (flags & TOPO_RQ_CTX) {
		memcpy(h + TOPO_RQ_HDR, ctx, RETRACE_BINARY_CONTEXT_LEN);
		n += RETRACE_BINARY_CONTEXT_LEN;
	} else if (flags & (TOPO_RQ_PARENT | TOPO_RQ_FRESH)) {
		memcpy(h + TOPO_RQ_HDR, ctx, 8);
		n += 8;
	}
	if (nng_msg_alloc(&m, 0) != 0 || nng_msg_append(m, h, n) != 0)
		return NULL;
	return m;
}

static nng_msg *build_reply(int status, int fired, const uint8_t *ctx, size_t ctx_len)
{
	nng_msg *m;
	uint8_t h[TOPO_RP_HDR];
	memcpy(h, "TR01", 4);
	h[4] = (uint8_t)status;
	h[5] = (uint8_t)(fired ? 1 : 0);
	h[6] = (uint8_t)ctx_len;
	h[7] = (uint8_t)(ctx_len >> 8);
	if (nng_msg_alloc(&m, 0) != 0 || nng_msg_append(m, h, sizeof h) != 0 ||
	    (ctx_len && nng_msg_append(m, ctx, ctx_len) != 0))
		return NULL;
	return m;
}

/* Read a reply into c; -1 if it is not one. */
static int parse_reply(nng_msg *m, struct call *c)
{
	const uint8_t *p = nng_msg_body(m);
	size_t len = nng_msg_len(m), cl;
	if (len < TOPO_RP_HDR || memcmp(p, "TR01", 4) != 0 || p[4] > TOPO_ST_BAD || p[5] > 1)
		return -1;
	cl = (size_t)p[6] | (size_t)p[7] << 8;
	if (cl != len - TOPO_RP_HDR || cl > sizeof c->resp)
		return -1;
	c->status = p[4];
	c->fired = p[5];
	memcpy(c->resp, p + TOPO_RP_HDR, cl);
	c->resp_len = cl;
	return 0;
}

/* ------------------------------------------------------------- calls ---- */

/* --conn-pool: a free pooled connection of d (dialing a new one if none is
 * free), waiting while all CONN_POOL_MAX are busy. The slot, or -1 with *rv. */
static int pool_take(struct downstream *d, int *rv)
{
	int i, slot = -1;
	pthread_mutex_lock(&d->pool_lock);
	while (slot < 0) {
		for (i = 0; i < d->pool_n && slot < 0; i++)
			if (!d->pool_busy[i])
				slot = i;
		if (slot >= 0)
			break;
		if (d->pool_n < CONN_POOL_MAX) {
			nng_socket *k = &d->pool[d->pool_n];
			if ((*rv = nng_req0_open(k)) != 0)
				break;
			if ((*rv = nng_socket_set_ms(*k, NNG_OPT_REQ_RESENDTIME,
						     NNG_DURATION_INFINITE)) != 0 ||
			    (*rv = nng_dial(*k, d->url, NULL, 0)) != 0) {
				nng_close(*k);
				break;
			}
			slot = d->pool_n++;
			break;
		}
		pthread_cond_wait(&d->pool_cond, &d->pool_lock);
	}
	if (slot >= 0)
		d->pool_busy[slot] = 1;
	pthread_mutex_unlock(&d->pool_lock);
	return slot;
}

static void pool_give(struct downstream *d, int slot)
{
	pthread_mutex_lock(&d->pool_lock);
	d->pool_busy[slot] = 0;
	pthread_cond_signal(&d->pool_cond);
	pthread_mutex_unlock(&d->pool_lock);
}

/* The connection message m came on, as this side sees it. 1 if known. */
static int pipe_addrs(nng_msg *m, nng_sockaddr *host, nng_sockaddr *peer)
{
	nng_pipe p = nng_msg_get_pipe(m);
	return nng_pipe_id(p) > 0 && nng_pipe_get_addr(p, NNG_OPT_LOCADDR, host) == 0 &&
	       nng_pipe_get_addr(p, NNG_OPT_REMADDR, peer) == 0 &&
	       host->s_family == NNG_AF_INET && peer->s_family == NNG_AF_INET;
}

/* net.sock.host/peer.addr/port on the current span (OpenTelemetry's names). */
static void conn_attrs(const nng_sockaddr *host, const nng_sockaddr *peer)
{
	char a[INET_ADDRSTRLEN];
	struct in_addr x;
	x.s_addr = host->s_in.sa_addr;
	retrace_attr_str("net.sock.host.addr", inet_ntop(AF_INET, &x, a, sizeof a) ? a : "");
	retrace_attr_int("net.sock.host.port", ntohs(host->s_in.sa_port));
	x.s_addr = peer->s_in.sa_addr;
	retrace_attr_str("net.sock.peer.addr", inet_ntop(AF_INET, &x, a, sizeof a) ? a : "");
	retrace_attr_int("net.sock.peer.port", ntohs(peer->s_in.sa_port));
}

/* Open the call's context and start sending; c->rv set on failure. */
static void call_start(struct server *s, struct call *c, nng_msg *req)
{
	int rv = 0;
	nng_socket sock = s->down[c->callee_svc].sock;
	c->rv = 0;
	c->ctx_open = 0;
	c->have_addr = 0;
	c->slot = -1;
	if (!req) {
		c->rv = NNG_ENOMEM;
		return;
	}
	if (s->conn_pool) {
		if ((c->slot = pool_take(&s->down[c->callee_svc], &rv)) < 0) {
			nng_msg_free(req);
			c->rv = rv ? rv : NNG_ENOMEM;
			return;
		}
		sock = s->down[c->callee_svc].pool[c->slot];
	}
	if ((rv = nng_ctx_open(&c->ctx, sock)) != 0) {
		nng_msg_free(req);
		c->rv = rv;
		if (c->slot >= 0)
			pool_give(&s->down[c->callee_svc], c->slot);
		c->slot = -1;
		return;
	}
	c->ctx_open = 1;
	/* One resend would make the callee handle the call twice: never. */
	nng_ctx_set_ms(c->ctx, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_aio_set_msg(c->aio, req);
	nng_aio_set_timeout(c->aio, s->call_timeout_ms);
	nng_ctx_send(c->ctx, c->aio);
}

/* Wait for the send, start the receive. */
static void call_sent(struct server *s, struct call *c)
{
	if (c->rv || !c->ctx_open)
		return;
	nng_aio_wait(c->aio);
	if ((c->rv = nng_aio_result(c->aio)) != 0) {
		nng_msg_free(nng_aio_get_msg(c->aio));
		return;
	}
	nng_aio_set_timeout(c->aio, s->call_timeout_ms);
	nng_ctx_recv(c->ctx, c->aio);
}

/* Wait for the reply and read it; close the context, give the connection back. */
static void call_done(struct server *s, struct call *c)
{
	c->status = TOPO_ST_DOWNSTREAM;
	c->fired = 0;
	c->resp_len = 0;
	if (!c->rv && c->ctx_open) {
		nng_aio_wait(c->aio);
		if ((c->rv = nng_aio_result(c->aio)) == 0) {
			nng_msg *m = nng_aio_get_msg(c->aio);
			if (parse_reply(m, c) != 0)
				c->rv = NNG_EPROTO;
			c->have_addr = c->slot >= 0 && pipe_addrs(m, &c->host, &c->peer);
			nng_msg_free(m);
		}
	}
	if (c->ctx_open)
		nng_ctx_close(c->ctx);
	c->ctx_open = 0;
	if (c->slot >= 0)
		pool_give(&s->down[c->callee_svc], c->slot);
	c->slot = -1;
}

/* The CLIENT span of a call: its id is the parent the callee sees. */
static void call_span_start(struct server *s, struct call *c, uint64_t server_span)
{
	if (s->no_trace) {
		c->span = topo_rand64() | 1; /* our own span id: the truth and --tail need one */
		return;
	}
	c->span = retrace_span_start_child(c->name, RETRACE_SPAN_CLIENT, server_span);
	retrace_attr_str("peer.service", s->topo.services[c->callee_svc].name);
	retrace_attr_int("topo.node", c->node);
}

/* Reply in hand: breadcrumb from the response context, the span's outcome. */
static int call_span_end(struct server *s, struct call *c)
{
	int ok = !c->rv && c->status == TOPO_ST_OK;
	atomic_fetch_add(&s->c.calls, 1);
	if (c->rv)
		atomic_fetch_add(&s->c.call_errors, 1);
	if (s->no_trace)
		return ok;
	if (!c->rv && c->resp_len && !c->no_ctx &&
	    retrace_deserialize_response_binary(c->resp, c->resp_len) != RETRACE_OK)
		atomic_fetch_add(&s->c.bad_responses, 1);
	retrace_attr_int("topo.status", c->rv ? -1 : c->status);
	if (c->have_addr)
		conn_attrs(&c->host, &c->peer);
	if (ok) {
		retrace_span_end_ok();
	} else if (c->rv) {
		retrace_log(RETRACE_LOG_ERROR, "call to %s failed: %s", c->name + 5,
			    nng_strerror(c->rv));
		retrace_span_end_error(c->rv, "unreachable");
	} else {
		retrace_span_end_error(c->status, "downstream failed");
	}
	return ok;
}

/* Every call of api a this request makes; returns 1 if all succeeded. */
static int make_calls(struct worker *w, int a, uint32_t node, uint64_t hi, uint64_t lo,
		      uint64_t server_span, struct topo_truth *t, int *fired)
{
	struct server *s = w->s;
	const struct topo_api *api = &s->topo.apis[a];
	struct call *made[TOPO_MAX_CALLS];
	int n = 0, k, ok = 1;
	uint8_t ctx[RETRACE_BINARY_CONTEXT_LEN];

	for (k = 0; k < api->n_calls; k++) {
		struct call *c = &w->calls[k];
		const struct topo_api *callee = &s->topo.apis[api->calls[k].api];
		if (!topo_call_made(&s->topo, a, node, k, hi, lo))
			continue;
		c->k = k;
		c->callee_svc = callee->service;
		c->node = topo_child_node(&s->topo, a, node, k);
		c->no_ctx = !s->no_trace && (s->no_context_to >> c->callee_svc & 1);
		snprintf(c->name, sizeof c->name, "call %s", callee->name);
		made[n++] = c;
	}
	for (k = 0; k < n; k++) {
		struct call *c = made[k];
		nng_msg *req;
		call_span_start(s, c, server_span);
		t->spans[t->n_spans++] = c->span;
		if (s->no_trace) {
			/* No context: the parent span id travels alone (TOPO_RQ_PARENT). */
			memset(ctx, 0, sizeof ctx);
			topo_put64(ctx, c->span);
			req = build_request(s, api->calls[c->k].api, c->node, TOPO_RQ_PARENT, hi, lo,
					    ctx);
		} else if (c->no_ctx) {
			/* A hop without context: no traceparent, no breadcrumb. Only the
			 * ground truth learns the caller's span (TOPO_RQ_FRESH). */
			memset(ctx, 0, sizeof ctx);
			topo_put64(ctx, c->span);
			req = build_request(s, api->calls[c->k].api, c->node, TOPO_RQ_FRESH, hi, lo,
					    ctx);
		} else {
			if (retrace_serialize_binary(ctx) != RETRACE_OK)
				memset(ctx, 0, sizeof ctx); /* not attached: the callee rejects it */
			req = build_request(s, api->calls[c->k].api, c->node, TOPO_RQ_CTX, hi, lo,
					    ctx);
		}
		call_start(s, c, req);
		if (!api->parallel) {
			call_sent(s, c);
			call_done(s, c);
			ok &= call_span_end(s, c);
			*fired |= !c->rv && c->fired && !c->no_ctx;
		}
	}
	if (api->parallel) {
		for (k = 0; k < n; k++)
			call_sent(s, made[k]);
		for (k = 0; k < n; k++)
			call_done(s, made[k]);
		/* The spans nest on this thread's stack: end them last-started first. */
		for (k = n - 1; k >= 0; k--) {
			ok &= call_span_end(s, made[k]);
			*fired |= !made[k]->rv && made[k]->fired && !made[k]->no_ctx;
		}
	}
	return ok;
}

/* ------------------------------------------------------------ request ---- */

/* Which --edge-trigger this trace stands for at the entry (0: none). The shares
 * are consecutive ranges of one uniform number per trace, so they are disjoint. */
static uint32_t edge_trigger_of(const struct server *s, uint64_t hi, uint64_t lo)
{
	double u = 100.0 * topo_unit(topo_mix64(lo ^ topo_mix64(hi ^ 0xED7Full))), at = 0;
	int i;
	for (i = 0; i < s->n_edges; i++) {
		at += s->edges[i].pct;
		if (u < at)
			return s->edges[i].id;
	}
	return 0;
}

/* --trigger-delay-ms: queue trigger `id` of (hi, lo) for later; the delayer fires it. */
static void delay_trigger(struct server *s, uint64_t hi, uint64_t lo, uint32_t id)
{
	pthread_mutex_lock(&s->delay_lock);
	if (s->delay_len == DELAY_QUEUE) {
		pthread_mutex_unlock(&s->delay_lock);
		atomic_fetch_add(&s->c.delayed_dropped, 1);
		return;
	}
	s->delay_q[(s->delay_head + s->delay_len) % DELAY_QUEUE] =
		(struct delayed){topo_now_ns() + (uint64_t)s->delay_ms * 1000000ull, hi, lo, id};
	if (s->delay_len++ == 0)
		pthread_cond_signal(&s->delay_cond);
	pthread_mutex_unlock(&s->delay_lock);
}

/* Fires queued triggers when due (all delays are equal, so the ring is in due
 * order); at stop, fires what is left at once. */
static void *delayer_main(void *arg)
{
	struct server *s = arg;
	pthread_mutex_lock(&s->delay_lock);
	for (;;) {
		struct delayed d;
		uint64_t now;
		if (s->delay_len == 0) {
			if (s->delay_stop)
				break;
			pthread_cond_wait(&s->delay_cond, &s->delay_lock);
			continue;
		}
		d = s->delay_q[s->delay_head];
		now = topo_now_ns();
		if (d.due_ns > now && !s->delay_stop) {
			struct timespec ts;
			uint64_t wait = d.due_ns - now;
			if (wait > 50000000ull)
				wait = 50000000ull;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)wait;
			while (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&s->delay_cond, &s->delay_lock, &ts);
			continue;
		}
		s->delay_head = (s->delay_head + 1) % DELAY_QUEUE;
		s->delay_len--;
		pthread_mutex_unlock(&s->delay_lock);
		{
			int rc = retrace_trigger((retrace_trace_id){.hi = d.hi, .lo = d.lo}, d.id, NULL, 0);
			atomic_fetch_add(rc == RETRACE_OK ? &s->c.triggers : &s->c.trigger_errors, 1);
			atomic_fetch_add(&s->c.delayed_fired, 1);
		}
		pthread_mutex_lock(&s->delay_lock);
	}
	pthread_mutex_unlock(&s->delay_lock);
	retrace_flush();
	return NULL;
}

/*
 * --tail: one message per request handled, like an SDK exporting the request's
 * spans: "TS01" | trace hi u64 | trace lo u64 | node u32 | flags u32 (1: a span
 * is marked — an edge case or an error, what the tail policy keeps) | n_spans u32
 * | parent u64 | spans u64 x n | the raw records (the spans' events). Sent
 * without blocking on a bounded queue (--tail-queue): when it is full the message
 * is dropped and counted, as an OpenTelemetry BatchSpanProcessor does.
 */
static void tail_export(struct worker *w, const struct topo_truth *t, int marked)
{
	struct server *s = w->s;
	uint8_t h[40 + 8 * TOPO_MAX_SPANS];
	size_t n = 36 + 8 * (size_t)t->n_spans, bytes;
	nng_msg *m;
	int k;
	memcpy(h, "TS01", 4);
	topo_put64(h + 4, t->hi);
	topo_put64(h + 12, t->lo);
	topo_put32(h + 20, t->node);
	topo_put32(h + 24, marked ? 1u : 0u);
	topo_put32(h + 28, (uint32_t)t->n_spans);
	topo_put64(h + 32, t->parent);
	for (k = 0; k < (int)t->n_spans; k++)
		topo_put64(h + 40 + 8 * k, t->spans[k]);
	n += 4;
	if (nng_msg_alloc(&m, 0) != 0)
		goto drop;
	if (nng_msg_append(m, h, n) != 0 ||
	    (w->exp_len && nng_msg_append(m, w->exp, w->exp_len) != 0)) {
		nng_msg_free(m);
		goto drop;
	}
	bytes = nng_msg_len(m);
	if (nng_sendmsg(s->tail, m, NNG_FLAG_NONBLOCK) != 0) {
		nng_msg_free(m);
		goto drop;
	}
	atomic_fetch_add(&s->c.tail_sent, 1);
	atomic_fetch_add(&s->c.tail_bytes, bytes);
	return;
drop:
	atomic_fetch_add(&s->c.tail_dropped, 1);
}

static nng_msg *handle(struct worker *w, nng_msg *in)
{
	struct server *s = w->s;
	const uint8_t *p = nng_msg_body(in);
	size_t len = nng_msg_len(in);
	struct retrace_wire_context wc;
	struct topo_truth t;
	const struct topo_api *api;
	uint32_t flags, node, half, edge_id = 0;
	uint64_t hi, lo, server_span;
	uint8_t resp[RESP_CTX_MAX];
	size_t resp_len = 0, extra;
	int a, fired = 0, calls_ok, fails, status, tr = !s->no_trace;
	nng_sockaddr conn_host, conn_peer;

	atomic_fetch_add(&s->c.requests, 1);
	if (len < TOPO_RQ_HDR || memcmp(p, "TQ01", 4) != 0 || topo_get32(p + 4) != s->topo.checksum)
		goto bad;
	a = (int)topo_get32(p + 8);
	node = topo_get32(p + 12);
	flags = topo_get32(p + 16);
	hi = topo_get64(p + 20);
	lo = topo_get64(p + 28);
	extra = (flags & TOPO_RQ_CTX) ? RETRACE_BINARY_CONTEXT_LEN
		: (flags & (TOPO_RQ_PARENT | TOPO_RQ_FRESH)) ? 8 : 0;
	if (a < 0 || a >= s->topo.n_apis || s->topo.apis[a].service != s->svc ||
	    (flags & ~(TOPO_RQ_CTX | TOPO_RQ_EDGE | TOPO_RQ_PARENT | TOPO_RQ_FRESH)) ||
	    (hi | lo) == 0 ||
	    __builtin_popcount(flags & (TOPO_RQ_CTX | TOPO_RQ_PARENT | TOPO_RQ_FRESH)) > 1 ||
	    len != TOPO_RQ_HDR + extra)
		goto bad;
	api = &s->topo.apis[a];

	memset(&t, 0, sizeof t);
	t.hi = hi;
	t.lo = lo;
	if (flags & TOPO_RQ_CTX) {
		if (!tr)
			goto bad; /* an untraced service gets no context */
		if (retrace_deserialize_binary(p + TOPO_RQ_HDR, RETRACE_BINARY_CONTEXT_LEN, &wc) !=
			    RETRACE_OK ||
		    wc.trace_id.hi != hi || wc.trace_id.lo != lo)
			goto bad;
		t.parent = wc.parent_span_id;
	} else if (flags & TOPO_RQ_PARENT) {
		t.parent = topo_get64(p + TOPO_RQ_HDR);
	} else if ((flags & TOPO_RQ_FRESH) && !tr) {
		t.parent = topo_get64(p + TOPO_RQ_HDR); /* untraced: nothing to cut */
	} else if (flags & TOPO_RQ_FRESH) {
		/* The caller dropped the context: this request starts a trace of its
		 * own (a fresh id; every decision below follows it), and only the
		 * truth keeps the real parent. */
		t.cause_hi = hi;
		t.cause_lo = lo;
		t.cause_span = topo_get64(p + TOPO_RQ_HDR);
		if (t.cause_span == 0)
			goto bad;
		do {
			hi = topo_rand64();
			lo = topo_rand64();
		} while ((hi | lo) == 0);
		t.hi = hi;
		t.lo = lo;
	}
	/* The entry (no caller) stands for an edge trigger of --edge-trigger? */
	if (!(flags & (TOPO_RQ_CTX | TOPO_RQ_PARENT | TOPO_RQ_FRESH)) && s->n_edges)
		edge_id = edge_trigger_of(s, hi, lo);
	if (flags & TOPO_RQ_EDGE)
		edge_id = TOPO_TRIGGER_EDGE;
	w->exp_len = 0;
	if (tr)
		retrace_begin((retrace_trace_id){.hi = hi, .lo = lo});
	snprintf(t.service, sizeof t.service, "%s", s->topo.services[s->svc].name);
	snprintf(t.host, sizeof t.host, "%s", s->topo.hosts[s->host].name);
	t.agent = tr ? retrace_local_agent() : s->agent;
	t.node = node;
	t.records = api->records;
	t.bytes = api->bytes;

	if (tr) {
		server_span = retrace_span_start(api->name, RETRACE_SPAN_SERVER);
		retrace_attr_str("topo.api", api->name);
		retrace_attr_int("topo.node", node);
		retrace_attr_str("topo.host", t.host);
		retrace_attr_bool("topo.edge", edge_id != 0);
		if (s->conn_pool && pipe_addrs(in, &conn_host, &conn_peer))
			conn_attrs(&conn_host, &conn_peer);
		retrace_log(RETRACE_LOG_INFO, "%s serving %s at node %u", t.service, api->name, node);
	} else {
		server_span = topo_rand64() | 1;
	}
	t.spans[t.n_spans++] = server_span;

	half = (api->records + 1) / 2;
	write_records(w, api, hi, lo, node, 0, half);
	do_work(api);
	calls_ok = make_calls(w, a, node, hi, lo, server_span, &t, &fired);
	write_records(w, api, hi, lo, node, half, api->records);

	fails = topo_fails(node, hi, lo, s->error);
	if (fails) {
		/* The exception path: fired from inside the handler, span still open. */
		int rc;
		t.trigger = TOPO_TRIGGER_EXCEPTION;
		if (tr) {
			retrace_log(RETRACE_LOG_ERROR, "injected failure in %s at node %u", t.service,
				    node);
			if (!s->no_triggers) {
				rc = retrace_trigger(retrace_current(), TOPO_TRIGGER_EXCEPTION, NULL, 0);
				atomic_fetch_add(rc == RETRACE_OK ? &s->c.triggers : &s->c.trigger_errors,
						 1);
			}
			retrace_span_end_error(500, "injected failure");
		}
		status = TOPO_ST_FAILED;
	} else if (!calls_ok) {
		if (tr)
			retrace_span_end_error(502, "downstream failed");
		status = TOPO_ST_DOWNSTREAM;
	} else {
		if (tr)
			retrace_span_end_ok();
		status = TOPO_ST_OK;
	}
	if (!fails && edge_id) {
		/* The edge case: the entry decides at completion that it wants this one. */
		t.trigger = edge_id;
		if (tr && !s->no_triggers && !s->delay_ms) {
			int rc = retrace_trigger(retrace_current(), edge_id, NULL, 0);
			atomic_fetch_add(rc == RETRACE_OK ? &s->c.triggers : &s->c.trigger_errors, 1);
		}
	}
	if (tr && !s->no_triggers && !(s->delay_ms && t.trigger == edge_id && edge_id))
		fired |= t.trigger != 0;
	if (!s->break_resp && !(flags & TOPO_RQ_FRESH))
		resp_len = resp_ctx_make(s->no_trace, resp);
	if (tr)
		retrace_end();
	if (tr && !s->no_triggers && s->delay_ms && edge_id && !fails)
		delay_trigger(s, hi, lo, edge_id);
	if (s->tail_url)
		tail_export(w, &t, t.trigger != 0);

	snprintf(t.status, sizeof t.status, "%s",
		 status == TOPO_ST_OK ? "ok" : status == TOPO_ST_FAILED ? "failed" : "downstream");
	truth_append(s, &t);
	atomic_fetch_add(status == TOPO_ST_OK ? &s->c.ok
			 : status == TOPO_ST_FAILED ? &s->c.failed
						    : &s->c.downstream,
			 1);
	return build_reply(status, fired, resp, resp_len);
bad:
	atomic_fetch_add(&s->c.bad, 1);
	return build_reply(TOPO_ST_BAD, 0, NULL, 0);
}

/* ------------------------------------------------------------ workers ---- */

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct server *s = w->s;
	nng_ctx ctx;
	nng_aio *aio = NULL;
	int k;

	for (k = 0; k < TOPO_MAX_CALLS; k++)
		if (nng_aio_alloc(&w->calls[k].aio, NULL, NULL) != 0) {
			fprintf(stderr, "retrace-topo serve: out of memory\n");
			exit(1);
		}
	if (nng_ctx_open(&ctx, s->rep) != 0 || nng_aio_alloc(&aio, NULL, NULL) != 0) {
		fprintf(stderr, "retrace-topo serve: cannot open a REP context\n");
		exit(1);
	}
	while (!atomic_load(&s->stop)) {
		nng_msg *in, *out;
		int rv;
		nng_aio_set_timeout(aio, RECV_POLL_MS);
		nng_ctx_recv(ctx, aio);
		nng_aio_wait(aio);
		rv = nng_aio_result(aio);
		if (rv == NNG_ETIMEDOUT)
			continue;
		if (rv == NNG_ECLOSED)
			break;
		if (rv != 0)
			continue;
		in = nng_aio_get_msg(aio);
		out = handle(w, in);
		nng_msg_free(in);
		if (!out) {
			atomic_fetch_add(&s->c.reply_errors, 1);
			continue;
		}
		nng_aio_set_msg(aio, out);
		nng_aio_set_timeout(aio, s->call_timeout_ms);
		nng_ctx_send(ctx, aio);
		nng_aio_wait(aio);
		if (nng_aio_result(aio) != 0) {
			nng_msg_free(nng_aio_get_msg(aio));
			atomic_fetch_add(&s->c.reply_errors, 1);
		}
	}
	nng_ctx_close(ctx);
	nng_aio_free(aio);
	for (k = 0; k < TOPO_MAX_CALLS; k++)
		nng_aio_free(w->calls[k].aio);
	free(w->rec);
	free(w->exp);
	if (!s->no_trace)
		retrace_flush();
	return NULL;
}

/* --------------------------------------------------------------- setup ---- */

/* SIGTERM/SIGINT are blocked (sigwait takes them later): a start-up wait asks. */
static int stop_pending(void)
{
	sigset_t p;
	return sigpending(&p) == 0 && (sigismember(&p, SIGTERM) == 1 || sigismember(&p, SIGINT) == 1);
}

/* Attach to the host's pool, waiting for its agent; check the agent id. */
static int attach_pool(struct server *s)
{
	struct retrace_config cfg;
	uint64_t end = topo_now_ns() + (uint64_t)(s->wait_s * 1e9);
	int rc;
	retrace_config_from_env(&cfg);
	cfg.pool_name = s->pool;
	cfg.quiet = 1;
	if (s->sample_shift >= 0) {
		cfg.sample_shift = (uint32_t)s->sample_shift;
		cfg.sample_ppm = s->sample_ppm;
	}
	/* A pool that is missing or still being created may appear; other errors stay. */
	while ((rc = retrace_init(&cfg)) != RETRACE_OK &&
	       (rc == RETRACE_E_NOPOOL || rc == RETRACE_E_NOTREADY) && topo_now_ns() < end &&
	       !stop_pending())
		topo_sleep_ns(50000000ull);
	if (rc != RETRACE_OK) {
		fprintf(stderr, "retrace-topo serve %s: cannot attach to pool %s: %s\n"
			"(is the agent of host '%s' running? start it with --pool %s --agent-id %u)\n",
			s->topo.services[s->svc].name, s->pool, retrace_strerror(rc),
			s->topo.hosts[s->host].name, s->pool, s->agent);
		return -1;
	}
	if (retrace_local_agent() != s->agent) {
		fprintf(stderr, "retrace-topo serve %s: pool %s belongs to agent %u, but the "
			"topology gives host '%s' agent %u\n", s->topo.services[s->svc].name, s->pool,
			retrace_local_agent(), s->topo.hosts[s->host].name, s->agent);
		return -1;
	}
	return 0;
}

/* One REQ socket per service this one calls, dialled at its published address. */
static int open_downstreams(struct server *s)
{
	uint64_t end = topo_now_ns() + (uint64_t)(s->wait_s * 1e9);
	int a, k, rv;
	for (a = 0; a < s->topo.n_apis; a++) {
		if (s->topo.apis[a].service != s->svc)
			continue;
		for (k = 0; k < s->topo.apis[a].n_calls; k++) {
			int callee = s->topo.apis[s->topo.apis[a].calls[k].api].service;
			struct downstream *d = &s->down[callee];
			char path[4096];
			if (d->used)
				continue;
			topo_url_path(path, sizeof path, s->run_dir, s->topo.services[callee].name);
			while (topo_read_line(path, d->url, sizeof d->url) != 0) {
				if (stop_pending())
					return -1;
				if (topo_now_ns() >= end) {
					fprintf(stderr, "retrace-topo serve %s: downstream %s did not "
						"publish %s within %.0f s\n", s->topo.services[s->svc].name,
						s->topo.services[callee].name, path, s->wait_s);
					return -1;
				}
				topo_sleep_ns(20000000ull);
			}
			if ((rv = nng_req0_open(&d->sock)) != 0 ||
			    (rv = nng_socket_set_ms(d->sock, NNG_OPT_REQ_RESENDTIME,
						    NNG_DURATION_INFINITE)) != 0 ||
			    (rv = nng_dial(d->sock, d->url, NULL, NNG_FLAG_NONBLOCK)) != 0) {
				fprintf(stderr, "retrace-topo serve %s: dial %s at %s: %s\n",
					s->topo.services[s->svc].name, s->topo.services[callee].name,
					d->url, nng_strerror(rv));
				return -1;
			}
			pthread_mutex_init(&d->pool_lock, NULL);
			pthread_cond_init(&d->pool_cond, NULL);
			d->pool_n = 0;
			d->used = 1;
		}
	}
	return 0;
}

static int open_listener(struct server *s)
{
	nng_listener l;
	nng_sockaddr sa;
	const char *url = s->listen ? s->listen : "tcp://127.0.0.1:0";
	int rv;
	if ((rv = nng_rep0_open(&s->rep)) != 0 || (rv = nng_listen(s->rep, url, &l, 0)) != 0) {
		fprintf(stderr, "retrace-topo serve %s: listen on %s: %s\n",
			s->topo.services[s->svc].name, url, nng_strerror(rv));
		return -1;
	}
	if (nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa) == 0 && sa.s_family == NNG_AF_INET) {
		char ip[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &sa.s_in.sa_addr, ip, sizeof ip);
		snprintf(s->url, sizeof s->url, "tcp://%s:%u", ip, ntohs(sa.s_in.sa_port));
	} else {
		snprintf(s->url, sizeof s->url, "%s", url);
	}
	return 0;
}

#define C(x) (unsigned long long)atomic_load(&s->c.x)

int topo_serve_main(int argc, char **argv)
{
	static struct server server; /* the topology is large: not on the stack */
	struct server *s = &server;
	struct worker *workers;
	sigset_t sigs;
	char path[4096], text[200];
	unsigned i;
	int help = 0, rc, sig = 0, exit_code = 0, flusher = 0;

	memset(s, 0, sizeof *s);
	s->threads = 4;
	s->call_timeout_ms = 10000;
	s->wait_s = 30;
	s->truth_fd = -1;
	s->tail_queue = 2048;
	if ((rc = parse_args(s, argc, argv, &help)) != 0)
		return rc;
	if (help) {
		serve_usage(stdout);
		return 0;
	}
	s->svc_hash = topo_name_hash(s->topo.services[s->svc].name);

	/* Signals go to sigwait below; every thread (nng's too) inherits the mask,
	 * and waiting loops during start-up look at them with sigpending. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&s->truth_lock, NULL);
	pthread_cond_init(&s->truth_cond, NULL);

	if (s->truth_path) {
		s->truth_fd = open(s->truth_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (s->truth_fd < 0) {
			fprintf(stderr, "retrace-topo serve: --truth %s: %s\n", s->truth_path,
				strerror(errno));
			return 1;
		}
	}
	if (!s->no_trace) {
		if (attach_pool(s) != 0)
			return 1;
		retrace_set_service_name(s->topo.services[s->svc].name);
		retrace_resource_str("topo.host", s->topo.hosts[s->host].name);
		retrace_resource_int("topo.threads", s->threads);
	}
	if (open_listener(s) != 0 || open_downstreams(s) != 0)
		return 1;
	if (s->tail_url) {
		int rv;
		if ((rv = nng_push0_open(&s->tail)) != 0 ||
		    (rv = nng_socket_set_int(s->tail, NNG_OPT_SENDBUF,
					     (int)(s->tail_queue > 8192 ? 8192 : s->tail_queue))) != 0 ||
		    (rv = nng_dial(s->tail, s->tail_url, NULL, NNG_FLAG_NONBLOCK)) != 0) {
			fprintf(stderr, "retrace-topo serve: --tail %s: %s\n", s->tail_url,
				nng_strerror(rv));
			return 1;
		}
	}
	if (s->delay_ms && !s->no_trace && !s->no_triggers) {
		pthread_mutex_init(&s->delay_lock, NULL);
		pthread_cond_init(&s->delay_cond, NULL);
		if (!(s->delay_q = calloc(DELAY_QUEUE, sizeof *s->delay_q)) ||
		    pthread_create(&s->delayer, NULL, delayer_main, s) != 0) {
			fprintf(stderr, "retrace-topo serve: cannot start the trigger delayer\n");
			return 1;
		}
	}
	if (s->truth_path) {
		if (pthread_create(&s->flusher, NULL, flusher_main, s) != 0) {
			fprintf(stderr, "retrace-topo serve: cannot start the truth writer\n");
			return 1;
		}
		flusher = 1;
	}
	workers = calloc(s->threads, sizeof *workers);
	if (!workers) {
		fprintf(stderr, "retrace-topo serve: out of memory\n");
		return 1;
	}
	for (i = 0; i < s->threads; i++) {
		workers[i].s = s;
		if (pthread_create(&workers[i].th, NULL, worker_main, &workers[i]) != 0) {
			fprintf(stderr, "retrace-topo serve: cannot start worker threads\n");
			exit_code = 1;
			goto stop;
		}
		workers[i].started = 1;
	}

	topo_url_path(path, sizeof path, s->run_dir, s->topo.services[s->svc].name);
	{
		size_t n = strnlen(s->url, sizeof text - 2);
		memcpy(text, s->url, n);
		memcpy(text + n, "\n", 2);
	}
	if (topo_write_file(path, text) != 0) {
		fprintf(stderr, "retrace-topo serve: cannot write %s: %s\n", path, strerror(errno));
		exit_code = 1;
		goto stop;
	}
	fprintf(stderr, "retrace-topo serve %s: listening on %s (host %s, pool %s, agent %u, "
		"%u threads, error rate %g%s%s%s%s)\n", s->topo.services[s->svc].name, s->url,
		s->topo.hosts[s->host].name, s->pool, s->agent, s->threads, s->error,
		s->break_resp ? ", response context BROKEN on purpose" : "",
		s->tail_url ? ", untraced, spans pushed to " : s->no_trace ? ", UNTRACED" : "",
		s->tail_url ? s->tail_url : "", s->no_triggers ? ", no triggers" : "");

	while (sigwait(&sigs, &sig) != 0)
		;
stop:
	atomic_store(&s->stop, 1);
	/* A worker may be inside a call to a service that is stopping too (run stops
	 * them all at once): its send or receive would wait out call_timeout_ms, per
	 * call, level after level. Closing the downstream sockets first ends every
	 * call in flight at once with NNG_ECLOSED, so the joins below are prompt. */
	for (i = 0; i < TOPO_MAX_SERVICES; i++)
		if (s->down[i].used) {
			int k;
			rt_nng_close_bounded(s->down[i].sock, RT_NNG_CLOSE_WAIT_MS);
			pthread_mutex_lock(&s->down[i].pool_lock);
			for (k = 0; k < s->down[i].pool_n; k++)
				rt_nng_close_bounded(s->down[i].pool[k], RT_NNG_CLOSE_WAIT_MS);
			pthread_mutex_unlock(&s->down[i].pool_lock);
			s->down[i].used = 0;
		}
	for (i = 0; i < s->threads; i++)
		if (workers[i].started)
			pthread_join(workers[i].th, NULL);
	free(workers);
	if (s->delay_q) {
		pthread_mutex_lock(&s->delay_lock);
		s->delay_stop = 1;
		pthread_cond_signal(&s->delay_cond);
		pthread_mutex_unlock(&s->delay_lock);
		pthread_join(s->delayer, NULL);
		free(s->delay_q);
	}
	if (s->tail_url)
		rt_nng_close_bounded(s->tail, RT_NNG_CLOSE_WAIT_MS);
	if (flusher) {
		pthread_mutex_lock(&s->truth_lock);
		s->truth_stop = 1;
		pthread_cond_signal(&s->truth_cond);
		pthread_mutex_unlock(&s->truth_lock);
		pthread_join(s->flusher, NULL);
	}
	if (s->truth_fd >= 0 && close(s->truth_fd) != 0) {
		fprintf(stderr, "retrace-topo serve: closing %s: %s\n", s->truth_path, strerror(errno));
		exit_code = 1;
	}
	free(s->truth_buf);
	rt_nng_close_bounded(s->rep, RT_NNG_CLOSE_WAIT_MS);
	fprintf(stderr, "retrace-topo serve %s: stopped%s%s: requests=%llu ok=%llu failed=%llu "
		"downstream=%llu bad=%llu calls=%llu call_errors=%llu triggers=%llu "
		"trigger_errors=%llu reply_errors=%llu bad_responses=%llu truth_lines=%llu truth_errors=%llu "
		"tail_sent=%llu tail_dropped=%llu tail_bytes=%llu delayed_fired=%llu delayed_dropped=%llu\n",
		s->topo.services[s->svc].name, sig ? " on " : "", sig ? strsignal(sig) : "",
		C(requests), C(ok), C(failed), C(downstream), C(bad), C(calls), C(call_errors),
		C(triggers), C(trigger_errors), C(reply_errors), C(bad_responses), C(truth_lines),
		C(truth_errors), C(tail_sent), C(tail_dropped), C(tail_bytes), C(delayed_fired),
		C(delayed_dropped));
	if (atomic_load(&s->c.truth_errors))
		exit_code = 1;
	if (!s->no_trace)
		retrace_shutdown();
	return exit_code;
}
