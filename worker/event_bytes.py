"""Chunk events straight to bytes: what encoding :func:`worker.records.chunk_events` gives, built
from one document's shared encoded parts and each chunk's own values.

Invariants:

- :meth:`ChunkEventWriter.values` returns, byte for byte, ``[encoder.encode(e) for e in
  chunk_events(...)]`` for the same arguments, in msgpack and in JSON (``tests/test_event_bytes.py``
  compares them over documents with and without metadata, spans, embeddings and versions).
  :func:`worker.records.chunk_events` stays the definition of an event; this is how the worker
  writes it.
- An event is a map of every :class:`~worker.events.ChunkEvent` field in declaration order
  (msgspec writes a Struct so, defaults included). A field's encoded key and value are the same
  bytes whether msgspec writes them inside the Struct or alone, so an event is: the map's
  header, then per field its key and value, then (JSON) the closing brace. Everything but the
  chunk's own fields is the same for every event of a document, and is encoded once per
  document.

Why: building a ``ChunkEvent`` per chunk (19 fields, a ``SourceRecord``, a span list, a merged
metadata dict) and encoding it cost ~3-6 µs per event on the worker's event-loop thread, as much
as sending it; here the shared parts are encoded once and each event is a handful of small
encodes and one join (docs/worker.md, "The worker's own CPU by stage").
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from worker.chunking.types import Chunk
from worker.codec import Encoding
from worker.events import SCHEMA_VERSION, ChunkEvent, ChunkSpan, DocumentEvent, SourceRecord

# ChunkEvent's fields in declaration order (the order msgspec writes them), split into the
# runs the writer fills: the chunk's own values, and the document's, which are the same for
# every event of a document. A field added to ChunkEvent must be placed here (the import fails
# otherwise, and tests/test_event_bytes.py checks the bytes).
_LAYOUT = (
    ("own", ("chunk_id",)),
    ("doc", ("doc_id", "doc_version")),
    ("own", ("index",)),
    ("doc", ("count",)),
    ("own", ("text", "start_index", "end_index", "token_count")),
    ("doc", ("strategy",)),
    ("own", ("metadata",)),
    ("doc", ("source", "produced_at", "schema_version")),
    ("own", ("spans",)),
    ("doc", ("doc_source", "language")),
    ("own", ("embedding",)),
    ("doc", ("embedding_model",)),
)
if tuple(f for _, names in _LAYOUT for f in names) != ChunkEvent.__struct_fields__:
    raise ImportError("worker.event_bytes: _LAYOUT no longer matches ChunkEvent's fields")


class ChunkEventWriter:
    """Encodes a document's chunk events in one format (one writer per worker)."""

    def __init__(self, encoding: Encoding) -> None:
        self.encoding: Encoding = encoding
        encoder: msgspec.msgpack.Encoder | msgspec.json.Encoder = (
            msgspec.msgpack.Encoder() if encoding == "msgpack" else msgspec.json.Encoder()
        )
        self._encode = encoder.encode
        count = len(ChunkEvent.__struct_fields__)
        if encoding == "msgpack":
            # A map of ``count`` pairs (fixmap up to 15, then map16), each key then value.
            head = bytes([0x80 | count]) if count < 16 else b"\xde" + count.to_bytes(2, "big")
            self._key = {n: self._encode(n) for n in ChunkEvent.__struct_fields__}
            self._tail = b""
        else:
            # An object: {"first":value,"next":value...}; every field but the first after a comma.
            head = b"{"
            self._key = {n: b',"' + n.encode() + b'":' for n in ChunkEvent.__struct_fields__}
            self._tail = b"}"
        self._head = head + self._key["chunk_id"].lstrip(b",")
        self._none = self._encode(None)

    def _fields(self, values: dict[str, Any]) -> bytes:
        """Consecutive fields as they sit inside the event: a dict encodes its pairs exactly
        as the Struct does (keys in insertion order), without its own header (msgpack: the
        one-byte fixmap marker; JSON: the braces, and a comma goes before them instead)."""
        encoded = self._encode(values)
        return encoded[1:] if self.encoding == "msgpack" else b"," + encoded[1:-1]

    def values(
        self,
        doc: DocumentEvent,
        source: SourceRecord,
        strategy_name: str,
        chunks: Sequence[Chunk],
        now: dt.datetime,
        *,
        ids: Sequence[str],
        indexes: Sequence[int] | None = None,
        embeddings: NDArray[np.float32] | None = None,
        embedding_model: str | None = None,
    ) -> list[bytes]:
        """The encoded events of the chunks at ``indexes`` (default: all), in that order; the
        arguments mean what they mean for :func:`worker.records.chunk_events`."""
        key, fields, encode, none = self._key, self._fields, self._encode, self._none
        version = None if doc.version is None else str(doc.version)
        # The document's runs, each followed by the key of the chunk's next field.
        before_index = fields({"doc_id": doc.id, "doc_version": version}) + key["index"]
        before_text = fields({"count": len(chunks)}) + key["text"]
        before_metadata = fields({"strategy": strategy_name}) + key["metadata"]
        before_spans = (
            fields({"source": source, "produced_at": now, "schema_version": SCHEMA_VERSION})
            + key["spans"]
        )
        before_vector = (
            fields({"doc_source": doc.source, "language": doc.language}) + key["embedding"]
        )
        model = None if embeddings is None else embedding_model
        tail = fields({"embedding_model": model}) + self._tail
        start_key, end_key, tokens_key = key["start_index"], key["end_index"], key["token_count"]
        doc_metadata = doc.metadata
        metadata_bytes = encode(doc_metadata)
        # From the metadata on, an event without metadata of its own, spans or a vector is
        # the same bytes for the whole document.
        plain_rest = b"".join(
            (before_metadata, metadata_bytes, before_spans, none, before_vector, none, tail)
        )
        head = self._head
        chosen = range(len(chunks)) if indexes is None else indexes
        out = []
        for row, index in enumerate(chosen):
            chunk = chunks[index]
            own = chunk.metadata
            spans = chunk.spans
            if own or spans is not None or embeddings is not None:
                rest = b"".join(
                    (
                        before_metadata,
                        # Strategy metadata first, then the document's (chunk_events' rule).
                        encode({**own, **doc_metadata}) if own else metadata_bytes,
                        before_spans,
                        none
                        if spans is None
                        else encode([ChunkSpan(s.start, s.end) for s in spans]),
                        before_vector,
                        none
                        if embeddings is None
                        else encode(embeddings[row].astype("<f4", copy=False).tobytes()),
                        tail,
                    )
                )
            else:
                rest = plain_rest
            out.append(
                b"".join(
                    (
                        head,
                        encode(ids[index]),
                        before_index,
                        encode(index),
                        before_text,
                        encode(chunk.text),
                        start_key,
                        encode(chunk.start_index),
                        end_key,
                        encode(chunk.end_index),
                        tokens_key,
                        encode(chunk.token_count),
                        rest,
                    )
                )
            )
        return out
