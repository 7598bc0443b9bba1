"""The embedding strategies on real documents with the real model, beside chonkie's SemanticChunker.

    .venv/bin/python -m bench.semantic_bench [--max-kb 120] [--model DIR] [--threads 2]

Two corpora, both gathered at run time (nothing committed):
  * throughput: the long descriptions of installed packages (tests/support/corpus.py),
    smallest first up to ``--max-kb`` of UTF-8;
  * seam quality: the standard library's seam set, its held-out ``report`` half
    (tests/support/seams.py's ``seam_split``: blocks of different modules' docstrings, known
    seams), boundary precision/recall/F1 within ±1 sentence.

Every row embeds with the same OnnxEmbedder (fp32). Ours: ``plan`` → ``embed_batch`` (the
batcher's packing) → ``assemble``; the inference share is the embed step's part of the wall
time, the rest is our overhead. chonkie's SemanticChunker gets the same embedder through a
``BaseEmbeddings`` adapter; its inference share is the time spent inside the adapter. All rows
run in this process, one after another, so their ratios are comparable; absolute MB/s depend on
the machine and on whatever else shares its cores.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench.support.semantic_runs import Runner, Timed, chonkie_runner, ours, quality
from tests.support.corpus import Document, gather
from tests.support.seams import seam_split
from worker.models.onnx_embedder import OnnxEmbedder
from worker.models.reference import find


def throughput(run: Runner, embed: Timed, docs: list[Document]) -> tuple[float, float, int]:
    """Seconds for the corpus, the inference part of them, and texts embedded."""
    embed.seconds, embed.texts = 0.0, 0
    began = time.perf_counter()
    for doc in docs:
        run(doc.text)
    return time.perf_counter() - began, embed.seconds, embed.texts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-kb", type=int, default=120)
    parser.add_argument("--model", default=str(find("retrieval", None).directory))
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()

    embedder = OnnxEmbedder.load(Path(args.model), intra_op_threads=args.threads)
    embed = Timed(embedder)
    docs, size = [], 0
    for doc in sorted(gather(), key=lambda d: (len(d.text), d.name)):
        if size + len(doc.text.encode()) > args.max_kb * 1000:
            break
        docs.append(doc)
        size += len(doc.text.encode())
    seams = seam_split("report")
    print(
        f"throughput corpus: {len(docs)} package descriptions, {size / 1e6:.3f} MB; "
        f"seam corpus: {len(seams)} documents, {sum(len(d.seams) for d in seams)} seams"
    )

    rows: list[tuple[str, Runner]] = [(n, ours(n, args.model, embed)) for n in ("semantic", "sdpm")]
    for label, skip in (("chonkie semantic", 0), ("chonkie semantic skip_window=1", 1)):
        runner = chonkie_runner(embed, skip)
        if runner is not None:
            rows.append((label, runner))
    context = ours("context", args.model, embed)

    run(embed, docs[:3])  # warm the session up before anything is timed
    header = "| strategy | MB/s | texts embedded | inference share | our overhead | P | R | F1 |"
    print(header)
    print("|" + "---|" * 8)
    for label, runner in [*rows, ("context", context)]:
        seconds, inference, texts = throughput(runner, embed, docs)
        scores = quality(runner, seams) if label != "context" else None
        f1 = (
            f"{scores.precision:.3f} | {scores.recall:.3f} | {scores.f1:.3f}"
            if scores is not None
            else "– | – | –"
        )
        print(
            f"| {label} | {size / 1e6 / seconds:.4f} | {texts} | {inference / seconds:.1%} "
            f"| {(seconds - inference) / seconds:.1%} | {f1} |"
        )
    return 0


def run(embed: Timed, docs: list[Document]) -> None:
    for doc in docs:
        embed([doc.text[:200]])


if __name__ == "__main__":
    raise SystemExit(main())
