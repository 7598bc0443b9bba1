from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.chunking.semantic import similarity
from worker.chunking.semantic.similarity import cosine, depths, gap_similarities, local_minima


@pytest.mark.parametrize(
    ("curve", "expected"),
    [
        ([], []),
        ([0.3], []),  # one gap: nothing to compare with, no valley
        ([0.3, 0.3, 0.3], []),  # flat: one topic
        ([0.9, 0.2, 0.8], [1]),
        ([0.2, 0.9], [0]),  # an edge needs only its one neighbour higher
        ([0.9, 0.2], [1]),
        ([0.9, 0.2, 0.2, 0.8], [1]),  # a wide valley counts once, at its first gap
        ([0.9, 0.2, 0.2, 0.1, 0.8], [3]),  # a descending shelf is not a valley
        ([0.5, 0.1, 0.5, 0.2, 0.6, 0.3, 0.4], [1, 3, 5]),
    ],
)
def test_local_minima(curve: list[float], expected: list[int]) -> None:
    assert local_minima(curve) == expected


def _rows(vectors: np.ndarray) -> similarity.Rows:
    return lambda first, stop: vectors[first:stop].astype(np.float32)


def test_window_one_is_the_cosine_of_neighbours() -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(5, 8))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    curve = gap_similarities(_rows(vectors), 5, np.ones(5), 1)
    expected = [cosine(vectors[i], vectors[i + 1]) for i in range(4)]
    assert curve == pytest.approx(expected, abs=1e-6)


def test_window_sides_are_weighted_means() -> None:
    vectors = np.eye(4)
    weights = np.array([1.0, 3.0, 2.0, 1.0])
    # Gap 1: left = 1·e0 + 3·e1, right = 2·e2 + 1·e3: orthogonal; nothing shared anywhere.
    assert list(gap_similarities(_rows(vectors), 4, weights, 2)) == [0.0, 0.0, 0.0]
    shared = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert gap_similarities(_rows(shared), 3, np.ones(3), 1) == pytest.approx([1.0, 0.0])


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 60), st.integers(1, 5), st.integers(1, 9), st.integers(0, 2**31))
def test_the_curve_in_blocks_is_the_curve_at_once(
    count: int, window: int, block: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(count, 6))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    weights = rng.uniform(1, 20, count)
    whole = gap_similarities(_rows(vectors), count, weights, window)
    saved = similarity.BLOCK
    similarity.BLOCK = block
    try:
        blocked = gap_similarities(_rows(vectors), count, weights, window)
    finally:
        similarity.BLOCK = saved
    assert blocked == pytest.approx(whole, abs=1e-9)
    for gap in range(count - 1):  # and each value is what the definition says
        low, high = max(0, gap - window + 1), min(count, gap + 1 + window)
        left = (vectors[low : gap + 1] * weights[low : gap + 1, None]).sum(axis=0)
        right = (vectors[gap + 1 : high] * weights[gap + 1 : high, None]).sum(axis=0)
        assert whole[gap] == pytest.approx(cosine(left, right), abs=1e-6)


def test_depth_is_the_climb_to_the_nearest_peaks_within_reach() -> None:
    curve = np.array([0.9, 0.5, 0.2, 0.6, 0.8, 0.7])
    # Gap 2: left peak within 2 gaps is 0.9, right peak 0.8: (0.9-0.2) + (0.8-0.2).
    assert depths(curve, 2)[2] == pytest.approx(1.3)
    # Reach 1: only the neighbours, 0.5 and 0.6.
    assert depths(curve, 1)[2] == pytest.approx(0.7)
    assert (depths(curve, 2) >= 0).all()
    # A change farther than the reach does not move a depth.
    changed = curve.copy()
    changed[5] = 0.0
    assert depths(changed, 2)[2] == depths(curve, 2)[2]


def test_cosine_of_zero_is_zero() -> None:
    assert cosine(np.zeros(3), np.ones(3)) == 0.0
