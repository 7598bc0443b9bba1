"""One record through DocumentHandler, with an in-memory producer: chunks or a dead letter.

The real-broker twins of these checks are in tests/broker/test_worker_kafka.py.
"""

from __future__ import annotations

import msgspec
from aiokafka.errors import KafkaTimeoutError

from tests.support.fake_kafka import FakeProducer
from tests.support.handlers import TEXT, handler_for, record
from worker.handling.handler import dead_letter_room
from worker.wire.codec import decode_as
from worker.wire.events import ChunkEvent, DeadLetterEvent, DocumentEvent


def encoded(doc: DocumentEvent) -> bytes:
    return msgspec.msgpack.encode(doc)


async def test_a_document_becomes_its_chunk_events_in_order_on_one_partition() -> None:
    producer = FakeProducer()
    handler, metrics = handler_for(producer, strategy_params="chunk_size=30")
    await handler.process(record(encoded(DocumentEvent(id="d1", text=TEXT))))
    events = [decode_as(v, [], ChunkEvent) for _, _, v, _ in producer.sent]
    assert {topic for topic, *_ in producer.sent} == {"chunks"}
    assert len({partition for *_, partition in producer.sent}) == 1
    assert [e.index for e in events] == list(range(len(events)))
    assert len(events) > 1
    for event in events:
        assert event.text == TEXT[event.start_index : event.end_index]
        assert event.source.offset == 7
    # The worker's totals (its "stopped" log line) are the counters', nothing kept beside them.
    assert metrics.totals() == (1, len(events), 0, 0)  # documents, chunks, dead letters, ...


async def test_a_malformed_record_is_a_dead_letter_with_its_reason_and_bytes() -> None:
    producer = FakeProducer()
    handler, metrics = handler_for(producer)
    await handler.process(record(b"\xc1 not msgpack"))
    [(topic, key, value, _)] = producer.sent
    dead = decode_as(value, [], DeadLetterEvent)
    assert topic == "documents.dlq"
    assert key == b"k"
    assert dead.error_kind == "undecodable"
    assert dead.value == b"\xc1 not msgpack"
    assert (dead.source.partition, dead.source.offset) == (1, 7)
    assert metrics.totals() == (1, 0, 1, 0)  # a dead letter is a finished document too


async def test_an_embedding_strategy_without_a_model_costs_one_document() -> None:
    producer = FakeProducer()
    # A handler wired without an embed function (the worker never does that) must still fail
    # the one document, not raise into the loop.
    handler, _ = handler_for(producer, strategy="semantic")
    await handler.process(record(encoded(DocumentEvent(id="d", text=TEXT))))
    [(topic, _, value, _)] = producer.sent
    dead = decode_as(value, [], DeadLetterEvent)
    assert topic == "documents.dlq"
    assert dead.error_kind == "chunking_failed"
    assert "needs the embedding model" in dead.error_message


async def test_a_transient_kafka_error_is_retried_until_published() -> None:
    producer = FakeProducer()
    producer.fail_next = [KafkaTimeoutError()]
    handler, metrics = handler_for(producer)
    await handler.process(record(encoded(DocumentEvent(id="d", text=TEXT))))
    assert producer.sent  # published after the retry
    assert metrics.totals().dead_letters == 0


def test_dead_letter_room_keeps_key_and_headers_unless_they_crowd_out_the_value() -> None:
    small = record(b"v" * 10, key=b"k" * 100)
    kept, room = dead_letter_room(small, 64 * 1024)
    assert kept.key == small.key
    assert room == 64 * 1024 - 8 * 1024 - 100
    huge_key = record(b"v", key=b"k" * 40_000)
    kept, room = dead_letter_room(huge_key, 64 * 1024)
    assert kept.key is None
    assert kept.headers == []
    assert room == 64 * 1024 - 8 * 1024
