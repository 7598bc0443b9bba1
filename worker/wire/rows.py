"""Table rows in: one input record is one row of a table, mapped onto a :class:`DocumentEvent`.

What Debezium's PostgreSQL source writes after its stock ``ExtractNewRecordState`` transform,
with Connect's ``JsonConverter``: the row's columns as one flat JSON object (with
``schemas.enable=true`` inside Connect's ``{"schema": ..., "payload": ...}`` envelope, which is
unwrapped here). A :class:`RowMapping` names the columns that become the document's fields, so
a user maps their own table with settings instead of a custom transform
(docs/operating/from-a-table.md):

- the id column: a string, or an integer written as its decimal text (what Connect's
  ``StringConverter`` makes of an integer key, so the key and the id agree);
- the text column;
- the version column, always taken as an opaque string: in a change stream the topic's order is
  the commit order, and an integer comparison would only add the way to lose edits when a
  restored database's values (its WAL positions, say) restart lower;
- the content-type column (a media type or a short name, null = plain text);
- the metadata columns, copied under their own names (scalars only, the metadata limits apply).

A mapped column holding Debezium's placeholder for a value the event did not carry (an unchanged
TOASTed column, ``__debezium_unavailable_value``) is :class:`UnavailableValue`: chunking the
placeholder would retract the real chunks, so the record is dead-lettered instead and the
document's chunks stay. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

import msgspec

from worker.errors import (
    DocumentTooLarge,
    InvalidUtf8,
    SchemaViolation,
    UnavailableValue,
    Undecodable,
)
from worker.wire.codec import Headers, check_headers, encoding_from_headers
from worker.wire.events import DocumentEvent

_CONTENT_TYPES = {
    "text/markdown": "text/markdown",
    "text/x-markdown": "text/markdown",
    "markdown": "text/markdown",
    "md": "text/markdown",
    "text/plain": "text/plain",
    "plain": "text/plain",
    "text": "text/plain",
    "txt": "text/plain",
}
_SCALARS = (str, int, float, bool, type(None))
# The field ExtractNewRecordState adds in its `rewrite` delete modes.
_DELETED_FIELD = "__deleted"
_json_encoder = msgspec.json.Encoder()


def _json(value: Any) -> str:
    return _json_encoder.encode(value).decode()


class RowMapping(msgspec.Struct, frozen=True):
    """Which columns of a row are the document's fields (the worker's ``row_*`` settings)."""

    id: str = "id"
    text: str = "text"
    version: str | None = None
    content_type: str | None = None
    metadata: tuple[str, ...] = ()
    unavailable_value: str = "__debezium_unavailable_value"


def _unwrap(value: bytes) -> dict[str, Any]:
    try:
        row = msgspec.json.decode(value)
    except msgspec.DecodeError as exc:
        if "UTF-8" in str(exc):
            raise InvalidUtf8(f"json: {exc}") from None
        raise Undecodable(f"a row must be a JSON object: {exc}") from None
    if (
        isinstance(row, dict)
        and row.keys() == {"schema", "payload"}
        and isinstance(row["schema"], dict)
    ):
        row = row["payload"]  # Connect's envelope (JsonConverter with schemas.enable=true)
    if row is None:
        # What ExtractNewRecordState's default delete handling leaves: a schema and a null
        # value, not a tombstone (the connector needs delete.tombstone.handling.mode).
        raise Undecodable(
            "a row that is null: a delete that is not a tombstone; set "
            "delete.tombstone.handling.mode=delete-to-tombstone on ExtractNewRecordState"
        )
    if not isinstance(row, dict):
        raise Undecodable(f"a row must be a JSON object, not {type(row).__name__}")
    if row.get(_DELETED_FIELD) in ("true", True):
        # ExtractNewRecordState's `rewrite` modes: the deleted row itself, marked. Chunked, it
        # would bring the row back into the index.
        raise Undecodable(
            f"a row marked {_DELETED_FIELD}=true (a rewritten delete): set "
            "delete.tombstone.handling.mode=delete-to-tombstone on ExtractNewRecordState"
        )
    return row


def _column(row: dict[str, Any], column: str, mapping: RowMapping, doc_id: str = "") -> Any:
    value = row.get(column)
    if value == mapping.unavailable_value:
        of_row = f"row {doc_id[:200]!r}: " if doc_id else ""
        raise UnavailableValue(
            f"{of_row}column {column!r} holds {mapping.unavailable_value!r}: the change event "
            "did not carry its value (an unchanged TOASTed column; give the table REPLICA "
            "IDENTITY FULL or the connector the reselect post-processor); the document's chunks "
            "stay"
        )
    return value


def _document_id(value: Any, column: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise SchemaViolation(f"the id column {column!r} must be a string or an integer")
    return value if isinstance(value, str) else str(value)


def _content_type(value: Any, column: str) -> str:
    if value is None:
        return "text/plain"
    if isinstance(value, str):
        media_type = value.split(";", 1)[0].strip().lower()
        known = _CONTENT_TYPES.get(media_type)
        if known is not None:
            return known
    raise SchemaViolation(
        f"the content-type column {column!r} holds {str(value)[:100]!r}: expected text/plain "
        "or text/markdown (or plain, text, markdown, md)"
    )


def row_document(row: dict[str, Any], mapping: RowMapping) -> DocumentEvent:
    """The document one row stands for; every failure is a :class:`DocumentError`."""
    if mapping.id not in row:
        raise SchemaViolation(f"the row has no id column {mapping.id!r}")
    if mapping.text not in row:
        raise SchemaViolation(f"the row has no text column {mapping.text!r}")
    doc_id = _document_id(_column(row, mapping.id, mapping), mapping.id)
    text = _column(row, mapping.text, mapping, doc_id)
    if not isinstance(text, str):
        raise SchemaViolation(f"the text column {mapping.text!r} must be a string")
    fields: dict[str, Any] = {"id": doc_id, "text": text}
    if mapping.version is not None:
        version = _column(row, mapping.version, mapping, doc_id)
        if version is not None:
            text_version = version if isinstance(version, str) else _json(version)
            fields["version"] = text_version
    if mapping.content_type is not None:
        value = _column(row, mapping.content_type, mapping, doc_id)
        fields["content_type"] = _content_type(value, mapping.content_type)
    metadata: dict[str, Any] = {}
    for column in mapping.metadata:
        value = _column(row, column, mapping, doc_id)
        if not isinstance(value, _SCALARS):
            raise SchemaViolation(
                f"the metadata column {column!r} holds a {type(value).__name__}: only scalars "
                "travel as metadata"
            )
        metadata[column] = value
    if metadata:
        fields["metadata"] = metadata
    try:
        return msgspec.convert(fields, DocumentEvent)
    except msgspec.ValidationError as exc:
        raise SchemaViolation(f"the mapped row: {exc}") from None


def decode_row(
    value: bytes | None, headers: Headers, mapping: RowMapping, *, max_bytes: int
) -> DocumentEvent:
    """Decode one row record (JSON, optionally in Connect's envelope) into its document.
    Limits are checked before any parsing work, as for documents."""
    check_headers(headers)
    if value is not None and len(value) > max_bytes:
        raise DocumentTooLarge(f"record value is {len(value)} bytes (limit {max_bytes})")
    if not value:
        raise Undecodable("empty record value (a tombstone or an empty message)")
    encoding = encoding_from_headers(headers)
    if encoding not in (None, "json"):
        raise Undecodable(f"a row is JSON; the record's content-type header says {encoding}")
    doc = row_document(_unwrap(value), mapping)
    if not doc.id.strip():
        raise SchemaViolation(f"the id column {mapping.id!r} is blank")
    return doc
