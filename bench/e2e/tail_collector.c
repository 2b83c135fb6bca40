/*
 * bench/e2e/tail_collector.c — `retrace-tail-collector`: the tail-sampling
 * baseline of the end-to-end evaluation (bench/e2e/run-e2e.sh, docs/evaluation.md).
 *
 * How it works, modelled on an OpenTelemetry Collector with the tail_sampling
 * processor: services started with `retrace-topo serve --tail URL` push every
 * span of every request (one message per request and service: its SERVER span,
 * its CLIENT spans and the raw records as span events; layout in
 * examples/topo/serve.c, tail_export) over nng PUSH/PULL. Every queue is bounded
 * and drops when full: the services' send queue (--tail-queue, counted there as
 * tail_dropped) and this collector's receive queue (--recv-queue, nng's
 * NNG_OPT_RECVBUF: when it is full the senders' queues fill and they drop). One
 * thread receives and buffers spans per trace; a trace is decided --decision-wait
 * seconds after its first span arrived (OTel: `decision_wait`, default 30 s): it
 * is kept iff a span is marked (an edge case or an error), and its span ids are
 * written to --kept as `<trace 32 hex> <span 16 hex>[,...]`. Spans arriving
 * after their trace was decided are late (counted; a late batch starts a new
 * entry, as in OTel). At most --num-traces traces are buffered (OTel's
 * `num_traces`, default 50000): beyond, the oldest undecided trace is dropped
 * (counted as evicted). --bandwidth caps what it takes in (bytes per second,
 * paced after each message): the network or CPU budget of a collector. Past it,
 * the receive queue fills, then the services' send queues, and spans are dropped
 * there — where a real deployment loses them.
 *
 * SIGTERM/SIGINT: everything still buffered is decided, the kept file flushed,
 * and one line of counters goes to stdout:
 *   tail-collector messages= bytes= spans= traces= kept= sampled_out= late_spans=
 *   evicted= malformed= decided_at_stop=
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>

struct trace {
	uint64_t hi, lo;
	uint64_t first_ns;
	uint64_t *spans;
	uint32_t n_spans, cap;
	int marked;
	int used;
};

static struct trace *tab;
static uint32_t tab_cap; /* power of two, > 2 x num_traces */
static uint32_t n_buffered;
static unsigned long long c_msgs, c_bytes, c_spans, c_traces, c_kept, c_out, c_late, c_evicted,
	c_malformed, c_at_stop;
static FILE *kept;
static volatile sig_atomic_t stop;

/* Recently decided traces (ring + open hash of lo), so late spans are known as late. */
#define DECIDED (1u << 18)
static uint64_t decided_lo[DECIDED];
static uint32_t decided_at;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;
	for (i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static int was_decided(uint64_t lo)
{
	/* a small linear scan window is too slow: use the low bits as a direct-mapped set */
	return decided_lo[mix(lo) & (DECIDED - 1)] == lo;
}

static void remember_decided(uint64_t lo)
{
	decided_lo[mix(lo) & (DECIDED - 1)] = lo;
	decided_at++;
}

/* Open addressing with backward-shift deletion. */
static uint32_t slot_of(uint64_t hi, uint64_t lo, int *found)
{
	uint32_t i = (uint32_t)mix(lo ^ hi) & (tab_cap - 1);
	for (;;) {
		if (!tab[i].used) {
			*found = 0;
			return i;
		}
		if (tab[i].lo == lo && tab[i].hi == hi) {
			*found = 1;
			return i;
		}
		i = (i + 1) & (tab_cap - 1);
	}
}

static void tab_delete(uint32_t i)
{
	uint32_t j = i;
	free(tab[i].spans);
	memset(&tab[i], 0, sizeof tab[i]);
	for (;;) {
		uint32_t k;
		j = (j + 1) & (tab_cap - 1);
		if (!tab[j].used)
			return;
		k = (uint32_t)mix(tab[j].lo ^ tab[j].hi) & (tab_cap - 1);
		/* move j back to i if k is not cyclically in (i, j] */
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			tab[i] = tab[j];
			memset(&tab[j], 0, sizeof tab[j]);
			i = j;
		}
	}
}

/*
 * The FIFO links traces by arrival through indexes into the table, but the
 * table moves entries on delete; so the FIFO holds trace ids instead.
 */
struct fifo_ent {
	uint64_t hi, lo, first_ns;
};
static struct fifo_ent *fifo;
static uint32_t fifo_cap, fifo_start, fifo_len;

static void decide(uint32_t i, int at_stop)
{
	struct trace *t = &tab[i];
	if (t->marked) {
		uint32_t k;
		fprintf(kept, "%016" PRIx64 "%016" PRIx64 " ", t->hi, t->lo);
		for (k = 0; k < t->n_spans; k++)
			fprintf(kept, "%s%016" PRIx64, k ? "," : "", t->spans[k]);
		fputc('\n', kept);
		c_kept++;
	} else {
		c_out++;
	}
	if (at_stop)
		c_at_stop++;
	remember_decided(t->lo);
	n_buffered--;
	tab_delete(i);
}

/* Decide every trace whose wait is over (or all of them). */
static void decide_due(uint64_t wait_ns, int all)
{
	uint64_t now = now_ns();
	while (fifo_len) {
		struct fifo_ent *e = &fifo[fifo_start];
		uint32_t i;
		int found;
		if (!all && e->first_ns + wait_ns > now)
			return;
		i = slot_of(e->hi, e->lo, &found);
		if (found && tab[i].first_ns == e->first_ns)
			decide(i, all);
		fifo_start = (fifo_start + 1) % fifo_cap;
		fifo_len--;
	}
}

static void evict_oldest(void)
{
	while (fifo_len) {
		struct fifo_ent *e = &fifo[fifo_start];
		uint32_t i;
		int found;
		fifo_start = (fifo_start + 1) % fifo_cap;
		fifo_len--;
		i = slot_of(e->hi, e->lo, &found);
		if (found && tab[i].first_ns == e->first_ns) {
			remember_decided(tab[i].lo);
			n_buffered--;
			tab_delete(i);
			c_evicted++;
			return;
		}
	}
}

static void take(const uint8_t *p, size_t len, uint32_t num_traces)
{
	uint64_t hi, lo;
	uint32_t n, k, i;
	int found;
	if (len < 40 || memcmp(p, "TS01", 4) != 0) {
		c_malformed++;
		return;
	}
	hi = get64(p + 4);
	lo = get64(p + 12);
	n = get32(p + 28);
	if (n > 64 || len < 40 + 8 * (size_t)n) {
		c_malformed++;
		return;
	}
	c_spans += n;
	i = slot_of(hi, lo, &found);
	if (!found) {
		if (was_decided(lo))
			c_late += n;
		if (n_buffered >= num_traces) {
			evict_oldest();
			i = slot_of(hi, lo, &found);
		}
		tab[i].used = 1;
		tab[i].hi = hi;
		tab[i].lo = lo;
		tab[i].first_ns = now_ns();
		n_buffered++;
		c_traces++;
		fifo[(fifo_start + fifo_len) % fifo_cap] =
			(struct fifo_ent){hi, lo, tab[i].first_ns};
		fifo_len++;
	}
	if (tab[i].n_spans + n > tab[i].cap) {
		uint32_t cap = tab[i].cap ? tab[i].cap : 8;
		uint64_t *q;
		while (cap < tab[i].n_spans + n)
			cap *= 2;
		if (!(q = realloc(tab[i].spans, cap * sizeof *q))) {
			c_malformed++;
			return;
		}
		tab[i].spans = q;
		tab[i].cap = cap;
	}
	for (k = 0; k < n; k++)
		tab[i].spans[tab[i].n_spans++] = get64(p + 40 + 8 * k);
	tab[i].marked |= get32(p + 24) & 1;
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: retrace-tail-collector --listen URL --kept FILE [options]\n"
		"A tail-sampling collector (the baseline of bench/e2e): buffers spans per trace,\n"
		"decides DECISION_WAIT after a trace's first span, keeps traces with a marked span.\n"
		"\n"
		"  -l, --listen URL          nng PULL address (e.g. tcp://127.0.0.1:7800)\n"
		"  -k, --kept FILE           kept traces: <trace 32 hex> <span ids, comma-separated>\n"
		"  -w, --decision-wait S     seconds from a trace's first span to its decision\n"
		"                            (default 2; OpenTelemetry's tail_sampling default is 30)\n"
		"  -n, --num-traces N        traces buffered at most; beyond, the oldest is dropped\n"
		"                            (default 50000, OpenTelemetry's default)\n"
		"  -q, --recv-queue N        receive queue in messages, 1..8192 (default 1024)\n"
		"  -b, --bandwidth BYTES_S   take in at most this many bytes per second (default 0:\n"
		"                            unlimited); beyond, the bounded queues fill and drop\n"
		"  -r, --ready-file PATH     written once listening\n"
		"  -h, --help                this text\n"
		"SIGTERM/SIGINT: decide what is buffered, print one line of counters, exit.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'l'},
		{"kept", required_argument, NULL, 'k'},
		{"decision-wait", required_argument, NULL, 'w'},
		{"num-traces", required_argument, NULL, 'n'},
		{"recv-queue", required_argument, NULL, 'q'},
		{"ready-file", required_argument, NULL, 'r'},
		{"bandwidth", required_argument, NULL, 'b'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *url = NULL, *kept_path = NULL, *ready = NULL;
	double wait_s = 2.0;
	unsigned long num_traces = 50000, recvq = 1024;
	double bw = 0;
	uint64_t next_ok = 0;
	nng_socket sock;
	struct sigaction sa;
	uint64_t wait_ns;
	int c, rv;
	char *end;

	while ((c = getopt_long(argc, argv, "l:k:w:n:q:r:b:h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			url = optarg;
			break;
		case 'k':
			kept_path = optarg;
			break;
		case 'w':
			wait_s = strtod(optarg, &end);
			if (*end || !(wait_s >= 0 && wait_s <= 3600)) {
				fprintf(stderr, "retrace-tail-collector: --decision-wait '%s': want 0..3600\n",
					optarg);
				return 2;
			}
			break;
		case 'n':
			num_traces = strtoul(optarg, &end, 10);
			if (*end || num_traces < 1 || num_traces > 10000000) {
				fprintf(stderr, "retrace-tail-collector: --num-traces '%s': want 1..1e7\n",
					optarg);
				return 2;
			}
			break;
		case 'q':
			recvq = strtoul(optarg, &end, 10);
			if (*end || recvq < 1 || recvq > 8192) {
				fprintf(stderr, "retrace-tail-collector: --recv-queue '%s': want 1..8192\n",
					optarg);
				return 2;
			}
			break;
		case 'r':
			ready = optarg;
			break;
		case 'b':
			bw = strtod(optarg, &end);
			if (*end || !(bw >= 0 && bw <= 1e12)) {
				fprintf(stderr, "retrace-tail-collector: --bandwidth '%s': want bytes/s\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!url || !kept_path || optind < argc) {
		usage(stderr);
		return 2;
	}
	wait_ns = (uint64_t)(wait_s * 1e9);
	for (tab_cap = 1024; tab_cap < 2 * num_traces + 2; tab_cap *= 2)
		;
	fifo_cap = (uint32_t)num_traces + 1;
	if (!(tab = calloc(tab_cap, sizeof *tab)) || !(fifo = calloc(fifo_cap, sizeof *fifo))) {
		fprintf(stderr, "retrace-tail-collector: out of memory\n");
		return 1;
	}
	if (!(kept = fopen(kept_path, "w"))) {
		fprintf(stderr, "retrace-tail-collector: %s: %s\n", kept_path, strerror(errno));
		return 1;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if ((rv = nng_pull0_open(&sock)) != 0 ||
	    (rv = nng_socket_set_int(sock, NNG_OPT_RECVBUF, (int)recvq)) != 0 ||
	    (rv = nng_socket_set_ms(sock, NNG_OPT_RECVTIMEO, 50)) != 0 ||
	    (rv = nng_listen(sock, url, NULL, 0)) != 0) {
		fprintf(stderr, "retrace-tail-collector: listen %s: %s\n", url, nng_strerror(rv));
		return 1;
	}
	if (ready) {
		FILE *f = fopen(ready, "w");
		if (f)
			fclose(f);
	}
	while (!stop) {
		nng_msg *m;
		if (bw > 0) {
			/* Paced: the next message only once the budget allows it. */
			uint64_t now = now_ns();
			if (now < next_ok) {
				struct timespec ts = {0, 0};
				uint64_t w = next_ok - now;
				ts.tv_nsec = (long)(w > 10000000ull ? 10000000ull : w);
				nanosleep(&ts, NULL);
				decide_due(wait_ns, 0);
				continue;
			}
		}
		rv = nng_recvmsg(sock, &m, 0);
		if (rv == 0) {
			c_msgs++;
			c_bytes += nng_msg_len(m);
			if (bw > 0) {
				uint64_t now = now_ns();
				next_ok = (next_ok > now ? next_ok : now) +
					  (uint64_t)((double)nng_msg_len(m) * 1e9 / bw);
			}
			take(nng_msg_body(m), nng_msg_len(m), (uint32_t)num_traces);
			nng_msg_free(m);
		} else if (rv != NNG_ETIMEDOUT && rv != NNG_EINTR) {
			fprintf(stderr, "retrace-tail-collector: receive: %s\n", nng_strerror(rv));
			break;
		}
		decide_due(wait_ns, 0);
	}
	decide_due(wait_ns, 1);
	fclose(kept);
	printf("tail-collector messages=%llu bytes=%llu spans=%llu traces=%llu kept=%llu "
	       "sampled_out=%llu late_spans=%llu evicted=%llu malformed=%llu decided_at_stop=%llu\n",
	       c_msgs, c_bytes, c_spans, c_traces, c_kept, c_out, c_late, c_evicted, c_malformed,
	       c_at_stop);
	fflush(stdout);
	nng_close(sock);
	return 0;
}
