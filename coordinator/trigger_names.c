/*
 * coordinator/trigger_names.c — learning the names of user trigger ids.
 *
 * A client names a trigger id (retrace_trigger_name); the trace that fires it
 * carries a TRIGGER event {id, name} (shm/events.h), decoded with the trace's
 * spans. At a trace's close the coordinator reads those names from the decoded
 * trace (the coherent ones are decoded anyway; an incoherent one only when it
 * fired a user id whose name is not known yet, at most once a minute per such
 * id: "looked for, not found" is cached too) and writes a name it did not
 * have, or that changed, to the store's trigger_names table, where `retrace`,
 * the JSON API and the UI read it. A bounded cache of COORD_TRIGGER_NAMES ids,
 * filled from the store at start, keeps that to one store write per new name;
 * ids past it are still written, just not cached (counted).
 */
#include "coord_internal.h"

#include <stdlib.h>
#include <string.h>

#include "retrace/retrace.h"

#define COORD_TRIGGER_NAMES 1024

#define RETRY_UNNAMED_NS 60000000000ull /* an id no trace named: look again after 1 min */

struct coord_names {
	uint32_t n;
	struct {
		uint32_t id;
		char name[RT_STORE_TRIGGER_NAME_MAX]; /* "": looked for, not found */
		uint64_t tried_ns;                    /* then: when (monotonic) */
	} e[COORD_TRIGGER_NAMES];
};

static int find(const struct coord_names *m, uint32_t id)
{
	for (uint32_t i = 0; i < m->n; i++)
		if (m->e[i].id == id)
			return (int)i;
	return -1;
}

static void cache_put(struct rt_coord *c, uint32_t id, const char *name)
{
	struct coord_names *m = c->names;
	int i = find(m, id);
	if (i < 0) {
		if (m->n == COORD_TRIGGER_NAMES) {
			c->st.trigger_names_uncached++;
			return;
		}
		i = (int)m->n++;
		m->e[i].id = id;
	}
	snprintf(m->e[i].name, sizeof m->e[i].name, "%s", name);
}

static int load_one(void *arg, uint32_t id, const char *name)
{
	cache_put(arg, id, name);
	return 0;
}

int coord_names_init(struct rt_coord *c)
{
	if (!(c->names = calloc(1, sizeof *c->names)))
		return -1;
	coord_names_reload(c);
	return 0;
}

void coord_names_reload(struct rt_coord *c)
{
	if (!c->names)
		return;
	c->names->n = 0;
	if (rt_store_trigger_names(c->store, load_one, c) < 0)
		coord_log(c, LOG_WARN, "store: trigger names: %s", rt_store_errmsg(c->store));
}

void coord_names_free(struct rt_coord *c)
{
	free(c->names);
	c->names = NULL;
}

/* A user id of the row whose name is not known and was not looked for in the
 * last minute: decoding an incoherent trace just for names stops once every id
 * it fired is named, and happens once a minute per unnamed id (a service that
 * names none of its triggers costs one decode a minute, not one per trace). */
int coord_names_unknown(struct rt_coord *c, const struct rt_store_trace *row)
{
	uint64_t now = coord_now_ns();
	int want = 0;
	for (uint32_t i = 0; c->names && i < row->trigger_count && i < RT_STORE_MAX_TRIGGERS; i++) {
		uint32_t id = row->trigger_ids[i];
		int k;
		if (!id || id > RETRACE_TRIGGER_USER_MAX)
			continue;
		k = find(c->names, id);
		if (k >= 0 && (c->names->e[k].name[0] || now < c->names->e[k].tried_ns + RETRY_UNNAMED_NS))
			continue;
		if (k < 0) {
			if (c->names->n == COORD_TRIGGER_NAMES) {
				c->st.trigger_names_uncached++;
				continue; /* past the cache: only coherent traces teach it */
			}
			k = (int)c->names->n++;
			c->names->e[k].id = id;
			c->names->e[k].name[0] = 0;
		}
		c->names->e[k].tried_ns = now;
		want = 1;
	}
	return want;
}

void coord_names_learn(struct rt_coord *c, const struct rt_decoded_trace *dt)
{
	for (uint32_t i = 0; c->names && i < dt->n_trigger_names; i++) {
		const struct rt_trigger_name *t = &dt->trigger_names[i];
		int k = find(c->names, t->id);
		int renamed = k >= 0 && c->names->e[k].name[0];
		if (t->id > RETRACE_TRIGGER_USER_MAX ||
		    (k >= 0 && strcmp(c->names->e[k].name, t->name) == 0))
			continue;
		if (rt_store_put_trigger_name(c->store, t->id, t->name, coord_unix_ns()) < 0) {
			c->st.store_errors++;
			coord_log(c, LOG_ERROR, "store: trigger name: %s", rt_store_errmsg(c->store));
			continue;
		}
		coord_log(c, LOG_INFO, "trigger %u is named \"%s\"%s", t->id, t->name,
			  renamed ? " (renamed)" : "");
		cache_put(c, t->id, t->name);
		c->st.trigger_names_learned++;
	}
}
