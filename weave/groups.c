/* groups.c — union-find over 128-bit trace ids, for joining woven hops.
 *
 * Trace ids live in an open-addressing hash table (linear probing, grown at half
 * full); each slot holds the id and the index of its parent slot. Linking a child
 * trace under a parent hangs the child's root under the parent's root, so the root
 * of a group is always its most upstream trace (the caller side wins). Finds halve
 * the path as they go.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>

typedef struct slot {
    uint64_t hi, lo;
    size_t parent; /* slot index */
    bool used;
} slot;

struct rt_weave_groups {
    slot *slots;
    size_t cap, n;
};

static uint64_t mix(uint64_t hi, uint64_t lo)
{
    uint64_t x = lo ^ (hi * 0x9e3779b97f4a7c15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

rt_weave_groups *rt_weave_groups_new(size_t expected)
{
    rt_weave_groups *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    size_t cap = 16;
    while (cap < expected * 2)
        cap *= 2;
    g->slots = calloc(cap, sizeof *g->slots);
    if (!g->slots) {
        free(g);
        return NULL;
    }
    g->cap = cap;
    return g;
}

void rt_weave_groups_free(rt_weave_groups *g)
{
    if (!g)
        return;
    free(g->slots);
    free(g);
}

static size_t probe(const rt_weave_groups *g, uint64_t hi, uint64_t lo)
{
    size_t i = mix(hi, lo) & (g->cap - 1);
    while (g->slots[i].used && (g->slots[i].hi != hi || g->slots[i].lo != lo))
        i = (i + 1) & (g->cap - 1);
    return i;
}

static int grow(rt_weave_groups *g)
{
    slot *old = g->slots;
    size_t old_cap = g->cap, *moved = malloc(old_cap * sizeof *moved);
    slot *fresh = calloc(old_cap * 2, sizeof *fresh);
    if (!fresh || !moved) {
        free(fresh);
        free(moved);
        return -1;
    }
    g->slots = fresh;
    g->cap = old_cap * 2;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].used) {
            size_t j = probe(g, old[i].hi, old[i].lo);
            g->slots[j] = old[i];
            moved[i] = j;
        }
    for (size_t j = 0; j < g->cap; j++)
        if (g->slots[j].used)
            g->slots[j].parent = moved[g->slots[j].parent];
    free(moved);
    free(old);
    return 0;
}

/* The slot of a trace id, inserted as its own root when new; SIZE_MAX on ENOMEM. */
static size_t slot_of(rt_weave_groups *g, uint64_t hi, uint64_t lo)
{
    if ((g->n + 1) * 2 > g->cap && grow(g) < 0)
        return SIZE_MAX;
    size_t i = probe(g, hi, lo);
    if (!g->slots[i].used) {
        g->slots[i] = (slot){hi, lo, i, true};
        g->n++;
    }
    return i;
}

static size_t find(rt_weave_groups *g, size_t i)
{
    while (g->slots[i].parent != i) {
        g->slots[i].parent = g->slots[g->slots[i].parent].parent;
        i = g->slots[i].parent;
    }
    return i;
}

int rt_weave_groups_link(rt_weave_groups *g, uint64_t parent_hi, uint64_t parent_lo,
                         uint64_t child_hi, uint64_t child_lo)
{
    if (!g)
        return -EINVAL;
    size_t p = slot_of(g, parent_hi, parent_lo);
    if (p == SIZE_MAX)
        return -ENOMEM;
    size_t c = slot_of(g, child_hi, child_lo); /* may grow: look the parent up again */
    if (c == SIZE_MAX)
        return -ENOMEM;
    p = probe(g, parent_hi, parent_lo);
    size_t rp = find(g, p), rc = find(g, c);
    if (rp != rc)
        g->slots[rc].parent = rp;
    return 0;
}

void rt_weave_groups_root(rt_weave_groups *g, uint64_t hi, uint64_t lo, uint64_t *root_hi,
                          uint64_t *root_lo)
{
    *root_hi = hi;
    *root_lo = lo;
    if (!g)
        return;
    size_t i = probe(g, hi, lo);
    if (!g->slots[i].used)
        return;
    i = find(g, i);
    *root_hi = g->slots[i].hi;
    *root_lo = g->slots[i].lo;
}
