"""worker.state.writing: a document's write as one unit, with the lifecycle (states) and
without (the append-only null object). The decisions through it are
tests/state/test_document_lifecycle.py's; split states, tests/state/test_split_states.py's."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest
from aiokafka.errors import MessageSizeTooLargeError

from tests.support.fake_kafka import FakeProducer, HeldProducer
from tests.support.handlers import STATE_TOPIC
from worker.config import load_settings, state_topic
from worker.errors import OutputRecordTooLarge
from worker.kafka.publisher import Publisher
from worker.observability.metrics import Metrics
from worker.state.changelog import Changelog
from worker.state.documents import DocumentStates
from worker.state.sqlite_store import SqliteStateStore
from worker.state.writing import AppendOnly, StateWrites, Write, open_writes
from worker.wire.codec import EventEncoder, decode_as
from worker.wire.events import DocumentChunksEvent, SourceRecord
from worker.wire.state_record import DocumentState, decode_state, ids_to_bytes

IDS = ["a" * 32, "b" * 32]
LISTING = DocumentChunksEvent(
    doc_id="d",
    doc_version=None,
    chunk_ids=IDS,
    strategy="sentence",
    source=SourceRecord("documents", 1, 5),
    produced_at=dt.datetime(2026, 12, 6, tzinfo=dt.UTC),
)


def publisher_for(producer: FakeProducer) -> Publisher:
    return Publisher(
        producer,
        EventEncoder("msgpack"),
        output_topic="chunks",
        dlq_topic="documents.dlq",
        max_record_bytes=1024 * 1024,
    )


def states_for(publisher: Publisher, tmp: Path, documents_topic: str | None) -> DocumentStates:
    store = SqliteStateStore(tmp / "state.sqlite")
    return DocumentStates(
        store,
        publisher,
        Changelog(None, STATE_TOPIC, store),
        Metrics(),
        documents_topic=documents_topic,
    )


def write(state: DocumentState, previous: DocumentState | None = None) -> Write:
    return Write(
        1,
        "d",
        state,
        previous,
        keys=[i.encode() for i in IDS],
        values=[b"event-0", b"event-1"],
        retract=["c" * 32],
        listing=LISTING,
    )


def test_open_writes_is_the_null_object_without_states_and_the_lifecycles_with(
    tmp_path: Path,
) -> None:
    settings = load_settings({"documents_topic": "chunk-documents"}, env={})
    assert state_topic(settings) == STATE_TOPIC
    publisher = publisher_for(FakeProducer())
    metrics = Metrics()
    assert isinstance(open_writes(settings, publisher, None, metrics), AppendOnly)
    states = states_for(publisher, tmp_path, settings.documents_topic)
    writes = open_writes(settings, publisher, states, metrics)
    assert isinstance(writes, StateWrites)
    assert writes.remembers
    assert not AppendOnly(publisher, None).remembers


async def test_append_only_writes_what_was_decided_and_remembers_nothing() -> None:
    producer = FakeProducer()
    writes = AppendOnly(publisher_for(producer), "chunk-documents")
    state = DocumentState(5, None, ids_to_bytes(IDS))
    published = await writes.write(write(state))
    assert published == len(b"event-0") + len(b"event-1")
    assert [(t, k, v is None) for t, k, v, _ in producer.sent] == [
        ("chunks", IDS[0].encode(), False),
        ("chunks", IDS[1].encode(), False),
        ("chunks", b"c" * 32, True),
        ("chunk-documents", b"d", False),
    ]
    listed = decode_as(producer.sent[-1][2], [], DocumentChunksEvent)
    assert listed.chunk_ids == IDS
    assert writes.get(1, "d") is None
    assert not writes.unconfirmed(1, "d", state)
    await writes.withdraw_unfinished(1, "d", 5, ())  # nothing remembered: nothing to withdraw
    assert len(producer.sent) == 4


async def test_append_only_turns_a_refusal_for_size_into_the_documents_error() -> None:
    producer = FakeProducer()
    producer.fail_next = [MessageSizeTooLargeError()]
    writes = AppendOnly(publisher_for(producer), None)
    with pytest.raises(OutputRecordTooLarge, match=r"max\.message\.bytes"):
        await writes.write(write(DocumentState(5, None, ids_to_bytes(IDS))))


async def test_the_state_goes_out_beside_the_chunks_and_the_store_takes_it_once_acked(
    tmp_path: Path,
) -> None:
    """One step, one wait: the state record is handed over with the chunk events before any
    acknowledgement, and the local copy takes the state only after all of them."""
    producer = HeldProducer()
    publisher = publisher_for(producer)
    states = states_for(publisher, tmp_path, "chunk-documents")
    writes = StateWrites(states, publisher, Metrics())
    state = DocumentState(5, None, ids_to_bytes(IDS), retracted=ids_to_bytes(["c" * 32]))
    task = asyncio.create_task(writes.write(write(state)))
    while {t for t, *_ in producer.sent} != {"chunks", "chunk-documents", STATE_TOPIC}:  # noqa: ASYNC110
        await asyncio.sleep(0)  # polls a fake
    assert not task.done()
    assert writes.get(1, "d") is None  # nothing acknowledged yet
    producer.release()
    await task
    assert writes.get(1, "d") == state
    [value] = [v for t, _, v, _ in producer.sent if t == STATE_TOPIC]
    assert value is not None
    assert decode_state(value) == state


async def test_a_delete_sends_the_documents_topic_its_tombstone(tmp_path: Path) -> None:
    producer = FakeProducer()
    publisher = publisher_for(producer)
    writes = StateWrites(states_for(publisher, tmp_path, "chunk-documents"), publisher, Metrics())
    marker = DocumentState(6, None, b"", deleted=True, retracted=ids_to_bytes(IDS))
    await writes.write(Write(1, "d", marker, None, retract=IDS))
    assert [(t, v is None) for t, _, v, _ in producer.sent] == [
        ("chunks", True),
        ("chunks", True),
        ("chunk-documents", True),
        (STATE_TOPIC, False),
    ]
    assert writes.get(1, "d") == marker
