/*
 * agent/policy.c — the adaptive span policy, from the coordinator into the pool.
 *
 * The coordinator sends a whole POLICY (wire/wire.h) after each learner cycle;
 * the agent writes it into its pool's policy table with rt_pool_policy_publish
 * (shm/pool.h: the copy readers are not on, then the generation word), so the
 * services' clients switch to it at once, whole. A policy older than the last
 * one applied (the coordinator's generation went backwards: a late message) is
 * counted and ignored (the coordinator's generations grow across its restarts:
 * its start second << 24, + 1 per cycle; an equal one is applied again, as
 * registration resends the current policy); one the table cannot take (a pool
 * created without a table, more sites than its capacity, a site that cannot
 * be placed) is refused with an error ack and counted, and the clients keep
 * the table they had.
 */
#include "agent.h"

#include <stdlib.h>

#include "shm/pool.h"
#include "daemon/figures.h"
#include "wire.h"

int32_t rt_agent_apply_policy(struct rt_agent *a, const struct rt_wire_policy *p)
{
	uint64_t *sites;
	double *probs;
	int rc;
	if (p->generation < a->policy_generation) {
		a->st.policy_stale++;
		return 0;
	}
	sites = malloc((p->entry_count ? p->entry_count : 1) * sizeof *sites);
	probs = malloc((p->entry_count ? p->entry_count : 1) * sizeof *probs);
	if (!sites || !probs) {
		free(sites);
		free(probs);
		a->st.policy_refused++;
		return RT_WIRE_E_NOMEM;
	}
	for (uint32_t i = 0; i < p->entry_count; i++) {
		sites[i] = p->entries[i].site;
		probs[i] = p->entries[i].p16 / 65535.0; /* rt_adapt_p16 gives p16 back */
	}
	rc = rt_pool_policy_publish(&a->pool, sites, probs, p->entry_count);
	free(sites);
	free(probs);
	if (rc != 0) {
		a->st.policy_refused++;
		return RT_WIRE_E_VALUE;
	}
	a->policy_generation = p->generation;
	a->st.policy_updates++;
	return 0;
}

void rt_agent_policy_figures(struct rt_figures *w, const struct rt_agent *a)
{
	uint32_t sites = 0;
	uint64_t g = rt_pool_policy_generation(&a->pool, &sites);
	rt_fig_section(w, "policy");
	rt_fig_gauge(w, "table_slots", a->pool.geo.policy_capacity);
	rt_fig_gauge(w, "sites", sites);
	rt_fig_gauge(w, "table_generation", g);
	rt_fig_gauge(w, "coordinator_generation", a->policy_generation);
	rt_fig_u64(w, "updates", a->st.policy_updates);
	rt_fig_u64(w, "refused", a->st.policy_refused);
	rt_fig_u64(w, "stale", a->st.policy_stale);
}
