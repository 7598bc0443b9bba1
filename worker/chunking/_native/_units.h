/* worker/chunking/text/units.py and packing.py in C: units with their sizes, and the
 * content-defined packing. units.py and packing.py are the reference; each function here is
 * named after the one it restates. Include after _sentence_rules.h and _structure.h.
 *
 * Token sizes: the pieces of units.Measure are found here; their counts come from the core's
 * memory (_piece_cache.h) or, for the pieces it does not hold yet, from the Python
 * PieceCounter's count_pieces in one call. A word over the cap needs exact counts of its
 * prefixes, which only the tokenizer gives, and the grapheme cluster rules, which need Python's
 * Unicode database: the core cuts it with word_cuts.cut_word (the twin's own function, handed
 * in as `cut_word`) and, in tokens, refines the measure with the pieces; without `cut_word` it
 * returns None and the twin chunks the document.
 */
#ifndef CHUNKSTREAM_UNITS_H
#define CHUNKSTREAM_UNITS_H

#include <stdint.h>

/* units.MARKS: terminators.ALL + LATIN_CLOSERS + CJK_CLOSERS. */
static inline int is_mark_slow(Py_UCS4 c) {
    return is_latin_stop(c) || is_cjk_stop(c) || is_arabic_stop(c) || is_latin_closer(c) || is_cjk_closer(c);
}

/* tokens.NOT_SEPARATORS: whitespace the BERT normalizer drops as a control character. */
static inline int is_quiet(Py_UCS4 c) {
    return c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1f) || c == 0x85;
}

/* The classes of the code points below 128, by table: the piece scan reads every character. */
enum { P_SPACE = 1, P_MARK = 2, P_QUIET = 4 };
static uint8_t piece_class[128];

static void fill_piece_classes(void) {
    for (Py_UCS4 c = 0; c < 128; c++)
        piece_class[c] = (uint8_t)((is_space(c) ? P_SPACE : 0) | (is_mark_slow(c) ? P_MARK : 0) |
                                   (is_quiet(c) ? P_QUIET : 0));
}

static inline int is_mark(Py_UCS4 c) { return c < 128 ? piece_class[c] & P_MARK : is_mark_slow(c); }

static inline int is_solid(Py_UCS4 c) {
    return c < 128 ? !(piece_class[c] & (P_SPACE | P_MARK)) : !is_space(c) && !is_mark_slow(c);
}

static inline int is_joining(Py_UCS4 c) { return c < 128 ? piece_class[c] & P_QUIET : is_quiet(c); }

/* The next piece (units._PIECE) at or after *p below end: 1 and [*start, *end) when found. */
static int next_piece(const SentenceText *t, Py_ssize_t *p, Py_ssize_t end, Py_ssize_t *piece_start,
                      Py_ssize_t *piece_end) {
    Py_ssize_t i = *p;
    while (i < end) {
        Py_UCS4 c = sentence_read(t, i);
        if (is_mark(c)) {
            *piece_start = i;
            *p = *piece_end = i + 1;
            return 1;
        }
        if (is_solid(c)) {
            Py_ssize_t last = i, j = i + 1;
            while (j < end) {
                Py_UCS4 d = sentence_read(t, j);
                if (is_solid(d)) last = j;
                else if (!is_joining(d)) break;
                j++;
            }
            Py_ssize_t stop = last + 1;
            if (stop < end && is_mark(sentence_read(t, stop))) stop++;
            *piece_start = i;
            *p = *piece_end = stop;
            return 1;
        }
        i++;
    }
    *p = end;
    return 0;
}

typedef ARRAY(Py_ssize_t) Positions;
typedef ARRAY(long long) Counts;

/* units.Measure: characters (tokens == 0) or tokens summed over pieces. */
typedef struct {
    const SentenceText *t;
    int tokens;
    Positions ends;    /* piece ends, in order */
    Counts cumulative; /* tokens before each piece, and the total after the last */
    PyObject *text;     /* borrowed: the document, for cut_word */
    PyObject *cut_word; /* borrowed, or NULL: word_cuts.cut_word in the measure's unit */
} Measure;

static void measure_free(Measure *m) {
    PyMem_Free(m->ends.items);
    PyMem_Free(m->cumulative.items);
}

/* The pieces' counts: from the core's memory (_piece_cache.h) or its WordPiece path
 * (_wordpiece.h), the others through the PieceCounter's count_pieces(list) -> list[int] in one
 * call. 0, or -1 with an exception set. */
static int measure_count(Measure *m, PyObject *text, PieceCache *cache, PyObject *count_pieces) {
    const SentenceText *t = m->t;
    Positions starts = {0}, unknown = {0};
    PyObject *missing = PyList_New(0), *counted = NULL;
    int result = -1;
    Py_ssize_t p = 0, a, b;
    if (missing == NULL) goto done;
    while (next_piece(t, &p, t->size, &a, &b))
        if (ARRAY_PUSH(starts, a) < 0 || ARRAY_PUSH(m->ends, b) < 0) goto done;
    Py_ssize_t n = starts.count;
    if (array_reserve((void **)&m->cumulative.items, &m->cumulative.capacity, n + 1, sizeof(long long)) < 0)
        goto done;
    long long *counts = m->cumulative.items + 1; /* each piece's own count first, summed below */
    for (Py_ssize_t k = 0; k < n; k++) {
        a = starts.items[k];
        b = m->ends.items[k];
        uint64_t hash = piece_hash(t, a, b);
        int64_t count = cache_lookup(cache, hash, t, a, b);
        if (count < 0 && cache->wordpiece != NULL) {
            count = wordpiece_count(cache->wordpiece, t, a, b);
            if (count == -2 || (count >= 0 && cache_insert(cache, hash, t, a, b, count) < 0)) goto done;
        }
        if (count >= 0) {
            counts[k] = count;
            continue;
        }
        PyObject *piece = PyUnicode_Substring(text, a, b);
        if (piece == NULL) goto done;
        int failed = PyList_Append(missing, piece) < 0 || ARRAY_PUSH(unknown, k) < 0;
        Py_DECREF(piece);
        if (failed) goto done;
    }
    if (unknown.count > 0) {
        counted = PyObject_CallOneArg(count_pieces, missing);
        if (counted == NULL) goto done;
        if (!PyList_Check(counted) || PyList_GET_SIZE(counted) != unknown.count) {
            PyErr_SetString(PyExc_TypeError, "count_pieces must return one count per piece");
            goto done;
        }
        for (Py_ssize_t k = 0; k < unknown.count; k++) {
            long long value = PyLong_AsLongLong(PyList_GET_ITEM(counted, k));
            if (value == -1 && PyErr_Occurred()) goto done;
            if (value < 0) {
                PyErr_SetString(PyExc_ValueError, "count_pieces returned a negative count");
                goto done;
            }
            Py_ssize_t piece = unknown.items[k];
            a = starts.items[piece];
            b = m->ends.items[piece];
            counts[piece] = value;
            if (cache_insert(cache, piece_hash(t, a, b), t, a, b, value) < 0) goto done;
        }
    }
    long long total = 0;
    m->cumulative.items[0] = 0;
    for (Py_ssize_t k = 1; k <= n; k++) {
        total += m->cumulative.items[k];
        m->cumulative.items[k] = total;
    }
    m->cumulative.count = n + 1;
    result = 0;
done:
    PyMem_Free(starts.items);
    PyMem_Free(unknown.items);
    Py_XDECREF(missing);
    Py_XDECREF(counted);
    return result;
}

/* Measure.before: pieces that end by `position` (binary search). */
static long long measure_before(const Measure *m, Py_ssize_t position) {
    if (!m->tokens) return position;
    Py_ssize_t low = 0, high = m->ends.count;
    while (low < high) {
        Py_ssize_t middle = (low + high) / 2;
        if (m->ends.items[middle] <= position) low = middle + 1;
        else high = middle;
    }
    return m->cumulative.items[low];
}

static long long measure_size(const Measure *m, Py_ssize_t start, Py_ssize_t end) {
    return measure_before(m, end) - measure_before(m, start);
}

/* The measure's way to cut a word over the cap (word_cuts.cut_word), or none (None): the core
 * then hands such a document back to the twin. 0, or -1 with an exception set. */
static int measure_take_cutter(Measure *m, PyObject *text, PyObject *cut_word) {
    if (cut_word != Py_None && !PyCallable_Check(cut_word)) {
        PyErr_SetString(PyExc_TypeError, "cut_word must be callable or None");
        return -1;
    }
    m->text = text;
    m->cut_word = cut_word == Py_None ? NULL : cut_word;
    return 0;
}

/* Measure.refine: the one piece that holds `start` replaced by `n` pieces ending at `ends`
 * with `counts` tokens each. 0, or -1 with an exception set. */
static int measure_refine(Measure *m, Py_ssize_t start, Py_ssize_t n, const Py_ssize_t *ends,
                          const long long *counts) {
    Py_ssize_t pieces = m->ends.count, first = 0, high = pieces;
    while (first < high) { /* the lowest piece ending after start */
        Py_ssize_t middle = (first + high) / 2;
        if (m->ends.items[middle] <= start) first = middle + 1;
        else high = middle;
    }
    if (first == pieces) {
        PyErr_SetString(PyExc_ValueError, "refine: no piece holds the start");
        return -1;
    }
    Py_ssize_t total = pieces - 1 + n;
    Py_ssize_t *new_ends = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(total ? total : 1));
    long long *new_cumulative = PyMem_Malloc(sizeof(long long) * (size_t)(total + 1));
    if (new_ends == NULL || new_cumulative == NULL) {
        PyMem_Free(new_ends);
        PyMem_Free(new_cumulative);
        PyErr_NoMemory();
        return -1;
    }
    const long long *old = m->cumulative.items;
    memcpy(new_ends, m->ends.items, sizeof(Py_ssize_t) * (size_t)first);
    memcpy(new_cumulative, old, sizeof(long long) * (size_t)(first + 1));
    for (Py_ssize_t k = 0; k < n; k++) {
        new_ends[first + k] = ends[k];
        new_cumulative[first + k + 1] = new_cumulative[first + k] + counts[k];
    }
    for (Py_ssize_t k = first + 1; k < pieces; k++) {
        Py_ssize_t at = k - 1 + n; /* the piece's new index */
        new_ends[at] = m->ends.items[k];
        new_cumulative[at + 1] = new_cumulative[at] + (old[k + 1] - old[k]);
    }
    PyMem_Free(m->ends.items);
    PyMem_Free(m->cumulative.items);
    m->ends.items = new_ends;
    m->ends.count = m->ends.capacity = total;
    m->cumulative.items = new_cumulative;
    m->cumulative.count = m->cumulative.capacity = total + 1;
    return 0;
}

/* Measure.separates */
static int measure_separates(const Measure *m, Py_ssize_t start, Py_ssize_t end) {
    if (!m->tokens) return 1;
    if (start > 0 && is_mark(sentence_read(m->t, start - 1))) return 1;
    for (Py_ssize_t p = start; p < end; p++) {
        Py_UCS4 c = sentence_read(m->t, p);
        if (is_space(c) && !is_quiet(c)) return 1;
    }
    return 0;
}

typedef struct {
    Py_ssize_t start, end;
    int level, block, heading;
    Py_ssize_t index; /* the block it is (part of), in read_blocks' order */
} RawUnit;

typedef ARRAY(RawUnit) RawUnits;

static int push_stripped_unit(const SentenceText *t, RawUnits *out, Py_ssize_t start, Py_ssize_t end, int level,
                              int block, Py_ssize_t index) {
    while (start < end && is_space(sentence_read(t, start))) start++;
    while (end > start && is_space(sentence_read(t, end - 1))) end--;
    if (start == end) return 0;
    RawUnit unit = {start, end, level, block, 0, index};
    return ARRAY_PUSH(*out, unit);
}

/* The first characters of segment.CANDIDATE's alternatives, below 256 by table (its leading
 * look-ahead: the scan skips ordinary text in a tight loop). */
static const uint8_t candidate_first[256] = {['\n'] = 1, ['\r'] = 1, ['.'] = 1, ['!'] = 1, ['?'] = 1};

static inline int is_candidate_first(Py_UCS4 c) {
    if (c < 256) return candidate_first[c];
    return c == 0x2026 || c == 0x2028 || c == 0x2029 || is_cjk_stop(c) || is_arabic_stop(c);
}

#define DEFINE_NEXT_CANDIDATE(NAME, CHAR_T)                                                  \
    static Py_ssize_t NAME(const CHAR_T *s, Py_ssize_t i, Py_ssize_t n) {                 \
        while (i < n && !is_candidate_first(s[i])) i++;                                     \
        return i;                                                                           \
    }
DEFINE_NEXT_CANDIDATE(next_candidate_ucs2, Py_UCS2)
DEFINE_NEXT_CANDIDATE(next_candidate_ucs4, Py_UCS4)

static Py_ssize_t next_candidate_ucs1(const Py_UCS1 *s, Py_ssize_t i, Py_ssize_t n) {
    while (i + 4 <= n && !(candidate_first[s[i]] | candidate_first[s[i + 1]] | candidate_first[s[i + 2]] |
                           candidate_first[s[i + 3]]))
        i += 4;
    while (i < n && !candidate_first[s[i]]) i++;
    return i;
}

/* The next position at or after i below n holding a candidate's first character, or n. */
static Py_ssize_t next_candidate(const SentenceText *t, Py_ssize_t i, Py_ssize_t n) {
    if (t->kind == PyUnicode_1BYTE_KIND) return next_candidate_ucs1(t->data, i, n);
    if (t->kind == PyUnicode_2BYTE_KIND) return next_candidate_ucs2(t->data, i, n);
    return next_candidate_ucs4(t->data, i, n);
}

/* units.paragraph_sentences: the candidates of segment.CANDIDATE below `end`, line breaks
 * skipped, the exceptions of false_stop_at; the first sentence at `level`, the others at
 * SENTENCE. */
static int paragraph_sentences(const SentenceText *t, Py_ssize_t start, Py_ssize_t end, int level,
                               const Abbreviations *abbreviations, Py_ssize_t index, RawUnits *out) {
    Py_ssize_t begin = start, i = next_candidate(t, start, end);
    int first = 1;
    while (i < end) {
        Py_UCS4 c = sentence_read(t, i);
        Py_ssize_t match_end;
        if (is_line_break(c)) {
            i = next_candidate(t, i + 1, end);
            continue;
        } else if (is_cjk_stop(c)) {
            Py_ssize_t j = i;
            while (j < end && is_cjk_stop(sentence_read(t, j))) j++;
            while (j < end && is_cjk_closer(sentence_read(t, j))) j++;
            match_end = j;
        } else if (is_arabic_stop(c)) {
            Py_ssize_t j = i;
            while (j < end && is_arabic_stop(sentence_read(t, j))) j++;
            match_end = j;
        } else if (is_latin_stop(c)) {
            Py_ssize_t j = i;
            while (j < end && is_latin_stop(sentence_read(t, j))) j++;
            Py_ssize_t mark_end = j;
            while (j < end && is_latin_closer(sentence_read(t, j))) j++;
            if ((j < end && !is_space(sentence_read(t, j))) || false_stop_at(t, 0, i, mark_end, j, begin, abbreviations)) {
                i = next_candidate(t, j < end && !is_space(sentence_read(t, j)) ? mark_end : j, end);
                continue;
            }
            match_end = j;
        } else {
            i = next_candidate(t, i + 1, end);
            continue;
        }
        Py_ssize_t before = out->count;
        if (push_stripped_unit(t, out, begin, match_end, first ? level : L_SENTENCE, 0, index) < 0) return -1;
        if (out->count > before) first = 0;
        begin = match_end;
        i = next_candidate(t, match_end, end);
    }
    return push_stripped_unit(t, out, begin, end, first ? level : L_SENTENCE, 0, index);
}

/* count_texts(memory, texts, count_pieces) -> list[int]: each text's tokens as the sum of its
 * pieces' counts, the pieces being str.split()'s (runs between Py_UNICODE_ISSPACE characters).
 * For the embedding strategies' sizing (semantic/sizing.TokenizerUnit.count_many), over texts
 * whose counts add up at whitespace: the memory answers, its WordPiece path counts what it
 * misses, and the rest goes to count_pieces in one call, as in units.h's measure_count. */
static PyObject *count_texts(PyObject *self, PyObject *args) {
    PyObject *memory, *texts, *count_pieces;
    if (!PyArg_ParseTuple(args, "OO!O", &memory, &PyList_Type, &texts, &count_pieces)) return NULL;
    PieceCache *c = PyCapsule_GetPointer(memory, CACHE_CAPSULE);
    if (c == NULL) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(texts);
    long long *totals = PyMem_Calloc((size_t)(n ? n : 1), sizeof(long long));
    Positions owners = {0};
    PyObject *missing = PyList_New(0), *counted = NULL, *out = NULL;
    if (totals == NULL || missing == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *text = PyList_GET_ITEM(texts, k);
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "texts must be str");
            goto done;
        }
        SentenceText t = {PyUnicode_KIND(text), PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text)};
        Py_ssize_t p = 0;
        for (;;) {
            while (p < t.size && Py_UNICODE_ISSPACE(sentence_read(&t, p))) p++;
            if (p >= t.size) break;
            Py_ssize_t a = p;
            while (p < t.size && !Py_UNICODE_ISSPACE(sentence_read(&t, p))) p++;
            uint64_t hash = piece_hash(&t, a, p);
            int64_t count = cache_lookup(c, hash, &t, a, p);
            if (count < 0 && c->wordpiece != NULL) {
                count = wordpiece_count(c->wordpiece, &t, a, p);
                if (count == -2 || (count >= 0 && cache_insert(c, hash, &t, a, p, count) < 0)) goto done;
            }
            if (count >= 0) {
                totals[k] += count;
                continue;
            }
            PyObject *piece = PyUnicode_Substring(text, a, p);
            if (piece == NULL) goto done;
            int failed = PyList_Append(missing, piece) < 0 || ARRAY_PUSH(owners, k) < 0;
            Py_DECREF(piece);
            if (failed) goto done;
        }
    }
    if (owners.count > 0) {
        /* May let another thread in: nothing of the memory is held across it. */
        counted = PyObject_CallOneArg(count_pieces, missing);
        if (counted == NULL) goto done;
        if (!PyList_Check(counted) || PyList_GET_SIZE(counted) != owners.count) {
            PyErr_SetString(PyExc_TypeError, "count_pieces must return one count per piece");
            goto done;
        }
        for (Py_ssize_t j = 0; j < owners.count; j++) {
            long long value = PyLong_AsLongLong(PyList_GET_ITEM(counted, j));
            if (value == -1 && PyErr_Occurred()) goto done;
            if (value < 0) {
                PyErr_SetString(PyExc_ValueError, "count_pieces returned a negative count");
                goto done;
            }
            totals[owners.items[j]] += value;
            PyObject *piece = PyList_GET_ITEM(missing, j);
            SentenceText t = {PyUnicode_KIND(piece), PyUnicode_DATA(piece), PyUnicode_GET_LENGTH(piece)};
            if (cache_insert(c, piece_hash(&t, 0, t.size), &t, 0, t.size, value) < 0) goto done;
        }
    }
    out = PyList_New(n);
    if (out == NULL) goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *total = PyLong_FromLongLong(totals[k]);
        if (total == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, k, total);
    }
done:
    PyMem_Free(totals);
    PyMem_Free(owners.items);
    Py_XDECREF(missing);
    Py_XDECREF(counted);
    return out;
}

/* The piece memory's functions, in every core's method table (a memory made by one core is
 * read by any of them). */
#define PIECE_MEMORY_METHODS                                                                          \
    {"new_cache", new_cache, METH_O,                                                                  \
     "new_cache(wordpiece) -> a memory of token counts per piece, for one tokenizer (wordpiece: "    \
     "AsciiWordPiece.tables() or None)"},                                                             \
    {"count_texts", count_texts, METH_VARARGS,                                                       \
     "count_texts(memory, texts, count_pieces) -> list[int]: sums of the counts of str.split()'s "   \
     "pieces"},                                                                                       \
    {"wordpiece_counts", wordpiece_counts, METH_VARARGS,                                             \
     "wordpiece_counts(memory, pieces) -> list[int | None]: the memory's WordPiece path (for tests)"}

#endif /* CHUNKSTREAM_UNITS_H */
