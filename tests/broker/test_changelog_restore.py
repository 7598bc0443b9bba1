"""Restoring the state changelog on the real broker (worker.state.changelog): every assigned
partition in one go — an empty one, one from the beginning with a tombstone, one from its checkpoint
— and the reader fetches nothing once the restore is done."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition

from tests.support import kafka_io
from worker.config import state_topic
from worker.kafka.clients import make_changelog_reader
from worker.state.changelog import CHECKPOINT_MAX_AGE_S, Changelog, learn_topic
from worker.state.sqlite_store import SqliteStateStore
from worker.wire.state_record import DocumentState, encode_state

pytestmark = pytest.mark.kafka


def state(offset: int) -> DocumentState:
    return DocumentState(offset, offset, bytes(range(offset % 200, offset % 200 + 16)))


async def test_all_partitions_restored_together_then_not_fetched(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    settings = kafka_io.make_settings(kafka_bootstrap, topic_names, document_lifecycle="true")
    await kafka_io.create(settings, 3)
    topic = state_topic(settings)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    reader = make_changelog_reader(settings)
    await reader.start()
    store = SqliteStateStore(tmp_path / "store.sqlite")
    try:

        async def write(partition: int, records: list[tuple[str, DocumentState | None]]) -> None:
            for doc_id, value in records:
                encoded = None if value is None else encode_state(value)
                await producer.send_and_wait(
                    topic, key=doc_id.encode(), value=encoded, partition=partition
                )

        # Partition 0: ten documents; 1: three, one of them deleted again; 2: nothing.
        await write(0, [(f"a{i}", state(i)) for i in range(10)])
        await write(1, [("b0", state(1)), ("b1", state(2)), ("b2", state(3)), ("b1", None)])
        changelog = Changelog(reader, topic, store)
        await learn_topic(reader, topic)
        first = await changelog.restore([0, 1, 2])
        assert [(r.partition, r.records, r.from_checkpoint, r.end) for r in first] == [
            (0, 10, False, 10),
            (1, 4, False, 4),
            (2, 0, False, 0),
        ]
        assert [store.count(p) for p in range(3)] == [10, 2, 0]
        assert store.get(0, "a7") == state(7)
        assert store.get(1, "b1") is None
        assert store.get(1, "b2") == state(3)

        # Handed over cleanly, then taken back after more was written: from the checkpoints,
        # only what is new is read.
        changelog.checkpoint({r.partition: r.end for r in first})
        await write(2, [("c0", state(40))])
        await write(0, [("a3", state(30)), ("a10", state(31))])
        again = await changelog.restore([0, 1, 2])
        assert [(r.partition, r.records, r.from_checkpoint) for r in again] == [
            (0, 2, True),
            (1, 0, True),
            (2, 1, True),
        ]
        assert [store.count(p) for p in range(3)] == [11, 2, 1]
        assert store.get(0, "a3") == state(30)
        assert store.get(2, "c0") == state(40)

        # Done restoring, the reader fetches nothing in the background: whatever is written
        # next stays unread until the next restore asks for it.
        tps = {TopicPartition(topic, p) for p in (0, 2)}
        assert reader.paused() == tps
        await write(0, [("a11", state(50))])
        assert await reader.getmany(timeout_ms=500) == {}
        assert store.get(0, "a11") is None

        # A checkpoint older than the bound is not trusted: compaction may have dropped a
        # delete marker and its tombstone meanwhile, leaving nothing in the log to remove the
        # document's old row. Here "ghost" stands for such a row: the changelog never names it.
        store.put(1, "ghost", state(60))
        for partition, end in (await changelog.end_offsets([0, 1, 2])).items():
            store.set_checkpoint(partition, end, written_at=time.time() - CHECKPOINT_MAX_AGE_S - 1)
        stale = await changelog.restore([0, 1, 2])
        assert [(r.partition, r.records, r.from_checkpoint) for r in stale] == [
            (0, 13, False),
            (1, 4, False),
            (2, 1, False),
        ]
        assert store.get(1, "ghost") is None
        assert [store.count(p) for p in range(3)] == [12, 2, 1]
    finally:
        store.close()
        await reader.stop()
        await producer.stop()
