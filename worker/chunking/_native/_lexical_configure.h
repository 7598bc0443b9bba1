/* Part of _lexical_core.c (see there): configure(), which reads the word lists, limits and
 * labels from worker/chunking/rules/lexical.py once into cfg. */
#ifndef LEXICAL_CONFIGURE_H
#define LEXICAL_CONFIGURE_H

#include "_lexical_config.h"
#include "_lexical_keywords.h"

static void config_clear(void)
{
    Py_CLEAR(cfg.chunk_type);
    Py_CLEAR(cfg.strategy);
    Py_CLEAR(cfg.heading_type);
    Py_CLEAR(cfg.prose_type);
    Py_CLEAR(cfg.empty);
    Py_CLEAR(cfg.template);
    for (int k = 0; k < N_REASONS; k++)
        Py_CLEAR(cfg.reason[k]);
    for (int k = 0; k < N_KINDS; k++) {
        Py_CLEAR(cfg.kind[k]);
        Py_CLEAR(cfg.alone[k]);
    }
    for (int k = 0; k < N_KEYS; k++)
        Py_CLEAR(cfg.key[k]);
    for (int r = 0; r < N_OPENING; r++) {
        for (Py_ssize_t k = 0; k < cfg.n_phrases[r]; k++)
            PyMem_Free(cfg.phrases[r][k].chars);
        PyMem_Free(cfg.phrases[r]);
        cfg.phrases[r] = NULL;
        cfg.longest_phrase = 0;
        cfg.n_phrases[r] = 0;
    }
    for (int c = 0; c < 128; c++) {
        PyMem_Free(cfg.by_first[c]);
        cfg.by_first[c] = NULL;
        cfg.n_by_first[c] = 0;
    }
    PyMem_Free(cfg.stop);
    cfg.stop = NULL;
    abbreviations_clear(&cfg.abbreviations);
    cfg.ready = 0;
}

/* A str's characters as ASCII lower case (phrases); NULL when not ASCII. */
static char *ascii_lower_copy(PyObject *s, Py_ssize_t *len)
{
    if (!PyUnicode_Check(s) || !PyUnicode_IS_ASCII(s)) {
        PyErr_SetString(PyExc_ValueError, "phrases must be ASCII str");
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    const Py_UCS1 *src = PyUnicode_1BYTE_DATA(s);
    char *out = PyMem_Malloc((size_t)n + 1);
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n; k++)
        out[k] = (char)ascii_lower(src[k]);
    out[n] = '\0';
    *len = n;
    return out;
}

static int read_phrases(PyObject *openings)
{
    PyObject *seq = PySequence_Fast(openings, "openings must be a sequence");
    if (seq == NULL)
        return -1;
    int rc = -1;
    if (PySequence_Fast_GET_SIZE(seq) != N_OPENING) {
        PyErr_Format(PyExc_ValueError, "openings must hold %d phrase lists", N_OPENING);
        goto done;
    }
    for (int r = 0; r < N_OPENING; r++) {
        PyObject *list = PySequence_Fast(PySequence_Fast_GET_ITEM(seq, r), "phrases must be a sequence");
        if (list == NULL)
            goto done;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(list);
        cfg.phrases[r] = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Phrase));
        if (cfg.phrases[r] == NULL) {
            Py_DECREF(list);
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t k = 0; k < n; k++) {
            Phrase *ph = &cfg.phrases[r][k];
            ph->chars = ascii_lower_copy(PySequence_Fast_GET_ITEM(list, k), &ph->len);
            if (ph->chars == NULL) {
                Py_DECREF(list);
                goto done;
            }
            cfg.n_phrases[r] = k + 1;
            if (ph->len == 0 || ph->len > MAX_PHRASE) {
                Py_DECREF(list);
                PyErr_Format(PyExc_ValueError, "phrases must have 1 to %d characters", MAX_PHRASE);
                goto done;
            }
            if (ph->len > cfg.longest_phrase)
                cfg.longest_phrase = ph->len;
        }
        Py_DECREF(list);
    }
    rc = 0;
done:
    Py_DECREF(seq);
    return rc;
}

/* cfg.by_first from cfg.phrases (phrases are lower-case ASCII). */
static int index_phrases(void)
{
    for (int rule = 0; rule < N_OPENING; rule++)
        for (Py_ssize_t k = 0; k < cfg.n_phrases[rule]; k++) {
            const Phrase *ph = &cfg.phrases[rule][k];
            int c = (unsigned char)ph->chars[0];
            Candidate *grown = PyMem_Realloc(cfg.by_first[c], sizeof(Candidate) * (size_t)(cfg.n_by_first[c] + 1));
            if (grown == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            grown[cfg.n_by_first[c]].phrase = ph;
            grown[cfg.n_by_first[c]].rule = rule;
            cfg.by_first[c] = grown;
            cfg.n_by_first[c]++;
        }
    /* Longest phrase first, ties in rule order (a stable insertion sort): the longest phrase
     * an opening holds decides (lexical._OPENING), so "that is" is not read as "that". */
    for (int c = 0; c < 128; c++)
        for (int k = 1; k < cfg.n_by_first[c]; k++) {
            Candidate moving = cfg.by_first[c][k];
            int j = k;
            while (j > 0 && cfg.by_first[c][j - 1].phrase->len < moving.phrase->len) {
                cfg.by_first[c][j] = cfg.by_first[c][j - 1];
                j--;
            }
            cfg.by_first[c][j] = moving;
        }
    return 0;
}

static uint64_t word_hash(PyObject *word)
{
    Text t = {PyUnicode_KIND(word), PyUnicode_DATA(word), PyUnicode_GET_LENGTH(word), NULL, NULL, NULL, NULL, NULL};
    return run_hash(&t, 0, t.len);
}

/* Puts h in one of its two slots (stop_slot_a/b), moving a word that sits there to its
 * other slot, and so on (cuckoo hashing); 0 when the moves do not settle. */
static int stop_place(uint64_t *table, size_t mask, uint64_t h)
{
    size_t i = stop_slot_a(h, mask);
    for (int moves = 0; moves < 100; moves++) {
        uint64_t out = table[i];
        table[i] = h;
        if (out == 0 || out == h)
            return 1;
        h = out;
        i = i == stop_slot_a(h, mask) ? stop_slot_b(h, mask) : stop_slot_a(h, mask);
    }
    return 0;
}

static int read_stop_words(PyObject *words)
{
    PyObject *seq = PySequence_Fast(words, "stop_words must be iterable");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    uint64_t *hashes = PyMem_Malloc(sizeof(uint64_t) * (size_t)(n ? n : 1));
    if (hashes == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *word = PySequence_Fast_GET_ITEM(seq, k);
        if (!PyUnicode_Check(word)) {
            PyMem_Free(hashes);
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "stop words must be str");
            return -1;
        }
        hashes[k] = word_hash(word);
    }
    Py_DECREF(seq);
    /* A table at most a quarter full, doubled until every word has settled in a slot. */
    size_t capacity = 16;
    while (capacity < (size_t)n * 4)
        capacity *= 2;
    for (; capacity <= ((size_t)1 << 24); capacity *= 2) {
        cfg.stop = PyMem_Calloc(capacity, sizeof(uint64_t));
        if (cfg.stop == NULL)
            break;
        cfg.stop_mask = capacity - 1;
        Py_ssize_t k = 0;
        while (k < n && stop_place(cfg.stop, cfg.stop_mask, hashes[k]))
            k++;
        if (k == n) {
            PyMem_Free(hashes);
            return 0;
        }
        PyMem_Free(cfg.stop);
        cfg.stop = NULL;
    }
    PyMem_Free(hashes);
    PyErr_NoMemory();
    return -1;
}

/* Reasons by name order, for primary_reason's ties. */
static int rank_reasons(void)
{
    for (int r = 0; r < N_REASONS; r++) {
        cfg.rank[r] = 0;
        for (int o = 0; o < N_REASONS; o++) {
            int cmp = PyUnicode_Compare(cfg.reason[o], cfg.reason[r]);
            if (cmp == -1 && PyErr_Occurred())
                return -1;
            cfg.rank[r] += cmp < 0;
        }
    }
    return 0;
}

static int read_labels(PyObject *reasons, PyObject *kinds, PyObject *alone)
{
    PyObject *seq = PySequence_Fast(reasons, "reasons must be a sequence");
    if (seq == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(seq) != N_REASONS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "reasons must hold %d names", N_REASONS);
        return -1;
    }
    for (int r = 0; r < N_REASONS; r++) {
        PyObject *name = PySequence_Fast_GET_ITEM(seq, r);
        if (!PyUnicode_Check(name)) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "reasons must be str");
            return -1;
        }
        cfg.reason[r] = new_ref(name);
    }
    Py_DECREF(seq);
    seq = PySequence_Fast(kinds, "kinds must be a sequence");
    if (seq == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(seq) != N_KINDS || !PyDict_Check(alone)) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "kinds must hold %d names, alone_types must be a dict", N_KINDS);
        return -1;
    }
    for (int k = 0; k < N_KINDS; k++) {
        PyObject *name = PySequence_Fast_GET_ITEM(seq, k);
        if (!PyUnicode_Check(name)) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "kinds must be str");
            return -1;
        }
        cfg.kind[k] = new_ref(name);
        PyObject *type = PyDict_GetItemWithError(alone, name);
        if (type == NULL && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        Py_XINCREF(type);
        cfg.alone[k] = type;
    }
    Py_DECREF(seq);
    for (int k = 0; k < N_KEYS; k++)
        if ((cfg.key[k] = PyUnicode_InternFromString(KEY_NAMES[k])) == NULL)
            return -1;
    /* Copying a dict that has the keys is cheaper than inserting them one by one (the
     * table would be resized twice on the way). */
    if ((cfg.template = PyDict_New()) == NULL)
        return -1;
    for (int k = 0; k < M_DOC_ID; k++)
        if (PyDict_SetItem(cfg.template, cfg.key[k], Py_None) < 0)
            return -1;
    return rank_reasons();
}

static PyObject *configure(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {
        "chunk_type", "strategy", "reasons", "openings", "kinds", "alone_types", "heading_type", "prose_type",
        "stop_words", "abbreviations", "short_paragraph_chars", "keyword_min_letters", "keyword_overlap_min",
        "list_keyword_overlap_min", "lead_window", NULL,
    };
    PyObject *chunk_type, *strategy, *reasons, *openings, *kinds, *alone, *heading_type, *prose_type;
    PyObject *stop_words, *abbreviations;
    Py_ssize_t limits[5];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "$OUOOOOUUOOnnnnn", names, &chunk_type, &strategy, &reasons,
                                     &openings, &kinds, &alone, &heading_type, &prose_type, &stop_words,
                                     &abbreviations, &limits[0], &limits[1], &limits[2], &limits[3], &limits[4]))
        return NULL;
    for (int k = 0; k < 5; k++)
        if (limits[k] < 1) {
            PyErr_SetString(PyExc_ValueError, "limits must be positive");
            return NULL;
        }
    config_clear();
    cfg.chunk_type = new_ref(chunk_type);
    cfg.strategy = new_ref(strategy);
    cfg.heading_type = new_ref(heading_type);
    cfg.prose_type = new_ref(prose_type);
    cfg.short_chars = limits[0];
    cfg.min_letters = limits[1];
    cfg.overlap_min = limits[2];
    cfg.list_overlap_min = limits[3];
    cfg.lead_window = limits[4];
    if ((cfg.empty = PyUnicode_FromString("")) == NULL || read_labels(reasons, kinds, alone) < 0 ||
        read_phrases(openings) < 0 || index_phrases() < 0 || read_stop_words(stop_words) < 0 ||
        abbreviations_read(&cfg.abbreviations, abbreviations) < 0) {
        config_clear();
        return NULL;
    }
    cfg.ready = 1;
    Py_RETURN_NONE;
}

#endif /* LEXICAL_CONFIGURE_H */
