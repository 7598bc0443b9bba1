"""Publishing chunk events and dead letters, and waiting for the broker's acknowledgements.

Invariants:

- A document's chunk events are keyed by their chunk ids (the point id a stock sink upserts)
  and go to one partition, the one Kafka's default keyed partitioner picks for the *document*
  id (murmur2 of it, as the Java client and librdkafka's ``murmur2_random`` compute it), in
  index order, followed by the tombstones (null values) of the chunk ids the document no
  longer has: one document's records stay in order, and a chunk id always lands on the same
  partition (so compaction keeps exactly one record per chunk).
- :meth:`Publisher.wait` returns only once the broker acknowledged every batch of what was
  staged (acks=all, idempotent producer) and raises if any was refused; the caller then
  publishes the whole document again (at least once; chunk ids are deterministic).
- The same lanes carry the worker's other keyed records: the document-state changelog (to the
  input record's own partition: co-partitioned) and the optional per-document topic.
- Per partition, record batches are handed to the client one at a time, in the order their
  records were appended (:class:`_Lane`), so a document's records keep their order across
  batch boundaries, and the idempotent producer keeps that order on the broker.
- A chunk event that cannot fit one record is refused before anything of its document is sent.
- Batches are shared by documents, so a document stops waiting for an acknowledgement without
  cancelling it (a cancelled document must not fail the others in its batch).
- The highest offset acknowledged in each (topic, partition) is known
  (:meth:`Publisher.acknowledged`: the state changelog's checkpoints name only what was written
  and applied: worker.state.documents).
- :meth:`Publisher.discard` fails every batch not yet handed to the client: a member whose
  partitions were lost sends nothing of theirs afterwards (worker.consuming.commits).

Why record batches of our own: sending each chunk event with ``producer.send`` costs a
coroutine, a future and a callback per event, which was most of the worker's CPU outside
chunking (docs/benchmarks.md). Here every document of a partition
appends its records to that partition's open batch (the client's own ``create_batch``
builder: the same record format, compression, idempotence sequence numbers and retries as a
``send``), and a batch costs one ``send_batch`` and one future, whatever it holds. Documents
share batches: a batch per document would carry one document per partition per round trip,
since the client queues one batch per partition at a time. Batching follows Kafka's rules: a
batch is sent when it is full (``batch.size``) or ``linger.ms`` after its first record.
"""

from __future__ import annotations

import asyncio
import copy
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import msgspec
from aiokafka import AIOKafkaProducer
from aiokafka.errors import (
    KafkaError,
    MessageSizeTooLargeError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
)
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.producer.message_accumulator import BatchBuilder

from worker.errors import OutputRecordTooLarge
from worker.kafka.transactions import INPUT_PARTITION, TransactionFailed, admitted
from worker.wire.codec import DOC_ID_HEADER, Encoding, EventEncoder, Headers
from worker.wire.events import DeadLetterEvent

# Record overhead beyond key and value (batch header, headers, varints): leave room for it
# when checking a value against max_record_bytes ourselves.
_RECORD_OVERHEAD = 1024

# The broker's "too large" (a topic's own max.message.bytes below ours): no retry can succeed,
# and :meth:`Publisher.wait` raises it as it is (:func:`too_large` names it for a dead letter).
TOO_LARGE = (MessageSizeTooLargeError, RecordTooLargeError)
# (key, value, headers): a null value is a tombstone.
Record = tuple[bytes, bytes | None, list[tuple[str, bytes | None]]]  # the client wants a list
# Kafka's default keyed partitioning (murmur2 of the key), as every client computes it.
_PARTITIONER = DefaultPartitioner()


@dataclass(slots=True)
class _Batch:
    """Records of one partition on their way: the client's batch builder, and the future
    every document with a record in it waits on."""

    builder: Any  # aiokafka.producer.message_accumulator.BatchBuilder (untyped)
    acked: asyncio.Future[None]
    created: float  # loop time of its first record, for linger.ms


class _Lane:
    """One output partition's batches not yet handed to the client, oldest first."""

    __slots__ = ("driver", "handing", "open", "pending", "sealed")

    def __init__(self) -> None:
        self.open: _Batch | None = None  # still taking records
        self.sealed: deque[_Batch] = deque()  # full, waiting for their turn
        self.handing: _Batch | None = None  # being handed to the client
        self.driver: asyncio.Task[None] | None = None  # hands batches over while any wait
        # Acknowledgements of its batches not yet settled (a hand-over waits for them).
        self.pending: set[asyncio.Future[None]] = set()


class Publisher:
    def __init__(
        self,
        producer: AIOKafkaProducer,
        encoder: EventEncoder,
        *,
        output_topic: str,
        dlq_topic: str,
        max_record_bytes: int,
        linger_ms: int = 0,
        uncompressed_topics: Collection[str] = (),
        batch_bytes: int | None = None,
        transactional: bool = False,
        admit: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        if uncompressed_topics and batch_bytes is None:
            # The producer's own batch.size is not readable back from the client; a default
            # here would silently differ from it (aiokafka's default against the worker's).
            raise ValueError("batch_bytes is required with uncompressed_topics")
        self._producer = producer
        self._encoder = encoder
        self._headers = encoder.headers()
        self.output_topic = output_topic
        self.dlq_topic = dlq_topic
        self.max_value_bytes = max_record_bytes - _RECORD_OVERHEAD
        self._linger_s = linger_ms / 1000
        # Keyed by (input partition, topic, partition): with exactly-once each input partition
        # writes in its own transaction (worker.kafka.transactions), so its records never share
        # a batch with another's; otherwise the input partition is always None.
        self._lanes: dict[tuple[int | None, str, int], _Lane] = {}
        self._transactional = transactional
        # Exactly-once: each document's first write waits while a commit of its input
        # partition's transaction is under way (worker.kafka.transactions.PartitionTransactions
        # .admit); None: writes go straight out.
        self._admit = admit
        # Topics whose records hardly compress (the state changelog: 16-byte chunk ids, which
        # are hashes) go out uncompressed, in batches of ``batch_bytes``: compression saves
        # little of them for CPU on the worker and the broker (docs/benchmarks.md).
        self._uncompressed = frozenset(uncompressed_topics)
        self._batch_bytes = batch_bytes or 0
        # The highest offset acknowledged per (topic, partition).
        self._acknowledged: dict[tuple[str, int], int] = {}

    @property
    def encoding(self) -> Encoding:
        return self._encoder.encoding

    async def stage_encoded(
        self,
        doc_id: str,
        keys: Sequence[bytes],
        values: Sequence[bytes],
        headers: Headers = (),
        retracted: Sequence[str] = (),
    ) -> tuple[list[asyncio.Future[None]], int]:
        """Append a document's encoded chunk events (``keys``: their chunk ids) in index order,
        then the tombstones of its ``retracted`` chunk ids, to the document's partition; the
        acknowledgements to :meth:`wait` for, and the bytes appended. ``headers`` (trace
        context, forwarded input headers) go on every record (beside the content type on
        events; beside the document id on tombstones)."""
        await self.admit()  # before the early return: the document's state record follows
        if not values and not retracted:
            return [], 0  # nothing to wait for (a document that chunked to nothing, as before)
        sizes = list(map(len, values))
        if sizes and max(sizes) + 32 > self.max_value_bytes:
            index = next(i for i, n in enumerate(sizes) if n + 32 > self.max_value_bytes)
            raise OutputRecordTooLarge(
                f"chunk {index} encodes to {sizes[index]} bytes, above the record limit "
                f"{self.max_value_bytes} (raise CHUNKSTREAM_MAX_RECORD_BYTES or lower the "
                "chunk size)"
            )
        partition = await self.partition_for(self.output_topic, doc_id.encode())
        event_headers: list[tuple[str, bytes | None]] = [*self._headers, *headers]
        records: list[Record] = [
            (key, value, event_headers) for key, value in zip(keys, values, strict=True)
        ]
        if retracted:
            tombstone_headers = [(DOC_ID_HEADER, doc_id.encode()), *headers]
            records.extend((chunk_id.encode(), None, tombstone_headers) for chunk_id in retracted)
        return self.stage(self.output_topic, partition, records), sum(sizes)

    async def publish(self, topic: str, partition: int, records: Sequence[Record]) -> None:
        """Append ``records`` in order to the (topic, partition) lane and return once every
        one is acknowledged; a refused batch raises (our own copy of its error).

        Every lane lingers (``linger.ms``), the state changelog's too: its records share
        produce requests with other records instead of costing the broker and the client one
        each (docs/benchmarks.md)."""
        await self.admit()
        await self.wait(self.stage(topic, partition, records))

    async def wait(self, acks: Sequence[asyncio.Future[None]]) -> None:
        """Return once every batch of ``acks`` is acknowledged; a refused batch raises (our
        own copy of its error: a batch's error is shared by every document in it, and
        tracebacks would pile up on one exception object)."""
        try:
            for acked in acks:
                # Shielded: a batch's acknowledgement is shared by every document in it, and
                # cancelling one of them must not cancel it for the others.
                await asyncio.shield(acked)
        except TOO_LARGE:
            raise
        except KafkaError as exc:
            raise copy.copy(exc) from None

    async def partition_for(self, topic: str, key: bytes) -> int:
        """The partition Kafka's default partitioner picks for ``key`` in ``topic``."""
        partitions = sorted(await self._producer.partitions_for(topic))
        return int(_PARTITIONER(key, partitions, partitions))

    async def stage_keyed(
        self, topic: str, key: bytes, event: msgspec.Struct | None
    ) -> list[asyncio.Future[None]]:
        """``event`` (encoded, with the content type) or, None, a tombstone, keyed by ``key`` in
        ``topic`` on the partition the default partitioner picks (a compacted topic keyed by
        it: the documents topic), without waiting."""
        await self.admit()
        if event is None:
            record: Record = (key, None, [])
        else:
            record = (key, self._encoder.encode(event), list(self._headers))
        return self.stage(topic, await self.partition_for(topic, key), [record])

    def stage(
        self, topic: str, partition: int, records: Sequence[Record]
    ) -> list[asyncio.Future[None]]:
        """Append ``records`` in order to the (topic, partition) lane's open batch (sealing
        full ones), without waiting: the acknowledgements of the batches they went into, in
        order, for :meth:`wait`. Records staged in one step (no await between) sit together.
        With exactly-once the task must have been let in (:meth:`admit`) first."""
        if self._admit is not None and not admitted():
            raise TransactionFailed("a write staged before the document was let in (admit)")
        lane_key = (INPUT_PARTITION.get() if self._transactional else None, topic, partition)
        lane = self._lanes.get(lane_key)
        if lane is None:
            lane = self._lanes[lane_key] = _Lane()
        batch = lane.open or self._new_batch(lane, topic)
        acks = [batch.acked]
        for key, value, headers in records:
            if batch.builder.append(timestamp=None, key=key, value=value, headers=headers) is None:
                # Full (batch.size): it waits its turn; the record opens the next batch. A
                # builder always takes its first record, however large.
                lane.sealed.append(batch)
                batch = self._new_batch(lane, topic)
                batch.builder.append(timestamp=None, key=key, value=value, headers=headers)
                acks.append(batch.acked)
        if lane.driver is None:
            lane.driver = asyncio.get_running_loop().create_task(
                self._drive(lane, topic, partition)
            )
        return acks

    def _new_batch(self, lane: _Lane, topic: str) -> _Batch:
        loop = asyncio.get_running_loop()
        if topic in self._uncompressed:
            # The client's own builder, as create_batch makes it, but without compression.
            builder: Any = BatchBuilder(self._batch_bytes, 0, is_transactional=self._transactional)
        else:
            builder = self._producer.create_batch()
        lane.open = _Batch(builder, loop.create_future(), loop.time())
        lane.pending.add(lane.open.acked)
        lane.open.acked.add_done_callback(lane.pending.discard)
        return lane.open

    def unsettled(self, lanes: Callable[[str, int], bool]) -> set[asyncio.Future[None]]:
        """What to wait for until every record already appended to the (topic, partition)
        lanes that ``lanes`` picks is acknowledged or refused."""
        return {
            acked
            for (_, topic, partition), lane in self._lanes.items()
            if lanes(topic, partition)
            for acked in lane.pending
        }

    async def _drive(self, lane: _Lane, topic: str, partition: int) -> None:
        """Hand the lane's batches to the client in order until none is left. ``send_batch``
        returns once the client has queued the batch, which it does one per partition at a
        time; meanwhile documents keep filling the open batch."""
        loop = asyncio.get_running_loop()
        try:
            while lane.sealed or lane.open is not None:
                if lane.sealed:
                    batch = lane.sealed.popleft()
                else:
                    assert lane.open is not None
                    wait = lane.open.created + self._linger_s - loop.time()
                    if wait > 0:  # linger.ms: give it time to fill, then look again
                        await asyncio.sleep(wait)
                        continue
                    batch, lane.open = lane.open, None
                # Closed before it is queued: nothing may join a batch once the client may
                # have given it its sequence number.
                batch.builder.close()
                lane.handing = batch  # until queued or failed (a cancellation fails it)
                try:
                    delivered = await self._producer.send_batch(
                        batch.builder, topic, partition=partition
                    )
                except Exception as exc:  # no room within request_timeout_ms, producer closed
                    lane.handing = None
                    _fail(batch.acked, exc)
                    continue
                lane.handing = None
                count = batch.builder.record_count()
                delivered.add_done_callback(
                    partial(self._delivered, batch.acked, topic, partition, count)
                )
        except asyncio.CancelledError:
            # At loop teardown nobody may wait forever on a batch that will not go. After a
            # discard the lane is no longer this driver's (the discard failed what it held):
            # what was staged since belongs to the next driver.
            if lane.driver is asyncio.current_task():
                _fail_lane(lane, KafkaError("publisher stopped before the batch was sent"))
            raise
        finally:
            if lane.driver is asyncio.current_task():
                lane.driver = None

    def _delivered(
        self,
        acked: asyncio.Future[None],
        topic: str,
        partition: int,
        count: int,
        delivered: asyncio.Future[Any],
    ) -> None:
        if not delivered.cancelled() and delivered.exception() is None:
            last = delivered.result().offset + count - 1
            key = (topic, partition)
            if last > self._acknowledged.get(key, -1):
                self._acknowledged[key] = last
        _settle(acked, topic, delivered)

    def acknowledged(self, topic: str, partition: int) -> int | None:
        """The highest offset of ``topic``'s ``partition`` acknowledged to this publisher."""
        return self._acknowledged.get((topic, partition))

    def discard(self, error: BaseException) -> None:
        """Fail every batch not yet handed to the client, with ``error``: the partitions whose
        documents staged them were lost, and none of it may land now."""
        for lane in self._lanes.values():
            if lane.driver is not None:
                # Let go of here, not in the driver's own ``finally``: a driver cancelled before
                # its first step never runs it, and the lane would keep a dead driver that no
                # later batch gets past (the fault campaign's seed 17, at-least-once). Not in a
                # done callback either: that runs a turn after the driver ends, and a batch
                # staged in between would find a driver that no longer hands anything over.
                lane.driver.cancel()
                lane.driver = None
            _fail_lane(lane, error)
            lane.handing = None

    async def admit(self) -> None:
        """Exactly-once: let the current document into its partition's open transaction before
        its first write (it may wait for a commit under way); a no-op otherwise, and once in."""
        if self._admit is not None:
            await self._admit()

    async def publish_dead_letter(self, event: DeadLetterEvent, headers: Headers = ()) -> None:
        await self.admit()
        value = self._encoder.encode(event)
        ack = await self._producer.send(
            self.dlq_topic, value=value, key=event.key, headers=[*self._headers, *headers]
        )
        await ack


def too_large(exc: KafkaError) -> OutputRecordTooLarge:
    """The broker's "too large" as the document's error: a topic's own max.message.bytes is
    below ours, and no retry can succeed."""
    return OutputRecordTooLarge(
        f"a topic refused a batch of this document's records as too large ({exc}): its "
        "max.message.bytes is below CHUNKSTREAM_MAX_RECORD_BYTES"
    )


def _settle(acked: asyncio.Future[None], topic: str, delivered: asyncio.Future[Any]) -> None:
    if acked.done():
        return
    if delivered.cancelled():
        _fail(acked, KafkaError("the client cancelled the batch"))
    elif (error := delivered.exception()) is not None:
        if isinstance(error, TopicAuthorizationFailedError) and not error.args:
            error = TopicAuthorizationFailedError(topic)  # the client's names no topic
        _fail(acked, error)
    else:
        acked.set_result(None)


def _fail_lane(lane: _Lane, error: BaseException) -> None:
    for batch in [
        *([lane.handing] if lane.handing else []),
        *lane.sealed,
        *([lane.open] if lane.open else []),
    ]:
        _fail(batch.acked, error)
    lane.sealed.clear()
    lane.open = None


def _fail(acked: asyncio.Future[None], error: BaseException) -> None:
    if not acked.done():
        acked.set_exception(error)
        # Retrieved here on purpose: every document that still waits gets it; one that was
        # cancelled meanwhile (revocation) is replayed anyway, so no "never retrieved" noise.
        acked.exception()
