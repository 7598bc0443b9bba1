/* Part of _lexical_core.c (see there): the document pass. It reads every character once
 * (classes and bitmaps, _lexical_text.h), finds the words and keyword runs, hashes the runs,
 * and decides whether the reference would read ranges as whole words. */
#ifndef LEXICAL_READING_H
#define LEXICAL_READING_H

#include "_lexical_config.h"
#include "_lexical_keywords.h"
#include "_lexical_text.h"

/* Records the run [start, end), kept only when it is long enough: written always and
 * counted conditionally, since whether a run is long enough is a coin toss for the
 * branch predictor. */
static inline void end_run(Reader *r, Py_ssize_t start, Py_ssize_t end)
{
    Run *run = &r->runs[r->n_runs];
    run->start = start;
    run->end = end;
    r->n_runs += end - start >= cfg.min_letters;
}

#define HASH_RUNS(HASH)                                                                       \
    for (Py_ssize_t i = 0; i < r->n_runs; i++) {                                              \
        Run *run = &r->runs[i];                                                               \
        run->hash = HASH;                                                                     \
        run->stop = is_stop_word(run->hash);                                                  \
        run->keywords_before = keywords;                                                      \
        keywords += !run->stop;                                                               \
    }

/* Each kept run's hash, stop-word flag and running keyword count. ascii_keywords: no
 * keyword character of the text is past ASCII, so every run hashes as Latin-1 whatever
 * the text's width. */
static void hash_runs(Reader *r, int ascii_keywords)
{
    Py_ssize_t keywords = 0;
    const Text *t = r->t;
    if (t->kind == PyUnicode_1BYTE_KIND)
        HASH_RUNS(narrow_hash(t->data, run->start, run->end))
    else if (ascii_keywords && t->kind == PyUnicode_2BYTE_KIND)
        HASH_RUNS(latin1_hash_ucs2(t->data, run->start, run->end))
    else if (ascii_keywords)
        HASH_RUNS(latin1_hash_ucs4(t->data, run->start, run->end))
    else
        HASH_RUNS(run_hash(t, run->start, run->end))
}

/* Where words start (a space bit drops: the text's start reads as a space). */
static void find_word_starts(const Text *t, Py_ssize_t n_words, uint64_t *starts)
{
    uint64_t carry = 1;
    for (Py_ssize_t w = 0; w < n_words; w++) {
        uint64_t S = t->space_bits[w];
        starts[w] = ~S & ((S << 1) | carry);
        carry = S >> 63;
    }
}

/* The keyword runs: each starts where a keyword bit rises and ends at the next clear bit
 * (the padding past the end is clear). */
static void find_runs(Reader *r, Py_ssize_t n_words)
{
    const uint64_t *K = r->t->keyword_bits;
    uint64_t carry = 0;
    for (Py_ssize_t w = 0; w < n_words; w++) {
        uint64_t starts = K[w] & ~((K[w] << 1) | carry);
        carry = K[w] >> 63;
        while (starts) {
            int bit = __builtin_ctzll(starts);
            starts &= starts - 1;
            Py_ssize_t end_word = w;
            uint64_t rest = ~K[w] >> bit;
            int offset = bit;
            while (rest == 0) { /* the run goes on into the next 64 characters */
                end_word++;
                rest = ~K[end_word];
                offset = 0;
            }
            end_run(r, (w << 6) + bit, (end_word << 6) + offset + __builtin_ctzll(rest));
        }
    }
}

/* Reads the document once: every character's classes into cls, its words and keyword
 * runs, whether the reference may take its document pass (no keyword character past ASCII:
 * DocumentWords.of; chunks cut inside a word are checked later). Returns 1 when the document
 * needs the reference (see needs_reference_char), -1 on error. */
static int read_document(Reader *r, unsigned char *cls, uint64_t *bitmaps)
{
    Py_ssize_t n = r->t->len, n_words = n / 64 + 1;
    unsigned char any = classify_all(r->t, cls);
    if (any & C_REFERENCE)
        return 1;
    build_bitmaps(cls, n_words, bitmaps, bitmaps + n_words, bitmaps + 2 * n_words);
    /* Sized once for the most a text can hold: a run per min_letters + 1 characters (and
     * one written past the last kept). */
    if (grow((void **)&r->runs, &r->cap_runs, n / (cfg.min_letters + 1) + 2, sizeof(Run)) < 0)
        return -1;
    find_word_starts(r->t, n_words, bitmaps + 3 * n_words);
    find_runs(r, n_words);
    hash_runs(r, !(any & C_WIDE_KEYWORD));
    r->whole_words = n > 0 && !(any & C_WIDE_KEYWORD);
    return 0;
}

/* Buffers kept from one document to the next (up to SCRATCH_KEEP_BYTES each): fresh buffers
 * for a long document would be mapped and faulted in on every call. run_document runs no
 * Python code (Chunk is a msgspec Struct made in C, and the garbage collector is paused
 * during a call), so no other thread can enter meanwhile; `busy` makes sure anyway: a call
 * that finds the buffers lent allocates its own. */
static struct {
    int busy;
    unsigned char *cls; /* classes and bitmaps */
    Py_ssize_t cap_cls;
    Run *runs;
    Py_ssize_t cap_runs;
} scratch;

static void scratch_free(void)
{
    PyMem_Free(scratch.cls);
    PyMem_Free(scratch.runs);
    memset(&scratch, 0, sizeof scratch);
}

/* Lends the scratch buffers to a reader (when they are free); 1 when lent. */
static int borrow_scratch(Reader *r)
{
    if (scratch.busy)
        return 0;
    scratch.busy = 1;
    r->runs = scratch.runs;
    r->cap_runs = scratch.cap_runs;
    return 1;
}

/* Beyond this size a buffer is released after its document instead of kept: a worker that
 * once read a document at the size limit would otherwise hold many times its size for the
 * rest of its life. */
#define SCRATCH_KEEP_BYTES ((Py_ssize_t)8 << 20)

/* Takes the (possibly grown) buffers back from the reader; drops any that grew too large. */
static void return_scratch(Reader *r)
{
    scratch.runs = r->runs;
    scratch.cap_runs = r->cap_runs;
    r->runs = NULL;
    if (scratch.cap_cls > SCRATCH_KEEP_BYTES) {
        PyMem_Free(scratch.cls);
        scratch.cls = NULL;
        scratch.cap_cls = 0;
    }
    if (scratch.cap_runs > SCRATCH_KEEP_BYTES / (Py_ssize_t)sizeof(Run)) {
        PyMem_Free(scratch.runs);
        scratch.runs = NULL;
        scratch.cap_runs = 0;
    }
    scratch.busy = 0;
}

#endif /* LEXICAL_READING_H */
