"""The worker's lifecycle: start the pieces, run the consume loop, drain, stop.

Invariants:

- Start-up fails fast with one message naming the setting (a strategy or parameter, a model
  directory without a model, a broker refusing our credentials or TLS, a missing topic, a
  record limit above the topics'), before any record is consumed.
- A Kafka that is not there (yet) is not a configuration error: the worker waits for it, up
  and unready, and rides out an outage later the same way (worker.kafka.link).
- Ready (``/readyz``) means consuming for real: model loaded when one is needed, Kafka
  reachable, group joined, producer up.
- Shutdown (a signal or :meth:`Worker.request_stop`): stop fetching, drain in-flight documents
  within the deadline, commit, stop the producer (flush) and the consumer (leave the group).
  A second signal exits at once; nothing uncommitted is lost, only replayed.

The pieces, each readable alone: :mod:`worker.consuming.loop` (fetch, backpressure, commits,
rebalance), :mod:`worker.handling.handler` (one record → chunk events or a dead letter),
:mod:`worker.pipeline` (the chunking dispatch), :mod:`worker.inference.serving` (the model and
its batcher), :mod:`worker.kafka.clients` (client construction), :mod:`worker.kafka.link`
(waiting for Kafka, watching it), :mod:`worker.kafka.producers` (a producer replaced when it
breaks), :mod:`worker.observability.sampler` (the gauges), :mod:`worker.runtime.loop_lag`.
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

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from worker.chunking import registry
from worker.config import (
    Settings,
    batch_bytes,
    exactly_once,
    invalid_setting,
    redacted,
    state_topic,
    strategy_setting_error,
)
from worker.consuming.loop import ConsumeLoop
from worker.errors import ModelNotBuilt
from worker.handling.handler import DocumentHandler
from worker.handling.resolver import PATH_PARAMS, StrategyResolver
from worker.inference.serving import ModelRefs, Models, boundary_ref, open_models, retrieval_ref
from worker.kafka.clients import (
    make_changelog_reader,
    make_consumer,
    make_producer,
    topic_configs,
    topic_record_limits,
    written_topics,
)
from worker.kafka.link import KafkaLink
from worker.kafka.membership import Membership
from worker.kafka.permissions import PermissionRefused
from worker.kafka.producers import RenewingProducer
from worker.kafka.publisher import Publisher
from worker.kafka.startup_topics import check_topics
from worker.kafka.transactions import PartitionTransactions
from worker.models.backend import EmbeddingBackend
from worker.observability.health import HealthServer
from worker.observability.metrics import Metrics
from worker.observability.sampler import Sampler
from worker.observability.task_dump import log_task_dump
from worker.runtime import cgroups, garbage_collector, resources
from worker.runtime.loop_lag import watch_loop_lag
from worker.state.changelog import Changelog, learn_topic
from worker.state.documents import DocumentStates
from worker.state.sqlite_store import open_store
from worker.state.writing import open_writes
from worker.wire.codec import EventEncoder

log = logging.getLogger(__name__)

# How long stopping one client may take at shutdown: during an outage a producer would wait
# for batches that cannot leave, a consumer for a coordinator to leave the group at.
_CLIENT_STOP_TIMEOUT_S = 5.0


class State(enum.Enum):
    CREATED = "created"
    STARTING = "starting"
    RUNNING = "running"
    DRAINING = "draining"
    STOPPED = "stopped"


@dataclass
class _Session:
    """The started Kafka clients, topics checked."""

    producer: RenewingProducer
    consumer: AIOKafkaConsumer
    reader: AIOKafkaConsumer | None  # the state changelog's, with the document lifecycle


@dataclass
class _Running:
    """What exists only while :meth:`Worker.run` runs."""

    consumer: AIOKafkaConsumer
    producer: RenewingProducer
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
        self._backend = backend
        self._needs_model = False
        self._health: HealthServer | None = None
        self._running: _Running | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        self.kafka = KafkaLink(settings, self.metrics, self._stopping)
        # What this member can vouch for in its group; at-least-once fences its own writes by it
        # (worker.kafka.membership).
        self._membership = Membership(settings.session_timeout_ms)
        self._end_offsets: dict[TopicPartition, int] = {}  # read by the Kafka watch

    # -- lifecycle -------------------------------------------------------------------------

    def request_stop(self) -> None:
        self._stopping.set()

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_signal, signum)
        # What every task waits on, for an operator who asks (docs/operating/outages.md).
        loop.add_signal_handler(signal.SIGUSR1, log_task_dump)

    def _on_signal(self, signum: int) -> None:
        if self._stopping.is_set():
            # Second signal: the operator wants out now. Nothing is committed past what was
            # already committed, so this loses nothing; it only replays more.
            log.warning("second signal: exiting at once", extra={"signal": signum})
            os._exit(128 + signum)
        log.info("signal received: draining", extra={"signal": signum})
        self._stopping.set()

    def readiness(self) -> tuple[bool, dict[str, object]]:
        """Ready = consuming for real: model loaded (if needed), Kafka reachable, group joined,
        producer up, no partition paused on a record batch it cannot read."""
        running = self._running
        checks: dict[str, object] = {
            "state": self.state.value,
            "kafka": self.kafka.readiness(),
            "model_loaded": not self._needs_model
            or (running is not None and running.models is not None),
            "group_joined": running is not None and running.loop.joined,
            "producer_connected": self.state in (State.RUNNING, State.DRAINING),
            "unreadable_partitions": [] if running is None else running.loop.stuck.describe(),
            "restoring_partitions": []
            if running is None
            else sorted(tp.partition for tp in running.loop.restoring),
            "topics_missing": sorted(self.kafka.missing_topics),
        }
        ready = (
            self.state is State.RUNNING
            and self.kafka.up
            and not self.kafka.missing_topics
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
        self.kafka.settings = s
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
        self._needs_model = resources.needs_model(s)
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
            # What start-up loaded is never scanned again (worker.runtime.garbage_collector).
            garbage_collector.settle()

            session = await self.kafka.connect(self._open_session)
            if session is None:  # stopped while waiting for Kafka: nothing was consumed
                self.state = State.STOPPED
                log.info("stopped", extra=self.metrics.totals()._asdict())
                return 0
            producer, consumer = session.producer, session.consumer
            stack.push_async_callback(producer.stop)  # flushes what is still buffered
            stack.push_async_callback(_stop_within, consumer)  # leaves the group
            self._spawn(
                self.kafka.watch(
                    lambda: self._read_end_offsets(consumer),
                    [c for c in (producer, consumer, session.reader) if c is not None],
                )
            )
            transactions = self._open_transactions(stack, producer)
            publisher = Publisher(
                producer if transactions is None else transactions,
                EventEncoder(s.encoding),
                output_topic=s.output_topic,
                dlq_topic=s.dlq_topic,
                max_record_bytes=s.max_record_bytes,
                linger_ms=s.linger_ms,
                uncompressed_topics=[state_topic(s)] if s.document_lifecycle else [],
                batch_bytes=batch_bytes(s),
                transactional=transactions is not None,
                admit=None if transactions is None else transactions.admit,
            )
            states = (
                self._open_states(stack, publisher, session.reader)
                if session.reader is not None
                else None
            )
            handler = DocumentHandler(
                s,
                resolver,
                publisher,
                self.metrics,
                models,
                open_writes(s, publisher, states, self.metrics),
            )

            def discard_writes(error: BaseException) -> None:
                publisher.discard(error)  # first: nothing more is handed to the producer
                producer.discard(error)

            loop = ConsumeLoop(
                consumer,
                s,
                handler.process,
                metrics=self.metrics,
                stopping=self._stopping,
                queue_full=lambda: models is not None and models.over_high_watermark,
                states=states,
                kafka_up=lambda: self.kafka.up,
                transactions=transactions,
                membership=self._membership,
                discard_writes=discard_writes,
            )
            self._running = _Running(consumer, producer, loop, models)
            consumer.subscribe([s.input_topic], listener=loop.listener())
            self.state = State.RUNNING
            sampler = Sampler(
                self.metrics,
                consumer,
                loop,
                ready=lambda: self.readiness()[0],
                kafka_up=lambda: self.kafka.up,
                end_offsets=self._end_offsets,
                queue_tokens=None if models is None else lambda: models.queue_tokens,
            )
            self._spawn(sampler.run())
            await loop.run()
            self.state = State.DRAINING
            await loop.finish()
            # Everything was let go: the producer's flush is no longer fenced by the group.
            self._membership.release()
        self.state = State.STOPPED
        log.info("stopped", extra=self.metrics.totals()._asdict())
        if isinstance(loop.fatal, PermissionRefused):  # a configuration error: exit status 2
            raise loop.fatal
        return 1 if loop.fatal is not None else 0

    def _open_transactions(
        self, stack: contextlib.AsyncExitStack, producer: RenewingProducer
    ) -> PartitionTransactions | None:
        """With exactly-once, the input partitions' transactional producers (opened as they are
        assigned: worker.consuming.loop); the worker's own producer then only reads metadata."""
        s = self.settings
        if not exactly_once(s):
            return None
        transactions = PartitionTransactions(
            lambda tid: make_producer(s, transactional_id=tid),
            producer,
            group_id=s.group_id,
            input_topic=s.input_topic,
            metrics=self.metrics,
        )
        stack.push_async_callback(transactions.stop)  # after the loop's last commit or abort
        return transactions

    def _open_states(
        self, stack: contextlib.AsyncExitStack, publisher: Publisher, reader: AIOKafkaConsumer
    ) -> DocumentStates:
        """The document state: the local store (a cache) and the changelog reader."""
        s = self.settings
        store = open_store(s.state_dir, s.group_id)
        stack.callback(store.close)
        stack.push_async_callback(_stop_within, reader)
        log.info("state store", extra={"path": str(store.path), "topic": state_topic(s)})
        return DocumentStates(
            store,
            publisher,
            Changelog(reader, state_topic(s), store),
            self.metrics,
            documents_topic=s.documents_topic,
        )

    async def _open_session(self) -> _Session:
        """One start-up attempt (worker.kafka.link retries it): start the clients and check
        the topics; on any failure, stop what was made and raise."""
        s = self.settings
        # At-least-once: the producer sends only while this member can vouch for its place in
        # the group. Exactly-once has Kafka's fence (the transactional producers').
        producer = RenewingProducer(s, None if exactly_once(s) else self._membership.may_send)
        consumer = make_consumer(s)
        reader = make_changelog_reader(s) if s.document_lifecycle else None
        clients = [c for c in (producer, consumer, reader) if c is not None]
        try:
            for client in clients:
                await client.start()
            self._membership.attach(consumer)
            await self._check_topics(consumer)
            # The producer learns every topic it writes before the group is joined: otherwise
            # the first document after a start waited for that metadata request and the
            # client's retry backoff.
            await asyncio.gather(*(producer.partitions_for(t) for t in written_topics(s)))
            if reader is not None:
                # Before joining the group: the first assignment's restore then finds the
                # changelog's metadata known.
                await learn_topic(reader, state_topic(s))
        except BaseException:
            for client in clients:
                await _stop_within(client)
            raise
        return _Session(producer, consumer, reader)

    async def _read_end_offsets(self, consumer: AIOKafkaConsumer) -> None:
        """The Kafka watch's request: the end offsets of the partitions we own (or of the
        input's first one), kept for the lag and backlog gauges."""
        partitions = consumer.assignment() or {TopicPartition(self.settings.input_topic, 0)}
        self._end_offsets.update(await consumer.end_offsets(list(partitions)))

    def _default_strategy(self) -> registry.Strategy[Any]:
        """The default strategy, its parameters checked: parameter errors come before any
        model is looked for."""
        s = self.settings
        try:
            strategy = registry.get(s.strategy)
            strategy.parse_params(s.strategy_params)
        except registry.StrategyError as exc:
            raise strategy_setting_error(exc) from None
        return strategy

    def _resolve_models(self, strategy: registry.Strategy[Any]) -> ModelRefs:
        """Each model role resolved once (worker.inference.serving): the boundary model when a
        strategy
        the worker may run needs it, the retrieval model when embeddings go out (and, when it
        is installed, for sizing chunks in its tokens)."""
        s = self.settings
        needs_boundary = resources.needs_boundary_model(s)
        try:
            boundary = boundary_ref(s) if needs_boundary else None
        except ModelNotBuilt as exc:
            raise invalid_setting("model_dir", exc) from None
        try:
            retrieval = retrieval_ref(s)
        except ModelNotBuilt as exc:
            if s.include_embeddings or s.retrieval_model_dir is not None:
                raise invalid_setting("retrieval_model_dir", exc) from None
            retrieval = None  # rule sizes in characters: docs/concepts/strategies.md
        return ModelRefs(boundary, retrieval)

    def _build_default_strategy(self, context: registry.BuildContext) -> registry.BuiltStrategy:
        s = self.settings
        try:
            return registry.build(s.strategy, s.strategy_params, context)
        except registry.StrategyError as exc:
            raise strategy_setting_error(exc) from None

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

    async def _check_topics(self, consumer: AIOKafkaConsumer) -> None:
        """Every topic there (a missing one is waited for: worker.kafka.startup_topics), the
        state changelog co-partitioned and compacted, and every written topic taking records
        as large as the worker sends."""
        s = self.settings
        await check_topics(consumer, s)
        if s.document_lifecycle:
            await self._check_state_topic(consumer)
        # The producer batches many small records up to max_record_bytes; a topic that accepts
        # less refuses whole batches, and every document in them would be dead-lettered.
        try:
            limits = await topic_record_limits(s, written_topics(s))
        except KafkaError as exc:  # e.g. no DescribeConfigs permission: cannot check
            log.warning("could not read the topics' max.message.bytes", extra={"error": repr(exc)})
            limits = {}
        for topic, limit in sorted(limits.items()):
            if limit < s.max_record_bytes:
                raise invalid_setting(
                    "max_record_bytes",
                    f"{s.max_record_bytes} is above max.message.bytes={limit} of topic "
                    f"{topic}; lower it to at most {limit} or raise the topic's limit",
                )

    async def _check_state_topic(self, consumer: AIOKafkaConsumer) -> None:
        """The changelog must be co-partitioned with the input (changelog partition p holds the
        state of input partition p) and compacted (or restores grow without end)."""
        s = self.settings
        topic = state_topic(s)
        ours = consumer.partitions_for_topic(topic) or set()
        inputs = consumer.partitions_for_topic(s.input_topic) or set()
        if len(ours) != len(inputs):
            raise invalid_setting(
                "state_topic",
                f"{topic} has {len(ours)} partitions, "
                f"the input topic {s.input_topic} {len(inputs)}; the state changelog must be "
                "co-partitioned with the input (same partition count)",
            )
        try:
            configs = await topic_configs(s, [topic], ["cleanup.policy"])
        except KafkaError as exc:  # e.g. no DescribeConfigs permission: cannot check
            log.warning("could not read the state topic's config", extra={"error": repr(exc)})
            return
        policy = configs.get(topic, {}).get("cleanup.policy")
        if policy is not None and "compact" not in policy:
            raise invalid_setting(
                "state_topic",
                f"{topic} has cleanup.policy={policy}; "
                "the state changelog must be compacted (cleanup.policy=compact), or its old "
                "states are deleted by retention and documents are forgotten",
            )


async def _stop_within(client: Any) -> None:
    """Stop a client, bounded: with Kafka gone, aiokafka's stop waits for what cannot happen.
    Stopped right after it started (a signal during start-up), aiokafka's group coordinator
    lets the cancellation of its own internal task escape ``stop``; that is not ours to
    propagate unless this task itself is being cancelled."""
    try:
        async with asyncio.timeout(_CLIENT_STOP_TIMEOUT_S):
            await client.stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        log.warning("a Kafka client's internal task was cancelled while it stopped")
    except Exception:  # stopping: nothing left to do about it
        pass
