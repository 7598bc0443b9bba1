"""The definition of a chunk event, built field by field as a ``ChunkEvent`` Struct and
encoded: what the worker's one-pass writer (worker.wire.event_bytes.ChunkEventWriter) must equal
byte for byte (tests/wire/test_event_bytes.py), and the "reference" writer
bench/event_path_bench.py compares it with. Only tests and benchmarks use it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from worker.chunking.types import Chunk
from worker.wire.codec import Encoding, EventEncoder
from worker.wire.events import ChunkEvent, ChunkSpan, DocumentEvent, SourceRecord
from worker.wire.records import InputRecord, chunk_ids, doc_version


def chunk_events(
    doc: DocumentEvent,
    record: InputRecord,
    strategy_name: str,
    strategy_fingerprint: str,
    chunks: Sequence[Chunk],
    now: dt.datetime,
    *,
    ids: Sequence[str] | None = None,
    indexes: Sequence[int] | None = None,
    embeddings: NDArray[np.float32] | None = None,
    embedding_model: str | None = None,
) -> list[ChunkEvent]:
    """The events of the chunks at ``indexes`` (default: every chunk), in index order; ``ids``
    when the caller computed them already (the same :func:`chunk_ids`); ``embeddings`` has one
    row per event. ``index`` and ``count`` are always the chunk's place in the whole
    document."""
    version = doc_version(doc)
    source = SourceRecord(record.topic, record.partition, record.offset)
    count = len(chunks)
    if ids is None:
        model = None if embeddings is None else embedding_model
        ids = chunk_ids(doc.id, strategy_fingerprint, [c.text for c in chunks], model)
    events = []
    chosen = range(count) if indexes is None else indexes
    for row, index in enumerate(chosen):
        chunk = chunks[index]
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
                else embeddings[row].astype("<f4", copy=False).tobytes(),
                embedding_model=None if embeddings is None else embedding_model,
            )
        )
    return events


class ReferenceEventWriter:
    """:func:`chunk_events`, each event encoded: the definition that
    :class:`worker.wire.event_bytes.ChunkEventWriter` (what the worker runs) equals byte for byte.
    ``bench/event_path_bench.py`` runs the handler with it."""

    def __init__(self, encoding: Encoding) -> None:
        self.encoding: Encoding = encoding
        self._encoder = EventEncoder(encoding)

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
        record = InputRecord(source.topic, source.partition, source.offset, None, None, [], 0)
        events = chunk_events(
            doc,
            record,
            strategy_name,
            "",  # only used to compute ids, which are given
            chunks,
            now,
            ids=ids,
            indexes=indexes,
            embeddings=embeddings,
            embedding_model=embedding_model,
        )
        return [self._encoder.encode(event) for event in events]
