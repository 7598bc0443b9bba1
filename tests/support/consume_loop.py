"""Pieces of the consume-loop tests over the fake consumer: two partitions, a gated handler,
and waiting until a condition holds while the loop runs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiokafka import TopicPartition

from tests.support.fake_kafka import FakeConsumer
from worker.wire.records import InputRecord

P0 = TopicPartition("documents", 0)


P1 = TopicPartition("documents", 1)


class Gated:
    """A process function whose documents finish when the test says so."""

    def __init__(self) -> None:
        self.started: list[tuple[int, int]] = []
        self._gates: dict[tuple[int, int], asyncio.Event] = {}
        self.fail: set[tuple[int, int]] = set()

    def gate(self, partition: int, offset: int) -> asyncio.Event:
        return self._gates.setdefault((partition, offset), asyncio.Event())

    def release(self, partition: int, offset: int) -> None:
        self.gate(partition, offset).set()

    async def __call__(self, rec: InputRecord) -> None:
        key = (rec.partition, rec.offset)
        self.started.append(key)
        await self.gate(*key).wait()
        if key in self.fail:
            raise RuntimeError("a bug")


async def until(condition: Callable[[], bool], consumer: FakeConsumer) -> None:
    """Wait for ``condition``, then let the loop go round a few more fetches."""
    for _ in range(10_000):
        if condition():
            break
        await asyncio.sleep(0)
    else:
        raise AssertionError("condition never held")
    fetches = consumer.fetches
    for _ in range(10_000):
        if consumer.fetches >= fetches + 3:
            return
        await asyncio.sleep(0)
