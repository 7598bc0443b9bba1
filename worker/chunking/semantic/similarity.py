"""The similarity curve between consecutive units and where its valleys are.

Pure numpy on unit vectors that are already L2-normalised. Gap ``g`` is the place between unit
``g`` and unit ``g + 1``; a boundary at gap ``g`` starts a new chunk with unit ``g + 1``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray


def gap_similarities(
    vectors: NDArray[np.float64], weights: NDArray[np.float64], window: int
) -> NDArray[np.float64]:
    """Cosine similarity across every gap, ``[units - 1]``.

    Each side of gap ``g`` is the size-weighted mean of up to ``window`` unit vectors: units
    ``g - window + 1 .. g`` on the left, ``g + 1 .. g + window`` on the right (fewer at the
    document's edges). No text is embedded again: the windows are means of vectors already there.
    """
    count = len(vectors)
    if count < 2:
        return np.zeros(0, dtype=np.float64)
    weighted = vectors * weights[:, None]
    cumulative = np.zeros((count + 1, vectors.shape[1]), dtype=np.float64)
    np.cumsum(weighted, axis=0, out=cumulative[1:])
    cut = np.arange(1, count)  # index of the first unit on the right of each gap
    left = cumulative[cut] - cumulative[np.maximum(cut - window, 0)]
    right = cumulative[np.minimum(cut + window, count)] - cumulative[cut]
    dots = np.einsum("ij,ij->i", left, right)
    norms = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
    similarities: NDArray[np.float64] = np.divide(
        dots, norms, out=np.zeros_like(dots), where=norms > 0
    )
    return similarities


def local_minima(curve: Sequence[float] | NDArray[np.float64]) -> list[int]:
    """Gaps where the curve has a valley: a run of equal values lower than both runs beside it.

    A run at either end of the curve needs only its one neighbour to be higher; a curve that is
    flat (or has a single gap) has no valley. A valley several gaps wide counts once, at its
    first gap, so equal values never yield two boundaries side by side. No smoothing: the
    windowed means of :func:`gap_similarities` already damp single-sentence noise, and a
    smoothing filter would move valleys away from the gap where the topic actually changes.
    """
    values = [float(v) for v in curve]
    minima: list[int] = []
    count = len(values)
    start = 0
    while start < count:
        end = start
        while end + 1 < count and values[end + 1] == values[start]:
            end += 1
        left = values[start - 1] if start > 0 else None
        right = values[end + 1] if end + 1 < count else None
        value = values[start]
        higher_left = left is None or left > value
        higher_right = right is None or right > value
        if higher_left and higher_right and (left is not None or right is not None):
            minima.append(start)
        start = end + 1
    return minima


def percentile_cut(values: Sequence[float], threshold: float) -> float:
    """The ``threshold × 100``-th percentile of ``values`` (linear interpolation)."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), threshold * 100.0))


def spaced_boundaries(
    candidates: Sequence[int], curve: NDArray[np.float64], units: int, min_units: int
) -> list[int]:
    """Candidate gaps kept so that every chunk has at least ``min_units`` units.

    The deepest valleys are placed first (ties: the earlier gap); a candidate is skipped when it
    would leave fewer than ``min_units`` units to the nearest kept boundary or document edge.
    Returns kept gaps in document order.
    """
    kept: list[int] = []  # cut positions (first unit of the new chunk), sorted
    for gap in sorted(candidates, key=lambda g: (float(curve[g]), g)):
        cut = gap + 1
        at = bisect_left(kept, cut)
        left = kept[at - 1] if at > 0 else 0
        right = kept[at] if at < len(kept) else units
        if cut - left >= min_units and right - cut >= min_units:
            kept.insert(at, cut)
    return [cut - 1 for cut in kept]


def cosine(left: NDArray[np.float64], right: NDArray[np.float64]) -> float:
    """Cosine similarity of two vectors of any length (0 when either is zero)."""
    norm = float(np.linalg.norm(left) * np.linalg.norm(right))
    return float(np.dot(left, right)) / norm if norm > 0 else 0.0
