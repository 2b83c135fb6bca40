/* model.c — the per-hop delay model: two independent 1-D Gaussian mixtures.
 *
 * A link A-client -> B-server is described by two delays: the request delay (server
 * start - client start: network, queueing before the server span opens) and the
 * response delay (client end - server end). The first round fits one Gaussian to
 * weighted samples (every candidate pair, weighted 1/candidates of its client, or the
 * unambiguous pairs when there are enough); later rounds fit a mixture by a few EM
 * steps on the pairs the previous round chose. A floor on the standard deviation keeps
 * a model fitted on near-identical delays from calling every other delay impossible,
 * and every fit gets one wide rare component (2 %, centred on 0, as wide as the mean
 * client span) so that a delay in the tail is unlikely rather than impossible.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SD_FLOOR_NS 200.0
#define EM_STEPS 15
#define OUTLIER_WEIGHT 0.02
#define LOG_SQRT_2PI 0.91893853320467274178

static double log_normal_pdf(double x, double mean, double sd)
{
    double z = (x - mean) / sd;
    return -0.5 * z * z - log(sd) - LOG_SQRT_2PI;
}

double wv_mixture_loglik(const rt_weave_mixture *m, double x)
{
    /* Direct sum first (one exp per component); the log-sum-exp form only when
     * every term underflows, far out in the tails. */
    double s = 0;
    for (unsigned c = 0; c < m->k; c++) {
        double z = (x - m->mean[c]) / m->sd[c];
        s += m->weight[c] / m->sd[c] * exp(-0.5 * z * z);
    }
    if (s > 1e-300)
        return log(s) - LOG_SQRT_2PI;
    double best = -INFINITY, l[RT_WEAVE_MAX_COMPONENTS];
    for (unsigned c = 0; c < m->k; c++) {
        l[c] = log(m->weight[c]) + log_normal_pdf(x, m->mean[c], m->sd[c]);
        if (l[c] > best)
            best = l[c];
    }
    s = 0;
    for (unsigned c = 0; c < m->k; c++)
        s += exp(l[c] - best);
    return best + log(s);
}

/* The highest log density of the mixture, taken at its component means. */
static double mixture_peak(const rt_weave_mixture *m)
{
    double best = -INFINITY;
    for (unsigned c = 0; c < m->k; c++) {
        double l = wv_mixture_loglik(m, m->mean[c]);
        if (l > best)
            best = l;
    }
    return best;
}

double rt_weave_model_loglik(const rt_weave_model *m, double request_ns, double response_ns)
{
    if (!m || m->request.k == 0 || m->response.k == 0)
        return -INFINITY;
    return wv_mixture_loglik(&m->request, request_ns) + wv_mixture_loglik(&m->response, response_ns);
}

double wv_model_peak(const rt_weave_model *m)
{
    return mixture_peak(&m->request) + mixture_peak(&m->response);
}

static void fit_one(rt_weave_mixture *m, const double *x, const double *w, size_t n)
{
    double sw = 0, sx = 0, sxx = 0;
    for (size_t i = 0; i < n; i++) {
        sw += w[i];
        sx += w[i] * x[i];
    }
    double mean = sw > 0 ? sx / sw : 0;
    for (size_t i = 0; i < n; i++)
        sxx += w[i] * (x[i] - mean) * (x[i] - mean);
    double sd = sw > 0 ? sqrt(sxx / sw) : 0;
    m->k = 1;
    m->weight[0] = 1;
    m->mean[0] = mean;
    m->sd[0] = sd > SD_FLOOR_NS ? sd : SD_FLOOR_NS;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* EM for a k-component mixture on unweighted samples; starts from quantiles. */
static int fit_mixture(rt_weave_mixture *m, const double *x, size_t n, unsigned k)
{
    if (k <= 1 || n < 20 * (size_t)k) {
        double *w = malloc((n ? n : 1) * sizeof *w);
        if (!w)
            return -1;
        for (size_t i = 0; i < n; i++)
            w[i] = 1;
        fit_one(m, x, w, n);
        free(w);
        return 0;
    }
    double *sorted = malloc(n * sizeof *sorted), *resp = malloc(n * k * sizeof *resp);
    if (!sorted || !resp) {
        free(sorted);
        free(resp);
        return -1;
    }
    memcpy(sorted, x, n * sizeof *x);
    qsort(sorted, n, sizeof *sorted, cmp_double);
    double spread = sorted[n * 3 / 4] - sorted[n / 4];
    m->k = k;
    for (unsigned c = 0; c < k; c++) {
        m->mean[c] = sorted[(size_t)((c + 0.5) / k * (double)n)];
        m->sd[c] = spread > SD_FLOOR_NS ? spread : SD_FLOOR_NS;
        m->weight[c] = 1.0 / k;
    }
    for (int step = 0; step < EM_STEPS; step++) {
        double scale[RT_WEAVE_MAX_COMPONENTS], inv_sd[RT_WEAVE_MAX_COMPONENTS];
        for (unsigned c = 0; c < k; c++) {
            scale[c] = m->weight[c] / m->sd[c];
            inv_sd[c] = 1.0 / m->sd[c];
        }
        for (size_t i = 0; i < n; i++) {
            double l[RT_WEAVE_MAX_COMPONENTS], s = 0;
            for (unsigned c = 0; c < k; c++) {
                double z = (x[i] - m->mean[c]) * inv_sd[c];
                s += (l[c] = scale[c] * exp(-0.5 * z * z));
            }
            for (unsigned c = 0; c < k; c++) /* far out of every component: share it */
                resp[i * k + c] = s > 1e-300 ? l[c] / s : 1.0 / k;
        }
        for (unsigned c = 0; c < k; c++) {
            double sw = 0, sx = 0, sxx = 0;
            for (size_t i = 0; i < n; i++) {
                sw += resp[i * k + c];
                sx += resp[i * k + c] * x[i];
            }
            if (sw < 1e-9) { /* an empty component: park it wide at the median */
                m->weight[c] = 1e-6;
                m->mean[c] = sorted[n / 2];
                m->sd[c] = spread > SD_FLOOR_NS ? spread : SD_FLOOR_NS;
                continue;
            }
            double mean = sx / sw;
            for (size_t i = 0; i < n; i++)
                sxx += resp[i * k + c] * (x[i] - mean) * (x[i] - mean);
            double sd = sqrt(sxx / sw);
            m->weight[c] = sw / (double)n;
            m->mean[c] = mean;
            m->sd[c] = sd > SD_FLOOR_NS ? sd : SD_FLOOR_NS;
        }
    }
    free(sorted);
    free(resp);
    return 0;
}

/* A wide, rare component: a delay far outside the fitted body (a retransmission, a
 * pause) then costs a few nats instead of being called impossible, so the refit
 * still sees those pairs and a tail is learnt instead of cut off. */
static void add_outlier(rt_weave_mixture *m, double broad_sd)
{
    if (m->k >= RT_WEAVE_MAX_COMPONENTS)
        return;
    for (unsigned c = 0; c < m->k; c++)
        m->weight[c] *= 1.0 - OUTLIER_WEIGHT;
    m->weight[m->k] = OUTLIER_WEIGHT;
    m->mean[m->k] = 0;
    m->sd[m->k] = broad_sd > SD_FLOOR_NS ? broad_sd : SD_FLOOR_NS;
    m->k++;
}

void wv_model_add_outlier(rt_weave_model *m, double broad_sd)
{
    add_outlier(&m->request, broad_sd);
    add_outlier(&m->response, broad_sd);
}

int wv_model_fit_weighted(rt_weave_model *m, const double *req, const double *resp,
                          const double *w, size_t n)
{
    fit_one(&m->request, req, w, n);
    fit_one(&m->response, resp, w, n);
    return 0;
}

int wv_model_fit(rt_weave_model *m, const double *req, const double *resp, size_t n,
                 unsigned k)
{
    if (fit_mixture(&m->request, req, n, k) < 0 || fit_mixture(&m->response, resp, n, k) < 0)
        return -1;
    return 0;
}
