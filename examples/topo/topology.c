/*
 * examples/topo/topology.c — the topology file: strict parsing, validation, and
 * the deterministic decisions every process derives from it.
 *
 * How it works: the file is read line by line; each non-blank, non-comment line
 * is one statement (host, service, api, call, entry) of whitespace-separated
 * tokens, checked as it is read, and every error names FILE:LINE. `call` lines
 * attach to the `api` line above them and name their callee by "service.api",
 * which may be declared further down, so callees are resolved after the whole
 * file is read. Then the service call graph must be acyclic (a service waiting,
 * through others, on its own fixed pool of workers could deadlock), and each
 * API's subtree size (call nodes of its full expansion) is computed once: it is
 * what numbers the nodes of a trace's call tree without any coordination, since
 * a child's node id is its parent's plus the sizes of its earlier siblings.
 *
 * Decisions (is an optional call made, does a call fail) hash the trace id with
 * the call's node id, so every run of the same trace ids does the same thing and
 * two calls of one service in one trace decide independently.
 */
#include "topo.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINE 1024
#define MAX_TOKENS 16

struct parser {
	struct topology *t;
	const char *file;
	int line;
	char *err;
	size_t errn;
	int cur_api; /* the api `call` lines attach to, -1 before the first */
};

static int fail(struct parser *p, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct parser *p, int line, const char *fmt, ...)
{
	va_list ap;
	int n = line > 0 ? snprintf(p->err, p->errn, "%s:%d: ", p->file, line)
			 : snprintf(p->err, p->errn, "%s: ", p->file);
	if (n < 0 || (size_t)n >= p->errn)
		return -1;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errn - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static int name_ok(const char *s)
{
	return topo_name_ok(s, strlen(s));
}

int topo_find_host(const struct topology *t, const char *name)
{
	int i;
	for (i = 0; i < t->n_hosts; i++)
		if (strcmp(t->hosts[i].name, name) == 0)
			return i;
	return -1;
}

int topo_find_service(const struct topology *t, const char *name)
{
	int i;
	for (i = 0; i < t->n_services; i++)
		if (strcmp(t->services[i].name, name) == 0)
			return i;
	return -1;
}

static int find_api(const struct topology *t, const char *name)
{
	int i;
	for (i = 0; i < t->n_apis; i++)
		if (strcmp(t->apis[i].name, name) == 0)
			return i;
	return -1;
}

/* "service.api" with both parts valid names. */
static int api_name_ok(const char *s)
{
	const char *dot = strchr(s, '.');
	char svc[TOPO_MAX_NAME];
	size_t n;
	if (!dot)
		return 0;
	n = (size_t)(dot - s);
	if (n == 0 || n >= sizeof svc)
		return 0;
	memcpy(svc, s, n);
	svc[n] = '\0';
	return name_ok(svc) && name_ok(dot + 1);
}

static int num_u64(struct parser *p, const char *key, const char *v, uint64_t lo, uint64_t hi,
		   uint64_t *out)
{
	if (topo_parse_u64(v, lo, hi, out) != 0)
		return fail(p, p->line, "%s '%s': want a whole number in %llu..%llu", key, v,
			    (unsigned long long)lo, (unsigned long long)hi);
	return 0;
}

static int num_prob(struct parser *p, const char *key, const char *v, double *out)
{
	if (topo_parse_double(v, 0.0, 1.0, out) != 0)
		return fail(p, p->line, "%s '%s': want a probability in [0, 1]", key, v);
	return 0;
}

/* host NAME agent ID pool POOL */
static int st_host(struct parser *p, char **tok, int n)
{
	struct topology *t = p->t;
	struct topo_host *h;
	uint64_t v;
	int i;
	if (n != 6 || strcmp(tok[2], "agent") != 0 || strcmp(tok[4], "pool") != 0)
		return fail(p, p->line, "want: host NAME agent ID pool /POOL");
	if (!name_ok(tok[1]))
		return fail(p, p->line, "host name '%s': want [a-z0-9_-], 1..31 chars", tok[1]);
	if (topo_find_host(t, tok[1]) >= 0)
		return fail(p, p->line, "host '%s' declared twice", tok[1]);
	if (t->n_hosts == TOPO_MAX_HOSTS)
		return fail(p, p->line, "more than %d hosts", TOPO_MAX_HOSTS);
	if (num_u64(p, "agent", tok[3], 1, UINT32_MAX, &v))
		return -1;
	if (tok[5][0] != '/' || strlen(tok[5]) < 2 || strlen(tok[5]) >= TOPO_MAX_POOL ||
	    strchr(tok[5] + 1, '/'))
		return fail(p, p->line, "pool '%s': want /NAME (one leading slash, at most %d chars)",
			    tok[5], TOPO_MAX_POOL - 1);
	for (i = 0; i < t->n_hosts; i++) {
		if (t->hosts[i].agent == v)
			return fail(p, p->line, "agent id %llu already belongs to host '%s' (line %d)",
				    (unsigned long long)v, t->hosts[i].name, t->hosts[i].line);
		if (strcmp(t->hosts[i].pool, tok[5]) == 0)
			return fail(p, p->line, "pool %s already belongs to host '%s' (line %d)",
				    tok[5], t->hosts[i].name, t->hosts[i].line);
	}
	h = &t->hosts[t->n_hosts++];
	snprintf(h->name, sizeof h->name, "%s", tok[1]);
	h->agent = (uint32_t)v;
	snprintf(h->pool, sizeof h->pool, "%s", tok[5]);
	h->line = p->line;
	return 0;
}

/* service NAME host HOST [error P] */
static int st_service(struct parser *p, char **tok, int n)
{
	struct topology *t = p->t;
	struct topo_service *s;
	int host, i;
	if (n < 4 || strcmp(tok[2], "host") != 0)
		return fail(p, p->line, "want: service NAME host HOST [error P]");
	if (!name_ok(tok[1]))
		return fail(p, p->line, "service name '%s': want [a-z0-9_-], 1..31 chars", tok[1]);
	if (topo_find_service(t, tok[1]) >= 0)
		return fail(p, p->line, "service '%s' declared twice", tok[1]);
	if (t->n_services == TOPO_MAX_SERVICES)
		return fail(p, p->line, "more than %d services", TOPO_MAX_SERVICES);
	if ((host = topo_find_host(t, tok[3])) < 0)
		return fail(p, p->line, "unknown host '%s' (declare it with a host line above)",
			    tok[3]);
	s = &t->services[t->n_services];
	memset(s, 0, sizeof *s);
	for (i = 4; i < n; i += 2) {
		if (i + 1 >= n)
			return fail(p, p->line, "'%s' needs a value", tok[i]);
		if (strcmp(tok[i], "error") == 0) {
			if (num_prob(p, "error", tok[i + 1], &s->error))
				return -1;
		} else {
			return fail(p, p->line, "unknown service setting '%s' (want error)", tok[i]);
		}
	}
	snprintf(s->name, sizeof s->name, "%s", tok[1]);
	s->host = host;
	s->line = p->line;
	t->n_services++;
	return 0;
}

/* api SERVICE.API [work spin|sleep|sleep-exp US] [bytes N] [records N] [fanout parallel|sequential] */
static int st_api(struct parser *p, char **tok, int n)
{
	struct topology *t = p->t;
	struct topo_api *a;
	char svc[TOPO_MAX_NAME];
	int i, have_records = 0, have[4] = {0, 0, 0, 0};
	uint64_t v;
	if (n < 2)
		return fail(p, p->line, "want: api SERVICE.API [work spin|sleep|sleep-exp US] [bytes N] "
				    "[records N] [fanout parallel|sequential]");
	if (!api_name_ok(tok[1]))
		return fail(p, p->line, "api name '%s': want SERVICE.API, both [a-z0-9_-] 1..31 chars",
			    tok[1]);
	if (find_api(t, tok[1]) >= 0)
		return fail(p, p->line, "api '%s' declared twice", tok[1]);
	if (t->n_apis == TOPO_MAX_APIS)
		return fail(p, p->line, "more than %d apis", TOPO_MAX_APIS);
	snprintf(svc, sizeof svc, "%.*s", (int)(strchr(tok[1], '.') - tok[1]), tok[1]);
	a = &t->apis[t->n_apis];
	memset(a, 0, sizeof *a);
	if ((a->service = topo_find_service(t, svc)) < 0)
		return fail(p, p->line, "unknown service '%s' (declare it with a service line above)",
			    svc);
	for (i = 2; i < n;) {
		if (strcmp(tok[i], "work") == 0) {
			if (have[0]++)
				return fail(p, p->line, "'work' given twice");
			if (i + 2 >= n)
				return fail(p, p->line, "want: work spin|sleep|sleep-exp MICROSECONDS");
			if (strcmp(tok[i + 1], "spin") == 0)
				a->work = TOPO_WORK_SPIN;
			else if (strcmp(tok[i + 1], "sleep") == 0)
				a->work = TOPO_WORK_SLEEP;
			else if (strcmp(tok[i + 1], "sleep-exp") == 0)
				a->work = TOPO_WORK_SLEEP_EXP;
			else
				return fail(p, p->line, "work '%s': want spin, sleep or sleep-exp",
					    tok[i + 1]);
			if (num_u64(p, "work", tok[i + 2], 0, TOPO_MAX_WORK_US, &v))
				return -1;
			a->work_us = (uint32_t)v;
			i += 3;
			continue;
		}
		if (i + 1 >= n)
			return fail(p, p->line, "'%s' needs a value", tok[i]);
		if (strcmp(tok[i], "bytes") == 0) {
			if (have[1]++)
				return fail(p, p->line, "'bytes' given twice");
			if (num_u64(p, "bytes", tok[i + 1], 0, TOPO_MAX_BYTES, &a->bytes))
				return -1;
		} else if (strcmp(tok[i], "records") == 0) {
			if (have[2]++)
				return fail(p, p->line, "'records' given twice");
			if (num_u64(p, "records", tok[i + 1], 1, 100000, &v))
				return -1;
			a->records = (uint32_t)v;
			have_records = 1;
		} else if (strcmp(tok[i], "fanout") == 0) {
			if (have[3]++)
				return fail(p, p->line, "'fanout' given twice");
			if (strcmp(tok[i + 1], "parallel") == 0)
				a->parallel = 1;
			else if (strcmp(tok[i + 1], "sequential") == 0)
				a->parallel = 0;
			else
				return fail(p, p->line, "fanout '%s': want parallel or sequential",
					    tok[i + 1]);
		} else {
			return fail(p, p->line, "unknown api setting '%s' (want work, bytes, records, "
					    "fanout)", tok[i]);
		}
		i += 2;
	}
	if (!have_records)
		a->records = a->bytes ? (uint32_t)((a->bytes + 4095) / 4096) : 0;
	if (have_records && a->bytes == 0)
		return fail(p, p->line, "'records' without 'bytes'");
	if (a->bytes && a->bytes < (uint64_t)a->records * TOPO_REC_HDR)
		return fail(p, p->line, "%u records need at least %u bytes (a %u-byte header each)",
			    a->records, a->records * TOPO_REC_HDR, TOPO_REC_HDR);
	snprintf(a->name, sizeof a->name, "%s", tok[1]);
	a->line = p->line;
	p->cur_api = t->n_apis++;
	return 0;
}

/* call SERVICE.API [prob P] */
static int st_call(struct parser *p, char **tok, int n)
{
	struct topo_api *a;
	struct topo_call *c;
	if (p->cur_api < 0)
		return fail(p, p->line, "a call line belongs under an api line");
	a = &p->t->apis[p->cur_api];
	if (n != 2 && !(n == 4 && strcmp(tok[2], "prob") == 0))
		return fail(p, p->line, "want: call SERVICE.API [prob P]");
	if (!api_name_ok(tok[1]))
		return fail(p, p->line, "callee '%s': want SERVICE.API", tok[1]);
	if (a->n_calls == TOPO_MAX_CALLS)
		return fail(p, p->line, "api '%s' has more than %d calls", a->name, TOPO_MAX_CALLS);
	c = &a->calls[a->n_calls];
	c->prob = 1.0;
	if (n == 4 && num_prob(p, "prob", tok[3], &c->prob))
		return -1;
	snprintf(c->target, sizeof c->target, "%s", tok[1]);
	c->api = -1;
	c->line = p->line;
	a->n_calls++;
	return 0;
}

/* entry SERVICE.API [weight W] */
static int st_entry(struct parser *p, char **tok, int n)
{
	struct topology *t = p->t;
	struct topo_entry *e;
	uint64_t w = 1;
	int a, i;
	if (n != 2 && !(n == 4 && strcmp(tok[2], "weight") == 0))
		return fail(p, p->line, "want: entry SERVICE.API [weight W]");
	if ((a = find_api(t, tok[1])) < 0)
		return fail(p, p->line, "unknown api '%s' (declare the api above its entry line)",
			    tok[1]);
	for (i = 0; i < t->n_entries; i++)
		if (t->entries[i].api == a)
			return fail(p, p->line, "entry '%s' given twice", tok[1]);
	if (t->n_entries == TOPO_MAX_ENTRIES)
		return fail(p, p->line, "more than %d entries", TOPO_MAX_ENTRIES);
	if (n == 4 && num_u64(p, "weight", tok[3], 1, 1000000, &w))
		return -1;
	e = &t->entries[t->n_entries++];
	e->api = a;
	e->weight = (uint32_t)w;
	e->line = p->line;
	t->total_weight += w;
	return 0;
}

static int statement(struct parser *p, char *line)
{
	char *tok[MAX_TOKENS + 1], *save = NULL, *s;
	int n = 0;
	for (s = strtok_r(line, " \t\r", &save); s; s = strtok_r(NULL, " \t\r", &save)) {
		if (n == MAX_TOKENS)
			return fail(p, p->line, "too many words (at most %d)", MAX_TOKENS);
		tok[n++] = s;
	}
	if (n == 0)
		return 0;
	if (strcmp(tok[0], "host") == 0)
		return st_host(p, tok, n);
	if (strcmp(tok[0], "service") == 0)
		return st_service(p, tok, n);
	if (strcmp(tok[0], "api") == 0)
		return st_api(p, tok, n);
	if (strcmp(tok[0], "call") == 0)
		return st_call(p, tok, n);
	if (strcmp(tok[0], "entry") == 0)
		return st_entry(p, tok, n);
	return fail(p, p->line, "unknown statement '%s' (want host, service, api, call or entry)",
		    tok[0]);
}

/* ----------------------------------------------------- validation ---- */

/* DFS over services: 0 white, 1 on the stack, 2 done. */
static int service_cycle(struct parser *p, int s, int *color, int *stack, int depth)
{
	const struct topology *t = p->t;
	int a, k;
	color[s] = 1;
	stack[depth] = s;
	for (a = 0; a < t->n_apis; a++) {
		if (t->apis[a].service != s)
			continue;
		for (k = 0; k < t->apis[a].n_calls; k++) {
			int callee = t->apis[t->apis[a].calls[k].api].service;
			if (color[callee] == 1) {
				char path[512];
				size_t len = 0;
				int i = depth;
				while (i > 0 && stack[i] != callee)
					i--;
				for (; i <= depth && len < sizeof path; i++)
					len += (size_t)snprintf(path + len, sizeof path - len, "%s -> ",
								t->services[stack[i]].name);
				if (len < sizeof path)
					snprintf(path + len, sizeof path - len, "%s",
						 t->services[callee].name);
				return fail(p, t->apis[a].calls[k].line,
					    "call to %s closes a cycle of services (%s); a service must "
					    "not call itself, directly or through others",
					    t->apis[a].calls[k].target, path);
			}
			if (color[callee] == 0 && service_cycle(p, callee, color, stack, depth + 1))
				return -1;
		}
	}
	color[s] = 2;
	return 0;
}

static int subtree(struct parser *p, int a)
{
	struct topo_api *x = &p->t->apis[a];
	uint64_t size = 1;
	int k;
	if (x->subtree)
		return 0;
	for (k = 0; k < x->n_calls; k++) {
		if (subtree(p, x->calls[k].api))
			return -1;
		size += p->t->apis[x->calls[k].api].subtree;
		if (size > TOPO_MAX_TREE)
			return fail(p, x->line, "api %s expands to more than %u call nodes", x->name,
				    TOPO_MAX_TREE);
	}
	x->subtree = (uint32_t)size;
	return 0;
}

static int validate(struct parser *p)
{
	struct topology *t = p->t;
	int color[TOPO_MAX_SERVICES], stack[TOPO_MAX_SERVICES + 1];
	int a, k, s;
	if (t->n_hosts == 0 || t->n_services == 0 || t->n_apis == 0 || t->n_entries == 0)
		return fail(p, 0, "a topology needs at least one host, service, api and entry "
				  "line (has %d, %d, %d, %d)", t->n_hosts, t->n_services, t->n_apis,
			    t->n_entries);
	for (a = 0; a < t->n_apis; a++)
		for (k = 0; k < t->apis[a].n_calls; k++) {
			struct topo_call *c = &t->apis[a].calls[k];
			if ((c->api = find_api(t, c->target)) < 0)
				return fail(p, c->line, "call to unknown api '%s'", c->target);
		}
	for (s = 0; s < t->n_services; s++) {
		int has = 0;
		for (a = 0; a < t->n_apis; a++)
			has |= t->apis[a].service == s;
		if (!has)
			return fail(p, t->services[s].line, "service '%s' has no api line",
				    t->services[s].name);
	}
	memset(color, 0, sizeof color);
	for (s = 0; s < t->n_services; s++)
		if (color[s] == 0 && service_cycle(p, s, color, stack, 0))
			return -1;
	for (a = 0; a < t->n_apis; a++)
		if (subtree(p, a))
			return -1;
	return 0;
}

int topo_load(const char *path, struct topology *t, char *err, size_t errn)
{
	struct parser p;
	char line[MAX_LINE + 2];
	FILE *f;
	uint32_t sum = 2166136261u;
	int rc = 0;

	memset(t, 0, sizeof *t);
	memset(&p, 0, sizeof p);
	p.t = t;
	p.file = path;
	p.err = err;
	p.errn = errn;
	p.cur_api = -1;
	snprintf(t->path, sizeof t->path, "%s", path);
	if (!(f = fopen(path, "r")))
		return fail(&p, 0, "%s", strerror(errno));
	while (fgets(line, sizeof line, f)) {
		size_t n = strlen(line), i;
		char *hash;
		p.line++;
		for (i = 0; i < n; i++)
			sum = (sum ^ (unsigned char)line[i]) * 16777619u;
		if (n > MAX_LINE || (n == MAX_LINE + 1 && line[n - 1] != '\n')) {
			rc = fail(&p, p.line, "line longer than %d characters", MAX_LINE);
			break;
		}
		if (n && line[n - 1] == '\n')
			line[--n] = '\0';
		for (i = 0; i < n; i++)
			if (((unsigned char)line[i] < 0x20 && line[i] != '\t' && line[i] != '\r') ||
			    line[i] == 0x7f) {
				rc = fail(&p, p.line, "control character 0x%02x", (unsigned char)line[i]);
				break;
			}
		if (rc)
			break;
		if ((hash = strchr(line, '#')))
			*hash = '\0';
		if ((rc = statement(&p, line)) != 0)
			break;
	}
	if (!rc && ferror(f))
		rc = fail(&p, 0, "read error: %s", strerror(errno));
	fclose(f);
	if (!rc)
		rc = validate(&p);
	t->checksum = sum;
	return rc;
}

/* ------------------------------------------------------ decisions ---- */

uint32_t topo_child_node(const struct topology *t, int a, uint32_t node, int k)
{
	uint32_t id = node + 1;
	int j;
	for (j = 0; j < k; j++)
		id += t->apis[t->apis[a].calls[j].api].subtree;
	return id;
}

int topo_call_made(const struct topology *t, int a, uint32_t node, int k, uint64_t hi,
		   uint64_t lo)
{
	double prob = t->apis[a].calls[k].prob;
	uint32_t child = topo_child_node(t, a, node, k);
	if (prob >= 1.0)
		return 1;
	return topo_unit(topo_mix64(lo ^ topo_mix64(hi ^ (0xCA11ull << 32 | child)))) < prob;
}

int topo_fails(uint32_t node, uint64_t hi, uint64_t lo, double error)
{
	if (error <= 0.0)
		return 0;
	return topo_unit(topo_mix64(lo ^ topo_mix64(hi ^ (0xE770ull << 32 | node)))) < error;
}

int topo_is_edge(uint64_t hi, uint64_t lo, double pct)
{
	if (pct <= 0.0)
		return 0;
	return topo_unit(topo_mix64(lo ^ topo_mix64(hi ^ 0xED6Eull))) * 100.0 < pct;
}
