/* encode.c — trace → event-pair set, Jaccard, pattern ids, anomaly score.
 *
 * Every span contributes its canonical event sequence
 *   [start, log templates in time order, error?, slow?, end]
 * and we emit a 64-bit hash for each consecutive pair, plus (parent end, child start)
 * for every parent/child edge. Event ids are derived from the (service, operation)
 * key, or from the template id for logs. The hashes are sorted (counting pass on the
 * top bits + insertion fix-up: the hashes are uniform) and deduplicated, so parallel
 * fan-out duplicates collapse, the Jaccard similarity of two traces is a linear
 * merge, and the pattern id is a hash of the whole sorted set.
 */
#include "internal.h"
#include "paper_internal.h"
#include "select.h"

#include <stdlib.h>

enum event_kind { EV_START = 1, EV_END, EV_ERROR, EV_SLOW, EV_LOG };

int rt_sel_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap : 16;
	while (ncap < need)
		ncap *= 2;
	void *p = realloc(*arr, ncap * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = ncap;
	return 0;
}

uint64_t rt_sel_op_key(const char *service, const char *operation)
{
	return rt_sel_hash_str(operation, rt_sel_hash_str(service, 0x5e41));
}

uint64_t rt_sel_span_key(const rt_sel_span *span)
{
	return rt_sel_span_key_fast(span);
}

void rt_sel_trace_fill_keys(rt_sel_trace *t)
{
	for (uint32_t i = 0; i < t->n_spans; i++)
		if (!t->spans[i].op_key)
			t->spans[i].op_key =
				rt_sel_op_key(t->spans[i].service, t->spans[i].operation);
}

int32_t rt_sel_trace_root(const rt_sel_trace *t)
{
	int32_t best = -1;
	for (uint32_t i = 0; i < t->n_spans; i++) {
		const rt_sel_span *s = &t->spans[i];
		bool is_root = s->parent < 0 || (uint32_t)s->parent >= t->n_spans;
		if (is_root && (best < 0 || s->start_ns < t->spans[best].start_ns))
			best = (int32_t)i;
	}
	if (best < 0 && t->n_spans > 0)
		best = 0; /* every span has a parent (a cycle or a cut trace): take the first */
	return best;
}

int32_t rt_sel_trace_entry(const rt_sel_trace *t)
{
	return rt_sel_trace_entry_of_root(t, rt_sel_trace_root(t));
}

int32_t rt_sel_trace_entry_of_root(const rt_sel_trace *t, int32_t root)
{
	if (root < 0)
		return root;
	const rt_sel_span *r = &t->spans[root];
	if (!r->operation || !strchr(r->operation, '*'))
		return root;
	/* A wildcard route (a gateway's catch-all route) is not an API: use the first hop into
     * another service, which names the API actually called. */
	int32_t best = -1;
	for (uint32_t i = 0; i < t->n_spans; i++) {
		const rt_sel_span *s = &t->spans[i];
		/* the start first: spans mostly come in start order, so once a hop is found
		 * the rest are skipped without comparing service names (a libc call each) */
		if (best >= 0 && s->start_ns >= t->spans[best].start_ns)
			continue;
		if (s->service && r->service &&
		    (s->service == r->service || strcmp(s->service, r->service) == 0))
			continue;
		best = (int32_t)i;
	}
	return best < 0 ? root : best;
}

uint64_t rt_sel_trace_group(const rt_sel_trace *t)
{
	int32_t e = rt_sel_trace_entry(t);
	if (e < 0)
		return 0;
	return rt_sel_span_key(&t->spans[e]);
}

uint64_t rt_sel_trace_duration(const rt_sel_trace *t)
{
	if (t->n_spans == 0)
		return 0;
	uint64_t lo = UINT64_MAX, hi = 0;
	for (uint32_t i = 0; i < t->n_spans; i++) {
		if (t->spans[i].start_ns < lo)
			lo = t->spans[i].start_ns;
		if (t->spans[i].end_ns > hi)
			hi = t->spans[i].end_ns;
	}
	return hi > lo ? hi - lo : 0;
}

void rt_sel_pairs_free(rt_sel_pairs *p)
{
	free(p->v);
	p->v = NULL;
	p->n = p->cap = 0;
}

double rt_sel_jaccard(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
	if (na == 0 && nb == 0)
		return 1.0;
	size_t i = 0, j = 0, inter = 0;
	while (i < na && j < nb) {
		if (a[i] < b[j])
			i++;
		else if (a[i] > b[j])
			j++;
		else {
			inter++;
			i++;
			j++;
		}
	}
	return (double)inter / (double)(na + nb - inter);
}

uint64_t rt_sel_pattern_id(const uint64_t *v, size_t n)
{
	uint64_t h = rt_sel_mix64(n ^ 0x7a77e3ull);
	for (size_t i = 0; i < n; i++)
		h = rt_sel_combine(h, v[i]);
	return h;
}

static uint64_t span_event(uint64_t op, enum event_kind kind)
{
	return rt_sel_combine(op, (uint64_t)kind);
}

static uint64_t log_event(uint32_t template_id)
{
	return rt_sel_combine(((uint64_t)template_id << 8) | EV_LOG, 0x106ull);
}

/* The caller reserved room (rt_sel_encode counts the pairs first). */
static void push(rt_sel_pairs *out, uint64_t a, uint64_t b)
{
	out->v[out->n++] = rt_sel_combine(a * 0x9e3779b97f4a7c15ull, b);
}

static void insertion_u64(uint64_t *v, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		uint64_t x = v[i];
		size_t k = i;
		for (; k > 0 && v[k - 1] > x; k--)
			v[k] = v[k - 1];
		v[k] = x;
	}
}

/* In-place quicksort of 64-bit keys with inline comparisons (qsort's callback per
 * comparison dominated encoding time); insertion sort below 16 elements. */
static void quicksort_u64(uint64_t *v, size_t n)
{
	while (n > 16) {
		uint64_t a = v[0], b = v[n / 2], c = v[n - 1];
		uint64_t pivot =
			a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
		size_t i = 0, j = n - 1;
		for (;;) {
			while (v[i] < pivot)
				i++;
			while (v[j] > pivot)
				j--;
			if (i >= j)
				break;
			uint64_t t = v[i];
			v[i] = v[j];
			v[j] = t;
			i++;
			j--;
		}
		/* recurse into the smaller half, loop on the larger: O(log n) stack */
		if (j + 1 < n - j - 1) {
			quicksort_u64(v, j + 1);
			v += j + 1;
			n -= j + 1;
		} else {
			quicksort_u64(v + j + 1, n - j - 1);
			n = j + 1;
		}
	}
	insertion_u64(v, n);
}

/* Sort pair hashes (uniformly spread 64-bit values): one counting pass on the top
 * bits into ~n buckets, a scatter, then one insertion-sort pass over the whole
 * array, which only has to fix order inside buckets (about one key each).
 * Linear and nearly branch-free where quicksort mispredicts half its comparisons;
 * if some bucket is crowded (not uniform input) the scattered array is quicksorted.
 * tmp holds n keys. */
static void sort_u64(uint64_t *v, size_t n, uint64_t *tmp)
{
	if (n <= 32) {
		insertion_u64(v, n);
		return;
	}
	unsigned bits = 64u - (unsigned)__builtin_clzll((unsigned long long)n); /* 2^bits > n */
	if (bits > 11)
		bits = 11;
	size_t nb = (size_t)1 << bits;
	unsigned shift = 64u - bits;
	uint32_t start[2049];
	memset(start, 0, (nb + 1) * sizeof start[0]);
	for (size_t i = 0; i < n; i++)
		start[(v[i] >> shift) + 1]++;
	uint32_t crowd = 0;
	for (size_t b = 0; b < nb; b++) {
		crowd = start[b + 1] > crowd ? start[b + 1] : crowd;
		start[b + 1] += start[b];
	}
	for (size_t i = 0; i < n; i++)
		tmp[start[v[i] >> shift]++] = v[i];
	if (crowd > 64) /* a crowded bucket (input not uniform): insertion would go quadratic */
		quicksort_u64(tmp, n);
	else
		insertion_u64(tmp, n);
	memcpy(v, tmp, n * sizeof *v);
}

static bool span_is_slow(const rt_sel_span *s, uint64_t op, const rt_sel_quantiles *p90,
			 double slow_factor)
{
	if (!p90)
		return false;
	double q = rt_sel_quantiles_get(p90, op);
	if (q < 0)
		return false;
	double d = s->end_ns > s->start_ns ? (double)(s->end_ns - s->start_ns) : 0.0;
	return d > slow_factor * q;
}

/* Emit the consecutive pairs of one span's canonical event sequence (its start and
 * end events precomputed). tier: 0 = not slow, 1..3 = latency tier. */
static void encode_span(const rt_sel_trace *t, const rt_sel_span *s, uint64_t start,
			uint64_t end_ev, int tier, rt_sel_pairs *out)
{
	uint64_t op = rt_sel_span_key_fast(s);
	uint64_t prev = start;
	uint32_t end = s->first_log + s->n_logs;
	for (uint32_t l = s->first_log; l < end && l < t->n_logs; l++) {
		uint64_t ev = log_event(t->logs[l].template_id);
		push(out, prev, ev);
		prev = ev;
	}
	if (s->error) {
		uint64_t ev = span_event(op, EV_ERROR);
		push(out, prev, ev);
		prev = ev;
	}
	if (tier) {
		uint64_t ev = span_event(op, EV_SLOW);
		if (tier > 1)
			ev = rt_sel_combine(ev, (uint64_t)tier);
		push(out, prev, ev);
		prev = ev;
	}
	push(out, prev, end_ev);
}

/* Upper bound of the pairs a span emits: its logs, error, slow, end, parent edge. */
static size_t span_pairs_max(const rt_sel_trace *t, const rt_sel_span *s)
{
	size_t logs = 0;
	if (s->first_log < t->n_logs)
		logs = s->n_logs < t->n_logs - s->first_log ? s->n_logs : t->n_logs - s->first_log;
	return logs + 4;
}

/* The encoding proper; a span's latency tier comes from the streaming p90 table
 * (tier 1 above slow_factor × p90) or, when span_tiers is set, from it (the paper's
 * per-minute tiers 1 / 2 / 3 above 1.5 / 3 / 5 × p90). */
static int encode(const rt_sel_trace *t, const rt_sel_quantiles *span_p90, double slow_factor,
		  const uint8_t *span_tiers, rt_sel_pairs *out)
{
	out->n = 0;
	size_t need = 0;
	for (uint32_t i = 0; i < t->n_spans; i++)
		need += span_pairs_max(t, &t->spans[i]);
	/* room for the pairs, as much again as sort scratch, then start and end events
     * of every span (each is used twice: its own sequence and its parent edge) */
	if (rt_sel_grow((void **)&out->v, &out->cap, 2 * need + 2 * (size_t)t->n_spans,
			sizeof *out->v))
		return -1;
	uint64_t *ev = out->v + 2 * need;
	for (uint32_t i = 0; i < t->n_spans; i++) {
		uint64_t op = rt_sel_span_key_fast(&t->spans[i]);
		ev[2 * i] = span_event(op, EV_START);
		ev[2 * i + 1] = span_event(op, EV_END);
	}
	for (uint32_t i = 0; i < t->n_spans; i++) {
		const rt_sel_span *s = &t->spans[i];
		int tier = span_tiers ? span_tiers[i]
				      : span_is_slow(s, rt_sel_span_key_fast(s), span_p90, slow_factor);
		encode_span(t, s, ev[2 * i], ev[2 * i + 1], tier, out);
		if (s->parent >= 0 && (uint32_t)s->parent < t->n_spans && (uint32_t)s->parent != i)
			push(out, ev[2 * (uint32_t)s->parent + 1], ev[2 * i]);
	}
	sort_u64(out->v, out->n, out->v + need);
	/* drop repeats, without a branch per key; the previous key stays in a register
     * (reading it back from v[w - 1] made every step wait on the store before) */
	size_t w = out->n ? 1 : 0;
	uint64_t prev = out->n ? out->v[0] : 0;
	for (size_t r = 1; r < out->n; r++) {
		uint64_t x = out->v[r];
		out->v[w] = x;
		w += x != prev;
		prev = x;
	}
	out->n = w;
	return 0;
}

int rt_sel_encode(const rt_sel_trace *t, const rt_sel_quantiles *span_p90, double slow_factor,
		  rt_sel_pairs *out)
{
	return encode(t, span_p90, slow_factor, NULL, out);
}

/* What encode() reads of each span — its op key, its parent's (for the edge), the
 * error flag, the tier and its log template ids in order — hashed per span and
 * summed, so the order of spans does not matter. Equal digests mean equal multisets
 * of span descriptions, hence equal pair sets (up to 64-bit collisions, as pattern
 * ids). */
uint64_t rt_sel_encode_fingerprint(const rt_sel_trace *t, const uint8_t *span_tiers)
{
	uint64_t sum = t->n_spans;
	for (uint32_t i = 0; i < t->n_spans; i++) {
		const rt_sel_span *s = &t->spans[i];
		uint64_t parent = 0x5ba7e17a11ull; /* no edge */
		if (s->parent >= 0 && (uint32_t)s->parent < t->n_spans && (uint32_t)s->parent != i)
			parent = rt_sel_span_key_fast(&t->spans[s->parent]);
		/* one full mix per span; the parts before it are xor-multiply steps (a
		 * multiply by an odd constant is a bijection, so each step keeps the
		 * information of the ones before, in order) */
		uint64_t h = rt_sel_span_key_fast(s) ^ ((uint64_t)span_tiers[i] << 1 | (s->error ? 1u : 0u));
		h = (h ^ (parent << 23 | parent >> 41)) * 0x9e3779b97f4a7c15ull;
		uint32_t end = s->first_log + s->n_logs;
		for (uint32_t l = s->first_log; l < end && l < t->n_logs; l++) {
			h = (h ^ ((uint64_t)t->logs[l].template_id | 1ull << 40)) * 0xbf58476d1ce4e5b9ull;
			h ^= h >> 29;
		}
		sum += rt_sel_mix64(h);
	}
	return sum;
}

int rt_sel_encode_minute_tiers(const rt_sel_trace *t, const uint8_t *span_tiers, rt_sel_pairs *out)
{
	return encode(t, NULL, 0, span_tiers, out);
}

double rt_sel_anomaly_score(const rt_sel_trace *t, const rt_sel_weights *w, double group_p90)
{
	uint32_t errors = 0;
	for (uint32_t i = 0; i < t->n_spans; i++)
		errors += t->spans[i].error;
	return rt_sel_anomaly_score_of(t, w, group_p90, rt_sel_trace_duration(t), errors);
}

double rt_sel_anomaly_score_of(const rt_sel_trace *t, const rt_sel_weights *w, double group_p90,
			       uint64_t duration, uint32_t error_spans)
{
	double a = 0.0;
	for (uint32_t i = 0; i < error_spans; i++) /* one add each, as per span before */
		a += w->error_span;
	for (uint32_t l = 0; l < t->n_logs; l++) {
		if (t->logs[l].level == RT_SEL_LOG_WARN)
			a += w->warn_log;
		else if (t->logs[l].level >= RT_SEL_LOG_ERROR)
			a += w->error_log;
	}
	if (group_p90 > 0 && (double)duration > w->slow_factor * group_p90)
		a += w->latency;
	return a;
}
