/* The `lexical` strategy's whole per-document pipeline in C: markdown blocks (or plain-text
 * paragraphs), the over-long block capping, the merge ladder, keyword sets and the Chunk
 * objects with their metadata.
 *
 * worker/chunking/rules/lexical.py is the reference: it defines the behaviour, and this module
 * must return exactly what it returns (tests/chunking/test_lexical_native.py compares them).
 * Every regex of the reference is ported as a small recogniser with the same matches; the
 * comments name the pattern each one replaces.
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
 *                         _adaptive_core.c)
 *   _lexical_config.h     labels (reasons, block kinds, metadata keys) and the configuration
 *   _lexical_text.h       the text view, character classes and class bitmaps
 *   _lexical_spans.h      growable arrays and stripped spans
 *   _lexical_segment.h    paragraphs, sentences and capping (port of segment.py)
 *   _lexical_lines.h      markdown lines and the per-line recognisers (markdown.py patterns)
 *   _lexical_markdown.h   markdown blocks and heading titles (port of markdown.py)
 *   _lexical_keywords.h   keyword hashes, hash sets and the queries over keyword runs
 *   _lexical_reading.h    the document pass: classes, words, keyword runs, scratch buffers
 *   _lexical_assembly.h   the chunk being built and the Chunk objects with their metadata
 *   _lexical_ladder.h     the merge ladder and the heading stack (lexical._Builder)
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
#include "_lexical_config.h"
#include "_lexical_text.h"
#include "_lexical_spans.h"
#include "_lexical_segment.h"
#include "_lexical_lines.h"
#include "_lexical_markdown.h"
#include "_lexical_keywords.h"
#include "_lexical_reading.h"
#include "_lexical_assembly.h"
#include "_lexical_ladder.h"
#include "_lexical_configure.h"

/* ---------------------------------------------------------------------------------------
 * The document
 * ------------------------------------------------------------------------------------- */

static PyObject *run_document(PyObject *text, PyObject *doc_id, PyObject *source, int markdown)
{
    Text t = {PyUnicode_KIND(text), PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), NULL, NULL, NULL, NULL, NULL};
    /* The classes padded with spaces to whole 64-character words, then the three bitmaps. */
    Py_ssize_t n_words = t.len / 64 + 1, size = n_words * (Py_ssize_t)(64 + 4 * sizeof(uint64_t));
    Builder b;
    memset(&b, 0, sizeof b);
    int lent = borrow_scratch(&b.reader);
    unsigned char *cls;
    if (lent) {
        if (grow((void **)&scratch.cls, &scratch.cap_cls, size, 1) < 0) {
            return_scratch(&b.reader);
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
    b.reader.t = &t;
    b.text = text;
    b.doc_id = doc_id;
    b.source = source;
    b.section_title = new_ref(cfg.empty);
    Blocks blocks = {0};
    Spans spans = {0};
    PyObject *result = NULL;
    int reading = read_document(&b.reader, cls, bitmaps);
    if (reading > 0) {
        result = new_ref(Py_None);
        goto done;
    }
    if (reading < 0 || (b.chunks = PyList_New(0)) == NULL || set_init(&b.keywords, 64) < 0 ||
        set_init(&b.scratch, 64) < 0)
        goto done;
    if (markdown) {
        if (split_blocks(&t, &blocks) < 0)
            goto done;
    }
    else {
        Spans paragraphs = {0};
        int rc = split_paragraphs(&t, &paragraphs);
        for (Py_ssize_t k = 0; rc == 0 && k < paragraphs.n; k++) {
            rc = grow((void **)&blocks.items, &blocks.cap, blocks.n + 1, sizeof(Block));
            if (rc == 0) {
                Block block = {K_PARAGRAPH, 0, paragraphs.items[k].start, paragraphs.items[k].end};
                blocks.items[blocks.n++] = block;
            }
        }
        PyMem_Free(paragraphs.items);
        if (rc < 0)
            goto done;
    }
    for (Py_ssize_t k = 0; k < blocks.n; k++)
        if (add_block(&b, &blocks.items[k], &spans) < 0)
            goto done;
    if (finish(&b) < 0)
        goto done;
    result = new_ref(b.chunks);
done:
    PyMem_Free(blocks.items);
    PyMem_Free(spans.items);
    if (lent)
        return_scratch(&b.reader);
    else
        PyMem_Free(cls);
    builder_free(&b);
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
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "chunk(text, doc_id, source, markdown) takes 4 arguments");
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
    int markdown = PyObject_IsTrue(args[3]);
    if (markdown < 0)
        return NULL;
    /* Every object made here stays referenced by the result: a collection during the call
     * would only walk them. Collections resume afterwards (if they were enabled). */
    int collecting = PyGC_Disable();
    PyObject *result = run_document(args[0], args[1], args[2], markdown);
    if (collecting)
        PyGC_Enable();
    return result;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Set the word lists, limits and labels (once, from worker.chunking.rules.lexical)."},
    {"chunk", (PyCFunction)(void (*)(void))chunk, METH_FASTCALL,
     "chunk(text, doc_id, source, markdown) -> list[Chunk] | None (None: use the reference)."},
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
    return PyModule_Create(&lexical_core);
}
