/*
 * coordinator/selection.c — Gleaner-style selection of collected traces (select/).
 *
 * close_group (traversal.c) stores a trace's row, then hands it here. A coherent
 * trace is decoded from its stored slices (decode.h), turned into an rt_sel_trace
 * (service = its resource's service.name, operation = span name, parent indices,
 * error = status ERROR, logs with level and template id; free-text logs get a
 * Drain template at once, so no log text is kept) and joins the open *window*;
 * the decoded trace is freed right away. Incoherent traces, traces with no span
 * (raw tracepoints only) and traces that fail to decode bypass selection: they
 * stay stored, counted, without selection columns.
 *
 * A window closes when it is --select-window seconds old, or when it holds
 * --select-window-traces traces that arrived in it (or SEL_MAX_WINDOW_TRACES in all,
 * the memory bound). At its close the traces of its newest minute of trace time,
 * which the close cuts, are held back (rt_sel_hold_cut_minute, the rule the replay
 * of select-eval uses): they stay in the arrays and are selected in the next window,
 * when their minute is whole, once at most; a window closed by the memory bound
 * holds nothing. Their spans count toward this window's p90s (rt_sel_window.held).
 * Its budget is --select-budget (per minute) × the window length, the fraction
 * carried to the next window (an incident scale-up by the selector is borrowed
 * from the next windows' budget); a budget of 0 keeps everything. rt_sel_select_window
 * scores, groups (entry API) and picks; kept traces get score / pattern / group /
 * weight written to their row, the others are deleted with their slices, and the
 * per-group kept/dropped counters move. All of it runs in the loop thread inside
 * the loop's store transaction.
 *
 * Alarmed groups: (a) the entry API of every trace of the window that arrived
 * through a trigger other than head sampling (RETRACE_TRIGGER_HEAD_SAMPLED) is
 * alarmed in that window and in the next one (a trace's group is only known once
 * it is decoded, so trigger alarms are taken at window end); (b) an operator's
 * `retrace alarm SERVICE OPERATION --for D` alarms that entry API until D passes.
 */
#include "coord_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "retrace/retrace.h"
#include "retrace/tracer.h"
#include "select.h"
#include "daemon/figures.h"

#define SEL_MAX_WINDOW_TRACES 65536 /* a window closes early at this many traces */
#define SEL_MAX_SPANS 4096          /* spans kept per trace (later ones cut, counted) */
#define SEL_MAX_LOGS 16384          /* logs kept per trace */
#define SEL_MAX_GROUPS 1024         /* per-group counters kept (least recent replaced) */
#define SEL_MAX_ALARMS 256          /* operator alarms at once */
#define SEL_STATUS_GROUPS 64        /* groups listed in the status */
#define SEL_NAME_CHUNK 65536        /* string arena chunk */
#define SEL_NAME_MAX 127            /* longer service / operation names are cut */

struct sel_pending { /* one trace waiting for the end of its window */
	uint64_t hi, lo;
	size_t first_span, first_log; /* into the window's span / log arrays */
	uint32_t n_spans, n_logs;
	int triggered;                /* a trigger other than head sampling collected it */
	bool held_before;             /* held back by the window before: selected now */
};

struct sel_group_stat {
	uint64_t key; /* 0 = free */
	char name[RT_STORE_GROUP_MAX];
	uint64_t traces, kept, dropped, alarmed_windows;
	uint64_t last_window; /* window number it last had traces in */
};

struct sel_alarm {
	uint64_t key; /* 0 = free */
	char service[SEL_NAME_MAX + 1], operation[SEL_NAME_MAX + 1];
	uint64_t until_ns; /* monotonic */
};

/* Service / operation names of the open window: interned, in chunks that never move. */
struct sel_names {
	char **chunks;
	size_t nchunks, chunks_cap, used;
	const char **slots; /* open addressing, power of two */
	size_t nslots, count;
};

struct coord_selection {
	rt_selector *sel;
	/* the open window */
	struct sel_pending *pend;
	size_t npend, pend_cap;
	rt_sel_span *spans;
	size_t nspans, spans_cap;
	rt_sel_log *logs;
	size_t nlogs, logs_cap;
	struct sel_names names;
	size_t narrived;          /* traces that arrived in the open window (not held ones) */
	uint64_t window_start_ns; /* monotonic; 0 = no window open */
	double credit;            /* budget fraction carried to the next window */
	/* alarms */
	uint64_t *trigger_groups; /* groups alarmed by triggers in the last closed window */
	size_t ntrigger_groups, trigger_groups_cap;
	struct sel_alarm alarms[SEL_MAX_ALARMS];
	struct sel_group_stat groups[SEL_MAX_GROUPS];
	/* figures */
	uint64_t windows, traces_in, kept, dropped, held;
	uint64_t bypass_incoherent, bypass_no_spans, decode_errors, select_errors;
	uint64_t spans_cut, logs_cut, store_errors;
	uint64_t last_traces, last_budget, last_kept, last_groups, last_alarmed;
};

static uint64_t hash_name(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
	return h;
}

/* ------------------------------------------------------------ names ---- */

static char *names_store(struct sel_names *nm, const char *s, size_t n)
{
	if (!nm->nchunks || nm->used + n + 1 > SEL_NAME_CHUNK) {
		if (nm->nchunks == nm->chunks_cap) {
			size_t cap = nm->chunks_cap ? nm->chunks_cap * 2 : 8;
			char **v = realloc(nm->chunks, cap * sizeof *v);
			if (!v)
				return NULL;
			nm->chunks = v;
			nm->chunks_cap = cap;
		}
		if (!(nm->chunks[nm->nchunks] = malloc(SEL_NAME_CHUNK)))
			return NULL;
		nm->nchunks++;
		nm->used = 0;
	}
	char *r = nm->chunks[nm->nchunks - 1] + nm->used;
	memcpy(r, s, n);
	r[n] = 0;
	nm->used += n + 1;
	return r;
}

static int names_grow(struct sel_names *nm)
{
	size_t cap = nm->nslots ? nm->nslots * 2 : 256;
	const char **v = calloc(cap, sizeof *v);
	if (!v)
		return -1;
	for (size_t i = 0; i < nm->nslots; i++) {
		if (!nm->slots[i])
			continue;
		size_t j = hash_name(nm->slots[i], strlen(nm->slots[i])) & (cap - 1);
		while (v[j])
			j = (j + 1) & (cap - 1);
		v[j] = nm->slots[i];
	}
	free(nm->slots);
	nm->slots = v;
	nm->nslots = cap;
	return 0;
}

static const char *names_intern(struct sel_names *nm, const char *s)
{
	size_t n = s ? strnlen(s, SEL_NAME_MAX) : 0;
	if (!s)
		s = "";
	if ((nm->count + 1) * 2 > nm->nslots && names_grow(nm))
		return NULL;
	size_t j = hash_name(s, n) & (nm->nslots - 1);
	for (; nm->slots[j]; j = (j + 1) & (nm->nslots - 1))
		if (!strncmp(nm->slots[j], s, n) && nm->slots[j][n] == 0)
			return nm->slots[j];
	char *c = names_store(nm, s, n);
	if (!c)
		return NULL;
	nm->slots[j] = c;
	nm->count++;
	return c;
}

static void names_reset(struct sel_names *nm)
{
	for (size_t i = 0; i < nm->nchunks; i++)
		free(nm->chunks[i]);
	free(nm->chunks);
	free(nm->slots);
	memset(nm, 0, sizeof *nm);
}

/* ---------------------------------------------------------- helpers ---- */

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 64;
	while (n < need)
		n *= 2;
	void *v = realloc(*p, n * elem);
	if (!v)
		return -1;
	*p = v;
	*cap = n;
	return 0;
}

static void group_name(const rt_sel_trace *t, char *out, size_t cap)
{
	int32_t e = rt_sel_trace_entry(t);
	if (e < 0)
		snprintf(out, cap, "-");
	else
		snprintf(out, cap, "%s %s", t->spans[e].service ? t->spans[e].service : "",
			 t->spans[e].operation ? t->spans[e].operation : "");
}

/* The counters of a group; a full table replaces the group seen longest ago. */
static struct sel_group_stat *group_stat(struct coord_selection *x, uint64_t key,
					 const rt_sel_trace *t)
{
	struct sel_group_stat *oldest = &x->groups[0];
	size_t start = key % SEL_MAX_GROUPS;
	for (size_t k = 0; k < SEL_MAX_GROUPS; k++) {
		struct sel_group_stat *g = &x->groups[(start + k) % SEL_MAX_GROUPS];
		if (g->key == key)
			return g;
		if (!g->key) {
			oldest = g;
			break;
		}
		if (g->last_window < oldest->last_window)
			oldest = g;
	}
	memset(oldest, 0, sizeof *oldest);
	oldest->key = key;
	group_name(t, oldest->name, sizeof oldest->name);
	return oldest;
}

static const struct sel_group_stat *find_group(const struct coord_selection *x, uint64_t key)
{
	for (size_t k = 0; k < SEL_MAX_GROUPS; k++)
		if (x->groups[k].key == key)
			return &x->groups[k];
	return NULL;
}

/* A trigger other than head sampling fired for the trace. */
static int real_trigger(const struct rt_store_trace *row)
{
	for (uint32_t i = 0; i < row->trigger_count; i++)
		if (row->trigger_ids[i] != RETRACE_TRIGGER_HEAD_SAMPLED)
			return 1;
	return 0;
}

static int by_time(const void *a, const void *b)
{
	const rt_sel_log *x = a, *y = b;
	return x->ts_ns < y->ts_ns ? -1 : x->ts_ns > y->ts_ns;
}

static int add_log(struct coord_selection *x, const struct rt_log_event *e, uint32_t *n)
{
	if (*n >= SEL_MAX_LOGS) {
		x->logs_cut++;
		return 0;
	}
	if (grow((void **)&x->logs, &x->logs_cap, x->nlogs + 1, sizeof *x->logs))
		return -1;
	x->logs[x->nlogs++] = (rt_sel_log){
		.ts_ns = e->time_ns,
		.text = e->template_id ? NULL : (e->body ? e->body : ""),
		.template_id = e->template_id ? rt_sel_fold_template_id(e->template_id) : 0,
		.level = e->level > RT_SEL_LOG_ERROR ? RT_SEL_LOG_ERROR : e->level,
		/* the decoder knows the length: Drain need not measure the line */
		.text_len = e->body && e->body_len < UINT16_MAX ? (uint16_t)e->body_len : 0,
	};
	(*n)++;
	return 0;
}

/* Index of the decoded root span (no parent in the trace, earliest start), or -1. */
static int32_t decoded_root(const struct rt_decoded_trace *dt, uint32_t n)
{
	int32_t best = -1;
	for (uint32_t i = 0; i < n; i++)
		if ((dt->spans[i].parent < 0 || (uint32_t)dt->spans[i].parent >= n) &&
		    (best < 0 || dt->spans[i].start_ns < dt->spans[best].start_ns))
			best = (int32_t)i;
	return best;
}

/*
 * Append the decoded trace to the window's arrays as pending trace p. Logs written
 * outside any span join the root span's logs (in time order). Free-text logs are
 * mined now, so their text (in the decoded trace's arena) is not needed later.
 */
static int convert(struct coord_selection *x, const struct rt_decoded_trace *dt,
		   struct sel_pending *p)
{
	uint32_t n = dt->n_spans < SEL_MAX_SPANS ? dt->n_spans : SEL_MAX_SPANS;
	int32_t root = decoded_root(dt, n);
	x->spans_cut += dt->n_spans - n;
	p->first_span = x->nspans;
	p->first_log = x->nlogs;
	p->n_spans = p->n_logs = 0;
	if (grow((void **)&x->spans, &x->spans_cap, x->nspans + n, sizeof *x->spans))
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		const struct rt_span *d = &dt->spans[i];
		const char *svc = d->resource < dt->n_resources ? dt->resources[d->resource].service
							       : NULL;
		rt_sel_span *s = &x->spans[x->nspans++];
		memset(s, 0, sizeof *s);
		s->service = names_intern(&x->names, svc ? svc : "unknown_service");
		s->operation = names_intern(&x->names, d->name);
		if (!s->service || !s->operation)
			return -1;
		s->parent = d->parent >= 0 && (uint32_t)d->parent < n ? d->parent : -1;
		s->start_ns = d->start_ns;
		s->end_ns = d->end_ns;
		s->error = d->status == RETRACE_STATUS_ERROR;
		s->first_log = p->n_logs;
		for (uint32_t k = 0; k < d->n_logs; k++)
			if (add_log(x, &d->logs[k], &p->n_logs))
				return -1;
		if ((int32_t)i == root && dt->n_loose_logs) {
			for (uint32_t k = 0; k < dt->n_loose_logs; k++)
				if (add_log(x, &dt->loose_logs[k], &p->n_logs))
					return -1;
			qsort(&x->logs[p->first_log + s->first_log], p->n_logs - s->first_log,
			      sizeof *x->logs, by_time);
		}
		s->n_logs = p->n_logs - s->first_log;
		p->n_spans++;
	}
	rt_sel_trace t = { .id_hi = p->hi, .id_lo = p->lo, .spans = x->spans + p->first_span,
			   .n_spans = p->n_spans, .logs = x->logs + p->first_log,
			   .n_logs = p->n_logs };
	rt_sel_mine_templates(x->sel, &t, 1);
	for (uint32_t k = 0; k < t.n_logs; k++)
		t.logs[k].text = NULL; /* points into the decoded trace, freed next */
	return 0;
}

/* ------------------------------------------------------------ window ---- */

static size_t window_budget(struct rt_coord *c, size_t n)
{
	struct coord_selection *x = c->sel;
	if (c->cfg.select_budget <= 0)
		return n; /* keep everything (weights 1) */
	double b = c->cfg.select_budget * c->cfg.select_window / 60.0 + x->credit;
	double whole = b > 0 ? floor(b) : 0; /* credit < 0: an incident borrowed ahead */
	x->credit = b - whole;
	return whole > (double)SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)whole;
}

static int add_alarm_key(uint64_t **v, size_t *n, size_t *cap, uint64_t key)
{
	for (size_t i = 0; i < *n; i++)
		if ((*v)[i] == key)
			return 0;
	if (grow((void **)v, cap, *n + 1, sizeof **v))
		return -1;
	(*v)[(*n)++] = key;
	return 0;
}

/*
 * The window's alarmed groups: operator alarms still running, groups alarmed by
 * triggers in the previous window, and the groups of the triggered traces selected
 * in this window, t[i] = pend[order[i]] (also written to *now_trig, which becomes the
 * next window's "previous"; a held trace's trigger counts where it is selected).
 */
static int collect_alarms(struct rt_coord *c, const rt_sel_trace *t, const size_t *order, size_t n,
			  uint64_t now, uint64_t **out, size_t *nout, uint64_t **now_trig,
			  size_t *nnow)
{
	struct coord_selection *x = c->sel;
	size_t cap = 0, cap2 = 0;
	*out = *now_trig = NULL;
	*nout = *nnow = 0;
	for (size_t i = 0; i < SEL_MAX_ALARMS; i++)
		if (x->alarms[i].key && x->alarms[i].until_ns > now &&
		    add_alarm_key(out, nout, &cap, x->alarms[i].key))
			return -1;
	for (size_t i = 0; i < x->ntrigger_groups; i++)
		if (add_alarm_key(out, nout, &cap, x->trigger_groups[i]))
			return -1;
	if (c->cfg.select_no_trigger_alarms)
		return 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t g;
		if (!x->pend[order[i]].triggered || !(g = rt_sel_trace_group(&t[i])))
			continue;
		if (add_alarm_key(out, nout, &cap, g) || add_alarm_key(now_trig, nnow, &cap2, g))
			return -1;
	}
	return 0;
}

static void store_verdict(struct rt_coord *c, const struct sel_pending *p, const rt_sel_trace *t,
			  const rt_sel_verdict *v, struct sel_group_stat *g)
{
	struct coord_selection *x = c->sel;
	struct rt_store_trace row;
	int rc;
	memset(&row, 0, sizeof row);
	row.trace_hi = p->hi;
	row.trace_lo = p->lo;
	if (v->chosen) {
		row.score = v->score;
		row.pattern = v->pattern;
		row.group_key = v->group;
		group_name(t, row.group, sizeof row.group);
		row.weight = v->weight;
		rc = rt_store_set_selection(c->store, &row);
		if (rc == 0)
			coord_stream_note_kept(c, p->hi, p->lo);
		x->kept++;
		g->kept++;
	} else {
		rc = rt_store_delete_trace(c->store, p->hi, p->lo);
		coord_trace_mark_unselected(c, p->lo);
		x->dropped++;
		g->dropped++;
	}
	/* NOTFOUND: retention removed the trace while it waited; nothing to do. */
	if (rc < 0 && rc != RT_STORE_E_NOTFOUND) {
		x->store_errors++;
		c->st.store_errors++;
		coord_log(c, LOG_ERROR, "selection: store: %s", rt_store_errmsg(c->store));
	}
}

static void window_reset(struct coord_selection *x)
{
	x->npend = x->nspans = x->nlogs = x->narrived = 0;
	x->window_start_ns = 0;
	names_reset(&x->names);
}

/*
 * Open the next window with the held traces (hold[i] for pend[i]) already in it:
 * their pending entries, spans and logs move to the front of the arrays, in order
 * (so every move is to a lower or equal place), and their names are interned again
 * into a fresh table, as the old one goes with the closed window. Returns how many
 * were kept; 0 when out of memory (then they stay stored, unselected).
 */
static size_t keep_held(struct coord_selection *x, const bool *hold, uint64_t now)
{
	struct sel_names fresh = { 0 };
	size_t np = 0, ns = 0, nl = 0;
	for (size_t i = 0; i < x->npend; i++) {
		struct sel_pending p = x->pend[i];
		if (!hold[i])
			continue;
		memmove(&x->spans[ns], &x->spans[p.first_span], p.n_spans * sizeof *x->spans);
		memmove(&x->logs[nl], &x->logs[p.first_log], p.n_logs * sizeof *x->logs);
		for (uint32_t k = 0; k < p.n_spans; k++) {
			rt_sel_span *sp = &x->spans[ns + k];
			sp->service = names_intern(&fresh, sp->service);
			sp->operation = names_intern(&fresh, sp->operation);
			if (!sp->service || !sp->operation) {
				names_reset(&fresh);
				x->select_errors++;
				window_reset(x);
				return 0;
			}
		}
		p.first_span = ns;
		p.first_log = nl;
		p.held_before = true;
		ns += p.n_spans;
		nl += p.n_logs;
		x->pend[np++] = p;
	}
	names_reset(&x->names);
	x->names = fresh;
	x->npend = np;
	x->nspans = ns;
	x->nlogs = nl;
	x->narrived = 0;
	x->window_start_ns = np ? now : 0;
	return np;
}

static int is_alarmed(const uint64_t *v, size_t n, uint64_t key)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == key)
			return 1;
	return 0;
}

/* The window's traces as the selector reads them (pointers only now: the arrays grew
 * while it was open), the ones selected now first: t[k] is pend[order[k]] and the
 * n_held held back follow them. */
static size_t split_window(struct coord_selection *x, bool hold_nothing, rt_sel_trace *all,
			   bool *before, bool *hold, rt_sel_trace *t, size_t *order, size_t *n_held)
{
	size_t n = 0, h = 0;
	for (size_t i = 0; i < x->npend; i++) {
		all[i] = (rt_sel_trace){ .id_hi = x->pend[i].hi, .id_lo = x->pend[i].lo,
					 .spans = x->spans + x->pend[i].first_span,
					 .n_spans = x->pend[i].n_spans,
					 .logs = x->logs + x->pend[i].first_log,
					 .n_logs = x->pend[i].n_logs };
		before[i] = x->pend[i].held_before;
	}
	*n_held = rt_sel_hold_cut_minute(all, x->npend, before, hold_nothing, hold);
	for (size_t i = 0; i < x->npend; i++) {
		if (hold[i]) {
			t[x->npend - *n_held + h++] = all[i];
			continue;
		}
		order[n] = i;
		t[n++] = all[i];
	}
	return n;
}

/* Close the open window; hold_nothing: the memory bound closed it, no trace waits
 * (the selector is still told that windows follow: the cut minute is read as cut). */
static void close_window(struct rt_coord *c, uint64_t now, bool hold_nothing)
{
	struct coord_selection *x = c->sel;
	size_t npend = x->npend;
	rt_sel_trace *t = npend ? calloc(2 * npend, sizeof *t) : NULL;
	size_t *order = npend ? calloc(npend, sizeof *order) : NULL;
	bool *flags = npend ? calloc(2 * npend, sizeof *flags) : NULL;
	bool *hold = flags ? flags + npend : NULL;
	uint64_t *alarmed = NULL, *trig = NULL;
	size_t nalarmed = 0, ntrig = 0, budget, n = 0, n_held = 0;
	rt_sel_result res;
	if (!npend)
		goto done;
	if (!t || !order || !flags)
		goto fail;
	n = split_window(x, hold_nothing || c->cfg.select_no_hold, t + npend, flags, hold, t, order,
			 &n_held);
	x->windows++;
	x->held += n_held;
	if (n == 0) { /* everything waits: nothing is spent of the budget */
		x->last_traces = x->last_budget = x->last_kept = x->last_groups = 0;
		x->last_alarmed = 0;
		keep_held(x, hold, now);
		goto done;
	}
	/* Trigger alarms need the groups: computed from the spans, as the selector does. */
	if (collect_alarms(c, t, order, n, now, &alarmed, &nalarmed, &trig, &ntrig) != 0)
		goto fail;
	budget = window_budget(c, n);
	rt_sel_window w = { .traces = t, .n = n, .held = t + n, .n_held = n_held,
			    .budget = budget, .alarmed_groups = alarmed, .n_alarmed = nalarmed };
	if (rt_sel_select(x->sel, &w, &res) != 0)
		goto fail;
	/* An incident scale-up (selection.md step 6) borrows from the next windows'
	 * budget, so the kept rate stays the requested one over time. */
	if (c->cfg.select_budget > 0 && res.budget > budget)
		x->credit -= (double)(res.budget - budget);
	/* Picks the selector declined (below the group count, nothing new left) go to the
	 * next window, at most one window's budget in all (selection.md step 7). */
	if (c->cfg.select_budget > 0 && res.declined) {
		double per_window = c->cfg.select_budget * c->cfg.select_window / 60.0;
		x->credit += (double)res.declined;
		if (x->credit > per_window + 1.0)
			x->credit = per_window + 1.0;
	}
	x->last_traces = n;
	x->last_budget = res.budget;
	x->last_kept = res.n_chosen;
	x->last_groups = res.n_groups;
	x->last_alarmed = nalarmed;
	for (size_t k = 0; k < n; k++) {
		struct sel_group_stat *g = group_stat(x, res.verdicts[k].group, &t[k]);
		if (g->last_window != x->windows && is_alarmed(alarmed, nalarmed, g->key))
			g->alarmed_windows++;
		g->last_window = x->windows;
		g->traces++;
		store_verdict(c, &x->pend[order[k]], &t[k], &res.verdicts[k], g);
	}
	coord_log(c, LOG_INFO, "selection: window %llu: %zu traces, %zu groups (%zu alarmed), "
		  "budget %zu, kept %zu, %zu held to the next window", (unsigned long long)x->windows,
		  n, res.n_groups, nalarmed, res.budget, res.n_chosen, n_held);
	free(x->trigger_groups);
	x->trigger_groups = trig;
	x->ntrigger_groups = ntrig;
	x->trigger_groups_cap = ntrig;
	trig = NULL;
	if (n_held)
		keep_held(x, hold, now);
	else
		window_reset(x);
	goto done;
fail:
	/* Out of memory: the window's traces stay stored, unselected. */
	x->select_errors++;
	coord_log(c, LOG_ERROR, "selection: out of memory; %zu traces kept unselected", x->npend);
	window_reset(x);
done:
	free(t);
	free(order);
	free(flags);
	free(alarmed);
	free(trig);
}

/* ------------------------------------------------------- public API ---- */

int coord_selection_init(struct rt_coord *c)
{
	rt_sel_config cfg;
	c->sel = calloc(1, sizeof *c->sel);
	if (!c->sel)
		return -1;
	rt_sel_config_default(&cfg);
	if (!(c->sel->sel = rt_sel_create(&cfg))) {
		free(c->sel);
		c->sel = NULL;
		return -1;
	}
	return 0;
}

void coord_selection_free(struct rt_coord *c)
{
	struct coord_selection *x = c->sel;
	if (!x)
		return;
	rt_sel_destroy(x->sel);
	names_reset(&x->names);
	free(x->pend);
	free(x->spans);
	free(x->logs);
	free(x->trigger_groups);
	free(x);
	c->sel = NULL;
}

void coord_selection_add(struct rt_coord *c, const struct rt_store_trace *row,
			 const struct rt_decoded_trace *decoded)
{
	struct coord_selection *x = c->sel;
	const struct rt_decoded_trace *dt = decoded;
	struct sel_pending *p;
	if (!x)
		return;
	if (!row->coherent) {
		x->bypass_incoherent++;
		return;
	}
	if (!dt) {
		x->decode_errors++;
		return;
	}
	if (dt->n_spans == 0) {
		x->bypass_no_spans++;
		return;
	}
	if (grow((void **)&x->pend, &x->pend_cap, x->npend + 1, sizeof *x->pend)) {
		x->select_errors++;
		return;
	}
	p = &x->pend[x->npend];
	memset(p, 0, sizeof *p);
	p->hi = row->trace_hi;
	p->lo = row->trace_lo;
	p->triggered = real_trigger(row);
	if (convert(x, dt, p) != 0) {
		/* Undo the partial append; the trace stays stored, unselected. */
		x->nspans = p->first_span;
		x->nlogs = p->first_log;
		x->select_errors++;
		return;
	}
	if (!x->window_start_ns)
		x->window_start_ns = coord_now_ns();
	x->npend++;
	x->narrived++;
	x->traces_in++;
	if (x->npend >= SEL_MAX_WINDOW_TRACES) /* the memory bound: nothing held */
		close_window(c, coord_now_ns(), true);
	else if (c->cfg.select_window_traces && x->narrived >= c->cfg.select_window_traces)
		close_window(c, coord_now_ns(), false);
}

void coord_selection_tick(struct rt_coord *c, uint64_t now)
{
	struct coord_selection *x = c->sel;
	if (!x)
		return;
	for (size_t i = 0; i < SEL_MAX_ALARMS; i++)
		if (x->alarms[i].key && x->alarms[i].until_ns <= now)
			x->alarms[i].key = 0;
	if (x->window_start_ns && now - x->window_start_ns >= (uint64_t)(c->cfg.select_window * 1e9))
		close_window(c, now, false);
}

/* ----------------------------------------------------------- alarms ---- */

/* "SERVICE\nOPERATION" (split in place); 0 if both are there and not too long. */
static int parse_api(char *p, char **service, char **operation)
{
	char *nl = p ? strchr(p, '\n') : NULL;
	if (!nl)
		return -1;
	*nl = 0;
	*service = p;
	*operation = nl + 1;
	return **service && **operation && strlen(*service) <= SEL_NAME_MAX &&
			       strlen(*operation) <= SEL_NAME_MAX
		       ? 0
		       : -1;
}

static size_t alarm_add(struct coord_selection *x, char *args, uint64_t now, char *out, size_t cap)
{
	char *end, *service, *operation;
	double secs = strtod(args, &end);
	struct sel_alarm *slot = NULL;
	if (end == args || !(secs > 0) || secs > 1e7 || *end != '\n' ||
	    parse_api(end + 1, &service, &operation))
		return (size_t)snprintf(out, cap, "error: expected \"alarm add SECONDS\\nSERVICE\\nOPERATION\"");
	uint64_t key = rt_sel_op_key(service, operation);
	for (size_t i = 0; i < SEL_MAX_ALARMS; i++) {
		if (x->alarms[i].key == key) {
			slot = &x->alarms[i];
			break;
		}
		if (!x->alarms[i].key && !slot)
			slot = &x->alarms[i];
	}
	if (!slot)
		return (size_t)snprintf(out, cap, "error: %d alarms already set", SEL_MAX_ALARMS);
	slot->key = key;
	snprintf(slot->service, sizeof slot->service, "%s", service);
	snprintf(slot->operation, sizeof slot->operation, "%s", operation);
	slot->until_ns = now + (uint64_t)(secs * 1e9);
	return (size_t)snprintf(out, cap, "ok alarmed \"%s %s\" for %.0f s", service, operation,
				secs);
}

static size_t alarm_clear(struct coord_selection *x, char *args, char *out, size_t cap)
{
	char *service, *operation;
	size_t n = 0;
	if (!*args) {
		for (size_t i = 0; i < SEL_MAX_ALARMS; i++)
			n += x->alarms[i].key != 0;
		memset(x->alarms, 0, sizeof x->alarms);
		x->ntrigger_groups = 0;
		return (size_t)snprintf(out, cap, "ok cleared %zu operator alarm(s) and the trigger "
					"alarms", n);
	}
	if (parse_api(args, &service, &operation))
		return (size_t)snprintf(out, cap, "error: expected \"alarm clear[\\nSERVICE\\nOPERATION]\"");
	uint64_t key = rt_sel_op_key(service, operation);
	for (size_t i = 0; i < SEL_MAX_ALARMS; i++)
		if (x->alarms[i].key == key) {
			x->alarms[i].key = 0;
			n++;
		}
	for (size_t i = 0; i < x->ntrigger_groups; i++)
		if (x->trigger_groups[i] == key) {
			x->trigger_groups[i--] = x->trigger_groups[--x->ntrigger_groups];
			n++;
		}
	return (size_t)snprintf(out, cap, n ? "ok cleared \"%s %s\"" : "error: \"%s %s\" is not alarmed",
				service, operation);
}

static size_t alarm_list(struct coord_selection *x, uint64_t now, char *out, size_t cap)
{
	size_t len = 0;
#define PUT(...)                                                                     \
	do {                                                                         \
		if (len < cap)                                                       \
			len += (size_t)snprintf(out + len, cap - len, __VA_ARGS__); \
	} while (0)
	PUT("ok\n");
	for (size_t i = 0; i < SEL_MAX_ALARMS; i++)
		if (x->alarms[i].key && x->alarms[i].until_ns > now)
			PUT("operator\t%.0fs\t%s\t%s\n", (double)(x->alarms[i].until_ns - now) / 1e9,
			    x->alarms[i].service, x->alarms[i].operation);
	for (size_t i = 0; i < x->ntrigger_groups; i++) {
		const struct sel_group_stat *g = find_group(x, x->trigger_groups[i]);
		PUT("trigger\tnext window\t%s\t%016llx\n", g ? g->name : "?",
		    (unsigned long long)x->trigger_groups[i]);
	}
#undef PUT
	return len < cap ? len : cap - 1;
}

size_t coord_alarm_request(struct rt_coord *c, const char *req, size_t len, char *out, size_t cap)
{
	char buf[512], *verb, *args;
	uint64_t now = coord_now_ns();
	size_t n = len < sizeof buf - 1 ? len : sizeof buf - 1;
	if (!cap)
		return 0;
	memcpy(buf, req, n);
	buf[n] = 0; /* the request may or may not carry its NUL */
	if (!c->sel)
		return (size_t)snprintf(out, cap, "error: selection is not running");
	verb = buf + strlen("alarm");
	while (*verb == ' ')
		verb++;
	args = verb + strcspn(verb, " \n"); /* "add SECONDS\n..." or "clear\n..." */
	if (*args)
		*args++ = 0;
	if (!strcmp(verb, "add"))
		return alarm_add(c->sel, args, now, out, cap);
	if (!strcmp(verb, "clear"))
		return alarm_clear(c->sel, args, out, cap);
	if (!strcmp(verb, "list") || !*verb)
		return alarm_list(c->sel, now, out, cap);
	return (size_t)snprintf(out, cap, "error: unknown alarm request (add, list, clear)");
}

/* ---------------------------------------------------------- figures ---- */

static int by_traces(const void *a, const void *b)
{
	const struct sel_group_stat *x = *(const struct sel_group_stat *const *)a,
				    *y = *(const struct sel_group_stat *const *)b;
	return x->traces < y->traces ? 1 : x->traces > y->traces ? -1 : strcmp(x->name, y->name);
}

void coord_selection_figures(struct rt_figures *w, struct rt_coord *c)
{
	struct coord_selection *x = c->sel;
	const struct sel_group_stat *list[SEL_MAX_GROUPS];
	size_t n = 0, alarms = 0;
	uint64_t now = coord_now_ns();
	if (!x)
		return;
	for (size_t i = 0; i < SEL_MAX_ALARMS; i++)
		alarms += x->alarms[i].key && x->alarms[i].until_ns > now;
	rt_fig_section(w, "selection");
	rt_fig_time_f(w, "window_s", c->cfg.select_window, 1);
	rt_fig_gauge(w, "window_traces", c->cfg.select_window_traces);
	rt_fig_f(w, "budget_per_min", c->cfg.select_budget);
	rt_fig_u64(w, "windows", x->windows);
	rt_fig_gauge(w, "in_open_window", x->npend);
	rt_fig_u64(w, "traces_in", x->traces_in);
	rt_fig_u64(w, "kept", x->kept);
	rt_fig_u64(w, "dropped", x->dropped);
	rt_fig_u64(w, "held", x->held);
	rt_fig_u64(w, "bypassed_incoherent", x->bypass_incoherent);
	rt_fig_u64(w, "bypassed_no_spans", x->bypass_no_spans);
	rt_fig_u64(w, "decode_errors", x->decode_errors);
	rt_fig_u64(w, "select_errors", x->select_errors);
	rt_fig_u64(w, "store_errors", x->store_errors);
	rt_fig_u64(w, "spans_cut", x->spans_cut);
	rt_fig_u64(w, "logs_cut", x->logs_cut);
	rt_fig_gauge(w, "last_window_traces", x->last_traces);
	rt_fig_gauge(w, "last_window_budget", x->last_budget);
	rt_fig_gauge(w, "last_window_kept", x->last_kept);
	rt_fig_gauge(w, "last_window_groups", x->last_groups);
	rt_fig_gauge(w, "last_window_alarmed", x->last_alarmed);
	rt_fig_gauge(w, "operator_alarms", alarms);
	rt_fig_gauge(w, "trigger_alarms", x->ntrigger_groups);
	for (size_t i = 0; i < SEL_MAX_GROUPS; i++)
		if (x->groups[i].key)
			list[n++] = &x->groups[i];
	rt_fig_gauge(w, "groups", n);
	qsort(list, n, sizeof *list, by_traces);
	for (size_t i = 0; i < n && i < SEL_STATUS_GROUPS; i++) {
		char k[40], v[RT_STORE_GROUP_MAX + 128];
		if (rt_fig_prometheus(w)) { /* one labelled section per group */
			snprintf(k, sizeof k, "%016llx", (unsigned long long)list[i]->key);
			rt_fig_section_id(w, "group", "group_id", k);
			rt_fig_str(w, "name", list[i]->name);
			rt_fig_u64(w, "traces", list[i]->traces);
			rt_fig_u64(w, "kept", list[i]->kept);
			rt_fig_u64(w, "dropped", list[i]->dropped);
			rt_fig_u64(w, "alarmed_windows", list[i]->alarmed_windows);
			continue;
		}
		snprintf(k, sizeof k, "group.%016llx", (unsigned long long)list[i]->key);
		snprintf(v, sizeof v, "%s: traces=%llu kept=%llu dropped=%llu alarmed_windows=%llu",
			 list[i]->name, (unsigned long long)list[i]->traces,
			 (unsigned long long)list[i]->kept, (unsigned long long)list[i]->dropped,
			 (unsigned long long)list[i]->alarmed_windows);
		rt_fig_str(w, k, v);
	}
}

void coord_selection_counts(const struct rt_coord *c, uint64_t *windows, uint64_t *kept,
			    uint64_t *dropped, uint64_t *last_alarmed)
{
	const struct coord_selection *x = c->sel;
	*windows = x ? x->windows : 0;
	*kept = x ? x->kept : 0;
	*dropped = x ? x->dropped : 0;
	*last_alarmed = x ? x->last_alarmed : 0;
}
