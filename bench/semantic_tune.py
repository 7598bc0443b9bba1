"""Choosing the first pass's constants and defaults on the *tune* seam set (never the held-out one).

    PYTHONPATH=. .venv/bin/python bench/semantic_tune.py [--split tune] [--grid NAME]

Every variant chunks bench/seams.py's ``tune`` documents with `semantic` and `sdpm` on the
static boundary model and the fp32 transformer (vectors cached per text, so a variant costs
only our own code), and prints seam P/R/F1 per model and strategy, and the mean F1. A variant
sets module constants of :mod:`worker.chunking.semantic.first_pass` (``REACH``,
``SENTENCE_BAR``, ``ITEM_BAR``, ``DEPTH_UNIT``) and strategy parameters (``threshold``,
``similarity_window``, ``min_chunk_size``...). The chosen values are the defaults;
docs/semantic.md has the table.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.seams import SPLITS, Scores, score, seam_split
from worker.chunking import registry
from worker.chunking.semantic import first_pass
from worker.inference.batcher import embed_batch
from worker.models.loading import load_backend
from worker.models.reference import describe, find
from worker.pipeline import chunk_document_sync

GRIDS: dict[str, list[dict[str, Any]]] = {
    "threshold": [
        {"threshold": t, "SENTENCE_BAR": b}
        for t, b in itertools.product([1.0, 1.25, 1.5, 1.75, 2.0, 2.5], [1.5, 2.0, 3.0])
    ],
    "reach": [
        {"REACH": r, "similarity_window": w}
        for r, w in itertools.product([1, 2, 3, 4], [1, 2, 3, 4])
    ],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=SPLITS, default="tune")
    parser.add_argument("--grid", choices=sorted(GRIDS), default="threshold")
    parser.add_argument("--set", action="append", default=[], help="NAME=VALUE for every row")
    args = parser.parse_args()
    if args.split != "tune":
        print("note: tuning on a set that gets reported", file=sys.stderr)
    fixed: dict[str, Any] = {}
    for item in args.set:
        name, _, value = item.partition("=")
        fixed[name] = float(value) if "." in value else int(value)

    docs = seam_split(args.split)
    transformer = find("retrieval", None)
    refs = {"static": find("boundary", None), "fp32": describe(transformer.directory, "boundary")}
    embeds = {}
    for name, ref in refs.items():
        backend = load_backend(ref)
        cache: dict[str, Any] = {}

        def embed(texts: Any, backend: Any = backend, cache: dict[str, Any] = cache) -> Any:
            missing = list(dict.fromkeys(t for t in texts if t not in cache))
            if missing:
                for text, row in zip(missing, embed_batch(backend, missing), strict=True):
                    cache[text] = row
            return (
                np.stack([cache[t] for t in texts])
                if texts
                else np.zeros((0, backend.dimension), np.float32)
            )

        embeds[name] = embed
    seams = sum(len(d.seams) for d in docs)
    print(f"split {args.split}: {len(docs)} documents, {seams} seams; fixed {fixed}")
    print("| variant | static semantic | static sdpm | fp32 semantic | fp32 sdpm | mean F1 |")
    print("|---|---|---|---|---|---|")
    constants = {"REACH", "SENTENCE_BAR", "ITEM_BAR", "DEPTH_UNIT"}
    saved = {name: getattr(first_pass, name) for name in constants}
    for variant in GRIDS[args.grid]:
        setting = {**fixed, **variant}
        for name in constants:
            setattr(first_pass, name, setting.get(name, saved[name]))
        params = {k: v for k, v in setting.items() if k not in constants}
        cells, f1s = [], []
        for model in ("static", "fp32"):
            for strategy in ("semantic", "sdpm"):
                context = registry.BuildContext(boundary=refs[model], retrieval=transformer)
                built = registry.build(strategy, params, context)
                total = Scores(0, 0, 0)
                for doc in docs:
                    chunks = chunk_document_sync(built, doc.text, "text/plain", embeds[model])
                    total = total + score(doc.text, doc.seams, [c.start_index for c in chunks])
                cells.append(f"{total.precision:.2f}/{total.recall:.2f}/**{total.f1:.3f}**")
                f1s.append(total.f1)
        label = ", ".join(f"{k}={v}" for k, v in variant.items())
        print(f"| {label} | {' | '.join(cells)} | {np.mean(f1s):.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
