"""The commit path (worker.consuming.commits) on the fake consumer: partitions revoked are handed
over (drained, committed), partitions lost are dropped (their documents cancelled at once, their
unsent writes discarded, nothing committed), and an exactly-once commit stuck on producers of
partitions that were lost does not hold every later commit back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, NamedTuple

from tests.support.consume_loop import P0, P1, Gated, until
from tests.support.fake_kafka import FakeConsumer
from tests.support.fake_transactions import Broker, member, producer
from worker.config import load_settings
from worker.consuming.loop import ConsumeLoop
from worker.kafka.membership import Membership
from worker.kafka.transactions import PartitionTransactions
from worker.observability.metrics import Metrics
from worker.wire.records import InputRecord


class Coordinator:
    """The fields and methods of aiokafka's group coordinator that membership uses."""

    generation = 3
    member_id = "member-1"
    rejoins = 0

    async def _do_heartbeat(self) -> bool:
        return True

    def request_rejoin(self) -> None:
        self.rejoins += 1


class Client:
    def __init__(self) -> None:
        self._coordinator = Coordinator()


def standing(clock: list[float]) -> tuple[Membership, Coordinator]:
    client = Client()
    membership = Membership(6000, clock=lambda: clock[0])
    membership.attach(client)
    return membership, client._coordinator


def make_loop(
    consumer: FakeConsumer,
    process: Any,
    membership: Membership,
    *,
    discarded: list[BaseException] | None = None,
    transactions: PartitionTransactions | None = None,
) -> tuple[ConsumeLoop, asyncio.Event]:
    flags = {"commit_interval_ms": "1", "max_in_flight_bytes": str(64 << 20)}
    if transactions is not None:
        flags["processing_guarantee"] = "exactly-once"
    stopping = asyncio.Event()
    loop = ConsumeLoop(
        consumer,
        load_settings(flags, env={}),
        process,
        metrics=Metrics(),
        stopping=stopping,
        transactions=transactions,
        membership=membership,
        discard_writes=None if discarded is None else discarded.append,
    )
    return loop, stopping


async def test_partitions_revoked_while_vouched_for_are_drained_and_committed() -> None:
    clock = [0.0]
    membership, _ = standing(clock)
    consumer = FakeConsumer()
    consumer.assign(P0, P1)
    process = Gated()
    discarded: list[BaseException] = []
    loop, stopping = make_loop(consumer, process, membership, discarded=discarded)
    loop.on_assigned({P0, P1})  # a join: proof of membership
    task = asyncio.create_task(loop.run())
    consumer.feed(P0, [b"a", b"b"])
    await until(lambda: len(process.started) == 2, consumer)
    process.release(0, 0)
    revoking = asyncio.create_task(loop.on_revoked({P0}))
    await asyncio.sleep(0.01)
    process.release(0, 1)  # the drain waits for it
    await revoking
    assert consumer.commits[-1] == {P0: 2}
    assert discarded == []
    stopping.set()
    await task
    await loop.finish()


async def test_partitions_lost_are_dropped_without_a_commit() -> None:
    clock = [0.0]
    membership, coordinator = standing(clock)
    consumer = FakeConsumer()
    consumer.assign(P0)
    process = Gated()
    discarded: list[BaseException] = []
    loop, stopping = make_loop(consumer, process, membership, discarded=discarded)
    loop.on_assigned({P0})
    task = asyncio.create_task(loop.run())
    consumer.feed(P0, [b"a", b"b", b"c"])
    await until(lambda: len(process.started) == 3, consumer)
    process.release(0, 0)
    await until(lambda: consumer.commits == [{P0: 1}], consumer)  # committed while a member
    # Paused past the session timeout, then the client learns it was expelled.
    clock[0] += 7.0
    coordinator.generation = -1
    in_flight = [t for group in loop.in_flight.tasks.values() for t in group]
    assert len(in_flight) == 2
    await asyncio.wait_for(loop.on_revoked({P0}), 5)  # no drain: nothing is waited for
    assert all(t.cancelled() for t in in_flight)
    assert consumer.commits == [{P0: 1}]  # offsets 1 and 2 are the next owner's
    assert len(discarded) == 1
    stopping.set()
    await task
    await loop.finish()


class Documents:
    """Documents that write one record into their partition's transaction, as the handler
    does, once let through."""

    def __init__(self, txns: PartitionTransactions) -> None:
        self._txns = txns
        self.written: list[int] = []

    async def __call__(self, rec: InputRecord) -> None:
        await self._txns.admit()
        await (await self._txns.send("chunks", value=str(rec.offset).encode()))
        self.written.append(rec.offset)


async def test_a_commit_stuck_on_lost_partitions_does_not_hold_back_the_next_ones() -> None:
    clock = [0.0]
    membership, coordinator = standing(clock)
    broker = Broker()
    txns = member(broker, input_topic=P0.topic)
    consumer = FakeConsumer()
    consumer.assign(P0)
    documents = Documents(txns)
    loop, stopping = make_loop(consumer, documents, membership, transactions=txns)
    loop.on_assigned({P0})
    task = asyncio.create_task(loop.run())
    await until(lambda: P0 not in loop.restoring, consumer)
    stuck = producer(txns, 0)
    stuck.commit_gate = asyncio.Event()  # its commit never returns (a broker gone)
    consumer.feed(P0, [b"0"])
    await until(lambda: stuck.log[-1:] == ["offsets g"], consumer)

    clock[0] += 7.0
    coordinator.generation = -1  # the session expired meanwhile
    await asyncio.wait_for(loop.on_revoked({P0}), 5)
    assert broker.committed.get(stuck.tid) is None  # nothing of the lost partition committed

    # Back in the group, given the partition again: a new producer, and commits go on.
    coordinator.generation = 4
    consumer.feed(P0, [b"1"], first_offset=1)
    loop.on_assigned({P0})
    await until(lambda: P0 not in loop.restoring, consumer)
    fresh = producer(txns, 0)
    assert fresh is not stuck
    await until(lambda: bool(broker.committed.get(fresh.tid)), consumer)
    stopping.set()
    await task
    await loop.finish()


async def test_documents_lost_before_their_first_step_leave_the_window() -> None:
    """Partitions lost the moment their records were started: the tasks are cancelled before
    they ever run, and the in-flight window must still give their room back (it was counted in
    the coroutine, which never ran, and the worker then stayed paused for good)."""
    clock = [0.0]
    membership, coordinator = standing(clock)
    consumer = FakeConsumer()
    consumer.assign(P0)
    consumer.feed(P0, [b"a", b"b", b"c"])
    loop, _ = make_loop(consumer, Gated(), membership, discarded=[])
    loop.on_assigned({P0})
    await until(lambda: P0 not in loop.restoring, consumer)
    records = (await consumer.getmany())[P0]
    for record in records:
        loop._start(P0, record)  # as the loop does, with no await before the revocation
    assert loop.in_flight.documents == 3
    clock[0] += 7.0
    coordinator.generation = -1
    await loop.on_revoked({P0})
    assert loop.in_flight.documents == 0
    assert loop.in_flight.bytes == 0


class Running(NamedTuple):
    """An exactly-once loop over P0, started and restored, with what the tests reach into."""

    loop: ConsumeLoop
    stopping: asyncio.Event
    task: asyncio.Task[None]
    consumer: FakeConsumer
    broker: Broker
    txns: PartitionTransactions
    clock: list[float]
    coordinator: Coordinator
    documents: Any


async def running_exactly_once(documents: Callable[[PartitionTransactions], Any]) -> Running:
    clock = [0.0]
    membership, coordinator = standing(clock)
    broker = Broker()
    txns = member(broker, input_topic=P0.topic)
    consumer = FakeConsumer()
    consumer.assign(P0)
    process = documents(txns)
    loop, stopping = make_loop(consumer, process, membership, transactions=txns)
    loop.on_assigned({P0})
    task = asyncio.create_task(loop.run())
    await until(lambda: P0 not in loop.restoring, consumer)
    return Running(loop, stopping, task, consumer, broker, txns, clock, coordinator, process)


async def test_a_failed_transaction_restarts_its_partition_from_the_last_commit() -> None:
    """A commit that fails for a reason of the moment (a broker outage) is aborted: the
    partition restarts from its last committed transaction, under a new producer, with its
    documents done again, and the worker goes on, not stopped."""
    from aiokafka.errors import KafkaError

    run = await running_exactly_once(Documents)
    loop, stopping, task, consumer, broker, txns = (
        run.loop,
        run.stopping,
        run.task,
        run.consumer,
        run.broker,
        run.txns,
    )
    first = producer(txns, 0)
    first.fail_next_commit = KafkaError("Unexpected error during batch delivery")
    consumer.feed(P0, [b"0", b"1"])
    await until(lambda: "abort" in first.log, consumer)  # its transaction aborted
    consumer.feed(P0, [b"0", b"1"])  # seeking back to the committed offset reads them again
    await until(lambda: producer(txns, 0) is not first and bool(broker.committed), consumer)
    (records, offsets), *_ = broker.committed[first.tid]
    assert sorted(records) == ["chunks:0", "chunks:1"]  # done again, in the new transaction
    assert offsets == {P0: 2}
    assert loop.fatal is None
    stopping.set()
    await task
    await loop.finish()


class GatedDocuments(Documents):
    """Documents that wait for the test before their first write."""

    def __init__(self, txns: PartitionTransactions) -> None:
        super().__init__(txns)
        self.gates: dict[int, asyncio.Event] = {}

    async def __call__(self, rec: InputRecord) -> None:
        await self.gates.setdefault(rec.offset, asyncio.Event()).wait()
        await super().__call__(rec)


async def test_a_document_that_finds_its_failed_transaction_gone_does_not_stop_the_worker() -> None:
    """The abort takes a failed transaction away at once and then waits for the broker; a
    document of the partition that comes to write meanwhile finds none, and must be abandoned
    with the partition (restarted from its last commit), not stop the worker as a bug."""
    from aiokafka.errors import KafkaError

    run = await running_exactly_once(GatedDocuments)
    loop, stopping, task, consumer, txns = run.loop, run.stopping, run.task, run.consumer, run.txns
    documents: GatedDocuments = run.documents
    first = producer(txns, 0)
    first.fail_next_commit = KafkaError("Unexpected error during batch delivery")
    first.abort_gate = asyncio.Event()  # the abort waits, as for a broker coming back
    consumer.feed(P0, [b"0", b"1"])
    await until(lambda: len(loop.in_flight.tasks.get(P0, {})) == 2, consumer)
    documents.gates.setdefault(0, asyncio.Event()).set()
    await until(lambda: "abort" in first.log, consumer)  # its commit failed: aborting
    documents.gates.setdefault(1, asyncio.Event()).set()  # comes to write meanwhile
    await until(lambda: not loop.in_flight.tasks.get(P0), consumer)
    assert loop.fatal is None
    first.abort_gate.set()
    stopping.set()
    await task
    await loop.finish()
    assert loop.fatal is None


async def test_a_shutdown_after_a_drop_cancelled_the_commit_under_way_ends_cleanly() -> None:
    """The drop cancels the exactly-once commit under way; a shutdown that comes next waits
    for that commit to have ended, and must not take its cancellation for its own."""
    run = await running_exactly_once(Documents)
    loop, stopping, task, consumer, txns = run.loop, run.stopping, run.task, run.consumer, run.txns
    clock, coordinator = run.clock, run.coordinator
    stuck = producer(txns, 0)
    stuck.commit_gate = asyncio.Event()
    consumer.feed(P0, [b"0"])
    await until(lambda: stuck.log[-1:] == ["offsets g"], consumer)
    clock[0] += 7.0
    coordinator.generation = -1
    await asyncio.wait_for(loop.on_revoked({P0}), 5)
    stopping.set()
    await task
    await asyncio.wait_for(loop.finish(), 5)  # no CancelledError out of the finished commit
    assert loop.fatal is None
