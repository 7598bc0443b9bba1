"""The consume loop against an in-memory consumer: commits, backpressure, revocation, bugs.

Fast and deterministic; tests/broker/test_worker_kafka.py and test_full_worker.py check the
same promises against the real broker.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiokafka import TopicPartition

from tests.support.consume_loop import P0, P1, Gated, until
from tests.support.fake_kafka import FakeConsumer
from worker.config import load_settings
from worker.consuming import loop as consumer_module
from worker.consuming.loop import ConsumeLoop
from worker.observability.metrics import Metrics
from worker.wire.records import InputRecord


def make_loop(
    consumer: FakeConsumer, process: Gated, **settings: Any
) -> tuple[ConsumeLoop, asyncio.Event]:
    # The worker plans its in-flight byte window from the container's memory at start-up
    # (worker.runtime.resources.plan; 0 = derive); these tests set one, as the plan would.
    flags = {
        "commit_interval_ms": "1",
        "max_in_flight_bytes": str(64 << 20),
        **{k: str(v) for k, v in settings.items()},
    }
    stopping = asyncio.Event()
    loop = ConsumeLoop(
        consumer, load_settings(flags, env={}), process, metrics=Metrics(), stopping=stopping
    )
    return loop, stopping


async def test_commits_only_the_contiguous_prefix_of_finished_offsets() -> None:
    consumer = FakeConsumer()
    consumer.assign(P0)
    process = Gated()
    loop, stopping = make_loop(consumer, process)
    loop.on_assigned({P0})
    consumer.feed(P0, [b"a", b"b", b"c", b"d", b"e"])
    task = asyncio.create_task(loop.run())
    await until(lambda: len(process.started) == 5, consumer)

    process.release(0, 2)
    process.release(0, 3)
    await until(lambda: loop.in_flight.documents == 3, consumer)  # two of five finished
    assert consumer.committed_offset(P0) is None  # offset 0 is unfinished: nothing passes it

    process.release(0, 0)
    await until(lambda: consumer.committed_offset(P0) == 1, consumer)
    process.release(0, 1)
    await until(lambda: consumer.committed_offset(P0) == 4, consumer)
    process.release(0, 4)
    stopping.set()
    await task
    await loop.finish()
    assert consumer.committed_offset(P0) == 5
    assert loop.in_flight.documents == 0
    offsets = [c[P0] for c in consumer.commits]
    assert offsets == sorted(offsets)  # never backwards


async def test_pauses_at_the_in_flight_limit_and_resumes_when_half_drained() -> None:
    consumer = FakeConsumer()
    consumer.assign(P0, P1)
    process = Gated()
    loop, stopping = make_loop(consumer, process, max_in_flight_documents=4)
    loop.on_assigned({P0, P1})
    consumer.feed(P0, [b"x"] * 6)
    consumer.feed(P1, [b"y"] * 6)
    task = asyncio.create_task(loop.run())
    await until(lambda: loop.paused, consumer)
    assert consumer.pause_calls == 1
    assert consumer.paused() == {P0, P1}
    assert len(process.started) == 4  # the fetch asks for no more than the room left
    assert loop.in_flight.documents == 4
    # What the client had buffered was taken before the pause (aiokafka would drop it and
    # fetch it again after the resume: worker.consuming.prefetch), and is held, not started.
    assert consumer.queued() == 0

    # Three of four finish: 1 in flight ≤ half of 4, so the loop takes work again: the held
    # records first, while the client stays paused (no second response beside them).
    for key in process.started[:3]:
        process.release(*key)
    await until(lambda: not loop.paused, consumer)
    await until(lambda: len(process.started) == 7, consumer)
    assert consumer.resume_calls == 0
    assert consumer.paused() == {P0, P1}

    for _ in range(20):  # release everything as it starts
        for key in list(process.started):
            process.release(*key)
        await asyncio.sleep(0)
    await until(lambda: len(process.started) == 12 and not loop.in_flight.documents, consumer)
    assert consumer.resume_calls == 1  # once nothing was held any more
    for partition in (0, 1):  # each partition's records started in offset order
        offsets = [offset for p, offset in process.started if p == partition]
        assert offsets == list(range(6))
    stopping.set()
    await task
    await loop.finish()
    assert consumer.committed_offset(P0) == 6
    assert consumer.committed_offset(P1) == 6


async def test_records_of_a_partition_not_owned_are_not_started() -> None:
    consumer = FakeConsumer()
    consumer.assign(P0, P1)  # the fetch still returns P1's records…
    process = Gated()
    loop, stopping = make_loop(consumer, process)
    loop.on_assigned({P0})  # …but the group took P1 away meanwhile
    consumer.feed(P0, [b"a"])
    consumer.feed(P1, [b"b"])
    task = asyncio.create_task(loop.run())
    await until(lambda: len(process.started) == 1, consumer)
    assert process.started == [(0, 0)]
    process.release(0, 0)
    stopping.set()
    await task
    await loop.finish()
    assert consumer.committed_offset(P1) is None


async def test_revocation_drains_commits_and_forgets_the_partition() -> None:
    consumer = FakeConsumer()
    consumer.assign(P0, P1)
    process = Gated()
    loop, stopping = make_loop(consumer, process, drain_timeout_s=30)
    loop.on_assigned({P0, P1})
    consumer.feed(P0, [b"a", b"b"])
    consumer.feed(P1, [b"c"])
    task = asyncio.create_task(loop.run())
    await until(lambda: len(process.started) == 3, consumer)
    revoking = asyncio.create_task(loop.on_revoked({P0}))
    await asyncio.sleep(0)
    assert not revoking.done()  # waits for P0's documents
    process.release(0, 0)
    process.release(0, 1)
    await revoking
    assert consumer.committed_offset(P0) == 2
    assert P0 not in loop.in_flight.tasks
    process.release(1, 0)
    stopping.set()
    await task
    await loop.finish()
    assert consumer.committed_offset(P1) == 1


async def test_a_bug_stops_the_loop_and_its_offset_is_never_committed() -> None:
    consumer = FakeConsumer()
    consumer.assign(P0)
    process = Gated()
    process.fail.add((0, 1))
    loop, stopping = make_loop(consumer, process)
    loop.on_assigned({P0})
    consumer.feed(P0, [b"a", b"b", b"c"])
    task = asyncio.create_task(loop.run())
    await until(lambda: len(process.started) == 3, consumer)
    process.release(0, 0)
    process.release(0, 2)
    process.release(0, 1)
    await asyncio.wait_for(task, 10)  # the loop ends on its own
    assert stopping.is_set()
    assert isinstance(loop.fatal, RuntimeError)
    await loop.finish()
    assert consumer.committed_offset(P0) == 1  # offset 1 failed: nothing from it on


class WaitingConsumer(FakeConsumer):
    """Like the real client: a fetch that finds nothing waits out its whole timeout."""

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[Any]]:
        out = await super().getmany(*partitions, timeout_ms=timeout_ms, max_records=max_records)
        if not out and timeout_ms:
            await asyncio.sleep(timeout_ms / 1000)
        return out


async def test_a_paused_loop_resumes_when_documents_finish_not_after_a_fetch_timeout(
    monkeypatch: Any,
) -> None:
    # A fetch timeout of an hour: a paused loop that waited in the fetch would sit there
    # for an hour per pause; this one must take all 24 documents through 4 at a time.
    monkeypatch.setattr(consumer_module, "_FETCH_TIMEOUT_MS", 3_600_000)
    consumer = WaitingConsumer()
    consumer.assign(P0)
    finished: list[int] = []
    all_done = asyncio.Event()

    async def process(rec: InputRecord) -> None:
        await asyncio.sleep(0)
        finished.append(rec.offset)
        if len(finished) == 24:
            all_done.set()

    stopping = asyncio.Event()
    loop = ConsumeLoop(
        consumer,
        load_settings(
            {"max_in_flight_documents": "4", "max_in_flight_bytes": str(64 << 20)}, env={}
        ),
        process,
        metrics=Metrics(),
        stopping=stopping,
    )
    loop.on_assigned({P0})
    consumer.feed(P0, [b"x"] * 24)
    task = asyncio.create_task(loop.run())
    try:
        # A hang guard, not a speed check: the broken loop needs hours, the fixed one none.
        async with asyncio.timeout(120):
            await all_done.wait()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert consumer.pause_calls >= 5  # it did pause, again and again
    assert sorted(finished) == list(range(24))
