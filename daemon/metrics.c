/*
 * daemon/metrics.c — /metrics over nng's HTTP server (see metrics.h).
 *
 * The handler runs on an nng worker thread and must not read the daemon's
 * state. It takes a ticket under `mu`: the next rendering to start (or the one
 * after, if a rendering is under way, since that one began before the scrape
 * arrived), raises `wanted` and waits on `cv`. The loop thread sees `wanted`,
 * clears it, renders into its own scratch buffer (doubling it while the
 * rendering is cut), then under `mu` swaps the scratch with the published
 * buffer, counts the rendering done and wakes the handlers; each copies the
 * published bytes into its response. The daemons' loops never sleep longer
 * than a few milliseconds, so nobody signals them: a scrape costs one nng
 * worker thread for that long. Stopping wakes every handler with a 503 and
 * waits until none is inside before the memory goes.
 *
 * The same object serves any rendering of the loop's figures at one path
 * (rt_metrics_start_as: the coordinator's /api/status is JSON), and other
 * handlers can share its listener (rt_metrics_add_handler: the web UI).
 */
#include "metrics.h"

#include <stdatomic.h>
#include "tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define FIRST_CAP (64u << 10)

struct rt_metrics {
	nng_http_server *server;
	char url[300];
	char content_type[96];  /* of a 200 (the rendering) */

	pthread_mutex_t mu;
	pthread_cond_t cv;
	atomic_int wanted;      /* a scrape waits (set under mu; the loop polls it without) */
	unsigned long started;  /* renderings begun (under mu) */
	unsigned long done;     /* renderings published (under mu) */
	int stopping;           /* under mu */
	int inside;             /* handlers inside (under mu) */
	char *pub;              /* the last rendering (under mu) */
	size_t pub_len, pub_cap;

	char *scratch;          /* the loop thread's */
	size_t scratch_cap;
};

/* ------------------------------------------------------------- URLs ---- */

/* The host:port part of an http:// URL, its port, its path. -1 with err. */
static int split_url(const char *url, const char *flag, char *hostport, size_t hplen,
		     unsigned *port, const char **path, char *err, size_t errlen)
{
	const char *a, *slash, *colon;
	size_t n;
	char *end;
	unsigned long p;
	if (strncmp(url, "http://", 7) != 0) {
		snprintf(err, errlen, "%s %s: give an http:// URL with a port, e.g. "
			 "http://127.0.0.1:9464 (https is not served; the endpoint is read-only)",
			 flag, url);
		return -1;
	}
	a = url + 7;
	slash = strchr(a, '/');
	n = slash ? (size_t)(slash - a) : strlen(a);
	if (n == 0 || n >= hplen) {
		snprintf(err, errlen, "%s %s: no host (e.g. http://127.0.0.1:9464)", flag, url);
		return -1;
	}
	memcpy(hostport, a, n);
	hostport[n] = 0;
	colon = strrchr(hostport, ':');
	if (!colon || (strchr(hostport, ']') && colon < strchr(hostport, ']')) || colon == hostport) {
		snprintf(err, errlen, "%s %s: give HOST:PORT (e.g. http://127.0.0.1:9464)", flag, url);
		return -1;
	}
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || p > 65535) {
		snprintf(err, errlen, "%s %s: the port must be a number 0..65535", flag, url);
		return -1;
	}
	*port = (unsigned)p;
	*path = slash && strcmp(slash, "/") != 0 ? slash : "/metrics";
	if (strpbrk(*path, "?# ")) {
		snprintf(err, errlen, "%s %s: the path may not hold a query, fragment or space", flag,
			 url);
		return -1;
	}
	return 0;
}

int rt_metrics_check_url(const char *url, const char *flag, int insecure, char *err,
			 size_t errlen)
{
	char hostport[256], tcp[300];
	unsigned port;
	const char *path;
	if (split_url(url, flag, hostport, sizeof hostport, &port, &path, err, errlen) != 0)
		return -1;
	snprintf(tcp, sizeof tcp, "tcp://%s", hostport);
	if (!insecure && !rt_url_is_local(tcp)) {
		snprintf(err, errlen, "%s %s is not a loopback address: the metrics would be served "
			 "to the network without TLS. Use 127.0.0.1 (and let Prometheus scrape "
			 "through a local proxy) or, on a network you trust, give --insecure",
			 flag, url);
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------- handler ---- */

static void reply(nng_aio *aio, const char *type, uint16_t status, const char *body, size_t len)
{
	nng_http_res *res;
	int rv;
	if ((rv = nng_http_res_alloc(&res)) != 0) {
		nng_aio_finish(aio, rv);
		return;
	}
	nng_http_res_set_status(res, status);
	nng_http_res_set_header(res, "Content-Type", status == 200 ? type : "text/plain");
	if ((rv = nng_http_res_copy_data(res, body, len)) != 0) {
		nng_http_res_free(res);
		nng_aio_finish(aio, rv);
		return;
	}
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

static void deadline(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static void on_scrape(nng_aio *aio)
{
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	struct rt_metrics *m = nng_http_handler_get_data(h);
	static const char late[] = "the daemon did not render its metrics in time\n";
	static const char gone[] = "the daemon is stopping\n";
	struct timespec until;
	unsigned long ticket;
	char *copy = NULL;
	size_t len = 0;
	int rc = 0;

	pthread_mutex_lock(&m->mu);
	if (m->stopping) {
		pthread_mutex_unlock(&m->mu);
		reply(aio, m->content_type, 503, gone, sizeof gone - 1);
		return;
	}
	m->inside++;
	/* The rendering that starts after now: one under way began too early. */
	ticket = m->started + 1;
	/* Pairs with the acquire in rt_metrics_wanted. Only a hint: the ticket and
	 * the rendering are read under mu, which orders them by itself. */
	atomic_store_explicit(&m->wanted, 1, memory_order_release);
	deadline(&until, RT_METRICS_WAIT_MS);
	while (m->done < ticket && !m->stopping && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&m->cv, &m->mu, &until);
	if (m->done >= ticket && (copy = malloc(m->pub_len ? m->pub_len : 1)) != NULL) {
		memcpy(copy, m->pub, m->pub_len);
		len = m->pub_len;
	}
	pthread_mutex_unlock(&m->mu);

	if (copy)
		reply(aio, m->content_type, 200, copy, len);
	else if (m->done >= ticket)
		nng_aio_finish(aio, NNG_ENOMEM);
	else
		reply(aio, m->content_type, 503, m->stopping ? gone : late, m->stopping ? sizeof gone - 1 : sizeof late - 1);
	free(copy);
	pthread_mutex_lock(&m->mu);
	if (--m->inside == 0)
		pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
}

/* ------------------------------------------------------- loop side ---- */

int rt_metrics_wanted(struct rt_metrics *m)
{
	return m && atomic_load_explicit(&m->wanted, memory_order_acquire);
}

/* Render into scratch, doubling it while cut; the length, or (size_t)-1. */
static size_t render_all(struct rt_metrics *m, rt_metrics_render render, void *arg)
{
	for (;;) {
		int cut = 0;
		size_t n;
		if (!m->scratch) {
			size_t cap = m->scratch_cap ? m->scratch_cap : FIRST_CAP;
			if (!(m->scratch = malloc(cap)))
				return (size_t)-1;
			m->scratch_cap = cap;
		}
		n = render(arg, m->scratch, m->scratch_cap, &cut);
		if (!cut || m->scratch_cap >= RT_METRICS_MAX_BYTES)
			return n;
		free(m->scratch);
		m->scratch = NULL;
		m->scratch_cap *= 2;
	}
}

void rt_metrics_serve(struct rt_metrics *m, rt_metrics_render render, void *arg)
{
	size_t n;
	if (!rt_metrics_wanted(m))
		return;
	pthread_mutex_lock(&m->mu);
	/* Under mu, as every store of it; a handler that raises it again after
	 * this waits for the next rendering (its ticket is started + 1). */
	atomic_store_explicit(&m->wanted, 0, memory_order_relaxed);
	m->started++;
	pthread_mutex_unlock(&m->mu);

	n = render_all(m, render, arg);

	pthread_mutex_lock(&m->mu);
	if (n == (size_t)-1) {
		static const char oom[] = "# retrace: out of memory while rendering the metrics\n";
		if (m->pub_cap >= sizeof oom) {
			memcpy(m->pub, oom, sizeof oom - 1);
			m->pub_len = sizeof oom - 1;
		} else {
			m->pub_len = 0;
		}
	} else {
		char *t = m->pub;
		size_t tc = m->pub_cap;
		m->pub = m->scratch;
		m->pub_cap = m->scratch_cap;
		m->pub_len = n;
		m->scratch = t;
		m->scratch_cap = tc ? tc : m->pub_cap;
	}
	m->done = m->started;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
}

/* -------------------------------------------------- start and stop ---- */

static void free_metrics(struct rt_metrics *m)
{
	pthread_cond_destroy(&m->cv);
	pthread_mutex_destroy(&m->mu);
	free(m->pub);
	free(m->scratch);
	free(m);
}

/* The address actually bound (port 0 resolved) into m->url. */
static void bound_url(struct rt_metrics *m, const char *hostport, const char *path)
{
	nng_sockaddr sa;
	if (nng_http_server_get_addr(m->server, &sa) == 0 && sa.s_family == NNG_AF_INET) {
		const uint8_t *ip = (const uint8_t *)&sa.s_in.sa_addr;
		unsigned port = ((sa.s_in.sa_port & 0xff) << 8) | (sa.s_in.sa_port >> 8);
		snprintf(m->url, sizeof m->url, "http://%u.%u.%u.%u:%u%s", ip[0], ip[1], ip[2],
			 ip[3], port, path);
		return;
	}
	snprintf(m->url, sizeof m->url, "http://%s%s", hostport, path);
}

struct rt_metrics *rt_metrics_start(const char *url, const char *flag, int insecure, char *err,
				    size_t errlen)
{
	return rt_metrics_start_as(url, flag, insecure, CONTENT_TYPE, err, errlen);
}

int rt_metrics_add_handler(struct rt_metrics *m, void *nng_http_handler)
{
	return nng_http_server_add_handler(m->server, nng_http_handler);
}

struct rt_metrics *rt_metrics_start_as(const char *url, const char *flag, int insecure,
				       const char *content_type, char *err, size_t errlen)
{
	char hostport[256], listen[300];
	unsigned port;
	const char *path;
	nng_url *u = NULL;
	nng_http_handler *h = NULL;
	struct rt_metrics *m;
	pthread_condattr_t ca;
	int rv;

	if (rt_metrics_check_url(url, flag, insecure, err, errlen) != 0 ||
	    split_url(url, flag, hostport, sizeof hostport, &port, &path, err, errlen) != 0)
		return NULL;
	if (!(m = calloc(1, sizeof *m))) {
		snprintf(err, errlen, "%s: out of memory", flag);
		return NULL;
	}
	snprintf(m->content_type, sizeof m->content_type, "%s", content_type);
	pthread_mutex_init(&m->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->cv, &ca);
	pthread_condattr_destroy(&ca);
	snprintf(listen, sizeof listen, "http://%s", hostport);
	if ((rv = nng_url_parse(&u, listen)) != 0 || (rv = nng_http_server_hold(&m->server, u)) != 0) {
		snprintf(err, errlen, "%s %s: %s", flag, url, nng_strerror(rv));
		goto fail;
	}
	if ((rv = nng_http_handler_alloc(&h, path, on_scrape)) != 0 ||
	    (rv = nng_http_handler_set_method(h, "GET")) != 0 ||
	    (rv = nng_http_handler_set_data(h, m, NULL)) != 0 ||
	    (rv = nng_http_server_add_handler(m->server, h)) != 0) {
		snprintf(err, errlen, "%s %s: cannot serve %s: %s", flag, url, path, nng_strerror(rv));
		if (h)
			nng_http_handler_free(h);
		goto fail;
	}
	if ((rv = nng_http_server_start(m->server)) != 0) {
		snprintf(err, errlen, "%s %s: cannot listen there: %s%s", flag, url, nng_strerror(rv),
			 rv == NNG_EADDRINUSE ? " (another process has the port: pick another one)" : "");
		goto fail;
	}
	bound_url(m, hostport, path);
	nng_url_free(u);
	return m;
fail:
	if (m->server)
		nng_http_server_release(m->server);
	if (u)
		nng_url_free(u);
	free_metrics(m);
	return NULL;
}

const char *rt_metrics_url(const struct rt_metrics *m)
{
	return m ? m->url : "";
}

void rt_metrics_stop(struct rt_metrics *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->stopping = 1;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
	nng_http_server_stop(m->server);
	pthread_mutex_lock(&m->mu);
	while (m->inside)
		pthread_cond_wait(&m->cv, &m->mu);
	pthread_mutex_unlock(&m->mu);
	nng_http_server_release(m->server);
	free_metrics(m);
}
