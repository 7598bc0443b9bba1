"""Records taken from the client at a backpressure pause, started before anything fetched
after them.

Why: aiokafka drops the records it has buffered for a partition that is paused when they are
next asked for, and fetches them again after the resume. A fetch response holds up to
``max_partition_fetch_bytes`` per partition (the document limit: megabytes), while a pause
comes once the in-flight window is full (a few hundred documents): left to the client, most of
every response would be thrown away and read again, and the worker would read its input from
the broker several times over (tests/broker/test_full_worker.py counts the bytes received).
Taking the rest of the buffered records just before pausing keeps them: the memory is the
response the client held, now here (decoded: at most one fetch response's bytes are taken,
since compressed input grows; the rest is left to be fetched again), and the client's
partitions stay paused until it is empty, so no second response is fetched beside it.

Invariants:

- Per partition, records come out in the order they went in, and before any record fetched
  later (the caller fetches again only once this is empty).
- A partition let go (revoked) loses its held records: they were never started, so never
  committed, and the next owner reads them from the committed offset.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Collection, Iterable, Mapping

from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord

Held = tuple[TopicPartition, ConsumerRecord[bytes, bytes]]


class HeldRecords:
    def __init__(self) -> None:
        self._records: deque[Held] = deque()
        self.bytes = 0  # of the records' values: the memory bound's term (worker.runtime.resources)
        # Per partition: the client's position is past them, so its lag leaves them out.
        self._counts: Counter[TopicPartition] = Counter()

    def __len__(self) -> int:
        return len(self._records)

    def hold(self, batch: Mapping[TopicPartition, Iterable[ConsumerRecord[bytes, bytes]]]) -> None:
        """Keeps ``batch`` (a ``getmany`` result) after what is held."""
        for tp, records in batch.items():
            for record in records:
                self._records.append((tp, record))
                self.bytes += len(record.value or b"")
                self._counts[tp] += 1

    def take(self, room: int, owned: Collection[TopicPartition]) -> list[Held]:
        """Up to ``room`` records of ``owned`` partitions, oldest first (others are dropped:
        revoked while held)."""
        taken: list[Held] = []
        while self._records and len(taken) < room:
            held = self._records.popleft()
            self.bytes -= len(held[1].value or b"")
            self._counts[held[0]] -= 1
            if held[0] in owned:
                taken.append(held)
        return taken

    def drop(self, partitions: Collection[TopicPartition]) -> None:
        """Forgets the records of ``partitions`` (let go)."""
        self._records = deque(held for held in self._records if held[0] not in partitions)
        self.bytes = sum(len(record.value or b"") for _, record in self._records)
        self._counts = Counter(tp for tp, _ in self._records)

    def count(self, tp: TopicPartition) -> int:
        """Records of ``tp`` held: part of its lag (consumed by the client, not started)."""
        return self._counts[tp]
