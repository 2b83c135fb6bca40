/*
 * bench/scale/coord_load.c — collected traces per second through real
 * coordinators.
 *
 * The coordinators are the library (coordinator/), opened in this process,
 * each running rt_coord_run on a thread of its own (pinned to a CPU each when
 * asked). The agents are fakes speaking the wire protocol: each registers
 * with every coordinator, answers REMOTE_TRIGGER on its own REP socket with
 * what it holds of each trace (buffers and payload bytes of its slice, nothing
 * open, no further hops), and the load side sends, for each trace, the
 * origin's TRIGGER (naming the other two agents as breadcrumbs) and the three
 * slices to the trace's owner (daemon/ring.h over the coordinators' ids), in
 * that order as an agent mostly does (the trigger goes out at once, its slices
 * with the next report pass). Messages travel on many REQ contexts at once
 * (SLOTS per coordinator, as 24 agents with their 8 slots each would), each
 * sent again until its ACK says stored. A run ends when the coordinators have closed every trace (their own
 * figures, read with "status json"); the figure is traces over that time.
 */
#include "coord_load.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/fake_agent.h"
#include "coordinator.h"
#include "daemon/guard.h" /* RT_ACK_REFUSED */
#include "daemon/ring.h"

#define SLOTS 192      /* messages in flight per coordinator (a trace's trigger, then its slices) */
#define MAX_AGENTS 64
#define PROGRESS_S 15.0 /* a progress line on stderr this often */
#define DONE_WAIT_S 300

struct load;

struct slot {
	struct load *L;
	int coord, busy;
	int sending;
	int on;             /* the socket of the message in flight */
	long item;          /* trace (of the side's list) * 4 + 0 trigger, 1..3 a slice */
	nng_ctx ctx[2];     /* on the collector, on the coordinator socket */
	nng_aio *aio[2];
};

struct side {
	struct rt_coord *c;
	pthread_t th;
	volatile int stop;
	int cpu;
	nng_socket coll, ctl;
	int *owned, nowned;
	atomic_long next;
	struct slot slots[SLOTS];
};

struct load {
	const struct cl_workload *w;
	struct fake_agent agents[MAX_AGENTS];
	int nagents;        /* started */
	struct side side[2];
	int nside;
	atomic_long retries;
	atomic_int last_refusal; /* the status of the last error ACK (wire/msg.h) */
	atomic_long refused;     /* items refused (RT_ACK_REFUSED): never sent again */
	atomic_int busy;
};

/* CPU seconds of a clock (the process's, a thread's). */
static double clock_s(clockid_t id)
{
	struct timespec ts;
	if (clock_gettime(id, &ts) != 0)
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double cl_pid_cpu_s(int pid)
{
	char path[64], buf[1024];
	unsigned long long utime, stime;
	const char *p;
	FILE *f;
	size_t n;
	if (pid <= 0)
		return 0;
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	if (!(f = fopen(path, "r")))
		return 0;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	/* after "(comm)": state is field 3, utime 14 and stime 15 */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
		   &stime) != 2)
		return 0;
	return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* The CPU clocks the run reads at its start and end (cl_result). */
static void cpu_snapshot(const struct load *L, const struct cl_run *run, double *proc,
			 double loop[2], double *server)
{
	*proc = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	for (int k = 0; k < 2; k++) {
		clockid_t id;
		loop[k] = k < L->nside && pthread_getcpuclockid(L->side[k].th, &id) == 0
				  ? clock_s(id)
				  : 0;
	}
	*server = cl_pid_cpu_s(run->server_pid);
}

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ----------------------------------------------------------- fake agents ---- */

static int part_of(const struct cl_workload *w, long t, uint32_t agent)
{
	for (int k = 0; k < CL_PARTS; k++)
		if (w->agent[t * CL_PARTS + k] == agent)
			return k;
	return -1;
}

/* What agent a holds of a trace: its part's buffers and payload bytes. */
static void agent_holds(const struct fake_agent *a, uint64_t hi, uint64_t lo, uint32_t *buffers,
			uint64_t *bytes)
{
	const struct cl_workload *w = ((const struct load *)a->arg)->w;
	long t = (long)(lo - w->lo0);
	int k = t >= 0 && t < w->traces ? part_of(w, t, a->id) : -1;
	(void)hi;
	if (k >= 0) {
		*buffers = w->buffers[t * CL_PARTS + k];
		*bytes = w->payload[t * CL_PARTS + k];
	}
}

static int request(const char *url, const struct rt_wire_buf *msg, char *text, size_t textcap)
{
	return fake_agent_request(url, msg, 10000, text, textcap);
}

static int agent_register(const struct fake_agent *a, const char *coord_url)
{
	struct rt_wire_register r = { .agent_id = a->id, .pid = (uint32_t)getpid(),
				      .start_unix_ns = 1, .buffer_size = 8192,
				      .buffer_count = 1024, .tsc_hz = 1000000000ull };
	struct rt_wire_buf b = { 0 };
	int rc;
	snprintf(r.host, sizeof r.host, "bench-%u", a->id);
	snprintf(r.control_addr, sizeof r.control_addr, "%s", a->url);
	rc = rt_wire_encode_register(&b, &r) == 0 ? request(coord_url, &b, NULL, 0) : -1;
	rt_wire_buf_free(&b);
	return rc;
}

/* ------------------------------------------------------------ the load ---- */

/* The message of a slot's item: a slice, or the trace's TRIGGER (into tmp). */
static int item_msg(struct load *L, const struct slot *s, struct rt_wire_buf *tmp,
		    const struct rt_wire_buf **out)
{
	const struct cl_workload *w = L->w;
	const struct side *sd = &L->side[s->coord];
	long t = sd->owned[s->item / (CL_PARTS + 1)];
	int part = (int)(s->item % (CL_PARTS + 1));
	if (part) {
		*out = &w->msg[t * CL_PARTS + part - 1];
		return 0;
	}
	uint32_t crumbs[CL_PARTS - 1];
	for (int k = 1; k < CL_PARTS; k++)
		crumbs[k - 1] = w->agent[t * CL_PARTS + k];
	struct rt_wire_trace tr = { .trace_hi = w->hi, .trace_lo = w->lo0 + (uint64_t)t,
				    .breadcrumb_count = CL_PARTS - 1, .breadcrumbs = crumbs };
	struct rt_wire_trigger g = { .agent_id = w->agent[t * CL_PARTS], .trigger_id = 7,
				     .trigger_seq = (uint64_t)t + 1, .fired_unix_ns = 1,
				     .trace_count = 1, .traces = &tr };
	tmp->len = 0;
	*out = tmp;
	return rt_wire_encode_trigger(tmp, &g);
}

static void slot_send(struct slot *s)
{
	struct rt_wire_buf tmp = { 0 };
	const struct rt_wire_buf *b;
	nng_msg *m;
	if (item_msg(s->L, s, &tmp, &b) != 0 || nng_msg_alloc(&m, 0) != 0 ||
	    nng_msg_append(m, b->data, b->len) != 0) {
		fprintf(stderr, "bench_scale: cannot build a message\n");
		abort();
	}
	rt_wire_buf_free(&tmp);
	s->sending = 1;
	s->on = s->item % (CL_PARTS + 1) == 0;
	nng_aio_set_msg(s->aio[s->on], m);
	nng_ctx_send(s->ctx[s->on], s->aio[s->on]);
}

/* The next item for slot s, or 0 when its list is done. */
static int slot_next(struct slot *s)
{
	struct side *sd = &s->L->side[s->coord];
	long n = atomic_fetch_add(&sd->next, 1);
	if (n >= (long)sd->nowned * (CL_PARTS + 1))
		return 0;
	s->item = n;
	return 1;
}

static void slot_cb(void *arg)
{
	struct slot *s = arg;
	nng_aio *aio = s->aio[s->on];
	int rv = nng_aio_result(aio), ok = 0;
	if (s->sending) {
		s->sending = 0;
		if (rv != 0) {
			nng_msg_free(nng_aio_get_msg(aio));
			if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
				goto idle;
			atomic_fetch_add(&s->L->retries, 1);
			slot_send(s);
			return;
		}
		nng_ctx_recv(s->ctx[s->on], aio);
		return;
	}
	if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
		goto idle;
	if (rv == 0) {
		nng_msg *m = nng_aio_get_msg(aio);
		struct rt_wire_msg a;
		int decoded = rt_wire_decode(nng_msg_body(m), nng_msg_len(m), &a) == 0;
		ok = decoded && a.type == RT_WIRE_ACK && a.ack.status == 0;
		if (decoded && !ok && a.type == RT_WIRE_ACK)
			atomic_store(&s->L->last_refusal, (int)a.ack.status);
		if (decoded && a.type == RT_WIRE_ACK && a.ack.status == RT_ACK_REFUSED) {
			/* refused stays refused: counted, the run fails, no hot loop */
			atomic_fetch_add(&s->L->refused, 1);
			rt_wire_msg_free(&a);
			nng_msg_free(m);
			goto idle;
		}
		rt_wire_msg_free(&a);
		nng_msg_free(m);
	}
	if (!ok) { /* a timeout or an error ACK: the same item again */
		atomic_fetch_add(&s->L->retries, 1);
		slot_send(s);
		return;
	}
	if (slot_next(s)) {
		slot_send(s);
		return;
	}
idle:
	s->busy = 0;
	atomic_fetch_sub(&s->L->busy, 1);
}

static void *coord_thread(void *arg)
{
	struct side *sd = arg;
	if (sd->cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(sd->cpu, &set);
		pthread_setaffinity_np(pthread_self(), sizeof set, &set);
	}
	rt_coord_run(sd->c, &sd->stop);
	return NULL;
}

static long long figure(const char *json, const char *key)
{
	char pat[64];
	const char *p;
	snprintf(pat, sizeof pat, "\"%s\":", key);
	p = strstr(json, pat);
	return p ? atoll(p + strlen(pat)) : -1;
}

static int side_figures(struct side *sd, long long *closed, long long *coherent,
			long long *commits, long long *slices)
{
	static char text[1 << 20];
	struct rt_wire_buf q = { .data = (uint8_t *)"status json", .len = 12 };
	if (request(rt_coord_listen_addr(sd->c), &q, text, sizeof text) != 0)
		return -1;
	*coherent = figure(text, "traces_coherent");
	*closed = *coherent + figure(text, "traces_incoherent");
	*commits = figure(text, "commits");
	*slices = figure(text, "committed_slices");
	if (getenv("RETRACE_BENCH_VERBOSE") && *closed >= sd->nowned) {
		const char *p = strstr(text, "\"loop\"");
		fprintf(stderr, "coordinator %s: %s\n", rt_coord_listen_addr(sd->c), p ? p : text);
	}
	return 0;
}

static int open_side(struct load *L, int k, const struct cl_run *run)
{
	struct side *sd = &L->side[k];
	struct rt_coord_config cfg;
	char err[512];
	rt_coord_config_defaults(&cfg);
	snprintf(cfg.listen, sizeof cfg.listen, "tcp://127.0.0.1:0");
	snprintf(cfg.collector, sizeof cfg.collector, "tcp://127.0.0.1:0");
	snprintf(cfg.store, sizeof cfg.store, "%s", run->store[k]);
	cfg.settle = 0.1;
	cfg.collect_timeout = 60;
	/* The fake agents register once; real agents register again every few
	 * seconds. With the default TTL a run longer than a minute (ClickHouse, a
	 * commit per turn) had every agent forgotten and each slice refused. */
	cfg.agent_ttl = 0;
	cfg.log_level = 0;
	cfg.commit_interval = run->commit_interval;
	cfg.collector_contexts = run->collector_contexts;
	if (!(sd->c = rt_coord_open(&cfg, err, sizeof err))) {
		fprintf(stderr, "bench_scale: coordinator: %s\n", err);
		return -1;
	}
	sd->cpu = run->pin ? k % (int)sysconf(_SC_NPROCESSORS_ONLN) : -1;
	if (pthread_create(&sd->th, NULL, coord_thread, sd) != 0)
		return -1;
	if (nng_req0_open(&sd->coll) != 0 || nng_req0_open(&sd->ctl) != 0 ||
	    nng_dial(sd->coll, rt_coord_collector_addr(sd->c), NULL, 0) != 0 ||
	    nng_dial(sd->ctl, rt_coord_listen_addr(sd->c), NULL, 0) != 0)
		return -1;
	for (int i = 0; i < SLOTS; i++) {
		struct slot *s = &sd->slots[i];
		s->L = L;
		s->coord = k;
		for (int j = 0; j < 2; j++) {
			if (nng_ctx_open(&s->ctx[j], j ? sd->ctl : sd->coll) != 0 ||
			    nng_aio_alloc(&s->aio[j], slot_cb, s) != 0)
				return -1;
			nng_aio_set_timeout(s->aio[j], 30000);
		}
	}
	return 0;
}

static void close_side(struct side *sd)
{
	for (int i = 0; i < SLOTS; i++)
		for (int j = 0; j < 2; j++)
			if (sd->slots[i].aio[j])
				nng_aio_stop(sd->slots[i].aio[j]);
	if (nng_socket_id(sd->coll) > 0)
		nng_close(sd->coll);
	if (nng_socket_id(sd->ctl) > 0)
		nng_close(sd->ctl);
	for (int i = 0; i < SLOTS; i++)
		for (int j = 0; j < 2; j++) {
			if (nng_ctx_id(sd->slots[i].ctx[j]) > 0)
				nng_ctx_close(sd->slots[i].ctx[j]);
			if (sd->slots[i].aio[j])
				nng_aio_free(sd->slots[i].aio[j]);
		}
	if (sd->c) {
		sd->stop = 1;
		pthread_join(sd->th, NULL);
		rt_coord_close(sd->c);
	}
	free(sd->owned);
}

int cl_load_run(const struct cl_workload *w, const struct cl_run *run, struct cl_result *out)
{
	struct load *L = calloc(1, sizeof *L);
	struct rt_ring ring;
	double t0, end, proc0, loop0[2], server0;
	int rc = -1, nagents = w->agents < MAX_AGENTS ? w->agents : MAX_AGENTS;
	memset(out, 0, sizeof *out);
	if (!L)
		return -1;
	L->w = w;
	L->nside = run->coordinators;
	rt_ring_init(&ring);
	for (int k = 0; k < L->nside; k++) {
		char id[8];
		snprintf(id, sizeof id, "c%d", k);
		rt_ring_add(&ring, id);
		if (open_side(L, k, run) != 0) {
			fprintf(stderr, "bench_scale: cannot start coordinator %d (its socket, "
				"thread or contexts)\n", k);
			goto done;
		}
		if (!(L->side[k].owned = calloc((size_t)w->traces, sizeof(int))))
			goto done;
	}
	for (int t = 0; t < w->traces; t++) {
		struct side *sd = &L->side[rt_ring_owner(&ring, w->lo0 + (uint64_t)t)];
		sd->owned[sd->nowned++] = t;
	}
	for (int i = 0; i < nagents; i++) {
		if (fake_agent_start(&L->agents[i], (uint32_t)i + 1, agent_holds, L) != 0) {
			fprintf(stderr, "bench_scale: cannot start fake agent %d\n", i + 1);
			goto done;
		}
		L->nagents = i + 1;
		for (int k = 0; k < L->nside; k++)
			if (agent_register(&L->agents[i], rt_coord_listen_addr(L->side[k].c)) != 0) {
				fprintf(stderr, "bench_scale: agent %d could not register\n", i + 1);
				goto done;
			}
	}
	t0 = mono_s();
	cpu_snapshot(L, run, &proc0, loop0, &server0);
	for (int k = 0; k < L->nside; k++)
		for (int i = 0; i < SLOTS; i++) {
			struct slot *s = &L->side[k].slots[i];
			if (!slot_next(s))
				continue;
			s->busy = 1;
			atomic_fetch_add(&L->busy, 1);
			slot_send(s);
		}
	end = t0 + DONE_WAIT_S;
	double next_progress = t0 + PROGRESS_S;
	for (int unanswered = 0;; usleep(20000)) {
		long long total = 0, coherent = 0, commits = 0, slices = 0;
		int answered = 1;
		for (int k = 0; k < L->nside && answered; k++) {
			long long cl, co, cm, sl;
			/* A member busy in a long commit (ClickHouse, one commit a turn,
			 * on a loaded machine) may not answer within 10 s: ask again,
			 * the run's bound is the clock's (DONE_WAIT_S). */
			if (side_figures(&L->side[k], &cl, &co, &cm, &sl) != 0) {
				if (unanswered++ == 0)
					fprintf(stderr, "bench_scale: coordinator %d did not answer its "
						"status within 10 s; asking again\n", k);
				answered = 0;
				break;
			}
			out->per_coord[k] = (uint64_t)cl;
			total += cl;
			coherent += co;
			commits += cm;
			slices += sl;
		}
		if (answered && total >= w->traces && atomic_load(&L->busy) == 0) {
			out->wall_s = mono_s() - t0;
			cpu_snapshot(L, run, &out->proc_cpu_s, out->loop_cpu_s, &out->server_cpu_s);
			out->proc_cpu_s -= proc0;
			out->server_cpu_s -= server0;
			for (int k = 0; k < 2; k++)
				out->loop_cpu_s[k] -= loop0[k];
			out->closed = (uint64_t)total;
			out->coherent = (uint64_t)coherent;
			out->commits = (uint64_t)commits;
			out->slices = (uint64_t)slices;
			rc = 0;
			break;
		}
		if (mono_s() > end) {
			fprintf(stderr, "bench_scale: %lld of %d traces closed after %d s\n", total,
				w->traces, DONE_WAIT_S);
			break;
		}
		if (atomic_load(&L->refused)) {
			fprintf(stderr, "bench_scale: the coordinator refused %ld items (status %d)\n",
				atomic_load(&L->refused), RT_ACK_REFUSED);
			break;
		}
		if (answered && mono_s() > next_progress) {
			/* a slow store (ClickHouse throttling many small inserts) shows
			 * here as a slow count, a stuck one as a count that stays */
			fprintf(stderr, "bench_scale: %.0f s: %lld of %d traces closed, %lld commits, "
				"%ld items sent again (last refusal: status %d)\n",
				mono_s() - t0, total, w->traces, commits, atomic_load(&L->retries),
				atomic_load(&L->last_refusal));
			next_progress += PROGRESS_S;
		}
	}
done:
	for (int k = 0; k < L->nside; k++)
		close_side(&L->side[k]);
	fake_agent_stop_all(L->agents, L->nagents);
	free(L);
	return rc;
}
