"""A document's write as one unit of work: its chunk events and tombstones, its record on the
documents topic, its state, one wait for every acknowledgement, then the local store.

The handler (worker.handling.handler) decides what a record changes (worker.state.decisions) and
hands the outcome over as a :class:`Write`; how it reaches Kafka is this module's. With the
lifecycle on that is :class:`StateWrites`; with ``CHUNKSTREAM_DOCUMENT_LIFECYCLE=false`` it is
:class:`AppendOnly`, the null object: it remembers nothing and writes only what was decided.

Invariants:

- A write's records are staged in one step and awaited with one wait, its state record beside
  its chunk events (worker.state.decisions makes a crash in between safe); the local store takes
  the state only once all of it is acknowledged.
- A split state (worker.wire.state_record) goes out parts first; its head is staged only once
  the parts and everything else of the write are acknowledged (a second wait, for such documents
  only). So a head in the log always has its parts before it, whatever the broker refused, and
  a crash anywhere leaves either the new head with all its parts or the previous head, whose
  parts no write removed. The tombstones of the parts no state names any more go out after the
  head that replaced them, never before.
- A batch refused as too large (a topic's own max.message.bytes below ours) withdraws the
  document before its dead letter (worker.state.decisions.withdraw), then raises
  :class:`Withdrawn`; the withdrawal's records are small, and a refusal of them is retried like
  any Kafka error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from worker.config import Settings
from worker.errors import OutputRecordTooLarge
from worker.kafka.publisher import TOO_LARGE, Publisher, too_large
from worker.observability.metrics import Metrics
from worker.state import decisions
from worker.state.documents import DocumentStates
from worker.wire.codec import Headers
from worker.wire.events import DocumentChunksEvent
from worker.wire.state_record import DocumentState, part_bytes, split_state


class Withdrawn(OutputRecordTooLarge):
    """A refused write after which the document was withdrawn already (worker.state.decisions
    .withdraw): its dead letter follows, nothing more."""


@dataclass(frozen=True)
class Write:
    """What one record changes downstream, as decided (worker.state.decisions)."""

    partition: int  # the input record's
    doc_id: str
    state: DocumentState  # what to remember once everything is acknowledged
    previous: DocumentState | None  # what was remembered before
    headers: Headers = ()  # trace context and forwarded headers, on every output record
    keys: Sequence[bytes] = ()  # the chunk events' keys (their chunk ids), in index order
    values: Sequence[bytes] = ()  # the encoded chunk events
    retract: Sequence[str] = ()  # chunk ids to tombstone, after the events
    # The document's record on the documents topic, if there is one: its chunk ids, or None
    # for its tombstone.
    listing: DocumentChunksEvent | None = None


class Writes(Protocol):
    """Reads of what the worker remembers, and the write of a record's outcome."""

    @property
    def remembers(self) -> bool:
        """Whether states are kept (the lifecycle is on): a document's records then run one
        at a time and a keyed record's id must be its key."""

    def get(self, partition: int, doc_id: str) -> DocumentState | None: ...

    def unconfirmed(self, partition: int, doc_id: str, state: DocumentState | None) -> bool:
        """Whether ``state`` may be unfinished (worker.state.unconfirmed)."""

    async def write(self, write: Write) -> int:
        """Publish everything ``write`` describes and remember its state once all of it is
        acknowledged; the bytes of chunk events published."""

    async def retract(self, doc_id: str, ids: Sequence[str], headers: Headers) -> None:
        """Tombstone ``ids`` again and wait (worker.state.decisions.retracted_again)."""

    async def withdraw_unfinished(
        self, partition: int, doc_id: str, offset: int, headers: Headers
    ) -> None:
        """Before the dead letter of a record whose document's state may be unfinished."""


def open_writes(
    settings: Settings, publisher: Publisher, states: DocumentStates | None, metrics: Metrics
) -> Writes:
    """The lifecycle's writes over ``states``, or the append-only null object without."""
    if states is None:
        return AppendOnly(publisher, settings.documents_topic)
    return StateWrites(states, publisher, metrics)


async def _stage_output(
    publisher: Publisher, documents_topic: str | None, write: Write
) -> tuple[list[asyncio.Future[None]], int]:
    """The write's chunk events, tombstones and record on the documents topic (keyed by the
    document id, if there is one), staged: the acknowledgements, and the events' bytes."""
    acks, published = await publisher.stage_encoded(
        write.doc_id, write.keys, write.values, write.headers, write.retract
    )
    if documents_topic is not None:
        acks += await publisher.stage_keyed(documents_topic, write.doc_id.encode(), write.listing)
    return acks, published


async def _retract(publisher: Publisher, doc_id: str, ids: Sequence[str], headers: Headers) -> None:
    acks, _ = await publisher.stage_encoded(doc_id, [], [], headers, ids)
    await publisher.wait(acks)


class AppendOnly:
    """No lifecycle: nothing is remembered, so nothing is ever retracted or withdrawn."""

    remembers = False

    def __init__(self, publisher: Publisher, documents_topic: str | None) -> None:
        self._publisher = publisher
        self._documents_topic = documents_topic

    def get(self, partition: int, doc_id: str) -> DocumentState | None:
        return None

    def unconfirmed(self, partition: int, doc_id: str, state: DocumentState | None) -> bool:
        return False

    async def write(self, write: Write) -> int:
        acks, published = await _stage_output(self._publisher, self._documents_topic, write)
        try:
            await self._publisher.wait(acks)
        except TOO_LARGE as exc:
            raise too_large(exc) from None
        return published

    async def retract(self, doc_id: str, ids: Sequence[str], headers: Headers) -> None:
        await _retract(self._publisher, doc_id, ids, headers)

    async def withdraw_unfinished(
        self, partition: int, doc_id: str, offset: int, headers: Headers
    ) -> None:
        return None


class StateWrites:
    """The lifecycle's writes: states in the changelog and the local store
    (worker.state.documents)."""

    remembers = True

    def __init__(self, states: DocumentStates, publisher: Publisher, metrics: Metrics) -> None:
        self.states = states
        self._publisher = publisher
        self._metrics = metrics
        self._part_bytes = part_bytes(publisher.max_value_bytes)

    def get(self, partition: int, doc_id: str) -> DocumentState | None:
        return self.states.get(partition, doc_id)

    def unconfirmed(self, partition: int, doc_id: str, state: DocumentState | None) -> bool:
        return self.states.unconfirmed(partition, doc_id, state)

    async def write(self, write: Write) -> int:
        acks, published = await _stage_output(self._publisher, self.states.documents_topic, write)
        try:
            await self._settle(write, acks)
        except TOO_LARGE as exc:
            # Whatever of it landed is withdrawn first, or the sink would keep a mix of two
            # versions for good.
            await self._withdraw(
                write.partition, write.doc_id, write.state, write.previous, write.headers
            )
            raise Withdrawn(str(too_large(exc))) from None
        return published

    async def retract(self, doc_id: str, ids: Sequence[str], headers: Headers) -> None:
        await _retract(self._publisher, doc_id, ids, headers)

    async def withdraw_unfinished(
        self, partition: int, doc_id: str, offset: int, headers: Headers
    ) -> None:
        """Withdraw the document when its state names this record (it is being done again
        after a crash) or is an unconfirmed one the record follows (worker.state.unconfirmed):
        some of the state's chunk events may be in the sink, and its ``retracted`` are the only
        record of the tombstones it was to send, which no later record would send
        (worker.state.decisions)."""
        state = self.states.get(partition, doc_id)
        if state is None or offset < state.offset:
            return
        if offset == state.offset or self.states.unconfirmed(partition, doc_id, state):
            await self._withdraw(partition, doc_id, state, None, headers)

    async def _settle(
        self,
        write: Write,
        acks: list[asyncio.Future[None]],
        replaced: Sequence[DocumentState | None] = (),
    ) -> None:
        """Stage the state beside the write's records (``acks``) and wait for all of them: one
        linger and one round trip per document, not two. A split state's head waits for its
        parts (see the invariants); the parts of the previous state, and of ``replaced``, that
        it does not name are tombstoned after it. Only then does the local store take the
        state."""
        states = self.states
        partition, doc_id, previous = write.partition, write.doc_id, write.previous
        whole, parts = split_state(write.state, self._part_bytes)
        named = set(whole.digests)
        stale = [d for s in (previous, *replaced) for d in self._digests(s) if d not in named]
        if parts:
            acks = acks + states.stage_parts(partition, doc_id, whole, parts)
            await self._publisher.wait(acks)
            acks = []
        staged, encoded = states.stage(partition, doc_id, whole, list(dict.fromkeys(stale)))
        await self._publisher.wait(acks + staged)
        states.applied(partition, doc_id, whole, previous, encoded)

    def _digests(self, state: DocumentState | None) -> list[bytes]:
        """The parts ``state`` was written with: those it names, or those a split of it makes
        (a state that was to be written)."""
        if state is None:
            return []
        return state.digests if state.parts else split_state(state, self._part_bytes)[0].digests

    async def _withdraw(
        self,
        partition: int,
        doc_id: str,
        state: DocumentState,
        previous: DocumentState | None,
        headers: Headers,
    ) -> None:
        """Tombstone every chunk the sink may hold of a document whose records were partly
        refused, and remember it as deleted (worker.state.decisions.withdraw). The parts of
        ``state`` may have landed: they go too."""
        decision = decisions.withdraw(state, previous)
        write = Write(
            partition, doc_id, decision.state, previous, headers, retract=decision.retract
        )
        acks, _ = await _stage_output(self._publisher, self.states.documents_topic, write)
        await self._settle(write, acks, replaced=[state])
        self._metrics.chunks_retracted.inc(len(decision.retract))
