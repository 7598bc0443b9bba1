"""States too large for one record (worker.wire.state_record, worker.state.writing): parts first,
the head once they are acknowledged, stale parts tombstoned after the head that replaced them;
whatever prefix of that a crash leaves, compacted or not, restores to a whole state the worker
wrote, and the decisions then leave the sink equal to chunking the document directly.

The real-broker twin is tests/broker/test_large_documents.py."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import msgspec
from aiokafka.errors import MessageSizeTooLargeError

from tests.support.fake_kafka import FakeProducer, HeldProducer
from tests.support.handlers import STATE_TOPIC, lifecycle_handler, record, states_of
from worker.handling.handler import DocumentHandler
from worker.state.sqlite_store import SqliteStateStore
from worker.state.unconfirmed import Unconfirmed
from worker.wire.codec import decode_as
from worker.wire.events import ChunkEvent, DocumentEvent
from worker.wire.state_record import DocumentState, split_key

# A record limit at which a state splits at 1,024 ids (part_bytes): documents of a few
# thousand sentences (chunk_size=20 tokens: about a sentence a chunk) take several parts.
SMALL_RECORDS = {"max_record_bytes": 65536}
Sent = list[tuple[str, bytes | None, bytes | None, int | None]]


def text(sentences: int, seed: int) -> str:
    rng = random.Random(seed)
    words = ["kafka", "state", "part", "head", "chunk", "log", "offset", "replay", "sink", "id"]
    out = []
    for n in range(sentences):
        body = " ".join(rng.choice(words) for _ in range(rng.randint(3, 7)))
        out.append(f"Sentence {n} says {body}.")
        if n % 7 == 6:
            out.append("\n\n")
    return " ".join(out)


def doc(body: str, version: int | None = None) -> bytes:
    return msgspec.msgpack.encode(DocumentEvent(id="d", text=body, version=version))


def sink_after(sent: Sent, sink: dict[str, str] | None = None) -> dict[str, str]:
    """A stock sink applying the chunk topic in order: upsert by key, delete on null."""
    held = dict(sink or {})
    for topic, key, value, _ in sent:
        if topic != "chunks":
            continue
        assert key is not None
        if value is None:
            held.pop(key.decode(), None)
        else:
            held[key.decode()] = decode_as(value, [], ChunkEvent).text
    return held


def changelog_of(sent: Sent) -> list[tuple[bytes, bytes | None]]:
    out = []
    for topic, key, value, partition in sent:
        if topic == STATE_TOPIC:
            assert key is not None
            assert partition == 1
            out.append((key, value))
    return out


async def direct(tmp: Path, body: str) -> dict[str, str]:
    """What the sink holds after the document alone goes through a fresh worker."""
    producer = FakeProducer()
    tmp.mkdir()  # noqa: ASYNC240 - a test's own directory
    handler = lifecycle_handler(producer, tmp, **SMALL_RECORDS)
    await handler.process(record(doc(body), offset=0, key=b"d"))
    return sink_after(producer.sent)


async def test_a_large_state_goes_out_as_parts_and_its_head_only_once_they_are_acked(
    tmp_path: Path,
) -> None:
    producer = HeldProducer()
    handler = lifecycle_handler(producer, tmp_path, **SMALL_RECORDS)
    task = asyncio.create_task(handler.process(record(doc(text(3000, 1)), offset=3, key=b"d")))
    # Chunked on a thread, then staged and handed over as far as it goes without acks.
    while len(changelog_of(producer.sent)) < 3 and not task.done():  # noqa: ASYNC110 - polls a fake
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    keys = [split_key(key) for key, _ in changelog_of(producer.sent)]
    assert len(keys) >= 3  # a state of ~3,000 ids in parts of 1,024
    assert all(part is not None for _, part in keys), "a head went out before its parts' acks"
    producer.release()
    while not task.done():
        producer.release()
        await asyncio.sleep(0)
    await task
    records = changelog_of(producer.sent)
    (head_key, head_value), parts = records[-1], records[:-1]
    assert head_key == b"d"
    assert head_value is not None
    remembered = states_of(handler).get(1, "d")
    assert remembered is not None
    assert len(remembered.ids) > 2048
    assert [split_key(k)[1] for k, _ in parts] == remembered.digests
    chunk_ids = [key.decode() for t, key, v, _ in producer.sent if t == "chunks" and key]
    assert remembered.ids == chunk_ids  # every chunk event's id, in index order


async def operations(tmp: Path) -> tuple[Sent, list[tuple[int, DocumentState | None]]]:
    """A document through the shapes a split state can take: created large, edited, the same
    record done again (its parts written again after its head), shrunk to one record, grown
    again, deleted (a large marker), and the marker expired. The records sent, and after each
    write the changelog's length and the state the worker then remembered."""
    producer = FakeProducer()
    tmp.mkdir()  # noqa: ASYNC240 - a test's own directory
    handler = lifecycle_handler(producer, tmp, **SMALL_RECORDS)
    states = states_of(handler)
    written: list[tuple[int, DocumentState | None]] = []
    steps: list[tuple[int, bytes | None]] = [
        (1, doc(text(2500, 1))),
        (2, doc(text(2600, 2))),
        (2, doc(text(2600, 2))),  # a replay of the record the state names: done again
        (3, doc(text(40, 3))),
        (4, doc(text(3300, 4))),
        (5, None),
    ]
    for offset, value in steps:
        await handler.process(record(value, offset=offset, key=b"d"))
        written.append((len(changelog_of(producer.sent)), states.get(1, "d")))
    await states.expire_markers({1: 6})
    written.append((len(changelog_of(producer.sent)), None))
    return producer.sent, written


def compacted(
    records: list[tuple[bytes, bytes | None]], rng: random.Random | None
) -> list[tuple[bytes, bytes | None]]:
    """The log after the cleaner: each record with a later one of its key may go (all of them
    without ``rng``, else each by chance, as a cleaner that has not reached every segment
    leaves them); survivors keep their order. Without ``rng`` tombstones go too (after
    delete.retention.ms)."""
    last = {key: i for i, (key, _) in enumerate(records)}
    kept: list[tuple[bytes, bytes | None]] = []
    for i, (key, value) in enumerate(records):
        superseded = last[key] != i
        if rng is None:
            if not superseded and value is not None:
                kept.append((key, value))
        elif not superseded or rng.random() < 0.5:
            kept.append((key, value))
    return kept


async def test_any_prefix_of_the_changelog_restores_a_whole_state_the_worker_wrote(
    tmp_path: Path,
) -> None:
    """A crash may stop the changelog after any record, and the cleaner may have compacted what
    landed, fully or in part: a restore then gives the document the last state whose head had
    landed, whole (its parts joined), never a mix and never a head missing a part."""
    sent, written = await operations(tmp_path / "run")
    records = changelog_of(sent)
    assert any(split_key(k)[1] is not None and v is None for k, v in records)  # stale parts
    assert len({k for k, _ in records}) > 10
    store = SqliteStateStore(tmp_path / "restore.sqlite")
    rng = random.Random(46)
    checked = 0
    for end in range(len(records) + 1):
        # The state of the write whose head landed last (none: the state before them all).
        heads = [i for i, (key, _) in enumerate(records[:end]) if split_key(key)[1] is None]
        expected = next(s for length, s in written if length > heads[-1]) if heads else None
        for variant in (records[:end], compacted(records[:end], None),
                        compacted(records[:end], rng), compacted(records[:end], rng)):  # fmt: skip
            store.drop_partition(1)
            store.apply(1, variant)
            assert store.get(1, "d") == expected, (end, variant is records)
            checked += 1
    assert checked == 4 * (len(records) + 1)


async def test_a_crash_between_the_parts_leaves_a_state_whose_replay_fixes_the_sink(
    tmp_path: Path,
) -> None:
    """Version 1 written whole; version 2 cut short by a crash anywhere in its write (its chunk
    events and tombstones in part or whole, its parts, its head, the tombstones of version 1's
    parts). The next owner restores what landed (states at or past the committed offset are
    unconfirmed) and the record is replayed, then a third version and a delete follow: the
    sink equals chunking each version directly, then holds nothing."""
    v1, v2, v3 = text(1400, 11), text(1500, 12), text(1300, 13)
    expected = {n: await direct(tmp_path / f"direct-{n}", t) for n, t in [(2, v2), (3, v3)]}
    first = FakeProducer()
    (tmp_path / "first").mkdir()
    handler = lifecycle_handler(first, tmp_path / "first", **SMALL_RECORDS)
    await handler.process(record(doc(v1), offset=1, key=b"d"))
    before = len(first.sent)
    await handler.process(record(doc(v2), offset=2, key=b"d"))
    v1_sent, v2_sent = first.sent[:before], first.sent[before:]
    v2_chunks = [r for r in v2_sent if r[0] == "chunks"]
    v2_changelog = [r for r in v2_sent if r[0] == STATE_TOPIC]
    head = max(i for i, r in enumerate(v2_changelog) if r[1] == b"d")
    assert head >= 2  # parts before it: version 2's state is split
    cuts = []
    for state_end in range(len(v2_changelog) + 1):
        # The head is staged only once everything before it was acked: with it, all the
        # chunk records landed; before it, any share of them.
        shares = [len(v2_chunks)] if state_end > head else [0, len(v2_chunks) // 2, len(v2_chunks)]
        cuts += [(chunk_end, state_end) for chunk_end in shares]
    for n, (chunk_end, state_end) in enumerate(cuts):
        landed = v1_sent + v2_chunks[:chunk_end] + v2_changelog[:state_end]
        sink = sink_after(landed)
        (tmp_path / f"next-{n}").mkdir()
        producer = FakeProducer()
        again = lifecycle_handler(producer, tmp_path / f"next-{n}", **SMALL_RECORDS)
        states = states_of(again)
        tracker = Unconfirmed(committed=2)  # version 1's offset was committed
        states.store.apply(1, changelog_of(landed), tracker.seen)
        states._unconfirmed[1] = tracker
        await again.process(record(doc(v2), offset=2, key=b"d"))
        sink = sink_after(producer.sent, sink)
        assert sink == expected[2], (chunk_end, state_end)
        producer.sent.clear()
        await again.process(record(doc(v3), offset=3, key=b"d"))
        assert sink_after(producer.sent, sink) == expected[3], (chunk_end, state_end)
        sink = sink_after(producer.sent, sink)
        producer.sent.clear()
        await again.process(record(None, offset=4, key=b"d"))
        assert sink_after(producer.sent, sink) == {}, (chunk_end, state_end)


async def test_a_refused_large_version_is_withdrawn_and_its_landed_parts_go_with_it(
    tmp_path: Path,
) -> None:
    """A batch of a split state's write refused as too large: the document is withdrawn before
    its dead letter (every chunk tombstoned, a delete marker), the parts that landed are
    tombstoned after the marker, and the next version creates it anew."""
    producer = FakeProducer(batch_capacity=4096)
    handler: DocumentHandler = lifecycle_handler(producer, tmp_path, **SMALL_RECORDS)
    await handler.process(record(doc(text(2400, 21)), offset=1, key=b"d"))
    sink = sink_after(producer.sent)
    producer.sent.clear()
    producer.fail_next = [None, MessageSizeTooLargeError()]
    await handler.process(record(doc(text(2500, 22)), offset=2, key=b"d"))
    sink = sink_after(producer.sent, sink)
    assert sink == {}
    marker = states_of(handler).get(1, "d")
    assert marker is not None
    assert marker.deleted
    records = changelog_of(producer.sent)
    live_parts = {k for k, v in records if split_key(k)[1] is not None and v is not None}
    dead_parts = {k for k, v in records if split_key(k)[1] is not None and v is None}
    named = {split_key(k)[1] for k in live_parts - dead_parts}
    assert named <= set(marker.digests), "a part of the refused version was left behind"
    producer.sent.clear()
    body = text(2000, 23)
    await handler.process(record(doc(body), offset=3, key=b"d"))
    assert sink_after(producer.sent, sink) == await direct(tmp_path / "direct", body)
