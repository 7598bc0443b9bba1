/* Part of _lexical_core.c (see there): keywords, their hashes and sets, and the queries
 * over a document's keyword runs and words (the Reader, filled by _lexical_reading.h). */
#ifndef LEXICAL_KEYWORDS_H
#define LEXICAL_KEYWORDS_H

#include "_lexical_config.h"
#include "_lexical_text.h"
#include "_lexical_spans.h"

/* ---------------------------------------------------------------------------------------
 * Keywords
 *
 * A keyword is a run of at least min_letters keyword characters, lower-cased, that is not
 * a stop word; it is identified by a 64-bit FNV-1a hash of its lower-cased code points (the
 * reference's document pass also compares keywords by a 64-bit hash).
 *
 * Ranges are read the way the reference reads them for the document: when its document
 * pass applies (no non-ASCII keyword character, no whitespace-free run over the cap), a
 * range holds the words and keyword runs that *start* inside it, each counted whole;
 * otherwise the range's own text is read on its own. The two differ only where a range
 * starts or ends inside a word.
 * ------------------------------------------------------------------------------------- */

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static inline uint64_t nonzero(uint64_t h) { return h ? h : 1; }

typedef struct {
    uint64_t *slots;
    size_t mask; /* capacity - 1 */
    Py_ssize_t size;
    size_t *used; /* the slots in use, so that clearing costs what was added, not the capacity */
} HashSet;

static int set_init(HashSet *s, size_t capacity)
{
    s->slots = PyMem_Calloc(capacity, sizeof(uint64_t));
    s->used = PyMem_Malloc((capacity / 2 + 1) * sizeof(size_t));
    if (s->slots == NULL || s->used == NULL) {
        PyMem_Free(s->slots);
        PyMem_Free(s->used);
        s->slots = NULL;
        s->used = NULL;
        PyErr_NoMemory();
        return -1;
    }
    s->mask = capacity - 1;
    s->size = 0;
    return 0;
}

static void set_free(HashSet *s)
{
    PyMem_Free(s->slots);
    PyMem_Free(s->used);
}

static int set_add(HashSet *s, uint64_t h);

static int set_grow(HashSet *s)
{
    HashSet bigger;
    if (set_init(&bigger, (s->mask + 1) * 2) < 0)
        return -1;
    for (Py_ssize_t k = 0; k < s->size; k++)
        if (set_add(&bigger, s->slots[s->used[k]]) < 0) {
            set_free(&bigger);
            return -1;
        }
    set_free(s);
    *s = bigger;
    return 0;
}

/* Adds h; 1 when it was new, 0 when present, -1 on error. */
static int set_add(HashSet *s, uint64_t h)
{
    if ((size_t)(s->size + 1) * 2 > s->mask + 1 && set_grow(s) < 0)
        return -1;
    size_t i = (size_t)h & s->mask;
    while (s->slots[i]) {
        if (s->slots[i] == h)
            return 0;
        i = (i + 1) & s->mask;
    }
    s->slots[i] = h;
    s->used[s->size++] = i;
    return 1;
}

static void set_clear(HashSet *s)
{
    for (Py_ssize_t k = 0; k < s->size; k++)
        s->slots[s->used[k]] = 0;
    s->size = 0;
}

/* The two slots a stop word may sit in (cuckoo hashing, see stop_place). */
static inline size_t stop_slot_a(uint64_t h, size_t mask) { return (size_t)h & mask; }
static inline size_t stop_slot_b(uint64_t h, size_t mask) { return (size_t)(h >> 32) & mask; }

/* Two loads and no loop: no branch depends on the answer, which is a coin toss for the
 * branch predictor (stop words and keywords alternate in prose). Hashes are never 0. */
static inline int is_stop_word(uint64_t h)
{
    return (cfg.stop[stop_slot_a(h, cfg.stop_mask)] == h) | (cfg.stop[stop_slot_b(h, cfg.stop_mask)] == h);
}

typedef struct {
    Py_ssize_t start, end; /* the whole run */
    uint64_t hash;
    int stop;
    Py_ssize_t keywords_before; /* runs before this one that are not stop words */
} Run;

/* A document's words and keyword runs, found in one pass (reader_read). */
typedef struct {
    const Text *t;
    int whole_words; /* the document pass applies: ranges read whole words */
    Run *runs;       /* runs of at least min_letters keyword characters, in order */
    Py_ssize_t n_runs, cap_runs;
    /* The last answers of first_run, per purpose (HINT_UNIT, HINT_CHUNK). */
    Py_ssize_t run_hint[2];
} Reader;

static Py_UCS4 latin1_lower[256];

/* The keyword hash: a function of the lower-cased code points and their number only
 * (stop words, hashed at configure(), must meet their runs in any text). Code points
 * below 256 go eight to a 64-bit block, one multiply per block; any other code point is
 * mixed on its own, tagged. */
static inline uint64_t mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 29);
}

/* Eight code points below 256, lower-cased into one block. */
#define PACK8(data, p)                                                                        \
    ((uint64_t)latin1_lower[(data)[(p)]] | (uint64_t)latin1_lower[(data)[(p) + 1]] << 8 |       \
     (uint64_t)latin1_lower[(data)[(p) + 2]] << 16 | (uint64_t)latin1_lower[(data)[(p) + 3]] << 24 | \
     (uint64_t)latin1_lower[(data)[(p) + 4]] << 32 | (uint64_t)latin1_lower[(data)[(p) + 5]] << 40 | \
     (uint64_t)latin1_lower[(data)[(p) + 6]] << 48 | (uint64_t)latin1_lower[(data)[(p) + 7]] << 56)

/* The same blocks from 2- and 4-byte text: eight characters at once when all are below
 * 256 and a block starts there (what the character-by-character rule would do too). */
#define HASH_WIDE(TYPE)                                                                       \
    do {                                                                                      \
        const TYPE *data = t->data;                                                           \
        uint64_t block = 0;                                                                   \
        int filled = 0;                                                                       \
        Py_ssize_t p = s;                                                                     \
        TYPE all = 0;                                                                         \
        for (Py_ssize_t q = s; q < e; q++)                                                    \
            all |= data[q];                                                                   \
        if (all < 256) {                                                                      \
            /* Latin-1 only: the blocks of the one-byte case. */                              \
            for (; p + 8 <= e; p += 8)                                                        \
                h = mix(h, PACK8(data, p));                                                   \
            for (; p < e; p++)                                                                \
                block |= (uint64_t)latin1_lower[data[p]] << (8 * filled++);                   \
        }                                                                                     \
        while (p < e) {                                                                       \
            Py_UCS4 c = data[p] < 256 ? latin1_lower[data[p]] : lower_char(data[p]);          \
            p++;                                                                              \
            if (c < 256) {                                                                    \
                block |= (uint64_t)c << (8 * filled);                                         \
                if (++filled < 8)                                                             \
                    continue;                                                                 \
                h = mix(h, block);                                                            \
            }                                                                                 \
            else {                                                                            \
                if (filled)                                                                   \
                    h = mix(h, block);                                                        \
                h = mix(h, (uint64_t)c | ((uint64_t)1 << 62));                                \
            }                                                                                 \
            block = 0;                                                                        \
            filled = 0;                                                                       \
        }                                                                                     \
        if (filled)                                                                           \
            h = mix(h, block);                                                                \
    } while (0)

/* run_hash of a run whose characters are all below 256 (always so in one-byte text, and in
 * wider text without a keyword character past ASCII): every lower-cased Latin-1 character
 * stays below 256, so the blocks need no tests. */
#define DEFINE_LATIN1_HASH(NAME, TYPE)                                                        \
    static inline uint64_t NAME(const TYPE *data, Py_ssize_t s, Py_ssize_t e)                 \
    {                                                                                         \
        uint64_t h = FNV_OFFSET ^ (uint64_t)(e - s);                                          \
        for (; s + 8 <= e; s += 8)                                                            \
            h = mix(h, PACK8(data, s));                                                       \
        if (s < e) {                                                                          \
            uint64_t block = 0;                                                               \
            for (int i = 0; s < e; s++, i++)                                                  \
                block |= (uint64_t)latin1_lower[data[s]] << (8 * i);                          \
            h = mix(h, block);                                                                \
        }                                                                                     \
        return nonzero(h);                                                                    \
    }

DEFINE_LATIN1_HASH(narrow_hash, Py_UCS1)
DEFINE_LATIN1_HASH(latin1_hash_ucs2, Py_UCS2)
DEFINE_LATIN1_HASH(latin1_hash_ucs4, Py_UCS4)

static uint64_t run_hash(const Text *t, Py_ssize_t s, Py_ssize_t e)
{
    uint64_t h = FNV_OFFSET ^ (uint64_t)(e - s);
    if (t->kind == PyUnicode_1BYTE_KIND)
        return narrow_hash(t->data, s, e);
    else if (t->kind == PyUnicode_2BYTE_KIND)
        HASH_WIDE(Py_UCS2);
    else
        HASH_WIDE(Py_UCS4);
    return nonzero(h);
}

static void reader_free(Reader *r)
{
    PyMem_Free(r->runs);
}

/* Index of the first run starting at or after p. */
enum { HINT_UNIT, HINT_CHUNK };

static Py_ssize_t first_run(const Reader *r, Py_ssize_t p, int purpose)
{
    /* Queries move forward through the document: gallop from the previous answer. */
    Py_ssize_t lo = 0, hi = r->n_runs, hint = r->run_hint[purpose];
    if (hint <= hi && (hint == 0 || r->runs[hint - 1].start < p)) {
        Py_ssize_t step = 1;
        lo = hint;
        while (lo + step <= hi && r->runs[lo + step - 1].start < p) {
            lo += step;
            step *= 2;
        }
        if (lo + step < hi)
            hi = lo + step;
    }
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (r->runs[mid].start < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    ((Reader *)r)->run_hint[purpose] = lo;
    return lo;
}
/* Calls found(h) for every keyword (stop words left out) of [s, e). Returns -1 when found
 * fails. */
typedef int (*KeywordSink)(void *ctx, uint64_t h);

/* A run cut by a range's edge, read as the range's own text reads it. */
static int cut_run(const Reader *r, Py_ssize_t s, Py_ssize_t e, KeywordSink found, void *ctx)
{
    if (e - s < cfg.min_letters)
        return 0;
    uint64_t h = run_hash(r->t, s, e);
    return is_stop_word(h) ? 0 : found(ctx, h);
}

static int each_keyword(const Reader *r, Py_ssize_t s, Py_ssize_t e, KeywordSink found, void *ctx, int purpose)
{
    Py_ssize_t i = first_run(r, s, purpose);
    if (!r->whole_words && i > 0 && r->runs[i - 1].end > s &&
        cut_run(r, s, r->runs[i - 1].end < e ? r->runs[i - 1].end : e, found, ctx) < 0)
        return -1;
    for (; i < r->n_runs && r->runs[i].start < e; i++) {
        const Run *run = &r->runs[i];
        if (!r->whole_words && run->end > e) {
            if (cut_run(r, run->start, e, found, ctx) < 0)
                return -1;
        }
        else if (!run->stop && found(ctx, run->hash) < 0)
            return -1;
    }
    return 0;
}

static int count_one(void *ctx, uint64_t h)
{
    (void)h;
    ++*(Py_ssize_t *)ctx;
    return 0;
}

/* Words (whitespace-separated) of [s, e), read as the Reader says. */
static Py_ssize_t count_words(const Reader *r, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t words = count_bits(r->t->start_bits, s, e);
    /* Read on its own, a range that starts inside a word starts with a word. */
    if (!r->whole_words && s < e && s > 0 && !sp(r->t, s) && !sp(r->t, s - 1))
        words++;
    return words;
}

/* Keywords (stop words left out) of [s, e), counted. */
static Py_ssize_t count_keywords(const Reader *r, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t found = 0;
    if (!r->whole_words) {
        each_keyword(r, s, e, count_one, &found, HINT_CHUNK); /* count_one cannot fail */
        return found;
    }
    /* Whole words: the runs starting in [s, e), by the running count. */
    Py_ssize_t i = first_run(r, s, HINT_CHUNK), j = first_run(r, e, HINT_CHUNK);
    if (i == j)
        return 0;
    const Run *last = &r->runs[j - 1];
    return last->keywords_before + !last->stop - r->runs[i].keywords_before;
}

#endif /* LEXICAL_KEYWORDS_H */
