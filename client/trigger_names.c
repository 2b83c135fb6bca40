/*
 * client/trigger_names.c — names of user trigger ids (retrace_trigger_name).
 *
 * One process-wide table of RETRACE_TRIGGER_NAMES {id, name} slots, like the
 * tracer's resource (the process's identity, not a thread's): writers append
 * under a mutex, filling a slot's name before publishing its id and then the
 * count with release order; readers (retrace_trigger, from any thread or a
 * signal handler) scan the published prefix with acquire loads and no lock. A
 * slot is never changed once published, so a reader never sees a torn name.
 *
 * The name reaches the coordinator as a TRIGGER event (shm/events.h) that the
 * thread writes into the fired trace at its end (client.c end_trace ->
 * rt_tracer_trigger_event): retrace_trigger only notes the id in the context.
 */
#include "client.h"

#include <stdatomic.h>
#include <string.h>

#include "shm/events.h"

static struct {
	pthread_mutex_t lock;
	_Atomic uint32_t count;           /* published slots (release/acquire) */
	struct {
		_Atomic uint32_t id;      /* published after name */
		char name[RETRACE_TRIGGER_NAME_MAX + 1];
	} slot[RETRACE_TRIGGER_NAMES];
} names = { .lock = PTHREAD_MUTEX_INITIALIZER };

_Static_assert(RETRACE_TRIGGER_NAME_MAX == RETRACE_EV_MAX_TRIGGER_NAME,
	       "the public name limit is the record format's");

static int valid_name(const char *name, size_t *len)
{
	if (!name)
		return 0;
	*len = strnlen(name, RETRACE_TRIGGER_NAME_MAX + 1);
	return retrace_event_trigger_name_ok(name, *len);
}

const char *retrace_trigger_name_get(uint32_t trigger_id)
{
	const char *b = retrace_builtin_trigger_name(trigger_id);
	uint32_t i, n;
	if (b || trigger_id == 0)
		return b;
	n = atomic_load_explicit(&names.count, memory_order_acquire);
	for (i = 0; i < n && i < RETRACE_TRIGGER_NAMES; i++)
		if (atomic_load_explicit(&names.slot[i].id, memory_order_acquire) == trigger_id)
			return names.slot[i].name;
	return NULL;
}

int retrace_trigger_name(uint32_t trigger_id, const char *name)
{
	const char *have;
	size_t len = 0;
	int rc = RETRACE_OK;
	uint32_t n;

	if (trigger_id == 0 || trigger_id > RETRACE_TRIGGER_USER_MAX || !valid_name(name, &len))
		return RETRACE_E_INVAL;
	pthread_mutex_lock(&names.lock);
	have = retrace_trigger_name_get(trigger_id);
	n = names.count;
	if (have) {
		rc = strcmp(have, name) == 0 ? RETRACE_OK : RETRACE_E_EXISTS;
	} else if (n == RETRACE_TRIGGER_NAMES) {
		rc = RETRACE_E_FULL;
	} else {
		memcpy(names.slot[n].name, name, len + 1);
		/* id after the name, count after the id: pair with the acquires in
		 * retrace_trigger_name_get, which reads count, then id, then name */
		atomic_store_explicit(&names.slot[n].id, trigger_id, memory_order_release);
		atomic_store_explicit(&names.count, n + 1, memory_order_release);
	}
	pthread_mutex_unlock(&names.lock);
	return rc;
}
