/*
 * tests/coordinator/test_security.c — the daemons refuse what an unprivileged
 * neighbour or a stranger sends them, and count it (docs/security.md). Real
 * coordinator and agents on loopback (cluster.h); forged messages are sent from
 * this process over nng, with or without a TLS identity (daemon/tls.h).
 *
 * Without TLS: a slice or trigger for an agent id that never registered, a
 * REGISTER moving a live agent, oversize requests, connections past the cap, a
 * flood of remote triggers. With TLS (certificates from
 * scripts/retrace-keys.sh): a trigger collected coherently end to end; another
 * agent's certificate refused for registration, triggers, slices and remote
 * triggers; alarm changes only with an operator certificate; no plain peer.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "cluster.h"
#include "common/fake_agent.h"
#include "common/suite.h"
#include "daemon/guard.h"
#include "daemon/tls.h"
#include "nng_close.h"
#include "wire/wire.h"

#define HI 0x5ec0000000000001ull
#define TRIGGER 100
#define RECORDS 8

static void nap_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------ helpers ---- */

static void encode_register(struct rt_wire_buf *b, uint32_t id, const char *addr)
{
	struct rt_wire_register r;
	memset(&r, 0, sizeof r);
	r.agent_id = id;
	r.pid = 4242;
	r.start_unix_ns = 1;
	snprintf(r.host, sizeof r.host, "forger");
	snprintf(r.control_addr, sizeof r.control_addr, "%s", addr);
	r.buffer_size = 8192;
	r.buffer_count = 64;
	r.tsc_hz = 1000000000;
	b->len = 0;
	ck_assert_int_eq(rt_wire_encode_register(b, &r), 0);
}

static void encode_trigger(struct rt_wire_buf *b, uint32_t agent, uint64_t lo)
{
	static const uint32_t crumbs[] = { 1, 2 };
	struct rt_wire_trace t = { .trace_hi = HI, .trace_lo = lo, .breadcrumb_count = 2,
				   .breadcrumbs = crumbs };
	struct rt_wire_trigger m = { .agent_id = agent, .trigger_id = TRIGGER, .trigger_seq = 7,
				     .fired_unix_ns = 1, .trace_count = 1, .traces = &t };
	b->len = 0;
	ck_assert_int_eq(rt_wire_encode_trigger(b, &m), 0);
}

static void encode_slice(struct rt_wire_buf *b, uint32_t agent, uint64_t lo)
{
	static const char data[] = "forged bytes";
	struct rt_wire_slice_buffer buf = { .pid = 1, .tid = 1, .data = data, .len = sizeof data };
	struct rt_wire_slice m = { .agent_id = agent, .trigger_id = TRIGGER, .slice_seq = 9,
				   .trace_hi = HI, .trace_lo = lo, .tsc_hz = 1000000000,
				   .buffer_count = 1, .buffers = &buf };
	b->len = 0;
	ck_assert_int_eq(rt_wire_encode_slice(b, &m), 0);
}

static void encode_remote(struct rt_wire_buf *b, uint64_t request_id, uint64_t lo)
{
	struct rt_wire_trace t = { .trace_hi = HI, .trace_lo = lo };
	struct rt_wire_remote_trigger m = { .request_id = request_id, .trigger_id = TRIGGER,
					    .trace_count = 1, .traces = &t };
	b->len = 0;
	ck_assert_int_eq(rt_wire_encode_remote_trigger(b, &m), 0);
}

/* A text request; the reply as a string in out ("" if none). */
static void ask_text(const char *url, const struct rt_tls *tls, const char *peer, const char *req,
		     char *out, size_t cap)
{
	long n = fake_agent_exchange(url, tls, peer, req, strlen(req) + 1, out, cap - 1, 3000);
	out[n > 0 ? ((size_t)n < cap - 1 ? (size_t)n : cap - 1) : 0] = 0;
}

/* A string figure "key":"value" of a status JSON, up to the first space. */
static void json_str(const char *json, const char *key, char *out, size_t cap)
{
	char pat[128];
	const char *p;
	size_t n;
	snprintf(pat, sizeof pat, "\"%s\":\"", key);
	out[0] = 0;
	if (!(p = strstr(json, pat)))
		return;
	p += strlen(pat);
	n = strcspn(p, " \"");
	snprintf(out, cap, "%.*s", (int)n, p);
}

static void agent_status_url(const struct cluster *c, int h, char *out, size_t cap)
{
	snprintf(out, cap, "ipc:///tmp/retrace-%u/%.63s.status", (unsigned)getuid(),
		 c->hosts[h].pool + 1);
}

static struct rt_tls *identity(const char *dir, const char *name)
{
	struct rt_tls_opts o;
	struct rt_tls *t = NULL;
	char err[512];
	memset(&o, 0, sizeof o);
	snprintf(o.ca, sizeof o.ca, "%s/ca.crt", dir);
	snprintf(o.cert, sizeof o.cert, "%s/%s.crt", dir, name);
	snprintf(o.key, sizeof o.key, "%s/%s.key", dir, name);
	ck_assert_msg(rt_tls_load(&o, &t, err, sizeof err) == 1, "%s: %s", name, err);
	return t;
}

/* Run a shell command; its exit status, its output (stdout and stderr) in out. */
static int run(const char *cmd, char *out, size_t cap)
{
	char full[2048];
	FILE *p;
	size_t n = 0;
	int st;
	snprintf(full, sizeof full, "%s 2>&1", cmd);
	if (!(p = popen(full, "r")))
		return -1;
	while (n + 1 < cap && fgets(out + n, (int)(cap - n), p))
		n += strlen(out + n);
	out[n] = 0;
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Certificates for agents 1..3 in DIR/keys (scripts/retrace-keys.sh). */
static void make_keys(char *dir, size_t cap)
{
	char cmd[512], out[4096];
	snprintf(dir, cap, "/tmp/rt-sec-keys-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cmd, sizeof cmd, "%s '%s' 1 2 3", KEYS_SCRIPT, dir);
	ck_assert_msg(run(cmd, out, sizeof out) == 0, "retrace-keys.sh failed: %s", out);
}

static void remove_dir(const char *dir)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* Start a TLS deployment of n hosts with the certificates in keys. */
static void start_tls(struct cluster *c, const char *keys, int n)
{
	static char ca[256], crt[256], key[256];
	snprintf(ca, sizeof ca, "%s/ca.crt", keys);
	snprintf(crt, sizeof crt, "%s/coordinator.crt", keys);
	snprintf(key, sizeof key, "%s/coordinator.key", keys);
	const char *args[] = { "--tls-ca", ca, "--tls-cert", crt, "--tls-key", key, NULL };
	for (int i = 0; i < 7; i++)
		cl_coord_args[i] = args[i];
	cl_agent_tls_dir = keys;
	/* The CLI (cl_coord_figure) talks TLS as the operator. */
	{
		char v[256];
		snprintf(v, sizeof v, "%s/ca.crt", keys);
		setenv("RETRACE_TLS_CA", v, 1);
		snprintf(v, sizeof v, "%s/operator.crt", keys);
		setenv("RETRACE_TLS_CERT", v, 1);
		snprintf(v, sizeof v, "%s/operator.key", keys);
		setenv("RETRACE_TLS_KEY", v, 1);
	}
	/* cl_start returns once every agent is in the coordinator's directory (it
	 * polls the coordinator's status, here over TLS as the operator). */
	ck_assert_msg(cl_start(c, n, 256) == 0,
		      "TLS deployment of %d agents did not come up, or not every agent registered "
		      "(see stderr and %s)", n, c->dir);
}

/* Whether the keys made by make_keys are still there (for failure messages: a
 * file the test made that vanished was removed by something outside it). */
static const char *keys_state(const char *keys)
{
	char ca[128];
	snprintf(ca, sizeof ca, "%s/ca.crt", keys);
	return access(ca, R_OK) == 0 ? "present" : "GONE (removed by something outside the test)";
}

static void tls_url(const char *plain, char *out, size_t cap)
{
	snprintf(out, cap, "tls+%s", plain);
}

/* -------------------------------------------------- without TLS ---- */

/* A slice (and a trigger) naming an agent id that never registered is refused. */
START_TEST(forged_slice_unregistered_agent)
{
	struct cluster c;
	struct rt_wire_buf b = { 0 };
	struct rt_store_trace t;
	ck_assert_int_eq(cl_start(&c, 1, 256), 0);
	encode_slice(&b, 77, 0x5001);
	ck_assert_int_eq(fake_agent_ack(c.collect_url, NULL, NULL, &b, 3000), RT_ACK_REFUSED);
	encode_slice(&b, 0, 0x5002); /* 0 is "no agent" */
	ck_assert_int_eq(fake_agent_ack(c.collect_url, NULL, NULL, &b, 3000), RT_ACK_REFUSED);
	ck_assert_int_eq(cl_coord_figure(&c, "security", "slices_refused"), 2);
	ck_assert_int_eq(cl_coord_figure(&c, "collection", "slices"), 0);
	ck_assert_int_eq(cl_coord_figure(&c, "collection", "orphan_slices"), 0);
	ck_assert_msg(cl_wait_trace(&c, HI, 0x5001, 1.5, &t) != 0, "a forged slice was stored");
	/* The real agent's slices still go in: a trigger collected coherently. */
	ck_assert_int_eq(cl_write(&c, 0, HI, 0x5003, RECORDS, NULL, 0), 0);
	ck_assert_int_eq(cl_trigger(&c, 0, HI, 0x5003, TRIGGER, NULL, 0), 0);
	ck_assert_int_eq(cl_wait_trace(&c, HI, 0x5003, 15, &t), 0);
	ck_assert(t.coherent);
	rt_wire_buf_free(&b);
	ck_assert_int_eq(cl_stop(&c), 0);
}
END_TEST

START_TEST(forged_trigger_unregistered_agent)
{
	struct cluster c;
	struct rt_wire_buf b = { 0 };
	struct rt_store_trace t;
	ck_assert_int_eq(cl_start(&c, 2, 256), 0);
	encode_trigger(&b, 77, 0x6001);
	ck_assert_int_eq(fake_agent_ack(c.coord_url, NULL, NULL, &b, 3000), RT_ACK_REFUSED);
	ck_assert_int_eq(cl_coord_figure(&c, "security", "triggers_refused"), 1);
	ck_assert_int_eq(cl_coord_figure(&c, "traversal", "triggers"), 0);
	ck_assert_int_eq(cl_coord_figure(&c, "traversal", "remote_triggers_sent"), 0);
	ck_assert_msg(cl_wait_trace(&c, HI, 0x6001, 2.5, &t) != 0, "a forged trigger stored a row");
	ck_assert_int_eq(cl_coord_figure(&c, "store", "pending_triggers"), 0);
	rt_wire_buf_free(&b);
	ck_assert_int_eq(cl_stop(&c), 0);
}
END_TEST

/* REGISTER may not move a live agent; new ids at loopback addresses still register. */
START_TEST(register_cannot_move_live_agent)
{
	struct cluster c;
	struct rt_wire_buf b = { 0 };
	struct rt_store_trace t;
	static char st[1 << 16];
	char before[256], after[256];
	uint32_t to1 = 1;
	ck_assert_int_eq(cl_start(&c, 2, 256), 0);
	ask_text(c.coord_url, NULL, NULL, "status json", st, sizeof st);
	json_str(st, "agent.2", before, sizeof before);
	ck_assert_msg(before[0], "agent 2 not in the directory: %s", st);
	encode_register(&b, 2, "tcp://127.0.0.1:9");
	ck_assert_int_eq(fake_agent_ack(c.coord_url, NULL, NULL, &b, 3000), RT_ACK_REFUSED);
	ck_assert_int_eq(cl_coord_figure(&c, "security", "register_moves_refused"), 1);
	ask_text(c.coord_url, NULL, NULL, "status json", st, sizeof st);
	json_str(st, "agent.2", after, sizeof after);
	ck_assert_str_eq(after, before);
	/* Not dialled anywhere else: a trace across both hosts is still coherent. */
	ck_assert_int_eq(cl_write(&c, 0, HI, 0x7001, RECORDS, NULL, 0), 0);
	ck_assert_int_eq(cl_write(&c, 1, HI, 0x7001, RECORDS, &to1, 1), 0);
	ck_assert_int_eq(cl_trigger(&c, 1, HI, 0x7001, TRIGGER, NULL, 0), 0);
	ck_assert_int_eq(cl_wait_trace(&c, HI, 0x7001, 15, &t), 0);
	ck_assert_msg(t.coherent, "incoherent after a forged REGISTER (see %s)", c.dir);
	ck_assert_uint_eq(t.agent_count, 2);
	/* The coordinator dials no address beyond loopback without --insecure. */
	encode_register(&b, 9, "tcp://192.0.2.1:7710");
	ck_assert_int_eq(fake_agent_ack(c.coord_url, NULL, NULL, &b, 3000), RT_ACK_REFUSED);
	ck_assert_int_eq(cl_coord_figure(&c, "security", "register_addresses_refused"), 1);
	/* A new id at a loopback address is a new agent. */
	encode_register(&b, 8, "tcp://127.0.0.1:9");
	ck_assert_int_eq(fake_agent_ack(c.coord_url, NULL, NULL, &b, 3000), 0);
	ck_assert_int_eq(cl_coord_figure(&c, "agents", "known"), 3);
	rt_wire_buf_free(&b);
	ck_assert_int_eq(cl_stop(&c), 0);
}
END_TEST

/* A second agent started with a live agent's id is refused, and says so once
 * in its own log and in its figures; the first keeps its place. */
START_TEST(duplicate_agent_id_is_told)
{
	struct cluster c;
	static char out[1 << 16];
	char cmd[1024], log[256], pool[64], status[192];
	int refused = 0;
	ck_assert_int_eq(cl_start(&c, 1, 256), 0);
	snprintf(pool, sizeof pool, "/rt-dup-%d", (int)getpid());
	snprintf(log, sizeof log, "%s/dup-agent.log", c.dir);
	snprintf(status, sizeof status, "ipc://%s/dup.status", c.dir);
	snprintf(cmd, sizeof cmd,
		 "%s --pool %s --agent-id 1 --buffers 64 --buffer-size 8192 --listen "
		 "tcp://127.0.0.1:0 --status %s --coordinator %s --unlink > %s 2>&1 & echo $!",
		 AGENT_BIN, pool, status, c.coord_url, log);
	ck_assert_int_eq(run(cmd, out, sizeof out), 0);
	pid_t dup = (pid_t)atoi(out);
	ck_assert_int_gt(dup, 0);
	for (int i = 0; i < 300 && !refused; i++) {
		FILE *f = fopen(log, "r");
		size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
		if (f)
			fclose(f);
		out[n] = 0;
		refused = strstr(out, "refused this agent's registration") != NULL;
		if (!refused)
			nap_ms(50);
	}
	ck_assert_msg(refused, "no refusal in the second agent's log: %s", out);
	snprintf(cmd, sizeof cmd, "%s status --agent %s --json", CLI_BIN, status);
	ck_assert_int_eq(run(cmd, out, sizeof out), 0);
	ck_assert_msg(strstr(out, "\"registrations_refused\":0") == NULL &&
		      strstr(out, "\"registrations_refused\":") != NULL, "figures: %.2000s", out);
	ck_assert_int_eq(cl_coord_figure(&c, "agents", "known"), 1);
	ck_assert_int_ge(cl_coord_figure(&c, "security", "register_moves_refused"), 1);
	kill(dup, SIGTERM);
	for (int i = 0; i < 200 && kill(dup, 0) == 0; i++)
		nap_ms(50);
	ck_assert_int_eq(cl_stop(&c), 0);
}
END_TEST

START_TEST(oversize_requests_refused)
{
	struct cluster c;
	char url[256], reply[256];
	size_t big = 300u << 10, huge = 2u << 20;
	char *buf = malloc(huge);
	ck_assert_int_eq(cl_start(&c, 1, 256), 0);
	memset(buf, 's', huge);
	/* Over the coordinator's bound: refused with an answer, counted. */
	ck_assert_int_gt(
		fake_agent_exchange(c.coord_url, NULL, NULL, buf, big, reply, sizeof reply, 3000), 0);
	ck_assert_msg(strstr(reply, "too large"), "reply: %s", reply);
	ck_assert_int_eq(cl_coord_figure(&c, "security", "oversize_requests"), 1);
	/* Over nng's hard bound: the connection is dropped, nothing is held. */
	ck_assert_int_eq(
		fake_agent_exchange(c.coord_url, NULL, NULL, buf, huge, reply, sizeof reply, 1000), -1);
	ask_text(c.coord_url, NULL, NULL, "ping", reply, sizeof reply);
	ck_assert_str_eq(reply, "pong coordinator");
	/* The agent's control socket likewise. */
	agent_status_url(&c, 0, url, sizeof url);
	ck_assert_int_gt(
		fake_agent_exchange(url, NULL, NULL, buf, 100u << 10, reply, sizeof reply, 3000), 0);
	ck_assert_msg(strstr(reply, "too large"), "reply: %s", reply);
	ck_assert_int_eq(fake_agent_exchange(url, NULL, NULL, buf, huge, reply, sizeof reply, 1000), -1);
	{
		/* nng 1.5.2's ipc listener sometimes stops serving after the huge request
		 * (about 1 in 100 runs at load ~20: the status request went unanswered,
		 * every thread idle); the agent's self-probe listens on it again within
		 * about 15 s (agent/control.h), so status is asked for up to 60 s. */
		long long oversize = -1;
		for (double end = cl_now_s() + 60; oversize < 0 && cl_now_s() < end;)
			oversize = cl_agent_figure(&c, 0, "security", "oversize_requests");
		if (oversize < 0)
			cl_dump_stacks(&c, "oversize");
		ck_assert_msg(oversize == 1, "agent oversize_requests %lld, want 1 (see %s)", oversize,
			      c.dir);
	}
	free(buf);
	ck_assert_int_eq(cl_stop(&c), 0);
}
END_TEST

START_TEST(connection_cap_counts_refusals)
{
	struct cluster c;
	nng_socket s[8];
	char err[256];
	cl_coord_args[0] = "--max-connections";
	cl_coord_args[1] = "4";
	cl_coord_args[2] = NULL;
	ck_assert_int_eq(cl_start(&c, 1, 256), 0); /* the agent holds one of the four */
	for (int i = 0; i < 8; i++) {
		ck_assert_int_eq(nng_req0_open(&s[i]), 0);
		ck_assert_int_eq(rt_tls_dial(s[i], NULL, c.coord_url, NULL, NNG_FLAG_NONBLOCK, err,
					     sizeof err), 0);
	}
	nap_ms(500);
	for (int i = 0; i < 8; i++)
		/* refused pipes: see fake_agent_exchange() */
		rt_nng_close_bounded(s[i], RT_NNG_CLOSE_WAIT_MS);
	nap_ms(200);
	ck_assert_int_ge(cl_coord_figure(&c, "security", "connections_refused"), 5);
	ck_assert_int_eq(cl_coord_figure(&c, "security", "max_connections"), 4);
	cl_coord_args[0] = NULL;
	ck_assert_int_eq(cl_stop(&c), 0);
}
END_TEST

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 100 remote triggers naming random traces: the burst is served, and after it no
 * more than the rate allows over the time the 100 took (on a loaded machine they
 * take longer, and the bucket refills: the bound moves with the clock, not the
 * count of refusals: 78 refused in 2.4 s at load 30 was the rate working). */
START_TEST(remote_trigger_rate_limited)
{
	struct cluster c;
	struct rt_wire_buf b = { 0 };
	char url[256];
	int refused = 0, served = 0;
	double start, took;
	cl_agent_args[0] = "--remote-trigger-rate";
	cl_agent_args[1] = "5";
	cl_agent_args[2] = "--remote-trigger-burst";
	cl_agent_args[3] = "10";
	cl_agent_args[4] = NULL;
	ck_assert_int_eq(cl_start(&c, 1, 256), 0);
	agent_status_url(&c, 0, url, sizeof url);
	start = now_s();
	for (int i = 0; i < 100; i++) {
		int32_t st;
		encode_remote(&b, 1000 + (uint64_t)i, 0x9000000 + (uint64_t)random());
		st = fake_agent_ack(url, NULL, NULL, &b, 3000);
		if (st == RT_ACK_RATE_LIMITED)
			refused++;
		else if (st == INT32_MIN) /* a BREADCRUMB_REPLY */
			served++;
	}
	took = now_s() - start;
	/* burst 10 + 5/s over the run (+1 for a token that fell due at the edge) */
	ck_assert_msg(served <= 10 + (int)(5 * took) + 1,
		      "%d served in %.1f s at 5/s with a burst of 10", served, took);
	ck_assert_msg(took > 15 || refused > 0, "nothing refused in %.1f s", took);
	ck_assert_int_ge(served, 10);
	ck_assert_int_eq(refused + served, 100);
	ck_assert_int_eq(cl_agent_figure(&c, 0, "security", "remote_triggers_rate_limited"), refused);
	ck_assert_int_eq(cl_agent_figure(&c, 0, "traces", "indexed"), 0);
	ck_assert_int_eq(cl_agent_figure(&c, 0, "traces", "pinned"), 0);
	cl_agent_args[0] = NULL;
	rt_wire_buf_free(&b);
	ck_assert_int_eq(cl_stop(&c), 0);
}
END_TEST

/* Local files: the store 0600, the agent's status socket in its own directory. */
START_TEST(local_files_private)
{
	struct cluster c;
	struct stat sb;
	char dir[128];
	ck_assert_int_eq(cl_start(&c, 1, 256), 0);
	ck_assert_int_eq(stat(c.store, &sb), 0);
	ck_assert_msg((sb.st_mode & 077) == 0, "store mode %o", (unsigned)(sb.st_mode & 0777));
	snprintf(dir, sizeof dir, "/tmp/retrace-%u", (unsigned)getuid());
	ck_assert_int_eq(lstat(dir, &sb), 0);
	ck_assert(S_ISDIR(sb.st_mode));
	ck_assert_msg((sb.st_mode & 022) == 0, "status directory mode %o",
		      (unsigned)(sb.st_mode & 0777));
	ck_assert_int_ge(cl_agent_figure(&c, 0, "agent", "id"), 1);
	ck_assert_int_eq(cl_stop(&c), 0);
}
END_TEST

/* Beyond loopback without certificates: refuse to start, unless --insecure. */
START_TEST(non_loopback_needs_tls)
{
	char cmd[1024], out[4096], path[128], dir[] = "/tmp/rt-sec-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/s.db", dir);
	snprintf(cmd, sizeof cmd, "%s --listen tcp://0.0.0.0:0 --collector tcp://127.0.0.1:0 "
		 "--store %s/s.db", COORD_BIN, dir);
	ck_assert_int_eq(run(cmd, out, sizeof out), 1);
	ck_assert_msg(strstr(out, "not a loopback address") && strstr(out, "--insecure"), "%s", out);
	ck_assert_msg(access(path, F_OK) != 0, "a refused start left a store file");
	snprintf(cmd, sizeof cmd, "%s --pool /rt-sec-%d --listen tcp://0.0.0.0:0 --unlink",
		 AGENT_BIN, (int)getpid());
	ck_assert_int_eq(run(cmd, out, sizeof out), 2);
	ck_assert_msg(strstr(out, "not a loopback address"), "%s", out);
	/* With --insecure the coordinator starts (and stops at once on SIGTERM). */
	snprintf(cmd, sizeof cmd, "timeout --preserve-status -s TERM 1 %s --listen tcp://0.0.0.0:0 --collector "
		 "tcp://127.0.0.1:0 --store %s/s.db --insecure", COORD_BIN, dir);
	ck_assert_int_eq(run(cmd, out, sizeof out), 0);
	ck_assert_msg(strstr(out, "--insecure: no TLS"), "%s", out);
	remove_dir(dir);
}
END_TEST

/* ------------------------------------------------------ with TLS ---- */

START_TEST(tls_end_to_end)
{
	struct cluster c;
	struct rt_store_trace t;
	char keys[64], out[4096];
	uint32_t to1 = 1;
	make_keys(keys, sizeof keys);
	start_tls(&c, keys, 2);
	ck_assert_int_eq(cl_coord_figure(&c, "agents", "known"), 2);
	ck_assert_int_eq(cl_write(&c, 0, HI, 0x8001, RECORDS, NULL, 0), 0);
	ck_assert_int_eq(cl_write(&c, 1, HI, 0x8001, RECORDS, &to1, 1), 0);
	ck_assert_int_eq(cl_trigger(&c, 1, HI, 0x8001, TRIGGER, NULL, 0), 0);
	ck_assert_msg(cl_wait_trace(&c, HI, 0x8001, 15, &t) == 0, "never stored (see %s)", c.dir);
	ck_assert_msg(t.coherent, "incoherent over TLS (see %s)", c.dir);
	ck_assert_uint_eq(t.agent_count, 2);
	for (int h = 0; h < 2; h++) {
		char why[256] = "";
		ck_assert_msg(cl_check_records(&c, HI, 0x8001, h, RECORDS, why, sizeof why) == 0, "%s",
			      why);
	}
	ck_assert_int_eq(cl_coord_figure(&c, "security", "registrations_refused"), 0);
	ck_assert_int_eq(cl_coord_figure(&c, "security", "slices_refused"), 0);
	/* A plain client gets nothing from a TLS coordinator, and breaks nothing. */
	{
		char reply[64];
		ck_assert_int_eq(fake_agent_exchange(c.coord_url, NULL, NULL, "status", 7, reply,
						     sizeof reply, 800),
				 -1);
		ck_assert_int_ge(cl_coord_figure(&c, "security", "tls_handshakes_refused"), 1);
	}
	/* An agent whose certificate names another agent does not start. */
	{
		char cmd[1024];
		snprintf(cmd, sizeof cmd, "%s --pool /rt-sec-x-%d --agent-id 3 --tls-ca %s/ca.crt "
			 "--tls-cert %s/agent-1.crt --tls-key %s/agent-1.key --coordinator %s --unlink",
			 AGENT_BIN, (int)getpid(), keys, keys, keys, c.coord_url);
		ck_assert_int_eq(run(cmd, out, sizeof out), 2);
		ck_assert_msg(strstr(out, "not agent-3"), "%s", out);
	}
	cl_coord_args[0] = NULL;
	cl_agent_tls_dir = NULL;
	ck_assert_int_eq(cl_stop(&c), 0);
	remove_dir(keys);
}
END_TEST

/* Agent 1's certificate speaks for agent 1 only. */
START_TEST(tls_other_agents_certificate_refused)
{
	struct cluster c;
	struct rt_wire_buf b = { 0 };
	struct rt_tls *a1, *a2;
	static char st[1 << 16];
	char keys[64], coord[128], coll[128], agent2[256], url[256];
	make_keys(keys, sizeof keys);
	start_tls(&c, keys, 2);
	a1 = identity(keys, "agent-1");
	a2 = identity(keys, "agent-2");
	tls_url(c.coord_url, coord, sizeof coord);
	tls_url(c.collect_url, coll, sizeof coll);
	/* REGISTER as agent 3 (or 2) with agent 1's key. */
	encode_register(&b, 3, "tls+tcp://127.0.0.1:9");
	ck_assert_int_eq(fake_agent_ack(coord, a1, "coordinator", &b, 3000), RT_ACK_REFUSED);
	encode_register(&b, 2, "tls+tcp://127.0.0.1:9");
	ck_assert_int_eq(fake_agent_ack(coord, a1, "coordinator", &b, 3000), RT_ACK_REFUSED);
	ck_assert_int_eq(cl_coord_figure(&c, "security", "registrations_refused"), 2);
	ck_assert_int_eq(cl_coord_figure(&c, "agents", "known"), 2);
	/* A trigger and a slice for agent 2 from agent 1. */
	encode_trigger(&b, 2, 0x8101);
	ck_assert_int_eq(fake_agent_ack(coord, a1, "coordinator", &b, 3000), RT_ACK_REFUSED);
	encode_slice(&b, 2, 0x8101);
	ck_assert_int_eq(fake_agent_ack(coll, a1, "coordinator", &b, 3000), RT_ACK_REFUSED);
	ck_assert_int_eq(cl_coord_figure(&c, "security", "triggers_refused"), 1);
	ck_assert_int_eq(cl_coord_figure(&c, "security", "slices_refused"), 1);
	ck_assert_int_eq(cl_coord_figure(&c, "collection", "slices"), 0);
	/* The same from agent 2 itself is accepted. */
	encode_slice(&b, 2, 0x8102);
	ck_assert_int_eq(fake_agent_ack(coll, a2, "coordinator", &b, 3000), 0);
	/* Remote triggers to agent 2 only from the coordinator. */
	agent_status_url(&c, 1, url, sizeof url);
	ask_text(url, NULL, NULL, "status json", st, sizeof st);
	json_str(st, "listen", agent2, sizeof agent2);
	ck_assert_msg(rt_url_is_tls(agent2), "agent 2 listens on %s", agent2);
	encode_remote(&b, 1, 0x8103);
	ck_assert_int_eq(fake_agent_ack(agent2, a1, "agent-2", &b, 3000), RT_ACK_REFUSED);
	ck_assert_int_eq(cl_agent_figure(&c, 1, "security", "remote_triggers_unauthorised"), 1);
	rt_tls_free(a1);
	rt_tls_free(a2);
	rt_wire_buf_free(&b);
	cl_coord_args[0] = NULL;
	cl_agent_tls_dir = NULL;
	ck_assert_int_eq(cl_stop(&c), 0);
	remove_dir(keys);
}
END_TEST

START_TEST(tls_unauthorised_alarm_refused)
{
	struct cluster c;
	char keys[64], cmd[1024], out[4096];
	make_keys(keys, sizeof keys);
	start_tls(&c, keys, 1);
	/* An agent's certificate may read, not change. */
	snprintf(cmd, sizeof cmd, "%s alarm shop checkout --coordinator %s --tls-ca %s/ca.crt "
		 "--tls-cert %s/agent-1.crt --tls-key %s/agent-1.key", CLI_BIN, c.coord_url, keys,
		 keys, keys);
	ck_assert_msg(run(cmd, out, sizeof out) == 1 && strstr(out, "not authorised"),
		      "%s (keys %s: %s)", out, keys, keys_state(keys));
	ck_assert_int_eq(cl_coord_figure(&c, "security", "operator_commands_refused"), 1);
	snprintf(cmd, sizeof cmd, "%s alarm --list --coordinator %s --tls-ca %s/ca.crt "
		 "--tls-cert %s/agent-1.crt --tls-key %s/agent-1.key", CLI_BIN, c.coord_url, keys,
		 keys, keys);
	ck_assert_msg(run(cmd, out, sizeof out) == 0, "%s", out);
	/* The operator's (from $RETRACE_TLS_*, start_tls) may. */
	snprintf(cmd, sizeof cmd, "%s alarm shop checkout --coordinator %s", CLI_BIN, c.coord_url);
	ck_assert_msg(run(cmd, out, sizeof out) == 0, "%s", out);
	ck_assert_int_eq(cl_coord_figure(&c, "security", "operator_commands_refused"), 1);
	cl_coord_args[0] = NULL;
	cl_agent_tls_dir = NULL;
	ck_assert_int_eq(cl_stop(&c), 0);
	remove_dir(keys);
}
END_TEST

#define ADD_CASE(s, fn)                                      \
	do {                                                 \
		TCase *tc = tcase_create(#fn);               \
		tcase_set_timeout(tc, 80);                   \
		tcase_add_test(tc, fn);                      \
		suite_add_tcase(s, tc);                      \
	} while (0)

static Suite *security_suite(void)
{
	Suite *s = suite_create("coordinator_security");
	ADD_CASE(s, forged_slice_unregistered_agent);
	ADD_CASE(s, forged_trigger_unregistered_agent);
	ADD_CASE(s, register_cannot_move_live_agent);
	ADD_CASE(s, duplicate_agent_id_is_told);
	ADD_CASE(s, oversize_requests_refused);
	ADD_CASE(s, connection_cap_counts_refusals);
	ADD_CASE(s, remote_trigger_rate_limited);
	ADD_CASE(s, local_files_private);
	ADD_CASE(s, non_loopback_needs_tls);
	ADD_CASE(s, tls_end_to_end);
	ADD_CASE(s, tls_other_agents_certificate_refused);
	ADD_CASE(s, tls_unauthorised_alarm_refused);
	return s;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	return test_run_suite(security_suite());
}
