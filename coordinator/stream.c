/*
 * coordinator/stream.c — continuous export: kept traces pushed to an OTLP/HTTP
 * collector as selection keeps them (--export-url), like an OpenTelemetry SDK's
 * BatchSpanProcessor, so a Jaeger/Tempo/Collector user needs no cron job.
 *
 * How it works. The loop thread notes each trace selection keeps
 * (coord_stream_note_kept) in a list of the turn; only after the turn's store
 * commit does it hand the list to the exporter (coord_stream_turn_done), so the
 * exporter never looks for a row that is not yet in the file, and a rolled-back
 * turn exports nothing. The exporter is a thread of its own with its own
 * read-only store connection (SQLite WAL: readers never block the loop's
 * writer). It waits until a batch is queued or --export-interval passed since
 * the oldest waiting trace, decodes the batch from the store and pushes it with
 * rt_export_push_traces (OTLP/JSON, gzip, requests of at most 4 MiB, retries
 * with back-off and Retry-After). The queue is bounded (--export-queue): a trace
 * that finds it full is dropped and counted, never waited for — the loop must
 * not stall behind a slow collector. A batch whose push failed after its
 * retries is dropped and counted too (the traces stay in the store: `retrace
 * export` can send them again). At close the queue is flushed for at most
 * STREAM_CLOSE_FLUSH_MS.
 *
 * Counters (retrace status, section "export"): queued now, enqueued, dropped
 * because the queue was full, exported traces and spans, pushes, push failures,
 * traces lost to failures, traces that did not decode, bytes on the wire.
 */
#include "coord_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/figures.h"
#include "export.h"

#define STREAM_CLOSE_FLUSH_MS 5000u

struct stream_id {
	uint64_t hi, lo;
};

struct coord_stream {
	char url[RT_COORD_URL_MAX];
	char store_path[RT_COORD_URL_MAX];
	uint32_t cap, batch;
	uint64_t interval_ns;

	/* The loop thread's list of the current turn (no lock: loop only). */
	struct stream_id *turn;
	uint32_t nturn, turn_cap;

	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct stream_id *ring; /* under mu */
	uint32_t head, len;
	uint64_t oldest_ns;     /* when the oldest queued trace was queued */
	int stop;

	/* Counters: written under mu (the thread) or by the loop; read by the loop. */
	uint64_t enqueued, dropped_full, exported, spans, pushes, push_failures, lost,
		undecodable, bytes_sent;
	char last_error[1024];
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void deadline_in(struct timespec *ts, uint64_t ns)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += (time_t)(ns / 1000000000ull);
	ts->tv_nsec += (long)(ns % 1000000000ull);
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Take up to x->batch ids once a batch is full, the interval has passed, or we
 * stop; 0 ids only when stopping with nothing left. Called and returns under mu. */
static uint32_t take_batch(struct coord_stream *x, struct stream_id *out)
{
	uint32_t n = 0;
	for (;;) {
		uint64_t now = mono_ns();
		if (x->len && (x->len >= x->batch || x->stop ||
			       now - x->oldest_ns >= x->interval_ns))
			break;
		if (x->stop)
			return 0;
		struct timespec ts;
		deadline_in(&ts, x->len ? x->interval_ns - (now - x->oldest_ns) : x->interval_ns);
		pthread_cond_timedwait(&x->cv, &x->mu, &ts);
	}
	while (n < x->batch && x->len) {
		out[n++] = x->ring[x->head];
		x->head = (x->head + 1) % x->cap;
		x->len--;
	}
	x->oldest_ns = mono_ns(); /* the rest waited at least this long: a fresh interval */
	return n;
}

static void push_batch(struct coord_stream *x, struct rt_store *s, const struct stream_id *ids,
		       uint32_t n, struct rt_decoded_trace *traces)
{
	struct rt_push_options opt = { 0 };
	struct rt_push_result res;
	char err[512];
	uint32_t i, ok = 0, bad = 0;
	size_t spans = 0;
	int rc;
	for (i = 0; i < n; i++) {
		if (rt_decode_stored(s, ids[i].hi, ids[i].lo, &traces[ok], err, sizeof err) != 0) {
			rt_decoded_trace_free(&traces[ok]);
			bad++;
			continue;
		}
		spans += traces[ok].n_spans;
		ok++;
	}
	memset(&res, 0, sizeof res);
	rc = ok ? rt_export_push_traces(x->url, traces, ok, &opt, &res, err, sizeof err) : 0;
	for (i = 0; i < ok; i++)
		rt_decoded_trace_free(&traces[i]);
	pthread_mutex_lock(&x->mu);
	x->undecodable += bad;
	x->pushes += res.requests;
	x->bytes_sent += res.bytes_sent;
	if (rc == 0) {
		x->exported += ok;
		x->spans += spans;
	} else {
		x->push_failures++;
		x->lost += ok;
		snprintf(x->last_error, sizeof x->last_error, "%s", err);
	}
	pthread_mutex_unlock(&x->mu);
}

static void *stream_main(void *arg)
{
	struct rt_coord *c = arg;
	struct coord_stream *x = c->stream;
	struct rt_store_options so = { .path = x->store_path, .readonly = 1 };
	struct rt_store *s = NULL;
	struct stream_id *ids = calloc(x->batch, sizeof *ids);
	struct rt_decoded_trace *traces = calloc(x->batch, sizeof *traces);
	uint32_t n;
	if (!ids || !traces || rt_store_open(&s, &so) != 0) {
		pthread_mutex_lock(&x->mu);
		snprintf(x->last_error, sizeof x->last_error, "cannot read the store %s: %s",
			 x->store_path, s ? rt_store_errmsg(s) : "out of memory");
		pthread_mutex_unlock(&x->mu);
		coord_log(c, LOG_ERROR, "export: %s; nothing will be exported", x->last_error);
		rt_store_close(s);
		free(ids);
		free(traces);
		return NULL;
	}
	pthread_mutex_lock(&x->mu);
	while ((n = take_batch(x, ids)) > 0) {
		pthread_mutex_unlock(&x->mu);
		push_batch(x, s, ids, n, traces);
		pthread_mutex_lock(&x->mu);
	}
	pthread_mutex_unlock(&x->mu);
	rt_store_close(s);
	free(ids);
	free(traces);
	return NULL;
}

int coord_stream_open(struct rt_coord *c, char *err, size_t errlen)
{
	struct coord_stream *x;
	if (!c->cfg.export_url[0])
		return 0;
	if (strncmp(c->cfg.export_url, "http://", 7) != 0) {
		snprintf(err, errlen, "--export-url %s: want http://HOST:PORT[/PATH] (OTLP/HTTP)",
			 c->cfg.export_url);
		return -1;
	}
	if (!(x = calloc(1, sizeof *x))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(x->url, sizeof x->url, "%s", c->cfg.export_url);
	snprintf(x->store_path, sizeof x->store_path, "%s", rt_store_path(c->store));
	x->cap = c->cfg.export_queue ? c->cfg.export_queue : 2048;
	x->batch = c->cfg.export_batch ? c->cfg.export_batch : 128;
	if (x->batch > x->cap)
		x->batch = x->cap;
	x->interval_ns = (uint64_t)((c->cfg.export_interval > 0 ? c->cfg.export_interval : 1.0) * 1e9);
	x->ring = calloc(x->cap, sizeof *x->ring);
	pthread_mutex_init(&x->mu, NULL);
	{
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&x->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	c->stream = x;
	if (!x->ring || pthread_create(&x->thread, NULL, stream_main, c) != 0) {
		snprintf(err, errlen, "cannot start the exporter");
		coord_stream_close(c);
		return -1;
	}
	x->started = 1;
	return 0;
}

void coord_stream_note_kept(struct rt_coord *c, uint64_t hi, uint64_t lo)
{
	struct coord_stream *x = c->stream;
	if (!x)
		return;
	if (x->nturn == x->turn_cap) {
		uint32_t cap = x->turn_cap ? x->turn_cap * 2 : 256;
		struct stream_id *v = realloc(x->turn, cap * sizeof *v);
		if (!v) { /* no memory to remember it: counted as a full queue */
			pthread_mutex_lock(&x->mu);
			x->dropped_full++;
			pthread_mutex_unlock(&x->mu);
			return;
		}
		x->turn = v;
		x->turn_cap = cap;
	}
	x->turn[x->nturn++] = (struct stream_id){ hi, lo };
}

void coord_stream_turn_done(struct rt_coord *c, int committed)
{
	struct coord_stream *x = c->stream;
	uint32_t i;
	if (!x || !x->nturn)
		return;
	if (committed) {
		pthread_mutex_lock(&x->mu);
		for (i = 0; i < x->nturn; i++) {
			if (x->len == x->cap) {
				x->dropped_full++;
				continue;
			}
			if (!x->len)
				x->oldest_ns = mono_ns();
			x->ring[(x->head + x->len) % x->cap] = x->turn[i];
			x->len++;
			x->enqueued++;
		}
		if (x->len >= x->batch)
			pthread_cond_signal(&x->cv);
		pthread_mutex_unlock(&x->mu);
	}
	x->nturn = 0;
}

void coord_stream_close(struct rt_coord *c)
{
	struct coord_stream *x = c->stream;
	if (!x)
		return;
	if (x->started) {
		struct timespec until;
		pthread_mutex_lock(&x->mu);
		x->stop = 1; /* the thread pushes what is queued, then ends */
		pthread_cond_signal(&x->cv);
		pthread_mutex_unlock(&x->mu);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += STREAM_CLOSE_FLUSH_MS / 1000;
		if (pthread_timedjoin_np(x->thread, NULL, &until) != 0) {
			/* Bounded: a collector that does not answer cannot hold a stop. The
			 * thread keeps x (never c) until the process ends. */
			coord_log(c, LOG_WARN, "export: traces still queued after %u ms at stop: "
				  "not flushed", STREAM_CLOSE_FLUSH_MS);
			pthread_detach(x->thread);
			c->stream = NULL;
			return;
		}
	}
	if (x->lost || x->dropped_full)
		coord_log(c, LOG_WARN, "export: %llu traces exported, %llu dropped (queue full), "
			  "%llu lost to failed pushes%s%s", (unsigned long long)x->exported,
			  (unsigned long long)x->dropped_full, (unsigned long long)x->lost,
			  x->last_error[0] ? "; last error: " : "", x->last_error);
	pthread_mutex_destroy(&x->mu);
	pthread_cond_destroy(&x->cv);
	free(x->ring);
	free(x->turn);
	free(x);
	c->stream = NULL;
}

void coord_stream_figures(struct rt_figures *w, struct rt_coord *c)
{
	struct coord_stream *x = c->stream;
	if (!x)
		return;
	pthread_mutex_lock(&x->mu);
	rt_fig_section(w, "export");
	rt_fig_str(w, "url", x->url);
	rt_fig_gauge(w, "queued", x->len);
	rt_fig_gauge(w, "queue_capacity", x->cap);
	rt_fig_u64(w, "enqueued", x->enqueued);
	rt_fig_u64(w, "dropped_queue_full", x->dropped_full);
	rt_fig_u64(w, "exported_traces", x->exported);
	rt_fig_u64(w, "exported_spans", x->spans);
	rt_fig_u64(w, "requests", x->pushes);
	rt_fig_u64(w, "push_failures", x->push_failures);
	rt_fig_u64(w, "traces_lost", x->lost);
	rt_fig_u64(w, "traces_undecodable", x->undecodable);
	rt_fig_u64(w, "bytes_sent", x->bytes_sent);
	rt_fig_str(w, "last_error", x->last_error[0] ? x->last_error : "none");
	pthread_mutex_unlock(&x->mu);
}
