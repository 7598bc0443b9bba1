"""One CPU each: the worker and the Quix Streams peer on the same documents, the same broker and
the same compression, each pinned to one core, the broker to the other.

    CHUNKSTREAM_PEER_PYTHON=.peer-venv/bin/python .venv/bin/python -m bench.peer_bench \\
        [--min-mb 40] [--rounds 1] [--compression none zstd] [--lifecycle both] \\
        [--strategies sentence adaptive lexical] [--embedding-strategies semantic sdpm] \\
        [--embedding-mb 4] [--include-embeddings both]

* Documents: the corpus of tests/support/corpus.py (the long descriptions of the installed Python
  packages: real READMEs of real size, 0.5-90 KB) repeated under new ids to ``--min-mb``,
  produced once as JSON documents (the peer reads JSON) to one input topic of 3 partitions.
  Embedding strategies read the first ``--embedding-mb`` of them (a topic of their own), and
  the first ``--with-embeddings-mb`` with included embeddings.
* The broker (a separate JVM, started here) is pinned to ``--broker-cpu`` with every thread.
  Each pass is a child process pinned to ``--cpu`` (``taskset -c``, every thread it starts:
  librdkafka's in the peer, the chunking and inference threads in the worker): the passes run
  one after another on the same core, alternating per round.
* **worker**: the real `Worker` (``CHUNKSTREAM_*`` defaults but ``--set``): a fresh consumer
  group and output topic; the clock runs from its partition assignment to its last document
  finished. ``sentence`` runs with ``chunk_size=1000,tokenizer=character``: the peer's splitter
  counts characters up to 1000. Embedding strategies run on the static boundary model, with
  ``--include-embeddings`` also with CHUNKSTREAM_INCLUDE_EMBEDDINGS (the int8 transformer as
  the retrieval model, run on every chunk).
* **peer**: bench/support/quix_peer.py, its producer's ``compression.type`` set alike; its clock
runs
  from its first document to its final commit (so its group join is off its clock, and the
  worker's is on its own: the comparison slightly favours the peer).

CPU is each child's own ``time.process_time()`` (every thread) over its clock's span. Reported:
wall MB/s, CPU-s per MB, chunk events per MB, and worker ÷ peer (same compression, same round);
and the broker's CPU over the same span (bench/support/process_cpu.py) per input MB, with the
MB/s its one core would allow at that cost when fully busy (``1 / broker CPU-s per MB``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.support.kafka_runs import (
    clock_from_assignment,
    produce_documents,
    repeated,
    start_broker,
)
from bench.support.process_cpu import CpuSampler
from bench.support.quix_peer import run_peer
from tests.support.corpus import Document, add_corpus_argument, describe, load
from worker.app import Worker
from worker.config import load_settings
from worker.kafka.clients import create_topics, worker_topics
from worker.models.reference import find

REPO = Path(__file__).resolve().parent.parent

SENTENCE_LIKE_THE_PEER = "chunk_size=1000,tokenizer=character"


@dataclass
class Pass:
    what: str
    compression: str
    megabytes: float
    seconds: float
    cpu_s: float
    chunks: int
    round: int = 0
    broker_cpu_s: float = float("nan")  # the broker's CPU over the pass's clock

    @property
    def broker_cpu_per_mb(self) -> float:
        return self.broker_cpu_s / self.megabytes

    @property
    def mb_per_s(self) -> float:
        return self.megabytes / self.seconds

    @property
    def cpu_per_mb(self) -> float:
        return self.cpu_s / self.megabytes


async def child_worker(config: dict[str, str], documents: int) -> dict[str, float]:
    """The worker pass itself (in the pinned child): returns seconds, CPU and chunk events."""
    settings = load_settings(config, env={})
    topics, configs = worker_topics(settings, 3)
    del topics[settings.input_topic]
    await create_topics(settings, topics, max_message_bytes=16 * 1024 * 1024, configs=configs)
    worker = Worker(settings)
    with clock_from_assignment() as marks:
        task = asyncio.create_task(worker.run())
        while not marks:
            if task.done():
                raise RuntimeError(f"worker stopped early: {task.result()}")
            await asyncio.sleep(0.005)
    cpu, _, wall = marks[0]
    started = time.monotonic() - (time.perf_counter() - wall)  # the same moment, system-wide
    while worker.metrics.totals().documents < documents:
        if task.done():
            raise RuntimeError(f"worker stopped early: {task.result()}")
        await asyncio.sleep(0.01)
    result = {
        "seconds": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
        "chunks": worker.metrics.totals().chunks,
        "dead_letters": worker.metrics.totals().dead_letters,
        "started": started,
        "ended": time.monotonic(),
    }
    worker.request_stop()
    await task
    return result


def run_worker(
    bootstrap: str, input_topic: str, documents: int, cpus: str, config: dict[str, str]
) -> dict[str, float]:
    suffix = uuid.uuid4().hex[:8]
    full = {
        "bootstrap_servers": bootstrap,
        "group_id": f"peer-bench-{suffix}",
        "input_topic": input_topic,
        "output_topic": f"peer-bench-out-{suffix}",
        "dlq_topic": f"peer-bench-dlq-{suffix}",
        "metrics_port": "0",
        **config,
    }
    out = subprocess.run(
        [
            "taskset",
            "-c",
            cpus,
            sys.executable,
            "-m",
            "bench.peer_bench",
            "--child",
            json.dumps({"config": full, "documents": documents}),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=3600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def prefix(docs: Sequence[Document], megabytes: float) -> list[Document]:
    """The first documents of ``docs`` that hold at least ``megabytes``."""
    out: list[Document] = []
    size = 0
    for doc in docs:
        if size >= megabytes * 1e6:
            break
        out.append(doc)
        size += len(doc.text.encode())
    return out


def size_of(docs: Sequence[Document]) -> float:
    return sum(len(d.text.encode()) for d in docs) / 1e6


def broker_cpu(sampler: CpuSampler, started: float, ended: float) -> float:
    """The broker's CPU seconds over a pass's clock (NaN from a child that gave no span)."""
    if not started:
        return float("nan")
    while sampler.times[-1] <= ended:  # the sampler's thread has not passed the end yet
        time.sleep(sampler.interval_s)
    return sampler.cpu_between(started, ended)


def pin_broker(run_dir: Path, cpus: str) -> None:
    pid = (run_dir / "broker.pid").read_text().strip()
    subprocess.run(["taskset", "-a", "-cp", cpus, pid], check=True, capture_output=True)


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def main(args: argparse.Namespace) -> None:
    base = load(args.corpus)
    docs = repeated(base, args.min_mb)
    embedding_docs = prefix(docs, args.embedding_mb)
    with_vectors_docs = prefix(docs, args.with_embeddings_mb)
    print(f"corpus: {describe(base)}; repeated under new ids: {describe(docs)}", flush=True)
    print(f"embedding strategies: {describe(embedding_docs)}", flush=True)
    print(f"... with included embeddings: {describe(with_vectors_docs)}", flush=True)
    static = find("boundary", None).directory
    transformer = find("retrieval", None).directory
    overrides = dict(item.split("=", 1) for item in args.set)
    passes: list[Pass] = []
    loads: list[str] = [load_average()]
    with tempfile.TemporaryDirectory() as tmp:
        bootstrap = start_broker(Path(tmp))
        pin_broker(Path(tmp), args.broker_cpu)
        broker = CpuSampler(int((Path(tmp) / "broker.pid").read_text().strip()))
        stack = contextlib.ExitStack()
        try:
            admin = load_settings({"bootstrap_servers": bootstrap}, env={})
            topic = f"peer-bench-docs-{uuid.uuid4().hex[:8]}"
            small = f"peer-bench-docs-small-{uuid.uuid4().hex[:8]}"
            tiny = f"peer-bench-docs-tiny-{uuid.uuid4().hex[:8]}"
            await create_topics(
                admin, {topic: 3, small: 3, tiny: 3}, max_message_bytes=16 * 1024 * 1024
            )
            await produce_documents(bootstrap, topic, docs, encoding="json")
            if args.embedding_strategies:
                await produce_documents(bootstrap, small, embedding_docs, encoding="json")
                await produce_documents(bootstrap, tiny, with_vectors_docs, encoding="json")
            megabytes = size_of(docs)
            stack.enter_context(broker)
            for number in range(1, args.rounds + 1):
                for compression in args.compression:
                    common = {"compression_type": compression, **overrides}
                    out = f"peer-bench-quix-{uuid.uuid4().hex[:8]}"
                    await create_topics(admin, {out: 3})
                    peer = await asyncio.to_thread(
                        run_peer,
                        bootstrap,
                        topic,
                        out,
                        len(docs),
                        compression=compression,
                        cpus=args.cpu,
                    )
                    passes.append(
                        Pass(
                            "quix peer", compression, megabytes, peer.seconds, peer.cpu_s,
                            peer.chunks, number, broker_cpu(broker, peer.started, peer.ended),
                        )
                    )  # fmt: skip
                    print(f"round {number} {compression} peer: done ({load_average()})", flush=True)
                    for name in args.strategies:
                        params = SENTENCE_LIKE_THE_PEER if name == "sentence" else ""
                        for lifecycle in args.lifecycle:
                            config = {
                                **common,
                                "strategy": name,
                                "strategy_params": params,
                                "document_lifecycle": lifecycle,
                            }
                            r = await asyncio.to_thread(
                                run_worker, bootstrap, topic, len(docs), args.cpu, config
                            )
                            label = name if lifecycle == "true" else f"{name} (append-only)"
                            passes.append(
                                Pass(
                                    label, compression, megabytes, r["seconds"], r["cpu_s"],
                                    int(r["chunks"]), number,
                                    broker_cpu(broker, r["started"], r["ended"]),
                                )
                            )  # fmt: skip
                            print(f"round {number} {compression} {label}: done", flush=True)
                    for name in args.embedding_strategies:
                        for embeddings in args.include_embeddings:
                            config = {
                                **common,
                                "strategy": name,
                                "model_dir": str(static),
                                "include_embeddings": embeddings,
                                "retrieval_model_dir": str(transformer),
                                "model_int8": "true",
                            }
                            subset, subset_topic = (
                                (with_vectors_docs, tiny)
                                if embeddings == "true"
                                else (embedding_docs, small)
                            )
                            r = await asyncio.to_thread(
                                run_worker, bootstrap, subset_topic, len(subset), args.cpu, config
                            )
                            label = f"{name} (static)" + (
                                ", with embeddings (int8 transformer)"
                                if embeddings == "true"
                                else ""
                            )
                            passes.append(
                                Pass(
                                    label, compression, size_of(subset), r["seconds"], r["cpu_s"],
                                    int(r["chunks"]), number,
                                    broker_cpu(broker, r["started"], r["ended"]),
                                )
                            )  # fmt: skip
                            print(f"round {number} {compression} {label}: done", flush=True)
                    loads.append(load_average())
        finally:
            stack.close()
            subprocess.run(  # noqa: ASYNC221 - the benchmark is over
                [str(REPO / "deploy/kafka/local-kafka"), "stop", "--dir", tmp], check=False
            )
    print(f"\nload averages (1/5/15 min) at the start and after each compression: {loads}")
    print(f"worker and peer pinned to CPU {args.cpu}, the broker to CPU {args.broker_cpu}\n")
    print(table(passes))


def table(passes: list[Pass]) -> str:
    rows = [
        "| round | compression | what | MB | MB/s (wall) | CPU-s/MB | chunk events | events/MB "
        "| MB/s ÷ peer | CPU-s/MB ÷ peer | broker CPU-s/MB | broker-bound MB/s |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    peers = {(p.round, p.compression): p for p in passes if p.what == "quix peer"}
    for p in passes:
        peer = peers.get((p.round, p.compression))
        rate = f"{p.mb_per_s / peer.mb_per_s:.2f}" if peer else "-"
        cpu = f"{p.cpu_per_mb / peer.cpu_per_mb:.2f}" if peer else "-"
        rows.append(
            f"| {p.round} | {p.compression} | {p.what} | {p.megabytes:.1f} | {p.mb_per_s:.2f} "
            f"| {p.cpu_per_mb:.3f} | {p.chunks:,} | {p.chunks / p.megabytes:,.0f} "
            f"| {rate} | {cpu} | {p.broker_cpu_per_mb:.3f} | {1 / p.broker_cpu_per_mb:.1f} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        job = json.loads(sys.argv[2])
        print(json.dumps(asyncio.run(child_worker(job["config"], job["documents"]))), flush=True)
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.add_argument("--min-mb", type=float, default=40.0)
    parser.add_argument("--embedding-mb", type=float, default=4.0)
    parser.add_argument(
        "--with-embeddings-mb",
        type=float,
        default=0.5,
        help="documents for the passes with included embeddings (the transformer on every chunk)",
    )
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--compression", nargs="+", default=["none", "zstd"])
    parser.add_argument("--strategies", nargs="*", default=["sentence", "adaptive", "lexical"])
    parser.add_argument("--embedding-strategies", nargs="*", default=["semantic", "sdpm"])
    parser.add_argument(
        "--include-embeddings", nargs="+", choices=["false", "true"], default=["false", "true"]
    )
    parser.add_argument(
        "--lifecycle",
        nargs="+",
        choices=["true", "false"],
        default=["true"],
        help="rule strategies with the document lifecycle (true) and/or append-only (false)",
    )
    parser.add_argument("--cpu", default="0", help="the core of the worker and the peer")
    parser.add_argument("--broker-cpu", default="1", help="the broker's core")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a worker setting"
    )
    asyncio.run(main(parser.parse_args()))
