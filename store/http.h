/*
 * store/http.h — a small blocking HTTP/1.1 client for the ClickHouse backend.
 *
 * Owns: one keep-alive TCP connection to one host:port and growable byte
 * buffers. Promises: rt_http_post sends one POST and reads the whole reply
 * (Content-Length or chunked) before it returns; a connection the server
 * closed while idle is reopened once and the request sent again; every
 * failure is a -1 with the reason in h->err, never an abort. Not thread-safe.
 */
#ifndef RETRACE_STORE_HTTP_H
#define RETRACE_STORE_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct rt_buf {
	unsigned char *p;
	size_t len, cap;
};

int rt_buf_reserve(struct rt_buf *b, size_t more); /* 0 or -1 (out of memory) */
int rt_buf_put(struct rt_buf *b, const void *p, size_t n);
void rt_buf_free(struct rt_buf *b);

struct rt_http {
	int fd;                 /* -1: not connected */
	char host[256];
	int port;
	int timeout_ms;         /* per send/receive */
	char err[256];
};

void rt_http_init(struct rt_http *h, const char *host, int port, int timeout_ms);
void rt_http_close(struct rt_http *h);

/* POST `target` (path and query, already URL-encoded) with body; *status gets
 * the HTTP status and `reply` (cleared first) the body. 0, or -1 on a transport
 * failure. */
int rt_http_post(struct rt_http *h, const char *target, const void *body, size_t len,
		 int *status, struct rt_buf *reply);

/* Percent-encode s into out (cap bytes, NUL included); -1 if it does not fit. */
int rt_url_encode(const char *s, char *out, size_t cap);

#endif
