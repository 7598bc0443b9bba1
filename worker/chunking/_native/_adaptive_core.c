/* The compiled core of the `adaptive` strategy: one call per document.
 *
 * It computes exactly what the pure-Python twin computes (density.DocumentProfile,
 * boundaries.SentenceIndex, adaptive.AdaptiveChunker.chunk) and returns the chunk boundaries
 * with their window densities; Python builds the Chunk objects. Every rule lives in those
 * Python modules, documented there; this file only restates them in C, and
 * tests/chunking/test_adaptive_native.py compares the two on generated and real documents.
 *
 * The data (character classes, technical and stop word hashes, abbreviations) is handed over
 * once by configure() from the Python modules that own it, so no word list is written twice.
 * The density formulas (window and document) are restated here and tested against density.py.
 * Floating point follows the Python code operation by operation (numpy's round(4) is
 * rint(x * 1e4) / 1e4; -ffp-contract=off keeps the compiler from fusing multiply-adds).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_sentence_rules.h" /* segment.false_stop_at and its character classes */

/* Character classes, one bit each: the values of density._CLASS. */
enum {
    C_SEP = 1,     /* whitespace or glue punctuation: separates words */
    C_PUNCT = 2,   /* code punctuation {}<>[]()=; */
    C_DIGIT = 4,   /* ASCII digit */
    C_DOT = 8,     /* "." */
    C_BREAK = 16,  /* line break: always ends a sentence */
    C_LATIN = 32,  /* . ! ? ... : ends a sentence when whitespace or a closer follows */
    C_MARK = 64,   /* CJK and Arabic terminators */
    C_FOLLOW = 128 /* whitespace or a closing quote/bracket */
};

#define HASH_P 0x01000193u
/* Classes that need a look beyond the word scan: candidates, technical marks, dots. */
#define SPARSE (C_BREAK | C_LATIN | C_MARK | C_PUNCT | C_DOT)
#define VOCABULARY_SPAN 50
#define CODEPOINTS 0x110000

/* -- configuration (set once from Python) ------------------------------------------------ */

/* The words of a document: hash -> (when last seen, kind). Open addressing, grown at 70 %
 * load (measured faster than 50 %: a smaller table misses the cache less often than longer
 * probes cost), so it stays as small as the document's vocabulary. Every table starts
 * as a copy of the configured one, which already holds the technical and stop words (kind
 * known, never seen): counting a word is then one lookup and no branch on "new or not".
 * `info` = seen << 2 | kind, where seen is 0 for "not yet in this document" and else the
 * word's index + SEEN_OFFSET (so that "more than VOCABULARY_SPAN words ago" holds for 0). */
typedef struct {
    uint32_t key;
    int32_t info; /* -1: empty slot */
} SeenWord;

typedef struct {
    SeenWord *slots;
    size_t mask, used;
    int shift; /* 32 - log2(slots) */
} Vocabulary;

enum { W_TECH = 1, W_STOP = 2 };
#define SEEN_OFFSET 64 /* > VOCABULARY_SPAN + 1 */

/* Multiply-shift hashing with a key and an odd multiplier drawn at random in configure():
 * the word hash is public (density.word_hash), so with a fixed multiplier a document could
 * be made of words that all land in a few slots and turn every lookup into a long probe
 * (a reviewer's crafted 40,000-word text took 1.7 s, growing ~7x per doubling). Unknown
 * constants make that impossible to aim; they change where words sit, never the output. */
static uint32_t slot_key, slot_multiplier = 0x9E3779B1u;

static inline uint32_t spread(uint32_t hash, int shift) {
    return ((hash ^ slot_key) * slot_multiplier) >> shift;
}

static int vocabulary_init(Vocabulary *v, int bits) {
    size_t slots = (size_t)1 << bits;
    v->slots = PyMem_Malloc(sizeof(SeenWord) * slots);
    if (v->slots == NULL) return -1;
    memset(v->slots, 0xff, sizeof(SeenWord) * slots);
    v->mask = slots - 1;
    v->used = 0;
    v->shift = 32 - bits;
    return 0;
}

static int vocabulary_copy(Vocabulary *v, const Vocabulary *from) {
    size_t bytes = sizeof(SeenWord) * (from->mask + 1);
    *v = *from;
    v->slots = PyMem_Malloc(bytes);
    if (v->slots == NULL) return -1;
    memcpy(v->slots, from->slots, bytes);
    return 0;
}

static inline SeenWord *vocabulary_slot(const Vocabulary *v, uint32_t hash) {
    size_t slot = spread(hash, v->shift);
    while (v->slots[slot].info >= 0 && v->slots[slot].key != hash) slot = (slot + 1) & v->mask;
    return &v->slots[slot];
}

static int vocabulary_grow(Vocabulary *v) {
    Vocabulary bigger;
    if (vocabulary_init(&bigger, 32 - v->shift + 1) < 0) return -1;
    for (size_t s = 0; s <= v->mask; s++)
        if (v->slots[s].info >= 0) *vocabulary_slot(&bigger, v->slots[s].key) = v->slots[s];
    bigger.used = v->used;
    PyMem_Free(v->slots);
    *v = bigger;
    return 0;
}

typedef struct {
    PyObject *class_bytes;   /* bytes of length CODEPOINTS: the class of every code point */
    const uint8_t *classes;
    Abbreviations abbreviations; /* segment.ABBREVIATIONS (lower case, ASCII) */
    Vocabulary known;        /* the technical and stop word hashes with their kinds */
    /* Output: the Chunk type, the strategy name, the metadata keys. */
    PyObject *chunk_type, *name;
    PyObject *key_index, *key_density, *key_local, *key_target, *key_technical;
    PyObject *key_content, *key_chars, *kind_code, *kind_technical, *kind_prose;
    PyObject *key_language, *language_ar, *language_en;
} Config;

static Config config;


static int add_word_hashes(PyObject *hashes, uint8_t flag) {
    PyObject *seq = PySequence_Fast(hashes, "word hashes must be a sequence");
    if (seq == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long value = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(seq, i));
        if (value == (unsigned long)-1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        SeenWord *entry = vocabulary_slot(&config.known, (uint32_t)value);
        if (entry->info < 0) {
            entry->key = (uint32_t)value;
            entry->info = 0;
            config.known.used++;
        }
        entry->info |= flag;
    }
    Py_DECREF(seq);
    return 0;
}

static int keep(PyObject **slot, PyObject *value) {
    Py_INCREF(value);
    Py_XSETREF(*slot, value);
    return 0;
}

static int intern_key(PyObject **slot, const char *key) {
    PyObject *value = PyUnicode_InternFromString(key);
    if (value == NULL) return -1;
    Py_XSETREF(*slot, value);
    return 0;
}

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *classes, *tech, *stop, *abbreviations, *chunk_type, *name;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "SOOOOUK", &classes, &tech, &stop, &abbreviations, &chunk_type,
                          &name, &seed))
        return NULL;
    if (PyBytes_GET_SIZE(classes) != CODEPOINTS) {
        PyErr_SetString(PyExc_ValueError, "the class table must cover every code point");
        return NULL;
    }
    if (!PyCallable_Check(chunk_type)) {
        PyErr_SetString(PyExc_TypeError, "chunk_type must be callable");
        return NULL;
    }
    if (abbreviations_read(&config.abbreviations, abbreviations) < 0) return NULL;
    Py_ssize_t tech_count = PyObject_Length(tech), stop_count = PyObject_Length(stop);
    if (tech_count < 0 || stop_count < 0) return NULL;
    Py_ssize_t total = tech_count + stop_count;
    /* The table below and every document's copy of it are laid out with these. */
    slot_key = (uint32_t)seed;
    slot_multiplier = (uint32_t)(seed >> 32) | 1u;
    /* At most a quarter full, so that documents rarely grow their copy. */
    int bits = 6;
    while ((1u << bits) < 4 * (uint32_t)total) bits++;
    PyMem_Free(config.known.slots);
    if (vocabulary_init(&config.known, bits) < 0) return PyErr_NoMemory();
    if (add_word_hashes(tech, W_TECH) < 0 || add_word_hashes(stop, W_STOP) < 0) return NULL;
    if (intern_key(&config.key_index, "chunk_index") < 0 ||
        intern_key(&config.key_density, "density") < 0 ||
        intern_key(&config.key_local, "local_density") < 0 ||
        intern_key(&config.key_target, "target_size") < 0 ||
        intern_key(&config.key_technical, "technical") < 0 ||
        intern_key(&config.key_content, "content_type") < 0 ||
        intern_key(&config.key_chars, "char_count") < 0 ||
        intern_key(&config.kind_code, "code") < 0 ||
        intern_key(&config.kind_technical, "technical") < 0 ||
        intern_key(&config.kind_prose, "prose") < 0 ||
        intern_key(&config.key_language, "language") < 0 ||
        intern_key(&config.language_ar, "ar") < 0 || intern_key(&config.language_en, "en") < 0)
        return NULL;
    keep(&config.class_bytes, classes);
    config.classes = (const uint8_t *)PyBytes_AS_STRING(classes);
    keep(&config.chunk_type, chunk_type);
    keep(&config.name, name);
    Py_RETURN_NONE;
}

/* -- growable arrays ------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t *items;
    Py_ssize_t count, capacity;
} Positions;

/* A word: where it starts, and the letters, technical words and words new to their window
 * (not stop words, not among the VOCABULARY_SPAN words before them) counted before it. */
typedef struct {
    int32_t start, letters, tech, fresh;
} Word;

/* Where each kind of search landed last (see seek). */
typedef struct {
    Py_ssize_t fence, window, first_word, last_word, first_hit, last_hit, first_complex,
        last_complex, last_end, first_end, carried;
} Hints;

typedef struct {
    /* The document as CPython stores it (1, 2 or 4 bytes per code point). */
    const void *data;
    int kind;
    PyObject *text_object;
    Py_ssize_t size;
    Py_ssize_t tail;     /* the end of the text without trailing whitespace: a sentence end */
    int line_is_text;      /* during the scan: the current line is flush-left text */
    int crlf_soft;         /* during the scan: the answer for the last '\r' */
    Positions anchors;   /* sentence-end candidates */
    Positions hit_marks; /* code punctuation and digit.digit dots */
    Positions complex;   /* first letters of Arabic words of 7+ letters */
    Positions fences;    /* code-fence lines (their starts) */
    Py_ssize_t *stops;   /* where the section ends, by the count of fences at or before */
    /* Words in order; each with the running totals before it, and one more entry after the
     * last word with the document's totals (so a range of words sums by subtraction). */
    Word *word;
    Py_ssize_t words, word_capacity;
    Vocabulary seen;
    int failed; /* an allocation failed during the scan */
    Hints *hints; /* mutable even where the profile is read-only */
    /* Document totals for the document density. */
    Py_ssize_t distinct, punct_hits, decimals;
    int min_arabic_letters;
} Profile;

static inline uint8_t class_of(Py_UCS4 c) { return config.classes[c < CODEPOINTS ? c : 0]; }

/* The code point at `i`, or the sentinel space past the end: every look at "the next
 * character" stays in bounds, as with the trailing space of the Python twin. */
static inline Py_UCS4 at(const Profile *p, Py_ssize_t i) {
    return i < p->size ? PyUnicode_READ(p->kind, p->data, i) : ' ';
}

/* -- the document pass ------------------------------------------------------------------ */

static int is_arabic_letter(Py_UCS4 c) {
    return (c >= 0x0620 && c <= 0x064a) || (c >= 0x066e && c <= 0x06d3) ||
           (c >= 0x06fa && c <= 0x06ff);
}

static int is_arabic_mark(Py_UCS4 c) { return (c >= 0x064b && c <= 0x065f) || c == 0x0670; }

/* Arrays start at a size that fits typical text and double when full: allocating for the
 * worst case (every character a candidate) made the allocator map and unmap fresh pages for
 * every document, and page faults cost more than the growth. */
static int grow(void **items, Py_ssize_t *capacity, size_t item_size) {
    Py_ssize_t bigger = 2 * *capacity + 16;
    void *moved = PyMem_Realloc(*items, item_size * bigger);
    if (moved == NULL) return -1;
    *items = moved;
    *capacity = bigger;
    return 0;
}

static inline void push(Profile *p, Positions *positions, Py_ssize_t value) {
    if (positions->count == positions->capacity &&
        grow((void **)&positions->items, &positions->capacity, sizeof(Py_ssize_t)) < 0) {
        p->failed = 1;
        return;
    }
    positions->items[positions->count++] = value;
}

/* Counts one word: its letters, whether it is technical, whether it is new to its window
 * (the vocabulary keeps the last index of every word hash), and the distinct non-stop words. */
static inline void add_word(Profile *p, Py_ssize_t start, Py_ssize_t length, uint32_t hash) {
    /* After a failed allocation the call will raise MemoryError; inserting on into a table
     * that could not grow would fill it, and the next lookup would never find a free slot. */
    if (p->failed) return;
    if (p->words + 2 > p->word_capacity &&
        grow((void **)&p->word, &p->word_capacity, sizeof(Word)) < 0) {
        p->failed = 1;
        return;
    }
    Word *totals = &p->word[p->words];
    Word *next = totals + 1;
    SeenWord *entry = vocabulary_slot(&p->seen, hash);
    int32_t info = entry->info;
    int empty = info < 0;
    int32_t kind = empty ? 0 : info & 3;
    int32_t seen = empty ? 0 : info >> 2;
    int32_t now = (int32_t)p->words + SEEN_OFFSET;
    int stop = (kind & W_STOP) != 0;
    entry->key = hash;
    entry->info = now << 2 | kind;
    p->distinct += !stop && seen == 0;
    totals->start = (int32_t)start;
    next->letters = totals->letters + (int32_t)length;
    next->tech = totals->tech + (kind & W_TECH);
    next->fresh = totals->fresh + (!stop && now - seen > VOCABULARY_SPAN);
    p->words++;
    p->seen.used += empty;
    if (10 * p->seen.used > 7 * (p->seen.mask + 1) && vocabulary_grow(&p->seen) < 0) p->failed = 1;
}

/* segment.soft_line_break for the break at i during the scan, which meets every line break
 * in order: the fence lines found so far are those that start at or before i (their count's
 * parity says whether i is in code), and the current line started after the previous break.
 * The '\n' of "\r\n" gets the answer of its '\r'. */
static int soft_break(Profile *p, Py_ssize_t i) {
    Py_UCS4 c = at(p, i);
    if (c == '\n' && i > 0 && at(p, i - 1) == '\r') return p->crlf_soft;
    /* The same decision as soft_line_break(text, 0, i, line, in_code), with the status of
     * the line before the break known from the break that began it. */
    const SentenceText text = {p->kind, p->data, p->size};
    Py_ssize_t after = i + 1;
    if (c == '\r' && after < p->size && at(p, after) == '\n') after++;
    int before_is_text = p->line_is_text;
    p->line_is_text = line_is_text(&text, after);
    int soft = before_is_text && p->line_is_text && c != 0x2029 && !(p->fences.count & 1);
    p->crlf_soft = soft;
    return soft;
}

/* One pass over the text, specialised for each storage width. It finds:
 * - words (maximal runs of non-separators) with their polynomial hash
 *   H(w) = sum of (code[i] + 1) * P**i mod 2**32, as density.word_hash;
 * - sentence-end candidates, as DocumentProfile.anchors;
 * - technical marks: code punctuation, and dots with a digit on both sides;
 * - decimals for the document density: digit.digit, non-overlapping, left to right (as
 *   bytes.count on the digits-as-zero text);
 * - code-fence lines: a line opening with ``` or ~~~ after spaces and tabs (fence_lines);
 * - Arabic complex words as density._ARABIC_COMPLEX finds them (non-overlapping): a letter,
 *   then letters and diacritics; U+0670 is in both classes, so the regex counts it as a
 *   letter whenever that reaches the minimum. */
#define DEFINE_SCAN(NAME, CHAR_T)                                                             \
    static void NAME##_fence_line(Profile *p, const CHAR_T *t, Py_ssize_t line) {             \
        Py_ssize_t n = p->size, i = line;                                                     \
        while (i < n && (t[i] == ' ' || t[i] == '\t')) i++;                                   \
        if (i + 3 <= n && ((t[i] == '`' && t[i + 1] == '`' && t[i + 2] == '`') ||             \
                           (t[i] == '~' && t[i + 1] == '~' && t[i + 2] == '~')))              \
            push(p, &p->fences, line);                                                           \
    }                                                                                         \
    static Py_ssize_t NAME##_arabic_run(Profile *p, const CHAR_T *t, Py_ssize_t i) {          \
        Py_ssize_t j = i, n = p->size;                                                        \
        int units = 0;                                                                        \
        while (j < n && (is_arabic_letter(t[j]) || is_arabic_mark(t[j]))) {                   \
            units += is_arabic_letter(t[j]);                                                  \
            j++;                                                                              \
        }                                                                                     \
        if (units >= p->min_arabic_letters) push(p, &p->complex, i);                             \
        return j;                                                                             \
    }                                                                                         \
    static inline void NAME##_sparse(Profile *p, const CHAR_T *t, Py_ssize_t i, uint8_t k,    \
                                     Py_ssize_t *decimal_free) {                              \
        Py_ssize_t n = p->size;                                                               \
        Py_UCS4 c = t[i];                                                                     \
        Py_UCS4 next_c = i + 1 < n ? t[i + 1] : ' ';                                          \
        uint8_t next = class_of(next_c);                                                      \
        if (k & C_PUNCT) {                                                                    \
            push(p, &p->hit_marks, i);                                                           \
            p->punct_hits++;                                                                  \
        } else if ((k & C_DOT) && i > 0 && (class_of(t[i - 1]) & next & C_DIGIT)) {           \
            push(p, &p->hit_marks, i);                                                           \
            if (i - 1 >= *decimal_free) {                                                     \
                p->decimals++;                                                                \
                *decimal_free = i + 2;                                                        \
            }                                                                                 \
        }                                                                                     \
        /* A CJK run followed by an Arabic one (or the reverse) ends twice. A soft line      \
         * break (hard-wrapped prose; fences so far: below this break) is whitespace. */      \
        if (((k & C_BREAK) && !soft_break(p, i)) || ((k & C_LATIN) && (next & C_FOLLOW)) ||   \
            ((k & C_MARK) && !(next & C_MARK)) ||                                             \
            ((k & next & C_MARK) && ((c >= 0x3000) != (next_c >= 0x3000))))                   \
            push(p, &p->anchors, i);                                                             \
        if (c == '\n' && i + 1 < n) NAME##_fence_line(p, t, i + 1);                           \
    }                                                                                         \
    static void NAME(Profile *p, const CHAR_T *t) {                                           \
        Py_ssize_t n = p->size, i = 0;                                                        \
        Py_ssize_t decimal_free = 0, arabic_end = 0;                                          \
        const uint8_t *classes = config.classes;                                              \
        if (n > 0) NAME##_fence_line(p, t, 0);                                                \
        while (i < n) {                                                                       \
            /* separators */                                                                  \
            uint8_t k;                                                                        \
            while (i < n && ((k = classes[t[i]]) & C_SEP)) {                                  \
                if (k & SPARSE) NAME##_sparse(p, t, i, k, &decimal_free);                     \
                i++;                                                                          \
            }                                                                                 \
            if (i >= n) break;                                                                \
            /* a word */                                                                      \
            Py_ssize_t word_start = i;                                                        \
            uint32_t hash = 0, power = 1;                                                     \
            while (i < n && !((k = classes[t[i]]) & C_SEP)) {                                 \
                Py_UCS4 c = t[i];                                                             \
                hash += ((uint32_t)c + 1) * power; /* + 1: see density.word_hash */           \
                power *= HASH_P;                                                              \
                if (k & SPARSE) NAME##_sparse(p, t, i, k, &decimal_free);                     \
                if (c >= 0x0620 && c <= 0x06ff && i >= arabic_end && is_arabic_letter(c))    \
                    arabic_end = NAME##_arabic_run(p, t, i);                                  \
                i++;                                                                          \
            }                                                                                 \
            add_word(p, word_start, i - word_start, hash);                                    \
        }                                                                                     \
    }

DEFINE_SCAN(scan_ucs1, Py_UCS1)
DEFINE_SCAN(scan_ucs2, Py_UCS2)
DEFINE_SCAN(scan_ucs4, Py_UCS4)

/* adaptive._Sections: outside code a section ends where the next fence line starts, inside
 * where the closing fence's line ends (the end of the text without a line break). */
static int section_stops(Profile *p) {
    p->stops = PyMem_Malloc(sizeof(Py_ssize_t) * (p->fences.count + 1));
    if (p->stops == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < p->fences.count; k++) {
        Py_ssize_t e = p->fences.items[k];
        if (k % 2 == 1)
            while (e < p->size && at(p, e) != '\n') e++;
        p->stops[k] = e;
    }
    p->stops[p->fences.count] = p->size;
    return 0;
}

/* -- searches ---------------------------------------------------------------------------- */

/* Searches from a hint. Chunks move forward through a document, so each search lands a few
 * items from where the same search landed for the previous chunk: galloping from there
 * touches those items instead of log2(n) items spread over a large array. `seek` returns the
 * first index whose key is >= value (bisect_left) and leaves the answer in *hint. */
#define DEFINE_SEEK(NAME, TYPE, KEY)                                                          \
    static Py_ssize_t NAME(const TYPE *items, Py_ssize_t count, Py_ssize_t value,             \
                           Py_ssize_t *hint) {                                                \
        Py_ssize_t low, high, step = 1, h = *hint < count ? *hint : count;                    \
        if (h < count && KEY(items[h]) < value) {                                             \
            low = h + 1; /* the answer is after h */                                          \
            for (;;) {                                                                        \
                Py_ssize_t probe = low + step - 1;                                            \
                if (probe >= count) {                                                         \
                    high = count;                                                             \
                    break;                                                                    \
                }                                                                             \
                if (KEY(items[probe]) >= value) {                                             \
                    high = probe;                                                             \
                    break;                                                                    \
                }                                                                             \
                low = probe + 1;                                                              \
                step <<= 1;                                                                   \
            }                                                                                 \
        } else {                                                                              \
            high = h; /* the answer is h or before */                                         \
            for (;;) {                                                                        \
                Py_ssize_t probe = high - step;                                               \
                if (probe < 0) {                                                              \
                    low = 0;                                                                  \
                    break;                                                                    \
                }                                                                             \
                if (KEY(items[probe]) < value) {                                              \
                    low = probe + 1;                                                          \
                    break;                                                                    \
                }                                                                             \
                high = probe;                                                                 \
                step <<= 1;                                                                   \
            }                                                                                 \
        }                                                                                     \
        while (low < high) {                                                                  \
            Py_ssize_t mid = low + (high - low) / 2;                                          \
            if (KEY(items[mid]) < value) low = mid + 1;                                       \
            else high = mid;                                                                  \
        }                                                                                     \
        *hint = low;                                                                          \
        return low;                                                                           \
    }

#define POSITION(item) (item)
#define WORD_START(item) ((item).start)
DEFINE_SEEK(seek, Py_ssize_t, POSITION)
DEFINE_SEEK(seek_word, Word, WORD_START)

/* Index of the first position > value (bisect_right), from a hint. */
static Py_ssize_t seek_right(const Positions *positions, Py_ssize_t value, Py_ssize_t *hint) {
    return seek(positions->items, positions->count, value + 1, hint);
}

static Py_ssize_t section_end(const Profile *p, Py_ssize_t start) {
    return p->stops[seek_right(&p->fences, start, &p->hints->fence)];
}

/* density.DocumentProfile.window: the density of the window that starts just after the last
 * anchor before `position`, `base_size` characters long, cut at its section's end. */
static double window_density(const Profile *p, Py_ssize_t position, Py_ssize_t base_size) {
    Hints *hint = p->hints;
    Py_ssize_t k = seek(p->anchors.items, p->anchors.count, position, &hint->window);
    Py_ssize_t start = k == 0 ? 0 : p->anchors.items[k - 1] + 1;
    Py_ssize_t end = start + base_size < p->size ? start + base_size : p->size;
    Py_ssize_t cut = section_end(p, start);
    if (cut < end) end = cut;
    Py_ssize_t first = seek_word(p->word, p->words, start, &hint->first_word);
    Py_ssize_t last = seek_word(p->word, p->words, end, &hint->last_word);
    if (last == first) return 0.0;
    double words = (double)(last - first);
    double chars = (double)(end - start);
    int64_t hits = seek(p->hit_marks.items, p->hit_marks.count, end, &hint->last_hit) -
                   seek(p->hit_marks.items, p->hit_marks.count, start, &hint->first_hit);
    hits += p->word[last].tech - p->word[first].tech;
    double per_100 = chars / 100.0 > 1.0 ? chars / 100.0 : 1.0;
    double score = 0.4 * fmin((double)hits / per_100, 1.0);
    score += 0.3 * (double)(p->word[last].fresh - p->word[first].fresh) / words;
    score += 0.2 * fmin((double)(p->word[last].letters - p->word[first].letters) / words / 10.0,
                         1.0);
    if (p->complex.count) {
        Py_ssize_t found = seek(p->complex.items, p->complex.count, end, &hint->last_complex) -
                           seek(p->complex.items, p->complex.count, start, &hint->first_complex);
        double per_200 = chars / 200.0 > 1.0 ? chars / 200.0 : 1.0;
        score += 0.1 * fmin((double)found / per_200, 1.0);
    }
    if (score > 1.0) score = 1.0;
    if (score < 0.0) score = 0.0;
    return rint(score * 10000.0) / 10000.0;
}

/* -- sentence ends (boundaries.SentenceIndex; false_stop_at is in _sentence_rules.h) ------- */

/* SentenceIndex._resolve: the raw end of the sentence ending at candidate `position`, -1 when
 * it does not end one. */
static Py_ssize_t resolve(const Profile *p, Py_ssize_t position, Py_ssize_t sentence_start) {
    Py_ssize_t n = p->size;
    Py_UCS4 c = at(p, position);
    if (is_line_break(c)) return position;
    Py_ssize_t end = position + 1;
    if (is_latin_stop(c)) {
        while (end < n && is_latin_closer(at(p, end))) end++;
        if (end < n && !is_space(at(p, end))) return -1;
        Py_ssize_t mark_start = position;
        while (mark_start > 0 && is_latin_stop(at(p, mark_start - 1))) mark_start--;
        const SentenceText text = {p->kind, p->data, n};
        int false_stop = false_stop_at(&text, 0, mark_start, position + 1, end, sentence_start,
                                       &config.abbreviations);
        return false_stop ? -1 : end;
    }
    if (is_cjk_stop(c))
        while (end < n && is_cjk_closer(at(p, end))) end++;
    return end;
}

/* SentenceIndex.last_end: the largest sentence end e, floor < e <= limit (trimmed); -1 none. */
static Py_ssize_t last_end(const Profile *p, Py_ssize_t start, Py_ssize_t floor,
                           Py_ssize_t limit) {
    if (p->tail <= limit) /* the end of the text is the last sentence end there is */
        return p->tail > floor ? p->tail : -1;
    const Py_ssize_t *anchors = p->anchors.items;
    for (Py_ssize_t k = seek_right(&p->anchors, limit, &p->hints->last_end) - 1; k >= 0; k--) {
        if (anchors[k] < start) return -1;
        Py_ssize_t raw = resolve(p, anchors[k], start);
        if (raw >= 0 && raw <= limit) {
            Py_ssize_t end = raw;
            while (end > start && is_space(at(p, end - 1))) end--;
            return end > floor ? end : -1;
        }
    }
    return -1;
}

/* SentenceIndex.first_end: the smallest sentence end e, floor < e <= limit (trimmed). */
static Py_ssize_t first_end(const Profile *p, Py_ssize_t floor, Py_ssize_t limit) {
    const Py_ssize_t *anchors = p->anchors.items;
    Py_ssize_t count = p->anchors.count;
    for (Py_ssize_t k = seek(anchors, count, floor, &p->hints->first_end);
         k < count && anchors[k] <= limit; k++) {
        Py_ssize_t raw = resolve(p, anchors[k], floor);
        if (raw >= 0 && raw <= limit) {
            Py_ssize_t end = raw;
            while (end > floor && is_space(at(p, end - 1))) end--;
            if (end > floor) return end;
        }
    }
    return floor < p->tail && p->tail <= limit ? p->tail : -1;
}

/* SentenceIndex.carried_start: where the trailing whole sentences within `overlap` begin. */
static Py_ssize_t carried_start(const Profile *p, Py_ssize_t start, Py_ssize_t end,
                                Py_ssize_t overlap) {
    if (overlap <= 0) return -1;
    const Py_ssize_t *anchors = p->anchors.items;
    Py_ssize_t count = p->anchors.count;
    Py_ssize_t low = end - overlap - 1;
    for (Py_ssize_t k = seek(anchors, count, low > start ? low : start, &p->hints->carried);
         k < count && anchors[k] < end; k++) {
        Py_ssize_t raw = resolve(p, anchors[k], start);
        if (raw < 0 || raw > end) continue;
        Py_ssize_t begin = raw;
        while (begin < p->size && is_space(at(p, begin))) begin++;
        if (begin >= end) return -1;
        if (begin >= end - overlap && begin > start) return begin;
    }
    return -1;
}

/* boundaries.last_word_end: the end of the last whole word in (floor, limit], cut at any
 * whitespace. */
static Py_ssize_t last_word_end(const Profile *p, Py_ssize_t floor, Py_ssize_t limit) {
    Py_ssize_t cut = -1;
    for (Py_ssize_t i = (limit < p->size ? limit : p->size - 1); i >= floor + 1; i--) {
        Py_UCS4 c = at(p, i);
        if (is_space(c)) {
            cut = i;
            break;
        }
    }
    if (cut <= floor) return -1;
    Py_ssize_t end = cut;
    while (end > floor && is_space(at(p, end - 1))) end--;
    return end > floor ? end : -1;
}

/* boundaries.last_clause_end: just after the last Arabic comma in [floor, limit). */
static Py_ssize_t last_clause_end(const Profile *p, Py_ssize_t floor, Py_ssize_t limit) {
    for (Py_ssize_t i = limit - 1; i >= floor; i--)
        if (at(p, i) == 0x060c) return i + 1;
    return -1;
}

static Py_ssize_t skip_space(const Profile *p, Py_ssize_t position) {
    while (position < p->size && is_space(at(p, position))) position++;
    return position;
}

/* density.detect_language: "ar" when the text has more characters of the Arabic block
 * (U+0600-U+06FF) than ASCII letters, else "en". A one-byte str holds no Arabic. */
#define DEFINE_COUNT_SCRIPTS(NAME, CHAR_T)                                                    \
    static void NAME(const CHAR_T *t, Py_ssize_t n, Py_ssize_t *arabic, Py_ssize_t *latin) {  \
        Py_ssize_t a = 0, l = 0;                                                              \
        for (Py_ssize_t i = 0; i < n; i++) {                                                  \
            uint32_t c = t[i];                                                                \
            a += (c >> 8) == 6;                                                               \
            l += ((c | 0x20) - 'a') < 26u;                                                    \
        }                                                                                     \
        *arabic = a;                                                                          \
        *latin = l;                                                                           \
    }
DEFINE_COUNT_SCRIPTS(count_scripts_ucs2, Py_UCS2)
DEFINE_COUNT_SCRIPTS(count_scripts_ucs4, Py_UCS4)

static PyObject *detect_language(PyObject *text) {
    int kind = PyUnicode_KIND(text);
    if (kind == PyUnicode_1BYTE_KIND) return config.language_en;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), arabic, latin;
    if (kind == PyUnicode_2BYTE_KIND)
        count_scripts_ucs2(PyUnicode_2BYTE_DATA(text), n, &arabic, &latin);
    else
        count_scripts_ucs4(PyUnicode_4BYTE_DATA(text), n, &arabic, &latin);
    return arabic > latin ? config.language_ar : config.language_en;
}

/* -- the chunk loop (AdaptiveChunker.chunk) ---------------------------------------------- */

typedef struct {
    Py_ssize_t base_size, min_size, max_size, overlap;
    int clause_cuts;
    double technical_threshold;
    PyObject *extra;   /* dict merged into every chunk's metadata (doc_id, source) */
    PyObject *language; /* "ar" or "en" (borrowed from config or the caller) */
    PyObject *density; /* the document density (a float) */
} Params;

static Py_ssize_t cut_long_sentence(const Profile *p, const Params *params, Py_ssize_t start,
                                    Py_ssize_t hard_limit) {
    Py_ssize_t end = first_end(p, start, hard_limit);
    if (end >= 0) return end;
    if (params->clause_cuts) {
        end = last_clause_end(p, start, hard_limit);
        if (end >= 0) return end;
    }
    end = last_word_end(p, start, hard_limit);
    return end >= 0 ? end : hard_limit;
}

/* Chunk(text[start:end], start, end, end - start, "adaptive", metadata), the metadata in
 * the order of the Python twin. */
static PyObject *make_chunk(const Profile *p, const Params *params, Py_ssize_t index,
                            Py_ssize_t start, Py_ssize_t end, double local, Py_ssize_t target) {
    PyObject *chunk = NULL;
    PyObject *metadata = PyDict_New();
    PyObject *index_obj = PyLong_FromSsize_t(index);
    PyObject *local_obj = PyFloat_FromDouble(local);
    PyObject *target_obj = PyLong_FromSsize_t(target);
    PyObject *body = PyUnicode_Substring(p->text_object, start, end);
    PyObject *start_obj = PyLong_FromSsize_t(start);
    PyObject *end_obj = PyLong_FromSsize_t(end);
    PyObject *length_obj = PyLong_FromSsize_t(end - start);
    if (metadata == NULL || index_obj == NULL || local_obj == NULL || target_obj == NULL ||
        body == NULL || start_obj == NULL || end_obj == NULL || length_obj == NULL)
        goto done;
    if (PyDict_SetItem(metadata, config.key_index, index_obj) < 0 ||
        PyDict_SetItem(metadata, config.key_density, params->density) < 0 ||
        PyDict_SetItem(metadata, config.key_local, local_obj) < 0 ||
        PyDict_SetItem(metadata, config.key_target, target_obj) < 0 ||
        PyDict_SetItem(metadata, config.key_technical,
                       local >= params->technical_threshold ? Py_True : Py_False) < 0)
        goto done;
    /* adaptive.content_kind: in a fenced code section (an odd count of fence lines at or
     * before the start), else by the local density. */
    Py_ssize_t fences_before = seek_right(&p->fences, start, &p->hints->fence);
    PyObject *kind = fences_before % 2 ? config.kind_code
                     : local >= params->technical_threshold ? config.kind_technical
                                                            : config.kind_prose;
    if (PyDict_SetItem(metadata, config.key_content, kind) < 0 ||
        PyDict_SetItem(metadata, config.key_chars, length_obj) < 0 ||
        PyDict_SetItem(metadata, config.key_language, params->language) < 0)
        goto done;
    if (PyDict_GET_SIZE(params->extra) && PyDict_Update(metadata, params->extra) < 0) goto done;
    PyObject *args[6] = {body, start_obj, end_obj, length_obj, config.name, metadata};
    chunk = PyObject_Vectorcall(config.chunk_type, args, 6, NULL);
done:
    Py_XDECREF(metadata);
    Py_XDECREF(index_obj);
    Py_XDECREF(local_obj);
    Py_XDECREF(target_obj);
    Py_XDECREF(body);
    Py_XDECREF(start_obj);
    Py_XDECREF(end_obj);
    Py_XDECREF(length_obj);
    return chunk;
}

static int append_chunk(const Profile *p, const Params *params, PyObject *chunks,
                        Py_ssize_t start, Py_ssize_t end, double local, Py_ssize_t target) {
    PyObject *chunk = make_chunk(p, params, PyList_GET_SIZE(chunks), start, end, local, target);
    if (chunk == NULL) return -1;
    int failed = PyList_Append(chunks, chunk);
    Py_DECREF(chunk);
    return failed;
}

static PyObject *chunk_loop(const Profile *p, const Params *params) {
    PyObject *chunks = PyList_New(0);
    if (chunks == NULL) return NULL;
    Py_ssize_t size = p->size;
    Py_ssize_t start = skip_space(p, 0);
    Py_ssize_t floor = start;
    double spread = (double)(params->max_size - params->min_size);
    while (start < size) {
        Py_ssize_t cut = section_end(p, start);
        double local = window_density(p, start, params->base_size);
        Py_ssize_t target = (Py_ssize_t)rint((double)params->max_size - local * spread);
        Py_ssize_t limit = start + target;
        if (cut < limit) limit = cut;
        Py_ssize_t end = last_end(p, start, floor, limit);
        if (end == -1) {
            if (floor > start) {
                /* The carried sentences leave no room for the next one: drop them. */
                start = floor = skip_space(p, floor);
                continue;
            }
            Py_ssize_t hard = start + params->max_size < size ? start + params->max_size : size;
            end = cut_long_sentence(p, params, start, hard);
        }
        if (append_chunk(p, params, chunks, start, end, local, target) < 0) goto error;
        Py_ssize_t following = skip_space(p, end);
        if (following >= size) break;
        Py_ssize_t carried = carried_start(p, start, end, params->overlap);
        if (carried < 0) {
            start = floor = following;
        } else {
            start = carried;
            floor = end;
        }
    }
    return chunks;
error:
    Py_DECREF(chunks);
    return NULL;
}

/* -- entry point ------------------------------------------------------------------------- */

static void release(Profile *p) {
    PyMem_Free(p->anchors.items);
    PyMem_Free(p->hit_marks.items);
    PyMem_Free(p->complex.items);
    PyMem_Free(p->fences.items);
    PyMem_Free(p->stops);
    PyMem_Free(p->word);
    PyMem_Free(p->seen.slots);
}

static int reserve(Positions *positions, Py_ssize_t capacity) {
    positions->items = PyMem_Malloc(sizeof(Py_ssize_t) * capacity);
    positions->capacity = capacity;
    return positions->items == NULL ? -1 : 0;
}

/* Room for typical text (about one word in six characters, fewer candidates and marks). */
static int allocate(Profile *p) {
    Py_ssize_t n = p->size;
    p->word_capacity = n / 4 + 16;
    p->word = PyMem_Malloc(sizeof(Word) * p->word_capacity);
    if (reserve(&p->anchors, n / 32 + 16) < 0 || reserve(&p->hit_marks, n / 16 + 16) < 0 ||
        reserve(&p->complex, 16) < 0 || reserve(&p->fences, 16) < 0 || p->word == NULL ||
        vocabulary_copy(&p->seen, &config.known) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    p->word[0] = (Word){0, 0, 0, 0};
    return 0;
}

/* density.density_from_totals, operation by operation (ints below 2**53 convert exactly, so
 * Python's int / int equals the double division), rounded by float.__round__ itself. */
static PyObject *document_density(Py_ssize_t chars, Py_ssize_t words, Py_ssize_t distinct,
                                  Py_ssize_t tech_hits, Py_ssize_t letters, Py_ssize_t arabic) {
    if (words == 0) return PyFloat_FromDouble(0.0);
    double per_100 = (double)chars / 100.0, per_200 = (double)chars / 200.0;
    double tech = fmin((double)tech_hits / (per_100 >= 1.0 ? per_100 : 1.0), 1.0);
    double score = 0.4 * tech + 0.3 * (double)distinct / (double)words +
                   0.2 * fmin((double)letters / (double)words / 10.0, 1.0) +
                   0.1 * fmin((double)arabic / (per_200 >= 1.0 ? per_200 : 1.0), 1.0);
    score = fmin(fmax(score, 0.0), 1.0);
    PyObject *unrounded = PyFloat_FromDouble(score);
    if (unrounded == NULL) return NULL;
    PyObject *rounded = PyObject_CallMethod(unrounded, "__round__", "i", 4);
    Py_DECREF(unrounded);
    return rounded;
}

static PyObject *plan(PyObject *self, PyObject *args) {
    PyObject *text;
    Params params;
    Profile p;
    memset(&p, 0, sizeof p);
    PyObject *language;
    if (!PyArg_ParseTuple(args, "UnnnnpidO!U", &text, &params.base_size, &params.min_size,
                          &params.max_size, &params.overlap, &params.clause_cuts,
                          &p.min_arabic_letters, &params.technical_threshold, &PyDict_Type,
                          &params.extra, &language))
        return NULL;
    if (config.classes == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return NULL;
    }
    /* Word indices (+ SEEN_OFFSET) are packed with two flag bits into an int32. */
    if (PyUnicode_GET_LENGTH(text) >= (1 << 29)) {
        PyErr_SetString(PyExc_ValueError, "text too long for the compiled core");
        return NULL;
    }
    p.size = PyUnicode_GET_LENGTH(text);
    p.kind = PyUnicode_KIND(text);
    p.data = PyUnicode_DATA(text);
    p.text_object = text;
    params.language = PyUnicode_CompareWithASCIIString(language, "auto") == 0
                          ? detect_language(text)
                          : language;
    p.tail = p.size;
    if (p.size > 0) {
        const SentenceText whole = {p.kind, p.data, p.size};
        p.line_is_text = line_is_text(&whole, 0);
    }
    while (p.tail > 0 && is_space(at(&p, p.tail - 1))) p.tail--;
    Hints hints = {0};
    p.hints = &hints;
    params.density = NULL;
    PyObject *chunks = NULL;
    if (skip_space(&p, 0) == p.size) {
        chunks = PyList_New(0);
        goto done;
    }
    if (allocate(&p) < 0) goto done;
    if (p.kind == PyUnicode_1BYTE_KIND) scan_ucs1(&p, p.data);
    else if (p.kind == PyUnicode_2BYTE_KIND) scan_ucs2(&p, p.data);
    else scan_ucs4(&p, p.data);
    if (p.failed) {
        PyErr_NoMemory();
        goto done;
    }
    if (section_stops(&p) < 0) goto done;
    /* chars, words, distinct non-stop words, technical hits, letters, Arabic complex words */
    params.density = document_density(p.size, p.words, p.distinct,
                                      p.punct_hits + p.decimals + p.word[p.words].tech,
                                      p.word[p.words].letters, p.complex.count);
    if (params.density == NULL) goto done;
    chunks = chunk_loop(&p, &params);
done:
    Py_XDECREF(params.density);
    release(&p);
    return chunks;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(classes, tech_hashes, stop_hashes, abbreviations, chunk_type, name, seed): once, "
     "at import (it replaces the tables chunk() reads)"},
    {"chunk", plan, METH_VARARGS,
     "chunk(text, base_size, min_size, max_size, overlap, clause_cuts, arabic_min_letters, "
     "technical_threshold, extra_metadata, language) -> list[Chunk]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_adaptive_core",
    .m_doc = "Compiled core of the adaptive strategy (see worker/chunking/rules/adaptive.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__adaptive_core(void) { return PyModule_Create(&module); }
