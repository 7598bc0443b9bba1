"""Record batches the consumer cannot read: a codec library missing, a corrupt batch.

Invariants: such a batch is never skipped (its offset and everything after it in its partition
stay uncommitted), never crashes the worker (a restarted worker would meet the same batch: a
crash loop that never moves) and never goes unnoticed: an ERROR log line naming topic,
partition and offset, ``chunkstream_unreadable_batches_total``, and readiness false while a
partition is stuck. The stuck partition is paused; the others go on. It is tried again every
``RETRY_S`` seconds (a batch damaged in transit reads fine the second time; a missing codec
needs a new image, and the log line says so every time).

aiokafka raises these errors out of ``getmany()`` without saying which partition they came
from; :func:`locate` finds it in the traceback, in the frame that unpacks one partition's
records. A record batch cannot be read partially, so the offset named is the batch's first.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from aiokafka import TopicPartition

RETRY_S = 30.0
# The aiokafka function that unpacks the record batches of one partition; its frame holds the
# partition (`tp`) and the batch being read (`next_batch`). Tested against the real client.
_UNPACK_FRAME = "_unpack_records"


@dataclass(frozen=True, slots=True)
class Unreadable:
    partition: TopicPartition
    offset: int | None  # first offset of the batch, when the client had read its header
    error: str


def locate(exc: BaseException) -> Unreadable | None:
    """The partition and batch a fetch error came from, or None if it did not come from
    unpacking a partition's records (then it is not ours to handle)."""
    found: Unreadable | None = None
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_name != _UNPACK_FRAME:
            continue
        tp = frame.f_locals.get("tp")
        if isinstance(tp, TopicPartition):
            offset = getattr(frame.f_locals.get("next_batch"), "base_offset", None)
            found = Unreadable(tp, offset if isinstance(offset, int) else None, repr(exc))
    return found


class StuckPartitions:
    """Partitions paused on an unreadable batch, and when each is due for another try."""

    def __init__(self, retry_s: float = RETRY_S) -> None:
        self.retry_s = retry_s
        self._stuck: dict[TopicPartition, tuple[Unreadable, float]] = {}

    def add(self, unreadable: Unreadable, now: float) -> None:
        self._stuck[unreadable.partition] = (unreadable, now + self.retry_s)

    def due(self, now: float) -> list[TopicPartition]:
        """Partitions whose retry time has come; they are no longer counted as stuck."""
        ready = [tp for tp, (_, at) in self._stuck.items() if at <= now]
        for tp in ready:
            del self._stuck[tp]
        return ready

    def forget(self, partitions: set[TopicPartition]) -> None:
        for tp in partitions:
            self._stuck.pop(tp, None)

    def __contains__(self, tp: object) -> bool:
        return tp in self._stuck

    def __len__(self) -> int:
        return len(self._stuck)

    def describe(self) -> list[str]:
        """One entry per stuck partition, for /readyz: ``topic[partition]@offset: error``."""
        return [
            f"{tp.topic}[{tp.partition}]@{u.offset}: {u.error}"
            for tp, (u, _) in sorted(self._stuck.items())
        ]
