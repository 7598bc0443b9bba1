"""The ``sentence`` strategy: whole sentences and blocks, cut where the text's structure and
content say, under a hard size cap.

Chunks are contiguous slices of the document (``text == doc[start_index:end_index]``), in
order, and together cover every non-whitespace character. The document is read into units
(:mod:`..text.units`: a paragraph's sentences, whole code blocks, tables, list items, quotes,
headings) and packed by content-defined boundaries (:mod:`..text.packing`): section breaks
first, then paragraph breaks, list items, sentences; a heading and a line ending in ``:`` stay
with what follows; no chunk under an eighth of the cap unless the document is that small; an
edit moves only the boundaries near it.

:meth:`SentenceChunker.chunk_reference` is the definition; the compiled core
(``_native/_sentence_core.c``) gives the same chunks, and :meth:`SentenceChunker.chunk` runs it
when it is built.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Annotated, cast

import msgspec

from worker.chunking import _native as native
from worker.chunking.rules.sizing import SENTENCE_TOKENS, Sizing, own_sizing
from worker.chunking.text.character_cap import cap_chunks
from worker.chunking.text.packing import Sizes, pack
from worker.chunking.text.segment import ABBREVIATIONS
from worker.chunking.text.tokens import PieceCounter
from worker.chunking.text.units import Measure, WordCutter, read_units, word_cutter
from worker.chunking.types import Chunk, ContentType

NAME = "sentence"


class SentenceParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    chunk_size: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Hard cap per chunk in the unit of ``tokenizer``; unset: the model's window in tokens,
    1000 in characters (rules/sizing.py)."""
    tokenizer: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    """``"character"``, a ``tokenizer.json``, or a model directory; unset: the retrieval
    model's tokens when the worker has one, else characters."""


def _configure(core: ModuleType) -> None:
    core.configure(sorted(ABBREVIATIONS), Chunk, NAME)


# text, cap, the core's memory of piece counts for the tokenizer and the PieceCounter's
# count_pieces (None, None: characters), word_cuts.cut_word for a word over the cap ->
# chunks, or None when the document needs the twin (such a word and no cut_word).
_NativeChunk = Callable[
    [str, int, object | None, Callable[[list[str]], list[int]] | None, WordCutter | None],
    list[Chunk] | None,
]


# memory, texts, count_pieces -> each text's count (the core's count_texts, _units.h).
_CountTexts = Callable[[object, list[str], Callable[[list[str]], list[int]]], list[int]]


# text, start, end, clauses -> segment.split_sentences(text[start:end], clauses=clauses,
# soft_wraps=True) as flat [start, end) pairs of offsets in text (_layout_sentences.h).
LayoutSentences = Callable[[str, int, int, bool], list[int]]


def _load_core() -> tuple[_NativeChunk, native.NewCache, _CountTexts, LayoutSentences] | None:
    core = native.load("_sentence_core", _configure)
    if core is None:
        return None
    return (
        cast(_NativeChunk, core.chunk),
        cast(native.NewCache, core.new_cache),
        cast(_CountTexts, core.count_texts),
        cast(LayoutSentences, core.sentences),
    )


_CORE = _load_core()
NATIVE_CHUNK = None if _CORE is None else _CORE[0]
"""The compiled core's entry point, or None when it is not built (or not allowed)."""


def _memory(counter: PieceCounter) -> object:
    """The cores' memory of piece counts for ``counter`` (one per tokenizer, shared)."""
    assert _CORE is not None
    return native.piece_memory(counter, _CORE[1])


def compiled_text_counts(counter: PieceCounter) -> Callable[[list[str]], list[int]] | None:
    """Token counts of whole texts that add up at whitespace (each the sum over its
    ``str.split()`` pieces), from the cores' memory of ``counter``'s pieces and its compiled
    WordPiece path; the pieces neither knows go to ``counter.count_pieces``. For the embedding
    strategies' sizing (the same counts as theirs: tests/chunking/semantic/test_compiled_sizing.py).
    None when the core is not built or not allowed."""
    if _CORE is None:
        return None
    memory, count_texts, count_pieces = _memory(counter), _CORE[2], counter.count_pieces
    return lambda texts: count_texts(memory, texts, count_pieces)


def compiled_layout_sentences() -> LayoutSentences | None:
    """The embedding strategies' paragraph sentences in C (the rules of
    ``segment.split_sentences`` with soft wraps, stated with the abbreviations this module
    configures the core with), or None when the core is not built or not allowed."""
    return None if _CORE is None else _CORE[3]


class SentenceChunker:
    """Packs units into chunks of at most the cap (see the module docstring)."""

    def __init__(self, params: SentenceParams | None = None, sizing: Sizing | None = None) -> None:
        self.params = params or SentenceParams()
        self.sizing = own_sizing(self.params.tokenizer) if sizing is None else sizing
        self.sizes = Sizes(self.sizing.cap(self.params.chunk_size, tokens=SENTENCE_TOKENS))
        self.characters = self.sizing.character_cap(self.sizes.cap)
        """The hard cap in characters beside the cap in tokens (None in characters)."""

    @property
    def resolved(self) -> SentenceParams:
        """The parameters with the unset sizes as this chunker resolved them in its unit."""
        return msgspec.structs.replace(self.params, chunk_size=self.sizes.cap)

    def chunk(self, text: str, *, content_type: ContentType = "text/plain") -> list[Chunk]:
        """Chunks of ``text``: the compiled core when it is built, else
        :meth:`chunk_reference`; both return the same chunks."""
        if NATIVE_CHUNK is not None:
            counter = self.sizing.counter
            cut = word_cutter(counter)
            if counter is None:
                chunks = NATIVE_CHUNK(text, self.sizes.cap, None, None, cut)
            else:
                memory = _memory(counter)
                chunks = NATIVE_CHUNK(text, self.sizes.cap, memory, counter.count_pieces, cut)
            if chunks is not None:
                return cap_chunks(text, chunks, self.characters, self.sizes.cap)
        return self.chunk_reference(text, content_type=content_type)

    def chunk_reference(
        self, text: str, *, content_type: ContentType = "text/plain"
    ) -> list[Chunk]:
        """The pure-Python definition of :meth:`chunk` (the compiled core's twin)."""
        sizes = self.sizes
        measure = Measure(text, self.sizing.counter)
        units = read_units(text, measure, sizes.limit, sizes.cap)
        chunks: list[Chunk] = []
        for index, (first, last) in enumerate(pack(units, sizes)):
            start, end = units.starts[first], units.ends[last]
            chunks.append(
                Chunk(
                    text=text[start:end],
                    start_index=start,
                    end_index=end,
                    token_count=units.before_end[last] - units.before_start[first],
                    strategy=NAME,
                    metadata={"chunk_index": index},
                )
            )
        return cap_chunks(text, chunks, self.characters, sizes.cap)
