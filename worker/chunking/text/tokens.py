"""Token counting units: how a strategy measures the size of a piece of text.

A unit is either ``"character"`` (the length of the Python ``str``, the default) or the path
of a Hugging Face ``tokenizer.json``, counted with the ``tokenizers`` library without special
tokens, so a count is what the text itself costs inside a model's window.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from worker.wordpiece import AsciiWordPiece, WordPieceTables, take

if TYPE_CHECKING:
    from tokenizers import Tokenizer

CHARACTER = "character"
DEFAULT_WINDOW = 254
"""The window in tokens taken where no model gives one: all-MiniLM-L6-v2's (256 less [CLS]
and [SEP]), the default retrieval model's."""


@runtime_checkable
class TokenCounter(Protocol):
    """Measures text in one unit. ``count`` must be deterministic and ``count("") == 0``."""

    @property
    def unit(self) -> str: ...

    def count(self, text: str) -> int: ...


@runtime_checkable
class ManyCounter(TokenCounter, Protocol):
    """A counter that also counts many texts in one call, each exactly as ``count`` would."""

    def count_many(self, texts: Sequence[str]) -> Sequence[int]: ...


def count_each(counter: TokenCounter, texts: Sequence[str]) -> list[int]:
    """``counter.count`` of every text, in one call when the counter can count many at once."""
    if isinstance(counter, ManyCounter):
        return [int(n) for n in counter.count_many(texts)]
    return [counter.count(text) for text in texts]


class CharacterCounter:
    """One unit per Unicode code point (``len`` of the ``str``)."""

    unit = CHARACTER

    def count(self, text: str) -> int:
        return len(text)


# Loading a tokenizer.json parses a vocabulary of tens of thousands of entries; every chunker
# built for the same path shares one instance. Keyed by the resolved path so that two
# spellings of one file do not load it twice.
_TOKENIZERS: dict[str, Tokenizer] = {}
_TOKENIZERS_LOCK = threading.Lock()


def _load_tokenizer(path: str) -> Tokenizer:
    from tokenizers import Tokenizer

    key = str(Path(path).resolve())
    with _TOKENIZERS_LOCK:
        tokenizer = _TOKENIZERS.get(key)
        if tokenizer is None:
            if not Path(key).is_file():
                raise ValueError(f"tokenizer file not found: {path!r}")
            try:
                tokenizer = Tokenizer.from_file(key)
            except Exception as exc:  # the library raises plain Exception on a bad file
                raise ValueError(f"cannot load tokenizer {path!r}: {exc}") from exc
            # Counting must see the whole text: a truncating or padding tokenizer.json would
            # make every long text look short.
            tokenizer.no_truncation()
            tokenizer.no_padding()
            _TOKENIZERS[key] = tokenizer
        return tokenizer


NOT_SEPARATORS = "\x0b\x0c\x1c\x1d\x1e\x1f\x85"
"""Whitespace to ``str.isspace`` that a BERT normalizer drops as a control character, so that
the text on both sides of it reads as one word: never a place where token counts add up."""

_ADDITIVE_PRE_TOKENIZERS = ("BertPreTokenizer",)
_PER_CHARACTER_NORMALIZERS = (None, "BertNormalizer")
PIECE_CACHE_LIMIT = 1 << 16
"""Pieces whose counts a :class:`PieceCounter` remembers; past it the memory starts afresh."""
PIECE_MEMORY_MAX_CHARS = 1 << 8
"""Longer pieces are counted but not remembered: not words (a base64 blob, a hex dump, a
minified line, a run cut for the character cap), they would not come again, and remembered
they would hold up to :data:`PIECE_CACHE_LIMIT` times their length long after their documents
(one of millions of characters would have stayed until the memory started afresh). The
compiled cores' memory bounds its stored characters instead (``_piece_cache.h``)."""


def remember(known: dict[str, int], counted: dict[str, int]) -> None:
    """``counted`` into the memory ``known``, but the pieces too long to keep."""
    known.update((p, n) for p, n in counted.items() if len(p) <= PIECE_MEMORY_MAX_CHARS)


class PieceCounter:
    """Token counts of whitespace-free pieces of text, remembered across documents.

    Only for tokenizers whose count of a text is the sum of the counts of its pieces: a BERT
    pre-tokenizer (splits at whitespace, isolates every punctuation character) after a
    per-character normalizer. So a document's pieces are counted once each (words repeat: most
    are found in the memory), and a chunk's count is a sum, never a new tokenization.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._tokenizer = _load_tokenizer(path)
        # New ASCII words are counted without `tokenizers` (worker.wordpiece: the same ids).
        self._wordpiece = AsciiWordPiece.from_spec(_check_additive(path))
        self._known: dict[str, int] = {}

    @property
    def unit(self) -> str:
        return self.path

    @property
    def known(self) -> dict[str, int]:
        """The memory: piece -> count (the compiled core reads it directly)."""
        return self._known

    def wordpiece_tables(self) -> WordPieceTables | None:
        """What the compiled cores count new ASCII pieces with (None: they ask
        :meth:`count_pieces` for every piece they miss)."""
        return None if self._wordpiece is None else self._wordpiece.tables()

    def count_exact(self, text: str) -> int:
        if not text:
            return 0
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def count(self, text: str) -> int:
        """:class:`TokenCounter`'s ``count``: the text tokenized whole."""
        return self.count_exact(text)

    def count_pieces(self, pieces: list[str]) -> list[int]:
        # The memory is replaced, never cleared: a call running beside this one on another
        # thread keeps the dictionary it read, with every piece it counted (clearing the
        # shared one took them away: a KeyError below, found through the worker).
        known = self._known
        missing = list({piece for piece in pieces if piece not in known})
        if not missing:
            return [known[piece] for piece in pieces]
        if len(known) + len(missing) > PIECE_CACHE_LIMIT:
            # Afresh, with every piece this call needs.
            known = self._known = {}
            missing = list(set(pieces))
        done, left = take(self._wordpiece, missing)
        counted = {piece: len(ids) for piece, ids in done}
        if left:
            encodings = self._tokenizer.encode_batch(left, add_special_tokens=False)
            counted.update(zip(left, (len(e.ids) for e in encodings), strict=True))
        remember(known, counted)
        return [counted[piece] if piece in counted else known[piece] for piece in pieces]


def _check_additive(path: str) -> dict[str, Any]:
    import json

    try:
        with open(path, encoding="utf-8") as file:
            spec = json.load(file)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read tokenizer {path!r}: {exc}") from exc
    pre = (spec.get("pre_tokenizer") or {}).get("type")
    normalizer = (spec.get("normalizer") or {}).get("type")
    if pre not in _ADDITIVE_PRE_TOKENIZERS or normalizer not in _PER_CHARACTER_NORMALIZERS:
        raise ValueError(
            f"tokenizer {path!r} (pre-tokenizer {pre}, normalizer {normalizer}): sizes in tokens "
            "need a BERT-style tokenizer (BertPreTokenizer, BertNormalizer), whose counts add up "
            "over whitespace-separated pieces"
        )
    return cast(dict[str, Any], spec)


_PIECE_COUNTERS: dict[str, PieceCounter] = {}


def piece_counter(path: str) -> PieceCounter:
    """The shared :class:`PieceCounter` of a ``tokenizer.json`` (one memory per tokenizer)."""
    key = str(Path(path).resolve())
    with _TOKENIZERS_LOCK:
        counter = _PIECE_COUNTERS.get(key)
    if counter is None:
        counter = PieceCounter(path)
        with _TOKENIZERS_LOCK:
            counter = _PIECE_COUNTERS.setdefault(key, counter)
    return counter
