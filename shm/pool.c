/*
 * shm/pool.c — create, attach and validate a pool object.
 *
 * Create computes the layout from the geometry (every region 64-byte aligned,
 * buffers page-aligned), makes the POSIX shared-memory object with O_EXCL and the
 * requested mode (fchmod so the umask cannot widen or narrow it), sizes it with
 * posix_fallocate, which reserves every page in /dev/shm (ftruncate alone leaves
 * them unbacked, and the first write to a page a full /dev/shm cannot back kills
 * the writer with SIGBUS), writes the header with state = INITIALIZING,
 * initialises the rings, optionally fills the available queue, and only then
 * release-stores state = READY. A pool that does not fit is refused with the
 * size wanted and the space free.
 *
 * Attach maps the header page alone first, copies it, validates the copy against
 * the object's real size, checks that the object's memory is reserved (st_blocks),
 * maps the whole object, and copies and validates the header again (it may have
 * changed between the maps), with the rings' own size and mask. The copy that
 * passed becomes the process's geometry (struct rt_pool.geo): nothing is read
 * from the shared header for a bound afterwards, since every client can write it.
 *
 * Both map the object with MAP_POPULATE unless asked not to (the `populate`
 * options). Each process that maps the pool otherwise takes a page fault on the
 * first touch of each of its pages, and on this project's VMs that fault costs
 * 6–12 µs (a 128 MiB pool: 0.2–0.4 s of a service's CPU, paid inside its
 * requests while its buffers first cycle through the pool); populating the page
 * tables at map time costs ~18 ms for the same pool, once, at attach (the memory
 * itself is already reserved by posix_fallocate, so populating allocates
 * nothing but page tables: 2 KiB per MiB mapped). bench/client/bench_first_touch.c
 * measures both.
 */
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "retrace/retrace.h"

#define ALIGN_UP(x, a) (((x) + ((uint64_t)(a)-1)) & ~((uint64_t)(a)-1))

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

static uint32_t round_pow2(uint32_t v)
{
	uint32_t p = 2;
	while (p < v && p < (1u << 31))
		p <<= 1;
	return p;
}

void rt_pool_create_defaults(struct rt_pool_create_opts *o)
{
	memset(o, 0, sizeof *o);
	o->name = RT_POOL_DEFAULT_NAME;
	o->buffer_size = RT_POOL_DEFAULT_BUFFER_SIZE;
	o->buffer_count = RT_POOL_DEFAULT_BUFFER_COUNT;
	o->breadcrumb_slots = RT_POOL_DEFAULT_BREADCRUMB_SLOTS;
	o->trigger_slots = RT_POOL_DEFAULT_TRIGGER_SLOTS;
	o->client_slots = RT_POOL_DEFAULT_CLIENT_SLOTS;
	o->mode = 0600;
	o->group = -1;
	o->fill_available = 1;
	o->policy_slots = RT_POOL_DEFAULT_POLICY_SLOTS;
	o->populate = 1;
}

/*
 * Ring capacities: available must hold every buffer id. Complete holds one
 * entry per segment (ABI 5): several per buffer when traces share buffers, so
 * it gets 16 per buffer (at least 4096, at most 2^22), far more than the
 * agent lets pile up between two passes; a full queue is counted
 * (complete_drops).
 */
static void ring_geometry(const struct rt_pool_create_opts *o,
			  struct rt_ring_desc d[RT_Q_COUNT])
{
	uint32_t all = round_pow2(o->buffer_count + 1);
	uint64_t segs = (uint64_t)o->buffer_count * 16;
	if (segs < 4096)
		segs = 4096;
	if (segs > (1u << 22))
		segs = 1u << 22;
	d[RT_Q_AVAILABLE].capacity = all;
	d[RT_Q_AVAILABLE].entry_size = sizeof(struct rt_available_entry);
	d[RT_Q_COMPLETE].capacity = all > segs ? all : round_pow2((uint32_t)segs);
	d[RT_Q_COMPLETE].entry_size = sizeof(struct rt_complete_entry);
	d[RT_Q_BREADCRUMB].capacity = round_pow2(o->breadcrumb_slots);
	d[RT_Q_BREADCRUMB].entry_size = sizeof(struct rt_breadcrumb_entry);
	d[RT_Q_TRIGGER].capacity = round_pow2(o->trigger_slots);
	d[RT_Q_TRIGGER].entry_size = sizeof(struct rt_trigger_entry);
}

/* Fill in every offset of a header for the geometry; returns the total size. */
static uint64_t layout(const struct rt_pool_create_opts *o, struct rt_pool_header *h)
{
	uint64_t off = ALIGN_UP(sizeof(struct rt_pool_header), 64);
	long pg = sysconf(_SC_PAGESIZE);
	int q;

	h->header_size = sizeof(struct rt_pool_header);
	h->page_size = (uint32_t)pg;
	h->registry_offset = off;
	h->registry_slots = o->client_slots;
	off += ALIGN_UP((uint64_t)o->client_slots * sizeof(struct rt_client_slot), 64);
	ring_geometry(o, h->rings);
	for (q = 0; q < RT_Q_COUNT; q++) {
		h->rings[q].ring_offset = off;
		off += ALIGN_UP(sizeof(struct ck_ring), 64);
	}
	for (q = 0; q < RT_Q_COUNT; q++) {
		h->rings[q].slots_offset = off;
		off += ALIGN_UP((uint64_t)h->rings[q].capacity * h->rings[q].entry_size, 64);
	}
	h->policy_capacity = o->policy_slots ? round_pow2(o->policy_slots < 8 ? 8 : o->policy_slots) : 0;
	if (h->policy_capacity) {
		h->policy_offset = off;
		off += sizeof(struct rt_policy_block) + 2 * (uint64_t)h->policy_capacity * 8;
		off = ALIGN_UP(off, 64);
	}
	off = ALIGN_UP(off, (uint64_t)pg);
	h->buffers_offset = off;
	h->buffer_size = o->buffer_size;
	h->buffer_count = o->buffer_count;
	off += (uint64_t)o->buffer_size * o->buffer_count;
	h->total_size = off;
	return off;
}

uint64_t rt_pool_layout_size(const struct rt_pool_create_opts *o)
{
	struct rt_pool_header h;
	memset(&h, 0, sizeof h);
	return layout(o, &h);
}

static int check_create_opts(const struct rt_pool_create_opts *o, char *err,
			     size_t errlen)
{
	long pg = sysconf(_SC_PAGESIZE);
	if (!o->name || o->name[0] != '/' || strlen(o->name) >= 64 ||
	    strchr(o->name + 1, '/'))
		return fail(err, errlen, RETRACE_E_INVAL,
			    "pool name must look like \"/name\" (one slash, under 64 chars)");
	if (o->buffer_size < RT_POOL_MIN_BUFFER_SIZE ||
	    o->buffer_size > RT_POOL_MAX_BUFFER_SIZE || o->buffer_size % pg)
		return fail(err, errlen, RETRACE_E_GEOMETRY,
			    "buffer size %u must be a multiple of the page size (%ld) between %u and %u",
			    o->buffer_size, pg, RT_POOL_MIN_BUFFER_SIZE,
			    RT_POOL_MAX_BUFFER_SIZE);
	if (o->buffer_count < 1 || o->buffer_count > RT_POOL_MAX_BUFFER_COUNT)
		return fail(err, errlen, RETRACE_E_GEOMETRY,
			    "buffer count %u must be between 1 and %u",
			    o->buffer_count, RT_POOL_MAX_BUFFER_COUNT);
	if (o->client_slots < 1 || o->client_slots > 65536 ||
	    o->breadcrumb_slots < 2 || o->breadcrumb_slots > (1u << 24) ||
	    o->trigger_slots < 128 || o->trigger_slots > (1u << 24) ||
	    o->policy_slots > RT_POOL_MAX_POLICY_SLOTS)
		return fail(err, errlen, RETRACE_E_GEOMETRY,
			    "queue or registry sizes out of range (clients 1..65536, breadcrumbs 2..2^24, triggers 128..2^24, policy slots 0..2^20)");
	return RETRACE_OK;
}

static int open_error(int e, const char *name, const char *what, char *err,
		      size_t errlen)
{
	if (e == ENOENT)
		return fail(err, errlen, RETRACE_E_NOPOOL,
			    "no pool named %s (is retrace-agent running? /dev/shm%s is missing)",
			    name, name);
	if (e == EACCES || e == EPERM)
		return fail(err, errlen, RETRACE_E_PERM,
			    "permission denied to %s pool %s (check the owner and mode of /dev/shm%s)",
			    what, name, name);
	if (e == EEXIST)
		return fail(err, errlen, RETRACE_E_EXISTS,
			    "pool %s already exists (another agent may own it)", name);
	errno = e;
	return fail(err, errlen, RETRACE_E_SYS, "cannot %s pool %s: %s", what,
		    name, strerror(e));
}

/* The process's own copy of a validated header's geometry. */
static void geo_from(struct rt_pool_geometry *g, const struct rt_pool_header *h)
{
	int q;
	memset(g, 0, sizeof *g);
	g->total_size = h->total_size;
	g->buffers_offset = h->buffers_offset;
	g->registry_offset = h->registry_offset;
	g->buffer_size = h->buffer_size;
	g->buffer_count = h->buffer_count;
	g->registry_slots = h->registry_slots;
	g->page_size = h->page_size;
	for (q = 0; q < RT_Q_COUNT; q++) {
		g->rings[q] = h->rings[q];
		g->ring_mask[q] = h->rings[q].capacity - 1;
	}
	g->tsc_hz = h->tsc_hz;
	g->tsc_ref_tick = h->tsc_ref_tick;
	g->tsc_ref_unix_ns = h->tsc_ref_unix_ns;
	g->policy_offset = h->policy_offset;
	g->policy_capacity = h->policy_capacity;
}

static void map_regions(struct rt_pool *p)
{
	int q;
	p->hdr = (struct rt_pool_header *)p->base;
	p->registry = (struct rt_client_slot *)(p->base + p->geo.registry_offset);
	for (q = 0; q < RT_Q_COUNT; q++) {
		p->ring[q] = (struct ck_ring *)(p->base + p->geo.rings[q].ring_offset);
		p->slots[q] = p->base + p->geo.rings[q].slots_offset;
	}
	p->policy = NULL;
	p->policy_slots[0] = p->policy_slots[1] = NULL;
	if (p->geo.policy_capacity) {
		uint8_t *b = p->base + p->geo.policy_offset;
		p->policy = (struct rt_policy_block *)b;
		p->policy_slots[0] = (uint64_t *)(b + sizeof(struct rt_policy_block));
		p->policy_slots[1] = p->policy_slots[0] + p->geo.policy_capacity;
	}
}

static void fill_available(struct rt_pool *p)
{
	struct rt_available_entry batch[256];
	uint32_t id = 0, n;
	while (id < p->geo.buffer_count) {
		for (n = 0; n < 256 && id < p->geo.buffer_count; n++, id++)
			batch[n].buffer_id = id;
		rt_pool_push_available(p, batch, n);
	}
}

static double mib(uint64_t bytes)
{
	return (double)bytes / (1024.0 * 1024.0);
}

/*
 * Reserve the object's whole size in /dev/shm (extending it if needed). A pool
 * that does not fit is refused here, with what it wanted and what was free:
 * sparse pages would kill the first process that touched one /dev/shm could no
 * longer back.
 */
static int reserve_memory(int fd, const char *name, uint64_t size,
			  uint32_t buffer_count, uint32_t buffer_size, char *err,
			  size_t errlen)
{
	struct statvfs v;
	int rc;
	do
		rc = posix_fallocate(fd, 0, (off_t)size);
	while (rc == EINTR);
	if (rc == 0)
		return RETRACE_OK;
	if (statvfs("/dev/shm", &v) != 0)
		memset(&v, 0, sizeof v);
	return fail(err, errlen, RETRACE_E_SYS,
		    "cannot reserve %.1f MiB of shared memory for pool %s (%u buffers of %u bytes): "
		    "%s; /dev/shm has %.1f MiB free of %.1f MiB. Make the pool smaller "
		    "(retrace-agent --buffers N, --buffer-size BYTES) or /dev/shm larger "
		    "(docker run --shm-size=SIZE; mount -o remount,size=SIZE /dev/shm)",
		    mib(size), name, buffer_count, buffer_size, strerror(rc),
		    mib((uint64_t)v.f_bavail * v.f_frsize), mib((uint64_t)v.f_blocks * v.f_frsize));
}

/* Map the whole object; with `populate`, fill the page tables now (see the top). */
static void *map_pool_memory(int fd, size_t size, int populate)
{
	return mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | (populate ? MAP_POPULATE : 0),
		    fd, 0);
}

static int size_and_map(struct rt_pool *p, const struct rt_pool_create_opts *o,
			const struct rt_pool_header *proto, char *err, size_t errlen)
{
	int rc;
	if (o->group >= 0 && fchown(p->fd, (uid_t)-1, (gid_t)o->group) != 0)
		return open_error(errno, o->name, "chown", err, errlen);
	if (fchmod(p->fd, o->mode) != 0)
		return open_error(errno, o->name, "chmod", err, errlen);
	if ((rc = reserve_memory(p->fd, o->name, proto->total_size, proto->buffer_count,
				 proto->buffer_size, err, errlen)) != RETRACE_OK)
		return rc;
	p->size = proto->total_size;
	p->base = map_pool_memory(p->fd, p->size, o->populate);
	if (p->base == MAP_FAILED) {
		p->base = NULL;
		return fail(err, errlen, RETRACE_E_SYS, "cannot map pool %s: %s",
			    o->name, strerror(errno));
	}
	return RETRACE_OK;
}

int rt_pool_create(const struct rt_pool_create_opts *o, struct rt_pool *p,
		   char *err, size_t errlen)
{
	struct rt_pool_header proto;
	int rc, q;

	memset(p, 0, sizeof *p);
	p->fd = -1;
	if ((rc = check_create_opts(o, err, errlen)) != RETRACE_OK)
		return rc;
	memset(&proto, 0, sizeof proto);
	layout(o, &proto);
	if (o->replace) {
		rt_pool_retire(o->name); /* its clients re-attach to the new one */
		shm_unlink(o->name);
	}
	p->fd = shm_open(o->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, o->mode);
	if (p->fd < 0)
		return open_error(errno, o->name, "create", err, errlen);
	snprintf(p->name, sizeof p->name, "%s", o->name);
	p->owner = 1;
	if ((rc = size_and_map(p, o, &proto, err, errlen)) != RETRACE_OK) {
		close(p->fd);
		shm_unlink(o->name);
		p->fd = -1;
		return rc;
	}
	if (o->owner_lock && (rc = rt_pool_lock_owner(p, err, errlen)) != RETRACE_OK) {
		rt_pool_detach(p);
		shm_unlink(o->name);
		return rc;
	}
	proto.magic = RT_POOL_MAGIC;
	proto.abi_version = RT_ABI_VERSION;
	proto.mode = o->mode;
	proto.agent_pid = (uint32_t)getpid();
	proto.agent_id = o->agent_id;
	proto.generation = 1;
	proto.agent_start_time = rt_process_start_time(getpid());
	rt_tsc_calibrate(&proto.tsc_hz, &proto.tsc_ref_tick, &proto.tsc_ref_unix_ns, 20);
	geo_from(&p->geo, &proto);
	memcpy(p->base, &proto, sizeof proto);
	map_regions(p);
	for (q = 0; q < RT_Q_COUNT; q++)
		ck_ring_init(p->ring[q], p->geo.rings[q].capacity);
	if (o->fill_available)
		fill_available(p);
	ck_pr_fence_store();
	ck_pr_store_32(&p->hdr->state, RT_POOL_READY);
	return RETRACE_OK;
}

static int bad(char *err, size_t errlen, const char *what, unsigned long long v)
{
	return fail(err, errlen, RETRACE_E_GEOMETRY,
		    "pool header is inconsistent: %s (%llu)", what, v);
}

static int validate_rings(const struct rt_pool_header *h, char *err, size_t errlen)
{
	static const uint32_t sizes[RT_Q_COUNT] = {
		sizeof(struct rt_available_entry), sizeof(struct rt_complete_entry),
		sizeof(struct rt_breadcrumb_entry), sizeof(struct rt_trigger_entry)};
	int q;
	for (q = 0; q < RT_Q_COUNT; q++) {
		const struct rt_ring_desc *d = &h->rings[q];
		if (d->entry_size != sizes[q])
			return bad(err, errlen, "queue entry size", d->entry_size);
		if (d->capacity < 2 || (d->capacity & (d->capacity - 1)) ||
		    d->capacity > (1u << 25))
			return bad(err, errlen, "queue capacity", d->capacity);
		if (d->ring_offset % 64 || d->ring_offset < h->header_size ||
		    d->ring_offset + sizeof(struct ck_ring) > h->buffers_offset)
			return bad(err, errlen, "queue offset", d->ring_offset);
		if (d->slots_offset % 64 || d->slots_offset < h->header_size ||
		    d->slots_offset + (uint64_t)d->capacity * d->entry_size >
			    h->buffers_offset)
			return bad(err, errlen, "queue slots offset", d->slots_offset);
	}
	if (h->rings[RT_Q_AVAILABLE].capacity <= h->buffer_count ||
	    h->rings[RT_Q_COMPLETE].capacity <= h->buffer_count)
		return bad(err, errlen, "queue too small for the buffer count",
			   h->buffer_count);
	return RETRACE_OK;
}

int rt_pool_validate(const struct rt_pool_header *h, size_t object_size,
		     char *err, size_t errlen)
{
	if (object_size < sizeof *h)
		return fail(err, errlen, RETRACE_E_NOTREADY,
			    "pool object is %zu bytes, smaller than a header (still being created?)",
			    object_size);
	if (h->magic != RT_POOL_MAGIC)
		return fail(err, errlen, RETRACE_E_CORRUPT,
			    "not a retrace pool (bad magic %016llx)",
			    (unsigned long long)h->magic);
	if (h->abi_version != RT_ABI_VERSION)
		return fail(err, errlen, RETRACE_E_VERSION,
			    "pool ABI version %u, this library speaks %u: upgrade the older side",
			    h->abi_version, RT_ABI_VERSION);
	if (ck_pr_load_32(&h->state) != RT_POOL_READY)
		return fail(err, errlen, RETRACE_E_NOTREADY,
			    "pool is not ready (state %u)", h->state);
	if (h->header_size != sizeof *h)
		return bad(err, errlen, "header size", h->header_size);
	if (h->total_size != object_size)
		return fail(err, errlen, RETRACE_E_GEOMETRY,
			    "pool header says %llu bytes but the object has %zu",
			    (unsigned long long)h->total_size, object_size);
	if (h->page_size < 4096 || (h->page_size & (h->page_size - 1)))
		return bad(err, errlen, "page size", h->page_size);
	if (h->buffer_size < RT_POOL_MIN_BUFFER_SIZE ||
	    h->buffer_size > RT_POOL_MAX_BUFFER_SIZE || h->buffer_size % h->page_size)
		return bad(err, errlen, "buffer size", h->buffer_size);
	if (h->buffer_count < 1 || h->buffer_count > RT_POOL_MAX_BUFFER_COUNT)
		return bad(err, errlen, "buffer count", h->buffer_count);
	if (h->buffers_offset % h->page_size ||
	    h->buffers_offset + (uint64_t)h->buffer_size * h->buffer_count !=
		    h->total_size)
		return bad(err, errlen, "buffer region", h->buffers_offset);
	if (h->registry_slots < 1 || h->registry_slots > 65536 ||
	    h->registry_offset < h->header_size ||
	    h->registry_offset + (uint64_t)h->registry_slots *
					   sizeof(struct rt_client_slot) >
		    h->buffers_offset)
		return bad(err, errlen, "client registry", h->registry_offset);
	if (h->tsc_hz == 0)
		return bad(err, errlen, "TSC calibration", 0);
	if (h->policy_capacity &&
	    (h->policy_capacity < 8 || h->policy_capacity > RT_POOL_MAX_POLICY_SLOTS ||
	     (h->policy_capacity & (h->policy_capacity - 1)) || h->policy_offset % 64 ||
	     h->policy_offset < h->header_size ||
	     h->policy_offset + sizeof(struct rt_policy_block) +
			     2 * (uint64_t)h->policy_capacity * 8 >
		     h->buffers_offset))
		return bad(err, errlen, "policy table", h->policy_capacity);
	return validate_rings(h, err, errlen);
}

static int check_expected(const struct rt_pool_attach_opts *o,
			  const struct rt_pool_header *h, char *err, size_t errlen)
{
	if (o->expect_buffer_size && o->expect_buffer_size != h->buffer_size)
		return fail(err, errlen, RETRACE_E_GEOMETRY,
			    "pool %s has %u-byte buffers, %u were expected",
			    o->name, h->buffer_size, o->expect_buffer_size);
	if (o->expect_buffer_count && o->expect_buffer_count != h->buffer_count)
		return fail(err, errlen, RETRACE_E_GEOMETRY,
			    "pool %s has %u buffers, %u were expected", o->name,
			    h->buffer_count, o->expect_buffer_count);
	return RETRACE_OK;
}

/*
 * The rings' own size and mask in the live mapping (ck reads its mask from the
 * ring): a client would index slots with them. The owner puts them back instead.
 */
static int check_ring_structs(struct rt_pool *p, int restore, char *err, size_t errlen)
{
	int q;
	for (q = 0; q < RT_Q_COUNT; q++) {
		struct ck_ring *r = p->ring[q];
		uint32_t cap = p->geo.rings[q].capacity;
		if (ck_pr_load_uint(&r->size) == cap && ck_pr_load_uint(&r->mask) == cap - 1)
			continue;
		if (!restore)
			return fail(err, errlen, RETRACE_E_GEOMETRY,
				    "pool header is inconsistent: queue %d ring size %u / mask %u "
				    "for capacity %u", q, r->size, r->mask, cap);
		ck_pr_store_uint(&r->size, cap);
		ck_pr_store_uint(&r->mask, cap - 1);
	}
	return RETRACE_OK;
}

int rt_pool_attach(const struct rt_pool_attach_opts *o, struct rt_pool *p,
		   char *err, size_t errlen)
{
	const char *name = o->name ? o->name : RT_POOL_DEFAULT_NAME;
	struct rt_pool_attach_opts opts = *o;
	struct rt_pool_header copy;
	struct stat st;
	void *head;
	int rc;

	opts.name = name;
	memset(p, 0, sizeof *p);
	p->fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (p->fd < 0)
		return open_error(errno, name, "open", err, errlen);
	if (fstat(p->fd, &st) != 0) {
		rc = open_error(errno, name, "stat", err, errlen);
		goto out_close;
	}
	if ((size_t)st.st_size < sizeof(struct rt_pool_header)) {
		rc = rt_pool_validate(NULL, (size_t)st.st_size, err, errlen);
		goto out_close;
	}
	head = mmap(NULL, sizeof(struct rt_pool_header), PROT_READ, MAP_SHARED,
		    p->fd, 0);
	if (head == MAP_FAILED) {
		rc = open_error(errno, name, "map", err, errlen);
		goto out_close;
	}
	/* Judge a copy: the shared header can change while it is being checked. */
	memcpy(&copy, head, sizeof copy);
	munmap(head, sizeof(struct rt_pool_header));
	rc = rt_pool_validate(&copy, (size_t)st.st_size, err, errlen);
	if (rc == RETRACE_OK)
		rc = check_expected(&opts, &copy, err, errlen);
	if (rc != RETRACE_OK)
		goto out_close;
	/* Touching a page /dev/shm cannot back kills the process (SIGBUS): map only
	 * an object whose every page is reserved. An owner reserves them now. */
	if (opts.take_over)
		rc = reserve_memory(p->fd, name, (uint64_t)st.st_size, copy.buffer_count,
				    copy.buffer_size, err, errlen);
	else if ((uint64_t)st.st_blocks * 512u < (uint64_t)st.st_size)
		rc = fail(err, errlen, RETRACE_E_NOTREADY,
			  "pool %s has only %.1f of its %.1f MiB of memory reserved (made by an "
			  "older agent, or /dev/shm is full): not attaching, as touching the rest "
			  "could kill this process; restart retrace-agent to reserve it",
			  name, mib((uint64_t)st.st_blocks * 512u), mib((uint64_t)st.st_size));
	if (rc != RETRACE_OK)
		goto out_close;
	p->size = (size_t)st.st_size;
	p->base = map_pool_memory(p->fd, p->size, opts.populate);
	if (p->base == MAP_FAILED) {
		p->base = NULL;
		rc = open_error(errno, name, "map", err, errlen);
		goto out_close;
	}
	/* The header may have changed between the two maps: judge it again. */
	memcpy(&copy, p->base, sizeof copy);
	rc = rt_pool_validate(&copy, p->size, err, errlen);
	if (rc == RETRACE_OK)
		rc = check_expected(&opts, &copy, err, errlen);
	if (rc == RETRACE_OK) {
		geo_from(&p->geo, &copy);
		map_regions(p);
		rc = check_ring_structs(p, opts.take_over, err, errlen);
	}
	if (rc != RETRACE_OK) {
		munmap(p->base, p->size);
		p->base = NULL;
		p->hdr = NULL;
		goto out_close;
	}
	snprintf(p->name, sizeof p->name, "%s", name);
	return RETRACE_OK;
out_close:
	close(p->fd);
	p->fd = -1;
	return rc;
}

int rt_pool_lock_owner(struct rt_pool *p, char *err, size_t errlen)
{
	if (flock(p->fd, LOCK_EX | LOCK_NB) == 0)
		return RETRACE_OK;
	if (errno == EWOULDBLOCK)
		return fail(err, errlen, RETRACE_E_EXISTS,
			    "pool %s is owned by a running agent (pid %u)", p->name,
			    p->hdr ? p->hdr->agent_pid : 0u);
	return open_error(errno, p->name, "lock", err, errlen);
}

int rt_pool_owner_running(const char *name)
{
	int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0), owned;
	if (fd < 0)
		return 0;
	/* A shared lock is refused while the owner holds its exclusive one; ours,
	 * if granted, goes with the close. */
	owned = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
	close(fd);
	return owned;
}

int rt_pool_takeover(const char *name, uint32_t agent_id, struct rt_pool *p,
		     char *err, size_t errlen)
{
	struct rt_pool_attach_opts ao = { .name = name, .take_over = 1, .populate = 1 };
	int rc = rt_pool_attach(&ao, p, err, errlen);
	if (rc != RETRACE_OK)
		return rc;
	if ((rc = rt_pool_lock_owner(p, err, errlen)) != RETRACE_OK) {
		rt_pool_detach(p);
		return rc;
	}
	p->owner = 1;
	ck_pr_store_32(&p->hdr->agent_pid, (uint32_t)getpid());
	p->hdr->agent_id = agent_id;
	p->hdr->agent_start_time = rt_process_start_time(getpid());
	ck_pr_fence_store();
	ck_pr_inc_64(&p->hdr->generation);
	return RETRACE_OK;
}

unsigned int rt_pool_restore_geometry(struct rt_pool *p)
{
	struct rt_pool_header *h = p->hdr;
	const struct rt_pool_geometry *g = &p->geo;
	unsigned int fixed = 0;
	int q;
	/* Each field read once (volatile), compared with our copy, written back. */
#define RESTORE(field, want)                                                   \
	do {                                                                   \
		if (*(volatile __typeof__(h->field) *)&h->field != (want)) {   \
			*(volatile __typeof__(h->field) *)&h->field = (want);  \
			fixed++;                                               \
		}                                                              \
	} while (0)
	RESTORE(magic, RT_POOL_MAGIC);
	RESTORE(abi_version, RT_ABI_VERSION);
	RESTORE(total_size, g->total_size);
	RESTORE(header_size, (uint32_t)sizeof *h);
	RESTORE(page_size, g->page_size);
	RESTORE(buffer_size, g->buffer_size);
	RESTORE(buffer_count, g->buffer_count);
	RESTORE(buffers_offset, g->buffers_offset);
	RESTORE(registry_offset, g->registry_offset);
	RESTORE(registry_slots, g->registry_slots);
	for (q = 0; q < RT_Q_COUNT; q++) {
		RESTORE(rings[q].ring_offset, g->rings[q].ring_offset);
		RESTORE(rings[q].slots_offset, g->rings[q].slots_offset);
		RESTORE(rings[q].capacity, g->rings[q].capacity);
		RESTORE(rings[q].entry_size, g->rings[q].entry_size);
		if (ck_pr_load_uint(&p->ring[q]->size) != g->rings[q].capacity) {
			ck_pr_store_uint(&p->ring[q]->size, g->rings[q].capacity);
			fixed++;
		}
		if (ck_pr_load_uint(&p->ring[q]->mask) != g->ring_mask[q]) {
			ck_pr_store_uint(&p->ring[q]->mask, g->ring_mask[q]);
			fixed++;
		}
	}
	RESTORE(tsc_hz, g->tsc_hz);
	RESTORE(tsc_ref_tick, g->tsc_ref_tick);
	RESTORE(tsc_ref_unix_ns, g->tsc_ref_unix_ns);
	RESTORE(policy_offset, g->policy_offset);
	RESTORE(policy_capacity, g->policy_capacity);
#undef RESTORE
	return fixed;
}

/*
 * Publishing a policy table (one writer). The target copy is the one readers
 * are not sent to; its seq goes odd before the first slot is touched and even
 * after the last, and only then does generation move to it. Each store fence
 * orders the stores on either side of it for a reader that loads them in the
 * opposite order with a load fence between (rt_policy_read_begin/end).
 */
int rt_pool_policy_publish(struct rt_pool *p, const uint64_t *sites, const double *probs,
			   size_t n)
{
	struct rt_policy_block *b = p->policy;
	uint32_t cap = p->geo.policy_capacity;
	uint64_t g, seq;
	int c, rc;
	if (!b || (n && rt_adapt_table_capacity(n) > cap))
		return -1;
	g = ck_pr_load_64(&b->generation);
	c = (int)((g + 1) & 1);
	seq = ck_pr_load_64(&b->copy[c].seq) & ~1ull;
	ck_pr_store_64(&b->copy[c].seq, seq + 1);
	/* seq odd before any slot changes: a reader that sees a new slot sees
	 * the odd (or a later) seq when it checks again. */
	ck_pr_fence_store();
	rc = rt_adapt_table_build(p->policy_slots[c], cap, sites, probs, n);
	ck_pr_store_32(&b->copy[c].sites, rc == 0 ? (uint32_t)n : 0);
	/* every slot and the count before seq turns even again. */
	ck_pr_fence_store();
	ck_pr_store_64(&b->copy[c].seq, seq + 2);
	if (rc != 0)
		return -1; /* the live copy is untouched: readers keep it */
	/* the copy complete (seq even) before readers are sent to it. */
	ck_pr_fence_store();
	ck_pr_store_64(&b->generation, g + 1);
	ck_pr_store_64(&b->updates, ck_pr_load_64(&b->updates) + 1);
	return 0;
}

uint64_t rt_pool_policy_generation(const struct rt_pool *p, uint32_t *sites)
{
	uint64_t g;
	if (!p->policy) {
		if (sites)
			*sites = 0;
		return 0;
	}
	g = ck_pr_load_64(&p->policy->generation);
	if (sites)
		*sites = g ? ck_pr_load_32(&p->policy->copy[g & 1].sites) : 0;
	return g;
}

void rt_pool_detach(struct rt_pool *p)
{
	if (p->base)
		munmap(p->base, p->size);
	if (p->fd >= 0)
		close(p->fd);
	p->base = NULL;
	p->hdr = NULL;
	p->fd = -1;
}

int rt_pool_retire(const char *name)
{
	struct rt_pool_header *h;
	struct stat st;
	int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0), marked = 0;
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < sizeof *h) {
		close(fd);
		return 0;
	}
	h = mmap(NULL, sizeof *h, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (h == MAP_FAILED)
		return -1;
	if (ck_pr_load_64(&h->magic) == RT_POOL_MAGIC &&
	    ck_pr_load_32(&h->abi_version) == RT_ABI_VERSION) {
		ck_pr_fence_store();
		ck_pr_store_32(&h->state, RT_POOL_CLOSED);
		marked = 1;
	}
	munmap(h, sizeof *h);
	return marked;
}

int rt_pool_unlink(const char *name)
{
	return shm_unlink(name) == 0 ? RETRACE_OK : RETRACE_E_SYS;
}

uint64_t rt_pool_ticks_to_unix_ns(const struct rt_pool_header *h, uint64_t tick)
{
	__int128 d = (__int128)tick - (__int128)h->tsc_ref_tick;
	__int128 ns = d * 1000000000 / (__int128)h->tsc_hz;
	return (uint64_t)((__int128)h->tsc_ref_unix_ns + ns);
}

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * A clock reading and the tick it corresponds to, read as close together as the
 * machine allows: each try brackets the clock read between two tick reads, and
 * of RT_TSC_PAIR_TRIES tries the narrowest bracket wins, its tick the bracket's
 * middle. One plain pair of reads is exposed to a preemption between them: on a
 * loaded machine a millisecond there, at either end of the 20 ms window, put
 * the rate 5 % off and every span's duration with it (seen: a 1 ms spin decoded
 * as 0.956 ms, adaptive_spans under the stress run). A clean bracket is tens of
 * nanoseconds; a preempted one is milliseconds and loses.
 */
#define RT_TSC_PAIR_TRIES 32

static void tick_pair(clockid_t c, uint64_t *ns, uint64_t *tick)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < RT_TSC_PAIR_TRIES; i++) {
		uint64_t a = retrace_ticks(), v = now_ns(c), b = retrace_ticks();
		if (b >= a && b - a < best) {
			best = b - a;
			*ns = v;
			*tick = a + (b - a) / 2;
		}
	}
	if (best == UINT64_MAX) { /* ticks went backwards every time: take the last */
		*tick = retrace_ticks();
		*ns = now_ns(c);
	}
}

void rt_tsc_calibrate(uint64_t *hz, uint64_t *ref_tick, uint64_t *ref_unix_ns,
		      unsigned ms)
{
	struct timespec nap = {0, (long)ms * 1000000L};
	uint64_t m0, t0, m1, t1, r0, tr;

	tick_pair(CLOCK_MONOTONIC, &m0, &t0);
	tick_pair(CLOCK_REALTIME, &r0, &tr);
	nanosleep(&nap, NULL);
	tick_pair(CLOCK_MONOTONIC, &m1, &t1);
	if (m1 <= m0 || t1 <= t0)
		*hz = 1000000000ull; /* ticks are nanoseconds (fallback clock) */
	else
		*hz = (uint64_t)((__int128)(t1 - t0) * 1000000000 / (m1 - m0));
	if (*hz == 0)
		*hz = 1;
	*ref_tick = tr;
	*ref_unix_ns = r0;
}

uint64_t rt_process_start_time(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long start = 0;
	ssize_t n;
	char *p;
	int fd, field;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the command name may hold spaces */
	if (!p)
		return 0;
	/* After ") " comes field 3 (state); starttime is field 22. */
	for (field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (p)
		start = strtoull(p + 1, NULL, 10);
	return start;
}
