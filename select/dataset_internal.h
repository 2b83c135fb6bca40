/* dataset_internal.h — the dataset object and helpers shared by the readers. */
#ifndef RETRACE_SELECT_DATASET_INTERNAL_H
#define RETRACE_SELECT_DATASET_INTERNAL_H

#include "select.h"

typedef struct rt_sel_raw_span {
	uint64_t trace_hi, trace_lo, span_id, parent_id;
	const char *service, *operation; /* interned */
	uint64_t start_ns, end_ns;
	bool has_parent, error;
} rt_sel_raw_span;

typedef struct rt_sel_raw_log {
	uint64_t trace_hi, trace_lo, span_id, ts_ns;
	const char *text;     /* arena */
	uint32_t template_id; /* tracer-given (folded, < 2^31), 0 = mine with Drain */
	uint8_t level;
} rt_sel_raw_log;

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
	rt_sel_read_stats stats; /* rows read and skipped by the CSV reader */
};

char *rt_sel_ds_strdup(rt_sel_dataset *ds, const char *s, size_t n);
const char *rt_sel_ds_intern(rt_sel_dataset *ds, const char *s, size_t n);
int rt_sel_ds_add_span(rt_sel_dataset *ds, const rt_sel_raw_span *r);
int rt_sel_ds_add_log(rt_sel_dataset *ds, const rt_sel_raw_log *r);
/* Sort, deduplicate and build traces; frees the staging arrays. */
int rt_sel_ds_finish(rt_sel_dataset *ds, char *err, size_t errlen);
void rt_sel_ds_error(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Sorted list of DIR/<name> paths ending in suffix; -1 if DIR cannot be opened. */
int rt_sel_ds_list(const char *dir, const char *suffix, char ***out, size_t *n);
void rt_sel_ds_list_free(char **v, size_t n);
/* Parse up to 16 hex digits; 32 digits fill hi and lo. Returns false on bad input. */
bool rt_sel_ds_parse_hex_id(const char *s, size_t n, uint64_t *hi, uint64_t *lo);

#endif
