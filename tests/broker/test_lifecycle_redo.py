"""The crash the pipelined state record opens, on the real broker: the state of a new version
reached the changelog, its chunk events and tombstones did not (they go out together, and a
SIGKILL can land between their acknowledgements). The next worker restores that state, meets
the record it names, and must do it again in full: the sink ends with the new version's chunks,
none of the old one's.

The state record is written here by hand, exactly as the worker writes it; a real SIGKILL hits
this window too rarely to test it by chance (tests/broker/test_lifecycle_worker.py kills at a
random point)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient

from tests.support import kafka_io
from tests.support.lifecycle_changelog import produce, sink_contents
from worker.config import Settings, state_topic
from worker.pipeline import chunk_document_sync
from worker.wire.codec import EventEncoder
from worker.wire.events import DocumentEvent
from worker.wire.records import chunk_ids
from worker.wire.state_record import DocumentState, encode_state, ids_to_bytes

pytestmark = pytest.mark.kafka

PARAGRAPHS = [
    f"Paragraph {n} is about {topic}. It has a second sentence on {topic} and a third one."
    for n, topic in enumerate(
        ["brokers", "partitions", "offsets", "replicas", "segments", "compaction", "groups"]
    )
]

DOC_ID = "handbook"
# Small chunks: a one-paragraph edit retracts some, adds some and keeps some.
FLAGS: dict[str, Any] = {"strategy": "sentence", "strategy_params": {"chunk_size": "20"}}


def chunks_of(settings: Settings, doc_id: str, text: str) -> dict[str, str]:
    """chunk id → text, chunked offline as the worker chunks."""
    built = kafka_io.build_as_worker(settings)
    texts = [c.text for c in chunk_document_sync(built, text, "text/plain", None)]
    return dict(zip(chunk_ids(doc_id, built.fingerprint, texts), texts, strict=True))


Event = Callable[[str, int], tuple[bytes, bytes]]


async def orphaned_state(
    settings: Settings, tmp_path: Path
) -> tuple[dict[str, str], dict[str, str], Event]:
    """A first version in the sink, then a second version on the input whose state reached
    the changelog and whose chunk events and tombstones never did (the worker died between
    the acknowledgements). The first and second versions' chunks, and the event maker."""
    await kafka_io.create(settings, partitions=1)
    encoder = EventEncoder("msgpack")
    first = "\n\n".join(PARAGRAPHS)
    second = "\n\n".join([*PARAGRAPHS[:2], "An edited paragraph on leaders.", *PARAGRAPHS[3:5]])
    old, new = chunks_of(settings, DOC_ID, first), chunks_of(settings, DOC_ID, second)
    # The edit retracts chunks, adds chunks and keeps chunks.
    assert set(old) - set(new)
    assert set(new) - set(old)
    assert set(old) & set(new)

    def event(text: str, version: int) -> tuple[bytes, bytes]:
        return DOC_ID.encode(), encoder.encode(DocumentEvent(id=DOC_ID, text=text, version=version))

    await produce(settings.bootstrap_servers, settings.input_topic, [event(first, 1)])
    await kafka_io.run_worker_to_end(settings, timeout_s=60)
    bootstrap = settings.bootstrap_servers
    assert await sink_contents(bootstrap, settings.output_topic, tmp_path / "a.db") == old

    # The second version lands at input offset 1; only its state reaches the changelog.
    await produce(bootstrap, settings.input_topic, [event(second, 2)])
    written = DocumentState(
        offset=1,
        version=2,
        chunk_ids=ids_to_bytes(list(new)),
        retracted=ids_to_bytes([i for i in old if i not in new]),
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(
            state_topic(settings), key=DOC_ID.encode(), value=encode_state(written), partition=0
        )
    finally:
        await producer.stop()
    return old, new, event


@pytest.mark.parametrize("unchanged", ["emit", "skip"])
async def test_a_state_written_without_its_chunks_is_done_again(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path, unchanged: str
) -> None:
    settings = kafka_io.make_settings(
        kafka_bootstrap, topic_names, unchanged_chunks=unchanged, **FLAGS
    )
    _, new, _ = await orphaned_state(settings, tmp_path)
    # A new worker (a fresh local store: it restores the changelog) takes the partition over.
    await kafka_io.run_worker_to_end(settings, timeout_s=60)
    held = await sink_contents(kafka_bootstrap, settings.output_topic, tmp_path / "b.db")
    assert set(held) - set(new) == set(), "stale chunks of the first version"
    assert held == new
    assert await kafka_io.dead_letters(kafka_bootstrap, settings.dlq_topic) == []


@pytest.mark.parametrize("unchanged", ["emit", "skip"])
async def test_a_replay_that_becomes_a_dead_letter_withdraws_the_document(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path, unchanged: str
) -> None:
    """The same crash, but the next worker dead-letters the replay (its chunk cap was lowered
    at the restart): the state's retracted ids are the only record of the tombstones the
    first attempt meant to send. The document is withdrawn before the dead letter, and the
    next version leaves exactly itself in the sink."""
    settings = kafka_io.make_settings(
        kafka_bootstrap, topic_names, unchanged_chunks=unchanged, **FLAGS
    )
    _, new, event = await orphaned_state(settings, tmp_path)
    third = PARAGRAPHS[5]
    latest = chunks_of(settings, DOC_ID, third)
    assert len(latest) < len(new)
    lowered = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        unchanged_chunks=unchanged,
        max_chunks_per_document=str(len(latest)),
        **FLAGS,
    )
    await kafka_io.run_worker_to_end(lowered, timeout_s=60)
    bootstrap = settings.bootstrap_servers
    assert await sink_contents(bootstrap, settings.output_topic, tmp_path / "b.db") == {}
    dead = await kafka_io.dead_letters(bootstrap, settings.dlq_topic)
    assert [d.error_kind for d in dead] == ["too_many_chunks"]
    await produce(bootstrap, settings.input_topic, [event(third, 3)])
    await kafka_io.run_worker_to_end(lowered, timeout_s=60)
    assert await sink_contents(bootstrap, settings.output_topic, tmp_path / "c.db") == latest


def delete_records_before(bootstrap: str, topic: str, offset: int) -> None:
    """What retention or compaction does to the input: the records of partition 0 before
    ``offset`` are gone (Kafka's DeleteRecords, sent by librdkafka's admin client)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([ConfluentPartition(topic, 0, offset)], request_timeout=30)
    for future in futures.values():
        assert future.result(timeout=30).low_watermark == offset  # the new log start


@pytest.mark.parametrize("unchanged", ["emit", "skip"])
async def test_a_state_whose_record_left_the_input_is_finished_by_the_next_version(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path, unchanged: str
) -> None:
    """The same crash, and then the record the state names leaves the input before any
    worker reads it again: a compacted input topic drops it once a newer version is written
    (here: Kafka's DeleteRecords). No redo comes. The next version must do what the redo
    would have done, and the sink ends with exactly that version."""
    settings = kafka_io.make_settings(
        kafka_bootstrap, topic_names, unchanged_chunks=unchanged, **FLAGS
    )
    old, new, event = await orphaned_state(settings, tmp_path)
    bootstrap = settings.bootstrap_servers
    delete_records_before(bootstrap, settings.input_topic, 2)  # the second version's record
    third = "\n\n".join(
        [*PARAGRAPHS[:2], "An edited paragraph on leaders.", PARAGRAPHS[3], "On quorums now."]
    )
    latest = chunks_of(settings, DOC_ID, third)
    # It keeps a chunk only the lost version had (its event never landed; "skip" would not
    # emit it again), and lacks chunks the lost version retracted (their tombstones never
    # landed either).
    assert (set(new) - set(old)) & set(latest)
    assert (set(old) - set(new)) - set(latest)
    await produce(bootstrap, settings.input_topic, [event(third, 3)])
    await kafka_io.run_worker_to_end(settings, timeout_s=60)
    held = await sink_contents(bootstrap, settings.output_topic, tmp_path / "b.db")
    assert set(held) - set(latest) == set(), "stale chunks of the first version"
    assert held == latest
    assert await kafka_io.dead_letters(bootstrap, settings.dlq_topic) == []


async def test_an_older_version_after_a_lost_record_sends_its_tombstones_again(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    """The same crash, the record gone, and then the first version is re-sent (on a compacted
    input, that re-send is what drops the second version's record). The older integer version
    changes nothing, but the second version's tombstones never landed and its record will not
    come back to send them: the older version sends them again. No chunk the second version
    retracted stays; the chunks only it added stay missing until a newer version comes (they
    need its text, which is gone)."""
    settings = kafka_io.make_settings(kafka_bootstrap, topic_names, **FLAGS)
    old, new, event = await orphaned_state(settings, tmp_path)
    bootstrap = settings.bootstrap_servers
    delete_records_before(bootstrap, settings.input_topic, 2)
    first = "\n\n".join(PARAGRAPHS)
    await produce(bootstrap, settings.input_topic, [event(first, 1)])
    await kafka_io.run_worker_to_end(settings, timeout_s=60)
    held = await sink_contents(bootstrap, settings.output_topic, tmp_path / "b.db")
    assert set(held) & (set(old) - set(new)) == set(), "chunks the second version retracted"
    assert held == {chunk_id: text for chunk_id, text in old.items() if chunk_id in new}
    assert await kafka_io.dead_letters(bootstrap, settings.dlq_topic) == []


async def test_a_lost_record_with_nothing_after_it_has_its_tombstones_sent_again(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    """The same crash, and retention takes the second version's record before any worker
    reads it again, with no later record of the document. On assignment the worker finds the
    unconfirmed state below the input's log start and sends its tombstones again: no chunk the
    second version retracted stays. (Another document follows, so the group commits to the
    end.)"""
    settings = kafka_io.make_settings(kafka_bootstrap, topic_names, **FLAGS)
    old, new, _ = await orphaned_state(settings, tmp_path)
    bootstrap = settings.bootstrap_servers
    delete_records_before(bootstrap, settings.input_topic, 2)
    other = PARAGRAPHS[6]
    encoded = EventEncoder("msgpack").encode(DocumentEvent(id="other", text=other, version=1))
    await produce(bootstrap, settings.input_topic, [(b"other", encoded)])
    await kafka_io.run_worker_to_end(settings, timeout_s=60)
    held = await sink_contents(bootstrap, settings.output_topic, tmp_path / "b.db")
    assert set(held) & (set(old) - set(new)) == set(), "chunks the second version retracted"
    kept = {chunk_id: text for chunk_id, text in old.items() if chunk_id in new}
    assert held == {**kept, **chunks_of(settings, "other", other)}
    assert await kafka_io.dead_letters(bootstrap, settings.dlq_topic) == []
