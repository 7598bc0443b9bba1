/* Part of _lexical_core.c (see there): the chunk being built (Builder) and the Chunk
 * objects with their metadata (lexical._Builder._emit). */
#ifndef LEXICAL_ASSEMBLY_H
#define LEXICAL_ASSEMBLY_H

#include "_lexical_config.h"
#include "_lexical_keywords.h"

typedef struct {
    int kind;
    Py_ssize_t start, end;
    int opening;             /* first matching prefix rule, NO_OPENING, or UNREAD */
    Py_ssize_t kw_at, kw_n;  /* its distinct keywords in Builder.pool; kw_n < 0: unread */
} Unit;

/* The previous chunk's metadata and the values it holds (borrowed from it). */
typedef struct {
    PyObject *meta, *type, *title, *primary;
    int level, has_list;
    Py_ssize_t paragraphs;
    double density, average;
} Last;

typedef struct {
    Reader reader;
    Last last;
    PyObject *text, *doc_id, *source;
    PyObject *chunks;
    /* the heading stack: levels and titles (owned references) */
    int *levels;
    PyObject **titles;
    Py_ssize_t n_headings, cap_headings;
    int section_level;
    PyObject *section_title; /* owned */
    /* the open chunk */
    Unit *units;
    Py_ssize_t n_units, cap_units;
    int *reasons;
    Py_ssize_t n_reasons, cap_reasons;
    /* a thematic break waiting for the block after it (only while no chunk is open) */
    Unit pending;
    int has_pending;
    HashSet keywords; /* of units[0:keyed] */
    Py_ssize_t keyed;
    /* every read unit's distinct keywords */
    uint64_t *pool;
    Py_ssize_t n_pool, cap_pool;
    HashSet scratch;
} Builder;

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

/* Sets d[key] = value and drops the reference to value; -1 when value is NULL or on error. */
static int put(PyObject *d, int key, PyObject *value)
{
    if (value == NULL)
        return -1;
    int rc = PyDict_SetItem(d, cfg.key[key], value);
    Py_DECREF(value);
    return rc;
}

static PyObject *heading_path(const Builder *b)
{
    PyObject *path = PyList_New(b->n_headings);
    if (path == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < b->n_headings; k++)
        PyList_SET_ITEM(path, k, new_ref(b->titles[k]));
    return path;
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

static int keyword_density(const Builder *b, Py_ssize_t start, Py_ssize_t end, double *out)
{
    Py_ssize_t words = count_words(&b->reader, start, end);
    if (!words) {
        *out = 0.0;
        return 0;
    }
    Py_ssize_t found = count_keywords(&b->reader, start, end);
    return rounded((double)found / (double)words, 4, out);
}

static int average_length(const Unit *units, Py_ssize_t n, double *out)
{
    if (n == 1) {
        *out = (double)(units[0].end - units[0].start);
        return 0;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t k = 0; k < n; k++)
        total += units[k].end - units[k].start;
    return rounded((double)total / (double)n, 1, out);
}

/* Whether a float equals the previous chunk's bit for bit: then the copied dict already
 * holds it and it is not set again. */
static int same_bits(double value, double last) { return memcmp(&value, &last, sizeof value) == 0; }

/* The chunk's metadata. Consecutive chunks share most values (content type, section,
 * primary reason, doc_id, source), so the dict is a copy of the previous chunk's with only
 * what differs set; the lists are always new (chunks never share a mutable value). */
static PyObject *metadata(Builder *b, const Unit *units, Py_ssize_t n, const int *reasons, Py_ssize_t n_reasons,
                          PyObject *content_type, int primary)
{
    Py_ssize_t start = units[0].start, end = units[n - 1].end;
    int kinds[N_KINDS];
    Py_ssize_t paragraphs = 0;
    int has_list = 0;
    int kind_seen[N_KINDS] = {0};
    Py_ssize_t n_kinds = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        int kind = units[k].kind;
        paragraphs += kind == K_PARAGRAPH;
        has_list |= kind == K_LIST;
        if (!kind_seen[kind]) {
            kind_seen[kind] = 1;
            kinds[n_kinds++] = kind;
        }
    }
    double density, average;
    if (keyword_density(b, start, end, &density) < 0 || average_length(units, n, &average) < 0)
        return NULL;
    PyObject *reason = cfg.reason[primary >= 0 ? primary : primary_reason(reasons, n_reasons)];
    Last *last = &b->last;
    int first = last->meta == NULL;
    PyObject *d = PyDict_Copy(first ? cfg.template : last->meta);
    if (d == NULL)
        return NULL;
    /* Each value is made inside the chain, so a failure earlier in it leaves none behind. */
    int same_density = !first && same_bits(density, last->density);
    int same_average = !first && same_bits(average, last->average);
    if (put(d, M_INDEX, PyLong_FromSsize_t(PyList_GET_SIZE(b->chunks))) < 0 ||
        (content_type != last->type && put(d, M_TYPE, new_ref(content_type)) < 0) ||
        put(d, M_PATH, heading_path(b)) < 0 ||
        (b->section_title != last->title && put(d, M_HEADING, new_ref(b->section_title)) < 0) ||
        ((first || b->section_level != last->level) && put(d, M_LEVEL, PyLong_FromLong(b->section_level)) < 0) ||
        (reason != last->primary && put(d, M_PRIMARY, new_ref(reason)) < 0) ||
        put(d, M_REASONS, distinct_labels(reasons, n_reasons, cfg.reason, N_REASONS)) < 0 ||
        put(d, M_KINDS, distinct_labels(kinds, n_kinds, cfg.kind, N_KINDS)) < 0 ||
        ((first || paragraphs != last->paragraphs) && put(d, M_PARAGRAPHS, PyLong_FromSsize_t(paragraphs)) < 0) ||
        ((first || has_list != last->has_list) && put(d, M_HAS_LIST, PyBool_FromLong(has_list)) < 0) ||
        (!same_density && put(d, M_DENSITY, PyFloat_FromDouble(density)) < 0) ||
        (!same_average && put(d, M_AVERAGE, PyFloat_FromDouble(average)) < 0) ||
        (first && PyUnicode_GET_LENGTH(b->doc_id) && put(d, M_DOC_ID, new_ref(b->doc_id)) < 0) ||
        (first && PyUnicode_GET_LENGTH(b->source) && put(d, M_SOURCE, new_ref(b->source)) < 0)) {
        Py_DECREF(d);
        return NULL;
    }
    /* The values are borrowed: the previous dict holds them as long as the result does. */
    last->meta = d;
    last->type = content_type;
    last->title = b->section_title;
    last->level = b->section_level;
    last->primary = reason;
    last->paragraphs = paragraphs;
    last->has_list = has_list;
    last->density = density;
    last->average = average;
    return d;
}

/* lexical._Builder._emit: one Chunk appended to the output. */
static int emit(Builder *b, const Unit *units, Py_ssize_t n, const int *reasons, Py_ssize_t n_reasons,
                PyObject *content_type, int primary)
{
    Py_ssize_t start = units[0].start, end = units[n - 1].end;
    PyObject *args[6] = {NULL};
    int rc = -1;
    args[5] = metadata(b, units, n, reasons, n_reasons, content_type, primary);
    if (args[5] == NULL)
        goto done;
    if ((args[0] = PyUnicode_Substring(b->text, start, end)) == NULL ||
        (args[1] = PyLong_FromSsize_t(start)) == NULL || (args[2] = PyLong_FromSsize_t(end)) == NULL ||
        (args[3] = PyLong_FromSsize_t(end - start)) == NULL)
        goto done;
    args[4] = new_ref(cfg.strategy);
    PyObject *chunk = PyObject_Vectorcall(cfg.chunk_type, args, 6, NULL);
    if (chunk == NULL)
        goto done;
    rc = PyList_Append(b->chunks, chunk);
    Py_DECREF(chunk);
done:
    for (int k = 0; k < 6; k++)
        Py_XDECREF(args[k]);
    return rc;
}

static void builder_free(Builder *b)
{
    for (Py_ssize_t k = 0; k < b->n_headings; k++)
        Py_DECREF(b->titles[k]);
    PyMem_Free(b->levels);
    PyMem_Free(b->titles);
    Py_XDECREF(b->section_title);
    PyMem_Free(b->units);
    PyMem_Free(b->reasons);
    set_free(&b->keywords);
    PyMem_Free(b->pool);
    set_free(&b->scratch);
    reader_free(&b->reader);
    Py_XDECREF(b->chunks);
}

#endif /* LEXICAL_ASSEMBLY_H */
