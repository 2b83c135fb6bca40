/*
 * pool_fixture.c — creates a small pool under a unique name, attaches the client
 * to it, and reads trigger entries back with the typed ring ops or the
 * reference drainer. Every pool created is unlinked by fixture_pool_destroy.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pool_fixture.h"
#include "retrace/retrace.h"
#include "shm/drain.h"
#include "shm/pool.h"

static struct rt_pool fixture_pool;
static char fixture_name[64];
static int fixture_open;

int fixture_pool_create(void)
{
	static unsigned int serial;
	struct rt_pool_create_opts o;
	char err[256];

	snprintf(fixture_name, sizeof fixture_name, "/rt-test-trig-%d-%u",
		 (int)getpid(), serial++);
	rt_pool_create_defaults(&o);
	o.name = fixture_name;
	o.buffer_size = 4096;
	o.buffer_count = 64;
	o.trigger_slots = 1024;
	o.breadcrumb_slots = 64;
	o.client_slots = 16;
	o.agent_id = 7;
	o.replace = 1;
	int rc = rt_pool_create(&o, &fixture_pool, err, sizeof err);
	if (rc != 0)
		fprintf(stderr, "fixture pool %s: %s\n", fixture_name, err);
	fixture_open = rc == 0;
	return rc;
}

const char *fixture_pool_name(void)
{
	return fixture_name;
}

int fixture_client_attach(void)
{
	struct retrace_config cfg;
	retrace_config_from_env(&cfg);
	cfg.pool_name = fixture_name;
	cfg.sample_shift = 0;
	cfg.head_shift = 0;
	cfg.quiet = 1;
	return retrace_init(&cfg);
}

size_t fixture_pop_triggers(struct fixture_trigger *out, size_t max)
{
	struct rt_trigger_entry e;
	size_t n = 0;
	while (n < max &&
	       rt_trigger_pop(RT_POOL_RING(&fixture_pool, RT_Q_TRIGGER),
			      RT_POOL_SLOTS(&fixture_pool, RT_Q_TRIGGER, rt_trigger_entry),
			      &e)) {
		out[n].trace_hi = e.trace_hi;
		out[n].trace_lo = e.trace_lo;
		out[n].trigger_id = e.trigger_id;
		out[n].group_size = e.group_size;
		out[n].group_index = e.group_index;
		n++;
	}
	return n;
}

static void count_group(void *arg, const struct rt_trigger_entry *group,
			unsigned int n)
{
	(void)group;
	(void)n;
	++*(size_t *)arg;
}

size_t fixture_drain_trigger_groups(void)
{
	size_t groups = 0;
	struct rt_drain_callbacks cb;
	struct rt_drain_stats st;
	memset(&cb, 0, sizeof cb);
	memset(&st, 0, sizeof st);
	cb.trigger = count_group;
	cb.arg = &groups;
	while (rt_drain_poll(&fixture_pool, &cb, &st) > 0)
		;
	return groups;
}

void fixture_pool_destroy(void)
{
	if (!fixture_open)
		return;
	retrace_shutdown();
	rt_pool_detach(&fixture_pool);
	rt_pool_unlink(fixture_name);
	fixture_open = 0;
}
