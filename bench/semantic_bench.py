"""The embedding strategies on real documents with the real model, beside chonkie's SemanticChunker.

    .venv/bin/python bench/semantic_bench.py [--max-kb 120] [--model DIR] [--threads 2]

Two corpora, both gathered at run time (nothing committed):
  * throughput: the long descriptions of installed packages (bench/corpus.py), smallest first up
    to ``--max-kb`` of UTF-8;
  * seam quality: bench/seams.py's held-out set (paragraph blocks of different packages, known
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
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import Document, gather
from bench.seams import Scores, SeamDocument, score, seam_split
from worker.chunking import registry
from worker.inference.batcher import embed_batch
from worker.models.onnx_embedder import OnnxEmbedder
from worker.models.reference import describe, find
from worker.pipeline import chunk_document_sync


class Timed:
    """An embed function that adds up the time spent in it."""

    def __init__(self, embedder: OnnxEmbedder) -> None:
        self.embedder = embedder
        self.seconds = 0.0
        self.texts = 0

    def __call__(self, texts: Sequence[str]) -> NDArray[np.float32]:
        began = time.perf_counter()
        out = embed_batch(self.embedder, list(texts))
        self.seconds += time.perf_counter() - began
        self.texts += len(texts)
        return out


Runner = Callable[[str], list[int]]  # document text → chunk start offsets


def ours(name: str, model_dir: str, embed: Timed) -> Runner:
    # As the worker builds it: sizes in the retrieval transformer's tokens.
    context = registry.BuildContext(
        boundary=describe(Path(model_dir), "boundary"), retrieval=find("retrieval", None)
    )
    built = registry.build(name, {}, context)
    assert built.needs_model

    def run(text: str) -> list[int]:
        chunks = chunk_document_sync(built, text, "text/plain", embed)
        return [c.start_index for c in chunks]

    return run


def chonkie_runner(embed: Timed, skip_window: int) -> Runner | None:
    try:
        from chonkie import SemanticChunker
        from chonkie.embeddings import BaseEmbeddings
    except ImportError:
        return None

    class Adapter(BaseEmbeddings):  # type: ignore[misc]
        """chonkie's embeddings interface over our embedder: the same vectors for both."""

        def embed(self, text: str) -> NDArray[np.float32]:
            return embed([text])[0]

        def embed_batch(self, texts: list[str]) -> list[NDArray[np.float32]]:
            return list(embed(texts))

        @property
        def dimension(self) -> int:
            return embed.embedder.dimension

        def get_tokenizer(self) -> Any:
            return "character"  # chunk_size in characters, as ours

    chunker = SemanticChunker(embedding_model=Adapter(), skip_window=skip_window)

    def run(text: str) -> list[int]:
        starts, cursor = [], 0
        for chunk in chunker.chunk(text):
            # chonkie's offsets count the text of earlier chunks; find each chunk for real.
            found = text.find(chunk.text.strip()[:80], cursor)
            position = found if found >= 0 else cursor
            starts.append(position)
            cursor = position + 1
        return starts

    return run


def throughput(run: Runner, embed: Timed, docs: list[Document]) -> tuple[float, float, int]:
    """Seconds for the corpus, the inference part of them, and texts embedded."""
    embed.seconds, embed.texts = 0.0, 0
    began = time.perf_counter()
    for doc in docs:
        run(doc.text)
    return time.perf_counter() - began, embed.seconds, embed.texts


def quality(run: Runner, docs: list[SeamDocument]) -> Scores:
    total = Scores(0, 0, 0)
    for doc in docs:
        total = total + score(doc.text, doc.seams, run(doc.text))
    return total


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
    seams = seam_split("heldout")
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
