"""JSON Schema of every event and an AsyncAPI 3 document, generated from :mod:`worker.wire.events`.

The files under ``schemas/`` are the contract other teams code against; a test regenerates
them and fails on any drift from the Structs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from worker._version import __version__
from worker.wire.codec import CONTENT_TYPE_HEADER, CONTENT_TYPES, DOC_ID_HEADER
from worker.wire.connect_json import connect_schema
from worker.wire.events import EVENT_TYPES, SCHEMA_VERSION
from worker.wire.state_record import DocumentState, DocumentStatePart

SCHEMA_FILES = {
    "DocumentEvent": "document-event.schema.json",
    "ChunkEvent": "chunk-event.schema.json",
    "DeadLetterEvent": "dead-letter-event.schema.json",
    "DocumentChunksEvent": "document-chunks-event.schema.json",
}
ASYNCAPI_FILE = "asyncapi.json"
# The Connect schema of each output event in the connect-json encoding (the envelope's
# `schema` part, worker.wire.connect_json), for sink configurations and schema registries.
CONNECT_SCHEMA_FILES = {
    "ChunkEvent": "chunk-event.connect.json",
    "DeadLetterEvent": "dead-letter-event.connect.json",
    "DocumentChunksEvent": "document-chunks-event.connect.json",
}

# Messages whose value is null: Kafka's tombstones (key → what is deleted).
_TOMBSTONES = {
    "DocumentTombstone": (
        "Deletes a document: every chunk of it is tombstoned downstream. Key: the document id "
        "(UTF-8). A delete of an unknown document is a no-op."
    ),
    "ChunkTombstone": (
        "Deletes one chunk (of a deleted document, or one a new version no longer has). Key: "
        f"the chunk id. Header {DOC_ID_HEADER}: the document it belonged to."
    ),
    "DocumentChunksTombstone": "The document was deleted. Key: the document id.",
    "DocumentStateTombstone": "A delete marker expired: the document is forgotten.",
    "DocumentStatePartTombstone": "No state names the part any more. Key: the part's.",
}
# The state changelog's value (internal to the worker; always msgpack, an array).
_INTERNAL = {"DocumentState": DocumentState, "DocumentStatePart": DocumentStatePart}

_CHANNELS = {
    # channel id: (default address, messages, action of the worker, key, description, config)
    "documents": (
        "documents",
        ["DocumentEvent", "DocumentTombstone"],
        "receive",
        "the document id (UTF-8); a keyed record's id must equal its key (else a `key_mismatch` "
        "dead letter); a keyless record is chunked, but its versions are ordered only within "
        "one partition",
        "Documents to chunk (CHUNKSTREAM_INPUT_TOPIC): a changelog. A record carries a "
        "document's newest version; a null value deletes it. Versions apply in partition "
        "order; an integer `version` below the one applied is ignored "
        "(docs/concepts/lifecycle.md).",
        {},
    ),
    "chunks": (
        "chunks",
        ["ChunkEvent", "ChunkTombstone"],
        "send",
        "the chunk id (32 hex digits: SHA-256 of msgpack [doc_id, strategy fingerprint, "
        "retrieval model or null, text, occurrence]); the partition is the one Kafka's default "
        "partitioner gives the document id",
        "Chunk events (CHUNKSTREAM_OUTPUT_TOPIC) in index order, then tombstones of the "
        "chunks the document no longer has: upsert by key, delete on null, as stock Kafka "
        "sinks do; may be compacted.",
        {},
    ),
    "deadLetters": (
        "documents.dlq",
        ["DeadLetterEvent"],
        "send",
        "the input record's key",
        "Input records that could not be chunked, with the reason (CHUNKSTREAM_DLQ_TOPIC).",
        {},
    ),
    "documentChunks": (
        "chunks.documents",
        ["DocumentChunksEvent", "DocumentChunksTombstone"],
        "send",
        "the document id",
        "Optional (CHUNKSTREAM_DOCUMENTS_TOPIC): each document's current chunk ids, a null "
        "value once it is deleted, for sinks that delete by document.",
        {},
    ),
    "documentState": (
        "chunkstream-document-state-changelog",
        [
            "DocumentState",
            "DocumentStateTombstone",
            "DocumentStatePart",
            "DocumentStatePartTombstone",
        ],
        "send",
        "the document id; a part's: the document id (UTF-8), the byte 0xFF, then the part's "
        "16-byte digest",
        "Internal (CHUNKSTREAM_STATE_TOPIC, default <group id>-document-state-changelog): what "
        "the worker remembers per document, restored on partition assignment. Compacted, and "
        "co-partitioned with the input topic (its partition p holds the state of input "
        "partition p); a delete marker stays until the group's commits pass it. A state with "
        "more ids than one record holds goes out as parts, then its head (a DocumentState "
        "naming the parts' digests, with no ids of its own).",
        {"cleanup.policy": ["compact"]},
    ),
}


def event_schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = msgspec.json.schema(EVENT_TYPES[name])
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://chunkstream.dev/schemas/v{SCHEMA_VERSION}/{SCHEMA_FILES[name]}",
        "title": name,
        **schema,
    }


def asyncapi() -> dict[str, Any]:
    _, components = msgspec.json.schema_components(
        [*EVENT_TYPES.values(), *_INTERNAL.values()], ref_template="#/components/schemas/{name}"
    )
    content_type_header = {
        "type": "object",
        "properties": {
            CONTENT_TYPE_HEADER: {"type": "string", "enum": sorted(CONTENT_TYPES.values())}
        },
    }
    messages: dict[str, Any] = {
        name: {
            "name": name,
            "title": name,
            "contentType": CONTENT_TYPES["msgpack"],
            "summary": (EVENT_TYPES[name].__doc__ or "").strip().splitlines()[0],
            "headers": content_type_header,
            "payload": {"$ref": f"#/components/schemas/{name}"},
        }
        for name in EVENT_TYPES
    }
    for name, file_name in CONNECT_SCHEMA_FILES.items():
        messages[name]["x-connect-schema"] = {"$ref": file_name}
    for name, summary in _TOMBSTONES.items():
        messages[name] = {
            "name": name,
            "title": name,
            "summary": summary,
            "payload": {"type": "null"},
        }
    messages["DocumentState"] = {
        "name": "DocumentState",
        "title": "DocumentState",
        "contentType": CONTENT_TYPES["msgpack"],
        "summary": "A document's state: [input offset, version, chunk ids (16 bytes each, "
        "concatenated, index order), deleted, the chunk ids that record tombstoned (16 bytes "
        "each; absent from states written by earlier releases), the digests of its parts "
        "(16 bytes each, in order; absent or empty unless the state is split)]; always msgpack.",
        "payload": {"$ref": "#/components/schemas/DocumentState"},
    }
    messages["DocumentStatePart"] = {
        "name": "DocumentStatePart",
        "title": "DocumentStatePart",
        "contentType": CONTENT_TYPES["msgpack"],
        "summary": "A slice of a split state's ids: [chunk ids, chunk ids it tombstoned] (16 "
        "bytes each); its head joins its parts' slices in the order it names them.",
        "payload": {"$ref": "#/components/schemas/DocumentStatePart"},
    }
    for _, names, _, key, _, _ in _CHANNELS.values():
        for name in names:
            messages[name].setdefault(
                "bindings", {"kafka": {"key": {"type": "string", "description": key}}}
            )
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "chunkstream",
            "version": f"{SCHEMA_VERSION}.0.0",
            "description": (
                "Events of the chunkstream worker. Payloads are msgpack by default or JSON "
                "(CHUNKSTREAM_ENCODING); the content-type header says which. Readers must "
                "ignore unknown fields: fields are only ever added, with defaults. The schemas "
                "describe the JSON form; msgpack has the same maps, keys and values except "
                "two types it carries natively: a date-time string (produced_at, failed_at) is "
                "the msgpack timestamp extension (type -1), and a base64 string (embedding, "
                "a dead letter's value, key and header values) is bin. Records carry the W3C "
                "traceparent/tracestate headers when the document's record did. The "
                "connect-json encoding (output events only) wraps the JSON form's values in "
                'Kafka Connect\'s envelope, {"schema": ..., "payload": ...}, for '
                "JsonConverter with schemas.enable=true: each output message's "
                "x-connect-schema is that schema; in the payload a date-time is epoch "
                "milliseconds, the embedding an array of numbers, and metadata, spans and a "
                "dead letter's headers are JSON text."
            ),
        },
        "defaultContentType": CONTENT_TYPES["msgpack"],
        "channels": {
            channel: {
                "address": address,
                "description": description,
                "messages": {m: {"$ref": f"#/components/messages/{m}"} for m in names},
                **({"bindings": {"kafka": {"topicConfiguration": config}}} if config else {}),
            }
            for channel, (address, names, _, _, description, config) in _CHANNELS.items()
        },
        "operations": {
            f"{action}{channel[0].upper()}{channel[1:]}": {
                "action": action,
                "channel": {"$ref": f"#/channels/{channel}"},
                "messages": [{"$ref": f"#/channels/{channel}/messages/{m}"} for m in names],
            }
            for channel, (_, names, action, _, _, _) in _CHANNELS.items()
        },
        "components": {"messages": messages, "schemas": components},
    }


def render() -> dict[str, str]:
    """File name → file text for everything under ``schemas/``."""

    def dump(obj: Any) -> str:
        return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"

    files = {SCHEMA_FILES[name]: dump(event_schema(name)) for name in EVENT_TYPES}
    for name, file_name in CONNECT_SCHEMA_FILES.items():
        files[file_name] = dump(connect_schema(EVENT_TYPES[name]))
    files[ASYNCAPI_FILE] = dump(asyncapi())
    return files


def write(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render().items():
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def drift(out_dir: Path) -> list[str]:
    """Names of files under ``out_dir`` that differ from what the code generates."""
    return [
        name
        for name, text in render().items()
        if not (out_dir / name).exists() or (out_dir / name).read_text(encoding="utf-8") != text
    ]


__all__ = ["__version__", "asyncapi", "drift", "event_schema", "render", "write"]
