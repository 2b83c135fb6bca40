/* test_otlp_export.c — the OTLP/JSON reader reads what `retrace export --format
 * otlp-json` writes: a decoded trace (two resources, a failed span, templated and
 * free-text logs, a log outside any span) through the coordinator's exporter, then
 * back through rt_sel_dataset_read_otlp_json. Template ids must fold to the same
 * value the coordinator's selection uses (rt_sel_fold_template_id of the 64-bit id).
 */
#include "dataset_read.h"
#include "select.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/suite.h"
#include "decode.h"
#include "export.h"

#define TID_CHARGE 0x9e3779b97f4a7c15ull /* a template id with bit 63 set */
#define TID_DIGITS 0x0000123456789012ull /* 16 hex digits that are all decimal digits */

START_TEST(reads_exported_trace)
{
	struct rt_resource res[2] = {
		{ .agent_id = 1, .pid = 10, .service = "frontend", .host = "h1" },
		{ .agent_id = 2, .pid = 20, .service = "payment", .host = "h2" },
	};
	struct rt_log_event pay_logs[2] = {
		{ .time_ns = 1700000000200000000ull, .level = 3, .template_id = TID_CHARGE,
		  .template_text = "card %s declined", .body = "card visa declined" },
		{ .time_ns = 1700000000300000000ull, .level = 2, .template_id = TID_DIGITS,
		  .template_text = "retry %d", .body = "retry 2" },
	};
	struct rt_log_event fe_logs[1] = {
		{ .time_ns = 1700000000050000000ull, .level = 1, .body = "user 42 logged in" },
	};
	struct rt_span spans[2] = {
		{ .trace_hi = 0x1111, .trace_lo = 0x2222, .span_id = 0xaa, .parent = -1,
		  .name = "GET /checkout", .kind = 2, .start_ns = 1700000000000000000ull,
		  .end_ns = 1700000001000000000ull, .status = 1, .status_message = "",
		  .logs = fe_logs, .n_logs = 1, .resource = 0, .agent_id = 1 },
		{ .trace_hi = 0x1111, .trace_lo = 0x2222, .span_id = 0xbb, .parent_id = 0xaa,
		  .parent = 0, .name = "POST /pay", .kind = 2, .start_ns = 1700000000100000000ull,
		  .end_ns = 1700000000900000000ull, .status = 2, .status_code = 402,
		  .status_message = "declined", .logs = pay_logs, .n_logs = 2, .resource = 1,
		  .agent_id = 2 },
	};
	struct rt_decoded_trace t = { .trace_hi = 0x1111, .trace_lo = 0x2222, .spans = spans,
				      .n_spans = 2, .resources = res, .n_resources = 2 };
	struct rt_wire_buf out = { 0 };
	ck_assert_int_eq(rt_export_write(RT_EXPORT_OTLP_JSON, &t, 1, &out), 0);

	char dir[] = "/tmp/rt-otlp-export-XXXXXX", path[128], err[512] = "";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/export.json", dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(out.data, 1, out.len, f), out.len);
	fclose(f);
	rt_wire_buf_free(&out);

	rt_sel_dataset *ds = rt_sel_dataset_read_otlp_json(dir, err, sizeof err);
	ck_assert_msg(ds != NULL, "%s", err);
	ck_assert_uint_eq(rt_sel_dataset_count(ds), 1);
	rt_sel_trace *r = rt_sel_dataset_trace(ds, 0);
	ck_assert_uint_eq(r->id_hi, 0x1111);
	ck_assert_uint_eq(r->id_lo, 0x2222);
	ck_assert_uint_eq(r->n_spans, 2);
	ck_assert_uint_eq(r->n_logs, 3);
	int fe = strcmp(r->spans[0].operation, "GET /checkout") == 0 ? 0 : 1, pay = 1 - fe;
	ck_assert_str_eq(r->spans[fe].service, "frontend");
	ck_assert_str_eq(r->spans[pay].service, "payment");
	ck_assert_int_eq(r->spans[fe].parent, -1);
	ck_assert_int_eq(r->spans[pay].parent, fe);
	ck_assert(r->spans[pay].error && !r->spans[fe].error);
	ck_assert_uint_eq(r->spans[fe].start_ns, 1700000000000000000ull);
	const rt_sel_log *pl = &r->logs[r->spans[pay].first_log];
	ck_assert_uint_eq(r->spans[pay].n_logs, 2);
	ck_assert_uint_eq(pl[0].level, RT_SEL_LOG_ERROR);
	ck_assert_uint_eq(pl[0].template_id, rt_sel_fold_template_id(TID_CHARGE));
	ck_assert_uint_eq(pl[1].level, RT_SEL_LOG_WARN);
	ck_assert_uint_eq(pl[1].template_id, rt_sel_fold_template_id(TID_DIGITS));
	const rt_sel_log *fl = &r->logs[r->spans[fe].first_log];
	ck_assert_uint_eq(fl[0].template_id, 0); /* free text: Drain mines it */
	ck_assert_str_eq(fl[0].text, "user 42 logged in");
	rt_sel_dataset_free(ds);
	unlink(path);
	rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("select_otlp_export");
	TCase *tc = tcase_create("export");
	tcase_add_test(tc, reads_exported_trace);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
