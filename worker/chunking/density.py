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
_UNGLUE = str.maketrans(_GLUE, " " * len(_GLUE))
_CODE_PUNCTUATION_DELETED = str.maketrans("", "", CODE_PUNCTUATION)
_DECIMAL = re.compile(r"[0-9]\.[0-9]")
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
    words = sample.translate(_UNGLUE).split()
    if not words:
        return 0.0
    chars = len(sample)
    tech_hits = sum(map(TECH_WORDS.__contains__, words))
    tech_hits += chars - len(sample.translate(_CODE_PUNCTUATION_DELETED))
    if "." in sample:
        tech_hits += len(_DECIMAL.findall(sample))
    tech = min(tech_hits / max(chars / 100, 1), 1.0)
    unique = len(set(words).difference(STOP_WORDS_ANY_CASE)) / len(words)
    avg_word_length = sum(map(len, words)) / len(words)
    arabic = 0.0
    if not sample.isascii():
        arabic = min(len(_ARABIC_COMPLEX.findall(sample)) / max(chars / 200, 1), 1.0)
    score = 0.4 * tech + 0.3 * unique + 0.2 * min(avg_word_length / 10, 1.0) + 0.1 * arabic
    # Rounded so that metadata and size targets never hinge on float noise.
    return round(min(max(score, 0.0), 1.0), 4)
