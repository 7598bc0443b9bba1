"""The compiled chunking cores: the one seam every room reaches them through, and its one
switch.

The rule-based strategies ``sentence``, ``adaptive`` and ``lexical`` have a compiled core (C,
built by ``setup.py`` as optional extensions living in this folder, with ``.pyi`` stubs) and a
pure-Python twin that defines their behaviour; the embedding strategies' layout reads its
sentences, and their sizing counts texts, through the sentence core, and a static model sums
its rows through it. Every compiled path gives what its Python twin gives: tests compare them.

- This module is the only one that imports a core (:func:`core`). A room asks it for a core at
  the moment it needs one, with the function that configures that core from the room's own
  tables (the Python side is where every rule and word list is stated; the C receives them);
  each configuring function runs once per process.
- The switch: ``CHUNKSTREAM_PURE_PYTHON=1`` turns every compiled path off, read at each
  request, so a test (``monkeypatch.setenv``) or a debugging session sets it in one place
  for every room; :func:`core` then answers None, and each caller runs its twin.
  ``CHUNKSTREAM_REQUIRE_NATIVE=1`` makes ``tests/chunking/test_native.py`` fail when a core was
  not built (CI sets it).
- The model room sits below chunking and may not import it: the inference room hands a static
  model :func:`static_sums` when it loads one (``worker.inference.serving.compile_static``).
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol
from weakref import WeakKeyDictionary

from worker.chunking.text.segment import ABBREVIATIONS
from worker.chunking.text.tokens import PieceCounter
from worker.chunking.text.units import WordCutter, word_cutter
from worker.wordpiece import WordPieceTables

PURE_PYTHON_ENV = "CHUNKSTREAM_PURE_PYTHON"
REQUIRE_NATIVE_ENV = "CHUNKSTREAM_REQUIRE_NATIVE"
SENTENCE_CORE = "_sentence_core"
"""The core that also serves the layout's sentences, text counts and static rows: they share
its sentence rules and its memory of piece counts."""

Configure = Callable[[ModuleType], None]


def enabled() -> bool:
    """The switch: False when the environment asks for the pure-Python twins."""
    return os.environ.get(PURE_PYTHON_ENV, "") != "1"


_LOADED: dict[str, ModuleType | None] = {}
_CONFIGURED: set[tuple[str, Configure]] = set()
_LOCK = threading.Lock()


def core(name: str, configure: Configure | None = None) -> ModuleType | None:
    """The core ``worker.chunking._native.<name>``, configured by ``configure`` (once per
    process for each function), or None when it is not built or the switch is off."""
    if not enabled():
        return None
    module = _LOADED.get(name)
    if module is not None and (configure is None or (name, configure) in _CONFIGURED):
        return module
    with _LOCK:
        if name not in _LOADED:
            try:
                _LOADED[name] = importlib.import_module(f"{__name__}.{name}")
            except ImportError:
                _LOADED[name] = None
        module = _LOADED[name]
        if module is not None and configure is not None and (name, configure) not in _CONFIGURED:
            configure(module)
            _CONFIGURED.add((name, configure))
    return module


def _sentence_rules(module: ModuleType) -> None:
    """The sentence core's own rules (segment.ABBREVIATIONS), for what it serves beside the
    ``sentence`` strategy (which configures the rest: rules/sentence.py)."""
    module.configure_rules(sorted(ABBREVIATIONS))


# -- the memory of piece counts ------------------------------------------------------------------

# The cores' memory of token counts per piece (_piece_cache.h): one per tokenizer (per
# PieceCounter, which every chunker of one tokenizer shares), dropped with it, and shared by
# the cores: each includes the same header, so a memory made by one core's new_cache() is
# read by any of them (the capsule's name is checked). It carries the tokenizer's compiled
# WordPiece path (_wordpiece.h) for the ASCII pieces it misses.
_MEMORIES: WeakKeyDictionary[object, object] = WeakKeyDictionary()
_MEMORIES_LOCK = threading.Lock()


class PieceCounting(Protocol):
    """What a memory needs of its PieceCounter (worker.chunking.text.tokens)."""

    def wordpiece_tables(self) -> WordPieceTables | None: ...

    def count_pieces(self, pieces: list[str]) -> list[int]: ...


def piece_memory(counter: PieceCounting) -> object | None:
    """The cores' memory of piece counts for ``counter`` (made the first time), or None when
    the cores are not built or the switch is off."""
    module = core(SENTENCE_CORE)
    if module is None:
        return None
    with _MEMORIES_LOCK:
        memory = _MEMORIES.get(counter)
        if memory is None:
            memory = _MEMORIES[counter] = module.new_cache(counter.wordpiece_tables())
        return memory


Measured = tuple[object | None, Callable[[list[str]], list[int]] | None, WordCutter]
"""What a rule core measures with, its last three arguments: the memory of piece counts and
the counter's ``count_pieces`` (None, None: characters), and the cutter of a word over the cap
(word_cuts.cut_word in the unit)."""


def measured_by(counter: PieceCounter | None) -> Measured | None:
    """The arguments a rule core measures in ``counter``'s unit with (characters when None),
    or None when the cores are not built or the switch is off: the caller runs its twin."""
    if counter is None:
        return (None, None, word_cutter(None)) if enabled() else None
    memory = piece_memory(counter)
    return None if memory is None else (memory, counter.count_pieces, word_cutter(counter))


TextCounts = Callable[[list[str]], list[int]]
"""Each text's token count, as the sum over its ``str.split()`` pieces."""


def text_counts(counter: PieceCounting) -> TextCounts | None:
    """Token counts of whole texts that add up at whitespace, from the cores' memory of
    ``counter``'s pieces and its compiled WordPiece path (the pieces neither knows go to
    ``counter.count_pieces``), for the embedding strategies' sizing (the same counts as
    theirs: tests/chunking/semantic/test_compiled_sizing.py); None when the cores are off."""
    module = core(SENTENCE_CORE)
    memory = None if module is None else piece_memory(counter)
    if module is None or memory is None:
        return None
    count_texts, count_pieces = module.count_texts, counter.count_pieces

    def counts(texts: list[str]) -> list[int]:
        found: list[int] = count_texts(memory, texts, count_pieces)
        return found

    return counts


# -- what the sentence core serves besides the strategy ------------------------------------------

LayoutSentences = Callable[[str, int, int, bool], list[int]]
"""text, start, end, clauses -> segment.split_sentences(text[start:end], clauses=clauses,
soft_wraps=True) as flat [start, end) pairs of offsets in text (_layout_sentences.h)."""


def layout_sentences() -> LayoutSentences | None:
    """The embedding strategies' paragraph sentences in C (the rules of
    ``segment.split_sentences`` with soft wraps, with its abbreviations), or None when the
    sentence core is not built or the switch is off."""
    module = core(SENTENCE_CORE, _sentence_rules)
    if module is None:
        return None
    sentences: LayoutSentences = module.sentences
    return sentences


StaticSums = Callable[[list[str], Any], list[int]]
"""``sums(texts, out)``: a static model's rows of each text summed into ``out`` (float64
``[len(texts), dim]``, zeros) and divided by their number, which is returned per text (-1: a
text the caller must tokenize whole). See ``_static_rows.h``."""


def static_sums(
    tables: WordPieceTables | None,
    ids_of_pieces: Callable[[list[str]], list[bytes]],
    matrix: Any,
    mapping: Any,
    weights: Any,
    max_length: int | None,
    unknown: int | None,
    *,
    limit: int | None = None,
) -> StaticSums | None:
    """The compiled rows of a static model (``worker.models.static``, whose room may not import
    the cores: the worker's loader hands it this), or None when the core is not built or the
    switch is off. Not thread-safe: its caller holds a lock around each call. ``limit``: ids
    remembered before the memory starts afresh (the header's bound; smaller in tests)."""
    module = core(SENTENCE_CORE)
    if module is None:
        return None
    memory = module.new_id_memory(tables) if limit is None else module.new_id_memory(tables, limit)
    length = -1 if max_length is None else max_length
    unk = -1 if unknown is None else unknown

    def sums(texts: list[str], out: Any) -> list[int]:
        counts: list[int] = module.static_sums(
            memory, texts, ids_of_pieces, length, unk, matrix, mapping, weights, out
        )
        return counts

    return sums
