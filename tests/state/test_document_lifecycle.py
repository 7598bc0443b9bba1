"""The lifecycle through DocumentHandler with an in-memory producer and a real state store:
what goes out, in which order, for versions, tombstones and replays. The real-broker twin is
tests/broker/test_lifecycle_worker.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest
from aiokafka.errors import MessageSizeTooLargeError

from tests.support.fake_kafka import FakeProducer, HeldProducer
from tests.support.handlers import STATE_TOPIC, lifecycle_handler, record, states_of
from worker.state import documents as state_module
from worker.wire.codec import decode_as
from worker.wire.events import ChunkEvent, DeadLetterEvent, DocumentEvent
from worker.wire.state_record import DocumentState, decode_state

V1 = "Alpha one here. Beta two there. Gamma three now."
V2 = "Alpha one here. Beta was changed. Gamma three now."


def doc(text: str, version: int | None = None) -> bytes:
    return msgspec.msgpack.encode(DocumentEvent(id="d", text=text, version=version))


def chunks_of(sent: list[Any]) -> list[tuple[str, str | None]]:
    """(key, text or None for a tombstone) of the chunk-topic records, in order."""
    out = []
    for topic, key, value, _ in sent:
        if topic == "chunks":
            text = None if value is None else decode_as(value, [], ChunkEvent).text
            out.append((key.decode(), text))
    return out


async def test_an_edit_publishes_the_new_chunks_then_retracts_the_old_then_writes_state(
    tmp_path: Path,
) -> None:
    producer = FakeProducer()
    handler = lifecycle_handler(producer, tmp_path)
    await handler.process(record(doc(V1, 1), offset=3, key=b"d"))
    first = dict(chunks_of(producer.sent))
    producer.sent.clear()
    await handler.process(record(doc(V2, 2), offset=4, key=b"d"))
    sent = list(producer.sent)
    out = chunks_of(sent)
    new_texts = [t for _, t in out if t is not None]
    tombstones = [k for k, t in out if t is None]
    assert "Beta was changed." in new_texts
    # Unchanged chunks keep their ids (emitted again by default); the changed one is retracted.
    kept = {k for k, t in out if t is not None} & set(first)
    assert {first[k] for k in kept} == {"Alpha one here.", "Gamma three now."}
    assert [first[k] for k in tombstones] == ["Beta two there."]
    # One state record beside the chunk records (staged with them, awaited together), to the
    # input record's own partition of the changelog.
    states = [r for r in sent if r[0] == STATE_TOPIC]
    assert {topic for topic, *_ in sent} == {"chunks", STATE_TOPIC}
    assert len(states) == 1
    (_, key, value, partition) = states[0]
    assert key == b"d"
    assert partition == 1
    assert value is not None
    state = decode_state(value)
    assert state.offset == 4
    assert [first[k] for k in state.retracted_ids] == ["Beta two there."]


async def test_skip_mode_publishes_only_new_ids(tmp_path: Path) -> None:
    producer = FakeProducer()
    handler = lifecycle_handler(producer, tmp_path, unchanged_chunks="skip")
    await handler.process(record(doc(V1), offset=1, key=b"d"))
    producer.sent.clear()
    await handler.process(record(doc(V2), offset=2, key=b"d"))
    texts = [t for _, t in chunks_of(producer.sent) if t is not None]
    assert texts == ["Beta was changed."]


async def test_tombstones_replays_and_old_versions(tmp_path: Path) -> None:
    producer = FakeProducer()
    handler = lifecycle_handler(producer, tmp_path)
    await handler.process(record(doc(V1, 5), offset=10, key=b"d"))
    ids = [k for k, _ in chunks_of(producer.sent)]
    producer.sent.clear()
    await handler.process(record(doc(V2, 4), offset=11, key=b"d"))  # an older version
    await handler.process(record(doc(V2, 9), offset=9, key=b"d"))  # a replay (offset before)
    assert producer.sent == []
    await handler.process(record(None, offset=12, key=b"d"))  # the tombstone
    out = chunks_of(producer.sent)
    assert out == [(k, None) for k in ids]
    producer.sent.clear()
    await handler.process(record(None, offset=13, key=b"d"))  # deleted already: a no-op
    await handler.process(record(None, offset=14, key=b"never"))  # unknown: a no-op
    assert producer.sent == []


async def test_unkeyed_tombstones_and_mismatched_keys_are_dead_letters(tmp_path: Path) -> None:
    producer = FakeProducer()
    handler = lifecycle_handler(producer, tmp_path)
    await handler.process(record(None, key=None))
    await handler.process(record(doc(V1), key=b"not-d"))
    kinds = [decode_as(v, [], DeadLetterEvent).error_kind for t, _, v, _ in producer.sent]
    assert kinds == ["unkeyed_tombstone", "key_mismatch"]


async def test_the_record_at_the_states_offset_is_done_again_in_full(tmp_path: Path) -> None:
    """Its state reached the changelog, maybe not all of its events (they go out together): a
    replay of that very record publishes every chunk and every tombstone of it again."""
    producer = FakeProducer()
    handler = lifecycle_handler(producer, tmp_path, unchanged_chunks="skip")
    await handler.process(record(doc(V1), offset=1, key=b"d"))
    await handler.process(record(doc(V2), offset=2, key=b"d"))
    edit = chunks_of(producer.sent)[-2:]  # skip mode: the changed chunk, then its tombstone
    written = [v for t, _, v, _ in producer.sent if t == STATE_TOPIC][-1]
    producer.sent.clear()
    await handler.process(record(doc(V2), offset=2, key=b"d"))  # the crash's replay
    assert [v for t, _, v, _ in producer.sent if t == STATE_TOPIC] == [written]  # the same
    again = chunks_of(producer.sent)
    assert [t for _, t in again if t is not None] == ["Alpha one here.", "Beta was changed.",
                                                      "Gamma three now."]  # fmt: skip
    assert [(k, t) for k, t in again if t is None] == [edit[1]]
    producer.sent.clear()
    await handler.process(record(doc(V1), offset=1, key=b"d"))  # before it: a replay
    assert producer.sent == []


def sink_after(sent: list[Any], sink: dict[str, str] | None = None) -> dict[str, str]:
    """A stock sink applying the chunk topic in order: upsert by key, delete on null."""
    held = dict(sink or {})
    for key, text in chunks_of(sent):
        if text is None:
            held.pop(key, None)
        else:
            held[key] = text
    return held


async def test_a_version_refused_for_size_is_withdrawn_then_the_next_one_starts_afresh(
    tmp_path: Path,
) -> None:
    """Some of a refused version's records may have landed (its state, its tombstones, some
    chunk batches): every chunk the sink may hold is tombstoned and a delete marker written
    before the dead letter, so the sink and the state agree; the next version emits all."""
    producer = FakeProducer(batch_capacity=1)  # one record per batch: a partial landing
    handler = lifecycle_handler(producer, tmp_path, unchanged_chunks="skip")
    await handler.process(record(doc(V1), offset=1, key=b"d"))
    sink = sink_after(producer.sent)
    assert sorted(sink.values()) == ["Alpha one here.", "Beta two there.", "Gamma three now."]
    producer.sent.clear()
    # The second chunk batch of the new version is refused; the first and the state land.
    producer.fail_next = [None, MessageSizeTooLargeError()]
    await handler.process(record(doc(V2), offset=2, key=b"d"))
    sink = sink_after(producer.sent, sink)
    assert sink == {}, "a mix of two versions stayed in the sink"
    states = [decode_state(v) for t, _, v, _ in producer.sent if t == STATE_TOPIC if v]
    assert states[-1].deleted
    assert states[-1].offset == 2
    dlq = handler.settings.dlq_topic
    dead = [decode_as(v, [], DeadLetterEvent) for t, _, v, _ in producer.sent if t == dlq]
    assert [d.error_kind for d in dead] == ["output_record_too_large"]
    remembered = states_of(handler).get(1, "d")
    assert remembered is not None
    assert remembered.deleted
    # The next version creates the document anew: every chunk, even in skip mode.
    producer.sent.clear()
    await handler.process(record(doc(V1), offset=3, key=b"d"))
    sink = sink_after(producer.sent, sink)
    assert sorted(sink.values()) == ["Alpha one here.", "Beta two there.", "Gamma three now."]


async def test_a_withdrawal_cut_short_by_a_crash_is_finished_by_the_replay(
    tmp_path: Path,
) -> None:
    """Killed after the withdrawal's delete marker landed and before its tombstones did: the
    next owner restores the marker and replays the record (accepted this time). The sink must
    end with that version alone, the old version's chunks tombstoned."""
    for mode in ("emit", "skip"):
        (tmp_path / f"{mode}-a").mkdir()
        (tmp_path / f"{mode}-b").mkdir()
        producer = FakeProducer(batch_capacity=1)
        handler = lifecycle_handler(producer, tmp_path / f"{mode}-a", unchanged_chunks=mode)
        await handler.process(record(doc(V1), offset=1, key=b"d"))
        sink = sink_after(producer.sent)
        producer.sent.clear()
        producer.fail_next = [None, MessageSizeTooLargeError()]
        await handler.process(record(doc(V2), offset=2, key=b"d"))
        states = [(i, decode_state(v)) for i, (t, _, v, _) in enumerate(producer.sent)
                  if t == STATE_TOPIC and v is not None]  # fmt: skip
        first_state, marker = states[0][0], states[-1][1]
        assert marker.deleted
        # What landed: the first attempt's chunk events up to its state record, and the
        # marker; no tombstone, neither the first attempt's nor the withdrawal's.
        landed = [r for r in producer.sent[: first_state + 1] if r[2] is not None]
        sink = sink_after(landed, sink)
        assert "Beta two there." in sink.values()
        replayer = FakeProducer()
        again = lifecycle_handler(replayer, tmp_path / f"{mode}-b", unchanged_chunks=mode)
        states_of(again).store.put(1, "d", marker)  # restored from the changelog
        await again.process(record(doc(V2), offset=2, key=b"d"))
        sink = sink_after(replayer.sent, sink)
        assert sorted(sink.values()) == ["Alpha one here.", "Beta was changed.",
                                         "Gamma three now."], mode  # fmt: skip


async def test_a_replay_that_becomes_a_dead_letter_withdraws_the_document(
    tmp_path: Path,
) -> None:
    """Killed after a version's state landed and before its events did; the replay of that
    record is dead-lettered this time (here: the chunk cap was lowered at the restart). Its
    state holds the only record of the tombstones it was to send: the document is withdrawn
    before the dead letter, so the next version leaves exactly itself in the sink."""
    for mode in ("emit", "skip"):
        (tmp_path / f"{mode}-a").mkdir()
        (tmp_path / f"{mode}-b").mkdir()
        producer = FakeProducer()
        handler = lifecycle_handler(producer, tmp_path / f"{mode}-a", unchanged_chunks=mode)
        await handler.process(record(doc(V1), offset=1, key=b"d"))
        sink = sink_after(producer.sent)
        producer.sent.clear()
        await handler.process(record(doc(V2), offset=2, key=b"d"))
        written_value = [v for t, _, v, _ in producer.sent if t == STATE_TOPIC][-1]
        assert written_value is not None
        written = decode_state(written_value)
        replayer = FakeProducer()
        again = lifecycle_handler(
            replayer, tmp_path / f"{mode}-b", unchanged_chunks=mode, max_chunks_per_document=2
        )
        states_of(again).store.put(1, "d", written)  # restored; none of its events landed
        await again.process(record(doc(V2), offset=2, key=b"d"))
        dlq = again.settings.dlq_topic
        dead = [decode_as(v, [], DeadLetterEvent) for t, _, v, _ in replayer.sent if t == dlq]
        assert [d.error_kind for d in dead] == ["too_many_chunks"]
        await again.process(record(doc("Alpha one here. Gamma three now."), offset=3, key=b"d"))
        sink = sink_after(replayer.sent, sink)
        assert sorted(sink.values()) == ["Alpha one here.", "Gamma three now."], mode


async def test_a_hand_over_with_abandoned_documents_waits_for_their_state_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A state record staged by a document abandoned at the drain deadline may still land; it
    must not land after the next owner's newer state of that document (it would win
    compaction), so releasing an unclean partition waits for what was staged."""
    monkeypatch.setattr(state_module, "LATE_STATE_WAIT_S", 60.0)  # the ack decides, not time
    producer = HeldProducer()
    handler = lifecycle_handler(producer, tmp_path)
    states = states_of(handler)
    staged, _ = states.stage(1, "d", DocumentState(3, None, b""))
    await asyncio.sleep(0.01)  # handed to the client, not acknowledged
    await states.release({1}, clean={1})  # clean: nothing of it can be on its way
    assert not any(f.done() for f in staged)
    asyncio.get_running_loop().call_later(0.05, producer.release)
    await states.release({1}, clean=set())
    assert all(f.done() for f in staged)
