"""The ``plan`` half shared by the three embedding strategies — the layout and the texts it needs
embedded — and turning the embeddings back into one vector per unit.

A *unit* is an atom of the layout (:mod:`.layout`): a sentence, a heading, a code block, a list
item… Every unit is embedded exactly once. A unit longer than the boundary model's window is cut
into windows (:class:`.model_window.ModelWindow`) and its vector is the mean of the window
vectors weighted by window length. Identical texts (repeated code lines, separators) are listed
once: the plan maps each window to a row of :attr:`SentencePlan.texts`.

Memory: the vectors of a large document are most of what chunking it holds (a float32 row per
distinct text), so :class:`UnitVectors` normalises the embeddings in place and serves unit rows
from them block by block, without a second matrix, when no unit needed windows.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
import numpy as np
from numpy.typing import NDArray

from worker.chunking.semantic.layout import Layout
from worker.chunking.semantic.model_window import ModelWindow
from worker.chunking.text.tokens import CharacterCounter, TokenCounter
from worker.chunking.types import SPAN_JOINER, ContentType, Span, join_spans


@dataclass(frozen=True, eq=False)
class SentencePlan:
    """What one document needs embedded, and how the rows map back to its units."""

    document: str
    content_type: ContentType
    layout: Layout
    texts: tuple[str, ...]
    """Distinct texts to embed, in first-use order."""
    piece_rows: NDArray[np.int64]
    """For each window, in unit order: its row in ``texts``."""
    piece_starts: NDArray[np.int64]
    """For each unit: the index of its first window (windows of a unit are consecutive)."""
    piece_weights: NDArray[np.float32]
    """For each window: its length in characters."""
    counter: TokenCounter
    """The sizing unit."""
    adds_up: bool
    """Token counts add up over this document's whitespace (:meth:`.sizing.Sizing.adds_up`):
    the size of any span of whole grains is then a difference of prefix sums, never a count."""

    @property
    def count(self) -> int:
        return self.layout.atom_count

    @property
    def units(self) -> tuple[Span, ...]:
        return self.layout.atom_spans()

    def size(self, spans: Sequence[Span]) -> int:
        """The size of ``spans`` joined by :data:`~worker.chunking.types.SPAN_JOINER`, in the
        sizing unit. Spans of whole grains are added up when the counts allow it."""
        if isinstance(self.counter, CharacterCounter):
            return sum(s.end - s.start for s in spans) + len(SPAN_JOINER) * (len(spans) - 1)
        if self.adds_up:
            starts, ends, sums, glued = self._grain_index()
            total = 0
            for span in spans:
                first = int(starts.searchsorted(span.start))
                last = int(ends.searchsorted(span.end))
                if (
                    first == len(starts)
                    or last == len(ends)
                    or starts[first] != span.start
                    or ends[last] != span.end
                    or glued[last + 1] != glued[first + 1]
                ):
                    break  # not whole grains, or a word cut inside: count it
                total += int(sums[last + 1] - sums[first])
            else:
                return total  # the joiner is whitespace: no tokens
        return self.counter.count(join_spans(self.document, spans))

    def _grain_index(self) -> tuple[NDArray[np.int64], ...]:
        """Grain starts, ends, prefix sums of sizes, and prefix counts of the gaps inside a
        word (where counts do not add up)."""
        index = self.__dict__.get("_index")
        if index is None:
            layout = self.layout
            sums = np.zeros(len(layout.grain_sizes) + 1, dtype=np.int64)
            np.cumsum(layout.grain_sizes, out=sums[1:])
            glued = np.zeros(len(layout.grain_sizes) + 1, dtype=np.int64)
            np.cumsum(glued_gaps(layout), out=glued[1:])
            index = (layout.grain_starts, layout.grain_ends, sums, glued)
            object.__setattr__(self, "_index", index)
        return index

    @property
    def weights(self) -> NDArray[np.float64]:
        """Each unit's size in the strategy's unit (at least 1): the weight of its vector in
        every mean."""
        return np.maximum(self.layout.sizes, 1).astype(np.float64)


def glued_gaps(layout: Layout) -> NDArray[np.bool_]:
    """Per grain: whether the gap before it is inside a word (no whitespace between)."""
    glued = np.zeros(len(layout.grain_starts), dtype=bool)
    glued[1:] = layout.grain_starts[1:] == layout.grain_ends[:-1]
    return glued


def plan_units(
    text: str,
    layout: Layout,
    window: ModelWindow,
    content_type: ContentType = "text/plain",
    *,
    counter: TokenCounter | None = None,
    adds_up: bool = False,
) -> SentencePlan:
    """The plan for ``layout``'s atoms: distinct window texts and the window → row map."""
    rows: dict[str, int] = {}
    texts: list[str] = []
    piece_rows = array("q")
    piece_starts = array("q")
    piece_weights = array("f")
    atoms = [Span(a, b) for a, b in zip(layout.starts.tolist(), layout.ends.tolist(), strict=True)]
    for pieces in window.pieces_of_many(text, atoms):
        piece_starts.append(len(piece_rows))
        for piece in pieces:
            piece_text = text[piece.start : piece.end]
            row = rows.get(piece_text)
            if row is None:
                row = rows[piece_text] = len(texts)
                texts.append(piece_text)
            piece_rows.append(row)
            piece_weights.append(piece.end - piece.start)
    return SentencePlan(
        document=text,
        content_type=content_type,
        layout=layout,
        texts=tuple(texts),
        piece_rows=np.frombuffer(piece_rows, dtype=np.int64).copy(),
        piece_starts=np.frombuffer(piece_starts, dtype=np.int64).copy(),
        piece_weights=np.frombuffer(piece_weights, dtype=np.float32).copy(),
        counter=counter or CharacterCounter(),
        adds_up=adds_up,
    )


def normalise_rows(matrix: NDArray[np.float32]) -> None:
    """Rows scaled to unit length in place (block by block); all-zero rows stay zero."""
    for at in range(0, len(matrix), 8192):
        block = matrix[at : at + 8192]
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        np.divide(block, norms, out=block, where=norms > 0)


class UnitVectors:
    """One L2-normalised float32 vector per unit, served as row blocks.

    ``embeddings`` (one row per plan text) is normalised *in place* when it is a writable
    float32 array — it is the pipeline's fresh result, used by nothing else — and copied first
    otherwise."""

    def __init__(self, plan: SentencePlan, embeddings: NDArray[Any]) -> None:
        matrix = np.asarray(embeddings)
        if matrix.ndim != 2 or matrix.shape[0] != len(plan.texts):
            raise ValueError(
                f"expected {len(plan.texts)} embeddings (one per plan text), "
                f"got shape {matrix.shape}"
            )
        if (
            matrix.dtype != np.float32
            or not matrix.flags.writeable
            or not matrix.flags.c_contiguous
        ):
            matrix = np.array(matrix, dtype=np.float32, order="C")
        normalise_rows(matrix)
        self.matrix = matrix
        self.plan = plan
        self.count = plan.count
        self.dimension = matrix.shape[1]
        pieces = len(plan.piece_rows)
        self._one_piece_each = pieces == self.count
        self._identity = self._one_piece_each and bool(
            np.array_equal(plan.piece_rows, np.arange(pieces))
        )

    def rows(self, first: int, stop: int) -> NDArray[np.float32]:
        """Unit vectors ``[first, stop)``."""
        plan = self.plan
        if self._identity:
            return self.matrix[first:stop]
        if self._one_piece_each:
            return self.matrix[plan.piece_rows[first:stop]]
        low = int(plan.piece_starts[first]) if first < self.count else len(plan.piece_rows)
        high = int(plan.piece_starts[stop]) if stop < self.count else len(plan.piece_rows)
        pieces = self.matrix[plan.piece_rows[low:high]] * plan.piece_weights[low:high, None]
        summed = np.add.reduceat(pieces, plan.piece_starts[first:stop] - low, axis=0)
        normalise_rows(summed)
        return summed

    def weighted_sum(
        self, first: int, stop: int, weights: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Σ weight × vector over units ``[first, stop)``, in float64."""
        block = self.rows(first, stop).astype(np.float64)
        summed: NDArray[np.float64] = weights[first:stop] @ block
        return summed


P = TypeVar("P", bound=msgspec.Struct)


def merge_params(params_type: type[P], params: P | None, overrides: dict[str, Any]) -> P:
    """``params`` (or the defaults) with keyword overrides applied and validated; a bad value
    is a ``ValueError`` naming the field, as the registry expects of factories."""
    base = msgspec.to_builtins(params or params_type())
    try:
        return msgspec.convert({**base, **overrides}, params_type)
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from None
