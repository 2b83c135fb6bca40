/* paper.c — a trace as the Gleaner paper's set of event pairs.
 *
 * The events of a span are, in order: its operation, the Drain template ids of its
 * logs in time order, and a latency event when the span is slower than 1.5, 3 or 5 ×
 * the p90 of its (service, operation) in the same minute of trace time (three tiers).
 * Pairs are consecutive events of a span plus (parent operation, child operation) for
 * every edge; a trace is the sorted set of its distinct pair hashes. The per-minute
 * p90s come from a sorted table built over a set of traces (the whole dataset for the
 * metrics, one batch for the original algorithm): every span contributes one
 * (key, duration) entry, the entries are sorted, and each run of a key gives the
 * nearest-rank p90 (the ⌈0.9·k⌉-th smallest of k).
 */
#include "internal.h"
#include "paper_internal.h"

#include <math.h>
#include <stdlib.h>

typedef struct op_minute {
    uint64_t key; /* op key combined with the minute of the span's start */
    uint64_t dur_ns;
} op_minute;

static int by_key_dur(const void *x, const void *y)
{
    const op_minute *a = x, *b = y;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return (a->dur_ns > b->dur_ns) - (a->dur_ns < b->dur_ns);
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static uint64_t span_dur(const rt_sel_span *s)
{
    return s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0;
}

static uint64_t minute_key(const rt_sel_span *s)
{
    return rt_sel_combine(rt_sel_span_key(s), s->start_ns / 60000000000ull);
}

int rt_sel_paper_p90_build(const rt_sel_trace *traces, size_t n, rt_sel_paper_p90 *out)
{
    size_t spans = 0, k = 0, m = 0;
    for (size_t i = 0; i < n; i++)
        spans += traces[i].n_spans;
    op_minute *v = malloc((spans ? spans : 1) * sizeof *v);
    out->keys = malloc((spans ? spans : 1) * sizeof *out->keys);
    out->p90 = malloc((spans ? spans : 1) * sizeof *out->p90);
    out->n = 0;
    if (!v || !out->keys || !out->p90) {
        free(v);
        rt_sel_paper_p90_free(out);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < traces[i].n_spans; j++)
            v[k++] = (op_minute){minute_key(&traces[i].spans[j]), span_dur(&traces[i].spans[j])};
    if (k)
        qsort(v, k, sizeof *v, by_key_dur);
    for (size_t i = 0; i < k;) {
        size_t j = i;
        while (j < k && v[j].key == v[i].key)
            j++;
        size_t c = j - i, rank = (size_t)ceil(0.9 * (double)c);
        out->keys[m] = v[i].key;
        out->p90[m++] = v[i + (rank ? rank - 1 : 0)].dur_ns;
        i = j;
    }
    out->n = m;
    free(v);
    return 0;
}

void rt_sel_paper_p90_free(rt_sel_paper_p90 *t)
{
    free(t->keys);
    free(t->p90);
    *t = (rt_sel_paper_p90){0};
}

int rt_sel_paper_tier(const rt_sel_paper_p90 *t, const rt_sel_span *s)
{
    uint64_t key = minute_key(s);
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t q = lo < t->n && t->keys[lo] == key ? t->p90[lo] : 0;
    double d = (double)span_dur(s), p = (double)q;
    return q == 0 ? 0 : d > 5 * p ? 3 : d > 3 * p ? 2 : d > 1.5 * p ? 1 : 0;
}

#define EV_LAT 0x1a7e000000000000ull

size_t rt_sel_paper_pairs(const rt_sel_trace *t, const rt_sel_paper_p90 *p90, uint64_t **buf,
                          size_t *cap)
{
    size_t need = (size_t)t->n_spans * 2 + t->n_logs + 1, k = 0;
    if (need > *cap) {
        uint64_t *nb = realloc(*buf, need * sizeof *nb);
        if (!nb)
            return (size_t)-1;
        *buf = nb;
        *cap = need;
    }
    uint64_t *v = *buf;
    for (uint32_t i = 0; i < t->n_spans; i++) {
        const rt_sel_span *s = &t->spans[i];
        uint64_t op = rt_sel_span_key(s), prev = op;
        if (s->parent >= 0 && (uint32_t)s->parent < t->n_spans)
            v[k++] = rt_sel_combine(rt_sel_span_key(&t->spans[s->parent]) ^ 0x9a4e, op);
        for (uint32_t l = s->first_log; l < s->first_log + s->n_logs && l < t->n_logs; l++) {
            uint64_t ev = rt_sel_combine(0x7e3f, t->logs[l].template_id);
            v[k++] = rt_sel_combine(prev, ev);
            prev = ev;
        }
        int tier = rt_sel_paper_tier(p90, s);
        if (tier)
            v[k++] = rt_sel_combine(prev, rt_sel_combine(op, EV_LAT + (uint64_t)tier));
    }
    if (k)
        qsort(v, k, sizeof *v, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || v[i] != v[u - 1])
            v[u++] = v[i];
    return u;
}
