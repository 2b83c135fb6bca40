/* otlp_json.c — reader for OTLP/JSON trace exports (ExportTraceServiceRequest).
 *
 * Every *.json, *.jsonl and *.ndjson file under DIR (recursively, symlinked
 * directories not followed; or DIR itself when it is a file) is read whole and
 * parsed with the strict in-place parser of json.c as a sequence of JSON values
 * separated by whitespace: one value is a document, one per line is JSON lines, and
 * the same loop reads both. Each value must be an ExportTraceServiceRequest:
 *
 *   resourceSpans[].resource.attributes[]  service.name (default "unknown_service")
 *   resourceSpans[].scopeSpans[].spans[]   (also the older instrumentationLibrarySpans)
 *     traceId / spanId / parentSpanId      lowercase or uppercase hex (32 / 16 digits)
 *     name, startTimeUnixNano, endTimeUnixNano (decimal strings or integer numbers)
 *     status.code                          2 (or "STATUS_CODE_ERROR") = the span failed
 *     events[]                             logs: name = body, timeUnixNano,
 *         attributes log.severity (DEBUG/INFO/WARN/ERROR; absent = INFO, an event
 *         named "exception" = ERROR) and log.template_id (the tracer's id, folded
 *         into the < 2^31 space; absent = Drain mines the body)
 *
 * This is what `retrace export --format otlp-json` writes (coordinator/export.h).
 * Unknown members are ignored (OTLP adds fields over time). Malformed JSON, a value
 * that is not a request object, or a span without valid hex ids fails the whole read
 * with "FILE: byte N: what"; a reader of evaluation data should not guess.
 */
#include "readers_internal.h"
#include "json_internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define MAX_DIR_DEPTH  32
#define MAX_FILE_BYTES (1ull << 31)

typedef struct reader {
	rt_sel_dataset *ds;
	rt_json_doc doc;
	const char *path; /* file being read */
	char *err;
	size_t errlen;
} reader;

static int bad_node(reader *r, uint32_t node, const char *what)
{
	size_t off = node < r->doc.n ? r->doc.nodes[node].off : 0;
	rt_sel_ds_error(r->err, r->errlen, "%s: byte %zu: %s", r->path, off, what);
	return -1;
}

static int out_of_memory(reader *r)
{
	rt_sel_ds_error(r->err, r->errlen, "%s: out of memory", r->path);
	return -1;
}

/* ---------------------------------------------------------------- attributes */

/* The AnyValue object of attribute `key` in an attributes array, or RT_JSON_NONE. */
static uint32_t attr_value(const rt_json_doc *d, uint32_t attrs, const char *key)
{
	for (uint32_t a = rt_json_first(d, attrs); a != RT_JSON_NONE;
	     a = rt_json_next(d, attrs, a)) {
		const char *k = rt_json_str(d, rt_json_get(d, a, "key"));
		if (k && strcmp(k, key) == 0)
			return rt_json_get(d, a, "value");
	}
	return RT_JSON_NONE;
}

static const char *anyvalue_str(const rt_json_doc *d, uint32_t v)
{
	return rt_json_str(d, rt_json_get(d, v, "stringValue"));
}

static bool parse_hex_u64(const char *s, uint64_t *out)
{
	size_t n = strlen(s);
	return n > 0 && n <= 16 && rt_sel_ds_parse_hex_id(s, n, NULL, out);
}

/* A template id: intValue (decimal, maybe negative as int64 wraps a uint64), or a
 * stringValue: "0x" hex, exactly 16 hex digits (what `retrace export` writes),
 * else decimal if all digits, else hex. */
static bool anyvalue_template(const rt_json_doc *d, uint32_t v, uint64_t *out)
{
	int64_t i;
	uint64_t u;
	if (rt_json_i64(d, rt_json_get(d, v, "intValue"), &i)) {
		*out = (uint64_t)i;
		return true;
	}
	if (rt_json_u64(d, rt_json_get(d, v, "intValue"), &u)) {
		*out = u;
		return true;
	}
	const char *s = anyvalue_str(d, v);
	if (!s)
		return false;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		return parse_hex_u64(s + 2, out);
	size_t n = strlen(s);
	if (n == 16)
		return parse_hex_u64(s, out);
	bool decimal = n > 0;
	for (size_t k = 0; k < n; k++)
		decimal = decimal && isdigit((unsigned char)s[k]);
	if (decimal && rt_json_u64(d, rt_json_get(d, v, "stringValue"), out))
		return true;
	return parse_hex_u64(s, out);
}

static uint8_t level_of(const char *s)
{
	if (!s)
		return RT_SEL_LOG_INFO;
	if (!strcasecmp(s, "ERROR") || !strcasecmp(s, "FATAL") || !strcasecmp(s, "CRITICAL"))
		return RT_SEL_LOG_ERROR;
	if (!strcasecmp(s, "WARN") || !strcasecmp(s, "WARNING"))
		return RT_SEL_LOG_WARN;
	if (!strcasecmp(s, "DEBUG") || !strcasecmp(s, "TRACE"))
		return RT_SEL_LOG_DEBUG;
	return RT_SEL_LOG_INFO;
}

static uint8_t event_level(const rt_json_doc *d, uint32_t attrs, const char *name)
{
	uint32_t v = attr_value(d, attrs, "log.severity");
	if (v == RT_JSON_NONE)
		return name && strcmp(name, "exception") == 0 ? RT_SEL_LOG_ERROR : RT_SEL_LOG_INFO;
	int64_t i;
	if (rt_json_i64(d, rt_json_get(d, v, "intValue"), &i) && i >= 0 && i <= RT_SEL_LOG_ERROR)
		return (uint8_t)i;
	return level_of(anyvalue_str(d, v));
}

/* ---------------------------------------------------------------- spans */

/* Optional time member: 0 when absent; an error when present but not an integer. */
static int read_time(reader *r, uint32_t obj, const char *key, uint64_t *out)
{
	uint32_t v = rt_json_get(&r->doc, obj, key);
	*out = 0;
	if (v == RT_JSON_NONE || r->doc.nodes[v].type == RT_JSON_NULL)
		return 0;
	if (!rt_json_u64(&r->doc, v, out))
		return bad_node(r, v,
				"a time must be a non-negative integer (ns) or a string of digits");
	return 0;
}

static int read_event(reader *r, uint32_t ev, const rt_sel_raw_span *s)
{
	const rt_json_doc *d = &r->doc;
	if (d->nodes[ev].type != RT_JSON_OBJECT)
		return bad_node(r, ev, "a span event must be an object");
	const char *name = rt_json_str(d, rt_json_get(d, ev, "name"));
	uint32_t attrs = rt_json_get(d, ev, "attributes");
	rt_sel_raw_log log = { .trace_hi = s->trace_hi,
			       .trace_lo = s->trace_lo,
			       .span_id = s->span_id };
	if (read_time(r, ev, "timeUnixNano", &log.ts_ns))
		return -1;
	if (!log.ts_ns)
		log.ts_ns = s->start_ns;
	log.level = event_level(d, attrs, name);
	uint64_t tid;
	uint32_t tv = attr_value(d, attrs, "log.template_id");
	if (tv != RT_JSON_NONE && anyvalue_template(d, tv, &tid) && tid)
		log.template_id = rt_sel_fold_template_id(tid);
	name = name ? name : "";
	if (!(log.text = rt_sel_ds_strdup(r->ds, name, strlen(name))))
		return out_of_memory(r);
	if (rt_sel_ds_add_log(r->ds, &log))
		return out_of_memory(r);
	return 0;
}

static bool span_failed(const rt_json_doc *d, uint32_t span)
{
	uint32_t code = rt_json_get(d, rt_json_get(d, span, "status"), "code");
	uint64_t c;
	const char *s = rt_json_str(d, code);
	if (s && strcmp(s, "STATUS_CODE_ERROR") == 0)
		return true;
	return rt_json_u64(d, code, &c) && c == 2;
}

static int read_span(reader *r, uint32_t span, const char *service)
{
	const rt_json_doc *d = &r->doc;
	rt_sel_raw_span s = { .service = service };
	if (d->nodes[span].type != RT_JSON_OBJECT)
		return bad_node(r, span, "a span must be an object");
	uint32_t tid = rt_json_get(d, span, "traceId"), sid = rt_json_get(d, span, "spanId");
	const char *ts = rt_json_str(d, tid), *ss = rt_json_str(d, sid);
	if (!ts || !*ts || !rt_sel_ds_parse_hex_id(ts, strlen(ts), &s.trace_hi, &s.trace_lo))
		return bad_node(r, tid != RT_JSON_NONE ? tid : span,
				"span without a hex traceId (32 hex digits)");
	if (!ss || !parse_hex_u64(ss, &s.span_id))
		return bad_node(r, sid != RT_JSON_NONE ? sid : span,
				"span without a hex spanId (16 hex digits)");
	uint32_t pid = rt_json_get(d, span, "parentSpanId");
	const char *ps = rt_json_str(d, pid);
	if (ps && *ps) {
		if (!parse_hex_u64(ps, &s.parent_id))
			return bad_node(r, pid, "parentSpanId is not hex (16 digits)");
		s.has_parent = s.parent_id != 0;
	}
	const char *name = rt_json_str(d, rt_json_get(d, span, "name"));
	name = name ? name : "";
	if (!(s.operation = rt_sel_ds_intern(r->ds, name, strlen(name))))
		return out_of_memory(r);
	if (read_time(r, span, "startTimeUnixNano", &s.start_ns) ||
	    read_time(r, span, "endTimeUnixNano", &s.end_ns))
		return -1;
	if (s.end_ns < s.start_ns)
		s.end_ns = s.start_ns;
	s.error = span_failed(d, span);
	if (rt_sel_ds_add_span(r->ds, &s))
		return out_of_memory(r);
	uint32_t evs = rt_json_get(d, span, "events");
	for (uint32_t e = rt_json_first(d, evs); e != RT_JSON_NONE; e = rt_json_next(d, evs, e))
		if (read_event(r, e, &s))
			return -1;
	return 0;
}

/* An optional array member: RT_JSON_NONE when absent or null, error when not an array. */
static int array_member(reader *r, uint32_t obj, const char *key, uint32_t *out)
{
	uint32_t v = rt_json_get(&r->doc, obj, key);
	*out = RT_JSON_NONE;
	if (v == RT_JSON_NONE || r->doc.nodes[v].type == RT_JSON_NULL)
		return 0;
	if (r->doc.nodes[v].type != RT_JSON_ARRAY) {
		char what[96];
		snprintf(what, sizeof what, "\"%s\" must be an array", key);
		return bad_node(r, v, what);
	}
	*out = v;
	return 0;
}

static int read_scope(reader *r, uint32_t scope, const char *service)
{
	uint32_t spans;
	if (r->doc.nodes[scope].type != RT_JSON_OBJECT)
		return bad_node(r, scope, "a scopeSpans entry must be an object");
	if (array_member(r, scope, "spans", &spans))
		return -1;
	for (uint32_t s = rt_json_first(&r->doc, spans); s != RT_JSON_NONE;
	     s = rt_json_next(&r->doc, spans, s))
		if (read_span(r, s, service))
			return -1;
	return 0;
}

static int read_resource_spans(reader *r, uint32_t rs)
{
	const rt_json_doc *d = &r->doc;
	if (d->nodes[rs].type != RT_JSON_OBJECT)
		return bad_node(r, rs, "a resourceSpans entry must be an object");
	uint32_t attrs = rt_json_get(d, rt_json_get(d, rs, "resource"), "attributes");
	const char *name = anyvalue_str(d, attr_value(d, attrs, "service.name"));
	if (!name || !*name)
		name = "unknown_service";
	const char *service = rt_sel_ds_intern(r->ds, name, strlen(name));
	if (!service)
		return out_of_memory(r);
	static const char *const scope_keys[] = { "scopeSpans", "instrumentationLibrarySpans" };
	for (size_t k = 0; k < 2; k++) {
		uint32_t scopes;
		if (array_member(r, rs, scope_keys[k], &scopes))
			return -1;
		for (uint32_t s = rt_json_first(d, scopes); s != RT_JSON_NONE;
		     s = rt_json_next(d, scopes, s))
			if (read_scope(r, s, service))
				return -1;
	}
	return 0;
}

static int read_request(reader *r)
{
	uint32_t list;
	if (r->doc.nodes[0].type != RT_JSON_OBJECT)
		return bad_node(r, 0, "expected an ExportTraceServiceRequest object");
	if (array_member(r, 0, "resourceSpans", &list))
		return -1;
	for (uint32_t rs = rt_json_first(&r->doc, list); rs != RT_JSON_NONE;
	     rs = rt_json_next(&r->doc, list, rs))
		if (read_resource_spans(r, rs))
			return -1;
	return 0;
}

/* ---------------------------------------------------------------- files */

static char *slurp(reader *r, size_t *len)
{
	FILE *f = fopen(r->path, "rb");
	struct stat sb;
	if (!f || fstat(fileno(f), &sb) != 0) {
		rt_sel_ds_error(r->err, r->errlen, "cannot open %s: %s", r->path, strerror(errno));
		if (f)
			fclose(f);
		return NULL;
	}
	if ((unsigned long long)sb.st_size >= MAX_FILE_BYTES) {
		rt_sel_ds_error(r->err, r->errlen, "%s: larger than %llu bytes; split it", r->path,
				MAX_FILE_BYTES);
		fclose(f);
		return NULL;
	}
	size_t cap = (size_t)sb.st_size + 1;
	char *buf = malloc(cap);
	if (!buf) {
		fclose(f);
		out_of_memory(r);
		return NULL;
	}
	*len = fread(buf, 1, cap - 1, f);
	bool failed = ferror(f);
	fclose(f);
	if (failed) {
		rt_sel_ds_error(r->err, r->errlen, "cannot read %s", r->path);
		free(buf);
		return NULL;
	}
	buf[*len] = '\0';
	return buf;
}

static int read_file(reader *r, const char *path)
{
	size_t len, pos = 0;
	r->path = path;
	char *buf = slurp(r, &len);
	if (!buf)
		return -1;
	int rc = 0;
	while (rc == 0 && pos < len) {
		char msg[256];
		if (rt_json_parse_value(&r->doc, buf, len, &pos, msg, sizeof msg)) {
			rt_sel_ds_error(r->err, r->errlen, "%s: %s", path, msg);
			rc = -1;
		} else {
			rc = read_request(r);
		}
	}
	free(buf);
	return rc;
}

static bool is_json_name(const char *name)
{
	static const char *const suffixes[] = { ".json", ".jsonl", ".ndjson" };
	size_t n = strlen(name);
	for (size_t i = 0; i < 3; i++) {
		size_t l = strlen(suffixes[i]);
		if (n > l && strcmp(name + n - l, suffixes[i]) == 0)
			return true;
	}
	return false;
}

typedef struct file_list {
	char **v;
	size_t n, cap;
} file_list;

static int push_path(file_list *fl, const char *dir, const char *name)
{
	size_t pl = strlen(dir) + strlen(name) + 2;
	char *p = malloc(pl);
	if (!p || rt_sel_grow((void **)&fl->v, &fl->cap, fl->n + 1, sizeof *fl->v)) {
		free(p);
		return -1;
	}
	snprintf(p, pl, "%s/%s", dir, name);
	fl->v[fl->n++] = p;
	return 0;
}

/* Collect JSON files under dir; subdirectories are entered (not through symlinks). */
static int walk(const char *dir, int depth, file_list *fl)
{
	DIR *d = opendir(dir);
	if (!d)
		return depth == 0 ? -1 : 0; /* an unreadable subdirectory is skipped */
	struct dirent *e;
	int rc = 0;
	while (rc == 0 && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		size_t pl = strlen(dir) + strlen(e->d_name) + 2;
		char *p = malloc(pl);
		struct stat sb;
		if (!p) {
			rc = -1;
			break;
		}
		snprintf(p, pl, "%s/%s", dir, e->d_name);
		if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
			if (depth < MAX_DIR_DEPTH)
				rc = walk(p, depth + 1, fl);
		} else if (is_json_name(e->d_name) && stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {
			rc = push_path(fl, dir, e->d_name);
		}
		free(p);
	}
	closedir(d);
	return rc;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files to read: DIR itself if it is a file, else the JSON files under it. */
static int list_inputs(const char *dir, file_list *fl, char *err, size_t errlen)
{
	struct stat sb;
	if (stat(dir, &sb) != 0) {
		rt_sel_ds_error(err, errlen, "cannot open %s: %s", dir, strerror(errno));
		return -1;
	}
	if (S_ISREG(sb.st_mode)) {
		fl->v = malloc(sizeof *fl->v);
		if (!fl->v || !(fl->v[0] = strdup(dir))) {
			rt_sel_ds_error(err, errlen, "out of memory");
			return -1;
		}
		fl->n = fl->cap = 1;
		return 0;
	}
	if (walk(dir, 0, fl) != 0) {
		rt_sel_ds_error(err, errlen, "cannot list %s", dir);
		return -1;
	}
	if (fl->n == 0) {
		rt_sel_ds_error(err, errlen,
				"no *.json, *.jsonl or *.ndjson files under %s "
				"(expected OTLP/JSON ExportTraceServiceRequest files)",
				dir);
		return -1;
	}
	qsort(fl->v, fl->n, sizeof *fl->v, cmp_path);
	return 0;
}

rt_sel_dataset *rt_sel_dataset_read_otlp_json(const char *dir, char *err, size_t errlen)
{
	file_list fl = { 0 };
	reader r = { .err = err, .errlen = errlen };
	if (list_inputs(dir, &fl, err, errlen)) {
		rt_sel_ds_list_free(fl.v, fl.n);
		return NULL;
	}
	if (!(r.ds = rt_sel_ds_new())) {
		rt_sel_ds_error(err, errlen, "out of memory");
		rt_sel_ds_list_free(fl.v, fl.n);
		return NULL;
	}
	int rc = 0;
	for (size_t i = 0; i < fl.n && rc == 0; i++)
		rc = read_file(&r, fl.v[i]);
	rt_json_free(&r.doc);
	rt_sel_ds_list_free(fl.v, fl.n);
	if (rc == 0 && rt_sel_ds_finish(r.ds, err, errlen) != 0) {
		char why[160];
		snprintf(why, sizeof why, "%s", err ? err : "");
		rt_sel_ds_error(err, errlen, "%s: %s", dir, why);
		rc = -1;
	}
	if (rc) {
		rt_sel_dataset_free(r.ds);
		return NULL;
	}
	return r.ds;
}
