/* segment.split_sentences(text, soft_wraps=True) in C: the sentences of a paragraph as the
 * embedding strategies' layout reads them (worker/chunking/semantic/layout.py, `_paragraph`).
 *
 * Why: with the static model's rows in C, the layout's Python segmentation was the largest
 * part of `semantic`'s and `sdpm`'s time left (docs/benchmarks.md). The sentence core's own paragraph sentences (units.h) cannot serve it: they read every
 * line break inside a paragraph as a space, while the layout keeps the hard ones.
 *
 * The definition is segment.split_sentences; this restates its candidate scan (CANDIDATE's
 * alternatives and their leading characters, from _sentence_rules.h and units.h), its fence
 * lines (segment.fence_lines: a line, after '\n' or at the start, whose first characters but
 * spaces and tabs are ``` or ~~~), soft_line_break, false_stop_at and _strip, on the text
 * [start, end) as if it were the whole string. tests/semantic/test_layout_sentences.py holds
 * the two equal on generated and real text. */
#ifndef CHUNKSTREAM_LAYOUT_SENTENCES_H
#define CHUNKSTREAM_LAYOUT_SENTENCES_H

#include "_sentence_rules.h"
#include "_units.h"

/* Line starts of fence lines in `t`, in order. 0, or -1 with an exception set. */
static int fence_lines(const SentenceText *t, Positions *out) {
    for (Py_ssize_t line = 0; line < t->size;) {
        Py_ssize_t p = line;
        while (p < t->size && (sentence_read(t, p) == ' ' || sentence_read(t, p) == '\t')) p++;
        if (p + 3 <= t->size) {
            Py_UCS4 c = sentence_read(t, p);
            if ((c == '`' || c == '~') && sentence_read(t, p + 1) == c && sentence_read(t, p + 2) == c &&
                ARRAY_PUSH(*out, line) < 0)
                return -1;
        }
        while (p < t->size && sentence_read(t, p) != '\n') p++;
        line = p + 1;
    }
    return 0;
}

/* Appends [a, b) without surrounding whitespace (nothing when it is all space), shifted. */
static int push_stripped(const SentenceText *t, Positions *out, Py_ssize_t a, Py_ssize_t b, Py_ssize_t shift) {
    while (a < b && is_space(sentence_read(t, a))) a++;
    while (b > a && is_space(sentence_read(t, b - 1))) b--;
    if (a == b) return 0;
    return ARRAY_PUSH(*out, a + shift) < 0 || ARRAY_PUSH(*out, b + shift) < 0 ? -1 : 0;
}

/* The sentences of `t` (the text being split, offsets from 0) as flat [start, end) pairs
 * shifted by `shift`; `clauses`: the Arabic comma ends a piece too. 0, or -1 with an exception. */
static int layout_sentences(const SentenceText *t, int clauses, const Abbreviations *abbreviations, Py_ssize_t shift,
                            Positions *out) {
    Positions fences = {0};
    if (fence_lines(t, &fences) < 0) return -1;
    Py_ssize_t n = t->size, begin = 0, fence = 0, i = 0;
    int result = -1;
    while (i < n) {
        Py_UCS4 c = sentence_read(t, i);
        Py_ssize_t match_end, end;
        if (is_line_break(c)) {
            match_end = c == '\r' && i + 1 < n && sentence_read(t, i + 1) == '\n' ? i + 2 : i + 1;
            while (fence < fences.count && fences.items[fence] <= i) fence++;
            if (soft_line_break(t, 0, i, -1, fence % 2 == 1)) {
                i = match_end;
                continue;
            }
            end = i;
        } else if (is_cjk_stop(c)) {
            Py_ssize_t j = i;
            while (j < n && is_cjk_stop(sentence_read(t, j))) j++;
            while (j < n && is_cjk_closer(sentence_read(t, j))) j++;
            end = match_end = j;
        } else if (is_arabic_stop(c)) {
            Py_ssize_t j = i;
            while (j < n && is_arabic_stop(sentence_read(t, j))) j++;
            end = match_end = j;
        } else if (is_latin_stop(c)) {
            Py_ssize_t j = i;
            while (j < n && is_latin_stop(sentence_read(t, j))) j++;
            Py_ssize_t mark_end = j;
            while (j < n && is_latin_closer(sentence_read(t, j))) j++;
            if (j < n && !is_space(sentence_read(t, j))) { /* (?=\s|\Z) fails at every start in the run */
                i = mark_end;
                continue;
            }
            if (false_stop_at(t, 0, i, mark_end, j, begin, abbreviations)) {
                i = j;
                continue;
            }
            end = match_end = j;
        } else if (clauses && c == 0x060C) {
            end = match_end = i + 1;
        } else {
            i = clauses ? i + 1 : next_candidate(t, i + 1, n); /* units.h: the same first characters */
            continue;
        }
        if (push_stripped(t, out, begin, end, shift) < 0) goto done;
        begin = i = match_end;
    }
    result = push_stripped(t, out, begin, n, shift);
done:
    PyMem_Free(fences.items);
    return result;
}

#endif /* CHUNKSTREAM_LAYOUT_SENTENCES_H */
