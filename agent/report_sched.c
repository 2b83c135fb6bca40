/*
 * agent/report_sched.c — trigger classes, reporting queues, fair sharing.
 *
 * Classes live in a fixed table searched linearly by trigger id (a host sees a
 * handful of trigger ids; past RT_REPORT_MAX_CLASSES they share the OTHER class).
 * A class's queue is an array of trace indices kept sorted by ascending
 * priority: the next to send is at the end, the next to abandon at the front.
 * Insertion is a binary search and a memmove; queues hold at most the traces
 * the index holds, and a memmove of a few thousand words is cheaper than the
 * slice it schedules.
 *
 * Fairness is deficit round robin over classes with a trace ready to go: a
 * class whose turn it is gains quantum x weight bytes of deficit per visit and
 * may send its pick once its deficit covers it. A class's pick is its
 * highest-priority trace that its level admits and whose hold is over: the
 * scan from the top of the queue passes only traces still held (few: those
 * queued within the last hold_ns) and stops at the first one under the level
 * (the rest of the queue is lower still). Bandwidth is two token buckets
 * (global, per class) in bytes; a slice may go when the bucket is positive and
 * is charged in full, so a slice larger than a second's budget still goes, then
 * waits.
 *
 * Levels: the threshold of level k is 2^64 - 2^(64-k), so each level halves
 * the share of priorities that go, and a trace admitted at level k is admitted
 * at every lower level. Raising is the overload policy's call (report_pipeline.c);
 * this file only moves the level and finds the traces it no longer admits,
 * which sit at the front of the sorted queue.
 */
#include "report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "retrace/retrace.h"

#define OTHER_INDEX RT_REPORT_MAX_CLASSES

/*
 * The complement of the client's sampling hash (retrace_trace_hash): the
 * client records a trace iff its hash < 2^64 >> shift, and level k reports it
 * iff its priority >= 2^64 - 2^(64-k), i.e. iff its hash < 2^64 >> k. Both
 * steps keep the low hashes, so they nest on one random value: a trace is kept
 * at rate 2^-max(shift, k), which is what an estimate must know (a hash of its
 * own here would make the two steps independent, and trace counts biased).
 */
uint64_t rt_report_priority(uint64_t lo)
{
	retrace_trace_id id = { 0, lo };
	return ~retrace_trace_hash(id);
}

uint64_t rt_report_threshold(uint32_t level)
{
	if (level == 0)
		return 0;
	if (level >= 64)
		return UINT64_MAX;
	return ~0ull - (~0ull >> level);
}

/*
 * Classes are taken from the table in order (rt_report_class_of) and never
 * given back, so the used ones are the prefix [0, classes_used) and OTHER.
 * Every walk over classes visits only those, in index order: an idle agent's
 * pass walked all 257 slots twice a millisecond, a tenth of its CPU.
 */
#define NO_CLASS UINT32_MAX

static uint32_t first_class(const struct rt_report *r)
{
	return r->classes_used ? 0 : OTHER_INDEX;
}

/* The used class after slot i, or NO_CLASS after OTHER. */
static uint32_t class_after(const struct rt_report *r, uint32_t i)
{
	if (i == OTHER_INDEX)
		return NO_CLASS;
	return i + 1 < r->classes_used ? i + 1 : OTHER_INDEX;
}

#define FOR_EACH_CLASS(r, i) for ((i) = first_class(r); (i) != NO_CLASS; (i) = class_after((r), (i)))

static int parse_weights(struct rt_report *r, char *err, size_t errlen)
{
	const char *s = r->cfg.weights;
	while (*s) {
		char *end;
		unsigned long id;
		double w;
		errno = 0;
		id = strtoul(s, &end, 0);
		if (errno || end == s || *end != ':' || id > UINT32_MAX)
			goto bad;
		s = end + 1;
		w = strtod(s, &end);
		if (end == s || !(w > 0 && w <= 1e6) || (*end && *end != ','))
			goto bad;
		rt_report_class_of(r, (uint32_t)id)->weight = w;
		s = *end ? end + 1 : end;
	}
	return 0;
bad:
	snprintf(err, errlen, "trigger weights must look like ID:WEIGHT,ID:WEIGHT, got '%s'",
		 r->cfg.weights);
	return -1;
}

int rt_report_init(struct rt_report *r, const struct rt_report_config *cfg,
		   uint32_t trace_capacity, char *err, size_t errlen)
{
	memset(r, 0, sizeof *r);
	r->cfg = *cfg;
	if (r->cfg.quantum == 0)
		r->cfg.quantum = 256 * 1024;
	r->trace_capacity = trace_capacity;
	r->trace_class = calloc(trace_capacity, sizeof *r->trace_class);
	r->trace_since = calloc(trace_capacity, sizeof *r->trace_since);
	if (!r->trace_class || !r->trace_since) {
		free(r->trace_class);
		free(r->trace_since);
		r->trace_class = NULL;
		r->trace_since = NULL;
		snprintf(err, errlen, "out of memory for %u trace classes", trace_capacity);
		return -1;
	}
	r->classes[OTHER_INDEX].trigger_id = RT_REPORT_OTHER_CLASS;
	r->classes[OTHER_INDEX].used = 1;
	r->classes[OTHER_INDEX].weight = 1.0;
	r->global_tokens = cfg->bandwidth;
	r->wary = RT_INDEX_NONE;
	if (parse_weights(r, err, errlen) != 0) {
		rt_report_free(r);
		return -1;
	}
	return 0;
}

void rt_report_free(struct rt_report *r)
{
	uint32_t i;
	for (i = 0; i <= OTHER_INDEX; i++)
		free(r->classes[i].queue);
	free(r->trace_class);
	free(r->trace_since);
	memset(r, 0, sizeof *r);
}

struct rt_report_class *rt_report_class_of(struct rt_report *r, uint32_t trigger_id)
{
	uint32_t i;
	for (i = 0; i < OTHER_INDEX; i++) {
		struct rt_report_class *c = &r->classes[i];
		if (c->used && c->trigger_id == trigger_id)
			return c;
		if (!c->used) {
			c->used = 1;
			r->classes_used = i + 1;
			c->trigger_id = trigger_id;
			c->weight = 1.0;
			c->trig_tokens = r->cfg.trigger_burst;
			c->byte_tokens = r->cfg.class_bandwidth;
			return c;
		}
	}
	return &r->classes[OTHER_INDEX];
}

static double refill(double tokens, double rate, double cap, double secs)
{
	tokens += rate * secs;
	return tokens > cap ? cap : tokens;
}

void rt_report_refill(struct rt_report *r, uint64_t now_ns)
{
	double secs;
	uint32_t i;
	if (r->last_refill_ns == 0 || now_ns <= r->last_refill_ns) {
		r->last_refill_ns = r->last_refill_ns ? r->last_refill_ns : now_ns;
		return;
	}
	secs = (double)(now_ns - r->last_refill_ns) / 1e9;
	r->last_refill_ns = now_ns;
	if (r->cfg.bandwidth > 0)
		r->global_tokens = refill(r->global_tokens, r->cfg.bandwidth, r->cfg.bandwidth, secs);
	FOR_EACH_CLASS(r, i) {
		struct rt_report_class *c = &r->classes[i];
		c->trig_tokens = refill(c->trig_tokens, r->cfg.trigger_rate, r->cfg.trigger_burst, secs);
		if (r->cfg.class_bandwidth > 0)
			c->byte_tokens = refill(c->byte_tokens, r->cfg.class_bandwidth,
						r->cfg.class_bandwidth, secs);
	}
}

int rt_report_admit(struct rt_report *r, struct rt_report_class *c)
{
	c->triggers++;
	if (r->cfg.trigger_rate <= 0 || c->trig_tokens >= 1.0) {
		c->trig_tokens -= r->cfg.trigger_rate > 0 ? 1.0 : 0.0;
		return 1;
	}
	c->rate_limited++;
	return 0;
}

static uint32_t class_index(const struct rt_report *r, const struct rt_report_class *c)
{
	return (uint32_t)(c - r->classes);
}

/* Sort key: priority, then the id itself so that equal priorities still order. */
static int before(const struct rt_index *ix, uint32_t a, uint32_t b)
{
	uint64_t pa = rt_report_priority(ix->traces[a].lo), pb = rt_report_priority(ix->traces[b].lo);
	return pa != pb ? pa < pb : ix->traces[a].lo < ix->traces[b].lo;
}

/* Position of trace t in c's queue, or of the first entry not before it. */
static uint32_t lower_bound(const struct rt_report_class *c, const struct rt_index *ix,
			    uint32_t t)
{
	uint32_t lo = 0, hi = c->queued;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (before(ix, c->queue[mid], t))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void rt_report_enqueue(struct rt_report *r, struct rt_report_class *c,
		       const struct rt_index *ix, uint32_t t, uint64_t now_ns)
{
	const struct rt_trace_entry *e;
	uint32_t pos;
	if (t >= r->trace_capacity || r->trace_class[t])
		return;
	if (c->queued == c->queue_cap) {
		uint32_t cap = c->queue_cap ? c->queue_cap * 2 : 64;
		uint32_t *q = realloc(c->queue, (size_t)cap * sizeof *q);
		if (!q)
			return; /* stays unqueued: pinned until abandoned or evicted */
		c->queue = q;
		c->queue_cap = cap;
	}
	pos = lower_bound(c, ix, t);
	memmove(&c->queue[pos + 1], &c->queue[pos], (size_t)(c->queued - pos) * sizeof *c->queue);
	c->queue[pos] = t;
	c->queued++;
	c->queued_buffers += ix->traces[t].nbuffers;
	r->queued_buffers += ix->traces[t].nbuffers;
	r->trace_class[t] = class_index(r, c) + 1;
	/* Only a trace's first slice waits: once part of it went, the rest follows. */
	e = &ix->traces[t];
	r->trace_since[t] = e->inflight == 0 && e->done_buffers == 0 ? now_ns : 0;
}

void rt_report_add_buffers(struct rt_report *r, const struct rt_index *ix, uint32_t t,
			   uint32_t n)
{
	struct rt_report_class *c;
	(void)ix;
	if (t >= r->trace_capacity || !r->trace_class[t])
		return;
	c = &r->classes[r->trace_class[t] - 1];
	c->queued_buffers += n;
	r->queued_buffers += n;
}

void rt_report_dequeue(struct rt_report *r, const struct rt_index *ix, uint32_t t)
{
	struct rt_report_class *c;
	uint32_t pos, nb;
	if (t >= r->trace_capacity || !r->trace_class[t])
		return;
	c = &r->classes[r->trace_class[t] - 1];
	pos = lower_bound(c, ix, t);
	if (pos < c->queued && c->queue[pos] == t) {
		memmove(&c->queue[pos], &c->queue[pos + 1],
			(size_t)(c->queued - pos - 1) * sizeof *c->queue);
		c->queued--;
	}
	nb = ix->traces[t].nbuffers;
	c->queued_buffers -= nb <= c->queued_buffers ? nb : c->queued_buffers;
	r->queued_buffers -= nb <= r->queued_buffers ? nb : r->queued_buffers;
	r->trace_class[t] = 0;
	r->trace_since[t] = 0;
	if (c->queued == 0) {
		c->queued_buffers = 0;
		c->deficit = 0;
	}
}

static int budget_allows(const struct rt_report *r, const struct rt_report_class *c)
{
	if (r->cfg.bandwidth > 0 && r->global_tokens <= 0)
		return 0;
	if (r->cfg.class_bandwidth > 0 && c->byte_tokens <= 0)
		return 0;
	return 1;
}

#define NO_PICK UINT32_MAX

/* Queue position of the trace class c would send now, or NO_PICK. */
static uint32_t class_pick(const struct rt_report *r, const struct rt_report_class *c,
			   const struct rt_index *ix)
{
	uint32_t pos = c->queued, level = c->level;
	uint64_t floor;
	if (!c->queued || !budget_allows(r, c))
		return NO_PICK;
	if (level < RT_REPORT_MAX_LEVEL &&
	    (class_index(r, c) == r->wary ||
	     (c->raised_ns && r->last_refill_ns < c->raised_ns + r->cfg.settle_ns)))
		level++; /* caution: see rt_report_caution */
	floor = rt_report_threshold(level);
	while (pos-- > 0) {
		uint32_t t = c->queue[pos];
		uint64_t since = r->trace_since[t];
		if (rt_report_priority(ix->traces[t].lo) < floor)
			return NO_PICK; /* and every trace below: not now, or abandoned */
		if (r->blocked && r->blocked(r->blocked_arg, t))
			continue;
		if (!r->holding || since == 0 || r->last_refill_ns >= since + r->cfg.hold_ns)
			return pos;
	}
	return NO_PICK;
}

uint32_t rt_report_next(struct rt_report *r, const struct rt_index *ix,
			struct rt_report_class **cls)
{
	uint32_t pick[OTHER_INDEX + 1];
	uint32_t visits, n = r->classes_used + 1, ready = 0, i;
	if (r->cfg.bandwidth > 0 && r->global_tokens <= 0)
		return RT_INDEX_NONE;
	FOR_EACH_CLASS(r, i) {
		pick[i] = class_pick(r, &r->classes[i], ix);
		ready += pick[i] != NO_PICK;
	}
	if (ready == 0)
		return RT_INDEX_NONE;
	if (r->rr >= r->classes_used && r->rr != OTHER_INDEX)
		r->rr = OTHER_INDEX; /* where walking the unused slots would have led */
	/* Enough visits for the largest slice to earn its deficit at weight >= 1/64.
	 * The cursor walks the used classes only: unused slots never had a pick,
	 * so skipping them changes no turn. */
	for (visits = 0; visits < n * 4096; visits++) {
		struct rt_report_class *c = &r->classes[r->rr];
		if (pick[r->rr] != NO_PICK) {
			uint32_t t = c->queue[pick[r->rr]];
			int64_t size = (int64_t)ix->traces[t].bytes;
			if (c->deficit >= size) {
				*cls = c;
				return t;
			}
			c->deficit += (int64_t)((double)r->cfg.quantum * c->weight);
		}
		r->rr = class_after(r, r->rr);
		if (r->rr == NO_CLASS)
			r->rr = first_class(r);
	}
	return RT_INDEX_NONE;
}

void rt_report_charge(struct rt_report *r, struct rt_report_class *c, uint64_t bytes)
{
	c->deficit -= (int64_t)bytes;
	if (r->cfg.bandwidth > 0)
		r->global_tokens -= (double)bytes;
	if (r->cfg.class_bandwidth > 0)
		c->byte_tokens -= (double)bytes;
	c->slices_sent++;
	c->slice_bytes_sent += bytes;
}

uint32_t rt_report_victim(struct rt_report *r, const struct rt_index *ix,
			  struct rt_report_class **cls)
{
	struct rt_report_class *worst = NULL;
	double worst_share = -1;
	uint32_t i;
	(void)ix;
	FOR_EACH_CLASS(r, i) {
		struct rt_report_class *c = &r->classes[i];
		double share;
		if (!c->queued)
			continue;
		share = (double)c->queued_buffers / c->weight;
		if (share > worst_share) {
			worst_share = share;
			worst = c;
		}
	}
	if (!worst)
		return RT_INDEX_NONE;
	*cls = worst;
	return worst->queue[0];
}

struct rt_report_class *rt_report_caution(struct rt_report *r, const struct rt_index *ix,
					  uint64_t limit)
{
	struct rt_report_class *c;
	uint64_t q = r->queued_buffers;
	uint32_t top;
	r->wary = RT_INDEX_NONE;
	r->holding = r->raised > 0 || (q > 0 && q >= limit / 16);
	if (q <= limit / 2 || rt_report_victim(r, ix, &c) == RT_INDEX_NONE ||
	    c->level >= RT_REPORT_MAX_LEVEL)
		return NULL;
	top = c->queue[c->queued - 1];
	if (rt_report_priority(ix->traces[top].lo) >= rt_report_threshold(c->level + 1)) {
		r->wary = class_index(r, c);
		return NULL;
	}
	return c; /* only what the next level abandons is left: raise now */
}

uint32_t rt_report_below_level(struct rt_report *r, const struct rt_index *ix,
			       struct rt_report_class **cls)
{
	uint32_t i;
	if (r->raised == 0)
		return RT_INDEX_NONE;
	FOR_EACH_CLASS(r, i) {
		struct rt_report_class *c = &r->classes[i];
		if (c->level && c->queued && !rt_report_admits(c, ix->traces[c->queue[0]].lo)) {
			*cls = c;
			return c->queue[0];
		}
	}
	return RT_INDEX_NONE;
}

int rt_report_raise(struct rt_report *r, struct rt_report_class *c, uint64_t now_ns)
{
	if (c->level >= RT_REPORT_MAX_LEVEL)
		return 0;
	if (c->level++ == 0)
		r->raised++;
	if (c->level > c->max_level)
		c->max_level = c->level;
	c->level_raised++;
	c->raised_ns = now_ns;
	return 1;
}

void rt_report_relax(struct rt_report *r, int calm, uint64_t unix_ns)
{
	uint64_t epoch = r->cfg.relax_ns ? unix_ns / r->cfg.relax_ns : 0;
	uint32_t i;
	if (!calm || r->raised == 0) {
		r->calm_since_ns = 0;
		return;
	}
	if (r->calm_since_ns == 0)
		r->calm_since_ns = unix_ns;
	/* Calm since before the previous epoch began, and not lowered in this one. */
	if (epoch == 0 || r->calm_since_ns > (epoch - 1) * r->cfg.relax_ns ||
	    r->relaxed_epoch == epoch)
		return;
	FOR_EACH_CLASS(r, i) {
		struct rt_report_class *c = &r->classes[i];
		if (!c->level)
			continue;
		if (--c->level == 0)
			r->raised--;
		c->level_lowered++;
	}
	r->relaxed_epoch = epoch;
}
