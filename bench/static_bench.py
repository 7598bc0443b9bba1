"""Boundary models side by side: the transformer (fp32, int8) and static models distilled from it.

    .venv/bin/python -m bench.static_bench [--max-kb 40] [--model DIR] [--threads 2]
                                           [--min-seconds 2] [--rounds 3] [--no-chonkie]

One run, the same documents for every row (bench/semantic_bench.py's two corpora: the smallest
installed package descriptions up to ``--max-kb`` for speed, tests/support/seams.py's documents for
seam precision/recall/F1). Rows:

* ``semantic`` and ``sdpm`` at their defaults on each boundary model: fp32 and int8
  ``model.onnx``, then every static variant tried (docs/benchmarks.md, "Boundary models").
  The variants are made here from
  one pair of encoder passes over the pinned training corpus (single tokens; per-token hidden
  states), cached in ``.cache/distill/`` — the passes are what ``chunkstream model distill``
  runs, the variants differ only in the numpy fitting after them. ``shipped`` is exactly
  ``distill``'s recipe (:func:`worker.model_making.distill.fit`).
* the paragraph baseline: a boundary at every paragraph (no model);
* chonkie's SemanticChunker (defaults) on the fp32 transformer, and on the shipped static model.

Speed: MB/s over the throughput corpus, the corpus run as many times as it takes to fill
``--min-seconds`` (static rows finish one pass in tenths of a second), every row timed once per
round for ``--rounds`` rounds and the median kept; ratios are to the fp32 row of the same
strategy. Everything runs in this process one row after another, so the ratios are
comparable; absolute MB/s depend on what else shares the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import sys
import time
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from bench.support.semantic_runs import Runner, Timed, chonkie_runner, ours, quality
from tests.support.corpus import Document, gather
from tests.support.paragraphs import split_paragraphs
from tests.support.seams import Scores, SeamDocument, seam_documents
from worker.model_making import static_fit
from worker.model_making.distill import Recipe, fit
from worker.model_making.encoder_passes import Encoder
from worker.model_making.training_corpus import training_sentences
from worker.models.onnx_embedder import OnnxEmbedder
from worker.models.static import StaticEmbedder, StaticModel, _median_token_chars, _unk_id

F64 = NDArray[np.float64]


def encoder_passes(model_dir: Path, threads: int | None) -> dict[str, NDArray[np.generic]]:
    """Single-token vectors and corpus states, cached by the encoder's and corpus's digests."""
    sentences = training_sentences()
    key = hashlib.sha256(
        (model_dir / "model.onnx").read_bytes() + "\n".join(sentences).encode()
    ).hexdigest()[:16]
    cache = Path(".cache/distill") / f"passes-{key}.npz"
    if cache.is_file():
        with np.load(cache) as stored:
            return dict(stored)
    encoder = Encoder(model_dir, threads=threads)
    began = time.perf_counter()
    single = encoder.single_tokens()
    states = encoder.corpus(sentences)
    print(f"encoder passes: {time.perf_counter() - began:.0f} s", file=sys.stderr)
    lengths = np.array([len(ids) for ids in states.token_ids])
    passes: dict[str, NDArray[np.generic]] = {
        "single": single,
        "vectors": states.sentence_vectors,
        "sums": states.state_sums,
        "counts": states.state_counts,
        "flat": np.concatenate(states.token_ids),
        "lengths": lengths,
    }
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, **passes)  # type: ignore[arg-type]
    return passes


def variants(passes: dict[str, NDArray[np.generic]]) -> dict[str, F64]:
    """Every recipe tried, by name (what each does is the code below)."""
    single = passes["single"].astype(np.float64)
    counts = passes["counts"].astype(np.int64)
    contextual = static_fit.contextual_means(passes["sums"].astype(np.float64), counts)
    seen = counts >= 5
    mapped = single @ static_fit.linear_map(single[seen], contextual[seen])
    blended = static_fit.blend(contextual, counts, mapped, 5.0)
    sif = static_fit.sif_weights(counts, 3e-4)[:, None]

    flat, lengths = passes["flat"].astype(np.int64), passes["lengths"].astype(np.int64)
    keep = lengths > 0
    sentences = static_fit.Sentences.of(np.split(flat, np.cumsum(lengths)[:-1]))
    targets = passes["vectors"].astype(np.float64)[keep]
    scale = np.median(
        np.linalg.norm(
            np.add.reduceat(single[sentences.flat], sentences.starts, axis=0)
            / sentences.lengths[:, None],
            axis=1,
        )
    )
    ridge = static_fit.fit_ridge(sentences, targets * scale, single, ridge=1.0, iterations=25)

    out: dict[str, F64] = {
        "naive 384": single,
        "naive PCA256 SIF": static_fit.principal_axes(single, 256, centre=True)
        * static_fit.sif_weights(counts, 1e-4)[:, None],
        "ridge→naive SIF": ridge * sif,
        "contextual 384": blended,
        "contextual SIF 384": blended * sif,
        "contextual SIF PCA256": static_fit.principal_axes(blended * sif, 256, centre=True),
        "contextual SIF axes128": static_fit.principal_axes(blended * sif, 128, centre=False),
    }
    out["shipped (contextual SIF axes256)"] = fit(
        single, passes["sums"].astype(np.float64), counts, Recipe()
    ).astype(np.float64)
    return out


def static_embedder(matrix: F64, model_dir: Path) -> StaticEmbedder:
    """The shipped embedder over an in-memory matrix (what a written directory would load)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=512)
    model = StaticModel(
        directory=model_dir,
        matrix=np.ascontiguousarray(matrix, dtype=np.float32),
        mapping=None,
        weights=None,
        tokenizer=tokenizer,
        unk_id=_unk_id(tokenizer),
        normalize=True,
        max_length=512,
        max_chars=512 * _median_token_chars(tokenizer),
        identity="bench",
    )
    return StaticEmbedder(model)


def paragraph_runner(text: str) -> list[int]:
    return [span.start for span in split_paragraphs(text)]


def timed_throughput(
    run: Runner, embed: Timed | None, docs: list[Document], min_seconds: float
) -> tuple[float, int, int]:
    """Seconds per corpus pass (averaged over enough passes), texts per pass, passes."""
    if embed is not None:
        embed.seconds, embed.texts = 0.0, 0
    passes, began = 0, time.perf_counter()
    while True:
        for doc in docs:
            run(doc.text)
        passes += 1
        elapsed = time.perf_counter() - began
        if elapsed >= min_seconds:
            break
    texts = embed.texts // passes if embed is not None else 0
    return elapsed / passes, texts, passes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-kb", type=int, default=40)
    parser.add_argument("--model", type=Path, default=Path(".cache/models/all-MiniLM-L6-v2"))
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--min-seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3, help="speed: median of this many")
    parser.add_argument("--no-chonkie", action="store_true")
    args = parser.parse_args()

    docs, size = [], 0
    for doc in sorted(gather(), key=lambda d: (len(d.text), d.name)):
        if size + len(doc.text.encode()) > args.max_kb * 1000:
            break
        docs.append(doc)
        size += len(doc.text.encode())
    seams: list[SeamDocument] = seam_documents()
    print(
        f"run {dt.date.today()}: throughput corpus {len(docs)} package descriptions, "
        f"{size / 1e6:.3f} MB; seam corpus {len(seams)} documents, "
        f"{sum(len(d.seams) for d in seams)} seams"
    )

    boundary_models: list[tuple[str, Timed]] = [
        ("fp32", Timed(OnnxEmbedder.load(args.model, intra_op_threads=args.threads))),
        ("int8", Timed(OnnxEmbedder.load(args.model, int8=True, intra_op_threads=args.threads))),
    ]
    for name, matrix in variants(encoder_passes(args.model, args.threads)).items():
        boundary_models.append((f"static {name}", Timed(static_embedder(matrix, args.model))))

    rows: list[tuple[str, str, Runner, Timed | None]] = []
    for label, embed in boundary_models:
        for strategy in ("semantic", "sdpm"):
            rows.append((strategy, label, ours(strategy, str(args.model), embed), embed))
    rows.append(("paragraph baseline", "none", paragraph_runner, None))
    if not args.no_chonkie:
        for label, embed in (boundary_models[0], boundary_models[-1]):
            runner = chonkie_runner(embed, 0)
            if runner is not None:
                rows.append(("chonkie SemanticChunker", label, runner, embed))

    for _, embed in boundary_models[:2]:  # warm the sessions up before anything is timed
        embed([doc.text[:200] for doc in docs[:3]])
    # Speed: every row timed once per round, rounds in turn, the median kept — the machine is
    # shared, and a row timed only once takes whatever load happened to coincide with it.
    seconds: dict[int, list[float]] = {i: [] for i in range(len(rows))}
    texts: dict[int, int] = {}
    for _ in range(args.rounds):
        for i, (_, _, runner, timed) in enumerate(rows):
            elapsed, texts[i], _ = timed_throughput(runner, timed, docs, args.min_seconds)
            seconds[i].append(elapsed)
    print("| strategy | boundary model | MB/s | × fp32 | texts embedded | P | R | F1 |")
    print("|" + "---|" * 8)
    baseline: dict[str, float] = {}
    for i, (strategy, label, runner, _) in enumerate(rows):
        scores: Scores = quality(runner, seams)
        mbps = size / 1e6 / float(np.median(seconds[i]))
        if label == "fp32":
            baseline[strategy] = mbps
        times = mbps / baseline[strategy] if strategy in baseline else None
        ratio = "–" if times is None else f"{times:.2f}×" if times < 10 else f"{times:.0f}×"
        print(
            f"| {strategy} | {label} | {mbps:.4f} | {ratio} | {texts[i] or '–'} | "
            f"{scores.precision:.3f} | {scores.recall:.3f} | {scores.f1:.3f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
