/* json_internal.h — a small strict JSON parser for the dataset readers of
 * tools/select_eval/ (internal).
 *
 * Why our own rather than jansson (a dependency of the tree): the readers promise
 * "FILE: byte N: what" for every malformed input with the reason (leading zero,
 * lone surrogate, invalid UTF-8, nesting deeper than RT_JSON_MAX_DEPTH), which
 * tests/tools/select_eval/test_otlp.c holds them to; jansson, as strict, words
 * them its own way ("invalid token near '0'"), refuses integers past INT64_MAX
 * (OTLP's uint64 times and ids) and allocates a node per value. It moved here
 * from select/ with the readers (docs/selection.md).
 *
 * The parser works in place on a caller-owned, writable buffer: strings are
 * unescaped where they stand and NUL-terminated, so nodes point into the buffer and
 * nothing else is allocated besides the node array. Nodes are a flat array in
 * document order (jsmn-style); each records the index one past its subtree, so a
 * sibling is one step away and skipping a large value costs nothing.
 *
 * Strict RFC 8259: no comments, no trailing commas, no leading zeros, no control
 * characters or invalid UTF-8 inside strings, valid escapes only (surrogates must
 * pair). Nesting is bounded (RT_JSON_MAX_DEPTH). Errors name the byte offset.
 */
#ifndef RETRACE_SELECT_JSON_INTERNAL_H
#define RETRACE_SELECT_JSON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RT_JSON_MAX_DEPTH 64
#define RT_JSON_NONE      UINT32_MAX

enum rt_json_type {
	RT_JSON_NULL = 0,
	RT_JSON_FALSE,
	RT_JSON_TRUE,
	RT_JSON_NUMBER,
	RT_JSON_STRING,
	RT_JSON_ARRAY,
	RT_JSON_OBJECT,
};

typedef struct rt_json_node {
	const char *s; /* string: unescaped, NUL-terminated; number: its text (not terminated) */
	size_t off;    /* byte offset of the value in the input, for messages */
	uint32_t len;  /* string / number text length in bytes */
	uint32_t size; /* array: elements; object: members (a member = key node + value) */
	uint32_t end;  /* index one past this node's subtree */
	uint8_t type;  /* enum rt_json_type */
} rt_json_node;

typedef struct rt_json_doc {
	rt_json_node *nodes;
	uint32_t n, cap;
} rt_json_doc;

/* Parse one JSON value from buf[*pos, len), skipping whitespace before it, into doc
 * (which is reset first; its array is reused). buf is modified (strings unescaped in
 * place). On success *pos is just past the value and its trailing whitespace, and the
 * root is node 0. On failure returns -1 with "byte N: what" in err. */
int rt_json_parse_value(rt_json_doc *doc, char *buf, size_t len, size_t *pos, char *err,
			size_t errlen);
void rt_json_free(rt_json_doc *doc);

/* Member `key` of object node obj, or RT_JSON_NONE (also when obj is not an object). */
uint32_t rt_json_get(const rt_json_doc *doc, uint32_t obj, const char *key);
/* First element of an array, RT_JSON_NONE if empty or not an array. */
uint32_t rt_json_first(const rt_json_doc *doc, uint32_t array);
/* The element after `node` in the array, RT_JSON_NONE after the last one. */
uint32_t rt_json_next(const rt_json_doc *doc, uint32_t array, uint32_t node);

/* A non-negative integer from a number (digits only) or a string of digits, as OTLP
 * writes 64-bit integers as strings. False on anything else or overflow. */
bool rt_json_u64(const rt_json_doc *doc, uint32_t node, uint64_t *out);
/* A signed integer, same forms with an optional leading '-'. */
bool rt_json_i64(const rt_json_doc *doc, uint32_t node, int64_t *out);
/* The string of a string node, or NULL. */
const char *rt_json_str(const rt_json_doc *doc, uint32_t node);

#endif
