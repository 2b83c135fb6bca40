/*
 * topo_format.h — the ground-truth formats of retrace-topo, shared by the app that
 * writes them (examples/topo) and the checker that reads them (tools/truth).
 *
 * Owns two formats, header-only so writer and reader cannot drift apart:
 *
 *   1. Raw records. Every raw retrace_tracepoint record a retrace-topo service
 *      writes is a pure function of (trace id, service, call node, record index,
 *      length): a 32-byte header
 *          "TOPO" | trace hi (u64 LE) | trace lo (u64 LE) | node (u32 LE)
 *          | index (u32 LE) | service hash (u32 LE)
 *      followed by pattern bytes derived from the same values. The first byte
 *      'T' is not 0xC1, so a record is never mistaken for a tracer event
 *      (shm/events.h). The lengths of a call's records follow from the call's
 *      record count and byte total (topo_record_len), which the truth line names.
 *
 *   2. Truth lines. One line per request a service handled (examples/README.md):
 *          <trace 32 hex> <service> <host> agent=<id> node=<n> parent=<16 hex>
 *          spans=<16 hex>[,<16 hex>...] records=<n> bytes=<n> trigger=<id> status=<s>
 *      spans lists the SERVER span first, then one CLIENT span per downstream call
 *      made; parent is the caller's span (0 at the entry service); trigger is the
 *      trigger id this service fired for the request (0 none, 1 edge case at the
 *      entry, 2 injected exception); status is ok, failed (injected here) or
 *      downstream (a call below failed).
 *
 * Everything here is pure computation on its arguments: no I/O, no allocation.
 */
#ifndef RETRACE_TOPO_FORMAT_H
#define RETRACE_TOPO_FORMAT_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOPO_REC_HDR 32u          /* bytes of a record's identifying header */
#define TOPO_MAX_NAME 32          /* service/host/API names incl. NUL */
#define TOPO_MAX_CALLS 16         /* downstream calls per API */
#define TOPO_MAX_SPANS (1 + TOPO_MAX_CALLS)
#define TOPO_TRUTH_LINE_MAX 1024  /* a truth line fits in this many bytes */

/* Trigger ids the app fires (and the checker expects in the truth). */
#define TOPO_TRIGGER_EDGE 1u      /* the entry service, a designated share of traces */
#define TOPO_TRIGGER_EXCEPTION 2u /* a service failing by injection */

/* ------------------------------------------------------------ hashing ---- */

/* splitmix64's finaliser: the app's one mixing function for decisions and bytes. */
static inline uint64_t topo_mix64(uint64_t z)
{
	z += 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* FNV-1a, 32 bits: a service name in a record header. */
static inline uint32_t topo_name_hash(const char *s)
{
	uint32_t h = 2166136261u;
	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

/* A uniform number in [0, 1) from 53 bits of h. */
static inline double topo_unit(uint64_t h)
{
	return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

/* ------------------------------------------------------------ records ---- */

/* Length of record `i` of a call writing `records` records of `bytes` in all:
 * an even split, the remainder going to the first records. */
static inline uint32_t topo_record_len(uint64_t bytes, uint32_t records, uint32_t i)
{
	if (records == 0 || i >= records)
		return 0;
	return (uint32_t)(bytes / records + (i < bytes % records ? 1 : 0));
}

static inline void topo_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t topo_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void topo_put64(uint8_t *p, uint64_t v)
{
	topo_put32(p, (uint32_t)v);
	topo_put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint64_t topo_get64(const uint8_t *p)
{
	return (uint64_t)topo_get32(p) | (uint64_t)topo_get32(p + 4) << 32;
}

/* The seed of a record's pattern bytes. */
static inline uint64_t topo_record_seed(uint64_t hi, uint64_t lo, uint32_t svc_hash,
					uint32_t node, uint32_t index)
{
	return topo_mix64(lo ^ topo_mix64(hi ^ topo_mix64(((uint64_t)svc_hash << 32 | node) ^
							  topo_mix64(index))));
}

/* Fill out[0..len) (len >= TOPO_REC_HDR) with the record's exact bytes. */
static inline void topo_record_fill(uint8_t *out, uint32_t len, uint64_t hi, uint64_t lo,
				    uint32_t svc_hash, uint32_t node, uint32_t index)
{
	uint64_t seed = topo_record_seed(hi, lo, svc_hash, node, index), word = 0;
	uint32_t k;
	memcpy(out, "TOPO", 4);
	topo_put64(out + 4, hi);
	topo_put64(out + 12, lo);
	topo_put32(out + 20, node);
	topo_put32(out + 24, index);
	topo_put32(out + 28, svc_hash);
	for (k = TOPO_REC_HDR; k < len; k++) {
		if ((k - TOPO_REC_HDR) % 8 == 0)
			word = topo_mix64(seed + (k - TOPO_REC_HDR) / 8);
		out[k] = (uint8_t)(word >> (8 * ((k - TOPO_REC_HDR) % 8)));
	}
}

/* What a record's header says it is. */
struct topo_rec_id {
	uint64_t hi, lo;
	uint32_t node, index, svc_hash;
};

/* 0 if rec starts with a retrace-topo header (then *id is filled), else -1. */
static inline int topo_record_parse(const uint8_t *rec, size_t len, struct topo_rec_id *id)
{
	if (len < TOPO_REC_HDR || memcmp(rec, "TOPO", 4) != 0)
		return -1;
	id->hi = topo_get64(rec + 4);
	id->lo = topo_get64(rec + 12);
	id->node = topo_get32(rec + 20);
	id->index = topo_get32(rec + 24);
	id->svc_hash = topo_get32(rec + 28);
	return 0;
}

/* 1 if rec is exactly the record (want_len, hi, lo, svc, node, index) would be. */
static inline int topo_record_equal(const uint8_t *rec, size_t len, uint32_t want_len,
				    uint64_t hi, uint64_t lo, uint32_t svc_hash, uint32_t node,
				    uint32_t index)
{
	uint8_t hdr[TOPO_REC_HDR];
	uint64_t seed, word = 0;
	uint32_t k;
	if (len != want_len || want_len < TOPO_REC_HDR)
		return 0;
	topo_record_fill(hdr, TOPO_REC_HDR, hi, lo, svc_hash, node, index);
	if (memcmp(rec, hdr, TOPO_REC_HDR) != 0)
		return 0;
	seed = topo_record_seed(hi, lo, svc_hash, node, index);
	for (k = TOPO_REC_HDR; k < want_len; k++) {
		if ((k - TOPO_REC_HDR) % 8 == 0)
			word = topo_mix64(seed + (k - TOPO_REC_HDR) / 8);
		if (rec[k] != (uint8_t)(word >> (8 * ((k - TOPO_REC_HDR) % 8))))
			return 0;
	}
	return 1;
}

/* -------------------------------------------------------- truth lines ---- */

struct topo_truth {
	uint64_t hi, lo;
	char service[TOPO_MAX_NAME];
	char host[TOPO_MAX_NAME];
	uint32_t agent;
	uint32_t node;
	uint64_t parent;                 /* caller's span id, 0 at the entry */
	uint64_t spans[TOPO_MAX_SPANS];  /* SERVER first, then CLIENT spans */
	uint32_t n_spans;
	uint32_t records;
	uint64_t bytes;
	uint32_t trigger;                /* 0, TOPO_TRIGGER_EDGE or TOPO_TRIGGER_EXCEPTION */
	char status[16];                 /* "ok", "failed", "downstream" */
	uint64_t cause_hi, cause_lo;     /* cause=: the caller's trace (0: none) */
	uint64_t cause_span;             /* cause=: the caller's CLIENT span */
};

/* The line (with '\n') into out; its length, or 0 if out is too small. */
static inline size_t topo_truth_format(char *out, size_t n, const struct topo_truth *t)
{
	size_t len;
	int m;
	uint32_t i;
	m = snprintf(out, n, "%016llx%016llx %s %s agent=%u node=%u parent=%016llx spans=",
		     (unsigned long long)t->hi, (unsigned long long)t->lo, t->service, t->host,
		     t->agent, t->node, (unsigned long long)t->parent);
	if (m < 0 || (size_t)m >= n)
		return 0;
	len = (size_t)m;
	for (i = 0; i < t->n_spans; i++) {
		m = snprintf(out + len, n - len, "%s%016llx", i ? "," : "",
			     (unsigned long long)t->spans[i]);
		if (m < 0 || (size_t)m >= n - len)
			return 0;
		len += (size_t)m;
	}
	if (t->n_spans == 0) {
		m = snprintf(out + len, n - len, "-");
		if (m < 0 || (size_t)m >= n - len)
			return 0;
		len += (size_t)m;
	}
	m = snprintf(out + len, n - len, " records=%u bytes=%llu trigger=%u status=%s",
		     t->records, (unsigned long long)t->bytes, t->trigger, t->status);
	if (m < 0 || (size_t)m >= n - len)
		return 0;
	len += (size_t)m;
	if (t->cause_hi | t->cause_lo)
		m = snprintf(out + len, n - len, " cause=%016llx%016llx:%016llx\n",
			     (unsigned long long)t->cause_hi, (unsigned long long)t->cause_lo,
			     (unsigned long long)t->cause_span);
	else
		m = snprintf(out + len, n - len, "\n");
	if (m < 0 || (size_t)m >= n - len)
		return 0;
	return len + (size_t)m;
}

static inline int topo_hex64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;
	if (n == 0 || n > 16)
		return -1;
	for (i = 0; i < n; i++) {
		char c = s[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return -1;
		v = v << 4 | (uint64_t)d;
	}
	*out = v;
	return 0;
}

static inline int topo_dec64(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;
	if (n == 0 || n > 20)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

/* The next space-separated token of *p (no empty tokens); its length, 0 at the end. */
static inline size_t topo_token(const char **p, const char **tok)
{
	const char *s = *p, *e;
	if (*s == ' ')
		return 0; /* strict: exactly one space between fields */
	e = s;
	while (*e && *e != ' ' && *e != '\n')
		e++;
	*tok = s;
	*p = *e == ' ' ? e + 1 : e;
	return (size_t)(e - s);
}

/* A token "key=value": the value, or NULL if the key differs. */
static inline const char *topo_kv(const char *tok, size_t n, const char *key, size_t *vn)
{
	size_t k = strlen(key);
	if (n <= k + 1 || memcmp(tok, key, k) != 0 || tok[k] != '=')
		return NULL;
	*vn = n - k - 1;
	return tok + k + 1;
}

static inline int topo_name_ok(const char *s, size_t n)
{
	size_t i;
	if (n == 0 || n >= TOPO_MAX_NAME)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
			return 0;
	}
	return 1;
}

/*
 * Parse one truth line (with or without its '\n') strictly: fields in order,
 * one space apart, nothing after the last. 0, or -1 with a reason in err.
 */
static inline int topo_truth_parse(const char *line, struct topo_truth *t, char *err, size_t errn)
{
	const char *p = line, *tok, *v;
	size_t n, vn;
	uint64_t x;

	memset(t, 0, sizeof *t);
#define TOPO_BAD(...)                                   \
	do {                                            \
		snprintf(err, errn, __VA_ARGS__);       \
		return -1;                              \
	} while (0)
	if ((n = topo_token(&p, &tok)) != 32 || topo_hex64(tok, 16, &t->hi) ||
	    topo_hex64(tok + 16, 16, &t->lo))
		TOPO_BAD("field 1: want a trace id of 32 lowercase hex digits");
	if ((t->hi | t->lo) == 0)
		TOPO_BAD("field 1: the trace id is zero");
	if (!(n = topo_token(&p, &tok)) || !topo_name_ok(tok, n))
		TOPO_BAD("field 2: want a service name ([a-z0-9_-], 1..31 chars)");
	memcpy(t->service, tok, n);
	if (!(n = topo_token(&p, &tok)) || !topo_name_ok(tok, n))
		TOPO_BAD("field 3: want a host name ([a-z0-9_-], 1..31 chars)");
	memcpy(t->host, tok, n);
	n = topo_token(&p, &tok);
	if (!(v = topo_kv(tok, n, "agent", &vn)) || topo_dec64(v, vn, UINT32_MAX, &x))
		TOPO_BAD("field 4: want agent=<decimal agent id>");
	t->agent = (uint32_t)x;
	n = topo_token(&p, &tok);
	if (!(v = topo_kv(tok, n, "node", &vn)) || topo_dec64(v, vn, UINT32_MAX, &x))
		TOPO_BAD("field 5: want node=<decimal call node>");
	t->node = (uint32_t)x;
	n = topo_token(&p, &tok);
	if (!(v = topo_kv(tok, n, "parent", &vn)) || vn != 16 || topo_hex64(v, vn, &t->parent))
		TOPO_BAD("field 6: want parent=<16 hex digits>");
	n = topo_token(&p, &tok);
	if (!(v = topo_kv(tok, n, "spans", &vn)))
		TOPO_BAD("field 7: want spans=<16 hex>[,<16 hex>...] or spans=-");
	if (!(vn == 1 && v[0] == '-')) {
		for (;;) {
			if (t->n_spans == TOPO_MAX_SPANS)
				TOPO_BAD("field 7: more than %d span ids", TOPO_MAX_SPANS);
			if (vn < 16 || topo_hex64(v, 16, &t->spans[t->n_spans]) ||
			    t->spans[t->n_spans] == 0)
				TOPO_BAD("field 7: span ids are 16 hex digits, not zero, comma-separated");
			t->n_spans++;
			if (vn == 16)
				break;
			if (v[16] != ',')
				TOPO_BAD("field 7: span ids are separated by commas");
			v += 17;
			vn -= 17;
		}
	}
	n = topo_token(&p, &tok);
	if (!(v = topo_kv(tok, n, "records", &vn)) || topo_dec64(v, vn, UINT32_MAX, &x))
		TOPO_BAD("field 8: want records=<count>");
	t->records = (uint32_t)x;
	n = topo_token(&p, &tok);
	if (!(v = topo_kv(tok, n, "bytes", &vn)) || topo_dec64(v, vn, UINT64_MAX, &t->bytes))
		TOPO_BAD("field 9: want bytes=<count>");
	if (t->records && t->bytes < (uint64_t)t->records * TOPO_REC_HDR)
		TOPO_BAD("field 9: %u records need at least %llu bytes", t->records,
			 (unsigned long long)t->records * TOPO_REC_HDR);
	if (!t->records && t->bytes)
		TOPO_BAD("field 9: bytes without records");
	n = topo_token(&p, &tok);
	if (!(v = topo_kv(tok, n, "trigger", &vn)) || topo_dec64(v, vn, UINT32_MAX, &x))
		TOPO_BAD("field 10: want trigger=<id, 0 for none>");
	t->trigger = (uint32_t)x;
	n = topo_token(&p, &tok);
	if (!(v = topo_kv(tok, n, "status", &vn)) || vn >= sizeof t->status ||
	    !((vn == 2 && !memcmp(v, "ok", 2)) || (vn == 6 && !memcmp(v, "failed", 6)) ||
	      (vn == 10 && !memcmp(v, "downstream", 10))))
		TOPO_BAD("field 11: want status=ok|failed|downstream");
	memcpy(t->status, v, vn);
	if (*p && *p != '\n') {
		n = topo_token(&p, &tok);
		if (!(v = topo_kv(tok, n, "cause", &vn)) || vn != 32 + 1 + 16 || v[32] != ':' ||
		    topo_hex64(v, 16, &t->cause_hi) || topo_hex64(v + 16, 16, &t->cause_lo) ||
		    topo_hex64(v + 33, 16, &t->cause_span) || (t->cause_hi | t->cause_lo) == 0 ||
		    t->cause_span == 0 || t->parent != 0)
			TOPO_BAD("field 12: want cause=<32 hex trace>:<16 hex span> (not zero, "
				 "and parent=0)");
	}
	if (*p == '\n')
		p++;
	if (*p != '\0')
		TOPO_BAD("unexpected text after field 11");
#undef TOPO_BAD
	return 0;
}

#endif
