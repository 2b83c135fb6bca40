/*
 * store/http.c — the HTTP client the ClickHouse backend talks through.
 *
 * One blocking TCP socket with keep-alive: a request is written whole (headers,
 * then the body with writev-free plain send loops), then the reply is read
 * into a buffer: the status line, headers up to the blank line, then exactly
 * Content-Length bytes, or chunks until the zero chunk. Socket timeouts
 * (SO_RCVTIMEO/SO_SNDTIMEO) bound every wait. If a reused connection fails
 * before any reply byte arrives (the server closed it while idle), it is
 * reopened and the request sent once more: every request the backend sends
 * is safe to repeat (reads, CREATE .. IF NOT EXISTS, and INSERTs into tables
 * whose engine collapses a repeated row).
 */
#include "http.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define HEAD_MAX 16384

int rt_buf_reserve(struct rt_buf *b, size_t more)
{
	size_t cap;
	unsigned char *p;
	if (b->len + more <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more)
		cap *= 2;
	if (!(p = realloc(b->p, cap)))
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

int rt_buf_put(struct rt_buf *b, const void *p, size_t n)
{
	if (rt_buf_reserve(b, n))
		return -1;
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

void rt_buf_free(struct rt_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

static int fail(struct rt_http *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct rt_http *h, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(h->err, sizeof h->err, fmt, ap);
	va_end(ap);
	return -1;
}

void rt_http_init(struct rt_http *h, const char *host, int port, int timeout_ms)
{
	memset(h, 0, sizeof *h);
	h->fd = -1;
	snprintf(h->host, sizeof h->host, "%s", host);
	h->port = port;
	h->timeout_ms = timeout_ms > 0 ? timeout_ms : 30000;
}

void rt_http_close(struct rt_http *h)
{
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
}

static int connect_to(struct rt_http *h)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL, *a;
	struct timeval tv = { .tv_sec = h->timeout_ms / 1000,
			      .tv_usec = (h->timeout_ms % 1000) * 1000 };
	char port[16];
	int rc, one = 1;
	snprintf(port, sizeof port, "%d", h->port);
	if ((rc = getaddrinfo(h->host, port, &hints, &ai)) != 0)
		return fail(h, "%s:%d: %s", h->host, h->port, gai_strerror(rc));
	for (a = ai; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
			h->fd = fd;
			freeaddrinfo(ai);
			return 0;
		}
		rc = errno;
		close(fd);
		errno = rc;
	}
	freeaddrinfo(ai);
	return fail(h, "%s:%d: cannot connect: %s", h->host, h->port, strerror(errno));
}

static int send_all(struct rt_http *h, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = send(h->fd, c, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return fail(h, "%s:%d: send: %s", h->host, h->port,
				    w < 0 ? strerror(errno) : "closed");
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reply reader: bytes read past what was consumed stay in `in`. */
struct reader {
	struct rt_http *h;
	struct rt_buf in;
	size_t pos;
	size_t got;             /* bytes received in all (0: nothing yet) */
};

static int fill(struct reader *r)
{
	ssize_t n;
	if (r->pos == r->in.len)
		r->pos = r->in.len = 0;
	if (rt_buf_reserve(&r->in, 65536))
		return fail(r->h, "out of memory");
	do
		n = recv(r->h->fd, r->in.p + r->in.len, r->in.cap - r->in.len, 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return fail(r->h, "%s:%d: receive: %s", r->h->host, r->h->port,
			    n < 0 ? strerror(errno) : "connection closed");
	r->in.len += (size_t)n;
	r->got += (size_t)n;
	return 0;
}

/* One line ending in CRLF into line (NUL-terminated, CRLF cut). */
static int read_line(struct reader *r, char *line, size_t cap)
{
	for (;;) {
		unsigned char *s = r->in.p + r->pos, *nl = NULL;
		if (r->pos < r->in.len) /* memchr on an empty (maybe NULL) buffer is UB */
			nl = memchr(s, '\n', r->in.len - r->pos);
		if (nl) {
			size_t n = (size_t)(nl - s);
			if (n && s[n - 1] == '\r')
				n--;
			if (n >= cap)
				return fail(r->h, "reply line too long");
			memcpy(line, s, n);
			line[n] = 0;
			r->pos += (size_t)(nl - s) + 1;
			return 0;
		}
		if (r->in.len - r->pos > HEAD_MAX)
			return fail(r->h, "reply line too long");
		if (fill(r))
			return -1;
	}
}

static int read_bytes(struct reader *r, size_t n, struct rt_buf *out)
{
	while (n) {
		size_t have = r->in.len - r->pos, take;
		if (!have && fill(r))
			return -1;
		have = r->in.len - r->pos;
		take = have < n ? have : n;
		if (out && rt_buf_put(out, r->in.p + r->pos, take))
			return fail(r->h, "out of memory for the reply");
		r->pos += take;
		n -= take;
	}
	return 0;
}

static int read_reply(struct reader *r, int *status, struct rt_buf *body, int *close_after)
{
	char line[HEAD_MAX];
	long long clen = -1;
	int chunked = 0;
	if (read_line(r, line, sizeof line))
		return -1;
	if (sscanf(line, "HTTP/1.%*d %d", status) != 1)
		return fail(r->h, "not an HTTP reply: %.60s", line);
	for (;;) {
		if (read_line(r, line, sizeof line))
			return -1;
		if (!line[0])
			break;
		if (!strncasecmp(line, "Content-Length:", 15))
			clen = atoll(line + 15);
		else if (!strncasecmp(line, "Transfer-Encoding:", 18) && strcasestr(line, "chunked"))
			chunked = 1;
		else if (!strncasecmp(line, "Connection:", 11) && strcasestr(line, "close"))
			*close_after = 1;
	}
	if (chunked) {
		for (;;) {
			unsigned long long n;
			char *end;
			if (read_line(r, line, sizeof line))
				return -1;
			n = strtoull(line, &end, 16);
			if (end == line)
				return fail(r->h, "bad chunk size: %.40s", line);
			if (!n)
				break;
			if (read_bytes(r, (size_t)n, body) || read_line(r, line, sizeof line))
				return -1;
		}
		do /* trailers up to the blank line */
			if (read_line(r, line, sizeof line))
				return -1;
		while (line[0]);
		return 0;
	}
	if (clen >= 0)
		return read_bytes(r, (size_t)clen, body);
	*close_after = 1; /* body until the server closes */
	for (;;) {
		if (rt_buf_put(body, r->in.p + r->pos, r->in.len - r->pos))
			return fail(r->h, "out of memory for the reply");
		r->pos = r->in.len;
		if (fill(r))
			return 0;
	}
}

static int exchange(struct rt_http *h, const char *target, const void *body, size_t len,
		    int *status, struct rt_buf *reply, size_t *got)
{
	char head[HEAD_MAX];
	struct reader r = { .h = h };
	int n, rc, close_after = 0;
	*got = 0;
	n = snprintf(head, sizeof head,
		     "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Length: %zu\r\n"
		     "Connection: keep-alive\r\n\r\n", target, h->host, h->port, len);
	if (n < 0 || (size_t)n >= sizeof head)
		return fail(h, "request target too long (%zu bytes)", strlen(target));
	if (h->fd < 0 && connect_to(h))
		return -1;
	reply->len = 0;
	rc = send_all(h, head, (size_t)n);
	if (!rc && len)
		rc = send_all(h, body, len);
	if (!rc)
		rc = read_reply(&r, status, reply, &close_after);
	*got = r.got;
	rt_buf_free(&r.in);
	if (rc || close_after)
		rt_http_close(h);
	return rc;
}

int rt_http_post(struct rt_http *h, const char *target, const void *body, size_t len,
		 int *status, struct rt_buf *reply)
{
	int reused = h->fd >= 0;
	size_t got;
	if (exchange(h, target, body, len, status, reply, &got) == 0)
		return 0;
	if (!reused || got)
		return -1;
	return exchange(h, target, body, len, status, reply, &got); /* idle close: once more */
}

int rt_url_encode(const char *s, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		int plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			    (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~';
		if (n + (plain ? 1 : 3) >= cap)
			return -1;
		if (plain) {
			out[n++] = (char)c;
		} else {
			out[n++] = '%';
			out[n++] = hex[c >> 4];
			out[n++] = hex[c & 15];
		}
	}
	out[n] = 0;
	return 0;
}
