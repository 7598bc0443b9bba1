"""Table rows in (worker.wire.rows): a row as Debezium's ExtractNewRecordState leaves it, with
Connect's JsonConverter, becomes the document the mapping names; everything else is a clear
dead letter. The rows here are written as the connector writes them (the recipe's test,
tests/connect/test_table_source.py, reads the real connector's)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from worker.config import load_settings
from worker.errors import (
    ConfigError,
    DocumentTooLarge,
    InvalidUtf8,
    SchemaViolation,
    UnavailableValue,
    Undecodable,
)
from worker.handling.handler import row_mapping
from worker.wire.rows import RowMapping, decode_row

MAPPING = RowMapping(
    id="id", text="body", version="__lsn", content_type="format", metadata=("title", "rank")
)
ROW: dict[str, Any] = {
    "id": 42,
    "title": "Alpha",
    "body": "The first document. It has two sentences.",
    "format": "text/markdown; charset=utf-8",
    "rank": 3,
    "updated_at": "2026-12-06T17:25:55.350141Z",
    "__lsn": 27046664,
}


def decode(row: Any, mapping: RowMapping = MAPPING, headers: Any = ()) -> Any:
    return decode_row(json.dumps(row).encode(), list(headers), mapping, max_bytes=1 << 20)


def test_a_row_becomes_the_document_its_mapping_names() -> None:
    doc = decode(ROW)
    assert doc.id == "42"  # as Connect's StringConverter writes the integer key
    assert doc.text == ROW["body"]
    assert doc.version == "27046664"  # opaque: never compared
    assert doc.content_type == "text/markdown"
    assert doc.metadata == {"title": "Alpha", "rank": 3}


def test_connects_envelope_is_unwrapped() -> None:
    envelope = {"schema": {"type": "struct", "fields": []}, "payload": ROW}
    assert decode(envelope) == decode(ROW)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "text/plain"),
        ("markdown", "text/markdown"),
        ("MD", "text/markdown"),
        ("text/x-markdown", "text/markdown"),
        ("plain", "text/plain"),
        ("txt", "text/plain"),
    ],
)
def test_content_types_by_media_type_or_short_name(value: str | None, expected: str) -> None:
    assert decode({**ROW, "format": value}).content_type == expected


def test_a_row_marked_not_deleted_is_a_row() -> None:
    assert decode({**ROW, "__deleted": "false"}) == decode(ROW)


def test_defaults_are_the_document_fields_names() -> None:
    doc = decode({"id": "a", "text": "Some text."}, RowMapping())
    assert (doc.id, doc.text, doc.content_type, doc.version, doc.metadata) == (
        "a",
        "Some text.",
        "text/plain",
        None,
        {},
    )


@pytest.mark.parametrize("column", ["body", "title", "format", "__lsn"])
def test_an_unavailable_value_is_refused_naming_row_and_column(column: str) -> None:
    with pytest.raises(UnavailableValue, match=f"row '42': column '{column}'"):
        decode({**ROW, column: "__debezium_unavailable_value"})


@pytest.mark.parametrize(
    ("row", "error", "message"),
    [
        (None, Undecodable, "delete-to-tombstone"),
        ({"schema": {"type": "struct"}, "payload": None}, Undecodable, "delete-to-tombstone"),
        ([1, 2], Undecodable, "JSON object"),
        ({**ROW, "__deleted": "true"}, Undecodable, "a rewritten delete"),
        ({**ROW, "body": None}, SchemaViolation, "'body' must be a string"),
        ({k: v for k, v in ROW.items() if k != "body"}, SchemaViolation, "no text column"),
        ({k: v for k, v in ROW.items() if k != "id"}, SchemaViolation, "no id column"),
        ({**ROW, "id": True}, SchemaViolation, "string or an integer"),
        ({**ROW, "id": " "}, SchemaViolation, "blank"),
        ({**ROW, "format": "text/html"}, SchemaViolation, "'format' holds 'text/html'"),
        ({**ROW, "title": {"nested": 1}}, SchemaViolation, "only scalars"),
        ({**ROW, "title": "x" * 5000}, SchemaViolation, "metadata"),
    ],
)
def test_bad_rows_are_refused_with_the_reason(row: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        decode(row)


def test_limits_and_encodings() -> None:
    with pytest.raises(DocumentTooLarge):
        decode_row(json.dumps(ROW).encode(), [], MAPPING, max_bytes=10)
    with pytest.raises(InvalidUtf8):
        decode_row(b'{"id": "a", "body": "\xff"}', [], MAPPING, max_bytes=1 << 20)
    with pytest.raises(Undecodable, match="msgpack"):
        decode(ROW, headers=[("content-type", b"application/msgpack")])
    assert decode(ROW, headers=[("content-type", b"application/json")]).id == "42"


def test_settings_build_the_mapping_and_refuse_a_column_named_twice() -> None:
    env = {
        "CHUNKSTREAM_INPUT_FORMAT": "row",
        "CHUNKSTREAM_ROW_TEXT": "body",
        "CHUNKSTREAM_ROW_VERSION": "__lsn",
        "CHUNKSTREAM_ROW_CONTENT_TYPE": "format",
        "CHUNKSTREAM_ROW_METADATA": "title, rank",
    }
    assert row_mapping(load_settings({}, env=env)) == MAPPING
    assert row_mapping(load_settings({}, env={})) is None
    with pytest.raises(ConfigError, match="CHUNKSTREAM_ROW_VERSION"):
        load_settings({}, env={**env, "CHUNKSTREAM_ROW_VERSION": "body"})
    with pytest.raises(ConfigError, match="CHUNKSTREAM_INPUT_FORMAT"):
        load_settings({}, env={"CHUNKSTREAM_INPUT_FORMAT": "csv"})
