/* window.c — the cut minute: which traces of a window wait for the next one.
 *
 * A span's latency event is judged against the p90 of its operation in its minute
 * of trace time (paper.c). A window boundary rarely falls on a minute boundary, so
 * the window's newest minute is cut: the window holds only its first part, and a
 * p90 over that part can put a span in another tier than the whole minute would
 * (docs/selection.md, sixth pass: the last two repeats at 10 % were such traces).
 * The rule here holds back every trace with a span starting in that minute; the
 * caller passes them to rt_sel_select as held (their spans join the minute's p90s
 * without a verdict) and selects them in the next window, when the minute is whole.
 * A trace is held once at most — with windows shorter than a minute its minute may
 * still be open then, and the selector's carry of the cut minute covers it — and
 * the last window of a run holds nothing, so nothing is lost or selected twice.
 * The coordinator (coordinator/selection.c) and the replay (eval.c) both call it.
 */
#include "select.h"

#define NS_PER_MINUTE 60000000000ull

/* The minute of the latest span start of the window, or 0 for a window without
 * spans (no trace is held then). */
static uint64_t newest_minute(const rt_sel_trace *traces, size_t n)
{
	uint64_t latest = 0;
	for (size_t i = 0; i < n; i++)
		for (uint32_t j = 0; j < traces[i].n_spans; j++)
			if (traces[i].spans[j].start_ns > latest)
				latest = traces[i].spans[j].start_ns;
	return latest / NS_PER_MINUTE;
}

static bool has_span_in_minute(const rt_sel_trace *t, uint64_t minute)
{
	for (uint32_t j = 0; j < t->n_spans; j++)
		if (t->spans[j].start_ns / NS_PER_MINUTE == minute)
			return true;
	return false;
}

size_t rt_sel_hold_cut_minute(const rt_sel_trace *traces, size_t n, const bool *held_before,
			      bool last, bool *hold)
{
	uint64_t cut = last ? 0 : newest_minute(traces, n);
	size_t held = 0;
	for (size_t i = 0; i < n; i++) {
		bool again = held_before && held_before[i];
		hold[i] = !last && !again && has_span_in_minute(&traces[i], cut);
		held += hold[i];
	}
	return held;
}
