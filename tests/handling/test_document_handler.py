"""One record through DocumentHandler, with an in-memory producer: chunks or a dead letter. In
the handler's order: what a record is about, chunking and publishing, retries. The lifecycle's
decisions through the handler are tests/state/test_document_lifecycle.py's; how a write reaches
Kafka, tests/state/test_writing.py's.

The real-broker twins of these checks are in tests/broker/test_worker_kafka.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import msgspec
import pytest
from aiokafka.errors import (
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    TopicAuthorizationFailedError,
)

from tests.support.fake_kafka import FakeProducer
from tests.support.handlers import TEXT, handler_for, lifecycle_handler, record
from worker.chunking.types import Chunk
from worker.handling import handler as handler_module
from worker.handling.handler import dead_letter_room
from worker.kafka.permissions import PermissionRefused
from worker.observability.metrics import Metrics
from worker.wire.codec import decode_as
from worker.wire.events import ChunkEvent, DeadLetterEvent, DocumentChunksEvent, DocumentEvent


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


# -- what a record is about (DocumentHandler._subject) ----------------------------------------


def dead_kinds(producer: FakeProducer) -> list[str]:
    return [
        decode_as(v, [], DeadLetterEvent).error_kind
        for t, _, v, _ in producer.sent
        if t == "documents.dlq" and v is not None
    ]


async def test_input_errors_are_dead_letters_named_by_their_kind() -> None:
    """Each way a record can be the input's fault, before any chunking: one dead letter each,
    nothing else published, and the metric of its kind counted."""
    producer = FakeProducer()
    handler, metrics = handler_for(producer, max_document_bytes=200)
    await handler.process(record(None, key=None))  # a tombstone deletes by key
    await handler.process(record(encoded(DocumentEvent(id="d", text="x" * 500)), key=b"d"))
    assert dead_kinds(producer) == ["unkeyed_tombstone", "document_too_large"]
    assert {t for t, *_ in producer.sent} == {"documents.dlq"}
    for kind in dead_kinds(producer):
        assert sample(metrics, "documents_dead_lettered", reason=kind) == 1


async def test_with_the_lifecycle_a_records_key_must_be_its_document(tmp_path: Path) -> None:
    """A tombstone deletes the document its key names: a key that is no UTF-8 id, or a keyed
    version whose id is another, could never be deleted by one, so both are dead letters."""
    producer = FakeProducer()
    handler = lifecycle_handler(producer, tmp_path)
    await handler.process(record(None, key=b"\xff\xfe"))
    await handler.process(record(encoded(DocumentEvent(id="d", text=TEXT[:40])), key=b"e"))
    assert dead_kinds(producer) == ["invalid_utf8", "key_mismatch"]
    assert {t for t, *_ in producer.sent} == {"documents.dlq"}


async def test_append_only_chunks_a_keyed_record_whatever_its_key_and_ignores_tombstones() -> None:
    """With the lifecycle off nothing is remembered: a record's key need not be its id (there is
    no tombstone that must delete it), and a keyed tombstone changes nothing."""
    producer = FakeProducer()
    handler, metrics = handler_for(producer, document_lifecycle="false")
    await handler.process(record(encoded(DocumentEvent(id="d", text=TEXT)), key=b"other"))
    await handler.process(record(None, key=b"d"))
    assert dead_kinds(producer) == []
    assert {t for t, *_ in producer.sent} == {"chunks"}
    assert all(value is not None for *_, value, _ in producer.sent)
    assert sample(metrics, "documents_skipped", reason="unknown_delete") == 1


# -- chunking and publishing (DocumentHandler._update) ----------------------------------------


async def test_a_document_above_the_chunk_cap_is_a_dead_letter_naming_the_cap() -> None:
    producer = FakeProducer()
    handler, _ = handler_for(producer, strategy_params="chunk_size=8", max_chunks_per_document=2)
    await handler.process(record(encoded(DocumentEvent(id="d", text=TEXT)), key=b"d"))
    [(topic, _, value, _)] = producer.sent
    dead = decode_as(value, [], DeadLetterEvent)
    assert topic == "documents.dlq"
    assert dead.error_kind == "too_many_chunks"
    assert "above 2: CHUNKSTREAM_MAX_CHUNKS_PER_DOCUMENT" in dead.error_message


async def test_a_chunk_event_above_the_record_limit_is_a_dead_letter_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever made the chunk that large: it is refused before anything of its document is
    sent, and the document is dead-lettered naming the record limit."""
    producer = FakeProducer()
    handler, _ = handler_for(producer, max_record_bytes=65536)
    text = TEXT + " " + "x" * 70_000

    async def one_huge_chunk(*args: object) -> list[Chunk]:
        return [Chunk(TEXT, 0, len(TEXT), 10, "s"), Chunk(text, 0, len(text), 10, "s")]

    monkeypatch.setattr(handler_module, "chunk_document", one_huge_chunk)
    await handler.process(record(encoded(DocumentEvent(id="d", text=text)), key=b"d"))
    [(topic, _, value, _)] = producer.sent
    dead = decode_as(value, [], DeadLetterEvent)
    assert topic == "documents.dlq"
    assert dead.error_kind == "output_record_too_large"
    assert "chunk 1 encodes to" in dead.error_message
    assert "CHUNKSTREAM_MAX_RECORD_BYTES" in dead.error_message


async def test_a_strategy_bug_costs_one_document_as_chunking_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    producer = FakeProducer()
    handler, _ = handler_for(producer)

    async def broken(*args: object) -> list[object]:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(handler_module, "chunk_document", broken)
    await handler.process(record(encoded(DocumentEvent(id="d", text=TEXT)), key=b"d"))
    [(_, _, value, _)] = producer.sent
    dead = decode_as(value, [], DeadLetterEvent)
    assert dead.error_kind == "chunking_failed"
    assert dead.error_message == "ZeroDivisionError: a bug"


async def test_the_documents_topic_gets_each_documents_chunk_ids_in_index_order() -> None:
    producer = FakeProducer()
    handler, _ = handler_for(
        producer, documents_topic="chunk-documents", document_lifecycle="false"
    )
    await handler.process(record(encoded(DocumentEvent(id="d", text=TEXT, version=4)), key=b"d"))
    events = [decode_as(v, [], ChunkEvent) for t, _, v, _ in producer.sent if t == "chunks"]
    [(_, key, value, _)] = [r for r in producer.sent if r[0] == "chunk-documents"]
    listing = decode_as(value, [], DocumentChunksEvent)
    assert key == b"d"
    assert listing.chunk_ids == [e.chunk_id for e in events]
    assert listing.doc_version == "4"
    assert (listing.source.partition, listing.source.offset) == (1, 7)


async def test_trace_context_and_forwarded_headers_go_on_events_and_dead_letters() -> None:
    producer = FakeProducer()
    handler, _ = handler_for(producer, forward_headers="tenant")
    parent = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    headers = [("traceparent", parent), ("tenant", b"acme"), ("other", b"x")]
    good = record(encoded(DocumentEvent(id="d", text=TEXT)), key=b"d")
    await handler.process(dataclasses.replace(good, headers=headers))
    await handler.process(dataclasses.replace(record(b"\xc1"), headers=headers))
    for sent in producer.headers:
        names = dict(sent)
        assert names["tenant"] == b"acme"
        assert "other" not in names
        assert names["traceparent"].split(b"-")[1] == parent.split(b"-")[1]  # same trace


# -- retries (DocumentHandler._retrying) -------------------------------------------------------


async def test_a_refusal_by_the_brokers_acls_is_raised_not_retried() -> None:
    producer = FakeProducer()
    producer.fail_next = [TopicAuthorizationFailedError("chunks")]
    handler, metrics = handler_for(producer)
    with pytest.raises(PermissionRefused, match=r"security\.md#acls"):
        await handler.process(record(encoded(DocumentEvent(id="d", text=TEXT)), key=b"d"))
    assert producer.sent == []
    assert sample(metrics, "publish_retries") == 0


async def test_a_batch_refused_as_too_large_without_the_lifecycle_is_a_dead_letter() -> None:
    producer = FakeProducer()
    producer.fail_next = [MessageSizeTooLargeError()]
    handler, _ = handler_for(producer, document_lifecycle="false")
    await handler.process(record(encoded(DocumentEvent(id="d", text=TEXT)), key=b"d"))
    assert dead_kinds(producer) == ["output_record_too_large"]
    assert {t for t, *_ in producer.sent} == {"documents.dlq"}


def sample(metrics: Metrics, family: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(f"chunkstream_{family}_total", labels)
    return 0.0 if value is None else value
