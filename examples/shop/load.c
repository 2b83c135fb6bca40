/*
 * examples/shop/load.c — `retrace-shop load`: the load driver.
 *
 * How it works: C threads, each with one persistent keep-alive connection to
 * the target, take request numbers from a shared counter until N are issued.
 * With --rate R request i is not sent before start + i/R (an open-loop
 * schedule shared by all threads). Each response's JSON body names the trace
 * id ("trace":"<32 hex>"), printed with --print-traces. A progress thread
 * redraws one stderr line; the summary goes to stdout.
 */
#include "shop.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_HEADERS 32
#define MAX_CONCURRENCY 1024

struct load {
	nng_url *url;
	char target[512];
	char path[512];
	uint64_t requests;
	unsigned concurrency;
	double rate;
	int progress, print_traces;
	int timeout_ms;
	char hname[MAX_HEADERS][128];
	char hvalue[MAX_HEADERS][1024];
	unsigned n_headers;

	nng_http_client *client;
	uint64_t t0;
	atomic_ullong next, done, ok, errors, transport_errors, no_trace;
	atomic_int finished;
	pthread_mutex_t out_lock;
	pthread_mutex_t prog_lock;
	pthread_cond_t prog_cond;
};

static void load_usage(FILE *out)
{
	fprintf(out,
		"usage: retrace-shop load --target URL --requests N [options]\n"
		"Issue N GET requests (default path /checkout) to a shop frontend.\n"
		"\n"
		"  -u, --target URL         http://host:port[/path] of the frontend\n"
		"  -n, --requests N         requests to issue (default 100)\n"
		"  -c, --concurrency C      concurrent connections, one thread each (default 1, max %d)\n"
		"  -r, --rate R             at most R requests per second overall (default: unlimited)\n"
		"  -H, --header 'NAME: VALUE'  add a request header, e.g. 'x-shop-fail: inventory'\n"
		"                           (repeatable, at most %d)\n"
		"  -p, --progress           a single updating progress line on stderr\n"
		"  -T, --print-traces       one stdout line per request: \"<trace hex> <status>\"\n"
		"                           (32 zeros and status 0 when no response came back)\n"
		"      --timeout-ms MS      per-request timeout (default %d)\n"
		"  -h, --help               this text\n"
		"\n"
		"At the end one line on stdout: requests=N ok=N errors=N elapsed_s=X rps=Y\n"
		"(errors = responses other than 200 plus requests without a response).\n",
		MAX_CONCURRENCY, MAX_HEADERS, SHOP_DEFAULT_TIMEOUT_MS);
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "retrace-shop load: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see retrace-shop load --help)\n");
	return SHOP_EXIT_USAGE;
}

static int token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int parse_header(struct load *l, const char *arg)
{
	const char *colon = strchr(arg, ':'), *v;
	size_t n, i, vn;
	if (l->n_headers >= MAX_HEADERS)
		return usage_error("too many --header flags (at most 32)%s", "");
	if (!colon)
		return usage_error("--header wants 'NAME: VALUE', got '%s'", arg);
	n = (size_t)(colon - arg);
	while (n && arg[n - 1] == ' ')
		n--;
	if (n == 0 || n >= sizeof l->hname[0])
		return usage_error("--header '%s': bad header name", arg);
	for (i = 0; i < n; i++)
		if (!token_char(arg[i]))
			return usage_error("--header '%s': bad character in the name", arg);
	v = colon + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	vn = strlen(v);
	while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
		vn--;
	if (vn >= sizeof l->hvalue[0])
		return usage_error("--header '%s': value too long", arg);
	for (i = 0; i < vn; i++)
		if ((unsigned char)v[i] < 0x20 && v[i] != '\t')
			return usage_error("--header '%s': control character in the value", arg);
	memcpy(l->hname[l->n_headers], arg, n);
	l->hname[l->n_headers][n] = '\0';
	memcpy(l->hvalue[l->n_headers], v, vn);
	l->hvalue[l->n_headers][vn] = '\0';
	l->n_headers++;
	return 0;
}

static int parse_args(struct load *l, int argc, char **argv, int *help)
{
	enum { OPT_TIMEOUT = 1000 };
	static const struct option opts[] = {
		{"target", required_argument, NULL, 'u'},
		{"requests", required_argument, NULL, 'n'},
		{"concurrency", required_argument, NULL, 'c'},
		{"rate", required_argument, NULL, 'r'},
		{"header", required_argument, NULL, 'H'},
		{"progress", no_argument, NULL, 'p'},
		{"print-traces", no_argument, NULL, 'T'},
		{"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c, rc;
	uint64_t v;
	char err[600];

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":u:n:c:r:H:pTh", opts, NULL)) != -1) {
		switch (c) {
		case 'u':
			if (strlen(optarg) >= sizeof l->target)
				return usage_error("--target '%s': too long", optarg);
			snprintf(l->target, sizeof l->target, "%s", optarg);
			break;
		case 'n':
			if (shop_parse_u64(optarg, 0, 1000000000000ull, &v))
				return usage_error("--requests '%s': want a count >= 0", optarg);
			l->requests = v;
			break;
		case 'c':
			if (shop_parse_u64(optarg, 1, MAX_CONCURRENCY, &v))
				return usage_error("--concurrency '%s': want 1..1024", optarg);
			l->concurrency = (unsigned)v;
			break;
		case 'r':
			if (shop_parse_double(optarg, 1e-6, 1e9, &l->rate))
				return usage_error("--rate '%s': want requests per second > 0", optarg);
			break;
		case 'H':
			if ((rc = parse_header(l, optarg)) != 0)
				return rc;
			break;
		case 'p':
			l->progress = 1;
			break;
		case 'T':
			l->print_traces = 1;
			break;
		case OPT_TIMEOUT:
			if (shop_parse_u64(optarg, 1, 3600000, &v))
				return usage_error("--timeout-ms '%s': want 1..3600000", optarg);
			l->timeout_ms = (int)v;
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
	if (!l->target[0])
		return usage_error("--target URL is required%s", "");
	if (shop_check_http_url(l->target, &l->url, err, sizeof err) != 0)
		return usage_error("--target: %s", err);
	if (l->url->u_requri[0] && strcmp(l->url->u_requri, "/") != 0)
		snprintf(l->path, sizeof l->path, "%s", l->url->u_requri);
	else
		snprintf(l->path, sizeof l->path, "/checkout");
	return 0;
}

/* The trace id from a body like {"trace":"<32 hex>",...}. */
static int body_trace(nng_http_res *res, char out[33])
{
	void *data;
	size_t len;
	const char *key = "\"trace\":\"", *p;
	char tmp[512];
	retrace_trace_id id;
	nng_http_res_get_data(res, &data, &len);
	if (!data || len == 0)
		return -1;
	if (len >= sizeof tmp)
		len = sizeof tmp - 1;
	memcpy(tmp, data, len);
	tmp[len] = '\0';
	if (!(p = strstr(tmp, key)))
		return -1;
	p += strlen(key);
	if (strlen(p) < 33 || p[32] != '"' || shop_parse_trace_hex(p, &id) != 0)
		return -1;
	memcpy(out, p, 32);
	out[32] = '\0';
	return 0;
}

static void sleep_until(uint64_t t)
{
	uint64_t now = shop_now_ns();
	if (t > now) {
		struct timespec ts = {.tv_sec = (time_t)((t - now) / 1000000000ull),
				      .tv_nsec = (long)((t - now) % 1000000000ull)};
		nanosleep(&ts, NULL);
	}
}

static void *driver(void *arg)
{
	struct load *l = arg;
	struct shop_conn conn;
	nng_http_res *res = NULL;

	if (shop_conn_init(&conn, l->client, l->timeout_ms) != 0 || nng_http_res_alloc(&res) != 0) {
		fprintf(stderr, "retrace-shop load: out of memory\n");
		exit(1);
	}
	for (;;) {
		uint64_t i = atomic_fetch_add(&l->next, 1);
		nng_http_req *req = NULL;
		char trace[33] = "00000000000000000000000000000000";
		unsigned status = 0, k;
		int rv;

		if (i >= l->requests)
			break;
		if (l->rate > 0)
			sleep_until(l->t0 + (uint64_t)((double)i * 1e9 / l->rate));
		if ((rv = nng_http_req_alloc(&req, l->url)) == 0) {
			nng_http_req_set_uri(req, l->path);
			for (k = 0; k < l->n_headers; k++)
				nng_http_req_add_header(req, l->hname[k], l->hvalue[k]);
			rv = shop_conn_transact(&conn, req, res);
			nng_http_req_free(req);
		}
		if (rv == 0) {
			status = nng_http_res_get_status(res);
			if (body_trace(res, trace) != 0)
				atomic_fetch_add(&l->no_trace, 1);
		} else {
			atomic_fetch_add(&l->transport_errors, 1);
		}
		atomic_fetch_add(status == 200 ? &l->ok : &l->errors, 1);
		atomic_fetch_add(&l->done, 1);
		if (l->print_traces) {
			pthread_mutex_lock(&l->out_lock);
			printf("%s %u\n", trace, status);
			pthread_mutex_unlock(&l->out_lock);
		}
	}
	nng_http_res_free(res);
	shop_conn_fini(&conn);
	return NULL;
}

static void draw_progress(struct load *l, int last)
{
	double el = (double)(shop_now_ns() - l->t0) / 1e9;
	unsigned long long done = atomic_load(&l->done);
	fprintf(stderr, "\rretrace-shop load: %llu/%llu done, %llu errors, %.0f req/s   %s", done,
		(unsigned long long)l->requests, (unsigned long long)atomic_load(&l->errors),
		el > 0 ? (double)done / el : 0.0, last ? "\n" : "");
	fflush(stderr);
}

static void *progress_main(void *arg)
{
	struct load *l = arg;
	pthread_mutex_lock(&l->prog_lock);
	while (!atomic_load(&l->finished)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&l->prog_cond, &l->prog_lock, &ts);
		if (!atomic_load(&l->finished))
			draw_progress(l, 0);
	}
	pthread_mutex_unlock(&l->prog_lock);
	return NULL;
}

int shop_load_main(int argc, char **argv)
{
	static struct load load;
	struct load *l = &load;
	pthread_t *th, prog;
	unsigned i, n_threads;
	int help = 0, rc;
	double el;

	memset(l, 0, sizeof *l);
	l->requests = 100;
	l->concurrency = 1;
	l->timeout_ms = SHOP_DEFAULT_TIMEOUT_MS;
	if ((rc = parse_args(l, argc, argv, &help)) != 0)
		return rc;
	if (help) {
		load_usage(stdout);
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&l->out_lock, NULL);
	pthread_mutex_init(&l->prog_lock, NULL);
	pthread_cond_init(&l->prog_cond, NULL);
	if ((rc = nng_http_client_alloc(&l->client, l->url)) != 0) {
		fprintf(stderr, "retrace-shop load: %s: %s\n", l->target, nng_strerror(rc));
		return 1;
	}
	n_threads = l->concurrency;
	if ((uint64_t)n_threads > l->requests)
		n_threads = (unsigned)(l->requests ? l->requests : 1);
	th = calloc(n_threads, sizeof *th);
	if (!th) {
		fprintf(stderr, "retrace-shop load: out of memory\n");
		return 1;
	}
	l->t0 = shop_now_ns();
	if (l->progress && pthread_create(&prog, NULL, progress_main, l) != 0)
		l->progress = 0;
	for (i = 0; i < n_threads; i++)
		if (pthread_create(&th[i], NULL, driver, l) != 0) {
			fprintf(stderr, "retrace-shop load: cannot start thread %u\n", i);
			return 1;
		}
	for (i = 0; i < n_threads; i++)
		pthread_join(th[i], NULL);
	el = (double)(shop_now_ns() - l->t0) / 1e9;
	if (l->progress) {
		pthread_mutex_lock(&l->prog_lock);
		atomic_store(&l->finished, 1);
		pthread_cond_signal(&l->prog_cond);
		pthread_mutex_unlock(&l->prog_lock);
		pthread_join(prog, NULL);
		draw_progress(l, 1);
	}
	if (atomic_load(&l->transport_errors) || atomic_load(&l->no_trace))
		fprintf(stderr, "retrace-shop load: %llu requests got no response, %llu responses "
			"named no trace\n", (unsigned long long)atomic_load(&l->transport_errors),
			(unsigned long long)atomic_load(&l->no_trace));
	printf("requests=%llu ok=%llu errors=%llu elapsed_s=%.3f rps=%.1f\n",
	       (unsigned long long)atomic_load(&l->done), (unsigned long long)atomic_load(&l->ok),
	       (unsigned long long)atomic_load(&l->errors), el,
	       el > 0 ? (double)atomic_load(&l->done) / el : 0.0);
	fflush(stdout);
	free(th);
	nng_http_client_free(l->client);
	nng_url_free(l->url);
	return 0;
}
