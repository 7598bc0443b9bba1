/* Part of _lexical_core.c (see there): the document's text and its character classes. Each
 * character is classified once per document (classify_all) into a class byte and class
 * bitmaps, so that the hot loops test one byte or jump from one class change to the next
 * instead of decoding code points and asking the Unicode database. */
#ifndef LEXICAL_TEXT_H
#define LEXICAL_TEXT_H

#include "_sentence_rules.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Each character's classes (a byte per character, and bitmaps of some of them). */
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

static inline int sp(const Text *t, Py_ssize_t i) { return t->cls[i] & C_SPACE; }

static inline int kwc(const Text *t, Py_ssize_t i) { return t->cls[i] & C_KEYWORD; }

static inline int is_blank_char(Py_UCS4 c) { return c == ' ' || c == '\t'; }

/* The first position at or after p, before e, that is not a space or tab. */
static inline Py_ssize_t skip_blanks(const Text *t, Py_ssize_t p, Py_ssize_t e)
{
    while (p < e && is_blank_char(at(t, p)))
        p++;
    return p;
}

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

/* The first characters of segment.CANDIDATE's alternatives (its _CANDIDATE_FIRST). */
static int starts_candidate(Py_UCS4 c)
{
    return is_line_break(c) || is_cjk_stop(c) || is_arabic_stop(c) || is_latin_stop(c);
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

/* The class bitmaps of Text, from cls padded with spaces to n_words * 64 entries: bit i of
 * word w is one class bit of entry 64 * w + i. */
#if defined(__SSE2__)
/* Sixteen bytes at a time: shifting each 16-bit lane left by 7 - f puts class bit f of both
 * its bytes at their top bits, which movemask gathers (byte i to bit i). */
static void build_bitmaps(const unsigned char *cls, Py_ssize_t n_words, uint64_t *space, uint64_t *keyword,
                          uint64_t *brk)
{
    for (Py_ssize_t w = 0; w < n_words; w++) {
        uint64_t s = 0, k = 0, b = 0;
        for (int i = 0; i < 4; i++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(cls + (w << 6) + 16 * i));
            s |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_slli_epi16(v, 7)) << (16 * i); /* C_SPACE */
            k |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_slli_epi16(v, 6)) << (16 * i); /* C_KEYWORD */
            b |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_slli_epi16(v, 5)) << (16 * i); /* C_BREAK */
        }
        space[w] = s;
        keyword[w] = k;
        brk[w] = b;
    }
}
#else
/* Bit f of each of the 8 class bytes at cls, packed into 8 bits (byte i to bit i). */
static inline uint64_t pack8(const unsigned char *cls, int f)
{
    uint64_t v;
    memcpy(&v, cls, 8);
    return (((v >> f) & 0x0101010101010101ULL) * 0x0102040810204080ULL) >> 56;
}

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
#endif

#endif /* LEXICAL_TEXT_H */
