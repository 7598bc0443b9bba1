"""`chunkstream tail`'s parts without a broker: the limit is exact whatever a fetch brings, each
topic is decoded as what its role in the settings says it carries, and a topic the settings do
not name is decoded record by record by shape. (On the real broker:
tests/broker/test_cli_tail.py.)"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack
import pytest

from worker.cli.tail import Record, carried_by, decode, line_of, print_records
from worker.config import load_settings
from worker.errors import SchemaViolation, Undecodable
from worker.wire.codec import DOC_ID_HEADER, EventEncoder
from worker.wire.events import (
    ChunkEvent,
    DeadLetterEvent,
    DocumentChunksEvent,
    DocumentEvent,
    RecordHeader,
    SourceRecord,
)
from worker.wire.state_record import (
    DocumentState,
    encode_state,
    head_of,
    part_key,
    split_state,
)

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
SOURCE = SourceRecord("documents", 0, 7)
CHUNK = ChunkEvent(
    chunk_id="ab" * 16,
    doc_id="doc-1",
    doc_version="3",
    index=0,
    count=2,
    text="First sentence.",
    start_index=0,
    end_index=15,
    token_count=3,
    strategy="sentence",
    metadata={},
    source=SOURCE,
    produced_at=NOW,
)
DEAD = DeadLetterEvent(
    error_kind="undecodable",
    error_message="no content-type header",
    source=SOURCE,
    value=b"not json",
    key=b"bad",
    headers=[RecordHeader("x", b"y")],
    worker_version="0",
    failed_at=NOW,
)
CHUNKS_OF = DocumentChunksEvent("doc-1", "3", ["ab" * 16, "cd" * 16], "sentence", SOURCE, NOW)
DOCUMENT = DocumentEvent(id="doc-1", text="First sentence. Second.")
STATE = DocumentState(7, "3", bytes.fromhex("ab" * 16 + "cd" * 16))


@dataclass
class FakeRecord:
    value: bytes | None
    key: bytes | None = b"doc-1"
    headers: Sequence[tuple[str, bytes]] = ()
    topic: str = "t"
    partition: int = 0
    offset: int = 0


@dataclass
class Batches:
    """A record source that hands out whole batches whatever ``max_records`` asks, as a
    broker's fetch does when it brings a full batch: the limit must hold anyway."""

    batches: list[list[FakeRecord]]
    asked: list[int | None] = field(default_factory=list)

    async def getmany(
        self, *partitions: Any, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[Any, list[Any]]:
        self.asked.append(max_records)
        return {"tp": self.batches.pop(0)} if self.batches else {}


def encoded(event: Any, encoding: str = "msgpack") -> FakeRecord:
    encoder = EventEncoder(encoding)  # type: ignore[arg-type]
    return FakeRecord(encoder.encode(event), headers=encoder.headers())


def numbered(n: int) -> list[FakeRecord]:
    return [FakeRecord(b"x", offset=i) for i in range(n)]


def shown(record: Record) -> str:
    return f"record {record.offset}"


async def test_the_limit_is_exact_within_a_fetched_batch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = Batches([numbered(500), numbered(500)])
    assert await print_records(source, shown, limit=2, idle_timeout_s=None) == 2
    assert capsys.readouterr().out.splitlines() == ["record 0", "record 1"]
    assert source.asked == [2]  # and the fetch was asked for no more than that
    assert len(source.batches) == 1  # the second batch was never fetched


async def test_the_limit_is_exact_across_batches(capsys: pytest.CaptureFixture[str]) -> None:
    source = Batches([numbered(3), [], numbered(3), numbered(3)])
    assert await print_records(source, shown, limit=7, idle_timeout_s=None) == 7
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"record {i}" for i in (0, 1, 2, 0, 1, 2, 0)]
    assert source.asked == [7, 4, 4, 1]


async def test_without_a_limit_an_idle_fetch_ends_a_zero_idle_timeout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = Batches([numbered(4), numbered(2)])
    assert await print_records(source, shown, limit=None, idle_timeout_s=0) == 6
    assert len(capsys.readouterr().out.splitlines()) == 6


def test_each_topic_of_the_settings_carries_its_own_event() -> None:
    settings = load_settings(
        {"input_topic": "in", "output_topic": "out", "dlq_topic": "dead"},
        env={"CHUNKSTREAM_DOCUMENTS_TOPIC": "docs", "CHUNKSTREAM_GROUP_ID": "g"},
    )
    assert carried_by("in", settings) is DocumentEvent
    assert carried_by("out", settings) is ChunkEvent
    assert carried_by("dead", settings) is DeadLetterEvent
    assert carried_by("docs", settings) is DocumentChunksEvent
    assert carried_by("g-document-state-changelog", settings) is DocumentState
    assert carried_by("chunks", settings) is None  # the default name, not these settings'


def test_with_table_rows_the_input_is_shown_as_the_documents_the_worker_makes_of_them() -> None:
    settings = load_settings(
        {"input_topic": "rows"},
        env={"CHUNKSTREAM_INPUT_FORMAT": "row", "CHUNKSTREAM_ROW_TEXT": "body"},
    )
    carried = carried_by("rows", settings)
    row = FakeRecord(json.dumps({"id": 7, "body": "A row's text."}).encode())
    assert line_of(row, carried, as_json=False) == "DOCUMENT 7 text/plain 13 chars: A row's text."
    assert json.loads(line_of(row, carried, as_json=True))["text"] == "A row's text."
    toasted = FakeRecord(json.dumps({"id": 8, "body": "__debezium_unavailable_value"}).encode())
    assert "unavailable" in line_of(toasted, carried, as_json=False)  # the dead letter's reason
    assert line_of(toasted, carried, as_json=False).startswith("UNDECODABLE t/0@0")


@pytest.mark.parametrize(
    "event", [CHUNK, DEAD, CHUNKS_OF, DOCUMENT], ids=lambda e: type(e).__name__
)
@pytest.mark.parametrize("encoding", ["msgpack", "json"])
def test_a_topic_the_settings_do_not_name_is_read_by_each_records_shape(
    event: Any, encoding: str
) -> None:
    record = encoded(event, encoding)
    assert record.value is not None
    assert decode(record.value, record.headers, None) == event
    assert decode(record.value, record.headers, type(event)) == event


def test_a_split_states_head_and_parts_are_shown_as_such() -> None:
    """A state too large for one record goes out as parts (keyed by the document id, 0xFF and
    a digest) and a head naming them (worker.wire.state_record): tail names each."""
    ids = bytes.fromhex("ab" * 16) * 3
    whole, values = split_state(DocumentState(7, "3", ids, retracted=ids[:16]), 32)
    head = FakeRecord(encode_state(head_of(whole)))
    assert line_of(head, DocumentState, as_json=False) == (
        "STATE doc-1 from offset 7 version 3: its ids in 2 parts"
    )
    assert json.loads(line_of(head, None, as_json=True))["parts"] == [
        d.hex() for d in whole.digests
    ]
    first = FakeRecord(values[0], key=part_key("doc-1", whole.digests[0]))
    assert line_of(first, DocumentState, as_json=False) == (
        f"STATE PART {whole.digests[0].hex()} of doc-1: 2 chunk ids, 0 retracted"
    )
    second = FakeRecord(values[1], key=part_key("doc-1", whole.digests[1]))
    assert json.loads(line_of(second, None, as_json=True)) == {
        "key": "doc-1",
        "part": whole.digests[1].hex(),
        "chunk_ids": ["ab" * 16],
        "retracted": ["ab" * 16],
    }


def test_a_state_record_is_read_by_its_array_shape() -> None:
    value = encode_state(STATE)
    assert decode(value, [], None) == STATE
    line = json.loads(line_of(FakeRecord(value), DocumentState, as_json=True))
    assert line == {
        "key": "doc-1",
        "offset": 7,
        "version": "3",
        "deleted": False,
        "chunk_ids": ["ab" * 16, "cd" * 16],
        "retracted": [],
    }


def test_a_record_that_is_not_what_the_topic_carries_is_a_reason_not_a_traceback() -> None:
    dead_letter = encoded(DEAD)
    assert dead_letter.value is not None
    # The traceback: a dead letter read as a chunk event.
    with pytest.raises(SchemaViolation, match=r"got `None` - at `\$.doc_id`"):
        decode(dead_letter.value, dead_letter.headers, ChunkEvent)
    text = line_of(dead_letter, ChunkEvent, as_json=False)
    assert text == (
        f"UNDECODABLE t/0@0 ({len(dead_letter.value)} bytes): "
        "Expected `str`, got `None` - at `$.doc_id`"
    )
    garbage = FakeRecord(msgpack.packb([1, "two"]), offset=9)
    with pytest.raises(Undecodable, match="none of ChunkEvent"):
        decode(msgpack.packb({"unrelated": 1}), [], None)
    assert json.loads(line_of(garbage, None, as_json=True)) == {
        "undecodable": True,
        "topic": "t",
        "partition": 0,
        "offset": 9,
        "bytes": len(msgpack.packb([1, "two"])),
        "error": "none of ChunkEvent, DeadLetterEvent, DocumentChunksEvent, DocumentEvent or "
        "a state record",
    }


def test_tombstones_are_shown_as_such_with_the_document_they_belonged_to() -> None:
    chunk_tombstone = FakeRecord(None, key=b"ab" * 16, headers=[(DOC_ID_HEADER, b"doc-1")])
    assert line_of(chunk_tombstone, ChunkEvent, as_json=False) == f"TOMBSTONE {'ab' * 16} of doc-1"
    assert json.loads(line_of(chunk_tombstone, ChunkEvent, as_json=True)) == {
        "tombstone": True,
        "key": "ab" * 16,
        "doc_id": "doc-1",
    }
    document_tombstone = FakeRecord(None, key=b"doc-1")
    assert line_of(document_tombstone, DocumentEvent, as_json=False) == "TOMBSTONE doc-1"
    assert json.loads(line_of(document_tombstone, None, as_json=True)) == {
        "tombstone": True,
        "key": "doc-1",
    }


def test_the_readable_lines_say_what_each_record_is() -> None:
    assert line_of(encoded(CHUNK), ChunkEvent, as_json=False) == (
        "doc-1 #1/2 [0:15] 3 tok sentence: First sentence."
    )
    assert line_of(encoded(DEAD), DeadLetterEvent, as_json=False) == (
        "DEAD LETTER documents/0@7 undecodable: no content-type header"
    )
    assert line_of(encoded(CHUNKS_OF), None, as_json=False) == (
        f"CHUNKS OF doc-1 version 3: 2 sentence chunks {'ab' * 16} {'cd' * 16}"
    )
    assert line_of(encoded(DOCUMENT), None, as_json=False) == (
        "DOCUMENT doc-1 text/plain 23 chars: First sentence. Second."
    )
    assert line_of(FakeRecord(encode_state(STATE)), None, as_json=False) == (
        "STATE doc-1 from offset 7 version 3: 2 chunk ids"
    )
    # --json: the event as the contract has it (a dead letter's bytes in base64).
    assert json.loads(line_of(encoded(DEAD), DeadLetterEvent, as_json=True))["value"] == (
        "bm90IGpzb24="
    )
