"""The ``semantic`` strategy: cut where the text's structure and its meaning both say a new part
begins, within a hard minimum and maximum size.

``plan``: the layout (:mod:`.layout`: sentences, headings, code blocks, list items…, and the
level of each gap) and the texts to embed, each once. ``assemble``:

1. one vector per unit; across every gap, the cosine similarity of the size-weighted means of
   up to ``similarity_window`` units on each side (:func:`.similarity.gap_similarities`);
2. each gap's evidence: how deep it lies below the curve's peaks around it, in units of the
   document's median depth (:func:`.first_pass.evidence_of`);
3. a gap is worth a cut when its evidence passes its level's bar: ``threshold`` at a paragraph
   break, twice that inside a paragraph, none before a heading;
4. cuts are placed best first, each leaving at least ``min_chunk_size`` on both sides; a piece
   over ``chunk_size`` is cut at its best gap whatever the evidence, inside a block only when no
   gap between blocks will do (:mod:`.cuts`).

Sizes are in the unit of ``tokenizer`` (:mod:`.sizing`): unset, the retrieval model's tokens,
and ``chunk_size`` is lowered to its window.

Chunks are contiguous slices of the document. Each chunk's metadata says why it starts where it
does: ``start`` is ``"document"``, ``"boundary"`` (a gap worth a cut: ``cut_level`` and
``evidence``) or ``"cap"`` (the size cap forced it).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from worker.chunking.semantic.first_pass import (
    Bounds,
    FirstPass,
    first_pass,
    level_name,
    plan_document,
)
from worker.chunking.semantic.model_window import ModelWindow, character_window
from worker.chunking.semantic.sizing import Sizing, own_sizing
from worker.chunking.semantic.units import SentencePlan, UnitVectors, merge_params
from worker.chunking.text.tokens import TokenCounter
from worker.chunking.types import Chunk, ContentType, EmbeddingPlan, Metadata, Span

NAME = "semantic"
DEFAULT_TOKENS = 256
"""``chunk_size`` when unset and sizes are tokens (then lowered to the model's window: 254)."""
DEFAULT_CHARACTERS = 1000
"""``chunk_size`` when unset and sizes are characters (about 254 tokens of English prose)."""
MIN_FRACTION = 8
"""``min_chunk_size`` when unset: the cap over this."""


class SemanticParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    chunk_size: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Hard cap per chunk, in the unit of ``tokenizer``; unset: 256 tokens (254 with MiniLM,
    its window) or 1,000 characters. Lowered to the retrieval model's window."""
    min_chunk_size: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """Hard minimum per chunk (a smaller chunk only when the whole document is smaller);
    unset: ``chunk_size // 8``. At most a quarter of ``chunk_size``."""
    threshold: Annotated[float, msgspec.Meta(ge=0.0)] = 1.5
    """Evidence a paragraph break needs to be cut (depth in median depths); twice that inside a
    paragraph."""
    similarity_window: Annotated[int, msgspec.Meta(ge=1)] = 3
    """Units averaged on each side of a gap when measuring its similarity."""
    min_sentences_per_chunk: Annotated[int, msgspec.Meta(ge=1)] = 1
    """Fewest units on each side of a cut the evidence placed (cap cuts may cut closer)."""
    min_characters_per_sentence: Annotated[int, msgspec.Meta(ge=0)] = 24
    """Sentences shorter than this many characters join the next one of their paragraph."""
    tokenizer: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    """``"character"``, a ``tokenizer.json``, a model directory, or unset: the retrieval model's
    tokens (characters without one)."""


def bounds_of(chunk_size: int | None, min_chunk_size: int | None, sizing: Sizing) -> Bounds:
    """The hard cap and minimum in ``sizing``'s unit; ``ValueError`` names a minimum that
    leaves no room (over a quarter of the cap)."""
    size = chunk_size or (DEFAULT_CHARACTERS if sizing.characters else DEFAULT_TOKENS)
    cap = sizing.cap(size)
    minimum = cap // MIN_FRACTION if min_chunk_size is None else min_chunk_size
    if minimum > cap // 4:
        raise ValueError(
            f"min_chunk_size ({minimum}) must be at most a quarter of the cap ({cap}): "
            "pieces of a block too large for one chunk must keep it too"
        )
    return Bounds(cap, minimum, characters=sizing.character_cap(cap))


def make_chunk(plan: SentencePlan, span: Span, strategy: str, metadata: Metadata) -> Chunk:
    return Chunk(
        text=plan.document[span.start : span.end],
        start_index=span.start,
        end_index=span.end,
        token_count=plan.size([span]),
        strategy=strategy,
        metadata=metadata,
    )


def start_metadata(plan: SentencePlan, passed: FirstPass, index: int, threshold: float) -> Metadata:
    """Why chunk ``index`` of the first pass starts where it does, JSON-shaped."""
    cut = passed.cuts[index]
    meta: Metadata = {"start": cut.start}
    if cut.first > 0:
        meta["cut_level"] = level_name(plan.layout, cut.first)
        gap = int(passed.grain_gap[cut.first])
        if gap >= 0:
            meta["evidence"] = round(float(passed.evidence[gap]), 6)
    if cut.start == "boundary":
        meta["threshold"] = threshold
    return meta


def expect_plan(plan: EmbeddingPlan) -> SentencePlan:
    if not isinstance(plan, SentencePlan):
        raise TypeError(f"expected a SentencePlan, got {type(plan).__name__}")
    return plan


def atom_range(plan: SentencePlan, passed: FirstPass, index: int) -> list[int]:
    """The units (atoms) chunk ``index`` touches, ``[first, stop)``."""
    cut = passed.cuts[index]
    atoms = plan.layout.grain_atoms
    return [int(atoms[cut.first]), int(atoms[cut.stop - 1]) + 1]


class SemanticChunker:
    """``plan`` (what to embed) and ``assemble`` (chunks from the vectors); the embedding
    between them is the pipeline's (:mod:`worker.pipeline`)."""

    def __init__(
        self,
        params: SemanticParams | None = None,
        *,
        model_window: ModelWindow | None = None,
        sizing: Sizing | None = None,
        **overrides: Any,
    ) -> None:
        self.params = merge_params(SemanticParams, params, overrides)
        self.window = model_window or character_window()
        self.sizing = sizing or own_sizing(self.params.tokenizer)
        self.counter: TokenCounter = self.sizing.counter
        self.bounds = bounds_of(self.params.chunk_size, self.params.min_chunk_size, self.sizing)

    @property
    def resolved(self) -> SemanticParams:
        """The parameters with the unset sizes as this chunker resolved them in its unit."""
        return msgspec.structs.replace(
            self.params, chunk_size=self.bounds.cap, min_chunk_size=self.bounds.minimum
        )

    def plan(self, text: str, *, content_type: ContentType = "text/plain") -> SentencePlan:
        p = self.params
        return plan_document(
            text, content_type, self.sizing, self.bounds, self.window, p.min_characters_per_sentence
        )

    def assemble(self, plan: EmbeddingPlan, embeddings: NDArray[np.float32]) -> list[Chunk]:
        sentence_plan = expect_plan(plan)
        passed = self.first_pass(sentence_plan, UnitVectors(sentence_plan, embeddings))
        chunks: list[Chunk] = []
        for index, span in enumerate(passed.spans):
            meta: Metadata = {
                "chunk_index": index,
                "units": atom_range(sentence_plan, passed, index),
                **start_metadata(sentence_plan, passed, index, self.params.threshold),
            }
            chunks.append(make_chunk(sentence_plan, span, NAME, meta))
        return chunks

    def first_pass(self, plan: SentencePlan, vectors: UnitVectors) -> FirstPass:
        p = self.params
        return first_pass(
            plan,
            vectors,
            self.sizing,
            self.bounds,
            threshold=p.threshold,
            similarity_window=p.similarity_window,
            min_units=p.min_sentences_per_chunk,
        )
