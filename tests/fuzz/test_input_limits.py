"""Input limits at the boundary: what a producer can put in a record is bounded before any
work is done, and whatever the decoder accepts can be encoded again on the way out."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import msgspec
import pytest

from tests.support.reference_events import chunk_events
from worker.chunking import registry
from worker.errors import DocumentError, SchemaViolation
from worker.wire.codec import EventEncoder, decode_document
from worker.wire.records import InputRecord

JSON = [("content-type", b"application/json")]
HUGE = 10**30


@pytest.mark.parametrize(
    "obj",
    [
        {"id": "a", "text": "t", "metadata": {"k": HUGE}},
        {"id": "a", "text": "t", "metadata": {"k": -HUGE}},
        {"id": "a", "text": "t", "version": HUGE},
        {"id": "a", "text": "t", "strategy": {"name": "sentence", "params": {"chunk_size": HUGE}}},
    ],
)
def test_integers_beyond_int64_are_schema_violations_not_crashes(obj: dict[str, object]) -> None:
    # Found by the fault suite: such a document decoded, then the worker crashed encoding the
    # strategy cache key (OverflowError) and crash-looped on the same record after restart.
    with pytest.raises(SchemaViolation, match=r"9223372036854775807|-9223372036854775808"):
        decode_document(msgspec.json.encode(obj), JSON, max_bytes=10_000)


@pytest.mark.parametrize("value", [2**63 - 1, -(2**63), 0])
def test_int64_extremes_round_trip_through_chunk_events(value: int) -> None:
    raw = {"id": "a", "text": "One. Two.", "version": value, "metadata": {"k": value}}
    doc = decode_document(msgspec.json.encode(raw), JSON, max_bytes=10_000)
    built = registry.build("sentence", {"chunk_size": 5})
    record = InputRecord("t", 0, 0, b"a", b"", [], 0)
    chunks = built.chunker.chunk(doc.text)  # type: ignore[union-attr]
    events = chunk_events(
        doc, record, "sentence", built.fingerprint, chunks, dt.datetime.now(dt.UTC)
    )
    for encoding in ("msgpack", "json"):
        encoder = EventEncoder(encoding)
        assert all(encoder.encode(e) for e in events)


def _override(params: dict[str, object]) -> bytes:
    return msgspec.json.encode(
        {"id": "a", "text": "One. Two.", "strategy": {"name": "sentence", "params": params}}
    )


def test_documents_cannot_point_the_worker_at_files(tmp_path: Path) -> None:
    from worker.errors import StrategyNotAllowed
    from worker.handling.resolver import StrategyResolver

    configured = tmp_path / "tokenizer.json"
    default = registry.build("sentence", {})
    resolver = StrategyResolver(
        default, frozenset({"*"}), registry.BuildContext(), frozenset({str(configured)})
    )
    for path in ("/etc/passwd", "/dev/zero", "../../secrets/tokenizer.json"):
        doc = decode_document(_override({"tokenizer": path}), JSON, max_bytes=10_000)
        with pytest.raises(StrategyNotAllowed, match="tokenizer"):
            resolver.resolve(doc)
    doc = decode_document(
        msgspec.json.encode(
            {
                "id": "a",
                "text": "t",
                "strategy": {"name": "context", "params": {"embedding_model": "/"}},
            }
        ),
        JSON,
        max_bytes=10_000,
    )
    with pytest.raises(StrategyNotAllowed, match="embedding_model"):
        resolver.resolve(doc)
    # "character" and the operator's own value stay allowed.
    ok = decode_document(
        _override({"tokenizer": "character", "chunk_size": 5}), JSON, max_bytes=10_000
    )
    assert resolver.resolve(ok).name == "sentence"
    with pytest.raises(DocumentError, match="not found"):  # allowed, then fails on its own
        resolver.resolve(
            decode_document(_override({"tokenizer": str(configured)}), JSON, max_bytes=10_000)
        )
