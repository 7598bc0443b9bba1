/* Part of _lexical_core.c (see there): growable arrays. */
#ifndef LEXICAL_SPANS_H
#define LEXICAL_SPANS_H

#include "_lexical_text.h"

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

#endif /* LEXICAL_SPANS_H */
