"""The per-partition transactions' bookkeeping (worker.kafka.transactions), on fake producers
that record what they were asked and fence like a broker: one epoch per transactional id,
and a producer whose epoch is not the newest can neither write nor commit."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import ProducerFenced
from aiokafka.structs import OffsetAndMetadata

from worker.kafka.transactions import (
    INPUT_PARTITION,
    PartitionTransactions,
    TransactionFailed,
    transactional_id,
    writing_for,
)
from worker.observability.metrics import Metrics


@dataclass
class Broker:
    """Transactional ids' newest epochs, and what each id committed."""

    epochs: dict[str, int] = field(default_factory=dict)
    committed: dict[str, list[tuple[list[str], dict[TopicPartition, int]]]] = field(
        default_factory=dict
    )


class FakeProducer:
    def __init__(self, broker: Broker, tid: str) -> None:
        self.broker = broker
        self.tid = tid
        self.epoch = -1
        self.log: list[str] = []
        self.pending: list[str] = []  # records of the open transaction
        self.offsets: dict[TopicPartition, int] = {}
        self.fail_next_send: BaseException | None = None

    def _fenced(self) -> bool:
        return self.broker.epochs[self.tid] != self.epoch

    async def start(self) -> None:  # InitProducerId: a new epoch fences the older ones
        self.epoch = self.broker.epochs.get(self.tid, -1) + 1
        self.broker.epochs[self.tid] = self.epoch
        self.log.append("start")

    async def stop(self) -> None:
        self.log.append("stop")

    async def begin_transaction(self) -> None:
        self.log.append("begin")
        self.pending, self.offsets = [], {}

    async def send_offsets_to_transaction(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], group_id: str
    ) -> None:
        if self._fenced():
            raise ProducerFenced()
        self.log.append(f"offsets {group_id}")
        self.offsets.update({tp: meta.offset for tp, meta in offsets.items()})

    async def commit_transaction(self) -> None:
        if self._fenced():
            raise ProducerFenced()
        self.log.append("commit")
        self.broker.committed.setdefault(self.tid, []).append((self.pending, self.offsets))

    async def abort_transaction(self) -> None:
        self.log.append("abort")
        self.pending = []

    def create_batch(self) -> list[str]:
        return []

    async def send_batch(self, batch: list[str], topic: str, *, partition: int) -> Any:
        return await self.send(topic, value=",".join(batch).encode())

    async def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> Any:
        # Settled later, as a broker's answer is: after the caller added its callbacks.
        loop = asyncio.get_running_loop()
        delivered: asyncio.Future[None] = loop.create_future()
        if self.fail_next_send is not None:
            loop.call_soon(delivered.set_exception, self.fail_next_send)
        elif self._fenced():
            loop.call_soon(delivered.set_exception, ProducerFenced())
        else:
            self.pending.append(f"{topic}:{(value or b'').decode()}")
            delivered.set_result(None)
        return delivered


class Metadata:
    async def partitions_for(self, topic: str) -> set[int]:
        return {0, 1, 2}


def member(broker: Broker, clock: list[float] | None = None) -> PartitionTransactions:
    made: dict[str, FakeProducer] = {}

    def make(tid: str) -> FakeProducer:
        made[tid] = FakeProducer(broker, tid)
        return made[tid]

    txns = PartitionTransactions(
        make,
        Metadata(),
        group_id="g",
        input_topic="docs",
        metrics=Metrics(),
        clock=(lambda: clock[0]) if clock is not None else (lambda: 0.0),
    )
    txns.made = made  # type: ignore[attr-defined]
    return txns


def producer(txns: PartitionTransactions, partition: int) -> FakeProducer:
    made: dict[str, FakeProducer] = txns.made  # type: ignore[attr-defined]
    return made[transactional_id("g", "docs", partition)]


async def write(txns: PartitionTransactions, partition: int, value: str) -> None:
    with writing_for(partition):
        delivered = await txns.send("chunks", value=value.encode())
    await delivered


def test_transactional_ids_are_one_per_input_partition_and_the_same_for_every_member() -> None:
    ids = {transactional_id("g", "docs", p) for p in range(4)}
    assert len(ids) == 4
    assert transactional_id("g", "docs", 2) == transactional_id("g", "docs", 2)
    assert transactional_id("g", "docs", 2) != transactional_id("h", "docs", 2)
    assert transactional_id("g", "docs", 2) != transactional_id("g", "other", 2)


async def test_writes_go_to_their_partitions_transaction_and_commit_with_its_offset() -> None:
    broker = Broker()
    txns = member(broker)
    await txns.open([0, 1])
    assert producer(txns, 0).log == ["start", "begin"]  # started (fenced) before anything
    await write(txns, 0, "a")
    await write(txns, 1, "b")
    await write(txns, 0, "c")
    assert await txns.commit(0, 7)
    committed = broker.committed[transactional_id("g", "docs", 0)]
    assert committed == [(["chunks:a", "chunks:c"], {TopicPartition("docs", 0): 7})]
    assert producer(txns, 0).log[-3:] == ["offsets g", "commit", "begin"]  # the next is open
    assert transactional_id("g", "docs", 1) not in broker.committed  # its own, still open


async def test_an_idle_partition_commits_nothing_and_an_offset_alone_still_commits() -> None:
    broker = Broker()
    txns = member(broker)
    await txns.open([0])
    assert not await txns.commit(0, None)
    assert producer(txns, 0).log == ["start", "begin"]
    assert await txns.commit(0, 3)  # records that wrote nothing (skipped) still move the offset
    assert broker.committed[transactional_id("g", "docs", 0)] == [
        ([], {TopicPartition("docs", 0): 3})
    ]


async def test_a_write_outside_any_open_transaction_is_refused() -> None:
    txns = member(Broker())
    await txns.open([0])
    assert INPUT_PARTITION.get() is None
    with pytest.raises(TransactionFailed):
        await txns.send("chunks", value=b"x")  # no partition in the context
    with writing_for(1), pytest.raises(TransactionFailed):
        await txns.send("chunks", value=b"x")  # a partition not owned


async def test_the_next_owner_fences_a_zombie_which_can_then_neither_write_nor_commit() -> None:
    broker = Broker()
    zombie, owner = member(broker), member(broker)
    await zombie.open([0])
    await write(zombie, 0, "old")
    await owner.open([0])  # the partition moved: the new owner's start bumps the epoch
    with pytest.raises(ProducerFenced):
        await write(zombie, 0, "late")
    with pytest.raises(TransactionFailed):
        await zombie.commit(0, 10)
    assert transactional_id("g", "docs", 0) not in broker.committed
    await write(owner, 0, "new")
    assert await owner.commit(0, 5)
    assert broker.committed[transactional_id("g", "docs", 0)] == [
        (["chunks:new"], {TopicPartition("docs", 0): 5})
    ]


async def test_a_refused_write_poisons_its_transaction_and_no_retry_can_commit_it() -> None:
    broker = Broker()
    txns = member(broker)
    await txns.open([0, 1])
    producer(txns, 0).fail_next_send = RuntimeError("refused")
    with pytest.raises(RuntimeError):
        await write(txns, 0, "lost")
    producer(txns, 0).fail_next_send = None
    with pytest.raises(TransactionFailed):  # a retry of the document fails at once
        await write(txns, 0, "again")
    with pytest.raises(TransactionFailed):
        await txns.commit(0, 4)
    await write(txns, 1, "fine")  # the other partition's transaction is not affected
    assert await txns.commit(1, 1)
    await txns.abort(0)
    assert producer(txns, 0).log[-2:] == ["abort", "stop"]
    assert txns.partitions == {1}


async def test_metrics_count_commits_and_aborts_and_time_a_transaction_from_its_first_write() -> (
    None
):
    clock = [100.0]
    txns = member(Broker(), clock)
    await txns.open([0, 1])
    clock[0] = 105.0
    await write(txns, 0, "a")
    clock[0] = 107.5
    await txns.commit(0, 1)
    await write(txns, 1, "b")
    await txns.abort(1)
    await txns.abort(1)  # once
    m: Metrics = txns._metrics
    assert m.transactions_committed._value.get() == 1
    assert m.transactions_aborted._value.get() == 1
    assert m.transaction_seconds._sum.get() == pytest.approx(2.5)


async def test_close_stops_the_producers_of_partitions_let_go_and_open_starts_only_new_ones() -> (
    None
):
    broker = Broker()
    txns = member(broker)
    await txns.open([0, 1])
    first = producer(txns, 0)
    await txns.open([0, 1, 2])
    assert producer(txns, 0) is first
    assert first.log == ["start", "begin"]
    await txns.close([0, 2])
    assert txns.partitions == {1}
    assert first.log[-1] == "stop"
    await txns.stop()
    assert txns.partitions == set()
