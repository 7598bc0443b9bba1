"""Small fakes: a slow embedding backend, and in-memory Kafka clients for fast loop tests.

The real-broker tests beside them (tests/broker/test_*kafka*.py, test_full_worker.py) check the
same behaviour against a real broker; these make the loop's decisions testable in milliseconds.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Sequence

import numpy as np
from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord, OffsetAndMetadata, RecordMetadata
from numpy.typing import NDArray


class SlowHashBackend:
    """Vectors from a hash of the text; every batch costs ``delay_s`` of wall time."""

    dimension = 16

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.batches = 0
        self._lock = threading.Lock()

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        return [min(256, 2 + len(t) // 4) for t in texts]

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        time.sleep(self.delay_s)
        with self._lock:
            self.batches += 1
        rows = []
        for text in texts:
            digest = hashlib.sha256(text.encode()).digest()[: self.dimension]
            rows.append(np.frombuffer(digest, dtype=np.uint8).astype(np.float32) - 127.5)
        out = np.stack(rows) if rows else np.zeros((0, self.dimension), np.float32)
        unit: NDArray[np.float32] = out / np.linalg.norm(out, axis=1, keepdims=True)
        return unit


class FakeConsumer:
    """The consumer methods :class:`worker.consuming.loop.ConsumeLoop` uses, over in-memory records.

    ``feed`` queues records of a partition; ``getmany`` hands out what is queued for
    partitions that are assigned and not paused (up to ``max_records``), and yields to the
    loop like a real fetch. Commits are recorded in order."""

    def __init__(self) -> None:
        self._queued: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = {}
        self._assigned: set[TopicPartition] = set()
        self._paused: set[TopicPartition] = set()
        self._positions: dict[TopicPartition, int] = {}  # the next offset getmany hands out
        self._ends: dict[TopicPartition, int] = {}  # the offset after the last record fed
        self.commits: list[dict[TopicPartition, int]] = []
        self.pause_calls = 0
        self.resume_calls = 0
        self.fetches = 0

    def assign(self, *partitions: TopicPartition) -> None:
        self._assigned |= set(partitions)

    def feed(self, tp: TopicPartition, values: Sequence[bytes], *, first_offset: int = 0) -> None:
        records = self._queued.setdefault(tp, [])
        self._positions.setdefault(tp, first_offset)
        self._ends[tp] = max(self._ends.get(tp, 0), first_offset + len(values))
        for i, value in enumerate(values):
            records.append(
                ConsumerRecord(
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=first_offset + i,
                    timestamp=0,
                    timestamp_type=0,
                    key=None,
                    value=value,
                    checksum=None,
                    serialized_key_size=0,
                    serialized_value_size=len(value),
                    headers=(),
                )
            )

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]:
        self.fetches += 1
        await asyncio.sleep(0)
        budget = max_records if max_records is not None else 1 << 30
        out: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = {}
        for tp in sorted(self._assigned - self._paused):
            queued = self._queued.get(tp, [])
            taken, self._queued[tp] = queued[:budget], queued[budget:]
            budget -= len(taken)
            if taken:
                out[tp] = taken
                self._positions[tp] = taken[-1].offset + 1
        return out

    def queued(self) -> int:
        """Records fed and not handed out yet (a real client's buffer and the log behind it)."""
        return sum(len(records) for records in self._queued.values())

    def assignment(self) -> set[TopicPartition]:
        return set(self._assigned)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def pause(self, *partitions: TopicPartition) -> None:
        self.pause_calls += 1
        self._paused |= set(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self.resume_calls += 1
        self._paused -= set(partitions)

    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata] | None = None) -> None:
        if offsets is None:  # as aiokafka: what has been handed out, on every assigned partition
            self.commits.append({tp: self._positions.get(tp, 0) for tp in self._assigned})
        else:
            self.commits.append({tp: meta.offset for tp, meta in offsets.items()})

    async def position(self, tp: TopicPartition) -> int:
        return self._positions.get(tp, 0)

    async def committed(self, tp: TopicPartition) -> int | None:
        return self.committed_offset(tp)

    async def beginning_offsets(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        return {tp: 0 for tp in partitions}  # nothing taken by retention

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Hand out from ``offset`` on (records before it that are still queued are dropped)."""
        self._queued[tp] = [r for r in self._queued.get(tp, []) if r.offset >= offset]
        self._positions[tp] = offset

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        return None  # every record fed is still queued: the log starts at the first of them

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._queued[tp] = []
            self._positions[tp] = self._ends.get(tp, 0)

    def committed_offset(self, tp: TopicPartition) -> int | None:
        for commit in reversed(self.commits):
            if tp in commit:
                offset: int = commit[tp]
                return offset
        return None


class FakeBatch:
    """The batch builder :class:`worker.kafka.publisher.Publisher` fills: takes records until
    ``capacity`` (any number by default), then refuses; ``close`` ends it."""

    def __init__(self, capacity: int | None) -> None:
        self.records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
        self.capacity = capacity
        self.closed = False

    def append(
        self, *, timestamp: int | None, key: bytes | None, value: bytes | None, headers: object
    ) -> object | None:
        if self.closed:
            raise AssertionError("a record appended to a closed batch")
        if self.capacity is not None and len(self.records) >= max(1, self.capacity):
            return None
        self.records.append((key, value, list(headers)))  # type: ignore[call-overload]
        return object()

    def close(self) -> None:
        self.closed = True

    def record_count(self) -> int:
        return len(self.records)


class FakeProducer:
    """The producer methods :class:`worker.kafka.publisher.Publisher` uses: every send (a record or
    a
    batch) is acknowledged at once (or fails with ``fail_next`` errors first), and its records
    kept in ``sent``; ``batches`` counts the batches sent."""

    def __init__(self, partitions: int = 3, batch_capacity: int | None = None) -> None:
        self._partitions = set(range(partitions))
        self.sent: list[tuple[str, bytes | None, bytes | None, int | None]] = []
        self.headers: list[list[tuple[str, bytes]]] = []  # of each record in ``sent``
        self.fail_next: list[Exception | None] = []  # None lets that send through
        self.batch_capacity = batch_capacity
        self.batches = 0
        self._ends: dict[tuple[str, int], int] = {}  # each partition's next offset

    def _append(self, topic: str, partition: int | None, count: int) -> RecordMetadata:
        """The partition's log takes ``count`` records: their base offset, as a broker acks."""
        where = (topic, partition or 0)
        base = self._ends.get(where, 0)
        self._ends[where] = base + count
        tp = TopicPartition(topic, partition or 0)
        return RecordMetadata(topic, partition or 0, tp, base, -1, 0, 0)

    async def partitions_for(self, topic: str) -> set[int]:
        return set(self._partitions)

    async def send(
        self,
        topic: str,
        value: bytes,
        key: bytes | None = None,
        headers: object = None,
        partition: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        if self.fail_next and (error := self.fail_next.pop(0)) is not None:
            raise error
        self.sent.append((topic, key, value, partition))
        self.headers.append(list(headers or []))  # type: ignore[call-overload]
        ack: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        ack.set_result(self._append(topic, partition, 1))
        return ack

    def create_batch(self) -> FakeBatch:
        return FakeBatch(self.batch_capacity)

    async def send_batch(
        self, batch: FakeBatch, topic: str, *, partition: int
    ) -> asyncio.Future[RecordMetadata]:
        if not batch.closed:
            raise AssertionError("a batch handed over while still open")
        if self.fail_next and (error := self.fail_next.pop(0)) is not None:
            raise error
        self.batches += 1
        self.sent.extend((topic, key, value, partition) for key, value, _ in batch.records)
        self.headers.extend(headers for _, _, headers in batch.records)
        ack: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        ack.set_result(self._append(topic, partition, batch.record_count()))
        return ack


class HeldProducer(FakeProducer):
    """Batches are sent but their acknowledgements wait until ``release`` settles them."""

    def __init__(self) -> None:
        super().__init__(partitions=2)
        self.held: list[tuple[asyncio.Future[RecordMetadata], RecordMetadata]] = []

    async def send_batch(
        self, batch: object, topic: str, *, partition: int
    ) -> asyncio.Future[RecordMetadata]:
        sent = await super().send_batch(batch, topic, partition=partition)  # type: ignore[arg-type]
        held: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        self.held.append((held, sent.result()))
        return held

    def release(self) -> None:
        for held, metadata in self.held:
            if not held.done():
                held.set_result(metadata)
