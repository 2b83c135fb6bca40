/*
 * policy_table.h — the span-site policy table as the client reads it
 * (header-only, so the client, shm/ and the agent include it without linking
 * the learner).
 *
 * What it owns: the span-site hash (rt_adapt_site_hash), the layout of a table of span site -> sampling probability, the
 * writer that fills one (the agent, from the coordinator's policy), the
 * one-lookup reader for retrace_span_start, and the keep decision.
 *
 * Layout: `capacity` (a power of two, >= 8) 64-bit slots. A slot is 0 (empty)
 * or (tag << 16) | p16, where tag = the site hash's top 48 bits (1 if those
 * are 0) and p16 = round(p * 65535), 65535 meaning "always". A site lives at
 * slot (hash & (capacity - 1)) or one of the RT_ADAPT_TABLE_PROBE slots after
 * it (linear probing, wrapping). One slot is one aligned 64-bit word, read with
 * a relaxed atomic load: a reader racing a writer sees the old or the new entry
 * of that slot, never half of each. (Publishing a whole new table — two
 * copies and a generation word — belongs to the shared-memory ABI: shm/pool.h,
 * rt_pool_policy_publish / rt_policy_read_begin.)
 *
 * What it promises: a lookup touches at most RT_ADAPT_TABLE_PROBE consecutive
 * slots (usually one cache line) and never loops; a site not in the table
 * reads as RT_ADAPT_P16_ALWAYS (an unknown site is always recorded); the
 * writer refuses (and changes nothing a reader would see as valid) a table
 * it cannot fill within the probe bound.
 */
#ifndef RETRACE_ADAPTIVE_POLICY_TABLE_H
#define RETRACE_ADAPTIVE_POLICY_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ck_pr.h> /* the slots live in shared memory: ck_pr, as shm/ */

#define RT_ADAPT_TABLE_PROBE 8

/*
 * The span-site hash, the one home of it: the client computes it in
 * retrace_span_start, the coordinator from decoded spans (resource service.name
 * and the span name, both as recorded, i.e. cut at RETRACE_EV_MAX_STR), and the
 * two must agree. In two steps so the client pays for the service once per
 * process: rt_adapt_site_seed is FNV-1a 64 over the service bytes and one 0
 * byte; rt_adapt_site_hash_from folds the operation in eight bytes at a time
 * (multiply-xorshift per word; a span name costs two or three rounds, not one
 * multiply per byte) and the length, then the splitmix64 finaliser so both the
 * low bits (a table index) and the high bits (its tag) are mixed. Never 0 (0
 * marks an empty slot). Little-endian word loads (the pool ABI is
 * little-endian host order anyway).
 */
static inline uint64_t rt_adapt_site_seed(const char *service, size_t service_len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < service_len; i++)
		h = (h ^ (unsigned char)service[i]) * 0x100000001b3ull;
	return (h ^ 0u) * 0x100000001b3ull;
}

static inline uint64_t rt_adapt_site_hash_from(uint64_t seed, const char *operation,
					       size_t operation_len)
{
	const unsigned char *p = (const unsigned char *)operation;
	uint64_t h = seed, w;
	size_t n = operation_len;
	for (; n >= 8; n -= 8, p += 8) {
		__builtin_memcpy(&w, p, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 29;
	}
	w = 0;
	for (size_t i = 0; i < n; i++)
		w |= (uint64_t)p[i] << (8 * i);
	h = (h ^ w ^ ((uint64_t)operation_len << 56)) * 0x9e3779b97f4a7c15ull;
	h += 0x9e3779b97f4a7c15ull;
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
	h ^= h >> 31;
	return h ? h : 1;
}

static inline uint64_t rt_adapt_site_hash(const char *service, size_t service_len,
					  const char *operation, size_t operation_len)
{
	return rt_adapt_site_hash_from(rt_adapt_site_seed(service, service_len), operation,
				       operation_len);
}
#define RT_ADAPT_P16_ALWAYS 0xFFFFu

static inline uint64_t rt_adapt_table_tag(uint64_t site)
{
	uint64_t tag = site >> 16;
	return tag ? tag : 1;
}

/* The capacity for n sites: a power of two >= 4 n (load <= 25 %, so probe
 * runs stay short and the bound is rarely hit; if build still refuses, double
 * it). */
static inline uint32_t rt_adapt_table_capacity(size_t n)
{
	uint32_t cap = 8;
	while (cap < 4 * n && cap < (1u << 30))
		cap <<= 1;
	return cap;
}

/* p in [0, 1] (NaN and out-of-range values clamp: NaN to always) -> p16. */
static inline uint16_t rt_adapt_p16(double p)
{
	if (!(p < 1.0))
		return RT_ADAPT_P16_ALWAYS;
	if (!(p > 0.0))
		return 0;
	return (uint16_t)(p * 65535.0 + 0.5);
}

/* The probability of a site, as p16; RT_ADAPT_P16_ALWAYS if it is not there. */
static inline uint16_t rt_adapt_table_lookup(const uint64_t *slots, uint32_t capacity,
					     uint64_t site)
{
	uint32_t mask = capacity - 1;
	uint64_t tag = rt_adapt_table_tag(site);
	uint32_t i = (uint32_t)site & mask;
	for (int probe = 0; probe < RT_ADAPT_TABLE_PROBE; probe++) {
		uint64_t v = ck_pr_load_64(&slots[i]);
		if (v == 0)
			return RT_ADAPT_P16_ALWAYS;
		if ((v >> 16) == tag)
			return (uint16_t)(v & 0xFFFFu);
		i = (i + 1) & mask;
	}
	return RT_ADAPT_P16_ALWAYS;
}

/* Keep this span? rnd16 is 16 uniform random bits (e.g. from a hash of the
 * trace and span ids, so every host decides the same for the same span). */
static inline bool rt_adapt_keep(uint16_t p16, uint16_t rnd16)
{
	return p16 == RT_ADAPT_P16_ALWAYS || rnd16 < p16;
}

/*
 * Fills slots[0..capacity) from n (site, probability) pairs: 0 on success,
 * -1 if capacity is not a power of two >= 8, a site is 0, or a site cannot be
 * placed within the probe bound (the table is then left all empty, which
 * reads as "record everything": the safe side). A site given twice keeps its
 * last probability. Not for concurrent writers; readers may race it (see the
 * layout note).
 */
static inline int rt_adapt_table_build(uint64_t *slots, uint32_t capacity, const uint64_t *sites,
				       const double *probs, size_t n)
{
	if (capacity < 8 || (capacity & (capacity - 1)) != 0)
		return -1;
	uint32_t mask = capacity - 1;
	for (uint32_t i = 0; i < capacity; i++)
		ck_pr_store_64(&slots[i], 0);
	for (size_t k = 0; k < n; k++) {
		uint64_t tag = rt_adapt_table_tag(sites[k]);
		uint64_t entry = (tag << 16) | rt_adapt_p16(probs[k]);
		uint32_t i = (uint32_t)sites[k] & mask;
		bool placed = sites[k] != 0;
		for (int probe = 0; placed && probe < RT_ADAPT_TABLE_PROBE; probe++) {
			uint64_t v = slots[i];
			if (v == 0 || (v >> 16) == tag) {
				ck_pr_store_64(&slots[i], entry);
				break;
			}
			i = (i + 1) & mask;
			if (probe == RT_ADAPT_TABLE_PROBE - 1)
				placed = false;
		}
		if (!placed) {
			for (uint32_t j = 0; j < capacity; j++)
				ck_pr_store_64(&slots[j], 0);
			return -1;
		}
	}
	return 0;
}

#endif
