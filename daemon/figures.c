/*
 * daemon/figures.c — one writer, three renderings.
 *
 * Text: "section:" lines then "  key   value" lines padded to a column. JSON:
 * {"section":{"key":value,...},...}. Every write goes through put(), which
 * stops at the capacity instead of overflowing; strings through json.h.
 *
 * Prometheus: each figure becomes a sample (metric name, labels, value, type)
 * kept on the heap, because a metric's samples must be written as one group
 * and a per-instance section (trigger.13, trigger.14, ...) repeats the same
 * metrics. rt_fig_end sorts the samples by name, orders the groups by where
 * each first appeared (so the output follows the status layout), and writes
 * each group under its # HELP and # TYPE lines. String figures are gathered
 * as labels of one info sample (value 1) per daemon, or per instance.
 */
#include "figures.h"
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T_COUNTER, T_GAUGE, T_INFO };

#define FIG_NAME_MAX 160

struct sample {
	char name[FIG_NAME_MAX];  /* the full metric name, e.g. retrace_agent_traces_evicted_total */
	char help[FIG_NAME_MAX];  /* where it comes from in `retrace status` */
	char *labels;          /* `a="x",b="y"` (escaped), heap; NULL: none */
	size_t labels_len;
	double value;
	uint64_t count;        /* counters and integer gauges: exact */
	int exact;             /* value is `count` */
	int type;
	size_t seq, group_seq; /* order written; first seq of its name */
};

struct rt_fig_prom {
	char daemon[32];
	char section[64];      /* sanitised: the metric name's middle part */
	char section_raw[96];  /* as given, for the help text */
	char label[128];       /* `trigger_id="13"` of an instance section, or "" */
	struct sample *s;
	size_t n, cap;
	long info;             /* this section's info sample (-1: none yet) */
	long daemon_info;      /* retrace_<daemon>_info (-1: none yet) */
	int oom;
};

static void put(struct rt_figures *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct rt_figures *w, const char *fmt, ...)
{
	va_list ap;
	int n;
	if (w->cap == 0 || w->len >= w->cap - 1) {
		w->cut = 1;
		return;
	}
	va_start(ap, fmt);
	n = vsnprintf(w->out + w->len, w->cap - w->len, fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n >= w->cap - w->len)
		w->cut = 1;
	if (n > 0)
		w->len += (size_t)n < w->cap - w->len ? (size_t)n : w->cap - w->len - 1;
}

/* json.h's sink and the Prometheus writer's: raw bytes, cut at the capacity like put(). */
static void put_raw(void *ctx, const char *p, size_t n)
{
	struct rt_figures *w = ctx;
	if (w->cap == 0 || w->len >= w->cap - 1) {
		w->cut = 1;
		return;
	}
	if (n > w->cap - 1 - w->len) {
		n = w->cap - 1 - w->len;
		w->cut = 1;
	}
	memcpy(w->out + w->len, p, n);
	w->len += n;
	w->out[w->len] = 0;
}

void rt_fig_init(struct rt_figures *w, char *out, size_t cap, int json)
{
	w->out = out;
	w->cap = cap;
	w->len = 0;
	w->json = json;
	w->first = 1;
	w->sections = 0;
	w->cut = 0;
	w->prom = NULL;
	if (cap)
		out[0] = 0;
}

/* ------------------------------------------------- Prometheus: names ---- */

/* Append src to dst (size dstlen) as [a-zA-Z0-9_], other bytes as '_'. */
static void sanitise_cat(char *dst, size_t dstlen, const char *src)
{
	size_t n = strlen(dst);
	for (; *src && n + 1 < dstlen; src++) {
		char ch = *src;
		int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			 (ch >= '0' && ch <= '9') || ch == '_';
		dst[n++] = ok ? ch : '_';
	}
	dst[n] = 0;
}

/* A label name: sanitised, and not starting with a digit. */
static void label_name(char *dst, size_t dstlen, const char *src)
{
	dst[0] = 0;
	if (*src >= '0' && *src <= '9')
		snprintf(dst, dstlen, "_");
	sanitise_cat(dst, dstlen, *src ? src : "_");
}

/* Append `name="value"` (value escaped per the format: \\ \" \n, and valid
 * UTF-8 only: a stray byte or another control byte becomes U+FFFD) to *buf. */
static int label_cat(char **buf, size_t *len, const char *name, const char *value)
{
	const unsigned char *p = (const unsigned char *)(value ? value : "");
	size_t left = strlen((const char *)p), need = *len + strlen(name) + 4 + 3 * left + 2;
	char *b = realloc(*buf, need + 1), *o;
	if (!b)
		return -1;
	*buf = b;
	o = b + *len;
	if (*len)
		*o++ = ',';
	label_name(o, need - (size_t)(o - b), name);
	o += strlen(o);
	*o++ = '=';
	*o++ = '"';
	while (left) {
		size_t n = rt_utf8_seq_len(p, left);
		if (n == 1 && (*p == '\\' || *p == '"' || *p == '\n')) {
			*o++ = '\\';
			*o++ = *p == '\n' ? 'n' : (char)*p;
		} else if (n == 0 || *p < 0x20 || *p == 0x7f) {
			memcpy(o, "\xEF\xBF\xBD", 3);
			o += 3;
			n = 1;
		} else {
			memcpy(o, p, n);
			o += n;
		}
		p += n;
		left -= n;
	}
	*o++ = '"';
	*o = 0;
	*len = (size_t)(o - b);
	return 0;
}

/* retrace_<daemon>_<section>_<key><suffix>; the key's unit suffix replaced for times. */
static void metric_name(const struct rt_fig_prom *p, char *name, size_t len, const char *key,
			const char *suffix, int strip_unit)
{
	char k[FIG_NAME_MAX];
	snprintf(k, sizeof k, "%s", key);
	if (strip_unit) {
		static const char *units[] = { "_ns", "_us", "_ms", "_s" };
		size_t kl = strlen(k);
		for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
			size_t ul = strlen(units[i]);
			if (kl > ul && strcmp(k + kl - ul, units[i]) == 0) {
				k[kl - ul] = 0;
				break;
			}
		}
	}
	snprintf(name, len, "retrace_");
	sanitise_cat(name, len, p->daemon);
	if (p->section[0]) {
		sanitise_cat(name, len, "_");
		sanitise_cat(name, len, p->section);
	}
	sanitise_cat(name, len, "_");
	sanitise_cat(name, len, k);
	sanitise_cat(name, len, suffix);
}

static struct sample *new_sample(struct rt_fig_prom *p, int type)
{
	struct sample *s;
	if (p->oom)
		return NULL;
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		struct sample *ns = realloc(p->s, cap * sizeof *ns);
		if (!ns) {
			p->oom = 1;
			return NULL;
		}
		p->s = ns;
		p->cap = cap;
	}
	s = &p->s[p->n];
	memset(s, 0, sizeof *s);
	s->type = type;
	s->seq = p->n++;
	if (p->label[0] && !(s->labels = strdup(p->label))) {
		p->n--;
		p->oom = 1;
		return NULL;
	}
	s->labels_len = s->labels ? strlen(s->labels) : 0;
	return s;
}

static void prom_number(struct rt_figures *w, const char *key, int type, double v, uint64_t u,
			int exact, int is_time)
{
	struct rt_fig_prom *p = w->prom;
	struct sample *s = new_sample(p, type);
	if (!s)
		return;
	metric_name(p, s->name, sizeof s->name, key,
		    type == T_COUNTER ? "_total" : is_time ? "_seconds" : "", is_time);
	if (type == T_GAUGE) { /* "_total" says counter: buffers.total is retrace_agent_buffers */
		size_t l = strlen(s->name);
		if (l > 6 && strcmp(s->name + l - 6, "_total") == 0)
			s->name[l - 6] = 0;
	}
	snprintf(s->help, sizeof s->help, "retrace status: section %s, %s%s", p->section_raw, key,
		 is_time ? " (in seconds)" : "");
	s->value = v;
	s->count = u;
	s->exact = exact;
}

/* A string figure: a label of this section's info sample (or the daemon's). */
static void prom_string(struct rt_figures *w, const char *key, const char *v)
{
	struct rt_fig_prom *p = w->prom;
	long *slot = p->label[0] ? &p->info : &p->daemon_info;
	char lname[FIG_NAME_MAX];
	struct sample *s;
	if (*slot < 0) {
		char section[64];
		if (!(s = new_sample(p, T_INFO)))
			return;
		/* retrace_<daemon>_info, or retrace_<daemon>_<base>_info for an instance */
		snprintf(section, sizeof section, "%s", p->section);
		if (!p->label[0])
			p->section[0] = 0;
		metric_name(p, s->name, sizeof s->name, "info", "", 0);
		snprintf(p->section, sizeof p->section, "%s", section);
		snprintf(s->help, sizeof s->help, "retrace status: the settings and names (strings) %s",
			 p->label[0] ? "of each instance" : "of the daemon");
		s->value = 1;
		s->count = 1;
		s->exact = 1;
		*slot = (long)(s - p->s);
	}
	s = &p->s[*slot];
	lname[0] = 0;
	if (!p->label[0]) { /* the daemon's info: <section>_<key> */
		sanitise_cat(lname, sizeof lname, p->section);
		sanitise_cat(lname, sizeof lname, "_");
	}
	sanitise_cat(lname, sizeof lname, key);
	if (label_cat(&s->labels, &s->labels_len, lname, v) != 0)
		p->oom = 1;
}

static int by_name(const void *a, const void *b)
{
	const struct sample *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static int by_group(const void *a, const void *b)
{
	const struct sample *x = a, *y = b;
	if (x->group_seq != y->group_seq)
		return (x->group_seq > y->group_seq) - (x->group_seq < y->group_seq);
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static void put_value(struct rt_figures *w, const struct sample *s)
{
	if (s->exact)
		put(w, "%llu\n", (unsigned long long)s->count);
	else if (isnan(s->value))
		put(w, "NaN\n");
	else if (isinf(s->value))
		put(w, "%sInf\n", s->value > 0 ? "+" : "-");
	else {
		/* The shortest of %.15g / %.17g that reads back as the same double. */
		char b[40];
		snprintf(b, sizeof b, "%.15g", s->value);
		if (strtod(b, NULL) != s->value)
			snprintf(b, sizeof b, "%.17g", s->value);
		put(w, "%s\n", b);
	}
}

static void prom_write(struct rt_figures *w)
{
	static const char *types[] = { "counter", "gauge", "gauge" };
	struct rt_fig_prom *p = w->prom;
	size_t i, j;
	if (p->oom) {
		put(w, "# retrace: out of memory while rendering the metrics\n");
		return;
	}
	qsort(p->s, p->n, sizeof *p->s, by_name);
	for (i = 0; i < p->n; i = j) {
		for (j = i; j < p->n && strcmp(p->s[j].name, p->s[i].name) == 0; j++)
			p->s[j].group_seq = p->s[i].seq;
	}
	qsort(p->s, p->n, sizeof *p->s, by_group);
	for (i = 0; i < p->n; i++) {
		const struct sample *s = &p->s[i];
		if (i == 0 || strcmp(s->name, p->s[i - 1].name) != 0)
			put(w, "# HELP %s %s\n# TYPE %s %s\n", s->name, s->help, s->name,
			    types[s->type]);
		put_raw(w, s->name, strlen(s->name));
		if (s->labels_len) {
			put_raw(w, "{", 1);
			put_raw(w, s->labels, s->labels_len);
			put_raw(w, "}", 1);
		}
		put_raw(w, " ", 1);
		put_value(w, s);
	}
}

static void prom_free(struct rt_figures *w)
{
	struct rt_fig_prom *p = w->prom;
	for (size_t i = 0; i < p->n; i++)
		free(p->s[i].labels);
	free(p->s);
	free(p);
	w->prom = NULL;
}

void rt_fig_init_prometheus(struct rt_figures *w, char *out, size_t cap, const char *daemon)
{
	rt_fig_init(w, out, cap, 0);
	if (!(w->prom = calloc(1, sizeof *w->prom))) {
		/* Out of memory: a comment, and no room for anything after it. */
		put(w, "# retrace: out of memory while rendering the metrics\n");
		w->cap = w->len + 1;
		return;
	}
	snprintf(w->prom->daemon, sizeof w->prom->daemon, "%s", daemon);
	w->prom->info = w->prom->daemon_info = -1;
}

int rt_fig_prometheus(const struct rt_figures *w)
{
	return w->prom != NULL;
}

/* ------------------------------------------------------ the writer ---- */

static void prom_section(struct rt_figures *w, const char *base, const char *label, const char *id)
{
	struct rt_fig_prom *p = w->prom;
	size_t n = 0;
	p->section[0] = 0;
	sanitise_cat(p->section, sizeof p->section, base);
	p->label[0] = 0;
	p->info = -1;
	if (id) {
		char *l = NULL;
		snprintf(p->section_raw, sizeof p->section_raw, "%s.*", base);
		if (label_cat(&l, &n, label, id) != 0 || n >= sizeof p->label)
			p->oom = 1;
		else
			memcpy(p->label, l, n + 1);
		free(l);
	} else {
		snprintf(p->section_raw, sizeof p->section_raw, "%s", base);
	}
}

void rt_fig_section(struct rt_figures *w, const char *name)
{
	if (w->prom) {
		prom_section(w, name, NULL, NULL);
		return;
	}
	if (w->json)
		put(w, "%s\"%s\":{", w->sections ? "}," : "{", name);
	else
		put(w, "%s:\n", name);
	w->sections++;
	w->first = 1;
}

void rt_fig_section_id(struct rt_figures *w, const char *base, const char *label, const char *id)
{
	char name[160];
	if (w->prom) {
		prom_section(w, base, label, id);
		return;
	}
	snprintf(name, sizeof name, "%s.%s", base, id);
	rt_fig_section(w, name);
}

static void key(struct rt_figures *w, const char *k)
{
	if (w->json)
		put(w, "%s\"%s\":", w->first ? "" : ",", k);
	else
		put(w, "  %-28s ", k);
	w->first = 0;
}

static void plain_u64(struct rt_figures *w, const char *k, uint64_t v)
{
	key(w, k);
	put(w, w->json ? "%llu" : "%llu\n", (unsigned long long)v);
}

static void plain_f(struct rt_figures *w, const char *k, double v)
{
	key(w, k);
	put(w, w->json ? "%.3f" : "%.3f\n", v);
}

void rt_fig_u64(struct rt_figures *w, const char *k, uint64_t v)
{
	if (w->prom)
		prom_number(w, k, T_COUNTER, (double)v, v, 1, 0);
	else
		plain_u64(w, k, v);
}

void rt_fig_gauge(struct rt_figures *w, const char *k, uint64_t v)
{
	if (w->prom)
		prom_number(w, k, T_GAUGE, (double)v, v, 1, 0);
	else
		plain_u64(w, k, v);
}

void rt_fig_f(struct rt_figures *w, const char *k, double v)
{
	if (w->prom)
		prom_number(w, k, T_GAUGE, v, 0, 0, 0);
	else
		plain_f(w, k, v);
}

void rt_fig_time_u64(struct rt_figures *w, const char *k, uint64_t v, double unit_s)
{
	if (w->prom)
		prom_number(w, k, T_GAUGE, (double)v * unit_s, 0, 0, 1);
	else
		plain_u64(w, k, v);
}

void rt_fig_time_f(struct rt_figures *w, const char *k, double v, double unit_s)
{
	if (w->prom)
		prom_number(w, k, T_GAUGE, v * unit_s, 0, 0, 1);
	else
		plain_f(w, k, v);
}

void rt_fig_str(struct rt_figures *w, const char *k, const char *s)
{
	if (w->prom) {
		prom_string(w, k, s);
		return;
	}
	key(w, k);
	if (!w->json) {
		put(w, "%s\n", s);
		return;
	}
	rt_json_put_string(put_raw, w, s);
}

size_t rt_fig_end(struct rt_figures *w)
{
	if (w->prom) {
		prom_write(w);
		prom_free(w);
	} else if (w->json) {
		put(w, w->sections ? "}}" : "{}");
	}
	return w->len;
}
