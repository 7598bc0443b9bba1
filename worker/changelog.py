"""Restoring the local state store from the state changelog topic when partitions are assigned,
and checkpointing it when they are let go (the Kafka Streams way: worker.state_store).

Invariants:

- Changelog partition p holds the state of input partition p (co-partitioned: the topic has
  the input's partition count, checked at start-up), so the partitions to restore are exactly
  the input partitions assigned.
- A partition is restored from its checkpoint when the local store has one (a clean hand-over
  earlier in this process, or a kept ``state_dir``), else from the beginning after its rows are
  dropped; the checkpoint is deleted before the first row changes.
- Restoring reads up to the end offset taken when it starts: only this worker writes the
  partition while it owns it, and it writes nothing there before the restore ends (the input
  partition stays paused meanwhile).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition

from worker.state_store import StateStore

_RESTORE_MAX_RECORDS = 20_000


class ChangelogUnreadable(RuntimeError):
    """A changelog record that is not a document state (another writer, or a bug of ours)."""


@dataclass(frozen=True)
class Restored:
    partition: int
    records: int
    seconds: float
    from_checkpoint: bool


class Changelog:
    """Reads and checkpoints the state changelog with one consumer of its own (no group)."""

    def __init__(self, consumer: AIOKafkaConsumer, topic: str, store: StateStore) -> None:
        self._consumer = consumer
        self.topic = topic
        self.store = store

    async def end_offsets(self, partitions: Sequence[int]) -> dict[int, int]:
        tps = [TopicPartition(self.topic, p) for p in partitions]
        ends = await self._consumer.end_offsets(tps)
        return {tp.partition: int(offset) for tp, offset in ends.items()}

    async def restore(self, partition: int) -> Restored:
        """Bring the store's rows of ``partition`` up to the changelog's end."""
        started = time.perf_counter()
        tp = TopicPartition(self.topic, partition)
        consumer = self._consumer
        # The offsets first, unassigned: no fetch of this partition is in flight ahead of them.
        begin = int((await consumer.beginning_offsets([tp]))[tp])
        end = int((await consumer.end_offsets([tp]))[tp])
        consumer.assign([tp])
        try:
            checkpoint = self.store.checkpoint(partition)
            self.store.clear_checkpoint(partition)
            usable = checkpoint is not None and begin <= checkpoint <= end
            if usable:
                assert checkpoint is not None
                consumer.seek(tp, checkpoint)
            else:
                self.store.drop_partition(partition)
                consumer.seek(tp, begin)
            records = 0
            while await consumer.position(tp) < end:
                batch = await consumer.getmany(
                    tp, timeout_ms=1000, max_records=_RESTORE_MAX_RECORDS
                )
                fetched = batch.get(tp, [])
                try:
                    records += self.store.apply(
                        partition,
                        ((r.key.decode(), r.value) for r in fetched if r.key is not None),
                    )
                except (msgspec.DecodeError, UnicodeDecodeError) as exc:
                    where = f"{self.topic}[{partition}]"
                    raise ChangelogUnreadable(f"{where}: not a document state ({exc})") from exc
        finally:
            consumer.assign([])
        return Restored(partition, records, time.perf_counter() - started, usable)

    async def checkpoint(self, partitions: Sequence[int]) -> None:
        """After a clean hand-over (every state write acknowledged and applied locally): the
        store reflects each partition's changelog up to its current end."""
        if not partitions:
            return
        for partition, end in (await self.end_offsets(partitions)).items():
            self.store.set_checkpoint(partition, end)
