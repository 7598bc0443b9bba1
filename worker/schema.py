"""JSON Schema of every event and an AsyncAPI 3 document, generated from :mod:`worker.events`.

The files under ``schemas/`` are the contract other teams code against; a test regenerates
them and fails on any drift from the Structs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from worker._version import __version__
from worker.codec import CONTENT_TYPE_HEADER, CONTENT_TYPES
from worker.events import EVENT_TYPES, SCHEMA_VERSION

SCHEMA_FILES = {
    "DocumentEvent": "document-event.schema.json",
    "ChunkEvent": "chunk-event.schema.json",
    "DeadLetterEvent": "dead-letter-event.schema.json",
}
ASYNCAPI_FILE = "asyncapi.json"

_CHANNELS = {
    # channel id: (default address, message, action of the worker, description)
    "documents": (
        "documents",
        "DocumentEvent",
        "receive",
        "Documents to chunk (CHUNKSTREAM_INPUT_TOPIC). Key: any; the worker does not use it.",
    ),
    "chunks": (
        "chunks",
        "ChunkEvent",
        "send",
        "Chunk events (CHUNKSTREAM_OUTPUT_TOPIC), keyed by document id, in index order.",
    ),
    "deadLetters": (
        "documents.dlq",
        "DeadLetterEvent",
        "send",
        "Input records that could not be chunked, with the reason (CHUNKSTREAM_DLQ_TOPIC).",
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
        list(EVENT_TYPES.values()), ref_template="#/components/schemas/{name}"
    )
    content_type_header = {
        "type": "object",
        "properties": {
            CONTENT_TYPE_HEADER: {"type": "string", "enum": sorted(CONTENT_TYPES.values())}
        },
    }
    messages = {
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
                "traceparent/tracestate headers when the document's record did."
            ),
        },
        "defaultContentType": CONTENT_TYPES["msgpack"],
        "channels": {
            channel: {
                "address": address,
                "description": description,
                "messages": {message: {"$ref": f"#/components/messages/{message}"}},
            }
            for channel, (address, message, _, description) in _CHANNELS.items()
        },
        "operations": {
            f"{action}{channel[0].upper()}{channel[1:]}": {
                "action": action,
                "channel": {"$ref": f"#/channels/{channel}"},
                "messages": [{"$ref": f"#/channels/{channel}/messages/{message}"}],
            }
            for channel, (_, message, action, _) in _CHANNELS.items()
        },
        "components": {"messages": messages, "schemas": components},
    }


def render() -> dict[str, str]:
    """File name → file text for everything under ``schemas/``."""

    def dump(obj: Any) -> str:
        return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"

    files = {SCHEMA_FILES[name]: dump(event_schema(name)) for name in EVENT_TYPES}
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
