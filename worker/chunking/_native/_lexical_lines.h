/* Part of _lexical_core.c (see there): markdown's lines (markdown._Lines) and the per-line
 * recognisers, each a port of one pattern of worker/chunking/text/markdown.py. */
#ifndef LEXICAL_LINES_H
#define LEXICAL_LINES_H

#include "_lexical_spans.h"

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
    Py_ssize_t p = skip_blanks(t, s, e);
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
    p = skip_blanks(t, p, e);
    return p == e ? (c == '=' ? 1 : 2) : 0;
}

/* _BULLET: "[ \t]*(?:[-+*]|(\d{1,9})[.)])(?:[ \t]|$)". *numbered: 0 for a bullet, 1 for an
 * ordered item numbered "1", 2 for any other number. */
static int bullet_at(const Text *t, Py_ssize_t s, Py_ssize_t e, int *numbered)
{
    Py_ssize_t p = skip_blanks(t, s, e);
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
    p = skip_blanks(t, p, e);
    return p;
}

/* _TABLE_DELIMITER:
 * " {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$" */
static int is_table_delimiter(const Text *t, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t p = skip_blanks(t, s, e);
    if (p < e && at(t, p) == '|') {
        /* The leading pipe may only follow " {0,3}" (no tabs). */
        for (Py_ssize_t q = s; q < p; q++)
            if (at(t, q) != ' ')
                return 0;
        if (p - s > 3)
            return 0;
        p++;
        p = skip_blanks(t, p, e);
    }
    p = table_cell(t, p, e);
    if (p < 0)
        return 0;
    while (p < e) {
        if (at(t, p) != '|')
            return 0;
        p++;
        p = skip_blanks(t, p, e);
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

#endif /* LEXICAL_LINES_H */
