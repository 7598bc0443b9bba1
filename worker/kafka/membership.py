"""This member's standing in its consumer group, as far as the member itself can know it, and the
fence it puts on its own writes under at-least-once.

Why: a member paused past its session timeout (a SIGSTOP, a long GC or VM freeze, a network
partition from the group coordinator) has been expelled by the coordinator, and its partitions
belong to other members, who may already have written newer versions of its documents. Whatever
it writes after that lands behind their records: a stale chunk or state that every sink keeps.
Exactly-once has Kafka's own fence (the transactional id's epoch: worker.kafka.transactions);
at-least-once has none, so the member fences itself: it sends nothing while it cannot vouch that
it is still a member.

Invariants:

- The standing is *vouched for* until ``session_timeout_ms`` after the send of the last request
  that proved membership: a heartbeat answered (also with REBALANCE_IN_PROGRESS: the member is
  in the group until the rebalance ends), a join completed (an assignment), an offset commit
  accepted. The coordinator started its session timer when it received that request, after it
  was sent, so it cannot have expired the session earlier. A process frozen past that point is
  not vouched for the moment it runs again, whichever of its tasks runs first.
- A standing that lapsed stays lapsed until the next join: a proof sent more than
  ``session_timeout_ms`` after the one before it comes after a gap in which the coordinator
  may have expired the member and given its partitions to others, even if the coordinator now
  answers (a coordinator that restarted or moved can answer a member it had expelled, or one
  whose session it never saw expire). Writes stay held, the client is asked to rejoin, and the
  revocation that starts the rejoin finds the member not vouched for: its partitions are lost
  (the fault campaign found a member, paused past its session as the broker was killed, whose
  first heartbeat after the restart was answered, and whose held writes then landed behind the
  new owner's).
- The member is *gone* once the client reset its generation (unknown member id, illegal
  generation, a commit refused for either, leaving the group after ``max.poll.interval.ms``)
  and until it joins again: partitions revoked then were *lost*, not handed over
  (worker.consuming.commits).
- :func:`hold_sends` keeps a producer's queued batches in its queue while the standing is not
  vouched for or the member is gone (checked each time the client's sender takes batches, the
  last step before the network); they leave once a heartbeat vouches again, or are discarded
  with the partitions if the member turns out to be gone.
- aiokafka exposes none of this publicly: the coordinator's generation and heartbeat and the
  producer's queue are read and wrapped here, guarded, and nowhere else
  (tests/kafka/test_membership.py holds those names to the installed aiokafka).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

# aiokafka's "no generation" and "no member id" (OffsetCommitRequest.DEFAULT_GENERATION_ID,
# JoinGroupRequest.UNKNOWN_MEMBER_ID): what the coordinator object holds before a join and after
# a reset.
_NO_GENERATION = -1
_NO_MEMBER = ""
# While sends are held, how often the client's sender looks again.
_RECHECK_S = 0.05


class Standing:
    """What the member can vouch for, with time passed in (pure)."""

    def __init__(self, session_timeout_s: float) -> None:
        self.session_timeout_s = session_timeout_s
        self._proven_at: float | None = None  # send time of the last request that proved it
        self.lapsed = False  # a gap of a session or more between proofs, since the last join

    def proven(self, sent_at: float) -> None:
        if self._proven_at is not None and sent_at - self._proven_at >= self.session_timeout_s:
            self.lapsed = True
        self._advance(sent_at)

    def joined(self, at: float) -> None:
        """A join and sync completed at ``at``: a fresh assignment, whatever came before."""
        self.lapsed = False
        self._advance(at)

    def _advance(self, at: float) -> None:
        if self._proven_at is None or at > self._proven_at:
            self._proven_at = at

    def vouched(self, now: float) -> bool:
        return (
            not self.lapsed
            and self._proven_at is not None
            and now - self._proven_at < self.session_timeout_s
        )


class Membership:
    """The member's standing, proven by the client's heartbeats and the loop's joins and
    commits; ``gone`` read from the client's generation."""

    def __init__(
        self, session_timeout_ms: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.standing = Standing(session_timeout_ms / 1000)
        self._clock = clock
        self._coordinator: Any = None
        # After the worker let go of everything at shutdown nothing is fenced any more: the
        # producer flushes what it holds (worker.app).
        self._released = False

    def attach(self, consumer: Any) -> None:
        """Follow ``consumer``'s group coordinator (after ``start``): each answered heartbeat
        proves membership from the moment it was sent."""
        coordinator = getattr(consumer, "_coordinator", None)
        heartbeat = getattr(coordinator, "_do_heartbeat", None)
        if coordinator is None or heartbeat is None or not hasattr(coordinator, "request_rejoin"):
            raise RuntimeError("aiokafka's group coordinator is not where it was: see membership")
        self._coordinator = coordinator

        async def proving_heartbeat() -> bool:
            sent_at = self._clock()
            answered: bool = await heartbeat()
            if answered:
                self.proven(sent_at)
            return answered

        coordinator._do_heartbeat = proving_heartbeat

    def now(self) -> float:
        """The clock proofs are timed by (a request's send time is read from it)."""
        return self._clock()

    def joined(self) -> None:
        """An assignment arrived: the join and sync just completed."""
        self.standing.joined(self._clock())

    def committed(self, sent_at: float) -> None:
        """An offset commit sent at ``sent_at`` was accepted (it carries the generation)."""
        self.proven(sent_at)

    def proven(self, sent_at: float) -> None:
        lapsed_before = self.standing.lapsed
        self.standing.proven(sent_at)
        if self.standing.lapsed and not lapsed_before:
            log.warning(
                "membership lapsed: no proof of it for a session timeout or more; writes are "
                "held and the group is rejoined, and this member's partitions are lost"
            )
            # Once: the join that follows (its revocation first) ends the lapse.
            if self._coordinator is not None:
                self._coordinator.request_rejoin()

    @property
    def gone(self) -> bool:
        """The client reset its generation: whatever was assigned was lost."""
        c = self._coordinator
        return c is not None and (c.generation == _NO_GENERATION or c.member_id == _NO_MEMBER)

    def vouched(self) -> bool:
        return not self.gone and self.standing.vouched(self._clock())

    def may_send(self) -> bool:
        return self._released or self.vouched()

    def release(self) -> None:
        """Everything was let go (shutdown): sends are no longer held."""
        self._released = True


def hold_sends(producer: Any, may_send: Callable[[], bool]) -> None:
    """Keep ``producer``'s queued batches in its queue while ``may_send()`` is false.

    The client's sender takes batches with its queue's ``drain_by_nodes``; held, every
    partition is passed as muted, so nothing is taken and the queue's wake-up is re-armed as
    usual, and the sender is woken again shortly to look once more."""
    queue = getattr(producer, "_message_accumulator", None)
    drain = getattr(queue, "drain_by_nodes", None)
    if queue is None or drain is None:
        raise RuntimeError("aiokafka's producer queue is not where it was: see membership")
    loop = asyncio.get_running_loop()

    def drain_if_allowed(ignore_nodes: Any, muted_partitions: Any = frozenset()) -> Any:
        if may_send():
            return drain(ignore_nodes, muted_partitions)
        taken = drain(ignore_nodes, frozenset(muted_partitions) | frozenset(queue._batches))
        loop.call_later(_RECHECK_S, queue._wakeup, queue._waiter_future)
        return taken

    queue.drain_by_nodes = drain_if_allowed


def discard_queued(producer: Any, error: BaseException) -> None:
    """Fail every batch in ``producer``'s queue with ``error`` (the member's partitions were
    lost: none of it may land now), and every batch that comes back to the queue afterwards.

    Why afterwards too: a batch on the wire at the discard, refused because the broker went
    away, is queued again for its retry; sent once the member has rejoined, it would land
    behind what the partitions' new owner wrote meanwhile. So a discarded producer sends
    nothing more, and its owner replaces it (worker.kafka.producers.RenewingProducer.discard);
    a retried batch's idempotence sequence numbers would leave its partition a gap anyway."""
    queue: Any = getattr(producer, "_message_accumulator", None)
    drain = getattr(queue, "drain_by_nodes", None)
    if drain is None or not hasattr(queue, "_batches") or not hasattr(queue, "_pending_batches"):
        raise RuntimeError("aiokafka's producer queue is not where it was: see membership")
    _fail_queued(queue, error)

    def drain_nothing(ignore_nodes: Any, muted_partitions: Any = frozenset()) -> Any:
        _fail_queued(queue, error)
        return drain(ignore_nodes, muted_partitions)  # nothing to take; re-arms its wake-up

    queue.drain_by_nodes = drain_nothing


def _fail_queued(queue: Any, error: BaseException) -> None:
    for waiting in list(queue._batches.values()):
        for batch in waiting:
            if batch.retry_count:
                # Taken once before: that first take registered a callback that removes it
                # from the client's in-flight set when it settles, and a batch queued again
                # is out of that set, so the callback would raise (asyncio logs an error).
                queue._pending_batches.add(batch)
            batch.failure(error)
            # Nobody may wait for them any more: retrieved here, or asyncio reports them.
            for future in (batch.future, batch._drain_waiter, *(f for f, _ in batch._msg_futures)):
                if future.done() and not future.cancelled():
                    future.exception()
    queue._batches.clear()
