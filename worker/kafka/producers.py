"""The worker's producer, replaced by a fresh one when it can no longer deliver.

Why: aiokafka's idempotent producer hands a batch its sequence number when the batch leaves the
queue. A batch that waited longer than ``request_timeout_ms`` for a partition leader (Kafka down for
longer than that) is failed *after* it got its number, so the broker never sees that number and
answers every later batch of the partition with ``OutOfOrderSequenceNumber``; the client's sender
then stops for good: after a broker outage longer than the timeout every publish failed that way,
for as long as the worker ran (tests/broker/test_kafka_outage.py). The Java client resets its
producer id in that case (KIP-360); here a new producer — a new producer id, sequence numbers from
0, the SASL password file read again — takes over, and the documents whose batches failed are
published again by their retries (at least once, same chunk ids).

Invariants:

- Batches go to the current producer; a delivery failure that means "this producer is broken"
  marks it, and the next send first replaces it (one replacement at a time).
- The replaced producer is stopped in the background: it flushes what it still holds (each
  batch succeeds or fails; its documents retry either way).
- With a fence (``may_send``: worker.kafka.membership), every producer made here sends only
  while it allows; :meth:`RenewingProducer.discard` fails what the current one still queues,
  and what comes back to its queue later (the partitions were lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import (
    InvalidProducerEpoch,
    OutOfOrderSequenceNumber,
    ProducerFenced,
    UnknownProducerId,
)

from worker.config import Settings
from worker.kafka.clients import make_producer
from worker.kafka.membership import discard_queued, hold_sends

log = logging.getLogger(__name__)

# Delivery errors after which the producer that raised them cannot deliver again.
BROKEN = (OutOfOrderSequenceNumber, ProducerFenced, InvalidProducerEpoch, UnknownProducerId)
# How long a replaced producer may take to flush and close, and one stopped at shutdown.
_STOP_TIMEOUT_S = 10.0


class RenewingProducer:
    """The producer methods :class:`worker.kafka.publisher.Publisher` and the service use, on the
    current :class:`AIOKafkaProducer`."""

    def __init__(self, settings: Settings, may_send: Callable[[], bool] | None = None) -> None:
        self._settings = settings
        self._may_send = may_send
        self.current: AIOKafkaProducer = make_producer(settings)
        self.broken: BaseException | None = None
        self.renewals = 0
        self._lock = asyncio.Lock()
        self._retiring: set[asyncio.Task[None]] = set()
        self._stopped = False

    async def start(self) -> None:
        await self.current.start()
        self._fence(self.current)

    def _fence(self, producer: AIOKafkaProducer) -> None:
        if self._may_send is not None:
            hold_sends(producer, self._may_send)

    def discard(self, error: BaseException) -> None:
        """Fail every batch the current producer still queues or gets back for a retry (none
        of it may land any more: it sends nothing from now on), and have the next send replace
        it. A batch sent once and queued again for a retry (the broker went away) already
        carries its idempotence sequence numbers: discarded, it leaves a gap that the broker
        refuses for every later batch of its partition, and the member stalls on them (the
        fault campaign, seed 12, at-least-once). A new producer starts its own sequences."""
        discard_queued(self.current, error)
        self._mark(self.current, error)

    async def stop(self) -> None:
        """Flush and close (bounded: during an outage nothing can be flushed)."""
        self._stopped = True  # no replacement from now on: late sends fail as on any producer
        await _stop(self.current)
        if self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)

    def create_batch(self) -> Any:
        return self.current.create_batch()

    async def partitions_for(self, topic: str) -> set[int]:
        partitions: set[int] = await self.current.partitions_for(topic)
        return partitions

    async def send_batch(self, batch: Any, topic: str, *, partition: int) -> asyncio.Future[Any]:
        producer = await self._usable()
        try:
            delivered: asyncio.Future[Any] = await producer.send_batch(
                batch, topic, partition=partition
            )
        except BROKEN as exc:  # a stopped sender keeps raising its error on every send
            self._mark(producer, exc)
            raise
        delivered.add_done_callback(partial(self._check, producer))
        return delivered

    async def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> asyncio.Future[Any]:
        producer = await self._usable()
        try:
            delivered: asyncio.Future[Any] = await producer.send(
                topic, value=value, key=key, headers=headers
            )
        except BROKEN as exc:
            self._mark(producer, exc)
            raise
        delivered.add_done_callback(partial(self._check, producer))
        return delivered

    def _check(self, producer: AIOKafkaProducer, delivered: asyncio.Future[Any]) -> None:
        if not delivered.cancelled() and isinstance(error := delivered.exception(), BROKEN):
            self._mark(producer, error)

    def _mark(self, producer: AIOKafkaProducer, error: BaseException) -> None:
        if producer is self.current and self.broken is None:
            self.broken = error

    async def _usable(self) -> AIOKafkaProducer:
        # A sender task that ended (on any error) never sends again: aiokafka then fails
        # every batch with its error. Read from the client's own state; guarded, since it is
        # not public API.
        if self._stopped:
            return self.current
        sender = getattr(getattr(self.current, "_sender", None), "sender_task", None)
        if self.broken is None and sender is not None and sender.done():
            self.broken = RuntimeError("the producer's sender stopped")
        if self.broken is not None:
            await self.renew()
        return self.current

    async def renew(self) -> None:
        """Replace the current producer by a started new one. Raises (and keeps the broken
        one marked) if the new one cannot start: the caller's retry comes back later."""
        async with self._lock:
            if self.broken is None:
                return  # another sender renewed it meanwhile
            fresh = make_producer(self._settings)
            try:
                await fresh.start()
            except BaseException:
                await _stop(fresh)
                raise
            self._fence(fresh)
            old, self.current = self.current, fresh
            log.warning(
                "producer replaced: it could not deliver again, or its writes were discarded",
                extra={"error": repr(self.broken), "renewals": self.renewals + 1},
            )
            self.broken = None
            self.renewals += 1
            task = asyncio.create_task(_stop(old))
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)


async def _stop(producer: AIOKafkaProducer) -> None:
    """``producer.stop()`` within a deadline: with the broker gone it would wait for batches
    that cannot leave. Past the deadline the producer is left to itself; its sender still
    settles each batch (delivered, or failed when it expires), so no document waits forever."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(_STOP_TIMEOUT_S):
            await producer.stop()
