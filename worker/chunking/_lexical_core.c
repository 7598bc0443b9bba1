/* The `lexical` strategy's whole per-document pipeline in C: markdown blocks (or plain-text
 * paragraphs), the over-long block capping, the merge ladder, keyword sets and the Chunk
 * objects with their metadata.
 *
 * worker/chunking/lexical.py is the reference: it defines the behaviour, and this module
 * must return exactly what it returns (tests/chunking/test_lexical_native.py compares them).
 * Every regex of the reference is ported as a small recogniser with the same matches; the
 * comments name the pattern each one replaces.
 *
 * The word lists and limits are not here: lexical.py passes them once to configure(), from
 * worker/chunking/lexicon.py. chunk() returns None for the rare documents whose characters
 * would need Python's full Unicode case mapping (see needs_reference); the caller then runs
 * the reference.
 *
 * The GIL is held throughout; there are no threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Labels and configuration
 * ------------------------------------------------------------------------------------- */

/* Merge reasons, in the order configure() receives their names: the transition break, the
 * five prefix rules, then the other ladder rules, then the two single-block reasons. */
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
    N_REASONS
};
#define N_OPENING 6 /* the transition break and the five prefix rules */
#define NO_OPENING (-1)
#define UNREAD (-2)

/* Markdown block kinds (worker/chunking/markdown.py BlockKind). */
enum { K_HEADING, K_PARAGRAPH, K_LIST, K_CODE, K_TABLE, K_QUOTE, K_THEMATIC, K_FRONT, K_HTML, N_KINDS };
static const char *const KIND_NAMES[N_KINDS] = {
    "heading", "paragraph", "list", "code", "table",
    "blockquote", "thematic_break", "front_matter", "html",
};

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
    PyObject *standalone[N_KINDS]; /* content_type of a standalone kind, or NULL */
    PyObject *heading_type;
    PyObject *prose_type;
    PyObject *empty;
    PyObject *key[N_KEYS];
    PyObject *template; /* the metadata keys every chunk has, in order, values None */
    Py_ssize_t max_chars, short_chars, lead_in_chars, min_letters, overlap_min;
    Py_ssize_t list_overlap_min, lead_window;
    Phrase *phrases[N_OPENING];
    Py_ssize_t n_phrases[N_OPENING];
    /* The phrases by first (lower-case ASCII) character, in rule order: an opening is only
     * compared with the phrases that start like it. */
    Candidate *by_first[128];
    int n_by_first[128];
    Py_ssize_t longest_phrase;
    uint64_t *stop; /* open-addressing table of stop-word hashes, 0 = empty */
    size_t stop_mask;
    char (*abbrev)[16];
    Py_ssize_t n_abbrev;
} Config;

static Config cfg;

/* ---------------------------------------------------------------------------------------
 * Characters
 * ------------------------------------------------------------------------------------- */

/* Each character's classes, read once per document (see survey) so that the hot loops
 * test one byte instead of decoding a code point and asking the Unicode database. */
enum { C_SPACE = 1, C_KEYWORD = 2, C_BREAK = 4, C_REFERENCE = 8, C_STOP = 16, C_WIDE_KEYWORD = 32 };

typedef struct {
    int kind;
    const void *data;
    Py_ssize_t len;
    const unsigned char *cls;
    /* The same classes as bitmaps (bit p % 64 of word p / 64), for the scans that jump
     * from one class change to the next: spaces (set past the end), keyword characters
     * and line breaks. */
    const uint64_t *space_bits, *keyword_bits, *break_bits;
    const uint64_t *start_bits; /* where each whitespace-separated word starts */
} Text;

static inline Py_UCS4 at(const Text *t, Py_ssize_t i) { return PyUnicode_READ(t->kind, t->data, i); }

/* str.isspace / regex \s */
static inline int is_space(Py_UCS4 c) { return Py_UNICODE_ISSPACE(c); }

static inline int sp(const Text *t, Py_ssize_t i) { return t->cls[i] & C_SPACE; }

static inline int kwc(const Text *t, Py_ssize_t i) { return t->cls[i] & C_KEYWORD; }

/* The first set bit at or after from, or limit when there is none before limit. */
static Py_ssize_t next_bit(const uint64_t *bits, Py_ssize_t from, Py_ssize_t limit)
{
    if (from >= limit)
        return limit;
    Py_ssize_t w = from >> 6;
    uint64_t word = bits[w] & (~(uint64_t)0 << (from & 63));
    while (!word) {
        if ((++w << 6) >= limit)
            return limit;
        word = bits[w];
    }
    Py_ssize_t p = (w << 6) + __builtin_ctzll(word);
    return p < limit ? p : limit;
}

/* Whether every bit of [s, e) is set. */
static int all_bits(const uint64_t *bits, Py_ssize_t s, Py_ssize_t e)
{
    while (s < e) {
        Py_ssize_t w = s >> 6, stop = ((w + 1) << 6) < e ? (w + 1) << 6 : e;
        uint64_t want = (stop - s == 64) ? ~(uint64_t)0 : (((uint64_t)1 << (stop - s)) - 1) << (s & 63);
        if ((bits[w] & want) != want)
            return 0;
        s = stop;
    }
    return 1;
}

static inline int is_blank_char(Py_UCS4 c) { return c == ' ' || c == '\t'; }

static inline int is_ascii_letter(Py_UCS4 c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }

static inline int is_ascii_alnum(Py_UCS4 c) { return is_ascii_letter(c) || (c >= '0' && c <= '9'); }

/* A character of a keyword run: the regex [^\W\d_] (sre: alnum, not decimal, not '_'). */
static inline int is_keyword_char(Py_UCS4 c)
{
    if (c < 128)
        return is_ascii_letter(c);
    return Py_UNICODE_ISALNUM(c) && !Py_UNICODE_ISDECIMAL(c);
}

/* str.lower() of one character, valid for every document needs_reference lets through. */
static inline Py_UCS4 lower_char(Py_UCS4 c)
{
    if (c < 128)
        return is_ascii_letter(c) ? (c | 0x20) : c;
    return Py_UNICODE_TOLOWER(c);
}

static inline Py_UCS4 ascii_lower(Py_UCS4 c) { return (c >= 'A' && c <= 'Z') ? (c | 0x20) : c; }

/* Characters after which the reference no longer agrees with a per-character reading:
 * U+0130 lowers to two characters, U+212A lowers to ASCII 'k', U+03A3 lowers by context
 * (final sigma), and U+0131/U+017F (with the two above) match ASCII letters under the
 * reference's case-insensitive <script|pre|style|textarea> pattern. */
static int needs_reference_char(Py_UCS4 c)
{
    if (c == 0x130 || c == 0x131 || c == 0x17F || c == 0x212A || c == 0x3A3)
        return 1;
    Py_UCS4 low = Py_UNICODE_TOLOWER(c);
    return low != c && (low < 128 || is_keyword_char(low) != is_keyword_char(c));
}

/* ---------------------------------------------------------------------------------------
 * Growable arrays
 * ------------------------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t start, end;
} Span;

typedef struct {
    Span *items;
    Py_ssize_t n, cap;
} Spans;

static int grow(void **items, Py_ssize_t *cap, Py_ssize_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t cap2 = *cap ? *cap : 16;
    while (cap2 < need)
        cap2 *= 2;
    void *bigger = PyMem_Realloc(*items, (size_t)cap2 * size);
    if (bigger == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *items = bigger;
    *cap = cap2;
    return 0;
}

static int spans_push(Spans *s, Py_ssize_t start, Py_ssize_t end)
{
    if (grow((void **)&s->items, &s->cap, s->n + 1, sizeof(Span)) < 0)
        return -1;
    s->items[s->n].start = start;
    s->items[s->n].end = end;
    s->n++;
    return 0;
}

/* The span [start, end) without surrounding whitespace; 0 when it is all whitespace
 * (segment._strip). */
static int strip_span(const Text *t, Py_ssize_t start, Py_ssize_t end, Span *out)
{
    while (start < end && sp(t, (start)))
        start++;
    if (start == end)
        return 0;
    while (sp(t, (end - 1)))
        end--;
    out->start = start;
    out->end = end;
    return 1;
}

static int push_stripped(const Text *t, Spans *out, Py_ssize_t start, Py_ssize_t end)
{
    Span s;
    if (!strip_span(t, start, end, &s))
        return 0;
    return spans_push(out, s.start, s.end);
}

/* ---------------------------------------------------------------------------------------
 * Plain text: paragraphs (segment.split_paragraphs, pattern \n[^\S\n]*\n)
 * ------------------------------------------------------------------------------------- */

/* End of a blank-line separator starting at the '\n' at i, or -1 when there is none. */
static Py_ssize_t paragraph_break_end(const Text *t, Py_ssize_t i)
{
    Py_ssize_t j = i + 1;
    while (j < t->len) {
        Py_UCS4 c = at(t, j);
        if (c == '\n')
            return j + 1;
        if (!is_space(c))
            return -1;
        j++;
    }
    return -1;
}

static int split_paragraphs(const Text *t, Spans *out)
{
    Py_ssize_t start = 0, i = 0;
    while (i < t->len) {
        if (t->kind == PyUnicode_1BYTE_KIND) {
            const Py_UCS1 *data = t->data;
            const void *feed = memchr(data + i, '\n', (size_t)(t->len - i));
            if (feed == NULL)
                break;
            i = (const Py_UCS1 *)feed - data;
        }
        else {
            i = next_bit(t->break_bits, i, t->len);
            if (i == t->len)
                break;
            if (at(t, i) != '\n') {
                i++;
                continue;
            }
        }
        Py_ssize_t after = paragraph_break_end(t, i);
        if (after < 0) {
            i++;
            continue;
        }
        if (push_stripped(t, out, start, i) < 0)
            return -1;
        start = i = after;
    }
    return push_stripped(t, out, start, t->len);
}

/* ---------------------------------------------------------------------------------------
 * Markdown: lines (markdown._Lines)
 * ------------------------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t *start; /* count + 1 entries: where each line starts, then the text length */
    Py_ssize_t *end;   /* where each line's body ends (its line break excluded) */
    char *blank;
    Py_ssize_t count;
} Lines;

static void lines_free(Lines *l)
{
    PyMem_Free(l->start);
    PyMem_Free(l->end);
    PyMem_Free(l->blank);
}

/* str.splitlines(keepends=True), each line's body without its break, and its blankness. */
static int lines_read(const Text *t, Lines *l)
{
    Py_ssize_t cap = 0, n = 0, i = 0;
    memset(l, 0, sizeof(*l));
    while (i < t->len) {
        if (n + 2 > cap) {
            Py_ssize_t c1 = cap, c2 = cap, c3 = cap;
            if (grow((void **)&l->start, &c1, n + 2, sizeof(Py_ssize_t)) < 0 ||
                grow((void **)&l->end, &c2, n + 2, sizeof(Py_ssize_t)) < 0 ||
                grow((void **)&l->blank, &c3, n + 2, 1) < 0)
                return -1;
            cap = c1;
        }
        Py_ssize_t j = next_bit(t->break_bits, i, t->len);
        l->start[n] = i;
        l->end[n] = j;
        l->blank[n] = (char)all_bits(t->space_bits, i, j);
        n++;
        if (j < t->len)
            j += (at(t, j) == '\r' && j + 1 < t->len && at(t, j + 1) == '\n') ? 2 : 1;
        i = j;
    }
    if (n == 0) {
        l->start = PyMem_Malloc(sizeof(Py_ssize_t));
        if (l->start == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    l->start[n] = t->len;
    l->count = n;
    return 0;
}

/* First character of line i after spaces and tabs (line.lstrip(" \t")). */
static Py_ssize_t head_of(const Text *t, const Lines *l, Py_ssize_t i)
{
    Py_ssize_t p = l->start[i];
    while (p < l->end[i] && is_blank_char(at(t, p)))
        p++;
    return p;
}

/* markdown._indent: leading columns, a tab advancing to the next multiple of four. */
static Py_ssize_t indent_of(const Text *t, const Lines *l, Py_ssize_t i)
{
    Py_ssize_t width = 0;
    for (Py_ssize_t p = l->start[i]; p < l->end[i]; p++) {
        Py_UCS4 c = at(t, p);
        if (c == ' ')
            width++;
        else if (c == '\t')
            width += 4 - width % 4;
        else
            break;
    }
    return width;
}

/* Up to three leading spaces (the patterns' " {0,3}"); -1 when there are more. */
static Py_ssize_t after_small_indent(const Text *t, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = s;
    while (p < e && at(t, p) == ' ')
        p++;
    return p - s > 3 ? -1 : p;
}

static int is_marker(Py_UCS4 c) { return c < 128 && strchr("#`~>-*+_<=|0123456789", (int)c) != NULL && c != 0; }

static int range_has(const Text *t, Py_ssize_t s, Py_ssize_t e, Py_UCS4 c)
{
    for (Py_ssize_t p = s; p < e; p++)
        if (at(t, p) == c)
            return 1;
    return 0;
}

static int line_has(const Text *t, const Lines *l, Py_ssize_t i, Py_UCS4 c)
{
    return range_has(t, l->start[i], l->end[i], c);
}

/* _ATX: " {0,3}(#{1,6})(?:[ \t]|$)"; the level, or 0. */
static int atx_level(const Text *t, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = after_small_indent(t, s, e);
    if (p < 0)
        return 0;
    Py_ssize_t h = 0;
    while (p + h < e && at(t, p + h) == '#')
        h++;
    if (h < 1 || h > 6)
        return 0;
    return (p + h == e || is_blank_char(at(t, p + h))) ? (int)h : 0;
}

/* _FENCE: "[ \t]*(`{3,}|~{3,})"; the fence's character and length, and where it ends. */
static int fence_at(const Text *t, Py_ssize_t s, Py_ssize_t e, Py_UCS4 *mark, Py_ssize_t *size, Py_ssize_t *after)
{
    Py_ssize_t p = s;
    while (p < e && is_blank_char(at(t, p)))
        p++;
    if (p == e)
        return 0;
    Py_UCS4 c = at(t, p);
    if (c != '`' && c != '~')
        return 0;
    Py_ssize_t r = 0;
    while (p + r < e && at(t, p + r) == c)
        r++;
    if (r < 3)
        return 0;
    *mark = c;
    *size = r;
    *after = p + r;
    return 1;
}

/* _THEMATIC: " {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$" */
static int is_thematic(const Text *t, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = after_small_indent(t, s, e);
    if (p < 0 || p == e)
        return 0;
    Py_UCS4 c = at(t, p);
    if (c != '-' && c != '*' && c != '_')
        return 0;
    int marks = 0;
    for (; p < e; p++) {
        Py_UCS4 d = at(t, p);
        if (d == c)
            marks++;
        else if (!is_blank_char(d))
            return 0;
    }
    return marks >= 3;
}

/* _SETEXT: " {0,3}(=+|-+)[ \t]*$"; 1 for '=', 2 for '-', 0 for no underline. */
static int setext_level(const Text *t, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = after_small_indent(t, s, e);
    if (p < 0 || p == e)
        return 0;
    Py_UCS4 c = at(t, p);
    if (c != '=' && c != '-')
        return 0;
    while (p < e && at(t, p) == c)
        p++;
    while (p < e && is_blank_char(at(t, p)))
        p++;
    return p == e ? (c == '=' ? 1 : 2) : 0;
}

/* _BULLET: "[ \t]*(?:[-+*]|(\d{1,9})[.)])(?:[ \t]|$)". *numbered: 0 for a bullet, 1 for an
 * ordered item numbered "1", 2 for any other number. */
static int bullet_at(const Text *t, Py_ssize_t s, Py_ssize_t e, int *numbered)
{
    Py_ssize_t p = s;
    while (p < e && is_blank_char(at(t, p)))
        p++;
    if (p == e)
        return 0;
    Py_UCS4 c = at(t, p);
    if (c == '-' || c == '+' || c == '*') {
        *numbered = 0;
        p++;
    }
    else {
        Py_ssize_t r = 0;
        while (p + r < e && Py_UNICODE_ISDECIMAL(at(t, p + r)))
            r++;
        if (r < 1 || r > 9 || p + r == e)
            return 0;
        Py_UCS4 d = at(t, p + r);
        if (d != '.' && d != ')')
            return 0;
        *numbered = (r == 1 && c == '1') ? 1 : 2;
        p += r + 1;
    }
    return p == e || is_blank_char(at(t, p));
}

/* One cell of _TABLE_DELIMITER, ":?-+:?[ \t]*", from p; its end, or -1. */
static Py_ssize_t table_cell(const Text *t, Py_ssize_t p, Py_ssize_t e)
{
    if (p < e && at(t, p) == ':')
        p++;
    Py_ssize_t dashes = p;
    while (p < e && at(t, p) == '-')
        p++;
    if (p == dashes)
        return -1;
    if (p < e && at(t, p) == ':')
        p++;
    while (p < e && is_blank_char(at(t, p)))
        p++;
    return p;
}

/* _TABLE_DELIMITER:
 * " {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$" */
static int is_table_delimiter(const Text *t, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = s;
    while (p < e && is_blank_char(at(t, p)))
        p++;
    if (p < e && at(t, p) == '|') {
        /* The leading pipe may only follow " {0,3}" (no tabs). */
        for (Py_ssize_t q = s; q < p; q++)
            if (at(t, q) != ' ')
                return 0;
        if (p - s > 3)
            return 0;
        p++;
        while (p < e && is_blank_char(at(t, p)))
            p++;
    }
    p = table_cell(t, p, e);
    if (p < 0)
        return 0;
    while (p < e) {
        if (at(t, p) != '|')
            return 0;
        p++;
        while (p < e && is_blank_char(at(t, p)))
            p++;
        if (p == e)
            return 1; /* the trailing pipe */
        p = table_cell(t, p, e);
        if (p < 0)
            return 0;
    }
    return 1;
}

/* _HTML_START:
 * " {0,3}<(?:!--|[A-Za-z][A-Za-z0-9-]*[\s/>]|[A-Za-z][A-Za-z0-9-]*$|/[A-Za-z]|![A-Z]|\?)" */
static int is_html_start(const Text *t, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = after_small_indent(t, s, e);
    if (p < 0 || p == e || at(t, p) != '<')
        return 0;
    p++;
    if (p == e)
        return 0;
    Py_UCS4 c = at(t, p);
    if (c == '?')
        return 1;
    if (c == '!') {
        if (p + 3 <= e && at(t, p + 1) == '-' && at(t, p + 2) == '-')
            return 1;
        return p + 1 < e && at(t, p + 1) >= 'A' && at(t, p + 1) <= 'Z';
    }
    if (c == '/')
        return p + 1 < e && is_ascii_letter(at(t, p + 1));
    if (!is_ascii_letter(c))
        return 0;
    p++;
    while (p < e && (is_ascii_alnum(at(t, p)) || at(t, p) == '-'))
        p++;
    if (p == e)
        return 1;
    c = at(t, p);
    return is_space(c) || c == '/' || c == '>';
}

static const char *const RAW_TAGS[] = {"script", "pre", "style", "textarea"};

/* _HTML_RAW: " {0,3}<(script|pre|style|textarea)[\s>]", case-insensitive; the tag's index
 * in RAW_TAGS, or -1. (Unicode case folding adds no other match: needs_reference sends
 * the characters that would fold to these letters to the reference.) */
static int html_raw_tag(const Text *t, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = after_small_indent(t, s, e);
    if (p < 0 || p == e || at(t, p) != '<')
        return -1;
    p++;
    for (int k = 0; k < 4; k++) {
        const char *tag = RAW_TAGS[k];
        Py_ssize_t n = (Py_ssize_t)strlen(tag), q = 0;
        while (q < n && p + q < e && ascii_lower(at(t, p + q)) == (Py_UCS4)tag[q])
            q++;
        if (q < n || p + n >= e)
            continue;
        Py_UCS4 c = at(t, p + n);
        if (is_space(c) || c == '>')
            return k;
    }
    return -1;
}

/* Whether needle (ASCII, lower case) occurs in line i lower-cased. */
static int line_contains_lower(const Text *t, const Lines *l, Py_ssize_t i, const char *needle)
{
    Py_ssize_t n = (Py_ssize_t)strlen(needle);
    for (Py_ssize_t p = l->start[i]; p + n <= l->end[i]; p++) {
        Py_ssize_t q = 0;
        while (q < n && ascii_lower(at(t, p + q)) == (Py_UCS4)needle[q])
            q++;
        if (q == n)
            return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Markdown: blocks (markdown.split_blocks and its helpers)
 * ------------------------------------------------------------------------------------- */

typedef struct {
    int kind, level;
    Py_ssize_t start, end;
} Block;

typedef struct {
    Block *items;
    Py_ssize_t n, cap;
} Blocks;

typedef struct {
    const Text *t;
    Lines l;
} Doc;

#define BODY(d, i) (d)->l.start[i], (d)->l.end[i]

static int is_table_start(const Doc *d, Py_ssize_t i)
{
    return line_has(d->t, &d->l, i, '|') && i + 1 < d->l.count && line_has(d->t, &d->l, i + 1, '-') &&
           is_table_delimiter(d->t, BODY(d, i + 1));
}

/* markdown._interrupts_paragraph */
static int interrupts_paragraph(const Doc *d, Py_ssize_t i)
{
    const Text *t = d->t;
    Py_ssize_t head = head_of(t, &d->l, i), e = d->l.end[i];
    if (head == e || !is_marker(at(t, head)) || indent_of(t, &d->l, i) >= 4)
        return 0;
    Py_UCS4 first = at(t, head);
    if (first == '#')
        return atx_level(t, BODY(d, i)) > 0;
    if (first == '`' || first == '~') {
        Py_UCS4 mark;
        Py_ssize_t size, after;
        return fence_at(t, BODY(d, i), &mark, &size, &after);
    }
    if (first == '>')
        return 1;
    if (first == '<')
        return is_html_start(t, BODY(d, i));
    if (is_table_start(d, i) || is_thematic(t, BODY(d, i)))
        return 1;
    int numbered;
    if (!bullet_at(t, BODY(d, i), &numbered))
        return 0;
    Py_ssize_t p = head + 1;
    while (p < e && sp(t, (p)))
        p++;
    if (p == e)
        return 0; /* a bare marker */
    /* An ordered list interrupts a paragraph only when it starts at 1 (CommonMark). */
    return numbered != 2;
}

static int continues_list(const Doc *d, Py_ssize_t i)
{
    int numbered;
    if (bullet_at(d->t, BODY(d, i), &numbered) || indent_of(d->t, &d->l, i) >= 2)
        return 1;
    return !interrupts_paragraph(d, i);
}

static Py_ssize_t list_end(const Doc *d, Py_ssize_t i)
{
    Py_ssize_t j = i + 1, count = d->l.count;
    while (j < count) {
        if (!d->l.blank[j]) {
            if (!continues_list(d, j))
                return j;
            j++;
            continue;
        }
        /* A blank line ends the list unless an item or indented content follows it. */
        Py_ssize_t k = j;
        while (k < count && d->l.blank[k])
            k++;
        if (k == count)
            return k;
        int numbered;
        if (bullet_at(d->t, BODY(d, k), &numbered) || indent_of(d->t, &d->l, k) >= 2) {
            j = k + 1;
            continue;
        }
        return j;
    }
    return j;
}

static Py_ssize_t until_blank(const Doc *d, Py_ssize_t i)
{
    Py_ssize_t j = i + 1;
    while (j < d->l.count && !d->l.blank[j])
        j++;
    return j;
}

static Py_ssize_t html_end(const Doc *d, Py_ssize_t i)
{
    const Text *t = d->t;
    int tag = html_raw_tag(t, BODY(d, i));
    if (tag >= 0) {
        char closing[16];
        snprintf(closing, sizeof closing, "</%s>", RAW_TAGS[tag]);
        for (Py_ssize_t j = i; j < d->l.count; j++)
            if (line_contains_lower(t, &d->l, j, closing))
                return j + 1;
        return d->l.count;
    }
    Py_ssize_t p = d->l.start[i];
    while (p < d->l.end[i] && sp(t, (p)))
        p++;
    if (p + 4 <= d->l.end[i] && at(t, p) == '<' && at(t, p + 1) == '!' && at(t, p + 2) == '-' &&
        at(t, p + 3) == '-') {
        for (Py_ssize_t j = i; j < d->l.count; j++)
            if (line_contains_lower(t, &d->l, j, "-->"))
                return j + 1;
        return d->l.count;
    }
    return until_blank(d, i);
}

static Py_ssize_t paragraph_end(const Doc *d, Py_ssize_t i, int *level)
{
    const Text *t = d->t;
    *level = 0;
    for (Py_ssize_t j = i + 1; j < d->l.count; j++) {
        if (d->l.blank[j])
            return j;
        Py_UCS4 first = at(t, head_of(t, &d->l, j));
        if (first == '=' || first == '-') {
            int underline = setext_level(t, BODY(d, j));
            if (underline) {
                *level = underline;
                return j + 1;
            }
        }
        if (is_marker(first) && interrupts_paragraph(d, j))
            return j;
    }
    return d->l.count;
}

static Py_ssize_t fence_end(const Doc *d, Py_ssize_t i, Py_UCS4 mark, Py_ssize_t size)
{
    const Text *t = d->t;
    /* closing: "[ \t]*{mark}{size,}[ \t]*$" */
    for (Py_ssize_t j = i + 1; j < d->l.count; j++) {
        Py_ssize_t p = d->l.start[j], e = d->l.end[j];
        while (p < e && is_blank_char(at(t, p)))
            p++;
        Py_ssize_t r = 0;
        while (p + r < e && at(t, p + r) == mark)
            r++;
        if (r < size)
            continue;
        p += r;
        while (p < e && is_blank_char(at(t, p)))
            p++;
        if (p == e)
            return j + 1;
    }
    return d->l.count;
}

static Py_ssize_t indented_code_end(const Doc *d, Py_ssize_t i)
{
    Py_ssize_t j = i + 1, end = j;
    while (j < d->l.count) {
        if (d->l.blank[j]) {
            j++;
            continue;
        }
        if (indent_of(d->t, &d->l, j) < 4)
            break;
        end = ++j;
    }
    return end;
}

static Py_ssize_t table_end(const Doc *d, Py_ssize_t i)
{
    Py_ssize_t j = i + 2;
    while (j < d->l.count && !d->l.blank[j] && line_has(d->t, &d->l, j, '|'))
        j++;
    return j;
}

/* Whether line j, right-stripped, is exactly the ASCII string s. */
static int line_is(const Doc *d, Py_ssize_t j, const char *s)
{
    const Text *t = d->t;
    Py_ssize_t p = d->l.start[j], e = d->l.end[j], n = (Py_ssize_t)strlen(s);
    while (e > p && sp(t, (e - 1)))
        e--;
    if (e - p != n)
        return 0;
    for (Py_ssize_t q = 0; q < n; q++)
        if (at(t, p + q) != (Py_UCS4)s[q])
            return 0;
    return 1;
}

static Py_ssize_t front_matter_end(const Doc *d)
{
    if (d->l.count == 0)
        return 0;
    int dashes = line_is(d, 0, "---");
    if (!dashes && !line_is(d, 0, "+++"))
        return 0;
    Py_ssize_t last = d->l.count < 500 ? d->l.count : 500;
    for (Py_ssize_t j = 1; j < last; j++) {
        int closes = dashes ? (line_is(d, j, "---") || line_is(d, j, "...")) : line_is(d, j, "+++");
        if (closes)
            return j > 1 ? j + 1 : 0;
    }
    return 0;
}

static int push_block(const Doc *d, Blocks *out, int kind, Py_ssize_t first, Py_ssize_t after, int level)
{
    Span s;
    if (!strip_span(d->t, d->l.start[first], d->l.start[after], &s))
        s.start = s.end = d->l.start[first]; /* never: a block starts on a non-blank line */
    if (grow((void **)&out->items, &out->cap, out->n + 1, sizeof(Block)) < 0)
        return -1;
    Block *b = &out->items[out->n++];
    b->kind = kind;
    b->level = level;
    b->start = s.start;
    b->end = s.end;
    return 0;
}

/* The block starting at non-blank line i whose first character is a marker; *after is set. */
static int marked_block(const Doc *d, Py_ssize_t i, Py_ssize_t *after, int *level)
{
    const Text *t = d->t;
    Py_ssize_t s = d->l.start[i], e = d->l.end[i];
    Py_UCS4 head = at(t, head_of(t, &d->l, i));
    Py_UCS4 mark;
    Py_ssize_t size, fence_stop;
    *level = 0;
    if (fence_at(t, s, e, &mark, &size, &fence_stop) && (mark == '~' || !range_has(t, fence_stop, e, '`'))) {
        *after = fence_end(d, i, mark, size);
        return K_CODE;
    }
    if (indent_of(t, &d->l, i) >= 4) {
        *after = indented_code_end(d, i);
        return K_CODE;
    }
    int atx = atx_level(t, s, e);
    if (atx) {
        *after = i + 1;
        *level = atx;
        return K_HEADING;
    }
    if (is_thematic(t, s, e)) {
        *after = i + 1;
        return K_THEMATIC;
    }
    if (head == '>') {
        *after = until_blank(d, i);
        return K_QUOTE;
    }
    if (head == '<' && is_html_start(t, s, e)) {
        *after = html_end(d, i);
        return K_HTML;
    }
    if (is_table_start(d, i)) {
        *after = table_end(d, i);
        return K_TABLE;
    }
    int numbered;
    if (bullet_at(t, s, e, &numbered)) {
        *after = list_end(d, i);
        return K_LIST;
    }
    *after = paragraph_end(d, i, level);
    return *level ? K_HEADING : K_PARAGRAPH;
}

static int split_blocks(const Text *t, Blocks *out)
{
    Doc d = {t, {0}};
    if (lines_read(t, &d.l) < 0)
        return -1;
    int rc = -1;
    Py_ssize_t i = front_matter_end(&d);
    if (i && push_block(&d, out, K_FRONT, 0, i, 0) < 0)
        goto done;
    while (i < d.l.count) {
        if (d.l.blank[i]) {
            i++;
            continue;
        }
        Py_ssize_t after;
        int kind, level = 0;
        if (!is_marker(at(t, head_of(t, &d.l, i)))) {
            if (indent_of(t, &d.l, i) >= 4) {
                kind = K_CODE;
                after = indented_code_end(&d, i);
            }
            else {
                after = paragraph_end(&d, i, &level);
                kind = level ? K_HEADING : K_PARAGRAPH;
            }
        }
        else
            kind = marked_block(&d, i, &after, &level);
        if (push_block(&d, out, kind, i, after, level) < 0)
            goto done;
        i = after;
    }
    rc = 0;
done:
    lines_free(&d.l);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Heading titles (markdown.heading_text)
 * ------------------------------------------------------------------------------------- */

/* Where _SETEXT_UNDERLINE ("\s*\n[ \t]*(?:=+|-+)[ \t]*$") starts in [s, e), or e. */
static Py_ssize_t setext_underline_start(const Text *t, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t q = e;
    while (q > s && is_blank_char(at(t, q - 1)))
        q--;
    if (q == s)
        return e;
    Py_UCS4 c = at(t, q - 1);
    if (c != '=' && c != '-')
        return e;
    while (q > s && at(t, q - 1) == c)
        q--;
    while (q > s && is_blank_char(at(t, q - 1)))
        q--;
    if (q == s || at(t, q - 1) != '\n')
        return e;
    q--;
    /* The search finds the leftmost start: every whitespace character before the break. */
    while (q > s && sp(t, (q - 1)))
        q--;
    return q;
}

/* " ".join(text[s:e].split()) */
static PyObject *folded(const Text *t, Py_ssize_t s, Py_ssize_t e)
{
    Py_UCS4 *buf = PyMem_Malloc(sizeof(Py_UCS4) * (size_t)(e - s + 1));
    if (buf == NULL)
        return PyErr_NoMemory();
    Py_ssize_t n = 0;
    int gap = 0;
    for (Py_ssize_t p = s; p < e; p++) {
        Py_UCS4 c = at(t, p);
        if (is_space(c)) {
            gap = 1;
            continue;
        }
        if (gap && n)
            buf[n++] = ' ';
        gap = 0;
        buf[n++] = c;
    }
    PyObject *title = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buf, n);
    PyMem_Free(buf);
    return title;
}

/* A heading's words without its '#' marks or setext underline, whitespace folded. The
 * marks pattern is "^[ \t]*#{1,6}[ \t]*|[ \t]+#+[ \t]*$", replaced left to right. */
static PyObject *heading_title(const Text *t, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = s;
    while (p < e && sp(t, (p)))
        p++;
    if (p == e || at(t, p) != '#')
        e = setext_underline_start(t, s, e);
    /* the opening marks */
    p = s;
    while (p < e && is_blank_char(at(t, p)))
        p++;
    Py_ssize_t hashes = 0;
    while (p + hashes < e && hashes < 6 && at(t, p + hashes) == '#')
        hashes++;
    if (hashes) {
        p += hashes;
        while (p < e && is_blank_char(at(t, p)))
            p++;
        s = p;
    }
    /* the closing marks, searched from where the opening marks ended */
    Py_ssize_t q = e;
    while (q > s && is_blank_char(at(t, q - 1)))
        q--;
    Py_ssize_t run = q;
    while (run > s && at(t, run - 1) == '#')
        run--;
    if (run < q) {
        Py_ssize_t lead = run;
        while (lead > s && is_blank_char(at(t, lead - 1)))
            lead--;
        if (lead < run)
            e = lead;
    }
    return folded(t, s, e);
}

/* ---------------------------------------------------------------------------------------
 * Over-long blocks: sentences, then words, then characters (lexical._capped)
 * ------------------------------------------------------------------------------------- */

static int is_cjk_stop(Py_UCS4 c) { return c == 0x3002 || c == 0xFF01 || c == 0xFF1F; }
static int is_cjk_closer(Py_UCS4 c)
{
    return c == 0x300D || c == 0x300F || c == 0x201D || c == 0x2019 || c == '"' || c == '\'' ||
           c == 0xFF09 || c == ')' || c == ']';
}
static int is_arabic_stop(Py_UCS4 c) { return c == 0x061F || c == 0x06D4 || c == 0x061B; }
static int is_latin_stop(Py_UCS4 c) { return c == '.' || c == '!' || c == '?' || c == 0x2026; }
static int is_latin_closer(Py_UCS4 c)
{
    return c == 0x201D || c == 0x2019 || c == '"' || c == '\'' || c == 0xBB || c == ')' || c == ']';
}
static int is_opener(Py_UCS4 c)
{
    return c == '(' || c == '[' || c == '{' || c == '"' || c == '\'' || c == 0x201C || c == 0x2018 ||
           c == 0xAB;
}

/* segment._inside_open_quote over [from, to) */
static int inside_open_quote(const Text *t, Py_ssize_t from, Py_ssize_t to)
{
    Py_ssize_t straight = 0, open = 0, close = 0;
    for (Py_ssize_t p = from; p < to; p++) {
        Py_UCS4 c = at(t, p);
        straight += c == '"';
        open += c == 0x201C;
        close += c == 0x201D;
    }
    return straight % 2 == 1 || open > close;
}

static int is_abbreviation(const Text *t, Py_ssize_t s, Py_ssize_t e)
{
    char word[16];
    if (e - s >= (Py_ssize_t)sizeof word)
        return 0;
    for (Py_ssize_t p = s; p < e; p++) {
        Py_UCS4 c = at(t, p);
        /* A word with a non-ASCII character is no abbreviation: its lower case keeps it. */
        if (c >= 128)
            return 0;
        word[p - s] = (char)ascii_lower(c);
    }
    word[e - s] = '\0';
    for (Py_ssize_t k = 0; k < cfg.n_abbrev; k++)
        if (cfg.abbrev[k][0] == word[0] && strcmp(word, cfg.abbrev[k]) == 0)
            return 1;
    return 0;
}

/* segment._INITIALISM fullmatch: "(?:[A-Za-z]\.)+[A-Za-z]|[A-Za-z]" */
static int is_initialism(const Text *t, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t n = e - s;
    if (n < 1 || n % 2 == 0)
        return 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_UCS4 c = at(t, s + k);
        if (k % 2 == 0 ? !is_ascii_letter(c) : c != '.')
            return 0;
    }
    return 1;
}

/* segment.false_stop_at inside the view [base, limit). */
static int false_stop(const Text *t, Py_ssize_t base, Py_ssize_t limit, Py_ssize_t mark_start,
                      Py_ssize_t mark_end, Py_ssize_t end, Py_ssize_t sentence_start)
{
    /* Followed by a lower-case word ("text[end:end+8].lstrip()[0].islower()"). */
    Py_ssize_t stop = end + 8 < limit ? end + 8 : limit;
    for (Py_ssize_t p = end; p < stop; p++) {
        Py_UCS4 c = at(t, p);
        if (!is_space(c)) {
            if (Py_UNICODE_ISLOWER(c))
                return 1;
            break;
        }
    }
    int ellipsis = 0;
    for (Py_ssize_t p = mark_start; p < mark_end; p++)
        if (at(t, p) == 0x2026 || (p + 1 < mark_end && at(t, p) == '.' && at(t, p + 1) == '.'))
            ellipsis = 1;
    if (ellipsis)
        return inside_open_quote(t, sentence_start, mark_start);
    if (mark_end - mark_start != 1 || at(t, mark_start) != '.')
        return 0;
    /* segment._word_before */
    Py_ssize_t word_start = mark_start, floor = mark_start - 40 > base ? mark_start - 40 : base;
    while (word_start > floor && !sp(t, (word_start - 1)))
        word_start--;
    Py_ssize_t w = word_start;
    while (w < mark_start && is_opener(at(t, w)))
        w++;
    if (is_abbreviation(t, w, mark_start) || is_initialism(t, w, mark_start))
        return 1;
    /* "1." at the start of a line numbers a list item. */
    int line_start = word_start == base || at(t, word_start - 1) == '\r' || at(t, word_start - 1) == '\n';
    if (!line_start || w == mark_start || mark_start - w > 3)
        return 0;
    for (Py_ssize_t p = w; p < mark_start; p++)
        if (!Py_UNICODE_ISDIGIT(at(t, p)))
            return 0;
    return 1;
}

/* The candidate sentence end at p (segment.CANDIDATE). Returns 0 when none starts there;
 * else sets where it ends, whether it is a line break, and the Latin terminator run. */
static int candidate_at(const Text *t, Py_ssize_t p, Py_ssize_t limit, Py_ssize_t *end, int *line,
                        Py_ssize_t *mark_end)
{
    Py_UCS4 c = at(t, p);
    *line = 0;
    *mark_end = -1;
    if (c == '\r') {
        *line = 1;
        *end = (p + 1 < limit && at(t, p + 1) == '\n') ? p + 2 : p + 1;
        return 1;
    }
    if (c == '\n' || c == 0x2028 || c == 0x2029) {
        *line = 1;
        *end = p + 1;
        return 1;
    }
    Py_ssize_t q = p;
    if (is_cjk_stop(c)) {
        while (q < limit && is_cjk_stop(at(t, q)))
            q++;
        while (q < limit && is_cjk_closer(at(t, q)))
            q++;
        *end = q;
        return 1;
    }
    if (is_arabic_stop(c)) {
        while (q < limit && is_arabic_stop(at(t, q)))
            q++;
        *end = q;
        return 1;
    }
    if (!is_latin_stop(c))
        return 0;
    while (q < limit && is_latin_stop(at(t, q)))
        q++;
    *mark_end = q;
    while (q < limit && is_latin_closer(at(t, q)))
        q++;
    /* "(?=\s|\Z)" */
    if (q < limit && !sp(t, (q)))
        return 0;
    *end = q;
    return 1;
}

/* segment.split_sentences on the view text[base:limit], spans in document offsets. */
static int split_sentences(const Text *t, Py_ssize_t base, Py_ssize_t limit, Spans *out)
{
    Py_ssize_t start = base, p = base;
    while (p < limit) {
        Py_ssize_t end, mark_end;
        int line;
        if (!(t->cls[p] & C_STOP) || !candidate_at(t, p, limit, &end, &line, &mark_end)) {
            p++;
            continue;
        }
        if (mark_end >= 0 && false_stop(t, base, limit, p, mark_end, end, start)) {
            p = end;
            continue;
        }
        if (push_stripped(t, out, start, line ? p : end) < 0)
            return -1;
        start = p = end;
    }
    return push_stripped(t, out, start, limit);
}

/* segment.pack_spans with a character counter: greedy groups of at most cap characters. */
static int pack_spans(const Spans *in, Py_ssize_t cap, Spans *out)
{
    Py_ssize_t i = 0;
    while (i < in->n) {
        Py_ssize_t start = in->items[i].start, j = i + 1;
        while (j < in->n && in->items[j].end - start <= cap)
            j++;
        if (spans_push(out, start, in->items[j - 1].end) < 0)
            return -1;
        i = j;
    }
    return 0;
}

/* segment.split_to_cap with a character counter, appended to out. */
static int split_to_cap(const Text *t, Span span, Py_ssize_t cap, Spans *out)
{
    if (span.end - span.start <= cap)
        return spans_push(out, span.start, span.end);
    Spans words = {0};
    int rc = -1;
    Py_ssize_t p = span.start;
    while (p < span.end) {
        while (p < span.end && sp(t, (p)))
            p++;
        Py_ssize_t w = p;
        while (p < span.end && !sp(t, (p)))
            p++;
        if (w == p)
            break;
        if (p - w <= cap) {
            if (spans_push(&words, w, p) < 0)
                goto done;
            continue;
        }
        for (Py_ssize_t c = w; c < p; c += cap)
            if (spans_push(&words, c, c + cap < p ? c + cap : p) < 0)
                goto done;
    }
    rc = pack_spans(&words, cap, out);
done:
    PyMem_Free(words.items);
    return rc;
}

/* lexical._capped for a block longer than the cap. */
static int capped(const Text *t, Py_ssize_t start, Py_ssize_t end, Spans *out)
{
    Spans sentences = {0}, pieces = {0};
    int rc = -1;
    if (split_sentences(t, start, end, &sentences) < 0)
        goto done;
    for (Py_ssize_t k = 0; k < sentences.n; k++)
        if (split_to_cap(t, sentences.items[k], cfg.max_chars, &pieces) < 0)
            goto done;
    rc = pack_spans(&pieces, cfg.max_chars, out);
done:
    PyMem_Free(sentences.items);
    PyMem_Free(pieces.items);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Keywords
 *
 * A keyword is a run of at least min_letters keyword characters, lower-cased, that is not
 * a stop word; it is identified by a 64-bit FNV-1a hash of its lower-cased code points (the
 * reference's document pass also compares keywords by a 64-bit hash).
 *
 * Ranges are read the way the reference reads them for the document: when its document
 * pass applies (no non-ASCII keyword character, no whitespace-free run over the cap), a
 * range holds the words and keyword runs that *start* inside it, each counted whole;
 * otherwise the range's own text is read on its own. The two differ only where a range
 * starts or ends inside a word.
 * ------------------------------------------------------------------------------------- */

static int rounded_by_python(double x, int digits, double *out);

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static inline uint64_t nonzero(uint64_t h) { return h ? h : 1; }

typedef struct {
    uint64_t *slots;
    size_t mask; /* capacity - 1 */
    Py_ssize_t size;
    size_t *used; /* the slots in use, so that clearing costs what was added, not the capacity */
} HashSet;

static int set_init(HashSet *s, size_t capacity)
{
    s->slots = PyMem_Calloc(capacity, sizeof(uint64_t));
    s->used = PyMem_Malloc((capacity / 2 + 1) * sizeof(size_t));
    if (s->slots == NULL || s->used == NULL) {
        PyMem_Free(s->slots);
        PyMem_Free(s->used);
        s->slots = NULL;
        s->used = NULL;
        PyErr_NoMemory();
        return -1;
    }
    s->mask = capacity - 1;
    s->size = 0;
    return 0;
}

static void set_free(HashSet *s)
{
    PyMem_Free(s->slots);
    PyMem_Free(s->used);
}

static int set_contains(const HashSet *s, uint64_t h)
{
    for (size_t i = (size_t)h & s->mask;; i = (i + 1) & s->mask) {
        if (s->slots[i] == h)
            return 1;
        if (s->slots[i] == 0)
            return 0;
    }
}

static int set_add(HashSet *s, uint64_t h);

static int set_grow(HashSet *s)
{
    HashSet bigger;
    if (set_init(&bigger, (s->mask + 1) * 2) < 0)
        return -1;
    for (Py_ssize_t k = 0; k < s->size; k++)
        if (set_add(&bigger, s->slots[s->used[k]]) < 0) {
            set_free(&bigger);
            return -1;
        }
    set_free(s);
    *s = bigger;
    return 0;
}

/* Adds h; 1 when it was new, 0 when present, -1 on error. */
static int set_add(HashSet *s, uint64_t h)
{
    if ((size_t)(s->size + 1) * 2 > s->mask + 1 && set_grow(s) < 0)
        return -1;
    size_t i = (size_t)h & s->mask;
    while (s->slots[i]) {
        if (s->slots[i] == h)
            return 0;
        i = (i + 1) & s->mask;
    }
    s->slots[i] = h;
    s->used[s->size++] = i;
    return 1;
}

static void set_clear(HashSet *s)
{
    for (Py_ssize_t k = 0; k < s->size; k++)
        s->slots[s->used[k]] = 0;
    s->size = 0;
}

static inline int is_stop_word(uint64_t h)
{
    for (size_t i = (size_t)h & cfg.stop_mask;; i = (i + 1) & cfg.stop_mask) {
        if (cfg.stop[i] == h)
            return 1;
        if (cfg.stop[i] == 0)
            return 0;
    }
}

typedef struct {
    Py_ssize_t start, end; /* the whole run */
    uint64_t hash;
    int stop;
    Py_ssize_t keywords_before; /* runs before this one that are not stop words */
} Run;

/* A document's words and keyword runs, found in one pass (reader_read). */
typedef struct {
    const Text *t;
    int whole_words; /* the document pass applies: ranges read whole words */
    Run *runs;       /* runs of at least min_letters keyword characters, in order */
    Py_ssize_t n_runs, cap_runs;
    /* The last answers of first_run, per purpose (HINT_UNIT, HINT_CHUNK). */
    Py_ssize_t run_hint[2];
} Reader;

static Py_UCS4 latin1_lower[256];

/* The keyword hash: a function of the lower-cased code points and their number only
 * (stop words, hashed at configure(), must meet their runs in any text). Code points
 * below 256 go eight to a 64-bit block, one multiply per block; any other code point is
 * mixed on its own, tagged. */
static inline uint64_t mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 29);
}

/* Eight code points below 256, lower-cased into one block. */
#define PACK8(data, p)                                                                        \
    ((uint64_t)latin1_lower[(data)[(p)]] | (uint64_t)latin1_lower[(data)[(p) + 1]] << 8 |       \
     (uint64_t)latin1_lower[(data)[(p) + 2]] << 16 | (uint64_t)latin1_lower[(data)[(p) + 3]] << 24 | \
     (uint64_t)latin1_lower[(data)[(p) + 4]] << 32 | (uint64_t)latin1_lower[(data)[(p) + 5]] << 40 | \
     (uint64_t)latin1_lower[(data)[(p) + 6]] << 48 | (uint64_t)latin1_lower[(data)[(p) + 7]] << 56)

/* The same blocks from 2- and 4-byte text: eight characters at once when all are below
 * 256 and a block starts there (what the character-by-character rule would do too). */
#define HASH_WIDE(TYPE)                                                                       \
    do {                                                                                      \
        const TYPE *data = t->data;                                                           \
        uint64_t block = 0;                                                                   \
        int filled = 0;                                                                       \
        Py_ssize_t p = s;                                                                     \
        TYPE all = 0;                                                                         \
        for (Py_ssize_t q = s; q < e; q++)                                                    \
            all |= data[q];                                                                   \
        if (all < 256) {                                                                      \
            /* Latin-1 only: the blocks of the one-byte case. */                              \
            for (; p + 8 <= e; p += 8)                                                        \
                h = mix(h, PACK8(data, p));                                                   \
            for (; p < e; p++)                                                                \
                block |= (uint64_t)latin1_lower[data[p]] << (8 * filled++);                   \
        }                                                                                     \
        while (p < e) {                                                                       \
            Py_UCS4 c = data[p] < 256 ? latin1_lower[data[p]] : lower_char(data[p]);          \
            p++;                                                                              \
            if (c < 256) {                                                                    \
                block |= (uint64_t)c << (8 * filled);                                         \
                if (++filled < 8)                                                             \
                    continue;                                                                 \
                h = mix(h, block);                                                            \
            }                                                                                 \
            else {                                                                            \
                if (filled)                                                                   \
                    h = mix(h, block);                                                        \
                h = mix(h, (uint64_t)c | ((uint64_t)1 << 62));                                \
            }                                                                                 \
            block = 0;                                                                        \
            filled = 0;                                                                       \
        }                                                                                     \
        if (filled)                                                                           \
            h = mix(h, block);                                                                \
    } while (0)

/* run_hash of one-byte text: every lower-cased Latin-1 character stays below 256, so the
 * blocks need no tests. */
static inline uint64_t narrow_hash(const Py_UCS1 *data, Py_ssize_t s, Py_ssize_t e)
{
    uint64_t h = FNV_OFFSET ^ (uint64_t)(e - s);
    for (; s + 8 <= e; s += 8)
        h = mix(h, PACK8(data, s));
    if (s < e) {
        uint64_t block = 0;
        for (int i = 0; s < e; s++, i++)
            block |= (uint64_t)latin1_lower[data[s]] << (8 * i);
        h = mix(h, block);
    }
    return nonzero(h);
}

static uint64_t run_hash(const Text *t, Py_ssize_t s, Py_ssize_t e)
{
    uint64_t h = FNV_OFFSET ^ (uint64_t)(e - s);
    if (t->kind == PyUnicode_1BYTE_KIND)
        return narrow_hash(t->data, s, e);
    else if (t->kind == PyUnicode_2BYTE_KIND)
        HASH_WIDE(Py_UCS2);
    else
        HASH_WIDE(Py_UCS4);
    return nonzero(h);
}

static void reader_free(Reader *r)
{
    PyMem_Free(r->runs);
}

/* Index of the first run starting at or after p. */
enum { HINT_UNIT, HINT_CHUNK };

static Py_ssize_t first_run(const Reader *r, Py_ssize_t p, int purpose)
{
    /* Queries move forward through the document: gallop from the previous answer. */
    Py_ssize_t lo = 0, hi = r->n_runs, hint = r->run_hint[purpose];
    if (hint <= hi && (hint == 0 || r->runs[hint - 1].start < p)) {
        Py_ssize_t step = 1;
        lo = hint;
        while (lo + step <= hi && r->runs[lo + step - 1].start < p) {
            lo += step;
            step *= 2;
        }
        if (lo + step < hi)
            hi = lo + step;
    }
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (r->runs[mid].start < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    ((Reader *)r)->run_hint[purpose] = lo;
    return lo;
}

/* Set bits of [s, e). */
static Py_ssize_t count_bits(const uint64_t *bits, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t count = 0;
    while (s < e) {
        Py_ssize_t w = s >> 6, stop = ((w + 1) << 6) < e ? (w + 1) << 6 : e;
        uint64_t want = (stop - s == 64) ? ~(uint64_t)0 : (((uint64_t)1 << (stop - s)) - 1) << (s & 63);
        count += __builtin_popcountll(bits[w] & want);
        s = stop;
    }
    return count;
}

/* Calls found(h) for every keyword (stop words left out) of [s, e). Returns -1 when found
 * fails. */
typedef int (*KeywordSink)(void *ctx, uint64_t h);

/* A run cut by a range's edge, read as the range's own text reads it. */
static int cut_run(const Reader *r, Py_ssize_t s, Py_ssize_t e, KeywordSink found, void *ctx)
{
    if (e - s < cfg.min_letters)
        return 0;
    uint64_t h = run_hash(r->t, s, e);
    return is_stop_word(h) ? 0 : found(ctx, h);
}

static int each_keyword(const Reader *r, Py_ssize_t s, Py_ssize_t e, KeywordSink found, void *ctx, int purpose)
{
    Py_ssize_t i = first_run(r, s, purpose);
    if (!r->whole_words && i > 0 && r->runs[i - 1].end > s &&
        cut_run(r, s, r->runs[i - 1].end < e ? r->runs[i - 1].end : e, found, ctx) < 0)
        return -1;
    for (; i < r->n_runs && r->runs[i].start < e; i++) {
        const Run *run = &r->runs[i];
        if (!r->whole_words && run->end > e) {
            if (cut_run(r, run->start, e, found, ctx) < 0)
                return -1;
        }
        else if (!run->stop && found(ctx, run->hash) < 0)
            return -1;
    }
    return 0;
}

static int count_one(void *ctx, uint64_t h)
{
    (void)h;
    ++*(Py_ssize_t *)ctx;
    return 0;
}

/* Words (whitespace-separated) of [s, e), read as the Reader says. */
static Py_ssize_t count_words(const Reader *r, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t words = count_bits(r->t->start_bits, s, e);
    /* Read on its own, a range that starts inside a word starts with a word. */
    if (!r->whole_words && s < e && s > 0 && !sp(r->t, s) && !sp(r->t, s - 1))
        words++;
    return words;
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

/* ---------------------------------------------------------------------------------------
 * The ladder (lexical._Builder)
 * ------------------------------------------------------------------------------------- */

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
    HashSet keywords; /* of units[0:keyed] */
    Py_ssize_t keyed;
    /* every read unit's distinct keywords */
    uint64_t *pool;
    Py_ssize_t n_pool, cap_pool;
    HashSet scratch;
} Builder;

/* The first prefix rule (transition break included) a unit's opening matches: its list and
 * quote markers skipped (_LEAD_MARKERS), then _OPENING, both inside the lead window. */
static int opening_rule(const Text *t, const Unit *u)
{
    Py_ssize_t window = u->start + cfg.lead_window < u->end ? u->start + cfg.lead_window : u->end;
    Py_ssize_t p = u->start;
    /* "(?:[\s>*+\-_#]|\d{1,9}[.)])*" */
    while (p < window) {
        Py_UCS4 c = at(t, p);
        if (is_space(c) || c == '>' || c == '*' || c == '+' || c == '-' || c == '_' || c == '#') {
            p++;
            continue;
        }
        Py_ssize_t r = 0;
        while (p + r < window && Py_UNICODE_ISDECIMAL(at(t, p + r)))
            r++;
        if (r < 1 || r > 9 || p + r == window)
            break;
        Py_UCS4 d = at(t, p + r);
        if (d != '.' && d != ')')
            break;
        p += r + 1;
    }
    if (p == window)
        return NO_OPENING;
    /* The opening lower-cased once (ASCII case folding only; any other character becomes
     * 0x80, which no phrase holds and which is no [A-Za-z0-9]). */
    unsigned char lead[MAX_PHRASE + 1];
    Py_ssize_t room = window - p, n = room < cfg.longest_phrase + 1 ? room : cfg.longest_phrase + 1;
    if (t->kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *data = (const Py_UCS1 *)t->data + p;
        for (Py_ssize_t q = 0; q < n; q++)
            lead[q] = data[q] < 128 ? (unsigned char)ascii_lower(data[q]) : 0x80;
    }
    else
        for (Py_ssize_t q = 0; q < n; q++) {
            Py_UCS4 c = at(t, p + q);
            lead[q] = c < 128 ? (unsigned char)ascii_lower(c) : 0x80;
        }
    unsigned char first = lead[0];
    if (first >= 128)
        return NO_OPENING;
    /* Each phrase, then "(?![A-Za-z0-9])" (the window's end counts as the text's end); the
     * candidates come in rule order, so the first match is the first rule that fires. */
    for (int k = 0; k < cfg.n_by_first[first]; k++) {
        const Phrase *ph = cfg.by_first[first][k].phrase;
        if (ph->len > room)
            continue;
        Py_ssize_t q = 1;
        while (q < ph->len && lead[q] == (unsigned char)ph->chars[q])
            q++;
        if (q == ph->len && (ph->len == room || !is_ascii_alnum(lead[ph->len])))
            return cfg.by_first[first][k].rule;
    }
    return NO_OPENING;
}

typedef struct {
    Builder *b;
} PoolSink;

static int pool_add(void *ctx, uint64_t h)
{
    Builder *b = ((PoolSink *)ctx)->b;
    int added = set_add(&b->scratch, h);
    if (added <= 0)
        return added;
    if (grow((void **)&b->pool, &b->cap_pool, b->n_pool + 1, sizeof(uint64_t)) < 0)
        return -1;
    b->pool[b->n_pool++] = h;
    return 0;
}

/* Reads a unit's distinct keywords into the pool once. */
static int unit_keywords(Builder *b, Unit *u)
{
    if (u->kw_n >= 0)
        return 0;
    PoolSink sink = {b};
    Py_ssize_t first = b->n_pool;
    set_clear(&b->scratch);
    if (each_keyword(&b->reader, u->start, u->end, pool_add, &sink, HINT_UNIT) < 0)
        return -1;
    u->kw_at = first;
    u->kw_n = b->n_pool - first;
    return 0;
}

/* The open chunk's keywords, brought up to date with its units. */
static int chunk_keywords(Builder *b)
{
    for (; b->keyed < b->n_units; b->keyed++) {
        Unit *u = &b->units[b->keyed];
        if (unit_keywords(b, u) < 0)
            return -1;
        for (Py_ssize_t k = 0; k < u->kw_n; k++)
            if (set_add(&b->keywords, b->pool[u->kw_at + k]) < 0)
                return -1;
    }
    return 0;
}

/* Last non-whitespace character of a unit, or 0. */
static Py_UCS4 last_char(const Text *t, const Unit *u)
{
    for (Py_ssize_t p = u->end; p > u->start; p--)
        if (!sp(t, (p - 1)))
            return at(t, p - 1);
    return 0;
}

/* lexical._merge_reason: a reason index, -1 for none, -2 on error. */
static int merge_reason(Builder *b, Unit *u)
{
    const Text *t = b->reader.t;
    if (u->opening == UNREAD)
        u->opening = opening_rule(t, u);
    if (u->opening != NO_OPENING)
        return u->opening;
    const Unit *previous = &b->units[b->n_units - 1];
    Py_UCS4 tail = last_char(t, previous);
    if (tail == '?')
        return R_QUESTION;
    if (tail == ':' && previous->end - previous->start <= cfg.lead_in_chars)
        return R_DEFINITION;
    if (u->kind == K_PARAGRAPH && u->end - u->start <= cfg.short_chars)
        return R_SHORT;
    if (unit_keywords(b, u) < 0 || chunk_keywords(b) < 0)
        return -2;
    Py_ssize_t shared = 0;
    for (Py_ssize_t k = 0; k < u->kw_n; k++)
        shared += set_contains(&b->keywords, b->pool[u->kw_at + k]);
    if (u->kind == K_LIST && shared >= cfg.list_overlap_min)
        return R_LIST;
    if (shared >= cfg.overlap_min)
        return R_KEYWORD;
    return -1;
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

static PyObject *new_ref(PyObject *o)
{
    Py_INCREF(o);
    return o;
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

/* Keywords (stop words left out) of [s, e), counted. */
static Py_ssize_t count_keywords(const Reader *r, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t found = 0;
    if (!r->whole_words) {
        each_keyword(r, s, e, count_one, &found, HINT_CHUNK); /* count_one cannot fail */
        return found;
    }
    /* Whole words: the runs starting in [s, e), by the running count. */
    Py_ssize_t i = first_run(r, s, HINT_CHUNK), j = first_run(r, e, HINT_CHUNK);
    if (i == j)
        return 0;
    const Run *last = &r->runs[j - 1];
    return last->keywords_before + !last->stop - r->runs[i].keywords_before;
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

/* A float value for the metadata, unless it equals the previous chunk's (then the copied
 * dict already holds an equal float: NULL with *same set). */
static PyObject *changed_float(double value, int known, double last, int *same)
{
    *same = known && memcmp(&value, &last, sizeof value) == 0;
    return *same ? NULL : PyFloat_FromDouble(value);
}

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
    int same_density, same_average;
    PyObject *density_value = changed_float(density, !first, last->density, &same_density);
    PyObject *average_value = changed_float(average, !first, last->average, &same_average);
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
        (!same_density && put(d, M_DENSITY, density_value) < 0) ||
        (!same_average && put(d, M_AVERAGE, average_value) < 0) ||
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

static int close_open(Builder *b)
{
    if (b->n_units == 0)
        return 0;
    int rc = emit(b, b->units, b->n_units, b->reasons, b->n_reasons, cfg.prose_type, -1);
    b->n_units = b->n_reasons = b->keyed = 0;
    set_clear(&b->keywords);
    return rc;
}

static int open_with(Builder *b, const Unit *u)
{
    if (grow((void **)&b->units, &b->cap_units, 1, sizeof(Unit)) < 0)
        return -1;
    b->units[0] = *u;
    b->n_units = 1;
    return 0;
}

/* lexical._Builder._walk */
static int walk(Builder *b, Unit *u)
{
    if (b->n_units) {
        int reason = -1;
        if (u->end - b->units[0].start <= cfg.max_chars)
            reason = merge_reason(b, u);
        if (reason == -2)
            return -1;
        if (reason >= 0 && reason != R_TRANSITION) {
            if (grow((void **)&b->units, &b->cap_units, b->n_units + 1, sizeof(Unit)) < 0 ||
                grow((void **)&b->reasons, &b->cap_reasons, b->n_reasons + 1, sizeof(int)) < 0)
                return -1;
            b->units[b->n_units++] = *u;
            b->reasons[b->n_reasons++] = reason;
            return 0;
        }
        if (close_open(b) < 0)
            return -1;
    }
    return open_with(b, u);
}

static Unit unit_of(int kind, Py_ssize_t start, Py_ssize_t end)
{
    Unit u = {kind, start, end, UNREAD, 0, -1};
    return u;
}

/* The heading stack after a heading of this level: deeper or equal levels leave. */
static int enter_heading(Builder *b, int level, PyObject *title)
{
    while (b->n_headings && b->levels[b->n_headings - 1] >= level)
        Py_DECREF(b->titles[--b->n_headings]);
    Py_ssize_t cap = b->cap_headings;
    if (grow((void **)&b->levels, &cap, b->n_headings + 1, sizeof(int)) < 0 ||
        grow((void **)&b->titles, &b->cap_headings, b->n_headings + 1, sizeof(PyObject *)) < 0)
        return -1;
    b->levels[b->n_headings] = level;
    b->titles[b->n_headings++] = new_ref(title);
    Py_SETREF(b->section_title, new_ref(title));
    b->section_level = level;
    return 0;
}

/* The spans a block is read in: itself, or its capped pieces past the cap. */
static int block_spans(const Text *t, const Block *block, Spans *out)
{
    out->n = 0;
    if (block->end - block->start <= cfg.max_chars)
        return spans_push(out, block->start, block->end);
    return capped(t, block->start, block->end, out);
}

/* lexical._Builder.add */
static int add_block(Builder *b, const Block *block, Spans *spans)
{
    const Text *t = b->reader.t;
    int kind = block->kind;
    if (kind == K_HEADING || cfg.standalone[kind] != NULL) {
        if (close_open(b) < 0)
            return -1;
        if (kind == K_HEADING) {
            PyObject *title = heading_title(t, block->start, block->end);
            if (title == NULL)
                return -1;
            int rc = enter_heading(b, block->level, title);
            Py_DECREF(title);
            if (rc < 0)
                return -1;
        }
        if (block_spans(t, block, spans) < 0)
            return -1;
        for (Py_ssize_t k = 0; k < spans->n; k++) {
            Unit u = unit_of(kind, spans->items[k].start, spans->items[k].end);
            int rc = kind == K_HEADING ? emit(b, &u, 1, NULL, 0, cfg.heading_type, -1)
                                       : emit(b, &u, 1, NULL, 0, cfg.standalone[kind], R_STRUCTURAL);
            if (rc < 0)
                return -1;
        }
        return 0;
    }
    if (block_spans(t, block, spans) < 0)
        return -1;
    for (Py_ssize_t k = 0; k < spans->n; k++) {
        Unit u = unit_of(kind, spans->items[k].start, spans->items[k].end);
        if (walk(b, &u) < 0)
            return -1;
    }
    return 0;
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

/* ---------------------------------------------------------------------------------------
 * The document
 * ------------------------------------------------------------------------------------- */

/* Classes of the characters below 256 (the whole text of most documents). */


/* The first characters of segment.CANDIDATE's alternatives (its _CANDIDATE_FIRST). */
static int starts_candidate(Py_UCS4 c)
{
    return c == '\r' || c == '\n' || c == 0x2028 || c == 0x2029 || is_cjk_stop(c) || is_arabic_stop(c) ||
           is_latin_stop(c);
}

static unsigned char classify(Py_UCS4 c)
{
    unsigned char k = 0;
    if (Py_UNICODE_ISSPACE(c))
        k |= C_SPACE;
    if (is_keyword_char(c))
        k |= c < 128 ? C_KEYWORD : C_KEYWORD | C_WIDE_KEYWORD;
    if (Py_UNICODE_ISLINEBREAK(c))
        k |= C_BREAK;
    if (c >= 128 && needs_reference_char(c))
        k |= C_REFERENCE;
    if (starts_candidate(c))
        k |= C_STOP;
    return k;
}

/* Classes of the Basic Multilingual Plane, filled on first use (0xFF: not yet known);
 * the first 256 at import. */
#define UNKNOWN_CLASS 0xFF
static unsigned char bmp_cls[0x10000];

static inline unsigned char class_of(Py_UCS4 c)
{
    if (c > 0xFFFF)
        return classify(c);
    unsigned char k = bmp_cls[c];
    if (k == UNKNOWN_CLASS)
        k = bmp_cls[c] = classify(c);
    return k;
}

#define CLASSIFY_ALL(TYPE, CLASSIFY)                                                          \
    do {                                                                                      \
        const TYPE *data = t->data;                                                           \
        for (Py_ssize_t p = 0; p < n; p++) {                                                  \
            Py_UCS4 c = data[p];                                                              \
            unsigned char k = CLASSIFY;                                                       \
            cls[p] = k;                                                                       \
            any |= k;                                                                         \
        }                                                                                     \
    } while (0)

/* Records the run [start, end), kept only when it is long enough: written always and
 * counted conditionally, since whether a run is long enough is a coin toss for the
 * branch predictor. */
static inline void end_run(Reader *r, Py_ssize_t start, Py_ssize_t end)
{
    Run *run = &r->runs[r->n_runs];
    run->start = start;
    run->end = end;
    r->n_runs += end - start >= cfg.min_letters;
}

/* Each kept run's hash, stop-word flag and running keyword count. */
static void hash_runs(Reader *r)
{
    Py_ssize_t keywords = 0;
    int narrow = r->t->kind == PyUnicode_1BYTE_KIND;
    for (Py_ssize_t i = 0; i < r->n_runs; i++) {
        Run *run = &r->runs[i];
        run->hash = narrow ? narrow_hash(r->t->data, run->start, run->end) : run_hash(r->t, run->start, run->end);
        run->stop = is_stop_word(run->hash);
        run->keywords_before = keywords;
        keywords += !run->stop;
    }
}

/* Every character's classes into cls (with a space after the last one, so that scans
 * stop there); the union of all classes. */
static unsigned char classify_all(const Text *t, unsigned char *cls)
{
    Py_ssize_t n = t->len;
    unsigned char any = 0;
    if (t->kind == PyUnicode_1BYTE_KIND)
        CLASSIFY_ALL(Py_UCS1, bmp_cls[c]);
    else if (t->kind == PyUnicode_2BYTE_KIND)
        CLASSIFY_ALL(Py_UCS2, class_of(c));
    else
        CLASSIFY_ALL(Py_UCS4, class_of(c));
    return any;
}

/* Bit f of each of the 8 class bytes at cls, packed into 8 bits (byte i to bit i). */
static inline uint64_t pack8(const unsigned char *cls, int f)
{
    uint64_t v;
    memcpy(&v, cls, 8);
    return (((v >> f) & 0x0101010101010101ULL) * 0x0102040810204080ULL) >> 56;
}

/* The class bitmaps of Text, from cls padded with spaces to n_words * 64 bytes. */
static void build_bitmaps(const unsigned char *cls, Py_ssize_t n_words, uint64_t *space, uint64_t *keyword,
                          uint64_t *brk)
{
    for (Py_ssize_t w = 0; w < n_words; w++) {
        uint64_t s = 0, k = 0, b = 0;
        for (int i = 0; i < 8; i++) {
            const unsigned char *at8 = cls + (w << 6) + 8 * i;
            s |= pack8(at8, 0) << (8 * i); /* C_SPACE */
            k |= pack8(at8, 1) << (8 * i); /* C_KEYWORD */
            b |= pack8(at8, 2) << (8 * i); /* C_BREAK */
        }
        space[w] = s;
        keyword[w] = k;
        brk[w] = b;
    }
}

/* Where words start (a space bit drops: the text's start reads as a space) and whether
 * some word may be longer than the cap: only if at least `full` consecutive 64-character
 * words hold no space, since a longer word covers that many of them. */
static int find_word_starts(const Text *t, Py_ssize_t n_words, uint64_t *starts)
{
    Py_ssize_t full = (cfg.max_chars + 1 - 63) / 64, solid = 0;
    int maybe_long = full < 1;
    uint64_t carry = 1;
    for (Py_ssize_t w = 0; w < n_words; w++) {
        uint64_t S = t->space_bits[w];
        starts[w] = ~S & ((S << 1) | carry);
        carry = S >> 63;
        solid = S ? 0 : solid + 1;
        maybe_long |= solid >= full;
    }
    return maybe_long;
}

/* The longest word, exactly (only asked when find_word_starts cannot rule a long one out). */
static Py_ssize_t longest_word(const Text *t)
{
    Py_ssize_t longest = 0, p = 0;
    while (p < t->len) {
        Py_ssize_t word = p;
        while (p < t->len && !sp(t, p))
            p++;
        longest = p - word > longest ? p - word : longest;
        while (p < t->len && sp(t, p))
            p++;
    }
    return longest;
}

/* The keyword runs: each starts where a keyword bit rises and ends at the next clear bit
 * (the padding past the end is clear). */
static void find_runs(Reader *r, Py_ssize_t n_words)
{
    const uint64_t *K = r->t->keyword_bits;
    uint64_t carry = 0;
    for (Py_ssize_t w = 0; w < n_words; w++) {
        uint64_t starts = K[w] & ~((K[w] << 1) | carry);
        carry = K[w] >> 63;
        while (starts) {
            int bit = __builtin_ctzll(starts);
            starts &= starts - 1;
            Py_ssize_t end_word = w;
            uint64_t rest = ~K[w] >> bit;
            int offset = bit;
            while (rest == 0) { /* the run goes on into the next 64 characters */
                end_word++;
                rest = ~K[end_word];
                offset = 0;
            }
            end_run(r, (w << 6) + bit, (end_word << 6) + offset + __builtin_ctzll(rest));
        }
    }
}

/* Reads the document once: every character's classes into cls, its words and keyword
 * runs, whether the reference would take its document pass (whole words). Returns 1 when
 * the document needs the reference (see needs_reference_char), -1 on error. */
static int read_document(Reader *r, unsigned char *cls, uint64_t *bitmaps)
{
    Py_ssize_t n = r->t->len, n_words = n / 64 + 1;
    unsigned char any = classify_all(r->t, cls);
    if (any & C_REFERENCE)
        return 1;
    build_bitmaps(cls, n_words, bitmaps, bitmaps + n_words, bitmaps + 2 * n_words);
    /* Sized once for the most a text can hold: a run per min_letters + 1 characters (and
     * one written past the last kept). */
    if (grow((void **)&r->runs, &r->cap_runs, n / (cfg.min_letters + 1) + 2, sizeof(Run)) < 0)
        return -1;
    int maybe_long = find_word_starts(r->t, n_words, bitmaps + 3 * n_words);
    find_runs(r, n_words);
    hash_runs(r);
    r->whole_words = n > 0 && !(any & C_WIDE_KEYWORD) && (!maybe_long || longest_word(r->t) <= cfg.max_chars);
    return 0;
}

/* Buffers kept from one document to the next, sized for the largest document read so far:
 * fresh buffers for a long document would be mapped and faulted in on every call. Nothing
 * run_document calls runs Python code, so it is not re-entered; `busy` makes sure. */
static struct {
    int busy;
    unsigned char *cls; /* classes and bitmaps */
    Py_ssize_t cap_cls;
    Run *runs;
    Py_ssize_t cap_runs;
} scratch;

static void scratch_free(void)
{
    PyMem_Free(scratch.cls);
    PyMem_Free(scratch.runs);
    memset(&scratch, 0, sizeof scratch);
}

/* Lends the scratch buffers to a reader (when they are free); 1 when lent. */
static int borrow_scratch(Reader *r)
{
    if (scratch.busy)
        return 0;
    scratch.busy = 1;
    r->runs = scratch.runs;
    r->cap_runs = scratch.cap_runs;
    return 1;
}

/* Takes the (possibly grown) buffers back from the reader. */
static void return_scratch(Reader *r)
{
    scratch.runs = r->runs;
    scratch.cap_runs = r->cap_runs;
    r->runs = NULL;
    scratch.busy = 0;
}

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
    if (close_open(&b) < 0)
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
 * The module: configure() once, then chunk() per document
 * ------------------------------------------------------------------------------------- */

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
        Py_CLEAR(cfg.standalone[k]);
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
    PyMem_Free(cfg.abbrev);
    cfg.abbrev = NULL;
    cfg.n_abbrev = 0;
    cfg.ready = 0;
}

/* A str's characters as ASCII lower case (phrases and abbreviations); NULL when not ASCII. */
static char *ascii_lower_copy(PyObject *s, Py_ssize_t *len)
{
    if (!PyUnicode_Check(s) || !PyUnicode_IS_ASCII(s)) {
        PyErr_SetString(PyExc_ValueError, "phrases and abbreviations must be ASCII str");
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
    return 0;
}

static uint64_t word_hash(PyObject *word)
{
    Text t = {PyUnicode_KIND(word), PyUnicode_DATA(word), PyUnicode_GET_LENGTH(word), NULL, NULL, NULL, NULL, NULL};
    return run_hash(&t, 0, t.len);
}

static int read_stop_words(PyObject *words)
{
    PyObject *seq = PySequence_Fast(words, "stop_words must be iterable");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    size_t capacity = 16;
    while (capacity < (size_t)n * 4)
        capacity *= 2;
    cfg.stop = PyMem_Calloc(capacity, sizeof(uint64_t));
    if (cfg.stop == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    cfg.stop_mask = capacity - 1;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *word = PySequence_Fast_GET_ITEM(seq, k);
        if (!PyUnicode_Check(word)) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "stop words must be str");
            return -1;
        }
        uint64_t h = word_hash(word);
        size_t i = (size_t)h & cfg.stop_mask;
        while (cfg.stop[i] && cfg.stop[i] != h)
            i = (i + 1) & cfg.stop_mask;
        cfg.stop[i] = h;
    }
    Py_DECREF(seq);
    return 0;
}

static int read_abbreviations(PyObject *words)
{
    PyObject *seq = PySequence_Fast(words, "abbreviations must be iterable");
    if (seq == NULL)
        return -1;
    int rc = -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    cfg.abbrev = PyMem_Calloc((size_t)(n ? n : 1), sizeof *cfg.abbrev);
    if (cfg.abbrev == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t len;
        char *word = ascii_lower_copy(PySequence_Fast_GET_ITEM(seq, k), &len);
        if (word == NULL)
            goto done;
        if (len >= (Py_ssize_t)sizeof cfg.abbrev[0]) {
            PyMem_Free(word);
            PyErr_SetString(PyExc_ValueError, "abbreviations are at most 15 characters");
            goto done;
        }
        memcpy(cfg.abbrev[k], word, (size_t)len + 1);
        PyMem_Free(word);
        cfg.n_abbrev = k + 1;
    }
    rc = 0;
done:
    Py_DECREF(seq);
    return rc;
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

static int read_labels(PyObject *reasons, PyObject *standalone)
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
    if (!PyDict_Check(standalone)) {
        PyErr_SetString(PyExc_TypeError, "standalone must be a dict");
        return -1;
    }
    for (int k = 0; k < N_KINDS; k++) {
        if ((cfg.kind[k] = PyUnicode_InternFromString(KIND_NAMES[k])) == NULL)
            return -1;
        PyObject *type = PyDict_GetItemWithError(standalone, cfg.kind[k]);
        if (type == NULL && PyErr_Occurred())
            return -1;
        Py_XINCREF(type);
        cfg.standalone[k] = type;
    }
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
        "chunk_type", "strategy", "reasons", "openings", "standalone", "heading_type", "prose_type",
        "stop_words", "abbreviations", "max_chars", "short_paragraph_chars", "lead_in_max_chars",
        "keyword_min_letters", "keyword_overlap_min", "list_keyword_overlap_min", "lead_window", NULL,
    };
    PyObject *chunk_type, *strategy, *reasons, *openings, *standalone, *heading_type, *prose_type;
    PyObject *stop_words, *abbreviations;
    Py_ssize_t limits[7];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "$OUOOOUUOOnnnnnnn", names, &chunk_type, &strategy, &reasons,
                                     &openings, &standalone, &heading_type, &prose_type, &stop_words,
                                     &abbreviations, &limits[0], &limits[1], &limits[2], &limits[3], &limits[4],
                                     &limits[5], &limits[6]))
        return NULL;
    for (int k = 0; k < 7; k++)
        if (limits[k] < 1) {
            PyErr_SetString(PyExc_ValueError, "limits must be positive");
            return NULL;
        }
    config_clear();
    cfg.chunk_type = new_ref(chunk_type);
    cfg.strategy = new_ref(strategy);
    cfg.heading_type = new_ref(heading_type);
    cfg.prose_type = new_ref(prose_type);
    cfg.max_chars = limits[0];
    cfg.short_chars = limits[1];
    cfg.lead_in_chars = limits[2];
    cfg.min_letters = limits[3];
    cfg.overlap_min = limits[4];
    cfg.list_overlap_min = limits[5];
    cfg.lead_window = limits[6];
    if ((cfg.empty = PyUnicode_FromString("")) == NULL || read_labels(reasons, standalone) < 0 ||
        read_phrases(openings) < 0 || index_phrases() < 0 || read_stop_words(stop_words) < 0 || read_abbreviations(abbreviations) < 0) {
        config_clear();
        return NULL;
    }
    cfg.ready = 1;
    Py_RETURN_NONE;
}

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
    for (int k = 0; k < 3; k++)
        if (!PyUnicode_Check(args[k])) {
            PyErr_SetString(PyExc_TypeError, "text, doc_id and source must be str");
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
     "Set the word lists, limits and labels (once, from worker.chunking.lexical)."},
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
    PyModuleDef_HEAD_INIT, "worker.chunking._lexical_core",
    "The lexical strategy's per-document pipeline in C (reference: worker/chunking/lexical.py).",
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
