/*
 * coordinator/decode_internal.h — what the files of the decoder share: the
 * output arena, the id map, the build state of one rt_decoder_finish, and the
 * event one record decodes to. Not for use outside coordinator/decode*.c.
 *
 *   decode.c        the decoder (slices in), applying events, reading the
 *                   streams, building the spans (its opening comment says how)
 *   decode_arena.c  the bump arena, growable arrays, the seeded id map
 *   decode_event.c  one tracer event's fields, read strictly (wire/mp.h)
 *   decode_log.c    log bodies from templates and arguments (printf)
 */
#ifndef RETRACE_COORDINATOR_DECODE_INTERNAL_H
#define RETRACE_COORDINATOR_DECODE_INTERNAL_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#include "decode.h"

#define NO_SPAN UINT32_MAX

/* ------------------------------------------------------------- arena ---- */

#define ARENA_CHUNK (64u * 1024u)

struct arena_chunk {
	struct arena_chunk *next;
	size_t used, cap;
	alignas(max_align_t) unsigned char data[];
};

struct arena {
	struct arena_chunk *head;
};

void *rt_dec_alloc(struct arena *a, size_t n);
char *rt_dec_strndup(struct arena *a, const char *s, size_t n);
void rt_dec_arena_free(struct arena *a);
/* Grow *p (an array of `elem`-sized items with capacity *cap) to hold `need`. */
int rt_dec_grow(void *p, size_t *cap, size_t need, size_t elem);
/* qsort, minus the undefined behaviour of a NULL base with no items. */
void rt_dec_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));

/* -------------------------------------------------------- id hash map ---- */

/* Open addressing from a 64-bit id to a uint32 index. The seed varies per
 * decoder so crafted ids cannot make every probe collide; output order never
 * depends on it (spans are sorted). */
struct idmap {
	uint64_t *keys;
	uint32_t *vals; /* NO_SPAN = empty */
	size_t cap, n;  /* cap: power of two */
	uint64_t seed;
};

/* The index stored for key, or NO_SPAN. */
uint32_t rt_dec_idmap_get(const struct idmap *m, uint64_t key);
/* Insert key -> val unless key is there; *existing: the index now stored. 0 or -1 (memory). */
int rt_dec_idmap_put(struct idmap *m, uint64_t key, uint32_t val, uint32_t *existing);
void rt_dec_idmap_free(struct idmap *m);

/* ------------------------------------------------------- build state ---- */

struct span_acc {
	uint64_t id, parent_id;
	const char *name;
	const char *status_message;
	int64_t status_code;
	int64_t dropped_ns;        /* SPAN_END adj, in ns */
	uint64_t start_ns, end_ns;
	uint16_t p16;
	uint64_t seen_ns;          /* time of the buffer its first event came in */
	uint64_t first_log_ns;     /* earliest log time, 0 = none */
	uint32_t agent, pid, tid;
	uint32_t stream, segment;  /* of its first event */
	uint32_t n_attrs, n_logs, n_ends;
	uint8_t kind, status, has_start, has_end, partial;
};

struct attr_acc {
	uint32_t span;
	struct rt_attr a;
};

struct log_acc {
	uint32_t span; /* span_acc index, or NO_SPAN for a loose log */
	uint32_t order;
	struct rt_log_event ev;
};

struct template_ent {
	uint64_t id;
	const char *text;
};

struct resource_acc {
	struct rt_resource r;
	uint32_t synthetic; /* made up for a span whose writer sent no RESOURCE */
	uint32_t order;
};

struct in_buf;

struct build {
	struct arena *out;
	struct rt_decode_stats *st;
	struct span_acc *spans;
	size_t n_spans, cap_spans;
	struct idmap span_ids;
	struct attr_acc *attrs;
	size_t n_attrs, cap_attrs;
	struct log_acc *logs;
	size_t n_logs, cap_logs;
	struct template_ent *templates;
	size_t n_templates, cap_templates;
	struct idmap template_ids;
	struct resource_acc *res;
	size_t n_res, cap_res;
	/* where the events being applied come from */
	const struct rt_wire_slice *slice;
	const struct in_buf *buf;
	uint32_t stream, segment;
	struct rt_trigger_name names[RT_DECODE_MAX_TRIGGER_NAMES];
	uint32_t n_names;
};

/* ---------------------------------------------------------- an event ---- */

struct event {
	uint8_t type, kind, status, level;
	uint16_t p16;        /* SPAN_START: the policy's keep probability */
	int64_t adj;         /* SPAN_END: dropped descendants' ticks */
	uint64_t span_id, parent_id, tick, template_id;
	uint32_t pid;
	int64_t code;
	const char *str;     /* name, key, text, template text */
	uint32_t str_len;    /* strlen(str) where the reader set it (LOG_TEXT), else 0 */
	const char *message; /* SPAN_END error message */
	struct rt_value value;
	struct rt_value *args;
	uint32_t n_args;
	struct rt_attr *attrs;
	uint32_t n_attrs;
};

/*
 * Decode one record as an event. Returns 1 (event), 0 (not an event: a raw
 * record) or -1 (an event whose fields do not decode exactly).
 */
int rt_dec_event(struct build *b, const uint8_t *rec, size_t len, struct event *e);

/* Give every templated log its template text and rendered body. 0 or -1 (memory). */
int rt_dec_render_logs(struct build *b);

#endif
