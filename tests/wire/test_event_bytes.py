"""The worker's chunk-event bytes (worker.wire.event_bytes) against the definition: every event of
tests/support/reference_events.chunk_events encoded by the EventEncoder
(tests/support/reference_events.ReferenceEventWriter).

Byte for byte, in msgpack and JSON, with and without embeddings, spans, strategy and document
metadata, versions, sources and languages; and through DocumentHandler: the same records
(topic, partition, key, value, headers, order) with either writer, trace context and
forwarded headers included, for new documents and for an edit that retracts chunks.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import Any
from unittest import mock

import msgpack
import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fake_kafka import FakeProducer
from tests.support.handlers import handler_for, lifecycle_handler, record
from tests.support.reference_events import ReferenceEventWriter
from worker.chunking.types import Chunk, Span
from worker.handling import handler as document
from worker.wire.codec import Encoding, decode_as
from worker.wire.event_bytes import ChunkEventWriter
from worker.wire.events import ChunkEvent, DocumentEvent, SourceRecord
from worker.wire.records import chunk_ids
from worker.wire.tracecontext import HeaderPropagation

NOW = dt.datetime(2026, 12, 1, 1, 2, 3, 456789, tzinfo=dt.UTC)
ENCODINGS: tuple[Encoding, ...] = ("msgpack", "json", "connect-json")

texts = st.text(max_size=60)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
keys = st.sampled_from(["tenant", "lang", "chunk_index", "heading", "é", "k"]) | st.text(
    min_size=1, max_size=8
)
doc_metadata = st.dictionaries(keys, scalars, max_size=5)
# Strategy metadata is JSON-shaped: nested lists and maps too.
strategy_metadata = st.dictionaries(
    keys, st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=4), max_size=3
)


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    doc = DocumentEvent(
        id=draw(st.text(min_size=1, max_size=40)),
        text="",
        version=draw(st.none() | st.integers(-(2**63), 2**63 - 1) | texts),
        source=draw(st.none() | texts),
        language=draw(st.none() | st.sampled_from(["en", "ar", "zh-Hant"])),
        metadata=draw(doc_metadata),
    )
    count = draw(st.integers(0, 6))
    chunks = []
    for _ in range(count):
        start = draw(st.integers(0, 10**9))
        spans = draw(
            st.none()
            | st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), max_size=3)
        )
        chunks.append(
            Chunk(
                text=draw(texts | st.sampled_from(["same text", "same text"])),
                start_index=start,
                end_index=start + draw(st.integers(0, 5000)),
                token_count=draw(st.integers(0, 2**40)),
                strategy="x",
                metadata=draw(strategy_metadata),
                spans=None if spans is None else tuple(Span(a, b) for a, b in spans),
            )
        )
    indexes = (
        None if draw(st.booleans()) else sorted(draw(st.sets(st.integers(0, max(0, count - 1)))))
    )
    if indexes is not None:
        indexes = [i for i in indexes if i < count]
    chosen = count if indexes is None else len(indexes)
    embeddings = None
    if draw(st.booleans()):
        rows = draw(st.lists(st.floats(-2, 2, width=32), min_size=chosen * 4, max_size=chosen * 4))
        embeddings = np.array(rows, dtype=np.float32).reshape(chosen, 4)
    return {
        "doc": doc,
        "source": SourceRecord(
            draw(st.text(min_size=1, max_size=20)),
            draw(st.integers(0, 10**4)),
            draw(st.integers(0, 2**62)),
        ),
        "strategy_name": draw(st.sampled_from(["sentence", "adaptive", "context"])),
        "chunks": chunks,
        "now": draw(st.datetimes(timezones=st.just(dt.UTC))),
        "ids": chunk_ids(doc.id, "fp", [c.text for c in chunks]),
        "indexes": indexes,
        "embeddings": embeddings,
        "embedding_model": draw(st.none() | st.just("static:abc123")),
    }


@pytest.mark.parametrize("encoding", ENCODINGS)
@settings(max_examples=300, deadline=None)
@given(case=documents())
def test_the_writer_gives_the_bytes_of_the_encoded_reference_events(
    encoding: Encoding, case: dict[str, Any]
) -> None:
    args = dict(case)
    positional = [args.pop(n) for n in ("doc", "source", "strategy_name", "chunks", "now")]
    expected = ReferenceEventWriter(encoding).values(*positional, **args)
    assert ChunkEventWriter(encoding).values(*positional, **args) == expected


def test_an_event_decodes_with_an_independent_reader_to_the_chunk_it_came_from() -> None:
    """Independent of both writers: the msgpack library reads the bytes as a map of every
    ChunkEvent field, in declaration order, with the chunk's and the document's values."""
    doc = DocumentEvent(id="d", text="", version=3, metadata={"tenant": "t", "lang": "en"})
    chunks = [
        Chunk("one", 0, 3, 1, "s", metadata={"lang": "xx", "heading": "H"}),
        Chunk("two\nfour", 4, 12, 2, "s", spans=(Span(4, 7), Span(8, 12))),
    ]
    vectors = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    values = ChunkEventWriter("msgpack").values(
        doc,
        SourceRecord("in", 2, 99),
        "sentence",
        chunks,
        NOW,
        ids=["a" * 32, "b" * 32],
        embeddings=vectors,
        embedding_model="static:m",
    )
    first = msgpack.unpackb(values[0], timestamp=3)
    assert list(first) == list(ChunkEvent.__struct_fields__)
    assert first["chunk_id"] == "a" * 32
    assert first["doc_version"] == "3"
    assert (first["index"], first["count"], first["text"]) == (0, 2, "one")
    # Strategy keys first, the document's win (and keep the strategy key's place).
    assert list(first["metadata"].items()) == [("lang", "en"), ("heading", "H"), ("tenant", "t")]
    assert first["source"] == {"topic": "in", "partition": 2, "offset": 99}
    assert first["produced_at"] == NOW
    assert first["embedding"] == np.array([1.0, 0.0], "<f4").tobytes()
    assert first["embedding_model"] == "static:m"
    second = msgspec.json.decode(
        ChunkEventWriter("json").values(
            doc, SourceRecord("in", 2, 99), "sentence", chunks, NOW, ids=["a" * 32, "b" * 32]
        )[1]
    )
    assert second["spans"] == [{"start": 4, "end": 7}, {"start": 8, "end": 12}]
    assert second["embedding"] is None
    assert second["embedding_model"] is None
    assert second["metadata"] == {"tenant": "t", "lang": "en"}


class _FrozenClock:
    """worker.handling.handler's ``dt`` with ``datetime.now`` fixed, so two passes stamp alike."""

    UTC = dt.UTC

    class datetime(dt.datetime):
        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> dt.datetime:  # type: ignore[override]
            return NOW


def _same_spans(handler: document.DocumentHandler, forward: tuple[str, ...]) -> None:
    handler._propagation = HeaderPropagation(forward, span_ids=lambda: 0x00F067AA0BA902B7)


async def _vectors(texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
    return np.array([[len(t), 1.0, -0.5] for t in texts], dtype=np.float32)


PARAMS = {"sentence": "chunk_size=40", "adaptive": "base_size=24,min_size=8,max_size=48,overlap=4"}
INPUT_HEADERS = [
    ("traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    ("tracestate", b"congo=t61rcWkgMzE"),
    ("x-tenant", b"acme"),
]


async def _sent(
    writer: str, encoding: Encoding, embeddings: bool, strategy: str
) -> tuple[list[Any], list[Any]]:
    producer = FakeProducer()
    handler, _ = handler_for(
        producer,
        encoding=encoding,
        strategy=strategy,
        strategy_params=PARAMS[strategy],
        forward_headers="x-tenant",
        include_embeddings=str(embeddings).lower(),
    )
    _same_spans(handler, ("x-tenant",))
    if embeddings:
        handler._retrieval = _vectors
        handler._retrieval_label = "static:fake"
    if writer == "reference":
        handler._writer = ReferenceEventWriter(encoding)  # type: ignore[assignment]
    text = "Alpha one here. Beta two there! Gamma three now? Delta four. " * 3
    doc = DocumentEvent(
        id="doc-1", text=text, version=7, source="s3://b/k", language="en", metadata={"t": 1}
    )
    rec = record(msgspec.msgpack.encode(doc), offset=41, key=b"doc-1")
    with mock.patch.object(document, "dt", _FrozenClock):
        await handler.process(dataclasses.replace(rec, headers=INPUT_HEADERS))
    return producer.sent, producer.headers


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("embeddings", [False, True])
@pytest.mark.parametrize("strategy", ["sentence", "adaptive"])
async def test_the_handler_publishes_the_same_records_with_either_writer(
    encoding: Encoding, embeddings: bool, strategy: str
) -> None:
    fast, fast_headers = await _sent("fast", encoding, embeddings, strategy)
    reference, reference_headers = await _sent("reference", encoding, embeddings, strategy)
    assert len(fast) > 1
    assert fast == reference
    assert fast_headers == reference_headers
    assert ("traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") in (
        fast_headers[0]
    )
    event = decode_as(fast[0][2], fast_headers[0], ChunkEvent)
    assert (event.embedding is not None) is embeddings


async def test_an_edit_retracts_and_republishes_the_same_records_with_either_writer(
    tmp_path: Any,
) -> None:
    runs = []
    for writer in ("fast", "reference"):
        producer = FakeProducer()
        (tmp_path / writer).mkdir()
        handler = lifecycle_handler(producer, tmp_path / writer)
        _same_spans(handler, ())
        if writer == "reference":
            handler._writer = ReferenceEventWriter("msgpack")  # type: ignore[assignment]
        with mock.patch.object(document, "dt", _FrozenClock):
            for offset, text in enumerate(["One. Two. Three.", "One. Deux. Three. Four."]):
                value = msgspec.msgpack.encode(DocumentEvent(id="d", text=text, version=offset))
                rec = record(value, offset=offset, key=b"d")
                rec = dataclasses.replace(rec, headers=INPUT_HEADERS)
                await handler.process(rec)
        runs.append((producer.sent, producer.headers))
    assert runs[0] == runs[1]
    assert any(value is None for _, _, value, _ in runs[0][0])  # a retraction happened
