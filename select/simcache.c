/* simcache.c — bounded LRU cache of pattern-pair similarities, kept across windows.
 *
 * Entries live in a fixed array of `capacity` slots; a chained hash table (bucket
 * heads + per-entry next index) finds them, and a doubly linked list by index keeps
 * them in recency order. A miss on a full cache reuses the least recently used slot.
 * The key is the unordered pattern pair, stored as (min, max).
 */
#include "internal.h"
#include "select.h"

#include <stdlib.h>

#define NIL UINT32_MAX

typedef struct entry {
	uint64_t a, b;
	float sim;
	uint32_t next_in_bucket;
	uint32_t newer, older;
} entry;

struct rt_sel_simcache {
	entry *e;
	uint32_t *bucket;
	size_t capacity, used, nbuckets;
	uint32_t newest, oldest;
	uint64_t hits, misses;
};

rt_sel_simcache *rt_sel_simcache_create(size_t capacity)
{
	if (capacity < 1)
		capacity = 1;
	if (capacity > NIL - 1)
		capacity = NIL - 1;
	rt_sel_simcache *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->capacity = capacity;
	c->nbuckets = 1;
	while (c->nbuckets < capacity)
		c->nbuckets <<= 1;
	c->e = malloc(capacity * sizeof *c->e);
	c->bucket = malloc(c->nbuckets * sizeof *c->bucket);
	if (!c->e || !c->bucket) {
		rt_sel_simcache_destroy(c);
		return NULL;
	}
	for (size_t i = 0; i < c->nbuckets; i++)
		c->bucket[i] = NIL;
	c->newest = c->oldest = NIL;
	return c;
}

void rt_sel_simcache_destroy(rt_sel_simcache *c)
{
	if (!c)
		return;
	free(c->e);
	free(c->bucket);
	free(c);
}

size_t rt_sel_simcache_size(const rt_sel_simcache *c)
{
	return c->used;
}
uint64_t rt_sel_simcache_hits(const rt_sel_simcache *c)
{
	return c->hits;
}
uint64_t rt_sel_simcache_misses(const rt_sel_simcache *c)
{
	return c->misses;
}

static size_t bucket_of(const rt_sel_simcache *c, uint64_t a, uint64_t b)
{
	return rt_sel_combine(a, b) & (c->nbuckets - 1);
}

static void order(uint64_t *a, uint64_t *b)
{
	if (*a > *b) {
		uint64_t t = *a;
		*a = *b;
		*b = t;
	}
}

static void unlink_lru(rt_sel_simcache *c, uint32_t i)
{
	entry *x = &c->e[i];
	if (x->newer != NIL)
		c->e[x->newer].older = x->older;
	else
		c->newest = x->older;
	if (x->older != NIL)
		c->e[x->older].newer = x->newer;
	else
		c->oldest = x->newer;
}

static void push_newest(rt_sel_simcache *c, uint32_t i)
{
	entry *x = &c->e[i];
	x->newer = NIL;
	x->older = c->newest;
	if (c->newest != NIL)
		c->e[c->newest].newer = i;
	c->newest = i;
	if (c->oldest == NIL)
		c->oldest = i;
}

static uint32_t lookup(const rt_sel_simcache *c, uint64_t a, uint64_t b)
{
	for (uint32_t i = c->bucket[bucket_of(c, a, b)]; i != NIL; i = c->e[i].next_in_bucket)
		if (c->e[i].a == a && c->e[i].b == b)
			return i;
	return NIL;
}

bool rt_sel_simcache_get(rt_sel_simcache *c, uint64_t pa, uint64_t pb, float *sim)
{
	order(&pa, &pb);
	uint32_t i = lookup(c, pa, pb);
	if (i == NIL) {
		c->misses++;
		return false;
	}
	c->hits++;
	if (c->newest != i) {
		unlink_lru(c, i);
		push_newest(c, i);
	}
	*sim = c->e[i].sim;
	return true;
}

static void unlink_bucket(rt_sel_simcache *c, uint32_t i)
{
	uint32_t *p = &c->bucket[bucket_of(c, c->e[i].a, c->e[i].b)];
	while (*p != i)
		p = &c->e[*p].next_in_bucket;
	*p = c->e[i].next_in_bucket;
}

void rt_sel_simcache_put(rt_sel_simcache *c, uint64_t pa, uint64_t pb, float sim)
{
	order(&pa, &pb);
	uint32_t i = lookup(c, pa, pb);
	if (i != NIL) {
		c->e[i].sim = sim;
		return;
	}
	if (c->used < c->capacity) {
		i = (uint32_t)c->used++;
	} else {
		i = c->oldest; /* reuse the least recently used slot */
		unlink_lru(c, i);
		unlink_bucket(c, i);
	}
	entry *x = &c->e[i];
	x->a = pa;
	x->b = pb;
	x->sim = sim;
	size_t bk = bucket_of(c, pa, pb);
	x->next_in_bucket = c->bucket[bk];
	c->bucket[bk] = i;
	push_newest(c, i);
}
