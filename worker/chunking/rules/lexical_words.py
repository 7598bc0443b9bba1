r"""Words and keywords of the ``lexical`` strategy: counting them per chunk and telling them
apart across a document.

Invariants: a *keyword* is a lower-cased run of at least ``lexicon.KEYWORD_MIN_LETTERS``
letters (``[^\W\d_]``) that is not a stop word; a *word* is a whitespace-separated run
(``str.split``). Every fast path here (byte tables, numpy over the whole document) gives
exactly what the regex or ``str.split`` gives; where it could not (a non-ASCII character
that may belong to a keyword), it declines and the regex runs.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from itertools import compress
from typing import Any

import numpy as np
from numpy.typing import NDArray

from worker.chunking.text import lexicon
from worker.chunking.text.lexicon import LEXICAL_MAX_CHARS
from worker.chunking.types import Chunk

# Runs of at least KEYWORD_MIN_LETTERS letters.
_KEYWORD = re.compile(rf"[^\W\d_]{{{lexicon.KEYWORD_MIN_LETTERS},}}")
# The same runs without the regex engine: ASCII letters lower-cased and every other byte a
# space (see letter_runs), then split.
_ASCII_LETTERS = bytes(
    c | 0x20 if chr(c).isascii() and chr(c).isalpha() else 0x20 for c in range(256)
)
_ASCII_RUN_MARKS = bytes(0x61 if c != 0x20 else 0x20 for c in range(256))  # on _ASCII_LETTERS
_RUN = b"a" * lexicon.KEYWORD_MIN_LETTERS
_SPACED_RUN = b" " + _RUN
_LONG_ENOUGH = (lexicon.KEYWORD_MIN_LETTERS - 1).__lt__
_STOP_KEYWORDS = frozenset(
    w.encode("ascii") for w in lexicon.STOP_WORDS if len(w) >= lexicon.KEYWORD_MIN_LETTERS
)


_ASCII_BYTES = bytes(range(128))
# A non-ASCII character that is part of a keyword run: what [^\W\d_] accepts.
_KEYWORD_CHAR = re.compile(r"[^\W\d_]")


def letter_runs(body: str) -> bytes | None:
    """``body`` with ASCII letters lower-cased and every other character a space, or None
    when a non-ASCII character could belong to a keyword (then only the regex is exact).

    Most non-ASCII text in READMEs is punctuation and symbols (dashes, quotes, emoji): those
    separate words exactly like ASCII punctuation, so the byte-level path still applies. The
    non-ASCII characters are found by deleting every ASCII byte (a C-level pass).
    """
    raw = body.encode("utf-8", "surrogatepass")
    if len(raw) != len(body):
        rest = raw.translate(None, _ASCII_BYTES).decode("utf-8", "surrogatepass")
        if _KEYWORD_CHAR.search(rest) is not None:
            return None
    # UTF-8 lead and continuation bytes are all >= 0x80: they become spaces.
    return raw.translate(_ASCII_LETTERS)


# ASCII whitespace (what str.split() cuts at) as " ", every other byte as "a".
_ASCII_WORD_MARKS = bytes(0x20 if chr(c).isspace() else 0x61 for c in range(128)) + b"a" * 128


def word_count(body: str) -> int:
    """``len(body.split())``, without building the words on ASCII text."""
    if body.isascii():
        marks = body.encode("ascii").translate(_ASCII_WORD_MARKS)
        return marks.count(b" a") + marks.startswith(b"a")
    return len(body.split())


def keyword_count(body: str) -> int:
    """Keyword occurrences in ``body`` (stop words left out)."""
    letters = letter_runs(body)
    if letters is not None:
        # Each run of KEYWORD_MIN_LETTERS or more letters is one " aaaa" (or a leading
        # "aaaa") once its letters are all written "a": counted without a Python-level step.
        marks = letters.translate(_ASCII_RUN_MARKS)
        runs = marks.count(_SPACED_RUN) + marks.startswith(_RUN)
        return runs - sum(map(_STOP_KEYWORDS.__contains__, letters.split()))
    found = _KEYWORD.findall(body.lower())
    return len(found) - sum(map(lexicon.STOP_WORDS.__contains__, found))


# -- whole-document words and keywords ------------------------------------------------------------
#
# When no non-ASCII character of a document can belong to a keyword (see letter_runs), its
# whitespace-separated words and its keyword runs are found once, with numpy, and a block's
# keyword set or a chunk's counts become bisections. Keywords are then told apart by a 64-bit
# polynomial hash of their lower-cased letters (a collision needs two different keywords of
# one document to share 64 bits).

_SPACE_TABLE = np.array([chr(c).isspace() for c in range(0x3002)], dtype=bool)  # last: False
_LETTER_TABLE = np.array([chr(c).isascii() and chr(c).isalpha() for c in range(128)])
_HASH_P = 0x100000001B3
_HASH_P_INV = pow(_HASH_P, -1, 1 << 64)
_HASH_CACHE_LIMIT = 1 << 20
_hash_powers: tuple[NDArray[np.uint64], NDArray[np.uint64]] | None = None


def _powers64(size: int) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """P**i and P**-i modulo 2**64 for i < size (kept for reuse up to a limit)."""
    global _hash_powers
    cached = _hash_powers
    if cached is not None and len(cached[0]) >= size:
        return cached
    length = max(size, 1 << 14)
    if size <= _HASH_CACHE_LIMIT:
        grown = 2 * len(cached[0]) if cached is not None else 0
        length = min(max(length, grown), _HASH_CACHE_LIMIT)
    forward = np.full(length, _HASH_P, dtype=np.uint64)
    backward = np.full(length, _HASH_P_INV, dtype=np.uint64)
    forward[0] = backward[0] = 1
    tables = (np.cumprod(forward), np.cumprod(backward))
    if length <= _HASH_CACHE_LIMIT:
        _hash_powers = tables
    return tables


def keyword_hash(word: str) -> int:
    """The id :class:`DocumentWords` gives the keyword ``word`` (lower-case ASCII)."""
    total, power, mask = 0, 1, (1 << 64) - 1
    for ch in word:
        total = (total + ord(ch) * power) & mask
        power = (power * _HASH_P) & mask
    return total


_STOP_KEYWORD_IDS = np.array(
    sorted({keyword_hash(w.decode("ascii")) for w in _STOP_KEYWORDS}), dtype=np.uint64
)


def _edges(inside: NDArray[np.bool_]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Starts and ends of the runs of True in ``inside[1:-1]`` (both ends padded False)."""
    edges = (inside[1:] != inside[:-1]).nonzero()[0]
    return edges[0::2], edges[1::2]


class DocumentWords:
    """The word starts and keyword runs (start offsets and ids) of one document."""

    __slots__ = ("_keyword_starts", "_longest", "keyword_ids", "keyword_starts", "word_starts")

    def __init__(self, text: str) -> None:
        size = len(text)
        if text.isascii():
            codes: NDArray[Any] = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
            spaces, letters = _SPACE_TABLE.take(codes), _LETTER_TABLE.take(codes)
        else:
            codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
            spaces = _SPACE_TABLE.take(np.minimum(codes, len(_SPACE_TABLE) - 1))
            letters = _LETTER_TABLE.take(np.minimum(codes, 127))  # U+007F is not a letter
        inside = np.zeros(size + 2, dtype=bool)
        np.logical_not(spaces, out=inside[1:-1])
        starts, ends = _edges(inside)
        self.word_starts = starts
        self._longest = int((ends - starts).max()) if len(starts) else 0
        inside[1:-1] = letters
        starts, ends = _edges(inside)
        long = (ends - starts) >= lexicon.KEYWORD_MIN_LETTERS
        starts, ends = starts[long], ends[long]
        forward, backward = _powers64(size)
        terms = codes.astype(np.uint64)
        terms |= np.uint64(0x20)  # lower case (only letters are read)
        terms *= forward[:size]
        prefix = np.zeros(size + 1, dtype=np.uint64)
        terms.cumsum(out=prefix[1:])
        ids = prefix[ends]
        ids -= prefix[starts]
        ids *= backward[starts]
        index = _STOP_KEYWORD_IDS.searchsorted(ids)
        np.minimum(index, len(_STOP_KEYWORD_IDS) - 1, out=index)
        keep = _STOP_KEYWORD_IDS[index] != ids
        self._keyword_starts = starts[keep]
        self.keyword_starts: list[int] = self._keyword_starts.tolist()
        self.keyword_ids: list[int] = ids[keep].tolist()

    @classmethod
    def of(cls, text: str) -> DocumentWords | None:
        """The document's words, or None when only the per-block reading is exact: a
        non-ASCII character could be part of a keyword, or a whitespace-free run is longer
        than the cap (then a block may be cut inside a word)."""
        if not text or letter_runs(text) is None:
            return None
        words = cls(text)
        return None if words._longest > LEXICAL_MAX_CHARS else words

    def keywords(self, start: int, end: int) -> frozenset[int]:
        starts = self.keyword_starts
        return frozenset(self.keyword_ids[bisect_left(starts, start) : bisect_left(starts, end)])

    def densities(self, chunks: list[Chunk]) -> list[float]:
        """``keyword_density`` of every chunk (keyword occurrences over words in its span),
        counted for all chunks at once."""
        starts = np.array([c.start_index for c in chunks], dtype=np.int64)
        ends = np.array([c.end_index for c in chunks], dtype=np.int64)
        words = self.word_starts.searchsorted(ends) - self.word_starts.searchsorted(starts)
        found = self._keyword_starts.searchsorted(ends) - self._keyword_starts.searchsorted(starts)
        return [
            round(k / w, 4) if w else 0.0
            for k, w in zip(found.tolist(), words.tolist(), strict=True)
        ]


def keyword_set(body: str) -> frozenset[str]:
    """The distinct keywords of ``body`` (stop words left out)."""
    letters = letter_runs(body)
    if letters is not None:
        runs = list(set(letters.decode("ascii").split()))
        # Runs of at least KEYWORD_MIN_LETTERS letters, filtered without a Python-level loop.
        found = frozenset(compress(runs, map(_LONG_ENOUGH, map(len, runs))))
    else:
        found = frozenset(_KEYWORD.findall(body.lower()))
    return found.difference(lexicon.STOP_WORDS)
