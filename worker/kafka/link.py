"""Kafka's reachability while the worker lives: wait for it at start-up, watch it while running.

- **Start-up** (:meth:`KafkaLink.connect`): while no bootstrap server accepts a TCP connection,
  probe at most ``PROBE_CAP_S`` apart (:mod:`worker.kafka.link_policy`); once one does, run
  the start-up attempt (start the clients, check the topics). A failed attempt is classified by
  connecting once by hand (:func:`worker.kafka.clients.classify_connection`): what the broker
  refuses (credentials, mechanism, TLS trust) stops the worker with a message naming the
  setting, as long as it has never connected; anything else is waited out with capped backoff.
  Unready meanwhile.
- **Running** (:meth:`KafkaLink.watch`): a request through the worker's own consumer every few
  seconds (end offsets of its partitions, which the lag and backlog figures use too). When it
  fails, Kafka is down: readiness says why, commits wait, the clients reconnect by themselves;
  when it answers again, it is up. The SASL password file is read again on every check and a
  changed password handed to the running clients for their next connections.
- A topic the worker needs that does not exist yet (worker.kafka.startup_topics) is waited for
  the same way: the attempt is made again every few seconds, unready meanwhile, the missing
  topics named by ``/readyz``, the log (once per change) and ``chunkstream_missing_topics``.
- Each kind of failure is logged once, when it starts (a new kind is logged again), and the
  recovery once, with how long it took; ``chunkstream_kafka_connection_failures_total{kind}``
  counts every failed attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from aiokafka.errors import KafkaError

from worker.config import Settings
from worker.errors import ConfigError
from worker.kafka.clients import classify_connection, reachable, renew_password
from worker.kafka.link_policy import UNREACHABLE, Backoff, Failure, Kind, Link
from worker.kafka.permissions import refused
from worker.kafka.startup_topics import TopicsMissing
from worker.observability.metrics import Metrics

log = logging.getLogger(__name__)

T = TypeVar("T")

# While up: how often the worker asks Kafka, and how long an answer may take before Kafka
# counts as down. Generous: a loaded broker answering in seconds is slow, not gone.
WATCH_EVERY_S = 5.0
CHECK_TIMEOUT_S = 10.0
# While topics are missing: how often the start-up attempt looks again.
TOPICS_RECHECK_S = 2.0


class KafkaLink:
    """The worker's view of Kafka (:class:`~worker.kafka.link_policy.Link`) and the loops that
    keep it current."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        stopping: asyncio.Event,
        *,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.settings = settings
        self.state = Link()
        self._metrics = metrics
        self._stopping = stopping
        self._clock = clock
        self._backoff = Backoff(rand)
        # The topics the last start-up attempt found missing (name → the setting naming it).
        self.missing_topics: dict[str, str] = {}

    @property
    def up(self) -> bool:
        return self.state.up

    def readiness(self) -> str:
        return self.state.readiness()

    async def connect(self, attempt: Callable[[], Awaitable[T]]) -> T | None:
        """``attempt``'s result once it succeeds; None if a stop was requested first.

        ``attempt`` must clean up after itself when it raises. A :class:`KafkaError` from it
        is classified; :class:`TopicsMissing` is waited out; a
        :class:`~worker.errors.ConfigError` passes through."""
        while not self._stopping.is_set():
            failure = await reachable(self.settings)
            if failure is None:
                if self.state.failure is not None and self.state.failure.kind in UNREACHABLE:
                    log.info("kafka accepts connections: connecting")
                try:
                    result = await attempt()
                except TopicsMissing as missing:
                    self._came_up()  # Kafka answered: only the topics are not there yet
                    self._topics_missing(missing)
                    await self._sleep(TOPICS_RECHECK_S)
                    continue
                except (KafkaError, OSError, TimeoutError) as exc:
                    failure = await self._classify(exc)
                    if failure.fatal_at_start and not self.state.ever_up:
                        raise ConfigError(failure.detail) from None
                else:
                    self._came_up()
                    self._topics_missing(None)
                    return result
            self._went_down(failure)
            await self._pause(failure.kind)
        return None

    async def watch(self, check: Callable[[], Awaitable[Any]], clients: Sequence[Any]) -> None:
        """Until cancelled: run ``check`` (a request through the worker's clients) every few
        seconds, bounded by a timeout, and keep the link's state and the clients' password
        current."""
        while True:
            if renew_password(self.settings, *clients):
                log.info("SASL password file changed: new connections use it")
            # Down, or stopping (the drain must learn fast that nothing can be acknowledged): a
            # TCP probe first (cheap, fast), the real request once a port accepts.
            probe = not self.state.up or self._stopping.is_set()
            failure = await reachable(self.settings) if probe else None
            if failure is None:
                try:
                    async with asyncio.timeout(CHECK_TIMEOUT_S):
                        await check()
                except Exception as exc:  # whatever it is, the worker is not consuming for real
                    failure = await self._classify(exc)
            if failure is not None:
                self._went_down(failure)
                await asyncio.sleep(self._backoff.next(failure.kind))
                continue
            if not self.state.up:
                self._came_up()
            # Not stopped by a stop request: the drain after it still needs the link's state,
            # and gets it fresh (a check at once when the stop comes, then every few seconds).
            if self._stopping.is_set():
                await asyncio.sleep(WATCH_EVERY_S)
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(WATCH_EVERY_S):
                        await self._stopping.wait()

    def _topics_missing(self, missing: TopicsMissing | None) -> None:
        topics = {} if missing is None else missing.topics
        if topics != self.missing_topics:
            if topics:
                log.warning(
                    "waiting for topics",
                    extra={"missing": sorted(topics), "reason": str(missing)},
                )
            else:
                log.info("topics found", extra={"were_missing": sorted(self.missing_topics)})
        self.missing_topics = topics
        self._metrics.missing_topics.set(len(topics))

    async def _classify(self, error: BaseException) -> Failure:
        """Why Kafka failed us, from a connection made by hand (``error`` is what the client
        said: aiokafka's own errors rarely name the cause)."""
        failure = await classify_connection(self.settings)
        if failure is not None:
            return failure
        return Failure(
            Kind.NOT_SERVING,
            f"the brokers at {self.settings.bootstrap_servers} accept connections but do not "
            f"answer the worker ({type(error).__name__}: {error}); a broker starting, or the "
            "partitions' leaders unavailable",
        )

    def _went_down(self, failure: Failure) -> None:
        self._metrics.kafka_connection_failures.labels(failure.kind.name.lower()).inc()
        if self.state.went_down(failure, self._clock()):
            log.warning(
                "kafka unreachable",
                extra={
                    "kind": failure.kind.name.lower(),
                    "reason": failure.detail,
                    "retrying": "with backoff; logged again when the kind of failure changes",
                },
            )

    def _came_up(self) -> None:
        failures = self.state.failures
        outage = self.state.came_up(self._clock())
        self._backoff.reset()
        if outage is not None:
            log.info(
                "kafka reachable",
                extra={"after_s": round(outage, 3), "failed_attempts": failures},
            )

    async def _pause(self, kind: Kind) -> None:
        await self._sleep(self._backoff.next(kind))

    async def _sleep(self, seconds: float) -> None:
        """Sleep, but return at once when a stop is requested."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stopping.wait()


async def retrying(attempt: Callable[[], Awaitable[T]], partitions: Sequence[int]) -> T:
    """``attempt()`` (the partitions' state restore) until it raises no :class:`KafkaError`,
    waiting by the one :class:`Backoff` between tries; each failure logged. A refusal by the
    broker's ACLs is raised at once, as :class:`~worker.kafka.permissions.PermissionRefused`."""
    backoff = Backoff()
    while True:
        try:
            return await attempt()
        except KafkaError as exc:
            denied = refused(exc)
            if denied is not None:  # no retry can fix it (worker.kafka.permissions)
                raise denied from None
            wait_s = backoff.next(Kind.OTHER)
            log.warning(
                "state restore failed; retrying",
                extra={
                    "partitions": list(partitions),
                    "error": repr(exc),
                    "retry_in_s": round(wait_s, 1),
                },
            )
            await asyncio.sleep(wait_s)
