"""Choosing what the static boundary model needs, on the *tune* seam set (bench/seam_sets.py),
never the report set.

    PYTHONPATH=. .venv/bin/python bench/seam_tune.py [--cache DIR] [--vectors DIR]
        [--grid NAME ...]

Every distinct text of the tune documents is embedded once per model and kept (``--vectors``,
a pickle per model, so a second run embeds nothing): the fp32 transformer as the batcher embeds
it, and the default static model *before* its normalisation (its raw mean of token rows), so a
variant may change the static vectors the way a change of the model would — remove a common
component, say — at no cost. A variant is then only our own chunking code. Printed per variant:
seam P/R/F1 of `semantic` and `sdpm` on each model, and each static F1 minus the transformer's
on the same documents with its paired 95 % bootstrap interval (bench/seam_scores.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import pickle
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.seam_blocks import DEFAULT_CACHE
from bench.seam_scores import paired_difference, summarise
from bench.seam_sets import seam_set
from bench.seams import Scores, score, seam_split
from worker.chunking import registry
from worker.inference.batcher import embed_batch
from worker.models.loading import load_backend
from worker.models.reference import ModelRef, describe, find
from worker.models.static import StaticEmbedder
from worker.pipeline import chunk_document_sync

Transform = Callable[[NDArray[np.float64]], NDArray[np.float64]]
Embed = Callable[[Sequence[str]], NDArray[np.float32]]


def cached(embed: Embed, store: dict[str, NDArray[np.float32]], dim: int) -> Embed:
    def run(texts: Sequence[str]) -> NDArray[np.float32]:
        missing = list(dict.fromkeys(t for t in texts if t not in store))
        if missing:
            for text, row in zip(missing, embed(missing), strict=True):
                store[text] = row
        if not texts:
            return np.zeros((0, dim), np.float32)
        return np.stack([store[t] for t in texts])

    return run


def load_store(path: Path) -> dict[str, NDArray[np.float32]]:
    if path.is_file():
        with path.open("rb") as f:
            store: dict[str, NDArray[np.float32]] = pickle.load(f)
            return store
    return {}


def save_store(path: Path, store: dict[str, NDArray[np.float32]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        pickle.dump(store, f)


def raw_static(ref: ModelRef) -> StaticEmbedder:
    """The static model without its normalisation: each text's plain mean of token rows."""
    model = StaticEmbedder.load(ref.directory).model
    return StaticEmbedder(dataclasses.replace(model, normalize=False))


def token_rows(ref: ModelRef) -> NDArray[np.float64]:
    return StaticEmbedder.load(ref.directory).model.matrix.astype(np.float64)


def minus_mean(rows: NDArray[np.float64], scale: float = 1.0) -> Transform:
    mean = rows.mean(axis=0)
    return lambda v: v - scale * mean


def minus_axes(rows: NDArray[np.float64], k: int, centred: bool) -> Transform:
    """Remove the projection on the ``k`` leading singular vectors of the token rows."""
    data = rows - rows.mean(axis=0) if centred else rows
    _, _, vt = np.linalg.svd(data[:: max(1, len(data) // 20000)], full_matrices=False)
    axes = vt[:k]
    mean = rows.mean(axis=0) if centred else np.zeros(rows.shape[1])
    return lambda v: (v - mean) - ((v - mean) @ axes.T) @ axes


def identity(v: NDArray[np.float64]) -> NDArray[np.float64]:
    return v


def transformed(store: dict[str, NDArray[np.float32]], transform: Transform) -> Embed:
    def run(texts: Sequence[str]) -> NDArray[np.float32]:
        if not texts:
            return np.zeros((0, next(iter(store.values())).shape[0]), np.float32)
        raw = np.stack([store[t] for t in texts]).astype(np.float64)
        out = transform(raw)
        out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-32
        return out.astype(np.float32)

    return run


def scores_of(
    strategy: str, params: dict[str, Any], boundary: ModelRef, retrieval: ModelRef, embed: Embed,
    docs: Sequence[Any],
) -> list[Scores]:  # fmt: skip
    context = registry.BuildContext(boundary=boundary, retrieval=retrieval)
    built = registry.build(strategy, params, context)
    found = []
    for doc in docs:
        chunks = chunk_document_sync(built, doc.text, "text/plain", embed)
        found.append(score(doc.text, doc.seams, [c.start_index for c in chunks]))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--vectors", type=Path, default=Path("/tmp/seam_tune_vectors"))
    parser.add_argument("--grid", nargs="+", default=["threshold"])
    parser.add_argument(
        "--stdlib", action="store_true", help="bench/seams.py's tune split instead (a second check)"
    )
    args = parser.parse_args()

    docs: Sequence[Any] = seam_split("tune") if args.stdlib else seam_set("tune", cache=args.cache)
    transformer = find("retrieval", None)
    static_ref = find("boundary", None)
    fp32_ref = describe(transformer.directory, "boundary")
    stores = {name: load_store(args.vectors / f"{name}.pkl") for name in ("fp32", "static")}
    fp32_backend = load_backend(fp32_ref)
    static_backend = raw_static(static_ref)
    fp32_embed = cached(lambda t: embed_batch(fp32_backend, t), stores["fp32"], 384)
    static_fill = cached(static_backend.embed, stores["static"], static_backend.dimension)

    baseline: dict[str, list[Scores]] = {}
    shipped: dict[str, list[Scores]] = {}  # the static model at the defaults
    for strategy in ("semantic", "sdpm"):
        baseline[strategy] = scores_of(strategy, {}, fp32_ref, transformer, fp32_embed, docs)
        # fills the static store with the same plans' texts
        shipped[strategy] = scores_of(strategy, {}, static_ref, transformer, static_fill, docs)
    for name, store in stores.items():
        save_store(args.vectors / f"{name}.pkl", store)
    seams = sum(len(d.seams) for d in docs)
    print(f"tune set: {len(docs)} documents, {seams} seams")
    print(
        "| variant | semantic P/R/F1 | − fp32 (95 % CI) | − static default | "
        "sdpm P/R/F1 | − fp32 (95 % CI) | − static default |"
    )
    print("|---|---|---|---|---|---|---|")
    for strategy in ("semantic", "sdpm"):
        s = summarise(baseline[strategy])
        print(f"| fp32 {strategy} | {s.precision:.3f}/{s.recall:.3f}/**{s.f1:.3f}** |||||")

    rows = token_rows(static_ref)
    grids: dict[str, list[tuple[str, Transform, dict[str, Any]]]] = {
        "threshold": [
            (f"threshold={t}", identity, {"threshold": t})
            for t in (1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0)
        ],
        "common": [
            ("raw", identity, {}),
            ("− mean row", minus_mean(rows), {}),
            ("− 1 axis (uncentred)", minus_axes(rows, 1, centred=False), {}),
            ("− mean, − 1 axis (centred)", minus_axes(rows, 1, centred=True), {}),
            ("− mean, − 2 axes (centred)", minus_axes(rows, 2, centred=True), {}),
        ],
        "combined": [
            (f"threshold={t}{label}", transform, {"threshold": t})
            for label, transform in (
                ("", identity),
                (", − 1 axis (uncentred)", minus_axes(rows, 1, centred=False)),
            )
            for t in (1.75, 2.0, 2.25)
        ],
        # The transformer at other thresholds: is a static optimum the model's own or anyone's?
        "fp32": [
            (f"fp32 threshold={t}", identity, {"threshold": t}) for t in (1.25, 2.0, 2.5, 3.0, 3.5)
        ],
        "window": [
            (
                f"threshold={t}, similarity_window={w}",
                identity,
                {"threshold": t, "similarity_window": w},
            )
            for t in (2.0, 2.5)
            for w in (2, 4, 5)
        ],
        "axis": [
            (
                f"threshold={t}, − 1 axis (uncentred)",
                minus_axes(rows, 1, centred=False),
                {"threshold": t},
            )
            for t in (1.25, 1.5)
        ],
        "axes": [
            (
                f"threshold=2.0, − {k} axes (uncentred)",
                minus_axes(rows, k, centred=False),
                {"threshold": 2.0},
            )
            for k in (2, 3)
        ],
        "high": [
            (f"threshold={t}{label}", transform, {"threshold": t})
            for label, transform in (
                ("", identity),
                (", − 1 axis (uncentred)", minus_axes(rows, 1, centred=False)),
            )
            for t in (2.5, 3.0)
        ],
    }
    for grid in args.grid:
        for label, transform, params in grids[grid]:
            model = "fp32" if grid == "fp32" else "static"
            embed = transformed(stores[model], transform)
            ref = fp32_ref if model == "fp32" else static_ref
            cells = []
            for strategy in ("semantic", "sdpm"):
                found = scores_of(strategy, params, ref, transformer, embed, docs)
                s = summarise(found)
                d, low, high = paired_difference(found, baseline[strategy])
                cells.append(f"{s.precision:.3f}/{s.recall:.3f}/**{s.f1:.3f}**")
                cells.append(f"{d:+.3f} ({low:+.3f}…{high:+.3f})")
                d, low, high = paired_difference(found, shipped[strategy])
                cells.append(f"{d:+.3f} ({low:+.3f}…{high:+.3f})")
            print(f"| {label} | {' | '.join(cells)} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
