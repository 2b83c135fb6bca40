/*
 * daemon/metrics.h — a daemon's /metrics endpoint for Prometheus, over nng's
 * HTTP server (docs/metrics.md).
 *
 * Owns: the HTTP listener (--metrics-listen http://HOST:PORT, loopback unless
 * the daemon runs --insecure), GET /metrics, and the hand-over of each scrape
 * to the daemon's own loop thread, which alone may read the figures. A scrape
 * raises a flag (rt_metrics_wanted, one atomic load for the loop) and waits;
 * the loop renders through rt_metrics_serve — started after the scrape arrived,
 * so the values are the loop's own consistent view, as `retrace status` gets
 * — and every scrape waiting gets that rendering. A loop that does not answer
 * within RT_METRICS_WAIT_MS gets the scraper a 503, never a hang.
 */
#ifndef RETRACE_DAEMON_METRICS_H
#define RETRACE_DAEMON_METRICS_H

#include <stddef.h>

#define RT_METRICS_WAIT_MS 5000
#define RT_METRICS_MAX_BYTES (64u << 20) /* a rendering larger than this is cut */

/* Renders the exposition into out (cap bytes); sets *cut when it did not fit
 * (it is called again with twice the room). Returns the length. */
typedef size_t (*rt_metrics_render)(void *arg, char *out, size_t cap, int *cut);

struct rt_metrics;

/*
 * Listen on url (http://HOST:PORT, optionally ending in /metrics; port 0: any
 * free one). flag names the setting in messages ("--metrics-listen"); a host
 * other than loopback needs insecure (the endpoint has no TLS). NULL with a
 * sentence in err.
 */
struct rt_metrics *rt_metrics_start(const char *url, const char *flag, int insecure, char *err,
				    size_t errlen);
/*
 * The same hand-over for another rendering of the loop's figures: the path of
 * url is served with this Content-Type (e.g. the coordinator's /api/status,
 * "application/json"). A daemon serving more than this one path on the
 * listener adds its own handlers with rt_metrics_add_handler.
 */
struct rt_metrics *rt_metrics_start_as(const char *url, const char *flag, int insecure,
				       const char *content_type, char *err, size_t errlen);
/* Serve another nng_http_handler (passed as void * to keep nng out of this
 * header) on the same listener; the server owns it from then on. 0 or an nng
 * error. The handler runs on an nng worker thread, never the loop's. */
int rt_metrics_add_handler(struct rt_metrics *m, void *nng_http_handler);
/* Check url as rt_metrics_start would, without listening. 0, or -1 and err. */
int rt_metrics_check_url(const char *url, const char *flag, int insecure, char *err,
			 size_t errlen);
/* The URL scrapers use, port 0 resolved: http://127.0.0.1:9464/metrics. */
const char *rt_metrics_url(const struct rt_metrics *m);

/* Loop thread: 1 if a scrape waits for a rendering. */
int rt_metrics_wanted(struct rt_metrics *m);
/* Loop thread: render and hand the result to every waiting scrape. */
void rt_metrics_serve(struct rt_metrics *m, rt_metrics_render render, void *arg);

/* Answer waiting scrapes with 503, stop listening, free. NULL is fine. */
void rt_metrics_stop(struct rt_metrics *m);

#endif
