"""The ``context`` strategy: sentence groups plus the neighbouring sentences that share their topic.

1. sentences (Arabic marks end sentences; with ``language`` ``auto``/``ar`` an over-long sentence
   is cut at Arabic commas before words), each embedded once;
2. primary groups: whole sentences packed up to ``core_size`` (default ``chunk_size``); the
   next group starts with the trailing whole sentences of at most ``overlap`` characters of the
   one before (dropped when they leave no room for a new sentence). A group smaller than
   ``min_chunk_size`` merges with its next neighbour (the previous one for the last group) when
   the union fits ``chunk_size``, else it stays as it is: never dropped;
3. each group's centroid is the size-weighted mean of its sentence vectors. Up to
   ``window_size`` sentences before and after the group are candidates, judged one by one,
   nearest first: a candidate is kept when its cosine similarity to the centroid is *above*
   ``similarity_threshold`` and the chunk still fits ``chunk_size``. Kept context therefore need
   not touch the group;
4. the chunk text is the kept pieces in document order joined by
   :data:`~worker.chunking.types.SPAN_JOINER`, listed in ``spans`` (``None`` when the chunk is one
   contiguous slice). Metadata records the core span, each kept sentence with its similarity,
   how many candidates were dropped (and how many only for size), and ``chunk_type="window"``.

Cores come in document order and together cover every non-whitespace character; the whole
chunk text (context and joiners included) is within the cap.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from worker.chunking.semantic.model_window import ModelWindow, character_window
from worker.chunking.semantic.semantic import expect_plan, unit_size
from worker.chunking.semantic.similarity import cosine
from worker.chunking.semantic.units import (
    SentencePlan,
    merge_params,
    plan_units,
    sentence_units,
    unit_vectors,
)
from worker.chunking.text.density import detect_language
from worker.chunking.text.tokens import CHARACTER, CharacterCounter, TokenCounter, make_counter
from worker.chunking.types import (
    SPAN_JOINER,
    Chunk,
    ContentType,
    EmbeddingPlan,
    Metadata,
    Span,
    join_spans,
)

if TYPE_CHECKING:
    from worker.models.reference import ModelRef

NAME = "context"
LANGUAGES = ("auto", "ar", "en")


class ContextParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    chunk_size: Annotated[int, msgspec.Meta(ge=1)] = 512
    """Hard cap on the whole chunk text, context included, in the unit of ``tokenizer``."""
    overlap: Annotated[int, msgspec.Meta(ge=0)] = 128
    """Most characters of trailing whole sentences carried into the next primary group."""
    window_size: Annotated[int, msgspec.Meta(ge=0)] = 2
    """Candidate context sentences on each side of a group."""
    min_chunk_size: Annotated[int, msgspec.Meta(ge=0)] = 50
    """A group smaller than this (in the unit of ``tokenizer``) merges with a neighbour."""
    language: str = "auto"
    embedding_model: str | None = None
    """Model directory; ``None`` means the caller's boundary model. Documents are embedded with
    one shared model, so a different directory is refused rather than ignored."""
    similarity_threshold: Annotated[float, msgspec.Meta(ge=-1.0, le=1.0)] = 0.75
    tokenizer: Annotated[str, msgspec.Meta(min_length=1)] = CHARACTER
    core_size: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Primary groups are packed up to this size; unset means three quarters of ``chunk_size``
    (384 of 512). Context only joins a chunk within the hard cap, so a core filled to the cap
    would leave no room for any: a quarter of the budget is kept for it by default."""

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            raise ValueError(f"language must be one of {', '.join(LANGUAGES)}")
        if self.core_size is not None and self.core_size > self.chunk_size:
            raise ValueError(
                f"core_size ({self.core_size}) must not exceed chunk_size ({self.chunk_size})"
            )

    @property
    def core_cap(self) -> int:
        return max(1, self.chunk_size * 3 // 4) if self.core_size is None else self.core_size


def _runs(indices: list[int]) -> list[tuple[int, int]]:
    """Sorted unit indices as maximal runs ``[first, stop)`` of consecutive indices."""
    runs: list[tuple[int, int]] = []
    for index in indices:
        if runs and runs[-1][1] == index:
            runs[-1] = (runs[-1][0], index + 1)
        else:
            runs.append((index, index + 1))
    return runs


class ContextChunker:
    """``plan`` (what to embed) and ``assemble`` (chunks from the vectors); the embedding
    between them is the pipeline's (:mod:`worker.pipeline`)."""

    def __init__(
        self,
        params: ContextParams | None = None,
        *,
        model_window: ModelWindow | None = None,
        **overrides: Any,
    ) -> None:
        self.params = merge_params(ContextParams, params, overrides)
        self.window = model_window or character_window()
        self.counter: TokenCounter = make_counter(self.params.tokenizer)

    def plan(self, text: str, *, content_type: ContentType = "text/plain") -> SentencePlan:
        p = self.params
        units = sentence_units(text, self.counter, p.core_cap, clauses=p.language != "en")
        return plan_units(text, units, self.counter, self.window, content_type)

    def assemble(self, plan: EmbeddingPlan, embeddings: NDArray[np.float32]) -> list[Chunk]:
        sentence_plan = expect_plan(plan)
        vectors = unit_vectors(sentence_plan, embeddings)
        if not sentence_plan.units:
            return []
        cumulative = np.zeros((len(vectors) + 1, vectors.shape[1]), dtype=np.float64)
        np.cumsum(vectors * sentence_plan.sizes[:, None], axis=0, out=cumulative[1:])
        groups, merged = self._groups(sentence_plan)
        language = self.params.language
        if language == "auto":
            language = detect_language(sentence_plan.document)
        chunks: list[Chunk] = []
        previous_stop = 0
        for index, (first, stop) in enumerate(groups):
            centroid = cumulative[stop] - cumulative[first]
            chunk = self._window_chunk(sentence_plan, vectors, centroid, first, stop, index)
            chunk.metadata["carried_units"] = max(0, previous_stop - first)
            chunk.metadata["merged_small_group"] = (first, stop) in merged
            # The design's outputs: the language the rules ran for and the chunk's characters
            # (token_count is in the tokenizer's unit; joiners of spans count as characters).
            chunk.metadata["language"] = language
            chunk.metadata["char_count"] = len(chunk.text)
            previous_stop = stop
            chunks.append(chunk)
        return chunks

    def _size(self, text: str, first: Span, last: Span) -> int:
        return unit_size(text, Span(first.start, last.end), self.counter)

    def _groups(self, plan: SentencePlan) -> tuple[list[tuple[int, int]], set[tuple[int, int]]]:
        """Primary groups ``[first, stop)`` with overlap, then small groups merged away."""
        p = self.params
        text, units = plan.document, plan.units
        count = len(units)
        groups: list[tuple[int, int]] = []
        first = 0
        while first < count:
            stop = first + 1
            while stop < count and self._size(text, units[first], units[stop]) <= p.core_cap:
                stop += 1
            groups.append((first, stop))
            if stop >= count:
                break
            carried = stop
            while (
                carried - 1 > first and units[stop - 1].end - units[carried - 1].start <= p.overlap
            ):
                carried -= 1
            # The carried sentences must leave room for at least the next new one.
            if carried < stop and self._size(text, units[carried], units[stop]) > p.core_cap:
                carried = stop
            first = carried
        merged: set[tuple[int, int]] = set()
        i = 0
        while i < len(groups) and len(groups) > 1:
            a, b = groups[i]
            if self._size(text, units[a], units[b - 1]) >= p.min_chunk_size:
                i += 1
                continue
            for partner in (i + 1, i - 1):
                if not 0 <= partner < len(groups):
                    continue
                low, high = min(i, partner), max(i, partner)
                union = (groups[low][0], groups[high][1])
                # Against the hard cap, not the packing target: greedy packing already showed
                # that a neighbour plus one more unit passes the target.
                if self._size(text, units[union[0]], units[union[1] - 1]) <= p.chunk_size:
                    groups[low : high + 1] = [union]
                    merged.add(union)
                    i = low
                    break
            else:
                i += 1
        return groups, merged

    def _window_chunk(
        self,
        plan: SentencePlan,
        vectors: NDArray[np.float64],
        centroid: NDArray[np.float64],
        first: int,
        stop: int,
        index: int,
    ) -> Chunk:
        p = self.params
        text, units = plan.document, plan.units
        candidates: list[tuple[int, str]] = []
        for distance in range(1, p.window_size + 1):
            if first - distance >= 0:
                candidates.append((first - distance, "before"))
            if stop - 1 + distance < len(units):
                candidates.append((stop - 1 + distance, "after"))
        kept: dict[int, float] = {}
        dropped = dropped_for_size = 0
        for unit, _side in candidates:
            similarity = cosine(vectors[unit], centroid)
            if similarity <= p.similarity_threshold:
                dropped += 1
                continue
            trial = self._spans(units, first, stop, [*kept, unit])
            if self._text_size(text, trial) > p.chunk_size:
                dropped += 1
                dropped_for_size += 1
                continue
            kept[unit] = similarity
        spans = self._spans(units, first, stop, list(kept))
        body = join_spans(text, spans)
        core = Span(units[first].start, units[stop - 1].end)
        context = [
            {
                "start": units[u].start,
                "end": units[u].end,
                "side": "before" if u < first else "after",
                "similarity": round(kept[u], 6),
            }
            for u in sorted(kept)
        ]
        meta: Metadata = {
            "chunk_index": index,
            "chunk_type": "window",
            "core": [core.start, core.end],
            "core_units": [first, stop],
            "context": context,
            "dropped": dropped,
            "dropped_for_size": dropped_for_size,
            "similarity_threshold": p.similarity_threshold,
        }
        return Chunk(
            text=body,
            start_index=spans[0].start,
            end_index=spans[-1].end,
            token_count=self._text_size(text, spans),
            strategy=NAME,
            metadata=meta,
            spans=tuple(spans) if len(spans) > 1 else None,
        )

    @staticmethod
    def _spans(units: tuple[Span, ...], first: int, stop: int, extra: list[int]) -> list[Span]:
        indices = sorted({*range(first, stop), *extra})
        return [Span(units[a].start, units[b - 1].end) for a, b in _runs(indices)]

    def _text_size(self, text: str, spans: list[Span]) -> int:
        if isinstance(self.counter, CharacterCounter):
            joiners = len(SPAN_JOINER) * (len(spans) - 1)
            return sum(s.end - s.start for s in spans) + joiners
        return self.counter.count(join_spans(text, spans))


def check_embedding_model(params: ContextParams, boundary: ModelRef | None) -> None:
    """``embedding_model`` may only name the boundary model the caller resolved: documents are
    embedded with one shared model, so naming another one is refused rather than ignored."""
    named = params.embedding_model
    if named is None:
        return
    if boundary is None:
        raise ValueError(
            f"embedding_model {named!r}: no boundary model was resolved to compare it with "
            "(pass it as the model directory: CHUNKSTREAM_MODEL_DIR or --model)"
        )
    if Path(named).resolve() != boundary.directory.resolve():
        raise ValueError(
            f"embedding_model {named!r} differs from the worker's model "
            f"{str(boundary.directory)!r}; documents are embedded with one shared model"
        )
