/* Part of _lexical_core.c (see there): the labels (merge reasons, metadata keys) and the
 * configuration that configure() fills once (_lexical_configure.h). */
#ifndef LEXICAL_CONFIG_H
#define LEXICAL_CONFIG_H

#include "_sentence_rules.h"

/* Merge reasons, in the order configure() receives their names (lexical.REASONS): the
 * transition break, the five prefix rules, the other ladder rules, then initial and the
 * reasons of the structure rules and the minimum. */
enum {
    R_TRANSITION,
    R_REFERENCE,
    R_ELABORATION,
    R_EXAMPLE,
    R_CAUSE,
    R_CONTRAST,
    R_QUESTION,
    R_DEFINITION,
    R_SHORT,
    R_LIST,
    R_KEYWORD,
    R_INITIAL,
    R_STRUCTURAL,
    R_HEADING,
    R_MINIMUM,
    N_REASONS
};
#define N_OPENING 6 /* the transition break and the five prefix rules */
#define NO_OPENING (-1)
#define BREAK (-1) /* a gap's verdict: no reason, a new chunk */

/* Block kinds: structure.PARAGRAPH ... HTML (_structure.h's B_*), named by configure(). */
#define N_KINDS 8

/* Metadata keys, in the order the reference inserts them. */
enum {
    M_INDEX, M_TYPE, M_PATH, M_HEADING, M_LEVEL, M_PRIMARY, M_REASONS, M_KINDS,
    M_PARAGRAPHS, M_HAS_LIST, M_DENSITY, M_AVERAGE, M_DOC_ID, M_SOURCE, N_KEYS
};
static const char *const KEY_NAMES[N_KEYS] = {
    "chunk_index", "content_type", "heading_path", "section_heading", "section_level",
    "primary_merge_reason", "merge_reasons", "block_types", "paragraph_count", "has_list",
    "keyword_density", "avg_block_length", "doc_id", "source",
};

typedef struct {
    char *chars; /* lower-case ASCII */
    Py_ssize_t len;
} Phrase;
#define MAX_PHRASE 63

typedef struct {
    const Phrase *phrase;
    int rule;
} Candidate;

typedef struct {
    int ready;
    PyObject *chunk_type;
    PyObject *strategy;
    PyObject *reason[N_REASONS];
    int rank[N_REASONS]; /* position of each reason name in sorted order (ties) */
    PyObject *kind[N_KINDS];
    PyObject *alone[N_KINDS]; /* content_type of a chunk of blocks of this kind alone, or NULL */
    PyObject *heading_type;
    PyObject *prose_type;
    PyObject *empty;
    PyObject *key[N_KEYS];
    PyObject *template; /* the metadata keys every chunk has, in order, values None */
    Py_ssize_t short_chars, min_letters, overlap_min, list_overlap_min, lead_window;
    Phrase *phrases[N_OPENING];
    Py_ssize_t n_phrases[N_OPENING];
    /* The phrases by first (lower-case ASCII) character, in rule order: an opening is only
     * compared with the phrases that start like it. */
    Candidate *by_first[128];
    int n_by_first[128];
    Py_ssize_t longest_phrase;
    uint64_t *stop; /* stop-word hashes, each in one of its two slots (cuckoo), 0 = empty */
    size_t stop_mask;
    Abbreviations abbreviations; /* segment.ABBREVIATIONS */
} Config;

static Config cfg;

static PyObject *new_ref(PyObject *o)
{
    Py_INCREF(o);
    return o;
}

#endif /* LEXICAL_CONFIG_H */
