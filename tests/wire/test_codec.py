"""Decoding input records: every bad input is a typed DocumentError, never a crash."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.errors import (
    DocumentError,
    DocumentTooLarge,
    HeadersTooLarge,
    InvalidUtf8,
    SchemaViolation,
    Undecodable,
)
from worker.wire.codec import Encoding, EventEncoder, decode_as, decode_document, sniff
from worker.wire.events import ChunkEvent, DocumentEvent

JSON = [("content-type", b"application/json")]
MSGPACK = [("content-type", b"application/msgpack")]
LIMIT = 10_000


def test_round_trip_both_encodings_and_sniffing() -> None:
    doc = DocumentEvent(id="d1", text="Hello.", metadata={"k": 1, "x": None}, version=3)
    encodings: tuple[Encoding, ...] = ("json", "msgpack")
    for encoding in encodings:
        enc = EventEncoder(encoding)
        value = enc.encode(doc)
        assert decode_document(value, enc.headers(), max_bytes=LIMIT) == doc
        assert decode_document(value, [], max_bytes=LIMIT) == doc  # sniffed
        assert sniff(value) == encoding


def test_unknown_fields_are_ignored_for_forward_compatibility() -> None:
    value = b'{"id": "a", "text": "t", "added_in_v2": {"deep": [1, 2]}}'
    assert decode_document(value, JSON, max_bytes=LIMIT).id == "a"


@pytest.mark.parametrize(
    ("value", "headers", "error", "needle"),
    [
        (None, [], Undecodable, "empty"),
        (b"", JSON, Undecodable, "empty"),
        (b"\x00\x01garbage", [], Undecodable, "neither"),
        (b'{"id": "a", "text": "t"}', [("content-type", b"text/csv")], Undecodable, "text/csv"),
        (b'{"id": "a"', JSON, Undecodable, "json"),
        (b'{"text": "t"}', JSON, SchemaViolation, "`id`"),
        (b'{"id": 4, "text": "t"}', JSON, SchemaViolation, "$.id"),
        (b'{"id": "", "text": "t"}', JSON, SchemaViolation, "$.id"),
        (b'{"id": "  ", "text": "t"}', JSON, SchemaViolation, "blank"),
        (
            b'{"id": "a", "text": "t", "content_type": "text/html"}',
            JSON,
            SchemaViolation,
            "content_type",
        ),
        (b'{"id": "a", "text": "t", "metadata": {"k": [1]}}', JSON, SchemaViolation, "metadata"),
        (b'{"id": "a", "text": "\xff"}', JSON, InvalidUtf8, "UTF-8"),
        (b"\x82\xa2id\xa1a\xa4text\xa2\xff\xfe", MSGPACK, InvalidUtf8, "UTF-8"),
        (b"x" * (LIMIT + 1), JSON, DocumentTooLarge, "limit"),
    ],
)
def test_bad_records_map_to_stable_kinds(
    value: bytes | None, headers: list[tuple[str, bytes]], error: type[DocumentError], needle: str
) -> None:
    with pytest.raises(error) as info:
        decode_document(value, headers, max_bytes=LIMIT)
    assert needle in str(info.value)


def test_metadata_and_header_limits() -> None:
    too_many = {f"k{i}": i for i in range(65)}
    value = msgspec.json.encode({"id": "a", "text": "t", "metadata": too_many})
    with pytest.raises(SchemaViolation):
        decode_document(value, JSON, max_bytes=LIMIT)
    headers = [("h", b"v")] * 65
    with pytest.raises(HeadersTooLarge):
        decode_document(b'{"id": "a", "text": "t"}', headers, max_bytes=LIMIT)
    with pytest.raises(HeadersTooLarge):
        decode_document(b'{"id": "a", "text": "t"}', [("h", b"v" * 70_000)], max_bytes=LIMIT)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([[], JSON, MSGPACK]))
def test_arbitrary_bytes_never_escape_as_other_errors(
    value: bytes, headers: list[tuple[str, bytes]]
) -> None:
    try:
        doc = decode_document(value, headers, max_bytes=LIMIT)
    except DocumentError:
        return
    assert isinstance(doc, DocumentEvent)
    assert doc.id.strip()


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["id", "text", "metadata", "version", "strategy", "content_type", "x"]),
        json_values,
    ),
    st.sampled_from(["json", "msgpack"]),
)
def test_arbitrary_structures_decode_or_fail_typed(obj: dict[str, object], encoding: str) -> None:
    value = msgspec.json.encode(obj) if encoding == "json" else msgspec.msgpack.encode(obj)
    try:
        doc = decode_document(value, [], max_bytes=LIMIT)
    except DocumentError as error:
        assert error.kind in ("schema_violation", "undecodable", "invalid_utf8")  # noqa: PT017
        return
    # Accepted only when the required fields really are there with the right types.
    assert obj["id"] == doc.id
    assert obj["text"] == doc.text


def test_chunk_events_decode_for_readers() -> None:
    with pytest.raises(SchemaViolation):
        decode_as(b'{"chunk_id": 1}', JSON, ChunkEvent)


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_floats_are_refused(bad: float) -> None:
    value = msgspec.msgpack.encode({"id": "a", "text": "t", "metadata": {"score": bad}})
    with pytest.raises(SchemaViolation):
        decode_document(value, [], max_bytes=LIMIT)
    params = {"id": "a", "text": "t", "strategy": {"name": "sentence", "params": {"x": bad}}}
    with pytest.raises(SchemaViolation):
        decode_document(msgspec.msgpack.encode(params), [], max_bytes=LIMIT)
