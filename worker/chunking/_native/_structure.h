/* worker/chunking/text/structure.py in C: the document's lines, its blocks and the level of
 * the gap between two blocks. structure.py is the reference; every function here is named
 * after the one it restates. Include after _sentence_rules.h (SentenceText, sentence_read,
 * is_space). */
#ifndef CHUNKSTREAM_STRUCTURE_H
#define CHUNKSTREAM_STRUCTURE_H

#include <string.h>

/* Gap levels and block kinds: structure.SECTION ... CHAR (CLAUSE between WORD and LINE), structure.PARAGRAPH ... HTML. */
enum { L_FORCED = -1, L_CHAR = 0, L_WORD, L_CLAUSE, L_LINE, L_GLUE, L_SENTENCE, L_ITEM, L_BLOCK, L_SECTION };
enum { B_PARAGRAPH, B_HEADING, B_RULE, B_CODE, B_TABLE, B_ITEM, B_QUOTE, B_HTML };

/* A growable array of T: items, count, capacity. */
#define ARRAY(T) struct { T *items; Py_ssize_t count, capacity; }

static int array_reserve(void **items, Py_ssize_t *capacity, Py_ssize_t need, size_t size) {
    if (need <= *capacity) return 0;
    Py_ssize_t grown = *capacity ? *capacity : 64;
    while (grown < need) grown *= 2;
    void *bigger = PyMem_Realloc(*items, (size_t)grown * size);
    if (bigger == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *items = bigger;
    *capacity = grown;
    return 0;
}

#define ARRAY_PUSH(a, value)                                                                      \
    (array_reserve((void **)&(a).items, &(a).capacity, (a).count + 1, sizeof(*(a).items)) < 0      \
         ? -1                                                                                      \
         : ((a).items[(a).count++] = (value), 0))

/* structure.Lines: lines end at '\n' (excluded); there is always at least one. Each line's
 * head (first position after spaces and tabs) and blankness are found in the one pass that
 * finds the lines (Lines.head and Lines.blank, asked many times per line). */
typedef struct {
    const SentenceText *t;
    Py_ssize_t *starts, *ends, *heads;
    char *blanks;
    Py_ssize_t count;
} Lines;

/* Where the next '\n' at or after p is, or n. */
static Py_ssize_t next_newline(const SentenceText *t, Py_ssize_t p) {
    Py_ssize_t n = t->size;
    if (t->kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *data = t->data;
        const void *found = p < n ? memchr(data + p, '\n', (size_t)(n - p)) : NULL;
        return found == NULL ? n : (const Py_UCS1 *)found - data;
    }
    while (p < n && sentence_read(t, p) != '\n') p++;
    return p;
}

static int lines_read(const SentenceText *t, Lines *l) {
    Py_ssize_t n = t->size, capacity = 0, k = 0, p = 0;
    l->t = t;
    for (;;) {
        if (k == capacity) {
            Py_ssize_t c1 = capacity, c2 = capacity, c3 = capacity;
            if (array_reserve((void **)&l->starts, &c1, k + 1, sizeof(Py_ssize_t)) < 0 ||
                array_reserve((void **)&l->ends, &c2, k + 1, sizeof(Py_ssize_t)) < 0 ||
                array_reserve((void **)&l->heads, &c3, k + 1, sizeof(Py_ssize_t)) < 0 ||
                array_reserve((void **)&l->blanks, &capacity, k + 1, 1) < 0)
                return -1;
        }
        l->starts[k] = p;
        while (p < n && (sentence_read(t, p) == ' ' || sentence_read(t, p) == '\t')) p++;
        l->heads[k] = p;
        /* Blank: only whitespace before the line's end; nearly every line shows its first
         * character is not, and the rest of it is skipped to the next '\n'. */
        int blank = 1;
        while (p < n) {
            Py_UCS4 c = sentence_read(t, p);
            if (c == '\n') break;
            if (!is_space(c)) {
                blank = 0;
                p = next_newline(t, p);
                break;
            }
            p++;
        }
        l->ends[k] = p;
        l->blanks[k] = (char)blank;
        k++;
        if (p >= n) break;
        p++;
    }
    l->count = k;
    return 0;
}

static void lines_free(Lines *l) {
    PyMem_Free(l->starts);
    PyMem_Free(l->ends);
    PyMem_Free(l->heads);
    PyMem_Free(l->blanks);
}

static inline Py_UCS4 line_char(const Lines *l, Py_ssize_t p) { return sentence_read(l->t, p); }

static inline Py_ssize_t line_head(const Lines *l, Py_ssize_t i) { return l->heads[i]; }

static inline int line_blank(const Lines *l, Py_ssize_t i) { return l->blanks[i]; }

static inline Py_ssize_t line_indent(const Lines *l, Py_ssize_t i) { return l->heads[i] - l->starts[i]; }

static int line_has(const Lines *l, Py_ssize_t i, Py_UCS4 c) {
    if (l->t->kind == PyUnicode_1BYTE_KIND)
        return c < 256 && memchr((const Py_UCS1 *)l->t->data + l->starts[i], (int)c,
                                 (size_t)(l->ends[i] - l->starts[i])) != NULL;
    for (Py_ssize_t p = l->starts[i]; p < l->ends[i]; p++)
        if (line_char(l, p) == c) return 1;
    return 0;
}

/* text.startswith(three times c, p), read below the text's end. */
static int three(const Lines *l, Py_ssize_t p, Py_UCS4 c) {
    return p + 3 <= l->t->size && line_char(l, p) == c && line_char(l, p + 1) == c && line_char(l, p + 2) == c;
}

static int is_fence(const Lines *l, Py_ssize_t i) {
    Py_ssize_t p = line_head(l, i);
    return three(l, p, '`') || three(l, p, '~');
}

static int is_rule(const Lines *l, Py_ssize_t i) {
    Py_ssize_t p = line_head(l, i), end = l->ends[i];
    if (p - l->starts[i] > 3 || p >= end) return 0;
    Py_UCS4 mark = line_char(l, p);
    if (!(mark < 128 && mark && strchr("=-~^*+#_", (int)mark))) return 0;
    Py_ssize_t count = 0;
    for (Py_ssize_t q = p; q < end; q++) {
        Py_UCS4 c = line_char(l, q);
        if (c == mark) count++;
        else if (c != ' ' && c != '\t' && c != '\r') return 0;
    }
    return count >= 3;
}

static int ends_marker(const Lines *l, Py_ssize_t after, Py_ssize_t end) {
    if (after == end) return 1;
    Py_UCS4 c = line_char(l, after);
    return c == ' ' || c == '\t' || c == '\r';
}

static int is_heading(const Lines *l, Py_ssize_t i) {
    Py_ssize_t p = line_head(l, i), end = l->ends[i], marks = 0;
    if (p - l->starts[i] > 3) return 0;
    while (p + marks < end && line_char(l, p + marks) == '#') marks++;
    return marks >= 1 && marks <= 6 && ends_marker(l, p + marks, end);
}

static int is_item(const Lines *l, Py_ssize_t i) {
    Py_ssize_t p = line_head(l, i), end = l->ends[i], after;
    if (p - l->starts[i] > 3 || p >= end) return 0;
    Py_UCS4 c = line_char(l, p);
    if (c == '-' || c == '*' || c == '+') {
        after = p + 1;
    } else {
        Py_ssize_t digits = p;
        while (digits < end && digits - p < 10 && line_char(l, digits) >= '0' && line_char(l, digits) <= '9') digits++;
        if (digits - p < 1 || digits - p > 9 || digits >= end) return 0;
        Py_UCS4 mark = line_char(l, digits);
        if (mark != '.' && mark != ')') return 0;
        after = digits + 1;
    }
    return ends_marker(l, after, end);
}

static int is_table_row(const Lines *l, Py_ssize_t i) {
    Py_ssize_t p = line_head(l, i);
    return p < l->ends[i] && line_char(l, p) == '|';
}

static int is_delimiter_row(const Lines *l, Py_ssize_t i) {
    int bar = 0, dash = 0;
    for (Py_ssize_t p = l->starts[i]; p < l->ends[i]; p++) {
        Py_UCS4 c = line_char(l, p);
        bar |= c == '|';
        dash |= c == '-';
        if (c != '|' && c != ':' && c != '-' && c != ' ' && c != '\t' && c != '\r') return 0;
    }
    return bar && dash;
}

static int is_table_start(const Lines *l, Py_ssize_t i) {
    if (is_table_row(l, i)) return 1;
    return line_has(l, i, '|') && i + 1 < l->count && is_delimiter_row(l, i + 1);
}

static int is_quote(const Lines *l, Py_ssize_t i) {
    Py_ssize_t p = line_head(l, i);
    return p - l->starts[i] <= 3 && p < l->ends[i] && line_char(l, p) == '>';
}

static int is_html(const Lines *l, Py_ssize_t i) {
    Py_ssize_t p = line_head(l, i);
    if (p - l->starts[i] > 3 || p + 1 >= l->ends[i] || line_char(l, p) != '<') return 0;
    Py_UCS4 c = line_char(l, p + 1);
    return c == '/' || c == '!' || c == '?' || is_ascii_letter(c);
}

/* structure._opens_block. Every test but the table's needs one of a few characters at the
 * line's head; ordinary prose lines are told by that character and the absence of '|'. */
static int opens_block_line(const Lines *l, Py_ssize_t i) {
    Py_ssize_t head = line_head(l, i);
    Py_UCS4 c = head < l->ends[i] ? line_char(l, head) : 0;
    if (!(c < 128 && c && strchr("`~#=-^*+_><0123456789|", (int)c))) return line_has(l, i, '|') && is_table_start(l, i);
    return is_fence(l, i) || is_heading(l, i) || is_rule(l, i) || is_item(l, i) || is_quote(l, i) ||
           is_html(l, i) || is_table_start(l, i);
}

static Py_ssize_t fence_end(const Lines *l, Py_ssize_t i) {
    Py_ssize_t j = i + 1;
    while (j < l->count && !is_fence(l, j)) j++;
    return j + 1 < l->count ? j + 1 : l->count;
}

static Py_ssize_t next_filled(const Lines *l, Py_ssize_t j) {
    while (j < l->count && line_blank(l, j)) j++;
    return j;
}

static Py_ssize_t item_end(const Lines *l, Py_ssize_t i) {
    Py_ssize_t own = line_indent(l, i), j = i + 1;
    while (j < l->count) {
        if (line_blank(l, j)) {
            Py_ssize_t k = next_filled(l, j);
            if (k < l->count && line_indent(l, k) > own) {
                j = k;
                continue;
            }
            return j;
        }
        if (line_indent(l, j) > own) {
            j = is_fence(l, j) ? fence_end(l, j) : j + 1;
            continue;
        }
        if (opens_block_line(l, j)) return j;
        j++;
    }
    return j;
}

/* structure._block_end: the kind of the block on non-blank line i; *after: the line after. */
static int block_end(const Lines *l, Py_ssize_t i, Py_ssize_t *after) {
    Py_ssize_t j;
    if (is_fence(l, i)) {
        *after = fence_end(l, i);
        return B_CODE;
    }
    if (line_indent(l, i) >= 4) {
        Py_ssize_t end = i + 1;
        j = i + 1;
        while (j < l->count && (line_blank(l, j) || line_indent(l, j) >= 4)) {
            j++;
            if (!line_blank(l, j - 1)) end = j;
        }
        *after = end;
        return B_CODE;
    }
    if (is_heading(l, i)) {
        *after = i + 1;
        return B_HEADING;
    }
    if (is_rule(l, i)) {
        *after = i + 1;
        return B_RULE;
    }
    if (is_table_start(l, i)) {
        j = i + 1;
        while (j < l->count && !line_blank(l, j) && line_has(l, j, '|')) j++;
        *after = j;
        return B_TABLE;
    }
    if (is_item(l, i)) {
        *after = item_end(l, i);
        return B_ITEM;
    }
    if (is_quote(l, i) || is_html(l, i)) {
        int kind = is_quote(l, i) ? B_QUOTE : B_HTML;
        j = i + 1;
        while (j < l->count && !line_blank(l, j)) j++;
        *after = j;
        return kind;
    }
    j = i + 1;
    while (j < l->count && !line_blank(l, j)) {
        if (is_rule(l, j)) {
            *after = j + 1;
            return B_HEADING;
        }
        if (opens_block_line(l, j) || line_indent(l, j) > line_indent(l, j - 1)) break;
        j++;
    }
    *after = j;
    return B_PARAGRAPH;
}

typedef struct {
    int kind;
    Py_ssize_t start, end;
} BlockSpan;

typedef ARRAY(BlockSpan) BlockSpans;

/* structure.read_blocks */
static int read_blocks(const SentenceText *t, BlockSpans *blocks) {
    Lines l;
    memset(&l, 0, sizeof l);
    if (lines_read(t, &l) < 0) {
        lines_free(&l);
        return -1;
    }
    Py_ssize_t i = 0;
    int failed = 0;
    while (i < l.count) {
        if (line_blank(&l, i)) {
            i++;
            continue;
        }
        Py_ssize_t after;
        int kind = block_end(&l, i, &after);
        Py_ssize_t start = l.starts[i], end = l.ends[after - 1];
        while (is_space(sentence_read(t, start))) start++;
        while (is_space(sentence_read(t, end - 1))) end--;
        BlockSpan block = {kind, start, end};
        if (ARRAY_PUSH(*blocks, block) < 0) {
            failed = 1;
            break;
        }
        i = after;
    }
    lines_free(&l);
    return failed ? -1 : 0;
}

/* structure.gap_level */
static int gap_level(const SentenceText *t, const BlockSpan *previous, const BlockSpan *following) {
    if (previous->kind == B_HEADING || previous->kind == B_RULE || sentence_read(t, previous->end - 1) == ':')
        return L_GLUE;
    if (following->kind == B_HEADING || following->kind == B_RULE) return L_SECTION;
    if (previous->kind == B_ITEM && following->kind == B_ITEM) return L_ITEM;
    return L_BLOCK;
}

#endif /* CHUNKSTREAM_STRUCTURE_H */
