/* test_drain.c — Drain template mining: known templates, stable ids, bounded memory. */
#include "select.h"

#include <check.h>

#include "common/suite.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(masking_replaces_variable_runs)
{
    char out[256];
    rt_sel_mask_line("user 42 id=0x1f3a at 12:30:01.5 uuid 3f2a-bc path /var/log2/x", out,
                     sizeof out);
    ck_assert_str_eq(out, "user <*> id=<*> at <*>:<*>:<*>.<*> uuid <*>-bc path /var/<*>/x");
    rt_sel_mask_line("no variables here", out, sizeof out);
    ck_assert_str_eq(out, "no variables here");
}
END_TEST

typedef struct known {
    const char *line;
    int cls;              /* lines of the same class must share one id */
    const char *template; /* expected final template of the class */
} known;

static const known TABLE[] = {
    {"Connected to 10.0.0.1:8080 in 35 ms", 0, "Connected to <*>.<*>.<*>.<*>:<*> in <*> ms"},
    {"Connected to 192.168.1.17:443 in 120 ms", 0, NULL},
    {"User alice logged in from /home/alice/web", 1, "User <*> logged in from <*>"},
    {"User bob logged in from /srv/bob/mobile", 1, NULL},
    {"User carol logged in from /home/carol/web", 1, NULL},
    {"Order 5f3a9c2e-11aa-4b7e-9d10-0c0ffee00001 created for account 981", 2,
     "Order <*>-<*>-<*>-<*>-<*> created for account <*>"},
    {"Order 0b9d8e7f-22bb-4c8d-8e21-1d1ffee00002 created for account 7", 2, NULL},
    {"Payment failed: insufficient funds", 3, "Payment failed: insufficient funds"},
    {"Disk full on volume data", 4, "Disk full on volume data"},
    {"GET /api/v1/orders/777 returned 200", 5, "GET /api/<*>/orders/<*> returned <*>"},
    {"GET /api/v1/orders/12 returned 404", 5, NULL},
};
#define NKNOWN (sizeof TABLE / sizeof TABLE[0])

START_TEST(known_templates)
{
    rt_sel_drain_config cfg;
    rt_sel_drain_config_default(&cfg);
    ck_assert_uint_eq(cfg.depth, 4);
    ck_assert_double_eq(cfg.sim_threshold, 0.4);
    ck_assert_uint_eq(cfg.max_children, 100);
    rt_sel_drain *d = rt_sel_drain_create(&cfg);
    uint32_t ids[NKNOWN];
    for (size_t i = 0; i < NKNOWN; i++) {
        ids[i] = rt_sel_drain_add(d, TABLE[i].line);
        ck_assert(ids[i] & RT_SEL_MINED_TEMPLATE_BIT);
    }
    for (size_t i = 0; i < NKNOWN; i++)
        for (size_t j = 0; j < NKNOWN; j++) {
            if (TABLE[i].cls == TABLE[j].cls)
                ck_assert_uint_eq(ids[i], ids[j]);
            else
                ck_assert_uint_ne(ids[i], ids[j]);
        }
    char buf[256];
    for (size_t i = 0; i < NKNOWN; i++) {
        if (!TABLE[i].template)
            continue;
        ck_assert(rt_sel_drain_template(d, ids[i], buf, sizeof buf));
        ck_assert_str_eq(buf, TABLE[i].template);
    }
    /* ids are stable: lines seen again map to the same id */
    for (size_t i = 0; i < NKNOWN; i++)
        ck_assert_uint_eq(rt_sel_drain_add(d, TABLE[i].line), ids[i]);
    ck_assert_uint_eq(rt_sel_drain_cluster_count(d), 6);
    rt_sel_drain_destroy(d);
}
END_TEST

START_TEST(below_threshold_makes_new_cluster)
{
    rt_sel_drain *d = rt_sel_drain_create(NULL);
    /* 5 tokens, 1 shared with the first: similarity 0.2 < 0.4 */
    uint32_t a = rt_sel_drain_add(d, "cache miss for key alpha");
    uint32_t b = rt_sel_drain_add(d, "cache flushed by admin request");
    ck_assert_uint_ne(a, b);
    /* 5 tokens, 2 shared (cache, for): 0.4 reaches the threshold */
    uint32_t c = rt_sel_drain_add(d, "cache hit for some beta");
    ck_assert_uint_eq(c, a);
    rt_sel_drain_destroy(d);
}
END_TEST

static void random_word(char *w, unsigned *seed)
{
    for (int i = 0; i < 7; i++)
        w[i] = (char)('a' + rand_r(seed) % 26);
    w[7] = '\0';
}

START_TEST(memory_bounded_with_a_million_distinct_lines)
{
    rt_sel_drain_config cfg;
    rt_sel_drain_config_default(&cfg);
    cfg.max_clusters = 1000;
    rt_sel_drain *d = rt_sel_drain_create(&cfg);
    unsigned seed = 7;
    char line[40 * 8 + 1];
    size_t bytes_at_full = 0, max_bytes = 0;
    uint32_t last_id = 0;
    for (int i = 0; i < 1000000; i++) {
        int ntok = 1 + i % 40; /* spread over length nodes */
        char *p = line;
        for (int t = 0; t < ntok; t++) {
            random_word(p, &seed);
            p[7] = ' ';
            p += 8;
        }
        p[-1] = '\0';
        uint32_t id = rt_sel_drain_add(d, line);
        /* Checked without ck_assert_*: it reports every passing check to the
         * runner, two million writes that outlasted the timeout under load. */
        if (id <= last_id) /* all distinct: a new cluster each time */
            ck_abort_msg("line %d: id %u after %u", i, id, last_id);
        last_id = id;
        if (rt_sel_drain_cluster_count(d) > 1000)
            ck_abort_msg("line %d: %zu clusters", i, (size_t)rt_sel_drain_cluster_count(d));
        if (i == 9999)
            bytes_at_full = rt_sel_drain_bytes(d);
        if (rt_sel_drain_bytes(d) > max_bytes)
            max_bytes = rt_sel_drain_bytes(d);
    }
    ck_assert_uint_eq(rt_sel_drain_cluster_count(d), 1000);
    ck_assert_uint_gt(bytes_at_full, 0);
    /* the tree and the pool do not grow after the pool is full */
    ck_assert_uint_le(max_bytes, bytes_at_full * 3 / 2);
    ck_assert_uint_le(max_bytes, 4u << 20);
    /* evicted ids are gone, the newest is alive */
    char buf[512];
    ck_assert(!rt_sel_drain_template(d, RT_SEL_MINED_TEMPLATE_BIT | 1, buf, sizeof buf));
    ck_assert(rt_sel_drain_template(d, last_id, buf, sizeof buf));
    rt_sel_drain_destroy(d);
}
END_TEST

START_TEST(lru_keeps_recently_used_clusters)
{
    rt_sel_drain_config cfg;
    rt_sel_drain_config_default(&cfg);
    cfg.max_clusters = 3;
    rt_sel_drain *d = rt_sel_drain_create(&cfg);
    uint32_t a = rt_sel_drain_add(d, "alpha one two");
    uint32_t b = rt_sel_drain_add(d, "bravo three four");
    uint32_t c = rt_sel_drain_add(d, "charlie five six");
    ck_assert_uint_eq(rt_sel_drain_add(d, "alpha one two"), a); /* a is now most recent */
    uint32_t e = rt_sel_drain_add(d, "delta seven eight");    /* evicts b */
    char buf[64];
    ck_assert(rt_sel_drain_template(d, a, buf, sizeof buf));
    ck_assert(!rt_sel_drain_template(d, b, buf, sizeof buf));
    ck_assert(rt_sel_drain_template(d, c, buf, sizeof buf));
    ck_assert(rt_sel_drain_template(d, e, buf, sizeof buf));
    ck_assert_uint_ne(rt_sel_drain_add(d, "bravo three four"), b); /* re-mined, new id */
    rt_sel_drain_destroy(d);
}
END_TEST

/* ---- caches in front of the tree: same ids as mining the masked text itself ---- */

static unsigned rnd(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (*seed >> 16) & 0x7fff;
}

/* A random run of n bytes from an alphabet. */
static char *put_run(char *p, unsigned n, const char *alphabet, unsigned *seed)
{
    size_t k = strlen(alphabet);
    for (unsigned i = 0; i < n; i++)
        *p++ = alphabet[rnd(seed) % k];
    return p;
}

/* One line of a shape: every line shares a long head and tail (so exemplar buckets,
 * keyed by length and both ends, collide across shapes); the shape fixes the tokens
 * in between, and about a third of them are variable: a run with digits (hex ids,
 * numbers, letters then a digit) or a letters-only run of the same length, which
 * makes the slot a wildcard. Runs of up to 90 bytes cross the 16/32/64-byte block
 * edges at every offset; the longest shapes pass 2 KiB and 128 tokens. */
static void shape_line(char *line, unsigned shape, unsigned *vseed)
{
    char *p = line;
    p += sprintf(p, "c.s.ServiceImpl#%u TraceID: ", 100 + shape % 3);
    p = put_run(p, 32, "0123456789abcdef", vseed);
    p += sprintf(p, " SpanID: [");
    unsigned tseed = shape * 7919u + 1;
    unsigned ntok = shape < 30 ? 1 + shape % 20 : 100 + (shape % 10) * 40;
    for (unsigned t = 0; t < ntok; t++) {
        unsigned len = 1 + rnd(&tseed) % 90, kind = rnd(&tseed) % 9;
        if (kind < 3) { /* variable slot */
            unsigned v = rnd(vseed) % 4;
            if (v == 0)
                p = put_run(p, len, "0123456789abcdef", vseed), p[-1] = '7';
            else if (v == 1)
                p = put_run(p, len, "0123456789", vseed);
            else if (v == 2)
                p = put_run(p, len, "ab", vseed), p[-1] = '5';
            else
                p = put_run(p, len, "abcdef", vseed); /* no digit: a word */
        } else if (kind < 6) {
            unsigned s2 = tseed;
            p = put_run(p, len, "abcdefghij_", &s2);
        } else if (kind < 8) {
            p += sprintf(p, "k%u=(%u,x)", rnd(&tseed) % 7, rnd(&tseed) % 1000);
        } else {
            *p++ = ',';
        }
        unsigned sp = rnd(&tseed) % 8;
        *p++ = sp == 0 ? '\t' : ' ';
        if (sp == 1)
            *p++ = ' ';
    }
    p += sprintf(p, "] status=ok, everything went fine in the end");
}

/* Both miners hold the same clusters with the same templates (ids up to max_id);
 * then they are destroyed. */
static void assert_same_templates_and_destroy(rt_sel_drain *a, rt_sel_drain *b, uint32_t max_id)
{
    static char ta[65536], tb[65536];
    ck_assert_uint_eq(rt_sel_drain_cluster_count(a), rt_sel_drain_cluster_count(b));
    for (uint32_t id = RT_SEL_MINED_TEMPLATE_BIT | 1; id <= max_id; id++) {
        ck_assert(rt_sel_drain_template(a, id, ta, sizeof ta));
        ck_assert(rt_sel_drain_template(b, id, tb, sizeof tb));
        ck_assert_str_eq(ta, tb);
    }
    rt_sel_drain_destroy(a);
    rt_sel_drain_destroy(b);
}

START_TEST(caches_give_the_ids_of_the_masked_text)
{
    /* Each line goes to one miner raw and to another already masked (masking is then
     * the identity), so the second one's caches only ever see masked text: both must
     * give the same ids and end with the same templates. A cache hit that mixed up
     * two shapes, or a digit run with a word, would show. */
    rt_sel_drain *raw = rt_sel_drain_create(NULL);
    rt_sel_drain *ref = rt_sel_drain_create(NULL);
    ck_assert_ptr_nonnull(raw);
    ck_assert_ptr_nonnull(ref);
    static char line[65536], masked[3 * sizeof line]; /* ≤ 460 tokens of ≤ 92 bytes */
    unsigned seed = 11;
    uint32_t max_id = 0;
    for (int i = 0; i < 20000; i++) {
        unsigned shape = rnd(&seed) % 40;
        shape_line(line, shape, &seed);
        rt_sel_mask_line(line, masked, sizeof masked);
        uint32_t a = rt_sel_drain_add(raw, line);
        uint32_t b = rt_sel_drain_add(ref, masked);
        if (a != b)
            ck_abort_msg("line %d: id %x vs %x for \"%.80s\"", i, a, b, line);
        max_id = a > max_id ? a : max_id;
    }
    assert_same_templates_and_destroy(raw, ref, max_id);
}
END_TEST

START_TEST(known_length_gives_the_ids_of_measured_lines)
{
    /* rt_sel_drain_add_len skips measuring the line: given its length it must take
     * the same cache paths to the same ids as a miner that measures every line (the
     * shapes run from a few bytes past 2 KiB, the exemplar cache's limit). The lines
     * sit in a buffer whose bytes past the NUL are not the line's, and some differ
     * from others only in their last byte, so a length one byte short (or read from
     * anywhere but len) matches a line to another's cluster. */
    rt_sel_drain *measured = rt_sel_drain_create(NULL);
    rt_sel_drain *known = rt_sel_drain_create(NULL);
    ck_assert_ptr_nonnull(measured);
    ck_assert_ptr_nonnull(known);
    static char line[65536];
    unsigned seed = 29;
    uint32_t max_id = 0;
    size_t hits_past_limit = 0;
    for (int i = 0; i < 6000; i++) { /* the ASan build runs it under ctest's 300 s */
        memset(line, i % 2 ? '7' : 'x', 4096);
        unsigned shape = rnd(&seed) % 40;
        shape_line(line, shape, &seed);
        /* one more token, or two spaces that add none: read one byte short, both
         * would be the same line */
        strcat(line, i % 3 == 0 ? "" : i % 3 == 1 ? " x" : "  ");
        size_t len = strlen(line);
        hits_past_limit += len >= 2048;
        uint32_t a = rt_sel_drain_add(measured, line);
        uint32_t b = rt_sel_drain_add_len(known, line, len);
        if (a != b)
            ck_abort_msg("line %d (%zu bytes): id %x vs %x", i, len, a, b);
        max_id = a > max_id ? a : max_id;
    }
    ck_assert_uint_gt(hits_past_limit, 0);
    assert_same_templates_and_destroy(measured, known, max_id);
}
END_TEST

START_TEST(caches_tell_apart_runs_with_and_without_digits)
{
    /* Same length, same ends: only a run in the middle differs, digit or not. */
    rt_sel_drain *d = rt_sel_drain_create(NULL);
    char a[512], b[512], buf[1024];
    for (unsigned off = 41; off < 200; off += 7) {
        if (off % 10 == 0)
            continue; /* a space: the digit would join two tokens */
        memset(a, 'q', sizeof a);
        for (unsigned i = 0; i < 300; i += 10)
            a[i] = ' ';
        a[300] = '\0';
        memcpy(b, a, sizeof b);
        b[off] = '7'; /* a digit inside one run of b */
        uint32_t ia = rt_sel_drain_add(d, a);
        uint32_t ib = rt_sel_drain_add(d, b); /* same cluster, which must generalise */
        ck_assert_uint_eq(ia, ib);
        ck_assert(rt_sel_drain_template(d, ib, buf, sizeof buf));
        ck_assert_ptr_nonnull(strstr(buf, "<*>"));
        ck_assert_uint_eq(rt_sel_drain_add(d, a), ia);
        rt_sel_drain_destroy(d);
        d = rt_sel_drain_create(NULL);
    }
    rt_sel_drain_destroy(d);
}
END_TEST

START_TEST(predictor_guesses_from_the_head_only)
{
    /* The exemplar predictor guesses from a line's length and first 16 raw bytes.
     * These lines share both but come in three shapes (a token more, a run holding a
     * digit where the others have a word) in turn, so the guess names another shape's
     * exemplar again and again: every line must still get the id a miner fed the
     * masked lines gives (their heads differ, so its guesses do not mislead it). */
    rt_sel_drain *raw = rt_sel_drain_create(NULL);
    rt_sel_drain *ref = rt_sel_drain_create(NULL);
    ck_assert_ptr_nonnull(raw);
    ck_assert_ptr_nonnull(ref);
    static const char *const fmt[3] = {
        "head-0123456789 user alpha logged in from 10.0.%u.%u port %u",
        "head-0123456789 user alpha logged-in from 10.0.%u.%u port %u",
        "head-0123456789 user al9ha logged in from 10.0.%u.%u port %u",
    };
    char line[128], masked[384];
    uint32_t max_id = 0, first[3] = {0, 0, 0};
    for (unsigned i = 0; i < 3000; i++) {
        unsigned k = i % 3 == 2 ? (i / 3) % 3 : i % 3; /* every order of the shapes */
        snprintf(line, sizeof line, fmt[k], i % 10, (i / 10) % 10, 1000 + i % 9000);
        rt_sel_mask_line(line, masked, sizeof masked);
        uint32_t a = rt_sel_drain_add_len(raw, line, strlen(line));
        uint32_t b = rt_sel_drain_add(ref, masked);
        if (a != b)
            ck_abort_msg("line %u: id %x vs %x for \"%s\"", i, a, b, line);
        if (i >= 30 && first[k] && a != first[k]) /* the templates settle at once */
            ck_abort_msg("line %u: shape %u went from id %x to %x", i, k, first[k], a);
        first[k] = a;
        max_id = a > max_id ? a : max_id;
    }
    ck_assert_uint_ne(first[0], first[1]); /* a token more: another cluster */
    assert_same_templates_and_destroy(raw, ref, max_id);
}
END_TEST

#ifdef EXPECT_DRAIN_KERNELS
/* The variant builds (tests/select/CMakeLists.txt) really run the kernels they name. */
START_TEST(runs_the_expected_kernels)
{
    rt_sel_drain *d = rt_sel_drain_create(NULL);
    ck_assert_str_eq(rt_sel_drain_kernels(d), EXPECT_DRAIN_KERNELS);
    rt_sel_drain_destroy(d);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("select_drain");
    TCase *tc = tcase_create("drain");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, masking_replaces_variable_runs);
    tcase_add_test(tc, known_templates);
    tcase_add_test(tc, below_threshold_makes_new_cluster);
    tcase_add_test(tc, memory_bounded_with_a_million_distinct_lines);
    tcase_add_test(tc, lru_keeps_recently_used_clusters);
    tcase_add_test(tc, caches_give_the_ids_of_the_masked_text);
    tcase_add_test(tc, caches_tell_apart_runs_with_and_without_digits);
    tcase_add_test(tc, known_length_gives_the_ids_of_measured_lines);
    tcase_add_test(tc, predictor_guesses_from_the_head_only);
#ifdef EXPECT_DRAIN_KERNELS
    tcase_add_test(tc, runs_the_expected_kernels);
#endif
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
