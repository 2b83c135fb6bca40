/*
 * cmd_weave.c — `retrace weave FILE`: reconstruct, offline, the links that hops
 * without context propagation cut, in an OTLP/JSON file.
 *
 * The file is read whole with jansson as a sequence of JSON values (one document, or
 * one ExportTraceServiceRequest per line, as `retrace export --format otlp-json`
 * writes). Every span is indexed by (trace id, span id); a span whose parent is in
 * the file marks that parent as having a child. Then:
 *
 *   - the call graph: every coherent link (a CLIENT span whose child runs in another
 *     service) teaches "caller service + client operation -> callee service"; a
 *     --graph file may add edges; a client's peer.service attribute wins over both;
 *   - the open hops: a CLIENT span without a child span in its trace;
 *   - the candidates: root spans (no parent) of the callee service, of kind SERVER,
 *     CONSUMER or unspecified;
 *   - per callee, the open clients and the callee's roots go through rt_weave_hop
 *     (weave/weave.h), and each link joins the server's trace to the client's in a
 *     trace-id union-find, whose roots name the reconstructed end-to-end traces.
 *
 * The output lists, per callee service, the links made, the calls left unmatched and
 * their confidences, then every reconstructed trace with its inferred links. --out
 * writes the file back with the links applied: member traces take the group's trace
 * id, a linked server root gets the client span as its parent and the attributes
 * retrace.weave.inferred = true and retrace.weave.confidence.
 *
 * --store LOCATOR reads the traces of a store instead (step by step: every stored
 * trace is decoded from its slices, coordinator/decode.h, and written as one
 * OTLP/JSON document by coordinator/export.h, the very bytes `retrace export`
 * would give), so the store and the file go through one reader.
 *
 * Why jansson: the reader needs a DOM it can edit and write back for --out, and
 * jansson is already a Debian package of this project (the export tests use it);
 * select/'s own strict parser is read-only and internal to that pure library.
 */
#include "cmd_weave.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weave.h"
#include "wire.h"
#ifdef RETRACE_WEAVE_STORE
#include "decode.h"
#include "export.h"
#include "store.h"
#endif

#define NO_SERVICE UINT32_MAX
#define KIND_UNSPECIFIED 0
#define KIND_SERVER 2
#define KIND_CLIENT 3
#define KIND_CONSUMER 5

typedef struct wspan {
	uint64_t trace_hi, trace_lo, span_id, parent_id;
	int64_t start_ns, end_ns;
	int kind;
	uint32_t service, peer; /* interned names; peer = peer.service or NO_SERVICE */
	uint32_t callee;        /* open client spans: the service called, or NO_SERVICE */
	uint64_t thread;
	uint64_t conn;          /* rt_wire_conn_id of its net.sock.* attributes, or 0 */
	const char *name;
	json_t *obj;            /* the span object, for --out */
	int has_child, has_parent_here;
} wspan;

typedef struct edge {
	uint32_t caller, callee;
	const char *op; /* NULL: any operation */
	char *owned;    /* op when it came from --graph (freed with the run) */
} edge;

typedef struct weave_run {
	json_t **docs;
	size_t n_docs, cap_docs;
	wspan *spans;
	size_t n_spans, cap_spans;
	char **services;
	uint32_t n_services, cap_services;
	edge *edges;
	size_t n_edges, cap_edges;
	size_t *by_id; /* span indices sorted by (trace, span id) */
	size_t bad_spans;
} weave_run;

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 64;
	while (c < need)
		c *= 2;
	void *n = realloc(*p, c * elem);
	if (!n)
		return -1;
	*p = n;
	*cap = c;
	return 0;
}

static uint32_t intern(weave_run *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_services; i++)
		if (!strcmp(r->services[i], name))
			return i;
	size_t cap = r->cap_services;
	if (grow((void **)&r->services, &cap, (size_t)r->n_services + 1, sizeof *r->services) < 0)
		return NO_SERVICE;
	r->cap_services = (uint32_t)cap;
	char *copy = strdup(name);
	if (!copy)
		return NO_SERVICE;
	r->services[r->n_services] = copy;
	return r->n_services++;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* digits hex digits into a 64-bit value; -1 when malformed. */
static int parse_hex(const char *s, size_t digits, uint64_t *out)
{
	uint64_t v = 0;
	for (size_t i = 0; i < digits; i++) {
		int h = hex_value(s[i]);
		if (h < 0)
			return -1;
		v = v << 4 | (uint64_t)h;
	}
	*out = v;
	return 0;
}

static int parse_trace_id(const char *s, uint64_t *hi, uint64_t *lo)
{
	return s && strlen(s) == 32 && !parse_hex(s, 16, hi) && !parse_hex(s + 16, 16, lo) ? 0 : -1;
}

static int parse_span_id(const char *s, uint64_t *id)
{
	return s && strlen(s) == 16 && !parse_hex(s, 16, id) ? 0 : -1;
}

/* OTLP writes 64-bit integers as decimal strings; numbers are accepted too. */
static int json_i64(json_t *v, int64_t *out)
{
	if (json_is_integer(v)) {
		*out = (int64_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return -1;
	const char *s = json_string_value(v);
	char *end;
	errno = 0;
	long long x = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		return -1;
	*out = x;
	return 0;
}

static int span_kind(json_t *v)
{
	if (json_is_integer(v))
		return (int)json_integer_value(v);
	if (json_is_string(v)) {
		static const char *names[] = {"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL",
					      "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT",
					      "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"};
		for (int i = 0; i < 6; i++)
			if (!strcmp(json_string_value(v), names[i]))
				return i;
	}
	return KIND_UNSPECIFIED;
}

/* The value of attribute `key` in an OTLP attribute list, or NULL. */
static json_t *attr_value(json_t *attrs, const char *key)
{
	size_t i;
	json_t *a;
	json_array_foreach(attrs, i, a) {
		const char *k = json_string_value(json_object_get(a, "key"));
		if (k && !strcmp(k, key))
			return json_object_get(a, "value");
	}
	return NULL;
}

static const char *attr_string(json_t *attrs, const char *key)
{
	return json_string_value(json_object_get(attr_value(attrs, key), "stringValue"));
}

/* An integer attribute in 1..65535 (OTLP/JSON writes int64 as a string or a
 * number), else 0. */
static uint64_t attr_port(json_t *attrs, const char *key)
{
	int64_t v = 0;
	json_t *x = attr_value(attrs, key);
	return x && json_i64(json_object_get(x, "intValue"), &v) == 0 && v > 0 && v <= 65535
		       ? (uint64_t)v
		       : 0;
}

static int read_span(weave_run *r, json_t *js, uint32_t service)
{
	wspan s = {.service = service, .peer = NO_SERVICE, .obj = js};
	const char *parent = json_string_value(json_object_get(js, "parentSpanId"));
	if (parse_trace_id(json_string_value(json_object_get(js, "traceId")), &s.trace_hi,
			   &s.trace_lo) < 0 ||
	    parse_span_id(json_string_value(json_object_get(js, "spanId")), &s.span_id) < 0 ||
	    (parent && *parent && parse_span_id(parent, &s.parent_id) < 0) ||
	    json_i64(json_object_get(js, "startTimeUnixNano"), &s.start_ns) < 0 ||
	    json_i64(json_object_get(js, "endTimeUnixNano"), &s.end_ns) < 0) {
		r->bad_spans++;
		return 0;
	}
	s.kind = span_kind(json_object_get(js, "kind"));
	s.name = json_string_value(json_object_get(js, "name"));
	if (!s.name)
		s.name = "";
	json_t *attrs = json_object_get(js, "attributes");
	const char *peer = attr_string(attrs, "peer.service");
	if (peer && (s.peer = intern(r, peer)) == NO_SERVICE)
		return -1;
	int64_t thread = 0;
	json_t *tv = attr_value(attrs, "thread.id");
	if (tv && json_i64(json_object_get(tv, "intValue"), &thread) == 0 && thread > 0)
		s.thread = (uint64_t)thread;
	s.conn = rt_wire_conn_id(s.kind == KIND_CLIENT, attr_string(attrs, "net.sock.host.addr"),
				 attr_port(attrs, "net.sock.host.port"),
				 attr_string(attrs, "net.sock.peer.addr"),
				 attr_port(attrs, "net.sock.peer.port"));
	if (grow((void **)&r->spans, &r->cap_spans, r->n_spans + 1, sizeof *r->spans) < 0)
		return -1;
	r->spans[r->n_spans++] = s;
	return 0;
}

static int read_document(weave_run *r, json_t *doc)
{
	size_t i, j, k;
	json_t *rs, *ss, *sp;
	json_array_foreach(json_object_get(doc, "resourceSpans"), i, rs) {
		const char *svc = attr_string(
			json_object_get(json_object_get(rs, "resource"), "attributes"), "service.name");
		uint32_t service = intern(r, svc ? svc : "unknown_service");
		if (service == NO_SERVICE)
			return -1;
		json_t *scopes = json_object_get(rs, "scopeSpans");
		if (!scopes)
			scopes = json_object_get(rs, "instrumentationLibrarySpans");
		json_array_foreach(scopes, j, ss) {
			json_array_foreach(json_object_get(ss, "spans"), k, sp) {
				if (read_span(r, sp, service) < 0)
					return -1;
			}
		}
	}
	return 0;
}

/* Keep one parsed document of the run and index its spans. */
static int add_document(weave_run *r, json_t *doc)
{
	if (grow((void **)&r->docs, &r->cap_docs, r->n_docs + 1, sizeof *r->docs) < 0) {
		json_decref(doc);
		return -1;
	}
	r->docs[r->n_docs++] = doc;
	return read_document(r, doc);
}

static int read_file(weave_run *r, const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "retrace weave: %s: %s\n", path, strerror(errno));
		return -1;
	}
	char *buf = NULL;
	size_t len = 0, cap = 0, n;
	char chunk[65536];
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
		if (grow((void **)&buf, &cap, len + n, 1) < 0) {
			fclose(f);
			free(buf);
			fprintf(stderr, "retrace weave: out of memory\n");
			return -1;
		}
		memcpy(buf + len, chunk, n);
		len += n;
	}
	fclose(f);
	size_t pos = 0;
	int rc = 0;
	while (rc == 0) {
		while (pos < len && (buf[pos] == ' ' || buf[pos] == '\n' || buf[pos] == '\r' ||
				     buf[pos] == '\t'))
			pos++;
		if (pos >= len)
			break;
		json_error_t err;
		json_t *doc = json_loadb(buf + pos, len - pos, JSON_DISABLE_EOF_CHECK, &err);
		if (!doc || !json_is_object(doc)) {
			fprintf(stderr, "retrace weave: %s: byte %zu: %s\n", path,
				pos + (doc ? 0 : (size_t)err.position), doc ? "not an object" : err.text);
			json_decref(doc);
			rc = -1;
			break;
		}
		pos += (size_t)err.position;
		rc = add_document(r, doc);
		if (rc < 0)
			fprintf(stderr, "retrace weave: out of memory\n");
	}
	free(buf);
	return rc;
}

#ifdef RETRACE_WEAVE_STORE
struct store_refs {
	uint64_t *v; /* hi, lo pairs */
	size_t n, cap;
};

static int store_ref(void *arg, const struct rt_store_trace *t)
{
	struct store_refs *x = arg;
	if (grow((void **)&x->v, &x->cap, 2 * (x->n + 1), sizeof *x->v) < 0)
		return -1;
	x->v[2 * x->n] = t->trace_hi;
	x->v[2 * x->n + 1] = t->trace_lo;
	x->n++;
	return 0;
}

/* Every trace of the store, as retrace export --format otlp-json writes it. */
static int read_store(weave_run *r, const char *locator, size_t *undecodable)
{
	struct rt_store_options o = {.path = locator, .readonly = 1};
	struct rt_store_query q = {0};
	struct rt_store *st = NULL;
	struct store_refs refs = {0};
	struct rt_wire_buf buf = {0};
	char err[256];
	int rc = -1;
	if (rt_store_open(&st, &o) != 0) {
		fprintf(stderr, "retrace weave: %s: %s\n", locator, rt_store_errmsg(NULL));
		return -1;
	}
	if (rt_store_list(st, &q, store_ref, &refs) != 0) {
		fprintf(stderr, "retrace weave: %s: cannot list traces\n", locator);
		goto out;
	}
	for (size_t i = 0; i < refs.n; i++) {
		struct rt_decoded_trace dt;
		json_error_t jerr;
		json_t *doc;
		if (rt_decode_stored(st, refs.v[2 * i], refs.v[2 * i + 1], &dt, err, sizeof err) != 0) {
			(*undecodable)++; /* counted, the rest still weaves */
			continue;
		}
		buf.len = 0;
		if (rt_export_write(RT_EXPORT_OTLP_JSON, &dt, 1, &buf) != 0) {
			rt_decoded_trace_free(&dt);
			fprintf(stderr, "retrace weave: out of memory\n");
			goto out;
		}
		rt_decoded_trace_free(&dt);
		if (!(doc = json_loadb((const char *)buf.data, buf.len, 0, &jerr)) ||
		    add_document(r, doc) < 0) {
			fprintf(stderr, "retrace weave: %s\n", doc ? "out of memory" : jerr.text);
			goto out;
		}
	}
	rc = 0;
out:
	free(refs.v);
	rt_wire_buf_free(&buf);
	rt_store_close(st);
	return rc;
}
#endif

/* ------------------------------------------------------------ index, graph ---- */

/* qsort_r (glibc, _GNU_SOURCE) carries the run instead of a global. */
static int cmp_id(const void *a, const void *b, void *ctx)
{
	const weave_run *r = ctx;
	const wspan *x = &r->spans[*(const size_t *)a], *y = &r->spans[*(const size_t *)b];
	if (x->trace_hi != y->trace_hi)
		return x->trace_hi < y->trace_hi ? -1 : 1;
	if (x->trace_lo != y->trace_lo)
		return x->trace_lo < y->trace_lo ? -1 : 1;
	return (x->span_id > y->span_id) - (x->span_id < y->span_id);
}

static ptrdiff_t find_span(const weave_run *r, uint64_t hi, uint64_t lo, uint64_t id)
{
	size_t a = 0, b = r->n_spans;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		const wspan *s = &r->spans[r->by_id[m]];
		int less = s->trace_hi != hi ? s->trace_hi < hi
			 : s->trace_lo != lo ? s->trace_lo < lo
					     : s->span_id < id;
		if (less)
			a = m + 1;
		else
			b = m;
	}
	if (a < r->n_spans) {
		const wspan *s = &r->spans[r->by_id[a]];
		if (s->trace_hi == hi && s->trace_lo == lo && s->span_id == id)
			return (ptrdiff_t)r->by_id[a];
	}
	return -1;
}

/* Add an edge once; `owned` (may be NULL) is freed here when not kept. */
static int add_edge(weave_run *r, uint32_t caller, uint32_t callee, const char *op, char *owned)
{
	for (size_t i = 0; i < r->n_edges; i++)
		if (r->edges[i].caller == caller && r->edges[i].callee == callee &&
		    (r->edges[i].op == op || (r->edges[i].op && op && !strcmp(r->edges[i].op, op)))) {
			free(owned);
			return 0;
		}
	if (grow((void **)&r->edges, &r->cap_edges, r->n_edges + 1, sizeof *r->edges) < 0) {
		free(owned);
		return -1;
	}
	r->edges[r->n_edges++] = (edge){caller, callee, op, owned};
	return 0;
}

static int index_spans(weave_run *r)
{
	r->by_id = malloc((r->n_spans ? r->n_spans : 1) * sizeof *r->by_id);
	if (!r->by_id)
		return -1;
	for (size_t i = 0; i < r->n_spans; i++)
		r->by_id[i] = i;
	qsort_r(r->by_id, r->n_spans, sizeof *r->by_id, cmp_id, r);
	for (size_t i = 0; i < r->n_spans; i++) {
		wspan *s = &r->spans[i];
		if (!s->parent_id)
			continue;
		ptrdiff_t p = find_span(r, s->trace_hi, s->trace_lo, s->parent_id);
		if (p < 0)
			continue;
		s->has_parent_here = 1;
		wspan *ps = &r->spans[p];
		ps->has_child = 1;
		/* a coherent hop teaches the call graph */
		if (ps->kind == KIND_CLIENT && ps->service != s->service &&
		    add_edge(r, ps->service, s->service, ps->name, NULL) < 0)
			return -1;
	}
	return 0;
}

/* --graph FILE: "CALLER CALLEE" or "CALLER OPERATION CALLEE" per line, '#' comments. */
static int read_graph(weave_run *r, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "retrace weave: %s: %s\n", path, strerror(errno));
		return -1;
	}
	char line[1024], a[256], b[512], c[256];
	int lineno = 0, rc = 0;
	while (rc == 0 && fgets(line, sizeof line, f)) {
		lineno++;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		int n = sscanf(line, "%255s %511s %255s", a, b, c);
		if (n <= 0)
			continue;
		if (n < 2) {
			fprintf(stderr, "retrace weave: %s:%d: want CALLER [OPERATION] CALLEE\n", path,
				lineno);
			rc = -1;
			break;
		}
		uint32_t caller = intern(r, a), callee = intern(r, n == 3 ? c : b);
		char *op = n == 3 ? strdup(b) : NULL;
		if (caller == NO_SERVICE || callee == NO_SERVICE || (n == 3 && !op)) {
			free(op);
			rc = -1;
		} else if (add_edge(r, caller, callee, op, op) < 0) {
			rc = -1;
		}
	}
	fclose(f);
	return rc;
}

/* The callee of an open client span: peer.service, else an edge for its operation,
 * else the caller's only callee; NO_SERVICE when unknown or ambiguous. */
static uint32_t callee_of(const weave_run *r, const wspan *c)
{
	if (c->peer != NO_SERVICE)
		return c->peer;
	uint32_t only = NO_SERVICE;
	int many = 0;
	for (size_t i = 0; i < r->n_edges; i++) {
		const edge *e = &r->edges[i];
		if (e->caller != c->service)
			continue;
		if (e->op && !strcmp(e->op, c->name))
			return e->callee;
		if (only != NO_SERVICE && only != e->callee)
			many = 1;
		only = e->callee;
	}
	return many ? NO_SERVICE : only;
}

/* ------------------------------------------------------------ weaving ---- */

typedef struct inferred {
	size_t client, server; /* span indices */
	double confidence;
} inferred;

typedef struct service_summary {
	size_t clients, roots, linked, unmatched;
	double conf_sum, conf_min;
	rt_weave_model model;
} service_summary;

static void hex_id(char *out, uint64_t hi, uint64_t lo, int full)
{
	if (full)
		sprintf(out, "%016" PRIx64 "%016" PRIx64, hi, lo);
	else
		sprintf(out, "%016" PRIx64, lo);
}

static void root_of(rt_weave_groups *g, const wspan *s, uint64_t *hi, uint64_t *lo)
{
	rt_weave_groups_root(g, s->trace_hi, s->trace_lo, hi, lo);
}

typedef struct order_ctx {
	const weave_run *r;
	rt_weave_groups *g;
} order_ctx;

/* Links ordered by their reconstructed trace, then by the client's start. */
static int cmp_inferred_root(const void *a, const void *b, void *ctx)
{
	const inferred *x = a, *y = b;
	const order_ctx *o = ctx;
	const weave_run *cmp_run = o->r;
	uint64_t xh, xl, yh, yl;
	root_of(o->g, &cmp_run->spans[x->client], &xh, &xl);
	root_of(o->g, &cmp_run->spans[y->client], &yh, &yl);
	if (xh != yh)
		return xh < yh ? -1 : 1;
	if (xl != yl)
		return xl < yl ? -1 : 1;
	int64_t xs = cmp_run->spans[x->client].start_ns, ys = cmp_run->spans[y->client].start_ns;
	return (xs > ys) - (xs < ys);
}

static void set_attr(json_t *span, const char *key, json_t *value)
{
	json_t *attrs = json_object_get(span, "attributes");
	if (!json_is_array(attrs)) {
		attrs = json_array();
		json_object_set_new(span, "attributes", attrs);
	}
	json_t *a = json_object();
	json_object_set_new(a, "key", json_string(key));
	json_object_set_new(a, "value", value);
	json_array_append_new(attrs, a);
}

static int write_out(weave_run *r, rt_weave_groups *g, const inferred *links, size_t n_links,
		     const char *path)
{
	char id[40];
	for (size_t i = 0; i < r->n_spans; i++) {
		wspan *s = &r->spans[i];
		uint64_t hi, lo;
		root_of(g, s, &hi, &lo);
		if (hi != s->trace_hi || lo != s->trace_lo) {
			hex_id(id, hi, lo, 1);
			json_object_set_new(s->obj, "traceId", json_string(id));
		}
	}
	for (size_t i = 0; i < n_links; i++) {
		json_t *sv = r->spans[links[i].server].obj;
		hex_id(id, 0, r->spans[links[i].client].span_id, 0);
		json_object_set_new(sv, "parentSpanId", json_string(id));
		json_t *t = json_object();
		json_object_set_new(t, "boolValue", json_true());
		set_attr(sv, "retrace.weave.inferred", t);
		json_t *c = json_object();
		json_object_set_new(c, "doubleValue", json_real(links[i].confidence));
		set_attr(sv, "retrace.weave.confidence", c);
	}
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "retrace weave: %s: %s\n", path, strerror(errno));
		return -1;
	}
	int rc = 0;
	for (size_t d = 0; d < r->n_docs && rc == 0; d++)
		if (json_dumpf(r->docs[d], f, JSON_COMPACT) < 0 || fputc('\n', f) == EOF)
			rc = -1;
	if (fclose(f) != 0 || rc < 0) {
		fprintf(stderr, "retrace weave: %s: write failed\n", path);
		return -1;
	}
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: retrace weave [options] FILE\n"
		"       retrace weave [options] --store LOCATOR\n"
		"Reconstruct the links that hops without context propagation cut, in an\n"
		"OTLP/JSON file (one document, or one request per line) or in every trace\n"
		"of a store, by timing.\n"
		"  --store LOCATOR   read the store's traces (a SQLite path or a ClickHouse URL)\n"
		"  --graph FILE      call-graph edges, \"CALLER [OPERATION] CALLEE\" per line\n"
		"                    (added to those learnt from the file's coherent hops;\n"
		"                    a client's peer.service attribute wins over both)\n"
		"  --skew NS         clock skew allowed between hosts, in ns (default 0)\n"
		"  --out FILE        write the file back with the links applied\n"
		"  --summary         print only the per-service lines\n");
}

static void free_run(weave_run *r)
{
	for (size_t d = 0; d < r->n_docs; d++)
		json_decref(r->docs[d]);
	free(r->docs);
	for (uint32_t i = 0; i < r->n_services; i++)
		free(r->services[i]);
	free(r->services);
	for (size_t i = 0; i < r->n_edges; i++)
		free(r->edges[i].owned);
	free(r->edges);
	free(r->spans);
	free(r->by_id);
}

int cli_cmd_weave(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"graph", required_argument, NULL, 'g'}, {"skew", required_argument, NULL, 's'},
		{"out", required_argument, NULL, 'o'},   {"summary", no_argument, NULL, 'S'},
		{"store", required_argument, NULL, 'D'},
		{"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
	const char *graph = NULL, *out = NULL, *store = NULL;
	int summary = 0, ch;
	rt_weave_opts opts;
	rt_weave_opts_default(&opts);
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'g': graph = optarg; break;
		case 'o': out = optarg; break;
		case 'S': summary = 1; break;
		case 'D': store = optarg; break;
		case 's': {
			char *end;
			long long v = strtoll(optarg, &end, 10);
			if (*end || v < 0) {
				fprintf(stderr, "retrace weave: --skew wants nanoseconds >= 0\n");
				return 2;
			}
			opts.skew_ns = v;
			break;
		}
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - (store ? 0 : 1)) {
		usage(stderr);
		return 2;
	}
#ifndef RETRACE_WEAVE_STORE
	if (store) {
		fprintf(stderr, "retrace weave: --store: built without the store\n");
		return 2;
	}
#endif
	const char *path = store ? store : argv[optind];
	weave_run r = {0};
	rt_weave_groups *g = NULL;
	inferred *links = NULL;
	service_summary *sum = NULL;
	size_t *cl = NULL, *sv = NULL;
	rt_weave_span *cspans = NULL, *sspans = NULL;
	rt_weave_link *res = NULL;
	size_t n_links = 0, open = 0, unknown_callee = 0, traces_before = 0, undecodable = 0;
	int rc = 1;

#ifdef RETRACE_WEAVE_STORE
	if (store ? read_store(&r, store, &undecodable) < 0 : read_file(&r, path) < 0)
		goto done;
#else
	if (read_file(&r, path) < 0)
		goto done;
#endif
	if (index_spans(&r) < 0 || (graph && read_graph(&r, graph) < 0))
		goto done;
	g = rt_weave_groups_new(r.n_spans);
	sum = calloc(r.n_services ? r.n_services : 1, sizeof *sum);
	links = malloc((r.n_spans ? r.n_spans : 1) * sizeof *links);
	cl = malloc((r.n_spans ? r.n_spans : 1) * sizeof *cl);
	sv = malloc((r.n_spans ? r.n_spans : 1) * sizeof *sv);
	cspans = malloc((r.n_spans ? r.n_spans : 1) * sizeof *cspans);
	sspans = malloc((r.n_spans ? r.n_spans : 1) * sizeof *sspans);
	res = malloc((r.n_spans ? r.n_spans : 1) * sizeof *res);
	if (!g || !sum || !links || !cl || !sv || !cspans || !sspans || !res) {
		fprintf(stderr, "retrace weave: out of memory\n");
		goto done;
	}
	for (size_t i = 0; i < r.n_spans; i++) {
		const wspan *a = i ? &r.spans[r.by_id[i - 1]] : NULL, *b = &r.spans[r.by_id[i]];
		traces_before += !a || a->trace_hi != b->trace_hi || a->trace_lo != b->trace_lo;
		wspan *s = &r.spans[i];
		s->callee = NO_SERVICE;
		if (s->kind == KIND_CLIENT && !s->has_child) {
			open++;
			s->callee = callee_of(&r, s);
			unknown_callee += s->callee == NO_SERVICE;
		}
	}
	for (uint32_t b = 0; b < r.n_services; b++) {
		size_t nc = 0, ns = 0;
		for (size_t i = 0; i < r.n_spans; i++) {
			const wspan *s = &r.spans[i];
			if (s->callee == b) {
				cspans[nc] = (rt_weave_span){s->span_id, s->trace_hi, s->trace_lo,
							     s->start_ns, s->end_ns, s->thread, s->conn};
				cl[nc++] = i;
			}
			if (s->service == b && !s->parent_id &&
			    (s->kind == KIND_SERVER || s->kind == KIND_CONSUMER ||
			     s->kind == KIND_UNSPECIFIED)) {
				sspans[ns] = (rt_weave_span){s->span_id, s->trace_hi, s->trace_lo,
							     s->start_ns, s->end_ns, s->thread, s->conn};
				sv[ns++] = i;
			}
		}
		if (!nc)
			continue;
		rt_weave_stats st;
		if (rt_weave_hop(&opts, cspans, nc, sspans, ns, res, &st) < 0) {
			fprintf(stderr, "retrace weave: out of memory\n");
			goto done;
		}
		service_summary *ss = &sum[b];
		ss->clients = nc;
		ss->roots = ns;
		ss->conf_min = 1;
		ss->model = st.model;
		for (size_t k = 0; k < nc; k++) {
			ss->conf_sum += res[k].confidence;
			if (res[k].confidence < ss->conf_min)
				ss->conf_min = res[k].confidence;
			if (res[k].server == RT_WEAVE_NONE) {
				ss->unmatched++;
				continue;
			}
			ss->linked++;
			const wspan *c = &r.spans[cl[k]], *s = &r.spans[sv[res[k].server]];
			links[n_links++] = (inferred){cl[k], sv[res[k].server], res[k].confidence};
			if (rt_weave_groups_link(g, c->trace_hi, c->trace_lo, s->trace_hi, s->trace_lo) < 0) {
				fprintf(stderr, "retrace weave: out of memory\n");
				goto done;
			}
		}
	}

	printf("weave %s: spans=%zu traces=%zu open_client_spans=%zu unknown_callee=%zu "
	       "inferred_links=%zu bad_spans=%zu",
	       path, r.n_spans, traces_before, open, unknown_callee, n_links, r.bad_spans);
	if (store)
		printf(" undecodable_traces=%zu", undecodable);
	printf("\n");
	for (uint32_t b = 0; b < r.n_services; b++) {
		const service_summary *ss = &sum[b];
		if (!ss->clients)
			continue;
		printf("service %s: open_calls=%zu roots=%zu linked=%zu unmatched=%zu "
		       "mean_confidence=%.3f min_confidence=%.3f request_delay_us=%.1f "
		       "response_delay_us=%.1f\n",
		       r.services[b], ss->clients, ss->roots, ss->linked, ss->unmatched,
		       ss->conf_sum / (double)ss->clients, ss->conf_min,
		       ss->model.request.k ? ss->model.request.mean[0] / 1e3 : 0,
		       ss->model.response.k ? ss->model.response.mean[0] / 1e3 : 0);
	}
	if (!summary && n_links) {
		order_ctx oc = {&r, g};
		qsort_r(links, n_links, sizeof *links, cmp_inferred_root, &oc);
		char root[40], cid[20], sid[20], stid[40];
		uint64_t last_hi = 0, last_lo = 0;
		for (size_t i = 0; i < n_links; i++) {
			const wspan *c = &r.spans[links[i].client], *s = &r.spans[links[i].server];
			uint64_t hi, lo;
			root_of(g, c, &hi, &lo);
			if (i == 0 || hi != last_hi || lo != last_lo) {
				hex_id(root, hi, lo, 1);
				printf("trace %s\n", root);
				last_hi = hi;
				last_lo = lo;
			}
			hex_id(cid, 0, c->span_id, 0);
			hex_id(sid, 0, s->span_id, 0);
			hex_id(stid, s->trace_hi, s->trace_lo, 1);
			printf("  %s %s \"%s\" -> %s %s \"%s\" (trace %s) confidence=%.3f\n",
			       r.services[c->service], cid, c->name, r.services[s->service], sid, s->name,
			       stid, links[i].confidence);
		}
	}
	if (out && write_out(&r, g, links, n_links, out) < 0)
		goto done;
	rc = 0;
done:
	rt_weave_groups_free(g);
	free(links);
	free(sum);
	free(cl);
	free(sv);
	free(cspans);
	free(sspans);
	free(res);
	free_run(&r);
	return rc;
}
