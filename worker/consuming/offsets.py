"""Which input offsets are safe to commit.

Documents of one partition finish out of order (a short document overtakes a long one). The
group may only commit up to the first unfinished record, so that a crash replays everything
not yet published. Offsets are tracked in *arrival order*, not assumed contiguous: compacted
topics and transaction markers leave gaps in the numbering.

Pure bookkeeping, no Kafka import: partitions are identified by any hashable key.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class PartitionOffsets:
    """Arrival-ordered offsets of one partition and the commit point they allow."""

    __slots__ = ("_done", "_last_added", "_order", "_pending", "commit_point")

    def __init__(self) -> None:
        self._order: deque[int] = deque()  # pending offsets, arrival order
        self._pending: set[int] = set()  # the same offsets, for O(1) membership
        self._done: set[int] = set()  # finished, but behind an unfinished one
        self._last_added: int | None = None
        # Next offset the group may commit (Kafka's convention: last processed + 1).
        self.commit_point: int | None = None

    def add(self, offset: int) -> None:
        if self._last_added is not None and offset <= self._last_added:
            raise ValueError(f"offset {offset} arrived after {self._last_added}")
        self._order.append(offset)
        self._pending.add(offset)
        self._last_added = offset

    def mark_done(self, offset: int) -> None:
        if offset not in self._pending or offset in self._done:
            raise ValueError(f"offset {offset} is not pending")
        self._done.add(offset)
        # Advance eagerly: the common case is in-order completion, which pops at once.
        while self._order and self._order[0] in self._done:
            finished = self._order.popleft()
            self._pending.discard(finished)
            self._done.discard(finished)
            self.commit_point = finished + 1

    @property
    def in_flight(self) -> int:
        return len(self._pending) - len(self._done)

    @property
    def last_added(self) -> int | None:
        return self._last_added


class OffsetTracker(Generic[K]):
    """Per-partition trackers plus what changed since the last successful commit."""

    def __init__(self) -> None:
        self._partitions: dict[K, PartitionOffsets] = {}
        self._committed: dict[K, int] = {}

    def add(self, partition: K, offset: int) -> None:
        self._partitions.setdefault(partition, PartitionOffsets()).add(offset)

    def mark_done(self, partition: K, offset: int) -> bool:
        """Record a finished offset; ``False`` if the partition is no longer tracked
        (revoked meanwhile), in which case the result must not be committed by us."""
        offsets = self._partitions.get(partition)
        if offsets is None:
            return False
        offsets.mark_done(offset)
        return True

    def committable(self, partitions: set[K] | None = None) -> dict[K, int]:
        """Commit points that moved since the last :meth:`committed` call."""
        result: dict[K, int] = {}
        for partition, offsets in self._partitions.items():
            if partitions is not None and partition not in partitions:
                continue
            point = offsets.commit_point
            if point is not None and point != self._committed.get(partition):
                result[partition] = point
        return result

    def committed(self, offsets: dict[K, int]) -> None:
        for partition, point in offsets.items():
            if partition in self._partitions:
                self._committed[partition] = point

    def forget(self, partitions: set[K]) -> None:
        """Drop partitions we no longer own; late completions for them are ignored."""
        for partition in partitions:
            self._partitions.pop(partition, None)
            self._committed.pop(partition, None)

    def next_offset(self, partition: K) -> int | None:
        """The offset after the last one taken from ``partition`` (None: none taken)."""
        offsets = self._partitions.get(partition)
        last = None if offsets is None else offsets.last_added
        return None if last is None else last + 1

    def in_flight(self, partition: K | None = None) -> int:
        if partition is not None:
            offsets = self._partitions.get(partition)
            return offsets.in_flight if offsets else 0
        return sum(o.in_flight for o in self._partitions.values())

    def partitions(self) -> list[K]:
        return list(self._partitions)
