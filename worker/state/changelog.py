"""Restoring the local state store from the state changelog topic when partitions are assigned,
and checkpointing it when they are let go (the Kafka Streams way: worker.state.store).

Invariants:

- Changelog partition p holds the state of input partition p (co-partitioned: the topic has
  the input's partition count, checked at start-up), so the partitions to restore are exactly
  the input partitions assigned.
- A partition is restored from its checkpoint when the local store has one (a clean hand-over
  earlier in this process, or a kept ``state_dir``) that is recent (:data:`CHECKPOINT_MAX_AGE_S`),
  else from the beginning after its rows are dropped; the checkpoint is deleted before the
  first row changes.
- Restoring reads up to the end offset taken when it starts: only this worker writes the
  partition while it owns it, and it writes nothing there before the restore ends (the input
  partition stays paused meanwhile). That end is returned (:class:`Restored`): with the
  offsets this worker's own writes were acknowledged at, it is what a checkpoint may name.
- A checkpoint names a changelog offset below which the store has applied every record: never
  the changelog's end as read at hand-over, which may be past records of another member that
  this store never read (a member paused past its session timeout, whose partitions were
  written by others meanwhile: worker.consuming.commits).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import msgspec
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from worker.state.store import StateStore
from worker.state.unconfirmed import Unconfirmed

_RESTORE_MAX_RECORDS = 20_000

CHECKPOINT_MAX_AGE_S = 600.0
"""How old a checkpoint may be and still be restored from. Compaction drops a delete marker's
tombstone ``delete.retention.ms`` after cleaning it (24 h by default). After that, a store
whose checkpoint predates the marker would keep the deleted document's old row, with nothing
left in the log to remove it. Kafka Streams' answer is the same kind of bound: it wipes the
state of a task it has not owned for ``state.cleanup.delay.ms``, whose default is 10 minutes.
That default is used here. A pod restarted with its state directory within it restores from
the checkpoint; later, from the beginning."""


class ChangelogUnreadable(RuntimeError):
    """A changelog record that is not a document state (another writer, or a bug of ours)."""


@dataclass(frozen=True)
class Restored:
    partition: int
    records: int
    seconds: float
    from_checkpoint: bool
    end: int  # the changelog offset the store now reflects up to


async def learn_topic(consumer: AIOKafkaConsumer, topic: str) -> None:
    """Have the changelog's reader track its topic's metadata from start-up: a topic it does
    not know costs aiokafka a retry backoff (``retry_backoff_ms``) on the first restore's
    offsets request (and forgetting it again by unassigning everything cost that on every
    restore)."""
    await consumer.end_offsets([TopicPartition(topic, 0)])


class Changelog:
    """Reads and checkpoints the state changelog with one consumer of its own (no group)."""

    def __init__(self, consumer: AIOKafkaConsumer, topic: str, store: StateStore) -> None:
        self._consumer = consumer
        self.topic = topic
        self.store = store

    async def end_offsets(self, partitions: Sequence[int]) -> dict[int, int]:
        return await self._offsets(self._consumer.end_offsets, partitions)

    async def beginning_offsets(self, partitions: Sequence[int]) -> dict[int, int]:
        return await self._offsets(self._consumer.beginning_offsets, partitions)

    async def _offsets(
        self,
        request: Callable[[list[TopicPartition]], Awaitable[dict[TopicPartition, int]]],
        partitions: Sequence[int],
    ) -> dict[int, int]:
        """One offsets request for ``partitions`` of the changelog, by partition number."""
        found = await request([TopicPartition(self.topic, p) for p in partitions])
        return {tp.partition: int(offset) for tp, offset in found.items()}

    async def restore(
        self, partitions: Sequence[int], unconfirmed: Mapping[int, Unconfirmed] | None = None
    ) -> list[Restored]:
        """Bring the store's rows of ``partitions`` up to the changelog's end, all together:
        one offsets request each way for all of them, one fetch stream. Restored one by one,
        even empty partitions added round trips to every assignment
        (bench/state_restore_bench.py). ``unconfirmed`` (by partition) is shown every record
        read."""
        trackers = {} if unconfirmed is None else unconfirmed
        started = time.perf_counter()
        consumer = self._consumer
        begins = await self.beginning_offsets(partitions)
        ends = await self.end_offsets(partitions)
        starts: dict[TopicPartition, int] = {}
        usable: dict[int, bool] = {}
        for tp in (TopicPartition(self.topic, p) for p in partitions):
            begin, end = begins[tp.partition], ends[tp.partition]
            checkpoint = self.store.checkpoint(tp.partition)
            written = self.store.checkpoint_written(tp.partition)
            self.store.clear_checkpoint(tp.partition)
            recent = written is not None and time.time() - written <= CHECKPOINT_MAX_AGE_S
            usable[tp.partition] = checkpoint is not None and recent and begin <= checkpoint <= end
            if checkpoint is None or not usable[tp.partition]:
                self.store.drop_partition(tp.partition)
                checkpoint = begin
            if checkpoint < end:
                starts[tp] = checkpoint
        records = dict.fromkeys(partitions, 0)
        if starts:
            consumer.assign(list(starts))
            try:
                for tp, start in starts.items():
                    consumer.seek(tp, start)
                reading = set(starts)
                while reading:
                    batch = await consumer.getmany(
                        *reading, timeout_ms=1000, max_records=_RESTORE_MAX_RECORDS
                    )
                    for tp, fetched in batch.items():
                        tracker = trackers.get(tp.partition)
                        records[tp.partition] += self._apply(tp.partition, fetched, tracker)
                    for tp in list(reading):
                        if await consumer.position(tp) >= ends[tp.partition]:
                            reading.discard(tp)
            finally:
                # Paused, not unassigned: nothing is fetched meanwhile, and the reader keeps
                # tracking the topic (an empty assignment drops it from the metadata).
                consumer.pause(*starts)
        seconds = time.perf_counter() - started
        return [Restored(p, records[p], seconds, usable[p], ends[p]) for p in partitions]

    def _apply(
        self,
        partition: int,
        fetched: Sequence[ConsumerRecord[bytes, bytes]],
        tracker: Unconfirmed | None,
    ) -> int:
        try:
            return self.store.apply(
                partition,
                ((r.key, r.value) for r in fetched if r.key is not None),
                None if tracker is None else tracker.seen,
            )
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            where = f"{self.topic}[{partition}]"
            raise ChangelogUnreadable(f"{where}: not a document state ({exc})") from exc

    def checkpoint(self, applied: Mapping[int, int]) -> None:
        """After a clean hand-over: the store reflects each partition's changelog up to the
        offset given, below which it has applied every record (the restore's end, or past the
        last of this worker's own records acknowledged since)."""
        for partition, offset in applied.items():
            self.store.set_checkpoint(partition, offset)
