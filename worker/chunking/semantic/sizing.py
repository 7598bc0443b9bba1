"""What the embedding strategies count chunk sizes in, and counting many texts at once.

The ``tokenizer`` parameter of ``semantic``, ``sdpm`` and ``context`` names the unit, as it
does the rule strategies' (one resolution for all six: ``size_unit`` in
worker/chunking/strategies.py, which may read a model directory): unset, the retrieval model's
tokens and window (characters without one); ``"character"``; a ``tokenizer.json``; a model
directory, its tokens and window. This module counts in the unit resolved: a
:class:`TokenizerUnit` (with :func:`own_sizing` for a chunker built without the registry).

Tokens are counted without special tokens (``[CLS]``/``[SEP]`` are the model's, not the text's),
so a chunk of ``window`` tokens fills the model's input exactly. When the unit came from the
build context rather than from the parameters, the registry puts the retrieval model's sizing
identity into the strategy's fingerprint: another sizing tokenizer moves boundaries, so it
mints other chunk ids.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from worker.chunking import _native as native
from worker.chunking.text.character_cap import CharacterCap, characters_for
from worker.chunking.text.tokens import (
    CHARACTER,
    PIECE_CACHE_LIMIT,
    CharacterCounter,
    PieceCounter,
    TokenCounter,
    piece_counter,
    remember,
)
from worker.chunking.text.tokens import _load_tokenizer as load_tokenizer
from worker.wordpiece import AsciiWordPiece, take

if TYPE_CHECKING:
    from tokenizers import Tokenizer

# Texts per call into the tokenizer: its encodings hold offsets and masks besides the ids, so a
# whole large document at once would hold several times the document's size.
_COUNT_BATCH = 2048
# Glue sets this small are searched character by character in long texts (_holds_glue).
_FEW_GLUE = 16
_LONG_TEXT = 256


# Pre-tokenizers that cut at every whitespace: no token spans one, so the tokens of two texts
# joined by whitespace are the tokens of each (``TokenizerUnit.glue``: the exceptions).
_WHITESPACE_SPLITTING = frozenset({"BertPreTokenizer", "Whitespace", "WhitespaceSplit"})
_SPLIT_ONLY = frozenset({*_WHITESPACE_SPLITTING, "Punctuation", "Digits"})
# Word pairs that become fewer tokens when glued together ("aa", "unable", "playing").
_PROBES = (("a", "a"), ("un", "able"), ("play", "ing"))


def _splits_at_whitespace(pre_tokenizer: object) -> bool:
    if not isinstance(pre_tokenizer, dict):
        return False
    kind = pre_tokenizer.get("type")
    if kind == "Sequence":
        parts = pre_tokenizer.get("pretokenizers") or []
        types = {part.get("type") for part in parts if isinstance(part, dict)}
        return (
            len(types) == len(parts)
            and types <= _SPLIT_ONLY
            and bool(types & _WHITESPACE_SPLITTING)
        )
    return kind in _WHITESPACE_SPLITTING


class TokenizerUnit:
    """A :class:`~worker.chunking.text.tokens.TokenCounter` over a ``tokenizer.json`` that
    also counts many texts in one call, and knows when counts add up.

    ``additive``: the pre-tokenizer cuts at whitespace, so a text's count is the sum of the
    counts of its whitespace-separated parts — except where a character Python calls whitespace
    is dropped by the tokenizer's normaliser instead (BERT drops the controls ``\x0b``, ``\x0c``,
    ``\x1c``–``\x1f``, ``\x85``): :attr:`glue` lists those, found by probing."""

    def __init__(self, path: str, tokenizer: Tokenizer, memory: PieceMemory | None = None) -> None:
        self._path = path
        self._tokenizer = tokenizer
        # piece -> tokens (words repeat across documents: most are found here, and a text's
        # count is then a sum, no tokenization), shared by every unit of the same tokenizer.
        self._memory = PieceMemory() if memory is None else memory
        config = json.loads(tokenizer.to_str())
        self.additive = _splits_at_whitespace(config.get("pre_tokenizer"))
        # New ASCII words are counted without `tokenizers` (worker.wordpiece: the same ids).
        self._wordpiece = AsciiWordPiece.from_spec(config)
        self.glue = frozenset(
            ch
            for ch in map(chr, range(0x3000 + 1))
            if ch.isspace()
            and any(
                self._encoded(a + ch + b) != self._encoded(a) + self._encoded(b) for a, b in _PROBES
            )
        )
        # One scan in C per text instead of a test per glue character.
        self._glued = (
            re.compile(f"[{re.escape(''.join(sorted(self.glue)))}]") if self.glue else None
        )
        # For long texts a substring search per glue character (a few of them, BERT's: the
        # controls Python calls whitespace) is much faster than the class scan of the regex.
        self._glue_chars = tuple(sorted(self.glue)) if len(self.glue) <= _FEW_GLUE else None
        self._pieces = _piece_counter(path) if self.additive else None
        self._compiled: tuple[bool, native.TextCounts | None] | None = None

    def _compiled_counts(self) -> native.TextCounts | None:
        """The texts whose counts add up counted in C (the cores' memory of this tokenizer's
        pieces: each text's sum over its ``str.split()`` pieces, as :meth:`count_many` gives
        it), or None: a tokenizer the cores' pieces do not fit, no cores, or the switch off
        (asked at each count; the function is kept while the switch stays where it was)."""
        if self._pieces is None:
            return None
        enabled, kept = native.enabled(), self._compiled
        if kept is None or kept[0] != enabled:
            kept = self._compiled = (enabled, native.text_counts(self._pieces))
        return kept[1]

    def adds_up(self, text: str) -> bool:
        """Whether counts add up over the whitespace of ``text``."""
        return self.additive and not self._holds_glue(text)

    def _holds_glue(self, text: str) -> bool:
        if self._glued is None:
            return False
        if self._glue_chars is not None and len(text) > _LONG_TEXT:
            return any(ch in text for ch in self._glue_chars)
        return self._glued.search(text) is not None

    @property
    def unit(self) -> str:
        return self._path

    def _encoded(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids) if text else 0

    def count(self, text: str) -> int:
        if not text:
            return 0
        if self.adds_up(text):
            text_counts = self._compiled_counts()
            if text_counts is not None:
                return text_counts([text])[0]
            return int(self.count_many([text])[0])
        return self._encoded(text)

    def count_many(self, texts: Sequence[str]) -> NDArray[np.int64]:
        """Where counts add up: the sum of the remembered counts of each text's whitespace-
        separated pieces, the unknown pieces counted in one call; elsewhere the tokenizer on
        the whole text. The same numbers either way (tests/chunking/semantic/test_sizing.py)."""
        text_counts = self._compiled_counts()
        if text_counts is not None and self.additive:
            batch = texts if isinstance(texts, list) else list(texts)
            # One scan of them all (a line feed is no glue): the usual batch has no glue at all.
            if not self._holds_glue("\n".join(batch)):
                return np.array(text_counts(batch), dtype=np.int64)
        counts = np.zeros(len(texts), dtype=np.int64)
        whole: list[int] = []
        split: list[tuple[int, list[str]]] = []
        for i, text in enumerate(texts):
            if self.adds_up(text):
                split.append((i, [] if text_counts is not None else text.split()))
            else:
                whole.append(i)
        if split and text_counts is not None:
            counts[[i for i, _ in split]] = text_counts([texts[i] for i, _ in split])
        elif split:
            known = self._memory.known
            wanted = {p for _, pieces in split for p in pieces}
            missing = [p for p in wanted if p not in known]
            if missing and len(known) + len(missing) > PIECE_CACHE_LIMIT:
                # Afresh, with every piece this call needs (the ones known so far included).
                known = self._memory.known = {}
                missing = list(wanted)
            counted: dict[str, int] = {}  # this call's: the long ones are not remembered
            if missing:
                done, missing = take(self._wordpiece, missing)
                counted.update((piece, len(ids)) for piece, ids in done)
                for at in range(0, len(missing), _COUNT_BATCH):
                    part = missing[at : at + _COUNT_BATCH]
                    encodings = self._tokenizer.encode_batch_fast(part, add_special_tokens=False)
                    counted.update(zip(part, (len(e.ids) for e in encodings), strict=True))
                remember(known, counted)
            for i, pieces in split:
                counts[i] = sum(counted[p] if p in counted else known[p] for p in pieces)
        for at in range(0, len(whole), _COUNT_BATCH):
            indexes = whole[at : at + _COUNT_BATCH]
            encodings = self._tokenizer.encode_batch_fast(
                [texts[i] for i in indexes], add_special_tokens=False
            )
            counts[indexes] = [len(e.ids) for e in encodings]
        return counts


class PieceMemory:
    """Token counts of pieces, replaced (never cleared) when full: a count running on another
    thread keeps the dictionary it started with. At most ``PIECE_CACHE_LIMIT`` pieces plus
    those of one call (the memory plan's reserve for sizing counts them:
    worker.runtime.resources)."""

    __slots__ = ("known",)

    def __init__(self) -> None:
        self.known: dict[str, int] = {}


_LOCK = threading.Lock()
# One memory per tokenizer *content*: the retrieval model's tokenizer (sizing) and the boundary
# model's (its window) are usually the same file in two directories.
_MEMORIES: dict[str, PieceMemory] = {}


def load_unit(path: str) -> TokenizerUnit:
    """The unit of the ``tokenizer.json`` at ``path`` (loaded once per process); a
    ``ValueError`` names the file when it cannot be read."""
    # One loaded tokenizer per file for the whole process, shared with the rule strategies.
    tokenizer = load_tokenizer(path)
    digest = _digest(Path(path).resolve())
    with _LOCK:
        memory = _MEMORIES.setdefault(digest, PieceMemory())
    return TokenizerUnit(path, tokenizer, memory)


def count_many(counter: TokenCounter, texts: Sequence[str]) -> NDArray[np.int64]:
    """Each text's size in ``counter``'s unit."""
    if isinstance(counter, TokenizerUnit):
        return counter.count_many(texts)
    if isinstance(counter, CharacterCounter):
        return np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    return np.fromiter((counter.count(t) for t in texts), dtype=np.int64, count=len(texts))


@dataclass(frozen=True)
class Sizing:
    """The unit sizes are counted in and the window no chunk may pass."""

    counter: TokenCounter
    window: int | None
    """Most tokens of text the embedding model reads (``None``: not known or characters)."""

    @property
    def characters(self) -> bool:
        return isinstance(self.counter, CharacterCounter)

    def adds_up(self, text: str) -> bool:
        """Whether a span's size in ``text`` is the sum of the sizes of its whitespace-separated
        parts (characters: never, the whitespace counts too)."""
        return isinstance(self.counter, TokenizerUnit) and self.counter.adds_up(text)

    def cap(self, chunk_size: int) -> int:
        """``chunk_size`` lowered to the window: the rest of a longer chunk would never reach
        its vector."""
        return chunk_size if self.window is None else min(chunk_size, self.window)

    def character_cap(self, cap: int) -> CharacterCap | None:
        """The hard cap in characters of chunks of at most ``cap`` in this unit (None in
        characters, where ``cap`` is one already): :mod:`..text.character_cap`."""
        if self.characters:
            return None
        return CharacterCap(characters_for(self.window, cap), self.counter.count)


CHARACTERS = Sizing(CharacterCounter(), None)


def own_sizing(tokenizer: str | None) -> Sizing:
    """The unit a chunker built without the registry reads from its own ``tokenizer``
    parameter: characters, or a ``tokenizer.json`` (no window). A model directory and the
    retrieval model are resolved by the registry's factories, with the rule strategies'
    (worker/chunking/strategies.py)."""
    if tokenizer is None or tokenizer == CHARACTER:
        return CHARACTERS
    return Sizing(load_unit(tokenizer), None)


def _piece_counter(path: str) -> PieceCounter | None:
    """The rule strategies' counter of ``path``'s pieces, whose memory the cores keep, or None
    when the tokenizer is not one they count (not BERT-style: the unit counts on its own)."""
    try:
        return piece_counter(path)
    except ValueError:
        return None


_DIGESTS: dict[Path, str] = {}


def _digest(path: Path) -> str:
    """The sha256 of the (resolved) tokenizer file ``path``, read once per process."""
    with _LOCK:
        digest = _DIGESTS.get(path)
        if digest is None:
            try:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError as exc:
                raise ValueError(f"cannot read tokenizer {str(path)!r}: {exc}") from None
            _DIGESTS[path] = digest
    return digest
