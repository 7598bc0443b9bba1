"""The full worker on the real broker: metrics and health endpoints, backpressure under a
flood with slow inference, and chunk embeddings from the real ONNX model."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.support import kafka_io
from tests.support.fake_kafka import SlowHashBackend
from tests.support.generated_docs import check_complete, make_docs
from tests.support.network import free_port, http_get, listening, scrape, total
from worker.app import State, Worker
from worker.chunking.rules import adaptive
from worker.chunking.types import Chunk, ContentType
from worker.wire.events import ChunkEvent, DocumentEvent, StrategyOverride

pytestmark = pytest.mark.kafka
REPO = Path(__file__).resolve().parents[2]


async def test_metrics_health_and_readiness(
    kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    port = free_port()
    settings = kafka_io.make_settings(
        kafka_bootstrap, topic_names, metrics_port=port, allowed_strategies="sentence"
    )
    await kafka_io.create(settings)
    docs = make_docs(30, seed=21)
    poison: tuple[bytes, bytes, list[tuple[str, bytes]]] = (b"bad", b"\x00garbage", [])
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, [*kafka_io.encode_documents(docs), poison]
    )
    worker = Worker(settings)
    assert worker.readiness()[0] is False
    task = asyncio.create_task(worker.run())
    try:
        # Ready only once running with the group joined.
        for _ in range(300):
            if await listening(port) and (await http_get(port, "/readyz"))[0] == 200:
                break
            await asyncio.sleep(0.1)
        status, body = await http_get(port, "/readyz")
        assert status == 200, body
        assert json.loads(body)["group_joined"] is True
        assert (await http_get(port, "/healthz"))[0] == 200
        assert (await http_get(port, "/nope"))[0] == 404
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic
        )
        await asyncio.sleep(1.5)  # one sampling period for the level gauges
        m = await scrape(port)
    finally:
        worker.request_stop()
        # While draining, readiness is withdrawn before the process exits.
        states = []
        while not task.done():
            states.append(worker.state)
            if worker.state is State.DRAINING:
                assert worker.readiness()[0] is False
            await asyncio.sleep(0.01)
        assert await task == 0

    assert total(m, "chunkstream_documents_consumed_total") == 31
    assert total(m, "chunkstream_documents_completed_total") == 30
    assert m["chunkstream_documents_dead_lettered_total"] == {(("reason", "undecodable"),): 1.0}
    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    assert total(m, "chunkstream_chunks_produced_total") == len(events)
    assert total(m, "chunkstream_input_bytes_total") > sum(len(d.text) for d in docs)
    assert total(m, "chunkstream_output_bytes_total") > sum(len(e.text) for e in events)
    assert m["chunkstream_document_processing_seconds_count"][(("strategy", "sentence"),)] == 30
    assert total(m, "chunkstream_end_to_end_lag_seconds_count") == 30
    assert total(m, "chunkstream_commit_latency_seconds_count") >= 1
    assert total(m, "chunkstream_last_commit_timestamp_seconds") > 1.7e9
    assert total(m, "chunkstream_rebalances_total") >= 1
    assert total(m, "chunkstream_event_loop_lag_seconds_count") > 10
    assert total(m, "chunkstream_assigned_partitions") == 3
    assert set(m["chunkstream_consumer_lag_records"]) == {
        (("partition", str(p)),) for p in range(3)
    }
    assert all(v == 0 for v in m["chunkstream_consumer_lag_records"].values())
    assert total(m, "chunkstream_in_flight_documents") == 0
    assert m["chunkstream_build_info"]
    assert total(m, "chunkstream_ready") == 1


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def test_flood_with_slow_inference_pauses_stays_bounded_and_completes(
    kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    in_flight_cap = 2 * 1024 * 1024
    doc_bytes = 160 * 1024
    port = free_port()
    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        metrics_port=port,
        strategy_params="chunk_size=4000",
        include_embeddings="true",
        max_in_flight_bytes=in_flight_cap,
        max_in_flight_documents=64,
        max_document_bytes=doc_bytes + 4096,
        max_queued_tokens=4096,
        max_batch_size=32,
    )
    await kafka_io.create(settings)
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "lazy",
        "dogs",
        "while",
        "brokers",
        "replicate",
        "logs",
    ]
    docs = []
    for i in range(300):
        sentences = [
            " ".join(words[(i + j + k) % len(words)] for k in range(12)).capitalize() + "."
            for j in range(doc_bytes // 80)
        ]
        docs.append(DocumentEvent(id=f"flood-{i}", text=" ".join(sentences)[:doc_bytes]))
    flood_bytes = sum(len(d.text) for d in docs)
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(docs)
    )

    backend = SlowHashBackend(delay_s=0.02)
    worker = Worker(settings, backend=backend)
    baseline = rss_bytes()
    peak = baseline
    paused_seen = 0.0
    in_flight_seen = 0.0
    task = asyncio.create_task(worker.run())
    done = asyncio.ensure_future(
        kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic, timeout_s=300
        )
    )
    try:
        while not done.done():
            peak = max(peak, rss_bytes())
            if await listening(port):
                m = await scrape(port)
                paused_seen = max(paused_seen, total(m, "chunkstream_paused_partitions"))
                in_flight_seen = max(in_flight_seen, total(m, "chunkstream_in_flight_bytes"))
            await asyncio.sleep(0.2)
        await done
        m = await scrape(port)
    finally:
        worker.request_stop()
        assert await task == 0

    # Backpressure happened and was visible; the member never left the group meanwhile.
    assert paused_seen >= 1
    assert total(m, "chunkstream_backpressure_pauses_total") >= 1
    assert total(m, "chunkstream_rebalances_total") == 1
    # In-flight input never exceeded the cap by more than one fetch of records.
    assert in_flight_seen <= in_flight_cap + 64 * (doc_bytes + 1024)
    # Memory: decoded text, chunks and encoded events are each about the size of the input
    # in flight, the fetcher buffers up to one partition fetch (1 MiB) per partition, and
    # allocator slack; 3 x (in-flight cap + fetch buffers) + 64 MiB is far below what taking
    # the whole flood in at once would cost (it is about 3 x the flood size).
    bound = 3 * (in_flight_cap + 3 * 1024 * 1024) + 64 * 1024 * 1024
    assert peak - baseline < bound, f"RSS grew {(peak - baseline) >> 20} MiB"
    assert 3 * flood_bytes > bound
    assert backend.batches > 0
    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    check_complete(docs, events)
    assert all(e.embedding is not None and len(e.embedding) == 16 * 4 for e in events)


async def test_backpressure_pauses_do_not_fetch_the_input_again(
    kafka_bootstrap: str, topic_names: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """aiokafka drops what it has buffered for a paused partition and fetches it again after
    the resume; the loop takes it before pausing (worker.consuming.prefetch). With a window of 8
    documents
    and fetch responses of a megabyte, every pause threw most of a response away: the
    worker read its input many times over (281 MB for 40 MB in the peer bench)."""
    port = free_port()
    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        metrics_port=port,
        strategy="sentence",
        strategy_params="chunk_size=1000,tokenizer=character",
        document_lifecycle="false",
        max_in_flight_documents=8,
    )
    await kafka_io.create(settings, partitions=1)
    docs = [
        DocumentEvent(id=f"fetched-once-{i}", text=f"Sentence {i} of a document read once. " * 130)
        for i in range(400)
    ]
    records = kafka_io.encode_documents(docs)
    input_bytes = sum(len(value or b"") for _, value, _ in records)
    await kafka_io.produce_raw(kafka_bootstrap, settings.input_topic, records)
    # Every Kafka response this process receives, counted where asyncio hands it over (the
    # client reads each one with readexactly): the broker's side of the story, not ours.
    received = 0
    readexactly = asyncio.StreamReader.readexactly

    async def counted(reader: asyncio.StreamReader, n: int) -> bytes:
        nonlocal received
        data = await readexactly(reader, n)
        received += len(data)
        return data

    monkeypatch.setattr(asyncio.StreamReader, "readexactly", counted)
    worker = Worker(settings)
    task = asyncio.create_task(worker.run())
    try:
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic, timeout_s=180
        )
        m = await scrape(port)
    finally:
        worker.request_stop()
        assert await task == 0
    assert total(m, "chunkstream_backpressure_pauses_total") >= 10  # it paused, often
    assert received < 2 * input_bytes, f"{received:,} bytes received for {input_bytes:,} of input"
    check_complete(docs, await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic))


@pytest.fixture(scope="module")
def real_model_dir() -> Path:
    from worker.model_making.build import ensure_model
    from worker.model_making.source import default_source_dir

    target = REPO / ".cache" / "models" / "all-MiniLM-L6-v2"
    ensure_model(default_source_dir(), target, int8=True)
    return target


async def test_chunk_embeddings_from_the_real_model(
    kafka_bootstrap: str, topic_names: dict[str, str], real_model_dir: Path
) -> None:
    from worker.models.onnx_embedder import OnnxEmbedder

    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        include_embeddings="true",
        model_dir=str(real_model_dir),
        strategy_params="chunk_size=200",
    )
    await kafka_io.create(settings, partitions=1)
    docs = make_docs(8, seed=33)
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(docs)
    )
    done = asyncio.ensure_future(
        kafka_io.wait_committed_to_end(kafka_bootstrap, settings.group_id, settings.input_topic)
    )
    worker = Worker(settings)
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(done, 120)
    finally:
        worker.request_stop()
        assert await task == 0
    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    check_complete(docs, events)
    embedder = OnnxEmbedder.load(real_model_dir)
    expected = embedder.embed([e.text for e in events])
    got = np.stack([np.frombuffer(e.embedding or b"", dtype="<f4") for e in events])
    cosines = np.sum(got * expected, axis=1)
    assert got.shape == expected.shape
    assert float(cosines.min()) >= 0.9999


async def test_large_documents_do_not_block_the_event_loop(
    kafka_bootstrap: str, topic_names: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large documents on the real stack are chunked off the event loop, and the loop keeps
    running meanwhile — asserted without reading a clock, so the verdict does not depend on
    how long chunking takes on this machine.

    The real ``adaptive`` strategy is wrapped: before chunking, the wrapper schedules a
    callback on the worker's event loop and waits for it to run. On a worker thread that
    happens at once; on the loop's own thread it never could (the loop is busy with us), the
    wait times out and the test fails. (Without the offload the heartbeats of a slow strategy
    would stall just the same.)"""
    loop = asyncio.get_running_loop()
    real_chunk = adaptive.AdaptiveChunker.chunk
    calls: list[tuple[bool, bool]] = []  # (off the loop thread, the loop ran meanwhile)

    def gated_chunk(
        self: adaptive.AdaptiveChunker, text: str, *, content_type: ContentType = "text/plain"
    ) -> list[Chunk]:
        off_loop = threading.current_thread() is not threading.main_thread()
        ran = threading.Event()
        loop.call_soon_threadsafe(ran.set)
        calls.append((off_loop, off_loop and ran.wait(timeout=60)))
        return real_chunk(self, text, content_type=content_type)

    monkeypatch.setattr(adaptive.AdaptiveChunker, "chunk", gated_chunk)
    paragraph = (
        "Kafka keeps an ordered log per partition. Consumers track offsets and commit them. "
        "def handler(event): return process(event.value) if event else None\n\n"
    )
    text = paragraph * (1_000_000 // len(paragraph))

    port = free_port()
    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        metrics_port=port,
        strategy="adaptive",
        max_document_bytes=14 * 1024 * 1024,
        max_chunks_per_document=1_000_000,
    )
    await kafka_io.create(settings, partitions=1)
    docs = [DocumentEvent(id=f"big-{i}", text=text) for i in range(2)]
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(docs)
    )
    worker = Worker(settings)
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(
            kafka_io.wait_committed_to_end(
                kafka_bootstrap, settings.group_id, settings.input_topic, timeout_s=240
            ),
            260,
        )
        m = await scrape(port)
    finally:
        worker.request_stop()
        assert await task == 0
    assert total(m, "chunkstream_documents_completed_total") == 2
    assert calls == [(True, True), (True, True)]


@pytest.mark.parametrize("strategy", ["semantic", "sdpm", "context"])
async def test_embedding_strategies_through_the_worker(
    kafka_bootstrap: str, topic_names: dict[str, str], real_model_dir: Path, strategy: str
) -> None:
    """Real model, shared batcher, real broker: every chunk maps back to its document (slice,
    or the join of its spans), cores cover the text, and texts of many documents share
    batches. A per-document override to `sentence` is honoured from the allow-list."""
    port = free_port()
    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        strategy=strategy,
        model_dir=str(real_model_dir),
        metrics_port=port,
        allowed_strategies="sentence",
    )
    await kafka_io.create(settings)
    docs = make_docs(24, seed=44, prefix=strategy)
    override = DocumentEvent(
        id="override",
        text="Short one. Another short one.",
        strategy=StrategyOverride(name="sentence", params={"chunk_size": 12}),
    )
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents([*docs, override])
    )
    worker = Worker(settings)
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(
            kafka_io.wait_committed_to_end(
                kafka_bootstrap, settings.group_id, settings.input_topic, timeout_s=180
            ),
            200,
        )
        m = await scrape(port)
    finally:
        worker.request_stop()
        assert await task == 0
    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    by_doc: dict[str, list[ChunkEvent]] = {}
    for ev in events:
        by_doc.setdefault(ev.doc_id, []).append(ev)
    assert set(by_doc) == {d.id for d in docs} | {"override"}
    assert {e.strategy for e in by_doc["override"]} == {"sentence"}
    for doc in docs:
        chunks = sorted(by_doc[doc.id], key=lambda e: e.index)
        assert [e.index for e in chunks] == list(range(chunks[0].count))
        covered = [False] * len(doc.text)
        for ev in chunks:
            assert ev.strategy == strategy
            if ev.spans is None:
                assert ev.text == doc.text[ev.start_index : ev.end_index]
                core = (ev.start_index, ev.end_index)
            else:
                assert ev.text == "\n".join(doc.text[s.start : s.end] for s in ev.spans)
                core = tuple(ev.metadata["core"])
            for i in range(core[0], core[1]):
                covered[i] = True
        lost = [c for c, cov in zip(doc.text, covered, strict=True) if not cov and not c.isspace()]
        assert not lost, f"{doc.id}: text outside every chunk core"
    # One shared batcher: fewer batches than documents means texts of several documents
    # travelled together.
    batches = total(m, "chunkstream_embedding_batches_total")
    assert 0 < batches < len(docs)
    assert m["chunkstream_model_info"]


async def test_a_document_fanning_out_past_the_chunk_limit_is_a_dead_letter(
    kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        strategy_params="chunk_size=10",
        max_chunks_per_document=5,
    )
    await kafka_io.create(settings, partitions=1)
    fine = DocumentEvent(id="fine", text="One. Two. Three.")
    fan_out = DocumentEvent(id="fan-out", text=" ".join(f"Item {i}." for i in range(50)))
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents([fan_out, fine])
    )
    worker = Worker(settings)
    task = asyncio.create_task(worker.run())
    try:
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic
        )
    finally:
        worker.request_stop()
        assert await task == 0
    letters = await kafka_io.dead_letters(kafka_bootstrap, settings.dlq_topic)
    assert [(d.doc_id, d.error_kind) for d in letters] == [("fan-out", "too_many_chunks")]
    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    assert {e.doc_id for e in events} == {"fine"}
