"""Pure conversions between Kafka records and our events: chunk ids, chunk events, dead letters."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec
import numpy as np
from numpy.typing import NDArray

from worker._version import __version__
from worker.chunking.types import Chunk
from worker.codec import Headers
from worker.errors import DocumentError
from worker.events import (
    ChunkEvent,
    ChunkSpan,
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


def chunk_id(doc_id: str, version: str | None, strategy_fingerprint: str, index: int) -> str:
    """Deterministic id: a replay of the same document under the same strategy and
    parameters yields the same ids, so downstream upserts stay idempotent. The id is the
    first 32 hex digits of SHA-256 over msgpack ``[doc_id, version, fingerprint, index]``."""
    material = msgspec.msgpack.encode([doc_id, version, strategy_fingerprint, index])
    return hashlib.sha256(material).hexdigest()[:32]


def chunk_ids(doc_id: str, version: str | None, strategy_fingerprint: str, count: int) -> list[str]:
    """:func:`chunk_id` for indexes ``0..count-1``, the same bytes hashed, with the part
    every index shares hashed once: msgpack writes the 4-element array as its marker (0x94)
    and then each element, so the material is that marker, the first three elements as
    they encode in a 3-element array (minus its marker 0x93), then the index."""
    head = msgspec.msgpack.encode([doc_id, version, strategy_fingerprint])
    shared = hashlib.sha256(b"\x94" + head[1:])
    encode = msgspec.msgpack.encode
    ids = []
    for index in range(count):
        digest = shared.copy()
        digest.update(encode(index))
        ids.append(digest.hexdigest()[:32])
    return ids


def chunk_events(
    doc: DocumentEvent,
    record: InputRecord,
    strategy_name: str,
    strategy_fingerprint: str,
    chunks: Sequence[Chunk],
    now: dt.datetime,
    *,
    embeddings: NDArray[np.float32] | None = None,
    embedding_model: str | None = None,
) -> list[ChunkEvent]:
    version = doc_version(doc)
    source = SourceRecord(record.topic, record.partition, record.offset)
    count = len(chunks)
    ids = chunk_ids(doc.id, version, strategy_fingerprint, count)
    events = []
    for index, chunk in enumerate(chunks):
        # Strategy metadata first, then the document's own: a document cannot be shadowed
        # by a strategy key, and its keys are what downstream filters are written against.
        # Without strategy metadata every event shares the document's dict (never mutated).
        metadata = {**chunk.metadata, **doc.metadata} if chunk.metadata else doc.metadata
        events.append(
            ChunkEvent(
                chunk_id=ids[index],
                doc_id=doc.id,
                doc_version=version,
                index=index,
                count=count,
                text=chunk.text,
                start_index=chunk.start_index,
                end_index=chunk.end_index,
                token_count=chunk.token_count,
                strategy=strategy_name,
                metadata=metadata,
                source=source,
                produced_at=now,
                spans=None
                if chunk.spans is None
                else [ChunkSpan(s.start, s.end) for s in chunk.spans],
                doc_source=doc.source,
                language=doc.language,
                embedding=None
                if embeddings is None
                else embeddings[index].astype("<f4", copy=False).tobytes(),
                embedding_model=None if embeddings is None else embedding_model,
            )
        )
    return events


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
