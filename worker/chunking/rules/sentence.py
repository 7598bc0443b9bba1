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
(``_native/_sentence_core.c``, reached through :mod:`worker.chunking._native`) gives the same
chunks, and :meth:`SentenceChunker.chunk` runs it when it is built and the switch is on.
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
from worker.chunking.text.units import Measure, WordCutter, read_units
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


# text, cap, the cores' memory of piece counts for the tokenizer and the PieceCounter's
# count_pieces (None, None: characters), word_cuts.cut_word for a word over the cap ->
# chunks, or None when the document needs the twin (such a word and no cut_word).
CompiledChunk = Callable[
    [str, int, object | None, Callable[[list[str]], list[int]] | None, WordCutter | None],
    list[Chunk] | None,
]


def compiled() -> CompiledChunk | None:
    """The compiled core's entry point, configured, or None when it is not built or the
    switch is off (:mod:`worker.chunking._native`)."""
    core = native.core(native.SENTENCE_CORE, _configure)
    return None if core is None else cast(CompiledChunk, core.chunk)


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
        core, measured = compiled(), native.measured_by(self.sizing.counter)
        if core is not None and measured is not None:
            chunks = core(text, self.sizes.cap, *measured)
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
