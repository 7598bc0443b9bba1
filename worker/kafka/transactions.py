"""Exactly-once writes: one transactional producer per input partition (the fencing Kafka Streams
used before KIP-447), and the producer surface the publisher writes through.

Invariants:

- Everything written while input partition p is processed (chunk events, tombstones, state
  records, dead letters, documents-topic records, delete-marker expiries) goes through p's
  producer, inside its open transaction; p's input offset joins that transaction
  (``send_offsets_to_transaction``), so the records and the offset commit or abort together.
  Which partition a write belongs to is the context of the task that writes it
  (:data:`INPUT_PARTITION`, set by the consume loop for each document).
- p's producer has the transactional id :func:`transactional_id` — the same whichever member
  owns p. Starting it (InitProducerId) bumps that id's epoch: the broker first completes or
  aborts any transaction an earlier holder left open, and from then on refuses that holder's
  every write, offset and commit (``ProducerFenced``). The consume loop therefore opens p's
  producer *before* it reads p's committed offset and p's state: it starts from exactly what
  the last owner committed, and nobody else can commit for p any more. aiokafka sends
  TxnOffsetCommit without the group generation (no KIP-447), so the epoch is the fence.
- A fenced or failed transaction is never retried or replaced here: a new producer with the
  same id would fence the member that owns p now. A failure raises :class:`TransactionFailed`
  (not a Kafka error: the handler does not retry it), and the worker stops.
- A commit is a cut through offsets, not a pause (:meth:`PartitionTransactions.close_after`):
  the documents of p up to the highest offset that has written into the open transaction may
  still write and must finish; a later document waits at its first write
  (:meth:`PartitionTransactions.admit`) until the next transaction begins, while its chunking
  goes on. So every record of a committed transaction belongs to a document below the offset it
  commits, and every document below that offset has all of its records in it or in an earlier
  one: a replay from the committed offset writes nothing twice and leaves nothing out.
- An idle partition's transaction costs nothing: aiokafka begins a transaction locally, and a
  commit with nothing written and no offset is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from aiokafka import TopicPartition
from aiokafka.structs import OffsetAndMetadata

from worker.observability.metrics import Metrics

log = logging.getLogger(__name__)

INPUT_PARTITION: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "chunkstream_input_partition", default=None
)
"""The input partition whose transaction the current task's writes belong to."""

INPUT_OFFSET: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "chunkstream_input_offset", default=None
)
"""The input offset of the document the current task writes for (None: not a document)."""

# Whether the current task's document has been let into its partition's open transaction
# (admit); writes of a task that is not a document's (writing_for) are always in.
_ADMITTED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "chunkstream_admitted", default=False
)

# How long stopping one partition's producer may take (it flushes nothing: a commit or an
# abort came first).
_STOP_TIMEOUT_S = 10.0


class TransactionFailed(RuntimeError):
    """A partition's transaction cannot commit: fenced by a newer owner, or a write or the
    commit failed. Not retried here: the partition restarts from its last committed
    transaction (worker.consuming.commits), or, where nothing explains it, the worker stops."""


class TransactionBroken(TransactionFailed):
    """The partition's transaction failed (a write refused, its commit or its next begin
    failed, as during a broker outage): it can only be aborted, and the partition restarted
    from its last committed transaction."""


class TransactionalProducer(Protocol):
    """The aiokafka producer methods used here (tests pass a small fake)."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def begin_transaction(self) -> None: ...
    async def send_offsets_to_transaction(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], group_id: str
    ) -> None: ...
    async def commit_transaction(self) -> None: ...
    async def abort_transaction(self) -> None: ...
    def create_batch(self) -> Any: ...
    async def send_batch(self, batch: Any, topic: str, *, partition: int) -> Any: ...
    async def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> Any: ...


class MetadataSource(Protocol):
    async def partitions_for(self, topic: str) -> set[int]: ...


def transactional_id(group_id: str, input_topic: str, partition: int) -> str:
    """The transactional id of input partition ``partition``'s producer: stable across members
    and restarts, so each new owner fences the previous one."""
    return f"chunkstream-{group_id}-{input_topic}-{partition}"


@contextlib.contextmanager
def writing_for(partition: int) -> Iterator[None]:
    """Writes inside the block belong to ``partition``'s transaction (a task of its own, not a
    document's: a restore's or a marker expiry's, which the consume loop never runs while a
    commit of the partition is under way)."""
    token = INPUT_PARTITION.set(partition)
    admitted = _ADMITTED.set(True)
    try:
        yield
    finally:
        _ADMITTED.reset(admitted)
        INPUT_PARTITION.reset(token)


def admitted() -> bool:
    """Whether the current task may write into its partition's open transaction."""
    return _ADMITTED.get()


@dataclass
class _Transaction:
    producer: TransactionalProducer
    began: float | None = None  # monotonic time of its first write or offset; None: nothing yet
    failed: BaseException | None = None
    highest: int = -1  # the highest document offset let in since the transaction began
    # While a commit is under way: only documents at offsets up to ``bound`` may come in; the
    # others wait for ``reopened`` (set when the next transaction begins, or on giving up).
    bound: int | None = None
    reopened: asyncio.Event = field(default_factory=asyncio.Event)


class PartitionTransactions:
    """The transactional producers of the input partitions this member owns, and the
    producer methods :class:`worker.kafka.publisher.Publisher` calls, routed by
    :data:`INPUT_PARTITION`."""

    def __init__(
        self,
        make: Callable[[str], TransactionalProducer],
        metadata: MetadataSource,
        *,
        group_id: str,
        input_topic: str,
        metrics: Metrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._make = make
        self._metadata = metadata
        self._group_id = group_id
        self._input_topic = input_topic
        self._metrics = metrics
        self._clock = clock
        self._open: dict[int, _Transaction] = {}

    @property
    def partitions(self) -> set[int]:
        """The input partitions with a started producer."""
        return set(self._open)

    def written(self, partition: int) -> bool:
        """Whether ``partition``'s open transaction holds a write or an offset."""
        txn = self._open.get(partition)
        return txn is not None and txn.began is not None

    # -- ownership ------------------------------------------------------------------------

    async def open(self, partitions: Iterable[int]) -> None:
        """Start the producers of ``partitions`` not open yet (each start fences every earlier
        holder of its id) and begin their first transaction."""
        for partition in sorted(set(partitions) - self._open.keys()):
            producer = self._make(transactional_id(self._group_id, self._input_topic, partition))
            try:
                await producer.start()
                await producer.begin_transaction()
            except BaseException:
                await _stop(producer)
                raise
            self._open[partition] = _Transaction(producer)

    async def close(self, partitions: Iterable[int]) -> None:
        """Stop the producers of ``partitions`` (after their commit or abort): a transaction
        still open is left to the broker, which aborts it once the next owner starts."""
        for partition in sorted(set(partitions) & self._open.keys()):
            txn = self._open.pop(partition, None)
            if txn is None:  # closed meanwhile: a drop of lost partitions during the shutdown
                continue
            txn.reopened.set()  # a document still waiting to come in finds no transaction
            await _stop(txn.producer)

    async def stop(self) -> None:
        await self.close(list(self._open))

    # -- the cut ---------------------------------------------------------------------------

    async def admit(self) -> None:
        """Before the current document's first write: let it into its partition's open
        transaction, waiting while a commit under way closes that transaction to documents
        after it (:meth:`close_after`). Once in, it stays in: the commit waits for it."""
        if _ADMITTED.get():
            return
        partition, offset = INPUT_PARTITION.get(), INPUT_OFFSET.get()
        if partition is None or offset is None:
            raise TransactionFailed(f"a write outside any document (partition {partition})")
        while True:
            txn = self._open.get(partition)
            if txn is None:
                raise TransactionFailed(f"no transaction open for input partition {partition}")
            if txn.failed is not None:
                raise TransactionBroken(f"partition {partition}: {txn.failed!r}") from txn.failed
            if txn.bound is None or offset <= txn.bound:
                break
            await txn.reopened.wait()
        txn.highest = max(txn.highest, offset)
        _ADMITTED.set(True)

    def close_after(self, partition: int) -> int:
        """Start ``partition``'s commit: no document after the highest offset let in so far may
        come in until :meth:`reopen`. That offset (-1: none): the caller waits for every
        document up to it, then commits."""
        txn = self._open[partition]
        if txn.bound is None:
            txn.bound = txn.highest
            txn.reopened = asyncio.Event()
        return txn.bound

    def reopen(self, partition: int) -> None:
        """End ``partition``'s commit (done or put off): the waiting documents come in."""
        txn = self._open.get(partition)
        if txn is not None:
            txn.bound = None
            txn.reopened.set()

    # -- commit and abort -----------------------------------------------------------------

    async def commit(self, partition: int, offset: int | None) -> bool:
        """Commit ``partition``'s transaction with its input ``offset`` (the next to read; None:
        no new offset) and begin the next. False if there was nothing to commit. Every record
        written for the partition must be acknowledged first (the caller drained it)."""
        txn = self._open.get(partition)
        if txn is None:
            raise TransactionFailed(f"no transaction open for input partition {partition}")
        if txn.failed is not None:
            raise TransactionBroken(f"partition {partition}: {txn.failed!r}") from txn.failed
        if offset is None and txn.began is None:
            return False
        began = txn.began if txn.began is not None else self._clock()
        try:
            if offset is not None:
                tp = TopicPartition(self._input_topic, partition)
                await txn.producer.send_offsets_to_transaction(
                    {tp: OffsetAndMetadata(offset, "")}, self._group_id
                )
            await txn.producer.commit_transaction()
        except Exception as exc:
            txn.failed = exc
            raise TransactionBroken(f"partition {partition}: commit failed: {exc!r}") from exc
        self._metrics.transactions_committed.inc()
        self._metrics.transaction_seconds.observe(self._clock() - began)
        txn.began = None
        txn.highest = -1
        try:
            await txn.producer.begin_transaction()
        except Exception as exc:
            txn.failed = exc
            raise TransactionBroken(f"partition {partition}: begin failed: {exc!r}") from exc
        return True

    async def abort(self, partition: int) -> None:
        """Abort ``partition``'s transaction (best effort: a fenced producer cannot, and the
        broker aborts it for the next owner anyway) and stop its producer."""
        txn = self._open.pop(partition, None)
        if txn is None:
            return
        txn.reopened.set()  # a document still waiting to come in finds no transaction
        if txn.began is not None or txn.failed is not None:
            self._metrics.transactions_aborted.inc()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(_STOP_TIMEOUT_S):
                await txn.producer.abort_transaction()
        await _stop(txn.producer)

    # -- the producer surface of the publisher -----------------------------------------------

    def create_batch(self) -> Any:
        return self._current()[1].producer.create_batch()

    async def partitions_for(self, topic: str) -> set[int]:
        return await self._metadata.partitions_for(topic)

    async def send_batch(self, batch: Any, topic: str, *, partition: int) -> Any:
        owner, txn = self._current()
        delivered = await txn.producer.send_batch(batch, topic, partition=partition)
        delivered.add_done_callback(partial(self._check, owner, txn))
        return delivered

    async def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> Any:
        owner, txn = self._current()
        delivered = await txn.producer.send(topic, value=value, key=key, headers=headers)
        delivered.add_done_callback(partial(self._check, owner, txn))
        return delivered

    def _current(self) -> tuple[int, _Transaction]:
        """The open transaction of the writing task's input partition, marked as written."""
        partition = INPUT_PARTITION.get()
        txn = None if partition is None else self._open.get(partition)
        if partition is None or txn is None:
            raise TransactionFailed(f"a write outside any open transaction (partition {partition})")
        if not _ADMITTED.get():
            raise TransactionFailed(f"partition {partition}: a write before admit()")
        if txn.failed is not None:
            raise TransactionBroken(f"partition {partition}: {txn.failed!r}") from txn.failed
        if txn.began is None:
            txn.began = self._clock()
        return partition, txn

    def _check(self, partition: int, txn: _Transaction, delivered: asyncio.Future[Any]) -> None:
        """A write that failed leaves its transaction without it: the transaction must not
        commit (and the partition's later writes fail at once)."""
        if delivered.cancelled():
            error: BaseException | None = asyncio.CancelledError()
        else:
            error = delivered.exception()
        if error is not None and txn.failed is None:
            txn.failed = error
            log.warning(
                "transaction failed: a write was refused",
                extra={"partition": partition, "error": repr(error)},
            )


async def _stop(producer: TransactionalProducer) -> None:
    _retrieve_failure(producer)
    with contextlib.suppress(Exception):
        async with asyncio.timeout(_STOP_TIMEOUT_S):
            await producer.stop()
    _retrieve_failure(producer)  # the client's sender may have failed the transaction on stop


def _retrieve_failure(producer: TransactionalProducer) -> None:
    """aiokafka keeps a transaction's failure (a fence, a sender that died) on a future that
    only its commit or abort awaits. Neither does once the producer is in its fatal state (the
    partition's transaction already counts as failed here: :meth:`PartitionTransactions._check`
    saw the refused write), and asyncio then logs "Future exception was never retrieved" when
    the future is collected: it is retrieved here, on purpose, before the producer goes."""
    manager = getattr(producer, "_txn_manager", None)
    futures: list[Any] = [getattr(manager, "_transaction_waiter", None)]
    # A sender that died of the fence fails every batch it still held, each on a future of
    # its own that nobody waits for any more (the batch's drain waiter): the same logs.
    queue = getattr(producer, "_message_accumulator", None)
    queued: dict[Any, Any] = getattr(queue, "_batches", {})
    pending: set[Any] = getattr(queue, "_pending_batches", set())
    for batch in [*(b for batches in queued.values() for b in batches), *pending]:
        futures += [getattr(batch, "_drain_waiter", None), getattr(batch, "future", None)]
    for future in futures:
        if isinstance(future, asyncio.Future) and future.done() and not future.cancelled():
            future.exception()
