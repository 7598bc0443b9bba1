"""The consume loop: fetch, start each document, pause and resume, rebalance; the commits and the
letting go of partitions are worker.consuming.commits'.

Invariants:

- ``getmany`` is called even while every partition is paused: it returns nothing then, but
  keeps the member's poll interval alive, so the group never evicts us.
- Records of a partition revoked while their fetch was in flight are not started.
- A document whose processing raises something that is not the input's fault is a bug: the
  loop stops (``fatal``), rather than skip the offset or stall the partition. So does a refusal
  by the broker's ACLs (worker.kafka.permissions), as a configuration error.
- With document state (worker.state.documents): a newly assigned partition is paused until its
  state is restored from the changelog (a Kafka error retries the restore; only an unreadable
  changelog stops the worker).
- With exactly-once (``transactions``: worker.kafka.transactions) a newly assigned partition
  stays paused until its producer has fenced the previous owner's; then its committed offset is
  read and sought. A revocation and the shutdown wait for a commit under way before they drain.
- A revocation is a hand-over unless the partitions were lost (worker.kafka.membership: the
  session expired, the generation is gone): then they are dropped (worker.consuming.commits).

The client is anything with aiokafka's consumer methods used here (tests pass a small fake).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial

from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.structs import ConsumerRecord

from worker.config import Settings
from worker.consuming.backpressure import Backpressure, PauseDigest, Verdict
from worker.consuming.client import ConsumerClient
from worker.consuming.commits import Assignment, Commits, DiscardWrites, Failure, InFlight
from worker.consuming.prefetch import HeldRecords
from worker.consuming.unreadable import StuckPartitions, locate
from worker.kafka.link import retrying
from worker.kafka.membership import Membership
from worker.kafka.permissions import PermissionRefused
from worker.kafka.transactions import (
    INPUT_OFFSET,
    INPUT_PARTITION,
    PartitionTransactions,
    TransactionBroken,
    TransactionFailed,
)
from worker.observability.backlog import CommitAges, WorkRate
from worker.observability.metrics import Metrics
from worker.runtime.resources import fetch_max_bytes
from worker.state.changelog import Restored
from worker.state.documents import DocumentStates
from worker.state.restores import Restores
from worker.wire.records import InputRecord

log = logging.getLogger(__name__)

ProcessFn = Callable[[InputRecord], Awaitable[None]]
# How long one fetch may wait: it bounds how long a stop request waits for the loop to notice.
_FETCH_TIMEOUT_MS = 250
_FETCH_MAX_RECORDS = 500


class ConsumeLoop:
    """Runs ``process`` for every record of the assigned partitions, commits what finished."""

    def __init__(
        self,
        consumer: ConsumerClient,
        settings: Settings,
        process: ProcessFn,
        *,
        metrics: Metrics,
        stopping: asyncio.Event,
        queue_full: Callable[[], bool] = lambda: False,
        states: DocumentStates | None = None,
        kafka_up: Callable[[], bool] = lambda: True,
        transactions: PartitionTransactions | None = None,
        membership: Membership | None = None,
        discard_writes: DiscardWrites | None = None,
    ) -> None:
        if settings.max_in_flight_bytes <= 0:
            # 0 means "derive from the container" (worker.runtime.resources.plan), done at start-up.
            raise ValueError("ConsumeLoop needs planned settings (worker.runtime.resources.plan)")
        self._consumer = consumer
        self.settings = settings
        self._process_record = process
        self._metrics = metrics
        self._stopping = stopping
        self._queue_full = queue_full
        self._assignment = Assignment()
        self.in_flight = InFlight()
        self._failure = Failure(stopping)
        self._backpressure = Backpressure(
            max_documents=settings.max_in_flight_documents,
            max_bytes=settings.max_in_flight_bytes,
        )
        self._pauses = PauseDigest()
        self.stuck = StuckPartitions()
        self._held = HeldRecords()
        self._client_paused = False  # backpressure's pause of the client, until held is empty
        self._finished = asyncio.Event()  # set whenever a document finishes
        self.joined = False
        self._states = states
        # The tasks restoring assigned partitions (paused until their state is back).
        self._restores: Restores[TopicPartition] = Restores(self._restore)
        self._kafka_up = kafka_up
        self._transactions = transactions
        self._membership = membership
        self.commits = Commits(
            consumer,
            settings,
            metrics=metrics,
            in_flight=self.in_flight,
            assignment=self._assignment,
            failure=self._failure,
            states=states,
            transactions=transactions,
            membership=membership,
            discard_writes=discard_writes,
            kafka_up=kafka_up,
        )
        # Measurements for the backlog estimate.
        self.work_rate = WorkRate()

    @property
    def fatal(self) -> BaseException | None:
        """The error that stopped the worker, if one did."""
        return self._failure.fatal

    @property
    def commit_ages(self) -> CommitAges[TopicPartition]:
        return self.commits.ages

    @property
    def held(self) -> HeldRecords:
        return self._held

    @property
    def owned(self) -> set[TopicPartition]:
        return self._assignment.owned

    @property
    def restoring(self) -> set[TopicPartition]:
        """Partitions paused until their state is restored (and, exactly-once, fenced)."""
        return self._assignment.restoring

    def uncommitted(self, tp: TopicPartition) -> bool:
        """Records of ``tp`` taken and not committed yet (in flight, or finished and waiting
        for the next commit)."""
        return self.commits.uncommitted(tp)

    @property
    def paused(self) -> bool:
        return self._backpressure.paused

    def listener(self) -> ConsumerRebalanceListener:
        return _Rebalance(self)

    async def run(self) -> None:
        """Consume until stopping is set (then :meth:`finish`)."""
        s = self.settings
        while not self._stopping.is_set():
            room = max(1, s.max_in_flight_documents - self.in_flight.documents)
            # Taken by bytes too: n records ≤ the byte room ÷ the largest document, so the
            # window overshoots its byte mark by one document at most (the memory bound's term).
            room_bytes = s.max_in_flight_bytes - self.in_flight.bytes
            room = min(room, max(1, room_bytes // s.max_document_bytes))
            self._retry_stuck()
            self._restart_broken()
            try:
                # Paused, nothing can come: poll without waiting (it keeps the member in the
                # group) and wait below for a document to finish instead. Fetched records
                # queue behind those held at the last pause (worker.consuming.prefetch).
                self._held.hold(
                    await self._consumer.getmany(
                        timeout_ms=0 if self._client_paused else _FETCH_TIMEOUT_MS,
                        max_records=min(_FETCH_MAX_RECORDS, room),
                    )
                )
                for tp, record in self._held.take(0 if self.paused else room, self.owned):
                    self._start(tp, record)
                if self._apply_backpressure() is Verdict.PAUSE:
                    self._finished.clear()
                    try:
                        await self._hold_buffered()
                    finally:  # even if the client failed: a paused loop never fetches on
                        self._consumer.pause(*self._consumer.assignment())
                        self._client_paused = True
            except Exception as exc:
                if not await self._on_unreadable(exc):
                    raise
                continue
            if self._client_paused and not self.paused and not self._held:
                assigned = self._consumer.assignment()
                self._consumer.resume(
                    *(tp for tp in assigned if tp not in self.stuck and tp not in self.restoring)
                )
                self._client_paused = False
                self._metrics.paused_partitions.set(0)
            if self.paused:
                await self._until_a_document_finishes()
            if self.commits.due():
                await self.commits.commit_due(self._stopping)

    def _stop_refused(self, exc: PermissionRefused) -> None:
        log.error("refused by the broker's ACLs; stopping the worker", extra={"reason": str(exc)})
        self._failure.stop(exc)

    async def _hold_buffered(self) -> None:
        """What the client has buffered, taken before a pause makes it drop the records
        (worker.consuming.prefetch): up to one fetch response's bytes (compressed input decodes
        larger; the rest is fetched again after the resume)."""
        while self._held.bytes < fetch_max_bytes(self.settings):
            batch = await self._consumer.getmany(timeout_ms=0, max_records=_FETCH_MAX_RECORDS)
            if not batch:
                return
            self._held.hold(batch)

    async def _until_a_document_finishes(self) -> None:
        """While paused: return when a document finishes (resuming may be due) or after one
        fetch timeout, not after a paused fetch's whole ``fetch_max_wait_ms``: that would
        leave the worker idle at every pause once the in-flight documents drain
        (bench/e2e_bench.py measures the throughput it costs). A document that finishes
        while the buffered records are taken at the pause counts: the event is cleared at the
        pause and after each wait, not before it."""
        # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancellation
        # that arrives as the event is set, and the loop would then fetch on.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_FETCH_TIMEOUT_MS / 1000):
                await self._finished.wait()
        self._finished.clear()

    async def _on_unreadable(self, exc: Exception) -> bool:
        """A record batch the client cannot read (see :mod:`worker.consuming.unreadable`): pause its
        partition, say so, and rewind the others. False if ``exc`` is something else."""
        found = locate(exc)
        if found is None or found.partition not in self.owned:
            return False
        tp = found.partition
        offset = found.offset if found.offset is not None else await self._consumer.position(tp)
        log.error(
            "unreadable record batch: partition paused, nothing from it on is committed "
            "(a codec library missing from this install, or a corrupt batch)",
            extra={
                "topic": tp.topic,
                "partition": tp.partition,
                "offset": offset,
                "error": found.error,
                "retry_in_s": self.stuck.retry_s,
            },
        )
        self._consumer.pause(tp)
        self.stuck.add(dataclasses.replace(found, offset=offset), time.monotonic())
        self._metrics.unreadable_batches.labels(str(tp.partition)).inc()
        self._metrics.unreadable_partitions.set(len(self.stuck))
        # The client may have taken other partitions' records in the same call and lost them
        # with the exception: fetch each again from the record after the last one we took
        # (those held are fetched again too; tp's, before the bad batch, stay).
        self._held.drop(self.owned - {tp})
        for other in self.owned - {tp}:
            next_offset = self.commits.tracker.next_offset(other)
            if next_offset is not None:
                self._consumer.seek(other, next_offset)
            else:
                committed = await self._consumer.committed(other)
                if committed is not None:
                    self._consumer.seek(other, committed)
                elif self.settings.auto_offset_reset == "earliest":
                    await self._consumer.seek_to_beginning(other)
        return True

    def _retry_stuck(self) -> None:
        for tp in self.stuck.due(time.monotonic()):
            if tp in self.owned and not self._client_paused and tp not in self.restoring:
                self._consumer.resume(tp)
        self._metrics.unreadable_partitions.set(len(self.stuck))

    async def finish(self) -> None:
        """Shutdown: let in-flight documents finish within the drain timeout, commit, and
        checkpoint the state of the partitions let go cleanly (worker.consuming.commits)."""
        await self._restores.stop()
        summary = self._pauses.summary(time.monotonic(), final=True)
        if summary is not None:
            log.info("backpressure", extra={**summary, "paused_now": self.paused})
        await self.commits.finish()

    def _start(self, tp: TopicPartition, record: ConsumerRecord[bytes, bytes]) -> None:
        self.commits.tracker.add(tp, record.offset)
        size = len(record.value or b"")
        self._metrics.documents_consumed.inc()
        self._metrics.input_bytes.inc(size)
        self.in_flight.documents += 1
        self.in_flight.bytes += size
        self.work_rate.taken(size, time.monotonic())
        if self._transactions is None:
            task = asyncio.create_task(self._process(tp, record))
        else:  # its writes go into its partition's transaction (worker.kafka.transactions)
            context = contextvars.copy_context()
            context.run(INPUT_PARTITION.set, tp.partition)
            context.run(INPUT_OFFSET.set, record.offset)
            task = asyncio.create_task(self._process(tp, record), context=context)
        tasks = self.in_flight.tasks.setdefault(tp, {})
        tasks[task] = record.offset
        task.add_done_callback(lambda done: tasks.pop(done, None))
        # The window's accounting on the task, not in its coroutine: a task cancelled before
        # its first step (partitions lost the moment it was started) never runs a line of it.
        task.add_done_callback(partial(self._ended, size))

    def _ended(self, size: int, task: asyncio.Task[bool]) -> None:
        self.in_flight.documents -= 1
        self.in_flight.bytes -= size
        done = not task.cancelled() and task.exception() is None and task.result()
        self.work_rate.finished(size if done else 0, time.monotonic())
        self._finished.set()

    def _apply_backpressure(self) -> Verdict:
        """The verdict, logged and counted; the loop pauses the client (after taking what it
        buffered) and resumes it once the records held are taken. Each pause and resume is a
        debug line; an info line sums them up once a minute while they happen."""
        docs, size = self.in_flight.documents, self.in_flight.bytes
        queue_full = self._queue_full()
        verdict = self._backpressure.update(docs, size, queue_full)
        now = time.monotonic()
        self._pauses.note(verdict, now)
        if verdict is Verdict.PAUSE:
            self._metrics.backpressure_pauses.inc()
            self._metrics.paused_partitions.set(len(self._consumer.assignment()))
            log.debug(
                "paused",
                extra={"in_flight": docs, "in_flight_bytes": size, "queue_full": queue_full},
            )
        elif verdict is Verdict.RESUME:  # the client itself once nothing is held (run)
            log.debug("resumed", extra={"in_flight": docs, "in_flight_bytes": size})
        summary = self._pauses.summary(now)
        if summary is not None:
            log.info("backpressure", extra={**summary, "paused_now": self.paused})
        return verdict

    async def _process(self, tp: TopicPartition, record: ConsumerRecord[bytes, bytes]) -> bool:
        """Handle one record; whether it finished (its offset may then be committed)."""
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
            await self._process_record(rec)
        except asyncio.CancelledError:
            raise
        except PermissionRefused as exc:  # a missing ACL: only a new grant fixes it
            self._stop_refused(exc)
            return False
        except Exception as exc:
            if isinstance(exc, TransactionFailed) and self._transaction_gone(tp, exc):
                # Exactly-once: the document is abandoned with its partition's transaction; the
                # partition restarts from its last committed one, or (lost) is dropped.
                log.debug(
                    "document abandoned: its partition's transaction failed",
                    extra={"partition": tp.partition, "offset": record.offset},
                )
                return False
            # Not the input's fault and not a transient Kafka error: a bug. The offset must
            # not be skipped, and silently stalling the partition is worse than a restart.
            log.exception(
                "unexpected failure; stopping the worker",
                extra={"partition": tp.partition, "offset": record.offset},
            )
            self._failure.stop(exc)
            return False
        self.commits.tracker.mark_done(tp, record.offset)
        return True

    def _transaction_gone(self, tp: TopicPartition, exc: TransactionFailed) -> bool:
        """Whether a document's transaction failure is its partition's, to recover from by a
        restart (or a drop), rather than a bug."""
        if isinstance(exc, TransactionBroken):
            self.commits.broken_partition(tp, exc)
            return True
        # Its transaction aborted under it: lost, being restarted, or let go.
        return (
            self.commits.lost()
            or tp in self.commits.broken
            or tp in self.restoring
            or tp not in self.owned
        )

    def _restart_broken(self) -> None:
        """Exactly-once: restart the partitions whose transaction failed, once this member can
        vouch for its membership (a member that cannot may have been replaced: the new owner's
        producers must not be fenced by ours)."""
        broken = self.commits.broken
        if not broken or self.commits.lost():
            return
        tps = broken & self.owned
        broken.clear()
        if not tps:
            return
        log.warning(
            "partitions restarted from their last committed transaction",
            extra={"partitions": sorted(f"{tp.topic}:{tp.partition}" for tp in tps)},
        )
        self._held.drop(tps)
        self._consumer.pause(*tps)
        self._assignment.restoring |= tps
        self._metrics.restoring_partitions.set(len(self.restoring))
        self._restores.restart(tps, self.commits.restart)

    # -- rebalancing ------------------------------------------------------------------------

    async def on_revoked(self, revoked: set[TopicPartition]) -> None:
        """Stop taking the partitions' records, then hand them over, or drop them if they were
        lost (worker.consuming.commits)."""
        self._assignment.owned -= revoked
        self._held.drop(revoked)
        self._restores.revoke(revoked)
        await self.commits.revoked(revoked)
        self.commits.forget(revoked)
        self.stuck.forget(revoked)
        m = self._metrics
        for tp in revoked:
            self.in_flight.tasks.pop(tp, None)
            for family in (m.consumer_lag, m.partition_commit_age, m.backlog_seconds):
                with contextlib.suppress(KeyError):  # no sample was taken for it
                    family.remove(str(tp.partition))

    def on_assigned(self, assigned: set[TopicPartition]) -> None:
        self._metrics.rebalances.inc()
        self.joined = True
        if self._membership is not None:  # the join just completed: proof of membership
            self._membership.joined()
        self._assignment.owned |= assigned
        log.info(
            "partitions assigned",
            extra={"partitions": sorted(f"{tp.topic}:{tp.partition}" for tp in assigned)},
        )
        if self._client_paused and assigned:
            # The new assignment starts unpaused in aiokafka; keep our state consistent.
            self._consumer.pause(*assigned)
        if (self._states is not None or self._transactions is not None) and assigned:
            # Nothing of a partition is consumed before its state is back, nor (exactly-once)
            # before its producer has fenced the previous owner's.
            self._consumer.pause(*assigned)
            self._assignment.restoring |= assigned
            self._metrics.restoring_partitions.set(len(self.restoring))
            self._restores.start(assigned)

    async def _restore(self, tps: list[TopicPartition]) -> None:
        """Restore the partitions' state (together: worker.state.changelog), then let their
        records in. With exactly-once, their producers start first (fencing the previous
        owner's: worker.kafka.transactions), and each is sought to its committed offset as it
        is after that."""
        states = self._states
        tps = sorted(tps, key=lambda tp: tp.partition)
        partitions = [tp.partition for tp in tps]

        async def restore() -> list[Restored]:  # committed offsets first: worker.state.unconfirmed
            if self._transactions is not None:
                await self._transactions.open(partitions)
            committed = {tp.partition: await self._consumer.committed(tp) for tp in tps}
            restored = []
            if states is not None:
                restored = await states.restore(partitions, committed)
                await states.resend_lost_records(tps, self._consumer.beginning_offsets)
            if self._transactions is not None:
                await self._seek_committed(tps, committed)
            return restored

        try:  # Kafka away: the partitions wait, paused, and the restore is tried again
            await retrying(restore, partitions)
        except asyncio.CancelledError:
            raise
        except PermissionRefused as exc:  # a missing ACL: only a new grant fixes it
            self._stop_refused(exc)
            return
        except Exception as exc:
            # The store cannot be trusted and the partitions cannot be consumed without it.
            log.exception(
                "state restore failed; stopping the worker", extra={"partitions": partitions}
            )
            self._failure.stop(exc)
            return
        for tp in tps:  # states.restore logged them and observed their times
            self.restoring.discard(tp)
            if tp in self.owned and not self._client_paused and tp not in self.stuck:
                self._consumer.resume(tp)
        self._metrics.restoring_partitions.set(len(self.restoring))

    async def _seek_committed(
        self, tps: list[TopicPartition], committed: dict[int, int | None]
    ) -> None:
        """Start each partition at its committed offset as read after the fence: the client
        may have fetched it before a zombie's last transaction committed."""
        self._held.drop(set(tps))
        for tp in tps:
            offset = committed[tp.partition]
            if offset is not None:
                self._consumer.seek(tp, offset)
            elif self.settings.auto_offset_reset == "earliest":
                await self._consumer.seek_to_beginning(tp)
            else:
                await self._consumer.seek_to_end(tp)


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, loop: ConsumeLoop) -> None:
        self._loop = loop

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._loop.on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._loop.on_assigned(set(assigned))
