"""The batching policy on its own: plain numbers for time, no event loop, no model."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.inference.batch_policy import BatchPolicy, Watermark


def policy(tokens: int = 100, size: int = 8, wait: float = 1.0) -> BatchPolicy[str]:
    return BatchPolicy(max_batch_tokens=tokens, max_batch_size=size, max_wait=wait)


def test_nothing_waiting_means_no_batch_and_no_deadline() -> None:
    p = policy()
    assert p.next_batch(0.0) is None
    assert p.next_deadline() is None


def test_partial_batch_waits_until_the_oldest_text_is_due() -> None:
    p = policy(wait=0.5)
    p.add("a", 10, now=1.0)
    p.add("b", 10, now=1.2)
    assert p.next_batch(1.4) is None
    assert p.next_deadline() == 1.5
    batch = p.next_batch(1.5)
    assert batch is not None
    assert sorted(batch.keys) == ["a", "b"]
    assert p.queued_texts == 0
    assert p.queued_tokens == 0


def test_full_batch_goes_at_once_sorted_by_length() -> None:
    p = policy(tokens=1000, size=4)
    for key, length in [("long", 30), ("short", 5), ("mid", 12), ("tiny", 3)]:
        p.add(key, length, now=0.0)
    batch = p.next_batch(0.0)
    assert batch is not None
    assert batch.keys == ["tiny", "short", "mid", "long"]
    assert batch.padded_tokens == 4 * 30
    assert batch.real_tokens == 50


def test_token_budget_counts_padded_length_times_batch_size() -> None:
    p = policy(tokens=40, size=100)
    for i, length in enumerate([10, 10, 10, 10, 11]):
        p.add(f"t{i}", length, now=0.0)
    batch = p.next_batch(0.0)
    assert batch is not None
    # Four texts of 10 fill 40 exactly; adding the 11 would make 5 × 11 = 55.
    assert batch.lengths == [10, 10, 10, 10]
    assert batch.padded_tokens <= 40


def test_length_sorting_groups_similar_lengths_together() -> None:
    p: BatchPolicy[int] = BatchPolicy(max_batch_tokens=64, max_batch_size=4, max_wait=1.0)
    lengths = [2, 30, 3, 31, 2, 29, 3, 32]
    for i, length in enumerate(lengths):
        p.add(i, length, now=0.0)
    batches = []
    while (batch := p.next_batch(0.0, flush=True)) is not None:
        batches.append(batch.lengths)
    # Arrival order would pad every batch to ~30; sorted, the short texts ride together.
    assert batches == [[2, 2, 3, 3], [29, 30], [31, 32]]


def test_text_longer_than_the_budget_still_runs_alone() -> None:
    p = policy(tokens=16, size=8)
    p.add("huge", 300, now=0.0)
    batch = p.next_batch(0.0)
    assert batch is not None
    assert batch.keys == ["huge"]


def test_due_oldest_text_goes_even_when_other_groups_are_fuller() -> None:
    p = policy(tokens=40, size=10, wait=1.0)
    p.add("old-long", 19, now=0.0)
    for i in range(3):
        p.add(f"new-{i}", 2, now=0.9)
    # Not due yet: neither group is full (the 2-token group has room), nothing goes.
    assert p.next_batch(0.95) is None
    batch = p.next_batch(1.0)
    assert batch is not None
    assert batch.keys == ["old-long"]


def test_full_group_is_served_before_a_waiting_partial_one() -> None:
    p = policy(tokens=20, size=5, wait=10.0)
    p.add("partial", 9, now=0.0)
    for i in range(5):
        p.add(f"s{i}", 2, now=1.0)
    batch = p.next_batch(1.0)
    assert batch is not None
    assert batch.keys == [f"s{i}" for i in range(5)]
    assert p.next_batch(1.0) is None  # "partial" still waits for company or its deadline


def test_removed_texts_never_reach_a_batch() -> None:
    p = policy()
    p.add("keep", 5, now=0.0)
    p.add("drop", 5, now=0.0)
    assert p.remove(["drop", "unknown"]) == 1
    assert p.queued_tokens == 5
    batch = p.next_batch(0.0, flush=True)
    assert batch is not None
    assert batch.keys == ["keep"]


def test_duplicate_key_is_refused() -> None:
    p = policy()
    p.add("a", 1, now=0.0)
    with pytest.raises(ValueError, match="already waiting"):
        p.add("a", 1, now=0.0)


@given(
    lengths=st.lists(st.integers(min_value=0, max_value=300), min_size=1, max_size=60),
    tokens=st.integers(min_value=1, max_value=2000),
    size=st.integers(min_value=1, max_value=16),
)
def test_flushing_returns_every_text_once_within_limits(
    lengths: list[int], tokens: int, size: int
) -> None:
    p: BatchPolicy[int] = BatchPolicy(max_batch_tokens=tokens, max_batch_size=size, max_wait=1.0)
    for i, length in enumerate(lengths):
        p.add(i, length, now=float(i))
    seen: list[int] = []
    while (batch := p.next_batch(1e9, flush=True)) is not None:
        assert len(batch.keys) <= size
        assert len(batch.keys) == 1 or batch.padded_tokens <= tokens
        assert batch.lengths == sorted(batch.lengths)
        seen.extend(batch.keys)
    assert sorted(seen) == list(range(len(lengths)))
    assert p.queued_tokens == 0


def test_watermark_has_hysteresis() -> None:
    mark = Watermark(high=100, low=40)
    assert not mark.update(99)
    assert mark.update(100)
    assert mark.over
    assert not mark.update(60)  # between the marks: stays over
    assert mark.update(40)
    assert not mark.over
    assert not mark.update(99)


def test_watermark_refuses_low_above_high() -> None:
    with pytest.raises(ValueError, match="low"):
        Watermark(high=10, low=20)
