/* worker/chunking/text/units.py (read_units and what it calls) and packing.py in C. The
 * reference is there; each function here is named after the one it restates. Include after
 * _structure.h and _units.h. */
#ifndef CHUNKSTREAM_PACKING_H
#define CHUNKSTREAM_PACKING_H

#define HASH_REACH 12 /* units.HASH_REACH */
#define HASH_RANGE 65536

/* packing.Sizes */
typedef struct {
    long long cap, minimum, target, limit;
} Sizes;

/* packing.Sizes(cap, minimum); minimum < 0: an eighth of the cap. */
static Sizes sizes_with(long long cap, long long minimum) {
    Sizes s;
    s.cap = cap;
    s.minimum = minimum >= 0 ? minimum : cap / 8 > 1 ? cap / 8 : 1;
    s.target = cap * 3 / 4 > s.minimum ? cap * 3 / 4 : s.minimum;
    s.limit = cap - 2 * s.minimum > 1 ? cap - 2 * s.minimum : 1;
    return s;
}

static inline Sizes sizes_for(long long cap) { return sizes_with(cap, -1); }

typedef struct {
    Py_ssize_t *starts, *ends, *blocks;
    int *levels;
    char *headings; /* units.Units.headings */
    uint32_t *hashes;
    long long *before_start, *before_end;
    Py_ssize_t count, capacity;
} Units;

static void units_free(Units *u) {
    PyMem_Free(u->starts);
    PyMem_Free(u->ends);
    PyMem_Free(u->blocks);
    PyMem_Free(u->levels);
    PyMem_Free(u->headings);
    PyMem_Free(u->hashes);
    PyMem_Free(u->before_start);
    PyMem_Free(u->before_end);
}

static int units_push(Units *u, Py_ssize_t start, Py_ssize_t end, int level, int heading, Py_ssize_t block) {
    if (u->count == u->capacity) {
        Py_ssize_t c1 = u->capacity, c2 = c1, c3 = c1, c4 = c1, c5 = c1;
        if (array_reserve((void **)&u->starts, &c1, u->count + 1, sizeof(Py_ssize_t)) < 0 ||
            array_reserve((void **)&u->ends, &c2, u->count + 1, sizeof(Py_ssize_t)) < 0 ||
            array_reserve((void **)&u->levels, &c3, u->count + 1, sizeof(int)) < 0 ||
            array_reserve((void **)&u->headings, &c4, u->count + 1, 1) < 0 ||
            array_reserve((void **)&u->blocks, &c5, u->count + 1, sizeof(Py_ssize_t)) < 0)
            return -1;
        u->capacity = c1;
    }
    u->starts[u->count] = start;
    u->ends[u->count] = end;
    u->levels[u->count] = level;
    u->headings[u->count] = (char)heading;
    u->blocks[u->count] = block;
    u->count++;
    return 0;
}

/* How units are read (units.read_units' keywords): a paragraph within the cap whole, clause
 * cuts after Arabic commas. */
typedef struct {
    int whole_paragraphs, clauses;
} Reading;

/* units._fence_at: whether the line [at, stop) is a fence line. */
static int fence_at(const SentenceText *t, Py_ssize_t at, Py_ssize_t stop) {
    while (at < stop && (sentence_read(t, at) == ' ' || sentence_read(t, at) == '\t')) at++;
    if (at + 3 > stop) return 0;
    Py_UCS4 c = sentence_read(t, at);
    return (c == '`' || c == '~') && sentence_read(t, at + 1) == c && sentence_read(t, at + 2) == c;
}

static Py_ssize_t line_end_below(const SentenceText *t, Py_ssize_t at, Py_ssize_t end) {
    while (at < end && sentence_read(t, at) != '\n') at++;
    return at;
}

/* What a range over the limit is cut into next (units._BLOCK, _TEXT, _CLAUSE, _WORD). */
enum { D_BLOCK, D_TEXT, D_CLAUSE, D_WORD };

/* A piece over the cap in tokens: the twin must chunk the document (see _units.h). */
#define HAND_BACK 1

/* units._clauses: the end of the clause starting at p below end: just after the next Arabic
 * comma that a separator follows, or end. */
static Py_ssize_t clause_end(const SentenceText *t, Py_ssize_t p, Py_ssize_t end) {
    for (; p < end; p++)
        if (sentence_read(t, p) == 0x060c && p + 1 < end) {
            Py_UCS4 c = sentence_read(t, p + 1);
            if (is_space(c) && !is_quiet(c)) return p + 1;
        }
    return end;
}

/* units._characters: the word [start, end), over the cap, cut by the twin's word_cuts.cut_word
 * (exact counts need the tokenizer, the grapheme cluster rules need Python's Unicode database).
 * The pieces are units, the first at `level`; in tokens the measure is refined with them and
 * the rest are at L_FORCED, in characters at L_CHAR. 0, or -1 with an exception set. */
static int cut_word_units(Measure *m, const Sizes *s, Py_ssize_t start, Py_ssize_t end, int level, int heading,
                          Py_ssize_t index, Units *out) {
    PyObject *cuts = PyObject_CallFunction(m->cut_word, "Onnn", m->text, start, end, (Py_ssize_t)s->cap);
    if (cuts == NULL) return -1;
    int result = -1;
    Py_ssize_t n = PyList_Check(cuts) ? PyList_GET_SIZE(cuts) : 0;
    Py_ssize_t *ends = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    long long *counts = PyMem_Malloc(sizeof(long long) * (size_t)(n ? n : 1));
    if (ends == NULL || counts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t expected = start;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *cut = PyList_GET_ITEM(cuts, k);
        Py_ssize_t a, b;
        long long count;
        if (!PyTuple_Check(cut) || !PyArg_ParseTuple(cut, "nnL", &a, &b, &count)) goto invalid;
        if (a != expected || b <= a || b > end || count < 0) goto invalid;
        ends[k] = b;
        counts[k] = count;
        expected = b;
    }
    if (n == 0 || expected != end) goto invalid;
    if (m->tokens && measure_refine(m, start, n, ends, counts) < 0) goto done;
    int inner = m->tokens ? L_FORCED : L_CHAR;
    Py_ssize_t a = start;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (units_push(out, a, ends[k], k == 0 ? level : inner, heading, index) < 0) goto done;
        a = ends[k];
    }
    result = 0;
    goto done;
invalid:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "cut_word must return (start, end, count) pieces covering the word");
done:
    PyMem_Free(ends);
    PyMem_Free(counts);
    Py_DECREF(cuts);
    return result;
}

/* units._split: the unit [start, end) whole, or cut one step finer. 0, HAND_BACK, or -1. */
static int split_unit(Measure *m, const Sizes *s, int clauses, Py_ssize_t start, Py_ssize_t end, int level,
                      int heading, Py_ssize_t index, int depth, Units *out) {
    const SentenceText *t = m->t;
    long long size = measure_size(m, start, end);
    if (size <= s->limit || ((depth == D_WORD || depth == D_BLOCK) && size <= s->cap))
        return units_push(out, start, end, level, heading, index);
    if (depth == D_WORD)
        return m->cut_word == NULL ? HAND_BACK : cut_word_units(m, s, start, end, level, heading, index, out);
    int inner, deeper, first = 1;
    if (depth == D_BLOCK) inner = L_LINE, deeper = D_TEXT;
    else if (depth == D_TEXT && clauses) inner = L_CLAUSE, deeper = D_CLAUSE;
    else inner = L_WORD, deeper = D_WORD;
    Py_ssize_t p = start;
    while (p < end) {
        Py_ssize_t a, b;
        if (depth == D_BLOCK) {
            /* units._lines: each line stripped, blank ones skipped, a nested fenced block one
             * piece */
            Py_ssize_t stop = line_end_below(t, p, end);
            if (p > start && fence_at(t, p, stop)) {
                Py_ssize_t closing = stop + 1;
                while (closing < end && !fence_at(t, closing, line_end_below(t, closing, end)))
                    closing = line_end_below(t, closing, end) + 1;
                stop = closing < end ? line_end_below(t, closing, end) : end;
            }
            a = p;
            b = stop;
            p = stop + 1;
        } else if (deeper == D_CLAUSE) {
            a = p;
            b = p = clause_end(t, p, end);
        } else if (m->tokens) {
            if (!next_piece(t, &p, end, &a, &b)) break;
        } else {
            /* \S+ */
            while (p < end && is_space(sentence_read(t, p))) p++;
            if (p == end) break;
            a = p;
            while (p < end && !is_space(sentence_read(t, p))) p++;
            b = p;
        }
        if (deeper != D_WORD) {
            while (a < b && is_space(sentence_read(t, a))) a++;
            while (b > a && is_space(sentence_read(t, b - 1))) b--;
            if (a == b) continue;
        }
        int result = split_unit(m, s, clauses, a, b, first ? level : inner, heading, index, deeper, out);
        if (result != 0) return result;
        first = 0;
    }
    return 0;
}

static const uint8_t ascii_alnum[128] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1,
    ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1,
    ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1,
    ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1,
    ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1,
};

/* units.gap_hash */
static uint32_t gap_hash(const SentenceText *t, Py_ssize_t start_before, Py_ssize_t end_before,
                         Py_ssize_t start_after, Py_ssize_t end_after) {
    uint32_t h = 0x811C9DC5u;
    Py_ssize_t ranges[2][2] = {
        {end_before - HASH_REACH > start_before ? end_before - HASH_REACH : start_before, end_before},
        {start_after, start_after + HASH_REACH < end_after ? start_after + HASH_REACH : end_after},
    };
    for (int r = 0; r < 2; r++)
        for (Py_ssize_t p = ranges[r][0]; p < ranges[r][1]; p++) {
            Py_UCS4 c = sentence_read(t, p);
            int alnum = c < 128 ? ascii_alnum[c] : Py_UNICODE_ISALNUM(c);
            if (alnum) h = (h ^ (uint32_t)c) * 0x01000193u;
        }
    return h >> 16;
}

/* units.read_units: 0, HAND_BACK, or -1 with an exception set. `blocks`: read_blocks(t). */
static int read_units_of(Measure *m, const Sizes *s, const Abbreviations *abbreviations, const Reading *how,
                         const BlockSpans *blocks, Units *units) {
    const SentenceText *t = m->t;
    RawUnits flat = {0};
    int result = -1;
    for (Py_ssize_t k = 0; k < blocks->count; k++) {
        const BlockSpan *block = &blocks->items[k];
        int level = k == 0 ? L_SENTENCE : gap_level(t, &blocks->items[k - 1], block);
        if (block->kind == B_PARAGRAPH &&
            !(how->whole_paragraphs && measure_size(m, block->start, block->end) <= s->cap)) {
            if (paragraph_sentences(t, block->start, block->end, level, abbreviations, k, &flat) < 0) goto done;
        } else {
            RawUnit unit = {block->start, block->end, level, 1, block->kind == B_HEADING || block->kind == B_RULE, k};
            if (ARRAY_PUSH(flat, unit) < 0) goto done;
        }
    }
    /* units._join_uncuttable, in place */
    Py_ssize_t joined = 0;
    for (Py_ssize_t k = 0; k < flat.count; k++) {
        if (joined > 0 && !measure_separates(m, flat.items[joined - 1].end, flat.items[k].start)) {
            flat.items[joined - 1].end = flat.items[k].end;
            flat.items[joined - 1].block = 1;
            flat.items[joined - 1].heading = flat.items[joined - 1].heading && flat.items[k].heading;
        } else {
            flat.items[joined++] = flat.items[k];
        }
    }
    for (Py_ssize_t k = 0; k < joined; k++) {
        const RawUnit *unit = &flat.items[k];
        int split = split_unit(m, s, how->clauses, unit->start, unit->end, unit->level, unit->heading, unit->index,
                               unit->block ? D_BLOCK : D_TEXT, units);
        if (split != 0) {
            result = split;
            goto done;
        }
    }
    Py_ssize_t n = units->count;
    units->hashes = PyMem_Malloc(sizeof(uint32_t) * (size_t)(n ? n : 1));
    units->before_start = PyMem_Malloc(sizeof(long long) * (size_t)(n ? n : 1));
    units->before_end = PyMem_Malloc(sizeof(long long) * (size_t)(n ? n : 1));
    if (units->hashes == NULL || units->before_start == NULL || units->before_end == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        units->hashes[k] = k == 0 ? 0
                                  : gap_hash(t, units->starts[k - 1], units->ends[k - 1], units->starts[k],
                                             units->ends[k]);
        units->before_start[k] = measure_before(m, units->starts[k]);
        units->before_end[k] = measure_before(m, units->ends[k]);
    }
    result = 0;
done:
    PyMem_Free(flat.items);
    return result;
}

/* units.read_units with sentence's defaults. */
static inline int read_units(Measure *m, const Sizes *s, const Abbreviations *abbreviations, Units *units) {
    BlockSpans blocks = {0};
    Reading how = {0, 0};
    int result = read_blocks(m->t, &blocks) < 0 ? -1 : read_units_of(m, s, abbreviations, &how, &blocks, units);
    PyMem_Free(blocks.items);
    return result;
}

/* packing.threshold */
static long long threshold(int level, uint32_t hash16, const Sizes *s) {
    long long h = (long long)hash16;
    switch (level) {
    case L_SECTION: return s->minimum + ((h * (s->target - s->minimum)) >> 17);
    case L_BLOCK: return s->minimum + ((h * (s->target - s->minimum)) >> 16);
    case L_ITEM: return s->minimum + ((h * (s->cap - s->minimum)) >> 16);
    case L_SENTENCE: return s->target + ((h * (s->cap - s->target)) >> 16);
    default: return s->cap + 1;
    }
}

#define ANCHOR_SHARE (HASH_RANGE / 4) /* packing.ANCHOR_SHARE */

/* packing.is_anchor */
static int is_anchor(int level, uint32_t hash16) {
    return level == L_SECTION || ((level == L_BLOCK || level == L_LINE) && hash16 < ANCHOR_SHARE);
}

/* packing._fills */
static int fills(const Units *u, Py_ssize_t first, Py_ssize_t last, const Sizes *s) {
    if (u->before_end[last] - u->before_start[first] < s->minimum) return 0;
    for (Py_ssize_t k = first; k <= last; k++)
        if (!u->headings[k]) return 1;
    return 0;
}

/* packing.ChunkSizes: the sizes of the chunk starting at unit `first` (NULL: the document's). */
typedef struct {
    Sizes (*at)(void *context, Py_ssize_t first);
    void *context;
} ChunkSizes;

static inline Sizes own_sizes(const ChunkSizes *chunk_sizes, const Sizes *s, Py_ssize_t first) {
    return chunk_sizes == NULL ? *s : chunk_sizes->at(chunk_sizes->context, first);
}

/* packing.pack_segment: pushes (first unit, last unit) of each chunk of units first..end. */
static int pack_segment(const Units *u, const Sizes *s, Py_ssize_t first, Py_ssize_t end,
                        const ChunkSizes *chunk_sizes, Positions *chunks) {
    long long total = u->before_end[end];
    while (first <= end) {
        Sizes own = own_sizes(chunk_sizes, s, first);
        long long base = u->before_start[first];
        if (total - base <= own.cap) {
            if (ARRAY_PUSH(*chunks, first) < 0 || ARRAY_PUSH(*chunks, end) < 0) return -1;
            break;
        }
        Py_ssize_t cut = -1, best = -1, soft = -1, last = first;
        long long best_key = -1, soft_key = -1;
        int content = 0; /* the chunk holds more than heading and rule lines */
        while (last < end) {
            long long size = u->before_end[last] - base;
            if (size > s->cap) break;
            content = content || !u->headings[last];
            int level = u->levels[last + 1];
            if (level == L_FORCED) {
                cut = last;
                break;
            }
            if (content && size >= s->minimum && total - u->before_start[last + 1] >= s->minimum) {
                /* glue: only the hard cap may end a chunk there (packing.pack_segment) */
                if (size >= threshold(level, u->hashes[last + 1], level == L_GLUE ? s : &own)) {
                    cut = last;
                    break;
                }
                long long key = (long long)level * HASH_RANGE + u->hashes[last + 1];
                if (key >= best_key) {
                    best = last;
                    best_key = key;
                }
                if (level >= L_SENTENCE && key >= soft_key) {
                    soft = last;
                    soft_key = key;
                }
            }
            last++;
        }
        if (cut < 0 && total - base <= s->cap) {
            /* the rest fits the hard cap, not the soft one: a gap with a threshold, or all */
            if (soft < 0) {
                if (ARRAY_PUSH(*chunks, first) < 0 || ARRAY_PUSH(*chunks, end) < 0) return -1;
                break;
            }
            cut = soft;
        }
        if (cut < 0) cut = best >= 0 ? best : (last - 1 > first ? last - 1 : first);
        if (ARRAY_PUSH(*chunks, first) < 0 || ARRAY_PUSH(*chunks, cut) < 0) return -1;
        first = cut + 1;
    }
    return 0;
}

/* packing.pack (before settle): pushes (first unit, last unit) of each chunk to `chunks`.
 * anchors: NULL (is_anchor) or one flag per unit; whole: a document within the cap is one
 * chunk; chunk_sizes: NULL or the sizes of each chunk. */
static int pack_with(const Units *u, const Sizes *s, const char *anchors, int whole, const ChunkSizes *chunk_sizes,
                     Positions *chunks) {
    Py_ssize_t count = u->count;
    if (count == 0) return 0;
    if (whole && u->before_end[count - 1] - u->before_start[0] <= own_sizes(chunk_sizes, s, 0).cap)
        return ARRAY_PUSH(*chunks, 0) < 0 || ARRAY_PUSH(*chunks, count - 1) < 0 ? -1 : 0;
    Positions bounds = {0};
    int result = -1;
    if (ARRAY_PUSH(bounds, 0) < 0) goto done;
    Py_ssize_t candidate = 0; /* the anchor before, kept or not */
    for (Py_ssize_t k = 1; k < count; k++)
        if (anchors == NULL ? is_anchor(u->levels[k], u->hashes[k]) : anchors[k]) {
            if (fills(u, candidate, k - 1, s) && ARRAY_PUSH(bounds, k) < 0) goto done;
            candidate = k;
        }
    if (bounds.count > 1 && !fills(u, bounds.items[bounds.count - 1], count - 1, s)) bounds.count--;
    if (ARRAY_PUSH(bounds, count) < 0) goto done;
    for (Py_ssize_t k = 0; k + 1 < bounds.count; k++)
        if (pack_segment(u, s, bounds.items[k], bounds.items[k + 1] - 1, chunk_sizes, chunks) < 0) goto done;
    result = 0;
done:
    PyMem_Free(bounds.items);
    return result;
}

static inline int pack(const Units *u, const Sizes *s, Positions *chunks) { return pack_with(u, s, NULL, 1, NULL, chunks); }

/* -- packing.settle ------------------------------------------------------------------------ */

static long long span_size(const Units *u, Py_ssize_t first, Py_ssize_t last) {
    return u->before_end[last] - u->before_start[first];
}

static int has_content(const Units *u, Py_ssize_t first, Py_ssize_t last) {
    for (Py_ssize_t k = first; k <= last; k++)
        if (!u->headings[k]) return 1;
    return 0;
}

/* Chunks are pairs (first, last) in c[0 .. 2 * *n). packing._join */
static int join_chunk(Py_ssize_t *c, Py_ssize_t *n, Py_ssize_t k, int side, const Units *u, const Sizes *s) {
    Py_ssize_t other = k + side;
    if (other < 0 || other >= *n) return 0;
    Py_ssize_t left = side < 0 ? other : k, right = side < 0 ? k : other;
    if (u->levels[c[2 * right]] == L_FORCED || span_size(u, c[2 * left], c[2 * right + 1]) > s->cap) return 0;
    c[2 * left + 1] = c[2 * right + 1];
    memmove(c + 2 * right, c + 2 * right + 2, sizeof(Py_ssize_t) * (size_t)(2 * (*n - right - 1)));
    (*n)--;
    return 1;
}

/* packing._lend */
static int lend_chunk(Py_ssize_t *c, Py_ssize_t n, Py_ssize_t k, int side, const Units *u, const Sizes *s) {
    Py_ssize_t other = k + side;
    if (other < 0 || other >= n) return 0;
    Py_ssize_t *mine = c + 2 * k, *theirs = c + 2 * other;
    Py_ssize_t boundary = side < 0 ? mine[0] : theirs[0];
    if (u->levels[boundary] == L_FORCED) return 0;
    Py_ssize_t best = -1;
    long long best_key = -1;
    for (Py_ssize_t gap = theirs[0] + 1; gap <= theirs[1]; gap++) {
        Py_ssize_t kept0, kept1, given0, given1;
        if (side < 0) {
            kept0 = theirs[0], kept1 = gap - 1, given0 = gap, given1 = mine[1];
        } else {
            given0 = mine[0], given1 = gap - 1, kept0 = gap, kept1 = theirs[1];
        }
        long long given = span_size(u, given0, given1);
        if (span_size(u, kept0, kept1) >= s->minimum && given >= s->minimum && given <= s->cap &&
            has_content(u, given0, given1) && has_content(u, kept0, kept1)) {
            long long key = (long long)u->levels[gap] * HASH_RANGE + u->hashes[gap];
            if (key > best_key) {
                best = gap;
                best_key = key;
            }
        }
    }
    if (best < 0) return 0;
    if (side < 0) {
        theirs[1] = best - 1;
        mine[0] = best;
    } else {
        mine[1] = best - 1;
        theirs[0] = best;
    }
    return 1;
}

/* packing._unglue */
static void unglue(Py_ssize_t *left, Py_ssize_t *right, const Units *u, const Sizes *s) {
    Py_ssize_t last = left[1];
    if (u->levels[right[0]] == L_GLUE && last > left[0] && u->levels[last] != L_GLUE &&
        u->levels[last] != L_FORCED && span_size(u, left[0], last - 1) >= s->minimum &&
        has_content(u, left[0], last - 1) && span_size(u, last, right[1]) <= s->cap) {
        left[1] = last - 1;
        right[0] = last;
    }
}

/* packing.settle, in place on the pairs of `chunks`. */
static void settle(Positions *chunks, const Units *u, const Sizes *s) {
    Py_ssize_t *c = chunks->items, n = chunks->count / 2, k = 0;
    while (k < n && n > 1) {
        Py_ssize_t first = c[2 * k], last = c[2 * k + 1];
        int bare = !has_content(u, first, last);
        if (!bare && span_size(u, first, last) >= s->minimum) {
            k++;
            continue;
        }
        int sides[2] = {bare ? 1 : -1, bare ? -1 : 1};
        int joined = join_chunk(c, &n, k, sides[0], u, s) ? sides[0] : join_chunk(c, &n, k, sides[1], u, s) ? sides[1] : 0;
        if (joined < 0) {
            k--; /* the joined chunk is the one before: looked at again, then what follows */
        } else if (joined == 0) {
            if (!lend_chunk(c, n, k, sides[0], u, s)) lend_chunk(c, n, k, sides[1], u, s);
            k++;
        }
    }
    for (k = 0; k + 1 < n; k++) unglue(c + 2 * k, c + 2 * k + 2, u, s);
    chunks->count = 2 * n;
}

#endif /* CHUNKSTREAM_PACKING_H */
