/* nezha.c — reader for the Nezha / TrainTicket CSV dataset layout.
 *
 * DIR/trace/HH_MM_trace.csv rows: TraceID,SpanID,ParentID,PodName,OperationName,
 * StartTimeUnixNano,EndTimeUnixNano,Duration (ParentID "root" for roots);
 * DIR/log/HH_MM_log.csv rows: Timestamp,TimeUnixNano,Node,PodName,Container,TraceID,SpanID,
 * Log where Log is a quoted JSON object whose "log" member is the container line
 * "HH:MM:SS.mmm LEVEL logger#line message". Each file is read line by line with a
 * small in-place CSV splitter (quoted fields, "" escapes); the service is the pod name
 * without its two Kubernetes suffixes; the log text kept for mining is everything
 * after the level. The dataset has no span status, so errors show only as ERROR logs.
 */
#include "dataset_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 12

bool rt_sel_ds_parse_hex_id(const char *s, size_t n, uint64_t *hi, uint64_t *lo)
{
    if (n == 0 || n > 32)
        return false;
    uint64_t h = 0, l = 0;
    for (size_t i = 0; i < n; i++) {
        int c = tolower((unsigned char)s[i]);
        int v = isdigit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
        if (v < 0)
            return false;
        h = (h << 4) | (l >> 60);
        l = (l << 4) | (uint64_t)v;
    }
    if (hi)
        *hi = h;
    *lo = l;
    return true;
}

/* Split a CSV line in place; returns the number of fields. */
static size_t split_csv(char *line, char **f, size_t *len, size_t max)
{
    size_t n = 0;
    char *p = line;
    while (n < max) {
        if (*p == '"') {
            char *w = ++p, *start = p;
            while (*p) {
                if (*p == '"' && p[1] == '"') {
                    *w++ = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    *w++ = *p++;
                }
            }
            f[n] = start;
            len[n++] = (size_t)(w - start);
        } else {
            f[n] = p;
            while (*p && *p != ',' && *p != '\n' && *p != '\r')
                p++;
            len[n] = (size_t)(p - f[n]);
            n++;
        }
        if (*p != ',')
            break;
        p++;
    }
    return n;
}

static size_t service_len(const char *pod, size_t n)
{
    size_t cut = n;
    for (int dashes = 0; dashes < 2; dashes++) {
        while (cut > 0 && pod[cut - 1] != '-')
            cut--;
        if (cut == 0)
            return n; /* not a Kubernetes pod name: keep as is */
        cut--;
    }
    return cut;
}

static uint64_t parse_u64(const char *s, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n && isdigit((unsigned char)s[i]); i++)
        v = v * 10 + (uint64_t)(s[i] - '0');
    return v;
}

static int parse_span_row(rt_sel_dataset *ds, char **f, size_t *len, size_t nf)
{
    if (nf < 7)
        return 1; /* malformed: skip */
    rt_sel_raw_span r = {0};
    if (!rt_sel_ds_parse_hex_id(f[0], len[0], &r.trace_hi, &r.trace_lo) ||
        !rt_sel_ds_parse_hex_id(f[1], len[1], NULL, &r.span_id))
        return 1;
    r.has_parent = !(len[2] == 4 && memcmp(f[2], "root", 4) == 0) &&
                   rt_sel_ds_parse_hex_id(f[2], len[2], NULL, &r.parent_id);
    r.service = rt_sel_ds_intern(ds, f[3], service_len(f[3], len[3]));
    r.operation = rt_sel_ds_intern(ds, f[4], len[4]);
    r.start_ns = parse_u64(f[5], len[5]);
    r.end_ns = parse_u64(f[6], len[6]);
    if (!r.service || !r.operation)
        return -1;
    return rt_sel_ds_add_span(ds, &r);
}

/* Decode the JSON string starting after the opening quote, into out (in place ok). */
static size_t json_string(const char *p, const char *end, char *out)
{
    size_t o = 0;
    while (p < end && *p != '"') {
        if (*p == '\\' && p + 1 < end) {
            p++;
            switch (*p) {
            case 'n': out[o++] = '\n'; break;
            case 't': out[o++] = '\t'; break;
            case 'r': out[o++] = '\r'; break;
            case 'u': out[o++] = '?'; p += (end - p > 4) ? 4 : 0; break;
            default: out[o++] = *p; break;
            }
            p++;
        } else {
            out[o++] = *p++;
        }
    }
    return o;
}

static uint8_t level_of(const char *w, size_t n)
{
    if (n == 5 && memcmp(w, "ERROR", 5) == 0)
        return RT_SEL_LOG_ERROR;
    if (n == 5 && memcmp(w, "FATAL", 5) == 0)
        return RT_SEL_LOG_ERROR;
    if ((n == 4 && memcmp(w, "WARN", 4) == 0) || (n == 7 && memcmp(w, "WARNING", 7) == 0))
        return RT_SEL_LOG_WARN;
    if (n == 5 && memcmp(w, "DEBUG", 5) == 0)
        return RT_SEL_LOG_DEBUG;
    return RT_SEL_LOG_INFO;
}

static const char *skip_word(const char *p, const char *end, const char **w, size_t *wl)
{
    while (p < end && isspace((unsigned char)*p))
        p++;
    *w = p;
    while (p < end && !isspace((unsigned char)*p))
        p++;
    *wl = (size_t)(p - *w);
    return p;
}

static int parse_log_row(rt_sel_dataset *ds, char **f, size_t *len, size_t nf)
{
    if (nf < 8)
        return 1;
    rt_sel_raw_log r = {0};
    if (!rt_sel_ds_parse_hex_id(f[5], len[5], &r.trace_hi, &r.trace_lo) ||
        !rt_sel_ds_parse_hex_id(f[6], len[6], NULL, &r.span_id))
        return 1;
    r.ts_ns = parse_u64(f[1], len[1]);
    char *json = f[7], *end = f[7] + len[7];
    char *key = strstr(json, "\"log\":\"");
    if (!key || key >= end)
        return 1;
    size_t n = json_string(key + 7, end, json); /* decode in place: output never longer */
    const char *p = json, *e = json + n, *w;
    size_t wl;
    p = skip_word(p, e, &w, &wl); /* time of day */
    p = skip_word(p, e, &w, &wl); /* level */
    r.level = level_of(w, wl);
    while (p < e && isspace((unsigned char)*p))
        p++;
    while (e > p && isspace((unsigned char)e[-1]))
        e--;
    r.text = rt_sel_ds_strdup(ds, p, (size_t)(e - p));
    if (!r.text)
        return -1;
    return rt_sel_ds_add_log(ds, &r);
}

typedef int (*row_fn)(rt_sel_dataset *, char **, size_t *, size_t);

static int read_csv(rt_sel_dataset *ds, const char *path, row_fn row, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        rt_sel_ds_error(err, errlen, "cannot open %s", path);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    bool header = true;
    int rc = 0;
    while ((got = getline(&line, &cap, fp)) >= 0) {
        if (header) {
            header = false;
            continue;
        }
        char *f[MAX_FIELDS];
        size_t len[MAX_FIELDS];
        size_t nf = split_csv(line, f, len, MAX_FIELDS);
        if (row(ds, f, len, nf) < 0) {
            rt_sel_ds_error(err, errlen, "out of memory reading %s", path);
            rc = -1;
            break;
        }
    }
    free(line);
    fclose(fp);
    return rc;
}

static int read_folder(rt_sel_dataset *ds, const char *dir, const char *sub, const char *suffix,
                       row_fn row, bool required, char *err, size_t errlen)
{
    size_t pl = strlen(dir) + strlen(sub) + 2;
    char *path = malloc(pl);
    if (!path)
        return -1;
    snprintf(path, pl, "%s/%s", dir, sub);
    char **files;
    size_t n;
    int rc = 0;
    if (rt_sel_ds_list(path, suffix, &files, &n) != 0 || (required && n == 0)) {
        if (required) {
            rt_sel_ds_error(err, errlen, "no %s files in %s (expected the Nezha layout "
                            "DIR/trace/HH_MM_trace.csv, DIR/log/HH_MM_log.csv)", suffix, path);
            rc = -1;
        }
        free(path);
        return rc;
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = read_csv(ds, files[i], row, err, errlen);
    rt_sel_ds_list_free(files, n);
    free(path);
    return rc;
}

rt_sel_dataset *rt_sel_dataset_read_nezha(const char *dir, char *err, size_t errlen)
{
    rt_sel_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) {
        rt_sel_ds_error(err, errlen, "out of memory");
        return NULL;
    }
    if (read_folder(ds, dir, "trace", "_trace.csv", parse_span_row, true, err, errlen) ||
        read_folder(ds, dir, "log", "_log.csv", parse_log_row, false, err, errlen) ||
        rt_sel_ds_finish(ds, err, errlen)) {
        rt_sel_dataset_free(ds);
        return NULL;
    }
    return ds;
}
