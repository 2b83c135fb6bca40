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
#include "readers_internal.h"
#include "json_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* Split a CSV line in place; returns the number of fields, or 0 when a quoted field
 * is not closed or is followed by something other than a comma or the line end. */
static size_t split_csv(char *line, char **f, size_t *len, size_t max)
{
	size_t n = 0;
	char *p = line;
	while (n < max) {
		if (*p == '"') {
			char *w = ++p, *start = p;
			bool closed = false;
			while (*p) {
				if (*p == '"' && p[1] == '"') {
					*w++ = '"';
					p += 2;
				} else if (*p == '"') {
					p++;
					closed = true;
					break;
				} else {
					*w++ = *p++;
				}
			}
			if (!closed || (*p && *p != ',' && *p != '\n' && *p != '\r'))
				return 0;
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
	if (n == max && *p == ',')
		n++; /* more fields than we look at: the caller sees a wrong count */
	return n;
}

/* CSV quoting state across a physical line: a quote opens a quoted field only at the
 * start of a field (elsewhere it is a literal byte, as in lenient CSV readers); inside,
 * "" is an escaped quote and a lone " closes. Returns true when the line ends inside a
 * quoted field (its line break belongs to the field). */
static bool csv_quote_state(const char *s, size_t n, bool in_quote)
{
	bool field_start = !in_quote;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (in_quote) {
			if (c == '"') {
				if (i + 1 < n && s[i + 1] == '"')
					i++;
				else
					in_quote = false;
			}
		} else if (c == '"' && field_start) {
			in_quote = true;
			field_start = false;
		} else {
			field_start = c == ',';
		}
	}
	return in_quote;
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

/* A nonempty run of at most 19 digits and nothing else. */
static bool is_u64(const char *s, size_t n)
{
	if (n == 0 || n > 19)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return true;
}

/* Row parsers return 0 (added), 1 (malformed: skipped and counted, *why set) or -1
 * (out of memory). */
static int parse_span_row(rt_sel_dataset *ds, char **f, size_t *len, size_t nf, const char **why)
{
	if (nf != 8) {
		*why = "expected 8 fields (row cut short?)";
		return 1;
	}
	rt_sel_raw_span r = { 0 };
	if (!rt_sel_ds_parse_hex_id(f[0], len[0], &r.trace_hi, &r.trace_lo) ||
	    !rt_sel_ds_parse_hex_id(f[1], len[1], NULL, &r.span_id)) {
		*why = "bad TraceID or SpanID";
		return 1;
	}
	r.has_parent = !(len[2] == 4 && memcmp(f[2], "root", 4) == 0);
	if (r.has_parent && !rt_sel_ds_parse_hex_id(f[2], len[2], NULL, &r.parent_id)) {
		*why = "bad ParentID";
		return 1;
	}
	if (!is_u64(f[5], len[5]) || !is_u64(f[6], len[6]) || !is_u64(f[7], len[7])) {
		*why = "bad StartTimeUnixNano, EndTimeUnixNano or Duration";
		return 1;
	}
	r.start_ns = parse_u64(f[5], len[5]);
	r.end_ns = parse_u64(f[6], len[6]);
	/* Duration (µs) repeats end - start: a row cut inside it shows as a mismatch. */
	uint64_t dur = r.end_ns >= r.start_ns ? (r.end_ns - r.start_ns) / 1000 : 0;
	uint64_t d = parse_u64(f[7], len[7]);
	if (r.end_ns < r.start_ns || (d > dur ? d - dur : dur - d) > 1) {
		*why = "Duration does not match the start and end times (row cut short?)";
		return 1;
	}
	r.service = rt_sel_ds_intern(ds, f[3], service_len(f[3], len[3]));
	r.operation = rt_sel_ds_intern(ds, f[4], len[4]);
	if (!r.service || !r.operation)
		return -1;
	return rt_sel_ds_add_span(ds, &r);
}

/* "YYYY-MM-DDTHH:MM:SS[.fraction][Z]" (UTC) as Unix nanoseconds; false if malformed. */
static bool parse_iso_ns(const char *s, size_t n, uint64_t *out)
{
	static const int8_t shape[] = { 0,   0, 0, 0,   '-', 0, 0,   '-', 0, 0,
					'T', 0, 0, ':', 0,   0, ':', 0,   0 };
	if (n < sizeof shape)
		return false;
	for (size_t i = 0; i < sizeof shape; i++)
		if (shape[i] ? s[i] != shape[i] && !(i == 10 && s[i] == ' ')
			     : !isdigit((unsigned char)s[i]))
			return false;
	int64_t y = (int64_t)parse_u64(s, 4), mo = (int64_t)parse_u64(s + 5, 2),
		d = (int64_t)parse_u64(s + 8, 2);
	int64_t h = (int64_t)parse_u64(s + 11, 2), mi = (int64_t)parse_u64(s + 14, 2),
		se = (int64_t)parse_u64(s + 17, 2);
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
		return false;
	uint64_t frac = 0, scale = 1000000000;
	size_t i = sizeof shape;
	if (i < n && s[i] == '.')
		for (i++; i < n && isdigit((unsigned char)s[i]); i++)
			if (scale > 1) {
				scale /= 10;
				frac += (uint64_t)(s[i] - '0') * scale;
			}
	if (i < n && s[i] == 'Z')
		i++;
	if (i != n)
		return false;
	/* days from civil (Howard Hinnant) */
	y -= mo <= 2;
	int64_t era = y / 400, yoe = y - era * 400;
	int64_t doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t days = era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
	*out = (uint64_t)(days * 86400 + h * 3600 + mi * 60 + se) * 1000000000u + frac;
	return true;
}

/* Level named by a word: DEBUG/TRACE, INFO/NOTICE, WARN/WARNING, ERROR/FATAL/CRITICAL
 * (any case when the word came from a JSON field or was bracketed, upper case only in
 * free text, where "error" may just be a word of the message). -1 if none. */
static int level_of(const char *w, size_t n, bool any_case)
{
	static const struct {
		const char *name;
		int level;
	} names[] = {
		{ "ERROR", RT_SEL_LOG_ERROR },    { "FATAL", RT_SEL_LOG_ERROR },
		{ "CRITICAL", RT_SEL_LOG_ERROR }, { "SEVERE", RT_SEL_LOG_ERROR },
		{ "ERR", RT_SEL_LOG_ERROR },      { "CRIT", RT_SEL_LOG_ERROR },
		{ "WARN", RT_SEL_LOG_WARN },      { "WARNING", RT_SEL_LOG_WARN },
		{ "INFO", RT_SEL_LOG_INFO },      { "NOTICE", RT_SEL_LOG_INFO },
		{ "DEBUG", RT_SEL_LOG_DEBUG },    { "TRACE", RT_SEL_LOG_DEBUG },
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		size_t l = strlen(names[i].name);
		if (n != l)
			continue;
		if (any_case ? strncasecmp(w, names[i].name, l) == 0
			     : memcmp(w, names[i].name, l) == 0)
			return names[i].level;
	}
	return -1;
}

/* Level of one word of a message: "ERROR", "[error]", "<WARN>", "level=warn", "INFO:". */
static int word_level(const char *w, size_t n)
{
	bool bracketed = false;
	if (n > 6 && strncasecmp(w, "level=", 6) == 0) {
		w += 6;
		n -= 6;
		bracketed = true;
	}
	while (n && (*w == '[' || *w == '<' || *w == '(')) {
		w++;
		n--;
		bracketed = true;
	}
	while (n && (w[n - 1] == ']' || w[n - 1] == '>' || w[n - 1] == ')' || w[n - 1] == ':' ||
		     w[n - 1] == ','))
		n--;
	return level_of(w, n, bracketed);
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

/* Level field of a structured log object, or -1. */
static int json_level(const rt_json_doc *doc)
{
	static const char *keys[] = { "severity", "level", "levelname",     "log.level",
				      "loglevel", "lvl",   "severity_text", "severityText" };
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		const char *v = rt_json_str(doc, rt_json_get(doc, 0, keys[i]));
		if (v) {
			int l = level_of(v, strlen(v), true);
			if (l >= 0)
				return l;
		}
	}
	return -1;
}

typedef struct reader {
	rt_sel_dataset *ds;
	rt_json_doc doc;
} reader;

/* The Log column: a JSON object whose "log" (or "message", "msg") member is the
 * container line, or the line itself when the column is not JSON. The level is a JSON
 * field (severity, level, …) or a level word among the first four words of the line
 * (the dataset's "HH:MM:SS.mmm LEVEL logger#line message" has it second); the text
 * kept for mining is what follows the level word (the whole line if there is none). */
static int parse_log_row(reader *rd, char **f, size_t *len, size_t nf, const char **why)
{
	if (nf != 8) {
		*why = "expected 8 fields (row cut short?)";
		return 1;
	}
	rt_sel_raw_log r = { 0 };
	if (!rt_sel_ds_parse_hex_id(f[5], len[5], &r.trace_hi, &r.trace_lo) ||
	    !rt_sel_ds_parse_hex_id(f[6], len[6], NULL, &r.span_id)) {
		*why = "bad TraceID or SpanID";
		return 1;
	}
	/* TimeUnixNano, else the Timestamp column (the dataset has rows whose TimeUnixNano
     * overflowed to a negative number while Timestamp is fine). */
	if (is_u64(f[1], len[1]))
		r.ts_ns = parse_u64(f[1], len[1]);
	else if (!parse_iso_ns(f[0], len[0], &r.ts_ns)) {
		*why = "bad TimeUnixNano and Timestamp";
		return 1;
	}
	char *msg = f[7];
	size_t mlen = len[7];
	int level = -1;
	size_t k = 0;
	while (k < mlen && isspace((unsigned char)msg[k]))
		k++;
	if (k == mlen) {
		*why = "empty Log column (row cut short?)";
		return 1;
	}
	if (msg[k] == '{') {
		char jerr[128];
		size_t pos = 0;
		if (rt_json_parse_value(&rd->doc, msg, mlen, &pos, jerr, sizeof jerr) ||
		    pos != mlen || rd->doc.nodes[0].type != RT_JSON_OBJECT) {
			*why = "Log is not one valid JSON object";
			return 1;
		}
		uint32_t m = rt_json_get(&rd->doc, 0, "log");
		if (m == RT_JSON_NONE)
			m = rt_json_get(&rd->doc, 0, "message");
		if (m == RT_JSON_NONE)
			m = rt_json_get(&rd->doc, 0, "msg");
		const char *text = rt_json_str(&rd->doc, m);
		if (!text) {
			*why = "Log JSON has no \"log\", \"message\" or \"msg\" string";
			return 1;
		}
		msg = (char *)text;
		mlen = rd->doc.nodes[m].len;
		level = json_level(&rd->doc);
	}
	const char *p = msg, *e = msg + mlen, *w, *body = msg;
	size_t wl;
	for (int i = 0; i < 4 && p < e; i++) {
		p = skip_word(p, e, &w, &wl);
		int l = word_level(w, wl);
		if (l >= 0) {
			if (level < 0)
				level = l;
			body = p;
			break;
		}
	}
	r.level = (uint8_t)(level < 0 ? RT_SEL_LOG_INFO : level);
	p = body;
	while (p < e && isspace((unsigned char)*p))
		p++;
	while (e > p && isspace((unsigned char)e[-1]))
		e--;
	r.text = rt_sel_ds_strdup(rd->ds, p, (size_t)(e - p));
	if (!r.text)
		return -1;
	return rt_sel_ds_add_log(rd->ds, &r);
}

static int span_row(reader *rd, char **f, size_t *len, size_t nf, const char **why)
{
	return parse_span_row(rd->ds, f, len, nf, why);
}

#define SPAN_HEADER                                                        \
	"TraceID,SpanID,ParentID,PodName,OperationName,StartTimeUnixNano," \
	"EndTimeUnixNano,Duration"
#define LOG_HEADER "Timestamp,TimeUnixNano,Node,PodName,Container,TraceID,SpanID,Log"

/* The first line must be the layout's column list (a UTF-8 byte-order mark and a CR
 * before the newline are allowed): anything else is a file cut inside its header, or
 * a file of another layout whose columns we would misread. */
static bool header_ok(const char *line, size_t n, bool log)
{
	const char *want = log ? LOG_HEADER : SPAN_HEADER;
	size_t wl = strlen(want);
	if (n >= 3 && memcmp(line, "\xef\xbb\xbf", 3) == 0) {
		line += 3;
		n -= 3;
	}
	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		n--;
	return n == wl && memcmp(line, want, wl) == 0;
}

static void note_bad_file(rt_sel_dataset *ds, const char *path, const char *why)
{
	rt_sel_read_stats *st = rt_sel_ds_stats(ds);
	st->bad_files++;
	if (!st->first_problem[0])
		snprintf(st->first_problem, sizeof st->first_problem, "%s: %s", path, why);
}

typedef int (*row_fn)(reader *, char **, size_t *, size_t, const char **);

/* A skipped row that spanned several lines counts each line: a stray quote must not
 * hide the rows it swallowed. */
static void note_skip(rt_sel_dataset *ds, bool log, const char *path, size_t line, size_t lines,
		      const char *why)
{
	rt_sel_read_stats *st = rt_sel_ds_stats(ds);
	if (log) {
		st->log_rows_skipped += lines;
		st->log_rows += lines - 1;
	} else {
		st->span_rows_skipped += lines;
		st->span_rows += lines - 1;
	}
	if (!st->first_problem[0])
		snprintf(st->first_problem, sizeof st->first_problem, "%s: line %zu: %s", path,
			 line, why);
}

static int read_csv(reader *rd, const char *path, row_fn row, bool log, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "r");
	if (!fp) {
		rt_sel_ds_error(err, errlen, "cannot open %s", path);
		return -1;
	}
	rt_sel_dataset *ds = rd->ds;
	char *line = NULL, *more = NULL;
	size_t cap = 0, more_cap = 0, lineno = 0;
	ssize_t got;
	bool header = true;
	int rc = 0;
	rt_sel_ds_stats(ds)->files++;
	while ((got = getline(&line, &cap, fp)) >= 0) {
		size_t first = ++lineno, n = (size_t)got;
		/* A quoted field may hold line breaks: join lines until the quotes balance. */
		bool open = csv_quote_state(line, n, false);
		while (open) {
			ssize_t g2 = getline(&more, &more_cap, fp);
			if (g2 < 0)
				break;
			lineno++;
			if (n + (size_t)g2 + 1 > cap) {
				char *nl = realloc(line, n + (size_t)g2 + 1);
				if (!nl) {
					rt_sel_ds_error(err, errlen, "out of memory reading %s",
							path);
					rc = -1;
					goto done;
				}
				line = nl;
				cap = n + (size_t)g2 + 1;
			}
			memcpy(line + n, more, (size_t)g2 + 1);
			open = csv_quote_state(more, (size_t)g2, true);
			n += (size_t)g2;
		}
		if (header) {
			header = false;
			if (!header_ok(line, n, log))
				note_bad_file(ds, path,
					      open ? "header line never ends (file cut short?)"
						   : "first line is not the expected header "
						     "(file cut inside it?)");
			continue;
		}
		size_t lines = lineno - first + 1;
		if (log)
			rt_sel_ds_stats(ds)->log_rows++;
		else
			rt_sel_ds_stats(ds)->span_rows++;
		if (open) {
			note_skip(ds, log, path, first, lines,
				  "unterminated quoted field (file cut short?)");
			continue;
		}
		char *f[MAX_FIELDS];
		size_t len[MAX_FIELDS];
		size_t nf = split_csv(line, f, len, MAX_FIELDS);
		const char *why = "malformed quoted field";
		int r = nf ? row(rd, f, len, nf, &why) : 1;
		if (r < 0) {
			rt_sel_ds_error(err, errlen, "out of memory reading %s", path);
			rc = -1;
			break;
		}
		if (r > 0)
			note_skip(ds, log, path, first, lines, why);
	}
	if (header && rc == 0)
		note_bad_file(ds, path, "empty file (cut short?)");
done:
	free(line);
	free(more);
	fclose(fp);
	return rc;
}

static int read_folder(reader *rd, const char *dir, const char *sub, const char *suffix, row_fn row,
		       bool log, char *err, size_t errlen)
{
	bool required = !log;
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
			rt_sel_ds_error(err, errlen,
					"no %s files in %s (expected the Nezha layout "
					"DIR/trace/HH_MM_trace.csv, DIR/log/HH_MM_log.csv)",
					suffix, path);
			rc = -1;
		}
		free(path);
		return rc;
	}
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = read_csv(rd, files[i], row, log, err, errlen);
	rt_sel_ds_list_free(files, n);
	free(path);
	return rc;
}

rt_sel_dataset *rt_sel_dataset_read_nezha(const char *dir, char *err, size_t errlen)
{
	rt_sel_dataset *ds = rt_sel_ds_new();
	if (!ds) {
		rt_sel_ds_error(err, errlen, "out of memory");
		return NULL;
	}
	reader rd = { .ds = ds };
	int rc = read_folder(&rd, dir, "trace", "_trace.csv", span_row, false, err, errlen) ||
		 read_folder(&rd, dir, "log", "_log.csv", parse_log_row, true, err, errlen) ||
		 rt_sel_ds_finish(ds, err, errlen);
	rt_json_free(&rd.doc);
	if (rc) {
		rt_sel_dataset_free(ds);
		return NULL;
	}
	return ds;
}
