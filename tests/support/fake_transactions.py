"""Fake transactional producers that record what they were asked and fence like a broker: one
epoch per transactional id, and a producer whose epoch is not the newest can neither write nor
commit (the tests of worker.kafka.transactions and of the exactly-once consume loop)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import ProducerFenced
from aiokafka.structs import OffsetAndMetadata

from worker.kafka.transactions import PartitionTransactions, transactional_id, writing_for
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
        self.fail_next_commit: BaseException | None = None  # as a broker outage fails one
        self.commit_gate: asyncio.Event | None = None  # set: commits return (None: at once)
        self.abort_gate: asyncio.Event | None = None  # set: aborts return (None: at once)

    def _fenced(self) -> bool:
        return self.broker.epochs[self.tid] != self.epoch

    async def start(self) -> None:  # InitProducerId: a new epoch fences the older ones
        self.epoch = self.broker.epochs.get(self.tid, -1) + 1
        self.broker.epochs[self.tid] = self.epoch
        self.log.append("start")

    async def stop(self) -> None:
        self.log.append("stop")
        await asyncio.sleep(0)  # a real stop flushes and waits: others run meanwhile

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
        if self.commit_gate is not None:
            await self.commit_gate.wait()
        if self.fail_next_commit is not None:
            error, self.fail_next_commit = self.fail_next_commit, None
            raise error
        if self._fenced():
            raise ProducerFenced()
        self.log.append("commit")
        self.broker.committed.setdefault(self.tid, []).append((self.pending, self.offsets))

    async def abort_transaction(self) -> None:
        self.log.append("abort")
        if self.abort_gate is not None:
            await self.abort_gate.wait()
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


def member(
    broker: Broker, clock: list[float] | None = None, *, input_topic: str = "docs"
) -> PartitionTransactions:
    made: dict[str, FakeProducer] = {}

    def make(tid: str) -> FakeProducer:
        made[tid] = FakeProducer(broker, tid)
        return made[tid]

    txns = PartitionTransactions(
        make,
        Metadata(),
        group_id="g",
        input_topic=input_topic,
        metrics=Metrics(),
        clock=(lambda: clock[0]) if clock is not None else (lambda: 0.0),
    )
    txns.made = made  # type: ignore[attr-defined]
    txns.input_topic = input_topic  # type: ignore[attr-defined]
    return txns


def producer(txns: PartitionTransactions, partition: int) -> FakeProducer:
    made: dict[str, FakeProducer] = txns.made  # type: ignore[attr-defined]
    return made[transactional_id("g", txns.input_topic, partition)]  # type: ignore[attr-defined]


async def write(txns: PartitionTransactions, partition: int, value: str) -> None:
    with writing_for(partition):
        delivered = await txns.send("chunks", value=value.encode())
    await delivered
