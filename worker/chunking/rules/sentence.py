"""The ``sentence`` strategy: whole sentences packed greedily up to a hard size cap.

The baseline every other strategy is measured against. Chunks are contiguous slices of the
document (``text == doc[start_index:end_index]``), in order, and together cover every
non-whitespace character. A sentence longer than the cap is cut at words, then characters.

:meth:`SentenceChunker.chunk_reference` is the definition; the compiled core
(``_native/_sentence_core.c``) gives the same chunks, and :meth:`SentenceChunker.chunk` runs it
when it is built: the whole strategy for the character unit, the segmentation alone for a
tokenizer unit (the tokenizer is a Python object).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Annotated, cast

import msgspec

from worker.chunking import _native as native
from worker.chunking.text.segment import ABBREVIATIONS, cap_spans, pack_spans, split_sentences
from worker.chunking.text.tokens import CHARACTER, CharacterCounter, TokenCounter, make_counter
from worker.chunking.types import Chunk, ContentType, Span

NAME = "sentence"


class SentenceParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    chunk_size: Annotated[int, msgspec.Meta(ge=1)] = 1000
    """Hard cap per chunk, in the unit of ``tokenizer``."""
    tokenizer: Annotated[str, msgspec.Meta(min_length=1)] = CHARACTER
    """``"character"`` or the path of a Hugging Face ``tokenizer.json``."""


def _configure(core: ModuleType) -> None:
    core.configure(sorted(ABBREVIATIONS), Chunk, NAME)


_NativeChunk = Callable[[str, int], list[Chunk]]
_NativeSentences = Callable[[str], list[int]]


def _load_core() -> tuple[_NativeChunk, _NativeSentences] | None:
    core = native.load("_sentence_core", _configure)
    if core is None:
        return None
    return cast(_NativeChunk, core.chunk), cast(_NativeSentences, core.sentences)


_CORE = _load_core()
NATIVE_CHUNK: _NativeChunk | None = None if _CORE is None else _CORE[0]
"""The compiled core's entry point (character unit), or None when it is not built (or not
allowed)."""
NATIVE_SENTENCES: _NativeSentences | None = None if _CORE is None else _CORE[1]
"""The core's ``split_sentences(text, soft_wraps=True)`` as flat offsets, or None."""


class SentenceChunker:
    """Packs sentences into chunks of at most ``chunk_size`` units."""

    def __init__(self, params: SentenceParams | None = None) -> None:
        self.params = params or SentenceParams()
        self._counter: TokenCounter = make_counter(self.params.tokenizer)

    def chunk(self, text: str, *, content_type: ContentType = "text/plain") -> list[Chunk]:
        """Chunks of ``text``: the compiled core when it is built, else
        :meth:`chunk_reference`; both return the same chunks."""
        if isinstance(self._counter, CharacterCounter):
            if NATIVE_CHUNK is not None:
                return NATIVE_CHUNK(text, self.params.chunk_size)
            return self.chunk_reference(text, content_type=content_type)
        if NATIVE_SENTENCES is None:
            return self.chunk_reference(text, content_type=content_type)
        flat = iter(NATIVE_SENTENCES(text))
        return self._pack(text, [Span(start, end) for start, end in zip(flat, flat, strict=True)])

    def chunk_reference(
        self, text: str, *, content_type: ContentType = "text/plain"
    ) -> list[Chunk]:
        """The pure-Python definition of :meth:`chunk` (the compiled core's twin)."""
        # Markdown is chunked as text here: lists, headings, tables, quotes and fenced code
        # keep their line breaks as sentence ends, while hard-wrapped prose is read as if it
        # were unwrapped; structure-aware chunking is what the `lexical` strategy is for.
        return self._pack(text, split_sentences(text, soft_wraps=True))

    def _pack(self, text: str, sentences: list[Span]) -> list[Chunk]:
        cap = self.params.chunk_size
        counter = self._counter
        pieces = cap_spans(text, sentences, counter, cap)
        chunks: list[Chunk] = []
        for index, group in enumerate(pack_spans(text, pieces, counter, cap)):
            body = text[group.start : group.end]
            size = len(body) if isinstance(counter, CharacterCounter) else counter.count(body)
            chunks.append(
                Chunk(
                    text=body,
                    start_index=group.start,
                    end_index=group.end,
                    token_count=size,
                    strategy=NAME,
                    metadata={"chunk_index": index},
                )
            )
        return chunks
