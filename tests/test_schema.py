"""The committed schemas/ files are exactly what the Structs generate."""

from __future__ import annotations

import json
from pathlib import Path

from worker import schema

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


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
    }
    components = doc["components"]["schemas"]
    for op in doc["operations"].values():
        channel = op["channel"]["$ref"].split("/")[-1]
        (message_ref,) = doc["channels"][channel]["messages"].values()
        message = doc["components"]["messages"][message_ref["$ref"].split("/")[-1]]
        assert message["payload"]["$ref"].split("/")[-1] in components
    required = set(components["DocumentEvent"]["required"])
    assert required == {"id", "text"}


def test_schema_drift_is_detected(tmp_path: Path) -> None:
    schema.write(tmp_path)
    assert schema.drift(tmp_path) == []
    path = tmp_path / schema.SCHEMA_FILES["ChunkEvent"]
    path.write_text(path.read_text().replace('"chunk_id"', '"chunkid"'))
    assert schema.drift(tmp_path) == [schema.SCHEMA_FILES["ChunkEvent"]]
