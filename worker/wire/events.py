"""The wire contract: DocumentEvent in, ChunkEvent and DeadLetterEvent out (schema version 1).

Evolution rule: fields are only ever *added*, always with a default, so old readers keep
working (unknown fields are ignored on decode) and old events still decode.
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import Annotated, Any, Literal

import msgspec

SCHEMA_VERSION = 1

# Input limits. Keys and values of document metadata are bounded so that one document
# cannot make every one of its chunks (which all carry the metadata) arbitrarily large.
MAX_METADATA_ENTRIES = 64
MAX_METADATA_KEY_CHARS = 128
MAX_METADATA_VALUE_CHARS = 4096
MAX_ID_CHARS = 1024
MAX_STRATEGY_PARAMS = 32

MetadataKey = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_METADATA_KEY_CHARS)]
# JSON integers have no size limit; msgpack's do. An input integer outside int64 would decode
# here and then fail to encode on the way out (a crash, not a dead letter): refuse it here.
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
# Finite floats only: JSON cannot carry inf/nan (they would come back as null), and
# downstream stores choke on them.
FiniteFloat = Annotated[float, msgspec.Meta(ge=-sys.float_info.max, le=sys.float_info.max)]
MetadataValue = (
    Annotated[str, msgspec.Meta(max_length=MAX_METADATA_VALUE_CHARS)]
    | Int64
    | FiniteFloat
    | bool
    | None
)
ParamValue = Annotated[str, msgspec.Meta(max_length=256)] | Int64 | FiniteFloat | bool
ContentType = Literal["text/plain", "text/markdown"]

# The msgpack contract: the JSON Schemas describe the JSON form; msgpack carries these two
# types natively, as msgspec encodes them (kept on purpose: both are msgpack's own standard
# types, every msgpack library reads them, and bin is smaller than base64 for embeddings).
Timestamp = Annotated[
    dt.datetime,
    msgspec.Meta(
        description="UTC time. JSON: an RFC 3339 string. msgpack: the timestamp extension "
        "type (-1), not a string.",
        extra_json_schema={"format": "date-time"},
    ),
]
Binary = Annotated[
    bytes,
    msgspec.Meta(
        description="Raw bytes. JSON: a base64 string (RFC 4648, padded). msgpack: bin, not "
        "a string."
    ),
]
# Marks the bytes that are a float32 vector, for encodings that carry one as numbers
# (connect-json: worker.wire.connect_json). Not part of the JSON Schema.
CONNECT_VECTOR = "connect_vector"
Embedding = Annotated[
    bytes,
    msgspec.Meta(
        description="Raw bytes. JSON: a base64 string (RFC 4648, padded). msgpack: bin, not "
        "a string.",
        extra={CONNECT_VECTOR: True},
    ),
]


class StrategyOverride(msgspec.Struct, frozen=True):
    """A document's request to be chunked with another strategy or other parameters."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    params: Annotated[
        dict[Annotated[str, msgspec.Meta(max_length=64)], ParamValue],
        msgspec.Meta(max_length=MAX_STRATEGY_PARAMS),
    ] = msgspec.field(default_factory=dict)


class DocumentEvent(msgspec.Struct, frozen=True):
    """A document to chunk, as producers send it to the input topic."""

    id: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_CHARS)]
    text: str
    content_type: ContentType = "text/plain"
    # Integer versions compare: an older one never replaces a newer one
    # (docs/concepts/lifecycle.md); strings are opaque (the last record by offset wins). Not part
    # of chunk ids.
    version: Annotated[str, msgspec.Meta(max_length=256)] | Int64 | None = None
    source: Annotated[str, msgspec.Meta(max_length=4096)] | None = None
    language: Annotated[str, msgspec.Meta(max_length=35)] | None = None
    metadata: Annotated[
        dict[MetadataKey, MetadataValue], msgspec.Meta(max_length=MAX_METADATA_ENTRIES)
    ] = msgspec.field(default_factory=dict)
    strategy: StrategyOverride | None = None


class SourceRecord(msgspec.Struct, frozen=True):
    """Where an event came from in Kafka."""

    topic: str
    partition: int
    offset: int


class ChunkSpan(msgspec.Struct, frozen=True):
    """One piece of a non-contiguous chunk: ``[start, end)`` into the document text."""

    start: int
    end: int


class ChunkEvent(msgspec.Struct, frozen=True):
    """One chunk of one document, keyed by ``chunk_id`` on the output topic (partitioned by
    ``doc_id``); a null value under a chunk id deletes that chunk (a tombstone)."""

    chunk_id: str
    doc_id: str
    doc_version: str | None
    index: int
    count: int
    text: str
    start_index: int
    end_index: int
    token_count: int
    strategy: str
    metadata: dict[str, Any]
    source: SourceRecord
    produced_at: Timestamp
    schema_version: int = SCHEMA_VERSION
    # Set only for strategies whose text is not one slice: ``text`` is these pieces joined
    # by a single "\n", in document order.
    spans: list[ChunkSpan] | None = None
    doc_source: str | None = None
    language: str | None = None
    # With CHUNKSTREAM_INCLUDE_EMBEDDINGS: the chunk text's embedding as float32
    # little-endian bytes (dimension = len / 4), L2-normalised (as the model gives it: every
    # model built or distilled here normalises); base64 in JSON.
    embedding: Embedding | None = None
    # Which model produced ``embedding``: its kind and identity, e.g. "onnx:3f2a…" or
    # "static:9c41…" (CHUNKSTREAM_RETRIEVAL_MODEL_DIR, which may differ from the boundary model).
    embedding_model: str | None = None


class DocumentChunksEvent(msgspec.Struct, frozen=True):
    """The current chunks of one document, keyed by ``doc_id`` on the optional documents
    topic (CHUNKSTREAM_DOCUMENTS_TOPIC); a null value under the id: the document was deleted.
    For sinks that delete by document rather than by chunk."""

    doc_id: str
    doc_version: str | None
    chunk_ids: list[str]  # in index order
    strategy: str
    source: SourceRecord
    produced_at: Timestamp
    schema_version: int = SCHEMA_VERSION


class RecordHeader(msgspec.Struct, frozen=True, array_like=True):
    key: str
    value: Binary | None


class DeadLetterEvent(msgspec.Struct, frozen=True):
    """An input record that could not be chunked, with everything needed to replay it."""

    error_kind: str
    error_message: str
    source: SourceRecord
    value: Binary | None
    key: Binary | None
    headers: list[RecordHeader]
    worker_version: str
    failed_at: Timestamp
    # The original value is cut at the dead-letter size limit so that the dead letter itself
    # can always be published; size and digest still identify the full original.
    value_truncated: bool = False
    value_size: int = 0
    value_sha256: str = ""
    doc_id: str | None = None
    schema_version: int = SCHEMA_VERSION


EVENT_TYPES: dict[str, type[msgspec.Struct]] = {
    "DocumentEvent": DocumentEvent,
    "ChunkEvent": ChunkEvent,
    "DeadLetterEvent": DeadLetterEvent,
    "DocumentChunksEvent": DocumentChunksEvent,
}
