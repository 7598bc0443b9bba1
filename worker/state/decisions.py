"""Document lifecycle, decided: what a new version or a tombstone does downstream, given what the
worker remembers of the document. Pure: values in, values out (the I/O is
worker.handling.handler's, and the write's worker.state.writing's).

The input topic is a changelog: a record keyed by a document id carries its newest version, a
null value (a tombstone) deletes it. Downstream speaks Kafka's sink language — upsert by key,
delete on a null value — so every decision here is a list of chunk events to publish and a list
of chunk ids to tombstone, and the state to remember next (:class:`DocumentState`, kept in a
compacted changelog topic: worker.state.documents).

Invariants:

- **Last write wins by offset**, except where versions compare: when both the remembered and
  the arriving version are integers, an older version never replaces a newer one (a producer
  re-sending an old version, a late CDC event). Strings are opaque: they never compare.
- **A record before the remembered offset is a replay** (the worker crashed before committing
  the offset, or a rebalance moved the partition): it changes nothing, so a replayed old version
  cannot resurrect retracted chunks. A delete is remembered as a marker carrying its offset for
  as long as a replay could reach it.
- **The record at the remembered offset is done again.** A document's state record goes out
  beside its chunk events and tombstones, not after them (worker.state.writing), so a crash can
  leave the state written and some of its chunk events not: the state then names its own record.
  Doing that record again publishes every chunk event of it and the tombstones it had published
  (the state carries them: ``retracted``), which is idempotent for a sink that upserts by key.
  When doing it again fails instead (a dead letter now), the document is withdrawn first
  (:func:`withdraw`): nothing else would ever send those tombstones.
- **An unconfirmed state is finished by the next record.** The record a state names may never
  come again: a compacted input topic drops it once a newer version of the document is
  written, retention drops it once it is old. A state a previous owner may not have finished
  (worker.state.unconfirmed) is therefore treated by any newer record as the redo treats it: what it
  retracted is tombstoned again beside what it held, and every chunk is emitted. An older
  integer version, which changes nothing else, sends that state's retracted tombstones again
  (:func:`retracted_again`): on a compacted input it is what drops the state's record.
- **Retraction is by id**: the chunks of the previous version whose ids the new version does
  not have are tombstoned; an unchanged chunk keeps its id (content-addressed:
  worker.wire.records.chunk_ids), so a sink need not re-embed it.
- A delete of a document that is unknown (or already deleted) is a no-op, not an error.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

from worker.wire.state_record import DocumentState, ids_to_bytes


class Skip(enum.Enum):
    """Why a record changes nothing (the metric label of chunkstream_documents_skipped_total)."""

    REPLAYED = "replayed"  # before the offset the state already reflects
    OLDER_VERSION = "older_version"  # an integer version below the remembered one
    UNKNOWN_DELETE = "unknown_delete"  # a tombstone for a document never seen (or deleted)


@dataclass(frozen=True)
class Update:
    """A new version: publish ``emit`` (indexes into the new chunks), tombstone ``retract``."""

    emit: list[int]
    unchanged: int  # chunks whose id the previous version already had
    retract: list[str]
    state: DocumentState


@dataclass(frozen=True)
class Delete:
    """A tombstone: tombstone every chunk id of the document, remember the delete."""

    retract: list[str]
    state: DocumentState


def _superseded(state: DocumentState | None, offset: int) -> bool:
    return state is not None and offset < state.offset


def _redone(state: DocumentState | None, offset: int) -> TypeGuard[DocumentState]:
    """The state came from this very record: it is being done again (see the invariants)."""
    return state is not None and offset == state.offset


def _older(state: DocumentState | None, version: str | int | None) -> bool:
    """Integers compare (bool is not a version); anything else is last write by offset."""
    if state is None or state.deleted:
        return False
    old = state.version
    if type(old) is not int or type(version) is not int:
        return False
    return version < old


def update(
    state: DocumentState | None,
    offset: int,
    version: str | int | None,
    ids: Sequence[str],
    *,
    emit_unchanged: bool,
    unconfirmed: bool = False,
) -> Update | Skip:
    """The decision for a new version whose chunks have ``ids`` (index order). ``unconfirmed``:
    the state's own records may not all have landed (worker.state.unconfirmed)."""
    if _superseded(state, offset):
        return Skip.REPLAYED
    if _older(state, version):
        return Skip.OLDER_VERSION
    if _redone(state, offset) or (unconfirmed and state is not None):
        # Everything again: which of its chunk events reached the topic is unknown. What it
        # retracted, and whatever its state names that the chunks no longer have (the
        # strategy changed since), is tombstoned. A delete marker here is this record's own
        # withdrawal (see withdraw), or an unconfirmed delete: its tombstones may not have
        # landed either.
        previous = [*state.retracted_ids, *state.ids]
        emit_unchanged = True
    else:
        previous = [] if state is None or state.deleted else state.ids
    if not previous:  # a new document (the usual case): every chunk is new, nothing retracts
        state_after = DocumentState(offset, version, ids_to_bytes(ids))
        return Update(emit=list(range(len(ids))), unchanged=0, retract=[], state=state_after)
    kept = set(previous)
    current = set(ids)
    emit = [i for i, chunk_id in enumerate(ids) if emit_unchanged or chunk_id not in kept]
    retract = list(dict.fromkeys(chunk_id for chunk_id in previous if chunk_id not in current))
    return Update(
        emit=emit,
        unchanged=sum(1 for chunk_id in ids if chunk_id in kept),
        retract=retract,
        state=DocumentState(offset, version, ids_to_bytes(ids), retracted=ids_to_bytes(retract)),
    )


def retracted_again(state: DocumentState | None, *, unconfirmed: bool) -> list[str]:
    """What an older integer version (:data:`Skip.OLDER_VERSION`) tombstones again when it meets
    an unconfirmed state: the state's ``retracted``. The older version changes nothing else —
    the state's version stays the document's — but the state's own record may never come again
    to finish it (on a compacted input topic this very re-send is what drops it), and the
    tombstones that record sent may not have landed. Those need no text, so they go out again
    (idempotent for the sink) and no chunk the newer version retracted stays. Its chunk events
    do need the text: a chunk only it added may stay missing until a newer version comes. The
    state stays unconfirmed, so the next record that applies still finishes it."""
    if not unconfirmed or state is None or state.deleted:
        return []
    return state.retracted_ids


def delete(state: DocumentState | None, offset: int, *, unconfirmed: bool = False) -> Delete | Skip:
    """The decision for a tombstone of the document (``unconfirmed``: as for :func:`update`)."""
    if _superseded(state, offset):
        return Skip.REPLAYED
    if state is None:
        return Skip.UNKNOWN_DELETE
    unfinished = unconfirmed or _redone(state, offset)
    if state.deleted:
        if not unfinished:
            return Skip.UNKNOWN_DELETE
        # A delete whose tombstones may not have landed: they are sent again, and the
        # marker is this record's (the same marker when the record is being done again).
        marker = DocumentState(offset, None, b"", deleted=True, retracted=state.retracted)
        return Delete(retract=state.retracted_ids, state=marker)
    gone = list(dict.fromkeys([*state.ids, *state.retracted_ids])) if unconfirmed else state.ids
    marker = DocumentState(offset, None, b"", deleted=True, retracted=ids_to_bytes(gone))
    return Delete(retract=gone, state=marker)


def withdraw(state: DocumentState, previous: DocumentState | None) -> Delete:
    """The decision after the broker refused a batch of the record that was to write ``state``
    over ``previous``: some of its records may have landed and some not, so the sink holds an
    unknown mix of the two versions. Every chunk id it may hold is tombstoned and a delete
    marker remembers them (a redo tombstones them again); the next version creates the
    document anew, emitting everything. The marker takes ``state``'s offset: that record's."""
    maybe = [] if previous is None else [*previous.ids, *previous.retracted_ids]
    ids = list(dict.fromkeys([*maybe, *state.ids, *state.retracted_ids]))
    return Delete(
        retract=ids,
        state=DocumentState(state.offset, None, b"", deleted=True, retracted=ids_to_bytes(ids)),
    )


def marker_expired(state: DocumentState, committed: int) -> bool:
    """A delete marker may go once the group's committed offset has passed it: no replay can
    bring back a record at or before it."""
    return state.deleted and state.offset < committed
