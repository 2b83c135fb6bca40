/*
 * examples/shop/common.c — helpers shared by `serve` and `load`: clocks, a
 * per-thread random generator, hex ids, strict flag parsing, and a persistent
 * nng HTTP client connection.
 *
 * The connection wrapper drives nng's asynchronous client API synchronously
 * (one aio per connection, nng_aio_wait): the callers are our own worker or
 * driver threads, never nng's callback threads.
 */
#include "shop.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

uint64_t shop_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void shop_sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

uint64_t shop_mix64(uint64_t z)
{
	z += 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static __thread uint64_t rng_state;
static __thread int rng_seeded;

uint64_t shop_rand64(void)
{
	if (!rng_seeded) {
		uint64_t seed = 0;
		if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
			seed = shop_now_ns() ^ (uint64_t)(uintptr_t)&seed;
		rng_state = seed;
		rng_seeded = 1;
	}
	rng_state += 0x9E3779B97F4A7C15ull;
	return shop_mix64(rng_state);
}

double shop_rand_unit(void)
{
	return (double)(shop_rand64() >> 11) * (1.0 / 9007199254740992.0);
}

void shop_trace_hex(retrace_trace_id id, char out[33])
{
	snprintf(out, 33, "%016llx%016llx", (unsigned long long)id.hi,
		 (unsigned long long)id.lo);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int shop_parse_trace_hex(const char *s, retrace_trace_id *out)
{
	uint64_t v[2] = {0, 0};
	int i;
	for (i = 0; i < 32; i++) {
		int d = hexval(s[i]);
		if (d < 0)
			return -1;
		v[i / 16] = (v[i / 16] << 4) | (uint64_t)d;
	}
	out->hi = v[0];
	out->lo = v[1];
	return 0;
}

int shop_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long v;
	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int shop_parse_double(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;
	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !(v >= lo && v <= hi))
		return -1;
	*out = v;
	return 0;
}

int shop_parse_prob(const char *s, double *out)
{
	return shop_parse_double(s, 0.0, 1.0, out);
}

int shop_buf_reserve(struct shop_buf *b, size_t more)
{
	size_t want = b->len + more, cap = b->cap ? b->cap : 4096;
	char *p;
	if (want <= b->cap)
		return 0;
	while (cap < want)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

void shop_buf_free(struct shop_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* ------------------------------------------------------- HTTP client ---- */

int shop_conn_init(struct shop_conn *c, nng_http_client *client, int timeout_ms)
{
	memset(c, 0, sizeof *c);
	c->client = client;
	c->timeout_ms = timeout_ms;
	return nng_aio_alloc(&c->aio, NULL, NULL);
}

static void conn_drop(struct shop_conn *c)
{
	if (c->conn) {
		nng_http_conn_close(c->conn); /* also frees it */
		c->conn = NULL;
	}
}

void shop_conn_fini(struct shop_conn *c)
{
	conn_drop(c);
	if (c->aio) {
		nng_aio_free(c->aio);
		c->aio = NULL;
	}
}

static int conn_dial(struct shop_conn *c)
{
	int rv;
	nng_aio_set_timeout(c->aio, c->timeout_ms);
	nng_http_client_connect(c->client, c->aio);
	nng_aio_wait(c->aio);
	if ((rv = nng_aio_result(c->aio)) != 0)
		return rv;
	c->conn = nng_aio_get_output(c->aio, 0);
	return c->conn ? 0 : NNG_ECLOSED;
}

int shop_conn_transact(struct shop_conn *c, nng_http_req *req, nng_http_res *res)
{
	int attempt, rv = NNG_ECLOSED;
	for (attempt = 0; attempt < 2; attempt++) {
		int fresh = 0;
		const char *hdr;
		if (!c->conn) {
			if ((rv = conn_dial(c)) != 0)
				return rv;
			fresh = 1;
		}
		nng_http_res_reset(res);
		nng_aio_set_timeout(c->aio, c->timeout_ms);
		nng_http_conn_transact(c->conn, req, res, c->aio);
		nng_aio_wait(c->aio);
		rv = nng_aio_result(c->aio);
		if (rv == 0) {
			hdr = nng_http_res_get_header(res, "Connection");
			if (hdr && strcasestr(hdr, "close"))
				conn_drop(c);
			return 0;
		}
		conn_drop(c);
		/* Only a reused keep-alive connection that the server had closed is
		 * worth a second try; a timeout or a fresh failure is the answer. */
		if (fresh || rv == NNG_ETIMEDOUT)
			return rv;
	}
	return rv;
}

int shop_check_http_url(const char *s, nng_url **out, char *err, size_t errn)
{
	nng_url *u = NULL;
	int rv = nng_url_parse(&u, s);
	if (rv != 0) {
		snprintf(err, errn, "cannot parse URL '%s': %s", s, nng_strerror(rv));
		return -1;
	}
	if (strcmp(u->u_scheme, "http") != 0) {
		snprintf(err, errn, "URL '%s': only http:// is supported", s);
		nng_url_free(u);
		return -1;
	}
	if (u->u_hostname[0] == '\0') {
		snprintf(err, errn, "URL '%s' has no host", s);
		nng_url_free(u);
		return -1;
	}
	*out = u;
	return 0;
}
