"""The consume loop: fetch, start each document, pause and resume, commit, drain, rebalance.

Invariants:

- An offset is committed only as part of the contiguous prefix of finished offsets of its
  partition (:class:`~worker.consuming.offsets.OffsetTracker`), so a commit never passes an
  unfinished
  document: at least once.
- ``getmany`` is called even while every partition is paused: it returns nothing then, but
  keeps the member's poll interval alive, so the group never evicts us.
- Records of a partition revoked while their fetch was in flight are not started.
- On revocation and on shutdown: stop taking work, drain the in-flight documents within a
  deadline (cancel the rest; they are replayed), commit, then let go.
- A document whose processing raises something that is not the input's fault is a bug: the
  loop stops (``fatal``), rather than skip the offset or stall the partition. So does a refusal
  by the broker's ACLs (worker.kafka.permissions), as a configuration error.
- With document state (worker.state.documents): a newly assigned partition is paused until its
  state is
  restored from the changelog (a Kafka error retries the restore; only an unreadable changelog
  stops the worker); a partition let go cleanly (nothing abandoned at the drain deadline) is
  checkpointed; delete markers expire after the commits that pass them, only for partitions
  still owned.
- With exactly-once (``transactions``: worker.kafka.transactions) a commit is a cut through
  offsets, run beside the loop (one at a time): each partition's transaction is closed to the
  documents after the highest offset that has written into it, those up to it finish, and the
  transaction commits with its offset. Meanwhile the loop keeps taking records and the later
  documents keep chunking; only their writes wait for the next transaction. A partition with a
  document abandoned at a drain deadline, or whose transaction fails, is aborted instead, never
  committed, and not checkpointed; a failed transaction stops the worker (``fatal``). A newly
  assigned partition stays paused until its producer has fenced the previous owner's; then its
  committed offset is read and sought. A revocation and the shutdown wait for a commit under
  way before they drain.
- While Kafka is unreachable (``kafka_up`` false: worker.kafka.reachability) nothing is committed (a
  commit would wait for the group coordinator, holding up the loop and a shutdown); the
  offsets stay committable and go out with the first commit after. Every commit is bounded.

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
from dataclasses import dataclass, field

from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord, OffsetAndMetadata

from worker.config import Settings
from worker.consuming.backpressure import Backpressure, Verdict
from worker.consuming.client import ConsumerClient
from worker.consuming.offsets import OffsetTracker
from worker.consuming.prefetch import HeldRecords
from worker.consuming.unreadable import StuckPartitions, locate
from worker.kafka.permissions import PermissionRefused, refused
from worker.kafka.reachability import retrying
from worker.kafka.transactions import INPUT_OFFSET, INPUT_PARTITION, PartitionTransactions
from worker.observability.backlog import CommitAges, WorkRate
from worker.observability.metrics import Metrics
from worker.runtime.resources import fetch_max_bytes
from worker.runtime.waits import finish_or_cancel, unless_set, wait_while
from worker.state.changelog import Restored
from worker.state.documents import DocumentStates
from worker.state.restores import Restores
from worker.wire.records import InputRecord

log = logging.getLogger(__name__)

ProcessFn = Callable[[InputRecord], Awaitable[None]]
# How long one fetch may wait: it bounds how long a stop request waits for the loop to notice.
_FETCH_TIMEOUT_MS = 250
_FETCH_MAX_RECORDS = 500
# A commit that has not returned by then is given up (its offsets go out with the next one):
# aiokafka retries it for as long as the group coordinator is unknown.
_COMMIT_TIMEOUT_S = 10.0


@dataclass
class InFlight:
    # Each partition's documents in flight, with their offsets (an exactly-once commit waits
    # for those up to its cut).
    tasks: dict[TopicPartition, dict[asyncio.Task[None], int]] = field(default_factory=dict)
    documents: int = 0
    bytes: int = 0


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
        self._tracker: OffsetTracker[TopicPartition] = OffsetTracker()
        self._owned: set[TopicPartition] = set()
        self.in_flight = InFlight()
        self._backpressure = Backpressure(
            max_documents=settings.max_in_flight_documents,
            max_bytes=settings.max_in_flight_bytes,
        )
        self.stuck = StuckPartitions()
        self._held = HeldRecords()
        self._client_paused = False  # backpressure's pause of the client, until held is empty
        self._finished = asyncio.Event()  # set whenever a document finishes
        self._last_commit = time.monotonic()
        self.joined = False
        self.fatal: BaseException | None = None
        self._states = states
        # Partitions paused until their state is restored, and the tasks restoring them.
        self.restoring: set[TopicPartition] = set()
        self._restores: Restores[TopicPartition] = Restores(self._restore)
        self._expiring: asyncio.Task[None] | None = None
        self._kafka_up = kafka_up
        self._transactions = transactions
        # The exactly-once commit under way beside the loop (None: none yet).
        self._committing: asyncio.Task[None] | None = None
        # Measurements for the backlog estimate and the per-partition commit age.
        self.work_rate = WorkRate()
        self.commit_ages: CommitAges[TopicPartition] = CommitAges()

    @property
    def held(self) -> HeldRecords:
        return self._held

    @property
    def owned(self) -> set[TopicPartition]:
        return self._owned

    def uncommitted(self, tp: TopicPartition) -> bool:
        """Records of ``tp`` taken and not committed yet (in flight, or finished and waiting
        for the next commit)."""
        return self._tracker.in_flight(tp) > 0 or bool(self._tracker.committable({tp}))

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
                for tp, record in self._held.take(0 if self.paused else room, self._owned):
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
            due = time.monotonic() - self._last_commit >= s.commit_interval_ms / 1000
            if due and self._kafka_up():
                if self._transactions is not None:  # beside the loop, never cut short
                    self._commit_beside()
                    continue
                # A stop request ends the wait: against a broker that just went away the
                # commit waits out its whole timeout, which the grace period cannot spare.
                committed = await unless_set(self.commit(), self._stopping) or {}
                if committed and self._states is not None:
                    self._expiring = asyncio.create_task(self._expire(committed))
                    # Not cancelled by a stop (the shutdown waits for it while Kafka is up),
                    # only no longer waited for here.
                    await unless_set(asyncio.shield(self._expiring), self._stopping)

    def _stop_refused(self, exc: PermissionRefused) -> None:
        log.error("refused by the broker's ACLs; stopping the worker", extra={"reason": str(exc)})
        if self.fatal is None:
            self.fatal = exc
        self._stopping.set()

    def _commit_beside(self) -> None:
        """Start the exactly-once commit as a task of its own, unless one is under way: the
        loop goes on taking records while it runs."""
        if self._committing is not None and not self._committing.done():
            return
        self._last_commit = time.monotonic()
        self._committing = asyncio.create_task(self._commit_and_expire())

    async def _commit_and_expire(self) -> None:
        try:
            committed = await self.commit()
        except Exception as exc:  # a bug: the commit's own failures are handled inside
            log.exception("commit failed unexpectedly; stopping the worker")
            self.fatal = exc
            self._stopping.set()
            return
        if committed and self._states is not None:  # the markers' tombstones: next transaction
            self._expiring = asyncio.create_task(self._expire(committed))

    async def _commit_finished(self) -> None:
        """Wait for the exactly-once commit under way, if any (before a drain lets go)."""
        if self._committing is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._committing)

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
        fetch timeout. A paused fetch waiting out its whole timeout (``fetch_max_wait_ms``)
        left the worker idle at every pause once the in-flight documents had drained, which
        cost a large share of its throughput (bench/e2e_bench.py). A document that finished
        since the pause (while the buffered records were taken) counts: the event is cleared
        at the pause and after each wait, not before it."""
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
        if found is None or found.partition not in self._owned:
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
        self._held.drop(self._owned - {tp})
        for other in self._owned - {tp}:
            next_offset = self._tracker.next_offset(other)
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
            if tp in self._owned and not self._client_paused and tp not in self.restoring:
                self._consumer.resume(tp)
        self._metrics.unreadable_partitions.set(len(self.stuck))

    async def finish(self) -> None:
        """Shutdown: let in-flight documents finish within the drain timeout, commit, and
        checkpoint the state of the partitions let go cleanly."""
        self._restores.cancel_all()
        await self._commit_finished()
        # Kafka gone: nothing in flight can be acknowledged, and a commit or a checkpoint
        # cannot happen; keep the wait short, leave the offsets to be replayed.
        up = self._kafka_up()
        abandoned = await self.drain(self.settings.drain_timeout_s if up else 1.0)
        up = up and self._kafka_up()
        if up and self._transactions is not None:
            abandoned |= await self._end_transactions(set(self._owned), abandoned)
        elif up:
            await self.commit()
            if self._expiring is not None:  # no marker tombstone may land after we let go
                await wait_while({self._expiring}, _COMMIT_TIMEOUT_S, self._kafka_up)
        await self._release(set(self._owned), abandoned if up else set(self._owned))

    def _start(self, tp: TopicPartition, record: ConsumerRecord[bytes, bytes]) -> None:
        self._tracker.add(tp, record.offset)
        size = len(record.value or b"")
        self._metrics.documents_consumed.inc()
        self._metrics.input_bytes.inc(size)
        self.in_flight.documents += 1
        self.in_flight.bytes += size
        self.work_rate.taken(size, time.monotonic())
        if self._transactions is None:
            task = asyncio.create_task(self._process(tp, record, size))
        else:  # its writes go into its partition's transaction (worker.kafka.transactions)
            context = contextvars.copy_context()
            context.run(INPUT_PARTITION.set, tp.partition)
            context.run(INPUT_OFFSET.set, record.offset)
            task = asyncio.create_task(self._process(tp, record, size), context=context)
        tasks = self.in_flight.tasks.setdefault(tp, {})
        tasks[task] = record.offset
        task.add_done_callback(lambda done: tasks.pop(done, None))

    def _apply_backpressure(self) -> Verdict:
        """The verdict, logged and counted; the loop pauses the client (after taking what it
        buffered) and resumes it once the records held are taken."""
        docs, size = self.in_flight.documents, self.in_flight.bytes
        queue_full = self._queue_full()
        verdict = self._backpressure.update(docs, size, queue_full)
        if verdict is Verdict.PAUSE:
            self._metrics.backpressure_pauses.inc()
            self._metrics.paused_partitions.set(len(self._consumer.assignment()))
            log.info(
                "paused",
                extra={"in_flight": docs, "in_flight_bytes": size, "queue_full": queue_full},
            )
        elif verdict is Verdict.RESUME:  # the client itself once nothing is held (run)
            log.info("resumed", extra={"in_flight": docs, "in_flight_bytes": size})
        return verdict

    async def _process(
        self, tp: TopicPartition, record: ConsumerRecord[bytes, bytes], size: int
    ) -> None:
        rec = InputRecord(
            topic=tp.topic,
            partition=tp.partition,
            offset=record.offset,
            key=record.key,
            value=record.value,
            headers=list(record.headers),
            timestamp_ms=record.timestamp,
        )
        done = False
        try:
            await self._process_record(rec)
            done = True
            self._tracker.mark_done(tp, record.offset)
        except asyncio.CancelledError:
            raise
        except PermissionRefused as exc:  # a missing ACL: only a new grant fixes it
            self._stop_refused(exc)
        except Exception as exc:
            # Not the input's fault and not a transient Kafka error: a bug. The offset must
            # not be skipped, and silently stalling the partition is worse than a restart.
            log.exception(
                "unexpected failure; stopping the worker",
                extra={"partition": tp.partition, "offset": record.offset},
            )
            self.fatal = exc
            self._stopping.set()
        finally:
            self.in_flight.documents -= 1
            self.in_flight.bytes -= size
            self.work_rate.finished(size if done else 0, time.monotonic())
            self._finished.set()

    # -- commits, revocation, drain ----------------------------------------------------------

    async def commit(self, partitions: set[TopicPartition] | None = None) -> dict[int, int]:
        """Commit what finished; the offsets committed, by partition number."""
        self._last_commit = time.monotonic()
        if self._transactions is not None:
            return await self._commit_transactions(partitions)
        offsets = self._tracker.committable(partitions)
        if not offsets:
            return {}
        started = time.perf_counter()
        try:
            async with asyncio.timeout(_COMMIT_TIMEOUT_S):
                await self._consumer.commit(
                    {tp: OffsetAndMetadata(o, "") for tp, o in offsets.items()}
                )
        except (KafkaError, TimeoutError) as exc:
            # A commit can fail during a rebalance or an outage; the offsets stay committable
            # and go out with the next commit, or the new owner replays them (at-least-once).
            self._metrics.commit_failures.inc()
            log.warning("commit failed", extra={"error": repr(exc)})
            return {}
        return self._committed(offsets, started)

    def _committed(self, offsets: dict[TopicPartition, int], started: float) -> dict[int, int]:
        self._metrics.commit_seconds.observe(time.perf_counter() - started)
        self._metrics.last_commit.set(time.time())
        self._tracker.committed(offsets)
        now = time.monotonic()
        for tp in offsets:
            self.commit_ages.advanced(tp, now)
        return {tp.partition: offset for tp, offset in offsets.items()}

    async def _commit_transactions(
        self, partitions: set[TopicPartition] | None = None
    ) -> dict[int, int]:
        """The exactly-once commit of ``partitions`` (all owned): close each one's transaction
        to the documents after the highest offset that wrote into it (the cut), wait until the
        documents up to it finished, then commit each transaction with its offset; the later
        documents then write into the next. Not all finished within the drain timeout: no
        commit this time. A failure is fatal."""
        txns = self._transactions
        assert txns is not None
        if self._expiring is not None:  # its marker tombstones belong to these transactions
            with contextlib.suppress(Exception):
                await asyncio.shield(self._expiring)
        opened = txns.partitions
        tps = {
            tp
            for tp in (self._owned if partitions is None else partitions)
            if tp.partition in opened and tp not in self.restoring
        }
        cuts = {tp: txns.close_after(tp.partition) for tp in tps}
        try:
            tasks = {
                task
                for tp in tps
                for task, offset in self.in_flight.tasks.get(tp, {}).items()
                if offset <= cuts[tp]
            }
            if tasks:
                _, pending = await asyncio.wait(tasks, timeout=self.settings.drain_timeout_s)
                if pending:
                    log.warning(
                        "commit put off: documents still in flight", extra={"n": len(pending)}
                    )
                    return {}
            offsets = self._tracker.committable(tps)
            # Every document let into a transaction must be below the offset it commits (one
            # that failed is not done: the worker is stopping then, and nothing commits).
            short = [tp for tp in tps if cuts[tp] >= 0 and offsets.get(tp, -1) <= cuts[tp]]
            if short:
                log.warning("commit put off: a document of the cut did not finish")
                return {}
            started = time.perf_counter()
            failed = await self._commit_each(tps, offsets)
        finally:
            for tp in tps:
                txns.reopen(tp.partition)
        if failed:
            return {}
        return self._committed(offsets, started) if offsets else {}

    async def _commit_each(
        self, tps: set[TopicPartition], offsets: dict[TopicPartition, int]
    ) -> set[TopicPartition]:
        """Commit each partition's transaction (concurrently: a producer each); the partitions
        whose commit failed, aborted (and the worker stopping)."""
        assert self._transactions is not None
        txns = self._transactions
        ordered = sorted(tps, key=lambda tp: tp.partition)
        results = await asyncio.gather(
            *(txns.commit(tp.partition, offsets.get(tp)) for tp in ordered),
            return_exceptions=True,
        )
        failed = set()
        for tp, result in zip(ordered, results, strict=True):
            if isinstance(result, BaseException):
                failed.add(tp)
                self._metrics.commit_failures.inc()
                log.error(
                    "transaction failed; stopping the worker",
                    extra={"partition": tp.partition, "error": repr(result)},
                )
                if self.fatal is None:
                    self.fatal = refused(result) or result
                self._stopping.set()
                await txns.abort(tp.partition)
        return failed

    async def _end_transactions(
        self, partitions: set[TopicPartition], abandoned: set[TopicPartition]
    ) -> set[TopicPartition]:
        """Letting go (revoke, shutdown): abort the transactions of the partitions with an
        abandoned document, commit the others; the partitions not committed."""
        txns = self._transactions
        assert txns is not None
        for tp in abandoned & partitions:
            await txns.abort(tp.partition)
        kept = partitions - abandoned
        await self._commit_transactions(kept)
        # A failed commit aborted its partition (and closed its producer); a partition still
        # restoring never opened one: neither's local state may be checkpointed.
        return (abandoned & partitions) | {tp for tp in kept if tp.partition not in txns.partitions}

    async def _expire(self, committed: dict[int, int]) -> None:
        assert self._states is not None
        owned = {tp.partition for tp in self._owned if tp not in self.restoring}
        await self._states.expire_markers(
            {p: offset for p, offset in committed.items() if p in owned}
        )

    async def drain(
        self, deadline_s: float, partitions: set[TopicPartition] | None = None
    ) -> set[TopicPartition]:
        """Wait for the in-flight documents (of ``partitions``) up to the deadline, cancel the
        rest; the partitions that had documents cancelled."""
        tasks = {
            task: tp
            for tp, group in self.in_flight.tasks.items()
            if partitions is None or tp in partitions
            for task in group
        }
        # Kafka going away ends the wait: nothing in flight can be acknowledged then.
        return await finish_or_cancel(tasks, deadline_s, self._kafka_up)

    async def on_revoked(self, revoked: set[TopicPartition]) -> None:
        self._owned -= revoked
        self._held.drop(revoked)
        self._restores.revoke(revoked)
        await self._commit_finished()
        # Bounded by the rebalance timeout: the group waits for us, so leave headroom.
        budget = max(1.0, self.settings.rebalance_timeout_ms / 1000 - 5.0)
        abandoned = await self.drain(min(budget, self.settings.drain_timeout_s), revoked)
        if self._transactions is not None:
            abandoned |= await self._end_transactions(revoked, abandoned)
        else:
            await self.commit(revoked)
        if self._expiring is not None:  # no marker tombstone may land after we let go
            with contextlib.suppress(Exception):
                await asyncio.shield(self._expiring)
        await self._release(revoked, abandoned)
        if self._transactions is not None:  # the next owner's start fences these ids anyway
            await self._transactions.close(tp.partition for tp in revoked)
        self._tracker.forget(revoked)
        self.stuck.forget(revoked)
        m = self._metrics
        for tp in revoked:
            self.in_flight.tasks.pop(tp, None)
            self.commit_ages.forget(tp)
            for family in (m.consumer_lag, m.partition_commit_age, m.backlog_seconds):
                with contextlib.suppress(KeyError):  # no sample was taken for it
                    family.remove(str(tp.partition))

    def on_assigned(self, assigned: set[TopicPartition]) -> None:
        self._metrics.rebalances.inc()
        self.joined = True
        self._owned |= assigned
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
            self.restoring |= assigned
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
            self.fatal = exc
            self._stopping.set()
            return
        for tp in tps:  # states.restore logged them and observed their times
            self.restoring.discard(tp)
            if tp in self._owned and not self._client_paused and tp not in self.stuck:
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

    async def _release(
        self, partitions: set[TopicPartition], abandoned: set[TopicPartition]
    ) -> None:
        """Let go of partitions' state: checkpoint those handed over cleanly."""
        if self._states is None or not partitions:
            return
        clean = {
            tp.partition for tp in partitions if tp not in abandoned and tp not in self.restoring
        }
        self.restoring -= partitions
        self._metrics.restoring_partitions.set(len(self.restoring))
        try:
            await self._states.release({tp.partition for tp in partitions}, clean, self._kafka_up)
        except KafkaError as exc:  # no checkpoint: the next owner restores from the start
            log.warning("state checkpoint failed", extra={"error": repr(exc)})


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, loop: ConsumeLoop) -> None:
        self._loop = loop

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._loop.on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._loop.on_assigned(set(assigned))
