/*
 * agent/spool_write.h — the spool's write engine: one write of a few iovecs at
 * an offset, optionally made durable, finished whatever the kernel does.
 *
 * Owns: the job (what is written where, how far it got) and how it runs: on
 * the spool's io_uring, a writev linked to an fdatasync, one io_uring_enter per
 * job; a short write is finished with further writes; a ring that cannot do the
 * job (unsupported, no SQE) is closed for good and the job finishes on pwritev
 * and fdatasync, counted in st.fallback_writes. Knows nothing of the segment
 * format (spool.c).
 */
#ifndef RETRACE_AGENT_SPOOL_WRITE_H
#define RETRACE_AGENT_SPOOL_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "spool.h"

#define MAX_IOV 4

/* One write (iovecs at an offset, optionally followed by fdatasync) to finish. */
struct rt_spool_job {
	int fd;
	uint64_t off;
	struct iovec v[MAX_IOV];
	struct iovec *iov; /* first iovec not fully written */
	int cnt;
	size_t total, done;
	int sync, synced;
};

void rt_spool_job_init(struct rt_spool_job *w, int fd, uint64_t off, int sync);
/* Add n bytes at p (at most MAX_IOV pieces per job; n = 0 adds nothing). */
void rt_spool_job_add(struct rt_spool_job *w, const void *p, size_t n);

/* Every write goes here: the ring if there is one, else (or if it fails) pwritev.
 * 0, or -errno of the I/O error. */
int rt_spool_write(struct rt_spool *s, struct rt_spool_job *w);

/* Set up s->ring (st.uring = 1), or leave it NULL; and take it down. */
void rt_spool_ring_open(struct rt_spool *s);
void rt_spool_ring_close(struct rt_spool *s);

/* fdatasync, retried on EINTR: 0 or -errno. */
int rt_spool_sync_fd(int fd);

#endif
