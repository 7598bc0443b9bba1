"""The floor of a chunk event: a strategy's chunking plus the work every one of its events
needs, in process, without Kafka's client or the event loop.

    .venv/bin/python bench/event_floor_bench.py [--corpus debian-docs-40mb] [--min-mb 20] \\
        [--strategies sentence adaptive lexical] [--rounds 3]

For each strategy, on the first ``--min-mb`` of the corpus (each page once, so the cores' piece
memory meets new words as the worker does on text read once):

* **chunking**: the strategy as the worker builds it (sizes in the retrieval model's tokens;
  ``sentence`` as bench/peer_bench.py runs it, 1,000 characters), one pass, the first;
* **chunk ids**: :func:`worker.wire.records.chunk_ids` per document;
* **event bytes**: :meth:`worker.wire.event_bytes.ChunkEventWriter.values` (msgpack);
* **records**: the client's own record batch builder (aiokafka's ``BatchBuilder``, 512 KiB
  batches as the worker's default ``batch.size``), every event keyed by its chunk id with the
  content-type header, built, without compression and with zstd.

The stages after chunking are the lowest of ``--rounds`` passes. Their sum with chunking is a
floor: the worker does all of it for every event and more besides (fetching and decoding the
input, produce requests and responses, the event loop, the document state, metrics). Compare it
with the peer's whole CPU per MB from bench/peer_bench.py: where the floor is above it, no work
on the rest can bring the strategy to the peer's MB/s at one core each while the events stay
what they are.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from aiokafka.producer.message_accumulator import BatchBuilder  # noqa: E402

from bench.corpus import Document, add_corpus_argument, load  # noqa: E402
from bench.peer_bench import prefix  # noqa: E402
from worker.chunking import registry  # noqa: E402
from worker.chunking.types import Chunk  # noqa: E402
from worker.models.reference import find  # noqa: E402
from worker.pipeline import chunk_document_sync  # noqa: E402
from worker.wire.event_bytes import ChunkEventWriter  # noqa: E402
from worker.wire.events import DocumentEvent, SourceRecord  # noqa: E402
from worker.wire.records import chunk_ids  # noqa: E402

PARAMS = {"sentence": {"chunk_size": "1000", "tokenizer": "character"}}
BATCH_BYTES = 512 * 1024  # worker.config.DEFAULT_BATCH_BYTES
HEADERS = [("content-type", b"application/msgpack")]
CODECS = {"none": 0, "zstd": 4}  # aiokafka's compression attribute values


def lowest(rounds: int, work: Callable[[], object]) -> float:
    """The lowest CPU seconds of ``rounds`` calls of ``work``."""
    times = []
    for _ in range(rounds):
        started = time.process_time()
        work()
        times.append(time.process_time() - started)
    return min(times)


def record_batches(ids: Sequence[list[str]], values: Sequence[list[bytes]], codec: int) -> int:
    """Every event appended to the client's batch builder, batches built; the batch count."""
    builder: Any = BatchBuilder(BATCH_BYTES, codec)
    built = 0
    for keys, encoded in zip(ids, values, strict=True):
        for key, value in zip(keys, encoded, strict=True):
            record = {"timestamp": None, "key": key.encode(), "value": value, "headers": HEADERS}
            if builder.append(**record) is None:
                builder._build()
                built += 1
                builder = BatchBuilder(BATCH_BYTES, codec)
                builder.append(**record)
    builder._build()
    return built + 1


def measure(name: str, docs: Sequence[Document], rounds: int) -> dict[str, float]:
    context = registry.BuildContext(boundary=None, retrieval=find("retrieval", None))
    strategy = registry.build(name, PARAMS.get(name, {}), context)
    megabytes = sum(len(doc.text.encode()) for doc in docs) / 1e6
    started = time.process_time()
    chunked: list[tuple[DocumentEvent, list[Chunk]]] = [
        (
            DocumentEvent(id=doc.name, text=doc.text),
            list(chunk_document_sync(strategy, doc.text, doc.content_type, None)),
        )
        for doc in docs
    ]
    chunking = time.process_time() - started
    events = sum(len(chunks) for _, chunks in chunked)
    writer = ChunkEventWriter("msgpack")
    source = SourceRecord("documents", 0, 0)
    now = dt.datetime.now(dt.UTC)
    fingerprint = "0123456789abcdef"

    def ids_of() -> list[list[str]]:
        return [chunk_ids(doc.id, fingerprint, [c.text for c in chunks]) for doc, chunks in chunked]

    ids = ids_of()

    def values_of() -> list[list[bytes]]:
        return [
            writer.values(doc, source, name, chunks, now, ids=keys)
            for (doc, chunks), keys in zip(chunked, ids, strict=True)
        ]

    values = values_of()
    row = {
        "MB": megabytes,
        "events/MB": events / megabytes,
        "value MB per MB": sum(map(len, (v for vs in values for v in vs))) / 1e6 / megabytes,
        "chunking": chunking / megabytes,
        "chunk ids": lowest(rounds, ids_of) / megabytes,
        "event bytes": lowest(rounds, values_of) / megabytes,
    }
    for codec, attribute in CODECS.items():
        row[f"records, {codec}"] = (
            lowest(rounds, lambda a=attribute: record_batches(ids, values, a)) / megabytes
        )
    return row


def table(rows: dict[str, dict[str, float]]) -> str:
    lines = [
        "| strategy | MB | events/MB | value MB per input MB | chunking | chunk ids | event bytes "
        "| records, none | records, zstd | floor, none | floor, zstd | µs per event beyond "
        "chunking (none / zstd) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        shared = r["chunking"] + r["chunk ids"] + r["event bytes"]
        floors = [shared + r[f"records, {codec}"] for codec in CODECS]
        per_event = [(floor - r["chunking"]) / r["events/MB"] * 1e6 for floor in floors]
        lines.append(
            f"| {name} | {r['MB']:.1f} | {r['events/MB']:,.0f} | {r['value MB per MB']:.2f} "
            f"| {r['chunking']:.4f} | {r['chunk ids']:.4f} | {r['event bytes']:.4f} "
            f"| {r['records, none']:.4f} | {r['records, zstd']:.4f} "
            f"| {floors[0]:.4f} | {floors[1]:.4f} | {per_event[0]:.1f} / {per_event[1]:.1f} |"
        )
    return "\n".join(lines)


def main(args: argparse.Namespace) -> None:
    rows = {}
    for name in args.strategies:
        # A process per strategy: the cores' piece memory (one per tokenizer, shared by the
        # strategies of a process) starts empty for each, as in a worker.
        child = [sys.executable, __file__, "--child", name, "--corpus", args.corpus]
        child += ["--min-mb", str(args.min_mb), "--rounds", str(args.rounds)]
        out = subprocess.run(child, check=True, capture_output=True, text=True)
        rows[name] = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{name}: done", flush=True)
    print("\nCPU-s per input MB (one thread; chunking: the first pass; the rest: lowest of "
          f"{args.rounds})\n")  # fmt: skip
    print(table(rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.set_defaults(corpus="debian-docs-40mb")
    parser.add_argument("--min-mb", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--strategies", nargs="+", default=["sentence", "adaptive", "lexical"])
    parser.add_argument("--child", help=argparse.SUPPRESS)  # one strategy, its row as JSON
    arguments = parser.parse_args()
    if arguments.child:
        documents = prefix(load(arguments.corpus), arguments.min_mb)
        print(json.dumps(measure(arguments.child, documents, arguments.rounds)))
    else:
        main(arguments)
