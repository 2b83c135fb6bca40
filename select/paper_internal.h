/* paper_internal.h — the Gleaner paper's trace representation, shared by the paper
 * metrics (eval.c) and the reimplementation of the original algorithm (original.c). */
#ifndef RETRACE_SELECT_PAPER_INTERNAL_H
#define RETRACE_SELECT_PAPER_INTERNAL_H

#include "select.h"

/* p90 of span durations per (service, operation, minute of span start), nearest rank. */
typedef struct rt_sel_paper_p90 {
	uint64_t *keys; /* open addressing, 0 = empty */
	uint64_t *p90;  /* ns, beside its key */
	size_t n;       /* slots, a power of two (0: empty table) */
	uint8_t *tier;  /* latency tier of every span of the traces it was built from, in
                       order (trace by trace, span by span) */
	uint8_t *alt_tier; /* rt_sel_paper_p90_build_alt: the same spans, those of the
                              alt minute judged against the minute before; else NULL */
} rt_sel_paper_p90;

/* Build the table from traces[0..n). Returns 0 or -1 (out of memory). */
int rt_sel_paper_p90_build(const rt_sel_trace *traces, size_t n, rt_sel_paper_p90 *out);

/* A span duration remembered from an earlier window: its (operation, minute) key
 * (rt_sel_paper_minute_key), the minute number, and the duration in ns. */
typedef struct rt_sel_minute_sample {
	uint64_t key, minute, dur;
} rt_sel_minute_sample;

/* rt_sel_paper_p90_build with carry[0..n_carry) added to the buckets (they count for
 * the p90s but get no tier): the selector passes the spans of a minute that an
 * earlier window boundary cut, so that minute has one p90 over all its spans. */
int rt_sel_paper_p90_build_carry(const rt_sel_trace *traces, size_t n,
				 const rt_sel_minute_sample *carry, size_t n_carry,
				 rt_sel_paper_p90 *out);
/* rt_sel_paper_p90_build_carry that also fills alt_tier for the spans of minute
 * alt_minute (≥ 1): their tier against their operation's p90 in alt_minute − 1 when the
 * table holds one (the selector's reading of a minute its window has seen only in
 * part). alt_minute 0: no alt_tier. */
int rt_sel_paper_p90_build_alt(const rt_sel_trace *traces, size_t n,
			       const rt_sel_minute_sample *carry, size_t n_carry, uint64_t alt_minute,
			       rt_sel_paper_p90 *out);
uint64_t rt_sel_paper_minute_key(const rt_sel_span *s);
uint64_t rt_sel_paper_span_dur(const rt_sel_span *s);
void rt_sel_paper_p90_free(rt_sel_paper_p90 *t);
/* Latency tier of a span: 0, or 1 / 2 / 3 when slower than 1.5 / 3 / 5 × its p90. */
int rt_sel_paper_tier(const rt_sel_paper_p90 *t, const rt_sel_span *s);
/* The paper's event-pair set of a trace into *buf (grown as needed): sorted, unique.
 * Logs must carry template ids. Returns the number of pairs, or (size_t)-1 when out
 * of memory. */
size_t rt_sel_paper_pairs(const rt_sel_trace *t, const rt_sel_paper_p90 *p90, uint64_t **buf,
			  size_t *cap);

/* rt_sel_encode with the latency events of the spans given: span_tiers[i] is the
 * tier of span i (rt_sel_paper_p90.tier of this trace's spans). */
int rt_sel_encode_minute_tiers(const rt_sel_trace *t, const uint8_t *span_tiers, rt_sel_pairs *out);
/* Order-independent digest of what rt_sel_encode_minute_tiers reads of a trace:
 * traces with equal digests have equal pair sets (up to 64-bit collisions). */
uint64_t rt_sel_encode_fingerprint(const rt_sel_trace *t, const uint8_t *span_tiers);

#endif
