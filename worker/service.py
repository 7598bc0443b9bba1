"""The worker's lifecycle: consume, chunk, publish, commit; drain on revoke and on shutdown.

At-least-once: an input offset is committed only after every chunk event of its document (or
its dead letter) was acknowledged by the broker, and only as part of the contiguous prefix of
finished offsets of its partition (see :mod:`worker.offsets`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np
from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord, OffsetAndMetadata
from numpy.typing import NDArray

from worker.chunking import registry
from worker.chunking.types import Chunk, ContentType, EmbeddingChunker, RuleChunker
from worker.codec import EventEncoder, decode_document
from worker.config import Settings, redacted
from worker.errors import ChunkingFailed, ConfigError, DocumentError
from worker.kafka import make_consumer, make_producer
from worker.offsets import OffsetTracker
from worker.publisher import Publisher
from worker.records import InputRecord, chunk_events, dead_letter
from worker.resolver import StrategyResolver

log = logging.getLogger("chunkstream.worker")

EmbedFn = Callable[[list[str]], Awaitable[NDArray[np.float32]]]

# Documents above this size are chunked in a thread so the event loop (heartbeats, commits,
# other documents' publishing) keeps running while pure-Python chunking works.
_THREAD_CHUNKING_CHARS = 64 * 1024
# Resume fetching once in-flight work falls to this fraction of a high watermark.
_LOW_WATERMARK = 0.5
_PUBLISH_RETRY_MAX_S = 30.0


class State(enum.Enum):
    CREATED = "created"
    STARTING = "starting"
    RUNNING = "running"
    DRAINING = "draining"
    STOPPED = "stopped"


@dataclass
class _InFlight:
    tasks: dict[TopicPartition, set[asyncio.Task[None]]] = field(default_factory=dict)
    documents: int = 0
    bytes: int = 0


class Worker:
    """One consumer-group member. ``await Worker(settings).run()`` until stopped."""

    def __init__(self, settings: Settings, *, embed: EmbedFn | None = None) -> None:
        self.settings = settings
        self.state = State.CREATED
        self._embed = embed
        self._stopping = asyncio.Event()
        self._tracker: OffsetTracker[TopicPartition] = OffsetTracker()
        self._owned: set[TopicPartition] = set()
        self._in_flight = _InFlight()
        self._paused = False
        self._last_commit = time.monotonic()
        self._fatal: BaseException | None = None
        self.stats = {"documents": 0, "chunks": 0, "dead_letters": 0, "rebalances": 0}

    # -- lifecycle -------------------------------------------------------------------------

    def request_stop(self) -> None:
        self._stopping.set()

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_signal, signum)

    def _on_signal(self, signum: int) -> None:
        if self._stopping.is_set():
            # Second signal: the operator wants out now. Nothing is committed past what was
            # already committed, so this loses nothing; it only replays more.
            log.warning("second signal: exiting at once", extra={"signal": signum})
            os._exit(128 + signum)
        log.info("signal received: draining", extra={"signal": signum})
        self._stopping.set()

    async def run(self) -> int:
        s = self.settings
        self.state = State.STARTING
        try:
            default = registry.build(
                s.strategy, s.strategy_params, registry.BuildContext(model_dir=s.model_dir)
            )
        except registry.StrategyError as exc:
            field = "STRATEGY" if isinstance(exc, registry.UnknownStrategy) else "STRATEGY_PARAMS"
            raise ConfigError(f"invalid setting CHUNKSTREAM_{field}: {exc}") from None
        self._resolver = StrategyResolver(
            default, frozenset(s.allowed_strategies), registry.BuildContext(model_dir=s.model_dir)
        )
        self._encoder = EventEncoder(s.encoding)
        log.info("starting", extra={"config": redacted(s), "strategy_id": default.fingerprint})

        self._consumer = make_consumer(s)
        self._producer = make_producer(s)
        await self._producer.start()
        try:
            await self._consumer.start()
            try:
                await self._check_topics()
                self._publisher = Publisher(
                    self._producer,
                    self._encoder,
                    output_topic=s.output_topic,
                    dlq_topic=s.dlq_topic,
                    max_record_bytes=s.max_record_bytes,
                )
                self._consumer.subscribe([s.input_topic], listener=_Rebalance(self))
                self.state = State.RUNNING
                await self._consume_loop()
                self.state = State.DRAINING
                await self._drain(s.drain_timeout_s)
                await self._commit()
            finally:
                await self._consumer.stop()  # leaves the group
        finally:
            await self._producer.stop()  # flushes what is still buffered
            self.state = State.STOPPED
        log.info("stopped", extra=self.stats)
        if self._fatal is not None:
            return 1
        return 0

    async def _check_topics(self) -> None:
        topics = await self._consumer.topics()
        s = self.settings
        missing = [t for t in (s.input_topic, s.output_topic, s.dlq_topic) if t not in topics]
        if missing:
            raise ConfigError(
                f"topics missing on {s.bootstrap_servers}: {', '.join(missing)} "
                "(check CHUNKSTREAM_INPUT_TOPIC/OUTPUT_TOPIC/DLQ_TOPIC, or create them with "
                "`chunkstream topics`)"
            )

    # -- the loop --------------------------------------------------------------------------

    async def _consume_loop(self) -> None:
        s = self.settings
        # getmany is called even while every partition is paused: it returns nothing then,
        # but keeps the member's poll interval alive so the group never evicts us. The short
        # timeout bounds how long a stop request waits for the loop to notice.
        while not self._stopping.is_set():
            room = max(1, s.max_in_flight_documents - self._in_flight.documents)
            batch = await self._consumer.getmany(timeout_ms=250, max_records=min(500, room))
            for tp, records in batch.items():
                if tp not in self._owned:
                    continue  # revoked while the fetch was in flight
                for record in records:
                    self._start(tp, record)
            self._apply_backpressure()
            if time.monotonic() - self._last_commit >= s.commit_interval_ms / 1000:
                await self._commit()

    def _start(self, tp: TopicPartition, record: ConsumerRecord[bytes, bytes]) -> None:
        self._tracker.add(tp, record.offset)
        size = len(record.value or b"")
        self._in_flight.documents += 1
        self._in_flight.bytes += size
        task = asyncio.create_task(self._process(tp, record, size))
        tasks = self._in_flight.tasks.setdefault(tp, set())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def _apply_backpressure(self) -> None:
        s = self.settings
        docs, size = self._in_flight.documents, self._in_flight.bytes
        assigned = self._consumer.assignment()
        if not self._paused and (
            docs >= s.max_in_flight_documents or size >= s.max_in_flight_bytes
        ):
            self._consumer.pause(*assigned)
            self._paused = True
            log.debug("paused", extra={"in_flight": docs, "in_flight_bytes": size})
        elif self._paused and (
            docs <= s.max_in_flight_documents * _LOW_WATERMARK
            and size <= s.max_in_flight_bytes * _LOW_WATERMARK
        ):
            self._consumer.resume(*assigned)
            self._paused = False
            log.debug("resumed", extra={"in_flight": docs, "in_flight_bytes": size})

    # -- one document ----------------------------------------------------------------------

    async def _process(
        self, tp: TopicPartition, record: ConsumerRecord[bytes, bytes], size: int
    ) -> None:
        where = {"partition": tp.partition, "offset": record.offset}
        rec = InputRecord(
            topic=tp.topic,
            partition=tp.partition,
            offset=record.offset,
            key=record.key,
            value=record.value,
            headers=list(record.headers),
            timestamp_ms=record.timestamp,
        )
        try:
            await self._retrying(lambda: self._handle(rec, where), where)
            if self._tracker.mark_done(tp, record.offset):
                self.stats["documents"] += 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Not the input's fault and not a transient Kafka error: a bug. The offset must
            # not be skipped, and silently stalling the partition is worse than a restart.
            log.exception("unexpected failure; stopping the worker", extra=where)
            self._fatal = exc
            self._stopping.set()
        finally:
            self._in_flight.documents -= 1
            self._in_flight.bytes -= size

    async def _handle(self, rec: InputRecord, where: dict[str, int]) -> None:
        s = self.settings
        doc_id: str | None = None
        try:
            doc = decode_document(rec.value, rec.headers, max_bytes=s.max_document_bytes)
            doc_id = doc.id
            built = self._resolver.resolve(doc)
            chunks = await self._chunk(built, doc.text, doc.content_type)
            events = chunk_events(
                doc, rec, built.name, built.fingerprint, chunks, dt.datetime.now(dt.UTC)
            )
            await self._publisher.publish_chunks(doc.id, events)
            self.stats["chunks"] += len(events)
        except DocumentError as error:
            log.warning(
                "dead letter",
                extra={**where, "doc_id": doc_id, "kind": error.kind, "reason": str(error)},
            )
            await self._publisher.publish_dead_letter(
                dead_letter(
                    rec,
                    error,
                    dt.datetime.now(dt.UTC),
                    max_value_bytes=self._publisher.max_value_bytes - 64 * 1024,
                    doc_id=doc_id,
                )
            )
            self.stats["dead_letters"] += 1

    async def _chunk(
        self, built: registry.BuiltStrategy, text: str, ctype: ContentType
    ) -> list[Chunk]:
        chunker = built.chunker
        try:
            if isinstance(chunker, EmbeddingChunker):
                if self._embed is None:
                    raise ChunkingFailed(f"strategy {built.name!r} needs the embedding model")
                plan = chunker.plan(text, content_type=ctype)
                vectors = await self._embed(list(plan.texts))
                return chunker.assemble(plan, vectors)
            assert isinstance(chunker, RuleChunker)
            if len(text) >= _THREAD_CHUNKING_CHARS:
                return await asyncio.to_thread(chunker.chunk, text, content_type=ctype)
            return chunker.chunk(text, content_type=ctype)
        except DocumentError:
            raise
        except Exception as exc:  # a strategy bug must cost one document, not the partition
            log.exception("strategy %s failed", built.name)
            raise ChunkingFailed(f"{type(exc).__name__}: {exc}") from exc

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
                log.warning(
                    "publish failed; retrying",
                    extra={**where, "error": repr(exc), "retry_in_s": delay},
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, _PUBLISH_RETRY_MAX_S)

    # -- commits, revocation, drain ----------------------------------------------------------

    async def _commit(self, partitions: set[TopicPartition] | None = None) -> None:
        self._last_commit = time.monotonic()
        offsets = self._tracker.committable(partitions)
        if not offsets:
            return
        try:
            await self._consumer.commit({tp: OffsetAndMetadata(o, "") for tp, o in offsets.items()})
        except KafkaError as exc:
            # A commit can fail during a rebalance; the offsets stay committable and go out
            # with the next commit, or the new owner replays them (at-least-once).
            log.warning("commit failed", extra={"error": repr(exc)})
            return
        self._tracker.committed(offsets)

    async def _drain(
        self, deadline_s: float, partitions: set[TopicPartition] | None = None
    ) -> None:
        tasks = [
            task
            for tp, group in self._in_flight.tasks.items()
            if partitions is None or tp in partitions
            for task in group
        ]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=deadline_s)
        for task in pending:
            task.cancel()
        if pending:
            log.warning("drain deadline passed", extra={"abandoned": len(pending)})
            await asyncio.wait(pending)

    async def on_revoked(self, revoked: set[TopicPartition]) -> None:
        self._owned -= revoked
        # Bounded by the rebalance timeout: the group waits for us, so leave headroom.
        budget = max(1.0, self.settings.rebalance_timeout_ms / 1000 - 5.0)
        await self._drain(min(budget, self.settings.drain_timeout_s), revoked)
        await self._commit(revoked)
        self._tracker.forget(revoked)
        for tp in revoked:
            self._in_flight.tasks.pop(tp, None)

    def on_assigned(self, assigned: set[TopicPartition]) -> None:
        self.stats["rebalances"] += 1
        self._owned |= assigned
        log.info(
            "partitions assigned",
            extra={"partitions": sorted(f"{tp.topic}:{tp.partition}" for tp in assigned)},
        )
        if self._paused and assigned:
            # The new assignment starts unpaused in aiokafka; keep our state consistent.
            self._consumer.pause(*assigned)


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, worker: Worker) -> None:
        self._worker = worker

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._worker.on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._worker.on_assigned(set(assigned))
