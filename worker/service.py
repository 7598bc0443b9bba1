"""The worker's lifecycle: consume, chunk, publish, commit; drain on revoke and on shutdown.

At-least-once: an input offset is committed only after every chunk event of its document (or
its dead letter) was acknowledged by the broker, and only as part of the contiguous prefix of
finished offsets of its partition (see :mod:`worker.offsets`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import enum
import logging
import os
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaConnectionError, KafkaError
from aiokafka.structs import ConsumerRecord, OffsetAndMetadata
from numpy.typing import NDArray

from worker.batcher import Batcher
from worker.chunking import registry
from worker.chunking.types import Chunk, ContentType, EmbeddingChunker, RuleChunker
from worker.codec import EventEncoder, decode_document
from worker.config import Settings, redacted
from worker.embedding.backend import EmbeddingBackend
from worker.embedding.static import DEFAULT_STATIC_DIR
from worker.errors import ChunkingFailed, ConfigError, DocumentError, TooManyChunks
from worker.health import HealthServer
from worker.kafka import (
    diagnose_connection,
    make_consumer,
    make_producer,
    topic_record_limits,
)
from worker.metrics import Metrics
from worker.offsets import OffsetTracker
from worker.publisher import Publisher
from worker.records import InputRecord, chunk_events, dead_letter
from worker.resolver import PATH_PARAMS, StrategyResolver

log = logging.getLogger("chunkstream.worker")

EmbedFn = Callable[[Sequence[str]], Awaitable[NDArray[np.float32]]]
# Unset CHUNKSTREAM_MODEL_DIR: boundaries by the distilled static model (seam F1 within a few
# points of the transformer at 60–100× its speed, docs/semantic.md), retrieval vectors by the
# transformer (unset CHUNKSTREAM_RETRIEVAL_MODEL_DIR: the boundary model when one is named).
DEFAULT_MODEL_DIR = Path(".cache/models/all-MiniLM-L6-v2")
DEFAULT_BOUNDARY_MODEL_DIR = DEFAULT_STATIC_DIR

# Documents above this size are chunked in a thread so the event loop (heartbeats, commits,
# other documents' publishing) keeps running while pure-Python chunking works.
_THREAD_CHUNKING_CHARS = 64 * 1024
# Resume fetching once in-flight work falls to this fraction of a high watermark.
_LOW_WATERMARK = 0.5
_PUBLISH_RETRY_MAX_S = 30.0
# A dead letter's fields besides the original key, headers and value (message ≤ 2000 chars).
_DEAD_LETTER_OVERHEAD = 8 * 1024
_LOOP_LAG_TICK_S = 0.1
_SAMPLE_EVERY_S = 1.0


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

    def __init__(
        self,
        settings: Settings,
        *,
        backend: EmbeddingBackend | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.state = State.CREATED
        self.metrics = metrics or Metrics()
        self._backend = backend
        self._batcher: Batcher | None = None
        self._embed: EmbedFn | None = None
        # The model of the vectors that go out with chunks (CHUNKSTREAM_RETRIEVAL_MODEL_DIR):
        # the boundary model's batcher unless it is another directory.
        self._retrieval_batcher: Batcher | None = None
        self._retrieval_embed: EmbedFn | None = None
        self._retrieval_label: str | None = None
        self._health: HealthServer | None = None
        self._joined = False
        self._needs_model = False
        self._background: set[asyncio.Task[None]] = set()
        self._loop_lag_window: list[float] = []
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

    @property
    def health_port(self) -> int | None:
        return None if self._health is None else self._health.port

    def readiness(self) -> tuple[bool, dict[str, object]]:
        """Ready = consuming for real: model loaded (if needed), group joined, producer up."""
        checks: dict[str, object] = {
            "state": self.state.value,
            "model_loaded": self._batcher is not None or not self._needs_model,
            "group_joined": self._joined,
            "producer_connected": self.state in (State.RUNNING, State.DRAINING),
        }
        ready = self.state is State.RUNNING and all(
            checks[k] for k in ("model_loaded", "group_joined", "producer_connected")
        )
        return ready, checks

    async def run(self) -> int:
        s = self.settings
        self.state = State.STARTING
        _check_boundary_model(s)
        context = registry.BuildContext(model_dir=s.model_dir, model_id=model_identity(s))
        default = self._build_default_strategy(context)
        trusted = {v for k, v in s.strategy_params.items() if k in PATH_PARAMS} | (
            {s.model_dir} if s.model_dir else set()
        )
        self._resolver = StrategyResolver(
            default, frozenset(s.allowed_strategies), context, frozenset(trusted)
        )
        self._needs_model = (
            default.needs_model
            or s.include_embeddings
            or any(
                registry.get(name).needs_model
                for name in s.allowed_strategies
                if name in registry.names()
            )
            or ("*" in s.allowed_strategies and s.model_dir is not None)
        )
        self._encoder = EventEncoder(s.encoding)
        log.info(
            "starting",
            extra={
                "config": redacted(s),
                "strategy_id": default.fingerprint,
                "needs_model": self._needs_model,
            },
        )
        async with contextlib.AsyncExitStack() as stack:
            if s.metrics_port:
                self._health = HealthServer(
                    self.metrics, self.readiness, s.metrics_host, s.metrics_port
                )
                await self._health.start()
                stack.push_async_callback(self._health.stop)
            stack.push_async_callback(self._stop_background)
            self._spawn(self._watch_loop_lag())
            if self._needs_model:
                await self._start_batcher(stack)

            self._consumer = make_consumer(s)
            self._producer = make_producer(s)
            await self._start_client(self._producer)
            stack.push_async_callback(self._producer.stop)  # flushes what is still buffered
            await self._start_client(self._consumer)
            stack.push_async_callback(self._consumer.stop)  # leaves the group
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
            self._spawn(self._sample())
            await self._consume_loop()
            self.state = State.DRAINING
            await self._drain(s.drain_timeout_s)
            await self._commit()
        self.state = State.STOPPED
        log.info("stopped", extra=self.stats)
        if self._fatal is not None:
            return 1
        return 0

    async def _start_client(self, client: AIOKafkaProducer | AIOKafkaConsumer) -> None:
        """A broker that refuses us at start-up (credentials, TLS trust, address) is a
        configuration problem: exit with a message naming the setting, not a traceback."""
        try:
            await client.start()
        except KafkaConnectionError:
            for other in (self._producer, self._consumer):
                with contextlib.suppress(Exception):
                    await other.stop()
            raise ConfigError(await diagnose_connection(self.settings)) from None

    def _build_default_strategy(self, context: registry.BuildContext) -> registry.BuiltStrategy:
        s = self.settings
        try:
            return registry.build(s.strategy, s.strategy_params, context)
        except registry.StrategyError as exc:
            field = "STRATEGY" if isinstance(exc, registry.UnknownStrategy) else "STRATEGY_PARAMS"
            raise ConfigError(f"invalid setting CHUNKSTREAM_{field}: {exc}") from None

    async def _start_batcher(self, stack: contextlib.AsyncExitStack) -> None:
        """The boundary model and, when it is another directory, the retrieval model: each
        loaded once, each behind its own batcher (their batches cannot mix)."""
        s = self.settings
        boundary_dir = Path(s.model_dir) if s.model_dir else DEFAULT_BOUNDARY_MODEL_DIR
        retrieval_dir = Path(s.retrieval_model_dir or s.model_dir or DEFAULT_MODEL_DIR)
        backend, label = await self._load_model(boundary_dir, "MODEL_DIR")
        self._batcher = await self._open_batcher(stack, backend)
        self._embed = self._retrieval_embed = self._batcher.submit
        self._retrieval_label = label
        if s.include_embeddings and not _same_directory(retrieval_dir, boundary_dir):
            backend, self._retrieval_label = await self._load_model(
                retrieval_dir, "RETRIEVAL_MODEL_DIR"
            )
            self._retrieval_batcher = await self._open_batcher(stack, backend)
            self._retrieval_embed = self._retrieval_batcher.submit

    async def _load_model(self, model_dir: Path, setting: str) -> tuple[EmbeddingBackend, str]:
        """The backend and its label ("kind:identity") for chunk events."""
        s = self.settings
        if self._backend is not None:
            return self._backend, "injected"
        from worker.embedding.embedder import intra_op_threads_for
        from worker.embedding.loading import load_model
        from worker.embedding.manifest import ManifestError

        try:
            # Loading takes seconds: off the loop, so /healthz keeps answering meanwhile.
            # One session serves every concurrent batch; its threads are shared out among them.
            loaded = await asyncio.to_thread(
                load_model,
                model_dir,
                int8=s.model_int8,
                intra_op_threads=s.inference_threads or intra_op_threads_for(s.concurrent_batches),
            )
        except ManifestError as exc:
            raise ConfigError(f"invalid setting CHUNKSTREAM_{setting}: {exc}") from None
        if setting == "MODEL_DIR":  # the info metric names the boundary model
            self.metrics.model_info.info(
                {
                    "dir": str(model_dir),
                    "variant": loaded.variant,
                    "dimension": str(loaded.backend.dimension),
                }
            )
        return loaded.backend, f"{loaded.kind}:{loaded.identity}"

    async def _open_batcher(
        self, stack: contextlib.AsyncExitStack, backend: EmbeddingBackend
    ) -> Batcher:
        s = self.settings
        return await stack.enter_async_context(
            Batcher(
                _MeteredBackend(backend, self.metrics),
                max_batch_tokens=s.max_batch_tokens,
                max_batch_size=s.max_batch_size,
                max_wait_ms=s.max_wait_ms,
                queue_high_tokens=s.max_queued_tokens,
                queue_low_tokens=s.max_queued_tokens // 2,
                concurrent_batches=s.concurrent_batches,
            )
        )

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _stop_background(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    async def _watch_loop_lag(self) -> None:
        """How late a 100 ms timer fires = how long something blocked the loop."""
        loop = asyncio.get_running_loop()
        window = max(1, int(10 / _LOOP_LAG_TICK_S))
        while True:
            before = loop.time()
            await asyncio.sleep(_LOOP_LAG_TICK_S)
            lag = max(0.0, loop.time() - before - _LOOP_LAG_TICK_S)
            self.metrics.loop_lag.observe(lag)
            self._loop_lag_window.append(lag)
            del self._loop_lag_window[:-window]
            self.metrics.loop_lag_max.set(max(self._loop_lag_window))

    async def _sample(self) -> None:
        """Levels that change without an event of ours: lag, queue depth, in-flight."""
        m = self.metrics
        while True:
            m.ready.set(1 if self.readiness()[0] else 0)
            m.in_flight_documents.set(self._in_flight.documents)
            m.in_flight_bytes.set(self._in_flight.bytes)
            batchers = [b for b in (self._batcher, self._retrieval_batcher) if b is not None]
            if batchers:
                m.batcher_queue_tokens.set(sum(b.stats.queue_tokens for b in batchers))
            assigned = self._consumer.assignment()
            m.assigned_partitions.set(len(assigned))
            m.paused_partitions.set(len(self._consumer.paused()))
            for tp in assigned:
                highwater = self._consumer.highwater(tp)
                if highwater is None:
                    continue
                with contextlib.suppress(Exception):  # position of a just-revoked partition
                    position = await self._consumer.position(tp)
                    m.consumer_lag.labels(str(tp.partition)).set(max(0, highwater - position))
            await asyncio.sleep(_SAMPLE_EVERY_S)

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
        # The producer batches many small records up to max_record_bytes; a topic that accepts
        # less refuses whole batches, and every document in them would be dead-lettered.
        try:
            limits = await topic_record_limits(s, [s.output_topic, s.dlq_topic])
        except KafkaError as exc:  # e.g. no DescribeConfigs permission: cannot check
            log.warning("could not read the topics' max.message.bytes", extra={"error": repr(exc)})
            limits = {}
        for topic, limit in sorted(limits.items()):
            if limit < s.max_record_bytes:
                raise ConfigError(
                    f"invalid setting CHUNKSTREAM_MAX_RECORD_BYTES (--max-record-bytes): "
                    f"{s.max_record_bytes} is above max.message.bytes={limit} of topic "
                    f"{topic}; lower it to at most {limit} or raise the topic's limit"
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
        self.metrics.documents_consumed.inc()
        self.metrics.input_bytes.inc(size)
        self._in_flight.documents += 1
        self._in_flight.bytes += size
        task = asyncio.create_task(self._process(tp, record, size))
        tasks = self._in_flight.tasks.setdefault(tp, set())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def _apply_backpressure(self) -> None:
        s = self.settings
        docs, size = self._in_flight.documents, self._in_flight.bytes
        # The batcher's watermark has its own hysteresis (high → low), so read it as is.
        queue_full = any(
            b is not None and b.over_high_watermark
            for b in (self._batcher, self._retrieval_batcher)
        )
        assigned = self._consumer.assignment()
        if not self._paused and (
            docs >= s.max_in_flight_documents or size >= s.max_in_flight_bytes or queue_full
        ):
            self._consumer.pause(*assigned)
            self._paused = True
            self.metrics.backpressure_pauses.inc()
            self.metrics.paused_partitions.set(len(assigned))
            log.info(
                "paused",
                extra={"in_flight": docs, "in_flight_bytes": size, "queue_full": queue_full},
            )
        elif (
            self._paused
            and docs <= s.max_in_flight_documents * _LOW_WATERMARK
            and size <= s.max_in_flight_bytes * _LOW_WATERMARK
            and not queue_full
        ):
            self._consumer.resume(*assigned)
            self._paused = False
            self.metrics.paused_partitions.set(0)
            log.info("resumed", extra={"in_flight": docs, "in_flight_bytes": size})

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
        m = self.metrics
        doc_id: str | None = None
        started = time.perf_counter()
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
            published = await self._publisher.publish_chunks(doc.id, events)
            self.stats["chunks"] += len(events)
            m.chunks_produced.labels(built.name).inc(len(events))
            m.output_bytes.inc(published)
            m.documents_completed.labels(built.name).inc()
            m.document_seconds.labels(built.name).observe(time.perf_counter() - started)
            m.end_to_end_lag.observe(max(0.0, time.time() - rec.timestamp_ms / 1000))
        except DocumentError as error:
            log.warning(
                "dead letter",
                extra={**where, "doc_id": doc_id, "kind": error.kind, "reason": str(error)},
            )
            # The dead letter must fit in one record, or its publish fails forever and the
            # partition stalls: key and headers come first, the original value gets the rest.
            room = self._publisher.max_value_bytes - _DEAD_LETTER_OVERHEAD
            extra = len(rec.key or b"") + sum(len(k) + len(v or b"") + 8 for k, v in rec.headers)
            if extra > room // 2:  # oversized key or headers: keep neither (offset, digest stay)
                rec = dataclasses.replace(rec, key=None, headers=[])
                extra = 0
            await self._publisher.publish_dead_letter(
                dead_letter(
                    rec,
                    error,
                    dt.datetime.now(dt.UTC),
                    max_value_bytes=max(0, room - extra),
                    doc_id=doc_id,
                )
            )
            self.stats["dead_letters"] += 1
            m.documents_dead_lettered.labels(error.kind).inc()

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

    async def _chunk_vectors(self, chunks: Sequence[Chunk]) -> NDArray[np.float32]:
        assert self._retrieval_embed is not None  # include_embeddings implies it is loaded
        return await self._retrieval_embed([c.text for c in chunks])

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
                self.metrics.publish_retries.inc()
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
        started = time.perf_counter()
        try:
            await self._consumer.commit({tp: OffsetAndMetadata(o, "") for tp, o in offsets.items()})
        except KafkaError as exc:
            # A commit can fail during a rebalance; the offsets stay committable and go out
            # with the next commit, or the new owner replays them (at-least-once).
            self.metrics.commit_failures.inc()
            log.warning("commit failed", extra={"error": repr(exc)})
            return
        self.metrics.commit_seconds.observe(time.perf_counter() - started)
        self.metrics.last_commit.set(time.time())
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
            with contextlib.suppress(KeyError):  # no lag sample was taken for it
                self.metrics.consumer_lag.remove(str(tp.partition))

    def on_assigned(self, assigned: set[TopicPartition]) -> None:
        self.stats["rebalances"] += 1
        self.metrics.rebalances.inc()
        self._joined = True
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


def model_identity(settings: Settings) -> str | None:
    """Short digest of the boundary model the worker would load (ONNX fp32/int8 or static)."""
    from worker.embedding.loading import model_identity as identity_of

    model_dir = Path(settings.model_dir) if settings.model_dir else DEFAULT_BOUNDARY_MODEL_DIR
    return identity_of(model_dir, int8=settings.model_int8)


def _same_directory(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def _check_boundary_model(settings: Settings) -> None:
    """A named model directory that holds no model fails here, naming the setting (the
    strategies would otherwise report it as a bad strategy parameter)."""
    from worker.embedding.loading import model_kind
    from worker.embedding.manifest import ManifestError

    name = settings.strategy
    if settings.model_dir and name in registry.names() and registry.get(name).needs_model:
        try:
            model_kind(Path(settings.model_dir))
        except ManifestError as exc:
            raise ConfigError(f"invalid setting CHUNKSTREAM_MODEL_DIR: {exc}") from None


class _MeteredBackend:
    """Wraps the model so every batch is measured where it runs (the inference thread).

    Lengths measured when texts are queued are remembered until their batch runs, so the
    batch's padded size is known without tokenising a second time."""

    _REMEMBERED = 65536

    def __init__(self, inner: EmbeddingBackend, metrics: Metrics) -> None:
        self._inner = inner
        self._metrics = metrics
        self._lengths: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()  # token_lengths: event loop; embed: inference thread
        self._real = 0
        self._padded = 0

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        lengths = self._inner.token_lengths(texts)
        with self._lock:
            self._lengths.update(zip(texts, lengths, strict=True))
            while len(self._lengths) > self._REMEMBERED:
                self._lengths.popitem(last=False)
        return lengths

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        with self._lock:
            known = [self._lengths.pop(t, None) for t in texts]
        lengths = [n if n is not None else 0 for n in known]
        if any(n is None for n in known):  # evicted meanwhile: measure again
            lengths = self._inner.token_lengths(texts)
        padded = max(lengths, default=0) * len(texts)
        started = time.perf_counter()
        vectors = self._inner.embed(texts)
        m = self._metrics
        m.inference_seconds.inc(time.perf_counter() - started)
        m.embedding_batches.inc()
        m.batch_texts.observe(len(texts))
        m.batch_tokens.observe(padded)
        real = sum(lengths)
        with self._lock:
            self._real += real
            self._padded += padded
            ratio = 1 - self._real / self._padded if self._padded else 0.0
        m.embedding_real_tokens.inc(real)
        m.embedding_padded_tokens.inc(padded)
        m.padding_ratio.set(ratio)
        return vectors
