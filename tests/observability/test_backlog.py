"""The arithmetic of the backlog estimate and of the commit age (worker/observability/backlog.py,
pure). The estimate against measured drain times on the real broker:
tests/broker/test_backlog_estimate.py."""

from __future__ import annotations

import pytest

from worker.observability.backlog import CommitAges, DecayingSum, WorkRate


def test_a_decaying_sum_halves_every_half_life() -> None:
    total = DecayingSum(half_life_s=10.0)
    assert total.value(0.0) == 0.0
    total.add(8.0, now=0.0)
    assert total.value(10.0) == pytest.approx(4.0)
    assert total.value(30.0) == pytest.approx(1.0)
    total.add(1.0, now=30.0)
    assert total.value(30.0) == pytest.approx(2.0)
    assert total.value(25.0) == pytest.approx(2.0)  # a clock read before the last add


def test_seconds_per_byte_is_busy_wall_time_over_finished_bytes() -> None:
    rate = WorkRate(half_life_s=1e9)  # no decay: exact sums
    assert rate.seconds_per_byte(0.0) is None
    assert rate.backlog_seconds(100, 0.0) is None  # nothing measured: nothing said
    # Two documents overlap: busy 0..6 s (6 s), 3,000 bytes finished.
    rate.taken(1000, 0.0)
    rate.taken(2000, 1.0)
    rate.finished(1000, 4.0)
    rate.finished(2000, 6.0)
    # Idle 6..20 s: not work.
    rate.tick(20.0)
    rate.taken(3000, 20.0)
    rate.finished(3000, 23.0)  # busy 3 s more, 3,000 bytes more
    assert rate.seconds_per_byte(23.0) == pytest.approx(9.0 / 6000)
    assert rate.mean_record_bytes(23.0) == pytest.approx(2000.0)
    # lag 50 records × 2,000 bytes × 1.5 ms per byte
    assert rate.backlog_seconds(50, 23.0) == pytest.approx(50 * 2000 * 9.0 / 6000)
    assert rate.backlog_seconds(0, 23.0) == 0.0


def test_records_waiting_count_as_work_between_documents() -> None:
    """Fetching and committing while records wait is part of the drain: measured, counting only
    the time with documents in flight halved the estimate of a 1 KB backlog."""
    rate = WorkRate(half_life_s=1e9)
    rate.waiting = True
    rate.tick(0.0)
    rate.taken(100, 1.0)  # 1 s fetching: work
    rate.finished(100, 2.0)
    rate.tick(3.0)  # 1 s between fetches, records waiting: work
    rate.waiting = False
    rate.tick(10.0)  # nothing waits: idle
    assert rate.seconds_per_byte(10.0) == pytest.approx(3.0 / 100)


def test_time_while_kafka_is_down_is_not_work() -> None:
    rate = WorkRate(half_life_s=1e9)
    rate.taken(100, 0.0)
    rate.tick(1.0)  # 1 s of work
    rate.tick(61.0, counting=False)  # a minute waiting for Kafka
    rate.finished(100, 62.0)  # 1 s more
    assert rate.seconds_per_byte(62.0) == pytest.approx(2.0 / 100)


def test_a_dropped_document_adds_no_bytes() -> None:
    rate = WorkRate(half_life_s=1e9)
    rate.taken(100, 0.0)
    rate.taken(100, 0.0)
    rate.finished(0, 1.0)  # cancelled at a revoke: replayed elsewhere
    rate.finished(100, 2.0)
    assert rate.seconds_per_byte(2.0) == pytest.approx(2.0 / 100)


def test_the_recent_past_outweighs_the_old() -> None:
    rate = WorkRate(half_life_s=10.0)
    rate.taken(1000, 0.0)
    rate.finished(1000, 1.0)  # 1 ms per byte long ago
    for start in range(100, 200, 2):  # then 50 documents at 0.1 ms per byte
        rate.taken(1000, float(start))
        rate.finished(1000, start + 0.1)
    assert rate.seconds_per_byte(200.0) == pytest.approx(0.0001, rel=0.01)


def test_commit_age_runs_while_work_waits_and_resets_on_progress() -> None:
    ages: CommitAges[int] = CommitAges()
    assert ages.age(0, busy=False, now=0.0) == 0.0
    assert ages.age(0, busy=True, now=5.0) == 0.0  # work appears: the clock starts
    assert ages.age(0, busy=True, now=65.0) == 60.0  # a minute without a commit
    ages.advanced(0, now=66.0)
    assert ages.age(0, busy=True, now=67.0) == 1.0
    assert ages.age(0, busy=False, now=100.0) == 0.0  # idle: nothing is stuck
    ages.advanced(0, now=101.0)  # a commit while not tracked changes nothing
    assert ages.age(0, busy=True, now=200.0) == 0.0
    assert ages.age(1, busy=True, now=200.0) == 0.0  # partitions are separate
    assert ages.age(1, busy=True, now=230.0) == 30.0
    ages.forget(1)
    assert ages.age(1, busy=True, now=240.0) == 0.0
