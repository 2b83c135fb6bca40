/*
 * daemon/json.h — the one JSON string writer, attacked with arbitrary bytes.
 *
 * random_bytes: 30 000 random byte strings (every byte value but NUL, biased
 *   toward the hard cases: quotes, backslashes, control bytes, UTF-8 lead and
 *   continuation bytes, overlongs, surrogates, past U+10FFFF, truncations) are
 *   written as a JSON string; jansson must parse every output as valid JSON
 *   (it also rejects invalid UTF-8), and when the input was well-formed UTF-8
 *   the parsed string must equal the input byte for byte.
 * known: the escapes and the U+FFFD replacement, exactly; NULL is "".
 * figures: a status figure with hostile bytes renders as valid JSON.
 */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/suite.h"
#include "daemon/figures.h"
#include "daemon/json.h"

struct out {
	char buf[4096];
	size_t len;
};

static void sink(void *ctx, const char *p, size_t n)
{
	struct out *o = ctx;
	if (o->len + n > sizeof o->buf - 1)
		ck_abort_msg("output longer than %zu bytes", sizeof o->buf - 1);
	memcpy(o->buf + o->len, p, n);
	o->len += n;
	o->buf[o->len] = 0;
}

static const char *as_json(struct out *o, const char *s)
{
	o->len = 0;
	o->buf[0] = 0;
	rt_json_put_string(sink, o, s);
	return o->buf;
}

static int well_formed(const unsigned char *p, size_t n)
{
	size_t i = 0;
	while (i < n) {
		size_t k = rt_utf8_seq_len(p + i, n - i);
		if (!k)
			return 0;
		i += k;
	}
	return 1;
}

static uint64_t rng = 0x243F6A8885A308D3ull;
static unsigned pick(unsigned n)
{
	return test_pick(&rng, n);
}

START_TEST(test_random_bytes)
{
	static const unsigned char hard[] = { '"', '\\', '/', 0x01, 0x08, 0x0a, 0x1f, 0x7f, 0x80,
					      0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0,
					      0xf4, 0xf5, 0xff, 0xa0, 0x9f, 0x8f, 0x90 };
	unsigned round, valid_inputs = 0;
	struct out o;
	for (round = 0; round < 30000; round++) {
		unsigned char in[64];
		size_t n = pick(40), i;
		json_error_t err;
		json_t *j;
		const char *text;
		for (i = 0; i < n; i++) {
			unsigned r = pick(4);
			in[i] = r == 0 ? hard[pick(sizeof hard)] : r == 1 ? (unsigned char)(1 + pick(255))
								   : (unsigned char)('a' + pick(26));
		}
		in[n] = 0;
		text = as_json(&o, (const char *)in);
		j = json_loadb(text, o.len, JSON_DECODE_ANY, &err);
		if (!j || !json_is_string(j))
			ck_abort_msg("input %zu bytes: output is not a JSON string: %s (%s)", n,
				     err.text, text);
		if (well_formed(in, n)) {
			valid_inputs++;
			if (json_string_length(j) != n || memcmp(json_string_value(j), in, n) != 0)
				ck_abort_msg("well-formed input of %zu bytes did not read back", n);
		}
		json_decref(j);
	}
	ck_assert_uint_gt(valid_inputs, 1000);
}
END_TEST

START_TEST(test_known)
{
	struct out o;
	ck_assert_str_eq(as_json(&o, NULL), "\"\"");
	ck_assert_str_eq(as_json(&o, "a\"b\\c"), "\"a\\\"b\\\\c\"");
	ck_assert_str_eq(as_json(&o, "\n\t\r\b\f\x01"), "\"\\n\\t\\r\\b\\f\\u0001\"");
	ck_assert_str_eq(as_json(&o, "caf\xc3\xa9"), "\"caf\xc3\xa9\"");
	ck_assert_str_eq(as_json(&o, "x\xff y"), "\"x\xEF\xBF\xBD y\"");          /* stray byte */
	ck_assert_str_eq(as_json(&o, "\xc0\xaf"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\""); /* overlong */
	ck_assert_str_eq(as_json(&o, "\xed\xa0\x80"),
			 "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\""); /* a surrogate */
	ck_assert_str_eq(as_json(&o, "\xe2\x82"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\""); /* truncated */
}
END_TEST

START_TEST(test_figures)
{
	char buf[512];
	struct rt_figures w;
	json_error_t err;
	json_t *j;
	rt_fig_init(&w, buf, sizeof buf, 1);
	rt_fig_section(&w, "agent");
	rt_fig_str(&w, "host", "evil\"\xff\x01name");
	rt_fig_u64(&w, "n", 7);
	rt_fig_end(&w);
	j = json_loads(buf, 0, &err);
	ck_assert_msg(j != NULL, "figures are not JSON: %s: %s", err.text, buf);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "agent"), "host")),
			 "evil\"\xEF\xBF\xBD\x01name");
	json_decref(j);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("daemon_json");
	TCase *t = tcase_create("json");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_known);
	tcase_add_test(t, test_random_bytes);
	tcase_add_test(t, test_figures);
	suite_add_tcase(s, t);
	return test_run_suite(s);
}
