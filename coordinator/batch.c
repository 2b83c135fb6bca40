/*
 * coordinator/batch.c — group commit: one store transaction over several turns.
 *
 * A turn (coordinator.c, run_once) handles what arrived inside the open store
 * transaction and then either commits it or leaves it open for the next turn.
 * The replies that promise something stored (every slice's ACK, a TRIGGER's or
 * REGISTER's ACK) wait here, their nng context held, until the commit that
 * makes their rows durable; so "acknowledged = stored" holds at any batch size.
 * Replies that promise nothing (status, ping, a malformed request) go out in
 * their own turn.
 *
 * A batch commits when the first of these comes:
 *   - commit_interval passed since it opened (--commit-interval; 0 = every
 *     turn, as before group commit);
 *   - a turn brought nothing while replies wait (the loop waited up to its 5 ms
 *     tick, or to the interval's end): the senders are all waiting for these
 *     ACKs (an agent has 8 slices in flight at most), so waiting longer would
 *     gather nothing and only delay them. Under load the batch is therefore as
 *     large as what the agents have in flight, and the interval bounds a
 *     trickle's delay;
 *   - commit_slices slices wait (--commit-slices; 0 = the collector's contexts);
 *   - the held contexts run short: every collector context but one holds a
 *     reply (--collector-contexts, 512 by default; 32 before group commit), or
 *     all the coordinator socket's but 16 (128 in all: status and registrations
 *     must still get through);
 *   - the loop stops.
 * Why: ClickHouse pays per INSERT (a part per table, merged in the background),
 * so a commit per turn of ~10 traces caps it at tens of traces/s; SQLite pays
 * little per commit, so it keeps one per turn unless told otherwise.
 *
 * A commit that fails rolls the transaction back and answers every held durable
 * reply with an error ACK: the agents send again (they keep the data until
 * acknowledged), exactly as a failed per-turn commit did.
 */
#include "coord_internal.h"

#include <string.h>

#include "daemon/figures.h"

#define BATCH_DEFAULT_CLICKHOUSE_NS 250000000ull /* 0.25 s */

void coord_batch_init(struct rt_coord *c)
{
	struct coord_batch *b = &c->batch;
	double s = c->cfg.commit_interval;
	memset(b, 0, sizeof *b);
	if (s < 0) /* the store's default: ClickHouse wants few, large INSERTs */
		b->interval_ns = strncmp(rt_store_path(c->store), "clickhouse://", 13) == 0
					 ? BATCH_DEFAULT_CLICKHOUSE_NS
					 : 0;
	else
		b->interval_ns = (uint64_t)(s * 1e9);
	b->contexts = c->cfg.collector_contexts && c->cfg.collector_contexts < COORD_IN_COLLECT
			      ? c->cfg.collector_contexts
			      : COORD_IN_COLLECT;
	/* One context stays free, so a batch never waits on a slice it cannot take. */
	b->max_slices = b->contexts > 1 ? b->contexts - 1 : 1;
	if (c->cfg.commit_slices && c->cfg.commit_slices < b->max_slices)
		b->max_slices = c->cfg.commit_slices;
}

uint64_t coord_batch_wait(const struct rt_coord *c, uint64_t wait_ns)
{
	const struct coord_batch *b = &c->batch;
	uint64_t now, due;
	if (!b->open || !b->nheld)
		return wait_ns;
	now = coord_now_ns();
	due = b->opened_ns + b->interval_ns;
	if (due <= now)
		return 1; /* due now: a turn without waiting */
	return due - now < wait_ns ? due - now : wait_ns;
}

int coord_batch_begin(struct rt_coord *c)
{
	struct coord_batch *b = &c->batch;
	int rc;
	if (b->open)
		return 0;
	if ((rc = rt_store_begin(c->store)) != 0)
		return rc;
	b->open = 1;
	b->opened_ns = coord_now_ns();
	b->turns = 0;
	return 0;
}

void coord_batch_hold(struct rt_coord *c, struct coord_in *in)
{
	struct coord_batch *b = &c->batch;
	if (!in->collector && !in->durable) {
		coord_send_reply(in); /* promises nothing: no reason to wait */
		return;
	}
	b->held[b->nheld++] = in; /* at most one per context: it cannot overflow */
	if (in->collector)
		b->nslices++;
	else
		b->nreqs++;
}

int coord_batch_due(const struct rt_coord *c, uint64_t now_ns, int quiet)
{
	const struct coord_batch *b = &c->batch;
	if (!b->open)
		return 0;
	return b->interval_ns == 0 || now_ns - b->opened_ns >= b->interval_ns ||
	       b->nslices >= b->max_slices || b->nreqs >= COORD_IN_COORD - 16 ||
	       (quiet && b->nheld);
}

int coord_batch_finish(struct rt_coord *c, int rc)
{
	struct coord_batch *b = &c->batch;
	uint32_t i;
	if (rc == 0 && b->open) {
		coord_loop_let_go(c); /* agents' replies are acted on meanwhile */
		rc = rt_store_commit(c->store);
		coord_loop_take_back(c);
	}
	coord_stream_turn_done(c, rc == 0); /* committed rows only: the exporter reads them */
	if (rc != 0) {
		c->st.store_errors++;
		b->commit_failures++;
		coord_log(c, LOG_ERROR, "store transaction failed: %s", rt_store_errmsg(c->store));
		if (b->open) {
			rt_store_rollback(c->store);
			coord_names_reload(c); /* names learned in the batch went with it */
		}
		for (i = 0; i < b->nheld; i++)
			if (b->held[i]->collector || b->held[i]->durable)
				coord_reply_ack(c, b->held[i], RT_STORE_E_IO, NULL, 0);
	} else if (b->open) {
		b->commits++;
		b->committed_slices += b->nslices;
		if (b->nslices > b->max_slices_seen)
			b->max_slices_seen = b->nslices;
	}
	for (i = 0; i < b->nheld; i++)
		coord_send_reply(b->held[i]);
	b->open = 0;
	b->nheld = b->nslices = b->nreqs = 0;
	return rc;
}

void coord_batch_figures(struct rt_figures *w, const struct rt_coord *c)
{
	const struct coord_batch *b = &c->batch;
	rt_fig_time_f(w, "commit_interval_ms", b->interval_ns / 1e6, 1e-3);
	rt_fig_gauge(w, "collector_contexts", b->contexts);
	rt_fig_u64(w, "commits", b->commits);
	rt_fig_u64(w, "commit_failures", b->commit_failures);
	rt_fig_u64(w, "committed_slices", b->committed_slices);
	rt_fig_gauge(w, "max_commit_slices", b->max_slices_seen);
	rt_fig_u64(w, "turns_without_commit", b->turns_batched);
}
