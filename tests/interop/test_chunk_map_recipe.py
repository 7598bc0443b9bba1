"""The consumer recipe of docs/consuming.md (recipes/chunk_map.py: confluent-kafka and the
`msgpack` library, nothing of ours) against the real broker and a real worker process.

After creates, edits, appends, truncations, deletes and re-sent old versions
(tests.support.lifecycle_changelog), read to the end of the chunk topic, the recipe's map holds
exactly the chunks of chunking each surviving document's last version directly (ids, texts and,
per document, their order), and nothing of deleted documents. Through a rebalance: a second
member joins (each member then holds exactly the documents of its own partitions, together all
of them) and leaves again (the first takes its partitions back and reads them from their
start). With the worker's exactly-once mode and a worker killed mid-stream, the recipe's
read_committed consumer applies each chunk event of each processed version once. And the page
shows the file the suite runs."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from confluent_kafka import Consumer, Message, TopicPartition

from recipes.chunk_map import ChunkMap, chunk_consumer, poll
from tests.support import kafka_io
from tests.support.lifecycle_changelog import PARAMS, Record, Truth, changelog, produce
from worker.config import Settings
from worker.pipeline import chunk_document_sync
from worker.wire.events import DocumentEvent
from worker.wire.records import chunk_ids

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "chunk_map.py"
PAGE = REPO / "docs" / "consuming.md"

# A document's chunks as (chunk id, text), in index order.
Chunks = list[tuple[str, str]]
Member = tuple[Consumer, ChunkMap]


def truth_of(records: list[Record]) -> Truth:
    """What the rules leave of ``records`` (for a prefix of the changelog)."""
    truth = Truth()
    for key, value in records:
        if value is None:
            truth.delete(key.decode())
            continue
        event = msgspec.msgpack.decode(value, type=DocumentEvent)
        assert not isinstance(event.version, str)  # the changelog's versions are integers
        truth.put(event.id, event.version, event.text)
    return truth


def expected(truth: Truth, settings: Settings) -> dict[str, Chunks]:
    """Per surviving document, chunking its last version directly with the worker's strategy."""
    built = kafka_io.build_as_worker(settings)
    out: dict[str, Chunks] = {}
    for doc_id, text in truth.texts.items():
        texts = [c.text for c in chunk_document_sync(built, text, "text/plain", None)]
        out[doc_id] = list(zip(chunk_ids(doc_id, built.fingerprint, texts), texts, strict=True))
    return out


def held(chunk_map: ChunkMap) -> dict[str, Chunks]:
    """What the recipe's map holds, per document through its per-document view; its flat map
    (keyed by the records' keys) must say the same."""
    per_document = {
        doc_id: [(event["chunk_id"], event["text"]) for event in chunk_map.document(doc_id)]
        for doc_id in chunk_map.documents
    }
    flat = {key: (event["doc_id"], event["text"]) for key, event in chunk_map.chunks.items()}
    assert flat == {
        chunk_id: (doc_id, text)
        for doc_id, chunks in per_document.items()
        for chunk_id, text in chunks
    }
    return per_document


def ends_of(bootstrap: str, topic: str) -> dict[int, int]:
    """The end offset of each partition of ``topic`` (once nothing more will be written)."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "chunk-map-probe"})
    try:
        partitions = probe.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: probe.get_watermark_offsets(TopicPartition(topic, p))[1] for p in partitions}
    finally:
        probe.close()


def assigned(member: Member) -> set[int]:
    return {tp.partition for tp in member[0].assignment()}


def shared_out(members: list[Member], partitions: int) -> bool:
    """Every partition has exactly one owner among ``members``."""
    owned = [p for member in members for p in assigned(member)]
    return sorted(owned) == list(range(partitions))


def caught_up(members: list[Member], ends: dict[int, int]) -> bool:
    """The members share every partition out and have read each to its end (a position, not a
    last offset: transaction markers take offsets no message has)."""
    if not shared_out(members, len(ends)):
        return False
    positions = [tp for consumer, _ in members for tp in consumer.position(consumer.assignment())]
    return all(ends[tp.partition] == 0 or tp.offset >= ends[tp.partition] for tp in positions)


def drive(members: list[Member], until: Callable[[], bool], timeout_s: float = 120) -> None:
    """Poll every member in turn (one thread: the rebalance callbacks run inside poll) until
    ``until()``."""
    deadline = time.monotonic() + timeout_s
    while not until():
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"members never got there: assignments {list(map(assigned, members))}"
            )
        for consumer, chunk_map in members:
            for _ in range(500):
                if not poll(consumer, chunk_map, timeout_s=0.05):
                    break


pytestmark = pytest.mark.kafka


def member(bootstrap: str, topic: str, group: str) -> Member:
    chunk_map = ChunkMap()  # the consumer's rebalance callbacks forget into this map
    return chunk_consumer(bootstrap, topic, group, chunk_map), chunk_map


async def read_to_end(bootstrap: str, settings: Settings, members: list[Member]) -> None:
    """Once the worker has committed the whole input, poll ``members`` to the chunk topic's end."""
    await kafka_io.wait_committed_to_end(
        bootstrap, settings.group_id, settings.input_topic, timeout_s=120
    )
    ends = await asyncio.to_thread(ends_of, bootstrap, settings.output_topic)
    await asyncio.to_thread(drive, members, lambda: caught_up(members, ends))


async def test_the_recipe_keeps_the_current_chunks_through_a_rebalance(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    records, final = changelog(320, documents=60, seed=46)
    assert any(value is None for _, value in records)  # deletes happen
    phases = [records[:160], records[160:240], records[240:]]
    settings = kafka_io.make_settings(
        kafka_bootstrap, topic_names, strategy="sentence", strategy_params=PARAMS
    )
    await kafka_io.create(settings, partitions=3)
    topic, group = settings.output_topic, f"chunk-map-{topic_names['group_id']}"
    worker = kafka_io.worker_process(settings, tmp_path / "worker.log")
    first = member(kafka_bootstrap, topic, group)
    running = [first]
    try:
        # One member: it holds every document.
        await produce(kafka_bootstrap, settings.input_topic, phases[0])
        await read_to_end(kafka_bootstrap, settings, [first])
        assert held(first[1]) == expected(truth_of(phases[0]), settings)

        # A second member joins: the partitions are shared out, each member holds exactly the
        # documents of its own partitions, and together they hold every document.
        second = member(kafka_bootstrap, topic, group)
        running.append(second)
        both = [first, second]
        await asyncio.to_thread(
            drive, both, lambda: bool(assigned(both[1])) and shared_out(both, 3)
        )
        await produce(kafka_bootstrap, settings.input_topic, phases[1])
        await read_to_end(kafka_bootstrap, settings, both)
        for one in both:
            assert assigned(one)
            assert set(one[1].partition_of.values()) <= assigned(one)
        assert set(first[1].documents).isdisjoint(second[1].documents)
        together = held(first[1]) | held(second[1])
        assert together == expected(truth_of(phases[0] + phases[1]), settings)

        # It leaves: the first member takes its partitions back and reads them from the start.
        running.remove(second)
        second[0].close()
        await produce(kafka_bootstrap, settings.input_topic, phases[2])
        await read_to_end(kafka_bootstrap, settings, [first])
        assert held(first[1]) == expected(final, settings)
        assert len(final.texts) > 20  # the comparison means something
    finally:
        for consumer, _ in running:
            consumer.close()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=90) == 0


def wait_for_open_transaction(bootstrap: str, topic: str, timeout_s: float = 120) -> None:
    """Until some partition of ``topic`` has records past its last stable offset: the end a
    read_uncommitted client is told beyond the one a read_committed client is told."""
    probes = [
        Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "isolation.level": level})
        for level in ("read_uncommitted", "read_committed")
    ]
    try:
        partitions = probes[0].list_topics(topic, timeout=10).topics[topic].partitions
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for p in partitions:
                high, stable = (
                    probe.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                    for probe in probes
                )
                if high > stable:
                    return
        raise TimeoutError(f"no transaction with records seen open on {topic}")
    finally:
        for probe in probes:
            probe.close()


class CountingMap(ChunkMap):
    """The recipe's map, counting each chunk event it applies by (input partition, input
    offset, chunk id): one processed version's event."""

    def __init__(self) -> None:
        super().__init__()
        self.applied: Counter[tuple[int, int, str]] = Counter()

    def apply(self, message: Message) -> None:
        value = message.value()
        if value is not None:
            event = msgspec.msgpack.decode(value)
            source = event["source"]
            self.applied[(source["partition"], source["offset"], event["chunk_id"])] += 1
        super().apply(message)


async def test_with_exactly_once_the_recipe_applies_each_event_once_through_a_kill(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    records, final = changelog(400, documents=80, seed=47)
    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        strategy="sentence",
        strategy_params=PARAMS,
        processing_guarantee="exactly-once",
        # Long transactions: a kill lands inside an open one.
        commit_interval_ms="1000",
        max_in_flight_documents="16",
    )
    await kafka_io.create(settings, partitions=3)
    workers = [kafka_io.worker_process(settings, tmp_path / "worker-0.log")]
    try:
        await produce(kafka_bootstrap, settings.input_topic, records)
        # SIGKILL while a transaction holds chunk events: the next worker aborts it and does
        # its documents again, so the topic holds aborted events beside their committed redo.
        await asyncio.to_thread(wait_for_open_transaction, kafka_bootstrap, settings.output_topic)
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait(timeout=30)
        workers.append(kafka_io.worker_process(settings, tmp_path / "worker-1.log"))
        chunk_map = CountingMap()
        consumer = chunk_consumer(
            kafka_bootstrap,
            settings.output_topic,
            f"chunk-map-{topic_names['group_id']}",
            chunk_map,
        )
        try:
            await read_to_end(kafka_bootstrap, settings, [(consumer, chunk_map)])
            # Before the close: a member that leaves forgets its partitions' documents.
            assert held(chunk_map) == expected(final, settings)
        finally:
            consumer.close()
    finally:
        workers[-1].send_signal(signal.SIGTERM)
        assert workers[-1].wait(timeout=90) == 0

    twice = {key: n for key, n in chunk_map.applied.items() if n > 1}
    assert twice == {}, "read_committed let an event of one version through twice"
    assert chunk_map.applied  # the count means something


def test_the_page_shows_the_recipe_the_suite_runs() -> None:
    source = RECIPE.read_text(encoding="utf-8")
    assert f"```python\n{source}```\n" in PAGE.read_text(encoding="utf-8")
