"""Seconds of work waiting, and how long each partition's commit point has been stuck: pure
bookkeeping from measurements, time passed in (the consume loop reports, the sampler reads).

The estimate (docs/operating/sizing.md, "Scaling with KEDA"; its calibration: docs/benchmarks.md):

    backlog seconds of a partition = lag in records × mean input bytes per record
                                     × this worker's seconds of wall time per input byte

- *mean bytes per record*: of the records this worker took recently (a decaying mean);
- *seconds per byte*: wall time during which the worker had work — documents in flight, or
  records waiting in a partition it can consume — divided by the input bytes of the documents
  finished in that time (both decaying sums, so the ratio follows the recent past). That is the
  worker's drain rate under load, measured at the concurrency it really runs at: whatever makes
  a byte expensive (strategy, model, embeddings going out, fetching, publishing,
  acknowledgements, commits, CPU throttling) is in it, so byte-heavy and model-heavy streams
  come out in the same unit. Time while Kafka is unreachable is not counted (waiting is not
  work). Counting only the time with documents in flight fell far short of the real drain
  time with small documents: between fetches the window is often empty while records wait
  (bench/calibration/backlog.py).

A partition's *commit age* is the time since its commit point last advanced while it had
work (records taken and not committed, or lag); 0 when it has none.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

# How far back the measurements reach: the weight of what happened HALF_LIFE_S ago is half.
# Short, so the estimate follows the drain rate of now: a fresh worker's rate climbs for tens
# of seconds (connections, producer batches, caches), and a long half-life kept its first
# seconds in the estimate (bench/calibration/backlog.py measures the estimate against the
# real drain time).
HALF_LIFE_S = 10.0


class DecayingSum:
    """A sum whose terms lose half their weight every ``half_life_s``."""

    __slots__ = ("_at", "_half_life_s", "_value")

    def __init__(self, half_life_s: float = HALF_LIFE_S) -> None:
        self._half_life_s = half_life_s
        self._value = 0.0
        self._at: float | None = None

    def add(self, amount: float, now: float) -> None:
        self._value = self.value(now) + amount
        self._at = now

    def value(self, now: float) -> float:
        if self._at is None:
            return 0.0
        return self._value * math.pow(0.5, max(0.0, now - self._at) / self._half_life_s)


class WorkRate:
    """Seconds of wall time per input byte while there is work (in flight, or waiting)."""

    def __init__(self, half_life_s: float = HALF_LIFE_S) -> None:
        self._busy = DecayingSum(half_life_s)
        self._bytes = DecayingSum(half_life_s)
        self._records = DecayingSum(half_life_s)
        self._record_bytes = DecayingSum(half_life_s)
        self._in_flight = 0
        self._last: float | None = None  # when busy time was last accounted
        # Records wait in a partition the worker consumes (set by the sampler from the lag).
        self.waiting = False

    def taken(self, size: int, now: float) -> None:
        """A record was taken (its document starts)."""
        self.tick(now)
        self._in_flight += 1
        self._records.add(1.0, now)
        self._record_bytes.add(float(size), now)

    def finished(self, size: int, now: float) -> None:
        """A document finished (or was dropped unfinished: ``size`` 0 then)."""
        self.tick(now)
        self._in_flight = max(0, self._in_flight - 1)
        if size:
            self._bytes.add(float(size), now)

    def tick(self, now: float, *, counting: bool = True) -> None:
        """Account the time since the last call: busy if documents were in flight or records
        waiting, and ``counting`` (False while Kafka is unreachable)."""
        if self._last is not None and (self._in_flight or self.waiting) and counting:
            self._busy.add(max(0.0, now - self._last), now)
        self._last = now

    def seconds_per_byte(self, now: float) -> float | None:
        done = self._bytes.value(now)
        return self._busy.value(now) / done if done > 0 else None

    def mean_record_bytes(self, now: float) -> float | None:
        records = self._records.value(now)
        return self._record_bytes.value(now) / records if records > 0 else None

    def backlog_seconds(self, lag_records: int, now: float) -> float | None:
        """The estimate for ``lag_records`` waiting records; None until measured."""
        per_byte = self.seconds_per_byte(now)
        mean = self.mean_record_bytes(now)
        if per_byte is None or mean is None:
            return None
        return max(0, lag_records) * mean * per_byte


class CommitAges(Generic[K]):
    """Per partition: since when its commit point has not advanced while it had work."""

    def __init__(self) -> None:
        self._since: dict[K, float] = {}

    def advanced(self, partition: K, now: float) -> None:
        if partition in self._since:
            self._since[partition] = now

    def age(self, partition: K, busy: bool, now: float) -> float:
        """Seconds stuck: 0 when idle; the clock starts when work appears."""
        if not busy:
            self._since.pop(partition, None)
            return 0.0
        return now - self._since.setdefault(partition, now)

    def forget(self, partition: K) -> None:
        self._since.pop(partition, None)
