"""The similarity curve between consecutive units, and how deep a dip in it is.

Pure numpy on unit vectors that are already L2-normalised. Gap ``g`` is the place between unit
``g`` and unit ``g + 1``.

Memory: a document of a few hundred thousand units has a vector matrix of hundreds of MB, so
nothing here makes a copy of it. The curve is computed block by block (:data:`BLOCK` gaps at a
time), each block's window sums in float64 (exact enough for differences of sums), and only the
curve itself — one float per gap — is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

# Gaps per block of the curve: a block holds BLOCK × dimension float64s, whatever the document.
BLOCK = 512

Rows = Callable[[int, int], NDArray[np.float32]]
"""Unit vectors ``[first, stop)`` as rows, L2-normalised (a zero row: no direction)."""


def gap_similarities(
    rows: Rows, count: int, weights: NDArray[np.float64], window: int
) -> NDArray[np.float64]:
    """Cosine similarity across every gap, ``[count - 1]``.

    Each side of gap ``g`` is the size-weighted mean of up to ``window`` unit vectors: units
    ``g - window + 1 .. g`` on the left, ``g + 1 .. g + window`` on the right (fewer at the
    document's edges). No text is embedded again: the windows are means of vectors already there.
    """
    curve = np.zeros(max(0, count - 1), dtype=np.float64)
    for first_gap in range(0, count - 1, BLOCK):
        stop_gap = min(first_gap + BLOCK, count - 1)
        # Units the block reads: window units left of its first gap to window right of its last.
        low = max(0, first_gap - window + 1)
        high = min(count, stop_gap + window)
        block = rows(low, high).astype(np.float64) * weights[low:high, None]
        cumulative = np.zeros((high - low + 1, block.shape[1]), dtype=np.float64)
        # Row by row: the same additions in the same order as np.cumsum(axis=0), whose
        # accumulation walks each column down the rows, across memory, and was slower
        # (bench/semantic_bench.py; docs/benchmarks.md).
        for unit, row in enumerate(block):
            np.add(cumulative[unit], row, out=cumulative[unit + 1])
        cut = np.arange(first_gap + 1, stop_gap + 1)  # first unit on the right of each gap
        left = cumulative[cut - low] - cumulative[np.maximum(cut - window, 0) - low]
        right = cumulative[np.minimum(cut + window, count) - low] - cumulative[cut - low]
        dots = np.einsum("ij,ij->i", left, right)
        norms = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
        np.divide(dots, norms, out=curve[first_gap:stop_gap], where=norms > 0)
    return curve


def depths(curve: NDArray[np.float64], reach: int) -> NDArray[np.float64]:
    """How deep each gap lies below the peaks around it: ``(left peak − c) + (right peak − c)``,
    the peaks being the highest values within ``reach`` gaps on each side (the gap itself
    included, so a depth is never negative). A depth reads ``2·reach + 1`` curve values: an edit
    changes the depths near it only."""
    count = len(curve)
    if count == 0:
        return np.zeros(0, dtype=np.float64)
    padded = np.full(count + 2 * reach, -np.inf)
    padded[reach : reach + count] = curve
    windows = np.lib.stride_tricks.sliding_window_view(padded, reach + 1)
    left_peak = windows[:count].max(axis=1)
    right_peak = windows[reach : reach + count].max(axis=1)
    result: NDArray[np.float64] = (left_peak - curve) + (right_peak - curve)
    return result


def local_minima(curve: Sequence[float] | NDArray[np.float64]) -> list[int]:
    """Gaps where the curve has a valley: a run of equal values lower than both runs beside it.

    A run at either end of the curve needs only its one neighbour to be higher; a curve that is
    flat (or has a single gap) has no valley. A valley several gaps wide counts once, at its
    first gap, so equal values never yield two boundaries side by side.
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


def cosine(left: NDArray[np.floating], right: NDArray[np.floating]) -> float:
    """Cosine similarity of two vectors of any length (0 when either is zero)."""
    norm = float(np.linalg.norm(left) * np.linalg.norm(right))
    return float(np.dot(left, right)) / norm if norm > 0 else 0.0
