/*
 * tests/daemon/test_figures.c — the Prometheus rendering of daemon/figures.h.
 *
 * A strict reader of the text exposition format 0.0.4 checks every line: a
 * # HELP or # TYPE line, or `name{label="value",...} value` with a valid
 * name, label names, escapes (\\ \" \n only) and UTF-8 label values, a number
 * Prometheus parses; each metric has one TYPE, before its samples, and its
 * samples together; counters end in _total, no other metric does; no series
 * twice. It reads renderings of figures written the way the daemons write them
 * (per-instance sections interleaved with plain ones, hostile strings) and of
 * random figure lists; a few exact lines pin the naming rules.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/suite.h"
#include "daemon/figures.h"
#include "daemon/json.h"

#define MAXF 512

static uint64_t next64(uint64_t *state)
{
	test_pick(state, 2); /* steps the xorshift state */
	return *state;
}

struct family {
	char name[200];
	char type[16];
	int samples;
	int closed; /* another family's line came after its samples */
};

static int is_name(const char *s, size_t n, int colon)
{
	if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || (colon && c == ':')))
			return 0;
	}
	return 1;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Labels at p ({ already consumed) up to }; the end, or NULL with why. */
static const char *read_labels(const char *p, char *why, size_t whylen)
{
	while (*p != '}') {
		const char *n = p;
		while (*p && *p != '=')
			p++;
		if (!*p || !is_name(n, (size_t)(p - n), 0) || (p - n >= 2 && n[0] == '_' && n[1] == '_')) {
			snprintf(why, whylen, "bad label name");
			return NULL;
		}
		if (*++p != '"') {
			snprintf(why, whylen, "label value not quoted");
			return NULL;
		}
		p++;
		while (*p != '"') {
			size_t k;
			if (!*p || *p == '\n') {
				snprintf(why, whylen, "unterminated label value");
				return NULL;
			}
			if (*p == '\\') {
				if (p[1] != '\\' && p[1] != '"' && p[1] != 'n') {
					snprintf(why, whylen, "bad escape \\%c", p[1]);
					return NULL;
				}
				p += 2;
				continue;
			}
			if (!(k = rt_utf8_seq_len((const unsigned char *)p, strlen(p)))) {
				snprintf(why, whylen, "label value is not UTF-8");
				return NULL;
			}
			p += k;
		}
		p++;
		if (*p == ',')
			p++;
		else if (*p != '}') {
			snprintf(why, whylen, "expected , or }");
			return NULL;
		}
	}
	return p + 1;
}

static int is_number(const char *s)
{
	char *end;
	if (!strcmp(s, "NaN") || !strcmp(s, "+Inf") || !strcmp(s, "-Inf"))
		return 1;
	strtod(s, &end);
	return end != s && *end == 0;
}

/* 0 if text is a valid exposition; else -1 with the line and why. */
static int check_exposition(const char *text, char *why, size_t whylen)
{
	static struct family fam[MAXF];
	static char series[4 * MAXF][400];
	int nfam = 0, nseries = 0, cur = -1, lineno = 0;
	char line[4096];
	const char *p = text;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t len;
		char name[200], err[128] = "";
		int f;
		lineno++;
		if (!nl) {
			snprintf(why, whylen, "line %d: no final newline", lineno);
			return -1;
		}
		len = (size_t)(nl - p);
		if (len >= sizeof line) {
			snprintf(why, whylen, "line %d: too long", lineno);
			return -1;
		}
		memcpy(line, p, len);
		line[len] = 0;
		p = nl + 1;
		if (!strncmp(line, "# HELP ", 7) || !strncmp(line, "# TYPE ", 7)) {
			int type = line[2] == 'T';
			const char *n = line + 7, *e = strchr(n, ' ');
			if (!e || !is_name(n, (size_t)(e - n), 1) || (size_t)(e - n) >= sizeof name) {
				snprintf(why, whylen, "line %d: bad metric name: %.200s", lineno, line);
				return -1;
			}
			memcpy(name, n, (size_t)(e - n));
			name[e - n] = 0;
			for (f = 0; f < nfam && strcmp(fam[f].name, name); f++)
				;
			if (f == nfam) {
				ck_assert_int_lt(nfam, MAXF);
				memset(&fam[f], 0, sizeof fam[f]);
				snprintf(fam[f].name, sizeof fam[f].name, "%s", name);
				nfam++;
			}
			if (fam[f].samples || fam[f].closed) {
				snprintf(why, whylen, "line %d: HELP/TYPE after %s's samples", lineno, name);
				return -1;
			}
			if (cur >= 0 && cur != f)
				fam[cur].closed = 1;
			cur = f;
			if (type) {
				if (fam[f].type[0]) {
					snprintf(why, whylen, "line %d: second TYPE for %s", lineno, name);
					return -1;
				}
				snprintf(fam[f].type, sizeof fam[f].type, "%s", e + 1);
				if (strcmp(e + 1, "counter") && strcmp(e + 1, "gauge")) {
					snprintf(why, whylen, "line %d: type %s", lineno, e + 1);
					return -1;
				}
				if ((!strcmp(e + 1, "counter")) != ends_with(name, "_total")) {
					snprintf(why, whylen, "line %d: %s %s: only counters end in _total",
						 lineno, e + 1, name);
					return -1;
				}
			}
			continue;
		}
		if (line[0] == '#') {
			snprintf(why, whylen, "line %d: a comment we do not write: %.200s", lineno, line);
			return -1;
		}
		{
			const char *n = line, *q = line, *end;
			while (*q && *q != '{' && *q != ' ')
				q++;
			if (!is_name(n, (size_t)(q - n), 1) || (size_t)(q - n) >= sizeof name) {
				snprintf(why, whylen, "line %d: bad sample name: %.200s", lineno, line);
				return -1;
			}
			memcpy(name, n, (size_t)(q - n));
			name[q - n] = 0;
			end = q;
			if (*q == '{' && !(end = read_labels(q + 1, err, sizeof err))) {
				snprintf(why, whylen, "line %d: %s: %.*s", lineno, err, 200, line);
				return -1;
			}
			if (*end != ' ' || !is_number(end + 1)) {
				snprintf(why, whylen, "line %d: bad value: %.200s", lineno, line);
				return -1;
			}
			for (f = 0; f < nfam && strcmp(fam[f].name, name); f++)
				;
			if (f == nfam || !fam[f].type[0]) {
				snprintf(why, whylen, "line %d: %s has no TYPE before it", lineno, name);
				return -1;
			}
			if (f != cur || fam[f].closed) {
				snprintf(why, whylen, "line %d: %s's samples are not together", lineno, name);
				return -1;
			}
			fam[f].samples++;
			for (int i = 0; i < nseries; i++)
				if ((size_t)(end - line) == strlen(series[i]) &&
				    !strncmp(series[i], line, (size_t)(end - line))) {
					snprintf(why, whylen, "line %d: series twice: %.200s", lineno, line);
					return -1;
				}
			ck_assert_int_lt(nseries, 4 * MAXF);
			snprintf(series[nseries++], sizeof series[0], "%.*s", (int)(end - line), line);
		}
	}
	for (int f = 0; f < nfam; f++)
		if (!fam[f].samples) {
			snprintf(why, whylen, "%s has a TYPE but no sample", fam[f].name);
			return -1;
		}
	return 0;
}

/* Figures as a daemon writes them: instances interleaved with plain sections. */
static size_t render_daemon_like(char *out, size_t cap, int *cut)
{
	struct rt_figures w;
	size_t n;
	rt_fig_init_prometheus(&w, out, cap, "test");
	rt_fig_section(&w, "agent");
	rt_fig_gauge(&w, "id", 7);
	rt_fig_str(&w, "pool", "evil\"\\\n\xff\x01name");
	rt_fig_time_f(&w, "uptime_s", 1.5, 1);
	rt_fig_section(&w, "buffers");
	rt_fig_gauge(&w, "total", 64);
	rt_fig_u64(&w, "null_buffers", 3);
	rt_fig_section_id(&w, "trigger", "trigger_id", "13");
	rt_fig_u64(&w, "hits", 5);
	rt_fig_gauge(&w, "level", 1);
	rt_fig_str(&w, "name", "payment \"error\"");
	rt_fig_section(&w, "traces");
	rt_fig_time_u64(&w, "event_horizon_us", 1234567, 1e-6);
	rt_fig_f(&w, "nan", NAN);
	rt_fig_f(&w, "inf", INFINITY);
	rt_fig_u64(&w, "big", UINT64_MAX);
	rt_fig_section_id(&w, "trigger", "trigger_id", "other");
	rt_fig_u64(&w, "hits", 9);
	rt_fig_gauge(&w, "level", 0);
	rt_fig_section(&w, "sec.tion-x");
	rt_fig_u64(&w, "odd key!", 1);
	n = rt_fig_end(&w);
	*cut = rt_fig_cut(&w);
	return n;
}

START_TEST(daemon_like_figures)
{
	static char out[1 << 16];
	char why[512];
	int cut;
	size_t n = render_daemon_like(out, sizeof out, &cut);
	ck_assert(!cut);
	ck_assert_uint_eq(n, strlen(out));
	ck_assert_msg(check_exposition(out, why, sizeof why) == 0, "%s\n%s", why, out);
	/* The naming rules, pinned. */
	ck_assert_ptr_nonnull(strstr(out, "\nretrace_test_agent_id 7\n"));
	ck_assert_ptr_nonnull(strstr(out, "\nretrace_test_agent_uptime_seconds 1.5\n"));
	ck_assert_ptr_nonnull(strstr(out, "\nretrace_test_buffers 64\n"));
	ck_assert_ptr_nonnull(strstr(out, "\nretrace_test_buffers_null_buffers_total 3\n"));
	ck_assert_ptr_nonnull(strstr(out, "\n# TYPE retrace_test_buffers_null_buffers_total counter\n"));
	ck_assert_ptr_nonnull(strstr(out, "\n# TYPE retrace_test_buffers gauge\n"));
	ck_assert_ptr_nonnull(strstr(out, "\nretrace_test_trigger_hits_total{trigger_id=\"13\"} 5\n"
					  "retrace_test_trigger_hits_total{trigger_id=\"other\"} 9\n"));
	ck_assert_ptr_nonnull(strstr(out, "\nretrace_test_traces_event_horizon_seconds 1.234567\n"));
	ck_assert_ptr_nonnull(strstr(out, "\nretrace_test_traces_nan NaN\n"));
	ck_assert_ptr_nonnull(strstr(out, "\nretrace_test_traces_inf +Inf\n"));
	ck_assert_ptr_nonnull(strstr(out, "\nretrace_test_traces_big_total 18446744073709551615\n"));
	ck_assert_ptr_nonnull(strstr(out, "\nretrace_test_sec_tion_x_odd_key__total 1\n"));
	ck_assert_ptr_nonnull(
		strstr(out, "\nretrace_test_info{agent_pool=\"evil\\\"\\\\\\n\xEF\xBF\xBD\xEF\xBF\xBDname\"} 1\n"));
	ck_assert_ptr_nonnull(
		strstr(out, "\nretrace_test_trigger_info{trigger_id=\"13\",name=\"payment \\\"error\\\"\"} 1\n"));
}
END_TEST

/* The text and JSON forms do not change: an instance section is "base.id". */
START_TEST(text_form_unchanged)
{
	char out[512];
	struct rt_figures w;
	rt_fig_init(&w, out, sizeof out, 1);
	rt_fig_section_id(&w, "trigger", "trigger_id", "13");
	rt_fig_u64(&w, "hits", 5);
	rt_fig_gauge(&w, "level", 2);
	rt_fig_time_u64(&w, "event_horizon_us", 1234567, 1e-6);
	rt_fig_time_f(&w, "uptime_s", 1.5, 1);
	rt_fig_end(&w);
	ck_assert_str_eq(out, "{\"trigger.13\":{\"hits\":5,\"level\":2,\"event_horizon_us\":1234567,"
			      "\"uptime_s\":1.500}}");
}
END_TEST

/* Too little room: cut, and said so (the endpoint renders again with more). */
START_TEST(cut_is_reported)
{
	char small[300];
	static char big[1 << 16];
	int cut = 0;
	size_t n = render_daemon_like(small, sizeof small, &cut);
	ck_assert(cut);
	ck_assert_uint_eq(n, strlen(small));
	ck_assert_uint_lt(n, sizeof small);
	render_daemon_like(big, sizeof big, &cut);
	ck_assert(!cut);
}
END_TEST

/* Random figure lists with random names and strings: always a valid exposition. */
START_TEST(random_figures)
{
	static char out[1 << 20];
	uint64_t r = 0x5eed0f16u;
	char why[512];
	for (int round = 0; round < 300; round++) {
		struct rt_figures w;
		int cut;
		rt_fig_init_prometheus(&w, out, sizeof out, "rnd");
		for (int s = 0; s < 8; s++) {
			char sec[8], id[12], key[24], str[40];
			snprintf(sec, sizeof sec, "s%u", (unsigned)(next64(&r) % 4));
			if (next64(&r) % 2) { /* an instance: listed once, as the daemons do */
				snprintf(id, sizeof id, "%d", s);
				rt_fig_section_id(&w, sec, "inst_id", id);
			} else {
				rt_fig_section(&w, sec); /* may repeat: its metrics then repeat */
				snprintf(sec, sizeof sec, "u%d", s); /* so make it unique */
				rt_fig_section(&w, sec);
			}
			for (int k = 0; k < 6; k++) {
				unsigned kind = (unsigned)(next64(&r) % 5);
				snprintf(key, sizeof key, "k%d_%u", k, kind);
				switch (kind) {
				case 0: rt_fig_u64(&w, key, next64(&r)); break;
				case 1: rt_fig_gauge(&w, key, next64(&r) % 1000); break;
				case 2: rt_fig_f(&w, key, (double)(next64(&r) % 100000) / 7.0); break;
				case 3: rt_fig_time_u64(&w, key, next64(&r) % 1000000, 1e-6); break;
				default:
					for (size_t b = 0; b + 1 < sizeof str; b++)
						str[b] = (char)(1 + next64(&r) % 255);
					str[sizeof str - 1] = 0;
					rt_fig_str(&w, key, str);
				}
			}
		}
		rt_fig_end(&w);
		cut = rt_fig_cut(&w);
		ck_assert(!cut);
		ck_assert_msg(check_exposition(out, why, sizeof why) == 0, "round %d: %s", round, why);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("daemon_figures");
	TCase *t = tcase_create("prometheus");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, daemon_like_figures);
	tcase_add_test(t, text_form_unchanged);
	tcase_add_test(t, cut_is_reported);
	tcase_add_test(t, random_figures);
	suite_add_tcase(s, t);
	return test_run_suite(s);
}
