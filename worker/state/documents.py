"""What the worker remembers per document, kept the way Kafka Streams keeps a store: a compacted
changelog topic (the truth, co-partitioned with the input) and a local copy (worker.state.store).

Invariants:

- A document's state goes to the changelog beside everything it describes (its chunk events
  and tombstones, appended in the same step: worker.state.writing), and to the local copy only
  after all of them were acknowledged; the input offset is committed only after that too. A crash in
  between replays the record: a replay sees either the old state (and publishes the same ids
  again: idempotent) or the new one, which names this very record, and then does it again in
  full (worker.state.decisions). Waiting for the chunks before sending the state, as the first
  version did, cost every document a second linger and round trip (docs/benchmarks.md).
- The state of input partition p is written to changelog partition p, keyed by document id.
- A delete leaves a marker (worker.state.decisions.DocumentState ``deleted``) that blocks replays of
  older records; once the group's committed offset of its partition has passed it, no replay
  can reach it, and it is removed with a changelog tombstone, so compaction forgets the
  document entirely: the state does not grow with deleted documents.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from worker.kafka.publisher import Publisher, Record
from worker.kafka.transactions import writing_for
from worker.observability.metrics import Metrics
from worker.runtime.waits import wait_while
from worker.state.changelog import Changelog, Restored
from worker.state.decisions import marker_expired
from worker.state.store import StateStore
from worker.state.unconfirmed import Unconfirmed
from worker.wire.state_record import DocumentState, encode_state, head_of, part_key

log = logging.getLogger(__name__)

# The input partitions' log start offsets (AIOKafkaConsumer.beginning_offsets).
LogStarts = Callable[[list[TopicPartition]], Awaitable[dict[TopicPartition, int]]]

# How long a hand-over waits for records still on their way (release): within the margin a
# revocation leaves itself below the rebalance timeout after its drain (worker.consuming.loop).
LATE_STATE_WAIT_S = 3.0


class DocumentStates:
    """The document states of the partitions this worker owns."""

    def __init__(
        self,
        store: StateStore,
        publisher: Publisher,
        changelog: Changelog,
        metrics: Metrics,
        *,
        documents_topic: str | None = None,
    ) -> None:
        self.store = store
        # Where a delete also sends the document's own tombstone (Settings.documents_topic).
        self.documents_topic = documents_topic
        self.topic = changelog.topic
        self._publisher = publisher
        self._changelog = changelog
        self._metrics = metrics
        # One changelog reader: restores take turns on it.
        self._reading = asyncio.Lock()
        # Delete markers per partition (document id → offset of its delete), to expire.
        self._markers: dict[int, dict[str, int]] = {}
        # Live (not deleted) documents per partition: counted once after a restore, then
        # kept by each state written (no count query per sample).
        self._documents: dict[int, int] = {}
        # States a previous owner may not have finished, per partition (worker.state.unconfirmed).
        self._unconfirmed: dict[int, Unconfirmed] = {}
        # Their gauges, looked up once per assignment (a labels() lookup per document cost
        # more than the count it sets).
        self._gauges: dict[int, Any] = {}
        # The changelog offset each partition's restore read up to: a checkpoint names it, or
        # the offset past this worker's own last acknowledged record since.
        self._restored_to: dict[int, int] = {}

    def get(self, partition: int, doc_id: str) -> DocumentState | None:
        return self.store.get(partition, doc_id)

    def unconfirmed(self, partition: int, doc_id: str, state: DocumentState | None) -> bool:
        """Whether ``state`` (the document's, from :meth:`get`) may be unfinished: a previous
        owner wrote it and may not have written all it describes (worker.state.unconfirmed)."""
        tracker = self._unconfirmed.get(partition)
        return state is not None and tracker is not None and tracker.holds(doc_id, state)

    def stage(
        self, partition: int, doc_id: str, state: DocumentState, stale: Sequence[bytes] = ()
    ) -> tuple[list[asyncio.Future[None]], bytes]:
        """Append ``state`` (its head when it is split: its parts must be acknowledged first,
        :meth:`stage_parts`) to the changelog without waiting, then the tombstones of the parts
        ``stale`` (digests) that no state names any more: the acknowledgements to wait for,
        and the encoded state for :meth:`applied`."""
        self._claim(partition, doc_id)
        encoded = encode_state(state)
        value = encode_state(head_of(state)) if state.parts else encoded
        records: list[Record] = [(doc_id.encode(), value, [])]
        records += [(part_key(doc_id, digest), None, []) for digest in stale]
        return self._publisher.stage(self.topic, partition, records), encoded

    def stage_parts(
        self, partition: int, doc_id: str, state: DocumentState, values: Sequence[bytes]
    ) -> list[asyncio.Future[None]]:
        """Append the part records of a split ``state`` (worker.wire.state_record
        ``split_state``) without waiting."""
        self._claim(partition, doc_id)
        records: list[Record] = [
            (part_key(doc_id, digest), value, [])
            for digest, value in zip(state.digests, values, strict=True)
        ]
        return self._publisher.stage(self.topic, partition, records)

    def _claim(self, partition: int, doc_id: str) -> None:
        # Before the append: from now on a marker's tombstones would land after this state in
        # the changelog and erase it; :meth:`expire_markers` checks this map synchronously.
        self._markers.setdefault(partition, {}).pop(doc_id, None)

    def applied(
        self,
        partition: int,
        doc_id: str,
        state: DocumentState,
        previous: DocumentState | None,
        encoded: bytes,
    ) -> None:
        """``state`` (which follows ``previous``) was acknowledged by the changelog, and
        everything it describes downstream: the local copy takes it."""
        self.store.put(partition, doc_id, state, encoded)
        tracker = self._unconfirmed.get(partition)
        if tracker is not None:
            tracker.settled(doc_id)
        if state.deleted:
            self._markers.setdefault(partition, {})[doc_id] = state.offset
        was_live = previous is not None and not previous.deleted
        change = int(not state.deleted) - int(was_live)
        if change and partition in self._documents:
            self._documents[partition] += change
            self._gauges[partition].set(self._documents[partition])

    async def restore(
        self, partitions: Sequence[int], committed: Mapping[int, int | None] | None = None
    ) -> list[Restored]:
        """Bring the partitions' state back from the changelog; their delete markers become
        ours to expire. ``committed``: the group's committed offset of each partition, below
        which every state is finished (worker.state.unconfirmed); none known: no state is."""
        trackers = {p: Unconfirmed(committed.get(p)) for p in partitions} if committed else {}
        async with self._reading:
            restored = await self._changelog.restore(partitions, trackers)
        for partition, done in zip(partitions, restored, strict=True):
            self._restored_to[partition] = done.end
            if partition in trackers:
                self._unconfirmed[partition] = trackers[partition]
            self._markers[partition] = dict(self.store.markers(partition))
            self._documents[partition] = self.store.count(partition)
            gauge = self._metrics.state_documents.labels(str(partition))
            self._gauges[partition] = gauge
            gauge.set(self._documents[partition])
            self._metrics.state_restore_seconds.observe(done.seconds)
            log.info(
                "state restored",
                extra={
                    "partition": partition,
                    "records": done.records,
                    "seconds": round(done.seconds, 3),
                    "from_checkpoint": done.from_checkpoint,
                    "documents": self._documents[partition],
                    "unconfirmed": partition in trackers and trackers[partition].outstanding,
                },
            )
        return restored

    def documents(self, partition: int) -> int:
        return self._documents.get(partition, 0)

    async def release(
        self,
        partitions: set[int],
        clean: set[int],
        worth_it: Callable[[], bool] | None = lambda: True,
    ) -> None:
        """Let go of partitions; checkpoint those handed over cleanly (every state write of
        theirs acknowledged and applied locally), at the offset the store has applied.

        A partition let go with documents abandoned at the drain deadline may still have their
        records on the way: state records (staged beside the chunk events) and chunk events.
        One landing after the next owner had done those documents again and moved on (a newer
        state, a retraction) would bring back what that undid. So the writes already staged
        are given a short while to settle first, while ``worth_it()`` (Kafka is reachable):
        every lane but the other partitions' state. Kafka's own answer, fencing a zombie's
        writes, needs transactions. ``worth_it`` None: the partitions were lost, and their
        unsent writes were discarded instead (worker.consuming.commits)."""
        unclean = partitions - clean
        # A partition still holding unconfirmed states is not checkpointed: the next owner
        # must read them from the changelog to know them (worker.state.unconfirmed).
        clean = {p for p in clean if not self._outstanding(p)}
        if unclean and worth_it is not None:
            topic = self.topic
            unsettled = self._publisher.unsettled(lambda t, p: t != topic or p in unclean)
            if await wait_while(unsettled, LATE_STATE_WAIT_S, worth_it):
                log.warning(
                    "records still unsettled at hand-over", extra={"partitions": sorted(unclean)}
                )
        applied = {p: self._applied_to(p) for p in clean if p in self._restored_to}
        for partition in partitions:
            self._markers.pop(partition, None)
            self._unconfirmed.pop(partition, None)
            self._documents.pop(partition, None)
            self._gauges.pop(partition, None)
            self._restored_to.pop(partition, None)
            with contextlib.suppress(KeyError):  # never sampled
                self._metrics.state_documents.remove(str(partition))
        self.store.flush()
        self._changelog.checkpoint(applied)

    def _applied_to(self, partition: int) -> int:
        """The changelog offset below which the local store has applied every record of
        ``partition``: what its restore read, then this worker's own writes (while it owns the
        partition nobody else writes there; each of its states is applied once acknowledged,
        and a clean hand-over has none in flight). Not the changelog's end: records another
        member wrote while this one was paused lie beyond what it applied."""
        acknowledged = self._publisher.acknowledged(self.topic, partition)
        restored = self._restored_to[partition]
        return restored if acknowledged is None else max(restored, acknowledged + 1)

    def _outstanding(self, partition: int) -> bool:
        tracker = self._unconfirmed.get(partition)
        return tracker is not None and tracker.outstanding

    async def resend_lost_records(
        self, partitions: Sequence[TopicPartition], log_starts: LogStarts
    ) -> None:
        """:meth:`resend_lost` after a restore, for each partition that has unconfirmed states;
        ``log_starts`` (the consumer's ``beginning_offsets``) is asked only for those."""
        doubtful = [tp for tp in partitions if self._outstanding(tp.partition)]
        if doubtful:
            starts = await log_starts(doubtful)
            for tp in doubtful:
                await self.resend_lost(tp.partition, starts[tp])

    async def resend_lost(self, partition: int, log_start: int) -> int:
        """Send again the tombstones of the unconfirmed states whose input record is gone (its
        offset below the partition's ``log_start``: time retention, or DeleteRecords), so no
        redo of it will ever come, and no later record may either. What those records
        retracted is tombstoned again (idempotent for the sink), so no chunk they retracted
        stays; the states stay unconfirmed, so a later version still does the full redo (their
        own chunk events need the text, which is gone). The number of ids tombstoned."""
        tracker = self._unconfirmed.get(partition)
        span = None if tracker is None else tracker.lost(log_start)
        if tracker is None or span is None:
            return 0
        with writing_for(partition):  # exactly-once: in the partition's transaction
            return await self._resend_lost(partition, log_start, tracker, span)

    async def _resend_lost(
        self, partition: int, log_start: int, tracker: Unconfirmed, span: tuple[int, int]
    ) -> int:
        acks: list[asyncio.Future[None]] = []
        sent = 0
        for doc_id, state in self.store.live_between(partition, *span):
            if not state.retracted or not tracker.holds(doc_id, state):
                continue
            retracted = state.retracted_ids
            staged, _ = await self._publisher.stage_encoded(doc_id, [], [], (), retracted)
            acks += staged
            sent += len(retracted)
        await self._publisher.wait(acks)
        if sent:
            self._metrics.chunks_retracted.inc(sent)
            log.warning(
                "input records gone before they were done again: their tombstones sent again",
                extra={"partition": partition, "log_start": log_start, "tombstones": sent},
            )
        return sent

    async def expire_markers(self, committed: Mapping[int, int]) -> None:
        """Remove the delete markers the committed offsets have passed (changelog tombstone,
        then the local copy). A failure leaves them for the next commit."""
        for partition, offset in committed.items():
            with writing_for(partition):  # exactly-once: in the partition's next transaction
                await self._expire_markers(partition, offset)

    async def _expire_markers(self, partition: int, offset: int) -> None:
        markers = self._markers.get(partition)
        if not markers:
            return
        due = [(d, o) for d, o in markers.items() if marker_expired(_marker(o), offset)]
        if not due:
            return
        try:
            await self._finish_unconfirmed(partition, due)
            await self._publisher.admit()
            # Checked again with no await before the stage: a document written again
            # meanwhile took its marker out of the map (stage), and the marker's tombstone
            # would land after its new state and erase it.
            due = [(d, o) for d, o in due if markers.get(d) == o]
            if not due:
                return
            records: list[Record] = [(doc_id.encode(), None, []) for doc_id, _ in due]
            # A marker's parts go after its head: a crash in between leaves parts no head names
            # (only space), never a head without its parts.
            records += self._parts_of(partition, due)
            await self._publisher.wait(self._publisher.stage(self.topic, partition, records))
        except KafkaError as exc:
            log.warning("delete markers not expired yet", extra={"error": repr(exc)})
            return
        tracker = self._unconfirmed.get(partition)
        for doc_id, marker_offset in due:
            # Only that marker: the document may have been created again meanwhile.
            removed = self.store.remove(partition, doc_id, offset=marker_offset)
            if removed and tracker is not None:
                tracker.settled(doc_id)
            if markers.get(doc_id) == marker_offset:
                del markers[doc_id]

    def _parts_of(self, partition: int, due: list[tuple[str, int]]) -> list[Record]:
        """The tombstones of the due markers' parts (markers of split states)."""
        records: list[Record] = []
        for doc_id, marker_offset in due:
            marker = self.store.get(partition, doc_id)
            if marker is not None and marker.offset == marker_offset:
                records += [(part_key(doc_id, d), None, []) for d in marker.digests]
        return records

    async def _finish_unconfirmed(self, partition: int, due: list[tuple[str, int]]) -> None:
        """Send again the tombstones of the due markers that a previous owner may not have
        finished, before they go. Their input record did not come again (compaction drops a
        tombstone ``delete.retention.ms`` after cleaning it, with no record after it), so no
        later record of the document will send them (worker.state.unconfirmed)."""
        if not self._outstanding(partition):
            return  # the usual case: no store reads on the way to expiring markers
        acks: list[asyncio.Future[None]] = []
        for doc_id, marker_offset in due:
            marker = self.store.get(partition, doc_id)
            if marker is None or marker.offset != marker_offset:
                continue
            if not self.unconfirmed(partition, doc_id, marker):
                continue
            if marker.retracted:
                staged, _ = await self._publisher.stage_encoded(
                    doc_id, [], [], (), marker.retracted_ids
                )
                acks += staged
            if self.documents_topic is not None:  # its null may not have landed either
                acks += await self._publisher.stage_keyed(
                    self.documents_topic, doc_id.encode(), None
                )
        await self._publisher.wait(acks)


def _marker(offset: int) -> DocumentState:
    return DocumentState(offset, None, b"", deleted=True)
