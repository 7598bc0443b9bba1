"""The consume loop while Kafka is away (in-memory consumer): nothing is committed while the
link is down (a commit would wait for the coordinator, holding the loop), everything is once it
is back; a state restore that fails on a Kafka error is tried again instead of stopping the
worker; a shutdown during the outage commits nothing and checkpoints nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiokafka.errors import KafkaTimeoutError

from tests.support.consume_loop import P0, P1, Gated, until
from tests.support.fake_kafka import FakeConsumer
from worker.config import load_settings
from worker.consuming.loop import ConsumeLoop
from worker.kafka import link_policy
from worker.observability.metrics import Metrics
from worker.state.changelog import Restored


def loop_with(consumer: FakeConsumer, process: Gated, up: list[bool], states: Any = None) -> Any:
    settings = load_settings(
        {"commit_interval_ms": "1", "max_in_flight_bytes": str(64 << 20)}, env={}
    )
    stopping = asyncio.Event()
    loop = ConsumeLoop(
        consumer,
        settings,
        process,
        metrics=Metrics(),
        stopping=stopping,
        states=states,
        kafka_up=lambda: up[0],
    )
    return loop, stopping


async def test_nothing_is_committed_while_kafka_is_down_and_everything_after() -> None:
    consumer = FakeConsumer()
    consumer.assign(P0)
    consumer.feed(P0, [b"a", b"b", b"c"])
    process = Gated()
    up = [False]
    loop, stopping = loop_with(consumer, process, up)
    loop.on_assigned({P0})
    running = asyncio.create_task(loop.run())
    for offset in range(3):
        process.release(0, offset)
    await until(lambda: loop.in_flight.documents == 0 and len(process.started) == 3, consumer)
    assert consumer.committed_offset(P0) is None
    up[0] = True
    await until(lambda: consumer.committed_offset(P0) == 3, consumer)
    stopping.set()
    await running


class FlakyStates:
    """Document states whose changelog read fails twice on a Kafka error."""

    def __init__(self) -> None:
        self.attempts = 0
        self.released: list[tuple[set[int], set[int]]] = []

    async def restore(self, partitions: list[int], committed: Any = None) -> list[Restored]:
        self.attempts += 1
        if self.attempts <= 2:
            raise KafkaTimeoutError()
        return [Restored(partition, 0, 0.0, False, 0) for partition in partitions]

    def documents(self, partition: int) -> int:
        return 0

    async def release(
        self, partitions: set[int], clean: set[int], worth_it: Callable[[], bool] = lambda: True
    ) -> None:
        self.released.append((partitions, clean))

    async def expire_markers(self, committed: Any) -> None:
        return None

    async def resend_lost_records(self, partitions: Any, log_starts: Any) -> None:
        return None  # no unconfirmed state


async def test_a_restore_failing_on_kafka_is_tried_again_and_a_shutdown_while_down_is_clean(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr(link_policy, "INITIAL_S", 0.001)  # retries without the real waits
    consumer = FakeConsumer()
    consumer.assign(P0)
    consumer.feed(P0, [b"a"])
    process = Gated()
    up = [True]
    states = FlakyStates()
    loop, stopping = loop_with(consumer, process, up, states)
    loop.on_assigned({P0})
    running = asyncio.create_task(loop.run())
    await until(lambda: process.started == [(0, 0)], consumer)
    assert states.attempts == 3
    assert loop.fatal is None
    assert P0 not in loop.restoring
    # Kafka goes away with the document in flight; the worker is asked to stop.
    up[0] = False
    stopping.set()
    await running
    await asyncio.wait_for(loop.finish(), 30)  # the drain gives up after 1 s: Kafka is away
    assert consumer.committed_offset(P0) is None
    assert states.released == [({0}, set())]  # let go without a checkpoint


class GatedStates(FlakyStates):
    """Document states whose restores wait until the test lets them finish."""

    def __init__(self) -> None:
        super().__init__()
        self.restores: list[list[int]] = []
        self.gate = asyncio.Event()

    async def restore(self, partitions: list[int], committed: Any = None) -> list[Restored]:
        self.restores.append(list(partitions))
        await self.gate.wait()
        return [Restored(partition, 0, 0.0, False, 0) for partition in partitions]


async def test_one_restore_covers_an_assignment_and_a_partial_revoke_restarts_the_rest() -> None:
    consumer = FakeConsumer()
    consumer.assign(P0, P1)
    consumer.feed(P0, [b"a"])
    consumer.feed(P1, [b"b"])
    process = Gated()
    states = GatedStates()
    loop, stopping = loop_with(consumer, process, [True], states)
    loop.on_assigned({P0, P1})
    running = asyncio.create_task(loop.run())
    await until(lambda: states.restores == [[0, 1]], consumer)
    assert loop.restoring == {P0, P1}
    assert process.started == []  # nothing is consumed before its state is back
    # P0 goes while the shared restore waits: P1 alone is restored again, then consumed.
    consumer._assigned.discard(P0)  # as aiokafka does before the listener runs
    await loop.on_revoked({P0})
    await until(lambda: states.restores == [[0, 1], [1]], consumer)
    assert loop.restoring == {P1}
    states.gate.set()
    await until(lambda: process.started == [(1, 0)], consumer)
    assert loop.restoring == set()
    stopping.set()
    process.release(1, 0)
    await running
    await asyncio.wait_for(loop.finish(), 30)
