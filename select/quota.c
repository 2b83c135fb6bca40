/* quota.c — split a window's budget across root groups.
 *
 * The core is water-filling: groups sorted by capacity (rarest first) each take
 * min(capacity, remaining budget / groups left), so what a small group cannot use
 * flows to the larger ones; a final round-robin pass hands out any units left by
 * integer division. Alarmed groups are filled first from their own pot: up to
 * boost × the average quota each, all together at most cap × budget (never fewer
 * than one per alarmed group, and leaving one per non-alarmed group). Non-alarmed
 * groups share the rest; a surplus nobody else can use flows back to alarmed groups
 * because an unspent budget helps nobody. When the budget cannot give every group
 * one trace, groups go by an optional priority (the selector's recent kept count, so
 * tiny budgets rotate across windows), then rarest first.
 */
#include "select.h"

#include <math.h>
#include <stdlib.h>

typedef struct slot {
	size_t group;
	size_t cap;      /* how many more this group can take */
	double priority; /* lower goes first when not every group can get one */
} slot;

static int by_priority(const void *x, const void *y)
{
	const slot *a = x, *b = y;
	if (a->priority != b->priority)
		return a->priority < b->priority ? -1 : 1;
	if (a->cap != b->cap)
		return a->cap < b->cap ? -1 : 1;
	return a->group < b->group ? -1 : a->group > b->group;
}

static int by_cap(const void *x, const void *y)
{
	const slot *a = x, *b = y;
	if (a->cap != b->cap)
		return a->cap < b->cap ? -1 : 1;
	return a->group < b->group ? -1 : a->group > b->group;
}

/* Water-fill `budget` over slots (sorted here); adds into quota; returns the rest. */
static size_t water_fill(slot *s, size_t n, size_t budget, size_t *quota)
{
	qsort(s, n, sizeof *s, by_cap);
	size_t left = budget;
	for (size_t i = 0; i < n; i++) {
		size_t share = left / (n - i);
		size_t give = s[i].cap < share ? s[i].cap : share;
		quota[s[i].group] += give;
		s[i].cap -= give;
		left -= give;
	}
	for (bool progress = true; left > 0 && progress;) {
		progress = false;
		for (size_t i = 0; i < n && left > 0; i++) {
			if (s[i].cap == 0)
				continue;
			quota[s[i].group]++;
			s[i].cap--;
			left--;
			progress = true;
		}
	}
	return left;
}

/* Collect the non-empty groups matching `want` (0 = not alarmed, 1 = alarmed,
 * 2 = any), with capacity = size − quota so far. */
static size_t collect(const size_t *sizes, const bool *alarmed, const double *priority, size_t n,
		      int want, const size_t *quota, slot *out)
{
	size_t k = 0;
	for (size_t g = 0; g < n; g++) {
		bool a = alarmed && alarmed[g];
		if (sizes[g] == 0 || (want != 2 && a != (want == 1)))
			continue;
		out[k].group = g;
		out[k].cap = sizes[g] - quota[g];
		out[k].priority = priority ? priority[g] : 0.0;
		k++;
	}
	return k;
}

/* Budget smaller than the number of groups: one trace each, by priority, then
 * rarest groups first. */
static void one_each_rarest_first(slot *s, size_t k, size_t budget, size_t *quota)
{
	qsort(s, k, sizeof *s, by_priority);
	for (size_t i = 0; i < k && i < budget; i++)
		quota[s[i].group] = 1;
}

/* Give each alarmed group up to boost × average, capped in total; returns units used. */
static size_t fill_alarmed(const size_t *sizes, const bool *alarmed, size_t n, size_t budget,
			   size_t n_nonempty, size_t n_alarmed, double boost, double cap,
			   size_t *quota, slot *s)
{
	double avg = (double)budget / (double)n_nonempty;
	size_t per_group = (size_t)floor(boost * avg);
	if (per_group < 1)
		per_group = 1;
	size_t pot = (size_t)floor(cap * (double)budget);
	if (pot < n_alarmed)
		pot = n_alarmed;
	size_t others = n_nonempty - n_alarmed;
	if (pot > budget - others)
		pot = budget - others; /* every non-alarmed group keeps at least one */
	size_t k = collect(sizes, alarmed, NULL, n, 1, quota, s);
	for (size_t i = 0; i < k; i++)
		if (s[i].cap > per_group)
			s[i].cap = per_group;
	return pot - water_fill(s, k, pot, quota);
}

void rt_sel_quota(const size_t *sizes, const bool *alarmed, size_t n_groups, size_t budget,
		  double boost, double cap, size_t *quota)
{
	rt_sel_quota_prio(sizes, alarmed, NULL, n_groups, budget, boost, cap, quota);
}

void rt_sel_quota_prio(const size_t *sizes, const bool *alarmed, const double *priority,
		       size_t n_groups, size_t budget, double boost, double cap, size_t *quota)
{
	size_t total = 0, n_nonempty = 0, n_alarmed = 0;
	for (size_t g = 0; g < n_groups; g++) {
		quota[g] = 0;
		total += sizes[g];
		n_nonempty += sizes[g] > 0;
		n_alarmed += sizes[g] > 0 && alarmed && alarmed[g];
	}
	if (total <= budget) {
		for (size_t g = 0; g < n_groups; g++)
			quota[g] = sizes[g];
		return;
	}
	slot *s = malloc((n_nonempty ? n_nonempty : 1) * sizeof *s);
	if (!s)
		return;
	if (budget < n_nonempty) {
		size_t k = collect(sizes, NULL, priority, n_groups, 2, quota, s);
		one_each_rarest_first(s, k, budget, quota);
		free(s);
		return;
	}
	size_t left = budget;
	if (n_alarmed > 0)
		left -= fill_alarmed(sizes, alarmed, n_groups, budget, n_nonempty, n_alarmed, boost,
				     cap, quota, s);
	size_t k = collect(sizes, alarmed, NULL, n_groups, n_alarmed > 0 ? 0 : 2, quota, s);
	left = water_fill(s, k, left, quota);
	if (left > 0) { /* surplus nobody else could take flows to any group with room */
		k = collect(sizes, NULL, NULL, n_groups, 2, quota, s);
		water_fill(s, k, left, quota);
	}
	free(s);
}
