/* The compiled core of the `sentence` strategy: one call per document.
 *
 * It computes exactly what the pure-Python twin computes (SentenceChunker.chunk_reference):
 * the units of text/units.py (the blocks of text/structure.py, paragraphs cut into sentences by
 * the rules of segment.py, anything over the unit limit cut into lines, words, characters),
 * their sizes in characters or tokens, the content-defined packing of text/packing.py, and the
 * Chunk objects. Every rule lives in those Python modules, documented there; this file and the
 * headers it includes restate them in C:
 *
 *   _sentence_rules.h  segment.false_stop_at and the terminator classes (shared with the
 *                      adaptive and lexical cores)
 *   _structure.h       text/structure.py: lines, blocks, gap levels
 *   _piece_cache.h     the memory of token counts per piece (one per tokenizer)
 *   _units.h           text/units.py: token pieces and their counts, paragraph sentences
 *   _packing.h         text/units.py read_units, text/packing.py
 *   _static_rows.h     a static model's rows summed per text (worker/models/static.py)
 *   _layout_sentences.h  segment.split_sentences(soft_wraps=True), for the embedding layout
 *
 * tests/chunking/test_sentence_native.py compares core and twin on generated and real
 * documents, in characters and in tokens.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_sentence_rules.h"
#include "_structure.h"
#include "_piece_cache.h"
#include "_units.h"
#include "_packing.h"
#include "_static_rows.h"
#include "_layout_sentences.h"

/* -- configuration (set once from Python) ------------------------------------------------ */

typedef struct {
    Abbreviations abbreviations; /* segment.ABBREVIATIONS (lower case, ASCII) */
    PyObject *chunk_type, *name, *key_index;
} Config;

static Config config;

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *abbreviations, *chunk_type, *name;
    if (!PyArg_ParseTuple(args, "OOU", &abbreviations, &chunk_type, &name)) return NULL;
    if (!PyCallable_Check(chunk_type)) {
        PyErr_SetString(PyExc_TypeError, "chunk_type must be callable");
        return NULL;
    }
    if (abbreviations_read(&config.abbreviations, abbreviations) < 0) return NULL;
    PyObject *key = PyUnicode_InternFromString("chunk_index");
    if (key == NULL) return NULL;
    Py_XSETREF(config.key_index, key);
    Py_INCREF(chunk_type);
    Py_XSETREF(config.chunk_type, chunk_type);
    Py_INCREF(name);
    Py_XSETREF(config.name, name);
    Py_RETURN_NONE;
}

/* configure_rules(abbreviations): the sentence rules alone, for what the core serves beside the
 * strategy (the layout's sentences): the seam (worker/chunking/_native/__init__.py) sets them
 * when no `sentence` chunker has configured the core. */
static PyObject *configure_rules(PyObject *self, PyObject *abbreviations) {
    if (abbreviations_read(&config.abbreviations, abbreviations) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *make_chunk(PyObject *text, Py_ssize_t index, Py_ssize_t start, Py_ssize_t end,
                            long long size) {
    PyObject *chunk = NULL;
    PyObject *metadata = PyDict_New();
    PyObject *index_obj = PyLong_FromSsize_t(index);
    PyObject *body = PyUnicode_Substring(text, start, end);
    PyObject *start_obj = PyLong_FromSsize_t(start);
    PyObject *end_obj = PyLong_FromSsize_t(end);
    PyObject *length_obj = PyLong_FromLongLong(size);
    if (metadata != NULL && index_obj != NULL && body != NULL && start_obj != NULL && end_obj != NULL &&
        length_obj != NULL && PyDict_SetItem(metadata, config.key_index, index_obj) == 0) {
        PyObject *args[6] = {body, start_obj, end_obj, length_obj, config.name, metadata};
        chunk = PyObject_Vectorcall(config.chunk_type, args, 6, NULL);
    }
    Py_XDECREF(metadata);
    Py_XDECREF(index_obj);
    Py_XDECREF(body);
    Py_XDECREF(start_obj);
    Py_XDECREF(end_obj);
    Py_XDECREF(length_obj);
    return chunk;
}

static int ready(void) {
    if (config.chunk_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return 0;
    }
    return 1;
}

/* -- entry point --------------------------------------------------------------------------- */

static PyObject *chunk(PyObject *self, PyObject *args) {
    PyObject *text, *memory, *count_pieces, *cut_word = Py_None;
    Py_ssize_t cap;
    if (!PyArg_ParseTuple(args, "UnOO|O", &text, &cap, &memory, &count_pieces, &cut_word) || !ready()) return NULL;
    if (cap < 1) {
        PyErr_Format(PyExc_ValueError, "cap must be >= 1, got %zd", cap);
        return NULL;
    }
    int tokens = memory != Py_None;
    PieceCache *cache = NULL;
    if (tokens) {
        cache = PyCapsule_GetPointer(memory, CACHE_CAPSULE);
        if (cache == NULL) return NULL;
        if (!PyCallable_Check(count_pieces)) {
            PyErr_SetString(PyExc_TypeError, "count_pieces must be callable");
            return NULL;
        }
    }
    SentenceText t = {PyUnicode_KIND(text), PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text)};
    Measure m;
    memset(&m, 0, sizeof m);
    m.t = &t;
    m.tokens = tokens;
    if (measure_take_cutter(&m, text, cut_word) < 0) return NULL;
    Units units;
    memset(&units, 0, sizeof units);
    Positions groups = {0};
    PyObject *chunks = NULL;
    Sizes sizes = sizes_for(cap);
    if (tokens && measure_count(&m, text, cache, count_pieces) < 0) goto done;
    int read = read_units(&m, &sizes, &config.abbreviations, &units);
    if (read == HAND_BACK) {
        chunks = Py_NewRef(Py_None);
        goto done;
    }
    if (read < 0 || pack(&units, &sizes, &groups) < 0) goto done;
    settle(&groups, &units, &sizes);
    Py_ssize_t n = groups.count / 2;
    chunks = PyList_New(n);
    if (chunks == NULL) goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t first = groups.items[2 * k], last = groups.items[2 * k + 1];
        PyObject *item = make_chunk(text, k, units.starts[first], units.ends[last],
                                    units.before_end[last] - units.before_start[first]);
        if (item == NULL) {
            Py_CLEAR(chunks);
            goto done;
        }
        PyList_SET_ITEM(chunks, k, item);
    }
done:
    measure_free(&m);
    units_free(&units);
    PyMem_Free(groups.items);
    return chunks;
}

/* sentences(text, start, end, clauses) -> list[int]: segment.split_sentences(text[start:end],
 * clauses=clauses, soft_wraps=True) as flat [start, end) pairs, offsets in `text`. */
static PyObject *sentences(PyObject *self, PyObject *args) {
    PyObject *text;
    Py_ssize_t start, end;
    int clauses;
    if (!PyArg_ParseTuple(args, "Unnp", &text, &start, &end, &clauses)) return NULL;
    if (start < 0 || end < start || end > PyUnicode_GET_LENGTH(text)) {
        PyErr_SetString(PyExc_ValueError, "sentences: 0 <= start <= end <= len(text)");
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    SentenceText t = {kind, (const char *)PyUnicode_DATA(text) + start * kind, end - start};
    Positions found = {0};
    PyObject *out = NULL;
    if (layout_sentences(&t, clauses, &config.abbreviations, start, &found) == 0) {
        out = PyList_New(found.count);
        for (Py_ssize_t k = 0; out != NULL && k < found.count; k++) {
            PyObject *offset = PyLong_FromSsize_t(found.items[k]);
            if (offset == NULL) Py_CLEAR(out);
            else PyList_SET_ITEM(out, k, offset);
        }
    }
    PyMem_Free(found.items);
    return out;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(abbreviations, chunk_type, name): once, before the first chunk()"},
    {"configure_rules", configure_rules, METH_O,
     "configure_rules(abbreviations): the sentence rules alone (for sentences())"},
    {"chunk", chunk, METH_VARARGS,
     "chunk(text, cap, memory, count_pieces) -> list[Chunk] | None: characters when memory is None, "
     "else tokens (a new_cache() memory and a PieceCounter's count_pieces); None: the twin must chunk it"},
    PIECE_MEMORY_METHODS,
    STATIC_ROWS_METHODS,
    {"sentences", sentences, METH_VARARGS,
     "sentences(text, start, end, clauses) -> list[int]: segment.split_sentences(text[start:end], "
     "clauses=clauses, soft_wraps=True) as flat pairs of offsets in text"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_sentence_core",
    .m_doc = "Compiled core of the sentence strategy (see worker/chunking/rules/sentence.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__sentence_core(void) {
    fill_piece_classes();
    return PyModule_Create(&module);
}
