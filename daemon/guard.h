/*
 * daemon/guard.h — limits a daemon puts on what others can make it hold:
 * connections per listener, and requests per peer per second.
 *
 * Owns: a per-socket connection cap (an nng pipe-notify callback that closes
 * a new pipe when its listener already holds `max` of them, and counts it),
 * and token buckets keyed by peer (certificate name, or address).
 *
 * Message sizes are nng's NNG_OPT_RECVMAXSZ, set per socket by each daemon:
 * past it nng drops the connection before the message exists (and cannot say
 * why: such a drop is not told apart from a hang-up). Each daemon therefore
 * sets nng's bound above the largest message it accepts and refuses, with a
 * counter, what arrives between the two.
 */
#ifndef RETRACE_DAEMON_GUARD_H
#define RETRACE_DAEMON_GUARD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

/* ACK statuses of refusals: positive application codes (docs/wire.md, ACK). */
#define RT_ACK_REFUSED 403      /* the sender may not send this */
#define RT_ACK_RATE_LIMITED 429 /* too many from this sender: try later */

/* ------------------------------------------------- connection caps ---- */

struct rt_pipe_cap;

/*
 * Cap every listener of s at max pipes at once (0: no cap, only counted).
 * Pipes past it are closed as they arrive and counted. Must be attached before
 * the socket listens. The cap outlives the socket: free it only after the
 * socket closed (rt_pipe_cap_free with closed = 0 leaks it on purpose, for a
 * socket whose close was abandoned).
 */
struct rt_pipe_cap *rt_pipe_cap_attach(nng_socket s, uint32_t max);
void rt_pipe_cap_free(struct rt_pipe_cap *c, int closed);
uint64_t rt_pipe_cap_refused(const struct rt_pipe_cap *c);  /* pipes closed at the cap */
uint64_t rt_pipe_cap_accepted(const struct rt_pipe_cap *c);
uint32_t rt_pipe_cap_open(const struct rt_pipe_cap *c);     /* pipes held now */

/* ---------------------------------------------------- peer buckets ---- */

#define RT_PEER_RATE_SLOTS 64
#define RT_PEER_KEY_MAX 72

struct rt_peer_rate {
	double rate, burst;  /* tokens per second, bucket size; rate 0 = no limit */
	uint32_t n;
	struct {
		char key[RT_PEER_KEY_MAX];
		double tokens;
		uint64_t last_ns;
	} slot[RT_PEER_RATE_SLOTS];
};

void rt_peer_rate_init(struct rt_peer_rate *r, double rate, double burst);
/*
 * Take one token from key's bucket at now_ns; 1 if there was one. A key not
 * seen yet gets a full bucket while there is a free slot; once the table is
 * full it takes the slot idle longest and starts empty, so cycling through
 * many keys buys nothing.
 */
int rt_peer_rate_take(struct rt_peer_rate *r, const char *key, uint64_t now_ns);

/* The bucket key of a peer: its certificate name, else its address. */
struct rt_peer;
void rt_peer_key(const struct rt_peer *p, char *out, size_t cap);

#endif
