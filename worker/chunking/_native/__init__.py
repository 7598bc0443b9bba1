"""The compiled chunking cores and the one way they are loaded.

The rule-based strategies ``sentence``, ``adaptive`` and ``lexical`` have a compiled core (C,
built by ``setup.py`` as optional extensions living in this folder, with ``.pyi`` stubs) and a
pure-Python twin that defines their behaviour. Both give identical chunks: tests compare them.

One convention for every core:

- a strategy module loads its core with :func:`load`, handing it the function that configures
  the core from the module's own tables (the Python side is where every rule and word list is
  stated; the C receives them);
- it keeps the configured entry point in a module attribute named ``NATIVE_CHUNK``, ``None``
  when the core is not built or not allowed; its chunker calls the twin when it is ``None``
  (tests monkeypatch it to ``None`` to force the twin);
- ``CHUNKSTREAM_PURE_PYTHON=1`` makes :func:`load` return ``None`` for every core (to compare,
  or to rule the cores out while debugging); ``CHUNKSTREAM_REQUIRE_NATIVE=1`` makes
  ``tests/chunking/test_native.py`` fail when a core was not built (CI sets it).
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol
from weakref import WeakKeyDictionary

from worker.wordpiece import WordPieceTables

PURE_PYTHON_ENV = "CHUNKSTREAM_PURE_PYTHON"
REQUIRE_NATIVE_ENV = "CHUNKSTREAM_REQUIRE_NATIVE"


def allowed() -> bool:
    """False when the environment asks for the pure-Python twins."""
    return os.environ.get(PURE_PYTHON_ENV, "") != "1"


def load(name: str, configure: Callable[[ModuleType], None]) -> ModuleType | None:
    """The core ``worker.chunking._native.<name>``, configured, or None when it is not built
    or the twins are forced."""
    if not allowed():
        return None
    try:
        core = importlib.import_module(f"{__name__}.{name}")
    except ImportError:
        return None
    configure(core)
    return core


# The cores' memory of token counts per piece (_piece_cache.h): one per tokenizer (per
# PieceCounter, which every chunker of one tokenizer shares), dropped with it, and shared by
# the cores: each includes the same header, so a memory made by one core's new_cache() is
# read by any of them (the capsule's name is checked). It carries the tokenizer's compiled
# WordPiece path (_wordpiece.h) for the ASCII pieces it misses.
_MEMORIES: WeakKeyDictionary[object, object] = WeakKeyDictionary()
_MEMORIES_LOCK = threading.Lock()


NewCache = Callable[[WordPieceTables | None], object]
"""A core's ``new_cache``: a memory of piece counts, with the tokenizer's WordPiece tables."""


class PieceCounting(Protocol):
    """What a memory needs of its PieceCounter (worker.chunking.text.tokens)."""

    def wordpiece_tables(self) -> WordPieceTables | None: ...


def piece_memory(counter: PieceCounting, new_cache: NewCache) -> object:
    """The memory of piece counts for ``counter`` (made with ``new_cache`` the first time)."""
    with _MEMORIES_LOCK:
        memory = _MEMORIES.get(counter)
        if memory is None:
            memory = _MEMORIES[counter] = new_cache(counter.wordpiece_tables())
        return memory


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
    twins are forced. Not thread-safe: its caller holds a lock around each call. ``limit``: ids
    remembered before the memory starts afresh (the header's bound; smaller in tests)."""
    if not allowed():
        return None
    try:
        core = importlib.import_module(f"{__name__}._sentence_core")
    except ImportError:
        return None
    memory = core.new_id_memory(tables) if limit is None else core.new_id_memory(tables, limit)
    limit = -1 if max_length is None else max_length
    unk = -1 if unknown is None else unknown

    def sums(texts: list[str], out: Any) -> list[int]:
        counts: list[int] = core.static_sums(
            memory, texts, ids_of_pieces, limit, unk, matrix, mapping, weights, out
        )
        return counts

    return sums
