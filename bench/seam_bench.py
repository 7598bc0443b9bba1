"""Boundary models on the pinned seam sets: seam P/R/F1 with their noise, and speed, in one run.

    .venv/bin/python -m bench.seam_bench [--split tune|report] [--static DIR ...]
        [--transformer DIR] [--strategies semantic sdpm] [--rounds 3] [--min-seconds 2]
        [--cache DIR]

Seams: the pinned seam sets of tests/support/seams.py (``tune`` by default; ``report`` is the
held-out set, measured for a final choice only). Each strategy runs at its defaults, built as
the worker builds it (``BuildContext(boundary=…, retrieval=the transformer)``), through
``worker.pipeline.chunk_document_sync`` and the batcher's ``embed_batch``: plan → embed →
assemble, the whole boundary pipeline. Models: the fp32 transformer, the default static
boundary model, and every ``--static`` directory.

Quality: micro P/R/F1 over the set, a 95 % bootstrap interval of F1 over documents and the
standard deviation of the per-document F1 (bench/support/seam_scores.py); each static model's F1
minus the transformer's on the same documents, with its paired interval. A cut at every paragraph is
the model-free reference.

Speed: MB/s of the boundary pipeline over the seam set's documents. Every (strategy, model) is
timed once per round, rounds interleave the rows, the median is kept; a row repeats the set until
``--min-seconds`` have passed. × transformer is the ratio to the transformer row of the same
strategy in this run. The load average is printed before and after: the machine is shared.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from bench.support.seam_scores import Summary, paired_difference, summarise
from tests.support.embedding import embed_batch
from tests.support.paragraphs import split_paragraphs
from tests.support.seam_blocks import DEFAULT_CACHE
from tests.support.seams import GENRES, Scores, SeamDocument, score, seam_set
from tests.support.splits import SPLITS
from worker.chunking import registry
from worker.models.backend import EmbeddingBackend
from worker.models.loading import load_backend
from worker.models.reference import ModelRef, describe, find
from worker.pipeline import chunk_document_sync

Chunker = Callable[[str], list[int]]  # document → chunk starts


def chunker(
    strategy: str, boundary: ModelRef, retrieval: ModelRef, backend: EmbeddingBackend
) -> Chunker:
    built = registry.build(
        strategy, {}, registry.BuildContext(boundary=boundary, retrieval=retrieval)
    )

    def run(text: str) -> list[int]:
        chunks = chunk_document_sync(
            built, text, "text/plain", lambda texts: embed_batch(backend, texts)
        )
        return [c.start_index for c in chunks]

    return run


def paragraph_cuts(text: str) -> list[int]:
    return [span.start for span in split_paragraphs(text)]


def per_document(run: Chunker, docs: list[SeamDocument]) -> list[Scores]:
    return [score(doc.text, doc.seams, run(doc.text)) for doc in docs]


def seconds_per_pass(run: Chunker, docs: list[SeamDocument], min_seconds: float) -> float:
    passes, began = 0, time.perf_counter()
    while True:
        for doc in docs:
            run(doc.text)
        passes += 1
        elapsed = time.perf_counter() - began
        if elapsed >= min_seconds:
            return elapsed / passes


def load_average() -> str:
    return " / ".join(f"{v:.1f}" for v in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=SPLITS, default="tune")
    parser.add_argument("--genres", nargs="+", choices=list(GENRES), default=list(GENRES))
    parser.add_argument("--static", type=Path, action="append", default=[])
    parser.add_argument("--transformer", type=Path, default=None)
    parser.add_argument("--strategies", nargs="+", default=["semantic", "sdpm"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-seconds", type=float, default=2.0)
    parser.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help="where the pinned source files are kept"
    )
    args = parser.parse_args()

    docs = seam_set(args.split, tuple(args.genres), args.cache)
    size = sum(len(d.text.encode()) for d in docs) / 1e6
    print(
        f"run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, seam set {args.split!r} "
        f"({', '.join(args.genres)}): {len(docs)} documents, "
        f"{sum(len(d.seams) for d in docs)} seams, {size:.3f} MB; "
        f"load average {load_average()}",
        flush=True,
    )
    transformer = (
        find("retrieval", None)
        if args.transformer is None
        else describe(args.transformer, "retrieval")
    )
    models: list[tuple[str, ModelRef]] = [
        ("transformer fp32", describe(transformer.directory, "boundary")),
        ("static (default)", find("boundary", None)),
    ]
    models += [(f"static {path.name}", describe(path, "boundary")) for path in args.static]
    backends = {label: load_backend(ref) for label, ref in models}

    rows: list[tuple[str, str, Chunker]] = [
        (strategy, label, chunker(strategy, ref, transformer, backends[label]))
        for strategy in args.strategies
        for label, ref in models
    ]
    scores = {(s, m): per_document(run, docs) for s, m, run in rows}  # also warms every row up
    seconds: dict[tuple[str, str], list[float]] = {(s, m): [] for s, m, _ in rows}
    for _ in range(args.rounds):
        for strategy, label, run in rows:
            seconds[strategy, label].append(seconds_per_pass(run, docs, args.min_seconds))

    print(f"\nload average after timing: {load_average()}\n")
    print(
        "| strategy | boundary model | P | R | F1 (95 % CI) | doc F1 sd | F1 − transformer "
        "(95 % CI) | MB/s | × transformer |"
    )
    print("|" + "---|" * 9)
    for strategy, label, _ in rows:
        summary: Summary = summarise(scores[strategy, label])
        mbps = size / statistics.median(seconds[strategy, label])
        base_label = models[0][0]
        base = size / statistics.median(seconds[strategy, base_label])
        if label == base_label:
            versus = "–"
        else:
            d, low, high = paired_difference(scores[strategy, label], scores[strategy, base_label])
            versus = f"{d:+.3f} ({low:+.3f}…{high:+.3f})"
        print(
            f"| {strategy} | {label} | {summary.row()} | {versus} | {mbps:.4f} | "
            f"{mbps / base:.1f}× |"
        )
    para = per_document(paragraph_cuts, docs)
    print(f"| cut at every paragraph | none | {summarise(para).row()} | | | |")

    genres = sorted({d.genre for d in docs})
    print("\nF1 by genre (95 % CI):\n")
    print("| strategy | boundary model | " + " | ".join(genres) + " |")
    print("|" + "---|" * (2 + len(genres)))
    for (strategy, label), found in [*scores.items(), (("paragraphs", "none"), para)]:
        cells = []
        for genre in genres:
            part = summarise([s for s, d in zip(found, docs, strict=True) if d.genre == genre])
            cells.append(f"{part.f1:.3f} ({part.f1_low:.2f}–{part.f1_high:.2f})")
        print(f"| {strategy} | {label} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
