/*
 * cmd_traces.c — `retrace traces`: list the traces in the coordinator's store.
 *
 * It opens the store file read-only (SQLite WAL lets it read beside a running
 * coordinator, and it works when it is stopped). `retrace show` lives in
 * cmd_show.c.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "daemon/json.h"
#include "shm/frame.h"
#include "store.h"
#include "wire/wire.h"

/* ------------------------------------------------------------ traces ---- */

struct list_ctx {
	int json;
	uint64_t count;
	struct cli_trigger_names names;
};

/* A JSON string, always valid JSON and UTF-8 (daemon/json.h). */
static void print_json_string(const char *v)
{
	rt_json_fput_string(stdout, v);
}

/* Selection's verdict as JSON members (null until selection kept the trace). */
static void print_selection_json(const struct rt_store_trace *t)
{
	if (!t->has_selection) {
		printf(",\"score\":null,\"weight\":null,\"pattern\":null,\"group\":null,"
		       "\"group_key\":null");
		return;
	}
	printf(",\"score\":%.6g,\"weight\":%.6g,\"pattern\":\"%016" PRIx64 "\",\"group\":",
	       t->score, t->weight, t->pattern);
	print_json_string(t->group);
	printf(",\"group_key\":\"%016" PRIx64 "\"", t->group_key);
}

static int print_trace(void *arg, const struct rt_store_trace *t)
{
	struct list_ctx *l = arg;
	char trig[640], agents[512], missing[512], when[40], score[32], weight[32], pattern[24];
	cli_list_ids(trig, sizeof trig, t->trigger_ids, t->trigger_count, ",");
	if (!l->json)
		cli_list_triggers(trig, sizeof trig, &l->names, t->trigger_ids, t->trigger_count);
	cli_list_ids(agents, sizeof agents, t->agents, t->agent_count, ",");
	cli_list_ids(missing, sizeof missing, t->missing, t->missing_count, ",");
	cli_format_time(t->triggered_ns, when, sizeof when);
	if (l->json) {
		printf("%s{\"trace_id\":\"%016" PRIx64 "%016" PRIx64 "\",\"group\":%" PRIu64
		       ",\"triggers\":[%s],\"agents\":[%s],\"missing\":[%s],\"coherent\":%s"
		       ",\"bytes\":%" PRIu64 ",\"slices\":%u,\"late_slices\":%u"
		       ",\"first_ns\":%" PRIu64 ",\"last_ns\":%" PRIu64 ",\"triggered_ns\":%" PRIu64
		       ",\"closed_ns\":%" PRIu64 ",\"traversal_ns\":%" PRIu64 ",\"selection\":{",
		       l->count ? ",\n " : "[", t->trace_hi, t->trace_lo, t->group_id, trig, agents,
		       missing, t->coherent ? "true" : "false", t->bytes, t->slices, t->late_slices,
		       t->first_ns, t->last_ns, t->triggered_ns, t->closed_ns, t->traversal_ns);
		printf("\"selected\":%s", t->has_selection ? "true" : "false");
		print_selection_json(t);
		printf("},\"trigger_names\":");
		cli_json_trigger_names(stdout, &l->names, t->trigger_ids, t->trigger_count);
		printf("}");
	} else {
		snprintf(score, sizeof score, t->has_selection ? "%.1f" : "-", t->score);
		snprintf(weight, sizeof weight, t->has_selection ? "%.2f" : "-", t->weight);
		snprintf(pattern, sizeof pattern, t->has_selection ? "%016" PRIx64 : "-", t->pattern);
		if (!l->count)
			printf("%-32s  %-10s  %-24s  %-16s  %10s  %6s  %9s  %6s  %6s  %-16s  %-30s  %s\n",
			       "TRACE", "COHERENT", "TRIGGERED", "TRIGGERS", "BYTES", "SLICES",
			       "TRAVERSAL", "SCORE", "WEIGHT", "PATTERN", "GROUP (ENTRY API)", "AGENTS");
		printf("%016" PRIx64 "%016" PRIx64 "  %-10s  %-24s  %-16s  %10" PRIu64
		       "  %6u  %7.2fms  %6s  %6s  %-16s  %-30s  %s%s%s\n",
		       t->trace_hi, t->trace_lo, t->coherent ? "yes" : "NO", when, trig, t->bytes,
		       t->slices, (double)t->traversal_ns / 1e6, score, weight, pattern,
		       t->has_selection ? t->group : "-", agents,
		       t->missing_count ? " missing:" : "", t->missing_count ? missing : "");
	}
	l->count++;
	return 0;
}

static void traces_usage(FILE *out)
{
	fprintf(out,
		"usage: retrace traces [--trigger ID|NAME] [--since DURATION] [--incoherent] [--limit N]\n"
		"                      [--json] [--store STORE | --coordinator URL]\n"
		"List the traces the coordinator collected, newest first, with selection's\n"
		"verdict on kept ones: anomaly score, inclusion weight, pattern id and group\n"
		"(entry API); \"-\" until their window closed, or when they bypassed selection.\n\n"
		"  -t, --trigger T      only traces trigger T fired for: its id, or its name\n"
		"                       (retrace_trigger_name; head-sampled, upstream, crash)\n"
		"  -s, --since D        only traces closed in the last D (90s, 5m, 2h, 1d)\n"
		"  -i, --incoherent     only traces with a missing slice\n"
		"  -n, --limit N        at most N traces (default all)\n"
		"  -j, --json           a JSON array\n"
		CLI_STORE_USAGE("   ")
		"  -h, --help           this text\n");
}

int cli_cmd_traces(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "trigger", required_argument, NULL, 't' }, { "since", required_argument, NULL, 's' },
		{ "incoherent", no_argument, NULL, 'i' },    { "limit", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },          { "store", required_argument, NULL, 'S' }, { "coordinator", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },          { 0, 0, 0, 0 },
	};
	struct rt_store_query q = { 0 };
	struct list_ctx l = { 0 };
	char store_buf[1024];
	const char *path = NULL, *coord = NULL;
	struct rt_store *s = NULL;
	uint64_t since = 0;
	const char *trigger = NULL;
	char *end;
	int ch, rc;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "t:s:in:jSC:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 't':
			trigger = optarg;
			q.by_trigger = 1;
			break;
		case 's':
			if (!(since = cli_parse_duration_ns(optarg))) {
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
		case 'C': coord = optarg; break;
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
	if (cli_store_locator("traces", path, coord, store_buf, sizeof store_buf) != 0)
		return 1;
	path = store_buf;
	if (cli_open_store("traces", path, &s) != 0)
		return 1;
	if (cli_trigger_names_load("traces", s, &l.names) != 0) {
		rt_store_close(s);
		return 1;
	}
	if (trigger && cli_parse_trigger(&l.names, trigger, &q.trigger_id) != 0) {
		fprintf(stderr, "retrace traces: --trigger wants a trigger id or name; no trigger "
				"is named '%s' in the store %s%s\n", trigger, path,
			l.names.n ? "" : " (no names stored yet)");
		cli_trigger_names_free(&l.names);
		rt_store_close(s);
		return 2;
	}
	rc = rt_store_list(s, &q, print_trace, &l);
	cli_trigger_names_free(&l.names);
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
