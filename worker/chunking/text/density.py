"""Information density of a piece of text, a number in [0, 1].

    density = 0.4 · min(tech_hits / max(chars / 100, 1), 1)
            + 0.3 · unique_vocab_ratio
            + 0.2 · min(avg_word_length / 10, 1)
            + 0.1 · min(arabic_complex_words / max(chars / 200, 1), 1)

* ``tech_hits``: words of :data:`~worker.chunking.text.lexicon.TECH_WORDS` (case as written, so
  ``SELECT`` counts and the English "select" does not), each code punctuation character
  ``{}<>[]()=;``, and each decimal number.
* ``unique_vocab_ratio``: distinct words that are not stop words, over all words. Function
  words are left out so that plain narrative ("Once upon a time…") scores low however varied
  its nouns are.
* ``avg_word_length``: mean length of the words, punctuation removed.
* ``arabic_complex_words``: Arabic-script words of at least seven letters (diacritics not
  counted as letters).

Only a bounded sample is read: up to :data:`SAMPLE_CHARS` characters, spread over a longer
range as evenly spaced windows. Density steers a size target, it does not need every word,
and a fixed read keeps the cost per chunk flat however large the range is.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from worker.chunking.text.lexicon import (
    ARABIC_COMPLEX_MIN_LETTERS,
    CODE_PUNCTUATION,
    STOP_WORDS_ANY_CASE,
    TECH_WORDS,
)

SAMPLE_CHARS: Final = 1024
"""Most characters read to estimate the density of any range."""
SAMPLE_WINDOWS: Final = 4
"""A range longer than the sample is read as this many evenly spaced windows."""

# Punctuation that glues to words ("return;", "(JSON)", "API,") becomes a space before the
# text is cut into words. "." is kept so that decimals stay whole.
_GLUE = ",;:!?\"'`()[]{}<>=*|\\/+-%&^~@#$"
# The same mapping on UTF-8 bytes, which ``bytes.translate`` applies an order of magnitude
# faster than ``str.translate``. Every glue character is ASCII and no byte of a multi-byte
# UTF-8 sequence is ASCII, so encode → translate → decode equals ``str.translate``. ASCII
# whitespace becomes a plain space too (``split`` treats it alike), so that an ASCII sample's
# word characters are simply its length minus its spaces.
_ASCII_SPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"
_UNGLUE_BYTES = bytes.maketrans(
    (_GLUE + _ASCII_SPACE).encode(), b" " * (len(_GLUE) + len(_ASCII_SPACE))
)
_CODE_PUNCTUATION_BYTES = CODE_PUNCTUATION.encode()
# A decimal is a digit, a dot and a digit, counted left to right without overlap (as
# ``re.findall(r"[0-9]\.[0-9]")`` would): with every digit written as "0", that is exactly
# ``bytes.count(b"0.0")``, which runs without the regex engine's per-position cost.
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_ARABIC_COMPLEX = re.compile(
    r"(?:[\u0620-\u064a\u066e-\u06d3\u06fa-\u06ff][\u064b-\u065f\u0670]*)"
    rf"{{{ARABIC_COMPLEX_MIN_LETTERS},}}"
)


def _sample(text: str, start: int, end: int) -> str:
    if end - start <= SAMPLE_CHARS:
        return text[start:end]
    width = SAMPLE_CHARS // SAMPLE_WINDOWS
    step = (end - start - width) // (SAMPLE_WINDOWS - 1)
    return " ".join(
        text[start + k * step : start + k * step + width] for k in range(SAMPLE_WINDOWS)
    )


def density(text: str, start: int = 0, end: int | None = None) -> float:
    """The information density of ``text[start:end]`` (the whole text by default)."""
    sample = _sample(text, start, len(text) if end is None else end)
    ascii_only = sample.isascii()
    # "surrogatepass": a lone surrogate survives the round trip instead of raising.
    raw = sample.encode("utf-8", "surrogatepass")
    unglued = raw.translate(_UNGLUE_BYTES).decode("utf-8", "surrogatepass")
    words = unglued.split()
    if not words:
        return 0.0
    count = len(words)
    chars = len(sample)
    vocabulary = set(words)
    tech_hits = len(raw) - len(raw.translate(None, _CODE_PUNCTUATION_BYTES))
    tech_words = vocabulary.intersection(TECH_WORDS)
    if tech_words:
        tech_hits += sum(map(words.count, tech_words))
    if b"." in raw:
        tech_hits += raw.translate(_DIGITS_AS_ZERO).count(b"0.0")
    tech = min(tech_hits / max(chars / 100, 1), 1.0)
    unique = (len(vocabulary) - len(STOP_WORDS_ANY_CASE.intersection(vocabulary))) / count
    # Word characters: an ASCII sample's non-spaces (all its whitespace became " ").
    letters = chars - unglued.count(" ") if ascii_only else sum(map(len, words))
    avg_word_length = letters / count
    arabic = 0.0
    if not ascii_only:
        arabic = min(len(_ARABIC_COMPLEX.findall(sample)) / max(chars / 200, 1), 1.0)
    score = 0.4 * tech + 0.3 * unique + 0.2 * min(avg_word_length / 10, 1.0) + 0.1 * arabic
    # Rounded so that metadata and size targets never hinge on float noise.
    return round(min(max(score, 0.0), 1.0), 4)


# -- whole-document profile ---------------------------------------------------------------------
#
# ``adaptive`` needs the density of many windows of one document. Instead of reading each
# window's words again, one pass classifies every character (a lookup table on code points),
# finds the words and the technical hits, and the density of any window then comes from
# prefix sums. See :class:`DocumentProfile` for the exact definition.

# Character classes, one bit each.
_SEP = 1  # whitespace or glue punctuation: separates words
_PUNCT = 2  # code punctuation {}<>[]()=;
_DIGIT = 4  # ASCII digit
_DOT = 8  # "."
_BREAK = 16  # "\n": where a line, and so perhaps a code fence, starts (the core's scan)


def _class_table() -> np.ndarray[Any, np.dtype[np.uint8]]:
    table = np.zeros(0x110000, dtype=np.uint8)
    # Every character str.isspace() accepts lies below U+3001.
    for code in range(0x3001):
        if chr(code).isspace():
            table[code] |= _SEP
    for ch in _GLUE:
        table[ord(ch)] |= _SEP
    for ch in CODE_PUNCTUATION:
        table[ord(ch)] |= _PUNCT
    table[ord("0") : ord("9") + 1] |= _DIGIT
    table[ord(".")] |= _DOT
    table[ord("\n")] |= _BREAK
    return table


_CLASS = _class_table()
_ASCII_CLASS = _CLASS[:256].tobytes()  # the same table for bytes.translate on ASCII text

# Word identity without building word strings: a polynomial hash over code points, modulo
# 2**32 (numpy's unsigned arithmetic wraps). H(w) = Σ (ord(w[i]) + 1) · P**i: the + 1 keeps
# NUL from adding nothing ("0" and "0\x00" must differ; appending any character changes the
# hash, since (c + 1) · P**i is never 0 modulo 2**32 for an odd P). With prefix sums
# C[k] = Σ_{i<k} (ord(text[i]) + 1) · P**i, a word at [s, e) hashes to (C[e] − C[s]) · P**−s:
# P is odd, so it has an inverse modulo 2**32. Two different words share a hash with
# probability about 2**−32: a collision only nudges a density estimate.
_P = 0x01000193
_P_INV = pow(_P, -1, 1 << 32)
_MASK = (1 << 32) - 1
_POWER_CACHE_LIMIT = 1 << 21
"""Power tables up to this length are kept between documents; longer ones are not."""
_powers: tuple[NDArray[np.uint32], NDArray[np.uint32]] | None = None


def _power_tables(size: int) -> tuple[NDArray[np.uint32], NDArray[np.uint32]]:
    """P**i and P**−i modulo 2**32 for i < size (at least; kept for reuse up to a limit)."""
    global _powers
    cached = _powers  # one read: another thread may replace the pair meanwhile
    if cached is not None and len(cached[0]) >= size:
        return cached
    length = max(size, 1 << 16)
    if size <= _POWER_CACHE_LIMIT:
        length = min(
            max(length, 2 * len(cached[0]) if cached is not None else 0), _POWER_CACHE_LIMIT
        )
    forward = np.full(length, _P, dtype=np.uint32)
    forward[0] = 1
    backward = np.full(length, _P_INV, dtype=np.uint32)
    backward[0] = 1
    tables = (np.cumprod(forward, dtype=np.uint32), np.cumprod(backward, dtype=np.uint32))
    if length <= _POWER_CACHE_LIMIT:
        _powers = tables
    return tables


def word_hash(word: str) -> int:
    """The hash :class:`DocumentProfile` gives ``word`` (for the sorted word tables)."""
    total = 0
    power = 1
    for ch in word:
        total = (total + (ord(ch) + 1) * power) & _MASK
        power = (power * _P) & _MASK
    return total


def _hash_table(words: Iterable[str]) -> NDArray[np.uint64]:
    return np.array(sorted({word_hash(w) for w in words}), dtype=np.uint64)


_TECH_HASHES = _hash_table(TECH_WORDS)
_STOP_HASHES = _hash_table(STOP_WORDS_ANY_CASE)


def _member(sorted_table: NDArray[np.uint64], values: NDArray[np.uint64]) -> NDArray[np.bool_]:
    index = sorted_table.searchsorted(values)
    np.minimum(index, len(sorted_table) - 1, out=index)
    return sorted_table[index] == values  # type: ignore[no-any-return]


def _word_features(
    codes: NDArray[Any], starts: NDArray[np.intp], ends: NDArray[np.intp], out: NDArray[np.int64]
) -> tuple[int, list[int]]:
    """Per word: ``out[:, 1]`` = is a technical word. Returns the number of distinct words
    that are not stop words, and each word's :func:`word_hash` (-1 for a stop word).

    Words are told apart by :func:`word_hash`, computed for all at once from prefix sums."""
    size = int(ends[-1])
    forward, backward = _power_tables(size)
    terms = codes[:size].astype(np.uint32)
    terms += 1
    terms *= forward[:size]
    prefix = np.empty(size + 1, dtype=np.uint32)
    prefix[0] = 0
    terms.cumsum(out=prefix[1:])
    hashes = prefix[ends]
    hashes -= prefix[starts]
    hashes *= backward[starts]
    wide = hashes.astype(np.uint64)
    stop = _member(_STOP_HASHES, wide)
    out[:, 1] = _member(_TECH_HASHES, wide)
    keys = wide.astype(np.int64)
    keys[stop] = -1
    distinct = len(np.unique(keys[~stop]))
    return distinct, keys.tolist()


class DocumentProfile:
    """One pass over a document: its density, and the density of any window of it.

    :meth:`density` gives the density of a window ``[start, end)``: the formula of
    :func:`density` on the window's totals, with these definitions (all additive, so that
    prefix sums give every window):

    * words are the runs between whitespace/glue, as in :func:`density`; a word belongs to the
      window that holds its first character, and its letters count with it;
    * ``tech_hits``: code punctuation characters in the window, "digit.digit" dots in it
      (every such dot, so ``1.2.3`` counts two), and the window's words in ``TECH_WORDS``;
    * ``unique_vocab_ratio``: the window's distinct words that are not stop words, over all
      its words (told apart by :func:`word_hash`): the window's own vocabulary, so that its
      density depends on its text alone (an edit before a window leaves its density alone);
    * Arabic complex words: counted by their first letter.

    A window without words has density 0.
    """

    def __init__(self, text: str) -> None:
        size = len(text)
        # A trailing space is a sentinel: every look at "the next character" stays in bounds
        # and the last word ends before it.
        ascii_text = text.isascii()
        if ascii_text:
            raw = text.encode("ascii") + b" "
            codes: NDArray[Any] = np.frombuffer(raw, dtype=np.uint8)
            classes = np.frombuffer(raw.translate(_ASCII_CLASS), dtype=np.uint8)
            arabic = False
        else:
            codes = np.frombuffer((text + " ").encode("utf-32-le", "surrogatepass"), np.uint32)
            classes = _CLASS.take(codes)
            arabic = _ARABIC_LETTER.search(text) is not None
        # Technical marks: code punctuation, and dots between two digits (a marked character
        # is never the first one when it is a dot with a digit before it; index -1 is the
        # sentinel, not a digit).
        sparse = ((classes & (_PUNCT | _DOT)) != 0).nonzero()[0]
        sparse_classes = classes[sparse]
        decimal = (sparse_classes & _DOT) != 0
        decimal &= (classes[sparse - 1] & classes[sparse + 1] & _DIGIT) != 0
        self._hit_marks: list[int] = sparse[((sparse_classes & _PUNCT) != 0) | decimal].tolist()
        # -- words: maximal runs of non-separators (the sentinel ends the last one)
        separator = (classes & _SEP).view(bool)
        edges = (separator[1:] != separator[:-1]).nonzero()[0]
        edges += 1
        if not separator[0]:
            edges = np.concatenate(([0], edges))
        starts, ends = edges[0::2], edges[1::2]
        count = len(starts)
        # Running totals by word index: letters, technical words.
        totals = np.zeros((count + 1, 2), dtype=np.int64)
        totals[1:, 0] = ends - starts
        distinct, self._keys = _word_features(codes, starts, ends, totals[1:]) if count else (0, [])
        totals.cumsum(axis=0, out=totals)
        self._complex: list[int] = (
            [m.start() for m in _ARABIC_COMPLEX.finditer(text)] if arabic else []
        )
        self.document_density = _document_density(
            text if not ascii_text else raw,
            size,
            count,
            distinct,
            int(np.count_nonzero(sparse_classes & _PUNCT)) + int(totals[-1, 1]),
            int(totals[-1, 0]),
            len(self._complex),
        )
        self._word_starts: list[int] = starts.tolist()
        self._letters: list[int] = totals[:, 0].tolist()
        self._tech: list[int] = totals[:, 1].tolist()

    def density(self, start: int, end: int) -> float:
        """The density of the window ``text[start:end]`` (see the class docstring)."""
        first = bisect_left(self._word_starts, start)
        last = bisect_left(self._word_starts, end)
        if last == first:
            return 0.0
        words = last - first
        chars = end - start
        hits = bisect_left(self._hit_marks, end) - bisect_left(self._hit_marks, start)
        hits += self._tech[last] - self._tech[first]
        score = 0.4 * min(hits / max(chars / 100, 1), 1.0)
        vocabulary = set(self._keys[first:last])
        vocabulary.discard(-1)
        score += 0.3 * len(vocabulary) / words
        score += 0.2 * min((self._letters[last] - self._letters[first]) / words / 10, 1.0)
        if self._complex:
            found = bisect_left(self._complex, end) - bisect_left(self._complex, start)
            score += 0.1 * min(found / max(chars / 200, 1), 1.0)
        # As numpy's round(4), which the compiled core follows: rint(x * 10**4) / 10**4.
        return round(min(max(score, 0.0), 1.0) * 10000.0) / 10000.0


def _document_density(
    text: str | bytes,
    chars: int,
    words: int,
    distinct: int,
    tech_hits: int,
    letters: int,
    arabic: int,
) -> float:
    """The formula of :func:`density` on whole-document totals (no sample). ``text`` (or its
    bytes) is read once more for the decimals, counted exactly as :func:`density` does."""
    if not words:
        return 0.0
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    if b"." in raw:
        tech_hits += raw.translate(_DIGITS_AS_ZERO).count(b"0.0")
    return density_from_totals(chars, words, distinct, tech_hits, letters, arabic)


def density_from_totals(
    chars: int, words: int, distinct: int, tech_hits: int, letters: int, arabic: int
) -> float:
    """The formula of :func:`density` on a document's totals (``tech_hits`` with decimals)."""
    if not words:
        return 0.0
    tech = min(tech_hits / max(chars / 100, 1), 1.0)
    score = (
        0.4 * tech
        + 0.3 * distinct / words
        + 0.2 * min(letters / words / 10, 1.0)
        + 0.1 * min(arabic / max(chars / 200, 1), 1.0)
    )
    return round(min(max(score, 0.0), 1.0), 4)


_ARABIC_LETTER = re.compile(r"[\u0620-\u064a\u066e-\u06d3\u06fa-\u06ff]")
_NOT_ARABIC_LEAD = bytes(b for b in range(256) if not 0xD8 <= b <= 0xDB)
_NOT_ASCII_LETTERS = bytes(b for b in range(256) if not (b < 128 and chr(b).isalpha()))


def detect_language(text: str) -> str:
    """``ar`` when the text has more characters of the Arabic block (U+0600-U+06FF) than
    ASCII letters, else ``en``: which of the strategies' language rules (Arabic clause
    cuts) the text calls for, not a language detector. (``adaptive``'s core counts the
    same in C.)"""
    if text.isascii():
        return "en"
    raw = text.encode("utf-8", "surrogatepass")
    # UTF-8 lead bytes 0xD8-0xDB are exactly U+0600-U+06FF: C-level byte passes, no regex.
    arabic = len(raw.translate(None, _NOT_ARABIC_LEAD))
    return "ar" if arabic > len(raw.translate(None, _NOT_ASCII_LETTERS)) else "en"


def native_tables() -> tuple[bytes, list[int], list[int]]:
    """What the compiled core of ``adaptive`` reads from this module: the class of every code
    point, and the hashes of the technical and the stop words."""
    return _CLASS.tobytes(), _TECH_HASHES.tolist(), _STOP_HASHES.tolist()


def local_density(text: str, start: int = 0, end: int | None = None) -> float:
    """The density :class:`DocumentProfile` gives the window ``text[start:end]``."""
    piece = text[start:end]
    return DocumentProfile(piece).density(0, len(piece))
