/*
 * shop.h — retrace-shop, a small multi-service application over HTTP on loopback.
 *
 * What it owns: the `retrace-shop` binary: `serve` runs one service of the shop
 * (frontend, cart, catalog, inventory, payment, or any other name) as an nng
 * HTTP server whose requests are traced with libretrace; `load` drives GET
 * /checkout requests at a frontend. See examples/README.md for the topology,
 * the flags and the x-shop-* headers.
 *
 * What it promises: every tracepoint a service writes can be logged byte-exact
 * with --record; a downstream that is down or misbehaves yields an HTTP error
 * and a counter, never a crash; SIGTERM/SIGINT stop a service gracefully.
 */
#ifndef RETRACE_SHOP_H
#define RETRACE_SHOP_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "retrace/retrace.h"

#define SHOP_EXIT_USAGE 2
#define SHOP_MAX_CALLS 8
#define SHOP_TRIGGER_ERROR 100
#define SHOP_TRIGGER_SLOW 101
#define SHOP_MAX_LATERAL_HEADER 10
#define SHOP_DEFAULT_TIMEOUT_MS 30000

/* Subcommands (serve.c, load.c). */
int shop_serve_main(int argc, char **argv);
int shop_load_main(int argc, char **argv);

/* ------------------------------------------------------------ helpers ---- */

uint64_t shop_now_ns(void); /* CLOCK_MONOTONIC */
void shop_sleep_ms(unsigned ms);

/* splitmix64 step and a per-thread generator seeded from getrandom(). */
uint64_t shop_mix64(uint64_t x);
uint64_t shop_rand64(void);
double shop_rand_unit(void); /* uniform in [0, 1) */

/* 32 lowercase hex digits + NUL. */
void shop_trace_hex(retrace_trace_id id, char out[33]);
/* Parse exactly 32 hex digits; 0 on success. */
int shop_parse_trace_hex(const char *s, retrace_trace_id *out);

/* Strict number parsing for flags: 0 on success. */
int shop_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
int shop_parse_prob(const char *s, double *out); /* 0 <= p <= 1 */
int shop_parse_double(const char *s, double lo, double hi, double *out);

/* A growable byte buffer. */
struct shop_buf {
	char *p;
	size_t len, cap;
};
int shop_buf_reserve(struct shop_buf *b, size_t more);
void shop_buf_free(struct shop_buf *b);

/* ------------------------------------------------ HTTP client (nng) ---- */

/*
 * One persistent HTTP/1.1 connection to one server, used by one thread at a
 * time. transact() connects on demand, re-dials once if a reused keep-alive
 * connection turns out to be stale, and drops the connection after an error or
 * a "Connection: close" response.
 */
struct shop_conn {
	nng_http_client *client; /* shared, not owned */
	nng_http_conn *conn;
	nng_aio *aio;
	int timeout_ms;
};

int shop_conn_init(struct shop_conn *c, nng_http_client *client, int timeout_ms);
void shop_conn_fini(struct shop_conn *c);
/* 0, or an nng error code (the response is then unusable). */
int shop_conn_transact(struct shop_conn *c, nng_http_req *req, nng_http_res *res);

/* Validate an http:// URL for --call/--target; 0 or -1 (message in err). */
int shop_check_http_url(const char *s, nng_url **out, char *err, size_t errn);

#endif
