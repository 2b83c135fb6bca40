/* paper.c — a trace as the Gleaner paper's set of event pairs.
 *
 * The events of a span are, in order: its operation, the Drain template ids of its
 * logs in time order, and a latency event when the span is slower than 1.5, 3 or 5 ×
 * the p90 of its (service, operation) in the same minute of trace time (three tiers).
 * Pairs are consecutive events of a span plus (parent operation, child operation) for
 * every edge; a trace is the sorted set of its distinct pair hashes. The per-minute
 * p90s come from a hash table built over a set of traces (the whole dataset for the
 * metrics, one batch for the original algorithm, one window plus the spans of its
 * first minute carried from the window before for the selector): the
 * nearest-rank p90 (the ⌈0.9·k⌉-th smallest of k) of each (operation, minute).
 */
#include "internal.h"
#include "paper_internal.h"

#include <math.h>
#include <stdlib.h>

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

static uint64_t span_dur(const rt_sel_span *s)
{
	return s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0;
}

static uint64_t minute_key(const rt_sel_span *s)
{
	return rt_sel_combine(rt_sel_span_key_fast(s), s->start_ns / 60000000000ull) | 1u; /* never 0 */
}

static int tier_of(uint64_t dur, uint64_t p90)
{
	double d = (double)dur, p = (double)p90;
	return p90 == 0 ? 0 : d > 5 * p ? 3 : d > 3 * p ? 2 : d > 1.5 * p ? 1 : 0;
}

/* Slot of key in the open-addressing table (its own or the empty one it would take).
 * Keys are minute_key values, already mixed hashes: their high bits index the table
 * (bit 0 is always set), with no further mixing. */
static size_t slot_of(const uint64_t *keys, size_t mask, uint64_t key)
{
	size_t i = (size_t)(key >> 17) & mask;
	while (keys[i] && keys[i] != key)
		i = (i + 1) & mask;
	return i;
}

/* k-th smallest (0-based) of v[0..n), reordering v (quickselect, middle pivot). */
static uint64_t kth_smallest(uint64_t *v, size_t n, size_t k)
{
	size_t lo = 0, hi = n - 1;
	while (lo < hi) {
		uint64_t pivot = v[lo + (hi - lo) / 2];
		size_t i = lo, j = hi;
		while (i <= j) {
			while (v[i] < pivot)
				i++;
			while (v[j] > pivot)
				j--;
			if (i <= j) {
				uint64_t t = v[i];
				v[i] = v[j];
				v[j] = t;
				i++;
				if (j == 0)
					break;
				j--;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return v[k];
	}
	return v[k];
}

/* k-th smallest (0-based) of v[0..n) when k is near the top (n - k ≤ 8): one pass
 * keeping the n - k largest in a small sorted array; most values fall below its
 * smallest and cost one well-predicted compare. Ties count with their multiplicity,
 * so this is the value quickselect returns. */
static uint64_t kth_smallest_top(const uint64_t *v, size_t n, size_t k)
{
	size_t m = n - k; /* the answer is the m-th largest */
	uint64_t top[8];  /* top[0] ≥ top[1] ≥ … ≥ top[m-1] */
	for (size_t i = 0; i < m; i++) {
		uint64_t x = v[i];
		size_t j = i;
		for (; j > 0 && top[j - 1] < x; j--)
			top[j] = top[j - 1];
		top[j] = x;
	}
	for (size_t i = m; i < n; i++) {
		uint64_t x = v[i];
		if (x <= top[m - 1])
			continue;
		size_t j = m - 1;
		for (; j > 0 && top[j - 1] < x; j--)
			top[j] = top[j - 1];
		top[j] = x;
	}
	return top[m - 1];
}

/* Spans are bucketed by (operation, minute) in a hash table — counts, then offsets,
 * then durations scattered into one array — and each bucket's nearest-rank p90 is
 * a quickselect: linear in the spans, no sort. */
int rt_sel_paper_p90_build(const rt_sel_trace *traces, size_t n, rt_sel_paper_p90 *out)
{
	return rt_sel_paper_p90_build_carry(traces, n, NULL, 0, out);
}

uint64_t rt_sel_paper_minute_key(const rt_sel_span *s)
{
	return minute_key(s);
}

uint64_t rt_sel_paper_span_dur(const rt_sel_span *s)
{
	return span_dur(s);
}

int rt_sel_paper_p90_build_carry(const rt_sel_trace *traces, size_t n,
				 const rt_sel_minute_sample *carry, size_t n_carry,
				 rt_sel_paper_p90 *out)
{
	return rt_sel_paper_p90_build_alt(traces, n, carry, n_carry, 0, out);
}

int rt_sel_paper_p90_build_alt(const rt_sel_trace *traces, size_t n,
			       const rt_sel_minute_sample *carry, size_t n_carry, uint64_t alt_minute,
			       rt_sel_paper_p90 *out)
{
	size_t spans = 0;
	for (size_t i = 0; i < n; i++)
		spans += traces[i].n_spans;
	size_t all = spans + n_carry; /* carried samples join the buckets, get no tier */
	/* The table is sized for the distinct (operation, minute) keys, a few hundred per
     * window, not for the spans (it grows if needed): it stays in L1/L2 and its walks
     * below are short. */
	size_t cap = 64;
	while (cap < all / 4)
		cap <<= 1;
	*out = (rt_sel_paper_p90){ .keys = calloc(cap, sizeof *out->keys),
				   .tier = malloc(spans ? 2 * spans : 2) };
	if (alt_minute && out->tier)
		out->alt_tier = out->tier + spans; /* one block, freed with tier */
	uint64_t *dur = malloc((all ? all : 1) * sizeof *dur); /* first: the keys */
	uint32_t *slot = malloc((all ? all : 1) * sizeof *slot);
	if (!out->keys || !out->tier || !dur || !slot)
		goto fail;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		for (uint32_t j = 0; j < traces[i].n_spans; j++)
			dur[k++] = minute_key(&traces[i].spans[j]);
	for (size_t c = 0; c < n_carry; c++)
		dur[k++] = carry[c].key;
	size_t used = 0, mask = cap - 1;
	for (k = 0; k < all; k++) {
		size_t at = slot_of(out->keys, mask, dur[k]);
		if (!out->keys[at]) {
			if ((used + 1) * 2 > cap) { /* keep the load under one half: rehash */
				uint64_t *nk = calloc(cap * 2, sizeof *nk);
				if (!nk)
					goto fail;
				cap *= 2;
				mask = cap - 1;
				for (size_t i = 0; i < cap / 2; i++)
					if (out->keys[i])
						nk[slot_of(nk, mask, out->keys[i])] = out->keys[i];
				free(out->keys);
				out->keys = nk;
				for (size_t i = 0; i < k; i++) /* earlier samples move too */
					slot[i] = (uint32_t)slot_of(nk, mask, dur[i]);
				at = slot_of(nk, mask, dur[k]);
			}
			out->keys[at] = dur[k];
			used++;
		}
		slot[k] = (uint32_t)at;
	}
	out->n = cap;
	if (!(out->p90 = calloc(cap, sizeof *out->p90)))
		goto fail;
	/* p90[] first counts the members of a slot, then is its write offset */
	for (k = 0; k < all; k++)
		out->p90[slot[k]]++;
	size_t off = 0;
	for (size_t i = 0; i < cap; i++) {
		size_t c = out->p90[i];
		out->p90[i] = off;
		off += c;
	}
	k = 0;
	for (size_t i = 0; i < n; i++)
		for (uint32_t j = 0; j < traces[i].n_spans; j++, k++)
			dur[out->p90[slot[k]]++] = span_dur(&traces[i].spans[j]);
	for (size_t c = 0; c < n_carry; c++, k++)
		dur[out->p90[slot[k]]++] = carry[c].dur;
	/* now p90[i] is the end of slot i's run; walk slots in order to find starts */
	off = 0;
	for (size_t i = 0; i < cap; i++) {
		if (!out->keys[i])
			continue;
		size_t end = out->p90[i], c = end - off;
		size_t rank = (size_t)ceil(0.9 * (double)c);
		size_t k = rank ? rank - 1 : 0;
		out->p90[i] = c - k <= 8 ? kth_smallest_top(dur + off, c, k)
					 : kth_smallest(dur + off, c, k);
		off = end;
	}
	k = 0;
	if (!alt_minute) {
		for (size_t i = 0; i < n; i++)
			for (uint32_t j = 0; j < traces[i].n_spans; j++, k++)
				out->tier[k] = (uint8_t)tier_of(span_dur(&traces[i].spans[j]),
								 out->p90[slot[k]]);
		free(dur);
		free(slot);
		return 0;
	}
	/* alt_tier: the spans of alt_minute against their operation's p90 in the minute
	 * before, looked up once per (operation, alt_minute) slot: before[slot] is 0 until
	 * looked up, then 1 (none) or 2 + that p90; dur[] is free again for it */
	const uint64_t alt_lo = alt_minute * 60000000000ull;
	uint64_t *before = cap <= all ? memset(dur, 0, cap * sizeof *dur) : calloc(cap, sizeof *dur);
	if (!before)
		goto fail;
	for (size_t i = 0; i < n; i++)
		for (uint32_t j = 0; j < traces[i].n_spans; j++, k++) {
			const rt_sel_span *sp = &traces[i].spans[j];
			uint64_t d = span_dur(sp);
			uint8_t t = (uint8_t)tier_of(d, out->p90[slot[k]]);
			out->tier[k] = out->alt_tier[k] = t;
			if (sp->start_ns - alt_lo >= 60000000000ull) /* not in alt_minute */
				continue;
			uint64_t *b = &before[slot[k]];
			if (*b == 0) {
				uint64_t key = rt_sel_combine(rt_sel_span_key_fast(sp), alt_minute - 1) | 1u;
				size_t at = slot_of(out->keys, cap - 1, key);
				*b = out->keys[at] ? 2 + out->p90[at] : 1;
			}
			if (*b != 1)
				out->alt_tier[k] = (uint8_t)tier_of(d, *b - 2);
		}
	if (before != dur)
		free(before);
	free(dur);
	free(slot);
	return 0;
fail:
	free(dur);
	free(slot);
	rt_sel_paper_p90_free(out);
	return -1;
}

void rt_sel_paper_p90_free(rt_sel_paper_p90 *t)
{
	free(t->keys);
	free(t->p90);
	free(t->tier);
	*t = (rt_sel_paper_p90){ 0 };
}

int rt_sel_paper_tier(const rt_sel_paper_p90 *t, const rt_sel_span *s)
{
	if (!t->n)
		return 0;
	size_t at = slot_of(t->keys, t->n - 1, minute_key(s));
	return tier_of(span_dur(s), t->keys[at] ? t->p90[at] : 0);
}

#define EV_LAT 0x1a7e000000000000ull

size_t rt_sel_paper_pairs(const rt_sel_trace *t, const rt_sel_paper_p90 *p90, uint64_t **buf,
			  size_t *cap)
{
	size_t need = (size_t)t->n_spans * 2 + t->n_logs + 1, k = 0;
	if (need > *cap) {
		uint64_t *nb = realloc(*buf, need * sizeof *nb);
		if (!nb)
			return (size_t)-1;
		*buf = nb;
		*cap = need;
	}
	uint64_t *v = *buf;
	for (uint32_t i = 0; i < t->n_spans; i++) {
		const rt_sel_span *s = &t->spans[i];
		uint64_t op = rt_sel_span_key_fast(s), prev = op;
		if (s->parent >= 0 && (uint32_t)s->parent < t->n_spans)
			v[k++] = rt_sel_combine(rt_sel_span_key_fast(&t->spans[s->parent]) ^ 0x9a4e, op);
		for (uint32_t l = s->first_log; l < s->first_log + s->n_logs && l < t->n_logs;
		     l++) {
			uint64_t ev = rt_sel_combine(0x7e3f, t->logs[l].template_id);
			v[k++] = rt_sel_combine(prev, ev);
			prev = ev;
		}
		int tier = rt_sel_paper_tier(p90, s);
		if (tier)
			v[k++] = rt_sel_combine(prev, rt_sel_combine(op, EV_LAT + (uint64_t)tier));
	}
	if (k)
		qsort(v, k, sizeof *v, cmp_u64);
	size_t u = 0;
	for (size_t i = 0; i < k; i++)
		if (u == 0 || v[i] != v[u - 1])
			v[u++] = v[i];
	return u;
}
