"""Chunk ids and dead letters built from records (pure code)."""

from __future__ import annotations

import datetime as dt
import hashlib

import msgpack
import pytest

from tests.support.fake_embedder import model_ref
from tests.support.reference_events import chunk_events
from worker.chunking import registry
from worker.errors import SchemaViolation
from worker.wire.events import DocumentEvent
from worker.wire.records import InputRecord, chunk_id, chunk_ids, dead_letter

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
REC = InputRecord("documents", 2, 41, b"k", b"value-bytes", [("h", b"1")], 0)


def test_chunk_ids_are_deterministic_and_sensitive_to_every_part() -> None:
    base = chunk_id("doc", "fp", "text", 0)
    assert base == chunk_id("doc", "fp", "text", 0)
    variants = {
        chunk_id("doc2", "fp", "text", 0),
        chunk_id("doc", "fp2", "text", 0),
        chunk_id("doc", "fp", "text.", 0),
        chunk_id("doc", "fp", "text", 1),
        chunk_id("doc", "fp", "text", 0, "onnx:abc"),
    }
    assert base not in variants
    assert len(variants) == 5


def test_equal_texts_get_their_occurrence_and_unchanged_texts_keep_their_ids() -> None:
    first = chunk_ids("doc", "fp", ["intro", "same", "body", "same"])
    assert len(set(first)) == 4  # the two "same" chunks differ by their occurrence
    # A new version: a chunk inserted before, one changed; the others keep their ids.
    second = chunk_ids("doc", "fp", ["new", "intro", "same", "body!", "same"])
    assert second[1:3] == first[0:2]
    assert second[4] == first[3]
    assert second[3] != first[2]


@pytest.mark.parametrize(
    ("doc_id", "model"),
    [("doc", None), ("d" * 300, "onnx:1943d8edfb003ce3"), ("ドキュメント", None), ("", "x")],
)
def test_chunk_ids_are_sha256_of_the_msgpack_array_as_another_library_writes_it(
    doc_id: str, model: str | None
) -> None:
    # The ids are a contract (sinks upsert by them, and an unchanged chunk must keep its id):
    # pinned against the `msgpack` library's encoding, for texts and occurrence counts on both
    # sides of msgpack's size steps.
    texts = ["", "a", "é" * 40, "x" * 300, "y" * 70_000] + ["dup"] * 300
    ids = chunk_ids(doc_id, "fp", texts, model)
    seen: dict[str, int] = {}
    for text, got in zip(texts, ids, strict=True):
        occurrence = seen.get(text, 0)
        seen[text] = occurrence + 1
        material = msgpack.packb([doc_id, "fp", model, text, occurrence])
        expected = hashlib.sha256(material).hexdigest()[:32]
        assert got == expected
        assert chunk_id(doc_id, "fp", text, occurrence, model) == expected
    assert seen["dup"] == 300  # occurrences past 255: two-byte msgpack integers


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
