/* assign.c — minimum-cost assignment of n rows to m >= n columns (the Hungarian
 * method with potentials, O(n^2 m)).
 *
 * The weaver builds one row per client of a batch (or window) and one column per
 * candidate server plus one "none" column per client, so a full assignment always
 * exists; forbidden pairs carry a large finite cost. The scratch buffers live in a
 * caller-owned workspace so the many small batches of a run allocate only once.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

static int grow(wv_assign_ws *ws, size_t n, size_t m)
{
    if (m + 1 <= ws->cap_cols && n + 1 <= ws->cap_rows)
        return 0;
    size_t cols = (m + 1) * 2, rows = (n + 1) * 2;
    double *u = realloc(ws->u, rows * sizeof *u), *v = NULL, *minv = NULL;
    if (u)
        ws->u = u;
    v = realloc(ws->v, cols * sizeof *v);
    if (v)
        ws->v = v;
    minv = realloc(ws->minv, cols * sizeof *minv);
    if (minv)
        ws->minv = minv;
    size_t *p = realloc(ws->p, cols * sizeof *p), *way = NULL;
    if (p)
        ws->p = p;
    way = realloc(ws->way, cols * sizeof *way);
    if (way)
        ws->way = way;
    unsigned char *used = realloc(ws->used, cols);
    if (used)
        ws->used = used;
    if (!u || !v || !minv || !p || !way || !used)
        return -1;
    ws->cap_cols = cols;
    ws->cap_rows = rows;
    return 0;
}

void wv_assign_ws_free(wv_assign_ws *ws)
{
    free(ws->u);
    free(ws->v);
    free(ws->minv);
    free(ws->p);
    free(ws->way);
    free(ws->used);
}

int wv_assign(wv_assign_ws *ws, const double *cost, size_t n, size_t m, size_t *row_to_col)
{
    if (n == 0)
        return 0;
    if (m < n || grow(ws, n, m) < 0)
        return -1;
    double *u = ws->u, *v = ws->v, *minv = ws->minv;
    size_t *p = ws->p, *way = ws->way;
    unsigned char *used = ws->used;
    for (size_t i = 0; i <= n; i++)
        u[i] = 0;
    for (size_t j = 0; j <= m; j++) {
        v[j] = 0;
        p[j] = 0;
        way[j] = 0;
    }
    for (size_t i = 1; i <= n; i++) {
        p[0] = i;
        size_t j0 = 0;
        for (size_t j = 0; j <= m; j++) {
            minv[j] = INFINITY;
            used[j] = 0;
        }
        do {
            used[j0] = 1;
            size_t i0 = p[j0], j1 = 0;
            double delta = INFINITY;
            const double *row = cost + (i0 - 1) * m;
            for (size_t j = 1; j <= m; j++) {
                if (used[j])
                    continue;
                double cur = row[j - 1] - u[i0] - v[j];
                if (cur < minv[j]) {
                    minv[j] = cur;
                    way[j] = j0;
                }
                if (minv[j] < delta) {
                    delta = minv[j];
                    j1 = j;
                }
            }
            for (size_t j = 0; j <= m; j++) {
                if (used[j]) {
                    u[p[j]] += delta;
                    v[j] -= delta;
                } else {
                    minv[j] -= delta;
                }
            }
            j0 = j1;
        } while (p[j0] != 0);
        do {
            size_t j1 = way[j0];
            p[j0] = p[j1];
            j0 = j1;
        } while (j0);
    }
    for (size_t j = 1; j <= m; j++)
        if (p[j])
            row_to_col[p[j] - 1] = j - 1;
    return 0;
}
