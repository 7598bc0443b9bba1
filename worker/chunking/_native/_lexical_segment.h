/* Part of _lexical_core.c (see there): the port of worker/chunking/text/segment.py that the
 * strategy uses with a character counter: plain-text paragraphs, sentences (the exceptions
 * come from _sentence_rules.h, shared with the adaptive core) and the capping of an
 * over-long block to sentences, then words, then characters (lexical._capped). */
#ifndef LEXICAL_SEGMENT_H
#define LEXICAL_SEGMENT_H

#include "_lexical_config.h"
#include "_lexical_spans.h"

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
 * Over-long blocks: sentences, then words, then characters (lexical._capped)
 * ------------------------------------------------------------------------------------- */

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
    if (is_line_break(c)) {
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

/* Whether the line starting at `line` (below limit) is a code-fence line: ``` or ~~~ after
 * spaces and tabs (segment.fence_lines). */
static int fence_line_at(const Text *t, Py_ssize_t line, Py_ssize_t limit)
{
    while (line < limit && (at(t, line) == ' ' || at(t, line) == '\t'))
        line++;
    if (line + 3 > limit)
        return 0;
    Py_UCS4 c = at(t, line);
    return (c == '`' || c == '~') && at(t, line + 1) == c && at(t, line + 2) == c;
}

/* segment.split_sentences(text[base:limit], soft_wraps=soft_wraps), spans in document
 * offsets. With soft_wraps, the parity of the fence lines met so far says whether a line
 * break is in code (fence lines start after a '\n', or at base). */
static int split_sentences(const Text *t, Py_ssize_t base, Py_ssize_t limit, int soft_wraps, Spans *out)
{
    const SentenceText view = {t->kind, t->data, limit};
    Py_ssize_t start = base, p = base;
    int in_code = soft_wraps && base < limit && fence_line_at(t, base, limit);
    while (p < limit) {
        Py_ssize_t end, mark_end;
        int line;
        if (!(t->cls[p] & C_STOP) || !candidate_at(t, p, limit, &end, &line, &mark_end)) {
            p++;
            continue;
        }
        if (line && soft_wraps) {
            int soft = soft_line_break(&view, base, p, -1, in_code);
            if (at(t, end - 1) == '\n' && end < limit && fence_line_at(t, end, limit))
                in_code = !in_code;
            if (soft) {
                p = end;
                continue;
            }
        }
        if (mark_end >= 0 && false_stop_at(&view, base, p, mark_end, end, start, &cfg.abbreviations)) {
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

/* lexical._capped for a block longer than the cap; soft_wraps for prose blocks
 * (lexical._PROSE_KINDS). */
static int capped(const Text *t, Py_ssize_t start, Py_ssize_t end, int soft_wraps, Spans *out)
{
    Spans sentences = {0}, pieces = {0};
    int rc = -1;
    if (split_sentences(t, start, end, soft_wraps, &sentences) < 0)
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

#endif /* LEXICAL_SEGMENT_H */
