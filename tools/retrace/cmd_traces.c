/*
 * cmd_traces.c — `retrace traces` and `retrace show`: read the coordinator's store.
 *
 * Both open the store file read-only (SQLite WAL lets them read beside a running
 * coordinator, and they work when it is stopped). `show` decodes each stored
 * slice message again, groups its buffers by agent and by writer (pid, tid),
 * orders each writer's buffers by sequence and reassembles the records with
 * the shm framing decoder, so it reports records, bytes and time ranges per
 * agent, and with --records prints every record (hex) for byte-level checks.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "shm/frame.h"
#include "store.h"
#include "wire/wire.h"

static const char *default_store(void)
{
	const char *s = getenv("RETRACE_STORE");
	return s && *s ? s : RT_STORE_DEFAULT_PATH;
}

static int open_store(const char *cmd, const char *path, struct rt_store **s)
{
	struct rt_store_options o = { .path = path, .readonly = 1 };
	int rc = rt_store_open(s, &o);
	if (rc != 0) {
		fprintf(stderr, "retrace %s: cannot open the store %s: %s\n", cmd, path,
			rt_store_errmsg(*s));
		rt_store_close(*s);
		*s = NULL;
		return -1;
	}
	return 0;
}

/* "90s", "5m", "2h", "1d", "1500ms" or plain seconds -> ns; 0 on error. */
static uint64_t parse_duration(const char *v)
{
	char *end;
	double x;
	errno = 0;
	x = strtod(v, &end);
	if (errno || end == v || x <= 0)
		return 0;
	if (!*end || !strcmp(end, "s"))
		return (uint64_t)(x * 1e9);
	if (!strcmp(end, "ms"))
		return (uint64_t)(x * 1e6);
	if (!strcmp(end, "m"))
		return (uint64_t)(x * 60e9);
	if (!strcmp(end, "h"))
		return (uint64_t)(x * 3600e9);
	if (!strcmp(end, "d"))
		return (uint64_t)(x * 86400e9);
	return 0;
}

static void format_time(uint64_t unix_ns, char *out, size_t cap)
{
	time_t t = (time_t)(unix_ns / 1000000000ull);
	struct tm tm;
	char base[32];
	if (!unix_ns) {
		snprintf(out, cap, "-");
		return;
	}
	gmtime_r(&t, &tm);
	strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, cap, "%s.%03uZ", base, (unsigned)(unix_ns / 1000000ull % 1000));
}

static void list_ids(char *out, size_t cap, const uint32_t *ids, uint32_t n, const char *sep)
{
	uint32_t i;
	size_t len = 0;
	out[0] = 0;
	for (i = 0; i < n && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s%u", i ? sep : "", ids[i]);
}

/* ------------------------------------------------------------ traces ---- */

struct list_ctx {
	int json;
	uint64_t count;
};

static int print_trace(void *arg, const struct rt_store_trace *t)
{
	struct list_ctx *l = arg;
	char trig[128], agents[512], missing[512], when[40];
	list_ids(trig, sizeof trig, t->trigger_ids, t->trigger_count, ",");
	list_ids(agents, sizeof agents, t->agents, t->agent_count, ",");
	list_ids(missing, sizeof missing, t->missing, t->missing_count, ",");
	format_time(t->triggered_ns, when, sizeof when);
	if (l->json) {
		printf("%s{\"trace_id\":\"%016" PRIx64 "%016" PRIx64 "\",\"group\":%" PRIu64
		       ",\"triggers\":[%s],\"agents\":[%s],\"missing\":[%s],\"coherent\":%s"
		       ",\"bytes\":%" PRIu64 ",\"slices\":%u,\"late_slices\":%u"
		       ",\"first_ns\":%" PRIu64 ",\"last_ns\":%" PRIu64 ",\"triggered_ns\":%" PRIu64
		       ",\"closed_ns\":%" PRIu64 ",\"traversal_ns\":%" PRIu64 "}",
		       l->count ? ",\n " : "[", t->trace_hi, t->trace_lo, t->group_id, trig, agents,
		       missing, t->coherent ? "true" : "false", t->bytes, t->slices, t->late_slices,
		       t->first_ns, t->last_ns, t->triggered_ns, t->closed_ns, t->traversal_ns);
	} else {
		if (!l->count)
			printf("%-32s  %-10s  %-24s  %-10s  %10s  %6s  %9s  %s\n", "TRACE", "COHERENT",
			       "TRIGGERED", "TRIGGERS", "BYTES", "SLICES", "TRAVERSAL", "AGENTS");
		printf("%016" PRIx64 "%016" PRIx64 "  %-10s  %-24s  %-10s  %10" PRIu64
		       "  %6u  %7.2fms  %s%s%s\n",
		       t->trace_hi, t->trace_lo, t->coherent ? "yes" : "NO", when, trig, t->bytes,
		       t->slices, (double)t->traversal_ns / 1e6, agents,
		       t->missing_count ? " missing:" : "", t->missing_count ? missing : "");
	}
	l->count++;
	return 0;
}

static void traces_usage(FILE *out)
{
	fprintf(out,
		"usage: retrace traces [--trigger ID] [--since DURATION] [--incoherent] [--limit N]\n"
		"                      [--json] [--store PATH]\n"
		"List the traces the coordinator collected, newest first.\n\n"
		"  -t, --trigger ID     only traces a trigger with this id fired for\n"
		"  -s, --since D        only traces closed in the last D (90s, 5m, 2h, 1d)\n"
		"  -i, --incoherent     only traces with a missing slice\n"
		"  -n, --limit N        at most N traces (default all)\n"
		"  -j, --json           a JSON array\n"
		"  -S, --store PATH     the store file (default $RETRACE_STORE or ./retrace.db)\n"
		"  -h, --help           this text\n");
}

int retrace_cmd_traces(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "trigger", required_argument, NULL, 't' }, { "since", required_argument, NULL, 's' },
		{ "incoherent", no_argument, NULL, 'i' },    { "limit", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },          { "store", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },          { 0, 0, 0, 0 },
	};
	struct rt_store_query q = { 0 };
	struct list_ctx l = { 0 };
	const char *path = default_store();
	struct rt_store *s = NULL;
	uint64_t since = 0;
	char *end;
	int ch, rc;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "t:s:in:jS:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 't':
			errno = 0;
			q.trigger_id = (uint32_t)strtoul(optarg, &end, 0);
			if (errno || *end || *optarg == '-') {
				fprintf(stderr, "retrace traces: --trigger wants a number, got '%s'\n", optarg);
				return 2;
			}
			q.by_trigger = 1;
			break;
		case 's':
			if (!(since = parse_duration(optarg))) {
				fprintf(stderr, "retrace traces: --since wants a duration like 90s, 5m, 2h; got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'i': q.incoherent_only = 1; break;
		case 'n':
			errno = 0;
			q.limit = (uint32_t)strtoul(optarg, &end, 10);
			if (errno || *end || *optarg == '-') {
				fprintf(stderr, "retrace traces: --limit wants a number, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'j': l.json = 1; break;
		case 'S': path = optarg; break;
		case 'h': traces_usage(stdout); return 0;
		default: traces_usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "retrace traces: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (since) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		q.since_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec - since;
	}
	if (open_store("traces", path, &s) != 0)
		return 1;
	rc = rt_store_list(s, &q, print_trace, &l);
	if (rc < 0) {
		fprintf(stderr, "retrace traces: %s\n", rt_store_errmsg(s));
		rt_store_close(s);
		return 1;
	}
	if (l.json)
		printf("%s]\n", l.count ? "" : "[");
	else if (!l.count)
		fprintf(stderr, "retrace traces: no traces match (store %s)\n", path);
	rt_store_close(s);
	return 0;
}

/* -------------------------------------------------------------- show ---- */

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
				printf("record agent=%u pid=%u tid=%u ", b[i].agent, b[i].pid, b[i].tid);
				print_hex(rec, len);
				printf("\n");
			}
		}
		if (st == RT_FRAME_CORRUPT)
			sum->corrupt++;
	}
	rt_reasm_free(&r);
}

/* bufs sorted by (agent, pid, tid, seq): call fn on each writer's run. */
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

static int parse_trace_id(const char *v, uint64_t *hi, uint64_t *lo)
{
	size_t n = strlen(v), i;
	char part[17];
	if (n != 32 && (n == 0 || n > 16))
		return -1;
	for (i = 0; i < n; i++)
		if (!strchr("0123456789abcdefABCDEF", v[i]))
			return -1;
	if (n == 32) {
		memcpy(part, v, 16);
		part[16] = 0;
		*hi = strtoull(part, NULL, 16);
		*lo = strtoull(v + 16, NULL, 16);
	} else {
		*hi = 0;
		*lo = strtoull(v, NULL, 16);
	}
	return *lo ? 0 : -1;
}

static void show_usage(FILE *out)
{
	fprintf(out,
		"usage: retrace show TRACE_ID [--records] [--json] [--store PATH]\n"
		"Print one collected trace: its row, then its slices by agent (writers, buffers,\n"
		"records, bytes, time range). TRACE_ID is the 32-hex id or its low 16 hex digits.\n\n"
		"  -r, --records     also print every record: agent, writer, bytes in hex\n"
		"  -j, --json        JSON instead of text\n"
		"  -S, --store PATH  the store file (default $RETRACE_STORE or ./retrace.db)\n"
		"  -h, --help        this text\n");
}

static void print_show(const struct rt_store_trace *t, struct agent_sum *sums, size_t nsums,
		       int json, uint64_t malformed)
{
	char a[40], b[40], trig[128];
	size_t i;
	list_ids(trig, sizeof trig, t->trigger_ids, t->trigger_count, ",");
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
	format_time(t->triggered_ns, a, sizeof a);
	printf("trace %016" PRIx64 "%016" PRIx64 "  %s  triggers %s  triggered %s  traversal %.2f ms\n",
	       t->trace_hi, t->trace_lo, t->coherent ? "coherent" : "INCOHERENT", trig, a,
	       (double)t->traversal_ns / 1e6);
	if (t->missing_count) {
		char miss[512];
		list_ids(miss, sizeof miss, t->missing, t->missing_count, ", ");
		printf("  missing slices from agent(s) %s\n", miss);
	}
	for (i = 0; i < nsums; i++) {
		format_time(sums[i].first_ns, a, sizeof a);
		format_time(sums[i].last_ns, b, sizeof b);
		printf("  agent %-6u %u writer(s)  %4u buffers  %6" PRIu64 " records  %9" PRIu64
		       " bytes  %s .. %s%s\n",
		       sums[i].agent, sums[i].writers, sums[i].buffers, sums[i].records, sums[i].bytes,
		       a, b, sums[i].corrupt ? "  (corrupt frames)" : "");
	}
	if (malformed)
		printf("  %" PRIu64 " stored slice(s) did not decode\n", malformed);
}

int retrace_cmd_show(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "records", no_argument, NULL, 'r' }, { "json", no_argument, NULL, 'j' },
		{ "store", required_argument, NULL, 'S' }, { "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *path = default_store();
	struct show_ctx x = { 0 };
	struct rt_store_trace t;
	struct rt_store *s = NULL;
	struct show_buf *bufs = NULL;
	struct agent_sum *sums = NULL;
	size_t nb = 0, total = 0, nsums = 0, i;
	uint32_t k;
	uint64_t hi, lo;
	int ch, json = 0, records = 0, rc = 1;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "rjS:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'r': records = 1; break;
		case 'j': json = 1; break;
		case 'S': path = optarg; break;
		case 'h': show_usage(stdout); return 0;
		default: show_usage(stderr); return 2;
		}
	}
	if (optind != argc - 1 || parse_trace_id(argv[optind], &hi, &lo) != 0) {
		fprintf(stderr, "retrace show: give one trace id (32 hex digits, or the low 16)\n");
		return 2;
	}
	if (open_store("show", path, &s) != 0)
		return 1;
	if (rt_store_get_trace(s, hi, lo, &t) != 0) {
		fprintf(stderr, "retrace show: no trace %s in %s\n", argv[optind], path);
		goto out;
	}
	if (rt_store_slices(s, t.trace_hi, t.trace_lo, keep_slice, &x) < 0) {
		fprintf(stderr, "retrace show: %s\n", rt_store_errmsg(s));
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
	print_show(&t, sums, nsums, json, x.malformed);
	if (records)
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
	rt_store_close(s);
	return rc;
}
