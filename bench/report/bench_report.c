/*
 * bench_report — reporting throughput on loopback, next to plain nng REQ/REP.
 *
 * Agent phase: a client thread (the real libretrace) writes traces of a given
 * size (1 KiB records into 32 KiB buffers), ends and flushes each one and
 * triggers it; the main thread runs the agent in-process (rt_agent_poll), which
 * pins, cuts each trace into a slice straight from shared memory, and sends it
 * to a collector thread in the same process over tcp://127.0.0.1 (REP: decode
 * with rt_wire_decode, ACK at once). The client keeps a window of triggered
 * trace bytes not yet acknowledged (so the agent never has to abandon), which makes
 * the loop closed: we measure the acknowledged payload MB/s and traces/s.
 *
 * Baseline, same run, same sizes: plain nng REQ/REP with the same number of
 * requests in flight (8 contexts, as the agent's uplink) sending an encoded
 * slice of the same size to the same collector: the transport plus collector
 * cost without the agent and the client.
 *
 * RETRACE_BENCH_QUICK=1 shortens the phases for CI; RETRACE_BENCH_TRACE=1 prints
 * the acknowledged and produced bytes every 250 ms of each agent phase;
 * RETRACE_BENCH_DEBUG=1 prints the agent's status at the end.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "agent.h"
#include "log.h"
#include "retrace/retrace.h"
#include "wire.h"

#define BUF_SIZE 32768u
#define BUF_COUNT 2048u
#define RECORD 1024u
#define INFLIGHT 8

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------ collector ---- */

struct collector {
	nng_socket sock;
	char url[128];
	pthread_t thread;
	volatile int stop;
	uint64_t msgs, bytes, bad; /* written by the collector thread only */
};

static void *collector_main(void *arg)
{
	struct collector *c = arg;
	struct rt_wire_buf out = { 0 };
	while (!c->stop) {
		nng_msg *req;
		struct rt_wire_msg m;
		struct rt_wire_ack ack = { 0 };
		uint64_t seq = 0;
		int rv = nng_recvmsg(c->sock, &req, 0);
		if (rv == NNG_ETIMEDOUT)
			continue;
		if (rv != 0)
			break;
		if (rt_wire_decode(nng_msg_body(req), nng_msg_len(req), &m) == 0 &&
		    m.type == RT_WIRE_SLICE) {
			uint32_t i;
			seq = m.slice.slice_seq;
			for (i = 0; i < m.slice.buffer_count; i++)
				c->bytes += m.slice.buffers[i].len;
			c->msgs++;
		} else {
			c->bad++;
		}
		rt_wire_msg_free(&m);
		nng_msg_free(req);
		ack.seq_count = seq ? 1 : 0;
		ack.seqs = &seq;
		out.len = 0;
		if (rt_wire_encode_ack(&out, &ack) == 0)
			nng_send(c->sock, out.data, out.len, 0);
	}
	rt_wire_buf_free(&out);
	return NULL;
}

static int collector_start(struct collector *c)
{
	nng_listener l;
	nng_sockaddr sa;
	memset(c, 0, sizeof *c);
	if (nng_rep0_open(&c->sock) != 0)
		return -1;
	nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, 100);
	nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, (size_t)RT_WIRE_MAX_MESSAGE + 4096);
	if (nng_listen(c->sock, "tcp://127.0.0.1:0", &l, 0) != 0 ||
	    nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa) != 0)
		return -1;
	{
		const uint8_t *ip = (const uint8_t *)&sa.s_in.sa_addr;
		snprintf(c->url, sizeof c->url, "tcp://%u.%u.%u.%u:%u", ip[0], ip[1], ip[2], ip[3],
			 (unsigned)ntohs(sa.s_in.sa_port));
	}
	return pthread_create(&c->thread, NULL, collector_main, c);
}

static void collector_stop(struct collector *c)
{
	c->stop = 1;
	pthread_join(c->thread, NULL);
	nng_close(c->sock);
}

/* ------------------------------------------------------------- baseline ---- */

struct bctx {
	nng_ctx ctx;
	nng_aio *aio;
	nng_msg *proto; /* the request, duplicated for every send */
	int receiving;
	volatile int stop;
	uint64_t done;
	uint64_t failed;
};

static void bctx_cb(void *arg)
{
	struct bctx *b = arg;
	nng_msg *m;
	if (nng_aio_result(b->aio) != 0) {
		if (!b->receiving)
			nng_msg_free(nng_aio_get_msg(b->aio));
		b->failed++;
		return; /* stopped */
	}
	if (!b->receiving) {
		b->receiving = 1;
		nng_ctx_recv(b->ctx, b->aio);
		return;
	}
	nng_msg_free(nng_aio_get_msg(b->aio));
	b->done++;
	b->receiving = 0;
	if (b->stop || nng_msg_dup(&m, b->proto) != 0)
		return;
	nng_aio_set_msg(b->aio, m);
	nng_ctx_send(b->ctx, b->aio);
}

/* An encoded slice of `bufs` full buffers, as the agent would send for one trace. */
static void make_slice(struct rt_wire_buf *out, uint32_t bufs, uint32_t bytes_per_buf)
{
	struct rt_wire_slice_buffer *wb = calloc(bufs, sizeof *wb);
	uint8_t *data = malloc(bytes_per_buf);
	struct rt_wire_slice m;
	uint32_t i;
	for (i = 0; i < bytes_per_buf; i++)
		data[i] = (uint8_t)(i * 131u);
	for (i = 0; i < bufs; i++) {
		wb[i].pid = 1;
		wb[i].tid = 1;
		wb[i].seq = i;
		wb[i].flags = 7;
		wb[i].first_tick = 1234567;
		wb[i].data = data;
		wb[i].len = bytes_per_buf;
	}
	memset(&m, 0, sizeof m);
	m.agent_id = 1;
	m.trigger_id = 1;
	m.slice_seq = 1;
	m.trace_hi = 1;
	m.trace_lo = 2;
	m.tsc_hz = 1;
	m.buffer_count = bufs;
	m.buffers = wb;
	out->len = 0;
	if (rt_wire_encode_slice(out, &m) != 0)
		abort();
	free(wb);
	free(data);
}

/* Plain REQ/REP, INFLIGHT requests at once, for `secs`: messages per second. */
static double baseline(struct collector *c, const struct rt_wire_buf *msg, double secs)
{
	struct bctx b[INFLIGHT];
	nng_socket s;
	double t0, t1;
	uint64_t done = 0;
	int i;
	if (nng_req0_open(&s) != 0 || nng_dial(s, c->url, NULL, 0) != 0)
		abort();
	for (i = 0; i < INFLIGHT; i++) {
		nng_msg *m;
		memset(&b[i], 0, sizeof b[i]);
		if (nng_ctx_open(&b[i].ctx, s) != 0 || nng_aio_alloc(&b[i].aio, bctx_cb, &b[i]) != 0 ||
		    nng_msg_alloc(&b[i].proto, 0) != 0 ||
		    nng_msg_append(b[i].proto, msg->data, msg->len) != 0 ||
		    nng_msg_dup(&m, b[i].proto) != 0)
			abort();
		nng_aio_set_timeout(b[i].aio, 10000);
		nng_aio_set_msg(b[i].aio, m);
	}
	t0 = now_s();
	for (i = 0; i < INFLIGHT; i++)
		nng_ctx_send(b[i].ctx, b[i].aio);
	while (now_s() - t0 < secs)
		usleep(10000);
	for (i = 0; i < INFLIGHT; i++)
		b[i].stop = 1;
	for (i = 0; i < INFLIGHT; i++) {
		nng_aio_wait(b[i].aio);
		nng_aio_stop(b[i].aio);
	}
	t1 = now_s();
	for (i = 0; i < INFLIGHT; i++) {
		done += b[i].done;
		nng_aio_free(b[i].aio);
		nng_msg_free(b[i].proto);
		nng_ctx_close(b[i].ctx);
	}
	nng_close(s);
	return (double)done / (t1 - t0);
}

/* ------------------------------------------------------------ producer ---- */

static struct rt_agent agent;
static volatile int producer_stop;
static _Atomic uint64_t produced;      /* bytes of triggered traces (producer thread) */
static _Atomic uint64_t acked_pub;     /* slice bytes acknowledged (published by the poll thread) */
static uint32_t trace_bytes, window;
static uint64_t next_lo = 1;   /* trace ids never repeat across phases */

static void *producer(void *arg)
{
	static uint8_t rec[RECORD];
	retrace_trace_id id = { 0xBE7C4, next_lo };
	uint32_t nrec = trace_bytes / (RECORD + 4), k;
	(void)arg;
	memset(rec, 0x5a, sizeof rec);
	while (!producer_stop) {
		uint64_t acked = atomic_load_explicit(&acked_pub, memory_order_acquire);
		/* acked may pass produced: a record split across buffers has two frame headers */
		if (produced > acked && produced - acked >= (uint64_t)window * nrec * (RECORD + 4)) {
			struct timespec ts = { 0, 20000 };
			nanosleep(&ts, NULL);
			continue;
		}
		id.lo++;
		retrace_begin(id);
		for (k = 0; k < nrec; k++)
			retrace_tracepoint(rec, sizeof rec);
		retrace_end();
		retrace_flush();
		if (retrace_trigger(id, 1, NULL, 0) == RETRACE_OK)
			atomic_store_explicit(&produced, produced + (uint64_t)nrec * (RECORD + 4),
					 memory_order_release);
	}
	next_lo = id.lo + 1;
	return NULL;
}

struct result {
	double secs, cpu_s;
	uint64_t slices, bytes, abandoned, failed, index_full;
};

static void agent_phase(uint32_t bytes, double secs, struct result *r)
{
	pthread_t th;
	uint64_t s0 = agent.st.slices_acked, b0 = agent.st.slice_bytes_acked;
	uint64_t ab0 = agent.st.abandoned_traces, f0 = agent.st.slices_failed;
	uint64_t if0 = agent.st.index_full;
	double t0, c0;
	uint32_t per = (bytes + BUF_SIZE - 1) / BUF_SIZE;
	trace_bytes = bytes;
	window = per * 16 < BUF_COUNT / 4 ? 16 : BUF_COUNT / 4 / per;
	if (window < 2)
		window = 2;
	produced = 0;
	atomic_store_explicit(&acked_pub, 0, memory_order_release);
	producer_stop = 0;
	pthread_create(&th, NULL, producer, NULL);
	t0 = now_s();
	c0 = thread_cpu_s();
	while (now_s() - t0 < secs) {
		static double next_trace;
		if (getenv("RETRACE_BENCH_TRACE") && now_s() >= next_trace) {
			next_trace = now_s() + 0.25;
			fprintf(stderr, "  t=%.2f acked_mb=%.1f produced_mb=%.1f inflight=%u queued=%llu\n",
				now_s() - t0, (double)(agent.st.slice_bytes_acked - b0) / 1e6,
				(double)atomic_load_explicit(&produced, memory_order_acquire) / 1e6,
				rt_route_inflight(&agent.route),
				(unsigned long long)agent.rep.queued_buffers);
		}
		if (rt_agent_poll(&agent) == 0) {
			struct timespec ts = { 0, 2000 };
			nanosleep(&ts, NULL);
		}
		atomic_store_explicit(&acked_pub, agent.st.slice_bytes_acked - b0, memory_order_release);
	}
	r->secs = now_s() - t0;
	r->cpu_s = thread_cpu_s() - c0;
	r->slices = agent.st.slices_acked - s0;
	r->bytes = agent.st.slice_bytes_acked - b0;
	producer_stop = 1;
	while (pthread_tryjoin_np(th, NULL) != 0) {
		rt_agent_poll(&agent);
		atomic_store_explicit(&acked_pub, agent.st.slice_bytes_acked - b0, memory_order_release);
	}
	/* Let the rest go so the next phase starts empty. */
	{
		double end = now_s() + 5;
		while (now_s() < end && (agent.rep.queued_buffers || agent.ix.st.inflight_buffers ||
					 rt_route_inflight(&agent.route)))
			rt_agent_poll(&agent);
	}
	r->abandoned = agent.st.abandoned_traces - ab0;
	r->failed = agent.st.slices_failed - f0;
	r->index_full = agent.st.index_full - if0;
}

int main(void)
{
	static const uint32_t sizes[] = { 4096, 65536, 1u << 20 };
	struct rt_agent_config cfg;
	struct retrace_config rc;
	struct collector col;
	double secs = getenv("RETRACE_BENCH_QUICK") ? 0.5 : 3.0;
	char err[256];
	size_t i;

	rt_log_level = RT_LOG_WARN;
	if (collector_start(&col) != 0) {
		fprintf(stderr, "bench_report: cannot start the collector\n");
		return 1;
	}
	rt_agent_config_defaults(&cfg);
	snprintf(cfg.pool, sizeof cfg.pool, "/rt-bench-report-%d", (int)getpid());
	cfg.buffer_count = BUF_COUNT;
	cfg.buffer_size = BUF_SIZE;
	cfg.unlink_at_exit = 1;
	cfg.trigger_rate = 0;
	cfg.report_timeout_ms = 10000;
	cfg.log_level = RT_LOG_WARN;
	/*
	 * A reported, quiet triggered trace keeps its index entry for triggered_ttl
	 * (default 60 s), and expiry looks at 256 entries per liveness interval: at
	 * thousands of triggers a second the table would fill and the agent drop
	 * everything new (see tests/agent/report, ratelimit_table_full). Forget them fast.
	 */
	cfg.triggered_ttl = 0.05;
	cfg.liveness_interval = 0.01;
	cfg.trace_capacity = 65536;
	snprintf(cfg.collector, sizeof cfg.collector, "%s", col.url);
	if (rt_agent_open(&agent, &cfg, err, sizeof err) != RETRACE_OK ||
	    rt_agent_connect(&agent, "", err, sizeof err) != 0) {
		fprintf(stderr, "bench_report: %s\n", err);
		collector_stop(&col);
		return 1;
	}
	retrace_config_from_env(&rc);
	rc.pool_name = cfg.pool;
	rc.quiet = 1;
	if (retrace_init(&rc) != RETRACE_OK) {
		fprintf(stderr, "bench_report: cannot attach to %s\n", cfg.pool);
		rt_agent_close(&agent);
		collector_stop(&col);
		return 1;
	}
	{ /* warm-up: first touch of the pool's pages, connection set up */
		struct result w;
		agent_phase(65536, 0.2, &w);
	}
	for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		struct rt_wire_buf msg = { 0 };
		struct result r;
		uint32_t bytes = sizes[i], nrec = bytes / (RECORD + 4);
		uint32_t payload = nrec * (RECORD + 4), bufs = (payload + BUF_SIZE - 65) / (BUF_SIZE - 64);
		double base_mps, rate, mbps, base_mbps;
		make_slice(&msg, bufs, payload / bufs);
		base_mps = baseline(&col, &msg, secs);
		agent_phase(bytes, secs, &r);
		rate = (double)r.bytes / (double)payload / r.secs; /* whole traces' worth */
		mbps = (double)r.bytes / r.secs / 1e6;
		base_mbps = base_mps * (double)(payload / bufs) * bufs / 1e6;
		printf("bench report name=report_%uk traces_per_s=%.0f mb_per_s=%.1f slices_per_s=%.0f slices=%llu "
		       "slice_bytes=%u message_bytes=%zu abandoned=%llu failed=%llu "
		       "index_full=%llu agent_cpu_ms_per_mb=%.3f baseline=nng_reqrep_%d_inflight "
		       "baseline_msgs_per_s=%.0f baseline_mb_per_s=%.1f ratio=%.2f\n",
		       bytes / 1024, rate, mbps, (double)r.slices / r.secs, (unsigned long long)r.slices,
		       r.slices ? (unsigned)(r.bytes / r.slices) : 0, msg.len,
		       (unsigned long long)r.abandoned, (unsigned long long)r.failed,
		       (unsigned long long)r.index_full,
		       r.bytes ? r.cpu_s * 1e3 / ((double)r.bytes / 1e6) : 0, INFLIGHT, base_mps,
		       base_mbps, base_mbps > 0 ? mbps / base_mbps : 0);
		fflush(stdout);
		rt_wire_buf_free(&msg);
	}
	if (getenv("RETRACE_BENCH_DEBUG")) {
		char buf[16384];
		rt_agent_status(&agent, 0, buf, sizeof buf);
		fputs(buf, stderr);
	}
	retrace_shutdown();
	rt_agent_close(&agent);
	collector_stop(&col);
	return 0;
}
