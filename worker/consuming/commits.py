"""The commit path: which input offsets finished, when they are committed, and how partitions are
let go: handed over cleanly when revoked, dropped when lost.

Invariants:

- An offset is committed only as part of the contiguous prefix of finished offsets of its
  partition (:class:`~worker.consuming.offsets.OffsetTracker`): a commit never passes an
  unfinished document (at least once).
- At-least-once: the loop awaits each commit. Exactly-once (``transactions``:
  worker.kafka.transactions): a commit is a cut through offsets, run beside the loop, one at a
  time: each partition's transaction is closed to the documents after the highest offset that
  has written into it, those up to it finish, and the transaction commits with its offset;
  meanwhile the loop keeps taking records and later documents keep chunking, only their writes
  wait for the next transaction. A failed transaction (a write refused, its commit failed, as
  during a broker outage) is aborted, and its partition restarts from its last committed
  transaction once the member can vouch for its membership (Kafka Streams revives a corrupted
  task the same way); if the member was lost meanwhile, the revocation drops the partition
  instead. A refusal by the ACLs stops the worker.
- While Kafka is unreachable nothing is committed (a commit would wait for the group
  coordinator); the offsets stay committable. Every commit is bounded.
- Delete markers expire after the commits that pass them, only for partitions still owned.
- Partitions are *revoked* (a clean hand-over: the member is still in its generation) or *lost*
  (its session expired, its generation is gone: worker.kafka.membership). Revoked: drain their
  documents within a deadline (cancel the rest: replayed), commit (exactly-once: commit each
  partition's transaction, abort those with an abandoned document), wait for the markers'
  tombstones, then let go of their state, checkpointing those let go cleanly. Lost, or found lost
  after the drain: their new owners may have written already, so nothing more of this member's
  may land or commit: the documents are cancelled at once, the writes not yet sent are discarded
  (at-least-once; the member's sends were held since it could no longer vouch for itself) or the
  transactions aborted (exactly-once: fenced anyway), nothing is committed, and nothing is
  checkpointed (worker.state.documents: a checkpoint only ever names what the store applied).
- Shutdown is a hand-over of everything owned.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError
from aiokafka.structs import OffsetAndMetadata

from worker.config import Settings
from worker.consuming.client import ConsumerClient
from worker.consuming.offsets import OffsetTracker
from worker.kafka.membership import Membership
from worker.kafka.permissions import refused
from worker.kafka.transactions import PartitionTransactions
from worker.observability.backlog import CommitAges
from worker.observability.metrics import Metrics
from worker.runtime.waits import finish_or_cancel, unless_set, wait_while
from worker.state.documents import DocumentStates

log = logging.getLogger(__name__)

# A commit that has not returned by then is given up (its offsets go out with the next one):
# aiokafka retries it for as long as the group coordinator is unknown.
COMMIT_TIMEOUT_S = 10.0

# What a member whose partitions were lost does with the writes it has not sent yet.
DiscardWrites = Callable[[BaseException], None]


class PartitionsLost(KafkaError):  # type: ignore[misc]
    """Why a lost partition's unsent writes failed (they never reach Kafka)."""


@dataclass
class InFlight:
    """Each partition's documents in flight, with their offsets (an exactly-once commit waits
    for those up to its cut), and the window's totals."""

    tasks: dict[TopicPartition, dict[asyncio.Task[bool], int]] = field(default_factory=dict)
    documents: int = 0
    bytes: int = 0


@dataclass
class Assignment:
    """The partitions this member owns, and those of them still restoring their state (paused
    until it is back). Shared by the loop (which assigns) and the commits (which let go)."""

    owned: set[TopicPartition] = field(default_factory=set)
    restoring: set[TopicPartition] = field(default_factory=set)


@dataclass
class Failure:
    """The first error that stops the worker, and the event that stops it."""

    stopping: asyncio.Event
    fatal: BaseException | None = None

    def stop(self, exc: BaseException) -> None:
        if self.fatal is None:
            self.fatal = exc
        self.stopping.set()


class Commits:
    """Commits what finished and lets partitions go (see the module's invariants)."""

    def __init__(
        self,
        consumer: ConsumerClient,
        settings: Settings,
        *,
        metrics: Metrics,
        in_flight: InFlight,
        assignment: Assignment,
        failure: Failure,
        states: DocumentStates | None,
        transactions: PartitionTransactions | None,
        membership: Membership | None,
        discard_writes: DiscardWrites | None,
        kafka_up: Callable[[], bool],
    ) -> None:
        self._consumer = consumer
        self.settings = settings
        self._metrics = metrics
        self._in_flight = in_flight
        self._assignment = assignment
        self._failure = failure
        self._states = states
        self._transactions = transactions
        self._membership = membership
        self._discard_writes = discard_writes
        self._kafka_up = kafka_up
        self.tracker: OffsetTracker[TopicPartition] = OffsetTracker()
        self.ages: CommitAges[TopicPartition] = CommitAges()
        self._last_commit = time.monotonic()
        self._expiring: asyncio.Task[None] | None = None
        # The exactly-once commit under way beside the loop (None: none yet).
        self._committing: asyncio.Task[None] | None = None
        # Exactly-once: partitions whose transaction failed, to restart from their last
        # committed transaction (ConsumeLoop revives them).
        self.broken: set[TopicPartition] = set()

    # -- while consuming ---------------------------------------------------------------------

    def due(self) -> bool:
        interval = self.settings.commit_interval_ms / 1000
        return time.monotonic() - self._last_commit >= interval and self._kafka_up()

    async def commit_due(self, stopping: asyncio.Event) -> None:
        """The loop's periodic commit: exactly-once's starts beside the loop; at-least-once's
        is awaited, unless a stop request comes first (against a broker that just went away a
        commit waits out its whole timeout, which the grace period cannot spare)."""
        if self._transactions is not None:
            self._commit_beside()
            return
        committed = await unless_set(self.commit(), stopping) or {}
        if committed and self._states is not None:
            expiring = self._expiring = asyncio.create_task(self._expire(committed))
            # Not cancelled by a stop (the shutdown waits for it while Kafka is up), only no
            # longer waited for here; cancelled only by a drop of lost partitions, which is
            # no reason for the loop to end.
            with contextlib.suppress(asyncio.CancelledError):
                await unless_set(asyncio.shield(expiring), stopping)
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise asyncio.CancelledError

    def uncommitted(self, tp: TopicPartition) -> bool:
        return self.tracker.in_flight(tp) > 0 or bool(self.tracker.committable({tp}))

    def _commit_beside(self) -> None:
        if self._committing is not None and not self._committing.done():
            return
        self._last_commit = time.monotonic()
        self._committing = asyncio.create_task(self._commit_and_expire())

    async def _commit_and_expire(self) -> None:
        try:
            committed = await self.commit()
        except Exception as exc:  # a bug: the commit's own failures are handled inside
            log.exception("commit failed unexpectedly; stopping the worker")
            self._failure.stop(exc)
            return
        if committed and self._states is not None:  # the markers' tombstones: next transaction
            self._expiring = asyncio.create_task(self._expire(committed))

    async def _commit_finished(self) -> None:
        """Wait for the exactly-once commit under way, if any (before a drain lets go)."""
        await _ended(self._committing)

    async def commit(self, partitions: set[TopicPartition] | None = None) -> dict[int, int]:
        """Commit what finished; the offsets committed, by partition number."""
        self._last_commit = time.monotonic()
        if self._transactions is not None:
            return await self._commit_transactions(partitions)
        offsets = self.tracker.committable(partitions)
        if not offsets:
            return {}
        started = time.perf_counter()
        # On the membership's clock: a proof is compared with its other proofs.
        sent_at = time.monotonic() if self._membership is None else self._membership.now()
        try:
            async with asyncio.timeout(COMMIT_TIMEOUT_S):
                await self._consumer.commit(
                    {tp: OffsetAndMetadata(o, "") for tp, o in offsets.items()}
                )
        except (KafkaError, TimeoutError) as exc:
            # A commit can fail during a rebalance or an outage; the offsets stay committable
            # and go out with the next commit, or the new owner replays them (at-least-once).
            self._metrics.commit_failures.inc()
            if isinstance(exc, CommitFailedError):  # the client reset its generation
                log.warning(
                    "commit refused: this member's generation is over, its partitions go to "
                    "others (their documents are replayed there)",
                    extra={"error": repr(exc)},
                )
            else:
                log.warning("commit failed", extra={"error": repr(exc)})
            return {}
        if self._membership is not None:
            self._membership.committed(sent_at)
        return self._committed(offsets, started)

    def _committed(self, offsets: dict[TopicPartition, int], started: float) -> dict[int, int]:
        self._metrics.commit_seconds.observe(time.perf_counter() - started)
        self._metrics.last_commit.set(time.time())
        self.tracker.committed(offsets)
        now = time.monotonic()
        for tp in offsets:
            self.ages.advanced(tp, now)
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
        await _ended(self._expiring)  # its marker tombstones belong to these transactions
        opened = txns.partitions
        a = self._assignment
        tps = {
            tp
            for tp in (a.owned if partitions is None else partitions)
            if tp.partition in opened and tp not in a.restoring
        }
        cuts = {tp: txns.close_after(tp.partition) for tp in tps}
        try:
            tasks = {
                task
                for tp in tps
                for task, offset in self._in_flight.tasks.get(tp, {}).items()
                if offset <= cuts[tp]
            }
            if tasks:
                _, pending = await asyncio.wait(tasks, timeout=self.settings.drain_timeout_s)
                if pending:
                    log.warning(
                        "commit put off: documents still in flight", extra={"n": len(pending)}
                    )
                    return {}
            offsets = self.tracker.committable(tps)
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
                denied = refused(result)
                if denied is None:
                    # Before the abort, which takes the transaction away at once and then
                    # waits: the partition's documents that find it gone meanwhile must know
                    # why (ConsumeLoop._transaction_gone).
                    self.broken_partition(tp, result)
                await txns.abort(tp.partition)
                if denied is not None:  # only a new grant fixes it
                    log.error(
                        "transaction refused; stopping the worker",
                        extra={"partition": tp.partition, "error": repr(result)},
                    )
                    self._failure.stop(denied)
        return failed

    def broken_partition(self, tp: TopicPartition, error: BaseException) -> None:
        """Exactly-once: ``tp``'s transaction failed and was (or will be) aborted. Its partition
        restarts from its last committed transaction (the loop revives it) once this member
        can vouch for its membership again; if it was lost meanwhile (fenced by its new owner),
        the revocation drops it instead."""
        if tp not in self.broken:
            log.warning(
                "transaction failed: the partition restarts from its last committed transaction",
                extra={"partition": tp.partition, "error": repr(error), "lost": self.lost()},
            )
        self.broken.add(tp)

    async def _expire(self, committed: dict[int, int]) -> None:
        assert self._states is not None
        a = self._assignment
        owned = {tp.partition for tp in a.owned if tp not in a.restoring}
        await self._states.expire_markers(
            {p: offset for p, offset in committed.items() if p in owned}
        )

    # -- letting go --------------------------------------------------------------------------

    def lost(self) -> bool:
        """Whether this member can no longer vouch for its membership: the partitions it held
        may have new owners (worker.kafka.membership)."""
        return self._membership is not None and not self._membership.vouched()

    async def revoked(self, revoked: set[TopicPartition]) -> None:
        """The group took ``revoked`` away: a hand-over, or a drop if they were lost."""
        if self.lost():
            await self.drop(revoked)
            return
        await self._commit_finished()
        # Bounded by the rebalance timeout: the group waits for us, so leave headroom.
        budget = max(1.0, self.settings.rebalance_timeout_ms / 1000 - 5.0)
        abandoned = await self.drain(min(budget, self.settings.drain_timeout_s), revoked)
        if self.lost():  # the session ran out while the documents drained
            await self.drop(revoked)
            return
        await self._let_go(revoked, abandoned)

    async def finish(self) -> None:
        """Shutdown: everything owned is handed over (the worker leaves the group next)."""
        await self._commit_finished()
        owned = set(self._assignment.owned)
        # Kafka gone: nothing in flight can be acknowledged, and a commit or a checkpoint
        # cannot happen; keep the wait short, leave the offsets to be replayed.
        up = self._kafka_up()
        abandoned = await self.drain(self.settings.drain_timeout_s if up else 1.0)
        if self.lost():
            await self.drop(owned)
            return
        up = up and self._kafka_up()
        if not up:
            await self._release(owned, owned)
            return
        await self._let_go(owned, abandoned)

    async def _let_go(
        self, partitions: set[TopicPartition], abandoned: set[TopicPartition]
    ) -> None:
        """Commit what finished (exactly-once: each partition's transaction, aborting those with
        an abandoned document), wait for the markers' tombstones, release the state."""
        if self._transactions is not None:
            abandoned |= await self._end_transactions(partitions, abandoned)
        else:
            await self.commit(partitions)
        if self._expiring is not None:  # no marker tombstone may land after we let go
            await wait_while({self._expiring}, COMMIT_TIMEOUT_S, self._kafka_up)
        await self._release(partitions, abandoned)
        if self._transactions is not None:  # the next owner's start fences these ids anyway
            await self._transactions.close(tp.partition for tp in partitions)

    async def drop(self, lost: set[TopicPartition]) -> None:
        """The partitions were lost: cancel their documents, discard or abort their writes,
        commit nothing, checkpoint nothing."""
        if not lost:
            return
        log.warning(
            "partitions lost",
            extra={
                "partitions": sorted(f"{tp.topic}:{tp.partition}" for tp in lost),
                "why": "this member's session expired or its generation ended: their documents "
                "are abandoned, nothing of theirs is committed, and their state is restored "
                "from the changelog when they come back",
            },
        )
        self._metrics.partitions_lost.inc(len(lost))
        tasks: dict[asyncio.Task[Any], TopicPartition] = {
            task: tp for tp in lost for task in self._in_flight.tasks.get(tp, {})
        }
        # An exactly-once commit under way cannot succeed any more (the producers are fenced,
        # and closed below): left waiting on a closed producer, it would hold every later
        # commit back for good.
        committing = self._committing
        if committing is not None and not committing.done():
            committing.cancel()
            tasks[committing] = next(iter(lost))
        for task in tasks:
            task.cancel()
        # Before anything can run again: nothing staged by those documents may be sent later.
        if self._discard_writes is not None and self._transactions is None:
            self._discard_writes(PartitionsLost("partitions lost: not sent"))
        if tasks:
            await asyncio.wait(tasks)
        await self._expiry_ended()
        if self._transactions is not None:
            for tp in lost:
                await self._transactions.abort(tp.partition)
            await self._transactions.close(tp.partition for tp in lost)
        await self._release(lost, lost, settle=False)

    async def _expiry_ended(self) -> None:
        """Let a marker expiry under way end: its tombstones go through writes that were just
        discarded (at-least-once) or fenced (exactly-once), so it gives up by itself; bounded
        all the same."""
        expiring, self._expiring = self._expiring, None
        if expiring is None or expiring.done():
            return
        _, pending = await asyncio.wait({expiring}, timeout=COMMIT_TIMEOUT_S)
        if pending:
            expiring.cancel()
            await asyncio.wait(pending)

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

    async def drain(
        self, deadline_s: float, partitions: set[TopicPartition] | None = None
    ) -> set[TopicPartition]:
        """Wait for the in-flight documents (of ``partitions``) up to the deadline, cancel the
        rest; the partitions that had documents cancelled."""
        tasks = {
            task: tp
            for tp, group in self._in_flight.tasks.items()
            if partitions is None or tp in partitions
            for task in group
        }
        # Kafka going away ends the wait: nothing in flight can be acknowledged then.
        return await finish_or_cancel(tasks, deadline_s, self._kafka_up)

    async def _release(
        self,
        partitions: set[TopicPartition],
        abandoned: set[TopicPartition],
        *,
        settle: bool = True,
    ) -> None:
        """Let go of partitions' state: checkpoint those handed over cleanly."""
        a = self._assignment
        clean = {tp.partition for tp in partitions if tp not in abandoned and tp not in a.restoring}
        a.restoring -= partitions
        self._metrics.restoring_partitions.set(len(a.restoring))
        if self._states is None or not partitions:
            return
        numbers = {tp.partition for tp in partitions}
        try:
            await self._states.release(numbers, clean, self._kafka_up if settle else None)
        except KafkaError as exc:  # no checkpoint: the next owner restores from the start
            log.warning("state checkpoint failed", extra={"error": repr(exc)})

    def forget(self, partitions: set[TopicPartition]) -> None:
        self.tracker.forget(partitions)
        self.broken -= partitions
        for tp in partitions:
            self.ages.forget(tp)

    async def restart(self, partitions: set[TopicPartition]) -> None:
        """Exactly-once: put broken partitions back as they were at their last committed
        transaction (the loop then restores them as on an assignment): cancel their documents,
        abort what is left of their transactions, forget their offsets and their local state
        (it may hold states of the aborted transaction), checkpoint nothing."""
        tasks = [t for tp in partitions for t in self._in_flight.tasks.get(tp, {})]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        if self._transactions is not None:
            for tp in partitions:
                await self._transactions.abort(tp.partition)
        if self._states is not None:
            numbers = {tp.partition for tp in partitions}
            await self._states.release(numbers, set(), None)
        self.forget(partitions)


async def _ended(task: asyncio.Task[None] | None) -> None:
    """Until ``task`` (if any) has ended, however it ends: failed or cancelled (a drop of lost
    partitions cancels the commit under way) is not this caller's concern. Waiting never
    cancels it, and this caller's own cancellation still comes through."""
    if task is not None and not task.done():
        await asyncio.wait({task})
    if task is not None and not task.cancelled():
        task.exception()  # retrieved: its failure was handled (logged) where it happened
