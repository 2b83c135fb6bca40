/*
 * store/clickhouse_cache.c — the ClickHouse backend's memory of its own writes.
 *
 * Traces live in a chained hash table on trace_lo and on a list from oldest
 * to newest; trimming frees from the oldest end until both bounds hold again.
 * A slice is one allocation: the struct, then its message bytes. Entries are
 * added UNKNOWN and their trace_lo goes on the `unknown` list, which the
 * backend settles with one query per batch (FRESH or OLD).
 *
 * Triggers: linear probing on a 64-bit mix of (agent, seq), doubled at half
 * full; entries are never removed (a removed trigger keeps its slot, state
 * CHT_REMOVED), so probe chains stay intact.
 */
#include "clickhouse_cache.h"

#include <sys/random.h>
#include <sys/types.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

int chc_init(struct chc *c, uint32_t max_traces, size_t max_bytes)
{
	memset(c, 0, sizeof *c);
	c->nbuckets = 1;
	while (c->nbuckets < max_traces)
		c->nbuckets <<= 1;
	c->max_traces = max_traces;
	c->max_bytes = max_bytes;
	c->bucket = calloc(c->nbuckets, sizeof *c->bucket);
	/* The kernel's randomness; if it has none to give, the clock and an address
	 * (the daemons' rt_random_seed does the same, but store/ may not use daemon/). */
	if (getrandom(&c->seed, sizeof c->seed, GRND_NONBLOCK) != (ssize_t)sizeof c->seed) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		c->seed = chc_mix64((uint64_t)ts.tv_nsec << 32 ^ (uint64_t)ts.tv_sec ^
				    (uint64_t)(uintptr_t)c);
	}
	return c->bucket ? 0 : -1;
}

static uint32_t bucket_of(const struct chc *c, uint64_t lo)
{
	return (uint32_t)(chc_mix64(lo ^ c->seed) & (c->nbuckets - 1));
}

static void free_trace(struct chc_trace *t)
{
	struct chc_slice *s = t->head, *n;
	for (; s; s = n) {
		n = s->next;
		free(s);
	}
	free(t->row);
	free(t);
}

void chc_clear(struct chc *c)
{
	struct chc_trace *t = c->oldest, *n;
	for (; t; t = n) {
		n = t->newer;
		free_trace(t);
	}
	if (c->bucket)
		memset(c->bucket, 0, c->nbuckets * sizeof *c->bucket);
	c->oldest = c->newest = NULL;
	c->ntraces = 0;
	c->bytes = 0;
	c->nunknown = 0;
}

void chc_free(struct chc *c)
{
	chc_clear(c);
	free(c->bucket);
	free(c->unknown);
	memset(c, 0, sizeof *c);
}

struct chc_trace *chc_get(struct chc *c, uint64_t lo)
{
	struct chc_trace *t;
	if (!c->bucket)
		return NULL;
	for (t = c->bucket[bucket_of(c, lo)]; t; t = t->hnext)
		if (t->lo == lo)
			return t;
	return NULL;
}

static void evict_oldest(struct chc *c)
{
	struct chc_trace *t = c->oldest, **pp;
	if (!t)
		return;
	for (pp = &c->bucket[bucket_of(c, t->lo)]; *pp != t; pp = &(*pp)->hnext)
		;
	*pp = t->hnext;
	c->oldest = t->newer;
	if (c->oldest)
		c->oldest->older = NULL;
	else
		c->newest = NULL;
	c->ntraces--;
	c->bytes -= t->bytes;
	free_trace(t);
}

void chc_trim(struct chc *c)
{
	while (c->oldest && c->oldest != c->newest &&
	       (c->ntraces > c->max_traces || c->bytes > c->max_bytes))
		evict_oldest(c);
}

struct chc_trace *chc_touch(struct chc *c, uint64_t lo)
{
	struct chc_trace *t = chc_get(c, lo);
	uint32_t h;
	if (t || !c->bucket)
		return t;
	if (c->nunknown == c->capunknown) {
		uint32_t cap = c->capunknown ? c->capunknown * 2 : 256;
		uint64_t *u = realloc(c->unknown, cap * sizeof *u);
		if (!u)
			return NULL;
		c->unknown = u;
		c->capunknown = cap;
	}
	if (!(t = calloc(1, sizeof *t)))
		return NULL;
	t->lo = lo;
	t->known = CHC_UNKNOWN;
	h = bucket_of(c, lo);
	t->hnext = c->bucket[h];
	c->bucket[h] = t;
	t->older = c->newest;
	if (c->newest)
		c->newest->newer = t;
	else
		c->oldest = t;
	c->newest = t;
	c->ntraces++;
	c->unknown[c->nunknown++] = lo;
	return t;
}

int chc_add_slice(struct chc *c, struct chc_trace *t, const struct rt_store_slice *sl)
{
	struct chc_slice *s = malloc(sizeof *s + sl->msg_len);
	if (!s)
		return -1;
	s->sl = *sl;
	s->sl.msg = s + 1;
	if (sl->msg_len)
		memcpy(s + 1, sl->msg, sl->msg_len);
	s->next = NULL;
	if (t->tail)
		t->tail->next = s;
	else
		t->head = s;
	t->tail = s;
	t->bytes += sizeof *s + sl->msg_len;
	c->bytes += sizeof *s + sl->msg_len;
	return 0;
}

int chc_set_row(struct chc_trace *t, const struct rt_store_trace *row, int deleted)
{
	if (!t->row && !(t->row = malloc(sizeof *t->row)))
		return -1;
	*t->row = *row;
	t->row_deleted = deleted;
	return 0;
}

void chc_drop_slices(struct chc *c, struct chc_trace *t, uint64_t hi)
{
	struct chc_slice **pp = &t->head, *s;
	t->tail = NULL;
	while ((s = *pp)) {
		if (s->sl.trace_hi == hi) {
			*pp = s->next;
			t->bytes -= sizeof *s + s->sl.msg_len;
			c->bytes -= sizeof *s + s->sl.msg_len;
			free(s);
		} else {
			t->tail = s;
			pp = &s->next;
		}
	}
}

/* ---------------------------------------------------------- triggers -- */

static uint32_t trig_slot(const struct chc_trigs *m, uint32_t agent, uint64_t seq)
{
	return (uint32_t)(chc_mix64(seq ^ chc_mix64(agent)) & (m->cap - 1));
}

struct chc_trig *chc_trig_find(struct chc_trigs *m, uint32_t agent, uint64_t seq)
{
	if (!m->cap)
		return NULL;
	for (uint32_t i = trig_slot(m, agent, seq);; i = (i + 1) & (m->cap - 1)) {
		struct chc_trig *t = &m->slot[i];
		if (t->state == CHT_EMPTY)
			return NULL;
		if (t->agent == agent && t->seq == seq)
			return t;
	}
}

static int grow(struct chc_trigs *m)
{
	struct chc_trigs bigger = { .cap = m->cap ? m->cap * 2 : 1024 };
	if (!(bigger.slot = calloc(bigger.cap, sizeof *bigger.slot)))
		return -1;
	for (uint32_t i = 0; i < m->cap; i++) {
		struct chc_trig *t = &m->slot[i];
		uint32_t j;
		if (t->state == CHT_EMPTY)
			continue;
		for (j = trig_slot(&bigger, t->agent, t->seq); bigger.slot[j].state != CHT_EMPTY;
		     j = (j + 1) & (bigger.cap - 1))
			;
		bigger.slot[j] = *t;
		bigger.n++;
	}
	free(m->slot);
	*m = bigger;
	return 0;
}

struct chc_trig *chc_trig_put(struct chc_trigs *m, uint32_t agent, uint64_t seq)
{
	struct chc_trig *t = chc_trig_find(m, agent, seq);
	uint32_t i;
	if (t)
		return t;
	if ((m->n + 1) * 2 > m->cap && grow(m))
		return NULL;
	for (i = trig_slot(m, agent, seq); m->slot[i].state != CHT_EMPTY; i = (i + 1) & (m->cap - 1))
		;
	t = &m->slot[i];
	memset(t, 0, sizeof *t);
	t->agent = agent;
	t->seq = seq;
	m->n++;
	return t; /* state CHT_EMPTY until the caller sets it */
}

void chc_trig_free(struct chc_trigs *m)
{
	free(m->slot);
	memset(m, 0, sizeof *m);
}
