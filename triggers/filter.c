/*
 * filter.c — tail-sampling style predicates over a request summary.
 *
 * A filter is a node of a tree built once: a leaf compares one field of a
 * retrace_span_summary (latency, status, an attribute, the trace id's
 * consistent hash) or takes a rate-limit token; AND/OR/NOT nodes combine their
 * children with short-circuit evaluation. Keys and strings are copied at
 * creation, so matching reads only the node and the summary.
 *
 * Threads: every node is read-only after creation except the rate limit, which
 * is a GCRA limiter on one atomic 64-bit word (the theoretical arrival time of
 * the next allowed match), advanced by compare-and-swap.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

enum filter_kind {
	F_LATENCY,
	F_STATUS,
	F_NUMERIC,
	F_STRING,
	F_PROBABILISTIC,
	F_RATE_LIMIT,
	F_AND,
	F_OR,
	F_NOT,
};

struct retrace_filter {
	enum filter_kind kind;
	size_t n; /* values or children */
	union {
		struct {
			uint64_t min_ns, max_ns;
		} latency;
		int codes[RETRACE_FILTER_MAX_VALUES];
		struct {
			char *key;
			double min, max;
		} numeric;
		struct {
			char *key;
			char *values[RETRACE_FILTER_MAX_VALUES];
			int invert;
		} string;
		uint64_t hash_below; /* UINT64_MAX with all_pass: everything */
		struct {
			uint64_t interval_ns; /* between matches on average */
			uint64_t burst_ns;    /* how far ahead the arrival time may run */
			_Atomic uint64_t next_ns;
		} rate;
		struct retrace_filter *children[RETRACE_FILTER_MAX_CHILDREN];
	} u;
	int all_pass;
};

static struct retrace_filter *filter_new(enum filter_kind kind)
{
	struct retrace_filter *f = calloc(1, sizeof *f);
	if (f)
		f->kind = kind;
	return f;
}

/* ------------------------------------------------------------ leaves ---- */

struct retrace_filter *retrace_filter_latency(uint64_t min_ns, uint64_t max_ns)
{
	struct retrace_filter *f = filter_new(F_LATENCY);
	if (f) {
		f->u.latency.min_ns = min_ns;
		f->u.latency.max_ns = max_ns;
	}
	return f;
}

struct retrace_filter *retrace_filter_status(const int *codes, size_t n)
{
	if (n == 0 || n > RETRACE_FILTER_MAX_VALUES || !codes)
		return NULL;
	struct retrace_filter *f = filter_new(F_STATUS);
	if (f) {
		memcpy(f->u.codes, codes, n * sizeof *codes);
		f->n = n;
	}
	return f;
}

struct retrace_filter *retrace_filter_numeric(const char *key, double min, double max)
{
	if (!key || !(min <= max))
		return NULL;
	struct retrace_filter *f = filter_new(F_NUMERIC);
	if (!f)
		return NULL;
	f->u.numeric.key = strdup(key);
	f->u.numeric.min = min;
	f->u.numeric.max = max;
	if (!f->u.numeric.key) {
		free(f);
		return NULL;
	}
	return f;
}

struct retrace_filter *retrace_filter_string(const char *key,
					     const char *const *values, size_t n,
					     int invert)
{
	if (!key || n == 0 || n > RETRACE_FILTER_MAX_VALUES || !values)
		return NULL;
	struct retrace_filter *f = filter_new(F_STRING);
	if (!f)
		return NULL;
	f->u.string.invert = invert;
	f->u.string.key = strdup(key);
	int ok = f->u.string.key != NULL;
	for (size_t i = 0; i < n && ok; i++) {
		f->u.string.values[i] = values[i] ? strdup(values[i]) : NULL;
		ok = f->u.string.values[i] != NULL;
		f->n = i + 1;
	}
	if (!ok) {
		retrace_filter_free(f);
		return NULL;
	}
	return f;
}

struct retrace_filter *retrace_filter_probabilistic(double fraction)
{
	if (!(fraction >= 0.0 && fraction <= 1.0))
		return NULL;
	struct retrace_filter *f = filter_new(F_PROBABILISTIC);
	if (!f)
		return NULL;
	if (fraction >= 1.0)
		f->all_pass = 1;
	else
		f->u.hash_below = (uint64_t)ldexp(fraction, 64);
	return f;
}

struct retrace_filter *retrace_filter_rate_limit(double per_second, double burst)
{
	if (!(per_second > 0.0) || !(burst >= 1.0))
		return NULL;
	struct retrace_filter *f = filter_new(F_RATE_LIMIT);
	if (!f)
		return NULL;
	double interval = 1e9 / per_second;
	f->u.rate.interval_ns = interval < 1.0 ? 1u : (uint64_t)interval;
	f->u.rate.burst_ns = (uint64_t)(interval * (burst - 1.0));
	atomic_init(&f->u.rate.next_ns, 0);
	return f;
}

/* ------------------------------------------------------- composition ---- */

static struct retrace_filter *filter_node(enum filter_kind kind,
					  struct retrace_filter *const *children,
					  size_t n)
{
	struct retrace_filter *f = NULL;
	int bad = n == 0 || n > RETRACE_FILTER_MAX_CHILDREN || !children;
	for (size_t i = 0; !bad && i < n; i++)
		bad = children[i] == NULL;
	if (!bad)
		f = filter_new(kind);
	if (!f) {
		for (size_t i = 0; children && i < n; i++)
			retrace_filter_free(children[i]);
		return NULL;
	}
	memcpy(f->u.children, children, n * sizeof *children);
	f->n = n;
	return f;
}

struct retrace_filter *retrace_filter_and(struct retrace_filter *const *children,
					  size_t n)
{
	return filter_node(F_AND, children, n);
}

struct retrace_filter *retrace_filter_or(struct retrace_filter *const *children,
					 size_t n)
{
	return filter_node(F_OR, children, n);
}

struct retrace_filter *retrace_filter_not(struct retrace_filter *child)
{
	return filter_node(F_NOT, &child, 1);
}

void retrace_filter_free(struct retrace_filter *f)
{
	if (!f)
		return;
	switch (f->kind) {
	case F_NUMERIC:
		free(f->u.numeric.key);
		break;
	case F_STRING:
		free(f->u.string.key);
		for (size_t i = 0; i < f->n; i++)
			free(f->u.string.values[i]);
		break;
	case F_AND:
	case F_OR:
	case F_NOT:
		for (size_t i = 0; i < f->n; i++)
			retrace_filter_free(f->u.children[i]);
		break;
	default:
		break;
	}
	free(f);
}

/* ---------------------------------------------------------- matching ---- */

static const struct retrace_attr *find_attr(const struct retrace_span_summary *s,
					    const char *key)
{
	for (size_t i = 0; i < s->n_attrs; i++)
		if (s->attrs[i].key && strcmp(s->attrs[i].key, key) == 0)
			return &s->attrs[i];
	return NULL;
}

static int match_numeric(const struct retrace_filter *f,
			 const struct retrace_span_summary *s)
{
	const struct retrace_attr *a = find_attr(s, f->u.numeric.key);
	double v;
	if (!a)
		return 0;
	if (a->type == RETRACE_ATTR_INT)
		v = (double)a->v.i;
	else if (a->type == RETRACE_ATTR_DOUBLE)
		v = a->v.d;
	else
		return 0;
	return v >= f->u.numeric.min && v <= f->u.numeric.max;
}

static int match_string(const struct retrace_filter *f,
			const struct retrace_span_summary *s)
{
	const struct retrace_attr *a = find_attr(s, f->u.string.key);
	int found = 0;
	if (a && a->type == RETRACE_ATTR_STRING && a->v.s)
		for (size_t i = 0; i < f->n && !found; i++)
			found = strcmp(a->v.s, f->u.string.values[i]) == 0;
	return f->u.string.invert ? !found : found;
}

static int match_status(const struct retrace_filter *f, int code)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->u.codes[i] == code)
			return 1;
	return 0;
}

/* GCRA: allow if the next arrival time is not further ahead than the burst. */
static int take_rate_token(struct retrace_filter *f)
{
	uint64_t now = rtt_mono_ns();
	uint64_t next = atomic_load_explicit(&f->u.rate.next_ns, memory_order_relaxed);
	for (;;) {
		uint64_t base = next > now ? next : now;
		if (base - now > f->u.rate.burst_ns)
			return 0;
		if (atomic_compare_exchange_weak_explicit(
			    &f->u.rate.next_ns, &next, base + f->u.rate.interval_ns,
			    memory_order_relaxed, memory_order_relaxed))
			return 1;
	}
}

int retrace_filter_match(const struct retrace_filter *f,
			 const struct retrace_span_summary *s)
{
	switch (f->kind) {
	case F_LATENCY:
		return s->duration_ns >= f->u.latency.min_ns &&
		       (f->u.latency.max_ns == 0 || s->duration_ns <= f->u.latency.max_ns);
	case F_STATUS:
		return match_status(f, s->status_code);
	case F_NUMERIC:
		return match_numeric(f, s);
	case F_STRING:
		return match_string(f, s);
	case F_PROBABILISTIC:
		return f->all_pass || retrace_trace_hash(s->trace_id) < f->u.hash_below;
	case F_RATE_LIMIT:
		/* The limiter's word is the one mutable part of a filter. */
		return take_rate_token((struct retrace_filter *)f);
	case F_AND:
		for (size_t i = 0; i < f->n; i++)
			if (!retrace_filter_match(f->u.children[i], s))
				return 0;
		return 1;
	case F_OR:
		for (size_t i = 0; i < f->n; i++)
			if (retrace_filter_match(f->u.children[i], s))
				return 1;
		return 0;
	case F_NOT:
		return !retrace_filter_match(f->u.children[0], s);
	}
	return 0;
}

int retrace_filter_fire(const struct retrace_filter *f, uint32_t trigger_id,
			const struct retrace_span_summary *s,
			const struct retrace_fire_sink *sink)
{
	static const struct retrace_fire_sink to_agent = {0};
	if (!f || !s)
		return RETRACE_E_INVAL;
	if (!retrace_filter_match(f, s))
		return 0;
	(void)rtt_fire(sink ? sink : &to_agent, s->trace_id, trigger_id, NULL, 0);
	return 1;
}
