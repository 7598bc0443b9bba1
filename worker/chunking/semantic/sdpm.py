"""The ``sdpm`` strategy (semantic double-pass merging): ``semantic``, then merge similar chunks.

1. first pass: the ``semantic`` groups (boundaries at similarity valleys, cap packing);
2. each group's vector is the size-weighted mean of its unit vectors — nothing is re-embedded;
3. each group is compared with the groups up to ``skip_window`` positions ahead;
4. the most similar one whose cosine similarity is *above* ``merge_threshold`` and whose merged
   span fits ``chunk_size`` is merged together with everything between them, so the output stays
   contiguous (``skip_window=1`` merges neighbours, 2 may bridge one group, and so on);
5. passes repeat until one makes no merge.

``threshold`` keeps its ``semantic`` meaning (a percentile of valley similarities for the first
pass). The merge level is derived from the same document the same way, from the other part
of its similarity curve: unset ``merge_threshold``, it is the ``threshold`` percentile of the
gaps that are *not* valleys — the places where the first pass saw no possible topic change —
so two groups merge when they are more alike than that share of the document's within-topic
neighbouring windows. The level follows the model and the document, as the first pass's cut
does. A document with no gap (one unit) merges nothing. ``merge_threshold`` set is a fixed
cosine similarity instead (the seed's reading).
``skip_window`` defaults to 2, so a merge may bridge one group: a topic resumed after a short
digression is rejoined (measured in docs/semantic.md).

Metadata: the first pass's reason for the chunk's start, ``first_pass`` (the range of
first-pass groups it covers) and ``merges``: each merge's partner (a first-pass index), its
similarity and how many groups it bridged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from worker.chunking.semantic.model_window import ModelWindow
from worker.chunking.semantic.semantic import (
    FirstPass,
    SemanticChunker,
    SemanticParams,
    expect_plan,
    make_chunk,
    start_metadata,
    unit_size,
)
from worker.chunking.semantic.similarity import (
    cosine,
    gap_similarities,
    local_minima,
    percentile_cut,
)
from worker.chunking.semantic.units import SentencePlan, merge_params, unit_vectors
from worker.chunking.text.tokens import CHARACTER
from worker.chunking.types import Chunk, ContentType, EmbeddingPlan, Metadata, Span

NAME = "sdpm"


class SDPMParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    chunk_size: Annotated[int, msgspec.Meta(ge=1)] = 2048
    threshold: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] = 0.8
    """First pass: percentile (as a fraction) of the valley similarities that cut."""
    merge_threshold: Annotated[float, msgspec.Meta(ge=-1.0, le=1.0)] | None = None
    """Second pass: cosine similarity a merge must exceed; unset, the ``threshold``
    percentile of this document's non-valley gap similarities."""
    skip_window: Annotated[int, msgspec.Meta(ge=1)] = 2
    """How many groups ahead a group is compared with (2: a merge may bridge one group)."""
    similarity_window: Annotated[int, msgspec.Meta(ge=1)] = 3
    min_sentences_per_chunk: Annotated[int, msgspec.Meta(ge=1)] = 1
    min_characters_per_sentence: Annotated[int, msgspec.Meta(ge=0)] = 24
    tokenizer: Annotated[str, msgspec.Meta(min_length=1)] = CHARACTER

    def semantic(self) -> SemanticParams:
        return SemanticParams(
            chunk_size=self.chunk_size,
            threshold=self.threshold,
            similarity_window=self.similarity_window,
            min_sentences_per_chunk=self.min_sentences_per_chunk,
            min_characters_per_sentence=self.min_characters_per_sentence,
            tokenizer=self.tokenizer,
        )

    def merge_level(self, curve: NDArray[np.float64]) -> float:
        """The similarity a merge must exceed in a document with this similarity ``curve``:
        ``merge_threshold`` when set, else the ``threshold`` percentile of the gaps that are
        not valleys (all gaps when every one is). Empty curve (one unit): no merge."""
        if self.merge_threshold is not None:
            return self.merge_threshold
        if not len(curve):
            return float("inf")
        valleys = set(local_minima(curve))
        rest = [float(value) for gap, value in enumerate(curve) if gap not in valleys]
        return percentile_cut(rest or curve.tolist(), self.threshold)


@dataclass
class _Merged:
    """A run of first-pass groups ``[first, stop)`` and the sum of its weighted unit vectors."""

    first: int
    stop: int
    vector: NDArray[np.float64]
    merges: list[Metadata] = field(default_factory=list)


class SDPMChunker:
    """``plan`` (the first pass's) and ``assemble`` (both passes); the embedding between them
    is the pipeline's (:mod:`worker.pipeline`)."""

    def __init__(
        self,
        params: SDPMParams | None = None,
        *,
        model_window: ModelWindow | None = None,
        **overrides: Any,
    ) -> None:
        self.params = merge_params(SDPMParams, params, overrides)
        self._semantic = SemanticChunker(self.params.semantic(), model_window=model_window)
        self.window = self._semantic.window

    def plan(self, text: str, *, content_type: ContentType = "text/plain") -> SentencePlan:
        return self._semantic.plan(text, content_type=content_type)

    def assemble(self, plan: EmbeddingPlan, embeddings: NDArray[np.float32]) -> list[Chunk]:
        sentence_plan = expect_plan(plan)
        p = self.params
        vectors = unit_vectors(sentence_plan, embeddings)
        passed = self._semantic.first_pass(sentence_plan, vectors)
        level = p.merge_level(gap_similarities(vectors, sentence_plan.sizes, p.similarity_window))
        merged = self._merge(sentence_plan, vectors, passed, level)
        text, units = sentence_plan.document, sentence_plan.units
        counter = self._semantic.counter
        chunks: list[Chunk] = []
        for index, run in enumerate(merged):
            head, tail = passed.groups[run.first], passed.groups[run.stop - 1]
            meta: Metadata = {"chunk_index": index, "units": [head.first, tail.stop]}
            meta.update(start_metadata(head, passed, p.threshold, p.chunk_size))
            meta["first_pass"] = [run.first, run.stop]
            if level != float("inf"):
                meta["merge_level"] = round(level, 6)
            meta["merges"] = run.merges
            span = Span(units[head.first].start, units[tail.stop - 1].end)
            chunks.append(make_chunk(text, span, counter, NAME, meta))
        return chunks

    def _merge(
        self, plan: SentencePlan, vectors: NDArray[np.float64], passed: FirstPass, limit: float
    ) -> list[_Merged]:
        p = self.params
        groups = passed.groups
        if not groups:
            return []
        # Prefix sums of size-weighted unit vectors: any run's mean direction in one subtraction.
        cumulative = np.zeros((len(vectors) + 1, vectors.shape[1]), dtype=np.float64)
        np.cumsum(vectors * plan.sizes[:, None], axis=0, out=cumulative[1:])
        runs = [
            _Merged(i, i + 1, cumulative[g.stop] - cumulative[g.first])
            for i, g in enumerate(groups)
        ]
        text, units = plan.document, plan.units
        counter = self._semantic.counter
        changed = True
        while changed:
            changed = False
            i = 0
            while i < len(runs) - 1:
                best: tuple[float, int] | None = None
                for j in range(i + 1, min(len(runs), i + 1 + p.skip_window)):
                    similarity = cosine(runs[i].vector, runs[j].vector)
                    if similarity <= limit or (best is not None and similarity <= best[0]):
                        continue
                    span = Span(
                        units[groups[runs[i].first].first].start,
                        units[groups[runs[j].stop - 1].stop - 1].end,
                    )
                    if unit_size(text, span, counter) <= p.chunk_size:
                        best = (similarity, j)
                if best is None:
                    i += 1
                    continue
                similarity, j = best
                first_unit = groups[runs[i].first].first
                stop_unit = groups[runs[j].stop - 1].stop
                runs[i] = _Merged(
                    runs[i].first,
                    runs[j].stop,
                    cumulative[stop_unit] - cumulative[first_unit],
                    [
                        *runs[i].merges,
                        {
                            "partner": runs[j].first,
                            "similarity": round(similarity, 6),
                            "bridged": j - i - 1,
                        },
                        *(m for run in runs[i + 1 : j + 1] for m in run.merges),
                    ],
                )
                del runs[i + 1 : j + 1]
                changed = True
        return runs
