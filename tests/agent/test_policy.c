/*
 * The agent's side of the adaptive span policy: a POLICY message handed to the
 * control handler (as the coordinator sends it) lands in the pool's table,
 * seen by a client's own mapping; an older generation is ignored and counted;
 * a policy the table cannot take is refused with an error ack, counted, and
 * the table the clients had stays; a malformed message is a bad request; the
 * status shows the policy section.
 */
#include "agtest.h"
#include "wire.h"

#define S_SIZE 8192u

static uint64_t site_of(int i)
{
	char op[32];
	int n = snprintf(op, sizeof op, "op-%d", i);
	return rt_adapt_site_hash("svc", 3, op, (size_t)n);
}

/* Send a POLICY of n sites (p16 = base + i) at generation g; returns the ack status. */
static int32_t send_policy(struct rt_agent *a, uint64_t g, uint32_t n, uint16_t base)
{
	static struct rt_wire_policy_entry e[4096];
	static uint8_t out[4096];
	struct rt_wire_policy p = {.generation = g, .entry_count = n, .entries = e};
	struct rt_wire_buf b = {0};
	struct rt_wire_msg m;
	size_t len;
	int32_t st;
	for (uint32_t i = 0; i < n; i++)
		e[i] = (struct rt_wire_policy_entry){ site_of((int)i), (uint16_t)(base + i) };
	ck_assert_int_eq(rt_wire_encode_policy(&b, &p), 0);
	len = rt_agent_handle_request(a, b.data, b.len, out, sizeof out);
	rt_wire_buf_free(&b);
	ck_assert_int_eq(rt_wire_decode(out, len, &m), 0);
	ck_assert_int_eq(m.type, RT_WIRE_ACK);
	st = m.ack.status;
	rt_wire_msg_free(&m);
	return st;
}

static int lookup(const struct rt_pool *c, uint64_t site)
{
	uint64_t seq;
	int k = rt_policy_read_begin(c, &seq);
	uint16_t p16;
	if (k < 0)
		return -1;
	p16 = rt_adapt_table_lookup(c->policy_slots[k], c->geo.policy_capacity, site);
	return rt_policy_read_end(c, k, seq) ? p16 : -1;
}

START_TEST(test_policy_into_the_pool)
{
	struct rt_agent a;
	struct rt_agent_config cfg;
	struct rt_pool c;
	struct rt_pool_attach_opts ao = {0};
	char name[64], err[256], status[16384];
	static const uint8_t bad[] = { 0x94, 0x01, 0x07, 0x00, 0x91, 0x92, 0x00, 0x01 }; /* site 0 */
	uint8_t out[256];
	size_t len;

	ag_pool_name(name, sizeof name, "policy");
	ag_config(&cfg, name, 16, S_SIZE, 1.0);
	ag_open(&a, &cfg);
	ao.name = name;
	ck_assert_int_eq(rt_pool_attach(&ao, &c, err, sizeof err), RETRACE_OK);
	ck_assert_int_eq(lookup(&c, site_of(0)), -1); /* nothing yet: record */

	ck_assert_int_eq(send_policy(&a, 5, 100, 1000), 0);
	ck_assert_uint_eq(a.st.policy_updates, 1);
	ck_assert_int_eq(lookup(&c, site_of(0)), 1000);
	ck_assert_int_eq(lookup(&c, site_of(99)), 1099);
	ck_assert_int_eq(lookup(&c, site_of(100)), RT_ADAPT_P16_ALWAYS);

	/* Older: ignored (acked, counted), the table is unchanged. */
	ck_assert_int_eq(send_policy(&a, 4, 10, 7), 0);
	ck_assert_uint_eq(a.st.policy_stale, 1);
	ck_assert_int_eq(lookup(&c, site_of(0)), 1000);

	/* More sites than the table's 4096 slots take: refused, table kept. */
	ck_assert_int_ne(send_policy(&a, 6, 2000, 0), 0);
	ck_assert_uint_eq(a.st.policy_refused, 1);
	ck_assert_int_eq(lookup(&c, site_of(0)), 1000);

	/* A newer one replaces it whole. */
	ck_assert_int_eq(send_policy(&a, 7, 3, 50), 0);
	ck_assert_int_eq(lookup(&c, site_of(2)), 52);
	ck_assert_int_eq(lookup(&c, site_of(50)), RT_ADAPT_P16_ALWAYS);

	/* A malformed POLICY is a bad request and changes nothing. */
	len = rt_agent_handle_request(&a, bad, sizeof bad, out, sizeof out);
	ck_assert_uint_gt(len, 0);
	ck_assert_uint_eq(a.st.bad_requests, 1);
	ck_assert_int_eq(lookup(&c, site_of(2)), 52);

	rt_agent_status(&a, 1, status, sizeof status);
	ck_assert_ptr_nonnull(strstr(status, "\"policy\""));
	ck_assert_ptr_nonnull(strstr(status, "\"sites\":3"));
	rt_pool_detach(&c);
	rt_agent_close(&a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_policy");
	TCase *tc = tcase_create("policy");
	rt_log_level = RT_LOG_ERROR;
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_policy_into_the_pool);
	suite_add_tcase(s, tc);
	return ag_run_suite(s);
}
