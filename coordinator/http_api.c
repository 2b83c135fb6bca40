/*
 * coordinator/http_api.c — the web UI and its JSON API (see http_api.h).
 *
 * How it works: the listener is the one daemon/metrics.c makes for the loop's
 * figures, started for the path /api/status with a JSON content type (so the
 * status page gets exactly what `retrace status --json` shows, rendered by the
 * loop thread that owns the figures). On the same listener this file adds
 * static handlers for the UI's files (ui/, compiled into the binary as C
 * arrays by ui/embed.cmake) and two handlers of its own, /api/traces (a tree:
 * also /api/traces/ID) and /api/agents.
 *
 * Those run on nng's HTTP worker threads and read the store through one
 * read-only handle of their own, under a mutex (a store handle is used by one
 * thread at a time). SQLite in WAL mode lets that reader run beside the
 * coordinator's writer without either waiting, which is why the API does not
 * go through the loop: a search that decodes a thousand traces costs the
 * coordinator nothing. The handle is opened on first use and reopened after a
 * failure, so the listener can start before the coordinator creates its store.
 *
 * A search lists the stored rows newest first (rt_store_list with the
 * trigger, since and coherent filters it knows), keeps the rows the other row
 * filters pass (until, coherent=true, group), then decodes them one by one for
 * the span-level filters (service, operation, duration) and the summary each
 * result carries. Both steps are capped per request (without a span-level
 * filter the listing stops at the limit). Replies are built in a growing
 * buffer; every string from the store goes through the one JSON string writer
 * (daemon/json.h).
 *
 * /api/alarms does not touch selection's state (the loop's): it sends the
 * request `retrace alarm` sends to the coordinator's control socket, over a
 * loopback connection of its own, so the coordinator authorises it exactly as
 * it would the CLI; the handler only adds the browser-side guards (http_api.h).
 */
#include "http_api.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/http/http.h>

#include "daemon/json.h"
#include "daemon/metrics.h"
#include "daemon/reqrep.h"
#include "daemon/tls.h"
#include "nng_close.h"
#include "decode.h"
#include "history.h"
#include "retrace/retrace.h"
#include "retrace/tracer.h"
#include "store.h"
#include "ui_assets.h"

#define JSON_TYPE "application/json; charset=utf-8"
#define MAX_SERVICES 16 /* service names listed per search result */
#define RT_API_TRIGGER_NAMES 1024 /* trigger names the API knows (more: shown as ids) */

/* The counters behind struct rt_http_api_stats, bumped from the server's
 * threads and read for figures only (relaxed). */
struct api_counters {
	_Atomic uint64_t requests, bad_requests, not_found, errors, refused;
};

struct rt_http_api {
	struct rt_metrics *listener; /* the server, and /api/status through the loop */
	char url[320];
	char store_path[1024];
	pthread_mutex_t mu;          /* the store handle: one request at a time */
	struct rt_store *store;
	struct api_counters st;
	char hostport[300];          /* the listener's, port resolved (Host check) */
	int loopback;                /* the listener is on loopback */
	char control[300];           /* coordinator's control URL (under mu); "" unset */
	int control_tls;
	struct api_names {           /* trigger names, read from the store per request */
		uint32_t n;
		struct {
			uint32_t id;
			char name[RT_STORE_TRIGGER_NAME_MAX];
		} e[RT_API_TRIGGER_NAMES];
	} names;                     /* under mu */
	struct coord_history *history; /* /api/history; NULL: off */
};

/* ------------------------------------------------------ reply buffer ---- */

struct out {
	char *p;
	size_t len, cap;
	int oom;
};

static void put(void *ctx, const char *s, size_t n)
{
	struct out *o = ctx;
	if (o->oom)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t cap = o->cap ? o->cap : 4096;
		char *p;
		while (cap < o->len + n + 1)
			cap *= 2;
		if (!(p = realloc(o->p, cap))) {
			o->oom = 1;
			return;
		}
		o->p = p;
		o->cap = cap;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = 0;
}

static void putf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct out *o, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;
	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	put(o, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void put_str(struct out *o, const char *s)
{
	rt_json_put_string(put, o, s);
}

static void put_ids(struct out *o, const uint32_t *ids, uint32_t n)
{
	uint32_t i;
	put(o, "[", 1);
	for (i = 0; i < n; i++)
		putf(o, "%s%u", i ? "," : "", ids[i]);
	put(o, "]", 1);
}

/* -------------------------------------------------------- replies ---- */

static void count(_Atomic uint64_t *field)
{
	atomic_fetch_add_explicit(field, 1, memory_order_relaxed);
}

static void send_reply(nng_aio *aio, uint16_t status, const char *type, const char *body,
		       size_t len)
{
	nng_http_res *res;
	int rv;
	if ((rv = nng_http_res_alloc(&res)) != 0) {
		nng_aio_finish(aio, rv);
		return;
	}
	nng_http_res_set_status(res, status);
	nng_http_res_set_header(res, "Content-Type", type);
	nng_http_res_set_header(res, "Cache-Control", "no-store");
	if ((rv = nng_http_res_copy_data(res, body, len)) != 0) {
		nng_http_res_free(res);
		nng_aio_finish(aio, rv);
		return;
	}
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

/* A JSON error: {"error": why, "parameter": param (omitted if NULL)}. */
static void send_error(struct rt_http_api *a, nng_aio *aio, uint16_t status, const char *param,
		       const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void send_error(struct rt_http_api *a, nng_aio *aio, uint16_t status, const char *param,
		       const char *fmt, ...)
{
	struct out o = { 0 };
	char why[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	if (status == 400 || status == 404 || status >= 500)
		count(status == 400 ? &a->st.bad_requests
		      : status == 404  ? &a->st.not_found
				       : &a->st.errors);
	else
		count(&a->st.refused);
	put(&o, "{\"error\":", 9);
	put_str(&o, why);
	if (param) {
		put(&o, ",\"parameter\":", 13);
		put_str(&o, param);
	}
	put(&o, "}\n", 2);
	if (o.oom)
		nng_aio_finish(aio, NNG_ENOMEM);
	else
		send_reply(aio, status, JSON_TYPE, o.p, o.len);
	free(o.p);
}

static void send_json(struct rt_http_api *a, nng_aio *aio, struct out *o)
{
	if (o->oom) {
		send_error(a, aio, 500, NULL, "out of memory");
		return;
	}
	put(o, "\n", 1);
	send_reply(aio, 200, JSON_TYPE, o->p, o->len);
}

/* ------------------------------------------------------ the store ---- */

/* The read-only handle, opened if need be; call with a->mu held. */
static struct rt_store *store_of(struct rt_http_api *a, char *err, size_t errlen)
{
	struct rt_store_options so = { 0 };
	if (a->store)
		return a->store;
	so.path = a->store_path;
	so.readonly = 1;
	if (rt_store_open(&a->store, &so) != 0) {
		/* The path is cut at 200 bytes so the reason after it always fits the
		 * caller's buffer (and a Release build's truncation check agrees). */
		snprintf(err, errlen, "cannot read the store %.200s: %s", a->store_path,
			 rt_store_errmsg(NULL));
		rt_store_close(a->store);
		a->store = NULL;
	}
	return a->store;
}

static int add_name(void *arg, uint32_t id, const char *name)
{
	struct api_names *m = arg;
	if (m->n == RT_API_TRIGGER_NAMES)
		return 1;
	m->e[m->n].id = id;
	snprintf(m->e[m->n].name, sizeof m->e[m->n].name, "%s", name);
	m->n++;
	return 0;
}

/* The stored trigger names (a small table), fresh for each request; call
 * with a->mu held. A failure leaves none: ids are shown instead. */
static void load_names(struct rt_http_api *a, struct rt_store *s)
{
	a->names.n = 0;
	if (rt_store_trigger_names(s, add_name, &a->names) < 0)
		a->names.n = 0;
}

static const char *name_of(const struct api_names *m, uint32_t id)
{
	const char *b = retrace_builtin_trigger_name(id);
	for (uint32_t i = 0; !b && i < m->n; i++)
		if (m->e[i].id == id)
			return m->e[i].name;
	return b;
}

/* A trigger=… value: a number, or a name the store (or a built-in) knows. */
static int id_of(const struct api_names *m, const char *name, uint32_t *id)
{
	for (uint32_t b = RETRACE_TRIGGER_HEAD_SAMPLED; b <= RETRACE_TRIGGER_CRASH; b++)
		if (!strcmp(retrace_builtin_trigger_name(b), name))
			return *id = b, 0;
	for (uint32_t i = 0; i < m->n; i++)
		if (!strcmp(m->e[i].name, name))
			return *id = m->e[i].id, 0;
	return -1;
}

/* After a failed read: drop the handle, the next request opens it again. */
static void store_failed(struct rt_http_api *a)
{
	rt_store_close(a->store);
	a->store = NULL;
}

/* ------------------------------------------------- query parameters ---- */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decode [s, s+n) into out (cap bytes); '+' is a space. -1 if
 * malformed, too long, or it decodes to a NUL. */
static int url_decode(const char *s, size_t n, char *out, size_t cap)
{
	size_t i, k = 0;
	for (i = 0; i < n; i++) {
		int c = (unsigned char)s[i];
		if (c == '+') {
			c = ' ';
		} else if (c == '%') {
			int h, l;
			if (i + 2 >= n || (h = hexval(s[i + 1])) < 0 || (l = hexval(s[i + 2])) < 0)
				return -1;
			c = h * 16 + l;
			i += 2;
		}
		if (c == 0 || k + 1 >= cap)
			return -1;
		out[k++] = (char)c;
	}
	out[k] = 0;
	return 0;
}

struct search {
	const char *service, *operation, *group; /* NULL: any */
	char service_buf[512], operation_buf[512], group_buf[RT_STORE_GROUP_MAX];
	int by_trigger;
	uint32_t trigger_id;
	char trigger_name[RT_STORE_TRIGGER_NAME_MAX]; /* "" or a name, resolved later */
	uint64_t since_ns;           /* 0: open */
	int has_until;
	uint64_t until_ns;
	double min_ms, max_ms;       /* max < 0: open */
	int coherent;                /* -1 any, 0 incoherent only, 1 coherent only */
	uint32_t limit;
};

static int parse_u64(const char *v, uint64_t *out)
{
	char *end;
	unsigned long long x;
	if (!*v || *v == '-' || *v == '+' || *v == ' ')
		return -1;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno || *end)
		return -1;
	*out = x;
	return 0;
}

static int parse_ms(const char *v, double *out)
{
	char *end;
	double x;
	if (!*v || *v == ' ')
		return -1;
	errno = 0;
	x = strtod(v, &end);
	if (errno || *end || !isfinite(x) || x < 0)
		return -1;
	*out = x;
	return 0;
}

/* One key=value of a search into q. NULL, or the reason it is refused. */
static const char *search_param(struct search *q, const char *key, const char *v)
{
	uint64_t x;
	if (!strcmp(key, "service")) {
		snprintf(q->service_buf, sizeof q->service_buf, "%s", v);
		q->service = *v ? q->service_buf : NULL;
	} else if (!strcmp(key, "operation")) {
		snprintf(q->operation_buf, sizeof q->operation_buf, "%s", v);
		q->operation = *v ? q->operation_buf : NULL;
	} else if (!strcmp(key, "group")) {
		if (strlen(v) >= sizeof q->group_buf)
			return "longer than any selection group";
		snprintf(q->group_buf, sizeof q->group_buf, "%s", v);
		q->group = *v ? q->group_buf : NULL;
	} else if (!strcmp(key, "trigger")) {
		if (!*v)
			return NULL;
		q->by_trigger = 1;
		if (parse_u64(v, &x) == 0 && x <= UINT32_MAX) {
			q->trigger_id = (uint32_t)x;
		} else {
			if (strlen(v) >= sizeof q->trigger_name)
				return "a trigger id (a number 0..4294967295) or a trigger name";
			snprintf(q->trigger_name, sizeof q->trigger_name, "%s", v);
		}
	} else if (!strcmp(key, "since") || !strcmp(key, "until")) {
		if (!*v)
			return NULL;
		if (parse_u64(v, &x) != 0 || x > UINT64_MAX / 1000000)
			return "a time in Unix milliseconds";
		*(key[0] == 's' ? &q->since_ns : &q->until_ns) = x * 1000000;
		q->has_until |= key[0] == 'u';
	} else if (!strcmp(key, "min_ms") || !strcmp(key, "max_ms")) {
		if (!*v)
			return NULL;
		if (parse_ms(v, key[1] == 'i' ? &q->min_ms : &q->max_ms) != 0)
			return "a duration in milliseconds (a number >= 0)";
	} else if (!strcmp(key, "coherent")) {
		if (!*v)
			q->coherent = -1;
		else if (!strcmp(v, "true") || !strcmp(v, "1"))
			q->coherent = 1;
		else if (!strcmp(v, "false") || !strcmp(v, "0"))
			q->coherent = 0;
		else
			return "true or false";
	} else if (!strcmp(key, "limit")) {
		if (!*v)
			return NULL;
		if (parse_u64(v, &x) != 0 || x < 1 || x > RT_API_LIMIT_MAX)
			return "a number 1..1000";
		q->limit = (uint32_t)x;
	} else {
		return "unknown parameter (service, operation, trigger, since, until, min_ms, "
		       "max_ms, coherent, group, limit)";
	}
	return NULL;
}

/* Parse the query string (after '?', may be NULL). 0, or -1 with the
 * parameter named in *bad_key (bad_cap bytes) and the reason in *why. */
static int parse_search(const char *query, struct search *q, char *bad_key, size_t bad_cap,
			const char **why)
{
	memset(q, 0, sizeof *q);
	q->coherent = -1;
	q->max_ms = -1;
	q->limit = RT_API_LIMIT_DEFAULT;
	while (query && *query) {
		const char *amp = strchr(query, '&'), *eq;
		size_t n = amp ? (size_t)(amp - query) : strlen(query);
		char key[64], val[512];
		eq = memchr(query, '=', n);
		if (n) {
			size_t kn = eq ? (size_t)(eq - query) : n;
			if (url_decode(query, kn, key, sizeof key) != 0) {
				snprintf(bad_key, bad_cap, "%.*s", (int)(kn < 60 ? kn : 60), query);
				*why = "a malformed parameter name";
				return -1;
			}
			if (url_decode(eq ? eq + 1 : query + n, eq ? n - kn - 1 : 0, val, sizeof val) != 0) {
				snprintf(bad_key, bad_cap, "%s", key);
				*why = "a malformed or too long value (percent-encoding, at most 511 bytes)";
				return -1;
			}
			if ((*why = search_param(q, key, val)) != NULL) {
				snprintf(bad_key, bad_cap, "%s", key);
				return -1;
			}
		}
		query = amp ? amp + 1 : NULL;
	}
	if (q->has_until && q->since_ns > q->until_ns) {
		snprintf(bad_key, bad_cap, "until");
		*why = "before since";
		return -1;
	}
	if (q->max_ms >= 0 && q->min_ms > q->max_ms) {
		snprintf(bad_key, bad_cap, "max_ms");
		*why = "less than min_ms";
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------- trace summary ---- */

static const char *service_of(const struct rt_decoded_trace *t, const struct rt_span *s)
{
	return s->resource < t->n_resources && t->resources[s->resource].service
		       ? t->resources[s->resource].service
		       : "unknown_service";
}

static const char *host_of(const struct rt_decoded_trace *t, const struct rt_span *s)
{
	return s->resource < t->n_resources && t->resources[s->resource].host
		       ? t->resources[s->resource].host
		       : "";
}

/* The earliest span without a parent in the trace (spans are ordered by
 * start), else the first span; -1 if none. */
static int32_t root_of(const struct rt_decoded_trace *t)
{
	uint32_t i;
	for (i = 0; i < t->n_spans; i++)
		if (t->spans[i].parent < 0)
			return (int32_t)i;
	return t->n_spans ? 0 : -1;
}

static void time_range(const struct rt_decoded_trace *t, uint64_t *t0, uint64_t *t1)
{
	uint32_t i;
	*t0 = *t1 = 0;
	for (i = 0; i < t->n_spans; i++) {
		if (t->spans[i].start_ns && (!*t0 || t->spans[i].start_ns < *t0))
			*t0 = t->spans[i].start_ns;
		if (t->spans[i].end_ns > *t1)
			*t1 = t->spans[i].end_ns;
	}
}

/* Does any span of the trace match service and operation (both, on one span)? */
static int spans_match(const struct rt_decoded_trace *t, const struct search *q)
{
	uint32_t i;
	if (!q->service && !q->operation)
		return 1;
	for (i = 0; i < t->n_spans; i++) {
		const struct rt_span *s = &t->spans[i];
		if (q->service && strcmp(service_of(t, s), q->service) != 0)
			continue;
		if (q->operation && (!s->name || strcmp(s->name, q->operation) != 0))
			continue;
		return 1;
	}
	return 0;
}

/* The store row's members (the names `retrace traces --json` uses). */
static void put_row(struct out *o, const struct rt_store_trace *t, const struct api_names *names)
{
	putf(o, "\"trace_id\":\"%016" PRIx64 "%016" PRIx64 "\",\"group\":%" PRIu64 ",\"triggers\":",
	     t->trace_hi, t->trace_lo, t->group_id);
	put_ids(o, t->trigger_ids, t->trigger_count);
	put(o, ",\"trigger_names\":[", 18);
	for (uint32_t i = 0; i < t->trigger_count && i < RT_STORE_MAX_TRIGGERS; i++) {
		const char *name = name_of(names, t->trigger_ids[i]);
		if (i)
			put(o, ",", 1);
		if (name)
			put_str(o, name);
		else
			put(o, "null", 4);
	}
	put(o, "]", 1);
	put(o, ",\"agents\":", 10);
	put_ids(o, t->agents, t->agent_count);
	put(o, ",\"missing\":", 11);
	put_ids(o, t->missing, t->missing_count);
	putf(o, ",\"coherent\":%s,\"bytes\":%" PRIu64 ",\"slices\":%u,\"late_slices\":%u"
	     ",\"first_ns\":%" PRIu64 ",\"last_ns\":%" PRIu64 ",\"triggered_ns\":%" PRIu64
	     ",\"closed_ns\":%" PRIu64 ",\"traversal_ns\":%" PRIu64 ",\"selection\":{\"selected\":%s",
	     t->coherent ? "true" : "false", t->bytes, t->slices, t->late_slices, t->first_ns,
	     t->last_ns, t->triggered_ns, t->closed_ns, t->traversal_ns,
	     t->has_selection ? "true" : "false");
	if (!t->has_selection) {
		putf(o, ",\"score\":null,\"weight\":null,\"pattern\":null,\"group\":null,"
		     "\"group_key\":null}");
		return;
	}
	putf(o, ",\"score\":%.6g,\"weight\":%.6g,\"pattern\":\"%016" PRIx64 "\",\"group\":",
	     isfinite(t->score) ? t->score : 0, isfinite(t->weight) ? t->weight : 0, t->pattern);
	put_str(o, t->group);
	putf(o, ",\"group_key\":\"%016" PRIx64 "\"}", t->group_key);
}

/* The summary of a decoded trace a search result carries. */
static void put_summary(struct out *o, const struct rt_decoded_trace *t)
{
	const char *seen[MAX_SERVICES];
	uint32_t i, nseen = 0, errors = 0, partial = 0;
	int32_t root = root_of(t);
	uint64_t t0, t1;
	time_range(t, &t0, &t1);
	put(o, ",\"root_service\":", 16);
	if (root >= 0)
		put_str(o, service_of(t, &t->spans[root]));
	else
		put(o, "null", 4);
	put(o, ",\"root_operation\":", 18);
	if (root >= 0)
		put_str(o, t->spans[root].name);
	else
		put(o, "null", 4);
	for (i = 0; i < t->n_spans; i++) {
		errors += t->spans[i].status == RETRACE_STATUS_ERROR;
		partial += (t->spans[i].flags & RT_SPAN_PARTIAL) != 0;
	}
	putf(o, ",\"start_ns\":%" PRIu64 ",\"duration_ns\":%" PRIu64 ",\"spans\":%u,\"errors\":%u"
	     ",\"partial_spans\":%u,\"decode_complete\":%s,\"services\":[",
	     t0, t1 > t0 ? t1 - t0 : 0, t->n_spans, errors, partial,
	     rt_decode_complete(&t->st) ? "true" : "false");
	for (i = 0; i < t->n_spans; i++) {
		const char *svc = service_of(t, &t->spans[i]);
		uint32_t k;
		for (k = 0; k < nseen && strcmp(seen[k], svc) != 0; k++)
			;
		if (k < nseen || nseen == MAX_SERVICES)
			continue;
		seen[nseen] = svc;
		if (nseen++)
			put(o, ",", 1);
		put_str(o, svc);
	}
	put(o, "]", 1);
}

/* ------------------------------------------------------------ search ---- */

struct rows {
	const struct search *q;
	struct rt_store_trace *v;
	size_t n, cap;
	size_t enough;       /* rows to keep: the limit when no span filter follows */
	uint64_t scanned;
	int truncated, oom;
};

static int keep_row(void *arg, const struct rt_store_trace *t)
{
	struct rows *r = arg;
	const struct search *q = r->q;
	if (r->scanned++ >= RT_API_SCAN_MAX) {
		r->truncated = 1;
		return 1;
	}
	if (q->has_until && t->closed_ns > q->until_ns)
		return 0;
	if (q->coherent == 1 && !t->coherent)
		return 0;
	if (q->group && (!t->has_selection || strcmp(t->group, q->group) != 0))
		return 0;
	if (r->n == r->enough) {
		r->truncated = r->enough == RT_API_DECODE_MAX;
		return 1;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		struct rt_store_trace *v = realloc(r->v, cap * sizeof *v);
		if (!v) {
			r->oom = 1;
			return 1;
		}
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = *t;
	return 0;
}

/* Decode the kept rows in order and write those the span filters pass. */
static int write_results(struct rt_store *s, const struct search *q, struct rows *r,
			 struct out *o, const struct api_names *names, char *err, size_t errlen)
{
	uint32_t found = 0;
	size_t i;
	put(o, "{\"traces\":[", 11);
	for (i = 0; i < r->n && found < q->limit; i++) {
		struct rt_decoded_trace t;
		uint64_t t0, t1;
		double ms;
		if (rt_decode_stored(s, r->v[i].trace_hi, r->v[i].trace_lo, &t, err, errlen) != 0)
			return -1;
		time_range(&t, &t0, &t1);
		ms = (double)(t1 > t0 ? t1 - t0 : 0) / 1e6;
		if (spans_match(&t, q) && ms >= q->min_ms && (q->max_ms < 0 || ms <= q->max_ms)) {
			put(o, found ? ",\n{" : "{", found ? 3 : 1);
			put_row(o, &r->v[i], names);
			put_summary(o, &t);
			put(o, "}", 1);
			found++;
		}
		rt_decoded_trace_free(&t);
	}
	/* stopped before the rows ran out with the limit reached: more may match */
	putf(o, "],\"count\":%u,\"limit\":%u,\"scanned\":%" PRIu64 ",\"truncated\":%s}", found,
	     q->limit, r->scanned, r->truncated && found < q->limit ? "true" : "false");
	return 0;
}

static void api_search(struct rt_http_api *a, nng_aio *aio, const char *query)
{
	struct rt_store_query sq = { 0 };
	struct search q;
	struct rows r = { 0 };
	struct out o = { 0 };
	struct rt_store *s;
	char bad[64], err[1200];
	const char *why = NULL;
	int rc;
	if (parse_search(query, &q, bad, sizeof bad, &why) != 0) {
		send_error(a, aio, 400, bad, "parameter %s: %s", bad, why);
		return;
	}
	sq.by_trigger = q.by_trigger;
	sq.trigger_id = q.trigger_id;
	sq.since_ns = q.since_ns;
	sq.incoherent_only = q.coherent == 0;
	r.q = &q;
	/* without a span-level filter every kept row is a result: stop at the limit */
	r.enough = q.service || q.operation || q.min_ms > 0 || q.max_ms >= 0 ? RT_API_DECODE_MAX
										: q.limit;
	pthread_mutex_lock(&a->mu);
	if (!(s = store_of(a, err, sizeof err))) {
		pthread_mutex_unlock(&a->mu);
		send_error(a, aio, 503, NULL, "%s", err);
		return;
	}
	load_names(a, s);
	if (q.trigger_name[0] && id_of(&a->names, q.trigger_name, &sq.trigger_id) != 0) {
		pthread_mutex_unlock(&a->mu);
		send_error(a, aio, 400, "trigger", "parameter trigger: no trigger is named '%s' "
			   "(a trigger id, or a name a client gave with retrace_trigger_name)",
			   q.trigger_name);
		return;
	}
	rc = rt_store_list(s, &sq, keep_row, &r);
	if (rc < 0) {
		snprintf(err, sizeof err, "reading the store: %s", rt_store_errmsg(s));
		store_failed(a);
	} else if (r.oom) {
		snprintf(err, sizeof err, "out of memory");
		rc = -1;
	} else {
		rc = write_results(s, &q, &r, &o, &a->names, err, sizeof err);
	}
	pthread_mutex_unlock(&a->mu);
	if (rc < 0)
		send_error(a, aio, 500, NULL, "%s", err);
	else
		send_json(a, aio, &o);
	free(r.v);
	free(o.p);
}

/* ------------------------------------------------------- one trace ---- */

static void put_value(struct out *o, const struct rt_value *v)
{
	switch (v->type) {
	case RT_VAL_STR: put_str(o, v->u.s); break;
	case RT_VAL_INT: putf(o, "%" PRId64, v->u.i); break;
	case RT_VAL_DOUBLE:
		if (isfinite(v->u.d))
			putf(o, "%.17g", v->u.d);
		else /* JSON has no NaN or infinity: say it as a string */
			put_str(o, isnan(v->u.d) ? "NaN" : v->u.d > 0 ? "Infinity" : "-Infinity");
		break;
	case RT_VAL_BOOL: put(o, v->u.b ? "true" : "false", v->u.b ? 4 : 5); break;
	default: put(o, "null", 4); break;
	}
}

static void put_attrs(struct out *o, const struct rt_attr *at, uint32_t n)
{
	uint32_t i;
	put(o, "[", 1);
	for (i = 0; at && i < n; i++) {
		put(o, i ? ",{\"key\":" : "{\"key\":", i ? 8 : 7);
		put_str(o, at[i].key);
		put(o, ",\"value\":", 9);
		put_value(o, &at[i].value);
		put(o, "}", 1);
	}
	put(o, "]", 1);
}

static const char *level_name(uint8_t level)
{
	static const char *names[] = { "DEBUG", "INFO", "WARN", "ERROR" };
	return level < 4 ? names[level] : "LOG";
}

static void put_logs(struct out *o, const struct rt_log_event *logs, uint32_t n)
{
	uint32_t i;
	put(o, "[", 1);
	for (i = 0; logs && i < n; i++) {
		putf(o, "%s{\"time_ns\":%" PRIu64 ",\"level\":\"%s\",\"body\":", i ? "," : "",
		     logs[i].time_ns, level_name(logs[i].level));
		put_str(o, logs[i].body);
		put(o, ",\"template\":", 12);
		if (logs[i].template_text)
			put_str(o, logs[i].template_text);
		else
			put(o, "null", 4);
		putf(o, ",\"template_missing\":%s}",
		     logs[i].flags & RT_LOG_TEMPLATE_MISSING ? "true" : "false");
	}
	put(o, "]", 1);
}

static const char *kind_name(uint8_t kind)
{
	static const char *names[] = { "unspecified", "internal", "server",
				       "client",      "producer", "consumer" };
	return kind < 6 ? names[kind] : "unknown";
}

static const char *status_name(uint8_t status)
{
	return status == RETRACE_STATUS_OK ? "ok" : status == RETRACE_STATUS_ERROR ? "error" : "unset";
}

static void put_flags(struct out *o, uint32_t flags)
{
	static const struct {
		uint32_t bit;
		const char *name;
	} f[] = { { RT_SPAN_PARTIAL, "partial" }, { RT_SPAN_NO_START, "no_start" },
		  { RT_SPAN_NO_END, "no_end" },   { RT_SPAN_UNMATCHED, "unmatched" } };
	size_t i;
	int n = 0;
	put(o, "[", 1);
	for (i = 0; i < sizeof f / sizeof f[0]; i++)
		if (flags & f[i].bit)
			putf(o, "%s\"%s\"", n++ ? "," : "", f[i].name);
	put(o, "]", 1);
}

static void put_span(struct out *o, const struct rt_decoded_trace *t, uint32_t i)
{
	const struct rt_span *s = &t->spans[i];
	int has_parent = s->parent >= 0 && (uint32_t)s->parent < t->n_spans;
	putf(o, "{\"index\":%u,\"span_id\":\"%016" PRIx64 "\",\"parent_id\":", i, s->span_id);
	if (s->parent_id)
		putf(o, "\"%016" PRIx64 "\"", s->parent_id);
	else
		put(o, "null", 4);
	if (has_parent)
		putf(o, ",\"parent\":%d", s->parent);
	else
		put(o, ",\"parent\":null", 14);
	/* a parent id that is not in the trace: the span hangs loose */
	putf(o, ",\"orphan\":%s,\"name\":", !has_parent && s->parent_id ? "true" : "false");
	put_str(o, s->name);
	putf(o, ",\"kind\":\"%s\",\"service\":", kind_name(s->kind));
	put_str(o, service_of(t, s));
	put(o, ",\"host\":", 8);
	put_str(o, host_of(t, s));
	putf(o, ",\"agent_id\":%u,\"pid\":%u,\"tid\":%u,\"start_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64
	     ",\"status\":\"%s\",\"status_code\":%" PRId64 ",\"status_message\":",
	     s->agent_id, s->pid, s->tid, s->start_ns, s->end_ns, status_name(s->status),
	     s->status_code);
	put_str(o, s->status_message);
	put(o, ",\"flags\":", 9);
	put_flags(o, s->flags);
	put(o, ",\"attributes\":", 14);
	put_attrs(o, s->attrs, s->n_attrs);
	put(o, ",\"logs\":", 8);
	put_logs(o, s->logs, s->n_logs);
	put(o, "}", 1);
}

/* "2 gaps, 1 partial span": the decode problems in words ("" if none). */
static void put_decode(struct out *o, const struct rt_decode_stats *st)
{
	putf(o, "{\"complete\":%s,\"slices\":%" PRIu64 ",\"buffers\":%" PRIu64
	     ",\"duplicate_buffers\":%" PRIu64 ",\"conflicting_buffers\":%" PRIu64
	     ",\"gaps\":%" PRIu64 ",\"records\":%" PRIu64 ",\"events\":%" PRIu64,
	     rt_decode_complete(st) ? "true" : "false", st->slices, st->buffers,
	     st->duplicate_buffers, st->conflicting_buffers, st->gaps, st->records, st->events);
	putf(o, ",\"corrupt_frames\":%" PRIu64 ",\"corrupt_events\":%" PRIu64
	     ",\"truncated_records\":%" PRIu64 ",\"orphan_chunks\":%" PRIu64
	     ",\"missing_templates\":%" PRIu64 ",\"orphan_events\":%" PRIu64
	     ",\"partial_spans\":%" PRIu64 ",\"unmatched_client_spans\":%" PRIu64 "}",
	     st->corrupt_frames, st->corrupt_events, st->truncated_records, st->orphan_chunks,
	     st->missing_templates, st->orphan_events, st->partial_spans,
	     st->unmatched_client_spans);
}

static void put_trace(struct out *o, const struct rt_store_trace *row,
		      const struct rt_decoded_trace *t, const struct api_names *names)
{
	uint64_t t0, t1;
	uint32_t i;
	time_range(t, &t0, &t1);
	put(o, "{", 1);
	put_row(o, row, names);
	putf(o, ",\"start_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64 ",\"decode\":", t0, t1);
	put_decode(o, &t->st);
	put(o, ",\"resources\":[", 14);
	for (i = 0; i < t->n_resources; i++) {
		const struct rt_resource *r = &t->resources[i];
		putf(o, "%s{\"agent_id\":%u,\"pid\":%u,\"service\":", i ? "," : "", r->agent_id, r->pid);
		put_str(o, r->service ? r->service : "unknown_service");
		put(o, ",\"host\":", 8);
		put_str(o, r->host);
		put(o, ",\"attributes\":", 14);
		put_attrs(o, r->attrs, r->n_attrs);
		put(o, "}", 1);
	}
	put(o, "],\"spans\":[", 11);
	for (i = 0; i < t->n_spans; i++) {
		if (i)
			put(o, ",\n", 2);
		put_span(o, t, i);
	}
	put(o, "],\"loose_logs\":", 15);
	put_logs(o, t->loose_logs, t->n_loose_logs);
	put(o, "}", 1);
}

/* 32 hex digits, or the low 16 (hi = 0), not zero: as `retrace show` takes it. */
static void api_trace(struct rt_http_api *a, nng_aio *aio, const char *id)
{
	struct rt_store_trace row;
	uint32_t i;
	struct rt_decoded_trace t;
	struct out o = { 0 };
	struct rt_store *s;
	char err[1200];
	uint64_t hi, lo;
	int rc;
	if (rt_store_parse_trace_id(id, strlen(id), &hi, &lo) != 0) {
		send_error(a, aio, 400, "traceid",
			   "a trace id is 32 hex digits, or the low 16 (not zero)");
		return;
	}
	pthread_mutex_lock(&a->mu);
	if (!(s = store_of(a, err, sizeof err))) {
		pthread_mutex_unlock(&a->mu);
		send_error(a, aio, 503, NULL, "%s", err);
		return;
	}
	rc = rt_store_get_trace(s, hi, lo, &row);
	if (rc == RT_STORE_E_NOTFOUND) {
		pthread_mutex_unlock(&a->mu);
		send_error(a, aio, 404, "traceid", "no trace %s in the store", id);
		return;
	}
	if (rc != 0) {
		snprintf(err, sizeof err, "reading the store: %s", rt_store_errmsg(s));
		store_failed(a);
	} else if ((rc = rt_decode_stored(s, row.trace_hi, row.trace_lo, &t, err, sizeof err)) == 0) {
		load_names(a, s);
		/* names the trace carries itself, before the coordinator stored them */
		for (i = 0; i < t.n_trigger_names; i++)
			if (!name_of(&a->names, t.trigger_names[i].id))
				add_name(&a->names, t.trigger_names[i].id, t.trigger_names[i].name);
		put_trace(&o, &row, &t, &a->names);
		rt_decoded_trace_free(&t);
	}
	pthread_mutex_unlock(&a->mu);
	if (rc != 0)
		send_error(a, aio, 500, NULL, "%s", err);
	else
		send_json(a, aio, &o);
	free(o.p);
}

/* ---------------------------------------------------------- agents ---- */

struct agent_list {
	struct out *o;
	unsigned n;
};

static int put_agent(void *arg, const struct rt_store_agent *ag)
{
	struct agent_list *l = arg;
	struct out *o = l->o;
	putf(o, "%s{\"agent_id\":%u,\"host\":", l->n++ ? ",\n" : "", ag->agent_id);
	put_str(o, ag->host);
	put(o, ",\"address\":", 11);
	put_str(o, ag->control_addr);
	putf(o, ",\"pid\":%u,\"start_ns\":%" PRIu64 ",\"last_seen_ns\":%" PRIu64 "}", ag->pid,
	     ag->start_ns, ag->last_seen_ns);
	return 0;
}

static void api_agents(struct rt_http_api *a, nng_aio *aio, const char *query)
{
	struct out o = { 0 };
	struct agent_list l = { &o, 0 };
	struct rt_store *s;
	char err[1200];
	int rc;
	if (query && *query) {
		send_error(a, aio, 400, query, "/api/agents takes no parameters");
		return;
	}
	pthread_mutex_lock(&a->mu);
	if (!(s = store_of(a, err, sizeof err))) {
		pthread_mutex_unlock(&a->mu);
		send_error(a, aio, 503, NULL, "%s", err);
		return;
	}
	put(&o, "{\"agents\":[", 11);
	if ((rc = rt_store_agents(s, put_agent, &l)) != 0) {
		snprintf(err, sizeof err, "reading the store: %s", rt_store_errmsg(s));
		store_failed(a);
	}
	pthread_mutex_unlock(&a->mu);
	put(&o, "]}", 2);
	if (rc != 0)
		send_error(a, aio, 500, NULL, "%s", err);
	else
		send_json(a, aio, &o);
	free(o.p);
}

/* ---------------------------------------------------------- alarms ---- */

#define ALARM_NAME_MAX 127

/* One text request to the coordinator's control socket, as the CLI sends it.
 * The reply (malloc'd, NUL-terminated) or NULL with err. */
static char *ask_coordinator(const char *url, const char *text, char *err, size_t errlen)
{
	nng_socket s;
	char *reply = NULL, *copy;
	size_t len = 0;
	int rv;
	if ((rv = nng_req0_open(&s)) != 0) {
		snprintf(err, errlen, "cannot open a request socket: %s", nng_strerror(rv));
		return NULL;
	}
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, RT_OPERATOR_TIMEOUT_MS);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, RT_OPERATOR_TIMEOUT_MS);
	if ((rv = nng_dial(s, url, NULL, 0)) != 0 ||
	    (rv = nng_send(s, (void *)text, strlen(text) + 1, 0)) != 0 ||
	    (rv = nng_recv(s, &reply, &len, NNG_FLAG_ALLOC)) != 0) {
		snprintf(err, errlen, "the coordinator at %s did not answer: %s", url, nng_strerror(rv));
		rt_nng_close_bounded(s, RT_NNG_CLOSE_WAIT_MS);
		return NULL;
	}
	rt_nng_close_bounded(s, RT_NNG_CLOSE_WAIT_MS);
	if ((copy = malloc(len + 1)) != NULL) {
		memcpy(copy, reply, len);
		copy[len] = 0;
	} else {
		snprintf(err, errlen, "out of memory");
	}
	nng_free(reply, len);
	return copy;
}

/* The control URL into url and whether it runs TLS; -1 after answering 503. */
static int control_of(struct rt_http_api *a, nng_aio *aio, char *url, size_t cap, int *tls)
{
	pthread_mutex_lock(&a->mu);
	snprintf(url, cap, "%s", a->control);
	*tls = a->control_tls;
	pthread_mutex_unlock(&a->mu);
	if (!*url) {
		send_error(a, aio, 503, NULL, "the coordinator is still starting");
		return -1;
	}
	return 0;
}

/* The browser-side guards of a change (http_api.h). 0, or -1 after a 403. */
static int change_allowed(struct rt_http_api *a, nng_aio *aio, nng_http_req *req, int tls)
{
	const char *host = nng_http_req_get_header(req, "Host");
	const char *colon = strrchr(a->hostport, ':');
	char local[320];
	if (tls) {
		send_error(a, aio, 403, NULL, "this coordinator runs TLS: setting an alarm needs an "
			   "operator certificate (CN=operator-NAME); use retrace alarm --tls-ca ... "
			   "(docs/security.md)");
		return -1;
	}
	if (!a->loopback) {
		send_error(a, aio, 403, NULL, "alarms are set from the UI only when it listens on "
			   "loopback (as operator commands are taken only from loopback without TLS)");
		return -1;
	}
	if (!nng_http_req_get_header(req, "X-Retrace-Request")) {
		send_error(a, aio, 403, "X-Retrace-Request", "a change needs the header "
			   "X-Retrace-Request (no other site's page can send it)");
		return -1;
	}
	snprintf(local, sizeof local, "localhost%s", colon ? colon : "");
	if (!host || (strcmp(host, a->hostport) != 0 && strcmp(host, local) != 0)) {
		send_error(a, aio, 403, "Host", "the Host header must name this listener (%s)",
			   a->hostport);
		return -1;
	}
	return 0;
}

/* "alarm list"'s lines, "operator\tREMAINs\tSERVICE\tOPERATION" or
 * "trigger\tnext window\tGROUP\tKEY", as JSON objects. */
static void put_alarm_list(struct out *o, char *text)
{
	char *line, *save = NULL;
	int n = 0;
	put(o, "{\"alarms\":[", 11);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[4] = { 0 }, *p = line;
		int k;
		for (k = 0; k < 4 && p; k++) {
			f[k] = p;
			if ((p = strchr(p, '\t')) != NULL)
				*p++ = 0;
		}
		if (k < 4 || (strcmp(f[0], "operator") != 0 && strcmp(f[0], "trigger") != 0))
			continue; /* the "ok" line */
		put(o, n ? ",{\"kind\":" : "{\"kind\":", n ? 9 : 8);
		n++;
		put_str(o, f[0]);
		if (!strcmp(f[0], "operator")) {
			putf(o, ",\"remaining_s\":%.0f,\"service\":", strtod(f[1], NULL));
			put_str(o, f[2]);
			put(o, ",\"operation\":", 13);
			put_str(o, f[3]);
		} else {
			put(o, ",\"group\":", 9);
			put_str(o, f[2]);
			put(o, ",\"group_key\":", 13);
			put_str(o, f[3]);
		}
		put(o, "}", 1);
	}
	put(o, "]}", 2);
}

/* A service or operation name as `retrace alarm` takes it; NULL or why not. */
static const char *alarm_name(const char *v)
{
	return !*v || strchr(v, '\n') || strlen(v) > ALARM_NAME_MAX
		       ? "1..127 bytes without a newline"
		       : NULL;
}

static void api_alarms(struct rt_http_api *a, nng_aio *aio, nng_http_req *req, const char *query)
{
	const char *method = nng_http_req_get_method(req);
	char url[300], err[600], text[512], service[512] = "", operation[512] = "", bad[64] = "";
	const char *why = NULL;
	double secs = 300;
	char *reply;
	struct out o = { 0 };
	int tls, add = !strcmp(method, "POST"), clear = !strcmp(method, "DELETE");
	while (query && *query && !why) { /* service=, operation=, seconds= */
		const char *amp = strchr(query, '&'), *eq;
		size_t n = amp ? (size_t)(amp - query) : strlen(query), kn;
		char key[32], val[512], *end;
		eq = memchr(query, '=', n);
		kn = eq ? (size_t)(eq - query) : n;
		if (n && (url_decode(query, kn, key, sizeof key) != 0 ||
			  url_decode(eq ? eq + 1 : query + n, eq ? n - kn - 1 : 0, val, sizeof val) != 0)) {
			snprintf(bad, sizeof bad, "%.*s", (int)(kn < 60 ? kn : 60), query);
			why = "a malformed parameter";
		} else if (!n) {
		} else if (!strcmp(key, "service") || !strcmp(key, "operation")) {
			snprintf(key[0] == 's' ? service : operation, sizeof service, "%s", val);
			if ((why = alarm_name(val)) != NULL)
				snprintf(bad, sizeof bad, "%s", key);
		} else if (!strcmp(key, "seconds") && add) {
			errno = 0;
			secs = strtod(val, &end);
			if (errno || *end || end == val || !(secs >= 1) || secs > 1e7) {
				snprintf(bad, sizeof bad, "seconds");
				why = "a number of seconds 1..10000000";
			}
		} else {
			snprintf(bad, sizeof bad, "%s", key);
			why = add ? "unknown parameter (service, operation, seconds)"
			    : clear ? "unknown parameter (service, operation; none: clear all)"
				    : "/api/alarms takes no parameters";
		}
		query = amp ? amp + 1 : NULL;
	}
	if (!why && add && (!*service || !*operation)) {
		snprintf(bad, sizeof bad, "%s", *service ? "operation" : "service");
		why = "needed (the entry API to alarm: SERVICE and OPERATION)";
	}
	if (!why && clear && !*service != !*operation) {
		snprintf(bad, sizeof bad, "%s", *service ? "operation" : "service");
		why = "needed with the other (or neither: clear every alarm)";
	}
	if (why) {
		send_error(a, aio, 400, bad, "parameter %s: %s", bad, why);
		return;
	}
	if (control_of(a, aio, url, sizeof url, &tls) != 0)
		return;
	if ((add || clear) && change_allowed(a, aio, req, tls) != 0)
		return;
	if (tls && !add && !clear) {
		send_error(a, aio, 503, NULL, "this coordinator runs TLS: list its alarms with "
			   "retrace alarm --list --tls-ca ...");
		return;
	}
	if (add)
		snprintf(text, sizeof text, "alarm add %.0f\n%s\n%s", secs, service, operation);
	else if (clear && *service)
		snprintf(text, sizeof text, "alarm clear\n%s\n%s", service, operation);
	else
		snprintf(text, sizeof text, clear ? "alarm clear" : "alarm list");
	if (!(reply = ask_coordinator(url, text, err, sizeof err))) {
		send_error(a, aio, 502, NULL, "%s", err);
		return;
	}
	if (strncmp(reply, "ok", 2) != 0) { /* "error: ..." from the coordinator */
		const char *msg = !strncmp(reply, "error: ", 7) ? reply + 7 : reply;
		send_error(a, aio, strstr(msg, "not authorised") ? 403 : 409, NULL, "%s", msg);
	} else if (add || clear) {
		put(&o, "{\"ok\":", 6);
		put_str(&o, reply[2] == ' ' ? reply + 3 : "");
		put(&o, "}", 1);
		send_json(a, aio, &o);
	} else {
		put_alarm_list(&o, reply);
		send_json(a, aio, &o);
	}
	free(reply);
	free(o.p);
}

/* ---------------------------------------------------------- routing ---- */

/* GET /api/traces[?...], /api/traces/ID and /api/agents[?...]. */
/* ------------------------------------------------------- history ---- */

/* {"trigger_names": {"ID": NAME, ...}, "history": {...}} (docs/api.md). */
static void api_history(struct rt_http_api *a, nng_aio *aio, const char *query)
{
	struct coord_history *h;
	struct out o = { 0 };
	uint64_t since = 0;
	char key[32], val[64], err[300];
	const char *p = query;
	char *body;
	size_t len = 0;
	while (p && *p) { /* since=UNIX_MS, the only parameter */
		size_t n = strcspn(p, "&"), k = strcspn(p, "=");
		if (k > n || k >= sizeof key || n - k - 1 >= sizeof val) {
			send_error(a, aio, 400, NULL, "parameter: since=UNIX_MS is the only one");
			return;
		}
		memcpy(key, p, k);
		key[k] = 0;
		memcpy(val, p + k + 1, n - k - 1);
		val[n - k - 1] = 0;
		if (strcmp(key, "since") != 0) {
			send_error(a, aio, 400, key, "unknown parameter (since)");
			return;
		}
		if (*val && parse_u64(val, &since) != 0) {
			send_error(a, aio, 400, "since", "parameter since: a time in Unix milliseconds");
			return;
		}
		p += n + (p[n] == '&');
	}
	pthread_mutex_lock(&a->mu);
	h = a->history;
	if (!h) {
		pthread_mutex_unlock(&a->mu);
		send_error(a, aio, 404, NULL, "no history (--history-interval 0)");
		return;
	}
	put(&o, "{\"trigger_names\":{", 18);
	{
		struct rt_store *s = store_of(a, err, sizeof err);
		uint32_t i;
		if (s)
			load_names(a, s);
		else
			a->names.n = 0;
		for (i = 0; i < a->names.n; i++) {
			putf(&o, "%s\"%u\":", i ? "," : "", a->names.e[i].id);
			put_str(&o, a->names.e[i].name);
		}
		for (uint32_t b = RETRACE_TRIGGER_HEAD_SAMPLED; b <= RETRACE_TRIGGER_CRASH; b++) {
			putf(&o, "%s\"%u\":", (i || b != RETRACE_TRIGGER_HEAD_SAMPLED) ? "," : "", b);
			put_str(&o, retrace_builtin_trigger_name(b));
		}
	}
	pthread_mutex_unlock(&a->mu);
	if (!(body = coord_history_json(h, since, &len))) {
		free(o.p);
		send_error(a, aio, 500, NULL, "out of memory");
		return;
	}
	put(&o, "},\"history\":", 12);
	put(&o, body, len);
	put(&o, "}", 1);
	free(body);
	send_json(a, aio, &o);
	free(o.p);
}

static void on_api(nng_aio *aio)
{
	nng_http_req *req = nng_aio_get_input(aio, 0);
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	struct rt_http_api *a = nng_http_handler_get_data(h);
	const char *uri = nng_http_req_get_uri(req);
	char path[512];
	const char *query = strchr(uri, '?');
	size_t n = query ? (size_t)(query - uri) : strlen(uri);
	count(&a->st.requests);
	if (query)
		query++;
	if (n >= sizeof path) {
		send_error(a, aio, 404, NULL, "no such path");
		return;
	}
	memcpy(path, uri, n);
	path[n] = 0;
	while (n > 1 && path[n - 1] == '/') /* /api/traces/ is /api/traces */
		path[--n] = 0;
	if (!strcmp(path, "/api/traces")) {
		api_search(a, aio, query);
	} else if (!strncmp(path, "/api/traces/", 12)) {
		char id[80];
		if (url_decode(path + 12, strlen(path + 12), id, sizeof id) != 0 || strchr(id, '/'))
			send_error(a, aio, 400, "traceid",
				   "a trace id is 32 hex digits, or the low 16 (not zero)");
		else
			api_trace(a, aio, id);
	} else if (!strcmp(path, "/api/agents")) {
		api_agents(a, aio, query);
	} else if (!strcmp(path, "/api/alarms")) {
		api_alarms(a, aio, req, query);
	} else if (!strcmp(path, "/api/history")) {
		api_history(a, aio, query);
	} else {
		send_error(a, aio, 404, NULL,
			   "no such path (GET /api/traces, /api/traces/ID, /api/agents, /api/history, /api/status)");
	}
}

/* -------------------------------------------------- start and stop ---- */

int rt_http_api_check_url(const char *url, int insecure, char *err, size_t errlen)
{
	const char *a = strncmp(url, "http://", 7) == 0 ? url + 7 : NULL;
	const char *slash = a ? strchr(a, '/') : NULL;
	if (a && slash && strcmp(slash, "/") != 0) {
		snprintf(err, errlen, "--http-listen %s: give http://HOST:PORT without a path (the UI "
			 "is served at /, the API under /api/)", url);
		return -1;
	}
	return rt_metrics_check_url(url, "--http-listen", insecure, err, errlen);
}

static int add_handler(struct rt_http_api *a, const char *path, const char *method, int tree)
{
	nng_http_handler *h = NULL;
	int rv;
	if ((rv = nng_http_handler_alloc(&h, path, on_api)) != 0 ||
	    (rv = nng_http_handler_set_method(h, method)) != 0 ||
	    (tree && (rv = nng_http_handler_set_tree(h)) != 0) ||
	    (rv = nng_http_handler_set_data(h, a, NULL)) != 0 ||
	    (rv = rt_metrics_add_handler(a->listener, h)) != 0) {
		if (h)
			nng_http_handler_free(h);
		return rv;
	}
	return 0;
}

/* The UI's files, each at its path (index.html also at /). */
static int add_assets(struct rt_http_api *a)
{
	size_t i;
	for (i = 0; i < rt_ui_asset_count; i++) {
		const struct rt_ui_asset *f = &rt_ui_assets[i];
		nng_http_handler *h = NULL;
		int rv, k;
		for (k = 0; k < 2; k++) {
			const char *path = k ? "/" : f->path;
			if (k && strcmp(f->path, "/index.html") != 0)
				continue;
			if ((rv = nng_http_handler_alloc_static(&h, path, f->data, f->len,
								 f->content_type)) != 0 ||
			    (rv = rt_metrics_add_handler(a->listener, h)) != 0) {
				if (h)
					nng_http_handler_free(h);
				return rv;
			}
			h = NULL;
		}
	}
	return 0;
}

struct rt_http_api *rt_http_api_start(const char *url, int insecure, const char *store_path,
				      char *err, size_t errlen)
{
	struct rt_http_api *a;
	char status_url[320], tcp[320];
	const char *bound;
	size_t n;
	int rv;
	if (rt_http_api_check_url(url, insecure, err, errlen) != 0)
		return NULL;
	if (!(a = calloc(1, sizeof *a))) {
		snprintf(err, errlen, "--http-listen: out of memory");
		return NULL;
	}
	pthread_mutex_init(&a->mu, NULL);
	snprintf(a->store_path, sizeof a->store_path, "%s", store_path);
	n = strlen(url);
	snprintf(status_url, sizeof status_url, "%.*s/api/status",
		 (int)(n && url[n - 1] == '/' ? n - 1 : n), url);
	if (!(a->listener = rt_metrics_start_as(status_url, "--http-listen", insecure, JSON_TYPE,
						err, errlen))) {
		pthread_mutex_destroy(&a->mu);
		free(a);
		return NULL;
	}
	if ((rv = add_handler(a, "/api/traces", "GET", 1)) != 0 ||
	    (rv = add_handler(a, "/api/agents", "GET", 0)) != 0 ||
	    (rv = add_handler(a, "/api/history", "GET", 0)) != 0 ||
	    (rv = add_handler(a, "/api/alarms", "GET", 0)) != 0 ||
	    (rv = add_handler(a, "/api/alarms", "POST", 0)) != 0 ||
	    (rv = add_handler(a, "/api/alarms", "DELETE", 0)) != 0 || (rv = add_assets(a)) != 0) {
		snprintf(err, errlen, "--http-listen %s: cannot serve the UI: %s", url, nng_strerror(rv));
		rt_http_api_stop(a);
		return NULL;
	}
	bound = rt_metrics_url(a->listener); /* http://H:P/api/status */
	n = strlen(bound) - strlen("api/status");
	snprintf(a->url, sizeof a->url, "%.*s", (int)n, bound);
	snprintf(a->hostport, sizeof a->hostport, "%.*s", (int)(n - 8), bound + 7);
	snprintf(tcp, sizeof tcp, "tcp://%s", a->hostport);
	a->loopback = rt_url_is_local(tcp);
	return a;
}

void rt_http_api_set_history(struct rt_http_api *a, struct coord_history *h)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->mu);
	a->history = h;
	pthread_mutex_unlock(&a->mu);
}

void rt_http_api_set_control(struct rt_http_api *a, const char *url, int tls)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->mu);
	snprintf(a->control, sizeof a->control, "%s", url);
	a->control_tls = tls;
	pthread_mutex_unlock(&a->mu);
}

const char *rt_http_api_url(const struct rt_http_api *a)
{
	return a ? a->url : "";
}

struct rt_metrics *rt_http_api_status(struct rt_http_api *a)
{
	return a ? a->listener : NULL;
}

void rt_http_api_stats(const struct rt_http_api *a, struct rt_http_api_stats *out)
{
	memset(out, 0, sizeof *out);
	if (!a)
		return;
	out->requests = atomic_load_explicit(&a->st.requests, memory_order_relaxed);
	out->bad_requests = atomic_load_explicit(&a->st.bad_requests, memory_order_relaxed);
	out->not_found = atomic_load_explicit(&a->st.not_found, memory_order_relaxed);
	out->errors = atomic_load_explicit(&a->st.errors, memory_order_relaxed);
	out->refused = atomic_load_explicit(&a->st.refused, memory_order_relaxed);
}

void rt_http_api_stop(struct rt_http_api *a)
{
	if (!a)
		return;
	rt_metrics_stop(a->listener); /* waits for the handlers inside */
	pthread_mutex_lock(&a->mu);
	rt_store_close(a->store);
	a->store = NULL;
	pthread_mutex_unlock(&a->mu);
	pthread_mutex_destroy(&a->mu);
	free(a);
}
