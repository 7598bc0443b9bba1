"""One input record, start to acknowledgement: decode → resolve → chunk → publish, or dead letter.

Invariants:

- A record ends in exactly one of two ways: all its chunk events are acknowledged, or its dead
  letter is. :meth:`DocumentHandler.process` returns only then; the caller may then mark the
  offset done.
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
from typing import TYPE_CHECKING, Any

import numpy as np
from aiokafka.errors import KafkaError
from numpy.typing import NDArray

from worker.chunking import registry
from worker.chunking.types import Chunk, ContentType
from worker.codec import decode_document
from worker.config import Settings
from worker.errors import ChunkingFailed, DocumentError, TooManyChunks
from worker.metrics import Metrics
from worker.pipeline import EmbedFn, ModelRequired, chunk_document
from worker.publisher import Publisher
from worker.records import InputRecord, chunk_events, dead_letter
from worker.resolver import StrategyResolver
from worker.tracecontext import HeaderPropagation

if TYPE_CHECKING:
    from worker.inference import Models

log = logging.getLogger("chunkstream.worker")

_PUBLISH_RETRY_MAX_S = 30.0
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


class DocumentHandler:
    """Turns one input record into published chunk events or a dead letter."""

    def __init__(
        self,
        settings: Settings,
        resolver: StrategyResolver,
        publisher: Publisher,
        metrics: Metrics,
        models: Models | None,
        stats: dict[str, int],
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
        self._stats = stats
        self._propagation = HeaderPropagation(settings.forward_headers)
        self._by_strategy: dict[str, tuple[Any, Any, Any]] = {}

    async def process(self, rec: InputRecord) -> None:
        """Handle ``rec`` until its outcome is acknowledged, retrying Kafka errors."""
        where = {"partition": rec.partition, "offset": rec.offset}
        await self._retrying(lambda: self._handle(rec, where), where)

    async def _handle(self, rec: InputRecord, where: dict[str, int]) -> None:
        s = self.settings
        m = self._metrics
        doc_id: str | None = None
        started = time.perf_counter()
        # Trace context and allowed headers: the same on every record of this document.
        headers = self._propagation.outgoing(rec.headers)
        try:
            doc = decode_document(rec.value, rec.headers, max_bytes=s.max_document_bytes)
            doc_id = doc.id
            built = self._resolver.resolve(doc)
            chunks = await self._chunk(built, doc.text, doc.content_type)
            if len(chunks) > s.max_chunks_per_document:
                raise TooManyChunks(
                    f"{len(chunks)} chunks, above CHUNKSTREAM_MAX_CHUNKS_PER_DOCUMENT="
                    f"{s.max_chunks_per_document}"
                )
            vectors = await self._chunk_vectors(chunks) if s.include_embeddings else None
            events = chunk_events(
                doc,
                rec,
                built.name,
                built.fingerprint,
                chunks,
                dt.datetime.now(dt.UTC),
                embeddings=vectors,
                embedding_model=self._retrieval_label,
            )
            published = await self._publisher.publish_chunks(doc.id, events, headers)
            self._stats["chunks"] += len(events)
            chunks_produced, completed, seconds = self._strategy_metrics(built.name)
            chunks_produced.inc(len(events))
            m.output_bytes.inc(published)
            completed.inc()
            seconds.observe(time.perf_counter() - started)
            m.end_to_end_lag.observe(max(0.0, time.time() - rec.timestamp_ms / 1000))
        except DocumentError as error:
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
            self._stats["dead_letters"] += 1
            m.documents_dead_lettered.labels(error.kind).inc()

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
        """Retry transient publish failures with backoff, forever: the offset stays
        uncommitted meanwhile, and backpressure stops the intake once in-flight fills up.
        Cancellation (drain deadline, revoke) ends the attempts; the record is then replayed
        by whoever owns the partition next."""
        delay = 0.5
        while True:
            try:
                await attempt()
                return
            except KafkaError as exc:
                self._metrics.publish_retries.inc()
                log.warning(
                    "publish failed; retrying",
                    extra={**where, "error": repr(exc), "retry_in_s": delay},
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, _PUBLISH_RETRY_MAX_S)
