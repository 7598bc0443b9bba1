"""The worker's lifecycle: start the pieces, run the consume loop, drain, stop.

Invariants:

- Start-up fails fast with one message naming the setting (a strategy or parameter, a model
  directory without a model, a broker refusing us, a missing topic, a record limit above the
  topics'), before any record is consumed.
- Ready (``/readyz``) means consuming for real: model loaded when one is needed, group joined,
  producer up.
- Shutdown (a signal or :meth:`Worker.request_stop`): stop fetching, drain in-flight documents
  within the deadline, commit, stop the producer (flush) and the consumer (leave the group).
  A second signal exits at once; nothing uncommitted is lost, only replayed.

The pieces, each readable alone: :mod:`worker.consumer` (fetch, backpressure, commits,
rebalance), :mod:`worker.document` (one record → chunk events or a dead letter),
:mod:`worker.pipeline` (the chunking dispatch), :mod:`worker.inference` (the model and
its batcher), :mod:`worker.kafka` (client construction), :mod:`worker.loop_lag`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import signal
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError, KafkaError

from worker import cgroups, resources
from worker.changelog import Changelog
from worker.chunking import registry
from worker.codec import EventEncoder
from worker.config import Settings, redacted, state_topic
from worker.consumer import ConsumeLoop
from worker.document import DocumentHandler
from worker.errors import ConfigError, ModelNotBuilt
from worker.health import HealthServer
from worker.inference import ModelRefs, Models, boundary_ref, open_models, retrieval_ref
from worker.kafka import (
    diagnose_connection,
    make_changelog_reader,
    make_consumer,
    make_producer,
    topic_configs,
    topic_record_limits,
)
from worker.loop_lag import watch_loop_lag
from worker.metrics import Metrics
from worker.models.backend import EmbeddingBackend
from worker.publisher import Publisher
from worker.resolver import PATH_PARAMS, StrategyResolver
from worker.state import DocumentStates
from worker.state_store import open_store

log = logging.getLogger("chunkstream.worker")

_SAMPLE_EVERY_S = 1.0


class State(enum.Enum):
    CREATED = "created"
    STARTING = "starting"
    RUNNING = "running"
    DRAINING = "draining"
    STOPPED = "stopped"


@dataclass
class _Running:
    """What exists only while :meth:`Worker.run` runs."""

    consumer: AIOKafkaConsumer
    producer: AIOKafkaProducer
    loop: ConsumeLoop
    models: Models | None


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
        self.stats = {"documents": 0, "chunks": 0, "dead_letters": 0, "rebalances": 0}
        self._backend = backend
        self._needs_model = False
        self._health: HealthServer | None = None
        self._running: _Running | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()

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
        """Ready = consuming for real: model loaded (if needed), group joined, producer up, no
        partition paused on a record batch it cannot read."""
        running = self._running
        checks: dict[str, object] = {
            "state": self.state.value,
            "model_loaded": not self._needs_model
            or (running is not None and running.models is not None),
            "group_joined": running is not None and running.loop.joined,
            "producer_connected": self.state in (State.RUNNING, State.DRAINING),
            "unreadable_partitions": [] if running is None else running.loop.stuck.describe(),
            "restoring_partitions": []
            if running is None
            else sorted(tp.partition for tp in running.loop.restoring),
        }
        ready = (
            self.state is State.RUNNING
            and all(checks[k] for k in ("model_loaded", "group_joined", "producer_connected"))
            and not (running is not None and (running.loop.stuck or running.loop.restoring))
        )
        return ready, checks

    async def run(self) -> int:
        budgets = resources.plan(
            self.settings,
            cgroups.host_view(),
            resources.affinity_cpus(),
            resources.loaded_models(self.settings),  # reserves and threads for what loads
        )
        self.settings = s = budgets.settings
        self.state = State.STARTING
        strategy = self._default_strategy()
        refs = self._resolve_models(strategy)
        context = registry.BuildContext(boundary=refs.boundary, retrieval=refs.retrieval)
        default = self._build_default_strategy(context)
        trusted = {v for k, v in s.strategy_params.items() if k in PATH_PARAMS} | (
            {s.model_dir} if s.model_dir else set()
        )
        if refs.boundary is not None:
            trusted.add(str(refs.boundary.directory))
        resolver = StrategyResolver(
            default, frozenset(s.allowed_strategies), context, frozenset(trusted)
        )
        self._needs_model = refs.boundary is not None or s.include_embeddings
        log.info(
            "starting",
            extra={
                "config": redacted(s),
                "strategy_id": default.fingerprint,
                "needs_model": self._needs_model,
                "models": {
                    ref.role: {
                        "dir": str(ref.directory),
                        "variant": ref.variant,
                        "id": ref.identity,
                    }
                    for ref in (refs.boundary, refs.retrieval)
                    if ref is not None
                },
            },
        )
        log.info("budget", extra=budgets.log_fields())
        self.metrics.record_budgets(budgets)
        async with contextlib.AsyncExitStack() as stack:
            if s.metrics_port:
                self._health = HealthServer(
                    self.metrics, self.readiness, s.metrics_host, s.metrics_port
                )
                await self._health.start()
                stack.push_async_callback(self._health.stop)
            stack.push_async_callback(self._stop_background)
            self._spawn(watch_loop_lag(self.metrics))
            models = await self._start_models(stack, refs) if self._needs_model else None

            consumer = make_consumer(s)
            producer = make_producer(s)
            clients: tuple[AIOKafkaProducer | AIOKafkaConsumer, ...] = (producer, consumer)
            await self._start_client(producer, clients)
            stack.push_async_callback(producer.stop)  # flushes what is still buffered
            await self._start_client(consumer, clients)
            stack.push_async_callback(_stopped, consumer)  # leaves the group
            await self._check_topics(consumer)
            publisher = Publisher(
                producer,
                EventEncoder(s.encoding),
                output_topic=s.output_topic,
                dlq_topic=s.dlq_topic,
                max_record_bytes=s.max_record_bytes,
                linger_ms=s.linger_ms,
            )
            states = await self._open_states(stack, publisher) if s.document_lifecycle else None
            handler = DocumentHandler(
                s,
                resolver,
                publisher,
                self.metrics,
                models,
                self.stats,
                states,
                s.documents_topic,
            )
            loop = ConsumeLoop(
                consumer,
                s,
                handler.process,
                metrics=self.metrics,
                stats=self.stats,
                stopping=self._stopping,
                queue_full=lambda: models is not None and models.over_high_watermark,
                states=states,
            )
            self._running = _Running(consumer, producer, loop, models)
            consumer.subscribe([s.input_topic], listener=loop.listener())
            self.state = State.RUNNING
            self._spawn(self._sample(self._running))
            await loop.run()
            self.state = State.DRAINING
            await loop.finish()
        self.state = State.STOPPED
        log.info("stopped", extra=self.stats)
        return 1 if loop.fatal is not None else 0

    async def _open_states(
        self, stack: contextlib.AsyncExitStack, publisher: Publisher
    ) -> DocumentStates:
        """The document state: the local store (a cache) and the changelog reader."""
        s = self.settings
        store = open_store(s.state_dir, s.group_id)
        stack.callback(store.close)
        reader = make_changelog_reader(s)
        await self._start_client(reader, (reader,))
        stack.push_async_callback(_stopped, reader)
        log.info("state store", extra={"path": str(store.path), "topic": state_topic(s)})
        return DocumentStates(
            store, publisher, Changelog(reader, state_topic(s), store), self.metrics
        )

    async def _start_client(
        self,
        client: AIOKafkaProducer | AIOKafkaConsumer,
        every: tuple[AIOKafkaProducer | AIOKafkaConsumer, ...],
    ) -> None:
        """A broker that refuses us at start-up (credentials, TLS trust, address) is a
        configuration problem: exit with a message naming the setting, not a traceback."""
        try:
            await client.start()
        except KafkaConnectionError:
            for other in every:
                with contextlib.suppress(Exception):
                    await other.stop()
            raise ConfigError(await diagnose_connection(self.settings)) from None

    def _default_strategy(self) -> registry.Strategy[Any]:
        """The default strategy, its parameters checked: parameter errors come before any
        model is looked for."""
        s = self.settings
        try:
            strategy = registry.get(s.strategy)
            strategy.parse_params(s.strategy_params)
        except registry.StrategyError as exc:
            field = "STRATEGY" if isinstance(exc, registry.NoSuchStrategy) else "STRATEGY_PARAMS"
            raise ConfigError(f"invalid setting CHUNKSTREAM_{field}: {exc}") from None
        return strategy

    def _resolve_models(self, strategy: registry.Strategy[Any]) -> ModelRefs:
        """Each model role resolved once (worker.inference): the boundary model when a strategy
        the worker may run needs it, the retrieval model when embeddings go out (and, when it
        is installed, for sizing chunks in its tokens)."""
        s = self.settings
        needs_boundary = resources.needs_boundary_model(s)
        try:
            boundary = boundary_ref(s) if needs_boundary else None
        except ModelNotBuilt as exc:
            raise ConfigError(f"invalid setting CHUNKSTREAM_MODEL_DIR: {exc}") from None
        try:
            retrieval = retrieval_ref(s)
        except ModelNotBuilt as exc:
            if s.include_embeddings or s.retrieval_model_dir is not None:
                raise ConfigError(
                    f"invalid setting CHUNKSTREAM_RETRIEVAL_MODEL_DIR: {exc}"
                ) from None
            retrieval = None  # rule sizes in characters: docs/chunking.md
        return ModelRefs(boundary, retrieval)

    def _build_default_strategy(self, context: registry.BuildContext) -> registry.BuiltStrategy:
        s = self.settings
        try:
            return registry.build(s.strategy, s.strategy_params, context)
        except registry.StrategyError as exc:
            field = "STRATEGY" if isinstance(exc, registry.NoSuchStrategy) else "STRATEGY_PARAMS"
            raise ConfigError(f"invalid setting CHUNKSTREAM_{field}: {exc}") from None

    async def _start_models(self, stack: contextlib.AsyncExitStack, refs: ModelRefs) -> Models:
        return await stack.enter_async_context(
            open_models(self.settings, refs, backend=self._backend, metrics=self.metrics)
        )

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _stop_background(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    async def _sample(self, running: _Running) -> None:
        """Levels that change without an event of ours: lag, queue depth, in-flight."""
        m = self.metrics
        consumer = running.consumer
        while True:
            m.ready.set(1 if self.readiness()[0] else 0)
            m.in_flight_documents.set(running.loop.in_flight.documents)
            m.in_flight_bytes.set(running.loop.in_flight.bytes)
            if running.models is not None:
                m.batcher_queue_tokens.set(running.models.queue_tokens)
            assigned = consumer.assignment()
            m.assigned_partitions.set(len(assigned))
            m.paused_partitions.set(len(consumer.paused()))
            for tp in assigned:
                highwater = consumer.highwater(tp)
                if highwater is None:
                    continue
                with contextlib.suppress(Exception):  # position of a just-revoked partition
                    position = await consumer.position(tp)
                    m.consumer_lag.labels(str(tp.partition)).set(max(0, highwater - position))
            await asyncio.sleep(_SAMPLE_EVERY_S)

    async def _check_topics(self, consumer: AIOKafkaConsumer) -> None:
        topics = await consumer.topics()
        s = self.settings
        needed = {
            s.input_topic: "INPUT_TOPIC",
            s.output_topic: "OUTPUT_TOPIC",
            s.dlq_topic: "DLQ_TOPIC",
        }
        if s.document_lifecycle:
            needed[state_topic(s)] = "STATE_TOPIC"
        if s.documents_topic is not None:
            needed[s.documents_topic] = "DOCUMENTS_TOPIC"
        missing = [t for t in needed if t not in topics]
        if missing:
            settings = "/".join(needed[t] for t in missing)
            raise ConfigError(
                f"topics missing on {s.bootstrap_servers}: {', '.join(missing)} "
                f"(check CHUNKSTREAM_{settings}, or create them with `chunkstream topics`)"
            )
        if s.document_lifecycle:
            await self._check_state_topic(consumer)
        # The producer batches many small records up to max_record_bytes; a topic that accepts
        # less refuses whole batches, and every document in them would be dead-lettered.
        try:
            written = [s.output_topic, s.dlq_topic]
            written += [state_topic(s)] if s.document_lifecycle else []
            written += [s.documents_topic] if s.documents_topic is not None else []
            limits = await topic_record_limits(s, written)
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

    async def _check_state_topic(self, consumer: AIOKafkaConsumer) -> None:
        """The changelog must be co-partitioned with the input (changelog partition p holds the
        state of input partition p) and compacted (or restores grow without end)."""
        s = self.settings
        topic = state_topic(s)
        ours = consumer.partitions_for_topic(topic) or set()
        inputs = consumer.partitions_for_topic(s.input_topic) or set()
        if len(ours) != len(inputs):
            raise ConfigError(
                f"invalid setting CHUNKSTREAM_STATE_TOPIC: {topic} has {len(ours)} partitions, "
                f"the input topic {s.input_topic} {len(inputs)}; the state changelog must be "
                "co-partitioned with the input (same partition count)"
            )
        try:
            configs = await topic_configs(s, [topic], ["cleanup.policy"])
        except KafkaError as exc:  # e.g. no DescribeConfigs permission: cannot check
            log.warning("could not read the state topic's config", extra={"error": repr(exc)})
            return
        policy = configs.get(topic, {}).get("cleanup.policy")
        if policy is not None and "compact" not in policy:
            raise ConfigError(
                f"invalid setting CHUNKSTREAM_STATE_TOPIC: {topic} has cleanup.policy={policy}; "
                "the state changelog must be compacted (cleanup.policy=compact), or its old "
                "states are deleted by retention and documents are forgotten"
            )


async def _stopped(consumer: AIOKafkaConsumer) -> None:
    """Stop a consumer. Stopped right after it started (a signal during start-up), aiokafka's
    group coordinator lets the cancellation of its own internal task escape ``stop``; that is
    not ours to propagate unless this task itself is being cancelled."""
    try:
        await consumer.stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        log.warning("the consumer's coordinator was cancelled while stopping")
