/*
 * Remote triggers against the real retrace-agent binary (AGENT_BIN).
 *
 * A client process receives a request whose W3C context names two upstream
 * agents (tracestate rt=...), so the agent holds an untriggered trace with two
 * breadcrumbs. The test, playing the coordinator, sends a REMOTE_TRIGGER to the
 * agent's --listen address and must get a BREADCRUMB_REPLY naming the trace with
 * its buffers and bytes and both upstream agent ids; the trace's slice must then
 * reach the collector, byte-exact, under the remote trigger's id. Malformed
 * requests (random bytes that look like a msgpack array, or a well-formed
 * message of the wrong type) get an ACK with a negative status and are counted
 * in bad_requests; the agent keeps serving and stops cleanly on SIGTERM.
 *
 * The reply's buffers and bytes are cumulative: what the agent has had of the
 * trace since it indexed it, held + in flight + delivered (acknowledged,
 * spooled, or dropped as unsendable). inflight_reply: a slice on its way, not
 * yet acknowledged; cumulative_reply: a real client's triggered trace, all of
 * it acknowledged in several slices, named with exactly the buffers the client
 * used and exactly the payload bytes the collector received.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "nng_close.h"
#include "rptest.h"

#ifndef AGENT_BIN
#error "AGENT_BIN must name the retrace-agent binary"
#endif

#define RM_AGENT 0x6A
#define RM_UP0 0xABCD
#define RM_UP1 0x1234
#define RM_TRIG 0x77
#define RM_HI 0x4bf92f3577b34da6ull
#define RM_LO 0xa3ce929d0e0e4736ull

/* The string value of "key":"..." in `section` of a status JSON (into out). */
static int json_get_str(const char *json, const char *section, const char *key, char *out,
			size_t cap)
{
	char pat[128];
	const char *s, *k, *q;
	snprintf(pat, sizeof pat, "\"%s\":{", section);
	if (!(s = strstr(json, pat)))
		return -1;
	snprintf(pat, sizeof pat, "\"%s\":\"", key);
	if (!(k = strstr(s, pat)) || !(q = strchr(k + strlen(pat), '"')))
		return -1;
	snprintf(out, cap, "%.*s", (int)(q - (k + strlen(pat))), k + strlen(pat));
	return 0;
}

/* One request/reply on a fresh REQ socket; the reply (malloc'd) or NULL. */
static uint8_t *request(const char *url, const void *req, size_t len, size_t *rlen)
{
	nng_socket s;
	void *buf = NULL;
	size_t sz = 0;
	int rv;
	ck_assert_int_eq(nng_req0_open(&s), 0);
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 10000);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 10000);
	rv = nng_dial(s, url, NULL, 0);
	if (rv == 0)
		rv = nng_send(s, (void *)req, len, 0);
	if (rv == 0)
		rv = nng_recv(s, &buf, &sz, NNG_FLAG_ALLOC);
	rt_nng_close_bounded(s, RT_NNG_CLOSE_WAIT_MS); /* nng 1.5.2 can deadlock in nng_close */
	if (rv != 0)
		return NULL;
	{
		uint8_t *out = malloc(sz + 1);
		memcpy(out, buf, sz);
		out[sz] = 0;
		nng_free(buf, sz);
		*rlen = sz;
		return out;
	}
}

/* A number from `status json`: key inside section. -1 if absent. */
static long long json_get(const char *json, const char *section, const char *key)
{
	char pat[128];
	const char *s, *k, *end;
	snprintf(pat, sizeof pat, "\"%s\":{", section);
	if (!(s = strstr(json, pat)))
		return -1;
	end = strchr(s + strlen(pat), '}');
	snprintf(pat, sizeof pat, "\"%s\":", key);
	k = strstr(s, pat);
	if (!k || (end && k > end))
		return -1;
	return strtoll(k + strlen(pat), NULL, 10);
}

static char *status_json(const char *status_url)
{
	size_t n;
	uint8_t *r = request(status_url, "status json", 11, &n);
	return (char *)r;
}

static void remote_child(const char *pool, int fd)
{
	struct rp_child_batch b = { 0 };
	struct retrace_wire_context ctx;
	struct retrace_thread_stats s0, s1;
	char tp[64];
	uint8_t rec[1024];
	uint32_t k;
	ag_child_client(pool, 8, RETRACE_OK);
	snprintf(tp, sizeof tp, "00-%016llx%016llx-00f067aa0ba902b7-01", (unsigned long long)RM_HI,
		 (unsigned long long)RM_LO);
	if (retrace_deserialize(tp, "congo=t61rcWkgMzE,rt=0000abcd.00001234.0", &ctx) != RETRACE_OK)
		CHILD_FAIL(50, "retrace_deserialize refused the context");
	if (ctx.hops[0] != RM_UP0 || ctx.hops[1] != RM_UP1 || ctx.fired || ctx.state_rejected)
		CHILD_FAIL(51, "context parsed as hops %x %x fired %d rejected %d", ctx.hops[0],
			   ctx.hops[1], ctx.fired, ctx.state_rejected);
	retrace_thread_stats(&s0);
	rp_cb_begin(&b, 0, ctx.trace_id.hi, ctx.trace_id.lo, 0);
	if (retrace_begin(ctx.trace_id) != 1)
		CHILD_FAIL(41, "not recorded");
	for (k = 0; k < 40; k++) {
		uint32_t len = 50 + (k * 91) % 900;
		rp_fill(rec, ctx.trace_id.lo, k, len);
		retrace_tracepoint(rec, len);
		rp_cb_add(&b, rec, len);
	}
	retrace_end();
	retrace_flush();
	retrace_thread_stats(&s1);
	b.h.discards = (uint32_t)(s1.discard_buffers - s0.discard_buffers);
	b.h.nbuf = (uint32_t)(s1.buffers_used - s0.buffers_used) + b.h.discards;
	rp_cb_send(&b, fd);
	rp_child_exit();
}

START_TEST(test_remote)
{
	struct tc_collector c;
	char pool[64], listen[64], status[256], ready[256], log[256], err[256], msg[512];
	char ids[16];
	struct rp_stream st;
	struct rp_parsed *b = NULL;
	size_t nb = 0, pos = 0, rlen;
	struct rt_wire_trace tr;
	struct rt_wire_remote_trigger rq;
	struct rt_wire_buf out = { 0 };
	struct rt_wire_msg m;
	uint8_t *reply;
	char *js;
	pid_t agent, kid;
	int p[2], i, ok;
	uint64_t end;
	long long bad;

	ag_pool_name(pool, sizeof pool, "remote");
	snprintf(ready, sizeof ready, "/tmp/%.63s.ready", pool + 1);
	snprintf(log, sizeof log, "/tmp/%.63s.log", pool + 1);
	snprintf(status, sizeof status, "ipc:///tmp/%.63s.status", pool + 1);
	ag_track_file(ready);
	ag_track_file(log);
	ag_track_file(status + 6);
	/* Port 0: the agent binds one and says which (agent.control in its status);
	 * a port picked here and closed could be taken before the agent binds it. */
	snprintf(listen, sizeof listen, "tcp://127.0.0.1:0");
	snprintf(ids, sizeof ids, "%u", RM_AGENT);
	tc_init(&c);
	ck_assert_msg(tc_start(&c, "tcp://127.0.0.1:0", err, sizeof err) == 0, "%s", err);

	agent = ag_fork();
	if (agent == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(AGENT_BIN, AGENT_BIN, "--pool", pool, "--agent-id", ids, "--listen", listen,
		      "--status", status, "--collector", c.url, "--buffers", "128", "--buffer-size",
		      "4096", "--ready-file", ready, "--unlink", "--report-timeout", "20000",
		      "--liveness-interval", "0.05", "--log-level", "warn", (char *)NULL);
		_exit(127);
	}
	end = ag_deadline(20);
	while (access(ready, F_OK) != 0) {
		int stt;
		ck_assert_msg(waitpid(agent, &stt, WNOHANG) == 0, "retrace-agent exited early (see %s)",
			      log);
		ck_assert_msg(ag_now_ns() < end, "retrace-agent not ready in 20 s");
		ag_nap_us(5000);
	}

	{
		char *js = status_json(status);
		ck_assert_msg(js != NULL, "no status from %s", status);
		ck_assert_msg(json_get_str(js, "agent", "control", listen, sizeof listen) == 0 &&
				      strncmp(listen, "tcp://", 6) == 0,
			      "no bound control address in the status: %s", js);
		free(js);
	}

	/* The client: a request from upstream agents 0xabcd and 0x1234. */
	ck_assert_int_eq(pipe(p), 0);
	kid = ag_fork();
	if (kid == 0) {
		close(p[0]);
		remote_child(pool, p[1]);
	}
	close(p[1]);
	rp_stream_init(&st, p[0]);
	end = ag_deadline(20);
	while (nb < 1 || !st.eof) {
		rp_stream_pump(&st);
		rp_parse(&st, &pos, &b, &nb);
		ck_assert_msg(ag_now_ns() < end, "no report from the client");
		ag_nap_us(2000);
	}
	ag_assert_exited_ok(kid, 20, "remote child");
	ck_assert_uint_eq(b[0].h.lo, RM_LO);
	ck_assert_uint_eq(b[0].h.hi, RM_HI);
	ck_assert_msg(b[0].h.nbuf >= 3, "trace used %u buffers", b[0].h.nbuf);

	/* Wait until the agent indexed the data and the two breadcrumbs. */
	end = ag_deadline(20);
	for (ok = 0; !ok;) {
		js = status_json(status);
		ck_assert_msg(js != NULL, "no status from %s", status);
		ok = json_get(js, "queues", "complete_entries") >= b[0].h.nbuf &&
		     json_get(js, "traces", "breadcrumbs") >= 2 &&
		     json_get(js, "queues", "complete_depth") == 0;
		if (!ok && ag_now_ns() > end)
			ck_abort_msg("agent never indexed the trace: %s", js);
		free(js);
		if (!ok)
			ag_nap_us(10000);
	}
	ck_assert_uint_eq(tc_nslices(&c), 0); /* untriggered: nothing reported */

	/* The coordinator's remote trigger. */
	memset(&tr, 0, sizeof tr);
	tr.trace_hi = RM_HI;
	tr.trace_lo = RM_LO;
	rq.request_id = 0x5EED;
	rq.trigger_id = RM_TRIG;
	rq.trace_count = 1;
	rq.traces = &tr;
	ck_assert_int_eq(rt_wire_encode_remote_trigger(&out, &rq), 0);
	reply = request(listen, out.data, out.len, &rlen);
	ck_assert_msg(reply != NULL, "no reply to REMOTE_TRIGGER on %s", listen);
	ck_assert_int_eq(rt_wire_decode(reply, rlen, &m), 0);
	ck_assert_int_eq(m.type, RT_WIRE_BREADCRUMB_REPLY);
	ck_assert_uint_eq(m.reply.request_id, 0x5EED);
	ck_assert_uint_eq(m.reply.agent_id, RM_AGENT);
	ck_assert_uint_eq(m.reply.trace_count, 1);
	ck_assert_uint_eq(m.reply.traces[0].trace_lo, RM_LO);
	ck_assert_uint_eq(m.reply.traces[0].trace_hi, RM_HI);
	ck_assert_msg(m.reply.traces[0].buffers == b[0].h.nbuf,
		      "reply names %u buffers, the client wrote %u", m.reply.traces[0].buffers,
		      b[0].h.nbuf);
	/* Frames: 4 bytes of header per record, per chunk where a record was split. */
	ck_assert_msg(m.reply.traces[0].bytes >= b[0].h.bytes + 4ull * b[0].h.nrec &&
			      m.reply.traces[0].bytes <=
				      b[0].h.bytes + 4ull * (b[0].h.nrec + b[0].h.nbuf),
		      "reply names %llu bytes, the client's records hold %llu in %u frames or more",
		      (unsigned long long)m.reply.traces[0].bytes,
		      (unsigned long long)(b[0].h.bytes + 4ull * b[0].h.nrec), b[0].h.nrec);
	ck_assert_uint_eq(m.reply.traces[0].breadcrumb_count, 2);
	ck_assert_msg((m.reply.traces[0].breadcrumbs[0] == RM_UP0 &&
		       m.reply.traces[0].breadcrumbs[1] == RM_UP1) ||
			      (m.reply.traces[0].breadcrumbs[0] == RM_UP1 &&
			       m.reply.traces[0].breadcrumbs[1] == RM_UP0),
		      "breadcrumbs %x %x", m.reply.traces[0].breadcrumbs[0],
		      m.reply.traces[0].breadcrumbs[1]);
	rt_wire_msg_free(&m);
	free(reply);

	/* The slice reaches the collector, byte-exact, under the remote trigger's id. */
	end = ag_deadline(20);
	for (ok = 0; !ok;) {
		uint32_t ns;
		int rc;
		tc_lock(&c);
		rc = c.nslices ? rp_check_trace(&c, 0, c.nslices, &st, &b[0], RM_TRIG, RM_AGENT, &ns,
						msg, sizeof msg)
			       : -1;
		tc_unlock(&c);
		ok = rc == 0;
		if (!ok && ag_now_ns() > end)
			ck_abort_msg("slice never arrived whole: %s", c.nslices ? msg : "no slice");
		if (!ok)
			ag_nap_us(10000);
	}

	/* Malformed requests: each gets an ACK with a negative status and is counted. */
	{
		uint32_t x = 0x12345678u;
		for (i = 0; i < 6; i++) {
			uint8_t junk[64];
			size_t n = 8 + (size_t)i * 9, k;
			for (k = 0; k < n; k++) {
				x = x * 1664525u + 1013904223u;
				junk[k] = (uint8_t)(x >> 24);
			}
			junk[0] = (uint8_t)(0x90 | (x & 0x0f));
			if (i == 5) { /* a valid message of the wrong type */
				struct rt_wire_ack a = { 0 };
				out.len = 0;
				ck_assert_int_eq(rt_wire_encode_ack(&out, &a), 0);
				memcpy(junk, out.data, out.len);
				n = out.len;
			}
			reply = request(listen, junk, n, &rlen);
			ck_assert_msg(reply != NULL, "no reply to malformed request %d", i);
			ck_assert_msg(rt_wire_decode(reply, rlen, &m) == 0 && m.type == RT_WIRE_ACK,
				      "malformed request %d: reply is not an ACK", i);
			ck_assert_msg(m.ack.status < 0, "malformed request %d: ACK status %d", i,
				      m.ack.status);
			rt_wire_msg_free(&m);
			free(reply);
		}
	}
	js = status_json(status);
	ck_assert(js != NULL);
	bad = json_get(js, "reporting", "bad_requests");
	ck_assert_msg(bad == 6, "bad_requests %lld, want 6", bad);
	ck_assert_int_eq(json_get(js, "reporting", "remote_triggers"), 1);
	ck_assert_int_eq(json_get(js, "reporting", "slices_failed"), 0);
	free(js);

	/* Clean stop. */
	kill(agent, SIGTERM);
	ag_assert_exited_ok(agent, 20, "retrace-agent");
	ck_assert_msg(!ag_shm_exists(pool), "--unlink left the pool behind");
	rt_wire_buf_free(&out);
	rp_parsed_free(b, nb);
	rp_stream_free(&st);
	tc_free(&c);
}
END_TEST

/*
 * The BREADCRUMB_REPLY for a trace whose slice is on its way to the collector
 * (in flight, not yet acknowledged): buffers and bytes must describe the same
 * data, all of it.
 */
START_TEST(test_inflight_reply)
{
	static struct rt_agent a;
	static uint8_t out[1 << 16];
	struct tc_collector c;
	struct rt_agent_config cfg;
	struct rt_wire_trace tr;
	struct rt_wire_remote_trigger rq;
	struct rt_wire_buf req = { 0 };
	struct rt_wire_msg m;
	struct rt_trigger_entry t;
	char pool[64], err[256];
	const uint64_t lo = 0x1F11000000000001ull;
	uint64_t bytes = 0;
	uint32_t s;
	size_t n;
	int ok;

	ag_pool_name(pool, sizeof pool, "inflight");
	tc_init(&c);
	ck_assert_msg(tc_start(&c, "tcp://127.0.0.1:0", err, sizeof err) == 0, "%s", err);
	tc_set_silent(&c, 1); /* takes the slice, never answers */
	rp_config(&cfg, pool, 64, 4096, RM_AGENT, c.url);
	rp_open(&a, &cfg);
	for (s = 0; s < 3; s++) {
		uint32_t id = ag_take_buffer(&a.pool);
		uint32_t b = ag_fill_buffer(&a.pool, id, 0x7e, lo, s, s * 20, 20, 1);
		ag_push_complete(&a.pool, lo, id, b);
		bytes += b;
	}
	t = ag_trig(lo, RM_TRIG, 1, 0);
	ag_push_triggers(&a.pool, &t, 1);
	RP_UNTIL(ok, &a, 20, tc_nslices(&c) >= 1 && a.ix.st.inflight_buffers == 3);
	ck_assert_msg(ok, "the slice did not go out");

	memset(&tr, 0, sizeof tr);
	tr.trace_hi = 0x7e;
	tr.trace_lo = lo;
	rq.request_id = 9;
	rq.trigger_id = RM_TRIG;
	rq.trace_count = 1;
	rq.traces = &tr;
	ck_assert_int_eq(rt_wire_encode_remote_trigger(&req, &rq), 0);
	n = rt_agent_handle_request(&a, req.data, req.len, out, sizeof out);
	ck_assert_int_eq(rt_wire_decode(out, n, &m), 0);
	ck_assert_int_eq(m.type, RT_WIRE_BREADCRUMB_REPLY);
	ck_assert_uint_eq(m.reply.traces[0].buffers, 3);
	ck_assert_msg(m.reply.traces[0].bytes == bytes,
		      "reply: %u buffers but %llu bytes (the agent holds %llu bytes in them, all in "
		      "flight)", m.reply.traces[0].buffers,
		      (unsigned long long)m.reply.traces[0].bytes, (unsigned long long)bytes);
	rt_wire_msg_free(&m);
	rt_wire_buf_free(&req);
	rt_agent_close(&a);
	tc_free(&c);
}
END_TEST

/* A client child: one trace of nrec records, triggered after its end. */
static void cumulative_child(const char *pool, int fd, uint64_t lo, uint32_t nrec)
{
	struct rp_child_batch b = { 0 };
	struct retrace_thread_stats s0, s1;
	retrace_trace_id id = { 0x7e, lo };
	uint8_t rec[2048];
	uint32_t k;
	ag_child_client(pool, 8, RETRACE_OK);
	retrace_thread_stats(&s0);
	rp_cb_begin(&b, 0, id.hi, id.lo, RM_TRIG);
	if (retrace_begin(id) != 1)
		CHILD_FAIL(41, "not recorded");
	for (k = 0; k < nrec; k++) {
		uint32_t len = 40 + (k * 131) % 1500;
		rp_fill(rec, lo, k, len);
		retrace_tracepoint(rec, len);
		rp_cb_add(&b, rec, len);
	}
	retrace_end();
	retrace_flush();
	if (retrace_trigger(id, RM_TRIG, NULL, 0) != RETRACE_OK)
		CHILD_FAIL(42, "retrace_trigger");
	retrace_thread_stats(&s1);
	b.h.discards = (uint32_t)(s1.discard_buffers - s0.discard_buffers);
	b.h.nbuf = (uint32_t)(s1.buffers_used - s0.buffers_used) + b.h.discards;
	if (b.h.discards)
		CHILD_FAIL(43, "%u buffers went to the discard buffer", b.h.discards);
	rp_cb_send(&b, fd);
	free(b.data);
	rp_child_exit();
}

/* Decode a BREADCRUMB_REPLY from the agent for one trace. */
static void ask(struct rt_agent *a, uint64_t hi, uint64_t lo, uint32_t *buffers, uint64_t *bytes)
{
	static uint8_t out[1 << 16];
	struct rt_wire_trace tr;
	struct rt_wire_remote_trigger rq;
	struct rt_wire_buf req = { 0 };
	struct rt_wire_msg m;
	size_t n;
	memset(&tr, 0, sizeof tr);
	tr.trace_hi = hi;
	tr.trace_lo = lo;
	rq.request_id = 77;
	rq.trigger_id = RM_TRIG;
	rq.trace_count = 1;
	rq.traces = &tr;
	ck_assert_int_eq(rt_wire_encode_remote_trigger(&req, &rq), 0);
	n = rt_agent_handle_request(a, req.data, req.len, out, sizeof out);
	ck_assert_int_eq(rt_wire_decode(out, n, &m), 0);
	ck_assert_int_eq(m.type, RT_WIRE_BREADCRUMB_REPLY);
	ck_assert_uint_eq(m.reply.trace_count, 1);
	ck_assert_uint_eq(m.reply.traces[0].trace_lo, lo);
	*buffers = m.reply.traces[0].buffers;
	*bytes = m.reply.traces[0].bytes;
	rt_wire_msg_free(&m);
	rt_wire_buf_free(&req);
}

/* A full BREADCRUMB_REPLY for one trace (the caller frees m). */
static void ask_msg(struct rt_agent *a, uint64_t hi, uint64_t lo, struct rt_wire_msg *m)
{
	static uint8_t out[1 << 16];
	struct rt_wire_trace tr;
	struct rt_wire_remote_trigger rq;
	struct rt_wire_buf req = { 0 };
	size_t n;
	memset(&tr, 0, sizeof tr);
	tr.trace_hi = hi;
	tr.trace_lo = lo;
	rq.request_id = 78;
	rq.trigger_id = RM_TRIG;
	rq.trace_count = 1;
	rq.traces = &tr;
	ck_assert_int_eq(rt_wire_encode_remote_trigger(&req, &rq), 0);
	n = rt_agent_handle_request(a, req.data, req.len, out, sizeof out);
	ck_assert_int_eq(rt_wire_decode(out, n, m), 0);
	ck_assert_int_eq(m->type, RT_WIRE_BREADCRUMB_REPLY);
	ck_assert_uint_eq(m->reply.trace_count, 1);
	rt_wire_buf_free(&req);
}

/*
 * The race behind false "coherent" traces: a client handed in a buffer and
 * deposited a breadcrumb, but the agent had not polled yet when the remote
 * trigger came (it serves requests ahead of its pass). The reply must still
 * name the hop and count the buffer, or the coordinator never asks that agent
 * and calls the trace whole without it. No poll is run here at all.
 */
START_TEST(test_reply_sees_undrained_queues)
{
	static struct rt_agent a;
	struct rt_agent_config cfg;
	struct rt_wire_msg m;
	char pool[64];
	const uint64_t lo = 0x5EED000000000001ull;
	uint32_t id, bytes, k;
	int named = 0;

	ag_pool_name(pool, sizeof pool, "undrained");
	rp_config(&cfg, pool, 64, 4096, RM_AGENT, "");
	rp_open(&a, &cfg);
	id = ag_take_buffer(&a.pool);
	bytes = ag_fill_buffer(&a.pool, id, 0x7e, lo, 0, 0, 10, 1);
	ag_push_complete(&a.pool, lo, id, bytes);
	ag_push_crumb(&a.pool, lo, RM_UP0);
	ask_msg(&a, 0x7e, lo, &m);
	for (k = 0; k < m.reply.traces[0].breadcrumb_count; k++)
		named |= m.reply.traces[0].breadcrumbs[k] == RM_UP0;
	ck_assert_msg(named, "the breadcrumb queued before the request is not in the reply (%u crumbs)",
		      m.reply.traces[0].breadcrumb_count);
	ck_assert_msg(m.reply.traces[0].buffers == 1 && m.reply.traces[0].bytes == bytes,
		      "reply: %u buffers, %llu bytes; the queue held 1 buffer of %u bytes",
		      m.reply.traces[0].buffers, (unsigned long long)m.reply.traces[0].bytes, bytes);
	ck_assert_uint_eq(m.reply.traces[0].open, 0);
	rt_wire_msg_free(&m);
	rt_agent_close(&a);
}
END_TEST

/*
 * A writer still holds buffers of the trace (one being written, one sealed but
 * not yet queued): the reply must say so, so that the coordinator waits for
 * them instead of calling this host's part whole. Once they are handed in, the
 * reply counts them as data and says none is open.
 */
START_TEST(test_reply_counts_open_buffers)
{
	static struct rt_agent a;
	struct rt_agent_config cfg;
	struct rt_wire_msg m;
	char pool[64];
	const uint64_t lo = 0x5EED000000000002ull, other = 0x5EED000000000003ull;
	uint32_t b0, b1, b2, n0, n1;

	ag_pool_name(pool, sizeof pool, "openbufs");
	rp_config(&cfg, pool, 64, 4096, RM_AGENT, "");
	rp_open(&a, &cfg);
	b0 = ag_take_buffer(&a.pool);
	b1 = ag_take_buffer(&a.pool);
	b2 = ag_take_buffer(&a.pool);
	n0 = ag_fill_buffer(&a.pool, b0, 0x7e, lo, 0, 0, 10, 1);  /* sealed, not queued */
	n1 = ag_fill_buffer(&a.pool, b1, 0x7e, lo, 1, 10, 5, 0);  /* being written */
	ag_fill_buffer(&a.pool, b2, 0x7e, other, 0, 0, 5, 0);     /* another trace's */
	ask_msg(&a, 0x7e, lo, &m);
	ck_assert_msg(m.reply.traces[0].open == 2, "reply: %u open buffers, the writer holds 2",
		      m.reply.traces[0].open);
	ck_assert_uint_eq(m.reply.traces[0].buffers, 0);
	rt_wire_msg_free(&m);

	ag_push_complete(&a.pool, lo, b0, n0);
	ask_msg(&a, 0x7e, lo, &m);
	ck_assert_uint_eq(m.reply.traces[0].open, 1);
	ck_assert_uint_eq(m.reply.traces[0].buffers, 1);
	rt_wire_msg_free(&m);

	ck_pr_store_32(&rt_pool_buffer(&a.pool, b1)->flags, RT_BUF_INUSE | RT_BUF_SEALED | RT_BUF_LAST);
	ag_push_complete(&a.pool, lo, b1, n1);
	ask_msg(&a, 0x7e, lo, &m);
	ck_assert_uint_eq(m.reply.traces[0].open, 0);
	ck_assert_uint_eq(m.reply.traces[0].buffers, 2);
	ck_assert_uint_eq(m.reply.traces[0].bytes, (uint64_t)n0 + n1);
	rt_wire_msg_free(&m);
	ck_assert_uint_ge(a.st.remote_open_traces, 2);

	/* A writer flushed mid-trace: everything handed in, no buffer held, but its
	 * run has not ended (no LAST buffer yet): still open. */
	b0 = ag_take_buffer(&a.pool);
	n0 = ag_fill_buffer(&a.pool, b0, 0x7e, other + 1, 0, 0, 10, 1);
	ck_pr_store_32(&rt_pool_buffer(&a.pool, b0)->flags, RT_BUF_INUSE | RT_BUF_SEALED);
	ag_push_complete(&a.pool, other + 1, b0, n0);
	ask_msg(&a, 0x7e, other + 1, &m);
	ck_assert_msg(m.reply.traces[0].open == 1,
		      "a run with no LAST buffer yet: reply says %u open", m.reply.traces[0].open);
	ck_assert_uint_eq(m.reply.traces[0].buffers, 1);
	rt_wire_msg_free(&m);
	rt_agent_close(&a);
}
END_TEST

START_TEST(test_cumulative_reply)
{
	static struct rt_agent a;
	struct tc_collector c;
	struct rt_agent_config cfg;
	struct rp_stream st;
	struct rp_parsed *b = NULL;
	size_t nb = 0, pos = 0, k;
	char pool[64], err[256], msg[512];
	const uint64_t lo = 0xC0FFEE0000000001ull;
	uint64_t got_bytes = 0, bytes;
	uint32_t got_bufs = 0, slices = 0, buffers, ns;
	int p[2], ok;
	pid_t kid;

	ag_pool_name(pool, sizeof pool, "cumul");
	tc_init(&c);
	ck_assert_msg(tc_start(&c, "tcp://127.0.0.1:0", err, sizeof err) == 0, "%s", err);
	rp_config(&cfg, pool, 64, 4096, RM_AGENT, c.url);
	cfg.max_slice_bytes = 2 * 4096; /* several slices for the one trace */
	rp_open(&a, &cfg);
	ck_assert_int_eq(pipe(p), 0);
	kid = ag_fork();
	if (kid == 0) {
		close(p[0]);
		cumulative_child(pool, p[1], lo, 60);
	}
	close(p[1]);
	rp_stream_init(&st, p[0]);
	RP_UNTIL(ok, &a, 30, (rp_stream_pump(&st), rp_parse(&st, &pos, &b, &nb), nb >= 1) &&
				     rp_quiet(&a) && a.st.slices_sent > 0 &&
				     a.st.slices_acked == a.st.slices_sent);
	ck_assert_msg(ok, "not reported: batches %zu, sent %llu, acked %llu", nb,
		      (unsigned long long)a.st.slices_sent, (unsigned long long)a.st.slices_acked);
	ag_assert_exited_ok(kid, 20, "cumulative child");
	ck_assert_msg(b[0].h.nbuf >= 5, "the trace used only %u buffers", b[0].h.nbuf);

	tc_lock(&c);
	ck_assert_msg(rp_check_trace(&c, 0, c.nslices, &st, &b[0], RM_TRIG, RM_AGENT, &ns, msg,
				     sizeof msg) == 0, "%s", msg);
	for (k = 0; k < c.nslices; k++) {
		if (c.slices[k].trace_lo != lo)
			continue;
		slices++;
		got_bufs += c.slices[k].nbuf;
		got_bytes += c.slices[k].bytes;
	}
	tc_unlock(&c);
	ck_assert_msg(slices >= 3, "the trace came in %u slices, want several", slices);

	/* Everything acknowledged: nothing held, nothing in flight; still named. */
	ask(&a, 0x7e, lo, &buffers, &bytes);
	ck_assert_msg(buffers == b[0].h.nbuf && buffers == got_bufs,
		      "reply names %u buffers; the client used %u, the collector got %u", buffers,
		      b[0].h.nbuf, got_bufs);
	ck_assert_msg(bytes == got_bytes, "reply names %llu bytes; the collector got %llu",
		      (unsigned long long)bytes, (unsigned long long)got_bytes);

	/* A trace this agent never saw: named, holds nothing. */
	ask(&a, 0x7e, lo + 1, &buffers, &bytes);
	ck_assert_uint_eq(buffers, 0);
	ck_assert_uint_eq(bytes, 0);

	rp_parsed_free(b, nb);
	rp_stream_free(&st);
	rt_agent_close(&a);
	tc_free(&c);
}
END_TEST

static Suite *remote_suite(void)
{
	Suite *s = suite_create("report_remote");
	TCase *t = tcase_create("remote");
	tcase_set_timeout(t, 100);
	tcase_add_test(t, test_remote);
	suite_add_tcase(s, t);
	t = tcase_create("inflight_reply");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_inflight_reply);
	suite_add_tcase(s, t);
	t = tcase_create("reply_sees_undrained_queues");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_reply_sees_undrained_queues);
	suite_add_tcase(s, t);
	t = tcase_create("reply_counts_open_buffers");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_reply_counts_open_buffers);
	suite_add_tcase(s, t);
	t = tcase_create("cumulative_reply");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_cumulative_reply);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return rp_run_suite(remote_suite());
}
