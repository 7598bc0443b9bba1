/* The `lexical` strategy's whole per-document pipeline in C: the blocks and units every rule
 * strategy reads (shared with the sentence and adaptive cores), the merge ladder's verdicts
 * with their keyword counts, the content-defined packing, and the Chunk objects with their
 * metadata.
 *
 * worker/chunking/rules/lexical.py is the reference: it defines the behaviour, and this module
 * must return exactly what it returns (tests/chunking/test_lexical_native.py compares them).
 * Every regex of the reference is ported as a small recogniser with the same matches; the
 * comments name the pattern each one replaces. Sizes are characters, or a model's tokens
 * counted per piece (_units.h, with the memory of _piece_cache.h).
 *
 * The word lists and limits are not here: lexical.py passes them once to configure(), from
 * worker/chunking/text/lexicon.py. chunk() returns None for the rare documents whose characters
 * would need Python's full Unicode case mapping (see needs_reference_char); the caller then
 * runs the reference.
 *
 * The GIL is held throughout a call and no Python code runs inside it, so calls from several
 * threads (the worker chunks large documents in asyncio.to_thread) never interleave.
 *
 * Layout: one translation unit in parts. Each part is a header with one job, included once
 * below in dependency order (each also includes what it uses, behind include guards):
 *
 *   _sentence_rules.h     segment.false_stop_at and its character classes (shared with
 *                         the other cores)
 *   _structure.h          text/structure.py: lines, blocks, gap levels (shared)
 *   _piece_cache.h        the memory of token counts per piece (shared)
 *   _units.h, _packing.h  text/units.py, text/packing.py (shared)
 *   _lexical_config.h     labels (reasons, metadata keys) and the configuration
 *   _lexical_text.h       the text view, character classes and class bitmaps
 *   _lexical_spans.h      growable arrays
 *   _lexical_keywords.h   keyword hashes, hash sets and the queries over keyword runs
 *   _lexical_reading.h    the document pass: classes, words, keyword runs, scratch buffers
 *   _lexical_ladder.h     the ladder's verdicts (rules/lexical_ladder.py)
 *   _lexical_assembly.h   the Chunk objects with their metadata (lexical._Assembly)
 *   _lexical_configure.h  configure(): the word lists, limits and labels read once
 *   _lexical_core.c       this file: the document's run, chunk(), the module
 *
 * Why headers in one translation unit rather than several .c files linked together: every
 * function stays `static`, so the compiler still sees the whole module at once and inlines
 * the small helpers into the hot loops across parts (at/sp, next_bit, set_add, run_hash and
 * the sentence rules) exactly as it did when this was one file; the speed measured for the
 * core does not depend on link-time optimisation being available. Separate objects would
 * need exported `lexical_` names, a header of prototypes and -flto to generate the same
 * code. The parts are not meant to be compiled on their own.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_sentence_rules.h"
#include "_structure.h"
#include "_piece_cache.h"
#include "_units.h"
#include "_packing.h"
#include "_lexical_config.h"
#include "_lexical_text.h"
#include "_lexical_spans.h"
#include "_lexical_keywords.h"
#include "_lexical_reading.h"
#include "_lexical_ladder.h"
#include "_lexical_assembly.h"
#include "_lexical_configure.h"

/* ---------------------------------------------------------------------------------------
 * The document
 * ------------------------------------------------------------------------------------- */

/* lexical.anchors: a break between two blocks, or inside a block the gaps is_anchor picks. */
static void find_anchors(const Units *u, const int *verdict, char *anchors)
{
    for (Py_ssize_t k = 0; k < u->count; k++)
        anchors[k] = k > 0 && (u->blocks[k] != u->blocks[k - 1] ? verdict[u->blocks[k]] == BREAK
                                                                : is_anchor(u->levels[k], u->hashes[k]));
}

/* Whether every chunk's edges fall between words (lexical._at_word_edges). */
static int at_word_edges(const Text *t, const Units *u, const Positions *groups)
{
    for (Py_ssize_t k = 0; k < groups->count; k += 2) {
        Py_ssize_t start = u->starts[groups->items[k]], end = u->ends[groups->items[k + 1]];
        if ((start > 0 && !sp(t, start - 1)) || (end < t->len && !sp(t, end)))
            return 0;
    }
    return 1;
}

/* The chunks of the document read into r (lexical.chunk_reference after the document pass):
 * a list, None (the twin must chunk it), or NULL with an exception set. */
static PyObject *chunks_of(Reader *r, PyObject *text, PyObject *doc_id, PyObject *source, Py_ssize_t cap,
                           PyObject *memory, PyObject *count_pieces, PyObject *cut_word)
{
    const Text *t = r->t;
    SentenceText st = {t->kind, t->data, t->len};
    Measure m;
    memset(&m, 0, sizeof m);
    m.t = &st;
    m.tokens = memory != Py_None;
    if (measure_take_cutter(&m, text, cut_word) < 0)
        return NULL;
    Units units;
    memset(&units, 0, sizeof units);
    BlockSpans blocks = {0};
    Positions groups = {0};
    Ladder ladder;
    memset(&ladder, 0, sizeof ladder);
    Assembly assembly;
    memset(&assembly, 0, sizeof assembly);
    long long *before = NULL;
    int *verdict = NULL, *scratch = NULL;
    char *anchors = NULL;
    PyObject *chunks = NULL;
    Sizes sizes = sizes_for(cap);
    Reading how = {1, 0}; /* whole paragraphs, no clause cuts */
    if (m.tokens) {
        PieceCache *cache = PyCapsule_GetPointer(memory, CACHE_CAPSULE);
        if (cache == NULL || measure_count(&m, text, cache, count_pieces) < 0)
            goto done;
    }
    if (read_blocks(&st, &blocks) < 0)
        goto done;
    int read = read_units_of(&m, &sizes, &cfg.abbreviations, &how, &blocks, &units);
    if (read == HAND_BACK) {
        chunks = new_ref(Py_None);
        goto done;
    }
    Py_ssize_t n_blocks = blocks.count, n = units.count ? units.count : 1;
    before = PyMem_Malloc(sizeof(long long) * (size_t)(n_blocks ? n_blocks : 1));
    verdict = PyMem_Malloc(sizeof(int) * (size_t)(n_blocks ? n_blocks : 1));
    anchors = PyMem_Malloc((size_t)n);
    scratch = PyMem_Malloc(sizeof(int) * 2 * (size_t)(n_blocks ? n_blocks : 1));
    if (read < 0 || before == NULL || verdict == NULL || anchors == NULL || scratch == NULL) {
        if (read == 0)
            PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t b = 0; b < n_blocks; b++)
        before[b] = measure_before(&m, blocks.items[b].start);
    ladder = (Ladder){.t = t, .st = &st, .reader = r, .blocks = &blocks, .before = before, .cap = cap};
    if (verdicts(&ladder, verdict) < 0)
        goto done;
    find_anchors(&units, verdict, anchors);
    if (pack_with(&units, &sizes, anchors, 0, NULL, &groups) < 0)
        goto done;
    settle(&groups, &units, &sizes);
    if (r->whole_words && !at_word_edges(t, &units, &groups))
        r->whole_words = 0;
    Py_ssize_t n_chunks = groups.count / 2;
    assembly = (Assembly){.reader = r, .t = t, .text = text, .doc_id = doc_id, .source = source,
                          .blocks = &blocks, .units = &units, .verdict = verdict};
    if ((assembly.chunks = PyList_New(n_chunks)) == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < n_chunks; k++)
        if (emit_chunk(&assembly, k, groups.items[2 * k], groups.items[2 * k + 1], scratch) < 0)
            goto done;
    chunks = assembly.chunks;
    assembly.chunks = NULL;
done:
    Py_XDECREF(assembly.chunks);
    assembly_free(&assembly);
    ladder_free(&ladder);
    measure_free(&m);
    units_free(&units);
    PyMem_Free(blocks.items);
    PyMem_Free(groups.items);
    PyMem_Free(before);
    PyMem_Free(verdict);
    PyMem_Free(anchors);
    PyMem_Free(scratch);
    return chunks;
}

static PyObject *run_document(PyObject *text, PyObject *doc_id, PyObject *source, Py_ssize_t cap, PyObject *memory,
                              PyObject *count_pieces, PyObject *cut_word)
{
    Text t = {PyUnicode_KIND(text), PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), NULL, NULL, NULL, NULL, NULL};
    /* The classes padded with spaces to whole 64-character words, then the four bitmaps. */
    Py_ssize_t n_words = t.len / 64 + 1, size = n_words * (Py_ssize_t)(64 + 4 * sizeof(uint64_t));
    Reader reader;
    memset(&reader, 0, sizeof reader);
    int lent = borrow_scratch(&reader);
    unsigned char *cls;
    if (lent) {
        if (grow((void **)&scratch.cls, &scratch.cap_cls, size, 1) < 0) {
            return_scratch(&reader);
            return NULL;
        }
        cls = scratch.cls;
    }
    else if ((cls = PyMem_Malloc((size_t)size)) == NULL)
        return PyErr_NoMemory();
    memset(cls + t.len, C_SPACE, (size_t)(n_words * 64 - t.len));
    uint64_t *bitmaps = (uint64_t *)(cls + n_words * 64);
    t.cls = cls;
    t.space_bits = bitmaps;
    t.keyword_bits = bitmaps + n_words;
    t.break_bits = bitmaps + 2 * n_words;
    t.start_bits = bitmaps + 3 * n_words;
    reader.t = &t;
    PyObject *result = NULL;
    int reading = read_document(&reader, cls, bitmaps);
    if (reading > 0)
        result = new_ref(Py_None);
    else if (reading == 0)
        result = chunks_of(&reader, text, doc_id, source, cap, memory, count_pieces, cut_word);
    if (lent)
        return_scratch(&reader);
    else {
        PyMem_Free(cls);
        reader_free(&reader);
    }
    return result;
}

/* ---------------------------------------------------------------------------------------
 * The module: configure() once (_lexical_configure.h), then chunk() per document
 * ------------------------------------------------------------------------------------- */

static PyObject *chunk(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!cfg.ready) {
        PyErr_SetString(PyExc_RuntimeError, "_lexical_core.configure() has not been called");
        return NULL;
    }
    if (nargs != 6 && nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "chunk(text, doc_id, source, cap, memory, count_pieces[, cut_word]) takes 6 or 7 arguments");
        return NULL;
    }
    for (int k = 0; k < 3; k++) {
        if (!PyUnicode_Check(args[k])) {
            PyErr_SetString(PyExc_TypeError, "text, doc_id and source must be str");
            return NULL;
        }
        if (PyUnicode_READY(args[k]) < 0) /* only legacy strings made by old C APIs */
            return NULL;
    }
    Py_ssize_t cap = PyLong_AsSsize_t(args[3]);
    if (cap == -1 && PyErr_Occurred())
        return NULL;
    if (cap < 1) {
        PyErr_Format(PyExc_ValueError, "cap must be >= 1, got %zd", cap);
        return NULL;
    }
    if (args[4] != Py_None && !PyCallable_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "count_pieces must be callable");
        return NULL;
    }
    /* Every object made here stays referenced by the result: a collection during the call
     * would only walk them. Collections resume afterwards (if they were enabled). */
    int collecting = PyGC_Disable();
    PyObject *result = run_document(args[0], args[1], args[2], cap, args[4], args[5], nargs == 7 ? args[6] : Py_None);
    if (collecting)
        PyGC_Enable();
    return result;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Set the word lists, limits and labels (once, from worker.chunking.rules.lexical)."},
    {"chunk", (PyCFunction)(void (*)(void))chunk, METH_FASTCALL,
     "chunk(text, doc_id, source, cap, memory, count_pieces[, cut_word]) -> list[Chunk] | None: characters when "
     "memory is None, else tokens (a word over the cap cut by cut_word); None: use the reference."},
    PIECE_MEMORY_METHODS,
    {NULL, NULL, 0, NULL},
};

static void module_free(void *module)
{
    (void)module;
    config_clear();
    scratch_free();
}

static struct PyModuleDef lexical_core = {
    PyModuleDef_HEAD_INIT, "worker.chunking._native._lexical_core",
    "The lexical strategy's per-document pipeline in C (reference: worker/chunking/rules/lexical.py).",
    -1, methods, NULL, NULL, NULL, module_free,
};

PyMODINIT_FUNC PyInit__lexical_core(void)
{
    memset(bmp_cls, UNKNOWN_CLASS, sizeof bmp_cls);
    for (Py_UCS4 c = 0; c < 256; c++) {
        bmp_cls[c] = classify(c);
        latin1_lower[c] = lower_char(c);
    }
    fill_piece_classes();
    return PyModule_Create(&lexical_core);
}
