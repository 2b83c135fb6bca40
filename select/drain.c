/* drain.c — Drain log-template miner (He et al., ICWS 2017) with bounded memory.
 *
 * A line is masked (alphanumeric runs containing a digit become "<*>"), split on
 * whitespace and routed down a fixed-depth parse tree: root → token count → first
 * token(s) → leaf list of clusters (depth 4 = one token layer). A node holds at most
 * max_children children; further tokens, and tokens that are a bare "<*>", go to the
 * wildcard child. In the leaf, the cluster with the highest share of equal
 * non-wildcard tokens wins if the share reaches the threshold (0.4); its template then
 * generalises (differing tokens become "<*>"), otherwise a new cluster is created.
 *
 * Memory is bounded: clusters live in a fixed pool of max_clusters, ordered by last
 * use; creating one when the pool is full evicts the least recently used, and nodes
 * that become empty are pruned, so the tree never exceeds ~3 nodes per cluster.
 * Ids come from a counter (with RT_SEL_MINED_TEMPLATE_BIT set) and stick to a
 * cluster for its whole life.
 *
 * Nearly every line repeats an earlier one up to its variable parts, so two caches in
 * front of the tree answer almost all lines without masking or tokenising; both map a
 * function of the *normalised* line (every byte of an alphanumeric run holding a
 * digit set to 0, which determines the masked line) to a cluster, validated by the
 * cluster id so evictions never leave a dangling match:
 *  1. exemplar cache (lines < 2 KiB): bucket by length and the two blanked 32-byte end
 *     windows, then compare with the remembered normalised line, 16/32 bytes at a time
 *     (remembered lines live in a fixed ring arena);
 *  2. memo keyed by a 64-bit hash of the normalised prefix up to the (max_tokens+1)-th
 *     token, computed on 64-byte blocks with bit masks (line_key); only that prefix of
 *     a long line is read.
 * In front of the exemplar cache a predictor keyed by the line's length and first 16
 * raw bytes names the exemplar the last such line matched: checked like an exemplar
 * hit, it spares the bucket key (two blanked windows and their hash), and a wrong
 * guess only falls through to the bucket.
 * On a miss the line is masked and tokenised, and a third memo keyed by the hash of
 * the masked text (the one memo of the first version) is asked before the tree.
 * Both are exact up to 64-bit hash collisions (as the hash of the masked text used
 * before), so template ids are those of the plain miner. SSE2 code, plus AVX2 chosen
 * at run time; scalar code elsewhere (or with RETRACE_SELECT_NO_SIMD; SSE2 only with
 * RETRACE_SELECT_NO_AVX2). All variants give the same ids.
 */
#include "internal.h"
#include "select.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__SSE2__) && !defined(RETRACE_SELECT_NO_SIMD)
#include <emmintrin.h>
#define DRAIN_SSE2 1
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(RETRACE_SELECT_NO_SIMD) && !defined(RETRACE_SELECT_NO_AVX2)
#include <immintrin.h>
#define DRAIN_AVX2 1 /* compiled for AVX2 as well, chosen at run time */
#endif

#define MEMO_SIZE   16384 /* by line key, direct-mapped; 24 bytes per entry */
#define MMEMO_SIZE  4096  /* by masked text, direct-mapped */
#define SCAN_CHUNK  1024  /* bytes of a line made safe to read at a time (strnlen) */
#define EX_SETS     1024  /* exemplar cache: sets × ways, normalised lines in a ring arena */
#define EX_WAYS     4
#define EX_MAX_LINE 2048 /* longer lines take the line-key path only */
#define PRED_SIZE   4096 /* exemplar predictor, direct-mapped; 32 bytes per entry */
#define PRED_MIN    16   /* its key reads the line's first 16 bytes */
static const char WILDCARD[] = "<*>";

typedef struct node node;
typedef struct cluster cluster;

struct cluster {
	uint32_t id; /* 0 = free slot */
	unsigned ntok;
	char **tok; /* owned strings; wildcard positions point at WILDCARD */
	node *leaf;
	size_t leaf_pos;
	cluster *newer, *older; /* LRU list */
};

struct node {
	char *token; /* owned; NULL for the root */
	uint64_t token_hash;
	node *parent;
	node **child;
	size_t nchild, capchild;
	cluster **cl;
	size_t ncl, capcl;
};

typedef struct memo_entry {
	uint64_t line_hash;
	cluster *c;
	uint32_t id;
} memo_entry;

/* One remembered line, normalised (see line_key), with the cluster it went to. */
typedef struct ex_entry {
	uint64_t key; /* hash of the length and of both blanked end windows */
	uint64_t pos; /* monotonic arena offset of the normalised bytes */
	cluster *c;
	uint32_t len;
	uint32_t id; /* 0 = empty */
} ex_entry;

/* A guess at the exemplar a line will match, from its length and first 16 raw bytes
 * (not normalised: cheap, and a wrong guess only costs a failed check). The copies
 * of the exemplar's fields are read before its set, so the set, the arena and the
 * cluster are fetched in parallel. */
typedef struct pred_entry {
	uint64_t tag; /* pred_key of the last line that reached this exemplar; 0 = none */
	uint64_t pos; /* the exemplar's arena position: unique to one insertion */
	cluster *c;
	uint32_t id;  /* its cluster's id when inserted */
	uint32_t set; /* index of its exemplar set */
} pred_entry;

/* Per 64-byte block of the line prefix being keyed: word, digit and valid bits,
 * then the blanked bits (alphanumeric runs holding a digit). */
typedef struct scan_block {
	uint64_t w, dg, v, m;
} scan_block;

struct rt_sel_drain {
	rt_sel_drain_config cfg;
	node root;
	cluster *pool;
	size_t n_live;
	cluster *newest, *oldest;
	cluster *free_list; /* chained through ->older */
	uint32_t next_id;
	size_t bytes;
	char *mask_buf;
	size_t mask_cap;
	char **toks;
	uint64_t *tok_hash;
	unsigned char cls[256];
	uint64_t wild_hash;
	scan_block *blk; /* line key scratch */
	size_t blk_cap;
	bool avx2;    /* the CPU has AVX2: use the 32-byte line key code */
	ex_entry *ex; /* EX_SETS × EX_WAYS, most recent way first */
	unsigned char *ex_arena;
	size_t ex_cap;    /* arena bytes */
	uint64_t ex_pos;  /* monotonic end of the newest normalised line */
	pred_entry *pred; /* PRED_SIZE */
	memo_entry memo[MEMO_SIZE];
	memo_entry mmemo[MMEMO_SIZE];
};

/* ---------------------------------------------------------------- accounting */

static void *dalloc(rt_sel_drain *d, size_t n)
{
	size_t *p = malloc(sizeof(size_t) + n);
	if (!p)
		return NULL;
	*p = n;
	d->bytes += n + sizeof(size_t);
	return p + 1;
}

static void dfree(rt_sel_drain *d, void *q)
{
	if (!q)
		return;
	size_t *p = (size_t *)q - 1;
	d->bytes -= *p + sizeof(size_t);
	free(p);
}

static void *drealloc(rt_sel_drain *d, void *q, size_t old_n, size_t n)
{
	void *r = dalloc(d, n);
	if (!r)
		return NULL;
	if (q)
		memcpy(r, q, old_n);
	dfree(d, q);
	return r;
}

static char *dstrdup(rt_sel_drain *d, const char *s)
{
	size_t n = strlen(s) + 1;
	char *r = dalloc(d, n);
	if (r)
		memcpy(r, s, n);
	return r;
}

/* ---------------------------------------------------------------- masking */

void rt_sel_mask_line(const char *in, char *out, size_t len)
{
	if (len == 0)
		return;
	size_t o = 0;
	const char *p = in;
	while (*p && o + 1 < len) {
		if (!isalnum((unsigned char)*p) && *p != '_') {
			out[o++] = *p++;
			continue;
		}
		const char *q = p;
		bool digit = false;
		while (*q && (isalnum((unsigned char)*q) || *q == '_')) {
			digit |= isdigit((unsigned char)*q) != 0;
			q++;
		}
		if (digit) {
			for (size_t k = 0; k < 3 && o + 1 < len; k++)
				out[o++] = WILDCARD[k];
		} else {
			for (const char *c = p; c < q && o + 1 < len; c++)
				out[o++] = *c;
		}
		p = q;
	}
	out[o] = '\0';
}

/* Character classes for the fused mask/tokenise pass. */
/* Bit 0: part of an alphanumeric run; bit 1: digit; 4: whitespace. */
enum { C_OTHER = 0, C_WORD = 1, C_DIGIT = 3, C_SPACE = 4 };

static unsigned char char_class(unsigned char c)
{
	if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
		return C_SPACE;
	if (c >= '0' && c <= '9')
		return C_DIGIT;
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
		return C_WORD;
	return C_OTHER;
}

/* Hash of a token (the shared byte hash of select/internal.h). */
static uint64_t hash_token(const char *s, size_t n)
{
	return rt_sel_hash_bytes(s, n, 0);
}

/* One pass over the line: mask alphanumeric runs containing a digit and split on
 * whitespace. Tokens point into d->mask_buf, NUL-separated; *len = bytes used. */
static unsigned mask_tokenize(rt_sel_drain *d, const char *line, size_t *len)
{
	const unsigned char *p = (const unsigned char *)line;
	char *o = d->mask_buf;
	unsigned n = 0;
	char *tok = NULL;
	for (;;) {
		unsigned char c = *p;
		unsigned char k = c ? d->cls[c] : C_SPACE;
		if (k == C_SPACE) {
			if (tok) {
				*o = '\0';
				d->toks[n++] = tok;
				o++;
				tok = NULL;
				if (n == d->cfg.max_tokens)
					break;
			}
			if (!c)
				break;
			p++;
			continue;
		}
		if (!tok)
			tok = o;
		if (k == C_OTHER) {
			*o++ = (char)*p++;
			continue;
		}
		const unsigned char *q = p;
		unsigned seen = 0, kq;
		while ((kq = d->cls[*q]) & 1) {
			seen |= kq;
			q++;
		}
		if (seen & 2) {
			memcpy(o, WILDCARD, 3);
			o += 3;
		} else {
			memcpy(o, p, (size_t)(q - p));
			o += q - p;
		}
		p = q;
	}
	*len = (size_t)(o - d->mask_buf);
	return n;
}

/* ---------------------------------------------------------------- line key */

/* The memo key of a line is a hash of its *normalised prefix*: the bytes before the
 * (max_tokens + 1)-th token (the whole line if it has fewer), with every byte of an
 * alphanumeric run that contains a digit set to 0. That prefix determines the masked,
 * truncated token list exactly (masking only asks which runs hold a digit; a NUL
 * never occurs inside a C string), so equal keys mean equal masked lines up to 64-bit
 * hash collisions, as with a hash of the masked text. It is computed on 64-bit masks,
 * 64 bytes at a time: (1) classify bytes into word / digit / space bits, count token
 * starts to find where the prefix ends; (2) mark digit runs: the carry of W + D runs
 * from the first digit of a run to its end, a doubling fill runs back to its start,
 * carries cross block edges; (3) hash the bytes with the marked ones cleared. Only the
 * prefix is read, in strnlen-checked chunks, never the rest of a long line. */

#ifdef DRAIN_SSE2
static inline __m128i sse_digits(__m128i r)
{
	__m128i t = _mm_sub_epi8(r, _mm_set1_epi8('0'));
	return _mm_cmpeq_epi8(_mm_min_epu8(t, _mm_set1_epi8(9)), t);
}

/* [A-Za-z_] */
static inline __m128i sse_letters(__m128i r)
{
	__m128i t = _mm_sub_epi8(_mm_or_si128(r, _mm_set1_epi8(0x20)), _mm_set1_epi8('a'));
	__m128i l = _mm_cmpeq_epi8(_mm_min_epu8(t, _mm_set1_epi8(25)), t);
	return _mm_or_si128(l, _mm_cmpeq_epi8(r, _mm_set1_epi8('_')));
}

static inline __m128i sse_spaces(__m128i r)
{
	__m128i a = _mm_or_si128(_mm_cmpeq_epi8(r, _mm_set1_epi8(' ')),
				 _mm_cmpeq_epi8(r, _mm_set1_epi8('\t')));
	__m128i b = _mm_or_si128(_mm_cmpeq_epi8(r, _mm_set1_epi8('\n')),
				 _mm_cmpeq_epi8(r, _mm_set1_epi8('\r')));
	return _mm_or_si128(a, b);
}

/* 16-bit mask → 16 bytes, 0xff where the bit is set. */
static inline __m128i sse_expand16(unsigned m)
{
	__m128i v = _mm_cvtsi32_si128((int)m);
	v = _mm_unpacklo_epi8(v, v);
	v = _mm_unpacklo_epi16(v, v);
	v = _mm_unpacklo_epi32(v, v); /* bytes 0-7: low byte of m, 8-15: high byte */
	const __m128i bits = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, (char)-128, 1, 2, 4, 8, 16, 32,
					   64, (char)-128);
	return _mm_cmpeq_epi8(_mm_and_si128(v, bits), bits);
}
#endif

/* Word, digit and space bits of 64 bytes. */
static inline void block_masks(const rt_sel_drain *d, const unsigned char *b, uint64_t *w,
			       uint64_t *dg, uint64_t *sp)
{
#ifdef DRAIN_SSE2
	(void)d;
	uint64_t W = 0, D = 0, S = 0;
	for (unsigned k = 0; k < 4; k++) {
		__m128i r = _mm_loadu_si128((const __m128i *)(b + 16 * k));
		__m128i dd = sse_digits(r);
		D |= (uint64_t)(unsigned)_mm_movemask_epi8(dd) << (16 * k);
		W |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_or_si128(dd, sse_letters(r)))
		     << (16 * k);
		S |= (uint64_t)(unsigned)_mm_movemask_epi8(sse_spaces(r)) << (16 * k);
	}
	*w = W;
	*dg = D;
	*sp = S;
#else
	uint64_t W = 0, D = 0, S = 0;
	for (unsigned i = 0; i < 64; i++) {
		unsigned char k = d->cls[b[i]];
		W |= (uint64_t)(k & 1) << i;
		D |= (uint64_t)((k >> 1) & 1) << i;
		S |= (uint64_t)(k == C_SPACE) << i;
	}
	*w = W;
	*dg = D;
	*sp = S;
#endif
}

static inline void hash_lanes(const uint64_t x[8], uint64_t h[4])
{
	for (unsigned k = 0; k < 4; k++) {
		uint64_t a = (h[k] ^ x[k]) * 0xbf58476d1ce4e5b9ull;
		a ^= a >> 29;
		a = (a ^ x[k + 4]) * 0x94d049bb133111ebull;
		h[k] = a ^ (a >> 32);
	}
}

/* One 64-byte block with the bits of m cleared, folded into four hash lanes. */
static inline void block_hash(const unsigned char *b, uint64_t m, uint64_t h[4])
{
	uint64_t x[8];
#ifdef DRAIN_SSE2
	for (unsigned k = 0; k < 4; k++) {
		__m128i r = _mm_loadu_si128((const __m128i *)(b + 16 * k));
		r = _mm_andnot_si128(sse_expand16((unsigned)(m >> (16 * k)) & 0xffffu), r);
		_mm_storeu_si128((__m128i *)(x + 2 * k), r);
	}
#else
	unsigned char t[64];
	for (unsigned i = 0; i < 64; i++)
		t[i] = (m >> i) & 1u ? 0 : b[i];
	memcpy(x, t, sizeof x);
#endif
	hash_lanes(x, h);
}

#ifdef DRAIN_AVX2
/* The same two steps on 32-byte vectors. Classes by nibble lookup: a byte's flags
 * are lut_hi[high nibble] & lut_lo[low nibble]; 0x80 digit, 0x01 A-O/a-o, 0x02
 * P-Z/p-z, 0x04 '_', 0x08 tab/LF/CR, 0x10 space. */
__attribute__((target("avx2"))) static inline void
block_masks_avx2(const unsigned char *b, uint64_t *w, uint64_t *dg, uint64_t *sp)
{
	const __m256i lut_hi = _mm256_setr_epi8(0x08, 0, 0x10, (char)0x80, 0x01, 0x06, 0x01, 0x02,
						0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0, 0x10, (char)0x80,
						0x01, 0x06, 0x01, 0x02, 0, 0, 0, 0, 0, 0, 0, 0);
	const __m256i lut_lo = _mm256_setr_epi8(
		(char)0x92, (char)0x83, (char)0x83, (char)0x83, (char)0x83, (char)0x83, (char)0x83,
		(char)0x83, (char)0x83, (char)0x8b, 0x0b, 0x01, 0x01, 0x09, 0x01, 0x05, (char)0x92,
		(char)0x83, (char)0x83, (char)0x83, (char)0x83, (char)0x83, (char)0x83, (char)0x83,
		(char)0x83, (char)0x8b, 0x0b, 0x01, 0x01, 0x09, 0x01, 0x05);
	const __m256i nib = _mm256_set1_epi8(0x0f);
	uint64_t W = 0, D = 0, S = 0;
	for (unsigned k = 0; k < 2; k++) {
		__m256i r = _mm256_loadu_si256((const __m256i *)(b + 32 * k));
		__m256i hi =
			_mm256_shuffle_epi8(lut_hi, _mm256_and_si256(_mm256_srli_epi16(r, 4), nib));
		__m256i lo = _mm256_shuffle_epi8(lut_lo, _mm256_and_si256(r, nib));
		__m256i f = _mm256_and_si256(hi, lo);
		__m256i word = _mm256_adds_epu8(_mm256_and_si256(f, _mm256_set1_epi8((char)0x87)),
						_mm256_set1_epi8(0x7f));
		__m256i space = _mm256_adds_epu8(_mm256_and_si256(f, _mm256_set1_epi8(0x18)),
						 _mm256_set1_epi8(0x7f));
		D |= (uint64_t)(uint32_t)_mm256_movemask_epi8(f) << (32 * k);
		W |= (uint64_t)(uint32_t)_mm256_movemask_epi8(word) << (32 * k);
		S |= (uint64_t)(uint32_t)_mm256_movemask_epi8(space) << (32 * k);
	}
	*w = W;
	*dg = D;
	*sp = S;
}

/* 32-bit mask → 32 bytes, 0xff where the bit is set. */
__attribute__((target("avx2"))) static inline __m256i avx2_expand32(uint32_t m)
{
	const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
					      2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)m), pick);
	return _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
}

/* Hash step of the AVX2 path (XXH3-style, all in vector registers): per 32 bytes
 * acc += lo32(v ^ s) × hi32(v ^ s) + v with its 64-bit halves swapped, and per
 * block acc is scrambled (xorshift, multiply) so block order matters. */
__attribute__((target("avx2"))) static inline void block_hash_avx2(const unsigned char *b,
								   uint64_t m, __m256i acc[2])
{
	const __m256i sec[2] = { _mm256_setr_epi64x((long long)0xbe4ba423396cfeb8ull,
						    (long long)0x1cad21f72c81017cull,
						    (long long)0xdb979083e96dd4deull,
						    (long long)0x1f67b3b7a4a44072ull),
				 _mm256_setr_epi64x((long long)0x78e5c0cc4ee679cbull,
						    (long long)0x2172ffcc7dd05a82ull,
						    (long long)0x8e2443f7744608b8ull,
						    (long long)0x4c263a81e69035e0ull) };
	const __m256i prime = _mm256_set1_epi32((int)0x9e3779b1u);
	for (unsigned k = 0; k < 2; k++) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(b + 32 * k));
		v = _mm256_andnot_si256(avx2_expand32((uint32_t)(m >> (32 * k))), v);
		__m256i kx = _mm256_xor_si256(v, sec[k]);
		__m256i prod = _mm256_mul_epu32(kx, _mm256_srli_epi64(kx, 32));
		__m256i a = _mm256_add_epi64(acc[k], _mm256_shuffle_epi32(v, 0x4e));
		a = _mm256_add_epi64(a, prod);
		a = _mm256_xor_si256(a, _mm256_srli_epi64(a, 47));
		a = _mm256_xor_si256(a, sec[1 - k]);
		__m256i lo = _mm256_mul_epu32(a, prime);
		__m256i hi = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), prime);
		acc[k] = _mm256_add_epi64(lo, _mm256_slli_epi64(hi, 32));
	}
}

/* All blocks of a line prefix; h[0..3] seed both accumulators, h[0..7] get them. */
__attribute__((target("avx2"))) static void hash_blocks_avx2(const scan_block *blk, size_t nb,
							     const unsigned char *s, uint64_t h[8])
{
	__m256i acc[2];
	acc[0] = acc[1] = _mm256_loadu_si256((const __m256i *)h);
	unsigned char pad[64];
	for (size_t i = 0; i < nb; i++) {
		const unsigned char *b = s + 64 * i;
		if (blk[i].v != ~0ull) { /* the last block: never read past the prefix */
			size_t valid = (size_t)__builtin_popcountll(blk[i].v);
			memset(pad, 0, sizeof pad);
			memcpy(pad, b, valid);
			b = pad;
		}
		block_hash_avx2(b, blk[i].m | ~blk[i].v, acc);
	}
	_mm256_storeu_si256((__m256i *)h, acc[0]);
	_mm256_storeu_si256((__m256i *)(h + 4), acc[1]);
}
#endif

static int grow_blocks(rt_sel_drain *d, size_t need)
{
	if (need <= d->blk_cap)
		return 0;
	size_t ncap = d->blk_cap ? d->blk_cap * 2 : 64;
	while (ncap < need)
		ncap *= 2;
	scan_block *nb = realloc(d->blk, ncap * sizeof *nb);
	if (!nb)
		return -1;
	d->blk = nb;
	d->blk_cap = ncap;
	return 0;
}

/* Position of the k-th (1-based) set bit of x; x has at least k. */
static unsigned nth_bit(uint64_t x, unsigned k)
{
	while (--k)
		x &= x - 1;
	return (unsigned)__builtin_ctzll(x);
}

/* The line's key (see above); *ok = false when out of memory; *plen = the bytes of
 * the prefix it hashes. */
static inline __attribute__((always_inline)) uint64_t
line_key_impl(rt_sel_drain *d, const char *line, bool *ok, size_t *plen, bool avx2)
{
	(void)avx2;
	const unsigned char *s = (const unsigned char *)line;
	size_t avail = strnlen(line, SCAN_CHUNK); /* bytes known to precede the NUL */
	bool at_end = avail < SCAN_CHUNK;
	unsigned tokens = 0;
	uint64_t prev_space = ~0ull; /* bit 63: the byte before the block is whitespace */
	size_t nb = 0, len = 0;
	unsigned char pad[64];
	*ok = true;
	for (size_t off = 0;; off += 64) {
		while (!at_end && off + 64 > avail) {
			size_t more = strnlen(line + avail, SCAN_CHUNK);
			at_end = more < SCAN_CHUNK;
			avail += more;
		}
		if (grow_blocks(d, nb + 1)) {
			*ok = false;
			return 0;
		}
		const unsigned char *b = s + off;
		size_t valid = avail - off < 64 ? avail - off : 64;
		if (valid < 64) {
			memset(pad, 0, sizeof pad);
			memcpy(pad, b, valid);
			b = pad;
		}
		uint64_t v = valid == 64 ? ~0ull : (1ull << valid) - 1;
		uint64_t w, dg, sp;
#ifdef DRAIN_AVX2
		if (avx2)
			block_masks_avx2(b, &w, &dg, &sp);
		else
#endif
			block_masks(d, b, &w, &dg, &sp);
		uint64_t tok = v & ~sp;
		uint64_t starts = tok & ~((tok << 1) | (~prev_space >> 63));
		unsigned k = (unsigned)__builtin_popcountll(starts);
		bool cut = false;
		if (tokens + k > d->cfg.max_tokens) { /* the prefix ends at the next token start */
			unsigned pos = nth_bit(starts, d->cfg.max_tokens - tokens + 1);
			v = pos ? (1ull << pos) - 1 : 0;
			cut = true;
		}
		tokens += k;
		prev_space = sp | ~v;
		d->blk[nb++] = (scan_block){ .w = w & v, .dg = dg & v, .v = v };
		len = off + (size_t)__builtin_popcountll(v);
		if (cut || valid < 64)
			break;
	}
	*plen = len;
	/* digit runs: forward (first digit .. end of run), carry into the next block */
	uint64_t cin = 0;
	for (size_t i = 0; i < nb; i++) {
		scan_block *bk = &d->blk[i];
		uint64_t seeds = bk->dg | (cin & bk->w & 1u);
		uint64_t f = (((bk->w + seeds) ^ bk->w) & bk->w) | seeds;
		cin = f >> 63;
		bk->m = f;
	}
	/* backward (start of run .. first digit), carry into the previous block */
	uint64_t bin = 0;
	for (size_t i = nb; i-- > 0;) {
		scan_block *bk = &d->blk[i];
		uint64_t m = bk->m | (bin & bk->w & (1ull << 63));
		uint64_t p = bk->w;
		m |= p & (m >> 1);
		p &= p >> 1;
		m |= p & (m >> 2);
		p &= p >> 2;
		m |= p & (m >> 4);
		p &= p >> 4;
		m |= p & (m >> 8);
		p &= p >> 8;
		m |= p & (m >> 16);
		p &= p >> 16;
		m |= p & (m >> 32);
		bk->m = m;
		bin = (m & 1u) << 63;
	}
	uint64_t h[8] = { 0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
			  0x082efa98ec4e6c89ull };
	unsigned lanes = 4;
#ifdef DRAIN_AVX2
	if (avx2) {
		hash_blocks_avx2(d->blk, nb, s, h);
		lanes = 8;
	} else
#endif
	{
		for (size_t i = 0; i < nb; i++) {
			const scan_block *bk = &d->blk[i];
			const unsigned char *b = s + 64 * i;
			if (bk->v != ~0ull) { /* the last block: never read past the prefix */
				size_t valid = (size_t)__builtin_popcountll(bk->v);
				memset(pad, 0, sizeof pad);
				memcpy(pad, b, valid);
				b = pad;
			}
			block_hash(b, bk->m | ~bk->v, h);
		}
	}
	uint64_t r = rt_sel_mix64(len);
	for (unsigned k = 0; k < lanes; k++) /* independent mixes: no serial chain */
		r ^= rt_sel_mix64(h[k] + (k + 1) * 0x632be59bd9b4e019ull);
	return rt_sel_mix64(r);
}

#ifdef DRAIN_AVX2
__attribute__((target("avx2,popcnt"))) static uint64_t
line_key_avx2(rt_sel_drain *d, const char *line, bool *ok, size_t *plen)
{
	return line_key_impl(d, line, ok, plen, true);
}
#endif

static uint64_t line_key(rt_sel_drain *d, const char *line, bool *ok, size_t *plen)
{
#ifdef DRAIN_AVX2
	if (d->avx2)
		return line_key_avx2(d, line, ok, plen);
#endif
	return line_key_impl(d, line, ok, plen, false);
}

/* ---------------------------------------------------------------- exemplar cache */

/* Lines shorter than EX_MAX_LINE first try the exemplar cache: a line whose whole
 * normalised form equals a remembered one gets that line's cluster. The bucket key
 * (length, first and last 32 bytes with digit runs blanked, plus the run touching
 * the inner window edge, which cannot be judged from inside the window) depends only
 * on the normalised line, and a candidate is checked byte for byte: mostly 16-byte
 * compares, cheaper than computing the exact line key. */

/* Normalised bytes of line (n bytes) into out. */
static void normalise_line(const rt_sel_drain *d, const unsigned char *line, size_t n,
			   unsigned char *out)
{
	size_t i = 0;
	while (i < n) {
		if (!(d->cls[line[i]] & 1)) {
			out[i] = line[i];
			i++;
			continue;
		}
		size_t e = i;
		unsigned seen = 0;
		while (e < n && (d->cls[line[e]] & 1))
			seen |= d->cls[line[e++]];
		if (seen & 2)
			memset(out + i, 0, e - i);
		else
			memcpy(out + i, line + i, e - i);
		i = e;
	}
}

/* Bits of a 32-byte window the key blanks (w: word bytes, dg: digits). */
static uint32_t window_blank(uint32_t w, uint32_t dg, bool head)
{
	uint64_t W = w, D = dg;
	uint64_t m = ((((W + D) ^ W) & W) | D) & 0xffffffffu;
	uint64_t p = W;
	m |= p & (m >> 1);
	p &= p >> 1;
	m |= p & (m >> 2);
	p &= p >> 2;
	m |= p & (m >> 4);
	p &= p >> 4;
	m |= p & (m >> 8);
	p &= p >> 8;
	m |= p & (m >> 16);
	if (head) {
		if (w >> 31) {
			uint32_t gap = ~w & 0x7fffffffu;
			m |= gap ? w & ~((2u << (31 - __builtin_clz(gap))) - 1u) : w;
		}
	} else if (w & 1u) {
		uint32_t nw = ~w;
		m |= nw ? (1u << __builtin_ctz(nw)) - 1u : w;
	}
	return (uint32_t)m;
}

static void window_key(const rt_sel_drain *d, const unsigned char *win, bool head,
		       unsigned char *out)
{
#ifdef DRAIN_SSE2
	(void)d;
	__m128i a = _mm_loadu_si128((const __m128i *)win);
	__m128i b = _mm_loadu_si128((const __m128i *)(win + 16));
	__m128i da = sse_digits(a), db = sse_digits(b);
	uint32_t dg = (uint32_t)_mm_movemask_epi8(da) | (uint32_t)_mm_movemask_epi8(db) << 16;
	uint32_t w = (uint32_t)_mm_movemask_epi8(_mm_or_si128(da, sse_letters(a))) |
		     (uint32_t)_mm_movemask_epi8(_mm_or_si128(db, sse_letters(b))) << 16;
	uint32_t m = window_blank(w, dg, head);
	_mm_storeu_si128((__m128i *)out, _mm_andnot_si128(sse_expand16(m & 0xffffu), a));
	_mm_storeu_si128((__m128i *)(out + 16), _mm_andnot_si128(sse_expand16(m >> 16), b));
#else
	uint32_t w = 0, dg = 0;
	for (unsigned i = 0; i < 32; i++) {
		unsigned char k = d->cls[win[i]];
		w |= (uint32_t)(k & 1) << i;
		dg |= (uint32_t)((k >> 1) & 1) << i;
	}
	uint32_t m = window_blank(w, dg, head);
	for (unsigned i = 0; i < 32; i++)
		out[i] = (m >> i) & 1u ? 0 : win[i];
#endif
}

static uint64_t ex_key(const rt_sel_drain *d, const unsigned char *line, size_t n)
{
	unsigned char pad[32], w[64];
	const unsigned char *head = line, *tail = line + n - 32;
	if (n < 32) {
		memset(pad, 0xff, sizeof pad);
		memcpy(pad, line, n);
		head = tail = pad;
	}
	window_key(d, head, true, w);
	window_key(d, tail, false, w + 32);
	return rt_sel_hash_bytes(w, sizeof w, n);
}

/* Does the line (n bytes) normalise to ex? Non-NUL bytes must be equal; each NUL run
 * of ex must be alphanumeric in the line and hold a digit (its neighbours in ex are
 * non-alphanumeric and compared equal, so the run is maximal in the line too). */
static bool ex_verify(const rt_sel_drain *d, const unsigned char *raw, const unsigned char *ex,
		      size_t n)
{
#ifdef DRAIN_SSE2
	(void)d;
	/* mk = NUL bytes of ex. Adding the run starts to mk & ~digit carries through a
     * digit-free run and out of its top into a non-mk bit (fail), or out of the
     * vector (pending, settled by the next vector). */
	const __m128i zero = _mm_setzero_si128();
	unsigned pending = 0, prev_top = 0;
	unsigned char rb[16], eb[16];
	for (size_t i = 0; i < n; i += 16) {
		__m128i r, s;
		if (i + 16 <= n) {
			r = _mm_loadu_si128((const __m128i *)(raw + i));
			s = _mm_loadu_si128((const __m128i *)(ex + i));
		} else { /* tail: pad with equal non-alphanumeric bytes */
			memset(rb, 0xff, sizeof rb);
			memset(eb, 0xff, sizeof eb);
			memcpy(rb, raw + i, n - i);
			memcpy(eb, ex + i, n - i);
			r = _mm_loadu_si128((const __m128i *)rb);
			s = _mm_loadu_si128((const __m128i *)eb);
		}
		unsigned eq = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(r, s));
		if (eq == 0xffffu) { /* no NUL in ex here */
			if (pending)
				return false;
			prev_top = 0;
			continue;
		}
		unsigned mk = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(s, zero));
		if ((eq | mk) != 0xffffu)
			return false;
		__m128i dv = sse_digits(r);
		unsigned dig = (unsigned)_mm_movemask_epi8(dv);
		unsigned word = (unsigned)_mm_movemask_epi8(_mm_or_si128(dv, sse_letters(r)));
		if ((mk & ~word) || (pending && !(mk & 1u)))
			return false;
		unsigned starts = (mk & ~((mk << 1) | prev_top)) | pending;
		unsigned sum = (mk & ~dig) + starts;
		if (sum & ~mk & 0xffffu)
			return false;
		pending = (sum >> 16) & 1u;
		prev_top = (mk >> 15) & 1u;
	}
	return !pending;
#else
	bool in_run = false, digit = false;
	for (size_t i = 0; i < n; i++) {
		unsigned char k = d->cls[raw[i]];
		if (ex[i]) {
			if ((in_run && !digit) || ex[i] != raw[i])
				return false;
			in_run = false;
			continue;
		}
		if (!(k & 1))
			return false;
		if (!in_run)
			digit = false;
		in_run = true;
		digit |= (k & 2) != 0;
	}
	return !in_run || digit;
#endif
}

#ifdef DRAIN_AVX2
/* A line's last vector may be loaded whole when it does not cross a page (no fault
 * possible), except under AddressSanitizer, which would report the bytes past the
 * string's end; those builds take the copying path. */
#if defined(__SANITIZE_ADDRESS__)
#define TAIL_LOAD_OK 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TAIL_LOAD_OK 0
#endif
#endif
#ifndef TAIL_LOAD_OK
#define TAIL_LOAD_OK 1
#endif
/* 32 zero bytes then 32 0xff: loaded at 32 - k, the first k bytes are 0 */
static const unsigned char tail_pad[64] = {
	0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
	0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
	0,    0,    0,    0,    0,    0,    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
};

/* ex_verify on 32-byte vectors, without branches on the data (one verdict at the
 * end: the check nearly always succeeds, and early exits mispredict). */
__attribute__((target("avx2"))) static bool ex_verify_avx2(const unsigned char *raw,
							   const unsigned char *ex, size_t n)
{
	const __m256i lut_hi = _mm256_setr_epi8(0x08, 0, 0x10, (char)0x80, 0x01, 0x06, 0x01, 0x02,
						0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0, 0x10, (char)0x80,
						0x01, 0x06, 0x01, 0x02, 0, 0, 0, 0, 0, 0, 0, 0);
	const __m256i lut_lo = _mm256_setr_epi8(
		(char)0x92, (char)0x83, (char)0x83, (char)0x83, (char)0x83, (char)0x83, (char)0x83,
		(char)0x83, (char)0x83, (char)0x8b, 0x0b, 0x01, 0x01, 0x09, 0x01, 0x05, (char)0x92,
		(char)0x83, (char)0x83, (char)0x83, (char)0x83, (char)0x83, (char)0x83, (char)0x83,
		(char)0x83, (char)0x8b, 0x0b, 0x01, 0x01, 0x09, 0x01, 0x05);
	const __m256i nib = _mm256_set1_epi8(0x0f);
	const __m256i zero = _mm256_setzero_si256();
	uint64_t bad = 0, pending = 0, prev_top = 0;
	unsigned char rb[32], eb[32];
	for (size_t i = 0; i < n; i += 32) {
		__m256i r, e;
		if (i + 32 <= n) {
			r = _mm256_loadu_si256((const __m256i *)(raw + i));
			e = _mm256_loadu_si256((const __m256i *)(ex + i));
		} else if (TAIL_LOAD_OK && ((uintptr_t)(raw + i) & 4095) <= 4096 - 32) {
			/* tail, one load each: the line's vector stays inside its page, the
             * remembered line's inside the arena's padding; bytes past n become
             * equal non-alphanumeric bytes (the copying path below cost four libc
             * calls per line) */
			__m256i pad =
				_mm256_loadu_si256((const __m256i *)(tail_pad + 32 - (n - i)));
			r = _mm256_or_si256(_mm256_loadu_si256((const __m256i *)(raw + i)), pad);
			e = _mm256_or_si256(_mm256_loadu_si256((const __m256i *)(ex + i)), pad);
		} else { /* tail: pad with equal non-alphanumeric bytes */
			memset(rb, 0xff, sizeof rb);
			memset(eb, 0xff, sizeof eb);
			memcpy(rb, raw + i, n - i);
			memcpy(eb, ex + i, n - i);
			r = _mm256_loadu_si256((const __m256i *)rb);
			e = _mm256_loadu_si256((const __m256i *)eb);
		}
		uint64_t eq = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(r, e));
		uint64_t mk = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(e, zero));
		__m256i hi =
			_mm256_shuffle_epi8(lut_hi, _mm256_and_si256(_mm256_srli_epi16(r, 4), nib));
		__m256i lo = _mm256_shuffle_epi8(lut_lo, _mm256_and_si256(r, nib));
		__m256i f = _mm256_and_si256(hi, lo);
		uint64_t dig = (uint32_t)_mm256_movemask_epi8(f);
		uint64_t word = (uint32_t)_mm256_movemask_epi8(_mm256_adds_epu8(
			_mm256_and_si256(f, _mm256_set1_epi8((char)0x87)), _mm256_set1_epi8(0x7f)));
		bad |= ~(eq | mk) & 0xffffffffu;
		bad |= mk & ~word;
		bad |= pending & ~mk;
		uint64_t starts = (mk & ~((mk << 1) | prev_top)) | pending;
		uint64_t sum = (mk & ~dig) + starts;
		bad |= sum & ~mk & 0xffffffffu;
		pending = (sum >> 32) & 1u;
		prev_top = (mk >> 31) & 1u;
	}
	return !bad && !pending;
}
#endif

/* Way w of a set to the front, the ways before it one back: a loop, not memmove,
 * which was a libc call on every hit (w is nearly always 0). */
static inline void ex_to_front(ex_entry *set, unsigned w)
{
	ex_entry e = set[w];
	for (; w > 0; w--)
		set[w] = set[w - 1];
	set[0] = e;
}

static bool ex_live(const rt_sel_drain *d, const ex_entry *e)
{
	return e->id && e->c->id == e->id && d->ex_pos - e->pos <= d->ex_cap;
}

/* Does the line (n bytes) normalise to the remembered line at arena position pos? */
static inline bool ex_check(const rt_sel_drain *d, const unsigned char *line, uint64_t pos,
			    size_t n)
{
	const unsigned char *x = d->ex_arena + pos % d->ex_cap;
#ifdef DRAIN_AVX2
	return d->avx2 ? ex_verify_avx2(line, x, n) : ex_verify(d, line, x, n);
#else
	return ex_verify(d, line, x, n);
#endif
}

/* The cluster of a remembered line equal to this one after normalising, or NULL. */
static cluster *ex_lookup(rt_sel_drain *d, ex_entry *set, uint64_t key, const unsigned char *line,
			  size_t n)
{
	for (unsigned w = 0; w < EX_WAYS; w++) {
		ex_entry *e = &set[w];
		if (e->key != key || e->len != n || !ex_live(d, e))
			continue;
		if (!ex_check(d, line, e->pos, n))
			continue;
		ex_to_front(set, w);
		return set[0].c;
	}
	return NULL;
}

/* The predictor's key: the length and the first PRED_MIN raw bytes (n >= PRED_MIN). */
static inline uint64_t pred_key(const unsigned char *line, size_t n)
{
	uint64_t a, b;
	memcpy(&a, line, 8);
	memcpy(&b, line + 8, 8);
	uint64_t h = (a ^ ((uint64_t)n << 48)) * 0x9e3779b97f4a7c15ull;
	h = (h ^ (h >> 29) ^ b) * 0xbf58476d1ce4e5b9ull;
	return (h ^ (h >> 32)) | 1u; /* never 0, the empty tag */
}

static inline pred_entry *pred_slot(rt_sel_drain *d, uint64_t pk)
{
	return &d->pred[(pk >> 20) & (PRED_SIZE - 1)];
}

/* The predicted exemplar's cluster if that exemplar is still in its set, live, and
 * the line normalises to it; NULL otherwise. Exact, as ex_lookup: a remembered line
 * sits in the set of its own bucket key, a function of its normalised form, so an
 * exemplar the line normalises to is in the line's set; and a set never holds two
 * live exemplars of one normalised line (one is inserted only after a lookup found
 * none), so ex_lookup would have returned this one. It is moved to the front of
 * its set as ex_lookup moves a hit, so the set's order, and with it every later
 * eviction, is the same as without the predictor. */
static cluster *pred_lookup(rt_sel_drain *d, const pred_entry *p, const unsigned char *line,
			    size_t n)
{
	ex_entry *set = &d->ex[(size_t)p->set * EX_WAYS];
	if (p->c->id != p->id || d->ex_pos - p->pos > d->ex_cap)
		return NULL;
	unsigned w = 0;
	while (w < EX_WAYS && !(set[w].pos == p->pos && set[w].id == p->id && set[w].len == n))
		w++;
	if (w == EX_WAYS || !ex_check(d, line, p->pos, n))
		return NULL;
	ex_to_front(set, w);
	return set[0].c;
}

/* The exemplar at the front of the set of bucket key, as the guess for pk. */
static inline void pred_remember(pred_entry *p, uint64_t pk, const ex_entry *set, uint64_t key)
{
	*p = (pred_entry){ .tag = pk,
			   .pos = set[0].pos,
			   .c = set[0].c,
			   .id = set[0].id,
			   .set = (uint32_t)(key & (EX_SETS - 1)) };
}

static void ex_insert(rt_sel_drain *d, ex_entry *set, uint64_t key, const unsigned char *line,
		      size_t n, cluster *c)
{
	unsigned w = EX_WAYS - 1; /* a dead way, else the least recent one */
	for (unsigned i = 0; i < EX_WAYS; i++)
		if (!ex_live(d, &set[i])) {
			w = i;
			break;
		}
	memmove(set + 1, set, w * sizeof *set);
	size_t off = (size_t)(d->ex_pos % d->ex_cap);
	if (off + n > d->ex_cap) { /* does not fit before the arena end: next lap */
		d->ex_pos += d->ex_cap - off;
		off = 0;
	}
	set[0] =
		(ex_entry){ .key = key, .pos = d->ex_pos, .c = c, .len = (uint32_t)n, .id = c->id };
	d->ex_pos += n;
	normalise_line(d, line, n, d->ex_arena + off);
}

/* ---------------------------------------------------------------- lifecycle */

void rt_sel_drain_config_default(rt_sel_drain_config *cfg)
{
	cfg->depth = 4;
	cfg->sim_threshold = 0.4;
	cfg->max_children = 100;
	cfg->max_clusters = 4096;
	cfg->max_tokens = 128;
}

rt_sel_drain *rt_sel_drain_create(const rt_sel_drain_config *cfg)
{
	rt_sel_drain *d = calloc(1, sizeof *d);
	if (!d)
		return NULL;
	if (cfg)
		d->cfg = *cfg;
	else
		rt_sel_drain_config_default(&d->cfg);
	if (d->cfg.depth < 3)
		d->cfg.depth = 3;
	if (d->cfg.max_children < 2)
		d->cfg.max_children = 2;
	if (d->cfg.max_clusters < 1)
		d->cfg.max_clusters = 1;
	if (d->cfg.max_tokens < 1)
		d->cfg.max_tokens = 1;
	d->pool = calloc(d->cfg.max_clusters, sizeof *d->pool);
	d->toks = calloc(d->cfg.max_tokens, sizeof *d->toks);
	d->tok_hash = calloc(d->cfg.max_tokens, sizeof *d->tok_hash);
	/* exemplar arena: 256 bytes per cluster, between 64 KiB and 1 MiB */
	size_t cap = d->cfg.max_clusters * 256;
	d->ex_cap = cap < ((size_t)64 << 10)  ? (size_t)64 << 10
		    : cap > ((size_t)1 << 20) ? (size_t)1 << 20
					      : cap;
	d->ex = calloc(EX_SETS * EX_WAYS, sizeof *d->ex);
	d->ex_arena = malloc(d->ex_cap + 32); /* + 32: a line's last vector may read past it */
	d->pred = calloc(PRED_SIZE, sizeof *d->pred);
	if (!d->pool || !d->toks || !d->tok_hash || !d->ex || !d->ex_arena || !d->pred) {
		free(d->pool);
		free(d->toks);
		free(d->tok_hash);
		free(d->ex);
		free(d->ex_arena);
		free(d->pred);
		free(d);
		return NULL;
	}
	d->ex_pos = d->ex_cap;
	d->bytes += EX_SETS * EX_WAYS * sizeof *d->ex + d->ex_cap + PRED_SIZE * sizeof *d->pred;
	for (size_t i = d->cfg.max_clusters; i-- > 0;) {
		d->pool[i].older = d->free_list;
		d->free_list = &d->pool[i];
	}
	for (int c = 0; c < 256; c++)
		d->cls[c] = char_class((unsigned char)c);
	d->wild_hash = hash_token(WILDCARD, 3);
	d->next_id = 1;
#ifdef DRAIN_AVX2
	d->avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
#endif
	return d;
}

static void free_node(rt_sel_drain *d, node *n)
{
	for (size_t i = 0; i < n->nchild; i++) {
		free_node(d, n->child[i]);
		dfree(d, n->child[i]);
	}
	dfree(d, n->child);
	dfree(d, n->cl);
	dfree(d, n->token);
}

static void free_cluster_tokens(rt_sel_drain *d, cluster *c)
{
	for (unsigned i = 0; i < c->ntok; i++)
		if (c->tok[i] != WILDCARD)
			dfree(d, c->tok[i]);
	dfree(d, c->tok);
	c->tok = NULL;
	c->ntok = 0;
}

void rt_sel_drain_destroy(rt_sel_drain *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->cfg.max_clusters; i++)
		if (d->pool[i].id)
			free_cluster_tokens(d, &d->pool[i]);
	free_node(d, &d->root);
	free(d->pool);
	free(d->toks);
	free(d->tok_hash);
	free(d->mask_buf);
	free(d->blk);
	free(d->ex);
	free(d->ex_arena);
	free(d->pred);
	free(d);
}

size_t rt_sel_drain_cluster_count(const rt_sel_drain *d)
{
	return d->n_live;
}
size_t rt_sel_drain_bytes(const rt_sel_drain *d)
{
	return d->bytes;
}

/* ---------------------------------------------------------------- LRU list */

static void lru_unlink(rt_sel_drain *d, cluster *c)
{
	if (c->newer)
		c->newer->older = c->older;
	else
		d->newest = c->older;
	if (c->older)
		c->older->newer = c->newer;
	else
		d->oldest = c->newer;
	c->newer = c->older = NULL;
}

static void lru_push_newest(rt_sel_drain *d, cluster *c)
{
	c->older = d->newest;
	c->newer = NULL;
	if (d->newest)
		d->newest->newer = c;
	d->newest = c;
	if (!d->oldest)
		d->oldest = c;
}

static void lru_touch(rt_sel_drain *d, cluster *c)
{
	if (d->newest == c)
		return;
	lru_unlink(d, c);
	lru_push_newest(d, c);
}

/* ---------------------------------------------------------------- tree */

static node *find_child(node *n, const char *tok, uint64_t h)
{
	for (size_t i = 0; i < n->nchild; i++)
		if (n->child[i]->token_hash == h && strcmp(n->child[i]->token, tok) == 0)
			return n->child[i];
	return NULL;
}

static node *add_child(rt_sel_drain *d, node *n, const char *tok, uint64_t h)
{
	if (n->nchild == n->capchild) {
		size_t ncap = n->capchild ? n->capchild * 2 : 4;
		node **nc = drealloc(d, n->child, n->capchild * sizeof *nc, ncap * sizeof *nc);
		if (!nc)
			return NULL;
		n->child = nc;
		n->capchild = ncap;
	}
	node *c = dalloc(d, sizeof *c);
	if (!c)
		return NULL;
	memset(c, 0, sizeof *c);
	c->token = dstrdup(d, tok);
	if (!c->token) {
		dfree(d, c);
		return NULL;
	}
	c->token_hash = h;
	c->parent = n;
	n->child[n->nchild++] = c;
	return c;
}

/* Child for tok, creating it (or falling back to the wildcard child) if absent. */
static node *descend(rt_sel_drain *d, node *n, const char *tok, uint64_t h, bool create)
{
	node *c = find_child(n, tok, h);
	if (c || !create)
		return c;
	uint64_t wh = d->wild_hash;
	node *wild = strcmp(tok, WILDCARD) == 0 ? NULL : find_child(n, WILDCARD, wh);
	size_t reserved = wild ? 0 : 1; /* keep a slot for the wildcard child */
	if (strcmp(tok, WILDCARD) != 0 && n->nchild + reserved < d->cfg.max_children)
		return add_child(d, n, tok, h);
	if (wild)
		return wild;
	return add_child(d, n, WILDCARD, wh);
}

static node *route(rt_sel_drain *d, char **toks, const uint64_t *hashes, unsigned ntok, bool create)
{
	char lenkey[16];
	snprintf(lenkey, sizeof lenkey, "#%u", ntok);
	uint64_t h = hash_token(lenkey, strlen(lenkey));
	node *n = find_child(&d->root, lenkey, h);
	if (!n) {
		if (!create)
			return NULL;
		n = add_child(d, &d->root, lenkey, h);
		if (!n)
			return NULL;
	}
	unsigned layers = d->cfg.depth - 3; /* root, length and leaf are not token layers */
	for (unsigned i = 0; i < layers && i < ntok && n; i++) {
		node *c = descend(d, n, toks[i], hashes[i], create);
		if (!c) /* lookup only: unseen tokens may still match the wildcard branch */
			c = find_child(n, WILDCARD, d->wild_hash);
		n = c;
	}
	return n;
}

static void remove_child(rt_sel_drain *d, node *parent, node *child)
{
	for (size_t i = 0; i < parent->nchild; i++) {
		if (parent->child[i] == child) {
			parent->child[i] = parent->child[--parent->nchild];
			break;
		}
	}
	free_node(d, child);
	dfree(d, child);
}

static void prune_empty(rt_sel_drain *d, node *n)
{
	while (n && n != &d->root && n->nchild == 0 && n->ncl == 0) {
		node *p = n->parent;
		remove_child(d, p, n);
		n = p;
	}
}

/* ---------------------------------------------------------------- clusters */

static void leaf_remove(cluster *c)
{
	node *leaf = c->leaf;
	cluster *last = leaf->cl[--leaf->ncl];
	leaf->cl[c->leaf_pos] = last;
	last->leaf_pos = c->leaf_pos;
	c->leaf = NULL;
}

static void evict_oldest(rt_sel_drain *d)
{
	cluster *c = d->oldest;
	lru_unlink(d, c);
	node *leaf = c->leaf;
	leaf_remove(c);
	free_cluster_tokens(d, c);
	c->id = 0;
	c->older = d->free_list;
	d->free_list = c;
	d->n_live--;
	prune_empty(d, leaf);
}

static cluster *new_cluster(rt_sel_drain *d, node *leaf, char **toks, unsigned ntok)
{
	if (leaf->ncl == leaf->capcl) {
		size_t ncap = leaf->capcl ? leaf->capcl * 2 : 4;
		cluster **nc = drealloc(d, leaf->cl, leaf->capcl * sizeof *nc, ncap * sizeof *nc);
		if (!nc)
			return NULL;
		leaf->cl = nc;
		leaf->capcl = ncap;
	}
	cluster *c = d->free_list;
	d->free_list = c->older;
	memset(c, 0, sizeof *c);
	c->tok = dalloc(d, ntok * sizeof *c->tok);
	if (!c->tok && ntok) {
		c->older = d->free_list;
		d->free_list = c;
		return NULL;
	}
	for (unsigned i = 0; i < ntok; i++) {
		c->tok[i] = strcmp(toks[i], WILDCARD) == 0 ? (char *)WILDCARD : dstrdup(d, toks[i]);
		if (!c->tok[i])
			c->tok[i] = (char *)WILDCARD; /* out of memory: degrade to a variable */
	}
	c->ntok = ntok;
	c->id = RT_SEL_MINED_TEMPLATE_BIT | d->next_id++;
	if (d->next_id >= RT_SEL_MINED_TEMPLATE_BIT)
		d->next_id = 1; /* after 2^31 clusters ids wrap; never happens in one run */
	c->leaf = leaf;
	c->leaf_pos = leaf->ncl;
	leaf->cl[leaf->ncl++] = c;
	lru_push_newest(d, c);
	d->n_live++;
	return c;
}

/* Share of positions where the template has the same concrete token. */
static double similarity(const cluster *c, char **toks, unsigned ntok, unsigned *params)
{
	unsigned same = 0;
	*params = 0;
	for (unsigned i = 0; i < ntok; i++) {
		if (c->tok[i] == WILDCARD)
			(*params)++;
		else if (strcmp(c->tok[i], toks[i]) == 0)
			same++;
	}
	return ntok ? (double)same / ntok : 1.0;
}

static cluster *best_match(node *leaf, char **toks, unsigned ntok, double threshold)
{
	cluster *best = NULL;
	double best_sim = -1.0;
	unsigned best_params = 0;
	for (size_t i = 0; i < leaf->ncl; i++) {
		unsigned params;
		double sim = similarity(leaf->cl[i], toks, ntok, &params);
		if (sim > best_sim || (sim == best_sim && params > best_params)) {
			best = leaf->cl[i];
			best_sim = sim;
			best_params = params;
		}
	}
	return best && best_sim >= threshold ? best : NULL;
}

static void generalise(rt_sel_drain *d, cluster *c, char **toks)
{
	for (unsigned i = 0; i < c->ntok; i++) {
		if (c->tok[i] != WILDCARD && strcmp(c->tok[i], toks[i]) != 0) {
			dfree(d, c->tok[i]);
			c->tok[i] = (char *)WILDCARD;
		}
	}
}

/* Memo (by line key), else mask, tokenise, route and match. */
static cluster *drain_mine(rt_sel_drain *d, const char *line)
{
	bool ok;
	size_t plen;
	uint64_t h = line_key(d, line, &ok, &plen);
	if (!ok)
		return NULL;
	memo_entry *m = &d->memo[h & (MEMO_SIZE - 1)];
	if (m->line_hash == h && m->c && m->c->id == m->id) {
		lru_touch(d, m->c);
		return m->c;
	}
	/* masking can grow a 1-char run to "<*>"; it stops inside the prefix the key read
	 * (the max_tokens-th token ends before it), so a long line's rest is never read */
	size_t need = plen * 3 + 1;
	if (need > d->mask_cap) {
		char *b = realloc(d->mask_buf, need);
		if (!b)
			return NULL;
		d->mask_buf = b;
		d->mask_cap = need;
	}
	size_t used;
	unsigned ntok = mask_tokenize(d, line, &used);
	/* the masked text itself (NULs keep token boundaries): lines that differ only in
     * how long their variable parts are meet here */
	uint64_t mh = hash_token(d->mask_buf, used);
	memo_entry *mm = &d->mmemo[mh & (MMEMO_SIZE - 1)];
	if (mm->line_hash == mh && mm->c && mm->c->id == mm->id) {
		lru_touch(d, mm->c);
		*m = (memo_entry){ .line_hash = h, .c = mm->c, .id = mm->id };
		return mm->c;
	}
	unsigned layers = d->cfg.depth - 3;
	for (unsigned i = 0; i < layers && i < ntok; i++) /* only routed tokens need one */
		d->tok_hash[i] = hash_token(d->toks[i], strlen(d->toks[i]));
	node *leaf = route(d, d->toks, d->tok_hash, ntok, true);
	if (!leaf)
		return NULL;
	cluster *c = best_match(leaf, d->toks, ntok, d->cfg.sim_threshold);
	if (c) {
		generalise(d, c, d->toks);
		lru_touch(d, c);
	} else {
		if (d->n_live == d->cfg.max_clusters) {
			/* Eviction may prune the leaf we routed to: route again afterwards. */
			evict_oldest(d);
			leaf = route(d, d->toks, d->tok_hash, ntok, true);
			if (!leaf)
				return NULL;
		}
		c = new_cluster(d, leaf, d->toks, ntok);
		if (!c)
			return NULL;
	}
	*m = (memo_entry){ .line_hash = h, .c = c, .id = c->id };
	*mm = (memo_entry){ .line_hash = mh, .c = c, .id = c->id };
	return c;
}

/* n = strnlen(line, EX_MAX_LINE): the exemplar cache's length of the line. */
static uint32_t add_measured(rt_sel_drain *d, const char *line, size_t n)
{
	const unsigned char *ul = (const unsigned char *)line;
	ex_entry *set = NULL;
	pred_entry *p = NULL;
	uint64_t key = 0, pk = 0;
	if (n > 0 && n < EX_MAX_LINE && n <= d->ex_cap / 16) {
		if (n >= PRED_MIN) { /* the guess first: no bucket key to compute */
			pk = pred_key(ul, n);
			p = pred_slot(d, pk);
			cluster *c = p->tag == pk ? pred_lookup(d, p, ul, n) : NULL;
			if (c) {
				lru_touch(d, c);
				return c->id;
			}
		}
		key = ex_key(d, ul, n);
		set = &d->ex[(size_t)(key & (EX_SETS - 1)) * EX_WAYS];
		cluster *c = ex_lookup(d, set, key, ul, n);
		if (c) {
			lru_touch(d, c);
			if (p) /* the hit is at the front of its set now */
				pred_remember(p, pk, set, key);
			return c->id;
		}
	}
	cluster *c = drain_mine(d, line);
	if (!c)
		return 0;
	if (set) {
		ex_insert(d, set, key, ul, n, c);
		if (p)
			pred_remember(p, pk, set, key);
	}
	return c->id;
}

uint32_t rt_sel_drain_add(rt_sel_drain *d, const char *line)
{
	return add_measured(d, line, strnlen(line, EX_MAX_LINE));
}

uint32_t rt_sel_drain_add_len(rt_sel_drain *d, const char *line, size_t len)
{
	return add_measured(d, line, len < EX_MAX_LINE ? len : EX_MAX_LINE);
}

const char *rt_sel_drain_kernels(const rt_sel_drain *d)
{
#ifdef DRAIN_AVX2
	if (d->avx2)
		return "avx2";
#endif
	(void)d;
#ifdef DRAIN_SSE2
	return "sse2";
#else
	return "scalar";
#endif
}

bool rt_sel_drain_template(const rt_sel_drain *d, uint32_t id, char *buf, size_t len)
{
	for (size_t i = 0; i < d->cfg.max_clusters; i++) {
		const cluster *c = &d->pool[i];
		if (c->id != id || id == 0)
			continue;
		size_t o = 0;
		if (len)
			buf[0] = '\0';
		for (unsigned t = 0; t < c->ntok; t++) {
			int w = snprintf(buf + o, o < len ? len - o : 0, "%s%s", t ? " " : "",
					 c->tok[t]);
			if (w > 0)
				o += (size_t)w;
		}
		return true;
	}
	return false;
}
