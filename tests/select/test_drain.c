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
        ck_assert_uint_gt(id, last_id); /* all distinct: a new cluster each time */
        last_id = id;
        ck_assert_uint_le(rt_sel_drain_cluster_count(d), 1000);
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
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
