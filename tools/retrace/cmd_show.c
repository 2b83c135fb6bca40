/*
 * cmd_show.c — `retrace show`: one collected trace, decoded into spans.
 *
 * How it works: the store is opened read-only (SQLite WAL lets it read beside
 * a running coordinator). Every stored slice message of the trace goes through
 * the decoder (coordinator/decode.h), which rebuilds spans, logs and resources
 * across all hosts. The default view prints the trace's row, then the spans as
 * a tree (parent links are span indexes, so the tree crosses hosts) walked
 * with an explicit stack, each span with a waterfall bar placed by its start
 * and length relative to the whole trace; spans whose parent is not in the
 * trace are shown at top level and marked, and spans caught in a parent loop
 * (only possible with damaged data) are printed once, marked, at the end.
 * Strings from the trace are untrusted: control characters are escaped before
 * they reach the terminal.
 *
 * --json prints the store row, the decode counters and the trace as an OTLP/JSON
 * document (the export writer), so one shape serves both tools. --records
 * keeps the byte-level view: slices summed per agent and every record in hex,
 * reassembled with the shm framing decoder, without the span decoder.
 *
 * This file also holds the store and decode helpers `retrace export` shares
 * (declared in cmd.h).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "decode.h"
#include "export.h"
#include "retrace/tracer.h"
#include "shm/frame.h"
#include "store.h"
#include "wire/wire.h"

/* ------------------------------------------------- shared helpers ---- */

struct problem {
	const char *one, *many;
	uint64_t n;
};

uint64_t cli_decode_problems(const struct rt_decode_stats *st, char *out, size_t cap)
{
	const struct problem p[] = {
		{ "gap", "gaps", st->gaps },
		{ "corrupt frame", "corrupt frames", st->corrupt_frames },
		{ "corrupt event", "corrupt events", st->corrupt_events },
		{ "truncated record", "truncated records", st->truncated_records },
		{ "orphan chunk", "orphan chunks", st->orphan_chunks },
		{ "missing template", "missing templates", st->missing_templates },
		{ "orphan event", "orphan events", st->orphan_events },
		{ "partial span", "partial spans", st->partial_spans },
		{ "unmatched client span", "unmatched client spans", st->unmatched_client_spans },
		/* Listed even when identical (a re-sent slice): a summary that says
		 * "clean" must mean nothing was dropped. */
		{ "duplicate buffer", "duplicate buffers", st->duplicate_buffers },
		{ "conflicting duplicate", "conflicting duplicates", st->conflicting_buffers },
	};
	uint64_t total = 0;
	size_t i, len = 0;
	out[0] = 0;
	for (i = 0; i < sizeof p / sizeof p[0]; i++) {
		if (!p[i].n)
			continue;
		total += p[i].n;
		if (len < cap)
			len += (size_t)snprintf(out + len, cap - len, "%s%" PRIu64 " %s",
						len ? ", " : "", p[i].n, p[i].n == 1 ? p[i].one : p[i].many);
	}
	return total;
}

/* ------------------------------------------------ terminal output ---- */

/* Append s to out with control characters escaped (trace strings are
 * untrusted: no terminal escape sequence gets through). */
static size_t clean_append(char *out, size_t cap, size_t len, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	for (; *p && len + 5 < cap; p++) {
		if (*p == '\n') {
			out[len++] = '\\';
			out[len++] = 'n';
		} else if (*p < 0x20 || *p == 0x7f) {
			len += (size_t)snprintf(out + len, cap - len, "\\x%02x", *p);
		} else {
			out[len++] = (char)*p;
		}
	}
	out[len] = 0;
	return len;
}

static void print_clean(const char *s)
{
	char buf[4096];
	clean_append(buf, sizeof buf, 0, s);
	fputs(buf, stdout);
}

static void format_duration(uint64_t ns, char *out, size_t cap)
{
	if (ns < 1000)
		snprintf(out, cap, "%" PRIu64 " ns", ns);
	else if (ns < 1000000)
		snprintf(out, cap, "%.1f us", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(out, cap, "%.2f ms", (double)ns / 1e6);
	else
		snprintf(out, cap, "%.2f s", (double)ns / 1e9);
}

static const char *level_name(uint8_t level)
{
	static const char *names[] = { "DEBUG", "INFO", "WARN", "ERROR" };
	return level < 4 ? names[level] : "LOG";
}

#define BAR_WIDTH 30
#define MAX_INDENT 24 /* deeper levels print at this indent */
#define LEFT_MAX 56   /* service + operation column, beyond it the line just grows */

struct tree_view {
	const struct rt_decoded_trace *t;
	int attrs;
	uint64_t t0, t1;      /* trace time range */
	int left_width;
	int32_t *first_child, *next_sibling;
	uint8_t *visited;
};

static const char *span_service(const struct rt_decoded_trace *t, const struct rt_span *s)
{
	return s->resource < t->n_resources && t->resources[s->resource].service
		       ? t->resources[s->resource].service
		       : "unknown_service";
}

static int indent_of(unsigned depth)
{
	return 2 * (int)(depth < MAX_INDENT ? depth : MAX_INDENT);
}

static size_t left_column(const struct tree_view *v, const struct rt_span *s, unsigned depth,
			  char *out, size_t cap)
{
	size_t len = (size_t)snprintf(out, cap, "%*s", indent_of(depth), "");
	len = clean_append(out, cap, len, span_service(v->t, s));
	len = clean_append(out, cap, len, "  ");
	if (!s->name || !*s->name) { /* its start event was lost: say which span */
		if (len < cap)
			len += (size_t)snprintf(out + len, cap - len, "(span %016" PRIx64 ")", s->span_id);
		return len < cap ? len : cap - 1;
	}
	return clean_append(out, cap, len, s->name);
}

static void bar(const struct tree_view *v, const struct rt_span *s, char *out)
{
	uint64_t total = v->t1 > v->t0 ? v->t1 - v->t0 : 0;
	unsigned a = 0, b = BAR_WIDTH, i;
	if (total && s->start_ns >= v->t0) {
		a = (unsigned)((double)(s->start_ns - v->t0) * BAR_WIDTH / (double)total);
		b = (unsigned)ceil((double)(s->end_ns - v->t0) * BAR_WIDTH / (double)total);
	}
	if (a >= BAR_WIDTH)
		a = BAR_WIDTH - 1;
	if (b > BAR_WIDTH)
		b = BAR_WIDTH;
	if (b <= a)
		b = a + 1;
	for (i = 0; i < BAR_WIDTH; i++)
		out[i] = i >= a && i < b ? '=' : ' ';
	out[BAR_WIDTH] = 0;
}

static void print_value(const struct rt_value *val)
{
	switch (val->type) {
	case RT_VAL_STR:
		putchar('"');
		print_clean(val->u.s);
		putchar('"');
		break;
	case RT_VAL_INT: printf("%" PRId64, val->u.i); break;
	case RT_VAL_DOUBLE: printf("%.15g", val->u.d); break; /* for reading; export is exact */
	case RT_VAL_BOOL: printf("%s", val->u.b ? "true" : "false"); break;
	default: printf("nil"); break;
	}
}

static void print_logs(const struct rt_log_event *logs, uint32_t n, int indent)
{
	uint32_t i;
	for (i = 0; logs && i < n; i++) {
		printf("%*s[%s] ", indent, "", level_name(logs[i].level));
		print_clean(logs[i].body);
		printf("\n");
	}
}

static void print_span(const struct tree_view *v, uint32_t i, unsigned depth, const char *mark)
{
	const struct rt_span *s = &v->t->spans[i];
	char left[1024], dur[32], b[BAR_WIDTH + 1];
	uint32_t k;
	left_column(v, s, depth, left, sizeof left);
	format_duration(s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0, dur, sizeof dur);
	bar(v, s, b);
	printf("%-*s  %10s  |%s|", v->left_width, left, dur, b);
	if (s->status == RETRACE_STATUS_ERROR) {
		printf("  ERROR %" PRId64 ": ", s->status_code);
		print_clean(s->status_message);
	} else if (s->status == RETRACE_STATUS_OK) {
		printf("  OK");
	}
	if (s->flags & RT_SPAN_PARTIAL)
		printf("  (partial)");
	if (s->flags & RT_SPAN_NO_START)
		printf("  (no start)");
	if (s->flags & RT_SPAN_NO_END)
		printf("  (no end)");
	if (s->flags & RT_SPAN_UNMATCHED)
		printf("  (unmatched: no server side)");
	if (mark)
		printf("  (%s)", mark);
	printf("\n");
	for (k = 0; v->attrs && s->attrs && k < s->n_attrs; k++) {
		printf("%*s  ", indent_of(depth) + 4, "");
		print_clean(s->attrs[k].key);
		printf(" = ");
		print_value(&s->attrs[k].value);
		printf("\n");
	}
	print_logs(s->logs, s->n_logs, indent_of(depth) + 4);
}

/* A span whose parent index is valid and not itself. */
static int has_parent(const struct rt_decoded_trace *t, uint32_t i)
{
	int32_t p = t->spans[i].parent;
	return p >= 0 && (uint32_t)p < t->n_spans && (uint32_t)p != i;
}

/* Print the subtree under root depth-first, children in span order. */
static void print_subtree(struct tree_view *v, uint32_t root, const char *mark, int32_t *stack,
			  int32_t *cursor)
{
	uint32_t top = 1;
	v->visited[root] = 1;
	print_span(v, root, 0, mark);
	stack[0] = (int32_t)root;
	cursor[0] = v->first_child[root];
	while (top) {
		int32_t c = cursor[top - 1];
		if (c < 0) {
			top--;
			continue;
		}
		cursor[top - 1] = v->next_sibling[c];
		if (v->visited[c])
			continue;
		v->visited[c] = 1;
		print_span(v, (uint32_t)c, top, NULL);
		stack[top] = c;
		cursor[top] = v->first_child[c];
		top++;
	}
}

static int print_tree(const struct rt_decoded_trace *t, int attrs)
{
	struct tree_view v = { .t = t, .attrs = attrs };
	int32_t *stack, *cursor;
	char left[1024], mark[96];
	uint32_t i, n = t->n_spans;
	v.first_child = malloc((n + 1) * sizeof *v.first_child);
	v.next_sibling = malloc((n + 1) * sizeof *v.next_sibling);
	stack = malloc((n + 1) * sizeof *stack);
	cursor = malloc((n + 1) * sizeof *cursor);
	v.visited = calloc(n + 1, 1);
	if (!v.first_child || !v.next_sibling || !stack || !cursor || !v.visited) {
		fprintf(stderr, "retrace show: out of memory\n");
		free(v.first_child), free(v.next_sibling), free(stack), free(cursor), free(v.visited);
		return -1;
	}
	for (i = 0; i < n; i++) {
		const struct rt_span *s = &t->spans[i];
		int w;
		v.first_child[i] = -1;
		if (s->start_ns && (!v.t0 || s->start_ns < v.t0))
			v.t0 = s->start_ns;
		if (s->end_ns > v.t1)
			v.t1 = s->end_ns;
		w = (int)left_column(&v, s, 0, left, sizeof left);
		if (w > v.left_width)
			v.left_width = w;
	}
	v.left_width += 2 * 3; /* room for a few levels of nesting */
	if (v.left_width > LEFT_MAX)
		v.left_width = LEFT_MAX;
	/* children lists in span order: prepend while walking backwards */
	for (i = n; i-- > 0;) {
		v.next_sibling[i] = -1;
		if (has_parent(t, i)) {
			v.next_sibling[i] = v.first_child[t->spans[i].parent];
			v.first_child[t->spans[i].parent] = (int32_t)i;
		}
	}
	for (i = 0; i < n; i++) {
		if (has_parent(t, i))
			continue;
		if (t->spans[i].parent_id)
			snprintf(mark, sizeof mark, "orphan: parent %016" PRIx64 " not in the trace",
				 t->spans[i].parent_id);
		print_subtree(&v, i, t->spans[i].parent_id ? mark : NULL, stack, cursor);
	}
	for (i = 0; i < n; i++)
		if (!v.visited[i])
			print_subtree(&v, i, "parent links form a loop", stack, cursor);
	free(v.first_child), free(v.next_sibling), free(stack), free(cursor), free(v.visited);
	return 0;
}

/* "  agent 2      cart@db-1  3 spans, 2 logs": who delivered what (one line
 * per agent, so scripts can count the hosts of a trace). */
static void print_agent_line(const struct rt_decoded_trace *t, uint32_t agent)
{
	uint32_t i, spans = 0, logs = 0;
	char who[512];
	size_t len = 0;
	who[0] = 0;
	for (i = 0; i < t->n_resources; i++) {
		const struct rt_resource *r = &t->resources[i];
		if (r->agent_id != agent || len + 2 >= sizeof who)
			continue;
		if (len)
			len = clean_append(who, sizeof who, len, ", ");
		len = clean_append(who, sizeof who, len, r->service ? r->service : "unknown_service");
		if (r->host && *r->host) {
			len = clean_append(who, sizeof who, len, "@");
			len = clean_append(who, sizeof who, len, r->host);
		}
		if (len + 16 < sizeof who)
			len += (size_t)snprintf(who + len, sizeof who - len, " pid %u", r->pid);
	}
	for (i = 0; i < t->n_spans; i++)
		if (t->spans[i].agent_id == agent) {
			spans++;
			logs += t->spans[i].n_logs;
		}
	printf("  agent %-6u %s  %u span%s, %u log%s\n", agent, len ? who : "(no resource)", spans,
	       spans == 1 ? "" : "s", logs, logs == 1 ? "" : "s");
}

static void print_header(const struct rt_store_trace *row, const struct rt_decoded_trace *t,
			 const struct cli_trigger_names *names)
{
	char trig[640], ag[512], dur[32];
	uint64_t t0 = 0, t1 = 0;
	uint32_t i;
	for (i = 0; i < t->n_spans; i++) {
		if (t->spans[i].start_ns && (!t0 || t->spans[i].start_ns < t0))
			t0 = t->spans[i].start_ns;
		if (t->spans[i].end_ns > t1)
			t1 = t->spans[i].end_ns;
	}
	cli_list_triggers(trig, sizeof trig, names, row->trigger_ids, row->trigger_count);
	cli_list_ids(ag, sizeof ag, row->agents, row->agent_count, ",");
	format_duration(t1 > t0 ? t1 - t0 : 0, dur, sizeof dur);
	printf("trace %016" PRIx64 "%016" PRIx64 "  %s  agents %s  triggers %s  bytes %" PRIu64
	       "  spans %u  %s\n",
	       row->trace_hi, row->trace_lo, row->coherent ? "coherent" : "INCOHERENT", ag, trig,
	       row->bytes, t->n_spans, dur);
	if (row->missing_count) {
		char miss[512];
		cli_list_ids(miss, sizeof miss, row->missing, row->missing_count, ", ");
		printf("  missing slices from agent(s) %s\n", miss);
	}
	for (i = 0; t->agents && i < t->n_agents; i++)
		print_agent_line(t, t->agents[i]);
	printf("\n");
}

static void print_footer(const struct rt_decoded_trace *t)
{
	char problems[512];
	uint64_t n = cli_decode_problems(&t->st, problems, sizeof problems);
	if (t->n_loose_logs) {
		printf("\nlogs outside any span:\n");
		print_logs(t->loose_logs, t->n_loose_logs, 2);
	}
	if (n)
		printf("\ndecode problems: %s (%" PRIu64 " slices, %" PRIu64 " buffers, %" PRIu64
		       " records)\n", problems, t->st.slices, t->st.buffers, t->st.records);
	else
		printf("\ndecode: clean (%" PRIu64 " slices, %" PRIu64 " buffers, %" PRIu64
		       " records)\n", t->st.slices, t->st.buffers, t->st.records);
}

static void print_stats_json(const struct rt_decode_stats *st)
{
	printf("{\"slices\":%" PRIu64 ",\"buffers\":%" PRIu64 ",\"duplicate_buffers\":%" PRIu64
	       ",\"gaps\":%" PRIu64 ",\"records\":%" PRIu64 ",\"events\":%" PRIu64
	       ",\"raw_records\":%" PRIu64 ",\"corrupt_frames\":%" PRIu64
	       ",\"corrupt_events\":%" PRIu64 ",\"truncated_records\":%" PRIu64
	       ",\"orphan_chunks\":%" PRIu64 ",\"missing_templates\":%" PRIu64
	       ",\"orphan_events\":%" PRIu64 ",\"partial_spans\":%" PRIu64
	       ",\"conflicting_buffers\":%" PRIu64 ",\"duplicate_spans\":%" PRIu64
	       ",\"unmatched_client_spans\":%" PRIu64 ",\"complete\":%s}",
	       st->slices, st->buffers, st->duplicate_buffers, st->gaps, st->records, st->events,
	       st->raw_records, st->corrupt_frames, st->corrupt_events, st->truncated_records,
	       st->orphan_chunks, st->missing_templates, st->orphan_events, st->partial_spans,
	       st->conflicting_buffers, st->duplicate_spans, st->unmatched_client_spans,
	       rt_decode_complete(st) ? "true" : "false");
}

static int print_json(const struct rt_store_trace *row, const struct rt_decoded_trace *t,
		      const struct cli_trigger_names *names)
{
	struct rt_wire_buf doc = { 0 };
	char trig[128], ag[512], miss[512];
	if (rt_export_write(RT_EXPORT_OTLP_JSON, t, 1, &doc) != 0) {
		fprintf(stderr, "retrace show: out of memory\n");
		return -1;
	}
	cli_list_ids(trig, sizeof trig, row->trigger_ids, row->trigger_count, ",");
	cli_list_ids(ag, sizeof ag, row->agents, row->agent_count, ",");
	cli_list_ids(miss, sizeof miss, row->missing, row->missing_count, ",");
	printf("{\"trace_id\":\"%016" PRIx64 "%016" PRIx64 "\",\"coherent\":%s,\"triggers\":[%s]"
	       ",\"agents\":[%s],\"missing\":[%s],\"bytes\":%" PRIu64 ",\"slices\":%u"
	       ",\"late_slices\":%u,\"spans\":%u,\"loose_logs\":%u,\"decode\":",
	       row->trace_hi, row->trace_lo, row->coherent ? "true" : "false", trig, ag, miss,
	       row->bytes, row->slices, row->late_slices, t->n_spans, t->n_loose_logs);
	print_stats_json(&t->st);
	printf(",\"trigger_names\":");
	cli_json_trigger_names(stdout, names, row->trigger_ids, row->trigger_count);
	/* the document ends with a newline: leave it out inside the object */
	printf(",\"otlp\":%.*s}\n", (int)(doc.len ? doc.len - 1 : 0), (const char *)doc.data);
	rt_wire_buf_free(&doc);
	return 0;
}

/* ------------------------------------------- --records: raw records ---- */

struct show_buf {
	uint32_t agent, pid, tid, seq;
	uint64_t first_ns;
	const uint8_t *data;
	uint32_t len;
};

struct show_ctx {
	struct rt_wire_msg *msgs; /* decoded copies (their data points into raw[]) */
	void **raw;
	size_t nmsgs, cap;
	uint64_t malformed;
};

static int keep_slice(void *arg, const struct rt_store_slice *sl)
{
	struct show_ctx *x = arg;
	void *copy;
	if (x->nmsgs == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 16;
		struct rt_wire_msg *m = realloc(x->msgs, cap * sizeof *m);
		void **r;
		if (!m)
			return -1;
		x->msgs = m;
		if (!(r = realloc(x->raw, cap * sizeof *r)))
			return -1;
		x->raw = r;
		x->cap = cap;
	}
	if (!(copy = malloc(sl->msg_len ? sl->msg_len : 1)))
		return -1;
	memcpy(copy, sl->msg, sl->msg_len);
	if (rt_wire_decode(copy, sl->msg_len, &x->msgs[x->nmsgs]) != 0 ||
	    x->msgs[x->nmsgs].type != RT_WIRE_SLICE) {
		rt_wire_msg_free(&x->msgs[x->nmsgs]);
		free(copy);
		x->malformed++;
		return 0;
	}
	x->raw[x->nmsgs++] = copy;
	return 0;
}

static int cmp_buf(const void *a, const void *b)
{
	const struct show_buf *x = a, *y = b;
	if (x->agent != y->agent)
		return x->agent < y->agent ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

struct agent_sum {
	uint32_t agent, slices, buffers, writers;
	uint64_t records, bytes, corrupt, first_ns, last_ns;
};

static void print_hex(const uint8_t *p, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		printf("%02x", p[i]);
}

/* Reassemble one writer's buffers [b, e) into records. */
static void writer_records(const struct show_buf *b, size_t n, struct agent_sum *sum, int print)
{
	struct rt_reassembler r;
	size_t i;
	rt_reasm_init(&r);
	for (i = 0; i < n; i++) {
		uint32_t pos = 0;
		struct rt_frame f;
		int st;
		if (i && b[i].seq != b[i - 1].seq + 1)
			rt_reasm_gap(&r);
		while ((st = rt_frame_next(b[i].data, b[i].len, &pos, &f)) == RT_FRAME_OK) {
			const uint8_t *rec;
			size_t len;
			uint64_t tick;
			if (rt_reasm_feed(&r, &f, &rec, &len, &tick) != 1)
				continue;
			sum->records++;
			if (print) {
				printf("record agent=%u pid=%u stream=%u ", b[i].agent, b[i].pid,
				       b[i].tid);
				print_hex(rec, len);
				printf("\n");
			}
		}
		if (st == RT_FRAME_CORRUPT)
			sum->corrupt++;
	}
	rt_reasm_free(&r);
}

/* bufs sorted by (agent, pid, tid, seq): the end of the writer run at i. */
static size_t writer_end(const struct show_buf *bufs, size_t n, size_t i)
{
	size_t j = i;
	while (j < n && bufs[j].agent == bufs[i].agent && bufs[j].pid == bufs[i].pid &&
	       bufs[j].tid == bufs[i].tid)
		j++;
	return j;
}

static void print_records(const struct show_buf *bufs, size_t n)
{
	struct agent_sum scratch;
	size_t i = 0, j;
	while (i < n) {
		j = writer_end(bufs, n, i);
		memset(&scratch, 0, sizeof scratch);
		writer_records(bufs + i, j - i, &scratch, 1);
		i = j;
	}
}

static void summarise(struct show_buf *bufs, size_t n, struct agent_sum *sums, size_t *nsums)
{
	size_t i = 0, j;
	qsort(bufs, n, sizeof *bufs, cmp_buf);
	while (i < n) {
		struct agent_sum *s;
		if (!*nsums || sums[*nsums - 1].agent != bufs[i].agent) {
			s = &sums[(*nsums)++];
			memset(s, 0, sizeof *s);
			s->agent = bufs[i].agent;
		}
		s = &sums[*nsums - 1];
		for (j = i; j < writer_end(bufs, n, i); j++) {
			s->buffers++;
			s->bytes += bufs[j].len;
			if (bufs[j].first_ns && (!s->first_ns || bufs[j].first_ns < s->first_ns))
				s->first_ns = bufs[j].first_ns;
			if (bufs[j].first_ns > s->last_ns)
				s->last_ns = bufs[j].first_ns;
		}
		s->writers++;
		writer_records(bufs + i, j - i, s, 0);
		i = j;
	}
}

static void print_agent_sums(const struct rt_store_trace *t, struct agent_sum *sums,
			     size_t nsums, int json, uint64_t malformed)
{
	char a[40], b[40], trig[128];
	size_t i;
	cli_list_ids(trig, sizeof trig, t->trigger_ids, t->trigger_count, ",");
	if (json) {
		printf("{\"trace_id\":\"%016" PRIx64 "%016" PRIx64 "\",\"coherent\":%s,\"triggers\":[%s]"
		       ",\"bytes\":%" PRIu64 ",\"slices\":%u,\"late_slices\":%u,\"malformed_slices\":%" PRIu64
		       ",\"agents\":[",
		       t->trace_hi, t->trace_lo, t->coherent ? "true" : "false", trig, t->bytes,
		       t->slices, t->late_slices, malformed);
		for (i = 0; i < nsums; i++)
			printf("%s{\"agent\":%u,\"writers\":%u,\"buffers\":%u,\"records\":%" PRIu64
			       ",\"bytes\":%" PRIu64 ",\"corrupt_buffers\":%" PRIu64 ",\"first_ns\":%" PRIu64
			       ",\"last_ns\":%" PRIu64 "}",
			       i ? "," : "", sums[i].agent, sums[i].writers, sums[i].buffers,
			       sums[i].records, sums[i].bytes, sums[i].corrupt, sums[i].first_ns,
			       sums[i].last_ns);
		printf("]}\n");
		return;
	}
	cli_format_time(t->triggered_ns, a, sizeof a);
	printf("trace %016" PRIx64 "%016" PRIx64 "  %s  triggers %s  triggered %s  traversal %.2f ms\n",
	       t->trace_hi, t->trace_lo, t->coherent ? "coherent" : "INCOHERENT", trig, a,
	       (double)t->traversal_ns / 1e6);
	if (t->missing_count) {
		char miss[512];
		cli_list_ids(miss, sizeof miss, t->missing, t->missing_count, ", ");
		printf("  missing slices from agent(s) %s\n", miss);
	}
	for (i = 0; i < nsums; i++) {
		cli_format_time(sums[i].first_ns, a, sizeof a);
		cli_format_time(sums[i].last_ns, b, sizeof b);
		printf("  agent %-6u %u writer(s)  %4u buffers  %6" PRIu64 " records  %9" PRIu64
		       " bytes  %s .. %s%s\n",
		       sums[i].agent, sums[i].writers, sums[i].buffers, sums[i].records, sums[i].bytes,
		       a, b, sums[i].corrupt ? "  (corrupt frames)" : "");
	}
	if (malformed)
		printf("  %" PRIu64 " stored slice(s) did not decode\n", malformed);
}

/* The --records view: slices by agent, then every record. */
static int show_records(struct rt_store *s, const struct rt_store_trace *t, int json)
{
	struct show_ctx x = { 0 };
	struct show_buf *bufs = NULL;
	struct agent_sum *sums = NULL;
	size_t nb = 0, total = 0, nsums = 0, i;
	uint32_t k;
	int rc = -1;
	if (rt_store_slices(s, t->trace_hi, t->trace_lo, keep_slice, &x) != 0) {
		fprintf(stderr, "retrace show: %s\n", rt_store_errmsg(s)[0] ? rt_store_errmsg(s)
									    : "out of memory");
		goto out;
	}
	for (i = 0; i < x.nmsgs; i++)
		total += x.msgs[i].slice.buffer_count;
	bufs = calloc(total ? total : 1, sizeof *bufs);
	sums = calloc(total ? total : 1, sizeof *sums);
	if (!bufs || !sums)
		goto out;
	for (i = 0; i < x.nmsgs; i++) {
		const struct rt_wire_slice *sl = &x.msgs[i].slice;
		for (k = 0; k < sl->buffer_count; k++) {
			const struct rt_wire_slice_buffer *b = &sl->buffers[k];
			bufs[nb++] = (struct show_buf){ sl->agent_id, b->pid, b->tid, b->seq,
							rt_wire_slice_tick_ns(sl, b->first_tick), b->data, b->len };
		}
	}
	summarise(bufs, nb, sums, &nsums);
	print_agent_sums(t, sums, nsums, json, x.malformed);
	print_records(bufs, nb);
	rc = 0;
out:
	for (i = 0; i < x.nmsgs; i++) {
		rt_wire_msg_free(&x.msgs[i]);
		free(x.raw[i]);
	}
	free(x.msgs);
	free(x.raw);
	free(bufs);
	free(sums);
	return rc;
}

/* -------------------------------------------------------- command ---- */

static void show_usage(FILE *out)
{
	fprintf(out,
		"usage: retrace show TRACE_ID [--attrs] [--json] [--records]\n"
		"                    [--store STORE | --coordinator URL]\n"
		"Print one collected trace, decoded: its row (coherent, agents, triggers, bytes),\n"
		"then its spans as a tree across hosts with a waterfall bar, status, flags and\n"
		"logs; a last line sums up decode problems. TRACE_ID is the 32-hex id or its low\n"
		"16 hex digits.\n\n"
		"  -a, --attrs       also print each span's attributes\n"
		"  -j, --json        the row, the decode counters and the trace as OTLP/JSON\n"
		"                    ({\"trace_id\",...,\"decode\":{...},\"otlp\":{\"resourceSpans\"}})\n"
		"  -r, --records     the raw view instead: slices by agent, every record in hex\n"
		"                    (with --json: the per-agent summary as JSON)\n"
		CLI_STORE_USAGE("")
		"  -h, --help        this text\n");
}

static int show_decoded(struct rt_store *s, const struct rt_store_trace *row, int json, int attrs)
{
	struct cli_trigger_names names;
	struct rt_decoded_trace t;
	char err[256];
	int rc;
	if (rt_decode_stored(s, row->trace_hi, row->trace_lo, &t, err, sizeof err) != 0) {
		fprintf(stderr, "retrace show: %s\n", err);
		return -1;
	}
	/* The store's names, and those the trace itself carries (TRIGGER events:
	 * there before the coordinator stored them). */
	if (cli_trigger_names_load("show", s, &names) != 0) {
		rt_decoded_trace_free(&t);
		return -1;
	}
	for (uint32_t i = 0; i < t.n_trigger_names; i++)
		if (!cli_trigger_name(&names, t.trigger_names[i].id))
			cli_trigger_names_add(&names, t.trigger_names[i].id, t.trigger_names[i].name);
	if (json) {
		rc = print_json(row, &t, &names);
	} else {
		print_header(row, &t, &names);
		rc = print_tree(&t, attrs);
		if (rc == 0)
			print_footer(&t);
	}
	cli_trigger_names_free(&names);
	rt_decoded_trace_free(&t);
	return rc;
}

int cli_cmd_show(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "records", no_argument, NULL, 'r' }, { "json", no_argument, NULL, 'j' },
		{ "attrs", no_argument, NULL, 'a' },   { "store", required_argument, NULL, 'S' }, { "coordinator", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },    { 0, 0, 0, 0 },
	};
	char store_buf[1024];
	const char *path = NULL, *coord = NULL;
	struct rt_store_trace row;
	struct rt_store *s = NULL;
	uint64_t hi, lo;
	int ch, json = 0, records = 0, attrs = 0, rc;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "rjaSC:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'r': records = 1; break;
		case 'j': json = 1; break;
		case 'a': attrs = 1; break;
		case 'S': path = optarg; break;
		case 'C': coord = optarg; break;
		case 'h': show_usage(stdout); return 0;
		default: show_usage(stderr); return 2;
		}
	}
	if (optind != argc - 1 || rt_store_parse_trace_id(argv[optind], strlen(argv[optind]), &hi, &lo) != 0) {
		fprintf(stderr, "retrace show: give one trace id (32 hex digits, or the low 16)\n");
		return 2;
	}
	if (cli_store_locator("show", path, coord, store_buf, sizeof store_buf) != 0)
		return 1;
	path = store_buf;
	if (cli_open_store("show", path, &s) != 0)
		return 1;
	if (rt_store_get_trace(s, hi, lo, &row) != 0) {
		fprintf(stderr, "retrace show: no trace %s in %s\n", argv[optind], path);
		rt_store_close(s);
		return 1;
	}
	rc = records ? show_records(s, &row, json) : show_decoded(s, &row, json, attrs);
	rt_store_close(s);
	return rc == 0 ? 0 : 1;
}
