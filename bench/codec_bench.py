"""What each compression codec costs and saves on the worker's output, on the real broker.

    .venv/bin/python -m bench.codec_bench [--rounds 3] [--encoding msgpack json]

The corpus (tests/support/corpus.py) is chunked once with `sentence`; its chunk events are built and
encoded as the worker builds them. Then, per codec, in one process and one run, rounds
alternating the codecs so that load from other work falls on all alike (best round kept):

* **send**: the worker's own producer (`worker.kafka.clients.make_producer`: acks=all, idempotence,
  the configured linger and batch size) and `Publisher` send every document's chunk events,
  all documents at once; wall time from the first send to the last ack, and this process's
  CPU time (`time.process_time`, so the broker's CPU on the shared machine is not counted);
* **stored**: the bytes of the output topic's log segments in the broker's data directory,
  which hold the record batches exactly as the producer sent them (bytes on the wire);
* **read**: a consumer fetches every event back; this process's CPU time for it
  (fetch, decompression, record parsing).

MB are the encoded events' bytes before compression; ratios are against `none` of the
same encoding in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer

from bench.support.kafka_runs import kind, start_broker
from tests.support.corpus import describe, gather
from tests.support.reference_events import chunk_events
from worker.chunking import registry
from worker.chunking.types import RuleChunker
from worker.config import Settings, load_settings
from worker.kafka.clients import create_topics, make_producer
from worker.kafka.publisher import Publisher
from worker.wire.codec import EventEncoder
from worker.wire.events import ChunkEvent, DocumentEvent
from worker.wire.records import InputRecord

REPO = Path(__file__).resolve().parent.parent

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass
class Run:
    encoding: str
    codec: str
    events: int
    megabytes: float
    send_wall_s: float
    send_cpu_s: float
    read_cpu_s: float
    stored_bytes: int


def corpus_events(copies: int) -> tuple[list[tuple[str, list[ChunkEvent]]], str]:
    docs = gather()
    built = registry.build("sentence", {}, registry.BuildContext())
    chunker = built.chunker
    assert isinstance(chunker, RuleChunker)
    now = dt.datetime.now(dt.UTC)
    out = []
    for copy in range(copies):
        for offset, d in enumerate(docs):
            doc = DocumentEvent(id=f"{d.name}-{copy}", text=d.text, content_type=kind(d))
            record = InputRecord("documents", 0, offset, None, None, [], 0)
            chunks = chunker.chunk(d.text, content_type=kind(d))
            events = chunk_events(doc, record, built.name, built.fingerprint, chunks, now)
            out.append((doc.id, events))
    return out, f"{describe(docs)}, {copies} copies"


async def publish(
    publisher: Publisher, encoder: EventEncoder, doc_id: str, events: list[ChunkEvent]
) -> None:
    """A document's events as the worker publishes them: encoded, staged, one wait."""
    keys = [event.chunk_id.encode() for event in events]
    acks, _ = await publisher.stage_encoded(doc_id, keys, [encoder.encode(e) for e in events])
    await publisher.wait(acks)


async def one_run(
    bootstrap: str,
    data_dir: Path,
    encoding: str,
    codec: str,
    docs: list[tuple[str, list[ChunkEvent]]],
) -> Run:
    suffix = uuid.uuid4().hex[:8]
    settings: Settings = load_settings(
        {
            "bootstrap_servers": bootstrap,
            "output_topic": f"codec-{codec}-{suffix}",
            "dlq_topic": f"codec-dlq-{suffix}",
            "compression_type": codec,
            "encoding": encoding,
        },
        env={},
    )
    await create_topics(settings, {settings.output_topic: 3, settings.dlq_topic: 1})
    encoder = EventEncoder(settings.encoding)
    size = sum(len(encoder.encode(e)) for _, events in docs for e in events)
    producer = make_producer(settings)
    await producer.start()
    try:
        publisher = Publisher(
            producer,
            encoder,
            output_topic=settings.output_topic,
            dlq_topic=settings.dlq_topic,
            max_record_bytes=settings.max_record_bytes,
            linger_ms=settings.linger_ms,
        )
        await publish(publisher, encoder, docs[0][0], docs[0][1][:1])  # metadata, connections
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(publish(publisher, encoder, doc_id, ev) for doc_id, ev in docs))
        send_wall, send_cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        await producer.stop()
    stored = stored_bytes(data_dir, settings.output_topic)
    events = sum(len(ev) for _, ev in docs) + 1
    consumer = AIOKafkaConsumer(
        settings.output_topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        seen = 0
        cpu = time.process_time()
        while seen < events:
            batch = await consumer.getmany(timeout_ms=1000, max_records=5000)
            seen += sum(len(rs) for rs in batch.values())
        read_cpu = time.process_time() - cpu
    finally:
        await consumer.stop()
    return Run(encoding, codec, events, size / 1e6, send_wall, send_cpu, read_cpu, stored)


def stored_bytes(data_dir: Path, topic: str) -> int:
    return sum(p.stat().st_size for p in data_dir.glob(f"{topic}-*/*.log"))


def table(runs: list[Run]) -> str:
    rows = [
        "| encoding | codec | events | event MB | stored MB | stored / none | send MB/s (wall) "
        "| send CPU s/MB | read CPU s/MB | send CPU / none |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base = {r.encoding: r for r in runs if r.codec == "none"}
    for r in runs:
        b = base[r.encoding]
        rows.append(
            f"| {r.encoding} | {r.codec} | {r.events:,} | {r.megabytes:.2f} | "
            f"{r.stored_bytes / 1e6:.2f} | {r.stored_bytes / b.stored_bytes:.2f} | "
            f"{r.megabytes / r.send_wall_s:.1f} | {r.send_cpu_s / r.megabytes:.3f} | "
            f"{r.read_cpu_s / r.megabytes:.3f} | {r.send_cpu_s / b.send_cpu_s:.2f} |"
        )
    return "\n".join(rows)


async def main(args: argparse.Namespace) -> None:
    docs, description = corpus_events(args.copies)
    print(f"corpus: {description}; {sum(len(e) for _, e in docs):,} chunk events (sentence)")
    with tempfile.TemporaryDirectory() as tmp:
        bootstrap = start_broker(Path(tmp))
        best: dict[tuple[str, str], Run] = {}
        try:
            for round_ in range(args.rounds):
                for encoding in args.encoding:
                    for codec in CODECS:
                        run = await one_run(bootstrap, Path(tmp) / "data", encoding, codec, docs)
                        key = (encoding, codec)
                        if key not in best or run.send_cpu_s < best[key].send_cpu_s:
                            best[key] = run
                print(f"round {round_ + 1}: done", flush=True)
        finally:
            import subprocess

            subprocess.run(  # noqa: ASYNC221 - the benchmark is over
                [str(REPO / "deploy/kafka/local-kafka"), "stop", "--dir", tmp], check=False
            )
    print("\nbest of", args.rounds, "rounds per codec (lowest send CPU); same process, same run\n")
    print(table([best[(e, c)] for e in args.encoding for c in CODECS]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--copies", type=int, default=4, help="corpus copies (distinct ids)")
    parser.add_argument("--encoding", nargs="+", default=["msgpack", "json"])
    asyncio.run(main(parser.parse_args()))
