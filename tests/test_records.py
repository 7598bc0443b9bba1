"""Chunk ids and dead letters built from records (pure code)."""

from __future__ import annotations

import datetime as dt
import hashlib

import msgpack
import pytest

from tests.semantic.fakes import model_ref
from worker.chunking import registry
from worker.errors import SchemaViolation
from worker.events import DocumentEvent
from worker.records import InputRecord, chunk_events, chunk_id, chunk_ids, dead_letter

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
REC = InputRecord("documents", 2, 41, b"k", b"value-bytes", [("h", b"1")], 0)


def test_chunk_ids_are_deterministic_and_sensitive_to_every_part() -> None:
    base = chunk_id("doc", "1", "fp", 0)
    assert base == chunk_id("doc", "1", "fp", 0)
    variants = {
        chunk_id("doc2", "1", "fp", 0),
        chunk_id("doc", "2", "fp", 0),
        chunk_id("doc", None, "fp", 0),
        chunk_id("doc", "1", "fp2", 0),
        chunk_id("doc", "1", "fp", 1),
    }
    assert base not in variants
    assert len(variants) == 5


@pytest.mark.parametrize(
    ("doc_id", "version"),
    [("doc", "1"), ("d" * 300, None), ("ドキュメント", "v" * 40), ("", "2")],
)
def test_chunk_ids_are_sha256_of_the_msgpack_array_as_another_library_writes_it(
    doc_id: str, version: str | None
) -> None:
    # The ids are a contract (replays must upsert, not duplicate): pinned against the
    # `msgpack` library's encoding, for indexes on both sides of msgpack's int size steps.
    indexes = [0, 1, 127, 128, 255, 256, 65_535, 65_536]
    ids = chunk_ids(doc_id, version, "fp", 65_537)
    for index in indexes:
        material = msgpack.packb([doc_id, version, "fp", index])
        expected = hashlib.sha256(material).hexdigest()[:32]
        assert chunk_id(doc_id, version, "fp", index) == expected
        assert ids[index] == expected


def test_strategy_fingerprint_covers_effective_parameters() -> None:
    a = registry.build("sentence", {"chunk_size": "100"})
    b = registry.build("sentence", {"chunk_size": 100})
    c = registry.build("sentence", {"chunk_size": 101})
    assert a.fingerprint == b.fingerprint
    assert a.fingerprint != c.fingerprint


def test_chunk_events_carry_offsets_metadata_and_source() -> None:
    doc = DocumentEvent(id="d", text="First one. Second one.", version=7, metadata={"t": "x"})
    built = registry.build("sentence", {"chunk_size": 12})
    chunks = built.chunker.chunk(doc.text)  # type: ignore[union-attr]
    events = chunk_events(doc, REC, built.name, built.fingerprint, chunks, NOW)
    assert [e.index for e in events] == list(range(len(events)))
    assert all(e.count == len(events) for e in events)
    for e in events:
        assert doc.text[e.start_index : e.end_index] == e.text
        assert e.metadata["t"] == "x"
        assert (e.source.topic, e.source.partition, e.source.offset) == ("documents", 2, 41)
        assert e.doc_version == "7"
    assert len({e.chunk_id for e in events}) == len(events)


def test_dead_letter_keeps_original_bytes_or_a_marked_prefix() -> None:
    dl = dead_letter(REC, SchemaViolation("bad"), NOW, max_value_bytes=1000)
    assert dl.value == b"value-bytes"
    assert not dl.value_truncated
    assert dl.error_kind == "schema_violation"
    assert [(h.key, h.value) for h in dl.headers] == [("h", b"1")]
    cut = dead_letter(REC, SchemaViolation("bad"), NOW, max_value_bytes=5)
    assert cut.value == b"value"
    assert cut.value_truncated
    assert cut.value_size == len(b"value-bytes")
    assert cut.value_sha256 == hashlib.sha256(b"value-bytes").hexdigest()


def test_embedding_strategy_ids_change_with_the_model_rule_ones_do_not() -> None:
    a = registry.BuildContext(boundary=model_ref("aaaa"))
    b = registry.BuildContext(boundary=model_ref("bbbb"))
    assert (
        registry.build("semantic", {}, a).fingerprint
        != registry.build("semantic", {}, b).fingerprint
    )
    assert (
        registry.build("sentence", {}, a).fingerprint
        == registry.build("sentence", {}, b).fingerprint
    )
