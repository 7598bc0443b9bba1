"""Document lifecycle among software nobody here wrote: librdkafka (confluent-kafka) produces
document versions and tombstones (compressed, keyed by document id, as a CDC pipeline does),
the worker runs in between, and librdkafka reads the chunk topic and the documents topic back:
chunk events keyed by their chunk id, tombstones as null values under the ids to delete, the
`msgpack` library decoding the events. Applying upsert-by-key and delete-on-null to what
librdkafka read leaves exactly the current documents' chunks."""

from __future__ import annotations

import asyncio

import msgpack
import pytest
from confluent_kafka import Producer

from tests.support import kafka_io
from tests.support.kafka_io import run_worker_until
from tests.support.librdkafka import read_topic
from worker.app import Worker
from worker.pipeline import chunk_document_sync
from worker.wire.records import chunk_ids

pytestmark = pytest.mark.kafka

PARAMS = {"chunk_size": "120"}


def versions() -> list[tuple[str, dict[str, object] | None]]:
    """(document id, value or None for a tombstone), in the order a producer sends them."""
    one = "Alpha starts here. " * 3 + "\n\nBeta follows. " * 3 + "\n\nGamma ends it. " * 3
    edited = one.replace("Beta follows.", "Beta was edited.")
    return [
        ("keep", {"id": "keep", "text": one, "version": 1}),
        ("edit", {"id": "edit", "text": one, "version": 1}),
        ("gone", {"id": "gone", "text": one}),
        ("edit", {"id": "edit", "text": edited, "version": 2}),
        ("gone", None),  # a tombstone: every chunk of "gone" must be deleted
        ("edit", {"id": "edit", "text": one, "version": 1}),  # an old version re-sent: ignored
        ("never-seen", None),  # deleting an unknown document: a no-op, no dead letter
    ]


def produce(bootstrap: str, topic: str) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": "zstd", "enable.idempotence": True}
    )
    for key, value in versions():
        producer.produce(
            topic,
            key=key.encode(),
            value=None if value is None else msgpack.packb(value),
            headers=[("content-type", b"application/msgpack")],
        )
    assert producer.flush(30) == 0


async def test_librdkafka_reads_the_tombstones_and_a_sink_ends_with_the_current_chunks(
    kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        strategy_params=PARAMS,
        documents_topic=f"{topic_names['output_topic']}.documents",
    )
    await kafka_io.create(settings)
    await asyncio.to_thread(produce, kafka_bootstrap, settings.input_topic)
    done = asyncio.ensure_future(
        kafka_io.wait_committed_to_end(kafka_bootstrap, settings.group_id, settings.input_topic)
    )
    assert await run_worker_until(Worker(settings), done) == 0

    records = await asyncio.to_thread(read_topic, kafka_bootstrap, settings.output_topic)
    sink: dict[bytes, str] = {}
    tombstones = 0
    for message in sorted(records, key=lambda m: (m.partition(), m.offset())):
        if message.value() is None:
            tombstones += 1
            headers = dict(message.headers() or [])
            assert headers["chunkstream-doc-id"] in (b"gone", b"edit")
            assert message.key() in sink  # only ids that were published are deleted
            del sink[message.key()]
            continue
        event = msgpack.unpackb(message.value(), raw=False, timestamp=0)
        assert message.key() == event["chunk_id"].encode()  # the sink's point id
        sink[message.key()] = event["text"]

    built = kafka_io.build_as_worker(settings)
    current = {doc: value for doc, value in versions() if value is not None}
    current.pop("gone")
    edited = versions()[3][1]  # version 2 stays: the re-sent version 1 is older
    assert edited is not None
    current["edit"] = edited
    expected: dict[bytes, str] = {}
    ids_of: dict[str, list[str]] = {}
    for doc_id, value in current.items():
        assert value is not None
        chunks = chunk_document_sync(built, str(value["text"]), "text/plain", None)
        texts = [c.text for c in chunks]
        ids_of[doc_id] = chunk_ids(doc_id, built.fingerprint, texts)
        expected.update(
            (chunk_id.encode(), text) for chunk_id, text in zip(ids_of[doc_id], texts, strict=True)
        )
    assert sink == expected
    assert tombstones >= 2  # the edited paragraph's chunk(s) and all of "gone"'s

    # The documents topic: the last record per document is its current chunk ids, or null.
    last: dict[bytes, object] = {}
    assert settings.documents_topic is not None
    for message in await asyncio.to_thread(read_topic, kafka_bootstrap, settings.documents_topic):
        value = message.value()
        last[message.key()] = None if value is None else msgpack.unpackb(value, timestamp=0)
    assert last[b"gone"] is None
    assert b"never-seen" not in last
    for doc_id in ("keep", "edit"):
        event = last[doc_id.encode()]
        assert isinstance(event, dict)
        assert event["chunk_ids"] == ids_of[doc_id]  # in index order
    assert await kafka_io.dead_letters(kafka_bootstrap, settings.dlq_topic) == []
