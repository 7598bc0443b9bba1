"""Levels that change without an event of ours, sampled once a second into the gauges: lag,
queue depth, in flight, and per partition the commit age and the backlog estimate
(worker/observability/backlog.py)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from worker.observability.metrics import Metrics

if TYPE_CHECKING:  # the loop sits above this room: sampled, never imported at run time
    from worker.consuming.loop import ConsumeLoop

SAMPLE_EVERY_S = 1.0
_POSITION_TIMEOUT_S = 1.0  # a position not known yet (a reset waiting for Kafka) is skipped


class Sampler:
    def __init__(
        self,
        metrics: Metrics,
        consumer: Any,  # AIOKafkaConsumer: assignment, paused, highwater, position
        loop: ConsumeLoop,
        *,
        ready: Callable[[], bool],
        kafka_up: Callable[[], bool],
        end_offsets: Mapping[Any, int],
        queue_tokens: Callable[[], int] | None = None,
    ) -> None:
        self._m = metrics
        self._consumer = consumer
        self._loop = loop
        self._ready = ready
        self._kafka_up = kafka_up
        self._ends = end_offsets  # the latest end offsets the Kafka watch read
        self._queue_tokens = queue_tokens

    async def run(self) -> None:
        while True:
            await self.sample()
            await asyncio.sleep(SAMPLE_EVERY_S)

    async def sample(self) -> None:
        m, loop, consumer = self._m, self._loop, self._consumer
        now = time.monotonic()
        loop.work_rate.tick(now, counting=self._kafka_up())
        waiting = 0  # records waiting in partitions the worker can consume now
        m.ready.set(1 if self._ready() else 0)
        m.in_flight_documents.set(loop.in_flight.documents)
        m.in_flight_bytes.set(loop.in_flight.bytes)
        if self._queue_tokens is not None:
            m.batcher_queue_tokens.set(self._queue_tokens())
        assigned = consumer.assignment()
        m.assigned_partitions.set(len(assigned))
        m.paused_partitions.set(len(consumer.paused()))
        per_byte = loop.work_rate.seconds_per_byte(now)
        if per_byte is not None:
            m.seconds_per_input_byte.set(per_byte)
        for tp in assigned:
            lag = await self._lag(tp)
            if (
                lag is not None
            ):  # records the loop took from the client and holds (worker.consuming.prefetch)
                lag += loop.held.count(tp)
            if tp not in loop.owned:
                continue  # revoked while we asked: its series are gone and must stay gone
            label = str(tp.partition)
            if lag is not None:
                m.consumer_lag.labels(label).set(lag)
            busy = loop.uncommitted(tp) or (lag or 0) > 0
            if tp not in loop.stuck and tp not in loop.restoring:
                waiting += lag or 0
            m.partition_commit_age.labels(label).set(loop.commit_ages.age(tp, busy, now))
            backlog = None if lag is None else loop.work_rate.backlog_seconds(lag, now)
            if backlog is not None:
                m.backlog_seconds.labels(label).set(backlog)
        loop.work_rate.waiting = waiting > 0

    async def _lag(self, tp: Any) -> int | None:
        """High-water mark (the fetches' or the watch's, the later) minus position."""
        highwater = max(self._consumer.highwater(tp) or -1, self._ends.get(tp, -1))
        if highwater < 0:
            return None
        with contextlib.suppress(Exception):  # position of a just-revoked partition, a timeout
            async with asyncio.timeout(_POSITION_TIMEOUT_S):
                position = await self._consumer.position(tp)
            return max(0, highwater - int(position))
        return None
