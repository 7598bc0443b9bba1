"""The exactly-once commit runs beside the consume loop (worker.consuming.loop), on the fake
consumer and fake transactional producers: while a commit is under way the loop goes on taking
records and their documents go on chunking, and only their writes wait for the next
transaction. Each committed transaction holds exactly the records of the documents between
the offset before it and the offset it commits (what makes a replay from it exact)."""

from __future__ import annotations

import asyncio

from aiokafka import TopicPartition

from tests.support.consume_loop import P0, until
from tests.support.fake_kafka import FakeConsumer
from tests.support.fake_transactions import Broker, member, producer
from worker.config import load_settings
from worker.consuming.loop import ConsumeLoop
from worker.kafka.transactions import PartitionTransactions, transactional_id
from worker.observability.metrics import Metrics
from worker.wire.records import InputRecord


class Documents:
    """A process function: each document "chunks" until the test lets it, then writes one
    record naming its offset into its partition's transaction, as the handler does."""

    def __init__(self, txns: PartitionTransactions) -> None:
        self._txns = txns
        self.chunked: list[int] = []
        self.written: list[int] = []
        self._gates: dict[int, asyncio.Event] = {}

    def gate(self, offset: int) -> asyncio.Event:
        return self._gates.setdefault(offset, asyncio.Event())

    async def __call__(self, rec: InputRecord) -> None:
        await self.gate(rec.offset).wait()
        self.chunked.append(rec.offset)
        await self._txns.admit()
        await (await self._txns.send("chunks", value=str(rec.offset).encode()))
        self.written.append(rec.offset)


def make_loop(
    consumer: FakeConsumer, txns: PartitionTransactions, documents: Documents
) -> tuple[ConsumeLoop, asyncio.Event]:
    flags = {"commit_interval_ms": "1", "max_in_flight_bytes": str(64 << 20)}
    settings = load_settings({**flags, "processing_guarantee": "exactly-once"}, env={})
    stopping = asyncio.Event()
    loop = ConsumeLoop(
        consumer,
        settings,
        documents,
        metrics=Metrics(),
        stopping=stopping,
        transactions=txns,
    )
    return loop, stopping


async def test_documents_after_the_cut_chunk_during_a_commit_and_write_into_the_next() -> None:
    broker = Broker()
    txns = member(broker, input_topic=P0.topic)
    consumer = FakeConsumer()
    consumer.assign(P0)
    documents = Documents(txns)
    loop, stopping = make_loop(consumer, txns, documents)
    loop.on_assigned({P0})
    task = asyncio.create_task(loop.run())
    await until(lambda: P0 not in loop.restoring, consumer)
    the_producer = producer(txns, 0)
    the_producer.commit_gate = asyncio.Event()  # the first commit hangs until the test says

    consumer.feed(P0, [b"0", b"1", b"2"])
    for offset in (0, 1):
        documents.gate(offset).set()
    await until(lambda: documents.written == [0, 1], consumer)
    # A commit is under way by now (the interval is 1 ms), its cut at offset 1; offset 2,
    # below nothing written, waits there. Later records keep coming and chunking meanwhile.
    await until(lambda: the_producer.log[-1] == "offsets g", consumer)
    consumer.feed(P0, [b"3", b"4"], first_offset=3)
    for offset in (2, 3, 4):
        documents.gate(offset).set()
    await until(lambda: sorted(documents.chunked) == [0, 1, 2, 3, 4], consumer)
    assert documents.written == [0, 1]  # their writes wait for the next transaction
    assert the_producer.pending == ["chunks:0", "chunks:1"]

    the_producer.commit_gate.set()
    await until(lambda: sorted(documents.written) == [0, 1, 2, 3, 4], consumer)
    await until(lambda: not loop.uncommitted(P0), consumer)
    stopping.set()
    await task
    await loop.finish()

    tid = transactional_id("g", "documents", 0)
    committed = broker.committed[tid]
    first_records, first_offsets = committed[0]
    assert (first_records, first_offsets) == (
        ["chunks:0", "chunks:1"],
        {TopicPartition("documents", 0): 2},
    )
    # Every transaction holds exactly the documents between the offsets it moves over.
    start = 0
    for records, offsets in committed:
        end = offsets[TopicPartition("documents", 0)]
        assert sorted(int(r.split(":")[1]) for r in records) == list(range(start, end))
        start = end
    assert start == 5
