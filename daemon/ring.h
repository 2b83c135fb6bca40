/*
 * daemon/ring.h — which coordinator owns a trace: rendezvous hashing over the
 * live members of a coordinator group (issue 17; docs/scaling.md).
 *
 * Owns: the member list (an id per member, a live flag each), the owner of a
 * trace id, each member's share of the hash space, and the one grammar of a
 * member list "ID=URL,ID=URL,..." (--peers of the coordinator, --coordinator
 * and --collector of the agent).
 *
 * Promises:
 *   - Pure: no I/O, no clock, no allocation, no global state. The agent and the
 *     coordinator call the same functions, so they agree on every owner given
 *     the same members and live flags.
 *   - The owner of a trace is the live member with the highest
 *     mix(trace_lo, hash(member id)) (highest random weight). Dropping a member
 *     moves only its own traces, each to the member that scores next for it;
 *     bringing it back moves exactly those traces back. The member order in the
 *     list does not matter.
 */
#ifndef RETRACE_DAEMON_RING_H
#define RETRACE_DAEMON_RING_H

#include <stddef.h>
#include <stdint.h>

#define RT_RING_MAX 64        /* members of one group */
#define RT_RING_ID_MAX 32     /* bytes of an id, NUL included */
#define RT_RING_URL_MAX 256   /* bytes of a URL, NUL included */

struct rt_ring {
	uint32_t n;
	uint64_t seed[RT_RING_MAX];            /* hash of the member's id */
	uint8_t live[RT_RING_MAX];
	char id[RT_RING_MAX][RT_RING_ID_MAX];
};

/* One "ID=URL" of a member list. */
struct rt_ring_entry {
	char id[RT_RING_ID_MAX];
	char url[RT_RING_URL_MAX];
};

/*
 * Parse "ID=URL[,ID=URL...]" (ids: letters, digits, '-', '_', '.'; unique). A
 * list without '=' is one URL: one entry with the id "0" (a single
 * coordinator, as before sharding). Returns the count, or -1 with a sentence
 * in err.
 */
int rt_ring_parse(const char *list, struct rt_ring_entry *out, int max, char *err, size_t errlen);

/* Start empty; add a member (live). Its index, or -1 (full, bad or repeated id). */
void rt_ring_init(struct rt_ring *r);
int rt_ring_add(struct rt_ring *r, const char *id);
int rt_ring_find(const struct rt_ring *r, const char *id);

/* The live owner of a trace (index), or -1 when no member is live. */
int rt_ring_owner(const struct rt_ring *r, uint64_t trace_lo);
/* The owner if every member were live (who owns it when all are up). */
int rt_ring_home(const struct rt_ring *r, uint64_t trace_lo);

/* Member i's share of the hash space among the live members (0..1), measured
 * on `samples` evenly spread trace ids (4096 gives about +-1.5 %). */
double rt_ring_share(const struct rt_ring *r, int i, uint32_t samples);

#endif
