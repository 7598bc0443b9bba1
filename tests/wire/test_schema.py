"""The committed schemas/ files are exactly what the Structs generate."""

from __future__ import annotations

import json
from pathlib import Path

from worker.wire import schema

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def test_committed_schemas_match_the_code() -> None:
    stale = schema.drift(SCHEMAS)
    assert not stale, f"run `chunkstream schema` to regenerate: {stale}"


def test_asyncapi_document_is_wired() -> None:
    doc = json.loads((SCHEMAS / schema.ASYNCAPI_FILE).read_text())
    assert doc["asyncapi"].startswith("3.")
    assert {c["address"] for c in doc["channels"].values()} == {
        "documents",
        "chunks",
        "documents.dlq",
        "chunks.documents",
        "chunkstream-document-state-changelog",
    }
    components = doc["components"]["schemas"]
    for op in doc["operations"].values():
        channel = op["channel"]["$ref"].split("/")[-1]
        for message_ref in doc["channels"][channel]["messages"].values():
            message = doc["components"]["messages"][message_ref["$ref"].split("/")[-1]]
            payload = message["payload"]
            # A record with a payload, or a tombstone (null value); both say what the key is.
            assert payload == {"type": "null"} or payload["$ref"].split("/")[-1] in components
            assert message["bindings"]["kafka"]["key"]["description"]
    # The key and the tombstone form of the lifecycle (issue 19): chunks keyed by chunk id,
    # deletes as null values, the state changelog compacted.
    chunk_messages = doc["channels"]["chunks"]["messages"]
    assert set(chunk_messages) == {"ChunkEvent", "ChunkTombstone"}
    key = doc["components"]["messages"]["ChunkEvent"]["bindings"]["kafka"]["key"]
    assert "chunk id" in key["description"]
    assert "DocumentTombstone" in doc["channels"]["documents"]["messages"]
    state = doc["channels"]["documentState"]["bindings"]["kafka"]["topicConfiguration"]
    assert state == {"cleanup.policy": ["compact"]}
    required = set(components["DocumentEvent"]["required"])
    assert required == {"id", "text"}


def test_schema_drift_is_detected(tmp_path: Path) -> None:
    schema.write(tmp_path)
    assert schema.drift(tmp_path) == []
    path = tmp_path / schema.SCHEMA_FILES["ChunkEvent"]
    path.write_text(path.read_text().replace('"chunk_id"', '"chunkid"'))
    assert schema.drift(tmp_path) == [schema.SCHEMA_FILES["ChunkEvent"]]
