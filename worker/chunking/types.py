"""The chunk type every strategy returns, and the two shapes a strategy can take.

A *rule* strategy is a pure function of the text (``chunk``). An *embedding* strategy is
split sans-I/O style into ``plan`` (what must be embedded) and ``assemble`` (chunks from the
plan plus the embeddings), so the worker can route the embedding step through the shared
micro-batcher while the chunking logic stays pure and testable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec
import numpy as np
from numpy.typing import NDArray

ContentType = Literal["text/plain", "text/markdown"]

# Strategy metadata is JSON-shaped (numbers, strings, lists, nested maps); it is produced by our
# own code, never decoded from input, so a loose value type costs no safety at the boundary.
Metadata = dict[str, Any]


class Span(msgspec.Struct, frozen=True):
    """A half-open character range ``[start, end)`` into the original document text; encoded
    as chunk events carry it (``{"start": s, "end": e}``, ``wire.events.ChunkSpan``)."""

    start: int
    end: int


class Chunk(msgspec.Struct, frozen=True):
    """One retrieval unit.

    ``start_index``/``end_index`` are character offsets (Python ``str`` indices) into the
    original document, end exclusive. For contiguous chunks ``text == doc[start:end]``.
    Strategies that assemble non-adjacent pieces (filtered context) list them in ``spans``;
    then ``text`` is exactly the pieces joined by :data:`SPAN_JOINER` in document order, and
    ``start_index``/``end_index`` are the first span's start and the last span's end.
    """

    text: str
    start_index: int
    end_index: int
    token_count: int
    strategy: str
    metadata: Metadata = msgspec.field(default_factory=dict)
    spans: tuple[Span, ...] | None = None


# Join rule for non-contiguous chunks: pieces are separated by one newline. A newline never
# glues two words together and keeps each piece's own text byte-exact.
SPAN_JOINER = "\n"


def join_spans(text: str, spans: Sequence[Span]) -> str:
    """The text of a non-contiguous chunk: its pieces in order, joined by :data:`SPAN_JOINER`."""
    return SPAN_JOINER.join(text[s.start : s.end] for s in spans)


@runtime_checkable
class RuleChunker(Protocol):
    """A strategy that needs no model: ``chunk`` is pure and synchronous."""

    def chunk(self, text: str, *, content_type: ContentType = "text/plain") -> list[Chunk]: ...


class EmbeddingPlan(Protocol):
    """What an embedding strategy needs embedded for one document."""

    @property
    def texts(self) -> Sequence[str]: ...


@runtime_checkable
class EmbeddingChunker(Protocol):
    """A strategy driven by sentence embeddings, split into pure halves around the model."""

    def plan(self, text: str, *, content_type: ContentType = "text/plain") -> EmbeddingPlan: ...

    def assemble(self, plan: EmbeddingPlan, embeddings: NDArray[np.float32]) -> list[Chunk]: ...


Chunker = RuleChunker | EmbeddingChunker
