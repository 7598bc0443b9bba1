"""Which restored states a previous owner may not have finished (worker.state.unconfirmed), and
what the document states do with them (worker.state.documents): no checkpoint while any is left."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiokafka import TopicPartition

from tests.support.fake_kafka import FakeProducer, HeldProducer
from tests.support.handlers import STATE_TOPIC, lifecycle_handler, states_of
from worker.observability.metrics import Metrics
from worker.state import unconfirmed
from worker.state.changelog import Changelog
from worker.state.documents import DocumentStates
from worker.state.sqlite_store import SqliteStateStore
from worker.state.unconfirmed import Unconfirmed
from worker.wire.state_record import DocumentState, encode_state, ids_to_bytes


def state(offset: int) -> DocumentState:
    return DocumentState(offset, None, b"\x01" * 16)


def test_states_at_or_past_the_committed_offset_are_unconfirmed_until_settled() -> None:
    tracker = Unconfirmed(committed=10)
    tracker.seen("early", state(9))
    tracker.seen("at", state(10))
    tracker.seen("late", state(12))
    tracker.seen("gone", state(11))
    tracker.seen("gone", None)  # a changelog tombstone: the marker expired
    assert not tracker.holds("early", state(9))
    assert tracker.holds("at", state(10))
    assert tracker.holds("late", state(12))
    assert not tracker.holds("gone", state(11))
    assert tracker.outstanding
    tracker.settled("at")
    assert not tracker.holds("at", state(10))
    tracker.settled("late")
    assert not tracker.outstanding


def test_nothing_committed_makes_every_restored_state_unconfirmed() -> None:
    tracker = Unconfirmed(committed=None)
    tracker.seen("d", state(0))
    assert tracker.holds("d", state(0))
    assert not Unconfirmed(committed=None).outstanding


def test_past_the_cap_the_offset_range_stands_for_the_ids(monkeypatch: Any) -> None:
    monkeypatch.setattr(unconfirmed, "MAX_TRACKED", 3)
    tracker = Unconfirmed(committed=100)
    for n in range(5):
        tracker.seen(f"d{n}", state(100 + n))
    # Conservative: every state in [committed, highest read] counts, settled or not.
    tracker.settled("d0")
    assert tracker.holds("d0", state(100))
    assert tracker.holds("other", state(104))
    assert not tracker.holds("other", state(99))
    assert not tracker.holds("other", state(105))
    assert tracker.outstanding


class NoPublisher:
    def unsettled(self, *_: Any) -> set[Any]:
        return set()

    def acknowledged(self, *_: Any) -> int | None:
        return None


async def test_a_partition_with_unconfirmed_states_is_not_checkpointed(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "state.sqlite")
    changelog = Changelog(None, "state", store)
    states = DocumentStates(store, NoPublisher(), changelog, Metrics())  # type: ignore[arg-type]
    tracker = Unconfirmed(committed=5)
    tracker.seen("d", state(6))
    # What a restore of partitions 0 and 1 to the changelog's offset 7 would have learned.
    states._restored_to.update({0: 7, 1: 7})
    states._unconfirmed[0] = tracker
    states._unconfirmed[1] = Unconfirmed(committed=5)
    assert states.unconfirmed(0, "d", state(6))
    assert not states.unconfirmed(1, "d", state(6))
    assert not states.unconfirmed(0, "d", None)
    await states.release({0, 1}, clean={0, 1})
    assert store.checkpoint(0) is None  # the next owner must read the state again
    assert store.checkpoint(1) == 7
    # Writing the document's state settles it: the partition may be checkpointed again.
    tracker = Unconfirmed(committed=5)
    tracker.seen("d", state(6))
    states._unconfirmed[0] = tracker
    states._restored_to[0] = 7
    states.applied(0, "d", state(8), state(6), encode_state(state(8)))
    assert not states.unconfirmed(0, "d", state(8))
    await states.release({0}, clean={0})
    assert store.checkpoint(0) == 7
    store.close()


async def test_an_unconfirmed_marker_sends_its_tombstones_again_before_it_expires(
    tmp_path: Path,
) -> None:
    """A delete cut short by a crash whose input tombstone then left the topic (compaction
    drops one ``delete.retention.ms`` after cleaning it, with nothing after it): no record of
    the document comes again. The marker's tombstones go out again before the marker does."""
    producer = FakeProducer()
    handler = lifecycle_handler(producer, tmp_path)
    states = states_of(handler)
    gone = ["a" * 32, "b" * 32]
    marker = DocumentState(5, None, b"", deleted=True, retracted=ids_to_bytes(gone))
    kept = DocumentState(6, None, b"", deleted=True, retracted=ids_to_bytes(["c" * 32]))
    # What restoring partition 1 (the group had committed offset 5) would have left.
    states.store.put(1, "d", marker)
    states.store.put(1, "e", kept)
    states._markers[1] = {"d": 5, "e": 6}
    tracker = Unconfirmed(committed=5)
    tracker.seen("d", marker)
    tracker.seen("e", kept)
    states._unconfirmed[1] = tracker
    await states.expire_markers({1: 6})  # the commits passed offset 5 only
    sent = [(topic, key, value) for topic, key, value, _ in producer.sent]
    assert sent == [
        ("chunks", gone[0].encode(), None),
        ("chunks", gone[1].encode(), None),
        (STATE_TOPIC, b"d", None),
    ]
    assert states.store.get(1, "d") is None
    assert not tracker.holds("d", marker)
    assert tracker.holds("e", kept)
    # A confirmed marker just goes.
    producer.sent.clear()
    tracker.settled("e")
    await states.expire_markers({1: 7})
    assert [(topic, key, value) for topic, key, value, _ in producer.sent] == [
        (STATE_TOPIC, b"e", None)
    ]


async def test_an_unconfirmed_marker_sends_the_documents_topic_null_again(
    tmp_path: Path,
) -> None:
    """The same, for a sink that deletes by document: the documents topic's tombstone of the
    cut-short delete may not have landed either, and nothing else would send it."""
    producer = FakeProducer()
    handler = lifecycle_handler(producer, tmp_path, documents_topic="chunk-documents")
    states = states_of(handler)
    marker = DocumentState(5, None, b"", deleted=True)  # a document that had no chunk
    states.store.put(1, "d", marker)
    states._markers[1] = {"d": 5}
    tracker = Unconfirmed(committed=5)
    tracker.seen("d", marker)
    states._unconfirmed[1] = tracker
    await states.expire_markers({1: 6})
    sent = [(topic, key, value) for topic, key, value, _ in producer.sent]
    assert sent == [("chunk-documents", b"d", None), (STATE_TOPIC, b"d", None)]


def test_the_states_whose_record_is_below_the_log_start_are_the_lost_ones() -> None:
    tracker = Unconfirmed(committed=10)
    assert tracker.lost(50) is None  # nothing unconfirmed read
    tracker.seen("a", state(10))
    tracker.seen("b", state(14))
    assert tracker.lost(10) is None  # every record from the committed offset on is still there
    assert tracker.lost(12) == (10, 12)
    assert tracker.lost(99) == (10, 15)  # up to the highest unconfirmed offset read
    tracker.settled("a")
    tracker.settled("b")
    assert tracker.lost(99) is None


async def test_unconfirmed_states_below_the_log_start_send_their_tombstones_again(
    tmp_path: Path,
) -> None:
    """A crash cut a version's records short, then time retention took its input record with
    nothing of the document after it: on assignment, the states below the input's log start
    send what they retracted again. Confirmed states, states still above the log start (their
    record will be done again) and markers (expire_markers has them) send nothing here."""
    producer = FakeProducer()
    handler = lifecycle_handler(producer, tmp_path)
    states = states_of(handler)
    retracted = ["a" * 32, "b" * 32]
    lost = DocumentState(6, 2, b"\x01" * 16, retracted=ids_to_bytes(retracted))
    above = DocumentState(9, 2, b"\x02" * 16, retracted=ids_to_bytes(["c" * 32]))
    confirmed = DocumentState(7, 2, b"\x03" * 16, retracted=ids_to_bytes(["d" * 32]))
    marker = DocumentState(8, None, b"", deleted=True, retracted=ids_to_bytes(["e" * 32]))
    tracker = Unconfirmed(committed=5)
    for doc_id, value in [("lost", lost), ("above", above), ("ok", confirmed), ("m", marker)]:
        states.store.put(1, doc_id, value)
        tracker.seen(doc_id, value)
    tracker.settled("ok")
    states._unconfirmed[1] = tracker
    asked: list[list[TopicPartition]] = []

    async def log_starts(tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        asked.append(tps)
        return {tp: 9 for tp in tps}

    p0, p1 = TopicPartition("documents", 0), TopicPartition("documents", 1)
    await states.resend_lost_records([p0, p1], log_starts)
    assert asked == [[p1]]  # partition 0 has no unconfirmed state: Kafka is not asked
    sent = [(topic, key, value) for topic, key, value, _ in producer.sent]
    assert sent == [
        ("chunks", retracted[0].encode(), None),
        ("chunks", retracted[1].encode(), None),
    ]
    assert tracker.holds("lost", lost)  # still unconfirmed: a later version redoes it all
    assert states._metrics.chunks_retracted._value.get() == 2
    producer.sent.clear()
    assert await states.resend_lost(1, log_start=5) == 0  # nothing taken by retention
    assert producer.sent == []


async def test_a_document_written_while_its_marker_expires_keeps_its_new_state(
    tmp_path: Path,
) -> None:
    """While an unconfirmed marker's tombstones go out again (an await), the document is
    created again: its new state is staged, which takes the marker out of the map. The marker's
    changelog tombstone must not follow, or it lands after the new state and erases it."""
    producer = HeldProducer()
    handler = lifecycle_handler(producer, tmp_path)
    states = states_of(handler)
    marker = DocumentState(5, None, b"", deleted=True, retracted=ids_to_bytes(["a" * 32]))
    states.store.put(1, "d", marker)
    states._markers[1] = {"d": 5}
    tracker = Unconfirmed(committed=5)
    tracker.seen("d", marker)
    states._unconfirmed[1] = tracker
    expiring = asyncio.create_task(states.expire_markers({1: 6}))
    await asyncio.sleep(0.05)  # the marker's chunk tombstones sent again, not acknowledged yet
    states.stage(1, "d", DocumentState(7, None, ids_to_bytes(["b" * 32])))  # created again
    producer.release()
    await asyncio.sleep(0.05)
    producer.release()
    await asyncio.wait_for(expiring, 5)
    state_records = [(key, value) for topic, key, value, _ in producer.sent if topic == STATE_TOPIC]
    assert state_records[-1][0] == b"d"
    assert state_records[-1][1] is not None, "the marker's tombstone came after the new state"
