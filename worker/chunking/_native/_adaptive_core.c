/* The compiled core of the `adaptive` strategy: one call per document.
 *
 * It computes exactly what the pure-Python twin computes (AdaptiveChunker.chunk_reference):
 * the units of text/units.py and the content-defined packing of text/packing.py, shared with
 * the sentence core through its headers, with each chunk's sizes from the density of the
 * window ahead of it (density.DocumentProfile), the overlap (adaptive.carried_starts), and the
 * Chunk objects. Every rule lives in those Python modules, documented there; this file only
 * restates them in C, and tests/chunking/test_adaptive_native.py compares the two on
 * generated and real documents, in characters and in tokens:
 *
 *   _sentence_rules.h  segment.false_stop_at and the terminator classes
 *   _structure.h       text/structure.py: lines, blocks, gap levels
 *   _piece_cache.h     the memory of token counts per piece (one per tokenizer)
 *   _units.h           text/units.py: token pieces and their counts, paragraph sentences
 *   _packing.h         text/units.py read_units, text/packing.py
 *
 * The data (character classes, technical and stop word hashes, abbreviations) is handed over
 * once by configure() from the Python modules that own it, so no word list is written twice.
 * The density formulas (window and document) are restated here and tested against density.py.
 * Floating point follows the Python code operation by operation (round(x, 4) of a density is
 * rint(x * 1e4) / 1e4; -ffp-contract=off keeps the compiler from fusing multiply-adds).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_sentence_rules.h"
#include "_structure.h"
#include "_piece_cache.h"
#include "_units.h"
#include "_packing.h"

/* Character classes, one bit each: the values of density._CLASS. */
enum {
    C_SEP = 1,    /* whitespace or glue punctuation: separates words */
    C_PUNCT = 2,  /* code punctuation {}<>[]()=; */
    C_DIGIT = 4,  /* ASCII digit */
    C_DOT = 8,    /* "." */
    C_BREAK = 16, /* "\n": a line, perhaps a code fence, starts after it */
};

#define HASH_P 0x01000193u
/* Classes that need a look beyond the word scan: technical marks, dots, line starts. */
#define SPARSE (C_BREAK | C_PUNCT | C_DOT)
#define CODEPOINTS 0x110000

/* -- configuration (set once from Python) ------------------------------------------------ */

/* The words of a document: hash -> (seen, kind). Open addressing, grown when seven slots in
 * ten are used (add_word; faster than growing at half load: a smaller table misses the cache
 * less often than longer probes cost), so it stays as small as the document's vocabulary. Every table starts
 * as a copy of the configured one, which already holds the technical and stop words (kind
 * known, never seen): counting a word is then one lookup and no branch on "new or not".
 * `info` = seen << 2 | kind, where seen is 0 for "not yet in this document", else 1. */
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

/* Multiply-shift hashing with a key and an odd multiplier drawn at random in configure():
 * the word hash is public (density.word_hash), so with a fixed multiplier a document could
 * be made of words that all land in a few slots and turn every lookup into a long probe
 * (a reviewer's crafted text took seconds, its time growing far faster than its length). Unknown
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

/* -- the document pass ------------------------------------------------------------------ */

/* A word: where it starts, its hash and whether it is a stop word, and the letters and
 * technical words counted before it. */
typedef struct {
    int32_t start, letters, tech, stop;
    uint32_t hash;
} Word;

typedef struct {
    /* The document as CPython stores it (one, two or four bytes per code point: its kind). */
    const void *data;
    int kind;
    Py_ssize_t size;
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
    /* Document totals for the document density. */
    Py_ssize_t distinct, punct_hits, decimals;
    int min_arabic_letters;
} Profile;

static inline uint8_t class_of(Py_UCS4 c) { return config.classes[c < CODEPOINTS ? c : 0]; }

static int is_arabic_letter(Py_UCS4 c) {
    return (c >= 0x0620 && c <= 0x064a) || (c >= 0x066e && c <= 0x06d3) ||
           (c >= 0x06fa && c <= 0x06ff);
}

static int is_arabic_mark(Py_UCS4 c) { return (c >= 0x064b && c <= 0x065f) || c == 0x0670; }

/* Arrays start at a size that fits typical text and double when full: allocating for the
 * worst case made the allocator map and unmap fresh pages for every document, and page
 * faults cost more than the growth. */
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
    int stop = (kind & W_STOP) != 0;
    entry->key = hash;
    p->distinct += !stop && (empty || info >> 2 == 0);
    entry->info = 1 << 2 | kind;
    totals->start = (int32_t)start;
    totals->hash = hash;
    totals->stop = stop;
    next->letters = totals->letters + (int32_t)length;
    next->tech = totals->tech + (kind & W_TECH);
    p->words++;
    p->seen.used += empty;
    if (10 * p->seen.used > 7 * (p->seen.mask + 1) && vocabulary_grow(&p->seen) < 0) p->failed = 1;
}

/* One pass over the text, specialised for each storage width. It finds:
 * - words (maximal runs of non-separators) with their polynomial hash
 *   H(w) = sum of (code[i] + 1) * P**i mod 2**32, as density.word_hash;
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
            push(p, &p->fences, line);                                                        \
    }                                                                                         \
    static Py_ssize_t NAME##_arabic_run(Profile *p, const CHAR_T *t, Py_ssize_t i) {          \
        Py_ssize_t j = i, n = p->size;                                                        \
        int units = 0;                                                                        \
        while (j < n && (is_arabic_letter(t[j]) || is_arabic_mark(t[j]))) {                   \
            units += is_arabic_letter(t[j]);                                                  \
            j++;                                                                              \
        }                                                                                     \
        if (units >= p->min_arabic_letters) push(p, &p->complex, i);                          \
        return j;                                                                             \
    }                                                                                         \
    static inline void NAME##_sparse(Profile *p, const CHAR_T *t, Py_ssize_t i, uint8_t k,    \
                                     Py_ssize_t *decimal_free) {                              \
        Py_ssize_t n = p->size;                                                               \
        if (k & C_PUNCT) {                                                                    \
            push(p, &p->hit_marks, i);                                                        \
            p->punct_hits++;                                                                  \
        } else if ((k & C_DOT) && i > 0 && i + 1 < n &&                                       \
                   (class_of(t[i - 1]) & class_of(t[i + 1]) & C_DIGIT)) {                     \
            push(p, &p->hit_marks, i);                                                        \
            if (i - 1 >= *decimal_free) {                                                     \
                p->decimals++;                                                                \
                *decimal_free = i + 2;                                                        \
            }                                                                                 \
        } else if ((k & C_BREAK) && i + 1 < n) {                                              \
            NAME##_fence_line(p, t, i + 1);                                                   \
        }                                                                                     \
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

static inline Py_UCS4 at(const Profile *p, Py_ssize_t i) { return PyUnicode_READ(p->kind, p->data, i); }

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

/* bisect_left over positions. */
static Py_ssize_t bisect_positions(const Positions *positions, Py_ssize_t value) {
    Py_ssize_t low = 0, high = positions->count;
    while (low < high) {
        Py_ssize_t middle = low + (high - low) / 2;
        if (positions->items[middle] < value) low = middle + 1;
        else high = middle;
    }
    return low;
}

/* bisect_left over the word starts. */
static Py_ssize_t bisect_words(const Profile *p, Py_ssize_t value) {
    Py_ssize_t low = 0, high = p->words;
    while (low < high) {
        Py_ssize_t middle = low + (high - low) / 2;
        if (p->word[middle].start < value) low = middle + 1;
        else high = middle;
    }
    return low;
}

/* The count of fence lines at or before `position` (bisect_right). */
static Py_ssize_t fences_through(const Profile *p, Py_ssize_t position) {
    return bisect_positions(&p->fences, position + 1);
}

/* A set of word hashes for one window at a time: a slot is filled when its stamp is the
 * window's, so no clearing between windows; slots by the keyed spread() (the word hash is
 * public: no text can aim its words at one slot). */
typedef struct {
    uint32_t key, stamp;
} WindowSlot;

typedef struct {
    WindowSlot *slots;
    int bits; /* log2 of the slots */
    uint32_t stamp;
} WindowSet;

/* The distinct non-stop words of words first..last-1 (density's vocabulary term); -1 when
 * the set cannot grow. */
static Py_ssize_t vocabulary_of(const Profile *p, WindowSet *set, Py_ssize_t first, Py_ssize_t last) {
    int bits = 4;
    while (((Py_ssize_t)1 << bits) < 2 * (last - first)) bits++;
    if (bits > set->bits) {
        WindowSlot *bigger = PyMem_Calloc((size_t)1 << bits, sizeof(WindowSlot));
        if (bigger == NULL) return -1;
        PyMem_Free(set->slots);
        set->slots = bigger;
        set->bits = bits;
        set->stamp = 0;
    }
    uint32_t stamp = ++set->stamp;
    size_t mask = ((size_t)1 << set->bits) - 1;
    Py_ssize_t distinct = 0;
    for (Py_ssize_t k = first; k < last; k++) {
        if (p->word[k].stop) continue;
        uint32_t key = p->word[k].hash;
        size_t slot = spread(key, 32 - set->bits);
        while (set->slots[slot].stamp == stamp && set->slots[slot].key != key) slot = (slot + 1) & mask;
        if (set->slots[slot].stamp != stamp) {
            set->slots[slot] = (WindowSlot){key, stamp};
            distinct++;
        }
    }
    return distinct;
}

/* density.DocumentProfile.density: the window [start, end); -1 when out of memory. */
static double window_density(const Profile *p, WindowSet *set, Py_ssize_t start, Py_ssize_t end) {
    Py_ssize_t first = bisect_words(p, start), last = bisect_words(p, end);
    if (last == first) return 0.0;
    double words = (double)(last - first);
    double chars = (double)(end - start);
    int64_t hits = bisect_positions(&p->hit_marks, end) - bisect_positions(&p->hit_marks, start);
    hits += p->word[last].tech - p->word[first].tech;
    double per_100 = chars / 100.0 > 1.0 ? chars / 100.0 : 1.0;
    double score = 0.4 * fmin((double)hits / per_100, 1.0);
    Py_ssize_t vocabulary = vocabulary_of(p, set, first, last);
    if (vocabulary < 0) return -1.0;
    score += 0.3 * (double)vocabulary / words;
    score += 0.2 * fmin((double)(p->word[last].letters - p->word[first].letters) / words / 10.0, 1.0);
    if (p->complex.count) {
        Py_ssize_t found = bisect_positions(&p->complex, end) - bisect_positions(&p->complex, start);
        double per_200 = chars / 200.0 > 1.0 ? chars / 200.0 : 1.0;
        score += 0.1 * fmin((double)found / per_200, 1.0);
    }
    if (score > 1.0) score = 1.0;
    if (score < 0.0) score = 0.0;
    return rint(score * 10000.0) / 10000.0;
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

static void release(Profile *p) {
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

/* Room for typical text (about one word in six characters, fewer marks). */
static int allocate(Profile *p) {
    Py_ssize_t n = p->size;
    p->word_capacity = n / 4 + 16;
    p->word = PyMem_Malloc(sizeof(Word) * p->word_capacity);
    if (reserve(&p->hit_marks, n / 16 + 16) < 0 || reserve(&p->complex, 16) < 0 ||
        reserve(&p->fences, 16) < 0 || p->word == NULL || vocabulary_copy(&p->seen, &config.known) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    p->word[0] = (Word){0, 0, 0, 0, 0};
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

/* -- the chunks (AdaptiveChunker.chunk_reference) ---------------------------------------- */

typedef struct {
    Py_ssize_t base_size, min_size, max_size, overlap;
    int clause_cuts;
    double technical_threshold;
    PyObject *extra;    /* dict merged into every chunk's metadata (doc_id, source) */
    PyObject *language; /* "ar" or "en" (borrowed from config or the caller) */
    PyObject *density;  /* the document density (a float) */
} Params;

/* What the sizes of a chunk are read from (ChunkSizes' context): its first unit's window. */
typedef struct {
    const Profile *profile;
    const Units *units;
    const Measure *measure;
    const Params *params;
    Sizes packing;
    double *local;      /* per unit: the window's density, NAN until asked */
    Py_ssize_t *target; /* per unit: the density target */
    WindowSet set;
    int failed; /* out of memory in a window (packing's callback cannot raise) */
} Windows;

/* units.Measure.advance: the end of the longest stretch from start of at most amount. */
static Py_ssize_t measure_advance(const Measure *m, Py_ssize_t start, Py_ssize_t amount) {
    if (!m->tokens) return start + amount < m->t->size ? start + amount : m->t->size;
    Py_ssize_t low = 0, high = m->ends.count;
    while (low < high) { /* pieces that end by start */
        Py_ssize_t middle = low + (high - low) / 2;
        if (m->ends.items[middle] <= start) low = middle + 1;
        else high = middle;
    }
    Py_ssize_t first = low;
    long long limit = m->cumulative.items[first] + amount;
    high = m->cumulative.count; /* the largest j with cumulative[j] <= limit, plus one */
    while (low < high) {
        Py_ssize_t middle = low + (high - low) / 2;
        if (m->cumulative.items[middle] <= limit) low = middle + 1;
        else high = middle;
    }
    Py_ssize_t last = low - 1;
    return last > first ? m->ends.items[last - 1] : start;
}

/* density_at in chunk_reference: the local density and target of a chunk at unit `first`. */
static void density_at(Windows *w, Py_ssize_t first) {
    if (!isnan(w->local[first])) return;
    const Profile *p = w->profile;
    const Params *params = w->params;
    Py_ssize_t start = w->units->starts[first];
    Py_ssize_t end = measure_advance(w->measure, start, params->base_size);
    Py_ssize_t section = p->stops[fences_through(p, start)];
    if (section < end) end = section;
    double local = window_density(p, &w->set, start, end);
    if (local < 0) {
        w->failed = 1;
        local = 0.0;
    }
    double spread = (double)(params->max_size - params->min_size);
    w->local[first] = local;
    w->target[first] = (Py_ssize_t)rint((double)params->max_size - local * spread);
}

/* AdaptiveChunker.chunk_sizes for the chunk at unit `first` (packing.ChunkSizes). */
static Sizes chunk_sizes_at(void *context, Py_ssize_t first) {
    Windows *w = context;
    density_at(w, first);
    long long minimum = w->packing.minimum, target = w->target[first];
    long long soft = (target > minimum ? target : minimum) * 4 / 3;
    return sizes_with(soft < w->packing.cap ? soft : w->packing.cap, minimum);
}

/* adaptive.carried_starts, in place of each chunk's first unit in `starts`. */
static void carried_starts(const Positions *groups, const Units *u, long long overlap, long long cap,
                           Py_ssize_t *starts) {
    Py_ssize_t n = groups->count / 2;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t first = groups->items[2 * k], last = groups->items[2 * k + 1], start = first;
        if (k > 0 && overlap > 0) {
            Py_ssize_t floor = groups->items[2 * k - 2];
            for (Py_ssize_t j = first - 1; j > floor; j--) {
                if (u->before_end[first - 1] - u->before_start[j] > overlap) break;
                if (u->before_end[last] - u->before_start[j] > cap) break;
                if (u->levels[j] >= L_LINE && u->levels[j] != L_GLUE) start = j;
            }
        }
        starts[k] = start;
    }
}

/* Chunk(text[start:end], start, end, size, "adaptive", metadata), the metadata in the order
 * of the Python twin. */
static PyObject *make_chunk(PyObject *text, const Params *params, Py_ssize_t index, Py_ssize_t start,
                            Py_ssize_t end, long long size, double local, Py_ssize_t target, int in_code) {
    PyObject *chunk = NULL;
    PyObject *metadata = PyDict_New();
    PyObject *index_obj = PyLong_FromSsize_t(index);
    PyObject *local_obj = PyFloat_FromDouble(local);
    PyObject *target_obj = PyLong_FromSsize_t(target);
    PyObject *body = PyUnicode_Substring(text, start, end);
    PyObject *start_obj = PyLong_FromSsize_t(start);
    PyObject *end_obj = PyLong_FromSsize_t(end);
    PyObject *chars_obj = PyLong_FromSsize_t(end - start);
    PyObject *size_obj = PyLong_FromLongLong(size);
    if (metadata == NULL || index_obj == NULL || local_obj == NULL || target_obj == NULL || body == NULL ||
        start_obj == NULL || end_obj == NULL || chars_obj == NULL || size_obj == NULL)
        goto done;
    int technical = local >= params->technical_threshold;
    /* adaptive.content_kind */
    PyObject *kind = in_code ? config.kind_code : technical ? config.kind_technical : config.kind_prose;
    if (PyDict_SetItem(metadata, config.key_index, index_obj) < 0 ||
        PyDict_SetItem(metadata, config.key_density, params->density) < 0 ||
        PyDict_SetItem(metadata, config.key_local, local_obj) < 0 ||
        PyDict_SetItem(metadata, config.key_target, target_obj) < 0 ||
        PyDict_SetItem(metadata, config.key_technical, technical ? Py_True : Py_False) < 0 ||
        PyDict_SetItem(metadata, config.key_content, kind) < 0 ||
        PyDict_SetItem(metadata, config.key_chars, chars_obj) < 0 ||
        PyDict_SetItem(metadata, config.key_language, params->language) < 0)
        goto done;
    if (PyDict_GET_SIZE(params->extra) && PyDict_Update(metadata, params->extra) < 0) goto done;
    PyObject *args[6] = {body, start_obj, end_obj, size_obj, config.name, metadata};
    chunk = PyObject_Vectorcall(config.chunk_type, args, 6, NULL);
done:
    Py_XDECREF(metadata);
    Py_XDECREF(index_obj);
    Py_XDECREF(local_obj);
    Py_XDECREF(target_obj);
    Py_XDECREF(body);
    Py_XDECREF(start_obj);
    Py_XDECREF(end_obj);
    Py_XDECREF(chars_obj);
    Py_XDECREF(size_obj);
    return chunk;
}

/* Packs the units and builds the chunks: a list, None (the twin must chunk the document),
 * or NULL with an exception set. */
static PyObject *chunks_of(PyObject *text, Profile *p, const Params *params, const Measure *m, Units *units) {
    long long cap = params->max_size;
    long long room = params->overlap < cap / 4 ? params->overlap : cap / 4;
    Windows w = {p, units, m, params, sizes_with(cap - room, cap / 8 > 1 ? cap / 8 : 1), NULL, NULL, {NULL, 0, 0}, 0};
    Positions groups = {0};
    Py_ssize_t *starts = NULL;
    PyObject *chunks = NULL;
    Py_ssize_t n_units = units->count;
    w.local = PyMem_Malloc(sizeof(double) * (size_t)n_units);
    w.target = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)n_units);
    if (w.local == NULL || w.target == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n_units; k++) w.local[k] = NAN;
    ChunkSizes chunk_sizes = {chunk_sizes_at, &w};
    if (pack_with(units, &w.packing, NULL, 1, &chunk_sizes, &groups) < 0) goto done;
    if (w.failed) {
        PyErr_NoMemory();
        goto done;
    }
    settle(&groups, units, &w.packing);
    Py_ssize_t n = groups.count / 2;
    starts = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    if (starts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    carried_starts(&groups, units, params->overlap, cap, starts);
    chunks = PyList_New(n);
    if (chunks == NULL) goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t first = groups.items[2 * k], last = groups.items[2 * k + 1], carried = starts[k];
        density_at(&w, first);
        if (w.failed) {
            PyErr_NoMemory();
            Py_CLEAR(chunks);
            goto done;
        }
        Py_ssize_t own_start = units->starts[first];
        int in_code = fences_through(p, own_start) % 2 == 1;
        PyObject *item = make_chunk(text, params, k, units->starts[carried], units->ends[last],
                                    units->before_end[last] - units->before_start[carried], w.local[first],
                                    w.target[first], in_code);
        if (item == NULL) {
            Py_CLEAR(chunks);
            goto done;
        }
        PyList_SET_ITEM(chunks, k, item);
    }
done:
    PyMem_Free(w.local);
    PyMem_Free(w.target);
    PyMem_Free(w.set.slots);
    PyMem_Free(groups.items);
    PyMem_Free(starts);
    return chunks;
}

/* -- entry point ------------------------------------------------------------------------- */

static PyObject *chunk(PyObject *self, PyObject *args) {
    PyObject *text, *language, *memory, *count_pieces, *cut_word = Py_None;
    Params params;
    Profile p;
    memset(&p, 0, sizeof p);
    if (!PyArg_ParseTuple(args, "U(nnnn)pidO!UOO|O", &text, &params.base_size, &params.min_size, &params.max_size,
                          &params.overlap, &params.clause_cuts, &p.min_arabic_letters, &params.technical_threshold,
                          &PyDict_Type, &params.extra, &language, &memory, &count_pieces, &cut_word))
        return NULL;
    if (config.classes == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return NULL;
    }
    if (cut_word != Py_None && !PyCallable_Check(cut_word)) {
        PyErr_SetString(PyExc_TypeError, "cut_word must be callable or None");
        return NULL;
    }
    if (params.base_size < 1 || params.min_size < 1 || params.max_size < params.min_size || params.overlap < 0) {
        PyErr_SetString(PyExc_ValueError, "sizes must be positive, min_size <= max_size, overlap >= 0");
        return NULL;
    }
    /* Word indices (+ SEEN_OFFSET) are packed with two flag bits into an int32. */
    if (PyUnicode_GET_LENGTH(text) >= (1 << 29)) {
        PyErr_SetString(PyExc_ValueError, "text too long for the compiled core");
        return NULL;
    }
    int tokens = memory != Py_None;
    PieceCache *cache = NULL;
    if (tokens) {
        cache = PyCapsule_GetPointer(memory, CACHE_CAPSULE);
        if (cache == NULL) return NULL;
        if (!PyCallable_Check(count_pieces)) {
            PyErr_SetString(PyExc_TypeError, "count_pieces must be callable");
            return NULL;
        }
    }
    p.size = PyUnicode_GET_LENGTH(text);
    p.kind = PyUnicode_KIND(text);
    p.data = PyUnicode_DATA(text);
    params.density = NULL;
    params.language = PyUnicode_CompareWithASCIIString(language, "auto") == 0 ? detect_language(text) : language;
    SentenceText t = {p.kind, p.data, p.size};
    Measure m;
    memset(&m, 0, sizeof m);
    m.t = &t;
    m.tokens = tokens;
    measure_take_cutter(&m, text, cut_word); /* checked above */
    Units units;
    memset(&units, 0, sizeof units);
    BlockSpans blocks = {0};
    PyObject *chunks = NULL;
    long long cap = params.max_size, room = params.overlap < cap / 4 ? params.overlap : cap / 4;
    /* read_units(text, measure, packing's limit, max_size, clauses=...) */
    Sizes reading = sizes_with(cap - room, cap / 8 > 1 ? cap / 8 : 1);
    reading.cap = cap;
    Reading how = {0, params.clause_cuts};
    if (tokens && measure_count(&m, text, cache, count_pieces) < 0) goto done;
    if (read_blocks(&t, &blocks) < 0) goto done;
    int read = read_units_of(&m, &reading, &config.abbreviations, &how, &blocks, &units);
    if (read == HAND_BACK) {
        chunks = Py_NewRef(Py_None);
        goto done;
    }
    if (read < 0) goto done;
    if (units.count == 0) {
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
    params.density = document_density(p.size, p.words, p.distinct, p.punct_hits + p.decimals + p.word[p.words].tech,
                                      p.word[p.words].letters, p.complex.count);
    if (params.density == NULL) goto done;
    chunks = chunks_of(text, &p, &params, &m, &units);
done:
    Py_XDECREF(params.density);
    release(&p);
    measure_free(&m);
    units_free(&units);
    PyMem_Free(blocks.items);
    return chunks;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(classes, tech_hashes, stop_hashes, abbreviations, chunk_type, name, seed): once, "
     "at import (it replaces the tables chunk() reads)"},
    {"chunk", chunk, METH_VARARGS,
     "chunk(text, (base_size, min_size, max_size, overlap), clause_cuts, arabic_min_letters, "
     "technical_threshold, extra_metadata, language, memory, count_pieces) -> list[Chunk] | None: "
     "characters when memory is None, else tokens; None: the twin must chunk it"},
    PIECE_MEMORY_METHODS,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_adaptive_core",
    .m_doc = "Compiled core of the adaptive strategy (see worker/chunking/rules/adaptive.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__adaptive_core(void) {
    fill_piece_classes();
    return PyModule_Create(&module);
}
