/*
 * agent/spool.h — the agent's on-disk spool: trace slices that could not be sent
 * wait here, in order, until the collector takes them.
 *
 * Owns: one directory of segment files (records of opaque bytes, each with a
 * CRC32C), a consumed-position file, a lock on the directory, and the io_uring
 * the writes go through. docs/spool.md is the format.
 *
 * Promises:
 *   - A record whose append returned 0 is in the file (and, unless no_sync, on
 *     stable storage); it comes back from peek, byte-exact, in append order, until
 *     it is consumed — across close/reopen and across a crash of the process.
 *   - Ids start at 1, increase by one per append, and keep increasing across
 *     restarts (an id handed to a caller is never handed out again).
 *   - A torn or corrupt record is never returned: open and peek check every
 *     record's checksums, skip and count what fails, and go on with the records
 *     after it. A torn tail is cut off so that appends continue cleanly.
 *   - Live (unconsumed) record bytes never exceed max_bytes: an append that would
 *     is refused, counted, and writes nothing.
 *   - A full disk: a failed append leaves the spool as it was; consume needs no
 *     new space (the cursor's blocks are reserved at open), so a spool drains on
 *     a disk it filled; an append that finds the disk full gives up a wholly
 *     consumed last segment and tries once more.
 *   - Any spool directory, however damaged, is survived: no crash, no allocation
 *     beyond RT_SPOOL_MAX_RECORD per record; a file that cannot be read at all
 *     fails rt_spool_open with a message naming it.
 *   - One process and one thread use a spool at a time (the directory is
 *     flock'ed; the calls are not thread-safe).
 */
#ifndef RETRACE_AGENT_SPOOL_H
#define RETRACE_AGENT_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#define RT_SPOOL_MAX_RECORD (256u * 1024u * 1024u)        /* payload bytes, inclusive */
#define RT_SPOOL_DEFAULT_MAX_BYTES (1024ull * 1024 * 1024) /* 1 GiB */
#define RT_SPOOL_DEFAULT_SEGMENT (16ull * 1024 * 1024)    /* 16 MiB */
#define RT_SPOOL_MIN_SEGMENT 4096ull

/*
 * Results. I/O failures are negative errno values (-EIO, -ENOSPC, ...); the
 * outcomes below are positive so that they never collide with them.
 */
enum rt_spool_result {
	RT_SPOOL_OK = 0,
	RT_SPOOL_FULL = 1,     /* append: would exceed max_bytes; nothing written */
	RT_SPOOL_EMPTY = 2,    /* peek: no record pending */
	RT_SPOOL_TOO_BIG = 3,  /* append: payload over RT_SPOOL_MAX_RECORD */
	RT_SPOOL_MISMATCH = 4, /* consume: the id is not the oldest pending record */
};

/* Zero-initialised options are the defaults, except dir, which is required. */
struct rt_spool_opts {
	const char *dir;        /* created (with parents, mode 0750) if missing */
	uint64_t max_bytes;     /* live record bytes, headers included; 0: default */
	uint64_t segment_bytes; /* roll to a new file past this; 0: default */
	int no_uring;           /* 1: plain pwrite/fdatasync, never io_uring */
	int no_sync;            /* 1: no fdatasync per append/consume (close still syncs) */
};

struct rt_spool_stats {
	uint64_t records_pending;
	uint64_t bytes_pending;   /* record bytes on disk, headers and padding included */
	uint64_t segments;        /* segment files */
	uint64_t appended;
	uint64_t consumed;
	uint64_t full_drops;      /* appends refused: FULL or TOO_BIG */
	uint64_t torn_skipped;    /* torn tails cut off at open (one per tail) */
	uint64_t corrupt_skipped; /* corrupt regions / files / out-of-order records skipped */
	uint64_t cursor_lost;     /* consumed-position file unreadable: reset to 0 */
	uint64_t io_errors;       /* appends, consumes or reads that failed with an errno */
	uint64_t uring;           /* 1 while writes go through io_uring */
	uint64_t fallback_writes; /* writes done with pwrite (no ring, or the ring failed) */
};

struct rt_spool_segment; /* spool.c */

struct rt_spool {
	int dir_fd;               /* holds the flock */
	int cursor_fd;
	int head_fd, tail_fd;     /* read fd of segs[0], write fd of the last segment */
	uint64_t max_bytes, segment_bytes;
	int sync;
	void *ring;               /* struct io_uring *, NULL when not used */
	struct rt_spool_segment *segs; /* oldest first */
	size_t nsegs, segs_cap;
	int tail_appendable;      /* appends may continue in segs[nsegs - 1] */
	uint64_t head_off;        /* next record to read in segs[0] */
	uint64_t next_id;
	uint64_t consumed_id;     /* every id <= this is consumed */
	uint64_t cursor_seq;
	/* the record peek last returned (valid until consume or close) */
	int peeked;
	uint64_t peek_id, peek_next_off, peek_bytes;
	uint8_t *buf;
	size_t buf_len, buf_cap;
	struct rt_spool_stats st;
};

/*
 * Open (creating the directory if needed), lock it, recover: scan every segment,
 * skip and count what is torn or corrupt, cut a torn tail, delete segments with
 * nothing pending. 0, or -errno with a message in err.
 */
int rt_spool_open(struct rt_spool *s, const struct rt_spool_opts *o, char *err,
		  size_t errlen);

/* Append one record; *id (may be NULL) gets its id. 0, FULL, TOO_BIG or -errno. */
int rt_spool_append(struct rt_spool *s, const void *rec, size_t len, uint64_t *id);

/*
 * The oldest pending record. *rec points into the spool's buffer and stays valid
 * until the next consume or close. 0, EMPTY or -errno.
 */
int rt_spool_peek(struct rt_spool *s, const void **rec, size_t *len, uint64_t *id);

/* The oldest pending record, `id`, is done. 0, MISMATCH, EMPTY or -errno. */
int rt_spool_consume(struct rt_spool *s, uint64_t id);

/* Sync what is unsynced, unlock, free. Safe on a spool whose open failed. */
void rt_spool_close(struct rt_spool *s);

void rt_spool_stats(const struct rt_spool *s, struct rt_spool_stats *out);

/* A short English phrase for any result above, errno values included. */
const char *rt_spool_strerror(int rc);

#endif
