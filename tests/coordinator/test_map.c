/*
 * tests/coordinator/test_map.c — the coordinator's trace map (coordinator/map.c):
 * put, get, delete with backward shifts against a model, and trace ids chosen
 * to share a slot of an unseeded multiply-shift spreading out in a seeded map
 * (run 200 times, 200 seeds: the bound must hold for every seed).
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/suite.h"
#include "coord_internal.h"

/* The longest distance of an entry from its home slot: the probe length. */
static uint32_t longest_probe(const struct coord_map *m)
{
	uint32_t i, longest = 0;
	for (i = 0; i <= m->mask; i++)
		if (m->keys[i]) {
			uint32_t home = coord_map_home(m, m->keys[i]);
			uint32_t d = (i - home) & m->mask;
			if (d > longest)
				longest = d;
		}
	return longest;
}

START_TEST(chosen_ids_do_not_form_one_run)
{
	enum { SLOTS = 4096, N = 1000, MAPS = 200 };
	struct coord_map m;
	uint64_t key = 1, val = 0;
	static uint64_t chosen[N];
	uint32_t n = 0;
	while (n < N) { /* slot 0 under the old fixed multiplier */
		if (((uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (SLOTS - 1)) == 0)
			chosen[n++] = key;
		key++;
	}
	/* every map draws its own seed: the bound holds for each of them */
	for (int k = 0; k < MAPS; k++) {
		ck_assert_int_eq(coord_map_init(&m, SLOTS), 0);
		for (n = 0; n < N; n++)
			ck_assert_int_eq(coord_map_put(&m, chosen[n], chosen[n] * 3), 0);
		ck_assert_msg(longest_probe(&m) < 64, "map %d: probe of %u slots", k,
			      longest_probe(&m));
		for (n = 0; n < N; n++) {
			ck_assert(coord_map_get(&m, chosen[n], &val));
			ck_assert_uint_eq(val, chosen[n] * 3);
		}
		coord_map_free(&m);
	}
}
END_TEST

START_TEST(matches_a_model)
{
	enum { SLOTS = 256, KEYS = 200, OPS = 200000 };
	struct coord_map m;
	uint64_t model[KEYS + 1] = { 0 }, v;
	uint32_t i, present = 0;
	srand(7);
	ck_assert_int_eq(coord_map_init(&m, SLOTS), 0);
	for (i = 0; i < OPS; i++) {
		uint64_t k = 1 + (uint64_t)(rand() % KEYS);
		if (rand() % 3 == 0) {
			coord_map_del(&m, k);
			present -= model[k] != 0;
			model[k] = 0;
		} else {
			int rc = coord_map_put(&m, k, i + 1);
			if (rc == 0) {
				present += model[k] == 0;
				model[k] = i + 1;
			} else {
				ck_assert_uint_eq(model[k], 0); /* full: only a new key is refused */
				ck_assert_uint_ge((uint64_t)(present + 1) * 8, (uint64_t)SLOTS * 7);
			}
		}
		if (i % 1000 == 0)
			for (k = 1; k <= KEYS; k++) {
				int got = coord_map_get(&m, k, &v);
				if (got != (model[k] != 0) || (got && v != model[k]))
					ck_abort_msg("key %llu: map %d/%llu, model %llu",
						     (unsigned long long)k, got,
						     (unsigned long long)v,
						     (unsigned long long)model[k]);
			}
	}
	ck_assert_uint_eq(m.count, present);
	coord_map_free(&m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("coordinator_map");
	TCase *tc = tcase_create("map");
	tcase_add_test(tc, chosen_ids_do_not_form_one_run);
	tcase_add_test(tc, matches_a_model);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
