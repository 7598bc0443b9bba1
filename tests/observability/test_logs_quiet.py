"""The Kafka client's repeated lines (and the worker's per-document retries) are let through
once per window per message pattern, with the count of those left out
(worker/observability/logs.py)."""

from __future__ import annotations

import logging

from worker.observability.logs import QuietRepeats


def record(name: str, msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, args, None)


def test_a_pattern_passes_once_per_window_then_says_how_many_were_left_out() -> None:
    now = [0.0]
    quiet = QuietRepeats(window_s=60.0, clock=lambda: now[0])
    unable = "Unable connect to node with id %s: %s"
    assert quiet.filter(record("aiokafka", unable, 1, "refused"))
    for second in range(1, 59):
        now[0] = float(second)
        assert not quiet.filter(record("aiokafka", unable, 1, "refused"))
        assert not quiet.filter(record("aiokafka", unable, 2, "refused"))  # same pattern
    # Another pattern, another logger: not held back by the first.
    assert quiet.filter(record("aiokafka.consumer.fetcher", "Failed fetch messages from %s", 1))
    now[0] = 61.0
    again = record("aiokafka", unable, 1, "refused")
    assert quiet.filter(again)
    assert again.repeated == 116  # type: ignore[attr-defined]


def test_only_the_client_and_the_known_retry_lines_are_quieted() -> None:
    quiet = QuietRepeats(window_s=60.0, clock=lambda: 0.0)
    for _ in range(3):
        assert quiet.filter(record("worker.handling.handler", "dead letter"))
        assert quiet.filter(record("worker.kafka.link", "kafka unreachable"))
    assert quiet.filter(record("worker.handling.handler", "publish failed; retrying"))
    assert not quiet.filter(record("worker.handling.handler", "publish failed; retrying"))
