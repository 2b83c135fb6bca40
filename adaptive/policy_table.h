/*
 * policy_table.h — the span-site policy table as the client will read it
 * (header-only, so the client can include it without linking the learner).
 *
 * What it owns: the layout of a table of span site -> sampling probability, the
 * writer that fills one (the agent, from the coordinator's policy), the
 * one-lookup reader for retrace_span_start, and the keep decision.
 *
 * Layout: `capacity` (a power of two, >= 8) 64-bit slots. A slot is 0 (empty)
 * or (tag << 16) | p16, where tag = the site hash's top 48 bits (1 if those
 * are 0) and p16 = round(p * 65535), 65535 meaning "always". A site lives at
 * slot (hash & (capacity - 1)) or one of the RT_ADAPT_TABLE_PROBE slots after
 * it (linear probing, wrapping). One slot is one aligned 64-bit word, read with
 * a relaxed atomic load: a reader racing a writer sees the old or the new entry
 * of that slot, never half of each. (Publishing a whole new table — a second
 * copy and a generation word — belongs to the shared-memory ABI, not here.)
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

#define RT_ADAPT_TABLE_PROBE 8
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
		uint64_t v = __atomic_load_n(&slots[i], __ATOMIC_RELAXED);
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
		__atomic_store_n(&slots[i], 0, __ATOMIC_RELAXED);
	for (size_t k = 0; k < n; k++) {
		uint64_t tag = rt_adapt_table_tag(sites[k]);
		uint64_t entry = (tag << 16) | rt_adapt_p16(probs[k]);
		uint32_t i = (uint32_t)sites[k] & mask;
		bool placed = sites[k] != 0;
		for (int probe = 0; placed && probe < RT_ADAPT_TABLE_PROBE; probe++) {
			uint64_t v = slots[i];
			if (v == 0 || (v >> 16) == tag) {
				__atomic_store_n(&slots[i], entry, __ATOMIC_RELAXED);
				break;
			}
			i = (i + 1) & mask;
			if (probe == RT_ADAPT_TABLE_PROBE - 1)
				placed = false;
		}
		if (!placed) {
			for (uint32_t j = 0; j < capacity; j++)
				__atomic_store_n(&slots[j], 0, __ATOMIC_RELAXED);
			return -1;
		}
	}
	return 0;
}

#endif
