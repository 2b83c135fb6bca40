/* json.c — strict in-place JSON parser (see json_internal.h).
 *
 * Recursive descent with an explicit depth bound. Each value appends one node; a
 * container's node is appended before its children and its `end` is filled in once
 * the children are parsed, so the array is in document order. Strings are unescaped
 * into the same bytes they were read from (the output is never longer than the
 * input: an escape of 2, 6 or 12 bytes yields 1 to 4 bytes) and NUL-terminated at
 * the output end, which lies at or before the closing quote.
 */
#include "json_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
	rt_json_doc *doc;
	char *buf;
	size_t len, pos;
	char *err;
	size_t errlen;
} parser;

static int fail(parser *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(parser *p, size_t at, const char *fmt, ...)
{
	if (p->err && p->errlen) {
		int n = snprintf(p->err, p->errlen, "byte %zu: ", at);
		if (n >= 0 && (size_t)n < p->errlen) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return -1;
}

static void skip_ws(parser *p)
{
	while (p->pos < p->len) {
		char c = p->buf[p->pos];
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		p->pos++;
	}
}

static uint32_t new_node(parser *p, uint8_t type)
{
	rt_json_doc *d = p->doc;
	if (d->n == d->cap) {
		if (d->cap >= (UINT32_MAX - 1) / 2)
			return RT_JSON_NONE;
		uint32_t cap = d->cap ? d->cap * 2 : 256;
		rt_json_node *v = realloc(d->nodes, (size_t)cap * sizeof *v);
		if (!v)
			return RT_JSON_NONE;
		d->nodes = v;
		d->cap = cap;
	}
	rt_json_node *n = &d->nodes[d->n];
	memset(n, 0, sizeof *n);
	n->type = type;
	n->off = p->pos;
	return d->n++;
}

static int hex4(const char *s, uint32_t *out)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (d < 0)
			return -1;
		v = v << 4 | (uint32_t)d;
	}
	*out = v;
	return 0;
}

static size_t put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Length of the valid UTF-8 sequence starting at s (at most n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t need;
	uint32_t cp, min;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		need = 2, cp = s[0] & 0x1f, min = 0x80;
	else if ((s[0] & 0xf0) == 0xe0)
		need = 3, cp = s[0] & 0x0f, min = 0x800;
	else if ((s[0] & 0xf8) == 0xf0)
		need = 4, cp = s[0] & 0x07, min = 0x10000;
	else
		return 0;
	if (n < need)
		return 0;
	for (size_t i = 1; i < need; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return need;
}

/* One escape after the backslash at p->pos; writes the bytes at *o. */
static int parse_escape(parser *p, char **o)
{
	size_t at = p->pos;
	if (p->pos + 1 >= p->len)
		return fail(p, at, "unterminated string");
	char c = p->buf[p->pos + 1];
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *k = c ? strchr(from, c) : NULL;
	if (k) {
		*(*o)++ = to[k - from];
		p->pos += 2;
		return 0;
	}
	if (c != 'u')
		return fail(p, at, "invalid escape '\\%c'", c);
	uint32_t cp, lo;
	if (p->pos + 6 > p->len || hex4(p->buf + p->pos + 2, &cp))
		return fail(p, at, "invalid \\u escape");
	p->pos += 6;
	if (cp >= 0xdc00 && cp <= 0xdfff)
		return fail(p, at, "unpaired low surrogate in \\u escape");
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (p->pos + 6 > p->len || p->buf[p->pos] != '\\' || p->buf[p->pos + 1] != 'u' ||
		    hex4(p->buf + p->pos + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
			return fail(p, at, "unpaired high surrogate in \\u escape");
		p->pos += 6;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
	}
	if (cp == 0)
		return fail(p, at, "\\u0000 is not allowed in a string");
	*o += put_utf8(*o, cp);
	return 0;
}

static int parse_string(parser *p, uint32_t idx)
{
	size_t start = ++p->pos; /* after the opening quote */
	char *o = p->buf + start;
	while (p->pos < p->len) {
		unsigned char c = (unsigned char)p->buf[p->pos];
		if (c == '"') {
			rt_json_node *n = &p->doc->nodes[idx];
			n->s = p->buf + start;
			n->len = (uint32_t)(o - (p->buf + start));
			*o = '\0';
			p->pos++;
			return 0;
		}
		if (c == '\\') {
			if (parse_escape(p, &o))
				return -1;
			continue;
		}
		if (c < 0x20)
			return fail(p, p->pos, "control character 0x%02x inside a string", c);
		size_t l = utf8_len((const unsigned char *)p->buf + p->pos, p->len - p->pos);
		if (!l)
			return fail(p, p->pos, "invalid UTF-8 inside a string");
		memmove(o, p->buf + p->pos, l);
		o += l;
		p->pos += l;
	}
	return fail(p, start - 1, "unterminated string");
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int parse_number(parser *p, uint32_t idx)
{
	size_t at = p->pos, i = p->pos;
	const char *b = p->buf;
	if (i < p->len && b[i] == '-')
		i++;
	if (i >= p->len || !is_digit(b[i]))
		return fail(p, at, "invalid number");
	if (b[i] == '0')
		i++;
	else
		while (i < p->len && is_digit(b[i]))
			i++;
	if (i < p->len && b[i] == '.') {
		if (++i >= p->len || !is_digit(b[i]))
			return fail(p, at, "invalid number: no digit after '.'");
		while (i < p->len && is_digit(b[i]))
			i++;
	}
	if (i < p->len && (b[i] == 'e' || b[i] == 'E')) {
		i++;
		if (i < p->len && (b[i] == '+' || b[i] == '-'))
			i++;
		if (i >= p->len || !is_digit(b[i]))
			return fail(p, at, "invalid number: no digit in the exponent");
		while (i < p->len && is_digit(b[i]))
			i++;
	}
	if (i < p->len && (is_digit(b[i]) || b[i] == '.'))
		return fail(p, at, "invalid number (leading zero?)");
	p->doc->nodes[idx].s = b + at;
	p->doc->nodes[idx].len = (uint32_t)(i - at);
	p->pos = i;
	return 0;
}

static int parse_literal(parser *p, const char *word)
{
	size_t n = strlen(word);
	if (p->len - p->pos < n || memcmp(p->buf + p->pos, word, n) != 0)
		return fail(p, p->pos, "unexpected '%c'", p->buf[p->pos]);
	p->pos += n;
	return 0;
}

static int parse_value(parser *p, int depth);

/* Elements of an array or members of an object; p->pos is after the opening bracket. */
static int parse_container(parser *p, uint32_t idx, bool object, int depth)
{
	char close = object ? '}' : ']';
	uint32_t count = 0;
	skip_ws(p);
	if (p->pos < p->len && p->buf[p->pos] == close) {
		p->pos++;
		goto done;
	}
	for (;;) {
		skip_ws(p);
		if (object) {
			if (p->pos >= p->len || p->buf[p->pos] != '"')
				return fail(p, p->pos, "expected a string key in an object");
			uint32_t k = new_node(p, RT_JSON_STRING);
			if (k == RT_JSON_NONE)
				return fail(p, p->pos, "out of memory");
			if (parse_string(p, k))
				return -1;
			p->doc->nodes[k].end = k + 1;
			skip_ws(p);
			if (p->pos >= p->len || p->buf[p->pos] != ':')
				return fail(p, p->pos, "expected ':' after an object key");
			p->pos++;
		}
		if (parse_value(p, depth + 1))
			return -1;
		count++;
		skip_ws(p);
		if (p->pos >= p->len)
			return fail(p, p->pos, "unterminated %s", object ? "object" : "array");
		if (p->buf[p->pos] == close) {
			p->pos++;
			break;
		}
		if (p->buf[p->pos] != ',')
			return fail(p, p->pos, "expected ',' or '%c'", close);
		p->pos++;
	}
done:
	p->doc->nodes[idx].size = count;
	return 0;
}

static int parse_value(parser *p, int depth)
{
	if (depth > RT_JSON_MAX_DEPTH)
		return fail(p, p->pos, "nested deeper than %d levels", RT_JSON_MAX_DEPTH);
	skip_ws(p);
	if (p->pos >= p->len)
		return fail(p, p->pos, "unexpected end of input");
	char c = p->buf[p->pos];
	uint32_t idx;
	int rc;
	switch (c) {
	case '{':
	case '[':
		if ((idx = new_node(p, c == '{' ? RT_JSON_OBJECT : RT_JSON_ARRAY)) == RT_JSON_NONE)
			return fail(p, p->pos, "out of memory");
		p->pos++;
		rc = parse_container(p, idx, c == '{', depth);
		break;
	case '"':
		if ((idx = new_node(p, RT_JSON_STRING)) == RT_JSON_NONE)
			return fail(p, p->pos, "out of memory");
		rc = parse_string(p, idx);
		break;
	case 't':
	case 'f':
	case 'n': {
		uint8_t type = c == 't' ? RT_JSON_TRUE : c == 'f' ? RT_JSON_FALSE : RT_JSON_NULL;
		if ((idx = new_node(p, type)) == RT_JSON_NONE)
			return fail(p, p->pos, "out of memory");
		rc = parse_literal(p, c == 't' ? "true" : c == 'f' ? "false" : "null");
		break;
	}
	default:
		if (c != '-' && !is_digit(c))
			return fail(p, p->pos, "unexpected '%c'", c);
		if ((idx = new_node(p, RT_JSON_NUMBER)) == RT_JSON_NONE)
			return fail(p, p->pos, "out of memory");
		rc = parse_number(p, idx);
		break;
	}
	if (rc == 0)
		p->doc->nodes[idx].end = p->doc->n;
	return rc;
}

int rt_json_parse_value(rt_json_doc *doc, char *buf, size_t len, size_t *pos, char *err,
			size_t errlen)
{
	parser p = {
		.doc = doc, .buf = buf, .len = len, .pos = *pos, .err = err, .errlen = errlen
	};
	doc->n = 0;
	if (parse_value(&p, 1))
		return -1;
	skip_ws(&p);
	*pos = p.pos;
	return 0;
}

void rt_json_free(rt_json_doc *doc)
{
	free(doc->nodes);
	doc->nodes = NULL;
	doc->n = doc->cap = 0;
}

uint32_t rt_json_first(const rt_json_doc *doc, uint32_t c)
{
	if (c >= doc->n)
		return RT_JSON_NONE;
	const rt_json_node *n = &doc->nodes[c];
	if (n->type != RT_JSON_ARRAY || n->size == 0)
		return RT_JSON_NONE;
	return c + 1;
}

uint32_t rt_json_next(const rt_json_doc *doc, uint32_t c, uint32_t node)
{
	if (c >= doc->n || node >= doc->n)
		return RT_JSON_NONE;
	if (doc->nodes[c].type != RT_JSON_ARRAY)
		return RT_JSON_NONE;
	uint32_t next = doc->nodes[node].end;
	return next < doc->nodes[c].end ? next : RT_JSON_NONE;
}

uint32_t rt_json_get(const rt_json_doc *doc, uint32_t obj, const char *key)
{
	if (obj >= doc->n || doc->nodes[obj].type != RT_JSON_OBJECT)
		return RT_JSON_NONE;
	uint32_t end = doc->nodes[obj].end;
	for (uint32_t k = obj + 1; k < end; k = doc->nodes[k + 1].end)
		if (strcmp(doc->nodes[k].s, key) == 0)
			return k + 1;
	return RT_JSON_NONE;
}

const char *rt_json_str(const rt_json_doc *doc, uint32_t node)
{
	if (node >= doc->n || doc->nodes[node].type != RT_JSON_STRING)
		return NULL;
	return doc->nodes[node].s;
}

static bool digits_u64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!is_digit(s[i]))
			return false;
		uint64_t d = (uint64_t)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

bool rt_json_u64(const rt_json_doc *doc, uint32_t node, uint64_t *out)
{
	if (node >= doc->n)
		return false;
	const rt_json_node *n = &doc->nodes[node];
	if (n->type != RT_JSON_NUMBER && n->type != RT_JSON_STRING)
		return false;
	return digits_u64(n->s, n->len, out);
}

bool rt_json_i64(const rt_json_doc *doc, uint32_t node, int64_t *out)
{
	if (node >= doc->n)
		return false;
	const rt_json_node *n = &doc->nodes[node];
	if (n->type != RT_JSON_NUMBER && n->type != RT_JSON_STRING)
		return false;
	bool neg = n->len > 0 && n->s[0] == '-';
	uint64_t v;
	if (!digits_u64(n->s + neg, n->len - neg, &v))
		return false;
	if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
		return false;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return true;
}
