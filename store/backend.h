/*
 * store/backend.h — what a store backend implements (private to store/).
 *
 * Owns: the vtable behind the rt_store_* calls of store.h. A backend's handle
 * struct starts with `struct rt_store base` so that the interface hands out
 * the backend's own handle; store.c checks the common arguments (NULL handle,
 * read-only writes are the backend's) and dispatches.
 *
 * Promises: each entry has exactly the contract of the rt_store_* function of
 * the same name in store.h; open reports a failure through errmsg(NULL).
 */
#ifndef RETRACE_STORE_BACKEND_H
#define RETRACE_STORE_BACKEND_H

#include "store.h"

struct rt_store_backend;

struct rt_store {
	const struct rt_store_backend *be;
};

struct rt_store_backend {
	const char *name; /* "sqlite", "clickhouse" */
	/* o->path is the backend's own locator (a file path, a host:port/db). */
	int (*open)(struct rt_store **out, const struct rt_store_options *o);
	void (*close)(struct rt_store *s);
	const char *(*errmsg)(const struct rt_store *s); /* NULL: the last open failure */
	const char *(*path)(const struct rt_store *s);
	int (*begin)(struct rt_store *s);
	int (*commit)(struct rt_store *s);
	void (*rollback)(struct rt_store *s);
	int (*put_slice)(struct rt_store *s, const struct rt_store_slice *sl);
	int (*slices)(struct rt_store *s, uint64_t hi, uint64_t lo, rt_store_slice_fn fn,
		      void *arg);
	int (*trace_rates)(struct rt_store *s, uint64_t hi, uint64_t lo, struct rt_store_rate *out,
			   uint32_t max, uint32_t *n);
	int (*put_trace)(struct rt_store *s, const struct rt_store_trace *t);
	int (*add_late)(struct rt_store *s, const struct rt_store_slice *sl);
	int (*set_selection)(struct rt_store *s, const struct rt_store_trace *t);
	int (*delete_trace)(struct rt_store *s, uint64_t hi, uint64_t lo);
	int (*get_trace)(struct rt_store *s, uint64_t hi, uint64_t lo, struct rt_store_trace *out);
	int (*list)(struct rt_store *s, const struct rt_store_query *q, rt_store_trace_fn fn,
		    void *arg);
	int wants_spans; /* put_spans keeps them (else it ignores them) */
	int (*put_spans)(struct rt_store *s, const struct rt_store_span *spans, uint32_t n);
	int (*put_agent)(struct rt_store *s, const struct rt_store_agent *a);
	int (*delete_agent)(struct rt_store *s, uint32_t agent_id);
	int (*agents)(struct rt_store *s, rt_store_agent_fn fn, void *arg);
	int (*put_trigger)(struct rt_store *s, uint32_t agent_id, uint64_t seq, uint64_t received_ns,
			   const void *msg, size_t len);
	int (*done_trigger)(struct rt_store *s, uint32_t agent_id, uint64_t seq);
	int (*pending_triggers)(struct rt_store *s, rt_store_trigger_fn fn, void *arg);
	int (*retain)(struct rt_store *s, uint64_t now_ns, uint64_t *deleted);
	int (*stats)(struct rt_store *s, struct rt_store_stats *out);
	int (*put_trigger_name)(struct rt_store *s, uint32_t id, const char *name, uint64_t seen_ns);
	int (*trigger_names)(struct rt_store *s, rt_store_trigger_name_fn fn, void *arg);
};

/* The backend a locator names; *rest = the locator less its scheme. */
const struct rt_store_backend *rt_store_backend_of(const char *locator, const char **rest);

extern const struct rt_store_backend rt_store_sqlite_backend;
extern const struct rt_store_backend rt_store_clickhouse_backend;

#endif
