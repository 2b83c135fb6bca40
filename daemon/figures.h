/*
 * daemon/figures.h — the daemons' status figures: named figures in sections,
 * rendered as aligned text, as one JSON object (`retrace status [--json]`), or
 * in the Prometheus text exposition format 0.0.4 (`/metrics`, daemon/metrics.h).
 *
 * Owns: the rendering only (the daemons own their figures). A figure is
 * listed once and written through one of these calls, so the three forms
 * always agree. Output is cut at `cap` (always NUL terminated; rt_fig_cut says
 * so); JSON strings are written by daemon/json.h.
 *
 * What the call says matters to Prometheus only (text and JSON print the value):
 *   rt_fig_u64     a counter: it only grows; named ..._total
 *   rt_fig_gauge   a gauge: a level, depth, size, setting, flag (a key
 *                  "total" loses the suffix: buffers.total is ..._buffers)
 *   rt_fig_f       a gauge (floating point)
 *   rt_fig_time_*  a gauge in seconds: v * unit_s, the key's unit suffix
 *                  (_ns _us _ms _s) becomes _seconds
 *   rt_fig_str     a label of the info metric (retrace_<daemon>_info ... 1)
 * A metric is named retrace_<daemon>_<section>_<key>, sanitised to
 * [a-zA-Z0-9_]. A section of many instances (one per trigger id, per agent)
 * is opened with rt_fig_section_id: text and JSON name it "base.id", Prometheus
 * names its metrics retrace_<daemon>_<base>_<key> with the label label="id", and
 * its strings go to retrace_<daemon>_<base>_info{label="id",...}. All samples of
 * one metric are written together, whatever order the sections came in.
 */
#ifndef RETRACE_DAEMON_FIGURES_H
#define RETRACE_DAEMON_FIGURES_H

#include <stddef.h>
#include <stdint.h>

struct rt_fig_prom; /* figures.c: the samples gathered for Prometheus */

struct rt_figures {
	char *out;
	size_t len, cap;
	int json;
	int first;    /* no member written yet in this section */
	int sections;
	int cut;      /* output was cut at cap */
	struct rt_fig_prom *prom; /* non-NULL: Prometheus text format */
};

/* Text (json 0) or JSON (json 1). */
void rt_fig_init(struct rt_figures *w, char *out, size_t cap, int json);
/* Prometheus text format; metric names start retrace_<daemon>_. Gathers the
 * samples on the heap until rt_fig_end (which frees them). */
void rt_fig_init_prometheus(struct rt_figures *w, char *out, size_t cap, const char *daemon);
/* 1 if rendering for Prometheus (a writer may list an instance's figures there
 * as a labelled section where the text form has one summary line). */
int rt_fig_prometheus(const struct rt_figures *w);

void rt_fig_section(struct rt_figures *w, const char *name);
/* A section that is one instance of many: "base.id"; for Prometheus, label="id". */
void rt_fig_section_id(struct rt_figures *w, const char *base, const char *label, const char *id);

void rt_fig_u64(struct rt_figures *w, const char *key, uint64_t v);   /* counter */
void rt_fig_gauge(struct rt_figures *w, const char *key, uint64_t v); /* gauge */
void rt_fig_f(struct rt_figures *w, const char *key, double v);       /* gauge */
/* A duration or age shown in the key's unit; unit_s: seconds per unit (1e-6 for _us). */
void rt_fig_time_u64(struct rt_figures *w, const char *key, uint64_t v, double unit_s);
void rt_fig_time_f(struct rt_figures *w, const char *key, double v, double unit_s);
void rt_fig_str(struct rt_figures *w, const char *key, const char *s);

/* Close the JSON object (text: nothing; Prometheus: write the gathered metrics);
 * returns the length written. */
size_t rt_fig_end(struct rt_figures *w);
/* 1 if the output did not fit in cap (rendered again with more room). */
static inline int rt_fig_cut(const struct rt_figures *w)
{
	return w->cut;
}

#endif
