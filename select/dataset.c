/* dataset.c — the in-memory dataset a reader fills (dataset_build.h).
 *
 * A reader adds flat records (trace id, span id, …) for every span and log;
 * finishing sorts them by (trace, span, time), drops duplicates (the same span or
 * log in two minute files) and makes each run of one trace id an rt_sel_trace whose
 * spans, parent indices and per-span log slices point into dataset-owned arrays.
 * Service and operation names are interned; log texts live in a chunked string
 * arena. Traces are ordered by start time, and finally spans, logs and texts are
 * copied into that order (relayout). The readers of files (Nezha CSV, OTLP/JSON)
 * live in tools/select_eval/: select/ only holds what the evaluation (eval.c)
 * replays.
 */
#include "dataset_build.h"
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

struct rt_sel_dataset {
	rt_sel_trace *traces;
	size_t n_traces;
	rt_sel_span *spans;
	size_t n_spans;
	rt_sel_log *logs;
	size_t n_logs;
	/* strings */
	char **chunks;
	size_t n_chunks, chunks_cap;
	char *chunk;
	size_t chunk_used, chunk_size;
	const char **names; /* intern table, open addressing */
	size_t names_cap, n_names;
	/* reader staging */
	rt_sel_raw_span *raw_spans;
	size_t n_raw_spans, raw_spans_cap;
	rt_sel_raw_log *raw_logs;
	size_t n_raw_logs, raw_logs_cap;
	rt_sel_read_stats stats; /* rows read and skipped by the reader */
};

rt_sel_dataset *rt_sel_ds_new(void)
{
	return calloc(1, sizeof(rt_sel_dataset));
}

rt_sel_read_stats *rt_sel_ds_stats(rt_sel_dataset *ds)
{
	return &ds->stats;
}

/* ---------------------------------------------------------------- arena + interning */

#define ARENA_CHUNK (1u << 20)

char *rt_sel_ds_strdup(rt_sel_dataset *ds, const char *s, size_t n)
{
	if (!ds->chunk || ds->chunk_used + n + 1 > ds->chunk_size) {
		size_t size = n + 1 > ARENA_CHUNK ? n + 1 : ARENA_CHUNK;
		if (rt_sel_grow((void **)&ds->chunks, &ds->chunks_cap, ds->n_chunks + 1,
				sizeof *ds->chunks))
			return NULL;
		char *c = malloc(size);
		if (!c)
			return NULL;
		ds->chunks[ds->n_chunks++] = c;
		ds->chunk = c;
		ds->chunk_size = size;
		ds->chunk_used = 0;
	}
	char *r = ds->chunk + ds->chunk_used;
	memcpy(r, s, n);
	r[n] = '\0';
	ds->chunk_used += n + 1;
	return r;
}

const char *rt_sel_ds_intern(rt_sel_dataset *ds, const char *s, size_t n)
{
	if ((ds->n_names + 1) * 2 > ds->names_cap) {
		size_t ncap = ds->names_cap ? ds->names_cap * 2 : 256;
		const char **nt = calloc(ncap, sizeof *nt);
		if (!nt)
			return NULL;
		for (size_t i = 0; i < ds->names_cap; i++) {
			if (!ds->names[i])
				continue;
			size_t j = rt_sel_hash_str(ds->names[i], 0) & (ncap - 1);
			while (nt[j])
				j = (j + 1) & (ncap - 1);
			nt[j] = ds->names[i];
		}
		free(ds->names);
		ds->names = nt;
		ds->names_cap = ncap;
	}
	size_t j = rt_sel_hash_bytes(s, n, 0) & (ds->names_cap - 1);
	while (ds->names[j]) {
		if (strncmp(ds->names[j], s, n) == 0 && ds->names[j][n] == '\0')
			return ds->names[j];
		j = (j + 1) & (ds->names_cap - 1);
	}
	char *c = malloc(n + 1); /* names apart from the text arena, which relayout replaces */
	if (!c)
		return NULL;
	memcpy(c, s, n);
	c[n] = '\0';
	ds->names[j] = c;
	ds->n_names++;
	return c;
}

void rt_sel_dataset_free(rt_sel_dataset *ds)
{
	if (!ds)
		return;
	for (size_t i = 0; i < ds->n_chunks; i++)
		free(ds->chunks[i]);
	free(ds->chunks);
	for (size_t i = 0; i < ds->names_cap; i++)
		free((char *)ds->names[i]);
	free(ds->names);
	free(ds->traces);
	free(ds->spans);
	free(ds->logs);
	free(ds->raw_spans);
	free(ds->raw_logs);
	free(ds);
}

size_t rt_sel_dataset_count(const rt_sel_dataset *ds)
{
	return ds->n_traces;
}
rt_sel_trace *rt_sel_dataset_trace(rt_sel_dataset *ds, size_t i)
{
	return &ds->traces[i];
}
size_t rt_sel_dataset_spans(const rt_sel_dataset *ds)
{
	return ds->n_spans;
}
size_t rt_sel_dataset_logs(const rt_sel_dataset *ds)
{
	return ds->n_logs;
}
void rt_sel_dataset_read_stats(const rt_sel_dataset *ds, rt_sel_read_stats *out)
{
	*out = ds->stats;
}

void rt_sel_ds_error(char *err, size_t len, const char *fmt, ...)
{
	if (!err || !len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

/* ---------------------------------------------------------------- raw records */

int rt_sel_ds_add_span(rt_sel_dataset *ds, const rt_sel_raw_span *r)
{
	if (rt_sel_grow((void **)&ds->raw_spans, &ds->raw_spans_cap, ds->n_raw_spans + 1,
			sizeof *ds->raw_spans))
		return -1;
	ds->raw_spans[ds->n_raw_spans++] = *r;
	return 0;
}

int rt_sel_ds_add_log(rt_sel_dataset *ds, const rt_sel_raw_log *r)
{
	if (rt_sel_grow((void **)&ds->raw_logs, &ds->raw_logs_cap, ds->n_raw_logs + 1,
			sizeof *ds->raw_logs))
		return -1;
	ds->raw_logs[ds->n_raw_logs++] = *r;
	return 0;
}

static int cmp_id(uint64_t ah, uint64_t al, uint64_t bh, uint64_t bl)
{
	if (ah != bh)
		return ah < bh ? -1 : 1;
	if (al != bl)
		return al < bl ? -1 : 1;
	return 0;
}

static int by_trace_span(const void *x, const void *y)
{
	const rt_sel_raw_span *a = x, *b = y;
	int c = cmp_id(a->trace_hi, a->trace_lo, b->trace_hi, b->trace_lo);
	if (c)
		return c;
	if (a->span_id != b->span_id)
		return a->span_id < b->span_id ? -1 : 1;
	return 0;
}

static int log_cmp(const rt_sel_raw_log *a, const rt_sel_raw_log *b)
{
	int c = cmp_id(a->trace_hi, a->trace_lo, b->trace_hi, b->trace_lo);
	if (c)
		return c;
	if (a->span_id != b->span_id)
		return a->span_id < b->span_id ? -1 : 1;
	if (a->ts_ns != b->ts_ns)
		return a->ts_ns < b->ts_ns ? -1 : 1;
	return strcmp(a->text ? a->text : "", b->text ? b->text : "");
}

static int by_trace_span_time(const void *x, const void *y)
{
	return log_cmp(x, y);
}

static int by_start(const void *x, const void *y)
{
	const rt_sel_trace *a = x, *b = y;
	uint64_t sa = a->n_spans ? a->spans[rt_sel_trace_root(a)].start_ns : 0;
	uint64_t sb = b->n_spans ? b->spans[rt_sel_trace_root(b)].start_ns : 0;
	if (sa != sb)
		return sa < sb ? -1 : 1;
	return cmp_id(a->id_hi, a->id_lo, b->id_hi, b->id_lo);
}

static size_t dedupe_spans(rt_sel_raw_span *v, size_t n)
{
	size_t w = 0;
	for (size_t r = 0; r < n; r++)
		if (w == 0 || by_trace_span(&v[w - 1], &v[r]) != 0)
			v[w++] = v[r];
	return w;
}

static size_t dedupe_logs(rt_sel_raw_log *v, size_t n)
{
	size_t w = 0;
	for (size_t r = 0; r < n; r++)
		if (w == 0 || log_cmp(&v[w - 1], &v[r]) != 0)
			v[w++] = v[r];
	return w;
}

/* Index of span_id among a trace's spans sorted by span id, or -1. */
static int32_t find_span(const rt_sel_raw_span *spans, size_t n, uint64_t span_id)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (spans[mid].span_id < span_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && spans[lo].span_id == span_id ? (int32_t)lo : -1;
}

/* First raw log at or after (trace, span). */
static size_t first_log_of(const rt_sel_dataset *ds, uint64_t hi, uint64_t lo, uint64_t span)
{
	size_t a = 0, b = ds->n_raw_logs;
	while (a < b) {
		size_t mid = (a + b) / 2;
		const rt_sel_raw_log *l = &ds->raw_logs[mid];
		int c = cmp_id(l->trace_hi, l->trace_lo, hi, lo);
		if (c < 0 || (c == 0 && l->span_id < span))
			a = mid + 1;
		else
			b = mid;
	}
	return a;
}

static void build_trace(rt_sel_dataset *ds, const rt_sel_raw_span *raw, size_t n)
{
	rt_sel_trace *t = &ds->traces[ds->n_traces++];
	t->id_hi = raw[0].trace_hi;
	t->id_lo = raw[0].trace_lo;
	t->spans = &ds->spans[ds->n_spans];
	t->n_spans = (uint32_t)n;
	t->logs = &ds->logs[ds->n_logs];
	t->n_logs = 0;
	for (size_t i = 0; i < n; i++) {
		rt_sel_span *s = &t->spans[i];
		s->service = raw[i].service;
		s->operation = raw[i].operation;
		s->start_ns = raw[i].start_ns;
		s->end_ns = raw[i].end_ns;
		s->error = raw[i].error;
		s->parent = raw[i].has_parent ? find_span(raw, n, raw[i].parent_id) : -1;
		if (s->parent == (int32_t)i)
			s->parent = -1;
		s->first_log = t->n_logs;
		size_t l = first_log_of(ds, t->id_hi, t->id_lo, raw[i].span_id);
		for (; l < ds->n_raw_logs; l++) {
			const rt_sel_raw_log *rl = &ds->raw_logs[l];
			if (rl->trace_hi != t->id_hi || rl->trace_lo != t->id_lo ||
			    rl->span_id != raw[i].span_id)
				break;
			t->logs[t->n_logs++] = (rt_sel_log){ .ts_ns = rl->ts_ns,
							     .text = rl->text,
							     .template_id = rl->template_id,
							     .level = rl->level };
		}
		s->n_logs = t->n_logs - s->first_log;
	}
	ds->n_spans += n;
	ds->n_logs += t->n_logs;
}

/* Lay spans, logs and log texts out in trace order (by start time, the order of a
 * replay), one trace's data together, as the coordinator holds a collected trace (its
 * decoded slices). Read in file order, a trace's ~40 log lines are scattered over a
 * minute's file and every line is a cold cache and TLB miss for whoever reads the trace
 * next. Texts move into one block that replaces the text arena. */
static int relayout(rt_sel_dataset *ds)
{
	size_t bytes = 0;
	for (size_t l = 0; l < ds->n_logs; l++)
		if (ds->logs[l].text)
			bytes += strlen(ds->logs[l].text) + 1;
	rt_sel_span *spans = malloc((ds->n_spans ? ds->n_spans : 1) * sizeof *spans);
	rt_sel_log *logs = malloc((ds->n_logs ? ds->n_logs : 1) * sizeof *logs);
	char *text = malloc(bytes ? bytes : 1);
	char **chunks = malloc(sizeof *chunks);
	if (!spans || !logs || !text || !chunks) {
		free(spans);
		free(logs);
		free(text);
		free(chunks);
		return -1;
	}
	size_t ns = 0, nl = 0, used = 0;
	for (size_t i = 0; i < ds->n_traces; i++) {
		rt_sel_trace *t = &ds->traces[i];
		memcpy(spans + ns, t->spans, t->n_spans * sizeof *spans);
		t->spans = spans + ns;
		ns += t->n_spans;
		for (uint32_t l = 0; l < t->n_logs; l++) {
			rt_sel_log g = t->logs[l];
			if (g.text) {
				size_t k = strlen(g.text) + 1;
				memcpy(text + used, g.text, k);
				g.text = text + used;
				g.text_len = k - 1 < UINT16_MAX ? (uint16_t)(k - 1) : 0;
				used += k;
			}
			logs[nl + l] = g;
		}
		t->logs = logs + nl;
		nl += t->n_logs;
	}
	for (size_t i = 0; i < ds->n_chunks; i++)
		free(ds->chunks[i]);
	free(ds->chunks);
	chunks[0] = text;
	ds->chunks = chunks;
	ds->n_chunks = ds->chunks_cap = 1;
	ds->chunk = NULL; /* full: a later strdup starts a new chunk */
	free(ds->spans);
	free(ds->logs);
	ds->spans = spans;
	ds->logs = logs;
	return 0;
}

int rt_sel_ds_finish(rt_sel_dataset *ds, char *err, size_t errlen)
{
	/* qsort wants a valid pointer even for no elements: a reader may add no logs. */
	if (ds->n_raw_spans)
		qsort(ds->raw_spans, ds->n_raw_spans, sizeof *ds->raw_spans, by_trace_span);
	ds->n_raw_spans = dedupe_spans(ds->raw_spans, ds->n_raw_spans);
	if (ds->n_raw_logs)
		qsort(ds->raw_logs, ds->n_raw_logs, sizeof *ds->raw_logs, by_trace_span_time);
	ds->n_raw_logs = dedupe_logs(ds->raw_logs, ds->n_raw_logs);
	size_t ntr = 0;
	for (size_t i = 0; i < ds->n_raw_spans; i++)
		ntr += i == 0 ||
		       cmp_id(ds->raw_spans[i].trace_hi, ds->raw_spans[i].trace_lo,
			      ds->raw_spans[i - 1].trace_hi, ds->raw_spans[i - 1].trace_lo) != 0;
	ds->traces = calloc(ntr ? ntr : 1, sizeof *ds->traces);
	ds->spans = calloc(ds->n_raw_spans ? ds->n_raw_spans : 1, sizeof *ds->spans);
	ds->logs = calloc(ds->n_raw_logs ? ds->n_raw_logs : 1, sizeof *ds->logs);
	if (!ds->traces || !ds->spans || !ds->logs) {
		rt_sel_ds_error(err, errlen, "out of memory building %zu traces", ntr);
		return -1;
	}
	for (size_t i = 0; i < ds->n_raw_spans;) {
		size_t j = i + 1;
		while (j < ds->n_raw_spans &&
		       cmp_id(ds->raw_spans[j].trace_hi, ds->raw_spans[j].trace_lo,
			      ds->raw_spans[i].trace_hi, ds->raw_spans[i].trace_lo) == 0)
			j++;
		build_trace(ds, &ds->raw_spans[i], j - i);
		i = j;
	}
	qsort(ds->traces, ds->n_traces, sizeof *ds->traces, by_start);
	if (relayout(ds)) {
		rt_sel_ds_error(err, errlen, "out of memory laying out %zu traces", ds->n_traces);
		return -1;
	}
	free(ds->raw_spans);
	free(ds->raw_logs);
	ds->raw_spans = NULL;
	ds->raw_logs = NULL;
	if (ds->n_traces == 0) {
		rt_sel_ds_error(err, errlen, "no traces found");
		return -1;
	}
	return 0;
}
