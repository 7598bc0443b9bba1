"""A·B·A documents: does a strategy rejoin a topic resumed after a short digression?

Each document is a topic A (prose paragraphs of one installed package's description), a short
digression B (one paragraph of another package's), then A again (the next paragraphs of the
first package). Built at run time from bench/corpus.py like bench/seams.py: nothing is
downloaded or committed. The truth: A's two halves belong together, B stands apart.

Per strategy the table gives, over all documents:

* rejoined: documents where the last sentence before B and the first sentence after it end
  up in one chunk (the resumed topic joined to its start; B then sits inside that chunk,
  since chunks are contiguous);
* split at resume: documents with a chunk starting at A's resumption (within ±1 sentence);
* seam P / R / F1 on a bench/seams.py set (``--split``, default ``heldout``), the figure the
  second pass must not lose against `semantic`.

Run: ``.venv/bin/python bench/aba_bench.py [--model DIR]`` (default: the ONNX transformer; any
model directory works, e.g. the distilled static boundary model). Chunking goes through
``worker.pipeline.chunk_document_sync`` and the batcher's ``embed_batch``, as the other benches.
"""

from __future__ import annotations

import argparse
import sys
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import gather
from bench.seams import SPLITS, Scores, prose_paragraphs, score, seam_split
from worker.chunking import registry
from worker.chunking.text.segment import split_sentences
from worker.chunking.types import Chunk
from worker.inference.batcher import embed_batch
from worker.models.backend import EmbeddingBackend
from worker.models.loading import load_backend
from worker.models.reference import describe, find
from worker.pipeline import chunk_document_sync


class ABADocument(msgspec.Struct, frozen=True):
    text: str
    digression: int  # where B starts
    resume: int  # where A resumes
    topic: str
    other: str


def aba_documents(count: int = 16, max_chars: int = 1000) -> list[ABADocument]:
    """Up to ``count`` documents: two paragraphs of A, one of B, two more of A, each document
    under ``max_chars`` (within the default cap of 254 transformer tokens, so the cap never
    decides)."""
    topics: list[tuple[str, list[str]]] = []
    digressions: list[tuple[str, str]] = []
    for doc in gather():
        paragraphs = [p for p in prose_paragraphs(doc.text) if len(p) <= 240]
        if len(paragraphs) >= 4:
            topics.append((doc.name, paragraphs[:4]))
        elif paragraphs:
            digressions.append((doc.name, paragraphs[0]))
    documents: list[ABADocument] = []
    for n, (name, paragraphs) in enumerate(topics):
        if len(documents) == count or not digressions:
            break
        other, digression = digressions[n % len(digressions)]
        before = "\n\n".join(paragraphs[:2])
        after = "\n\n".join(paragraphs[2:])
        text = f"{before}\n\n{digression}\n\n{after}"
        if len(text) > max_chars:
            continue
        start_b = len(before) + 2
        resume = start_b + len(digression) + 2
        documents.append(ABADocument(text, start_b, resume, name, other))
    return documents


Runner = Callable[[str], list[Chunk]]


def runner(name: str, params: dict[str, Any], model_dir: str, embedder: EmbeddingBackend) -> Runner:
    # As the worker builds it: sizes in the retrieval transformer's tokens.
    context = registry.BuildContext(
        boundary=describe(Path(model_dir), "boundary"), retrieval=find("retrieval", None)
    )
    built = registry.build(name, params, context)

    def run(text: str) -> list[Chunk]:
        return chunk_document_sync(
            built, text, "text/plain", lambda texts: embed_batch(embedder, texts)
        )

    return run


def aba_scores(run: Runner, docs: list[ABADocument]) -> tuple[int, int]:
    rejoined = split = 0
    for doc in docs:
        chunks = run(doc.text)
        starts = [c.start_index for c in chunks]
        sentences = split_sentences(doc.text)
        last_before = [s for s in sentences if s.end <= doc.digression][-1]
        first_after = next(s for s in sentences if s.start >= doc.resume)
        same = bisect_right(starts, last_before.start) == bisect_right(starts, first_after.start)
        rejoined += same
        split += score(doc.text, [doc.resume], starts).matched
    return rejoined, split


def seam_scores(run: Runner, split: str) -> Scores:
    total = Scores(0, 0, 0)
    for doc in seam_split(split):
        total = total + score(doc.text, doc.seams, [c.start_index for c in run(doc.text)])
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default=None, help="model dir (default: the transformer on the search path)"
    )
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--split", choices=SPLITS, default="heldout", help="seam set")
    args = parser.parse_args()
    args.model = str(find("retrieval", args.model).directory)
    embedder = load_backend(describe(Path(args.model), "boundary"))
    print(f"model: {args.model}")
    docs = aba_documents(args.count)
    seams = seam_split(args.split)
    print(
        f"A·B·A corpus: {len(docs)} documents; seam set {args.split}: {len(seams)} documents, "
        f"{sum(len(d.seams) for d in seams)} seams"
    )
    rows: list[tuple[str, str, dict[str, Any]]] = [
        ("semantic", "semantic", {}),
        ("sdpm (defaults: level = non-valley percentile, skip_window=2)", "sdpm", {}),
        ("sdpm skip_window=1", "sdpm", {"skip_window": 1}),
        ("sdpm merge_threshold=0.8 skip_window=1 (the old defaults)", "sdpm",
         {"merge_threshold": 0.8, "skip_window": 1}),
        ("sdpm merge_threshold=0.5", "sdpm", {"merge_threshold": 0.5}),
    ]  # fmt: skip
    print("| strategy | rejoined | split at resume | seam P | seam R | seam F1 |")
    print("|---|---|---|---|---|---|")
    for label, name, params in rows:
        run = runner(name, params, args.model, embedder)
        rejoined, split = aba_scores(run, docs)
        seam = seam_scores(run, args.split)
        print(
            f"| {label} | {rejoined}/{len(docs)} | {split}/{len(docs)} | "
            f"{seam.precision:.3f} | {seam.recall:.3f} | {seam.f1:.3f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
