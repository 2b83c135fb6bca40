/* internal.h — what the weave/ files share and nobody else sees. */
#ifndef RETRACE_WEAVE_INTERNAL_H
#define RETRACE_WEAVE_INTERNAL_H

#include "weave.h"

#include <stddef.h>

/* model.c */
double wv_mixture_loglik(const rt_weave_mixture *m, double x);
double wv_model_peak(const rt_weave_model *m);
int wv_model_fit_weighted(rt_weave_model *m, const double *req, const double *resp,
                          const double *w, size_t n);
int wv_model_fit(rt_weave_model *m, const double *req, const double *resp, size_t n,
                 unsigned k);
void wv_model_add_outlier(rt_weave_model *m, double broad_sd);

/* assign.c: scratch for the Hungarian method, grown on demand. */
typedef struct wv_assign_ws {
    double *u, *v, *minv;
    size_t *p, *way;
    unsigned char *used;
    size_t cap_rows, cap_cols;
} wv_assign_ws;

/* cost is n rows x m columns, row-major; row_to_col receives each row's column. */
int wv_assign(wv_assign_ws *ws, const double *cost, size_t n, size_t m, size_t *row_to_col);
void wv_assign_ws_free(wv_assign_ws *ws);

/* Indices of the valid spans sorted by start (ties by end, then index). */
size_t *wv_sort_by_start(const rt_weave_span *spans, size_t n, size_t *n_valid);

#endif
