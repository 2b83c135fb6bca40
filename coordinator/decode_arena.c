/*
 * coordinator/decode_arena.c — the decoder's memory: a bump arena (every string
 * and array of a decoded trace lives in one, freed at once), growable arrays,
 * and an open-addressing map from 64-bit ids to indexes, seeded per decoder.
 */
#include "decode_internal.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/random.h"

/* ------------------------------------------------------------- arena ---- */


void *rt_dec_alloc(struct arena *a, size_t n)
{
	const size_t align = alignof(max_align_t);
	struct arena_chunk *c = a->head;
	size_t at;

	if (n == 0)
		n = 1;
	if (c) {
		at = (c->used + align - 1) & ~(align - 1);
		if (at <= c->cap && c->cap - at >= n) {
			c->used = at + n;
			return c->data + at;
		}
	}
	if (n > ARENA_CHUNK / 4) {
		/* A big block gets a chunk of its own behind the head, so the room
		 * left in the head chunk stays usable. */
		c = malloc(sizeof *c + n);
		if (!c)
			return NULL;
		c->used = c->cap = n;
		if (a->head) {
			c->next = a->head->next;
			a->head->next = c;
		} else {
			c->next = NULL;
			a->head = c;
		}
		return c->data;
	}
	c = malloc(sizeof *c + ARENA_CHUNK);
	if (!c)
		return NULL;
	c->cap = ARENA_CHUNK;
	c->used = n;
	c->next = a->head;
	a->head = c;
	return c->data;
}

char *rt_dec_strndup(struct arena *a, const char *s, size_t n)
{
	char *d = rt_dec_alloc(a, n + 1);
	if (!d)
		return NULL;
	if (n)
		memcpy(d, s, n);
	d[n] = 0;
	return d;
}

void rt_dec_arena_free(struct arena *a)
{
	while (a->head) {
		struct arena_chunk *next = a->head->next;
		free(a->head);
		a->head = next;
	}
}

/* Grow *p (an array of `elem`-sized items with capacity *cap) to hold `need`. */
int rt_dec_grow(void *p, size_t *cap, size_t need, size_t elem)
{
	void **pp = p;
	size_t c = *cap ? *cap : 16;
	void *n;
	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	if (c > SIZE_MAX / elem || !(n = realloc(*pp, c * elem)))
		return -1;
	*pp = n;
	*cap = c;
	return 0;
}

/* qsort, minus the undefined behaviour of a NULL base with no items. */
void rt_dec_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

/* -------------------------------------------------------- id hash map ---- */


static size_t idmap_slot(const struct idmap *m, uint64_t key)
{
	size_t i = (size_t)rt_mix64(key ^ m->seed) & (m->cap - 1);
	while (m->vals[i] != NO_SPAN && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	return i;
}

static int idmap_rehash(struct idmap *m, size_t cap)
{
	struct idmap n = { calloc(cap, sizeof *n.keys), malloc(cap * sizeof *n.vals), cap, 0, m->seed };
	size_t i;
	if (!n.keys || !n.vals) {
		free(n.keys);
		free(n.vals);
		return -1;
	}
	memset(n.vals, 0xff, cap * sizeof *n.vals);
	for (i = 0; i < m->cap; i++) {
		if (m->vals[i] != NO_SPAN) {
			size_t s = idmap_slot(&n, m->keys[i]);
			n.keys[s] = m->keys[i];
			n.vals[s] = m->vals[i];
			n.n++;
		}
	}
	free(m->keys);
	free(m->vals);
	*m = n;
	return 0;
}

uint32_t rt_dec_idmap_get(const struct idmap *m, uint64_t key)
{
	return m->cap ? m->vals[idmap_slot(m, key)] : NO_SPAN;
}

/* Insert key -> val unless present; *existing gets the value found (or val). */
int rt_dec_idmap_put(struct idmap *m, uint64_t key, uint32_t val, uint32_t *existing)
{
	size_t s;
	if ((m->n + 1) * 2 > m->cap && idmap_rehash(m, m->cap ? m->cap * 2 : 64) != 0)
		return -1;
	s = idmap_slot(m, key);
	if (m->vals[s] == NO_SPAN) {
		m->keys[s] = key;
		m->vals[s] = val;
		m->n++;
	}
	*existing = m->vals[s];
	return 0;
}

void rt_dec_idmap_free(struct idmap *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof *m);
}

