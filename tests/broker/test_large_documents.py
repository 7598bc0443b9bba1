"""A document of several megabytes and tens of thousands of chunks, through the worker with the
default settings on the real broker, every topic but the input at the broker's default
max.message.bytes: it is chunked (no dead letter), its state goes to the changelog in records
that topic accepts (parts, then a head), and its later edit and delete, each by a new worker that
restores that state from the changelog, retract every chunk: the sink equals chunking each
version directly, then holds nothing.

The crash and compaction cases of split states are in tests/state/test_split_states.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from tests.support import kafka_io
from tests.support.big_text import stdlib_sources
from tests.support.lifecycle_changelog import sink_contents
from worker.config import Settings, chunk_cap, state_topic
from worker.kafka.clients import create_topics, topic_configs, worker_topics
from worker.pipeline import chunk_document_sync
from worker.wire.codec import EventEncoder
from worker.wire.events import DocumentEvent
from worker.wire.records import chunk_ids
from worker.wire.state_record import decode_state, is_head, split_key

pytestmark = pytest.mark.kafka

DOC_ID = "stdlib-sources"
# The broker's own default (message.max.bytes): what a topic created without the setting takes.
BROKER_DEFAULT_MAX_MESSAGE_BYTES = 1048588


def chunks_of(settings: Settings, text: str) -> dict[str, str]:
    """chunk id → text, chunked offline as the worker chunks."""
    built = kafka_io.build_as_worker(settings)
    texts = [c.text for c in chunk_document_sync(built, text, "text/plain", None)]
    return dict(zip(chunk_ids(DOC_ID, built.fingerprint, texts), texts, strict=True))


async def send(settings: Settings, value: bytes | None) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap_servers, acks="all", max_request_size=16 * 2**20
    )
    await producer.start()
    try:
        await producer.send_and_wait(settings.input_topic, value, key=DOC_ID.encode())
    finally:
        await producer.stop()


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
async def test_a_document_of_tens_of_thousands_of_chunks_is_chunked_edited_and_deleted(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path, guarantee: str
) -> None:
    """With exactly-once, the parts and the head (two waits) are in the document's one
    transaction, and the sink reads committed records only."""
    settings = kafka_io.make_settings(  # the defaults otherwise
        kafka_bootstrap, topic_names, processing_guarantee=guarantee
    )
    isolation = "read_committed" if guarantee == "exactly-once" else "read_uncommitted"
    topics, configs = worker_topics(settings, 1)
    # Only the input takes records of a large document (its producer's business).
    configs.setdefault(settings.input_topic, {})["max.message.bytes"] = str(16 * 2**20)
    await create_topics(settings, topics, configs=configs)
    changelog = state_topic(settings)
    found = await topic_configs(settings, [changelog], ["max.message.bytes"])
    assert found[changelog]["max.message.bytes"] == str(BROKER_DEFAULT_MAX_MESSAGE_BYTES)

    first = stdlib_sources(4_000_000)
    expected_first = chunks_of(settings, first)
    # Above the old fixed cap and above what one state record of the default size names.
    assert len(expected_first) > 20_000
    assert len(expected_first) <= chunk_cap(settings)[0]
    encoder = EventEncoder("msgpack")

    await send(settings, encoder.encode(DocumentEvent(id=DOC_ID, text=first)))
    await kafka_io.run_worker_to_end(settings, timeout_s=300)
    assert await kafka_io.dead_letters(kafka_bootstrap, settings.dlq_topic) == []
    held = await sink_contents(
        kafka_bootstrap, settings.output_topic, tmp_path / "1.db", isolation_level=isolation
    )
    assert held == expected_first

    records = await kafka_io.read_all(kafka_bootstrap, changelog)
    assert all(len(r.key) + len(r.value or b"") < BROKER_DEFAULT_MAX_MESSAGE_BYTES for r in records)
    heads = [decode_state(r.value) for r in records if split_key(r.key)[1] is None]
    assert len(heads) == 1
    assert is_head(heads[0])
    assert len(heads[0].digests) >= 2
    parts = [split_key(r.key)[1] for r in records if split_key(r.key)[1] is not None]
    assert parts == heads[0].digests  # the parts, in order, before their head

    # An edit in the middle, by a new worker that restores the split state.
    cut = len(first) // 2
    second = first[:cut] + "\n\nAn edited paragraph in the middle of the sources.\n\n" + first[cut:]
    second = second.replace("def ", "def  ", 50)  # and some edits near the start
    expected_second = chunks_of(settings, second)
    assert set(expected_first) - set(expected_second)  # the edit retracts some chunks
    await send(settings, encoder.encode(DocumentEvent(id=DOC_ID, text=second)))
    await kafka_io.run_worker_to_end(settings, timeout_s=300)
    held = await sink_contents(
        kafka_bootstrap, settings.output_topic, tmp_path / "2.db", isolation_level=isolation
    )
    assert held == expected_second

    # The delete, by another new worker: every chunk is retracted.
    await send(settings, None)
    await kafka_io.run_worker_to_end(settings, timeout_s=300)
    held = await sink_contents(
        kafka_bootstrap, settings.output_topic, tmp_path / "3.db", isolation_level=isolation
    )
    assert held == {}
    assert await kafka_io.dead_letters(kafka_bootstrap, settings.dlq_topic) == []
