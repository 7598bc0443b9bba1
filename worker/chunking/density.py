"""Information density of a piece of text, a number in [0, 1].

    density = 0.4 · min(tech_hits / max(chars / 100, 1), 1)
            + 0.3 · unique_vocab_ratio
            + 0.2 · min(avg_word_length / 10, 1)
            + 0.1 · min(arabic_complex_words / max(chars / 200, 1), 1)

* ``tech_hits``: words of :data:`~worker.chunking.lexicon.TECH_WORDS` (case as written, so
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
from typing import Final

from worker.chunking.lexicon import (
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
