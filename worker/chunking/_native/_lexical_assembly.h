/* Part of _lexical_core.c (see there): the Chunk objects of a packed document with their
 * metadata (lexical._Assembly, lexical._densities). */
#ifndef LEXICAL_ASSEMBLY_H
#define LEXICAL_ASSEMBLY_H

#include "_lexical_config.h"
#include "_lexical_keywords.h"
#include "_lexical_spans.h"

/* round(x, digits) by Python's own conversions: the digits, then the float they read as. */
static int rounded_by_python(double x, int digits, double *out)
{
    char *repr = PyOS_double_to_string(x, 'f', digits, 0, NULL);
    if (repr == NULL)
        return -1;
    double value = PyOS_string_to_double(repr, NULL, NULL);
    PyMem_Free(repr);
    if (value == -1.0 && PyErr_Occurred())
        return -1;
    *out = value;
    return 0;
}

/* round(x, digits) exactly as Python rounds it: Python rounds the double's exact value to
 * the nearest decimal (its correctly rounded dtoa), then reads that decimal back. Scaling
 * by 10**digits in floating point errs by far less than 1e-6 for the values here (at most
 * a few thousand), so away from a half-way point the scaled value rounds to the same
 * integer, and integer / 10**digits is the correctly rounded reading of the decimal.
 * Near a half-way point (or for large values) Python's own conversions decide. */
static int rounded(double x, int digits, double *out)
{
    double scale = digits == 4 ? 1e4 : 10.0;
    double scaled = x * scale;
    if (digits <= 4 && x >= 0.0 && scaled < 1e9) {
        double whole = floor(scaled);
        double frac = scaled - whole;
        if (fabs(frac - 0.5) > 1e-6) {
            *out = (frac > 0.5 ? whole + 1.0 : whole) / scale;
            return 0;
        }
    }
    return rounded_by_python(x, digits, out);
}

/* Sets d[key] = value and drops the reference to value; -1 when value is NULL or on error. */
static int put(PyObject *d, int key, PyObject *value)
{
    if (value == NULL)
        return -1;
    int rc = PyDict_SetItem(d, cfg.key[key], value);
    Py_DECREF(value);
    return rc;
}

/* Names of the distinct reasons (or kinds) in first-seen order. */
static PyObject *distinct_labels(const int *ids, Py_ssize_t n, PyObject *const *names, int n_names)
{
    int seen[16] = {0};
    int order[16];
    Py_ssize_t distinct = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (ids[k] < 0 || ids[k] >= n_names || seen[ids[k]])
            continue;
        seen[ids[k]] = 1;
        order[distinct++] = ids[k];
    }
    PyObject *list = PyList_New(distinct);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < distinct; k++)
        PyList_SET_ITEM(list, k, new_ref(names[order[k]]));
    return list;
}

typedef struct {
    Reader *reader;
    const Text *t;
    PyObject *text, *doc_id, *source;
    const BlockSpans *blocks;
    const Units *units;
    const int *verdict;
    /* the heading stack: levels and titles (owned references) */
    int *levels;
    PyObject **titles;
    Py_ssize_t n_headings, cap_headings;
    Py_ssize_t read; /* blocks whose headings are in the stack */
    PyObject *chunks;
} Assembly;

static void assembly_free(Assembly *a)
{
    for (Py_ssize_t k = 0; k < a->n_headings; k++)
        Py_DECREF(a->titles[k]);
    PyMem_Free(a->levels);
    PyMem_Free(a->titles);
}

/* " ".join(text[start:end].split()) */
static PyObject *folded(PyObject *text, Py_ssize_t start, Py_ssize_t end)
{
    PyObject *piece = PyUnicode_Substring(text, start, end);
    if (piece == NULL)
        return NULL;
    PyObject *words = PyUnicode_Split(piece, NULL, -1);
    Py_DECREF(piece);
    if (words == NULL)
        return NULL;
    PyObject *space = PyUnicode_FromOrdinal(' ');
    PyObject *joined = space == NULL ? NULL : PyUnicode_Join(space, words);
    Py_XDECREF(space);
    Py_DECREF(words);
    return joined;
}

/* lexical.heading_title: the title (a new reference) and *level of the heading block. */
static PyObject *heading_title(const Assembly *a, const BlockSpan *b, int *level)
{
    const Text *t = a->t;
    Py_ssize_t start = b->start, end = b->end;
    if (at(t, start) == '#') {
        Py_ssize_t marks = 0;
        while (start + marks < end && at(t, start + marks) == '#')
            marks++;
        Py_ssize_t body = start + marks, stop = end, closing = 0;
        while (stop - closing > body && at(t, stop - closing - 1) == '#')
            closing++;
        if (closing && (stop - closing == body || is_blank_char(at(t, stop - closing - 1))))
            stop -= closing;
        *level = (int)marks;
        return folded(a->text, body, stop);
    }
    Py_ssize_t cut = end;
    while (cut > start && at(t, cut - 1) != '\n')
        cut--;
    cut = cut > start ? cut - 1 : start; /* the last '\n' (a setext heading has one) */
    Py_ssize_t p = cut + 1;
    while (p < end && is_space(at(t, p)))
        p++;
    *level = p < end && at(t, p) == '=' ? 1 : 2;
    return folded(a->text, start, cut);
}

/* The heading stack after block `through` (lexical._Assembly._path). */
static int read_headings(Assembly *a, Py_ssize_t through)
{
    for (; a->read <= through; a->read++) {
        const BlockSpan *b = &a->blocks->items[a->read];
        if (b->kind != B_HEADING)
            continue;
        int level;
        PyObject *title = heading_title(a, b, &level);
        if (title == NULL)
            return -1;
        while (a->n_headings && a->levels[a->n_headings - 1] >= level)
            Py_DECREF(a->titles[--a->n_headings]);
        /* levels and titles grow together, to cap_headings */
        if (grow((void **)&a->levels, &a->cap_headings, a->n_headings + 1, sizeof(int)) < 0) {
            Py_DECREF(title);
            return -1;
        }
        PyObject **titles = PyMem_Realloc(a->titles, sizeof(PyObject *) * (size_t)a->cap_headings);
        if (titles == NULL) {
            Py_DECREF(title);
            PyErr_NoMemory();
            return -1;
        }
        a->titles = titles;
        a->levels[a->n_headings] = level;
        a->titles[a->n_headings++] = title;
    }
    return 0;
}

static PyObject *heading_path(const Assembly *a)
{
    PyObject *path = PyList_New(a->n_headings);
    if (path == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < a->n_headings; k++)
        PyList_SET_ITEM(path, k, new_ref(a->titles[k]));
    return path;
}

/* lexical.primary_reason */
static int primary_reason(const int *reasons, Py_ssize_t n)
{
    if (n == 0)
        return R_INITIAL;
    Py_ssize_t counts[N_REASONS] = {0};
    for (Py_ssize_t k = 0; k < n; k++)
        counts[reasons[k]]++;
    int best = reasons[0];
    for (int r = 0; r < N_REASONS; r++)
        if (counts[r] > counts[best] || (counts[r] == counts[best] && counts[r] && cfg.rank[r] < cfg.rank[best]))
            best = r;
    return best;
}

/* lexical._content_type over the kinds of a chunk's blocks. */
static PyObject *content_type(const int *kinds, Py_ssize_t n)
{
    int only = -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (kinds[k] == B_HEADING || kinds[k] == B_RULE)
            continue;
        if (only >= 0 && only != kinds[k])
            return cfg.prose_type;
        only = kinds[k];
    }
    if (only < 0)
        return cfg.heading_type;
    return cfg.alone[only] != NULL ? cfg.alone[only] : cfg.prose_type;
}

/* keyword_density of [start, end): keyword occurrences over words, round(…, 4). */
static int keyword_density(const Reader *r, Py_ssize_t start, Py_ssize_t end, double *out)
{
    Py_ssize_t words = count_words(r, start, end);
    if (!words) {
        *out = 0.0;
        return 0;
    }
    Py_ssize_t found = count_keywords(r, start, end);
    return rounded((double)found / (double)words, 4, out);
}

/* lexical._Assembly._chunk: the Chunk of units first..last, appended to a->chunks. */
static int emit_chunk(Assembly *a, Py_ssize_t index, Py_ssize_t first, Py_ssize_t last, int *scratch)
{
    const Units *u = a->units;
    const BlockSpans *blocks = a->blocks;
    Py_ssize_t start = u->starts[first], end = u->ends[last];
    Py_ssize_t b_first = u->blocks[first], b_last = u->blocks[last], n_blocks = b_last - b_first + 1;
    /* scratch: the reasons, then the kinds (n_blocks each at most) */
    int *reasons = scratch, *kinds = scratch + n_blocks;
    Py_ssize_t n_reasons = 0, paragraphs = 0, total = 0;
    for (Py_ssize_t b = b_first; b <= b_last; b++) {
        const BlockSpan *block = &blocks->items[b];
        if (b > b_first)
            reasons[n_reasons++] = a->verdict[b] == BREAK ? R_MINIMUM : a->verdict[b];
        kinds[b - b_first] = block->kind;
        paragraphs += block->kind == B_PARAGRAPH;
        total += (block->end < end ? block->end : end) - (block->start > start ? block->start : start);
    }
    Py_ssize_t content = first;
    while (content <= last && u->headings[content])
        content++;
    if (read_headings(a, u->blocks[content <= last ? content : last]) < 0)
        return -1;
    double density, average;
    if (keyword_density(a->reader, start, end, &density) < 0)
        return -1;
    if (n_blocks == 1)
        average = (double)total;
    else if (rounded((double)total / (double)n_blocks, 1, &average) < 0)
        return -1;
    PyObject *names = distinct_labels(kinds, n_blocks, cfg.kind, N_KINDS);
    if (names == NULL)
        return -1;
    int has_list = PySequence_Contains(names, cfg.kind[B_ITEM]);
    PyObject *title = a->n_headings ? a->titles[a->n_headings - 1] : cfg.empty;
    long level = a->n_headings ? a->levels[a->n_headings - 1] : 0;
    PyObject *d = PyDict_Copy(cfg.template);
    PyObject *args[6] = {NULL};
    int rc = -1;
    if (d == NULL || has_list < 0 || put(d, M_INDEX, PyLong_FromSsize_t(index)) < 0 ||
        put(d, M_TYPE, new_ref(content_type(kinds, n_blocks))) < 0 || put(d, M_PATH, heading_path(a)) < 0 ||
        put(d, M_HEADING, new_ref(title)) < 0 || put(d, M_LEVEL, PyLong_FromLong(level)) < 0 ||
        put(d, M_PRIMARY, new_ref(cfg.reason[primary_reason(reasons, n_reasons)])) < 0 ||
        put(d, M_REASONS, distinct_labels(reasons, n_reasons, cfg.reason, N_REASONS)) < 0 ||
        put(d, M_KINDS, new_ref(names)) < 0 || put(d, M_PARAGRAPHS, PyLong_FromSsize_t(paragraphs)) < 0 ||
        put(d, M_HAS_LIST, PyBool_FromLong(has_list)) < 0 || put(d, M_DENSITY, PyFloat_FromDouble(density)) < 0 ||
        put(d, M_AVERAGE, PyFloat_FromDouble(average)) < 0 ||
        (PyUnicode_GET_LENGTH(a->doc_id) && put(d, M_DOC_ID, new_ref(a->doc_id)) < 0) ||
        (PyUnicode_GET_LENGTH(a->source) && put(d, M_SOURCE, new_ref(a->source)) < 0))
        goto done;
    if ((args[0] = PyUnicode_Substring(a->text, start, end)) == NULL || (args[1] = PyLong_FromSsize_t(start)) == NULL ||
        (args[2] = PyLong_FromSsize_t(end)) == NULL ||
        (args[3] = PyLong_FromLongLong(u->before_end[last] - u->before_start[first])) == NULL)
        goto done;
    args[4] = new_ref(cfg.strategy);
    args[5] = d;
    d = NULL;
    PyObject *chunk = PyObject_Vectorcall(cfg.chunk_type, args, 6, NULL);
    if (chunk == NULL)
        goto done;
    PyList_SET_ITEM(a->chunks, index, chunk);
    rc = 0;
done:
    Py_XDECREF(d);
    Py_DECREF(names);
    for (int k = 0; k < 6; k++)
        Py_XDECREF(args[k]);
    return rc;
}

#endif /* LEXICAL_ASSEMBLY_H */
