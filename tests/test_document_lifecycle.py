"""The lifecycle through DocumentHandler with an in-memory producer and a real state store:
what goes out, in which order, for versions, tombstones and replays. The real-broker twin is
tests/kafka/test_lifecycle_worker.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from tests.kafka.fakes import FakeProducer
from tests.test_document_handler import record
from worker.changelog import Changelog
from worker.chunking import registry
from worker.codec import EventEncoder, decode_as
from worker.config import load_settings, state_topic
from worker.document import DocumentHandler
from worker.events import ChunkEvent, DeadLetterEvent, DocumentEvent
from worker.metrics import Metrics
from worker.publisher import Publisher
from worker.resolver import StrategyResolver
from worker.state import DocumentStates
from worker.state_store import StateStore, decode_state

V1 = "Alpha one here. Beta two there. Gamma three now."
V2 = "Alpha one here. Beta was changed. Gamma three now."


def lifecycle_handler(producer: FakeProducer, tmp: Path, **flags: Any) -> DocumentHandler:
    settings = load_settings(
        {"strategy_params": "chunk_size=20", **{k: str(v) for k, v in flags.items()}}, env={}
    )
    context = registry.BuildContext()
    default = registry.build(settings.strategy, settings.strategy_params, context)
    resolver = StrategyResolver(default, frozenset(), context)
    publisher = Publisher(
        producer,  # type: ignore[arg-type]
        EventEncoder("msgpack"),
        output_topic=settings.output_topic,
        dlq_topic=settings.dlq_topic,
        max_record_bytes=settings.max_record_bytes,
    )
    store = StateStore(tmp / "state.sqlite")
    changelog = Changelog(None, state_topic(settings), store)  # type: ignore[arg-type]
    states = DocumentStates(store, publisher, changelog, Metrics())
    stats = {"documents": 0, "chunks": 0, "dead_letters": 0, "rebalances": 0}
    return DocumentHandler(settings, resolver, publisher, Metrics(), None, stats, states)


def doc(text: str, version: int | None = None) -> bytes:
    return msgspec.msgpack.encode(DocumentEvent(id="d", text=text, version=version))


def chunks_of(sent: list[Any]) -> list[tuple[str, str | None]]:
    """(key, text or None for a tombstone) of the chunk-topic records, in order."""
    out = []
    for topic, key, value, _ in sent:
        if topic == "chunks":
            text = None if value is None else decode_as(value, [], ChunkEvent).text
            out.append((key.decode(), text))
    return out


async def test_an_edit_publishes_the_new_chunks_then_retracts_the_old_then_writes_state(
    tmp_path: Path,
) -> None:
    producer = FakeProducer()
    handler = lifecycle_handler(producer, tmp_path)
    await handler.process(record(doc(V1, 1), offset=3, key=b"d"))
    first = dict(chunks_of(producer.sent))
    producer.sent.clear()
    await handler.process(record(doc(V2, 2), offset=4, key=b"d"))
    sent = list(producer.sent)
    out = chunks_of(sent)
    new_texts = [t for _, t in out if t is not None]
    tombstones = [k for k, t in out if t is None]
    assert "Beta was changed." in new_texts
    # Unchanged chunks keep their ids (emitted again by default); the changed one is retracted.
    kept = {k for k, t in out if t is not None} & set(first)
    assert {first[k] for k in kept} == {"Alpha one here.", "Gamma three now."}
    assert [first[k] for k in tombstones] == ["Beta two there."]
    # Chunk records first, the state last (written only after they are acknowledged).
    topics = [topic for topic, *_ in sent]
    assert topics[-1] == "chunkstream-document-state-changelog"
    assert set(topics[:-1]) == {"chunks"}
    (_, key, value, partition) = sent[-1]
    assert key == b"d"
    assert partition == 1
    assert decode_state(value).offset == 4


async def test_skip_mode_publishes_only_new_ids(tmp_path: Path) -> None:
    producer = FakeProducer()
    handler = lifecycle_handler(producer, tmp_path, unchanged_chunks="skip")
    await handler.process(record(doc(V1), offset=1, key=b"d"))
    producer.sent.clear()
    await handler.process(record(doc(V2), offset=2, key=b"d"))
    texts = [t for _, t in chunks_of(producer.sent) if t is not None]
    assert texts == ["Beta was changed."]


async def test_tombstones_replays_and_old_versions(tmp_path: Path) -> None:
    producer = FakeProducer()
    handler = lifecycle_handler(producer, tmp_path)
    await handler.process(record(doc(V1, 5), offset=10, key=b"d"))
    ids = [k for k, _ in chunks_of(producer.sent)]
    producer.sent.clear()
    await handler.process(record(doc(V2, 4), offset=11, key=b"d"))  # an older version
    await handler.process(record(doc(V2, 9), offset=9, key=b"d"))  # a replay (offset before)
    assert producer.sent == []
    await handler.process(record(None, offset=12, key=b"d"))  # the tombstone
    out = chunks_of(producer.sent)
    assert out == [(k, None) for k in ids]
    producer.sent.clear()
    await handler.process(record(None, offset=13, key=b"d"))  # deleted already: a no-op
    await handler.process(record(None, offset=14, key=b"never"))  # unknown: a no-op
    assert producer.sent == []


async def test_unkeyed_tombstones_and_mismatched_keys_are_dead_letters(tmp_path: Path) -> None:
    producer = FakeProducer()
    handler = lifecycle_handler(producer, tmp_path)
    await handler.process(record(None, key=None))
    await handler.process(record(doc(V1), key=b"not-d"))
    kinds = [decode_as(v, [], DeadLetterEvent).error_kind for t, _, v, _ in producer.sent]
    assert kinds == ["unkeyed_tombstone", "key_mismatch"]
