"""The ``sdpm`` strategy (semantic double-pass merging): ``semantic``, then merge similar chunks.

1. first pass: the ``semantic`` chunks (structure, evidence, hard minimum and cap);
2. each chunk's vector is the size-weighted mean of its unit vectors — nothing is re-embedded;
3. each chunk is compared with the chunks up to ``skip_window`` positions ahead;
4. the most similar one whose cosine similarity is *above* the merge level and whose merged span
   fits the cap (in tokens, and in characters: :mod:`worker.chunking.text.character_cap`) is
   merged together with everything between them, so the output stays
   contiguous (``skip_window=1`` merges neighbours, 2 may bridge one chunk, and so on);
5. passes repeat until one makes no merge.

The merge level is read from the document around each cut, not from all of it: unset
``merge_threshold``, the level at a first-pass cut is the :data:`MERGE_PERCENTILE` percentile
of the similarity curve at the gaps within :data:`LEVEL_REACH` of it that are not valleys — the
places where the text goes on with its topic — and a merge must pass the level of every cut it
removes: two chunks merge when they are more alike than most neighbouring windows there. The
level follows the model and the part of the document, and an edit elsewhere does not move it.
``merge_threshold`` set is a fixed cosine similarity instead.

Metadata: the first pass's reason for the chunk's start, ``first_pass`` (the range of
first-pass chunks it covers) and ``merges``: each merge's partner (a first-pass index), its
similarity, the level it passed and how many chunks it bridged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from worker.chunking.semantic.first_pass import FirstPass
from worker.chunking.semantic.model_window import ModelWindow
from worker.chunking.semantic.semantic import (
    SemanticChunker,
    SemanticParams,
    atom_range,
    expect_plan,
    make_chunk,
    start_metadata,
)
from worker.chunking.semantic.similarity import local_minima
from worker.chunking.semantic.sizing import Sizing
from worker.chunking.semantic.units import SentencePlan, UnitVectors, merge_params
from worker.chunking.types import Chunk, ContentType, EmbeddingPlan, Metadata, Span

NAME = "sdpm"
MERGE_PERCENTILE = 0.8
LEVEL_REACH = 12
BLOCK_UNITS = 4096  # unit vectors made at a time for the chunks' sums


class SDPMParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    chunk_size: Annotated[int, msgspec.Meta(ge=1)] | None = None
    min_chunk_size: Annotated[int, msgspec.Meta(ge=0)] | None = None
    threshold: Annotated[float, msgspec.Meta(ge=0.0)] = 1.5
    """First pass: as ``semantic``'s."""
    merge_threshold: Annotated[float, msgspec.Meta(ge=-1.0, le=1.0)] | None = None
    """Second pass: cosine similarity a merge must exceed; unset, read from the curve around
    the two chunks (module docstring)."""
    skip_window: Annotated[int, msgspec.Meta(ge=1)] = 2
    """How many chunks ahead a chunk is compared with (2: a merge may bridge one chunk)."""
    similarity_window: Annotated[int, msgspec.Meta(ge=1)] = 3
    min_sentences_per_chunk: Annotated[int, msgspec.Meta(ge=1)] = 1
    min_characters_per_sentence: Annotated[int, msgspec.Meta(ge=0)] = 24
    tokenizer: Annotated[str, msgspec.Meta(min_length=1)] | None = None

    def semantic(self) -> SemanticParams:
        return SemanticParams(
            chunk_size=self.chunk_size,
            min_chunk_size=self.min_chunk_size,
            threshold=self.threshold,
            similarity_window=self.similarity_window,
            min_sentences_per_chunk=self.min_sentences_per_chunk,
            min_characters_per_sentence=self.min_characters_per_sentence,
            tokenizer=self.tokenizer,
        )


def cut_levels(
    curve: NDArray[np.float64], gaps: NDArray[np.int64], percentile: float
) -> NDArray[np.float64]:
    """The merge level at each of ``gaps`` (atom gaps where the first pass cut): the
    ``percentile`` of the curve at the gaps within :data:`LEVEL_REACH` of it that are not
    valleys (all of them when every one is)."""
    count = len(curve)
    if not count or not len(gaps):
        return np.full(len(gaps), np.inf)
    plain = np.ones(count, dtype=bool)
    plain[local_minima(curve)] = False
    offsets = np.arange(-LEVEL_REACH, LEVEL_REACH + 1)
    at = gaps[:, None] + offsets[None, :]
    inside = (at >= 0) & (at < count)
    values = np.where(inside, curve[np.clip(at, 0, count - 1)], np.nan)
    chosen = np.where(inside & plain[np.clip(at, 0, count - 1)], values, np.nan)
    none_plain = np.isnan(chosen).all(axis=1)
    chosen[none_plain] = values[none_plain]
    return row_percentiles(chosen, percentile)


def row_percentiles(values: NDArray[np.float64], percentile: float) -> NDArray[np.float64]:
    """``np.nanpercentile(values, percentile * 100.0, axis=1)`` (linear method) bit for bit,
    for rows with at least one number, in whole-array steps: numpy's own goes row by row in
    Python (``apply_along_axis``), a tenth of ``sdpm``'s CPU. The same steps as numpy's
    ``_quantile``: virtual index ``(n - 1) * q``, its floor and the next, and ``_lerp``.
    Zeros are read as +0.0 (numpy's partition orders -0.0 and 0.0 as it happens to, so the
    sign of a zero level was arbitrary before; a cosine's sign of zero means nothing)."""
    q = np.true_divide(percentile * 100.0, 100)  # what nanpercentile makes of its q
    ordered = np.sort(values + 0.0, axis=1)  # NaN last; -0.0 + 0.0 is +0.0
    counts = np.count_nonzero(~np.isnan(values), axis=1)
    virtual = (counts - 1) * q
    previous = np.floor(virtual)
    last = counts - 1
    above = virtual >= last
    lower = np.where(above, last, previous.astype(np.intp))
    upper = np.where(above, last, np.minimum(lower + 1, last))
    gamma = virtual - np.where(above, -1.0, previous)  # numpy's, from its index -1
    rows = np.arange(len(values))
    low, high = ordered[rows, lower], ordered[rows, upper]
    diff = high - low
    levels: NDArray[np.float64] = low + diff * gamma
    upper_half = gamma >= 0.5
    levels[upper_half] = (high - diff * (1 - gamma))[upper_half]
    return levels


@dataclass
class _Run:
    """A run of first-pass chunks ``[first, stop)`` and the sum of its weighted unit vectors
    (float32: a cosine needs no more, and a large document has tens of thousands of runs)."""

    first: int
    stop: int
    vector: NDArray[np.float32]
    merges: list[Metadata] = field(default_factory=list)
    norm: np.float32 = field(init=False)
    """``np.linalg.norm(vector)``, as that computes it (float32), once per run: the merge loop
    compares each run with several partners, pass after pass."""

    def __post_init__(self) -> None:
        self.norm = np.sqrt(self.vector.dot(self.vector))


def run_similarity(left: _Run, right: _Run) -> float:
    """:func:`.similarity.cosine` of the two runs' vectors, bit for bit, from their norms."""
    norm = float(left.norm * right.norm)
    return float(np.dot(left.vector, right.vector)) / norm if norm > 0 else 0.0


def chunk_vectors(
    plan: SentencePlan, vectors: UnitVectors, passed: FirstPass
) -> list[NDArray[np.float32]]:
    """Each first-pass chunk's weighted sum of unit vectors (``UnitVectors.weighted_sum``, cast
    to float32), with the unit vectors made for a block of chunks at a time: a unit's vector
    does not depend on the block it is made in, and one call per chunk cost more than the sums."""
    weights = plan.weights
    ranges = [atom_range(plan, passed, i) for i in range(len(passed.spans))]
    out: list[NDArray[np.float32]] = []
    at = 0
    while at < len(ranges):
        low = ranges[at][0]
        end = at + 1  # chunks [at, end) share a block of at most BLOCK_UNITS units, or one
        while end < len(ranges) and ranges[end][1] - low <= BLOCK_UNITS:
            end += 1
        block = vectors.rows(low, ranges[end - 1][1]).astype(np.float64)
        for first, stop in ranges[at:end]:
            summed = weights[first:stop] @ block[first - low : stop - low]
            out.append(summed.astype(np.float32))
        at = end
    return out


class SDPMChunker:
    """``plan`` (the first pass's) and ``assemble`` (both passes); the embedding between them
    is the pipeline's (:mod:`worker.pipeline`)."""

    def __init__(
        self,
        params: SDPMParams | None = None,
        *,
        model_window: ModelWindow | None = None,
        sizing: Sizing | None = None,
        **overrides: Any,
    ) -> None:
        self.params = merge_params(SDPMParams, params, overrides)
        self._semantic = SemanticChunker(
            self.params.semantic(), model_window=model_window, sizing=sizing
        )
        self.window = self._semantic.window
        self.sizing = self._semantic.sizing
        self.bounds = self._semantic.bounds

    @property
    def resolved(self) -> SDPMParams:
        """The parameters with the unset sizes as this chunker resolved them in its unit."""
        return msgspec.structs.replace(
            self.params, chunk_size=self.bounds.cap, min_chunk_size=self.bounds.minimum
        )

    def plan(self, text: str, *, content_type: ContentType = "text/plain") -> SentencePlan:
        return self._semantic.plan(text, content_type=content_type)

    def assemble(self, plan: EmbeddingPlan, embeddings: NDArray[np.float32]) -> list[Chunk]:
        sentence_plan = expect_plan(plan)
        p = self.params
        vectors = UnitVectors(sentence_plan, embeddings)
        passed = self._semantic.first_pass(sentence_plan, vectors)
        merged = self._merge(sentence_plan, vectors, passed)
        chunks: list[Chunk] = []
        for index, run in enumerate(merged):
            head, tail = passed.spans[run.first], passed.spans[run.stop - 1]
            first_units = atom_range(sentence_plan, passed, run.first)
            last_units = atom_range(sentence_plan, passed, run.stop - 1)
            meta: Metadata = {
                "chunk_index": index,
                "units": [first_units[0], last_units[1]],
                **start_metadata(sentence_plan, passed, run.first, p.threshold),
                "first_pass": [run.first, run.stop],
                "merges": run.merges,
            }
            span = Span(head.start, tail.end)
            chunks.append(make_chunk(sentence_plan, span, NAME, meta))
        return chunks

    def _merge(self, plan: SentencePlan, vectors: UnitVectors, passed: FirstPass) -> list[_Run]:
        p = self.params
        spans = passed.spans
        if not spans:
            return []
        runs = [
            _Run(i, i + 1, vector) for i, vector in enumerate(chunk_vectors(plan, vectors, passed))
        ]
        # The level at the cut before each first-pass chunk. A cut inside an atom is the cap's,
        # no topic change: never merged across (below the cap the first pass would not cut).
        firsts = [cut.first for cut in passed.cuts]
        gaps = passed.grain_gap[firsts]
        gaps[1:][np.diff(firsts) == 0] = -1  # pieces cut to fit the cap by exact counts
        at_cut = np.full(len(runs), np.inf)
        between = gaps >= 0
        if p.merge_threshold is not None:
            at_cut[between] = p.merge_threshold
        elif between.any():
            # The first pass's curve: the same units and weights, and the same window
            # (``SDPMParams.semantic`` hands it on).
            at_cut[between] = cut_levels(passed.curve, gaps[between], MERGE_PERCENTILE)
        cap = self.bounds.cap
        # A run's bounds name one vector within a call (runs only grow), so a pair is scored
        # once however many passes look at it again; a span's fit is asked once as well.
        pairs: dict[tuple[int, int, int, int], tuple[float, float]] = {}
        fits: dict[tuple[int, int], bool] = {}
        levels = at_cut.tolist()  # Python's max of a few floats, not numpy's, per pair
        numeric_levels = not np.isnan(at_cut).any()  # else numpy's max, which keeps a NaN
        changed = True
        while changed:
            changed = False
            i = 0
            while i < len(runs) - 1:
                best: tuple[float, int, float] | None = None
                left = runs[i]
                for j in range(i + 1, min(len(runs), i + 1 + p.skip_window)):
                    right = runs[j]
                    key = (left.first, left.stop, right.first, right.stop)
                    scored = pairs.get(key)
                    if scored is None:
                        # A merge must pass the level at every cut it removes.
                        level = (
                            max(levels[left.stop : right.first + 1])
                            if numeric_levels
                            else float(at_cut[left.stop : right.first + 1].max())
                        )
                        scored = pairs[key] = (run_similarity(left, right), level)
                    similarity, level = scored
                    if similarity <= level or (best is not None and similarity <= best[0]):
                        continue
                    fit = fits.get((left.first, right.stop))
                    if fit is None:
                        span = Span(spans[left.first].start, spans[right.stop - 1].end)
                        fit = plan.size([span]) <= cap and self.bounds.holds([span])
                        fits[(left.first, right.stop)] = fit
                    if fit:
                        best = (similarity, j, level)
                if best is None:
                    i += 1
                    continue
                similarity, j, level = best
                runs[i] = _Run(
                    runs[i].first,
                    runs[j].stop,
                    sum((r.vector for r in runs[i + 1 : j + 1]), runs[i].vector),
                    [
                        *runs[i].merges,
                        {
                            "partner": runs[j].first,
                            "similarity": round(similarity, 6),
                            "level": round(level, 6),
                            "bridged": j - i - 1,
                        },
                        *(m for run in runs[i + 1 : j + 1] for m in run.merges),
                    ],
                )
                del runs[i + 1 : j + 1]
                changed = True
        return runs
