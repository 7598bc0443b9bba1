"""The ``semantic`` strategy: cut where the similarity between neighbouring sentences dips.

``plan``: sentence units (:func:`.units.sentence_units`; sentences shorter than
``min_characters_per_sentence`` join their neighbour) and the texts to embed, each once.
``assemble``:

1. one vector per unit; across every gap, the cosine similarity of the size-weighted means of
   up to ``similarity_window`` units on each side (``similarity.gap_similarities``);
2. the valleys of that curve (:func:`.similarity.local_minima`, no smoothing);
3. ``threshold`` is read as a percentile: the cut is the ``threshold × 100``-th percentile of the
   valley similarities, and every valley at or below it is a candidate boundary (0.8 → the 80 %
   least similar valleys are candidates; a lower threshold cuts less often);
4. candidates are placed deepest first, keeping ``min_sentences_per_chunk`` units per chunk;
5. a segment over ``chunk_size`` (in the unit of ``tokenizer``) is packed greedily into pieces
   that fit: those extra starts are *cap* splits.

Chunks are contiguous slices of the document. Each chunk's metadata says why it starts where it
does: ``start`` is ``"document"``, ``"boundary"`` (with ``boundary_similarity`` and the
document's ``percentile_cut``) or ``"cap"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Annotated, Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from worker.chunking.semantic.model_window import ModelWindow, character_window
from worker.chunking.semantic.similarity import (
    gap_similarities,
    local_minima,
    percentile_cut,
    spaced_boundaries,
)
from worker.chunking.semantic.units import (
    SentencePlan,
    merge_params,
    plan_units,
    sentence_units,
    unit_vectors,
)
from worker.chunking.text.segment import pack_spans
from worker.chunking.text.tokens import CHARACTER, CharacterCounter, TokenCounter, make_counter
from worker.chunking.types import Chunk, ContentType, EmbeddingPlan, Metadata, Span

NAME = "semantic"


class SemanticParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    chunk_size: Annotated[int, msgspec.Meta(ge=1)] = 2048
    """Hard cap per chunk, in the unit of ``tokenizer``."""
    threshold: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] = 0.8
    """Percentile (as a fraction) of the valley similarities at or below which a valley cuts."""
    similarity_window: Annotated[int, msgspec.Meta(ge=1)] = 3
    """Units averaged on each side of a gap when measuring its similarity."""
    min_sentences_per_chunk: Annotated[int, msgspec.Meta(ge=1)] = 1
    """Fewest units between two semantic boundaries (cap splits may still cut closer)."""
    min_characters_per_sentence: Annotated[int, msgspec.Meta(ge=0)] = 24
    """Sentences shorter than this many characters join their neighbour."""
    tokenizer: Annotated[str, msgspec.Meta(min_length=1)] = CHARACTER
    """``"character"`` or the path of a ``tokenizer.json`` (counted without special tokens)."""


@dataclass(frozen=True)
class Group:
    """A run of units ``[first, stop)`` that becomes one chunk, and why it starts there."""

    first: int
    stop: int
    start: str  # "document" | "boundary" | "cap"
    similarity: float | None = None


@dataclass(frozen=True)
class FirstPass:
    """The groups of one document, with the curve values that placed their boundaries."""

    groups: list[Group]
    percentile_cut: float | None
    valleys: int


def unit_size(text: str, span: Span, counter: TokenCounter) -> int:
    if isinstance(counter, CharacterCounter):
        return span.end - span.start
    return counter.count(text[span.start : span.end])


def first_pass(
    plan: SentencePlan,
    vectors: NDArray[np.float64],
    counter: TokenCounter,
    *,
    cap: int,
    threshold: float,
    window: int,
    min_units: int,
) -> FirstPass:
    """Semantic boundaries, then cap packing: the groups every embedding strategy starts from."""
    text, units = plan.document, plan.units
    count = len(units)
    if count == 0:
        return FirstPass([], None, 0)
    curve = gap_similarities(vectors, plan.sizes, window)
    valleys = local_minima(curve)
    cut: float | None = None
    cuts: list[int] = []
    if valleys:
        cut = percentile_cut([float(curve[g]) for g in valleys], threshold)
        candidates = [g for g in valleys if curve[g] <= cut]
        cuts = [g + 1 for g in spaced_boundaries(candidates, curve, count, min_units)]
    groups: list[Group] = []
    edges = [0, *cuts, count]
    for a, b in pairwise(edges):
        start = "document" if a == 0 else "boundary"
        similarity = float(curve[a - 1]) if a > 0 else None
        if unit_size(text, Span(units[a].start, units[b - 1].end), counter) <= cap:
            groups.append(Group(a, b, start, similarity))
            continue
        index_of = {units[i].start: i for i in range(a, b)}
        packed = pack_spans(text, units[a:b], counter, cap)
        for n, span in enumerate(packed):
            first = index_of[span.start]
            stop = index_of[packed[n + 1].start] if n + 1 < len(packed) else b
            if n == 0:
                groups.append(Group(first, stop, start, similarity))
            else:
                groups.append(Group(first, stop, "cap"))
    return FirstPass(groups, cut, len(valleys))


def start_metadata(group: Group, passed: FirstPass, threshold: float, cap: int) -> Metadata:
    """Why a chunk starts where it does, JSON-shaped."""
    meta: Metadata = {"start": group.start}
    if group.start == "boundary":
        assert group.similarity is not None
        assert passed.percentile_cut is not None
        meta["boundary_similarity"] = round(group.similarity, 6)
        meta["percentile_cut"] = round(passed.percentile_cut, 6)
        meta["threshold"] = threshold
    elif group.start == "cap":
        meta["cap"] = cap
    return meta


def make_chunk(
    text: str, span: Span, counter: TokenCounter, strategy: str, metadata: Metadata
) -> Chunk:
    body = text[span.start : span.end]
    size = len(body) if isinstance(counter, CharacterCounter) else counter.count(body)
    return Chunk(
        text=body,
        start_index=span.start,
        end_index=span.end,
        token_count=size,
        strategy=strategy,
        metadata=metadata,
    )


def expect_plan(plan: EmbeddingPlan) -> SentencePlan:
    if not isinstance(plan, SentencePlan):
        raise TypeError(f"expected a SentencePlan, got {type(plan).__name__}")
    return plan


class SemanticChunker:
    """``plan`` (what to embed) and ``assemble`` (chunks from the vectors); the embedding
    between them is the pipeline's (:mod:`worker.pipeline`)."""

    def __init__(
        self,
        params: SemanticParams | None = None,
        *,
        model_window: ModelWindow | None = None,
        **overrides: Any,
    ) -> None:
        self.params = merge_params(SemanticParams, params, overrides)
        self.window = model_window or character_window()
        self.counter: TokenCounter = make_counter(self.params.tokenizer)

    def plan(self, text: str, *, content_type: ContentType = "text/plain") -> SentencePlan:
        p = self.params
        units = sentence_units(
            text, self.counter, p.chunk_size, min_characters=p.min_characters_per_sentence
        )
        return plan_units(text, units, self.counter, self.window, content_type)

    def assemble(self, plan: EmbeddingPlan, embeddings: NDArray[np.float32]) -> list[Chunk]:
        sentence_plan = expect_plan(plan)
        p = self.params
        passed = self.first_pass(sentence_plan, unit_vectors(sentence_plan, embeddings))
        text, units = sentence_plan.document, sentence_plan.units
        chunks: list[Chunk] = []
        for index, group in enumerate(passed.groups):
            meta: Metadata = {"chunk_index": index, "units": [group.first, group.stop]}
            meta.update(start_metadata(group, passed, p.threshold, p.chunk_size))
            span = Span(units[group.first].start, units[group.stop - 1].end)
            chunks.append(make_chunk(text, span, self.counter, NAME, meta))
        return chunks

    def first_pass(self, plan: SentencePlan, vectors: NDArray[np.float64]) -> FirstPass:
        p = self.params
        return first_pass(
            plan,
            vectors,
            self.counter,
            cap=p.chunk_size,
            threshold=p.threshold,
            window=p.similarity_window,
            min_units=p.min_sentences_per_chunk,
        )
