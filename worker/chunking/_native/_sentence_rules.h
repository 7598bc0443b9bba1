/* The sentence-end rules of worker/chunking/text/segment.py, stated once for both compiled cores
 * (_adaptive_core.c and _lexical_core.c): the character classes of segment.CANDIDATE, the
 * exceptions of segment.false_stop_at and the abbreviation table they consult.
 *
 * segment.py is the reference. Everything here is `static inline` over a small view of a
 * str as CPython stores it (SentenceText), so each core inlines the rules into its own
 * loops and keeps its own text struct. The abbreviations are handed over by each core's
 * configure() (from segment.ABBREVIATIONS) and read by abbreviations_read.
 *
 * The terminator and closer sets below (is_line_break, is_latin_stop, is_latin_closer,
 * is_cjk_stop, is_cjk_closer, is_arabic_stop) are worker/chunking/text/terminators.py's, the
 * one place they are stated; tests/chunking/test_terminators.py reads this file and fails when
 * a set here differs from that module.
 *
 * Include after <Python.h> (with PY_SSIZE_T_CLEAN).
 */
#ifndef CHUNKSTREAM_SENTENCE_RULES_H
#define CHUNKSTREAM_SENTENCE_RULES_H

#include <stdint.h>
#include <string.h>

/* A str's code points: kind and data as PyUnicode_KIND/PyUnicode_DATA give them. The rules
 * read only below `size` (the end of the text, or of the part of it being split). */
typedef struct {
    int kind;
    const void *data;
    Py_ssize_t size;
} SentenceText;

static inline Py_UCS4 sentence_read(const SentenceText *t, Py_ssize_t i) { return PyUnicode_READ(t->kind, t->data, i); }

/* ---------------------------------------------------------------------------------------
 * Characters (segment.CANDIDATE's alternatives and segment._OPENERS)
 * ------------------------------------------------------------------------------------- */

/* str.isspace / regex \s */
static inline int is_space(Py_UCS4 c) { return Py_UNICODE_ISSPACE(c); }

static inline int is_ascii_letter(Py_UCS4 c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }

/* The (?P<line>...) alternative: \r (with an optional \n), \n, U+2028, U+2029. */
static inline int is_line_break(Py_UCS4 c) { return c == '\r' || c == '\n' || c == 0x2028 || c == 0x2029; }

/* Latin terminators . ! ? … (a sentence end only when whitespace or the end follows). */
static inline int is_latin_stop(Py_UCS4 c) { return c == '.' || c == '!' || c == '?' || c == 0x2026; }

/* What may close a Latin sentence after its terminators: ” ’ " ' » ) ] */
static inline int is_latin_closer(Py_UCS4 c)
{
    return c == 0x201D || c == 0x2019 || c == '"' || c == '\'' || c == 0xBB || c == ')' || c == ']';
}

/* CJK terminators 。！？ (a sentence end with or without a following space). */
static inline int is_cjk_stop(Py_UCS4 c) { return c == 0x3002 || c == 0xFF01 || c == 0xFF1F; }

/* What may close a CJK sentence: 」 』 ” ’ " ' ） ) ] */
static inline int is_cjk_closer(Py_UCS4 c)
{
    return c == 0x300D || c == 0x300F || c == 0x201D || c == 0x2019 || c == '"' || c == '\'' || c == 0xFF09 ||
           c == ')' || c == ']';
}

/* Arabic terminators ؟ ۔ ؛ */
static inline int is_arabic_stop(Py_UCS4 c) { return c == 0x061F || c == 0x06D4 || c == 0x061B; }

/* segment._OPENERS: stripped from the front of the word before a period. */
static inline int is_opener(Py_UCS4 c)
{
    return c == '(' || c == '[' || c == '{' || c == '"' || c == '\'' || c == 0x201C || c == 0x2018 || c == 0xAB;
}

/* ---------------------------------------------------------------------------------------
 * Abbreviations (segment.ABBREVIATIONS)
 * ------------------------------------------------------------------------------------- */

#define ABBREVIATION_MAX 15 /* characters; longer words are never looked up */

typedef struct {
    Py_ssize_t length;
    char text[ABBREVIATION_MAX + 1]; /* lower-case ASCII */
} Abbreviation;

typedef struct {
    Abbreviation *items;
    Py_ssize_t count;
    Py_ssize_t longest;     /* the longest abbreviation's length: longer words are not looked up */
    uint32_t first_letters; /* bit c - 'a' for each first letter a-z; bit 26 for any other */
} Abbreviations;

static inline uint32_t abbreviation_letter_bit(char c) { return c >= 'a' && c <= 'z' ? 1u << (c - 'a') : 1u << 26; }

static inline void abbreviations_clear(Abbreviations *a)
{
    PyMem_Free(a->items);
    a->items = NULL;
    a->count = 0;
    a->longest = 0;
    a->first_letters = 0;
}

/* Replaces *a with the words of an iterable of ASCII str (lower-cased here); -1 with an
 * exception set (and *a unchanged) on error. */
static inline int abbreviations_read(Abbreviations *a, PyObject *words)
{
    PyObject *seq = PySequence_Fast(words, "abbreviations must be iterable");
    if (seq == NULL)
        return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    Abbreviation *items = PyMem_Calloc((size_t)(count ? count : 1), sizeof(Abbreviation));
    if (items == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *word = PySequence_Fast_GET_ITEM(seq, k);
        if (!PyUnicode_Check(word) || !PyUnicode_IS_ASCII(word)) {
            PyErr_SetString(PyExc_ValueError, "abbreviations must be ASCII str");
            goto fail;
        }
        Py_ssize_t length = PyUnicode_GET_LENGTH(word);
        if (length > ABBREVIATION_MAX) {
            PyErr_Format(PyExc_ValueError, "abbreviations are at most %d characters", ABBREVIATION_MAX);
            goto fail;
        }
        const Py_UCS1 *chars = PyUnicode_1BYTE_DATA(word);
        for (Py_ssize_t i = 0; i < length; i++)
            items[k].text[i] = (char)(chars[i] >= 'A' && chars[i] <= 'Z' ? chars[i] | 0x20 : chars[i]);
        items[k].length = length;
    }
    Py_DECREF(seq);
    abbreviations_clear(a);
    a->items = items;
    a->count = count;
    for (Py_ssize_t k = 0; k < count; k++) {
        if (items[k].length > a->longest)
            a->longest = items[k].length;
        if (items[k].length > 0)
            a->first_letters |= abbreviation_letter_bit(items[k].text[0]);
    }
    return 0;
fail:
    PyMem_Free(items);
    Py_DECREF(seq);
    return -1;
}

/* Whether the lower-case ASCII word[0:length] is one of the abbreviations. */
static inline int abbreviations_contain(const Abbreviations *a, const char *word, Py_ssize_t length)
{
    /* Most words before a period are longer than any abbreviation or start with a letter
     * none starts with: both filters are exact, so the scan below runs rarely. */
    if (length > a->longest || !(a->first_letters & abbreviation_letter_bit(word[0])))
        return 0;
    for (Py_ssize_t k = 0; k < a->count; k++) {
        const Abbreviation *known = &a->items[k];
        if (known->length == length && known->text[0] == word[0] && memcmp(known->text, word, (size_t)length) == 0)
            return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The exceptions (segment.false_stop_at and its helpers)
 * ------------------------------------------------------------------------------------- */

/* segment._inside_open_quote over [from, to): an odd number of '"', or more opening than
 * closing curly quotes. */
static inline int inside_open_quote(const SentenceText *t, Py_ssize_t from, Py_ssize_t to)
{
    Py_ssize_t straight = 0, open = 0, close = 0;
    for (Py_ssize_t p = from; p < to; p++) {
        Py_UCS4 c = sentence_read(t, p);
        straight += c == '"';
        open += c == 0x201C;
        close += c == 0x201D;
    }
    return straight % 2 == 1 || open > close;
}

/* segment._INITIALISM.fullmatch of [s, e): "(?:[A-Za-z]\.)+[A-Za-z]|[A-Za-z]" */
static inline int is_initialism(const SentenceText *t, Py_ssize_t s, Py_ssize_t e)
{
    Py_ssize_t n = e - s;
    if (n % 2 == 0)
        return 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_UCS4 c = sentence_read(t, s + k);
        if (k % 2 == 0 ? !is_ascii_letter(c) : c != '.')
            return 0;
    }
    return 1;
}

/* word.lower() in ABBREVIATIONS for the word [s, e). The abbreviations are ASCII, and the
 * only non-ASCII character whose lower case is ASCII is U+212A KELVIN SIGN ("k"); any other
 * non-ASCII character makes the lower-cased word non-ASCII, so no abbreviation. */
static inline int is_abbreviation(const SentenceText *t, Py_ssize_t s, Py_ssize_t e, const Abbreviations *a)
{
    char lower[ABBREVIATION_MAX];
    if (e - s < 1 || e - s > ABBREVIATION_MAX)
        return 0;
    for (Py_ssize_t p = s; p < e; p++) {
        Py_UCS4 c = sentence_read(t, p);
        if (c >= 128 && c != 0x212A)
            return 0;
        lower[p - s] = (char)(c == 0x212A ? 'k' : c >= 'A' && c <= 'Z' ? c | 0x20 : c);
    }
    return abbreviations_contain(a, lower, e - s);
}

/* segment.false_stop_at on the text t[base:t->size], offsets in t: 1 when the terminator
 * run [mark_start, mark_end), whose candidate (closers included) ends at `end`, does not
 * end the sentence that started at sentence_start. */
static inline int false_stop_at(const SentenceText *t, Py_ssize_t base, Py_ssize_t mark_start, Py_ssize_t mark_end,
                                Py_ssize_t end, Py_ssize_t sentence_start, const Abbreviations *abbreviations)
{
    /* Followed by a lower-case word: text[end:end+8].lstrip()[0].islower() (str.islower of
     * one character is Py_UNICODE_ISLOWER). */
    Py_ssize_t stop = end + 8 < t->size ? end + 8 : t->size;
    for (Py_ssize_t p = end; p < stop; p++) {
        Py_UCS4 c = sentence_read(t, p);
        if (!is_space(c)) {
            if (Py_UNICODE_ISLOWER(c))
                return 1;
            break;
        }
    }
    int ellipsis = 0;
    for (Py_ssize_t p = mark_start; p < mark_end; p++) {
        Py_UCS4 c = sentence_read(t, p);
        if (c == 0x2026 || (c == '.' && p + 1 < mark_end && sentence_read(t, p + 1) == '.'))
            ellipsis = 1;
    }
    if (ellipsis)
        return inside_open_quote(t, sentence_start, mark_start);
    if (mark_end - mark_start != 1 || sentence_read(t, mark_start) != '.')
        return 0;
    /* segment._word_before: the whitespace-free run before the mark (at most 40 characters),
     * openers stripped. */
    Py_ssize_t word_start = mark_start, floor = mark_start - 40 > base ? mark_start - 40 : base;
    while (word_start > floor && !is_space(sentence_read(t, word_start - 1)))
        word_start--;
    Py_ssize_t w = word_start;
    while (w < mark_start && is_opener(sentence_read(t, w)))
        w++;
    if (is_abbreviation(t, w, mark_start, abbreviations) || is_initialism(t, w, mark_start))
        return 1;
    /* "1." at the start of a line numbers a list item (str.isdigit: Py_UNICODE_ISDIGIT). */
    if (w == mark_start || mark_start - w > 3)
        return 0;
    if (word_start > base) {
        Py_UCS4 before = sentence_read(t, word_start - 1);
        if (before != '\r' && before != '\n')
            return 0;
    }
    for (Py_ssize_t p = w; p < mark_start; p++)
        if (!Py_UNICODE_ISDIGIT(sentence_read(t, p)))
            return 0;
    return 1;
}

/* ---------------------------------------------------------------------------------------
 * Hard-wrapped prose (segment.opens_block, segment.soft_line_break)
 * ------------------------------------------------------------------------------------- */

/* What may follow a list marker on its line: segment._LINE_END. */
static inline int is_line_end(Py_UCS4 c) { return is_line_break(c) || c == ' ' || c == '\t'; }

/* segment.opens_block: whether the line starting at `at` (read below t->size) opens a
 * markdown block that keeps its lines. */
static inline int opens_block(const SentenceText *t, Py_ssize_t at)
{
    Py_ssize_t end = t->size;
    Py_UCS4 c = sentence_read(t, at);
    if (c == '#' || c == '>' || c == '|' || c == '=')
        return 1;
    Py_UCS4 following = at + 1 < end ? sentence_read(t, at + 1) : 0;
    int has_following = at + 1 < end;
    if ((c == '-' || c == '*' || c == '+') && (!has_following || is_line_end(following)))
        return 1;
    if ((c == '`' || c == '~' || c == '-' || c == '*' || c == '_') && at + 3 <= end && following == c &&
        sentence_read(t, at + 2) == c)
        return 1;
    if (c == '<' && has_following &&
        (following == '/' || following == '!' || following == '?' || is_ascii_letter(following)))
        return 1;
    Py_ssize_t digits = at;
    while (digits < end && digits - at < 10 && sentence_read(t, digits) >= '0' && sentence_read(t, digits) <= '9')
        digits++;
    if (digits - at < 1 || digits - at > 9 || digits >= end)
        return 0;
    Py_UCS4 mark = sentence_read(t, digits);
    if (mark != '.' && mark != ')')
        return 0;
    return digits + 1 == end || is_line_end(sentence_read(t, digits + 1));
}

/* Whether the line starting at `line` is flush-left text that opens no block: what both
 * lines around a soft break must be (segment.soft_line_break). */
static inline int line_is_text(const SentenceText *t, Py_ssize_t line)
{
    return line < t->size && !is_space(sentence_read(t, line)) && !opens_block(t, line);
}

/* segment.soft_line_break on t[base:t->size] (base counts as a line start): 1 when the line
 * break at `at` is a hard wrap inside a paragraph, read as a space. `line` is where the line
 * ending at the break starts, or -1 to find it here (a caller walking the text in order
 * knows it already). */
static inline int soft_line_break(const SentenceText *t, Py_ssize_t base, Py_ssize_t at, Py_ssize_t line,
                                  int in_code)
{
    Py_ssize_t end = t->size;
    Py_UCS4 c = sentence_read(t, at);
    if (in_code || c == 0x2029)
        return 0;
    Py_ssize_t after = at + 1;
    if (c == '\r' && after < end && sentence_read(t, after) == '\n')
        after++;
    else if (c == '\n' && at > base && sentence_read(t, at - 1) == '\r')
        at--;
    if (after >= end || is_space(sentence_read(t, after)) || opens_block(t, after))
        return 0;
    if (line < 0) {
        line = at;
        while (line > base && !is_line_break(sentence_read(t, line - 1)))
            line--;
    }
    return line < at && !is_space(sentence_read(t, line)) && !opens_block(t, line);
}

#endif /* CHUNKSTREAM_SENTENCE_RULES_H */
