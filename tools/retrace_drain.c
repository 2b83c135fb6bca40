/*
 * retrace-drain — the reference drainer as a tool: create (or attach to) a pool,
 * recycle every complete buffer back to the available queue, count breadcrumbs
 * and trigger groups, and print what went by. It stands in for the agent in
 * tests, benchmarks and the demo until retrace-agent exists.
 *
 * It polls in a loop; when a pass finds nothing it sleeps, doubling from 50 us
 * up to 1 ms, and returns to full speed as soon as work appears.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "retrace/retrace.h"
#include "shm/drain.h"
#include "shm/frame.h"

struct drain_opts {
	struct rt_pool_create_opts create;
	int attach;         /* attach to an existing pool instead of creating */
	int keep;           /* leave the pool behind at exit */
	int dump;           /* print each record */
	double duration;    /* seconds; 0 = until SIGINT/SIGTERM */
	double interval;    /* seconds between progress lines; 0 = none */
	const char *ready_file; /* touched once the pool is ready */
};

struct drain_state {
	struct rt_drain_stats st;
	uint64_t records, corrupt_buffers;
	int dump;
	const struct rt_pool *pool;
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: retrace-drain [options]\n"
		"Create a retrace pool and recycle its buffers (a stand-in for retrace-agent).\n\n"
		"  -p, --pool NAME         shared-memory name (default /retrace, or $RETRACE_POOL)\n"
		"  -n, --buffers N         buffer count (default %u)\n"
		"  -b, --buffer-size B     buffer size in bytes, a multiple of 4096 (default %u)\n"
		"  -a, --agent-id ID       agent id written in the pool header (default 1)\n"
		"  -g, --group GID         give the pool to this group, mode 0660\n"
		"      --attach            drain an existing pool instead of creating one\n"
		"      --keep              do not unlink the pool at exit\n"
		"  -d, --duration SEC      stop after SEC seconds (default: until SIGINT/SIGTERM)\n"
		"  -i, --interval SEC      print a progress line every SEC seconds\n"
		"      --dump              print every record (trace id, length, first bytes)\n"
		"      --ready-file PATH   create PATH once the pool is ready (for scripts)\n"
		"  -h, --help              this text\n\n"
		"At exit prints one line: drain buffers=... bytes=... records=... triggers=...\n",
		RT_POOL_DEFAULT_BUFFER_COUNT, RT_POOL_DEFAULT_BUFFER_SIZE);
}

static int parse_u32(const char *s, uint32_t *out, const char *what)
{
	char *end;
	unsigned long v;
	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || *end || !*s || v > UINT32_MAX) {
		fprintf(stderr, "retrace-drain: %s must be an unsigned integer, got '%s'\n", what, s);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

static int parse_seconds(const char *s, double *out, const char *what)
{
	char *end;
	errno = 0;
	*out = strtod(s, &end);
	if (errno || *end || !*s || *out < 0) {
		fprintf(stderr, "retrace-drain: %s must be a number of seconds, got '%s'\n", what, s);
		return -1;
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct drain_opts *o)
{
	static const struct option longopts[] = {
		{"pool", required_argument, 0, 'p'}, {"buffers", required_argument, 0, 'n'},
		{"buffer-size", required_argument, 0, 'b'}, {"agent-id", required_argument, 0, 'a'},
		{"group", required_argument, 0, 'g'}, {"attach", no_argument, 0, 'A'},
		{"keep", no_argument, 0, 'K'}, {"duration", required_argument, 0, 'd'},
		{"interval", required_argument, 0, 'i'}, {"dump", no_argument, 0, 'D'},
		{"ready-file", required_argument, 0, 'R'}, {"help", no_argument, 0, 'h'},
		{0, 0, 0, 0}};
	const char *env = getenv("RETRACE_POOL");
	uint32_t gid;
	int c;

	memset(o, 0, sizeof *o);
	rt_pool_create_defaults(&o->create);
	o->create.agent_id = 1;
	o->create.replace = 0;
	if (env && *env)
		o->create.name = env;
	while ((c = getopt_long(argc, argv, "p:n:b:a:g:d:i:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': o->create.name = optarg; break;
		case 'n': if (parse_u32(optarg, &o->create.buffer_count, "--buffers")) return 2; break;
		case 'b': if (parse_u32(optarg, &o->create.buffer_size, "--buffer-size")) return 2; break;
		case 'a': if (parse_u32(optarg, &o->create.agent_id, "--agent-id")) return 2; break;
		case 'g':
			if (parse_u32(optarg, &gid, "--group"))
				return 2;
			o->create.group = gid;
			o->create.mode = 0660;
			break;
		case 'A': o->attach = 1; break;
		case 'K': o->keep = 1; break;
		case 'd': if (parse_seconds(optarg, &o->duration, "--duration")) return 2; break;
		case 'i': if (parse_seconds(optarg, &o->interval, "--interval")) return 2; break;
		case 'D': o->dump = 1; break;
		case 'R': o->ready_file = optarg; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "retrace-drain: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void dump_buffer(void *arg, const struct rt_complete_entry *e,
			const struct rt_buffer_header *h, const uint8_t *payload)
{
	struct drain_state *s = arg;
	struct rt_frame f;
	uint32_t pos = 0;
	int st;
	while ((st = rt_frame_next(payload, e->bytes, &pos, &f)) == RT_FRAME_OK) {
		s->records++;
		if (s->dump) {
			uint32_t i;
			printf("record trace=%016llx%016llx pid=%u stream=%u seq=%u len=%u%s%s data=",
			       (unsigned long long)h->trace_hi, (unsigned long long)h->trace_lo,
			       h->pid, h->tid, h->seq, f.len,
			       (f.flags & RETRACE_FRAME_CONT_PREV) ? " cont-prev" : "",
			       (f.flags & RETRACE_FRAME_CONT_NEXT) ? " cont-next" : "");
			for (i = 0; i < f.len && i < 24; i++)
				putchar(f.data[i] >= 0x20 && f.data[i] < 0x7f ? f.data[i] : '.');
			putchar('\n');
		}
	}
	if (st == RT_FRAME_CORRUPT)
		s->corrupt_buffers++;
}

static void dump_trigger(void *arg, const struct rt_trigger_entry *g, unsigned n)
{
	struct drain_state *s = arg;
	if (s->dump)
		printf("trigger id=%u trace=%016llx%016llx laterals=%u\n", g[0].trigger_id,
		       (unsigned long long)g[0].trace_hi, (unsigned long long)g[0].trace_lo, n - 1);
}

static void dump_breadcrumb(void *arg, const struct rt_breadcrumb_entry *e)
{
	struct drain_state *s = arg;
	if (s->dump)
		printf("breadcrumb trace_lo=%016llx agent=%u\n", (unsigned long long)e->trace_lo,
		       e->agent_id);
}

static void print_stats(const char *tag, const struct drain_state *s, const struct rt_pool *p,
			double elapsed)
{
	printf("%s buffers=%llu bytes=%llu records=%llu breadcrumbs=%llu trigger_groups=%llu "
	       "triggers=%llu bad_complete=%llu bad_triggers=%llu corrupt_buffers=%llu "
	       "null_buffers=%llu trigger_drops=%llu breadcrumb_drops=%llu seconds=%.2f\n",
	       tag, (unsigned long long)s->st.buffers, (unsigned long long)s->st.bytes,
	       (unsigned long long)s->records, (unsigned long long)s->st.breadcrumbs,
	       (unsigned long long)s->st.trigger_groups, (unsigned long long)s->st.triggers,
	       (unsigned long long)s->st.bad_complete, (unsigned long long)s->st.bad_triggers,
	       (unsigned long long)s->corrupt_buffers,
	       (unsigned long long)ck_pr_load_64(&p->hdr->null_buffers),
	       (unsigned long long)ck_pr_load_64(&p->hdr->trigger_drops),
	       (unsigned long long)ck_pr_load_64(&p->hdr->breadcrumb_drops), elapsed);
	fflush(stdout);
}

static int open_pool(const struct drain_opts *o, struct rt_pool *pool)
{
	char err[256];
	int rc;
	if (o->attach) {
		struct rt_pool_attach_opts ao = {.name = o->create.name};
		rc = rt_pool_attach(&ao, pool, err, sizeof err);
	} else {
		rc = rt_pool_create(&o->create, pool, err, sizeof err);
	}
	if (rc != RETRACE_OK)
		fprintf(stderr, "retrace-drain: %s\n", err);
	return rc;
}

int main(int argc, char **argv)
{
	struct drain_opts o;
	struct drain_state s;
	struct rt_pool pool;
	struct rt_drain_callbacks cb = {dump_buffer, dump_breadcrumb, dump_trigger, &s, 0};
	double start, next_report;
	useconds_t nap = 50;
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc;
	if (open_pool(&o, &pool) != RETRACE_OK)
		return 1;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	memset(&s, 0, sizeof s);
	s.dump = o.dump;
	s.pool = &pool;
	if (o.ready_file) {
		FILE *f = fopen(o.ready_file, "w");
		if (f)
			fclose(f);
	}
	fprintf(stderr, "retrace-drain: pool %s ready: %u buffers of %u bytes, agent id %u\n",
		pool.name, pool.hdr->buffer_count, pool.hdr->buffer_size, pool.hdr->agent_id);
	start = now_s();
	next_report = start + o.interval;
	while (!stop_requested && (o.duration == 0 || now_s() - start < o.duration)) {
		if (rt_drain_poll(&pool, &cb, &s.st) > 0) {
			nap = 50;
		} else {
			usleep(nap);
			nap = nap < 1000 ? nap * 2 : 1000;
		}
		if (o.interval > 0 && now_s() >= next_report) {
			print_stats("progress", &s, &pool, now_s() - start);
			next_report += o.interval;
		}
	}
	while (rt_drain_poll(&pool, &cb, &s.st) > 0)
		;
	print_stats("drain", &s, &pool, now_s() - start);
	if (!o.attach && !o.keep)
		rt_pool_unlink(pool.name);
	rt_pool_detach(&pool);
	return 0;
}
