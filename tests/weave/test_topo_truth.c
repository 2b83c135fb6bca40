/* test_topo_truth.c — the truth line's optional cause= field (examples/topo/topo_format.h),
 * which retrace-topo --no-context writes for a request that came over a hop without
 * context and bench/weave scores the woven links against.
 *
 * A line with cause= round-trips; a line without it still parses as before (so
 * retrace-truth reads old and new files alike); a malformed cause= is refused.
 */
#include <check.h>
#include <string.h>

#include "common/suite.h"
#include "topo_format.h"

static const char *plain =
	"5c1380087d3933305264c9cf18a1c70e backend back agent=2 node=1 "
	"parent=0000000000000000 spans=6d02b3fd0af77c05 records=2 bytes=1024 trigger=0 "
	"status=ok\n";
static const char *caused =
	"5c1380087d3933305264c9cf18a1c70e backend back agent=2 node=1 "
	"parent=0000000000000000 spans=6d02b3fd0af77c05 records=2 bytes=1024 trigger=0 "
	"status=ok cause=4dd6b64ec40d3aa32af72c5a43e46903:b553b4ed608ecaec\n";

START_TEST(cause_round_trips)
{
	struct topo_truth t;
	char err[256], out[TOPO_TRUTH_LINE_MAX];
	ck_assert_msg(topo_truth_parse(caused, &t, err, sizeof err) == 0, "%s", err);
	ck_assert_uint_eq(t.cause_hi, 0x4dd6b64ec40d3aa3ull);
	ck_assert_uint_eq(t.cause_lo, 0x2af72c5a43e46903ull);
	ck_assert_uint_eq(t.cause_span, 0xb553b4ed608ecaecull);
	ck_assert_uint_eq(topo_truth_format(out, sizeof out, &t), strlen(caused));
	ck_assert_str_eq(out, caused);
}
END_TEST

START_TEST(lines_without_cause_read_as_before)
{
	struct topo_truth t;
	char err[256], out[TOPO_TRUTH_LINE_MAX];
	ck_assert_msg(topo_truth_parse(plain, &t, err, sizeof err) == 0, "%s", err);
	ck_assert_uint_eq(t.cause_hi | t.cause_lo | t.cause_span, 0);
	ck_assert_uint_eq(topo_truth_format(out, sizeof out, &t), strlen(plain));
	ck_assert_str_eq(out, plain);
}
END_TEST

START_TEST(bad_cause_is_refused)
{
	static const char *bad[] = {
		/* no colon */
		"status=ok cause=4dd6b64ec40d3aa32af72c5a43e46903b553b4ed608ecaec0",
		/* zero trace, zero span */
		"status=ok cause=00000000000000000000000000000000:b553b4ed608ecaec",
		"status=ok cause=4dd6b64ec40d3aa32af72c5a43e46903:0000000000000000",
		/* short, another key, something after it */
		"status=ok cause=4dd6b64ec40d3aa32af72c5a43e46903:b553b4ed608eca",
		"status=ok caused=4dd6b64ec40d3aa32af72c5a43e46903:b553b4ed608ecaec",
		"status=ok cause=4dd6b64ec40d3aa32af72c5a43e46903:b553b4ed608ecaec x=1",
	};
	const char *head = "5c1380087d3933305264c9cf18a1c70e backend back agent=2 node=1 "
			   "parent=0000000000000000 spans=6d02b3fd0af77c05 records=2 bytes=1024 "
			   "trigger=0 ";
	struct topo_truth t;
	char line[TOPO_TRUTH_LINE_MAX], err[256];
	size_t i;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(line, sizeof line, "%s%s\n", head, bad[i]);
		ck_assert_msg(topo_truth_parse(line, &t, err, sizeof err) != 0, "accepted: %s", line);
	}
	/* A caused request is a root of its fresh trace: parent must be 0. */
	snprintf(line, sizeof line, "%s", caused);
	memcpy(strstr(line, "parent=") + 7, "0000000000000001", 16);
	ck_assert(topo_truth_parse(line, &t, err, sizeof err) != 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("weave_topo_truth");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, cause_round_trips);
	tcase_add_test(tc, lines_without_cause_read_as_before);
	tcase_add_test(tc, bad_cause_is_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(suite());
}
