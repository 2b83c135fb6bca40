/* gen.h — tiny builder for generated test traces with known answers. */
#ifndef RETRACE_TEST_SELECT_GEN_H
#define RETRACE_TEST_SELECT_GEN_H

#include "select.h"

#include <assert.h>
#include <string.h>

#define GEN_MAX_SPANS 64
#define GEN_MAX_LOGS 128

typedef struct gen_trace {
    rt_sel_trace t;
    rt_sel_span spans[GEN_MAX_SPANS];
    rt_sel_log logs[GEN_MAX_LOGS];
} gen_trace;

static inline void gen_init(gen_trace *g, uint64_t id)
{
    memset(g, 0, sizeof *g);
    g->t.id_lo = id;
    g->t.spans = g->spans;
    g->t.logs = g->logs;
}

/* Add a span; its logs must be added before the next span. Returns its index. */
static inline int gen_span(gen_trace *g, const char *svc, const char *op, int parent,
                           uint64_t start, uint64_t end)
{
    assert(g->t.n_spans < GEN_MAX_SPANS);
    rt_sel_span *s = &g->spans[g->t.n_spans];
    *s = (rt_sel_span){.service = svc, .operation = op, .parent = parent, .start_ns = start,
                       .end_ns = end, .first_log = g->t.n_logs};
    return (int)g->t.n_spans++;
}

/* Log on the most recent span, with a tracer-given template id or free text. */
static inline void gen_log(gen_trace *g, uint8_t level, uint32_t template_id, const char *text)
{
    assert(g->t.n_logs < GEN_MAX_LOGS && g->t.n_spans > 0);
    rt_sel_span *s = &g->spans[g->t.n_spans - 1];
    g->logs[g->t.n_logs] = (rt_sel_log){.ts_ns = s->start_ns + s->n_logs + 1, .text = text,
                                        .template_id = template_id, .level = level};
    g->t.n_logs++;
    s->n_logs++;
}

/* A two-level trace: root API + `fanout` identical children, each with one log. */
static inline void gen_fanout(gen_trace *g, uint64_t id, const char *api, int fanout,
                              uint32_t child_template)
{
    gen_init(g, id);
    int root = gen_span(g, "frontend", api, -1, 1000, 9000);
    gen_log(g, RT_SEL_LOG_INFO, 1, NULL);
    for (int i = 0; i < fanout; i++) {
        gen_span(g, "db", "query", root, 2000 + (uint64_t)i, 3000 + (uint64_t)i);
        gen_log(g, RT_SEL_LOG_INFO, child_template, NULL);
    }
}

#endif
