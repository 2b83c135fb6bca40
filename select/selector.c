/* selector.c — one selection window: mine, score, encode, group, quota, DPP, weights.
 *
 * Per window the selector (1) gives every free-text log a Drain template id,
 * (2) feeds span and trace durations into the streaming p90 tables, (3) encodes each
 * trace into its event-pair set (kept in one window arena) and scores it, (4) groups
 * traces by entry API, (5) scales the budget up if traffic dropped sharply during an
 * alarm, splits it with rt_sel_quota, and (6) inside each group over quota runs the
 * fast greedy DPP over the group's distinct patterns (one representative per pattern,
 * the highest-scored: with L = r rᵀ∘S, duplicates of a picked pattern have zero gain,
 * so this is exact and much cheaper), then fills any remaining quota with the trace
 * whose pattern is least similar to those already chosen. Pattern-pair similarities
 * come from an LRU cache that outlives the window, and so do the encodings (by
 * fingerprint: a trace that reads like one encoded in an earlier window takes its
 * pairs and pattern). Two small memories also outlive it: the patterns kept earlier (their DPP quality is scaled by seen_penalty, so a
 * window prefers patterns the store does not hold yet) and a decayed count of traces
 * kept per group (tiny budgets rotate across groups instead of always serving the
 * same rarest one). A budget below the group count goes to patterns not kept before
 * first, groups with nothing new get what is left. The per-minute latency tiers use
 * the window's spans plus the durations of its newest minute remembered from the
 * window before, so a minute cut by a window boundary keeps one p90. A caller that
 * holds the cut minute's traces back (rt_sel_hold_cut_minute, rt_sel_window.held)
 * has their spans join this window's p90s without a verdict, and the carry then
 * reaches back to the earliest minute they touch, so they meet the rest of every
 * minute they share when they are selected.
 */
#include "internal.h"
#include "paper_internal.h"
#include "select.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

typedef struct trace_info {
	size_t off, len; /* event pairs in the window arena */
	uint64_t pattern, group;
	uint64_t alt; /* the pattern with the cut minute judged on the minute before; 0: none */
	double score;
	uint32_t index;
	uint32_t first_span; /* of the window's spans: its tiers in minute.tier / alt_tier */
	bool alt_done;       /* alt computed (lazily: only novelty checks need it) */
} trace_info;

/* (service, operation) string pointers → op key, for one window only: the traces
 * are alive and unchanged during the call, so equal pointers mean equal strings; the
 * generation makes entries of earlier windows (whose strings may be gone) misses. */
#define KEY_MEMO_SIZE 4096 /* a window has a few hundred distinct pairs: 1024 slots
				    missed often enough to cost ~0.08 µs per trace */
typedef struct key_memo {
	const char *service, *operation;
	uint64_t key;
	uint32_t gen;
} key_memo;

/* Encodings remembered across windows (minute_tiers): a trace's fingerprint →
 * its pattern and sorted pairs, the pairs in a ring of ENC_MEMO_WORDS words. About
 * half of the traces a window must encode (its own fingerprint memo missed) were
 * encoded in an earlier window; they copy ~100 words instead of hashing, sorting
 * and chaining the pattern id again. Direct-mapped; an entry is live while the ring
 * has not lapped its words. Exact as the window's memo is: equal fingerprints mean
 * equal pair sets up to 64-bit collisions. */
#define ENC_MEMO_SIZE  4096               /* entries, 32 bytes each */
#define ENC_MEMO_WORDS ((size_t)1 << 17)  /* remembered pairs: 1 MiB */
typedef struct enc_memo_entry {
	uint64_t fp, pattern;
	uint64_t pos; /* monotonic ring offset of the pairs */
	uint64_t len;
} enc_memo_entry;

/* What the window's first pass over a trace's spans found (read_trace), beside
 * s->info by window index (not in trace_info, which the choice sorts). */
typedef struct trace_facts {
	uint64_t duration;
	uint32_t error_spans;
} trace_facts;

typedef struct group_stat {
	uint64_t group; /* 0 = free slot */
	double kept;    /* traces kept recently, decayed each window */
} group_stat;

struct rt_selector {
	rt_sel_config cfg;
	rt_sel_drain *drain;
	rt_sel_quantiles *span_p90;
	rt_sel_quantiles *group_p90;
	rt_sel_simcache *cache;
	double traffic_avg; /* EWMA of traces per window; < 0 before the first window */
	uint64_t *seen;     /* direct-mapped set of patterns kept in earlier windows */
	size_t seen_mask;
	group_stat *groups; /* decayed kept count per group (open addressing) */
	size_t groups_cap, groups_used;
	/* window scratch, reused */
	rt_sel_pairs enc;
	uint64_t *arena;
	size_t arena_len, arena_cap;
	trace_info *info;
	size_t info_cap;
	trace_facts *facts;
	size_t facts_cap;
	rt_sel_verdict *verdicts;
	size_t verdicts_cap;
	uint32_t *chosen;
	size_t chosen_cap;
	uint64_t *fp_key; /* encoding fingerprints of the window (fp_find) */
	uint32_t *fp_slot;
	size_t fp_cap;
	key_memo *keys; /* KEY_MEMO_SIZE entries */
	uint32_t key_gen;
	enc_memo_entry *enc_memo; /* ENC_MEMO_SIZE entries */
	uint64_t *enc_ring;       /* ENC_MEMO_WORDS words of pairs */
	uint64_t enc_pos;         /* monotonic end of the newest remembered pairs */
	/* span durations of the newest minute of trace time seen so far (minute_tiers):
     * a window boundary inside a minute does not split that minute's p90 */
	rt_sel_minute_sample *carry;
	size_t n_carry, carry_cap;
	uint64_t carry_minute; /* the minute carried (the window's newest) */
	uint64_t *held_keys;   /* (operation, minute) keys of held spans before the newest
				  minute: their samples are carried too (carry_minutes) */
	size_t held_keys_cap, held_keys_mask;
	rt_sel_paper_p90 minute; /* this window's per-minute p90s and span tiers */
	/* kept traces with spans in the carried minute, copied (names and text dropped,
	 * op keys and template ids kept) with their tiers, to be judged again in the next
	 * window against the whole minute: see rejudge_kept */
	rt_sel_trace *pend;
	size_t n_pend, pend_cap;
	rt_sel_span *pend_spans;
	size_t n_pend_spans, pend_spans_cap;
	uint8_t *pend_tiers; /* beside pend_spans */
	size_t pend_tiers_cap;
	rt_sel_log *pend_logs;
	size_t n_pend_logs, pend_logs_cap;
	uint64_t pend_minute;
	const rt_sel_trace *win; /* the window's traces, during rt_sel_select */
	rt_sel_stage_times times;
};

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void rt_sel_selector_stage_times(const rt_selector *s, rt_sel_stage_times *out)
{
	*out = s->times;
}

void rt_sel_config_default(rt_sel_config *cfg)
{
	cfg->weights.error_span = 5.0;
	cfg->weights.warn_log = 1.0;
	cfg->weights.error_log = 2.0;
	cfg->weights.latency = 2.0;
	cfg->weights.slow_factor = 2.0;
	cfg->quality_gain = 1.0;
	cfg->seen_penalty = 0.2;
	cfg->novelty_first = true;
	cfg->decline_stale = true;
	cfg->alarmed_first = true;
	cfg->minute_tiers = true;
	cfg->seen_capacity = (size_t)1 << 16;
	cfg->group_memory = 0.9;
	cfg->dpp_eps = 1e-6;
	cfg->simcache_capacity = (size_t)1 << 16;
	cfg->alarm_boost = 3.0;
	cfg->alarm_cap = 0.5;
	cfg->drop_ratio = 0.5;
	cfg->max_budget_scale = 2.0;
	cfg->traffic_smoothing = 0.2;
	rt_sel_drain_config_default(&cfg->drain);
}

rt_selector *rt_sel_create(const rt_sel_config *cfg)
{
	rt_selector *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	if (cfg)
		s->cfg = *cfg;
	else
		rt_sel_config_default(&s->cfg);
	s->drain = rt_sel_drain_create(&s->cfg.drain);
	s->span_p90 = rt_sel_quantiles_create(0.9);
	s->group_p90 = rt_sel_quantiles_create(0.9);
	s->cache = rt_sel_simcache_create(s->cfg.simcache_capacity);
	s->traffic_avg = -1.0;
	size_t seen = 1;
	while (seen < s->cfg.seen_capacity)
		seen <<= 1;
	s->seen = calloc(seen, sizeof *s->seen);
	s->seen_mask = seen - 1;
	s->keys = calloc(KEY_MEMO_SIZE, sizeof *s->keys);
	s->enc_memo = calloc(ENC_MEMO_SIZE, sizeof *s->enc_memo);
	s->enc_ring = malloc(ENC_MEMO_WORDS * sizeof *s->enc_ring);
	s->enc_pos = 2 * ENC_MEMO_WORDS; /* a zeroed entry (pos 0) is not live */
	if (!s->drain || !s->span_p90 || !s->group_p90 || !s->cache || !s->seen || !s->keys ||
	    !s->enc_memo || !s->enc_ring) {
		rt_sel_destroy(s);
		return NULL;
	}
	return s;
}

void rt_sel_destroy(rt_selector *s)
{
	if (!s)
		return;
	rt_sel_drain_destroy(s->drain);
	rt_sel_quantiles_destroy(s->span_p90);
	rt_sel_quantiles_destroy(s->group_p90);
	rt_sel_simcache_destroy(s->cache);
	rt_sel_pairs_free(&s->enc);
	free(s->seen);
	free(s->groups);
	free(s->arena);
	free(s->info);
	free(s->facts);
	free(s->verdicts);
	free(s->chosen);
	free(s->fp_key);
	free(s->fp_slot);
	free(s->keys);
	free(s->enc_memo);
	free(s->enc_ring);
	free(s->carry);
	free(s->held_keys);
	rt_sel_paper_p90_free(&s->minute);
	free(s->pend);
	free(s->pend_spans);
	free(s->pend_tiers);
	free(s->pend_logs);
	free(s);
}

rt_sel_drain *rt_sel_selector_drain(rt_selector *s)
{
	return s->drain;
}
const rt_sel_simcache *rt_sel_selector_simcache(const rt_selector *s)
{
	return s->cache;
}

/* ---------------------------------------------------------------- stages 1–3 */

/* Start fetching the first bytes of a log line that will be mined a few lines from
 * now: lines are scattered in memory and cold, so each one otherwise begins with a
 * full cache miss. */
#if defined(__x86_64__) || defined(__i386__)
/* gcc 12 dropped __builtin_prefetch here (seen in the generated code): use the
 * instruction directly; the operand is an address, nothing is dereferenced. */
#define PREFETCH(p) __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)(p)))
#else
#define PREFETCH(p) __builtin_prefetch(p)
#endif

static inline void prefetch_log(const rt_sel_log *lg)
{
	const char *p = lg->text;
	/* only lines still to be mined: a templated line's text is never read (tracer-API
     * logs, or lines mined by rt_sel_mine_templates before the window runs) */
	if (p && lg->template_id == 0) /* the first 512 bytes: most lines are shorter */
		for (unsigned k = 0; k < 512; k += 64)
			PREFETCH(p + k);
}

static void mine_templates(rt_selector *s, rt_sel_trace *t, const rt_sel_trace *next)
{
	for (uint32_t l = 0; l < t->n_logs; l++) {
		if (l + 4 < t->n_logs)
			prefetch_log(&t->logs[l + 4]);
		else if (next && l + 4 - t->n_logs < next->n_logs)
			prefetch_log(&next->logs[l + 4 - t->n_logs]);
		rt_sel_log *lg = &t->logs[l];
		if (lg->template_id == 0 && lg->text) /* a known length saves a pass */
			lg->template_id = lg->text_len ? rt_sel_drain_add_len(s->drain, lg->text,
									      lg->text_len)
						       : rt_sel_drain_add(s->drain, lg->text);
	}
}

void rt_sel_mine_templates(rt_selector *s, rt_sel_trace *traces, size_t n)
{
	for (size_t i = 0; i < n; i++)
		mine_templates(s, &traces[i], i + 1 < n ? &traces[i + 1] : NULL);
}

/* The op key of a span through the window's key memo: services and operations come
 * from a small set of (usually interned) strings, and hashing them was a fifth of the
 * selection time on fresh traces. */
static uint64_t memo_key(rt_selector *s, const rt_sel_span *sp)
{
	uintptr_t a = (uintptr_t)sp->service, b = (uintptr_t)sp->operation;
	key_memo *m = &s->keys[rt_sel_mix64(a ^ (b * 0x9e3779b97f4a7c15ull)) & (KEY_MEMO_SIZE - 1)];
	if (m->gen != s->key_gen || m->service != sp->service || m->operation != sp->operation)
		*m = (key_memo){ .service = sp->service,
				 .operation = sp->operation,
				 .key = rt_sel_op_key(sp->service, sp->operation),
				 .gen = s->key_gen };
	return m->key;
}

/* One pass over a trace's spans for everything the window reads of them before the
 * per-minute table: op keys (filled), the root, the duration, the failed spans and
 * the latest start (*latest). Then its group (the entry API) and its duration into
 * the group's p90. These were five passes (keys, root, entry, duration twice). */
static void read_trace(rt_selector *s, rt_sel_trace *t, trace_info *ti, trace_facts *f,
		       uint64_t *latest)
{
	int32_t root = -1;
	uint64_t lo = UINT64_MAX, hi = 0, late = *latest;
	uint32_t errors = 0;
	for (uint32_t i = 0; i < t->n_spans; i++) {
		rt_sel_span *sp = &t->spans[i];
		if (!sp->op_key)
			sp->op_key = memo_key(s, sp);
		bool is_root = sp->parent < 0 || (uint32_t)sp->parent >= t->n_spans;
		if (is_root && (root < 0 || sp->start_ns < t->spans[root].start_ns))
			root = (int32_t)i;
		lo = sp->start_ns < lo ? sp->start_ns : lo;
		hi = sp->end_ns > hi ? sp->end_ns : hi;
		late = sp->start_ns > late ? sp->start_ns : late;
		errors += sp->error;
	}
	if (root < 0 && t->n_spans > 0)
		root = 0; /* as rt_sel_trace_root: every span has a parent, take the first */
	*latest = late;
	f->duration = hi > lo ? hi - lo : 0; /* rt_sel_trace_duration */
	f->error_spans = errors;
	int32_t e = rt_sel_trace_entry_of_root(t, root);
	ti->group = e < 0 ? 0 : rt_sel_span_key_fast(&t->spans[e]); /* rt_sel_trace_group */
	/* span p90s serve only the streaming slow marker: not kept with minute tiers */
	for (uint32_t i = 0; i < t->n_spans && !s->cfg.minute_tiers; i++) {
		const rt_sel_span *sp = &t->spans[i];
		double d = sp->end_ns > sp->start_ns ? (double)(sp->end_ns - sp->start_ns) : 0.0;
		rt_sel_quantiles_add(s->span_p90, sp->op_key, d);
	}
	rt_sel_quantiles_add(s->group_p90, ti->group, (double)f->duration);
}

/* A trace whose spans read the same as an earlier trace's of this window (about half
 * of them on the dataset) shares that trace's pairs in the arena and its pattern:
 * sorting, deduplicating and the serial pattern-id hash are skipped. Per window:
 * fp_slot[] maps a fingerprint to 1 + the info index, 0 = empty. */
static const trace_info *fp_find(rt_selector *s, uint64_t fp, size_t *slot)
{
	size_t mask = s->fp_cap - 1, i = rt_sel_mix64(fp) & mask;
	while (s->fp_slot[i] && s->fp_key[i] != fp)
		i = (i + 1) & mask;
	*slot = i;
	return s->fp_slot[i] ? &s->info[s->fp_slot[i] - 1] : NULL;
}

/* The live entry remembered for fingerprint fp, or NULL. */
static const enc_memo_entry *enc_memo_find(const rt_selector *s, uint64_t fp)
{
	const enc_memo_entry *e = &s->enc_memo[rt_sel_mix64(fp) & (ENC_MEMO_SIZE - 1)];
	return e->fp == fp && s->enc_pos - e->pos <= ENC_MEMO_WORDS ? e : NULL;
}

static void enc_memo_put(rt_selector *s, uint64_t fp, uint64_t pattern, const uint64_t *v,
			 size_t n)
{
	if (n > ENC_MEMO_WORDS / 16)
		return;
	size_t off = (size_t)(s->enc_pos % ENC_MEMO_WORDS);
	if (off + n > ENC_MEMO_WORDS) { /* does not fit before the ring's end: next lap */
		s->enc_pos += ENC_MEMO_WORDS - off;
		off = 0;
	}
	memcpy(s->enc_ring + off, v, n * sizeof *v);
	s->enc_memo[rt_sel_mix64(fp) & (ENC_MEMO_SIZE - 1)] =
		(enc_memo_entry){ .fp = fp, .pattern = pattern, .pos = s->enc_pos, .len = n };
	s->enc_pos += n;
}

/* Append pairs v[0..n) to the window arena as ti's. */
static int arena_append(rt_selector *s, const uint64_t *v, size_t n, trace_info *ti)
{
	if (rt_sel_grow((void **)&s->arena, &s->arena_cap, s->arena_len + n, sizeof *s->arena))
		return -1;
	memcpy(s->arena + s->arena_len, v, n * sizeof *s->arena);
	ti->off = s->arena_len;
	ti->len = n;
	s->arena_len += n;
	return 0;
}

static int encode_into_arena(rt_selector *s, const rt_sel_trace *t, const uint8_t *tiers,
			     trace_info *ti)
{
	size_t slot = 0;
	uint64_t fp = 0;
	const enc_memo_entry *known = NULL;
	if (tiers && s->fp_cap) {
		fp = rt_sel_encode_fingerprint(t, tiers);
		const trace_info *same = fp_find(s, fp, &slot);
		if (same) {
			ti->off = same->off;
			ti->len = same->len;
			ti->pattern = same->pattern;
			return 0;
		}
		known = enc_memo_find(s, fp);
	}
	if (known) {
		if (arena_append(s, s->enc_ring + known->pos % ENC_MEMO_WORDS, known->len, ti))
			return -1;
		ti->pattern = known->pattern;
	} else {
		if (tiers ? rt_sel_encode_minute_tiers(t, tiers, &s->enc)
			  : rt_sel_encode(t, s->span_p90, s->cfg.weights.slow_factor, &s->enc))
			return -1;
		if (arena_append(s, s->enc.v, s->enc.n, ti))
			return -1;
		ti->pattern = rt_sel_pattern_id(s->enc.v, s->enc.n);
		if (tiers && s->fp_cap)
			enc_memo_put(s, fp, ti->pattern, s->enc.v, s->enc.n);
	}
	if (tiers && s->fp_cap) {
		s->fp_key[slot] = fp;
		s->fp_slot[slot] = (uint32_t)(ti - s->info) + 1;
	}
	return 0;
}

/* ---------------------------------------------------------------- similarity */

static double pattern_similarity(rt_selector *s, const trace_info *a, const trace_info *b)
{
	if (a->pattern == b->pattern)
		return 1.0;
	float v;
	if (rt_sel_simcache_get(s->cache, a->pattern, b->pattern, &v))
		return v;
	double j = rt_sel_jaccard(s->arena + a->off, a->len, s->arena + b->off, b->len);
	rt_sel_simcache_put(s->cache, a->pattern, b->pattern, (float)j);
	return j;
}

typedef struct group_ctx {
	rt_selector *s;
	const trace_info **rep; /* one representative per distinct pattern */
} group_ctx;

static double sim_cb(void *ctx, size_t i, size_t j)
{
	group_ctx *g = ctx;
	if (i == j)
		return 1.0;
	return pattern_similarity(g->s, g->rep[i], g->rep[j]);
}

/* ---------------------------------------------------------------- memory across windows */

/* Added to the priority of a group with nothing new in a window (> any kept count). */
#define STALE_GROUP_PRIORITY 1e9
/* Taken from the priority of an alarmed group below the group count (alarmed_first):
 * alarmed groups with new patterns before the others, the rotation within each. */
#define ALARMED_GROUP_PRIORITY 1e6

static bool was_kept(const rt_selector *s, uint64_t pattern)
{
	return pattern && s->seen[rt_sel_mix64(pattern) & s->seen_mask] == pattern;
}

static int alt_pattern(rt_selector *s, const rt_sel_trace *t, const uint8_t *tiers,
		       const uint8_t *alt_tiers, uint64_t *alt);

/* Kept before, as the trace reads now or as it may read once its cut minute is whole
 * (that reading is computed on first need; none if out of memory). */
static bool info_was_kept(rt_selector *s, trace_info *ti)
{
	if (was_kept(s, ti->pattern))
		return true;
	if (!ti->alt_done && s->minute.alt_tier) {
		ti->alt_done = true;
		if (alt_pattern(s, &s->win[ti->index], s->minute.tier + ti->first_span,
				s->minute.alt_tier + ti->first_span, &ti->alt))
			ti->alt = 0;
	}
	return was_kept(s, ti->alt);
}

static void remember_kept(rt_selector *s, uint64_t pattern)
{
	s->seen[rt_sel_mix64(pattern) & s->seen_mask] = pattern;
}

static group_stat *group_slot(group_stat *t, size_t cap, uint64_t group)
{
	size_t i = rt_sel_mix64(group) & (cap - 1);
	while (t[i].group && t[i].group != group)
		i = (i + 1) & (cap - 1);
	return &t[i];
}

/* Stats of a group, inserted if new; NULL only when out of memory. */
static group_stat *group_stats(rt_selector *s, uint64_t group)
{
	group += group == 0; /* 0 marks a free slot */
	if ((s->groups_used + 1) * 2 > s->groups_cap) {
		size_t ncap = s->groups_cap ? s->groups_cap * 2 : 64;
		group_stat *nt = calloc(ncap, sizeof *nt);
		if (!nt)
			return NULL;
		for (size_t i = 0; i < s->groups_cap; i++)
			if (s->groups[i].group)
				*group_slot(nt, ncap, s->groups[i].group) = s->groups[i];
		free(s->groups);
		s->groups = nt;
		s->groups_cap = ncap;
	}
	group_stat *g = group_slot(s->groups, s->groups_cap, group);
	if (!g->group) {
		g->group = group;
		s->groups_used++;
	}
	return g;
}

static void decay_groups(rt_selector *s)
{
	for (size_t i = 0; i < s->groups_cap; i++)
		s->groups[i].kept *= s->cfg.group_memory;
}

/* ---------------------------------------------------------------- grouping */

static int by_group_pattern_score(const void *x, const void *y)
{
	const trace_info *a = x, *b = y;
	if (a->group != b->group)
		return a->group < b->group ? -1 : 1;
	if (a->pattern != b->pattern)
		return a->pattern < b->pattern ? -1 : 1;
	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	return a->index < b->index ? -1 : a->index > b->index;
}

static bool is_alarmed(uint64_t group, const uint64_t *alarmed, size_t n_alarmed)
{
	for (size_t i = 0; i < n_alarmed; i++)
		if (alarmed[i] == group)
			return true;
	return false;
}

/* ---------------------------------------------------------------- in-group choice */

typedef struct pattern_run {
	size_t first, count; /* members, best score first */
	size_t taken;        /* how many members already chosen */
	double max_sim;      /* to the chosen set; -1 while nothing is chosen */
} pattern_run;

static void choose(rt_selector *s, uint32_t trace_index, size_t *n_chosen)
{
	s->verdicts[trace_index].chosen = true;
	s->chosen[(*n_chosen)++] = trace_index;
}

static void note_pick(group_ctx *g, pattern_run *runs, size_t nruns, size_t picked)
{
	for (size_t r = 0; r < nruns; r++) {
		double v = sim_cb(g, r, picked);
		if (v > runs[r].max_sim)
			runs[r].max_sim = v;
	}
}

/* Fill up to `want` more picks with the least similar remaining patterns. */
static void fill_least_similar(rt_selector *s, group_ctx *g, pattern_run *runs, size_t nruns,
			       const trace_info *members, size_t want, size_t *n_chosen)
{
	while (want > 0) {
		size_t best = nruns;
		for (size_t r = 0; r < nruns; r++) {
			if (runs[r].taken == runs[r].count)
				continue;
			if (best == nruns || runs[r].max_sim < runs[best].max_sim)
				best = r;
		}
		if (best == nruns)
			return;
		pattern_run *b = &runs[best];
		choose(s, members[b->first + b->taken].index, n_chosen);
		b->taken++;
		want--;
		if (b->taken == 1)
			note_pick(g, runs, nruns, best);
	}
}

/* DPP over the group's distinct patterns, then the least similar to fill the quota.
 * new_only: the quota was bought by the group's new patterns (below the group count,
 * fresh_first_quota), so a pattern kept earlier gets no DPP quality at all; with the
 * seen penalty alone, a kept pattern far from the first pick out-gained a new one close
 * to it and the pick went to a repeat (docs/selection.md, ninth pass). */
static int select_in_group(rt_selector *s, const trace_info *members, size_t size, size_t quota,
			   bool new_only, size_t *n_chosen)
{
	if (quota >= size) {
		for (size_t i = 0; i < size; i++)
			choose(s, members[i].index, n_chosen);
		return 0;
	}
	size_t nruns = 0;
	for (size_t i = 0; i < size; i++)
		nruns += i == 0 || members[i].pattern != members[i - 1].pattern;
	pattern_run *runs = calloc(nruns, sizeof *runs);
	const trace_info **rep = malloc(nruns * sizeof *rep);
	double *quality = malloc(nruns * sizeof *quality);
	size_t *picked = malloc(nruns * sizeof *picked);
	int rc = -1;
	if (!runs || !rep || !quality || !picked)
		goto out;
	for (size_t i = 0, r = (size_t)-1; i < size; i++) {
		if (i == 0 || members[i].pattern != members[i - 1].pattern) {
			r++;
			runs[r].first = i;
			runs[r].max_sim = -1.0;
			rep[r] = &members[i];
			quality[r] = 1.0 + s->cfg.quality_gain * rep[r]->score;
			if (info_was_kept(s, (trace_info *)rep[r])) /* novelty across windows; members are s->info's */
				quality[r] *= new_only ? 0.0 : s->cfg.seen_penalty;
		}
		runs[r].count++;
	}
	group_ctx g = { s, rep };
	size_t k = rt_sel_dpp_greedy(nruns, quality, sim_cb, &g, quota, s->cfg.dpp_eps, picked);
	if (k == (size_t)-1)
		goto out;
	for (size_t p = 0; p < k; p++) {
		pattern_run *r = &runs[picked[p]];
		choose(s, members[r->first].index, n_chosen);
		r->taken = 1;
	}
	for (size_t p = 0; p < k; p++)
		note_pick(&g, runs, nruns, picked[p]);
	fill_least_similar(s, &g, runs, nruns, members, quota - k, n_chosen);
	rc = 0;
out:
	free(runs);
	free(rep);
	free(quality);
	free(picked);
	return rc;
}

/* ---------------------------------------------------------------- budget */

/* Traffic is compared as a rate: a window that covers only part of the usual length
 * (coverage < 1, e.g. the last, cut-off window of a replay) is not a traffic drop. */
static size_t effective_budget(rt_selector *s, size_t n_traces, size_t budget, bool any_alarm,
			       double coverage)
{
	double avg = s->traffic_avg;
	double n = (double)n_traces / coverage;
	size_t out = budget;
	if (any_alarm && avg > 0 && n < s->cfg.drop_ratio * avg) {
		double scale = avg / (n > 1 ? n : 1.0);
		if (scale > s->cfg.max_budget_scale)
			scale = s->cfg.max_budget_scale;
		out = (size_t)floor((double)budget * scale);
	}
	double a = s->cfg.traffic_smoothing;
	s->traffic_avg = avg < 0 ? n : (1 - a) * avg + a * n;
	return out;
}

/* ---------------------------------------------------------------- novelty quota */

/* Distinct patterns of info[a..b) (a group, sorted by pattern) not kept earlier. */
static size_t new_patterns(rt_selector *s, size_t a, size_t b)
{
	size_t k = 0;
	for (size_t i = a; i < b; i++)
		k += (i == a || s->info[i].pattern != s->info[i - 1].pattern) &&
		     !info_was_kept(s, &s->info[i]);
	return k;
}

/* Quotas with novelty first.
 *
 * Budget below the number of groups (not every group can have one anyway): the
 * budget goes to new patterns — distinct patterns not kept in an earlier window —
 * first, one group each by rotation priority while it is smaller than the groups with
 * new patterns, else water-filled over their new-pattern counts (a group with several
 * may take several); only what is left goes to groups with nothing new, one each by
 * rotation — or, with decline_stale (the default), is declined: such a pick repeats
 * a pattern the store holds and the API is represented there already, while the
 * caller can spend it in a later window that has something new (on the dev dataset
 * at 10 % this turns the one such repeat into a new pattern). The alarm boost needs
 * a pick for every group first, so here an alarm orders instead (alarmed_first):
 * alarmed groups with new patterns go before the others, the rotation within each
 * (on the dev dataset the error share at 1 / 5 / 10 % went from 1.36 / 1.08 / 0.99 ×
 * random's to 2.8 / 1.7 / 1.08 ×, the same patterns kept: docs/selection.md).
 *
 * Budget at least the number of groups: the usual split (rt_sel_quota_prio: even
 * split, alarm boost and cap, rotation) is computed; alarmed groups keep theirs. What
 * it gave the other groups is split again among them in two passes: first over what
 * each has that is new, at least one per group — so every group keeps a pick, and a
 * group whose traces repeat what the store holds does not take more that a group with
 * new patterns could use; then the rest over their other traces. */
static int fresh_first_quota(rt_selector *s, const size_t *start, const size_t *sizes,
			     const bool *alarmed, const double *recent, size_t ng, size_t budget,
			     size_t *quota, size_t *declined)
{
	*declined = 0;
	/* one block: prio (doubles) first, then three arrays of size_t */
	double *prio = malloc(ng * (sizeof(double) + 3 * sizeof(size_t)));
	if (!prio)
		return -1;
	size_t *fresh = (size_t *)(prio + ng), *pass = fresh + ng, *more = pass + ng;
	if (budget < ng) { /* not every group can have one: new patterns first */
		size_t total = 0;
		for (size_t g = 0; g < ng; g++) {
			fresh[g] = new_patterns(s, start[g], start[g + 1]);
			total += fresh[g];
		}
		size_t first = total < budget ? total : budget;
		for (size_t g = 0; g < ng; g++)
			prio[g] = recent[g] - (s->cfg.alarmed_first && alarmed[g] ? ALARMED_GROUP_PRIORITY
										 : 0.0);
		rt_sel_quota_prio(fresh, NULL, prio, ng, first, 1.0, 1.0, pass);
		for (size_t g = 0; g < ng; g++)
			fresh[g] = fresh[g] == 0; /* now: the groups with nothing new, one each */
		if (s->cfg.decline_stale) { /* each would repeat a kept pattern: keep the pick */
			memset(more, 0, ng * sizeof *more);
			*declined = budget - first;
		} else {
			rt_sel_quota_prio(fresh, NULL, recent, ng, budget - first, 1.0, 1.0, more);
		}
		for (size_t g = 0; g < ng; g++)
			quota[g] = pass[g] + more[g];
		goto done;
	}
	rt_sel_quota_prio(sizes, alarmed, recent, ng, budget, s->cfg.alarm_boost, s->cfg.alarm_cap,
			  quota);
	size_t others = 0, total_fresh = 0;
	for (size_t g = 0; g < ng; g++) {
		fresh[g] = 0;
		if (alarmed[g])
			continue;
		others += quota[g];
		fresh[g] = new_patterns(s, start[g], start[g + 1]);
		if (fresh[g] == 0) /* one pick still goes to every group the budget can reach */
			fresh[g] = 1;
		total_fresh += fresh[g];
	}
	rt_sel_quota_prio(fresh, NULL, recent, ng, others < total_fresh ? others : total_fresh, 1.0,
			  1.0, pass);
	size_t used = 0;
	for (size_t g = 0; g < ng; g++) {
		used += pass[g];
		fresh[g] = alarmed[g] ? 0 : sizes[g] - pass[g]; /* now: the other traces */
	}
	rt_sel_quota_prio(fresh, NULL, recent, ng, others - used, 1.0, 1.0, more);
	for (size_t g = 0; g < ng; g++)
		if (!alarmed[g])
			quota[g] = pass[g] + more[g];
done:
	free(prio);
	return 0;
}

/* ---------------------------------------------------------------- window */

static int prepare_window(rt_selector *s, size_t n)
{
	if (rt_sel_grow((void **)&s->info, &s->info_cap, n, sizeof *s->info) ||
	    rt_sel_grow((void **)&s->facts, &s->facts_cap, n, sizeof *s->facts) ||
	    rt_sel_grow((void **)&s->verdicts, &s->verdicts_cap, n, sizeof *s->verdicts) ||
	    rt_sel_grow((void **)&s->chosen, &s->chosen_cap, n, sizeof *s->chosen))
		return -1;
	s->arena_len = 0;
	return 0;
}

/* At most this many carried span durations (one minute of a very busy system is
 * then only partly remembered: its p90 comes from a sample). */
#define CARRY_MAX ((size_t)1 << 18)

/* The (operation, minute) keys of the held traces' spans before the newest minute:
 * an open-addressing set (0 = empty) in s->held_keys, s->held_keys_mask. */
static int held_keys_build(rt_selector *s, const rt_sel_minute_sample *v, size_t n,
			   uint64_t newest)
{
	size_t cap = 16;
	while (cap < 2 * n)
		cap <<= 1;
	if (rt_sel_grow((void **)&s->held_keys, &s->held_keys_cap, cap, sizeof *s->held_keys))
		return -1;
	memset(s->held_keys, 0, cap * sizeof *s->held_keys);
	s->held_keys_mask = cap - 1;
	for (size_t i = 0; i < n; i++) {
		if (v[i].minute >= newest)
			continue;
		size_t at = rt_sel_mix64(v[i].key) & s->held_keys_mask;
		while (s->held_keys[at] && s->held_keys[at] != v[i].key)
			at = (at + 1) & s->held_keys_mask;
		s->held_keys[at] = v[i].key; /* minute keys are never 0 */
	}
	return 0;
}

static bool held_key(const rt_selector *s, uint64_t key)
{
	size_t at = rt_sel_mix64(key) & s->held_keys_mask;
	while (s->held_keys[at] && s->held_keys[at] != key)
		at = (at + 1) & s->held_keys_mask;
	return s->held_keys[at] == key;
}

/* Whether a sample of this minute and key goes to the next window: every one of the
 * newest minute, and of the earlier minutes from `from` on those of an (operation,
 * minute) a held trace has a span of (no other span of those minutes comes back). */
static bool carried(const rt_selector *s, uint64_t key, uint64_t minute, uint64_t from,
		    uint64_t newest)
{
	return minute == newest || (minute >= from && minute < newest && held_key(s, key));
}

/* Remember the durations of the spans of the newest minute of trace time in this
 * window (carried ones of that minute stay): the next window's spans of that minute
 * get their tiers against one p90 over all of it, as if the boundary were not there.
 * With held traces, also the spans of the minutes from `from` (the earliest a held
 * trace touches) whose (operation, minute) a held trace shares: the held traces come
 * back in the next window and their spans there must meet the rest of their minute
 * (held_keys_build ran first). The newest minute is this window's, not the newest
 * ever seen, so one span with a far-future start (a bad clock) costs the carry for
 * one window, not for good. */
static int carry_minutes(rt_selector *s, const rt_sel_trace *traces, size_t n, uint64_t from,
			 uint64_t newest)
{
	size_t k = 0, spans = 0;
	for (size_t c = 0; c < s->n_carry; c++)
		if (carried(s, s->carry[c].key, s->carry[c].minute, from, newest))
			s->carry[k++] = s->carry[c];
	for (size_t i = 0; i < n; i++)
		spans += traces[i].n_spans;
	size_t room = k + spans < CARRY_MAX ? k + spans : CARRY_MAX;
	if (rt_sel_grow((void **)&s->carry, &s->carry_cap, room, sizeof *s->carry))
		return -1;
	for (size_t i = 0; i < n; i++)
		for (uint32_t j = 0; j < traces[i].n_spans && k < room; j++) {
			const rt_sel_span *sp = &traces[i].spans[j];
			uint64_t minute = sp->start_ns / 60000000000ull;
			if (minute < from || minute > newest)
				continue;
			uint64_t key = rt_sel_paper_minute_key(sp);
			if (!carried(s, key, minute, from, newest))
				continue;
			s->carry[k++] = (rt_sel_minute_sample){ .key = key,
								.minute = minute,
								.dur = rt_sel_paper_span_dur(sp) };
		}
	s->n_carry = k;
	s->carry_minute = newest;
	return 0;
}

/* The spans of the held traces as samples after the carry (s->carry[n_carry..]), for
 * this window's p90 table only: they count toward their minutes' p90s and get no
 * tier. Only the samples a tier of this window reads: those of the minutes before
 * the newest (the few held traces that began before it share them with the traces
 * selected now), and those of the newest minute only when a trace selected now has
 * a span there (one held before, waiting no more); most held spans are in the newest
 * minute and are read when their traces are selected, so sampling them now would
 * double the table's work for nothing. Raises *latest to the held traces' latest
 * start and lowers *from to their earliest minute. */
static int sample_held(rt_selector *s, rt_sel_trace *held, size_t n_held, uint64_t *latest,
		       uint64_t *from, size_t *n_samples)
{
	size_t spans = 0, k = s->n_carry;
	uint64_t selected_newest = *latest / 60000000000ull;
	for (size_t i = 0; i < n_held; i++) {
		spans += held[i].n_spans;
		for (uint32_t j = 0; j < held[i].n_spans; j++) {
			uint64_t start = held[i].spans[j].start_ns, minute = start / 60000000000ull;
			*latest = start > *latest ? start : *latest;
			*from = minute < *from ? minute : *from;
		}
	}
	uint64_t newest = *latest / 60000000000ull;
	bool newest_read = selected_newest == newest; /* a selected trace has spans there */
	if (rt_sel_grow((void **)&s->carry, &s->carry_cap, k + spans + 1, sizeof *s->carry))
		return -1;
	for (size_t i = 0; i < n_held; i++)
		for (uint32_t j = 0; j < held[i].n_spans; j++) {
			rt_sel_span *sp = &held[i].spans[j];
			uint64_t minute = sp->start_ns / 60000000000ull;
			if (minute == newest && !newest_read)
				continue;
			if (!sp->op_key)
				sp->op_key = memo_key(s, sp);
			s->carry[k++] = (rt_sel_minute_sample){ .key = rt_sel_paper_minute_key(sp),
								.minute = minute,
								.dur = rt_sel_paper_span_dur(sp) };
		}
	*n_samples = k - s->n_carry;
	return 0;
}

/* ---------------------------------------------------------------- the cut minute, again */

/* A kept trace with spans in the minute a window boundary cut had their tiers judged
 * on the part of the minute its window saw; the next window sees the whole minute
 * (its spans plus the carry). The pattern the trace has against the whole minute is
 * the one a later trace of the same shape will get, so it is remembered as kept too:
 * otherwise that later trace looks new and the budget keeps the same pattern twice
 * (the paper judges every span against its whole minute). The copies hold what the
 * encoder reads: op keys, parents, errors, template ids, times. */
static int save_kept_of_cut_minute(rt_selector *s, const rt_sel_trace *traces, size_t n)
{
	if (!s->cfg.minute_tiers)
		return 0;
	if (s->pend_minute != s->carry_minute) /* the pending ones were judged for good */
		s->n_pend = s->n_pend_spans = s->n_pend_logs = 0;
	s->pend_minute = s->carry_minute;
	size_t first_span = 0;
	for (size_t i = 0; i < n; first_span += traces[i].n_spans, i++) {
		const rt_sel_trace *t = &traces[i];
		if (!s->verdicts[i].chosen)
			continue;
		bool cut = false;
		for (uint32_t j = 0; j < t->n_spans && !cut; j++)
			cut = t->spans[j].start_ns / 60000000000ull == s->carry_minute;
		if (!cut)
			continue;
		if (rt_sel_grow((void **)&s->pend, &s->pend_cap, s->n_pend + 1, sizeof *s->pend) ||
		    rt_sel_grow((void **)&s->pend_spans, &s->pend_spans_cap,
				s->n_pend_spans + t->n_spans, sizeof *s->pend_spans) ||
		    rt_sel_grow((void **)&s->pend_tiers, &s->pend_tiers_cap,
				s->n_pend_spans + t->n_spans, 1) ||
		    rt_sel_grow((void **)&s->pend_logs, &s->pend_logs_cap,
				s->n_pend_logs + t->n_logs, sizeof *s->pend_logs))
			return -1;
		/* offsets now, pointers when judged (the arrays may still move) */
		s->pend[s->n_pend++] = (rt_sel_trace){ .spans = (rt_sel_span *)(uintptr_t)s->n_pend_spans,
						       .n_spans = t->n_spans,
						       .logs = (rt_sel_log *)(uintptr_t)s->n_pend_logs,
						       .n_logs = t->n_logs };
		for (uint32_t j = 0; j < t->n_spans; j++) {
			rt_sel_span c = t->spans[j];
			c.op_key = rt_sel_span_key(&c);
			c.service = c.operation = NULL;
			s->pend_spans[s->n_pend_spans] = c;
			s->pend_tiers[s->n_pend_spans++] = s->minute.tier[first_span + j];
		}
		for (uint32_t l = 0; l < t->n_logs; l++) {
			rt_sel_log c = t->logs[l];
			c.text = NULL;
			s->pend_logs[s->n_pend_logs++] = c;
		}
	}
	return 0;
}

/* The kept copies' spans of the cut minute get their tiers against the whole minute
 * (this window's table, which holds the carry), the others keep theirs. */
static int rejudge_kept(rt_selector *s)
{
	for (size_t p = 0; p < s->n_pend; p++) {
		rt_sel_trace t = s->pend[p];
		t.spans = s->pend_spans + (uintptr_t)t.spans;
		uint8_t *tiers = s->pend_tiers + (t.spans - s->pend_spans);
		t.logs = s->pend_logs + (uintptr_t)t.logs;
		bool changed = false;
		for (uint32_t j = 0; j < t.n_spans; j++) {
			if (t.spans[j].start_ns / 60000000000ull != s->pend_minute)
				continue;
			uint8_t tier = (uint8_t)rt_sel_paper_tier(&s->minute, &t.spans[j]);
			changed |= tier != tiers[j];
			tiers[j] = tier;
		}
		if (!changed)
			continue;
		if (rt_sel_encode_minute_tiers(&t, tiers, &s->enc))
			return -1;
		remember_kept(s, rt_sel_pattern_id(s->enc.v, s->enc.n));
	}
	return 0;
}

/* A trace with spans in the cut minute (the window's newest) had them judged on the
 * part of the minute seen so far; the whole minute may judge them otherwise, and a
 * trace kept earlier with that reading would then be repeated. Its likely reading:
 * those spans against the p90 of the minute before (whole in this window). When it
 * differs, *alt is that pattern (novelty checks count it as kept if it was). */
static int alt_pattern(rt_selector *s, const rt_sel_trace *t, const uint8_t *tiers,
		       const uint8_t *alt_tiers, uint64_t *alt)
{
	if (!alt_tiers || memcmp(tiers, alt_tiers, t->n_spans) == 0)
		return 0;
	/* an alternative reading often is another trace's reading in this window, or
	 * in an earlier one */
	size_t slot;
	uint64_t fp = rt_sel_encode_fingerprint(t, alt_tiers);
	const trace_info *same = s->fp_cap ? fp_find(s, fp, &slot) : NULL;
	const enc_memo_entry *known = same ? NULL : enc_memo_find(s, fp);
	if (same || known) {
		*alt = same ? same->pattern : known->pattern;
		return 0;
	}
	if (rt_sel_encode_minute_tiers(t, alt_tiers, &s->enc))
		return -1;
	*alt = rt_sel_pattern_id(s->enc.v, s->enc.n);
	enc_memo_put(s, fp, *alt, s->enc.v, s->enc.n);
	return 0;
}

/* The per-minute p90 table of the window (its spans, the carry, the held traces'
 * spans), the kept copies of the last cut minute judged again, and the carry for the
 * next window. */
static int minute_table(rt_selector *s, const rt_sel_window *w, uint64_t latest)
{
	uint64_t from = UINT64_MAX;
	size_t n_held_samples = 0;
	if (w->n_held &&
	    sample_held(s, w->held, w->n_held, &latest, &from, &n_held_samples))
		return -1;
	uint64_t newest = latest / 60000000000ull;
	from = from < newest ? from : newest;
	/* the last window's newest minute is whole: no reading against the minute before */
	int rc = rt_sel_paper_p90_build_alt(w->traces, w->n, s->carry, s->n_carry + n_held_samples,
					    w->last ? 0 : newest, &s->minute);
	if (rc == 0)
		rc = held_keys_build(s, s->carry + s->n_carry, n_held_samples, newest);
	if (rc == 0)
		rc = rejudge_kept(s);
	if (rc == 0)
		rc = carry_minutes(s, w->traces, w->n, from, newest);
	return rc;
}

static int analyse_traces(rt_selector *s, const rt_sel_window *w)
{
	rt_sel_trace *traces = w->traces;
	size_t n = w->n;
	if (++s->key_gen == 0) { /* wrapped: forget everything */
		memset(s->keys, 0, KEY_MEMO_SIZE * sizeof *s->keys);
		s->key_gen = 1;
	}
	double t0 = cpu_s();
	rt_sel_mine_templates(s, traces, n);
	double t1 = cpu_s();
	uint64_t latest = 0; /* the latest span start: its minute is the window's newest */
	for (size_t i = 0; i < n; i++)
		read_trace(s, &traces[i], &s->info[i], &s->facts[i], &latest);
	double t2 = cpu_s();
	s->times.mining += t1 - t0;
	s->times.prepare += t2 - t1;
	rt_sel_paper_p90_free(&s->minute);
	if (s->cfg.minute_tiers && minute_table(s, w, latest))
		return -1;
	/* the fingerprint table, at most half full (no memo if it cannot be had) */
	size_t cap = 64;
	while (cap < 2 * n)
		cap <<= 1;
	if (cap > s->fp_cap) {
		uint64_t *k = realloc(s->fp_key, cap * sizeof *k);
		if (k)
			s->fp_key = k;
		uint32_t *v = k ? realloc(s->fp_slot, cap * sizeof *v) : NULL;
		if (v)
			s->fp_slot = v;
		s->fp_cap = k && v ? cap : 0;
	}
	if (s->fp_cap)
		memset(s->fp_slot, 0, s->fp_cap * sizeof *s->fp_slot);
	double t3 = cpu_s();
	s->times.p90 += t3 - t2;
	size_t first_span = 0;
	for (size_t i = 0; i < n; i++) {
		trace_info *ti = &s->info[i];
		ti->index = (uint32_t)i;
		const uint8_t *tiers = s->cfg.minute_tiers ? s->minute.tier + first_span : NULL;
		first_span += traces[i].n_spans;
		if (encode_into_arena(s, &traces[i], tiers, ti))
			return -1;
		ti->alt = 0;
		ti->alt_done = false;
		ti->first_span = (uint32_t)(first_span - traces[i].n_spans);
		ti->score = rt_sel_anomaly_score_of(&traces[i], &s->cfg.weights,
						    rt_sel_quantiles_get(s->group_p90, ti->group),
						    s->facts[i].duration, s->facts[i].error_spans);
		s->verdicts[i] = (rt_sel_verdict){ .pattern = ti->pattern,
						   .group = ti->group,
						   .score = ti->score };
	}
	s->times.encode += cpu_s() - t3;
	return 0;
}

static size_t count_groups(const rt_selector *s, size_t n)
{
	size_t ng = 0;
	for (size_t i = 0; i < n; i++)
		ng += i == 0 || s->info[i].group != s->info[i - 1].group;
	return ng;
}

int rt_sel_select_window(rt_selector *s, rt_sel_trace *traces, size_t n, size_t budget,
			 const uint64_t *alarmed_groups, size_t n_alarmed, rt_sel_result *out)
{
	return rt_sel_select_window_part(s, traces, n, budget, alarmed_groups, n_alarmed, 1.0, out);
}

int rt_sel_select_window_part(rt_selector *s, rt_sel_trace *traces, size_t n, size_t budget,
			      const uint64_t *alarmed_groups, size_t n_alarmed, double coverage,
			      rt_sel_result *out)
{
	rt_sel_window w = { .traces = traces, .n = n, .budget = budget,
			    .alarmed_groups = alarmed_groups, .n_alarmed = n_alarmed,
			    .coverage = coverage };
	return rt_sel_select(s, &w, out);
}

int rt_sel_select(rt_selector *s, const rt_sel_window *w, rt_sel_result *out)
{
	rt_sel_trace *traces = w->traces;
	size_t n = w->n, budget = w->budget, n_alarmed = w->n_alarmed;
	const uint64_t *alarmed_groups = w->alarmed_groups;
	double coverage = w->coverage;
	*out = (rt_sel_result){ 0 };
	if (!(coverage > 0) || coverage > 1)
		coverage = 1.0;
	if (n == 0)
		return 0;
	s->win = traces;
	if (prepare_window(s, n) || analyse_traces(s, w))
		return -1;
	double t_choose = cpu_s();
	qsort(s->info, n, sizeof *s->info, by_group_pattern_score);
	size_t ng = count_groups(s, n);
	size_t *start = malloc((ng + 1) * sizeof *start);
	size_t *sizes = malloc(ng * sizeof *sizes);
	size_t *quota = malloc(ng * sizeof *quota);
	bool *alarmed = malloc(ng * sizeof *alarmed);
	double *recent = malloc(ng * sizeof *recent);
	int rc = -1;
	if (!start || !sizes || !quota || !alarmed || !recent)
		goto out;
	bool any_alarm = false;
	for (size_t i = 0, g = 0; i < n; i++) {
		if (i > 0 && s->info[i].group == s->info[i - 1].group)
			continue;
		start[g] = i;
		alarmed[g] = is_alarmed(s->info[i].group, alarmed_groups, n_alarmed);
		any_alarm |= alarmed[g];
		g++;
	}
	start[ng] = n;
	for (size_t g = 0; g < ng; g++)
		sizes[g] = start[g + 1] - start[g];
	size_t eff = effective_budget(s, n, budget, any_alarm, coverage);
	/* When the budget is smaller than the number of groups, groups whose every
     * pattern was kept in an earlier window go last: a pick there adds nothing new. */
	for (size_t g = 0; g < ng; g++) {
		group_stat *st = group_stats(s, s->info[start[g]].group);
		recent[g] = st ? st->kept : 0.0;
		bool fresh = !s->cfg.novelty_first;
		for (size_t i = start[g]; i < start[g + 1] && !fresh; i++)
			fresh = (i == start[g] || s->info[i].pattern != s->info[i - 1].pattern) &&
				!info_was_kept(s, &s->info[i]);
		if (!fresh && s->cfg.novelty_first)
			recent[g] += STALE_GROUP_PRIORITY;
	}
	size_t declined = 0;
	if (s->cfg.novelty_first &&
	    fresh_first_quota(s, start, sizes, alarmed, recent, ng, eff, quota, &declined))
		goto out;
	if (!s->cfg.novelty_first)
		rt_sel_quota_prio(sizes, alarmed, recent, ng, eff, s->cfg.alarm_boost,
				  s->cfg.alarm_cap, quota);
	size_t n_chosen = 0;
	for (size_t g = 0; g < ng; g++) {
		size_t before = n_chosen;
		if (quota[g] && select_in_group(s, s->info + start[g], sizes[g], quota[g],
						s->cfg.novelty_first && eff < ng, &n_chosen))
			goto out;
		double w = n_chosen > before ? (double)sizes[g] / (double)(n_chosen - before) : 0.0;
		for (size_t c = before; c < n_chosen; c++)
			s->verdicts[s->chosen[c]].weight = w;
	}
	if (w->last) /* nothing follows to judge them again */
		s->n_pend = s->n_pend_spans = s->n_pend_logs = 0;
	else if (save_kept_of_cut_minute(s, traces, n))
		goto out;
	decay_groups(s);
	for (size_t c = 0; c < n_chosen; c++) {
		const rt_sel_verdict *v = &s->verdicts[s->chosen[c]];
		remember_kept(s, v->pattern);
		group_stat *st = group_stats(s, v->group);
		if (st)
			st->kept += 1.0;
	}
	*out = (rt_sel_result){ .n_traces = n,
				.budget = eff,
				.n_chosen = n_chosen,
				.declined = declined,
				.n_groups = ng,
				.verdicts = s->verdicts,
				.chosen = s->chosen };
	rc = 0;
out:
	free(start);
	free(sizes);
	free(quota);
	free(alarmed);
	free(recent);
	s->times.choose += cpu_s() - t_choose;
	return rc;
}
