"""End to end through a real local Kafka broker, beside the same work done in-process.

    .venv/bin/python -m bench.e2e_bench [--strategies sentence adaptive ...] [--plot docs/e2e.png]

For each strategy, in one process and one run:

* **in-process**: every corpus document is chunked (embedding strategies through the same
  shared micro-batcher and ONNX model the worker uses), all documents in flight at once, as
  the worker would hold them; no Kafka.
* **kafka**: the documents are produced to a fresh input topic first, then a `Worker` (the
  real one, in this process) consumes, chunks, publishes and commits them. The clock runs
  from the group's partition assignment (before the first fetch) to the last document
  acknowledged.

With ``--cores both``, ``adaptive`` and ``lexical`` (the strategies with a compiled core) run
twice more in the same run, alternating: on their compiled cores and on their pure-Python twins
(``CHUNKSTREAM_PURE_PYTHON=1``, the compiled cores' one switch, set for those passes),
and a second table gives core ÷ twin throughput per mode. ``--min-mb`` repeats the corpus (each
copy under new document ids) until it holds that many megabytes.

With ``--guarantee at-least-once exactly-once``, every worker pass runs under each processing
guarantee (CHUNKSTREAM_PROCESSING_GUARANTEE), taking turns going first, and a table gives
exactly-once ÷ at-least-once throughput. An exactly-once pass's clock stops only when the
transactions holding the last documents have committed (what a ``read_committed`` consumer
waits for), an at-least-once pass's at the last acknowledgement as before (its output is
visible then). Both endings are taken for both guarantees as well, and that table compares
them like for like: to the last acknowledgement, and to the last commit (nothing is done
again after a restart), where both pay the wait for the next commit interval. Only the default
document lifecycle runs under exactly-once (``--lifecycle both``'s append-only passes stay
at-least-once).

With ``--peer``, the Quix Streams + LangChain app of bench/support/quix_peer.py (a child process)
runs once after each rule strategy on the same documents, as JSON in a topic of its own: the peer
rows (each pass, best first).

Per-document latency: in the worker, decode → last chunk acknowledged, with the whole corpus
in flight at once (so it includes waiting behind the other documents); in-process, the
document's own chunking (plus embedding) time. p50/p99 are exact (raw samples). The
ratio column is Kafka throughput / in-process throughput. The corpus is the long descriptions
of the installed Python packages (tests/support/corpus.py), read at run time, never committed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.support.kafka_runs import (
    clock_from_assignment,
    kind,
    produce_documents,
    repeated,
    start_broker,
)
from bench.support.quix_peer import PeerRun, run_peer
from tests.support.corpus import Document, add_corpus_argument, describe, load
from worker.app import Worker
from worker.chunking import registry
from worker.chunking._native import PURE_PYTHON_ENV
from worker.chunking.rules import adaptive, lexical
from worker.config import load_settings
from worker.inference.batcher import Batcher
from worker.inference.serving import open_batcher
from worker.kafka.clients import create_topics, worker_topics
from worker.models.reference import describe as describe_model
from worker.models.reference import find
from worker.pipeline import chunk_document

REPO = Path(__file__).resolve().parent.parent

MODEL_DIR = find("retrieval", None).directory
# The boundary model of the embedding strategies: the transformer above, or with
# ``--model static`` the distilled static model (the worker's default boundary model).
STATIC_DIR = find("boundary", None).directory
# Worker settings for every Kafka pass (``--include-embeddings``: the int8 transformer makes
# the vector each chunk event carries).
EXTRA: dict[str, str] = {}
# Settings of the exactly-once passes only (--eos-commit-interval-ms).
EXACTLY_ONCE_EXTRA: dict[str, str] = {}


@dataclass
class Result:
    strategy: str
    mode: str
    cores: str
    documents: int
    megabytes: float
    seconds: float
    latencies: list[float]
    # Kafka passes: from the assignment to the last document acknowledged, and to the last
    # offset committed (for exactly-once ``seconds`` is the second).
    acknowledged_s: float = 0.0
    committed_s: float = 0.0

    @property
    def docs_per_s(self) -> float:
        return self.documents / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.megabytes / self.seconds

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def in_process(
    name: str, docs: Sequence[Document], batcher: Batcher | None, cores: str = "-"
) -> Result:
    context = registry.BuildContext(boundary=describe_model(MODEL_DIR, "boundary"))
    built = registry.build(name, {}, context)
    embed = batcher.submit if batcher is not None else None
    latencies: list[float] = []

    async def one(doc: Document) -> None:
        # The worker's own dispatch (worker/pipeline.py): large rule documents on a thread,
        # embedding strategies through the shared batcher.
        started = time.perf_counter()
        await chunk_document(built, doc.text, kind(doc), embed)
        latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(one(d) for d in docs))
    seconds = time.perf_counter() - started
    size = sum(len(d.text.encode()) for d in docs) / 1e6
    return Result(name, "in-process", cores, len(docs), size, seconds, latencies)


class _Recorder:
    """Stands in for the worker's per-document histogram to keep raw samples."""

    def __init__(self) -> None:
        self.samples: list[float] = []

    def labels(self, *_: str) -> _Recorder:
        return self

    def observe(self, value: float) -> None:
        self.samples.append(value)


async def through_kafka(
    name: str,
    docs: Sequence[Document],
    bootstrap: str,
    cores: str = "-",
    lifecycle: bool = True,
    guarantee: str = "at-least-once",
    until_commit: bool = False,
) -> Result:
    suffix = uuid.uuid4().hex[:8]
    settings = load_settings(
        {
            "bootstrap_servers": bootstrap,
            "group_id": f"bench-{suffix}",
            "input_topic": f"bench-in-{suffix}",
            "output_topic": f"bench-out-{suffix}",
            "dlq_topic": f"bench-dlq-{suffix}",
            "strategy": name,
            "metrics_port": "0",
            "model_dir": str(MODEL_DIR),
            "document_lifecycle": str(lifecycle).lower(),
            "processing_guarantee": guarantee,
            **EXTRA,
            **(EXACTLY_ONCE_EXTRA if guarantee == "exactly-once" else {}),
        },
        env={},
    )
    topics, configs = worker_topics(settings, 3)
    await create_topics(settings, topics, max_message_bytes=16 * 1024 * 1024, configs=configs)
    await produce_documents(bootstrap, settings.input_topic, docs)
    worker = Worker(settings)
    recorder = _Recorder()
    worker.metrics.document_seconds = recorder  # type: ignore[assignment]
    with clock_from_assignment() as marks:
        task = asyncio.create_task(worker.run())
        while not marks:
            if task.done():
                raise RuntimeError(f"worker stopped early: {task.result()}")
            await asyncio.sleep(0.01)
    started = marks[0][2]
    while len(recorder.samples) + worker.metrics.totals().dead_letters < len(docs):
        if task.done():
            raise RuntimeError(f"worker stopped early: {task.result()}")
        await asyncio.sleep(0.001)
    seconds = time.perf_counter() - started
    acknowledged = committed = seconds
    if guarantee == "exactly-once" or until_commit:
        # With exactly-once the output is visible to read_committed consumers only once the
        # transactions that hold it commit (at the next commit interval).
        await until_committed(worker, task)
        committed = time.perf_counter() - started
    if guarantee == "exactly-once":
        seconds = committed
    worker.request_stop()
    await task
    size = sum(len(d.text.encode()) for d in docs) / 1e6
    mode = "kafka" if lifecycle else KAFKA_APPEND_ONLY
    if guarantee == "exactly-once":
        mode = KAFKA_EXACTLY_ONCE
    result = Result(name, mode, cores, len(docs), size, seconds, recorder.samples)
    result.acknowledged_s = acknowledged
    result.committed_s = committed
    return result


async def until_committed(worker: Worker, task: asyncio.Task[int]) -> None:
    """Wait until no owned partition has records taken and not committed."""
    running = worker._running  # the bench reads the loop's commit progress
    assert running is not None
    loop = running.loop
    while any(loop.uncommitted(tp) for tp in loop.owned):
        if task.done():
            raise RuntimeError(f"worker stopped early: {task.result()}")
        await asyncio.sleep(0.001)


# The worker with CHUNKSTREAM_DOCUMENT_LIFECYCLE=false (no state topic, no retractions): the
# throughput before the document lifecycle existed, for ``--lifecycle both``.
KAFKA_APPEND_ONLY = "kafka (append-only)"
# The worker with CHUNKSTREAM_PROCESSING_GUARANTEE=exactly-once, for ``--guarantee``.
KAFKA_EXACTLY_ONCE = "kafka (exactly-once)"


# The strategies with a compiled core, and the module whose compiled() gives it.
CORE_MODULES = {"adaptive": adaptive, "lexical": lexical}


@contextlib.contextmanager
def cores_as(name: str, cores: str) -> Iterator[None]:
    """Run ``name`` on its compiled core ("native") or its pure-Python twin ("twin": the
    cores' switch, read at each request for a core, set meanwhile)."""
    if name not in CORE_MODULES or cores != "twin":
        yield
        return
    saved = os.environ.get(PURE_PYTHON_ENV)
    os.environ[PURE_PYTHON_ENV] = "1"
    try:
        yield
    finally:
        if saved is None:
            del os.environ[PURE_PYTHON_ENV]
        else:
            os.environ[PURE_PYTHON_ENV] = saved


def size_of(docs: Sequence[Document]) -> float:
    return sum(len(d.text.encode()) for d in docs) / 1e6


async def peer_documents(bootstrap: str, docs: Sequence[Document]) -> str:
    """The corpus as JSON documents in a topic of their own, for the peer's passes."""
    topic = f"peer-in-{uuid.uuid4().hex[:8]}"
    admin = load_settings({"bootstrap_servers": bootstrap}, env={})
    await create_topics(admin, {topic: 3}, max_message_bytes=16 * 1024 * 1024)
    await produce_documents(bootstrap, topic, docs, encoding="json")
    return topic


async def peer_pass(bootstrap: str, input_topic: str, documents: int) -> PeerRun:
    """One pass of bench/support/quix_peer.py (a child process) over ``input_topic``."""
    output = f"peer-out-{uuid.uuid4().hex[:8]}"
    admin = load_settings({"bootstrap_servers": bootstrap}, env={})
    await create_topics(admin, {output: 3})
    return await asyncio.to_thread(run_peer, bootstrap, input_topic, output, documents)


def peer_rows(peers: list[tuple[PeerRun, float]]) -> str:
    """The Quix Streams peer's passes (best first), in the columns of :func:`table`."""
    rows = []
    for peer, megabytes in sorted(peers, key=lambda p: p[0].seconds):
        rows.append(
            f"| quix peer (LangChain recursive, 1000) | - | kafka | {peer.documents} "
            f"| {megabytes:.1f} | {peer.documents / peer.seconds:,.1f} "
            f"| {megabytes / peer.seconds:.2f} | - | - | - |"
        )
    return "\n".join(rows)


def table(results: list[Result]) -> str:
    rows = [
        "| strategy | cores | mode | docs | MB | docs/s | MB/s | p50 latency ms "
        "| p99 latency ms | kafka / in-process |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    baseline: dict[tuple[str, str], Result] = {}
    for r in results:
        if r.mode == "in-process":
            baseline[(r.strategy, r.cores)] = r
        base = baseline[(r.strategy, r.cores)]
        ratio = r.docs_per_s / base.docs_per_s if r.mode != "in-process" else 1.0
        rows.append(
            f"| {r.strategy} | {r.cores} | {r.mode} | {r.documents} | {r.megabytes:.1f} "
            f"| {r.docs_per_s:,.1f} | {r.mb_per_s:.2f} | {r.percentile(0.5) * 1000:,.1f} "
            f"| {r.percentile(0.99) * 1000:,.1f} | {ratio:.2f} |"
        )
    return "\n".join(rows)


def cores_table(results: list[Result]) -> str:
    """Compiled core ÷ pure-Python twin, per strategy and mode (same run)."""
    by = {(r.strategy, r.cores, r.mode): r for r in results}
    rows = [
        "| strategy | mode | core MB/s | twin MB/s | core ÷ twin |",
        "|---|---|---:|---:|---:|",
    ]
    for name in dict.fromkeys(r.strategy for r in results if r.cores == "twin"):
        for mode in ("in-process", "kafka"):
            core, twin = by[(name, "native", mode)], by[(name, "twin", mode)]
            rows.append(
                f"| {name} | {mode} | {core.mb_per_s:.2f} | {twin.mb_per_s:.2f} "
                f"| {core.mb_per_s / twin.mb_per_s:.2f}x |"
            )
    return "\n".join(rows)


def lifecycle_table(results: list[Result], paired: dict[tuple[str, str], list[float]]) -> str:
    """Best with ÷ best without, and the median of each round's own ratio: the two passes of a
    round run back to back, so the load of a shared machine falls on both alike; best-of
    alone follows whichever pass happened to get a quiet moment."""
    rows = [
        "| strategy | lifecycle MB/s | append-only MB/s | best ÷ best "
        "| median of the rounds' ratios | rounds' ratios, low-high |"
    ]
    rows.append("|---|---:|---:|---:|---:|---|")
    by = {(r.strategy, r.mode, r.cores): r for r in results}
    for r in results:
        if r.mode != "kafka":
            continue
        off = by.get((r.strategy, KAFKA_APPEND_ONLY, r.cores))
        if off is not None:
            ratios = sorted(paired.get((r.strategy, r.cores), []))
            median = f"{statistics.median(ratios):.2f} ({len(ratios)})" if ratios else "-"
            spread = f"{ratios[0]:.2f}-{ratios[-1]:.2f}" if ratios else "-"
            rows.append(
                f"| {r.strategy} | {r.mb_per_s:.2f} | {off.mb_per_s:.2f} "
                f"| {r.mb_per_s / off.mb_per_s:.2f} | {median} | {spread} |"
            )
    return "\n".join(rows)


# The endings of a Kafka pass the guarantee table compares, by the Result field that holds it.
ENDINGS = {"last ack": "acknowledged_s", "last commit": "committed_s"}


def guarantee_table(results: list[Result], paired: dict[tuple[str, str, str], list[float]]) -> str:
    """Exactly-once ÷ at-least-once MB/s per ending (the last acknowledgement; the last
    commit), best ÷ best and the median of each round's own ratio (the two passes of a round
    run back to back, taking turns going first); then exactly-once to its last commit (its
    output visible) ÷ at-least-once to its last acknowledgement (its output visible)."""
    rows = [
        "| strategy | clock stops at | at-least-once MB/s | exactly-once MB/s | best ÷ best "
        "| median of the rounds' ratios | rounds' ratios, low-high |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    by = {(r.strategy, r.mode, r.cores): r for r in results}
    for r in results:
        if r.mode != "kafka":
            continue
        eos = by.get((r.strategy, KAFKA_EXACTLY_ONCE, r.cores))
        if eos is None:
            continue
        for ending, field in [*ENDINGS.items(), ("output visible", "")]:
            alo_s = getattr(r, field or "acknowledged_s")
            eos_s = getattr(eos, field or "committed_s")
            ratios = sorted(paired.get((r.strategy, r.cores, ending), []))
            median = f"{statistics.median(ratios):.2f} ({len(ratios)})" if ratios else "-"
            spread = f"{ratios[0]:.2f}-{ratios[-1]:.2f}" if ratios else "-"
            label = ending if field else "output visible (ack ÷ commit)"
            rows.append(
                f"| {r.strategy} | {label} | {r.megabytes / alo_s:.2f} "
                f"| {eos.megabytes / eos_s:.2f} | {alo_s / eos_s:.2f} | {median} | {spread} |"
            )
    return "\n".join(rows)


def plot(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r.strategy for r in results))
    by = {(r.strategy, r.mode): r for r in results}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.38
    xs = range(len(names))
    for offset, mode in ((-width / 2, "in-process"), (width / 2, "kafka")):
        ax1.bar(
            [x + offset for x in xs], [by[(n, mode)].mb_per_s for n in names], width, label=mode
        )
        ax2.bar(
            [x + offset for x in xs],
            [by[(n, mode)].percentile(0.5) * 1000 for n in names],
            width,
            label=f"{mode} p50",
        )
    ax1.set_title("Throughput (MB/s, log scale, higher is better)")
    ax2.set_title("Per-document latency p50 (ms, log scale, lower is better)")
    for ax in (ax1, ax2):
        # Rule strategies and embedding strategies differ by ~1000x: only a log axis shows both.
        ax.set_yscale("log")
        ax.set_xticks(list(xs), names)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


async def main(args: argparse.Namespace) -> None:
    docs = repeated(load(args.corpus)[: args.docs], args.min_mb)
    print(f"corpus: {describe(docs)}")
    native = "built" if adaptive.compiled() is not None else "not built or not allowed"
    print(f"compiled cores: {native}")
    names = [n for n in args.strategies if n in registry.names()]
    missing = sorted(set(args.strategies) - set(names))
    if missing:
        print(f"not registered, skipped: {', '.join(missing)}")
    needs_model = any(registry.get(n).needs_model for n in names)
    batcher_cm: Any = None
    if needs_model:
        # The batcher the worker builds from the same (default) settings.
        batcher_cm = open_batcher(load_settings({"model_dir": str(MODEL_DIR)}, env={}))
    with tempfile.TemporaryDirectory() as tmp:
        bootstrap = args.bootstrap or start_broker(Path(tmp))
        results: list[Result] = []
        paired: dict[tuple[str, str], list[float]] = {}
        paired_guarantee: dict[tuple[str, str, str], list[float]] = {}
        peers: list[tuple[PeerRun, float]] = []
        try:
            peer_input = await peer_documents(bootstrap, docs) if args.peer else None
            batcher = await batcher_cm.__aenter__() if batcher_cm else None
            for name in names:
                subset = docs
                if registry.get(name).needs_model and args.embedding_docs:
                    # Inference is ~100x slower than rule chunking: a subset keeps the run short.
                    subset = docs[: args.embedding_docs]
                variants = ["native", "twin"] if args.cores == "both" else [args.cores]
                if name not in CORE_MODULES or adaptive.compiled() is None:
                    variants = ["-"]  # no core, or the cores are not built/allowed here
                # An untimed pass first: lazy imports, regex caches and the model's first
                # batches must not count against whichever mode runs first. Then the modes
                # (and the core variants) alternate, best of `--repeat` each, so load from
                # other work on a shared machine falls on all alike.
                await in_process(name, subset[:10], batcher)
                # And an untimed pass through Kafka: the broker's JIT warms up over the first
                # tens of MB (its CPU per MB fell 3x from the first pass to the third), which
                # otherwise falls on whichever worker mode runs first.
                await through_kafka(name, subset, bootstrap)
                if "exactly-once" in args.guarantee:
                    # The first transactions also create the broker's transaction log topic.
                    await through_kafka(name, subset, bootstrap, guarantee="exactly-once")
                best: dict[tuple[str, str], Result] = {}
                for round_number in range(args.repeat):
                    for cores in variants:
                        with cores_as(name, cores):
                            runs = [await in_process(name, subset, batcher, cores)]
                            lifecycles = [True, False] if args.lifecycle == "both" else [True]
                            if round_number % 2:  # the two worker modes take turns going first
                                lifecycles.reverse()
                            passes: dict[bool, float] = {}
                            guarantees = list(args.guarantee)
                            if round_number % 2:  # and so do the guarantees
                                guarantees.reverse()
                            by_guarantee: dict[str, Result] = {}
                            for lifecycle in lifecycles:
                                for guarantee in guarantees if lifecycle else ["at-least-once"]:
                                    run = await through_kafka(
                                        name,
                                        subset,
                                        bootstrap,
                                        cores,
                                        lifecycle,
                                        guarantee,
                                        until_commit=len(args.guarantee) > 1,
                                    )
                                    if lifecycle:
                                        by_guarantee[guarantee] = run
                                    if guarantee == "at-least-once":
                                        passes[lifecycle] = run.seconds
                                    runs.append(run)
                            if len(passes) == 2:  # MB/s with ÷ without = seconds without ÷ with
                                ratio = passes[False] / passes[True]
                                paired.setdefault((name, cores), []).append(ratio)
                            if len(by_guarantee) == 2:  # exactly-once ÷ at-least-once MB/s
                                alo = by_guarantee["at-least-once"]
                                eos = by_guarantee["exactly-once"]
                                pairs = [
                                    *(
                                        (e, getattr(alo, f), getattr(eos, f))
                                        for e, f in ENDINGS.items()
                                    ),
                                    ("output visible", alo.acknowledged_s, eos.committed_s),
                                ]
                                for ending, alo_s, eos_s in pairs:
                                    key = (name, cores, ending)
                                    paired_guarantee.setdefault(key, []).append(alo_s / eos_s)
                            for result in runs:
                                kept = best.get((result.mode, cores))
                                if kept is None or result.seconds < kept.seconds:
                                    best[(result.mode, cores)] = result
                for cores in variants:
                    results.append(best[("in-process", cores)])
                    for mode in ("kafka", KAFKA_EXACTLY_ONCE, KAFKA_APPEND_ONLY):
                        if (mode, cores) in best:
                            results.append(best[(mode, cores)])
                print(f"{name}: done", flush=True)
                if peer_input is not None and not registry.get(name).needs_model:
                    # One peer pass after each rule strategy: it alternates with the worker.
                    peers.append((await peer_pass(bootstrap, peer_input, len(docs)), size_of(docs)))
                    print("quix peer: done", flush=True)
            if batcher_cm:
                await batcher_cm.__aexit__(None, None, None)
        finally:
            if not args.bootstrap:
                subprocess.run(  # noqa: ASYNC221 - the benchmark is over
                    [str(REPO / "deploy/kafka/local-kafka"), "stop", "--dir", tmp], check=False
                )
    print(f"\n{os.cpu_count()} CPUs; same process, same run\n")
    print(table(results))
    if peers:
        print(peer_rows(peers))
    if any(r.mode == KAFKA_APPEND_ONLY for r in results):
        print("\nkafka with the document lifecycle ÷ append-only (no state), same run:\n")
        print(lifecycle_table(results, paired))
    if any(r.mode == KAFKA_EXACTLY_ONCE for r in results):
        print("\nkafka exactly-once ÷ at-least-once, same run:\n")
        print(guarantee_table(results, paired_guarantee))
    if any(r.cores == "twin" for r in results):
        print("\ncompiled core ÷ pure-Python twin, same run:\n")
        print(cores_table(results))
    if args.plot:
        plot(results, Path(args.plot))
        print(f"\nplot: {args.plot}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.add_argument(
        "--strategies",
        nargs="+",
        default=["sentence", "adaptive", "lexical", "semantic", "sdpm", "context"],
    )
    parser.add_argument("--docs", type=int, default=None, help="use only the first N documents")
    parser.add_argument("--repeat", type=int, default=2, help="passes per mode (best kept)")
    parser.add_argument(
        "--embedding-docs",
        type=int,
        default=15,
        help="embedding strategies use only the first N documents (0 = all)",
    )
    parser.add_argument("--bootstrap", default=None, help="use this broker instead of a new one")
    parser.add_argument(
        "--cores",
        choices=["native", "twin", "both"],
        default="native",
        help="adaptive/lexical on their compiled cores, their Python twins, or both (same run)",
    )
    parser.add_argument(
        "--min-mb", type=float, default=0.0, help="repeat the corpus to at least this many MB"
    )
    parser.add_argument("--plot", default=None, help="write a PNG plot here")
    parser.add_argument(
        "--lifecycle",
        choices=["on", "both"],
        default="on",
        help="both: each worker pass also without the document lifecycle (same run)",
    )
    parser.add_argument(
        "--guarantee",
        nargs="+",
        choices=["at-least-once", "exactly-once"],
        default=["at-least-once"],
        help="the processing guarantees each worker pass runs under (same run; both: a table "
        "of exactly-once ÷ at-least-once)",
    )
    parser.add_argument(
        "--eos-commit-interval-ms",
        type=int,
        default=None,
        help="CHUNKSTREAM_COMMIT_INTERVAL_MS of the exactly-once passes (default: the worker's "
        "default under exactly-once)",
    )
    parser.add_argument(
        "--peer",
        action="store_true",
        help="run the Quix Streams + LangChain peer (bench/support/quix_peer.py) after each "
        "rule strategy",
    )
    parser.add_argument(
        "--model",
        choices=["transformer", "static"],
        default="transformer",
        help="boundary model of the embedding strategies (static: the distilled static model)",
    )
    parser.add_argument(
        "--include-embeddings",
        action="store_true",
        help="worker passes with CHUNKSTREAM_INCLUDE_EMBEDDINGS (the int8 transformer's vector "
        "on every chunk event)",
    )
    arguments = parser.parse_args()
    if arguments.model == "static":
        MODEL_DIR = STATIC_DIR
    if arguments.eos_commit_interval_ms is not None:
        EXACTLY_ONCE_EXTRA["commit_interval_ms"] = str(arguments.eos_commit_interval_ms)
    if arguments.include_embeddings:
        EXTRA.update(
            include_embeddings="true",
            retrieval_model_dir=str(find("retrieval", None).directory),
            model_int8="true",
        )
    asyncio.run(main(arguments))
