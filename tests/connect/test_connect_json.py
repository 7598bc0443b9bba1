"""The connect-json encoding (worker.wire.connect_json) without a broker: every record is a
Kafka Connect envelope whose payload conforms to its schema, by a conformance check written
here from Connect's type rules (not from the encoder's); the events come back from it; the
vector is the model's float32 values exactly; documents refuse it. The real JsonConverter and
a real JDBC sink read it in tests/connect/test_pgvector_sink.py."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from worker.config import load_settings
from worker.errors import ConfigError, Undecodable
from worker.wire import schema
from worker.wire.codec import EventEncoder, decode_as, decode_document
from worker.wire.events import (
    ChunkEvent,
    ChunkSpan,
    DeadLetterEvent,
    DocumentChunksEvent,
    RecordHeader,
    SourceRecord,
)

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
NOW = dt.datetime(2026, 12, 3, 10, 11, 12, 345678, tzinfo=dt.UTC)
SOURCE = SourceRecord("documents", 2, 41)
VECTOR = (np.random.default_rng(7).standard_normal(384) / 20).astype("<f4")


def chunk_event(**changes: Any) -> ChunkEvent:
    event = ChunkEvent(
        chunk_id="0f" * 16,
        doc_id="doc-1",
        doc_version="3",
        index=1,
        count=4,
        text="Kafka keeps the last record of each key.",
        start_index=120,
        end_index=160,
        token_count=9,
        strategy="sentence",
        metadata={"tenant": "acme", "heading": ["Intro", "Keys"], "score": 0.5, "n": 2**60},
        source=SOURCE,
        produced_at=NOW,
    )
    return msgspec.structs.replace(event, **changes)


EVENTS: list[msgspec.Struct] = [
    chunk_event(),
    chunk_event(doc_version=None, metadata={}, language="en", doc_source="s3://a/b.md"),
    chunk_event(spans=[ChunkSpan(0, 3), ChunkSpan(9, 20)]),
    chunk_event(embedding=VECTOR.tobytes(), embedding_model="static:abc"),
    DeadLetterEvent(
        error_kind="schema_violation",
        error_message="`id` is blank",
        source=SOURCE,
        value=b"\x00\xff not json",
        key=None,
        headers=[RecordHeader("traceparent", b"00-ab"), RecordHeader("empty", None)],
        worker_version="1.2.3",
        failed_at=NOW,
        doc_id="doc-9",
    ),
    DocumentChunksEvent(
        doc_id="doc-1",
        doc_version=None,
        chunk_ids=["a" * 32, "b" * 32],
        strategy="sentence",
        source=SOURCE,
        produced_at=NOW,
    ),
]

_INT64 = range(-(2**63), 2**63)


def conforms(schema_: dict[str, Any], value: Any, where: str) -> None:
    """Connect's JsonConverter rules for the types we use, with the logical names' meaning."""
    if value is None:
        assert schema_["optional"], f"{where}: null in a required field"
        return
    kind, name = schema_["type"], schema_.get("name")
    if kind == "string":
        assert isinstance(value, str), where
        if name == "io.debezium.data.Json":
            json.loads(value)
    elif kind == "int64":
        assert isinstance(value, int), where
        assert not isinstance(value, bool), where
        assert value in _INT64, where
        if name == "org.apache.kafka.connect.data.Timestamp":
            assert abs(value - NOW.timestamp() * 1000) < 1, where
    elif kind == "double":  # JsonConverter's name of FLOAT64
        assert isinstance(value, (int, float)), where
        assert not isinstance(value, bool), where
    elif kind == "boolean":
        assert isinstance(value, bool), where
    elif kind == "bytes":
        assert isinstance(value, str), where
        base64.b64decode(value, validate=True)
    elif kind == "array":
        assert isinstance(value, list), where
        for i, item in enumerate(value):
            conforms(schema_["items"], item, f"{where}[{i}]")
    elif kind == "struct":
        assert isinstance(value, dict), where
        assert list(value) == [f["field"] for f in schema_["fields"]], where
        for f in schema_["fields"]:
            conforms(f, value[f["field"]], f"{where}.{f['field']}")
    else:
        raise AssertionError(f"{where}: type {kind} is not one we write")


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_each_record_is_an_envelope_whose_payload_conforms_to_its_schema(
    event: msgspec.Struct,
) -> None:
    value = EventEncoder("connect-json").encode(event)
    envelope = json.loads(value)
    assert list(envelope) == ["schema", "payload"]
    top = envelope["schema"]
    assert top["type"] == "struct"
    assert top["optional"] is False
    assert top["name"] == f"chunkstream.{type(event).__name__}"
    # Every field of the event, in its order, and nothing else.
    assert [f["field"] for f in top["fields"]] == list(type(event).__struct_encode_fields__)
    conforms(top, envelope["payload"], type(event).__name__)
    # The committed schemas/ file is the envelope's schema part.
    file_name = schema.CONNECT_SCHEMA_FILES[type(event).__name__]
    committed = json.loads((SCHEMAS / file_name).read_text())
    assert committed == top


def test_the_vector_is_a_double_vector_of_the_exact_float32_values() -> None:
    event = chunk_event(embedding=VECTOR.tobytes())
    envelope = json.loads(EventEncoder("connect-json").encode(event))
    field = next(f for f in envelope["schema"]["fields"] if f["field"] == "embedding")
    # Debezium's JDBC sink binds DoubleVector as pgvector's `vector` (FloatVector would be
    # `halfvec`, 16-bit).
    assert field["name"] == "io.debezium.data.DoubleVector"
    floats = envelope["payload"]["embedding"]
    assert len(floats) == 384
    assert np.array_equal(np.asarray(floats, dtype=np.float64).astype(np.float32), VECTOR)
    assert np.array_equal(np.asarray(floats, dtype=np.float64), VECTOR.astype(np.float64))


def test_nested_values_are_json_text_columns_and_times_epoch_milliseconds() -> None:
    event = chunk_event(spans=[ChunkSpan(0, 3)])
    payload = json.loads(EventEncoder("connect-json").encode(event))["payload"]
    assert json.loads(payload["metadata"]) == event.metadata
    assert json.loads(payload["spans"]) == [{"start": 0, "end": 3}]
    assert payload["produced_at"] == 1796292672345  # 2026-12-03T10:11:12.345Z
    assert payload["source"] == {"topic": "documents", "partition": 2, "offset": 41}


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_events_come_back_from_their_envelope(event: msgspec.Struct) -> None:
    encoder = EventEncoder("connect-json")
    back = decode_as(encoder.encode(event), encoder.headers(), type(event))
    # Connect's timestamps are milliseconds: the microseconds are the only thing lost.
    time_field = "failed_at" if isinstance(event, DeadLetterEvent) else "produced_at"
    truncated = NOW.replace(microsecond=NOW.microsecond // 1000 * 1000)
    assert back == msgspec.structs.replace(event, **{time_field: truncated})


def test_documents_in_connect_json_are_refused_with_the_reason() -> None:
    value = EventEncoder("connect-json").encode(chunk_event())
    with pytest.raises(Undecodable, match="output encoding"):
        decode_document(value, EventEncoder("connect-json").headers(), max_bytes=1 << 20)


def test_the_setting_accepts_connect_json_and_names_the_field_otherwise() -> None:
    assert load_settings(env={"CHUNKSTREAM_ENCODING": "connect-json"}).encoding == "connect-json"
    with pytest.raises(ConfigError, match="CHUNKSTREAM_ENCODING"):
        load_settings(env={"CHUNKSTREAM_ENCODING": "connect"})
