/* Part of _lexical_core.c (see there): the merge ladder (lexical._Builder.add, _walk and
 * _merge_reason): which rule joins a unit to the open chunk, and the heading stack. */
#ifndef LEXICAL_LADDER_H
#define LEXICAL_LADDER_H

#include "_lexical_assembly.h"
#include "_lexical_markdown.h"
#include "_lexical_segment.h"

/* The prefix rule (transition break included) of the longest phrase a unit's opening holds: its list and
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
     * candidates come longest first, ties in rule order, so the first match decides. */
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

/* lexical._Builder._flush_pending: a waiting thematic break stands alone. */
static int flush_pending(Builder *b)
{
    if (!b->has_pending)
        return 0;
    b->has_pending = 0;
    return emit(b, &b->pending, 1, NULL, 0, cfg.standalone[K_THEMATIC], R_STRUCTURAL);
}

/* lexical._Builder._after_pending: into units[0..*n) the unit, after the waiting thematic
 * break when both fit the cap (then *n_reasons = 1, R_STRUCTURAL in reasons[0]). */
static int after_pending(Builder *b, const Unit *u, Unit units[2], Py_ssize_t *n, int *reasons,
                         Py_ssize_t *n_reasons)
{
    *n_reasons = 0;
    *n = 1;
    units[0] = *u;
    if (!b->has_pending)
        return 0;
    if (u->end - b->pending.start <= cfg.max_chars) {
        b->has_pending = 0;
        units[0] = b->pending;
        units[1] = *u;
        *n = 2;
        reasons[0] = R_STRUCTURAL;
        *n_reasons = 1;
        return 0;
    }
    return flush_pending(b);
}

/* lexical._Builder._thematic_break */
static int thematic_break(Builder *b, const Unit *u)
{
    if (b->n_units && u->end - b->units[0].start <= cfg.max_chars) {
        if (grow((void **)&b->units, &b->cap_units, b->n_units + 1, sizeof(Unit)) < 0 ||
            grow((void **)&b->reasons, &b->cap_reasons, b->n_reasons + 1, sizeof(int)) < 0)
            return -1;
        b->units[b->n_units++] = *u;
        b->reasons[b->n_reasons++] = R_STRUCTURAL;
        return close_open(b);
    }
    if (close_open(b) < 0 || flush_pending(b) < 0)
        return -1;
    b->pending = *u;
    b->has_pending = 1;
    return 0;
}

/* lexical._Builder.finish */
static int finish(Builder *b)
{
    if (close_open(b) < 0)
        return -1;
    return flush_pending(b);
}

/* lexical._Builder._walk */
static int walk(Builder *b, Unit *u)
{
    if (!b->n_units && b->has_pending) {
        Unit units[2];
        int reasons[1];
        Py_ssize_t n, n_reasons;
        if (after_pending(b, u, units, &n, reasons, &n_reasons) < 0)
            return -1;
        if (grow((void **)&b->units, &b->cap_units, n, sizeof(Unit)) < 0 ||
            grow((void **)&b->reasons, &b->cap_reasons, 1, sizeof(int)) < 0)
            return -1;
        for (Py_ssize_t k = 0; k < n; k++)
            b->units[k] = units[k];
        b->n_units = n;
        if (n_reasons)
            b->reasons[0] = reasons[0];
        b->n_reasons = n_reasons;
        return 0;
    }
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
    int prose = block->kind == K_PARAGRAPH || block->kind == K_LIST || block->kind == K_QUOTE;
    return capped(t, block->start, block->end, prose, out);
}

/* lexical._Builder.add */
static int add_block(Builder *b, const Block *block, Spans *spans)
{
    const Text *t = b->reader.t;
    int kind = block->kind;
    if (kind == K_THEMATIC) {
        Unit u = unit_of(kind, block->start, block->end);
        return thematic_break(b, &u);
    }
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
            Unit units[2];
            int reasons[1];
            Py_ssize_t n, n_reasons;
            if (after_pending(b, &u, units, &n, reasons, &n_reasons) < 0)
                return -1;
            int rc = kind == K_HEADING ? emit(b, units, n, reasons, n_reasons, cfg.heading_type, -1)
                                       : emit(b, units, n, reasons, n_reasons, cfg.standalone[kind], R_STRUCTURAL);
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

#endif /* LEXICAL_LADDER_H */
