/*
 * examples/shop/serve.c — `retrace-shop serve SERVICE`: one service of the shop.
 *
 * How it works: an nng HTTP server takes every GET request. Its handler runs on
 * an nng callback thread, so it only stamps the request and queues it; a pool of
 * our own worker threads takes it from there: it continues (or starts) the
 * trace, writes a few self-describing tracepoints, calls each downstream named
 * by --call in order over a persistent keep-alive connection per worker (nng
 * HTTP client, driven synchronously), injects errors and slowness, fires
 * triggers, logs what it wrote (--record), and finally stores the response in
 * the handler's aio and finishes it. A worker about to sleep flushes its
 * pending complete buffers so an idle service never sits on sealed data.
 *
 * Spans and logs (retrace/tracer.h): each request is a SERVER span named after
 * its route ("GET /checkout") with http.* and shop.* attributes, each
 * downstream call a CLIENT span ("call cart") whose id travels as the parent in
 * the traceparent; templated logs say what happened (a WARN on injected
 * slowness, an ERROR and an error status on injected failure). With --record
 * every span also goes to DIR/SERVICE.spans (ground truth for decoder tests).
 *
 * Propagation: an incoming traceparent/tracestate goes through
 * retrace_deserialize (breadcrumbs to the previous hops), outgoing calls carry
 * retrace_serialize's headers, and every traced response carries
 * retrace_serialize_response's value in RETRACE_RESPONSE_HEADER
 * (x-retrace-response: this host's agent and fired flag), which the caller hands
 * to retrace_deserialize_response: a breadcrumb pointing down the tree, so a
 * trigger at the caller reaches the callee.
 *
 * Shutdown: SIGTERM/SIGINT are taken by sigwait in the main thread; new requests
 * get 503 while queued and running ones finish, then the server stops, the
 * workers exit (their thread-exit hook returns their buffers) and
 * retrace_shutdown hands the rest to the agent.
 */
#include "shop.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "retrace/tracer.h"
#include "retrace/triggers.h"

#define RING_SIZE 16
#define MAX_THREADS 256
#define SCRATCH 8192
#define MAX_DELAY_MS 600000u
#define DRAIN_WAIT_NS (30ull * 1000000000ull)

static const char *const forwarded_headers[] = {
	"x-shop-fail", "x-shop-slow", "x-shop-lateral", "x-shop-delay-trigger-ms",
};
#define N_FORWARDED (sizeof forwarded_headers / sizeof forwarded_headers[0])

struct downstream {
	char name[32];
	char url_text[256];
	char path[256];
	nng_url *url;
	nng_http_client *client;
};

struct job {
	struct job *next;
	nng_aio *aio;
	nng_http_req *req;
	uint64_t t_enqueued;
};

struct counters {
	atomic_ullong requests, ok, failed, rejected_draining;
	atomic_ullong fresh_traces, bad_traceparent, upstream_traces;
	atomic_ullong injected_errors, triggers, trigger_errors, slow_injected;
	atomic_ullong calls, call_transport_errors, call_failures;
	atomic_ullong trace_responses, bad_trace_responses; /* x-retrace-response read */
	atomic_ullong record_errors, lost_responses;
};

struct shop {
	/* configuration */
	char svc[32];
	char host[64];
	unsigned port;
	struct downstream calls[SHOP_MAX_CALLS];
	unsigned n_calls;
	double error_rate, slow_rate;
	unsigned slow_ms, threads;
	int timeout_ms;
	const char *record_dir;
	const char *ready_file;
	int trace; /* 0 with --no-trace */

	/* runtime */
	nng_http_server *server;
	int record_fd;
	int spans_fd;  /* --record: DIR/SERVICE.spans */
	struct retrace_percentile *slow;
	pthread_mutex_t lock;
	pthread_cond_t work, idle;
	struct job *head, *tail;
	unsigned queued, active;
	int closing;
	atomic_int draining;

	pthread_mutex_t ring_lock;
	retrace_trace_id ring[RING_SIZE];
	unsigned ring_n, ring_next;

	struct counters c;
};

struct worker {
	struct shop *s;
	pthread_t th;
	struct shop_conn conns[SHOP_MAX_CALLS];
	nng_http_res *res;
	struct shop_buf rec;
	struct shop_buf spans; /* --record lines of this request's spans */
	char scratch[SCRATCH];
};

/* What one request knows while a worker handles it. */
struct rq {
	struct shop *s;
	struct worker *w;
	retrace_trace_id id;
	char hex[33];
	char op[128];
	unsigned step;
	uint64_t stream; /* deterministic per (trace, service) */
	char in_state[RETRACE_TRACESTATE_MAX + 1];
	int have_state;
	uint64_t server_span;   /* this request's SERVER span (0 untraced) */
	char span_name[128];    /* "GET /checkout" */
	uint64_t remote_parent; /* the caller's span from traceparent, or 0 */
};

/* --------------------------------------------------------------- usage ---- */

static void serve_usage(FILE *out)
{
	fprintf(out,
		"usage: retrace-shop serve SERVICE --listen PORT [options]\n"
		"Run one service of the shop as an HTTP server on loopback, traced with\n"
		"libretrace into the pool named by $RETRACE_POOL (default /retrace).\n"
		"\n"
		"  -l, --listen [HOST:]PORT   address to listen on (HOST default 127.0.0.1; PORT 0 = any)\n"
		"  -c, --call NAME=URL        call downstream NAME at URL (http://host:port[/path]) for\n"
		"                             every request, in the order given (repeatable, at most %d)\n"
		"  -e, --error-rate P         fail a share P of requests: trigger %u and answer 500 (default 0)\n"
		"  -s, --slow-rate P          sleep --slow-ms in a share P of requests (default 0)\n"
		"  -m, --slow-ms MS           injected slowness in ms (default 50)\n"
		"  -r, --record DIR           append DIR/SERVICE.records: \"<trace hex> <hex of record>\" per tracepoint\n"
		"                             and DIR/SERVICE.spans: \"<trace hex> <span> <parent> <kind> <status> <name>\"\n"
		"  -t, --threads N            worker threads (default 8)\n"
		"      --timeout-ms MS        downstream connect/transaction timeout (default %d)\n"
		"      --ready-file PATH      write the bound port to PATH once listening\n"
		"      --no-trace             do not use libretrace at all (baseline for overhead figures)\n"
		"  -h, --help                 this text\n"
		"\n"
		"Request headers: traceparent/tracestate (W3C), x-shop-fail: SERVICE[,...],\n"
		"x-shop-slow: SERVICE[,...], x-shop-lateral: N (0..%d), x-shop-delay-trigger-ms: MS.\n"
		"Traced responses carry x-retrace-response (retrace_serialize_response: this host's\n"
		"agent id and fired flag). GET /stats gives counters.\n"
		"SIGTERM or SIGINT stop the service after in-flight requests finish.\n",
		SHOP_MAX_CALLS, SHOP_TRIGGER_ERROR, SHOP_DEFAULT_TIMEOUT_MS, SHOP_MAX_LATERAL_HEADER);
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "retrace-shop serve: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see retrace-shop serve --help)\n");
	return SHOP_EXIT_USAGE;
}

static int valid_name(const char *s)
{
	size_t n = strlen(s), i;
	if (n == 0 || n >= 32)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
			return 0;
	}
	return 1;
}

static const char *default_path(const char *callee)
{
	static const char *const map[][2] = {
		{"frontend", "/checkout"}, {"cart", "/cart"},	   {"catalog", "/item"},
		{"inventory", "/stock"},   {"payment", "/charge"},
	};
	size_t i;
	for (i = 0; i < sizeof map / sizeof map[0]; i++)
		if (strcmp(map[i][0], callee) == 0)
			return map[i][1];
	return NULL;
}

static int parse_call(struct shop *s, const char *arg)
{
	const char *eq = strchr(arg, '=');
	struct downstream *d;
	char err[512];
	size_t n;

	if (s->n_calls >= SHOP_MAX_CALLS)
		return usage_error("too many --call flags (at most 8)%s", "");
	if (!eq)
		return usage_error("--call wants NAME=URL, got '%s'", arg);
	d = &s->calls[s->n_calls];
	n = (size_t)(eq - arg);
	if (n == 0 || n >= sizeof d->name)
		return usage_error("--call '%s': bad service name", arg);
	memcpy(d->name, arg, n);
	d->name[n] = '\0';
	if (!valid_name(d->name))
		return usage_error("--call '%s': service names are [a-z0-9_-], 1..31 chars", arg);
	if (strlen(eq + 1) >= sizeof d->url_text)
		return usage_error("--call '%s': URL too long", arg);
	snprintf(d->url_text, sizeof d->url_text, "%s", eq + 1);
	if (shop_check_http_url(d->url_text, &d->url, err, sizeof err) != 0)
		return usage_error("--call: %s", err);
	if (d->url->u_requri[0] && strcmp(d->url->u_requri, "/") != 0) {
		snprintf(d->path, sizeof d->path, "%s", d->url->u_requri);
	} else {
		const char *p = default_path(d->name);
		if (p)
			snprintf(d->path, sizeof d->path, "%s", p);
		else {
			d->path[0] = '/'; /* name < 32 bytes, path 256 */
			memcpy(d->path + 1, d->name, strlen(d->name) + 1);
		}
	}
	s->n_calls++;
	return 0;
}

static int parse_listen(struct shop *s, const char *arg)
{
	const char *colon = strrchr(arg, ':');
	const char *port = colon ? colon + 1 : arg;
	uint64_t v;
	if (colon) {
		size_t n = (size_t)(colon - arg);
		if (n == 0 || n >= sizeof s->host)
			return usage_error("--listen '%s': bad host", arg);
		memcpy(s->host, arg, n);
		s->host[n] = '\0';
	}
	if (shop_parse_u64(port, 0, 65535, &v) != 0)
		return usage_error("--listen '%s': want [HOST:]PORT with PORT 0..65535", arg);
	s->port = (unsigned)v;
	return 0;
}

static int parse_args(struct shop *s, int argc, char **argv, int *help)
{
	enum { OPT_TIMEOUT = 1000, OPT_READY, OPT_NOTRACE };
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'l'},
		{"call", required_argument, NULL, 'c'},
		{"error-rate", required_argument, NULL, 'e'},
		{"slow-rate", required_argument, NULL, 's'},
		{"slow-ms", required_argument, NULL, 'm'},
		{"record", required_argument, NULL, 'r'},
		{"threads", required_argument, NULL, 't'},
		{"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
		{"ready-file", required_argument, NULL, OPT_READY},
		{"no-trace", no_argument, NULL, OPT_NOTRACE},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c, rc, have_listen = 0;
	uint64_t v;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":l:c:e:s:m:r:t:h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			if ((rc = parse_listen(s, optarg)) != 0)
				return rc;
			have_listen = 1;
			break;
		case 'c':
			if ((rc = parse_call(s, optarg)) != 0)
				return rc;
			break;
		case 'e':
			if (shop_parse_prob(optarg, &s->error_rate))
				return usage_error("--error-rate '%s': want a number in [0, 1]", optarg);
			break;
		case 's':
			if (shop_parse_prob(optarg, &s->slow_rate))
				return usage_error("--slow-rate '%s': want a number in [0, 1]", optarg);
			break;
		case 'm':
			if (shop_parse_u64(optarg, 0, 600000, &v))
				return usage_error("--slow-ms '%s': want 0..600000", optarg);
			s->slow_ms = (unsigned)v;
			break;
		case 'r':
			s->record_dir = optarg;
			break;
		case 't':
			if (shop_parse_u64(optarg, 1, MAX_THREADS, &v))
				return usage_error("--threads '%s': want 1..256", optarg);
			s->threads = (unsigned)v;
			break;
		case OPT_TIMEOUT:
			if (shop_parse_u64(optarg, 1, 3600000, &v))
				return usage_error("--timeout-ms '%s': want 1..3600000", optarg);
			s->timeout_ms = (int)v;
			break;
		case OPT_READY:
			s->ready_file = optarg;
			break;
		case OPT_NOTRACE:
			s->trace = 0;
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
	if (optind >= argc)
		return usage_error("missing SERVICE name%s", "");
	if (optind + 1 < argc)
		return usage_error("unexpected argument '%s'", argv[optind + 1]);
	if (!valid_name(argv[optind]))
		return usage_error("bad SERVICE name '%s' (want [a-z0-9_-], 1..31 chars)",
				   argv[optind]);
	snprintf(s->svc, sizeof s->svc, "%s", argv[optind]);
	if (!have_listen)
		return usage_error("--listen PORT is required%s", "");
	return 0;
}

/* ------------------------------------------------------ small helpers ---- */

/* Is `name` one of the comma-separated tokens of `list`? */
static int names_me(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p = list;
	while (p && *p) {
		const char *end;
		size_t len;
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		end = p;
		while (*end && *end != ',')
			end++;
		len = (size_t)(end - p);
		while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		if (len == n && strncmp(p, name, n) == 0)
			return 1;
		p = end;
	}
	return 0;
}

static unsigned header_uint(nng_http_req *req, const char *name, unsigned max)
{
	const char *v = nng_http_req_get_header(req, name);
	uint64_t n;
	if (!v)
		return 0;
	while (*v == ' ')
		v++;
	if (shop_parse_u64(v, 0, UINT64_MAX, &n))
		return 0;
	return n > max ? max : (unsigned)n;
}

static void ring_add(struct shop *s, retrace_trace_id id)
{
	pthread_mutex_lock(&s->ring_lock);
	s->ring[s->ring_next] = id;
	s->ring_next = (s->ring_next + 1) % RING_SIZE;
	if (s->ring_n < RING_SIZE)
		s->ring_n++;
	pthread_mutex_unlock(&s->ring_lock);
}

/* The n most recent other traces this process handled, newest first. */
static size_t ring_snapshot(struct shop *s, retrace_trace_id self, retrace_trace_id *out,
			    size_t n)
{
	size_t got = 0, i;
	pthread_mutex_lock(&s->ring_lock);
	for (i = 0; i < s->ring_n && got < n; i++) {
		retrace_trace_id t = s->ring[(s->ring_next + RING_SIZE - 1 - i) % RING_SIZE];
		size_t j;
		int dup = 0;
		if (t.lo == self.lo && t.hi == self.hi)
			continue;
		for (j = 0; j < got; j++)
			if (out[j].lo == t.lo && out[j].hi == t.hi)
				dup = 1;
		if (!dup)
			out[got++] = t;
	}
	pthread_mutex_unlock(&s->ring_lock);
	return got;
}

/* FNV-1a: the service's share of the deterministic record stream. */
static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
	return h;
}

static retrace_trace_id fresh_trace_id(void)
{
	retrace_trace_id id;
	id.hi = shop_rand64();
	do
		id.lo = shop_rand64();
	while (id.lo == 0);
	return id;
}

/* ------------------------------------------------------- tracepoints ---- */

static const char hexdig[] = "0123456789abcdef";

static void record_line(struct rq *r, const char *data, size_t len)
{
	struct shop_buf *b = &r->w->rec;
	size_t i;
	if (shop_buf_reserve(b, 32 + 1 + 2 * len + 1) != 0) {
		atomic_fetch_add(&r->s->c.record_errors, 1);
		return;
	}
	memcpy(b->p + b->len, r->hex, 32);
	b->len += 32;
	b->p[b->len++] = ' ';
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)data[i];
		b->p[b->len++] = hexdig[ch >> 4];
		b->p[b->len++] = hexdig[ch & 15];
	}
	b->p[b->len++] = '\n';
}

/* One record: to the trace (with a timestamp if `ts`) and to the record log. */
static void emit(struct rq *r, const char *data, size_t len, int ts)
{
	if (r->s->trace) {
		if (ts)
			retrace_tracepoint_ts(data, len);
		else
			retrace_tracepoint(data, len);
	}
	if (r->s->record_fd >= 0)
		record_line(r, data, len);
	r->step++;
}

/* An event record: "svc=S op=OP trace=T step=N event=..." */
static void emitf(struct rq *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emitf(struct rq *r, const char *fmt, ...)
{
	char *buf = r->w->scratch;
	va_list ap;
	int n = snprintf(buf, SCRATCH, "svc=%s op=%s trace=%s step=%u ", r->s->svc, r->op,
			 r->hex, r->step);
	int m;
	va_start(ap, fmt);
	m = vsnprintf(buf + n, SCRATCH - (size_t)n, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	if ((size_t)(n + m) >= SCRATCH)
		m = SCRATCH - 1 - n;
	emit(r, buf, (size_t)(n + m), 1);
}

static uint64_t next_det(struct rq *r)
{
	r->stream += 0x9E3779B97F4A7C15ull;
	return shop_mix64(r->stream);
}

/* A work record of exactly `len` bytes (len >= header), deterministic content. */
static void emit_work(struct rq *r, size_t len, const char *kind)
{
	static const char pattern[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	char *buf = r->w->scratch;
	int n;
	size_t i, seed;
	if (len > SCRATCH)
		len = SCRATCH;
	n = snprintf(buf, SCRATCH, "svc=%s op=%s trace=%s step=%u event=%s len=%zu data=",
		     r->s->svc, r->op, r->hex, r->step, kind, len);
	if ((size_t)n > len)
		len = (size_t)n;
	seed = (size_t)(r->stream >> 7) + r->step;
	for (i = (size_t)n; i < len; i++)
		buf[i] = pattern[(i + seed) % (sizeof pattern - 1)];
	emit(r, buf, len, 0);
}

/* The service's own "work": 1..3 records, some > 1 KiB, and now and then a
 * burst of ~60 KiB so a trace spans several buffers. Sizes come from the trace
 * id and the service name only. */
static void do_work(struct rq *r)
{
	uint64_t h = next_det(r);
	unsigned n = 1 + (unsigned)(h % 3), i;
	for (i = 0; i < n; i++) {
		uint64_t x = next_det(r);
		size_t len = (x % 8 == 0) ? 1100 + (size_t)((x >> 8) % 2000)
					  : 60 + (size_t)((x >> 8) % 300);
		emit_work(r, len, "work");
	}
	if ((h >> 16) % 32 == 0) {
		for (i = 0; i < 20; i++) {
			uint64_t x = next_det(r);
			emit_work(r, 2048 + (size_t)((x >> 8) % 2048), "bulk");
		}
	}
}

/* --record: "<trace hex> <span id> <parent id> <kind> <status> <name>" per span
 * (ids in 16 hex digits, kind and status as in retrace/tracer.h). */
static void span_line(struct rq *r, uint64_t id, uint64_t parent, int kind, int status,
		      const char *name)
{
	struct shop_buf *b = &r->w->spans;
	size_t need = 32 + 2 * 17 + 8 + strlen(name) + 2;
	if (r->s->spans_fd < 0 || id == 0)
		return;
	if (shop_buf_reserve(b, need) != 0) {
		atomic_fetch_add(&r->s->c.record_errors, 1);
		return;
	}
	b->len += (size_t)snprintf(b->p + b->len, need, "%s %016llx %016llx %d %d %s\n", r->hex,
				   (unsigned long long)id, (unsigned long long)parent, kind,
				   status, name);
}

static void flush_buf(struct rq *r, int fd, struct shop_buf *b)
{
	size_t off = 0;
	while (off < b->len) {
		ssize_t n = write(fd, b->p + off, b->len - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			atomic_fetch_add(&r->s->c.record_errors, 1);
			break;
		}
		off += (size_t)n;
	}
	b->len = 0;
}

static void flush_records(struct rq *r)
{
	flush_buf(r, r->s->record_fd, &r->w->rec);
	if (r->s->spans_fd >= 0)
		flush_buf(r, r->s->spans_fd, &r->w->spans);
}

/* -------------------------------------------------------------- spans ---- */

static const char *const shop_users[] = {"alice", "bob", "carol", "dave", "erin", "frank"};

/* The request's SERVER span named after its route, its attributes and a first
 * log. Values come from the trace id (r->stream is not advanced: the records
 * stay the same as without spans). */
static void start_server_span(struct rq *r, const char *method, const char *uri,
			      int from_upstream)
{
	uint64_t h = shop_mix64(r->stream ^ 0x5eed5eed5eedull);
	unsigned items = 1 + (unsigned)(h % 5);
	const char *user = shop_users[(h >> 8) % (sizeof shop_users / sizeof shop_users[0])];
	char route[104];
	size_t n = strcspn(uri, "?");

	snprintf(route, sizeof route, "%.*s", (int)(n < 100 ? n : 100), uri);
	snprintf(r->span_name, sizeof r->span_name, "%s %s", method, route);
	r->server_span = retrace_span_start(r->span_name, RETRACE_SPAN_SERVER);
	retrace_attr_str("http.method", method);
	retrace_attr_str("http.route", route);
	retrace_attr_int("shop.items", items);
	retrace_attr_double("shop.amount", items * 9.99);
	retrace_attr_bool("shop.from_upstream", from_upstream);
	if (strcmp(r->s->svc, "frontend") == 0)
		retrace_log(RETRACE_LOG_INFO, "checkout for user %s with %d items", user, (int)items);
	else
		retrace_log(RETRACE_LOG_INFO, "%s serving %s for %s", r->s->svc, route,
			    from_upstream ? "an upstream service" : "a client");
}

/* End the SERVER span with the request's outcome. */
static void end_server_span(struct rq *r, unsigned status, int injected, int transport_err)
{
	int otel_status = status == 200 ? RETRACE_STATUS_OK : RETRACE_STATUS_ERROR;
	retrace_attr_int("http.status_code", status);
	if (injected)
		retrace_span_end_error(500, "injected failure");
	else if (status != 200)
		retrace_span_end_error(status, transport_err ? "downstream unreachable"
							    : "downstream failed");
	else
		retrace_span_end_ok();
	span_line(r, r->server_span, r->remote_parent, RETRACE_SPAN_SERVER, otel_status,
		  r->span_name);
}

/* --------------------------------------------------------- downstream ---- */

struct call_result {
	int transport_error; /* nng error, 0 if a response came back */
	unsigned status;
};

static void call_downstream(struct rq *r, nng_http_req *in, unsigned i, struct call_result *out)
{
	struct shop *s = r->s;
	struct downstream *d = &s->calls[i];
	nng_http_res *res = r->w->res;
	nng_http_req *req = NULL;
	char tp[64], ts[RETRACE_TRACESTATE_MAX + 1];
	const char *hv;
	unsigned k;
	int rv;

	memset(out, 0, sizeof *out);
	if ((rv = nng_http_req_alloc(&req, d->url)) != 0) {
		out->transport_error = rv;
		return;
	}
	nng_http_req_set_uri(req, d->path);
	if (s->trace) {
		if (retrace_serialize(tp, sizeof tp, ts, sizeof ts,
				      r->have_state ? r->in_state : NULL) == RETRACE_OK) {
			nng_http_req_set_header(req, "traceparent", tp);
			nng_http_req_set_header(req, "tracestate", ts);
		}
	} else {
		snprintf(tp, sizeof tp, "00-%s-%016llx-01", r->hex,
			 (unsigned long long)(shop_rand64() | 1));
		nng_http_req_set_header(req, "traceparent", tp);
		if (r->have_state)
			nng_http_req_set_header(req, "tracestate", r->in_state);
	}
	for (k = 0; k < N_FORWARDED; k++)
		if ((hv = nng_http_req_get_header(in, forwarded_headers[k])) != NULL)
			nng_http_req_set_header(req, forwarded_headers[k], hv);

	atomic_fetch_add(&s->c.calls, 1);
	rv = shop_conn_transact(&r->w->conns[i], req, res);
	nng_http_req_free(req);
	if (rv != 0) {
		out->transport_error = rv;
		atomic_fetch_add(&s->c.call_transport_errors, 1);
		return;
	}
	out->status = nng_http_res_get_status(res);
	if (out->status != 200)
		atomic_fetch_add(&s->c.call_failures, 1);
	/* Still inside the trace (and the CLIENT span): the callee's agent gets a
	 * breadcrumb here, and a trigger the callee fired marks our trace fired. */
	if (s->trace && (hv = nng_http_res_get_header(res, RETRACE_RESPONSE_HEADER)) != NULL)
		atomic_fetch_add(retrace_deserialize_response(hv) == RETRACE_OK
					 ? &s->c.trace_responses
					 : &s->c.bad_trace_responses,
				 1);
}

/* ---------------------------------------------------------- responses ---- */

/* trace_response: retrace_serialize_response's value, or NULL (untraced). */
static void respond(struct shop *s, nng_aio *aio, uint16_t status, const char *body,
		    const char *trace_hex, const char *trace_response)
{
	nng_http_res *res = NULL;
	if (nng_http_res_alloc(&res) != 0) {
		atomic_fetch_add(&s->c.lost_responses, 1);
		nng_aio_finish(aio, NNG_ENOMEM); /* nng closes the connection */
		return;
	}
	nng_http_res_set_status(res, status);
	if (status == 502)
		nng_http_res_set_reason(res, "Bad Gateway"); /* nng 1.5 has no phrase for it */
	nng_http_res_set_header(res, "Content-Type", "application/json");
	if (trace_response)
		nng_http_res_set_header(res, RETRACE_RESPONSE_HEADER, trace_response);
	nng_http_res_set_header(res, "x-shop-service", s->svc);
	if (trace_hex)
		nng_http_res_set_header(res, "x-shop-trace", trace_hex);
	if (nng_http_res_copy_data(res, body, strlen(body)) != 0) {
		nng_http_res_free(res);
		atomic_fetch_add(&s->c.lost_responses, 1);
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	nng_aio_set_output(aio, 0, res); /* the server frees it once written */
	nng_aio_finish(aio, 0);
}

/* ------------------------------------------------------------ request ---- */

/* 1. The trace: continue the caller's, or start one; the server span opens. */
static void begin_request(struct rq *r, nng_http_req *req, const char *method, const char *uri)
{
	struct shop *s = r->s;
	struct retrace_wire_context wc;
	const char *tp = nng_http_req_get_header(req, "traceparent");
	const char *ts = nng_http_req_get_header(req, "tracestate");
	int from_upstream = 0;

	memset(&wc, 0, sizeof wc);
	if (tp) {
		int rc = s->trace ? retrace_deserialize(tp, ts, &wc)
				  : retrace_parse_context(tp, ts, &wc);
		if (rc == RETRACE_OK) {
			r->id = wc.trace_id;
			from_upstream = 1;
			atomic_fetch_add(&s->c.upstream_traces, 1);
			if (ts && strlen(ts) <= RETRACE_TRACESTATE_MAX && !wc.state_rejected) {
				snprintf(r->in_state, sizeof r->in_state, "%s", ts);
				r->have_state = 1;
			}
		} else {
			atomic_fetch_add(&s->c.bad_traceparent, 1);
		}
	}
	if (!from_upstream) {
		r->id = fresh_trace_id();
		atomic_fetch_add(&s->c.fresh_traces, 1);
	}
	shop_trace_hex(r->id, r->hex);
	r->stream = shop_mix64(r->id.lo ^ shop_mix64(r->id.hi)) ^ shop_mix64(name_hash(s->svc));
	if (s->trace) {
		retrace_begin(r->id);
		r->remote_parent = from_upstream ? wc.parent_span_id : 0;
		start_server_span(r, method, uri, from_upstream);
	}
	ring_add(s, r->id);
	emitf(r, "event=recv from=%s parent=%016llx", from_upstream ? "upstream" : "client",
	      from_upstream ? (unsigned long long)wc.parent_span_id : 0ull);
}

/* 2. Injected slowness: asked for by a header, or at the configured rate. */
static void maybe_slow_down(struct rq *r, nng_http_req *req)
{
	struct shop *s = r->s;
	const char *hv = nng_http_req_get_header(req, "x-shop-slow");
	if (!(hv && names_me(hv, s->svc)) && !(s->slow_rate > 0 && shop_rand_unit() < s->slow_rate))
		return;
	atomic_fetch_add(&s->c.slow_injected, 1);
	emitf(r, "event=slow ms=%u", s->slow_ms);
	if (s->trace)
		retrace_log(RETRACE_LOG_WARN, "injected slowness: %s sleeps %u ms", s->svc, s->slow_ms);
	shop_sleep_ms(s->slow_ms);
}

/* The outcome of the downstream calls, for this request's own status. */
struct calls_outcome {
	int transport_err; /* a callee could not be reached */
	int down_fail;     /* a callee answered with an error */
};

/* 4. Downstream call i inside its CLIENT span (whose id is the parent the callee sees). */
static void call_one(struct rq *r, nng_http_req *req, unsigned i, struct calls_outcome *o)
{
	struct shop *s = r->s;
	struct call_result cr;
	uint64_t call_span = 0;
	char call_name[48];
	emitf(r, "event=call callee=%s path=%s", s->calls[i].name, s->calls[i].path);
	if (s->trace) {
		snprintf(call_name, sizeof call_name, "call %s", s->calls[i].name);
		call_span = retrace_span_start(call_name, RETRACE_SPAN_CLIENT);
		retrace_attr_str("peer.service", s->calls[i].name);
		retrace_attr_str("http.route", s->calls[i].path);
	}
	call_downstream(r, req, i, &cr);
	if (s->trace) {
		int ok = !cr.transport_error && cr.status == 200;
		if (cr.transport_error) {
			retrace_log(RETRACE_LOG_ERROR, "call to %s failed: %s", s->calls[i].name,
				    nng_strerror(cr.transport_error));
			retrace_span_end_error(cr.transport_error, "unreachable");
		} else {
			retrace_attr_int("http.status_code", cr.status);
			if (ok)
				retrace_span_end_ok();
			else
				retrace_span_end_error(cr.status, "downstream error");
		}
		span_line(r, call_span, r->server_span, RETRACE_SPAN_CLIENT,
			  ok ? RETRACE_STATUS_OK : RETRACE_STATUS_ERROR, call_name);
	}
	if (cr.transport_error) {
		o->transport_err = 1;
		emitf(r, "event=reply callee=%s status=0 error=unreachable", s->calls[i].name);
		return;
	}
	if (cr.status != 200)
		o->down_fail = 1;
	emitf(r, "event=reply callee=%s status=%u", s->calls[i].name, cr.status);
}

/* 5. Injected failure: this service fires the trigger (with lateral traces if
 * asked); callers only relay the error. Returns 1 if it failed. */
static int maybe_fail(struct rq *r, nng_http_req *req)
{
	struct shop *s = r->s;
	retrace_trace_id lat[SHOP_MAX_LATERAL_HEADER];
	const char *hv = nng_http_req_get_header(req, "x-shop-fail");
	unsigned lateral_want, delay_ms;
	size_t n_lat;
	if (!(hv && names_me(hv, s->svc)) && !(s->error_rate > 0 && shop_rand_unit() < s->error_rate))
		return 0;
	atomic_fetch_add(&s->c.injected_errors, 1);
	lateral_want = header_uint(req, "x-shop-lateral", SHOP_MAX_LATERAL_HEADER);
	delay_ms = header_uint(req, "x-shop-delay-trigger-ms", MAX_DELAY_MS);
	n_lat = ring_snapshot(s, r->id, lat, lateral_want);
	emitf(r, "event=fail trigger=%u laterals=%zu delay_ms=%u", SHOP_TRIGGER_ERROR, n_lat,
	      delay_ms);
	if (s->trace)
		retrace_log(RETRACE_LOG_ERROR, "injected failure in %s: trigger %u, %zu lateral traces",
			    s->svc, SHOP_TRIGGER_ERROR, n_lat);
	if (delay_ms)
		shop_sleep_ms(delay_ms);
	if (s->trace) {
		int rc = retrace_trigger(r->id, SHOP_TRIGGER_ERROR, lat, n_lat);
		atomic_fetch_add(rc == RETRACE_OK ? &s->c.triggers : &s->c.trigger_errors, 1);
	}
	return 1;
}

/* One request, start to finish; every numbered step is a function above. */
static void handle(struct worker *w, struct job *job)
{
	struct shop *s = w->s;
	nng_http_req *req = job->req;
	struct calls_outcome calls = { 0, 0 };
	struct rq r;
	const char *method = nng_http_req_get_method(req);
	const char *uri = nng_http_req_get_uri(req);
	unsigned i, status;
	int injected, have_response = 0;
	char body[160], trace_response[RETRACE_RESPONSE_TEXT_LEN];

	memset(&r, 0, sizeof r);
	r.s = s;
	r.w = w;
	atomic_fetch_add(&s->c.requests, 1);
	method = method ? method : "GET";
	uri = uri ? uri : "/";
	snprintf(r.op, sizeof r.op, "%s %.100s", method, uri);

	begin_request(&r, req, method, uri);
	maybe_slow_down(&r, req);
	/* 3. The service's own work. */
	do_work(&r);
	if (s->trace)
		retrace_log_text(RETRACE_LOG_DEBUG, "work records written");
	for (i = 0; i < s->n_calls; i++) /* in order, all of them even after a failure */
		call_one(&r, req, i, &calls);
	injected = maybe_fail(&r, req);
	status = injected ? 500 : calls.transport_err ? 502 : calls.down_fail ? 500 : 200;
	emitf(&r, "event=done status=%u", status);
	if (s->trace)
		end_server_span(&r, status, injected, calls.transport_err);

	/* 6. Latency autotrigger (fires trigger 101 above the p99), then finish. */
	if (s->trace)
		retrace_percentile_add(s->slow, r.id, shop_now_ns() - job->t_enqueued);
	if (s->record_fd >= 0)
		flush_records(&r);
	if (s->trace) {
		/* Last thing in the trace, so the fired flag includes this request's
		 * own triggers. */
		have_response = retrace_serialize_response(trace_response, sizeof trace_response) > 0;
		retrace_end();
	}

	atomic_fetch_add(status == 200 ? &s->c.ok : &s->c.failed, 1);
	snprintf(body, sizeof body, "{\"trace\":\"%s\",\"status\":%u,\"service\":\"%s\"}\n", r.hex,
		 status, s->svc);
	respond(s, job->aio, (uint16_t)status, body, r.hex, have_response ? trace_response : NULL);
}

/* ------------------------------------------------------------ workers ---- */

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct shop *s = w->s;
	int flushed = 1;

	for (;;) {
		struct job *job;
		pthread_mutex_lock(&s->lock);
		while (!s->head && !s->closing) {
			if (!flushed && s->trace) {
				/* Going idle: hand sealed buffers to the agent now
				 * (retrace_end only pushes a batch once it is ~1 ms old). */
				pthread_mutex_unlock(&s->lock);
				retrace_flush();
				flushed = 1;
				pthread_mutex_lock(&s->lock);
				continue;
			}
			pthread_cond_wait(&s->work, &s->lock);
		}
		if (!s->head) {
			pthread_mutex_unlock(&s->lock);
			break;
		}
		job = s->head;
		s->head = job->next;
		if (!s->head)
			s->tail = NULL;
		s->queued--;
		s->active++;
		pthread_mutex_unlock(&s->lock);

		handle(w, job);
		free(job);
		flushed = 0;

		pthread_mutex_lock(&s->lock);
		s->active--;
		if (!s->head && s->active == 0)
			pthread_cond_broadcast(&s->idle);
		pthread_mutex_unlock(&s->lock);
	}
	if (s->trace)
		retrace_flush();
	return NULL;
}

/* nng callback thread: never blocks, only queues. */
static void on_request(nng_aio *aio)
{
	nng_http_req *req = nng_aio_get_input(aio, 0);
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	struct shop *s = nng_http_handler_get_data(h);
	struct job *job;

	if (atomic_load(&s->draining)) {
		atomic_fetch_add(&s->c.rejected_draining, 1);
		respond(s, aio, 503, "{\"status\":503,\"error\":\"shutting down\"}\n", NULL, NULL);
		return;
	}
	job = malloc(sizeof *job);
	if (!job) {
		atomic_fetch_add(&s->c.lost_responses, 1);
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	job->next = NULL;
	job->aio = aio;
	job->req = req;
	job->t_enqueued = shop_now_ns();
	pthread_mutex_lock(&s->lock);
	if (s->tail)
		s->tail->next = job;
	else
		s->head = job;
	s->tail = job;
	s->queued++;
	pthread_cond_signal(&s->work);
	pthread_mutex_unlock(&s->lock);
}

#define C(x) (unsigned long long)atomic_load(&s->c.x)

static void format_stats(struct shop *s, char *out, size_t n)
{
	struct retrace_trigger_stats ps = {0, 0, 0};
	if (s->trace && s->slow)
		retrace_percentile_stats(s->slow, &ps);
	snprintf(out, n,
		 "{\"service\":\"%s\",\"agent\":%u,\"attached\":%d,\"requests\":%llu,\"ok\":%llu,"
		 "\"failed\":%llu,\"rejected_draining\":%llu,\"fresh_traces\":%llu,"
		 "\"upstream_traces\":%llu,\"bad_traceparent\":%llu,\"injected_errors\":%llu,"
		 "\"triggers\":%llu,\"trigger_errors\":%llu,\"slow_injected\":%llu,"
		 "\"slow_triggers\":%llu,\"slow_trigger_errors\":%llu,\"calls\":%llu,"
		 "\"call_transport_errors\":%llu,\"call_failures\":%llu,\"trace_responses\":%llu,"
		 "\"bad_trace_responses\":%llu,\"record_errors\":%llu,\"lost_responses\":%llu}\n",
		 s->svc, s->trace ? retrace_local_agent() : 0u, s->trace ? retrace_attached() : 0,
		 C(requests), C(ok), C(failed), C(rejected_draining), C(fresh_traces),
		 C(upstream_traces), C(bad_traceparent), C(injected_errors), C(triggers),
		 C(trigger_errors), C(slow_injected), (unsigned long long)ps.fired,
		 (unsigned long long)ps.fire_errors, C(calls), C(call_transport_errors),
		 C(call_failures), C(trace_responses), C(bad_trace_responses), C(record_errors),
		 C(lost_responses));
}

/* GET /stats, answered on the nng thread (no blocking work). */
static void on_stats(nng_aio *aio)
{
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	struct shop *s = nng_http_handler_get_data(h);
	char body[1536]; /* every counter at 20 digits fits */
	format_stats(s, body, sizeof body);
	respond(s, aio, 200, body, NULL, NULL);
}

/* --------------------------------------------------------------- main ---- */

static int start_server(struct shop *s, unsigned *bound)
{
	char url_text[128];
	nng_url *url = NULL;
	nng_http_handler *h = NULL, *hs = NULL;
	nng_sockaddr sa;
	int rv;

	snprintf(url_text, sizeof url_text, "http://%s:%u", s->host, s->port);
	if ((rv = nng_url_parse(&url, url_text)) != 0 ||
	    (rv = nng_http_server_hold(&s->server, url)) != 0) {
		fprintf(stderr, "retrace-shop serve: %s: %s\n", url_text, nng_strerror(rv));
		if (url)
			nng_url_free(url);
		return -1;
	}
	nng_url_free(url);
	if ((rv = nng_http_handler_alloc(&h, "/", on_request)) != 0 ||
	    (rv = nng_http_handler_set_tree(h)) != 0 ||
	    (rv = nng_http_handler_set_data(h, s, NULL)) != 0 ||
	    (rv = nng_http_server_add_handler(s->server, h)) != 0) {
		fprintf(stderr, "retrace-shop serve: handler: %s\n", nng_strerror(rv));
		if (h)
			nng_http_handler_free(h);
		return -1;
	}
	if ((rv = nng_http_handler_alloc(&hs, "/stats", on_stats)) != 0 ||
	    (rv = nng_http_handler_set_data(hs, s, NULL)) != 0 ||
	    (rv = nng_http_server_add_handler(s->server, hs)) != 0) {
		fprintf(stderr, "retrace-shop serve: stats handler: %s\n", nng_strerror(rv));
		if (hs)
			nng_http_handler_free(hs);
		return -1;
	}
	if ((rv = nng_http_server_start(s->server)) != 0) {
		fprintf(stderr, "retrace-shop serve: cannot listen on %s: %s\n", url_text,
			nng_strerror(rv));
		return -1;
	}
	*bound = s->port;
	if (nng_http_server_get_addr(s->server, &sa) == 0 && sa.s_family == NNG_AF_INET)
		*bound = ntohs(sa.s_in.sa_port);
	return 0;
}

static int open_record(struct shop *s)
{
	char path[4096];
	if (mkdir(s->record_dir, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "retrace-shop serve: --record %s: %s\n", s->record_dir,
			strerror(errno));
		return -1;
	}
	snprintf(path, sizeof path, "%s/%s.records", s->record_dir, s->svc);
	s->record_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (s->record_fd < 0) {
		fprintf(stderr, "retrace-shop serve: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (s->trace) {
		snprintf(path, sizeof path, "%s/%s.spans", s->record_dir, s->svc);
		s->spans_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (s->spans_fd < 0) {
			fprintf(stderr, "retrace-shop serve: %s: %s\n", path, strerror(errno));
			return -1;
		}
	}
	return 0;
}

static void write_ready_file(const char *path, unsigned port)
{
	char tmp[4096];
	FILE *f;
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%u\n", port) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
		fprintf(stderr, "retrace-shop serve: --ready-file %s: %s\n", path, strerror(errno));
}

/* libretrace and the latency autotrigger; tracing goes on into the discard
 * buffer until the pool appears if the agent is not up yet. 0, or -1. */
static int init_tracing(struct shop *s)
{
	struct retrace_percentile_config pc = {
		.trigger_id = SHOP_TRIGGER_SLOW,
		.percentile = 99.0,
	};
	int rc = retrace_init(NULL);
	retrace_set_service_name(s->svc); /* the resource of every slice */
	retrace_resource_int("shop.threads", s->threads);
	/* shown and searched by name (`retrace traces --trigger shop-error`);
	 * trigger 101 gets the percentile's own name, "percentile-p99" */
	retrace_trigger_name(SHOP_TRIGGER_ERROR, "shop-error");
	if (rc != RETRACE_OK)
		fprintf(stderr, "retrace-shop serve %s: not attached (%s); tracing into the "
			"discard buffer until the pool appears\n", s->svc, retrace_strerror(rc));
	s->slow = retrace_percentile_create(&pc);
	if (!s->slow) {
		fprintf(stderr, "retrace-shop serve: cannot create the percentile trigger\n");
		return -1;
	}
	return 0;
}

/* An HTTP client per callee and the worker threads, each with a connection to
 * every callee. 0, or -1 (with a line on stderr; *out holds what was started). */
static int start_workers(struct shop *s, struct worker **out)
{
	struct worker *workers;
	unsigned i, k;
	int rc;
	for (i = 0; i < s->n_calls; i++) {
		if ((rc = nng_http_client_alloc(&s->calls[i].client, s->calls[i].url)) != 0) {
			fprintf(stderr, "retrace-shop serve: client for %s: %s\n",
				s->calls[i].url_text, nng_strerror(rc));
			return -1;
		}
	}
	*out = workers = calloc(s->threads, sizeof *workers);
	if (!workers) {
		fprintf(stderr, "retrace-shop serve: out of memory\n");
		return -1;
	}
	for (i = 0; i < s->threads; i++) {
		workers[i].s = s;
		for (k = 0; k < s->n_calls; k++)
			if (shop_conn_init(&workers[i].conns[k], s->calls[k].client, s->timeout_ms)) {
				fprintf(stderr, "retrace-shop serve: out of memory\n");
				return -1;
			}
		if (nng_http_res_alloc(&workers[i].res) != 0 ||
		    pthread_create(&workers[i].th, NULL, worker_main, &workers[i]) != 0) {
			fprintf(stderr, "retrace-shop serve: cannot start worker threads\n");
			return -1;
		}
	}
	return 0;
}

static void announce(struct shop *s, unsigned bound)
{
	unsigned i;
	fprintf(stderr, "retrace-shop serve %s: listening on http://%s:%u (pool %s, agent %u, "
		"%u threads", s->svc, s->host, bound,
		getenv("RETRACE_POOL") ? getenv("RETRACE_POOL") : "/retrace",
		s->trace ? retrace_local_agent() : 0u, s->threads);
	for (i = 0; i < s->n_calls; i++)
		fprintf(stderr, "%s%s=%s%s", i ? "," : ", calls ", s->calls[i].name,
			s->calls[i].url_text, s->calls[i].path);
	fprintf(stderr, "%s)\n", s->trace ? "" : ", tracing off");
	if (s->ready_file)
		write_ready_file(s->ready_file, bound);
}

/* Graceful stop: refuse new work, let queued and running requests finish. */
static void drain_requests(struct shop *s)
{
	uint64_t deadline = shop_now_ns() + DRAIN_WAIT_NS;
	atomic_store(&s->draining, 1);
	pthread_mutex_lock(&s->lock);
	while ((s->head || s->active) && shop_now_ns() < deadline) {
		pthread_mutex_unlock(&s->lock);
		shop_sleep_ms(5);
		pthread_mutex_lock(&s->lock);
	}
	if (s->head || s->active)
		fprintf(stderr, "retrace-shop serve %s: %u requests still running after 30 s\n",
			s->svc, s->queued + s->active);
	pthread_mutex_unlock(&s->lock);
	nng_http_server_stop(s->server);
	nng_http_server_release(s->server);
}

/* Join whatever workers started (NULL: none) and free the callees' clients. */
static void stop_workers(struct shop *s, struct worker *workers)
{
	unsigned i, k;
	pthread_mutex_lock(&s->lock);
	s->closing = 1;
	pthread_cond_broadcast(&s->work);
	pthread_mutex_unlock(&s->lock);
	for (i = 0; workers && i < s->threads; i++) {
		if (workers[i].res == NULL)
			continue;
		pthread_join(workers[i].th, NULL);
		for (k = 0; k < s->n_calls; k++)
			shop_conn_fini(&workers[i].conns[k]);
		nng_http_res_free(workers[i].res);
		shop_buf_free(&workers[i].rec);
		shop_buf_free(&workers[i].spans);
	}
	free(workers);
	for (i = 0; i < s->n_calls; i++) {
		nng_http_client_free(s->calls[i].client);
		nng_url_free(s->calls[i].url);
	}
}

int shop_serve_main(int argc, char **argv)
{
	static struct shop shop; /* large; one per process */
	struct shop *s = &shop;
	struct worker *workers = NULL;
	sigset_t sigs;
	unsigned bound = 0;
	int help = 0, rc, sig = 0, exit_code = 0;
	char stats[1536];

	memset(s, 0, sizeof *s);
	snprintf(s->host, sizeof s->host, "127.0.0.1");
	s->slow_ms = 50;
	s->threads = 8;
	s->timeout_ms = SHOP_DEFAULT_TIMEOUT_MS;
	s->trace = 1;
	s->record_fd = -1;
	s->spans_fd = -1;
	if ((rc = parse_args(s, argc, argv, &help)) != 0)
		return rc;
	if (help) {
		serve_usage(stdout);
		return 0;
	}

	/* Signals go to sigwait below; every thread (nng's too) inherits the mask. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (s->trace && init_tracing(s) != 0)
		return 1;
	if (s->record_dir && open_record(s) != 0)
		return 1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->work, NULL);
	pthread_cond_init(&s->idle, NULL);
	pthread_mutex_init(&s->ring_lock, NULL);
	if (start_workers(s, &workers) != 0)
		return 1;

	if (start_server(s, &bound) == 0) {
		announce(s, bound);
		while (sigwait(&sigs, &sig) != 0)
			;
		drain_requests(s);
	} else {
		exit_code = 1;
	}
	stop_workers(s, workers);
	format_stats(s, stats, sizeof stats);
	fprintf(stderr, "retrace-shop serve %s: stopped%s%s: %s", s->svc, sig ? " on " : "",
		sig ? strsignal(sig) : "", stats);
	if (s->trace) {
		retrace_percentile_destroy(s->slow);
		retrace_shutdown();
	}
	if (s->record_fd >= 0)
		close(s->record_fd);
	if (s->spans_fd >= 0)
		close(s->spans_fd);
	return exit_code;
}
