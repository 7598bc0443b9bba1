"""The crash the pipelined state record opens, on the real broker: the state of a new version
reached the changelog, its chunk events and tombstones did not (they go out together, and a
SIGKILL can land between their acknowledgements). The next worker restores that state, meets
the record it names, and must do it again in full: the sink ends with the new version's chunks,
none of the old one's.

The state record is written here by hand, exactly as the worker writes it; a real SIGKILL hits
this window too rarely to test it by chance (tests/kafka/test_lifecycle_worker.py kills at a
random point)."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from tests.kafka import helpers
from tests.kafka.test_lifecycle_worker import produce, sink_contents
from worker import lifecycle
from worker.codec import EventEncoder
from worker.config import Settings, state_topic
from worker.events import DocumentEvent
from worker.pipeline import chunk_document_sync
from worker.records import chunk_ids
from worker.state_store import encode_state

pytestmark = pytest.mark.kafka

PARAGRAPHS = [
    f"Paragraph {n} is about {topic}. It has a second sentence on {topic} and a third one."
    for n, topic in enumerate(
        ["brokers", "partitions", "offsets", "replicas", "segments", "compaction", "groups"]
    )
]


def chunks_of(settings: Settings, doc_id: str, text: str) -> dict[str, str]:
    """chunk id → text, chunked offline as the worker chunks."""
    built = helpers.build_as_worker(settings)
    texts = [c.text for c in chunk_document_sync(built, text, "text/plain", None)]
    return dict(zip(chunk_ids(doc_id, built.fingerprint, texts), texts, strict=True))


@pytest.mark.parametrize("unchanged", ["emit", "skip"])
async def test_a_state_written_without_its_chunks_is_done_again(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path, unchanged: str
) -> None:
    settings = helpers.make_settings(
        kafka_bootstrap,
        topic_names,
        strategy="sentence",
        strategy_params={"chunk_size": "20"},
        unchanged_chunks=unchanged,
    )
    await helpers.create(settings, partitions=1)
    encoder = EventEncoder("msgpack")
    doc_id = "handbook"
    first = "\n\n".join(PARAGRAPHS)
    second = "\n\n".join([*PARAGRAPHS[:2], "An edited paragraph on leaders.", *PARAGRAPHS[3:5]])
    old, new = chunks_of(settings, doc_id, first), chunks_of(settings, doc_id, second)
    # The edit retracts chunks, adds chunks and keeps chunks.
    assert set(old) - set(new)
    assert set(new) - set(old)
    assert set(old) & set(new)

    def event(text: str, version: int) -> tuple[bytes, bytes]:
        return doc_id.encode(), encoder.encode(DocumentEvent(id=doc_id, text=text, version=version))

    await produce(kafka_bootstrap, settings.input_topic, [event(first, 1)])
    await helpers.run_worker_to_end(settings, timeout_s=60)
    assert await sink_contents(kafka_bootstrap, settings.output_topic, tmp_path / "a.db") == old

    # The second version lands at input offset 1; its state reaches the changelog, its chunk
    # events and tombstones never do (the worker died between the acknowledgements).
    await produce(kafka_bootstrap, settings.input_topic, [event(second, 2)])
    written = lifecycle.DocumentState(
        offset=1,
        version=2,
        chunk_ids=lifecycle.ids_to_bytes(list(new)),
        retracted=lifecycle.ids_to_bytes([i for i in old if i not in new]),
    )
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(
            state_topic(settings), key=doc_id.encode(), value=encode_state(written), partition=0
        )
    finally:
        await producer.stop()

    # A new worker (a fresh local store: it restores the changelog) takes the partition over.
    await helpers.run_worker_to_end(settings, timeout_s=60)
    held = await sink_contents(kafka_bootstrap, settings.output_topic, tmp_path / "b.db")
    assert set(held) - set(new) == set(), "stale chunks of the first version"
    assert held == new
    assert await helpers.dead_letters(kafka_bootstrap, settings.dlq_topic) == []
