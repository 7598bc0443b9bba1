/* Token counts and ids of new ASCII pieces for a BERT-family WordPiece tokenizer, in C.
 *
 * Why: on text read once one piece in ten is new to the piece memory (_piece_cache.h), and each
 * went back to Python to be counted: worker/wordpiece.py's path, several microseconds a piece,
 * was most of `adaptive`'s and `lexical`'s remaining time on such text (docs/benchmarks.md).
 * Here the same count costs far less and no Python object. The
 * static model's rows (_static_rows.h) collect the ids the same way.
 *
 * The definition is worker/wordpiece.py's AsciiWordPiece (its docstring states BERT's rules for
 * ASCII); this is a transcription of its `ids` (counting when no sink is given), and
 * tests/chunking/test_wordpiece_native.py holds the two equal. The tables come from
 * AsciiWordPiece.tables(): vocabulary entries and continuation entries without their prefix,
 * each with its ids, the unknown token's id, the word limit, lowercasing, and the added tokens
 * (all ASCII, or the path is not built). A piece that is not ASCII or holds an added token (in
 * any case) is not taken here: -1, and the caller asks Python. */
#ifndef CHUNKSTREAM_WORDPIECE_H
#define CHUNKSTREAM_WORDPIECE_H

#include <stdint.h>
#include <string.h>

typedef struct {
    uint64_t hash;
    uint32_t start, length; /* in the arena; length 0: an empty slot (no entry is empty) */
    int32_t id;             /* the entry's token id */
} WordSlot;

typedef struct {
    WordSlot *slots;
    size_t mask;
    char *arena;
} WordSet;

typedef struct {
    WordSet first, next; /* whole-word entries; continuations without their prefix */
    Py_ssize_t longest;  /* the longest entry: no match is longer */
    Py_ssize_t max_word_chars;
    int32_t unknown; /* the unknown token's id */
    int lowercase;
    char **added; /* lowercased */
    Py_ssize_t *added_lengths, added_count;
} WordPiece;

static inline uint64_t wp_hash(const char *s, Py_ssize_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (Py_ssize_t p = 0; p < n; p++) h = (h ^ (unsigned char)s[p]) * 0x100000001b3ull;
    return h;
}

/* The entry's slot, or NULL when `s` is not an entry. */
static const WordSlot *wp_set_find(const WordSet *set, const char *s, Py_ssize_t n) {
    uint64_t h = wp_hash(s, n);
    for (size_t k = (size_t)h & set->mask;; k = (k + 1) & set->mask) {
        const WordSlot *slot = &set->slots[k];
        if (slot->length == 0) return NULL;
        if (slot->hash == h && slot->length == (uint32_t)n && memcmp(set->arena + slot->start, s, (size_t)n) == 0)
            return slot;
    }
}

static void wp_set_free(WordSet *set) {
    PyMem_Free(set->slots);
    PyMem_Free(set->arena);
    memset(set, 0, sizeof *set);
}

/* The ASCII, non-empty strings of `entries` (others can never match an ASCII word), each with
 * its id from `ids` (the same length). Also raises `longest` to the longest one. 0, or -1 with
 * an exception set. */
static int wp_set_build(WordSet *set, PyObject *entries, PyObject *ids, Py_ssize_t *longest) {
    if (!PyList_Check(entries) || !PyList_Check(ids) || PyList_GET_SIZE(ids) != PyList_GET_SIZE(entries)) {
        PyErr_SetString(PyExc_TypeError, "WordPiece entries must be a list of str with a list of as many ids");
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(entries);
    size_t slots = 16, bytes = 0;
    while (slots < (size_t)n * 2) slots *= 2;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *entry = PyList_GET_ITEM(entries, k);
        if (!PyUnicode_Check(entry)) {
            PyErr_SetString(PyExc_TypeError, "WordPiece entries must be a list of str");
            return -1;
        }
        if (PyUnicode_IS_ASCII(entry)) bytes += (size_t)PyUnicode_GET_LENGTH(entry);
    }
    set->slots = PyMem_Calloc(slots, sizeof(WordSlot));
    set->arena = PyMem_Malloc(bytes ? bytes : 1);
    if (set->slots == NULL || set->arena == NULL) {
        wp_set_free(set);
        PyErr_NoMemory();
        return -1;
    }
    set->mask = slots - 1;
    size_t used = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *entry = PyList_GET_ITEM(entries, k);
        Py_ssize_t length = PyUnicode_GET_LENGTH(entry);
        if (!PyUnicode_IS_ASCII(entry) || length == 0) continue;
        const char *s = (const char *)PyUnicode_DATA(entry);
        if (wp_set_find(set, s, length) != NULL) continue;
        long id = PyLong_AsLong(PyList_GET_ITEM(ids, k));
        if (id == -1 && PyErr_Occurred()) return -1;
        if (id < 0 || id > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "WordPiece ids must be non-negative int32");
            return -1;
        }
        uint64_t h = wp_hash(s, length);
        size_t j = (size_t)h & set->mask;
        while (set->slots[j].length != 0) j = (j + 1) & set->mask;
        memcpy(set->arena + used, s, (size_t)length);
        set->slots[j] = (WordSlot){h, (uint32_t)used, (uint32_t)length, (int32_t)id};
        used += (size_t)length;
        if (length > *longest) *longest = length;
    }
    return 0;
}

static void wordpiece_free(WordPiece *wp) {
    if (wp == NULL) return;
    wp_set_free(&wp->first);
    wp_set_free(&wp->next);
    for (Py_ssize_t k = 0; k < wp->added_count; k++) PyMem_Free(wp->added[k]);
    PyMem_Free(wp->added);
    PyMem_Free(wp->added_lengths);
    PyMem_Free(wp);
}

/* From AsciiWordPiece.tables(): (first, first_ids, continuations, continuation_ids, unknown,
 * max_word_chars, lowercase, added). NULL with an exception set when they are not of that form. */
static WordPiece *wordpiece_new(PyObject *tables) {
    PyObject *first, *first_ids, *next, *next_ids, *added;
    Py_ssize_t unknown, max_word_chars;
    int lowercase;
    if (!PyArg_ParseTuple(tables, "O!O!O!O!nnpO!", &PyList_Type, &first, &PyList_Type, &first_ids, &PyList_Type,
                          &next, &PyList_Type, &next_ids, &unknown, &max_word_chars, &lowercase, &PyList_Type,
                          &added))
        return NULL;
    if (unknown < 0 || unknown > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "the unknown token's id must be a non-negative int32");
        return NULL;
    }
    WordPiece *wp = PyMem_Calloc(1, sizeof(WordPiece));
    if (wp == NULL) return (WordPiece *)PyErr_NoMemory();
    wp->max_word_chars = max_word_chars;
    wp->lowercase = lowercase;
    wp->unknown = (int32_t)unknown;
    if (wp_set_build(&wp->first, first, first_ids, &wp->longest) < 0 ||
        wp_set_build(&wp->next, next, next_ids, &wp->longest) < 0)
        goto fail;
    Py_ssize_t n = PyList_GET_SIZE(added);
    wp->added = PyMem_Calloc((size_t)(n ? n : 1), sizeof(char *));
    wp->added_lengths = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_ssize_t));
    if (wp->added == NULL || wp->added_lengths == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *token = PyList_GET_ITEM(added, k);
        if (!PyUnicode_Check(token)) {
            PyErr_SetString(PyExc_TypeError, "added tokens must be str");
            goto fail;
        }
        if (!PyUnicode_IS_ASCII(token)) {
            PyErr_SetString(PyExc_ValueError, "the compiled WordPiece path takes ASCII added tokens only");
            goto fail;
        }
        Py_ssize_t length = PyUnicode_GET_LENGTH(token);
        const char *s = (const char *)PyUnicode_DATA(token);
        char *lowered = PyMem_Malloc((size_t)length + 1);
        if (lowered == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t p = 0; p < length; p++)
            lowered[p] = (char)((s[p] >= 'A' && s[p] <= 'Z') ? s[p] + 32 : s[p]);
        wp->added[k] = lowered;
        wp->added_lengths[k] = length;
        wp->added_count = k + 1;
    }
    return wp;
fail:
    wordpiece_free(wp);
    return NULL;
}

static inline int wp_lower(int c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

/* An added token anywhere in the piece, in any case (tokenizers matches them first). */
static int holds_added(const WordPiece *wp, const char *s, Py_ssize_t n) {
    for (Py_ssize_t k = 0; k < wp->added_count; k++) {
        const char *token = wp->added[k];
        Py_ssize_t length = wp->added_lengths[k];
        for (Py_ssize_t at = 0; at + length <= n; at++) {
            Py_ssize_t p = 0;
            while (p < length && wp_lower((unsigned char)s[at + p]) == token[p]) p++;
            if (p == length) return 1;
        }
    }
    return 0;
}

/* BERT's control characters among ASCII: all but \t, \n and \r (which are whitespace). */
static inline int wp_control(int c) { return c < 32 ? (c != '\t' && c != '\n' && c != '\r') : c == 127; }
static inline int wp_alnum(int c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static inline int wp_punctuation(int c) { return c > 32 && c < 127 && !wp_alnum(c); }

/* Where the ids of a piece go: NULL when only their count is wanted. */
typedef struct {
    int32_t *items;
    size_t count, capacity;
} IdSink;

static int sink_push(IdSink *sink, int32_t id) {
    if (sink == NULL) return 0;
    if (sink->count == sink->capacity) {
        size_t capacity = sink->capacity ? sink->capacity * 2 : 256;
        int32_t *items = PyMem_Realloc(sink->items, capacity * sizeof(int32_t));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        sink->items = items;
        sink->capacity = capacity;
    }
    sink->items[sink->count++] = id;
    return 0;
}

/* AsciiWordPiece._word (and the whole-word lookup before it): the word's ids go to `sink`, their
 * count is returned. -2 with an exception set when memory runs out. */
static Py_ssize_t wp_word(const WordPiece *wp, const char *w, Py_ssize_t length, IdSink *sink) {
    const WordSlot *whole = wp_set_find(&wp->first, w, length);
    if (whole != NULL) return sink_push(sink, whole->id) < 0 ? -2 : 1;
    if (length > wp->max_word_chars) return sink_push(sink, wp->unknown) < 0 ? -2 : 1;
    size_t mark = sink == NULL ? 0 : sink->count;
    const WordSet *set = &wp->first;
    Py_ssize_t count = 0, start = 0;
    while (start < length) {
        Py_ssize_t end = length < start + wp->longest ? length : start + wp->longest;
        const WordSlot *found = NULL;
        while (end > start && (found = wp_set_find(set, w + start, end - start)) == NULL) end--;
        if (found == NULL) { /* no entry fits: the whole word is one unknown token */
            if (sink != NULL) sink->count = mark;
            return sink_push(sink, wp->unknown) < 0 ? -2 : 1;
        }
        if (sink_push(sink, found->id) < 0) return -2;
        count++;
        start = end;
        set = &wp->next;
    }
    return count;
}

/* The tokens of the piece [a, b) of `t`: their ids appended to `sink` (when not NULL), their
 * count returned; -1 when the piece is not for this path (nothing appended). -2 with an
 * exception set when memory runs out. */
static Py_ssize_t wordpiece_run(const WordPiece *wp, const SentenceText *t, Py_ssize_t a, Py_ssize_t b,
                                IdSink *sink) {
    char local[256];
    Py_ssize_t n = b - a;
    char *s = n <= (Py_ssize_t)sizeof local ? local : PyMem_Malloc((size_t)n);
    if (s == NULL) {
        PyErr_NoMemory();
        return -2;
    }
    Py_ssize_t count = -1;
    for (Py_ssize_t p = 0; p < n; p++) {
        Py_UCS4 c = sentence_read(t, a + p);
        if (c >= 128) goto done;
        s[p] = (char)c;
    }
    if (holds_added(wp, s, n)) goto done;
    Py_ssize_t m = 0; /* normalized in place: controls dropped, lowercased when asked */
    for (Py_ssize_t p = 0; p < n; p++) {
        int c = (unsigned char)s[p];
        if (wp_control(c)) continue;
        s[m++] = (char)(wp->lowercase ? wp_lower(c) : c);
    }
    count = 0;
    for (Py_ssize_t p = 0; p < m;) {
        int c = (unsigned char)s[p];
        Py_ssize_t q = p + 1, got = 0;
        if (wp_alnum(c)) {
            while (q < m && wp_alnum((unsigned char)s[q])) q++;
            got = wp_word(wp, s + p, q - p, sink);
        } else if (wp_punctuation(c)) {
            got = wp_word(wp, s + p, 1, sink);
        } /* else whitespace: a piece holds none, and the Python path skips it too */
        if (got == -2) {
            count = -2;
            goto done;
        }
        count += got;
        p = q;
    }
done:
    if (s != local) PyMem_Free(s);
    return count;
}

/* The token count of the piece [a, b) of `t`, or -1 when it is not for this path. -2 with an
 * exception set when memory runs out. */
static inline Py_ssize_t wordpiece_count(const WordPiece *wp, const SentenceText *t, Py_ssize_t a, Py_ssize_t b) {
    return wordpiece_run(wp, t, a, b, NULL);
}

#endif /* CHUNKSTREAM_WORDPIECE_H */
