/*
 * agent/spool_write.c — the spool's write engine (spool_write.h).
 *
 * A job is a few iovecs at an offset and whether to fdatasync after them. On
 * the ring, the rest of the job is queued as a writev linked to an fsync and
 * submitted at once; each completion advances the job; an fsync cancelled by a
 * short write is queued again with the rest. Without a ring (or after it
 * failed) the same job runs on pwritev and fdatasync.
 */
#include "spool_write.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RING_UNUSABLE 1          /* uring_run: finish this job without the ring */

int rt_spool_sync_fd(int fd)
{
	while (fdatasync(fd) != 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

/* ------------------------------------------------------------- writing ---- */

void rt_spool_job_init(struct rt_spool_job *w, int fd, uint64_t off, int sync)
{
	memset(w, 0, sizeof *w);
	w->fd = fd;
	w->off = off;
	w->iov = w->v;
	w->sync = sync;
}

void rt_spool_job_add(struct rt_spool_job *w, const void *p, size_t n)
{
	if (n == 0)
		return;
	w->v[w->cnt].iov_base = (void *)p;
	w->v[w->cnt].iov_len = n;
	w->cnt++;
	w->total += n;
}

/* n more bytes are on disk: step past them. */
static void job_advance(struct rt_spool_job *w, size_t n)
{
	w->done += n;
	while (n > 0 && w->cnt > 0) {
		size_t k = n < w->iov->iov_len ? n : w->iov->iov_len;
		w->iov->iov_base = (uint8_t *)w->iov->iov_base + k;
		w->iov->iov_len -= k;
		n -= k;
		if (w->iov->iov_len == 0) {
			w->iov++;
			w->cnt--;
		}
	}
}

static int job_pending(const struct rt_spool_job *w)
{
	return w->done < w->total || (w->sync && !w->synced);
}

static int uring_unsupported(int res)
{
	return res == -EINVAL || res == -EOPNOTSUPP || res == -ENOSYS || res == -EAGAIN;
}

/* Queue the rest of the job: a writev linked to an fdatasync. The SQE count. */
static int uring_queue(struct io_uring *ring, struct rt_spool_job *w)
{
	struct io_uring_sqe *sqe;
	int n = 0;
	if (w->done < w->total) {
		if (!(sqe = io_uring_get_sqe(ring)))
			return -1;
		io_uring_prep_writev(sqe, w->fd, w->iov, (unsigned)w->cnt, w->off + w->done);
		io_uring_sqe_set_data64(sqe, 1);
		if (w->sync)
			sqe->flags |= IOSQE_IO_LINK;
		n++;
	}
	if (w->sync) {
		if (!(sqe = io_uring_get_sqe(ring)))
			return -1;
		io_uring_prep_fsync(sqe, w->fd, IORING_FSYNC_DATASYNC);
		io_uring_sqe_set_data64(sqe, 2);
		n++;
	}
	return n;
}

/*
 * Run the job on the ring: 0 done, -errno for an I/O error, RING_UNUSABLE when
 * the ring cannot do it (the job then holds how far it got).
 */
static int uring_run(struct io_uring *ring, struct rt_spool_job *w)
{
	while (job_pending(w)) {
		int want = uring_queue(ring, w), submitted, err = 0, unusable = 0, synced = 0;
		if (want < 0)
			return RING_UNUSABLE;
		submitted = io_uring_submit_and_wait(ring, (unsigned)want);
		if (submitted <= 0)
			return RING_UNUSABLE;
		for (int i = 0; i < submitted; i++) {
			struct io_uring_cqe *cqe;
			int rc;
			while ((rc = io_uring_wait_cqe(ring, &cqe)) == -EINTR)
				;
			if (rc < 0)
				return RING_UNUSABLE;
			int res = cqe->res;
			uint64_t what = io_uring_cqe_get_data64(cqe);
			io_uring_cqe_seen(ring, cqe);
			if (res == -ECANCELED)
				continue; /* the fsync after a short write: redone below */
			if (uring_unsupported(res))
				unusable = 1;
			else if (res < 0)
				err = res;
			else if (what == 1 && res == 0)
				err = -EIO;
			else if (what == 1)
				job_advance(w, (size_t)res);
			else
				synced = 1;
		}
		if (err)
			return err;
		if (unusable || submitted < want)
			return RING_UNUSABLE;
		/* An fsync that ran after a short write synced only part of the job. */
		if (synced && w->done == w->total)
			w->synced = 1;
	}
	return 0;
}

static int pwrite_run(struct rt_spool_job *w)
{
	while (w->done < w->total) {
		ssize_t n = pwritev(w->fd, w->iov, w->cnt, (off_t)(w->off + w->done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		job_advance(w, (size_t)n);
	}
	if (w->sync && !w->synced) {
		int rc = rt_spool_sync_fd(w->fd);
		if (rc)
			return rc;
		w->synced = 1;
	}
	return 0;
}

void rt_spool_ring_close(struct rt_spool *s)
{
	if (!s->ring)
		return;
	io_uring_queue_exit(s->ring);
	free(s->ring);
	s->ring = NULL;
	s->st.uring = 0;
}

/* Every write goes here: the ring if there is one, else (or if it fails) pwritev. */
int rt_spool_write(struct rt_spool *s, struct rt_spool_job *w)
{
	if (s->ring) {
		int rc = uring_run(s->ring, w);
		if (rc != RING_UNUSABLE)
			return rc;
		rt_spool_ring_close(s); /* SQEs may be stranded in it: never use it again */
	}
	s->st.fallback_writes++;
	return pwrite_run(w);
}

void rt_spool_ring_open(struct rt_spool *s)
{
	struct io_uring *ring = calloc(1, sizeof *ring);
	if (ring && io_uring_queue_init(4, ring, 0) == 0) {
		s->ring = ring;
		s->st.uring = 1;
		return;
	}
	free(ring);
}

