"""Where chunks start, model-free: the best gaps first within a hard minimum and cap."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.chunking.semantic.cuts import Caps, Grains, RangeArgmax, segment

TOP = 4e3  # keys of gaps between atoms: tier × 1e3 + benefit (first_pass.grains_of)


def grains(
    sizes: list[int],
    benefits: list[float],
    *,
    heading: list[bool] | None = None,
    atoms: list[int] | None = None,
    whole: list[bool] | None = None,
) -> Grains:
    """Token-like grains (sizes add up) with a benefit per gap (``benefits[0]`` unused)."""
    count = len(sizes)
    sums = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    heading_flags = np.array(heading or [False] * count)
    atom_of = np.array(atoms if atoms is not None else range(count), dtype=np.int64)
    between = np.ones(count, dtype=bool)
    between[1:] = atom_of[1:] != atom_of[:-1]
    keys = np.where(between, TOP + np.clip(benefits, -500, 500), 2e3).astype(np.float64)
    after_heading = np.zeros(count, dtype=bool)
    after_heading[1:] = heading_flags[:-1] & between[1:]
    keys[after_heading] = -np.inf
    keys[0] = -np.inf
    benefit = np.where(between, np.asarray(benefits, dtype=np.float64), -np.inf)
    whole_flags = np.array(whole) if whole is not None else np.zeros(count, dtype=bool)
    return Grains(sums[:-1], sums[1:], keys, benefit, heading_flags, whole_flags, ~between)


def pieces(g: Grains, caps: Caps) -> list[tuple[int, int]]:
    return [(c.first, c.stop) for c in segment(g, caps)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=200), st.data())
def test_range_argmax_is_the_leftmost_maximum(keys: list[float], data: st.DataObject) -> None:
    table = RangeArgmax(np.asarray(keys))
    low = data.draw(st.integers(0, len(keys) - 1))
    high = data.draw(st.integers(low, len(keys) - 1))
    window = keys[low : high + 1]
    assert table.argmax(low, high) == low + window.index(max(window))


def test_positive_gaps_cut_strongest_first_keeping_the_minimum() -> None:
    sizes = [10] * 10
    benefit = [0.0, -1, -1, 3.0, 2.0, -1, -1, -1, 5.0, -1]
    got = pieces(grains(sizes, benefit), Caps(cap=1000, minimum=20, atom_cap=1000))
    # Gap 8 (5.0) first, then gap 3 (3.0); gap 4 (2.0) would leave 10 < 20 after gap 3.
    assert got == [(0, 3), (3, 8), (8, 10)]


def test_a_piece_within_the_cap_without_a_positive_gap_stays_whole() -> None:
    got = pieces(grains([10] * 5, [0.0, -1, -2, -0.5, -1]), Caps(100, 5, 100))
    assert got == [(0, 5)]


def test_over_the_cap_the_best_gap_cuts_whatever_its_benefit() -> None:
    benefit = [0.0, -3, -0.5, -3, -3, -3]
    got = pieces(grains([10] * 6, benefit), Caps(cap=40, minimum=5, atom_cap=40))
    assert got == [(0, 2), (2, 6)]


def test_a_heading_never_ends_a_chunk_nor_stands_alone() -> None:
    #        text  text  heading  text  text
    sizes = [20, 20, 5, 20, 20]
    heading = [False, False, True, False, False]
    benefit = [0.0, -1, 9.0, -1, -1]  # the section start is the place to cut
    got = pieces(grains(sizes, benefit, heading=heading), Caps(60, 5, 60))
    assert got == [(0, 2), (2, 5)]
    # Cap pressure after the heading: the cut still does not separate it from its text.
    got = pieces(grains(sizes, [0.0, -1, 9.0, -1, -1], heading=heading), Caps(45, 5, 45))
    assert all(not (heading[stop - 1] and stop < 5) for _, stop in got)
    assert all(not all(heading[a:b]) for a, b in got)


def test_a_cut_that_breaks_a_block_is_repaired_when_the_chunks_around_allow() -> None:
    # A chunk of prose, then a small section (heading + line) before a code block that fills
    # most of the cap: the section start is the strongest gap, but cutting there leaves the
    # section too small to stand and the code block with it over the cap. The section must
    # go to the chunk before.
    #         prose  heading  line  code (four lines of one atom)
    sizes = [100, 3, 9, 65, 60, 60, 60]
    atoms = [0, 1, 2, 3, 3, 3, 3]
    heading = [False, True, False, False, False, False, False]
    benefit = [0.0, 50.0, -1, -1, -1, -1, -1]
    whole = [False, False, False, False, True, True, True]
    g = grains(sizes, benefit, heading=heading, atoms=atoms, whole=whole)
    got = pieces(g, Caps(cap=254, minimum=31, atom_cap=254))
    assert got == [(0, 3), (3, 7)]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_sizes_are_hard(data: st.DataObject) -> None:
    cap = data.draw(st.integers(8, 300))
    minimum = data.draw(st.integers(0, cap // 4))
    limit = max(1, cap - 2 * minimum)
    count = data.draw(st.integers(1, 60))
    sizes = data.draw(st.lists(st.integers(1, limit), min_size=count, max_size=count))
    benefit = data.draw(st.lists(st.floats(-5, 5, allow_nan=False), min_size=count, max_size=count))
    # Headings: never two in a row, never the last grain (a document ends with text).
    heading = [data.draw(st.booleans()) if 0 < i < count - 1 else False for i in range(count)]
    for i in range(1, count):
        heading[i] = heading[i] and not heading[i - 1]
    heading = [h and sizes[i] <= minimum for i, h in enumerate(heading)]
    got = pieces(grains(sizes, benefit, heading=heading), Caps(cap, minimum, cap))
    assert [a for a, _ in got] == sorted({a for a, _ in got})
    assert got[0][0] == 0
    assert got[-1][1] == count
    total = sum(sizes)
    for first, stop in got:
        size = sum(sizes[first:stop])
        assert size <= cap
        if total >= minimum:
            assert size >= minimum, (first, stop, size)
        assert not all(heading[first:stop])
        assert not heading[stop - 1] or stop == count


def test_a_cut_only_a_heading_allowed_is_repaired() -> None:
    """Found by hypothesis (CI, 2026-12-01): the cap splits a run of small grains at its
    leftmost gap, which leaves a heading and a large grain just over the cap with no gap but the
    one after the heading; the fallback cut there, and the chunk ended with the heading. The
    repair cuts the chunks around it again, and none ends with a heading."""
    sizes = [1] * 13 + [9, 20] + [1] * 38
    benefit = [0.0] * len(sizes)
    benefit[24] = 1.0
    heading = [False] * len(sizes)
    heading[13] = True
    got = pieces(grains(sizes, benefit, heading=heading), Caps(40, 10, 40))
    assert got[-1][1] == len(sizes)
    for first, stop in got:
        assert 10 <= sum(sizes[first:stop]) <= 40
        assert not heading[stop - 1]
