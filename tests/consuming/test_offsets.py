"""The offset tracker: a commit point never passes an unfinished record."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.consuming.offsets import OffsetTracker, PartitionOffsets


def test_in_order_completion_advances_one_by_one() -> None:
    p = PartitionOffsets()
    for offset in (10, 11, 12):
        p.add(offset)
    assert p.commit_point is None
    p.mark_done(10)
    assert p.commit_point == 11
    p.mark_done(11)
    p.mark_done(12)
    assert p.commit_point == 13
    assert p.in_flight == 0


def test_out_of_order_completion_waits_for_the_gap() -> None:
    p = PartitionOffsets()
    for offset in (0, 1, 2, 3):
        p.add(offset)
    p.mark_done(2)
    p.mark_done(3)
    assert p.commit_point is None  # 0 and 1 still running
    p.mark_done(0)
    assert p.commit_point == 1
    p.mark_done(1)
    assert p.commit_point == 4


def test_gaps_in_numbering_are_not_waited_for() -> None:
    # Compacted topics and transaction markers skip offsets: arrival order is what counts.
    p = PartitionOffsets()
    for offset in (5, 9, 20):
        p.add(offset)
    p.mark_done(5)
    p.mark_done(9)
    assert p.commit_point == 10
    p.mark_done(20)
    assert p.commit_point == 21


def test_misuse_is_refused() -> None:
    p = PartitionOffsets()
    p.add(3)
    with pytest.raises(ValueError, match="after"):
        p.add(3)
    with pytest.raises(ValueError, match="not pending"):
        p.mark_done(4)
    p.mark_done(3)
    with pytest.raises(ValueError, match="not pending"):
        p.mark_done(3)


def test_tracker_reports_only_moved_commit_points_and_forgets_revoked() -> None:
    t: OffsetTracker[str] = OffsetTracker()
    t.add("a", 0)
    t.add("b", 0)
    t.mark_done("a", 0)
    assert t.committable() == {"a": 1}
    t.committed({"a": 1})
    assert t.committable() == {}
    t.mark_done("b", 0)
    assert t.committable({"a"}) == {}
    assert t.committable({"b"}) == {"b": 1}
    t.forget({"b"})
    assert t.mark_done("b", 0) is False  # late completion of a revoked partition
    assert t.committable() == {}


@settings(max_examples=300, deadline=None)
@given(
    offsets=st.lists(st.integers(0, 10_000), min_size=1, max_size=60, unique=True).map(sorted),
    order=st.randoms(use_true_random=False),
    stop_after=st.integers(0, 60),
)
def test_commit_point_never_passes_an_unfinished_offset(
    offsets: list[int], order: object, stop_after: int
) -> None:
    p = PartitionOffsets()
    for offset in offsets:
        p.add(offset)
    completion = list(offsets)
    order.shuffle(completion)  # type: ignore[attr-defined]
    done: set[int] = set()
    for offset in completion[:stop_after]:
        p.mark_done(offset)
        done.add(offset)
        point = p.commit_point
        if point is not None:
            # Everything below the commit point is finished ...
            assert all(o in done for o in offsets if o < point)
            # ... and it is as far as it can be: the next pending offset is unfinished.
            remaining = [o for o in offsets if o >= point]
            assert not remaining or remaining[0] not in done
        else:
            assert offsets[0] not in done
    assert p.in_flight == len(offsets) - len(done)
