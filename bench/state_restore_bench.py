"""How long a worker takes to restore document state on partition assignment, and in how much
memory: the issue-19 figure for one million documents.

    .venv/bin/python -m bench.state_restore_bench --documents 1000000 --chunks 20 --partitions 4

Starts its own broker; writes a compacted changelog topic of ``documents`` document states
(``chunks`` chunk ids each, as the worker writes them: msgpack DocumentState, keyed by document
id, zstd like the worker's producer), spread over ``partitions`` partitions; then, in a fresh
process per run (so its peak resident memory is the restore's alone), restores every
partition with the worker's own code (worker.state.changelog.Changelog into a
worker.state.sqlite_store.SqliteStateStore) — once from scratch (a new pod), once from a checkpoint
with 1 % of the states rewritten since (a rebalance back to a worker that kept its state directory)
— and prints the table. Nothing is committed; the broker's directory is temporary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from aiokafka import AIOKafkaProducer

from bench.support.kafka_runs import start_broker
from worker.config import load_settings
from worker.kafka.clients import COMPACTED, create_topics
from worker.wire.state_record import DocumentState, encode_state

REPO = Path(__file__).resolve().parents[1]


def state_for(n: int, chunks: int, version: int) -> DocumentState:
    seed = n.to_bytes(8, "little") * 2
    return DocumentState(offset=n * 3 + version, version=version, chunk_ids=seed * chunks)


async def write_changelog(
    bootstrap: str, topic: str, documents: range, chunks: int, partitions: int, version: int
) -> float:
    """The states of ``documents``, as the worker writes them; returns MB written."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type="zstd",
        linger_ms=20,
        max_batch_size=512 * 1024,
        max_request_size=4 * 1024 * 1024,
    )
    await producer.start()
    written = 0
    try:
        batches = {p: producer.create_batch() for p in range(partitions)}
        pending = []
        for n in documents:
            partition = n % partitions
            key = f"doc-{n:08d}".encode()
            value = encode_state(state_for(n, chunks, version))
            written += len(key) + len(value)
            if batches[partition].append(key=key, value=value, timestamp=None) is None:
                batch = batches[partition]
                batch.close()
                pending.append(await producer.send_batch(batch, topic, partition=partition))
                batches[partition] = producer.create_batch()
                batches[partition].append(key=key, value=value, timestamp=None)
            if len(pending) > 64:
                await asyncio.gather(*pending)
                pending.clear()
        for partition, batch in batches.items():
            batch.close()
            pending.append(await producer.send_batch(batch, topic, partition=partition))
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return written / 1e6


async def restore(bootstrap: str, topic: str, partitions: int, state_dir: str) -> dict[str, float]:
    """One worker's restore of every partition (run in a process of its own)."""
    from worker.kafka.clients import make_changelog_reader
    from worker.state.changelog import Changelog
    from worker.state.sqlite_store import open_store

    settings = load_settings({"bootstrap_servers": bootstrap}, env={})
    opening = time.perf_counter()
    # Opening a kept store file reads its keys into the Bloom filter (worker.state.key_filter).
    store = open_store(state_dir, "bench")
    open_seconds = time.perf_counter() - opening
    reader = make_changelog_reader(settings)
    await reader.start()
    try:
        changelog = Changelog(reader, topic, store)
        started = time.perf_counter()
        restored = await changelog.restore(list(range(partitions)))
        records = sum(r.records for r in restored)
        seconds = time.perf_counter() - started
        documents = sum(store.count(p) for p in range(partitions))
        changelog.checkpoint({r.partition: r.end for r in restored})  # as a clean hand-over does
    finally:
        await reader.stop()
        store.close()
    return {
        "seconds": seconds,
        "open_seconds": open_seconds,
        "records": records,
        "documents": documents,
        "peak_rss_mb": peak_rss_mb(),
        "store_mb": sum(f.stat().st_size for f in store.path.parent.iterdir()) / 1e6,
    }


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def restore_in_child(
    bootstrap: str, topic: str, partitions: int, state_dir: str
) -> dict[str, float]:
    out = subprocess.run(
        [
            *(sys.executable, "-m", "bench.state_restore_bench", "--child"),
            *(bootstrap, topic, str(partitions), state_dir),
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    )
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        bootstrap = start_broker(Path(tmp) / "kafka")
        try:
            topic = f"bench-state-{uuid.uuid4().hex[:8]}"
            settings = load_settings({"bootstrap_servers": bootstrap}, env={})
            await create_topics(
                settings,
                {topic: args.partitions},
                max_message_bytes=4 * 1024 * 1024,
                configs={topic: COMPACTED},
            )
            started = time.perf_counter()
            mb = await write_changelog(
                bootstrap, topic, range(args.documents), args.chunks, args.partitions, 1
            )
            took = time.perf_counter() - started
            print(f"wrote {args.documents} states, {mb:.0f} MB, in {took:.0f} s")
            state_dir = str(Path(tmp) / "state")
            child = (bootstrap, topic, args.partitions, state_dir)
            rows = [("from scratch (new pod)", await asyncio.to_thread(restore_in_child, *child))]
            # 1 % of the documents change while another worker owns the partitions...
            changed = range(0, args.documents, 100)
            await write_changelog(bootstrap, topic, changed, args.chunks, args.partitions, 2)
            # ...then come back to the one that kept its state directory and checkpoints.
            again = await asyncio.to_thread(restore_in_child, *child)
            rows.append(("from a checkpoint (+1 % changed)", again))
        finally:
            stop = [
                str(REPO / "deploy/kafka/local-kafka"),
                "stop",
                "--dir",
                str(Path(tmp) / "kafka"),
            ]
            await asyncio.to_thread(subprocess.run, stop, check=False)
    print()
    print(
        f"state restore: {args.documents:,} documents × {args.chunks} chunk ids, "
        f"{args.partitions} partitions, {mb:.0f} MB of states"
    )
    print()
    print(
        "| restore | records read | documents | store open s | restore s | documents/s "
        "| peak RSS MB | store on disk MB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows:
        rate = r["records"] / r["seconds"] if r["seconds"] else 0
        print(
            f"| {name} | {int(r['records']):,} | {int(r['documents']):,} "
            f"| {r['open_seconds']:.1f} | {r['seconds']:.1f} "
            f"| {rate:,.0f} | {r['peak_rss_mb']:.0f} | {r['store_mb']:.0f} |"
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, bootstrap, topic, partitions, state_dir = sys.argv
        print(json.dumps(asyncio.run(restore(bootstrap, topic, int(partitions), state_dir))))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=4)
    asyncio.run(main(parser.parse_args()))
