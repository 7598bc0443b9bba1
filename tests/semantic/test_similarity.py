from __future__ import annotations

import numpy as np
import pytest

from worker.chunking.semantic.similarity import (
    cosine,
    gap_similarities,
    local_minima,
    percentile_cut,
    spaced_boundaries,
)


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


def test_percentile_cut_reads_threshold_as_a_fraction() -> None:
    values = [0.1, 0.2, 0.3, 0.4, 0.5]
    assert percentile_cut(values, 1.0) == 0.5
    assert percentile_cut(values, 0.5) == pytest.approx(0.3)
    assert percentile_cut(values, 0.8) == pytest.approx(0.42)


def test_window_one_is_the_cosine_of_neighbours() -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(5, 8))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    curve = gap_similarities(vectors, np.ones(5), 1)
    expected = [cosine(vectors[i], vectors[i + 1]) for i in range(4)]
    assert curve == pytest.approx(expected)


def test_window_sides_are_weighted_means() -> None:
    vectors = np.eye(4)
    weights = np.array([1.0, 3.0, 2.0, 1.0])
    curve = gap_similarities(vectors, weights, 2)
    # Gap 1: left = 1·e0 + 3·e1, right = 2·e2 + 1·e3: orthogonal.
    assert curve[1] == 0.0
    # Gap 0: left = e0, right = 3·e1 + 2·e2: orthogonal too; nothing shared anywhere.
    assert list(curve) == [0.0, 0.0, 0.0]
    shared = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert gap_similarities(shared, np.ones(3), 1) == pytest.approx([1.0, 0.0])


def test_spaced_boundaries_keep_the_deepest_first() -> None:
    curve = np.array([0.5, 0.1, 0.3, 0.2, 0.9])
    # Six units; cuts at gaps 1, 2, 3 would leave one-unit chunks; with two units per chunk the
    # deepest (gap 1) wins and gap 3 (two units after gap 1's cut) still fits.
    assert spaced_boundaries([1, 2, 3], curve, 6, 2) == [1, 3]
    assert spaced_boundaries([1, 2, 3], curve, 6, 1) == [1, 2, 3]
    assert spaced_boundaries([1, 2, 3], curve, 6, 3) == [2]
    # Too close to an edge: a chunk of one unit at the start is refused.
    assert spaced_boundaries([0], curve, 6, 2) == []


def test_cosine_of_zero_is_zero() -> None:
    assert cosine(np.zeros(3), np.ones(3)) == 0.0
