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
 * cluster for its whole life. A small direct-mapped memo from the hash of a masked
 * line to its cluster skips the tree for lines seen recently; entries are validated
 * against the cluster id so evictions never leave a dangling match.
 */
#include "internal.h"
#include "select.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#define MEMO_SIZE 4096
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
    memo_entry memo[MEMO_SIZE];
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
    if (!d->pool || !d->toks || !d->tok_hash) {
        free(d->pool);
        free(d->toks);
        free(d->tok_hash);
        free(d);
        return NULL;
    }
    for (size_t i = d->cfg.max_clusters; i-- > 0;) {
        d->pool[i].older = d->free_list;
        d->free_list = &d->pool[i];
    }
    for (int c = 0; c < 256; c++)
        d->cls[c] = char_class((unsigned char)c);
    d->wild_hash = hash_token(WILDCARD, 3);
    d->next_id = 1;
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
    free(d);
}

size_t rt_sel_drain_cluster_count(const rt_sel_drain *d) { return d->n_live; }
size_t rt_sel_drain_bytes(const rt_sel_drain *d) { return d->bytes; }

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

static node *route(rt_sel_drain *d, char **toks, const uint64_t *hashes, unsigned ntok,
                   bool create)
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

uint32_t rt_sel_drain_add(rt_sel_drain *d, const char *line)
{
    size_t need = strlen(line) * 3 + 1; /* masking can grow a 1-char run to "<*>" */
    if (need > d->mask_cap) {
        char *b = realloc(d->mask_buf, need);
        if (!b)
            return 0;
        d->mask_buf = b;
        d->mask_cap = need;
    }
    size_t used;
    unsigned ntok = mask_tokenize(d, line, &used);
    uint64_t h = hash_token(d->mask_buf, used); /* NULs keep token boundaries */
    unsigned layers = d->cfg.depth - 3;
    for (unsigned i = 0; i < layers && i < ntok; i++) /* only routed tokens need one */
        d->tok_hash[i] = hash_token(d->toks[i], strlen(d->toks[i]));
    memo_entry *m = &d->memo[h & (MEMO_SIZE - 1)];
    if (m->line_hash == h && m->c && m->c->id == m->id) {
        lru_touch(d, m->c);
        return m->id;
    }
    node *leaf = route(d, d->toks, d->tok_hash, ntok, true);
    if (!leaf)
        return 0;
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
                return 0;
        }
        c = new_cluster(d, leaf, d->toks, ntok);
        if (!c)
            return 0;
    }
    m->line_hash = h;
    m->c = c;
    m->id = c->id;
    return c->id;
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
            int w = snprintf(buf + o, o < len ? len - o : 0, "%s%s", t ? " " : "", c->tok[t]);
            if (w > 0)
                o += (size_t)w;
        }
        return true;
    }
    return false;
}
