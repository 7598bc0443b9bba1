"""Document states that a previous owner of a partition may not have finished writing.

A document's state record goes out beside its chunk events and tombstones (worker.state.documents).
After a crash, the changelog can therefore hold a state whose other records did not all land. The
redo rule (worker.state.decisions) finishes such a state when the input record it names comes again.
That record may never come again, though:

- a compacted input topic drops it once a newer version of the document is written;
- retention drops it once it is old enough.

The newer version must then do what the redo would have done. It tombstones what the state
retracted as well as what it held, and it emits every chunk. This module says which states
those are, and (:meth:`Unconfirmed.lost`) which of them already lost their record: those send
their tombstones again on assignment (worker.state.documents), since a document may have no newer
version at all.

Invariants:

- A state is *unconfirmed* when a restore read it from the changelog and its offset is at or
  past the group's committed offset for the partition, taken when the partition was assigned.
  An input offset is committed only after every record before it was acknowledged, so a state
  below that offset is finished.
- A state this worker writes is finished once acknowledged: writing one settles the document.
- Memory is one document id per unconfirmed state. That is at most the records the previous
  owner took and did not commit. Past :data:`MAX_TRACKED` ids, the ids are dropped and the
  offset range stands for them. Every state in the range then counts as unconfirmed, ours
  included. That costs redundant tombstones and re-emitted chunks, never a stale chunk.
- While any state of a partition may be unconfirmed, the partition gets no checkpoint when it is
  let go (worker.state.documents). The next owner then reads the whole changelog again and finds
  the same
  states, instead of trusting rows it did not read.
"""

from __future__ import annotations

from worker.wire.state_record import DocumentState

MAX_TRACKED = 100_000


class Unconfirmed:
    """The unconfirmed states of one partition, learned during its restore."""

    def __init__(self, committed: int | None) -> None:
        self.since = 0 if committed is None else committed  # nothing committed: all of them
        self.highest = -1  # the highest unconfirmed offset read
        self._ids: set[str] | None = set()  # None: too many, the range stands for them

    def seen(self, doc_id: str, state: DocumentState | None) -> None:
        """A changelog record read by the restore, in log order (None: a tombstone)."""
        if state is None or state.offset < self.since:
            if self._ids is not None:
                self._ids.discard(doc_id)
            return
        self.highest = max(self.highest, state.offset)
        if self._ids is not None:
            self._ids.add(doc_id)
            if len(self._ids) > MAX_TRACKED:
                self._ids = None

    def holds(self, doc_id: str, state: DocumentState) -> bool:
        """Whether ``state``, the document's current one, may be unfinished."""
        if self._ids is not None:
            return doc_id in self._ids
        return self.since <= state.offset <= self.highest

    def settled(self, doc_id: str) -> None:
        """This worker wrote the document's state, and it was acknowledged."""
        if self._ids is not None:
            self._ids.discard(doc_id)

    def lost(self, log_start: int) -> tuple[int, int] | None:
        """The input offsets ``[low, high)`` of the unconfirmed states whose record is gone
        (below the partition's ``log_start``: retention, or DeleteRecords): no redo will come
        for them. None when there can be none."""
        if not self.outstanding or self.since >= log_start or self.highest < self.since:
            return None
        return self.since, min(log_start, self.highest + 1)

    @property
    def outstanding(self) -> bool:
        """Whether any state of the partition may still be unconfirmed."""
        return self._ids is None or bool(self._ids)
