"""What the worker process itself spends per MB of input, by stage, beside a bare producer
and a peer application.

    .venv/bin/python bench/worker_cost_bench.py [--min-mb 10] [--rounds 2] [--peer]
        [--per-record sentence adaptive] [--strategies sentence ...]

In one process and one run, on a broker of its own (a separate JVM process, so its CPU is
never counted here). The corpus (bench/corpus.py, repeated under new ids to ``--min-mb``) is
produced once, as JSON documents, to one input topic; every pass below reads those same
records (a fresh consumer group each) and writes to a fresh output topic. The passes
alternate per round (every strategy, then the peer), so load from other work on a shared
machine falls on all alike; the tables give lowest–highest over the rounds.

* **worker**: the real `Worker` (default settings: msgpack out, zstd, linger 5 ms, 64 KiB
  batches) consumes, chunks, publishes and commits. CPU is `time.process_time()` of this
  process (every thread: the event loop and the threads that chunk large documents), from the
  group's partition assignment (before the first fetch) to the last document finished; wall
  MB/s over the same span.
* **stages**: once per strategy, the same pass under `cProfile` (event-loop thread, its CPU
  clock). Each function's own time (`tottime`) goes to a stage by its module and name; C
  functions (msgspec, zstd, ...) and plumbing (asyncio transports and futures, aiokafka's
  connection and client) go to the stages of their callers, in proportion to each caller's
  time. The shares are applied to each unprofiled pass's CPU; the CPU of the chunking threads
  (process CPU minus the loop thread's) is added to `chunk`. cProfile's own overhead falls
  mostly on Python-heavy stages, so treat the split as a profile, not a stopwatch.
* **bare producer**: an `AIOKafkaProducer` with the worker's settings (acks=all, idempotence,
  same linger, batch size and compression) sends the chunk events the worker produced in that
  pass (same values, keys, headers and partitions, read back from its output topic), every
  document at once, one ``send`` per event, each document awaiting its acks: the client as
  its documentation says to use it, in chunk events per CPU-second.
* **per-record (before)**, with ``--per-record``: the worker with the publisher it had before
  record batches of its own (one ``producer.send`` per chunk event), same round.
* **quix peer**, with ``--peer``: bench/quix_peer.py in a child process (its own CPU clock):
  Quix Streams + LangChain's recursive splitter (chunk_size 1000) on the same input records,
  at least once, idempotent producer; MB/s from its first document to its final commit.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import math
import pstats
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import msgspec

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from aiokafka import AIOKafkaConsumer, TopicPartition  # noqa: E402

from bench.corpus import Document, add_corpus_argument, describe, load  # noqa: E402
from bench.e2e_bench import _produce, clock_from_assignment, repeated, start_broker  # noqa: E402
from bench.quix_peer import PeerRun, run_peer  # noqa: E402
from worker import document, service  # noqa: E402
from worker.app import Worker  # noqa: E402
from worker.config import Settings, load_settings  # noqa: E402
from worker.kafka.clients import create_topics, make_producer, worker_topics  # noqa: E402
from worker.kafka.publisher import Publisher  # noqa: E402
from worker.wire.codec import Headers  # noqa: E402
from worker.wire.event_bytes import ChunkEventWriter  # noqa: E402
from worker.wire.events import ChunkEvent  # noqa: E402
from worker.wire.records import ReferenceEventWriter  # noqa: E402

STAGES = (
    "fetch/decode",
    "chunk",
    "event construction",
    "encoding",
    "send/ack",
    "document state",
    "offsets/commit",
)
OTHER = "event loop, metrics, other"
# (substring of "file:function", stage), first match wins. Order matters: specific first.
_RULES: tuple[tuple[str, str], ...] = (
    ("worker/wire/codec.py:decode", "fetch/decode"),
    ("worker/wire/codec.py:check_headers", "fetch/decode"),
    ("worker/wire/codec.py:encoding_from_headers", "fetch/decode"),
    ("worker/wire/codec.py:sniff", "fetch/decode"),
    ("worker/wire/codec.py:encode", "encoding"),
    ("worker/wire/records.py", "event construction"),
    # Builds and encodes in one: its encoding shows as construction.
    ("worker/wire/event_bytes.py", "event construction"),
    ("worker/state/decisions.py", "document state"),
    ("worker/state/documents.py", "document state"),
    ("worker/state/store.py", "document state"),
    ("worker/state/changelog.py", "document state"),
    ("worker/handling/turns.py", "document state"),
    ("worker/wire/tracecontext.py", "event construction"),
    ("worker/chunking/", "chunk"),
    ("worker/handling/resolver.py", "chunk"),
    ("worker/kafka/publisher.py", "send/ack"),
    ("aiokafka/producer/", "send/ack"),
    ("aiokafka/partitioner", "send/ack"),
    ("worker/consuming/offsets.py", "offsets/commit"),
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


@dataclass
class Round:
    """One strategy in one round: the worker unprofiled, and the bare producer on its output."""

    number: int
    run: WorkerRun
    events: int
    bare_cpu_s: float
    bare_wall_s: float

    @property
    def worker_rate(self) -> float:
        return self.run.chunks / self.run.cpu_s

    @property
    def bare_rate(self) -> float:
        return self.events / self.bare_cpu_s


class _DocOf(msgspec.Struct):
    doc_id: str


class PerRecordPublisher(Publisher):
    """The publisher before record batches of our own (kept here as the same-run baseline):
    one ``producer.send`` per chunk event, then every ack awaited."""

    async def publish_chunks(
        self,
        doc_id: str,
        events: Sequence[ChunkEvent],
        headers: Headers = (),
        retracted: Sequence[str] = (),
    ) -> int:
        values = [self._encoder.encode(event) for event in events]
        partition = await self.partition_for(self.output_topic, doc_id.encode())
        record_headers = [*self._headers, *headers] if headers else self._headers
        acks = [
            await self._producer.send(
                self.output_topic,
                value=v,
                key=e.chunk_id.encode(),
                headers=record_headers,
                partition=partition,
            )
            for e, v in zip(events, values, strict=True)
        ]
        await asyncio.gather(*acks)
        return sum(len(v) for v in values)


# Worker settings for every pass (``--set name=value``), on top of the defaults.
OVERRIDES: dict[str, str] = {}


def settings_for(bootstrap: str, strategy: str, input_topic: str, prefix: str) -> Settings:
    suffix = uuid.uuid4().hex[:8]
    return load_settings(
        {
            "bootstrap_servers": bootstrap,
            "group_id": f"{prefix}-{suffix}",
            "input_topic": input_topic,
            "output_topic": f"{prefix}-out-{suffix}",
            "dlq_topic": f"{prefix}-dlq-{suffix}",
            "strategy": strategy,
            "metrics_port": "0",
            **OVERRIDES,
        },
        env={},
    )


async def worker_run(
    bootstrap: str,
    strategy: str,
    input_topic: str,
    docs: list[Document],
    profile: cProfile.Profile | None,
    publisher: type[Publisher] = Publisher,
    events: str = "writer",
) -> tuple[WorkerRun, Settings]:
    """The real Worker, in a fresh consumer group, on the documents already in
    ``input_topic``; its output goes to a fresh topic. ``events="reference"``: chunk events
    built as ChunkEvent structs and encoded one by one (worker.wire.records.ReferenceEventWriter,
    the same bytes: the worker before worker.wire.event_bytes)."""
    settings = settings_for(bootstrap, strategy, input_topic, "cost")
    topics, configs = worker_topics(settings, 3)
    del topics[settings.input_topic]  # shared by every pass, made once
    await create_topics(settings, topics, max_message_bytes=16 * 1024 * 1024, configs=configs)
    worker = Worker(settings)
    writer = ReferenceEventWriter if events == "reference" else ChunkEventWriter
    with (
        mock.patch.object(service, "Publisher", publisher),
        mock.patch.object(document, "ChunkEventWriter", writer),
        clock_from_assignment() as marks,
    ):
        task = asyncio.create_task(worker.run())
        while not marks:
            if task.done():
                raise RuntimeError(f"worker stopped early: {task.result()}")
            await asyncio.sleep(0.005)
    if profile is not None:
        # From here, not from the assignment: the fetch in between is on the clock of the
        # unprofiled run's CPU, and the profile gives shares only.
        profile.enable()
    cpu, loop_cpu, wall = marks[0]
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
    # Grouped by document as the worker sends them (keys are chunk ids: the document id is
    # in the value).
    by_doc: dict[str, list[tuple[int, bytes, bytes, list[tuple[str, bytes]]]]] = defaultdict(list)
    for record in records:
        by_doc[msgspec.msgpack.decode(record[2], type=_DocOf).doc_id].append(record)
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


@dataclass
class Profiled:
    """The stage split of one profiled run: shares of the loop thread, and how the process's
    CPU divided between the loop thread and the chunking threads."""

    shares: dict[str, float]
    loop_share: float
    thread_share: float


def stages_per_mb(run: WorkerRun, profiled: Profiled) -> dict[str, float]:
    per_mb = run.cpu_s / run.megabytes
    stage = {s: profiled.shares.get(s, 0.0) * profiled.loop_share * per_mb for s in STAGES}
    stage["chunk"] += profiled.thread_share * per_mb
    stage[OTHER] = per_mb - sum(stage.values())
    return stage


def spread(values: list[float], fmt: str = "{:.3f}") -> str:
    low, high = min(values), max(values)
    return fmt.format(low) if len(values) == 1 else f"{fmt.format(low)}–{fmt.format(high)}"


async def main(args: argparse.Namespace) -> None:
    base = load(args.corpus)
    docs = repeated(base, args.min_mb)
    megabytes = sum(len(d.text.encode()) for d in docs) / 1e6
    print(f"corpus: {describe(base)}; repeated under new ids: {describe(docs)}", flush=True)
    print(f"worker settings beyond the defaults: {OVERRIDES or 'none'}", flush=True)
    rounds: dict[str, list[Round]] = defaultdict(list)
    profiles: dict[str, Profiled] = {}
    peers: list[PeerRun] = []
    per_record: dict[str, list[WorkerRun]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        bootstrap = start_broker(Path(tmp))
        try:
            # One input topic of JSON documents for every run: the worker (a fresh group each
            # time) and the peer read the very same records.
            input_topic = f"cost-docs-{uuid.uuid4().hex[:8]}"
            admin_settings = settings_for(bootstrap, "sentence", input_topic, "cost")
            await create_topics(
                admin_settings, {input_topic: 3}, max_message_bytes=16 * 1024 * 1024
            )
            await _produce(bootstrap, input_topic, docs, encoding="json")
            for number in range(1, args.rounds + 1):
                for strategy, events in [(s, e) for s in args.strategies for e in args.events]:
                    label = strategy if events == "writer" else f"{strategy} (reference events)"
                    run, settings = await worker_run(
                        bootstrap, strategy, input_topic, docs, None, events=events
                    )
                    records = await output_records(bootstrap, settings.output_topic)
                    if args.bare:
                        bare_cpu, bare_wall = await bare_producer(bootstrap, settings, records)
                    else:
                        bare_cpu = bare_wall = float("nan")
                    rounds[label].append(Round(number, run, len(records), bare_cpu, bare_wall))
                    if strategy in args.per_record and events == args.events[0]:
                        old, _ = await worker_run(
                            bootstrap, strategy, input_topic, docs, None, PerRecordPublisher
                        )
                        per_record[strategy].append(old)
                    if label not in profiles:
                        # CPU of this thread as the profiler's clock: time waiting for the GIL
                        # (held by a chunking thread) or for the network is not charged to
                        # whatever waited.
                        profile = cProfile.Profile(time.thread_time)
                        profiled, _ = await worker_run(
                            bootstrap, strategy, input_topic, docs, profile, events=events
                        )
                        if args.top:
                            pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
                        cpu = profiled.cpu_s or 1.0
                        profiles[label] = Profiled(
                            stage_shares(profile),
                            profiled.loop_cpu_s / cpu,
                            max(0.0, profiled.cpu_s - profiled.loop_cpu_s) / cpu,
                        )
                    print(f"round {number} {label}: done", flush=True)
                if args.peer:
                    peer_topic = f"quix-out-{uuid.uuid4().hex[:8]}"
                    await create_topics(admin_settings, {peer_topic: 3})
                    peers.append(
                        await asyncio.to_thread(
                            run_peer, bootstrap, input_topic, peer_topic, len(docs)
                        )
                    )
                    print(f"round {number} quix peer: done", flush=True)
        finally:
            subprocess.run(  # noqa: ASYNC221 - the benchmark is over
                [str(REPO / "deploy/kafka/local-kafka"), "stop", "--dir", tmp], check=False
            )
    print(f"\nthreads alive at the end: {threading.active_count()}; same process, same run\n")
    print(stage_table(rounds, profiles))
    print("\nper round:\n")
    print(round_table(rounds, profiles, peers, per_record, megabytes))


def stage_table(rounds: dict[str, list[Round]], profiles: dict[str, Profiled]) -> str:
    """Per strategy: CPU per MB and its stages, lowest–highest over the rounds."""
    lines = [
        "| strategy | MB | chunk events | worker CPU s/MB | "
        + " | ".join(f"{s} s/MB" for s in (*STAGES, OTHER))
        + " | non-chunk share | events/CPU-s worker | events/CPU-s bare producer "
        "| worker / bare |",
        "|---|" + "---:|" * (8 + len(STAGES)),
    ]
    for strategy, runs in rounds.items():
        stages = [stages_per_mb(r.run, profiles[strategy]) for r in runs]
        per_mb = [r.run.cpu_s / r.run.megabytes for r in runs]
        non_chunk = [1 - st["chunk"] / p for st, p in zip(stages, per_mb, strict=True)]
        lines.append(
            f"| {strategy} | {runs[0].run.megabytes:.1f} | {runs[0].run.chunks:,} "
            f"| {spread(per_mb)} | "
            + " | ".join(spread([st[s] for st in stages]) for s in (*STAGES, OTHER))
            + f" | {spread([n * 100 for n in non_chunk], '{:.0f}')} %"
            f" | {spread([r.worker_rate for r in runs], '{:,.0f}')}"
            f" | {spread([r.bare_rate for r in runs], '{:,.0f}')}"
            f" | {spread([r.worker_rate / r.bare_rate for r in runs], '{:.2f}')} |"
        )
    return "\n".join(lines)


def round_table(
    rounds: dict[str, list[Round]],
    profiles: dict[str, Profiled],
    peers: list[PeerRun],
    per_record: dict[str, list[WorkerRun]],
    megabytes: float,
) -> str:
    """Every measured pass: wall MB/s and CPU s/MB, with the same round's peer beside it."""
    lines = [
        "| round | what | MB/s (wall) | CPU s/MB | chunk events | events/CPU-s "
        "| ÷ bare producer (same round) | MB/s ÷ quix peer (same round) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    count = max(len(r) for r in rounds.values())
    for i in range(count):
        peer = peers[i] if i < len(peers) else None
        peer_rate = megabytes / peer.seconds if peer else None
        for strategy, runs in rounds.items():
            if i >= len(runs):
                continue
            r = runs[i]
            vs_peer = f"{r.run.megabytes / r.run.wall_s / peer_rate:.2f}" if peer_rate else "-"
            lines.append(
                f"| {r.number} | worker, {strategy} | {r.run.megabytes / r.run.wall_s:.2f} "
                f"| {r.run.cpu_s / r.run.megabytes:.3f} | {r.run.chunks:,} "
                f"| {r.worker_rate:,.0f} | {r.worker_rate / r.bare_rate:.2f} | {vs_peer} |"
            )
            if i < len(per_record.get(strategy, [])):
                old = per_record[strategy][i]
                old_vs_peer = f"{old.megabytes / old.wall_s / peer_rate:.2f}" if peer_rate else "-"
                lines.append(
                    f"| {r.number} | worker, {strategy}, per-record send (before) "
                    f"| {old.megabytes / old.wall_s:.2f} | {old.cpu_s / old.megabytes:.3f} "
                    f"| {old.chunks:,} | {old.chunks / old.cpu_s:,.0f} "
                    f"| {old.chunks / old.cpu_s / r.bare_rate:.2f} | {old_vs_peer} |"
                )
            if math.isnan(r.bare_cpu_s):
                continue  # --no-bare
            lines.append(
                f"| {r.number} | bare aiokafka producer, {strategy}'s events | "
                f"{r.run.megabytes / r.bare_wall_s:.2f} | {r.bare_cpu_s / r.run.megabytes:.3f} "
                f"| {r.events:,} | {r.bare_rate:,.0f} | 1.00 | - |"
            )
        if peer is not None:
            lines.append(
                f"| {i + 1} | quix peer (LangChain recursive splitter) | {peer_rate:.2f} "
                f"| {peer.cpu_s / megabytes:.3f} | {peer.chunks:,} "
                f"| {peer.chunks / peer.cpu_s:,.0f} | - | 1.00 |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.add_argument(
        "--min-mb", type=float, default=10.0, help="repeat the corpus to at least this many MB"
    )
    parser.add_argument("--rounds", type=int, default=2, help="passes per strategy, alternating")
    parser.add_argument("--strategies", nargs="+", default=["sentence", "adaptive", "lexical"])
    parser.add_argument(
        "--per-record",
        nargs="*",
        default=[],
        help="strategies also run with the per-record publisher (the before), same rounds",
    )
    parser.add_argument("--peer", action="store_true", help="run the Quix Streams peer per round")
    parser.add_argument(
        "--events",
        nargs="+",
        choices=["writer", "reference"],
        default=["writer"],
        help="chunk events by worker.wire.event_bytes (writer, what the worker runs) and/or by "
        "encoding ChunkEvent structs (reference: the worker before it); both alternate per round",
    )
    parser.add_argument(
        "--no-bare",
        dest="bare",
        action="store_false",
        help="skip the bare producer passes (their columns print nan)",
    )
    parser.add_argument("--top", type=int, default=0, help="print the N costliest functions")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a worker setting for every pass (and the bare producer), e.g. batch_size=1048576",
    )
    arguments = parser.parse_args()
    OVERRIDES.update(item.split("=", 1) for item in arguments.set)
    asyncio.run(main(arguments))
