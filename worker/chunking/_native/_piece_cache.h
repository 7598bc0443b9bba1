/* The compiled core's memory of token counts per piece (units.Measure's pieces), one per
 * tokenizer, kept in a capsule the Python side holds with its PieceCounter. A hit spares the
 * core a Python string and a dict lookup per piece: it compares the piece's code points in
 * place. A miss is counted by the memory's WordPiece path (_wordpiece.h, for ASCII pieces of a
 * BERT tokenizer) when it has one, else by the PieceCounter's count_pieces: the same counts.
 *
 * Threads: the GIL is held while the memory is read or written, and no pointer into it is
 * kept across the call to count_pieces (which may let another thread in): misses are
 * recorded by piece, and inserted after the call returns. Bounded: past CACHE_MAX_PIECES
 * pieces or CACHE_MAX_CHARS stored code points it starts afresh. */
#ifndef CHUNKSTREAM_PIECE_CACHE_H
#define CHUNKSTREAM_PIECE_CACHE_H

#include <stdint.h>
#include <string.h>

#include "_wordpiece.h"

#define CACHE_MAX_PIECES ((size_t)1 << 18)
#define CACHE_MAX_CHARS ((size_t)1 << 22)
/* Longer pieces are counted but not remembered: not words (a base64 blob, a minified line),
 * they would not come again, and one of millions of characters would take four bytes a character
 * and start the memory afresh. */
#define CACHE_MAX_PIECE_CHARS ((size_t)1 << 12)
#define CACHE_CAPSULE "chunkstream.piece_cache"

typedef struct {
    uint64_t hash;
    uint32_t start, length; /* in the arena */
    int64_t count;          /* -1: an empty slot */
} CacheSlot;

typedef struct {
    CacheSlot *slots;
    size_t mask, used;
    Py_UCS4 *arena;
    size_t arena_used, arena_capacity;
    WordPiece *wordpiece; /* NULL: every miss goes to count_pieces */
} PieceCache;

/* Forgets every count (the WordPiece path stays: it is the tokenizer's, not the text's). */
static void cache_free(PieceCache *c) {
    WordPiece *wordpiece = c->wordpiece;
    PyMem_Free(c->slots);
    PyMem_Free(c->arena);
    memset(c, 0, sizeof *c);
    c->wordpiece = wordpiece;
}

static int cache_init(PieceCache *c, size_t slots) {
    c->slots = PyMem_Malloc(sizeof(CacheSlot) * slots);
    if (c->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t k = 0; k < slots; k++) c->slots[k].count = -1;
    c->mask = slots - 1;
    c->used = 0;
    return 0;
}

/* FNV-1a over the piece's code points (a loop per storage kind: it reads every piece). */
#define PIECE_HASH(CHAR_T)                                                                        \
    do {                                                                                          \
        const CHAR_T *s = (const CHAR_T *)t->data;                                                \
        for (Py_ssize_t p = a; p < b; p++) h = (h ^ (uint64_t)s[p]) * 0x100000001b3ull;          \
    } while (0)

static inline uint64_t piece_hash(const SentenceText *t, Py_ssize_t a, Py_ssize_t b) {
    uint64_t h = 0xcbf29ce484222325ull;
    if (t->kind == PyUnicode_1BYTE_KIND) PIECE_HASH(Py_UCS1);
    else if (t->kind == PyUnicode_2BYTE_KIND) PIECE_HASH(Py_UCS2);
    else PIECE_HASH(Py_UCS4);
    return h;
}

#define PIECE_EQUAL(CHAR_T)                                                                       \
    do {                                                                                          \
        const CHAR_T *s = (const CHAR_T *)t->data + a;                                            \
        for (Py_ssize_t p = 0; p < b - a; p++)                                                    \
            if (stored[p] != s[p]) return 0;                                                      \
    } while (0)

static inline int slot_matches(const PieceCache *c, const CacheSlot *slot, uint64_t hash, const SentenceText *t,
                               Py_ssize_t a, Py_ssize_t b) {
    if (slot->hash != hash || slot->length != (uint32_t)(b - a)) return 0;
    const Py_UCS4 *stored = c->arena + slot->start;
    if (t->kind == PyUnicode_1BYTE_KIND) PIECE_EQUAL(Py_UCS1);
    else if (t->kind == PyUnicode_2BYTE_KIND) PIECE_EQUAL(Py_UCS2);
    else PIECE_EQUAL(Py_UCS4);
    return 1;
}

/* The count of the piece [a, b), or -1 when it is not remembered. */
static int64_t cache_lookup(const PieceCache *c, uint64_t hash, const SentenceText *t, Py_ssize_t a, Py_ssize_t b) {
    if (c->slots == NULL) return -1;
    for (size_t k = (size_t)hash & c->mask;; k = (k + 1) & c->mask) {
        const CacheSlot *slot = &c->slots[k];
        if (slot->count < 0) return -1;
        if (slot_matches(c, slot, hash, t, a, b)) return slot->count;
    }
}

static int cache_grow(PieceCache *c) {
    PieceCache bigger = *c;
    if (cache_init(&bigger, (c->mask + 1) * 2) < 0) return -1;
    for (size_t k = 0; k <= c->mask; k++) {
        CacheSlot *slot = &c->slots[k];
        if (slot->count < 0) continue;
        size_t j = (size_t)slot->hash & bigger.mask;
        while (bigger.slots[j].count >= 0) j = (j + 1) & bigger.mask;
        bigger.slots[j] = *slot;
    }
    bigger.used = c->used;
    PyMem_Free(c->slots);
    *c = bigger;
    return 0;
}

/* Remembers the piece [a, b) with its count (once). 0, or -1 with an exception set. */
static int cache_insert(PieceCache *c, uint64_t hash, const SentenceText *t, Py_ssize_t a, Py_ssize_t b,
                        int64_t count) {
    size_t length = (size_t)(b - a);
    if (length > CACHE_MAX_PIECE_CHARS) return 0;
    if (c->used >= CACHE_MAX_PIECES || c->arena_used + length > CACHE_MAX_CHARS) {
        cache_free(c); /* start afresh: a bound, not a policy */
    }
    if (c->slots == NULL && cache_init(c, 1024) < 0) return -1;
    if ((c->used + 1) * 10 > (c->mask + 1) * 7 && cache_grow(c) < 0) return -1;
    if (cache_lookup(c, hash, t, a, b) >= 0) return 0;
    if (c->arena_used + length > c->arena_capacity) {
        size_t capacity = c->arena_capacity ? c->arena_capacity : 4096;
        while (capacity < c->arena_used + length) capacity *= 2;
        Py_UCS4 *arena = PyMem_Realloc(c->arena, sizeof(Py_UCS4) * capacity);
        if (arena == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->arena = arena;
        c->arena_capacity = capacity;
    }
    for (Py_ssize_t p = a; p < b; p++) c->arena[c->arena_used + (size_t)(p - a)] = sentence_read(t, p);
    size_t k = (size_t)hash & c->mask;
    while (c->slots[k].count >= 0) k = (k + 1) & c->mask;
    c->slots[k] = (CacheSlot){hash, (uint32_t)c->arena_used, (uint32_t)length, count};
    c->arena_used += length;
    c->used++;
    return 0;
}

static void cache_capsule_free(PyObject *capsule) {
    PieceCache *c = PyCapsule_GetPointer(capsule, CACHE_CAPSULE);
    if (c != NULL) {
        cache_free(c);
        wordpiece_free(c->wordpiece);
        PyMem_Free(c);
    }
}

/* new_cache(wordpiece) with AsciiWordPiece.tables() or None. */
static PyObject *new_cache(PyObject *self, PyObject *tables) {
    PieceCache *c = PyMem_Calloc(1, sizeof(PieceCache));
    if (c == NULL) return PyErr_NoMemory();
    if (tables != Py_None) {
        if (!PyTuple_Check(tables)) {
            PyMem_Free(c);
            PyErr_SetString(PyExc_TypeError, "new_cache takes AsciiWordPiece.tables() or None");
            return NULL;
        }
        c->wordpiece = wordpiece_new(tables);
        if (c->wordpiece == NULL) {
            PyMem_Free(c);
            return NULL;
        }
    }
    PyObject *capsule = PyCapsule_New(c, CACHE_CAPSULE, cache_capsule_free);
    if (capsule == NULL) {
        wordpiece_free(c->wordpiece);
        PyMem_Free(c);
    }
    return capsule;
}

/* wordpiece_counts(memory, pieces) -> list[int | None]: the memory's WordPiece path on each
 * piece (None: not for it), without reading or filling the memory. For the difference tests
 * against worker/wordpiece.py. */
static PyObject *wordpiece_counts(PyObject *self, PyObject *args) {
    PyObject *memory, *pieces;
    if (!PyArg_ParseTuple(args, "OO!", &memory, &PyList_Type, &pieces)) return NULL;
    PieceCache *c = PyCapsule_GetPointer(memory, CACHE_CAPSULE);
    if (c == NULL) return NULL;
    if (c->wordpiece == NULL) {
        PyErr_SetString(PyExc_ValueError, "this memory has no WordPiece path");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(pieces);
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *piece = PyList_GET_ITEM(pieces, k);
        if (!PyUnicode_Check(piece)) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_TypeError, "pieces must be str");
            return NULL;
        }
        SentenceText t = {PyUnicode_KIND(piece), PyUnicode_DATA(piece), PyUnicode_GET_LENGTH(piece)};
        Py_ssize_t count = wordpiece_count(c->wordpiece, &t, 0, t.size);
        if (count == -2) {
            Py_DECREF(out);
            return NULL;
        }
        PyObject *item = count < 0 ? Py_NewRef(Py_None) : PyLong_FromSsize_t(count);
        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, item);
    }
    return out;
}

#endif /* CHUNKSTREAM_PIECE_CACHE_H */
