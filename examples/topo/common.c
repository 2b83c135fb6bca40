/*
 * examples/topo/common.c — helpers shared by the retrace-topo subcommands:
 * clocks, a per-thread random generator, strict number parsing, and the small
 * files through which services publish their addresses.
 *
 * Files are written to a temporary name and renamed, so a reader polling for
 * one sees either nothing or the whole content.
 */
#include "topo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

uint64_t topo_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void topo_sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
			      .tv_nsec = (long)(ns % 1000000000ull)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static __thread uint64_t rng_state;
static __thread int rng_seeded;

uint64_t topo_rand64(void)
{
	if (!rng_seeded) {
		uint64_t seed = 0;
		if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
			seed = topo_now_ns() ^ (uint64_t)(uintptr_t)&seed;
		rng_state = seed;
		rng_seeded = 1;
	}
	rng_state += 0x9E3779B97F4A7C15ull;
	return topo_mix64(rng_state);
}

int topo_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long v;
	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int topo_parse_double(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;
	if (!s || !*s || *s == ' ')
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !(v >= lo && v <= hi))
		return -1;
	*out = v;
	return 0;
}

int topo_write_file(const char *path, const char *text)
{
	char tmp[4200];
	FILE *f;
	if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
		return -1;
	if (!(f = fopen(tmp, "w")))
		return -1;
	if (fputs(text, f) < 0) {
		fclose(f);
		unlink(tmp);
		return -1;
	}
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

int topo_read_line(const char *path, char *out, size_t n)
{
	FILE *f = fopen(path, "r");
	size_t len;
	if (!f)
		return -1;
	if (!fgets(out, (int)n, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	len = strcspn(out, "\n");
	out[len] = '\0';
	return len ? 0 : -1;
}

void topo_url_path(char *out, size_t n, const char *dir, const char *service)
{
	snprintf(out, n, "%s/%s.url", dir, service);
}
