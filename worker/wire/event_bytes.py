"""Chunk events to bytes on the worker's hot path: what encoding the definition of an event
gives (``tests/support/reference_events.py``), for less CPU.

Invariants:

- :meth:`ChunkEventWriter.values` returns, byte for byte, ``[encoder.encode(e) for e in
  chunk_events(...)]`` for the same arguments, in msgpack and in JSON
  (``tests/wire/test_event_bytes.py`` compares them over documents with and without metadata,
  spans, embeddings and versions, and through the handler). ``chunk_events`` in
  ``tests/support/reference_events.py`` stays the definition of an event, field by field; this
  is how the worker writes it.
- The document's shared values (id, version, count, strategy, metadata, source record,
  timestamp, source, language, model) are computed once per document, not per event.

Why: the definition's per-event cost is building each ``ChunkEvent`` from keyword arguments
(msgspec parses keywords one by one) plus a ``None`` check per optional field; here each event
is one positional construction and one encode, which costs less CPU per event
(``bench/event_path_bench.py`` runs both writers; docs/benchmarks.md). Writing the bytes from
pre-encoded pieces (the document's parts encoded once, each chunk's values encoded and joined)
costs the same as this, with several C calls per event instead of two; this is the simpler of
the two.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

import msgspec
import numpy as np
from numpy.typing import NDArray

from worker.chunking.types import Chunk
from worker.wire.codec import Encoding
from worker.wire.connect_json import ConnectJsonEncoder
from worker.wire.events import SCHEMA_VERSION, ChunkEvent, ChunkSpan, DocumentEvent, SourceRecord

# ChunkEvent's fields in declaration order: the order of the positional construction below.
_FIELDS = (
    "chunk_id",
    "doc_id",
    "doc_version",
    "index",
    "count",
    "text",
    "start_index",
    "end_index",
    "token_count",
    "strategy",
    "metadata",
    "source",
    "produced_at",
    "schema_version",
    "spans",
    "doc_source",
    "language",
    "embedding",
    "embedding_model",
)
# Exactly the fields, not a prefix: a field appended to ChunkEvent and unknown here would go
# out with its default from the positional construction below, silently.
if ChunkEvent.__struct_fields__ != _FIELDS:
    raise ImportError(
        "worker.wire.event_bytes: ChunkEvent's fields changed; update _FIELDS and values"
    )


class ChunkEventWriter:
    """Encodes a document's chunk events in one format (one writer per worker)."""

    def __init__(self, encoding: Encoding) -> None:
        self.encoding: Encoding = encoding
        self._encode: Callable[[ChunkEvent], bytes]
        if encoding == "connect-json":
            self._encode = ConnectJsonEncoder(ChunkEvent).encode
        elif encoding == "msgpack":
            self._encode = msgspec.msgpack.Encoder().encode
        else:
            self._encode = msgspec.json.Encoder().encode

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
        arguments mean what they mean for the definition's ``chunk_events``
        (tests/support/reference_events.py)."""
        encode = self._encode
        event = ChunkEvent
        doc_id, doc_source, language, doc_metadata = doc.id, doc.source, doc.language, doc.metadata
        version = None if doc.version is None else str(doc.version)
        count = len(chunks)
        model = None if embeddings is None else embedding_model
        chosen = range(count) if indexes is None else indexes
        out = []
        for row, index in enumerate(chosen):
            chunk = chunks[index]
            own = chunk.metadata
            spans = chunk.spans
            out.append(
                encode(
                    event(
                        ids[index],
                        doc_id,
                        version,
                        index,
                        count,
                        chunk.text,
                        chunk.start_index,
                        chunk.end_index,
                        chunk.token_count,
                        strategy_name,
                        # Strategy metadata first, then the document's (chunk_events' rule).
                        {**own, **doc_metadata} if own else doc_metadata,
                        source,
                        now,
                        SCHEMA_VERSION,
                        None if spans is None else [ChunkSpan(s.start, s.end) for s in spans],
                        doc_source,
                        language,
                        None
                        if embeddings is None
                        else embeddings[row].astype("<f4", copy=False).tobytes(),
                        model,
                    )
                )
            )
        return out
