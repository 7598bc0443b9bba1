"""The ``sentence`` strategy: whole sentences packed greedily up to a hard size cap.

The baseline every other strategy is measured against. Chunks are contiguous slices of the
document (``text == doc[start_index:end_index]``), in order, and together cover every
non-whitespace character. A sentence longer than the cap is cut at words, then characters.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from worker.chunking.text.segment import cap_spans, pack_spans, split_sentences
from worker.chunking.text.tokens import CHARACTER, CharacterCounter, TokenCounter, make_counter
from worker.chunking.types import Chunk, ContentType

NAME = "sentence"


class SentenceParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    chunk_size: Annotated[int, msgspec.Meta(ge=1)] = 1000
    """Hard cap per chunk, in the unit of ``tokenizer``."""
    tokenizer: Annotated[str, msgspec.Meta(min_length=1)] = CHARACTER
    """``"character"`` or the path of a Hugging Face ``tokenizer.json``."""


class SentenceChunker:
    """Packs sentences into chunks of at most ``chunk_size`` units."""

    def __init__(self, params: SentenceParams | None = None) -> None:
        self.params = params or SentenceParams()
        self._counter: TokenCounter = make_counter(self.params.tokenizer)

    def chunk(self, text: str, *, content_type: ContentType = "text/plain") -> list[Chunk]:
        # Markdown is chunked as text here: lists, headings, tables, quotes and fenced code
        # keep their line breaks as sentence ends, while hard-wrapped prose is read as if it
        # were unwrapped; structure-aware chunking is what the `lexical` strategy is for.
        cap = self.params.chunk_size
        counter = self._counter
        pieces = cap_spans(text, split_sentences(text, soft_wraps=True), counter, cap)
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
