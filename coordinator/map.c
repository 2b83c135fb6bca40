/*
 * coordinator/map.c — a fixed-size hash map from a non-zero 64-bit key to a value.
 *
 * Linear probing on a power-of-two table, the key xored with a random seed
 * drawn per map and mixed by the splitmix64 finaliser rt_mix64 (trace ids come
 * from whoever sends a traceparent: with a fixed hash, ids that share a slot
 * are easy to make, and one run of them turns every lookup into a scan of the
 * table). A multiply-shift with a random odd multiplier was not enough: its
 * slot bits depend on the key's low bits only, and 1000 ids chosen to share a
 * slot under one multiplier still made a run of 93 under a random one in the
 * stress run (test_map's bound is 64; the finaliser's every output bit depends
 * on every input bit; agent/index.c learnt the same of a single multiply round). And
 * backward-shift deletion (no tombstones, so lookups stay short however
 * many deletes happen). The table never grows: the caller sizes it and counts
 * a full table as a drop. Kept at most 7/8 full so that probes terminate fast.
 */
#include "coord_internal.h"

#include <stdlib.h>

#include "daemon/random.h"

static uint32_t slot_of(const struct coord_map *m, uint64_t key)
{
	return (uint32_t)rt_mix64(key ^ m->seed) & m->mask;
}

uint32_t coord_map_home(const struct coord_map *m, uint64_t key)
{
	return slot_of(m, key);
}

int coord_map_init(struct coord_map *m, uint32_t capacity_pow2)
{
	m->keys = calloc(capacity_pow2, sizeof *m->keys);
	m->vals = calloc(capacity_pow2, sizeof *m->vals);
	m->mask = capacity_pow2 - 1;
	m->count = 0;
	m->seed = rt_random_seed(m);
	return m->keys && m->vals ? 0 : -1;
}

void coord_map_free(struct coord_map *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = m->vals = NULL;
}

int coord_map_get(const struct coord_map *m, uint64_t key, uint64_t *val)
{
	uint32_t i;
	if (!key || !m->keys)
		return 0;
	for (i = slot_of(m, key); m->keys[i]; i = (i + 1) & m->mask)
		if (m->keys[i] == key) {
			if (val)
				*val = m->vals[i];
			return 1;
		}
	return 0;
}

int coord_map_put(struct coord_map *m, uint64_t key, uint64_t val)
{
	uint32_t i;
	if (!key)
		return -1;
	for (i = slot_of(m, key); m->keys[i]; i = (i + 1) & m->mask)
		if (m->keys[i] == key) {
			m->vals[i] = val;
			return 0;
		}
	if ((uint64_t)(m->count + 1) * 8 > (uint64_t)(m->mask + 1) * 7)
		return -1;
	m->keys[i] = key;
	m->vals[i] = val;
	m->count++;
	return 0;
}

void coord_map_del(struct coord_map *m, uint64_t key)
{
	uint32_t i, j;
	if (!key)
		return;
	for (i = slot_of(m, key); m->keys[i] != key; i = (i + 1) & m->mask)
		if (!m->keys[i])
			return;
	/* Shift back every later entry of the run that may move into the hole. */
	for (j = (i + 1) & m->mask; m->keys[j]; j = (j + 1) & m->mask) {
		uint32_t home = slot_of(m, m->keys[j]);
		/* j's entry may fill the hole at i unless its home lies in (i, j]. */
		if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			i = j;
		}
	}
	m->keys[i] = 0;
	m->vals[i] = 0;
	m->count--;
}
