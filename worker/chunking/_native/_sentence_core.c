/* The compiled core of the `sentence` strategy: one call per document.
 *
 * It computes exactly what the pure-Python twin computes: segment.split_sentences(text,
 * soft_wraps=True) (the candidates of segment.CANDIDATE, the exceptions of
 * segment.false_stop_at, the soft line breaks of segment.soft_line_break outside fenced code),
 * and, for the character unit, segment.cap_spans and segment.pack_spans and the Chunk objects
 * of SentenceChunker.chunk_reference. Every rule lives in those Python modules, documented
 * there; the sentence rules are stated in C once, in _sentence_rules.h, shared with the
 * adaptive and lexical cores. tests/chunking/test_sentence_native.py compares core and twin
 * on generated and real documents.
 *
 * Two entry points: chunk(text, cap) for the character unit (segmentation, cap, packing and
 * the Chunk objects in one call), and sentences(text) for a tokenizer unit, where the
 * sentence spans come back as a flat list [start0, end0, start1, end1, ...] and Python counts
 * tokens (the tokenizer is a Python object).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_sentence_rules.h" /* segment.false_stop_at, soft_line_break and their classes */

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

/* -- growable offsets -------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t *items;
    Py_ssize_t count, capacity;
} Offsets;

static int push(Offsets *o, Py_ssize_t value) {
    if (o->count == o->capacity) {
        Py_ssize_t capacity = o->capacity ? 2 * o->capacity : 64;
        Py_ssize_t *items = PyMem_Realloc(o->items, sizeof(Py_ssize_t) * (size_t)capacity);
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        o->items = items;
        o->capacity = capacity;
    }
    o->items[o->count++] = value;
    return 0;
}

/* A span pushed as two offsets. */
static int push_span(Offsets *o, Py_ssize_t start, Py_ssize_t end) {
    return push(o, start) < 0 || push(o, end) < 0 ? -1 : 0;
}

/* segment._strip: [start, end) without surrounding whitespace, pushed unless all space. */
static int push_stripped(const SentenceText *t, Offsets *spans, Py_ssize_t start, Py_ssize_t end) {
    while (start < end && is_space(sentence_read(t, start))) start++;
    if (start == end) return 0;
    while (is_space(sentence_read(t, end - 1))) end--;
    return push_span(spans, start, end);
}

/* -- segmentation (segment.fence_lines, segment.split_sentences with soft_wraps=True) ------ */

/* Whether the line starting at `line` is a fence line of segment.fence_lines: after spaces
 * and tabs only, ``` or ~~~. */
static int is_fence_line(const SentenceText *t, Py_ssize_t line) {
    Py_ssize_t n = t->size, p = line;
    while (p < n && (sentence_read(t, p) == ' ' || sentence_read(t, p) == '\t')) p++;
    if (p + 3 > n) return 0;
    Py_UCS4 c = sentence_read(t, p);
    return (c == '`' || c == '~') && sentence_read(t, p + 1) == c && sentence_read(t, p + 2) == c;
}

/* The first characters of segment.CANDIDATE's alternatives (its leading look-ahead), for the
 * code points below 256 by table. */
static uint8_t candidate_first[256];

static void fill_candidate_first(void) {
    const char *ascii = "\n\r.!?";
    for (const char *c = ascii; *c; c++) candidate_first[(uint8_t)*c] = 1;
}

static inline int is_candidate_first(Py_UCS4 c) {
    if (c < 256) return candidate_first[c];
    return c == 0x2026 || c == 0x2028 || c == 0x2029 || is_cjk_stop(c) || is_arabic_stop(c);
}

/* The next position at or after i holding a candidate's first character, or n. The loop over
 * ordinary text, written once per storage kind so that the compiler sees the element type. */
#define DEFINE_NEXT_CANDIDATE(NAME, CHAR_T)                                                  \
    static Py_ssize_t NAME(const CHAR_T *s, Py_ssize_t i, Py_ssize_t n) {                 \
        while (i < n && !is_candidate_first(s[i])) i++;                                     \
        return i;                                                                           \
    }
DEFINE_NEXT_CANDIDATE(next_candidate_ucs2, Py_UCS2)
DEFINE_NEXT_CANDIDATE(next_candidate_ucs4, Py_UCS4)

static Py_ssize_t next_candidate_ucs1(const Py_UCS1 *s, Py_ssize_t i, Py_ssize_t n) {
    /* Four at a time: most of a text is ordinary characters. */
    while (i + 4 <= n &&
           !(candidate_first[s[i]] | candidate_first[s[i + 1]] | candidate_first[s[i + 2]] | candidate_first[s[i + 3]]))
        i += 4;
    while (i < n && !candidate_first[s[i]]) i++;
    return i;
}

static Py_ssize_t next_candidate(const SentenceText *t, Py_ssize_t i) {
    if (t->kind == PyUnicode_1BYTE_KIND) return next_candidate_ucs1(t->data, i, t->size);
    if (t->kind == PyUnicode_2BYTE_KIND) return next_candidate_ucs2(t->data, i, t->size);
    return next_candidate_ucs4(t->data, i, t->size);
}

/* segment.split_sentences(text, soft_wraps=True): the sentence spans pushed in order.
 *
 * Every line break is a candidate, so the scan visits each one in order; it keeps where the
 * current line starts (for soft_line_break) and counts the fence lines of segment.fence_lines
 * (lines starting at 0 or after a '\n') as it reaches them, instead of listing them first. */
static int split_sentences(const SentenceText *t, Offsets *spans) {
    Py_ssize_t n = t->size, start = 0, line = 0;
    int in_code = n > 0 && is_fence_line(t, 0);
    Py_ssize_t i = next_candidate(t, 0);
    while (i < n) {
        Py_UCS4 c = sentence_read(t, i);
        Py_ssize_t match_end, end;
        if (is_line_break(c)) {
            match_end = c == '\r' && i + 1 < n && sentence_read(t, i + 1) == '\n' ? i + 2 : i + 1;
            int soft = soft_line_break(t, 0, i, line, in_code);
            line = match_end;
            if (sentence_read(t, match_end - 1) == '\n' && match_end < n && is_fence_line(t, match_end))
                in_code = !in_code;
            if (soft) {
                i = next_candidate(t, match_end);
                continue;
            }
            end = i;
        } else if (is_cjk_stop(c)) {
            Py_ssize_t j = i;
            while (j < n && is_cjk_stop(sentence_read(t, j))) j++;
            while (j < n && is_cjk_closer(sentence_read(t, j))) j++;
            match_end = end = j;
        } else if (is_arabic_stop(c)) {
            Py_ssize_t j = i;
            while (j < n && is_arabic_stop(sentence_read(t, j))) j++;
            match_end = end = j;
        } else {
            /* Latin: a run of terminators, its closers, then whitespace or the end. Where that
             * fails no later position of the run matches either (each has the same follower),
             * and closers open no candidate, so the search goes on after the run. */
            Py_ssize_t j = i;
            while (j < n && is_latin_stop(sentence_read(t, j))) j++;
            Py_ssize_t mark_end = j;
            while (j < n && is_latin_closer(sentence_read(t, j))) j++;
            if (j < n && !is_space(sentence_read(t, j))) {
                i = next_candidate(t, mark_end);
                continue;
            }
            if (false_stop_at(t, 0, i, mark_end, j, start, &config.abbreviations)) {
                i = next_candidate(t, j);
                continue;
            }
            match_end = end = j;
        }
        if (push_stripped(t, spans, start, end) < 0) return -1;
        start = match_end;
        i = next_candidate(t, match_end);
    }
    return push_stripped(t, spans, start, n);
}

/* -- the character unit (segment.cap_spans, segment.split_to_cap, segment.pack_spans) ----- */

/* segment.pack_spans with the character counter: consecutive spans [from, to) of `pieces`
 * greedily joined into groups of at most `cap` characters, pushed to `groups`. */
static int pack(const Offsets *pieces, Py_ssize_t from, Py_ssize_t to, Py_ssize_t cap, Offsets *groups) {
    const Py_ssize_t *p = pieces->items;
    Py_ssize_t i = from;
    while (i < to) {
        Py_ssize_t start = p[2 * i], j = i + 1;
        while (j < to && p[2 * j + 1] - start <= cap) j++;
        if (push_span(groups, start, p[2 * j - 1]) < 0) return -1;
        i = j;
    }
    return 0;
}

/* segment.split_to_cap with the character counter: the span as it is when it fits, else its
 * words (segment.split_words: runs of non-space), each over-long word cut every `cap`
 * characters, packed. */
static int split_to_cap(const SentenceText *t, Py_ssize_t start, Py_ssize_t end, Py_ssize_t cap,
                        Offsets *words, Offsets *out) {
    if (end - start <= cap) return push_span(out, start, end);
    words->count = 0;
    Py_ssize_t p = start;
    while (p < end) {
        while (p < end && is_space(sentence_read(t, p))) p++;
        if (p == end) break;
        Py_ssize_t word = p;
        while (p < end && !is_space(sentence_read(t, p))) p++;
        for (Py_ssize_t piece = word; piece < p; piece += cap)
            if (push_span(words, piece, piece + cap < p ? piece + cap : p) < 0) return -1;
    }
    return pack(words, 0, words->count / 2, cap, out);
}

static PyObject *make_chunk(PyObject *text, Py_ssize_t index, Py_ssize_t start, Py_ssize_t end) {
    PyObject *chunk = NULL;
    PyObject *metadata = PyDict_New();
    PyObject *index_obj = PyLong_FromSsize_t(index);
    PyObject *body = PyUnicode_Substring(text, start, end);
    PyObject *start_obj = PyLong_FromSsize_t(start);
    PyObject *end_obj = PyLong_FromSsize_t(end);
    PyObject *length_obj = PyLong_FromSsize_t(end - start);
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

/* -- entry points ------------------------------------------------------------------------ */

static PyObject *chunk(PyObject *self, PyObject *args) {
    PyObject *text;
    Py_ssize_t cap;
    if (!PyArg_ParseTuple(args, "Un", &text, &cap) || !ready()) return NULL;
    if (cap < 1) {
        PyErr_Format(PyExc_ValueError, "cap must be >= 1, got %zd", cap);
        return NULL;
    }
    SentenceText t = {PyUnicode_KIND(text), PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text)};
    Offsets sentences = {0}, words = {0}, pieces = {0}, groups = {0};
    PyObject *chunks = NULL;
    if (split_sentences(&t, &sentences) < 0) goto done;
    for (Py_ssize_t k = 0; k < sentences.count; k += 2)
        if (split_to_cap(&t, sentences.items[k], sentences.items[k + 1], cap, &words, &pieces) < 0) goto done;
    if (pack(&pieces, 0, pieces.count / 2, cap, &groups) < 0) goto done;
    chunks = PyList_New(groups.count / 2);
    if (chunks == NULL) goto done;
    for (Py_ssize_t k = 0; k < groups.count / 2; k++) {
        PyObject *item = make_chunk(text, k, groups.items[2 * k], groups.items[2 * k + 1]);
        if (item == NULL) {
            Py_CLEAR(chunks);
            goto done;
        }
        PyList_SET_ITEM(chunks, k, item);
    }
done:
    PyMem_Free(sentences.items);
    PyMem_Free(words.items);
    PyMem_Free(pieces.items);
    PyMem_Free(groups.items);
    return chunks;
}

static PyObject *sentences(PyObject *self, PyObject *args) {
    PyObject *text;
    if (!PyArg_ParseTuple(args, "U", &text) || !ready()) return NULL;
    SentenceText t = {PyUnicode_KIND(text), PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text)};
    Offsets spans = {0};
    PyObject *flat = NULL;
    if (split_sentences(&t, &spans) == 0 && (flat = PyList_New(spans.count)) != NULL) {
        for (Py_ssize_t k = 0; k < spans.count; k++) {
            PyObject *value = PyLong_FromSsize_t(spans.items[k]);
            if (value == NULL) {
                Py_CLEAR(flat);
                break;
            }
            PyList_SET_ITEM(flat, k, value);
        }
    }
    PyMem_Free(spans.items);
    return flat;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(abbreviations, chunk_type, name): once, at import"},
    {"chunk", chunk, METH_VARARGS, "chunk(text, cap) -> list[Chunk] (the character unit)"},
    {"sentences", sentences, METH_VARARGS,
     "sentences(text) -> [start0, end0, start1, end1, ...] (split_sentences, soft_wraps=True)"},
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
    fill_candidate_first();
    return PyModule_Create(&module);
}
