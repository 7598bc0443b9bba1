"""Pure conversions between Kafka records and our events: chunk ids, dead letters (chunk events
are written by worker.wire.event_bytes)."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from worker._version import __version__
from worker.errors import DocumentError
from worker.wire.codec import Headers
from worker.wire.events import (
    DeadLetterEvent,
    DocumentEvent,
    RecordHeader,
    SourceRecord,
)


@dataclass(frozen=True, slots=True)
class InputRecord:
    """What the worker needs of a consumed record (a plain value, easy to build in tests)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


def doc_version(doc: DocumentEvent) -> str | None:
    return None if doc.version is None else str(doc.version)


def chunk_id(
    doc_id: str, strategy_fingerprint: str, text: str, occurrence: int, model: str | None = None
) -> str:
    """Deterministic, content-addressed id: the first 32 hex digits of SHA-256 over msgpack
    ``[doc_id, fingerprint, model, text, occurrence]``.

    - The same text cut by the same strategy (fingerprint: name, parameters, boundary model)
      keeps its id across versions of the document, wherever it moved: a sink that already
      holds it need not embed it again.
    - ``occurrence`` counts the earlier chunks of the document with the same text, so identical
      texts within one document get distinct ids.
    - ``model`` is the retrieval model's ``kind:identity`` when the event carries its vector
      (``include_embeddings``): another vector is another chunk for a sink that stores it.
    - The document id keeps two documents' equal texts apart (a delete of one must not touch
      the other's chunks). The version is not in it: a new version of unchanged text is the
      same chunk.
    """
    material = msgspec.msgpack.encode([doc_id, strategy_fingerprint, model, text, occurrence])
    return hashlib.sha256(material).hexdigest()[:32]


def chunk_ids(
    doc_id: str, strategy_fingerprint: str, texts: Sequence[str], model: str | None = None
) -> list[str]:
    """:func:`chunk_id` of each text in order, occurrences counted, the same bytes hashed,
    with the part every chunk shares hashed once: msgpack writes the 5-element array as its
    marker (0x95) and then each element, so the material is that marker, the first three
    elements as they encode in a 3-element array (minus its marker 0x93), then text and
    occurrence."""
    head = msgspec.msgpack.encode([doc_id, strategy_fingerprint, model])
    shared = hashlib.sha256(b"\x95" + head[1:])
    encode = msgspec.msgpack.encode
    seen: dict[str, int] = {}
    ids = []
    for text in texts:
        occurrence = seen.get(text, 0)
        seen[text] = occurrence + 1
        digest = shared.copy()
        digest.update(encode(text))
        digest.update(encode(occurrence))
        ids.append(digest.hexdigest()[:32])
    return ids


def dead_letter(
    record: InputRecord,
    error: DocumentError,
    now: dt.datetime,
    *,
    max_value_bytes: int,
    doc_id: str | None = None,
) -> DeadLetterEvent:
    value = record.value
    truncated = value is not None and len(value) > max_value_bytes
    return DeadLetterEvent(
        error_kind=error.kind,
        error_message=str(error)[:2000],
        source=SourceRecord(record.topic, record.partition, record.offset),
        value=value[:max_value_bytes] if value is not None and truncated else value,
        key=record.key,
        headers=[RecordHeader(k, v) for k, v in record.headers],
        worker_version=__version__,
        failed_at=now,
        value_truncated=truncated,
        value_size=0 if value is None else len(value),
        value_sha256="" if value is None else hashlib.sha256(value).hexdigest(),
        doc_id=doc_id,
    )
