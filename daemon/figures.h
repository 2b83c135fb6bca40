/*
 * daemon/figures.h — the daemons' status replies: named figures in sections,
 * rendered as aligned text or as one JSON object.
 *
 * Owns: the rendering only (the daemons own their figures). A figure is
 * listed once and written through one of these calls, so the text and the JSON
 * form of `retrace status` always agree. Output is cut at `cap` (always NUL
 * terminated); strings are written by daemon/json.h.
 */
#ifndef RETRACE_DAEMON_FIGURES_H
#define RETRACE_DAEMON_FIGURES_H

#include <stddef.h>
#include <stdint.h>

struct rt_figures {
	char *out;
	size_t len, cap;
	int json;
	int first;    /* no member written yet in this section */
	int sections;
};

void rt_fig_init(struct rt_figures *w, char *out, size_t cap, int json);
void rt_fig_section(struct rt_figures *w, const char *name);
void rt_fig_u64(struct rt_figures *w, const char *key, uint64_t v);
void rt_fig_f(struct rt_figures *w, const char *key, double v);
void rt_fig_str(struct rt_figures *w, const char *key, const char *s);
/* Close the JSON object (text: nothing); returns the length written. */
size_t rt_fig_end(struct rt_figures *w);

#endif
