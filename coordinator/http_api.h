/*
 * coordinator/http_api.h — the coordinator's web UI and its JSON API over
 * nng's HTTP server (docs/api.md, docs/ui.md).
 *
 * Owns: the --http-listen listener (loopback unless --insecure: no TLS, like
 * /metrics), the static UI compiled into the binary (ui/, served at /), and
 *   GET /api/traces          search, newest first, at most RT_API_LIMIT_MAX rows
 *   GET /api/traces/{id}     one trace decoded into its span tree across hosts
 *   GET /api/agents          the agent directory as stored
 *   GET /api/status          the coordinator's figures as JSON
 *   GET /api/alarms          selection's alarms; POST sets one, DELETE clears
 *
 * Promises:
 *   - The store is read on the HTTP worker threads through a read-only store
 *     handle of the API's own (SQLite WAL: readers never block the writer), so
 *     a slow search never delays the coordinator's loop; only /api/status, whose
 *     figures belong to the loop, is handed to the loop (daemon/metrics.h), and
 *     rendering them is what `retrace status` costs.
 *   - Every bad parameter is a 400 with {"error": ..., "parameter": NAME}; an
 *     unknown trace a 404; a store that cannot be read a 503; never a crash.
 *   - An alarm is authorised as `retrace alarm` is: the API sends the CLI's own
 *     text request to the coordinator's control address, whose authorisation
 *     decides (operator commands only from loopback without TLS). It is only
 *     sent for a POST/DELETE carrying the X-Retrace-Request header (a page of
 *     another origin cannot add it without a CORS preflight, which is not
 *     answered) and a Host header naming this listener (DNS rebinding), from a
 *     loopback listener of a coordinator without TLS: with TLS an alarm needs an
 *     operator certificate, which a browser does not present here (403).
 *   - The work of one request is bounded: at most RT_API_SCAN_MAX stored rows
 *     looked at and RT_API_DECODE_MAX traces decoded ("truncated": true says the
 *     scan stopped early).
 */
#ifndef RETRACE_COORDINATOR_HTTP_API_H
#define RETRACE_COORDINATOR_HTTP_API_H

#include <stddef.h>
#include <stdint.h>

#define RT_API_LIMIT_DEFAULT 100
#define RT_API_LIMIT_MAX 1000
#define RT_API_SCAN_MAX 20000   /* stored rows looked at per search */
#define RT_API_DECODE_MAX 2000  /* traces decoded per search */

struct rt_metrics;
struct rt_http_api;

/* Counters of the API (a snapshot: rt_http_api_stats, any thread). */
struct rt_http_api_stats {
	uint64_t requests;      /* API requests answered (static files not counted) */
	uint64_t bad_requests;  /* 400 */
	uint64_t not_found;     /* 404 */
	uint64_t errors;        /* 5xx: the store could not be read, out of memory */
	uint64_t refused;       /* 403 and 409: alarms refused (guards, the coordinator) */
};

/* Check url (http://HOST:PORT, no path) as rt_http_api_start would. 0 or -1 and err. */
int rt_http_api_check_url(const char *url, int insecure, char *err, size_t errlen);

/*
 * Listen on url and serve the UI and the API, reading the store file at
 * store_path (opened read-only on first use, so the listener may start before
 * the coordinator created the file). NULL with a sentence in err.
 */
struct rt_http_api *rt_http_api_start(const char *url, int insecure, const char *store_path,
				      char *err, size_t errlen);
/* Where alarms go: the coordinator's control address as bound, and whether
 * it runs TLS (then the API refuses alarms). Until called, alarms get 503. */
void rt_http_api_set_control(struct rt_http_api *a, const char *url, int tls);
/* The history /api/history serves (coordinator/history.h); NULL: 404. Set once,
 * before requests can arrive for it, and closed only after rt_http_api_stop. */
struct coord_history;
void rt_http_api_set_history(struct rt_http_api *a, struct coord_history *h);
/* The base URL of the UI, port 0 resolved: http://127.0.0.1:9480/ */
const char *rt_http_api_url(const struct rt_http_api *a);
/* The /api/status hand-over the loop serves (rt_metrics_wanted/serve). */
struct rt_metrics *rt_http_api_status(struct rt_http_api *a);
void rt_http_api_stats(const struct rt_http_api *a, struct rt_http_api_stats *out);
/* Stop listening, wait for requests inside, close the store handle. NULL is fine. */
void rt_http_api_stop(struct rt_http_api *a);

#endif
