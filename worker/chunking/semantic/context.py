"""The ``context`` strategy: cores cut as ``semantic`` cuts, plus the neighbouring units that
share their topic.

1. units and cores: the layout and first pass of ``semantic`` (:mod:`.first_pass`), with the
   core cap ``core_size`` (default three quarters of ``chunk_size``) and the hard minimum, so
   cores keep blocks whole and start where the structure and the curve say — an edit moves the
   cores near it only. With ``language`` ``auto``/``ar`` Arabic commas end sentences too;
2. overlap: a core starts with the previous core's trailing whole units of at most ``overlap``
   (in the sizing unit) when they leave the core within ``core_size``;
3. each core's centroid is the size-weighted mean of its unit vectors. Up to ``window_size``
   units before and after the core are candidates, judged one by one, nearest first: a
   candidate is kept when its cosine similarity to the centroid is *above*
   ``similarity_threshold`` and the chunk still fits ``chunk_size`` (and in tokens the character
   cap: :mod:`worker.chunking.text.character_cap`). Kept context therefore need not touch the
   core;
4. the chunk text is the kept pieces in document order joined by
   :data:`~worker.chunking.types.SPAN_JOINER`, listed in ``spans`` (``None`` when the chunk is one
   contiguous slice). Metadata records the core span, each kept unit with its similarity,
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

from worker.chunking.semantic.first_pass import Bounds, first_pass, plan_document
from worker.chunking.semantic.layout import HEADING, Layout
from worker.chunking.semantic.model_window import ModelWindow, character_window
from worker.chunking.semantic.semantic import atom_range, bounds_of, expect_plan
from worker.chunking.semantic.similarity import cosine
from worker.chunking.semantic.sizing import Sizing, own_sizing
from worker.chunking.semantic.units import SentencePlan, UnitVectors, merge_params
from worker.chunking.text.density import detect_language
from worker.chunking.types import (
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
CORE_THRESHOLD = 1.5
"""The first pass's ``threshold`` for cores (``semantic``'s default)."""
SIMILARITY_WINDOW = 3


class ContextParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    chunk_size: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Hard cap on the whole chunk text, context included, in the unit of ``tokenizer``; unset
    as ``semantic``'s (the retrieval model's window, or 1,000 characters)."""
    overlap: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """Most of the previous core's trailing whole units carried into a core; unset: an eighth
    of ``chunk_size``."""
    window_size: Annotated[int, msgspec.Meta(ge=0)] = 2
    """Candidate context units on each side of a core."""
    min_chunk_size: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """Hard minimum of a core; unset: an eighth of ``chunk_size``."""
    language: str = "auto"
    embedding_model: str | None = None
    """Model directory; ``None`` means the caller's boundary model. Documents are embedded with
    one shared model, so a different directory is refused rather than ignored."""
    similarity_threshold: Annotated[float, msgspec.Meta(ge=-1.0, le=1.0)] = 0.75
    tokenizer: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    core_size: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Cores are cut to at most this size; unset means three quarters of ``chunk_size``
    (190 of 254 tokens). Context only joins a chunk within the hard cap, so a core filled to the
    cap would leave no room for any: a quarter of the budget is kept for it by default."""

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            raise ValueError(f"language must be one of {', '.join(LANGUAGES)}")
        if (
            self.core_size is not None
            and self.chunk_size is not None
            and self.core_size > self.chunk_size
        ):
            raise ValueError(
                f"core_size ({self.core_size}) must not exceed chunk_size ({self.chunk_size})"
            )


class ContextChunker:
    """``plan`` (what to embed) and ``assemble`` (chunks from the vectors); the embedding
    between them is the pipeline's (:mod:`worker.pipeline`)."""

    def __init__(
        self,
        params: ContextParams | None = None,
        *,
        model_window: ModelWindow | None = None,
        sizing: Sizing | None = None,
        **overrides: Any,
    ) -> None:
        self.params = p = merge_params(ContextParams, params, overrides)
        self.window = model_window or character_window()
        self.sizing = sizing or own_sizing(p.tokenizer)
        self.counter = self.sizing.counter
        whole = bounds_of(p.chunk_size, p.min_chunk_size, self.sizing)
        core_cap = min(whole.cap, p.core_size or max(1, whole.cap * 3 // 4))
        self.cap = whole.cap
        # A core is cut to leave room for context, but an atom that fits the whole chunk stays
        # whole (then it leaves none).
        self.core = Bounds(
            core_cap,
            min(whole.minimum, core_cap // 4),
            atom_cap=whole.cap,
            characters=whole.characters,
        )
        self.overlap = whole.cap // 8 if p.overlap is None else p.overlap

    @property
    def bounds(self) -> Bounds:
        return self.core

    @property
    def resolved(self) -> ContextParams:
        """The parameters with the unset sizes as this chunker resolved them in its unit."""
        return msgspec.structs.replace(
            self.params,
            chunk_size=self.cap,
            core_size=self.core.cap,
            overlap=self.overlap,
            min_chunk_size=self.core.minimum,
        )

    def plan(self, text: str, *, content_type: ContentType = "text/plain") -> SentencePlan:
        return plan_document(
            text,
            content_type,
            self.sizing,
            self.core,
            self.window,
            clauses=self.params.language != "en",
        )

    def assemble(self, plan: EmbeddingPlan, embeddings: NDArray[np.float32]) -> list[Chunk]:
        sentence_plan = expect_plan(plan)
        vectors = UnitVectors(sentence_plan, embeddings)
        if not sentence_plan.count:
            return []
        passed = first_pass(
            sentence_plan,
            vectors,
            self.sizing,
            self.core,
            threshold=CORE_THRESHOLD,
            similarity_window=SIMILARITY_WINDOW,
        )
        language = self.params.language
        if language == "auto":
            language = detect_language(sentence_plan.document)
        chunks: list[Chunk] = []
        previous: tuple[Span, int, int] | None = None  # core span and its whole units
        for index, core in enumerate(passed.spans):
            first, stop = atom_range(sentence_plan, passed, index)
            # Whole units only: a core that starts or ends inside a unit has no context there.
            whole_first = first + int(core.start > sentence_plan.layout.starts[first])
            whole_stop = stop - int(core.end < sentence_plan.layout.ends[stop - 1])
            core, carried = self._carry(sentence_plan, core, whole_first, previous)
            chunk = self._window_chunk(
                sentence_plan, vectors, core, whole_first - carried, whole_stop, index
            )
            chunk.metadata["carried_units"] = carried
            # The design's outputs: the language the rules ran for and the chunk's characters
            # (token_count is in the sizing unit; joiners of spans count as characters).
            chunk.metadata["language"] = language
            chunk.metadata["char_count"] = len(chunk.text)
            previous = (passed.spans[index], whole_first, whole_stop)
            chunks.append(chunk)
        return chunks

    def _carry(
        self,
        plan: SentencePlan,
        core: Span,
        whole_first: int,
        previous: tuple[Span, int, int] | None,
    ) -> tuple[Span, int]:
        """The core with the previous core's trailing whole units of at most ``overlap``
        prepended, when the core stays within the core cap; and how many were carried."""
        if previous is None or self.overlap <= 0:
            return core, 0
        prior, prior_first, prior_stop = previous
        layout = plan.layout
        if prior_stop != whole_first or prior.end != layout.ends[prior_stop - 1]:
            return core, 0
        carried = 0
        while carried < prior_stop - prior_first - 1:
            unit = prior_stop - carried - 1
            start = int(layout.starts[unit])
            if plan.size([Span(start, int(layout.ends[prior_stop - 1]))]) > self.overlap:
                break
            carried_core = Span(start, core.end)
            if plan.size([carried_core]) > self.core.cap or not self.core.holds([carried_core]):
                break
            carried += 1
        if not carried:
            return core, 0
        return Span(int(layout.starts[prior_stop - carried]), core.end), carried

    def _window_chunk(
        self,
        plan: SentencePlan,
        vectors: UnitVectors,
        core: Span,
        first: int,
        stop: int,
        index: int,
    ) -> Chunk:
        p = self.params
        text, layout = plan.document, plan.layout
        count = plan.count
        weights = plan.weights
        low = max(0, min(first, stop))
        high = max(low, stop)
        centroid = vectors.weighted_sum(low, high, weights) if high > low else None
        candidates: list[tuple[int, str]] = []
        for distance in range(1, p.window_size + 1):
            if first - distance >= 0:
                candidates.append((first - distance, "before"))
            # A heading after the core opens the next part: never its context.
            after = stop - 1 + distance
            if after < count and layout.kinds[after] != HEADING:
                candidates.append((after, "after"))
        kept: dict[int, float] = {}
        dropped = dropped_for_size = 0
        for unit, _side in candidates:
            if centroid is None:
                dropped += 1
                continue
            # Judged as reported (6 places): a float32 cosine of identical texts can come out
            # at 1.0000001, kept above a threshold of 1.0 and reported as 1.0 (a generated
            # case of tests/chunking/semantic/test_properties.py found it).
            similarity = round(cosine(vectors.rows(unit, unit + 1)[0], centroid), 6)
            if similarity <= p.similarity_threshold:
                dropped += 1
                continue
            trial = self._spans(text, layout, core, [*kept, unit])
            if plan.size(trial) > self.cap or not self.core.holds(trial):
                dropped += 1
                dropped_for_size += 1
                continue
            kept[unit] = similarity
        spans = self._spans(text, layout, core, list(kept))
        body = join_spans(text, spans)
        context = [
            {
                "start": int(layout.starts[u]),
                "end": int(layout.ends[u]),
                "side": "before" if u < first else "after",
                "similarity": kept[u],
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
            token_count=plan.size(spans),
            strategy=NAME,
            metadata=meta,
            spans=tuple(spans) if len(spans) > 1 else None,
        )

    @staticmethod
    def _spans(text: str, layout: Layout, core: Span, extra: list[int]) -> list[Span]:
        """The core and the kept units in document order, one span where only whitespace
        separates them."""
        pieces = sorted(
            [(core.start, core.end), *((int(layout.starts[u]), int(layout.ends[u])) for u in extra)]
        )
        merged: list[list[int]] = []
        for start, end in pieces:
            if merged and not text[merged[-1][1] : start].strip():
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        return [Span(a, b) for a, b in merged]


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
