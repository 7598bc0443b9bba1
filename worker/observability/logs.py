"""Structured JSON logs: one object per line, with the document's coordinates when known."""

from __future__ import annotations

import datetime as dt
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

import msgspec

_STANDARD = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}
# Anything a caller passes in `extra=` that JSON cannot hold is logged as its repr.
_encoder = msgspec.json.Encoder(enc_hook=repr)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        # Fields passed with `extra=` (doc_id, partition, offset, …) become top-level keys.
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return _encoder.encode(entry).decode("utf-8", errors="replace")


# The worker's own lines that an outage repeats for every document in flight, every retry.
_WORKER_REPEATS = frozenset(
    {"publish failed; retrying", "commit failed", "state restore failed; retrying"}
)


class QuietRepeats(logging.Filter):
    """Lets a line of the Kafka client through once per ``window_s`` per message pattern.

    During an outage aiokafka logs each failed reconnect, metadata refresh and fetch, many
    lines for every second the broker is down (tests/broker/test_kafka_outage.py counts them),
    and each document in flight logs each publish retry, while the worker says once what is
    wrong (worker.kafka.link). A line that comes back after its window carries how many
    were left out (``repeated``)."""

    def __init__(self, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._window_s = window_s
        self._clock = clock
        self._last: dict[tuple[str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("aiokafka") and record.msg not in _WORKER_REPEATS:
            return True
        key = (record.name, str(record.msg))
        now = self._clock()
        seen = self._last.get(key)
        if seen is not None and now - seen[0] < self._window_s:
            self._last[key] = (seen[0], seen[1] + 1)
            return False
        if seen is not None and seen[1]:
            record.repeated = seen[1]
        self._last[key] = (now, 0)
        return True


def configure(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    if level != "DEBUG":  # asked for everything: everything
        handler.addFilter(QuietRepeats())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # aiokafka logs every reconnect attempt at INFO/ERROR; keep its noise at WARNING unless
    # the operator asked for DEBUG.
    logging.getLogger("aiokafka").setLevel("DEBUG" if level == "DEBUG" else "WARNING")
