/*
 * cmd_estimate.c — `retrace estimate`: how many spans and traces matching a filter
 * there were, not how many were kept (Ertl's estimators, estimate/).
 *
 * It opens the store read-only, lists the stored traces (optionally those closed
 * in the last --since), and for each one decodes its slices into spans
 * (rt_decode_stored, as `retrace show` does) and reads the effective rate
 * exponent of each agent's part (rt_store_trace_rates: the largest rate_exp of
 * that agent's slices). Every span becomes an rt_est_span: its agent is its
 * host, the agent's exponent its rate, and the filter says whether it matches.
 * Per trace, rt_est_span_count and rt_est_trace_count give the unbiased
 * estimates and their variance estimates, rt_est_naive the complete-traces-only
 * baseline; a trace selection kept with a weight is scaled by rt_est_weighted.
 * The per-trace values are summed (traces are sampled independently), per group
 * with --by (by trigger: a trace counts in the row of each trigger that
 * collected it, with all its matching spans). Beside them: the plain counts of what is stored, in all traces and
 * in complete ones only (what counting the store would answer).
 *
 * A trace is "complete" for the naive baseline when the collector called it
 * coherent and its decode found nothing missing (rt_decode_complete: no gap, no
 * client span whose callee never arrived — which is what a host that did not
 * record the trace leaves behind).
 *
 * The filter is a conjunction over spans, "key=value" terms joined by commas:
 * service, operation (or name), status (ok | error | unset; ok also matches
 * unset, as OpenTelemetry reads it), min_ms and max_ms (the span's duration).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "decode.h"
#include "daemon/json.h"
#include "estimate.h"
#include "retrace/tracer.h"
#include "store.h"

#define EST_MAX_RATES RT_STORE_MAX_AGENTS
#define EST_MAX_GROUPS 4096

/* ------------------------------------------------------------- filter ---- */

enum status_want { ST_ANY, ST_OK, ST_ERROR, ST_UNSET };

struct filter {
	const char *service;   /* NULL: any */
	const char *operation; /* NULL: any */
	enum status_want status;
	int has_min, has_max;
	double min_ms, max_ms;
	char text[512];        /* the terms, NUL-separated in place */
};

static int parse_ms(const char *key, const char *v, double *out, char *err, size_t errlen)
{
	char *end;
	errno = 0;
	*out = strtod(v, &end);
	if (errno || end == v || *end || !isfinite(*out) || *out < 0) {
		snprintf(err, errlen, "%s wants a duration in milliseconds (a number >= 0), got '%s'",
			 key, v);
		return -1;
	}
	return 0;
}

/* One "key=value" term (k, v point into f->text). */
static int filter_term(struct filter *f, char *k, char *v, char *err, size_t errlen)
{
	int dup = 0;
	if (!*v) {
		snprintf(err, errlen, "'%s=' has no value", k);
		return -1;
	}
	if (!strcmp(k, "service")) {
		dup = f->service != NULL;
		f->service = v;
	} else if (!strcmp(k, "operation") || !strcmp(k, "name")) {
		dup = f->operation != NULL;
		f->operation = v;
	} else if (!strcmp(k, "status")) {
		dup = f->status != ST_ANY;
		if (!strcmp(v, "ok"))
			f->status = ST_OK;
		else if (!strcmp(v, "error"))
			f->status = ST_ERROR;
		else if (!strcmp(v, "unset"))
			f->status = ST_UNSET;
		else {
			snprintf(err, errlen, "status is ok, error or unset, not '%s'", v);
			return -1;
		}
	} else if (!strcmp(k, "min_ms")) {
		dup = f->has_min;
		f->has_min = 1;
		if (parse_ms(k, v, &f->min_ms, err, errlen))
			return -1;
	} else if (!strcmp(k, "max_ms")) {
		dup = f->has_max;
		f->has_max = 1;
		if (parse_ms(k, v, &f->max_ms, err, errlen))
			return -1;
	} else {
		snprintf(err, errlen,
			 "unknown key '%s' (known: service, operation, name, status, min_ms, max_ms)",
			 k);
		return -1;
	}
	if (dup) {
		snprintf(err, errlen, "'%s' is given twice (terms are joined by AND)", k);
		return -1;
	}
	return 0;
}

/* "service=payment,status=error" into f; -1 with a sentence in err. "all" (or
 * "*") matches every span. */
static int filter_parse(struct filter *f, const char *spec, char *err, size_t errlen)
{
	char *p, *next;
	memset(f, 0, sizeof *f);
	if (!spec || !*spec) {
		snprintf(err, errlen, "the filter is empty (use 'all' to count every span)");
		return -1;
	}
	if (strlen(spec) >= sizeof f->text) {
		snprintf(err, errlen, "the filter is longer than %zu bytes", sizeof f->text - 1);
		return -1;
	}
	if (!strcmp(spec, "all") || !strcmp(spec, "*"))
		return 0;
	strcpy(f->text, spec);
	for (p = f->text; p; p = next) {
		char *eq;
		next = strchr(p, ',');
		if (next)
			*next++ = 0;
		if (!*p) {
			snprintf(err, errlen, "an empty term (two commas, or one at an end)");
			return -1;
		}
		eq = strchr(p, '=');
		if (!eq || eq == p) {
			snprintf(err, errlen, "'%s' is not key=value", p);
			return -1;
		}
		*eq = 0;
		if (filter_term(f, p, eq + 1, err, errlen))
			return -1;
	}
	if (f->has_min && f->has_max && f->min_ms > f->max_ms) {
		snprintf(err, errlen, "min_ms %g is above max_ms %g: nothing can match", f->min_ms,
			 f->max_ms);
		return -1;
	}
	return 0;
}

static const char *span_service(const struct rt_decoded_trace *t, const struct rt_span *sp)
{
	return sp->resource < t->n_resources && t->resources[sp->resource].service
		       ? t->resources[sp->resource].service
		       : "unknown_service";
}

static int filter_match(const struct filter *f, const struct rt_decoded_trace *t,
			const struct rt_span *sp)
{
	double ms = sp->end_ns > sp->start_ns ? (double)(sp->end_ns - sp->start_ns) / 1e6 : 0;
	if (f->service && strcmp(span_service(t, sp), f->service))
		return 0;
	if (f->operation && strcmp(sp->name ? sp->name : "", f->operation))
		return 0;
	if (f->status == ST_ERROR && sp->status != RETRACE_STATUS_ERROR)
		return 0;
	if (f->status == ST_OK && sp->status == RETRACE_STATUS_ERROR)
		return 0;
	if (f->status == ST_UNSET && sp->status != RETRACE_STATUS_UNSET)
		return 0;
	if (f->has_min && ms < f->min_ms)
		return 0;
	if (f->has_max && ms > f->max_ms)
		return 0;
	return 1;
}

/* ------------------------------------------------------------- totals ---- */

/* What one group (or all) adds up to. */
struct group {
	char *key;
	rt_est_total spans, traces;             /* Ertl */
	rt_est_total naive_spans, naive_traces; /* complete traces only, scaled */
	uint64_t stored_spans, stored_traces;   /* matching, as stored */
	uint64_t complete_spans, complete_traces; /* matching, complete traces only */
};

enum by { BY_NONE, BY_SERVICE, BY_OPERATION, BY_TRIGGER };
static const char *const by_names[] = { "", "service", "operation", "trigger" };

struct run {
	struct filter f;
	enum by by;
	struct cli_trigger_names names; /* --by trigger: the keys' names */
	struct group all;
	struct group *groups;
	size_t n_groups, cap_groups;
	uint64_t traces_read, undecodable, weighted, over_rate;
	int groups_full;
};

static struct group *group_of(struct run *r, const char *key)
{
	size_t i;
	for (i = 0; i < r->n_groups; i++)
		if (!strcmp(r->groups[i].key, key))
			return &r->groups[i];
	if (r->n_groups >= EST_MAX_GROUPS) {
		r->groups_full = 1;
		return NULL;
	}
	if (r->n_groups == r->cap_groups) {
		size_t cap = r->cap_groups ? r->cap_groups * 2 : 16;
		struct group *g = realloc(r->groups, cap * sizeof *g);
		if (!g)
			return NULL;
		r->groups = g;
		r->cap_groups = cap;
	}
	memset(&r->groups[r->n_groups], 0, sizeof r->groups[0]);
	if (!(r->groups[r->n_groups].key = strdup(key)))
		return NULL;
	return &r->groups[r->n_groups++];
}

/* Add value v of one trace (scaled by its selection weight w when it has one). */
static void add(rt_est_total *tot, int rc, const rt_est_value *v, double w)
{
	rt_est_value x;
	if (rc == RT_EST_OK && w > 0)
		rc = rt_est_weighted(v, w, &x);
	else
		x = *v;
	rt_est_total_add(tot, rc, &x);
}

/*
 * One trace's spans (match flags set for this group) into g. complete: the
 * naive baseline may count it.
 */
static void add_trace(struct group *g, const rt_est_span *sp, size_t n, int complete,
		      double weight)
{
	rt_est_value v;
	uint64_t m = 0;
	int rc;
	size_t i;
	for (i = 0; i < n; i++)
		m += sp[i].match != 0;
	rc = rt_est_span_count(sp, n, &v);
	add(&g->spans, rc, &v, weight);
	rc = rt_est_trace_count(sp, n, &v);
	add(&g->traces, rc, &v, weight);
	rc = rt_est_naive(sp, n, complete, rt_est_q_spans, NULL, &v);
	add(&g->naive_spans, rc, &v, weight);
	rc = rt_est_naive(sp, n, complete, rt_est_q_traces, NULL, &v);
	add(&g->naive_traces, rc, &v, weight);
	g->stored_spans += m;
	g->stored_traces += m > 0;
	if (complete) {
		g->complete_spans += m;
		g->complete_traces += m > 0;
	}
}

static const char *group_key(const struct run *r, const struct rt_decoded_trace *t,
			     const struct rt_span *sp)
{
	if (r->by == BY_SERVICE)
		return span_service(t, sp);
	return sp->name ? sp->name : "";
}

/* The rate exponent of agent `agent` among rates[0..n) (0: not listed). */
static unsigned rate_of(const struct rt_store_rate *rates, uint32_t n, uint32_t agent)
{
	uint32_t i;
	for (i = 0; i < n; i++)
		if (rates[i].agent_id == agent)
			return rates[i].rate_exp;
	return 0;
}

struct listed {
	uint64_t hi, lo;
	int coherent;
	double weight; /* 0: no selection weight */
	uint32_t ntrig; /* the triggers that collected it (--by trigger) */
	uint32_t trig[RT_STORE_MAX_TRIGGERS];
};

static int estimate_trace(struct rt_store *s, struct run *r, const struct listed *lt)
{
	struct rt_store_rate rates[EST_MAX_RATES];
	struct rt_decoded_trace t;
	rt_est_span *sp = NULL;
	uint32_t nrates = 0, i;
	char err[256];
	int complete, rc = 0;

	r->traces_read++;
	if (rt_store_trace_rates(s, lt->hi, lt->lo, rates, EST_MAX_RATES, &nrates) != 0) {
		fprintf(stderr, "retrace estimate: %s\n", rt_store_errmsg(s));
		return -1;
	}
	if (rt_decode_stored(s, lt->hi, lt->lo, &t, err, sizeof err) != 0) {
		fprintf(stderr, "retrace estimate: trace %016" PRIx64 "%016" PRIx64 ": %s\n",
			lt->hi, lt->lo, err);
		r->undecodable++;
		return 0;
	}
	if (t.n_spans && !(sp = calloc(t.n_spans, sizeof *sp))) {
		rt_decoded_trace_free(&t);
		fprintf(stderr, "retrace estimate: out of memory\n");
		return -1;
	}
	for (i = 0; i < t.n_spans; i++) {
		unsigned k = rate_of(rates, nrates, t.spans[i].agent_id);
		sp[i].span_id = t.spans[i].span_id;
		sp[i].parent_id = t.spans[i].parent_id;
		sp[i].host = t.spans[i].agent_id;
		sp[i].rate_exp = (uint8_t)(k > 255 ? 255 : k); /* > 56 is refused and counted */
		sp[i].match = (uint8_t)filter_match(&r->f, &t, &t.spans[i]);
		if (k > RT_EST_MAX_EXP)
			r->over_rate++;
	}
	complete = lt->coherent && rt_decode_complete(&t.st);
	if (lt->weight > 0)
		r->weighted++;
	add_trace(&r->all, sp, t.n_spans, complete, lt->weight);
	if (r->by == BY_TRIGGER) {
		/* A trace belongs to each trigger that collected it, with all its
		 * matching spans (a trace two triggers fired for counts in both rows). */
		for (i = 0; i < lt->ntrig && rc == 0; i++) {
			char key[96];
			struct group *g;
			cli_list_triggers(key, sizeof key, &r->names, &lt->trig[i], 1);
			if ((g = group_of(r, key)))
				add_trace(g, sp, t.n_spans, complete, lt->weight);
			else if (!r->groups_full) {
				fprintf(stderr, "retrace estimate: out of memory\n");
				rc = -1;
			}
		}
	} else if (r->by != BY_NONE) {
		/* Each group this trace has a matching span in, with only its spans matching. */
		uint8_t *done = calloc(t.n_spans ? t.n_spans : 1, 1);
		uint8_t *match = malloc(t.n_spans ? t.n_spans : 1);
		if (!done || !match) {
			free(done);
			free(match);
			free(sp);
			rt_decoded_trace_free(&t);
			fprintf(stderr, "retrace estimate: out of memory\n");
			return -1;
		}
		for (i = 0; i < t.n_spans; i++)
			match[i] = sp[i].match;
		for (i = 0; i < t.n_spans && rc == 0; i++) {
			const char *key;
			struct group *g;
			uint32_t j;
			if (!match[i] || done[i])
				continue;
			key = group_key(r, &t, &t.spans[i]);
			for (j = 0; j < t.n_spans; j++) {
				int same = match[j] && !strcmp(group_key(r, &t, &t.spans[j]), key);
				sp[j].match = (uint8_t)same;
				if (same)
					done[j] = 1;
			}
			if (!(g = group_of(r, key))) {
				if (!r->groups_full) {
					fprintf(stderr, "retrace estimate: out of memory\n");
					rc = -1;
				}
				continue;
			}
			add_trace(g, sp, t.n_spans, complete, lt->weight);
		}
		free(done);
		free(match);
	}
	free(sp);
	rt_decoded_trace_free(&t);
	return rc;
}

/* ------------------------------------------------------------- output ---- */

static int by_estimate(const void *a, const void *b)
{
	const struct group *x = a, *y = b;
	if (x->spans.estimate != y->spans.estimate)
		return x->spans.estimate < y->spans.estimate ? 1 : -1;
	return strcmp(x->key, y->key);
}

static void print_text_row(const char *name, const struct group *g)
{
	printf("%-28s %14.0f %10.1f %12.0f %10.1f  %10" PRIu64 " %10" PRIu64 "  %12.0f %10.1f"
	       "  %10" PRIu64 " %10" PRIu64 "\n",
	       name, g->spans.estimate, rt_est_total_stderr(&g->spans), g->traces.estimate,
	       rt_est_total_stderr(&g->traces), g->complete_spans, g->complete_traces,
	       g->naive_traces.estimate, rt_est_total_stderr(&g->naive_traces), g->stored_spans,
	       g->stored_traces);
}

static void print_text(const struct run *r, const char *filter, const char *path)
{
	size_t i;
	printf("filter %s: %" PRIu64 " stored traces read from %s", filter, r->traces_read, path);
	if (r->weighted)
		printf(", %" PRIu64 " scaled by their selection weight", r->weighted);
	printf("\n%-28s %14s %10s %12s %10s  %10s %10s  %12s %10s  %10s %10s\n",
	       r->by == BY_NONE ? "" : r->by == BY_SERVICE ? "SERVICE" : r->by == BY_OPERATION ? "OPERATION" : "TRIGGER", "SPANS",
	       "±SE", "TRACES", "±SE", "NAIVE_SPANS", "NAIVE_TRCS", "NAIVE_EST", "±SE",
	       "KEPT_SPANS", "KEPT_TRCS");
	for (i = 0; i < r->n_groups; i++)
		print_text_row(r->groups[i].key, &r->groups[i]);
	print_text_row(r->by == BY_NONE ? "all" : "(all)", &r->all);
	printf("SPANS, TRACES: unbiased estimates of the matching spans and of the traces with one\n"
	       "(Ertl), ±1 standard error. NAIVE_SPANS/NAIVE_TRCS: what complete stored traces\n"
	       "hold; NAIVE_EST: complete traces scaled by their rate (trace count). KEPT: all\n"
	       "stored, partial ones included, unscaled.\n");
	if (r->undecodable || r->over_rate || r->all.spans.refused || r->groups_full)
		printf("warning: %" PRIu64 " traces could not be decoded, %" PRIu64
		       " spans had a rate exponent over %u, %" PRIu64 " traces were refused%s\n",
		       r->undecodable, r->over_rate, RT_EST_MAX_EXP, r->all.spans.refused,
		       r->groups_full ? "; too many groups, some left out" : "");
}

static void print_json_total(const char *name, const rt_est_total *t)
{
	printf("\"%s\":{\"estimate\":%.17g,\"stderr\":%.17g,\"variance\":%.17g}", name,
	       t->estimate, rt_est_total_stderr(t), t->variance);
}

static void print_json_group(const struct group *g)
{
	printf("{\"spans\":{");
	print_json_total("estimate", &g->spans);
	printf(",");
	print_json_total("naive", &g->naive_spans);
	printf(",\"complete\":%" PRIu64 ",\"kept\":%" PRIu64 "},\"traces\":{", g->complete_spans,
	       g->stored_spans);
	print_json_total("estimate", &g->traces);
	printf(",");
	print_json_total("naive", &g->naive_traces);
	printf(",\"complete\":%" PRIu64 ",\"kept\":%" PRIu64 "}}", g->complete_traces,
	       g->stored_traces);
}

static void print_json(const struct run *r, const char *filter)
{
	size_t i;
	printf("{\"filter\":");
	rt_json_fput_string(stdout, filter);
	printf(",\"traces_read\":%" PRIu64 ",\"undecodable\":%" PRIu64 ",\"weighted\":%" PRIu64
	       ",\"refused\":%" PRIu64 ",\"over_rate\":%" PRIu64 ",\"all\":",
	       r->traces_read, r->undecodable, r->weighted, r->all.spans.refused, r->over_rate);
	print_json_group(&r->all);
	if (r->by != BY_NONE) {
		printf(",\"by\":\"%s\",\"groups\":[", by_names[r->by]);
		for (i = 0; i < r->n_groups; i++) {
			printf("%s{\"key\":", i ? "," : "");
			rt_json_fput_string(stdout, r->groups[i].key);
			printf(",\"value\":");
			print_json_group(&r->groups[i]);
			printf("}");
		}
		printf("],\"groups_truncated\":%s", r->groups_full ? "true" : "false");
	}
	printf("}\n");
}

/* ------------------------------------------------------------ command ---- */

struct listing {
	struct listed *v;
	size_t n, cap;
};

static int list_one(void *arg, const struct rt_store_trace *t)
{
	struct listing *l = arg;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		struct listed *v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].hi = t->trace_hi;
	l->v[l->n].lo = t->trace_lo;
	l->v[l->n].coherent = t->coherent;
	l->v[l->n].weight = t->has_selection ? t->weight : 0;
	l->v[l->n].ntrig = t->trigger_count < RT_STORE_MAX_TRIGGERS ? t->trigger_count
								    : RT_STORE_MAX_TRIGGERS;
	memcpy(l->v[l->n].trig, t->trigger_ids, l->v[l->n].ntrig * sizeof t->trigger_ids[0]);
	l->n++;
	return 0;
}

static void estimate_usage(FILE *out)
{
	fprintf(out,
		"usage: retrace estimate --where FILTER [--by service|operation|trigger] [--since D]\n"
		"                        [--json] [--store STORE | --coordinator URL]\n"
		"Estimate how many spans matched FILTER, and how many traces had one, among all\n"
		"the requests the services served, not only the ones kept: every stored span is\n"
		"weighed by the inverse of the rate its host recorded it at (the client's trace\n"
		"percentage and the agent's overload level), Ertl's unbiased estimators, with a\n"
		"standard error; the naive complete-traces-only count beside them. Traces kept\n"
		"by selection count with their inclusion weight. Only triggered requests reach\n"
		"the store: a count means \"among traced requests some trigger fired for\".\n\n"
		"  -w, --where FILTER   key=value terms joined by ',' (AND): service=NAME,\n"
		"                       operation=NAME (or name=), status=ok|error|unset\n"
		"                       (ok matches unset too), min_ms=N, max_ms=N (span\n"
		"                       duration); 'all' matches every span\n"
		"  -b, --by KEY         one row per service or operation of the matching spans, or\n"
		"                       per trigger that collected the trace (its name if known)\n"
		"  -s, --since D        only traces closed in the last D (90s, 5m, 2h, 1d)\n"
		"  -j, --json           one JSON object\n"
		CLI_STORE_USAGE("   ")
		"  -h, --help           this text\n"
		"example: retrace estimate --where service=payment,status=error --by operation\n");
}

int cli_cmd_estimate(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "where", required_argument, NULL, 'w' }, { "by", required_argument, NULL, 'b' },
		{ "since", required_argument, NULL, 's' }, { "json", no_argument, NULL, 'j' },
		{ "store", required_argument, NULL, 'S' }, { "coordinator", required_argument, NULL, 'C' }, { "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct rt_store_query q = { 0 };
	struct listing l = { 0 };
	char store_buf[1024];
	const char *path = NULL, *coord = NULL, *where = NULL;
	struct rt_store *s = NULL;
	struct run *r;
	uint64_t since = 0;
	char err[256];
	int ch, json = 0, rc = 0;
	size_t i;

	if (!(r = calloc(1, sizeof *r))) {
		fprintf(stderr, "retrace estimate: out of memory\n");
		return 1;
	}
	optind = 1;
	while ((ch = getopt_long(argc, argv, "w:b:s:jSC:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'w': where = optarg; break;
		case 'b':
			if (!strcmp(optarg, "service"))
				r->by = BY_SERVICE;
			else if (!strcmp(optarg, "operation") || !strcmp(optarg, "name"))
				r->by = BY_OPERATION;
			else if (!strcmp(optarg, "trigger"))
				r->by = BY_TRIGGER;
			else {
				fprintf(stderr, "retrace estimate: --by is service, operation or trigger, not '%s'\n",
					optarg);
				free(r);
				return 2;
			}
			break;
		case 's':
			if (!(since = cli_parse_duration_ns(optarg))) {
				fprintf(stderr, "retrace estimate: --since wants a duration like 90s, 5m, 2h; got '%s'\n",
					optarg);
				free(r);
				return 2;
			}
			break;
		case 'j': json = 1; break;
		case 'S': path = optarg; break;
		case 'C': coord = optarg; break;
		case 'h': estimate_usage(stdout); free(r); return 0;
		default: estimate_usage(stderr); free(r); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "retrace estimate: unexpected argument '%s'\n", argv[optind]);
		free(r);
		return 2;
	}
	if (!where) {
		fprintf(stderr, "retrace estimate: --where FILTER is required (e.g. --where "
				"service=payment,status=error, or --where all)\n");
		free(r);
		return 2;
	}
	if (filter_parse(&r->f, where, err, sizeof err) != 0) {
		fprintf(stderr, "retrace estimate: bad filter '%s': %s\n", where, err);
		free(r);
		return 2;
	}
	if (since) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		q.since_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec - since;
	}
	if (cli_store_locator("estimate", path, coord, store_buf, sizeof store_buf) != 0) {
		free(r);
		return 1;
	}
	path = store_buf;
	if (cli_open_store("estimate", path, &s) != 0) {
		free(r);
		return 1;
	}
	if (r->by == BY_TRIGGER && cli_trigger_names_load("estimate", s, &r->names) != 0)
		rc = 1;
	if (rc == 0 && rt_store_list(s, &q, list_one, &l) != 0) {
		fprintf(stderr, "retrace estimate: %s\n",
			*rt_store_errmsg(s) ? rt_store_errmsg(s) : "out of memory");
		rc = 1;
	}
	for (i = 0; rc == 0 && i < l.n; i++)
		if (estimate_trace(s, r, &l.v[i]) != 0)
			rc = 1;
	if (rc == 0) {
		if (r->n_groups) /* qsort(NULL, 0, ...) is undefined */
			qsort(r->groups, r->n_groups, sizeof *r->groups, by_estimate);
		if (json)
			print_json(r, where);
		else
			print_text(r, where, path);
	}
	for (i = 0; i < r->n_groups; i++)
		free(r->groups[i].key);
	free(r->groups);
	cli_trigger_names_free(&r->names);
	free(r);
	free(l.v);
	rt_store_close(s);
	return rc;
}
