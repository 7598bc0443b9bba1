"""What the worker process itself spends per MB of input, by stage, beside a bare producer.

    .venv/bin/python bench/worker_cost_bench.py [--copies 14] [--strategies sentence ...]

In one process and one run, on a broker of its own (a separate JVM process, so its CPU is
never counted here):

* **worker**: the corpus (bench/corpus.py, repeated ``--copies`` times under distinct ids to
  reach >= 10 MB) is produced to a fresh topic, then the real `Worker` consumes, chunks,
  publishes and commits it. CPU is `time.process_time()` of this process (every thread: the
  event loop and the threads that chunk large documents), from the first document consumed
  to the last one finished; wall MB/s over the same span.
* **stages**: the same run again under `cProfile` (event-loop thread, its CPU clock). Each
  function's own time (`tottime`) goes to a stage by its module and name; C functions
  (msgspec, zstd, ...) and plumbing (asyncio transports and futures, aiokafka's connection
  and client) go to the stages of their callers, in proportion to each caller's time. The
  shares are applied to the unprofiled run's CPU; the CPU of the chunking threads (process CPU
  minus the loop thread's) is added to `chunk`. cProfile's own overhead falls mostly on
  Python-heavy stages, so treat the split as a profile, not a stopwatch.
* **bare producer**: an `AIOKafkaProducer` with the worker's settings (acks=all, idempotence,
  same linger, batch size and compression) sends the chunk events the worker produced (same
  values, keys and partitions, read back from its output topic), every document at once, each
  awaited for its acks: the client's ceiling for the same output, in chunk events per
  CPU-second.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from aiokafka import AIOKafkaConsumer, TopicPartition  # noqa: E402

from bench.corpus import Document, describe, gather  # noqa: E402
from bench.e2e_bench import _produce, start_broker  # noqa: E402
from worker.config import Settings, load_settings  # noqa: E402
from worker.kafka import create_topics, make_producer  # noqa: E402
from worker.service import Worker  # noqa: E402

STAGES = ("fetch/decode", "chunk", "event construction", "encoding", "send/ack", "offsets/commit")
# (substring of "file:function", stage), first match wins. Order matters: specific first.
_RULES: tuple[tuple[str, str], ...] = (
    ("worker/codec.py:decode", "fetch/decode"),
    ("worker/codec.py:check_headers", "fetch/decode"),
    ("worker/codec.py:encoding_from_headers", "fetch/decode"),
    ("worker/codec.py:sniff", "fetch/decode"),
    ("worker/codec.py:encode", "encoding"),
    ("worker/records.py", "event construction"),
    ("worker/tracecontext.py", "event construction"),
    ("worker/chunking/", "chunk"),
    ("worker/resolver.py", "chunk"),
    ("worker/publisher.py", "send/ack"),
    ("aiokafka/producer/", "send/ack"),
    ("aiokafka/partitioner", "send/ack"),
    ("worker/offsets.py", "offsets/commit"),
    ("service.py:_commit", "offsets/commit"),
    ("aiokafka/consumer/group_coordinator", "offsets/commit"),
    ("aiokafka/consumer/", "fetch/decode"),
    ("aiokafka/record/", "fetch/decode"),
    ("aiokafka/codec", "fetch/decode"),
)
# Plumbing that works for whoever called it: its time goes to its callers' stages (a socket
# write is the producer's when the producer wrote, the fetcher's when the fetcher did).
_TRANSPARENT = (
    "asyncio/selector_events",
    "asyncio/streams",
    "asyncio/futures",
    "asyncio/tasks",
    "aiokafka/conn",
    "aiokafka/client",
    "aiokafka/util",
    "aiokafka/protocol",
    "aiokafka/structs",
)


def stage_of(func: tuple[str, int, str]) -> str | None:
    """The stage of a function, None for C functions and plumbing (their time goes to their
    callers)."""
    filename, _, name = func
    if filename == "~" or any(t in filename for t in _TRANSPARENT):
        return None
    where = f"{filename}:{name}"
    for needle, stage in _RULES:
        if needle in where:
            return stage
    return "event loop, metrics, other"


def stage_shares(profile: cProfile.Profile) -> dict[str, float]:
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    seconds: dict[str, float] = defaultdict(float)
    memo: dict[tuple[str, int, str], dict[str, float]] = {}

    def split(func: tuple[str, int, str], depth: int = 0) -> dict[str, float]:
        """Fractions of a C function's time per stage, through its callers."""
        if func in memo:
            return memo[func]
        _, _, _, _, callers = stats[func]
        total = sum(c[2] for c in callers.values()) or 1.0
        out: dict[str, float] = defaultdict(float)
        for caller, (_, _, tt, _) in callers.items():
            stage = stage_of(caller)
            if stage is None and depth < 12 and caller in stats:
                for s, f in split(caller, depth + 1).items():
                    out[s] += f * tt / total
            else:
                out[stage or "event loop, metrics, other"] += tt / total
        memo[func] = out
        return out

    for func, (_, _, tt, _, _) in stats.items():
        stage = stage_of(func)
        if stage is not None:
            seconds[stage] += tt
        else:
            for s, f in split(func).items():
                seconds[s] += tt * f
    total = sum(seconds.values())
    return {s: v / total for s, v in seconds.items()}


@dataclass
class WorkerRun:
    strategy: str
    megabytes: float
    wall_s: float
    cpu_s: float
    loop_cpu_s: float
    chunks: int
    shares: dict[str, float] = field(default_factory=dict)


def settings_for(bootstrap: str, strategy: str, prefix: str) -> Settings:
    suffix = uuid.uuid4().hex[:8]
    return load_settings(
        {
            "bootstrap_servers": bootstrap,
            "group_id": f"{prefix}-{suffix}",
            "input_topic": f"{prefix}-in-{suffix}",
            "output_topic": f"{prefix}-out-{suffix}",
            "dlq_topic": f"{prefix}-dlq-{suffix}",
            "strategy": strategy,
            "metrics_port": "0",
        },
        env={},
    )


async def worker_run(
    bootstrap: str, strategy: str, docs: list[Document], profile: cProfile.Profile | None
) -> tuple[WorkerRun, Settings]:
    settings = settings_for(bootstrap, strategy, "cost")
    await create_topics(
        settings,
        {settings.input_topic: 3, settings.output_topic: 3, settings.dlq_topic: 1},
        max_message_bytes=16 * 1024 * 1024,
    )
    await _produce(bootstrap, settings.input_topic, docs)
    worker = Worker(settings)
    task = asyncio.create_task(worker.run())
    consumed = worker.metrics.documents_consumed
    while consumed._value.get() == 0:  # noqa: ASYNC110
        await asyncio.sleep(0.005)
    cpu, loop_cpu, wall = time.process_time(), time.thread_time(), time.perf_counter()
    if profile is not None:
        profile.enable()
    while worker.stats["documents"] < len(docs):
        if task.done():
            raise RuntimeError(f"worker stopped early: {task.result()}")
        await asyncio.sleep(0.05)  # this wait's own CPU is negligible at 20 Hz
    if profile is not None:
        profile.disable()
    run = WorkerRun(
        strategy,
        sum(len(d.text.encode()) for d in docs) / 1e6,
        time.perf_counter() - wall,
        time.process_time() - cpu,
        time.thread_time() - loop_cpu,
        worker.stats["chunks"],
    )
    worker.request_stop()
    await task
    return run, settings


async def output_records(
    bootstrap: str, topic: str
) -> list[tuple[int, bytes, bytes, list[tuple[str, bytes]]]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(partitions)
        end = await consumer.end_offsets(partitions)
        out = []
        while [tp for tp in partitions if await consumer.position(tp) < end[tp]]:
            for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                out.extend((tp.partition, r.key, r.value, list(r.headers)) for r in records)
        return out
    finally:
        await consumer.stop()


async def bare_producer(
    bootstrap: str,
    settings: Settings,
    records: list[tuple[int, bytes, bytes, list[tuple[str, bytes]]]],
) -> tuple[float, float]:
    """(CPU seconds, wall seconds) for the same records, sent per document like the worker."""
    topic = f"bare-{uuid.uuid4().hex[:8]}"
    await create_topics(settings, {topic: 3})
    by_doc: dict[bytes, list[tuple[int, bytes, bytes, list[tuple[str, bytes]]]]] = defaultdict(list)
    for record in records:
        by_doc[record[1]].append(record)
    producer = make_producer(settings)
    await producer.start()
    try:
        await (await producer.send(topic, b"warm-up", partition=0))

        async def one(doc: list[tuple[int, bytes, bytes, list[tuple[str, bytes]]]]) -> None:
            acks = [
                await producer.send(topic, value=v, key=k, headers=h, partition=p)
                for p, k, v, h in doc
            ]
            await asyncio.gather(*acks)

        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one(doc) for doc in by_doc.values()))
        return time.process_time() - cpu, time.perf_counter() - wall
    finally:
        await producer.stop()


async def main(args: argparse.Namespace) -> None:
    base = gather()
    docs = [
        Document(f"{d.name}-{copy}", d.text, d.content_type)
        for copy in range(args.copies)
        for d in base
    ]
    print(f"corpus: {describe(base)}, x{args.copies} = {len(docs)} documents", flush=True)
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        bootstrap = start_broker(Path(tmp))
        try:
            for strategy in args.strategies:
                run, settings = await worker_run(bootstrap, strategy, docs, None)
                # CPU of this thread as the profiler's clock: time waiting for the GIL (held
                # by a chunking thread) or for the network is not charged to whatever waited.
                profile = cProfile.Profile(time.thread_time)
                profiled, _ = await worker_run(bootstrap, strategy, docs, profile)
                run.shares = stage_shares(profile)
                if args.top:
                    pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
                thread_cpu = max(0.0, profiled.cpu_s - profiled.loop_cpu_s)
                records = await output_records(bootstrap, settings.output_topic)
                bare_cpu, bare_wall = await bare_producer(bootstrap, settings, records)
                rows.append(row(run, profiled, thread_cpu, len(records), bare_cpu, bare_wall))
                print(f"{strategy}: done", flush=True)
        finally:
            subprocess.run(  # noqa: ASYNC221 - the benchmark is over
                [str(REPO / "deploy/kafka/local-kafka"), "stop", "--dir", tmp], check=False
            )
    print(f"\nthreads alive at the end: {threading.active_count()}; same process, same run\n")
    print(
        "| strategy | MB | chunk events | wall MB/s | worker CPU s/MB | "
        + " | ".join(f"{s} s/MB" for s in STAGES)
        + " | event loop, metrics, other s/MB | non-chunk share | events/CPU-s worker "
        "| events/CPU-s bare producer | worker / bare |"
    )
    print("|---|" + "---:|" * (10 + len(STAGES)))
    print("\n".join(rows))


def row(
    run: WorkerRun,
    profiled: WorkerRun,
    thread_cpu: float,
    events: int,
    bare_cpu: float,
    bare_wall: float,
) -> str:
    per_mb = run.cpu_s / run.megabytes
    # Loop-thread shares from the profile; the chunking threads' CPU goes to chunk.
    loop_share = profiled.loop_cpu_s / profiled.cpu_s if profiled.cpu_s else 1.0
    stage = {s: run.shares.get(s, 0.0) * loop_share * per_mb for s in STAGES}
    stage["chunk"] += (thread_cpu / profiled.cpu_s if profiled.cpu_s else 0.0) * per_mb
    other = per_mb - sum(stage.values())
    non_chunk = 1 - stage["chunk"] / per_mb
    worker_rate = run.chunks / run.cpu_s
    bare_rate = events / bare_cpu
    return (
        f"| {run.strategy} | {run.megabytes:.1f} | {run.chunks:,} | "
        f"{run.megabytes / run.wall_s:.1f} | {per_mb:.3f} | "
        + " | ".join(f"{stage[s]:.3f}" for s in STAGES)
        + f" | {other:.3f} | {non_chunk:.0%} | {worker_rate:,.0f} | {bare_rate:,.0f} "
        f"| {worker_rate / bare_rate:.2f} |"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=14, help="corpus copies (distinct ids)")
    parser.add_argument("--strategies", nargs="+", default=["sentence", "adaptive", "lexical"])
    parser.add_argument("--top", type=int, default=0, help="print the N costliest functions")
    asyncio.run(main(parser.parse_args()))
