"""Decoder and input-pipeline fuzzing, beyond tests/wire/test_codec.py (which feeds arbitrary
bytes and loose JSON structures to the decoder): valid documents round-trip in both
encodings; mutated encodings, arbitrary headers and arbitrary document-shaped structures
either decode or fail with a DocumentError; and whatever decodes goes through the rest of the
worker's pipeline (strategy resolution, chunking, chunk events, encoding) with no other
error escaping. That last property is what an attacker writing to the input topic meets."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from tests.support.fuzz_profile import FUZZ
from tests.support.reference_events import chunk_events
from worker.chunking import registry
from worker.chunking.types import RuleChunker
from worker.errors import DocumentError
from worker.handling.resolver import StrategyResolver
from worker.wire.codec import Encoding, EventEncoder, decode_as, decode_document
from worker.wire.events import (
    MAX_METADATA_ENTRIES,
    ChunkEvent,
    DocumentEvent,
    StrategyOverride,
)
from worker.wire.records import InputRecord

LIMIT = 64 * 1024
INT64 = st.integers(-(2**63), 2**63 - 1)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    INT64,
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
documents = st.builds(
    DocumentEvent,
    id=st.text(min_size=1, max_size=40).filter(str.strip),
    text=st.text(max_size=600),
    content_type=st.sampled_from(["text/plain", "text/markdown"]),
    version=st.one_of(st.none(), INT64, st.text(max_size=20)),
    source=st.one_of(st.none(), st.text(max_size=40)),
    metadata=st.dictionaries(
        st.text(min_size=1, max_size=20), scalars, max_size=MAX_METADATA_ENTRIES
    ),
    strategy=st.one_of(
        st.none(),
        st.builds(
            StrategyOverride,
            name=st.sampled_from([*registry.names(), "nope"]),
            params=st.dictionaries(
                st.sampled_from(["chunk_size", "max_size", "min_size", "overlap", "x"]),
                st.one_of(
                    st.integers(-5, 5000),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=8),
                ),
                max_size=3,
            ),
        ),
    ),
)
ENCODINGS = st.sampled_from(["json", "msgpack"])


def _resolver() -> StrategyResolver:
    default = registry.build("sentence", {"chunk_size": 200})
    return StrategyResolver(default, frozenset({"*"}), registry.BuildContext())


RESOLVER = _resolver()
RECORD = InputRecord("documents", 0, 7, b"k", b"", [], 0)


def pipeline(value: bytes, headers: list[tuple[str, bytes | None]]) -> None:
    """decode → resolve → chunk → chunk events → encode; only DocumentError may escape."""
    try:
        doc = decode_document(value, headers, max_bytes=LIMIT)
        built = RESOLVER.resolve(doc)
    except DocumentError:
        return
    if not isinstance(built.chunker, RuleChunker):
        return  # embedding strategies are fuzzed in test_fuzz_strategies.py
    chunks = built.chunker.chunk(doc.text, content_type=doc.content_type)
    now = dt.datetime.now(dt.UTC)
    events = chunk_events(doc, RECORD, built.name, built.fingerprint, chunks, now)
    for encoding in ("msgpack", "json"):
        encoder = EventEncoder(encoding)
        for event in events:
            again = decode_as(encoder.encode(event), encoder.headers(), ChunkEvent)
            assert again.chunk_id == event.chunk_id


@FUZZ
@given(documents, ENCODINGS)
def test_valid_documents_round_trip(doc: DocumentEvent, encoding: Encoding) -> None:
    encoder = EventEncoder(encoding)
    value = encoder.encode(doc)
    assert decode_document(value, encoder.headers(), max_bytes=10 * LIMIT) == doc
    assert decode_document(value, [], max_bytes=10 * LIMIT) == doc  # sniffed


@FUZZ
@given(documents, ENCODINGS, st.data())
def test_mutated_encodings_decode_or_fail_typed(
    doc: DocumentEvent, encoding: str, data: st.DataObject
) -> None:
    value = bytearray(EventEncoder(encoding).encode(doc))  # type: ignore[arg-type]
    for _ in range(data.draw(st.integers(1, 6))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        at = data.draw(st.integers(0, max(0, len(value) - 1)))
        if op == "flip" and value:
            value[at] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "cut":
            del value[at:]
        elif op == "insert":
            value[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        elif value:
            del value[at]
    headers: list[tuple[str, bytes | None]] = data.draw(
        st.sampled_from([[], [("content-type", b"application/" + encoding.encode())]])
    )
    pipeline(bytes(value), headers)


@FUZZ
@given(
    documents,
    ENCODINGS,
    st.lists(
        st.tuples(
            st.one_of(st.sampled_from(["content-type", "Content-Type"]), st.text(max_size=20)),
            st.one_of(st.none(), st.binary(max_size=64), st.sampled_from(
                [b"application/json", b"application/msgpack; charset=x", b"\xff\xfe", b""]
            )),
        ),
        max_size=80,
    ),
)  # fmt: skip
def test_arbitrary_headers_never_escape_untyped(
    doc: DocumentEvent, encoding: str, headers: list[tuple[str, bytes | None]]
) -> None:
    pipeline(EventEncoder(encoding).encode(doc), headers)  # type: ignore[arg-type]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=25,
)
shaped = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(st.text(max_size=20), json_values),
        "text": st.one_of(st.text(max_size=300), json_values),
        "content_type": st.one_of(st.sampled_from(["text/plain", "text/markdown"]), json_values),
        "version": json_values,
        "metadata": st.one_of(st.dictionaries(st.text(max_size=10), json_values), json_values),
        "strategy": st.one_of(
            st.fixed_dictionaries(
                {"name": st.sampled_from([*registry.names(), ""])},
                optional={"params": st.dictionaries(st.text(max_size=12), json_values)},
            ),
            json_values,
        ),
    },
)


@FUZZ
@given(shaped, ENCODINGS)
def test_document_shaped_structures_never_escape_untyped(
    obj: dict[str, Any], encoding: str
) -> None:
    # Unbounded integers and non-finite floats included: JSON allows the first, msgpack the
    # second (the int64 bound on input integers was found this way, in the fault suite).
    try:
        value = msgspec.json.encode(obj) if encoding == "json" else msgspec.msgpack.encode(obj)
    except (OverflowError, ValueError):
        return  # not representable in this encoding: no producer can send it
    pipeline(value, [])
