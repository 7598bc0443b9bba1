"""The shared core of the three embedding strategies: the plan (layout + texts to embed) and the
first pass (where chunks start), from the layout's structure and the similarity curve.

Sizes: ``cap`` and ``minimum`` are hard, in the sizing unit (:mod:`.sizing`). Every gap gets

- a *level* from the layout (section, block, item, sentence; glue and the gaps inside an atom
  are cut only to meet the cap),
- *evidence* from the curve: how deep the gap lies below the peaks around it
  (:func:`.similarity.depths`, within :data:`REACH` gaps), in units of :data:`DEPTH_UNIT` of
  cosine similarity — a fixed level, so that no decision depends on the rest of the document,
- a *benefit*: evidence minus the bar of its level. ``threshold`` is the bar at a paragraph
  break; inside a paragraph the bar is :data:`SENTENCE_BAR` × ``threshold`` (a cut there needs
  stronger evidence); before a heading there is no bar (a section start is always a good
  place, as long as both sides keep the minimum).

:func:`.cuts.segment` then places the cuts. What a decision reads is local: a gap's depth reads
``2·REACH + 1`` curve values, each of which reads ``2·similarity_window`` units, and nothing
else of the document.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from worker.chunking.semantic.cuts import Caps, Cut, Grains, segment
from worker.chunking.semantic.layout import (
    BLOCK,
    GLUE,
    HEADING,
    ITEM,
    LEVEL_NAMES,
    LINE,
    PROSE,
    SECTION,
    SENTENCE,
    Layout,
    read_layout,
)
from worker.chunking.semantic.model_window import ModelWindow
from worker.chunking.semantic.similarity import depths, gap_similarities
from worker.chunking.semantic.sizing import Sizing, count_many
from worker.chunking.semantic.units import SentencePlan, UnitVectors, glued_gaps, plan_units
from worker.chunking.text.character_cap import CharacterCap
from worker.chunking.text.segment import split_to_cap
from worker.chunking.types import SPAN_JOINER, ContentType, Span

REACH = 2
"""Gaps on each side where the peaks around a dip are looked for."""
SENTENCE_BAR = 2.0
"""A cut inside a paragraph needs this many times the evidence of a cut at a paragraph break."""
ITEM_BAR = 1.0
"""Between two items of one list: as at a paragraph break."""

_TIER = 1e3  # keys: tier × _TIER + benefit (benefit clipped to ±_TIER / 2)


@dataclass(frozen=True)
class Bounds:
    """The hard sizes of one strategy, in its sizing unit: ``cap`` and ``minimum`` per chunk,
    and ``atom_cap`` (≥ ``cap``) for a chunk made of one atom (:class:`.cuts.Caps`); and in
    tokens the hard cap in characters beside them (:mod:`worker.chunking.text.character_cap`)."""

    cap: int
    minimum: int
    atom_cap: int = 0
    characters: CharacterCap | None = None

    def holds(self, spans: Sequence[Span]) -> bool:
        """Whether the text of ``spans`` (joined by ``SPAN_JOINER``) is within the character
        cap (always in characters)."""
        if self.characters is None:
            return True
        joiners = len(SPAN_JOINER) * (len(spans) - 1)
        return sum(s.end - s.start for s in spans) + joiners <= self.characters.characters

    @property
    def caps(self) -> Caps:
        return Caps(self.cap, self.minimum, max(self.cap, self.atom_cap))

    @property
    def grain_limit(self) -> int:
        """Largest grain that still lets every piece keep the minimum (see :mod:`.cuts`)."""
        return max(1, self.cap - 2 * self.minimum)


def plan_document(
    text: str,
    content_type: ContentType,
    sizing: Sizing,
    bounds: Bounds,
    window: ModelWindow,
    min_characters: int = 0,
    *,
    clauses: bool = False,
) -> SentencePlan:
    layout = read_layout(
        text,
        sizing.counter,
        lambda texts: count_many(sizing.counter, texts),
        bounds.grain_limit,
        min_characters,
        clauses=clauses,
    )
    return plan_units(
        text, layout, window, content_type, counter=sizing.counter, adds_up=sizing.adds_up(text)
    )


DEPTH_UNIT = 0.15
"""The depth, in cosine similarity, that one unit of evidence stands for: a fixed level, the
same for every document. The shipped boundary models agree on it — the median depth of a
document is 0.10–0.19 for the distilled static model and 0.11–0.20 for the transformer (measured:
docs/benchmarks.md) — and a level read from each document itself (its median
depth) moved with every edit, cut or joined chunks far from it, and chose no better boundaries.
Another model may want its own ``threshold``."""


def evidence_of(curve: NDArray[np.float64]) -> NDArray[np.float64]:
    """Each gap's depth, in units of :data:`DEPTH_UNIT`."""
    result: NDArray[np.float64] = depths(curve, REACH) / DEPTH_UNIT
    return result


@dataclass(frozen=True)
class FirstPass:
    """Where the chunks of one document start, and what placed each start."""

    cuts: list[Cut]
    spans: list[Span]
    evidence: NDArray[np.float64]
    """Per atom gap (``[atoms - 1]``)."""
    grain_gap: NDArray[np.int64]
    """For each grain: the atom gap before it (``-1`` inside an atom or at the start)."""
    curve: NDArray[np.float64]
    """The similarity curve the evidence was read from (``sdpm``'s second pass reads it too)."""
    similarity_window: int
    """The window the curve was computed with."""


def bars(threshold: float) -> NDArray[np.float64]:
    """The bar of each level (indexed by level): none at a section start, ``threshold`` at a
    block or between items, ``SENTENCE_BAR × threshold`` inside a paragraph."""
    table = np.full(SECTION + 1, np.inf)
    table[SECTION] = -np.inf
    table[BLOCK] = threshold
    table[ITEM] = ITEM_BAR * threshold
    table[SENTENCE] = SENTENCE_BAR * threshold
    return table


def grain_gaps(layout: Layout) -> NDArray[np.int64]:
    atoms = layout.grain_atoms
    gap = np.full(len(atoms), -1, dtype=np.int64)
    if len(atoms) > 1:
        starts_atom = atoms[1:] != atoms[:-1]
        gap[1:][starts_atom] = atoms[1:][starts_atom] - 1
    return gap


def content_rank(text: str, layout: Layout, chosen: NDArray[np.bool_]) -> NDArray[np.float64]:
    """For the ``chosen`` gaps (those without evidence: glue, inside an atom), a rank in
    [0, 1) that orders equals by what the text there looks like, never by where it is: a blank
    line before the grain first (a paragraph of code), then a grain that starts flush left
    (a top-level statement, not a continuation), then a hash of its first characters. A piece
    too large for one chunk is then cut where its content says, as content-defined chunking
    (rsync, FastCDC) does: an edit elsewhere in the piece does not move the cut."""
    rank = np.zeros(len(chosen), dtype=np.float64)
    for k in np.flatnonzero(chosen).tolist():
        if k == 0:
            continue
        start, before = int(layout.grain_starts[k]), int(layout.grain_ends[k - 1])
        between = text[before:start]
        line = text.rfind("\n", 0, start) + 1
        score = 0.5 if between.count("\n") > 1 else 0.0
        score += 0.25 if line == start else 0.0
        score += (zlib.crc32(text[start : start + 32].encode()) % 1000) / 4001.0
        rank[k] = score
    return rank


def grains_of(
    text: str,
    layout: Layout,
    evidence: NDArray[np.float64],
    threshold: float,
    sizing: Sizing,
    cap: int,
) -> tuple[Grains, NDArray[np.int64]]:
    """Keys and benefits of every grain gap, and the sizes :func:`.cuts.segment` reads."""
    gap = grain_gaps(layout)
    levels = layout.grain_levels.astype(np.int64)
    between = gap >= 0
    benefits = np.full(len(gap), -np.inf)
    if evidence.size:
        bar = bars(threshold)[np.where(between, levels, 0)]
        scored = between & (levels >= SENTENCE)
        benefits[scored] = evidence[gap[scored]] - bar[scored]

    # Glue, line, word, char: their tier and a content-defined place among their equals.
    keys = levels.astype(np.float64) * _TIER + content_rank(text, layout, levels < SENTENCE)
    top = levels >= SENTENCE
    keys[top] = SENTENCE * _TIER + np.clip(benefits[top], -_TIER / 2, _TIER / 2)
    # A heading never ends a chunk: the gap after one is not a place to cut.
    kinds = layout.kinds[layout.grain_atoms]
    after_heading = np.zeros(len(gap), dtype=bool)
    after_heading[1:] = between[1:] & (kinds[:-1] == HEADING)
    keys[after_heading] = -np.inf
    keys[0] = -np.inf
    benefits[levels == GLUE] = -np.inf
    if sizing.characters:
        left_at, right_at = layout.grain_starts, layout.grain_ends
    else:
        cumulative = np.zeros(len(gap) + 1, dtype=np.int64)
        np.cumsum(layout.grain_sizes, out=cumulative[1:])
        left_at, right_at = cumulative[:-1], cumulative[1:]
    # A gap inside an atom that fits the cap: cutting it breaks what could stay whole (but for
    # the end of a short sentence joined to the next: a sentence end all the same).
    whole = np.zeros(len(gap), dtype=bool)
    joined = (kinds == PROSE) & (levels == LINE)
    whole[1:] = ~between[1:] & (layout.sizes[layout.grain_atoms[1:]] <= cap) & ~joined[1:]
    glued = ~between | (levels == GLUE)
    grains = Grains(left_at, right_at, keys, benefits, kinds == HEADING, whole, glued)
    return grains, gap


def first_pass(
    plan: SentencePlan,
    vectors: UnitVectors,
    sizing: Sizing,
    bounds: Bounds,
    *,
    threshold: float,
    similarity_window: int,
    min_units: int = 1,
) -> FirstPass:
    layout = plan.layout
    if not plan.count:
        return FirstPass(
            [], [], np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0), similarity_window
        )
    curve = gap_similarities(vectors.rows, plan.count, plan.weights, similarity_window)
    evidence = evidence_of(curve)
    grains, gap = grains_of(
        plan.document, layout, evidence, threshold, sizing, bounds.caps.atom_cap
    )
    cuts = segment(grains, bounds.caps, min_units)
    spans = [
        Span(int(layout.grain_starts[c.first]), int(layout.grain_ends[c.stop - 1])) for c in cuts
    ]
    if not sizing.characters:
        cuts, spans = enforce_cap(plan, cuts, spans, sizing, bounds.caps.atom_cap)
        cuts, spans = enforce_characters(plan.document, cuts, spans, bounds)
    return FirstPass(cuts, spans, evidence, gap, curve, similarity_window)


def enforce_cap(
    plan: SentencePlan, cuts: list[Cut], spans: list[Span], sizing: Sizing, cap: int
) -> tuple[list[Cut], list[Span]]:
    """Where the grain sums only estimate a chunk's tokens — a tokenizer whose counts do not
    add up over whitespace, or a word cut inside — the chunk is counted exactly, and one over
    the cap is cut at words (then characters) to fit."""
    text = plan.document
    glued = glued_gaps(plan.layout)
    if plan.adds_up and not glued.any():
        return cuts, spans
    sizes = np.array([plan.size([span]) for span in spans], dtype=np.int64)
    if int(sizes.max(initial=0)) <= cap:
        return cuts, spans
    out_cuts: list[Cut] = []
    out_spans: list[Span] = []
    for cut, span, size in zip(cuts, spans, sizes, strict=True):
        if size <= cap:
            out_cuts.append(cut)
            out_spans.append(span)
            continue
        for n, piece in enumerate(split_to_cap(text, span, sizing.counter, cap)):
            out_cuts.append(cut if n == 0 else Cut(cut.first, cut.stop, "cap"))
            out_spans.append(piece)
    return out_cuts, out_spans


def enforce_characters(
    text: str, cuts: list[Cut], spans: list[Span], bounds: Bounds
) -> tuple[list[Cut], list[Span]]:
    """Each chunk over the character cap cut into its pieces (at its last word end within the
    cap, else inside a run between grapheme clusters, each within the token cap too); the
    pieces after the first start for the ``cap``."""
    limit = bounds.characters
    if limit is None or all(bounds.holds([span]) for span in spans):
        return cuts, spans
    out_cuts: list[Cut] = []
    out_spans: list[Span] = []
    for cut, span in zip(cuts, spans, strict=True):
        if bounds.holds([span]):
            out_cuts.append(cut)
            out_spans.append(span)
            continue
        pieces = limit.pieces(text, span.start, span.end, bounds.caps.atom_cap)
        for n, (start, end, _) in enumerate(pieces):
            out_cuts.append(cut if n == 0 else Cut(cut.first, cut.stop, "cap"))
            out_spans.append(Span(start, end))
    return out_cuts, out_spans


def level_name(layout: Layout, grain: int) -> str:
    return LEVEL_NAMES[int(layout.grain_levels[grain])]
