/* Part of _lexical_core.c (see there): growable arrays, spans of the text and their
 * stripping (segment._strip). */
#ifndef LEXICAL_SPANS_H
#define LEXICAL_SPANS_H

#include "_lexical_text.h"

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

#endif /* LEXICAL_SPANS_H */
