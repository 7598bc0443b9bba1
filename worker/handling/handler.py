"""One input record, start to acknowledgement: decode → resolve → chunk → publish, or dead letter.

Invariants:

- A record ends in exactly one of three ways: everything it changes downstream is acknowledged
  (chunk events, tombstones of retracted chunks and its document state, written as one unit by
  worker.state.writing, which the handler only hands what was decided), or its
  dead letter is, or it changes nothing (a replay, an older version, a delete of an unknown
  document: worker.state.decisions). :meth:`DocumentHandler.process` returns only then; the caller
  may then mark the offset done.
- With the lifecycle, records of one document are handled one at a time, in arrival order
  (worker.handling.turns): each reads the state the one before it wrote.
- Everything that is the input's fault (a :class:`~worker.errors.DocumentError`, including a
  strategy raising on this one document) becomes a dead letter with the reason; nothing is
  silently dropped.
- A dead letter always fits in one record (:func:`dead_letter_room`), or its publish would
  fail forever and stall the partition.
- Transient Kafka errors are retried with backoff for as long as the worker runs (the offset
  stays uncommitted meanwhile); cancellation ends the attempts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from aiokafka.errors import KafkaError
from numpy.typing import NDArray

from worker.chunking import registry
from worker.chunking.types import Chunk, ContentType
from worker.config import Settings, chunk_cap
from worker.errors import (
    ChunkingFailed,
    DocumentError,
    InvalidUtf8,
    KeyMismatch,
    TooManyChunks,
    UnkeyedTombstone,
)
from worker.handling.resolver import StrategyResolver
from worker.handling.turns import DocumentTurns
from worker.kafka import permissions
from worker.kafka.link_policy import Backoff, Kind
from worker.kafka.publisher import Publisher
from worker.observability.metrics import Metrics
from worker.pipeline import EmbedFn, ModelRequired, chunk_document
from worker.state import decisions
from worker.state.writing import Withdrawn, Write, Writes
from worker.wire.codec import Headers, decode_document
from worker.wire.event_bytes import ChunkEventWriter
from worker.wire.events import DocumentChunksEvent, DocumentEvent, SourceRecord
from worker.wire.records import InputRecord, chunk_ids, dead_letter, doc_version
from worker.wire.rows import RowMapping, decode_row
from worker.wire.tracecontext import HeaderPropagation

if TYPE_CHECKING:
    from worker.inference.serving import Models

log = logging.getLogger(__name__)

# A dead letter's fields besides the original key, headers and value (message ≤ 2000 chars).
_DEAD_LETTER_OVERHEAD = 8 * 1024


def dead_letter_room(rec: InputRecord, max_value_bytes: int) -> tuple[InputRecord, int]:
    """The record as the dead letter carries it, and the bytes left for its original value.

    Key and headers come first, the original value gets the rest; oversized key or headers
    (more than half the room) are dropped (the offset and the value's digest stay)."""
    room = max_value_bytes - _DEAD_LETTER_OVERHEAD
    extra = len(rec.key or b"") + sum(len(k) + len(v or b"") + 8 for k, v in rec.headers)
    if extra > room // 2:
        rec = dataclasses.replace(rec, key=None, headers=[])
        extra = 0
    return rec, max(0, room - extra)


@dataclass(frozen=True)
class _Subject:
    """What a record is about, known before its turn: a document version (``doc``), a delete
    (``doc`` None, ``doc_id`` set), or an input error to dead-letter."""

    doc: DocumentEvent | None
    doc_id: str | None
    error: DocumentError | None = None


class DocumentHandler:
    """Turns one input record into published chunk events (and retractions) or a dead letter."""

    def __init__(
        self,
        settings: Settings,
        resolver: StrategyResolver,
        publisher: Publisher,
        metrics: Metrics,
        models: Models | None,
        writes: Writes,
    ) -> None:
        self.settings = settings
        self._resolver = resolver
        self._publisher = publisher
        self._metrics = metrics
        # Boundaries are placed with the boundary model; the vectors that go out with
        # include_embeddings come from the retrieval model (the same one unless configured).
        self._embed: EmbedFn | None = None if models is None else models.boundary.submit
        self._retrieval: EmbedFn | None = None if models is None else models.retrieval.submit
        self._retrieval_label = None if models is None else models.retrieval_label
        self._propagation = HeaderPropagation(settings.forward_headers)
        self._rows = row_mapping(settings)
        self._by_strategy: dict[str, tuple[Any, Any, Any]] = {}
        # How a record's outcome reaches Kafka and what is remembered (worker.state.writing:
        # the lifecycle's, or the append-only null object).
        self._writes = writes
        self._documents_listed = settings.documents_topic is not None
        self._turns = DocumentTurns()
        self._emit_unchanged = settings.unchanged_chunks == "emit"
        self._chunk_cap = chunk_cap(settings)
        # Events go out as bytes built from the document's shared parts (worker.wire.event_bytes):
        # the same bytes as the definition of an event (tests/support/reference_events.py), for
        # less CPU.
        self._writer = ChunkEventWriter(publisher.encoding)

    async def process(self, rec: InputRecord) -> None:
        """Handle ``rec`` until its outcome is acknowledged, retrying Kafka errors."""
        where = {"partition": rec.partition, "offset": rec.offset}
        # Decoded and its turn claimed in this first step, before anything can suspend it: the
        # consume loop starts records in offset order, so turns are claimed in that order.
        subject = self._subject(rec)
        ordered = self._writes.remembers and subject.doc_id is not None
        async with self._turns.turn((rec.partition, subject.doc_id) if ordered else None):
            await self._retrying(lambda: self._handle(rec, subject, where), where)

    def _subject(self, rec: InputRecord) -> _Subject:
        if rec.value is None:  # a tombstone: the key is the document
            if rec.key is None:
                error = UnkeyedTombstone("a null value without a key deletes nothing")
                return _Subject(None, None, error)
            try:
                return _Subject(None, rec.key.decode("utf-8"))
            except UnicodeDecodeError:
                return _Subject(None, None, InvalidUtf8("the tombstone's key is not UTF-8"))
        try:
            if self._rows is None:
                doc = decode_document(
                    rec.value, rec.headers, max_bytes=self.settings.max_document_bytes
                )
            else:
                doc = decode_row(
                    rec.value, rec.headers, self._rows, max_bytes=self.settings.max_document_bytes
                )
        except DocumentError as failure:
            return _Subject(None, None, failure)
        if self._writes.remembers and rec.key is not None and rec.key != doc.id.encode():
            mismatch = KeyMismatch(
                f"the record key {rec.key[:200]!r} is not the document id {doc.id[:200]!r}: "
                "a changelog's key is the document (its tombstone must delete this document)"
            )
            return _Subject(None, doc.id, mismatch)
        return _Subject(doc, doc.id)

    async def _handle(self, rec: InputRecord, subject: _Subject, where: dict[str, int]) -> None:
        m = self._metrics
        started = time.perf_counter()
        # Trace context and allowed headers: the same on every record of this document.
        headers = self._propagation.outgoing(rec.headers)
        try:
            if subject.error is not None:
                raise subject.error
            if subject.doc is None:
                assert subject.doc_id is not None
                await self._delete(rec, subject.doc_id, headers)
            else:
                await self._update(rec, subject.doc, headers, started)
        except DocumentError as error:
            doc_id = subject.doc_id
            if doc_id is not None and not isinstance(error, Withdrawn):
                await self._writes.withdraw_unfinished(rec.partition, doc_id, rec.offset, headers)
            log.warning(
                "dead letter",
                extra={**where, "doc_id": doc_id, "kind": error.kind, "reason": str(error)},
            )
            kept, room = dead_letter_room(rec, self._publisher.max_value_bytes)
            await self._publisher.publish_dead_letter(
                dead_letter(
                    kept, error, dt.datetime.now(dt.UTC), max_value_bytes=room, doc_id=doc_id
                ),
                headers,
            )
            m.documents_dead_lettered.labels(error.kind).inc()

    async def _update(
        self, rec: InputRecord, doc: DocumentEvent, headers: Headers, started: float
    ) -> None:
        s = self.settings
        m = self._metrics
        writes = self._writes
        state = writes.get(rec.partition, doc.id)
        unconfirmed = writes.unconfirmed(rec.partition, doc.id, state)
        early = decisions.update(state, rec.offset, doc.version, (), emit_unchanged=True)
        if isinstance(early, decisions.Skip):  # decided before any chunking work
            m.documents_skipped.labels(early.value).inc()
            if early is decisions.Skip.OLDER_VERSION:
                again = decisions.retracted_again(state, unconfirmed=unconfirmed)
                if again:
                    await writes.retract(doc.id, again, headers)
                    m.chunks_retracted.inc(len(again))
            return
        built = self._resolver.resolve(doc)
        chunks = await self._chunk(built, doc.text, doc.content_type)
        cap, setting = self._chunk_cap
        if len(chunks) > cap:
            raise TooManyChunks(f"{len(chunks)} chunks, above {cap}: {setting}")
        model = self._retrieval_label if s.include_embeddings else None
        ids = chunk_ids(doc.id, built.fingerprint, [c.text for c in chunks], model)
        decision = decisions.update(
            state,
            rec.offset,
            doc.version,
            ids,
            emit_unchanged=self._emit_unchanged,
            unconfirmed=unconfirmed,
        )
        assert not isinstance(decision, decisions.Skip)  # the same inputs as above
        emit = decision.emit
        vectors = await self._chunk_vectors([chunks[i] for i in emit]) if model else None
        source = SourceRecord(rec.topic, rec.partition, rec.offset)
        values = self._writer.values(
            doc,
            source,
            built.name,
            chunks,
            dt.datetime.now(dt.UTC),
            ids=ids,
            indexes=emit,
            embeddings=vectors,
            embedding_model=self._retrieval_label,
        )
        listing = None
        if self._documents_listed:
            listing = DocumentChunksEvent(
                doc_id=doc.id,
                doc_version=doc_version(doc),
                chunk_ids=list(ids),
                strategy=built.name,
                source=source,
                produced_at=dt.datetime.now(dt.UTC),
            )
        published = await writes.write(
            Write(
                rec.partition,
                doc.id,
                decision.state,
                state,
                headers,
                keys=[ids[i].encode() for i in emit],
                values=values,
                retract=decision.retract,
                listing=listing,
            )
        )
        chunks_produced, completed, seconds = self._strategy_metrics(built.name)
        chunks_produced.inc(len(values))
        if decision.unchanged:
            action = "emitted" if self._emit_unchanged else "skipped"
            m.chunks_unchanged.labels(action).inc(decision.unchanged)
        if decision.retract:
            m.chunks_retracted.inc(len(decision.retract))
        m.output_bytes.inc(published)
        completed.inc()
        seconds.observe(time.perf_counter() - started)
        m.end_to_end_lag.observe(max(0.0, time.time() - rec.timestamp_ms / 1000))

    async def _delete(self, rec: InputRecord, doc_id: str, headers: Headers) -> None:
        """A tombstone: every chunk of the document is tombstoned downstream."""
        m = self._metrics
        writes = self._writes
        state = writes.get(rec.partition, doc_id)
        unconfirmed = writes.unconfirmed(rec.partition, doc_id, state)
        decision = decisions.delete(state, rec.offset, unconfirmed=unconfirmed)
        if isinstance(decision, decisions.Skip):
            m.documents_skipped.labels(decision.value).inc()
            return
        await writes.write(
            Write(rec.partition, doc_id, decision.state, state, headers, retract=decision.retract)
        )
        m.documents_deleted.inc()
        m.chunks_retracted.inc(len(decision.retract))

    def _strategy_metrics(self, name: str) -> tuple[Any, Any, Any]:
        """The per-strategy metric children, looked up once per strategy, not per document."""
        children = self._by_strategy.get(name)
        if children is None:
            m = self._metrics
            children = self._by_strategy[name] = (
                m.chunks_produced.labels(name),
                m.documents_completed.labels(name),
                m.document_seconds.labels(name),
            )
        return children

    async def _chunk(
        self, built: registry.BuiltStrategy, text: str, ctype: ContentType
    ) -> list[Chunk]:
        try:
            return await chunk_document(built, text, ctype, self._embed)
        except DocumentError:
            raise
        except ModelRequired as exc:
            raise ChunkingFailed(str(exc)) from None
        except Exception as exc:  # a strategy bug must cost one document, not the partition
            log.exception("strategy %s failed", built.name)
            raise ChunkingFailed(f"{type(exc).__name__}: {exc}") from exc

    async def _chunk_vectors(self, chunks: Sequence[Chunk]) -> NDArray[np.float32]:
        assert self._retrieval is not None  # include_embeddings implies the model is loaded
        return await self._retrieval([c.text for c in chunks])

    async def _retrying(
        self, attempt: Callable[[], Awaitable[None]], where: dict[str, int]
    ) -> None:
        """Retry transient publish failures with backoff, forever (a refusal by the broker's
        ACLs is not transient: it is raised at once): the offset stays
        uncommitted meanwhile, and backpressure stops the intake once in-flight fills up.
        Cancellation (drain deadline, revoke) ends the attempts; the record is then replayed
        by whoever owns the partition next."""
        backoff = Backoff()
        while True:
            try:
                await attempt()
                return
            except KafkaError as exc:
                denied = permissions.refused(exc)
                if denied is not None:  # no retry can fix it (worker.kafka.permissions)
                    raise denied from None
                self._metrics.publish_retries.inc()
                delay = backoff.next(Kind.OTHER)
                log.warning(
                    "publish failed; retrying",
                    extra={**where, "error": repr(exc), "retry_in_s": round(delay, 1)},
                )
                await asyncio.sleep(delay)


def row_mapping(settings: Settings) -> RowMapping | None:
    """The row mapping of ``CHUNKSTREAM_INPUT_FORMAT=row`` (None: the input is documents)."""
    if settings.input_format != "row":
        return None
    return RowMapping(
        id=settings.row_id,
        text=settings.row_text,
        version=settings.row_version,
        content_type=settings.row_content_type,
        metadata=tuple(settings.row_metadata),
        unavailable_value=settings.row_unavailable_value,
    )
