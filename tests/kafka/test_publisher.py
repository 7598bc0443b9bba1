"""Publisher's record batches with an in-memory producer: order, sharing, failure, linger.

The real-broker twins (order, partition placement against librdkafka, acks, the state
changelog written uncompressed) are in tests/broker/test_worker_kafka.py,
tests/broker/test_codecs.py, tests/interop/test_partition_placement.py and
tests/interop/test_confluent_interop.py.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from aiokafka.errors import KafkaTimeoutError, MessageSizeTooLargeError
from aiokafka.partitioner import murmur2

from tests.support.fake_kafka import FakeProducer, HeldProducer
from worker.errors import OutputRecordTooLarge
from worker.kafka.publisher import Publisher
from worker.state.writing import AppendOnly, Write
from worker.wire.codec import EventEncoder, Headers, decode_as
from worker.wire.events import ChunkEvent, SourceRecord
from worker.wire.state_record import DocumentState

NOW = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)


def events(doc_id: str, count: int) -> list[ChunkEvent]:
    return [
        ChunkEvent(
            chunk_id=f"{doc_id}-{i}",
            doc_id=doc_id,
            doc_version=None,
            index=i,
            count=count,
            text=f"chunk {i}",
            start_index=i,
            end_index=i + 1,
            token_count=1,
            strategy="sentence",
            metadata={},
            source=SourceRecord("documents", 0, 0),
            produced_at=NOW,
        )
        for i in range(count)
    ]


def publisher_for(producer: FakeProducer, linger_ms: int = 0) -> Publisher:
    return Publisher(
        producer,
        EventEncoder("msgpack"),
        output_topic="chunks",
        dlq_topic="chunks.dlq",
        max_record_bytes=1024 * 1024,
        linger_ms=linger_ms,
    )


async def publish(
    publisher: Publisher,
    doc_id: str,
    chunk_events: list[ChunkEvent],
    headers: Headers = (),
    retracted: list[str] | None = None,
) -> int:
    """A document's events and tombstones the way the worker writes them without the lifecycle
    (worker.state.writing.AppendOnly): staged, then one wait; the bytes published."""
    encode = EventEncoder("msgpack").encode
    write = Write(
        0,
        doc_id,
        DocumentState(0, None, b""),
        None,
        headers,
        keys=[event.chunk_id.encode() for event in chunk_events],
        values=[encode(event) for event in chunk_events],
        retract=retracted or [],
    )
    return await AppendOnly(publisher, None).write(write)


def java_partition(key: bytes, partitions: int) -> int:
    """Kafka's Java DefaultPartitioner for a keyed record: toPositive(murmur2(key)) % n."""
    hashed: int = murmur2(key)
    return (hashed & 0x7FFFFFFF) % partitions


async def test_documents_share_batches_and_keep_their_order_across_batch_boundaries() -> None:
    producer = FakeProducer(partitions=1, batch_capacity=4)
    publisher = publisher_for(producer)
    docs = {f"doc-{n}": events(f"doc-{n}", 7) for n in range(5)}
    await asyncio.gather(*(publish(publisher, d, evs) for d, evs in docs.items()))
    sent = [decode_as(value, [], ChunkEvent) for _, _, value, _ in producer.sent]
    assert len(sent) == 35
    for doc_id in docs:
        assert [e.index for e in sent if e.doc_id == doc_id] == list(range(7))
    # 35 records in batches of at most 4: shared across documents, not one per document.
    assert producer.batches == 9


async def test_chunks_are_keyed_by_chunk_id_and_placed_by_document_id() -> None:
    producer = FakeProducer(partitions=6)
    publisher = publisher_for(producer)
    ids = [f"document-{n}" for n in range(60)]
    await asyncio.gather(*(publish(publisher, d, events(d, 2)) for d in ids))
    placed = {key: partition for _, key, _, partition in producer.sent}
    # The key a stock sink upserts by is the chunk id; the partition is the one Kafka's
    # partitioner gives the document id, so one document's records stay in order.
    assert placed == {
        f"{d}-{i}".encode(): java_partition(d.encode(), 6) for d in ids for i in range(2)
    }
    assert len(set(placed.values())) == 6


async def test_retracted_chunks_follow_the_events_as_tombstones_in_the_same_partition() -> None:
    producer = FakeProducer(partitions=6)
    publisher = publisher_for(producer)
    await publish(publisher, "doc", events("doc", 2), (("traceparent", b"t"),), ["old1"])
    await publish(publisher, "doc", [], (), ["old2", "old3"])  # a deleted document
    sent = [(key, value, partition) for _, key, value, partition in producer.sent]
    partition = java_partition(b"doc", 6)
    assert [(k, v is None, p) for k, v, p in sent] == [
        (b"doc-0", False, partition),
        (b"doc-1", False, partition),
        (b"old1", True, partition),
        (b"old2", True, partition),
        (b"old3", True, partition),
    ]
    headers = dict(producer.headers[2])
    assert headers == {"chunkstream-doc-id": b"doc", "traceparent": b"t"}


async def test_a_failed_hand_over_fails_every_document_in_the_batch() -> None:
    producer = FakeProducer(partitions=1)
    producer.fail_next = [KafkaTimeoutError()]
    publisher = publisher_for(producer)
    results = await asyncio.gather(
        publish(publisher, "a", events("a", 3)),
        publish(publisher, "b", events("b", 3)),
        return_exceptions=True,
    )
    assert [type(r) for r in results] == [KafkaTimeoutError, KafkaTimeoutError]
    assert results[0] is not results[1]  # each document raises its own copy
    assert producer.sent == []
    # The lane is free again: the retry of a document goes through.
    assert await publish(publisher, "a", events("a", 3)) > 0
    assert len(producer.sent) == 3


async def test_a_batch_the_topic_refuses_for_size_is_output_record_too_large() -> None:
    producer = FakeProducer(partitions=1)
    producer.fail_next = [MessageSizeTooLargeError()]
    publisher = publisher_for(producer)
    with pytest.raises(OutputRecordTooLarge, match="refused"):
        await publish(publisher, "a", events("a", 2))


async def test_a_chunk_event_above_the_record_limit_is_refused_before_anything_is_sent() -> None:
    producer = FakeProducer(partitions=1)
    publisher = Publisher(
        producer,
        EventEncoder("msgpack"),
        output_topic="chunks",
        dlq_topic="chunks.dlq",
        max_record_bytes=1024 + 400,
    )
    big = events("a", 2)
    big[1] = ChunkEvent(
        **{**{f: getattr(big[1], f) for f in big[1].__struct_fields__}, "text": "x" * 500}
    )
    with pytest.raises(OutputRecordTooLarge, match="chunk 1"):
        await publish(publisher, "a", big)
    assert producer.sent == []
    assert producer.batches == 0


@pytest.mark.parametrize(("linger_ms", "batches"), [(0, 2), (3000, 1)])
async def test_linger_holds_a_batch_open_for_documents_that_arrive_within_it(
    linger_ms: int, batches: int
) -> None:
    producer = FakeProducer(partitions=1)
    publisher = publisher_for(producer, linger_ms=linger_ms)
    first = asyncio.create_task(publish(publisher, "a", events("a", 2)))
    await asyncio.sleep(0)  # the first document's records are in, the lane's driver is due
    second = asyncio.create_task(publish(publisher, "b", events("b", 2)))
    await asyncio.gather(first, second)
    # Without linger the driver hands the first batch over before the second document
    # appends; with it, the batch waits (3 s: far beyond any scheduling delay) and takes both.
    assert producer.batches == batches
    assert len(producer.sent) == 4


async def test_a_document_without_chunk_events_sends_nothing_and_waits_for_nothing() -> None:
    producer = FakeProducer(partitions=1)
    publisher = publisher_for(producer, linger_ms=60_000)  # a batch would hold it a minute
    assert await publish(publisher, "empty", []) == 0
    assert producer.batches == 0


async def test_unsettled_names_what_a_hand_over_waits_for() -> None:
    producer = HeldProducer()
    publisher = publisher_for(producer)
    publisher.stage("state", 0, [(b"a", b"1", [])])
    publisher.stage("state", 1, [(b"c", b"3", [])])
    publisher.stage("chunks", 0, [(b"d", b"4", [])])
    await asyncio.sleep(0.01)  # the lanes' drivers hand their batches over
    # A newer batch of state/0 fails at once while the older one is still unacknowledged:
    # the older one is still waited for (batches of a lane need not settle in order).
    producer.fail_next = [KafkaTimeoutError()]
    failed = publisher.stage("state", 0, [(b"b", b"2", [])])
    await asyncio.sleep(0.01)
    assert producer.batches == 3
    assert all(f.done() for f in failed)
    state_zero = publisher.unsettled(lambda topic, partition: (topic, partition) == ("state", 0))
    assert len(state_zero) == 1
    assert not any(f.done() for f in state_zero)
    assert len(publisher.unsettled(lambda topic, partition: topic == "state")) == 2
    assert len(publisher.unsettled(lambda topic, partition: True)) == 3
    producer.release()
    await asyncio.sleep(0.01)  # the acknowledgements' callbacks run
    assert all(f.done() for f in state_zero)
    assert publisher.unsettled(lambda topic, partition: True) == set()


def test_uncompressed_topics_need_the_producers_batch_size() -> None:
    with pytest.raises(ValueError, match="batch_bytes"):
        Publisher(
            FakeProducer(),
            EventEncoder("msgpack"),
            output_topic="chunks",
            dlq_topic="chunks.dlq",
            max_record_bytes=1024 * 1024,
            uncompressed_topics=["state"],
        )


async def test_a_document_cancelled_while_it_waits_leaves_its_batch_to_the_others() -> None:
    """Documents share a batch's acknowledgement: a revocation cancelling one of them (its
    partition let go) must not cancel the acknowledgement the others wait for, or they end
    without finishing and their offsets are never committed."""
    producer = HeldProducer()
    publisher = publisher_for(producer)
    first, _ = await publisher.stage_encoded("d", [b"a"], [b"1"])
    second, _ = await publisher.stage_encoded("d", [b"b"], [b"2"])
    assert first == second  # one batch
    cancelled = asyncio.create_task(publisher.wait(first))
    kept = asyncio.create_task(publisher.wait(second))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    await asyncio.sleep(0)
    producer.release()
    await asyncio.wait_for(kept, 5)  # not cancelled with the other
    assert cancelled.cancelled()


async def test_acknowledged_offsets_and_a_discard_of_what_was_not_handed_over() -> None:
    producer = FakeProducer(partitions=2)
    publisher = publisher_for(producer)
    assert publisher.acknowledged("state", 1) is None
    await publisher.publish("state", 1, [(b"a", b"1", []), (b"b", b"2", [])])
    await publisher.publish("state", 1, [(b"c", b"3", [])])
    assert publisher.acknowledged("state", 1) == 2  # offsets 0, 1 and 2
    acks = publisher.stage("state", 1, [(b"d", b"4", [])])
    publisher.discard(KafkaTimeoutError("lost"))  # before its lane could hand it over
    with pytest.raises(KafkaTimeoutError):
        await publisher.wait(acks)
    assert [key for _, key, _, _ in producer.sent] == [b"a", b"b", b"c"]
    assert publisher.acknowledged("state", 1) == 2


async def test_a_lane_discarded_before_its_driver_ran_still_hands_over_what_comes_next() -> None:
    """The fault campaign's seed 17 (at-least-once): a document staged into a lane, and the
    partitions were lost in the same turn of the loop, before the lane's new driver took its
    first step. A task cancelled before its first step never runs its ``finally``, so the lane
    kept a dead driver and every later batch of it waited forever."""
    producer = FakeProducer(partitions=2)
    publisher = publisher_for(producer)
    lost = publisher.stage("state", 1, [(b"a", b"1", [])])
    publisher.discard(KafkaTimeoutError("lost"))  # the driver has not taken a step yet
    with pytest.raises(KafkaTimeoutError):
        await publisher.wait(lost)
    # Bounded only so that a regression fails instead of hanging: the fake acknowledges at once.
    async with asyncio.timeout(30):
        await publisher.publish("state", 1, [(b"b", b"2", [])])
    assert [key for _, key, _, _ in producer.sent] == [b"b"]
    assert publisher.acknowledged("state", 1) == 0


async def test_a_discard_while_the_driver_waits_leaves_the_next_batches_to_a_new_driver() -> None:
    """Batches staged after a discard, before the cancelled driver has unwound, belong to the
    next driver: the old one's cancellation fails nothing staged after the discard."""
    producer = FakeProducer(partitions=2)
    publisher = publisher_for(producer, linger_ms=60_000)  # the driver lingers: it is waiting
    lost = publisher.stage("state", 1, [(b"a", b"1", [])])
    await asyncio.sleep(0)  # the driver's first step: it lingers in asyncio.sleep
    publisher.discard(KafkaTimeoutError("lost"))
    kept = publisher.stage("state", 1, [(b"b", b"2", [])])  # before the old driver unwinds
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the old driver has now handled its cancellation
    with pytest.raises(KafkaTimeoutError):
        await publisher.wait(lost)
    assert not kept[0].done()  # still lingering in its own lane's open batch, not failed
    publisher.discard(KafkaTimeoutError("end of test"))
