"""What the exactly-once tests read back and hold it to: the chunk topic as a ``read_committed``
consumer sees it, and what the input says it must hold, worked out without the worker.

The expectation is the lifecycle's rules applied to the input records in offset order
(tests.support.lifecycle_changelog.Truth's: last write wins by offset, except an older integer
version of a live document; a tombstone deletes a live document), with each surviving version
chunked directly by the strategy the worker builds. With ``unchanged_chunks=emit`` a version
that wins publishes one event per chunk, carrying its own input offset, and tombstones the
previous version's ids it no longer has; a delete tombstones every id of the live version.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

from tests.support import kafka_io
from tests.support.lifecycle_changelog import sink_contents
from worker.config import Settings
from worker.pipeline import chunk_document_sync
from worker.wire.codec import decode_as
from worker.wire.events import ChunkEvent, DocumentEvent
from worker.wire.records import chunk_ids

# (input partition, input offset, chunk id): one chunk event of one processed version.
EventKey = tuple[int, int, str]


@dataclass
class Output:
    events: Counter[EventKey]  # how many times each was seen
    tombstones: Counter[str]  # chunk id → null records seen


@dataclass
class Expected:
    events: set[EventKey]
    tombstones: Counter[str]


async def read_topic(bootstrap: str, topic: str, *, committed: bool) -> list[object]:
    """Every record of ``topic`` up to its end as the isolation level has it (for
    ``read_committed``: the last stable offset, so no transaction may be left open)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed" if committed else "read_uncommitted",
    )
    await consumer.start()
    try:
        partitions = [
            TopicPartition(topic, p) for p in await kafka_io.partitions_of(consumer, topic)
        ]
        consumer.assign(partitions)
        end = await consumer.end_offsets(partitions)
        await consumer.seek_to_beginning(*partitions)
        records: list[object] = []
        deadline = time.monotonic() + 120
        while any([await consumer.position(tp) < end[tp] for tp in partitions]):
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {topic} to its end")
            for batch in (await consumer.getmany(timeout_ms=1000)).values():
                records.extend(batch)
        return records
    finally:
        await consumer.stop()


async def chunk_output(bootstrap: str, topic: str, *, committed: bool = True) -> Output:
    events: Counter[EventKey] = Counter()
    tombstones: Counter[str] = Counter()
    for record in await read_topic(bootstrap, topic, committed=committed):
        key = record.key.decode()  # type: ignore[attr-defined]
        value = record.value  # type: ignore[attr-defined]
        if value is None:
            tombstones[key] += 1
            continue
        event = decode_as(value, list(record.headers), ChunkEvent)  # type: ignore[attr-defined]
        assert event.chunk_id == key
        events[(event.source.partition, event.source.offset, event.chunk_id)] += 1
    return Output(events, tombstones)


async def expected_output(settings: Settings) -> Expected:
    """The chunk events and tombstones the input topic's records call for, once each."""
    built = kafka_io.build_as_worker(settings)
    records = await kafka_io.read_all(settings.bootstrap_servers, settings.input_topic)
    records.sort(key=lambda r: (r.partition, r.offset))
    live: dict[str, tuple[object, list[str]]] = {}  # doc id → (version, chunk ids)
    events: set[EventKey] = set()
    tombstones: Counter[str] = Counter()
    for record in records:
        doc_id = record.key.decode()
        if record.value is None:
            if doc_id in live:
                tombstones.update(live.pop(doc_id)[1])
            continue
        doc = decode_as(record.value, list(record.headers), DocumentEvent)
        current = live.get(doc_id)
        older = (
            current is not None
            and isinstance(current[0], int)
            and isinstance(doc.version, int)
            and doc.version < current[0]
        )
        if older:
            continue  # an older integer version changes nothing
        texts = [c.text for c in chunk_document_sync(built, doc.text, "text/plain", None)]
        ids = chunk_ids(doc_id, built.fingerprint, texts)
        events.update((record.partition, record.offset, chunk_id) for chunk_id in ids)
        if current is not None:
            tombstones.update(set(current[1]) - set(ids))
        live[doc_id] = (doc.version, ids)
    return Expected(events, tombstones)


async def committed_sink(bootstrap: str, topic: str, db: Path) -> dict[str, str]:
    """The reference sink (upsert by key, delete on null) over the committed chunk topic."""
    return await sink_contents(bootstrap, topic, db, isolation_level="read_committed")


def duplicates(output: Output) -> dict[EventKey, int]:
    return {key: n for key, n in output.events.items() if n > 1}
