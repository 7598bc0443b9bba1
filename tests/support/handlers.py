"""A document handler over the fake producer, as the handling and lifecycle tests build it,
and the input records they feed it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.fake_kafka import FakeProducer
from worker.chunking import registry
from worker.config import load_settings, state_topic
from worker.handling.handler import DocumentHandler
from worker.handling.resolver import StrategyResolver
from worker.kafka.publisher import Publisher
from worker.observability.metrics import Metrics
from worker.state.changelog import Changelog
from worker.state.documents import DocumentStates
from worker.state.sqlite_store import SqliteStateStore
from worker.state.writing import AppendOnly, StateWrites
from worker.wire.codec import EventEncoder
from worker.wire.records import InputRecord

TEXT = "First sentence here. Second sentence there! A third one? And the fourth."


def handler_for(producer: FakeProducer, **flags: Any) -> tuple[DocumentHandler, Metrics]:
    """An append-only handler (the lifecycle off: worker.state.writing.AppendOnly); a handler
    with the lifecycle is :func:`lifecycle_handler`'s."""
    flags = {"document_lifecycle": "false", **flags}
    settings = load_settings({k: str(v) for k, v in flags.items()}, env={})
    context = registry.BuildContext()
    default = registry.build(settings.strategy, settings.strategy_params, context)
    resolver = StrategyResolver(default, frozenset(settings.allowed_strategies), context)
    publisher = Publisher(
        producer,
        EventEncoder(settings.encoding),
        output_topic=settings.output_topic,
        dlq_topic=settings.dlq_topic,
        max_record_bytes=settings.max_record_bytes,
    )
    metrics = Metrics()
    writes = AppendOnly(publisher, settings.documents_topic)
    return DocumentHandler(settings, resolver, publisher, metrics, None, writes), metrics


def record(value: bytes | None, offset: int = 7, key: bytes | None = b"k") -> InputRecord:
    return InputRecord(
        topic="documents",
        partition=1,
        offset=offset,
        key=key,
        value=value,
        headers=[],
        timestamp_ms=0,
    )


STATE_TOPIC = "chunkstream-document-state-changelog"


def lifecycle_handler(producer: FakeProducer, tmp: Path, **flags: Any) -> DocumentHandler:
    settings = load_settings(
        {"strategy_params": "chunk_size=20", **{k: str(v) for k, v in flags.items()}}, env={}
    )
    context = registry.BuildContext()
    default = registry.build(settings.strategy, settings.strategy_params, context)
    resolver = StrategyResolver(default, frozenset(), context)
    publisher = Publisher(
        producer,
        EventEncoder("msgpack"),
        output_topic=settings.output_topic,
        dlq_topic=settings.dlq_topic,
        max_record_bytes=settings.max_record_bytes,
    )
    store = SqliteStateStore(tmp / "state.sqlite")
    changelog = Changelog(None, state_topic(settings), store)
    metrics = Metrics()
    states = DocumentStates(
        store, publisher, changelog, metrics, documents_topic=settings.documents_topic
    )
    writes = StateWrites(states, publisher, metrics)
    return DocumentHandler(settings, resolver, publisher, metrics, None, writes)


def states_of(handler: DocumentHandler) -> DocumentStates:
    """The document states a lifecycle handler writes through."""
    writes = handler._writes
    assert isinstance(writes, StateWrites)
    return writes.states
