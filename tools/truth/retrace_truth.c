/*
 * tools/truth/retrace_truth.c — `retrace-truth`: the coordinator's "coherent"
 * verdicts checked against what the services really did.
 *
 * How it works: the truth files retrace-topo's services wrote (one line per
 * request handled, examples/topo/topo_format.h) are read and sorted by trace id,
 * so each trace's lines sit together. A trace is *triggered* when any of its
 * lines names a trigger. For each triggered trace the store's row is looked up
 * and its slices are read twice: through coordinator/decode.h (spans), and
 * reassembled into raw records per writer stream with shm/frame.h (what
 * `retrace show --records` prints). The trace is *complete* when:
 *   - the agents that delivered data are exactly the hosts the truth lists;
 *   - every span id a truth line lists is decoded on that line's agent, with its
 *     start and its end and not partial, the SERVER span under the caller's
 *     span and each CLIENT span under the SERVER span;
 *   - every raw record a truth line announces (count and bytes) is there, on
 *     that agent, byte for byte as topo_record_fill regenerates it.
 * Then: stored + coherent + complete = captured coherently; coherent but not
 * complete = FALSE COHERENT (the promise broken, listed with what is missing);
 * incoherent and not complete = incoherent correctly; incoherent but complete is
 * counted too (too cautious, not wrong). Rows of traces the truth does not call
 * triggered are counted, not judged.
 *
 * Exit status: 0 iff no trace is false coherent (with --require-all: and every
 * triggered trace was captured coherently); 1 otherwise; 2 for bad usage or
 * unreadable input.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "decode.h"
#include "shm/events.h"
#include "shm/frame.h"
#include "store.h"
#include "topo_format.h"
#include "wire.h"

#define MAX_PROBLEMS 8
#define EXIT_FAIL 1
#define EXIT_USAGE 2

/* ---------------------------------------------------------------- truth ---- */

struct tline {
	struct topo_truth t;
	uint32_t svc_hash;
	const char *file; /* interned path */
	unsigned line;
};

struct truth {
	struct tline *v;
	size_t n, cap;
	char **files;
	size_t n_files;
};

static int add_line(struct truth *tr, const struct tline *l)
{
	if (tr->n == tr->cap) {
		size_t cap = tr->cap ? tr->cap * 2 : 4096;
		struct tline *v = realloc(tr->v, cap * sizeof *v);
		if (!v)
			return -1;
		tr->v = v;
		tr->cap = cap;
	}
	tr->v[tr->n++] = *l;
	return 0;
}

static int read_truth_file(struct truth *tr, const char *path)
{
	FILE *f = fopen(path, "r");
	char *line = NULL, err[256], **files;
	size_t cap = 0;
	ssize_t len;
	unsigned no = 0;
	const char *name;
	if (!f) {
		fprintf(stderr, "retrace-truth: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!(files = realloc(tr->files, (tr->n_files + 1) * sizeof *files)) ||
	    !(files[tr->n_files] = strdup(path))) {
		fclose(f);
		fprintf(stderr, "retrace-truth: out of memory\n");
		return -1;
	}
	tr->files = files;
	name = files[tr->n_files++];
	while ((len = getline(&line, &cap, f)) > 0) {
		struct tline l;
		no++;
		if (line[len - 1] != '\n') {
			/* A service killed mid-write leaves a torn last line: say so. */
			fprintf(stderr, "retrace-truth: %s:%u: the last line is cut off (no newline)\n",
				path, no);
			free(line);
			fclose(f);
			return -1;
		}
		if (topo_truth_parse(line, &l.t, err, sizeof err) != 0) {
			fprintf(stderr, "retrace-truth: %s:%u: %s\n", path, no, err);
			free(line);
			fclose(f);
			return -1;
		}
		l.svc_hash = topo_name_hash(l.t.service);
		l.file = name;
		l.line = no;
		if (add_line(tr, &l) != 0) {
			fprintf(stderr, "retrace-truth: out of memory\n");
			free(line);
			fclose(f);
			return -1;
		}
	}
	free(line);
	if (ferror(f)) {
		fprintf(stderr, "retrace-truth: reading %s: %s\n", path, strerror(errno));
		fclose(f);
		return -1;
	}
	fclose(f);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory: every *.truth file in it, in name order. */
static int read_truth_path(struct truth *tr, const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, i;
	int rc = 0;
	if (stat(path, &st) != 0) {
		fprintf(stderr, "retrace-truth: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return read_truth_file(tr, path);
	if (!(d = opendir(path))) {
		fprintf(stderr, "retrace-truth: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		char **v;
		if (len <= 6 || strcmp(e->d_name + len - 6, ".truth") != 0)
			continue;
		if (!(v = realloc(names, (n + 1) * sizeof *v)) ||
		    !(v[n] = malloc(strlen(path) + len + 2))) {
			closedir(d);
			fprintf(stderr, "retrace-truth: out of memory\n");
			return -1;
		}
		names = v;
		sprintf(names[n++], "%s/%s", path, e->d_name);
	}
	closedir(d);
	if (n == 0) {
		fprintf(stderr, "retrace-truth: %s: no *.truth files in this directory\n", path);
		rc = -1;
	}
	qsort(names, n, sizeof *names, cmp_str);
	for (i = 0; i < n; i++) {
		if (!rc && read_truth_file(tr, names[i]) != 0)
			rc = -1;
		free(names[i]);
	}
	free(names);
	return rc;
}

static int cmp_tline(const void *a, const void *b)
{
	const struct tline *x = a, *y = b;
	if (x->t.hi != y->t.hi)
		return x->t.hi < y->t.hi ? -1 : 1;
	if (x->t.lo != y->t.lo)
		return x->t.lo < y->t.lo ? -1 : 1;
	if (x->t.node != y->t.node)
		return x->t.node < y->t.node ? -1 : 1;
	return strcmp(x->t.service, y->t.service);
}

/* ------------------------------------------------------------- verdicts ---- */

enum verdict {
	V_CAPTURED = 0,
	V_FALSE_COHERENT,
	V_INCOHERENT_CORRECTLY,
	V_INCOHERENT_COMPLETE,
	V_MISSING,
	V_N
};

struct result {
	uint64_t hi, lo;
	enum verdict v;
	struct rt_store_trace row;
	uint32_t truth_agents[RT_STORE_MAX_AGENTS];
	uint32_t n_truth_agents;
	char problems[MAX_PROBLEMS][240];
	unsigned n_problems; /* may exceed MAX_PROBLEMS: only the first are kept */
	uint64_t unexpected_records, duplicate_records;
};

static void problem(struct result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(struct result *r, const char *fmt, ...)
{
	va_list ap;
	if (r->n_problems < MAX_PROBLEMS) {
		va_start(ap, fmt);
		vsnprintf(r->problems[r->n_problems], sizeof r->problems[0], fmt, ap);
		va_end(ap);
	}
	r->n_problems++;
}

/* The slices of one trace, kept decoded for the raw-record pass. */
struct slices {
	struct rt_decoder *dec;
	struct rt_wire_msg *msgs;
	void **raw;
	size_t n, cap;
	uint64_t malformed;
	int oom;
};

static int keep_slice(void *arg, const struct rt_store_slice *sl)
{
	struct slices *x = arg;
	void *copy;
	if (rt_decoder_add_message(x->dec, sl->msg, sl->msg_len) != 0) {
		x->oom = 1;
		return -1;
	}
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 16;
		struct rt_wire_msg *m = realloc(x->msgs, cap * sizeof *m);
		void **r;
		if (!m) {
			x->oom = 1;
			return -1;
		}
		x->msgs = m;
		if (!(r = realloc(x->raw, cap * sizeof *r))) {
			x->oom = 1;
			return -1;
		}
		x->raw = r;
		x->cap = cap;
	}
	if (!(copy = malloc(sl->msg_len ? sl->msg_len : 1))) {
		x->oom = 1;
		return -1;
	}
	memcpy(copy, sl->msg, sl->msg_len);
	if (rt_wire_decode(copy, sl->msg_len, &x->msgs[x->n]) != 0 ||
	    x->msgs[x->n].type != RT_WIRE_SLICE) {
		rt_wire_msg_free(&x->msgs[x->n]);
		free(copy);
		x->malformed++;
		return 0;
	}
	x->raw[x->n++] = copy;
	return 0;
}

static void slices_free(struct slices *x)
{
	size_t i;
	for (i = 0; i < x->n; i++) {
		rt_wire_msg_free(&x->msgs[i]);
		free(x->raw[i]);
	}
	free(x->msgs);
	free(x->raw);
	rt_decoder_free(x->dec);
}

struct rbuf {
	uint32_t agent, pid, tid, seq;
	const uint8_t *data;
	uint32_t len;
};

static int cmp_rbuf(const void *a, const void *b)
{
	const struct rbuf *x = a, *y = b;
	if (x->agent != y->agent)
		return x->agent < y->agent ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* What one truth line expects to find, and what was found. */
struct expect {
	const struct tline *l;
	uint8_t *seen;      /* per record: 0 none, 1 exact, 2 differs */
	uint32_t wrong_agent;
};

/* The expectation a record's header names, or NULL. */
static struct expect *find_expect(struct expect *ex, size_t n, const struct topo_rec_id *id)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (ex[i].l->t.node == id->node && ex[i].l->svc_hash == id->svc_hash)
			return &ex[i];
	return NULL;
}

static void check_record(struct result *r, struct expect *ex, size_t n_ex, uint32_t agent,
			 const uint8_t *rec, size_t len)
{
	struct topo_rec_id id;
	struct expect *e;
	if (len && rec[0] == RETRACE_EVENT_MAGIC)
		return; /* a tracer event: the span pass judges those */
	if (topo_record_parse(rec, len, &id) != 0 || id.hi != r->hi || id.lo != r->lo ||
	    !(e = find_expect(ex, n_ex, &id)) || id.index >= e->l->t.records) {
		r->unexpected_records++;
		return;
	}
	if (e->seen[id.index]) {
		r->duplicate_records++;
		return;
	}
	if (agent != e->l->t.agent)
		e->wrong_agent = agent;
	e->seen[id.index] =
		topo_record_equal(rec, len, topo_record_len(e->l->t.bytes, e->l->t.records, id.index),
				  r->hi, r->lo, id.svc_hash, id.node, id.index)
			? 1
			: 2;
}

/* Reassemble every writer stream's records and match them to the truth. */
static int check_records(struct result *r, struct slices *x, struct expect *ex, size_t n_ex)
{
	struct rbuf *b;
	size_t total = 0, n = 0, i, j, k;
	uint64_t conflicts = 0;
	for (i = 0; i < x->n; i++)
		total += x->msgs[i].slice.buffer_count;
	if (!(b = calloc(total ? total : 1, sizeof *b)))
		return -1;
	for (i = 0; i < x->n; i++) {
		const struct rt_wire_slice *sl = &x->msgs[i].slice;
		for (k = 0; k < sl->buffer_count; k++)
			b[n++] = (struct rbuf){sl->agent_id, sl->buffers[k].pid, sl->buffers[k].tid,
					       sl->buffers[k].seq, sl->buffers[k].data,
					       sl->buffers[k].len};
	}
	qsort(b, n, sizeof *b, cmp_rbuf);
	for (i = 0; i < n; i = j) {
		struct rt_reassembler ra;
		rt_reasm_init(&ra);
		for (j = i; j < n && b[j].agent == b[i].agent && b[j].pid == b[i].pid &&
			    b[j].tid == b[i].tid;
		     j++) {
			uint32_t pos = 0;
			struct rt_frame f;
			if (j > i && b[j].seq == b[j - 1].seq) {
				/* A re-sent copy; a copy with other bytes means lost data. */
				if (b[j].len != b[j - 1].len || memcmp(b[j].data, b[j - 1].data, b[j].len))
					conflicts++;
				continue;
			}
			if (j > i && b[j].seq != b[j - 1].seq + 1)
				rt_reasm_gap(&ra);
			while (rt_frame_next(b[j].data, b[j].len, &pos, &f) == RT_FRAME_OK) {
				const uint8_t *rec;
				size_t len;
				uint64_t tick;
				if (rt_reasm_feed(&ra, &f, &rec, &len, &tick) == 1)
					check_record(r, ex, n_ex, b[i].agent, rec, len);
			}
		}
		rt_reasm_free(&ra);
	}
	free(b);
	if (conflicts)
		problem(r, "%" PRIu64 " buffer(s) stored twice with different bytes", conflicts);
	return 0;
}

static const struct rt_span *find_span(const struct rt_decoded_trace *d, uint64_t id)
{
	uint32_t i;
	for (i = 0; i < d->n_spans; i++)
		if (d->spans[i].span_id == id)
			return &d->spans[i];
	return NULL;
}

static void check_span(struct result *r, const struct rt_decoded_trace *d, const struct tline *l,
		       uint64_t id, uint64_t want_parent, int server)
{
	const struct rt_span *s = find_span(d, id);
	const char *what = server ? "SERVER" : "CLIENT";
	if (!s) {
		problem(r, "%s span %016" PRIx64 " of %s node %u (agent %u) not decoded", what, id,
			l->t.service, l->t.node, l->t.agent);
		return;
	}
	if (s->agent_id != l->t.agent)
		problem(r, "span %016" PRIx64 " of %s node %u decoded on agent %u, written on %u", id,
			l->t.service, l->t.node, s->agent_id, l->t.agent);
	if (s->flags & (RT_SPAN_PARTIAL | RT_SPAN_NO_START | RT_SPAN_NO_END))
		problem(r, "%s span %016" PRIx64 " of %s node %u (agent %u) is%s%s%s", what, id,
			l->t.service, l->t.node, l->t.agent,
			s->flags & RT_SPAN_NO_START ? " without its start" : "",
			s->flags & RT_SPAN_NO_END ? " without its end" : "",
			s->flags & RT_SPAN_PARTIAL ? " partial" : "");
	if (s->parent_id != want_parent)
		problem(r, "span %016" PRIx64 " of %s node %u has parent %016" PRIx64 ", truth %016" PRIx64,
			id, l->t.service, l->t.node, s->parent_id, want_parent);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static int has_u32(const uint32_t *v, uint32_t n, uint32_t x)
{
	uint32_t i;
	for (i = 0; i < n; i++)
		if (v[i] == x)
			return 1;
	return 0;
}

/* Is name one of the comma-separated names in list? */
static int in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p = list;
	while (*p) {
		size_t len = strcspn(p, ",");
		if (len == n && memcmp(p, name, n) == 0)
			return 1;
		p += len + (p[len] == ',');
	}
	return 0;
}

/* Judge one triggered trace: lines [0, n) are all of its truth. */
static int judge(struct rt_store *st, const struct tline *lines, size_t n, struct result *r)
{
	struct slices x;
	struct rt_decoded_trace d;
	struct expect *ex;
	size_t i;
	uint32_t k;
	int rc;

	memset(r, 0, sizeof *r);
	r->hi = lines[0].t.hi;
	r->lo = lines[0].t.lo;
	for (i = 0; i < n; i++)
		if (!has_u32(r->truth_agents, r->n_truth_agents, lines[i].t.agent) &&
		    r->n_truth_agents < RT_STORE_MAX_AGENTS)
			r->truth_agents[r->n_truth_agents++] = lines[i].t.agent;
	qsort(r->truth_agents, r->n_truth_agents, sizeof r->truth_agents[0], cmp_u32);

	rc = rt_store_get_trace(st, r->hi, r->lo, &r->row);
	if (rc == RT_STORE_E_NOTFOUND) {
		r->v = V_MISSING;
		return 0;
	}
	if (rc != 0) {
		fprintf(stderr, "retrace-truth: reading trace %016" PRIx64 "%016" PRIx64 ": %s\n", r->hi,
			r->lo, rt_store_errmsg(st));
		return -1;
	}

	/* Hosts: exactly the truth's. */
	for (k = 0; k < r->n_truth_agents; k++)
		if (!has_u32(r->row.agents, r->row.agent_count, r->truth_agents[k])) {
			char svcs[160];
			size_t len = 0;
			svcs[0] = '\0';
			for (i = 0; i < n && len < sizeof svcs - 40; i++)
				if (lines[i].t.agent == r->truth_agents[k] &&
				    !in_list(svcs, lines[i].t.service))
					len += (size_t)snprintf(svcs + len, sizeof svcs - len, "%s%s",
								len ? "," : "", lines[i].t.service);
			problem(r, "agent %u (%s) delivered nothing", r->truth_agents[k], svcs);
		}
	for (k = 0; k < r->row.agent_count; k++)
		if (!has_u32(r->truth_agents, r->n_truth_agents, r->row.agents[k]))
			problem(r, "agent %u delivered data the truth does not know of", r->row.agents[k]);

	/* Slices: spans through the decoder, raw records by reassembly. */
	memset(&x, 0, sizeof x);
	if (!(x.dec = rt_decoder_new(r->hi, r->lo)))
		return -1;
	if (rt_store_slices(st, r->hi, r->lo, keep_slice, &x) != 0) {
		fprintf(stderr, "retrace-truth: slices of %016" PRIx64 "%016" PRIx64 ": %s\n", r->hi, r->lo,
			x.oom ? "out of memory" : rt_store_errmsg(st));
		slices_free(&x);
		return -1;
	}
	if (x.malformed)
		problem(r, "%" PRIu64 " stored slice(s) do not decode", x.malformed);
	rc = rt_decoder_finish(x.dec, &d);
	x.dec = NULL; /* finish freed it */
	if (rc != 0) {
		slices_free(&x);
		fprintf(stderr, "retrace-truth: out of memory decoding\n");
		return -1;
	}
	for (i = 0; i < n; i++) {
		const struct tline *l = &lines[i];
		for (k = 0; k < l->t.n_spans; k++)
			check_span(r, &d, l, l->t.spans[k], k == 0 ? l->t.parent : l->t.spans[0], k == 0);
	}
	rt_decoded_trace_free(&d);

	if (!(ex = calloc(n, sizeof *ex))) {
		slices_free(&x);
		return -1;
	}
	for (i = 0; i < n; i++) {
		ex[i].l = &lines[i];
		if (!(ex[i].seen = calloc(lines[i].t.records ? lines[i].t.records : 1, 1))) {
			while (i--)
				free(ex[i].seen);
			free(ex);
			slices_free(&x);
			return -1;
		}
	}
	rc = check_records(r, &x, ex, n);
	for (i = 0; i < n && rc == 0; i++) {
		const struct topo_truth *t = &ex[i].l->t;
		uint32_t have = 0, differ = 0, first_missing = UINT32_MAX;
		uint64_t bytes = 0;
		for (k = 0; k < t->records; k++) {
			if (ex[i].seen[k])
				have++, bytes += topo_record_len(t->bytes, t->records, k);
			else if (first_missing == UINT32_MAX)
				first_missing = k;
			differ += ex[i].seen[k] == 2;
		}
		if (have < t->records)
			problem(r, "%s node %u (agent %u): %u of %u raw records (%" PRIu64 " of %" PRIu64
				" bytes), first missing #%u", t->service, t->node, t->agent, have, t->records,
				bytes, t->bytes, first_missing);
		if (differ)
			problem(r, "%s node %u (agent %u): %u raw record(s) differ from what was written",
				t->service, t->node, t->agent, differ);
		if (ex[i].wrong_agent)
			problem(r, "%s node %u: raw records found on agent %u, written on %u", t->service,
				t->node, ex[i].wrong_agent, t->agent);
	}
	for (i = 0; i < n; i++)
		free(ex[i].seen);
	free(ex);
	slices_free(&x);
	if (rc != 0)
		return -1;

	if (r->row.coherent)
		r->v = r->n_problems ? V_FALSE_COHERENT : V_CAPTURED;
	else
		r->v = r->n_problems ? V_INCOHERENT_CORRECTLY : V_INCOHERENT_COMPLETE;
	return 0;
}

/* --------------------------------------------------------------- output ---- */

static void list_ids(char *out, size_t n, const uint32_t *v, uint32_t count)
{
	size_t len = 0;
	uint32_t i;
	out[0] = '\0';
	for (i = 0; i < count && len < n; i++)
		len += (size_t)snprintf(out + len, n - len, "%s%u", i ? "," : "", v[i]);
	if (count == 0)
		snprintf(out, n, "-");
}

/* The row's delivering agents, ascending (the store keeps them in arrival order). */
static void row_agents(const struct result *r, char *out, size_t n)
{
	uint32_t v[RT_STORE_MAX_AGENTS], k = r->row.agent_count;
	if (k > RT_STORE_MAX_AGENTS)
		k = RT_STORE_MAX_AGENTS;
	memcpy(v, r->row.agents, k * sizeof v[0]);
	qsort(v, k, sizeof v[0], cmp_u32);
	list_ids(out, n, v, k);
}

static void print_result_text(const struct result *r)
{
	char got[256], want[256], miss[256];
	unsigned i;
	row_agents(r, got, sizeof got);
	list_ids(want, sizeof want, r->truth_agents, r->n_truth_agents);
	list_ids(miss, sizeof miss, r->row.missing, r->row.missing_count);
	if (r->v == V_MISSING) {
		printf("  %016" PRIx64 "%016" PRIx64 "  not in the store (truth hosts %s)\n", r->hi, r->lo,
		       want);
		return;
	}
	printf("  %016" PRIx64 "%016" PRIx64 "  %s; agents %s, truth %s, coordinator's missing %s; "
	       "%u slices, %u late; traversal %.2f ms\n",
	       r->hi, r->lo, r->row.coherent ? "coherent" : "incoherent", got, want, miss,
	       r->row.slices, r->row.late_slices, (double)r->row.traversal_ns / 1e6);
	for (i = 0; i < r->n_problems && i < MAX_PROBLEMS; i++)
		printf("      - %s\n", r->problems[i]);
	if (r->n_problems > MAX_PROBLEMS)
		printf("      - ... and %u more\n", r->n_problems - MAX_PROBLEMS);
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", (unsigned char)*s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void print_result_json(const struct result *r)
{
	char got[256], want[256], miss[256];
	unsigned i;
	row_agents(r, got, sizeof got);
	list_ids(want, sizeof want, r->truth_agents, r->n_truth_agents);
	list_ids(miss, sizeof miss, r->row.missing, r->row.missing_count);
	printf("{\"trace\":\"%016" PRIx64 "%016" PRIx64 "\",\"stored\":%s,\"coherent\":%s,"
	       "\"agents\":[%s],\"truth_agents\":[%s],\"coordinator_missing\":[%s],"
	       "\"late_slices\":%u,\"problems\":[",
	       r->hi, r->lo, r->v == V_MISSING ? "false" : "true", r->row.coherent ? "true" : "false",
	       r->v == V_MISSING || !r->row.agent_count ? "" : got, want,
	       r->v == V_MISSING || !r->row.missing_count ? "" : miss, r->row.late_slices);
	for (i = 0; i < r->n_problems && i < MAX_PROBLEMS; i++) {
		if (i)
			putchar(',');
		json_str(r->problems[i]);
	}
	printf("]}");
}

/* ----------------------------------------------------------------- main ---- */

struct stored_count {
	const struct tline *v;
	size_t n;
	const uint64_t *trig; /* sorted (hi, lo) pairs of the triggered traces */
	size_t n_trig;
	uint64_t untriggered, unknown;
};

static int in_truth(const struct tline *v, size_t n, uint64_t hi, uint64_t lo)
{
	size_t a = 0, b = n;
	while (a < b) {
		size_t m = (a + b) / 2;
		if (v[m].t.hi < hi || (v[m].t.hi == hi && v[m].t.lo < lo))
			a = m + 1;
		else
			b = m;
	}
	return a < n && v[a].t.hi == hi && v[a].t.lo == lo;
}

static int count_row(void *arg, const struct rt_store_trace *t)
{
	struct stored_count *c = arg;
	size_t a = 0, b = c->n_trig;
	while (a < b) {
		size_t m = (a + b) / 2;
		const uint64_t *p = c->trig + 2 * m;
		if (p[0] < t->trace_hi || (p[0] == t->trace_hi && p[1] < t->trace_lo))
			a = m + 1;
		else
			b = m;
	}
	if (a < c->n_trig && c->trig[2 * a] == t->trace_hi && c->trig[2 * a + 1] == t->trace_lo)
		return 0;
	if (in_truth(c->v, c->n, t->trace_hi, t->trace_lo))
		c->untriggered++;
	else
		c->unknown++;
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: retrace-truth --store FILE --truth DIR_OR_FILE [DIR_OR_FILE...] [options]\n"
		"Check the coordinator's store against the ground truth retrace-topo's services\n"
		"wrote: is every trace called coherent really complete?\n"
		"\n"
		"  -s, --store FILE     the coordinator's SQLite store (opened read-only)\n"
		"  -t, --truth PATH     a truth file, or a directory of *.truth files; more paths\n"
		"                       may follow as arguments\n"
		"  -a, --require-all    also fail unless every triggered trace was captured coherently\n"
		"  -j, --json           one JSON object instead of the text report\n"
		"  -n, --list N         list at most N traces of each kind that is not right (default 5)\n"
		"  -h, --help           this text\n"
		"\n"
		"Counts: triggered (the truth says a trigger fired), stored, stored_coherent,\n"
		"captured_coherent (stored, coherent and complete against the truth),\n"
		"false_coherent (coherent, but a host, span or raw record is missing or wrong),\n"
		"incoherent_correctly, incoherent_but_complete, missing_from_store. The last\n"
		"line is `bench e2e-truth key=value ...`.\n"
		"Exit status: 0 iff false_coherent is 0 (and, with --require-all, every triggered\n"
		"trace was captured coherently); 1 otherwise; 2 bad usage or unreadable input.\n");
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "retrace-truth: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see retrace-truth --help)\n");
	return EXIT_USAGE;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"store", required_argument, NULL, 's'},
		{"truth", required_argument, NULL, 't'},
		{"require-all", no_argument, NULL, 'a'},
		{"json", no_argument, NULL, 'j'},
		{"list", required_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	static const char *const vname[V_N] = {"captured_coherent", "false_coherent",
					       "incoherent_correctly", "incoherent_but_complete",
					       "missing_from_store"};
	const char *store_path = NULL;
	const char *paths[256];
	int n_paths = 0, require_all = 0, json = 0, c, i, rc = 0, exit_code;
	unsigned long list = 5;
	struct truth tr;
	struct rt_store *st = NULL;
	struct rt_store_options so;
	struct result *results = NULL;
	size_t n_results = 0, a, b, traces = 0, cap_results = 0;
	uint64_t count[V_N] = {0, 0, 0, 0, 0}, edge = 0, exception = 0, late_coherent = 0;
	uint64_t unexpected = 0, duplicates = 0, *trig = NULL;
	struct stored_count sc;
	char *end;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:t:ajn:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			store_path = optarg;
			break;
		case 't':
			if (n_paths == 256)
				return usage_error("too many truth paths%s", "");
			paths[n_paths++] = optarg;
			break;
		case 'a':
			require_all = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'n':
			errno = 0;
			list = strtoul(optarg, &end, 10);
			if (errno || *end || !*optarg || optarg[0] == '-')
				return usage_error("--list '%s': want a count", optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (n_paths == 0)
		return usage_error("--truth DIR_OR_FILE is required%s", "");
	for (; optind < argc; optind++) {
		if (n_paths == 256)
			return usage_error("too many truth paths%s", "");
		paths[n_paths++] = argv[optind];
	}
	if (!store_path)
		return usage_error("--store FILE is required%s", "");

	memset(&tr, 0, sizeof tr);
	for (i = 0; i < n_paths; i++)
		if (read_truth_path(&tr, paths[i]) != 0)
			return EXIT_USAGE;
	if (tr.n == 0) {
		fprintf(stderr, "retrace-truth: the truth is empty (no request was handled?)\n");
		return EXIT_USAGE;
	}
	qsort(tr.v, tr.n, sizeof *tr.v, cmp_tline);

	memset(&so, 0, sizeof so);
	so.path = store_path;
	so.readonly = 1;
	if (rt_store_open(&st, &so) != 0) {
		fprintf(stderr, "retrace-truth: cannot open the store %s: %s\n", store_path,
			rt_store_errmsg(st));
		rt_store_close(st);
		return EXIT_USAGE;
	}

	/* One trace at a time: [a, b) share a trace id. */
	for (a = 0; a < tr.n; a = b) {
		int triggered = 0;
		size_t k;
		for (b = a; b < tr.n && tr.v[b].t.hi == tr.v[a].t.hi && tr.v[b].t.lo == tr.v[a].t.lo;
		     b++) {
			triggered |= tr.v[b].t.trigger != 0;
			edge += tr.v[b].t.trigger == TOPO_TRIGGER_EDGE;
			exception += tr.v[b].t.trigger == TOPO_TRIGGER_EXCEPTION;
		}
		traces++;
		if (!triggered)
			continue;
		if (n_results == cap_results) {
			size_t cap = cap_results ? cap_results * 2 : 256;
			struct result *v = realloc(results, cap * sizeof *v);
			uint64_t *t2 = realloc(trig, cap * 2 * sizeof *t2);
			if (!v || !t2) {
				fprintf(stderr, "retrace-truth: out of memory\n");
				return EXIT_USAGE;
			}
			results = v;
			trig = t2;
			cap_results = cap;
		}
		if (judge(st, tr.v + a, b - a, &results[n_results]) != 0) {
			rc = -1;
			break;
		}
		trig[2 * n_results] = tr.v[a].t.hi;
		trig[2 * n_results + 1] = tr.v[a].t.lo;
		k = n_results++;
		count[results[k].v]++;
		unexpected += results[k].unexpected_records;
		duplicates += results[k].duplicate_records;
		if (results[k].v == V_CAPTURED && results[k].row.late_slices)
			late_coherent++;
	}
	memset(&sc, 0, sizeof sc);
	sc.v = tr.v;
	sc.n = tr.n;
	sc.trig = trig;
	sc.n_trig = n_results;
	if (rc == 0 && rt_store_list(st, &(struct rt_store_query){0}, count_row, &sc) != 0) {
		fprintf(stderr, "retrace-truth: listing the store: %s\n", rt_store_errmsg(st));
		rc = -1;
	}
	rt_store_close(st);
	if (rc != 0)
		return EXIT_USAGE;

	{
		uint64_t triggered = n_results, stored = triggered - count[V_MISSING];
		uint64_t stored_coherent = count[V_CAPTURED] + count[V_FALSE_COHERENT];
		double pct = triggered ? 100.0 * (double)count[V_CAPTURED] / (double)triggered : 0.0;
		int pass = count[V_FALSE_COHERENT] == 0 &&
			   (!require_all || count[V_CAPTURED] == triggered);
		enum verdict show[] = {V_FALSE_COHERENT, V_MISSING, V_INCOHERENT_CORRECTLY,
				       V_INCOHERENT_COMPLETE};
		size_t s, shown;
		exit_code = pass ? 0 : EXIT_FAIL;
		if (json) {
			printf("{\"truth_lines\":%zu,\"truth_files\":%zu,\"traces\":%zu,\"triggered\":%" PRIu64
			       ",\"edge_triggers\":%" PRIu64 ",\"exception_triggers\":%" PRIu64
			       ",\"stored\":%" PRIu64 ",\"stored_coherent\":%" PRIu64
			       ",\"captured_coherent\":%" PRIu64 ",\"captured_pct\":%.3f"
			       ",\"false_coherent\":%" PRIu64 ",\"incoherent_correctly\":%" PRIu64
			       ",\"incoherent_but_complete\":%" PRIu64 ",\"missing_from_store\":%" PRIu64
			       ",\"coherent_with_late_slices\":%" PRIu64 ",\"unexpected_records\":%" PRIu64
			       ",\"duplicate_records\":%" PRIu64 ",\"stored_untriggered\":%" PRIu64
			       ",\"stored_unknown\":%" PRIu64 ",\"pass\":%s",
			       tr.n, tr.n_files, traces, triggered, edge, exception, stored, stored_coherent,
			       count[V_CAPTURED], pct, count[V_FALSE_COHERENT], count[V_INCOHERENT_CORRECTLY],
			       count[V_INCOHERENT_COMPLETE], count[V_MISSING], late_coherent, unexpected,
			       duplicates, sc.untriggered, sc.unknown, pass ? "true" : "false");
			for (s = 0; s < sizeof show / sizeof show[0]; s++) {
				printf(",\"%s_traces\":[", vname[show[s]]);
				for (a = 0, shown = 0; a < n_results && shown < list; a++)
					if (results[a].v == show[s]) {
						if (shown++)
							putchar(',');
						print_result_json(&results[a]);
					}
				printf("]");
			}
			printf("}\n");
		} else {
			printf("retrace-truth: %zu truth lines in %zu files, %zu traces, %" PRIu64
			       " triggered (%" PRIu64 " edge, %" PRIu64 " exception triggers)\n",
			       tr.n, tr.n_files, traces, triggered, edge, exception);
			printf("  triggered                  %" PRIu64 "\n", triggered);
			printf("  stored                     %" PRIu64 "\n", stored);
			printf("  stored_coherent            %" PRIu64 "\n", stored_coherent);
			printf("  captured_coherent          %" PRIu64 " (%.2f %%)\n", count[V_CAPTURED], pct);
			printf("  false_coherent             %" PRIu64 "\n", count[V_FALSE_COHERENT]);
			printf("  incoherent_correctly       %" PRIu64 "\n", count[V_INCOHERENT_CORRECTLY]);
			printf("  incoherent_but_complete    %" PRIu64 "\n", count[V_INCOHERENT_COMPLETE]);
			printf("  missing_from_store         %" PRIu64 "\n", count[V_MISSING]);
			printf("  coherent_with_late_slices  %" PRIu64 "  (complete only after the row was "
			       "closed)\n", late_coherent);
			printf("  unexpected/duplicate raw records  %" PRIu64 " / %" PRIu64 "\n", unexpected,
			       duplicates);
			printf("  store rows not triggered by the truth / of unknown traces  %" PRIu64
			       " / %" PRIu64 "\n", sc.untriggered, sc.unknown);
			for (s = 0; s < sizeof show / sizeof show[0]; s++) {
				if (!count[show[s]] || !list)
					continue;
				printf("%s (%s%" PRIu64 "):\n", vname[show[s]],
				       count[show[s]] > list ? "first of " : "", count[show[s]]);
				for (a = 0, shown = 0; a < n_results && shown < list; a++)
					if (results[a].v == show[s]) {
						print_result_text(&results[a]);
						shown++;
					}
			}
		}
		/* In JSON mode stdout stays one JSON document: the bench line goes to stderr. */
		fprintf(json ? stderr : stdout, "bench e2e-truth truth_lines=%zu traces=%zu triggered=%" PRIu64 " stored=%" PRIu64
		       " stored_coherent=%" PRIu64 " captured_coherent=%" PRIu64 " captured_pct=%.3f"
		       " false_coherent=%" PRIu64 " incoherent_correctly=%" PRIu64
		       " incoherent_but_complete=%" PRIu64 " missing_from_store=%" PRIu64
		       " coherent_with_late_slices=%" PRIu64 " pass=%d\n",
		       tr.n, traces, triggered, stored, stored_coherent, count[V_CAPTURED], pct,
		       count[V_FALSE_COHERENT], count[V_INCOHERENT_CORRECTLY],
		       count[V_INCOHERENT_COMPLETE], count[V_MISSING], late_coherent, pass);
	}
	for (a = 0; a < tr.n_files; a++)
		free(tr.files[a]);
	free(tr.files);
	free(tr.v);
	free(results);
	free(trig);
	return exit_code;
}
