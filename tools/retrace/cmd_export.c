/*
 * cmd_export.c — `retrace export`: stored traces out as OTLP/JSON or Zipkin.
 *
 * How it works: the traces are chosen first (ids given on the command line,
 * each checked against the store, or every trace matching --all / --since),
 * so a typo fails before anything is written. Each is then decoded from its
 * stored slices (cmd_show.c's helper over coordinator/decode.h) and kept in
 * memory, because the writers build one document for all of them
 * (coordinator/export.h). The document goes to stdout, to -o FILE, and/or is
 * POSTed to an OTLP collector with retries. Progress and a one-line summary
 * (traces, spans, bytes, decode problems) go to stderr so stdout stays a clean
 * document for pipes.
 *
 * --pretty re-indents the compact document for reading; the push always
 * sends the compact form, in batches of at most --max-request-size bytes
 * (coordinator/export.h does the batching, gzip and retries).
 *
 * -o FILE never harms what FILE names before the export has succeeded: the
 * document goes to a temporary file beside it (beside the file a symlink
 * points to, so the link stays a link) and is renamed over it at the end; a
 * failed run deletes only that temporary file. A FILE that is not a regular
 * file (a device such as /dev/stdout, a FIFO) is written directly and never
 * removed.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "decode.h"
#include "export.h"
#include "store.h"
#include "wire/wire.h"

struct trace_ref {
	uint64_t hi, lo;
};

struct export_opts {
	enum rt_export_format fmt;
	int all, pretty, quiet;
	uint64_t since_ns;        /* a duration; 0 = not given */
	const char *output;       /* NULL: stdout unless pushing */
	const char *endpoint;     /* OTLP/HTTP collector URL */
	const char *store;
	const char *coordinator;  /* asked for its store when no --store */
	char store_buf[1024];
	struct rt_push_options push;
};

/* The -o destination: a temporary file renamed over `path` on success, or
 * (direct) `path` itself when it is not a regular file. */
struct out_file {
	const char *path;     /* as given */
	char *target;         /* what gets replaced: path, or the file its link names */
	char *tmp;            /* our temporary file (NULL: direct) */
	FILE *f;
};

struct ref_list {
	struct trace_ref *v;
	size_t n, cap;
};

static int ref_add(struct ref_list *l, uint64_t hi, uint64_t lo)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct trace_ref *v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = (struct trace_ref){ hi, lo };
	return 0;
}

static void export_usage(FILE *out)
{
	fprintf(out,
		"usage: retrace export (TRACE_ID... | --all | --since DURATION)\n"
		"                      [--format otlp-json|zipkin] [-o FILE] [--otlp-endpoint URL]\n"
		"                      [--attempts N] [--timeout MS] [--max-request-size N]\n"
		"                      [--no-gzip] [--pretty] [--quiet] [--store STORE | --coordinator URL]\n"
		"Write collected traces as one OTLP/JSON document (an ExportTraceServiceRequest,\n"
		"what an OpenTelemetry collector's /v1/traces takes) or one Zipkin v2 span list\n"
		"(Zipkin's POST /api/v2/spans, Jaeger's Zipkin port), or push OTLP/JSON over HTTP.\n"
		"TRACE_ID is the 32-hex id or its low 16 hex digits. docs/export.md has the\n"
		"field mapping.\n\n"
		"  -f, --format F           otlp-json (default) or zipkin\n"
		"  -a, --all                every stored trace\n"
		"  -s, --since D            traces closed in the last D (90s, 5m, 2h, 1d)\n"
		"  -o, --output FILE        write the document to FILE ('-': stdout; the default\n"
		"                           unless --otlp-endpoint is given)\n"
		"  -e, --otlp-endpoint URL  POST the traces to an OTLP/HTTP collector, e.g.\n"
		"                           http://127.0.0.1:4318 (/v1/traces is added to a URL\n"
		"                           without a path), in gzip'd batches; implies\n"
		"                           --format otlp-json\n"
		"      --attempts N         tries per push request (default 3; retried on no\n"
		"                           answer and on HTTP 429/502/503/504, with backoff or\n"
		"                           the collector's Retry-After)\n"
		"      --timeout MS         per push attempt (default 5000)\n"
		"      --max-request-size N\n"
		"                           split the push into requests of at most N bytes\n"
		"                           of JSON (default 4M; K and M suffixes, 1024-based)\n"
		"      --no-gzip            send the push uncompressed (default: gzip)\n"
		"  -p, --pretty             indent the JSON written (the push stays compact)\n"
		"  -q, --quiet              no progress or summary on stderr\n"
		CLI_STORE_USAGE("       ")
		"  -h, --help               this text\n");
}

static int parse_uint(const char *opt, const char *v, unsigned *out)
{
	char *end;
	unsigned long x;
	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || *end || *v == '-' || !*v || x == 0 || x > 1000000) {
		fprintf(stderr, "retrace export: %s wants a positive number, got '%s'\n", opt, v);
		return -1;
	}
	*out = (unsigned)x;
	return 0;
}

/* "4M", "512K", "65536": bytes, 1 KiB .. 1 GiB. */
static int parse_size(const char *opt, const char *v, size_t *out)
{
	char *end;
	unsigned long long x;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (!errno && end != v && *v != '-') {
		if ((*end == 'K' || *end == 'k') && !end[1])
			x <<= 10;
		else if ((*end == 'M' || *end == 'm') && !end[1])
			x <<= 20;
		else if (*end)
			x = 0;
		if (x >= 1024 && x <= (1ull << 30)) {
			*out = (size_t)x;
			return 0;
		}
	}
	fprintf(stderr, "retrace export: %s wants a size from 1K to 1024M (e.g. 4M), got '%s'\n",
		opt, v);
	return -1;
}

/* Returns -1 on bad usage (message printed), 1 for --help, 0 to go on. */
static int parse_args(int argc, char **argv, struct export_opts *o)
{
	enum { OPT_ATTEMPTS = 1000, OPT_TIMEOUT, OPT_MAX_REQUEST, OPT_NO_GZIP };
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },  { "all", no_argument, NULL, 'a' },
		{ "since", required_argument, NULL, 's' },   { "output", required_argument, NULL, 'o' },
		{ "otlp-endpoint", required_argument, NULL, 'e' },
		{ "attempts", required_argument, NULL, OPT_ATTEMPTS },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "max-request-size", required_argument, NULL, OPT_MAX_REQUEST },
		{ "no-gzip", no_argument, NULL, OPT_NO_GZIP },
		{ "pretty", no_argument, NULL, 'p' },        { "quiet", no_argument, NULL, 'q' },
		{ "store", required_argument, NULL, 'S' },   { "help", no_argument, NULL, 'h' },
		{ "coordinator", required_argument, NULL, 'C' },
		{ 0, 0, 0, 0 },
	};
	int ch, fmt_given = 0;
	o->fmt = RT_EXPORT_OTLP_JSON;
	o->store = NULL;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "f:as:o:e:pqS:C:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'f':
			if (!(o->fmt = rt_export_format_parse(optarg))) {
				fprintf(stderr, "retrace export: unknown format '%s' (otlp-json or zipkin)\n",
					optarg);
				return -1;
			}
			fmt_given = 1;
			break;
		case 'a': o->all = 1; break;
		case 's':
			if (!(o->since_ns = cli_parse_duration_ns(optarg))) {
				fprintf(stderr, "retrace export: --since wants a duration like 90s, 5m, 2h; got '%s'\n",
					optarg);
				return -1;
			}
			break;
		case 'o': o->output = optarg; break;
		case 'e': o->endpoint = optarg; break;
		case OPT_ATTEMPTS:
			if (parse_uint("--attempts", optarg, &o->push.attempts) != 0)
				return -1;
			break;
		case OPT_TIMEOUT:
			if (parse_uint("--timeout", optarg, &o->push.timeout_ms) != 0)
				return -1;
			break;
		case OPT_MAX_REQUEST:
			if (parse_size("--max-request-size", optarg, &o->push.max_request_bytes) != 0)
				return -1;
			break;
		case OPT_NO_GZIP: o->push.no_gzip = 1; break;
		case 'p': o->pretty = 1; break;
		case 'q': o->quiet = 1; break;
		case 'S': o->store = optarg; break;
		case 'C': o->coordinator = optarg; break;
		case 'h': export_usage(stdout); return 1;
		default: export_usage(stderr); return -1;
		}
	}
	if (o->endpoint && fmt_given && o->fmt != RT_EXPORT_OTLP_JSON) {
		fprintf(stderr, "retrace export: --otlp-endpoint sends OTLP/JSON; drop --format zipkin\n");
		return -1;
	}
	if ((o->all || o->since_ns) == (optind < argc)) {
		fprintf(stderr, "retrace export: give trace ids, or --all, or --since DURATION "
				"(retrace export --help)\n");
		return -1;
	}
	return 0;
}

/* ------------------------------------------------ choosing traces ---- */

static int collect_ref(void *arg, const struct rt_store_trace *t)
{
	return ref_add(arg, t->trace_hi, t->trace_lo) == 0 ? 0 : -1;
}

static int select_traces(struct rt_store *s, const struct export_opts *o, int argc, char **argv,
			 struct ref_list *refs)
{
	struct rt_store_query q = { 0 };
	int i, rc;
	if (o->all || o->since_ns) {
		if (o->since_ns) {
			struct timespec ts;
			uint64_t now;
			clock_gettime(CLOCK_REALTIME, &ts);
			now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
			q.since_ns = now > o->since_ns ? now - o->since_ns : 1;
		}
		rc = rt_store_list(s, &q, collect_ref, refs);
		if (rc != 0) {
			fprintf(stderr, "retrace export: %s\n",
				rc == -1 ? "out of memory" : rt_store_errmsg(s));
			return -1;
		}
		return 0;
	}
	for (i = optind; i < argc; i++) {
		struct rt_store_trace row;
		uint64_t hi, lo;
		if (rt_store_parse_trace_id(argv[i], strlen(argv[i]), &hi, &lo) != 0) {
			fprintf(stderr, "retrace export: '%s' is not a trace id (32 hex digits, or the low 16)\n",
				argv[i]);
			return -2;
		}
		rc = rt_store_get_trace(s, hi, lo, &row);
		if (rc == RT_STORE_E_NOTFOUND) {
			fprintf(stderr, "retrace export: no trace %s in %s\n", argv[i], o->store);
			return -1;
		}
		if (rc != 0 || ref_add(refs, row.trace_hi, row.trace_lo) != 0) {
			fprintf(stderr, "retrace export: %s\n", rc ? rt_store_errmsg(s) : "out of memory");
			return -1;
		}
	}
	return 0;
}

/* ------------------------------------------------------ decoding ---- */

static void add_stats(struct rt_decode_stats *sum, const struct rt_decode_stats *st)
{
	sum->slices += st->slices;
	sum->buffers += st->buffers;
	sum->duplicate_buffers += st->duplicate_buffers;
	sum->gaps += st->gaps;
	sum->records += st->records;
	sum->events += st->events;
	sum->raw_records += st->raw_records;
	sum->corrupt_frames += st->corrupt_frames;
	sum->corrupt_events += st->corrupt_events;
	sum->truncated_records += st->truncated_records;
	sum->orphan_chunks += st->orphan_chunks;
	sum->missing_templates += st->missing_templates;
	sum->orphan_events += st->orphan_events;
	sum->partial_spans += st->partial_spans;
	sum->conflicting_buffers += st->conflicting_buffers;
	sum->duplicate_spans += st->duplicate_spans;
	sum->unmatched_client_spans += st->unmatched_client_spans;
}

static void progress(const struct export_opts *o, size_t done, size_t total)
{
	static int tty = -1;
	if (o->quiet || total < 50)
		return;
	if (tty < 0)
		tty = isatty(STDERR_FILENO);
	if (tty && (done % 25 == 0 || done == total))
		fprintf(stderr, "\rretrace export: decoded %zu/%zu traces", done, total);
	else if (!tty && (done % 1000 == 0 || done == total))
		fprintf(stderr, "retrace export: decoded %zu/%zu traces\n", done, total);
	if (tty && done == total)
		fprintf(stderr, "\n");
}

static int decode_all(struct rt_store *s, const struct export_opts *o, const struct ref_list *refs,
		      struct rt_decoded_trace *out, size_t *ndone)
{
	char err[256];
	size_t i;
	for (i = 0; i < refs->n; i++) {
		if (rt_decode_stored(s, refs->v[i].hi, refs->v[i].lo, &out[i], err, sizeof err) != 0) {
			fprintf(stderr, "%sretrace export: trace %016" PRIx64 "%016" PRIx64 ": %s\n",
				i >= 50 && !o->quiet ? "\n" : "", refs->v[i].hi, refs->v[i].lo, err);
			return -1;
		}
		*ndone = i + 1;
		progress(o, i + 1, refs->n);
	}
	return 0;
}

/* ------------------------------------------------------- output ---- */

static void newline_indent(struct rt_wire_buf *b, int depth)
{
	b->data[b->len++] = '\n';
	memset(b->data + b->len, ' ', (size_t)depth * 2);
	b->len += (size_t)depth * 2;
}

/* Re-indent a compact JSON document (our own writer's output: no whitespace
 * outside strings) with two spaces per level. 0 or -1 (out of memory). */
static int pretty_json(const struct rt_wire_buf *in, struct rt_wire_buf *out)
{
	size_t i;
	int depth = 0, in_str = 0, esc = 0;
	for (i = 0; i < in->len; i++) {
		char c = (char)in->data[i];
		char next = i + 1 < in->len ? (char)in->data[i + 1] : 0;
		/* worst case: a newline and the indent for every byte */
		if (rt_wire_buf_reserve(out, 2 + (size_t)(depth + 1) * 2 + 1) != 0)
			return -1;
		if (in_str) {
			out->data[out->len++] = (uint8_t)c;
			if (esc)
				esc = 0;
			else if (c == '\\')
				esc = 1;
			else if (c == '"')
				in_str = 0;
			continue;
		}
		switch (c) {
		case '"':
			in_str = 1;
			out->data[out->len++] = (uint8_t)c;
			break;
		case '{':
		case '[':
			out->data[out->len++] = (uint8_t)c;
			if (next != '}' && next != ']')
				newline_indent(out, ++depth);
			else
				depth++;
			break;
		case '}':
		case ']':
			depth = depth ? depth - 1 : 0;
			if (i && in->data[i - 1] != '{' && in->data[i - 1] != '[')
				newline_indent(out, depth);
			out->data[out->len++] = (uint8_t)c;
			break;
		case ',':
			out->data[out->len++] = ',';
			newline_indent(out, depth);
			break;
		case ':':
			out->data[out->len++] = ':';
			out->data[out->len++] = ' ';
			break;
		default:
			out->data[out->len++] = (uint8_t)c;
			break;
		}
	}
	return 0;
}

static int write_document(FILE *f, const char *name, const struct rt_wire_buf *doc)
{
	if (fwrite(doc->data, 1, doc->len, f) != doc->len || fflush(f) != 0) {
		fprintf(stderr, "retrace export: cannot write %s: %s\n", name, strerror(errno));
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------ -o FILE ---- */

static char *path_join_tmp(const char *target)
{
	char *d = strdup(target), *b = strdup(target), *tmp = NULL;
	if (d && b) {
		const char *dir = dirname(d), *base = basename(b);
		size_t n = strlen(dir) + strlen(base) + 32;
		if ((tmp = malloc(n)) != NULL)
			snprintf(tmp, n, "%s/.%s.retrace-XXXXXX", dir, base);
	}
	free(d);
	free(b);
	return tmp;
}

/*
 * Open the -o destination. A regular file (or nothing yet) at the path, or a
 * symlink to one, gets a temporary file beside the real file, renamed over it
 * by out_commit; anything else (a device, a FIFO, a dangling link) is written
 * directly. 0, or -1 with a message.
 */
static int out_open(struct out_file *o, const char *path)
{
	struct stat st, lst;
	mode_t mode, mask;
	int fd, exists = stat(path, &st) == 0;
	memset(o, 0, sizeof o[0]);
	o->path = path;
	if ((exists && !S_ISREG(st.st_mode)) ||
	    (!exists && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))) {
		if (!(o->f = fopen(path, "w"))) {
			fprintf(stderr, "retrace export: cannot write %s: %s\n", path, strerror(errno));
			return -1;
		}
		return 0;
	}
	o->target = exists ? realpath(path, NULL) : strdup(path);
	o->tmp = o->target ? path_join_tmp(o->target) : NULL;
	if (!o->tmp) {
		fprintf(stderr, "retrace export: cannot write %s: %s\n", path, strerror(errno ? errno : ENOMEM));
		return -1;
	}
	if ((fd = mkstemp(o->tmp)) < 0) {
		fprintf(stderr, "retrace export: cannot write %s: cannot create %s: %s\n", path, o->tmp,
			strerror(errno));
		free(o->tmp);
		o->tmp = NULL;
		return -1;
	}
	mask = umask(0);
	umask(mask);
	mode = exists ? st.st_mode & 07777 : 0666 & ~mask; /* as if written in place */
	if (fchmod(fd, mode) != 0 || !(o->f = fdopen(fd, "w"))) {
		fprintf(stderr, "retrace export: cannot write %s: %s\n", o->tmp, strerror(errno));
		close(fd);
		unlink(o->tmp);
		return -1;
	}
	return 0;
}

/* Close the file; with ok, put it in place. 0, or -1 with a message. */
static int out_close(struct out_file *o, int ok)
{
	int rc = 0;
	if (!o->f)
		goto out;
	if (ok && (fflush(o->f) != 0 || (o->tmp && fsync(fileno(o->f)) != 0))) {
		fprintf(stderr, "retrace export: cannot write %s: %s\n", o->path, strerror(errno));
		ok = 0;
		rc = -1;
	}
	if (fclose(o->f) != 0 && ok) {
		fprintf(stderr, "retrace export: cannot write %s: %s\n", o->path, strerror(errno));
		ok = 0;
		rc = -1;
	}
	if (o->tmp) {
		if (ok && rename(o->tmp, o->target) != 0) {
			fprintf(stderr, "retrace export: cannot write %s: rename: %s\n", o->path,
				strerror(errno));
			rc = -1;
			ok = 0;
		}
		if (!ok)
			unlink(o->tmp); /* ours only: what PATH names is untouched */
	}
out:
	free(o->tmp);
	free(o->target);
	memset(o, 0, sizeof o[0]);
	return rc;
}

static const char *format_name(enum rt_export_format f)
{
	return f == RT_EXPORT_ZIPKIN ? "zipkin" : "otlp-json";
}

/* ", mended: 2 unnamed spans, ..." or "" */
static void mended_text(const struct rt_export_stats *m, char *out, size_t cap)
{
	const struct {
		const char *what;
		uint64_t n;
	} p[] = {
		{ "unnamed spans", m->unnamed_spans },
		{ "unnamed events", m->unnamed_events },
		{ "empty attribute keys dropped", m->empty_keys_dropped },
		{ "unsigned values as strings", m->unsigned_as_string },
		{ "annotations clamped into their span", m->annotations_clamped },
		{ "repeated annotations numbered", m->annotations_renamed },
	};
	size_t i, n = 0;
	out[0] = 0;
	for (i = 0; i < sizeof p / sizeof p[0] && n < cap; i++)
		if (p[i].n)
			n += (size_t)snprintf(out + n, cap - n, "%s%" PRIu64 " %s", n ? ", " : "; mended: ",
					      p[i].n, p[i].what);
}

static void summary(const struct export_opts *o, const struct rt_decoded_trace *t, size_t n,
		    size_t bytes, const char *dest, const struct rt_export_stats *mended)
{
	struct rt_decode_stats sum = { 0 };
	char problems[512], fixes[512];
	uint64_t spans = 0, loose = 0;
	size_t i;
	if (o->quiet)
		return;
	for (i = 0; i < n; i++) {
		spans += t[i].n_spans;
		loose += t[i].n_loose_logs;
		add_stats(&sum, &t[i].st);
	}
	if (!cli_decode_problems(&sum, problems, sizeof problems))
		snprintf(problems, sizeof problems, "none");
	mended_text(mended, fixes, sizeof fixes);
	fprintf(stderr, "retrace export: %zu trace%s, %" PRIu64 " span%s, %zu bytes of %s -> %s; "
		"decode problems: %s%s%s\n", n, n == 1 ? "" : "s", spans, spans == 1 ? "" : "s", bytes,
		format_name(o->fmt), dest, problems,
		loose ? " (logs outside any span are not exported)" : "", fixes);
}

/* Write and/or push; 0, 1 (delivered, but the collector rejected spans) or -1. */
static int deliver(const struct export_opts *o, FILE *file, const struct rt_decoded_trace *traces,
		   size_t n, const struct rt_wire_buf *shown, char *dest, size_t destlen,
		   size_t *bytes, struct rt_export_stats *mended)
{
	struct rt_push_result res;
	char err[1024];
	dest[0] = 0;
	if (file) {
		const char *name = file == stdout ? "stdout" : o->output;
		if (write_document(file, name, shown) != 0)
			return -1;
		snprintf(dest, destlen, "%s", name);
	}
	if (o->endpoint) {
		size_t len = strlen(dest);
		if (rt_export_push_traces(o->endpoint, traces, n, &o->push, &res, err, sizeof err) != 0) {
			fprintf(stderr, "retrace export: %s\n", err);
			return -1;
		}
		if (!file) { /* no document written: the push's own figures */
			*bytes = res.bytes;
			*mended = res.mended;
		}
		snprintf(dest + len, destlen - len, "%s%s (%" PRIu64 " request%s, %" PRIu64
			 " bytes %s)", len ? " and " : "", o->endpoint, res.requests,
			 res.requests == 1 ? "" : "s", res.bytes_sent, o->push.no_gzip ? "sent" : "gzip'd");
		if (res.partial_answers) {
			fprintf(stderr, "retrace export: %s accepted the export but rejected %" PRIu64
				" of %" PRIu64 " spans%s%s\n", o->endpoint, res.rejected_spans,
				res.spans_sent, res.message[0] ? ": " : "", res.message);
			if (res.rejected_spans)
				return 1;
		}
	}
	return 0;
}

/* -------------------------------------------------------- command ---- */

int cli_cmd_export(int argc, char **argv)
{
	struct export_opts o = { 0 };
	struct ref_list refs = { 0 };
	struct rt_decoded_trace *traces = NULL;
	struct rt_wire_buf doc = { 0 }, pretty = { 0 };
	struct rt_export_stats mended = { 0 };
	struct rt_store *s = NULL;
	struct out_file out = { 0 };
	FILE *file = NULL;
	char dest[1024];
	size_t ndone = 0, i, bytes = 0;
	int rc = 1, r, delivered = -1;

	if ((r = parse_args(argc, argv, &o)) != 0)
		return r > 0 ? 0 : 2;
	if (cli_store_locator("export", o.store, o.coordinator, o.store_buf, sizeof o.store_buf) != 0)
		return 1;
	o.store = o.store_buf;
	if (cli_open_store("export", o.store, &s) != 0)
		return 1;
	if ((r = select_traces(s, &o, argc, argv, &refs)) != 0) {
		rc = r == -2 ? 2 : 1;
		goto out;
	}
	if (!refs.n && !o.quiet)
		fprintf(stderr, "retrace export: no traces match (store %s)\n", o.store);
	/* open the output before the work so a bad path fails at once */
	if (o.output && strcmp(o.output, "-")) {
		if (out_open(&out, o.output) != 0)
			goto out;
		file = out.f;
	} else if (o.output || !o.endpoint) {
		file = stdout;
	}
	traces = calloc(refs.n ? refs.n : 1, sizeof *traces);
	if (!traces) {
		fprintf(stderr, "retrace export: out of memory\n");
		goto out;
	}
	if (decode_all(s, &o, &refs, traces, &ndone) != 0)
		goto out;
	/* the document is built only when something is written (a push builds
	 * its own batches) */
	if (file && (rt_export_write_stats(o.fmt, traces, refs.n, &doc, &mended) != 0 ||
		     (o.pretty && pretty_json(&doc, &pretty) != 0))) {
		fprintf(stderr, "retrace export: out of memory writing the document\n");
		goto out;
	}
	if (o.endpoint && !refs.n) {
		fprintf(stderr, "retrace export: nothing to push\n");
		o.endpoint = NULL;
	}
	bytes = o.pretty ? pretty.len : doc.len;
	delivered = deliver(&o, file, traces, refs.n, o.pretty ? &pretty : &doc, dest, sizeof dest,
			    &bytes, &mended);
	if (delivered < 0)
		goto out;
	rc = delivered ? 1 : 0;
out:
	/* the file takes the place of what -o names only when it is complete and
	 * the push (if any) went through; otherwise only our temporary goes */
	if (out.f && out_close(&out, delivered >= 0) != 0)
		rc = 1;
	else if (delivered >= 0)
		summary(&o, traces, refs.n, bytes, dest[0] ? dest : "nowhere", &mended);
	for (i = 0; i < ndone; i++)
		rt_decoded_trace_free(&traces[i]);
	free(traces);
	free(refs.v);
	rt_wire_buf_free(&doc);
	rt_wire_buf_free(&pretty);
	rt_store_close(s);
	return rc;
}
