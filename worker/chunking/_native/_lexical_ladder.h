/* Part of _lexical_core.c (see there): the ladder's verdicts (rules/lexical_ladder.py
 * verdicts): for each gap between two blocks, the reason the block after it merges, or BREAK.
 * Blocks are _structure.h's; the keywords they share with the chunk so far are counted over
 * a window of the run (the blocks since the last break, as far back as the cap reaches), kept
 * as counts per keyword and moved along with the run. */
#ifndef LEXICAL_LADDER_H
#define LEXICAL_LADDER_H

#include "_lexical_config.h"
#include "_lexical_keywords.h"
#include "_lexical_spans.h"

/* The prefix rule (transition break included) of the longest phrase a unit's opening holds: its list and
 * quote markers skipped (_LEAD_MARKERS), then _OPENING, both inside the lead window. */
static int opening_rule(const Text *t, Py_ssize_t start, Py_ssize_t end)
{
    Py_ssize_t window = start + cfg.lead_window < end ? start + cfg.lead_window : end;
    Py_ssize_t p = start;
    /* "(?:[\s>*+\-_#]|\d{1,9}[.)])*" */
    while (p < window) {
        Py_UCS4 c = at(t, p);
        if (is_space(c) || c == '>' || c == '*' || c == '+' || c == '-' || c == '_' || c == '#') {
            p++;
            continue;
        }
        Py_ssize_t r = 0;
        while (p + r < window && Py_UNICODE_ISDECIMAL(at(t, p + r)))
            r++;
        if (r < 1 || r > 9 || p + r == window)
            break;
        Py_UCS4 d = at(t, p + r);
        if (d != '.' && d != ')')
            break;
        p += r + 1;
    }
    if (p == window)
        return NO_OPENING;
    /* The opening lower-cased once (ASCII case folding only; any other character becomes
     * 0x80, which no phrase holds and which is no [A-Za-z0-9]). */
    unsigned char lead[MAX_PHRASE + 1];
    Py_ssize_t room = window - p, n = room < cfg.longest_phrase + 1 ? room : cfg.longest_phrase + 1;
    if (t->kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *data = (const Py_UCS1 *)t->data + p;
        for (Py_ssize_t q = 0; q < n; q++)
            lead[q] = data[q] < 128 ? (unsigned char)ascii_lower(data[q]) : 0x80;
    }
    else
        for (Py_ssize_t q = 0; q < n; q++) {
            Py_UCS4 c = at(t, p + q);
            lead[q] = c < 128 ? (unsigned char)ascii_lower(c) : 0x80;
        }
    unsigned char first = lead[0];
    if (first >= 128)
        return NO_OPENING;
    /* Each phrase, then "(?![A-Za-z0-9])" (the window's end counts as the text's end); the
     * candidates come longest first, ties in rule order, so the first match decides. */
    for (int k = 0; k < cfg.n_by_first[first]; k++) {
        const Phrase *ph = cfg.by_first[first][k].phrase;
        if (ph->len > room)
            continue;
        Py_ssize_t q = 1;
        while (q < ph->len && lead[q] == (unsigned char)ph->chars[q])
            q++;
        if (q == ph->len && (ph->len == room || !is_ascii_alnum(lead[ph->len])))
            return cfg.by_first[first][k].rule;
    }
    return NO_OPENING;
}

/* Keyword -> how many blocks of the window hold it. Open addressing, no deletion: a key whose
 * count fell to 0 stays until the table is rebuilt (when such keys outnumber the live ones). */
typedef struct {
    uint64_t *keys; /* 0: an empty slot (keyword hashes are never 0) */
    int32_t *counts;
    size_t *used; /* the slots in use, so that clearing costs what was added */
    size_t mask;
    Py_ssize_t size, live;
} CountMap;

static void counts_free(CountMap *m)
{
    PyMem_Free(m->keys);
    PyMem_Free(m->counts);
    PyMem_Free(m->used);
    memset(m, 0, sizeof *m);
}

static int counts_init(CountMap *m, size_t capacity)
{
    m->keys = PyMem_Calloc(capacity, sizeof(uint64_t));
    m->counts = PyMem_Calloc(capacity, sizeof(int32_t));
    m->used = PyMem_Malloc((capacity / 2 + 1) * sizeof(size_t));
    if (m->keys == NULL || m->counts == NULL || m->used == NULL) {
        counts_free(m);
        PyErr_NoMemory();
        return -1;
    }
    m->mask = capacity - 1;
    m->size = m->live = 0;
    return 0;
}

static void counts_clear(CountMap *m)
{
    for (Py_ssize_t k = 0; k < m->size; k++) {
        m->keys[m->used[k]] = 0;
        m->counts[m->used[k]] = 0;
    }
    m->size = m->live = 0;
}

static size_t counts_slot(const CountMap *m, uint64_t h)
{
    size_t i = (size_t)h & m->mask;
    while (m->keys[i] != 0 && m->keys[i] != h)
        i = (i + 1) & m->mask;
    return i;
}

static int32_t counts_get(const CountMap *m, uint64_t h) { return m->counts[counts_slot(m, h)]; }

/* counts[h] += delta (delta: +1, or -1 for a key counted before). */
static int counts_add(CountMap *m, uint64_t h, int delta)
{
    if ((size_t)(m->size + 1) * 2 > m->mask + 1) {
        CountMap bigger;
        if (counts_init(&bigger, (m->mask + 1) * 2) < 0)
            return -1;
        for (Py_ssize_t k = 0; k < m->size; k++) {
            size_t from = m->used[k], to = counts_slot(&bigger, m->keys[from]);
            bigger.keys[to] = m->keys[from];
            bigger.counts[to] = m->counts[from];
            bigger.used[bigger.size++] = to;
        }
        bigger.live = m->live;
        counts_free(m);
        *m = bigger;
    }
    size_t i = counts_slot(m, h);
    if (m->keys[i] == 0) {
        m->keys[i] = h;
        m->used[m->size++] = i;
    }
    m->live += (m->counts[i] == 0) - (m->counts[i] + delta == 0);
    m->counts[i] += delta;
    return 0;
}

typedef struct {
    const Text *t;
    const SentenceText *st;
    Reader *reader;
    const BlockSpans *blocks;
    const long long *before; /* the size of the text before each block */
    long long cap;
    Py_ssize_t *kw_at, *kw_n; /* each block's distinct keywords: pool[kw_at..+kw_n); kw_n < 0 unread */
    uint64_t *pool;
    Py_ssize_t n_pool, cap_pool;
    HashSet scratch; /* a block's keywords while they are read */
    CountMap window;
    Py_ssize_t lo, hi; /* the blocks counted in window: lo..hi-1 */
    Py_ssize_t run;    /* the first block of the current run */
} Ladder;

static void ladder_free(Ladder *l)
{
    PyMem_Free(l->kw_at);
    PyMem_Free(l->kw_n);
    PyMem_Free(l->pool);
    set_free(&l->scratch);
    counts_free(&l->window);
}

static int pool_add(void *context, uint64_t h)
{
    Ladder *l = context;
    int added = set_add(&l->scratch, h);
    if (added <= 0)
        return added;
    if (grow((void **)&l->pool, &l->cap_pool, l->n_pool + 1, sizeof(uint64_t)) < 0)
        return -1;
    l->pool[l->n_pool++] = h;
    return 0;
}

/* Reads a block's distinct keywords into the pool once. */
static int block_keywords(Ladder *l, Py_ssize_t i)
{
    if (l->kw_n[i] >= 0)
        return 0;
    Py_ssize_t first = l->n_pool;
    set_clear(&l->scratch);
    const BlockSpan *b = &l->blocks->items[i];
    if (each_keyword(l->reader, b->start, b->end, pool_add, l, HINT_UNIT) < 0)
        return -1;
    l->kw_at[i] = first;
    l->kw_n[i] = l->n_pool - first;
    return 0;
}

static int count_block(Ladder *l, Py_ssize_t i, int delta)
{
    if (block_keywords(l, i) < 0)
        return -1;
    for (Py_ssize_t k = 0; k < l->kw_n[i]; k++)
        if (counts_add(&l->window, l->pool[l->kw_at[i] + k], delta) < 0)
            return -1;
    return 0;
}

/* lexical_ladder._Window, then how many of block i's keywords its blocks hold; -1 on error. */
static Py_ssize_t shared_keywords(Ladder *l, Py_ssize_t i)
{
    if (l->lo < l->run) {
        counts_clear(&l->window);
        l->lo = l->hi = l->run;
    }
    Py_ssize_t w = l->lo;
    while (w < i - 1 && l->before[i] - l->before[w] > l->cap)
        w++;
    for (; l->lo < w; l->lo++)
        if (l->lo < l->hi && count_block(l, l->lo, -1) < 0)
            return -1;
    if (l->hi < l->lo)
        l->hi = l->lo;
    if (l->window.size > 4 * l->window.live + 256) { /* mostly keys counted 0: rebuild */
        counts_clear(&l->window);
        for (Py_ssize_t k = l->lo; k < l->hi; k++)
            if (count_block(l, k, 1) < 0)
                return -1;
    }
    for (; l->hi < i; l->hi++)
        if (count_block(l, l->hi, 1) < 0)
            return -1;
    if (block_keywords(l, i) < 0)
        return -1;
    Py_ssize_t shared = 0;
    for (Py_ssize_t k = 0; k < l->kw_n[i]; k++)
        shared += counts_get(&l->window, l->pool[l->kw_at[i] + k]) > 0;
    return shared;
}

/* lexical_ladder._reason: a reason, BREAK, or -2 on error. */
static int reason_of(Ladder *l, Py_ssize_t i)
{
    const BlockSpan *previous = &l->blocks->items[i - 1], *block = &l->blocks->items[i];
    int level = gap_level(l->st, previous, block);
    if (level == L_GLUE)
        return previous->kind == B_HEADING ? R_HEADING : previous->kind == B_RULE ? R_STRUCTURAL : R_DEFINITION;
    if (level == L_SECTION)
        return BREAK;
    if (level == L_ITEM)
        return R_LIST;
    int kind = block->kind;
    if (kind == B_PARAGRAPH || kind == B_ITEM || kind == B_QUOTE || kind == B_HTML) {
        int rule = opening_rule(l->t, block->start, block->end);
        if (rule == R_TRANSITION)
            return BREAK;
        if (rule != NO_OPENING)
            return rule;
    }
    if (at(l->t, previous->end - 1) == '?')
        return R_QUESTION;
    if (kind == B_PARAGRAPH && block->end - block->start <= cfg.short_chars)
        return R_SHORT;
    Py_ssize_t shared = shared_keywords(l, i);
    if (shared < 0)
        return -2;
    if (kind == B_ITEM && shared >= cfg.list_overlap_min)
        return R_LIST;
    return shared >= cfg.overlap_min ? R_KEYWORD : BREAK;
}

/* lexical_ladder.verdicts into verdict[0..n) (verdict[0] = BREAK). 0, or -1 on error. */
static int verdicts(Ladder *l, int *verdict)
{
    Py_ssize_t n = l->blocks->count;
    l->kw_at = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    l->kw_n = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    if (l->kw_at == NULL || l->kw_n == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++)
        l->kw_n[k] = -1;
    if (set_init(&l->scratch, 64) < 0 || counts_init(&l->window, 64) < 0)
        return -1;
    if (n)
        verdict[0] = BREAK;
    for (Py_ssize_t i = 1; i < n; i++) {
        int reason = reason_of(l, i);
        if (reason == -2)
            return -1;
        verdict[i] = reason;
        if (reason == BREAK)
            l->run = i;
    }
    return 0;
}

#endif /* LEXICAL_LADDER_H */
