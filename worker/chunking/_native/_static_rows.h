/* A static model's rows summed per text, from a memory of token ids per piece, in C.
 *
 * Why: `semantic` and `sdpm` on the static boundary model spent about a third of their time in
 * the model's tokenization (worker/models/piece_ids.py: pieces split, looked up, new ASCII
 * words through worker/wordpiece.py in Python, ids joined) and in its numpy sums, text by
 * text (docs/benchmarks.md). Here one call does both for a batch.
 *
 * The definition is Python's: worker/models/static.py's StaticEmbedder (its `_tokenize` and
 * `embed_ids`) over worker/models/piece_ids.py's PieceIds; tests/models/test_static_rows.py
 * holds the two bit-identical. For each text (already cut to the model's max_chars):
 *
 * - a text with whitespace other than space, tab, line feed and carriage return is declined
 *   (-1): PieceIds tokenizes such a text whole, and so does the caller;
 * - its pieces are str.split()'s; a piece's ids come from the memory, else from the WordPiece
 *   path (_wordpiece.h) for ASCII pieces, else from `ids_of_pieces` (the tokenizer, in Python,
 *   one call for every such piece of the batch);
 * - the joined ids are cut at max_length, then the unknown token's dropped;
 * - the float32 rows of those ids (through `mapping` when given, times `weights` when given)
 *   are added one after another in float64 into `out`, then divided by their number: the same
 *   additions in the same order as numpy's reduce along the first axis. Normalising and the
 *   cast to float32 stay in Python.
 *
 * Memory: the piece memory of _piece_cache.h (its count is the piece's place in the id arena,
 * packed) and an append-only arena of ids. Both start afresh at the start of a call once the
 * arena passes its limit (IDS_MAX ids; less in tests), never during one (a call's pieces point into the arena until it
 * ends), so the bound is IDS_MAX plus one call's pieces. Threads: one call at a time per memory
 * (the caller holds a lock; the call to `ids_of_pieces` may let another thread in, which finds
 * the memory busy and raises). */
#ifndef CHUNKSTREAM_STATIC_ROWS_H
#define CHUNKSTREAM_STATIC_ROWS_H

#include <stdint.h>
#include <string.h>

#include "_piece_cache.h"

#define IDS_CAPSULE "chunkstream.piece_ids"
#define IDS_MAX ((size_t)1 << 22)
#define IDS_LENGTH_BITS 24 /* a remembered piece has fewer ids than that (CACHE_MAX_PIECE_CHARS) */

typedef struct {
    PieceCache keys; /* piece -> (start << IDS_LENGTH_BITS) | length, in `ids` */
    IdSink ids;
    size_t limit; /* IDS_MAX, or less for tests */
    int busy;
} IdMemory;

typedef struct {
    int64_t start; /* in the arena; -1 - j: the j-th piece sent to ids_of_pieces */
    int64_t length;
} PieceRef;

typedef ARRAY(PieceRef) PieceRefs;

static void id_memory_capsule_free(PyObject *capsule) {
    IdMemory *m = PyCapsule_GetPointer(capsule, IDS_CAPSULE);
    if (m != NULL) {
        cache_free(&m->keys);
        wordpiece_free(m->keys.wordpiece);
        PyMem_Free(m->ids.items);
        PyMem_Free(m);
    }
}

/* new_id_memory(wordpiece, limit=IDS_MAX) with AsciiWordPiece.tables() or None. */
static PyObject *new_id_memory(PyObject *self, PyObject *args) {
    PyObject *tables;
    Py_ssize_t limit = (Py_ssize_t)IDS_MAX;
    if (!PyArg_ParseTuple(args, "O|n", &tables, &limit)) return NULL;
    if (limit < 0 || (size_t)limit > IDS_MAX) {
        PyErr_SetString(PyExc_ValueError, "limit must be between 0 and IDS_MAX");
        return NULL;
    }
    IdMemory *m = PyMem_Calloc(1, sizeof(IdMemory));
    if (m == NULL) return PyErr_NoMemory();
    m->limit = (size_t)limit;
    if (tables != Py_None) {
        if (!PyTuple_Check(tables)) {
            PyMem_Free(m);
            PyErr_SetString(PyExc_TypeError, "new_id_memory takes AsciiWordPiece.tables() or None");
            return NULL;
        }
        m->keys.wordpiece = wordpiece_new(tables);
        if (m->keys.wordpiece == NULL) {
            PyMem_Free(m);
            return NULL;
        }
    }
    PyObject *capsule = PyCapsule_New(m, IDS_CAPSULE, id_memory_capsule_free);
    if (capsule == NULL) {
        wordpiece_free(m->keys.wordpiece);
        PyMem_Free(m);
    }
    return capsule;
}

static inline int other_whitespace(Py_UCS4 c) {
    return c != ' ' && c != '\t' && c != '\n' && c != '\r' && Py_UNICODE_ISSPACE(c);
}

/* A buffer of `format` with `ndim` dimensions, C-contiguous; 0, or -1 with an exception set. */
static int get_array(PyObject *object, Py_buffer *view, int writable, const char *format, int ndim, const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, view, flags) < 0) return -1;
    const char *got = view->format ? view->format : "B";
    if (*got == '<' || *got == '=' || *got == '@') got++;
    int same = strcmp(got, format) == 0 || (strcmp(format, "q") == 0 && strcmp(got, "l") == 0 &&
                                             sizeof(long) == 8);
    if (!same || view->ndim != ndim) {
        PyErr_Format(PyExc_TypeError, "%s must be a %d-dimensional C-contiguous array of format '%s'", name, ndim,
                     format);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

typedef struct {
    Py_buffer matrix, mapping, weights, out;
    int has_mapping, has_weights, has_out, has_matrix;
} Arrays;

static void arrays_release(Arrays *a) {
    if (a->has_matrix) PyBuffer_Release(&a->matrix);
    if (a->has_mapping) PyBuffer_Release(&a->mapping);
    if (a->has_weights) PyBuffer_Release(&a->weights);
    if (a->has_out) PyBuffer_Release(&a->out);
}

/* row[d] += source[d], in double: columns are independent, so the compiler may do several at
 * once (the vectoriser, asked for here: -O2 leaves this loop scalar) without changing a sum. */
__attribute__((optimize("tree-vectorize"))) static void add_row(double *restrict row,
                                                                   const float *restrict source, Py_ssize_t dim) {
    for (Py_ssize_t d = 0; d < dim; d++) row[d] += (double)source[d];
}

__attribute__((optimize("tree-vectorize"))) static void add_weighted_row(double *restrict row,
                                                                            const float *restrict source,
                                                                            double weight, Py_ssize_t dim) {
    for (Py_ssize_t d = 0; d < dim; d++) row[d] += (double)source[d] * weight;
}

/* Adds the rows of the ids of `refs` (cut at max_length, unknown dropped) into `row`, divided by
 * their number, which is returned; -1 with an exception set for an id outside the model. */
static Py_ssize_t sum_rows(const IdMemory *m, const PieceRef *refs, Py_ssize_t count, Py_ssize_t max_length,
                           int64_t unknown, const Arrays *a, double *row) {
    const float *matrix = a->matrix.buf;
    const int64_t *mapping = a->has_mapping ? a->mapping.buf : NULL;
    const float *weights = a->has_weights ? a->weights.buf : NULL;
    Py_ssize_t rows = a->matrix.shape[0], dim = a->matrix.shape[1];
    Py_ssize_t vocab = mapping != NULL ? a->mapping.shape[0] : rows;
    if (weights != NULL && a->weights.shape[0] < vocab) vocab = a->weights.shape[0];
    Py_ssize_t taken = 0, kept = 0;
    for (Py_ssize_t r = 0; r < count; r++) {
        const int32_t *ids = m->ids.items + refs[r].start;
        for (int64_t j = 0; j < refs[r].length; j++) {
            if (max_length >= 0 && taken >= max_length) goto done;
            taken++;
            int64_t id = ids[j];
            if (id == unknown) continue;
            if (id < 0 || id >= vocab) {
                PyErr_Format(PyExc_ValueError, "token id %lld is outside the model's %zd tokens", (long long)id, vocab);
                return -1;
            }
            int64_t at = mapping != NULL ? mapping[id] : id;
            if (at < 0 || at >= rows) {
                PyErr_Format(PyExc_ValueError, "token id %lld maps outside the matrix", (long long)id);
                return -1;
            }
            const float *source = matrix + at * dim;
            if (weights != NULL) add_weighted_row(row, source, (double)weights[id], dim);
            else add_row(row, source, dim);
            kept++;
        }
    }
done:
    if (kept > 0)
        for (Py_ssize_t d = 0; d < dim; d++) row[d] /= (double)kept;
    return kept;
}

/* Remembers [a, b) of `t` as the ids [start, start + length) of the arena (long pieces are not
 * remembered: see CACHE_MAX_PIECE_CHARS). 0, or -1 with an exception set. */
static int remember_ids(IdMemory *m, const SentenceText *t, Py_ssize_t a, Py_ssize_t b, uint64_t hash, size_t start,
                        size_t length) {
    if (length >= ((size_t)1 << IDS_LENGTH_BITS)) return 0;
    return cache_insert(&m->keys, hash, t, a, b, (int64_t)((start << IDS_LENGTH_BITS) | length));
}

/* Pass one: the refs of every piece of every text; the pieces no path here takes go to
 * `missing` (their refs pending). `counts[k]` is -1 for a declined text, else 0. */
static int collect_pieces(IdMemory *m, PyObject *texts, PieceRefs *refs, Py_ssize_t *firsts, Py_ssize_t *counts,
                          PyObject *missing, Positions *pending) {
    Py_ssize_t n = PyList_GET_SIZE(texts);
    for (Py_ssize_t k = 0; k < n; k++) {
        firsts[k] = refs->count;
        PyObject *text = PyList_GET_ITEM(texts, k);
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "texts must be str");
            return -1;
        }
        SentenceText t = {PyUnicode_KIND(text), PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text)};
        counts[k] = 0;
        for (Py_ssize_t p = 0; p < t.size; p++) {
            if (other_whitespace(sentence_read(&t, p))) {
                counts[k] = -1;
                break;
            }
        }
        if (counts[k] < 0) continue;
        Py_ssize_t p = 0;
        for (;;) {
            while (p < t.size && Py_UNICODE_ISSPACE(sentence_read(&t, p))) p++;
            if (p >= t.size) break;
            Py_ssize_t a = p;
            while (p < t.size && !Py_UNICODE_ISSPACE(sentence_read(&t, p))) p++;
            uint64_t hash = piece_hash(&t, a, p);
            int64_t packed = cache_lookup(&m->keys, hash, &t, a, p);
            PieceRef ref = {0, 0};
            if (packed >= 0) {
                ref.start = packed >> IDS_LENGTH_BITS;
                ref.length = packed & (((int64_t)1 << IDS_LENGTH_BITS) - 1);
            } else {
                Py_ssize_t got = -1;
                size_t start = m->ids.count;
                if (m->keys.wordpiece != NULL) got = wordpiece_run(m->keys.wordpiece, &t, a, p, &m->ids);
                if (got == -2) return -1;
                if (got >= 0) {
                    ref.start = (int64_t)start;
                    ref.length = (int64_t)(m->ids.count - start);
                    if (remember_ids(m, &t, a, p, hash, start, m->ids.count - start) < 0) return -1;
                } else {
                    PyObject *piece = PyUnicode_Substring(text, a, p);
                    if (piece == NULL) return -1;
                    ref.start = -1 - (int64_t)PyList_GET_SIZE(missing);
                    int failed = PyList_Append(missing, piece) < 0 || ARRAY_PUSH(*pending, refs->count) < 0;
                    Py_DECREF(piece);
                    if (failed) return -1;
                }
            }
            if (ARRAY_PUSH(*refs, ref) < 0) return -1;
        }
    }
    firsts[n] = refs->count;
    return 0;
}

/* The ids `ids_of_pieces` gave for the pending pieces, into the arena and the memory. */
static int settle_missing(IdMemory *m, PyObject *missing, PyObject *ids_of_pieces, PieceRefs *refs,
                          const Positions *pending) {
    Py_ssize_t count = PyList_GET_SIZE(missing);
    if (count == 0) return 0;
    PyObject *found = PyObject_CallOneArg(ids_of_pieces, missing); /* may let another thread in */
    if (found == NULL) return -1;
    int result = -1;
    if (!PyList_Check(found) || PyList_GET_SIZE(found) != count) {
        PyErr_SetString(PyExc_TypeError, "ids_of_pieces must return one bytes object per piece");
        goto done;
    }
    for (Py_ssize_t j = 0; j < count; j++) {
        PyObject *item = PyList_GET_ITEM(found, j);
        if (!PyBytes_Check(item) || PyBytes_GET_SIZE(item) % (Py_ssize_t)sizeof(int32_t) != 0) {
            PyErr_SetString(PyExc_TypeError, "ids_of_pieces must return int32 ids as bytes");
            goto done;
        }
        size_t length = (size_t)PyBytes_GET_SIZE(item) / sizeof(int32_t), start = m->ids.count;
        const char *bytes = PyBytes_AS_STRING(item);
        for (size_t i = 0; i < length; i++) {
            int32_t id;
            memcpy(&id, bytes + i * sizeof id, sizeof id);
            if (sink_push(&m->ids, id) < 0) goto done;
        }
        refs->items[pending->items[j]] = (PieceRef){(int64_t)start, (int64_t)length};
        PyObject *piece = PyList_GET_ITEM(missing, j);
        SentenceText t = {PyUnicode_KIND(piece), PyUnicode_DATA(piece), PyUnicode_GET_LENGTH(piece)};
        if (remember_ids(m, &t, 0, t.size, piece_hash(&t, 0, t.size), start, length) < 0) goto done;
    }
    result = 0;
done:
    Py_DECREF(found);
    return result;
}

/* static_sums(memory, texts, ids_of_pieces, max_length, unknown, matrix, mapping, weights, out)
 * -> list[int]: see the top of this file. `out` is float64 [len(texts), dim], zeros; a
 * declined text's row is left alone and its count is -1. */
static PyObject *static_sums(PyObject *self, PyObject *args) {
    PyObject *memory, *texts, *ids_of_pieces, *matrix, *mapping, *weights, *out;
    Py_ssize_t max_length;
    long long unknown;
    if (!PyArg_ParseTuple(args, "OO!OnLOOOO", &memory, &PyList_Type, &texts, &ids_of_pieces, &max_length, &unknown,
                          &matrix, &mapping, &weights, &out))
        return NULL;
    IdMemory *m = PyCapsule_GetPointer(memory, IDS_CAPSULE);
    if (m == NULL) return NULL;
    if (m->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the piece id memory is in use by another call");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(texts);
    Arrays a = {0};
    if (get_array(matrix, &a.matrix, 0, "f", 2, "matrix") < 0) return NULL;
    a.has_matrix = 1;
    PyObject *result = NULL, *missing = NULL;
    PieceRefs refs = {0};
    Positions pending = {0};
    Py_ssize_t *firsts = NULL;
    Py_ssize_t *counts = NULL;
    if (mapping != Py_None) {
        if (get_array(mapping, &a.mapping, 0, "q", 1, "mapping") < 0) goto done;
        a.has_mapping = 1;
    }
    if (weights != Py_None) {
        if (get_array(weights, &a.weights, 0, "f", 1, "weights") < 0) goto done;
        a.has_weights = 1;
    }
    if (get_array(out, &a.out, 1, "d", 2, "out") < 0) goto done;
    a.has_out = 1;
    if (a.out.shape[0] != n || a.out.shape[1] != a.matrix.shape[1]) {
        PyErr_SetString(PyExc_ValueError, "out must be [len(texts), the matrix's dimension]");
        goto done;
    }
    m->busy = 1;
    if (m->ids.count > m->limit) { /* start afresh: a bound, not a policy */
        cache_free(&m->keys);
        m->ids.count = 0;
    }
    firsts = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    counts = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    missing = PyList_New(0);
    if (firsts == NULL || counts == NULL || missing == NULL) {
        PyErr_NoMemory();
        goto unbusy;
    }
    if (collect_pieces(m, texts, &refs, firsts, counts, missing, &pending) < 0) goto unbusy;
    if (settle_missing(m, missing, ids_of_pieces, &refs, &pending) < 0) goto unbusy;
    double *rows = a.out.buf;
    Py_ssize_t dim = a.matrix.shape[1];
    for (Py_ssize_t k = 0; k < n; k++) {
        if (counts[k] < 0) continue;
        counts[k] = sum_rows(m, refs.items + firsts[k], firsts[k + 1] - firsts[k], max_length, unknown, &a,
                             rows + k * dim);
        if (counts[k] < 0) goto unbusy;
    }
    result = PyList_New(n);
    if (result == NULL) goto unbusy;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *count = PyLong_FromSsize_t(counts[k]);
        if (count == NULL) {
            Py_CLEAR(result);
            goto unbusy;
        }
        PyList_SET_ITEM(result, k, count);
    }
unbusy:
    m->busy = 0;
done:
    arrays_release(&a);
    Py_XDECREF(missing);
    PyMem_Free(refs.items);
    PyMem_Free(pending.items);
    PyMem_Free(firsts);
    PyMem_Free(counts);
    return result;
}

/* wordpiece_ids(memory, pieces) -> list[list[int] | None]: the memory's WordPiece path on each
 * piece (None: not for it), without reading or filling the memory. For the difference tests
 * against worker/wordpiece.py. */
static PyObject *wordpiece_ids(PyObject *self, PyObject *args) {
    PyObject *memory, *pieces;
    if (!PyArg_ParseTuple(args, "OO!", &memory, &PyList_Type, &pieces)) return NULL;
    IdMemory *m = PyCapsule_GetPointer(memory, IDS_CAPSULE);
    if (m == NULL) return NULL;
    if (m->keys.wordpiece == NULL) {
        PyErr_SetString(PyExc_ValueError, "this memory has no WordPiece path");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(pieces);
    PyObject *out = PyList_New(n);
    IdSink sink = {0};
    if (out == NULL) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *piece = PyList_GET_ITEM(pieces, k), *item = NULL;
        if (!PyUnicode_Check(piece)) {
            PyErr_SetString(PyExc_TypeError, "pieces must be str");
            goto fail;
        }
        SentenceText t = {PyUnicode_KIND(piece), PyUnicode_DATA(piece), PyUnicode_GET_LENGTH(piece)};
        sink.count = 0;
        Py_ssize_t count = wordpiece_run(m->keys.wordpiece, &t, 0, t.size, &sink);
        if (count == -2) goto fail;
        if (count < 0) {
            item = Py_NewRef(Py_None);
        } else {
            item = PyList_New(count);
            for (Py_ssize_t i = 0; item != NULL && i < count; i++) {
                PyObject *id = PyLong_FromLong(sink.items[i]);
                if (id == NULL) Py_CLEAR(item);
                else PyList_SET_ITEM(item, i, id);
            }
        }
        if (item == NULL) goto fail;
        PyList_SET_ITEM(out, k, item);
    }
    PyMem_Free(sink.items);
    return out;
fail:
    PyMem_Free(sink.items);
    Py_DECREF(out);
    return NULL;
}

#define STATIC_ROWS_METHODS                                                                               \
    {"new_id_memory", new_id_memory, METH_VARARGS,                                                       \
     "new_id_memory(wordpiece, limit=IDS_MAX) -> memory of token ids per piece (AsciiWordPiece.tables() " \
     "or None; starts afresh past limit ids)"},                                                          \
    {"static_sums", static_sums, METH_VARARGS,                                                           \
     "static_sums(memory, texts, ids_of_pieces, max_length, unknown, matrix, mapping, weights, out) -> " \
     "list[int]: a static model's rows summed per text (-1: declined)"},                                 \
    {"wordpiece_ids", wordpiece_ids, METH_VARARGS,                                                       \
     "wordpiece_ids(memory, pieces) -> list[list[int] | None]: the WordPiece path's ids (for tests)"}

#endif /* CHUNKSTREAM_STATIC_ROWS_H */
