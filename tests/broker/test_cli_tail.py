"""`chunkstream tail` on the real broker, as a user runs it: every topic a worker writes is
decoded as what it carries (by its role in the settings, or by each record's shape when the
settings do not name it), `--json` lines are checked against `schemas/` with the stock
`jsonschema` validator, tombstones are shown as such, and `--max` is exact however many records
one fetch brings."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.support import kafka_io
from worker.config import state_topic
from worker.wire.events import DocumentEvent

pytestmark = pytest.mark.kafka
REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "schemas"


def tail(bootstrap: str, topic: str, env: dict[str, str], *flags: str) -> list[str]:
    """The lines `chunkstream tail` prints, with exactly ``env`` as its CHUNKSTREAM_* settings."""
    result = subprocess.run(
        [sys.executable, "-m", "worker.cli", "tail", "--bootstrap-servers", bootstrap,
         "--topic", topic, "--idle-timeout", "2", *flags],
        capture_output=True, text=True, cwd=REPO, timeout=120,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("CHUNKSTREAM_")}, **env},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout.splitlines()


def tail_json(bootstrap: str, topic: str, env: dict[str, str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in tail(bootstrap, topic, env, "--json")]


def validator(name: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def split(lines: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``--json`` lines: (events, tombstones)."""
    objects = [json.loads(line) for line in lines]
    return [o for o in objects if "tombstone" not in o], [o for o in objects if "tombstone" in o]


async def test_tail_decodes_every_topic_of_a_worker_as_what_it_carries(
    kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    names = {**topic_names, "documents_topic": f"doc-chunks-{uuid.uuid4().hex[:8]}"}
    settings = kafka_io.make_settings(kafka_bootstrap, names)
    await kafka_io.create(settings, partitions=2)
    kept = DocumentEvent(id="kept", text="One sentence stays. Another one stays too.")
    gone = DocumentEvent(id="gone", text="This document is deleted. Its chunks go with it.")
    records = kafka_io.encode_documents([kept, gone])
    records += [(b"bad", b"not a document", []), (b"gone", None, [])]  # a dead letter, a delete
    await kafka_io.produce_raw(kafka_bootstrap, names["input_topic"], records, partition=0)
    await kafka_io.run_worker_to_end(settings, timeout_s=120)
    env = {f"CHUNKSTREAM_{k.upper()}": v for k, v in names.items()}

    # The dead-letter topic: the issue's `tail --topic documents.dlq --json` traceback.
    dead = tail_json(kafka_bootstrap, names["dlq_topic"], env)
    assert [d["error_kind"] for d in dead] == ["undecodable"]
    validator("dead-letter-event.schema.json").validate(dead[0])
    assert base64.b64decode(dead[0]["value"]) == b"not a document"
    readable = tail(kafka_bootstrap, names["dlq_topic"], env)
    assert readable == [
        f"DEAD LETTER {names['input_topic']}/0@2 undecodable: "
        "no content-type header and the value is neither JSON nor msgpack"
    ]

    # The chunk topic: chunk events, then the deleted document's chunks as tombstones.
    chunks, tombstones = split(tail(kafka_bootstrap, names["output_topic"], env, "--json"))
    for chunk in chunks:
        validator("chunk-event.schema.json").validate(chunk)
    ids = {doc: [c["chunk_id"] for c in chunks if c["doc_id"] == doc] for doc in ("kept", "gone")}
    assert ids["kept"]
    assert ids["gone"]
    assert sorted(t["key"] for t in tombstones) == sorted(ids["gone"])
    assert {t["doc_id"] for t in tombstones} == {"gone"}
    readable = tail(kafka_bootstrap, names["output_topic"], env)
    shown = [line for line in readable if line.startswith("TOMBSTONE ")]
    assert sorted(shown) == sorted(f"TOMBSTONE {chunk_id} of gone" for chunk_id in ids["gone"])

    # The documents topic: each document's chunk ids, a tombstone when it is deleted.
    listed, deleted = split(tail(kafka_bootstrap, names["documents_topic"], env, "--json"))
    for event in listed:
        validator("document-chunks-event.schema.json").validate(event)
    assert {e["doc_id"]: e["chunk_ids"] for e in listed} == ids
    assert deleted == [{"tombstone": True, "key": "gone"}]

    # The input: documents, the record that is none, the delete.
    inputs = tail_json(kafka_bootstrap, names["input_topic"], env)
    for document in inputs[:2]:
        validator("document-event.schema.json").validate(document)
    assert [d.get("id") for d in inputs[:2]] == ["kept", "gone"]
    assert inputs[2]["undecodable"] is True
    assert (inputs[2]["offset"], inputs[2]["bytes"]) == (2, len(b"not a document"))
    assert inputs[3] == {"tombstone": True, "key": "gone"}

    # The state changelog: the ids each document's state names.
    states = tail_json(kafka_bootstrap, state_topic(settings), env)
    current = {s["key"]: s for s in states if "tombstone" not in s}
    assert current["kept"]["chunk_ids"] == ids["kept"]
    assert current["gone"]["deleted"] is True
    assert sorted(current["gone"]["retracted"]) == sorted(ids["gone"])

    # Without the settings that name them, the same topics read the same, record by shape
    # (partitions interleave differently from one run to the next: compared as sets of lines).
    ours = (names["dlq_topic"], names["output_topic"], names["documents_topic"])
    for topic in (*ours, state_topic(settings)):
        by_role = tail(kafka_bootstrap, topic, env, "--json")
        assert sorted(tail(kafka_bootstrap, topic, {}, "--json")) == sorted(by_role)


async def test_max_is_exact_whatever_one_fetch_brings(
    kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    settings = kafka_io.make_settings(kafka_bootstrap, topic_names)
    await kafka_io.create(settings, partitions=1)
    documents = [DocumentEvent(id=f"doc-{i}", text=f"Document {i}.") for i in range(600)]
    await kafka_io.produce_raw(
        kafka_bootstrap, topic_names["input_topic"], kafka_io.encode_documents(documents)
    )
    env = {"CHUNKSTREAM_INPUT_TOPIC": topic_names["input_topic"]}
    for limit in (2, 333, 600):
        lines = tail(kafka_bootstrap, topic_names["input_topic"], env, "--max", str(limit))
        assert lines == [
            f"DOCUMENT doc-{i} text/plain {len(f'Document {i}.')} chars: Document {i}."
            for i in range(limit)
        ]
    # Fewer records than the limit: all of them, then the idle timeout ends it.
    assert len(tail(kafka_bootstrap, topic_names["input_topic"], env, "--max", "1000")) == 600
