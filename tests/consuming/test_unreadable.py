"""Stuck partitions: retry timing and readiness detail (the real-broker tests are in
tests/broker/test_codecs.py)."""

from __future__ import annotations

import pytest
from aiokafka import TopicPartition

from worker.consuming.unreadable import StuckPartitions, Unreadable, locate


def test_a_stuck_partition_is_due_again_after_the_retry_interval() -> None:
    stuck = StuckPartitions(retry_s=30)
    tp = TopicPartition("documents", 2)
    stuck.add(Unreadable(tp, 41, "UnsupportedCodecError('lz4')"), now=100.0)
    assert tp in stuck
    assert len(stuck) == 1
    assert stuck.describe() == ["documents[2]@41: UnsupportedCodecError('lz4')"]
    assert stuck.due(129.9) == []
    assert stuck.due(130.0) == [tp]
    assert tp not in stuck
    assert stuck.describe() == []


def test_forgetting_a_revoked_partition_clears_it() -> None:
    stuck = StuckPartitions()
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    stuck.add(Unreadable(a, 0, "x"), now=0)
    stuck.add(Unreadable(b, None, "y"), now=0)
    stuck.forget({a})
    assert stuck.describe() == ["t[1]@None: y"]


def test_errors_not_raised_while_unpacking_records_are_not_located() -> None:
    with pytest.raises(ValueError, match="not from") as caught:
        raise ValueError("not from a record batch")
    assert locate(caught.value) is None
