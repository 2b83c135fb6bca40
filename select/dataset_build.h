/*
 * select/dataset_build.h — how a reader fills an rt_sel_dataset: the interface
 * select/ gives the dataset readers in tools/select_eval/ (Nezha CSV, OTLP/JSON).
 *
 * Owns: nothing a reader holds; the dataset (select.h's opaque rt_sel_dataset)
 * owns every string and record added to it.
 *
 * Promises: a reader makes a dataset (rt_sel_ds_new), adds one raw record per
 * span and per log in any order and with duplicates (the same span in two
 * files), with names interned and texts copied into the dataset's arena, counts
 * what it read and skipped in rt_sel_ds_stats, and calls rt_sel_ds_finish once:
 * records are sorted by (trace, span, time), duplicates dropped, one rt_sel_trace
 * built per trace id, traces ordered by start. Everything returns -1 (or NULL)
 * only when out of memory; the dataset is then still freed by
 * rt_sel_dataset_free. The coordinator never uses this: it fills rt_sel_trace
 * itself.
 */
#ifndef RETRACE_SELECT_DATASET_BUILD_H
#define RETRACE_SELECT_DATASET_BUILD_H

#include "select.h"

typedef struct rt_sel_raw_span {
	uint64_t trace_hi, trace_lo, span_id, parent_id;
	const char *service, *operation; /* interned (rt_sel_ds_intern) */
	uint64_t start_ns, end_ns;
	bool has_parent, error;
} rt_sel_raw_span;

typedef struct rt_sel_raw_log {
	uint64_t trace_hi, trace_lo, span_id, ts_ns;
	const char *text;     /* in the dataset's arena (rt_sel_ds_strdup) */
	uint32_t template_id; /* tracer-given (folded, < 2^31), 0 = mine with Drain */
	uint8_t level;
} rt_sel_raw_log;

/* An empty dataset, or NULL. */
rt_sel_dataset *rt_sel_ds_new(void);
/* The reader's counts (rt_sel_read_stats), to write while reading. */
rt_sel_read_stats *rt_sel_ds_stats(rt_sel_dataset *ds);
/* s[0, n) copied into the arena, NUL-terminated. */
char *rt_sel_ds_strdup(rt_sel_dataset *ds, const char *s, size_t n);
/* s[0, n) interned: equal names share one pointer. */
const char *rt_sel_ds_intern(rt_sel_dataset *ds, const char *s, size_t n);
int rt_sel_ds_add_span(rt_sel_dataset *ds, const rt_sel_raw_span *r);
int rt_sel_ds_add_log(rt_sel_dataset *ds, const rt_sel_raw_log *r);
/* Sort, deduplicate and build traces; frees the staging arrays. -1 with a
 * message in err when out of memory or when no trace was added. */
int rt_sel_ds_finish(rt_sel_dataset *ds, char *err, size_t errlen);
/* printf into err (when err and len are set): the readers' and finish's messages. */
void rt_sel_ds_error(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Grow *arr (element size elem) to hold at least need elements; 0 or -1.
 * (select/'s own growth helper, encode.c, also declared in its internal.h.) */
int rt_sel_grow(void **arr, size_t *cap, size_t need, size_t elem);

#endif
