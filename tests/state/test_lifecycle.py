"""The lifecycle decisions (worker.state.decisions), pure: a simulated sink that only upserts by key
and deletes on tombstones must end with exactly the current version's chunk ids, whatever the
order of versions, replays and deletes."""

from __future__ import annotations

import hashlib

import msgspec
from hypothesis import example, given, settings
from hypothesis import strategies as st

from worker.state import decisions as lifecycle
from worker.state.decisions import Skip
from worker.wire.state_record import DocumentState, ids_to_bytes


def ids(*texts: str) -> list[str]:
    return [hashlib.sha256(t.encode()).hexdigest()[:32] for t in texts]


def test_a_new_document_emits_everything_and_retracts_nothing() -> None:
    decision = lifecycle.update(None, 5, None, ids("a", "b"), emit_unchanged=False)
    assert isinstance(decision, lifecycle.Update)
    assert decision.emit == [0, 1]
    assert decision.retract == []
    assert decision.state == DocumentState(5, None, ids_to_bytes(ids("a", "b")))


def test_an_edit_retracts_what_is_gone_and_keeps_what_stayed() -> None:
    old = DocumentState(5, 1, ids_to_bytes(ids("a", "b", "c")))
    new = ids("a", "B", "c", "d")
    skip = lifecycle.update(old, 9, 2, new, emit_unchanged=False)
    emit = lifecycle.update(old, 9, 2, new, emit_unchanged=True)
    assert isinstance(skip, lifecycle.Update)
    assert isinstance(emit, lifecycle.Update)
    assert skip.emit == [1, 3]  # only the new ids
    assert emit.emit == [0, 1, 2, 3]  # everything, unchanged ones with their old ids
    assert skip.unchanged == emit.unchanged == 2
    assert skip.retract == emit.retract == ids("b")


def test_replays_and_older_integer_versions_change_nothing() -> None:
    state = DocumentState(10, 3, ids_to_bytes(ids("a")))
    assert lifecycle.update(state, 9, 3, ids("a"), emit_unchanged=True) is Skip.REPLAYED
    assert lifecycle.update(state, 7, 4, ids("x"), emit_unchanged=True) is Skip.REPLAYED
    assert lifecycle.update(state, 11, 2, ids("x"), emit_unchanged=True) is Skip.OLDER_VERSION
    # Equal versions and strings do not block: the last record by offset wins.
    assert isinstance(
        lifecycle.update(state, 11, 3, ids("x"), emit_unchanged=True), lifecycle.Update
    )
    assert isinstance(
        lifecycle.update(state, 11, "2", ids("x"), emit_unchanged=True), lifecycle.Update
    )
    strings = DocumentState(10, "v9", b"")
    assert isinstance(
        lifecycle.update(strings, 11, "v10", [], emit_unchanged=True), lifecycle.Update
    )
    assert lifecycle.delete(state, 9) is Skip.REPLAYED


def test_the_record_the_state_came_from_is_done_again_in_full() -> None:
    """A crash after the state was written and before its chunk events were: the replay of
    that record must publish every chunk again and tombstone what it had tombstoned."""
    old = DocumentState(5, 1, ids_to_bytes(ids("a", "b", "c")))
    edit = lifecycle.update(old, 9, 2, ids("a", "B"), emit_unchanged=False)
    assert isinstance(edit, lifecycle.Update)
    assert edit.emit == [1]
    assert edit.state.retracted_ids == ids("b", "c")
    again = lifecycle.update(edit.state, 9, 2, ids("a", "B"), emit_unchanged=False)
    assert isinstance(again, lifecycle.Update)
    assert again.emit == [0, 1]  # which events reached the topic is unknown: all of them
    assert again.retract == ids("b", "c")
    assert again.state == edit.state
    # The strategy changed between the crash and the replay: what the state names and the
    # chunks no longer have is tombstoned too.
    changed = lifecycle.update(edit.state, 9, 2, ids("A", "B"), emit_unchanged=False)
    assert isinstance(changed, lifecycle.Update)
    assert changed.emit == [0, 1]
    assert set(changed.retract) == set(ids("b", "c", "a"))
    # A delete is done again the same way: its marker keeps the ids it tombstoned.
    gone = lifecycle.delete(edit.state, 12)
    assert isinstance(gone, lifecycle.Delete)
    assert gone.state.retracted_ids == ids("a", "B")
    redo = lifecycle.delete(gone.state, 12)
    assert isinstance(redo, lifecycle.Delete)
    assert redo.retract == ids("a", "B")
    assert redo.state == gone.state
    assert lifecycle.delete(gone.state, 11) is Skip.REPLAYED


def test_a_withdrawn_records_replay_tombstones_what_the_withdrawal_did() -> None:
    """A crash after a withdrawal's marker reached the changelog and before its tombstones
    reached the chunk topic: the replay of that record, accepted this time, emits every chunk
    and tombstones what the marker names and the new version does not have."""
    old = DocumentState(5, 1, ids_to_bytes(ids("a", "b")))
    edit = lifecycle.update(old, 9, 2, ids("a", "c"), emit_unchanged=False)
    assert isinstance(edit, lifecycle.Update)
    marker = lifecycle.withdraw(edit.state, old).state
    assert marker.deleted
    assert marker.offset == 9
    assert set(marker.retracted_ids) == set(ids("a", "b", "c"))
    again = lifecycle.update(marker, 9, 2, ids("a", "c"), emit_unchanged=False)
    assert isinstance(again, lifecycle.Update)
    assert again.emit == [0, 1]
    assert again.retract == ids("b")  # before: nothing, and "b" stayed in the sink for good
    assert again.state.retracted_ids == ids("b")


def test_an_unconfirmed_state_is_finished_by_the_next_record() -> None:
    """A crash left a state whose own record will not come back (a compacted input dropped
    it): the next version tombstones what that state retracted too, and emits every chunk,
    since which of the state's events landed is unknown."""
    old = DocumentState(5, 1, ids_to_bytes(ids("a", "b", "c")))
    edit = lifecycle.update(old, 9, 2, ids("a", "B"), emit_unchanged=False)
    assert isinstance(edit, lifecycle.Update)
    after = lifecycle.update(edit.state, 14, 3, ids("a", "B", "d"), emit_unchanged=False)
    assert isinstance(after, lifecycle.Update)
    assert after.emit == [2]  # confirmed: "a" and "B" are in the sink
    assert after.retract == []
    finish = lifecycle.update(
        edit.state, 14, 3, ids("a", "B", "d"), emit_unchanged=False, unconfirmed=True
    )
    assert isinstance(finish, lifecycle.Update)
    assert finish.emit == [0, 1, 2]
    assert finish.retract == ids("b", "c")
    assert finish.unchanged == 2
    # A delete after it tombstones both too, and its marker remembers both.
    gone = lifecycle.delete(edit.state, 14, unconfirmed=True)
    assert isinstance(gone, lifecycle.Delete)
    assert set(gone.retract) == set(ids("a", "B", "b", "c"))
    assert set(gone.state.retracted_ids) == set(gone.retract)
    # An unconfirmed delete marker: a later delete sends its tombstones again (a confirmed one
    # is an unknown delete), and a later version tombstones what it names and does not have.
    marker = gone.state
    again = lifecycle.delete(marker, 20, unconfirmed=True)
    assert isinstance(again, lifecycle.Delete)
    assert set(again.retract) == set(gone.retract)
    assert again.state.offset == 20
    assert again.state.deleted
    assert lifecycle.delete(marker, 20) is Skip.UNKNOWN_DELETE
    back = lifecycle.update(marker, 21, 4, ids("a"), emit_unchanged=False, unconfirmed=True)
    assert isinstance(back, lifecycle.Update)
    assert set(back.retract) == set(ids("B", "b", "c"))
    # Replays stay replays.
    assert (
        lifecycle.update(edit.state, 8, 1, ids("x"), emit_unchanged=True, unconfirmed=True)
        is Skip.REPLAYED
    )
    # An older integer version skips, and sends the unconfirmed state's tombstones again (its
    # record may never come back to do it); a confirmed state's, or a marker's, it leaves.
    older = lifecycle.update(edit.state, 30, 1, ids("x"), emit_unchanged=True, unconfirmed=True)
    assert older is Skip.OLDER_VERSION
    assert lifecycle.retracted_again(edit.state, unconfirmed=True) == ids("b", "c")
    assert lifecycle.retracted_again(edit.state, unconfirmed=False) == []
    assert lifecycle.retracted_again(marker, unconfirmed=True) == []
    assert lifecycle.retracted_again(None, unconfirmed=True) == []


def test_a_state_written_before_retracted_existed_still_decodes() -> None:
    """States in a changelog written by the previous release have four fields."""
    four = msgspec.msgpack.encode([7, 2, ids_to_bytes(ids("a")), False])
    state = msgspec.msgpack.decode(four, type=DocumentState)
    assert state == DocumentState(7, 2, ids_to_bytes(ids("a")))
    assert state.retracted == b""


def test_deletes_retract_everything_and_leave_a_marker_until_commits_pass_it() -> None:
    state = DocumentState(10, None, ids_to_bytes(ids("a", "b")))
    decision = lifecycle.delete(state, 12)
    assert isinstance(decision, lifecycle.Delete)
    assert decision.retract == ids("a", "b")
    marker = decision.state
    assert marker.deleted
    assert marker.offset == 12
    assert lifecycle.delete(None, 3) is Skip.UNKNOWN_DELETE
    assert lifecycle.delete(marker, 13) is Skip.UNKNOWN_DELETE
    # A replay of an older version must not resurrect the document...
    assert lifecycle.update(marker, 11, None, ids("a"), emit_unchanged=True) is Skip.REPLAYED
    # ...a newer record creates it again.
    again = lifecycle.update(marker, 14, None, ids("a"), emit_unchanged=False)
    assert isinstance(again, lifecycle.Update)
    assert again.emit == [0]
    assert again.retract == []
    assert not lifecycle.marker_expired(marker, 12)  # the delete itself may still replay
    assert lifecycle.marker_expired(marker, 13)


# A stream of records for one document: (kind, version, chunk texts); offsets are positions.
Op = tuple[str, int | None, tuple[str, ...]]
ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"),
            st.one_of(st.none(), st.integers(0, 5)),
            st.lists(st.sampled_from("abcdef"), max_size=6).map(tuple),
        ),
        st.tuples(st.just("delete"), st.none(), st.just(())),
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(
    ops,
    st.lists(st.integers(0, 24), max_size=10),
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 24), st.floats(0, 1), st.booleans()), max_size=8),
)
def test_a_stock_sink_ends_with_exactly_the_current_version(
    records: list[Op],
    replays: list[int],
    emit_unchanged: bool,
    crashes: list[tuple[int, float, bool]],
) -> None:
    state: DocumentState | None = None
    sink: set[str] = set()  # chunk ids the sink holds: upsert by key, delete on null
    # The rule, stated independently: the last record by offset wins, except that an integer
    # version below the live document's integer version is ignored; a delete ends it.
    live = False
    current: list[str] = []
    current_version: int | None = None

    def texts_of(texts: tuple[str, ...]) -> list[str]:
        # Occurrences make equal texts distinct, as worker.wire.records.chunk_ids does.
        return [f"{t}#{texts[:i].count(t)}" for i, t in enumerate(texts)]

    # A crash while a record's chunk events, tombstones and state record were on their way
    # (they go out together): only a share of the events arrived, and the state or not. The
    # same record may crash more than once (its redo crashes too).
    lost: dict[int, list[tuple[float, bool]]] = {}
    for at, arrived, state_landed in crashes:
        lost.setdefault(at, []).append((arrived, state_landed))

    def apply(offset: int, arrived: float = 1.0, state_landed: bool = True) -> None:
        nonlocal state
        kind, version, texts = records[offset]
        chunk_ids = ids(*texts_of(texts))
        decision = (
            lifecycle.update(state, offset, version, chunk_ids, emit_unchanged=emit_unchanged)
            if kind == "put"
            else lifecycle.delete(state, offset)
        )
        if isinstance(decision, Skip):
            return
        effects: list[tuple[str, str]] = []
        if isinstance(decision, lifecycle.Update):
            effects += [("upsert", chunk_ids[i]) for i in decision.emit]
        effects += [("delete", chunk_id) for chunk_id in decision.retract]
        for action, chunk_id in effects[: round(len(effects) * arrived)]:
            if action == "upsert":
                sink.add(chunk_id)
            else:
                sink.discard(chunk_id)
        if state_landed:
            state = decision.state

    for offset, (kind, version, texts) in enumerate(records):
        for arrived, state_landed in lost.get(offset, []):
            apply(offset, arrived, state_landed)  # crashed; replayed next
        apply(offset)
        # A crash after the state was written replays earlier records: they change nothing.
        for replay in replays:
            if replay <= offset:
                apply(replay)
        if kind == "delete":
            live, current, current_version = False, [], None
        elif not (live and current_version is not None and version is not None
                  and version < current_version):  # fmt: skip
            live, current, current_version = True, texts_of(texts), version
        assert sink == set(ids(*current)), (records[: offset + 1], replays)


@settings(max_examples=300, deadline=None)
@given(
    ops,
    st.lists(st.tuples(st.integers(0, 24), st.floats(0, 1)), max_size=6),
    st.booleans(),
)
# An edit whose tombstone never landed, then an older version re-sent (which, on a compacted
# input, is what drops the edit's record): "b" must not stay in the sink.
@example([("put", 1, ("a", "b")), ("put", 2, ("a",)), ("put", 1, ("c",))], [(1, 0.0)], False)
def test_a_crashed_record_that_never_comes_back_is_finished_by_the_next(
    records: list[Op], gone: list[tuple[int, float]], emit_unchanged: bool
) -> None:
    """A crash while a record's records were on their way: its state landed with a share of
    its events, and then the record left the input (a compacted topic keeps only the newest
    record of a key; retention drops old ones), so no redo comes. Once a later record has
    changed the document, the sink holds exactly the current version again."""
    crashed = dict(gone)
    state: DocumentState | None = None
    unconfirmed = False  # as worker.state.unconfirmed would say of the state
    sink: set[str] = set()
    live = False
    current: list[str] = []
    current_version: int | None = None

    def texts_of(texts: tuple[str, ...]) -> list[str]:
        return [f"{t}#{texts[:i].count(t)}" for i, t in enumerate(texts)]

    for offset, (kind, version, texts) in enumerate(records):
        chunk_ids = ids(*texts_of(texts))
        decision = (
            lifecycle.update(
                state,
                offset,
                version,
                chunk_ids,
                emit_unchanged=emit_unchanged,
                unconfirmed=unconfirmed,
            )
            if kind == "put"
            else lifecycle.delete(state, offset, unconfirmed=unconfirmed)
        )
        if not isinstance(decision, Skip):
            effects: list[tuple[str, str]] = []
            if isinstance(decision, lifecycle.Update):
                effects += [("upsert", chunk_ids[i]) for i in decision.emit]
            effects += [("delete", chunk_id) for chunk_id in decision.retract]
            arrived = crashed.get(offset, 1.0)
            for action, chunk_id in effects[: round(len(effects) * arrived)]:
                if action == "upsert":
                    sink.add(chunk_id)
                else:
                    sink.discard(chunk_id)
            state = decision.state
            unconfirmed = offset in crashed
        elif decision is Skip.OLDER_VERSION:  # what worker.handling.handler sends again
            again = lifecycle.retracted_again(state, unconfirmed=unconfirmed)
            for chunk_id in again[: round(len(again) * crashed.get(offset, 1.0))]:
                sink.discard(chunk_id)
        if kind == "delete":
            live, current, current_version = False, [], None
        elif not (live and current_version is not None and version is not None
                  and version < current_version):  # fmt: skip
            live, current, current_version = True, texts_of(texts), version
        if not unconfirmed:
            assert sink == set(ids(*current)), (records[: offset + 1], gone)
        elif decision is Skip.OLDER_VERSION and offset not in crashed:
            # Still unconfirmed (a chunk only the lost record added may be missing), but
            # nothing stale: what it retracted was tombstoned again.
            assert sink <= set(ids(*current)), (records[: offset + 1], gone)
