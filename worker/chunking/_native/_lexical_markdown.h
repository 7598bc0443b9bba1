/* Part of _lexical_core.c (see there): markdown blocks (markdown.split_blocks and its
 * helpers) and heading titles (markdown.heading_text), over the lines of _lexical_lines.h. */
#ifndef LEXICAL_MARKDOWN_H
#define LEXICAL_MARKDOWN_H

#include "_lexical_config.h"
#include "_lexical_lines.h"

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
        p = skip_blanks(t, p, e);
        Py_ssize_t r = 0;
        while (p + r < e && at(t, p + r) == mark)
            r++;
        if (r < size)
            continue;
        p += r;
        p = skip_blanks(t, p, e);
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
    if (lines_read(t, &d.l) < 0) {
        lines_free(&d.l); /* what was grown before the failure (lines_read zeroes first) */
        return -1;
    }
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
    p = skip_blanks(t, p, e);
    Py_ssize_t hashes = 0;
    while (p + hashes < e && hashes < 6 && at(t, p + hashes) == '#')
        hashes++;
    if (hashes) {
        p += hashes;
        p = skip_blanks(t, p, e);
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

#endif /* LEXICAL_MARKDOWN_H */
