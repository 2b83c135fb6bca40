/*
 * daemon/ring.c — rendezvous (highest random weight) hashing.
 *
 * A member's seed is FNV-1a of its id; a trace's weight at a member is the
 * splitmix64 finaliser of trace_lo ^ seed, which spreads even the sequential
 * trace ids of a test evenly. The owner is the live member of highest weight
 * (ties, which need equal 64-bit weights, go to the lower index). Cost: one mix
 * per member, a few ns each; groups are small (RT_RING_MAX).
 */
#include "ring.h"
#include "random.h"

#include <stdio.h>
#include <string.h>

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

/* The weights every agent and coordinator must compute alike: the test pins them. */
static uint64_t mix(uint64_t x)
{
	return rt_mix64(x + 0x9e3779b97f4a7c15ull);
}

static int id_ok(const char *id, size_t len)
{
	if (len == 0 || len >= RT_RING_ID_MAX)
		return 0;
	for (size_t i = 0; i < len; i++) {
		char ch = id[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '-' || ch == '_' || ch == '.'))
			return 0;
	}
	return 1;
}

void rt_ring_init(struct rt_ring *r)
{
	memset(r, 0, sizeof *r);
}

int rt_ring_find(const struct rt_ring *r, const char *id)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (strcmp(r->id[i], id) == 0)
			return (int)i;
	return -1;
}

int rt_ring_add(struct rt_ring *r, const char *id)
{
	if (r->n >= RT_RING_MAX || !id_ok(id, strlen(id)) || rt_ring_find(r, id) >= 0)
		return -1;
	snprintf(r->id[r->n], RT_RING_ID_MAX, "%s", id);
	r->seed[r->n] = fnv1a(id);
	r->live[r->n] = 1;
	return (int)r->n++;
}

static int best(const struct rt_ring *r, uint64_t lo, int live_only)
{
	int owner = -1;
	uint64_t top = 0;
	for (uint32_t i = 0; i < r->n; i++) {
		uint64_t w;
		if (live_only && !r->live[i])
			continue;
		w = mix(lo ^ r->seed[i]);
		if (owner < 0 || w > top) {
			owner = (int)i;
			top = w;
		}
	}
	return owner;
}

int rt_ring_owner(const struct rt_ring *r, uint64_t trace_lo)
{
	return best(r, trace_lo, 1);
}

int rt_ring_home(const struct rt_ring *r, uint64_t trace_lo)
{
	return best(r, trace_lo, 0);
}

double rt_ring_share(const struct rt_ring *r, int i, uint32_t samples)
{
	uint32_t mine = 0;
	uint64_t step;
	if (i < 0 || (uint32_t)i >= r->n || !r->live[i] || samples == 0)
		return 0;
	step = UINT64_MAX / samples;
	for (uint32_t k = 0; k < samples; k++)
		mine += best(r, mix((uint64_t)k * step), 1) == i;
	return (double)mine / samples;
}

int rt_ring_parse(const char *list, struct rt_ring_entry *out, int max, char *err, size_t errlen)
{
	const char *p = list;
	int n = 0;
	if (!list || !*list) {
		snprintf(err, errlen, "an empty member list");
		return -1;
	}
	if (!strchr(list, '=')) { /* one URL: a single coordinator */
		if (strlen(list) >= RT_RING_URL_MAX || max < 1) {
			snprintf(err, errlen, "the URL is longer than %d bytes", RT_RING_URL_MAX - 1);
			return -1;
		}
		snprintf(out[0].id, RT_RING_ID_MAX, "0");
		snprintf(out[0].url, RT_RING_URL_MAX, "%s", list);
		return 1;
	}
	while (*p) {
		const char *eq = strchr(p, '='), *end = strchr(p, ',');
		size_t idlen, urllen;
		if (!end)
			end = p + strlen(p);
		if (!eq || eq > end) {
			snprintf(err, errlen, "'%.*s' is not ID=URL", (int)(end - p), p);
			return -1;
		}
		idlen = (size_t)(eq - p);
		urllen = (size_t)(end - eq - 1);
		if (!id_ok(p, idlen)) {
			snprintf(err, errlen, "bad member id '%.*s' (1..%d of letters, digits, '-', '_', '.')",
				 (int)idlen, p, RT_RING_ID_MAX - 1);
			return -1;
		}
		if (urllen == 0 || urllen >= RT_RING_URL_MAX) {
			snprintf(err, errlen, "member %.*s: missing or too long URL", (int)idlen, p);
			return -1;
		}
		if (n == max) {
			snprintf(err, errlen, "more than %d members", max);
			return -1;
		}
		snprintf(out[n].id, RT_RING_ID_MAX, "%.*s", (int)idlen, p);
		snprintf(out[n].url, RT_RING_URL_MAX, "%.*s", (int)urllen, eq + 1);
		for (int k = 0; k < n; k++)
			if (strcmp(out[k].id, out[n].id) == 0) {
				snprintf(err, errlen, "member id '%s' given twice", out[n].id);
				return -1;
			}
		n++;
		p = *end ? end + 1 : end;
	}
	return n;
}
