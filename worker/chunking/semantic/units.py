"""Sentence units and the texts they need embedded: the shared ``plan`` half of the three
embedding strategies, and turning the embeddings back into one vector per unit.

A *unit* is a sentence (or a run of very short sentences joined together, or a piece of a
sentence longer than the chunk cap): a stripped span of the document that fits the cap. Every
unit is embedded exactly once. A unit longer than the model's window is cut into windows
(:class:`.model_window.ModelWindow`) and its vector is the mean of the window
vectors weighted by window length. Identical texts (repeated code lines, separators) are listed
once: the plan maps each window to a row of :attr:`SentencePlan.texts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
import numpy as np
from numpy.typing import NDArray

from worker.chunking.semantic.model_window import ModelWindow
from worker.chunking.text import terminators
from worker.chunking.text.segment import cap_spans, split_sentences
from worker.chunking.text.tokens import CharacterCounter, TokenCounter
from worker.chunking.types import ContentType, Span


@dataclass(frozen=True, eq=False)
class SentencePlan:
    """What one document needs embedded, and how the rows map back to its units."""

    document: str
    content_type: ContentType
    units: tuple[Span, ...]
    sizes: NDArray[np.float64]
    """Each unit's size in the strategy's unit (characters or tokens): the mean weights."""
    texts: tuple[str, ...]
    """Distinct texts to embed, in first-use order."""
    piece_rows: NDArray[np.intp]
    """For each window, in unit order: its row in ``texts``."""
    piece_starts: NDArray[np.intp]
    """For each unit: the index of its first window (windows of a unit are consecutive)."""
    piece_weights: NDArray[np.float64]
    """For each window: its length in characters."""


def sentence_units(
    text: str, counter: TokenCounter, cap: int, *, min_characters: int = 0, clauses: bool = False
) -> list[Span]:
    """Sentences within ``cap``; those under ``min_characters`` join their neighbour.

    A sentence over the cap is cut at Arabic clause marks first when ``clauses`` is set, then at
    words, then characters. A short sentence joins the next unit (the last one joins the one
    before) unless the joined span would pass the cap; then it stays alone, never dropped.
    """
    pieces: list[Span] = []
    for sentence in join_soft_wraps(text, split_sentences(text)):
        if clauses and _size(text, sentence, counter) > cap:
            offset = sentence.start
            parts = split_sentences(text[sentence.start : sentence.end], clauses=True)
            shifted = [Span(p.start + offset, p.end + offset) for p in parts]
            pieces.extend(cap_spans(text, shifted, counter, cap))
        else:
            pieces.extend(cap_spans(text, [sentence], counter, cap))
    if min_characters <= 0:
        return pieces
    units: list[Span] = []
    pending: Span | None = None
    for piece in pieces:
        if pending is not None:
            joined = Span(pending.start, piece.end)
            if _size(text, joined, counter) <= cap:
                piece = joined
            else:
                units.append(pending)
            pending = None
        if piece.end - piece.start < min_characters:
            pending = piece
        else:
            units.append(piece)
    if pending is not None:
        if units and _size(text, Span(units[-1].start, pending.end), counter) <= cap:
            units[-1] = Span(units[-1].start, pending.end)
        else:
            units.append(pending)
    return units


# A line that ends on one of these closes its sentence; a wrap after anything else may not.
_CLOSERS = frozenset(terminators.ALL + ":;")


def join_soft_wraps(text: str, sentences: list[Span]) -> list[Span]:
    """Rejoin sentences that a hard-wrapped line break cut in two.

    The segmenter ends a sentence at every line break, which is right for lists, headings and
    code, but hard-wrapped prose ("... instead of\nadding new ones.") then yields fragments, and
    an embedding of half a sentence makes a poor boundary signal. A break is taken back when it
    is a single line break (no blank line), the text before it does not close a sentence, and
    the next line goes on in lower case.
    """
    joined: list[Span] = []
    for span in sentences:
        if joined:
            previous = joined[-1]
            gap = text[previous.end : span.start]
            if (
                gap.count("\n") == 1
                and not gap.strip()
                and text[previous.end - 1] not in _CLOSERS
                and text[span.start].islower()
            ):
                joined[-1] = Span(previous.start, span.end)
                continue
        joined.append(span)
    return joined


def _size(text: str, span: Span, counter: TokenCounter) -> int:
    if isinstance(counter, CharacterCounter):
        return span.end - span.start
    return counter.count(text[span.start : span.end])


def plan_units(
    text: str,
    units: Sequence[Span],
    counter: TokenCounter,
    window: ModelWindow,
    content_type: ContentType = "text/plain",
) -> SentencePlan:
    """The plan for ``units``: sizes, distinct window texts and the window → row map."""
    rows: dict[str, int] = {}
    texts: list[str] = []
    piece_rows: list[int] = []
    piece_starts: list[int] = []
    piece_weights: list[int] = []
    sizes: list[int] = []
    characters = isinstance(counter, CharacterCounter)
    for unit in units:
        sizes.append(
            unit.end - unit.start if characters else counter.count(text[unit.start : unit.end])
        )
        piece_starts.append(len(piece_rows))
        for piece in window.pieces(text, unit):
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
        units=tuple(units),
        sizes=np.asarray(sizes, dtype=np.float64),
        texts=tuple(texts),
        piece_rows=np.asarray(piece_rows, dtype=np.intp),
        piece_starts=np.asarray(piece_starts, dtype=np.intp),
        piece_weights=np.asarray(piece_weights, dtype=np.float64),
    )


def unit_vectors(plan: SentencePlan, embeddings: NDArray[np.float32]) -> NDArray[np.float64]:
    """One L2-normalised vector per unit (a zero row stays zero), ``[units, dim]`` float64."""
    if not plan.units:
        return np.zeros((0, 0), dtype=np.float64)
    matrix = np.asarray(embeddings, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != len(plan.texts):
        raise ValueError(
            f"expected {len(plan.texts)} embeddings (one per plan text), got shape {matrix.shape}"
        )
    # Normalise each row first, so a window's weight is its length, not its vector's norm.
    matrix = normalise(matrix)
    pieces = matrix[plan.piece_rows]
    if len(pieces) == len(plan.units):  # no unit was cut into windows: one row per unit
        return pieces
    summed = np.add.reduceat(pieces * plan.piece_weights[:, None], plan.piece_starts, axis=0)
    return normalise(summed)


def normalise(matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    """Rows scaled to unit length; all-zero rows are left as they are."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    scaled: NDArray[np.float64] = np.divide(
        matrix, norms, out=np.zeros_like(matrix), where=norms > 0
    )
    return scaled


P = TypeVar("P", bound=msgspec.Struct)


def merge_params(params_type: type[P], params: P | None, overrides: dict[str, Any]) -> P:
    """``params`` (or the defaults) with keyword overrides applied and validated; a bad value
    is a ``ValueError`` naming the field, as the registry expects of factories."""
    base = msgspec.to_builtins(params or params_type())
    try:
        return msgspec.convert({**base, **overrides}, params_type)
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from exc
